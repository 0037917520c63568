"""``memory --fit``'s eager step (issue 35) beside torch's own fake-tensor memory estimator,
``torch.distributed._tools.mem_tracker.MemTracker``, on tests/fixtures/fit/{mlp,cnn,decoder}.py.

MemTracker runs two eager training steps on fake tensors (the step of tests/truth/gpu/memory_truth.py: forward,
``out.loss`` or the output's sum, ``backward()``, the outputs dropped, ``opt.step()`` with ``foreach=True`` as
graphtool steps it, ``zero_grad(set_to_none=True)``). Every byte between its peak and graphtool's is a named term
computed here, never a tolerance (docs/memory.md, "Against torch's MemTracker"):

- ``inputs``: the input batch, made before MemTracker's context, is not tracked by it (only what its ops return,
  and the modules and optimizer handed to ``track_external``); graphtool holds it (rounded to 512 bytes).
- ``rounding``: graphtool rounds each tensor the step makes to the caching allocator's 512-byte blocks;
  MemTracker rounds only CUDA tensors, so on CPU it counts exact bytes. Computed from the same MemTracker run:
  its count again with the tensors the step makes (its ACT, TEMP and GRAD) rounded as it rounds on CUDA.
- ``step counters``: AdamW's ``state["step"]`` (one 4-byte scalar per parameter, made by ``torch.tensor``; on a
  GPU it stays on the host unless ``capturable``): MemTracker counts it in its optimizer state, and so does
  graphtool's held optimizer state, but graphtool's measured optimizer step does not see it made. Only a peak in
  the optimizer's step differs by it.

A whole training step compiled as one function (tests/fixtures/fit/gpt_step.py, issue 44) is run as written, by
graphtool and under MemTracker: its forward-and-backward and its optimizer's phase here, on every torch; the fit's
eager row against MemTracker's peak in tests/commands/test_memory_fit_step.py (it shares that file's one run).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.helpers import FIXTURES

mem_tracker = pytest.importorskip("torch.distributed._tools.mem_tracker")

FIT = FIXTURES / "fit"
BLOCK = 512


def rounded(n: int) -> int:
    return -(-n // BLOCK) * BLOCK if n > 0 else 0


class Tracker(mem_tracker.MemTracker):
    """MemTracker, keeping beside its own count the count with every tensor the step makes (ACT, TEMP, GRAD)
    rounded to 512 bytes, and each phase's peak of that count (``step``: forward and backward; ``optimizer``)
    with MemTracker's snapshot there."""

    MADE = {mem_tracker._MemRefType.ACT, mem_tracker._MemRefType.TEMP, mem_tracker._MemRefType.GRAD}

    def __init__(self):
        super().__init__()
        self.slack = 0  # what 512-byte rounding adds to the live tensors the step made
        self.rounded_peak = {"step": (0, None), "optimizer": (0, None)}
        # once the optimizer's state exists (a later step), what its step makes is its temporaries (MemTracker's
        # OPT): rounded too when set
        self.opt_temporaries = False
        self._temporaries: set[int] = set()

    def _update_snap(self, u_type, winfo, old_mem_consumed=None, old_reftype=None):
        super()._update_snap(u_type, winfo, old_mem_consumed, old_reftype)
        extra = rounded(winfo.mem_consumed) - winfo.mem_consumed
        kind = mem_tracker._UpdateType
        if u_type == kind.ADD and self.opt_temporaries and self._in_opt and winfo.reftype == mem_tracker._MemRefType.OPT:
            self._temporaries.add(id(winfo))
            self.slack += extra
        elif u_type == kind.DEL and id(winfo) in self._temporaries:
            self._temporaries.discard(id(winfo))
            self.slack -= extra
        elif u_type == kind.ADD:
            self.slack += extra * (winfo.reftype in self.MADE)
        elif u_type == kind.DEL:
            self.slack -= extra * (winfo.reftype in self.MADE)
        elif u_type == kind.REF:
            self.slack += extra * ((winfo.reftype in self.MADE) - (old_reftype in self.MADE))
        else:  # a storage resized: none in these steps
            raise AssertionError(f"unexpected update {u_type}")

    def _update_peak_stats(self, peak_state):
        super()._update_peak_stats(peak_state)
        phase = "optimizer" if self._in_opt else "step"
        for snap in self._curr_mem_snap.values():
            if snap["Total"] + self.slack > self.rounded_peak[phase][0]:
                self.rounded_peak[phase] = (snap["Total"] + self.slack, named(snap))


def named(snap: dict) -> dict:
    """A MemTracker snapshot by its reference types' names: PARAM, BUFFER, GRAD, ACT, TEMP, OPT, OTH, Total."""
    return {getattr(k, "name", k): v for k, v in snap.items()}


def load_fixture(name: str):
    spec = importlib.util.spec_from_file_location(f"memtracker_{name}", FIT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def storage_bytes(tensors, rounding) -> int:
    seen, total = set(), 0
    for t in tensors:
        if id(t.untyped_storage()) not in seen:  # fake storages: one object per storage
            seen.add(id(t.untyped_storage()))
            total += rounding(t.untyped_storage().nbytes())
    return total


def memtracker_run(name: str) -> dict:
    """Two eager steps under MemTracker on fake tensors: its peak snapshot, and the terms computed from the
    model, its inputs and its optimizer."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    module = load_fixture(name)
    with FakeTensorMode():
        got = module.get_model_and_inputs()
        model, args, kwargs = got[0], got[1], (got[2] if len(got) > 2 else {})
        opt = module.get_optimizer(model)
        for g in opt.param_groups:  # as graphtool steps it (live_bytes.optimizer_step), as on a GPU
            if g.get("foreach") is None and not g.get("fused"):
                g["foreach"] = True
        tracker = Tracker()
        tracker.track_external(model, opt)
        with tracker:
            for i in range(2):
                out = model(*args, **kwargs)
                loss = out.loss if getattr(out, "loss", None) is not None else out.float().sum()
                loss.backward()
                out = loss = None  # as memory_truth.py: the outputs go before the optimizer's step
                opt.step()
                opt.zero_grad(set_to_none=True)
                if i == 0:
                    tracker.reset_mod_stats()  # MemTracker's per-module stats take one iteration
        inputs = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
        (peak,) = tracker.get_tracker_snapshot("peak").values()
        return {"peak": named(peak),
                "rounded_peak": tracker.rounded_peak,
                "inputs": storage_bytes(inputs, rounded),
                "step_counters": storage_bytes([s["step"] for s in opt.state.values()], int)}


def memtracker_step_run(path) -> dict:
    """Two calls of a whole training step compiled as one function (``model = train_step``: its own forward, loss,
    ``backward()``, ``opt.step()``, ``zero_grad``) under MemTracker, the script run on fake tensors (its model,
    optimizer and inputs made fake): MemTracker's peak, its count rounded (the optimizer's temporaries too, once its
    state exists), and the input bytes it never saw (made before its context; a view of an input made inside it,
    ``targets.view(-1)``, makes it count that input's storage)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    spec = importlib.util.spec_from_file_location(f"memtracker_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    with FakeTensorMode():
        spec.loader.exec_module(module)
        tracker = Tracker()
        tracker.track_external(module.net, module.opt)
        with tracker:
            for i in range(2):
                loss = module.train_step(*module.example_inputs)
                del loss
                if i == 0:
                    tracker.reset_mod_stats()
                    tracker.opt_temporaries = True
        inputs = list(module.example_inputs)
        unseen = [t for t in inputs if t.untyped_storage() not in tracker._WINFO]
        (peak,) = tracker.get_tracker_snapshot("peak").values()
        return {"peak": named(peak), "rounded_peak": tracker.rounded_peak,
                "inputs": storage_bytes(inputs, rounded), "unseen_inputs": storage_bytes(unseen, rounded)}


def test_a_whole_training_step_counts_what_memtracker_counts():
    """A GPT-style decoder whose training step (forward, loss, backward, AdamW, zero_grad) is the model
    (tests/fixtures/fit/gpt_step.py, issue 44): graphtool runs the step once as written
    (``own_step_peaks``, after a first call made the optimizer's state, as the trace does) and counts what it
    makes up to the first ``opt.step()`` and up to the optimizer's peak. Each is MemTracker's count of what the
    step made (gradients, activations, temporaries; rounded to 512 bytes) at its peak in that phase, but the input
    storage MemTracker counted as an activation (graphtool holds the inputs); the optimizer's state is MemTracker's."""
    from graphtool.capture.memory.live_bytes import own_step_peaks
    from graphtool.capture.user.script import load_model

    spec = load_model(FIT / "gpt_step.py")
    spec.model(*spec.args, **spec.kwargs)  # the first step makes AdamW's state, as the trace's call does
    got = own_step_peaks(spec)
    mt = memtracker_step_run(FIT / "gpt_step.py")
    seen_inputs = mt["inputs"] - mt["unseen_inputs"]
    step_total, step_snap = mt["rounded_peak"]["step"]
    opt_total, opt_snap = mt["rounded_peak"]["optimizer"]
    state = step_snap["OPT"]  # in the second step's forward and backward: the state alone
    made_step = step_total - (step_snap["PARAM"] + step_snap["BUFFER"] + state + step_snap["OTH"])
    made_opt = opt_total - (opt_snap["PARAM"] + opt_snap["BUFFER"] + state + opt_snap["OTH"])
    assert got.state == state > 0
    assert made_step > 500_000 and opt_snap["OPT"] > state  # the activations; the optimizer's temporaries
    assert (got.backward, got.optimizer) == (made_step - seen_inputs, made_opt - seen_inputs), \
        (got, made_step, made_opt, seen_inputs)
    assert got.optimizer > got.backward  # this step peaks in AdamW's foreach step, as MemTracker's does
    assert mt["peak"]["Total"] == opt_snap["Total"]


@pytest.fixture(scope="module")
def memtracker():
    runs: dict = {}

    def get(name: str) -> dict:
        if name not in runs:
            runs[name] = memtracker_run(name)
        return runs[name]

    return get


@pytest.fixture(scope="module")
def graphtool_fit():
    runs: dict = {}

    def get(name: str):
        if name not in runs:
            from graphtool.commands.memory import memory

            (result,) = memory(str(FIT / f"{name}.py"), fit="24GiB")
            runs[name] = result.fit
        return runs[name]

    return get


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_eager_forward_and_backward_count_what_memtracker_counts(name, memtracker):
    """graphtool's live-bytes count of the eager forward and backward (``eager_step_peak``) is MemTracker's
    bytes made by the step (ACT, TEMP, GRAD) at its forward-and-backward peak, rounded to 512 bytes: the same
    tensors, made and freed at the same ops. Run as ``memory --fit`` runs it, after the trace's backward left a
    gradient on every parameter (the count starts without them, as after ``zero_grad(set_to_none=True)``)."""
    import torch

    from graphtool.capture.memory.live_bytes import eager_step_peak
    from graphtool.capture.user.script import load_model

    spec = load_model(FIT / f"{name}.py")
    for p in spec.model.parameters():
        p.grad = torch.zeros_like(p)  # what the trace leaves
    got = eager_step_peak(spec)
    mt = memtracker(name)
    rounded_total, snap = mt["rounded_peak"]["step"]
    made = rounded_total - (snap["PARAM"] + snap["BUFFER"] + snap["OPT"] + snap["OTH"])
    assert made > 100 * 2**20 if name == "mlp" else made > 500 * 2**20  # the activations, not just the held
    assert got == made, (name, got, made, got - made)


@pytest.mark.one_torch  # MemTracker's part is checked on every torch by the test above; this adds graphtool's held bytes
@pytest.mark.slow  # over 5 s (a whole memory --fit each: mlp 6 s, cnn 14 s, decoder 35 s): the slow tier (docs/ci.md)
@pytest.mark.parametrize("name", ["mlp", "cnn", "decoder"])
def test_eager_step_peak_is_memtrackers_peak_with_each_difference_named(name, memtracker, graphtool_fit):
    fit = graphtool_fit(name)
    mt = memtracker(name)
    peak = mt["peak"]["Total"]
    rounding = max(v for v, _ in mt["rounded_peak"].values()) - peak
    step_counters = mt["step_counters"] if fit.eager.phase == "optimizer" else 0
    assert fit.eager.peak == peak + mt["inputs"] + rounding - step_counters, \
        (name, fit.eager.to_dict(), mt["peak"], mt["inputs"], rounding, step_counters)
    # what each model shows: the MLP peaks in the optimizer's step (its foreach temporaries), the others in
    # the backward, where MemTracker's snapshot has the activations
    assert fit.eager.phase == ("optimizer" if name == "mlp" else "backward")
    assert (mt["peak"]["ACT"] + mt["peak"]["TEMP"] > 0) == (name != "mlp")
    assert mt["inputs"] == fit.held.inputs
    assert mt["peak"]["PARAM"] == fit.held.parameters
    assert mt["peak"]["OPT"] == (fit.held.optimizer_state if name != "mlp" else fit.held.optimizer_step_peak
                                 + step_counters)
