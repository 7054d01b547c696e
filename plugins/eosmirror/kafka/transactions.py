"""What the broker says of a few transactional ids, or of the producers on a few partitions: for a
refusal that names who holds a transaction or who wrote (DescribeTransactions, DescribeProducers).

confluent-kafka has no DescribeTransactions or DescribeProducers admin call. Kafka's own ``TransactionsCommand`` (what
``kafka-transactions.sh describe --transactional-id X`` runs) answers it, where Kafka's jars are on
this host: ``$EOSMIRROR_KAFKA_LIBS`` (a folder of jars), ``$KAFKA_HOME/libs``, or the jars
``eosmirror setup`` fetched into the project's home. The installed product does not need them: with
none, or on a cluster that needs TLS or SASL settings (they would have to be written to a file for
the tool; secrets never leave this process), nothing is described and the caller names the ids
only. Only ever called on a refusal, bounded in time, never on the happy path.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eosmirror import paths
from eosmirror.core import foreign

log = logging.getLogger(__name__)

DESCRIBE_SECONDS = 25.0
MAIN_CLASS = "org.apache.kafka.tools.TransactionsCommand"


def _jar_folders() -> list[Path]:
    folders = []
    if os.environ.get("EOSMIRROR_KAFKA_LIBS"):
        folders.append(Path(os.environ["EOSMIRROR_KAFKA_LIBS"]))
    if os.environ.get("KAFKA_HOME"):
        folders.append(Path(os.environ["KAFKA_HOME"]) / "libs")
    root = paths.checkout_root()
    for base in ([root / "var"] if root else []) + [paths.home()]:
        cache = base / "kafka-lib"
        if cache.is_dir():
            folders += sorted((p for p in cache.iterdir() if p.is_dir()), reverse=True)
    return folders


def describer() -> tuple[list[str] | None, str]:
    """(the java command prefix that runs TransactionsCommand, '') or (None, why there is none)."""
    java = (str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME")
            else shutil.which("java"))
    if not java or not Path(java).exists():
        return None, "no java on this host"
    for folder in _jar_folders():
        if any(folder.glob("kafka-tools-[0-9]*.jar")):
            return [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{folder}/*", MAIN_CLASS], ""
    return None, "no Kafka jars on this host (set KAFKA_HOME or EOSMIRROR_KAFKA_LIBS to describe them)"


def _plain(settings: dict[str, Any]) -> bool:
    protocol = str(settings.get("security.protocol", "plaintext")).lower()
    return protocol == "plaintext" and not any(k.startswith(("sasl.", "ssl.")) for k in settings)


def parse(output: str) -> dict[str, str]:
    """TransactionsCommand's describe table (a header line, a value line) as {column: value}."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    for at, header in enumerate(lines[:-1]):
        if "TransactionState" in header:
            return dict(zip(header, lines[at + 1]))
    return {}


def summary(row: dict[str, str]) -> str:
    """'Ongoing, open for 41 s, producer 1000 epoch 3' from a parsed row."""
    state = row.get("TransactionState", "?")
    parts = [state]
    duration = row.get("TransactionDurationMs", "None")
    if duration.isdigit() and state not in ("Empty", "CompleteCommit", "CompleteAbort"):
        parts.append(f"open for {int(duration) // 1000} s")
    if row.get("ProducerId"):
        parts.append(f"producer {row['ProducerId']} epoch {row.get('ProducerEpoch', '?')}")
    return ", ".join(parts)


def _tool(settings: dict[str, Any], what: str) -> tuple[list[str] | None, str]:
    """(TransactionsCommand with ``--bootstrap-server``, '') or (None, why it cannot be asked)."""
    command, why = describer()
    if command is None:
        return None, why
    if not _plain(settings):
        return None, f"a cluster with TLS or SASL settings (`kafka-transactions.sh {what}` with your client config tells)"
    return [*command, "--bootstrap-server", str(settings.get("bootstrap.servers", ""))], ""


def describe(settings: dict[str, Any], ids: list[str], timeout: float = DESCRIBE_SECONDS) -> tuple[dict[str, str], str]:
    """({id: state summary}, '') for the ids the broker answered, or ({}, why none was described)."""
    rows, why = describe_rows(settings, ids, timeout)
    return {txn_id: summary(row) if isinstance(row, dict) else row for txn_id, row in rows.items()}, why


def describe_rows(settings: dict[str, Any], ids: list[str], timeout: float = DESCRIBE_SECONDS,
                  ) -> tuple[dict[str, dict[str, str] | str], str]:
    """({id: its describe row, or why there is none}, '') or ({}, why none was described)."""
    command, why = _tool(settings, "describe")
    if command is None:
        return {}, why

    def one(txn_id: str) -> tuple[str, dict[str, str] | str]:
        try:
            done = subprocess.run([*command, "describe", "--transactional-id", txn_id],
                                  capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError) as exc:
            return txn_id, f"not described ({type(exc).__name__})"
        row = parse(done.stdout)
        if row:
            return txn_id, row
        # An id the coordinator does not know (never used, or expired) answers with an error line.
        text = (done.stderr or done.stdout).strip().splitlines()
        unknown = any("TransactionalIdNotFound" in line or "not found" in line.lower() for line in text)
        return txn_id, "unknown to the broker (no transaction)" if unknown else "not described"

    with ThreadPoolExecutor(max_workers=min(8, len(ids)) or 1) as pool:
        return dict(pool.map(one, ids)), ""


def parse_producers(output: str) -> list[dict[str, str]]:
    """TransactionsCommand's describe-producers table (a header line, a line per producer) as rows."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    for at, header in enumerate(lines):
        if "ProducerId" in header:
            return [dict(zip(header, values)) for values in lines[at + 1:] if len(values) == len(header)]
    return []


def describe_producers(settings: dict[str, Any], partitions: list[tuple[str, int]],
                       timeout: float = DESCRIBE_SECONDS) -> tuple[dict[tuple[str, int], list[dict[str, str]]], str]:
    """({partition: the producers the leader keeps state for}, '') or ({}, why none was described).
    A partition whose describe failed is left out; ``why`` then says so."""
    command, why = _tool(settings, "describe-producers")
    if command is None:
        return {}, why

    def one(tp: tuple[str, int]) -> tuple[tuple[str, int], list[dict[str, str]] | None]:
        try:
            done = subprocess.run([*command, "describe-producers", "--topic", tp[0], "--partition", str(tp[1])],
                                  capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            return tp, None
        return tp, parse_producers(done.stdout) if done.returncode == 0 else None

    with ThreadPoolExecutor(max_workers=min(8, len(partitions)) or 1) as pool:
        answers = dict(pool.map(one, partitions))
    failed = [tp for tp, rows in answers.items() if rows is None]
    return ({tp: rows for tp, rows in answers.items() if rows is not None},
            f"DescribeProducers did not answer for {len(failed)} partition(s)" if failed else "")


def name_producers(settings: dict[str, Any], records: list[foreign.ForeignRecords], own_ids: list[str],
                   timeout: float = DESCRIBE_SECONDS) -> tuple[list[foreign.ForeignRecords], str]:
    """``records`` with the producers DescribeProducers reports on their partitions, the mirror's own
    (``own_ids``: its transactional ids, described for their producer ids) marked; and what is left out
    and why. Only on a refusal; bounded in time; never raises (the refusal stands without the names)."""
    partitions = sorted({(r.topic, r.partition) for r in records})
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            asked = pool.submit(describe_producers, settings, partitions, timeout)
            ids, _ = describe_rows(settings, own_ids, timeout)
            described, why = asked.result()
    except Exception as exc:  # noqa: BLE001 - optional by design: the refusal names offsets without producers
        return records, f"not described ({type(exc).__name__})"
    own = {row["ProducerId"]: txn_id for txn_id, row in ids.items() if isinstance(row, dict) and "ProducerId" in row}
    named, left_out = foreign.with_producers(records, described, own)
    return named, "; ".join(text for text in (why, left_out) if text)
