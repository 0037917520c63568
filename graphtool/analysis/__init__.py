"""Facts about captured graphs, as frozen dataclasses of plain values (no rich, no typer)."""
