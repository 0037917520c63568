"""Capture coverage as trace and lint report it (``calls_captured``, ``fallbacks_to_eager``, ``coverage``) and
the ``--min-coverage`` budget, from :mod:`graphtool.capture.coverage`'s counts.

The share judged is the one under torch's own setting of nested graph breaks (what the user's run gets); the
other setting is shown beside it.

Example::

    >>> from graphtool.capture.coverage import CoverageCounts, SettingCounts
    >>> c = coverage_of(CoverageCounts(5, (SettingCounts(False, 2, 0, 2, 2, 2), SettingCounts(True, 2, 0, 2, 2, 2)), False))
    >>> c.to_dict()["share"], c.below(0.9)
    (0.4, 'op coverage 40% (2 of 5 torch calls in compiled graphs), under the minimum 90% (--min-coverage 0.9)')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from graphtool.capture.coverage import CoverageCounts, SettingCounts


@dataclass(frozen=True)
class Coverage:
    counts: CoverageCounts

    @property
    def default(self) -> SettingCounts:
        """The setting the installed torch runs with (nested graph breaks as its config has them)."""
        for s in self.counts.settings:
            if s.nested_graph_breaks == self.counts.default_nested:
                return s
        return self.counts.settings[0]

    def share(self, setting: SettingCounts | None = None) -> float | None:
        s = setting or self.default
        return round(s.in_graphs / self.counts.torch_calls, 4) if self.counts.torch_calls else None

    def below(self, minimum: float | None) -> str | None:
        """Why the share is under ``minimum`` (a failure of the ``--min-coverage`` budget), else None."""
        share = self.share()
        if minimum is None or share is None or share >= minimum:
            return None
        s = self.default
        return (f"op coverage {share:.0%} ({s.in_graphs} of {self.counts.torch_calls} torch calls in compiled graphs), "
                f"under the minimum {minimum:.0%} (--min-coverage {minimum:g})")

    def line(self) -> str:
        """``op coverage 40% (2 of 5 torch calls in graphs); with nested graph breaks on: 100%`` for the terminal."""
        s = self.default
        share = self.share()
        text = (f"op coverage {share:.0%} ({s.in_graphs} of {self.counts.torch_calls} torch calls in compiled graphs), "
                if share is not None else "op coverage: no torch call made a tensor, ")
        text += f"{s.calls_captured} calls captured, {s.fallbacks_to_eager} fallbacks to eager"
        for other in self.counts.settings:
            if other is not s and other.nested_graph_breaks is not None:
                o = self.share(other)
                text += (f"; nested graph breaks {'on' if other.nested_graph_breaks else 'off'}: "
                         + (f"{o:.0%}, " if o is not None else "") + f"{other.calls_captured} calls captured, "
                         f"{other.graph_breaks} graph breaks")
        return text

    def to_dict(self) -> dict:
        return {
            "torch_calls": self.counts.torch_calls, "in_graphs": self.default.in_graphs, "share": self.share(),
            "nested_graph_breaks_default": self.counts.default_nested,
            "settings": [{**asdict(s), "share": self.share(s)} for s in self.counts.settings],
        }


def coverage_of(counts: CoverageCounts | dict | None) -> Coverage | None:
    """A :class:`Coverage` from the counts (or their dict, as a lint child writes them back)."""
    if counts is None:
        return None
    if isinstance(counts, dict):
        counts = CoverageCounts(int(counts["torch_calls"]), tuple(SettingCounts(**s) for s in counts["settings"]),
                                counts.get("default_nested"))
    return Coverage(counts)


def check_min_coverage(value: float | None) -> None:
    """``--min-coverage`` is a share between 0 and 1 (0.9 for 90%)."""
    if value is None:
        return
    from graphtool.errors import UsageError

    if not 0.0 <= value <= 1.0:
        raise UsageError(f"--min-coverage must be a share between 0 and 1 (0.9 for 90%), got {value:g}")
