"""Every view and every report format, compared exactly with a syrupy snapshot (80 and 120 columns).

Reports are built by hand (no model is traced, torch is never imported), so a snapshot changes only
when the rendering does. After changing the output on purpose, review and accept the new text with
``python -m pytest tests/render/test_views.py --snapshot-update``.

Paths are as a user sees them: relative where the view shows them through ``display_path`` (a run
from the project folder), absolute where it shows the raw value (the loader's and dynamo's own).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graphtool.analysis.bench_report import BenchReport, ModeReport
from graphtool.analysis.cudagraphs.verdict import FIXES, Reason, Verdict
from graphtool.analysis.devices import DeviceCopy, DeviceNode, DeviceReport, GraphDevices
from graphtool.analysis.graph_summary import GraphSummary, Output, Placeholder, Source
from graphtool.analysis.lint import Break, Budget, LintReport, LintTarget, ModelLint
from graphtool.analysis.mutations import InputAlias, InputMutation, ModelOutputAlias, MutationReport, OutputAlias
from graphtool.analysis.timing_stats import speedup, summarize
from graphtool.analysis.trace_report import BreakInfo, RegionReport, TraceReport
from graphtool.render.bench import bench_view
from graphtool.render.cudagraphs import cudagraphs_view
from graphtool.render.devices import devices_view
from graphtool.render.documents import format_json, format_yaml
from graphtool.render.lint import format_github, format_junit, format_sarif, lint_view
from graphtool.render.mutations import mutations_view
from graphtool.render.trace import trace_view
from tests.helpers.console import render_text

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "/home/dev/llama-kv"  # where the user's project lives, for the fields shown unshortened
KV_MODEL = "examples/llama_kv_cache.py"
TRANSFORMERS_LLAMA = ".venv/lib/python3.12/site-packages/transformers/models/llama/modeling_llama.py"
WIDTHS = (80, 120)


# ---- trace and mutations: a small Llama with a KV cache, a graph break between two regions ----


def _ph(graph_name: str, kind: str, name: str, shape: tuple | None, dtype: str | None = "float32", device: str | None = "cpu") -> Placeholder:
    target = name if kind in ("parameter", "buffer") else None
    return Placeholder(name, kind, target, graph_name, shape, dtype, device)


def _graph(kind: str, placeholders: tuple[Placeholder, ...], ops: dict[str, int], outputs: tuple[Output, ...]) -> GraphSummary:
    return GraphSummary(kind, len(placeholders) + sum(ops.values()) + 1, ops, placeholders, outputs, ())


FORWARD_0 = _graph(
    "forward",
    (
        _ph("primals_1", "parameter", "model.embed_tokens.weight", (128, 32)),
        _ph("primals_2", "parameter", "model.layers.0.input_layernorm.weight", (32,)),
        _ph("primals_3", "parameter", "model.layers.0.self_attn.q_proj.weight", (32, 32)),
        _ph("primals_4", "parameter", "model.layers.0.self_attn.k_proj.weight", (16, 32)),
        _ph("primals_5", "parameter", "model.layers.0.self_attn.v_proj.weight", (16, 32)),
        _ph("primals_6", "buffer", "model.layers.0.self_attn.k_cache", (1, 2, 64, 8)),
        _ph("primals_7", "buffer", "model.layers.0.self_attn.v_cache", (1, 2, 64, 8)),
        _ph("primals_8", "buffer", "model.rotary_emb.inv_freq", (4,)),
        _ph("primals_9", "user_input", "input_ids", (1, 8), "int64"),
        _ph("primals_10", "user_input", "position_ids", (1, 8), "int64"),
        _ph("primals_11", "user_input", "temperature", ()),
        _ph("primals_12", "other", "primals_12", None, None, None),
    ),
    {
        "aten.mul.Tensor": 12, "aten.view.default": 10, "aten.mm.default": 7, "aten.t.default": 7, "aten.add.Tensor": 6,
        "aten._unsafe_view.default": 4, "aten.cat.default": 2, "aten.rsqrt.default": 2, "aten.embedding.default": 1,
        "aten.index_copy.default": 1, "aten.silu.default": 1,
    },
    (Output(0, "mutated_input", "model.layers.0.self_attn.k_cache"), Output(1, "mutated_input", "model.layers.0.self_attn.v_cache"),
     Output(2, "user_output", None), Output(3, "saved_for_backward", None)),
)
BACKWARD_0 = _graph(
    "backward",
    (
        _ph("primals_3", "parameter", "model.layers.0.self_attn.q_proj.weight", (32, 32)),
        _ph("rsqrt", "saved", "rsqrt", (1, 8, 1)),
        _ph("view_3", "saved", "view_3", (8, 32)),
        _ph("tangents_1", "tangent", "tangent of output 0", (1, 8, 128)),
    ),
    {
        "aten.mm.default": 14, "aten.mul.Tensor": 13, "aten.t.default": 9, "aten.view.default": 9, "aten.add.Tensor": 5,
        "aten.sum.dim_IntList": 3, "aten.embedding_dense_backward.default": 1, "aten.silu_backward.default": 1,
    },
    (Output(0, "gradient", "model.embed_tokens.weight"), Output(1, "gradient", "model.layers.0.self_attn.q_proj.weight")),
)
FORWARD_1 = _graph(
    "forward",
    (_ph("primals_1", "user_input", "hidden_states", (1, 8, 32)), _ph("primals_2", "parameter", "lm_head.weight", (128, 32))),
    {"aten.view.default": 2, "aten._softmax.default": 1, "aten.mm.default": 1, "aten.t.default": 1},
    (Output(0, "user_output", None),),
)

MUTATIONS = MutationReport(
    inputs=(
        InputMutation("model.embed_tokens.weight", "parameter", False, False, False, False, None, (0,)),
        InputMutation("model.layers.0.self_attn.q_proj.weight", "parameter", False, False, False, False, None, (0,)),
        InputMutation("model.layers.0.self_attn.k_cache", "buffer", True, False, False, True, Source(KV_MODEL, 41), (0,)),
        InputMutation("model.layers.0.self_attn.v_cache", "buffer", True, False, False, True, Source(KV_MODEL, 42), (0,)),
        InputMutation("input_ids", "user_input", False, False, False, False, None, (0,)),
        InputMutation("position_ids", "user_input", False, True, False, False, None, (0, 1), note="applied by dynamo outside the compiled graph"),
        InputMutation("attention_mask", "user_input", True, True, True, False, Source(KV_MODEL, 63), (1,)),
    ),
    outputs=(
        OutputAlias(0, 0, False, "non_alias", None),
        OutputAlias(0, 1, True, "alias_of_input", {"kind": "input", "name": "position_ids", "index": 9}),
    ),
    input_aliases=(InputAlias(("input_ids", "labels"), "same_tensor"),),
    model_outputs=(
        ModelOutputAlias(0, False, None),
        ModelOutputAlias(1, True, {"kind": "input", "name": "position_ids", "index": 1}),
        ModelOutputAlias(2, True, {"kind": "intermediate", "name": None, "index": None}),
        ModelOutputAlias(3, False, {"kind": "output", "name": None, "index": 0}),
    ),
)

TRACE = TraceReport(
    graphtool_version="0.1.0",
    torch_version="2.13.0+cpu",
    path=f"{PROJECT}/{KV_MODEL}",
    entry="get_model_and_inputs",
    device="cpu",
    training=True,
    module_training=True,
    regions=(RegionReport(0, FORWARD_0, BACKWARD_0), RegionReport(1, FORWARD_1, None)),
    breaks=(
        BreakInfo("Unsupported Tensor.item() call with capture_scalar_outputs=False", file=f"{PROJECT}/{KV_MODEL}", line=88),
        BreakInfo("Call to `torch._dynamo.graph_break()`"),
    ),
    mutations=MUTATIONS,
)


# ---- devices: the accelerator stand-in trace of examples/cpu_roundtrip.py ----

ROUNDTRIP = "examples/cpu_roundtrip.py"
DEVICES = DeviceReport(
    main_device="meta",
    stand_in="meta stands for cuda:0",
    graphs=(
        GraphDevices(
            0, "forward", {"cpu": 3, "meta": 7},
            off_device=(
                DeviceNode("lift_fresh_copy", "aten.lift_fresh_copy.default", "cpu", Source(ROUNDTRIP, 13)),
                DeviceNode("_to_copy", "aten._to_copy.default", "cpu", Source(ROUNDTRIP, 14)),
                DeviceNode("mul", "aten.mul.Tensor", "cpu", Source(ROUNDTRIP, 14)),
            ),
            copies=(
                DeviceCopy("_to_copy", "aten._to_copy.default", "meta", "cpu", Source(ROUNDTRIP, 14)),
                DeviceCopy("_to_copy_1", "aten._to_copy.default", "cpu", "meta", Source(ROUNDTRIP, 15)),
            ),
            nodes=11, without_device=1,
        ),
        GraphDevices(
            0, "backward", {"cpu": 3, "meta": 9},
            off_device=(
                DeviceNode("_to_copy_2", "aten._to_copy.default", "cpu", Source(ROUNDTRIP, 15)),
                DeviceNode("mul_1", "aten.mul.Tensor", "cpu", None),
            ),
            copies=(
                DeviceCopy("_to_copy_2", "aten._to_copy.default", "meta", "cpu", Source(ROUNDTRIP, 15)),
                DeviceCopy("_to_copy_3", "aten._to_copy.default", "cpu", "meta", Source(ROUNDTRIP, 14)),
            ),
            nodes=13, without_device=1,
        ),
    ),
)
DEVICES_CLEAN = DeviceReport("cuda", None, (GraphDevices(0, "forward", {"cuda:0": 64}, (), ()), GraphDevices(0, "backward", {"cuda:0": 60}, (), ())))


# ---- cudagraphs: skipped (cudagraphs backend) and applied with splits (inductor) ----

CONFIG = {"graph_partition": False, "cudagraph_support_input_mutation": True, "cudagraph_backend_support_input_mutation": False}


def _reason(code: str, message: str, region: int | None, graph: str | None, skips: bool, source: Source | None) -> Reason:
    return Reason(code, message, region, graph, skips, source, FIXES[code])


def kv_cache_verdict(root: str = "") -> Verdict:
    """The cudagraphs backend on the KV-cache Llama; sources under ``root`` (absolute in a bench report's dict)."""
    where = f"{root}/{KV_MODEL}" if root else KV_MODEL
    return Verdict(
        backend="cudagraphs",
        eligible=False,
        predicted=True,
        regions=2,
        reasons=(
            _reason("mutated-input", "skipping cudagraphs due to mutated inputs (2 instances)", 0, "forward", True, Source(where, 41)),
            _reason("forward-skipped", "backward not captured: the forward of this region skipped cudagraphs", 0, "backward", True, None),
            _reason("cpu-node", "skipping cudagraphs due to cpu device (_tensor_constant0)", 1, "forward", True, Source(where, 97)),
            _reason("host-sync", "graph break: Unsupported Tensor.item() call with capture_scalar_outputs=False", None, None, False, Source(where, 88)),
        ),
        config=CONFIG,
    )


VERDICT_SPLIT = Verdict(
    backend="inductor",
    eligible=True,
    predicted=True,
    regions=1,
    reasons=(
        _reason("partition-split", "graph split around CPU op lift_fresh_copy (aten.lift_fresh_copy.default)", 0, "forward", False, Source(ROUNDTRIP, 13)),
        _reason("dynamic-shape", "dynamic shapes: one CUDA graph is recorded per distinct size", 0, "forward", False, None),
    ),
    config={**CONFIG, "graph_partition": True},
)
STOPPED = (f"{PROJECT}/{KV_MODEL}:112: the stand-in trace stopped (NotImplementedError: Cannot copy out of meta tensor; no data!); "
           "later regions were not analysed")


# ---- bench: on a GPU (memory and pool columns, a mismatch) and on the CPU (capture blocked) ----

HOST = {"machine": "x86_64", "cpus": 16, "python": "3.12.3"}
EAGER_CUDA = summarize([2.4113, 2.3987, 2.4502])
REPLAY = summarize([0.9121, 0.9088, 0.9342])
REDUCE_OVERHEAD = summarize([1.1204, 1.1187, 1.1562])
BENCH_CUDA = BenchReport(
    path=f"{PROJECT}/{KV_MODEL}", entry="get_model_and_inputs", device="cuda:0", graphtool_version="0.1.0",
    torch_version="2.13.0+cu128", host=HOST, backward=True, warmup=10, iters=100, repeat=3,
    modes=(
        ModeReport("eager", "ok", None, EAGER_CUDA, speedup(EAGER_CUDA, EAGER_CUDA), 0.0, 48_234_496, None),
        ModeReport(
            "compile[default]", "mismatch",
            f"gradients differs from eager by up to 0.0312; not timed. The model draws random numbers (bernoulli_ at {KV_MODEL}:52), "
            "which compiled code and graph replay draw differently from eager: call model.eval() or set dropout to 0 in the script to compare",
            None, None, 0.0312, None, None,
        ),
        ModeReport("cudagraph replay", "ok", None, REPLAY, speedup(EAGER_CUDA, REPLAY), 0.0, 52_428_800, 6_291_456),
        ModeReport("compile[reduce-overhead]", "ok", None, REDUCE_OVERHEAD, speedup(EAGER_CUDA, REDUCE_OVERHEAD), 1.2e-06, 61_865_984, None),
    ),
    verdict=Verdict("cudagraphs", False, False, 2, kv_cache_verdict(PROJECT).reasons[:2] + (
        _reason("graph-break", "graph break: Call to `torch._dynamo.graph_break()`", None, None, False, Source(f"{PROJECT}/{KV_MODEL}", 120)),
    ), CONFIG).to_dict(),
)

EAGER_CPU = summarize([0.0841, 0.0833, 0.0902, 0.0839, 0.0845])
COMPILED_CPU = summarize([0.0612, 0.0598, 0.0655, 0.0603, 0.0611])
CPU_VERDICT = Verdict("cudagraphs", False, True, 1, (
    _reason("cpu-node", "skipping cudagraphs due to cpu device (_tensor_constant0)", 0, "forward", True, Source(f"{PROJECT}/{ROUNDTRIP}", 13)),
    _reason("forward-skipped", "backward not captured: the forward of this region skipped cudagraphs", 0, "backward", True, None),
), CONFIG)
BENCH_CPU = BenchReport(
    path=f"{PROJECT}/{ROUNDTRIP}", entry="get_model_and_inputs", device="cpu", graphtool_version="0.1.0",
    torch_version="2.13.0+cpu", host=HOST, backward=False, warmup=3, iters=20, repeat=5,
    modes=(
        ModeReport("eager", "ok", None, EAGER_CPU, speedup(EAGER_CPU, EAGER_CPU), 0.0, None, None),
        ModeReport("compile[default]", "ok", None, COMPILED_CPU, speedup(EAGER_CPU, COMPILED_CPU), 2.4e-07, None, None),
        ModeReport("cudagraph replay", "skipped", "no CUDA device is present", None, None, None, None, None),
    ),
    verdict=CPU_VERDICT.to_dict(),
)


# ---- lint: over budget with a baseline, within budget with an allowed break, could not lint ----

GRAPH_BREAKS = "examples/graph_breaks.py"
OVER_BUDGET = ModelLint(
    target=LintTarget(GRAPH_BREAKS, budget=Budget(max_graph_breaks=0)),
    status="over_budget",
    error=None,
    error_detail=None,
    graph_count=3,
    breaks=(
        Break("Failed to trace builtin operator", "gb0059", GRAPH_BREAKS, 13, 'print("logging from forward")',
              "Avoid calling builtin `print` with argument types ['str']. Consider using an equivalent alternative function/method to `print`.",
              1, new=False),
        Break("Call to `torch._dynamo.graph_break()`", "gb0025", GRAPH_BREAKS, 16, "torch._dynamo.graph_break()",
              "Remove the `torch._dynamo.graph_break()` call.", 2, new=True),
    ),
    recompiles=(),
    skipped_frames=({"function": "torch_dynamo_resume_in_forward_at_13", "file": GRAPH_BREAKS, "line": 13,
                     "reason": "Call to `torch._dynamo.graph_break()`"},),
    failures=("2 graph breaks, budget 0", "1 new graph break not in the baseline"),
    fixed=({"model": GRAPH_BREAKS, "file": GRAPH_BREAKS, "kind": "gb0124", "source_text": "if y.sum().item() > 0:", "line": 19,
            "reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False"},),
    seconds=1.37,
)
WITHIN_BUDGET = ModelLint(
    target=LintTarget("examples/hf_llama.py", entry="get_model_and_inputs", dynamic=True,
                      budget=Budget(max_graph_breaks=1, allowed_breaks=(r"Tensor\.item\(\)",))),
    status="ok",
    error=None,
    error_detail=None,
    graph_count=2,
    breaks=(
        Break("Unsupported Tensor.item() call with capture_scalar_outputs=False", "gb0124", TRANSFORMERS_LLAMA, 380,
              "if attention_mask.sum().item() > 0:",
              "Set `torch._dynamo.config.capture_scalar_outputs = True` or `export TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` "
              "to include these operations in the captured graph.", 1, new=False, allowed=True),
        Break("Dynamic control flow is not supported at the moment", None, None, None, None, None, 1, new=False),
    ),
    recompiles=({"function": "forward", "file": TRANSFORMERS_LLAMA, "line": 395,
                 "reason": "tensor 'input_ids' size mismatch at index 1. expected 8, actual 9"},),
    skipped_frames=(),
    failures=(),
    fixed=(),
    seconds=12.84,
)
ERRORED = ModelLint(
    target=LintTarget("examples/moe_router.py", entry="build"),
    status="error",
    error="examples/moe_router.py:4: importing moe_router.py failed: ModuleNotFoundError: No module named 'flash_attn'",
    error_detail='  File "examples/moe_router.py", line 4, in <module>\n    from flash_attn import flash_attn_func\n',
    graph_count=0,
    breaks=(),
    recompiles=(),
    skipped_frames=(),
    failures=(),
    fixed=(),
    seconds=0.41,
)
LINT_ERRORED = LintReport((OVER_BUDGET, WITHIN_BUDGET, ERRORED), baseline="graph-breaks.json")
LINT_FAILED = LintReport((OVER_BUDGET, WITHIN_BUDGET), baseline="graph-breaks.json")
LINT_PASSED = LintReport((WITHIN_BUDGET,), baseline=None)


VIEWS = {
    "trace": lambda: trace_view(TRACE),
    "mutations": lambda: mutations_view(MUTATIONS),
    "mutations_all": lambda: mutations_view(MUTATIONS, show_all=True),
    "devices": lambda: devices_view(DEVICES),
    "devices_clean": lambda: devices_view(DEVICES_CLEAN),
    "cudagraphs_skipped": lambda: cudagraphs_view(kv_cache_verdict()),
    "cudagraphs_split_stopped": lambda: cudagraphs_view(VERDICT_SPLIT, STOPPED),
    "bench_cuda": lambda: bench_view(BENCH_CUDA),
    "bench_cpu": lambda: bench_view(BENCH_CPU),
    "lint_errored": lambda: lint_view(LINT_ERRORED),
    "lint_failed": lambda: lint_view(LINT_FAILED),
    "lint_passed": lambda: lint_view(LINT_PASSED),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("view", list(VIEWS))
def test_view_text(view, width, snapshot):
    assert render_text(VIEWS[view](), width) == snapshot


@pytest.mark.parametrize("view", list(VIEWS))
def test_view_colours(view, snapshot):
    """The theme's styles as ANSI codes: a style moved from one meaning to another shows here."""
    assert render_text(VIEWS[view](), 120, color=True) == snapshot


@pytest.mark.parametrize("fmt", [format_sarif, format_junit, format_github], ids=["sarif", "junit", "github"])
@pytest.mark.parametrize("report", ["errored", "passed"])
def test_lint_formats(fmt, report, snapshot):
    assert fmt({"errored": LINT_ERRORED, "passed": LINT_PASSED}[report]) == snapshot


DOCUMENTS = {
    "trace": TRACE.to_dict,
    "bench": BENCH_CUDA.to_dict,
    "lint": LINT_ERRORED.to_dict,
    "devices": DEVICES.to_dict,
    "cudagraphs": lambda: kv_cache_verdict().to_dict(),
}


@pytest.mark.parametrize("fmt", [format_json, format_yaml], ids=["json", "yaml"])
@pytest.mark.parametrize("doc", list(DOCUMENTS))
def test_documents(doc, fmt, snapshot):
    assert fmt(DOCUMENTS[doc]()) == snapshot


def test_the_snapshots_need_no_torch():
    """These tests stay fast and run anywhere: building, rendering and formatting every report imports no torch."""
    code = (
        "import sys\n"
        "from tests.render import test_views as t\n"
        "[t.render_text(view(), 80) for view in t.VIEWS.values()]\n"
        "[fmt(t.LINT_ERRORED) for fmt in (t.format_sarif, t.format_junit, t.format_github)]\n"
        "[t.format_yaml(doc()) for doc in t.DOCUMENTS.values()]\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
