"""The whole disaster-recovery drill against real brokers, each step by an operator: the CLI
(:class:`CliOperator`, tests/e2e/test_dr_drill.py) or Airflow's REST API (:class:`RestOperator`,
tests/e2e/test_airflow_scheduler.py). What the drill does and judges: tests/e2e/test_dr_drill.py's
docstring."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from eosmirror.airflow import dagids
from eosmirror.core import naming
from eosmirror_tools.kit import cluster, runtime, waits
from tests.helpers import cli, committed_offsets, create_topic, producer, read_all, transactional_batches
from tests.support.clusters import PARTITIONS, json_tail
from tests.support.consumers import java_group_read
from tests.support.groups import commit_offsets, consume_and_commit
from tests.support.load import wait_grown
from tests.support.transactions import abort_hanging_transaction
from tests.support.waiting import wait_for

CLI_BUDGET = 300


FOLLOW_SECONDS = 600   # the follow run's own bound: far beyond the drill's disaster (it is killed in a finally)


# The follow run is stopped (SIGSTOP) this long before A dies, while the producers write: the mirror is
# behind the source at the disaster, as when its host stalls, so records diverge in every run (a
# follower in step with A commits nearly all A had, and nothing diverged in two runs of three).
FOLLOWER_STALL_S = 2.0


def seq(value: bytes | str) -> int:
    """The sequence number of a drill record ``partition:sequence``."""
    text = value.decode() if isinstance(value, bytes) else value
    return int(text.split(":")[1])


class Writer:
    """The application's producers: numbered records ``k:n`` to every partition of ONE cluster at a
    time (idempotent, so offsets are records). The numbers go on when the producers move to the other
    cluster: a consumer's "next record" is then judged by the values alone."""

    def __init__(self, topic: str):
        self.topic = topic
        self.next = {k: 0 for k in range(PARTITIONS)}
        self.stop_event, self.thread = threading.Event(), None

    def start(self, conf: dict[str, Any]) -> "Writer":
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(conf,), daemon=True)
        self.thread.start()
        return self

    def _run(self, conf: dict[str, Any]) -> None:
        p = producer(conf, **{"enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 10_000})
        while not self.stop_event.is_set():
            for k in range(PARTITIONS):
                p.produce(self.topic, value=f"{k}:{self.next[k]}".encode(), partition=k)
                self.next[k] += 1
            p.poll(0)
            time.sleep(0.02)   # pacing, not a wait: about 50 records per partition a second
        p.flush(15)

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(30)
            assert not self.thread.is_alive(), "the producer thread did not stop within 30 s"

    def burst(self, conf: dict[str, Any], seconds: float) -> None:
        self.start(conf)
        time.sleep(seconds)   # elapsed time, not a wait: the producers write for this long
        self.stop()


@dataclass
class Steps:
    """The drill's clock: one row per step (what, seconds, what it did)."""

    rows: list[list[Any]] = field(default_factory=list)

    @contextlib.contextmanager
    def step(self, name: str):
        row = [name, None, ""]
        started = time.monotonic()
        try:
            yield row
        finally:
            row[1] = f"{time.monotonic() - started:.1f}"
            self.rows.append(row)

    def table(self) -> str:
        width = max(len(r[0]) for r in self.rows)
        return "\n".join([f"{'step'.ljust(width)}  seconds  outcome", f"{'-' * width}  -------  -------"] +
                         [f"{name.ljust(width)}  {secs:>7}  {outcome}" for name, secs, outcome in self.rows])


def ok(done: subprocess.CompletedProcess, *codes: int) -> subprocess.CompletedProcess:
    assert done.returncode in (codes or (0,)), f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def first_records_of_group(conf: dict[str, Any], group: str, topic: str) -> dict[int, str]:
    """A librdkafka consumer joins ``group`` (subscribe, read_committed, starting at the group's committed
    offsets) and returns, per partition, the first record it receives. Commits nothing."""
    from confluent_kafka import Consumer

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "latest",
                         "isolation.level": "read_committed"})
    first: dict[int, str] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.partition() not in first:
                first[msg.partition()] = msg.value().decode()
    finally:
        consumer.close()
    assert len(first) == PARTITIONS, f"group {group} received records of partitions {sorted(first)} only in 60 s"
    return first


def values_of(conf: dict[str, Any], topic: str, k: int, read_committed: bool = True) -> list[str]:
    return [r.value.decode() for r in read_all(conf, topic, k, read_committed=read_committed)]


def next_after(log: list[str], last: str) -> str | None:
    """The record after ``last`` in a partition's log (None: ``last`` ends it)."""
    at = log.index(last)
    return log[at + 1] if at + 1 < len(log) else None


def decisions(report: dict[str, Any]) -> str:
    """'6 write' from a group sync's report: how many partitions of the groups got which decision."""
    counted: dict[str, int] = {}
    for group in report["groups"]:
        for p in group["partitions"]:
            counted[p["decision"]] = counted.get(p["decision"], 0) + 1
    return ", ".join(f"{n} {decision}" for decision, n in sorted(counted.items()))


def judge_next(group: str, first_on_a: dict[int, str], last_on_b: dict[int, str], b_log: dict[int, list[str]]) -> None:
    """Per partition, the first record ``group`` received on A is the record after the last one it
    processed on B, in B's log (values are unique: ``partition:sequence``)."""
    assert sorted(first_on_a) == list(range(PARTITIONS)), f"group {group} received on partitions {sorted(first_on_a)}"
    for k in range(PARTITIONS):
        expected, got = next_after(b_log[k], last_on_b[k]), first_on_a[k]
        assert expected is not None, f"nothing after {last_on_b[k]} on B[{k}]: the drill produced too little there"
        what = "a re-read" if seq(got) <= seq(last_on_b[k]) else f"{seq(got) - seq(expected)} record(s) skipped"
        assert got == expected, (f"group {group}, partition {k}: processed {last_on_b[k]} last on B, received {got} "
                                 f"first on A instead of {expected}: {what}")


def stable_everywhere(conf: dict[str, Any], topics: list[str]) -> list[str]:
    """Partitions whose last stable offset (read_committed) is below the high watermark: a transaction
    still open there. Asked of the broker with librdkafka's ListOffsets, both isolation levels."""
    from confluent_kafka import IsolationLevel, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(conf)
    described = admin.describe_topics(TopicCollection(topics))
    parts = [TopicPartition(t, p.id) for t, f in described.items() for p in f.result(30).partitions]
    ends = {}
    for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        asked = admin.list_offsets({tp: OffsetSpec.latest() for tp in parts}, isolation_level=level)
        ends[level] = {(tp.topic, tp.partition): f.result(30).offset for tp, f in asked.items()}
    return [f"{t}[{p}] LSO {ends[IsolationLevel.READ_COMMITTED][(t, p)]} < HW {hw}"
            for (t, p), hw in ends[IsolationLevel.READ_UNCOMMITTED].items()
            if ends[IsolationLevel.READ_COMMITTED][(t, p)] != hw]


def hanging_transactions(conf: dict[str, Any]) -> list[str]:
    """Kafka's ``kafka-transactions.sh find-hanging`` on the broker (node 1): every transaction open on a
    partition (``--max-transaction-timeout 0``: however young) that its coordinator no longer knows."""
    done = runtime.kafka_transactions(conf["bootstrap.servers"], "find-hanging", "--broker-id", "1",
                                      "--max-transaction-timeout", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.split()[:2] == ["Topic", "Partition"]), None)
    assert header is not None, done.stdout          # the table's header (log lines may come first)
    return lines[header + 1:]


def topics_of(conf: dict[str, Any], *parts: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    names = AdminClient(conf).list_topics(timeout=30).topics
    return sorted(t for t in names if not parts or any(p in t for p in parts))


class CliOperator:
    """Each step as an operator types it: ``eosmirror <command>`` in a new process."""

    def __init__(self, config: Path):
        self.config = str(config)

    def __call__(self, *args: str, codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        return ok(cli(*args, "--config", self.config, timeout=CLI_BUDGET), *codes)

    def record_lag(self, mirror: str) -> None:
        self("lag", mirror, "--record")

    def run(self, mirror: str) -> dict[str, Any]:
        result = Path(self.config).with_name(f"run-{mirror}-{time.monotonic_ns()}.json")
        self("run", mirror, "--inprocess", "--result-json", str(result))
        return json.loads(result.read_text())

    def promote(self, mirror: str) -> tuple[int, dict[str, Any]]:
        done = self("promote", mirror, "--source-seconds", "3", "--no-pause", "--json", codes=(0, 5, 6))
        return done.returncode, json_tail(done.stdout)

    def failback(self, mirror: str, groups: list[str]) -> str:
        done = self("groups", "sync", mirror, "--direction", "failback", "--json", "--groups", *groups)
        return decisions(json_tail(done.stdout))

    def switch_back(self, mirror: str) -> dict[str, Any]:
        done = self("switchover", naming.reverse_mirror_name(mirror), "--quiet-seconds", "2", "--wait-seconds", "60",
                    "--no-pause", "--json")
        return json_tail(done.stdout)

    def resume(self, mirror: str) -> dict[str, Any]:
        return json_tail(self("resume", mirror, "--no-unpause", "--json").stdout)

    def reverse(self, mirror: str, source_conf: dict[str, Any], topic: str) -> dict[str, Any]:
        self.aborted = 0
        for _ in range(PARTITIONS + 2):   # the killed transaction, one partition per refusal, while the broker holds it
            done = cli("reverse", mirror, "--config", self.config, "--divergence", "copy", "--no-unpause",
                       "--settle-seconds", "5", "--json", timeout=CLI_BUDGET)
            if "still held by an open transaction" not in done.stderr:
                break
            abort_hanging_transaction(source_conf, done.stderr)     # as the refusal tells the operator
            self.aborted += 1
        return json_tail(ok(done).stdout)


@dataclass
class Drill:
    a_conf: dict[str, Any]
    b_conf: dict[str, Any]
    topic: str
    mirror: str
    op: "CliOperator | RestOperator"      # the same drill, each step by the CLI or by Airflow's REST API
    writer: Writer
    steps: Steps = field(default_factory=Steps)
    groups: dict[str, str] = field(default_factory=dict)          # role -> group id
    first_on_b: dict[int, int] = field(default_factory=dict)      # the first sequence produced on B
    promoted: dict[str, Any] = field(default_factory=dict)
    reversed_: dict[str, Any] = field(default_factory=dict)
    processed_on_b: dict[str, dict[int, str]] = field(default_factory=dict)   # group -> partition -> last value
    after_failback: dict[str, dict[int, int]] = field(default_factory=dict)   # group -> partition -> offset on A
    first_final: dict[int, int] = field(default_factory=dict)     # the first sequence produced on A after resume
    follower: subprocess.Popen | None = None                     # the CLI drill's follow run A -> B
    follower_log: Path = Path("follower.log")
    follower_json: Path = Path("follower.json")
    follower_end: tuple[int, dict[str, Any] | None] | None = None   # its exit code and report
    killed_at: float = 0.0                                        # epoch s of A's SIGKILL
    promote_code: int | None = None                               # the promotion's exit code
    restarting: threading.Thread | None = None                    # A's restart, beside the steps on B
    restart_failure: list[BaseException] = field(default_factory=list)

    @property
    def reverse_mirror(self) -> str:
        return naming.reverse_mirror_name(self.mirror)

    def forward_under_load(self, runs: int = 3) -> None:
        """A -> B: scheduled runs while the producers write, aborted transactions among the records (the
        REST drill: Airflow's manual runs never follow, docs/recovery-point.md)."""
        self.writer.start(self.a_conf)
        for i in range(runs):
            wait_grown(self.a_conf, self.topic, range(PARTITIONS), 30, "the producers on A")
            self.aborted_batch(i)
            with self.steps.step(f"forward run {i + 1} (A -> B, under load)") as row:
                report = self.op.run(self.mirror)
                assert report["status"] == "ok", report
                row[2] = f"{report['records']} records"
        self.observe()
        wait_grown(self.a_conf, self.topic, range(PARTITIONS), 30,
                   "the producers on A after the observation")   # the records that diverge

    def aborted_batch(self, i: int) -> None:
        for k in range(PARTITIONS):
            transactional_batches(self.a_conf, self.topic, f"{self.mirror}-aborting-{i}-{k}",
                                  [(False, [f"{k}:aborted-{i}".encode()] * 3)], partition=k)

    def observe(self) -> None:
        with self.steps.step("lag --record (the promotion's observation)") as row:
            self.op.record_lag(self.mirror)
            row[2] = "observed source ends recorded"

    def follow_under_load(self, work: Path) -> None:
        """A -> B following (the CLI drill): one ``eosmirror run m --follow-seconds`` started in the
        background while the producers write, aborted transactions among the records; it is following
        once B holds records produced after B showed records produced after its start (its bounded
        part ends at the plan, so the second mark is past it). ``lag --record`` is taken last, just
        before the disaster: the follower copies on past it."""
        self.writer.start(self.a_conf)
        self.follower_log, self.follower_json = work / "follower.log", work / "follower.json"
        with self.steps.step("follow run copying (A -> B, under load)") as row:
            with self.follower_log.open("w") as out:
                self.follower = subprocess.Popen(
                    [sys.executable, "-m", "eosmirror.cli", "run", self.mirror, "--config", str(self.op.config),
                     "--inprocess", "--follow-seconds", str(FOLLOW_SECONDS), "--result-json", str(self.follower_json)],
                    stdout=out, stderr=subprocess.STDOUT)
            for i in range(3):
                wait_grown(self.a_conf, self.topic, range(PARTITIONS), 30, "the producers on A")
                self.aborted_batch(i)
            for mark in ("its start", "that"):
                self.wait_copied(dict(self.writer.next), f"records produced after {mark}")
            row[2] = f"B holds sequences up to {self.last_on_b()} per partition, copied while following"
        self.observe()

    def last_on_b(self) -> list[int]:
        """The last sequence per partition of the topic on B (read_committed), -1 when none."""
        from eosmirror.core.errors import TargetMismatchError

        try:
            return [max([seq(v) for v in values_of(self.b_conf, self.topic, k) if ":" in v and
                         v.split(":")[1].isdigit()], default=-1) for k in range(PARTITIONS)]
        except TargetMismatchError:          # the follower has not created the topic on B yet
            return [-1] * PARTITIONS

    def wait_copied(self, mark: dict[int, int], what: str) -> None:
        def copied() -> tuple[bool, Any]:
            assert self.follower is not None
            if self.follower.poll() is not None:
                raise AssertionError(f"the follow run ended (exit {self.follower.returncode}) before copying {what}:"
                                     f"\n{self.follower_log.read_text()[-3000:]}")
            last = self.last_on_b()
            return all(last[k] >= mark[k] for k in range(PARTITIONS)), f"B's last sequences {last}, waiting for {mark}"

        wait_for(f"the follow run to copy {what} to B", copied, waits.service_budget(40, cap_seconds=120))

    def follower_ended(self) -> None:
        """After the promotion's fence: the follow run ends by itself within a budget, as what it is:
        a run that was stopped - exit 1, its report "failed", its slots fenced (seen: "a newer instance
        of transactional id ... took over") or failed on the dead source, never "handed-over" (a hand-over
        is the next run of a MIRRORING mirror taking over; promote records "promoting" first)."""
        assert self.follower is not None
        budget = waits.service_budget(60, cap_seconds=150)
        with self.steps.step("the follow run ends (A dead, fenced)") as row:
            try:
                self.follower.wait(budget)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the follow run still runs {budget:.0f} s after the promotion "
                                     f"({waits.machine_now()}); its output:\n"
                                     f"{self.follower_log.read_text()[-3000:]}") from None
            self.follower_end = (self.follower.returncode, json.loads(self.follower_json.read_text())
                                 if self.follower_json.exists() else None)
            report = self.follower_end[1] or {}
            slots = report.get("slots", [])
            ended = time.time() - self.killed_at if report.get("finished_at") is None else (
                dt.datetime.fromisoformat(report["finished_at"]).timestamp() - self.killed_at)
            row[2] = (f"exit {self.follower.returncode} {ended:.1f} s after the SIGKILL, status {report.get('status')}, "
                      f"slots {sorted({s.get('status') for s in slots})}")
        seen = f"{self.follower_end}\n{self.follower_log.read_text()[-3000:]}"
        assert self.follower.returncode == 1 and report.get("status") == "failed", seen
        assert slots and all(s["status"] in ("fenced", "failed") and s.get("error") for s in slots), seen

    def kill_a_with_transactions_open(self, cluster_a) -> None:
        if self.follower is not None:
            assert self.follower.poll() is None, f"the follow run ended before the disaster:\n{self.follower_log.read_text()[-3000:]}"
            os.kill(self.follower.pid, signal.SIGSTOP)     # the mirror falls behind: FOLLOWER_STALL_S
            time.sleep(FOLLOWER_STALL_S)   # elapsed time, not a wait: the stall lasts this long
        txn = producer(self.a_conf, **{"transactional.id": f"{self.mirror}-open-txn", "transaction.timeout.ms": 10_000})
        txn.init_transactions(30)
        txn.begin_transaction()
        for k in range(PARTITIONS):
            txn.produce(self.topic, value=f"{k}:in-flight".encode(), partition=k)
        txn.flush(10)
        following = f", the follow run stalled for {FOLLOWER_STALL_S:g} s" if self.follower is not None else ""
        with self.steps.step(f"SIGKILL A (producers writing, a transaction open{following})") as row:
            self.killed_at = time.time()
            cluster.stop(cluster_a, hard=True)
            if self.follower is not None:
                os.kill(self.follower.pid, signal.SIGCONT)
        self.writer.stop()
        row[2] = f"sequences sent up to {self.writer.next[0] - 1} per partition"

    def promote(self) -> None:
        with self.steps.step("promote (A down)") as row:
            code, self.promoted = self.op.promote(self.mirror)
            row[2] = f"exit {code}, up to {self.promoted['may_be_lost']} record(s) may be lost"
        assert self.promoted["state"] == "promoted", self.promoted
        self.promote_code = code
        # A is down: the mirror's final group sync cannot run, and the promotion says so, never "success".
        steps = {step["name"]: step["status"] for step in self.promoted["steps"]}
        assert steps["final group sync"] == "failed" and self.promoted["not_run"] == ["final group sync"], self.promoted
        if self.follower is None:   # scheduled runs: the observation is past the last run's end
            assert code == 5 and self.promoted["may_be_lost"] > 0, self.promoted
        else:   # a follower may have committed past the observation: then nothing KNOWN is missing (exit 6: the
            # group sync did not run); whether the promotion said so truthfully is judged against A's records later
            assert code in (5, 6), self.promoted

    def promote_fences_the_follower(self) -> None:
        """The follow run's transaction may be open on B when A dies: the promotion fences it, so B's
        topic is stable (LSO = HW), and the follow run ends."""
        self.promote()
        unstable = stable_everywhere(self.b_conf, [self.topic])
        assert not unstable, f"after the promotion's fence a transaction is still open on B: {unstable}"
        self.follower_ended()

    def producers_and_consumers_on_b(self, unique) -> None:
        """Producers move to B; a ConsoleConsumer group reads all there is, a librdkafka group part of
        it (5 records into what B received), both commit; then the producers write more on B."""
        self.first_on_b = dict(self.writer.next)
        with self.steps.step("producers on B (2 s)") as row:
            self.writer.burst(self.b_conf, 2)
            row[2] = f"sequences {self.first_on_b[0]}..{self.writer.next[0] - 1} per partition"
        self.groups = {"console": unique("app-console"), "librdkafka": unique("app-rdkafka")}
        with self.steps.step("consumer groups read on B and commit") as row:
            # Nothing writes to B's topic now: the ConsoleConsumer group reads all B holds (as a librdkafka
            # reader sees it) and ends there, rather than 6 s later with nothing more to read.
            counts, logs = {}, {k: read_all(self.b_conf, self.topic, k) for k in range(PARTITIONS)}
            got = java_group_read(self.b_conf, self.topic, self.groups["console"],
                                  sum(len(log) for log in logs.values()), idle_ms=6000)
            self.processed_on_b[self.groups["console"]] = {k: got[k][-1][1] for k in range(PARTITIONS)}
            for k, log in logs.items():
                first_b = next(i for i, r in enumerate(log) if seq(r.value) >= self.first_on_b[k])
                assert len(log) - first_b > 5, (k, len(log), first_b)
                counts[k] = first_b + 5
            committed = consume_and_commit(self.b_conf, self.groups["librdkafka"], self.topic, counts)
            # what it processed last: the record before its committed offset (an offset, not an index)
            self.processed_on_b[self.groups["librdkafka"]] = {
                k: next(r.value.decode() for r in logs[k] if r.offset == committed[k] - 1) for k in range(PARTITIONS)}
            row[2] = f"console read {sum(len(v) for v in got.values())}, librdkafka {sum(counts.values())}"
        for group, last in self.processed_on_b.items():
            for k, value in last.items():
                assert seq(value) >= self.first_on_b[k], f"{group} stopped before B's own records, {k}: {value}"
        with self.steps.step("producers on B again (1.5 s)") as row:
            self.writer.burst(self.b_conf, 1.5)
            row[2] = f"sequences up to {self.writer.next[0] - 1} per partition"

    def start_restarting_a(self, cluster_a) -> None:
        """A's broker starts again in the background once B is promoted (and the follow run has ended):
        the steps on B that follow never touch A, and its 10-15 s start is waited for only before the
        reverse, which is the first step that needs A."""
        def restart() -> None:
            try:
                cluster.start(cluster_a, timeout=waits.service_budget(90, cap_seconds=240))
            except BaseException as exc:   # noqa: BLE001 - raised in the drill's thread by restart_a_and_reverse
                self.restart_failure.append(exc)

        self.restarting = threading.Thread(target=restart, name="restart-a", daemon=True)
        self.restarting.start()

    def restart_a_and_reverse(self, cluster_a) -> None:
        with self.steps.step("A restarted (waited for after the steps on B)") as row:
            assert self.restarting is not None, "A's restart was never started"
            self.restarting.join()
            if self.restart_failure:
                raise self.restart_failure[0]
            row[2] = "broker answers"
        with self.steps.step("reverse --divergence copy") as row:
            self.reversed_ = self.op.reverse(self.mirror, self.a_conf, self.topic)
            d = self.reversed_["divergence"]
            row[2] = (f"{d['total']} diverged ({'/'.join(str(p['count']) for p in d['partitions'])}) -> "
                      f"side topic on B; {getattr(self.op, 'aborted', 0)} hanging transaction(s) aborted first")
        assert self.reversed_["state"] == "reversed", self.reversed_
        if self.follower is not None:   # what A committed while the follower stalled never reached B
            assert d["total"] > 0, self.reversed_
        with self.steps.step("run m__reverse (B -> A)") as row:
            report = self.op.run(self.reverse_mirror)
            assert report["status"] == "ok", report
            row[2] = f"{report['records']} records"

    def failback_and_consumers_on_a(self) -> None:
        """The groups fail back to A; each consumer on A receives first exactly the record after the last
        one it processed on B (judged by its own records), and a group placed one record early is caught."""
        with self.steps.step("groups failback (B -> A, both offset maps)") as row:
            row[2] = self.op.failback(self.mirror, list(self.groups.values()))
        self.after_failback = {g: committed_offsets(self.a_conf, g, self.topic, PARTITIONS) for g in self.groups.values()}
        b_log = {k: values_of(self.b_conf, self.topic, k) for k in range(PARTITIONS)}
        with self.steps.step("consumer groups on A: first records") as row:
            # what A holds from the group's committed offsets on: the ConsoleConsumer group ends once it read it
            console = self.groups["console"]
            left = sum(1 for k in range(PARTITIONS) for r in read_all(self.a_conf, self.topic, k)
                       if r.offset >= self.after_failback[console][k])
            got = java_group_read(self.a_conf, self.topic, console, left, idle_ms=6000)
            judge_next(console, {k: got[k][0][1] for k in range(PARTITIONS) if got.get(k)},
                       self.processed_on_b[self.groups["console"]], b_log)
            group = self.groups["librdkafka"]
            judge_next(group, first_records_of_group(self.a_conf, group, self.topic), self.processed_on_b[group], b_log)
            row[2] = "2 groups x 3 partitions: the next record first, 0 re-reads, 0 skips"
        # The drill can fail: the same judge, given a group that landed one record early, says so.
        early, last = f"{group}-one-early", self.processed_on_b[group]
        placed = {k: next(r.offset for r in read_all(self.a_conf, self.topic, k) if r.value.decode() == last[k])
                  for k in range(PARTITIONS)}                      # the last processed record's offset on A
        assert all(placed[k] < self.after_failback[group][k] for k in range(PARTITIONS)), (placed, self.after_failback)
        commit_offsets(self.a_conf, early, self.topic, placed)
        with pytest.raises(AssertionError, match="a re-read"):
            judge_next(early, first_records_of_group(self.a_conf, early, self.topic), self.processed_on_b[group], b_log)

    def switch_back_and_resume(self) -> None:
        with self.steps.step("switch back (switchover m__reverse)") as row:
            outcome = self.op.switch_back(self.mirror)
            row[2] = f"{outcome['verdict']}, recovery {outcome['recovery_seconds']} s"
        with self.steps.step("resume m") as row:
            outcome = self.op.resume(self.mirror)
            row[2] = f"state {outcome.get('state')}"
        self.first_final = dict(self.writer.next)
        with self.steps.step("producers on A again (1.5 s)") as row:
            self.writer.burst(self.a_conf, 1.5)
            row[2] = f"sequences {self.first_final[0]}..{self.writer.next[0] - 1} per partition"
        with self.steps.step("forward run (A -> B, resumed)") as row:
            report = self.op.run(self.mirror)
            assert report["status"] == "ok", report
            row[2] = f"{report['records']} records"

    # --- the judgement ---------------------------------------------------------------------------------

    def check_every_record(self) -> None:
        """A holds its own records (the diverged ones included, where they were), then exactly what B
        received after the promotion, then what it received after the resume, once, in order; B holds A's
        records up to the promotion point and none that diverged, then the same; the side topic on B holds
        the diverged ones, once, in order."""
        self.check_the_promotions_claim()
        side = naming.diverged_topic(self.topic, self.mirror)
        # Nothing diverged, no side topic: a follower whose transaction, open at the SIGKILL, held all A
        # had and committed it to B (B stays up) leaves no divergence (seen in two passing runs of three).
        sides = [side] if side in topics_of(self.b_conf, side) else []
        progress = {p["partition"]: p["progress"] for p in self.promoted["partitions"]}
        for k in range(PARTITIONS):
            on_a = values_of(self.a_conf, self.topic, k)
            on_b = values_of(self.b_conf, self.topic, k)
            a_records = [r for r in read_all(self.a_conf, self.topic, k)]
            own = [r.value.decode() for r in a_records if seq(r.value) < self.first_on_b[k]]
            diverged = [r.value.decode() for r in a_records if r.offset >= progress[k]
                        and seq(r.value) < self.first_on_b[k]]
            final = self.first_final.get(k, float("inf"))      # produced on A after the resume
            from_b = [v for v in on_b if self.first_on_b[k] <= seq(v) < final]
            again_on_a = [v for v in on_a if seq(v) >= final]
            assert on_a == own + from_b + again_on_a, f"A's partition {k} is not its own records, B's, then its new ones"
            assert on_b == [v for v in own if v not in set(diverged)] + from_b + again_on_a, f"B's partition {k}"
            assert (values_of(self.b_conf, side, k) if sides else []) == diverged, f"the side topic's partition {k}"
            for log, where in ((on_a, "A"), (on_b, "B")):
                assert [seq(v) for v in log] == sorted(set(seq(v) for v in log)), f"{where}[{k}] out of order or twice"
            # 0 aborted records copied: none on B even read_uncommitted, in the topic or the side topic
            for name in [self.topic, *sides]:
                raw = values_of(self.b_conf, name, k, read_committed=False)
                copied_aborted = [v for v in raw if "aborted" in v or "in-flight" in v]
                assert not copied_aborted, f"aborted records copied to B's {name}[{k}]: {copied_aborted[:3]}"

    def check_the_promotions_claim(self) -> None:
        """What the promotion said may be lost, against a read_committed reader of A (back up since): per
        partition, A's records between the mirror's progress and the source end the promotion knew of are
        at most the "may be lost" it reported there; an exit 0 or 6 (nothing known missing) means none at all,
        on partitions that were all observed."""
        for p in self.promoted["partitions"]:
            k, start, end = p["partition"], p["progress"] or 0, p["observed_end"]
            missing = [r.value.decode() for r in read_all(self.a_conf, self.topic, k)
                       if end is not None and start <= r.offset < end]
            assert len(missing) <= p["may_be_lost"], (f"A[{k}] holds {len(missing)} records between the progress "
                                                      f"{start} and the observed end {end}, the promotion said up "
                                                      f"to {p['may_be_lost']}: {missing[:5]}")
            if self.promote_code in (0, 6):      # 6: nothing known missing, only the group sync did not run
                assert end is not None and not missing, (f"the promotion said nothing known is missing, but "
                                                         f"A[{k}] holds {missing[:5]} past the progress {start} "
                                                         f"below the observed end {end}")

    def check_no_open_transaction(self) -> list[str]:
        a_topics = topics_of(self.a_conf)
        b_topics = topics_of(self.b_conf, self.topic, self.mirror, "__consumer_offsets", "__transaction_state")
        unstable = stable_everywhere(self.a_conf, a_topics) + stable_everywhere(self.b_conf, b_topics)
        assert not unstable, f"a transaction still open: {unstable}"
        hanging = hanging_transactions(self.a_conf) + hanging_transactions(self.b_conf)
        assert not hanging, f"kafka-transactions.sh find-hanging: {hanging}"
        return a_topics + b_topics

    def figures(self) -> str:
        d = self.reversed_.get("divergence", {})
        where = [f"  A[{p['partition']}] offsets {p.get('first_offset')}..{p.get('last_offset')}: {p['count']} records"
                 f" -> B {p.get('side_topic')}[{p['partition']}]" for p in d.get("partitions", [])]
        return self.steps.table() + "\ndiverged (they stay in A's log too):\n" + "\n".join(where)


def the_drill(drill: Drill, cluster_a, unique, how: str, forward_runs: int = 3, follow_in: Path | None = None,
              before_the_last_check: Callable[[], None] | None = None) -> None:
    """The drill's steps in order, then the judgement; the figures are printed whatever happens.
    ``follow_in``: A -> B is one follow run (its output in that folder), else ``forward_runs`` runs.
    ``before_the_last_check``: called before LSO = HW is checked on B's shared topics (``__consumer_offsets``
    holds every mirror's transactional progress commits): the REST drill runs beside other mirrors of B
    and waits there until they are done, else their open transaction would read as the drill's."""
    try:
        if follow_in is not None:
            drill.follow_under_load(follow_in)
            drill.kill_a_with_transactions_open(cluster_a)
            drill.promote_fences_the_follower()
        else:
            drill.forward_under_load(forward_runs)
            drill.kill_a_with_transactions_open(cluster_a)
            drill.promote()
        drill.start_restarting_a(cluster_a)
        drill.producers_and_consumers_on_b(unique)
        drill.restart_a_and_reverse(cluster_a)
        drill.failback_and_consumers_on_a()
        drill.switch_back_and_resume()
        drill.check_every_record()
        if before_the_last_check is not None:
            before_the_last_check()
        checked = drill.check_no_open_transaction()
        print(f"\nLSO = HW and no hanging transaction on {len(checked)} topics of A and B")
    finally:
        drill.writer.stop()
        if drill.restarting is not None:
            drill.restarting.join()        # never a broker start left running past the test's fixture
        if drill.follower is not None and drill.follower.poll() is None:
            drill.follower.kill()      # never left running, whatever failed
            drill.follower.wait(30)
        print(f"\nthe drill ({how}):\n" + drill.figures())


def drill_mirror(cluster_a, unique, **fields: Any) -> tuple[dict[str, Any], str]:
    """(the drill mirror's entry in a mirrors file, its topic on A): A -> the suite's target, groups on. The
    mirror reaches A through A's link when it has one (``far_config``: the mirror sits beside B); the drill's
    producers, consumers and judges reach it directly."""
    topic = create_topic(cluster_a.client_config(), unique("orders"), partitions=PARTITIONS)
    return {"name": unique("drill").replace("-", "_"), "source": {"config": cluster_a.far_config()},
            "target": {"local": "target"},
            "topics": [re.escape(topic)], "slots": 2, "max_transaction_seconds": 10, "groups": {}, **fields}, topic


def abort_open_transactions(conf: dict[str, Any], topic: str, settle_seconds: float = 5) -> int:
    """Before the reverse DAG (whose settle wait is 120 s): the killed producer's transaction on the
    restarted A, if it outlives its timeout there, is aborted as an operator would, with Kafka's
    ``kafka-transactions.sh describe-producers`` and ``abort``. Returns how many were aborted."""
    deadline = time.monotonic() + settle_seconds
    while stable_everywhere(conf, [topic]) and time.monotonic() < deadline:
        time.sleep(1)   # the poll of a bounded wait: still open after it, the transactions are aborted below
    aborted = 0
    for k in range(PARTITIONS):
        done = runtime.kafka_transactions(conf["bootstrap.servers"], "describe-producers", "--topic", topic,
                                          "--partition", str(k))
        rows = [line.split() for line in done.stdout.splitlines() if line.strip() and "INFO" not in line]
        assert rows and rows[0][0] == "ProducerId", done.stdout + done.stderr
        column = rows[0].index("CurrentTransactionStartOffset")
        for start in {row[column] for row in rows[1:] if row[column].isdigit()}:
            abort = runtime.kafka_transactions(conf["bootstrap.servers"], "abort", "--topic", topic, "--partition",
                                               str(k), "--start-offset", start)
            assert abort.returncode == 0, abort.stdout + abort.stderr
            aborted += 1
    return aborted


class RestOperator:
    """Each step through Airflow's REST API: unpause the DAG, trigger it with conf, wait for the run's
    state, read the report from XCom. ``wait(predicate, seconds, what, seen)`` is the caller's bounded wait."""

    def __init__(self, api, wait, config: Path):
        self.api, self.wait, self.config, self.aborted = api, wait, str(config), 0

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, seconds: float = 300) -> tuple[str, str]:
        self.api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        run_id = self.api.call("POST", f"/api/v2/dags/{dag_id}/dagRuns",
                               {"logical_date": None, "conf": conf or {}})["dag_run_id"]

        def state() -> str | None:
            return next((r["state"] for r in self.api.runs(dag_id) if r["dag_run_id"] == run_id), None)

        self.wait(lambda: state() in ("success", "failed"), seconds, f"{dag_id} run {run_id}", state)
        return run_id, state()

    def xcom(self, dag_id: str, run_id: str, task: str) -> dict[str, Any]:
        got = self.api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task}/xcomEntries/report")
        return got["value"] if isinstance(got["value"], dict) else json.loads(got["value"])

    def tries(self, dag_id: str, run_id: str, task: str) -> int:
        return self.api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task}")["try_number"]

    def record_lag(self, mirror: str) -> None:
        ok(cli("lag", mirror, "--record", "--config", self.config, timeout=CLI_BUDGET))

    def run(self, mirror: str) -> dict[str, Any]:
        from eosmirror.airflow import reports

        dag_id = dagids.mirror_dag_id(mirror)
        run_id, state = self.trigger(dag_id)
        report = reports.run_report(dag_id, run_id)
        assert state == "success" and report is not None, (dag_id, run_id, state, report)
        return report.to_dict()

    def promote(self, mirror: str) -> tuple[int, dict[str, Any]]:
        dag_id = dagids.promote_dag_id(mirror)
        run_id, state = self.trigger(dag_id, {"source_seconds": 3})
        assert self.tries(dag_id, run_id, "promote") == 1, "a promotion is never retried"
        report = self.xcom(dag_id, run_id, "promote")
        assert (state == "failed") == (report["exit_code"] != 0), (state, report)   # the verdict task fails the run
        return report["exit_code"], report

    def failback(self, mirror: str, groups: list[str]) -> str:
        dag_id = dagids.groups_dag_id(mirror)
        run_id, state = self.trigger(dag_id, {"direction": "failback", "groups": groups})
        self.api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": True})     # no scheduled failover after it
        got = self.api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/sync_groups/xcomEntries/"
                                   "return_value")
        report = got["value"] if isinstance(got["value"], dict) else json.loads(got["value"])
        assert state == "success", (state, report)
        return decisions(report)

    def switch_back(self, mirror: str) -> dict[str, Any]:
        dag_id = dagids.switchover_dag_id(naming.reverse_mirror_name(mirror))
        run_id, state = self.trigger(dag_id, {"quiet_seconds": 2, "wait_seconds": 60})
        report = self.xcom(dag_id, run_id, "switchover")
        assert state == "success", (state, report)
        return report

    def resume(self, mirror: str) -> dict[str, Any]:
        dag_id = dagids.resume_dag_id(mirror)
        run_id, state = self.trigger(dag_id)
        report = self.xcom(dag_id, run_id, "resume")
        assert state == "success", (state, report)
        return report

    def reverse(self, mirror: str, source_conf: dict[str, Any], topic: str) -> dict[str, Any]:
        self.aborted = abort_open_transactions(source_conf, topic)
        dag_id = dagids.reverse_dag_id(mirror)
        run_id, state = self.trigger(dag_id, {"divergence": "copy", "source_seconds": 10})
        report = self.xcom(dag_id, run_id, "reverse")
        assert state == "success", (state, report)
        return report


def rest_drill(cluster_a, entry: dict[str, Any], topic: str, target_conf: dict[str, Any], unique,
               operator: RestOperator, before_the_last_check: Callable[[], None] | None = None) -> None:
    """The drill of ``entry`` (a mirror of the running Airflow's mirrors file) through the REST API."""
    drill = Drill(cluster_a.client_config(), target_conf, topic, entry["name"], operator, Writer(topic))
    the_drill(drill, cluster_a, unique, "Airflow REST API", forward_runs=2, before_the_last_check=before_the_last_check)
