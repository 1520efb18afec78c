"""Specification tests for the optimized D-lattice (paper 001, Sections 5.1-5.5 and Appendix B).

Pure Python: no Spark, no database. The reference is the paper's running example: the four views of
Figure 1 with the dimension hierarchy city -> region, whose derives relation is Example 5.1, whose
optimized V-lattice is Figure 9 (Example 5.4: sCD_sales gains region), whose summary-delta queries are
Figure 3 and Example 5.5, and whose propagate costs are Table 1 under the statistics of Table 3.
Expected values are taken from the paper, not from the implementation.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest

from harness import FIGURE_1, SCHEMA_SQL
from nightshift import render
from lattice.compile import compile_project
from lattice.dlattice import Statistics, build_lattice
from lattice.errors import ConfigError
from lattice.ir import ColumnRef, FunctionalDependency, Lattice
from lattice.passes.derives import changes_name, derive_edges, derives, lattice_points
from lattice.passes.vlattice import add_implied_points, augment

CITY_REGION = (FunctionalDependency("stores", ("city",), ("region",)),)
DELTA = changes_name("pos")
VIEWS = ("SID_sales", "sCD_sales", "SiC_sales", "sR_sales")

# Appendix A, Table 3: table sizes, 10,000 changes to pos, and the rows of each summary-delta.
TABLE_3 = Statistics.of(
    table_rows={"pos": 1_000_000, "stores": 100, "items": 1000},
    change_rows={"pos": 10_000},
    change_distinct={
        ("pos.storeID", "pos.itemID", "pos.date"): 1000,  # sd_SID_sales
        ("stores.city", "pos.date"): 100,  # sd_sCD_sales
        ("pos.storeID", "items.category"): 1000,  # sd_SiC_sales
        "stores.region": 10,  # sd_sR_sales
    },
)


def plan_of(views: dict[str, str], dependencies=CITY_REGION, schema_sql: str = SCHEMA_SQL):
    return compile_project(schema_sql, {f"sql/summaries/{n}.sql": sql for n, sql in views.items()}, dependencies)


def relation(lattice: Lattice, among=VIEWS) -> dict[tuple[str, str], tuple[str, ...]]:
    """{(lower, upper): join labels} for the derives edges between the given points."""
    return {(e.lower, e.upper): e.join_labels for e in lattice.edges if e.lower in among and e.upper in among}


def cover(lattice: Lattice) -> dict[tuple[str, str], tuple[str, ...]]:
    return {(e.upper, e.lower): e.join_labels for e in lattice.cover_edges}


@pytest.fixture(scope="module")
def figure1():
    return plan_of(FIGURE_1)


@pytest.fixture(scope="module")
def derives_51(figure1):
    """The derives relation over the views as declared (before Section 5.2's augmentation)."""
    return derive_edges(lattice_points(Lattice(nodes=()), figure1), figure1)


@pytest.fixture(scope="module")
def figure9(figure1):
    return build_lattice(figure1, TABLE_3)


# =================================================================== 1. Example 5.1: the derives relation


def test_example_5_1_derives_relation(derives_51):
    """sCD ≺^stores SID, SiC ≺^items SID, sR ≺^stores SID, sR ≺^stores sCD, sR ≺^stores SiC; nothing else."""
    assert relation(derives_51) == {
        ("sCD_sales", "SID_sales"): ("stores",),
        ("SiC_sales", "SID_sales"): ("items",),
        ("sR_sales", "SID_sales"): ("stores",),
        ("sR_sales", "sCD_sales"): ("stores",),
        ("sR_sales", "SiC_sales"): ("stores",),
    }


def test_example_5_1_sid_is_the_top_and_sr_the_bottom(derives_51):
    among = relation(derives_51)
    assert not any(lower == "SID_sales" for lower, _ in among)
    assert not any(upper == "sR_sales" for _, upper in among)


def test_region_from_city_needs_the_declared_dependency(figure1, derives_51):
    """sR ≺^stores sCD holds because city -> region: the edge joins stores' (city, region) pairs on city."""
    (step,) = derives_51.edge("sCD_sales", "sR_sales").joins
    assert (step.table, step.via, step.key, step.columns) == ("stores", "dependency", ("city",), ("region",))
    assert [s.column for s in step.on] == ["city"]
    without = plan_of(FIGURE_1, dependencies=())
    lattice = derive_edges(lattice_points(Lattice(nodes=()), without), without)
    assert lattice.edge("sCD_sales", "sR_sales") is None
    assert "stores.region" in lattice.why_not("sCD_sales", "sR_sales")


def test_dimension_key_joins_follow_the_foreign_keys(derives_51):
    """The edges below SID_sales join a dimension on the fact's foreign key (Example 5.3)."""
    (stores,) = derives_51.edge("SID_sales", "sCD_sales").joins
    assert (stores.table, stores.via, stores.key, [s.column for s in stores.on]) == ("stores", "key", ("storeID",), ["storeID"])
    (items,) = derives_51.edge("SID_sales", "SiC_sales").joins
    assert (items.table, items.via, items.key, items.columns) == ("items", "key", ("itemID",), ("category",))


def test_every_view_derives_from_the_change_set_with_its_own_joins(derives_51):
    """The top of the D-lattice is prepare-changes (5.4): each view's query over the changes."""
    assert {e.lower: e.join_labels for e in derives_51.edges_from(DELTA)} == {
        "SID_sales": (),
        "sCD_sales": ("stores",),
        "SiC_sales": ("items",),
        "sR_sales": ("stores",),
    }


def test_aggregates_along_an_edge_follow_section_5_1(figure1, derives_51):
    """COUNT(*) becomes a SUM of counts, SUM(qty) a SUM of sums (end of 5.1)."""
    edge = derives_51.edge("SID_sales", "sCD_sales")
    rules = {a.column: (a.rule, a.source) for a in edge.aggregates}
    assert rules == {"_ns_count": ("sum", "_ns_count"), "_ns_cnt_1": ("sum", "_ns_cnt_1"), "_ns_sum_1": ("sum", "_ns_sum_1")}


def test_min_over_a_group_by_column_of_the_upper_view(figure1, derives_51):
    """SiC_sales' MIN(date) derives from SID_sales, which keeps no MIN but groups by date (5.1, condition 2)."""
    sic = figure1.view("SiC_sales")
    date = next(a for a in sic.arguments if a.sql == '"pos"."date"')
    edge = derives_51.edge("SID_sales", "SiC_sales")
    rules = {a.column: (a.rule, a.source, a.weight) for a in edge.aggregates}
    assert rules[f"_ns_min_{date.index}"] == ("min_over_keys", '"pos"."date"', "_ns_count")
    assert rules[f"_ns_cnt_{date.index}"] == ("count_weighted", '"pos"."date"', "_ns_count")
    assert {(a.ref, a.relation, a.column) for a in edge.attributes} >= {(ColumnRef("pos", "date"), "SID_sales", "date")}


def test_from_the_change_set_the_rules_are_table_2(derives_51):
    """COUNT(*) -> sign, SUM(e) -> sign * e, COUNT(e) -> case e is null, MIN(e) over inserted rows."""
    edge = derives_51.edge(DELTA, "SiC_sales")
    rules = {a.column: (a.rule, a.source, a.weight) for a in edge.aggregates}
    assert rules["_ns_count"] == ("sum", "_ns_sign", None)
    assert rules["_ns_min_1"] == ("min_over_keys", '"pos"."date"', "_ns_sign")
    assert rules["_ns_sum_2"] == ("sum_weighted", '"pos"."qty"', "_ns_sign")
    assert rules["_ns_cnt_2"] == ("count_weighted", '"pos"."qty"', "_ns_sign")


def test_incomparable_views_say_why(derives_51):
    assert "pos.date" in derives_51.why_not("SiC_sales", "sCD_sales")
    assert "pos.storeID" in derives_51.why_not("sCD_sales", "SiC_sales")
    assert "pos.itemID" in derives_51.why_not("SiC_sales", "SID_sales")


# =================================================================== 2. Figure 9 / Example 5.4: the optimized V-lattice


def test_example_5_4_scd_sales_gains_region(figure1, figure9):
    (aug,) = figure9.augmentations
    assert (aug.node, aug.kind, aug.name, aug.ref) == ("sCD_sales", "attribute", "region", ColumnRef("stores", "region"))
    assert aug.determined_by == (ColumnRef("stores", "city"),)
    assert aug.enables == ("sR_sales",)
    node = figure9.node("sCD_sales")
    assert [(k.name, k.declared) for k in node.keys] == [("city", True), ("date", True), ("region", False)]
    # The View itself (the serving contract) is unchanged.
    assert [k.name for k in figure1.view("sCD_sales").keys] == ["city", "date"]


def test_figure_9_lattice(figure9):
    """Figure 9 under the change set: SID -s-> sCD, SID -i-> SiC, sCD -> sR (no join), SiC -s-> sR."""
    assert cover(figure9) == {
        (DELTA, "SID_sales"): (),
        ("SID_sales", "sCD_sales"): ("stores",),
        ("SID_sales", "SiC_sales"): ("items",),
        ("sCD_sales", "sR_sales"): (),
        ("SiC_sales", "sR_sales"): ("stores",),
    }


def test_example_5_5_sic_to_sr_joins_stores_on_store_id(figure9):
    (step,) = figure9.edge("SiC_sales", "sR_sales").joins
    assert (step.table, step.via, step.key, step.columns) == ("stores", "key", ("storeID",), ("region",))
    assert [(s.relation, s.column) for s in step.on] == [("SiC_sales", "storeID")]


def test_figure_3_sd_scd_sales_carries_region_from_stores(figure9):
    """Figure 3: sd_sCD_sales groups by city, region, date over sd_SID_sales ⋈ stores."""
    edge = figure9.edge("SID_sales", "sCD_sales")
    (step,) = edge.joins
    assert step.table == "stores" and set(step.columns) == {"city", "region"}
    sources = {a.ref.column: (a.relation, a.column) for a in edge.attributes}
    assert sources == {"city": ("stores", "city"), "date": ("SID_sales", "date"), "region": ("stores", "region")}


def test_figure_1_needs_no_implied_point(figure9):
    assert [n.kind for n in figure9.nodes] == ["changes", "view", "view", "view", "view"]


# =================================================================== 3. Appendix B


def test_appendix_b_essential_marks(figure9):
    marks = {e.node: (e.tables, e.attributes) for e in figure9.essentials}
    assert marks["SID_sales"] == (("pos",), ())
    assert marks["sCD_sales"] == (("pos", "stores"), (ColumnRef("stores", "city"),))  # region is not essential
    assert marks["SiC_sales"] == (("pos", "items"), (ColumnRef("items", "category"),))
    assert marks["sR_sales"] == (("pos", "stores"), (ColumnRef("stores", "region"),))


def test_appendix_b_a_join_used_for_no_attribute_is_pushed_down():
    """A view joining stores only for its key: stores is not essential, so the view is computed from
    pos alone and the point keeps the key the fact table holds."""
    plan = plan_of(
        {"s_key": "CREATE VIEW s_key AS SELECT stores.storeID, COUNT(*) AS n FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY stores.storeID"}
    )
    lattice = build_lattice(plan)
    assert lattice.node("s_key").tables == ("pos",)
    assert lattice.edge(DELTA, "s_key").join_labels == ()
    assert any("pushed down" in n for n in lattice.notes)


def test_appendix_b_drops_an_augmentation_no_edge_reads():
    """Without sR_sales nothing reads region below sCD_sales, so sCD_sales is not augmented."""
    lattice = build_lattice(plan_of({n: FIGURE_1[n] for n in ("SID_sales", "sCD_sales", "SiC_sales")}))
    assert lattice.augmentations == ()
    assert [k.name for k in lattice.node("sCD_sales").keys] == ["city", "date"]


NULLABLE_SCHEMA = SCHEMA_SQL.replace("storeID INTEGER NOT NULL REFERENCES", "storeID INTEGER REFERENCES")


def test_a_join_through_a_nullable_foreign_key_filters_rows():
    """pos rows with a NULL storeID vanish in a join with stores: such a join is essential, the view
    that joins does not feed one that does not, and the reverse edge joins stores to drop them."""
    plan = plan_of(
        {
            "joined": "CREATE VIEW joined AS SELECT pos.storeID, COUNT(*) AS n FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY pos.storeID",
            "plain": "CREATE VIEW plain AS SELECT storeID, COUNT(*) AS n FROM pos GROUP BY storeID",
        },
        schema_sql=NULLABLE_SCHEMA,
    )
    lattice = build_lattice(plan)
    assert lattice.node("joined").tables == ("pos", "stores")
    assert "nullable foreign key" in lattice.why_not("joined", "plain")
    assert lattice.edge("plain", "joined").join_labels == ("stores",)


SNOWFLAKE_SCHEMA = """
CREATE TABLE cities (cityID INTEGER PRIMARY KEY, city VARCHAR, region VARCHAR);
CREATE TABLE stores (storeID INTEGER PRIMARY KEY, cityID INTEGER NOT NULL REFERENCES cities);
CREATE TABLE pos (storeID INTEGER NOT NULL REFERENCES stores, date DATE, qty INTEGER);
"""


def test_snowflake_edge_joins_the_chain_in_order():
    plan = plan_of(
        {
            "by_store": "CREATE VIEW by_store AS SELECT storeID, date, SUM(qty) AS q FROM pos GROUP BY storeID, date",
            "by_region": "CREATE VIEW by_region AS SELECT region, SUM(qty) AS q FROM pos JOIN stores ON pos.storeID = stores.storeID JOIN cities ON stores.cityID = cities.cityID GROUP BY region",
        },
        dependencies=(),
        schema_sql=SNOWFLAKE_SCHEMA,
    )
    edge = build_lattice(plan).edge("by_store", "by_region")
    assert [(j.table, j.key, [(s.relation, s.column) for s in j.on]) for j in edge.joins] == [
        ("stores", ("storeID",), [("by_store", "storeID")]),
        ("cities", ("cityID",), [("stores", "cityID")]),
    ]


# =================================================================== 4. views that fall back to the change set


FILTERED = {
    "SID_sales": FIGURE_1["SID_sales"],
    "big3": "CREATE VIEW big3 AS SELECT date, SUM(qty) AS q FROM pos WHERE qty >= 3 GROUP BY date",
    "big5": "CREATE VIEW big5 AS SELECT date, SUM(qty) AS q FROM pos WHERE qty >= 5 GROUP BY date",
}


def test_different_filters_fall_back_with_a_reason():
    lattice = build_lattice(plan_of(FILTERED))
    assert "different WHERE filters" in lattice.why_not("big3", "big5")
    assert "pos.qty" in lattice.why_not("SID_sales", "big3")  # the filter is over a measure SID_sales sums
    assert lattice.parent_of("big3") == lattice.parent_of("big5") == DELTA
    note = next(n for n in lattice.notes if n.startswith("big3:"))
    assert "change set" in note and "different WHERE filters" in note


def test_a_filter_over_the_upper_attributes_is_applied_on_the_edge():
    """An unfiltered point whose group-by attributes cover the filter feeds the filtered view."""
    late = "CREATE VIEW late AS SELECT storeID, COUNT(*) AS n FROM pos WHERE date >= DATE '2026-01-03' GROUP BY storeID"
    plan = plan_of({"SID_sales": FIGURE_1["SID_sales"], "late": late})
    edge = build_lattice(plan).edge("SID_sales", "late")
    assert edge is not None and "date" in edge.where


INCOMPATIBLE = {
    "a_min": "CREATE VIEW a_min AS SELECT storeID, MIN(qty) AS m FROM pos GROUP BY storeID",
    "b_sum": "CREATE VIEW b_sum AS SELECT region, SUM(price) AS s FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY region",
}


def test_incompatible_aggregates_fall_back_with_a_reason():
    """b_sum's region is determined by a_min's storeID, but a_min keeps MIN(qty), not SUM(price)."""
    lattice = build_lattice(plan_of(INCOMPATIBLE))
    reason = lattice.why_not("a_min", "b_sum")
    assert '"pos"."price"' in reason and "a_min keeps no" in reason
    assert lattice.parent_of("b_sum") == DELTA
    assert any(n.startswith("b_sum:") and "a_min" in n for n in lattice.notes)


def test_min_is_not_derived_from_sum():
    plan = plan_of(
        {
            "sums": "CREATE VIEW sums AS SELECT storeID, date, SUM(qty) AS s FROM pos GROUP BY storeID, date",
            "mins": "CREATE VIEW mins AS SELECT storeID, MIN(qty) AS m FROM pos GROUP BY storeID",
        }
    )
    assert "MIN" in build_lattice(plan).why_not("sums", "mins")


def test_aggregate_augmentation_lets_the_view_derive():
    """5.2's third kind (adding aggregation functions used by other summary tables), when asked for."""
    lattice = build_lattice(plan_of(INCOMPATIBLE), augment_aggregates=True)
    assert lattice.parent_of("b_sum") == "a_min"
    added = {(a.node, a.aggregate, a.argument) for a in lattice.augmentations}
    assert added == {("a_min", "sum", '"pos"."price"'), ("a_min", "count", '"pos"."price"')}


def test_avg_derives_through_its_sum_and_count():
    plan = plan_of(
        {
            "SID_sales": FIGURE_1["SID_sales"],
            "avg_r": "CREATE VIEW avg_r AS SELECT region, AVG(qty) AS a FROM pos, stores WHERE pos.storeID = stores.storeID GROUP BY region",
        }
    )
    edge = build_lattice(plan).edge("SID_sales", "avg_r")
    assert {a.rule for a in edge.aggregates} == {"sum"}


def test_views_over_different_fact_tables_are_unrelated():
    schema = SCHEMA_SQL + "CREATE TABLE returns (storeID INTEGER NOT NULL REFERENCES stores, qty INTEGER);"
    plan = plan_of(
        {
            "sR_sales": FIGURE_1["sR_sales"],
            "r_returns": "CREATE VIEW r_returns AS SELECT region, SUM(qty) AS q FROM returns JOIN stores ON returns.storeID = stores.storeID GROUP BY region",
        },
        schema_sql=schema,
    )
    lattice = build_lattice(plan)
    assert "different fact tables" in lattice.why_not("sR_sales", "r_returns")
    assert lattice.parent_of("r_returns") == changes_name("returns")


def test_views_with_the_same_groups_keep_one_direction():
    plan = plan_of({"sR_sales": FIGURE_1["sR_sales"], "sR_copy": FIGURE_1["sR_sales"].replace("sR_sales", "sR_copy")})
    lattice = build_lattice(plan)
    assert lattice.edge("sR_copy", "sR_sales") is not None
    assert lattice.edge("sR_sales", "sR_copy") is None
    assert any("same groups" in n for n in lattice.notes)


# =================================================================== 5. choosing parents (5.5)


def test_figure_3_parents_under_table_3(figure9):
    """sd_sCD_sales and sd_SiC_sales from sd_SID_sales, sd_sR_sales from sd_sCD_sales (Figure 3, Appendix A)."""
    assert {p.node: p.parent for p in figure9.parents} == {
        "SID_sales": DELTA,
        "sCD_sales": "SID_sales",
        "SiC_sales": "SID_sales",
        "sR_sales": "sCD_sales",
    }
    assert {e.node: e.rows for e in figure9.estimates} == {
        DELTA: 10_000,
        "SID_sales": 1000,
        "sCD_sales": 100,
        "SiC_sales": 1000,
        "sR_sales": 10,
    }


def test_table_1_tuple_accesses(figure9):
    """Table 1 counts rows read by propagate plus summary-delta rows written by refresh:
    'Reuse deltas' 11,000 / 1,100 / 2,000 / 110 and 'Individual' 11,000 / 10,100 / 11,000 / 10,010."""
    reuse, individual = {}, {}
    for p in figure9.parents:
        written = figure9.estimate(p.node).rows
        reuse[p.node] = p.chosen.parent_rows + written
        direct = next(c for c in p.candidates if c.parent == DELTA)
        individual[p.node] = direct.parent_rows + written
    assert reuse == {"SID_sales": 11_000, "sCD_sales": 1_100, "SiC_sales": 2_000, "sR_sales": 110}
    assert individual == {"SID_sales": 11_000, "sCD_sales": 10_100, "SiC_sales": 11_000, "sR_sales": 10_010}
    assert sum(reuse.values()) == 14_210 and sum(individual.values()) == 42_110


def test_join_cost_counts_on_the_edge(figure9):
    """5.5: the join cost estimate is part of the derivation cost along an edge annotated with a join."""
    sr = next(p for p in figure9.parents if p.node == "sR_sales")
    costs = {c.parent: (c.parent_rows, c.join_rows) for c in sr.candidates}
    assert costs["sCD_sales"] == (100, 0)  # no join, thanks to region (Example 5.4)
    assert costs["SiC_sales"] == (1000, 100)  # joins the 100 stores
    assert costs[DELTA] == (10_000, 100)


def test_parent_changes_with_the_statistics(figure1):
    """If sd_sCD_sales were large and sd_SiC_sales small, sd_sR_sales comes from SiC (joining stores)."""
    stats = Statistics.of(
        table_rows={"pos": 1_000_000, "stores": 100, "items": 1000},
        change_rows={"pos": 10_000},
        change_distinct={("pos.storeID", "pos.itemID", "pos.date"): 9000, ("stores.city", "pos.date"): 5000,
                         ("pos.storeID", "items.category"): 50, "stores.region": 10},
    )
    lattice = build_lattice(figure1, stats)
    assert lattice.parent_of("sR_sales") == "SiC_sales"
    assert lattice.augmentations == ()  # nothing reads region below sCD_sales any more
    assert "region" not in [k.name for k in lattice.node("sCD_sales").keys]


def test_a_changed_dimension_invalidates_edges_that_join_it(figure1):
    """sd_SID_sales has no trace of a stores change: sd_sCD_sales must come from the change set
    (4.1.4), whose stores term reads the old pos table; sd_sR_sales still derives from sd_sCD_sales."""
    stats = Statistics.of(
        table_rows={"pos": 1_000_000, "stores": 100, "items": 1000},
        change_rows={"pos": 10_000, "stores": 4},
        change_distinct=dict(TABLE_3_DISTINCT),
    )
    lattice = build_lattice(figure1, stats)
    scd = next(p for p in lattice.parents if p.node == "sCD_sales")
    assert scd.parent == DELTA
    via_sid = next(c for c in scd.candidates if c.parent == "SID_sales")
    assert not via_sid.valid and "stores" in via_sid.reason
    assert scd.chosen.join_rows == 100 + 1_000_000 + 4  # join stores, and F ⋈ Δstores
    assert lattice.parent_of("sR_sales") == "sCD_sales"
    sic = next(p for p in lattice.parents if p.node == "SiC_sales")
    assert (sic.parent, sic.requires_unchanged) == ("SID_sales", ("items",))


TABLE_3_DISTINCT = {
    ("pos.storeID", "pos.itemID", "pos.date"): 1000,
    ("stores.city", "pos.date"): 100,
    ("pos.storeID", "items.category"): 1000,
    "stores.region": 10,
}


def test_defaults_without_statistics(figure1):
    """No statistics: estimates come from the schema (dimension sizes, hierarchy levels, types); the
    derivation still follows Figure 3 and every estimate says what it rests on."""
    lattice = build_lattice(figure1)
    assert {p.node: p.parent for p in lattice.parents} == {
        "SID_sales": DELTA, "sCD_sales": "SID_sales", "SiC_sales": "SID_sales", "sR_sales": "sCD_sales"
    }
    assert len(lattice.estimates) == len(lattice.nodes)
    assert all(e.rows > 0 and "default" in e.basis for e in lattice.estimates)
    rows = {e.node: e.rows for e in lattice.estimates}
    assert rows[DELTA] >= rows["SID_sales"] >= rows["sCD_sales"] >= rows["sR_sales"]


def test_estimates_never_exceed_the_changed_rows(figure1):
    stats = Statistics.of(change_rows={"pos": 50}, change_distinct={("pos.storeID", "pos.itemID", "pos.date"): 1000})
    lattice = build_lattice(figure1, stats)
    assert all(e.rows <= 50 for e in lattice.estimates)


TWO_WITHOUT_ANCESTOR = {n: FIGURE_1[n] for n in ("sCD_sales", "SiC_sales")}


def test_implied_point_connects_views_without_a_common_ancestor():
    """Without SID_sales, sCD_sales and SiC_sales meet only at the change set; their least upper bound
    in Figure 5's cube lattice is (storeID, category, date), kept when its summary-delta is small."""
    plan = plan_of(TWO_WITHOUT_ANCESTOR)
    stats = Statistics.of(
        change_rows={"pos": 10_000},
        change_distinct={
            ("pos.storeID", "items.category", "pos.date"): 200,
            ("stores.city", "pos.date"): 100,
            ("pos.storeID", "items.category"): 150,
        },
    )
    lattice = build_lattice(plan, stats)
    (point,) = [n for n in lattice.nodes if n.kind == "implied"]
    assert {k.ref for k in point.keys} == {ColumnRef("pos", "storeID"), ColumnRef("items", "category"), ColumnRef("pos", "date")}
    assert lattice.parent_of("sCD_sales") == lattice.parent_of("SiC_sales") == point.name
    assert lattice.parent_of(point.name) == DELTA


def test_implied_point_dropped_when_it_does_not_pay():
    plan = plan_of(TWO_WITHOUT_ANCESTOR)
    stats = Statistics.of(change_rows={"pos": 10_000}, change_distinct={("pos.storeID", "items.category", "pos.date"): 10_000})
    lattice = build_lattice(plan, stats)
    assert [n.kind for n in lattice.nodes] == ["changes", "view", "view"]
    assert any("dropped" in n for n in lattice.notes)


# =================================================================== 6. rendering


ACTUAL = {"SID_sales": 987, "sR_sales": 9}


def test_text_names_nodes_edges_parents_and_rows(figure9):
    text = render.to_text(figure9, ACTUAL)
    for label in ("SID_sales(storeID, itemID, date)", "sCD_sales(city, date, +region)", "SiC_sales(storeID, category)", "sR_sales(region)"):
        assert label in text
    assert "* SID_sales -> sCD_sales: stores on storeID" in text
    assert "  SiC_sales -> sR_sales: stores on storeID" in text  # drawn, not chosen
    assert "* sCD_sales -> sR_sales: no join" in text
    assert "est 1,000 | actual 987" in text
    assert "sCD_sales: +region = stores.region (determined by stores.city), read by sR_sales" in text


def test_dict_is_json_and_complete(figure9):
    data = json.loads(json.dumps(render.to_dict(figure9, ACTUAL)))
    nodes = {n["name"]: n for n in data["nodes"]}
    assert set(nodes) == {DELTA, *VIEWS}
    assert nodes["sR_sales"]["parent"] == "sCD_sales"
    assert nodes["sR_sales"]["estimated_rows"] == 10 and nodes["sR_sales"]["actual_rows"] == 9
    assert {"name": "region", "attribute": "stores.region", "hidden": True} in nodes["sCD_sales"]["keys"]
    assert len(data["edges"]) == len(figure9.edges)
    assert {(e["upper"], e["lower"]) for e in data["edges"] if e["chosen"]} == {(p.parent, p.node) for p in figure9.parents}
    assert {a["node"]: a["attribute"] for a in data["augmentations"]} == {"sCD_sales": "stores.region"}


def test_dot_is_valid_and_names_every_node(figure9):
    dot = render.to_dot(figure9, ACTUAL)
    try:
        import pydot
    except ImportError:
        pydot = None
    if pydot is not None:
        with warnings.catch_warnings():  # pydot's parser uses deprecated pyparsing names
            warnings.simplefilter("ignore")
            (graph,) = pydot.graph_from_dot_data(dot)
        names = {n.get_name().strip('"') for n in graph.get_nodes()} - {"node", "edge"}
        edges = {(e.get_source().strip('"'), e.get_destination().strip('"')) for e in graph.get_edges()}
    else:  # structure: one digraph, balanced braces, every edge endpoint declared as a node
        assert dot.startswith("digraph ") and dot.count("{") == dot.count("}") == 1
        names = set(re.findall(r'^\s+"([^"]+)" \[label=', dot, re.M))
        edges = set(re.findall(r'^\s+"([^"]+)" -> "([^"]+)"', dot, re.M))
    assert names == {DELTA, *VIEWS}
    assert edges == set(cover(figure9))
    assert "sCD_sales\\n(city, date, +region)" in dot


def test_png_is_written(figure9, tmp_path):
    dot, png, js = render.write_files(figure9, tmp_path, ACTUAL)
    assert (dot.name, png.name, js.name) == ("plan.dot", "plan.png", "plan.json")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    from PIL import Image

    with Image.open(png) as img:
        width, height = img.size
    assert width > 400 and height > 400  # large enough to read


def test_png_of_a_lattice_with_implied_points_and_filters(tmp_path):
    views = {**FIGURE_1, **FILTERED, **INCOMPATIBLE}
    path = render.write_png(build_lattice(plan_of(views)), tmp_path / "big.png")
    assert path.stat().st_size > 10_000


# =================================================================== 7. bad input


def test_dependency_on_an_unknown_column_names_it():
    with pytest.raises(ConfigError, match=r"\[dependencies\] stores: regio is not a column of stores"):
        build_lattice(plan_of(FIGURE_1, dependencies=(FunctionalDependency("stores", ("city",), ("regio",)),)))


def test_dependency_on_an_unknown_table_names_it():
    with pytest.raises(ConfigError, match=r"\[dependencies\] shops: no such table"):
        build_lattice(plan_of(FIGURE_1, dependencies=(FunctionalDependency("shops", ("city",), ("region",)),)))


def test_derives_is_a_function_of_two_points(figure1):
    """derives() is usable on its own (5.1): sR_sales ≺^stores SiC_sales."""
    points = {n.name: n for n in lattice_points(Lattice(nodes=()), figure1).nodes}
    edge = derives(points["sR_sales"], points["SiC_sales"], figure1.schema, figure1.dependencies)
    assert edge.join_labels == ("stores",)
    assert augment(add_implied_points(derive_edges(lattice_points(Lattice(nodes=()), figure1), figure1), figure1), figure1).augmentations[0].node == "sCD_sales"


# =================================================================== a full cube


def full_cube() -> dict[str, str]:
    """Every point of stores(storeID -> city -> region) x items(itemID -> category) x date with COUNT(*)
    and SUM(qty): 4 x 3 x 2 = 24 points less the grand total (a summary table needs a GROUP BY): 23 views."""
    store = [("storeID", "p.storeID"), ("city", "s.city"), ("region", "s.region"), (None, None)]
    item = [("itemID", "p.itemID"), ("category", "i.category"), (None, None)]
    date = [("date", "p.date"), (None, None)]
    views = {}
    for a in store:
        for b in item:
            for c in date:
                cols = [col for _, col in (a, b, c) if col]
                if not cols:
                    continue
                name = "cube_" + "_".join(n for n, _ in (a, b, c) if n)
                select = ", ".join(cols + ["COUNT(*) AS n", "SUM(p.qty) AS q"])
                group = f" GROUP BY {', '.join(cols)}" if cols else ""
                views[name] = (f"CREATE VIEW {name} AS SELECT {select} FROM pos p JOIN stores s ON p.storeID = s.storeID "
                               f"JOIN items i ON p.itemID = i.itemID{group}")
    return views


def test_a_full_cube_compiles_to_the_expected_lattice():
    """Derives (5.1) on a product of chains: v1 derives from v2 exactly when every dimension of v1 is at the
    same or a coarser level than in v2. Chains of 4, 3 and 2 levels (ALL included) give 10 x 6 x 3 = 180
    ordered pairs of the 24 points, equal pairs included; without the grand total (below all 24) that is 156,
    so 156 - 23 = 133 edges between distinct views, plus one from the change set to each of the 23 views. The
    Hasse diagram of the 24 points has 3*3*2 + 2*4*2 + 1*4*3 = 46 cover edges, 3 of them into the grand
    total: 43 among the views, plus the change set above the finest view."""
    plan = plan_of(full_cube())
    lattice = build_lattice(plan)
    views = [n for n in lattice.nodes if n.kind == "view"]
    assert len(views) == 23 and not [n for n in lattice.nodes if n.kind == "implied"]
    among = {v.name for v in views}
    between = [e for e in lattice.edges if e.upper in among and e.lower in among]
    assert len(between) == 133
    assert len([e for e in lattice.edges if e.upper == DELTA]) == 23
    assert len([e for e in lattice.cover_edges if e.upper in among]) == 43
    assert [e.lower for e in lattice.cover_edges if e.upper == DELTA] == ["cube_storeID_itemID_date"]
    assert all(lattice.node(p.parent).kind == "changes" or p.parent in among for p in lattice.parents)


# ------------------------------------------------------------------ computed group keys

MONTHLY = {
    "SID_sales": FIGURE_1["SID_sales"],
    "monthly": "CREATE VIEW monthly AS SELECT storeID, CAST(DATE_TRUNC('month', date) AS DATE) AS month, "
               "COUNT(*) AS n, SUM(qty) AS q FROM pos GROUP BY storeID, CAST(DATE_TRUNC('month', date) AS DATE)",
    "yearly": "CREATE VIEW yearly AS SELECT CAST(DATE_TRUNC('month', date) AS DATE) AS month, COUNT(*) AS n "
              "FROM pos GROUP BY CAST(DATE_TRUNC('month', date) AS DATE)",
}


def test_a_month_key_derives_from_a_date_key():
    """A computed key is determined by the columns it reads (5.1): monthly(store, month(date)) derives
    from SID_sales(store, item, date) by computing the month along the edge; a view grouped by the same
    expression (yearly here groups by month alone) reads it from monthly's key instead."""
    plan = plan_of(MONTHLY)
    stats = Statistics.of(table_rows={"pos": 1_000_000}, change_rows={"pos": 100_000},
                          change_distinct={("pos.storeID", "pos.itemID", "pos.date"): 1000})
    lattice = build_lattice(plan, stats)
    edge = lattice.edge("SID_sales", "monthly")
    assert edge is not None and not edge.joins
    assert {a.ref.column for a in edge.attributes if not a.ref.is_expression} == {"storeID", "date"}
    assert lattice.parent_of("monthly") == "SID_sales"
    assert lattice.edge("monthly", "yearly") is not None
    from lattice import emit

    sql = emit.derived_summary_delta(edge, lattice.node("monthly"), emit.rel("sd", "SID_sales"), plan.schema)
    assert 'TIMESTAMP_TRUNC("SID_sales"."date", MONTH)' in sql  # computed over the parent's date key
    down = emit.derived_summary_delta(lattice.edge("monthly", "yearly"), lattice.node("yearly"),
                                      emit.rel("sd", "monthly"), plan.schema)
    assert '"monthly"."month"' in down and "_TRUNC" not in down  # read, not recomputed


# ------------------------------------------------------------------ delta or recompute per night


def test_a_night_recomputes_a_view_only_when_that_is_cheaper(figure1):
    from lattice.passes.choose_modes import choose_modes

    def modes(table_rows: int, changes: int, deletes: bool) -> dict[str, str]:
        stats = Statistics.of(table_rows={"pos": table_rows, "stores": 100, "items": 1000}, change_rows={"pos": changes})
        lattice = build_lattice(figure1, stats)
        return {m.view: m.mode for m in choose_modes(lattice, figure1, stats, deletes)}

    assert set(modes(1_000_000, 1_000, True).values()) == {"delta"}  # an ordinary night
    assert set(modes(0, 1_000_000, False).values()) == {"delta"}  # the first load: a tie; the lattice shares work
    backfill = modes(1_000_000, 2_000_000, True)  # every row deleted and inserted again
    assert backfill["SID_sales"] == "recompute"  # (store, item, date): about one group per row
    assert backfill["sR_sales"] == "delta"  # a handful of regions: derived along the lattice, merged cheaply
