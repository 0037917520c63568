"""Which blocks a model repeats, what compiling them one by one would cost, and how to write it (torch-free).

The child (:mod:`graphtool.capture.compile_regions`) compiled each instance of a repeated class on its own with
dynamo, in order and with no reset between them, as ``torch.compile`` on each block does. Here:

- instances are **identical** when the same dynamo graphs ran for them (structural hashes: ops, arguments, shapes,
  dtypes); the largest such set of a class is its repeated block, ``8 x Block (blocks.0-7)``, with its ``share`` of
  the whole model's op nodes;
- the others are **near misses**, each with why it differs: a different config (a parameter's shape, a submodule's
  setting), a flag ``forward`` reads, other inputs, or torch's own guard failure;
- an identical instance whose guards still failed (dynamo compiled it again: ``blocks.0``'s input does not require
  grad, the others' do) **recompiles per instance**: one of the hazards of compiling blocks one by one, beside
  outputs that alias inputs, FSDP2-wrapped blocks and nested repeats;
- :func:`regional_change` writes the one-line change in the user's terms.

Example::

    >>> span(["layers.0", "layers.1", "layers.2", "layers.5"])
    'layers.0-2,5'
    >>> probe = [{"fqn": f"b.{i}", "graphs": ["h"], "compiles": [{"hash": "h", "nodes": 5, "compile_id": "1/0",
    ...           "recompile_reason": None}] if i == 0 else [], "error": None} for i in range(4)]
    >>> raw = {"class": "Block", "fqns": [p["fqn"] for p in probe], "nested_in": None, "probe": probe, "facts": {}}
    >>> [(b.cls, b.count, b.identical, b.label()) for b in judge_blocks([raw], [])]
    [('Block', 4, True, '4 x Block (b.0-3)')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from graphtool.analysis.module_names import module_fqn
from graphtool.text import count


@dataclass(frozen=True)
class NearMiss:
    """Instances of a repeated class whose graphs differ from the repeated block's (``like``), and why."""

    fqns: tuple[str, ...]
    why: str
    torch_reason: str | None = None

    def to_dict(self) -> dict:
        return {"fqns": list(self.fqns), "why": self.why, "torch_reason": self.torch_reason}


@dataclass(frozen=True)
class Recompile:
    fqn: str
    reason: str | None

    def to_dict(self) -> dict:
        return {"fqn": self.fqn, "reason": self.reason}


@dataclass(frozen=True)
class RepeatedBlock:
    """``count`` instances of ``cls`` (``fqns``) whose dynamo graphs are ``identical`` (or, False, a class whose
    instances all differ); ``share`` of the whole model's op nodes; ``nodes_each`` op nodes in one instance's graph."""

    cls: str
    fqns: tuple[str, ...]
    identical: bool
    share: float | None
    nodes_each: int | None = None
    near_misses: tuple[NearMiss, ...] = ()
    recompiles: tuple[Recompile, ...] = ()  # identical graphs, but dynamo compiled these instances again

    @property
    def count(self) -> int:
        return len(self.fqns)

    def label(self) -> str:
        return f"{self.count} x {self.cls} ({span(list(self.fqns))})"

    def to_dict(self) -> dict:
        return {"class": self.cls, "fqns": list(self.fqns), "count": self.count, "identical": self.identical,
                "share": None if self.share is None else round(self.share, 4), "nodes_each": self.nodes_each,
                "near_misses": [m.to_dict() for m in self.near_misses],
                "recompiles": [r.to_dict() for r in self.recompiles]}


@dataclass(frozen=True)
class Hazard:
    """Something that goes wrong compiling these blocks one by one on this model: ``code``, what was found
    (``text``), where (``fqns``) and the public report of it (``seen_in``)."""

    code: str
    text: str
    fqns: tuple[str, ...] = ()
    seen_in: str | None = None

    def to_dict(self) -> dict:
        return {"code": self.code, "text": self.text, "fqns": list(self.fqns), "seen_in": self.seen_in}


@dataclass(frozen=True)
class BlockFacts:
    """What the child found about the candidate groups beyond the probe, for the hazards."""

    aliased: dict[str, list[str]] = field(default_factory=dict)  # fqn -> "output 0 is input 0"
    fsdp2: tuple[str, ...] = ()
    nested: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (inner class, outer class, inner fqns)
    compiled: tuple[str, ...] = ()  # modules the user's model already compiles itself


def span(fqns: list[str]) -> str:
    """Instances named compactly: ``layers.0-3``, ``layers.0-2,5``; names that are not numbered siblings are
    listed.

    >>> span(["blocks.0", "blocks.1"]), span(["enc.0", "dec.0"]), span(["a"])
    ('blocks.0-1', 'enc.0, dec.0', 'a')
    """
    heads = {f.rpartition(".")[0] for f in fqns}
    tails = [f.rpartition(".")[2] for f in fqns]
    if len(fqns) < 2 or len(heads) != 1 or not all(t.isdigit() for t in tails):
        return ", ".join(fqns)
    head = heads.pop()
    nums = sorted(int(t) for t in tails)
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    text = ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)
    return f"{head}.{text}" if head else text


def group_nodes(whole_graphs: list[dict], fqns: set[str]) -> tuple[int, int]:
    """(op nodes inside any of ``fqns``, all op nodes) of the whole model's dynamo graphs."""
    total = sum(int(g.get("nodes") or 0) for g in whole_graphs)
    inside = 0
    for g in whole_graphs:
        for entry in g.get("modules") or ():
            if any(module_fqn(path) in fqns for path, _cls in entry["stack"]):
                inside += int(entry["nodes"])
    return inside, total


def judge_blocks(raw_blocks: list[dict], whole_graphs: list[dict]) -> list[RepeatedBlock]:
    """The repeated blocks of each probed group (see the module's docstring), largest share first."""
    out = []
    for raw in raw_blocks:
        probe = raw.get("probe")
        if raw.get("nested_in") or not probe:
            continue
        out.extend(_judge_group(raw, probe, whole_graphs))
    return sorted(out, key=lambda b: (not b.identical, -(b.share or 0.0), -b.count))


def _judge_group(raw: dict, probe: list[dict], whole_graphs: list[dict]) -> list[RepeatedBlock]:
    sets: dict[tuple | None, list[dict]] = {}
    for p in probe:
        sig = tuple(p["graphs"]) if p["graphs"] and not p.get("error") else None
        sets.setdefault(sig if sig is not None else ("unique", p["fqn"]), []).append(p)
    ordered = sorted(sets.items(), key=lambda kv: -len(kv[1]))  # stable: the first seen wins a tie
    sig, members = ordered[0]
    facts = raw.get("facts") or {}
    inputs = {p["fqn"]: p.get("inputs") for p in probe}
    nodes_of = {c["hash"]: c["nodes"] for p in probe for c in p.get("compiles", ())}
    if len(members) < 2:  # no two instances alike
        fqns = tuple(p["fqn"] for p in probe)
        misses = tuple(NearMiss((p["fqn"],), _why(p, probe[0], facts, inputs), _reason(p)) for p in probe[1:])
        inside, total = group_nodes(whole_graphs, set(fqns))
        return [RepeatedBlock(raw["class"], fqns, False, inside / total if total else None, None, misses)]
    like = members[0]
    fqns = tuple(p["fqn"] for p in members)
    misses = []
    entry = next((c["compile_id"] for p in members for c in p.get("compiles", ())), None)  # the block's own compile
    for _other, others in ordered[1:]:
        first = others[0]
        misses.append(NearMiss(tuple(p["fqn"] for p in others), _why(first, like, facts, inputs), _reason(first, entry)))
    # the first compile of the block's graphs is expected; every further compile among identical instances is a recompile
    recompiles, seen = [], False
    for p in members:
        if p.get("compiles"):
            if seen:
                recompiles.append(Recompile(p["fqn"], _reason(p)))
            seen = True
    inside, total = group_nodes(whole_graphs, set(fqns))
    nodes_each = sum(nodes_of.get(h, 0) for h in sig) if sig and sig[0] != "unique" else None
    return [RepeatedBlock(raw["class"], fqns, True, inside / total if total else None, nodes_each, tuple(misses),
                          tuple(recompiles))]


def _reason(p: dict, against: str | None = None) -> str | None:
    """torch's reason for ``p``'s compile, one line, spaces collapsed: with ``against``, only the guard failure
    against that compiled entry (torch names the entry it tried last; one against another variant says nothing
    about this one), else the first."""
    if p.get("error"):
        return p["error"]
    text = next((c.get("recompile_reason") for c in p.get("compiles", ()) if c.get("recompile_reason")), None)
    if not text:
        return None
    lines = [ln for ln in text.splitlines() if re.match(r"^\d+/\d+: ", ln)] or text.splitlines()[:1]
    pick = next((ln for ln in lines if ln.startswith(f"{against}: ")), None) if against else lines[0]
    return re.sub(r"\s+", " ", pick).strip() if pick else None


def _why(odd: dict, like: dict, facts: dict, inputs: dict) -> str:
    """Why ``odd``'s graphs differ from ``like``'s, in the user's terms."""
    name = like["fqn"]
    if odd.get("error"):
        return "dynamo could not compile it alone"
    a, b = facts.get(odd["fqn"]) or {}, facts.get(name) or {}
    reads = set(b.get("reads") or ())
    flags = [k for k in sorted(set(a.get("attrs", {})) | set(b.get("attrs", {})))
             if "." not in k and k in reads and a.get("attrs", {}).get(k) != b.get("attrs", {}).get(k)]
    if flags:
        k = flags[0]
        return f"a flag read in forward: self.{k} is {a['attrs'].get(k)} here, {b['attrs'].get(k)} in {name}"
    params = [k for k in sorted(set(a.get("params", {})) | set(b.get("params", {})))
              if a.get("params", {}).get(k) != b.get("params", {}).get(k)]
    attrs = [k for k in sorted(set(a.get("attrs", {})) | set(b.get("attrs", {})))
             if a.get("attrs", {}).get(k) != b.get("attrs", {}).get(k)]
    if params or attrs:  # a submodule's settings (in_features=64) say it best; then the parameters' shapes
        parts = [f"{k}={a.get('attrs', {}).get(k, 'unset')} here, {b.get('attrs', {}).get(k, 'unset')} in {name}"
                 for k in attrs[:2]]
        parts += [f"{k} {a.get('params', {}).get(k, 'absent')} here, {b.get('params', {}).get(k, 'absent')} in {name}"
                  for k in params[: max(0, 2 - len(parts))]]
        return "a different config: " + "; ".join(parts)
    if inputs.get(odd["fqn"]) != inputs.get(name) and inputs.get(odd["fqn"]) is not None:
        return f"called with other inputs: {', '.join(inputs[odd['fqn']])} here, {', '.join(inputs.get(name) or ())} in {name}"
    if _reason(odd):
        return f"dynamo's guards differ: {_reason(odd)}"
    return f"dynamo made another graph of it than of {name}"


def hazards(blocks: list[RepeatedBlock], facts: BlockFacts, regional_frames: list | None = None) -> list[Hazard]:
    """What goes wrong compiling ``blocks`` one by one on this model; ``regional_frames``: the per-block compile's
    own frames (its recompiles are torch's truth; without them, the probe's recompiles stand)."""
    picked = [b for b in blocks if b.identical]
    members = {f: b for b in picked for f in b.fqns}
    out = []
    aliased = [f for f in members if facts.aliased.get(f)]
    if aliased:
        what = facts.aliased[aliased[0]][0]
        out.append(Hazard("aliased_output",
                          f"{span(aliased)}: {what}: a compiled block whose output aliases its input makes torch "
                          "regenerate the alias outside the graph; vLLM needed clones", tuple(aliased), "vllm#41397"))
    wrapped = [f for f in facts.fsdp2 if f in members]
    if wrapped:
        out.append(Hazard("fsdp2", f"{span(wrapped)} are FSDP2-wrapped: compiling each block on its own bypassed "
                                   "FSDP2's hooks; compile the block before fully_shard wraps it",
                          tuple(wrapped), "accelerate#4022"))
    outer = {b.cls for b in picked}
    for inner, outer_cls, fqns in facts.nested:
        if outer_cls in outer:
            out.append(Hazard("nested_regions", f"{count(len(fqns), inner)} repeat inside the {outer_cls}s: mark only "
                                                f"the {outer_cls} a nested_compile_region, since a nested region "
                                                "specialised on an inner guard is reused silently", fqns, "pytorch#192905"))
    compiled = [f for f in facts.compiled if any(f == m or f.startswith(m + ".") for m in members)]
    if compiled:
        out.append(Hazard("nested_regions", f"{span(compiled)} already compiled by the model itself: a compiled "
                                            "region inside a compiled block", tuple(compiled), "pytorch#192905"))
    alone = [r for b in picked for r in b.recompiles]
    if regional_frames is not None:
        reasons = [f.recompile_reason for f in regional_frames if f.kind == "forward" and f.recompile_reason]
    else:
        reasons = [r.reason for r in alone]
    if reasons:
        named = f"; alone, {span([r.fqn for r in alone])} compiled again" if alone else ""
        out.append(Hazard("recompiles_per_instance",
                          f"the blocks compiled {len(reasons) + 1} times, not once ({reasons[0]}){named}: each "
                          "instance whose guards differ pays the compile again", tuple(r.fqn for r in alone), None))
    return out


def regional_change(block: RepeatedBlock, backend: str, mode: str | None) -> str:
    """The change to the user's code that compiles ``block``'s instances one by one, in the user's names.

    >>> b = RepeatedBlock("LlamaDecoderLayer", ("model.layers.0", "model.layers.1"), True, 0.8)
    >>> regional_change(b, "inductor", None)
    'for block in model.model.layers: block.compile()'
    >>> regional_change(RepeatedBlock("B", ("a", "c.b"), True, 0.5), "aot_eager", "default")
    'for name in ["a", "c.b"]: model.get_submodule(name).compile(backend="aot_eager")'
    """
    args = []
    if backend != "inductor":
        args.append(f'backend="{backend}"')
    if mode and mode != "default":
        args.append(f'mode="{mode}"')
    call = f"compile({', '.join(args)})"
    heads = {f.rpartition(".")[0] for f in block.fqns}
    tails = [f.rpartition(".")[2] for f in block.fqns]
    if len(heads) == 1 and all(t.isdigit() for t in tails) and sorted(int(t) for t in tails) == list(range(len(tails))):
        head = heads.pop()
        container = f"model.{head}" if head else "model"
        return f"for block in {container}: block.{call}"
    names = ", ".join(f'"{f}"' for f in block.fqns)
    return f"for name in [{names}]: model.get_submodule(name).{call}"


def nested_change(block: RepeatedBlock) -> str:
    """The one-graph alternative: mark the block's forward a nested compile region, keep ``torch.compile(model)``.

    >>> print(nested_change(RepeatedBlock("Block", ("b.0", "b.1"), True, 0.5)))
    from torch.compiler import nested_compile_region
    Block.forward = nested_compile_region(Block.forward)
    """
    return f"from torch.compiler import nested_compile_region\n{block.cls}.forward = nested_compile_region({block.cls}.forward)"


def raw_facts(raw_blocks: list[dict], compiled: list[str]) -> BlockFacts:
    """The hazard facts of the child's groups."""
    aliased: dict[str, list[str]] = {}
    fsdp2: list[str] = []
    nested = []
    for raw in raw_blocks:
        aliased.update({k: list(v) for k, v in (raw.get("aliased") or {}).items()})
        fsdp2.extend(raw.get("fsdp2") or ())
        if raw.get("nested_in"):
            nested.append((raw["class"], raw["nested_in"], tuple(raw["fqns"])))
    return BlockFacts(aliased, tuple(fsdp2), tuple(nested), tuple(compiled))
