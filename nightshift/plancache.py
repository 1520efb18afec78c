"""What the Airflow DAG needs of a project's plan, compiled once and cached by its inputs' hash.

The DAG processor parses dags/ every few seconds; compiling the views (sqlglot) and the D-lattice
each time would be wasted work. The cache file <project>/.nightshift/plan-cache.json holds the
inputs' hash (nightshift.toml, sql/schema.sql, sql/summaries/*.sql and the compiler's own source)
and the summary; a parse with the same hash reads it back, any edit recompiles. No Spark, no
database, no lake: only the project's text files. The plan is the applied layer's (nightshift/applied.py: the
nights run it), so a view file added or broken since nightshift apply changes no task and breaks no parse; the
hash covers the applied layer's snapshot too. An unwritable project folder only costs the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from lattice.dlattice import lattice_shape
from lattice.graph import levels
from nightshift.applied import SNAPSHOT
from nightshift.config import load_project

CACHE = Path(".nightshift") / "plan-cache.json"
_COMPILER = Path(__file__).resolve().parent.parent / "lattice"


def inputs_hash(root: Path) -> str:
    h = hashlib.sha256()
    files = [root / "nightshift.toml", root / SNAPSHOT, root / "sql" / "schema.sql",
             *sorted((root / "sql" / "summaries").glob("*.sql"))]
    files += sorted(_COMPILER.rglob("*.py"))
    for f in files:
        h.update(str(f.relative_to(root) if f.is_relative_to(root) else f.relative_to(_COMPILER)).encode() + b"\0")
        h.update(f.read_bytes() if f.is_file() else b"(missing)")
        h.update(b"\0")
    return h.hexdigest()[:20]


def plan_summary(root: str | Path) -> dict:
    """{"hash", "fingerprint", "views", "levels", "cached"}: levels = the D-lattice's points per level
    (lattice.graph.levels of its shape), one propagate task each. cached says whether the file answered."""
    root = Path(root).resolve()
    digest = inputs_hash(root)
    path = root / CACHE
    try:
        saved = json.loads(path.read_text())
        if saved.get("hash") == digest:
            return {**saved, "cached": True}
    except (OSError, ValueError):
        pass
    plan = load_project(root, "applied").plan
    summary = {
        "hash": digest,
        "fingerprint": plan.fingerprint,
        "views": [v.name for v in plan.views],
        "levels": [list(t) for t in levels(lattice_shape(plan))],
    }
    try:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(summary, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only project: compile at every parse
    return {**summary, "cached": False}
