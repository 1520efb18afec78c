"""Regular expressions, month and day names, epochs, part differences and PostgreSQL's initcap, written
in the warehouse's own SQL as group keys of kept views, night after night equal to recomputation: the
warehouse's rows recomputed from scratch by a model over the same base rows (DuckDB, with the
warehouse's meaning written out for a PostgreSQL project)."""

from __future__ import annotations

import pytest

VIEWS = {
    "duckdb": {
        "names": "CREATE VIEW names AS SELECT strftime(date, '%a') AS dy, regexp_replace(category, '[0-9]', '#') AS "
                 "kind, regexp_extract(category, '([0-9]+)', 1) AS cat_no, COUNT(*) AS n, SUM(qty) AS q "
                 "FROM pos JOIN items ON pos.itemID = items.itemID GROUP BY 1, 2, 3",
        "weeks": "CREATE VIEW weeks AS SELECT date_diff('week', DATE '2025-12-29', date) AS week_no, "
                 "EXTRACT(EPOCH FROM date) AS epoch, regexp_matches(city, '^s.*e') AS s_city, COUNT(*) AS n, "
                 "SUM(price) AS amount FROM pos, stores WHERE pos.storeID = stores.storeID GROUP BY 1, 2, 3",
    },
    "postgresql": {
        "names": "CREATE VIEW names AS SELECT to_char(date, 'Day') AS dy, initcap(city) AS town, "
                 "substring(category from '[0-9]+') AS cat_no, COUNT(*) AS n, SUM(qty) AS q "
                 "FROM pos JOIN stores ON pos.storeID = stores.storeID JOIN items ON pos.itemID = items.itemID "
                 "GROUP BY 1, 2, 3",
        "weeks": "CREATE VIEW weeks AS SELECT EXTRACT(EPOCH FROM date) AS epoch, "
                 "regexp_replace(city, 'ville$', 'town') AS place, COUNT(*) AS n, SUM(price) AS amount "
                 "FROM pos, stores WHERE pos.storeID = stores.storeID GROUP BY 1, 2",
    },
}
# the model's DuckDB, given PostgreSQL's meaning: Day padded to 9 characters, initcap of one lower-case
# word, substring's NULL when nothing matches, the epoch as a NUMERIC
MODEL = {
    "duckdb": VIEWS["duckdb"],
    "postgresql": {
        "names": "CREATE VIEW names AS SELECT rpad(strftime(date, '%A'), 9, ' ') AS dy, "
                 "upper(left(city, 1)) || lower(substring(city, 2)) AS town, "
                 "CASE WHEN regexp_matches(category, '[0-9]+') THEN regexp_extract(category, '[0-9]+') END AS cat_no, "
                 "COUNT(*) AS n, SUM(qty) AS q FROM pos JOIN stores ON pos.storeID = stores.storeID "
                 "JOIN items ON pos.itemID = items.itemID GROUP BY 1, 2, 3",
        "weeks": "CREATE VIEW weeks AS SELECT CAST(epoch(date) AS DECIMAL(38,6)) AS epoch, "
                 "regexp_replace(city, 'ville$', 'town') AS place, COUNT(*) AS n, SUM(price) AS amount "
                 "FROM pos, stores WHERE pos.storeID = stores.storeID GROUP BY 1, 2",
    },
}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_new_functions_as_group_keys_equal_recomputation_night_after_night(tmp_path, spark, quiet, warehouse_url,
                                                                          backend):
    from harness import make_project, nights_equal_recomputation

    from nightshift.config import load_project
    from nightshift.cycle import Cycle

    root = make_project(tmp_path / "p", VIEWS[backend], url=warehouse_url(backend, "functions_nights"))
    cycle = Cycle(load_project(root), spark=spark, progress=quiet)
    assert {v.name: v.mode for v in cycle.plan.views} == {"names": "delta", "weeks": "delta"}, \
        [(v.name, v.reason) for v in cycle.plan.views]
    model = nights_equal_recomputation(cycle, root, MODEL[backend], 31, f"{backend}, ", nights=2)
    served = {r[0] for r in cycle.warehouse.read_view(cycle.plan.view("names")) if r[0] is not None}
    assert served and all(len(d) == (3 if backend == "duckdb" else 9) for d in served), served
    assert model.tables["pos"]
    cycle.close()
