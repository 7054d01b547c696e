"""MirrorMaker 2 in dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``), from the
connect-mirror jars already in ``var/kafka-lib``, exactly-once or at-least-once. By default at the pom's
Kafka version; ``version=`` runs another release's MirrorMaker 2 (fetched once into
``var/kafka-lib/<version>+mm2``, runtime.ensure_kafka_lib; exactly-once needs 3.5+).

Each configuration gets fresh cluster aliases. MM2 names its internal topics and its worker group
after the aliases (``mm2-offsets.<source alias>.internal``, group ``<source alias>-mm2``, ...), so a
fresh alias pair means a fresh MM2 with no stored offsets or connector configs, and its clean-up can
delete exactly the topics whose names hold the aliases.

Timing: from process start until a read_committed count on the target reaches N (the issue's
definition, resolved to the 0.25 s offset polls by ``Completion``), plus the time of the first
record on the target, which separates the start-up cost from the copy rate.
"""

from __future__ import annotations

import datetime as dt
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from eosmirror_tools.kit import measured, runtime
from eosmirror_tools.kit.counting import CommittedCounter, end_offsets, offsets_admin, wait_until_stable
from eosmirror_tools.kit.processes import TreeUsage

POLL_SECONDS = 0.25
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"

def free_port() -> int:
    """A loopback port nobody listens on now (MM2's internal REST server binds it right after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# MirrorMaker 2 as its users tune it for throughput (issue #29): bigger polls and fetches (with
# exactly-once, one transaction per poll), producer batching. Each run of MM2 in the bench is made
# both at its defaults and with these; the row names the set it ran with.
TUNED = {
    "{source}.consumer.max.poll.records": "20000",
    "{source}.consumer.max.partition.fetch.bytes": "8388608",
    "{source}.consumer.fetch.max.bytes": "67108864",
    "{target}.producer.linger.ms": "10",
    "{target}.producer.batch.size": "1048576",
}


def properties(source_alias: str, target_alias: str, source_bootstrap: str, target_bootstrap: str,
               topics_regex: str, exactly_once: bool, rest_port: int, tasks: int = 2,
               extra: dict[str, str] | None = None) -> dict[str, str]:
    a, b = source_alias, target_alias
    props = {
        "clusters": f"{a}, {b}",
        f"{a}.bootstrap.servers": source_bootstrap,
        f"{b}.bootstrap.servers": target_bootstrap,
        f"{a}->{b}.enabled": "true",
        f"{a}->{b}.topics": topics_regex,
        f"{b}->{a}.enabled": "false",
        # No heartbeats: also keeps MM2 from building a B->A herder at all.
        "emit.heartbeats.enabled": "false",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "tasks.max": str(tasks),
        # Aborted or open source transactions are never mirrored in either mode (and MM2 reports
        # exactly-once support only with read_committed).
        f"{a}.consumer.isolation.level": "read_committed",
        # KIP-710: dedicated mode's internal REST, on loopback (needed for EOS task fencing).
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": f"http://127.0.0.1:{rest_port}",
        # Single-node clusters: replication factor 1 for every topic MM2 creates.
        "replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "sync.topic.configs.enabled": "false",
        "sync.topic.acls.enabled": "false",
        # Topics are created just before MM2 starts; find them fast (default: every 10 minutes).
        "refresh.topics.interval.seconds": "2",
        # MM2's own start-up log recommends this ("All plugins have ServiceLoader manifests"): it
        # skips a reflective classpath scan of about 2-3 s, so MM2 is timed as a careful operator runs it.
        "plugin.discovery": "service_load",
    }
    if exactly_once:
        # Not `exactly.once.support = required`: MM2 then refuses to configure its heartbeat and
        # checkpoint connectors (they implement no preflight check) and logs errors for them.
        props[f"{b}.exactly.once.source.support"] = "enabled"
    # Extra settings may name the per-configuration aliases as {source} and {target}, e.g.
    # "{source}->{target}.transaction.boundary=interval" or "{target}.producer.linger.ms=20".
    for key, value in (extra or {}).items():
        props[key.replace("{source}", a).replace("{target}", b)] = value.replace("{source}", a).replace("{target}", b)
    return props


def write_files(folder: Path, props: dict[str, str]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    props_path = folder / "mm2.properties"
    log4j_path = runtime.log4j_config("mm2-log4j2.properties", config_dumps=True)
    props_path.write_text("# written by eosmirror_tools.bench (one configuration, fresh aliases)\n"
                          + "".join(f"{k} = {v}\n" for k, v in props.items()))
    return props_path, log4j_path


class Completion:
    """When were N records committed on the target? Decided without slowing the copy down.

    Every poll stores a snapshot (time, last stable offsets) when the offsets moved. Counting
    (Python reading every record) would compete with MM2 for the CPU, so it waits until the
    target is quiet (offsets unchanged for ``QUIET_SECONDS``, sum at least N); then the stored
    snapshots are counted in time order, incrementally, and the first one holding N committed
    records gives the completion time. Records below a last stable offset are decided at the
    snapshot's time, so counting them later gives the count of that moment. MM2 keeps running
    until the count confirms, so a stall that looks like quiet only delays the decision.
    """

    QUIET_SECONDS = 1.5

    def __init__(self, counter: CommittedCounter, expected: int):
        self.counter, self.expected = counter, expected
        self.snapshots: list[tuple[float, dict[int, int]]] = []
        self.checked = 0   # snapshots before this index hold fewer than N committed records

    def add(self, at: float, stable: dict[int, int]) -> None:
        if not self.snapshots or stable != self.snapshots[-1][1]:
            self.snapshots.append((at, stable))   # the earliest time these offsets were seen

    def done_at(self, now: float) -> float | None:
        if not self.snapshots:
            return None
        last_change, latest = self.snapshots[-1]
        if sum(latest.values()) < self.expected or now - last_change < self.QUIET_SECONDS:
            return None
        for at, ends in self.snapshots[self.checked:]:
            if sum(ends.values()) >= self.expected and self.counter.count_to(ends) >= self.expected:
                return at
        self.checked = len(self.snapshots)
        return None


@dataclass
class Mm2Run:
    start_to_done: float = 0.0           # process start -> read_committed count reached N
    start_to_first: float | None = None  # process start -> first record on the target
    final_count: int = 0                 # read_committed count of the whole target topic after the stop
    offsets: int = 0
    exit_code: int | None = None
    peak: TreeUsage = field(default_factory=TreeUsage)
    evidence: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def command(props_path: Path, log4j_path: Path, version: str | None = None) -> list[str]:
    """MM2's command line: the default version's jars, or ``version``'s MirrorMaker 2 (before 4.0 it logs
    through log4j 1, configured by runtime.java_command)."""
    if version == runtime.kafka_version():
        version = None   # the default path: its folder already holds connect-mirror
    return runtime.java_command(MAIN_CLASS, str(props_path), extra_jvm=(f"-Dlog4j2.configurationFile={log4j_path}",),
                                version=version, mm2=version is not None)


def run(props: dict[str, str], folder: Path, target_conf: dict[str, Any], topic: str, partitions: int,
        expected: int, timeout: float, progress: Callable[[str], None], version: str | None = None,
        grace: float = 20.0) -> Mm2Run:
    """Start MM2 (of ``version``; default: the pom's), wait until ``expected`` records are committed on the
    target, stop it (SIGTERM, SIGKILL after ``grace`` s), count again."""
    props_path, log4j_path = write_files(folder, props)
    log_path = folder / "mm2.log"
    log_path.unlink(missing_ok=True)
    cmd = command(props_path, log4j_path, version)
    out = Mm2Run()
    counter = CommittedCounter(target_conf, topic, partitions)
    admin = offsets_admin(target_conf)
    wall_started = dt.datetime.now()
    child = measured.child(cmd, log_path, cwd=folder, grace=grace)
    completion = Completion(counter, expected)
    try:
        with child:
            last_note = child.started
            while True:
                if not child.running():
                    out.exit_code = child.proc.returncode if child.proc else None
                    raise RuntimeError(f"MirrorMaker 2 exited early (code {out.exit_code}); last lines of "
                                       f"{log_path}:\n{child.log_tail()}")
                if time.monotonic() - child.started > timeout:
                    raise TimeoutError(f"MirrorMaker 2 did not copy {expected} records within {timeout:.0f} s; "
                                       + _stall_state(target_conf, topic, partitions, admin, counter))
                high = sum(end_offsets(target_conf, topic, partitions, "target", False, admin).values())
                if out.start_to_first is None and high > 0:
                    out.start_to_first = time.monotonic() - child.started
                stable = end_offsets(target_conf, topic, partitions, "target", True, admin)
                completion.add(time.monotonic(), stable)   # everything below `stable` was committed by now
                done_at = completion.done_at(time.monotonic())
                if done_at is not None:
                    out.start_to_done = done_at - child.started
                    break
                if time.monotonic() - last_note >= 5:
                    last_note = time.monotonic()
                    progress(f"{high:,} offsets on the target ({min(high / expected, 1):.0%}) after "
                             f"{last_note - child.started:.0f} s")
                time.sleep(POLL_SECONDS)
        out.exit_code = child.proc.returncode if child.proc else None
        # After the stop: nothing may have been added (duplicates from a shutdown would show here).
        ends = wait_until_stable(target_conf, topic, partitions, "target")
        out.final_count = counter.count_to(ends)
        out.offsets = sum(ends.values())
    except Exception as exc:  # noqa: BLE001 - the configuration fails; the bench goes on
        out.error = f"{type(exc).__name__}: {exc}"
    finally:
        counter.close()
        out.peak, out.cpu = child.peak, child.cpu()
    out.evidence = evidence(log_path, wall_started)
    return out


def _stall_state(target_conf: dict[str, Any], topic: str, partitions: int, admin: Any,
                 counter: CommittedCounter) -> str:
    """Why a copy never completed: a transaction left open (last stable offset below the high
    watermark), or everything decided with records missing."""
    try:
        high = end_offsets(target_conf, topic, partitions, "target", False, admin)
        stable = end_offsets(target_conf, topic, partitions, "target", True, admin)
        open_at = {p: (stable[p], high[p]) for p in high if stable.get(p, 0) < high[p]}
        counted = counter.count_to(stable, timeout=60)
    except Exception as exc:  # noqa: BLE001 - a diagnosis must not hide the timeout
        return f"(state unknown: {type(exc).__name__}: {exc})"
    if open_at:
        return (f"{counted:,} committed records; a transaction stays open on partitions (LSO, HW): {open_at}")
    return f"every transaction is decided, yet only {counted:,} committed records are on the target"


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def _seconds_after(line: str, start: dt.datetime) -> float | None:
    match = _STAMP.match(line)
    if not match:
        return None
    return round((dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f") - start).total_seconds(), 2)


def evidence(log_path: Path, started: dt.datetime) -> dict[str, Any]:
    """What MM2's log says it ran: exactly-once source tasks or plain ones, their transactional ids,
    start-up milestones, and errors."""
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    lines = text.splitlines()

    def first(pattern: str) -> float | None:
        for line in lines:
            if pattern in line:
                return _seconds_after(line, started)
        return None

    eos_tasks = sorted(set(re.findall(r"ExactlyOnceWorkerSourceTask\{id=(MirrorSourceConnector-\d+)\}", text)))
    plain_tasks = sorted(set(re.findall(r"(?<!ExactlyOnce)WorkerSourceTask\{id=(MirrorSourceConnector-\d+)\}", text)))
    return {
        "exactly_once_source_tasks": eos_tasks,
        "plain_source_tasks": plain_tasks,
        "transactional_ids": sorted(set(re.findall(r"transactional\.id = (\S*MirrorSourceConnector-\d+)", text))),
        "exactly_once_source_support": sorted(set(re.findall(r"exactly\.once\.source\.support = (\w+)", text))),
        "source_isolation_level": sorted(set(re.findall(r"isolation\.level = (\w+)", text))),
        "seconds_to_mirrormaker_started": first("Kafka MirrorMaker started"),
        "seconds_to_source_task_started": first("Source task finished initialization and start"),
        "error_lines": [l[:300] for l in lines if "] ERROR " in l][:10],
        "log": str(log_path),
    }
