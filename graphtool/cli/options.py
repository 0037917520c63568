"""Each command's flags, read from the one option table (:mod:`graphtool.commands.options`), the Sessions argv
asks, and the per-invocation ``--debug`` flag."""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from typing import Optional

import typer

from graphtool.commands.options import COMMANDS, FORMAT, LOAD
from graphtool.errors import UsageError

FORMATS = ("table", "json", "yaml")

ModelArg = typer.Argument(None, help="Model script (path.py or path.py:FACTORY). Default: the bundled example.", show_default=False)

#: the widest an example line may be: click indents help by 2 and wraps at the terminal's width (80 here)
EXAMPLE_WIDTH = 76


def examples(*lines: str) -> str:
    """A help paragraph of example commands that click prints as written: ``\\b`` stops its rewrapping,
    which at 80 columns broke an example in the middle of its comment. Keep each line within
    :data:`EXAMPLE_WIDTH`; a test checks every command's help at 80 columns.

    >>> print(examples("graphtool trace", "graphtool trace model.py"))
    \b
    Examples:
      graphtool trace
      graphtool trace model.py
    """
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


#: set once per invocation by graphtool.cli.main.run from --debug / GRAPHTOOL_DEBUG
DEBUG: ContextVar[bool] = ContextVar("graphtool_debug", default=False)


def debug_enabled() -> bool:
    return DEBUG.get()


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


def flag(option) -> typer.models.OptionInfo:
    """A table option (:class:`~graphtool.commands.options.Option`) as typer's."""
    decls = [f"{option.cli}/{option.off}" if option.off else option.cli] + ([option.short] if option.short else [])
    default = list(option.default) if isinstance(option.default, tuple) else option.default
    return typer.Option(default, *decls, help=option.help, **({"metavar": option.metavar} if option.metavar else {}))


def parameters(table_options) -> list[inspect.Parameter]:
    """Table options as the keyword parameters of a Typer command's signature."""
    return [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=flag(o), annotation=o.type or type(o.default))
            for o in table_options]


#: the table's ``--entry`` and ``--format`` as typer's, for the commands that load no model in this process (log,
#: compile and diff read files or run children, so they ask no Session)
EntryOpt = flag(next(o for o in LOAD if o.name == "entry"))
FormatOpt = flag(FORMAT)


def register(app: typer.Typer, name: str, help: str, show=None, ask=None) -> None:
    """``graphtool NAME``, its flags read from the table: MODEL, the Session's flags it takes, then its own. Under
    the progress line, ``ask(sessions, own, view)`` (default: each Session asked ``NAME``, :func:`asked` builds
    them); then ``show(answers, view)`` (default: each view, or one document, and ``--check``'s exit code)."""
    cmd = COMMANDS[name]
    params = [inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY, default=ModelArg, annotation=Optional[str])]
    params += parameters([o for o in LOAD if o.name in cmd.load] + [o for o in cmd.options if o.flag is not None])

    def command(**given):
        from graphtool.cli import console

        view = {o.name: given.pop(o.name) for o in cmd.options if o.view}
        view["argv"] = dict(given)  # the options as given (report says the command line that makes it again)
        if "format" in view:
            check_format(view["format"])
        with console.RichProgress() as progress:
            sessions = asked(name, given, progress)
            answers = ask(sessions, given, view) if ask is not None else [s.ask(name, given) for s in sessions]
        if show is not None:
            return show(answers, view)
        return console.show_models(answers, view.get("format", "table"), view.get("check", False),
                                   **({"show_all": view["show_all"]} if "show_all" in view else {}))

    command.__signature__ = inspect.Signature(params)
    command.__name__ = name
    app.command(name, short_help=cmd.summary, help=help)(command)


def asked(name: str, given: dict, progress) -> list:
    """One Session per model (MODEL, else the config's models, else the bundled example), the Session's flags of
    ``graphtool NAME`` taken out of ``given`` (which keeps the command's own). Each script's path is checked here,
    before torch is imported."""
    from graphtool.commands.session import Session, targets

    load = {o.name: given.pop(o.name) for o in LOAD if o.name in COMMANDS[name].load}
    entry = load.pop("entry", None)
    return [Session(target, entry=ent, progress=progress, debug=debug_enabled(), one_question=True, **load)
            for target, ent in targets(given.pop("model"), entry)]
