"""Parenthesized join nests in views kept by recompute: `(r FULL JOIN s ON …) FULL JOIN (t FULL JOIN u ON …)`,
a CROSS JOIN inside an outer join's nest, a four-way FULL JOIN chain. The SQL nightshift writes for Spark
(each declared table read from the base at the night's state), for DuckDB and for PostgreSQL must parse back
to the view's own tree, nest for nest (compared as sqlglot trees, not as results, which two wrong nests can
share); and one project of such views runs its nights equal to recomputation."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from harness import make_project, nights_equal_recomputation
from lattice import emit
from lattice.compile import compile_project
from lattice.sql import to_dialect
from nightshift.config import load_project
from nightshift.cycle import Cycle

SCHEMA = "".join(f"CREATE TABLE {t} (i INTEGER, {t}v INTEGER);\n" for t in "rstu")
NESTS = {
    "two_nests": "SELECT r.i AS ri, s.sv, t.tv, u.i AS ui FROM (r FULL JOIN s ON r.i = s.i) "
                 "FULL JOIN (t FULL JOIN u ON t.i = u.i) ON r.i = u.i",
    "cross_in_outer": "SELECT r.i AS ri, s.sv, t.i AS ti, u.uv FROM r LEFT JOIN (s CROSS JOIN (t FULL JOIN u "
                      "ON t.i = u.i)) ON r.i = s.i",
    "four_full": "SELECT COALESCE(r.i, s.i, t.i, u.i) AS i, COUNT(*) AS n FROM r FULL JOIN s ON r.i = s.i "
                 "FULL JOIN t ON s.i = t.i FULL JOIN u ON t.i = u.i GROUP BY COALESCE(r.i, s.i, t.i, u.i)",
    "nest_first": "SELECT r.i AS ri, COUNT(u.uv) AS n FROM ((r JOIN s ON r.i = s.i) LEFT JOIN t ON s.i = t.i) "
                  "RIGHT JOIN u ON u.i = t.i GROUP BY r.i",
    "over_a_view": "SELECT two_nests.ri, t.tv FROM two_nests LEFT JOIN (s FULL JOIN t ON s.i = t.i) "
                   "ON two_nests.ri = s.i",
}


def _plan():
    return compile_project(SCHEMA, {f"sql/summaries/{n}.sql": f"CREATE VIEW {n} AS {q}" for n, q in NESTS.items()})


def _shape(tree: exp.Expression) -> exp.Expression:
    """The tree with every relation of the night's state (__ns_new_<t> AS a) read as the table itself
    (t AS a), every table aliased (t AS t), identifiers unquoted and lower case: two SQL texts with the
    same shape are the same query over the same tables."""
    tree = tree.copy()
    for t in tree.find_all(exp.Table):
        name = t.name.lower().removeprefix(emit.rel("new", ""))
        t.set("this", exp.to_identifier(name))
        if not t.alias:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(name)))
    for i in tree.find_all(exp.Identifier):
        i.set("this", i.name.lower())
        i.set("quoted", False)
    return tree


def _nests(tree: exp.Expression) -> list[str]:
    """Each parenthesized join nest as text (a Subquery over a Table with joins), outermost first."""
    return [n.sql() for n in tree.find_all(exp.Subquery) if isinstance(n.this, exp.Table) and n.this.args.get("joins")]


@pytest.mark.parametrize("name", [n for n in NESTS if n != "over_a_view"])
@pytest.mark.parametrize("engine,dialect", [("spark", "spark"), ("duckdb", "duckdb"), ("postgres", "postgres")])
def test_join_nests_keep_their_structure_for_every_engine(name, engine, dialect):
    plan = _plan()
    view = plan.view(name)
    assert view.mode == "recompute"
    if name != "four_full":
        assert "parenthesized join (" in view.reason
    original = _shape(sqlglot.parse_one(NESTS[name]))
    for sql in (emit.recompute_sql(view, plan), view.sql):  # what Spark recomputes; what the oracles run
        rendered = _shape(sqlglot.parse_one(to_dialect(sql, engine), read=dialect))
        assert rendered == original, f"{engine}: {to_dialect(sql, engine)}"
        assert _nests(rendered) == _nests(original)
        assert len(list(rendered.find_all(exp.Join))) == len(list(original.find_all(exp.Join)))


def test_a_nest_over_a_summary_view_keeps_both_nests():
    """The view read inline (a common table expression over the same state) keeps its nests too."""
    plan = _plan()
    sql = to_dialect(emit.recompute_sql(plan.view("over_a_view"), plan), "spark")
    tree = _shape(sqlglot.parse_one(sql, read="spark"))
    inner = tree.find(exp.CTE).this
    assert inner == _shape(sqlglot.parse_one(NESTS["two_nests"]))
    body = next(s.this for s in tree.find_all(exp.Subquery) if s.alias == "_ns_view")  # the view's own query
    assert body == _shape(sqlglot.parse_one(NESTS["over_a_view"]))


# the same nests over the harness's tables (stores twice, under two aliases), run through the cycle
PROJECT = {
    "two_nests": "CREATE VIEW two_nests AS SELECT p.storeID, p.qty, s.city, i.category, s2.region FROM "
                 "(pos p FULL JOIN stores s ON p.storeID = s.storeID) FULL JOIN (items i FULL JOIN stores s2 "
                 "ON i.itemID = s2.storeID) ON p.itemID = i.itemID",
    "cross_in_outer": "CREATE VIEW cross_in_outer AS SELECT s.city, COUNT(*) AS n, COUNT(p.qty) AS sold FROM stores s "
                      "LEFT JOIN (pos p CROSS JOIN (items i FULL JOIN stores s2 ON i.itemID = s2.storeID)) "
                      "ON s.storeID = p.storeID AND p.itemID = i.itemID GROUP BY s.city",
    "four_full": "CREATE VIEW four_full AS SELECT COALESCE(p.storeID, s.storeID, i.itemID, s2.storeID) AS k, "
                 "COUNT(*) AS n FROM pos p FULL JOIN stores s ON p.storeID = s.storeID FULL JOIN items i "
                 "ON p.itemID = i.itemID FULL JOIN stores s2 ON i.itemID = s2.storeID "
                 "GROUP BY COALESCE(p.storeID, s.storeID, i.itemID, s2.storeID)",
}


def test_join_nests_through_the_nights_equal_recomputation(tmp_path, spark, quiet):
    root = make_project(tmp_path / "p", PROJECT)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert {v.mode for v in cycle.plan.views} == {"recompute"}
    nights_equal_recomputation(cycle, root, PROJECT, 11, "")
    cycle.close()


def test_a_star_over_join_nests_lists_each_tables_columns():
    """SELECT * and t.* over nests (lattice/passes/expand_stars.py): USING's merged column once, the others
    read through their tables."""
    stars = {"using_nest": "SELECT * FROM ((r JOIN s USING (i)) LEFT JOIN t USING (i)) RIGHT JOIN u USING (i)",
             "qualified": "SELECT r.*, u.uv FROM ((r JOIN s ON r.i = s.i) LEFT JOIN t ON s.i = t.i) "
                          "RIGHT JOIN u ON u.i = t.i",
             "renamed": "SELECT * FROM (r JOIN s ON r.i = s.i) AS x (a, b, c, d)"}
    plan = compile_project(SCHEMA, {f"sql/summaries/{n}.sql": f"CREATE VIEW {n} AS {q}" for n, q in stars.items()})
    names = {v.name: [o.name for o in v.outputs] for v in plan.views}
    assert names == {"using_nest": ["i", "rv", "sv", "tv", "uv"], "qualified": ["i", "rv", "uv"],
                     "renamed": ["a", "b", "c", "d"]}
    assert [e.sql() for e in sqlglot.parse_one(plan.view("using_nest").sql).expressions] == [
        "i", "r.rv", "s.sv", "t.tv", "u.uv"]
    for v in plan.views:
        assert _nests(_shape(sqlglot.parse_one(v.sql))) == _nests(_shape(sqlglot.parse_one(stars[v.name])))
