"""`nightshift init DIR --example retail`: the retail project of paper 001 (Figure 1), with data.

The data has Appendix A's shape (100 stores, 1000 items, dates over a year) and is deterministic
for a seed. The first batch holds the initial load as inserts; each nightly batch mixes new sales
for the next day, late sales for past days, deleted and corrected (delete + insert) sales, NULL
quantities, a new store and new items, and an item moved to another category.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from runtime.errors import ConfigError

REPO_SQL = Path(__file__).resolve().parent.parent / "sql"
START = dt.date(2025, 11, 1)
EPOCH = dt.date(1970, 1, 1)
REGIONS = ["north", "south", "east", "west", "central"]
CATEGORIES = ["produce", "dairy", "bakery", "meat", "frozen", "snacks", "drinks", "household", "toys", "garden"]

TOML = """\
# nightshift project: the retail example (point-of-sale fact table, stores and items).
[project]
name = "{name}"

[lake]
path = "lake"
# a fact table is laid out by month of its date column once it holds 10 million rows (a night then rewrites
# and delete-checks only the months its batch touches); name the column, or false for one table, to decide
# it yourself (docs/reference/configuration.md, [lake]; nightshift plan shows the layout and why)
# partition_by = {{ pos = "date" }}

[warehouse]
# DuckDB file (embedded default); for PostgreSQL: postgresql+psycopg://user@host:5432/db
url = "duckdb:///warehouse.duckdb"

[spark]
master = "local[2]"
# Spark kept warm between commands: `nightshift spark-connect start` prints the URL
# remote = "sc://127.0.0.1:15002"

[window]
opens = "01:00"
closes = "05:00"
timezone = "UTC"

[dependencies]
# functional dependencies beyond the keys
stores = ["city -> region"]

# How a view is kept: auto (the default) | incremental | delta (incremental, no auxiliary view or map) | recompute | auxiliary
# (MIN/MAX through an auxiliary view, so a deleted extreme never reads the base) | map (docs/reference/configuration.md, [views]).
# [views]
# SiC_sales = "auxiliary"

# Sizes the plan estimates with (rows of a table, distinct values of a column); e.g. it keeps a view's
# MIN/MAX through an auxiliary view where that is at most a quarter of the fact table, and a view that joins
# a dimension over a map from 50 million fact rows on (docs/reference/configuration.md, [statistics]).
# [statistics]
# pos = 10_000_000
# stores = 100
# items = {{ rows = 1000, category = 10 }}

# User-defined aggregates, called in views as name(column): SQL over a group's non-NULL values x, each
# value's position i (1..n, ascending) and their number n (docs/reference/sql.md).
# [aggregates]
# trimmed_mean = "AVG(CASE WHEN i > 0.1 * n AND i <= 0.9 * n THEN x END)"
"""

EMPTY_TOML = """\
# nightshift project. Every section is optional except [lake] and [warehouse]; uncomment what you need.
[project]
name = "{name}"

[lake]
# where change batches land (lake/changes/<table>/batch_id=<ID>/) and the base tables live
path = "lake"
# a fact table is laid out by month of its DATE column from 10 million rows on (a night rewrites only the
# months its batch touches); name the column, or false for one table, to decide it yourself
# partition_by = {{ trips = "d" }}

[warehouse]
# where the summary tables are served: a DuckDB file in this folder (nothing to start);
# for PostgreSQL: postgresql+psycopg://user@host:5432/db (or set NIGHTSHIFT_WAREHOUSE_URL)
url = "duckdb:///warehouse.duckdb"

# [spark]
# master = "local[2]"            # or spark://host:7077
# remote = "sc://127.0.0.1:15002" # a Spark Connect server (nightshift spark-connect start)

# The batch window: the hours in which refresh may change the summary tables (Airflow waits for it).
# [window]
# opens = "01:00"
# closes = "05:00"
# timezone = "UTC"

# Functional dependencies beyond the keys, per table: they let one summary view be derived from another.
# [dependencies]
# zones = ["borough -> city"]

# How a view is kept (default "auto": the cheapest exact mode, chosen each night). Valid values:
#   "auto"         the plan chooses (and says why in nightshift plan)
#   "incremental"  always from its changes, never recomputed
#   "delta"        as "incremental", with a deleted MIN/MAX read from the base and no map
#   "recompute"    recomputed from the base every night
#   "auxiliary"    MIN/MAX kept through an auxiliary view, so a deleted extreme never reads the base
#   "map"          kept over a lake copy of its fact table grouped by the fact columns it reads, so a
#                  night that changes a dimension never joins the whole fact table
# [views]
# fares_by_month = "incremental"

# Sizes the plan estimates with (rows of a table, distinct values of a column); from 50 million rows of
# the fact table on, it keeps a view that joins a dimension over a map (docs/reference/configuration.md).
# [statistics]
# trips = 10_000_000
# zones = {{ rows = 300, city = 5 }}

# User-defined aggregates, called in views as name(column): SQL over a group's non-NULL values x, each
# value's position i (1..n, ascending) and their number n.
# [aggregates]
# trimmed_mean = "AVG(CASE WHEN i > 0.1 * n AND i <= 0.9 * n THEN x END)"
"""

EMPTY_SCHEMA = """\
-- The tables of your warehouse that summary views read: one fact table and its dimensions.
-- Declare PRIMARY KEYs and FOREIGN KEYs (REFERENCES): nightshift derives views from each other through
-- them, and `nightshift load --op delete` may then name only a row's key. For example:
--
-- CREATE TABLE zones (
--     zone_id INTEGER PRIMARY KEY,
--     borough VARCHAR NOT NULL,
--     city    VARCHAR NOT NULL
-- );
--
-- CREATE TABLE trips (
--     trip_id BIGINT PRIMARY KEY,
--     zone_id INTEGER NOT NULL REFERENCES zones(zone_id),
--     d       DATE NOT NULL,
--     fare    DECIMAL(10,2),
--     km      DOUBLE
-- );
"""

EMPTY_SUMMARIES_README = """\
One summary view per file, named <view>.sql, holding one CREATE VIEW, in your warehouse's SQL dialect.
For example, sql/summaries/fares_by_city.sql:

    CREATE VIEW fares_by_city AS
    SELECT z.city, t.d, COUNT(*) AS trips, SUM(t.fare) AS fares, MAX(t.fare) AS top_fare
    FROM trips t JOIN zones z ON t.zone_id = z.zone_id
    GROUP BY z.city, t.d;

`nightshift plan` shows how each view will be kept, and why.
"""


def init_empty(target: Path) -> list[Path]:
    """`nightshift init DIR`: an empty project that compiles (no tables, no views yet), every setting
    commented; returns the files and folders created."""
    target = Path(target)
    if (target / "nightshift.toml").exists():
        raise ConfigError(f"{target / 'nightshift.toml'} already exists; choose an empty folder")
    created = [target / "nightshift.toml", target / "sql" / "schema.sql", target / "sql" / "summaries" / "README.md",
               target / "lake" / "changes"]
    (target / "sql" / "summaries").mkdir(parents=True, exist_ok=True)
    (target / "lake" / "changes").mkdir(parents=True, exist_ok=True)
    (target / "nightshift.toml").write_text(EMPTY_TOML.format(name=target.resolve().name))
    (target / "sql" / "schema.sql").write_text(EMPTY_SCHEMA)
    (target / "sql" / "summaries" / "README.md").write_text(EMPTY_SUMMARIES_README)
    return created


SCHEMAS = {
    "stores": pa.schema([("storeID", pa.int32()), ("city", pa.string()), ("region", pa.string()), ("_op", pa.string())]),
    "items": pa.schema(
        [("itemID", pa.int32()), ("name", pa.string()), ("category", pa.string()), ("cost", pa.decimal128(10, 2)), ("_op", pa.string())]
    ),
    "pos": pa.schema(
        [("storeID", pa.int32()), ("itemID", pa.int32()), ("date", pa.date32()), ("qty", pa.int32()),
         ("price", pa.decimal128(10, 2)), ("_op", pa.string())]
    ),
}


def init_project(target: Path, example: str | None, rows: int, nights: int = 3, seed: int = 7) -> list[str]:
    """Create a project folder; with example='retail' also its change batches. Returns batch ids."""
    target = Path(target)
    if (target / "nightshift.toml").exists():
        raise ConfigError(f"{target / 'nightshift.toml'} already exists; choose an empty folder")
    if example not in (None, "retail"):
        raise ConfigError(f"unknown example {example!r} (available: retail)")
    (target / "sql" / "summaries").mkdir(parents=True, exist_ok=True)
    (target / "lake" / "changes").mkdir(parents=True, exist_ok=True)
    (target / "nightshift.toml").write_text(TOML.format(name=target.resolve().name))
    shutil.copy(REPO_SQL / "schema.sql", target / "sql" / "schema.sql")
    for f in sorted((REPO_SQL / "summaries").glob("*.sql")):
        shutil.copy(f, target / "sql" / "summaries" / f.name)
    if example is None:
        return []
    return RetailGenerator(seed).write(target / "lake", rows, nights)


def write_batch(lake: Path, table: str, batch: str, frame: pd.DataFrame, part: int = 0) -> Path:
    d = lake / "changes" / table / f"batch_id={batch}"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"part-{part:05d}.parquet"
    pq.write_table(pa.Table.from_pandas(frame, schema=SCHEMAS[table], preserve_index=False), path)
    return path


def batch_id(day: int) -> str:
    return (START + dt.timedelta(days=day)).strftime("%Y%m%d")


class RetailGenerator:
    """Deterministic retail data; keeps the current base in memory to make valid deletes.

    skew > 0 draws stores and items Zipf-like (the k-th most popular with weight 1/k**skew); 0 is uniform.
    """

    def __init__(self, seed: int = 7, stores: int = 100, items: int = 1000, days: int = 365, skew: float = 0.0):
        self.rng = np.random.default_rng(seed)
        self.n_stores, self.n_items, self.days, self.skew = stores, items, days, skew
        self.pos: pd.DataFrame | None = None
        self.items: pd.DataFrame | None = None
        self.stores: pd.DataFrame | None = None

    def write(self, lake: Path, rows: int, nights: int) -> list[str]:
        ids = []
        first = batch_id(self.days)
        self.initial(rows)
        write_batch(lake, "stores", first, self.stores.assign(_op="insert"))
        write_batch(lake, "items", first, self.items.assign(_op="insert"))
        for i, chunk in enumerate(np.array_split(np.arange(len(self.pos)), max(1, len(self.pos) // 500_000))):
            write_batch(lake, "pos", first, self.pos.iloc[chunk].assign(_op="insert"), part=i)
        ids.append(first)
        for night in range(1, nights + 1):
            b = batch_id(self.days + night)
            for table, frame in self.night(night, max(100, rows // 1000)).items():
                write_batch(lake, table, b, frame)
            ids.append(b)
        return ids

    def initial(self, rows: int) -> None:
        r = self.rng
        cities = [f"city{c:02d}" for c in range(self.n_stores // 4 + 1)]
        city_region = {c: REGIONS[i % len(REGIONS)] for i, c in enumerate(cities)}
        store_city = [cities[s % len(cities)] for s in range(self.n_stores)]
        self.stores = pd.DataFrame(
            {"storeID": np.arange(1, self.n_stores + 1, dtype="int32"), "city": store_city,
             "region": [city_region[c] for c in store_city]}
        )
        self.items = pd.DataFrame(
            {"itemID": np.arange(1, self.n_items + 1, dtype="int32"),
             "name": [f"item{i:04d}" for i in range(1, self.n_items + 1)],
             "category": [CATEGORIES[i % len(CATEGORIES)] for i in range(self.n_items)],
             "cost": [_money(c) for c in r.integers(50, 5000, self.n_items)]}
        )
        self.pos = self._sales(rows, 0, self.days)

    def _sales(self, n: int, first_day: int, last_day: int) -> pd.DataFrame:
        r = self.rng
        qty = r.integers(1, 20, n).astype("float64")
        qty[r.random(n) < 0.01] = np.nan  # NULL measures
        stores, items = self._ids(n, len(self.stores)), self._ids(n, len(self.items))  # the draws' order of old
        days = r.integers(first_day, last_day, n).astype("int32") + np.int32((START - EPOCH).days)
        cents = r.integers(99, 9999, n).astype("int32")
        # Arrow-backed date32 and decimal(10,2) columns: no Python object per row (pos 100M fits in memory)
        return pd.DataFrame(
            {"storeID": stores, "itemID": items,
             "date": pd.arrays.ArrowExtensionArray(pa.array(days).cast(pa.date32())),
             "qty": pd.array(qty, dtype="Int32"),
             "price": pd.arrays.ArrowExtensionArray(pa.array(cents).cast(pa.decimal128(10, 0)).view(pa.decimal128(10, 2)))}
        )

    def _ids(self, n: int, upper: int) -> np.ndarray:
        """n ids in 1..upper: uniform, or Zipf-like with exponent self.skew."""
        if not self.skew:
            return self.rng.integers(1, upper + 1, n).astype("int32")
        weights = 1.0 / np.arange(1, upper + 1) ** self.skew
        return (self.rng.choice(upper, n, p=weights / weights.sum()) + 1).astype("int32")

    def update_generating(self, changes: int) -> pd.DataFrame:
        """Section 6's update-generating pos changes: equal numbers of deletes (of existing rows) and
        inserts over existing dates, stores and items; the in-memory base follows along."""
        inserts = self._sales(changes // 2, 0, self.days)
        victims = self.pos.sample(n=len(inserts), random_state=int(self.rng.integers(0, 2**31)))
        self.pos = pd.concat([self.pos.drop(victims.index), inserts], ignore_index=True)
        return pd.concat([inserts.assign(_op="insert"), victims.assign(_op="delete")], ignore_index=True)

    def insertion_generating(self, day: int, changes: int, groups: int = 0) -> pd.DataFrame:
        """Section 6's insertion-generating pos changes: inserts for a new date `day` (days after START),
        existing stores and items; with groups, over only that many (store, item) pairs (Appendix A's
        Table 3: 10,000 changes making 1,000 rows of sd_SID_sales)."""
        inserts = self._sales(changes, day, day + 1)
        if groups:
            n = len(self.items)
            pairs = self.rng.choice(len(self.stores) * n, groups, replace=False)[self.rng.integers(0, groups, changes)]
            inserts = inserts.assign(storeID=(pairs // n + 1).astype("int32"), itemID=(pairs % n + 1).astype("int32"))
        self.pos = pd.concat([self.pos, inserts], ignore_index=True)
        return inserts.assign(_op="insert")

    def night(self, night: int, changes: int) -> dict[str, pd.DataFrame]:
        """One night's mixed changes, about `changes` rows; the in-memory base follows along."""
        r = self.rng
        today = self.days + night - 1
        new_store = pd.DataFrame({"storeID": [len(self.stores) + 1], "city": ["city-new%d" % night], "region": ["north"]})
        self.stores = pd.concat([self.stores, new_store], ignore_index=True)
        new_items = pd.DataFrame(
            {"itemID": [len(self.items) + 1], "name": [f"new item {night}"], "category": ["seasonal"], "cost": [_money(250)]}
        )
        moved_idx = int(r.integers(0, len(self.items)))
        moved_old = self.items.iloc[[moved_idx]]
        moved_new = moved_old.assign(category=CATEGORIES[(CATEGORIES.index(moved_old.iloc[0]["category"]) + 3) % len(CATEGORIES)]
                                     if moved_old.iloc[0]["category"] in CATEGORIES else "produce")
        self.items = pd.concat([self.items.drop(self.items.index[moved_idx]), moved_new, new_items], ignore_index=True)
        fresh = self._sales(changes // 2, today, today + 1)  # next day's sales (new keys)
        late = self._sales(changes // 4, 0, today)  # late sales for past days
        victims = self.pos.sample(n=changes // 8, random_state=int(r.integers(0, 2**31)))
        corrected = victims.iloc[: len(victims) // 2].assign(qty=lambda d: (d["qty"].fillna(0) + 1).astype("Int32"))
        with_new_dims = self._sales(5, today, today + 1).assign(storeID=np.int32(len(self.stores)), itemID=np.int32(len(self.items)))
        inserts = pd.concat([fresh, late, corrected, with_new_dims], ignore_index=True)
        self.pos = pd.concat([self.pos.drop(victims.index), inserts], ignore_index=True)
        return {
            "stores": new_store.assign(_op="insert"),
            "items": pd.concat([moved_old.assign(_op="delete"), moved_new.assign(_op="insert"), new_items.assign(_op="insert")]),
            "pos": pd.concat([inserts.assign(_op="insert"), victims.assign(_op="delete")], ignore_index=True),
        }


def _money(cents: int):
    from decimal import Decimal

    return Decimal(int(cents)) / 100
