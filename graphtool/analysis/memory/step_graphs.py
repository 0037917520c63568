"""Which compiled graph runs in which phase of the training step: the model's forward and backward, or the
optimizer's step.

A model traced on its own gives one forward (and, in training, one backward) per region. A whole training step
compiled as one function (``model = train_step``: forward and loss, ``loss.backward()``, ``opt.step()``,
``zero_grad``) gives more: the forward-and-loss region with its backward, and then the optimizer's graph, an
inference graph (no backward) that reads the gradients and the optimizer's state (AdamW's ``exp_avg``) and writes
the parameters. That graph runs after the backward, on the gradients it made: it is the optimizer's phase, not a
forward. So is any graph the step compiles on the gradients after its backward (``clip_grad_norm_``).

    >>> from types import SimpleNamespace as Ns
    >>> def region(i, *kinds, backward=None):
    ...     inputs = [Ns(ref=Ns(kind=k)) for k in kinds]
    ...     return Ns(index=i, forward=f"fw{i}", backward=backward, forward_inputs=inputs)
    >>> trace = Ns(regions=[region(0, "parameter", "user_input", backward="bw0"),
    ...                     region(1, "parameter", "gradient", "optimizer_state")])
    >>> steps = step_graphs(trace)
    >>> steps.model, steps.optimizer
    (((0, 'fw0', 'bw0'),), ((1, 'fw1'),))
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

#: what an input of a graph that runs after the backward is: a parameter's gradient, or the optimizer's state
AFTER_BACKWARD = frozenset({"gradient", "optimizer_state"})


@dataclass(frozen=True)
class StepGraphs:
    """The step's compiled graphs by phase: ``model``, ``(region, forward, backward or None)`` in the order the
    regions run (forwards in this order, backwards in reverse); ``optimizer``, ``(region, graph)`` of each graph
    that runs after the backward on the gradients, in order."""

    model: tuple[tuple[int, Any, Any], ...]
    optimizer: tuple[tuple[int, Any], ...] = ()

    @property
    def pairs(self) -> list[tuple[Any, Any]]:
        """``(forward, backward)`` of each model region, in order."""
        return [(fw, bw) for _, fw, bw in self.model]

    @property
    def trained(self) -> bool:
        """Whether any model region has a backward graph."""
        return any(bw is not None for _, _, bw in self.model)

    def partitioned(self, partitions: dict[int, tuple[Any, Any]]) -> StepGraphs:
        """The same step with region ``i``'s forward and backward replaced by ``partitions[i]`` (another partition
        of its joint graph); the optimizer's graphs have no backward and are never partitioned."""
        return replace(self, model=tuple((i, *partitions.get(i, (fw, bw))) for i, fw, bw in self.model))


def runs_after_backward(region: Any) -> bool:
    """A region with no backward whose graph reads a parameter's gradient or the optimizer's state: the optimizer's
    step (or gradient clipping) compiled inside the training step."""
    if region.backward is not None:
        return False
    return any(rec.ref is not None and rec.ref.kind in AFTER_BACKWARD for rec in region.forward_inputs)


def step_graphs(capture: Any) -> StepGraphs:
    """The :class:`StepGraphs` of a trace: every region with a forward graph, in the order torch compiled them."""
    model, optimizer = [], []
    for r in capture.regions:
        if r.forward is None:
            continue
        if runs_after_backward(r):
            optimizer.append((r.index, r.forward))
        else:
            model.append((r.index, r.forward, r.backward))
    return StepGraphs(tuple(model), tuple(optimizer))
