"""An AOT graph read back from the code torch logged (``GraphModule.print_readable``), to be drawn as ``report`` draws.

A log holds no graph object, only fx's readable code::

    class GraphModule(torch.nn.Module):
        def forward(
            self,
            primals_1: "f32[8, 8][8, 1]cpu",  # PlainAOTInput(idx=0)
            primals_3: "f32[2, 8][8, 1]cpu",  # PlainAOTInput(idx=2)
        ):
            # File: /app/model.py:12 in forward, code: y = torch.relu(self.a(x))
            permute: "f32[8, 8][1, 8]cpu" = torch.ops.aten.permute.default(primals_1, [1, 0]);  primals_1 = None
            ...
            return (
                relu,  # PlainAOTOutput(idx=0)
                primals_3,  # SavedForBackwardsAOTOutput(idx=0)
            )

What is read: each placeholder (its name, dtype, shape and what AOT says it is: a parameter, a buffer, an input,
a tangent; a backward's unnamed inputs are saved tensors), each op (its target, dtype, shape, the user's line
from the ``# File:`` comment before it, its inputs), and what each returned value is (an output, a saved tensor,
a gradient). Nested graphs of higher-order ops (classes inside the graph's) are not opened: the op calling one is
drawn as one node. Graphs larger than report's threshold fold by the user's source line, one box per line.

Example::

    >>> code = '''class GraphModule(torch.nn.Module):
    ...     def forward(self, primals_1: "f32[4][1]cpu"):
    ...         # File: /app/m.py:3 in forward, code: return x.relu()
    ...         relu: "f32[4][1]cpu" = torch.ops.aten.relu.default(primals_1);  primals_1 = None
    ...         return (relu,)'''
    >>> g = parse_graph_code(code)
    >>> [(n.name, n.op, n.shape, n.source) for n in g.nodes]
    [('primals_1', 'placeholder', (4,), None), ('relu', 'aten.relu.default', (4,), '/app/m.py:3')]
    >>> g.outputs
    (('relu', 'output', '0'),)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_CLASS = re.compile(r"^class \w+\(torch\.nn\.Module\):")
_DEF = re.compile(r"^ {4}def forward\((.*)$")
_PARAM = re.compile(r'^\s*(\w+)(?:: "([^"]*)")?,?\s*(?:#\s*(.*))?$')
_ASSIGN = re.compile(r'^ {8}(\w+)(?:: "([^"]*)")? = (.+)$')
_FILE = re.compile(r"^ {8}# File: (.+?):(\d+) in (\S+)")
_TYPE = re.compile(r"^(\w+)\[([^\]]*)\]")
_CALL = re.compile(r"^((?:torch\.ops\.)?[\w.]+)\(")
_GETITEM = re.compile(r"^(\w+)\[(\d+)\]$")
_NAME = re.compile(r"\b([A-Za-z_]\w*)\b")
_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64", "i32": "int32",
           "i16": "int16", "i8": "int8", "u8": "uint8", "b8": "bool", "c64": "complex64", "c128": "complex128",
           "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "Sym(s0)": "SymInt"}


@dataclass(frozen=True)
class CodeNode:
    name: str
    op: str  # "placeholder" or the call's target (aten.addmm.default, getitem, ...)
    kind: str  # placeholder kinds: parameter | buffer | user_input | tangent | saved | other; ops: op
    dtype: str | None
    shape: tuple | None
    device: str | None
    inputs: tuple[str, ...]
    source: str | None  # "file:line" of the user's code
    function: str | None  # the function of that line
    detail: str | None = None  # AOT's descriptor of a placeholder (PlainAOTInput(idx=0), ParamAOTInput(...))


@dataclass(frozen=True)
class CodeGraph:
    nodes: tuple[CodeNode, ...]
    outputs: tuple[tuple[str, str, str], ...]  # (node, role, detail): role output | saved | gradient | update


def _type(text: str | None) -> tuple[str | None, tuple | None, str | None]:
    """``"f32[2, 8][8, 1]cpu"`` -> ``("float32", (2, 8), "cpu")``."""
    if not text:
        return None, None, None
    m = _TYPE.match(text)
    if not m:
        return None, None, None
    dtype = _DTYPES.get(m.group(1), m.group(1))
    dims = tuple(int(d) if d.strip().lstrip("-").isdigit() else d.strip() for d in m.group(2).split(",") if d.strip())
    device = re.sub(r"^(\[[^\]]*\])", "", text[m.end():]) or None
    return dtype, dims, device


def _placeholder_kind(detail: str | None, backward: bool) -> str:
    d = detail or ""
    if d.startswith("ParamAOTInput"):
        return "parameter"
    if d.startswith("BufferAOTInput"):
        return "buffer"
    if d.startswith("TangentAOTInput"):
        return "tangent"
    if d.startswith(("PlainAOTInput", "SubclassGetAttrAOTInput", "ViewBaseAOTInput", "SyntheticBaseAOTInput")):
        return "user_input"
    if backward and not d:
        return "saved"
    return "other"


def _output_role(detail: str | None, backward: bool) -> tuple[str, str] | None:
    d = (detail or "").strip()
    if d == "None":
        return None
    if d.startswith("SavedForBackwards") or d.startswith("SavedForBackwardsNoVcCheck"):
        return "saved", ""
    if d.startswith("GradAOTOutput"):
        m = re.search(r"idx=(\d+)", d)
        return "gradient", m.group(1) if m else ""
    if d.startswith("InputMutationAOTOutput"):
        m = re.search(r"idx=(\d+)", d)
        return "update", m.group(1) if m else ""
    m = re.search(r"idx=(\d+)", d)
    return ("gradient" if backward else "output"), m.group(1) if m else ""


def parse_graph_code(code: str, *, backward: bool = False) -> CodeGraph:
    """The top-level graph of one ``print_readable`` text (see the module's docstring)."""
    lines = code.split("\n")
    i = next((k for k, ln in enumerate(lines) if _CLASS.match(ln)), None)
    if i is None:
        return CodeGraph((), ())
    nodes: list[CodeNode] = []
    known: set[str] = set()
    j = next((k for k in range(i + 1, len(lines)) if _DEF.match(lines[k])), None)
    if j is None:
        return CodeGraph((), ())
    # the signature: on the def's line (dynamo's graphs) or one parameter per line (AOT's)
    sig = _DEF.match(lines[j]).group(1)
    params: list[tuple[str, str | None, str | None]] = []
    if sig.strip() and sig.rstrip().endswith("):"):
        for part in re.findall(r'(\w+)(?:: "([^"]*)")?', sig.rstrip()[:-2]):
            params.append((part[0], part[1] or None, None))
        k = j + 1
    else:
        k = j + 1
        while k < len(lines) and not lines[k].strip().startswith("):"):
            m = _PARAM.match(lines[k])
            if m:
                params.append((m.group(1), m.group(2), m.group(3)))
            k += 1
        k += 1
    for name, typ, detail in params:
        if name == "self":
            continue
        dtype, shape, device = _type(typ)
        nodes.append(CodeNode(name, "placeholder", _placeholder_kind(detail, backward), dtype, shape, device, (),
                              None, None, detail))
        known.add(name)
    source = function = None
    outputs: list[tuple[str, str, str]] = []
    while k < len(lines):
        ln = lines[k]
        k += 1
        if ln.strip() and len(ln) - len(ln.lstrip()) <= 4:
            break  # the graph's end (a nested class or the next graph)
        f = _FILE.match(ln)
        if f:
            source, function = f"{f.group(1)}:{f.group(2)}", f.group(3)
            continue
        stripped = ln.strip()
        if stripped.startswith("return"):
            outputs = _returns(stripped[len("return"):], lines, k, known, backward)
            break
        m = _ASSIGN.match(ln)
        if not m:
            continue
        name, typ, rhs = m.group(1), m.group(2), m.group(3).split(";  ")[0]
        call = _CALL.match(rhs)
        item = _GETITEM.match(rhs)
        if item:
            op = "getitem"
        elif call:
            op = call.group(1)
            op = op[len("torch.ops."):] if op.startswith("torch.ops.") else op
        else:
            op = rhs.split("(")[0][:40] or "value"
        args = rhs[call.end():] if call else rhs
        inputs = tuple(dict.fromkeys(n for n in _NAME.findall(args) if n in known))
        dtype, shape, device = _type(typ)
        nodes.append(CodeNode(name, op, "op", dtype, shape, device, inputs, source, function))
        known.add(name)
    return CodeGraph(tuple(nodes), tuple(outputs))


def _returns(first: str, lines: list[str], k: int, known: set[str], backward: bool) -> list[tuple[str, str, str]]:
    """The returned values: ``return (a, b)`` on one line, or one per line with AOT's comments."""
    entries: list[tuple[str, str | None]] = []
    text = first.strip()
    if text.startswith("(") and text.rstrip().endswith(")") and text.strip() != "(":
        entries = [(n.strip(), None) for n in text.strip()[1:-1].split(",") if n.strip()]
    else:
        while k < len(lines):
            ln = lines[k].strip()
            k += 1
            if ln.startswith(")"):
                break
            name, _, comment = ln.partition("#")
            entries.append((name.strip().rstrip(","), comment.strip() or None))
    out = []
    for pos, (name, detail) in enumerate(entries):
        if name not in known:
            continue
        role = _output_role(detail, backward) if detail is not None else (("gradient" if backward else "output"), str(pos))
        if role is not None:
            out.append((name, role[0], role[1]))
    return out


def code_drawing(graph: CodeGraph, kind: str, *, prefix: str = ""):
    """A :class:`~graphtool.analysis.drawing.Drawing` of a parsed graph: the one ``report`` draws (ops by name,
    placeholders by kind, a marker for each output, saved tensor and gradient), folded by the user's line when
    large."""
    from graphtool.analysis.drawing import Drawing, DrawNode, _markers, family_of

    nodes, edges = [], []
    for n in graph.nodes:
        nid = prefix + n.name
        shape = "(" + ", ".join(map(str, n.shape)) + ")" if n.shape is not None else ""
        module = ()
        if n.source:
            file, _, line = n.source.rpartition(":")
            stem = os.path.basename(file).split(".")[0] or file
            module = ((f"{stem}:{line}", n.function or "line"),)
        if n.op == "placeholder":
            label = f"{n.name}\n{shape} {n.dtype or ''}".rstrip()
            nodes.append(DrawNode(nid, label, n.kind, n.kind, (), f"{n.name}: {n.kind} {n.detail or ''}".rstrip()))
        else:
            short = n.op.split(".")[1] if n.op.startswith(("aten.", "prims.")) and n.op.count(".") == 2 else n.op
            tip = f"{n.name}: {n.op}" + (f"\n{n.source}" if n.source else "")
            nodes.append(DrawNode(nid, short, "op", family_of(n.op), module, tip))
        edges.extend((prefix + a, nid) for a in n.inputs)
    roles: dict[str, list[tuple[str, str]]] = {}
    for name, role, detail in graph.outputs:
        roles.setdefault(prefix + name, []).append((role, detail))
    _markers(nodes, edges, roles)
    return Drawing(f"{kind} graph", tuple(nodes), tuple(edges))


def code_facts(graph: CodeGraph, *, prefix: str = "") -> dict[str, dict]:
    """Node id -> what a click on it shows in the page's viewer (the keys ``report``'s viewer reads)."""
    users: dict[str, list[str]] = {}
    for n in graph.nodes:
        for a in n.inputs:
            users.setdefault(a, []).append(n.name)
    saved = {name for name, role, _ in graph.outputs if role == "saved"}
    facts = {}
    for n in graph.nodes:
        facts[prefix + n.name] = {
            "name": n.name, "graph_name": n.name, "op": None if n.op == "placeholder" else n.op, "kind": n.kind,
            "shape": list(n.shape) if n.shape is not None else None, "dtype": n.dtype, "device": n.device,
            "source": n.source, "module": None, "inputs": list(n.inputs), "users": users.get(n.name, []),
            "saved": "saved for backward" if n.name in saved else None, "target": n.detail,
        }
    return facts
