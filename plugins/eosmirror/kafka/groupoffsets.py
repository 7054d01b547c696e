"""Consumer groups' committed offsets on the partitions each group holds, read in a child process.

A consumer's ``committed()`` can only ask for partitions named in advance, which costs by the mirror's partitions,
not the group's. Only the admin client's OffsetFetch without a partition list answers with what a group holds,
and librdkafka 2.16's crashes the process (SIGSEGV) when a coordinator moves (NOT_COORDINATOR after a broker
restart; librdkafka issue #5040). So it runs in a short-lived child (``python -m eosmirror.kafka.groupoffsets``;
settings, secrets included, over its stdin, never its arguments): a crash costs that child only, and
:func:`read_all` returns None for the caller to read with consumers as before.

Every read sends require_stable and asks again while the broker answers UNSTABLE_OFFSET_COMMIT: a group's
offsets are never read half-written. (A pending commit whose partitions are all new to the group is not listed
at all: the group reads as before that commit, whole.)
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from eosmirror.kafka import calls, clients

log = logging.getLogger(__name__)

# Answers that mean "ask this group again": a pending transactional commit, a coordinator loading.
RETRIED = frozenset({"UNSTABLE_OFFSET_COMMIT", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
                     "NOT_COORDINATOR", "_WAIT_COORD", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_TRANSPORT",
                     "TimeoutError"})
IN_FLIGHT = 200        # requests the child keeps outstanding (one per group)
REQUEST_TIMEOUT = 10.0
# Beyond the read's own bound: interpreter start, imports, and the last batch's requests.
CHILD_START_SECONDS = REQUEST_TIMEOUT + 20.0


@dataclass
class Answers:
    """The child's outcome: offsets per group; groups still retried at the deadline; a group's error."""

    offsets: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)    # group -> last retried error name
    failed: dict[str, str] = field(default_factory=dict)     # group -> "NAME: text"

    def encode(self) -> str:
        return json.dumps({"offsets": {g: [[t, p, o] for (t, p), o in sorted(found.items())]
                                       for g, found in self.offsets.items()},
                           "pending": self.pending, "failed": self.failed})

    @classmethod
    def decode(cls, text: str) -> "Answers":
        doc = json.loads(text)
        return cls(offsets={str(g): {(str(t), int(p)): int(o) for t, p, o in rows}
                            for g, rows in doc["offsets"].items()},
                   pending={str(g): str(e) for g, e in doc.get("pending", {}).items()},
                   failed={str(g): str(e) for g, e in doc.get("failed", {}).items()})


def one_answer(partitions: Iterable[tuple[str, int, int, str]]) -> tuple[dict[tuple[str, int], int] | None, str]:
    """A group's answer as (topic, partition, offset, error name or ''): (offsets, '') when it is
    stable, (None, error) when the group must be asked again or failed. Offsets below 0 (none
    committed) are left out."""
    offsets: dict[tuple[str, int], int] = {}
    for topic, partition, offset, error in partitions:
        if error:
            return None, error
        if offset >= 0:
            offsets[(topic, partition)] = offset
    return offsets, ""


def child_command() -> list[str]:
    """How the child is started: this interpreter, this module."""
    return [sys.executable, "-m", "eosmirror.kafka.groupoffsets"]


def read_all(settings: dict[str, Any], groups: list[str], timeout: float = 30.0) -> Answers | None:
    """The committed offsets of ``groups`` (all the partitions each holds), read with require_stable
    in a child process. None when the child gave no answer (it crashed, could not start, or the
    settings hold values that cannot cross a process boundary, like callbacks): read otherwise. A
    child still asking after its bound leaves every group pending (_TIMED_OUT)."""
    if not groups:
        return Answers()
    try:
        request = json.dumps({"settings": settings, "groups": groups, "timeout": timeout})
    except (TypeError, ValueError):
        return None
    try:
        # The parent's import path: under Airflow, eosmirror may be importable only from its plugins folder.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        child = subprocess.run(child_command(), input=request, capture_output=True, text=True, env=env,
                               timeout=timeout + CHILD_START_SECONDS)
    except subprocess.TimeoutExpired:   # no answer in time: the consumers' read would wait as long
        return Answers(pending=dict.fromkeys(groups, "_TIMED_OUT"))
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("the group-offset reader could not run (%s); reading each group with a consumer", exc)
        return None
    if child.returncode != 0:
        # Never its stderr: librdkafka's lines there may quote settings.
        log.warning("the group-offset reader ended with %s (librdkafka 2.16's admin OffsetFetch crashes when a "
                    "group coordinator moves); reading each group with a consumer",
                    f"signal {-child.returncode}" if child.returncode < 0 else f"exit code {child.returncode}")
        return None
    try:
        return Answers.decode(child.stdout)
    except (ValueError, KeyError, TypeError):
        log.warning("the group-offset reader's answer could not be read; reading each group with a consumer")
        return None


def _ask(settings: dict[str, Any], groups: list[str], timeout: float) -> Answers:
    """The child's work: every group, IN_FLIGHT at a time, asked again while RETRIED, until ``timeout``
    (a group not asked again by then stays pending, with its last answer)."""
    admin = clients.admin_client(settings, "groupoffsets")
    answers, deadline = Answers(), time.monotonic() + timeout
    todo = list(groups)
    while todo:
        retry: list[str] = []
        for at in range(0, len(todo), IN_FLIGHT):
            batch = todo[at:at + IN_FLIGHT]
            if time.monotonic() >= deadline:
                answers.pending.update({g: answers.pending.get(g, "_TIMED_OUT") for g in batch})
                continue
            for group, offsets, error, text in _ask_batch(admin, batch):
                answers.pending.pop(group, None)
                if offsets is not None:
                    answers.offsets[group] = offsets
                elif error in RETRIED:
                    answers.pending[group] = error
                    retry.append(group)
                else:
                    answers.failed[group] = f"{error}: {text}"
        if not retry or time.monotonic() + 0.1 >= deadline:
            break
        time.sleep(0.1)
        todo = retry
    return answers


def _ask_batch(admin: Any, groups: list[str]) -> list[tuple[str, dict[tuple[str, int], int] | None, str, str]]:
    """One OffsetFetch (no partition list, require_stable) per group, all in flight at once:
    (group, offsets or None, error name, error text) each."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = {}
    for group in groups:
        futures.update(admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], require_stable=True, request_timeout=REQUEST_TIMEOUT))
    out: list[tuple[str, dict[tuple[str, int], int] | None, str, str]] = []
    for group, future in futures.items():
        try:
            found = future.result(timeout=REQUEST_TIMEOUT + 5)
        except Exception as exc:  # noqa: BLE001 - named in the answer
            out.append((group, None, calls.error_name(exc) or type(exc).__name__, calls.error_text(exc)))
            continue
        offsets, error = one_answer((tp.topic, tp.partition, tp.offset, tp.error.name() if tp.error else "")
                                    for tp in found.topic_partitions or [])
        out.append((group, offsets, error, error))
    return out


def main() -> int:
    request = json.loads(sys.stdin.read())
    answers = _ask(request["settings"], [str(g) for g in request["groups"]], float(request["timeout"]))
    sys.stdout.write(answers.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
