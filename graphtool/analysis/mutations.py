"""Which inputs a model mutates, and which outputs alias inputs or each other.

The source of truth is AOT autograd's ViewAndMutationMeta (``fw_metadata``): a scan of graph nodes
misses user-input mutations, which AOT moves out of the graph. Metadata and storage mutations that
dynamo applies outside the graph (``t_()``, ``set_()`` on an input) never reach AOT; the tracer
witnesses those by comparing each input's shape, strides, offset and storage before and after.

Example::

    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> rep = analyze_mutations(trace_model(load_model("examples/convnet_bn.py")))
    >>> [(m.name, m.mutates_data) for m in rep.mutated]
    [('bn.num_batches_tracked', True), ('bn.running_mean', True), ('bn.running_var', True)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from graphtool.analysis.graph_summary import Source, user_source
from graphtool.capture import compat


@dataclass(frozen=True)
class InputMutation:
    name: str
    kind: str  # parameter | buffer | user_input | optimizer_state | gradient | intermediate | other
    mutates_data: bool
    mutates_metadata: bool
    mutates_storage: bool
    under_no_grad: bool
    source: Source | None
    regions: tuple[int, ...]
    note: str | None = None
    in_graph: bool = False  # the graph itself writes it (a copy_ into its placeholder), not an epilogue after it
    mutated_in: tuple[int, ...] = ()  # the regions whose graph writes it (``regions``: every region it is an input of)
    by_optimizer: bool = False  # written by one of torch's optimizers (its state; the parameters and gradients its step updates)

    @property
    def mutated(self) -> bool:
        return self.mutates_data or self.mutates_metadata or self.mutates_storage

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "mutates_data": self.mutates_data,
            "mutates_metadata": self.mutates_metadata,
            "mutates_storage": self.mutates_storage,
            "under_no_grad": self.under_no_grad,
            "source": self.source.to_dict() if self.source else None,
            "regions": list(self.regions),
            "note": self.note,
            "in_graph": self.in_graph,
            "mutated_in": list(self.mutated_in),
            "by_optimizer": self.by_optimizer,
        }


@dataclass(frozen=True)
class OutputAlias:
    region: int
    index: int
    is_view: bool
    alias_type: str  # AOT's OutputType name: non_alias, alias_of_input, is_input, ...
    alias_of: dict | None  # {"kind": input|output|intermediate, "name", "index"}

    def to_dict(self) -> dict:
        return {
            "region": self.region,
            "index": self.index,
            "is_view": self.is_view,
            "alias_type": self.alias_type,
            "alias_of": self.alias_of,
        }


@dataclass(frozen=True)
class InputAlias:
    """Two inputs that share storage: the same tensor passed twice, or a view of another."""

    names: tuple[str, ...]
    relation: str  # same_tensor | shared_storage
    source: Source | None = None  # where the example inputs are made (the aliasing is the caller's)

    def to_dict(self) -> dict:
        return {"names": list(self.names), "relation": self.relation,
                "source": self.source.to_dict() if self.source else None}


@dataclass(frozen=True)
class ModelOutputAlias:
    """One tensor the compiled model returned, and what it shares storage with."""

    index: int
    is_view: bool
    alias_of: dict | None  # {"kind": input|output|intermediate, "name", "index"}
    source: Source | None = None  # the user's line that made the output, when the last graph says

    def to_dict(self) -> dict:
        return {"index": self.index, "is_view": self.is_view, "alias_of": self.alias_of,
                "source": self.source.to_dict() if self.source else None}


@dataclass(frozen=True)
class MutationReport:
    inputs: tuple[InputMutation, ...]
    outputs: tuple[OutputAlias, ...]
    input_aliases: tuple[InputAlias, ...]
    model_outputs: tuple[ModelOutputAlias, ...] = ()

    @property
    def mutated(self) -> list[InputMutation]:
        return [m for m in self.inputs if m.mutated]

    @property
    def aliased_outputs(self) -> list[ModelOutputAlias]:
        return [o for o in self.model_outputs if o.alias_of is not None]

    @property
    def optimizer_writes(self) -> list[InputMutation]:
        """What an optimizer's step writes in place, as it must: its state and the parameters (and gradients) it updates."""
        return [m for m in self.mutated if m.by_optimizer]

    def optimizer_summary(self) -> str | None:
        """``the optimizer step updates 52 parameters and 156 state tensors in place, as expected`` (None: no optimizer wrote).

        >>> p = InputMutation("w", "parameter", True, False, False, True, None, (1,), by_optimizer=True)
        >>> s = InputMutation("opt.state[w].step", "optimizer_state", True, False, False, True, None, (1,), by_optimizer=True)
        >>> MutationReport((p, s), (), ()).optimizer_summary()
        'the optimizer step updates 1 parameter and 1 state tensor in place, as expected'
        """
        return optimizer_summary(self.optimizer_writes)

    def verdict(self) -> str:
        """One line: ``3 buffers mutated in place; output 1 is a view of input x``."""
        parts = []
        said = self.optimizer_summary()
        if said:
            parts.append(said)
        by_kind: dict[str, int] = {}
        for m in self.mutated:
            if m.by_optimizer:
                continue
            by_kind[m.kind] = by_kind.get(m.kind, 0) + 1
        for kind, n in by_kind.items():
            noun = {"user_input": "user input", "optimizer_state": "optimizer state tensor"}.get(kind, kind)
            parts.append(f"{n} {noun}{'s' if n != 1 else ''} mutated")
        for o in self.aliased_outputs:
            what = "is a view of" if o.is_view else "shares storage with"
            of = o.alias_of
            name = {"input": f"input {of['name']}", "output": f"output {of['index']}"}.get(of["kind"], "an intermediate")
            parts.append(f"output {o.index} {what} {name}")
        for a in self.input_aliases:
            parts.append(f"inputs {' and '.join(a.names)} share storage")
        return "; ".join(parts) if parts else "no input is mutated and no output aliases an input"

    def to_dict(self) -> dict:
        return {
            "mutations": {"inputs": [m.to_dict() for m in self.inputs]},
            "aliasing": {
                "outputs": [o.to_dict() for o in self.model_outputs],
                "inputs": [a.to_dict() for a in self.input_aliases],
                "regions": [o.to_dict() for o in self.outputs],
            },
            "verdict": self.verdict(),
        }


def optimizer_summary(writes) -> str | None:
    """One sentence for what an optimizer's step writes (``writes``: InputMutations with ``by_optimizer``)."""
    if not writes:
        return None
    counts: dict[str, int] = {}
    for m in writes:
        counts[m.kind] = counts.get(m.kind, 0) + 1
    nouns = {"parameter": "parameter", "optimizer_state": "state tensor", "gradient": "gradient"}
    said = [f"{n} {nouns.get(k, k.replace('_', ' '))}{'s' if n != 1 else ''}"
            for k, n in sorted(counts.items(), key=lambda kv: list(nouns).index(kv[0]) if kv[0] in nouns else len(nouns))]
    listed = ", ".join(said[:-1]) + (" and " if len(said) > 1 else "") + said[-1]
    return f"the optimizer step updates {listed} in place, as expected"


ALLOW_KINDS = {"buffers": "buffer", "parameters": "parameter", "user_inputs": "user_input", "inputs": "user_input",
               "optimizer_state": "optimizer_state"}


def is_allowed(m: InputMutation, allow) -> bool:
    """Whether ``--allow`` accepts this mutation: a kind (``buffers``, ``parameters``, ``user_inputs``;
    ``optimizer_state``: everything an optimizer's step writes, its state and the parameters it updates)
    or an FQN pattern (``*.k_cache``, ``bn.running_*``, fnmatch rules). A leading ``*.`` also matches
    nothing, so ``*.k_cache`` accepts a top-level ``k_cache`` as well as ``layers.0.k_cache``.

    >>> m = InputMutation("layers.0.k_cache", "buffer", True, False, False, True, None, (0,))
    >>> is_allowed(m, ["buffers"]), is_allowed(m, ["*.k_cache"]), is_allowed(m, ["parameters"])
    (True, True, False)
    >>> is_allowed(InputMutation("k_cache", "buffer", True, False, False, True, None, (0,)), ["*.k_cache"])
    True
    >>> is_allowed(InputMutation("net.0.weight", "parameter", True, False, False, True, None, (1,), by_optimizer=True), ["optimizer_state"])
    True
    """
    return any(ALLOW_KINDS.get(a) == m.kind or fqn_matches(m.name, a) or (a == "optimizer_state" and m.by_optimizer)
               for a in allow)


def fqn_matches(name: str, pattern: str) -> bool:
    """fnmatch, case-sensitive, where a leading ``*.`` may also match nothing (a module at the top).

    >>> fqn_matches("k_cache", "*.k_cache"), fqn_matches("a.k_cache", "*.k_cache"), fqn_matches("xk_cache", "*.k_cache")
    (True, True, False)
    """
    from fnmatch import fnmatchcase

    return fnmatchcase(name, pattern) or (pattern.startswith("*.") and fnmatchcase(name, pattern[2:]))


def _mutation_sources(region) -> dict[int, str | None]:
    """dynamo input index -> the stack trace of the op whose result AOT writes back."""
    out_node = next(iter(region.forward.graph.find_nodes(op="output")))
    descs = compat.output_descriptors(region.forward.graph) or []
    values = out_node.args[0] if out_node.args else ()
    stacks: dict[int, str | None] = {}
    for value, desc in zip(values, descs):
        role, idx = compat.describe_aot_output(desc)
        if role == "mutated_input" and idx is not None and hasattr(value, "meta"):
            stacks[idx] = value.meta.get("stack_trace")
    return stacks


def _in_graph_write_sources(region) -> dict[str, str | None]:
    """placeholder name -> the stack trace of the value an in-graph ``copy_`` writes into it.

    Inductor's AOT stage keeps input mutations in the graph (``copy_(primals_5, add_2)`` at its end,
    with no stack trace of its own): the line is the one that computed the new value."""
    found: dict[str, str | None] = {}
    for node in region.forward.graph.nodes:
        if node.op != "call_function" or "copy_" not in str(node.target) or len(node.args) < 2:
            continue
        dst, value = node.args[0], node.args[1]
        if getattr(dst, "op", None) != "placeholder" or user_source(found.get(dst.name)):
            continue
        stack = node.meta.get("stack_trace")
        if user_source(stack) is None and hasattr(value, "meta"):
            stack = value.meta.get("stack_trace")
        found[dst.name] = stack
    return found


_OPTIMIZER_FRAME = re.compile(r'File "[^"]*[/\\]torch[/\\]optim[/\\][^"]*"')


def _by_optimizer(*stacks: str | None) -> bool:
    """Whether the write happened inside one of torch's optimizers (``torch/optim/adamw.py`` on its stack).

    >>> _by_optimizer('File "/v/site-packages/torch/optim/adam.py", line 769, in _multi_tensor_adam', None)
    True
    >>> _by_optimizer('File "/m.py", line 9, in forward')
    False
    """
    return any(bool(s) and _OPTIMIZER_FRAME.search(s) is not None for s in stacks)


def analyze_mutations(capture) -> MutationReport:
    merged: dict[str, dict] = {}
    outputs: list[OutputAlias] = []
    for region in capture.regions:
        if region.forward is None:
            continue
        index_of = {id(r): i for i, r in enumerate(region.inputs)}
        sources = _mutation_sources(region)
        written = _in_graph_write_sources(region)
        for ref in region.inputs:
            _merge(merged, ref, region.index)
        for rec in region.forward_inputs:
            if rec.ref is None or not rec.mutated:
                continue
            entry = _merge(merged, rec.ref, region.index)
            entry["mutates_data"] |= rec.mutates_data
            entry["mutates_metadata"] |= rec.mutates_metadata
            entry["mutates_storage"] |= rec.mutates_storage
            # AOT's mutations_under_no_grad_or_inference_mode, as torch says it (True for every mutation
            # of a --inference trace, which runs under no_grad; and for a @torch.no_grad() decode step)
            entry["under_no_grad"] |= rec.under_no_grad
            entry["mutated_in"].add(region.index)
            index = index_of.get(id(rec.ref))
            stacks = (sources.get(index), written.get(rec.graph_name), region.input_writes.get(index))
            entry["source"] = (entry["source"] or next(filter(None, map(user_source, stacks)), None)
                               or user_source(getattr(region, "called_from", None)))
            entry["in_graph"] |= rec.graph_name in written
            entry["by_optimizer"] |= rec.ref.kind == "optimizer_state" or _by_optimizer(*stacks)
        outputs.extend(_output_aliases(region))
    for name, how in capture.metadata_changes.items():
        entry = merged.setdefault(name, _blank(name, "user_input"))
        entry["mutates_metadata"] = True
        entry["mutates_storage"] |= how == "storage"
        entry["note"] = "applied by dynamo outside the compiled graph"
    inputs = tuple(
        InputMutation(
            name=e["name"], kind=e["kind"], mutates_data=e["mutates_data"], mutates_metadata=e["mutates_metadata"],
            mutates_storage=e["mutates_storage"], under_no_grad=e["under_no_grad"], source=e["source"],
            regions=tuple(sorted(e["regions"])), note=e["note"], in_graph=e["in_graph"],
            mutated_in=tuple(sorted(e["mutated_in"])), by_optimizer=e["by_optimizer"],
        )
        for e in merged.values()
    )
    return MutationReport(
        inputs=inputs,
        outputs=tuple(outputs),
        input_aliases=tuple(input_aliases(capture)),
        model_outputs=tuple(model_output_aliases(capture)),
    )


def model_output_aliases(capture) -> list[ModelOutputAlias]:
    """Storage sharing among the tensors the compiled model really returned, and with its inputs."""
    from graphtool.capture.tensors import iter_tensors
    from graphtool.capture.user.input_names import all_named_inputs

    inputs = {}
    for i, (name, t) in enumerate(all_named_inputs(capture.spec)):
        inputs.setdefault(compat.storage_key(t), (name, i))
    seen: dict = {}
    result = []
    tensors = list(iter_tensors(capture.outputs))
    aot_kinds = _aot_output_kinds(capture, len(tensors))
    lines = _user_output_sources(capture, len(tensors))
    for i, t in enumerate(tensors):
        key = compat.storage_key(t)
        view = compat.is_view(t)
        alias_of = None
        if key in inputs:
            name, idx = inputs[key]
            alias_of = {"kind": "input", "name": name, "index": idx}
        elif key in seen:
            alias_of = {"kind": "output", "name": None, "index": seen[key]}
        elif view and (aot_kinds is None or aot_kinds[i].startswith("alias_of_intermediate")):
            alias_of = {"kind": "intermediate", "name": None, "index": None}
        elif view:
            # a view only of something the compiled graph made and dropped (linear on a 3-D input views
            # addmm's result inside its decomposition; eager returns no view): AOT says non_alias
            view = False
        seen.setdefault(key, i)
        result.append(ModelOutputAlias(i, view, alias_of, lines.get(i)))
    more = _input_view_sources(capture, result, [tuple(t.shape) for t in tensors])
    return [replace(o, source=more[o.index]) if more.get(o.index) else o for o in result]


def _aot_output_kinds(capture, n_outputs: int) -> list[str] | None:
    """AOT's output type of each tensor the model returned, when the last region's user outputs are them
    (the same count); ``None`` when they cannot be matched (graph breaks with eager code after the last
    region), and then any region's word for an intermediate view is taken for all."""
    regions = [r for r in capture.regions if r.forward is not None]
    if not regions:
        return None
    last = regions[-1].forward_outputs
    if len(last) == n_outputs:
        return [o.alias_type for o in last]
    if any(o.alias_type.startswith("alias_of_intermediate") for r in regions for o in r.forward_outputs):
        return None
    return ["non_alias"] * n_outputs


def _user_output_sources(capture, n_outputs: int) -> dict[int, Source | None]:
    """output index -> the user's line of the node the last region returns it from (when that region's
    user outputs are the model's outputs)."""
    regions = [r for r in capture.regions if r.forward is not None]
    if not regions or len(regions[-1].forward_outputs) != n_outputs:
        return {}
    return _region_output_sources(regions[-1])


def _region_output_sources(region) -> dict[int, Source | None]:
    """user output index of one region -> the user's line of the node its forward graph returns it from."""
    graph = region.forward.graph
    out_node = next(iter(graph.find_nodes(op="output")))
    values = out_node.args[0] if out_node.args else ()
    found: dict[int, Source | None] = {}
    for value, desc in zip(values, compat.output_descriptors(graph) or []):
        role, idx = compat.describe_aot_output(desc)
        if role == "user_output" and idx is not None and hasattr(value, "meta"):
            found[idx] = user_source(value.meta.get("stack_trace"))
    return found


def _region_output_shapes(region) -> dict[int, tuple | None]:
    """user output index of one region -> the shape its forward graph gives it (``None``: symbolic or unknown)."""
    graph = region.forward.graph
    out_node = next(iter(graph.find_nodes(op="output")))
    values = out_node.args[0] if out_node.args else ()
    found: dict[int, tuple | None] = {}
    for value, desc in zip(values, compat.output_descriptors(graph) or []):
        role, idx = compat.describe_aot_output(desc)
        val = value.meta.get("val") if hasattr(value, "meta") else None
        if role == "user_output" and idx is not None:
            try:
                found[idx] = tuple(int(n) for n in val.shape)
            except (AttributeError, TypeError, ValueError):
                found[idx] = None
    return found


def _input_view_sources(capture, outputs: list[ModelOutputAlias], shapes: list[tuple]) -> dict[int, Source | None]:
    """output index -> the user's line, for the model's outputs that are views of an input when the last
    region's outputs are not the model's: a graph break before ``return y, x[:, -1]`` leaves ``y`` outside
    the last graph, which returns the view alone. The k-th output that views input ``x`` is the k-th output
    of the latest region that views an input named ``x``, when that region has as many of the same shapes
    (a submodule's own ``x`` is another tensor)."""
    wanted: dict[str, list[int]] = {}
    for o in outputs:
        if o.source is None and o.is_view and o.alias_of and o.alias_of.get("kind") == "input":
            wanted.setdefault(o.alias_of["name"], []).append(o.index)
    found: dict[int, Source | None] = {}
    for name, indices in wanted.items():
        for region in reversed([r for r in capture.regions if r.forward is not None]):
            refs = [rec.ref for rec in region.forward_inputs]
            views = [o.index for o in region.forward_outputs if o.alias_type == "alias_of_input" and o.base_index is not None
                     and o.base_index < len(refs) and refs[o.base_index] is not None and refs[o.base_index].name == name]
            if not views:
                continue
            if len(views) == len(indices):
                lines, made = _region_output_sources(region), _region_output_shapes(region)
                if all(made.get(v) == shapes[i] for i, v in zip(indices, views)):
                    found.update((i, lines.get(v)) for i, v in zip(indices, views))
            break  # the latest region that returns a view of it decides; a different count matches nothing
    return found


def _blank(name: str, kind: str) -> dict:
    return {
        "name": name, "kind": kind, "mutates_data": False, "mutates_metadata": False, "mutates_storage": False,
        "under_no_grad": False, "source": None, "regions": set(), "note": None, "in_graph": False,
        "mutated_in": set(), "by_optimizer": False,
    }


def _merge(merged: dict, ref, region_index: int) -> dict:
    entry = merged.setdefault(ref.name, _blank(ref.name, ref.kind))
    entry["regions"].add(region_index)
    return entry


def _output_aliases(region) -> list[OutputAlias]:
    refs = [rec.ref for rec in region.forward_inputs]
    result = []
    for out in region.forward_outputs:
        i, kind, base = out.index, out.alias_type, out.base_index
        alias_of = None
        if kind in ("alias_of_input", "is_input") and base is not None and base < len(refs) and refs[base]:
            alias_of = {"kind": "input", "name": refs[base].name, "index": base}
        elif kind == "alias_of_intermediate_base_is_user_output" and base is not None:
            alias_of = {"kind": "output", "name": f"output {base}", "index": base}
        elif kind.startswith("alias_of_intermediate"):
            alias_of = {"kind": "intermediate", "name": "an intermediate", "index": base}
        is_view = kind not in ("non_alias", "is_input", "unsafe_view_alias")
        result.append(OutputAlias(region.index, i, is_view, kind, alias_of))
    return result


def input_aliases(capture) -> list[InputAlias]:
    """Groups of user inputs (by argument name) that share storage."""
    from graphtool.capture.user.input_names import all_named_inputs

    groups: dict = {}
    for name, t in all_named_inputs(capture.spec):
        groups.setdefault(compat.storage_key(t), []).append((name, t))
    result = []
    for members in groups.values():
        if len(members) < 2:
            continue
        same = all(t is members[0][1] for _, t in members)
        where = Source(str(capture.spec.path), capture.spec.line) if capture.spec.line else None
        result.append(InputAlias(tuple(n for n, _ in members), "same_tensor" if same else "shared_storage", where))
    return result
