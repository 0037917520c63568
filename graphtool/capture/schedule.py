"""A shape schedule: the inputs a loop feeds its compiled model, step by step.

Real loops do not feed one shape: sequence lengths vary batch to batch, the last batch is short, a
decode loop's cache grows. A schedule comes from one of two places:

1. the script's ``get_input_schedule()``, an iterable (a list, or a generator over a dataloader) of
   the model's inputs per step, each written as ``get_model_and_inputs`` writes its inputs: a tuple
   of positional inputs, a dict of keyword inputs, a ``(args, kwargs)`` pair or one tensor;
2. sizes per input dimension (``--sizes``), applied to the example inputs (every input that shares
   the named one's sizes up to that dimension changes with it, an ``attention_mask`` beside
   ``input_ids``). :func:`parse_sizes` reads them:

   - ``input_ids:1=17,33,64,128``: one size per step, in order;
   - ``input_ids:1=17*40,33*12`` or ``input_ids:1={17: 40, 33: 12}``: a length histogram (a
     ``collections.Counter`` pasted as printed), its steps shuffled as a dataloader's are (seeded);
   - ``input_ids:1=1..512``: a size drawn uniformly per step, ``--steps`` of them (seeded).

A schedule is bounded (``max_steps``): a generator that never ends is read that far, and the
schedule says what it left out.

Example::

    >>> rule = parse_sizes("input_ids:1=17,33")
    >>> rule.name, rule.dim, rule.sizes(steps=4, seed=0)
    ('input_ids', 1, [17, 33])
    >>> parse_sizes("x:0={32: 3, 7: 1}").sizes(steps=0, seed=0)
    [32, 32, 32, 7]
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from graphtool.errors import BadModelSpec, UsageError
from graphtool.text import shape_text

#: ``--max-steps``' default: a long epoch's worth, predicted in seconds once its shapes settle
DEFAULT_MAX_STEPS = 1000
#: ``--steps``' default for a drawn range (``1..512``)
DEFAULT_RANGE_STEPS = 100
SCHEDULE_FUNCTION = "get_input_schedule"

_RULE = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.\[\]]*|\d+)\s*:\s*(?P<dim>-?\d+)\s*=\s*(?P<spec>.+?)\s*$", re.S)


@dataclass(frozen=True)
class SizeRule:
    """One ``--sizes`` flag: input ``name`` (a name of the forward's, or a position), dimension ``dim``, and
    its sizes: ``listed`` (in order), ``histogram`` ((size, count) pairs) or ``span`` (low, high)."""

    text: str
    name: str
    dim: int
    listed: tuple[int, ...] = ()
    histogram: tuple[tuple[int, int], ...] = ()
    span: tuple[int, int] | None = None

    def sizes(self, *, steps: int, seed: int) -> list[int]:
        """This dimension's size per step; ``steps`` says how many a drawn range gives."""
        import random

        if self.listed:
            return list(self.listed)
        if self.histogram:
            out = [size for size, n in self.histogram for _ in range(n)]
            random.Random(seed).shuffle(out)  # a dataloader's shuffled epoch
            return out
        low, high = self.span
        rng = random.Random(seed)
        return [rng.randint(low, high) for _ in range(steps)]

    @property
    def drawn(self) -> bool:
        return self.span is not None


def parse_sizes(text: str) -> SizeRule:
    """Read one ``--sizes NAME:DIM=SIZES`` (see the module docstring); a usage error (exit 2) names the flag."""
    m = _RULE.match(text or "")
    if not m:
        raise UsageError(f"--sizes {text!r}: expected INPUT:DIM=SIZES",
                         hint="--sizes input_ids:1=17,33,64 (a list), input_ids:1=17*40,33*12 (a histogram) "
                              "or input_ids:1=1..512 (drawn per step)")
    name, dim, spec = m.group("name"), int(m.group("dim")), m.group("spec").strip()
    if dim < 0:
        raise UsageError(f"--sizes {text!r}: dimension {dim} is negative", hint="count dimensions from 0: input_ids:1 is the sequence")
    if ".." in spec:
        low, _, high = spec.partition("..")
        a, b = _whole(text, low), _whole(text, high)
        if a > b:
            raise UsageError(f"--sizes {text!r}: the range {a}..{b} is empty", hint=f"write it low..high: {b}..{a}")
        return SizeRule(text, name, dim, span=(a, b))
    body = spec[1:-1] if spec.startswith("{") and spec.endswith("}") else spec
    parts = [p.strip() for p in body.split(",") if p.strip()]
    if not parts:
        raise UsageError(f"--sizes {text!r}: no sizes after '='", hint="--sizes input_ids:1=17,33,64")
    pairs = [re.split(r"\s*[*:]\s*", p, maxsplit=1) for p in parts]
    if all(len(p) == 1 for p in pairs):
        return SizeRule(text, name, dim, listed=tuple(_whole(text, p[0]) for p in pairs))
    if any(len(p) == 1 for p in pairs):
        raise UsageError(f"--sizes {text!r}: mixes a list with a histogram",
                         hint="either sizes in order (17,33,64) or SIZE*COUNT for every size (17*40,33*12)")
    hist = tuple((_whole(text, s), _whole(text, n, least=0)) for s, n in pairs)
    return SizeRule(text, name, dim, histogram=tuple((s, n) for s, n in hist if n))


def _whole(text: str, value: str, least: int = 1) -> int:
    value = value.strip()
    if not re.fullmatch(r"\d+", value) or int(value) < least:
        raise UsageError(f"--sizes {text!r}: {value!r} is not a whole number >= {least}",
                         hint="sizes and counts are whole numbers: input_ids:1=17,33 or input_ids:1=17*40,33*12")
    return int(value)


@dataclass
class Schedule:
    """The inputs of every step (``steps[0]`` is the first call's), what varies, and what was left out."""

    steps: list  # (args, kwargs) per step
    source: str  # "get_input_schedule() at model.py:12" or "--sizes input_ids:1=17,33"
    labels: list = field(default_factory=list)  # per step: {"input_ids:1": 17} for the sizes that vary
    left_out: str | None = None  # what --max-steps cut off
    on_step: Any = field(default=None, repr=False)  # told (step, steps) as each step starts: the progress bar
    # per step: whether gradients were on where the step's inputs were yielded, as a loop ``for x in
    # get_input_schedule(): model(x)`` calls the model (a ``with torch.no_grad():`` around the yields is still
    # open there); empty when unknown
    grad_modes: list = field(default_factory=list)

    @property
    def later(self) -> list:
        return self.steps[1:]

    @property
    def grad_off(self) -> bool:
        """Every step is yielded with gradients off: the loop runs the model under ``torch.no_grad()`` (a ``with``
        around the generator's yields, or the script's own ``torch.set_grad_enabled(False)``).

        >>> Schedule([], "s", grad_modes=[False, False]).grad_off, Schedule([], "s", grad_modes=[False, True]).grad_off
        (True, False)
        """
        return bool(self.grad_modes) and not any(self.grad_modes)

    @staticmethod
    def signature(args, kwargs) -> tuple:
        """What dynamo's guards read of a step's inputs (sizes, dtypes, devices, marks, plain values): two
        steps with the same signature take the same compiled code, once nothing compiled in between."""
        return _signature((args, kwargs))


def _signature(obj: Any, depth: int = 0) -> Any:
    from graphtool.capture import compat

    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return ("T", tuple(int(s) for s in obj.shape), str(obj.dtype), obj.device.type, bool(obj.requires_grad),
                compat.dynamic_marks(obj))
    if depth > 8:
        return type(obj).__name__
    if isinstance(obj, dict):
        return tuple((k, _signature(v, depth + 1)) for k, v in obj.items())
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, *(_signature(v, depth + 1) for v in obj))
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return type(obj).__name__  # an object dynamo guards on by its attributes: not told apart here


def schedule_from_sizes(spec, rules: list[SizeRule], *, steps: int | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                        seed: int = 0) -> Schedule:
    """The example inputs resized per step by ``rules`` (one ``--sizes`` each). Lists and histograms give
    their own number of steps (all the same, or one constant size); a drawn range gives ``steps``."""
    if not rules:
        raise UsageError("no --sizes given", hint="--sizes input_ids:1=17,33,64")
    n_drawn = steps or DEFAULT_RANGE_STEPS
    per_rule = [r.sizes(steps=n_drawn, seed=seed + i) for i, r in enumerate(rules)]
    lengths = {len(s) for r, s in zip(rules, per_rule) if len(s) > 1 and not r.drawn}
    if len(lengths) > 1:
        listed = ", ".join(f"{r.text} ({len(s)} steps)" for r, s in zip(rules, per_rule) if len(s) > 1)
        raise UsageError(f"--sizes give different numbers of steps: {listed}",
                         hint="give every --sizes list the same number of sizes (one per step), or a single size")
    total = lengths.pop() if lengths else (n_drawn if any(r.drawn for r in rules) else 1)
    if steps is not None and not any(r.drawn for r in rules):
        total = min(total, steps)
    from graphtool.capture.user.input_names import tensor_inputs

    named = tensor_inputs(spec)
    targets = [_target(spec, named, r) for r in rules]
    shown = min(total, max_steps)
    out, labels = [], []
    for k in range(shown):
        want = {(t_name, r.dim): (s[k] if len(s) > 1 else s[0]) for r, s, (t_name, _) in zip(rules, per_rule, targets)}
        out.append(_resized_inputs(spec, named, targets, rules, want))
        labels.append({f"{n}:{d}": v for (n, d), v in want.items()})
    left = f"{total - shown} of {total} steps past --max-steps {max_steps} were not predicted" if total > shown else None
    return Schedule(out, "--sizes " + " ".join(r.text for r in rules), labels, left, grad_modes=[_grad_enabled()] * len(out))


def _grad_enabled() -> bool:
    import torch

    return torch.is_grad_enabled()


def read_steps(source, limit: int) -> tuple[list, list[bool]]:
    """At most ``limit`` items of ``source`` and, for each, whether gradients were on as it came out: a generator's
    ``with torch.no_grad():`` around its ``yield`` is open while the caller's loop body runs.

    >>> import torch
    >>> def batches():
    ...     with torch.no_grad():
    ...         yield 1
    ...         yield 2
    >>> read_steps(batches(), 5), torch.is_grad_enabled()
    (([1, 2], [False, False]), True)
    """
    import torch

    before = torch.is_grad_enabled()
    items, modes = [], []
    try:
        for item in itertools.islice(iter(source), limit):
            items.append(item)
            modes.append(torch.is_grad_enabled())
    finally:  # a generator left at a yield inside `with torch.no_grad():` would leave gradients off for the rest of the run
        torch.set_grad_enabled(before)
    return items, modes


def _target(spec, named, rule: SizeRule) -> tuple[str, Any]:
    from graphtool.capture.user.input_names import find_input

    key, found = find_input(spec, named, int(rule.name) if rule.name.isdigit() else rule.name)
    if found is None:
        raise UsageError(f"--sizes {rule.text!r}: the model has no tensor input named {key!r}",
                         hint=f"its tensor inputs are: {', '.join(n for n, _ in named) or 'none'}")
    if rule.dim >= found[1].dim():
        raise UsageError(f"--sizes {rule.text!r}: {key} has {found[1].dim()} dimensions (shape {shape_text(found[1].shape)}), "
                         f"so {rule.dim} is not one of them", hint=f"a dimension from 0 to {found[1].dim() - 1}")
    return found


def _resized_inputs(spec, named, targets, rules, want: dict) -> tuple[tuple, dict]:
    """The example inputs with each target's dimension (and every input sharing its sizes up to it) resized."""
    from graphtool.capture.tensors import map_tensors

    changes: dict[int, dict[int, int]] = {}  # id(tensor) -> dim -> size
    for (name, ref), rule in zip(targets, rules):
        prefix = tuple(ref.shape[: rule.dim + 1])
        for _n, t in named:
            if t.dim() > rule.dim and tuple(t.shape[: rule.dim + 1]) == prefix:
                changes.setdefault(id(t), {})[rule.dim] = want[(name, rule.dim)]

    def resize(t):
        dims = changes.get(id(t))
        if not dims:
            return t
        out = t.detach()
        for d, n in dims.items():
            out = _resize_dim(out, d, n)
        return out.requires_grad_(t.requires_grad)

    return map_tensors(spec.args, resize), map_tensors(spec.kwargs, resize)


def _resize_dim(t, dim: int, n: int):
    """``t`` cut or repeated (its own values: token ids stay in the vocabulary) to size ``n`` along ``dim``."""
    import torch

    have = t.shape[dim]
    if have == 0:
        shape = list(t.shape)
        shape[dim] = n
        return torch.zeros(shape, dtype=t.dtype, device=t.device)
    if n <= have:
        return t.narrow(dim, 0, n).clone()
    reps = [1] * t.dim()
    reps[dim] = -(-n // have)
    return t.repeat(*reps).narrow(dim, 0, n).clone()


def script_schedule(spec, *, max_steps: int = DEFAULT_MAX_STEPS) -> Schedule | None:
    """The script's ``get_input_schedule()`` read, checked and bounded; None when the script has none."""
    import sys

    module = sys.modules.get(getattr(spec, "module_name", "") or "")
    fn = getattr(module, SCHEDULE_FUNCTION, None) if module is not None else None
    if fn is None:
        return None
    where = _def_site(fn, spec)
    from graphtool.capture.user.boundary import user_code_error

    try:
        source = fn()
    except Exception as exc:
        raise user_code_error(exc, f"{SCHEDULE_FUNCTION}() raised", where) from None
    if isinstance(source, (str, bytes)) or not hasattr(source, "__iter__"):
        raise BadModelSpec(f"{where}: {SCHEDULE_FUNCTION}() returned {type(source).__name__}, not an iterable of inputs",
                           hint="return a list of the model's inputs per step, or yield them")
    items = iter(source)
    steps, lines, grad = [], [], []
    try:
        for k, item in enumerate(itertools.islice(items, max_steps)):
            grad.append(_grad_enabled())  # as the loop's body would call the model: inside the generator's `with`
            line = _yield_site(items, where)
            steps.append(_normalize(spec, item, k + 1, line))
            lines.append(line)
        more = next(items, _END) is not _END if len(steps) == max_steps else False
    except (BadModelSpec, UsageError):
        raise
    except Exception as exc:
        raise user_code_error(exc, f"{SCHEDULE_FUNCTION}() raised at step {len(steps) + 1}", where) from None
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()  # a generator over a dataloader: its workers stop now
    if not steps:
        raise BadModelSpec(f"{where}: {SCHEDULE_FUNCTION}() gave no inputs", hint="yield the model's inputs for each step")
    known = len(source) if hasattr(source, "__len__") else None
    left = None
    if more:
        left = (f"{known - max_steps} of {known} steps past --max-steps {max_steps} were not predicted" if known
                else f"the schedule goes on past --max-steps {max_steps} (a generator that did not end there): "
                     "later steps were not predicted")
    return Schedule(steps, f"{SCHEDULE_FUNCTION}() at {where}", varying_labels(spec, steps), left, grad_modes=grad)


_END = object()


def _def_site(fn, spec) -> str:
    import inspect

    try:
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (TypeError, OSError):
        return str(spec.path)


def _yield_site(items, where: str) -> str:
    """``file:line`` of the ``yield`` a generator stopped at, else where the function is defined."""
    frame = getattr(items, "gi_frame", None)
    if frame is not None:
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return where


def _normalize(spec, item, step: int, line: str) -> tuple[tuple, dict]:
    """One step's inputs as ``(args, kwargs)``, checked against the example inputs' structure: the same
    positional count, known keywords, and each tensor where the example has one, of the same rank and dtype."""
    import torch

    from graphtool.capture.user.input_names import positional_names

    if isinstance(item, torch.Tensor):
        args, kwargs = (item,), {}
    elif isinstance(item, dict):  # keywords; a positional input named by the forward's name goes in its place
        kwargs = dict(item)
        args = tuple(kwargs.pop(n) if n in kwargs else a for n, a in zip(positional_names(spec), spec.args))
    elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], (tuple, list)) and isinstance(item[1], dict):
        args, kwargs = tuple(item[0]), dict(item[1])
    elif isinstance(item, (tuple, list)):
        args, kwargs = tuple(item), {}
    else:
        raise BadModelSpec(f"{line}: {SCHEDULE_FUNCTION}() step {step} is {type(item).__name__}, not the model's inputs",
                           hint="yield a tuple of positional inputs, a dict of keyword inputs, or (args, kwargs)")
    kwargs = {**{k: v for k, v in spec.kwargs.items() if k not in kwargs}, **kwargs}  # the example's other keywords stay
    what = f"{line}: {SCHEDULE_FUNCTION}() step {step}"
    if len(args) != len(spec.args):
        raise BadModelSpec(f"{what} gives {len(args)} positional inputs where the example inputs have {len(spec.args)}",
                           hint=f"yield inputs built like get_model_and_inputs' ({_describe(spec.args, spec.kwargs)})")
    for i, (a, e) in enumerate(zip(args, spec.args)):
        _same_kind(what, f"input {i}", a, e, spec)
    for key, value in kwargs.items():
        if key in spec.kwargs:
            _same_kind(what, key, value, spec.kwargs[key], spec)
    return args, kwargs


def _same_kind(what: str, name: str, got, example, spec) -> None:
    import torch

    if isinstance(example, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise BadModelSpec(f"{what}: {name} is {type(got).__name__} where the example inputs have a tensor",
                               hint=f"yield inputs built like get_model_and_inputs' ({_describe(spec.args, spec.kwargs)})")
        if got.dim() != example.dim() or got.dtype != example.dtype:
            raise BadModelSpec(f"{what}: {name} is a {got.dim()}-d {got.dtype} tensor (shape {shape_text(got.shape)}) where the "
                               f"example has a {example.dim()}-d {example.dtype} one (shape {shape_text(example.shape)})",
                               hint="only sizes change from step to step; the rank and dtype of each input stay")


def _describe(args, kwargs) -> str:
    import torch

    def one(v):
        return f"tensor {shape_text(v.shape)}" if isinstance(v, torch.Tensor) else type(v).__name__

    bits = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(bits) or "no inputs"


def varying_labels(spec, steps: list) -> list[dict]:
    """Per step, ``{"input_ids:1": 17}`` for each named input dimension whose size is not the same in every step."""
    import dataclasses

    from graphtool.capture.user.input_names import all_named_inputs

    shapes = []
    for args, kwargs in steps:
        shapes.append({n: tuple(t.shape) for n, t in all_named_inputs(dataclasses.replace(spec, args=args, kwargs=kwargs))
                       if t is not None})
    keys: dict[str, int] = {}
    for s in shapes:
        for n, shape in s.items():
            keys[n] = max(keys.get(n, 0), len(shape))
    varying = [(n, d) for n in keys for d in range(keys[n])
               if len({s.get(n, ())[d] if d < len(s.get(n, ())) else None for s in shapes}) > 1]
    return [{f"{n}:{d}": s[n][d] for n, d in varying if n in s and d < len(s[n])} for s in shapes]


def varying_values(spec, steps: list) -> list[dict]:
    """Per step, ``{"pos": 9}`` for each plain int or float input (an argument, by the forward's name, or a keyword)
    whose value is not the same in every step: a decode loop's position, which no size label shows.

    >>> from types import SimpleNamespace
    >>> spec = SimpleNamespace(model=lambda x, pos, flag: x, args=(None, 0, True), kwargs={})
    >>> varying_values(spec, [((None, 8, True), {}), ((None, 9, True), {})])
    [{'pos': 8}, {'pos': 9}]
    """
    from graphtool.capture.user.input_names import positional_names

    names = positional_names(spec)
    per_step = []
    for args, kwargs in steps:
        found = {names[i] if i < len(names) else f"args[{i}]": a for i, a in enumerate(args)}
        found.update(kwargs)
        per_step.append({k: v for k, v in found.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    keys = [k for k in dict.fromkeys(k for d in per_step for k in d) if len({d.get(k) for d in per_step}) > 1]
    return [{k: d[k] for k in keys if k in d} for d in per_step]


def mark_inputs(schedule: Schedule, spec, marks: list[tuple[str, int]], *, maybe: bool = False) -> None:
    """``mark_dynamic`` (``maybe``: ``maybe_mark_dynamic``) on dimension ``dim`` of input ``name`` in every step,
    as a loop that marks each batch does."""
    import dataclasses

    from graphtool.capture import compat
    from graphtool.capture.user.input_names import all_named_inputs

    mark = compat.maybe_mark_dynamic if maybe else compat.mark_dynamic
    for args, kwargs in schedule.steps:
        named = dict((n, t) for n, t in all_named_inputs(dataclasses.replace(spec, args=args, kwargs=kwargs)) if t is not None)
        for name, dim in marks:
            t = named.get(name)
            if t is None or dim >= t.dim():
                have = ", ".join(named) or "none"
                raise UsageError(f"--mark-dynamic {name}:{dim}: no such tensor input dimension", hint=f"the tensor inputs are: {have}")
            mark(t, dim)


def parse_marks(texts) -> list[tuple[str, int]]:
    """``["input_ids:1"]`` -> ``[("input_ids", 1)]``; a usage error names the flag."""
    out = []
    for text in texts or ():
        name, sep, dim = str(text).rpartition(":")
        if not sep or not name or not dim.strip().isdigit():
            raise UsageError(f"--mark-dynamic {text!r}: expected INPUT:DIM", hint="--mark-dynamic input_ids:1")
        out.append((name.strip(), int(dim)))
    return out


def to_standin(schedule: Schedule) -> Schedule:
    """The schedule's inputs moved to meta, with their dynamo marks (the stand-in's inputs)."""
    from graphtool.capture.standin.meta import MetaMover

    mover = MetaMover(fresh=True)
    return Schedule([mover.move(step) for step in schedule.steps], schedule.source, schedule.labels, schedule.left_out,
                    grad_modes=list(schedule.grad_modes))


def padded(schedule: Schedule, spec, rules_of: dict[str, int], bucket: int) -> Schedule:
    """The schedule with each varying dimension (``{"input_ids": 1}``) padded up to a multiple of ``bucket``,
    as a collate function that pads to buckets does (every input sharing the sizes is padded with it)."""
    import dataclasses

    from graphtool.capture.user.input_names import tensor_inputs

    steps, labels = [], []
    for args, kwargs in schedule.steps:
        step_spec = dataclasses.replace(spec, args=args, kwargs=kwargs)
        named = tensor_inputs(step_spec)
        rules, want, targets = [], {}, []
        for name, dim in rules_of.items():
            t = dict(named).get(name)
            if t is None:
                continue
            size = int(t.shape[dim])
            rules.append(SizeRule(f"{name}:{dim}", name, dim))
            targets.append((name, t))
            want[(name, dim)] = -(-size // bucket) * bucket
        steps.append(_resized_inputs(step_spec, named, targets, rules, want) if rules else (args, kwargs))
        labels.append({f"{n}:{d}": v for (n, d), v in want.items()})
    return Schedule(steps, f"{schedule.source}, padded to multiples of {bucket}", labels, schedule.left_out,
                    grad_modes=list(schedule.grad_modes))


def symbolic_dims(capture) -> dict[int, tuple[str, ...]]:
    """Region index -> ``"input_ids:1"`` for each user input dimension dynamo compiled with a symbolic size
    (automatic dynamic after a size changed, ``mark_dynamic``, ``dynamic=True``)."""
    import torch

    out: dict[int, tuple[str, ...]] = {}
    for region in capture.regions:
        holders = [n for n in region.forward.graph.nodes if n.op == "placeholder"] if region.forward is not None else []
        found = []
        for rec in region.forward_inputs:
            ref = rec.ref
            if ref is None or ref.kind != "user_input" or rec.role != "plain" or rec.position >= len(holders):
                continue
            val = holders[rec.position].meta.get("val")
            found += [f"{ref.name}:{d}" for d, size in enumerate(getattr(val, "shape", ()))
                      if isinstance(size, torch.SymInt) and not size.node.is_constant()]
        out[region.index] = tuple(dict.fromkeys(found))
    return out


def settings_in_effect() -> dict:
    """The dynamo and cudagraph-tree settings that decide what a schedule compiles and records, as the
    installed torch (and the script, which ran first) has them."""
    from graphtool.capture import compat

    out = {}
    for name in ("recompile_limit", "automatic_dynamic_shapes", "assume_static_by_default"):
        try:
            out[name] = compat.dynamo_flag(name)
        except Exception:  # a torch without it: not a setting there
            continue
    for name in ("cudagraph_dynamic_shape_warn_limit", "cudagraph_unexpected_rerecord_limit", "cudagraph_skip_dynamic_graphs",
                 "cudagraph_capture_sizes"):
        if compat.has_inductor_flag(f"triton.{name}"):
            value = compat.inductor_flag(f"triton.{name}")
            if name != "cudagraph_capture_sizes" or value is not None:
                out[name] = tuple(value) if isinstance(value, list) else value
    try:
        stance = compat.compiler_stance()
    except Exception:  # a torch without set_stance
        stance = "default"
    if stance != "default":
        out["stance"] = stance
    return out
