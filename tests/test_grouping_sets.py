"""GROUP BY GROUPING SETS / CUBE / ROLLUP: valid SQL, so never refused; kept by recompute (each grouping set
would be a summary of its own), and the plan's reason says so. GROUPING() is served as the warehouse
computes it: GROUPING(a, b) is PostgreSQL's and DuckDB's bit mask, which Spark (whose GROUPING takes one
column) computes from one-column GROUPINGs."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from conftest import BACKENDS
from harness import SCHEMA_SQL, make_project, nights_equal_recomputation
from lattice import emit
from lattice.compile import compile_project
from lattice.sql import to_dialect
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import bag

VIEWS = {
    "store_or_all": "CREATE VIEW store_or_all AS SELECT storeID, COUNT(*) AS n, SUM(qty) AS q FROM pos "
                    "GROUP BY GROUPING SETS ((storeID), ())",
    "store_item_cube": "CREATE VIEW store_item_cube AS SELECT storeID, itemID, SUM(qty) AS q, GROUPING(storeID) AS gs, "
                       "GROUPING(storeID, itemID) AS g FROM pos GROUP BY CUBE (storeID, itemID)",
    "region_city_rollup": "CREATE VIEW region_city_rollup AS SELECT region, city, COUNT(*) AS n, MAX(qty) AS top, "
                          "GROUPING(region, city) AS g FROM pos JOIN stores ON pos.storeID = stores.storeID "
                          "GROUP BY ROLLUP (region, city)",
    "day_and_rollup": "CREATE VIEW day_and_rollup AS SELECT date, storeID, COUNT(*) AS n FROM pos "
                      "GROUP BY date, ROLLUP (storeID) HAVING COUNT(*) > 1",
}
LABEL = {"store_or_all": "GROUPING SETS", "store_item_cube": "CUBE", "region_city_rollup": "ROLLUP",
         "day_and_rollup": "ROLLUP"}


def _plan():
    return compile_project(SCHEMA_SQL, {f"sql/summaries/{n}.sql": s for n, s in VIEWS.items()})


def test_grouping_sets_are_kept_by_recompute_and_the_reason_says_why():
    plan = _plan()
    for v in plan.views:
        assert v.mode == "recompute", v.name
        assert f"GROUP BY {LABEL[v.name]}: each grouping set is a summary of its own" in v.reason
        assert "recomputed whole" in v.reason
    assert [o.name for o in plan.view("region_city_rollup").outputs] == ["region", "city", "n", "top", "g"]
    spark_sql = to_dialect(emit.recompute_sql(plan.view("region_city_rollup"), plan), "spark")
    assert "GROUPING(region) * 2 + GROUPING(city) * 1" in spark_sql and "GROUPING(region, city)" not in spark_sql


GROUPING_QUERY = ("SELECT a, b, c, GROUPING(a, b, c) AS g, GROUPING(b) AS gb, COUNT(*) AS n FROM t "
                  "GROUP BY CUBE (a, b, c)")


def test_grouping_of_several_columns_is_the_warehouses_bit_mask(spark, pg_schemas):
    """The same rows grouped by CUBE: PostgreSQL's and DuckDB's GROUPING(a, b, c), and Spark's evaluation of
    the view's SQL as nightshift writes it, agree."""
    import duckdb

    rows = [(1, "x", None), (1, "y", 2.5), (2, "x", 2.5), (None, None, None)]
    plan = compile_project("CREATE TABLE t (a INTEGER, b VARCHAR, c DOUBLE);",
                           {"sql/summaries/v.sql": f"CREATE VIEW v AS {GROUPING_QUERY}"})
    sql = plan.view("v").sql
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER, b VARCHAR, c DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    duck = bag(con.execute(GROUPING_QUERY).fetchall())
    assert bag(con.execute(to_dialect(sql, "duckdb")).fetchall()) == duck
    engine = sa.create_engine(pg_schemas("grouping"), poolclass=sa.pool.NullPool)
    with engine.begin() as c:
        c.exec_driver_sql("CREATE TABLE t (a INTEGER, b VARCHAR, c DOUBLE PRECISION)")
        c.exec_driver_sql("INSERT INTO t VALUES " + ", ".join(
            "(" + ", ".join("NULL" if x is None else repr(x) for x in r) + ")" for r in rows))
        assert bag(c.exec_driver_sql(GROUPING_QUERY).fetchall()) == duck
        assert bag(c.exec_driver_sql(to_dialect(sql, "postgres")).fetchall()) == duck
    engine.dispose()
    spark.createDataFrame(rows, "a INT, b STRING, c DOUBLE").createOrReplaceTempView("t")
    assert bag(tuple(r) for r in spark.sql(to_dialect(sql, "spark")).collect()) == duck


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouping_sets_through_the_nights_equal_recomputation(tmp_path, spark, quiet, warehouse_url, backend):
    root = make_project(tmp_path / "p", VIEWS, url=warehouse_url(backend, "grouping_sets"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    nights_equal_recomputation(cycle, root, VIEWS, 29, f"{backend}, ")
    cycle.close()
