"""graphtool: see what torch.compile, AOT autograd and CUDA graphs will do to a model.

The package is layered in one direction: ``cli -> render -> analysis -> capture``.
Only ``capture`` touches torch internals (through ``capture.compat``); importing
``graphtool`` itself imports nothing heavy, so ``graphtool --help`` stays fast.
"""

__version__ = "0.1.0"

#: (oldest torch graphtool runs on, newest torch it is tested on). Older: exit 2; newer: runs, warns once.
SUPPORTED_TORCH = ((2, 11), (2, 15))
