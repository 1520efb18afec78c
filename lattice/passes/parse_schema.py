"""Pass 1: sql/schema.sql -> Schema (tables, columns, primary keys, foreign keys)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from lattice import types
from lattice.errors import SchemaError
from lattice.ir import Column, ForeignKey, Schema, Table


def parse_schema(text: str, file: str = "sql/schema.sql") -> Schema:
    try:
        statements = [s for s in sqlglot.parse(text) if s is not None]
    except sqlglot.errors.ParseError as e:
        raise SchemaError(f"{file}: cannot parse: {_first_line(e)}") from None
    tables = []
    for stmt in statements:
        if not (isinstance(stmt, exp.Create) and str(stmt.args.get("kind", "")).upper() == "TABLE"):
            raise SchemaError(f"{file}: only CREATE TABLE statements are allowed, found: {stmt.sql()[:80]}")
        tables.append(_table(stmt, file))
    names = [t.name.lower() for t in tables]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SchemaError(f"{file}: table {sorted(dup)[0]} is declared twice")
    return Schema(tables=_resolve_references(Schema(tuple(tables), file)), file=file)


def _table(stmt: exp.Create, file: str) -> Table:
    target = stmt.this
    name = target.this.name
    columns, pk, fks = [], [], []
    for item in target.expressions:
        if isinstance(item, exp.ColumnDef):
            col_type = types.from_datatype(item.args["kind"]) if item.args.get("kind") else None
            if col_type is None:
                raise SchemaError(f"{file}: table {name}, column {item.name}: unsupported type {item.args.get('kind')}")
            not_null = False
            for c in item.constraints:
                kind = c.args.get("kind")
                if isinstance(kind, exp.NotNullColumnConstraint):
                    not_null = True
                elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
                    pk.append(item.name)
                    not_null = True
                elif isinstance(kind, exp.Reference):
                    fks.append(_reference((item.name,), kind))
            columns.append(Column(item.name, col_type, nullable=not not_null))
        elif isinstance(item, exp.PrimaryKey):
            pk.extend(i.name for i in item.expressions)
        elif isinstance(item, exp.ForeignKey):
            fks.append(_reference(tuple(i.name for i in item.expressions), item.args["reference"]))
    pk_low = {p.lower() for p in pk}
    columns = [Column(c.name, c.type, c.nullable and c.name.lower() not in pk_low) for c in columns]
    return Table(name=name, columns=tuple(columns), primary_key=tuple(pk), foreign_keys=tuple(fks))


def _reference(cols: tuple[str, ...], ref: exp.Reference) -> ForeignKey:
    target = ref.this
    if isinstance(target, exp.Schema):
        return ForeignKey(cols, target.this.name, tuple(i.name for i in target.expressions))
    return ForeignKey(cols, target.name, ())


def _resolve_references(schema: Schema) -> tuple[Table, ...]:
    """Check keys and FKs; an FK without column list references the target's primary key."""
    fixed = []
    for t in schema.tables:
        for c in t.primary_key:
            if t.column(c) is None:
                raise SchemaError(f"{schema.file}: table {t.name}: PRIMARY KEY column {c} is not a column of {t.name}")
        fks = []
        for fk in t.foreign_keys:
            ref = schema.table(fk.ref_table)
            if ref is None:
                raise SchemaError(f"{schema.file}: table {t.name}: FOREIGN KEY references unknown table {fk.ref_table}")
            ref_cols = fk.ref_columns or ref.primary_key
            if len(ref_cols) != len(fk.columns):
                raise SchemaError(
                    f"{schema.file}: table {t.name}: FOREIGN KEY ({', '.join(fk.columns)}) does not match the key of {ref.name}"
                )
            for c in fk.columns:
                if t.column(c) is None:
                    raise SchemaError(f"{schema.file}: table {t.name}: FOREIGN KEY column {c} is not a column of {t.name}")
            for c in ref_cols:
                if ref.column(c) is None:
                    raise SchemaError(f"{schema.file}: table {t.name}: FOREIGN KEY references unknown column {ref.name}.{c}")
            fks.append(ForeignKey(fk.columns, ref.name, tuple(ref_cols)))
        fixed.append(fks)
    return tuple(Table(t.name, t.columns, t.primary_key, tuple(f)) for t, f in zip(schema.tables, fixed))


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__
