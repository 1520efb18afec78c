"""The manifest says what propagate read: the rows Spark's Parquet scans read from
each base table, view copy and change set, so "never reads the base" is measured, not claimed.

Every expected number comes from what the test wrote (the batches, and the model's base tables), not
from nightshift: a scan of a Parquet folder or file reads all its rows (these files are one row group
each, and Spark's "number of output rows" of a scan is counted before filters), so a source read by
k scans shows k times its size.
"""

from __future__ import annotations

import datetime as dt
import json
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import FIGURE_1, Model, check_served, make_project, write_changes
from lattice.dlattice import lattice_shape
from lattice.emit import rel
from lattice.graph import levels
from nightshift import render
from nightshift.config import load_project
from nightshift.cycle import Cycle
from runtime.lake import Lake
from runtime.manifest import MANIFEST_VERSION, DeltaResult, LevelRecord, Manifest, RowsRead, add_rows_read
from runtime.night import NIGHT_VERSION, BatchInfo, CopyStep, NightPlan, NodeStep, ViewStep
from runtime.options import Options
from runtime.serial import to_json
from spark_jobs.metrics import ReadMeter, ScanRows, _paths

DAY = dt.date(2026, 3, 1)
STORES = [(s, f"city{s % 2}", f"region{s % 2}") for s in (1, 2, 3)]
ITEMS = [(i, f"cat{i % 2}", 1.5) for i in (1, 2, 3)]
POS = [(1 + n % 3, 1 + n // 3 % 3, DAY + dt.timedelta(days=n % 4), n % 5 + 1, None) for n in range(24)]


def _cycle(tmp_path, spark, quiet) -> tuple[Cycle, Model]:
    """FIGURE_1's views over a base of 3 stores, 3 items and 24 sales (batch b0)."""
    root = make_project(tmp_path / "p", FIGURE_1, maintain="incremental")
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    _night(cycle, model, "b0", {"stores": [("insert", r) for r in STORES], "items": [("insert", r) for r in ITEMS],
                                "pos": [("insert", r) for r in POS]})
    return cycle, model


def _night(cycle: Cycle, model: Model, batch: str, changes: dict) -> Manifest:
    write_changes(cycle.project.root, batch, changes)
    cycle.run(batch)
    model.apply(changes)
    return cycle.lake.read_manifest(batch)


def _whole_reads(manifest: Manifest, kind: str, name: str, rows: int) -> int:
    """Every scan of the source read all of its `rows` rows, and at least one scan did; returns the scans."""
    r = manifest.read(kind, name)
    assert r.scans >= 1 and r.rows == rows * r.scans, f"{kind} {name}: {r} is not whole scans of {rows} rows"
    return r.scans


def test_an_insert_only_night_reads_no_base_fact_row(tmp_path, spark, quiet):
    """Inserts only: propagate reads the change rows of pos and the dimension tables, no row of pos's base;
    the same when the night runs level by level (the manifest adds up the levels' records)."""
    cycle, model = _cycle(tmp_path, spark, quiet)
    first = cycle.lake.read_manifest("b0")
    _whole_reads(first, "changes", "pos", len(POS))
    assert first.read("base", "pos").rows == 0  # the first night: no base yet
    inserts = [(1, 2, DAY, 7, None), (3, 3, DAY + dt.timedelta(days=9), 2, None), (2, 1, None, None, None)]
    write_changes(cycle.project.root, "b1", {"pos": [("insert", r) for r in inserts]})
    manifest = cycle.propagate("b1").details
    assert not manifest.night.info.has_deletes and cycle.lake.read_manifest("b1") == manifest
    assert manifest.read("base", "pos") == RowsRead("base", "pos", 0, 0, 0)
    _whole_reads(manifest, "changes", "pos", len(inserts))
    _whole_reads(manifest, "base", "stores", len(model.tables["stores"]))  # joined dimensions: cached, read once
    assert manifest.read("base", "stores").scans == 1
    assert {r.kind for r in manifest.rows_read} <= {"base", "changes"}, manifest.rows_read
    text = render.rows_read_text(cycle.plan, manifest.rows_read)
    assert "fact table pos: base not read" in text and "changes  pos" in text

    tiers = levels(lattice_shape(cycle.plan))  # the Airflow DAG's propagate_level_<k> tasks, rerun
    for k in range(len(tiers)):
        cycle.propagate("b1", k)
    records = [cycle.lake.read_level("b1", k) for k in range(len(tiers))]
    by_levels = cycle.lake.read_manifest("b1")
    assert len(tiers) >= 2 and all(r.rows_read is not None for r in records)
    assert by_levels.read("base", "pos").rows == 0
    assert _whole_reads(by_levels, "changes", "pos", len(inserts)) >= len(tiers)  # each level checks the batch
    assert by_levels.rows_read == add_rows_read(r.rows_read for r in records)
    cycle.close()


def test_new_dimension_rows_are_met_by_the_nights_sales_without_reading_the_base(tmp_path, spark, quiet):
    """A night adding a store and an item under new keys (and sales of them, and of old ones): no sale before
    it can reference them, so no view reads pos's base for them; a night changing a store's city does, and
    the items it adds still do not. Every view equals its recomputation from the model after each night."""
    cycle, model = _cycle(tmp_path, spark, quiet)
    added = {"stores": [("insert", (4, "city0", "region0"))], "items": [("insert", (4, "cat9", 2.5))],
             "pos": [("insert", r) for r in [(4, 4, DAY, 2, None), (4, 1, DAY, 3, None), (1, 4, None, 1, None),
                                              (2, 2, DAY + dt.timedelta(days=1), 5, None)]]}
    manifest = _night(cycle, model, "b1", added)
    assert manifest.night.unreached == ("items", "stores")
    assert manifest.read("base", "pos") == RowsRead("base", "pos", 0, 0, 0), manifest.rows_read
    assert "stores: rows added under new keys only" in render.plan_text(cycle.plan, cycle.project.options, manifest.night)
    check_served(cycle, model, FIGURE_1, "b1")

    moved = {"stores": [("delete", (1, "city1", "region1")), ("insert", (1, "city0", "region0"))],
             "items": [("insert", (5, "cat0", 1.0))], "pos": [("insert", (1, 5, DAY, 4, None))]}
    manifest = _night(cycle, model, "b2", moved)
    assert manifest.night.unreached == ("items",)
    assert manifest.read("base", "pos").rows >= len(model.tables["pos"]) - 1  # the moved store's old sales
    check_served(cycle, model, FIGURE_1, "b2")
    cycle.close()


def test_the_meter_counts_its_own_threads_scans_once(tmp_path, spark):
    """A scan before the step, or in another thread while it runs, is not the step's; a cached relation
    read by two executions counts its rows once."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    pq.write_table(pa.table({"x": list(range(7))}), mine)
    pq.write_table(pa.table({"x": list(range(50))}), other)
    spark.read.parquet(str(mine)).count()  # before the step
    with ReadMeter(spark, "test") as meter:
        cached = spark.read.parquet(str(mine)).cache()
        assert cached.count() == 7 and cached.where("x > 3").count() == 3
        elsewhere = threading.Thread(target=lambda: spark.read.parquet(str(other)).count())
        elsewhere.start()
        elsewhere.join()
        scans = meter.scans()
    cached.unpersist()
    assert scans == (ScanRows((mine.resolve().as_uri().replace("file:///", "file:/"),), 7),), scans


@pytest.mark.parametrize("rewrite_below", ["0", None], ids=["deleted from", "written anew"])
def test_a_night_with_deletes_reads_the_base_for_min(tmp_path, spark, quiet, rewrite_below, monkeypatch):
    """Deletes, among them SiC_sales's earliest sale of a group (MIN(date)): propagate reads pos's base,
    every row of it in each scan (the delete check; the exact MIN of the groups that lost rows). A table
    apply-base deletes from gets the check's record of the rows it matched; one it writes anew does not."""
    if rewrite_below is not None:
        monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", rewrite_below)
    cycle, model = _cycle(tmp_path, spark, quiet)
    base = len(model.tables["pos"])
    earliest = min((r for r in POS if r[0] == 1 and r[2] is not None), key=lambda r: r[2])
    changes = {"pos": [("delete", earliest), ("delete", POS[5]), ("insert", (2, 2, DAY, 3, None))]}
    before = list(model.tables["pos"])
    manifest = _night(cycle, model, "b1", changes)
    assert manifest.night.view("SiC_sales").exact_minmax  # the MIN view recomputes the groups that lost rows
    _whole_reads(manifest, "base", "pos", base)
    _whole_reads(manifest, "changes", "pos", len(changes["pos"]))
    assert {r.kind for r in manifest.rows_read} <= {"base", "changes", "matched"}, manifest.rows_read
    deleted = {r for op, r in changes["pos"] if op == "delete"}
    # the delete check keeps the base rows equal to a deleted row (a record for apply-base) and checks them in this
    # process (spark_jobs/driver_checks.py): Spark reads the record back for no check
    kept = sum(1 for r in before if r in deleted) if rewrite_below == "0" else 0
    records = list((cycle.lake.delta_root("b1") / "_matched").glob(f"{rel('matched', 'pos')}_v*"))
    assert sum(pq.read_table(r).num_rows for r in records) == kept
    assert manifest.read("matched", "pos").rows == 0, manifest.rows_read
    # bytes: pos's not known (Spark scanned it); the batch's change files of pos, read whole by the command, their size
    assert manifest.read("base", "pos").bytes is None, manifest.rows_read
    batch_files = sum(f.stat().st_size for f in (cycle.lake.root / "changes" / "pos").glob("batch_id=b1/*.parquet"))
    assert manifest.read("changes", "pos").bytes == batch_files > 0, manifest.rows_read
    assert f"fact table pos: base read, {base * manifest.read('base', 'pos').scans:,} rows" in \
        render.rows_read_text(cycle.plan, manifest.rows_read)
    cycle.close()


# ---------------------------------------------------------------- pure: the manifest, the layout, the text


def _manifest(rows_read=None) -> Manifest:
    night = NightPlan(version=NIGHT_VERSION, batch="b7", plan="fp", base_state="b6",
                      info=BatchInfo("b7", {"pos": 2}, {"pos": 1}), options=Options(), statistics="sizes",
                      nodes=(NodeStep("sales", "Δpos", True, 0), NodeStep("by day", "sales", False, 1)),
                      views=(ViewStep("sales", 0), ViewStep("by day", 1, level=1)), levels=(("sales",), ("by day",)),
                      copies=(CopyStep("sales", 1),))
    return Manifest(MANIFEST_VERSION, night, (DeltaResult("sales", 0, "v0__", 3), DeltaResult("by day", 1, "v1__", 2)),
                    1.5, rows_read)


def test_a_manifest_written_before_rows_read_still_loads(tmp_path):
    """A manifest (and a level record) of this version written before the field existed loads, with
    rows_read None ("not measured"); one that has it reads back equal."""
    lake = Lake(tmp_path / "lake")
    old = to_json(_manifest())
    del old["rows_read"]
    lake.manifest_path("b7").parent.mkdir(parents=True)
    lake.manifest_path("b7").write_text(json.dumps(old))
    loaded = lake.read_manifest("b7")
    assert loaded == _manifest() and loaded.rows_read is None
    assert loaded.read("base", "pos") == RowsRead("base", "pos", 0, 0, 0)
    assert "not measured" in render.rows_read_text(_plan(tmp_path), loaded.rows_read)
    record = to_json(LevelRecord("fp", "b6", 0, ()))
    del record["rows_read"]
    lake.level_path("b7", 0).parent.mkdir(parents=True)
    lake.level_path("b7", 0).write_text(json.dumps({"version": MANIFEST_VERSION, "record": record}))
    assert lake.read_level("b7", 0).rows_read is None
    measured = _manifest((RowsRead("changes", "pos", 6, 2, 900), RowsRead("base", "pos", 0, 0, 0)))
    lake.write_manifest(measured)
    assert lake.read_manifest("b7") == measured
    before_bytes = to_json(_manifest((RowsRead("changes", "pos", 6, 2),)))  # written before bytes were measured
    for r in before_bytes["rows_read"]:
        del r["bytes"]
    lake.manifest_path("b7").write_text(json.dumps(before_bytes))
    assert lake.read_manifest("b7").read("changes", "pos") == RowsRead("changes", "pos", 6, 2, None)


def test_levels_add_up_and_an_unmeasured_level_makes_the_night_unmeasured(tmp_path):
    a = (RowsRead("changes", "pos", 4, 2, 400), RowsRead("base", "stores", 3, 1, 70))
    b = (RowsRead("changes", "pos", 2, 1, 200), RowsRead("node", "sales", 5, 1, None))
    c = (RowsRead("base", "stores", 1, 1, None),)
    assert add_rows_read([a, b]) == (RowsRead("changes", "pos", 6, 3, 600), RowsRead("node", "sales", 5, 1, None),
                                     RowsRead("base", "stores", 3, 1, 70))  # most rows first
    # one read's bytes unknown: the sum's too
    assert RowsRead("base", "stores", 4, 2, None) in add_rows_read([a, c])
    assert add_rows_read([a, None]) is None
    lines = render.rows_read_text(_plan(tmp_path), add_rows_read([a, b])).splitlines()
    assert lines[1].split() == ["changes", "pos", "6", "rows", "in", "3", "scan(s),", "600", "bytes"], lines
    assert lines[2].split() == ["node", "sales", "5", "rows", "in", "1", "scan(s)"], lines  # bytes not known
    big = render.rows_read_text(_plan(tmp_path), (RowsRead("base", "pos", 9, 1, 3 * 1024 ** 3 // 2),))
    assert "base     pos" in big and big.endswith("base read, 9 rows in 1 scan(s), 1.5 GiB"), big


def test_scanned_paths_map_to_the_lake_layout(tmp_path):
    lake = Lake(tmp_path / "lake")
    night = _manifest().night
    root = f"file:{lake.root}"
    d = f"{root}/deltas/batch_id=b7"
    assert lake.source_of(f"{root}/tables/pos/part-00000.parquet", night) == ("base", "pos")
    assert lake.source_of(f"file://{lake.root}/tables/sales", night) == ("copy", "sales")
    assert lake.source_of(f"{root}/tables/pos/_delta_log/00000000000000000003.json", night) == ("log", "pos")
    assert lake.source_of(f"{root}/changes/pos/batch_id=b7/part-0.parquet", night) == ("changes", "pos")
    assert lake.source_of(f"{d}/_nodes/{rel('sd', 'by day')}", night) == ("node", "by day")
    assert lake.source_of(f"{d}/_copies/{rel('copy', 'sales')}", night) == ("update", "sales")
    assert lake.source_of(f"{d}/part=1", night) == ("delta", "by day")
    assert lake.source_of(f"{root}/deltas/batch_id=b6/part=1", night)[0] == "other"
    assert lake.source_of("file:/elsewhere/x.parquet", night) == ("other", "file:/elsewhere/x.parquet")
    assert _paths("InMemoryFileIndex(2 paths)[file:/a/x.parquet, file:/a/y.parquet]") == \
        ("file:/a/x.parquet", "file:/a/y.parquet")
    assert _paths("InMemoryFileIndex(3 paths)[file:/a/x.parquet, ...]") == ("file:/a/x.parquet, ...",)


def _plan(tmp_path):
    return load_project(make_project(tmp_path / "p", {"SID_sales": FIGURE_1["SID_sales"]})).plan
