"""Bad input gets a clear error naming the file, view, column or batch — and changes nothing."""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import ARROW, COLUMNS, FIGURE_1, BatchGenerator, Model, make_project, write_changes
from lattice.sql import ident, literal
from nightshift.errors import BadChangeBatch, BatchOrderError, ConfigError, UnsupportedView, WarehouseStateError
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import bag

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def template(tmp_path_factory, spark_session):
    """A project with its initial load and one night applied (built once, copied per test)."""
    root = make_project(tmp_path_factory.mktemp("template") / "proj", FIGURE_1)
    model = Model()
    gen = BatchGenerator(11, model)
    cycle = Cycle(load_project(root), spark=spark_session, progress=lambda _: None)
    for batch, changes in (("b0000", gen.initial()), ("b0001", None)):
        changes = changes or gen.night()
        write_changes(root, batch, changes)
        cycle.run(batch)
        model.apply(changes)
    cycle.close()
    return root, model


@pytest.fixture
def project(template, tmp_path):
    root, model = template
    copy = tmp_path / "proj"
    shutil.copytree(root, copy)
    return copy, model


def snapshot(root: Path) -> dict:
    """Everything a failed step must leave alone: ledger, lake state and base files, served rows."""
    cycle = Cycle(load_project(root), progress=lambda _: None)
    state = {
        "ledger": [(r.batch_id, r.kind, r.position) for r in cycle.warehouse.ledger()],
        "lake": json.loads((root / "lake" / "tables" / "_state.json").read_text()),
        # every file of the lake's Delta tables, their logs included: no commit was made
        "base_files": sorted(str(p.relative_to(root)) for p in (root / "lake" / "tables").rglob("*") if p.is_file()),
        "views": {v.name: bag(cycle.warehouse.read_view(v)) for v in cycle.plan.views},
    }
    cycle.close()
    return state


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "nightshift.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def write_raw(root: Path, table: str, batch: str, columns: dict, schema: pa.Schema | None = None, name="part-0.parquet") -> Path:
    d = root / "lake" / "changes" / table / f"batch_id={batch}"
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), path)
    return path


def good_pos_row(model: Model) -> dict:
    s, i = model.tables["stores"][0][0], model.tables["items"][0][0]
    return {"storeID": [s], "itemID": [i], "date": [dt.date(2026, 1, 2)], "qty": [3], "price": [Decimal("1.50")], "_op": ["insert"]}


def expect_refused(spark, root: Path, batch: str, error: type, *needles: str) -> None:
    before = snapshot(root)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    with pytest.raises(error) as e:
        cycle.run(batch)
    cycle.close()
    for needle in needles:
        assert needle in str(e.value), f"{needle!r} not in: {e.value}"
    assert snapshot(root) == before, "a refused batch changed state"


# ------------------------------------------------------------------ view SQL and config (no Spark)


def test_a_view_no_incremental_rule_covers_is_recomputed_and_incremental_refuses_it(tmp_path):
    root = make_project(tmp_path / "p", {"bad": "CREATE VIEW bad AS SELECT DISTINCT storeID, COUNT(*) AS n FROM pos GROUP BY storeID"})
    r = run_cli("plan", "--project", str(root))
    assert r.returncode == 0, r.stderr
    assert "bad: recompute mode (" in r.stdout and "sql/summaries/bad.sql: view bad: SELECT DISTINCT" in r.stdout
    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text() + '[views]\nbad = "incremental"\n')
    r = run_cli("plan", "--project", str(root))
    assert r.returncode == 1
    assert "sql/summaries/bad.sql" in r.stderr and "view bad" in r.stderr and "DISTINCT" in r.stderr
    assert '[views] bad = "incremental"' in r.stderr


def test_what_no_engine_computes_as_the_warehouse_is_refused_all_at_once(tmp_path):
    """A weekday in the warehouse's SQL is kept; what no engine computes as the warehouse does is refused,
    every construct of every view in one error, as written, with file and line."""
    root = make_project(tmp_path / "p", {
        "dow": "CREATE VIEW dow AS SELECT DAYOFWEEK(date) AS d, COUNT(*) AS n FROM pos GROUP BY DAYOFWEEK(date)",
        "late": "CREATE VIEW late AS SELECT storeID, COUNT(*) AS n FROM pos\nWHERE date < current_date GROUP BY storeID",
        "odd": "CREATE VIEW odd AS SELECT storeID, SUM(qty) AS q FROM pos\nWHERE regexp_matches(CAST(itemID AS VARCHAR), '^1(?=0)')\n"
               "GROUP BY storeID"})
    r = run_cli("plan", "--project", str(root))
    assert r.returncode == 1
    assert "2 constructs" in r.stderr and "view dow" not in r.stderr
    assert "sql/summaries/late.sql: view late, line 2: current_date: " in r.stderr
    assert "sql/summaries/odd.sql: view odd, line 2: regexp_matches(CAST(itemID AS VARCHAR), '^1(?=0)'): " in r.stderr


def test_view_with_unknown_column_names_file_view_and_column(tmp_path):
    root = make_project(tmp_path / "p", {"v": "CREATE VIEW v AS SELECT storeID, SUM(quantity) AS q FROM pos GROUP BY storeID"})
    r = run_cli("plan", "--project", str(root))
    assert r.returncode == 1
    assert "sql/summaries/v.sql" in r.stderr and "view v" in r.stderr and "quantity" in r.stderr


def test_view_with_unknown_table(tmp_path):
    root = make_project(tmp_path / "p", {"v": "CREATE VIEW v AS SELECT region, COUNT(*) AS n FROM sales GROUP BY region"})
    r = run_cli("plan", "--project", str(root))
    assert r.returncode == 1 and "unknown table sales" in r.stderr and "view v" in r.stderr


def test_malformed_toml_names_the_file(tmp_path):
    root = make_project(tmp_path / "p", FIGURE_1)
    (root / "nightshift.toml").write_text("[lake\npath = 'lake'\n")
    r = run_cli("plan", "--project", str(root))
    assert r.returncode == 1 and "nightshift.toml" in r.stderr and "malformed" in r.stderr
    with pytest.raises(ConfigError):
        load_project(root)


def test_unreachable_warehouse_is_a_clear_error_and_changes_nothing(project):
    root, _ = project
    before = snapshot(root)
    toml = root / "nightshift.toml"
    toml.write_text(toml.read_text().replace("duckdb:///warehouse.duckdb", "duckdb:////no/such/folder/w.duckdb"))
    r = run_cli("run", "--project", str(root), "--batch", "b0001")
    assert r.returncode == 1 and "unreachable" in r.stderr and "/no/such/folder" in r.stderr
    toml.write_text(toml.read_text().replace("duckdb:////no/such/folder/w.duckdb", "duckdb:///warehouse.duckdb"))
    assert snapshot(root) == before


def test_batch_with_no_files_is_an_error_not_an_empty_night(project):
    root, _ = project
    r = run_cli("run", "--project", str(root), "--batch", "b0007")
    assert r.returncode == 1 and "no change batch b0007" in r.stderr


def test_invalid_batch_id(project):
    root, _ = project
    r = run_cli("propagate", "--project", str(root), "--batch", "../etc")
    assert r.returncode == 1 and "not valid" in r.stderr


# ------------------------------------------------------------------ order


def test_a_dag_steps_refusal_has_its_own_exit_code_so_the_task_is_not_retried(tmp_path):
    """nightshift/submit.py (what the DAG's spark-submit tasks run): a batch out of order exits 4, which the
    DAG's task turns into a failure without retries; an error a retry may outlive (here an unreadable warehouse
    setting stands for an unreachable server) exits 1. Neither starts Spark."""
    root = make_project(tmp_path / "p", FIGURE_1)
    model = Model()
    gen = BatchGenerator(3, model)
    for batch in ("b0000", "b0001"):
        changes = gen.initial() if batch == "b0000" else gen.night()
        write_changes(root, batch, changes)
        model.apply(changes)
    submit = [sys.executable, str(ROOT / "nightshift" / "submit.py"), "propagate", "--project", str(root)]
    r = subprocess.run([*submit, "--batch", "b0001", "--level", "0"], capture_output=True, text=True)
    assert r.returncode == 4 and "nightshift: error: batch b0001 is out of order: batch b0000 comes first" in r.stderr, \
        (r.returncode, r.stderr[-2000:])
    r = subprocess.run([*submit, "--batch", "b0000"], capture_output=True, text=True,
                       env={**os.environ, "NIGHTSHIFT_WAREHOUSE_URL": "duckdb:////no/such/folder/w.duckdb"})
    assert r.returncode == 1 and "unreachable" in r.stderr and "/no/such/folder" in r.stderr, (r.returncode, r.stderr[-2000:])
    assert not (root / "lake" / "tables").exists()


def test_a_dag_step_meeting_a_warehouse_not_in_its_state_is_not_retried(project):
    """A warehouse without summary tables under a lake that holds base data (its file lost): the step exits 4
    (no retry: a retry meets the same warehouse) with the command that fixes it, and changes nothing."""
    root, model = project
    write_raw(root, "pos", "b0002", good_pos_row(model), ARROW["pos"].append(pa.field("_op", pa.string())))
    (root / "warehouse.duckdb").unlink()
    lake = json.loads((root / "lake" / "tables" / "_state.json").read_text())
    submit = [sys.executable, str(ROOT / "nightshift" / "submit.py"), "propagate", "--project", str(root)]
    r = subprocess.run([*submit, "--batch", "b0002"], capture_output=True, text=True)
    assert r.returncode == 4, (r.returncode, r.stderr[-2000:])
    assert "has no summary tables but the lake holds base data (through batch b0001); run nightshift materialize" \
        in r.stderr, r.stderr[-2000:]
    assert json.loads((root / "lake" / "tables" / "_state.json").read_text()) == lake


def test_already_applied_batch_is_a_noop(project):
    root, _ = project
    before = snapshot(root)
    r = run_cli("run", "--project", str(root), "--batch", "b0001")
    assert r.returncode == 0, r.stderr
    assert "already" in r.stdout
    assert snapshot(root) == before


def test_late_batch_older_than_the_applied_one_is_refused(project, spark):
    root, model = project
    write_raw(root, "pos", "a0001", good_pos_row(model), ARROW["pos"].append(pa.field("_op", pa.string())))
    expect_refused(spark, root, "a0001", BatchOrderError, "a0001", "out of order", "b0001")


def test_skipping_a_pending_batch_is_refused(project, spark):
    root, model = project
    schema = ARROW["pos"].append(pa.field("_op", pa.string()))
    write_raw(root, "pos", "b0002", good_pos_row(model), schema)
    write_raw(root, "pos", "b0003", good_pos_row(model), schema)
    expect_refused(spark, root, "b0003", BatchOrderError, "b0003", "b0002")


def test_refresh_before_propagate_and_apply_base_before_refresh_are_refused(project, spark):
    root, model = project
    write_raw(root, "pos", "b0002", good_pos_row(model), ARROW["pos"].append(pa.field("_op", pa.string())))
    before = snapshot(root)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    with pytest.raises(WarehouseStateError, match="propagate --batch b0002"):  # a DAG task does not retry it
        cycle.refresh("b0002")
    with pytest.raises(BatchOrderError, match="not refreshed yet"):
        cycle.apply_base("b0002")
    cycle.close()
    assert snapshot(root) == before


# ------------------------------------------------------------------ change batches (Spark)


def test_missing_column(project, spark):
    root, model = project
    row = good_pos_row(model)
    del row["price"]
    path = write_raw(root, "pos", "b0002", row)
    expect_refused(spark, root, "b0002", BadChangeBatch, str(path), "missing column(s) price", "batch b0002")


def test_extra_column(project, spark):
    root, model = project
    row = good_pos_row(model) | {"discount": [0.1]}
    path = write_raw(root, "pos", "b0002", row)
    expect_refused(spark, root, "b0002", BadChangeBatch, str(path), "unexpected column(s) discount")


def test_mistyped_column(project, spark):
    root, model = project
    row = good_pos_row(model) | {"qty": ["three"]}
    path = write_raw(root, "pos", "b0002", row)
    expect_refused(spark, root, "b0002", BadChangeBatch, str(path), "column qty", "string", "INTEGER")


def test_unknown_op(project, spark):
    root, model = project
    row = good_pos_row(model) | {"_op": ["upsert"]}
    path = write_raw(root, "pos", "b0002", row, ARROW["pos"].append(pa.field("_op", pa.string())))
    expect_refused(spark, root, "b0002", BadChangeBatch, str(path), "_op", "'upsert'")


def test_null_in_not_null_column(project, spark):
    root, model = project
    row = good_pos_row(model) | {"storeID": [None]}
    write_raw(root, "pos", "b0002", row, ARROW["pos"].append(pa.field("_op", pa.string())))
    expect_refused(spark, root, "b0002", BadChangeBatch, "NOT NULL", "pos.storeID")


def test_delete_of_a_row_that_does_not_exist(project, spark):
    root, model = project
    row = good_pos_row(model) | {"qty": [4242], "_op": ["delete"]}
    write_raw(root, "pos", "b0002", row, ARROW["pos"].append(pa.field("_op", pa.string())))
    expect_refused(spark, root, "b0002", BadChangeBatch, "table pos", "does not exist", "qty=4242", "batch b0002")


def test_deleting_a_row_more_times_than_it_exists(project, spark):
    root, model = project
    existing = model.tables["pos"][0]
    n = model.tables["pos"].count(existing)
    write_changes(root, "b0002", {"pos": [("delete", existing)] * (n + 1)})
    expect_refused(spark, root, "b0002", BadChangeBatch, "deleted", f"{n + 1} time(s)", f"holds {n}")


# Two pos rows whose values differ but whose hash does not: the delete check keeps the base rows whose hash is
# a deleted row's (one 64-bit key), and a NULL adds nothing to a row's hash, so NULL then 3 (date, qty) hashes as
# day 3 then NULL (a date hashes as its day number, like an integer).
def _hash_twins(model: Model) -> tuple[tuple, tuple]:
    s, i = model.tables["stores"][0][0], model.tables["items"][0][0]
    return (s, i, None, 3, Decimal("1.50")), (s, i, dt.date(1970, 1, 4), None, Decimal("1.50"))


def test_the_hash_twins_hash_alike(project, spark):
    from spark_jobs.changes import row_hash
    twins = _hash_twins(project[1])
    df = spark.createDataFrame(pa.Table.from_pylist([dict(zip(COLUMNS["pos"], r)) for r in twins], ARROW["pos"]))
    hashes = {r[0] for r in df.select(row_hash(df, COLUMNS["pos"])).collect()}
    assert len(hashes) == 1


@pytest.mark.parametrize("broadcast", [True, False], ids=["hashes broadcast", "hashes joined"])
def test_a_table_after_its_deletes_holds_each_row_as_often_as_except_all_leaves_it(project, spark, broadcast, monkeypatch):
    """__ns_new_<t> takes the deleted rows away by their hash first (changes._without): a row whose hash twin is
    deleted stays, NULLs, -0.0 and NaN count as EXCEPT ALL counts them, duplicates lose one copy per delete."""
    from spark_jobs import changes
    if not broadcast:
        monkeypatch.setattr(changes, "BROADCAST_HASHES", 0)
    a, b = _hash_twins(project[1])
    c = (a[0], a[1], dt.date(2024, 1, 5), None, None)
    frame = lambda rows: spark.createDataFrame(pa.Table.from_pylist([dict(zip(COLUMNS["pos"], r)) for r in rows], ARROW["pos"]))
    old, dels = [a, a, b, c, c, c], [b, a, c, c]
    got = changes._without(frame(old), frame(dels), COLUMNS["pos"], len(dels)).collect()
    assert Counter(tuple(r) for r in got) == Counter(old) - Counter(dels) == Counter([a, c])
    # with the delete check's record of the rows whose hash is a deleted row's (here all of them: they share one)
    got = changes._without(frame(old), frame(dels), COLUMNS["pos"], len(dels), recorded=frame(old)).collect()
    assert Counter(tuple(r) for r in got) == Counter([a, c])

    schema = pa.schema([("k", pa.int32()), ("x", pa.float64())])
    nan = float("nan")
    floats = lambda rows: spark.createDataFrame(pa.Table.from_pylist([{"k": k, "x": x} for k, x in rows], schema))
    old = floats([(1, 0.0), (1, -0.0), (2, nan), (2, nan), (None, None), (None, None), (3, 1.5)])
    dels = floats([(1, -0.0), (2, nan), (None, None)])
    seen = lambda df: Counter((r.k, "NaN" if r.x != r.x else r.x) for r in df.collect())  # NaN != NaN; -0.0 == 0.0
    got = changes._without(old, dels, ["k", "x"], 3)
    assert seen(got) == seen(old.exceptAll(dels)) == Counter({(1, 0.0): 1, (2, "NaN"): 1, (None, None): 1, (3, 1.5): 1})


def test_a_small_table_after_its_deletes_computed_here_is_what_except_all_leaves(spark):
    """A small table after the batch is computed in this process (driver_checks.after) and reaches Spark as a local
    relation (changes.local_rows): the same bag of rows as Spark's own EXCEPT ALL and UNION ALL over the same rows,
    NULLs, duplicates, -0.0 and NaN alike, in the declared types; an empty one keeps its columns; a table with a
    timestamp column, or more rows than a local relation takes, is left to Spark's reader (None)."""
    from lattice.ir import Column, Table
    from spark_jobs import changes, driver_checks
    table = Table("t", (Column("k", "INTEGER"), Column("x", "DOUBLE"), Column("amount", "DECIMAL(10,2)")))
    schema = pa.schema([("k", pa.int32()), ("x", pa.float64()), ("amount", pa.decimal128(10, 2))])
    rows = lambda *r: pa.Table.from_pylist([dict(zip(schema.names, v)) for v in r], schema)
    nan, one = float("nan"), Decimal("1.00")
    old = rows((1, 0.0, one), (1, -0.0, one), (2, nan, None), (2, nan, None), (None, None, None), (None, None, None),
               (3, 1.5, Decimal("-2.50")), (3, 1.5, Decimal("-2.50")))
    dels = rows((1, -0.0, one), (2, nan, None), (None, None, None), (3, 1.5, Decimal("-2.50")))
    ins = rows((4, nan, one), (None, None, None))
    after = driver_checks.after(table, old, ins, dels)
    assert after.schema == schema
    frame = lambda t: spark.createDataFrame(t.to_pylist(), "k int, x double, amount decimal(10,2)")
    expected = frame(old).exceptAll(frame(dels)).unionAll(frame(ins))
    got = changes.local_rows(spark, table, after)
    seen = lambda df: Counter((r.k, "NaN" if r.x != r.x else r.x, r.amount) for r in df.collect())  # NaN != NaN
    assert seen(got) == seen(expected) == Counter({(1, 0.0, one): 1, (2, "NaN", None): 1, (None, None, None): 2,
                                                    (3, 1.5, Decimal("-2.50")): 1, (4, "NaN", one): 1})
    assert got.schema.simpleString() == "struct<k:int,x:double,amount:decimal(10,2)>"
    empty = changes.local_rows(spark, table, old.slice(0, 0))
    assert empty.count() == 0 and empty.schema == got.schema
    stamped = Table("s", (Column("k", "INTEGER"), Column("at", "TIMESTAMP")))
    assert changes.local_rows(spark, stamped, pa.table({"k": pa.array([1], pa.int32()),
                                                       "at": pa.array([dt.datetime(2026, 1, 2)], pa.timestamp("us"))})) is None
    assert changes.local_rows(spark, table, pa.concat_tables([old] * (changes.LOCAL_ROWS // len(old) + 1))) is None


@pytest.mark.parametrize("floats", [False, True], ids=["no floating point", "floating point"])
def test_the_delete_check_made_here_reports_the_first_deleted_row_the_base_holds_too_few_of(floats):
    """driver_checks.deletes_exist (grouped in Arrow): NULLs match NULLs as `<=>` matches them, so do -0.0 and 0.0 and
    every NaN (whatever its bits), a row deleted twice needs two equal base rows, and the refusal names the first
    such row in the batch's order, with its own values, how often it is deleted and held; the expectation is counted
    here row by row, in Python's comparisons."""
    import random
    import struct

    from lattice.ir import Column, Table
    from spark_jobs import driver_checks
    columns = [Column("k", "INTEGER"), Column("d", "DATE"), Column("amount", "DECIMAL(10,2)"), Column("_n", "VARCHAR")]
    arrow = [("k", pa.int32()), ("d", pa.date32()), ("amount", pa.decimal128(10, 2)), ("_n", pa.string())]
    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]  # a NaN of other bits
    if floats:
        columns += [Column("x", "DOUBLE"), Column("r", "REAL")]
        arrow += [("x", pa.float64()), ("r", pa.float32())]
    table, schema = Table("t", tuple(columns)), pa.schema(arrow)
    rng = random.Random(7)
    pick = lambda: (rng.choice([1, 2, None]), rng.choice([dt.date(2026, 1, 1), None]),
                    rng.choice([Decimal("1.50"), Decimal("-0.00"), None]), rng.choice(["a", "it's", None]),
                    *([rng.choice([0.0, -0.0, float("nan"), other_nan, 1.5, None]),
                       rng.choice([0.0, -0.0, float("nan"), None])] if floats else []))
    rows = lambda rs: pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rs], schema)
    same = lambda r: tuple("NaN" if v != v else v for v in r)  # Python's ==, but NaN equal to NaN; -0.0 == 0.0 already

    def first_short(dels, base):  # the oracle: each deleted image in batch order, counted against the base
        for i, r in enumerate(dels):
            n, m = sum(same(o) == same(r) for o in dels), sum(same(o) == same(r) for o in base)
            if m < n and all(same(o) != same(r) for o in dels[:i]):
                return {"row": r, "n": n, "m": m}
        return None

    shorts = 0
    for _ in range(200):
        base = [pick() for _ in range(rng.randint(0, 30))]
        dels = rng.sample(base, rng.randint(0, len(base))) + [pick() for _ in range(rng.randint(0, 2))]
        rng.shuffle(dels)
        want = first_short(dels, base)
        shorts += want is not None
        got = driver_checks.deletes_exist(table, rows(dels), rows(base))
        assert (None if want is None else driver_checks.reported(schema.names, list(want["row"]), n=want["n"],
                                                                 m=want["m"])) == got, (dels, base)
        if want is not None:  # the row reported is the batch's own: -0.0 stays -0.0
            signs = [(c, math.copysign(1, v)) for c, v in zip(schema.names, want["row"]) if isinstance(v, float) and v == 0]
            assert signs == [(c, math.copysign(1, got[c])) for c, _ in signs]
    assert 20 < shorts < 180  # both outcomes were exercised


def test_the_foreign_key_check_made_here_reports_the_first_inserted_row_without_its_parent():
    """driver_checks.orphan: the first inserted row (in the batch's order) whose key, not NULL, is no parent key;
    a parent key that is not a value of the child's column type as it is (1.5 for an INTEGER) matches no row.
    The expectation is found here row by row."""
    import random

    from lattice.ir import Column, Table
    from spark_jobs import driver_checks
    table = Table("c", (Column("k", "INTEGER"), Column("tag", "VARCHAR")))
    schema = pa.schema([("k", pa.int32()), ("tag", pa.string())])
    rng = random.Random(11)
    orphans = 0
    for _ in range(200):
        parents = {(v,) for v in rng.sample(range(10), rng.randint(0, 9))} | rng.choice([set(), {(None,)}, {(1.5,)}])
        ins = [(rng.choice([*range(10), None]), rng.choice(["a", None])) for _ in range(rng.randint(0, 8))]
        first = next((r for r in ins if r[0] is not None and (r[0],) not in parents), None)
        orphans += first is not None
        want = None if first is None else driver_checks.reported(["k", "tag"], first)
        got = driver_checks.orphan(table, ("K",), pa.Table.from_pylist([dict(zip(["k", "tag"], r)) for r in ins], schema),
                                   parents)
        assert got == want, (ins, parents)
    assert 20 < orphans < 180


# A table smaller than rewrite_below is written anew by apply-base: its delete check matches it in the check's
# own job and keeps no record; a larger one ("0": every table) has the rows it matched recorded for apply-base.
WRITTEN = pytest.mark.parametrize("rewrite_below", ["0", None], ids=["deleted from", "written anew"])


@WRITTEN
def test_deleting_a_row_whose_hash_only_a_different_row_shares_is_refused(project, spark, rewrite_below, monkeypatch):
    if rewrite_below is not None:
        monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", rewrite_below)
    root, model = project
    here, absent = _hash_twins(model)
    write_changes(root, "b0002", {"pos": [("insert", here)]})
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    cycle.run("b0002")
    cycle.close()
    write_changes(root, "b0003", {"pos": [("delete", absent)]})
    expect_refused(spark, root, "b0003", BadChangeBatch, "table pos", "does not exist", "qty=None", "batch b0003")


@pytest.mark.parametrize("engine", ["driver", "spark"])
@WRITTEN
def test_a_delete_takes_the_equal_row_not_its_hash_twin(project, spark, rewrite_below, engine, monkeypatch):
    """Both twins in the base, one of them twice: deleting one copy of each leaves exactly the other rows, whether
    the checks and apply-base's commits run in this process (small tables) or in Spark."""
    from spark_jobs import driver_checks
    if rewrite_below is not None:
        monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", rewrite_below)
    from spark_jobs import apply_base
    if engine == "spark":
        monkeypatch.setattr(driver_checks, "CHECK_ROWS", -1)
    in_driver = []  # the tables whose commit was made in this process
    made = apply_base._commit_in_driver

    def seen(lake, table, *args):
        out = made(lake, table, *args)
        if out is not None:
            in_driver.append(table.name)
        return out

    monkeypatch.setattr(apply_base, "_commit_in_driver", seen)
    root, model = project
    model = copy.deepcopy(model)  # the template's model is every test's
    a, b = _hash_twins(model)
    night = {"pos": [("insert", a), ("insert", a), ("insert", b)]}
    write_changes(root, "b0002", night)
    model.apply(night)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    cycle.run("b0002")
    night = {"pos": [("delete", b), ("delete", a)]}
    write_changes(root, "b0003", night)
    model.apply(night)
    cycle.run("b0003")
    # the check's record of the rows it matched is kept only for a table apply-base deletes from
    assert cycle.lake.matched_dir("b0003", "pos", 2).parent.is_dir() == (rewrite_below == "0")
    assert ("pos" in in_driver) == (engine == "driver")
    expected = model.recompute(FIGURE_1)
    for v in cycle.plan.views:
        assert bag(cycle.warehouse.read_view(v)) == expected[v.name]
    base = cycle.spark.read.format("delta").load(str(cycle.lake.table_path("pos"))).select(*COLUMNS["pos"]).collect()
    assert Counter(tuple(r) for r in base) == Counter(model.tables["pos"])  # Decimal('6.40') == Decimal('6.4')
    cycle.close()


def test_foreign_key_without_dimension_row(project, spark):
    root, model = project
    row = good_pos_row(model) | {"storeID": [999]}
    write_raw(root, "pos", "b0002", row, ARROW["pos"].append(pa.field("_op", pa.string())))
    expect_refused(spark, root, "b0002", BadChangeBatch, "foreign key (storeID=999)", "no row in stores", "batch b0002")


def test_a_key_is_dropped_only_when_the_batch_deletes_it_and_does_not_insert_it_again(tmp_path):
    """The driver's test that decides whether a foreign key's referencing rows are read at all: a store
    moving city (delete and insert under its key, here across two files of different integer widths) drops
    no key; a store deleted for good drops its key, whatever else the batch inserts."""
    from spark_jobs.changes import _keys_dropped

    def file(name, rows, key_type):
        schema = pa.schema([("storeID", key_type), ("city", pa.string()), ("_op", pa.string())])
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema), path)
        return path

    moved = [file("a", [(1, "springfield", "delete")], pa.int32()), file("b", [(1, "shelbyville", "insert")], pa.int64())]
    gone = [file("c", [(2, "ogdenville", "delete"), (3, "ogdenville", "insert")], pa.int64())]
    assert not _keys_dropped(moved, ("storeID",))
    assert _keys_dropped(gone, ("storeID",))
    assert _keys_dropped(moved + gone, ("storeID",))
    assert not _keys_dropped(gone, ("city",))  # the same city deleted and inserted


def test_deleting_a_referenced_dimension_row(project, spark):
    root, model = project
    store = next(s for s in model.tables["stores"] if any(p[0] == s[0] for p in model.tables["pos"]))
    write_changes(root, "b0002", {"stores": [("delete", store)]})
    expect_refused(spark, root, "b0002", BadChangeBatch, "still referenced", "stores", f"storeID={store[0]}")


def test_duplicate_dimension_key(project, spark):
    root, model = project
    store = model.tables["stores"][0]
    write_changes(root, "b0002", {"stores": [("insert", (store[0], "elsewhere", "west"))]})
    expect_refused(spark, root, "b0002", BadChangeBatch, "primary key", f"storeID={store[0]}")


def test_a_good_batch_after_a_refused_one_applies(project, spark):
    """Fixing the batch files and rerunning works: nothing of the refused attempt lingers."""
    root, model = project
    bad = good_pos_row(model) | {"storeID": [999]}
    write_raw(root, "pos", "b0002", bad, ARROW["pos"].append(pa.field("_op", pa.string())))
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    with pytest.raises(BadChangeBatch):
        cycle.run("b0002")
    good = good_pos_row(model)
    write_raw(root, "pos", "b0002", good, ARROW["pos"].append(pa.field("_op", pa.string())))
    cycle.run("b0002")
    model.apply({"pos": [("insert", tuple(good[c][0] for c in ("storeID", "itemID", "date", "qty", "price")))]})
    expected = model.recompute(FIGURE_1)
    for v in cycle.plan.views:
        assert bag(cycle.warehouse.read_view(v)) == expected[v.name]
    cycle.close()


def test_unsupported_view_refused_before_any_step(project, spark):
    root, _ = project
    before = snapshot(root)
    (root / "sql" / "summaries" / "w.sql").write_text(  # valid SQL to a parser, meaningless to an engine
        "CREATE VIEW w AS SELECT city, COUNT(*) AS n FROM pos LEFT JOIN stores ON pos.storeID = stores.storeID "
        "GROUP BY city HAVING SUM(stores.region) > 1"
    )
    with pytest.raises(UnsupportedView, match=r"sql/summaries/w.sql: view w: invalid SQL: .*sum"):
        Cycle(load_project(root), spark=spark)
    (root / "sql" / "summaries" / "w.sql").unlink()
    assert snapshot(root) == before


def test_batch_breaking_a_declared_dependency(project, spark):
    """nightshift.toml declares stores city -> region; the D-lattice derives sR_sales from sCD_sales through it."""
    root, model = project
    store = model.tables["stores"][0]
    city, region = next((s[1], s[2]) for s in model.tables["stores"][1:] if s[1] is not None and s[1] != store[1])
    other = "south" if region != "south" else "north"  # another store keeps (city, region)
    write_changes(root, "b0002", {"stores": [("delete", store), ("insert", (store[0], city, other))]})
    expect_refused(spark, root, "b0002", BadChangeBatch, "b0002", "stores", "city -> region", repr(city))


def test_a_summary_table_out_of_sync_is_refused_and_nothing_is_applied(project, spark):
    """A group deleted from a summary table behind nightshift's back: the night's delete of that group's sale
    cannot be merged; refresh names the batch, the view and the way out, and leaves every table as it was."""
    root, model = project
    row = next(r for r in model.tables["pos"] if r[2] is not None)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    view = cycle.plan.view("SID_sales")
    group = " AND ".join(f"{ident(c)} = {literal(x)}" for c, x in zip(("storeID", "itemID", "date"), row))
    with cycle.warehouse.engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {ident(cycle.warehouse.storage_name(view))} WHERE {group}")
    cycle.close()
    write_changes(root, "b0002", {"pos": [("delete", row)]})
    expect_refused(spark, root, "b0002", WarehouseStateError, "refresh b0002", "view SID_sales", "out of sync",
                   "nightshift materialize", "nothing of batch b0002 was applied")


# ------------------------------------------------------------------ the checks on the driver and in Spark

# A batch's checks over small tables run in this process (spark_jobs/driver_checks.py); over larger ones in Spark.
# Each refusal below is found by both, with the same message ("in Spark": every table above the driver's bound).
ENGINES = pytest.mark.parametrize("engine", ["driver", "spark"])


def _refusal(spark, root: Path, batch: str, engine: str, monkeypatch) -> str:
    from spark_jobs import driver_checks
    if engine == "spark":
        monkeypatch.setattr(driver_checks, "CHECK_ROWS", -1)
    else:
        monkeypatch.setattr(driver_checks, "CHECK_ROWS", driver_checks.DRIVER_ROWS)
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    try:
        with pytest.raises(BadChangeBatch) as e:
            cycle.propagate(batch)
    finally:
        cycle.close()
    return str(e.value)


def _both_refuse(spark, root: Path, batch: str, monkeypatch, *needles: str) -> None:
    driver, in_spark = (_refusal(spark, root, batch, engine, monkeypatch) for engine in ("driver", "spark"))
    assert driver == in_spark
    for needle in needles:
        assert needle in driver, f"{needle!r} not in: {driver}"


BAD_BATCHES = {
    "a deleted row that does not exist": (
        lambda m: {"pos": [("delete", (m.tables["pos"][0][0], m.tables["pos"][0][1], dt.date(2026, 1, 2), 4242,
                                       Decimal("1.50")))]},
        ("does not exist", "qty=4242", "date='2026-01-02'", "price=1.5")),
    "a row deleted more often than it is held": (
        lambda m: {"pos": [("delete", m.tables["pos"][0])] * (m.tables["pos"].count(m.tables["pos"][0]) + 1)},
        ("time(s) but the base holds",)),
    "a foreign key without its row": (
        lambda m: {"pos": [("insert", (999, m.tables["items"][0][0], dt.date(2026, 1, 2), None, Decimal("2.00")))]},
        ("foreign key (storeID=999)", "price=2.0", "no row in stores")),
    "a duplicate key": (
        lambda m: {"stores": [("insert", (m.tables["stores"][0][0], "elsewhere", "west"))]},
        ("primary key", f"storeID=")),
    "a dependency broken": (
        lambda m: {"stores": [("insert", (10_001, next(s[1] for s in m.tables["stores"] if s[1] is not None), "nowhere"))]},
        ("city -> region",)),
}


@pytest.mark.parametrize("rewrite_below", ["0", None], ids=["deleted from", "written anew"])
@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_the_driver_and_spark_refuse_a_batch_alike(project, spark, case, rewrite_below, monkeypatch):
    if rewrite_below is not None:  # "0": every table has the rows its delete check matched recorded
        monkeypatch.setenv("NIGHTSHIFT_REWRITE_BELOW", rewrite_below)
    root, model = project
    changes, needles = BAD_BATCHES[case]
    write_changes(root, "b0002", changes(model))
    _both_refuse(spark, root, "b0002", monkeypatch, "batch b0002", *needles)


@ENGINES
def test_nan_and_negative_zero_are_deleted_as_spark_compares_them(project, spark, engine, monkeypatch):
    """An item's weight NaN is deleted by a row image with NaN, -0.0 by one with 0.0 (Spark's <=>); a NaN row deleted
    twice where it is held once is refused."""
    from spark_jobs import driver_checks
    if engine == "spark":
        monkeypatch.setattr(driver_checks, "CHECK_ROWS", -1)
    root, model = project
    nan = float("nan")
    write_changes(root, "b0002", {"items": [("insert", (20_001, "c9", nan)), ("insert", (20_002, "c9", -0.0))]})
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    cycle.run("b0002")
    write_changes(root, "b0003", {"items": [("delete", (20_001, "c9", nan))] * 2})
    with pytest.raises(BadChangeBatch, match=r"deleted 2 time\(s\) but the base holds 1"):
        cycle.propagate("b0003")
    write_changes(root, "b0003", {"items": [("delete", (20_001, "c9", nan)), ("delete", (20_002, "c9", 0.0))]})
    cycle.run("b0003")
    held = {r[0] for r in cycle.spark.read.format("delta").load(str(cycle.lake.table_path("items"))).collect()}
    assert not held & {20_001, 20_002}
    cycle.close()


def test_a_change_spark_would_round_is_checked_in_spark():
    """The driver takes a change file's column only where Spark's cast keeps its values: fewer decimal digits, a
    DOUBLE from a DECIMAL, an overflowing integer and nanoseconds go to Spark; a wider integer or a time zone do not."""
    from spark_jobs.driver_checks import typed
    assert typed(pa.array([Decimal("1.005")], pa.decimal128(6, 3)), "DECIMAL(10,2)") is None
    assert typed(pa.array([Decimal("1.000")], pa.decimal128(6, 3)), "DECIMAL(10,2)").to_pylist() == [Decimal("1.00")]
    assert typed(pa.array([Decimal("1.5")], pa.decimal128(6, 1)), "DOUBLE") is None
    assert typed(pa.array([2 ** 40], pa.int64()), "INTEGER") is None
    assert typed(pa.array([7], pa.int64()), "INTEGER").to_pylist() == [7]
    assert typed(pa.array([1_001], pa.timestamp("ns")), "TIMESTAMP") is None
    utc = pa.array([dt.datetime(2026, 1, 2, 3, 4, 5)], pa.timestamp("us", tz="UTC"))
    assert typed(utc, "TIMESTAMP").to_pylist() == [dt.datetime(2026, 1, 2, 3, 4, 5)]
    assert typed(pa.nulls(2), "DATE").to_pylist() == [None, None]
