"""What the broker says of a few transactional ids: for a refusal that names who holds a transaction.

confluent-kafka has no DescribeTransactions admin call. Kafka's own ``TransactionsCommand`` (what
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


def describe(settings: dict[str, Any], ids: list[str], timeout: float = DESCRIBE_SECONDS) -> tuple[dict[str, str], str]:
    """({id: state summary}, '') for the ids the broker answered, or ({}, why none was described)."""
    command, why = describer()
    if command is None:
        return {}, why
    if not _plain(settings):
        return {}, "a cluster with TLS or SASL settings (`kafka-transactions.sh describe` with your client config tells)"
    bootstrap = str(settings.get("bootstrap.servers", ""))

    def one(txn_id: str) -> tuple[str, str]:
        try:
            done = subprocess.run([*command, "--bootstrap-server", bootstrap, "describe", "--transactional-id", txn_id],
                                  capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError) as exc:
            return txn_id, f"not described ({type(exc).__name__})"
        row = parse(done.stdout)
        if row:
            return txn_id, summary(row)
        # An id the coordinator does not know (never used, or expired) answers with an error line.
        text = (done.stderr or done.stdout).strip().splitlines()
        unknown = any("TransactionalIdNotFound" in line or "not found" in line.lower() for line in text)
        return txn_id, "unknown to the broker (no transaction)" if unknown else "not described"

    with ThreadPoolExecutor(max_workers=min(8, len(ids)) or 1) as pool:
        return dict(pool.map(one, ids)), ""
