"""Every ``graphtool ...`` line of a code block in README.md and docs/*.md runs as pasted from the
repository root: it parses against the real CLI (nothing runs), each script it names exists, and a few
cheap ones run for real. A usage synopsis (``graphtool trace MODEL --ddp [--world-size N]``) is not a
command: only its command name is checked."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: docs whose commands run in the user's repository beside the graphtool.yaml they show (docs/ci.md)
BESIDE_A_CONFIG = {"ci.md"}
#: ``LLAMA_SIZE=7b graphtool memory ...``: the environment the line sets, then the command
_LINE = re.compile(r"^((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)graphtool\s+(.*)$")


def doc_commands() -> list[tuple[str, int, dict[str, str], list[str]]]:
    """``(file, line, env, argv)`` for every ``graphtool`` line in a fenced code block, comments cut."""
    found = []
    for doc in DOCS:
        fenced = False
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = _LINE.match(line.strip()) if fenced else None
            if m:
                env = dict(pair.split("=", 1) for pair in m.group(1).split())
                found.append((doc.name, number, env, shlex.split(m.group(2), comments=True)))
    return found


COMMANDS = doc_commands()


def _synopsis(argv: list[str]) -> bool:
    return any(a.isupper() or a.startswith("[") for a in argv[1:])


def parse(argv: list[str]):
    """The subcommand's click context for ``graphtool ARGV``, as the CLI would parse it, without running it."""
    import typer

    from graphtool.cli.main import app
    from graphtool.cli.memory import bare_budgets

    root = typer.main.get_command(app)
    ctx = root.make_context("graphtool", bare_budgets(list(argv)))  # as the CLI's run() rewrites a bare --budgets
    name, cmd, rest = root.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
    return cmd.make_context(name, rest, parent=ctx)


def named_scripts(sub) -> list[str]:
    """The scripts a parsed command reads: MODEL(s) and ``--run`` (after ``--run``, MODELs are its arguments)."""
    p = sub.params
    if p.get("run"):
        return [p["run"]]
    models = p.get("models") or ([p["model"]] if p.get("model") else [])
    return [m.split(":")[0] for m in models]


def test_the_docs_have_commands():
    assert len(COMMANDS) > 20 and {argv[0] for *_, argv in COMMANDS} >= {"trace", "lint", "memory", "cudagraphs", "render"}


@pytest.mark.parametrize("doc, line, env, argv", COMMANDS, ids=[f"{d}:{n}" for d, n, *_ in COMMANDS])
def test_each_documented_command_parses_and_names_files_that_exist(doc, line, env, argv):
    import typer

    from graphtool.cli.main import app

    assert argv[0] in typer.main.get_command(app).commands, f"{doc}:{line}: no command {argv[0]!r}"
    if _synopsis(argv):
        return
    sub = parse(argv)  # a bad option or value raises click's UsageError here
    missing = [s for s in named_scripts(sub) if not (ROOT / s).exists()]
    assert not missing, f"{doc}:{line}: graphtool {shlex.join(argv)} names {missing}, not in the repository"
    if argv[0] == "lint" and not named_scripts(sub) and not sub.params.get("log") and doc not in BESIDE_A_CONFIG:
        from graphtool.config import find_config

        # lint never falls back to the bundled example: with no MODEL it needs the config's models
        assert find_config(ROOT) is not None or sub.params.get("config"), (
            f"{doc}:{line}: graphtool {shlex.join(argv)} has nothing to lint here (no MODEL, no graphtool.yaml)")


def test_lint_with_no_model_and_no_config_is_refused_not_run_on_the_bundled_example(cli, tmp_path, monkeypatch):
    # lint is a CI gate: with nothing to lint it says so (exit 2) rather than judge a model nobody asked for,
    # so no documented lint command goes without a MODEL unless it sits under a config (docs/ci.md)
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("lint", "--format", "html", "-o", "lint.html")
    assert rc == 2 and "nothing to lint" in err and not (tmp_path / "lint.html").exists()


def _documented(prefix: str) -> list[str]:
    """The documented command that begins with ``prefix``: the shortest, so ``trace`` is the bare one."""
    return min((argv for *_, argv in COMMANDS if f"{shlex.join(argv)} ".startswith(f"{prefix} ")), key=len)


@pytest.mark.slow
@pytest.mark.parametrize("prefix", ["trace", "lint examples/graph_breaks.py --format html",
                                    "memory tests/fixtures/memory/llama_seq.py --dynamic"])
def test_a_few_documented_commands_run_as_pasted(cli, prefix, tmp_path, monkeypatch):
    argv = _documented(prefix)
    monkeypatch.chdir(ROOT)
    argv = [str(tmp_path / a) if a.endswith(".html") else a for a in argv]  # nothing written into the clone
    rc, out, err = cli(*argv)
    assert rc == 0, err
