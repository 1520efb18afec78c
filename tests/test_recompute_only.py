"""A project whose views are all kept by recompute (a LEFT JOIN view, a window-function view): its D-lattice
has no point, yet every night still has a level 0 where those views are recomputed, through the whole
cycle and through the Airflow DAG's one propagate task per level; after each night the served views equal
the views recomputed from scratch over an independent model of the base."""

from __future__ import annotations

import pytest

from harness import BatchGenerator, Model, check_served, make_project, write_changes
from lattice.dlattice import lattice_shape
from lattice.graph import levels
from nightshift.config import load_project
from nightshift.cycle import Cycle

VIEWS = {
    "store_sales": "CREATE VIEW store_sales AS SELECT s.storeID, s.city, COUNT(p.itemID) AS sales "
                   "FROM stores s LEFT JOIN pos p ON p.storeID = s.storeID GROUP BY s.storeID, s.city",
    "ranked": "CREATE VIEW ranked AS SELECT storeID, itemID, SUM(qty) AS q, RANK() OVER (PARTITION BY storeID "
              "ORDER BY SUM(qty) DESC NULLS LAST, itemID) AS r FROM pos GROUP BY storeID, itemID",
}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_a_project_kept_only_by_recompute_runs_its_nights(tmp_path, spark, quiet, warehouse_url, backend):
    root = make_project(tmp_path / "p", VIEWS, url=warehouse_url(backend, "recompute_only"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert not any(v.incremental for v in cycle.plan.views)
    assert levels(lattice_shape(cycle.plan)) == ((),)  # one propagate task a night, no lattice point
    model = Model()
    gen = BatchGenerator(5, model)
    for n in range(3):
        batch = f"b{n:04d}"
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, batch, changes)
        if n == 2:  # as the DAG runs it: propagate --level 0 writes the manifest, then refresh and apply-base
            assert cycle.propagate(batch, level=0).details.night.levels == ((),)
        cycle.run(batch)
        model.apply(changes)
        check_served(cycle, model, VIEWS, f"{backend}, batch {batch}")
        assert {s.mode for s in cycle.lake.read_manifest(batch).night.views} == {"recompute"}
    cycle.close()
