"""``graphtool``'s entry point and its one error boundary.

Exit codes: 0 success; 1 findings (``--check``, a lint over budget); 2 the job could not run (bad
arguments or config, the user's script failed); 3 a bug in graphtool; 130 interrupted.
Nothing heavy is imported here: ``graphtool --help`` never imports torch.
"""

from __future__ import annotations

import os
import sys
import traceback

import typer

from graphtool import __version__
from graphtool.errors import EXIT_BUG, EXIT_INTERRUPTED, EXIT_USAGE, GraphtoolError

app = typer.Typer(
    name="graphtool",
    help=(
        "See what torch.compile, AOT autograd and CUDA graphs will do to your model.\n\n"
        "Examples:\n\n"
        "  graphtool trace                      # trace the bundled example model\n\n"
        "  graphtool trace model.py --format json\n\n"
        "  graphtool mutations model.py --check\n\n"
        "  graphtool cudagraphs model.py --backend cudagraphs"
    ),
    no_args_is_help=True,
    add_completion=False,
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
    from graphtool.cli import bench, cudagraphs, devices, lint, memory, mutations, render, trace

    trace.register(app)
    mutations.register(app)
    devices.register(app)
    cudagraphs.register(app)
    render.register(app)
    bench.register(app)
    lint.register(app)
    memory.register(app)


_register()


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("GRAPHTOOL_DEBUG") == "1"


def report_error(err: GraphtoolError, debug: bool) -> int:
    """Print an error the user can act on; the one place exceptions become messages."""
    print(f"graphtool: error: {err.message}", file=sys.stderr)
    if err.detail:
        print(err.detail.rstrip(), file=sys.stderr)
    if err.hint:
        print(f"hint: {err.hint}", file=sys.stderr)
    if debug and err.full_traceback:
        print(err.full_traceback, file=sys.stderr)
    return err.exit_code


def run(argv: list[str] | None = None) -> int:
    from graphtool.cli.options import DEBUG

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_requested(argv)
    token = DEBUG.set(debug)
    try:
        result = app(args=argv, prog_name="graphtool", standalone_mode=False)
    except GraphtoolError as err:
        return report_error(err, debug)
    except (typer.Exit, typer.Abort) as exc:
        if isinstance(exc, typer.Abort):
            print("graphtool: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return int(getattr(exc, "exit_code", 0) or 0)
    except KeyboardInterrupt:
        print("graphtool: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # a usage error from typer/click
            exc.show()
            return EXIT_USAGE
        print("graphtool: internal error: this is a bug in graphtool, please report it with this output:", file=sys.stderr)
        traceback.print_exc()
        return EXIT_BUG
    finally:
        DEBUG.reset(token)
        sys.stdout.flush()
    return int(result or 0)


def main() -> None:
    """Console-script entry point."""
    raise SystemExit(run())
