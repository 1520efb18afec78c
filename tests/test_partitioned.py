"""A partitioned lake base: `[lake] partition_by = { pos = "date" }` lays pos's Delta table
out by month; apply-base's commit touches only the months a batch touches (deletes as deletion vectors on
their files, inserts as new files; every other month's files stay as they are), and the delete check reads
only the months of the deleted rows, measured by the manifest's rows read. Every view stays equal to recomputation from the model; a bad delete is still
refused; switching the layout on and off mid-life keeps the lake readable."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pytest

from harness import EXTENDED, FIGURE_1, BatchGenerator, Model, check_served, make_project, nights_equal_recomputation, \
    partition_pos, write_changes
from nightshift.cli import main
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import BadChangeBatch, ConfigError, InjectedCrash
from runtime.lake import PART, delta_snapshot
from spark_jobs.changes import read_table

NO_MINMAX = {k: v for k, v in FIGURE_1.items() if k != "SiC_sales"}


def _sale(store: int, item: int, day: dt.date | None, qty: int) -> tuple:
    return (store, item, day, qty, Decimal("1.50"))


def _month_rows(cycle, spark) -> dict:
    """Rows of pos per month at the version the lake's state records (deletion vectors applied)."""
    df = read_table(spark, cycle.lake, "pos", cycle.lake.state())
    return {r[0]: r[1] for r in df.groupBy(PART).count().collect()}


def _files(cycle) -> dict:
    """month -> {(data file, its deletion vector or None)} of pos's live files at the recorded version."""
    _, files = delta_snapshot(cycle.lake.table_path("pos"), cycle.lake.state().version("pos"))
    out: dict = {}
    for path, add in files.items():
        dv = add.get("deletionVector")
        out.setdefault(add["partitionValues"][PART], set()).add((path, dv and dv.get("pathOrInlineDv")))
    return out


def test_a_night_rewrites_and_checks_only_the_months_it_touches(tmp_path, spark, quiet, monkeypatch):
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # a table this small would be written anew
    root = make_project(tmp_path / "p", NO_MINMAX)
    partition_pos(root)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    initial = {"stores": [("insert", (1, "springfield", "north")), ("insert", (2, "ogdenville", "south"))],
               "items": [("insert", (1, "c0", 1.0)), ("insert", (2, "c1", 2.0))],
               "pos": [("insert", _sale(1 + k % 2, 1 + k % 3 // 2, dt.date(2026, month, 1 + k % 27), k % 5))
                       for month in (1, 2, 3) for k in range(10 * month)]
               + [("insert", _sale(1, 1, None, 7)), ("insert", _sale(2, 2, None, 8))]}
    write_changes(root, "b0000", initial)
    cycle.run("b0000")
    model.apply(initial)
    assert _month_rows(cycle, spark) == {"2026-01": 10, "2026-02": 20, "2026-03": 30, None: 2}
    months = _files(cycle)
    check_served(cycle, model, NO_MINMAX, "b0000")

    # a night that deletes two February sales and inserts a March one: the delete check reads February
    # only; apply-base's one commit marks the two rows deleted in February's file and adds a March file
    feb = [r for r in model.tables["pos"] if r[2] is not None and r[2].month == 2][:2]
    night = {"pos": [("delete", r) for r in feb] + [("insert", _sale(2, 1, dt.date(2026, 3, 9), 4))]}
    write_changes(root, "b0001", night)
    cycle.propagate("b0001")
    manifest = cycle.lake.read_manifest("b0001")
    assert manifest.read("base", "pos").rows == 20, manifest.rows_read  # February's rows, not the 62 of pos
    cycle.refresh("b0001")
    result = cycle.apply_base("b0001")
    model.apply(night)
    assert result.details["tables"]["pos"]["months"] == 2
    second = _files(cycle)
    assert second["2026-01"] == months["2026-01"] and second[None] == months[None]  # untouched
    assert {p for p, _ in second["2026-02"]} == {p for p, _ in months["2026-02"]}  # not rewritten ...
    assert all(dv for _, dv in second["2026-02"] - months["2026-02"]) and second["2026-02"] != months["2026-02"]
    assert months["2026-03"] < second["2026-03"]  # ... and the insert is a new file beside March's
    assert _month_rows(cycle, spark) == {"2026-01": 10, "2026-02": 18, "2026-03": 31, None: 2}
    check_served(cycle, model, NO_MINMAX, "b0001")

    # a crash after pos's commit, before the lake's state record: the rerun commits nothing twice
    night = {"pos": [("delete", _sale(1, 1, None, 7)), ("insert", _sale(1, 2, dt.date(2026, 4, 2), 1))]}
    write_changes(root, "b0002", night)
    cycle.propagate("b0002")
    cycle.refresh("b0002")
    os.environ["NIGHTSHIFT_CRASH_AT"] = "apply-base:after_table:pos"
    try:
        with pytest.raises(InjectedCrash):
            cycle.apply_base("b0002")
    finally:
        del os.environ["NIGHTSHIFT_CRASH_AT"]
    assert cycle.lake.state().last == "b0001"
    committed = spark.sql(f"DESCRIBE HISTORY delta.`{cycle.lake.table_path('pos')}`").count()
    cycle.apply_base("b0002")
    model.apply(night)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{cycle.lake.table_path('pos')}`").count() == committed
    assert cycle.lake.state().version("pos") == committed - 1
    assert _month_rows(cycle, spark) == {"2026-01": 10, "2026-02": 18, "2026-03": 31, "2026-04": 1, None: 1}
    assert _files(cycle)["2026-02"] == second["2026-02"]
    check_served(cycle, model, NO_MINMAX, "b0002")

    # a delete of a row that is not there is refused, in a month the base has and in one it has not
    for bad in (_sale(1, 1, dt.date(2026, 1, 1), 99), _sale(1, 1, dt.date(2025, 12, 31), 1)):
        write_changes(root, "b0003", {"pos": [("delete", bad)]})
        with pytest.raises(BadChangeBatch, match="delete of a row that does not exist"):
            cycle.propagate("b0003")
    cycle.close()


def test_random_nights_stay_exact_while_the_layout_is_switched_on_and_off(tmp_path, spark, quiet):
    views = {**FIGURE_1, **EXTENDED}
    root = make_project(tmp_path / "p", views)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    gen = BatchGenerator(31, model)
    for n in range(6):
        if n in (2, 4):  # on after two unpartitioned nights (the next apply-base lays every month out), then off
            cycle.close()
            partition_pos(root, on=n == 2)
            cycle = Cycle(load_project(root), spark=spark, progress=quiet)
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, f"b{n:04d}", changes)
        cycle.run(f"b{n:04d}")
        model.apply(changes)
        check_served(cycle, model, views, f"b{n:04d}")
        laid_out = PART in read_table(spark, cycle.lake, "pos", cycle.lake.state()).columns
        assert laid_out == (n in (2, 3)) or not any(op for op, _ in changes.get("pos", [])), n
    cycle.close()


FIRST_LAST = {
    "first_sale": "CREATE VIEW first_sale AS SELECT storeID, COUNT(*) AS n, MIN(date) AS first FROM pos GROUP BY storeID",
    "last_sale": "CREATE VIEW last_sale AS SELECT storeID, COUNT(*) AS n, MAX(date) AS last FROM pos GROUP BY storeID",
}


def test_a_lost_earliest_or_latest_sale_is_found_in_its_month_first(tmp_path, spark, quiet, monkeypatch):
    """With the base laid out by the months of the date a view takes the MIN (MAX) of, a night deleting a
    store's earliest sale reads the month it was in for the new earliest one, and every month only when that
    month has no other sale of the store; the extremes stay exact either way."""
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # deletes by position: the delete check's pass is the command's
    root = make_project(tmp_path / "p", FIRST_LAST, maintain="incremental")
    partition_pos(root)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    sales = {1: [dt.date(2026, 1, 5), dt.date(2026, 1, 20), dt.date(2026, 3, 3), dt.date(2026, 6, 10)],
             2: [dt.date(2026, 1, 7), dt.date(2026, 2, 10), dt.date(2026, 4, 4)],
             3: [dt.date(2026, 2, 2), dt.date(2026, 2, 9)],
             5: [dt.date(2026, 1, 3), dt.date(2026, 3, 8)]}
    filler = [_sale(4, 1, dt.date(2026, month, 15), k) for month in range(1, 13) for k in range(20)]
    initial = {"stores": [("insert", (s, f"city{s}", "north")) for s in range(1, 6)],
               "items": [("insert", (1, "c0", 1.0))],
               "pos": [("insert", _sale(s, 1, d, 1)) for s, days in sales.items() for d in days]
               + [("insert", r) for r in filler]}
    write_changes(root, "b0000", initial)
    cycle.run("b0000")
    model.apply(initial)
    check_served(cycle, model, FIRST_LAST, "b0000")
    total = len(model.tables["pos"])
    january = sum(1 for r in model.tables["pos"] if r[2].month == 1)

    nights = [
        # store 1's earliest sale goes (and a later latest one comes, so its latest is not in doubt); January
        # holds its next one: January is read once, by the delete check's pass, which counts the first pass's rows
        # too, and not the year
        ({"pos": [("delete", _sale(1, 1, dt.date(2026, 1, 5), 1)), ("insert", _sale(1, 1, dt.date(2026, 12, 20), 1))]},
         january),
        # store 2's earliest sale goes and January has no other sale of it: February's is found over every month
        ({"pos": [("delete", _sale(2, 1, dt.date(2026, 1, 7), 1))]}, None),
        # store 5's latest sale goes and its month (March) has no other: January's is found over every month
        ({"pos": [("delete", _sale(5, 1, dt.date(2026, 3, 8), 1))]}, None),
    ]
    for n, (night, most) in enumerate(nights, 1):
        batch = f"b{n:04d}"
        write_changes(root, batch, night)
        cycle.propagate(batch)
        read = cycle.lake.read_manifest(batch).read("base", "pos")
        if most is not None:
            assert (read.rows, read.scans) == (most, 1) and most < total, (batch, read)
        cycle.refresh(batch)
        cycle.apply_base(batch)
        model.apply(night)
        check_served(cycle, model, FIRST_LAST, batch)
    first = {r[0]: r[2] for r in cycle.warehouse.read_view(cycle.plan.view("first_sale"))}
    last = {r[0]: r[2] for r in cycle.warehouse.read_view(cycle.plan.view("last_sale"))}
    day = lambda m, d: dt.date(2026, m, d)  # noqa: E731
    assert [first[s] for s in (1, 2, 3, 5)] == [day(1, 20), day(2, 10), day(2, 2), day(1, 3)]
    assert [last[s] for s in (1, 2, 3, 5)] == [day(12, 20), day(4, 4), day(2, 9), day(1, 3)]
    cycle.close()


def test_partition_by_names_what_is_wrong(tmp_path):
    root = make_project(tmp_path / "p", NO_MINMAX)
    toml = root / "nightshift.toml"
    base = toml.read_text()
    for setting, message in (('{ sales = "date" }', "no table sales in sql/schema.sql"),
                             ('{ pos = "day" }', "table pos has no column day"),
                             ('{ pos = "qty" }', "pos.qty is INTEGER; partitions are months of a DATE or TIMESTAMP")):
        toml.write_text(base.replace('path = "lake"\n', f'path = "lake"\npartition_by = {setting}\n'))
        with pytest.raises(ConfigError, match=message):
            load_project(root).partition_settings
    for setting in ('"date"', '{ pos = "" }', '{ pos = true }'):
        toml.write_text(base.replace('path = "lake"\n', f'path = "lake"\npartition_by = {setting}\n'))
        with pytest.raises(ConfigError, match=r"\[lake\] partition_by must be a table .*\(or false: one table\)"):
            load_project(root)
    toml.write_text(base.replace('path = "lake"\n', 'path = "lake"\npartition_by = { pos = false }\n'))
    assert load_project(root).partition_settings == {"pos": None}


def test_a_fact_table_is_laid_out_by_month_once_it_is_large_unless_the_project_says_otherwise(
        tmp_path, spark, quiet, monkeypatch, capsys):
    """No [lake] partition_by: pos is one table while small, laid out by month of its date column by the night
    that takes it past runtime.layout.AUTO_ROWS (lowered here), kept so when deletes shrink it, and made one table
    again by partition_by = { pos = false }; every view equals recomputation throughout, and nightshift plan
    says which layout and why."""
    monkeypatch.setattr("runtime.layout.AUTO_ROWS", 40)
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # else a table this small is written anew every night
    root = make_project(tmp_path / "p", NO_MINMAX)
    said: list[str] = []
    cycle = Cycle(load_project(root), spark=spark, progress=said.append)
    model = Model()
    nights = [
        {"stores": [("insert", (1, "springfield", "north")), ("insert", (2, "ogdenville", "south"))],
         "items": [("insert", (1, "c0", 1.0)), ("insert", (2, "c1", 2.0))],
         "pos": [("insert", _sale(1 + k % 2, 1 + k % 2, dt.date(2026, 1 + k % 3, 1 + k // 3), k)) for k in range(30)]},
        {"pos": [("insert", _sale(2, 1, dt.date(2026, 4, 1 + k), k)) for k in range(15)]},  # 45 rows: by month
        {"pos": [("delete", _sale(2, 1, dt.date(2026, 4, 1 + k), k)) for k in range(10)]},  # 35 rows: kept so (>= 20)
    ]
    layouts = []
    for n, night in enumerate(nights):
        write_changes(root, f"b{n:04d}", night)
        cycle.run(f"b{n:04d}")
        model.apply(night)
        check_served(cycle, model, NO_MINMAX, f"b{n:04d}")
        layouts.append(cycle.lake.state().partitions)
    assert layouts == [{}, {"pos": "date"}, {"pos": "date"}], layouts
    assert _month_rows(cycle, spark) == {"2026-01": 10, "2026-02": 10, "2026-03": 10, "2026-04": 5}
    assert any("pos is laid out anew: pos: by month of date (45 rows, at least 40; its one date column date" in m
               for m in said), said
    assert main(["plan", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "pos: by month of date (35 rows; laid out so since an earlier night, and kept down to 20; [lake] " \
           "partition_by pos = false makes it one table)" in out, out

    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text().replace('path = "lake"\n', 'path = "lake"\npartition_by = { pos = false }\n'))
    cycle.close()
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    night = {"pos": [("insert", _sale(1, 2, dt.date(2026, 5, 2), 3))]}
    write_changes(root, "b0003", night)
    cycle.run("b0003")
    model.apply(night)
    check_served(cycle, model, NO_MINMAX, "b0003")
    assert cycle.lake.state().partitions == {}
    assert main(["plan", "--project", str(root)]) == 0
    assert "pos: one table ([lake] partition_by pos = false)" in capsys.readouterr().out
    cycle.close()


@pytest.mark.parametrize("seed", [5, 17])
def test_random_nights_keep_the_earliest_and_latest_sale_exact_by_month(tmp_path, spark, quiet, seed):
    """Random nights (a group's earliest row deleted, duplicates, a row deleted and inserted again, a store's
    every sale gone) over a base laid out by month, with views taking the MIN and MAX of the date per store: the
    lost extremes' first pass, made in the command from the batch's rows and the base's counts, and every pass
    after it keep the views equal to their recomputation."""
    root = make_project(tmp_path / "p", FIRST_LAST, maintain="incremental")
    partition_pos(root)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    # sales over five months: a lost extreme's month is one of several
    nights_equal_recomputation(cycle, root, FIRST_LAST, seed, nights=7, days=150)
    cycle.close()
