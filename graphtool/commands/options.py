"""Every option of every command, declared once: the CLI's flags, the API's and the Session's keyword arguments and
docs/options.md all read this table.

:data:`LOAD` are a :class:`~graphtool.commands.session.Session`'s own (what to load and how to launch it:
``graphtool.load(model, *inputs, **LOAD)``); each :class:`Command` lists the ones its CLI takes and its own
(``Session.trace(**options)``). An option's Python name is the keyword (``settings``), its flag what the CLI
calls it (``--set``); ``flag=None``: Python only (a callable, a list of inputs); ``view``: the CLI's alone, how it shows
the result (``--format``, ``--check``), which the result itself answers (``to_dict()``, ``found``), or lint's gate over
many models (``--run``, ``--jobs``).

    >>> COMMANDS["cudagraphs"].option("settings").cli
    '--set'
    >>> split("trace", {"ddp": True, "bench": True})
    ({'ddp': True}, {'bench': True})
    >>> split("trace", {"bech": True})
    Traceback (most recent call last):
    ...
    graphtool.errors.UsageError: trace() got an unknown option bech=
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from graphtool.capture.steady_state import DEFAULT_STEPS
from graphtool.errors import UsageError
from graphtool.render.pictures import LAYOUT_TIMEOUT


@dataclass(frozen=True)
class Option:
    name: str  # the keyword argument
    default: Any = None
    help: str = ""
    flag: Optional[str] = ""  # the CLI's, "" for --NAME-WITH-DASHES; None: Python only
    short: str = ""
    metavar: str = ""
    type: Any = None  # the CLI's type where the default does not say it (Optional[str], list[str])
    off: str = ""  # a switch's off flag ("--no-memory")
    view: bool = False  # the CLI's alone (how it shows the result, lint's gate): no keyword argument

    @property
    def cli(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    load: tuple[str, ...]  # the LOAD options its CLI takes
    options: tuple[Option, ...] = ()
    cached: bool = True  # a Session answers the same question twice from what it kept
    timed: bool = True  # the Session stops it at its timeout; False: it keeps its own (render's layout, a child)

    def option(self, name: str) -> Optional[Option]:
        return next((o for o in self.options if o.name == name), None) or next((o for o in LOAD if o.name == name), None)

    @property
    def keywords(self) -> tuple[Option, ...]:
        """What the Session's method takes."""
        return tuple(o for o in self.options if not o.view)


OPT_STR, OPT_INT, OPT_FLOAT, OPT_PATH, STRS = Optional[str], Optional[int], Optional[float], Optional[Path], list[str]

#: a Session's own options: the model's load and launch, for every question it is asked
LOAD = (
    Option("entry", None, "Factory function returning (model, inputs[, kwargs]).", type=OPT_STR),
    Option("device", None, "Build the model and inputs under this device (e.g. meta, for models too big for memory).",
           type=OPT_STR),
    Option("inference", False, "Trace the forward only (no backward graph)."),
    Option("backend", "inductor", "Whose graphs: the AOT stage of inductor (torch.compile's default), aot_eager or "
           "cudagraphs."),
    Option("timeout", None, "Stop with exit 2 after this many seconds, naming the line of the script that was running "
           "(default: no limit).", metavar="SECONDS", type=OPT_FLOAT),
    Option("ddp", False, "Run the model as DDP(torch.compile(model)) in torch's fake process group (no GPU): the graphs "
           "DDP's optimizer splits at gradient buckets."),
    Option("fsdp2", False, "Run the model under FSDP2 as rank 0 of a fake process group of --world-size ranks (no GPU): "
           "graphtool calls fully_shard on every module of each nn.ModuleList, then on the model, then "
           "torch.compile(model); a script's get_distributed_model(world_size) may return a model it sharded itself, "
           "and get_optimizer(model) the optimizer whose state is counted."),
    Option("world_size", 2, "With --ddp or --fsdp2: the number of ranks the launch will use.", metavar="N"),
    Option("bucket_cap_mb", 25.0, "With --ddp: DDP's bucket_cap_mb (DDP's default 25).", metavar="MB"),
    Option("find_unused_parameters", False, "With --ddp: DDP(..., find_unused_parameters=True), as the launch will "
           "wrap it (without it, a model with parameters that get no gradient fails on its second step: graphtool "
           "runs two and says so)."),
    Option("optimizer", None, "The optimizer the training loop builds, as a script's get_optimizer(model): a callable "
           "taking the model (its state is counted by memory's fit).", flag=None),
    Option("model_kwargs", None, "Keyword arguments of the model's call.", flag=None),
    Option("debug", False, "torch's own logs, and full tracebacks (the CLI's --debug).", flag=None),
    Option("progress", None, "A graphtool.commands.progress.Progress told what is being done.", flag=None),
)

_MODEL = ("entry", "device", "inference", "backend", "timeout")
_LAUNCH = ("ddp", "fsdp2", "world_size", "bucket_cap_mb", "find_unused_parameters")
FORMAT = Option("format", "table", "table (rich, default), json or yaml: one document on stdout.", short="-f", view=True)
CHECK = Option("check", False, "Exit 1 when anything is found (for CI).", view=True)
SCHEDULE = "get_input_schedule()"
CG_BACKEND = Option("backend", "inductor", 'inductor (mode="reduce-overhead") or cudagraphs (backend="cudagraphs").')
FIT = ("Predict the training step's peak and say whether it fits: a size (24GiB, 80GB; GiB 1024-based, GB 1000-based) "
       "or a GPU name (H100, H200, A100-40GB, A100-80GB, L4, A10G, RTX4090, RTX3090, T4, V100-16GB, V100-32GB).")
BUDGETS = ("Sweep torch's activation_memory_budget (alone: 1,0.8,0.6,0.4,0.2,0; or a list in 0..1 such as 1,0.5,0.1): "
           "what its partitioner saves and recomputes, and the step's peak at each.")

COMMANDS = {c.name: c for c in (
    Command("trace", "The graphs dynamo and AOT autograd make of a model.", _MODEL + _LAUNCH, (
        Option("cudagraphs", None, "Add the CUDA-graph verdict for this backend (inductor or cudagraphs); costs a "
               "second, stand-in trace.", type=OPT_STR),
        Option("bench", False, "Add `graphtool bench` timings (eager vs torch.compile, defaults) to the report."),
        Option("coverage", False, "Add capture coverage: calls captured, fallbacks to eager, the share of torch calls in "
               "graphs (nested graph breaks off and on); costs an eager run and two compiles without code generation."),
        Option("graph_code", False, "Each graph's readable source (result.graph_code; the CLI's --out writes it).",
               flag=None),
        Option("out", None, "Also write forward.py, backward.py and report.json into this folder.", short="-o",
               type=OPT_PATH, view=True),
        Option("verbose", False, "List every placeholder (by default many of one kind are one row, counted).", short="-v",
               view=True),
        Option("quiet", False, "Print the summary line alone (diagnostics and tables left out).", short="-q", view=True),
        FORMAT)),
    Command("mutations", "Inputs the model mutates, and outputs that alias inputs.", _MODEL, (
        Option("allow", (), "Mutations that are expected: buffers, parameters, user_inputs, optimizer_state, or an FQN "
               "pattern ('*.k_cache'); repeatable. Adds to allow_mutations in graphtool.yaml.", type=Optional[STRS]),
        Option("show_all", False, "List every input, not only mutated ones.", flag="--all", view=True),
        FORMAT, CHECK)),
    Command("devices", "Which device every node would run on, on a GPU.", _MODEL, (FORMAT, CHECK)),
    Command("cudagraphs", "Would CUDA graphs be applied, region by region; if not, why.",
            ("entry", "device", "inference", "timeout") + _LAUNCH, (
        CG_BACKEND,
        Option("dynamic", False, "Also run a second input size (the script's dynamic_inputs or dynamic_dims, else "
               "token ids one longer, else batch + 1), as a model serving several sizes would."),
        Option("settings", (), "Override a setting read from the installed torch (graph_partition, cudagraph_trees, "
               "cudagraph_support_input_mutation, cudagraph_skip_dynamic_graphs, cudagraph_min_partition_size, "
               "cpp_wrapper, cudagraph_backend_support_input_mutation); repeatable.", flag="--set",
               metavar="KEY=VALUE", type=STRS),
        Option("steps", DEFAULT_STEPS, "Run the model's step N times on the stand-in, as a loop would (grads reset, inputs and "
               "buffers as the step left them): each step's compiles, recompiles and CUDA-graph recordings; N >= 1.",
               metavar="N"),
        Option("schedule", False, f"Also predict the loop over the script's {SCHEDULE} (as graphtool shapes does, "
               "from the same load; in Python also the model's inputs per step): recompiles and CUDA graphs "
               "recorded per size, and what each recording holds in the pool."),
        FORMAT, CHECK)),
    Command("memory", "What training keeps for backward, eager beside compiled.",
            ("entry", "device", "backend", "timeout") + _LAUNCH, (
        Option("by", "line", "Group saved activations per line, module or op."),
        Option("depth", None, "With --by module: module levels to keep (1 = the model's children; a list index "
               "counts with its list).", type=OPT_INT),
        Option("top", 10, "Rows per table (JSON and YAML list everything)."),
        Option("dynamic", False, "Trace the input sizes that differ in the script's dynamic_inputs or dynamic_dims "
               "(else the sequence of token ids, or the batch) as symbols: bytes become formulas."),
        Option("schedule", False, f"Measure at the largest step of the script's {SCHEDULE} (the most input "
               "elements), and say what the CUDA graphs recorded at that size hold in cudagraph trees' pool."),
        Option("fit", None, FIT, metavar="SIZE|GPU", type=OPT_STR),
        Option("budgets", None, BUDGETS, metavar="[LIST]", type=OPT_STR),
        FORMAT)),
    Command("shapes", "Recompiles and CUDA-graph recordings over a loop whose input shapes change.",
            ("entry", "device", "inference", "timeout"), (
        Option("sizes", (), "Sizes of one input dimension per step: 17,33,64 (in order), 17*40,33*12 or {17: 40, "
               "33: 12} (a length histogram, shuffled), 1..512 (drawn per step, --steps of them); every input sharing "
               "its sizes follows; repeatable.", metavar="INPUT:DIM=SIZES", type=STRS),
        Option("steps", None, "Steps drawn from a range (default 100); caps a list.", metavar="N", type=OPT_INT),
        Option("max_steps", 1000, "Read at most N steps of the schedule; says what it left out.", metavar="N"),
        Option("seed", 0, "Seed for shuffled histograms and drawn ranges."),
        Option("mark_dynamic", (), "torch._dynamo.mark_dynamic on every step's input; repeatable.", metavar="INPUT:DIM",
               type=STRS),
        Option("maybe_mark_dynamic", (), "torch._dynamo.maybe_mark_dynamic on every step's input; repeatable.",
               metavar="INPUT:DIM", type=STRS),
        Option("dynamic", "auto", "torch.compile(dynamic=...): auto is torch's default (None).",
               metavar="auto|true|false", type=OPT_STR),
        CG_BACKEND,
        Option("settings", (), "Override a cudagraph setting (cudagraph_skip_dynamic_graphs, graph_partition, ...); "
               "repeatable.", flag="--set", metavar="KEY=VALUE", type=STRS),
        Option("stance", None, "torch.compiler.set_stance(STANCE) from step 2 on, as a loop sets it after its first "
               "compile: eager_on_recompile, fail_on_recompile, force_eager, default.", metavar="STANCE", type=OPT_STR),
        Option("advise", True, "Check padding to buckets and mark_dynamic by predicting again.", flag="--advice",
               off="--no-advice"),
        Option("schedule", None, f"The model's inputs for each step (else --sizes, else the script's {SCHEDULE}).",
               flag=None),
        FORMAT, CHECK)),
    Command("render", "Draw the autograd graph or an AOT graph with Graphviz.",
            ("entry", "device", "backend", "timeout"), (
        Option("graph", "autograd", "autograd, forward, backward or joint.", short="-g"),
        Option("output", None, "Output file (default: MODEL-GRAPH.svg here; in Python, the SVG or DOT text is "
               "returned).", short="-o", type=OPT_PATH),
        Option("fmt", None, "svg, png, pdf or dot (default: from the file name, else svg).", flag="--format",
               short="-f", type=OPT_STR),
        Option("collapse", "auto", "auto (fold by module above 120 nodes), module, or none."),
        Option("depth", None, "Fold at module depth N, counted by FQN: 1 = the model's children (layers), 2 = theirs "
               "(layers.0), containers included; default: the deepest that keeps about 60 boxes.", type=OPT_INT),
        Option("saved", False, "Autograd graph: show each node's saved tensors' shapes."),
        Option("region", 0, "Which compiled region (after graph breaks) to draw."),
    ), cached=False, timed=False),
    Command("bench", "Time eager, torch.compile and CUDA-graph replay side by side.",
            ("entry", "device", "inference", "timeout"), (
        Option("cudagraphs", False, "Also capture and replay a CUDA graph, and run mode=\"reduce-overhead\" (needs "
               "CUDA)."),
        Option("compile_mode", "default", "torch.compile mode (default, reduce-overhead, max-autotune...) or backend "
               "(aot_eager, inductor...); none to skip.", flag="--compile"),
        Option("backward", None, "Time forward + backward and check gradients (the default when something requires "
               "grad; --inference times the forward alone).", type=bool),
        Option("warmup", 10, "Untimed iterations before timing."),
        Option("iters", 100, "Iterations per timed repeat."),
        Option("repeat", 3, "Timed repeats (median, min, max and spread are over these)."),
        Option("in_place", False, "Time the model where the script (or the caller) put it, as trace --bench does "
               "(default: on --device, else on CUDA when there is one).", flag=None),
        FORMAT), cached=False),
    Command("compile", "Compile the model for real: where the time goes, which blocks repeat, regional vs whole.",
            ("entry", "device", "inference", "timeout"), (
        Option("backend", "inductor", "torch.compile backend (inductor, aot_eager, eager, ...)."),
        Option("mode", None, "torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs.",
               type=OPT_STR),
        Option("regional", False, "Also compile the repeated blocks one by one in a second fresh process."),
        Option("warm", False, "Also compile again in another process with inductor's caches on (the hits)."),
        Option("steps", 3, "Timed steps after the first call; the step time is their median.", metavar="N"),
        FORMAT), timed=False),  # fresh children, each within what is left of the Session's timeout
    Command("lint", "A CI gate for graph breaks, recompiles and skipped frames.",
            ("ddp", "fsdp2", "world_size", "bucket_cap_mb"), (
        # view=True here: the CLI's gate over many models, each in a child (graphtool.load(m).lint() lints one, here)
        Option("run", None, "Run this script unchanged (as __main__), every torch.compile redirected; arguments after "
               "--.", type=OPT_STR, view=True),
        Option("steps", None, "The model's inputs per call (each a tuple of positional arguments, or one tensor): "
               "recompiles are what a loop over them triggers.", flag=None),
        Option("max_graph_breaks", None, "Fail when a model has more graph breaks (default: no budget; breaks are "
               "shown, not failed).", type=OPT_INT),
        Option("max_recompiles", None, "Fail when a model recompiles more often (default: no budget).", type=OPT_INT),
        Option("max_skipped_frames", None, "Fail when dynamo gives up on more frames (runs them eagerly) in a model "
               "(default: no budget).", type=OPT_INT),
        Option("max_peak_memory", None, "Fail when the training step's predicted peak (graphtool memory --fit) does "
               "not fit this size or GPU: 24GiB, 80GB, H100 (default: no budget).", metavar="SIZE|GPU", type=OPT_STR),
        Option("min_coverage", None, "Fail when fewer of the model's torch calls run inside compiled graphs than this "
               "share (0.9: 90%; measures capture coverage, graphtool trace --coverage's figures; default: no budget).",
               metavar="SHARE", type=OPT_FLOAT),
        Option("coverage", False, "Also measure capture coverage: calls captured, fallbacks to eager, the share of torch "
               "calls in graphs."),
        Option("max_compile_seconds", None, "Fail when a model's cold compile (graphtool compile: a fresh process, "
               "inductor's caches off) takes longer (one more process per model, one model at a time; default: no "
               "budget).", metavar="SECONDS", type=OPT_FLOAT),
        Option("allowed_breaks", (), "Break reasons or gb ids accepted (the config's allowed_breaks).", flag=None),
        Option("dynamic", False, "Also run differently-sized inputs (the script's dynamic_inputs or dynamic_dims, "
               "else token ids one longer, else batch + 1) to catch recompiles."),
        Option("schedule", False, "Also run each step the script's get_input_schedule() yields (as graphtool shapes "
               "reads it): recompiles are the loop's own, and a frame that hits torch's recompile_limit fails lint "
               "whatever the budget.", view=True),
        Option("baseline", None, "Fail only on breaks not in this baseline file (or its content, in Python).",
               type=OPT_PATH),
        Option("update_baseline", False, "Write the current breaks to the baseline file and pass.", view=True),
        Option("strict", False, "Also fail when a baselined break no longer occurs (keeps the baseline tight).",
               view=True),
        Option("name", None, "The model's name in the baseline (default: its source file).", flag=None),
        Option("config", None, "Config file (default: graphtool.yaml or [tool.graphtool] in pyproject.toml).",
               type=OPT_PATH, view=True),
        Option("format", "text", "text, json, sarif, junit, github or html (one self-contained page).", short="-f",
               view=True),
        Option("output", None, "Write the report here; the terminal still gets the summary.", short="-o",
               type=OPT_PATH, view=True),
        Option("jobs", None, "Models linted in parallel, each in its own process (default 1).", short="-j",
               type=OPT_INT, view=True),
        Option("timeout", None, "Seconds each model may take (default: no limit).", type=OPT_FLOAT, view=True),
        Option("log", None, "Judge a real run's TORCH_TRACE logs (a folder, .log or .log.gz; repeatable) instead of "
               "running a model: its breaks and recompiles, every rank, with the same budgets, baseline and formats.",
               metavar="PATH", type=Optional[STRS], view=True),
    ), cached=False),
    Command("report", "Write one self-contained HTML report of everything.", _MODEL + _LAUNCH, (
        Option("output", None, "The HTML file (default: MODEL-report.html here; in Python, written only when given).",
               short="-o", type=OPT_PATH),
        Option("memory", True, "Measure what training saves for backward (one more eager forward).", off="--no-memory"),
        Option("layout_timeout", LAYOUT_TIMEOUT, "Seconds one picture's layout may take; a slower one is left out (the page "
               "says so)."),
        Option("fit", None, "A 'Will it fit' section: the training step's predicted peak, its live-bytes timeline as a "
               "picture, and whether it fits this size or GPU (as graphtool memory --fit).", metavar="SIZE|GPU",
               type=OPT_STR),
        Option("budgets", None, "With it, torch's activation_memory_budget swept (alone: 1,0.8,0.6,0.4,0.2,0), as "
               "graphtool memory --budgets.", metavar="[LIST]", type=OPT_STR),
        Option("schedule", False, f"A section with the loop over the script's {SCHEDULE}, as graphtool shapes "
               "predicts it."),
        Option("log", None, "A real run's TORCH_TRACE logs (a folder, .log or .log.gz; repeatable): a section with each "
               "fact of the run beside this prediction, as graphtool log --against.", metavar="PATH", type=Optional[STRS]),
        Option("compile", False, "A 'Compile time' section: the model compiled for real in fresh processes (inductor, "
               "caches off), as graphtool compile: where the time goes, the repeated blocks."),
    ), cached=False),
)}


def split(command: str, options: dict) -> tuple[dict, dict]:
    """``options`` as ``(the Session's, the command's own)``; a name neither takes is a usage error. A name both
    take (cudagraphs' ``backend``) is the command's."""
    cmd = COMMANDS[command]
    own = {o.name for o in cmd.keywords}
    load = {o.name for o in LOAD}
    unknown = [k for k in options if k not in own and k not in load]
    if unknown:
        raise unknown_option(f"{command}()", unknown[0], own | load)
    return ({k: v for k, v in options.items() if k not in own}, {k: v for k, v in options.items() if k in own})


def unknown_option(where: str, name: str, known) -> UsageError:
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=1)
    return UsageError(f"{where} got an unknown option {name}=",
                      hint=(f"did you mean {close[0]}=? " if close else "") + "the model's own keyword arguments go in "
                      "model_kwargs={...}; its positional inputs after the model")
