"""Paper 001, 4.1.3 and 4.3: pre-aggregation and the refresh optimizations, each on and off.

Each night is propagated twice over the same lake, with pre-aggregation and the weak-minimality
MIN/MAX test off, then on (NIGHTSHIFT_PREAGGREGATE=0, NIGHTSHIFT_WEAK_MINIMALITY=0), and refreshed
into four warehouses: DuckDB and PostgreSQL with the refresh optimizations on, and off
(NIGHTSHIFT_REFRESH_OPT=0). Every night all four must equal recomputation from scratch, and the
manifest and ledger must say what was taken: new keys on nights of new dates (only for the views
grouped by date), insert-only on nights without deletes, the full Figure 8 merge otherwise; fewer
exact MIN/MAX recomputations with weak minimality; pre-aggregation for the views that join a
dimension no aggregate argument reads. A view declared in [refresh] new_keys is verified: a night
that breaks the declaration is refused, naming view and batch, with nothing applied.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from harness import EXTENDED, FIGURE_1, BatchGenerator, Model, make_project, write_changes
from nightshift.errors import WarehouseError
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import bag

VIEWS = {**FIGURE_1, "avg_price": EXTENDED["avg_price"]}
DATE_VIEWS = {"SID_sales", "sCD_sales"}


def _sale(model: Model, i: int, date: dt.date) -> tuple:
    stores = sorted(s[0] for s in model.tables["stores"])
    items = sorted(it[0] for it in model.tables["items"])
    return (stores[i % len(stores)], items[(3 * i) % len(items)], date, 1 + i % 5, None)


def _new_date_night(model: Model, date: dt.date) -> dict:
    """Insertion-generating changes (Section 6): sales of existing stores and items on a new date."""
    return {"pos": [("insert", _sale(model, i, date)) for i in range(12)]}


def _update_night(model: Model) -> dict:
    """Update-generating changes on existing dates, stores and items: four sales corrected (deleted and
    inserted again with a larger qty), and the earliest sale of all deleted."""
    dated = sorted((r for r in model.tables["pos"] if r[2] is not None), key=lambda r: (r[2], repr(r)))
    earliest, gone = dated[0], dated[-4:]
    changes = [("delete", r) for r in gone] + [("insert", (r[0], r[1], r[2], (r[3] or 0) + 2, r[4])) for r in gone]
    return {"pos": changes + [("delete", earliest)]}


def _paths(cycle: Cycle) -> dict[str, str]:
    stats = cycle.warehouse.ledger()[-1].stats
    return {v.name: stats[v.name]["path"] for v in cycle.plan.views}


ON = {"refresh_optimize": True, "weak_minimality": True, "preaggregate": True}
OFF = {k: False for k in ON}


@pytest.fixture
def four(tmp_path, spark, quiet, pg_schemas, monkeypatch):
    """The optimized cycle (DuckDB, owns the lake) and three more warehouses refreshed from its deltas.
    The D-lattice is off, so every summary-delta comes from the change set (where pre-aggregation
    applies); test_differential covers the optimizations along the lattice."""
    monkeypatch.setenv("NIGHTSHIFT_LATTICE", "0")
    root = make_project(tmp_path / "p", VIEWS, maintain="incremental")  # the first night too: 4.3's paths, no recompute
    lead = Cycle(load_project(root), spark=spark, progress=quiet)
    cycles = {"duckdb_on": lead}
    for name, url in (("pg_on", pg_schemas("opt_on")), ("duckdb_off", f"duckdb:///{tmp_path / 'off.duckdb'}"),
                      ("pg_off", pg_schemas("opt_off"))):
        cycles[name] = Cycle(dataclasses.replace(lead.project, warehouse_url=url), spark=spark, progress=quiet)
    model = Model()
    gen = BatchGenerator(5, model)
    manifests = {}

    def night(batch: str, changes: dict, declared: tuple[str, ...] = (), compare: str = "all") -> dict[str, dict]:
        """Run one night; returns each warehouse's ledger stats per view. compare: "all" propagates
        twice (off, on); "refresh" propagates once and refreshes all four; "none" only the "on" two."""
        write_changes(root, batch, changes)
        for c in cycles.values():
            c.set_options(new_keys=declared)
            c._ensure_summary_tables()
        stats = {}

        def refresh(names, options):
            for name in names:
                cycles[name].set_options(**options)
                cycles[name].refresh(batch)
                stats[name] = cycles[name].warehouse.ledger()[-1].stats

        def propagate(mode, options):
            lead.set_options(**options)
            manifests[mode] = lead.propagate(batch).details

        if compare == "all":
            propagate("off", OFF)
            refresh(("duckdb_off", "pg_off"), OFF)
        propagate("on", ON)
        if compare == "refresh":
            refresh(("duckdb_off", "pg_off"), OFF)
        refresh(("pg_on", "duckdb_on"), ON)  # the lake's own warehouse last: its ledger makes the batch refreshed
        lead.apply_base(batch)
        model.apply(changes)
        expected = model.recompute(VIEWS)
        for name, c in cycles.items():
            for view in c.plan.views if name in stats else ():
                assert bag(c.warehouse.read_view(view)) == expected[view.name], f"{name}, {batch}, {view.name}"
        return stats

    yield lead, cycles, model, gen, night, manifests
    for c in cycles.values():
        c.close()


def preaggregated(manifest) -> dict[str, tuple[str, ...]]:
    return {n.node: n.preaggregated_by for n in manifest.night.nodes if n.preaggregated_by}


def weakly_minimal(manifest) -> list[str]:
    return sorted(v.view for v in manifest.night.views if v.exact_minmax == "weakly_minimal")


def _paths(stats: dict) -> dict[str, str]:
    return {v: s["path"] for v, s in stats.items() if v in VIEWS}


def test_each_night_takes_the_path_its_changes_allow(four):
    lead, cycles, model, gen, night, manifests = four
    first = night("b0000", gen.initial())
    assert set(_paths(first["duckdb_on"]).values()) == {"new_keys"}  # empty summary tables: every group is new
    assert set(_paths(first["pg_on"]).values()) == {"new_keys"}  # insert-only: tried as new keys, and they were
    assert set(_paths(first["duckdb_off"]).values()) == set(_paths(first["pg_off"]).values()) == {"merge"}
    # 4.1.3: the views joining a dimension that no aggregate argument reads, and by which fact columns
    assert preaggregated(manifests["on"]) == {
        "SiC_sales": ("storeID", "itemID"), "sCD_sales": ("date", "storeID"), "sR_sales": ("storeID",)}
    assert preaggregated(manifests["off"]) == {}

    stats = night("b0001", _new_date_night(model, dt.date(2026, 3, 1)), compare="refresh")
    for backend in ("duckdb_on", "pg_on"):
        paths = _paths(stats[backend])
        assert {v for v, p in paths.items() if p == "new_keys"} == DATE_VIEWS, backend
        assert {p for v, p in paths.items() if v not in DATE_VIEWS} == {"insert_only"}, backend
    assert "lies outside the summary table's range" in stats["duckdb_on"]["SID_sales"]["why"]
    assert set(_paths(stats["duckdb_off"]).values()) == set(_paths(stats["pg_off"]).values()) == {"merge"}

    # update-generating: rows deleted and inserted again with a larger qty on the same dates, and the
    # earliest sale of all deleted. Weakly minimal: only the earliest sale's group needs its exact
    # MIN(date) (a deleted value undercuts what was inserted); the plain test recomputes every group
    # that lost rows
    stats = night("b0002", _update_night(model))
    assert all(set(_paths(s).values()) == {"merge"} for s in stats.values()), stats
    assert weakly_minimal(manifests["on"]) == ["SiC_sales", "avg_price"] and weakly_minimal(manifests["off"]) == []
    for backend in ("duckdb", "pg"):
        on, off = stats[f"{backend}_on"], stats[f"{backend}_off"]
        assert on["SiC_sales"]["minmax_exact_groups"] == 1
        assert off["SiC_sales"]["minmax_exact_groups"] > 1
        assert on["avg_price"]["minmax_exact_groups"] < off["avg_price"]["minmax_exact_groups"]

    # a declared new-key view: new (store, item, date) combinations on an existing date, which no
    # range proves new; the declaration does, verified
    taken = {(r[0], r[1], r[2]) for r in model.tables["pos"]}
    stores, items = sorted(s[0] for s in model.tables["stores"]), sorted(i[0] for i in model.tables["items"])
    day = dt.date(2026, 1, 2)
    fresh = [(s, i, day) for s in stores for i in items if (s, i, day) not in taken][:3]
    assert fresh
    stats = night("b0003", {"pos": [("insert", (s, i, d, 2, None)) for s, i, d in fresh]}, ("SID_sales",), "none")
    assert stats["duckdb_on"]["SID_sales"]["path"] == stats["pg_on"]["SID_sales"]["path"] == "new_keys"
    assert "verified" in stats["duckdb_on"]["SID_sales"]["why"]

    # the declaration broken: a sale for a (store, item, date) the summary table already holds
    old = sorted(model.tables["pos"], key=repr)[-1]
    write_changes(lead.project.root, "b0004", {"pos": [("insert", old)]})
    lead.propagate("b0004")
    expected = model.recompute(VIEWS)
    for c in (lead, cycles["pg_on"]):
        before = c.warehouse.ledger()
        with pytest.raises(WarehouseError, match=r"refresh b0004: view SID_sales: .*new_keys.*nothing of batch b0004"):
            c.refresh("b0004")
        assert c.warehouse.ledger() == before
        for view in c.plan.views:  # every table still at b0003, not only SID_sales
            assert bag(c.warehouse.read_view(view)) == expected[view.name], view.name
