"""Everything that differs between warehouse backends lives here (one class per backend)."""

from __future__ import annotations

from pathlib import Path

from lattice.ir import View


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class Dialect:
    name = "generic"

    def column_type(self, t: str) -> str:
        return t

    def stage_parquet(self, conn, table: str, files: list[Path], columns: list[tuple[str, str]]) -> None:
        """Load Parquet files into temporary table `table`, taking column src as dst for (src, dst)."""
        raise NotImplementedError

    def lock(self, conn, project: str) -> None:
        """Serialize refreshes of one project (no-op where the engine already has one writer)."""

    def summary_ddl(self, view: View) -> str:
        cols = [f"{q(k.name)} {self.column_type(k.type)}" for k in view.keys]
        cols += [f"{q(s.column)} {self.column_type(s.type)} {'NOT NULL' if s.kind in ('count_star', 'count') else ''}".rstrip()
                 for s in view.stored]
        return f"CREATE TABLE {q(view.storage_table)} ({', '.join(cols)})"

    def keys_match(self, view: View, a: str, b: str) -> str:
        return " AND ".join(f"{a}.{q(k.name)} IS NOT DISTINCT FROM {b}.{q(k.name)}" for k in view.keys) or "TRUE"


class DuckDBDialect(Dialect):
    name = "duckdb"

    def stage_parquet(self, conn, table: str, files: list[Path], columns: list[tuple[str, str]]) -> None:
        listing = "[" + ", ".join(lit(str(f)) for f in files) + "]"
        select = ", ".join(f"{q(src)} AS {q(dst)}" for src, dst in columns)
        conn.exec_driver_sql(
            f"CREATE OR REPLACE TEMP TABLE {q(table)} AS SELECT {select} FROM read_parquet({listing}, hive_partitioning = false)"
        )


def dialect_for(url: str) -> Dialect:
    if url.startswith("duckdb"):
        return DuckDBDialect()
    from lattice.errors import ConfigError

    raise ConfigError(f"[warehouse] url {url.split('://')[0]}://...: unsupported backend (use duckdb:///file.duckdb)")
