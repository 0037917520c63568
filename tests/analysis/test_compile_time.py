"""graphtool compile's analysis over hand-built data: frames from a hand-made TORCH_TRACE log, repeated blocks and
their near misses, hazards, advice, the compile budget, the JSON document against its schema. No torch runs here
(the real compiles are in tests/commands/test_compile.py and tests/truth/test_compile_truth.py)."""

from __future__ import annotations

import io
import json
from importlib import resources

import pytest

from graphtool.analysis.compile_phases import PHASES
from graphtool.analysis.compile_time import (
    CompileReport,
    CompileRun,
    Failure,
    Frame,
    biggest_modules,
    judge_compile_budget,
    phase_now,
    read_frames,
    read_log,
    wants_record,
)
from graphtool.analysis.repeated_blocks import BlockFacts, RepeatedBlock, hazards, judge_blocks, nested_change, raw_facts, regional_change, span
from graphtool.capture.processes.compile_job import STAGE_ARTIFACT
from graphtool.capture.torch_trace import LogReader
from tests.log.handmade import metrics, record

pytestmark = pytest.mark.one_torch  # torch-free: what torch writes is checked by tests/truth/test_compile_truth.py


def _log() -> bytes:
    """A child's log: the whole compile (forward 0/0 and its lazy backward), then the probe's dynamo-only compile."""
    ctx = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    bwd = {"is_forward": False, "backward_cumulative_compile_time_us": 3_000_000, "inductor_cumulative_compile_time_us": 2_500_000,
           "dynamo_cumulative_compile_time_us": None, "aot_autograd_cumulative_compile_time_us": None,
           "inductor_code_gen_cumulative_compile_time_us": 1_000_000, "triton_compile_time_us": 800_000}
    return b"".join([
        record("artifact", {"name": STAGE_ARTIFACT, "encoding": "string"}, "whole"),
        record("compilation_metrics", metrics("0/0", inductor_fx_local_cache_miss_count=1), **ctx),
        record("bwd_compilation_metrics", metrics("0/0", **bwd), **ctx),
        record("artifact", {"name": STAGE_ARTIFACT, "encoding": "string"}, "probe"),
        record("compilation_metrics", metrics("1/0", co_name="forward", line=30), frame_id=1, frame_compile_id=0, attempt=0),
    ])


def _frames() -> list[Frame]:
    reader = LogReader([("c.log", io.BytesIO(_log()))], want=lambda n, m: wants_record(n, m, STAGE_ARTIFACT))
    return read_frames(reader.records(), STAGE_ARTIFACT)


def test_frames_carry_their_stage_and_phases_that_add_up():
    frames = _frames()
    assert [(f.compile_id, f.kind, f.stage) for f in frames] == [("0/0", "forward", "whole"), ("0/0", "backward", "whole"),
                                                                  ("1/0", "forward", "probe")]
    for f in frames:
        assert sum(f.phases.values()) == pytest.approx(f.seconds)
    fwd, bwd = frames[:2]
    assert (fwd.seconds, bwd.seconds, fwd.nodes, fwd.cache["fx_graph_misses"]) == (2.0, 3.0, 2, 1)
    assert bwd.phases["aot_autograd"] == pytest.approx(0.5)  # the lazy backward's own AOT part


def _event(name, ph, ts):
    return record("chromium_event", {}, json.dumps({"name": name, "ph": ph, "ts": ts * 1e6, "args": {}}, indent=0),
                  frame_id=0, frame_compile_id=0, attempt=0)


def test_c_plus_plus_compiles_run_while_generating_code_are_counted_once():
    log = _log() + b"".join([
        record("artifact", {"name": STAGE_ARTIFACT, "encoding": "string"}, "regional"),
        _event("code_gen", "B", 0), _event("compile_file", "B", 1), _event("compile_file", "E", 3),  # 2 s inline
        _event("async_compile.wait", "B", 3), _event("compile_file", "B", 3), _event("compile_file", "E", 4),  # the pool's
        _event("async_compile.wait", "E", 4), _event("compile_file", "B", 5), _event("compile_file", "B", 5.5),
        _event("compile_file", "E", 6), _event("compile_file", "E", 6.5), _event("code_gen", "E", 7),  # 1.5 s, nested once
    ])
    reader = LogReader([("c.log", io.BytesIO(log))], want=lambda n, m: wants_record(n, m, STAGE_ARTIFACT))
    frames, inline = read_log(reader.records(), STAGE_ARTIFACT)
    assert len(frames) == 3 and inline == {"regional": 3.5}


def test_a_run_counts_only_its_own_stage():
    run = CompileRun("whole", first_call_seconds=6.0, eager_step_seconds=0.5, step_seconds=0.1,
                     frames=tuple(f for f in _frames() if f.stage == "whole"))
    assert run.seconds == 5.5 and run.compile_seconds == 5.0
    assert run.by_kind() == {"forward": 2.0, "backward": 3.0}
    assert sum(run.phases().values()) == pytest.approx(5.0)
    assert list(run.phases()) == [p.key for p in PHASES]


def _probe(fqn, graphs, compiles=(), error=None, inputs=("float32[2, 16]",)):
    return {"fqn": fqn, "graphs": list(graphs), "compiles": list(compiles), "error": error, "inputs": list(inputs)}


def _compile(cid, h="a", nodes=4, reason=None):
    return {"hash": h, "nodes": nodes, "compile_id": cid, "recompile_reason": reason}


def _facts(gate=False, hidden=32):
    return {"params": {"up.weight": f"float32[{hidden}, 16]", "down.weight": f"float32[16, {hidden}]"},
            "attrs": {"gate": repr(gate), "up.out_features": str(hidden)}, "reads": ["down", "gate", "up"]}


def _graphs(fqns_nodes: dict[str, int], other: int = 2) -> list[dict]:
    mods = [{"stack": [[f"L['self'].{f}", "Block"]], "nodes": n} for f, n in fqns_nodes.items()]
    mods.append({"stack": [], "nodes": other})
    return [{"compile_id": "0/0", "nodes": sum(fqns_nodes.values()) + other, "modules": mods}]


def _near_miss_raw():
    probe = [_probe("blocks.0", ["a"], [_compile("0/0")]), _probe("blocks.1", ["a"]), _probe("blocks.2", ["a"]),
             _probe("blocks.3", ["b"], [_compile("0/1", "b", 5, "0/0: self.gate == False # if self.gate:")]),
             _probe("blocks.4", ["c"], [_compile("0/2", "c", 4, "0/1: self.gate == True")])]
    facts = {f"blocks.{i}": _facts() for i in range(3)}
    facts["blocks.3"] = _facts(gate=True)
    facts["blocks.4"] = _facts(hidden=64)
    return {"class": "Block", "fqns": [p["fqn"] for p in probe], "nested_in": None, "probe": probe, "facts": facts}


def test_identical_blocks_and_near_misses_say_why():
    graphs = _graphs({f"blocks.{i}": 4 for i in range(5)})
    (block,) = judge_blocks([_near_miss_raw()], graphs)
    assert block.identical and block.fqns == ("blocks.0", "blocks.1", "blocks.2") and block.nodes_each == 4
    assert block.label() == "3 x Block (blocks.0-2)"
    assert block.share == pytest.approx(12 / 22)
    flag, config = block.near_misses
    assert flag.fqns == ("blocks.3",) and flag.why == "a flag read in forward: self.gate is True here, False in blocks.0"
    assert flag.torch_reason == "0/0: self.gate == False # if self.gate:"
    assert config.why == "a different config: up.out_features=64 here, 32 in blocks.0; down.weight float32[16, 64] here, float32[16, 32] in blocks.0"
    assert config.torch_reason is None  # torch named another variant's guard, not the block's own


def test_an_identical_instance_that_compiled_again_is_a_recompile():
    why = "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0"
    probe = [_probe("b.0", ["a"], [_compile("0/0")]), _probe("b.1", ["a"], [_compile("0/1", reason=why)]),
             _probe("b.2", ["a"])]
    (block,) = judge_blocks([{"class": "B", "fqns": ["b.0", "b.1", "b.2"], "probe": probe}], [])
    assert block.identical and block.count == 3 and block.share is None
    assert [(r.fqn, r.reason) for r in block.recompiles] == [("b.1", "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0")]


def test_a_class_whose_instances_all_differ_is_no_repeated_block():
    probe = [_probe("b.0", ["a"], [_compile("0/0")]), _probe("b.1", ["b"], [_compile("0/1", "b")], inputs=("float32[4]",))]
    (block,) = judge_blocks([{"class": "B", "fqns": ["b.0", "b.1"], "probe": probe, "facts": {}}], [])
    assert not block.identical
    assert block.near_misses[0].why == "called with other inputs: float32[4] here, float32[2, 16] in b.0"


def test_an_instance_dynamo_could_not_take_alone_is_a_near_miss():
    probe = [_probe("b.0", ["a"], [_compile("0/0")]), _probe("b.1", ["a"]), _probe("b.2", [], error="Unsupported: boom")]
    (block,) = judge_blocks([{"class": "B", "fqns": ["b.0", "b.1", "b.2"], "probe": probe}], [])
    assert block.fqns == ("b.0", "b.1") and block.near_misses[0].why == "dynamo could not compile it alone"
    assert block.near_misses[0].torch_reason == "Unsupported: boom"


def test_span_and_the_one_line_changes():
    assert span([f"model.layers.{i}" for i in range(8)]) == "model.layers.0-7"
    assert span(["l.0", "l.1", "l.3"]) == "l.0-1,3"
    b = RepeatedBlock("LlamaDecoderLayer", tuple(f"model.layers.{i}" for i in range(4)), True, 0.8)
    assert regional_change(b, "inductor", "max-autotune") == 'for block in model.model.layers: block.compile(mode="max-autotune")'
    assert regional_change(RepeatedBlock("B", ("0", "1"), True, 0.5), "inductor", None) == "for block in model: block.compile()"
    assert nested_change(b).splitlines()[1] == "LlamaDecoderLayer.forward = nested_compile_region(LlamaDecoderLayer.forward)"


def test_hazards_found_on_the_model():
    blocks = [RepeatedBlock("Layer", ("layers.0", "layers.1"), True, 0.9)]
    facts = BlockFacts(aliased={"layers.1": ["output 0 is input 0"]}, fsdp2=("layers.0", "layers.1"),
                       nested=(("Expert", "Layer", ("layers.0.experts.0", "layers.0.experts.1")),), compiled=("layers.0.attn",))
    regional = [Frame("0/0", "forward", "forward", None, None, 1.0), Frame("0/1", "forward", "forward", None, None, 1.0,
                                                                          recompile_reason="0/0: tensor 'x' requires_grad mismatch")]
    found = {h.code: h for h in hazards(blocks, facts, regional)}
    assert set(found) == {"aliased_output", "fsdp2", "nested_regions", "recompiles_per_instance"}
    assert found["aliased_output"].fqns == ("layers.1",) and found["aliased_output"].seen_in == "vllm#41397"
    assert found["fsdp2"].seen_in == "accelerate#4022"
    assert "compiled 2 times, not once (0/0: tensor 'x' requires_grad mismatch)" in found["recompiles_per_instance"].text
    assert hazards(blocks, BlockFacts(), []) == []


def test_raw_facts_read_the_childs_groups():
    raw = [{"class": "Layer", "fqns": ["l.0", "l.1"], "aliased": {"l.0": ["output 0 is input 0"]}, "fsdp2": []},
           {"class": "Expert", "fqns": ["l.0.e.0", "l.0.e.1"], "nested_in": "Layer"}]
    f = raw_facts(raw, ["l.0.attn"])
    assert f.aliased == {"l.0": ["output 0 is input 0"]} and f.nested == (("Expert", "Layer", ("l.0.e.0", "l.0.e.1")),)
    assert f.compiled == ("l.0.attn",)


def test_biggest_modules_open_what_holds_most_and_fold_identical_siblings():
    mods = [{"stack": [["L['self'].model", "M"], [f"L['self'].model.layers[{i}]", "Layer"]], "nodes": 20} for i in range(4)]
    mods += [{"stack": [["L['self'].model", "M"], ["L['self'].model.embed", "Embedding"]], "nodes": 1},
             {"stack": [["L['self'].lm_head", "Linear"]], "nodes": 1}]
    rows = biggest_modules([{"nodes": 84, "modules": mods}])
    assert [(r.fqn, r.cls, r.nodes, r.count) for r in rows] == [("model.layers.0-3", "Layer", 20, 4), ("model.embed", "Embedding", 1, 1),
                                                                ("lm_head", "Linear", 1, 1)]


def test_phase_now_names_the_innermost_phase():
    assert phase_now([("entire_frame_compile", "0/0"), ("backend_compile", "0/0"), ("create_aot_dispatcher_function", "0/0")]) == "0/0: AOT autograd"
    assert phase_now([("compile_fx.<locals>.bw_compiler", "0/0"), ("code_gen", "0/0")]) == "0/0 backward: code generation"


def _report(**kw) -> CompileReport:
    frames = tuple(f for f in _frames() if f.stage == "whole")
    full = CompileRun("whole", 6.0, 0.5, 0.1, frames, {"total_wall_time": 5.0})
    base = dict(path="/app/m.py", entry="get_model_and_inputs", graphtool_version="0", torch_version="2.13.0", device="cpu",
                backend="inductor", mode=None, training=True, caches="off", full=full)
    base.update(kw)
    return CompileReport(**base)


def test_advice_for_a_regional_compile_that_saves_time():
    block = RepeatedBlock("Block", tuple(f"blocks.{i}" for i in range(8)), True, 0.81)
    regional = CompileRun("regional", 2.0, 0.5, 0.12, (), {}, None, block.fqns)
    report = _report(regional=regional, blocks=(block,), regional_asked=True, nested_compile_region=True)
    advice = report.advice()
    assert advice[0].text.startswith("compile the blocks one by one: 1.5 s instead of 5.5 s (3.7x faster); the compiled step is "
                                     "20% slower (fusion stops at block boundaries)")
    assert advice[0].code == "for block in model.blocks: block.compile()"
    assert advice[1].code.endswith("Block.forward = nested_compile_region(Block.forward)")
    slow = _report(regional=CompileRun("regional", 9.0, 0.5, 0.1, (), {}, None, block.fqns), blocks=(block,), regional_asked=True)
    assert slow.advice()[0].text.startswith("keep torch.compile(model): compiling the blocks one by one took 8.5 s against 5.5 s")


def test_advice_when_the_wall_and_cpu_clocks_disagree():
    block = RepeatedBlock("Block", ("b.0", "b.1"), True, 0.5)
    full = CompileRun("whole", 77.5, 0.3, 0.04, first_call_cpu=36.3, eager_step_cpu=0.2)
    regional = CompileRun("regional", 65.5, 0.3, 0.04, (), {}, None, block.fqns, first_call_cpu=23.6, eager_step_cpu=0.2)
    (first, *_) = _report(full=full, regional=regional, blocks=(block,), regional_asked=True).advice()
    assert first.text.startswith("the clocks disagree: compiling the blocks one by one took 65.2 s against 77.2 s of wall "
                                 "time, 23.4 s against 36.1 s of CPU time")
    assert first.code == "for block in model.b: block.compile()"


def test_advice_without_regional_points_at_it():
    block = RepeatedBlock("Block", ("b.0", "b.1"), True, 0.5)
    assert _report(blocks=(block,)).advice()[0].text.startswith("2 x Block (b.0-1) make 50% of the graph: graphtool compile --regional")


def test_the_gpu_note_names_what_a_gpu_changes():
    note = _report().gpu_note()
    assert "C++/Triton compile phase" in note and "dynamo (" in note and "do not" in note
    assert _report(device="NVIDIA H200").gpu_note() is None and _report(backend="aot_eager").gpu_note() is None


def test_compile_budget_is_a_pure_judgement():
    assert judge_compile_budget(_report(), 10).ok
    over = judge_compile_budget(_report(), 5)
    assert not over.ok and over.text == "compile took 5.5 s, budget 5 s: over by 0.5 s"
    stopped = _report(stopped=Failure("timeout", "--timeout 3 s ran out"))
    assert not judge_compile_budget(stopped, 100).ok


def test_the_document_follows_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("graphtool.schema").joinpath("compile.schema.json").read_text())
    block = RepeatedBlock("Block", ("b.0", "b.1"), True, 0.5)
    docs = [_report().to_dict(),
            _report(blocks=(block,), regional=CompileRun("regional", 2.0, 0.5, 0.1, (), {}, None, block.fqns), regional_asked=True,
                    warm=CompileRun("warm", 1.0, 0.5), stopped=Failure("compile_failed", "boom", "dynamo", "/m.py", 3)).to_dict()]
    for doc in docs:
        jsonschema.validate(json.loads(json.dumps(doc)), schema)
    names = docs[1]
    assert {"phases", "frames", "repeated_blocks", "full", "regional", "advice"} <= set(names)
    assert {"class", "fqns", "count", "identical", "share"} <= set(names["repeated_blocks"][0])
    assert {"seconds", "step_seconds"} <= set(names["full"]) and {"seconds", "step_seconds", "hazards"} <= set(names["regional"])
