"""graphtool's pytest plugin (registered through the ``pytest11`` entry point): inert unless used.

Loading it costs nothing (no torch, nothing traced): it declares a marker, two options and a fixture.

The ``graphtool`` fixture checks the model a test builds, with the marker's settings::

    import pytest, torch

    @pytest.mark.graphtool(max_graph_breaks=0, cudagraphs=True)
    def test_my_model_compiles_whole(graphtool):
        model = MyModel()
        graphtool.check(model, torch.randn(8, 16))

The marker finds the model through that call: a test marked ``graphtool`` must call
``graphtool.check(model, *args, **kwargs)`` (a marked test that never does fails, so a check cannot
silently stop checking). ``check`` runs the model under torch.compile in this process, counts its
graph breaks, recompiles and skipped frames as ``graphtool lint`` does, and fails the test with the
CLI's diagnostic (file:line, source line, reason, torch's link) when the model is over budget.
Marker arguments: ``max_graph_breaks`` (default 0; None: no budget), ``max_recompiles``,
``max_skipped_frames``, ``allowed_breaks`` (reason regexes), ``cudagraphs`` (True: also assert that CUDA
graphs would be applied, judged on a meta stand-in), ``backend`` (for that verdict). Without the marker
``check`` uses these defaults. The fixture also carries :mod:`graphtool.testing`'s assertions
(``graphtool.assert_no_input_mutations(...)``).

``--graphtool-baseline FILE`` ratchets graph breaks per test in ``graphtool lint --baseline``'s
format (each entry's ``model`` is the test's node id):

- the file does not exist: every check's breaks are recorded (a marker's ``max_graph_breaks`` still
  applies; without one, any count is accepted) and the file is written;
- it exists: a break not in it fails the test (the budget then counts new breaks only, as lint's
  does); when breaks were fixed the file is rewritten without them, so the count only goes down;
- ``--graphtool-update-baseline`` rewrites it with whatever the checks found.

The file is written whole (temporary file, then rename) and only when every ``graphtool``-marked test
collected in the run performed its check (a ``-k`` selection, ``-x`` stopping early, a test that
failed before its check: nothing written) and no check was refused. Entries of tests this run did not
collect (another folder of the suite) are kept, and entries follow the tests' collection order, so the
file does not depend on the order the tests ran in. The terminal summary says what was written and
where, or why nothing was.

Under pytest-xdist (``-n 2``) each worker has its own session: a worker writes nothing, it hands what its
checks found (plain entries, the marked tests it collected) to the controller through xdist's
``workeroutput``, and the controller, once every worker is down (``pytest_testnodedown``), writes the one
file as a single process would: ``-n 0`` and ``-n 2`` write the same bytes. A worker that crashed hands
nothing over, and then nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import pytest

MARKER = "graphtool"
_OPTIONS = ("max_graph_breaks", "max_recompiles", "max_skipped_frames", "allowed_breaks", "cudagraphs", "backend")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("graphtool", "graphtool: graph breaks and CUDA graphs of the models tests build")
    group.addoption("--graphtool-baseline", metavar="FILE", default=None,
                    help="record (when FILE is missing) and ratchet per-test graph breaks in graphtool lint's baseline format")
    group.addoption("--graphtool-update-baseline", action="store_true", default=False,
                    help="rewrite --graphtool-baseline FILE with the breaks found (when every graphtool test ran)")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "graphtool(max_graph_breaks=0, cudagraphs=False, ...): the model the test checks with the graphtool fixture "
        "must compile within these budgets",
    )
    path = config.getoption("--graphtool-baseline")
    if config.getoption("--graphtool-update-baseline") and path is None:
        raise pytest.UsageError("--graphtool-update-baseline needs --graphtool-baseline FILE")
    if path is not None:
        config.stash[_BASELINE] = _Baseline(Path(os.path.abspath(path)), config.getoption("--graphtool-update-baseline"),
                                            Path(str(config.rootpath)))


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect: the marked tests of the whole collection
def pytest_collection_modifyitems(session, config, items) -> None:
    state = config.stash.get(_BASELINE, None)
    if state is not None:
        state.expected = {item.nodeid for item in items if item.get_closest_marker(MARKER) is not None}
        state.order = [item.nodeid for item in items]


def pytest_sessionfinish(session, exitstatus) -> None:
    state = session.config.stash.get(_BASELINE, None)
    if state is None:
        return
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller writes, from every worker's share
        workeroutput[_HANDOVER] = state.handover(interrupted=interrupted)
        return
    state.said = state.finish(interrupted=interrupted)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent (and never called) without it
def pytest_testnodedown(node, error) -> None:
    state = node.config.stash.get(_BASELINE, None)
    if state is not None:
        state.receive(getattr(node, "workeroutput", {}).get(_HANDOVER), crashed=error is not None)


def pytest_terminal_summary(terminalreporter) -> None:
    # a baseline written (or not) in silence reads as "nothing happened": say which, and where
    state = terminalreporter.config.stash.get(_BASELINE, None)
    if state is not None and state.said:
        terminalreporter.write_sep("-", "graphtool baseline")
        terminalreporter.write_line(state.said)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    checker = item.stash.get(_CHECKER, None)
    if item.get_closest_marker(MARKER) is not None and (checker is None or not checker.checked):
        pytest.fail(f"{item.nodeid} is marked @pytest.mark.graphtool but never called graphtool.check(model, *args): "
                    "the marker checks the model the test hands to the graphtool fixture", pytrace=False)
    return result


@pytest.fixture
def graphtool(request) -> Checker:
    """Checks the model a test builds: ``graphtool.check(model, *args, **kwargs)``; see :mod:`graphtool.pytest_plugin`."""
    marker = request.node.get_closest_marker(MARKER)
    options = dict(marker.kwargs) if marker is not None else {}
    unknown = set(options) - set(_OPTIONS)
    if unknown or (marker is not None and marker.args):
        raise pytest.UsageError(f"@pytest.mark.graphtool takes keyword arguments {', '.join(_OPTIONS)}; "
                                f"got {', '.join(sorted(unknown)) or 'positional arguments'}")
    checker = Checker(request.node.nodeid, options, request.config.stash.get(_BASELINE, None), Path(str(request.config.rootpath)))
    request.node.stash[_CHECKER] = checker
    return checker


class Checker:
    """The ``graphtool`` fixture: :meth:`check` plus :mod:`graphtool.testing`'s assertions as attributes."""

    def __init__(self, nodeid: str, options: dict, baseline: Optional[_Baseline], root: Path):
        self.nodeid = nodeid
        self.options = options
        self.baseline = baseline
        self.name = str(root / nodeid)  # the baseline's "model": the test, as an absolute "path"
        self.checked = False
        self.results: list = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("assert_"):
            from graphtool import testing

            return getattr(testing, name)
        raise AttributeError(name)

    def check(self, model, *args, **kwargs):
        """Lint the model on ``args`` against the marker's budgets (and the baseline); with
        ``cudagraphs=True`` also assert that CUDA graphs would be applied. Returns the lint result."""
        __tracebackhide__ = True
        from graphtool import testing

        opts = self.options
        budget = opts.get("max_graph_breaks", 0)
        baseline = self.baseline.data if self.baseline is not None and not self.baseline.recording else None
        if self.baseline is not None and "max_graph_breaks" not in opts:
            budget = None  # a baseline alone: any break not in it fails, as `graphtool lint --baseline` does; recording takes all
        result = testing._ask("lint", model, *args, max_graph_breaks=budget, max_recompiles=opts.get("max_recompiles"),
                          max_skipped_frames=opts.get("max_skipped_frames"), allowed_breaks=tuple(opts.get("allowed_breaks", ())),
                          baseline=baseline, name=self.name, **kwargs)
        self.results.append(result)
        self.checked = True
        if self.baseline is not None:
            self.baseline.record(self.nodeid, result)
        if not result.passed:
            raise AssertionError(f"{self.nodeid}: {result.summary()}:\n{result.diagnostics().rstrip()}")
        if opts.get("cudagraphs"):
            testing.assert_cudagraphable(model, *args, backend=opts.get("backend", "inductor"), **kwargs)
        return result


class _Baseline:
    """The ``--graphtool-baseline`` file: read once, written at the session's end when safe.

    What the checks found is kept as the file's own entries (plain values), per test: a worker of
    pytest-xdist hands them over as they are (:meth:`handover`), and the controller adds every worker's
    share to its own (:meth:`receive`) before :meth:`finish` writes, as a single process would."""

    def __init__(self, path: Path, update: bool, root: Path):
        self.path = path
        self.update = update
        self.root = root
        self.recording = not path.exists()
        self.data = None if self.recording else _read(path)
        self.expected: set[str] = set()
        self.order: list[str] = []  # every collected test, in collection order: the file's order
        self.entries: dict[str, list[dict]] = {}  # nodeid -> the file's entries for its (last) check
        self.new_breaks: set[str] = set()  # nodeids whose check found a break not in the baseline
        self.stopped = False  # a worker stopped early or crashed
        self.said: str | None = None  # what :meth:`finish` did, for the terminal summary

    def record(self, nodeid: str, result) -> None:
        from graphtool.analysis.lint import LintReport
        from graphtool.commands import baseline as baselines

        (model,) = result.report.models
        self.entries[nodeid] = baselines.content(LintReport((model,), None), self.path)["breaks"]
        if any(b.new for b in model.breaks):
            self.new_breaks.add(nodeid)

    def handover(self, *, interrupted: bool) -> dict:
        """What an xdist worker sends the controller: plain values only (execnet carries nothing else)."""
        return {"expected": sorted(self.expected), "order": list(self.order), "entries": dict(self.entries),
                "new_breaks": sorted(self.new_breaks), "interrupted": interrupted}

    def receive(self, share: Optional[dict], *, crashed: bool) -> None:
        """A worker's :meth:`handover` (None: it sent none), at the controller."""
        if crashed or share is None or share.get("interrupted"):
            self.stopped = True
        if share is None:
            return
        self.expected.update(share["expected"])
        if not self.order:  # every worker collects the same tests, in the same order (xdist checks it)
            self.order = list(share["order"])
        self.entries.update(share["entries"])
        self.new_breaks.update(share["new_breaks"])

    def finish(self, *, interrupted: bool) -> str:
        """Write the file when it is safe; return what was done, or why nothing was, in one line."""
        from graphtool.analysis.lint import LintReport
        from graphtool.commands import baseline as baselines
        from graphtool.display_paths import display_path
        from graphtool.text import count

        where = display_path(str(self.path))
        missing = sorted(self.expected - set(self.entries))
        if interrupted or self.stopped:
            return f"{where} not written: the run stopped early"
        if missing:
            return (f"{where} not written: {count(len(missing), 'graphtool-marked test')} of {len(self.expected)} did not "
                    f"check (deselected with -k/-m, or failed before graphtool.check): {_some(missing)}")
        if not self.entries:
            return f"{where} not written: no test called graphtool.check"
        tests = self._ordered(self.entries)
        if self.new_breaks and not self.update:  # a new break fails its test; the baseline does not learn it unless asked
            return (f"{where} not written: new graph breaks in {_some(self._ordered(self.new_breaks))}; "
                    "--graphtool-update-baseline records them")
        breaks = [entry for nodeid in tests for entry in self.entries[nodeid]]
        fresh = {**baselines.content(LintReport((), None), self.path), "breaks": breaks}
        recorded = (f"{count(len(breaks), 'graph break')} of {count(len(tests), 'test')}")
        kept = 0
        if self.data is not None:
            ran = {os.path.relpath(str(self.root / n), self.path.parent).replace(os.sep, "/") for n in tests}
            fresh, kept = baselines.merged(self.data, fresh, ran)
            if baselines.same(fresh, self.data):
                return f"{where} unchanged: {recorded} as recorded"
        baselines.write(self.path, fresh)
        if self.data is None:
            return f"{where} written (there was none): recorded {recorded}"
        return f"{where} updated: {recorded}" + (f", {count(kept, 'entry', 'entries')} of tests not collected kept" if kept else "")

    def _ordered(self, nodeids) -> list[str]:
        """``nodeids`` in collection order (tests this session did not collect last, by name): the order of
        the tests' entries in the file, whichever worker ran which test and in what order."""
        position = {nodeid: i for i, nodeid in enumerate(self.order)}
        return sorted(nodeids, key=lambda n: (position.get(n, len(position)), n))


def _some(nodeids: list[str], shown: int = 3) -> str:
    """The first few test ids, and how many more."""
    more = len(nodeids) - shown
    return ", ".join(nodeids[:shown]) + (f" and {more} more" if more > 0 else "")


def _read(path: Path) -> dict:
    """The baseline as ``graphtool lint --baseline`` reads it; its error (the file, the line) as pytest's."""
    from graphtool.commands.baseline import read
    from graphtool.errors import UsageError

    try:
        return read(path, update="--graphtool-update-baseline")
    except UsageError as exc:
        raise pytest.UsageError(f"--graphtool-baseline {exc.message}" + (f" ({exc.hint})" if exc.hint else "")) from None


_BASELINE = pytest.StashKey[_Baseline]()
_HANDOVER = "graphtool_baseline"  # the key of a worker's share in xdist's workeroutput
_CHECKER = pytest.StashKey[Checker]()
