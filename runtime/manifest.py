"""The manifest of a propagated batch: the night's plan as propagate executed it, plus what it measured.

Written last by propagate (lake/deltas/batch_id=<ID>/_manifest.json): its presence says the
summary-deltas of batch <ID> are complete. Refresh reads where each view's summary-delta is and what
4.3 may rely on; validate reads the parents propagate chose; `nightshift plan --batch ID` prints the
night. Versioned: a manifest of another version is stale and propagate is rerun. A field added with a
default (rows_read) keeps the version: a manifest written before it loads with the default.
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
class RowsRead:
    """The rows propagate's Spark scans read from one source of the lake ("never reads the
    base" measured, not claimed): Spark's "number of output rows" of every Parquet scan of the step, i.e.
    the rows of the row groups it read, before any filter; a cached relation's scan counts once; the rows of a small
    table the step read itself and sent with its queries (a local relation) count as one scan each time they are sent,
    and a pass over a base table made by the step's own process (no Spark job: the delete check's, a lost extreme's
    count) as one scan of every row of the row groups it read.

    bytes: what those reads took from the files, where this process made them: for a pass over a base table, the
    compressed bytes of the column chunks of the columns it read; for a whole file read here (a small table, the
    batch's change files, a small lake copy), its size. None: not known (a source some Spark scan read: Spark's task
    input bytes leave out the column chunks its Parquet reader fetches; or a manifest written before nightshift
    measured bytes).

    kind: 'base' (a base table at the night's version, lake/tables/<t>/), 'copy' (the lake copy of a view nested
    views read, lake/tables/<view>/), 'changes' (the batch's change files of a table), 'node' (a lattice
    point an earlier level stored, _nodes/), 'delta' (a view's summary-delta an earlier level wrote,
    part=<i>/), 'update' (tonight's new rows of a copied view's changed groups, _copies/), 'matched' (the
    base rows equal to a deleted row, as the delete check kept them, _matched/), 'log' (a table's Delta log,
    which Delta's own reader reads to find a version's files: lake_tables.read), 'other' (name: the path)."""

    kind: str
    name: str
    rows: int
    scans: int  # how many scans read rows of it (a table scanned twice counts its rows twice)
    bytes: int | None = None

    @property
    def source(self) -> str:
        return f"{self.kind} {self.name}"


def add_rows_read(parts) -> tuple[RowsRead, ...] | None:
    """The sum per source of several measurements (the levels of one night), most rows first; None when
    any part was not measured (a source's bytes: None when any of its reads' bytes is not known)."""
    total: dict[tuple[str, str], RowsRead] = {}
    for part in parts:
        if part is None:
            return None
        for r in part:
            old = total.get((r.kind, r.name))
            total[(r.kind, r.name)] = r if old is None else RowsRead(
                r.kind, r.name, old.rows + r.rows, old.scans + r.scans,
                None if old.bytes is None or r.bytes is None else old.bytes + r.bytes)
    return tuple(sorted(total.values(), key=lambda r: (-r.rows, r.kind, r.name)))


@dataclass(frozen=True)
class LevelRecord:
    """propagate --level K ran for this plan and base state (lake/deltas/batch_id=<ID>/_levels/level-K.json)."""

    plan: str
    base_state: str | None
    level: int
    deltas: tuple[DeltaResult, ...]
    seconds: float = 0.0
    rows_read: tuple[RowsRead, ...] | None = None  # what this level's Spark scans read (None: not measured)


@dataclass(frozen=True)
class Manifest:
    version: int
    night: NightPlan
    deltas: tuple[DeltaResult, ...]
    seconds: float = 0.0
    # what propagate's Spark scans read, per source (with --level: every level's, added up); None: not
    # measured (a manifest written before nightshift measured it, or Spark's listener bus did not drain)
    rows_read: tuple[RowsRead, ...] | None = None

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

    def read(self, kind: str, name: str) -> RowsRead:
        """The rows read from one source (zero rows, scans and bytes when no scan read it)."""
        return next((r for r in self.rows_read or () if (r.kind, r.name) == (kind, name)),
                    RowsRead(kind, name, 0, 0, 0))
