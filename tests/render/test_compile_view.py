"""graphtool compile's terminal view and report section, from a hand-built report: 80 columns, the same lines in a
pipe, nothing cut."""

from __future__ import annotations

from graphtool.analysis.compile_time import CompileReport, CompileRun, Failure, Frame, ModuleSize
from graphtool.analysis.repeated_blocks import Hazard, NearMiss, Recompile, RepeatedBlock
from graphtool.commands.compile import CompileResult
from graphtool.render.compile import compile_section, compile_view
from graphtool.render.plain import format_plain

PHASES = {"dynamo": 2.0, "aot_autograd": 3.0, "inductor": 4.0, "code_gen": 9.0, "triton": 19.0, "autotune": 0.0}


def _report(**kw) -> CompileReport:
    frames = (Frame("0/0", "forward", "wrapped_func", "/site-packages/transformers/utils/generic.py", 812, 28.0,
                    {k: v * 28 / 37 for k, v in PHASES.items()}, 315),
              Frame("0/0", "backward", None, None, None, 9.0, {k: v * 9 / 37 for k, v in PHASES.items()}))
    full = CompileRun("whole", 41.3, 0.012, 0.009, frames, {"total_wall_time": 37.0})
    block = RepeatedBlock("LlamaDecoderLayer", tuple(f"model.layers.{i}" for i in range(4)), True, 0.88, 52,
                          (NearMiss(("model.layers.4",), "a different config: mlp.up.weight float32[128, 32] here, "
                                                         "float32[64, 32] in model.layers.0"),),
                          (Recompile("model.layers.1", "0/0: tensor 'x' requires_grad mismatch"),))
    regional = CompileRun("regional", 12.1, 0.012, 0.010, frames[:1], {}, None, block.fqns)
    base = dict(path="/app/decoder.py", entry="get_model_and_inputs", graphtool_version="0", torch_version="2.13.0+cpu",
                device="cpu", backend="inductor", mode=None, training=True, caches="off", full=full, regional=regional,
                blocks=(block,), modules=(ModuleSize("model.layers.0-3", "LlamaDecoderLayer", 52, 0.22, 4),
                                          ModuleSize("lm_head", "Linear", 1, 0.003)),
                hazards=(Hazard("recompiles_per_instance", "the blocks compiled 2 times, not once (0/0: tensor 'x' "
                                "requires_grad mismatch): each instance whose guards differ pays the compile again"),),
                nested_compile_region=True, regional_asked=True)
    base.update(kw)
    return CompileReport(**base)


def test_the_view_fits_80_columns_and_says_where_the_time_went():
    text = format_plain(compile_view(_report()), 80)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    flat = " ".join(text.split())  # prose is wrapped at 78 columns
    for want in ("first compiled call", "+41.3 s over eager: the compile", "C++/Triton compile", "forward 28.0 s, backward 9.00 s",
                 "4 x LlamaDecoderLayer (model.layers.0-3), identical graphs, 88% of the model's nodes",
                 "near miss: model.layers.4 differ: a different config", "recompiles: model.layers.1 compiled again alone",
                 "Whole against regional (4 blocks compiled one by one)", "hazards found on this model:",
                 "for block in model.model.layers: block.compile()",
                 "LlamaDecoderLayer.forward = nested_compile_region(LlamaDecoderLayer.forward)",
                 "note: on a CPU: the C++/Triton compile phase"):
        assert want in flat, want


def test_no_repeated_blocks_with_regional_says_so():
    text = format_plain(compile_view(_report(blocks=(), regional=None, hazards=())), 80)
    assert "no repeated blocks: no class of module repeats with identical dynamo graphs" in text


def test_a_stopped_run_says_it_is_partial_and_its_exit_code():
    r = CompileResult(_report(stopped=Failure("timeout", "--timeout 5 s ran out (compiling the whole model: running)")))
    assert r.exit_code() == 2 and "(stopped early: what finished is above)" in r.text(80)
    failed = CompileResult(_report(stopped=Failure("compile_failed", "TorchRuntimeError: boom", "dynamo", "/app/m.py", 12)))
    assert failed.exit_code() == 1 and failed.diagnostics().endswith("m.py:12: torch.compile failed: TorchRuntimeError: boom")
    assert CompileResult(_report()).exit_code() == 0


def test_summary_and_the_report_section():
    r = CompileResult(_report())
    assert r.summary() == "compile 41.3 s (cold, inductor); regional 12.1 s; 4 x LlamaDecoderLayer identical"
    html = compile_section(_report())
    assert '<section id="compile"><h2>Compile time</h2>' in html
    assert "<td>C++/Triton compile</td>" in html and "4 x LlamaDecoderLayer (model.layers.0-3), identical graphs" in html
    assert "<pre>for block in model.model.layers: block.compile()</pre>" in html
