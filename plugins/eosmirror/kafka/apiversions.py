"""A cluster's ApiVersions answer: the versions of each API its broker serves (Kafka protocol, API key 18).

One request of version 0 (a header and no body, which every broker since 0.10.0 answers) on one
connection to the first bootstrap broker that answers, built by the client factory with the cluster's
TLS settings (``clients.broker_connection``). No authentication is needed: a broker answers ApiVersions
before SASL, as librdkafka itself asks it first on every connection. No secret is sent.

librdkafka has no call that hands this table out (its ``debug=protocol`` lines would, through a Python
``logger``, which confluent-kafka calls from librdkafka's threads: see ``clients._with_logger`` for the
crash that keeps eosmirror from installing one), so the read is this small and separate.

When no broker answers, or the settings ask for TLS that only librdkafka can do, ``read`` raises
``NotRead`` naming why; the caller goes on without the check and says so (the command's own first
request then fails, or succeeds, on its own terms).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, Mapping

from eosmirror.kafka import clients

API_VERSIONS_KEY = 18
CLIENT_ID = b"eosmirror-apiversions"
BUDGET_SECONDS = 5.0        # for the whole read, every bootstrap broker tried included
MAX_ANSWER = 1 << 20


class NotRead(Exception):
    """No broker of the cluster answered ApiVersions (the text says why; never a secret). ``unreachable``: no
    connection could be made at all (the command's own first request will say so); else something answered,
    or the TLS settings could not be reproduced, and only this read failed."""

    def __init__(self, text: str, unreachable: bool = False):
        super().__init__(text)
        self.unreachable = unreachable


@dataclass(frozen=True)
class Answer:
    broker: str             # host:port that answered
    table: dict[int, tuple[int, int]]
    seconds: float


def request(correlation_id: int) -> bytes:
    """ApiVersions v0: request header v1 (api key, version, correlation id, client id), no body."""
    body = struct.pack(">hhih", API_VERSIONS_KEY, 0, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(body)) + body


def parse(payload: bytes, correlation_id: int) -> dict[int, tuple[int, int]]:
    """The answer without its size prefix: response header v0 (correlation id), then error code and the
    [api key, min, max] array of ApiVersionsResponse v0."""
    if len(payload) < 10:
        raise NotRead(f"a short ApiVersions answer ({len(payload)} bytes)")
    answered, error, count = struct.unpack_from(">ihi", payload, 0)
    if answered != correlation_id:
        raise NotRead(f"an answer to another request (correlation id {answered}, not {correlation_id})")
    if error != 0:
        raise NotRead(f"the broker answered ApiVersions with error code {error}")
    if count < 0 or len(payload) < 10 + 6 * count:
        raise NotRead(f"a truncated ApiVersions answer ({count} APIs in {len(payload)} bytes)")
    return {key: (low, high) for key, low, high in struct.iter_unpack(">hhh", payload[10:10 + 6 * count])}


def _exactly(sock: Any, size: int, deadline: float) -> bytes:
    chunks, left = [], size
    while left:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise NotRead("the broker closed the connection before it answered ApiVersions")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _ask(settings: Mapping[str, Any], host: str, port: int, deadline: float) -> dict[int, tuple[int, int]]:
    sock = clients.broker_connection(settings, host, port, max(0.05, deadline - time.monotonic()))
    try:
        correlation_id = int(time.monotonic_ns() % 2**31)
        sock.sendall(request(correlation_id))
        (size,) = struct.unpack(">i", _exactly(sock, 4, deadline))
        if not 10 <= size <= MAX_ANSWER:
            raise NotRead(f"an answer of {size} bytes is no ApiVersions answer (is this a Kafka listener, with "
                          f"the right security.protocol?)")
        return parse(_exactly(sock, size, deadline), correlation_id)
    finally:
        sock.close()


def addresses(settings: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The bootstrap brokers, in the order the settings list them."""
    found = []
    for item in str(settings.get("bootstrap.servers", "")).split(","):
        item = item.strip().split("://")[-1]
        host, _, port = item.rpartition(":")
        if host and port.isdigit():
            found.append((host.strip("[]"), int(port)))
    return found


def read(settings: Mapping[str, Any], budget_s: float = BUDGET_SECONDS) -> Answer:
    """The first bootstrap broker's answer that arrives within ``budget_s`` (each broker tried gets its share of
    the time left); NotRead naming every failure."""
    started = time.monotonic()
    deadline = started + budget_s
    failures, unreachable = [], True
    brokers = addresses(settings)
    for at, (host, port) in enumerate(brokers):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:   # each broker its share of what is left: a silent first one leaves time for the next
            table = _ask(settings, host, port, time.monotonic() + left / (len(brokers) - at))
        except clients.UnsupportedConnection as exc:
            raise NotRead(str(exc)) from None
        except (OSError, NotRead, struct.error) as exc:   # ssl.SSLError and timeouts are OSErrors
            failures.append(f"{host}:{port}: {exc or type(exc).__name__}")
            unreachable = unreachable and isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror))
            continue
        return Answer(f"{host}:{port}", table, round(time.monotonic() - started, 4))
    raise NotRead("; ".join(failures) or f"no bootstrap broker answered within {budget_s:g} s", unreachable)
