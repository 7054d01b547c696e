"""Who listens where, read from the kernel: /proc/net/tcp and tcp6 (state 0A = LISTEN) give each
listening socket's address, port and inode; /proc/<pid>/fd links ("socket:[inode]") say which
process holds it. Only the processes a test names are looked at, never other people's."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    pid: int
    process: str
    address: str
    port: int

    @property
    def loopback(self) -> bool:
        address = ipaddress.ip_address(self.address)
        mapped = getattr(address, "ipv4_mapped", None)   # ::ffff:127.0.0.1 is loopback too
        return (mapped or address).is_loopback

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port} ({self.process}, pid {self.pid})"


def _address(hex_address: str) -> str:
    """/proc/net/tcp* print each 32-bit word of the address in host (little-endian) byte order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening_sockets() -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket of this network namespace."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != LISTEN:
                continue
            address, port = fields[1].split(":")
            found[int(fields[9])] = (_address(address), int(port, 16))
    return found


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        for fd in os.scandir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(fd.path)
            except OSError:      # closed between listing and reading
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except OSError:              # the process exited
        pass
    return inodes


def session_members(sid: int) -> set[int]:
    """Processes of session ``sid`` (a test starts its stack with start_new_session=True, so the
    session holds exactly what it started, however the stack forks and re-parents)."""
    members = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    members.add(int(entry.name))
            except OSError:
                continue
    return members


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:80]
    except OSError:
        return "?"


def listeners_of(pids: set[int]) -> set[Listener]:
    sockets = listening_sockets()
    found = set()
    for pid in pids:
        for inode in socket_inodes(pid) & sockets.keys():
            address, port = sockets[inode]
            found.add(Listener(pid, _process_name(pid), address, port))
    return found


def describe(listeners: set[Listener]) -> str:
    return "\n  ".join(sorted(map(str, listeners))) or "(none)"
