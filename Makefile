# Everything runs from the project's own virtual environment; `make install` creates it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint format bench soak build deploy clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fairqueue needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The local loop: embedded Postgres unless DATABASE_URL is set, example workload, cron handler
# invoked as Lambda would every few seconds until the backlog is drained.
run: install
	$(BIN)/fairqueue run --handler functions/cron.py:handler

# The suite's second, pooled run (tests/support/pooler.py): what a pooler in transaction mode changes
# for the library, where PgBouncer is installed.
POOLED_TESTS := tests/order tests/pipeline tests/tenancy tests/admission/test_lanes.py \
	tests/delivery tests/faults tests/operating/test_pooler.py tests/schedules

# Test processes (pytest-xdist): the suite waits on subprocesses and on the server about as
# much as it computes, so two processes on two cores take about 0.6 of the time of one.
TEST_PROCESSES ?= 2

test: install
	$(BIN)/pytest -n $(TEST_PROCESSES)
	@if $(BIN)/python tests/support/pooler.py; then \
		FAIRQUEUE_TEST_POOLER=pgbouncer $(BIN)/pytest -n $(TEST_PROCESSES) $(POOLED_TESTS); \
	fi

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	# The functions' handler modules (functions/cron.py, ...), strict like the library.
	$(BIN)/mypy functions/*.py
	$(BIN)/cfn-lint template.yaml
	$(BIN)/sam validate --lint --template template.yaml

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/python -m bench

# The dashboard's pages alone (bench/dashboard.py), at the full run's sizes, in a scratch
# database given as BENCH_DSN (superuser; its fairqueue tables are emptied).
.PHONY: bench-dashboard
bench-dashboard: install
	$(BIN)/python -m bench.dashboard --dsn "$${BENCH_DSN:?set BENCH_DSN to a scratch database}"

# sql/tables.sql: the tables of a freshly migrated schema, rendered from its catalogs on
# DATABASE_URL's server or an embedded one (tests/support/tables_file.py); a test fails while it is stale.
.PHONY: schema
schema: install
	PYTHONPATH=tests $(BIN)/python -m support.tables_file

# Faults for ten minutes on a private cluster: kills, dropped connections, restarts
# (tests/support/soak.py).
soak: install
	$(BIN)/python tests/support/soak.py --min-faults 100

build: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/sam build --template template.yaml

# Needs AWS credentials and a VPC-reachable Postgres; see docs/guide/deploying.md.
deploy: build
	$(BIN)/sam deploy --guided

clean:
	rm -rf .aws-sam .mypy_cache .ruff_cache .pytest_cache
