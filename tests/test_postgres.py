"""PostgreSQL as the warehouse: readers never see half a night, concurrent refreshes never
interleave, names that need quoting work and cannot inject SQL, credentials are never printed.
(The differential and fault-injection suites run on PostgreSQL too: see their `backend` parameter.)"""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from harness import FIGURE_1, BatchGenerator, Model, make_project, run_nights, write_changes
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.oracle import bag
from warehouse.store import Warehouse


def prepared_night(tmp_path, spark, pg_schemas, name: str, views=FIGURE_1):
    """A PostgreSQL project after two nights and night 3 propagated (but not refreshed)."""
    root = make_project(tmp_path / name, views, url=pg_schemas(name))
    model, cycle = Model(), Cycle(load_project(root), spark=spark, progress=lambda _: None)
    gen = BatchGenerator(11, model)
    run_nights(cycle, root, gen, model, 1)
    before = len(model.tables["pos"])
    night = gen.night()
    while sum(1 if op == "insert" else -1 for op, _ in night["pos"]) == 0:
        night = gen.night()
    write_changes(root, "b0002", night)
    cycle.propagate("b0002")
    cycle.close()
    model.apply(night)
    return root, model, before, len(model.tables["pos"])


def test_readers_see_the_night_before_or_after_never_a_mix(tmp_path, spark, pg_schemas, monkeypatch):
    root, model, before, after = prepared_night(tmp_path, spark, pg_schemas, "readers")
    url = load_project(root).warehouse_url
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    seen: list[tuple[float, int, int]] = []
    stop = threading.Event()

    def read() -> None:
        with engine.connect() as c:
            while not stop.is_set():  # one statement = one snapshot across both summary tables
                a, b = c.exec_driver_sql(
                    "SELECT (SELECT SUM(TotalCount) FROM SID_sales), (SELECT SUM(TotalCount) FROM sR_sales)"
                ).fetchone()
                seen.append((time.monotonic(), int(a), int(b)))
                c.commit()

    reader = threading.Thread(target=read)
    reader.start()
    # hold the refresh transaction open after SID_sales is merged and before sR_sales is
    monkeypatch.setenv("NIGHTSHIFT_PAUSE_AT", "refresh:after_merge:SID_sales=1.5")
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    t0 = time.monotonic()
    cycle.refresh("b0002")
    t1 = time.monotonic()
    time.sleep(0.3)
    stop.set()
    reader.join()
    cycle.close()
    engine.dispose()
    assert before != after
    mixed = [(a, b) for _, a, b in seen if a != b or a not in (before, after)]
    assert not mixed, f"a reader saw a half-refreshed night: {mixed[:5]} (before {before}, after {after})"
    during = [a for t, a, _ in seen if t0 < t < t1]
    assert len(during) >= 10, "readers were blocked while the refresh transaction was open"
    assert {a for _, a, _ in seen} == {before, after}, "the reader should have observed both nights"


def test_two_concurrent_refreshes_apply_the_night_once(tmp_path, spark, pg_schemas, monkeypatch):
    root, model, _, _ = prepared_night(tmp_path, spark, pg_schemas, "twice")
    monkeypatch.setenv("NIGHTSHIFT_PAUSE_AT", "refresh:before_commit=1.0")
    results, errors, ends = {}, [], {}

    def refresh(who: str) -> None:
        try:
            cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
            results[who] = cycle.refresh("b0002")
            ends[who] = time.monotonic()
            cycle.close()
        except Exception as e:  # noqa: BLE001 - collected and asserted on below
            errors.append(e)

    threads = [threading.Thread(target=refresh, args=(w,)) for w in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    applied = [w for w, r in results.items() if not r.skipped]
    assert len(applied) == 1, results
    other = "b" if applied[0] == "a" else "a"
    assert "already in the ledger" in results[other].skipped
    assert ends[other] >= ends[applied[0]] - 0.05, "the second refresh must wait for the first to commit"
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    assert [r.batch_id for r in cycle.warehouse.ledger()].count("b0002") == 1
    cycle.apply_base("b0002")
    expected = model.recompute(FIGURE_1)
    for view in cycle.plan.views:
        assert bag(cycle.warehouse.read_view(view)) == expected[view.name]
    cycle.close()


QUOTED_VIEWS = {
    "by_store": 'CREATE VIEW "Sales by Store" AS SELECT storeID AS "Store", date AS "select", COUNT(*) AS "Total Count", '
    'SUM(qty) AS "qty""; DROP TABLE ns_ledger; --" FROM pos GROUP BY storeID, date',
    "mixed": "CREATE VIEW MixedCase AS SELECT itemID AS ItemKey, MIN(price) AS \"MinPrice\", MAX(price) AS \"order\", "
    "AVG(qty) AS \"it's avg\" FROM pos GROUP BY itemID",
    "cased": 'CREATE VIEW "CasedView" AS SELECT region AS "Region", COUNT(*) AS n FROM pos JOIN stores ON pos.storeID = stores.storeID GROUP BY region',
}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_names_that_need_quoting_work_and_cannot_inject(tmp_path, spark, warehouse_url, backend):
    root = make_project(tmp_path / "q", QUOTED_VIEWS, url=warehouse_url(backend, "quoted"))
    model = Model()
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    run_nights(cycle, root, BatchGenerator(3, model), model, 3)
    expected = model.recompute(QUOTED_VIEWS)
    by_name = {"Sales by Store": "by_store", "MixedCase": "mixed", "CasedView": "cased"}
    for view in cycle.plan.views:
        assert bag(cycle.warehouse.read_view(view)) == expected[by_name[view.name]], view.name
    assert len(cycle.warehouse.ledger()) == 5  # the ledger survived the view named like an injection
    with cycle.warehouse.engine.connect() as c:  # what a user types: unquoted names fold, quoted ones do not
        total = c.exec_driver_sql('SELECT SUM("Total Count") FROM "Sales by Store"').scalar()
        assert int(total) == len(model.tables["pos"])
        assert c.exec_driver_sql('SELECT COUNT(ItemKey), COUNT("MinPrice"), COUNT("order") FROM MixedCase').scalar() > 0
        assert c.exec_driver_sql('SELECT SUM(n) FROM "CasedView" WHERE "Region" IS NULL OR "Region" IS NOT NULL').scalar() \
            == len(model.tables["pos"])
    cycle.close()


def test_unreachable_postgres_names_the_url_without_its_password(tmp_path):
    wh = Warehouse("postgresql+psycopg://nightshift:s3cret-pw@127.0.0.1:1/test?connect_timeout=2", tmp_path)
    from nightshift.errors import WarehouseError

    with pytest.raises(WarehouseError) as e:
        wh.engine
    assert "s3cret-pw" not in str(e.value)
    assert "127.0.0.1:1/test" in str(e.value) and "unreachable" in str(e.value)
