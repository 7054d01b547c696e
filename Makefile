# eosmirror: the two README commands are `make demo` and `make test`; each does its own set-up.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
UV_VERSION := 0.13.9
UV_HOME := var/tools/uv
UV := $(UV_HOME)/bin/uv
VENV := .venv
BIN := $(VENV)/bin
export UV_PYTHON_DOWNLOADS := never
# Trust the platform's certificate store too (where a TLS-intercepting proxy's CA is installed);
# uv otherwise trusts only its bundled roots unless SSL_CERT_FILE happens to be set.
export UV_SYSTEM_CERTS ?= 1
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)
ROUNDS ?= 22

.PHONY: help setup demo test test-unit lint lab-smoke broker-cell broker-matrix matrix bench soak chaos airflow deploy-test down status clean browser lagbench

help:
	@echo "make demo    run the mirror on two embedded Kafka clusters (sets everything up first)"
	@echo "make test    run the whole test suite (sets everything up first)"
	@echo "make bench   benchmark eosmirror against MirrorMaker 2 and baselines"
	@echo "make lab-smoke  the bench and soak suites' own smoke tests, the commands' ACL measurements (CI runs them after make test)"
	@echo "make broker-matrix  mirror between Kafka versions (2.8 .. 4.4), judged by each version's own tools"
	@echo "make chaos   exactly-once under faults (ROUNDS=$(ROUNDS))"
	@echo "make soak    recovery point under 30 min of load: scheduled vs follow vs MirrorMaker 2 (SOAK_ARGS=...)"
	@echo "make airflow the Airflow UI (airflow standalone) on this project's home, http://localhost:8080"
	@echo "             (127.0.0.1 only; EOSMIRROR_LISTEN=all make airflow opens it to other hosts)"
	@echo "make deploy-test  the multi-host deployment of docker/ (Docker), faulted and verified"
	@echo "make down    stop the embedded Kafka clusters"

# uv itself lives in a private venv so the project's own .venv stays exactly what uv.lock says.
$(UV):
	$(PYTHON) -m venv $(UV_HOME)
	$(UV_HOME)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# --compile-bytecode: uv, unlike pip, leaves the .pyc files out, and where PYTHONDONTWRITEBYTECODE is set (as on this
# machine kind) Python then compiles every module it imports on every start: an Airflow command
# started in 3.2 s instead of 1.5 s, and one make test starts about 500 Python processes (process accounting).
# Compiling once takes about 9 s.
$(VENV)/.synced: pyproject.toml tools/pyproject.toml uv.lock Makefile | $(UV)
	$(UV) sync --frozen --compile-bytecode --python $(PYTHON)
	@touch $@

# The checkout's own code too (an editable install, which uv does not compile; pip compiles a wheel's): the CLI,
# every Airflow task and each Spark Python worker import it. Only changed files are compiled again (under 1 s).
setup: $(VENV)/.synced
	$(BIN)/python -m compileall -q plugins tools/eosmirror_tools dags spark_jobs
	$(BIN)/eosmirror setup

demo: setup
	$(BIN)/eosmirror demo

# Four pytest-xdist workers, each with its own clusters, home and Airflow database (tests/conftest.py);
# whole files go to one worker (fixed-port test clusters stay within their file). The suite waits on
# brokers, Spark and Airflow more than it computes: on 2 cores, from fresh clones of one commit, 4 workers
# took 10 min 17 s (CPU 13 % idle) where 3 took 12 min 23 s; earlier, 3 took 10 min 16 s where 2 took
# 16 min 14 s (docs/results.md).
# --no-loadscope-reorder keeps the collection order, where tests/conftest.py puts the longest files
# first (xdist's default reorder by test count put them last, as the run's tail).
TEST_WORKERS ?= 4
test: setup browser lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not lab and not brokers" tests/e2e tests/integration tests/unit

# The lab's own smoke runs (the bench and soak suites on the kit): they test the lab, not the product, so
# `make test` leaves them out; CI runs them after it (.ci/run), with LAB_MARK="lab or brokers" so the broker
# cell below runs on a worker the lab's files leave idle instead of after them.
LAB_MARK ?= lab
lab-smoke: setup
	$(BIN)/pytest -n 3 --dist loadfile -m "$(LAB_MARK)" tests/e2e tests/integration

# One cross-version broker cell (Kafka 2.8 with ZooKeeper -> 4.4: a mirror under production, a group failover),
# judged by each cluster's own Kafka tools; CI runs it inside lab-smoke's session. `make broker-matrix` runs every cell.
broker-cell: setup
	$(BIN)/pytest -m brokers tests/integration/test_broker_versions.py

# Every broker-version cell (2.8 ZooKeeper -> 4.4, 3.9 -> 4.4, 4.4 -> 3.9, 4.3 -> 4.3), each: a mirror under
# production, group failover, switchover, promote/reverse/switch back/resume, and (3.5+ sources) the take-over
# from exactly-once MirrorMaker 2 of the source's version (build/brokers/matrix.md;
# BROKER_CELLS=2.8 selects cells, BROKER_PARTS=a,b parts; docs/versions.md). Clusters at the base ports + 20.
broker-matrix: setup
	$(BIN)/python -m eosmirror_tools.brokers

# ruff (pyflakes, blind excepts, no Airflow/Spark import at module top) and mypy --strict on the whole
# eosmirror package (core, kafka, slot, driver, spark, airflow, the CLI); both configured in pyproject.toml.
# A few seconds; `make test` runs them first.
lint: setup
	$(BIN)/ruff check plugins tools tests dags spark_jobs
	cd plugins && ../$(BIN)/mypy --config-file ../pyproject.toml

test-unit: setup
	$(BIN)/pytest tests/unit

bench: setup
	$(BIN)/python -m eosmirror_tools.bench

# The wheel beside Airflow 3.1/3.2/3.3 and PySpark 3.5/4.x, one fresh venv each (build/matrix.md;
# MATRIX_CELLS=3.1 selects cells). `make test` tests the locked versions only.
matrix: setup
	$(BIN)/python -m eosmirror_tools.matrix

# Debian's chromium for the headless page test (tests/e2e/test_lag_ui.py); `make test` installs it when missing
# (apt-get as root; otherwise it says what to run).
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && echo "installing Debian's chromium for the lag page's browser test" && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "chromium is missing and could not be installed: run 'sudo apt-get install chromium' (Debian)"; exit 1; }

# The lag reports at 20 mirrors x 50 partitions with 7 days of 5-minute history (build/lagbench.json).
lagbench: setup
	$(BIN)/python -m eosmirror_tools.bench.lagreports

# The recovery point under sustained load: 30 min at 20,000 records/s, scheduled */1 vs follow */5 vs
# MirrorMaker 2 exactly-once side by side (build/soak/summary.md, report.json, time-lag.png).
soak: setup
	$(BIN)/python -m eosmirror_tools.soak $(SOAK_ARGS)

chaos: setup
	$(BIN)/python -m eosmirror_tools.chaos --rounds $(ROUNDS)

# Listens on 127.0.0.1 only; EOSMIRROR_LISTEN=all (environment or `make airflow EOSMIRROR_LISTEN=all`)
# opens the API server and Airflow's task-log servers to other hosts (plugins/eosmirror/airflow/listen.py).
airflow: setup
	$(BIN)/eosmirror local up
	$(BIN)/eosmirror airflow standalone

# Needs root (it installs docker.io/debootstrap and starts dockerd when missing); images stay as a cache.
# DEPLOY_ARGS: e.g. --faults none (only the first run), --keep (leave the deployment up).
deploy-test: setup
	$(BIN)/python -m eosmirror_tools.deploy $(DEPLOY_ARGS)

status:
	@$(BIN)/eosmirror local status

down:
	@if [ -x $(BIN)/eosmirror ]; then $(BIN)/eosmirror local down --all; fi

clean: down
	rm -rf var build $(VENV)
