"""Airflow's DAG folder: nightshift_dags.py builds one DAG per project (a package so that the layer
contract in pyproject.toml can check its imports)."""
