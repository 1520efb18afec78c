"""The Java options of a driver JVM nightshift starts (spark_jobs.session.driver_java_options): over a small lake a
local JVM compiles with the quick compiler alone; over a bigger one, or a cluster's driver, it keeps the defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import FIGURE_1, make_project
from runtime.lake import Lake
from spark_jobs.session import QUICK_JIT, QUICK_JIT_BYTES, driver_java_options, quick_jit

ROOT = Path(__file__).resolve().parent.parent


def _sized(path: Path, size: int) -> None:
    """A sparse file of `size` bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


def test_the_quick_compiler_only_for_a_local_master_over_a_small_lake(tmp_path):
    small, big = Lake(tmp_path / "small"), Lake(tmp_path / "big")
    _sized(tmp_path / "small" / "changes" / "b1" / "t.parquet", QUICK_JIT_BYTES)
    _sized(tmp_path / "big" / "changes" / "b1" / "t.parquet", QUICK_JIT_BYTES + 1)
    assert quick_jit("local[2]", small) and quick_jit("local[*]", Lake(tmp_path / "none"))
    assert not quick_jit("local[2]", big)
    assert not quick_jit("local[2]", None)  # lake unknown
    assert not quick_jit("spark://host:7077", small) and not quick_jit("yarn", small) and not quick_jit(None, small)
    assert QUICK_JIT in driver_java_options(write_archive=False, quick=True).split(" ", 1)[-1]
    assert "TieredStopAtLevel" not in driver_java_options(write_archive=False)


def test_the_lake_footprint_counts_every_file_under_it(tmp_path):
    lake = Lake(tmp_path / "lake")
    assert lake.footprint() == 0  # no folder yet
    (tmp_path / "lake" / "tables" / "t").mkdir(parents=True)
    (tmp_path / "lake" / "tables" / "t" / "part.parquet").write_bytes(b"x" * 1000)
    (tmp_path / "lake" / "changes" / "b1").mkdir(parents=True)
    (tmp_path / "lake" / "changes" / "b1" / "t.parquet").write_bytes(b"y" * 234)
    assert lake.footprint() == 1234
    assert lake.footprint(limit=1234) == 1234
    for name in ("a", "b", "c"):
        (tmp_path / "wide" / name).mkdir(parents=True)
        (tmp_path / "wide" / name / "f").write_bytes(b"z" * 1000)
    wide = Lake(tmp_path / "wide")
    assert wide.footprint() == 3000
    assert wide.footprint(limit=500) == 1000  # past the limit after the first folder: the others are not walked


@pytest.mark.slow
def test_a_command_over_a_small_lake_starts_its_jvm_with_the_quick_compiler(tmp_path):
    """A cycle's local Spark, started in a subprocess without the suite's JVM settings: with the quick compiler
    alone while the lake is small, with the JVM's defaults once the lake's files pass QUICK_JIT_BYTES."""
    root = make_project(tmp_path / "p", FIGURE_1)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    for name in ("SPARK_SUBMIT_OPTS", "PYSPARK_GATEWAY_PORT", "NIGHTSHIFT_SPARK_CONF"):
        env.pop(name, None)
    script = ("import sys\n"
              "from nightshift.config import load_project\n"
              "from nightshift.cycle import Cycle\n"
              "cycle = Cycle(load_project(sys.argv[1]), progress=lambda message: None)\n"
              "bean = cycle.spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()\n"
              "print('JVM', ' '.join(str(a) for a in bean.getInputArguments()))\n")

    def jvm_arguments() -> str:
        r = subprocess.run([sys.executable, "-c", script, str(root)], env=env, capture_output=True, text=True, timeout=300)
        lines = [line for line in r.stdout.splitlines() if line.startswith("JVM ")]
        assert r.returncode == 0 and lines, r.stdout[-2000:] + r.stderr[-2000:]
        return lines[0]

    assert "-XX:TieredStopAtLevel=1" in jvm_arguments()
    _sized(root / "lake" / "changes" / "filler.bin", QUICK_JIT_BYTES + 1)  # any file under the lake counts
    assert "TieredStopAtLevel" not in jvm_arguments()
