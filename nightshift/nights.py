"""Which night runs next: the one decision behind `nightshift status`'s pending list, `nightshift run
--pending` and the Airflow DAG's `choose_batch` task.

A night is one landed change batch. It is *complete* when it is applied to the base and, if the
ledger holds it, validated and published; a night refreshed by `nightshift run` (no validation) and
already followed by later nights is complete too. Nights complete strictly in batch-id order, so the
next night is the first landed batch that is not complete. Reads only the lake's folders and the
warehouse's ledger: no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from nightshift.applied import unapplied
from runtime.errors import BadChangeBatch
from runtime.lake import Lake
from warehouse.store import Warehouse


@dataclass(frozen=True)
class NightChoice:
    batch: str | None  # the night to run, or None: nothing to do
    why: str  # for the task log and the UI: what was found
    notes: tuple[str, ...] = ()  # what the working files hold that the applied layer does not (layer_notes)
    refreshed: bool = False  # the night's refresh is in the ledger: its window has nothing left to do


def pending_batches(landed: Iterable[str], applied: Iterable[str]) -> list[str]:
    """Landed batches not yet applied to the base, in apply order."""
    done = set(applied)
    return sorted(b for b in landed if b not in done)


def next_night(landed: Sequence[str], applied: Sequence[str], nights: Sequence, first: str = "",
               through: str = "") -> NightChoice:
    """The night a run should take. `nights`: the ledger's batch rows in order (batch_id, validated_at,
    published_at). `first`/`through`: only batches in [first, through] (either may be empty).

    The newest refreshed night that is not yet validated or published comes first: a night whose
    validation failed blocks the nights after it until it passes (rerun it, or fix the data)."""
    def wanted(b: str) -> bool:
        return (not first or b >= first) and (not through or b <= through)

    span = f" in {first or '…'}..{through or '…'}" if first or through else ""
    last = nights[-1] if nights else None
    if last is not None and wanted(last.batch_id) and not (last.validated_at and last.published_at):
        step = "validated" if not last.validated_at else "published"
        return NightChoice(last.batch_id, f"batch {last.batch_id} is refreshed but not yet {step}", refreshed=True)
    refreshed = {r.batch_id for r in nights}
    for b in pending_batches(landed, applied):
        if wanted(b):
            return NightChoice(b, f"batch {b} is the next landed batch not yet applied", refreshed=b in refreshed)
    return NightChoice(None, f"no landed batch{span} is waiting: every one is applied"
                             + (" and published" if last is not None else ""))


def night_of(batch: str, landed: Sequence[str], applied: Sequence[str], nights: Sequence) -> NightChoice:
    """A night asked for by id (the DAG's trigger form): run it unless it is complete. A batch that has
    not landed is an error at once, never a wait for a batch that may not come."""
    row = next((r for r in nights if r.batch_id == batch), None)
    complete = row is None or (row.validated_at and row.published_at) or row is not nights[-1]
    if batch in set(applied) and complete:
        return NightChoice(None, f"batch {batch} is already applied" + (" and published" if row and row.published_at else ""))
    if batch not in set(landed) and row is None:
        raise BadChangeBatch(f"batch {batch} has not landed: no folder lake/changes/<table>/batch_id={batch}; "
                             f"write it (nightshift load or nightshift capture) and trigger the night again")
    return NightChoice(batch, f"batch {batch} was asked for", refreshed=row is not None)


def choose(project, first: str = "", through: str = "", load: Callable | None = None) -> NightChoice:
    """The night a DAG run takes for `project` (a nightshift.config.Project): batch `first` alone when
    only it is given, else the next night in [first, through]. load: the project's load_project; given, the
    choice carries layer_notes too, from the same read of the ledger (the DAG's choose_batch reads it once)."""
    lake = Lake(project.lake)
    warehouse = Warehouse(project.warehouse_url, project.root)
    try:
        ledger = warehouse.ledger()
        notes = tuple(_notes(project, load, warehouse, ledger)) if load is not None else ()
    finally:
        warehouse.dispose()
    nights = [r for r in ledger if r.kind == "batch"]
    landed, applied = lake.batch_ids(), lake.state().applied
    if first and not through:
        choice = night_of(first, landed, applied, nights)
    else:
        choice = next_night(landed, applied, nights, first, through)
    return replace(choice, notes=notes)


def layer_notes(project, load) -> list[str]:
    """What the DAG's choose_batch logs about the working files of `project` (the night's Project; `load`:
    its load_project, called with layer="working"): views added, changed or dropped, or view files that do not
    compile, since nightshift apply last built the layer. Only a note: the night runs the applied layer
    (nightshift/applied.py)."""
    warehouse = Warehouse(project.warehouse_url, project.root)
    try:
        return _notes(project, load, warehouse, warehouse.ledger())
    finally:
        warehouse.dispose()


def _notes(project, load: Callable, warehouse: Warehouse, ledger: list) -> list[str]:
    return unapplied(lambda: load(project.root, layer="working"), warehouse, ledger)
