"""SELECT * and t.* in every mode: the compiler writes out the columns a star means today (sql/schema.sql's
declarations; a summary view's declared columns; a subquery's or common table expression's names), so
the plan records the expansion, and a schema change that changes what a star means is a change of that
view's definition, which `nightshift plan` names and `nightshift apply` builds, while the views whose
stars mean what they meant stay as they are."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlglot
from sqlglot import exp

from conftest import BACKENDS
from harness import SCHEMA_SQL, Model, make_project, nights_equal_recomputation, write_changes
from lattice.compile import compile_project
from lattice.errors import UnknownReference, UnsupportedView
from lattice.layer import describe, diff
from nightshift.cli import main
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import PlanChanged
from nightshift.oracle import bag

VIEWS = {
    # delta: the dimension's columns by t.*, each a group key
    "store_totals": "CREATE VIEW store_totals AS SELECT s.*, COUNT(*) AS n, SUM(p.qty) AS q FROM pos p "
                    "JOIN stores s ON p.storeID = s.storeID GROUP BY s.storeID, s.city, s.region",
    # auxiliary: a DISTINCT aggregate beside s.*
    "store_items": "CREATE VIEW store_items AS SELECT s.*, COUNT(DISTINCT p.itemID) AS items FROM pos p "
                   "JOIN stores s ON p.storeID = s.storeID GROUP BY s.storeID, s.city, s.region",
    # nested: over store_totals, by the columns its star gave it
    "region_best": "CREATE VIEW region_best AS SELECT region, MAX(q) AS top, COUNT(*) AS stores FROM store_totals "
                   "GROUP BY region",
    # recompute: a star over a table, over an outer join, over a summary view, over a subquery
    "item_list": "CREATE VIEW item_list AS SELECT * FROM items",
    "sales_where": "CREATE VIEW sales_where AS SELECT p.*, s.city FROM pos p LEFT JOIN stores s "
                   "ON p.storeID = s.storeID WHERE p.qty > 3",
    "busy_stores": "CREATE VIEW busy_stores AS SELECT * FROM store_totals WHERE n > 3",
    "day_counts": "CREATE VIEW day_counts AS SELECT * FROM (SELECT date, COUNT(*) AS n FROM pos GROUP BY date) d "
                  "WHERE d.n > 1",
}
MODES = {"store_totals": "delta", "store_items": "auxiliary", "region_best": "nested", "item_list": "recompute",
         "sales_where": "recompute", "busy_stores": "recompute", "day_counts": "recompute"}


def _plan(views: dict[str, str], schema_sql: str = SCHEMA_SQL, dialect: str = "duckdb"):
    return compile_project(schema_sql, {f"sql/summaries/{n}.sql": s for n, s in views.items()}, dialect=dialect)


def _select_list(sql: str) -> list[str]:
    return [e.sql() for e in sqlglot.parse_one(sql).find(exp.Select).expressions]


def test_stars_are_written_out_in_every_mode():
    plan = _plan(VIEWS)
    assert {v.name: v.mode for v in plan.views} == MODES
    outputs = {v.name: [o.name for o in v.outputs] for v in plan.views}
    assert outputs["store_totals"] == ["storeID", "city", "region", "n", "q"]
    assert outputs["item_list"] == ["itemID", "category", "weight"]
    assert outputs["sales_where"] == ["storeID", "itemID", "date", "qty", "price", "city"]
    assert outputs["busy_stores"] == ["storeID", "city", "region", "n", "q"]
    assert outputs["day_counts"] == ["date", "n"]
    assert _select_list(plan.view("item_list").sql) == ["items.itemID", "items.category", "items.weight"]
    assert not any(isinstance(s, exp.Star) for v in plan.views for s in sqlglot.parse_one(v.sql).find_all(exp.Star)
                   if not isinstance(s.parent, exp.Count))


def test_star_forms():
    """EXCLUDE and REPLACE, a common table expression, a view's declared column list, USING and NATURAL joins
    (their merged columns once, placed as each warehouse places them), EXISTS (SELECT *) left alone."""
    views = {
        "j": "CREATE VIEW j (s, n) AS SELECT storeID, COUNT(*) FROM pos GROUP BY storeID",
        "over_j": "CREATE VIEW over_j AS SELECT * FROM j",
        "trimmed": "CREATE VIEW trimmed AS SELECT * EXCLUDE (price) REPLACE (qty + 1 AS qty) FROM pos",
        "cte": "CREATE VIEW cte AS WITH w AS (SELECT storeID, SUM(qty) AS q FROM pos GROUP BY storeID) SELECT * FROM w",
        "by_using": "CREATE VIEW by_using AS SELECT * FROM pos JOIN items USING (itemID)",
        "by_natural": "CREATE VIEW by_natural AS SELECT * FROM pos NATURAL JOIN stores",
        "with_exists": "CREATE VIEW with_exists AS SELECT storeID, COUNT(*) AS n FROM pos WHERE EXISTS (SELECT * FROM stores "
                  "WHERE stores.storeID = pos.storeID) GROUP BY storeID",
    }
    duck, pg = _plan(views), _plan(views, dialect="postgres")
    names = {v.name: [o.name for o in v.outputs] for v in duck.views}
    assert names["over_j"] == ["s", "n"]
    assert _select_list(duck.view("trimmed").sql) == ["pos.storeID", "pos.itemID", "pos.date", "qty + 1 AS qty"]
    assert names["cte"] == ["storeID", "q"]
    assert _select_list(duck.view("by_using").sql)[:2] == ["pos.storeID", "itemID"]  # DuckDB: where the left side has it
    assert _select_list(pg.view("by_using").sql)[:2] == ["itemID", "pos.storeID"]  # PostgreSQL: USING's columns first
    assert names["by_natural"] == ["storeID", "itemID", "date", "qty", "price", "city", "region"]
    assert "EXISTS(SELECT * FROM stores" in duck.view("with_exists").sql
    with pytest.raises(UnknownReference, match="no table or alias x in its FROM"):
        _plan({"bad": "CREATE VIEW bad AS SELECT x.* FROM pos"})
    with pytest.raises(UnsupportedView, match="duplicate output column storeID"):
        _plan({"twice": "CREATE VIEW twice AS SELECT * FROM pos JOIN stores ON pos.storeID = stores.storeID"})
    with pytest.raises(UnsupportedView, match=r"SELECT \* over .*: its columns have no names here"):
        _plan({"unnamed": "CREATE VIEW unnamed AS SELECT * FROM (SELECT COUNT(*) FROM pos) c"})


def test_a_schema_change_that_changes_a_star_changes_that_view_only():
    built = describe(_plan(VIEWS))
    wider = _plan(VIEWS, SCHEMA_SQL.replace("weight DOUBLE", "weight DOUBLE, colour VARCHAR"))
    change = diff(built, wider)
    assert [c.view for c in change.changed] == ["item_list"]
    assert "declared columns it reads: () -> (items.colour VARCHAR)" in change.changed[0].how
    assert _select_list(wider.view("item_list").sql)[-1] == "items.colour"
    # a new pos column: only the star over pos means more (no other view names it)
    promo = diff(built, _plan(VIEWS, SCHEMA_SQL.replace("price   DECIMAL(8,2)", "price   DECIMAL(8,2), promo VARCHAR")))
    assert [c.view for c in promo.changed] == ["sales_where"]
    assert diff(built, _plan(VIEWS, "-- a comment\n" + SCHEMA_SQL)).empty


def _pos_night(model: Model, n: int) -> dict:
    """A night of sales only: one deleted, two inserted (the second a copy of an existing sale)."""
    pos = sorted(model.tables["pos"], key=repr)
    new = (pos[n][0], pos[n][1], dt.date(2026, 1, 2), 5, None)
    return {"pos": [("delete", pos[0]), ("insert", new), ("insert", pos[1])]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_stars_through_the_nights_and_a_schema_change(tmp_path, spark, quiet, warehouse_url, backend, capsys):
    root = make_project(tmp_path / "p", VIEWS, url=warehouse_url(backend, "select_star"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    model = nights_equal_recomputation(cycle, root, VIEWS, 23, f"{backend}, ", nights=1)
    kept = {v: bag(cycle.warehouse.read_view(cycle.plan.view(v))) for v in VIEWS if v != "item_list"}
    cycle.close()

    schema = root / "sql" / "schema.sql"
    schema.write_text(schema.read_text().replace("weight DOUBLE", "weight DOUBLE, colour VARCHAR"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    write_changes(root, "b0002", changes := _pos_night(model, 2))
    with pytest.raises(PlanChanged, match=r"changed item_list; "):
        cycle.propagate("b0002")
    assert main(["plan", "--project", str(root)]) == 0
    assert "changed: item_list (" in capsys.readouterr().out
    change = cycle.apply().details
    assert change.rebuild == ("item_list",) and set(change.unchanged) == set(VIEWS) - {"item_list"}
    assert {v: bag(cycle.warehouse.read_view(cycle.plan.view(v))) for v in kept} == kept
    assert [o.name for o in cycle.plan.view("item_list").outputs] == ["itemID", "category", "weight", "colour"]
    cycle.run("b0002")
    model.apply(changes)
    others = {k: v for k, v in VIEWS.items() if k != "item_list"}
    expected = model.recompute(others)
    for name in others:
        assert bag(cycle.warehouse.read_view(cycle.plan.view(name))) == expected[name], name
    items = bag(cycle.warehouse.read_view(cycle.plan.view("item_list")))
    assert items == bag([(*row, None) for row in model.tables["items"]])  # the lake's rows read colour NULL
    cycle.close()
