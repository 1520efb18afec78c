"""Many views kept by recompute over the same fact table, one night: the night's plan shares the table's
state after the batch among them (NightPlan.shared), and propagate reads it once for all of them in its one
write job: Spark's own scan metrics (the manifest's rows read) show one scan of the base table, where each
view reading it for itself scanned it once per view. The served views equal recomputation every night."""

from __future__ import annotations

from harness import BatchGenerator, Model, check_served, make_project, write_changes
from lattice import emit
from nightshift.config import load_project
from nightshift.cycle import Cycle

RECOMPUTED = {  # each reads pos once; none is kept incrementally
    "ranked": "CREATE VIEW ranked AS SELECT storeID, itemID, SUM(qty) AS q, RANK() OVER (PARTITION BY storeID "
              "ORDER BY SUM(qty) DESC NULLS LAST, itemID) AS r FROM pos GROUP BY storeID, itemID",
    "store_sales": "CREATE VIEW store_sales AS SELECT s.storeID, s.city, COUNT(p.itemID) AS sales "
                   "FROM stores s LEFT JOIN pos p ON p.storeID = s.storeID GROUP BY s.storeID, s.city",
    "sold_items": "CREATE VIEW sold_items AS SELECT DISTINCT itemID FROM pos",
}
VIEWS = {  # pos is also a delta view's fact table, so the batch's checks do not keep it as they keep a dimension
    **RECOMPUTED,
    "by_store": "CREATE VIEW by_store AS SELECT storeID, COUNT(*) AS n, SUM(qty) AS q FROM pos GROUP BY storeID",
}


def test_recompute_reads_count_each_table_reference(tmp_path):
    plan = load_project(make_project(tmp_path / "p", {
        **VIEWS, "pairs": "CREATE VIEW pairs AS SELECT a.itemID, COUNT(*) AS n FROM pos a JOIN pos b "
                          "ON a.storeID = b.storeID GROUP BY a.itemID"})).plan
    assert emit.recompute_reads(plan.view("pairs"), plan) == {"pos": 2}  # a self-join names pos twice
    assert emit.recompute_reads(plan.view("store_sales"), plan) == {"stores": 1, "pos": 1}


def test_recompute_views_over_one_table_read_it_once(tmp_path, spark, quiet):
    root = make_project(tmp_path / "p", VIEWS)
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    modes = {v.name: "recompute" if not v.incremental else "delta" for v in cycle.plan.views}
    assert modes == {**{v: "recompute" for v in RECOMPUTED}, "by_store": "delta"}
    model = Model()
    gen = BatchGenerator(11, model)
    first = gen.initial()
    write_changes(root, "b0000", first)
    cycle.run("b0000")
    model.apply(first)
    base_rows = len(model.tables["pos"])
    # an insert-only night: nothing but the recomputed views reads the base of pos (no delete to check)
    tonight = {"pos": [("insert", row) for row in model.tables["pos"][:5]]}
    write_changes(root, "b0001", tonight)
    cycle.run("b0001")
    model.apply(tonight)
    check_served(cycle, model, VIEWS, "batch b0001")
    manifest = cycle.lake.read_manifest("b0001")
    pos = next(s for s in manifest.night.shared if s.table == "pos")
    assert set(pos.views) == set(RECOMPUTED) and pos.reads == 3
    assert "stores" not in {s.table for s in manifest.night.shared}  # one read: nothing to share
    read = {(r.kind, r.name): r for r in manifest.rows_read}
    assert (read["base", "pos"].scans, read["base", "pos"].rows) == (1, base_rows), read["base", "pos"]
    for n in (2, 3):  # random nights (deletes, dimension changes): still equal to recomputation
        batch = f"b{n:04d}"
        changes = gen.night()
        write_changes(root, batch, changes)
        cycle.run(batch)
        model.apply(changes)
        check_served(cycle, model, VIEWS, f"batch {batch}")
        assert "pos" in {s.table for s in cycle.lake.read_manifest(batch).night.shared}
    cycle.close()
