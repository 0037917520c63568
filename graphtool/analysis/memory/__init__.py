"""What training keeps in memory: the tensors saved for backward, eager beside compiled (:mod:`.saved`), the
step's predicted peak (:mod:`.step_peak`), one rank's bytes under DDP or FSDP2 (:mod:`.rank_memory`), and whether
it fits a device (:mod:`.fit`, :mod:`.fit_report`)."""
