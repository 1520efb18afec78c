"""Propagate along the D-lattice (paper 001, 5.4-5.5): summary-deltas derived from other
summary-deltas equal the ones computed straight from the change set, night after night."""

from __future__ import annotations

import shutil

import pyarrow.parquet as pq

from harness import EXTENDED, FIGURE_1, BatchGenerator, Model, make_project, write_changes
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import bag

VIEWS = {**FIGURE_1, **EXTENDED}


def deltas(cycle, batch: str) -> dict:
    """Every view's summary-delta of `batch` as a bag of rows (from the files refresh would read)."""
    m = cycle.lake.read_manifest(batch)
    out = {}
    for v in cycle.plan.views:
        entry = m["views"][v.name]
        cols = [entry["prefix"] + c for c in [k.name for k in v.keys] + [s.column for s in v.stored] + ["_ns_lost"]]
        files = cycle.lake.delta_files(batch, entry["part"])
        rows = [tuple(r[c] for c in cols) for f in files for r in pq.read_table(f, columns=cols).to_pylist()]
        out[v.name] = bag(rows)
    return out


def test_lattice_summary_deltas_equal_direct_ones(tmp_path, spark, monkeypatch):
    root = make_project(tmp_path / "p", VIEWS)
    model = Model()
    gen = BatchGenerator(8, model)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    derived = set()
    for n in range(6):
        batch = f"b{n:04d}"
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, batch, changes)
        monkeypatch.delenv("NIGHTSHIFT_LATTICE", raising=False)
        manifest = cycle.propagate(batch).details
        derived |= {f"{p['parent']} -> {v}" for v, p in manifest["lattice"]["nodes"].items() if p["parent"] != "Δpos"}
        with_lattice = deltas(cycle, batch)
        shutil.rmtree(cycle.lake.delta_root(batch))
        monkeypatch.setenv("NIGHTSHIFT_LATTICE", "0")
        assert cycle.propagate(batch).details["lattice"] == {"enabled": False}
        assert deltas(cycle, batch) == with_lattice, f"batch {batch}"
        cycle.refresh(batch)
        cycle.apply_base(batch)
        model.apply(changes)
    expected = model.recompute(VIEWS)
    for v in cycle.plan.views:
        assert bag(cycle.warehouse.read_view(v)) == expected[v.name]
    cycle.close()
    assert derived, "no summary-delta was derived from another one: the lattice was not exercised"
