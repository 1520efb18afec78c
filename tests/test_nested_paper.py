"""Paper 000 (Quass, "Maintenance Expressions for Views with Aggregation") as specification tests of the
nested mode: a summary view that reads FROM another summary view.

The paper's base table sales_log(sale_id, store_id, date, sale_price) becomes a fact table with a
foreign key to a stores dimension (nightshift's schema needs one); its daily_sales view (Example 4.1)
is the inner view and its introduction's query ("the maximum daily sales total for each store") the
outer one, with further outer views for MIN/SUM/COUNT/AVG over the inner aggregate, grand totals
three levels up, and σ over the inner aggregate (a WHERE threshold, an inner HAVING) joined to the
dimension. An update is the delete of the old row and the insert of the new one in the same batch,
as in the paper's transaction (sale 0004 moves from 3 July to 3 May).

Every night runs the real cycle (propagate, refresh, apply-base) and is checked twice: against the
rows written here by hand (the paper's tables where it gives them) and against the repository's
oracle (every view recomputed from scratch over the lake's base, nightshift/oracle.py). Each night
also says which views it moves: a view's hand-written rows must differ from what it served the
night before exactly when the night says it moves, so no expectation holds by standing still.
These tests start Spark (the `spark` fixture), so conftest marks them slow.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import BACKENDS
from harness import make_project
from lattice import emit
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import bag, check_all

SCHEMA_SQL = """
CREATE TABLE stores (store_id INTEGER PRIMARY KEY, city VARCHAR, region VARCHAR);
CREATE TABLE sales_log (
    sale_id    INTEGER PRIMARY KEY,
    store_id   INTEGER NOT NULL REFERENCES stores(store_id),
    date       DATE,
    sale_price INTEGER
);
"""
ARROW = {
    "stores": pa.schema([("store_id", pa.int32()), ("city", pa.string()), ("region", pa.string())]),
    "sales_log": pa.schema([("sale_id", pa.int32()), ("store_id", pa.int32()), ("date", pa.date32()),
                            ("sale_price", pa.int32())]),
}

# Example 4.1's view, with the COUNT(*) the paper adds to propagate deletions
DAILY_SALES = ("CREATE VIEW daily_sales AS SELECT store_id, date, SUM(sale_price) AS daily_total, "
               "COUNT(*) AS total_count FROM sales_log GROUP BY store_id, date")
# Section 1: "the maximum daily sales total for each store", its subquery made the view daily_sales
MAX_DAILY = ("CREATE VIEW max_daily AS SELECT store_id, MAX(daily_total) AS max_daily_total "
             "FROM daily_sales GROUP BY store_id")

MAY1, MAY2, MAY3, MAY4, MAY5 = (dt.date(1996, 5, d) for d in range(1, 6))
JULY3 = dt.date(1996, 7, 3)
PALO_ALTO, MENLO_PARK, BOSTON = (555, "palo alto", "west"), (556, "menlo park", "west"), (557, "boston", "east")


def _write_changes(root: Path, batch: str, changes: dict[str, list[tuple[str, tuple]]]) -> None:
    """table -> [(op, row)] as lake/changes/<table>/batch_id=<batch>/part-0.parquet."""
    for table, rows in changes.items():
        folder = root / "lake" / "changes" / table / f"batch_id={batch}"
        folder.mkdir(parents=True, exist_ok=True)
        data = {c: [r[i] for _, r in rows] for i, c in enumerate(ARROW[table].names)}
        data["_op"] = [op for op, _ in rows]
        schema = ARROW[table].append(pa.field("_op", pa.string()))
        pq.write_table(pa.Table.from_pydict(data, schema=schema), folder / "part-0.parquet")


def _ins(*rows: tuple) -> list[tuple[str, tuple]]:
    return [("insert", r) for r in rows]


def _del(*rows: tuple) -> list[tuple[str, tuple]]:
    return [("delete", r) for r in rows]


def _cycle(tmp_path: Path, spark, quiet, views: dict[str, str], nested: set[str], url: str | None = None) -> tuple[Cycle, Path]:
    """A project of these views kept incrementally every night (never traded for a recompute), whose
    views over views are in the nested mode."""
    root = make_project(tmp_path / "p", views, schema_sql=SCHEMA_SQL, url=url, maintain="incremental")
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert {v.name for v in cycle.plan.views if v.mode == "nested"} == nested
    cycle._ensure_summary_tables()  # empty summary tables: what every view serves before the first night
    return cycle, root


def _served(cycle: Cycle, view: str) -> Counter:
    return bag(cycle.warehouse.read_view(cycle.plan.view(view)))


def _night(cycle: Cycle, root: Path, batch: str, changes: dict, expect: dict[str, list[tuple]], moves: set[str]) -> None:
    """Run batch `batch` through propagate, refresh and apply-base; then every view serves exactly its
    hand-written rows, equals its recomputation from scratch, and differs from the night before
    exactly when it is in `moves`."""
    assert set(expect) == {v.name for v in cycle.plan.views}, "write every view's rows by hand"
    assert moves <= set(expect)
    before = {v: _served(cycle, v) for v in expect}
    _write_changes(root, batch, changes)
    cycle.run(batch)
    night = cycle.lake.read_manifest(batch).night
    for v in cycle.plan.views:  # the nested views really ran nested, as summary-deltas
        step = night.view(v.name)
        assert (step.mode, step.nested) == ("delta", v.mode == "nested"), f"batch {batch}, view {v.name}: {step}"
    for view, rows in expect.items():
        want = bag(rows)
        assert (want != before[view]) == (view in moves), (
            f"batch {batch}, view {view}: the hand-written rows {'do not ' if view in moves else ''}differ from "
            f"the night before ({sorted(before[view])})")
        got = _served(cycle, view)
        assert got == want, f"batch {batch}, view {view}: served {sorted(got)}\nexpected {sorted(want)}"
    mismatches = check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view)
    assert mismatches == [], f"batch {batch}: served != recomputed: {[str(m) for m in mismatches]}"


# ---------------------------------------------------------------- Example 4.1 and the introduction's query

SALE_1 = (1, 555, MAY1, 10)
SALE_2 = (2, 555, MAY1, 20)
SALE_3 = (3, 555, MAY2, 40)
SALE_4 = (4, 555, JULY3, 100)


def _summary_delta(cycle: Cycle, batch: str, view: str) -> Counter:
    """Figure 2's π_{A_δ}(δR) of `view` as propagate wrote it: (group keys, SUM of the signed targets,
    SUM of the signed counts) per changed group."""
    v = cycle.plan.view(view)
    entry = cycle.lake.read_manifest(batch).delta(view)
    table = pq.read_table(cycle.lake.delta_files(batch, entry.part)).to_pydict()
    total = next(s.column for s in v.stored if s.kind == "sum")
    count = next(s.column for s in v.stored if s.kind == "count_star")
    columns = [entry.prefix + c for c in [k.name for k in v.keys] + [total, count]]
    return bag(zip(*(table[c] for c in columns)))


def _change_set(cycle: Cycle, view: str, kind: str) -> Counter:
    """The change set outer views read from inner view `view` tonight (000 §6): kind "del" = the old
    served rows of its changed groups (∇), "ins" = their new served rows (Δ)."""
    return bag(tuple(r) for r in cycle.spark.table(emit.rel(kind, view)).collect())


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_4_1_daily_sales_and_the_maximum_daily_total_per_store(tmp_path, spark, quiet, warehouse_url, backend):
    """Example 4.1 (Section 4.2, Figure 2) and Section 1's query over it, nested. The paper's
    sales_log and daily_sales tables; its transaction t (delete sales 0001 and 0004, insert 0004 on
    3 May, 0005, 0006) gives the paper's π_{A_δ}(δ sales_log), the paper's ∇ and Δ of daily_sales
    (which Section 6's Figure 5 applies as one update, one deletion and one insertion), and the
    maximum daily total moves from 3 July's 100 (a group that vanishes) to 3 May's 150 (a group that
    appears)."""
    views = {"daily_sales": DAILY_SALES, "max_daily": MAX_DAILY}
    cycle, root = _cycle(tmp_path, spark, quiet, views, {"max_daily"}, warehouse_url(backend, "paper_4_1"))
    _night(cycle, root, "b0", {"stores": _ins(PALO_ALTO), "sales_log": _ins(SALE_1, SALE_2, SALE_3, SALE_4)},
           {"daily_sales": [(555, MAY1, 30, 2), (555, MAY2, 40, 1), (555, JULY3, 100, 1)],  # the paper's table
            "max_daily": [(555, 100)]},
           moves={"daily_sales", "max_daily"})

    transaction = {"sales_log": _del(SALE_1, SALE_4) + _ins((4, 555, MAY3, 100), (5, 555, MAY1, 30), (6, 555, MAY3, 50))}
    _write_changes(root, "b1", transaction)
    cycle.propagate("b1")
    # π_{store_id, date, daily_total=sum(f_1), total_count=sum(cnt)}(δ sales_log), as printed in Example 4.1
    assert _summary_delta(cycle, "b1", "daily_sales") == bag(
        [(555, MAY1, 20, 0), (555, JULY3, -100, -1), (555, MAY3, 150, 2)])
    deleted = bag([(555, MAY1, 30, 2), (555, JULY3, 100, 1)])  # ∇(t, daily_sales), the paper's table
    inserted = bag([(555, MAY1, 50, 2), (555, MAY3, 150, 2)])  # Δ(t, daily_sales), the paper's table
    assert _change_set(cycle, "daily_sales", "del") == deleted
    assert _change_set(cycle, "daily_sales", "ins") == inserted
    # Figure 5 applies them by group: daily_sales gets one insertion (3 May), one update μ (1 May) and one
    # deletion (3 July, its count reaches 0); max_daily one update (555: 100 to 150)
    stats = cycle.refresh("b1").details
    assert {v: (stats[v]["inserted"], stats[v]["updated"], stats[v]["deleted"]) for v in views} == {
        "daily_sales": (1, 1, 1), "max_daily": (0, 1, 0)}
    cycle.apply_base("b1")
    assert _served(cycle, "daily_sales") == bag([(555, MAY1, 50, 2), (555, MAY2, 40, 1), (555, MAY3, 150, 2)])
    assert _served(cycle, "max_daily") == bag([(555, 150)])
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
    cycle.close()


# ---------------------------------------------------------------- Section 5: MIN and MAX over an inner aggregate

STORE_DAYS = ("CREATE VIEW store_days AS SELECT store_id, MIN(daily_total) AS worst, SUM(daily_total) AS total, "
              "COUNT(*) AS days, AVG(daily_total) AS mean FROM daily_sales GROUP BY store_id")
TOP = "CREATE VIEW top AS SELECT MAX(max_daily_total) AS top, MIN(max_daily_total) AS low, COUNT(*) AS stores FROM max_daily"


def test_section_5_min_and_max_over_daily_totals_when_the_extreme_group_changes(tmp_path, spark, quiet):
    """Section 5 (Figure 4 and its conditions C_i), one level and two levels up: MAX/MIN of daily totals
    per store, and MAX/MIN/COUNT over those maxima. An update of the inner view deletes its old row and
    inserts its new one, so C_i (the extreme deleted, nothing at least as extreme inserted) holds when
    the extreme day vanishes or is lowered, and not when the same batch re-establishes the extreme;
    insertions into sales_log raise a day's total, which for an outer MIN is a deletion of its extreme.
    Stores' groups vanish (a store closes; every sale goes) and appear; SQL-92 NULLs (Section 5)."""
    views = {"daily_sales": DAILY_SALES, "max_daily": MAX_DAILY, "store_days": STORE_DAYS, "top": TOP}
    cycle, root = _cycle(tmp_path, spark, quiet, views, {"max_daily", "store_days", "top"})
    everything = set(views)
    sales = {1: (1, 555, MAY1, 10), 2: (2, 555, MAY1, 20), 3: (3, 555, MAY2, 40), 4: (4, 555, JULY3, 100),
             5: (5, 556, MAY1, 70), 6: (6, 556, MAY1, 10), 7: (7, 556, MAY2, 60), 8: (8, 557, MAY1, 25)}
    _night(cycle, root, "b0", {"stores": _ins(PALO_ALTO, MENLO_PARK, BOSTON), "sales_log": _ins(*sales.values())},
           {"daily_sales": [(555, MAY1, 30, 2), (555, MAY2, 40, 1), (555, JULY3, 100, 1),
                            (556, MAY1, 80, 2), (556, MAY2, 60, 1), (557, MAY1, 25, 1)],
            "max_daily": [(555, 100), (556, 80), (557, 25)],
            "store_days": [(555, 30, 170, 3, 170 / 3), (556, 60, 140, 2, 70.0), (557, 25, 25, 1, 25.0)],
            "top": [(100, 25, 3)]},
           moves=everything)

    # C_i for MAX: palo alto's extreme group vanishes (3 July's only sale) while its other days remain;
    # menlo park's extreme group is lowered below its other day (1 May loses its 70). Two levels up,
    # top's MAX (palo alto's 100) goes too.
    _night(cycle, root, "b1", {"sales_log": _del(sales[4], sales[5])},
           {"daily_sales": [(555, MAY1, 30, 2), (555, MAY2, 40, 1),
                            (556, MAY1, 10, 1), (556, MAY2, 60, 1), (557, MAY1, 25, 1)],
            "max_daily": [(555, 40), (556, 60), (557, 25)],
            "store_days": [(555, 30, 70, 2, 35.0), (556, 10, 70, 2, 35.0), (557, 25, 25, 1, 25.0)],
            "top": [(60, 25, 3)]},
           moves=everything)

    # not C_i: each extreme deleted and re-established in the same batch. Palo alto's best day (2 May,
    # 40) moves to 4 May (sale 3 updated, as the paper's sale 0004); menlo park's best day (2 May, 60)
    # drops to 55 while 1 May rises to exactly 60; boston's only sale is deleted and inserted again.
    # The maxima stand; menlo park's MIN (1 May's 10) is raised, which is C_i for MIN.
    moved_3, lowered_7, sale_9 = (3, 555, MAY4, 40), (7, 556, MAY2, 55), (9, 556, MAY1, 50)
    _night(cycle, root, "b2",
           {"sales_log": _del(sales[3], sales[7], sales[8]) + _ins(moved_3, lowered_7, sale_9, sales[8])},
           {"daily_sales": [(555, MAY1, 30, 2), (555, MAY4, 40, 1),
                            (556, MAY1, 60, 2), (556, MAY2, 55, 1), (557, MAY1, 25, 1)],
            "max_daily": [(555, 40), (556, 60), (557, 25)],
            "store_days": [(555, 30, 70, 2, 35.0), (556, 55, 115, 2, 57.5), (557, 25, 25, 1, 25.0)],
            "top": [(60, 25, 3)]},
           moves={"daily_sales", "store_days"})

    # insertions only, yet the outer MINs lose their extremes: palo alto's worst day (1 May, 30) rises
    # to 55, so its worst is now 4 May's 40; boston's only day rises from 25 to 125, so top's low
    # (boston's 25) goes two levels up
    sale_10, sale_11 = (10, 555, MAY1, 25), (11, 557, MAY1, 100)
    _night(cycle, root, "b3", {"sales_log": _ins(sale_10, sale_11)},
           {"daily_sales": [(555, MAY1, 55, 3), (555, MAY4, 40, 1),
                            (556, MAY1, 60, 2), (556, MAY2, 55, 1), (557, MAY1, 125, 2)],
            "max_daily": [(555, 55), (556, 60), (557, 125)],
            "store_days": [(555, 40, 95, 2, 47.5), (556, 55, 115, 2, 57.5), (557, 125, 125, 1, 125.0)],
            "top": [(125, 55, 3)]},
           moves=everything)

    # a store closes (its groups vanish at every level) and one opens whose only sale has no price:
    # its day's SUM is NULL, which MAX and MIN ignore and COUNT(*) counts
    cambridge, sale_12 = (558, "cambridge", "east"), (12, 558, MAY5, None)
    _night(cycle, root, "b4",
           {"stores": _del(MENLO_PARK) + _ins(cambridge),
            "sales_log": _del(sales[6], lowered_7, sale_9) + _ins(sale_12)},
           {"daily_sales": [(555, MAY1, 55, 3), (555, MAY4, 40, 1), (557, MAY1, 125, 2), (558, MAY5, None, 1)],
            "max_daily": [(555, 55), (557, 125), (558, None)],
            "store_days": [(555, 40, 95, 2, 47.5), (557, 125, 125, 1, 125.0), (558, None, None, 1, None)],
            "top": [(125, 55, 3)]},
           moves={"daily_sales", "max_daily", "store_days"})

    # every group of every level vanishes; the grand total over max_daily serves (NULL, NULL, 0)
    _night(cycle, root, "b5", {"sales_log": _del(sales[1], sales[2], moved_3, sales[8], sale_10, sale_11, sale_12)},
           {"daily_sales": [], "max_daily": [], "store_days": [], "top": [(None, None, 0)]},
           moves=everything)
    cycle.close()


# ---------------------------------------------------------------- σ over inner aggregates, joined to a dimension

BIG_DAYS = ("CREATE VIEW big_days AS SELECT store_id, COUNT(*) AS big_days, MIN(daily_total) AS smallest_big "
            "FROM daily_sales WHERE daily_total >= 100 GROUP BY store_id")
REGION_BEST = ("CREATE VIEW region_best AS SELECT region, MAX(daily_total) AS best, SUM(total_count) AS sales "
               "FROM daily_sales JOIN stores ON daily_sales.store_id = stores.store_id GROUP BY region")
BUSY_DAYS = ("CREATE VIEW busy_days AS SELECT store_id, date, SUM(sale_price) AS total, COUNT(*) AS sales "
             "FROM sales_log GROUP BY store_id, date HAVING COUNT(*) >= 2")
BUSIEST = ("CREATE VIEW busiest AS SELECT MAX(total) AS best_busy, SUM(sales) AS busy_sales, COUNT(*) AS busy_days "
           "FROM busy_days")


def test_selections_over_inner_aggregates_and_a_join_to_the_dimension(tmp_path, spark, quiet):
    """Section 3.1's σ and ⋈ over an aggregate (Section 4.2: daily_sales' deletions and insertions
    "propagated further up through the other operators in the view definition"): a WHERE threshold on
    daily totals (big_days), an inner HAVING (busy_days, read by a grand total), and daily totals
    joined to the stores dimension (region_best). Inner groups cross each threshold up and down while
    they persist, so outer rows appear and vanish; a new inner group passes HAVING at once; the
    region's MAX and the busiest day's MAX lose their extremes (Section 5's C_i); a store moving
    region moves its days between outer groups."""
    views = {"daily_sales": DAILY_SALES, "big_days": BIG_DAYS, "region_best": REGION_BEST,
             "busy_days": BUSY_DAYS, "busiest": BUSIEST}
    cycle, root = _cycle(tmp_path, spark, quiet, views, {"big_days", "region_best", "busiest"})
    everything = set(views)
    sales = {1: (1, 555, MAY1, 60), 2: (2, 555, MAY1, 50), 3: (3, 555, MAY2, 90),
             4: (4, 556, MAY1, 120), 5: (5, 557, MAY1, 30), 6: (6, 557, MAY1, 40)}
    _night(cycle, root, "b0", {"stores": _ins(PALO_ALTO, MENLO_PARK, BOSTON), "sales_log": _ins(*sales.values())},
           {"daily_sales": [(555, MAY1, 110, 2), (555, MAY2, 90, 1), (556, MAY1, 120, 1), (557, MAY1, 70, 2)],
            "big_days": [(555, 1, 110), (556, 1, 120)],
            "region_best": [("west", 120, 4), ("east", 70, 2)],
            "busy_days": [(555, MAY1, 110, 2), (557, MAY1, 70, 2)],
            "busiest": [(110, 4, 2)]},
           moves=everything)

    # crossing up: palo alto's 2 May reaches 110 with a second sale (WHERE and HAVING); boston opens a
    # day at exactly 100 (WHERE, not HAVING); menlo park opens a day with two sales of 30 (HAVING at
    # once, not WHERE)
    sale_7, sale_8, sale_9, sale_10 = (7, 555, MAY2, 20), (8, 557, MAY2, 100), (9, 556, MAY3, 30), (10, 556, MAY3, 30)
    _night(cycle, root, "b1", {"sales_log": _ins(sale_7, sale_8, sale_9, sale_10)},
           {"daily_sales": [(555, MAY1, 110, 2), (555, MAY2, 110, 2), (556, MAY1, 120, 1), (556, MAY3, 60, 2),
                            (557, MAY1, 70, 2), (557, MAY2, 100, 1)],
            "big_days": [(555, 2, 110), (556, 1, 120), (557, 1, 100)],
            "region_best": [("west", 120, 7), ("east", 100, 3)],
            "busy_days": [(555, MAY1, 110, 2), (555, MAY2, 110, 2), (556, MAY3, 60, 2), (557, MAY1, 70, 2)],
            "busiest": [(110, 8, 4)]},
           moves=everything)

    # crossing down, the inner groups stay: palo alto's 1 May loses a sale (60, one sale: below both
    # thresholds); menlo park's only big day is updated from 120 to 99, so its big_days group vanishes
    # and the west's MAX (that day) is lowered below palo alto's 110
    updated_4 = (4, 556, MAY1, 99)
    _night(cycle, root, "b2", {"sales_log": _del(sales[2], sales[4]) + _ins(updated_4)},
           {"daily_sales": [(555, MAY1, 60, 1), (555, MAY2, 110, 2), (556, MAY1, 99, 1), (556, MAY3, 60, 2),
                            (557, MAY1, 70, 2), (557, MAY2, 100, 1)],
            "big_days": [(555, 1, 110), (557, 1, 100)],
            "region_best": [("west", 110, 6), ("east", 100, 3)],
            "busy_days": [(555, MAY2, 110, 2), (556, MAY3, 60, 2), (557, MAY1, 70, 2)],
            "busiest": [(110, 6, 3)]},
           moves=everything)

    # the dimension changes under the join: boston's store moves to seattle, in the west; the east's
    # only group vanishes and the west takes its days
    seattle = (557, "seattle", "west")
    _night(cycle, root, "b3", {"stores": _del(BOSTON) + _ins(seattle)},
           {"daily_sales": [(555, MAY1, 60, 1), (555, MAY2, 110, 2), (556, MAY1, 99, 1), (556, MAY3, 60, 2),
                            (557, MAY1, 70, 2), (557, MAY2, 100, 1)],
            "big_days": [(555, 1, 110), (557, 1, 100)],
            "region_best": [("west", 110, 9)],
            "busy_days": [(555, MAY2, 110, 2), (556, MAY3, 60, 2), (557, MAY1, 70, 2)],
            "busiest": [(110, 6, 3)]},
           moves={"region_best"})

    # C_i under σ: the busiest busy day (palo alto's 2 May, 110) loses a sale and leaves HAVING, so the
    # grand total's MAX falls to 70; the same day leaves big_days (90) and is no longer the west's MAX
    _night(cycle, root, "b4", {"sales_log": _del(sale_7)},
           {"daily_sales": [(555, MAY1, 60, 1), (555, MAY2, 90, 1), (556, MAY1, 99, 1), (556, MAY3, 60, 2),
                            (557, MAY1, 70, 2), (557, MAY2, 100, 1)],
            "big_days": [(557, 1, 100)],
            "region_best": [("west", 100, 8)],
            "busy_days": [(556, MAY3, 60, 2), (557, MAY1, 70, 2)],
            "busiest": [(70, 4, 2)]},
           moves=everything)
    cycle.close()
