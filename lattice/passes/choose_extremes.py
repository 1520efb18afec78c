"""Per view, once per plan: where exact MIN/MAX of a group that lost rows comes from.

A night that deletes a group's extreme needs the group's new MIN/MAX, which its summary-delta cannot
give (paper 001, Table 2). Two sources are exact:

    base       the fact table (and the dimensions the view joins), read for the groups that lost rows:
               every fact row, on every night with deletes; nothing to keep on other nights
    auxiliary  the view's join grouped by its groups and its MIN/MAX arguments (paper 002, CReaM; its
               values with their multiplicities), kept in the lake beside the base: propagate reads it
               for the groups that lost rows and apply-base rewrites it, every night

so the auxiliary view pays when it is much smaller than the fact table. Its size is estimated as the
D-lattice's cost model (5.5) estimates a summary table's: the distinct combinations of its group keys
and arguments (a foreign key takes as many values as its dimension has rows, a DATE 365, ...; keys
and dependencies drop what other columns determine), at most the fact's rows. The numbers are
nightshift.toml [statistics] (rows of a table, distinct values of a column) where declared, else the
cost model's defaults, so the choice is the same on every machine and every night: the plan's
fingerprint covers it. The auxiliary route is chosen when the estimate is at most 1/AUX_SHARE of the
fact's rows; `nightshift plan` prints both numbers and the choice; [views] <name> = "auxiliary"
forces the auxiliary view, "delta" the base.
"""

from __future__ import annotations

from lattice.ir import FunctionalDependency, Lattice, Plan, Schema, View
from lattice.passes.choose_parents import Statistics, _Estimator
from lattice.passes.derives import node_of_view

# propagate reads the auxiliary view and apply-base reads and rewrites it on every night, about three
# of its rows against one fact row on a night with deletes; a margin for the nights without deletes
AUX_SHARE = 4


def auxiliary_rows(aux: View, schema: Schema, dependencies: tuple[FunctionalDependency, ...],
                   stats: Statistics) -> tuple[int, int, str]:
    """(estimated rows of the auxiliary view, rows of its fact table, what the estimate rests on)."""
    est = _Estimator(Lattice(nodes=()), Plan(schema=schema, views=(aux,), dependencies=dependencies), stats)
    node = node_of_view(aux)
    attrs = est.minimal_attributes(node)
    fact, fact_basis = est.table_rows(aux.fact)
    if not attrs:
        return 1, fact, "no group keys or arguments: one row"
    domain, basis = est.domain(attrs, node)
    return min(domain, fact), fact, f"{basis}; {aux.fact} {fact:,} rows ({fact_basis})"


def prefer_auxiliary(aux_rows: int, fact_rows: int) -> bool:
    return aux_rows * AUX_SHARE <= fact_rows
