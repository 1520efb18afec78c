"""Evolving the summary layer: the night names what changed, `nightshift apply` builds only the
added and changed views and drops the dropped ones, in one transaction, leaving every other summary table
row for row as it was; the nights after it equal recomputation; a crash during apply leaves the old
layer serving and a rerun finishes it."""

from __future__ import annotations

from collections import Counter

import pytest

from conftest import BACKENDS
from harness import FIGURE_1, BatchGenerator, Model, make_project, run_nights, write_changes
from nightshift.cli import main
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import InjectedCrash, PlanChanged, SchemaError
from nightshift.oracle import bag

BEFORE = {
    "SID_sales": FIGURE_1["SID_sales"],
    "sR_sales": FIGURE_1["sR_sales"],
    "sCD_sales": FIGURE_1["sCD_sales"],
    "big_sales": "CREATE VIEW big_sales AS SELECT date, COUNT(*) AS n, SUM(qty) AS q FROM pos WHERE qty >= 3 GROUP BY date",
    "best_day": "CREATE VIEW best_day AS SELECT storeID, MAX(TotalQuantity) AS best FROM SID_sales GROUP BY storeID",
    "store_sales": "CREATE VIEW store_sales AS SELECT s.storeID, COUNT(p.itemID) AS sales "
                   "FROM stores s LEFT JOIN pos p ON p.storeID = s.storeID GROUP BY s.storeID",
}
MONTHLY = ("CREATE VIEW monthly AS SELECT storeID, CAST(DATE_TRUNC('month', date) AS DATE) AS month, COUNT(*) AS n, "
           "SUM(qty) AS q FROM pos GROUP BY storeID, CAST(DATE_TRUNC('month', date) AS DATE)")
# the new layer: a month view added, big_sales' filter changed, sR_sales dropped, a nested view over
# sCD_sales, which no nested view read before (so apply writes its first lake copy), and a DISTINCT view
AFTER = {**{k: v for k, v in BEFORE.items() if k != "sR_sales"},
         "big_sales": BEFORE["big_sales"].replace("qty >= 3", "qty >= 2"),
         "monthly": MONTHLY,
         "region_days": "CREATE VIEW region_days AS SELECT region, date, COUNT(*) AS n, SUM(qty) AS q FROM pos "
                        "JOIN stores ON pos.storeID = stores.storeID GROUP BY region, date",
         "city_best": "CREATE VIEW city_best AS SELECT city, MAX(TotalQuantity) AS best, COUNT(*) AS days FROM sCD_sales "
                      "GROUP BY city",
         # auxiliary mode (paper 002): apply builds its auxiliary view's lake copy, never a warehouse table
         "store_items": "CREATE VIEW store_items AS SELECT storeID, COUNT(DISTINCT itemID) AS items FROM pos GROUP BY storeID"}
UNCHANGED = {"SID_sales", "sCD_sales", "best_day", "store_sales"}


def _write_views(root, views: dict[str, str]) -> None:
    folder = root / "sql" / "summaries"
    for f in folder.glob("*.sql"):
        f.unlink()
    for name, sql in views.items():
        (folder / f"{name}.sql").write_text(sql)


def _stored(cycle: Cycle, name: str) -> list:
    """Every row of a view's storage table (hidden columns too), sorted."""
    table = cycle.warehouse.storage_name(cycle.plan.view(name))
    with cycle.warehouse.engine.connect() as conn:
        return sorted(conn.exec_driver_sql(f'SELECT * FROM "{table}"').fetchall(), key=repr)


def _check(cycle: Cycle, model: Model, views: dict[str, str], where: str, besides: tuple[str, ...] = ()) -> None:
    """Every served view equals the model's recomputation; `besides`: served views the caller checks."""
    expected = model.recompute(views)
    assert {v.name for v in cycle.plan.views} == set(views) | set(besides)
    for view in cycle.plan.views:
        if view.name in besides:
            continue
        got = bag(cycle.warehouse.read_view(view))
        assert got == expected[view.name], f"{where}, view {view.name}: served != recomputed"


def _night(cycle: Cycle, root, gen: BatchGenerator, model: Model, batch: str) -> None:
    changes = gen.night()
    write_changes(root, batch, changes)
    cycle.run(batch)
    model.apply(changes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_apply_builds_only_what_changed(tmp_path, spark, quiet, warehouse_url, backend, capsys):
    root = make_project(tmp_path / "p", BEFORE, url=warehouse_url(backend, "apply_1"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    gen = BatchGenerator(11, model)
    run_nights(cycle, root, gen, model, 2)
    kept = {name: _stored(cycle, name) for name in UNCHANGED}
    cycle.close()

    _write_views(root, AFTER)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    write_changes(root, "b0003", gen.night())
    with pytest.raises(PlanChanged) as caught:  # the night names the views and what to run
        cycle.propagate("b0003")
    message = str(caught.value)
    for part in ("added city_best, monthly", "changed big_sales", "dropped sR_sales", "nightshift apply"):
        assert part in message, message
    assert main(["plan", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "changed: big_sales (filter:" in out and '"qty" >= 2' in out, out
    assert "added: monthly" in out and "dropped: sR_sales" in out, out

    result = cycle.apply()
    change = result.details
    assert set(change.added) == {"monthly", "region_days", "city_best", "store_items"} and [c.view for c in change.changed] == ["big_sales"]
    assert change.dropped == ("sR_sales",) and set(change.unchanged) == UNCHANGED
    for name in UNCHANGED:  # untouched, row for row
        assert _stored(cycle, name) == kept[name], name
    # the region-by-day rollup came from sCD_sales's summary table along the lattice (city -> region),
    # not from the base; big_sales (its own filter) and the nested and auxiliary views from the base
    built = cycle.warehouse.ledger()[-1].stats
    assert built["region_days"]["parent"] == "sCD_sales" and "parent" not in built["big_sales"], built
    with cycle.warehouse.engine.connect() as conn:  # the dropped view's serving view and storage are gone
        names = {n.lower() for n in cycle.warehouse.engine.dialect.get_table_names(conn)}
        names |= {n.lower() for n in cycle.warehouse.engine.dialect.get_view_names(conn)}
    assert not {"sr_sales", "sr_sales__ns"} & names, names
    assert not {n for n in names if "__ns_aux" in n}, names  # the auxiliary view lives in the lake only
    assert cycle.lake.state().version(cycle.plan.view("store_items").reads[0]) is not None  # its Delta table
    model_views = AFTER
    _check(cycle, model, model_views, "after apply")
    assert cycle.apply().skipped  # a rerun changes nothing
    assert cycle.warehouse.ledger()[-1].kind == "apply"

    # the night that was refused now runs; later nights keep every view equal to recomputation
    changes = _pending(root, "b0003")
    cycle.run("b0003")
    model.apply(changes)
    _check(cycle, model, model_views, "batch b0003")
    for n in (4, 5):
        _night(cycle, root, gen, model, f"b{n:04d}")
        _check(cycle, model, model_views, f"batch b{n:04d}")

    # a view that shares store_items' auxiliary view (paper 003: pos by item and store, not by region): apply builds
    # its table from that view's lake copy, which stays the version the nights keep; store_items is untouched
    aux = cycle.plan.view("store_items").reads[0]
    version, items = cycle.lake.state().versions[aux], _stored(cycle, "store_items")
    cycle.close()
    shared = {**AFTER, "region_items": "CREATE VIEW region_items AS SELECT region, COUNT(DISTINCT pos.itemID) AS items "
                                       "FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY region"}
    _write_views(root, shared)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert cycle.plan.view("region_items").reads == (aux,)
    assert cycle.apply().details.added == ("region_items",)
    assert cycle.lake.state().versions[aux] == version and _stored(cycle, "store_items") == items
    _check(cycle, model, shared, "after the shared view")
    _night(cycle, root, gen, model, "b0006")
    _check(cycle, model, shared, "batch b0006")
    cycle.close()


def _pending(root, batch: str) -> dict:
    """The changes of a batch already written to the lake (read back for the model)."""
    import pyarrow.parquet as pq

    out = {}
    for table in ("stores", "items", "pos"):
        d = root / "lake" / "changes" / table / f"batch_id={batch}"
        rows = pq.read_table(d).to_pylist() if d.exists() else []
        out[table] = [(r.pop("_op"), tuple(r.values())) for r in rows]
    return out


PROMO = "CREATE VIEW promo_sales AS SELECT promo, COUNT(*) AS n FROM pos GROUP BY promo"


class _Promos:
    """pos rows with the promo column declared later: rows from before it read NULL;
    rows inserted after carry a value chosen here, and their deletes carry it too. Tracked beside the
    model (which knows pos without promo), independently of nightshift."""

    def __init__(self):
        self.tagged = Counter()  # (row, promo) inserted after the column was declared

    def write(self, root, batch: str, changes: dict) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from harness import ARROW

        write_changes(root, batch, {t: rows for t, rows in changes.items() if t != "pos"})
        promos = []
        for op, row in changes["pos"]:
            if op == "insert":
                promo = None if row[3] is None or row[3] % 3 == 0 else f"p{row[3] % 3}"
                self.tagged[(row, promo)] += 1
            else:
                promo = next((p for (r, p), n in sorted(self.tagged.items(), key=repr) if r == row and n > 0), None)
                if self.tagged[(row, promo)] > 0:
                    self.tagged[(row, promo)] -= 1
            promos.append(promo)
        schema = ARROW["pos"].append(pa.field("promo", pa.string())).append(pa.field("_op", pa.string()))
        cols = [f.name for f in ARROW["pos"]]
        data = {c: [r[i] for _, r in changes["pos"]] for i, c in enumerate(cols)}
        data |= {"promo": promos, "_op": [op for op, _ in changes["pos"]]}
        d = root / "lake" / "changes" / "pos" / f"batch_id={batch}"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pydict(data, schema=schema), d / "part-0.parquet")

    def expected(self, model: Model) -> Counter:
        """promo_sales recomputed: every pos row not tagged has promo NULL."""
        out = Counter()
        for (_, promo), n in self.tagged.items():
            out[promo] += n
        out[None] += len(model.tables["pos"]) - sum(self.tagged.values())
        return Counter({(p, n): 1 for p, n in out.items() if n})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_schema_change_rebuilds_only_the_views_that_read_it(tmp_path, spark, quiet, warehouse_url, backend, capsys):
    """Issue 20, item 3: a comment or a new column no view reads rebuilds nothing, and the lake's base
    versions written before the column read it as NULL; a changed declaration of a column views read
    names exactly those views and apply rebuilds only them; a NOT NULL column the lake has no values
    for is refused by name."""
    root = make_project(tmp_path / "p", BEFORE, url=warehouse_url(backend, "apply_schema"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    gen = BatchGenerator(12, model)
    run_nights(cycle, root, gen, model, 1)
    kept = {name: _stored(cycle, name) for name in BEFORE}
    cycle.close()
    schema = root / "sql" / "schema.sql"
    original = schema.read_text()
    # a comment and a column nobody reads: no view changes, apply rebuilds nothing
    schema.write_text("-- owned by the data team; reviewed weekly\n"
                      + original.replace("price   DECIMAL(8,2)", "price   DECIMAL(8,2),\n    promo VARCHAR"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    promos = _Promos()
    changes = gen.night()
    promos.write(root, "b0002", changes)
    with pytest.raises(PlanChanged, match="no summary view is affected; run nightshift apply"):
        cycle.propagate("b0002")
    assert main(["plan", "--project", str(root)]) == 0
    assert "no summary view changed" in capsys.readouterr().out
    change = cycle.apply().details
    assert change.empty and not change.rebuild
    assert {name: _stored(cycle, name) for name in kept} == kept
    cycle.run("b0002")  # the base's rows from before read promo NULL; the batch's carry it
    model.apply(changes)
    _check(cycle, model, BEFORE, "batch b0002")
    cycle.close()

    # a view that reads the new column: added, built from the base, where the old rows read NULL
    (root / "sql" / "summaries" / "promo_sales.sql").write_text(PROMO)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert cycle.apply().details.added == ("promo_sales",)
    for batch in ("b0003", "b0004"):
        changes = gen.night()
        promos.write(root, batch, changes)
        cycle.run(batch)
        model.apply(changes)
        _check(cycle, model, BEFORE, f"batch {batch}", besides=("promo_sales",))
        assert bag(cycle.warehouse.read_view(cycle.plan.view("promo_sales"))) == promos.expected(model), batch
    kept = {name: _stored(cycle, name) for name in ("store_sales", "promo_sales")}
    cycle.close()

    # a column views read changes its declaration: exactly those views, and how
    schema.write_text(schema.read_text().replace("qty     INTEGER", "qty     BIGINT"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    changes = gen.night()
    promos.write(root, "b0005", changes)
    with pytest.raises(PlanChanged, match="changed SID_sales, best_day, big_sales, sCD_sales, sR_sales; "):
        cycle.propagate("b0005")
    assert main(["plan", "--project", str(root)]) == 0
    assert "changed: big_sales (declared columns it reads: (pos.qty INTEGER) -> (pos.qty BIGINT))" in capsys.readouterr().out
    change = cycle.apply().details
    assert set(change.unchanged) == {"store_sales", "promo_sales"} and not change.added and not change.dropped
    assert {name: _stored(cycle, name) for name in kept} == kept
    cycle.run("b0005")
    model.apply(changes)
    _check(cycle, model, BEFORE, "batch b0005", besides=("promo_sales",))
    assert bag(cycle.warehouse.read_view(cycle.plan.view("promo_sales"))) == promos.expected(model)
    cycle.close()

    # a NOT NULL column the lake's rows have no value for: refused by name before anything is built
    schema.write_text(schema.read_text().replace("promo VARCHAR", "promo VARCHAR,\n    channel VARCHAR NOT NULL"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    with pytest.raises(SchemaError, match=r"declares pos\.channel NOT NULL, but the lake's base of pos .* declare it "
                                          r"without NOT NULL"):
        cycle.apply()
    assert cycle.warehouse.ledger()[-1].kind == "batch"  # nothing recorded
    cycle.close()


@pytest.mark.parametrize("point", ["apply:after_view:monthly", "apply:before_copies"])
def test_a_crash_during_apply_leaves_the_old_layer_serving_and_a_rerun_finishes(tmp_path, spark, quiet, monkeypatch,
                                                                                  point):
    root = make_project(tmp_path / "p", BEFORE)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    gen = BatchGenerator(13, model)
    run_nights(cycle, root, gen, model, 1)
    before = {name: bag(cycle.warehouse.read_view(cycle.plan.view(name))) for name in BEFORE}
    cycle.close()
    _write_views(root, AFTER)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    monkeypatch.setenv("NIGHTSHIFT_CRASH_AT", point)
    with pytest.raises(InjectedCrash):
        cycle.apply()
    monkeypatch.delenv("NIGHTSHIFT_CRASH_AT")
    if point.startswith("apply:after_view"):  # rolled back: the old layer serves, the ledger is as it was
        assert cycle.warehouse.ledger()[-1].kind == "batch"
        for name in BEFORE:
            if name in AFTER:
                view = cycle.plan.view(name)
                assert bag(cycle.warehouse.read_view(view)) == before[name], name
    second = cycle.apply()
    assert second.skipped == (None if point.startswith("apply:after_view") else "the summary tables already match the plan")
    _check(cycle, model, AFTER, "after the rerun")
    for n in (2, 3):  # the nested view over sCD_sales reads sCD_sales' lake copy from the first night on
        _night(cycle, root, gen, model, f"b{n:04d}")
        _check(cycle, model, AFTER, f"batch b{n:04d}")
    cycle.close()


def test_status_names_an_unapplied_change_and_the_last_apply(tmp_path, spark, quiet, capsys):
    root = make_project(tmp_path / "p", BEFORE)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    run_nights(cycle, root, BatchGenerator(14, model), model, 0)
    cycle.close()
    (root / "sql" / "summaries" / "monthly.sql").write_text(MONTHLY)
    assert main(["status", "--project", str(root)]) == 0
    assert "summary layer: added monthly not yet applied (nightshift apply)" in capsys.readouterr().out
    Cycle(load_project(root), spark=spark, progress=quiet).apply()
    assert main(["status", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "summary layer changed by nightshift apply at b0000: added monthly" in out, out
    assert "not yet applied" not in out


def _compile(views: dict[str, str], schema_sql: str | None = None, maintain=()):
    from harness import SCHEMA_SQL
    from lattice.compile import compile_project

    return compile_project(schema_sql or SCHEMA_SQL, {f"sql/summaries/{n}.sql": s for n, s in views.items()}, maintain=maintain)


def test_the_diff_names_each_change_and_how_without_spark():
    from lattice.layer import describe, diff

    built = describe(_compile(BEFORE))
    change = diff(built, _compile(AFTER))
    assert change.added == ("city_best", "monthly", "region_days", "store_items") and change.dropped == ("sR_sales",)
    assert [(c.view, c.how) for c in change.changed] == [
        ("big_sales", ('filter: ("pos"."qty" >= 3) -> ("pos"."qty" >= 2)',))]
    # a view over a changed view changes too, and says why
    inner = {**BEFORE, "SID_sales": BEFORE["SID_sales"].replace("FROM pos", "FROM pos WHERE qty > 0")}
    how = {c.view: c.how for c in diff(built, _compile(inner)).changed}
    assert set(how) == {"SID_sales", "best_day"} and "reads SID_sales, which changed" in how["best_day"]
    # group keys, a [views] setting, a declaration a view reads; a comment changes nothing
    regrouped = {**BEFORE, "big_sales": BEFORE["big_sales"].replace("SELECT date,", "SELECT date, storeID,")
                 .replace("GROUP BY date", "GROUP BY date, storeID")}
    assert diff(built, _compile(regrouped)).changed[0].how[0] == "group keys: (date) -> (date, storeID)"
    forced = diff(built, _compile(BEFORE, maintain=(("big_sales", "recompute"),)))
    assert [c.view for c in forced.changed] == ["big_sales"] and "[views] setting: auto -> recompute" in forced.changed[0].how
    from harness import SCHEMA_SQL

    wider = diff(built, _compile(BEFORE, SCHEMA_SQL.replace("weight DOUBLE", "weight DOUBLE, colour VARCHAR")))
    assert wider.rebuild == () and wider.empty  # no view reads items
    assert diff(built, _compile(BEFORE, "-- a comment\n" + SCHEMA_SQL)).empty
    # per column: a new pos column no view reads changes nothing; a retyped one names the views reading it
    assert diff(built, _compile(BEFORE, SCHEMA_SQL.replace("price   DECIMAL(8,2)", "price DECIMAL(8,2), promo INT"))).empty
    retyped = diff(built, _compile(BEFORE, SCHEMA_SQL.replace("price   DECIMAL(8,2)", "price DECIMAL(9,2)")))
    assert [c.view for c in retyped.changed] == [] and retyped.empty  # no view of BEFORE reads price
    retyped = diff(built, _compile(BEFORE, SCHEMA_SQL.replace("date    DATE", "date TIMESTAMP")))
    assert {c.view: c.how for c in retyped.changed}["big_sales"] == (
        "declared columns it reads: (pos.date DATE) -> (pos.date TIMESTAMP)",)
    assert "store_sales" in retyped.unchanged
    # a layer built before per-column fingerprints (the ledger's entries without "columns") compares by the
    # earlier rule, so upgrading nightshift rebuilds nothing
    legacy = {n: {k: v for k, v in d.items() if k not in ("columns", "legacy")} | {"fingerprint": d["legacy"]}
              for n, d in built.items()}
    assert diff(legacy, _compile(BEFORE)).empty
    assert [c.view for c in diff(legacy, _compile(inner)).changed] == ["SID_sales", "best_day"]
    assert not diff(None, _compile(BEFORE)).known


def test_a_new_view_is_built_from_the_coarsest_summary_table_that_stays_without_spark():
    from harness import SCHEMA_SQL
    from lattice.compile import compile_project
    from lattice.layer import built_parents

    from lattice.ir import FunctionalDependency

    views = {f"{n}.sql": sql for n, sql in AFTER.items()}
    plan = compile_project(SCHEMA_SQL, views, (FunctionalDependency("stores", ("city",), ("region",)),))  # as harness
    new = ("monthly", "region_days", "big_sales", "city_best", "store_items")
    parents = built_parents(plan, new)  # without sizes: the fewest group keys
    assert {n: p[0].upper for n, p in parents.items()} == {"monthly": "SID_sales", "region_days": "sCD_sales"}
    assert [j.table for j in parents["region_days"][0].joins] == ["stores"]  # city -> region, on the stored city
    assert built_parents(plan, ("monthly", "SID_sales")) == {}  # a parent rebuilt too is no parent
    # with sizes: only a table of at most half the fact table's rows (exporting more costs more than the base)
    sized = built_parents(plan, new, {"SID_sales": 900, "sCD_sales": 40}, {"pos": 1000})
    assert {n: p[0].upper for n, p in sized.items()} == {"region_days": "sCD_sales"}
