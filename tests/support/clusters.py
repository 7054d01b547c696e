"""A broker of a test's own on a fixed port (started fresh, so a test can SIGKILL and restart it), and
the CLI's budgets and report reading used with it."""

from __future__ import annotations

import contextlib
import json
import shutil

from eosmirror_tools.kit import cluster, waits
from tests.helpers import create_topic, mirror, mirrors_file

PARTITIONS = 3            # the partitions of the topics the killable-cluster, group and drill tests write


CLI_BUDGET = 300          # one switchover or promotion through the CLI, a spark-submit final run included




def json_tail(out: str) -> dict:
    """The --json report: the last top-level JSON object the command printed (its steps go to stderr)."""
    start = out.rfind("\n{")
    return json.loads(out[start + 1 if start >= 0 else out.index("{"):])


@contextlib.contextmanager
def killable_cluster(name: str, port: int, link=None):
    """A broker of this test's own on a fixed port, started fresh, so a test can SIGKILL and restart it;
    with ``link`` (kit/link.py) also behind its proxy (``far_config()``), stopped with it."""
    source = cluster.LocalCluster(name, port, link=link)
    cluster.stop(source, hard=True)
    shutil.rmtree(source.dir, ignore_errors=True)
    try:
        cluster.start(source, timeout=waits.service_budget(90, cap_seconds=240))
        yield source
    finally:
        cluster.stop(source, hard=True)
        shutil.rmtree(source.dir, ignore_errors=True)


def own_port(offset: int) -> int:
    """A base port of this test's own broker in this worker's range (conftest's source port + ``offset``):
    the broker takes it and the next four (controller, and with a link its proxied listener, the proxy's
    API and the proxy)."""
    import os

    return int(os.environ["EOSMIRROR_SOURCE_PORT"]) + offset


def mirror_from_killable(source, unique, tmp_path):
    """(source settings, topic, mirror, mirrors file) of a mirror from the killable ``source`` to the target."""
    source_conf = source.client_config()
    topic = create_topic(source_conf, unique("pay"), partitions=PARTITIONS)
    m = mirror(unique("m"), [topic], source={"config": source_conf})
    config = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"config": source_conf}, "target": {"local": "target"}, "topics": list(m.topics),
        "slots": m.slots, "max_transaction_seconds": m.max_transaction_seconds}])
    return source_conf, topic, m, config
