"""Test harness: small projects, an independent model of the base tables, and random change batches.

The model is the oracle's ground truth: it applies each batch to plain Python lists (bag semantics,
independently of apply-base) and DuckDB evaluates every view's SQL over it. Nothing here shares
code with propagate or refresh.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path

import duckdb
import sqlglot
import pyarrow as pa
import pyarrow.parquet as pq

from nightshift.oracle import bag

SCHEMA_SQL = """
CREATE TABLE stores (storeID INTEGER PRIMARY KEY, city VARCHAR, region VARCHAR);
CREATE TABLE items (itemID INTEGER PRIMARY KEY, category VARCHAR, weight DOUBLE);
CREATE TABLE pos (
    storeID INTEGER NOT NULL REFERENCES stores(storeID),
    itemID  INTEGER NOT NULL REFERENCES items,
    date    DATE,
    qty     INTEGER,
    price   DECIMAL(8,2)
);
"""

ARROW = {
    "stores": pa.schema([("storeID", pa.int32()), ("city", pa.string()), ("region", pa.string())]),
    "items": pa.schema([("itemID", pa.int32()), ("category", pa.string()), ("weight", pa.float64())]),
    "pos": pa.schema(
        [("storeID", pa.int32()), ("itemID", pa.int32()), ("date", pa.date32()), ("qty", pa.int32()), ("price", pa.decimal128(8, 2))]
    ),
}
COLUMNS = {t: [f.name for f in s] for t, s in ARROW.items()}

FIGURE_1 = {
    "SID_sales": "CREATE VIEW SID_sales(storeID, itemID, date, TotalCount, TotalQuantity) AS SELECT storeID, itemID, date, COUNT(*) AS TotalCount, SUM(qty) AS TotalQuantity FROM pos GROUP BY storeID, itemID, date",
    "sCD_sales": "CREATE VIEW sCD_sales(city, date, TotalCount, TotalQuantity) AS SELECT city, date, COUNT(*) AS TotalCount, SUM(qty) AS TotalQuantity FROM pos, stores WHERE pos.storeID = stores.storeID GROUP BY city, date",
    "SiC_sales": "CREATE VIEW SiC_sales(storeID, category, TotalCount, EarliestSale, TotalQuantity) AS SELECT storeID, category, COUNT(*) AS TotalCount, MIN(date) AS EarliestSale, SUM(qty) AS TotalQuantity FROM pos, items WHERE pos.itemID = items.itemID GROUP BY storeID, category",
    "sR_sales": "CREATE VIEW sR_sales(region, TotalCount, TotalQuantity) AS SELECT region, COUNT(*) AS TotalCount, SUM(qty) AS TotalQuantity FROM pos, stores WHERE pos.storeID = stores.storeID GROUP BY region",
}

EXTENDED = {
    "avg_price": "CREATE VIEW avg_price AS SELECT p.itemID, AVG(p.price) AS avg_price, COUNT(p.price) AS priced, MAX(p.qty) AS max_qty FROM pos p GROUP BY p.itemID",
    "revenue": "CREATE VIEW revenue AS SELECT s.region, i.category, SUM(p.qty * p.price) AS revenue, MIN(p.price) AS cheapest, MAX(p.date) AS last_sale, COUNT(*) AS n FROM pos p JOIN stores s ON p.storeID = s.storeID JOIN items i ON p.itemID = i.itemID GROUP BY s.region, i.category",
    "big_sales": "CREATE VIEW big_sales AS SELECT date, COUNT(qty) AS big, AVG(qty) AS avg_qty, SUM(qty) AS total FROM pos WHERE qty >= 3 GROUP BY date",
    "city_weight": "CREATE VIEW city_weight AS SELECT city, AVG(weight) AS avg_weight, MAX(weight) AS heaviest, COUNT(*) AS n FROM pos, stores, items WHERE pos.storeID = stores.storeID AND pos.itemID = items.itemID AND items.category <> 'c0' GROUP BY city, region",
}


def make_project(root: Path, views: dict[str, str], schema_sql: str = SCHEMA_SQL, url: str | None = None,
                 master: str = "local[2]", maintain: str | None = None) -> Path:
    """maintain: write [views] <name> = "<maintain>" for every view (e.g. "incremental": nights never
    trade a view's summary-delta for a recompute, so tests of the delta mode see it every night)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "sql" / "summaries").mkdir(parents=True, exist_ok=True)
    (root / "sql" / "schema.sql").write_text(schema_sql)
    for name, sql in views.items():
        (root / "sql" / "summaries" / f"{name}.sql").write_text(sql)
    settings = ""
    if maintain:
        names = [sqlglot.parse_one(sql).this for sql in views.values()]
        names = [n.this.name if isinstance(n, sqlglot.exp.Schema) else n.name for n in names]
        settings = "[views]\n" + "".join(f'{json.dumps(n)} = "{maintain}"\n' for n in names)
    (root / "nightshift.toml").write_text(
        f'[lake]\npath = "lake"\n[warehouse]\nurl = "{url or "duckdb:///warehouse.duckdb"}"\n'
        f'[spark]\nmaster = "{master}"\n[dependencies]\nstores = ["city -> region"]\n{settings}'
    )
    return root


PARTITIONED = '[lake]\npath = "lake"\npartition_by = { pos = "date" }\n'


def partition_pos(root: Path, on: bool = True) -> None:
    """Lay pos out by month of its date column ([lake] partition_by = { pos = "date" }), or (on=False) no longer."""
    toml = root / "nightshift.toml"
    text = toml.read_text()
    if on:
        toml.write_text(text.replace('[lake]\npath = "lake"\n', PARTITIONED))
    else:
        toml.write_text(text.replace(PARTITIONED, '[lake]\npath = "lake"\n'))


def project_url(root: Path) -> str:
    import tomllib

    return tomllib.loads((root / "nightshift.toml").read_text())["warehouse"]["url"]


def copy_project(src: Path, dst: Path, pg_schemas=None) -> Path:
    """Copy a project folder; a PostgreSQL warehouse is copied into a fresh schema (tables with their
    indexes, rows and serving views) and the copy's nightshift.toml points at it."""
    import shutil

    shutil.copytree(src, dst)
    url = project_url(src)
    if not url.startswith("postgresql"):
        return dst
    import sqlalchemy as sa

    new_url = pg_schemas(dst.name)
    old_schema, new_schema = (u.split("search_path%3D")[1] for u in (url, new_url))
    engine = sa.create_engine(new_url, poolclass=sa.pool.NullPool)
    with engine.begin() as c:
        tables = c.exec_driver_sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE'",
            (old_schema,),
        ).scalars().all()
        for t in tables:
            c.exec_driver_sql(f'CREATE TABLE "{t}" (LIKE "{old_schema}"."{t}" INCLUDING ALL)')
            c.exec_driver_sql(f'INSERT INTO "{t}" SELECT * FROM "{old_schema}"."{t}"')
        c.exec_driver_sql(f'SET LOCAL search_path = "{old_schema}"')
        views = c.exec_driver_sql(
            "SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'v'",
            (old_schema,),
        ).fetchall()
        c.exec_driver_sql(f'SET LOCAL search_path = "{new_schema}"')
        for name, definition in views:
            c.exec_driver_sql(f'CREATE VIEW "{name}" AS {definition}')
    engine.dispose()
    toml = dst / "nightshift.toml"
    toml.write_text(toml.read_text().replace(url, new_url))
    return dst


def write_changes(root: Path, batch: str, changes: dict[str, list[tuple[str, tuple]]]) -> None:
    """changes: table -> [(op, row)]; writes lake/changes/<table>/batch_id=<batch>/part-0.parquet."""
    for table, rows in changes.items():
        d = root / "lake" / "changes" / table / f"batch_id={batch}"
        d.mkdir(parents=True, exist_ok=True)
        cols = COLUMNS[table]
        data = {c: [r[i] for _, r in rows] for i, c in enumerate(cols)}
        data["_op"] = [op for op, _ in rows]
        schema = ARROW[table].append(pa.field("_op", pa.string()))
        pq.write_table(pa.Table.from_pydict(data, schema=schema), d / "part-0.parquet")


def run_nights(cycle, root: Path, gen: "BatchGenerator", model: "Model", nights: int) -> None:
    """Land and run the initial load plus `nights` random nights (batches b0000, b0001, ...),
    applying each to the model too."""
    for n in range(nights + 1):
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, f"b{n:04d}", changes)
        cycle.run(f"b{n:04d}")
        model.apply(changes)


def nights_equal_recomputation(cycle, root: Path, views: dict[str, str], seed: int, where: str = "",
                               nights: int = 2, days: int = 5) -> "Model":
    """The initial load and `nights` random nights (batches b0000, ...) through the whole cycle, the served
    views checked against the model's recomputation after each (sales over `days` days). Returns the model, at
    the last night."""
    model = Model()
    gen = BatchGenerator(seed, model, days)
    for n in range(nights + 1):
        batch = f"b{n:04d}"
        changes = gen.initial() if n == 0 else gen.night()
        write_changes(root, batch, changes)
        cycle.run(batch)
        model.apply(changes)
        check_served(cycle, model, views, f"{where}batch {batch}")
    return model


def check_served(cycle, model: "Model", views: dict[str, str], where: str) -> None:
    """Every view the warehouse serves equals the model's recomputation of `views` (name -> SQL) from scratch."""
    from nightshift.oracle import bag

    expected = model.recompute(views)
    for view in cycle.plan.views:
        got = bag(cycle.warehouse.read_view(view))
        assert got == expected[view.name], (f"{where}, view {view.name}: served != recomputed\n"
                                            f"missing {expected[view.name] - got}\nextra {got - expected[view.name]}")


class Model:
    """The base tables as Python bags, changed by batches independently of nightshift."""

    def __init__(self):
        self.tables: dict[str, list[tuple]] = {t: [] for t in ARROW}

    def apply(self, changes: dict[str, list[tuple[str, tuple]]]) -> None:
        for table, rows in changes.items():
            current = self.tables[table]
            for op, row in rows:
                if op == "delete":
                    current.remove(row)
            current.extend(row for op, row in rows if op == "insert")

    def recompute(self, views: dict[str, str]) -> dict[str, Counter]:
        con = duckdb.connect()
        for t, rows in self.tables.items():
            cols = COLUMNS[t]
            arrow = pa.Table.from_pydict({c: [r[i] for r in rows] for i, c in enumerate(cols)}, schema=ARROW[t])
            con.register(f"_{t}", arrow)
            con.execute(f'CREATE TABLE "{t}" AS SELECT * FROM _{t}')
        pending = dict(views)  # views over views: create each once the views it reads exist
        while pending:
            made = [n for n, sql in pending.items() if _try(con, sql)]
            if not made:
                raise AssertionError(f"the model cannot create views {sorted(pending)}")
            for n in made:
                del pending[n]
        out = {}
        for name, sql in views.items():
            select = sqlglot.parse_one(sql, read="duckdb").expression.sql("duckdb")  # the view's own query
            out[name] = bag(con.execute(select).fetchall())
        con.close()
        return out


def _try(con, sql: str) -> bool:
    try:
        con.execute(sql)
        return True
    except duckdb.CatalogException:
        return False


class BatchGenerator:
    """Random nightly batches over a small domain, so groups collide, vanish and come back."""

    CITIES = [("springfield", "north"), ("shelbyville", "north"), ("ogdenville", "south"), (None, "south"), ("capital", None)]
    CATEGORIES = ["c0", "c1", "c2", None]

    def __init__(self, seed: int, model: Model, days: int = 5):
        self.r = random.Random(seed)
        self.model = model
        self.next_store, self.next_item = 1, 1
        self.days = days  # a sale's date: one of the days + 1 from 2026-01-01 on

    def _price(self):
        return None if self.r.random() < 0.1 else Decimal(self.r.randint(1, 999)) / 100

    def _sale(self, store=None, item=None):
        stores = [s[0] for s in self.model.tables["stores"]]
        items = [i[0] for i in self.model.tables["items"]]
        date = None if self.r.random() < 0.05 else dt.date(2026, 1, 1) + dt.timedelta(days=self.r.randint(0, self.days))
        qty = None if self.r.random() < 0.1 else self.r.randint(1, 6)
        return (store or self.r.choice(stores), item or self.r.choice(items), date, qty, self._price())

    def initial(self) -> dict:
        stores = [self._new_store() for _ in range(4)]
        items = [self._new_item() for _ in range(5)]
        self.model.tables["stores"] += [r for _, r in stores]  # temporarily, to draw sales
        self.model.tables["items"] += [r for _, r in items]
        sales = [("insert", self._sale()) for _ in range(40)]
        self.model.tables["stores"], self.model.tables["items"] = [], []
        return {"stores": stores, "items": items, "pos": sales}

    def _new_store(self):
        city, region = self.r.choice(self.CITIES)
        row = (self.next_store, city, region)
        self.next_store += 1
        return ("insert", row)

    def _new_item(self):
        row = (self.next_item, self.r.choice(self.CATEGORIES), None if self.r.random() < 0.2 else round(self.r.uniform(0.1, 9.9), 2))
        self.next_item += 1
        return ("insert", row)

    def night(self) -> dict:
        """One batch mixing the cases the differential test must cover."""
        r, pos = self.r, self.model.tables["pos"]
        kind = r.choice(["mixed", "mixed", "mixed", "empty", "group_gone", "min_row", "duplicates", "dimension", "reinsert"])
        changes: dict[str, list] = {"pos": []}
        if kind == "empty":
            return {"pos": []}
        if kind == "dimension":
            changes["stores"], changes["items"] = [], []
            if self.model.tables["stores"] and r.random() < 0.7:
                old = r.choice(self.model.tables["stores"])
                city, region = r.choice(self.CITIES)
                changes["stores"] += [("delete", old), ("insert", (old[0], city, region))]  # a store moves
            new = self._new_store()
            changes["stores"].append(new)
            if r.random() < 0.5 and self.model.tables["items"]:
                old = r.choice(self.model.tables["items"])
                changes["items"] += [("delete", old), ("insert", (old[0], r.choice(self.CATEGORIES), old[2]))]
            self.model.tables["stores"].append(new[1])
            changes["pos"] += [("insert", self._sale(store=new[1][0])) for _ in range(2 if r.random() < 0.5 else 0)]
            self.model.tables["stores"].remove(new[1])
            moved = {row[0] for op, row in changes["stores"]}
            sales = {s[0]: [p for p in pos if p[0] == s[0]] for s in self.model.tables["stores"] if s[0] not in moved}
            small = [s for s in self.model.tables["stores"] if s[0] in sales and len(sales[s[0]]) <= 6]
            if small:  # a store closes: its last sales go and its row is deleted (4.1.4)
                closed = r.choice(small)
                changes["stores"].append(("delete", closed))
                changes["pos"] += [("delete", p) for p in sales[closed[0]]]
                self.model.tables["stores"].remove(closed)  # tonight's other changes must not touch it
                for p in sales[closed[0]]:
                    pos.remove(p)
                try:
                    return self._fact_changes(kind, changes)
                finally:
                    self.model.tables["stores"].append(closed)  # Model.apply deletes them
                    pos.extend(sales[closed[0]])
        return self._fact_changes(kind, changes)

    def _fact_changes(self, kind: str, changes: dict) -> dict:
        r, pos = self.r, self.model.tables["pos"]
        victims: list[tuple] = []
        if kind == "group_gone" and pos:
            s, d = r.choice(pos)[0], r.choice(pos)[2]
            victims = [row for row in pos if row[0] == s and row[2] == d] or [r.choice(pos)]
        elif kind == "min_row" and pos:
            item = r.choice(pos)[1]
            rows = [row for row in pos if row[1] == item and row[2] is not None]
            if rows:
                low = min(row[2] for row in rows)
                victims = [row for row in rows if row[2] == low][:1]
        pool = list(pos)
        for v in victims:
            pool.remove(v)
        r.shuffle(pool)
        victims += pool[: r.randint(0, min(6, len(pool)))]
        changes["pos"] += [("delete", v) for v in victims]
        inserts = [("insert", self._sale()) for _ in range(r.randint(0, 8))]
        if kind == "duplicates" and pos:
            dup = r.choice(pos)
            inserts += [("insert", dup), ("insert", dup)]
        if kind == "reinsert" and victims:
            inserts += [("insert", v) for v in victims[: r.randint(1, len(victims))]]
        if r.random() < 0.3 and victims:
            old = victims[0]
            inserts.append(("insert", (old[0], old[1], old[2], (old[3] or 0) + 1, old[4])))  # an update
        changes["pos"] += inserts
        return changes
