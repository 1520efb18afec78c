"""A view read by the column names its CREATE VIEW declares: `CREATE VIEW mv2 (s, x) AS SELECT storeID,
COUNT(*) …` is read as mv2(s, x) by the views over it, whichever mode keeps each of them (nested over a
delta-mode view; recompute over a recompute view, which Spark inlines; recompute over both); the project's
check binds them so, and its nights equal recomputation."""

from __future__ import annotations

import pytest

from harness import SCHEMA_SQL, make_project, nights_equal_recomputation
from lattice import emit
from lattice.compile import compile_project
from lattice.errors import UnsupportedView
from lattice.sql import to_dialect
from nightshift.config import check_views, load_project
from nightshift.cycle import Cycle

VIEWS = {
    "mv2": "CREATE VIEW mv2 (s, x) AS SELECT storeID, COUNT(*) FROM pos GROUP BY storeID",
    "mv3": "CREATE VIEW mv3 (s, x) AS SELECT pos.storeID, COUNT(items.category) FROM pos LEFT JOIN items "
           "ON pos.itemID = items.itemID GROUP BY pos.storeID",
    "over_delta": "CREATE VIEW over_delta AS SELECT MAX(x) AS top, SUM(x) AS n FROM mv2",
    "over_recompute": "CREATE VIEW over_recompute AS SELECT MAX(x) AS top, COUNT(s) AS stores FROM mv3",
    "over_both": "CREATE VIEW over_both AS SELECT mv2.x AS sales, COUNT(mv3.x) AS m FROM mv2 LEFT JOIN mv3 "
                 "USING (s) GROUP BY mv2.x",
}
FILES = {f"sql/summaries/{n}.sql": sql for n, sql in VIEWS.items()}


def test_views_over_views_bind_their_declared_column_names():
    plan = compile_project(SCHEMA_SQL, FILES)
    modes = {v.name: v.mode for v in plan.views}
    assert modes == {"mv2": "delta", "mv3": "recompute", "over_delta": "nested", "over_recompute": "recompute",
                     "over_both": "recompute"}
    check_views(plan)  # DuckDB binds x and s
    sql = to_dialect(emit.recompute_sql(plan.view("over_recompute"), plan), "spark")
    assert sql.startswith("WITH `mv3`(`s`, `x`) AS ("), sql


def test_views_over_views_by_declared_names_through_the_nights(tmp_path, spark, quiet):
    root = make_project(tmp_path / "p", VIEWS)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    nights_equal_recomputation(cycle, root, VIEWS, 17, "")
    cycle.close()


def test_a_column_list_may_name_the_first_columns_only():
    """As in PostgreSQL and DuckDB: `CREATE VIEW v (a) AS SELECT i, SUM(j) AS s …` names i a and keeps s;
    more names than columns is refused by name."""
    views = {"sql/summaries/first.sql": "CREATE VIEW first (store) AS SELECT storeID, SUM(qty) AS q FROM pos GROUP BY storeID",
             "sql/summaries/kept.sql": "CREATE VIEW kept (store) AS SELECT s.storeID, s.city FROM stores s LEFT JOIN pos p "
                                       "ON p.storeID = s.storeID"}
    plan = compile_project(SCHEMA_SQL, views)
    assert {v.name: (v.mode, [o.name for o in v.outputs]) for v in plan.views} == {
        "first": ("delta", ["store", "q"]), "kept": ("recompute", ["store", "city"])}
    check_views(plan)
    for name, sql in views.items():
        with pytest.raises(UnsupportedView, match="CREATE VIEW names 3 columns but the SELECT has 2"):
            compile_project(SCHEMA_SQL, {name: sql.replace("(store)", "(a, b, c)")})
