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
