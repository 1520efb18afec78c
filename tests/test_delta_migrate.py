"""nightshift migrate-lake: a lake of the earlier format (versioned Parquet folders under lake/base/, one laid
out by month, switched by lake/base/_state.json) becomes Delta tables once; the nights after it run on the
Delta lake and equal the recomputation."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import ARROW, COLUMNS, FIGURE_1, BatchGenerator, Model, make_project, write_changes
from nightshift.config import load_project
from nightshift.cycle import Cycle
from nightshift.errors import ConfigError, SchemaError
from nightshift.migrate import migrate_lake
from nightshift.oracle import bag, duckdb_base
from runtime.lake import Lake


def _old_lake(root: Path, tables: dict[str, list[tuple]], applied: tuple[str, ...]) -> None:
    """The earlier format as its apply-base wrote it: pos laid out by month of its date."""
    base = root / "lake" / "base"
    version = f"v-{applied[-1]}"
    for t, rows in tables.items():
        folder = base / t / version
        data = pa.Table.from_pydict({c: [r[i] for r in rows] for i, c in enumerate(COLUMNS[t])}, schema=ARROW[t])
        if t != "pos":
            folder.mkdir(parents=True)
            pq.write_table(data, folder / "part-00000.parquet")
            continue
        months = Counter(r[2].strftime("%Y-%m") if r[2] else None for r in rows)
        for m in months:
            part = folder / f"__ns_part={m or '__HIVE_DEFAULT_PARTITION__'}"
            part.mkdir(parents=True)
            keep = [i for i, r in enumerate(rows) if (r[2].strftime("%Y-%m") if r[2] else None) == m]
            pq.write_table(data.take(keep), part / "part-00000.parquet")
        (folder / "_partition.json").write_text(json.dumps({"column": "date", "by": "month"}))
    (base / "_state.json").write_text(json.dumps({"applied": list(applied), "versions": {t: version for t in tables}}))


def test_an_old_lake_converts_once_and_its_nights_continue(spark, tmp_path, capsys):
    root = make_project(tmp_path / "proj", FIGURE_1)
    model = Model()
    gen = BatchGenerator(11, model)
    first = gen.initial()
    model.apply(first)
    write_changes(root, "b0000", first)  # the batch the earlier lake applied
    _old_lake(root, model.tables, ("b0000",))
    project = load_project(root)
    # before the conversion, a night or status refuses the lake, naming the command (never reads it as empty)
    from nightshift.cli import main
    assert main(["status", "--project", str(root)]) != 0
    refused = capsys.readouterr().err
    assert "lake of the earlier format" in refused
    assert f"nightshift migrate-lake --project {root}" in refused  # the command as the user runs it
    with pytest.raises(SchemaError, match="nightshift migrate-lake"):
        Lake(root / "lake").state()
    done = migrate_lake(project, spark)
    assert done.applied == ("b0000",) and done.tables == {t: len(rows) for t, rows in model.tables.items()}
    lake = Lake(root / "lake")
    assert not (root / "lake" / "base").exists()
    assert lake.state().applied == ("b0000",) and lake.state().partitions == {"pos": "date"}
    assert migrate_lake(project, spark).already  # once
    cycle = Cycle(load_project(root), spark=spark, progress=lambda _: None)
    con = duckdb_base(cycle.lake, cycle.plan.schema)
    assert {t: bag(con.execute(f'SELECT {", ".join(COLUMNS[t])} FROM "{t}"').fetchall()) for t in COLUMNS} == \
        {t: bag(rows) for t, rows in model.tables.items()}
    con.close()
    cycle.materialize()
    for batch in ("b0001", "b0002"):
        changes = gen.night()
        write_changes(root, batch, changes)
        model.apply(changes)
        cycle.run(batch)
        served = {v.name: bag(cycle.warehouse.read_view(v)) for v in cycle.plan.views}
        assert served == model.recompute(FIGURE_1), batch
    cycle.close()


def test_a_lake_without_the_earlier_format_is_not_converted(spark, tmp_path):
    root = make_project(tmp_path / "proj", FIGURE_1)
    with pytest.raises(ConfigError, match="no lake of the earlier format"):
        migrate_lake(load_project(root), spark)


def test_the_command_starts_no_spark_when_there_is_nothing_to_convert(tmp_path, capsys):
    from nightshift.cli import main

    root = make_project(tmp_path / "proj", FIGURE_1)
    assert main(["migrate-lake", "--project", str(root)]) == 1
    assert "no lake of the earlier format" in capsys.readouterr().err
    Lake(root / "lake").write_state(Lake(root / "lake").state())
    assert main(["migrate-lake", "--project", str(root)]) == 0
    assert "already a lake of Delta tables" in capsys.readouterr().out
