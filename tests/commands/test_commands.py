"""Every command's logic as a plain function: options in, report dataclasses out, no typer involved."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import FIXTURES, ROOT, example


class Recorder:
    """A Progress that keeps what it was told."""

    def __init__(self):
        self.phases, self.counts, self.notes = [], [], []

    def phase(self, text):
        self.phases.append(text)

    def advance(self, done, total, text):
        self.counts.append((done, total, text))

    def note(self, text):
        self.notes.append(text)


def test_trace_returns_reports_and_graph_code():
    from graphtool.commands.trace import trace

    progress = Recorder()
    (result,) = trace(example("mlp.py"), graph_code=True, progress=progress)
    data = result.to_dict()
    assert data["graphs"][0]["forward"]["nodes"] == 11  # inductor's view: addmm and permute, its decompositions
    assert set(result.graph_code) == {"forward.py", "backward.py"}
    assert "importing torch..." in progress.phases and any(p.startswith("tracing") for p in progress.phases)
    assert result.verdict is None and "cudagraphs" not in data


def test_trace_with_the_cudagraph_verdict():
    from graphtool.commands.trace import trace

    (result,) = trace(example("cpu_roundtrip.py"), cudagraphs="cudagraphs")
    assert result.verdict is not None and not result.verdict.eligible
    assert result.to_dict()["cudagraphs"]["backend"] == "cudagraphs"


def test_mutations_finds_batchnorm_buffers():
    from graphtool.commands.mutations import mutations

    (result,) = mutations(example("convnet_bn.py"))
    assert result.found
    assert {m.name for m in result.report.mutated} == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert result.to_dict()["model"]["training"] is True


def test_devices_and_cudagraphs_on_the_standin():
    from graphtool.commands.cudagraphs import cudagraphs
    from graphtool.commands.devices import devices

    (dev,) = devices(example("cpu_roundtrip.py"))
    assert dev.found and dev.to_dict()["devices"]["stand_in"] == "meta stands for cuda:0"
    (cg,) = cudagraphs(example("cpu_roundtrip.py"), backend="cudagraphs")
    assert cg.found and "cpu-node" in [r.code for r in cg.report.reasons]
    (clean,) = cudagraphs(example("mlp.py"))
    assert not clean.found


def test_render_writes_the_picture(tmp_path):
    from graphtool.commands.render import drawing, render

    picture = drawing(example("mlp.py"), graph="forward")
    assert picture.title == "forward graph of mlp.py" and picture.nodes
    out = tmp_path / "mlp.dot"
    result = render(example("mlp.py"), output=out, graph="forward")
    assert result.output == out and result.renderer == "none"
    assert out.read_text().startswith("digraph")


def test_bench_times_eager_and_reports_progress():
    from graphtool.commands.bench import bench

    progress = Recorder()
    result = bench(example("mlp.py"), compile_mode="none", warmup=0, iters=3, repeat=2, progress=progress)
    assert [m.name for m in result.report.modes] == ["eager"] and result.report.modes[0].status == "ok"
    assert not result.cuda_missing
    assert progress.counts[-1] == (6, 6, "timing eager")


def test_bench_times_training_by_default_as_every_command_and_says_so():
    # issue 44: bench timed the forward alone unless --backward, while trace, memory and the rest default to training
    from graphtool.commands.bench import bench
    from graphtool.render.plain import format_plain

    quick = {"compile_mode": "none", "warmup": 0, "iters": 2, "repeat": 1}
    trained = bench(example("mlp.py"), **quick).report
    assert trained.backward is True and trained.to_dict()["settings"]["timed"] == "forward + backward"
    assert "training, as every command defaults to" in trained.to_dict()["settings"]["timed_why"]
    assert "(timed: forward + backward, cpu;" in format_plain(bench_view_of(trained), 100)
    forward = bench(example("mlp.py"), inference=True, **quick).report
    assert forward.to_dict()["settings"]["timed"] == "forward" and "--inference" in forward.timed_why
    # training by default, but an argmax output has nothing to differentiate: the forward, said so (not an error)
    argmax = bench(str(FIXTURES / "outputs" / "argmax_output.py"), **quick).report
    assert argmax.backward is False and "no output of the model requires grad" in argmax.timed_why


def bench_view_of(report):
    from graphtool.render.bench import bench_view

    return bench_view(report)


@pytest.mark.slow  # over 8 s: the slow tier (docs/ci.md)
def test_lint_judges_and_writes_a_baseline(tmp_path):
    from graphtool.commands.lint import lint

    target = str(FIXTURES / "breaks" / "builtin.py")
    over = lint([target], max_graph_breaks=0)
    assert over.exit_code() == 1 and over.report.models[0].failures
    baseline = tmp_path / "gb.json"
    written = lint([target], baseline=baseline, update_baseline=True)
    assert written.baseline_written == baseline and written.exit_code() == 0
    assert json.loads(baseline.read_text())["breaks"]
    assert lint([target], baseline=baseline).exit_code() == 0


@pytest.mark.slow  # over 5 s: the slow tier (docs/ci.md)
def test_commands_never_import_typer():
    """The library entry points run without the CLI framework loaded at all."""
    code = (
        "import sys\n"
        "from graphtool.commands.mutations import mutations\n"
        "mutations('examples/mlp.py')\n"
        "assert 'typer' not in sys.modules, 'typer was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
