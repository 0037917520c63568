"""What a real run's ``TORCH_TRACE`` logs say, every rank, as plain values: graphs compiled, graph breaks by site,
recompiles and the recompile limit, compile time by frame and phase, CUDA-graph skips, and where ranks disagree.

:mod:`.build` reads the records (:mod:`graphtool.capture.torch_trace`) into the facts of :mod:`.facts`;
:mod:`.desync` compares the ranks; :mod:`.graph_code` reads an AOT graph from the code torch logged, to draw it.
"""

from graphtool.analysis.run_log.build import read_logs, read_run_log, wants
from graphtool.analysis.run_log.facts import RunLog

__all__ = ["RunLog", "read_logs", "read_run_log", "wants"]
