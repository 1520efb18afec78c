"""Higher-order delta maps (Cumulus): `[views] v = "map"` keeps a view that joins
dimension tables over a map of its fact table grouped by the fact columns the view reads (foreign keys,
fact-side keys and filter columns), kept in the lake from the fact's changes only. A night that changes
only dimensions then joins the changed rows with the map's lake copy and reads no row of pos (the
manifest's rows read); random nights, dimension changes among them, keep every view equal to
recomputation from the model; what the rewrite does not cover is refused with the reason."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from harness import EXTENDED, FIGURE_1, SCHEMA_SQL, BatchGenerator, Model, check_served, make_project, \
    nights_equal_recomputation, partition_pos, run_nights, write_changes
from lattice import emit
from lattice.compile import compile_project
from lattice.errors import UnsupportedView
from lattice.passes.choose_maps import MAP_ROWS, MAP_SHARE, over_map
from nightshift.config import load_project
from nightshift.cycle import Cycle
from runtime.night import preaggregation
from runtime.options import Options

# every view that joins a dimension is mapped, except city_weight (AVG: not covered), left out here
VIEWS = {k: v for k, v in {**FIGURE_1, **EXTENDED}.items() if k != "city_weight"}
MAPPED = ("sCD_sales", "SiC_sales", "sR_sales", "revenue")
# the auxiliary mode's views are kept over the same kind of map (paper 003: foreign keys, not dimension
# attributes), one shared by both: a dimension night rewrites neither it nor reads pos for them
VIEWS |= {"store_items": "CREATE VIEW store_items AS SELECT storeID, COUNT(DISTINCT itemID) AS items FROM pos "
                         "GROUP BY storeID",
          "region_items": "CREATE VIEW region_items AS SELECT region, COUNT(DISTINCT pos.itemID) AS items "
                          "FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY region"}
# (a holistic aggregate over the same kind of map, MEDIAN by region, is test_holistic's region_price)


def _with_maps(root, names=MAPPED) -> None:
    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text() + "[views]\n" + "".join(f'{n} = "map"\n' for n in names))


# DuckDB here; test_modes keeps a mapped view on PostgreSQL too (its every-mode project), within the suite's budget
def test_mapped_views_stay_exact_and_a_dimension_night_reads_no_fact_row(tmp_path, spark, quiet):
    root = make_project(tmp_path / "p", VIEWS)
    _with_maps(root)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert {v.name: v.mode for v in cycle.plan.views if v.name in MAPPED} == {n: "auxiliary" for n in MAPPED}
    model = Model()
    gen = BatchGenerator(41, model)
    run_nights(cycle, root, gen, model, 1)
    check_served(cycle, model, VIEWS, "b0001")

    # only dimensions change: a store moves city and region, an item changes category
    store = sorted(model.tables["stores"])[0]
    item = sorted(model.tables["items"])[0]
    night = {"stores": [("delete", store), ("insert", (store[0], "capital", "east"))],
             "items": [("delete", item), ("insert", (item[0], "c9", item[2]))], "pos": []}
    write_changes(root, "b0002", night)
    cycle.run("b0002")
    model.apply(night)
    check_served(cycle, model, VIEWS, "b0002")
    manifest = cycle.lake.read_manifest("b0002")
    assert manifest.read("base", "pos").rows == 0, manifest.rows_read  # the maps' lake copies instead
    copy = manifest.read("copy", cycle.plan.view("sCD_sales").reads[0])
    # read once: its summary-delta is empty tonight, so Spark makes its change set and the command does not read it
    assert copy.rows > 0 and copy.scans == 1, manifest.rows_read
    shared = cycle.plan.view("store_items").reads
    assert shared == cycle.plan.view("region_items").reads  # one auxiliary view: pos by (itemID, storeID)
    assert manifest.delta(shared[0]).rows == 0, shared  # the dimension change leaves the auxiliary view as it was

    # sales only: the batch deletes nothing, but a view kept over a map sees its changed groups replaced
    sales = {"pos": [("insert", (store[0], item[0], None, 2, None)), ("insert", (store[0], item[0], None, 3, None))]}
    write_changes(root, "b0003", sales)
    cycle.propagate("b0003")
    why = cycle.refresh("b0003").details
    cycle.apply_base("b0003")
    model.apply(sales)
    check_served(cycle, model, VIEWS, "b0003")
    assert why["SID_sales"]["path"] != "merge" and why["sCD_sales"]["path"] == "merge", why
    assert "the batch deletes rows" not in why["sCD_sales"]["why"] and "over another view" in why["sCD_sales"]["why"]

    for n in (4,):  # a random night after it: mixed fact and dimension changes (the suite's budget: one)
        changes = gen.night()
        write_changes(root, f"b{n:04d}", changes)
        cycle.run(f"b{n:04d}")
        model.apply(changes)
        check_served(cycle, model, VIEWS, f"b{n:04d}")
    cycle.close()


def test_rows_sent_to_spark_as_arrow_batches_give_the_same_nights(tmp_path, spark, quiet):
    """Rows this process sends Spark (a batch's changes, a small copy's changed groups, a table's deleted rows) go as
    a LocalRelation up to the session's threshold and as an RDD of Arrow batches above it (spark_jobs.session): with
    the threshold at 0 every such relation takes the second route, and random nights with deletes over maps still
    equal recomputation from the model."""
    import pyarrow as pa

    threshold = "spark.sql.execution.arrow.localRelationThreshold"
    before = spark.conf.get(threshold)
    sent = lambda: spark.createDataFrame(pa.table({"x": [1, 2]}))._jdf.queryExecution().analyzed().toString()  # noqa: E731
    assert "LocalRelation" in sent()  # a few bytes: in the plan
    spark.conf.set(threshold, "0")
    try:
        assert "LocalRelation" not in sent() and "LogicalRDD" in sent()
        root = make_project(tmp_path / "p", VIEWS)
        _with_maps(root)
        cycle = Cycle(load_project(root), spark=spark, progress=quiet)
        nights_equal_recomputation(cycle, root, VIEWS, 53, "rows sent as Arrow batches, ", nights=1)
        assert cycle.lake.read_manifest("b0001").night.info.has_deletes  # sales deleted, and a store moved
        cycle.close()
    finally:
        spark.conf.set(threshold, before)


def test_without_maps_the_same_dimension_night_reads_pos(tmp_path, spark, quiet):
    """The contrast, measured the same way: paper 001's ΔD ⋈ pos term reads the fact table."""
    views = {k: VIEWS[k] for k in ("sCD_sales", "sR_sales")}
    root = make_project(tmp_path / "p", views)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    run_nights(cycle, root, BatchGenerator(42, model), model, 0)
    store = sorted(model.tables["stores"])[0]
    write_changes(root, "b0001", {"stores": [("delete", store), ("insert", (store[0], "capital", "east"))], "pos": []})
    cycle.run("b0001")
    read = cycle.lake.read_manifest("b0001").read("base", "pos")
    assert read.rows >= len(model.tables["pos"]) > 0 and read.scans >= 1, read  # once per view here
    cycle.close()


def test_the_map_is_refused_where_it_does_not_apply_naming_why():
    def compile_with(sql: str):
        return compile_project(SCHEMA_SQL, {"v.sql": sql}, maintain=(("v", "map"),))

    for sql, why in (
        ("CREATE VIEW v AS SELECT storeID, COUNT(*) AS n FROM pos GROUP BY storeID", "joins no dimension"),
        ("CREATE VIEW v AS SELECT city, AVG(qty) AS a FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY city",
         "no AVG"),
        ("CREATE VIEW v AS SELECT category, MAX(weight) AS w FROM pos JOIN items ON pos.itemID = items.itemID "
         "GROUP BY category", "no aggregate of a dimension column"),
    ):
        with pytest.raises(UnsupportedView, match=rf'v\.sql: view v: nightshift.toml \[views\] v = "map" .*{why}'):
            compile_with(sql)
    plan = compile_with("CREATE VIEW v AS SELECT region, date, COUNT(*) AS n, SUM(qty) AS q FROM pos p "
                        "JOIN stores s ON p.storeID = s.storeID WHERE p.qty > 1 GROUP BY region, date")
    (m,) = plan.auxiliary
    # the map keeps the foreign key and the fact-side key, the fact's filter applied in it; no dimension attribute
    assert m.tables == ("pos",) and sorted(k.name for k in m.keys) == ["date", "storeID"] and "qty" in m.where
    assert plan.view("v").maintain == "map" and plan.view("v").reads == (m.name,)


def _declared(root, sizes: str) -> None:
    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text() + "[statistics]\n" + sizes)


def test_the_plan_keeps_views_over_maps_once_the_fact_table_is_declared_large(tmp_path, spark, quiet):
    """No [views] setting: [statistics] declaring pos at MAP_ROWS rows keeps each view that joins a dimension over
    a map estimated at most 1/MAP_SHARE of it (lattice/passes/choose_maps.py), the same maps `"map"` names; the
    nights stay exact, and a night changing only the stores reads no row of pos."""
    views = {k: VIEWS[k] for k in ("SID_sales", "sCD_sales", "sR_sales", "SiC_sales")}
    root = make_project(tmp_path / "p", views)
    _declared(root, f"pos = {MAP_ROWS}\nstores = 100\nitems = 1000\n")
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert {v.name: over_map(v) for v in cycle.plan.views} == \
        {"SID_sales": False, "sCD_sales": True, "sR_sales": True, "SiC_sales": True}
    assert {v.maintain for v in cycle.plan.views} == {"auto"}
    assert "by the plan's choice: ~100 rows against 50,000,000 of pos" in cycle.plan.view("sR_sales").reason
    mapped = root.parent / "mapped"  # the same views, mapped by name: the same maps
    make_project(mapped, views)
    _with_maps(mapped, ("sCD_sales", "sR_sales", "SiC_sales"))
    named = load_project(mapped).plan
    assert {v.name: v.reads for v in named.views} == {v.name: v.reads for v in cycle.plan.views}
    model = Model()
    run_nights(cycle, root, BatchGenerator(44, model), model, 1)
    check_served(cycle, model, views, "b0001")
    store = sorted(model.tables["stores"])[0]
    night = {"stores": [("delete", store), ("insert", (store[0], "newtown", "east"))], "pos": []}
    write_changes(root, "b0002", night)
    cycle.run("b0002")
    model.apply(night)
    check_served(cycle, model, views, "b0002")
    assert cycle.lake.read_manifest("b0002").read("base", "pos").rows == 0
    cycle.close()


def test_the_plan_chooses_no_map_for_a_smaller_fact_table_a_large_map_or_a_view_set_to_delta():
    def plan(sizes: str, maintain=()):
        stats = tuple((k.strip(), int(v)) for k, v in (line.split("=") for line in sizes.splitlines()))
        return compile_project(SCHEMA_SQL, {f"{k}.sql": v for k, v in FIGURE_1.items()}, maintain=maintain,
                               statistics=stats)

    def mapped(p) -> set[str]:
        return {v.name for v in p.views if over_map(v)}

    assert mapped(plan(f"pos = {MAP_ROWS}\nstores = 100\nitems = 1000")) == {"sCD_sales", "sR_sales", "SiC_sales"}
    assert mapped(plan(f"pos = {MAP_ROWS - 1}\nstores = 100\nitems = 1000")) == set()
    # a store dimension of a million rows: sR_sales's map (by storeID) would hold them all, above 1/MAP_SHARE of pos
    assert mapped(plan(f"pos = {MAP_ROWS}\nstores = {MAP_ROWS // MAP_SHARE + 1}\nitems = 1000")) == set()
    delta = plan(f"pos = {MAP_ROWS}\nstores = 100\nitems = 1000", (("sR_sales", "delta"),))
    assert mapped(delta) == {"sCD_sales", "SiC_sales"} and delta.view("sR_sales").reads == ()
    assert 'sR_sales = "delta" keeps it over pos' in plan(f"pos = {MAP_ROWS}").view("sR_sales").reason


def test_a_view_over_a_map_joins_its_change_set_without_grouping_it_first():
    """Pre-aggregation (4.1.3) groups a fact's changes by the columns the view reads before its joins; a map's
    change set holds at most two rows of a map key (its row before and after), so a view whose pre-aggregation
    columns hold the map's key joins it as it is; a view over pos keeps it."""
    plan = compile_project(SCHEMA_SQL, {f"{k}.sql": v for k, v in FIGURE_1.items()},
                           maintain=(("SiC_sales", "map"), ("sCD_sales", "map")))
    options = Options()
    for name in ("SiC_sales", "sCD_sales"):
        view = plan.view(name)
        assert emit.preaggregation(view) and plan.schema.table(view.fact).view is not None
        assert preaggregation(plan, view, options) == (), name
    over_pos = plan.view("sR_sales")
    assert over_pos.fact == "pos" and preaggregation(plan, over_pos, options) == ("storeID",)
    assert preaggregation(plan, over_pos, Options(preaggregate=False)) == ()


def test_a_night_of_sales_only_recomputes_no_extreme_of_a_mapped_view_and_its_copy_follows(tmp_path, spark, quiet):
    """A night that deletes nothing and changes no dimension moves every map group's MIN down and MAX up
    only: the views kept over maps take LEAST/GREATEST of the old extreme and the summary-delta's, recompute
    no group (no exact MIN/MAX step), and their lake copies agree with the warehouse's tables. The next
    night, deleting the earliest sale the sales-only night added, recomputes it from the copy."""
    import datetime as dt
    import decimal

    from runtime.delta import read_table

    views = {k: VIEWS[k] for k in ("SiC_sales", "revenue")}
    root = make_project(tmp_path / "p", views)
    _with_maps(root, tuple(views))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    run_nights(cycle, root, BatchGenerator(43, model), model, 1)
    store, item = model.tables["pos"][0][:2]
    fresh = (max(s[0] for s in model.tables["stores"]), max(i[0] for i in model.tables["items"]))
    early = (store, item, dt.date(2025, 12, 1), 4, decimal.Decimal("0.01"))  # before every sale, cheaper than any
    sales = {"pos": [("insert", early), ("insert", (store, item, dt.date(2026, 3, 1), 1, decimal.Decimal("99.00"))),
                     ("insert", (store, item, None, 2, None)), ("insert", (*fresh, dt.date(2026, 1, 2), 5, None))]}
    def rows(table) -> list[dict]:
        return sorted(table.to_pylist(), key=lambda r: tuple((v is None, str(v)) for v in r.values()))

    for batch, night in (("b0002", sales), ("b0003", {"pos": [("delete", early)]})):
        write_changes(root, batch, night)
        cycle.run(batch)
        model.apply(night)
        check_served(cycle, model, views, batch)
        steps = {v: cycle.lake.read_manifest(batch).night.view(v).exact_minmax for v in views}
        assert all(e == "monotone" for e in steps.values()) == (batch == "b0002"), (batch, steps)
        for name in views:  # the copy the next night's C_i test reads its old extremes from
            view = cycle.plan.view(name)
            cycle.warehouse.export_storage(view, tmp_path / batch / name)
            stored = pq.read_table(tmp_path / batch / name)
            assert rows(read_table(cycle.lake.table_path(name)).select(stored.column_names)) == rows(stored), (batch, name)
    cycle.close()


def test_a_small_copy_merged_in_arrow_equals_sparks_merge(spark):
    """apply-base merges a small lake copy with the night's changed groups in Arrow, in the driver; on random
    copies and changed groups, keys NULL and NaN among them, it keeps exactly the rows Spark's query keeps."""
    import datetime as dt
    import math
    import random

    import pyarrow as pa

    from lattice.types import spark_type
    from spark_jobs.nested import copy_columns, next_copy, next_copy_rows

    view = compile_project("CREATE TABLE f (a DOUBLE, d DATE, s VARCHAR, x INTEGER);",
                           {"v.sql": "CREATE VIEW v AS SELECT a, d, s, COUNT(*) AS n, SUM(x) AS t FROM f GROUP BY a, d, s"}
                           ).view("v")
    cols = copy_columns(view)
    assert [c for c, _ in cols][:3] == ["a", "d", "s"] and len(cols) == 6, cols  # keys, _ns_count, COUNT(x), SUM(x)
    arrow = pa.schema([("a", pa.float64()), ("d", pa.date32()), ("s", pa.string())] + [(c, pa.int64()) for c, _ in cols[3:]])
    ddl = ", ".join(f"`{c}` {spark_type(t)}" for c, t in cols)
    r = random.Random(7)
    keys = [(a, d, s) for a in (None, math.nan, 0.0, 1.5) for d in (None, dt.date(2026, 1, 1)) for s in (None, "x", "")]

    def rows(n: int, counts: tuple[int, ...]) -> list[tuple]:
        return [(*k, r.choice(counts), r.randint(0, 3), r.randint(-5, 5)) for k in r.sample(keys, n)]

    def normal(rows_) -> list[tuple]:
        return sorted((tuple("NaN" if isinstance(v, float) and v != v else v for v in row) for row in rows_), key=repr)

    for _ in range(5):
        copy, updated = rows(12, (1, 2, 3)), rows(8, (0, 1, 4))  # count 0: a group that is gone
        got = next_copy_rows(view, pa.Table.from_pylist([dict(zip(arrow.names, x)) for x in copy], arrow),
                             pa.Table.from_pylist([dict(zip(arrow.names, x)) for x in updated], arrow))
        want = next_copy(spark, view, spark.createDataFrame(copy, ddl), spark.createDataFrame(updated, ddl)).collect()
        assert normal(tuple(d.values()) for d in got.to_pylist()) == normal(tuple(x) for x in want)


@pytest.mark.parametrize("aggregates", ["SUM(x) AS t, MIN(x) AS lo, MAX(y) AS hi, AVG(y) AS mean",
                                        "MEDIAN(y) AS m, COUNT(DISTINCT x) AS k, SUM(i) AS t"])
def test_a_small_copys_changed_groups_made_in_arrow_equal_sparks(spark, aggregates):
    """A small lake copy whose change set a later level reads has its changed groups' old and new rows made in the
    command (nested.update_rows); on random copies and summary-deltas (new groups, groups that go, lost extremes,
    NULL and NaN keys, NULL values, holistic and distinct counts) they are exactly the rows Spark's changed_rows and
    view_update give; a NaN under MAX leaves them to Spark."""
    import datetime as dt
    import math
    import random
    from decimal import Decimal

    import pyarrow as pa

    from lattice import emit
    from lattice.refresh import delta_columns
    from lattice.sql import to_dialect
    from lattice.types import spark_type
    from spark_jobs.driver_checks import arrow_type
    from spark_jobs.nested import copy_columns, update_rows

    view = compile_project("CREATE TABLE f (a DOUBLE, d DATE, s VARCHAR, x DECIMAL(10,2), y DOUBLE, i INTEGER);",
                           {"v.sql": f"CREATE VIEW v AS SELECT a, d, s, COUNT(*) AS n, {aggregates} FROM f "
                                     "GROUP BY a, d, s"}).view("v")
    cols, dcols = copy_columns(view), delta_columns(view)
    kinds = {s.kind for s in view.stored}
    assert kinds == ({"count_star", "count", "sum", "min", "max"} if "MIN" in aggregates
                     else {"count_star", "count", "sum", "holistic"}), view.stored

    def schema(columns):
        return pa.schema([(c, arrow_type(t)) for c, t in columns])

    def ddl(columns):
        return ", ".join(f"`{c}` {spark_type(t)}" for c, t in columns)

    r = random.Random(11)
    keys = [(a, d, s) for a in (None, math.nan, 0.0, 1.5) for d in (None, dt.date(2026, 1, 1)) for s in (None, "x", "é")]

    def value(c: str, t: str, count: int):
        if c == "_ns_count":
            return count
        if c.startswith("_ns_cnt"):
            return r.randint(-2, 3)
        if r.random() < 0.2:
            return None
        if t.startswith("DECIMAL"):
            return Decimal(r.randint(-999, 999)) / 100
        return float(r.randint(-9, 9)) if t == "DOUBLE" else r.randint(-9, 9)

    def normal(rows) -> list[tuple]:
        return sorted((tuple("NaN" if isinstance(v, float) and v != v else v for v in row) for row in rows), key=repr)

    made = 0
    for trial in range(8):
        old = r.sample(keys, 14)
        copy = [(*k, *[value(c, t, r.randint(1, 3)) for c, t in cols[3:]]) for k in old]
        changed = r.sample(old, 6) + r.sample([k for k in keys if k not in old], 3)  # 3 new groups
        counts = {k: row[3] for k, row in zip(old, copy)}
        sd = [(*k, *[value(c, t, r.choice((-counts.get(k, 0), 1, 2)) if k in counts else r.choice((0, 1, 2)))
                     for c, t in dcols[3:-1]], r.randint(0, 1)) for k in changed]
        nan = trial == 7 and "max" in kinds
        if nan:  # a NaN under MAX: Arrow's element-wise MAX skips it, Spark's GREATEST does not
            sd[0] = (*sd[0][:-2], math.nan, sd[0][-1])
        spark.createDataFrame(copy, ddl(cols)).createOrReplaceTempView("c0")
        spark.createDataFrame(sd, ddl(dcols)).createOrReplaceTempView("s0")
        want_touched = spark.sql(to_dialect(emit.changed_rows(view, "c0", "s0", True), "spark")).collect()
        want = spark.sql(to_dialect(emit.view_update(view, "c0", "s0"), "spark")).collect()
        got = update_rows(view, pa.Table.from_pylist([dict(zip(schema(cols).names, x)) for x in copy], schema(cols)),
                          pa.Table.from_pylist([dict(zip(schema(dcols).names, x)) for x in sd], schema(dcols)))
        if nan:
            assert got is None
            continue
        assert got is not None, trial
        touched, updated = got
        assert normal(tuple(d.values()) for d in touched.to_pylist()) == normal(tuple(x) for x in want_touched), trial
        assert updated.column_names == [c for c, _ in cols]
        assert normal(tuple(d.values()) for d in updated.to_pylist()) == normal(tuple(x) for x in want), trial
        made += 1
    assert made >= 7


def test_random_nights_over_maps_by_month_count_lost_extremes_in_the_delete_checks_pass(tmp_path, spark, quiet,
                                                                                          monkeypatch):
    """pos laid out by month and deleted from by position (the delete check's pass is the command's): that pass
    also counts, for the groups of a map whose earliest sale the night may delete (by the map's lake copy), the base
    rows a lost extreme's first pass needs, and that pass reads nothing more. Random nights with deletes over the
    maps equal recomputation from the model."""
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # a table this small would be written anew
    root = make_project(tmp_path / "p", VIEWS)
    _with_maps(root)
    partition_pos(root)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    # sales over five months: a lost extreme's month is one of several
    nights_equal_recomputation(cycle, root, VIEWS, 29, "pos by month, deleted from by position, ", nights=3, days=150)
    cycle.close()
