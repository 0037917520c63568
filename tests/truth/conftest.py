"""The model scripts under models/ are inputs, not tests: never collected (--doctest-modules imports modules)."""

collect_ignore = ["models"]
