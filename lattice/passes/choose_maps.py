"""Per view, once per plan: keep it over a map of its fact table, or over the fact table itself.

A view joining a dimension table re-aggregates the fact rows of every changed dimension key on a night that
changes the dimension: without a map, that reads the fact table. Over a map (paper 004's higher-order delta
map: the fact table grouped by what the view reads of it, kept in the lake from the fact's changes) it reads
the map's lake copy instead. The price is paid every night: the map's changed groups are written to its copy,
and the view is one propagate level further from the batch.

Measured on the retail example (bench/NO_SCANS_DELTA.md at 10 million rows of pos, bench/100M/NO_SCANS_DELTA.md
at 100 million; three maps of 100 to 100,000 rows): maps made a night of inserts 2.7 to 3 s longer and a night
changing the dimensions 7 s shorter at 10 million rows and 55 s shorter at 100 million. At 10 million they pay
back only if the dimensions change every third night; at 100 million, every eighteenth. So the plan keeps a view
over a map when its fact table is declared to hold at least MAP_ROWS rows ([statistics]; the lake's own sizes,
shown by `nightshift plan`, say what to declare) and the map is estimated at most 1/MAP_SHARE of it (the
estimate of choose_extremes.auxiliary_rows: the distinct combinations of its group keys). Like every choice of
the plan it rests on declared numbers, never on the data, so it is the same on every machine and every night.
[views] <name> = "map" keeps a view over a map at any size, "delta" never.
"""

from __future__ import annotations

from lattice.ir import View
from lattice.passes.choose_parents import Statistics

# a fact table declared at least this large: a map pays when its dimensions change every few weeks
MAP_ROWS = 50_000_000
# the map read instead of the fact table on a night changing a dimension: at most a tenth of it
MAP_SHARE = 10
# how the reason of a view kept over a map begins (by [views] "map" or by this choice)
MAP_REASON = "kept over the map "


def large_fact(fact: str, stats: Statistics) -> bool:
    """Whether [statistics] declares `fact` large enough for a map (undeclared: the default, 1,000,000 rows)."""
    return (stats.rows_of(fact) or 0) >= MAP_ROWS


def prefer_map(map_rows: int, fact_rows: int) -> bool:
    return fact_rows >= MAP_ROWS and map_rows * MAP_SHARE <= fact_rows


def over_map(view: View) -> bool:
    """Whether the plan keeps `view` over a map of its fact table ([views] "map", or the plan's choice)."""
    return view.mode == "auxiliary" and view.reason.startswith(MAP_REASON)
