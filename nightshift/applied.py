"""The applied summary layer: what `nightshift materialize` / `nightshift apply` last built, kept as a snapshot.

Nights run the applied layer, not the project's working files: a view file added, changed or broken in the
afternoon is reported by `plan`, `status` and the DAG, and takes effect only through `nightshift apply`; it never
stops the night's refresh of the views already served. The snapshot <project>/.nightshift/applied.json holds the
inputs the built plan was compiled from (sql/schema.sql, sql/summaries/*.sql and the nightshift.toml sections that
define the layer) with that plan's fingerprint. It is written in one atomic replace after materialize or apply
commits (and when a project that starts empty gets its empty summary tables), so a reader sees the old layer or
the new one, never half. A project without a snapshot (built before nightshift kept one) compiles its working
files, as before, and gets its snapshot on its next night whose plan the ledger holds.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runtime.errors import ConfigError, NightshiftError

SNAPSHOT = Path(".nightshift") / "applied.json"
# the nightshift.toml sections the plan is compiled from (lattice.compile_project's inputs besides the SQL files);
# the others ([lake] path and partition_by, [warehouse], [spark], [window], [refresh], [validate], [capture]) are
# live settings, always read from the working nightshift.toml
LAYER_SECTIONS = ("dependencies", "views", "statistics", "aggregates")


@dataclass(frozen=True)
class Snapshot:
    fingerprint: str  # the plan fingerprint of these inputs (the ledger's, when they were built)
    files: dict[str, str]  # "sql/schema.sql" and "sql/summaries/<file>.sql" -> text
    sections: dict[str, dict]  # LAYER_SECTIONS as nightshift.toml had them


def read(root: Path) -> Snapshot | None:
    """The project's applied layer, or None when it has none yet."""
    path = root / SNAPSHOT
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: unreadable snapshot of the applied summary layer ({e}); rerun nightshift apply "
                          f"(or nightshift materialize) to write it again") from None
    return Snapshot(str(data["fingerprint"]), dict(data["files"]), dict(data["sections"]))


def write(project) -> bool:
    """Record `project`'s layer (a nightshift.config.Project whose plan was just built) as the applied one; False
    when the snapshot already holds that plan. The inputs are the very texts the plan was compiled from
    (Project.layer_files), so the snapshot matches the fingerprint the ledger records. Atomic: a temporary file,
    then one rename."""
    fingerprint = project.plan.fingerprint
    current = read(project.root)
    if current is not None and current.fingerprint == fingerprint:
        return False
    path = project.root / SNAPSHOT
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "files": project.layer_files,
                               "sections": project.layer_sections}, indent=1, default=str))
    os.replace(tmp, path)
    return True


def compiling(project) -> tuple[object | None, list[str]]:
    """`project` (a nightshift.config.Project) without the view files that do not compile, and the error of
    each of them: the compiler stops at a project's first error, so each file an error names is set aside and
    the rest compiled again, until it compiles (then every refusal of the project is in the list at once).
    (None, errors) when what fails is no view file (sql/schema.sql, nightshift.toml) or no view file is left."""
    errors: list[str] = []
    while True:
        try:
            _ = project.plan
            return project, errors
        except NightshiftError as e:
            errors.append(str(e))
            try:
                files = project.layer_files
            except NightshiftError:
                return None, errors
        broken = {f for f in files if f.startswith("sql/summaries/") and f in errors[-1]}
        rest = {f: text for f, text in files.items() if f not in broken}
        if not broken or len(rest) < 2:  # nothing named, or only sql/schema.sql left
            return None, errors
        project = dataclasses.replace(project, snapshot=Snapshot("", rest, project.layer_sections))


def unapplied(working: Callable, warehouse, ledger: list) -> list[str]:
    """What the project's working files hold that the applied layer does not (`working`: loads the Project of
    its working files; `ledger`: the warehouse's ledger rows): the view files (or layer settings) that do not
    compile, each with its error, and a line naming the views the others add, change or drop. Never raises
    for them: the nights run the applied layer whatever the working files hold. No line when they match what
    was built."""
    try:
        rest, errors = compiling(working())
    except NightshiftError as e:
        rest, errors = None, [str(e)]
    out = [f"not applied, does not compile (the nights run the applied layer; fix it, then nightshift apply): {e}"
           for e in errors]
    if rest is None or not ledger or ledger[-1].plan == rest.plan.fingerprint:
        return out
    change = warehouse.layer_diff(rest.plan, ledger)
    if change.empty:
        return out + ["summary layer: sql/schema.sql or a setting changed that no view reads, not yet applied "
                      "(nightshift apply records it and rebuilds nothing)"]
    besides = " (besides the files that do not compile)" if errors else ""
    return out + [f"summary layer{besides}: {change.summary()} not yet applied (nightshift apply)"]
