"""nightshift load: change batches from CSV, JSON lines and Parquet, exactly typed, all problems at once,
nothing written on error, key-only deletes expanded from the base, parts appended to one batch."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nightshift.config import load_project
from nightshift.errors import BadChangeBatch
from nightshift.load import batch_schema, coerce, landed_info, load
from runtime.lake import Lake, LakeState

ROOT = Path(__file__).resolve().parent.parent

SCHEMA = """
CREATE TABLE zones (
    zone_id INTEGER PRIMARY KEY,
    borough VARCHAR NOT NULL,
    city    VARCHAR NOT NULL
);
CREATE TABLE trips (
    trip_id BIGINT PRIMARY KEY,
    zone_id INTEGER NOT NULL REFERENCES zones(zone_id),
    d       DATE NOT NULL,
    fare    DECIMAL(10,2),
    km      DOUBLE
);
"""
VIEW = """CREATE VIEW fares_by_city AS
SELECT z.city, t.d, COUNT(*) AS trips, SUM(t.fare) AS fares
FROM trips t JOIN zones z ON t.zone_id = z.zone_id
GROUP BY z.city, t.d;
"""


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "rides"
    (root / "sql" / "summaries").mkdir(parents=True)
    (root / "lake" / "changes").mkdir(parents=True)
    (root / "nightshift.toml").write_text('[lake]\npath = "lake"\n[warehouse]\nurl = "duckdb:///warehouse.duckdb"\n')
    (root / "sql" / "schema.sql").write_text(SCHEMA)
    (root / "sql" / "summaries" / "fares_by_city.sql").write_text(VIEW)
    return load_project(root)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def parts(project, table: str, batch: str) -> list[Path]:
    return sorted(Lake(project.lake).change_dir(table, batch).glob("*.parquet"))


def test_csv_is_written_with_the_exact_types(project, tmp_path):
    f = write(tmp_path / "trips.csv", "trip_id,zone_id,d,fare,km\n1,1,2026-01-02,12.5,3.25\n2,1,2026-01-02,,\n")
    r = load(project, "b1", "trips", [f])
    assert r.rows == 2 and r.op == "insert"
    t = pq.read_table(r.path)
    assert t.schema.equals(batch_schema(project.plan.schema.table("trips")))
    assert t.schema.field("fare").type == pa.decimal128(10, 2) and t.schema.field("zone_id").type == pa.int32()
    rows = t.to_pylist()
    assert rows[0] == {"trip_id": 1, "zone_id": 1, "d": dt.date(2026, 1, 2), "fare": Decimal("12.50"), "km": 3.25,
                       "_op": "insert"}
    assert rows[1]["fare"] is None and rows[1]["km"] is None  # an empty CSV field is NULL


def test_jsonl_and_parquet_inputs(project, tmp_path):
    f = write(tmp_path / "zones.jsonl", '{"zone_id": 1, "borough": "Soho", "city": "London"}\n\n'
                                        '{"zone_id": 2.0, "borough": "Mitte", "city": "Berlin"}\n')
    assert load(project, "b1", "zones", [f]).rows == 2
    pandas_like = pa.table({"trip_id": pa.array([1, 2], pa.int64()), "zone_id": pa.array([1, 2], pa.int64()),
                            "d": pa.array(["2026-01-02", "2026-01-03"]), "fare": pa.array([0.1, 12.5]),
                            "km": pa.array([1, 2], pa.int64())})
    pq.write_table(pandas_like, tmp_path / "trips.parquet")
    r = load(project, "b1", "trips", [tmp_path / "trips.parquet"])
    t = pq.read_table(r.path)
    assert t.column("fare").to_pylist() == [Decimal("0.10"), Decimal("12.50")]  # a float by its shortest repr
    assert t.column("d").to_pylist() == [dt.date(2026, 1, 2), dt.date(2026, 1, 3)]
    assert t.schema.field("km").type == pa.float64()


def test_decimal_from_float_exact_and_inexact():
    assert coerce(12.5, "DECIMAL(10,2)") == Decimal("12.50")
    assert coerce(0.1, "DECIMAL(10,2)") == Decimal("0.10")
    assert coerce("1.10", "DECIMAL(10,2)") == Decimal("1.10")
    with pytest.raises(ValueError, match="more than 2 decimal"):
        coerce(1.005, "DECIMAL(10,2)")
    with pytest.raises(ValueError, match="too large"):
        coerce(123456789.0, "DECIMAL(10,2)")
    assert coerce(3.0, "INTEGER") == 3 and coerce("7", "BIGINT") == 7
    with pytest.raises(ValueError, match="whole number"):
        coerce(3.5, "INTEGER")
    with pytest.raises(ValueError, match="out of range"):
        coerce(2**31, "INTEGER")
    assert coerce("2026-01-02T10:00:00", "TIMESTAMP") == dt.datetime(2026, 1, 2, 10)
    with pytest.raises(ValueError, match="time of day"):
        coerce("2026-01-02T10:00:00", "DATE")


def test_every_problem_of_every_file_at_once_and_nothing_written(project, tmp_path):
    a = write(tmp_path / "a.csv", "trip_id,zone_id,d,fare,km\n1,1,2026-01-02,1.005,x\n2,,2026-13-01,2,1\n")
    b = write(tmp_path / "b.jsonl", '{"trip_id": 3, "zone_id": 1, "d": "2026-01-02", "fare": 4.5, "km": "far"}\n')
    c = write(tmp_path / "c.csv", "trip_id,zone_id,d\n4,1,2026-01-02\n")
    with pytest.raises(BadChangeBatch) as e:
        load(project, "b1", "trips", [a, b, c])
    msg = str(e.value)
    assert "nothing was written" in msg and "6 problem(s)" in msg, msg
    assert f"{a}: row 1, column fare: '1.005' is not DECIMAL(10,2)" in msg
    assert f"{a}: row 1, column km: 'x' is not DOUBLE" in msg
    assert f"{a}: row 2, column zone_id: NULL" in msg and f"{a}: row 2, column d: '2026-13-01' is not DATE" in msg
    assert f"{b}: row 1, column km: 'far' is not DOUBLE" in msg
    assert f"{c}: missing column(s) fare, km" in msg
    assert not parts(project, "trips", "b1") and not list((project.lake / "changes").rglob("*.tmp"))


def test_key_only_delete_is_expanded_from_the_base(project, tmp_path):
    from deltalake import write_deltalake

    lake = Lake(project.lake)
    rows = pa.table({"trip_id": pa.array([10, 11], pa.int64()), "zone_id": pa.array([1, 2], pa.int32()),
                     "d": pa.array([dt.date(2026, 1, 1)] * 2, pa.date32()),
                     "fare": pa.array([Decimal("9.99"), None], pa.decimal128(10, 2)), "km": pa.array([1.5, 2.5]),
                     "__ns_batch": pa.array([1, 1], pa.int64()), "__ns_row": pa.array([0, 1], pa.int64())})
    write_deltalake(str(lake.table_path("trips")), rows)  # the base as a Delta table, its hidden columns left out
    lake.write_state(LakeState(("b0",), {"trips": 0}))
    keys = write(tmp_path / "gone.csv", "trip_id\n11\n")
    r = load(project, "b1", "trips", [keys], op="delete")
    assert r.expanded == 1
    assert pq.read_table(r.path).to_pylist() == [{"trip_id": 11, "zone_id": 2, "d": dt.date(2026, 1, 1), "fare": None,
                                                  "km": 2.5, "_op": "delete"}]
    # the same key again: this batch already deletes it; an unknown key: named
    again = write(tmp_path / "again.csv", "trip_id\n11\n99\n")
    with pytest.raises(BadChangeBatch) as e:
        load(project, "b1", "trips", [again], op="delete")
    msg = str(e.value)
    assert "row 1, column trip_id: no trips row with key (trip_id=11)" in msg and "already deletes it" in msg
    assert "row 2, column trip_id: no trips row with key (trip_id=99)" in msg
    assert len(parts(project, "trips", "b1")) == 1


def test_key_only_delete_finds_rows_of_an_earlier_landed_batch(project, tmp_path):
    ins = write(tmp_path / "t.csv", "trip_id,zone_id,d,fare,km\n5,1,2026-01-02,3.50,1\n")
    load(project, "b1", "trips", [ins])
    r = load(project, "b2", "trips", [write(tmp_path / "k.jsonl", '{"trip_id": 5}\n')], op="delete")
    assert pq.read_table(r.path).column("fare").to_pylist() == [Decimal("3.50")]
    with pytest.raises(BadChangeBatch, match=r"no trips row with key \(trip_id=6\)"):  # a missing key
        load(project, "b2", "trips", [write(tmp_path / "k6.csv", "trip_id\n6\n")], op="delete")


def test_loads_append_parts_of_one_batch_and_an_applied_batch_is_refused(project, tmp_path):
    f = write(tmp_path / "z.csv", "zone_id,borough,city\n1,Soho,London\n")
    g = write(tmp_path / "z2.csv", "zone_id,borough,city\n2,Mitte,Berlin\n")
    load(project, "b1", "zones", [f])
    load(project, "b1", "zones", [g])
    files = parts(project, "zones", "b1")
    assert [p.name for p in files] == ["part-00000.parquet", "part-00001.parquet"]
    assert pq.read_schema(files[0]).equals(pq.read_schema(files[1]))
    info = landed_info(Lake(project.lake), ["zones", "trips"], "b1")
    assert info.inserted == {"zones": 2, "trips": 0} and info.deleted == {"zones": 0, "trips": 0}
    Lake(project.lake).write_state(LakeState(("b1",), {}))
    with pytest.raises(BadChangeBatch, match="batch b1 is applied to the base"):
        load(project, "b1", "zones", [g])
    with pytest.raises(BadChangeBatch, match="use a batch id after b1"):
        load(project, "a0", "zones", [g])


def test_a_loaded_batch_passes_the_batch_checks_file_rules(project, tmp_path):
    """spark_jobs.changes checks the files' columns, types, _op and NOT NULL with pyarrow before Spark runs:
    what load writes passes them."""
    from spark_jobs.changes import _check_files

    load(project, "b1", "zones", [write(tmp_path / "z.csv", "zone_id,borough,city\n1,Soho,London\n")])
    load(project, "b1", "trips", [write(tmp_path / "t.jsonl", '{"trip_id": 1, "zone_id": 1, "d": "2026-01-02", '
                                                             '"fare": 2.5, "km": 1}\n')])
    load(project, "b1", "trips", [write(tmp_path / "t2.csv", "trip_id,zone_id,d,fare,km\n2,1,2026-01-03,,\n")])
    schema = project.plan.schema
    assert _check_files(schema.table("zones"), "b1", parts(project, "zones", "b1")) == (1, 0)
    assert _check_files(schema.table("trips"), "b1", parts(project, "trips", "b1")) == (2, 0)


def test_load_command_starts_no_jvm_and_no_other_process(project, tmp_path):
    # Loading a batch needs neither Spark nor any other program: PySpark (and its py4j gateway, the only way
    # nightshift starts a JVM in-process) is never imported, and no child process runs at all (a child the
    # command waited for would leave its peak memory in RUSAGE_CHILDREN; one left running would be listed).
    f = write(tmp_path / "z.csv", "zone_id,borough,city\n1,Soho,London\n")
    code = ("import sys, resource, multiprocessing; from nightshift.cli import main; rc = main(sys.argv[1:]); "
            "print('pyspark loaded' if {'pyspark', 'py4j'} & set(sys.modules) else 'no pyspark'); "
            "print('children', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
            "len(multiprocessing.active_children())); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, "load", "--project", str(project.root), "--batch", "b1",
                        "--table", "zones", str(f)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "load b1: 1 insert(s) of zones" in r.stdout and "no pyspark" in r.stdout and not r.stderr
    assert "children 0 0" in r.stdout, r.stdout
    bad = write(tmp_path / "bad.csv", "zone_id,borough\nx,Soho\n")
    r = subprocess.run([sys.executable, "-m", "nightshift.cli", "load", "--project", str(project.root), "--batch", "b1",
                        "--table", "zones", str(bad)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 1 and "missing column(s) city" in r.stderr


@pytest.mark.slow
def test_a_loaded_batch_runs(project, tmp_path):
    """The whole night over a batch written by load, then a key-only delete night."""
    from nightshift.cycle import Cycle

    load(project, "b1", "zones", [write(tmp_path / "z.csv", "zone_id,borough,city\n1,Soho,London\n2,Mitte,Berlin\n")])
    load(project, "b1", "trips", [write(tmp_path / "t.csv", "trip_id,zone_id,d,fare,km\n1,1,2026-01-02,2.5,1\n"
                                                              "2,2,2026-01-02,4,2\n3,2,2026-01-03,0.1,\n")])
    cycle = Cycle(project, progress=lambda m: None)
    cycle.run("b1")
    load(project, "b2", "trips", [write(tmp_path / "k.csv", "trip_id\n3\n")], op="delete")
    cycle.run("b2")
    got = sorted(cycle.warehouse.read_view(project.plan.view("fares_by_city")))
    assert [(r[0], r[2], r[3]) for r in got] == [("Berlin", 1, Decimal("4.00")), ("London", 1, Decimal("2.50"))]
    cycle.close()


def test_a_header_only_file_is_an_empty_part(project, tmp_path):
    """A night with no changes for a table: its file holds zero rows, with the table's columns and _op."""
    r = load(project, "b1", "zones", [write(tmp_path / "z.csv", "zone_id,borough,city\n")])
    assert r.rows == 0 and pq.read_schema(r.path).names == ["zone_id", "borough", "city", "_op"]
