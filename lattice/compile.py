"""The compiler pipeline, top to bottom (modelled on sqlglot's optimizer: one pass per module).

    parse_schema    sql/schema.sql              -> Schema
    parse_view      sql/summaries/<view>.sql    -> ParsedView   (refuses what cannot be maintained)
    normalize       ParsedView                  -> View         (AVG -> SUM/COUNT, hidden counts)
    check_plan      Views                       -> Plan         (names unique, no clashes)
"""

from __future__ import annotations

import hashlib

from lattice.errors import UnsupportedView
from lattice.ir import FunctionalDependency, Plan, View
from lattice.passes.normalize import normalize
from lattice.passes.parse_schema import parse_schema
from lattice.passes.parse_views import parse_view


def compile_project(
    schema_sql: str,
    view_files: dict[str, str],
    dependencies: tuple[FunctionalDependency, ...] = (),
    schema_file: str = "sql/schema.sql",
) -> Plan:
    """Compile a project's schema and summary views (file name -> SQL text) into a Plan."""
    schema = parse_schema(schema_sql, schema_file)
    views = tuple(normalize(parse_view(text, file, schema)) for file, text in sorted(view_files.items()))
    _check_names(views)
    digest = hashlib.sha256()
    for part in [schema_sql, *(f"{f}\0{t}" for f, t in sorted(view_files.items())), repr(dependencies)]:
        digest.update(part.encode())
        digest.update(b"\0")
    return Plan(schema=schema, views=views, dependencies=dependencies, fingerprint=digest.hexdigest()[:16])


def _check_names(views: tuple[View, ...]) -> None:
    seen: dict[str, str] = {}
    for v in views:
        low = v.name.lower()
        if low in seen:
            raise UnsupportedView(f"{v.file}: view {v.name} is also defined in {seen[low]}")
        seen[low] = v.file
        for k in v.keys:
            if k.name.lower().startswith("_ns_"):
                raise UnsupportedView(f"{v.file}: view {v.name}: column {k.name}: names starting with _ns_ are reserved")
