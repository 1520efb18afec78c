"""What `nightshift capture` records with each change batch it writes: a frozen value, kept as
lake/changes/<table>/batch_id=<ID>/_capture.json next to the batch's Parquet file.

The record travels with the batch: capture writes both into one temporary folder and renames it into
place, so an append source's watermark and a Delta source's version advance exactly when its batch appears
(never one without the other). Change-batch readers glob *.parquet only, so the record is invisible to propagate.
"""

from __future__ import annotations

from dataclasses import dataclass

CAPTURE_VERSION = 1
KINDS = ("snapshot", "cdc", "append", "delta")


@dataclass(frozen=True)
class Watermark:
    """The newest value of an append source's since-column captured so far (None: nothing yet), as Spark
    writes it as a string; `type` is the Spark SQL type to compare it in."""

    column: str
    type: str
    value: str | None = None


@dataclass(frozen=True)
class CaptureRecord:
    table: str
    batch: str
    kind: str  # snapshot | cdc | append | delta
    sources: tuple[str, ...]  # the files read, in the order they were read (a Delta source: its table's folder)
    inserted: int
    deleted: int
    base: str | None  # the last applied batch the capture compared with (None: empty lake)
    watermark: Watermark | None = None  # append sources only
    version: int = CAPTURE_VERSION
    # a Delta source: the table's version this batch brings the lake up to (its change data feed after the
    # previous batch's version, up to and including this one), and the version the batch started after
    # (None: the first capture, the table compared whole with the base)
    delta_version: int | None = None
    delta_since: int | None = None
