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
    "spark.sql.adaptive.enabled=false;spark.sql.codegen.wholeStage=false;spark.sql.codegen.factoryMode=NO_CODEGEN",
)
os.environ.setdefault("NIGHTSHIFT_DRIVER_MEMORY", "2g")


@pytest.fixture(scope="session")
def spark():
    from spark_jobs.session import get_spark

    session = get_spark("local[2]", "nightshift-tests")
    yield session
    session.stop()


@pytest.fixture
def quiet():
    messages: list[str] = []
    return messages.append
