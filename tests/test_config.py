"""nightshift.toml and the environment, read once into a Project and its Options (runtime/options.py)."""

from __future__ import annotations

import pytest

from harness import FIGURE_1, make_project
from nightshift.config import load_project
from nightshift.errors import ConfigError
from runtime.options import Options
from warehouse.store import mask


def test_a_libpq_keyword_string_is_refused_without_echoing_its_password(tmp_path, monkeypatch):
    root = make_project(tmp_path / "p", FIGURE_1, url="host=db.example.com user=ns password=s3cr3t-pw dbname=w")
    with pytest.raises(ConfigError) as e:
        load_project(root)
    assert "s3cr3t-pw" not in str(e.value) and "password=***" in str(e.value)
    assert "not a SQLAlchemy URL" in str(e.value) and "nightshift.toml" in str(e.value)
    monkeypatch.setenv("NIGHTSHIFT_WAREHOUSE_URL", "host=db password='quoted secret' user=ns")
    with pytest.raises(ConfigError) as e:
        load_project(root)
    assert "quoted secret" not in str(e.value)


@pytest.mark.parametrize("url,secret", [
    ("postgresql+psycopg://ns:pw1@db/w", "pw1"),
    ("postgresql+psycopg://ns@db/w?password=pw2&sslmode=require", "pw2"),
    ("host=db password=pw3", "pw3"),
    ("dbname=w PASSWORD = 'pw 4' user=x", "pw 4"),
])
def test_mask_hides_every_spelling_of_a_password(url, secret):
    assert secret not in mask(url) and "***" in mask(url)


def test_options_are_read_once_from_the_environment_and_nightshift_toml(tmp_path, monkeypatch):
    root = make_project(tmp_path / "p", FIGURE_1)
    (root / "nightshift.toml").write_text((root / "nightshift.toml").read_text() + '[refresh]\nnew_keys = ["SID_sales"]\n')
    monkeypatch.setenv("NIGHTSHIFT_LATTICE", "0")
    monkeypatch.setenv("NIGHTSHIFT_LATTICE_STATS_ROWS", "10")
    project = load_project(root)
    assert project.options == Options(lattice=False, stats_rows=10, new_keys=("SID_sales",))
    monkeypatch.setenv("NIGHTSHIFT_LATTICE", "1")  # read once: a loaded project keeps its options
    assert project.options.lattice is False
    monkeypatch.setenv("NIGHTSHIFT_PREAGGREGATE", "no")
    with pytest.raises(ConfigError, match="NIGHTSHIFT_PREAGGREGATE='no': use 1 .* or 0"):
        load_project(root)


def test_statistics_are_read_as_rows_of_tables_and_distinct_values_of_columns(tmp_path):
    """[statistics]: sizes the plan estimates with (the MIN/MAX route, lattice/passes/choose_extremes.py)."""
    root = make_project(tmp_path / "p", FIGURE_1)
    toml = (root / "nightshift.toml").read_text()
    (root / "nightshift.toml").write_text(toml + "[statistics]\npos = 10_000_000\nstores = 100\n"
                                       "items = { rows = 1000, category = 10 }\n")
    project = load_project(root)
    assert project.statistics == (("pos", 10_000_000), ("stores", 100), ("items", 1000), ("items.category", 10))
    assert project.plan.view("SiC_sales").mode == "auxiliary"  # 100 stores x 10 categories x 365 days < 10M / 4
    for bad, message in [('pos = "big"', r"\[statistics\] pos must be a positive whole number .* got 'big'"),
                         ("items = { category = -1 }", r"\[statistics\] items\.category must be a positive"),
                         ('shops = 5', r"\[statistics\] shops = 5: no table shops in the schema")]:
        (root / "nightshift.toml").write_text(toml + f"[statistics]\n{bad}\n")
        with pytest.raises(ConfigError, match=message):
            load_project(root).plan


def test_plan_names_the_min_max_routes_the_lakes_sizes_would_change(tmp_path):
    """nightshift plan: with the lake's measured table sizes in place of [statistics], which views would take
    their deleted MIN/MAX from elsewhere (Project.routes_with_sizes; the CLI reads the sizes from Parquet footers).
    20 million rows of pos: under the size from which the plan keeps views over maps (test_maps)."""
    root = make_project(tmp_path / "p", FIGURE_1)
    project = load_project(root)
    assert project.plan.view("SiC_sales").mode == "delta"  # the defaults: pos 1,000,000 rows
    assert project.routes_with_sizes({"pos": 20_000, "stores": 100, "items": 1000}) == []
    big = project.routes_with_sizes({"pos": 20_000_000, "stores": 100, "items": 1000})
    assert len(big) == 1 and big[0].startswith("SiC_sales: with the lake's sizes the plan would keep its MIN/MAX in "
                                                "auxiliary mode (MIN kept through the auxiliary view")
    assert "declare them in nightshift.toml [statistics] (pos = 20000000, stores = 100, items = 1000)" in big[0]
    toml = (root / "nightshift.toml").read_text()
    (root / "nightshift.toml").write_text(toml + "[statistics]\npos = 20_000_000\nstores = 100\n")
    declared = load_project(root)
    assert declared.plan.view("SiC_sales").mode == "auxiliary"
    small = declared.routes_with_sizes({"pos": 20_000, "stores": 100, "items": 1000})
    assert len(small) == 1 and "in delta mode (MIN of a group that lost its extreme read from the base" in small[0]
    assert "(pos = 20000, items = 1000)" in small[0]  # stores as declared


def test_plan_names_the_views_the_lakes_sizes_would_keep_over_maps(tmp_path):
    """With the lake's sizes, which views the plan would keep over a map of pos (lattice/passes/choose_maps.py),
    and, once declared, which it would keep over pos again with smaller ones."""
    root = make_project(tmp_path / "p", FIGURE_1)
    project = load_project(root)
    big = project.routes_with_sizes({"pos": 100_000_000, "stores": 100, "items": 1000})
    lines = {line.split(":")[0]: line for line in big}
    assert sorted(lines) == ["SiC_sales", "sCD_sales", "sR_sales"], big  # SID_sales joins no dimension
    # the map by what it holds: its name is the lake's own, never shown
    assert lines["sR_sales"].startswith("sR_sales: with the lake's sizes the plan would keep it over a map (pos grouped "
                                        "by storeID), by the plan's choice: ~100 rows against 100,000,000 of pos"), \
        lines["sR_sales"]
    assert lines["SiC_sales"].startswith("SiC_sales: with the lake's sizes the plan would keep it over a map (pos "
                                         "grouped by itemID, storeID), by the plan's choice"), lines["SiC_sales"]
    assert not any("__ns_" in line for line in big), big
    assert lines["sR_sales"].endswith("declare them in nightshift.toml [statistics] (pos = 100000000, stores = 100, "
                                      "items = 1000) and run nightshift apply")
    toml = (root / "nightshift.toml").read_text()
    (root / "nightshift.toml").write_text(toml + "[statistics]\npos = 100_000_000\nstores = 100\nitems = 1000\n")
    small = {line.split(":")[0]: line for line in load_project(root).routes_with_sizes({"pos": 20_000})}
    assert sorted(small) == ["SiC_sales", "sCD_sales", "sR_sales"], small
    assert "would keep it in delta mode over pos; to take that route" in small["sR_sales"]
    assert "would keep it in delta mode (MIN of a group that lost its extreme read from the base" in small["SiC_sales"]


def test_plan_names_a_views_map_by_the_view_and_its_setting_once(tmp_path):
    """`nightshift plan`'s line for a view kept over a map ([views] "map"): the map named by its view, never by the
    lake's name for it, and the setting that chose it said once."""
    from nightshift import render

    root = make_project(tmp_path / "p", {"sR_sales": FIGURE_1["sR_sales"]}, maintain="map")
    line = render.plan_short(load_project(root).plan).splitlines()[1]
    assert line.startswith("  sR_sales: auxiliary mode (kept over sR_sales's map (nightshift.toml [views] sR_sales = "
                           "\"map\"): the fact's changes reach it through the map"), line
    assert line.count('[views] sR_sales = "map"') == 1 and "__ns_" not in line and "auxiliary view" not in line, line


def test_an_error_names_a_lake_object_by_the_views_it_serves(tmp_path):
    """An error naming an auxiliary view (a map) by the lake's name for it reaches the user with the view it serves,
    from the project's plan; a project that does not load leaves the message as it is."""
    from nightshift.cli import _error_text

    root = make_project(tmp_path / "p", {"sR_sales": FIGURE_1["sR_sales"]}, maintain="map")
    aux = load_project(root).plan.auxiliary[0].name
    error = ConfigError(f"apply-base 20260102: the updates of view {aux} (its lake copy) are missing")

    class Args:
        project = str(root)

    assert _error_text(error, Args) == ("apply-base 20260102: the updates of sR_sales's auxiliary view (its lake copy) "
                                        "are missing"), _error_text(error, Args)
    Args.project = str(tmp_path / "nowhere")
    assert _error_text(error, Args) == str(error)
