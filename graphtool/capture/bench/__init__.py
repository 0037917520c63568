"""Timing a model: its modes (eager, compiled, CUDA-graph replay) checked against eager and timed
(:mod:`.modes`), and the clocks and warm-up-then-repeat loop that time them (:mod:`.timers`)."""
