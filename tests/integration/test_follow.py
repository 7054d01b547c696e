"""Follow runs on real brokers: a run keeps copying after its bound, the next run takes over by
fencing its transactional ids, and the hand-over neither duplicates nor loses nor leaks aborted data."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from eosmirror.core.errors import TargetMismatchError
from eosmirror.kafka import readers
from tests.helpers import create_topic, mirror, read_all, run, seed_sequence, values
from tests.support.load import produce_until, wait_grown
from tests.support.waiting import in_seconds, result_or_stacks, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2


def test_a_follow_run_copies_what_arrives_and_hands_over_without_duplicates_or_losses(source_conf, target_conf,
                                                                                      target_cluster,
                                                                                      unique):
    topic = create_topic(source_conf, unique("follow"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, 50, prefix="seed-")
    m = mirror(unique("m"), [topic], follow=True, max_transaction_seconds=0.5, follow_max_seconds=60)
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=3) as pool:
        try:
            production = pool.submit(produce_until, source_conf, topic, unique("tx"), stop,
                                     list(range(PARTITIONS)))
            # Run A: bounded at now, then follows (for at most 60 s).
            first = pool.submit(run, m, until=in_seconds(0), follow_until=in_seconds(60))

            def copied_after_the_bound():
                # The target's committed end (a real consumer's watermarks): far past the 50 seeded
                # records per partition only if A copies what is produced while it follows.
                try:
                    ends = [readers.watermarks(target_cluster, topic,
                                               k)[1] for k in range(PARTITIONS)]
                except TargetMismatchError:   # A has not created the target topic yet
                    return False, "no target topic yet"
                return min(ends) >= 300 and not first.done(), (ends, first.done())

            wait_for("run A to copy records produced after its bound while it follows", copied_after_the_bound, 40)
            # Run B takes over: its slots fence A's transactional ids; it follows for 10 s more.
            second = pool.submit(run, m, follow_until=in_seconds(10))
            a = result_or_stacks(first, 40, "run A to end handed over once run B's slots fenced it", second)
            wait_grown(target_conf, topic, range(PARTITIONS), 20, "run B copying while production goes on")
        finally:
            stop.set()
        batches = production.result(timeout=30)
        b = second.result(timeout=40)
    assert a["status"] == "ok", a["errors"]
    assert {s["status"] for s in a["slots"]} == {"handed-over"}, a["slots"]
    assert all(s["follow_end"] == "handed-over" and s["error"] is None for s in a["slots"])
    assert b["status"] == "ok" and {s["status"] for s in b["slots"]} == {"follow-bound"}, b["slots"]
    assert batches >= 20
    for k in range(PARTITIONS):
        # read_committed, both sides, from real consumers: the target holds exactly the source's
        # committed records, in order; none twice, none missing, none aborted.
        source = values(read_all(source_conf, topic, k))
        target = values(read_all(target_conf, topic, k))
        assert len(target) == len(set(target)), f"partition {k}: duplicates on the target"
        assert target == source, (f"partition {k}: {len(set(source) - set(target))} lost, "
                                  f"{len(set(target) - set(source))} foreign")
        assert not [v for v in target if v.startswith(b"aborted-")]
    assert a["records"] > 100 and a["records"] + b["records"] == sum(len(read_all(source_conf, topic, k))
                                                                     for k in range(PARTITIONS))


def test_a_sigstopped_follower_resumed_after_the_next_run_took_over_ends_handed_over(source_conf, target_conf,
                                                                                     target_cluster,
                                                                                     unique, tmp_path):
    """The SIGSTOP zombie case for follow runs: the follower freezes (mid-transaction or between
    rounds), the next run fences its ids and copies; resumed, the follower learns it was fenced, stops
    as handed-over (exit 0) and wrote nothing twice."""
    import json
    import os
    import signal

    from tests.helpers import cli, write_mirror_file

    topic = create_topic(source_conf, unique("zfollow"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, 50, prefix="seed-")
    m = mirror(unique("m"), [topic], follow=True, max_transaction_seconds=0.5, follow_max_seconds=120)
    config_file = write_mirror_file(tmp_path / "m.yaml", m, follow=True, follow_max_seconds=120)
    follower = cli("run", m.name, "--config", str(config_file), "--inprocess", "--follow-seconds", "90",
                   "--result-json", str(tmp_path / "a.json"), background=True)
    try:
        def target_ends():
            try:
                return [readers.watermarks(target_cluster, topic,
                                           k)[1] for k in range(PARTITIONS)]
            except TargetMismatchError:
                return [0] * PARTITIONS

        wait_for("the follower to copy the seeded records", lambda: (min(target_ends()) >= 50, target_ends()), 60)
        seed_sequence(source_conf, topic, PARTITIONS, 20, prefix="late-")
        wait_for("the follower to copy records produced while it follows",
                 lambda: (min(target_ends()) >= 70, target_ends()), 30)
        os.kill(follower.pid, signal.SIGSTOP)
        seed_sequence(source_conf, topic, PARTITIONS, 30, prefix="frozen-")
        taken_over = run(m)   # a bounded run: its slots fence the frozen follower's ids
        assert taken_over["status"] == "ok", taken_over["errors"]
    finally:
        os.kill(follower.pid, signal.SIGCONT)
    output = follower.communicate(timeout=60)[0]
    zombie = json.loads((tmp_path / "a.json").read_text())
    assert follower.returncode == 0, output[-3000:]
    assert {s["status"] for s in zombie["slots"]} == {"handed-over"}, zombie["slots"]
    assert run(m)["status"] == "ok"
    for k in range(PARTITIONS):
        source, target = values(read_all(source_conf, topic, k)), values(read_all(target_conf, topic, k))
        assert len(source) == 100 and target == source, f"partition {k}: {len(target)} copies of {len(source)}"
