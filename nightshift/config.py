"""A nightshift project folder: nightshift.toml, sql/schema.sql, sql/summaries/*.sql, lake/."""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
import zoneinfo
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import duckdb

from lattice import compile_project
from lattice.ir import FunctionalDependency, Plan, UserAggregate
from lattice.passes.choose_maps import MAP_REASON, over_map
from lattice.sql import ident, to_dialect
from nightshift import applied
from runtime.errors import ConfigError, UnsupportedView
from runtime.options import SPARK_MASTER, Options
from warehouse.store import mask

_FD = re.compile(r"^\s*([A-Za-z_][\w, ]*?)\s*->\s*([A-Za-z_][\w, ]*?)\s*$")

# Every key nightshift.toml accepts, per section: the one list load_project checks a project against and
# docs/reference/configuration.md is tested against (tests/test_docs.py). NAMED marks a section whose keys
# are names the project chooses (a table, a view, an aggregate); the reader of that section checks values.
NAMED = "<name>"
KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "project": ("name",),
    "lake": ("path", "partition_by"),
    "warehouse": ("url", "airflow_conn_id"),
    "spark": ("master", "remote"),
    "window": ("opens", "closes", "timezone"),
    "dependencies": (NAMED,),  # <table> = ["a -> b", ...]
    "views": (NAMED,),  # <view> = one of lattice.ir.MAINTAIN
    "statistics": (NAMED,),  # <table> = rows, or <table> = { rows = N, <column> = distinct values }
    "aggregates": (NAMED,),  # <name> = "sql", or <name> = { AGGREGATE_KEYS }
    "refresh": ("new_keys",),
    "validate": ("sample", "row_count_tolerance", "keep_results"),  # read by nightshift/validate/report.py
    "capture": (NAMED,),  # [capture.<table>] with CAPTURE_KEYS, read by nightshift/capture.py
}
AGGREGATE_KEYS = ("sql", "type")
CAPTURE_KEYS = ("kind", "path", "since_column")


@dataclass(frozen=True)
class Window:
    opens: str = "01:00"
    closes: str = "05:00"
    timezone: str = "UTC"

    def on(self, day: dt.date) -> tuple[dt.datetime, dt.datetime]:
        """The window that opens on `day` (in the window's timezone): (opens, closes), aware datetimes;
        it closes the next day when it crosses midnight."""
        tz = zoneinfo.ZoneInfo(self.timezone)
        (oh, om), (ch, cm) = (tuple(int(x) for x in t.split(":")) for t in (self.opens, self.closes))
        opens = dt.datetime.combine(day, dt.time(oh, om), tz)
        closes = dt.datetime.combine(day + dt.timedelta(days=(ch, cm) <= (oh, om)), dt.time(ch, cm), tz)
        return opens, closes

    def current_or_next(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        """The window open at `now`, else the next one (a backfill's nights refresh in it, one by one)."""
        today = now.astimezone(zoneinfo.ZoneInfo(self.timezone)).date()
        return next(w for d in (-1, 0, 1) if (w := self.on(today + dt.timedelta(days=d)))[1] > now)


@dataclass(frozen=True)
class Project:
    root: Path
    lake: Path
    warehouse_url: str
    spark_master: str
    window: Window
    dependencies: tuple[FunctionalDependency, ...]
    settings: dict
    warehouse_conn_id: str = ""  # [warehouse] airflow_conn_id: DAG tasks take the URL from this Airflow connection
    options: Options = Options()  # the method's switches ([refresh] new_keys and NIGHTSHIFT_* flags), read once
    maintain: tuple[tuple[str, str], ...] = ()  # [views] name = "auto" | "incremental" | "delta" | "recompute" | "auxiliary" | "map"
    aggregates: tuple[UserAggregate, ...] = ()  # [aggregates] name = { sql = "...", type = "DOUBLE" }
    # [lake] partition_by = { pos = "date" }: months of a date column; { pos = false }: one table (runtime/layout.py)
    partition_by: tuple[tuple[str, str | None], ...] = ()
    # [statistics] pos = 10000000, items = { rows = 1000, category = 10 }: as ("pos", rows), ("items.category", distinct)
    statistics: tuple[tuple[str, int], ...] = ()
    spark_remote: str = ""  # [spark] remote (NIGHTSHIFT_SPARK_REMOTE): a Spark Connect server's sc:// URL; "" = Spark in-process
    # load_project(layer="applied"): the applied layer's snapshot the plan compiles from (nightshift/applied.py);
    # None: the working files (sql/, the layer's sections of nightshift.toml)
    snapshot: applied.Snapshot | None = None

    @cached_property
    def partition_settings(self) -> dict[str, str | None]:
        """[lake] partition_by, checked: table -> the DATE or TIMESTAMP column whose months lay out its lake base
        (apply-base rewrites only the months a batch touches, and the delete checks read only those), or None
        (`false`: one table). The tables it does not name get nightshift's choice (runtime/layout.py)."""
        out: dict[str, str | None] = {}
        for table, col in self.partition_by:
            t = self.plan.schema.table(table)
            where = f"{self.root / 'nightshift.toml'}: [lake] partition_by {table} = {'false' if col is None else repr(col)}"
            if t is None or t.view is not None:
                raise ConfigError(f"{where}: no table {table} in sql/schema.sql")
            if col is None:
                out[t.name] = None
                continue
            c = t.column(col)
            if c is None:
                raise ConfigError(f"{where}: table {t.name} has no column {col} (it has {', '.join(t.column_names)})")
            if not c.type.upper().startswith(("DATE", "TIMESTAMP")):
                raise ConfigError(f"{where}: {t.name}.{c.name} is {c.type}; partitions are months of a DATE or "
                                  f"TIMESTAMP column")
            out[t.name] = c.name
        return out

    @property
    def name(self) -> str:
        return self.settings.get("project", {}).get("name") or self.root.name

    @cached_property
    def plan(self) -> Plan:
        plan = self._compile(self.statistics)
        check_views(plan)
        return plan

    def _compile(self, statistics: tuple[tuple[str, int], ...]) -> Plan:
        files = dict(self.layer_files)
        return compile_project(files.pop("sql/schema.sql"), files, self.dependencies, "sql/schema.sql", self.maintain,
                               self.aggregates, statistics, dialect=self.dialect)

    @cached_property
    def layer_files(self) -> dict[str, str]:
        """The SQL the plan compiles from, read once ("sql/schema.sql" and "sql/summaries/<file>.sql" -> text):
        the applied layer's snapshot, or the working files (what nightshift apply snapshots once it built them)."""
        if self.snapshot is not None:
            return self.snapshot.files
        schema_file = self.root / "sql" / "schema.sql"
        if not schema_file.is_file():
            raise ConfigError(f"{schema_file}: missing (a project needs sql/schema.sql)")
        summaries = sorted((self.root / "sql" / "summaries").glob("*.sql"))
        if not summaries:
            raise ConfigError(f"{self.root / 'sql' / 'summaries'}: no summary views (*.sql) found")
        return {"sql/schema.sql": schema_file.read_text(), **{str(p.relative_to(self.root)): p.read_text() for p in summaries}}

    @property
    def layer_sections(self) -> dict[str, dict]:
        """The nightshift.toml sections the plan compiles from (applied.LAYER_SECTIONS), as this project read them."""
        if self.snapshot is not None:
            return self.snapshot.sections
        return {k: self.settings[k] for k in applied.LAYER_SECTIONS if k in self.settings}

    @property
    def dialect(self) -> str:
        """The warehouse's SQL dialect, whose semantics the views' SQL has. A warehouse named by an Airflow
        connection ([warehouse] airflow_conn_id, URL not read yet) is PostgreSQL: the only kind such a
        connection can name."""
        if not self.warehouse_url and self.warehouse_conn_id:
            return "postgres"
        return "postgres" if self.warehouse_url.split("://")[0].split("+")[0] in ("postgresql", "postgres") else "duckdb"

    def routes_with_sizes(self, table_rows: dict[str, int]) -> list[str]:
        """How the plan would keep each view with these table sizes (the lake's, measured) in place of
        [statistics]'s or the defaults: where a deleted MIN/MAX comes from (lattice/passes/choose_extremes.py),
        over a map or over its fact table (lattice/passes/choose_maps.py). A line for each view whose route they
        change, naming the sizes to declare; none when they change nothing."""
        declared = dict(self.statistics)
        sizes = {**declared, **{t: n for t, n in table_rows.items() if n > 0}}
        other = self._compile(tuple(sizes.items()))
        out = []
        for view in self.plan.views:
            alt = other.view(view.name)
            if (alt.mode, alt.reads) == (view.mode, view.reads):
                continue
            if over_map(alt):  # the map by what it holds (its name is the lake's own), then the reason after it
                grain = next(", ".join(k.name for k in a.keys) for a in other.auxiliary if a.name == alt.reads[0])
                how = f"it over a map ({view.fact} grouped by {grain}){alt.reason[len(MAP_REASON + alt.reads[0]):]}"
            elif {view.mode, alt.mode} == {"delta", "auxiliary"} and alt.has_min_max and not over_map(view):
                how = f"its MIN/MAX in {alt.mode} mode ({alt.reason})"
            else:
                how = f"it in {alt.mode} mode " + (f"({alt.reason})" if alt.reason else f"over {alt.fact}")
            declare = ", ".join(f"{t} = {n}" for t, n in table_rows.items() if n > 0 and declared.get(t) != n)
            out.append(f"{view.name}: with the lake's sizes the plan would keep {how}; to take that route, declare "
                       f"them in nightshift.toml [statistics] ({declare}) and run nightshift apply")
        return out


def load_project(root: str | Path, layer: str = "working") -> Project:
    """The project at `root`. layer="working": its summary layer as its files hold it now (plan, apply,
    materialize); layer="applied": as nightshift apply (or materialize) last built it, from its snapshot
    (nightshift/applied.py; the working files while it has none), which every night step runs. The live
    settings ([lake], [warehouse], [spark], [window], [refresh], [validate], [capture]) always come from the
    working nightshift.toml."""
    if layer not in ("working", "applied"):
        raise ValueError(f"load_project: layer must be 'working' or 'applied', not {layer!r}")
    root = Path(root).resolve()
    toml_file = root / "nightshift.toml"
    if not toml_file.is_file():
        raise ConfigError(f"{toml_file}: not found (is {root} a nightshift project? create one with `nightshift init DIR`)")
    try:
        data = tomllib.loads(toml_file.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{toml_file}: malformed TOML: {e}") from None
    for section in ("lake", "warehouse", "spark", "window", "dependencies", "refresh", "views", "aggregates"):
        if section in data and not isinstance(data[section], dict):
            raise ConfigError(f"{toml_file}: [{section}] must be a table")
    _check_keys(data, toml_file)
    lake = Path(_str(data, "lake", "path", "lake", toml_file))
    conn_id = _str(data, "warehouse", "airflow_conn_id", "", toml_file)
    # with airflow_conn_id and no url the URL exists only inside Airflow tasks (nightshift.airflow_ext)
    url = _str(data, "warehouse", "url", "" if conn_id else "duckdb:///warehouse.duckdb", toml_file)
    url = os.environ.get("NIGHTSHIFT_WAREHOUSE_URL", url)  # credentials stay out of project files
    if url and "://" not in url:
        raise ConfigError(f"{toml_file}: [warehouse] url {mask(url)!r} is not a SQLAlchemy URL (e.g. duckdb:///warehouse.duckdb, "
                          f"postgresql+psycopg://user@host/db); libpq keyword strings (host=... password=...) are not URLs")
    window = data.get("window", {})
    snapshot = applied.read(root) if layer == "applied" else None
    defining = snapshot.sections if snapshot is not None else data  # the sections the plan compiles from
    where = root / applied.SNAPSHOT if snapshot is not None else toml_file
    return Project(
        root=root,
        lake=lake if lake.is_absolute() else root / lake,
        warehouse_url=url,
        spark_master=_str(data, "spark", "master", SPARK_MASTER, toml_file),
        window=Window(
            opens=str(window.get("opens", "01:00")),
            closes=str(window.get("closes", "05:00")),
            timezone=str(window.get("timezone", "UTC")),
        ),
        dependencies=_dependencies(defining.get("dependencies", {}), where),
        settings=data,
        warehouse_conn_id=conn_id,
        options=Options.read(os.environ, _names(data.get("refresh", {}), "new_keys", toml_file)),
        maintain=_maintain(defining.get("views", {}), where),
        aggregates=_aggregates(defining.get("aggregates", {}), where),
        partition_by=_partition_by(data.get("lake", {}).get("partition_by", {}), toml_file),
        statistics=_statistics(defining.get("statistics", {}), where),
        spark_remote=_remote(data, toml_file),
        snapshot=snapshot,
    )


def _remote(data: dict, file: Path) -> str:
    """[spark] remote, or NIGHTSHIFT_SPARK_REMOTE (which wins; set to "" it turns a remote off): a Spark Connect URL."""
    url = os.environ.get("NIGHTSHIFT_SPARK_REMOTE", _str(data, "spark", "remote", "", file)).strip()
    if url and not re.match(r"^sc://(\[[^\]]+\]|[^/:;]+)(:\d+)?/?(;.*)?$", url):
        where = "NIGHTSHIFT_SPARK_REMOTE" if "NIGHTSHIFT_SPARK_REMOTE" in os.environ else f"{file}: [spark] remote"
        raise ConfigError(f"{where} {url!r} is not a Spark Connect URL (sc://host:port, e.g. sc://127.0.0.1:15002; "
                          f"`nightshift spark-connect start` prints it)")
    return url


def _check_keys(data: dict, file: Path) -> None:
    """A section or key nightshift does not know is refused by name (a typo would silently fall back to a default)."""
    unknown = sorted(set(data) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"{file}: unknown section(s) {', '.join(f'[{u}]' for u in unknown)} "
                          f"(nightshift.toml has {', '.join(f'[{k}]' for k in KNOWN_KEYS)})")
    for section, keys in KNOWN_KEYS.items():
        given = data.get(section)
        extra = sorted(set(given) - set(keys)) if isinstance(given, dict) and NAMED not in keys else []
        if extra:
            raise ConfigError(f"{file}: [{section}] unknown key(s) {', '.join(extra)} ([{section}] has {', '.join(keys)})")


def _statistics(section, file: Path) -> tuple[tuple[str, int], ...]:
    """[statistics] table = rows, or table = { rows = N, column = distinct values, ... }: what the plan
    estimates sizes with (the compiler checks the names against the schema)."""
    out = []
    for table, value in section.items() if isinstance(section, dict) else ():
        for key, n in (value.items() if isinstance(value, dict) else [("rows", value)]):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ConfigError(f"{file}: [statistics] {table}{'' if key == 'rows' else '.' + key} must be a positive "
                                  f"whole number (rows of a table, or distinct values of a column), got {n!r}")
            out.append((table if key == "rows" else f"{table}.{key}", n))
    if not isinstance(section, dict):
        raise ConfigError(f"{file}: [statistics] must be a table like pos = 10000000 or items = {{ rows = 1000, "
                          f"category = 10 }}, got {section!r}")
    return tuple(out)


def _partition_by(section, file: Path) -> tuple[tuple[str, str | None], ...]:
    if not isinstance(section, dict) or not all((isinstance(v, str) and v) or v is False for v in section.values()):
        raise ConfigError(f'{file}: [lake] partition_by must be a table of table = "date column" (or false: one '
                          f'table), e.g. partition_by = {{ pos = "date" }}, got {section!r}')
    return tuple((k, v or None) for k, v in section.items())


def _aggregates(section: dict, file: Path) -> tuple[UserAggregate, ...]:
    """[aggregates] name = { sql = "...", type = "DOUBLE" } (or name = "sql"): user-defined aggregates;
    the compiler checks their SQL (lattice.compile.check_user_aggregates)."""
    out = []
    for name, value in section.items():
        if isinstance(value, str):
            value = {"sql": value}
        if not isinstance(value, dict) or not isinstance(value.get("sql"), str) or set(value) - set(AGGREGATE_KEYS):
            raise ConfigError(f'{file}: [aggregates] {name} must be "<sql>" or {{ sql = "<sql over x, i, n>", '
                              f'type = "DOUBLE" }}, got {value!r}')
        type_ = str(value.get("type", "DOUBLE")).upper()
        if type_ not in ("DOUBLE", "BIGINT", "INTEGER") and not type_.startswith("DECIMAL("):
            raise ConfigError(f"{file}: [aggregates] {name}: type {type_!r}: use DOUBLE, BIGINT, INTEGER or DECIMAL(p,s)")
        out.append(UserAggregate(name, value["sql"], type_))
    return tuple(out)


def _maintain(section: dict, file: Path) -> tuple[tuple[str, str], ...]:
    out = []
    for name, value in section.items():
        if not isinstance(value, str):
            raise ConfigError(f'{file}: [views] {name} must be "auto", "incremental", "delta", "recompute", "auxiliary" '
                              f'or "map", '
                              f'got {value!r}')
        out.append((name, value))
    return tuple(out)


def check_views(plan: Plan) -> None:
    """Every view's SQL, bound by DuckDB (the oracle's engine) against empty tables of the schema:
    an unknown column, a type error or anything else that has no meaning is refused here, naming the
    file and the view, before any night runs (the compiler checks the tables it reads)."""
    con = duckdb.connect()
    try:
        for t in plan.schema.base_tables:
            cols = ", ".join(f"{ident(c.name)} {c.type}" for c in t.columns)
            con.execute(f"CREATE TABLE {ident(t.name)} ({cols})")
        for v in plan.lake_views:  # auxiliary views first: a view with a user-defined aggregate reads its own
            try:
                columns = ", ".join(ident(o.name) for o in v.outputs)  # other views read it by these names
                con.execute(f"CREATE VIEW {ident(v.name)}({columns}) AS {to_dialect(v.sql, 'duckdb')}")
            except duckdb.Error as e:
                message = " ".join(str(e).split())
                raise UnsupportedView(f"{v.file}: view {v.name}: invalid SQL: {message}") from None
    finally:
        con.close()


def _names(section: dict, key: str, file: Path) -> tuple[str, ...]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{file}: [refresh] {key} must be a list of summary view names, like [\"SID_sales\"]")
    return tuple(value)


def _str(data: dict, section: str, key: str, default: str, file: Path) -> str:
    value = data.get(section, {}).get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"{file}: [{section}] {key} must be a string, got {value!r}")
    return value


def _dependencies(section: dict, file: Path) -> tuple[FunctionalDependency, ...]:
    out = []
    for table, fds in section.items():
        if not isinstance(fds, list):
            raise ConfigError(f"{file}: [dependencies] {table} must be a list like [\"city -> region\"]")
        for fd in fds:
            m = _FD.match(str(fd))
            if not m:
                raise ConfigError(f"{file}: [dependencies] {table}: {fd!r} is not of the form \"a -> b\"")
            lhs = tuple(c.strip() for c in m.group(1).split(",") if c.strip())
            rhs = tuple(c.strip() for c in m.group(2).split(",") if c.strip())
            out.append(FunctionalDependency(table, lhs, rhs))
    return tuple(out)
