"""One format for every finding graphtool reports: a :class:`Diagnostic`, like ruff's and rustc's.

A diagnostic is ``path:line:col: CODE message``, the source line with the span underlined, then
``help:`` with the fix (and, for graph breaks, torch's ``gbNNNN`` id and its explanation page).
Findings of the same model and region are grouped under one header by the renderer
(:mod:`graphtool.render.diagnostics`). Codes are stable; docs/diagnostics.md lists them all.

The builders here turn the analyses' own records (graph breaks, skipped frames, mutations, device
copies, lint budgets) into diagnostics. Reading the user's source line is the only I/O, through
``linecache`` (the same cache tracebacks use); tests pass ``lines=`` to read from a dict instead.

Example::

    >>> d = Diagnostic("GT-B001", "graph break: print", path="m.py", line=3, source="    print(x)")
    >>> d.located().col, d.located().span
    (5, 8)
    >>> d.location
    'm.py:3:5'
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace

#: every code graphtool gives a finding, with its one-line title (docs/diagnostics.md explains each)
CODES = {
    "GT-B001": "graph break: torch.compile split the function here and runs the rest eagerly until the next frame",
    "GT-B002": "skipped frame: dynamo gave up on a whole frame and runs it eagerly",
    "GT-B003": "recompile: a guard failed and the frame was compiled again",
    "GT-M001": "an input's data is mutated in place",
    "GT-M002": "an input's metadata or storage is changed (resize_, t_, set_, as_strided_)",
    "GT-M003": "an output aliases an input, an intermediate or another output",
    "GT-M004": "two inputs share storage",
    "GT-D001": "a cross-device copy",
    "GT-D002": "a node off the main device",
    "GT-L001": "over budget",
    "GT-L002": "a baselined graph break no longer occurs (fixed): update the baseline",
    "GT-L003": "the model could not be linted",
}

SEVERITIES = ("error", "warning", "note")
GB_URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{code}.html"

LineReader = Callable[[str, int], "str | None"]


def read_line(path: str, line: int) -> str | None:
    """The user's source line (without its newline), or None when the file cannot be read."""
    text = linecache.getline(path, line)
    return text.rstrip("\r\n") or None


@dataclass(frozen=True)
class Diagnostic:
    code: str  # one of CODES
    message: str
    path: str | None = None  # as recorded (absolute); shown relative to the current folder when under it
    line: int | None = None
    col: int | None = None  # 1-based
    span: int | None = None  # characters underlined from ``col``
    source: str | None = None  # the source line as written (indentation kept)
    help: str | None = None
    url: str | None = None  # torch's explanation page (graph breaks with a gb id)
    model: str | None = None  # the model (path or path:entry) it belongs to
    region: str | None = None  # "region 0 forward", when the finding belongs to one
    severity: str = "warning"  # error | warning | note

    @property
    def location(self) -> str:
        """``path:line:col`` (as much of it as is known), the path as recorded."""
        if not self.path:
            return "<unknown>"
        d = self.located()
        return ":".join(str(p) for p in (d.path, d.line, d.col) if p is not None)

    def located(self) -> Diagnostic:
        """With ``col`` and ``span`` filled from the source line when unknown: the code, indentation
        and a trailing comment left out."""
        if self.source is None or self.col is not None:
            return self
        code = code_part(self.source)
        if not code.strip():
            return self
        indent = len(code) - len(code.lstrip())
        return replace(self, col=indent + 1, span=len(code) - indent)

    def to_dict(self) -> dict:
        return asdict(self.located())


def code_part(line: str) -> str:
    """``line`` without its comment and trailing whitespace (a ``#`` inside a string stays).

    >>> code_part("    if y.sum().item() > 0:  # branch on '#' signs")
    '    if y.sum().item() > 0:'
    >>> code_part("s = '# not a comment'   ")
    "s = '# not a comment'"
    """
    import io
    import tokenize

    end = len(line)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.lstrip()).readline):
            if tok.type == tokenize.COMMENT:
                end = len(line) - len(line.lstrip()) + tok.start[1]
                break
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement: the comment, if any, came first
        pass
    return line[:end].rstrip()


def with_source(d: Diagnostic, lines: LineReader | None = None, source_text: str | None = None) -> Diagnostic:
    """``d`` with its source line read (``lines`` or linecache) and the span placed on ``source_text`` when given."""
    if d.path is None or d.line is None or d.source is not None:
        return d
    text = (lines or read_line)(d.path, d.line)
    if text is None:
        text = source_text  # the recorded (stripped) text: better than nothing
    if text is None:
        return d
    if source_text and source_text.strip() in text:
        col = text.index(source_text.strip()) + 1
        span = len(code_part(text[col - 1:col - 1 + len(source_text.strip())]))
        return replace(d, source=text, col=col, span=span or len(source_text.strip())).located()
    return replace(d, source=text).located()


#: what reads a tensor's value on the host, in a graph break's reason: the break is a host sync
HOST_SYNC = re.compile(r"item\(\)|_local_scalar_dense|data[- ]dependent|dynamic shape operator|nonzero|DynamicOutputShape", re.I)

#: a break's fix when nothing more is known of its cause (the CUDA-graph catalogue's CG090 and CG091 say the same)
BREAK_FIX = "remove the break to get one graph"
HOST_SYNC_FIX = "keep the value on the device"
_BACKWARD_BREAK_HELP = ("dynamo ends the graph at backward() inside a compiled function (the call runs outside any graph, "
                        "through the forward graph's compiled backward); compile the forward and loss alone "
                        "(torch.compile(model); loss.backward() and the optimizer outside it), or turn on compiled autograd "
                        "(torch._dynamo.config.compiled_autograd = True) to capture the backward as a graph of its own")
_OPTIMIZER_BREAK_HELP = ("torch's optimizer breaks the graph on purpose around its step (its own code, nothing to remove): the "
                         "step is a graph of its own; compile opt.step on its own (torch.compile(opt.step), called after "
                         "loss.backward()), as torch's compiled-optimizer recipe does")
_ZERO_GRAD_HELP = ("dynamo never traces Optimizer.zero_grad (it runs eagerly, between graphs): call "
                   "opt.zero_grad(set_to_none=True) outside the compiled function, and compile opt.step on its own "
                   "(torch.compile(opt.step))")


def break_help(reason: str, *, code: str | None = None, hint: str | None = None, files: Iterable[str | None] = (),
               source: str | None = None) -> str:
    """What to do about a graph break, for its cause: every command's help for a break comes from here (trace, lint,
    cudagraphs, the report). ``hint`` is torch's own; ``files`` the break's places (torch's file and the user's line
    that led there); ``source`` the user's line.

    >>> break_help("Unsupported Tensor.backward() call", code="gb0123").startswith("dynamo ends the graph at backward()")
    True
    >>> break_help("Call to `torch._dynamo.graph_break()`", code="gb0025",
    ...            files=["/venv/lib/python3.11/site-packages/torch/optim/optimizer.py"]).startswith("torch's optimizer")
    True
    >>> break_help("Attempted to inline function marked as skipped", hint="Avoid calling the function `Optimizer.zero_grad`.",
    ...            source="    opt.zero_grad(set_to_none=True)").startswith("dynamo never traces Optimizer.zero_grad")
    True
    >>> break_help("Call to `torch._dynamo.graph_break()`", hint="Remove the `torch._dynamo.graph_break()` call.")
    'Remove the `torch._dynamo.graph_break()` call.'
    """
    text = f"{reason or ''} {hint or ''}"
    if code == "gb0123" or re.search(r"\bTensor\.backward\(\)|\bautograd\.backward\b", reason or ""):
        return _BACKWARD_BREAK_HELP
    if "zero_grad" in text or re.search(r"\.zero_grad\(", source or ""):
        return _ZERO_GRAD_HELP
    in_optim = any(f and "/torch/optim/" in f.replace("\\", "/") for f in files)
    if in_optim or re.search(r"`(Optimizer|\w*(Adam|SGD|RMSprop|Adagrad|LBFGS)\w*)\.step`", text):
        return _OPTIMIZER_BREAK_HELP
    if hint:
        return hint
    return HOST_SYNC_FIX if HOST_SYNC.search(reason or "") else BREAK_FIX


def graph_break(reason: str, file: str | None, line: int | None, *, code: str | None = None, hint: str | None = None,
                source_text: str | None = None, model: str | None = None, region: str | None = None, tag: str = "",
                severity: str = "warning", lines: LineReader | None = None, col: int | None = None,
                end_col: int | None = None, other_file: str | None = None) -> Diagnostic:
    """A graph break (GT-B001); ``code`` is torch's gb id, which names its explanation page; ``col``..``end_col``
    (0-based, from torch's positions) the expression that broke, underlined instead of the whole line; the help is
    :func:`break_help`'s (``other_file``: the break's other place, torch's file or the user's call that led there)."""
    url = GB_URL.format(code=code) if code else None
    message = f"graph break{tag}: {reason}" + (f" [{code}]" if code else "")
    d = with_source(Diagnostic("GT-B001", message, file, line, url=url, model=model, region=region,
                               severity=severity), lines, source_text)
    d = replace(d, help=break_help(reason, code=code, hint=hint, files=(file, other_file), source=d.source))
    if d.source is not None and col is not None and end_col is not None and 0 <= col < end_col <= len(d.source):
        d = replace(d, col=col + 1, span=end_col - col)
    return d


def skipped_frame(function: str | None, file: str | None, line: int | None, reason: str, *, break_file: str | None = None,
                  break_line: int | None = None, model: str | None = None, lines: LineReader | None = None) -> Diagnostic:
    """A frame dynamo gave up on (GT-B002): it runs eagerly, every call. Placed where it broke when known."""
    at_file, at_line = (break_file, break_line) if break_file else (file, line)
    name = function or "a frame"
    message = f"frame {name} runs eagerly (skipped by dynamo): {reason}"
    help_text = "nothing in this frame is compiled; move the unsupported code out of it or mark it with torch.compiler.disable"
    d = Diagnostic("GT-B002", message, at_file, at_line, help=help_text, model=model, severity="warning")
    return with_source(d, lines)


_SIZE_HELP = "mark the changing size dynamic (torch._dynamo.mark_dynamic) or keep it constant"
_ITEM_HELP = ("a number computed before the graph break (a tensor's .item() or .tolist()) is a constant of the next graph, "
              "so each new value compiles again: keep it a tensor (torch.where instead of `if`, multiply by the tensor) "
              "or set torch._dynamo.config.capture_scalar_outputs = True")
_FLOAT_HELP = ("a Python float (an argument or attribute) is a constant of the graph, so each new value compiles again: pass it as a tensor "
               "(torch.tensor(v)) or set torch._dynamo.config.specialize_float = False")
_VALUE_HELP = ("the graph was compiled for this value of a Python variable (an argument, attribute or global): "
               "expected when it selects a mode; otherwise keep it constant or pass it as a tensor")
_TRAINING_HELP = "a module switched between train() and eval(): each mode compiles once, expected when they alternate"
_GLOBAL_HELP = {
    "grad_mode": "the grad mode changed (torch.no_grad() or inference_mode around some calls): each mode compiles once, "
                 "expected for training and evaluation in one process",
    "autocast": "autocast was switched on or off between calls: each setting compiles once; keep it the same around every call",
}
_GLOBAL_STATE_HELP = ("torch's global state changed between calls (grad mode, autocast, deterministic algorithms, "
                      "default dtype): each state compiles once; keep it the same around every call")
_TENSOR_HELP = {
    "dtype": "an input's dtype changed: cast it before the call so every call passes the same dtype",
    "device": "an input's device changed: move it to one device before the call",
    "requires_grad": "an input's requires_grad changed: pass it the same way every call (.detach() it, or not)",
    "stride": "an input's memory layout changed (a transposed or sliced tensor): pass .contiguous() tensors",
    "dispatch key set": "an input's kind changed (device, grad mode, a tensor subclass): pass the same kind every call",
}
_TYPE_HELP = "an argument's type changed (see the type named above): pass the same type every call"
_ID_HELP = ("a different object (a function, module or other Python object) was passed where the graph holds one: "
            "each object compiles its own graph; pass the same object, or its data as tensors")
_LEN_HELP = "the length of a list, tuple or dict changed: keep it fixed, or stack the items into one tensor"
_OTHER_HELP = "a guard of the compiled graph failed: keep what it checks the same between calls (TORCH_LOGS=guards lists them)"


def recompile_help(reason: str) -> str:
    """What to do about a recompile, for the kind of guard that failed (the first line of torch's reason).

    >>> recompile_help("tensor 'x' size mismatch at index 0. expected 2, actual 3") == _SIZE_HELP
    True
    >>> recompile_help("GLOBAL_STATE changed: grad_mode ").startswith("the grad mode changed")
    True
    """

    first = reason.splitlines()[0] if reason else ""
    guard = re.sub(r"^\d+/\d+: ", "", first).split("  #")[0].strip()  # "1/0: " is torch's frame/compile id
    if m := re.match(r"tensor '[^']*' (dtype|device|requires_grad|stride|dispatch key set) mismatch", guard):
        return _TENSOR_HELP[m.group(1)]
    if re.match(r"tensor '[^']*' (size|rank) mismatch", guard) or re.search(r"\.(size|stride)\(\)", guard):
        return _SIZE_HELP
    if guard.startswith("GLOBAL_STATE changed"):
        changed = guard.split(":", 1)[-1]
        return next((h for k, h in _GLOBAL_HELP.items() if k in changed), _GLOBAL_STATE_HELP)
    if guard.startswith("___check_type_id") or guard.startswith("type("):
        return _TYPE_HELP
    if guard.startswith("___check_obj_id") or " is " in guard:
        return _ID_HELP
    if guard.startswith("len("):
        return _LEN_HELP
    if m := re.match(r"(.+?) == (.+)$", guard):
        name, value = m.groups()
        if name.endswith(".training"):
            return _TRAINING_HELP
        if name.startswith("___stack"):  # a value the frame before a graph break handed to its resume function
            return _ITEM_HELP
        if re.fullmatch(r"-?(\d+\.\d*(e[-+]?\d+)?|inf|nan)", value):
            return _FLOAT_HELP
        return _VALUE_HELP
    return _OTHER_HELP


def recompile(function: str, file: str | None, line: int | None, reason: str, *, model: str | None = None,
              lines: LineReader | None = None) -> Diagnostic:
    """A recompile (GT-B003), its help written for the kind of guard that failed (:func:`recompile_help`)."""
    d = Diagnostic("GT-B003", f"recompile of {function}: {guard_text(reason)}", file, line, help=recompile_help(reason),
                   model=model, severity="warning")
    return with_source(d, lines)


def guard_text(reason: str) -> str:
    """torch's recompile reason as a diagnostic's message: each failed guard on one line, without the source comment
    and the user stack torch appends (the diagnostic shows that line itself).

    >>> guard_text('1/0: ___stack0 == 0.27     # y * s  # m.py:19 in r\\nUser stack trace:\\n  File "m.py", line 19, in r\\n    y * s')
    '1/0: ___stack0 == 0.27'
    >>> guard_text("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3")
    "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"
    """

    kept, in_stack = [], False
    for line in (reason or "").splitlines():
        if line.strip() == "User stack trace:":
            in_stack = True
            continue
        if in_stack and (line.startswith(" ") or not line.strip()):  # the stack's frames and their source lines
            continue
        in_stack = False
        kept.append(re.split(r"\s{2,}#", line, maxsplit=1)[0].rstrip())
    return "; ".join(k for k in kept if k) or (reason or "")


def cudagraph_finding(r, *, lines: LineReader | None = None) -> Diagnostic:
    """A CUDA-graph finding (a :class:`~graphtool.analysis.cudagraphs.verdict.Reason`) in the one diagnostic format,
    under its catalogue code (CG002); with no source line it is placed at ``<config>`` (a setting) or ``<graph>``."""
    if r.source:
        path, line = r.source.file, r.source.line
    else:
        path, line = ("<config>" if r.region is None and r.graph is None and r.kind == "skip" else "<graph>"), None
    severity = "warning" if r.kind in ("skip", "split") or (not r.kind and r.skips) else "note"
    return with_source(Diagnostic(r.cg or r.code, r.message, path, line, help=r.fix or None, severity=severity), lines)


def cli_allow(names: Iterable[str]) -> str:
    """How the CLI accepts these mutations: ``cli_allow(["buffers"])`` is ```mutations --check --allow buffers```."""
    return "`mutations --check " + " ".join(f"--allow {n}" for n in names) + "`"


def python_allow(names: Iterable[str]) -> str:
    """How the Python API accepts them (``graphtool.mutations``, ``assert_no_input_mutations``).

    >>> python_allow(["x", "cache"])
    '`allow=["x", "cache"]`'
    """
    import json

    return f"`allow={json.dumps(list(names))}`"


def _mutation_help(m, names: list[str], accept: Callable[[Iterable[str]], str] = cli_allow) -> str | None:
    """What happens to a mutated input under torch.compile, and what to do, for its kind; ``names`` (the
    user inputs of one diagnostic) are what ``accept`` writes as the way to accept them."""
    if m.kind == "buffer":
        return f"expected for BatchNorm statistics and KV caches: accept it with {accept(['buffers'])}"
    if m.kind == "parameter":
        return "a parameter changed inside forward: CUDA graphs and AOT autograd copy it back after every call"
    if m.kind != "user_input":
        return None
    if not m.mutates_data:  # t_(), set_(), resize_(): a new tensor is the cure, not a cache's advice
        return "torch.compile applies the change to the caller's tensor after the graph; return a new tensor instead"
    how = ("the compiled graph itself writes the new value into the caller's tensor (a copy_ at its end: "
           "inductor keeps input mutations in the graph)" if m.in_graph else
           "AOT autograd writes the new value back into the caller's tensor after the graph")
    return (f"{how}; for a cache the caller owns that is expected: accept it with {accept(names)}; "
            "CUDA graphs want it at one address (allocate it once; torch._dynamo.mark_static_address)")


#: how many characters of names a mutation's message lists before ``and N more``: a diagnostic is never cut, so it stays short
NAMES_WIDTH = 80


def some_names(names: list[str], width: int = NAMES_WIDTH) -> str:
    """As many names as fit in ``width`` characters (at least one), then how many more.

    >>> some_names(["bn.running_mean", "bn.running_var"])
    'bn.running_mean, bn.running_var'
    >>> some_names([f"layers.{i}.weight" for i in range(12)], width=40)
    'layers.0.weight, layers.1.weight and 10 more (--format json lists them all)'
    """
    shown: list[str] = []
    for name in names:
        if shown and len(", ".join([*shown, name])) > width:
            break
        shown.append(name)
    rest = len(names) - len(shown)
    return ", ".join(shown) + (f" and {rest} more (--format json lists them all)" if rest else "")


def mutation_diagnostics(report, *, model: str | None = None, skip=frozenset(), lines: LineReader | None = None,
                         accept: Callable[[Iterable[str]], str] = cli_allow) -> list[Diagnostic]:
    """GT-M001..M004 for a :class:`~graphtool.analysis.mutations.MutationReport`; inputs named in ``skip`` (accepted) left out.
    ``accept`` writes how to accept a mutation in the caller's terms: :func:`cli_allow` or :func:`python_allow`.

    Mutations of one kind at one line (the three statistics of a BatchNorm, each layer of a
    Sequential built in one line) are one diagnostic that names them all and says how many; what an
    optimizer's step writes (its state, the parameters it updates) is one note for the whole step. A
    message names as many tensors as fit in one line (``and 49 more``); ``--format json`` lists every one."""
    from graphtool.analysis.mutations import optimizer_summary

    out = []
    groups: dict[tuple, list] = {}
    steps: dict[tuple, list] = {}
    for m in report.mutated:
        if m.name in skip:
            continue
        region = "region " + ",".join(map(str, m.mutated_in or m.regions)) if (m.mutated_in or m.regions) else None
        src = m.source
        if m.by_optimizer:
            steps.setdefault((src.file if src else None, src.line if src else None, region), []).append(m)
            continue
        what = "mutated in place" + (" under no_grad" if m.under_no_grad else "")
        code = "GT-M001" if m.mutates_data else "GT-M002"
        if not m.mutates_data:
            changed = [k for k, on in (("metadata", m.mutates_metadata), ("storage", m.mutates_storage)) if on]
            what = f"{' and '.join(changed)} changed"
        help_text = _mutation_help(m, [m.name], accept)
        if m.note:
            help_text = f"{m.note}; {help_text}" if help_text else m.note
        key = (code, m.kind, what, src.file if src else None, src.line if src else None, region, help_text, m.name if not src else "")
        groups.setdefault(key, []).append(m)
    for (file, line, region), members in steps.items():
        states = sorted({m.name.rsplit(".", 1)[-1] for m in members if m.kind == "optimizer_state" and "." in m.name})
        what = f"its state ({', '.join(states)})" if states else "its state"
        help_text = (f"a compiled optimizer writes the parameters and {what} in place each step: accept it with "
                     f"{accept(['optimizer_state'])}; --format json lists all {len(members)} tensors")
        d = Diagnostic("GT-M001", optimizer_summary(members), file, line, help=help_text, model=model, region=region,
                       severity="note")
        out.append(with_source(d, lines))
    for (code, kind, what, file, line, region, help_text, _), members in groups.items():
        noun = kind.replace("_", " ")
        if len(members) == 1:
            message = f"{noun} {members[0].name} {what}"
        else:
            message = f"{len(members)} {noun}s {what}: {some_names([m.name for m in members])}"
            if members[0].kind == "user_input":
                help_text = _mutation_help(members[0], [m.name for m in members], accept)
                if members[0].note:
                    help_text = f"{members[0].note}; {help_text}"
        d = Diagnostic(code, message, file, line, help=help_text, model=model, region=region, severity="warning")
        out.append(with_source(d, lines))
    for o in report.aliased_outputs:
        of = o.alias_of
        name = {"input": f"input {of['name']}", "output": f"output {of['index']}"}.get(of["kind"], "an intermediate")
        verb = "is a view of" if o.is_view else "shares storage with"
        src = getattr(o, "source", None)
        d = Diagnostic("GT-M003", f"output {o.index} {verb} {name}", src.file if src else None, src.line if src else None,
                       model=model, severity="note",
                       help="a later in-place change to one is seen through the other; return .clone() to decouple them")
        out.append(with_source(d, lines))
    for a in report.input_aliases:
        how = "are the same tensor" if a.relation == "same_tensor" else "share storage"
        src = getattr(a, "source", None)
        d = Diagnostic("GT-M004", f"inputs {' and '.join(a.names)} {how}", src.file if src else None, src.line if src else None,
                       model=model, severity="note",
                       help="torch.compile guards on this aliasing: passing distinct tensors later recompiles")
        out.append(with_source(d, lines))
    return out


def device_diagnostics(report, *, model: str | None = None, lines: LineReader | None = None) -> list[Diagnostic]:
    """GT-D001 for each cross-device copy, GT-D002 for other nodes off the main device."""
    out = []
    main = report.shown_device
    for g in report.graphs:
        region = f"region {g.region} {g.graph}"
        copied = {c.name for c in g.copies}
        for c in g.copies:
            src = c.source
            d = Diagnostic("GT-D001", f"copy {report.show(c.src_device)} -> {report.show(c.dst_device)} ({c.name}, {c.op})",
                           src.file if src else None, src.line if src else None, model=model, region=region, severity="warning",
                           help="each copy synchronises with the host; keep the tensor on one device")
            out.append(with_source(d, lines))
        for n in g.off_device:
            if n.name in copied:
                continue
            src = n.source
            d = Diagnostic("GT-D002", f"{n.name} ({n.op}) runs on {report.show(n.device)}, not {main}",
                           src.file if src else None, src.line if src else None, model=model, region=region, severity="warning",
                           help="create the tensor on the model's device (device=x.device) instead of the CPU")
            out.append(with_source(d, lines))
    return out


def group_key(d: Diagnostic) -> tuple[str, str]:
    return (d.model or "", d.region or "")


def grouped(diags: Iterable[Diagnostic]) -> list[tuple[tuple[str, str], list[Diagnostic]]]:
    """Diagnostics by (model, region), groups in first-seen order, each group in the given order."""
    groups: dict[tuple[str, str], list[Diagnostic]] = {}
    for d in diags:
        groups.setdefault(group_key(d), []).append(d)
    return list(groups.items())
