"""A partitioned lake base (issue 21, item 2): `[lake] partition_by = { pos = "date" }` lays pos out by
month; apply-base rewrites only the months a batch touches (the others are hard links to the previous
version's files), and the delete check reads only the months of the deleted rows, measured by the
manifest's rows read. Every view stays equal to recomputation from the model; a bad delete is still
refused; switching the layout on and off mid-life keeps the lake readable."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pytest

from harness import EXTENDED, FIGURE_1, BatchGenerator, Model, check_served, make_project, write_changes
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import BadChangeBatch, ConfigError, InjectedCrash
from runtime.lake import parquet_rows, partition_months

NO_MINMAX = {k: v for k, v in FIGURE_1.items() if k != "SiC_sales"}
PARTITIONED = '[lake]\npath = "lake"\npartition_by = { pos = "date" }\n'


def _partition(root, on: bool = True) -> None:
    toml = root / "nightshift.toml"
    text = toml.read_text()
    if on:
        toml.write_text(text.replace('[lake]\npath = "lake"\n', PARTITIONED))
    else:
        toml.write_text(text.replace(PARTITIONED, '[lake]\npath = "lake"\n'))


def _sale(store: int, item: int, day: dt.date | None, qty: int) -> tuple:
    return (store, item, day, qty, Decimal("1.50"))


def _inodes(folder) -> dict[str, int]:
    return {f.name: f.stat().st_ino for f in folder.glob("*.parquet")}


def test_a_night_rewrites_and_checks_only_the_months_it_touches(tmp_path, spark, quiet):
    root = make_project(tmp_path / "p", NO_MINMAX)
    _partition(root)
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
    first = cycle.lake.current_base_dir("pos")
    months = partition_months(first)
    assert set(months) == {"2026-01", "2026-02", "2026-03", None}, months
    assert {m: parquet_rows(f) for m, f in months.items()} == {"2026-01": 10, "2026-02": 20, "2026-03": 30, None: 2}
    check_served(cycle, model, NO_MINMAX, "b0000")

    # a night that deletes two February sales and inserts a March one: the delete check reads February
    # only, apply-base rewrites February and March and links January and the NULL month
    feb = [r for r in model.tables["pos"] if r[2] is not None and r[2].month == 2][:2]
    night = {"pos": [("delete", r) for r in feb] + [("insert", _sale(2, 1, dt.date(2026, 3, 9), 4))]}
    write_changes(root, "b0001", night)
    cycle.propagate("b0001")
    manifest = cycle.lake.read_manifest("b0001")
    assert manifest.read("base", "pos").rows == 20, manifest.rows_read  # February's rows, not the 62 of pos
    cycle.refresh("b0001")
    result = cycle.apply_base("b0001")
    model.apply(night)
    assert result.details["tables"]["pos"]["months_rewritten"] == 2
    assert result.details["tables"]["pos"]["months_linked"] == 2
    second = partition_months(cycle.lake.current_base_dir("pos"))
    assert _inodes(second["2026-01"]) == _inodes(months["2026-01"])  # the same files, not copies
    assert _inodes(second[None]) == _inodes(months[None])
    assert set(_inodes(second["2026-03"]).values()).isdisjoint(_inodes(months["2026-03"]).values())
    assert {m: parquet_rows(f) for m, f in second.items()} == {"2026-01": 10, "2026-02": 18, "2026-03": 31, None: 2}
    check_served(cycle, model, NO_MINMAX, "b0001")

    # a crash after pos's new version is written, before the state switches: the rerun gives the same lake
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
    cycle.apply_base("b0002")
    model.apply(night)
    third = partition_months(cycle.lake.current_base_dir("pos"))
    assert {m: parquet_rows(f) for m, f in third.items()} == {"2026-01": 10, "2026-02": 18, "2026-03": 31, "2026-04": 1,
                                                               None: 1}
    assert _inodes(third["2026-02"]) == _inodes(second["2026-02"])
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
            _partition(root, on=n == 2)
            cycle = Cycle(load_project(root), spark=spark, progress=quiet)
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, f"b{n:04d}", changes)
        cycle.run(f"b{n:04d}")
        model.apply(changes)
        check_served(cycle, model, views, f"b{n:04d}")
        laid_out = bool(partition_months(cycle.lake.current_base_dir("pos")))
        assert laid_out == (n in (2, 3)) or not any(op for op, _ in changes.get("pos", [])), n
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
            load_project(root).partitions
    toml.write_text(base.replace('path = "lake"\n', 'path = "lake"\npartition_by = "date"\n'))
    with pytest.raises(ConfigError, match=r"\[lake\] partition_by must be a table"):
        load_project(root)
