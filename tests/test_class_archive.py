"""The class-data archive of local Spark JVMs (spark_jobs/class_archive.py): one per Java build and class path,
written once by the first JVM that finds none, mapped by every later one; never torn, never in the output."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_jobs import class_archive
from spark_jobs.class_archive import MAGIC, adopt, archive_options, key
from spark_jobs.packages import DELTA_JARS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def where(tmp_path, monkeypatch):
    """An archive folder of the test's own, and a package cache holding Delta Lake's jars (by name: no JVM starts
    in these tests), as on a machine where bin/spark-packages has run; the machine's own cache may not be filled."""
    jars = tmp_path / "ivy" / "jars"
    jars.mkdir(parents=True)
    for name in DELTA_JARS:
        (jars / f"{name}.jar").write_bytes(b"")
    monkeypatch.setenv("NIGHTSHIFT_IVY_CACHE", str(tmp_path / "ivy"))
    monkeypatch.setenv("NIGHTSHIFT_CLASS_ARCHIVE", str(tmp_path / "jvm"))
    return tmp_path / "jvm"


def _option(options: str, name: str) -> Path:
    (value,) = [o.split("=", 1)[1] for o in options.split() if o.startswith(f"-XX:{name}=")]
    return Path(value)


def _finish(part: Path) -> None:
    """What the JVM does at its exit: the part replaced by a whole archive (regions first, the header last)."""
    part.unlink()
    part.write_bytes(MAGIC + b"\0" * 60)


def test_the_first_jvm_writes_the_archive_the_next_ones_map_it(where):
    first = archive_options()
    part = _option(first, "ArchiveClassesAtExit")
    assert part.parent == where and part.name.startswith(key()) and part.suffix == ".part" and part.exists()
    assert "-Xlog:cds*=off" in first.split()
    assert archive_options() == "", "a second JVM starting while the first one runs writes no archive of its own"
    assert archive_options(write=False) == ""
    _finish(part)
    mapped = archive_options()
    assert _option(mapped, "SharedArchiveFile") == where / f"{key()}.jsa" and not part.exists()
    assert archive_options() == mapped and list(where.iterdir()) == [where / f"{key()}.jsa"]


def test_an_archive_cut_short_is_never_mapped_and_a_dead_writer_is_replaced(where):
    part = _option(archive_options(), "ArchiveClassesAtExit")
    part.write_bytes(b"\0" * 64)  # the regions written, the header not yet (or never: the JVM was killed)
    assert archive_options() == "" and not adopt(where, key())
    old = time.time() - class_archive.WRITING_FOR - 60
    os.utime(part, (old, old))  # a writer that started long ago and left no header ended without writing
    again = _option(archive_options(), "ArchiveClassesAtExit")
    assert again != part and not part.exists() and again.exists()


def test_two_whole_archives_leave_one_and_other_builds_archives_go_when_unused(where):
    where.mkdir()
    for writer in ("a", "b"):  # two JVMs that wrote at once (machines sharing the folder, each its first start)
        (where / f"{key()}.{writer}.part").write_bytes(MAGIC + b"\0" * 60)
    assert "SharedArchiveFile" in archive_options()
    assert sorted(p.name for p in where.iterdir()) == [f"{key()}.jsa"]
    stale, recent = where / "0000000000000000.jsa", where / "1111111111111111.jsa"
    for f, age in ((stale, class_archive.UNUSED_FOR + 60), (recent, 60)):
        f.write_bytes(MAGIC)
        os.utime(f, (time.time() - age, time.time() - age))
    (where / f"{key()}.jsa").unlink()
    archive_options()  # writes this build's archive anew, and clears what no JVM used for a week
    assert not stale.exists() and recent.exists()


def test_off_and_an_unwritable_folder_cost_only_the_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("NIGHTSHIFT_CLASS_ARCHIVE", "off")
    assert archive_options() == ""
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("NIGHTSHIFT_CLASS_ARCHIVE", str(blocked / "jvm"))
    assert archive_options() == ""


def test_a_jvm_that_resolves_delta_lake_itself_neither_writes_nor_maps_an_archive(where, tmp_path, monkeypatch):
    """Before Delta Lake's jars are cached the JVM downloads the package and its class path is not the next
    JVMs': an archive it wrote would be keyed for a class path no JVM has again (bin/spark-packages then
    writes it from a second process)."""
    here = archive_options()
    assert "ArchiveClassesAtExit" in here
    monkeypatch.setenv("NIGHTSHIFT_IVY_CACHE", str(tmp_path / "empty-ivy"))
    _finish(_option(here, "ArchiveClassesAtExit"))
    assert key() is None and archive_options() == ""


def test_the_key_follows_the_java_build(where, tmp_path, monkeypatch):
    here = key()
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert key() not in (None, here)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    assert key() is None


@pytest.mark.slow
def test_a_local_spark_writes_its_archive_at_exit_and_the_next_one_maps_it(tmp_path):
    """Two processes each start a local Spark (get_spark) and run a query: the first JVM writes the archive as it
    ends, the second maps it (the JVM's own class-loading log says where each class came from); neither prints
    anything of it."""
    env = dict(os.environ, NIGHTSHIFT_CLASS_ARCHIVE=str(tmp_path / "jvm"), PYTHONPATH=str(ROOT))
    env.pop("PYSPARK_GATEWAY_PORT", None)
    script = ("from spark_jobs.session import get_spark\n"
              "print('ROWS', get_spark('local[1]', 'archive-test').range(7).selectExpr('sum(id)').first()[0])\n")

    def run(extra_jvm: str = "") -> subprocess.CompletedProcess:
        jvm = " ".join(filter(None, [env.get("SPARK_SUBMIT_OPTS", ""), extra_jvm]))
        r = subprocess.run([sys.executable, "-c", script], env={**env, "SPARK_SUBMIT_OPTS": jvm},
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "ROWS 21" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
        assert "cds" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
        return r

    run()
    where = tmp_path / "jvm"
    deadline = time.monotonic() + 180  # the JVM writes the archive after the Python process ended
    while not adopt(where, key()) and time.monotonic() < deadline:
        time.sleep(1)
    archive = where / f"{key()}.jsa"
    assert archive.is_file() and archive.stat().st_size > 20 * 2**20, sorted(where.iterdir())
    log = tmp_path / "classes.log"
    run(f"-Xlog:class+load=info:file={log}")
    loaded = log.read_text().splitlines()
    mapped = [line for line in loaded if "source: shared objects file (top)" in line]  # (the JDK's own archive: no "top")
    read = [line for line in loaded if "source: file:" in line or "source: jar:" in line]  # from a jar, verified
    assert len(mapped) > 3000 and len(read) < 0.1 * len(mapped), (len(mapped), len(read), read[:20])
    assert sorted(p.name for p in where.iterdir()) == [archive.name], "the second JVM wrote no archive of its own"
