"""Every error graphtool reports, with its exit code.

    GraphtoolError                 (exit 3 unless a subclass says otherwise)
     +-- UsageError                exit 2: bad arguments, bad config, unreadable output path
     |    +-- ConfigError          exit 2: graphtool.yaml / pyproject.toml is wrong (file, key, line)
     +-- UserScriptError           exit 2: the user's script could not be loaded or run
     |    +-- ScriptNotFound       exit 2
     |    +-- ModelNotFound        exit 2: no factory / model+example_inputs in the script
     |    +-- BadModelSpec         exit 2: the factory returned the wrong shape or types
     |    +-- UserCodeFailed       exit 2: the user's code raised (with the user's frames)
     +-- TraceFailed               exit 2: torch.compile / AOT autograd could not trace the model
     +-- UnsupportedTorch          exit 2: torch is missing, too old, or lacks an API graphtool needs
     +-- RendererMissing           exit 2: no Graphviz layout program could be found
     +-- NoCudaDevice              exit 2: a CUDA-only step was asked for on a machine without CUDA
     +-- GraphtoolBug              exit 3: graphtool failed where torch itself succeeds

Any other exception is a bug in graphtool: exit 3.

    Terminated (a KeyboardInterrupt)  SIGTERM/SIGHUP/SIGINT arrived: exit 128 + the signal's number
                                      (130 for SIGINT), after every temporary file and child process
                                      is cleaned up
    OutputFailed                      exit 2: stdout could not be written (closed, full); a reader
                                      that went away (broken pipe) exits 141, silently

Exceptions become messages in exactly one place: ``graphtool.cli.main``.
"""

from __future__ import annotations

import contextlib

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_BUG = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a writer whose reader went away


class GraphtoolError(Exception):
    """Base class. ``hint`` says what to do next; ``detail`` holds extra lines (the user's frames);
    ``full_traceback`` every frame, shown only with ``--debug``."""

    exit_code = EXIT_BUG

    def __init__(self, message: str, *, hint: str | None = None, detail: str | None = None,
                 full_traceback: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail
        self.full_traceback = full_traceback

    def with_hint(self, hint: str) -> GraphtoolError:
        """The same error with ``hint`` set (returns self, for ``raise err.with_hint(...)``)."""
        self.hint = hint
        return self


class UsageError(GraphtoolError):
    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    pass


class UserScriptError(GraphtoolError):
    exit_code = EXIT_USAGE


class ScriptNotFound(UserScriptError):
    pass


class ModelNotFound(UserScriptError):
    pass


class BadModelSpec(UserScriptError):
    pass


class UserCodeFailed(UserScriptError):
    pass


class TimedOut(GraphtoolError):
    """``--timeout`` ran out while graphtool ran the user's code (or traced it)."""

    exit_code = EXIT_USAGE


class TraceFailed(GraphtoolError):
    exit_code = EXIT_USAGE


class UnsupportedTorch(GraphtoolError):
    exit_code = EXIT_USAGE


class RendererMissing(GraphtoolError):
    exit_code = EXIT_USAGE


class NoCudaDevice(GraphtoolError):
    exit_code = EXIT_USAGE


class GraphtoolBug(GraphtoolError):
    """graphtool could not do what torch itself does (trace a model torch.compile compiles)."""

    exit_code = EXIT_BUG


class OutputFailed(GraphtoolError):
    """stdout could not be written: it is closed, the disk is full, or (``broken_pipe``) its reader went away."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, broken_pipe: bool = False, **kw):
        super().__init__(message, **kw)
        self.broken_pipe = broken_pipe
        if broken_pipe:
            self.exit_code = EXIT_BROKEN_PIPE


class Terminated(KeyboardInterrupt):
    """A signal asked graphtool to stop (SIGTERM, SIGHUP, SIGINT). A KeyboardInterrupt, so that every
    ``finally`` on the way out runs (temporary files removed, child processes killed) and user-code
    boundaries let it through as they let Ctrl-C through."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_SHIELD = {"depth": 0, "pending": None}


@contextlib.contextmanager
def stop_deferred():
    """Hold off a stopping signal for a few statements that must not be cut apart (starting a child
    process and recording it, so that it is killed on the way out): under the CLI, a SIGTERM, SIGHUP or
    SIGINT that arrives meanwhile raises its :class:`Terminated` when the block ends."""
    _SHIELD["depth"] += 1
    try:
        yield
    finally:
        _SHIELD["depth"] -= 1
        if _SHIELD["depth"] == 0 and _SHIELD["pending"] is not None:
            signum, _SHIELD["pending"] = _SHIELD["pending"], None
            raise Terminated(signum)


def defer_stop(signum: int) -> bool:
    """For a signal handler: inside :func:`stop_deferred`, note ``signum`` for the block's end and
    return True; else False (the handler raises at once)."""
    if _SHIELD["depth"] > 0:
        _SHIELD["pending"] = signum
        return True
    return False
