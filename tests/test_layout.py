"""How the lake lays out each table (runtime/layout.py): [lake] partition_by wins; else a fact table is laid out by
month of its date column from AUTO_ROWS rows on (the lake's rows and the night's, or [statistics]' figure when
larger), kept so once laid out, and a table with no date column, or several used alike, stays one table."""

from __future__ import annotations

from harness import FIGURE_1, make_project
from nightshift.config import load_project
from runtime.layout import AUTO_ROWS, choose_layouts, partitions


def _layouts(tmp_path, schema_edit=None, views=FIGURE_1, **kw):
    root = make_project(tmp_path / "p", views)
    if schema_edit:
        schema = root / "sql" / "schema.sql"
        schema.write_text(schema_edit(schema.read_text()))
    plan = load_project(root).plan
    return {lay.table: lay for lay in choose_layouts(plan, kw.get("settings", {}), kw["rows"], kw.get("recorded", {}),
                                                     kw.get("declared"))}


def test_a_fact_table_is_laid_out_by_month_from_the_threshold_on(tmp_path):
    small = _layouts(tmp_path / "a", rows={"pos": AUTO_ROWS - 1, "items": 10**9})
    assert small["pos"].column is None and f"{AUTO_ROWS - 1:,} rows, under {AUTO_ROWS:,}" in small["pos"].reason
    assert small["items"].column is None and small["items"].reason == "no view aggregates it"
    large = _layouts(tmp_path / "b", rows={"pos": AUTO_ROWS})
    assert large["pos"].column == "date" and large["pos"].chosen
    assert "its one date column date" in large["pos"].reason and "partition_by pos = false" in large["pos"].reason
    assert partitions(tuple(large.values())) == {"pos": "date"}
    declared = _layouts(tmp_path / "c", rows={"pos": 10}, declared={"pos": AUTO_ROWS})  # [statistics] pos = ...
    assert declared["pos"].column == "date"


def test_the_project_setting_wins_and_a_laid_out_table_stays_so(tmp_path):
    off = _layouts(tmp_path / "a", rows={"pos": 10 * AUTO_ROWS}, settings={"pos": None})
    assert off["pos"].column is None and not off["pos"].chosen and off["pos"].reason == "[lake] partition_by pos = false"
    named = _layouts(tmp_path / "b", rows={"pos": 1}, settings={"POS": "date"})
    assert named["pos"].column == "date" and not named["pos"].chosen
    kept = _layouts(tmp_path / "c", rows={"pos": AUTO_ROWS // 2}, recorded={"pos": "date"})
    assert kept["pos"].column == "date" and "laid out so since an earlier night" in kept["pos"].reason
    joined = _layouts(tmp_path / "d", rows={"pos": AUTO_ROWS // 2 - 1}, recorded={"pos": "date"})
    assert joined["pos"].column is None and "under" in joined["pos"].reason


def _shipped(text: str) -> str:
    return text.replace("    price   DECIMAL(8,2)\n", "    price   DECIMAL(8,2),\n    shipped DATE\n")


def test_several_date_columns_go_by_the_one_the_views_use_most(tmp_path):
    lay = _layouts(tmp_path / "a", _shipped, rows={"pos": AUTO_ROWS})  # the views read date, none reads shipped
    assert lay["pos"].column == "date" and "the date column its views use most (date, " in lay["pos"].reason
    regions = {"sR_sales": FIGURE_1["sR_sales"]}  # reads neither
    tie = _layouts(tmp_path / "b", _shipped, views=regions, rows={"pos": AUTO_ROWS})
    assert tie["pos"].column is None and "its date columns date, shipped are used alike; name one in [lake] " \
        "partition_by" in tie["pos"].reason
    none = _layouts(tmp_path / "c", lambda t: t.replace("date    DATE", "date    VARCHAR"), views=regions,
                    rows={"pos": AUTO_ROWS})
    assert none["pos"].column is None and "it has no DATE or TIMESTAMP column" in none["pos"].reason
