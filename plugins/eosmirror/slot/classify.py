"""What a Kafka error means for a slot: retry the call, abort and rewind, stop as fenced, or fail
with an error that names what to fix.

- Transactional calls (``transactional_call``): retriable -> retry the same call until a deadline;
  abortable (``txn_requires_abort``) -> ``Abortable``, on which the copier aborts and rewinds to the
  committed progress (docs/architecture.md "How a run works", slot step 3 again); fatal -> ``FencedError`` when a
  newer instance took the transactional id over, otherwise the translated error.
- An abortable error that no retry cures (a record too large, a missing ACL): ``permanent_cause``.
- A record larger than the target accepts: ``oversize_record`` (seen before producing) and
  ``producer_oversize`` (the producer refused it).
- The source consumer's errors: ``source_error``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from eosmirror.core.errors import AuthorizationError, DataLossError, EosMirrorError, FencedError, OversizeRecordError
from eosmirror.kafka import calls
from eosmirror.slot.slotstate import PartitionCopy, SlotTask

log = logging.getLogger(__name__)


class Abortable(Exception):
    """The current transaction must be aborted and the slot rewound to its committed progress."""


_PERMANENT = {
    "MSG_SIZE_TOO_LARGE": OversizeRecordError, "Message size too large": OversizeRecordError,
    "RECORD_LIST_TOO_LARGE": OversizeRecordError,
    "TOPIC_AUTHORIZATION_FAILED": None, "Topic authorization failed": None,
    "GROUP_AUTHORIZATION_FAILED": None, "Group authorization failed": None,
}


def permanent_cause(text: str) -> EosMirrorError | None:
    """An abortable error that a retry cannot cure (a record too large, a missing ACL)."""
    for marker, kind in _PERMANENT.items():
        if marker in text:
            if kind is OversizeRecordError:
                return OversizeRecordError(f"the target refused a record as too large ({text}); raise "
                                           f"max.message.bytes on the target topic. Nothing was committed")
            return AuthorizationError(f"the target refused the transaction ({text}); the mirror's principal "
                                      f"needs Write on the target topics and Read on the progress group")
    return None


_FENCED_NAMES = {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}


def is_fenced(exc: BaseException) -> bool:
    """A newer instance took over the transactional id (librdkafka may report it later as _FATAL)."""
    return calls.error_name(exc) in _FENCED_NAMES or (
        calls.error_name(exc) == "_FATAL" and "fenced" in calls.error_text(exc).lower())


def transactional_call(task: SlotTask, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Retry retriable errors; abortable -> Abortable; fatal (fenced included) -> raise."""
    deadline = time.monotonic() + max(60.0, task.transaction_timeout_ms / 1000)
    while True:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001
            err = exc.args[0] if exc.args and hasattr(exc.args[0], "fatal") else None
            if err is None:
                raise
            if err.fatal():
                if is_fenced(exc):
                    raise FencedError(f"slot {task.slot}: a newer instance of transactional id "
                                      f"{task.transactional_id} took over ({what} failed: "
                                      f"{err.str()}); this attempt stops") from None
                raise calls.translate(exc, what, f"{task.target_label} (slot {task.slot})",
                                      f"Write and Describe on transactional id {task.transactional_id}"
                                      ) from None
            if err.txn_requires_abort():
                raise Abortable(f"{what}: {err.name()}: {err.str()}") from None
            if err.retriable() and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise calls.translate(exc, what, f"{task.target_label} (slot {task.slot})") from None


def oversize_record(s: PartitionCopy, offset: int, size: int) -> OversizeRecordError:
    """A source record larger than the target topic accepts, seen before it is produced."""
    return OversizeRecordError(
        f"source {s.task.source_topic}[{s.task.partition}] offset {offset}: record of {size} bytes "
        f"is larger than target topic {s.task.target_topic} accepts (max.message.bytes="
        f"{s.task.max_message_bytes}). Raise max.message.bytes on the target topic; nothing "
        f"of this transaction was committed")


def producer_oversize(s: PartitionCopy, offset: int, size: int, exc: Exception) -> OversizeRecordError | None:
    """The clear error if ``produce`` refused the record as too large; None for any other error."""
    if calls.error_name(exc) != "MSG_SIZE_TOO_LARGE":
        return None
    return OversizeRecordError(
        f"source {s.task.source_topic}[{s.task.partition}] offset {offset}: record of "
        f"{size} bytes is too large for the target producer ({calls.error_text(exc)})")


def source_error(task: SlotTask, m: Any, err: Any, group_refused: bool) -> bool:
    """An error the source consumer returned in place of a record: raise the clear error if it ends
    the slot, log it if it is retried. Returns whether the source has refused Read on the progress
    group so far (``group_refused`` is the answer until now): reading with assign() needs no group,
    only publishing progress to it (step 5, best effort) does, so that refusal is said once and noted."""
    name = err.name()
    where = f"{task.source_label}: {m.topic()}[{m.partition()}]" if m.topic() else task.source_label
    if name == "GROUP_AUTHORIZATION_FAILED":
        if not group_refused:
            log.warning("slot %d: %s: no Read on group %s on the source; the mirror's progress will not be "
                        "visible to lag tools there", task.slot, where, task.progress_group)
        return True
    if name in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
        raise DataLossError(f"{where}: the offsets the mirror must copy next were deleted on the source while "
                            f"this run was copying ({err.str()}); nothing of this transaction was committed. "
                            f"Raise the source retention; see on_truncation in docs/configuration.md")
    if name == "TOPIC_AUTHORIZATION_FAILED":
        raise calls.translate(Exception(err), "read the source topic", where, f"Read on topic {m.topic()}")
    if name in calls.MISSING_TOPIC:
        raise DataLossError(f"{where}: the source topic or partition was deleted while the mirror copied it")
    if err.fatal():
        raise calls.translate(Exception(err), "read the source", where)
    log.warning("slot %d: source consumer: %s: %s (retrying)", task.slot, name, err.str())
    return group_refused
