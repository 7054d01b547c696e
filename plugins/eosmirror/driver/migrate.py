"""Take over progress from MirrorMaker 2 or a consumer group (migrate), move it by hand (reset), and
read the audit trail (history). The decisions are in ``core/migration.py``; this is the I/O.

Order of one migration or reset (nothing is written before step 6; a dry run stops after step 5):

1. Resolve the mirror's topics on both clusters (as a run does).
2. First look: source log start / last stable offsets, target high watermarks and last stable
   offsets, the mirror's own progress (require_stable: a pending transaction of a run refuses), and
   the offsets taken over (MM2's Connect offsets, or the group's committed offsets).
3. Wait ``window`` seconds; second look at the target ends and the offsets taken over. Anything
   that moved means a copier (MM2, a run) is still writing: refuse.
4. Decide the new progress per partition; check it lies within the source's committed offsets.
5. MM2 only: prove MM2 was exact -- each target partition holds exactly the committed source records
   below MM2's offset, compared record by record -- or refuse (at-least-once duplicates).
6. Sync target topics and the mirror's internal topics; fence every transactional id the mirror may
   have used; look again (nothing may have moved since step 3); then ONE transaction of the planner
   id: an empty offset sync per partition (new source offset -> current target end), the progress
   (send_offsets_to_transaction, as a slot commits it) and the audit record on the state topic.
"""

from __future__ import annotations

import getpass
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from eosmirror.core import migration, naming
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import AuthorizationError, EosMirrorError, ProgressUnavailableError
from eosmirror.core.migration import AuditRecord, PartitionChange
from eosmirror.core.offsetsync import BOUNDARY_SLOT, OffsetSync
from eosmirror.driver import topics
from eosmirror.driver.observe import progress_settle_seconds, settle_bound_seconds
from eosmirror.driver.run import MirrorRun
from eosmirror.kafka import calls, clients, progress, readers, state
from eosmirror.kafka import offsets as kafka_offsets
from eosmirror.kafka.offsets import list_offsets_of

CHECK_WINDOW_SECONDS = 3.0
# What is taken over, read again at each look: the origin's next source offsets (a group's committed offsets,
# MM2's), keyed by SOURCE partition; empty when nothing outside the mirror is taken over.
OriginReader = Callable[[], dict[tuple[str, int], int]]


class RefusedError(EosMirrorError):
    """The change could not be proven safe; nothing was written (exit code 2: never retried)."""

    exit_code = 2


def who_asks() -> str:
    """The Airflow run id when Airflow runs this, else the OS user."""
    run_id = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID")
    if run_id:
        return f"airflow:{os.environ.get('AIRFLOW_CTX_DAG_ID', '?')}/{run_id}"
    try:
        return f"user:{getpass.getuser()}"
    except Exception:  # noqa: BLE001 - no passwd entry in a container
        return f"uid:{os.getuid()}"


@dataclass
class Look:
    """One look at everything that must not move while the progress is changed."""

    target_high: dict[tuple[str, int], int]
    target_stable: dict[tuple[str, int], int]
    mirror_progress: dict[tuple[str, int], int]
    origin: dict[tuple[str, int], int]     # keyed by SOURCE partition


class Migration:
    """One migrate or reset of one mirror."""

    def __init__(self, mirror: MirrorConfig, who: str | None = None, window: float = CHECK_WINDOW_SECONDS):
        self.mirror, self.who, self.window = mirror, who or who_asks(), window
        self.run = MirrorRun(mirror, command="migrate")
        self.source, self.target = self.run.source, self.run.target
        self.pairs, self.existing = self.run.resolve()
        self.source_tps = [(p.source, k) for p in self.pairs for k in range(p.partitions)]
        self.target_of = {(p.source, k): (p.target, k) for p in self.pairs for k in range(p.partitions)}
        self.pair_of = {p.source: p for p in self.pairs}

    # --- looking ---------------------------------------------------------------------------------

    def source_offsets(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        from confluent_kafka.admin import OffsetSpec

        low = list_offsets_of(self.source, {tp: OffsetSpec.earliest() for tp in self.source_tps})
        high = list_offsets_of(self.source, {tp: OffsetSpec.latest() for tp in self.source_tps})
        return low, high

    def look(self, origin_reader: OriginReader) -> Look:
        from confluent_kafka.admin import OffsetSpec

        present = [tp for tp in self.target_of.values() if tp[0] in self.existing]
        specs = {tp: OffsetSpec.latest() for tp in present}
        # The four reads at once: each waits on brokers (round trips, when the target is a region away)
        # nearly all its time, and a look compares them with another look, never with each other.
        with ThreadPoolExecutor(max_workers=4) as pool:
            high = pool.submit(list_offsets_of, self.target, specs, read_committed=False)
            stable = pool.submit(list_offsets_of, self.target, specs, read_committed=True)
            mine = pool.submit(progress.read, self.target, present, self.mirror.progress_group, stable=True,
                               timeout=15)
            origin = pool.submit(origin_reader)
            try:
                committed = mine.result()
            except ProgressUnavailableError as exc:
                raise RefusedError(f"mirror {self.mirror.name!r}: a run holds the mirror (its progress has a "
                                   f"pending transaction): wait for it to end, or stop it and run `eosmirror fence "
                                   f"{self.mirror.name}`. Nothing was written. ({exc})") from None
            return Look(target_high=high.result(), target_stable=stable.result(),
                        mirror_progress={tp: p.offset for tp, p in committed.items()}, origin=origin.result())

    def steady_look(self, origin_reader: OriginReader, what: str) -> Look:
        """Two looks ``window`` seconds apart; refuse if anything moved or a transaction is open.
        Right after a run the broker may still be writing its commit markers (issue #44): the first
        look waits while they visibly land, as the planner does; a transaction really open stays."""
        kafka_offsets.settle_ends(self.target, [tp for tp in self.target_of.values() if tp[0] in self.existing],
                            progress_settle_seconds(), settle_bound_seconds(self.mirror), "the target's end")
        first = self.look(origin_reader)
        open_now = {tp: (s, first.target_high[tp]) for tp, s in first.target_stable.items()
                    if s != first.target_high[tp]}
        if open_now:
            raise RefusedError(f"mirror {self.mirror.name!r}: a transaction is open on the target {_tps(open_now)} "
                               f"(last stable offset < high watermark): {what} or a run is still writing. Stop it "
                               f"(for a killed eosmirror run: `eosmirror fence {self.mirror.name}`) and try again. "
                               f"Nothing was written.")
        time.sleep(self.window)
        second = self.look(origin_reader)
        changed = {**migration.moved(first.target_high, second.target_high),
                   **migration.moved(first.origin, second.origin),
                   **migration.moved(first.mirror_progress, second.mirror_progress)}
        if changed:
            raise RefusedError(f"mirror {self.mirror.name!r}: offsets moved during the {self.window:.0f} s check "
                               f"({_tps(changed)}): {what} or a run is still copying. Stop it first, then try "
                               f"again. Nothing was written.")
        return second

    # --- what is taken over ----------------------------------------------------------------------

    def group_reader(self, group: str) -> OriginReader:
        """The group's committed offsets on the SOURCE (a never-assigned consumer's committed(),
        require_stable), keyed by source partition."""
        def read() -> dict[tuple[str, int], int]:
            found = progress.read(self.source, self.source_tps, group, stable=True,
                                  timeout=15)
            return {tp: p.offset for tp, p in found.items()}
        return read

    def mm2_reader(self, alias: str) -> OriginReader:
        """MM2's next source offsets (last copied + 1) from ``mm2-offsets.<alias>.internal`` on the target."""
        topic = f"mm2-offsets.{alias}.internal"
        described = topics.describe_existing(self.target, [topic])
        if topic not in described:
            raise RefusedError(f"no MirrorMaker 2 offsets topic {topic} on the {self.target.label}: --from mm2 reads "
                               f"a dedicated-mode MM2's Connect offsets there; check the source alias "
                               f"(--from mm2:<alias>). Nothing was written.")
        partitions = len(described[topic].partitions)

        def read() -> dict[tuple[str, int], int]:
            records = []
            for k in range(partitions):
                records += [(r.key, r.value) for r in readers.read_all(
                    self.target, topic, k, client_id=f"eosmirror-{self.mirror.name}-mm2")]
            return {tp: last + 1 for tp, last in migration.mm2_offsets(records, alias).items()}
        return read

    def refuse_if_mm2_runs(self, alias: str) -> None:
        """MM2's Connect status topic on the target (``mm2-status.<alias>.internal``, apache/kafka
        MirrorMakerConfig.workerConfig) says RUNNING for a source task: MM2 runs (or was killed
        without stopping). The movement check of ``steady_look`` is the second, independent test."""
        topic = f"mm2-status.{alias}.internal"
        described = topics.describe_existing(self.target, [topic])
        if topic not in described:
            return
        records = []
        for k in range(len(described[topic].partitions)):
            records += [(r.key, r.value) for r in readers.read_all(
                self.target, topic, k, client_id=f"eosmirror-{self.mirror.name}-mm2")]
        running = migration.mm2_running(records)
        if running:
            raise RefusedError(f"mirror {self.mirror.name!r}: MirrorMaker 2 still runs: {', '.join(running[:4])} "
                               f"RUNNING in {topic}. Stop every MM2 process of this flow (a clean stop marks them "
                               f"UNASSIGNED); if MM2 was killed and you are sure no MM2 process is left, add "
                               f"--mm2-stopped. Nothing was written.")

    # --- deciding --------------------------------------------------------------------------------

    def changes(self, new_by_source: dict[tuple[str, int], int], now: Look) -> list[PartitionChange]:
        out = []
        for source_tp, new in sorted(new_by_source.items()):
            target_tp = self.target_of[source_tp]
            out.append(PartitionChange(source_topic=source_tp[0], target_topic=target_tp[0], partition=source_tp[1],
                                       old=now.mirror_progress.get(target_tp), new=new,
                                       target_end=now.target_high.get(target_tp, 0)))
        return out

    # --- writing ---------------------------------------------------------------------------------

    def commit(self, action: str, origin: str, changes: list[PartitionChange], agreed: Look,
               origin_reader: OriginReader, note: str = "") -> AuditRecord:
        """Step 6: fence, look again, then progress + first syncs + audit record in one transaction."""
        m = self.mirror
        self.run.preflight(check_state=False)   # target topics and the mirror's internal topics exist, configs in sync
        self.target_ids = {name: t.topic_id for name, t in topics.describe_targets(m, self.pairs, self.target).items()}
        current = state.read_generation(self.target, m.name, m.progress_group)
        number = current.number if current else 0
        slots = max(current.max_slots if current else 0, m.slots)
        planner_id = naming.planner_transactional_id(m.transactional_id_prefix, m.name)
        producer = clients.transactional_producer(self.target.settings, {}, planner_id, 60000,
                                                  client_id=f"eosmirror-{m.name}-migrate")
        # The slots' ids and the planner's are fenced at once (distinct ids: no order between them); the
        # look below comes after both.
        with ThreadPoolExecutor(max_workers=1) as pool:
            slots_fenced = pool.submit(state.fence, self.target,
                                       naming.slot_transactional_ids(m.transactional_id_prefix, m.name, slots))
            calls.call(producer.init_transactions, "initialise the planner producer", self.target.label,
                       f"Write on transactional id {planner_id}", 60)
            slots_fenced.result()
        after = self.look(origin_reader)   # a run that started during the check has been fenced by now
        if (after.target_high, after.origin, after.mirror_progress) != (
                agreed.target_high, agreed.origin, agreed.mirror_progress):
            raise RefusedError(f"mirror {m.name!r}: offsets moved while the change was being prepared; a copier "
                               f"is still running. Nothing was written.")
        record = AuditRecord(action=action, mirror=m.name, origin=origin, who=self.who,
                             at_ms=int(time.time() * 1000), partitions=tuple(changes), note=note)
        self._transaction(producer, record, changes, number)
        return record

    def _transaction(self, producer: Any, record: AuditRecord, changes: list[PartitionChange], number: int) -> None:
        from confluent_kafka import TopicPartition

        m, label = self.mirror, self.target.label
        reader = clients.progress_reader(self.target.settings, m.progress_group, f"eosmirror-{m.name}-migrate")
        refused: list[Any] = []     # refused deliveries: a refused produce may surface later as another error

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                refused.append(err)
        try:
            producer.begin_transaction()
            for c in changes:
                pair = self.pair_of[c.source_topic]
                sync = OffsetSync(target_topic=c.target_topic, partition=c.partition, source_topic=c.source_topic,
                                  source_start=c.new, source_end=c.new, target_base=c.target_end, runs=(),
                                  generation=number, slot=BOUNDARY_SLOT, created_ms=record.at_ms,
                                  source_topic_id=pair.source_topic_id,
                                  target_topic_id=self.target_ids.get(c.target_topic, ""), moved_from=c.old)
                producer.produce(naming.offset_sync_topic(m.name), sync.encode(), sync.key(), 0, on_delivery=delivered)
            offsets = [TopicPartition(c.target_topic, c.partition, c.new, metadata=progress.encode_metadata(
                c.source_topic, self.pair_of[c.source_topic].source_topic_id, number)) for c in changes]
            producer.produce(naming.state_topic(m.name), record.encode(), record.key(uuid.uuid4().hex[:12]), 0,
                             on_delivery=delivered)
            producer.send_offsets_to_transaction(offsets, reader.consumer_group_metadata(), 30)
            producer.commit_transaction(60)
        except Exception as exc:  # noqa: BLE001 - translated; an open transaction is aborted by the broker
            try:
                producer.abort_transaction(10)
            except Exception:  # noqa: BLE001 - fenced or nothing open
                pass
            # The refused deliveries' reports are queued, not yet served, when send_offsets_to_transaction fails
            # first on the transaction's error state (CI at 9bfba4e): serve them before looking for the cause.
            producer.flush(5)
            from confluent_kafka import KafkaException

            # Seen on Kafka 4.3 (StandardAuthorizer) without Write on the offset-syncs topic: the commit failed with
            # "_STATE: Erroneous state", the refused delivery being the cause (tests/integration/test_command_acls.py)
            cause = next((KafkaException(e) for e in refused if e.name() == "TOPIC_AUTHORIZATION_FAILED"), exc)
            needs = (f"Write on {naming.state_topic(m.name)} and {naming.offset_sync_topic(m.name)}, "
                     f"Read on group {m.progress_group}")
            if cause is exc:
                self._name_refused_writes(record, needs)
            raise calls.translate(cause, f"commit the {record.action} of mirror {m.name}", label, needs) from None
        finally:
            reader.close()


    def _name_refused_writes(self, record: AuditRecord, needs: str) -> None:
        """Raise an AuthorizationError naming the internal topics the principal may not write, if any.

        The refused delivery does not always report its cause: when AddPartitionsToTxn's refusal arrives before
        send_offsets_to_transaction, that call fails on the transaction's error state ("_STATE") and the abort
        purges the records (_PURGE_QUEUE). The brokers' authorized operations (KIP-430) tell which write it was."""
        wanted = [naming.state_topic(self.mirror.name), naming.offset_sync_topic(self.mirror.name)]
        try:
            described = topics.describe(self.target, wanted)
        except EosMirrorError:
            return          # the original error is reported
        granted = {t: d.operations for t, d in described.items() if d.operations is not None}
        lacking = [t for t in wanted if t in granted and not granted[t] & {"WRITE", "ALL"}]
        if lacking:
            raise AuthorizationError(
                f"{self.target.label}: not authorized to commit the {record.action} of mirror {self.mirror.name} "
                f"(TOPIC_AUTHORIZATION_FAILED): the principal lacks Write on {' and '.join(lacking)} (it needs "
                f"{needs}). Grant that ACL and run again")

def history(mirror: MirrorConfig) -> list[AuditRecord]:
    """Every audit record of the mirror, oldest first."""
    run = MirrorRun(mirror)
    return state.read_audit(run.target, mirror.name, mirror.progress_group)

def _tps(changed: dict[tuple[str, int], Any]) -> str:
    items = sorted(changed.items())
    text = ", ".join(f"{t}[{p}]: {v}" for (t, p), v in items[:4])
    return text + (f" and {len(items) - 4} more" if len(items) > 4 else "")
