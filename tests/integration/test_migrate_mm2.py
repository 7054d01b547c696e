"""Taking over from a real MirrorMaker 2 (Kafka 4.x jars from Maven Central) in exactly-once mode.

MM2 copies part of a stream that holds aborted transactions; `eosmirror migrate --from mm2` is refused
while MM2 runs (and writes nothing), a dry run writes nothing; after MM2 stops the migration commits
and eosmirror continues: an independent read_committed reader of the target sees every committed
source record exactly once, in order. Heavy (a JVM): run under flock /tmp/eosmirror-heavy.lock.
"""

from __future__ import annotations

import re
import signal
import threading
import time
import uuid

import pytest

from eosmirror.kafka.retry import wait_until
from tests import helpers

pytestmark = pytest.mark.integration

PARTITIONS = 2


def committed_on(conf, topic):
    return {p: helpers.values(helpers.read_all(conf, topic, p)) for p in range(PARTITIONS)}


def write_part(source_conf, topic, label, txn_id):
    """Per partition: committed, aborted, committed transactions (aborted records reach the log)."""
    for p in range(PARTITIONS):
        helpers.transactional_batches(source_conf, topic, f"{txn_id}-{p}", [
            (True, [f"{label}-{p}-{n}".encode() for n in range(10)]),
            (False, [f"{label}-{p}-aborted-{n}".encode() for n in range(4)]),
            (True, [f"{label}-{p}-{n}".encode() for n in range(10, 15)]),
        ], partition=p)


def start_mm2(tmp_path, source_conf, target_conf, topic, alias, target_alias):
    from eosmirror_tools.kit import mm2, runtime
    from eosmirror_tools.kit.processes import ChildProcess

    props = mm2.properties(alias, target_alias, source_conf["bootstrap.servers"], target_conf["bootstrap.servers"],
                           re.escape(topic), exactly_once=True, rest_port=mm2.free_port(), tasks=2)
    props_path, log4j_path = mm2.write_files(tmp_path / "mm2", props)
    cmd = runtime.java_command(mm2.MAIN_CLASS, str(props_path), extra_jvm=(f"-Dlog4j2.configurationFile={log4j_path}",))
    return ChildProcess(cmd, tmp_path / "mm2" / "mm2.log", cwd=tmp_path / "mm2", grace=MM2_STOP_GRACE)


# SIGTERM lets MM2 stop cleanly, which marks its tasks UNASSIGNED in its status topic (what the
# migration checks). Stopped a few seconds after its tasks started, MM2 once needed more than the
# usual 20 s (its herder still busy after five quick rebalances) and was SIGKILLed, leaving RUNNING.
MM2_STOP_GRACE = 120.0


def keep_writing(source_conf, topic, stop):
    """Live traffic while MM2 runs: MM2 keeps copying, so its offsets and the target ends move."""
    out = helpers.producer(source_conf, **{"enable.idempotence": True})
    n = 0
    while not stop.is_set():
        for p in range(PARTITIONS):
            out.produce(topic, value=f"live-{p}-{n}".encode(), partition=p)
        n += 1
        out.flush(10)
        stop.wait(0.1)


def test_take_over_from_exactly_once_mm2(clusters, source_conf, target_conf, unique, tmp_path):
    alias, target_alias = f"mm{uuid.uuid4().hex[:6]}", f"tg{uuid.uuid4().hex[:6]}"
    topic = helpers.create_topic(source_conf, unique("mm2"), partitions=PARTITIONS)
    write_part(source_conf, topic, "before", unique("txn"))
    m = helpers.mirror(unique("m"), [topic], source_alias=alias)
    mirrors = helpers.write_mirror_file(tmp_path / "mirrors.yaml", m, source_alias=alias)

    mm2_process = start_mm2(tmp_path, source_conf, target_conf, topic, alias, target_alias)
    with mm2_process:
        started = time.monotonic()
        wait_until(240, lambda: committed_on(target_conf, topic) if topic_exists(target_conf, topic) else {},
                   lambda got: sum(len(v) for v in got.values()) >= 15 * PARTITIONS)
        first_copy_seconds = time.monotonic() - started
        # MM2 idle (nothing moves): its Connect status says RUNNING -> refused.
        idle = helpers.cli("migrate", m.name, "--from", "mm2", "--config", str(mirrors))
        assert idle.returncode == 2 and "MirrorMaker 2 still runs" in idle.stderr, idle.stdout + idle.stderr
        # MM2 copying live traffic, status check skipped: the offsets move during the check -> refused.
        stop = threading.Event()
        writer = threading.Thread(target=keep_writing, args=(source_conf, topic, stop), daemon=True)
        writer.start()
        try:
            refused = helpers.cli("migrate", m.name, "--from", "mm2", "--mm2-stopped", "--config", str(mirrors))
        finally:
            stop.set()
            writer.join(20)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        # MM2 copying live is caught by whichever check meets it first: its offsets moving during the
        # 3 s window, or its open transaction on the target (a loaded run met the latter). Both refuse.
        live = ("moved during the 3 s check", "a transaction is open on the target")
        assert any(reason in refused.stderr for reason in live), refused.stderr
        assert "Nothing was written" in refused.stderr, refused.stderr
        # Let MM2 copy the live records, then stop it.
        source_now = committed_on(source_conf, topic)
        wait_until(120, lambda: committed_on(target_conf, topic), lambda got: got == source_now)
        stopping = time.monotonic()
        mm2_process.stop()
        stop_seconds = time.monotonic() - stopping
    assert mm2_process.proc.returncode != -signal.SIGKILL, (
        f"MM2 did not stop within {MM2_STOP_GRACE:.0f} s of SIGTERM and was killed, so its status topic still "
        f"says RUNNING; see {tmp_path / 'mm2' / 'mm2.log'}")
    evidence = (tmp_path / "mm2" / "mm2.log").read_text(errors="replace")
    assert "ExactlyOnceWorkerSourceTask" in evidence   # MM2 really ran exactly-once
    assert helpers.progress_of(target_conf, m, topic, PARTITIONS) == {0: None, 1: None}   # refused: nothing written

    dry = helpers.cli("migrate", m.name, "--from", "mm2", "--dry-run", "--config", str(mirrors))
    assert dry.returncode == 0 and "DRY RUN" in dry.stdout and "verified" in dry.stdout, dry.stdout + dry.stderr
    assert helpers.progress_of(target_conf, m, topic, PARTITIONS) == {0: None, 1: None}

    migrate_started = time.monotonic()
    done = helpers.cli("migrate", m.name, "--from", "mm2", "--config", str(mirrors))
    migrate_seconds = time.monotonic() - migrate_started
    assert done.returncode == 0, done.stdout + done.stderr

    write_part(source_conf, topic, "after", unique("txn"))   # eosmirror continues the stream
    assert helpers.run(m)["status"] == "ok"

    source, target = committed_on(source_conf, topic), committed_on(target_conf, topic)
    for p in range(PARTITIONS):
        assert target[p] == source[p], f"partition {p}: target differs from the committed source records"
        assert len(set(target[p])) == len(target[p])   # every record exactly once
        assert not any(b"aborted" in v for v in target[p])
    verified = helpers.cli("verify", m.name, "--config", str(mirrors))
    assert verified.returncode == 0 and "copied before eosmirror took over" in verified.stdout, verified.stdout
    history = helpers.cli("history", m.name, "--config", str(mirrors))
    assert f"migrate from mm2:{alias}" in history.stdout, history.stdout
    print(f"MM2 first copy visible after {first_copy_seconds:.1f} s; stopped in {stop_seconds:.1f} s; "
          f"migrate took {migrate_seconds:.1f} s "
          f"(CLI, 3 s check window); committed records per partition {len(source[0])}; refused with: "
          f"{idle.stderr.strip()[:250]} / {refused.stderr.strip()[:250]}")


def topic_exists(conf, topic):
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient(conf).list_topics(timeout=10).topics
