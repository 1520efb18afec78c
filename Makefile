# nightshift — two commands set everything up on a fresh machine:
#   make demo   creates .venv, installs pinned requirements, runs the retail example end to end
#   make test   brings up PostgreSQL (bin/postgres-up: installs Debian's postgresql if missing, starts it,
#               trusts loopback, creates database test) and runs the test suite (real Spark local,
#               real DuckDB, real PostgreSQL, real Airflow)
PYTHON  ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
ROWS    ?= 1000000
NIGHTS  ?= 3
# make cluster: a local Spark standalone cluster (bin/spark-cluster; PORT=0 / UI_PORT=0 pick free ports)
WORKERS ?= 1
CORES   ?= 2
WORKER_MEMORY ?= 1g
PORT    ?= 7077
UI_PORT ?= 8081
TEST_WORKERS ?= 2
# make spark-connect: a Spark Connect server that keeps Spark warm between commands (nightshift spark-connect)
CONNECT_PORT ?= 15002
CONNECT_MASTER ?= local[2]

.PHONY: venv postgres spark-packages demo test test-fast docs bench airflow cluster cluster-stop cluster-status spark-connect spark-connect-stop spark-connect-status clean help

help:
	@echo "make demo    - set up .venv and run the retail example ($(ROWS) rows, $(NIGHTS) nights) end to end"
	@echo "make test    - bring up PostgreSQL on 127.0.0.1:5432 and run the test suite (layer contract + every test)"
	@echo "make postgres - bring up PostgreSQL on 127.0.0.1:5432 only (installs and starts it if needed)"
	@echo "make spark-packages - fetch the Spark packages the lake needs (Delta Lake) into Spark's package cache, and write Spark's class-data archive"
	@echo "make test-fast - the layer contract, the compiler and the tests without Spark or Airflow (about a minute)"
	@echo "make docs    - build the documentation site into build/site (mkdocs --strict, offline)"
	@echo "make bench   - run the benchmarks (writes bench/REPORT.md)"
	@echo "make airflow - Airflow standalone with the nightshift DAGs (UI on 127.0.0.1:8080; AIRFLOW_HOME=.airflow), their tasks on a warm Spark Connect server"
	@echo "make cluster - local Spark standalone master + $(WORKERS) worker(s) on 127.0.0.1:$(PORT) (UI $(UI_PORT)); make cluster-stop ends it"
	@echo "make spark-connect - a Spark Connect server on 127.0.0.1:$(CONNECT_PORT): set [spark] remote to its URL; make spark-connect-stop ends it"
	@echo "make clean   - remove the demo project and caches (keeps .venv)"

$(STAMP): requirements.txt requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	@command -v java >/dev/null || { echo "need Java 17 for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/python -m compileall -q lattice runtime spark_jobs warehouse nightshift dags
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/nightshift demo --dir demo-project --rows $(ROWS) --nights $(NIGHTS)

# PostgreSQL for the tests: bin/postgres-up is idempotent and uses a server that already answers as it is.
# NIGHTSHIFT_TEST_PG_URL set: the tests use that server and nothing is brought up. Under CI=true a
# PostgreSQL that cannot be brought up fails here; elsewhere the PostgreSQL tests are then skipped.
postgres:
	@if [ -n "$$NIGHTSHIFT_TEST_PG_URL" ]; then echo "postgres: using NIGHTSHIFT_TEST_PG_URL"; \
	elif bin/postgres-up; then :; \
	elif [ "$$CI" = true ]; then echo "FAIL: PostgreSQL is required under CI=true and could not be brought up" >&2; exit 1; \
	else echo "postgres: not available; the PostgreSQL tests will be skipped" >&2; fi

# Delta Lake's jars (the lake's table format) from Maven Central into Spark's package cache
# (~/.cache/nightshift/ivy, or NIGHTSHIFT_IVY_CACHE): once per machine, so the test workers, spark-submit and the
# Spark Connect server resolve them from the cache instead of each downloading them at its first start; and the
# class-data archive every later local Spark start maps (~/.cache/nightshift/jvm, spark_jobs/class_archive.py)
spark-packages: $(STAMP)
	$(BIN)/python bin/spark-packages

# two pytest-xdist workers, the slowest units of work first (tests/conftest.py); TEST_WORKERS=0 runs serially
test: $(STAMP) postgres spark-packages docs
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=30 tests

# the compiler and every test that needs no Spark, no Airflow: about a minute (PostgreSQL brought up as for make test)
test-fast: $(STAMP) postgres
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -m "not slow" tests

# the documentation site (docs/, mkdocs.yml); docs/hooks.py generates the CLI reference from nightshift/cli.py
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d build/site

bench: $(STAMP)
	$(BIN)/python -m bench.run

# NIGHTSHIFT_PROJECTS (default demo-project), AIRFLOW__DATABASE__SQL_ALCHEMY_CONN (default SQLite): see bin/airflow-standalone.
# The DAGs' tasks run on a warm Spark Connect server on CONNECT_PORT, started with Airflow (or the running one of
# make spark-connect); NIGHTSHIFT_SPARK_REMOTE= make airflow runs a spark-submit per task instead
airflow: $(STAMP)
	NIGHTSHIFT_SPARK_CONNECT_PORT=$(CONNECT_PORT) NIGHTSHIFT_SPARK_CONNECT_MASTER='$(CONNECT_MASTER)' $(BIN)/python bin/airflow-standalone

cluster: $(STAMP)
	$(BIN)/python bin/spark-cluster start --workers $(WORKERS) --cores $(CORES) --memory $(WORKER_MEMORY) --port $(PORT) --webui-port $(UI_PORT)

cluster-status:
	$(BIN)/python bin/spark-cluster status

cluster-stop:
	$(BIN)/python bin/spark-cluster stop

# Spark kept warm between commands: projects with [spark] remote = "sc://127.0.0.1:$(CONNECT_PORT)" use it
spark-connect: $(STAMP)
	$(BIN)/nightshift spark-connect start --warm-up --port $(CONNECT_PORT) --master '$(CONNECT_MASTER)'

spark-connect-status:
	$(BIN)/nightshift spark-connect status

spark-connect-stop:
	$(BIN)/nightshift spark-connect stop

clean:
	rm -rf demo-project .pytest_cache spark-warehouse metastore_db derby.log
