"""Real processes that start from an interpreter which has already imported torch.

The real-rank truth suites (``tests/truth/test_{ddp,fsdp2,rank}_truth.py``) run about 90 rank processes, and
each one used to spend 5-7 s of CPU importing torch, its distributed package, dynamo and (for the Llama
cases) transformers before it did anything the test reads: most of those suites' time on 2 cores.

:func:`run_script` runs ``python SCRIPT ARGS...`` as a child of a forkserver (``multiprocessing``'s) that
imported those modules once per test process and then forks each rank from that state. A forked rank is
still a real torch process of its own: its own process group (``setsid``), its own gloo group, its own
dynamo state, which the server never touched (it imports, and runs no model, no compile, no op, so no
OpenMP pool or thread exists to be forked); only the import work is shared. What the script sees is what
``python SCRIPT ARGS`` gives it: ``sys.argv``, ``__name__ == "__main__"``, its folder first on ``sys.path``,
the environment asked for, stdout to /dev/null and stderr to the file asked for.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import sys
import traceback

#: what every rank script imports; transformers for the Llama cases (ImportError-tolerant: the forkserver
#: skips a module it cannot import, and the rank then imports it itself)
PRELOAD = ["torch", "torch.distributed", "torch._dynamo", "torch.nn.parallel", "torch.distributed.fsdp",
           "transformers", "tests.helpers.preloaded"]

_context = None


def _forkserver():
    global _context
    if _context is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        _context = ctx
    return _context


def _main(argv: list[str], env: dict, stderr_path: str) -> None:  # in the forked child
    os.setsid()
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [os.path.dirname(os.path.abspath(argv[0]))] + extra
    sys.argv = list(argv)
    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_script(argv: list[str], env: dict, stderr_path: str):
    """Start ``python *argv`` (``argv[0]`` a script) as a forked child of the preloaded server; return its
    :class:`multiprocessing.Process` (``pid`` leads its own process group; ``join``, ``exitcode``)."""
    proc = _forkserver().Process(target=_main, args=(list(argv), dict(env), str(stderr_path)), daemon=False)
    proc.start()
    return proc
