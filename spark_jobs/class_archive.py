"""The class-data archive of nightshift's local Spark JVMs (no pyspark import here: the Airflow DAG's tasks
build their spark-submit command with it).

A Spark JVM spends seconds of every start loading and verifying Spark's and Delta Lake's classes before the
first query: every `nightshift run` without a Spark Connect server and every spark-submit task of the DAG pays
it. Java keeps the classes a JVM loaded in an archive (dynamic class-data sharing): `-XX:ArchiveClassesAtExit`
writes one when the JVM ends, `-XX:SharedArchiveFile` maps it at the next start (a small night's command: 0.69-0.78x
the wall time; a DAG night's spark-submit tasks 0.78-0.81x: bench/JVM_START.md, bench/DAG_NIGHT.md).

One archive per Java build and Spark class path, `<key>.jsa` in NIGHTSHIFT_CLASS_ARCHIVE's folder (default
~/.cache/nightshift/jvm; `off`: none). The first JVM that finds none writes one at its exit to a name of its
own (`<key>.<id>.part`); the JVM writes an archive's header last, so a part whose header is there is whole,
and the next start moves it into place (one rename: two JVMs never leave a torn archive). A JVM given an
archive it cannot use (written by another Java or for another class path) says so only in the log this
turns off, and loads its classes as before: a stale archive costs the saving, never the run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import time
import uuid
from pathlib import Path

from spark_jobs.packages import delta_jars, user_cache

# the first bytes of a whole dynamic archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC, little-endian)
MAGIC = (0xF00BABA8).to_bytes(4, "little")
# an archive being written is left alone this long; a part older than this without its header is a JVM that
# ended without writing (killed), and is removed
WRITING_FOR = 3600
# an archive of another Java build or class path unused this long is removed when a new one is written
UNUSED_FOR = 7 * 24 * 3600
QUIET = "-Xlog:cds*=off"  # the archive's notices (a class it skips, an archive it cannot use) stay out of the output


def folder() -> Path | None:
    """Where the archives are kept (NIGHTSHIFT_CLASS_ARCHIVE), or None when it is `off`."""
    value = os.environ.get("NIGHTSHIFT_CLASS_ARCHIVE", "")
    if value.lower() in ("off", "0", "false", "no"):
        return None
    if value:
        return Path(value).expanduser()
    return user_cache() / "jvm"


def key() -> str | None:
    """What an archive is only good for: the Java build Spark's launcher starts (JAVA_HOME's, else the PATH's)
    and the class path it gives the JVM (Spark's jars, Delta Lake's). None when there is no Java, or when Delta
    Lake's jars are not cached yet: the JVM then resolves the package itself, and the class path it ends up with is
    not the one the next JVMs get (an archive written under this key would never be mapped)."""
    jars_of_delta = delta_jars()
    if jars_of_delta is None:
        return None
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else shutil.which("java")
    if not java or not Path(java).is_file():
        return None
    java = Path(java).resolve()
    h = hashlib.sha256(str(java).encode())
    modules = java.parent.parent / "lib" / "modules"  # the Java build's own classes: another build, another file
    if modules.is_file():
        st = modules.stat()
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    spark_home = os.environ.get("SPARK_HOME") or _pyspark_home()
    jars = Path(spark_home or "") / "jars"
    h.update(str(jars).encode())
    if jars.is_dir():
        h.update("\0".join(sorted(p.name for p in jars.iterdir())).encode())
    h.update("\0".join(jars_of_delta).encode())
    return h.hexdigest()[:16]


def _pyspark_home() -> str | None:
    spec = importlib.util.find_spec("pyspark")  # finds the package without importing it
    return spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None


def whole(path: Path) -> bool:
    """An archive the JVM finished writing (its header, written last, is there)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def archive_options(write: bool = True) -> str:
    """The JVM options for a local Spark JVM about to start: map this Java's and class path's archive when there
    is one (after moving a part another JVM finished into place), else, when `write` and no other JVM is writing
    one, write it at this JVM's exit. "" when archives are off, there is no Java, or the folder is unwritable."""
    where, k = folder(), key()
    if where is None or k is None:
        return ""
    final = where / f"{k}.jsa"
    try:
        if whole(final) or adopt(where, k):
            os.utime(final)  # in use: kept when another Java's archives are cleared away
            return f"-XX:SharedArchiveFile={final} {QUIET}"
        if not write or _writing(where, k):
            return ""
        where.mkdir(parents=True, exist_ok=True)
        _clear_unused(where, k)
        part = where / f"{k}.{uuid.uuid4().hex[:12]}.part"
        part.touch()  # says "being written" to the JVMs that start meanwhile; the JVM replaces it at its exit
        return f"-XX:ArchiveClassesAtExit={part} {QUIET}"
    except OSError:
        return ""


def adopt(where: Path, k: str) -> bool:
    """Move every whole part of key `k` into place as its archive (when two JVMs wrote one, the last moved wins:
    one archive is enough); True when the archive is there."""
    final = where / f"{k}.jsa"
    for part in where.glob(f"{k}.*.part"):
        if whole(part):
            try:
                os.replace(part, final)
            except FileNotFoundError:  # another start moved it first
                pass
    return whole(final)


def _writing(where: Path, k: str) -> bool:
    """Another JVM is writing key `k`'s archive (a part younger than WRITING_FOR); older empty parts are removed."""
    busy = False
    for part in where.glob(f"{k}.*.part"):
        try:
            if time.time() - part.stat().st_mtime < WRITING_FOR:
                busy = True
            else:
                part.unlink()
        except FileNotFoundError:
            pass
    return busy


def _clear_unused(where: Path, k: str) -> None:
    """Archives of other Java builds or class paths (an upgrade's leftovers, 100-200 MB each) unused for a week."""
    for old in where.glob("*.jsa"):
        try:
            if not old.name.startswith(k) and time.time() - old.stat().st_mtime > UNUSED_FOR:
                old.unlink()
        except FileNotFoundError:
            pass
