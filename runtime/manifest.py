"""The manifest of a propagated batch: the night's plan as propagate executed it, plus what it measured.

Written last by propagate (lake/deltas/batch_id=<ID>/_manifest.json): its presence says the
summary-deltas of batch <ID> are complete. Refresh reads where each view's summary-delta is and what
4.3 may rely on; validate reads the parents propagate chose; `nightshift plan --batch ID` prints the
night. Versioned: a manifest of another version is stale and propagate is rerun.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.night import NightPlan

MANIFEST_VERSION = 3


@dataclass(frozen=True)
class DeltaResult:
    """A view's summary-delta as written: its part folder, column prefix and row count (a view
    recomputed tonight: its whole contents, and for a recompute-mode view the result's column types,
    from which the warehouse creates its table)."""

    view: str
    part: int
    prefix: str
    rows: int
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class LevelRecord:
    """propagate --level K ran for this plan and base state (lake/deltas/batch_id=<ID>/_levels/level-K.json)."""

    plan: str
    base_state: str | None
    level: int
    deltas: tuple[DeltaResult, ...]
    seconds: float = 0.0


@dataclass(frozen=True)
class Manifest:
    version: int
    night: NightPlan
    deltas: tuple[DeltaResult, ...]
    seconds: float = 0.0

    @property
    def batch(self) -> str:
        return self.night.batch

    @property
    def plan(self) -> str:
        return self.night.plan

    @property
    def base_state(self) -> str | None:
        return self.night.base_state

    def delta(self, view: str) -> DeltaResult | None:
        return next((d for d in self.deltas if d.view == view), None)

    def actual_rows(self) -> dict[str, int]:
        return {d.view: d.rows for d in self.deltas}
