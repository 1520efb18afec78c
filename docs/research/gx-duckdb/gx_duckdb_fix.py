"""Make GX's SQL datasource work over duckdb-engine.

Root cause: GX's SqlAlchemyExecutionEngine.execute_query() returns a CursorResult
*after* its `with engine.connect()` block has exited; SQLAlchemy's Connection.close()
rolls back the autobegun transaction (dialect.do_rollback -> DuckDBPyConnection.rollback()).
In DuckDB the connection *is* the cursor (duckdb-engine's CursorWrapper delegates to
the one DuckDBPyConnection), so ROLLBACK/COMMIT replaces the pending result set with
an empty one -> fetchall() == [] -> res[0] IndexError in resolve_metric_bundle.

Fix: a tiny duckdb-engine dialect subclass that runs in DuckDB's native autocommit
mode, i.e. never issues BEGIN/COMMIT/ROLLBACK through SQLAlchemy, so nothing wipes
the open result set. Registered as the SQLAlchemy URL scheme "duckdb+autocommit";
dialect.name stays "duckdb", so GX's dialect-specific code paths are unchanged.
Trade-off: no multi-statement transactions through engines built from this URL
(fine for read-only validation; every statement auto-commits).
"""
from __future__ import annotations

from duckdb_engine import Dialect as _DuckDBDialect
from sqlalchemy.dialects import registry


class DuckDBAutocommitDialect(_DuckDBDialect):
    supports_statement_cache = False

    def do_begin(self, dbapi_connection) -> None:  # SQLAlchemy autobegin: don't BEGIN
        pass

    def do_commit(self, dbapi_connection) -> None:  # nothing to commit in autocommit mode
        pass

    def do_rollback(self, dbapi_connection) -> None:  # would wipe the pending result set
        pass


registry.register("duckdb.autocommit", __name__, "DuckDBAutocommitDialect")


def gx_duckdb_url(path: str) -> str:
    """Connection string for context.data_sources.add_sql()."""
    return f"duckdb+autocommit:///{path}"
