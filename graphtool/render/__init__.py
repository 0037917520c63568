"""Presentation: turns analysis dataclasses into text, tables and files. Computes nothing."""
