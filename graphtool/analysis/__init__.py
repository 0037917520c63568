"""Facts about captured graphs, as frozen dataclasses of plain values (no rich, no typer).

Each sub-package holds one idea: :mod:`.cudagraphs` (would CUDA graphs apply, and why not, also under DDP and
FSDP2), :mod:`.memory` (what the step keeps and its peak, per rank, and whether it fits) and :mod:`.distributed`
(what DDP and FSDP2 do to the graphs, and which ranks compile which graphs)."""
