"""Propagate along the D-lattice (paper 001, 5.4-5.5): summary-deltas derived from other
summary-deltas equal the ones computed straight from the change set, night after night."""

from __future__ import annotations

import random
import shutil

import pyarrow.parquet as pq
import pytest

from lattice.dlattice import lattice_shape
from lattice.graph import levels
from nightshift.errors import BatchOrderError, WarehouseError
from harness import EXTENDED, FIGURE_1, BatchGenerator, Model, make_project, write_changes
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import bag

VIEWS = {**FIGURE_1, **EXTENDED}
# nested views (paper 000): a level reads the change set of a view an earlier level computed
NESTED = {
    "best_day": "CREATE VIEW best_day AS SELECT storeID, MAX(TotalQuantity) AS best FROM SID_sales GROUP BY storeID",
    "top_store": "CREATE VIEW top_store AS SELECT MAX(best) AS top, COUNT(*) AS stores FROM best_day",
}


def deltas(cycle, batch: str) -> dict:
    """Every view's summary-delta of `batch` as a bag of rows (from the files refresh would read)."""
    m = cycle.lake.read_manifest(batch)
    out = {}
    for v in cycle.plan.views:
        entry = m.delta(v.name)
        cols = [entry.prefix + c for c in [k.name for k in v.keys] + [s.column for s in v.stored] + ["_ns_lost"]]
        files = cycle.lake.delta_files(batch, entry.part)
        rows = [tuple(r[c] for c in cols) for f in files for r in pq.read_table(f, columns=cols).to_pylist()]
        out[v.name] = bag(rows)
    return out


def lattice_equals_direct(root, spark, monkeypatch, views: dict, seed: int, nights: int) -> tuple[set[str], int]:
    """Run `nightshift` over `nights` random nights; each is propagated along the lattice and again
    straight from the changes. On a night that changes only the fact table the two sets of
    summary-deltas must be equal (Theorem 5.1). A night that also changes a dimension may differ in
    rows that do not change the result: straight from the changes, a view that joins the changed
    dimension only as a foreign-key filter gets zero-net rows marked as having lost rows (4.1.4's
    F⋈ΔD term), which Appendix B's pushed-down point does not read. Either way the lattice's
    deltas, refreshed, must give every view's recomputation, night after night.
    Weak minimality (4.3) is off here: its test compares the deleted values with the summary-delta's
    MIN/MAX of the inserted ones, and a delta derived from a parent delta takes that MIN/MAX over the
    parent's net-positive groups only (a date inserted and deleted in one (store, item) group drops
    out), so along the lattice it may pick more groups for exact recomputation than straight from the
    changes: other rows, the same refreshed result. test_differential covers it along the lattice.
    Returns the edges used ("parent -> view") and the number of nights compared row for row."""
    monkeypatch.setenv("NIGHTSHIFT_WEAK_MINIMALITY", "0")
    model = Model()
    gen = BatchGenerator(seed, model)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    derived, strict = set(), 0
    for n in range(nights):
        batch = f"b{n:04d}"
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, batch, changes)
        cycle.set_options(lattice=False)
        direct = cycle.propagate(batch).details
        assert direct.night.lattice is None and direct.night.statistics == "off"
        straight = deltas(cycle, batch)
        shutil.rmtree(cycle.lake.delta_root(batch))
        cycle.set_options(lattice=True)
        manifest = cycle.propagate(batch).details
        derived |= {f"{parent} -> {v}" for v, parent in manifest.night.chosen_parents}
        if manifest.night.info.changed <= {"pos"}:
            assert deltas(cycle, batch) == straight, f"seed {seed}, batch {batch}: lattice != direct"
            strict += 1
        cycle.refresh(batch)
        cycle.apply_base(batch)
        model.apply(changes)
        expected = model.recompute(views)
        for v in cycle.plan.views:
            got = bag(cycle.warehouse.read_view(v))
            assert got == expected[v.name], f"seed {seed}, batch {batch}: {v.name} != recomputation"
    cycle.close()
    return derived, strict


def test_lattice_summary_deltas_equal_direct_ones(tmp_path, spark, monkeypatch):
    monkeypatch.setenv("NIGHTSHIFT_LATTICE_STATS_ROWS", "0")  # measure summary-delta sizes on every night
    root = make_project(tmp_path / "p", VIEWS, maintain="incremental")
    derived, strict = lattice_equals_direct(root, spark, monkeypatch, VIEWS, 8, 6)
    assert len(list((root / "lake" / "stats").glob("batch_id=*.json"))) == 6  # one cached pass per batch
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    manifest = cycle.lake.read_manifest("b0005")
    cycle.close()
    assert manifest.night.statistics == "measured"
    actual = manifest.actual_rows()
    for node in manifest.night.nodes:  # measured sizes: estimates near the actual rows
        if node.node in actual and node.from_changes:
            assert abs(node.estimated_rows - actual[node.node]) <= 0.1 * actual[node.node] + 2, (node, actual[node.node])
    assert derived, "no summary-delta was derived from another one: the lattice was not exercised"
    assert strict >= 2, "too few fact-only nights to compare summary-deltas row for row"


ATTRIBUTES = ["p.storeID", "p.itemID", "p.date", "s.city", "s.region", "i.category"]
AGGREGATES = ["SUM(p.qty)", "MIN(p.price)", "MAX(p.date)", "AVG(p.qty)", "COUNT(p.price)", "MAX(i.weight)"]


def random_views(rng: random.Random, count: int) -> dict[str, str]:
    views = {}
    for k in range(count):
        cols = rng.sample(ATTRIBUTES, rng.randint(1, 3))
        aggs = ["COUNT(*) AS n"] + [f"{a} AS a{j}" for j, a in enumerate(rng.sample(AGGREGATES, rng.randint(1, 2)))]
        views[f"r{k}"] = (f"CREATE VIEW r{k} AS SELECT {', '.join(cols + aggs)} FROM pos p JOIN stores s ON "
                          f"p.storeID = s.storeID JOIN items i ON p.itemID = i.itemID GROUP BY {', '.join(cols)}")
    return views


@pytest.mark.parametrize("seed", [21, 22])
def test_random_view_sets_lattice_equals_direct_equals_recompute(tmp_path, spark, monkeypatch, seed):
    """Property: for random view sets and random batches, lattice propagate == direct propagate ==
    recomputation."""
    views = random_views(random.Random(seed), 5)
    derived, strict = lattice_equals_direct(make_project(tmp_path / "p", views, maintain="incremental"), spark,
                                            monkeypatch, views, seed, 4)
    assert strict >= 1 and derived


def test_propagate_level_by_level_equals_one_job(tmp_path, spark):
    """The Airflow DAG's propagate_level_<k> tasks: the lattice's levels propagated one at a time (each a
    separate call, as separate spark-submits would) give the same summary-deltas as one job, night after
    night; refresh cannot start before the last level; a level refuses to run before the levels under it;
    rerunning a complete level ends at once, and running a level again invalidates the manifest and the
    later levels until they run again."""
    views = {**VIEWS, **NESTED}
    root = make_project(tmp_path / "p", views)
    model = Model()
    gen = BatchGenerator(31, model)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    tiers = levels(lattice_shape(cycle.plan))
    assert len(tiers) >= 3 and sorted(n for t in tiers for n in t if n in views) == sorted(views)
    level = {n: k for k, t in enumerate(tiers) for n in t}
    assert level["SID_sales"] < level["best_day"] < level["top_store"]  # a view's change set feeds the next level
    for n in range(2):
        batch = f"b{n:04d}"
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, batch, changes)
        cycle.propagate(batch)
        one_job = deltas(cycle, batch)
        if n == 1:  # a small night's summary-deltas, written by the command: a part's file holds its own columns
            for d in cycle.lake.read_manifest(batch).deltas:
                for f in cycle.lake.delta_files(batch, d.part):
                    assert all(c.startswith(d.prefix) for c in pq.read_schema(f).names), (d.view, f)
        shutil.rmtree(cycle.lake.delta_root(batch))
        with pytest.raises(BatchOrderError, match=f"level 0 has not run.*--level 0 .. {len(tiers) - 1}"):
            cycle.propagate(batch, len(tiers) - 1)
        for k in range(len(tiers)):
            assert cycle.lake.read_manifest(batch) is None
            with pytest.raises(WarehouseError, match="no summary-deltas"):
                cycle.refresh(batch)
            cycle.propagate(batch, k)
        assert cycle.lake.read_manifest(batch).night.levels == tiers
        assert deltas(cycle, batch) == one_job, f"batch {batch}: level by level != one job"
        if n == 1:
            # on-call clears propagate_level_0 only: its output is complete, so it ends at once (no Spark job)
            # and the later levels and the manifest stay valid
            assert cycle.propagate(batch, 0).skipped == f"level 0 of batch {batch} is already computed"
            assert cycle.propagate(batch).skipped == f"the summary-deltas of batch {batch} are already computed"
            assert cycle.lake.read_manifest(batch) is not None and cycle.lake.read_level(batch, 1) is not None
            # a level whose record is missing (a crash before it was written) runs again: the later levels
            # must run again before refresh
            cycle.lake.level_path(batch, 0).unlink()
            cycle.propagate(batch, 0)
            assert cycle.lake.read_manifest(batch) is None and cycle.lake.read_level(batch, 1) is None
            with pytest.raises(BatchOrderError, match="level 1 has not run"):
                cycle.propagate(batch, 2)
            for k in range(1, len(tiers)):
                cycle.propagate(batch, k)
            assert deltas(cycle, batch) == one_job
        cycle.refresh(batch)
        assert cycle.propagate(batch, 0).skipped  # refreshed: every level is a no-op now
        cycle.apply_base(batch)
        model.apply(changes)
        expected = model.recompute(views)
        for v in cycle.plan.views:
            assert bag(cycle.warehouse.read_view(v)) == expected[v.name], f"batch {batch}: {v.name} != recomputation"
    cycle.close()


def test_change_distincts_counted_in_the_command_are_sparks_exact_counts(tmp_path, spark):
    """The cost model's statistics counted in the command (driver_checks.change_distincts: the batch's changed fact
    rows joined to each dimension after the batch) are the distinct counts Spark finds over the relations the
    batch's checks registered, for every combination the plan measures, night after night (nights that change a
    dimension too)."""
    from pyspark.sql import functions as F

    from runtime.night import statistics_wanted
    from spark_jobs import driver_checks
    from spark_jobs.changes import load_batch

    root = make_project(tmp_path / "p", VIEWS, maintain="incremental")
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    plan = cycle.plan
    wanted = statistics_wanted(plan, lattice_shape(plan))
    tables = {t.name.lower(): t for t in plan.schema.base_tables}
    model = Model()
    gen = BatchGenerator(11, model)
    compared = dimension_nights = 0
    for n in range(4):
        batch = f"b{n:04d}"
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, batch, changes)
        state = cycle.lake.state()
        load_batch(spark, cycle.lake, plan, batch, state)
        rows = driver_checks.BatchRows(cycle.lake, state, cycle.lake.batch_files(batch, list(tables)), plan.fact_tables)
        for fact, combos in wanted.items():
            joins = list({(j.child, j.parent): j for v in plan.lake_views if v.fact == fact for j in v.joins}.values())
            counted = driver_checks.change_distincts(rows, plan.schema.table(fact), joins, tables, combos)
            assert counted is not None, f"{batch}: {fact}'s changes and dimensions are small"
            joined = spark.table(f"__ns_ins_{fact}").unionByName(spark.table(f"__ns_del_{fact}"))
            joined = joined.select(*[F.col(c).alias(f"{fact}.{c}") for c in joined.columns])
            for j in joins:
                parent = spark.table(f"__ns_new_{j.parent}")
                parent = parent.select(*[F.col(c).alias(f"{j.parent}.{c}") for c in parent.columns])
                cond = [F.col(f"`{j.child}.{c}`") == F.col(f"`{j.parent}.{p}`")
                        for c, p in zip(j.child_columns, j.parent_columns)]
                joined = joined.join(parent, cond, "inner")
            # one job: each combination's distinct values (a struct with NULL fields is one value, as a group)
            expected = joined.agg(*[F.countDistinct(F.struct(*[F.col(f"`{t}.{c}`") for t, c in combo])).alias(f"c{i}")
                                    for i, combo in enumerate(combos)]).collect()[0]
            for i, (combo, count) in enumerate(zip(combos, counted)):
                assert count == expected[f"c{i}"], (batch, fact, combo)
                compared += 1
        dimension_nights += bool(changes.get("stores") or changes.get("items"))
        cycle.run(batch)
        model.apply(changes)
    assert compared and dimension_nights
    cycle.close()
