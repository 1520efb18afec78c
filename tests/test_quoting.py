"""SQL text from one place (lattice/sql.py): identifiers and literals for Spark, DuckDB and PostgreSQL,
and a schema whose table and column names hold a backtick, a double quote and an apostrophe (and a column named
rowid), carried
through the batch checks, propagate along the lattice, refresh, the oracle and validation."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from conftest import BACKENDS, PG_URL
from lattice.sql import ident, literal, to_dialect
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import BadChangeBatch
from nightshift.oracle import bag, check_all

ODD_NAMES = ['plain', 'sp ace', 'dq"uote', 'bt`ick', "ap'os", 'all"`\' three', "select"]
ODD_VALUES = ["plain", "it's", 'say "hi"', "back\\slash", "tick`", "", "o'brien\\'s \"x\""]


@pytest.mark.parametrize("engine", ["duckdb", "postgres", "neutral"])
def test_names_and_values_round_trip_without_spark(engine):
    """Every odd name comes back as the column name and every odd value as the value."""
    cols = ", ".join(f"{literal(v, engine)} AS {ident(n, engine)}" for n, v in zip(ODD_NAMES, ODD_VALUES))
    sql = to_dialect(f"SELECT {cols}", engine) if engine != "neutral" else f"SELECT {cols}"
    if engine == "postgres":
        engine_ = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool)
        try:
            with engine_.connect() as c:
                r = c.exec_driver_sql(sql)
                names, row = list(r.keys()), tuple(r.fetchone())
        except sa.exc.OperationalError:
            pytest.skip("PostgreSQL unreachable")
        finally:
            engine_.dispose()
    else:  # DuckDB runs the neutral text too: it is the compiler's own dialect
        con = duckdb.connect()
        cur = con.execute(sql)
        names, row = [d[0] for d in cur.description], cur.fetchone()
        con.close()
    assert names == ODD_NAMES and row == tuple(ODD_VALUES)


@pytest.mark.slow
def test_names_and_values_round_trip_in_spark(spark):
    cols = ", ".join(f"{literal(v)} AS {ident(n)}" for n, v in zip(ODD_NAMES, ODD_VALUES))
    df = spark.sql(to_dialect(f"SELECT {cols}", "spark"))
    assert df.columns == ODD_NAMES and tuple(df.collect()[0]) == tuple(ODD_VALUES)
    direct = ", ".join(f"{literal(v, 'spark')} AS {ident(n, 'spark')}" for n, v in zip(ODD_NAMES, ODD_VALUES))
    df = spark.sql(f"SELECT {direct}")
    assert df.columns == ODD_NAMES and tuple(df.collect()[0]) == tuple(ODD_VALUES)


def test_literals_of_every_type():
    assert literal(None) == "NULL" and literal(True) == "TRUE" and literal(3) == "3"
    assert literal(dt.date(2026, 1, 2)) == "DATE '2026-01-02'"
    assert literal("a\\b'c", "spark") == "'a\\\\b\\'c'" and literal("a\\b'c", "postgres") == "'a\\b''c'"
    with pytest.raises(ValueError, match="unknown SQL engine"):
        ident("x", "oracle")


# ---------------------------------------------------------------- a whole cycle over odd names

STORES, POS = 'sto`res', 'p"os'
# REGION is a group key of by_tag named as DuckDB's row-id pseudo-column: refresh replaces a changed group's row
# without it (warehouse.dialects.DuckDBDialect.merge_delta)
SID, CITY, REGION = 'store"id', 'ci`ty', 'rowid'
DATE, QTY, TAG = 'da`te', 'q"ty', "it's"
SCHEMA = f"""
CREATE TABLE {ident(STORES)} ({ident(SID)} INTEGER PRIMARY KEY, {ident(CITY)} VARCHAR, {ident(REGION)} VARCHAR);
CREATE TABLE {ident(POS)} ({ident(SID)} INTEGER NOT NULL REFERENCES {ident(STORES)}({ident(SID)}),
    {ident(DATE)} DATE, {ident(QTY)} INTEGER, {ident(TAG)} VARCHAR);
"""
JOIN = f"FROM {ident(POS)} p JOIN {ident(STORES)} s ON p.{ident(SID)} = s.{ident(SID)}"
V_CITY, V_TAG, V_STORE = "by`city", 'by"tag', "by store"
N, TOTAL, FIRST, AVG, LAST, QS = 'n"rows', "to`tal", 'fir"st', "a`vg", "la st", "q`s"
VIEWS = {
    "by_city": f"CREATE VIEW {ident(V_CITY)} AS SELECT s.{ident(CITY)}, COUNT(*) AS {ident(N)}, "
               f"SUM(p.{ident(QTY)}) AS {ident(TOTAL)}, MIN(p.{ident(DATE)}) AS {ident(FIRST)} {JOIN} "
               f"GROUP BY s.{ident(CITY)}",
    "by_tag": f"CREATE VIEW {ident(V_TAG)} AS SELECT s.{ident(REGION)}, p.{ident(TAG)}, "
              f"AVG(p.{ident(QTY)}) AS {ident(AVG)}, MAX(p.{ident(DATE)}) AS {ident(LAST)} {JOIN} "
              f"WHERE p.{ident(TAG)} <> 'o''brien' GROUP BY s.{ident(REGION)}, p.{ident(TAG)}",
    "by_store": f"CREATE VIEW {ident(V_STORE)} AS SELECT p.{ident(SID)}, p.{ident(DATE)}, COUNT(*) AS n, "
                f"SUM(p.{ident(QTY)}) AS {ident(QS)} FROM {ident(POS)} p GROUP BY p.{ident(SID)}, p.{ident(DATE)}",
}
ARROW = {
    STORES: pa.schema([(SID, pa.int32()), (CITY, pa.string()), (REGION, pa.string())]),
    POS: pa.schema([(SID, pa.int32()), (DATE, pa.date32()), (QTY, pa.int32()), (TAG, pa.string())]),
}


def _write(root, batch, table, rows):
    d = root / "lake" / "changes" / table / f"batch_id={batch}"
    d.mkdir(parents=True, exist_ok=True)
    names = ARROW[table].names
    data = {c: [r[i] for _, r in rows] for i, c in enumerate(names)} | {"_op": [op for op, _ in rows]}
    pq.write_table(pa.Table.from_pydict(data, schema=ARROW[table].append(pa.field("_op", pa.string()))), d / "part-0.parquet")


def _expected(pos, stores) -> dict[str, Counter]:
    """The three views computed in plain Python from the model rows (independent of every engine)."""
    city = {s[0]: s[1] for s in stores}
    region = {s[0]: s[2] for s in stores}
    by_city, by_tag, by_store = {}, {}, {}
    for sid, day, qty, tag in pos:
        by_city.setdefault(city[sid], []).append((qty, day))
        if tag is not None and tag != "o'brien":
            by_tag.setdefault((region[sid], tag), []).append((qty, day))
        by_store.setdefault((sid, day), []).append(qty)

    def nn(xs):
        return [x for x in xs if x is not None]

    out = {
        V_CITY: bag((c, len(v), sum(nn(q for q, _ in v)) if nn(q for q, _ in v) else None, min(nn(d for _, d in v), default=None))
                       for c, v in by_city.items()),
        V_TAG: bag((r, t, (sum(nn(q for q, _ in v)) / len(nn(q for q, _ in v))) if nn(q for q, _ in v) else None,
                       max(nn(d for _, d in v), default=None)) for (r, t), v in by_tag.items()),
        V_STORE: bag((s, d, len(v), sum(nn(v)) if nn(v) else None) for (s, d), v in by_store.items()),
    }
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_odd_names_through_the_whole_cycle(tmp_path, spark, quiet, warehouse_url, backend, monkeypatch):
    from harness import make_project
    from nightshift.validate import validate_batch

    monkeypatch.setenv("NIGHTSHIFT_LATTICE_STATS_ROWS", "0")  # measured sizes: by_city derives from by_store
    root = make_project(tmp_path / "odd", VIEWS, schema_sql=SCHEMA, url=warehouse_url(backend, "odd"), maintain="incremental")
    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text().replace('stores = ["city -> region"]', ""))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    d = dt.date(2026, 1, 1)
    stores = [(1, "it's", "n\"orth"), (2, "back\\slash", None), (3, None, "south`")]
    pos = [(1, d, 2, "o'brien"), (1, d + dt.timedelta(1), 3, 'say "hi"'), (2, d, None, "tick`"), (3, d, 5, None),
           (2, d + dt.timedelta(2), 1, "tick`")]
    _write(root, "b0", STORES, [("insert", s) for s in stores])
    _write(root, "b0", POS, [("insert", p) for p in pos])
    cycle.run("b0")
    # the earliest sale of city "it's" goes (exact MIN along the lattice), a new store arrives
    new_store = (4, "it's", "n\"orth")
    changes = [("delete", pos[0]), ("insert", (4, d + dt.timedelta(5), 7, "x'y")), ("insert", (1, d + dt.timedelta(3), None, "o'brien"))]
    _write(root, "b1", STORES, [("insert", new_store)])
    _write(root, "b1", POS, changes)
    cycle.run("b1")
    stores.append(new_store)
    pos.remove(pos[0])
    pos += [r for op, r in changes if op == "insert"]
    # a delete of a row that does not exist: refused, naming the columns with their odd names
    _write(root, "b2", POS, [("delete", (3, d, 99, None))])
    with pytest.raises(BadChangeBatch, match=r"table p\"os: delete of a row that does not exist: .*q\"ty=99"):
        cycle.run("b2")
    night = [("delete", (3, d, 5, None)), ("insert", (2, d, 4, "tick`"))] + [("insert", (3, d, q, "it's")) for q in (6, 1, 2, 3, 4)]
    _write(root, "b2", POS, night)
    cycle.run("b2")
    pos.remove((3, d, 5, None))
    pos += [r for op, r in night if op == "insert"]
    expected = _expected(pos, stores)
    for view in cycle.plan.views:
        assert bag(cycle.warehouse.read_view(view)) == expected[view.name], view.name
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []  # the oracle over the lake's Parquet
    assert any(not n.from_changes for n in cycle.lake.read_manifest("b2").night.nodes)  # along the lattice
    cycle.close()
    report = validate_batch(load_project(root), "b2")
    assert report.success and report.expectations > 0
