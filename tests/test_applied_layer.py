"""Nights run the applied layer (DESIGN.md, "The stable contract"): a view file added in the afternoon, valid or
broken, never stops the night's refresh of the views already served. `plan` and `status` report it, `apply` with a
broken file fails naming it and builds nothing, and once the file is fixed `apply` builds the new view and the next
night serves it; every served view equals recomputation throughout."""

from __future__ import annotations

import pytest

from conftest import BACKENDS
from harness import FIGURE_1, BatchGenerator, Model, check_served, make_project, write_changes
from nightshift.applied import SNAPSHOT, compiling
from nightshift.cli import main
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import check_all

SERVED = {"SID_sales": FIGURE_1["SID_sales"], "sR_sales": FIGURE_1["sR_sales"]}
NEW = {"region_days": "CREATE VIEW region_days AS SELECT region, date, COUNT(*) AS n, SUM(qty) AS q FROM pos "
                      "JOIN stores ON pos.storeID = stores.storeID GROUP BY region, date"}
BROKEN = "CREATE VIEW broken_totals AS SELECT storeID, SUM(no_such_column) AS q FROM pos GROUP BY storeID"
ALSO_BROKEN = "CREATE VIEW bad_syntax AS SELEC storeID FROM pos"


def _night(root, gen: BatchGenerator, model: Model, batch: str, first: bool = False) -> None:
    """Land `batch` and run every pending night through the CLI (the night steps run the applied layer)."""
    changes = gen.initial() if first else gen.night()
    write_changes(root, batch, changes)
    assert main(["run", "--project", str(root), "--pending"]) == 0
    model.apply(changes)


def _served(root, spark, model: Model, views: dict[str, str], where: str) -> set[str]:
    """Check every served view of the applied layer against recomputation (the model's and DuckDB's over the
    lake); the names of the warehouse's tables and views."""
    cycle = Cycle(load_project(root, "applied"), spark=spark, progress=lambda _: None)
    try:
        assert {v.name for v in cycle.plan.views} == set(views), where
        check_served(cycle, model, views, where)
        assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == [], where
        with cycle.warehouse.engine.connect() as conn:
            names = {n.lower() for n in cycle.warehouse.engine.dialect.get_table_names(conn)}
            names |= {n.lower() for n in cycle.warehouse.engine.dialect.get_view_names(conn)}
        return names
    finally:
        cycle.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_and_a_broken_view_file_never_stop_the_night(tmp_path, spark, warehouse_url, backend, capsys):
    root = make_project(tmp_path / "p", SERVED, url=warehouse_url(backend, "applied_layer"))
    model = Model()
    gen = BatchGenerator(31, model)
    _night(root, gen, model, "b0000", first=True)  # a project that starts empty: its first night builds the layer
    assert (root / SNAPSHOT).is_file()
    _night(root, gen, model, "b0001")
    _served(root, spark, model, SERVED, "b0001")

    # the afternoon: a valid new view and two broken view files
    summaries = root / "sql" / "summaries"
    (summaries / "region_days.sql").write_text(NEW["region_days"])
    (summaries / "broken_totals.sql").write_text(BROKEN)
    (summaries / "bad_syntax.sql").write_text(ALSO_BROKEN)

    # the night runs the applied layer: the old views refreshed, the new one not built
    _night(root, gen, model, "b0002")
    names = _served(root, spark, model, SERVED, "b0002 (files added in the afternoon)")
    assert not {n for n in names if n.startswith(("region_days", "broken_totals", "bad_syntax"))}, names
    capsys.readouterr()

    # plan: every broken file at once, exit 1; what apply would do without them
    assert main(["plan", "--project", str(root)]) == 1
    captured = capsys.readouterr()
    assert "sql/summaries/broken_totals.sql: view broken_totals: unknown column no_such_column" in captured.err, captured.err
    assert "sql/summaries/bad_syntax.sql" in captured.err and "the nights keep running the applied" in captured.err
    assert "added: region_days" in captured.out, captured.out

    # status reports both, without failing
    assert main(["status", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "does not compile" in out and "broken_totals.sql" in out and "bad_syntax.sql" in out, out
    assert "added region_days not yet applied (nightshift apply)" in out, out

    # apply with a broken file: refused, naming it; nothing applied
    ledger_before = len(_ledger(root))
    assert main(["apply", "--project", str(root)]) == 1
    err = capsys.readouterr().err
    assert "broken_totals.sql" in err and "bad_syntax.sql" in err and "nothing applied" in err, err
    assert len(_ledger(root)) == ledger_before

    # another night, still on the applied layer
    _night(root, gen, model, "b0003")
    _served(root, spark, model, SERVED, "b0003")

    # fixed: one file removed, the other corrected; status names the new views; apply builds them
    (summaries / "bad_syntax.sql").unlink()
    (summaries / "broken_totals.sql").write_text(BROKEN.replace("no_such_column", "qty"))
    capsys.readouterr()
    assert main(["status", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "region_days" in out and "broken_totals" in out and "not yet applied (nightshift apply)" in out, out
    assert "does not compile" not in out
    assert main(["apply", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "region_days" in out and "broken_totals" in out, out
    after = {**SERVED, **NEW, "broken_totals": BROKEN.replace("no_such_column", "qty")}
    _served(root, spark, model, after, "after apply")
    _night(root, gen, model, "b0004")
    _served(root, spark, model, after, "b0004 (after apply)")
    assert main(["status", "--project", str(root)]) == 0
    assert "not yet applied" not in capsys.readouterr().out


def _ledger(root) -> list:
    cycle = Cycle(load_project(root, "applied"), progress=lambda _: None)
    try:
        return cycle.warehouse.ledger()
    finally:
        cycle.close()


def test_a_project_without_a_snapshot_runs_its_working_files_and_the_compiler_reports_every_broken_file(tmp_path):
    """No Spark: before any night the applied layer is the working files; compiling() sets aside each file an
    error names and compiles the rest, so every refusal shows at once."""
    root = make_project(tmp_path / "p", SERVED)
    assert load_project(root, "applied").snapshot is None
    assert load_project(root, "applied").plan.fingerprint == load_project(root).plan.fingerprint
    summaries = root / "sql" / "summaries"
    (summaries / "broken_totals.sql").write_text(BROKEN)
    (summaries / "bad_syntax.sql").write_text(ALSO_BROKEN)
    (summaries / "over_broken.sql").write_text("CREATE VIEW over_broken AS SELECT storeID, MAX(q) AS m "
                                               "FROM broken_totals GROUP BY storeID")
    rest, errors = compiling(load_project(root))
    assert {v.name for v in rest.plan.views} == set(SERVED)
    assert len(errors) == 3 and all(any(f in e for e in errors) for f in ("broken_totals.sql", "bad_syntax.sql",
                                                                          "over_broken.sql")), errors


def test_the_first_night_records_the_applied_layer_and_the_dag_reports_what_is_not_applied(tmp_path):
    """No Spark: a project that starts empty gets its empty summary tables (and its applied layer) on its first
    night; afterwards the DAG's plan (parse time) and its tasks' project stay on the applied layer whatever the
    working files hold, and choose_batch's notes name the new view and the broken file."""
    from nightshift.nights import choose, layer_notes
    from nightshift.plancache import plan_summary

    root = make_project(tmp_path / "p", SERVED)
    cycle = Cycle(load_project(root, "applied"), progress=lambda _: None)
    cycle._ensure_summary_tables()  # what the first night's propagate does before Spark
    cycle.close()
    fingerprint = load_project(root).plan.fingerprint
    assert (root / SNAPSHOT).is_file() and load_project(root, "applied").snapshot.fingerprint == fingerprint
    (root / "sql" / "summaries" / "region_days.sql").write_text(NEW["region_days"])
    (root / "sql" / "summaries" / "broken_totals.sql").write_text(BROKEN)
    (root / "nightshift.toml").write_text((root / "nightshift.toml").read_text() + '[views]\nsR_sales = "recompute"\n')
    night = load_project(root, "applied")
    assert night.plan.fingerprint == fingerprint and night.maintain == ()  # [views] too waits for apply
    assert plan_summary(root)["views"] == [v.name for v in night.plan.views]
    notes = layer_notes(night, load_project)
    assert len(notes) == 2, notes
    assert "broken_totals.sql: view broken_totals: unknown column no_such_column" in notes[0], notes
    assert "added region_days; changed sR_sales not yet applied (nightshift apply)" in notes[1], notes
    assert choose(night, load=load_project).notes == tuple(notes)  # choose_batch's one read of the ledger
