"""The lake's base tables are Delta tables: a delete removes exactly one of several equal rows (bag semantics,
by the hidden row identity) as a deletion vector, without rewriting a file (a few written from the driver at the
places the delete check found them, many by a MERGE); apply-base's commit of a night is
idempotent (running it again over the same lake state commits nothing); and every reader of the base reads
the versions the lake's state records, never a newer commit."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import FIGURE_1, Model, check_served, make_project, write_changes
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import InjectedCrash
from nightshift.oracle import bag, duckdb_base
from runtime import delta
from runtime.lake import ROW_BATCH, ROW_ID
import spark_jobs.apply_base as apply_base_step
import spark_jobs.lake_tables as lake_tables
from spark_jobs.apply_base import apply_base
from spark_jobs.changes import read_base, read_table
from spark_jobs.lake_tables import delta_path

VIEWS = {k: v for k, v in FIGURE_1.items() if k != "SiC_sales"}
SALE = (1, 1, None, 3, Decimal("2.00"))


def _history(spark, cycle, table: str) -> list:
    return spark.sql(f"DESCRIBE HISTORY {delta_path(cycle.lake.table_path(table))}").orderBy("version").collect()


@pytest.mark.parametrize("deletes", ["driver", "named", "many"])
def test_a_delete_is_one_row_by_deletion_vector_and_the_commit_is_idempotent(tmp_path, spark, quiet, deletes, monkeypatch):
    """Deletes are one commit of deletion vectors made from the driver, then an append; where the driver does
    not delete ("named": made to hold for any number of deletes), a DELETE naming a few rows, then an append;
    many are one MERGE (here: "many" is made to mean one)."""
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # a table this small would be written anew
    if deletes != "driver":
        monkeypatch.setattr(lake_tables, "DRIVER_DELETES", 0)
    if deletes == "many":
        monkeypatch.setattr(apply_base_step, "FEW_DELETES", 0)
    root = make_project(tmp_path / "p", VIEWS)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    initial = {"stores": [("insert", (1, "springfield", "north"))], "items": [("insert", (1, "c0", 1.0))],
               "pos": [("insert", SALE)] * 3 + [("insert", (1, 1, None, 5, Decimal("1.00")))]}
    write_changes(root, "b0000", initial)
    cycle.run("b0000")
    model.apply(initial)
    night = {"pos": [("delete", SALE), ("insert", (1, 1, None, 9, Decimal("4.00")))]}
    write_changes(root, "b0001", night)
    cycle.propagate("b0001")
    cycle.refresh("b0001")
    before = cycle.lake.state()
    # the delete check kept the base rows equal to the deleted one (three, one of them goes): apply-base
    # picks from these without reading pos again
    matched = spark.read.parquet(str(cycle.lake.matched_dir("b0001", "pos", before.version("pos"))))
    assert sorted(tuple(r)[:5] for r in matched.collect()) == [SALE] * 3
    # with the rows' places where apply-base deletes by place, else with their identities (and not both)
    kept = {"places": set(lake_tables.POSITION) <= set(matched.columns), "identity": ROW_ID in matched.columns}
    assert kept == {"places": deletes == "driver", "identity": deletes != "driver"}, matched.columns
    cycle.apply_base("b0001")
    model.apply(night)
    check_served(cycle, model, VIEWS, "b0001")
    after = cycle.lake.state()
    pos = read_table(spark, cycle.lake, "pos", after)
    assert pos.where("qty = 3").count() == 2  # one of the three equal rows went
    assert pos.select(ROW_BATCH, ROW_ID).distinct().count() == pos.count() == 4  # every row its own identity
    history = _history(spark, cycle, "pos")
    if deletes == "many":
        merge = history[-1]
        assert merge["operation"] == "MERGE" and merge["version"] == after.version("pos") == before.version("pos") + 1
        metrics = merge["operationMetrics"]
        assert metrics["numTargetRowsDeleted"] == "1" and metrics["numTargetDeletionVectorsAdded"] == "1", metrics
        assert metrics["numTargetFilesRemoved"] == "0" and metrics["numTargetRowsInserted"] == "1", metrics
    else:
        delete, append = history[-2:]
        assert (delete["operation"], append["operation"]) == ("DELETE", "WRITE")
        assert ("nightshift" if deletes == "driver" else "Apache-Spark") in delete["engineInfo"], delete["engineInfo"]
        assert append["version"] == after.version("pos") == before.version("pos") + 2
        metrics = delete["operationMetrics"]
        assert metrics["numDeletedRows"] == "1" and metrics["numDeletionVectorsAdded"] == "1", metrics
        assert metrics["numRemovedFiles"] == "0", metrics
        # the night's one insert, appended from the driver (delta-rs names its metrics its own way)
        assert append["operationMetrics"]["num_added_rows"] == "1", append["operationMetrics"]

    # apply-base of the same night over the same lake state again (a rerun after a crash before the state
    # record): Delta holds the night's commit, so nothing is committed twice
    commits = len(_history(spark, cycle, "pos"))
    apply_base(spark, cycle.plan, cycle.lake, "b0001", before)
    assert len(_history(spark, cycle, "pos")) == commits and cycle.lake.state() == after

    # a commit the lake's state does not record (another writer, a night not yet applied) is not read
    table = cycle.plan.schema.table("pos")
    spark.range(1).selectExpr("1 AS storeID", "1 AS itemID", "CAST(NULL AS DATE) AS date", "100 AS qty",
                              "CAST(1 AS DECIMAL(8,2)) AS price", f"99L AS {ROW_BATCH}", f"0L AS {ROW_ID}") \
        .write.format("delta").mode("append").save(str(cycle.lake.table_path("pos")))
    assert bag(read_base(spark, cycle.lake, table, after).collect()) == bag(model.tables["pos"])
    cycle.close()


def test_deletes_from_a_base_table_read_by_delta_choose_rows_by_identity(tmp_path, spark, quiet, monkeypatch):
    """A base table with column mapping on (a user's Delta tables may have it) is read through Delta, where a
    row's place is not known: the delete check keeps the matched rows' identity instead, and a delete of one of
    several equal rows still removes exactly one of them."""
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # a table this small would be written anew
    root = make_project(tmp_path / "p", VIEWS)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    initial = {"stores": [("insert", (1, "springfield", "north"))], "items": [("insert", (1, "c0", 1.0))],
               "pos": [("insert", SALE)] * 3 + [("insert", (1, 1, None, 5, Decimal("1.00")))]}
    for batch, night in (("b0000", initial), ("b0001", {"pos": [("insert", (1, 1, None, 7, Decimal("3.00")))]}),
                         ("b0002", {"pos": [("delete", SALE), ("insert", (1, 1, None, 9, Decimal("4.00")))]}),
                         ("b0003", {"pos": [("delete", SALE), ("delete", (1, 1, None, 5, Decimal("1.00")))]})):
        write_changes(root, batch, night)
        cycle.run(batch)
        model.apply(night)
        check_served(cycle, model, VIEWS, batch)
        if batch == "b0000":  # the next night's apply-base commits after this, so b0002 reads pos through Delta
            spark.sql(f"ALTER TABLE {delta_path(cycle.lake.table_path('pos'))} SET TBLPROPERTIES ("
                      "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')")
    state = cycle.lake.state()
    assert delta.snapshot(cycle.lake.table_path("pos"), state.version("pos")).mapped
    assert bag(read_base(spark, cycle.lake, cycle.plan.schema.table("pos"), state).collect()) == bag(model.tables["pos"])
    cycle.close()


@pytest.mark.parametrize("reader", ["files", "delta", "delta, merge"])
def test_a_table_with_deletion_vectors_reads_alike_by_its_files_and_by_delta(tmp_path, spark, quiet, reader, monkeypatch):
    """A base table whose files carry deletion vectors is read either as its files minus the rows the vectors
    delete, or, past lake_tables.DELTA_READS bytes of such files (here: any), by Delta's own reader: the same
    rows with the same places either way, and nights deleting by those places (rows after a deleted one in the
    same file, whose place a reader counting only live rows would get wrong) keep every view equal to its
    recomputation; "merge": the deletes go by one MERGE of the rows' identities (a source read by Delta from
    the table the MERGE writes)."""
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # a table this small would be written anew
    if reader.startswith("delta"):
        monkeypatch.setattr(lake_tables, "DELTA_READS", 0)
    if reader.endswith("merge"):
        monkeypatch.setattr(lake_tables, "DRIVER_DELETES", 0)
        monkeypatch.setattr(apply_base_step, "FEW_DELETES", 0)
    root = make_project(tmp_path / "p", VIEWS)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    other, last = (1, 1, None, 5, Decimal("1.00")), (1, 1, None, 6, Decimal("1.50"))
    nights = [("b0000", {"stores": [("insert", (1, "springfield", "north"))], "items": [("insert", (1, "c0", 1.0))],
                         "pos": [("insert", SALE)] * 3 + [("insert", other), ("insert", last)]}),
              ("b0001", {"pos": [("delete", SALE)]}),
              ("b0002", {"pos": [("delete", last), ("insert", (1, 1, None, 9, Decimal("4.00")))]}),
              ("b0003", {"pos": [("delete", other), ("delete", SALE)]})]
    for batch, night in nights:
        write_changes(root, batch, night)
        cycle.run(batch)
        model.apply(night)
        check_served(cycle, model, VIEWS, batch)
        state = cycle.lake.state()
        path, version = cycle.lake.table_path("pos"), state.version("pos")
        placed = lake_tables.read(spark, path, version, positions=True)
        snap = delta.snapshot(path, version)
        expected = []  # each live file's rows as pyarrow reads them, numbered, less those its vector deletes
        for f, _ in snap.files:
            keep = snap.keep[f].to_pylist() if f in snap.keep else []
            rows = pq.read_table(f).select(placed.columns[:-2]).to_pylist()
            expected += [(*r.values(), f.name, i) for i, r in enumerate(rows) if i >= len(keep) or keep[i]]
        assert sorted(map(tuple, placed.collect())) == sorted(expected), batch
    assert bag(read_base(spark, cycle.lake, cycle.plan.schema.table("pos"), cycle.lake.state()).collect()) == bag(model.tables["pos"])
    assert delta.snapshot(cycle.lake.table_path("pos"), cycle.lake.state().version("pos")).keep  # vectors, not rewrites
    operations = {h["operation"] for h in _history(spark, cycle, "pos")}
    assert ("MERGE" in operations) == reader.endswith("merge"), operations
    # as docs/operations.md reads the lake from Python without Spark: deltalake's QueryBuilder at the recorded version
    from deltalake import DeltaTable, QueryBuilder

    columns = ", ".join(f'"{c}"' for c in cycle.plan.schema.table("pos").column_names)
    pos = DeltaTable(str(cycle.lake.table_path("pos")), version=cycle.lake.state().version("pos"))
    rows = pa.table(QueryBuilder().register("pos", pos).execute(f"SELECT {columns} FROM pos").read_all())
    assert bag(tuple(r.values()) for r in rows.to_pylist()) == bag(model.tables["pos"])
    cycle.close()


def test_compact_rewrites_deleted_rows_away_changes_no_row_and_survives_a_crash(tmp_path, spark, quiet, monkeypatch):
    """nightshift compact: a table a file of which lost more than 5% of its rows by deletion vectors is written
    again without the deleted rows (Delta's REORG ... APPLY (PURGE)), the lake's state then names the new version and every reader (Spark,
    DuckDB, the served views after the next night) sees the same rows; a crash after the rewrite's commit,
    before the state record, is taken over by the rerun without a second rewrite; nothing to do is a skip;
    a commit that changed rows and that the state does not record is left alone."""
    monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", "0")  # a table this small would be written anew
    root = make_project(tmp_path / "p", VIEWS)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = Model()
    initial = {"stores": [("insert", (1, "springfield", "north"))], "items": [("insert", (1, "c0", 1.0))],
               "pos": [("insert", (1, 1, None, q, Decimal("1.00"))) for q in range(1, 9)]}
    night = {"pos": [("delete", (1, 1, None, 3, Decimal("1.00"))), ("insert", (1, 1, None, 9, Decimal("4.00")))]}
    for batch, changes in (("b0000", initial), ("b0001", night)):
        write_changes(root, batch, changes)
        cycle.run(batch)
        model.apply(changes)
    done = cycle.compact()  # pos lost one of its first file's rows: more than 5%
    assert done.skipped is None and set(done.details["tables"]) == {"pos"}, done
    compacted = cycle.lake.state()
    snap = delta.snapshot(cycle.lake.table_path("pos"), compacted.version("pos"))
    assert not snap.keep, "compact must leave no file with a deletion vector"
    assert _history(spark, cycle, "pos")[-1]["operation"] == "REORG"  # the deleted rows purged
    table = cycle.plan.schema.table("pos")
    assert bag(read_base(spark, cycle.lake, table, compacted).collect()) == bag(model.tables["pos"])
    con = duckdb_base(cycle.lake, cycle.plan.schema)
    assert bag(con.execute('SELECT * FROM "pos"').fetchall()) == bag(model.tables["pos"])
    con.close()
    assert cycle.compact().skipped == "no lake table has small files or deleted rows to compact"

    # a crash after the rewrite's commit, before the state record: the rerun records it, rewrites nothing again
    night = {"pos": [("delete", (1, 1, None, 5, Decimal("1.00")))]}
    write_changes(root, "b0002", night)
    cycle.run("b0002")
    model.apply(night)
    before = cycle.lake.state()
    monkeypatch.setenv("NIGHTSHIFT_CRASH_AT", "compact:after_table:pos")
    with pytest.raises(InjectedCrash):
        cycle.compact()
    monkeypatch.delenv("NIGHTSHIFT_CRASH_AT")
    assert cycle.lake.state() == before
    commits = len(_history(spark, cycle, "pos"))
    assert cycle.compact().details["tables"]["pos"]["to"] == commits - 1
    assert len(_history(spark, cycle, "pos")) == commits and cycle.lake.state().version("pos") == commits - 1
    assert bag(read_base(spark, cycle.lake, table, cycle.lake.state()).collect()) == bag(model.tables["pos"])

    # the next night runs on the compacted table
    night = {"pos": [("delete", (1, 1, None, 9, Decimal("4.00"))), ("insert", (1, 1, None, 7, Decimal("2.00")))]}
    write_changes(root, "b0003", night)
    cycle.run("b0003")
    model.apply(night)
    check_served(cycle, model, VIEWS, "b0003")

    # small files (here: two count as many) are bin-packed into one
    monkeypatch.setattr(delta, "SMALL_FILES", 2)
    assert len(delta.snapshot(cycle.lake.table_path("pos"), cycle.lake.state().version("pos")).files) >= 2
    cycle.compact()
    assert "OPTIMIZE" in [h["operation"] for h in _history(spark, cycle, "pos")[-2:]]
    assert len(delta.snapshot(cycle.lake.table_path("pos"), cycle.lake.state().version("pos")).files) == 1
    assert bag(read_base(spark, cycle.lake, table, cycle.lake.state()).collect()) == bag(model.tables["pos"])
    monkeypatch.undo()

    # a commit that changed rows and that the state does not record is never compacted into the state
    state = cycle.lake.state()
    spark.range(1).selectExpr("1 AS storeID", "1 AS itemID", "CAST(NULL AS DATE) AS date", "100 AS qty",
                              "CAST(1 AS DECIMAL(8,2)) AS price", f"99L AS {ROW_BATCH}", f"0L AS {ROW_ID}") \
        .write.format("delta").mode("append").save(str(cycle.lake.table_path("pos")))
    messages = []
    cycle.progress = messages.append
    cycle.compact(purge=True)
    assert cycle.lake.state().version("pos") == state.version("pos")
    assert any("pos skipped: its Delta table has commits after version" in m for m in messages), messages
    cycle.close()


def test_deletes_by_position_from_the_driver_are_deletion_vectors_spark_and_delta_rs_read(tmp_path, spark):
    """runtime.delta.delete_positions writes the deletion vectors Spark's DELETE would: Spark's Delta reader and
    delta-rs read the same rows afterwards, in a partitioned table, with a vector over more than 4,096 rows of one
    65,536-row block (a Roaring bitmap container), a Spark DELETE on top of the driver's vector and the
    driver's on top of Spark's, over a checkpoint (the file's add read from it); a table the driver does not
    write (change data feed on) is left alone. Expected rows: the ids at each position, read as plain Parquet."""
    path = tmp_path / "t"
    spark.range(140_000).selectExpr("id", "CAST(id % 2 AS STRING) AS part").repartition(1, "part") \
        .write.format("delta").partitionBy("part").save(str(path))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    located = spark.read.format("parquet").load(str(path)).select(
        "id", "_metadata.file_name", "_metadata.row_index").collect()
    at = {(r["file_name"], r["row_index"]): r["id"] for r in located}
    files = sorted({f for f, _ in at})
    assert len(files) == 2
    expected = set(at.values())

    def read_back(tag):
        spark_rows = {r[0] for r in spark.read.format("delta").load(str(path)).select("id").collect()}
        rs_rows = set(delta.read_table(path, None, ["id"]).column("id").to_pylist())
        assert spark_rows == expected, (tag, len(spark_rows), len(expected))
        assert rs_rows == expected, (tag, len(rs_rows), len(expected))

    first = {files[0]: list(range(0, 10_000, 2)) + [65_536, 69_999], files[1]: [3]}
    assert delta.delete_positions(path, first, "night 1")
    expected -= {at[(f, r)] for f, rows in first.items() for r in rows}
    read_back("driver's vectors")
    log = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()[-1]
    assert log["operation"] == "DELETE" and log["userMetadata"] == "night 1"
    assert log["operationMetrics"]["numDeletedRows"] == str(5000 + 3)

    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 1000 = 1")  # Spark's vectors over the driver's
    expected -= {i for i in expected if i % 1000 == 1}
    read_back("Spark's on the driver's")

    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 8")  # one file's add now only in the checkpoint
    expected.discard(8)
    assert (path / "_delta_log" / f"{3:020d}.checkpoint.parquet").is_file()
    def live(f, start, n):  # the first n rows still there from row `start` of file f
        return [r for r in range(start, start + 1000) if at[(f, r)] in expected][:n]

    second = {files[0]: live(files[0], 1, 3) + live(files[0], 64_000, 1), files[1]: live(files[1], 4, 1)}
    # the driver's vectors over Spark's, the files' adds read from the checkpoint
    assert delta.delete_positions(path, second, "night 2")
    expected -= {at[(f, r)] for f, rows in second.items() for r in rows}
    read_back("driver's on Spark's, over a checkpoint")
    version = delta.version(path)  # a row deleted already (another writer's commit since it was located): Spark's
    again = {files[0]: [second[files[0]][0]]}
    assert delta.delete_positions(path, again, None) is False and delta.version(path) == version

    other = tmp_path / "cdf"
    spark.range(10).write.format("delta").option("delta.enableChangeDataFeed", "true").save(str(other))
    name = spark.read.format("parquet").load(str(other)).select("_metadata.file_name").first()[0]
    assert delta.delete_positions(other, {name: [0]}, None) is False
    assert delta.version(other) == 0


def test_the_delete_checks_pass_in_this_process_keeps_every_row_a_deleted_row_equals(tmp_path, spark):
    """The delete check's pass made in this process (driver_checks.matched over runtime.delta.matching_rows) keeps
    every live row Spark finds `<=>`-equal to a deleted row, at the place Spark's reader gives it (file name, row
    number), with its values; rows it keeps beyond those (a column left out of the match: floating point, or one a
    deleted row holds NULL in) are rows no deleted row equals. Over a table laid out by month with deletion
    vectors (a row equal to a deleted one but already deleted is not kept), duplicates, NULLs, -0.0 and NaN; only
    the deleted rows' months are read. A table whose lake types are not its declared ones, or with a TIMESTAMP
    column, is left to Spark (None). The oracle is Spark's own NULL-safe semi join over the same Delta table."""
    import datetime as dt
    import pyarrow as pa
    from pyspark.sql import functions as F
    from lattice.ir import Column, Table
    from runtime.lake import PART, Lake, LakeState
    from spark_jobs import driver_checks
    from spark_jobs.lake_tables import POSITION
    from spark_jobs.packages import TABLE_PROPERTIES

    lake = Lake(tmp_path / "lake")
    path = lake.table_path("t")
    table = Table("t", (Column("k", "INTEGER", False), Column("x", "DOUBLE"), Column("s", "VARCHAR"),
                        Column("d", "DATE"), Column("amount", "DECIMAL(10,2)")))
    ddl = "k int, x double, s string, d date, amount decimal(10,2)"
    jan, feb, mar = dt.date(2026, 1, 5), dt.date(2026, 2, 7), dt.date(2026, 3, 9)
    nan, one = float("nan"), Decimal("1.00")
    rows = [(100 + i, float(i), f"r{i}", [jan, feb, mar][i % 3], Decimal(i)) for i in range(3000)]
    rows += [(1, 0.0, "a", jan, one), (1, -0.0, "a", jan, one), (1, 0.0, "a", jan, one), (2, nan, None, feb, None),
             (2, nan, None, feb, None), (2, 2.5, None, feb, None), (3, 1.0, "b", feb, Decimal("-2.50")),
             (4, 1.0, "c", mar, one), (5, 1.0, "gone", jan, one)]
    base = spark.createDataFrame(rows, ddl).withColumn(PART, F.date_format("d", "yyyy-MM"))
    writer = base.coalesce(1).write.format("delta").partitionBy(PART)
    for k, v in TABLE_PROPERTIES.items():
        writer = writer.option(k, v)
    spark.conf.set("parquet.block.size", "4096")  # row groups of a few hundred rows
    try:
        writer.save(str(path))
    finally:
        spark.conf.unset("parquet.block.size")
    # the deleted row equal to a deleted one lies past its file's first row group: row numbers and masks run on
    where = spark.read.format("delta").load(str(path)).where("k = 5").select("_metadata.file_path",
                                                                             "_metadata.row_index").first()
    assert where["row_index"] >= pq.read_metadata(where["file_path"].removeprefix("file:")).row_group(0).num_rows
    spark.sql(f"DELETE FROM delta.`{path}` WHERE k = 5 OR k % 7 = 0")  # deletion vectors
    assert delta.snapshot(path).keep
    state = LakeState(versions={"t": delta.version(path)}, partitions={"t": "d"})
    schema = pa.schema([("k", pa.int32()), ("x", pa.float64()), ("s", pa.string()), ("d", pa.date32()),
                        ("amount", pa.decimal128(10, 2))])
    dels = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in [
        (1, -0.0, "a", jan, one), (2, nan, None, feb, None), (3, 1.0, "b", feb, Decimal("-2.50")),
        (5, 1.0, "gone", jan, one), (101, 1.0, "r1", feb, Decimal(1)), (9, 1.0, "none", jan, one)]], schema)

    wanted = driver_checks.months_of(dels, "d")
    assert wanted == {"2026-01", "2026-02"}
    record, read, _ = driver_checks.matched(lake, state, table, dels, POSITION, wanted)

    cols = list(table.column_names)
    live = spark.read.format("delta").load(str(path)).select(*cols, PART, "_metadata.file_name", "_metadata.row_index")
    on = [live[c].eqNullSafe(F.col(f"d_{c}")) for c in cols]
    equal = live.join(spark.createDataFrame(dels.to_pylist(), ddl).toDF(*[f"d_{c}" for c in cols]), on, "left_semi")
    key = lambda r: (r["file_name"], r["row_index"])
    expected = {key(r): (driver_checks.key(tuple(r[c] for c in cols)), r[PART]) for r in equal.collect()}
    assert len(expected) == 7  # 3 rows of k=1 (0.0 == -0.0), 2 NaN rows, k=3, k=101; not k=5 (deleted), not k=9

    got = {(f, n): (driver_checks.key(t), p) for f, n, p, t in zip(
        record.column(POSITION[0]).to_pylist(), record.column(POSITION[1]).to_pylist(), record.column(PART).to_pylist(),
        driver_checks.tuples(record, cols))}
    wanted_keys = set(driver_checks.tuples(dels, cols))
    assert {p: v for p, v in got.items() if v[0] in wanted_keys} == expected
    assert len(got) > len(expected)  # x and s left out of the match: (2, 2.5, NULL, feb, NULL) kept too, equal to none
    assert record.column_names == [*cols, PART, *POSITION] and record.schema.field("amount").type == pa.decimal128(10, 2)
    in_months = spark.read.format("parquet").load(str(path)).where(F.col(PART).isin(sorted(wanted))).count()
    assert read.rows == in_months < len(rows)  # physical rows of the two months' files, deleted ones too; March not read
    in_files = sum(f.stat().st_size for m in wanted for f in (path / f"{PART}={m}").glob("*.parquet"))
    assert 0 < read.bytes < in_files  # their column chunks, not their footers; March's not

    stamped = Table("t", table.columns[:3] + (Column("d", "TIMESTAMP"),) + table.columns[4:])
    assert driver_checks.matched(lake, state, stamped, dels, POSITION, wanted) is None
    wider = Table("t", table.columns[:4] + (Column("amount", "DECIMAL(12,2)"),))
    assert driver_checks.matched(lake, state, wider, dels, POSITION, wanted) is None


def test_a_table_laid_out_by_month_is_read_by_delta_only_when_most_of_it_has_deletion_vectors(tmp_path, spark, monkeypatch):
    """lake_tables.delta_reads: past DELTA_READS bytes of files with a deletion vector (here: any), an unpartitioned
    table is read by Delta's own reader; a table laid out by month only once those files hold half its live bytes
    (a night reads it a few months at a time, and only the marked months it reads pay the anti join). Either way
    read gives the same live rows as Delta's own reader."""
    from pyspark.sql import functions as F
    from runtime.lake import PART
    from spark_jobs.packages import TABLE_PROPERTIES

    monkeypatch.setattr(lake_tables, "DELTA_READS", 0)

    def table(path, by_month: bool) -> None:
        df = spark.range(300).select(F.col("id").cast("int").alias("k"),
                                     F.format_string("2026-%02d", (F.col("id") % 3 + 1).cast("int")).alias(PART))
        writer = df.repartition(1).write.format("delta")
        writer = writer.partitionBy(PART) if by_month else writer
        for key, value in TABLE_PROPERTIES.items():
            writer = writer.option(key, value)
        writer.save(str(path))

    def live(path) -> list:
        snap = delta.snapshot(path)
        return sorted(r["k"] for r in lake_tables.read(spark, path, snap.version).collect())

    flat, months = tmp_path / "flat", tmp_path / "months"
    table(flat, False)
    table(months, True)
    for path in (flat, months):
        spark.sql(f"DELETE FROM {delta_path(path)} WHERE k = 0")  # one deletion vector: one file of three months'
    assert lake_tables.delta_reads(delta.snapshot(flat))
    assert not lake_tables.delta_reads(delta.snapshot(months))
    assert live(months) == list(range(1, 300))
    spark.sql(f"DELETE FROM {delta_path(months)} WHERE k IN (1, 2)")  # every month's file has one now
    assert lake_tables.delta_reads(delta.snapshot(months))
    assert live(months) == list(range(3, 300))


def test_a_nights_commit_is_known_by_its_table_batch_and_step_wherever_the_lake_is(tmp_path):
    """delta.committed finds a night's commit by the table, the batch's sequence number and the step its mark
    names, whatever folder the lake is in: a mark naming the lake's old folder (as lakes wrote them before marks
    named no path) is the same night's commit; another table, batch or step, a commit nightshift did not mark, or
    one at or before the recorded version, is not."""
    import json

    from runtime import delta
    from runtime.lake import Lake

    table = tmp_path / "moved" / "lake" / "tables" / "pos"
    (table / "_delta_log").mkdir(parents=True)
    metas = ["not json", json.dumps({"team": "etl"}),
             json.dumps({"nightshift": "/elsewhere/lake", "table": "pos", "batch": 3, "step": "delete"}, sort_keys=True),
             json.dumps({"nightshift": "/elsewhere/lake", "table": "pos", "batch": 3}, sort_keys=True)]
    for v, meta in enumerate(metas):
        (table / "_delta_log" / f"{v:020d}.json").write_text(json.dumps({"commitInfo": {"userMetadata": meta}}) + "\n")
    lake = Lake(tmp_path / "moved" / "lake")
    assert delta.committed(table, lake.commit_mark("pos", 3), None)
    assert delta.committed(table, lake.commit_mark("pos", 3, "delete"), 1)
    assert not delta.committed(table, lake.commit_mark("pos", 3, "delete"), 2)  # at or before the recorded version
    assert not delta.committed(table, lake.commit_mark("pos", 4), None)
    assert not delta.committed(table, lake.commit_mark("items", 3), None)
    assert not delta.committed(table, lake.commit_mark("pos", 3, "append"), None)
    assert "elsewhere" not in lake.commit_mark("pos", 3) and str(tmp_path) not in lake.commit_mark("pos", 3)


def test_the_rows_a_delete_takes_chosen_in_arrow_are_the_ones_sparks_window_chooses(spark):
    """For a row image deleted n times, apply-base takes the first n equal base rows by place (Spark's <=>: NULL
    equals NULL, NaN equals NaN, -0.0 equals 0.0): the command's choice (sorting the base's and the deleted rows
    together) equals Spark's row_number window over the same rows, and an image deleted more often than the base
    holds it leaves the choice to Spark."""
    import random

    from lattice.ir import Column, Table
    from lattice.emit import rel
    from spark_jobs.lake_tables import POSITION

    table = Table("f", (Column("a", "INTEGER"), Column("s", "VARCHAR"), Column("x", "DOUBLE"),
                        Column("d", "DECIMAL(10,2)")))
    rng = random.Random(7)
    values = {"a": [None, 1, 2], "s": [None, "p", "q"], "x": [None, 0.0, -0.0, float("nan"), 1.5],
              "d": [None, Decimal("1.00"), Decimal("2.50")]}
    rows = [{c: rng.choice(v) for c, v in values.items()} for _ in range(400)]
    places = list(range(400))
    rng.shuffle(places)
    schema = pa.schema([("a", pa.int32()), ("s", pa.string()), ("x", pa.float64()), ("d", pa.decimal128(10, 2)),
                        (POSITION[0], pa.string()), (POSITION[1], pa.int64())])
    base = pa.Table.from_pylist([{**r, POSITION[0]: f"part-{p % 3}", POSITION[1]: p} for r, p in zip(rows, places)],
                                schema=schema)
    dels = pa.Table.from_pylist(rng.sample(rows, 120), schema=pa.schema(list(schema)[:4]))
    chosen = apply_base_step._chosen_rows(base, dels, table, list(POSITION))
    spark.createDataFrame(dels).createOrReplaceTempView(rel("del", "f"))
    expected = apply_base_step._chosen(spark, table, spark.createDataFrame(base), None).collect()
    assert chosen is not None and chosen.num_rows == 120
    assert sorted(zip(*[chosen.column(c).to_pylist() for c in POSITION])) == sorted(tuple(r) for r in expected)
    # an image deleted more often than the base holds it
    once = pa.Table.from_pylist([{**rows[0], POSITION[0]: "part-0", POSITION[1]: 0}], schema=schema)
    twice = pa.Table.from_pylist([rows[0], rows[0]], schema=pa.schema(list(schema)[:4]))
    assert apply_base_step._chosen_rows(once, twice, table, list(POSITION)) is None
    assert apply_base_step._chosen_rows(once, twice.slice(0, 1), table, list(POSITION)).num_rows == 1
