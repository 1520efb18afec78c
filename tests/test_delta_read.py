"""The lake's Delta tables read without a JVM (runtime.delta): tables written by Spark with Delta, deletion
vectors on, read at every version by pyarrow and DuckDB, and compared with Spark's own read of that version."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lattice.ir import Column, Table
from runtime import delta
from runtime.errors import SchemaError
from runtime.lake import Lake, LakeState

COLUMNS = "id INT, name STRING, amount DECIMAL(10,2), d DATE, ts TIMESTAMP, month STRING"
TABLE = Table("t", (Column("id", "INTEGER"), Column("name", "VARCHAR"), Column("amount", "DECIMAL(10,2)"),
                    Column("d", "DATE"), Column("ts", "TIMESTAMP"), Column("month", "VARCHAR")))


def _spark_rows(spark, path, version: int) -> Counter:
    df = spark.read.format("delta").option("versionAsOf", version).load(str(path))
    return Counter(tuple(r) for r in df.select("id", "name", "amount", "d", "ts", "month").collect())


def _arrow_rows(path, version: int) -> Counter:
    t = delta.read_table(path, version, columns=["id", "name", "amount", "d", "ts", "month"])
    return Counter(tuple(r.values()) for r in t.to_pylist())


def _duckdb_rows(path, version: int) -> Counter:
    """Through the dataset registered in DuckDB."""
    con = duckdb.connect()
    try:
        delta.duckdb_view(con, "t", path, version, "id, name, amount, d, ts, month")
        return Counter(con.sql("SELECT * FROM t").fetchall())
    finally:
        con.close()


def _duckdb_sql_rows(lake: Lake, version: int, database) -> Counter:
    """Through register_base's SQL view, read back by another connection of the DuckDB file."""
    con = duckdb.connect(str(database))
    delta.register_base(con, lake, TABLE, LakeState(versions={"t": version}))
    con.close()
    con = duckdb.connect(str(database))
    try:
        return Counter(con.sql("SELECT id, name, amount, d, ts, month FROM t").fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("partitioned", [False, True])
def test_deleted_rows_are_not_read_at_any_version(spark, tmp_path, partitioned):
    lake = Lake(tmp_path / "lake")
    path = lake.table_path("t")
    by = "PARTITIONED BY (month)" if partitioned else ""
    spark.sql(f"CREATE TABLE delta.`{path}` ({COLUMNS}) USING delta {by} "
              f"TBLPROPERTIES (delta.enableDeletionVectors = true)")
    spark.sql(f"""INSERT INTO delta.`{path}` SELECT CAST(id AS INT), concat('n', id), CAST(id * 1.25 AS DECIMAL(10,2)),
                  date_add(DATE'2024-01-01', CAST(id AS INT)), TIMESTAMP'2024-01-01 06:30:00' + make_interval(0,0,0,0,CAST(id AS INT)),
                  CASE WHEN id % 7 = 0 THEN NULL ELSE date_format(date_add(DATE'2024-01-01', CAST(id * 3 AS INT)), 'yyyy-MM') END
                  FROM range(0, 60) AS r(id)""")
    spark.sql(f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` WHERE id < 5")  # equal rows twice
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 4 = 1")
    spark.sql(f"UPDATE delta.`{path}` SET name = 'changed' WHERE id IN (2, 10)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 40")
    last = delta.version(path)
    assert last == 5
    assert delta.snapshot(path, last).keep, "the deletes must have left deletion vectors, not rewritten files"
    for v in range(1, last + 1):
        expected = _spark_rows(spark, path, v)
        assert _arrow_rows(path, v) == expected, f"version {v}"
        assert _duckdb_rows(path, v) == expected, f"version {v}"
        assert _duckdb_sql_rows(lake, v, tmp_path / f"v{v}.duckdb") == expected, f"version {v}"
        # a projection (the partition column among it) reads only its columns, the same rows
        some = delta.read_table(path, v, columns=["month", "amount"])
        assert some.column_names == ["month", "amount"]
        assert Counter(tuple(r.values()) for r in some.to_pylist()) == Counter((r[5], r[2]) for r in expected.elements())
    rows = _arrow_rows(path, last)
    assert not [r for r in rows if r[0] % 4 == 1 or r[0] == 40]
    with pytest.raises(SchemaError, match=f"{path} at version 99"):
        delta.arrow_dataset(path, 99)
    assert sum(1 for r in rows.elements() if r[:2] == (2, "changed")) == 2  # its two equal rows both updated


def test_a_missing_table_or_version_is_named(tmp_path):
    with pytest.raises(SchemaError, match="is not a Delta table"):
        delta.arrow_dataset(tmp_path / "nothing")
    assert delta.version(tmp_path / "nothing") is None


def test_a_table_the_lake_does_not_hold_yet_reads_empty(tmp_path):
    con = duckdb.connect()
    delta.register_base(con, Lake(tmp_path / "lake"), TABLE, LakeState())
    assert con.sql("SELECT count(*) FROM t").fetchall() == [(0,)]
    assert [r[1] for r in con.sql("DESCRIBE t").fetchall()] == ["INTEGER", "VARCHAR", "DECIMAL(10,2)", "DATE", "TIMESTAMP", "VARCHAR"]


@pytest.mark.parametrize("policy", ["classic", "v2"])
def test_the_files_with_a_deletion_vector_come_from_the_log(spark, tmp_path, policy):
    """Which live files have a deletion vector is read from the log's add actions (a checkpoint, then the commits
    after it) without reading a vector; it is the set delta-rs's vectors give at every version, and a log of a
    form not read there (V2 checkpoints) has the vectors read instead."""
    path = tmp_path / "t"
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT, month STRING) USING delta PARTITIONED BY (month) "
              f"TBLPROPERTIES (delta.enableDeletionVectors = true, delta.checkpointInterval = 3, "
              f"delta.checkpointPolicy = '{policy}')")
    spark.sql(f"INSERT INTO delta.`{path}` SELECT CAST(id AS INT), CAST(id % 3 AS STRING) FROM range(0, 90) AS r(id)")
    for k in range(7):  # deletes, inserts and an OPTIMIZE that purges: files marked, unmarked, replaced
        if k == 4:
            spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)")
        elif k % 2:
            spark.sql(f"INSERT INTO delta.`{path}` VALUES ({100 + k}, '{k % 3}')")
        else:
            spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 9 = {k}")
    log = path / "_delta_log"
    assert any(".checkpoint." in p.name for p in log.iterdir()), "the table must have a checkpoint"
    for v in range(delta.version(path) + 1):
        expected = delta._keep_masks(delta.open_table(path, v), path)
        snap = delta._snapshot(path, v)
        if policy == "v2" and any(".checkpoint." in p.name and p.name[:20].isdigit() and int(p.name[:20]) <= v
                                  for p in log.iterdir()):
            assert not isinstance(snap.keep, delta.KeepMasks), f"version {v}: the vectors read, not the log"
        else:  # the marked files, from the log before any vector is read
            assert isinstance(snap.keep, delta.KeepMasks) and set(snap.keep) == set(expected), f"version {v}"
        assert set(snap.keep) == set(expected) and all(snap.keep[f] == m for f, m in expected.items()), f"version {v}"
        assert Counter(r["id"] for r in delta.read_table(path, v, columns=["id"]).to_pylist()) == \
            Counter(r[0] for r in spark.read.format("delta").option("versionAsOf", v).load(str(path)).collect())


@pytest.mark.parametrize("partitioned", [False, True])
def test_value_counts_are_spark_counts_of_the_live_rows(spark, tmp_path, partitioned):
    """runtime.delta.value_counts (the base's term of a lost extreme's recompute, counted without Spark) against
    Spark's own GROUP BY of the same version: deletion vectors, several row groups a file, NULL keys and values,
    a bound below, one from above, both, none, and the months read."""
    path = tmp_path / "t"
    by = "PARTITIONED BY (month)" if partitioned else ""
    spark.sql(f"CREATE TABLE delta.`{path}` (store INT, item STRING, d DATE, qty INT, month STRING) USING delta {by} "
              f"TBLPROPERTIES (delta.enableDeletionVectors = true)")
    rows = spark.sql("""SELECT CASE WHEN id % 29 = 0 THEN NULL ELSE CAST(id % 5 AS INT) END AS store,
                               CASE WHEN id % 31 = 0 THEN NULL ELSE concat('i', id % 3) END AS item,
                               CASE WHEN id % 37 = 0 THEN NULL ELSE date_add(DATE'2026-01-01', CAST(id % 200 AS INT)) END AS d,
                               CAST(id AS INT) AS qty, date_format(date_add(DATE'2026-01-01', CAST(id % 200 AS INT)), 'yyyy-MM')
                               AS month FROM range(0, 6000) AS r(id)""")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("parquet.block.size", "4096")  # row groups of a few hundred rows: a deletion vector spans several
    try:
        rows.write.format("delta").mode("append").save(str(path))
    finally:
        hadoop.unset("parquet.block.size")
    spark.sql(f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` WHERE qty < 50")  # equal rows twice
    spark.sql(f"DELETE FROM delta.`{path}` WHERE qty % 7 = 3")
    version = delta.version(path)
    snap = delta.snapshot(path, version)
    assert snap.keep, "the delete must have left deletion vectors"
    assert any(pq.read_metadata(f).num_row_groups > 1 for f, _ in snap.files), "some file must have row groups"
    probe = pa.table({"store": pa.array([1, 2, 4, 3], pa.int32()), "item": ["i0", "i1", "i2", "i9"]})
    spark.createDataFrame(probe.to_pandas()).createOrReplaceTempView("probe")
    months = {"2026-01", "2026-02", "2026-03"}
    for below, since, parts in [(dt.date(2026, 3, 1), None, None), (None, dt.date(2026, 5, 10), None),
                                (dt.date(2026, 2, 1), dt.date(2026, 7, 1), None), (None, None, None),
                                (dt.date(2026, 4, 1), None, months)]:
        counts, read = delta.value_counts(snap, ["store", "item"], "d", probe, below, since, parts)
        got = Counter({(r["store"], r["item"], r["_v"]): r["_n"] for r in counts.to_pylist()})
        assert counts.column_names == ["store", "item", "_v", "_n"] and len(got) == counts.num_rows
        sides = [f"t.d < DATE'{below}'"] * (below is not None) + [f"t.d >= DATE'{since}'"] * (since is not None)
        where = " OR ".join(sides) or "t.d IS NOT NULL"
        if parts is not None and partitioned:
            where = f"({where}) AND t.month IN ({', '.join(repr(m) for m in sorted(parts))})"
        expected = Counter({(r[0], r[1], r[2]): r[3] for r in spark.sql(
            f"SELECT t.store, t.item, t.d, COUNT(*) FROM delta.`{path}` VERSION AS OF {version} AS t "
            f"JOIN probe AS p ON t.store = p.store AND t.item = p.item WHERE {where} "
            f"GROUP BY t.store, t.item, t.d").collect()})
        assert got == expected, (below, since, parts)
        assert expected, "the case must count some rows"
        files = [f for f, v in snap.files if parts is None or not partitioned or v.get("month") in parts]
        whole = sum(pq.read_metadata(f).num_rows for f in files)
        assert read.rows == whole, (below, since, parts)
        # three of the table's columns: some of its files' bytes, not all
        assert 0 < read.bytes < sum(f.stat().st_size for f in files), (below, since, parts)
