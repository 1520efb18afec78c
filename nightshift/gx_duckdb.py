"""Great Expectations over a DuckDB file: the `duckdb+autocommit` SQLAlchemy dialect.

GX 1.x runs each query inside `with engine.connect()` and fetches the result after the block
closed the connection; SQLAlchemy's close issues ROLLBACK, and in duckdb-engine the connection
*is* the cursor, so the ROLLBACK discards the pending result set and GX sees no rows
(docs/contributing.md, "Great Expectations over DuckDB"). This dialect never lets
SQLAlchemy BEGIN, COMMIT or ROLLBACK: every statement autocommits in DuckDB, nothing wipes an
open result. Its name stays "duckdb", so GX takes its DuckDB code paths unchanged. Use it only
for GX's read connections (validation), never for refresh.

Importing this module registers the dialect; it must happen before GX builds its engine.

With GX and duckdb-engine both imported, DuckDB's nanobind bindings report ~43 lines of "leaked
instance" at interpreter exit (duckdb's own type constants, still held by its Python submodules when
the extension module is torn down; harmless, but noise on every `nightshift validate`).
_release_duckdb_modules clears those submodules at exit, before the extension goes.
"""

from __future__ import annotations

import atexit
import sys

from duckdb_engine import Dialect as _DuckDBDialect
from sqlalchemy.dialects import registry


class DuckDBAutocommitDialect(_DuckDBDialect):
    supports_statement_cache = False

    def do_begin(self, dbapi_connection) -> None:  # SQLAlchemy autobegin: no BEGIN
        pass

    def do_commit(self, dbapi_connection) -> None:  # nothing to commit: DuckDB autocommits
        pass

    def do_rollback(self, dbapi_connection) -> None:  # would wipe the pending result set
        pass


registry.register("duckdb.autocommit", __name__, "DuckDBAutocommitDialect")


def gx_url(url: str) -> str:
    """The connection string GX gets for a warehouse URL: DuckDB through the autocommit dialect,
    anything else (PostgreSQL) unchanged."""
    if url.startswith("duckdb:///"):
        return "duckdb+autocommit:///" + url[len("duckdb:///"):]
    return url


def _release_duckdb_modules() -> None:
    for name in sorted(sys.modules):
        if name.startswith(("duckdb.", "duckdb_engine")):
            sys.modules[name].__dict__.clear()


atexit.register(_release_duckdb_modules)
