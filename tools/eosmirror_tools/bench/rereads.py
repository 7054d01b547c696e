"""Re-reads after failover (issue 11): the same source data and the same group positions, moved to the
target by eosmirror (``driver.groups.move_groups``) and by MirrorMaker 2 (``sync.group.offsets.enabled``).

Source: one topic, ``PARTITIONS`` partitions, ``records`` committed records per partition written in
transactions of which every third is aborted (aborted records and markers occupy offsets, so source
and target offsets differ). Every value is unique (``<partition>-<n>``): a value on the target names
its source offset. ``groups`` consumer groups commit positions on the source: a third lagging far
behind (5-30% of the log), a third spread over the rest, a third at the end. The groups at the end
are real consumers that read every partition to its end and commit what they reached (past the last
transaction marker, as applications do); the others commit the chosen positions directly.

Per system, group and partition: the group's committed offset on the target, and the first committed
record at or after it (what a read_committed consumer of the group receives first; the target log is
read once), mapped back to its source offset, is compared with the next record the group had not
consumed on the source: ``count`` turns that into re-reads (records received again) and skips
(records never received). A partition the system wrote no offset for is "not synced", never 0.
MirrorMaker 2 runs in dedicated mode from var/kafka-lib (``mm2`` module's launcher), with its default
topic naming (``<source alias>.<topic>``), at-least-once (its default), checkpoints and group offset
syncs every second, ``offset.lag.max`` at its default (100).
"""

from __future__ import annotations

import bisect
import random
import re
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from eosmirror_tools.kit import topics

PARTITIONS = 4
RECORDS, QUICK_RECORDS = 5_000, 1_000          # committed records per partition
GROUPS, QUICK_GROUPS = 20, 6
TXN_RECORDS = 50                               # records per partition per transaction; every 3rd aborted
MM2_COPY_BUDGET, MM2_GROUP_BUDGET = 180.0, 90.0
MM2_SETTLE_SECONDS = 4.0                       # group offsets unchanged this long: MM2 is done syncing


def count(committed_offsets: list[int], position: int, first_received: int | None) -> tuple[int, int]:
    """(re-reads, skips) of one partition after failover.

    ``committed_offsets``: sorted source offsets of the partition's committed records; ``position``: the
    group's committed source offset (the next record it had not consumed is the first at or after it);
    ``first_received``: the source offset of the first record the group's consumer receives on the
    target (None: it receives nothing, it starts at the end)."""
    wanted = bisect.bisect_left(committed_offsets, position)
    got = len(committed_offsets) if first_received is None else bisect.bisect_left(committed_offsets, first_received)
    return max(0, wanted - got), max(0, got - wanted)


def positions(ends: dict[int, int], groups: int, seed: int = 11) -> dict[str, dict[int, int]]:
    """Committed source offsets per group: a third 5-30% into the log, a third 30-99%, a third at the end."""
    rng = random.Random(seed)
    out = {}
    for g in range(groups):
        band = g % 3
        out[g] = {p: end if band == 2 else int(end * (rng.uniform(0.05, 0.30) if band == 0 else rng.uniform(0.30, 0.99)))
                  for p, end in ends.items()}
    return out


def seed_source(conf: dict[str, Any], topic: str, records: int) -> dict[int, list[tuple[int, bytes]]]:
    """Write the data; return per partition the committed records as (source offset, value)."""
    from confluent_kafka import Producer

    from eosmirror.kafka import readers
    from eosmirror.kafka.cluster import Cluster

    producer = Producer({**conf, "transactional.id": f"{topic}-writer", "linger.ms": 5})
    producer.init_transactions(30)
    committed, txn = 0, 0
    while committed < records // TXN_RECORDS:
        aborted = txn % 3 == 2
        producer.begin_transaction()
        for p in range(PARTITIONS):
            for i in range(TXN_RECORDS):
                producer.produce(topic, value=f"{'x' if aborted else ''}{p}-{txn}-{i}".encode(), partition=p)
        producer.flush(30)
        if aborted:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += 1
        txn += 1
    return {p: [(r.offset, r.value) for r in readers.read_all(Cluster.from_settings("source", conf), topic,
                                                              p)] for p in range(PARTITIONS)}


def commit_positions(conf: dict[str, Any], topic: str, groups: dict[str, dict[int, int]]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    for group, offsets in groups.items():
        consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
        consumer.close()


def read_to_end(conf: dict[str, Any], topic: str, group: str, budget: float = 60.0) -> None:
    """A librdkafka consumer of ``group`` (auto-commit, read_committed) reads every partition until it
    reports its end, then closes, which commits the positions it reached."""
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    at_end, deadline = set(), time.monotonic() + budget
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None:
                at_end.discard(msg.partition())
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
    finally:
        consumer.close()
    if len(at_end) < PARTITIONS:
        raise RuntimeError(f"group {group} reached the end of partitions {sorted(at_end)} only within {budget:.0f} s")


def target_offsets(conf: dict[str, Any], topic: str, groups: list[str]) -> dict[str, dict[int, int]]:
    """The groups' committed offsets on ``topic`` (partitions without one are left out)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin, out = AdminClient(conf), {}
    for group in groups:
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])]
        try:
            found = admin.list_consumer_group_offsets(request, request_timeout=15)[group].result(30)
        except Exception:  # noqa: BLE001 - not there yet
            found = None
        out[group] = {tp.partition: tp.offset for tp in (found.topic_partitions if found else []) if tp.offset >= 0}
    return out


def score(source: dict[int, list[tuple[int, bytes]]], target: dict[int, list[tuple[int, bytes]]],
          wanted: dict[str, dict[int, int]], written: dict[str, dict[int, int]]) -> dict[str, Any]:
    """Re-reads and skips of every synced group and partition, from the target log and the written offsets."""
    offsets = {p: [o for o, _ in records] for p, records in source.items()}
    source_of = {value: o for records in source.values() for o, value in records}
    per_group, not_synced = {}, []
    for group, committed in wanted.items():
        rows = {}
        for p, position in committed.items():
            if p not in written.get(group, {}):
                continue
            target_offsets_ = [o for o, _ in target[p]]
            at = bisect.bisect_left(target_offsets_, written[group][p])
            first = source_of[target[p][at][1]] if at < len(target[p]) else None
            rows[p] = count(offsets[p], position, first)
        if len(rows) < len(committed):
            not_synced.append(group)
        per_group[group] = {"rereads": sum(r for r, _ in rows.values()), "skips": sum(s for _, s in rows.values()),
                            "max_rereads_per_partition": max((r for r, _ in rows.values()), default=0),
                            "partitions_synced": len(rows)}
    synced = [g for g in per_group if g not in not_synced]
    return {"groups": len(wanted), "groups_synced": len(synced), "not_synced": not_synced,
            "rereads": sum(per_group[g]["rereads"] for g in per_group),
            "skips": sum(per_group[g]["skips"] for g in per_group),
            "max_rereads_per_partition": max((per_group[g]["max_rereads_per_partition"] for g in per_group), default=0),
            "groups_with_rereads": sum(1 for g in per_group if per_group[g]["rereads"]),
            "per_group": per_group}


def read_target(conf: dict[str, Any], topic: str) -> dict[int, list[tuple[int, bytes]]]:
    from eosmirror.kafka import readers
    from eosmirror.kafka.cluster import Cluster

    return {p: [(r.offset, r.value) for r in readers.read_all(Cluster.from_settings("target", conf), topic,
                                                              p)] for p in range(PARTITIONS)}


def run_eosmirror(source_conf: dict[str, Any], target_conf: dict[str, Any], topic: str, prefix: str,
                  say: Callable[[str], None]) -> dict[str, Any]:
    """One in-process mirror run (the slots' SlotCopier, no Spark), then a group sync (failover)."""
    from eosmirror import driver
    from eosmirror.core import config
    from eosmirror.driver.groups import GroupMoveOptions, move_groups

    raw = {"name": f"{prefix}-m", "source": {"local": "source"}, "target": {"local": "target"},
           "topics": [re.escape(topic)], "slots": 2, "target_replication_factor": 1,
           "groups": {"include": [f"{re.escape(prefix)}-g.*"]}}
    mirror = config.parse({"mirrors": [raw]}, Path("bench-rereads.yaml")).mirrors[0]
    started = time.monotonic()
    mirror_run = driver.MirrorRun(mirror, driver.RunOptions())
    status = mirror_run.execute(mirror_run.prepare(), driver.run_in_process).status.value
    copied = time.monotonic() - started
    report = move_groups(mirror, GroupMoveOptions())
    say(f"eosmirror: run {status} in {copied:.1f} s, group sync of {len(report['groups'])} groups in "
        f"{report['seconds']:.2f} s")
    return {"status": status, "copy_seconds": round(copied, 2), "sync_seconds": report["seconds"],
            "target_topic": topic, "mirror": mirror.name,
            "errors": {g["group"]: g["error"] for g in report["groups"] if g.get("error")}}


def _mm2_props(source_conf: dict[str, Any], target_conf: dict[str, Any], topic: str, prefix: str,
               aliases: tuple[str, str]) -> dict[str, str]:
    from eosmirror_tools.kit import mm2

    a, b = aliases
    return mm2.properties(a, b, source_conf["bootstrap.servers"], target_conf["bootstrap.servers"], re.escape(topic),
                          False, mm2.free_port(), extra={
                              "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
                              f"{a}->{b}.groups": f"{re.escape(prefix)}-g.*",
                              "sync.group.offsets.enabled": "true", "emit.checkpoints.interval.seconds": "1",
                              "sync.group.offsets.interval.seconds": "1", "refresh.groups.interval.seconds": "2"})


def _wait_groups(target_conf: dict[str, Any], remote: str, groups: list[str], child: Any,
                 budget: float) -> tuple[dict[str, dict[int, int]], float | None, str]:
    """Poll MM2's group offsets on the target until every group has all partitions and nothing moved for
    MM2_SETTLE_SECONDS; returns (offsets, seconds until the last change, note)."""
    started, last, changed_at = time.monotonic(), None, time.monotonic()
    while time.monotonic() - started < budget:
        if not child.running():
            return last or {}, None, "MirrorMaker 2 exited while syncing groups"
        seen = target_offsets(target_conf, remote, groups)
        if seen != last:
            last, changed_at = seen, time.monotonic()
        complete = all(len(seen[g]) == PARTITIONS for g in groups)
        if complete and time.monotonic() - changed_at >= MM2_SETTLE_SECONDS:
            return seen, round(changed_at - started, 2), "all groups synced"
        time.sleep(1.0)
    synced = sum(1 for g in groups if len((last or {}).get(g, {})) == PARTITIONS)
    return last or {}, None, f"budget of {budget:.0f} s spent: {synced} of {len(groups)} groups had all offsets"


def run_mm2(source_conf: dict[str, Any], target_conf: dict[str, Any], topic: str, prefix: str, groups: list[str],
            expected: int, folder: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """MM2 until the copy is complete on the target and its group offsets settle (or a budget runs out)."""
    from eosmirror_tools.kit import measured, mm2, runtime
    from eosmirror_tools.kit.counting import offset_sum

    uid = uuid.uuid4().hex[:6]
    aliases = (f"src{uid}", f"tgt{uid}")
    remote = f"{aliases[0]}.{topic}"
    props_path, log4j_path = mm2.write_files(folder, _mm2_props(source_conf, target_conf, topic, prefix, aliases))
    cmd = runtime.java_command(mm2.MAIN_CLASS, str(props_path), extra_jvm=(f"-Dlog4j2.configurationFile={log4j_path}",))
    out: dict[str, Any] = {"aliases": list(aliases), "target_topic": remote, "log": str(folder / "mm2.log")}
    with measured.child(cmd, folder / "mm2.log", cwd=folder) as child:
        copied = None
        while time.monotonic() - child.started < MM2_COPY_BUDGET and child.running():
            try:
                if offset_sum(target_conf, remote, PARTITIONS, "target", read_committed=True) >= expected:
                    copied = time.monotonic() - child.started
                    break
            except Exception:  # noqa: BLE001 - the remote topic does not exist yet
                pass
            time.sleep(0.5)
        if copied is None:
            out["note"] = f"the copy did not complete within {MM2_COPY_BUDGET:.0f} s (see {out['log']})"
            return out
        out["copy_seconds"] = round(copied, 2)
        say(f"MirrorMaker 2 ({aliases[0]}->{aliases[1]}): copy complete after {copied:.1f} s; waiting for group offsets")
        out["offsets"], out["sync_seconds"], out["note"] = _wait_groups(target_conf, remote, groups, child,
                                                                        MM2_GROUP_BUDGET)
        say(f"MirrorMaker 2: {out['note']}")
    return out


def _cleanup(source_conf: dict[str, Any], target_conf: dict[str, Any], topic: str, groups: list[str],
             eos: dict[str, Any], mm: dict[str, Any]) -> None:
    from eosmirror_tools.bench import mirror_runs

    topics.delete_topics(source_conf, [topic])
    made = [t for a in mm.get("aliases", []) for t in topics.topics_containing(target_conf, a)]
    made += [t for a in mm.get("aliases", []) for t in topics.topics_containing(source_conf, a)]
    internal = mirror_runs.internal_topics(eos["mirror"]) if eos.get("mirror") else []
    topics.delete_topics(target_conf, [topic] + made + internal)
    topics.delete_topics(source_conf, made)
    extra = [f"{mm['aliases'][0]}-mm2"] if mm.get("aliases") else []
    topics.delete_groups(source_conf, groups)
    topics.delete_groups(target_conf, groups + extra)


def run(source_conf: dict[str, Any], target_conf: dict[str, Any], quick: bool, keep: bool, folder: Path,
        say: Callable[[str], None]) -> dict[str, Any]:
    """Seed, commit the group positions, fail over with both systems, count; the report's ``rereads``."""
    records, group_count = (QUICK_RECORDS, QUICK_GROUPS) if quick else (RECORDS, GROUPS)
    prefix = f"bench-rr{uuid.uuid4().hex[:8]}"
    topic, eos, mm = f"{prefix}-orders", {}, {}
    topics.create_topics(source_conf, [topic], PARTITIONS, "source")
    source = seed_source(source_conf, topic, records)
    ends = {p: _end(source_conf, topic, p) for p in range(PARTITIONS)}
    wanted = {f"{prefix}-g{g}": offsets for g, offsets in positions(ends, group_count).items()}
    at_end = [group for group, offsets in wanted.items() if offsets == ends]
    commit_positions(source_conf, topic, {g: o for g, o in wanted.items() if g not in at_end})
    for group in at_end:
        read_to_end(source_conf, topic, group)
    wanted.update(target_offsets(source_conf, topic, at_end))   # what the real consumers committed
    expected = sum(len(r) for r in source.values())
    say(f"{expected:,} committed records on {PARTITIONS} partitions (+ aborted transactions, "
        f"log ends {sorted(ends.values())}), {group_count} groups committed")
    try:
        eos = run_eosmirror(source_conf, target_conf, topic, prefix, say)
        eos["result"] = score(source, read_target(target_conf, topic), wanted,
                              target_offsets(target_conf, topic, list(wanted)))
        mm = run_mm2(source_conf, target_conf, topic, prefix, list(wanted), expected, folder, say)
        if "offsets" in mm:
            mm["result"] = score(source, read_target(target_conf, mm["target_topic"]), wanted, mm.pop("offsets"))
    finally:
        if not keep:
            _cleanup(source_conf, target_conf, topic, list(wanted), eos, mm)
    return {"partitions": PARTITIONS, "records_per_partition": records, "groups": group_count,
            "committed_records": expected, "source_log_ends": ends,
            "positions": "a third 5-30% into the log, a third 30-99%, a third at the end",
            "mm2_settings": {"sync.group.offsets.enabled": "true", "emit.checkpoints.interval.seconds": "1",
                             "sync.group.offsets.interval.seconds": "1", "offset.lag.max": "100 (default)",
                             "delivery": "at-least-once (default)"},
            "systems": {"eosmirror": eos, "mm2": mm}}


def _end(conf: dict[str, Any], topic: str, partition: int) -> int:
    from eosmirror.kafka import readers
    from eosmirror.kafka.cluster import Cluster

    return readers.watermarks(Cluster.from_settings("source", conf), topic, partition, False)[1]


def targets(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The issue's goal: eosmirror re-reads and skips nothing after failover."""
    result = (section or {}).get("systems", {}).get("eosmirror", {}).get("result")
    if not result:
        return []
    return [{"target": f"eosmirror {what} after failover ({section['groups']} groups)", "goal": "0",
             "measured": result[what], "met": result[what] == 0} for what in ("rereads", "skips")]


def verified(section: dict[str, Any] | None) -> bool:
    """eosmirror synced every group with zero re-reads and zero skips (True when the step did not run)."""
    if section is None:
        return True
    result = section["systems"]["eosmirror"].get("result") or {}
    return (result.get("groups_synced") == section["groups"] and result.get("rereads") == 0
            and result.get("skips") == 0)
