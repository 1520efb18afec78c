"""The retail example's nights as a warehouse team receives them: a nightly full extract of every
table (the snapshot night) and a Debezium change feed from PostgreSQL (the CDC night), for `nightshift
capture` to turn into change batches. `nightshift demo` runs both after the example's hand-written nights.

    sources/extracts/<batch>/pos/part-*.parquet, items.parquet, stores.csv     the snapshot night
    sources/cdc/<table>/<batch>.json                                          the CDC night, a line per event

The feed is what Debezium's JSON converter writes with decimal.handling.mode=string: DATE as days since the
epoch; `stores` with the schema/payload envelope; `items` as under REPLICA IDENTITY DEFAULT (an update
carries no before image: capture takes the old row from the base); `pos`, which has no primary key, under
REPLICA IDENTITY FULL (a delete carries the whole row).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nightshift.capture import Source
from nightshift.example import EPOCH, SCHEMAS, RetailGenerator, batch_id, init_project

KEYS = {"stores": "storeID", "items": "itemID"}


@dataclass(frozen=True)
class SourceNight:
    batch: str
    kind: str  # snapshot | cdc
    sources: tuple[Source, ...]


def init_demo(target: Path, rows: int, nights: int, seed: int = 7) -> tuple[list[str], list[SourceNight]]:
    """init_project's retail example (the same batches for the same seed), then two more nights landed as
    sources: a full extract of every table, and a Debezium feed of every table. The sources' paths are
    absolute (a relative one in nightshift.toml would be read relative to the project)."""
    target = Path(target).resolve()
    init_project(target, None, 0)
    gen = RetailGenerator(seed)
    ids = gen.write(target / "lake", rows, nights)
    changes = max(100, rows // 1000)
    return ids, [snapshot_night(gen, target, nights + 1, changes), cdc_night(gen, target, nights + 2, changes)]


def _arrow(table: str, frame: pd.DataFrame) -> pa.Table:
    schema = pa.schema([f for f in SCHEMAS[table] if f.name != "_op"])
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)


def snapshot_night(gen: RetailGenerator, root: Path, night: int, changes: int) -> SourceNight:
    """The tables at the end of the night, extracted whole: pos as Parquet parts, items as Parquet, stores as CSV."""
    batch = batch_id(gen.days + night)
    gen.night(night, changes)
    folder = root / "sources" / "extracts" / batch
    (folder / "pos").mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(np.array_split(np.arange(len(gen.pos)), max(1, len(gen.pos) // 500_000))):
        pq.write_table(_arrow("pos", gen.pos.iloc[chunk]), folder / "pos" / f"part-{i:05d}.parquet")
    pq.write_table(_arrow("items", gen.items), folder / "items.parquet")
    gen.stores.to_csv(folder / "stores.csv", index=False)
    paths = {"stores": folder / "stores.csv", "items": folder / "items.parquet", "pos": folder / "pos"}
    return SourceNight(batch, "snapshot", tuple(Source(t, "snapshot", str(p)) for t, p in paths.items()))


def cdc_night(gen: RetailGenerator, root: Path, night: int, changes: int) -> SourceNight:
    """The night's changes as Debezium events, in commit (lsn) order per table."""
    batch = batch_id(gen.days + night)
    frames = gen.night(night, changes)
    lsn = 24_000_000 + night * 1_000_000
    sources = []
    for table, frame in frames.items():
        lines = [json.dumps(e) for e in _events(table, _arrow(table, frame).to_pylist(), list(frame["_op"]), lsn)]
        path = root / "sources" / "cdc" / table / f"{batch}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        sources.append(Source(table, "cdc", str(path)))
    return SourceNight(batch, "cdc", tuple(sources))


def _events(table: str, rows: list[dict], ops: list[str], lsn: int) -> list[dict]:
    """pos (no key): a create per insert, a delete with the whole row per delete. stores and items: a key both
    deleted and inserted is an update (stores with its full before image, items with none), a key only
    inserted a create, a key only deleted a delete whose before image holds the key alone."""
    key = KEYS.get(table)
    if key is None:
        return [_event(table, "c", None, r, lsn + i) if op == "insert" else _event(table, "d", r, None, lsn + i)
                for i, (r, op) in enumerate(zip(rows, ops))]
    old = {r[key]: r for r, op in zip(rows, ops) if op == "delete"}
    new = {r[key]: r for r, op in zip(rows, ops) if op == "insert"}
    events = []
    for k in dict.fromkeys(r[key] for r in rows):  # the keys in the order they first appear
        if k in old and k in new:
            events.append(_event(table, "u", old[k] if table == "stores" else None, new[k], lsn + len(events)))
        elif k in new:
            events.append(_event(table, "c", None, new[k], lsn + len(events)))
        else:
            events.append(_event(table, "d", {c: (v if c == key else None) for c, v in old[k].items()}, None, lsn + len(events)))
    return events


def _event(table: str, op: str, before: dict | None, after: dict | None, lsn: int) -> dict:
    payload = {"before": _image(before), "after": _image(after), "op": op, "ts_ms": 1_767_225_600_000 + lsn % 1000,
               "source": {"connector": "postgresql", "db": "retail", "schema": "public", "table": table.lower(),
                          "lsn": lsn, "ts_ms": 1_767_225_600_000 + lsn % 1000, "snapshot": "false"}}
    if table != "stores":
        return payload
    fields = [{"type": "int32" if f.name == KEYS["stores"] else "string", "optional": f.name != KEYS["stores"], "field": f.name.lower()}
              for f in SCHEMAS["stores"] if f.name != "_op"]
    value = {"type": "struct", "fields": fields, "optional": True, "name": "retail.public.stores.Value"}
    schema = {"type": "struct", "name": "retail.public.stores.Envelope", "optional": False, "fields": [
        {**value, "field": "before"}, {**value, "field": "after"}, {"type": "string", "optional": False, "field": "op"}]}
    return {"schema": schema, "payload": payload}


def _image(row: dict | None) -> dict | None:
    """A row as Debezium writes it: PostgreSQL's lower-case names, DATE as days since the epoch, DECIMAL as text."""
    if row is None:
        return None
    out = {}
    for k, v in row.items():
        if isinstance(v, dt.date):
            v = (v - EPOCH).days
        elif isinstance(v, Decimal):
            v = str(v)
        out[k.lower()] = v
    return out
