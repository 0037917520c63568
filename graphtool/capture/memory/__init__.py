"""What eager mode holds in memory: the tensors autograd saves for backward (:mod:`.saved_tensors`), live
bytes while eager code runs (:mod:`.live_bytes`), and the optimizer's state (:mod:`.optimizer_state`)."""
