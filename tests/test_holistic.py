"""Holistic aggregates (paper 002): MEDIAN, PERCENTILE_CONT/DISC, MODE and user-defined
aggregates kept through an auxiliary view of value multiplicities, every changed group re-aggregated
from it, never from the base; DISTINCT that keys make redundant kept without one (paper 003).

Each night the served views must equal the views recomputed from scratch by an independent model
(DuckDB over Python lists, running the view SQL as written); the hand-written nights below also pin
the values the paper's cases turn on (even and odd counts, the last occurrence of a value deleted, a
group emptied and refilled, ties for the mode, NULL arguments, a store moving region)."""

from __future__ import annotations

import datetime as dt

import pytest

from conftest import BACKENDS
from harness import FIGURE_1, BatchGenerator, Model, check_served, make_project, run_nights, write_changes
from lattice.compile import compile_project
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import check_all
from nightshift.validate import ValidationFailed, validate_batch

VIEWS = {
    "item_median": "CREATE VIEW item_median AS SELECT itemID, MEDIAN(qty) AS med, "
                   "PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY qty) AS q1, "
                   "PERCENTILE_DISC(0.7) WITHIN GROUP (ORDER BY qty) AS p70, "
                   "MODE() WITHIN GROUP (ORDER BY qty) AS usual, COUNT(*) AS n, COUNT(DISTINCT qty) AS kinds "
                   "FROM pos GROUP BY itemID",
    "region_price": "CREATE VIEW region_price AS SELECT region, MEDIAN(CAST(price AS DOUBLE)) AS med_price, "
                    "PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY CAST(price AS DOUBLE)) AS mid_price, SUM(qty) AS q "
                    "FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY region",
    "overall": "CREATE VIEW overall AS SELECT MEDIAN(qty) AS med, MODE() WITHIN GROUP (ORDER BY qty) AS usual FROM pos",
    # user-defined aggregates (nightshift.toml [aggregates], AGGREGATES below)
    "item_spread": "CREATE VIEW item_spread AS SELECT itemID, trimmed_mean(qty) AS tm, iqr(qty) AS spread, "
                   "MEDIAN(qty) AS med, COUNT(*) AS n FROM pos GROUP BY itemID",
    # DISTINCT that keys make redundant (paper 003): no auxiliary view, the delta mode
    "keyed": "CREATE VIEW keyed AS SELECT itemID, COUNT(DISTINCT itemID) AS n, MAX(DISTINCT itemID) AS top, "
             "AVG(DISTINCT itemID) AS mean, COUNT(*) AS c FROM pos GROUP BY itemID",
    "region_stores": "CREATE VIEW region_stores AS SELECT region, COUNT(DISTINCT storeID) AS stores, "
                     "SUM(DISTINCT storeID) AS ids FROM stores GROUP BY region",
}
KEYED = {"keyed", "region_stores"}
HOLISTIC = set(VIEWS) - KEYED
# MIN/MAX through an auxiliary view ([views] SiC_sales = "auxiliary"): a deleted extreme is
# recomputed from the auxiliary view's lake copy, never from the base
VIEWS["SiC_sales"] = FIGURE_1["SiC_sales"]
# region_price never traded for a recompute: at this size a store moving region makes recompute the cheaper
# choice, and the nights below check the incremental path
# SiC_sales's MIN(date) goes through an auxiliary view by the plan's own choice (lattice/passes/choose_extremes.py):
# with these sizes its (storeID, category, date) values are ~365,000 rows against 10,000,000 of pos
SETTINGS = ('[views]\nregion_price = "incremental"\n'
            '[statistics]\npos = 10_000_000\nstores = 100\nitems = { rows = 1000, category = 10 }\n')

AGGREGATES = """
[aggregates]
# the mean of the values between the 10th and the 90th percentile of positions
trimmed_mean = "AVG(CASE WHEN i > 0.1 * n AND i <= 0.9 * n THEN x END)"
iqr = { sql = "PERCENTILE_CONT(0.75) WITHIN GROUP (ORDER BY x) - PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY x)", type = "DOUBLE" }
"""
# what the model recomputes for item_spread, written by hand (no engine knows trimmed_mean or iqr)
EXPECTED = {**VIEWS, "item_spread": (
    "CREATE VIEW item_spread AS WITH r AS (SELECT itemID, qty, ROW_NUMBER() OVER (PARTITION BY itemID ORDER BY qty) AS i, "
    "COUNT(*) OVER (PARTITION BY itemID) AS n FROM pos WHERE qty IS NOT NULL), "
    "t AS (SELECT itemID, AVG(CASE WHEN i > 0.1 * n AND i <= 0.9 * n THEN qty END) AS tm, "
    "QUANTILE_CONT(qty, 0.75) - QUANTILE_CONT(qty, 0.25) AS spread FROM r GROUP BY itemID) "
    "SELECT p.itemID, t.tm, t.spread, MEDIAN(p.qty) AS med, COUNT(*) AS n FROM pos p LEFT JOIN t ON t.itemID = p.itemID "
    "GROUP BY p.itemID, t.tm, t.spread")}


def _check(cycle: Cycle, model: Model, where: str) -> None:
    check_served(cycle, model, EXPECTED, where)


def _night(cycle: Cycle, root, model: Model, batch: str, changes: dict) -> None:
    write_changes(root, batch, changes)
    cycle.run(batch)
    model.apply(changes)
    _check(cycle, model, f"batch {batch}")


def _aggregates() -> tuple:
    import tomllib

    from lattice.ir import UserAggregate

    data = tomllib.loads(AGGREGATES)["aggregates"]
    return tuple(UserAggregate(n, v if isinstance(v, str) else v["sql"]) for n, v in data.items())


def test_holistic_aggregates_compile_to_the_auxiliary_mode():
    from harness import SCHEMA_SQL

    plan = compile_project(SCHEMA_SQL, {f"{n}.sql": sql for n, sql in VIEWS.items()}, aggregates=_aggregates())
    assert plan.view("keyed").keys[1].sql.startswith("CASE WHEN")  # COUNT(DISTINCT itemID): a scalar of the key
    assert plan.view("region_stores").stored_of("count", 1) is not None  # COUNT(DISTINCT storeID) = COUNT(storeID)
    for name in HOLISTIC:
        view = plan.view(name)
        assert view.mode == "auxiliary", (name, view.reason)
        assert view.has_holistic
    funcs = sorted(s.func for s in plan.view("item_median").stored if s.kind == "holistic")
    assert funcs == ["mode", "percentile_cont 0.25", "percentile_cont 0.5", "percentile_disc 0.7"]
    aux = plan.view(plan.view("region_price").reads[0])  # pos by store (not region: paper 003) and the argument
    assert [k.name for k in aux.keys][0] == "storeID" and aux.keys[1].sql == 'CAST("pos"."price" AS DOUBLE)'
    assert aux.mode == "delta" and aux.tables == ("pos",) and plan.view("region_price").dimensions == ("stores",)
    # two arguments: one auxiliary view keeps both, each argument's aggregates recomputed from it
    two = compile_project(SCHEMA_SQL, {"t.sql": "CREATE VIEW two_args AS SELECT itemID, MEDIAN(qty) AS m, "
                                                "MEDIAN(CAST(price AS DOUBLE)) AS p FROM pos GROUP BY itemID"})
    assert two.views[0].mode == "auxiliary" and len({s.arg for s in two.views[0].stored if s.kind == "holistic"}) == 2
    # what the auxiliary view cannot keep stays with recompute, with the reason
    other = {
        "two_args": "CREATE VIEW two_args AS SELECT itemID, MEDIAN(qty) AS m, AVG(price) AS p FROM pos GROUP BY itemID",
        "desc": "CREATE VIEW desc_p AS SELECT itemID, PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY qty DESC) AS p "
                "FROM pos GROUP BY itemID",
        "having": "CREATE VIEW having_m AS SELECT itemID, COUNT(*) AS n FROM pos GROUP BY itemID HAVING MEDIAN(qty) > 2",
    }
    plan = compile_project(SCHEMA_SQL, {f"{n}.sql": sql for n, sql in other.items()})
    assert {v.name: v.mode for v in plan.views} == {"two_args": "recompute", "desc_p": "recompute",
                                                   "having_m": "recompute"}
    assert "holistic" in plan.view("two_args").reason


def test_what_the_engines_disagree_on_is_refused_naming_the_fix():
    from harness import SCHEMA_SQL
    from lattice.errors import UnsupportedView

    with pytest.raises(UnsupportedView, match=r"usual\.sql: view usual, line 1: MODE\(qty\).*WITHIN GROUP \(ORDER BY x\)"):
        compile_project(SCHEMA_SQL, {"usual.sql": "CREATE VIEW usual AS SELECT itemID, MODE(qty) AS m FROM pos GROUP BY itemID"})


def test_a_quantile_of_a_decimal_has_the_warehouses_type():
    """DuckDB's MEDIAN of a DECIMAL(p,s) is a DECIMAL(p,s) (interpolated, truncated: lattice/warehouse_sql.py);
    PostgreSQL's PERCENTILE_CONT reads a NUMERIC as DOUBLE PRECISION and gives one."""
    from harness import SCHEMA_SQL

    sql = "CREATE VIEW mp AS SELECT itemID, {} AS m FROM pos GROUP BY itemID"
    for dialect, agg, want in [("duckdb", "MEDIAN(price)", "DECIMAL(8,2)"),
                               ("duckdb", "quantile_cont(price, 0.25)", "DECIMAL(8,2)"),
                               ("duckdb", "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY price * qty)", "DECIMAL(18,2)"),
                               ("postgres", "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY price)", "DOUBLE"),
                               ("postgres", "MEDIAN(price)", "DOUBLE")]:  # read as PostgreSQL's PERCENTILE_CONT(0.5)
        view = compile_project(SCHEMA_SQL, {"mp.sql": sql.format(agg)}, dialect=dialect).view("mp")
        assert view.mode == "auxiliary", (agg, view.reason)
        assert [s.type for s in view.stored if s.kind == "holistic"] == [want], (dialect, agg)


@pytest.mark.parametrize("backend", BACKENDS)
def test_holistic_views_equal_recomputation_night_after_night(tmp_path, spark, quiet, warehouse_url, backend):
    root = make_project(tmp_path / "p", VIEWS, url=warehouse_url(backend, "holistic"))
    (root / "nightshift.toml").write_text((root / "nightshift.toml").read_text() + SETTINGS + AGGREGATES)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert {v.name for v in cycle.plan.views if v.mode == "auxiliary"} == HOLISTIC | {"SiC_sales"}
    assert all(cycle.plan.view(v).mode == "delta" and "paper 003" in cycle.plan.view(v).reason for v in KEYED)
    assert {a.name for a in cycle.plan.auxiliary} == {cycle.plan.view(v).reads[0] for v in HOLISTIC | {"SiC_sales"}}
    model = Model()
    gen = BatchGenerator(11, model)
    run_nights(cycle, root, gen, model, 1)
    _check(cycle, model, "after the first load")

    # one item's quantities, night by night: odd count, even count, last occurrence of the mode's value
    # deleted, a NULL, emptied, refilled
    store = model.tables["stores"][0][0]
    item = max(r[0] for r in model.tables["items"]) + 1
    day = dt.date(2026, 1, 5)
    _night(cycle, root, model, "h0001", {"items": [("insert", (item, "new", 1.0))]})

    def sale(qty, price="1.50"):
        from decimal import Decimal
        return (store, item, day, qty, Decimal(price))

    rows = [sale(1), sale(5), sale(5), sale(9, "3.00"), sale(2)]
    _night(cycle, root, model, "h0002", {"pos": [("insert", r) for r in rows]})
    got = {r[0]: r for r in cycle.warehouse.read_view(cycle.plan.view("item_median"))}[item]
    # 1 2 5 5 9: median 5, q1 at position 1 -> 2, p70 at position ceil(3.5) = 4 -> 5, mode 5
    assert got == (item, 5.0, 2.0, 5, 5, 5, 4)
    _night(cycle, root, model, "h0003", {"pos": [("insert", sale(2)), ("insert", sale(None))]})
    got = {r[0]: r for r in cycle.warehouse.read_view(cycle.plan.view("item_median"))}[item]
    # 1 2 2 5 5 9 (NULL ignored): median (2+5)/2, q1 at 1.25 -> 2, p70 at ceil(4.2) = 5 -> 5, mode: 2 and 5
    # tie, the smaller wins
    assert got == (item, 3.5, 2.0, 5, 2, 7, 4)
    spread = {r[0]: r for r in cycle.warehouse.read_view(cycle.plan.view("item_spread"))}[item]
    # trimmed mean of positions 1..5 (i > 0.6, i <= 5.4): (1+2+2+5+5)/5; iqr: 5 (at 3.75) - 2 (at 1.25)
    assert spread == (item, 3.0, 3.0, 3.5, 7)
    _night(cycle, root, model, "h0004", {"pos": [("delete", sale(5)), ("delete", sale(5))]})  # value 5 leaves
    # a night of deletes: pos's base is scanned once, to check the deletes name rows; SiC_sales's MIN(date) of the
    # group that lost rows comes from its auxiliary view's copy (without [statistics]: a second scan of pos)
    manifest = cycle.lake.read_manifest("h0004")
    assert manifest.night.view("SiC_sales").exact_minmax and manifest.read("base", "pos").scans == 1
    assert manifest.read("copy", cycle.plan.view("SiC_sales").reads[0]).scans >= 1
    got = {r[0]: r for r in cycle.warehouse.read_view(cycle.plan.view("item_median"))}[item]
    assert got == (item, 2.0, 1.75, 2, 2, 5, 3)  # 1 2 2 9 (and a NULL): q1 at 0.75 -> 1 + 0.75 * (2 - 1)
    remaining = [sale(1), sale(9, "3.00"), sale(2), sale(2), sale(None)]
    _night(cycle, root, model, "h0005", {"pos": [("delete", r) for r in remaining]})
    assert item not in {r[0] for r in cycle.warehouse.read_view(cycle.plan.view("item_median"))}
    _night(cycle, root, model, "h0006", {"pos": [("insert", sale(None)), ("insert", sale(4))]})
    got = {r[0]: r for r in cycle.warehouse.read_view(cycle.plan.view("item_median"))}[item]
    assert got == (item, 4.0, 4.0, 4, 4, 2, 1)
    spread = {r[0]: r for r in cycle.warehouse.read_view(cycle.plan.view("item_spread"))}[item]
    assert spread == (item, None, 0.0, 4.0, 2)  # one value 4 (and a NULL): i = 1 > 0.9 * 1 is trimmed, no spread

    # a store moves to a city of another region: both regions' medians change without a fact row changing
    moved = next(r for r in model.tables["stores"] if r[0] == store)
    other = next(r[2] for r in model.tables["stores"] if r[2] != moved[2])
    _night(cycle, root, model, "h0007", {"stores": [("delete", moved), ("insert", (moved[0], "Moved City", other))]})
    for n in range(1, 2):  # a random night after the pinned ones (the suite budget: one)
        _night(cycle, root, model, f"r{n:04d}", gen.night())
    for batch in ("h0004", "h0007"):
        steps = {s.view: s for s in cycle.lake.read_manifest(batch).night.views}
        assert all(steps[v].mode == "delta" for v in HOLISTIC), [(v, steps[v].reason) for v in HOLISTIC
                                                                 if steps[v].mode != "delta"]
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []  # nightshift's own oracle agrees
    # every auxiliary view is no larger than the naive auxiliary data (CReaM unminimized: the view's joined base
    # rows, here every pos row), and smaller where values repeat within a group
    sizes = {a.name: cycle.lake.rows(a.name, cycle.lake.state()) for a in cycle.plan.auxiliary}
    assert all(0 < n <= len(model.tables["pos"]) for n in sizes.values()), (sizes, len(model.tables["pos"]))
    assert sizes[cycle.plan.view("overall").reads[0]] < len(model.tables["pos"]) / 4, sizes  # the distinct quantities
    last = sorted(p.name.split("=")[1] for p in (root / "lake" / "deltas").glob("batch_id=*"))[-1]
    assert validate_batch(load_project(root), last, sample=1000).success
    # the expectations gate recomputes holistic values its own way (DuckDB's QUANTILE over the expanded
    # auxiliary rows): a stored median off by one fails it
    view = cycle.plan.view("item_median")
    median = next(s.column for s in view.stored if s.func == "percentile_cont 0.5")
    with cycle.warehouse.engine.begin() as conn:
        conn.exec_driver_sql(f'UPDATE "{cycle.warehouse.storage_name(view)}" SET {median} = {median} + 1 '
                             f'WHERE itemID = {item}')
    with pytest.raises(ValidationFailed) as caught:
        validate_batch(load_project(root), last, sample=1000)
    assert {(f.view, f.check) for f in caught.value.report.failures} == {("item_median", "sampled_recompute")}
    cycle.close()


def test_user_defined_aggregates_are_checked_where_they_are_declared(tmp_path):
    from harness import SCHEMA_SQL
    from lattice.errors import ConfigError, UnsupportedView
    from lattice.ir import UserAggregate
    from nightshift.config import load_project

    def compile_with(*udas, views=None, maintain=()):
        views = views or {"v.sql": "CREATE VIEW v AS SELECT itemID, f(qty) AS t FROM pos GROUP BY itemID"}
        return compile_project(SCHEMA_SQL, views, maintain=maintain, aggregates=tuple(udas))

    with pytest.raises(ConfigError, match=r"\[aggregates\] f: sql reads qty; it may read only x"):
        compile_with(UserAggregate("f", "AVG(qty)"))
    with pytest.raises(ConfigError, match=r"\[aggregates\] f: sql has no aggregate"):
        compile_with(UserAggregate("f", "x * 2"))
    with pytest.raises(ConfigError, match=r"\[aggregates\] median: the name must be an identifier that is not a SQL"):
        compile_with(UserAggregate("median", "AVG(x)"))
    with pytest.raises(ConfigError, match=r"\[aggregates\] f: RAND\(\) gives a different value"):
        compile_with(UserAggregate("f", "AVG(x * RANDOM())"))
    assert compile_with(UserAggregate("f", "AVG(x)")).view("v").mode == "auxiliary"
    # a view the auxiliary mode cannot keep: nothing else evaluates f, so it is refused with the reason
    two = {"v.sql": "CREATE VIEW v AS SELECT itemID, f(qty) AS t, AVG(price) AS m FROM pos GROUP BY itemID"}
    with pytest.raises(UnsupportedView, match=r"v\.sql: view v: f\(\) is a user-defined aggregate .* the auxiliary "
                                              r"mode does not cover this view \(its DISTINCT, holistic"):
        compile_with(UserAggregate("f", "AVG(x)"), views=two)
    with pytest.raises(UnsupportedView, match=r"view v: f\(\) is a user-defined aggregate .* keeps it by recompute"):
        compile_with(UserAggregate("f", "AVG(x)"), maintain=(("v", "recompute"),))
    root = make_project(tmp_path / "p", {"v": "CREATE VIEW v AS SELECT itemID, COUNT(*) AS n FROM pos GROUP BY itemID"})
    (root / "nightshift.toml").write_text((root / "nightshift.toml").read_text() + '[aggregates]\nf = 3\n')
    with pytest.raises(ConfigError, match=r"nightshift\.toml: \[aggregates\] f must be \"<sql>\" or"):
        load_project(root)


def test_min_max_through_an_auxiliary_view_only_where_one_can_keep_it():
    from harness import SCHEMA_SQL
    from lattice.errors import UnsupportedView

    plan = compile_project(SCHEMA_SQL, {"SiC_sales.sql": FIGURE_1["SiC_sales"]}, maintain=(("SiC_sales", "auxiliary"),))
    view = plan.view("SiC_sales")
    aux = plan.view(view.reads[0])
    assert view.mode == "auxiliary" and "never from the base" in view.reason and "MIN(date)" in view.sql.replace('"', "")
    # the view's own groups (storeID, category) and the dates, with their multiplicities: small, but an item
    # changing category rewrites it (the price of reading it instead of pos)
    assert [k.name for k in aux.keys] == ["category", "date", "storeID"] and aux.fact == "pos"
    assert aux.dimensions == ("items",) and view.tables == (aux.name,)
    assert {v.name for v in plan.copied_views} == {"SiC_sales", aux.name}  # 000 5's C_i needs its extremes
    avg = "CREATE VIEW a AS SELECT storeID, AVG(qty) AS q, MIN(date) AS first_day FROM pos GROUP BY storeID"
    with pytest.raises(UnsupportedView, match=r'a\.sql: view a: nightshift\.toml \[views\] a = "auxiliary" keeps MIN/MAX'):
        compile_project(SCHEMA_SQL, {"a.sql": avg}, maintain=(("a", "auxiliary"),))


def test_the_plan_chooses_where_min_max_of_a_group_that_lost_rows_comes_from():
    """Issue 19, item 4: the auxiliary view of a view's MIN/MAX values where it is estimated at most a quarter of
    the fact table (lattice/passes/choose_extremes.py), the base otherwise; the reason gives both sizes."""
    from harness import SCHEMA_SQL
    from lattice.errors import ConfigError, NotIncremental

    files = {"SiC_sales.sql": FIGURE_1["SiC_sales"],
             "prices.sql": "CREATE VIEW prices AS SELECT storeID, itemID, date, MIN(price) AS low, COUNT(*) AS n "
                           "FROM pos GROUP BY storeID, itemID, date"}
    sizes = (("pos", 10_000_000), ("stores", 100), ("items", 1000), ("items.category", 10))

    def plan(statistics=(), maintain=()):
        return compile_project(SCHEMA_SQL, files, maintain=maintain, statistics=statistics)

    # the cost model's defaults (pos 1,000,000 rows, 1000 stores, a category a tenth of the items): stores x
    # categories x 365 days is more than pos itself, so the base
    default = plan().view("SiC_sales")
    assert default.mode == "delta" and default.fact == "pos" and not plan().auxiliary
    assert "read from the base pos" in default.reason and "more than 1/4 of it" in default.reason
    # declared sizes: 100 stores x 10 categories x 365 days = 365,000 rows against 10,000,000
    sized = plan(sizes)
    view = sized.view("SiC_sales")
    assert view.mode == "auxiliary" and view.maintain == "auto" and [a.name for a in sized.auxiliary] == list(view.reads)
    assert "never from the base" in view.reason and "~365,000 rows" in view.reason and "10,000,000 of pos" in view.reason
    assert [k.name for k in sized.view(view.reads[0]).keys] == ["category", "date", "storeID"]
    # a minimum per (store, item, day): its values are as many as pos's rows, so the base even at that size
    prices = sized.view("prices")
    assert prices.mode == "delta" and "read from the base pos" in prices.reason
    # "incremental" (never recompute) leaves the route to the plan, "delta" keeps paper 001's delta mode alone,
    # reading the base; the sizes are part of the plan's fingerprint
    assert plan(sizes, maintain=(("SiC_sales", "incremental"),)).view("SiC_sales").mode == "auxiliary"
    kept = plan(sizes, maintain=(("SiC_sales", "delta"),)).view("SiC_sales")
    assert kept.mode == "delta" and kept.maintain == "delta" and '"delta" keeps paper 001' in kept.reason
    with pytest.raises(NotIncremental, match=r'\[views\] item_median = "delta" keeps paper 001\'s delta mode only'):
        compile_project(SCHEMA_SQL, {"m.sql": VIEWS["item_median"]}, maintain=(("item_median", "delta"),))
    assert plan(sizes).fingerprint != plan().fingerprint != plan(sizes[:1]).fingerprint
    with pytest.raises(ConfigError, match=r"\[statistics\] shops = 5: no table shops in the schema"):
        plan((("shops", 5),))
    with pytest.raises(ConfigError, match=r"\[statistics\] items.colour = 5: table items has no column colour"):
        plan((("items.colour", 5),))
    with pytest.raises(ConfigError, match=r"\[statistics\] pos = 0: a positive whole number"):
        plan((("pos", 0),))
