"""Everything that differs between warehouse backends lives here (one class per backend).

A dialect names things (PostgreSQL folds unquoted names to lower case), writes the DDL of a
summary table, stages Parquet summary-deltas into a temporary table (DuckDB `read_parquet`,
PostgreSQL `COPY`), serializes refreshes, and merges one staged summary-delta into its summary
table by Figure 8 of paper 001.
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import sqlalchemy as sa

import sqlglot

from lattice.ir import DISTINCT_COUNT, StoredAggregate, View
from lattice.passes.normalize import served
from lattice.refresh import delta_columns, fresh, merged, summary_columns
from lattice.sql import duckdb_read_parquet, literal, to_dialect
from lattice.sql import ident as q
from runtime.errors import ConfigError


class Dialect:
    """What both backends share (every statement here runs on DuckDB and on PostgreSQL); what differs
    is a method of DuckDBDialect or PostgresDialect."""

    name = "generic"
    sqlglot_dialect = "neutral"  # lattice.sql engine name
    min_key_check = True  # 4.3's min-key check reads one aggregate per group-by column of the summary table

    # ------------------------------------------------------------ names
    def fold(self, view: View, name: str) -> str:
        """The name as the warehouse stores it (unquoted names keep their spelling here)."""
        return name

    def col(self, view: View, name: str) -> str:
        return q(self.fold(view, name))

    def storage_name(self, view: View) -> str:
        """The storage table "<view>__ns" (group-by columns + hidden aggregates), unquoted."""
        return self.fold(view, view.name) + "__ns"

    def table(self, view: View) -> str:
        return q(self.storage_name(view))

    def staging(self, view: View, columns: list[tuple[str, str]], prefix: str = "") -> list[tuple[str, str, str]]:
        """(source column in the Parquet, column as the warehouse names it, type) for stage_parquet."""
        return [(prefix + c, self.fold(view, c), t) for c, t in columns]

    def serving(self, view: View) -> str:
        return q(self.fold(view, view.name))

    def storage_select(self, view: View) -> str:
        """Every row of a summary table, its columns under nightshift's names (keys, stored aggregates)."""
        cols = ", ".join(f"{self.col(view, c)} AS {q(c)}" for c, _ in summary_columns(view))
        return f"SELECT {cols} FROM {self.table(view)}"

    def column_type(self, t: str) -> str:
        return t

    # ------------------------------------------------------------ DDL
    def summary_ddl(self, view: View, columns: tuple[tuple[str, str], ...] = ()) -> list[str]:
        """The storage table: group keys and hidden aggregates; a recompute view's declared columns,
        typed as tonight's result is (`columns`, from Spark)."""
        if not view.incremental:
            cols = [f"{self.col(view, c)} {self.column_type(t)}" for c, t in columns]
            return [f"CREATE TABLE {self.table(view)} ({', '.join(cols)})"]
        cols = [f"{self.col(view, k.name)} {self.column_type(k.type)}" for k in view.keys]
        cols += [f"{q(s.column)} {self.column_type(s.type)}{' NOT NULL' if s.kind in ('count_star', 'count') else ''}"
                 for s in view.stored]
        return [f"CREATE TABLE {self.table(view)} ({', '.join(cols)})"]

    def serving_view_sql(self, view: View) -> str:
        """The serving view: exactly the declared columns (AVG as SUM/COUNT), the groups HAVING keeps;
        a grand total (no GROUP BY) is one row even over an empty table (COUNT 0, the others NULL)."""
        source = self.table(view)
        if view.incremental and not view.keys:
            one = [f"COALESCE(MAX({q(s.column)}), 0) AS {q(s.column)}" if s.kind in ("count_star", "count")
                   else f"MAX({q(s.column)}) AS {q(s.column)}" for s in view.stored]
            source = f"(SELECT {', '.join(one)} FROM {self.table(view)}) AS {q('_ns_total')}"
        cols = [f"{self._served(view, o)} AS {self.col(view, o.name)}" for o in view.outputs]
        where = f" WHERE {self._over_storage(view, view.having)}" if view.having else ""
        return f"CREATE VIEW {self.serving(view)} AS SELECT {', '.join(cols)} FROM {source}{where}"

    def _served(self, view: View, o) -> str:
        return self._over_storage(view, served(o))

    def _over_storage(self, view: View, sql: str) -> str:
        """Neutral SQL over the storage table's column names, as this warehouse names them."""
        def fold(node):
            if isinstance(node, sqlglot.exp.Column):
                return sqlglot.parse_one(self.col(view, node.name))
            return node

        return to_dialect(sqlglot.parse_one(sql).transform(fold).sql(), self.sqlglot_dialect)

    # ------------------------------------------------------------ running SQL
    def run(self, conn, sql: str):
        """Run one statement (no bind parameters: every value is a literal of lattice.sql)."""
        return conn.exec_driver_sql(sql)

    # ------------------------------------------------------------ transactions
    def lock(self, conn) -> None:
        """Serialize refreshes of one warehouse (no-op where the engine already has one writer)."""

    def create_temp_as(self, conn, table: str, select: str) -> None:
        """(Re)create temporary table `table` as the result of `select`, dropped at commit or session end."""
        raise NotImplementedError

    def stage_parquet(self, conn, table: str, files: list[Path], columns: list[tuple[str, str, str]]) -> None:
        """Load Parquet files into temporary table `table`: (source column, column, type) each."""
        raise NotImplementedError

    def load_parquet(self, conn, view: View, files: list[Path], prefix: str = "",
                     columns: tuple[tuple[str, str], ...] = ()) -> None:
        """Append Parquet files holding a whole summary table (materialize, or a night that recomputes
        the view) to its storage table (a recompute view's `columns` as its result has them)."""
        columns = self.staging(view, list(columns) if not view.incremental else summary_columns(view), prefix)
        self.stage_parquet(conn, "__ns_stage", files, columns)
        cols = ", ".join(q(dst) for _, dst, _ in columns)
        self.run(conn, f"INSERT INTO {self.table(view)} ({cols}) SELECT {cols} FROM {q('__ns_stage')}")

    # ------------------------------------------------------------ Figure 8
    def merge_delta(self, conn, view: View, delta: str, insert_only: bool = False) -> tuple[int, int, int, int]:
        """Apply staged summary-delta `delta` to the view's summary table (Figure 8): each dialect does it in one
        statement (MERGE, INSERT ... ON CONFLICT); this is the portable form.

        Classifies every delta group against the summary table once (new / existing / gone), then
        DELETE, UPDATE and INSERT. Returns (inserted, updated, deleted, broken) where broken counts
        delta groups that remove rows from groups the summary table does not hold. `insert_only`
        (4.3: the batch deletes nothing, so every delta COUNT(*) is positive): no group can empty or
        lose its MIN/MAX row, so the delete and MIN/MAX-recompute paths are skipped."""
        t, c = self.table(view), q("__ns_class")
        inserted, updated, deleted, broken = self.classify(conn, view, delta, insert_only)
        if broken:
            return inserted, updated, deleted, broken
        cm = self.keys_match(view, "t", "c")
        if deleted:
            self.run(conn, f"DELETE FROM {t} AS t USING {c} AS c WHERE {cm} AND c._ns_gone")
        if updated:
            lost = "FALSE" if insert_only else "c._ns_lost = 1"
            sets = ", ".join(f"{q(s.column)} = {merged(view, s, 't', 'c', lost)}" for s in view.stored)
            self.run(conn, f"UPDATE {t} AS t SET {sets} FROM {c} AS c WHERE {cm} AND c._ns_found AND NOT c._ns_gone")
        if inserted:
            self.insert_fresh(conn, view, "__ns_class", "NOT c._ns_found")
        return inserted, updated, deleted, broken

    def classify(self, conn, view: View, delta: str, insert_only: bool, extra: tuple[str, ...] = ()
                 ) -> tuple[int, int, int, int]:
        """Every delta group of `delta` classified against the summary table in ONE join, kept as the temporary
        table __ns_class: the delta's columns, _ns_found (the table holds the group), _ns_gone (its COUNT(*)
        reaches 0), and `extra` (select items over the delta `d` and the table's row `t`, NULL when not found).
        Returns (inserted, updated, deleted, broken) as merge_delta counts them."""
        cnt = q("_ns_count")
        gone = "FALSE" if insert_only else f"COALESCE(t.{cnt} + d.{cnt} = 0, FALSE)"
        self.create_temp_as(
            conn, "__ns_class",
            f"SELECT d.*, t.{cnt} IS NOT NULL AS _ns_found, {gone} AS _ns_gone{''.join(', ' + e for e in extra)} "
            f"FROM {q(delta)} AS d LEFT JOIN {self.table(view)} AS t ON {self.keys_match(view, 't', 'd')}",
        )
        return tuple(int(x) for x in self.run(conn,
            f"SELECT COALESCE(SUM(CASE WHEN NOT _ns_found AND {cnt} > 0 THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN _ns_found AND NOT _ns_gone THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN _ns_gone THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN NOT _ns_found AND {cnt} < 0 THEN 1 ELSE 0 END), 0) FROM {q('__ns_class')}"
        ).fetchone())

    def insert_fresh(self, conn, view: View, delta: str, where: str = "TRUE") -> None:
        """INSERT the delta's groups with COUNT(*) > 0 as new groups (Figure 8's "t is not found")."""
        cols = [self.col(view, k.name) for k in view.keys] + [q(s.column) for s in view.stored]
        vals = [f"c.{self.col(view, k.name)}" for k in view.keys] + [fresh(view, s, "c") for s in view.stored]
        self.run(conn, 
            f"INSERT INTO {self.table(view)} ({', '.join(cols)}) SELECT {', '.join(vals)} FROM {q(delta)} AS c "
            f"WHERE ({where}) AND c.{q('_ns_count')} > 0"
        )

    # ------------------------------------------------------------ 4.3: new-key nights
    def delta_profile(self, conn, view: View, delta: str) -> tuple[int, int, int, str | None]:
        """(delta rows, rows with COUNT(*) > 0, rows with COUNT(*) < 0, a group-by column proving
        every delta group new). The proof is the cheap min-key check of 4.3: every delta value of
        that column is non-NULL and lies above the summary table's maximum or below its minimum
        (e.g. the night's sales are all for dates after the last one); "(empty table)" when the
        summary table holds no rows. Reads the delta, and one column aggregate per group-by column of the
        table only when no delta group loses rows (a night that deletes never reads the table here)."""
        d, t, cnt = q(delta), self.table(view), q("_ns_count")
        cols = [self.col(view, k.name) for k in view.keys]
        dsel = ["COUNT(*) AS all_rows", f"SUM(CASE WHEN {cnt} > 0 THEN 1 ELSE 0 END) AS positive",
                f"SUM(CASE WHEN {cnt} < 0 THEN 1 ELSE 0 END) AS negative"]
        rows, positive, negative = (int(x or 0) for x in self.run(conn, f"SELECT {', '.join(dsel)} FROM {d}").fetchone())
        if negative:
            return rows, positive, negative, None  # a group loses rows: not every group is new
        dsel += [f"COUNT({c}) = COUNT(*) AS n{i}, MIN({c}) AS lo{i}, MAX({c}) AS hi{i}" for i, c in enumerate(cols)]
        if self.min_key_check:
            tsel = ["COUNT(*) AS n"] + [f"MIN({c}) AS lo{i}, MAX({c}) AS hi{i}" for i, c in enumerate(cols)]
            tests = [f"COALESCE(d.n{i} AND (d.lo{i} > t.hi{i} OR d.hi{i} < t.lo{i}), FALSE)" for i in range(len(cols))]
        else:  # only "is the table empty", which an index answers
            tsel = [f"CASE WHEN EXISTS (SELECT 1 FROM {t}) THEN 1 ELSE 0 END AS n"]
            tests = ["FALSE"] * len(cols)
        source = f" FROM {t}" if self.min_key_check else ""
        row = self.run(conn, 
            f"SELECT d.*, t.n = 0, {', '.join(tests) or 'FALSE'} FROM (SELECT {', '.join(dsel)} FROM {d}) AS d, "
            f"(SELECT {', '.join(tsel)}{source}) AS t"
        ).fetchone()
        rows, positive, negative = (int(x or 0) for x in row[:3])
        flags = list(row[3 + 3 * len(cols):])
        proof = "(empty table)" if flags[0] else next((k.name for k, f in zip(view.keys, flags[1:]) if f), None)
        return rows, positive, negative, proof

    def exact_minmax_groups(self, conn, delta: str) -> int:
        """Delta groups whose MIN/MAX propagate recomputed exactly (_ns_lost = 1), for the ledger."""
        return int(self.run(conn, f"SELECT COALESCE(SUM(_ns_lost), 0) FROM {q(delta)}").scalar())

    def existing_groups(self, conn, view: View, delta: str) -> tuple[int, tuple | None]:
        """Delta groups the summary table already holds (count, one example key): the exact check
        of a declared new-key view when the min-key check cannot prove it."""
        keys = [self.col(view, k.name) for k in view.keys]
        match = self.keys_match(view, "t", "d")
        row = self.run(conn, 
            f"SELECT COUNT(*), MIN(CAST(ROW({', '.join('d.' + k for k in keys)}) AS VARCHAR)) FROM {q(delta)} AS d "
            f"WHERE EXISTS (SELECT 1 FROM {self.table(view)} AS t WHERE {match})"
        ).fetchone()
        return int(row[0]), row[1]

    def insert_new_keys(self, conn, view: View, delta: str) -> None:
        """4.3: every delta group is new, so insert without looking the summary table up."""
        self.insert_fresh(conn, view, delta)

    def keys_match(self, view: View, a: str, b: str) -> str:
        return " AND ".join(f"{a}.{self.col(view, k.name)} IS NOT DISTINCT FROM {b}.{self.col(view, k.name)}"
                            for k in view.keys) or "TRUE"


class DuckDBDialect(Dialect):
    """DuckDB: names are case-insensitive, so they keep their spelling; deltas staged with read_parquet."""

    name = "duckdb"
    sqlglot_dialect = "duckdb"

    def create_temp_as(self, conn, table: str, select: str) -> None:
        self.run(conn, f"CREATE OR REPLACE TEMP TABLE {q(table)} AS {select}")

    def stage_parquet(self, conn, table: str, files: list[Path], columns: list[tuple[str, str, str]]) -> None:
        select = ", ".join(f"{q(src)} AS {q(dst)}" for src, dst, _ in columns)
        self.create_temp_as(conn, table, f"SELECT {select} FROM {duckdb_read_parquet(files)}")

    def export_parquet(self, conn, view: View, path: Path) -> None:
        self.run(conn, f"COPY ({self.storage_select(view)}) TO {literal(str(path), 'duckdb')} (FORMAT PARQUET)")

    def merge_delta(self, conn, view: View, delta: str, insert_only: bool = False) -> tuple[int, int, int, int]:
        """Figure 8 with each changed group's row replaced, not updated in place. The classification's one join of
        the delta with the summary table (classify) also computes each group's new row (Figure 8's rule for a group
        the table holds, a new group's own values for one it does not); a delta group that removes rows from a group
        the table does not hold is counted as broken (the caller raises; the transaction rolls back). Then the
        changed groups' old rows are deleted by their row ids, and the new rows of every group that still holds rows
        go in. `insert_only` (4.3): no group is gone, no MIN/MAX recompute.

        Why not UPDATE (or MERGE's UPDATE): DuckDB keeps an update beside its row group and, at the next
        checkpoint, rewrites the updated columns of every row group it touched; its commit checkpoints once the
        night's changes are large. A night's changed groups are spread over the whole table (a correction for
        every date), so the commit rewrote most of a large summary table inside the window. A delete is a mark
        and the new rows are appended: the checkpoint writes only them."""
        t, c = self.table(view), q("__ns_class")
        lost = "FALSE" if insert_only else "d._ns_lost = 1"
        keys = [self.col(view, k.name) for k in view.keys]
        by_row = not any(k.name.lower() == "rowid" for k in view.keys)  # a group key named rowid hides DuckDB's
        new = [f"CASE WHEN t.{q('_ns_count')} IS NULL THEN {fresh(view, s, 'd')} ELSE {merged(view, s, 't', 'd', lost)} END "
               f"AS {q(f'_ns_new{i}')}" for i, s in enumerate(view.stored)]
        extra = (*(["t.rowid AS _ns_row"] if by_row else []), *new)
        inserted, updated, deleted, broken = self.classify(conn, view, delta, insert_only, extra)
        if broken:
            return inserted, updated, deleted, broken
        if (updated or deleted) and by_row:
            self.run(conn, f"DELETE FROM {t} WHERE rowid IN (SELECT _ns_row FROM {c} WHERE _ns_found)")
        elif updated or deleted:
            self.run(conn, f"DELETE FROM {t} AS t USING {c} AS c WHERE {self.keys_match(view, 't', 'c')} AND c._ns_found")
        if inserted or updated:
            cols = keys + [q(s.column) for s in view.stored]
            vals = keys + [q(f"_ns_new{i}") for i in range(len(view.stored))]
            keep = f"(_ns_found AND NOT _ns_gone) OR (NOT _ns_found AND {q('_ns_count')} > 0)"
            self.run(conn, f"INSERT INTO {t} ({', '.join(cols)}) SELECT {', '.join(vals)} FROM {c} WHERE {keep}")
        self.run(conn, f"DROP TABLE {c}")
        return inserted, updated, deleted, 0


class PostgresDialect(Dialect):
    """PostgreSQL 15+: unquoted names fold to lower case; COPY staging; upsert through a NULL-safe
    unique index (NULLS NOT DISTINCT) so refresh cost follows the delta, not the table."""

    name = "postgresql"
    sqlglot_dialect = "postgres"
    COPY_BATCH_ROWS = 65536
    min_key_check = False  # MIN/MAX of a non-leading index column is a sequential scan here

    def fold(self, view: View, name: str) -> str:
        return name if name in view.quoted else name.lower()

    def run(self, conn, sql: str):
        """psycopg reads % as a placeholder even without parameters: a literal % (a name, a LIKE
        pattern, the modulo operator) is written %%."""
        return conn.exec_driver_sql(sql.replace("%", "%%"))

    def column_type(self, t: str) -> str:
        return "DOUBLE PRECISION" if t == "DOUBLE" else t

    def export_parquet(self, conn, view: View, path: Path) -> None:
        """COPY … TO STDOUT as CSV, read by Arrow with the storage columns' types, written as Parquet."""
        raw = conn.connection.dbapi_connection
        buf = io.BytesIO()
        with raw.cursor() as cur, cur.copy(f"COPY ({self.storage_select(view)}) TO STDOUT WITH (FORMAT csv, HEADER)") as cp:
            for chunk in cp:
                buf.write(chunk)
        columns = summary_columns(view)
        convert = pacsv.ConvertOptions(column_types={c: _arrow_type(t) for c, t in columns}, strings_can_be_null=True)
        buf.seek(0)
        table = pacsv.read_csv(buf, convert_options=convert) if buf.getbuffer().nbytes else \
            pa.table({c: pa.array([], _arrow_type(t)) for c, t in columns})
        pq.write_table(table, path)

    def summary_ddl(self, view: View, columns: tuple[tuple[str, str], ...] = ()) -> list[str]:
        ddl = super().summary_ddl(view, columns)
        if not view.incremental:
            return ddl
        t = self.table(view)
        if view.has_min_max:  # Figure 8 needs "this group lost rows" next to an exact MIN/MAX in ON CONFLICT
            ddl.append(f"ALTER TABLE {t} ADD COLUMN _ns_lost INTEGER NOT NULL DEFAULT 0")
        if view.keys:
            keys = ", ".join(self.col(view, k.name) for k in view.keys)
            ddl.append(f"CREATE UNIQUE INDEX ON {t} ({keys}) NULLS NOT DISTINCT")
        ddl.append(f"CREATE INDEX ON {t} ({q('_ns_count')}) WHERE {q('_ns_count')} <= 0")  # finds emptied groups
        return ddl

    def lock(self, conn) -> None:
        self.run(conn, "SELECT pg_advisory_xact_lock(hashtext('nightshift refresh ' || current_schema()))")

    def create_temp_as(self, conn, table: str, select: str) -> None:
        self.run(conn, f"DROP TABLE IF EXISTS {q(table)}")
        self.run(conn, f"CREATE TEMP TABLE {q(table)} ON COMMIT DROP AS {select}")

    def stage_parquet(self, conn, table: str, files: list[Path], columns: list[tuple[str, str, str]]) -> None:
        self.run(conn, f"DROP TABLE IF EXISTS {q(table)}")
        cols = ", ".join(f"{q(dst)} {self.column_type(t)}" for _, dst, t in columns)
        self.run(conn, f"CREATE TEMP TABLE {q(table)} ({cols}) ON COMMIT DROP")
        copy_parquet(conn, table, files, columns, self.COPY_BATCH_ROWS)

    def load_parquet(self, conn, view: View, files: list[Path], prefix: str = "",
                     columns: tuple[tuple[str, str], ...] = ()) -> None:
        columns = self.staging(view, list(columns) if not view.incremental else summary_columns(view), prefix)
        copy_parquet(conn, self.table(view), files, columns, self.COPY_BATCH_ROWS, quoted_table=True)

    def merge_delta(self, conn, view: View, delta: str, insert_only: bool = False) -> tuple[int, int, int, int]:
        """Figure 8 as one INSERT … ON CONFLICT DO UPDATE (an index probe per delta group: the
        "usually new keys" form of 4.3, insert first and update on conflict), then DELETE of the
        groups whose COUNT(*) reached 0 through a partial index (skipped when `insert_only`)."""
        if not view.keys:
            return super().merge_delta(conn, view, delta, insert_only)
        t, cnt = self.table(view), q("_ns_count")
        keys = [self.col(view, k.name) for k in view.keys]
        stored = [q(s.column) for s in view.stored]
        lost = ["_ns_lost"] if view.has_min_max and not insert_only else []
        was_lost = "FALSE" if insert_only else "EXCLUDED._ns_lost = 1"
        sets = [f"{q(s.column)} = {merged(view, s, 't', 'EXCLUDED', was_lost)}" for s in view.stored]
        sets += ["_ns_lost = 0"] if lost else []
        # Values go in as the delta holds them (an existing group needs the raw SUM even when the
        # delta's COUNT(e) is 0); a new group whose COUNT(e) is 0 is fixed below (Figure 8's NULL).
        nullable = [s for s in view.stored if s.kind in ("sum", "min", "max", "holistic") and s.func != DISTINCT_COUNT]
        empty_new = " OR ".join(f"({q(view.stored_of('count', s.arg).column)} = 0 AND {q(s.column)} IS NOT NULL)"
                                for s in nullable) or "FALSE"
        row = self.run(conn, 
            f"WITH up AS (INSERT INTO {t} AS t ({', '.join(keys + stored + lost)}) "
            f"SELECT {', '.join(keys + stored + lost)} FROM {q(delta)} "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(sets)} "
            f"RETURNING (xmax = 0) AS ins, {cnt} AS n, ({empty_new}) AS empty_new) "
            f"SELECT COALESCE(SUM(CASE WHEN ins AND n > 0 THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN NOT ins AND n <> 0 THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN NOT ins AND n = 0 THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN ins AND n < 0 THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN ins AND empty_new THEN 1 ELSE 0 END), 0) FROM up"
        ).fetchone()
        inserted, updated, deleted, broken, empties = (int(x) for x in row)
        if broken:
            return inserted, updated, deleted, broken
        if not insert_only:
            self.run(conn, f"DELETE FROM {t} WHERE {cnt} <= 0")
        if empties:
            for s in nullable:
                c = q(view.stored_of("count", s.arg).column)
                self.run(conn, f"UPDATE {t} SET {q(s.column)} = NULL WHERE {c} = 0 AND {q(s.column)} IS NOT NULL")
        return inserted, updated, deleted, broken

    def insert_new_keys(self, conn, view: View, delta: str) -> None:
        """4.3: a plain INSERT (no ON CONFLICT); the unique index still rejects an existing group,
        which the caller reports as a violated new-key declaration (the transaction rolls back)."""
        try:
            with conn.begin_nested():
                self.insert_fresh(conn, view, delta)
        except sa.exc.IntegrityError as e:
            raise NewKeyConflict(str(getattr(e, "orig", e)).strip().splitlines()[-1]) from None


class NewKeyConflict(Exception):
    """A delta group the summary table already holds, on a night refreshed as new keys only."""


def _arrow_type(t: str) -> pa.DataType:
    """nightshift's type name (lattice.types) as an Arrow type, for a summary table exported as Parquet."""
    if t.startswith("DECIMAL("):
        p, s = (int(x) for x in t[len("DECIMAL("):-1].split(","))
        return pa.decimal128(p, s)
    return {"INTEGER": pa.int32(), "BIGINT": pa.int64(), "SMALLINT": pa.int16(), "DOUBLE": pa.float64(),
            "REAL": pa.float32(), "FLOAT": pa.float64(), "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us"),
            "BOOLEAN": pa.bool_()}.get(t, pa.string())


def copy_parquet(conn, table: str, files: list[Path], columns: list[tuple[str, str, str]], batch_rows: int,
                 quoted_table: bool = False) -> int:
    """Stream Parquet files into `table` with COPY … FROM STDIN (CSV written by Arrow in C++):
    no row-by-row INSERTs, no Python loop over rows. Returns the rows copied."""
    target = table if quoted_table else q(table)
    names = ", ".join(q(dst) for _, dst, _ in columns)
    raw = conn.connection.dbapi_connection
    rows = 0
    with raw.cursor() as cur, cur.copy(f"COPY {target} ({names}) FROM STDIN WITH (FORMAT csv)") as cp:
        for f in files:
            pf = pq.ParquetFile(f)
            for batch in pf.iter_batches(batch_size=batch_rows, columns=[src for src, _, _ in columns]):
                buf = io.BytesIO()
                pacsv.write_csv(pa.Table.from_batches([batch]), buf, pacsv.WriteOptions(include_header=False))
                cp.write(buf.getbuffer())
                rows += batch.num_rows
    return rows


def dialect_for(url: str) -> Dialect:
    scheme = url.split("://")[0].split("+")[0]
    if scheme == "duckdb":
        return DuckDBDialect()
    if scheme in ("postgresql", "postgres"):
        return PostgresDialect()
    raise ConfigError(
        f"[warehouse] url {url.split('://')[0]}://...: unsupported backend "
        f"(use duckdb:///file.duckdb or postgresql+psycopg://user@host/db)"
    )
