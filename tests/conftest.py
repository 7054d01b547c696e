"""Shared fixtures. The Airflow environment is exported before anything imports airflow."""

from __future__ import annotations

import logging
import re
import uuid

import pytest

from eosmirror.airflow import home

home.apply()
# py4j logs from __del__ at interpreter exit, after pytest closed its log capture.
logging.getLogger("py4j").setLevel(logging.ERROR)


@pytest.fixture(scope="session")
def clusters():
    """The embedded source and target clusters: reused when running, else started and stopped here."""
    from eosmirror_tools.local import cluster

    started = []
    for c in cluster.default_clusters():
        cluster.register(c)
        if not cluster.is_reachable(c):
            cluster.launch(c)
            started.append(c)
    for c in started:
        cluster.wait_ready(c)
    yield {c.name: c for c in cluster.default_clusters()}
    for c in started:
        cluster.stop(c)


@pytest.fixture(scope="session")
def source_conf(clusters):
    return clusters["source"].client_config()


@pytest.fixture(scope="session")
def target_conf(clusters):
    return clusters["target"].client_config()


@pytest.fixture
def unique(request):
    """A name unique to this test (and run): tests never see each other's topics, groups or ids."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-").lower()[:40]
    counter = iter(range(1000))

    def make(kind: str = "t") -> str:
        return f"{kind}-{base}-{uuid.uuid4().hex[:6]}-{next(counter)}"

    return make
