"""A served run's lease, as a slot holds it (the run server's side: spark/leases.py).

At its start the slot connects to ``SlotTask.lease`` and sends the run's token: ``held`` lets it start, anything
else (or nothing) stops it. The connection then stays open while the run's client lives; once it is readable
(closed, or a last word) the slot's lifeline aborts the slot's transaction. Why: docs/run-server.md, "How a run
is served, and how it ends".
"""

from __future__ import annotations

import select
import socket

from eosmirror.core.errors import EosMirrorError

HOLD_SECONDS = 10.0     # connect and answer: seconds even under load; a dead server answers at once
HELD = b"held\n"


class RunLeaseError(EosMirrorError):
    """A slot of a served run could not hold its run's lease: the slot starts nothing."""


def hold(lease: tuple[str, int, str]) -> socket.socket:
    """The connection that holds ``lease`` (host, port, token) for this slot (step 1)."""
    host, port, token = lease
    try:
        sock = socket.create_connection((host, port), timeout=HOLD_SECONDS)
    except OSError as exc:
        raise RunLeaseError(f"cannot reach the run server's lease at {host}:{port} from this executor "
                            f"({exc.strerror or exc}): executors must reach the server's host on that port "
                            f"(`eosmirror server start --lease-port`)") from None
    try:
        sock.sendall(token.encode() + b"\n")
        answer = _read_line(sock)
    except OSError as exc:
        sock.close()
        raise RunLeaseError(f"the run server's lease at {host}:{port} did not answer ({exc}): the slot starts "
                            f"nothing") from None
    if answer != HELD:
        sock.close()
        raise RunLeaseError("the run server no longer holds this run (its client is gone, or the run ended): "
                            "the slot starts nothing")
    sock.settimeout(None)
    return sock


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n") and len(data) < 64:
        chunk = sock.recv(64)
        if not chunk:
            break
        data += chunk
    return data


def lost(sock: socket.socket) -> bool:
    """True once the server closed this lease (or said anything more): the run is over (step 2)."""
    try:
        readable, _, broken = select.select([sock], [], [sock], 0)
    except (OSError, ValueError):   # closed under us: nothing holds the run any more
        return True
    return bool(readable or broken)
