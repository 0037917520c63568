"""Loading user scripts and tracing them through dynamo and AOT autograd (the only torch-private layer).

The trace is at the top (:mod:`.tracer` and what it records: AOT's records, graph breaks, the steady state,
shape schedules; :mod:`.compat` alone names torch's private symbols); each sub-package holds one idea beside it:
:mod:`.user` (the user's code), :mod:`.standin` (the meta-device stand-in), :mod:`.distributed` (DDP, FSDP2 and
each rank, in one process), :mod:`.bench` (timings), :mod:`.memory` (what eager mode holds) and :mod:`.processes`
(lint's child processes)."""
