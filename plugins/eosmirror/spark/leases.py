"""The run server's leases: a served run's slots end when its client does, on any Spark master.

Per run, ``grant`` binds a random token to the client process (pid and start time); each slot holds it as one
TCP connection (slot/runlease.py); the lease thread revokes it once the client is gone, the run ends or the
server ends, and each slot's lifeline then aborts its own transaction. The lease never commits or fences
anything. How a run is served and how it ends: docs/run-server.md.
"""

from __future__ import annotations

import logging
import secrets
import select
import socket
import threading
import time
from dataclasses import dataclass, field

from eosmirror.slot import lifeline
from eosmirror.slot.runlease import HELD

log = logging.getLogger(__name__)

CHECK_SECONDS = 0.25
TOKEN_SECONDS = 10.0    # a connection must send its token within this (a slot does at once: runlease.HOLD_SECONDS)
GONE = b"gone\n"


@dataclass
class _Grant:
    owner: lifeline.Process
    run: str
    held: list[socket.socket] = field(default_factory=list)


class LeaseServer:
    def __init__(self, advertised_host: str, bind_host: str, port: int = 0) -> None:
        self.listener = socket.create_server((bind_host, port), backlog=128, reuse_port=False)
        self.address = (advertised_host, self.listener.getsockname()[1])
        self.grants: dict[str, _Grant] = {}
        self.waiting: dict[socket.socket, tuple[bytes, float]] = {}   # connected, token not yet read: (so far, since)
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="eosmirror-leases", daemon=True)
        self.thread.start()

    def grant(self, owner: lifeline.Process, run: str) -> tuple[str, int, str]:
        """Step 1: the lease of ``run``, held while ``owner`` lives."""
        token = secrets.token_hex(16)
        with self.lock:
            self.grants[token] = _Grant(owner, run)
        return (*self.address, token)

    def revoke(self, token: str, why: str) -> None:
        """Steps 3 and 4: drop the token and close its slots' connections."""
        with self.lock:
            grant = self.grants.pop(token, None)
        if grant is None:
            return
        for sock in grant.held:
            _close(sock)
        if grant.held:
            log.warning("run %s: lease revoked (%s): %d slot(s) abort their transactions", grant.run, why,
                        len(grant.held))

    def close(self) -> None:
        self.closed.set()
        self.thread.join(5)

    def _serve(self) -> None:
        try:
            while not self.closed.is_set():
                self._once()
        except Exception:  # noqa: BLE001 - a lease thread that dies silently would leave runs unwatched
            log.exception("the lease thread failed; every served slot now aborts")
        finally:   # step 5
            with self.lock:
                grants, self.grants = list(self.grants.values()), {}
            for sock in [s for g in grants for s in g.held] + list(self.waiting) + [self.listener]:
                _close(sock)

    def _once(self) -> None:
        with self.lock:
            held = {s: token for token, g in self.grants.items() for s in g.held}
        watched = [self.listener, *self.waiting, *held]
        try:
            readable, _, _ = select.select(watched, [], [], CHECK_SECONDS)
        except (OSError, ValueError):   # a lease revoked by a run's thread meanwhile: look again
            readable = []
        for sock in readable:
            if sock is self.listener:
                conn, _ = self.listener.accept()
                conn.setblocking(False)
                self.waiting[conn] = (b"", time.monotonic())
            elif sock in self.waiting:
                self._read_token(sock)
            else:   # a held connection readable: its slot closed it (the slot ended)
                with self.lock:
                    grant = self.grants.get(held[sock])
                    if grant is not None and sock in grant.held:
                        grant.held.remove(sock)
                _close(sock)
        stale = [sock for sock, (_, since) in self.waiting.items() if time.monotonic() - since > TOKEN_SECONDS]
        for sock in stale:   # a peer that connects and says nothing holds no lease, and no file descriptor for long
            del self.waiting[sock]
            _close(sock)
        with self.lock:
            gone = [(token, g) for token, g in self.grants.items() if not g.owner.alive()]
        for token, grant in gone:
            self.revoke(token, f"its client, pid {grant.owner.pid}, is gone")

    def _read_token(self, sock: socket.socket) -> None:
        so_far, since = self.waiting[sock]
        try:
            data = so_far + sock.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b"!"
        if data and not data.endswith(b"\n") and len(data) < 64:
            self.waiting[sock] = (data, since)
            return
        del self.waiting[sock]
        token = data.strip().decode(errors="replace")
        with self.lock:
            granted = token in self.grants
        try:
            sock.setblocking(True)
            sock.sendall(HELD if granted else GONE)
        except OSError:
            granted = False
        with self.lock:   # revoked meanwhile: the slot reads the close as the lease's end
            grant = self.grants.get(token) if granted else None
            if grant is not None:
                grant.held.append(sock)
        if grant is None:
            _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
