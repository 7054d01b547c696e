"""Shared fixtures. The Airflow environment is exported before anything imports airflow."""

from __future__ import annotations

# The suite keeps to itself: its own state folder (Airflow home, cluster registry, broker data)
# and its own embedded clusters on their own ports, so it never writes into the demo's clusters
# or its Airflow database, and runs whether or not the demo's clusters are up. Under pytest-xdist
# (`make test` runs two workers) each worker gets its own home and clusters: gw1 uses 17192/27192.
#
# pytest-xdist's controller process imports this file too, before it starts the workers, and the
# workers inherit its environment. So every variable set here is undone first in a worker
# (EOSMIRROR_TEST_RESTORE holds the originals), else both workers would share gw0's home, Airflow
# database and clusters, and one worker's session end would stop the brokers the other still uses.
# EOSMIRROR_SOURCE_PORT / EOSMIRROR_TARGET_PORT, when given, are the base ports of worker gw0.
import json  # noqa: E402
import logging
import os
from pathlib import Path

import pytest

for _key, _original in json.loads(os.environ.pop("EOSMIRROR_TEST_RESTORE", "{}")).items():
    if _original is None:
        os.environ.pop(_key, None)
    else:
        os.environ[_key] = _original
_before = dict(os.environ)
WORKER = int((os.environ.get("PYTEST_XDIST_WORKER") or "gw0").removeprefix("gw") or 0)
TEST_HOME = Path(__file__).resolve().parents[1] / "var" / "test" / f"gw{WORKER}"
os.environ["EOSMIRROR_HOME"] = str(TEST_HOME)
os.environ["EOSMIRROR_SOURCE_PORT"] = str(int(os.environ.get("EOSMIRROR_SOURCE_PORT", 17092)) + 100 * WORKER)
os.environ["EOSMIRROR_TARGET_PORT"] = str(int(os.environ.get("EOSMIRROR_TARGET_PORT", 27092)) + 100 * WORKER)

# The suite waits far more than it computes, and its JVMs (brokers, storage formats, spark-submit's
# driver) live seconds to minutes: their JIT's second tier costs more CPU than it ever pays back.
# Measured on test_mirror_safety + test_mirror_copy: the same 22 tests, 41 -> 23 CPU seconds, wall
# time unchanged. Benchmarks never set this (eosmirror_tools.local.runtime.QUICK_START_FLAGS).
from eosmirror_tools.kit import runtime  # noqa: E402

os.environ[runtime.QUICK_START_ENV] = "1"
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"),
                                                         *runtime.QUICK_START_FLAGS]))

from eosmirror.airflow import home  # noqa: E402  (after EOSMIRROR_HOME: it decides AIRFLOW_HOME)

home.apply()
os.environ["EOSMIRROR_TEST_RESTORE"] = json.dumps({k: _before.get(k) for k, v in os.environ.items()
                                                   if _before.get(k) != v})
home.migrate()
# py4j logs from __del__ at interpreter exit, after pytest closed its log capture.
logging.getLogger("py4j").setLevel(logging.ERROR)


@pytest.fixture(scope="session")
def clusters():
    """The embedded source and target clusters: reused when running, else started and stopped here."""
    from eosmirror_tools.kit import cluster, waits

    started = []
    for c in cluster.default_clusters():
        cluster.register(c)
        if not cluster.is_reachable(c):
            cluster.launch(c)
            started.append(c)
    for c in started:
        cluster.wait_ready(c, timeout=waits.service_budget(90, cap_seconds=240))
    yield {c.name: c for c in cluster.default_clusters()}
    for c in started:
        cluster.stop(c)


@pytest.fixture(scope="session")
def source_conf(clusters):
    return _quiet(clusters["source"].client_config())


@pytest.fixture(scope="session")
def target_conf(clusters):
    return _quiet(clusters["target"].client_config())


@pytest.fixture(scope="session")
def source_cluster(source_conf):
    """The test source as eosmirror's kafka/ functions take it (labelled "source" in messages)."""
    from eosmirror.kafka.cluster import Cluster  # here: eosmirror is imported after the environment is set

    return Cluster.from_settings("source", source_conf)


@pytest.fixture(scope="session")
def target_cluster(target_conf):
    from eosmirror.kafka.cluster import Cluster

    return Cluster.from_settings("target", target_conf)


def _quiet(conf: dict) -> dict:
    """The tests' own clients log librdkafka at eosmirror's level, as eosmirror's clients do: an
    AdminClient that a test's frame keeps alive past the session would otherwise print "Connection
    refused" once a second after the brokers stop. The product's clients set the same level."""
    from eosmirror.kafka import clients

    return {**conf, "log_level": clients.librdkafka_log_level()}


@pytest.fixture
def unique(request):
    """A name unique to this test (and run): tests never see each other's topics, groups or ids."""
    from tests.support.names import unique_names

    return unique_names(request.node.name)


# The longest test files first, in this order. pytest-xdist hands whole files to the workers in
# collection order (`make test` passes --no-loadscope-reorder: its default orders files by their NUMBER
# of tests, which put these one-test files last, so the longest of them formed the run's tail alone).
# Longest first, the tail is the short files. A file missing here keeps its place after these. (xdist
# also sends a worker its next file while it holds 2 tests or fewer: a one-test file's worker gets the
# file after the first three at once, queued behind it.)
# Seconds: each file's tests (set-up included) in junit of `make test` from fresh clones at db7646d and d3874dc
# (4 workers, 10:17 and 10:24, nothing else running; the mean of the two). The runs are in docs/results.md.
LONGEST_FIRST = (   # per-file seconds in make test at db7646d and d3874dc (junit, 4 workers); longest first
    "tests/e2e/test_airflow_scheduler.py",      # 261: the REST drill beside the scheduler checks, one start
    "tests/e2e/test_dr_drill.py",               # 138: cluster A 100 ms away
    "tests/e2e/test_loopback.py",               # 111: make airflow and make demo as a user starts them
    "tests/e2e/test_airflow_dags.py",           # 107
    "tests/integration/test_mirror_safety.py",  # 96 over 16 tests
    "tests/integration/test_security.py",       # 94 over 29 tests
    "tests/e2e/test_install.py",                # 82
    "tests/integration/test_reverse.py",        # 77
    "tests/integration/test_resume.py",         # 75
    "tests/integration/test_switchover_promote.py",   # 74
    "tests/integration/test_group_failback_after_reverse.py",   # 62
    "tests/e2e/test_chaos.py",                  # 59: 2 hard broker restarts; the other rounds in lab-smoke
    "tests/integration/test_migrate.py",        # 59
    "tests/integration/test_mm2_selection.py",  # 52
    "tests/e2e/test_kill.py",                   # 51
    "tests/integration/test_plan_fresh_commit.py",    # 47
    "tests/e2e/test_spark_job.py",              # 45
    "tests/e2e/test_lineage_events.py",         # 42
    "tests/integration/test_switch_ways_out.py",      # 42
)


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))   # stable: the rest keep order


@pytest.fixture(autouse=True)
def _no_airflow_task_context(monkeypatch):
    """Airflow's in-process task runs (``dag.test()``) export ``AIRFLOW_CTX_*`` into this process's
    environment and leave them: a later test on the same worker would act as if inside that DAG run
    (migrate's audit records name their author from them; seen once the longest files ran first)."""
    for key in [k for k in os.environ if k.startswith("AIRFLOW_CTX_")]:
        monkeypatch.delenv(key)
