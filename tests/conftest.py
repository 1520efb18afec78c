"""One SparkSession for the whole test session (local[2], small shuffles; local[1] per worker under
pytest-xdist, whose two workers share the two cores). Under `-n 2 --dist loadgroup` the known-slow tests
start first (SLOW_FIRST) so both workers finish together."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("NIGHTSHIFT_SHUFFLE_PARTITIONS", "1")
# Tiny data: Spark's per-stage costs dominate; interpreted expressions skip the Janino compiles.
os.environ.setdefault(
    "NIGHTSHIFT_SPARK_CONF",
    "spark.sql.adaptive.enabled=false;spark.sql.codegen.wholeStage=false;spark.sql.codegen.factoryMode=NO_CODEGEN;"
    # one session runs thousands of queries: keep the status store (plans of finished queries) small
    "spark.sql.ui.retainedExecutions=50;spark.ui.retainedJobs=100;spark.ui.retainedStages=100;spark.ui.retainedTasks=1000",
)
os.environ.setdefault("NIGHTSHIFT_DRIVER_MEMORY", "4g")
from spark_jobs.session import QUICK_JIT  # noqa: E402 (reads the settings above when imported)

# spark-submit in a subprocess (the DAG's tasks, the CLI) is a JVM of seconds: with the C1 compiler alone (QUICK_JIT,
# its code cache sized as spark_jobs.session says) a local session's start and 20 small queries took 7.5 s of JVM CPU
# instead of 12.6 s. The serial collector: a `nightshift run` of a 3,000-row initial load took 0.92x the wall time
# of one under G1 (farm-bench, 4 pairs).
SHORT_JVM_OPTS = f"{QUICK_JIT} -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_JVM_OPTS)
# The test session's own JVM: the parallel collector (test_differential's six tests took 480 CPU seconds of the
# JVM under it against 522 under G1: the suite is CPU-bound on two cores), and C1 alone too: every test plans new
# queries, so the JIT never settles (one differential test: 43,000 compiles, 121 of the JVM's 181 CPU seconds);
# three differential tests and a nested one in one session took 332 CPU seconds of the JVM against 413 with C2,
# in the same wall time
SESSION_JVM_OPTS = f"-XX:+UseParallelGC {QUICK_JIT}"


# Modules that start Airflow, a Spark cluster or the nightshift CLI in subprocesses: slow as a whole.
SLOW_MODULES = {"test_dags", "test_airflow_setup", "test_cluster", "test_cli"}


# Under `-n 2 --dist loadgroup` (make test) a unit of work goes to one worker whole. A unit is a module, so its
# module- and session-scoped fixtures (a prepared project, a running cluster) are built once; test_faults is
# one unit per backend (its `prepared` fixture); the tests of SPLIT_MODULES share nothing costlier than the
# SparkSession, and each is a unit of its own. (xdist's own xdist_group marks do not reach its scheduler
# under pytest 9, so pytest_xdist_make_scheduler below draws the units.)
SPLIT_MODULES = {"test_dags", "test_modes", "test_differential"}
# Node id prefixes, slowest first (seconds each in a clean-copy `make test` with two workers on a nearly idle
# machine; a unit's tests added up): xdist hands out the units in collection order, so the long
# ones start first and the last ones are short.
SLOW_FIRST = [
    "tests/test_modes.py::test_every_mode",  # 209-292 each
    "tests/test_dags.py::test_dag_keeps_every_mode",  # 246-275
    "tests/test_spark_connect.py::",  # about 230: a warmed server (50), the DAG's nights (96), the CLI's on it
    "tests/test_holistic.py::",  # 102 + 97
    "tests/test_pg_ivm.py::",  # 96 views of a peer's suite, 4 project x backend runs
    "tests/test_getting_started.py::",  # the guide's commands, each a CLI process
    "tests/test_capture.py::",  # its DAG test 98 and 30 more tests
    "tests/test_faults.py::",  # per backend: a prepared project, then 11 crash points
    "tests/test_differential.py::",  # 42-52 each
    "tests/test_apply.py::",  # 8 tests, several Spark nights
    "tests/test_nested_paper.py::",  # 52 and 3 more
    "tests/test_lattice_propagate.py::",  # 4 tests, random view sets
    "tests/test_cluster.py::",  # 51, 45 and the cluster's start
]


def _unit(nodeid: str) -> str:
    """The unit of work a test belongs to (see SPLIT_MODULES)."""
    path = nodeid.split("::")[0]
    module = Path(path).stem
    if module in SPLIT_MODULES:
        return nodeid
    if module == "test_faults" and "[" in nodeid:
        return path + "::" + nodeid.split("[", 1)[1].split("-", 1)[0]  # the backend, prepared's parameter
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # keep SLOW_FIRST's order, not the units' test counts
    return ByUnit(config, log)


def pytest_collection_modifyitems(items):
    """`slow` marks every test that starts Spark (the `spark` fixture) or runs in SLOW_MODULES;
    `make test-fast` runs the others (pytest -m "not slow"). Then the order: SLOW_FIRST, then the other
    modules with a slow test, then the rest; a stable sort by module (or by test in SPLIT_MODULES), so a
    module's own order, and its fixtures' set-up, stay as they were."""
    for item in items:
        if {"spark", "spark_session"} & set(item.fixturenames) or item.module.__name__ in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    slow_units = {_unit(item.nodeid) for item in items if item.get_closest_marker("slow")}

    def rank(item) -> tuple[int, int]:
        first = next((k for k, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))
        return first, _unit(item.nodeid) not in slow_units

    items.sort(key=rank)


@pytest.fixture(scope="session")
def spark_session():
    from spark_jobs.session import get_spark

    master = "local[1]" if os.environ.get("PYTEST_XDIST_WORKER") else "local[2]"
    short = os.environ.get("SPARK_SUBMIT_OPTS") == SHORT_JVM_OPTS
    if short:  # this JVM lives all session: the parallel collector (SESSION_JVM_OPTS)
        os.environ["SPARK_SUBMIT_OPTS"] = SESSION_JVM_OPTS
    try:
        session = get_spark(master, "nightshift-tests")
    finally:
        if short:
            os.environ["SPARK_SUBMIT_OPTS"] = SHORT_JVM_OPTS
    yield session
    session.stop()


@pytest.fixture
def spark(spark_session):
    """The session's one SparkSession; after each test its temporary views and cached frames go, so
    a long session does not keep every test's plans (and their broadcasts) alive on the driver."""
    yield spark_session
    spark_session.catalog.clearCache()
    for row in spark_session.sql("SHOW TABLES").collect():  # catalog.listTables() fails on Spark 4.2 here
        if row["isTemporary"]:
            spark_session.catalog.dropTempView(row["tableName"])


@pytest.fixture
def quiet():
    messages: list[str] = []
    return messages.append


# ---------------------------------------------------------------- warehouse backends
PG_URL = os.environ.get("NIGHTSHIFT_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = ("duckdb", "postgresql")


@pytest.fixture(scope="session")
def pg_schemas():
    """make(name) -> a SQLAlchemy URL on a fresh PostgreSQL schema; all of them are dropped at the end
    of the session. An unreachable PostgreSQL skips the PostgreSQL tests, except under CI=true where
    it fails them."""
    import sqlalchemy as sa

    engine = sa.create_engine(PG_URL, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as c:
            c.exec_driver_sql("SELECT 1")
    except Exception as e:  # noqa: BLE001 - any connection failure means "no PostgreSQL here"
        msg = f"PostgreSQL at {PG_URL} is unreachable ({type(e).__name__}); start it or set NIGHTSHIFT_TEST_PG_URL"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    prefix = f"ns_t{os.getpid()}_"
    created: list[str] = []

    def make(name: str) -> str:
        schema = prefix + "".join(ch if ch.isalnum() else "_" for ch in name.lower())[:40] + f"_{len(created)}"
        with engine.begin() as c:
            c.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        created.append(schema)
        return f"{PG_URL}?options=-csearch_path%3D{schema}"

    yield make
    with engine.begin() as c:
        for schema in created:
            c.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    engine.dispose()


@pytest.fixture
def warehouse_url(request):
    """warehouse_url(backend, name) -> None (the project's DuckDB file) or a fresh PostgreSQL schema."""

    def make(backend: str, name: str) -> str | None:
        if backend == "duckdb":
            return None
        return request.getfixturevalue("pg_schemas")(name)

    return make
