"""Data parallelism, as plain values: what DDP and FSDP2 do to the compiled graphs (:mod:`.wrappers`), and which
ranks compile which graphs and why (:mod:`.ranks`)."""
