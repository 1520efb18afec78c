"""One SparkSession for the whole test session (local[2], small shuffles)."""

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


# Modules that start Airflow, a Spark cluster or the nightshift CLI in subprocesses: slow as a whole.
SLOW_MODULES = {"test_dags", "test_airflow_setup", "test_cluster", "test_cli"}


def pytest_collection_modifyitems(items):
    """`slow` marks every test that starts Spark (the `spark` fixture) or runs in SLOW_MODULES;
    `make test-fast` runs the others (pytest -m "not slow")."""
    for item in items:
        if {"spark", "spark_session"} & set(item.fixturenames) or item.module.__name__ in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def spark_session():
    from spark_jobs.session import get_spark

    session = get_spark("local[2]", "nightshift-tests")
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
