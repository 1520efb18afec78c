"""nightshift capture: table snapshots, Debezium CDC feeds and append-only logs become change
batches, compared with the lake's base as of the last applied batch; bad sources are refused with the file,
line or key, and nothing is written."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import BACKENDS
from harness import ARROW, COLUMNS, FIGURE_1, BatchGenerator, Model, make_project, run_nights, write_changes
from nightshift.capture import Source, capture, chosen_sources, configured_sources, source_path
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import BadChangeBatch, BatchOrderError, ConfigError
from nightshift.oracle import bag
from spark_jobs.apply_base import apply_base

ROOT = Path(__file__).resolve().parent.parent
EPOCH = dt.date(1970, 1, 1)


# ------------------------------------------------------------------ helpers


def write_parquet(path: Path, table: str, rows: list[tuple], schema: pa.Schema | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = schema or ARROW[table]
    pq.write_table(pa.Table.from_pydict({f.name: [r[i] for r in rows] for i, f in enumerate(schema)}, schema=schema), path)
    return path


def write_csv(path: Path, table: str, rows: list[tuple], header: list[str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header or COLUMNS[table])
        w.writerows([["" if v is None else v for v in r] for r in rows])
    return path


def write_snapshot(folder: Path, tables: dict[str, list[tuple]]) -> dict[str, Path]:
    """pos as two Parquet files, items as Parquet, stores as CSV (columns in another order than the schema)."""
    pos = tables["pos"]
    write_parquet(folder / "pos" / "part-0.parquet", "pos", pos[: len(pos) // 2])
    write_parquet(folder / "pos" / "part-1.parquet", "pos", pos[len(pos) // 2:])
    write_parquet(folder / "items.parquet", "items", tables["items"])
    write_csv(folder / "stores.csv", "stores", [(r[2], r[1], r[0]) for r in tables["stores"]], ["region", "city", "storeID"])
    return {"pos": folder / "pos", "items": folder / "items.parquet", "stores": folder / "stores.csv"}


def snapshot_sources(paths: dict[str, Path]) -> tuple[Source, ...]:
    return tuple(Source(t, "snapshot", str(p)) for t, p in paths.items())


def captured(root: Path, table: str, batch: str) -> Counter:
    """(op, row) of a captured batch."""
    folder = root / "lake" / "changes" / table / f"batch_id={batch}"
    data = pq.read_table(folder / "part-00000.parquet").to_pylist()
    return Counter((r["_op"], tuple(r[c] for c in COLUMNS[table])) for r in data)


def nothing_written(root: Path, batch: str) -> bool:
    changes = root / "lake" / "changes"
    return not list(changes.glob(f"*/batch_id={batch}")) and not list(changes.glob("*/_capture-*"))


def served(cycle) -> dict:
    return {v.name: bag(cycle.warehouse.read_view(v)) for v in cycle.plan.views}


def applied_model(model: Model, changes: dict) -> Model:
    out = Model()
    out.tables = {t: list(rows) for t, rows in model.tables.items()}
    out.apply(changes)
    return out


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "nightshift.cli", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="session")
def template(tmp_path_factory, spark_session):
    """A project (Figure 1's views) with its initial load and one night applied; copied per test."""
    root = make_project(tmp_path_factory.mktemp("capture") / "proj", FIGURE_1)
    model = Model()
    gen = BatchGenerator(17, model)
    cycle = Cycle(load_project(root), spark=spark_session, progress=lambda _: None)
    run_nights(cycle, root, gen, model, 1)
    cycle.close()
    return root, model


@pytest.fixture
def project(template, tmp_path):
    root, model = template
    copy = tmp_path / "proj"
    shutil.copytree(root, copy)
    return copy, applied_model(model, {})


def run_and_check(spark, root: Path, batch: str, model: Model) -> None:
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    cycle.run(batch)
    assert served(cycle) == model.recompute(FIGURE_1), f"batch {batch}: served views differ from the recomputation"
    cycle.close()


# ------------------------------------------------------------------ snapshots: the property


@pytest.mark.parametrize("backend,seed", [(b, s) for b in BACKENDS for s in (5, 6)])
def test_snapshot_capture_and_run_equal_a_materialize_from_the_snapshot(tmp_path, spark, warehouse_url, backend, seed):
    """Random base/snapshot pairs (a random night applied to the model: inserts, deletes, duplicates, NULLs,
    dimension rows changing, whole groups going): capture + run serves what a materialize from the last
    snapshot serves, and after every night what the views compute over the snapshot."""
    root = make_project(tmp_path / "incremental", FIGURE_1, url=warehouse_url(backend, f"cap_inc_{seed}"))
    model = Model()
    gen = BatchGenerator(seed, model)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    first = gen.initial()
    write_changes(root, "b0000", first)
    cycle.run("b0000")
    model.apply(first)
    for night in range(1, 4):
        batch = f"b{night:04d}"
        model.apply(gen.night())
        paths = write_snapshot(tmp_path / "extracts" / batch, model.tables)
        result = capture(load_project(root), batch, snapshot_sources(paths), spark=spark)
        assert {r.table for r in result.records} == {"pos", "items", "stores"} and not result.skipped
        cycle.run(batch)
        assert served(cycle) == model.recompute(FIGURE_1), f"seed {seed}, {batch}"
    incremental = served(cycle)
    cycle.close()

    other = make_project(tmp_path / "materialized", FIGURE_1, url=warehouse_url(backend, f"cap_mat_{seed}"))
    write_changes(other, "b0000", {t: [("insert", r) for r in rows] for t, rows in model.tables.items()})
    fresh = Cycle(load_project(other), spark=spark, progress=lambda _: None)
    apply_base(spark, fresh.plan, fresh.lake, "b0000", fresh.lake.state())
    fresh.materialize()
    assert served(fresh) == incremental
    fresh.close()


def test_a_changed_row_is_a_delete_and_an_insert_and_unchanged_rows_give_nothing(project, spark):
    root, model = project
    stores = list(model.tables["stores"])
    moved = (stores[0][0], "springfield", "north")
    new = (77, "shelbyville", "north")
    snapshot = {**model.tables, "stores": [moved, *stores[1:], new]}
    paths = write_snapshot(root / "extracts", snapshot)
    capture(load_project(root), "b0002", snapshot_sources(paths), spark=spark)
    assert captured(root, "stores", "b0002") == Counter({("delete", stores[0]): 1, ("insert", moved): 1, ("insert", new): 1})
    assert captured(root, "pos", "b0002") == Counter() and captured(root, "items", "b0002") == Counter()
    run_and_check(spark, root, "b0002", applied_model(model, {"stores": [("delete", stores[0]), ("insert", moved), ("insert", new)]}))


def test_capture_is_idempotent_and_never_overwrites_a_used_batch(project, spark):
    """An unchanged snapshot is an empty night (a file of zero rows); a rerun writes the same bytes; once
    propagate has read the batch, capture leaves it alone and says so."""
    root, model = project
    paths = write_snapshot(root / "extracts", model.tables)
    sources = snapshot_sources(paths)
    capture(load_project(root), "b0002", sources, spark=spark)
    files = sorted((root / "lake" / "changes").glob("*/batch_id=b0002/*"))
    assert [f.name for f in files] == ["_capture.json", "part-00000.parquet"] * 3
    first = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    assert all(pq.ParquetFile(f).metadata.num_rows == 0 for f in files if f.suffix == ".parquet")
    capture(load_project(root), "b0002", sources, spark=spark)
    assert {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files} == first

    changed = snapshot_sources(write_snapshot(root / "other", {**model.tables, "pos": model.tables["pos"][1:]}))
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    cycle.propagate("b0002")
    again = capture(load_project(root), "b0002", changed, spark=spark)
    assert again.skipped and "propagate has used batch b0002" in again.skipped and "never overwrites" in again.skipped
    cycle.refresh("b0002")
    cycle.apply_base("b0002")
    assert served(cycle) == model.recompute(FIGURE_1)  # an empty night
    cycle.close()
    again = capture(load_project(root), "b0002", changed, spark=spark)
    assert again.skipped and "b0002 is applied to the base" in again.skipped
    assert {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files} == first


def test_capture_refuses_a_stale_base_and_hand_written_batches(project, spark):
    root, model = project
    write_changes(root, "b0002", {"pos": []})  # landed by hand, not applied yet
    paths = write_snapshot(root / "extracts", model.tables)
    with pytest.raises(BatchOrderError, match="batch b0002 is not applied yet.*nightshift run --batch b0002"):
        capture(load_project(root), "b0003", snapshot_sources(paths), spark=spark)
    assert nothing_written(root, "b0003")
    with pytest.raises(BatchOrderError, match="holds change files nightshift capture did not write"):
        capture(load_project(root), "b0002", snapshot_sources(paths), spark=spark)
    with pytest.raises(BatchOrderError, match="batch b0001 is already applied"):
        capture(load_project(root), "a0001", snapshot_sources(paths), spark=spark)
    assert nothing_written(root, "a0001")


# ------------------------------------------------------------------ CDC: Debezium change events


def dbz(table: str, row: tuple | None, *, key_only: bool = False, price_as=str) -> dict | None:
    """A row image as Debezium's JSON converter writes it from PostgreSQL (names folded to lower case):
    DATE as days since the epoch, DECIMAL as a string (decimal.handling.mode=string) or a number (double)."""
    if row is None:
        return None
    out = {}
    for i, c in enumerate(COLUMNS[table]):
        v = row[i]
        if isinstance(v, dt.date):
            v = (v - EPOCH).days
        elif isinstance(v, Decimal):
            v = price_as(v) if price_as is str else float(v)
        out[c.lower()] = None if key_only and i > 0 else v
    return out


_TYPES = {"stores": ["int32", "string", "string"], "items": ["int32", "string", "double"],
          "pos": ["int32", "int32", "int32", "int32", "string"]}


def event(table: str, op: str, before: tuple | None = None, after: tuple | None = None, *, lsn: int | None = None,
          ts: int | None = None, envelope: bool = False, key_only: bool = False, price_as=str) -> str:
    payload = {"before": dbz(table, before, key_only=key_only, price_as=price_as), "after": dbz(table, after, price_as=price_as),
               "source": {"version": "2.7.0.Final", "connector": "postgresql", "name": "shop", "db": "shop",
                          "schema": "public", "table": table, "snapshot": "true" if op == "r" else "false",
                          "ts_ms": ts, "lsn": lsn, "txId": 771},
               "op": op, "ts_ms": (ts or 0) + 12}
    if not envelope:
        return json.dumps(payload)
    value = {"type": "struct", "optional": True, "name": f"shop.public.{table}.Value", "fields": [
        {"type": t, "optional": i > 0, "field": c.lower(), **({"name": "io.debezium.time.Date"} if c == "date" else {})}
        for i, (c, t) in enumerate(zip(COLUMNS[table], _TYPES[table]))]}
    schema = {"type": "struct", "optional": False, "name": f"shop.public.{table}.Envelope", "fields": [
        {**value, "field": "before"}, {**value, "field": "after"},
        {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "field": "source",
         "fields": [{"type": "int64", "optional": True, "field": "lsn"}, {"type": "int64", "optional": False, "field": "ts_ms"}]},
        {"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]}
    return json.dumps({"schema": schema, "payload": payload})


def feed(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_debezium_feed_collapses_each_key_and_serves_the_recomputation(project, spark):
    """Realistic PostgreSQL Debezium events, with and without the envelope: c/u/d/r; several events per key
    (collapsed in lsn order, not file order; by ts_ms where there is no lsn); updates whose before image is
    missing (REPLICA IDENTITY DEFAULT: the old row comes from the base) or full (REPLICA IDENTITY FULL: it must
    match); a key created, updated and deleted within the night; tombstones; a table without a primary key."""
    root, model = project
    stores, items, pos = model.tables["stores"], model.tables["items"], model.tables["pos"]
    s_old = stores[0]
    s_mid, s_new = (s_old[0], "newtown", "west"), (s_old[0], "othertown", "west")
    opened, read = (50, "springfield", "north"), (52, "capital", None)
    short_lived = (51, "ogdenville", "south")
    i_old = items[0]
    i_mid, i_new = (i_old[0], "c1", i_old[2]), (i_old[0], "c2", 4.5)
    sale = (50, items[1][0], dt.date(2026, 1, 6), 2, Decimal("3.50"))
    gone, fixed = pos[0], pos[1]
    fixed_new = (*fixed[:3], (fixed[3] or 0) + 5, fixed[4])
    flash = (opened[0], i_old[0], dt.date(2026, 1, 6), 1, Decimal("1.00"))
    files = {
        "stores": feed(root / "cdc" / "stores" / "b0002.json", [
            event("stores", "u", None, s_mid, lsn=100, ts=1000),
            event("stores", "c", None, opened, lsn=101, ts=1001, envelope=True),
            event("stores", "c", None, short_lived, lsn=102, ts=1002),
            event("stores", "u", short_lived, (51, "ogdenville", "south"), lsn=103, ts=1003),
            event("stores", "d", short_lived, None, lsn=104, ts=1004, key_only=True),
            "null",  # the tombstone after a delete (Kafka key, null value)
            json.dumps({"schema": None, "payload": None}),
            event("stores", "u", s_mid, s_new, lsn=105, ts=1005, key_only=True),  # key-only before: from the base
            event("stores", "r", None, read, lsn=None, ts=900),
        ]),
        "items": feed(root / "cdc" / "items" / "b0002.json", [  # the file is not in lsn order
            event("items", "u", i_mid, i_new, lsn=300, ts=3000, envelope=True),
            event("items", "u", i_old, i_mid, lsn=200, ts=2000),  # full before image (REPLICA IDENTITY FULL)
        ]),
        "pos": feed(root / "cdc" / "pos" / "b0002.json", [
            event("pos", "c", None, sale, lsn=400, envelope=True),
            event("pos", "d", gone, None, lsn=401, price_as=float),
            event("pos", "u", fixed, fixed_new, lsn=402),
            event("pos", "c", None, flash, lsn=403),
            event("pos", "d", flash, None, lsn=404),  # created and deleted tonight: nothing
        ]),
    }
    result = capture(load_project(root), "b0002", tuple(Source(t, "cdc", str(p)) for t, p in files.items()), spark=spark)
    assert {(r.table, r.inserted, r.deleted) for r in result.records} == {("stores", 3, 1), ("items", 1, 1), ("pos", 2, 2)}
    assert captured(root, "stores", "b0002") == Counter([("delete", s_old), ("insert", s_new), ("insert", opened), ("insert", read)])
    assert captured(root, "items", "b0002") == Counter([("delete", i_old), ("insert", i_new)])
    assert captured(root, "pos", "b0002") == Counter([("insert", sale), ("delete", gone), ("delete", fixed), ("insert", fixed_new)])
    changes = {t: [(op, row) for (op, row), n in captured(root, t, "b0002").items() for _ in range(n)] for t in files}
    model = applied_model(model, changes)
    run_and_check(spark, root, "b0002", model)

    # the next night: MySQL-style events without an lsn, ordered by source.ts_ms; a delete with the key only
    later = (opened[0], "shelbyville", "north")
    lines = [event("stores", "u", None, later, ts=6000),
             event("stores", "u", None, (opened[0], "springfield", "north"), ts=5000),
             event("stores", "d", read, None, ts=5500, key_only=True, envelope=True)]
    capture(load_project(root), "b0003", (Source("stores", "cdc", str(feed(root / "cdc" / "stores" / "b0003.json", lines))),), spark=spark)
    assert captured(root, "stores", "b0003") == Counter([("delete", opened), ("insert", later), ("delete", read)])
    run_and_check(spark, root, "b0003", applied_model(model, {"stores": [("delete", opened), ("insert", later), ("delete", read)]}))


def test_debezium_value_encodings(tmp_path, spark):
    """DATE as days since the epoch or ISO text; TIMESTAMP as epoch milliseconds, microseconds or nanoseconds
    (named by the envelope's schema, else by magnitude) or ISO text; DECIMAL as a string or a number."""
    schema = ("CREATE TABLE ev (id BIGINT PRIMARY KEY, at TIMESTAMP, day DATE, amount DECIMAL(12,3), ok BOOLEAN, "
              "score DOUBLE, label VARCHAR);")
    root = make_project(tmp_path / "p", {"v": "CREATE VIEW v AS SELECT day, COUNT(*) AS n, SUM(amount) AS total FROM ev GROUP BY day"},
                        schema_sql=schema)
    at = dt.datetime(2026, 3, 4, 5, 6, 7, 891000)
    micros = int((at - dt.datetime(1970, 1, 1)).total_seconds()) * 1_000_000 + at.microsecond
    old = dt.datetime(1969, 12, 31, 23, 0)  # before the epoch: negative, and small enough to look like milliseconds
    named = {"type": "struct", "fields": [{"type": "struct", "field": "after", "fields": [
        {"field": "id", "type": "int64"}, {"field": "at", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
        {"field": "day", "type": "int32", "name": "io.debezium.time.Date"}]}]}
    rows = [
        {"id": 1, "at": micros // 1000, "day": (dt.date(2026, 3, 4) - EPOCH).days, "amount": "12.345", "ok": True, "score": 1.5, "label": "ms"},
        {"id": 2, "at": micros, "day": "2026-03-04", "amount": 12.5, "ok": False, "score": -2, "label": "µs"},
        {"id": 3, "at": micros * 1000, "day": 0, "amount": "-0.001", "ok": None, "score": None, "label": "ns"},
        {"id": 4, "at": "2026-03-04T05:06:07.891Z", "day": -1, "amount": 7, "ok": "true", "score": "NaN", "label": None},
    ]
    lines = [json.dumps({"op": "c", "after": r, "source": {"lsn": i}}) for i, r in enumerate(rows)]
    lines.append(json.dumps({"schema": named, "payload": {"op": "c", "source": {"lsn": 9}, "after": {
        "id": 5, "at": -3_600_000_000, "day": 1, "amount": "0", "ok": False, "score": 0.0, "label": "named µs"}}}))
    capture(load_project(root), "b0001", (Source("ev", "cdc", str(feed(root / "ev.json", lines))),), spark=spark)
    got = {r["id"]: r for r in pq.read_table(root / "lake/changes/ev/batch_id=b0001/part-00000.parquet").to_pylist()}
    assert all(got[i]["at"].replace(tzinfo=None) == at for i in (1, 2, 3, 4))
    assert got[5]["at"].replace(tzinfo=None) == old
    assert [got[i]["day"] for i in (1, 2, 3, 4, 5)] == [dt.date(2026, 3, 4), dt.date(2026, 3, 4), EPOCH,
                                                        dt.date(1969, 12, 31), dt.date(1970, 1, 2)]
    assert [got[i]["amount"] for i in (1, 2, 3, 4)] == [Decimal("12.345"), Decimal("12.500"), Decimal("-0.001"), Decimal("7.000")]
    assert [got[i]["ok"] for i in (1, 2, 3, 4)] == [True, False, None, True]
    assert got[2]["score"] == -2.0 and got[3]["score"] is None and got[4]["score"] != got[4]["score"]  # NaN
    assert {r["_op"] for r in got.values()} == {"insert"}


# ------------------------------------------------------------------ append-only logs


def test_append_only_log_advances_its_watermark_with_the_batch(project, spark):
    """Rows whose since-column is beyond the last watermark become inserts; the watermark lives in the batch
    (_capture.json) and advances with it; a log whose newest value is older is refused."""
    root, model = project
    s, i = model.tables["stores"][0][0], model.tables["items"][0][0]
    day = lambda n: dt.date(2026, 2, n)  # noqa: E731
    first = [(s, i, day(1), 1, Decimal("1.00")), (s, i, day(2), 2, None)]
    log = write_parquet(root / "logs" / "b0002.parquet", "pos", first)
    (root / "nightshift.toml").write_text((root / "nightshift.toml").read_text()
                                          + '[capture.pos]\nkind = "append"\npath = "logs/{batch_id}.*"\nsince_column = "date"\n')
    project_ = load_project(root)
    assert configured_sources(project_) == (Source("pos", "append", "logs/{batch_id}.*", "date"),)
    capture(project_, "b0002", spark=spark)
    assert captured(root, "pos", "b0002") == Counter(("insert", r) for r in first)
    record = json.loads((root / "lake/changes/pos/batch_id=b0002/_capture.json").read_text())
    assert record["watermark"] == {"column": "date", "type": "DATE", "value": "2026-02-02"} and record["sources"] == [str(log)]
    model = applied_model(model, {"pos": [("insert", r) for r in first]})
    run_and_check(spark, root, "b0002", model)

    # the next log repeats what was captured and adds new rows (a CSV log this time)
    newer = [(s, i, day(3), 3, Decimal("2.50")), (s, i, day(3), None, Decimal("0.10"))]
    write_csv(root / "logs" / "b0003.csv", "pos", first + newer)
    r = run_cli("capture", "--project", str(root), "--batch", "b0003")
    assert r.returncode == 0, r.stderr
    assert "pos from append: 2 insert(s), 0 delete(s)" in r.stdout
    assert captured(root, "pos", "b0003") == Counter(("insert", r) for r in newer)
    run_and_check(spark, root, "b0003", applied_model(model, {"pos": [("insert", r) for r in newer]}))

    write_parquet(root / "logs" / "b0004.parquet", "pos", first)  # the log went back to February 2nd
    with pytest.raises(BadChangeBatch) as e:
        capture(load_project(root), "b0004", spark=spark)
    for needle in ("batch b0004", "table pos", "watermark would move backwards", "2026-02-02", "2026-02-03", "b0004.parquet"):
        assert needle in str(e.value), (needle, str(e.value))
    assert nothing_written(root, "b0004")


# ------------------------------------------------------------------ bad input: named, and nothing written


def _pos_row(model: Model) -> tuple:
    return (model.tables["stores"][0][0], model.tables["items"][0][0], dt.date(2026, 1, 2), 3, Decimal("1.50"))


def _bad_sources(root: Path, model: Model, case: str) -> tuple[Source, list[str]]:
    """(the source, what the error must say) of each refused input."""
    stores, pos = model.tables["stores"], model.tables["pos"]
    s0 = stores[0]
    if case == "duplicate_key":
        f = write_csv(root / "x" / "stores.csv", "stores", stores + [(s0[0], "elsewhere", "west")])
        return Source("stores", "snapshot", str(f)), [str(f), f"primary key (storeID={s0[0]})", "2 times"]
    if case == "missing_column":
        schema = pa.schema([f for f in ARROW["pos"] if f.name != "price"])
        f = write_parquet(root / "x" / "pos.parquet", "pos", [r[:4] for r in pos], schema)
        return Source("pos", "snapshot", str(f)), [str(f), "missing column(s) price"]
    if case == "mistyped_parquet":
        schema = pa.schema([pa.field("qty", pa.string()) if f.name == "qty" else f for f in ARROW["pos"]])
        f = write_parquet(root / "x" / "pos.parquet", "pos", [(*r[:3], str(r[3]), r[4]) for r in pos], schema)
        return Source("pos", "snapshot", str(f)), [str(f), "column qty has type string", "INTEGER"]
    if case == "mistyped_csv":
        f = write_csv(root / "x" / "pos.csv", "pos", pos + [(*_pos_row(model)[:3], "three", "1.50")])
        return Source("pos", "snapshot", str(f)), [str(f), "column qty holds 'three'", "does not convert to INTEGER"]
    if case == "null_key_column":
        f = write_parquet(root / "x" / "pos.parquet", "pos", pos + [(None, *_pos_row(model)[1:])])
        return Source("pos", "snapshot", str(f)), [str(f), "column storeID is NULL", "NOT NULL"]
    if case == "cdc_before_mismatch":
        wrong = (s0[0], "atlantis", s0[2])
        f = feed(root / "x" / "stores.json", [event("stores", "c", None, (90, "capital", None)),
                                               event("stores", "u", wrong, (s0[0], "capital", None))])
        return Source("stores", "cdc", str(f)), [f"{f} line 2", f"key (storeID={s0[0]})", "does not match",
                                                 "city is atlantis in the event"]
    if case == "cdc_delete_missing_key":
        f = feed(root / "x" / "stores.json", [event("stores", "d", (4242, None, None), None, key_only=True)])
        return Source("stores", "cdc", str(f)), [f"{f} line 1", "a delete of key (storeID=4242)", "does not exist"]
    if case == "cdc_create_existing_key":
        f = feed(root / "x" / "stores.json", [event("stores", "c", None, s0)])
        return Source("stores", "cdc", str(f)), [f"{f} line 1", f"a create of key (storeID={s0[0]})", "already exists in the base"]
    if case == "cdc_create_twice":
        new = (91, "capital", None)
        f = feed(root / "x" / "stores.json", [event("stores", "c", None, new, lsn=1), event("stores", "c", None, new, lsn=2)])
        return Source("stores", "cdc", str(f)), [f"{f} line 2", "(storeID=91)", "already exists in the batch"]
    if case == "cdc_mistyped":
        line = json.loads(event("pos", "c", None, _pos_row(model)))
        line["after"]["qty"] = "lots"
        f = feed(root / "x" / "pos.json", [event("pos", "c", None, _pos_row(model)), json.dumps(line)])
        return Source("pos", "cdc", str(f)), [f"{f} line 2", "column qty holds 'lots'", "INTEGER"]
    if case == "cdc_missing_column":
        line = json.loads(event("pos", "c", None, _pos_row(model)))
        del line["after"]["price"]
        f = feed(root / "x" / "pos.json", [json.dumps(line)])
        return Source("pos", "cdc", str(f)), [f"{f} line 1", "column price is missing from the after image"]
    if case == "cdc_malformed":
        f = feed(root / "x" / "pos.json", [event("pos", "c", None, _pos_row(model)), '{"op": "c", "after": {'])
        return Source("pos", "cdc", str(f)), [f"{f} line 2", "not a Debezium change event"]
    if case == "cdc_keyless_without_before":
        f = feed(root / "x" / "pos.json", [event("pos", "d", None, None)])  # REPLICA IDENTITY NOTHING
        return Source("pos", "cdc", str(f)), [f"{f} line 1", "needs the full before image", "REPLICA IDENTITY FULL"]
    if case == "cdc_keyless_missing_row":
        f = feed(root / "x" / "pos.json", [event("pos", "d", (*_pos_row(model)[:3], 4242, None), None)])
        return Source("pos", "cdc", str(f)), [f"{f} line 1", "a delete of a row that does not exist", "qty=4242"]
    if case == "no_files":
        return Source("pos", "snapshot", str(root / "x" / "nothing-*.parquet")), ["no snapshot files at", "nothing-*.parquet"]
    raise AssertionError(case)


BAD = ["duplicate_key", "missing_column", "mistyped_parquet", "mistyped_csv", "null_key_column", "cdc_before_mismatch",
       "cdc_delete_missing_key", "cdc_create_existing_key", "cdc_create_twice", "cdc_mistyped", "cdc_missing_column",
       "cdc_malformed", "cdc_keyless_without_before", "cdc_keyless_missing_row", "no_files"]


@pytest.mark.parametrize("case", BAD)
def test_bad_sources_are_refused_naming_file_line_or_key(project, spark, case):
    root, model = project
    source, needles = _bad_sources(root, model, case)
    good = Source("items", "snapshot", str(write_parquet(root / "ok" / "items.parquet", "items", model.tables["items"])))
    with pytest.raises(BadChangeBatch) as e:  # the good source read first is not written either
        capture(load_project(root), "b0002", (good, source), spark=spark)
    message = str(e.value)
    for needle in ("capture of batch b0002", f"table {source.table}", "nothing was written", *needles):
        assert needle in message, f"{needle!r} not in: {message}"
    assert nothing_written(root, "b0002")


def test_configuration_errors(tmp_path):
    """[capture.*] sections, command-line choices and path templates (no Spark: refused before any work)."""
    root = make_project(tmp_path / "p", FIGURE_1)
    toml = root / "nightshift.toml"
    text = toml.read_text()
    for section, needle in [
        ('[capture.sales]\nkind = "snapshot"\npath = "x"\n', "sales is not a table of sql/schema.sql"),
        ('[capture.pos]\nkind = "dump"\npath = "x"\n', "kind must be one of 'snapshot', 'cdc', 'append'"),
        ('[capture.pos]\nkind = "append"\npath = "x"\n', "an append source needs since_column"),
        ('[capture.pos]\nkind = "cdc"\npath = "x"\nsince_column = "date"\n', "since_column applies to append sources only"),
        ('[capture.pos]\nkind = "cdc"\npath = "x"\nformat = "avro"\n', "unknown key(s) format"),
    ]:
        toml.write_text(text + section)
        with pytest.raises(ConfigError, match="nightshift.toml: \\[capture") as e:
            configured_sources(load_project(root))
        assert needle in str(e.value)
    toml.write_text(text)
    project_ = load_project(root)
    with pytest.raises(ConfigError, match="no \\[capture.<table>\\] sources"):
        capture(project_, "b0002")
    with pytest.raises(ConfigError, match="--snapshot PATH needs --table T"):
        chosen_sources(project_, snapshot="x.parquet")
    with pytest.raises(ConfigError, match="--append PATH needs --since-column"):
        chosen_sources(project_, table="pos", append="x.parquet")
    with pytest.raises(ConfigError, match="no \\[capture.pos\\] source"):
        chosen_sources(project_, table="POS")
    assert chosen_sources(project_, table="POS", cdc="feed.json") == (Source("pos", "cdc", os.path.abspath("feed.json")),)
    dated = Source("pos", "snapshot", "extracts/{ds}/pos-{batch_id}.parquet")
    assert source_path(project_, dated, "20261102") == str(root / "extracts/2026-11-02/pos-20261102.parquet")
    assert source_path(project_, dated, "b7", ds="2026-01-31") == str(root / "extracts/2026-01-31/pos-b7.parquet")
    with pytest.raises(ConfigError, match="uses \\{ds\\}, but batch id b7 is not a date"):
        source_path(project_, dated, "b7")
    with pytest.raises(ConfigError, match="unknown placeholder \\{date\\}"):
        source_path(project_, Source("pos", "snapshot", "/x/{date}.csv"), "b7")


def test_capture_command_line(project):
    root, model = project
    r = run_cli("capture", "--help")
    assert r.returncode == 0 and "--snapshot" in r.stdout and "--cdc" in r.stdout and "--since-column" in r.stdout
    f = write_csv(root / "x" / "stores.csv", "stores", model.tables["stores"] + [model.tables["stores"][0]])
    r = run_cli("capture", "--project", str(root), "--batch", "b0002", "--table", "stores", "--snapshot", str(f))
    assert r.returncode == 1 and "primary key" in r.stderr and str(f) in r.stderr and nothing_written(root, "b0002")


# ------------------------------------------------------------------ the DAG's capture task


@pytest.mark.slow
def test_dag_captures_the_configured_sources_before_choosing_the_night(tmp_path):
    """[capture.*] in nightshift.toml: the DAG gains capture -> choose_batch, a spark-submit of nightshift capture
    with the night's {ds}; the first night's extracts load an empty project; a rerun of capture after the night
    skips (propagate has read the batch) and changes nothing."""
    from nightshift.example import SCHEMAS, RetailGenerator, init_project
    from nightshift.oracle import check_all
    from test_dags import run_dag, states

    project = tmp_path / "shop"
    init_project(project, None, 0)
    gen = RetailGenerator(seed=3)
    gen.initial(2000)
    for table, frame in (("stores", gen.stores), ("items", gen.items), ("pos", gen.pos)):
        schema = pa.schema([f for f in SCHEMAS[table] if f.name != "_op"])
        path = project / "extracts" / "2026-03-01" / f"{table}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)
    toml = project / "nightshift.toml"
    toml.write_text(toml.read_text() + "".join(f'\n[capture.{t}]\nkind = "snapshot"\npath = "extracts/{{ds}}/{t}.parquet"\n'
                                               for t in ("stores", "items", "pos")))
    runs = [{"label": "night", "conf": {"batch_id": "20260301"}, "mark_success": "validate|publish"},
            {"label": "again", "conf": {"batch_id": "20260301"}, "mark_success": "(?!capture$).*"}]
    result, r = run_dag(tmp_path, project, runs)
    log = r.stdout + r.stderr
    assert result["import_errors"] == {} and result["graph"]["capture"] == ["choose_batch"], log[-3000:]
    assert "stores, items, pos" not in result["docs"]["capture"] and "items, pos, stores" in result["docs"]["capture"]
    night = result["runs"]["night"]
    assert night["state"] == "success", (states(night), log[-4000:])
    assert states(night)["capture"] == "success" and states(night)["apply_base"] == "success"
    assert "capture 20260301: stores +100 -0, items +1000 -0, pos +2000 -0" in log
    again = result["runs"]["again"]
    assert again["state"] == "success" and "capture 20260301: skipped (batch 20260301 is applied to the base" in log
    cycle = Cycle(load_project(project), progress=lambda _: None)
    assert cycle.status("20260301") == "done" and check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
    assert sorted(p.name for p in (project / "lake" / "changes" / "pos" / "batch_id=20260301").iterdir()) == [
        "_capture.json", "part-00000.parquet"]
    cycle.close()


def test_capture_bench_runs_at_a_tiny_size(tmp_path, spark):
    """bench/capture.py end to end on a tiny base (its numbers belong to an idle machine at pos 10M)."""
    from bench.capture import main

    out = tmp_path / "CAPTURE.md"
    assert main(["--pos", "3000", "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    text = out.read_text()
    for needle in ("python -m bench.capture --pos 3000", "load average", "3,000 `pos` rows", "capture / propagate",
                   "Every run ended with every served view equal to DuckDB's recompute", "| 1 |"):
        assert needle in text, needle
    result = json.loads((tmp_path / "work" / "capture.json").read_text())
    assert result["pos"] == 3000 and result["runs"][0]["inserted"] == result["runs"][0]["deleted"] == 1


def test_demo_captures_a_snapshot_night_and_a_cdc_night(tmp_path, spark, capsys):
    """`nightshift demo` (what `make demo` runs): after the example's batches, one night lands as full extracts
    and one as a Debezium feed; both are captured and run, and the lake's base ends where the generator's
    tables end (so both captures wrote exactly the nights' changes)."""
    from nightshift.cli import main
    from nightshift.example import RetailGenerator
    from nightshift.example_sources import cdc_night, snapshot_night
    from nightshift.oracle import duckdb_base
    from runtime.lake import Lake

    target = tmp_path / "demo"
    assert main(["demo", "--dir", str(target), "--rows", "3000", "--nights", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 landed as sources (20261103: snapshot, 20261104: cdc)" in out
    assert "20261103 captured from snapshot sources" in out and "20261104 captured from cdc sources" in out
    assert "every summary table equals its recomputation" in out
    assert sorted(p.name for p in (target / "sources" / "cdc" / "items").iterdir()) == ["20261104.json"]
    gen = RetailGenerator(7)  # the demo's generator, replayed: its tables after the two landed nights
    gen.write(tmp_path / "replay" / "lake", 3000, 1)
    snapshot_night(gen, tmp_path / "replay", 2, 100)
    cdc_night(gen, tmp_path / "replay", 3, 100)
    con = duckdb_base(Lake(target / "lake"), load_project(target).plan.schema)
    for table, frame in (("pos", gen.pos), ("items", gen.items), ("stores", gen.stores)):  # columns in schema order
        expected = [tuple(r.values()) for r in pa.Table.from_pandas(frame, preserve_index=False).to_pylist()]
        assert bag(con.execute(f'SELECT * FROM "{table}"').fetchall()) == bag(expected), table
    con.close()


def test_demo_sources_of_a_relative_project_folder_are_found(tmp_path, monkeypatch):
    """make demo runs `nightshift demo --dir demo-project`: the sources it lands must be found from the
    project's nightshift.toml whatever the working folder (a relative path was read relative to the project
    folder a second time, demo-project/demo-project/sources/...)."""
    from nightshift.example_sources import init_demo

    monkeypatch.chdir(tmp_path)
    _, nights = init_demo(Path("demo-project"), rows=2000, nights=1)
    paths = [Path(s.path) for night in nights for s in night.sources]
    assert paths and all(p.is_absolute() and p.exists() for p in paths), paths
    project = load_project(tmp_path / "demo-project")
    assert all(Path(source_path(project, s, night.batch)).exists() for night in nights for s in night.sources)
