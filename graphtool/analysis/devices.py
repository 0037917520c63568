"""Which device every node runs on, and every copy between devices, tied to the user's line.

Run on the accelerator stand-in trace (meta stands for the GPU) this shows what a GPU run would
keep on the CPU: ``.cpu()`` round trips, tensors created on the CPU in forward, ``.item()``.

Example::

    >>> from graphtool.capture.standin.meta import to_meta
    >>> from graphtool.capture.user.script import load_model
    >>> from graphtool.capture.tracer import trace_model
    >>> capture = trace_model(to_meta(load_model("examples/cpu_roundtrip.py")), standin=True)
    >>> device_report(capture, main_device="meta").verdict()
    '6 nodes off meta, 4 cross-device copies'
"""

from __future__ import annotations

from dataclasses import dataclass

from graphtool.analysis.graph_summary import Source, node_device, op_name, user_source
from graphtool.text import count

_COPY_OPS = ("aten._to_copy", "aten.copy_", "aten.copy", "aten.to", "aten._device_put", "prims.device_put", "aten.lift_fresh_copy")


@dataclass(frozen=True)
class DeviceNode:
    name: str
    op: str
    device: str
    source: Source | None

    def to_dict(self) -> dict:
        return {"name": self.name, "op": self.op, "device": self.device, "source": self.source.to_dict() if self.source else None}


@dataclass(frozen=True)
class DeviceCopy:
    name: str
    op: str
    src_device: str
    dst_device: str
    source: Source | None

    def to_dict(self) -> dict:
        return {
            "name": self.name, "op": self.op, "from": self.src_device, "to": self.dst_device,
            "source": self.source.to_dict() if self.source else None,
        }


@dataclass(frozen=True)
class GraphDevices:
    region: int
    graph: str
    counts: dict[str, int]
    off_device: tuple[DeviceNode, ...]
    copies: tuple[DeviceCopy, ...]
    nodes: int | None = None  # every node of the graph, as trace counts them
    without_device: int = 0  # of those, nodes with no device: the output node, getitem of a tuple, a symbolic size

    def to_dict(self) -> dict:
        return {
            "region": self.region, "graph": self.graph, "nodes": self.nodes, "without_device": self.without_device,
            "counts": dict(self.counts),
            "off_device": [n.to_dict() for n in self.off_device], "copies": [c.to_dict() for c in self.copies],
        }


@dataclass(frozen=True)
class DeviceReport:
    main_device: str
    stand_in: str | None  # "meta stands for cuda:0" when traced on the stand-in
    graphs: tuple[GraphDevices, ...]
    regions_compiled: int | None = None  # regions torch compiles, when known
    regions_judged: int | None = None  # regions whose graphs were read (fewer when the stand-in trace stopped)
    stopped: str | None = None  # where the stand-in trace stopped: what runs after it was not judged

    @property
    def complete(self) -> bool:
        """Whether the whole run was judged: no claim is made about regions never read.

        >>> DeviceReport("meta", None, (), regions_compiled=4, regions_judged=1).complete
        False
        """
        if self.stopped:
            return False
        return self.regions_compiled is None or self.regions_judged is None or self.regions_judged >= self.regions_compiled

    @property
    def found(self) -> bool:
        return any(g.off_device or g.copies for g in self.graphs)

    @property
    def shown_device(self) -> str:
        """The main device as the user thinks of it: ``cuda:0 (predicted)`` for the meta stand-in.

        >>> DeviceReport("meta", "meta stands for cuda:0", ()).shown_device
        'cuda:0 (predicted)'
        """
        return self.show(self.main_device)

    def show(self, device: str) -> str:
        """``device`` as the user reads it: the stand-in's name replaced by the device it stands for."""
        if self.stand_in and device == self.main_device and " stands for " in self.stand_in:
            return self.stand_in.split(" stands for ", 1)[1] + " (predicted)"
        return device

    def shown_counts(self, g: GraphDevices) -> list[str]:
        """``g``'s nodes per device as the user reads them, those with no device said, not dropped.

        >>> r = DeviceReport("meta", "meta stands for cuda:0", ())
        >>> r.shown_counts(GraphDevices(0, "forward", {"meta": 5}, (), (), nodes=6, without_device=1))
        ['cuda:0 (predicted): 5', 'no device: 1']
        """
        return [f"{self.show(d)}: {n}" for d, n in g.counts.items()] + (
            [f"no device: {g.without_device}"] if g.without_device else [])

    def verdict(self) -> str:
        off = sum(len(g.off_device) for g in self.graphs)
        copies = sum(len(g.copies) for g in self.graphs)
        label = self.shown_device
        if not self.complete:
            judged = f"{self.regions_judged} of {self.regions_compiled} regions judged ({count(len(self.graphs), 'graph')})"
            tail = "the other regions could not be judged"
            if self.stopped and (self.regions_judged or 0) >= (self.regions_compiled or 0):
                judged = f"{count(len(self.graphs), 'graph')} judged before the stand-in trace stopped"
                tail = "what runs after the stop was not judged"
            if not off and not copies:
                return f"only {judged}: every node there runs on {label}; {tail}"
            return f"only {judged}: {count(off, 'node')} off {label}, {count(copies, 'cross-device copy', 'cross-device copies')}; {tail}"
        if not off and not copies:
            return f"every node runs on {label}"
        return f"{count(off, 'node')} off {label}, {count(copies, 'cross-device copy', 'cross-device copies')}"

    def to_dict(self) -> dict:
        return {
            "main_device": self.main_device,
            "stand_in": self.stand_in,
            "graphs": [g.to_dict() for g in self.graphs],
            "regions_compiled": self.regions_compiled,
            "regions_judged": self.regions_judged,
            "stopped": self.stopped,
            "verdict": self.verdict(),
        }


def _input_device(node) -> str | None:
    arg = node.args[0] if node.args else None
    return node_device(arg) if hasattr(arg, "meta") else None


def graph_devices(gm, region: int, graph: str, main: str) -> GraphDevices:
    counts: dict[str, int] = {}
    off, copies = [], []
    without = 0
    for node in gm.graph.nodes:
        dev = node_device(node) if node.op in ("call_function", "placeholder") else None
        if dev is None:
            without += 1
            continue
        counts[dev] = counts.get(dev, 0) + 1
        if node.op != "call_function":
            continue
        name = op_name(node)
        src = user_source(node.meta.get("stack_trace"))
        dev_type = dev.split(":")[0]
        if dev_type != main:
            off.append(DeviceNode(node.name, name, dev, src))
        if name.startswith(_COPY_OPS):
            before = _input_device(node)
            if before and before != dev:
                copies.append(DeviceCopy(node.name, name, before, dev, src))
    return GraphDevices(region, graph, dict(sorted(counts.items())), tuple(off), tuple(copies),
                        nodes=len(gm.graph.nodes), without_device=without)


def device_report(capture, *, main_device: str | None = None, stand_in: str | None = None) -> DeviceReport:
    main = main_device or capture.device
    graphs = []
    for region in capture.regions:
        for graph, gm in (("forward", region.forward), ("backward", region.backward)):
            if gm is not None:
                graphs.append(graph_devices(gm, region.index, graph, main))
    compiled = capture.regions_compiled if capture.regions_compiled is not None else len(capture.regions)
    return DeviceReport(main, stand_in, tuple(graphs), regions_compiled=compiled, regions_judged=capture.regions_judged,
                        stopped=capture.stopped)
