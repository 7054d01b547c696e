"""A promotion with consumer groups and a live source moves the groups exactly (issue #50 item 6).

A mirror with ``groups: {}`` copies numbered records; one group sync leaves the target with the groups'
positions of that moment. Then Kafka's Java consumer (a group, the tests' judge) and a librdkafka
group read further on the source and commit, the mirror copies the rest, and ``eosmirror promote``
runs with the source alive: its final group sync must carry those newer positions over. Each group's
consumer on the target then receives, per partition, exactly the records it had not read on the source,
starting with the next one: 0 re-reads, 0 skips, judged from what the consumers themselves printed or
received against the values produced. The positions are wherever the real consumers stop (they drain
a partition's fetched records before the next one's, so some partitions are read mid-way, some to the
end, some not at all); the check does not depend on them, and the test first checks that the target's
offsets really are older than the source's before the promotion.

It fails on ad520e0, whose promote called ``move_groups`` on a local variable that shadowed the module:
the sync never ran, the promotion said success, and the groups re-read on the target what they had read
on the source after the last scheduled sync (run against that promote.py: 20 re-reads of the Java group (then read
by ConsoleConsumer) on one partition, 3 and 12 of the librdkafka group on two, while the promotion warned "the final
group sync ... failed ('NoneType' object has no attribute 'move_groups')" and exited 0). About 15-17 s plus
the clusters' start on 2 shared cores.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import (
    cli,
    committed_offsets,
    create_topic,
    mirror,
    mirrors_file,
    seed_sequence,
    write_mirror_file,
)
from tests.support.consumers import Read, java_group_read, rdk_group_read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
PARTITIONS = 3
BEFORE_SYNC = 12        # records per partition mirrored before the group sync ("a" values)
AFTER_SYNC = 12         # records per partition produced after it ("b" values)
CLI_BUDGET = 120        # one `eosmirror` command (in-process runs, a group sync, a promotion)


def values(read: Read) -> dict[int, list[str]]:
    return {k: [value for _, value in records] for k, records in read.items()}


def joined(*reads: Read) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {k: [] for k in range(PARTITIONS)}
    for read in reads:
        for k, got in values(read).items():
            out[k] += got
    return out


def command(*args: str) -> subprocess.CompletedProcess:
    """``eosmirror <args>`` in a new process, given CLI_BUDGET seconds."""
    try:
        return cli(*args, timeout=CLI_BUDGET)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"eosmirror {' '.join(args)} did not end within {CLI_BUDGET} s; it printed:\n"
                    f"{exc.stdout!s}\n{exc.stderr!s}")


def eosmirror(*args: str) -> subprocess.CompletedProcess:
    done = command(*args)
    assert done.returncode == 0, f"eosmirror {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_a_promotion_with_the_source_alive_moves_groups_that_committed_after_the_last_sync(
        source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    m = mirror(unique("m"), [topic], groups={})
    config = str(write_mirror_file(tmp_path / "mirrors.yaml", m, groups={}))
    java, rdk = unique("g-java"), unique("g-rdk")
    seed_sequence(source_conf, topic, PARTITIONS, BEFORE_SYNC, prefix="a")
    produced = {k: [f"a{k}-{n}" for n in range(BEFORE_SYNC)] + [f"b{k}-{n}" for n in range(AFTER_SYNC)]
                for k in range(PARTITIONS)}

    eosmirror("run", m.name, "--config", config, "--inprocess")
    before = {java: java_group_read(source_conf, topic, java, max_messages=BEFORE_SYNC),
              rdk: rdk_group_read(source_conf, topic, rdk, count=BEFORE_SYNC + 5)}
    synced = json.loads(eosmirror("groups", "sync", m.name, "--config", config, "--json").stdout)
    written = {g["group"] for g in synced["groups"] if g["written"]}
    assert {java, rdk} <= written, f"the first group sync wrote {sorted(written)}: {synced}"

    # After the last group sync: both groups read further on the source and commit, the mirror copies it all.
    seed_sequence(source_conf, topic, PARTITIONS, AFTER_SYNC, prefix="b")
    after = {java: java_group_read(source_conf, topic, java, max_messages=BEFORE_SYNC + 8),
             rdk: rdk_group_read(source_conf, topic, rdk, count=BEFORE_SYNC + 3)}
    eosmirror("run", m.name, "--config", config, "--inprocess")
    on_source = {g: joined(before[g], after[g]) for g in (java, rdk)}
    for g, read in on_source.items():     # each consumer read its partitions in order, from the first record
        assert all(read[k] == produced[k][:len(read[k])] for k in range(PARTITIONS)), (g, read)
    for g in (java, rdk):                 # the target holds older positions: the promotion has work to do
        behind = committed_offsets(target_conf, g, topic, PARTITIONS)
        ahead = committed_offsets(source_conf, g, topic, PARTITIONS)
        assert behind != ahead, f"{g}: the target's offsets {behind} already equal the source's {ahead}"

    promoted = command("promote", m.name, "--config", config, "--no-pause", "--json")
    said = f"exit {promoted.returncode}\nstdout:\n{promoted.stdout}\nstderr:\n{promoted.stderr}"
    assert promoted.returncode == 0, said

    # Each group on the target: Kafka's Java consumer and librdkafka, reading what is left.
    left = {g: {k: produced[k][len(on_source[g][k]):] for k in range(PARTITIONS)} for g in (java, rdk)}
    on_target = {java: values(java_group_read(target_conf, topic, java,
                                              max_messages=sum(map(len, left[java].values())))),
                 rdk: values(rdk_group_read(target_conf, topic, rdk, count=None))}
    verdicts, wrong = [], []
    for g in (java, rdk):
        for k in range(PARTITIONS):
            got, want = on_target[g].get(k, []), left[g][k]
            # where its first record on the target lies against its next one: before (re-reads) or after (skips)
            off = (produced[k].index(got[0]) if got else len(produced[k])) - len(on_source[g][k])
            verdicts.append(f"{g}[{k}]: read {len(on_source[g][k])} on the source, {len(got)} on the target, first "
                            f"{got[:1]} (its next: {want[:1]}): {max(0, -off)} re-read(s), {max(0, off)} skip(s)")
            if got != want:
                wrong.append(verdicts[-1])
    print("\n".join(verdicts))
    assert not wrong, ("the groups did not resume exactly on the target:\n" + "\n".join(verdicts)
                       + f"\nthe promotion said:\n{promoted.stderr[-1500:]}")

    # The promotion says its group sync ran, and wrote both groups.
    outcome = json.loads(promoted.stdout)
    assert outcome["state"] == "promoted" and outcome["source_answered"], said
    ran = {step["name"]: step["status"] for step in outcome["steps"]}
    assert ran.get("final group sync") == "ran" and outcome["groups"] is not None, (
        f"the promotion reports no group sync:\n{said}")
    moved = {g["group"]: g for g in outcome["groups"]["groups"]}
    for g in (java, rdk):
        assert g in moved and moved[g]["written"] and not moved[g]["error"], (g, outcome["groups"])
    assert "without it" not in promoted.stderr, said



def test_a_promotion_whose_group_sync_cannot_run_says_so_in_its_report_and_exit_code(
        source_conf, target_conf, unique, tmp_path):
    """The source is gone (its address answers nothing): the promotion still promotes from what the target
    holds, and its report and exit code (6) say the final group sync did not run (it said success before)."""
    topic = create_topic(source_conf, unique("gone"), partitions=1)
    m = mirror(unique("m"), [topic], groups={})
    config = str(write_mirror_file(tmp_path / "mirrors.yaml", m, groups={}))
    seed_sequence(source_conf, topic, 1, 10)
    eosmirror("run", m.name, "--config", config, "--inprocess")
    eosmirror("lag", m.name, "--config", config, "--record")          # the observation the loss report uses
    gone = str(mirrors_file(tmp_path / "gone.yaml", [{
        "name": m.name, "source": {"config": {"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": 2000}},
        "target": {"local": "target"}, "topics": list(m.topics), "groups": {}}]))
    promoted = command("promote", m.name, "--config", gone, "--source-seconds", "2", "--no-dags", "--json")
    said = f"exit {promoted.returncode}\n{promoted.stdout[-3000:]}\n{promoted.stderr[-2000:]}"
    assert promoted.returncode == 6, said
    outcome = json.loads(promoted.stdout)
    steps = {step["name"]: step for step in outcome["steps"]}
    assert outcome["state"] == "promoted" and not outcome["source_answered"], said
    assert steps["final group sync"]["status"] == "failed" and steps["final group sync"]["why"], said
    assert outcome["not_run"] == ["final group sync"] and "final group sync DID NOT RUN" in outcome["verdict"], said
    assert steps["record promoted"]["status"] == "ran" and outcome["may_be_lost"] == 0, said
