"""The Great Expectations gate: real GX 1.x, a real DuckDB warehouse file, no mocks.

One project runs two nights through the cycle (Spark once, module-scoped); each test validates a
copy of it, after corrupting the warehouse in one way, and expects exactly the matching checks to
fail with a message that names the summary table, the check and the batch and points at the data
docs, which must show the failing expectation.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from harness import EXTENDED, FIGURE_1, make_project, write_changes
from lattice.dlattice import lattice_shape
from nightshift.errors import BatchOrderError
from nightshift import expectations as ex
from nightshift.config import load_project
from nightshift.cycle import Cycle
from runtime.lake import Lake
from nightshift.validate import ValidationFailed, chosen_parents, validate_batch

BATCH = "b0001"

# Figure 1 plus views that roll up along the lattice without a dimension table:
# sD_sales (date) from sCD_sales (city, date); sS_sales (storeID, MIN(date)) from SiC_sales (storeID, category).
VIEWS = {
    **FIGURE_1,
    "avg_price": EXTENDED["avg_price"],
    "sD_sales": "CREATE VIEW sD_sales AS SELECT date, COUNT(*) AS n, SUM(qty) AS total FROM pos GROUP BY date",
    "sS_sales": "CREATE VIEW sS_sales AS SELECT storeID, COUNT(*) AS n, MIN(date) AS first_sale, SUM(qty) AS q "
                "FROM pos GROUP BY storeID",
}


def d(day: int) -> dt.date:
    return dt.date(2026, 1, day)


def sale(store, item, day, qty, price):
    return (store, item, day, qty, None if price is None else Decimal(price))


INITIAL = {
    "stores": [("insert", r) for r in [(1, "springfield", "north"), (2, "shelbyville", "north"), (3, None, "south")]],
    "items": [("insert", r) for r in [(1, "c0", 1.5), (2, "c1", 2.0), (3, None, None)]],
    "pos": [("insert", sale(*r)) for r in [
        (1, 1, d(1), 2, "1.00"), (1, 1, d(1), 3, "1.50"), (1, 2, d(2), 1, None), (1, 2, d(3), None, "2.00"),
        (1, 3, d(1), 4, "0.50"), (2, 1, d(2), 5, "1.00"), (2, 2, d(2), 1, "3.00"), (2, 3, None, 2, "2.50"),
        (3, 1, d(3), 6, "1.25"), (3, 2, d(4), None, None), (3, 3, d(4), 1, "4.00"), (2, 2, d(5), 2, "3.00"),
    ]],
}
# The night deletes MIN(date) rows: SiC_sales (1, c1) goes d2 -> d3, (3, c0) d3 -> d5 (inserted tonight),
# sS_sales store 3 d3 -> d4; and MAX(qty) rows of avg_price items 1 and 3; one SID_sales group goes.
NIGHT = {
    "pos": [("delete", sale(1, 2, d(2), 1, None)), ("delete", sale(3, 3, d(4), 1, "4.00")),
            ("delete", sale(3, 1, d(3), 6, "1.25")), ("insert", sale(3, 1, d(5), 7, "2.00")),
            ("insert", sale(1, 1, d(1), 2, "1.00")), ("insert", sale(2, 1, d(6), 1, "1.00"))],
}


@pytest.fixture(scope="module")
def night(tmp_path_factory, spark_session):
    root = make_project(tmp_path_factory.mktemp("validate") / "p", VIEWS, maintain="incremental")  # the delta mode every night
    cycle = Cycle(load_project(root), spark=spark_session, progress=lambda _: None)
    for batch, changes in (("b0000", INITIAL), (BATCH, NIGHT)):
        write_changes(root, batch, changes)
        cycle.run(batch)
    cycle.close()
    return root


@pytest.fixture
def project(night, tmp_path):
    return Path(shutil.copytree(night, tmp_path / "p"))


def corrupt(root: Path, sql: str) -> None:
    con = duckdb.connect(str(root / "warehouse.duckdb"))
    con.execute(sql)
    con.close()


def ledger_row(root: Path, batch: str):
    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute("SELECT validated_at, stats FROM ns_ledger WHERE batch_id = ?", [batch]).fetchone()
    finally:
        con.close()


# ---------------------------------------------------------------- the suites come from the plan


def test_rollup_checks_follow_the_lattice():
    """Rollup consistency covers every cover edge of the D-lattice between two summary tables,
    dimension joins included (Figure 3: sCD_sales ≺^stores SID_sales, SiC_sales ≺^items SID_sales,
    sR_sales ≺^stores SiC_sales, and sR_sales ≺ sCD_sales through the declared city -> region), plus
    the parents propagate chose."""
    from lattice import compile_project
    from lattice.ir import FunctionalDependency
    from harness import SCHEMA_SQL

    def plan(views):
        return compile_project(SCHEMA_SQL, {f"sql/summaries/{n}.sql": s for n, s in views.items()},
                               (FunctionalDependency("stores", ("city",), ("region",)),))

    def pairs(rollups):
        return {(r.child.name, r.parent.name): r.dimensions for r in rollups}

    assert pairs(ex.rollups(plan(FIGURE_1), lattice_shape(plan(FIGURE_1)))) == {
        ("sCD_sales", "SID_sales"): {"stores": ("storeID", "city")},
        ("SiC_sales", "SID_sales"): {"items": ("itemID", "category")},
        ("sR_sales", "sCD_sales"): {"stores": ("city", "region")},
        ("sR_sales", "SiC_sales"): {"stores": ("storeID", "region")},
    }
    # sD_sales(date) and sS_sales(storeID) sit below sCD_sales and SiC_sales; sS_sales now lies between
    # SiC_sales and sR_sales; SID_sales -> sD_sales is not a cover edge
    assert pairs(ex.rollups(plan(VIEWS), lattice_shape(plan(VIEWS)))) == {
        ("sCD_sales", "SID_sales"): {"stores": ("storeID", "city")},
        ("SiC_sales", "SID_sales"): {"items": ("itemID", "category")},
        ("sR_sales", "sCD_sales"): {"stores": ("city", "region")},
        ("sR_sales", "sS_sales"): {"stores": ("storeID", "region")},
        ("sD_sales", "sCD_sales"): {},
        ("sS_sales", "SiC_sales"): {},
    }
    # the parent propagate chose tonight is checked too, if it is a lattice edge between views
    chosen = pairs(ex.rollups(plan(VIEWS), lattice_shape(plan(VIEWS)), chosen=[("sD_sales", "SID_sales"), ("SID_sales", "sR_sales"), ("sR_sales", "Δpos")]))
    assert set(chosen) - set(pairs(ex.rollups(plan(VIEWS), lattice_shape(plan(VIEWS))))) == {("sD_sales", "SID_sales")}
    # a different filter is a different fact subset: no edge
    filtered = {**VIEWS, "sD_sales": VIEWS["sD_sales"].replace("FROM pos", "FROM pos WHERE qty > 1")}
    assert not any("sD_sales" in pair for pair in pairs(ex.rollups(plan(filtered), lattice_shape(plan(filtered)))))


def test_clean_night_passes_every_expectation(project):
    report = validate_batch(load_project(project), BATCH)
    assert report.success and report.failures == () and report.warnings == ()
    plan = load_project(project).plan
    # tonight propagate derived sd_sR_sales from sd_SiC_sales (not a cover edge: sS_sales lies between):
    # checked as well
    chosen = chosen_parents(Lake(project / "lake").read_manifest(BATCH))
    assert ("sR_sales", "SiC_sales") in chosen
    specs = ex.plan_suites(plan, ex.default_ident, "duckdb", ex.rollups(plan, lattice_shape(plan), chosen))
    assert report.expectations == sum(len(s.suite.expectations) for s in specs) == 50
    checks = {e.meta["nightshift"]["check"] for s in specs for e in s.suite.expectations}
    assert checks == {"unique_groups", "count_star_positive", "count_within_count_star", "null_iff_count_zero",
                      "avg_is_sum_over_count", "rollup_of_SID_sales", "rollup_of_sCD_sales", "rollup_of_SiC_sales",
                      "rollup_of_sS_sales", "row_count_vs_previous", "sampled_recompute"}
    # every group of these tiny tables is sampled, plus the groups that lost MIN/MAX rows tonight:
    # SiC_sales keeps 8 groups; (3, NULL) lost its only row and must be absent on both sides
    assert report.sampled["SiC_sales"] == 9
    # the suites are stored as JSON under the project, two per summary table
    stored = sorted(p.name for p in (project / "gx" / "expectations").glob("*.json"))
    assert stored == sorted(f"nightshift.{v}{s}.json" for v in VIEWS for s in ("", ".recompute"))
    assert (project / "gx" / "data_docs" / "index.html").is_file()
    validated_at, stats = ledger_row(project, BATCH)
    assert validated_at is not None and '"success": true' in stats


def test_min_max_deletion_groups_are_always_recomputed(project):
    """With no random sample at all, the groups that lost rows under MIN/MAX are still checked."""
    report = validate_batch(load_project(project), BATCH, sample=0)
    assert report.success
    assert report.sampled == {"SID_sales": 0, "sCD_sales": 0, "sD_sales": 0, "sR_sales": 0,
                              "SiC_sales": 3, "sS_sales": 2, "avg_price": 3}


# ---------------------------------------------------------------- corruptions


CORRUPTIONS = {
    # name: (SQL, sample, checks that must fail, views any failure may name). A rollup check names the
    # child table: a wrong parent shows up in each child derived from it (tonight sR_sales came from
    # SiC_sales: the manifest's chosen parent is checked besides the lattice's cover edges)
    "sum_off_by_one_in_a_leaf": (
        "UPDATE \"sD_sales__ns\" SET _ns_sum_1 = _ns_sum_1 + 1 WHERE date = DATE '2026-01-02'", None,
        {("sD_sales", "rollup_of_sCD_sales"), ("sD_sales", "sampled_recompute")},
        {"sD_sales"}),
    "min_wrong_after_a_deletion": (  # the stale MIN of a group that lost its earliest sale tonight
        "UPDATE \"SiC_sales__ns\" SET _ns_min_1 = DATE '2026-01-03' WHERE \"storeID\" = 3 AND category = 'c0'", 0,
        {("SiC_sales", "sampled_recompute"), ("SiC_sales", "rollup_of_SID_sales"), ("sS_sales", "rollup_of_SiC_sales")},
        {"SiC_sales", "sS_sales"}),
    "duplicated_group": (  # NULL city: the check must group NULLs together
        "INSERT INTO \"sCD_sales__ns\" SELECT * FROM \"sCD_sales__ns\" WHERE city IS NULL AND date = DATE '2026-01-04'",
        None, {("sCD_sales", "unique_groups"), ("sCD_sales", "sampled_recompute"), ("sCD_sales", "rollup_of_SID_sales"),
               ("sD_sales", "rollup_of_sCD_sales"), ("sR_sales", "rollup_of_sCD_sales")},
        {"sCD_sales", "sD_sales", "sR_sales"}),
    "missing_group": (
        "DELETE FROM \"sCD_sales__ns\" WHERE city = 'shelbyville' AND date = DATE '2026-01-06'", None,
        {("sCD_sales", "sampled_recompute"), ("sCD_sales", "rollup_of_SID_sales"), ("sD_sales", "rollup_of_sCD_sales"),
         ("sR_sales", "rollup_of_sCD_sales")}, {"sCD_sales", "sD_sales", "sR_sales"}),
    "hidden_count_of_zero": (
        "UPDATE \"sR_sales__ns\" SET _ns_count = 0 WHERE region = 'south'", None,
        {("sR_sales", "count_star_positive"), ("sR_sales", "count_within_count_star"), ("sR_sales", "sampled_recompute"),
         ("sR_sales", "rollup_of_sCD_sales"), ("sR_sales", "rollup_of_sS_sales"), ("sR_sales", "rollup_of_SiC_sales")},
        {"sR_sales"}),
    "sum_not_null_at_count_zero": (
        "UPDATE \"SID_sales__ns\" SET _ns_sum_1 = 0 WHERE _ns_cnt_1 = 0", None,
        {("SID_sales", "null_iff_count_zero"), ("SID_sales", "sampled_recompute"), ("SiC_sales", "rollup_of_SID_sales"),
         ("sCD_sales", "rollup_of_SID_sales")},
        {"SID_sales", "SiC_sales", "sCD_sales"}),
    "avg_served_as_sum_over_count_star": (  # the classic bug: AVG over COUNT(*) instead of COUNT(e)
        "CREATE OR REPLACE VIEW avg_price AS SELECT \"itemID\", CAST(_ns_sum_1 AS DOUBLE) / _ns_count AS avg_price, "
        "_ns_cnt_1 AS priced, _ns_max_2 AS max_qty FROM avg_price__ns", None,
        {("avg_price", "avg_is_sum_over_count")}, {"avg_price"}),
    # a region total off by one while every store's and every city's row is right: only the rollups
    # through the stores dimension see it (no random sample; sR_sales has no MIN/MAX to resample)
    "region_total_off_through_a_dimension": (
        "UPDATE \"sR_sales__ns\" SET _ns_sum_1 = _ns_sum_1 + 1 WHERE region = 'north'", 0,
        {("sR_sales", "rollup_of_sCD_sales"), ("sR_sales", "rollup_of_sS_sales"), ("sR_sales", "rollup_of_SiC_sales")},
        {"sR_sales"}),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_corruption_fails_the_matching_expectation(project, case):
    sql, sample, must_fail, may_name = CORRUPTIONS[case]
    corrupt(project, sql)
    with pytest.raises(ValidationFailed) as caught:
        validate_batch(load_project(project), BATCH, sample=sample)
    report = caught.value.report
    failed = {(f.view, f.check) for f in report.failures}
    assert failed == must_fail, report.message()
    assert {f.view for f in report.failures} <= may_name
    message = str(caught.value)
    assert "the night stays unpublished" in message
    for f in report.failures:
        line = next(line for line in message.splitlines() if f"check {f.check} " in line and f"summary table {f.view} " in line)
        assert line.startswith(f"batch {BATCH}: summary table {f.view} ({f.view}__ns): check {f.check} failed (critical)")
        assert "data docs: file://" in line
        page = Path(f.docs.removeprefix("file://"))
        html = page.read_text()  # the data docs page of the failing suite shows the failing expectation
        assert f"{f.view}__ns: {f.check}:" in html and "Failed" in html and BATCH in html
    assert (project / "gx" / "data_docs" / "index.html").is_file()
    validated_at, stats = ledger_row(project, BATCH)
    assert validated_at is None and '"success": false' in stats


def test_warnings_are_reported_and_do_not_block(project):
    toml = project / "nightshift.toml"
    toml.write_text(toml.read_text() + "[validate]\nrow_count_tolerance = 0\n")
    report = validate_batch(load_project(project), BATCH)
    assert report.success
    # tonight sD_sales gained a day (2026-01-06); sR_sales kept its two regions
    warned = {w.view for w in report.warnings}
    assert "sD_sales" in warned and "sR_sales" not in warned
    assert all(w.severity == "warning" and w.check == "row_count_vs_previous" for w in report.warnings)
    assert ledger_row(project, BATCH)[0] is not None


def test_only_the_current_applied_night_is_validated(project):
    with pytest.raises(BatchOrderError, match="moved on to batch b0001"):
        validate_batch(load_project(project), "b0000")
    write_changes(project, "b0002", {"pos": []})
    with pytest.raises(BatchOrderError, match="b0002 is not refreshed yet"):
        validate_batch(load_project(project), "b0002")


def test_postgresql_warehouse(project, pg_schemas):
    """The same suites over PostgreSQL (names folded to lower case): the night's summary tables are
    loaded into a fresh schema with materialize, then validated, then corrupted."""
    import sqlalchemy as sa

    from warehouse.store import Warehouse

    url = pg_schemas("validate")
    plan = load_project(project).plan
    con = duckdb.connect(str(project / "warehouse.duckdb"))
    dirs = {}
    for v in plan.views:
        dirs[v.name] = project / "export" / v.name
        dirs[v.name].mkdir(parents=True)
        cols = ", ".join(f'"{c}"' for c in [k.name for k in v.keys] + [s.column for s in v.stored])
        con.execute(f"COPY (SELECT {cols} FROM \"{v.storage_table}\") TO '{dirs[v.name]}/part-0.parquet' (FORMAT parquet)")
    con.close()
    toml = project / "nightshift.toml"
    toml.write_text(toml.read_text().replace("duckdb:///warehouse.duckdb", url))
    Warehouse(url, project).materialize(plan, dirs, BATCH, {"loaded_from": "duckdb"})
    assert validate_batch(load_project(project), BATCH).success
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as c:
        c.exec_driver_sql("UPDATE sic_sales__ns SET _ns_min_1 = DATE '2026-01-03' WHERE storeid = 3 AND category = 'c0'")
        c.exec_driver_sql("UPDATE sr_sales__ns SET _ns_count = 0 WHERE region = 'south'")
        # north's total off while every store and city row is right: only the rollups through stores see it
        c.exec_driver_sql("UPDATE sr_sales__ns SET _ns_sum_1 = _ns_sum_1 + 1 WHERE region = 'north'")
        validated = c.exec_driver_sql("SELECT validated_at FROM ns_ledger ORDER BY seq DESC LIMIT 1").scalar()
    assert validated is not None
    with pytest.raises(ValidationFailed) as caught:
        validate_batch(load_project(project), BATCH, sample=0)
    failures = {(f.view, f.check): f for f in caught.value.report.failures}
    assert set(failures) == {
        ("SiC_sales", "sampled_recompute"), ("SiC_sales", "rollup_of_SID_sales"), ("sS_sales", "rollup_of_SiC_sales"),
        ("sR_sales", "count_star_positive"), ("sR_sales", "count_within_count_star"),
        ("sR_sales", "rollup_of_sCD_sales"), ("sR_sales", "rollup_of_sS_sales"), ("sR_sales", "rollup_of_SiC_sales")}
    for check in ("rollup_of_sCD_sales", "rollup_of_sS_sales"):
        f = failures[("sR_sales", check)]
        assert f.observed == 2 and {r["region"] for r in f.examples} == {"north", "south"}
        assert f"batch {BATCH}: summary table sR_sales (sR_sales__ns): check {check} failed" in str(caught.value)
    with engine.begin() as c:
        assert c.exec_driver_sql("SELECT validated_at FROM ns_ledger ORDER BY seq DESC LIMIT 1").scalar() is None
    engine.dispose()


# ---------------------------------------------------------------- the command


def test_cli_validate_exit_codes(project, capsys):
    """Also: gx/validations and the data docs keep only the newest [validate] keep_results runs."""
    from nightshift.cli import main

    toml = project / "nightshift.toml"
    toml.write_text(toml.read_text() + "[validate]\nkeep_results = 1\n")
    assert main(["publish", "--project", str(project), "--batch", BATCH]) == 1  # publish follows validation only
    assert f"publish {BATCH}: batch {BATCH} has not passed validation" in capsys.readouterr().err
    assert main(["validate", "--project", str(project), "--batch", BATCH, "--recompute"]) == 0
    out = capsys.readouterr().out
    assert f"validated batch {BATCH}" in out and "data docs:" in out and "ok: 7 summary table(s)" in out
    assert main(["publish", "--project", str(project), "--batch", BATCH]) == 0
    assert f"publish {BATCH}: done" in capsys.readouterr().out
    assert main(["publish", "--project", str(project), "--batch", BATCH]) == 0  # a rerun keeps the first stamp
    assert f"publish {BATCH}: skipped (batch {BATCH} was published at" in capsys.readouterr().out
    assert main(["status", "--project", str(project)]) == 0
    assert re.search(rf"last refresh \({BATCH}\): validated \d{{4}}-.*; published \d{{4}}-", capsys.readouterr().out)
    first = {p.parent.name for p in (project / "gx" / "validations").rglob("*.json")}
    assert len(first) == 1
    corrupt(project, "UPDATE \"sR_sales__ns\" SET _ns_count = 0 WHERE region = 'south'")
    assert main(["validate", "--project", str(project), "--batch", BATCH]) == 1
    err = capsys.readouterr().err
    assert f"batch {BATCH}: summary table sR_sales (sR_sales__ns): check count_star_positive failed" in err
    assert "data docs: file://" in err
    # the first run's results and pages are gone; the failing run's page shows the failing check
    runs = {p.parent.name for p in (project / "gx" / "validations").rglob("*.json")}
    pages = {p.parent.name for p in (project / "gx" / "data_docs" / "validations").rglob("*.html")}
    assert len(runs) == 1 and runs == pages and runs != first
    index = (project / "gx" / "data_docs" / "index.html").read_text()
    assert first.pop() not in index and runs.pop() in index
    page = next((project / "gx" / "data_docs" / "validations").rglob("warehouse-nightshift.sR_sales.html")).read_text()
    assert "sR_sales__ns: count_star_positive:" in page and "Failed" in page
