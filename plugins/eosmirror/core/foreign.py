"""Foreign writes: committed records on a mirrored target partition that the mirror did not write. Pure.

While a topic is mirrored only the mirror writes its target copy (docs/architecture.md, "The target
belongs to the mirror"). Every copy transaction commits, beside a partition's progress and in the same
transaction, the partition's target ``Accounting`` (in the progress metadata, kafka/progress.py):

* ``read_from`` (R): every committed data record below it is one of the mirror's copies, or lay there
  before the mirror's first check of the partition;
* ``expected_end`` (E): the partition's end (high watermark) if nothing but the mirror wrote since.

After a transaction that wrote n records from target offset ``base``: R = base + n and E = R + 1 (its
commit marker lands at R, unless something else landed first). After a check that found no committed
data record in [R, end): R = E = end. The progress is read after the slot fenced its transactional id
(require_stable), so both are final for the partition: no transaction of the mirror is open there.

The judgement of a partition, from its accounting, high watermark (HW) and last stable offset (LSO):

``CLEAN``       HW == E: nothing but the mirror's copies and its marker (one offset, no read needed).
``SUSPECT``     HW > E: [R, LSO) is read read_committed (``kafka.readers.data_offsets``). Each data record
                there is FOREIGN; none: only transaction markers and aborted records lie there (a killed or
                aborted attempt of the mirror: its records and its abort marker; or another producer's
                aborted transaction: no read_committed consumer ever reads either, and librdkafka does not
                say which producer wrote an aborted record, so neither is called foreign).
``OPEN``        LSO < HW beyond what was read: a transaction is open (the slot waits for it, targetcheck.py).
``BEHIND``      HW < E: the progress became visible before the commit marker reached the partition (it
                settles in milliseconds), or the target lost records; not judged.
``UNACCOUNTED`` no accounting (the mirror's first copy of the partition, progress written by an older
                eosmirror, a migration or a reset): the check starts at the partition's end now.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from eosmirror.core.errors import ForeignWriteError

TP = tuple[str, int]
CLEAN, SUSPECT, BEHIND, UNACCOUNTED = "clean", "suspect", "behind", "unaccounted"
MAX_OFFSETS_NAMED = 10      # offsets named per partition (the count is always exact)
MAX_PARTITIONS_NAMED = 10


@dataclass(frozen=True)
class Accounting:
    """What the mirror accounts for on one target partition (module doc)."""

    read_from: int
    expected_end: int

    @staticmethod
    def checked(end: int) -> "Accounting":
        """Everything below ``end`` was judged: the mirror's copies, markers and aborted records only."""
        return Accounting(end, end)

    def after_write(self, base: int, count: int) -> "Accounting":
        """After a committed transaction that wrote ``count`` records from ``base`` (none: unchanged)."""
        return Accounting(base + count, base + count + 1) if count else self

    def metadata(self) -> dict[str, int]:
        return {"tr": self.read_from, "te": self.expected_end}

    @staticmethod
    def of_metadata(meta: Mapping[str, Any]) -> "Accounting | None":
        """From a progress's metadata; None when it carries none (module doc, UNACCOUNTED)."""
        try:
            read_from, expected_end = int(meta["tr"]), int(meta["te"])
        except (KeyError, TypeError, ValueError):
            return None
        return Accounting(read_from, expected_end) if 0 <= read_from <= expected_end else None


def judge(accounting: Accounting | None, high: int) -> str:
    """One partition's judgement from its high watermark (module doc); SUSPECT needs a read."""
    if accounting is None:
        return UNACCOUNTED
    if high == accounting.expected_end:
        return CLEAN
    return SUSPECT if high > accounting.expected_end else BEHIND


def ranges_to_read(accounting: Mapping[TP, Accounting | None], highs: Mapping[TP, int],
                   stables: Mapping[TP, int]) -> dict[TP, tuple[int, int]]:
    """The SUSPECT partitions' ranges to read read_committed: [R, min(HW, LSO)) (only what is decided)."""
    out = {}
    for tp, acc in accounting.items():
        if tp in highs and judge(acc, highs[tp]) == SUSPECT:
            assert acc is not None
            end = min(highs[tp], stables.get(tp, highs[tp]))
            if end > acc.read_from:
                out[tp] = (acc.read_from, end)
    return out


@dataclass(frozen=True)
class ForeignRecords:
    """Committed records on one target partition that the mirror's accounting does not cover."""

    topic: str
    partition: int
    offsets: tuple[int, ...]           # every foreign data record found, ascending
    read_from: int                     # the mirror's records end below here
    end: int                           # the partition's high watermark when checked
    producers: tuple[str, ...] = ()    # what DescribeProducers reports (kafka/producers.py), if asked

    @property
    def label(self) -> str:
        return f"{self.topic}[{self.partition}]"

    def offsets_text(self) -> str:
        shown = ", ".join(str(o) for o in self.offsets[:MAX_OFFSETS_NAMED])
        more = f", ... ({len(self.offsets) - MAX_OFFSETS_NAMED} more)" if len(self.offsets) > MAX_OFFSETS_NAMED else ""
        return f"offset(s) {shown}{more}"

    def line(self) -> str:
        said = (f"{self.label}: {len(self.offsets)} foreign record(s) at {self.offsets_text()} (the mirror's copies "
                f"end below {self.read_from}; the partition ends at {self.end})")
        return said + (f"; producers on it: {'; '.join(self.producers)}" if self.producers else "")

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "records": len(self.offsets),
                "offsets": list(self.offsets[:MAX_OFFSETS_NAMED]), "read_from": self.read_from, "end": self.end,
                "producers": list(self.producers)}


def found(reads: Mapping[TP, tuple[int, tuple[int, ...]]], highs: Mapping[TP, int],
          accounting: Mapping[TP, Accounting | None]) -> list[ForeignRecords]:
    """The partitions whose read (``readers.data_offsets``: reached, data offsets) found committed data
    records at or beyond the ``read_from`` of their ``accounting``. A record below it is one of the mirror's
    copies: the driver passes the accounting read again AFTER the records were (stable), which covers
    a commit of a follow run of the previous run that made them visible (driver/foreigncheck.py)."""
    out = []
    for tp, (_, data) in sorted(reads.items()):
        acc = accounting.get(tp)
        offsets = tuple(o for o in data if acc is None or o >= acc.read_from)
        if offsets:
            out.append(ForeignRecords(tp[0], tp[1], offsets, acc.read_from if acc is not None else offsets[0],
                                      highs.get(tp, offsets[-1] + 1)))
    return out


@dataclass
class Check:
    """The outcome of one check of a mirror's target partitions (what a run, the lag and promote report)."""

    foreign: list[ForeignRecords] = field(default_factory=list)
    checked: int = 0              # partitions judged (CLEAN or read)
    read: int = 0                 # partitions whose range had to be read (SUSPECT)
    not_judged: dict[str, int] = field(default_factory=dict)   # BEHIND / UNACCOUNTED / OPEN: how many
    seconds: float = 0.0
    producers_note: str = ""      # why producer ids are missing, when they are

    def summary(self) -> str:
        said = (f"{len(self.foreign)} partition(s) hold foreign records" if self.foreign else "no foreign records")
        said += f" ({self.checked} checked, {self.read} read"
        said += "".join(f", {n} {why}" for why, n in sorted(self.not_judged.items()) if n)
        return said + f", {self.seconds:.2f} s)"

    def as_dict(self) -> dict[str, Any]:
        return {"foreign": [f.as_dict() for f in self.foreign], "checked": self.checked, "read": self.read,
                "not_judged": dict(self.not_judged), "seconds": round(self.seconds, 3),
                "producers_note": self.producers_note}


def refusal(target_label: str, where: str, records: list[ForeignRecords], producers_note: str = "",
            bootstrap: str = "<target>") -> ForeignWriteError:
    """The run's refusal: names partitions, offsets and producers, and what an operator does."""
    named = records[:MAX_PARTITIONS_NAMED]
    more = (f"\n  ... and {len(records) - MAX_PARTITIONS_NAMED} more partition(s)"
            if len(records) > MAX_PARTITIONS_NAMED else "")
    first = named[0]
    note = f"\n  (producer ids: {producers_note})" if producers_note else ""
    return ForeignWriteError(
        f"{target_label}: {where}: {sum(len(r.offsets) for r in records)} record(s) on {len(records)} mirrored target "
        f"partition(s) were not written by the mirror (foreign writes); nothing was copied onto them:\n"
        + "\n".join(f"  {r.line()}" for r in named) + more + note
        + f"\nOnly the mirror may write its target topics. Stop the producer that wrote them (`kafka-transactions.sh "
          f"--bootstrap-server {bootstrap} describe-producers --topic {first.topic} --partition {first.partition}` "
          f"names the producers on a partition), decide what the target should hold (docs/failing-loudly.md, "
          f"\"A foreign write\"), then run again")


def producer_text(row: Mapping[str, str], own: Mapping[str, str]) -> str:
    """One producer of a DescribeProducers answer (kafka/transactions.py), and whether it is the mirror's."""
    pid = row.get("ProducerId", "?")
    said = f"producer id {pid} epoch {row.get('ProducerEpoch', '?')}"
    if row.get("LastSequence") not in (None, "-1"):
        said += f", last sequence {row['LastSequence']}"
    stamp = row.get("LastTimestamp", "")
    if stamp.lstrip("-").isdigit() and int(stamp) > 0:
        said += f", last write {dt.datetime.fromtimestamp(int(stamp) / 1000, dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    start = row.get("CurrentTransactionStartOffset", "None")
    if start not in ("None", "-1"):
        said += f", transaction open from offset {start}"
    return said + (f" (the mirror's {own[pid]})" if pid in own else " (not the mirror's)")


def with_producers(records: list[ForeignRecords], described: Mapping[TP, Sequence[Mapping[str, str]]],
                   own: Mapping[str, str]) -> tuple[list[ForeignRecords], str]:
    """``records`` with the producers DescribeProducers reported on their partitions (``own``: the mirror's
    producer ids, by transactional id), and what is left out: partitions where no producer but the mirror's
    is known (a producer without idempotence has no producer id; the leader forgets a producer's state
    after producer.id.expiration.ms)."""
    out, unnamed = [], []
    for record in records:
        rows = described.get((record.topic, record.partition))
        if rows is None:
            out.append(record)
            continue
        texts = tuple(producer_text(row, own) for row in rows)
        if not any(row.get("ProducerId") not in own for row in rows):
            unnamed.append(record.label)
        out.append(replace(record, producers=texts))
    note = (f"no producer but the mirror's is known on {', '.join(unnamed)}: a producer without idempotence has "
            f"no producer id, and a leader forgets a producer after producer.id.expiration.ms" if unnamed else "")
    return out, note
