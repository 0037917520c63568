"""Fixtures only; shared helpers live in tests/helpers (importable)."""

from __future__ import annotations

import re

import pytest

# model scripts for the tests to load, several broken on purpose: never collected (--doctest-modules imports modules)
collect_ignore = ["fixtures"]

# pytest's own plugin tester, for tests/plugin (pytest accepts pytest_plugins only in a top-level conftest)
pytest_plugins = ["pytester"]


@pytest.fixture
def cli(capsys):
    """Run graphtool in-process: ``rc, out, err = cli("trace", path, "--format", "json")``."""
    from graphtool.cli.main import run

    def _run(*args: str):
        rc = run([str(a) for a in args])
        captured = capsys.readouterr()
        return rc, captured.out, captured.err

    return _run



# What can differ between torch releases: the tests whose expected answer is torch's own on that torch: a real
# torch run beside graphtool's prediction (the truth suite, memory against a real compile, inductor's partition),
# recorded GPU rows, the facts of every example and fixture (capture, analyses, what torch compiles of written
# models and higher-order ops), golden graph text, the README's API examples, the compat symbols, the doctests.
# CI's second torch runs these alone (`-m versions`). What is graphtool's own code over those facts runs once, on
# the pinned torch: the commands' options, output and files (test_commands, test_report, test_load_once, the
# steady-state CLI), the pytest plugin's bookkeeping, graphtool.testing's assertions, the CLI, processes and exits,
# views of hand-built reports, the browser, the notebook, the house rules. docs/ci.md has the list.
VERSIONED = (
    "graphtool/",
    "tests/analysis/",
    "tests/capture/",
    "tests/truth/",
    "tests/gpu/",
    "tests/commands/test_memory.py",
    "tests/commands/test_memory_fit.py",
    "tests/commands/test_memory_fit_h200.py",
    "tests/commands/test_memory_memtracker.py",
    "tests/commands/test_written_models.py",
    "tests/commands/test_no_graph.py",
    "tests/commands/test_regions_judged.py",
    "tests/api/test_api.py",
    "tests/api/test_readme.py",
    "tests/render/test_render.py",
    "tests/render/test_dot_layout.py",
    "tests/render/test_module_names.py",
    "tests/render/test_cudagraphs_view.py",
)


def pytest_collection_modifyitems(config, items):
    """Mark the torch-dependent tests ``versions`` (CI's second torch runs ``-m versions``), except those
    marked ``one_torch``: under a VERSIONED path, but what they add to a sibling that runs on every torch is
    graphtool's own code (docs/ci.md lists them and why)."""
    root = config.rootpath
    for item in items:
        try:
            rel = item.path.relative_to(root).as_posix()
        except ValueError:
            continue
        if rel.startswith(VERSIONED) and not item.get_closest_marker("one_torch"):
            item.add_marker(pytest.mark.versions)


HEAVY_FIRST = ("tests/truth/",)  # real torch.compile runs and real gloo ranks: scheduled before the rest
EACH_TEST_A_UNIT = {"tests/truth/test_ddp_truth.py", "tests/truth/test_fsdp2_truth.py", "tests/truth/test_rank_truth.py"}


#: files whose tests read one per-process cache (tests/analysis/shapes_cases.predict): one xdist unit, one worker
SHARED_UNITS = {"tests/analysis/test_shapes_gpu_agreement.py": "shapes", "tests/capture/test_shapes_cpu_truth.py": "shapes"}


def _work_unit(nodeid: str) -> str:
    """The xdist work unit of a test: its file, so that the file's module fixtures and its
    ``tests.helpers`` traces are made once on one worker; the truth suite's cases go one unit per
    (model, backend), the key of its per-process caches, so its 30-odd real compiles spread; in the
    real-rank files each case (a few gloo processes) is a unit: the tests whose parameter id starts with
    the same case (``llama-2MB-ws2``, ``blocks-ws4``) share one real run of it, the others are one unit each."""
    path, _, rest = nodeid.partition("::")
    if path in SHARED_UNITS:
        return SHARED_UNITS[path]
    if path == "tests/truth/test_truth.py" and rest.endswith("]"):
        return f"{path}[{rest.rsplit('[', 1)[1]}"
    if path in EACH_TEST_A_UNIT:
        case = re.match(r"[^[]*\[(.+?-ws\d+)", rest)
        return f"{path}[{case.group(1)}]" if case else nodeid
    return path


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: no error under -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (pyproject's addopts) with :func:`_work_unit` as the unit. (pytest-xdist's
    ``loadgroup`` would read an ``xdist_group`` mark, but 3.8 writes the group into ``item._nodeid``,
    which pytest 9 no longer reads: every test became its own unit and each re-traced its model.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileOrTruthCase(LoadFileScheduling):
        _heavy_first = False

        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            # xdist hands out the units with the most tests first; the real compiles and the gloo
            # ranks take longest per test, so they go first, and no 40-second rank test is left
            # for one worker at the end while the other waits
            if not self._heavy_first and getattr(self, "workqueue", None):
                self._heavy_first = True
                order = sorted(self.workqueue.items(), key=lambda kv: (not kv[0].startswith(HEAVY_FIRST), -len(kv[1])))
                self.workqueue.clear()
                self.workqueue.update(order)
            super()._assign_work_unit(node)

    return FileOrTruthCase(config, log)


def pytest_configure(config):
    """Under pytest-xdist each worker is one process on one core: torch's intra-op pool (and every
    graphtool child it starts: lint workers, ranks) gets one thread, so two workers do not fight
    over the cores with spinning OpenMP threads."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    config.stash[_TORCH_ENV] = _torch_env()


_TORCH_ENV = pytest.StashKey[dict]()


#: what torch writes into the environment itself: inductor's cache_dir() exports its default folder for the
#: compile workers it starts (as soon as a collected module makes torch compute it)
_TORCH_OWN = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"})


def _torch_env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith(("TORCH", "PYTORCH")) and k not in _TORCH_OWN}


def pytest_collection_finish(session):
    """Collecting imports every module under the test paths (``--doctest-modules``): one that sets a torch variable
    at import (a helper script's ``os.environ[...] = ...``) changes every later child of the worker. In CI that
    turned inductor's caches off in a notebook kernel and in graphtool compile --warm's children."""
    changed = {k: v for k, v in _torch_env().items() if session.config.stash[_TORCH_ENV].get(k) != v}
    if changed:
        raise pytest.UsageError(f"collecting the tests set {changed} in this process: a module under the test paths "
                                "sets it at import; set it under `if __name__ == '__main__':` instead")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """pytest's own protocol (``_pytest.runner``), run beneath one frame with stack room
    (:mod:`graphtool.capture.stack_room`): a real compile inside a test then never maps and unmaps a frame-stack
    chunk per call at whatever depth pytest and xdist run it (``hf_bert-inductor``'s truth, ``-n 0``: 1.44 s of
    system time without, 1.05 s with). Every other plugin's part of the protocol is a wrapper around this one."""
    from _pytest.runner import runtestprotocol

    from graphtool.capture.stack_room import call_with_stack_room

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    call_with_stack_room(runtestprotocol, item, nextitem=nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
