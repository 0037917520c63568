"""Every reason torch 2.11-2.15 gives to skip, split or disable CUDA graphs, as data.

Read from torch's source (``_inductor/{cudagraph_utils,output_code,compile_fx,lowering,ir,scheduler,
cudagraph_trees}.py``, ``_dynamo/backends/cudagraphs.py``) of each release. Each :class:`Entry` has a
stable graphtool code (``CG001``...), torch's message template verbatim (``{...}`` marks what torch
fills in), where torch emits it, the settings it applies to, whether graphtool decides it from the
traced graphs and config before any run (``predicted``) or can only flag it (``risk``), and the fix.
``docs/cudagraphs.md`` is generated from this table (``python -m graphtool.analysis.cudagraphs.catalogue``);
a test fails when the two differ.

Applies-to keys: ``partition`` (``mode="reduce-overhead"``, ``graph_partition`` on, the default
outside fbcode), ``no-partition`` (reduce-overhead, ``graph_partition`` off), ``cudagraphs``
(``backend="cudagraphs"``).

>>> ENTRIES["CG002"].slug, by_slug("cpu-node").code
('cpu-node', 'CG002')
>>> clean_message("skipping cudagraphs due to skipping cudagraphs due to cpu device (x)")
'skipping cudagraphs due to cpu device (x)'
>>> clean_message("skipping cudagraphs due to disabling cudagraphs due to incompatible op aten.nonzero.default Found from x.py")
'skipping cudagraphs due to incompatible op aten.nonzero.default'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphtool.analysis.diagnostics import BREAK_FIX, HOST_SYNC_FIX

PARTITION, NO_PARTITION, CUDAGRAPHS = "partition", "no-partition", "cudagraphs"
RO = (PARTITION, NO_PARTITION)
ALL = (PARTITION, NO_PARTITION, CUDAGRAPHS)
PREFIX = "skipping cudagraphs due to "


@dataclass(frozen=True)
class Entry:
    code: str
    slug: str  # the finding's code in graphtool's reports (``Reason.code``)
    title: str
    template: str  # torch's message, verbatim; "" where torch logs nothing
    emitted_by: str  # torch file:function
    applies_to: tuple[str, ...]
    kind: str  # skip (the whole graph runs without CUDA graphs) | split (a partition boundary) | risk | note
    decided: str  # predicted | risk
    fix: str
    releases: str = "2.11+"
    silent: str = ""  # when torch says nothing: under which settings, and what it does instead
    reworded: str = ""  # "2.15+: <torch's message from that release on>", where a later torch changed the words

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    def on(self, version: tuple[int, int]) -> bool:
        """Whether torch ``version`` (major, minor) has this reason: ``releases`` is ``2.13+`` or ``2.11-2.12``.

        >>> ENTRIES["CG028"].on((2, 11)), ENTRIES["CG028"].on((2, 15)), ENTRIES["CG014"].on((2, 13))
        (False, True, False)
        """
        def parse(v: str) -> tuple[int, int]:
            major, minor = v.split(".")
            return int(major), int(minor)

        if self.releases.endswith("+"):
            return version >= parse(self.releases[:-1])
        low, high = self.releases.split("-")
        return parse(low) <= version <= parse(high)


_E = Entry
ENTRIES_LIST: tuple[Entry, ...] = (
    _E("CG001", "caching-allocator", "the CUDA caching allocator is disabled",
       "skipping cudagraphs due to cudagraph capture requires the caching allocator; current allocator is uncached",
       "cudagraph_utils.py:check_caching_allocator_for_cudagraphs (via compile_fx.py:fx_codegen_and_compile)", RO, "skip", "predicted",
       "unset PYTORCH_NO_CUDA_MEMORY_CACHING (and do not call torch.cuda.caching_allocator_enable(False))", "2.13+"),
    _E("CG002", "cpu-node", "a node runs on the CPU",
       "skipping cudagraphs due to cpu device ({node}). Found from : \n {stack_trace}",
       "cudagraph_utils.py:check_multiple_devices_or_any_cpu_nodes (compile_fx.py; _dynamo/backends/cudagraphs.py:check_for_skip)",
       (NO_PARTITION, CUDAGRAPHS), "skip", "predicted",
       "create tensors on the input's device (device=x.device) and avoid .cpu()/.item() in forward"),
    _E("CG003", "multiple-devices", "nodes on several devices",
       "skipping cudagraphs due to multiple devices: {devices}",
       "cudagraph_utils.py:check_multiple_devices_or_any_cpu_nodes", ALL, "skip", "predicted",
       "keep the whole model and its inputs on one CUDA device"),
    _E("CG004", "incompatible-op", "a host sync: aten._local_scalar_dense (.item())",
       "disabling cudagraphs due to incompatible op {target} Found from {stack_trace}",
       "compile_fx.py:fx_codegen_and_compile (utils.py:get_first_incompatible_cudagraph_node); cudagraphs backend: "
       "'skipping cudagraphs due to incompatible op ({node})' from check_for_skip",
       (NO_PARTITION, CUDAGRAPHS), "skip", "predicted",
       "keep the value on the device (torch.where instead of a Python branch), or move .item() out of the compiled region"),
    _E("CG005", "incompatible-op", "aten._assert_scalar (a runtime check on a data-dependent value)",
       "disabling cudagraphs due to incompatible op {target} Found from {stack_trace}",
       "compile_fx.py:fx_codegen_and_compile (utils.py:FORBIDDEN_CUDAGRAPH_OPS)", (NO_PARTITION, CUDAGRAPHS), "skip", "predicted",
       "drop torch._check on data-dependent values inside the compiled region",
       silent="torch 2.13 lists it by packet name ('aten._assert_scalar'), which never equals an OpOverload node's name: "
              "the check does not fire, and graphtool (asking torch's own check) reports none either"),
    _E("CG006", "incompatible-op", "rng-state ops (run_and_save_rng_state / run_with_rng_state: checkpointed random ops)",
       "disabling cudagraphs due to incompatible op {target} Found from {stack_trace}",
       "compile_fx.py:fx_codegen_and_compile (utils.py:FORBIDDEN_CUDAGRAPH_OPS)", (NO_PARTITION, CUDAGRAPHS), "skip", "predicted",
       "avoid random ops (dropout) inside torch.utils.checkpoint, or use preserve_rng_state=False"),
    _E("CG007", "incompatible-op", "a custom op tagged torch.Tag.cudagraph_unsafe",
       "disabling cudagraphs due to incompatible op {target} Found from {stack_trace}",
       "compile_fx.py:fx_codegen_and_compile (utils.py:is_cudagraph_unsafe_fx_node)", (NO_PARTITION, CUDAGRAPHS), "skip", "predicted",
       "keep graph_partition on so the op is split out, or drop the tag if the op is capture-safe"),
    _E("CG008", "incompatible-op", "index_put_ with a boolean mask",
       "index_put_ fallback with boolean indexing is not compatible with CUDA graphs Found from : \n {stack_trace}",
       "lowering.py:index_put_fallback; compile_fx.py:fx_codegen_and_compile ('incompatible op')", (NO_PARTITION, CUDAGRAPHS), "skip",
       "predicted", "use torch.where(mask, value, x) instead of x[mask] = value"),
    _E("CG009", "incompatible-op", "a sparse tensor output",
       "sparsity not handled. Please file issue for sparse inference weights. Found from : \n {stack_trace}",
       "ir.py:FallbackKernel (sparse outputs); utils.py:is_cudagraph_unsafe_fx_node", (NO_PARTITION, CUDAGRAPHS), "skip", "predicted",
       "convert sparse tensors to dense (.to_dense()) before the compiled region"),
    _E("CG010", "incompatible-op", "an unbacked symbol (a data-dependent size: nonzero, boolean masking, .item() with capture_scalar_outputs)",
       "disabling cudagraphs due to incompatible op {target} Found from {stack_trace}",
       "compile_fx.py:fx_codegen_and_compile (utils.py:get_first_incompatible_cudagraph_node: free_unbacked_symbols)",
       (NO_PARTITION, CUDAGRAPHS), "skip", "predicted",
       "keep shapes static: torch.where(mask, x, 0) instead of x[mask]; pad to a fixed size"),
    _E("CG011", "mutated-input", "a mutated input that is not static (not a parameter, buffer or mark_static_address tensor)",
       "skipping cudagraphs due to mutated inputs ({n} instances). Found from : \n {stack_trace}",
       "cudagraph_utils.py:get_mutation_stack_trace via check_for_mutation (cudagraph_trees.py, at run time with "
       "cudagraph_support_input_mutation) or check_for_mutation_ignore_cuda_graph_managed_tensor (output_code.py; "
       "_dynamo/backends/cudagraphs.py)", ALL, "skip", "predicted",
       "clone the input before mutating it, mark it static (torch._dynamo.mark_static_address), or mutate a registered buffer"),
    _E("CG012", "input-storage-mutation", "set_() on a graph input (its storage is replaced)",
       "skipping cudagraphs due to input storage mutation ({n} instances). Found from:\n {stack_trace}",
       "output_code.py:CompiledFxGraph.__init__ (cudagraph_utils.py:get_input_storage_mutation_reason)", RO, "skip", "predicted",
       "avoid set_()/resize_() on inputs; return a new tensor instead", "2.13+"),
    _E("CG013", "non-tensor-input", "a graph input that is not a Tensor, SymInt, Generator or opaque object",
       "skipping cudagraphs due to ['non-Tensor inputs']",
       "output_code.py:CompiledFxGraph.__init__ (cudagraph_tests) -> cudagraph_post_compile", RO, "skip", "predicted",
       "pass tensors (or ints) to the compiled function; close over other values",
       silent="with graph_partition on, cudagraph_partition_post_compile disables CUDA graphs without a log line or counter"),
    _E("CG014", "complex-memory-overlap", "an input whose elements overlap in memory (as_strided/unfold windows)",
       "skipping cudagraphs due to ['complex memory overlap']",
       "output_code.py:CompiledFxGraph.__init__ (complex_memory_overlap)", RO, "skip", "predicted",
       "pass .contiguous() inputs", "2.11-2.12",
       silent="with graph_partition on, cudagraph_partition_post_compile disables CUDA graphs without a log line or counter"),
    _E("CG015", "control-flow", "torch.cond / torch.while_loop in the graph",
       "skipping cudagraphs due to control flow operator: torch.cond. Found from : \n {stack_trace}",
       "lowering.py:cond / while_loop (while_loop only with graph_partition off)", ALL, "skip", "predicted",
       "replace torch.cond by torch.where on both branches' results when they are cheap"),
    _E("CG016", "dynamic-graph", "symbolic input shapes with cudagraph_skip_dynamic_graphs=True",
       "skipping cudagraphs due to graph with symbolic shapes inputs and config.triton.cudagraph_skip_dynamic_graphs=True. Found from {stack_trace}",
       "compile_fx.py:fx_codegen_and_compile", (NO_PARTITION,), "skip", "predicted",
       "mark sizes static (torch._dynamo.mark_static) or leave cudagraph_skip_dynamic_graphs off"),
    _E("CG017", "cpp-wrapper", "cpp_wrapper with graph partitioning",
       "skipping cudagraphs due to cpp-wrapper does not support graph partition yet",
       "compile_fx.py:get_cpp_wrapper_config", (PARTITION,), "skip", "predicted",
       "turn cpp_wrapper off, or graph_partition off", "2.12+"),
    _E("CG018", "override-annotation", "a torch._dynamo.override_cudagraphs annotation turns them off",
       "disabling cudagraphs due to override_cudagraphs annotation",
       "compile_fx.py:compile_fx_aot (cudagraph_annotation); for the backward only: 'disabling cudagraphs for backward due to "
       "override_cudagraphs annotation'", RO, "skip", "predicted", "remove the annotation where CUDA graphs are wanted", "2.12+"),
    _E("CG019", "cpu-only-graph", "a graph with no CUDA node at all",
       "", "output_code.py:CompiledFxGraph.post_compile (counters['inductor']['cudagraph_skips'] only)", RO, "skip", "predicted",
       "move the model and inputs to the GPU (model.cuda(), x.cuda())",
       silent="always: torch bumps counters['inductor']['cudagraph_skips'] and logs nothing"),
    _E("CG020", "partition-split", "graph partition split: CPU op",
       "{device} ops", "scheduler.py:Scheduler.should_partition (logged only at debug level)", (PARTITION,), "split", "predicted",
       "create tensors on the input's device and avoid .cpu() so the graph stays in one piece",
       silent="torch logs partition reasons only at debug level (TORCH_LOGS=+cudagraphs)"),
    _E("CG021", "partition-split", "graph partition split: device copy",
       "DeviceCopy ops", "scheduler.py:Scheduler.should_partition", (PARTITION,), "split", "predicted",
       "create tensors on the right device instead of copying them (device=x.device)",
       silent="torch logs partition reasons only at debug level", reworded="2.15+: cross-device ops"),
    _E("CG022", "partition-split", "graph partition split: control flow",
       "Conditional ops", "scheduler.py:Scheduler.should_partition (CUDAGraph-unsafe in 2.14+)", (PARTITION,), "split",
       "predicted", "replace torch.cond with torch.where", silent="torch logs partition reasons only at debug level",
       reworded="2.14+: Switch ops"),
    _E("CG023", "partition-split", "graph partition split: unbacked binding (data-dependent size or value)",
       "unbacked binding ops", "scheduler.py:Scheduler.should_partition", (PARTITION,), "split", "predicted",
       "keep shapes and values on the device (torch.where instead of masking, no .item())",
       silent="torch logs partition reasons only at debug level"),
    _E("CG024", "partition-split", "graph partition split: CUDA-graph-unsafe op",
       "CUDAGraph-unsafe custom ops", "scheduler.py:Scheduler.should_partition (utils.py:is_cudagraph_unsafe_op)", (PARTITION,), "split",
       "predicted", "move the op out of the compiled region, or replace it with a device-side equivalent",
       silent="torch logs partition reasons only at debug level"),
    _E("CG025", "partition-split", "graph partition split: uses an unbacked symbol of an op in cudagraph_unsafe_unbacked_ops",
       "uses cudagraph-unsafe unbacked symint: {symbol}", "scheduler.py:Scheduler._uses_cudagraph_unsafe_unbacked_symint", (PARTITION,),
       "split", "predicted", "remove the op from config.cudagraph_unsafe_unbacked_ops if its sizes are capture-safe",
       silent="torch logs partition reasons only at debug level"),
    _E("CG026", "partition-split", "graph partition split: dynamic shape op with cudagraph_skip_dynamic_graphs=True",
       "dynamic shape ops", "scheduler.py:Scheduler.should_partition", (PARTITION,), "split", "predicted",
       "mark sizes static, or leave cudagraph_skip_dynamic_graphs off", silent="torch logs partition reasons only at debug level"),
    _E("CG027", "partition-split", "graph partition split: an op in config.custom_should_partition_ops",
       "custom partition op: {op}", "scheduler.py:Scheduler.should_partition", (PARTITION,), "split", "predicted",
       "remove the op from config.custom_should_partition_ops", "2.14+", silent="torch logs partition reasons only at debug level"),
    _E("CG028", "small-partition", "a partition below cudagraph_min_partition_size kernels",
       "Partition {i} has {n} kernels, below minimum size {min}, skipping cudagraph", "scheduler.py:Scheduler.graph_partition",
       (PARTITION,), "split", "predicted", "lower triton.cudagraph_min_partition_size, or remove the splits around the partition",
       "2.12+", silent="debug level only; graphtool counts ops before fusion, so the kernel count is an estimate"),
    _E("CG029", "forward-skipped", "the backward of a forward that skipped",
       "", "_dynamo/backends/cudagraphs.py:backward_cudagraphs (returns the graph when do_cudagraphs is off)", (CUDAGRAPHS,), "skip",
       "predicted", "fix the forward's reason; the backward follows it", silent="torch logs nothing for the backward"),
    _E("CG037", "uncompiled-graph", "a graph with no op at all (a backward that passes the gradient through, as for y - 1)",
       "", "compile_fx.py:_compile_fx_inner (count_calls(gm.graph) == 0: returns make_boxed_func(gm.forward), uncompiled)", RO,
       "note", "predicted", "nothing to fix: the graph has no work for a CUDA graph to save; backend=\"cudagraphs\" records one for it",
       silent="always: no skip counter, no log line, only a 'backward no-op' compile event; inductor compiles nothing "
              "for it (outside AOTInductor and with functorch's bundled_autograd_cache off), so cudagraph trees never see it"),
    # ---- run-time risks: decided by what happens while the model runs ----
    _E("CG030", "rerecord-limit", "a function re-recorded too often (static input addresses change)",
       "skipping cudagraph due to function {id} exceeding max re-recording limit (={limit}) on cudagraph node {node} due to {reason}.",
       "cudagraph_trees.py:CUDAGraphTreeManager._run", RO, "risk", "risk",
       "keep static inputs (parameters, mark_static_address tensors) at fixed addresses; raise triton.cudagraph_unexpected_rerecord_limit"),
    _E("CG031", "dynamic-shape", "many distinct input sizes: one CUDA graph recorded per size",
       "CUDAGraph supports dynamic shapes by recording a new graph for each distinct input size. Recording too many CUDAGraphs may lead "
       "to extra overhead. We have observed {n} distinct sizes. ...",
       "cudagraph_utils.py:maybe_warning_due_to_dynamic_shape", ALL, "risk", "risk", "pad inputs to a few fixed sizes"),
    _E("CG032", "capture-sizes", "a size outside triton.cudagraph_capture_sizes",
       "", "cudagraph_trees.py:cudagraphify_impl (is_cudagraph_capture_sizes)", RO, "risk", "risk",
       "add the size to triton.cudagraph_capture_sizes, or pad to a listed size", silent="always: that size runs without CUDA graphs, unlogged"),
    _E("CG033", "overwritten-output", "an output read after the next replay overwrote it",
       "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. Stack trace: {stack_trace}. "
       "To prevent overwriting, clone the tensor outside of torch.compile() or call torch.compiler.cudagraph_mark_step_begin() "
       "before each model invocation.",
       "cudagraph_trees.py:CUDAGraphNode (check_output_liveness)", ALL, "risk", "risk",
       "clone outputs kept across steps, or call torch.compiler.cudagraph_mark_step_begin() each step"),
    _E("CG034", "pending-backward", "a new forward while an earlier forward's backward is pending",
       "", "cudagraph_trees.py:CUDAGraphTreeManager (running_forwards_with_pending_backwards)", ALL, "risk", "risk",
       "run backward (or torch.compiler.cudagraph_mark_step_begin()) before the next forward",
       silent="always: the trees warm up again instead of replaying, unlogged"),
    _E("CG035", "bisector", "the compiler bisector disabled CUDA graphs",
       "skipping cudagraphs due to bisector", "output_code.py:cudagraph_post_compile (CompilerBisector)", RO, "risk", "risk",
       "a debugging tool: unset the bisector"),
    _E("CG036", "cudagraph-policy", "a config.cudagraph_policy whose should_wrap says no",
       "", "output_code.py:CompiledFxGraph.post_compile", RO, "risk", "risk", "check the policy's should_wrap", "2.12+",
       silent="always: only counters['inductor']['cudagraph_skips']"),
    # ---- graphtool's own notes: what stands between regions ----
    _E("CG090", "graph-break", "a graph break: each region is captured separately",
       "", "dynamo", ALL, "note", "predicted", BREAK_FIX),
    _E("CG091", "host-sync", "a host sync between graphs (.item(), data-dependent shape)",
       "", "dynamo", ALL, "note", "predicted", HOST_SYNC_FIX),
    _E("CG092", "rng-generator", "a torch.Generator is a graph input",
       "", "graphtool", RO, "risk", "risk", "register custom torch.Generator objects with the CUDA graph"),
)

ENTRIES: dict[str, Entry] = {e.code: e for e in ENTRIES_LIST}
_FIRST_BY_SLUG: dict[str, Entry] = {}
for _e in ENTRIES_LIST:
    _FIRST_BY_SLUG.setdefault(_e.slug, _e)

#: incompatible-op codes by what the op is
INCOMPATIBLE = {"local_scalar_dense": "CG004", "assert_scalar": "CG005", "rng": "CG006", "unsafe_tag": "CG007",
                "bool_index_put": "CG008", "sparse": "CG009", "unbacked": "CG010"}
#: partition split codes by torch's should_partition reason
SPLITS = {"cpu ops": "CG020", "DeviceCopy ops": "CG021", "Conditional ops": "CG022", "unbacked binding ops": "CG023",
          "CUDAGraph-unsafe custom ops": "CG024", "dynamic shape ops": "CG026", "small partition": "CG028"}


def by_slug(slug: str) -> Entry:
    """The first entry for a finding code (``cpu-node`` -> CG002)."""
    return _FIRST_BY_SLUG[slug]


_DOUBLED = re.compile(r"^(?:(?:skipping|disabling) cudagraphs due to )+", re.I)


def clean_message(msg: str) -> str:
    """torch's message with its prefix said once and without the ``Found from`` stack trace."""
    head = re.split(r"\.?\s*Found from\s*:?", msg, maxsplit=1)[0].strip()
    m = _DOUBLED.match(head)
    if not m or m.group(0).lower().count("cudagraphs due to") < 2:
        return head
    return PREFIX + head[m.end():]


def markdown() -> str:
    """docs/cudagraphs.md: the catalogue as a page."""
    lines = [
        "# Why CUDA graphs are skipped, split or disabled: the catalogue",
        "",
        "Generated from `graphtool/analysis/cudagraphs/catalogue.py` by",
        "`python -m graphtool.analysis.cudagraphs.catalogue > docs/cudagraphs.md`; a test fails when they differ.",
        "Read from torch 2.11 to 2.15's source. *Applies to*: `partition` = `mode=\"reduce-overhead\"` with",
        "`torch._inductor.config.graph_partition` on (the default outside fbcode), `no-partition` = the same with it off,",
        "`cudagraphs` = `backend=\"cudagraphs\"`. *Decided*: `predicted` = graphtool decides it from the traced graphs,",
        "inputs and config before any GPU run; `risk` = only a run can tell, graphtool lists it as a risk.",
        "Override the settings graphtool reads from your torch with `graphtool cudagraphs --set graph_partition=false`.",
        "",
        "torch often says the prefix twice (`skipping cudagraphs due to skipping cudagraphs due to cpu device`):",
        "compile_fx and the cudagraphs backend prefix a reason that already carries it. graphtool prints the clean",
        "message and keeps torch's verbatim one in `--format json` (`torch_message`).",
        "",
        "| code | reason | kind | decided | applies to | releases | torch's message | where torch emits it | silent | fix |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", "\\n") or "-"

    for e in ENTRIES_LIST:
        tmpl = f"`{esc(e.template)}`" if e.template else "(none)"
        if e.reworded:
            since, _, words = e.reworded.partition(": ")
            tmpl += f" ({since}: `{esc(words)}`)"
        lines.append(f"| {e.code} | {esc(e.title)} | {e.kind} | {e.decided} | {', '.join(e.applies_to)} | {e.releases} | {tmpl} | "
                     f"{esc(e.emitted_by)} | {esc(e.silent)} | {esc(e.fix)} |")
    lines.append("")
    lines += STEADY_STATE.splitlines()
    lines.append("")
    return "\n".join(lines)


#: docs/cudagraphs.md's last section: what the loop's steady state is, what is predicted, what a GPU confirmed
STEADY_STATE = """## Steady state: what a loop compiles and records, step by step

`graphtool cudagraphs` runs the model's step several times on the stand-in (`--steps N`, default 3; `trace
--cudagraphs` runs 3), as a loop does: every `.grad` set to None, the forward, the backward in training, and
the inputs and buffers as the previous step left them (an input `t_()`-ed by step 1 is transposed in step 2);
with `--dynamic` each step also runs the second input size, as a loop serving both sizes would.
Per step it reports the graphs dynamo compiled, each recompile with its guard failure in torch's words
(`compilation_metrics`' `recompile_reason`) at the function it recompiled, and what cudagraph trees do with
each call (`torch/_inductor/cudagraph_trees.py`, the same for `backend="cudagraphs"`):

- each CUDA-graphed piece (a partition inductor CUDA-graphs, or the whole graph) is one function, and one
  more per set of integer inputs it gets: a dynamic size records one graph per size (`cudagraphify_impl`);
- a function's first call is a warm-up, run eagerly, and so is the rest of that step;
- after that a call records a CUDA graph the first time it is reached at its place in the step's path (a
  region called k times in a step is k recordings of one function) and replays it afterwards;
- cudagraph trees' memory pool is made with one more `torch.cuda.graph` capture, once, when the first
  function reaches the trees (a skip checked at run time, inside the trees, makes it too);
- a graph with no op at all (the backward of `y - 1` passes the gradient through) is never compiled by
  inductor: `compile_fx_inner` returns it as it is when `count_calls(gm.graph) == 0` (CG037, with graph
  partitioning on or off; read in 2.13's and 2.14's source, seen on 2.11 on an H200), so
  `mode="reduce-overhead"` CUDA-graphs nothing of it; the cudagraphs backend records a graph for it all the same;
- a frame whose compile fails is no graph: AOT autograd cannot trace a custom op's backward that reads
  `.tolist()` (transformers 5.17's `grouped_mm_fallback` for Mixtral's experts), dynamo runs the frame eagerly
  ("Backend compiler exception ... Adding a graph break") and compiles the frames it calls, and `unique_graphs`
  counts only compiles that returned; on the meta stand-in an eager call of such an op runs its fake kernel, a
  frame a real device never compiles (there its kernel runs under `torch._disable_dynamo`): graphtool skips it;
- a 0-d CPU tensor made of constants alone (`torch.tensor(2.0)` in forward) is inlined into the GPU kernel
  that reads it: no CPU op, no partition split (a `.cpu()` round trip still splits).

The loop is **steady** from the first step after which nothing is compiled, warmed up or recorded. A loop
whose last step still compiles, or records a piece it had recorded before, says `NOT STEADY`: a graph recorded
again every step is the worst case for `mode="reduce-overhead"`. A last step that records a piece for the first
time (an input that alternates between two shapes warms up two graphs, then records them one step apart) says
`not steady yet` and how many steps would show it settle. JSON: `cudagraphs.steady_state` (`per_step`, `recompiles`,
`functions_graphed`, `recordings`, `rerecords`, `captures`).

**Confirmed on a GPU**: for the 14 example scripts, with both backends (28 rows), torch 2.11 on an NVIDIA H100
(2026-11-24, 5 steps) skipped or not, compiled as many graphs (recompiles included), CUDA-graphed as many pieces
(distinct functions recorded, or graphs run in step 5) and entered as many `torch.cuda.graph` captures as
graphtool predicts (`tests/analysis/test_gpu_agreement.py`, the rows in `tests/truth/gpu/`); so did torch 2.11 on an
NVIDIA H200 (2026-11-26, 5 steps) for the steady-state models of `tests/fixtures/steady` and 5 examples, both
backends (graphs compiled, functions recorded, captures, skips, the step that raised), where a model that branches on
data the CUDA generator drew gets the GPU's host reads replayed; the Mixtral row only under the transformers
release the H200 had (5.17.0).
**Confirmed on the CPU**: the graphs dynamo compiles and each recompile's guard failure, against a real
`torch.compile` loop through AOT autograd (`backend="aot_eager"`; `tests/analysis/test_steady_truth.py`: a
`.tolist()` loop with a truth-value branch, an `nn.MultiheadAttention` block with a padding mask in inference, an
input `t_()`-ed every step, Mixtral MoE routing from a tiny transformers config, a custom op whose backward reads
`.tolist()`). **Predicted only**: the recordings of models beyond those rows;
CUDA-graph counts need a GPU to confirm. **Not judged**: MoE routing that loops over a `nonzero`/`torch.where`
result in eager code (SwitchTransformers): the meta stand-in has no data for those sizes, and graphtool says
how many regions it could judge."""


if __name__ == "__main__":  # pragma: no cover - the doc generator
    print(markdown(), end="")
