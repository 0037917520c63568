"""``graphtool``'s entry point and its one error boundary.

Exit codes: 0 success; 1 findings (``--check``, a lint over budget); 2 the job could not run (bad
arguments or config, the user's script failed, stdout could not be written); 3 a bug in graphtool;
130 interrupted (Ctrl-C, or a KeyboardInterrupt from the user's code); 128 + N stopped by signal N
(143 SIGTERM, 129 SIGHUP), after cleaning up; 141 stdout's reader went away (``| head``), silently.
Nothing heavy is imported here: ``graphtool --help`` never imports torch.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import signal
import sys
import threading
import time
import traceback

import typer
from typer.core import TyperGroup

from graphtool import __version__
from graphtool.cli.options import examples as _examples
from graphtool.errors import EXIT_BROKEN_PIPE, EXIT_BUG, EXIT_INTERRUPTED, EXIT_USAGE, GraphtoolError, OutputFailed, Terminated, defer_stop


class _RootGroup(TyperGroup):
    """The root command, whose list of commands shows each one's summary whole: click cuts it with
    "..." to fit a width, even in a pipe, where nothing has a width to fit."""

    def format_commands(self, ctx, formatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))  # the summary, wrapped, never cut
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    cls=_RootGroup,
    name="graphtool",
    help=(
        "See what torch.compile, AOT autograd and CUDA graphs will do to your model.\n\n"
    ) + _examples(
        "graphtool trace                        # the bundled example model",
        "graphtool trace model.py --format json",
        "graphtool mutations model.py --check",
        "graphtool cudagraphs model.py --backend cudagraphs",
        "graphtool report model.py -o report.html   # everything, one HTML page",
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from graphtool import SUPPORTED_TORCH

        lo, hi = SUPPORTED_TORCH
        typer.echo(f"graphtool {__version__} (supports torch {lo[0]}.{lo[1]} and newer; tested with {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks and torch's own logs (or set GRAPHTOOL_DEBUG=1)."),
) -> None:
    """graphtool: trace, analyse and lint torch.compile graphs."""


def _register() -> None:
    from graphtool.cli import bench, compile, cudagraphs, devices, diff, lint, log, memory, mutations, render, report, shapes, trace

    for command in (trace, mutations, devices, cudagraphs, render, bench, lint, memory, report, shapes, log, diff, compile):
        command.register(app)  # in the order --help lists them


_register()


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("GRAPHTOOL_DEBUG") == "1"


def report_error(err: GraphtoolError, debug: bool) -> int:
    """Print an error the user can act on; the one place exceptions become messages."""
    width = _terminal_width(sys.stderr)
    lines = [_wrapped(f"graphtool: error: {err.message}", width, "    ")]
    if err.detail:
        lines.append(err.detail.rstrip())
    if err.hint:
        lines.append(_wrapped(f"hint: {err.hint}", width, "      "))
    if debug and err.full_traceback:
        lines.append(err.full_traceback)
    _say("\n".join(lines))
    return err.exit_code


def _terminal_width(stream) -> int:
    """The columns of the terminal ``stream`` writes to; 0 when it is not one (a pipe, a file, a CI log)."""
    try:
        if not stream.isatty():
            return 0
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0


def _wrapped(text: str, width: int, indent: str) -> str:
    """``text`` broken between words to ``width`` columns, continuation lines indented, for a
    terminal (which would otherwise cut a word at its edge); a path or a word longer than a line
    stays whole. ``width`` 0: one line, as a pipe or a log keeps it."""
    if width <= 0 or all(len(ln) <= width for ln in text.splitlines()):
        return text
    import textwrap

    return "\n".join("\n".join(textwrap.wrap(ln, width, subsequent_indent=indent, break_long_words=False,
                                             break_on_hyphens=False)) or ln for ln in text.splitlines())


def _say(text: str) -> None:
    """A line on stderr; a stderr that cannot be written (closed, gone) is not a second error."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


class _Stdout:
    """stdout as graphtool writes it: a failure to write (a closed stdout, a full disk, a reader that
    went away) becomes :class:`OutputFailed`, not an OSError traceback; after one, writes are dropped.

    Only the thread that runs graphtool writes the document: ``sys.stdout`` is one object for every
    thread, so a thread the user's script started that prints (or writes to ``sys.stdout.buffer``,
    or to ``sys.stdout.fileno()``) while graphtool works is sent to stderr instead."""

    def __init__(self, stream):
        self._stream = stream
        self._owner = threading.get_ident()
        self.failed: OutputFailed | None = None

    def _other_thread(self) -> bool:
        return threading.get_ident() != self._owner

    def write(self, text):
        if self._other_thread():
            return sys.stderr.write(text)
        if self.failed is not None:
            return len(text)
        if self._stream is None:
            raise self._fail(None)
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise self._fail(exc) from None

    def flush(self) -> None:
        if self._other_thread():
            return sys.stderr.flush()
        if self.failed is not None or self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._fail(exc) from None

    def isatty(self) -> bool:
        if self._other_thread():
            return sys.stderr.isatty()
        return bool(self._stream is not None and self._stream.isatty())

    def __getattr__(self, name):
        if self._other_thread():
            return getattr(sys.stderr, name)
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)

    def _fail(self, exc: OSError | None) -> OutputFailed:
        if exc is None:
            err = OutputFailed("cannot write the output: stdout is closed", hint="run graphtool with stdout open, or write the report to a file")
        elif exc.errno == errno.EPIPE:
            err = OutputFailed("stdout was closed by its reader (broken pipe)", broken_pipe=True)
        else:
            err = OutputFailed(f"cannot write the output to stdout: {exc.strerror or exc}")
        self.failed = err
        return err


class _Signals:
    """SIGTERM, SIGHUP and SIGINT become :class:`Terminated` (a KeyboardInterrupt) in the main thread,
    so every ``finally`` on the way out runs: temporary files are removed, child processes killed.
    After the first, further signals are ignored until graphtool has cleaned up."""

    NAMES = ("SIGTERM", "SIGHUP", "SIGINT")

    def __init__(self):
        self.received: int | None = None
        self._old: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for name in self.NAMES:
            num = getattr(signal, name, None)
            if num is None:
                continue
            try:
                old = signal.getsignal(num)
                if old == signal.SIG_IGN and num != signal.SIGINT:  # nohup: stay deaf to it
                    continue
                self._old[num] = old
                signal.signal(num, self._handle)
            except (OSError, ValueError):
                pass
        return self

    def __exit__(self, *exc) -> None:
        for num, old in self._old.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(num, old)

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            return  # already stopping: let the cleanup finish
        self.received = signum
        if defer_stop(signum):  # in a few statements that must not be cut apart: raised at their end
            return
        raise Terminated(signum)


def _stopped(signals: _Signals) -> int:
    """The message and exit code for Ctrl-C, a KeyboardInterrupt the user's code raised, or a signal."""
    signum = signals.received
    if signum is None or signum == signal.SIGINT:
        _say("graphtool: interrupted")
        return EXIT_INTERRUPTED
    _say(f"graphtool: terminated by {signal.Signals(signum).name}")
    return 128 + signum


def run(argv: list[str] | None = None) -> int:
    """Run graphtool with ``argv`` (default: the process's own arguments) and return the exit code.

    As the program itself (``argv`` None), graphtool also exits when its work is done even if the
    user's code left a non-daemon thread running (see :func:`_leave_if_threads_linger`)."""
    from graphtool.capture.stack_room import call_with_stack_room

    code = call_with_stack_room(_run, argv)
    if argv is None:
        _leave_if_threads_linger(code)
    return code


def _run(argv: list[str] | None) -> int:
    from graphtool.cli.options import DEBUG

    as_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    from graphtool.cli.memory import bare_budgets

    argv = bare_budgets(argv)
    debug = _debug_requested(argv)
    token = DEBUG.set(debug)
    own_fd = _DocumentFd() if as_program else contextlib.nullcontext()
    own_fd.__enter__()
    saved_stdout = sys.stdout
    out = sys.stdout = _Stdout(saved_stdout)
    signals = _Signals()
    from graphtool.capture.user.boundary import HardExit, exit_error, os_exit_reported, user_frames

    try:
        with signals, os_exit_reported():
            result = app(args=argv, prog_name="graphtool", standalone_mode=False)
            out.flush()
        if result == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt (and so a signal) into 130
            return _stopped(signals)
    except OutputFailed as err:
        return _output_failed(err, debug, as_program)
    except GraphtoolError as err:
        return report_error(err, debug)
    except (typer.Exit, typer.Abort) as exc:
        if isinstance(exc, typer.Abort):
            return _stopped(signals)
        return int(getattr(exc, "exit_code", 0) or 0)
    except KeyboardInterrupt:
        return _stopped(signals)
    except (SystemExit, HardExit) as exc:
        if isinstance(exc, SystemExit) and exc.__context__ is None and _raised_by_cli_framework(exc):
            return int(exc.code or 0)  # shell completion (--show-completion, a TAB press) ends this way, all well
        if isinstance(exc, SystemExit) and not user_frames(exc) and exc.__context__ is not None:
            if _broken_pipe(exc.__context__):  # stderr's reader went away (`2>&1 | head`): typer exits over it
                return EXIT_BROKEN_PIPE
            return _bug(exc.__context__)  # the CLI framework exiting over an error of graphtool's own
        # the user's code ended the process while graphtool ran it (in the model's forward, say)
        return report_error(exit_error(exc, None), debug)
    except Exception as exc:
        if _broken_pipe(exc):
            return EXIT_BROKEN_PIPE
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # a usage error from typer/click
            exc.show()
            return EXIT_USAGE
        return _bug(exc)
    finally:
        DEBUG.reset(token)
        with contextlib.suppress(OutputFailed):
            out.flush()  # what an error left half-written
        if sys.stdout is out:
            sys.stdout = saved_stdout
        own_fd.__exit__(None, None, None)
        if as_program and out.failed is not None and out.failed.broken_pipe:
            _silence_stdout()
    return int(result or 0)


class _DocumentFd:
    """stdout carries graphtool's document and nothing else, however the user's code writes.

    ``print`` is redirected where graphtool runs user code, but a script can also write to file
    descriptor 1 itself (``os.write(1, ...)``, C extensions, child processes that inherit it). While
    graphtool runs, descriptor 1 points at stderr, and graphtool's own output goes to a duplicate of
    the original stdout (the same terminal, pipe or file). A process the script forks (``os.fork``,
    multiprocessing's fork) inherits that duplicate: in the child it is pointed at stderr too, so
    neither the child nor a graphtool run the child goes on with can write into the document."""

    #: the one in use: what a forked child must point at stderr (``os.register_at_fork`` cannot be undone)
    active: _DocumentFd | None = None
    _fork_hook = False

    @classmethod
    def _in_forked_child(cls) -> None:
        doc = cls.active
        if doc is not None and doc.stream is not None:
            with contextlib.suppress(OSError):
                os.dup2(doc.fd, doc.saved)  # descriptor 1 is stderr already

    def __enter__(self):
        self.stream = None
        try:
            old = sys.stdout
            old.flush()
            fd = old.fileno()
            saved = os.dup(fd)
        except (OSError, ValueError, AttributeError):  # stdout closed or not a file: nothing to keep apart
            return self
        try:
            os.dup2(sys.stderr.fileno(), fd)
        except (OSError, ValueError, AttributeError):  # no stderr to send the user's writes to
            os.close(saved)
            return self
        self.old, self.fd, self.saved = old, fd, saved
        self.stream = open(saved, "w", encoding=old.encoding, errors=old.errors, closefd=False,
                           buffering=1 if old.line_buffering else -1)
        sys.stdout = self.stream
        _DocumentFd.active = self
        if not _DocumentFd._fork_hook and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_DocumentFd._in_forked_child)
            _DocumentFd._fork_hook = True
        return self

    def __exit__(self, *exc) -> None:
        if self.stream is None:
            return
        if _DocumentFd.active is self:
            _DocumentFd.active = None
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()
        if sys.stdout is self.stream:
            sys.stdout = self.old
        with contextlib.suppress(OSError, ValueError):
            self.stream.close()
        # descriptor 1 stays on stderr: the document is whole, and what still runs (a daemon thread
        # the script started, its atexit hooks, a child it forked) must not write after it
        with contextlib.suppress(OSError):
            os.close(self.saved)
        self.stream = None


def _raised_by_cli_framework(exc: BaseException) -> bool:
    """Whether typer or click itself raised ``exc`` (its innermost frame is in their package)."""
    import click

    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    where = os.path.abspath(tb.tb_frame.f_code.co_filename)
    return any(where.startswith(os.path.dirname(os.path.abspath(m.__file__)) + os.sep) for m in (typer, click))


def _broken_pipe(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.EPIPE


def _bug(exc: BaseException) -> int:
    _say("graphtool: internal error: this is a bug in graphtool, please report it with this output:\n"
         + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip())
    return EXIT_BUG


def _output_failed(err: OutputFailed, debug: bool, as_program: bool) -> int:
    if err.broken_pipe:
        return err.exit_code  # silent, as `cat file | head` is
    return report_error(err, debug)


def _silence_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for a closed pipe must not fail again (with
    an "Exception ignored" traceback) when the interpreter exits."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
        os.close(devnull)


def _leave_if_threads_linger(code: int, wait: float = 1.0) -> None:
    """Exit now with ``code`` when the user's code left a non-daemon thread running.

    Python would wait for that thread forever after graphtool's report. graphtool's own work is done
    and cleaned up by then (temporary files, child processes), so after ``wait`` seconds it flushes
    stdout and stderr, runs the ``atexit`` hooks as a normal exit would, and ends the process."""
    deadline = time.monotonic() + wait
    for t in _lingering_threads():
        t.join(max(0.0, deadline - time.monotonic()))
    if not _lingering_threads():
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _lingering_threads() -> list[threading.Thread]:
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def main() -> None:
    """Console-script entry point."""
    raise SystemExit(run())
