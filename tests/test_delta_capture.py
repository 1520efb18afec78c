"""Capture from Delta tables: a user's Delta table (written by Spark, change data feed and deletion vectors on)
becomes change batches; applied through nights, the lake and the served views equal the Delta tables' own
contents recomputed."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness import COLUMNS, FIGURE_1, Model, make_project
from nightshift.capture import Source, capture, configured_sources
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import BadChangeBatch, ConfigError
from nightshift.oracle import bag, duckdb_base
from runtime import delta

DDL = {
    "stores": "storeID INT, city STRING, region STRING",
    "items": "itemID INT, category STRING, weight DOUBLE",
    "pos": "storeID INT, itemID INT, date DATE, qty INT, price DECIMAL(8,2), note STRING",  # note: not declared
}
PROPS = "TBLPROPERTIES (delta.enableChangeDataFeed = true, delta.enableDeletionVectors = true)"


def _create(spark, folder: Path) -> dict[str, Path]:
    paths = {t: folder / t for t in DDL}
    for t, cols in DDL.items():
        spark.sql(f"CREATE TABLE delta.`{paths[t]}` ({cols}) USING delta {PROPS}")
    spark.sql(f"INSERT INTO delta.`{paths['stores']}` VALUES (1, 'Oslo', 'north'), (2, 'Rome', 'south'), (3, 'Bergen', 'north')")
    spark.sql(f"INSERT INTO delta.`{paths['items']}` VALUES (10, 'c0', 1.5), (11, 'c1', NULL), (12, 'c1', 2.0)")
    spark.sql(f"""INSERT INTO delta.`{paths['pos']}` SELECT 1 + CAST(id % 3 AS INT), 10 + CAST(id % 3 AS INT),
                  date_add(DATE'2024-01-01', CAST(id % 5 AS INT)), CASE WHEN id % 7 = 0 THEN NULL ELSE CAST(id % 4 AS INT) END,
                  CAST(id / 4 AS DECIMAL(8,2)), 'x' FROM range(0, 40) AS r(id)""")
    return paths


def _change(spark, paths: dict[str, Path]) -> None:
    """Several commits: inserts (one a duplicate of an existing row), updates (of measures and of a
    dimension's attribute), deletes by deletion vector, a row inserted and deleted again, an update that
    changes only a column the lake does not keep."""
    pos, stores = paths["pos"], paths["stores"]
    spark.sql(f"INSERT INTO delta.`{pos}` VALUES (1, 10, DATE'2024-01-01', NULL, 0.00, 'x'), (3, 12, DATE'2024-02-01', 9, 1.25, 'y'), "
              f"(2, 11, DATE'2024-02-02', 5, 2.50, 'gone')")
    spark.sql(f"UPDATE delta.`{pos}` SET qty = qty + 10 WHERE storeID = 2 AND date = DATE'2024-01-02'")
    spark.sql(f"DELETE FROM delta.`{pos}` WHERE itemID = 11 AND qty IS NULL")
    spark.sql(f"DELETE FROM delta.`{pos}` WHERE note = 'gone'")
    spark.sql(f"UPDATE delta.`{pos}` SET note = 'z' WHERE storeID = 1")
    spark.sql(f"UPDATE delta.`{stores}` SET city = 'Tromso' WHERE storeID = 3")
    spark.sql(f"INSERT INTO delta.`{stores}` VALUES (4, 'Milan', 'south')")


def _contents(paths: dict[str, Path]) -> dict[str, list[tuple]]:
    out = {}
    for t, p in paths.items():
        rows = delta.read_table(p, columns=COLUMNS[t]).to_pylist()
        out[t] = [tuple(r[c] for c in COLUMNS[t]) for r in rows]
    return out


def _lake(cycle) -> dict[str, Counter]:
    con = duckdb_base(cycle.lake, cycle.plan.schema)
    try:
        return {t: bag(con.execute(f'SELECT {", ".join(COLUMNS[t])} FROM "{t}"').fetchall()) for t in COLUMNS}
    finally:
        con.close()


def _served(cycle) -> dict[str, Counter]:
    return {v.name: bag(cycle.warehouse.read_view(v)) for v in cycle.plan.views}


def _file_hash(root: Path, table: str, batch: str) -> str:
    return hashlib.sha256((root / "lake" / "changes" / table / f"batch_id={batch}" / "part-00000.parquet").read_bytes()).hexdigest()


def test_delta_sources_captured_through_nights_equal_the_tables_recomputed(spark, tmp_path):
    paths = _create(spark, tmp_path / "source")
    root = make_project(tmp_path / "proj", FIGURE_1)
    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text() + "".join(f'[capture.{t}]\nkind = "delta"\npath = "{p}"\n' for t, p in paths.items()))
    project = load_project(root)
    assert {s.kind for s in configured_sources(project)} == {"delta"}
    cycle = Cycle(project, spark=spark, progress=lambda _: None)
    model = Model()
    for night, batch in enumerate(("b0001", "b0002", "b0003")):
        if night == 1:
            _change(spark, paths)
        result = capture(load_project(root), batch)  # no Spark session is needed for a Delta source
        first = capture(load_project(root), batch)  # a rerun before the night: the same batch
        assert [r.delta_version for r in result.records] == [r.delta_version for r in first.records]
        records = {r.table: r for r in first.records}
        assert records["pos"].delta_version == delta.version(paths["pos"])
        assert (records["pos"].delta_since is None) == (night == 0)
        batch_rows = {t: [(r["_op"], tuple(r[c] for c in COLUMNS[t]))
                          for r in pq.read_table(root / "lake" / "changes" / t / f"batch_id={batch}").to_pylist()]
                      for t in COLUMNS}
        if night == 1:  # the row inserted and deleted within the range nets out; the note-only update too
            assert not [r for _, r in batch_rows["pos"] if r[:2] == (2, 11) and r[2].month == 2]
            assert [x for x in batch_rows["pos"] if x[1][0] == 1] == [("insert", (1, 10, dt.date(2024, 1, 1), None, Decimal("0.00")))]
        if night == 2:
            assert all(not rows for rows in batch_rows.values())  # nothing changed: an empty night
        model.apply(batch_rows)
        expected = _contents(paths)
        assert {t: Counter(rows) for t, rows in model.tables.items()} == {t: Counter(rows) for t, rows in expected.items()}
        cycle.run(batch)
        assert _lake(cycle) == {t: bag(rows) for t, rows in expected.items()}, batch
        assert _served(cycle) == model.recompute(FIGURE_1), batch
        again = capture(load_project(root), batch)
        assert again.skipped and "propagate has used" in again.skipped or "applied" in again.skipped
    cycle.close()


def test_a_rerun_writes_the_same_batch_even_after_new_commits(spark, tmp_path):
    paths = _create(spark, tmp_path / "source")
    root = make_project(tmp_path / "proj", FIGURE_1)
    sources = tuple(Source(t, "delta", str(p)) for t, p in paths.items())
    capture(load_project(root), "b0001", sources)
    before = _file_hash(root, "pos", "b0001")
    spark.sql(f"DELETE FROM delta.`{paths['pos']}` WHERE qty = 1")
    capture(load_project(root), "b0001", sources)
    assert _file_hash(root, "pos", "b0001") == before  # the same versions as the first run
    result = capture(load_project(root), "b0002", sources)
    pos = {r.table: r for r in result.records}["pos"]
    assert (pos.deleted, pos.inserted) == (delta.read_table(paths["pos"], 1).to_pandas().qty.eq(1).sum(), 0)


def test_a_delta_source_without_its_change_feed_or_whose_feed_is_gone_is_refused(spark, tmp_path):
    root = make_project(tmp_path / "proj", FIGURE_1)
    plain = tmp_path / "plain"
    spark.sql(f"CREATE TABLE delta.`{plain}` ({DDL['stores']}) USING delta")
    with pytest.raises(BadChangeBatch, match=r"does not record its changes.*enableChangeDataFeed"):
        capture(load_project(root), "b0001", (Source("stores", "delta", str(plain)),))
    with pytest.raises(BadChangeBatch, match="is not a Delta table"):
        capture(load_project(root), "b0001", (Source("stores", "delta", str(tmp_path / "nothing")),))
    assert not (root / "lake" / "changes").exists() or not list((root / "lake" / "changes").glob("*/batch_id=*"))

    stores = tmp_path / "stores"
    spark.sql(f"CREATE TABLE delta.`{stores}` ({DDL['stores']}) USING delta {PROPS}")
    spark.sql(f"INSERT INTO delta.`{stores}` VALUES (1, 'Oslo', 'north')")
    source = (Source("stores", "delta", str(stores)),)
    capture(load_project(root), "b0001", source)
    spark.sql(f"INSERT INTO delta.`{stores}` VALUES (2, 'Rome', 'south')")
    for f in stores.glob("_change_data/*") if (stores / "_change_data").is_dir() else []:
        f.unlink()
    for f in stores.glob("part-*.parquet"):
        f.unlink()  # what VACUUM leaves of versions no longer kept
    with pytest.raises(BadChangeBatch, match=r"versions 2 to 2: .*removed"):
        capture(load_project(root), "b0002", source)


def test_configuration_of_a_delta_source(tmp_path):
    root = make_project(tmp_path / "proj", FIGURE_1)
    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text() + '[capture.pos]\nkind = "delta"\npath = ""\n')
    with pytest.raises(ConfigError, match="the Delta table's folder"):
        configured_sources(load_project(root))
