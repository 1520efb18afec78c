"""The nested mode (paper 000): a view over another summary view, kept from the inner view's changes.

An incremental view V that other views read becomes a table of the schema: its served rows (the
declared columns, HAVING applied), keyed by its group keys, with a foreign key wherever a group key
is a foreign key of the base (or a dimension's key). An outer view W over V (optionally joined to
dimensions through those keys) is then an ordinary delta-mode view over that table: its change set
is V's summary-delta expressed as updates (000 §6, Figure 5: for every changed group of V its old
served row deleted and its new one inserted), computed by propagate from sd_V and the lake's copy of
V (runtime: the Delta table lake/tables/<V>/), whose version apply-base records with the base. MIN/MAX of an inner aggregate
under decreases is recomputed for the groups the 4.3 test picks (000 §5's C_i: the extreme deleted
or lowered and not re-established) from that copy, never from the base.
"""

from __future__ import annotations

from lattice.ir import Column, ForeignKey, Schema, Table, View

_OUTPUT_TYPES = {"count_star": "BIGINT", "count": "BIGINT", "avg": "DOUBLE"}


def view_table(view: View, schema: Schema) -> Table:
    """The served rows of incremental view `view` as a table other views read."""
    keys = {k.name: k for k in view.keys}
    stored = {s.column: s for s in view.stored}
    columns, fks = [], []
    for o in view.outputs:
        if o.kind == "key":
            k = keys[o.source]
            base = None if k.ref.is_expression else schema.table(k.ref.table)
            nullable = True if base is None else base.column(k.ref.column).nullable
            columns.append(Column(o.name, k.type, nullable))
            if base is not None:
                fks += _references(o.name, base, k.ref.column)
        else:
            columns.append(Column(o.name, _OUTPUT_TYPES.get(o.kind) or stored[o.source].type, o.kind not in ("count_star", "count")))
    declared = [o.name for o in view.outputs if o.kind == "key"]
    primary = tuple(declared) if len(declared) == len(view.keys) and len(set(o.source for o in view.outputs
                                                                              if o.kind == "key")) == len(view.keys) else ()
    return Table(view.name, tuple(columns), primary, tuple(fks), view=view.name)


def _references(name: str, table: Table, column: str) -> list[ForeignKey]:
    """A group key that is a base column referencing a dimension (a fact's foreign key), or a
    dimension's own one-column key, references that dimension from the view's table too."""
    out = [ForeignKey((name,), fk.ref_table, fk.ref_columns) for fk in table.foreign_keys
           if len(fk.columns) == 1 and fk.columns[0].lower() == column.lower()]
    if not out and table.primary_key == (column,):
        out.append(ForeignKey((name,), table.name, (column,)))
    return out


def with_view_tables(schema: Schema, views: list[View]) -> Schema:
    """The schema plus the tables of these incremental views (those another view reads)."""
    for v in views:  # in plan order: a view's table may reference the table of a view it reads
        if schema.table(v.name) is None:
            schema = Schema(schema.tables + (view_table(v, schema),), schema.file)
    return schema
