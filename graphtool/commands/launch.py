"""How a command runs the model: alone, as ``DDP(torch.compile(model))`` (``--ddp``), or under FSDP2's
``fully_shard`` (``--fsdp2``): one interface, three implementations, chosen once.

:func:`launch_of` checks the wrapper's settings once (``--fsdp2`` with ``--ddp``, a world size, ``--device
meta``), freezes them, and returns a :class:`Plain`, :class:`Ddp` or :class:`Fsdp2`. The commands call only
the interface: open the launch around the script's load (:meth:`Launch.opened`: the fake process group and
the factory a script gives for it), trace on the model's own device (:meth:`Launch.trace_own`) and on the
accelerator stand-in (:meth:`Launch.standin`), say what the wrapper did (:meth:`Launch.report`), judge its
graphs' CUDA-graph verdicts (:meth:`Launch.judged`), what one rank holds (:meth:`Launch.rank_memory`), and
what a result shows of it (:meth:`Launch.part`: a :class:`Part` that renders itself). No command, and no view,
branches on which it has.

Example::

    >>> launch_of(None, None)
    Plain()
    >>> launch_of({"world_size": 8, "bucket_cap_mb": 25.0}, None).part("its report").key
    'ddp'
    >>> launch_of({"world_size": 2}, {"world_size": 2})
    Traceback (most recent call last):
    ...
    graphtool.errors.UsageError: --fsdp2 with --ddp: a model runs under one of them, not both
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Optional

from graphtool.errors import UsageError


@dataclass(frozen=True)
class Opened:
    """A launch opened around a script's load: the wrapper's session (None alone), and the factory to call with its
    arguments (a script's ``get_distributed_model(world_size)`` under a wrapper, when it defines one)."""

    session: Any
    entry: Optional[str]
    factory_args: tuple = ()


class Launch:
    """The interface (see the module's docstring); :class:`Plain` is the model alone. Each method takes the
    :class:`~graphtool.commands.session.Session` whose model it runs."""

    flag: ClassVar[str] = ""  # the option that asks for it
    name: ClassVar[Optional[str]] = None  # the result field (and JSON key) of what the wrapper did
    own_steps: ClassVar[int] = 1  # steps the own-device trace runs
    under: ClassVar[str] = ""  # progress lines: "tracing under DDP with dynamo..."
    record_memory_breaks: ClassVar[bool] = False  # memory's trace records graph breaks (FSDP2's report reads them)
    # memory reads the session's own-device trace: alone, the model's eager run and its trace need no launch between
    # them (a wrapper changes the model in place, and what a rank holds is read inside the launch: its own trace)
    shares_own_trace: ClassVar[bool] = True

    @property
    def wrapped(self) -> bool:
        return self.name is not None

    def check(self, command: str, *, dynamic: bool = False, run: bool = False, schedule: bool = False,
              alone: bool = False) -> None:
        """What ``command`` cannot do under this launch: ``memory --ddp --dynamic``, ``lint --run --ddp``,
        ``cudagraphs --schedule --fsdp2``; ``alone``: a command that runs the model alone (``bench``, ``shapes``)."""

    @contextlib.contextmanager
    def opened(self, session, *, what: str = "") -> Iterator[Opened]:
        """Open the launch for one model before its script is loaded, and close it on every way out."""
        yield Opened(None, session.entry)

    def report(self, opened: Opened, capture) -> Any:
        """What the wrapper did to the graphs of ``capture``, traced inside ``opened`` (None alone)."""
        return None

    def trace_own(self, session) -> tuple[Any, Any, Opened]:
        """The trace on the model's own device: ``(capture, report, the launch it ran in)``."""
        with self.opened(session) as run:
            spec = session.spec(entry=run.entry, factory_args=run.factory_args, wrapped=self.wrapped)
            session.progress.phase(f"tracing{self.under} with dynamo + {session.backend}'s AOT stage...")
            capture = session.trace_spec(spec, wrapper=run.session, steps=self.own_steps)
            return capture, self.report(run, capture), run

    def across_ranks(self, session, capture, report, run: Opened) -> Any:
        """``report`` with what the other ranks of the launch compile (``trace --ddp``)."""
        return report

    def standin(self, session, backend: str, *, steps: int = 1, dynamic: bool = False) -> tuple[Any, str, Any]:
        """The accelerator view, ``steps`` steps: ``(capture, accelerator, report)``."""
        with self.opened(session, what=" (stand-in)") as run:
            capture, accel = session.trace_standin(backend, steps, dynamic, run)
            return capture, accel, self.report(run, capture)

    def judged(self, report, verdict, standin_capture, *, standin_report=None) -> Any:
        """``report`` with each of the wrapper's graphs' CUDA-graph verdict; ``standin_report``: the stand-in's own,
        when ``report`` came from the own-device run."""
        return report

    def held(self, opened: Opened, spec) -> Any:
        """What one rank holds beside the model that only the open launch can read (DDP: buckets and optimizer state)."""
        return None

    def rank_memory(self, memory, report, capture, held=None) -> Any:
        """What each rank holds (``memory --ddp``/``--fsdp2``), None alone."""
        return None

    def lint_target(self, target):
        """A lint job run under this launch in its child process."""
        return target

    def part(self, report) -> Optional[Part]:
        """What the wrapper did, as a result shows it (:class:`Part`); None alone."""
        return None


@dataclass(frozen=True)
class Part:
    """What a wrapper did to a model, as every result shows it: its JSON entry, its terminal view, its page section and
    its line in a summary, so no view asks which wrapper it was. ``report`` is the analysis' (a DdpReport or
    Fsdp2Report)."""

    report: Any
    key: ClassVar[str] = ""
    label: ClassVar[str] = ""  # "DDP", "FSDP2"

    def to_dict(self) -> dict:
        return {self.key: self.report.to_dict()}

    @property
    def fails(self) -> bool:
        """A loop of the model fails under the wrapper (DDP: a parameter without gradient, at the second step)."""
        return False

    @property
    def world_size(self) -> int:
        return self.report.world_size


class DdpPart(Part):
    key, label = "ddp", "DDP"

    @property
    def fails(self) -> bool:
        return bool((self.report.unused or {}).get("fails_at_step"))

    def view(self):
        from graphtool.render.distributed import ddp_view

        return ddp_view(self.report)

    def section(self, rank_memory=None) -> str:
        from graphtool.render.report import ddp_section

        return ddp_section(self.report)

    def summary(self) -> str:
        from graphtool.text import count

        d = self.report
        line = (f"under DDP (bucket_cap_mb={d.bucket_cap_mb:g}): {count(d.graph_count, 'graph')} from "
                f"{count(d.dynamo_graphs, 'dynamo graph')}")
        return line + (f"; DDP fails at step {d.unused['fails_at_step']}: parameters without gradient" if self.fails else "")


class Fsdp2Part(Part):
    key, label = "fsdp2", "FSDP2"

    def view(self):
        from graphtool.render.distributed import fsdp2_view

        return fsdp2_view(self.report)

    def section(self, rank_memory=None) -> str:
        from graphtool.render.report import fsdp2_section

        return fsdp2_section(self.report, rank_memory)

    def summary(self) -> str:
        from graphtool.text import count

        return f"under FSDP2 ({count(self.report.world_size, 'rank')}): {count(self.report.graph_count, 'compiled graph')}"


@dataclass(frozen=True)
class Plain(Launch):
    """The model alone, as ``torch.compile(model)``."""


@dataclass(frozen=True)
class _Wrapped(Launch):
    world_size: int = 2

    def check(self, command: str, *, dynamic: bool = False, run: bool = False, schedule: bool = False,
              alone: bool = False) -> None:
        if alone:
            raise UsageError(f"{command} with {self.flag}: not supported yet (it runs the model alone)",
                             hint=f"drop {self.flag}" + (f", or run graphtool lint MODEL {self.flag}" if command == "lint" else ""))
        if schedule:
            raise UsageError(f"{command} --schedule with --ddp/--fsdp2: not supported yet",
                             hint="drop --schedule, or run graphtool shapes")
        if dynamic and command == "memory":
            raise UsageError(f"memory {self.flag} with --dynamic: not supported yet", hint="drop --dynamic")
        if run:
            raise UsageError(f"{self.flag} lints a model script; a script run with --run {self.own_wrap} its model "
                             "itself")

    own_wrap: ClassVar[str] = "wraps"  # what a script run with --run does to its model itself
    needs_values: ClassVar[str] = ""  # why the wrapper cannot run on --device meta
    per_layer: ClassVar[str] = ""  # what a smaller config does instead
    shows: ClassVar[type] = Part
    shares_own_trace: ClassVar[bool] = False

    def _session(self, progress, *, rank: int = 0, what: str = "", debug: bool = False):
        raise NotImplementedError

    @contextlib.contextmanager
    def opened(self, session, *, what: str = "", rank: int = 0) -> Iterator[Opened]:
        with self._session(session.progress, rank=rank, what=what, debug=session.debug) as run, \
                own_group_hint(self.flag):
            entry, factory_args = run.entry(session.target, session.entry)
            yield Opened(run, entry, factory_args)

    def part(self, report) -> Optional[Part]:
        return self.shows(report) if report is not None else None


@dataclass(frozen=True)
class Ddp(_Wrapped):
    """``DDP(torch.compile(model), bucket_cap_mb=...)`` as one rank of ``world_size`` in torch's fake process group."""

    bucket_cap_mb: float = 25.0
    find_unused_parameters: bool = False

    flag: ClassVar[str] = "--ddp"
    name: ClassVar[Optional[str]] = "ddp"
    under: ClassVar[str] = " under DDP"
    own_steps: ClassVar[int] = 2  # the second step is where DDP fails on parameters without gradient
    needs_values: ClassVar[str] = "DDP's constructor reads the parameters' values (it broadcasts them from rank 0)"
    per_layer: ClassVar[str] = "splits the same way per layer"
    shows: ClassVar[type] = DdpPart

    def _session(self, progress, *, rank: int = 0, what: str = "", debug: bool = False):
        from graphtool.capture.distributed.ddp import DdpSession

        progress.phase(f"starting a fake process group of {self.world_size} ranks for DDP{what}...")
        return DdpSession(world_size=self.world_size, bucket_cap_mb=self.bucket_cap_mb, rank=rank,
                          find_unused_parameters=self.find_unused_parameters, quiet=not debug)

    def report(self, opened: Opened, capture):
        from graphtool.analysis.distributed.wrappers import build_ddp_report

        return build_ddp_report(capture, opened.session.result(capture))

    def trace_own(self, session):
        """Rank 0's trace, two steps (as rank 0's process traces it)."""
        from graphtool.capture.distributed.ranks import launch_env, on_rank

        with on_rank(0, self.world_size), launch_env(0, self.world_size):
            return super().trace_own(session)

    def across_ranks(self, session, capture, report, run: Opened):
        """Every other rank that could differ from rank 0, traced as its process would (:mod:`graphtool.commands.ranks`)."""
        from graphtool.commands.ranks import rank_differences

        def other_rank(rank: int):
            from graphtool.capture.distributed.ranks import launch_env, on_rank

            # rank ``rank``'s model, built as its process builds it: the script runs again
            with on_rank(rank, self.world_size), launch_env(rank, self.world_size), \
                    self.opened(session, rank=rank) as other:
                spec = session.fresh_spec(other.entry, other.factory_args)
                return session.trace_spec(spec, wrapper=other.session, steps=self.own_steps)

        return replace(report, ranks=rank_differences(session.target, run.entry, run.factory_args, self.world_size,
                                                      capture, other_rank, session.progress))

    def judged(self, report, verdict, standin_capture, *, standin_report=None):
        from graphtool.analysis.cudagraphs.ddp import with_split_verdicts

        return with_split_verdicts(report, verdict, standin=standin_report)

    def held(self, opened: Opened, spec):
        from graphtool.capture import compat
        from graphtool.capture.memory.optimizer_state import optimizer_state_bytes

        optimizer = optimizer_state_bytes(spec)
        session = opened.session
        return compat.ddp_bucket_sizes(session.ddp) if session.ddp is not None else None, optimizer

    def rank_memory(self, memory, report, capture, held=None):
        if held is None:  # only memory --ddp reads the buckets and optimizer state
            return None
        from graphtool.analysis.memory.rank_memory import ddp_rank_memory

        buckets, optimizer = held
        return ddp_rank_memory(memory, buckets, optimizer)

    def lint_target(self, target):
        return replace(target, ddp=(self.world_size, self.bucket_cap_mb))


@dataclass(frozen=True)
class Fsdp2(_Wrapped):
    """``fully_shard`` on each block and the root, then ``torch.compile(model)``, as rank 0 of ``world_size`` in
    torch's fake process group."""

    flag: ClassVar[str] = "--fsdp2"
    name: ClassVar[Optional[str]] = "fsdp2"
    under: ClassVar[str] = " under FSDP2"
    own_wrap: ClassVar[str] = "shards"
    needs_values: ClassVar[str] = "fully_shard copies each parameter's values into its shard"
    per_layer: ClassVar[str] = "shards the same way per layer"
    record_memory_breaks: ClassVar[bool] = True
    shows: ClassVar[type] = Fsdp2Part

    def _session(self, progress, *, rank: int = 0, what: str = "", debug: bool = False):
        from graphtool.capture.distributed.fsdp2 import Fsdp2Session

        progress.phase(f"starting a fake process group of {self.world_size} ranks for FSDP2...")
        return Fsdp2Session(world_size=self.world_size)

    def report(self, opened: Opened, capture):
        from graphtool.analysis.distributed.wrappers import build_fsdp2_report

        return build_fsdp2_report(capture, opened.session.result(capture))

    def judged(self, report, verdict, standin_capture, *, standin_report=None):
        from graphtool.analysis.cudagraphs.fsdp2 import with_graph_verdicts

        return with_graph_verdicts(report, verdict, standin_capture, standin=standin_report)

    def rank_memory(self, memory, report, capture, held=None):
        if memory is None:
            return None
        from graphtool.analysis.cudagraphs.fsdp2 import runs_per_step
        from graphtool.analysis.distributed.wrappers import SKIPPED_ROOT_NOTE
        from graphtool.analysis.memory.rank_memory import fsdp2_rank_memory

        return fsdp2_rank_memory(memory, report.memory, runs_per_step(capture), world_size=self.world_size,
                                 root_eager=SKIPPED_ROOT_NOTE in report.notes)

    def lint_target(self, target):
        return replace(target, fsdp2=self.world_size)


#: a script that starts its own process group under --ddp
OWN_GROUP_HINT = ("with --ddp graphtool starts the process group itself: start yours only when run as a program "
                  "(under `if __name__ == \"__main__\":`), or only `if not torch.distributed.is_initialized()`")


@contextlib.contextmanager
def own_group_hint(flag: str):
    """A script that starts its own process group under ``--ddp``/``--fsdp2``: its error says what to do."""
    from graphtool.errors import UserScriptError

    try:
        yield
    except UserScriptError as exc:
        if "process group" in exc.message and not exc.hint:
            raise exc.with_hint(OWN_GROUP_HINT.replace("--ddp", flag)) from None
        raise


def launch_of(ddp=None, fsdp2=None, device: Optional[str] = None) -> Launch:
    """The launch ``--ddp``'s and ``--fsdp2``'s settings ask for (each a dict, a launch, or None), checked once:
    not both, a world size of at least one, not on ``--device meta`` (both wrappers read the parameters' values)."""
    if isinstance(ddp, Launch) and fsdp2 is None:
        launch = ddp
    elif isinstance(fsdp2, Launch) and ddp is None:
        launch = fsdp2
    elif fsdp2 is not None:
        if ddp is not None:
            raise UsageError("--fsdp2 with --ddp: a model runs under one of them, not both",
                             hint="pick the wrapper the launch will use")
        from graphtool.capture.distributed.ddp import check_world_size

        launch = Fsdp2(world_size=check_world_size(int(fsdp2["world_size"])))
    elif ddp is not None:
        from graphtool.capture.distributed.ddp import check_world_size

        launch = Ddp(world_size=check_world_size(int(ddp["world_size"])),
                     bucket_cap_mb=float(ddp.get("bucket_cap_mb", 25.0)),
                     find_unused_parameters=bool(ddp.get("find_unused_parameters", False)))
    else:
        return Plain()
    if device == "meta" and launch.wrapped:
        raise UsageError(f"{launch.flag} cannot run on --device meta: {launch.needs_values}",
                         hint=f"drop --device meta; a smaller config of the model {launch.per_layer}")
    return launch


def launch_from(options: dict, device: Optional[str] = None) -> Launch:
    """The launch a Session's options ask for (:data:`graphtool.commands.options.LOAD`): ``ddp``/``fsdp2`` each True
    (with ``world_size``, ``bucket_cap_mb``, ``find_unused_parameters``), a settings dict, a launch, or off."""
    def settings(name: str):
        given = options.get(name)
        if given is None or given is False or isinstance(given, (dict, Launch)):
            return given or None
        if name == "fsdp2":
            return {"world_size": options.get("world_size", 2)}
        return {"world_size": options.get("world_size", 2), "bucket_cap_mb": options.get("bucket_cap_mb", 25.0),
                "find_unused_parameters": options.get("find_unused_parameters", False)}

    if options.get("find_unused_parameters") and not options.get("ddp"):
        raise UsageError("--find-unused-parameters is a DDP setting: add --ddp")
    return launch_of(settings("ddp"), settings("fsdp2"), device)
