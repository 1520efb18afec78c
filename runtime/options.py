"""The method's switches for a night, read once (from the environment and nightshift.toml) into a value.

The defaults are the paper's method in full; the switches exist so that the bench can measure each
optimization against its absence. Nothing else reads these environment variables: the value is part
of the night's plan (runtime.night) and of its manifest, so what ran is recorded.

    NIGHTSHIFT_LATTICE=0            every summary-delta straight from the change set (no D-lattice, 5.5)
    NIGHTSHIFT_PREAGGREGATE=0       no pre-aggregation of the fact changes before the joins (4.1.3)
    NIGHTSHIFT_WEAK_MINIMALITY=0    exact MIN/MAX for every group that lost rows (not 4.3's tighter test)
    NIGHTSHIFT_LATTICE_STATS_ROWS   measure summary-delta sizes for batches of this many change rows or more
    NIGHTSHIFT_REFRESH_OPT=0        refresh every table by the plain Figure 8 path (no 4.3 paths)
    NIGHTSHIFT_APPLY_FROM_TABLES=0  nightshift apply builds every view from the base (not from a summary table)
    NIGHTSHIFT_REWRITE_BELOW        a lake table with less live data than this many bytes is written anew by
                                    apply-base (default 8 MiB); a larger one takes deletes as deletion vectors
                                    and inserts as appends; 0: every table the larger way
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from runtime.errors import ConfigError

# the Spark master a project's steps and a Spark Connect server run on unless told ([spark] master, --master)
SPARK_MASTER = "local[2]"
# the port of a Spark Connect server: Spark's own default, the one a URL sc://host without a port means
CONNECT_PORT = 15002
DEFAULT_STATS_ROWS = 50_000
# Below this much live Parquet, writing a lake table anew is one write job, where deleting by deletion
# vectors is a DELETE or MERGE of its own (a dozen jobs, about 1-2 s whatever the table's size).
DEFAULT_REWRITE_BELOW = 8 << 20


@dataclass(frozen=True)
class Options:
    lattice: bool = True
    preaggregate: bool = True
    weak_minimality: bool = True
    stats_rows: int = DEFAULT_STATS_ROWS
    refresh_optimize: bool = True
    apply_from_tables: bool = True  # nightshift apply may build a view from a summary table that stays
    rewrite_below: int = DEFAULT_REWRITE_BELOW  # bytes: apply-base writes a smaller lake table anew
    new_keys: tuple[str, ...] = ()  # [refresh] new_keys: views whose summary-delta groups are all new (4.3)

    @staticmethod
    def read(env: Mapping[str, str] = os.environ, new_keys: tuple[str, ...] = ()) -> "Options":
        return Options(
            lattice=_switch(env, "NIGHTSHIFT_LATTICE"),
            preaggregate=_switch(env, "NIGHTSHIFT_PREAGGREGATE"),
            weak_minimality=_switch(env, "NIGHTSHIFT_WEAK_MINIMALITY"),
            stats_rows=_count(env, "NIGHTSHIFT_LATTICE_STATS_ROWS", DEFAULT_STATS_ROWS),
            refresh_optimize=_switch(env, "NIGHTSHIFT_REFRESH_OPT"),
            apply_from_tables=_switch(env, "NIGHTSHIFT_APPLY_FROM_TABLES"),
            rewrite_below=_count(env, "NIGHTSHIFT_REWRITE_BELOW", DEFAULT_REWRITE_BELOW, "bytes"),
            new_keys=tuple(new_keys),
        )


def _switch(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "1").strip()
    if value not in ("0", "1"):
        raise ConfigError(f"environment variable {name}={value!r}: use 1 (on, the default) or 0 (off)")
    return value == "1"


def _count(env: Mapping[str, str], name: str, default: int, unit: str = "rows") -> int:
    value = env.get(name)
    if value is None:
        return default
    if not value.strip().isdigit():
        raise ConfigError(f"environment variable {name}={value!r}: use a whole number of {unit}")
    return int(value)
