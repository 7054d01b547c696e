"""The broker-version matrix: one cell per (source version, target version), each part of a cell judged by
Kafka's own tools of each cluster's version (kit/console.py) besides the exactly-once oracle.

Parts, in the order a cell runs them (each needs the one before):
  a  mirror     a source topic written while three in-process runs copy it (plain records and
                transactions of which about one in three aborts), a last run after the producers stop;
                judged by the oracle (kit/oracle.py: exactly once, in order, no aborted record, LSO == HW
                on the target, progress and offset translation), by the source version's ConsoleConsumer
                against the target version's (read_committed: the same values per partition, in order),
                and by the target version's kafka-transactions find-hanging (3.0+ targets)
  b  groups     a consumer group commits on the source at a committed record, inside an aborted
                transaction and on a marker; `groups sync` moves it; the target version's ConsoleConsumer
                in that group must receive first, on every partition, the source's next committed record
  c  switchover after a new batch on the source: the switchover (quiet source, final run, fence, proof);
                judged as in a, and the switchover's own verdict must be safe
  d  drill      promote (source up), producers on the target, reverse, the reverse mirror's run (new ->
                old), its switchover (switch back), resume, producers on the source, a forward run: both
                logs then hold the same records in the same order (each version's ConsoleConsumer)
  e  take-over  (sources 3.5+: exactly-once MirrorMaker 2, KIP-618) MirrorMaker 2 of the SOURCE's version,
                exactly-once, copies a topic of its own (plain records, committed and aborted transactions),
                is stopped; `eosmirror migrate --from mm2:<alias>` seeds the mirror from MM2's offsets; more
                records; one eosmirror run. Judged by the source version's ConsoleConsumer against the target
                version's (read_committed): every committed source record on the target exactly once, in order
                (none twice at the seam), LSO == HW. Not run where the source has no exactly-once MM2 (before
                3.5) or its connect-mirror is not on Maven Central (4.4.0)

Clusters: ``brokers-source`` and ``brokers-target`` at $EOSMIRROR_SOURCE_PORT/TARGET_PORT + 20 (each cluster
also uses its port + 1: KRaft's controller or the ZooKeeper), fresh for every cell and stopped after it.
"""

from __future__ import annotations

import os
import random
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from eosmirror_tools.kit import cluster, console, counting, mm2, oracle, runtime, waits, workload

PARTITIONS = 3
PORT_SHIFT = 20            # from the base ports: the session's own source/target clusters may run there
PARTS = ("a", "b", "c", "d", "e")
# Releases whose connect-mirror is not on Maven Central (checked with Maven 2026-11-28): no MM2 to take over from
NO_MM2_ON_CENTRAL = ("4.4.0",)
MM2_STOP_GRACE = 120.0     # a SIGKILLed MM2 leaves RUNNING in its status topic, and migrate refuses


@dataclass(frozen=True)
class Cell:
    source: str    # a line of runtime.LINES
    target: str

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


# The goal's cells (issue #53): the oldest line that runs (2.8, ZooKeeper) and 3.9 (KRaft) into the newest,
# the way back new -> old, and the default against itself.
CELLS = (Cell("2.8", "4.4"), Cell("3.9", "4.4"), Cell("4.4", "3.9"), Cell("4.3", "4.3"))


def select(names: str | None) -> list[Cell]:
    """``names``: comma-separated cell names (``2.8->4.4``) or substrings of them; all when empty."""
    if not names:
        return list(CELLS)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    chosen = [c for c in CELLS if any(w in c.name for w in wanted)]
    if not chosen:
        raise SystemExit(f"no broker cell matches {names!r}; cells: {', '.join(c.name for c in CELLS)}")
    return chosen


def base_port(side: str) -> int:
    env = cluster.PORT_ENV[side]
    return int(os.environ.get(env) or cluster.DEFAULT_PORTS[side]) + PORT_SHIFT


def clusters_of(cell: Cell) -> tuple[cluster.LocalCluster, cluster.LocalCluster]:
    source, target = (runtime.resolve_version(v) for v in (cell.source, cell.target))
    return (cluster.LocalCluster("brokers-source", base_port("source"), version=source),
            cluster.LocalCluster("brokers-target", base_port("target"), version=target))


class CellFailed(AssertionError):
    """A judge found the cell's outcome wrong (its message says what it saw)."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CellFailed(message)


@dataclass
class CellRun:
    """One cell's clusters, topic, mirror and what its parts found."""

    cell: Cell
    source: cluster.LocalCluster
    target: cluster.LocalCluster
    work: Path
    topic: str = ""
    mirror: Any = None
    load: workload.Workload | None = None
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def source_conf(self) -> dict[str, Any]:
        from eosmirror.kafka import clients

        return {**self.source.client_config(), "log_level": clients.librdkafka_log_level()}

    @property
    def target_conf(self) -> dict[str, Any]:
        from eosmirror.kafka import clients

        return {**self.target.client_config(), "log_level": clients.librdkafka_log_level()}

    # --- set-up ----------------------------------------------------------------------------------------

    def start(self) -> None:
        for c in (self.source, self.target):      # fresh: a cell never inherits another's logs
            cluster.stop(c, hard=True)
            shutil.rmtree(c.dir, ignore_errors=True)
        cluster.up([self.source, self.target], timeout=waits.service_budget(120, cap_seconds=300))

    def stop(self) -> None:
        for c in (self.source, self.target):
            cluster.stop(c)

    def make_mirror(self, source_alias: str | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        from eosmirror.core import config

        tag = uuid.uuid4().hex[:6]
        self.topic = f"orders.{tag}"
        admin = AdminClient(self.source_conf)
        admin.create_topics([NewTopic(self.topic, PARTITIONS, 1)])[self.topic].result(60)
        raw = {"name": f"bm{tag}", "source": {"config": self.source.client_config()},
               "target": {"config": self.target.client_config()}, "topics": [self.topic.replace(".", "\\.")],
               "slots": 2, "max_transaction_seconds": 10, "groups": {}}
        if source_alias:
            raw["source_alias"] = source_alias    # MM2's name for the source: migrate reads its offsets by it
        self.mirror = config.parse({"mirrors": [raw]}, self.work / "mirrors.yaml").mirrors[0]

    def run_once(self, mirror: Any = None, final: bool = False) -> Any:
        """One run of ``mirror`` (default: the cell's) with its slots in this process: its RunReport.
        ``final``: a switchover's final run (the only one that copies while it is switching over)."""
        from eosmirror import driver

        run = driver.MirrorRun(mirror or self.mirror, driver.RunOptions(final_of_switchover=final))
        return run.execute(run.prepare(), driver.run_in_process)

    def run_ok(self, mirror: Any = None) -> int:
        report = self.run_once(mirror)
        check(report.status.value == "ok", f"run of {(mirror or self.mirror).name}: {report.status.value} "
                                           f"{report.errors[:3]}")
        return int(report.records)

    # --- judges ----------------------------------------------------------------------------------------

    def java_logs(self, expected: int | None = None) -> dict[str, Any]:
        """The source version's ConsoleConsumer against the target version's: the same committed values per
        partition, in the same order (and ``expected`` records, when given)."""
        src = console.console_read(self.source.release, self.source.bootstrap, self.topic)
        dst = console.console_read(self.target.release, self.target.bootstrap, self.topic)
        for p in range(PARTITIONS):
            a, b = src.values(p), dst.values(p)
            if a != b:
                first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                raise CellFailed(f"{self.topic}[{p}]: Kafka {self.source.release}'s ConsoleConsumer read {len(a)} "
                                 f"records on the source, Kafka {self.target.release}'s {len(b)} on the target; "
                                 f"first difference at #{first}: {a[first:first + 1]} vs {b[first:first + 1]}")
        if expected is not None:
            check(src.processed == expected, f"the source holds {src.processed} committed records, the workload "
                                             f"committed {expected}")
        return {"source_console": src.processed, "target_console": dst.processed}

    def no_hanging(self) -> dict[str, Any]:
        """LSO == HW on the target (librdkafka's ListOffsets, both isolation levels) and the target version's
        find-hanging lists nothing (3.0+)."""
        stable, high = counting.settle(self.target_conf, self.topic, PARTITIONS, "target", timeout=30)
        check(not counting.still_open(stable, high), f"target LSO {stable} below HW {high}")
        table = console.find_hanging(self.target.release, self.target.bootstrap)
        rows = console.hanging_rows(table) if table is not None else []
        check(not rows, f"Kafka {self.target.release}'s find-hanging lists {rows}")
        return {"lso_equals_hw": True,
                "find_hanging": "none" if table is not None else f"not available in {self.target.release}"}

    def oracle(self) -> dict[str, Any]:
        verdict = oracle.check_round(self.mirror, self.topic, PARTITIONS, self.source_conf, self.target_conf,
                                     random.Random(53))
        check(verdict.ok, f"oracle: {verdict.counts} {verdict.examples[:4]}")
        return {"records_checked": verdict.counts["records_checked"]}

    # --- the parts -------------------------------------------------------------------------------------

    def part_a(self) -> dict[str, Any]:
        self.make_mirror()
        self.load = workload.Workload(self.source_conf, self.topic, PARTITIONS, seed=53,
                                      txn_id=f"bm-load-{uuid.uuid4().hex[:6]}")
        self.load.seed(40)
        self.load.start_background(batches_per_second=8)
        copied = []
        try:
            for _ in range(3):
                copied.append(self.run_ok())
        finally:
            self.load.stop_background()
        check(not self.load.errors, f"the workload failed: {self.load.errors[:3]}")
        copied.append(self.run_ok())
        found = {"runs": len(copied), "records_per_run": copied, "committed": self.load.committed,
                 "aborted": self.load.aborted}
        found.update(self.oracle())
        found.update(self.java_logs(self.load.committed))
        found.update(self.no_hanging())
        return found

    def part_b(self) -> dict[str, Any]:
        from confluent_kafka import Consumer, TopicPartition

        from eosmirror.driver import groups

        src = console.console_read(self.source.release, self.source.bootstrap, self.topic)
        positions = {}
        for p in range(PARTITIONS):
            offsets = [o for o, _ in src.records[p]]
            gaps = [o for o in range(offsets[0], offsets[-1]) if o not in set(offsets)]   # aborted records, markers
            check(bool(gaps), f"{self.topic}[{p}] has no aborted record or marker to place a group on")
            # p0 at a committed record, p1 inside the gaps (an aborted record or a marker), p2 at a late gap
            positions[p] = (offsets[len(offsets) // 3] if p == 0 else gaps[len(gaps) // 2] if p == 1
                            else gaps[-1])
        group = f"bm-app-{uuid.uuid4().hex[:6]}"
        consumer = Consumer({**self.source_conf, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in positions.items()],
                            asynchronous=False)
        finally:
            consumer.close()
        report = groups.move_groups(self.mirror, groups.GroupMoveOptions(groups=(group,)))
        moved = {g["group"]: g for g in report["groups"]}
        check(group in moved and moved[group]["written"], f"groups sync did not write {group}: {report}")
        expected = {p: next(v for o, v in src.records[p] if o >= positions[p]) for p in range(PARTITIONS)}
        got = console.console_read(self.target.release, self.target.bootstrap, self.topic, group=group,
                                   from_beginning=False).first()
        firsts = {p: got[p][1] if p in got else None for p in range(PARTITIONS)}
        check(firsts == expected, f"Kafka {self.target.release}'s ConsoleConsumer in {group} received first "
                                  f"{firsts}; the source's next records are {expected} (source positions {positions})")
        return {"group": group, "source_positions": positions, "first_on_target": firsts}

    def part_c(self) -> dict[str, Any]:
        from eosmirror.driver import switchover

        assert self.load is not None
        self.load.write_transaction(5, abort=True)
        self.load.write_transaction(7, abort=False)
        self.load.write_plain(3)
        outcome = switchover.switchover(self.mirror, lambda: self.run_once(final=True),
                                        switchover.SwitchoverOptions(wait_s=60, quiet_s=3), by="broker-matrix", say=_say)
        check(outcome.exit_code == 0 and outcome.safe, f"switchover: exit {outcome.exit_code}: {outcome.as_dict()}")
        found = {"switchover": outcome.verdict(), "recovery_s": round(outcome.recovery_seconds or 0, 1)}
        found.update(self.oracle())
        found.update(self.java_logs(self.load.committed))
        found.update(self.no_hanging())
        return found

    def part_d(self) -> dict[str, Any]:
        from eosmirror.driver import promote, resume, reverse, switchover

        # A mirror of its own (part c switched the first one over): seeded with aborted transactions, copied.
        self.make_mirror()
        load = workload.Workload(self.source_conf, self.topic, PARTITIONS, seed=54, txn_id=f"bm-d-{uuid.uuid4().hex[:6]}")
        load.seed(20)
        found: dict[str, Any] = {"forward_run_records": self.run_ok()}
        outcome: Any = promote.promote(self.mirror, by="broker-matrix", source_budget_s=10, say=_say)
        check(outcome.exit_code in (0, 6), f"promote: exit {outcome.exit_code}: {outcome.as_dict()}")
        found["promote"] = outcome.exit_code
        produce(self.target_conf, self.topic, "B")                       # the new primary takes writes
        outcome = reverse.reverse(self.mirror, reverse.ReverseOptions(mode="report", source_budget_s=10, settle_s=5),
                                  by="broker-matrix", say=_say)
        check(outcome.exit_code == 0, f"reverse: exit {outcome.exit_code}: {outcome.as_dict()}")
        back = self.mirror.reverse()
        found["reverse_run_records"] = self.run_ok(back)                # new -> old
        outcome = switchover.switchover(back, lambda: self.run_once(back, final=True),
                                        switchover.SwitchoverOptions(wait_s=60, quiet_s=3), by="broker-matrix",
                                        say=_say)
        check(outcome.exit_code == 0 and outcome.safe, f"switch back: exit {outcome.exit_code}: {outcome.as_dict()}")
        outcome = resume.resume(self.mirror, by="broker-matrix", say=_say)
        check(outcome.exit_code == 0, f"resume: exit {outcome.exit_code}: {outcome.as_dict()}")
        produce(self.source_conf, self.topic, "A2")                      # the old primary takes writes again
        found["resumed_run_records"] = self.run_ok()
        found.update(self.java_logs())
        found.update(self.no_hanging())
        return found

    def part_e(self) -> dict[str, Any]:
        from eosmirror.driver import takeover

        release = self.source.release
        if not runtime.has_exactly_once_mm2(release):
            return {"not_run": f"Kafka {release} has no exactly-once MirrorMaker 2 (KIP-618 is 3.5+)"}
        if release in NO_MM2_ON_CENTRAL:
            return {"not_run": f"Kafka {release}'s connect-mirror is not on Maven Central"}
        alias, target_alias = f"mm{uuid.uuid4().hex[:6]}", f"tg{uuid.uuid4().hex[:6]}"
        self.make_mirror(source_alias=alias)
        load = workload.Workload(self.source_conf, self.topic, PARTITIONS, seed=55, txn_id=f"bm-e-{uuid.uuid4().hex[:6]}")
        load.seed(20)                                    # plain records, committed and aborted transactions
        load.write_transaction(4, abort=True)            # MM2's last records: an aborted transaction, then a
        load.write_transaction(6, abort=False)           # committed one whose marker lies at the seam
        props = mm2.properties(alias, target_alias, self.source.bootstrap, self.target.bootstrap,
                               self.topic.replace(".", "\\."), exactly_once=True, rest_port=mm2.free_port())
        before = load.committed
        ran = mm2.run(props, self.work / f"mm2-{alias}", self.target_conf, self.topic, PARTITIONS, before,
                      timeout=300, progress=_say, version=release, grace=MM2_STOP_GRACE)
        check(ran.error is None, f"Kafka {release}'s MirrorMaker 2: {ran.error}")
        check(bool(ran.evidence["exactly_once_source_tasks"]) and not ran.evidence["plain_source_tasks"],
              f"Kafka {release}'s MirrorMaker 2 did not run exactly-once source tasks: {ran.evidence}")
        check(f"Kafka version: {release}" in Path(ran.evidence["log"]).read_text(errors="replace"),
              f"{ran.evidence['log']} does not say Kafka version: {release}")
        check(ran.final_count == before, f"after MM2 stopped the target holds {ran.final_count} committed records, "
                                         f"the source {before}")
        outcome = takeover.take_over(self.mirror, f"mm2:{alias}", who="broker-matrix")
        seeded = {f"{c['source_topic']}[{c['partition']}]": c["new"] for c in outcome["partitions"]}
        load.write_transaction(5, abort=True)            # the continuation, after the seam
        load.write_transaction(7, abort=False)
        load.write_plain(3)
        copied = self.run_ok()
        check(copied == load.committed - before, f"eosmirror's run after the take-over copied {copied} records; "
                                                 f"{load.committed - before} were committed after MM2's")
        found: dict[str, Any] = {"mm2_version": release, "mm2_records": ran.final_count,
                                 "mm2_seconds": round(ran.start_to_done, 1), "seeded": seeded,
                                 "eosmirror_records": copied, "committed": load.committed}
        found.update(self.java_logs(load.committed))
        dst = console.console_read(self.target.release, self.target.bootstrap, self.topic)
        twice = {p: len(dst.values(p)) - len(set(dst.values(p))) for p in range(PARTITIONS)}
        check(not any(twice.values()), f"records twice on the target per partition: {twice}")
        found.update(self.no_hanging())
        return found


def produce(conf: dict[str, Any], topic: str, tag: str, per_partition: int = 20) -> None:
    """``per_partition`` records ``<tag>:<p>-<n>`` to every partition (idempotent producer)."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "enable.idempotence": True, "linger.ms": 5})
    for n in range(per_partition):
        for p in range(PARTITIONS):
            producer.produce(topic, value=f"{tag}:{p}-{n}".encode(), partition=p)
    check(producer.flush(60) == 0, f"{tag}: records still unsent after 60 s")


def _say(line: str) -> None:
    print(f"  {line}", flush=True)


PART_FUNCS: dict[str, Callable[[CellRun], dict[str, Any]]] = {
    "a": CellRun.part_a, "b": CellRun.part_b, "c": CellRun.part_c, "d": CellRun.part_d,
    "e": CellRun.part_e}


def run_cell(cell: Cell, parts: tuple[str, ...], work: Path) -> dict[str, Any]:
    """The cell's parts in order (a part after a failed one is not run: it builds on it). Its clusters are
    stopped whatever happens."""
    started = time.monotonic()
    source, target = clusters_of(cell)
    run = CellRun(cell, source, target, work)
    row: dict[str, Any] = {"cell": cell.name, "source": source.release, "target": target.release,
                           "source_metadata": "ZooKeeper" if source.zookeeper else "KRaft",
                           "target_metadata": "ZooKeeper" if target.zookeeper else "KRaft", "parts": run.parts}
    try:
        t0 = time.monotonic()
        run.start()
        row["start_s"] = round(time.monotonic() - t0, 1)
        for part in parts:
            t0 = time.monotonic()
            try:
                found = PART_FUNCS[part](run)
                run.parts[part] = {"ok": True, **found, "seconds": round(time.monotonic() - t0, 1)}
            except Exception as exc:  # noqa: BLE001 - the cell's verdict: what failed, then the next cell
                run.parts[part] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                                   "seconds": round(time.monotonic() - t0, 1)}
                break
    except Exception as exc:  # noqa: BLE001 - the clusters did not start: the cell says why
        row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        run.stop()
    row["ok"] = "error" not in row and all(run.parts.get(p, {}).get("ok") for p in parts)
    row["seconds"] = round(time.monotonic() - started, 1)
    return row
