"""Distance between a client and a broker: a TCP proxy with latency, jitter and a bandwidth cap per direction.

This machine's kernel has no ``netem`` queueing discipline, so distance is added in user space, with
Shopify's toxiproxy (the injector Kafka client test suites use), built from source by ``make setup``
(``eosmirror setup``) into ``var/tools/toxiproxy/<version>/`` like the Kafka jars are fetched: once,
then a stamp makes every later set-up a no-op.

A Kafka client connects to the bootstrap address, then to the addresses the brokers *advertise*, so a
proxy in front of a broker must be the advertised address of some listener. A cluster started with a
``Link`` (cluster.py) gets an extra listener ``PROXIED://127.0.0.1:<port+2>`` that advertises the
proxy's port ``<port+4>``; its PLAINTEXT listener on ``<port>`` stays direct for the tests' own judges.
One toxiproxy server per proxied broker (its API on ``<port+3>``), started and stopped with the broker.

Model (toxiproxy's): ``upstream`` is client -> broker, ``downstream`` broker -> client. A ``latency``
toxic holds each chunk until ``latency +- jitter`` ms after it arrived (pipelined: a stream of chunks is
delayed, not slowed); a ``bandwidth`` toxic passes at most ``rate`` KB/s. A round trip crosses both
directions: ``Link.round_trip(100)`` puts 50 ms on each.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from eosmirror import paths

log = logging.getLogger(__name__)


class LocalCluster(Protocol):
    """What a link needs of a broker (cluster.LocalCluster has it): this module imports no cluster module."""

    @property
    def name(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def dir(self) -> Path: ...

TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2"
TOXIPROXY_VERSION = "v2.12.0"
BUILD_TIMEOUT = 600
_STAMP = ".complete"
PROXY_NAME = "broker"


class LinkError(RuntimeError):
    """A link cannot be built, started or set as asked (bad numbers, a port in use, no Go)."""


@dataclass(frozen=True)
class Direction:
    """One direction of a link: one-way latency and jitter (ms), and a bandwidth cap (KB/s, 0: none)."""

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    kilobytes_per_second: int = 0

    def check(self, which: str) -> None:
        for field_name in ("latency_ms", "jitter_ms", "kilobytes_per_second"):
            value = getattr(self, field_name)
            if value < 0:
                raise LinkError(f"link {which}: {field_name} must not be negative, given {value:g}")
        if self.jitter_ms > self.latency_ms:
            raise LinkError(f"link {which}: jitter_ms {self.jitter_ms:g} exceeds latency_ms {self.latency_ms:g} "
                            f"(a chunk cannot arrive before it was sent)")

    def toxics(self, stream: str) -> list[dict[str, Any]]:
        """toxiproxy's toxics for this direction (``stream``: upstream or downstream)."""
        out = []
        if self.latency_ms > 0:
            out.append({"name": f"latency_{stream}", "type": "latency", "stream": stream, "toxicity": 1.0,
                        "attributes": {"latency": int(round(self.latency_ms)), "jitter": int(round(self.jitter_ms))}})
        if self.kilobytes_per_second > 0:
            out.append({"name": f"bandwidth_{stream}", "type": "bandwidth", "stream": stream, "toxicity": 1.0,
                        "attributes": {"rate": int(self.kilobytes_per_second)}})
        return out


@dataclass(frozen=True)
class Link:
    """What lies between the clients and a broker: ``upstream`` (client -> broker), ``downstream`` (back)."""

    upstream: Direction = Direction()
    downstream: Direction = Direction()

    @classmethod
    def round_trip(cls, rtt_ms: float, jitter_ms: float = 0.0, kilobytes_per_second: int = 0) -> "Link":
        """A symmetric link: half the round trip (and half the jitter) each way, the same cap each way, in
        whole milliseconds as toxiproxy takes them (an odd round trip puts the extra one upstream)."""
        if rtt_ms < 0:
            raise LinkError(f"link: the round trip must not be negative, given {rtt_ms:g} ms")
        if jitter_ms < 0:
            raise LinkError(f"link: the jitter must not be negative, given {jitter_ms:g} ms")
        if kilobytes_per_second < 0:
            raise LinkError(f"link: the bandwidth must not be negative, given {kilobytes_per_second} KB/s")
        rtt, jitter = int(round(rtt_ms)), int(round(jitter_ms))
        link = cls(Direction((rtt + 1) // 2, (jitter + 1) // 2, kilobytes_per_second),
                   Direction(rtt // 2, jitter // 2, kilobytes_per_second))
        link.check()
        return link

    @property
    def rtt_ms(self) -> float:
        return self.upstream.latency_ms + self.downstream.latency_ms

    def check(self) -> None:
        self.upstream.check("upstream")
        self.downstream.check("downstream")

    def toxics(self) -> list[dict[str, Any]]:
        return self.upstream.toxics("upstream") + self.downstream.toxics("downstream")

    def describe(self) -> str:
        cap = self.upstream.kilobytes_per_second or self.downstream.kilobytes_per_second
        jitter = self.upstream.jitter_ms + self.downstream.jitter_ms
        return (f"{self.rtt_ms:g} ms round trip" + (f" +- {jitter:g} ms" if jitter else "")
                + (f", {cap} KB/s" if cap else ""))


# --- toxiproxy itself ----------------------------------------------------------------------------------

def tools_dir() -> Path:
    """``var/tools/toxiproxy/<version>`` of the checkout (a build cache, like var/kafka-lib)."""
    root = paths.checkout_root()
    return (root / "var" if root else paths.home()) / "tools" / "toxiproxy" / TOXIPROXY_VERSION


def binary() -> Path:
    return tools_dir() / "toxiproxy-server"


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        raise LinkError("toxiproxy (the latency injector of the test kit) is built from source with Go, and no "
                        "`go` is on PATH (nor /usr/local/go/bin/go): install Go 1.22 or newer")
    return found


def ensure_toxiproxy() -> Path:
    """The toxiproxy server binary, built with ``go install`` on first use (a stamp makes later calls free)."""
    target = tools_dir()
    if (target / _STAMP).exists() and binary().exists():
        return binary()
    go = go_binary()
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log.info("building toxiproxy %s from source into %s", TOXIPROXY_VERSION, target)
    env = {**os.environ, "GOBIN": str(staging), "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}
    try:
        done = subprocess.run([go, "install", f"{TOXIPROXY_MODULE}/cmd/server@{TOXIPROXY_VERSION}"],
                              capture_output=True, text=True, env=env, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        raise LinkError(f"building toxiproxy {TOXIPROXY_VERSION} with `go install` took over {BUILD_TIMEOUT} s; "
                        f"is the Go module proxy reachable (GOPROXY={os.environ.get('GOPROXY', 'default')})?") from None
    built = staging / "server"
    if done.returncode != 0 or not built.exists():
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise LinkError(f"`go install {TOXIPROXY_MODULE}/cmd/server@{TOXIPROXY_VERSION}` failed "
                        f"(exit {done.returncode}); the test kit needs it for latency between clusters:\n{tail}")
    built.rename(staging / "toxiproxy-server")
    (staging / _STAMP).write_text(TOXIPROXY_VERSION + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)   # atomic: a folder with the stamp is complete
    return binary()


# --- one proxy per broker ------------------------------------------------------------------------------

def listener_port(cluster: LocalCluster) -> int:
    """The broker's own PROXIED listener, which only the proxy connects to."""
    return cluster.port + 2


def api_port(cluster: LocalCluster) -> int:
    return cluster.port + 3


def proxy_port(cluster: LocalCluster) -> int:
    """What the broker advertises on its PROXIED listener: the clients' way in through the link."""
    return cluster.port + 4


def proxied_bootstrap(cluster: LocalCluster) -> str:
    return f"127.0.0.1:{proxy_port(cluster)}"


def _pid_file(cluster: LocalCluster) -> Path:
    return cluster.dir / "proxy.pid"


def _log_file(cluster: LocalCluster) -> Path:
    return cluster.dir / "proxy.log"


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def running_pid(cluster: LocalCluster) -> int | None:
    """The pid of this cluster's proxy when its pid file names a live toxiproxy serving this cluster's API port."""
    try:
        pid = int(_pid_file(cluster).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return None
    if "toxiproxy-server" in cmdline and f"-port {api_port(cluster)}" in cmdline:
        return pid
    return None


def _api(cluster: LocalCluster, method: str, path: str, body: Any = None, timeout: float = 5.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{api_port(cluster)}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        raise LinkError(f"toxiproxy of {cluster.name}: {method} {path} answered {exc.code}: "
                        f"{exc.read().decode(errors='replace')[:300]}") from None
    return json.loads(text) if text.strip() else None


def start(cluster: LocalCluster, link: Link, timeout: float = 30.0) -> None:
    """The proxy of ``cluster`` running with ``link`` (started, or the running one's toxics replaced)."""
    link.check()
    if running_pid(cluster) is None:
        _launch(cluster, timeout)
    apply(cluster, link)


def check_ports(cluster: LocalCluster) -> None:
    """Raise LinkError naming the port when the proxy of ``cluster`` could not start (unless it runs already)."""
    if running_pid(cluster) is not None:
        return
    for port, what in ((api_port(cluster), "its API"), (proxy_port(cluster), "its listener")):
        if _port_in_use(port):
            raise LinkError(f"cannot start the {cluster.name} cluster's proxy: port {port} ({what}) is already used "
                            f"by another process; stop it or choose other ports with the cluster's base port")


def _launch(cluster: LocalCluster, timeout: float) -> None:
    check_ports(cluster)
    server = ensure_toxiproxy()
    cluster.dir.mkdir(parents=True, exist_ok=True)
    with open(_log_file(cluster), "ab") as out:
        proc = subprocess.Popen([str(server), "-host", "127.0.0.1", "-port", str(api_port(cluster))],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    _pid_file(cluster).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            _pid_file(cluster).unlink(missing_ok=True)
            tail = _log_file(cluster).read_text(errors="replace").splitlines()[-10:]
            raise LinkError(f"the {cluster.name} cluster's proxy exited at start (exit {proc.returncode}):\n"
                            + "\n".join(tail))
        try:
            _api(cluster, "GET", "/version", timeout=1.0)
            break
        except (OSError, LinkError):
            if time.monotonic() > deadline:
                stop(cluster)
                raise LinkError(f"the {cluster.name} cluster's proxy did not answer on port {api_port(cluster)} "
                                f"within {timeout:.0f} s; see {_log_file(cluster)}") from None
            time.sleep(0.1)
    _api(cluster, "POST", "/proxies", {"name": PROXY_NAME, "listen": proxied_bootstrap(cluster),
                                       "upstream": f"127.0.0.1:{listener_port(cluster)}", "enabled": True})
    log.info("started the %s cluster's proxy (pid %d): %s -> 127.0.0.1:%d", cluster.name, proc.pid,
             proxied_bootstrap(cluster), listener_port(cluster))


def apply(cluster: LocalCluster, link: Link) -> None:
    """Replace the running proxy's toxics with ``link``'s (no reconnect: open connections change at once)."""
    link.check()
    for toxic in _api(cluster, "GET", f"/proxies/{PROXY_NAME}/toxics") or []:
        _api(cluster, "DELETE", f"/proxies/{PROXY_NAME}/toxics/{toxic['name']}")
    for toxic in link.toxics():
        _api(cluster, "POST", f"/proxies/{PROXY_NAME}/toxics", toxic)


def current(cluster: LocalCluster) -> Link | None:
    """The link the running proxy applies (None when no proxy runs)."""
    if running_pid(cluster) is None:
        return None
    directions: dict[str, dict[str, float]] = {"upstream": {}, "downstream": {}}
    for toxic in _api(cluster, "GET", f"/proxies/{PROXY_NAME}/toxics") or []:
        attrs, into = toxic.get("attributes", {}), directions[toxic["stream"]]
        if toxic["type"] == "latency":
            into.update(latency_ms=attrs.get("latency", 0), jitter_ms=attrs.get("jitter", 0))
        elif toxic["type"] == "bandwidth":
            into["kilobytes_per_second"] = attrs.get("rate", 0)
    return Link(Direction(**directions["upstream"]), Direction(**directions["downstream"]))   # type: ignore[arg-type]


def stop(cluster: LocalCluster, timeout: float = 10.0) -> bool:
    """Stop this cluster's proxy (only the process its pid file names, and only if it is ours)."""
    from eosmirror_tools.kit import processes

    pid = running_pid(cluster)
    if pid is not None:
        processes.stop_own(pid, lambda: running_pid(cluster) is not None, timeout)
    _pid_file(cluster).unlink(missing_ok=True)
    return pid is not None


def measured_rtt_ms(conf: dict[str, Any], tries: int = 5) -> float:
    """The round trip a real client sees: the fastest of ``tries`` metadata requests of a warm librdkafka
    admin client (its first request, which also connects, is not counted)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**conf, "log_level": 3})
    admin.list_topics(timeout=30)   # connect (TCP, ApiVersions) first: not part of a round trip
    best = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        admin.list_topics(timeout=30)
        best = min(best, (time.perf_counter() - began) * 1000)
    return best
