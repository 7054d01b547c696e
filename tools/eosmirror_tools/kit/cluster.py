"""Single-node Apache Kafka clusters (KRaft, combined broker+controller) on loopback.

Two clusters, ``source`` and ``target``, back the demo, the tests and the benchmarks. Each keeps
its config, data, log and pid file under ``var/kafka/<name>/``. A cluster is formatted on its first
start. ``stop`` only ever signals the process recorded in the pid file, and only after checking that
the process's command line names this cluster's own config file, so it can never kill a broker it
did not start.

A cluster runs the pom's Kafka version unless given another (``version``: a release of one of
runtime.LINES). Its data then lives in ``data-<version>`` (a KRaft log formatted by one line is not
another's). A version before 3.3 runs in ZooKeeper mode: a ZooKeeper of the cluster's own, from the
same release's jars, listens on the port KRaft's controller would use (``controller_port``), with its
own config, pid file and log beside the broker's; ``stop`` stops the broker first, then it.

Transactions work on one node because every internal topic has replication factor 1 and
``min.insync.replicas`` 1 (the defaults of 3 and 2 make ``init_transactions`` wait forever).
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from eosmirror import paths
from eosmirror_tools.kit import jvmarchive, runtime, waits
from eosmirror_tools.kit import link as links

log = logging.getLogger(__name__)

DEFAULT_PORTS = {"source": 19092, "target": 29092}
PORT_ENV = {"source": "EOSMIRROR_SOURCE_PORT", "target": "EOSMIRROR_TARGET_PORT"}

BROKER_DEFAULTS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    # A mirror must never create topics by accident (a typo would silently get 1 partition).
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    # One node: every internal topic at replication factor 1 so that transactions and groups work.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "3",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "min.insync.replicas": "1",
    "group.initial.rebalance.delay.ms": "0",
    # Compacted topics show their offset gaps within seconds (default cleaner back-off: 15 s).
    "log.cleaner.backoff.ms": "1000",
    # Abort transactions of killed producers within ~1 s of their timeout (default check: 10 s).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    # Index files of 256 KiB (default 10 MiB; a segment rolls when its index is full: ~128 MB of small
    # records). A broker creates each segment's offset and time index as a sparse file of this size and
    # mmaps it; on this project's machines (ext4) the first write into such a file costs ~0.27 ms per MiB
    # of its size (2.7-2.9 ms at 10 MiB, 0.07 ms at 256 KiB, measured). The first index entry of a fresh
    # partition is usually written by a transaction marker, so at 10 MiB the broker wrote the markers of
    # a commit over 5,000 fresh partitions at ~100 partitions/s: 50 s before read_committed readers saw
    # the records (issue #44). Every client of these clusters, MirrorMaker 2 in the benchmarks included,
    # runs against the same setting.
    "log.index.size.max.bytes": str(256 * 1024),
}

# With quick_start() (the test suite): a test broker idles most of its life, and Kafka's defaults cost an
# idle one 2.9 % of a core; these 1.6 % (60 s each, after a 40 s warm-up, three brokers side by side).
# About 7 brokers live through a 12-minute suite on 2 cores. The benchmarks keep Kafka's defaults.
IDLE_TEST_BROKER = {
    # The active controller appends a no-op record every 500 ms (KIP-835), which the raft thread writes
    # and every broker-side metadata listener replays; a single-node test cluster needs no liveness proof.
    "metadata.max.idle.interval.ms": "0",
    # Threads that each wake on a timer: a test moves a few MB, never enough to need 8 and 3.
    "num.io.threads": "2",
    "num.network.threads": "2",
    "background.threads": "2",
}


# Brokers this process launched: their exit is known from the Popen handle (the java launcher's
# /proc/<pid>/cmdline is briefly empty right after the fork, so it cannot tell "starting" from "gone").
_children: dict[str, subprocess.Popen] = {}


class LocalClusterError(RuntimeError):
    """A local cluster could not be started, stopped or reached."""


@dataclass(frozen=True)
class LocalCluster:
    """One single-node cluster. With ``sasl_users`` it listens SASL_PLAINTEXT (mechanism PLAIN) and
    enforces ACLs with KRaft's StandardAuthorizer; ``admin`` is its super user. With ``link`` it also
    listens behind a proxy that adds that latency and bandwidth cap (link.py): ``far_config()`` reaches
    it that way, ``client_config()`` stays direct."""

    name: str
    port: int
    overrides: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    sasl_users: dict[str, str] = field(default_factory=dict, hash=False, compare=False, repr=False)
    version: str = ""      # a Kafka release (runtime.resolve_version); "" = the pom's

    @property
    def release(self) -> str:
        """The Kafka release this cluster runs."""
        return self.version or runtime.kafka_version()

    @property
    def default_release(self) -> bool:
        return self.release == runtime.kafka_version()

    @property
    def jars(self) -> str | None:
        """The ``version`` argument of runtime's functions for this cluster (None: the default jars)."""
        return None if self.default_release else self.release

    @property
    def zookeeper(self) -> bool:
        """True when this cluster's release keeps its metadata in ZooKeeper (before 3.3)."""
        return runtime.uses_zookeeper(self.release)
    link: links.Link | None = field(default=None, hash=False, compare=False)

    @property
    def controller_port(self) -> int:
        """KRaft's controller listener, or in ZooKeeper mode the ZooKeeper's client port."""
        return self.port + 1

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def dir(self) -> Path:
        return paths.under_home("kafka", self.name)

    @property
    def data_dir(self) -> Path:
        return self.dir / ("data" if self.default_release else f"data-{self.release}")

    @property
    def zookeeper_dir(self) -> Path:
        return self.dir / f"zookeeper-{self.release}"

    @property
    def zookeeper_config_file(self) -> Path:
        return self.dir / "zookeeper.properties"

    @property
    def zookeeper_log_file(self) -> Path:
        return self.dir / "zookeeper.log"

    @property
    def zookeeper_pid_file(self) -> Path:
        return self.dir / "zookeeper.pid"

    @property
    def config_file(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.dir / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.dir / "broker.pid"

    def client_config(self, user: str | None = None) -> dict[str, str]:
        """librdkafka settings that reach this cluster (as ``user`` on a SASL cluster; default admin)."""
        conf = {"bootstrap.servers": self.bootstrap}
        if self.sasl_users:
            user = user or "admin"
            conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": user, "sasl.password": self.sasl_users[user]})
        return conf

    def far_config(self) -> dict[str, str]:
        """librdkafka settings that reach this cluster through its link's proxy (direct when it has none)."""
        if self.link is None:
            return self.client_config()
        return {**self.client_config(), "bootstrap.servers": links.proxied_bootstrap(self)}

    def properties(self) -> dict[str, str]:
        props = dict(BROKER_DEFAULTS)
        if self.zookeeper:
            return self._zookeeper_mode(props)
        if runtime.line_of(self.release) < (4, 0):     # the share-group coordinator came with 4.0
            props = {k: v for k, v in props.items() if not k.startswith("share.")}
        props.update({
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
        })
        if self.sasl_users and not self.default_release:
            raise LocalClusterError(f"a SASL cluster runs Kafka {runtime.kafka_version()} only (asked: {self.release})")
        if self.link is not None:
            if self.sasl_users or not self.default_release:
                raise LocalClusterError(f"{self.name}: a link (latency proxy) is only built for PLAINTEXT clusters "
                                        f"of Kafka {runtime.kafka_version()}")
            # PLAINTEXT stays first: known_clusters() reads the cluster's port from the first listener.
            props.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port},"
                             f"PROXIED://127.0.0.1:{links.listener_port(self)}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                                        f"PROXIED://{links.proxied_bootstrap(self)}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT",
            })
        if self.sasl_users:
            users = " ".join(f'user_{u}="{pw}"' for u, pw in sorted(self.sasl_users.items()))
            props.update({
                "listeners": f"SASL_PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{self.port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="admin" password="{self.sasl_users["admin"]}" {users};',
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                # The broker reaches its own controller over the PLAINTEXT controller listener as ANONYMOUS.
                "super.users": "User:admin;User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            })
        if runtime.quick_start():
            props.update(IDLE_TEST_BROKER)
        props.update(self.overrides)
        return props

    def _zookeeper_mode(self, props: dict[str, str]) -> dict[str, str]:
        """The broker's settings before KRaft: its ZooKeeper at controller_port, no controller listener."""
        if self.sasl_users:
            raise LocalClusterError(f"a SASL cluster runs Kafka {runtime.kafka_version()} only (asked: {self.release})")
        kraft_only = ("process.roles", "node.id", "controller.listener.names")
        props = {k: v for k, v in props.items() if k not in kraft_only and not k.startswith("share.")}
        props.update({
            "broker.id": "1",
            "zookeeper.connect": f"127.0.0.1:{self.controller_port}",
            # The broker and its ZooKeeper start together: room for a ZooKeeper slow to boot on a busy machine.
            "zookeeper.connection.timeout.ms": "60000",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
        })
        props.update(self.overrides)
        return props

    def zookeeper_properties(self) -> dict[str, str]:
        return {"dataDir": str(self.zookeeper_dir), "clientPort": str(self.controller_port),
                "clientPortAddress": "127.0.0.1", "maxClientCnxns": "0", "admin.enableServer": "false",
                "tickTime": "2000"}


def local_cluster(name: str, version: str | None = None, link: links.Link | None = None) -> LocalCluster:
    """The ``source`` or ``target`` cluster, at its default port unless the environment overrides it, running
    ``version`` (a line such as "3.9" or a release; default: the pom's; unknown ones are refused naming
    the available ones); with ``link``, also behind its proxy (and ``local: <name>`` then resolves through it)."""
    if name not in DEFAULT_PORTS:
        raise LocalClusterError(f"unknown local cluster {name!r}: expected one of {sorted(DEFAULT_PORTS)}")
    raw = os.environ.get(PORT_ENV[name])
    try:
        port = int(raw) if raw else DEFAULT_PORTS[name]
    except ValueError:
        raise LocalClusterError(f"{PORT_ENV[name]}={raw!r} is not a port number") from None
    try:
        release = runtime.resolve_version(version)
    except runtime.KafkaRuntimeError as exc:
        raise LocalClusterError(f"the {name} cluster: {exc}") from None
    return LocalCluster(name=name, port=port, version="" if release == runtime.kafka_version() else release, link=link)


def secure_cluster(passwords: dict[str, str], name: str = "secure", port: int = 19992) -> LocalCluster:
    """A SASL/PLAIN cluster with ACLs enforced; ``passwords`` must include ``admin`` (super user)."""
    if "admin" not in passwords:
        raise LocalClusterError("a secure local cluster needs an `admin` user (its super user)")
    return LocalCluster(name=name, port=port, sasl_users=dict(passwords))


def broker_pids() -> list[int]:
    """The local brokers' pids, every cluster under this home's var/kafka (the bench's far source too), with
    their links' proxies (from their pid files; only read, never signalled)."""
    found = []
    for c in known_clusters():
        found += [pid for pid in (running_pid(c), links.running_pid(c)) if pid]
    return found


def default_clusters(source_version: str | None = None, target_version: str | None = None) -> list[LocalCluster]:
    return [local_cluster("source", source_version), local_cluster("target", target_version)]


# --- process bookkeeping ---------------------------------------------------------------------------

def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _own_pid(pid_file: Path, config_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if str(config_file) in _cmdline(pid):
        return pid
    return None  # stale pid file, or the pid was reused by someone else: not ours to touch


def running_pid(cluster: LocalCluster) -> int | None:
    """The pid of this cluster's broker if the pid file names a live process that is ours."""
    return _own_pid(cluster.pid_file, cluster.config_file)


def zookeeper_pid(cluster: LocalCluster) -> int | None:
    """The pid of this cluster's ZooKeeper (ZooKeeper mode) if its pid file names a live process of ours."""
    return _own_pid(cluster.zookeeper_pid_file, cluster.zookeeper_config_file)


def _live_child(config_file: Path) -> int | None:
    """The pid of a process this one launched with ``config_file`` while it lives: right after the fork its
    /proc cmdline can still be empty, so the pid-file check alone would miss a broker launched a moment ago."""
    child = _children.get(str(config_file))
    return child.pid if child is not None and child.poll() is None else None


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# Where each launched broker's log started, so that a failure reports this start, not an older one.
_log_offsets: dict[str, int] = {}


def _log_tail(cluster: LocalCluster, lines: int = 25, log_file: Path | None = None) -> str:
    """The cause first (ERROR/FATAL lines of this start, e.g. "Address already in use"), then the tail:
    a dying broker's last lines are only its orderly shutdown."""
    log_file = log_file or cluster.log_file
    try:
        with open(log_file, "rb") as log_in:
            log_in.seek(_log_offsets.get(str(log_file), 0))
            text = log_in.read().decode(errors="replace").splitlines()
    except OSError:
        return "(no broker log)"
    causes: list[str] = []
    for i, line in enumerate(text):
        if " ERROR " in line or " FATAL " in line:
            causes.append(line)
            if i + 1 < len(text) and not text[i + 1].startswith("["):
                causes.append(text[i + 1])    # the exception message under the log line
        elif line.startswith("Caused by:") and line not in causes:
            causes.append(line)
    causes = causes[:12]
    head = ("errors:\n" + "\n".join(causes) + "\nlast lines:\n") if causes else ""
    return head + "\n".join(text[-lines:])


def is_reachable(cluster: LocalCluster, timeout: float = 2.0) -> bool:
    from eosmirror.kafka.cluster import Cluster  # local import: keeps `local status` cheap when nothing runs

    if not _port_in_use(cluster.port):
        return False   # nothing listens: say so at once instead of after the admin call's timeout
    try:
        # log_level 2: "connection refused" while the broker starts is expected, not worth a stderr line
        admin = Cluster.from_settings(cluster.name, {**cluster.client_config(), "log_level": 2},
                                      client_name=f"local-{cluster.name}").admin
        admin.list_topics(timeout=timeout)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not answering yet"
        return False


# --- lifecycle -------------------------------------------------------------------------------------

VERSION_LINE = "# kafka version "


def _config_text(cluster: LocalCluster) -> str:
    body = "".join(f"{k}={v}\n" for k, v in sorted(cluster.properties().items()))
    # The default release's file stays as it was (a running default cluster is not restarted for a new line).
    version = "" if cluster.default_release else f"{VERSION_LINE}{cluster.release}\n"
    return "# written by eosmirror_tools.kit.cluster; edits are overwritten on start\n" + version + body


def _write_config(cluster: LocalCluster) -> None:
    text = _config_text(cluster)
    # 0600: a SASL cluster's file holds its users' passwords.
    fd = os.open(cluster.config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _format_if_needed(cluster: LocalCluster) -> None:
    if (cluster.data_dir / "meta.properties").exists():
        return
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    # --cluster-id=<id>, not "-t <id>": a base64 id can start with '-' and would be parsed as an option.
    cmd = runtime.java_command("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                               f"--config={cluster.config_file}", heap="256m", short_lived=True, version=cluster.jars)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise LocalClusterError(f"formatting the {cluster.name} cluster's storage failed (exit {done.returncode}); "
                                f"last lines:\n{tail}")
    log.info("formatted %s (cluster id %s)", cluster.name, cluster_id)


def register(cluster: LocalCluster) -> None:
    """Record the cluster's client settings where ``local: <name>`` references are resolved.

    The run path never imports this launcher: eosmirror reads the settings back from this file,
    the same way it reads a resolved-clusters file for Airflow connections. A cluster with a link is
    recorded with its proxy's address: what names it with ``local:`` (a mirror) is the far client.
    """
    from eosmirror.kafka import connections

    connections.record_local_cluster(cluster.name, cluster.far_config())


def launch(cluster: LocalCluster) -> int:
    """Start the broker process unless it already runs (and its link's proxy, or stop a proxy it no
    longer has); return the broker's pid without waiting."""
    if cluster.link is not None:
        cluster.link.check()
        links.check_ports(cluster)   # before the broker starts: a proxy that cannot start leaves nothing running
    was_running = running_pid(cluster) is not None
    pid = _launch_broker(cluster)
    if cluster.link is not None:
        try:
            links.start(cluster, cluster.link)
        except links.LinkError:
            if not was_running:
                stop(cluster, hard=True)
            raise
    else:
        links.stop(cluster)
    register(cluster)
    return pid


def _launch_broker(cluster: LocalCluster) -> int:
    pid = running_pid(cluster)
    if pid is not None:
        try:
            current = cluster.config_file.read_text()
        except OSError:
            current = ""
        if current == _config_text(cluster):
            return pid
        log.info("%s broker runs with an older configuration: restarting it", cluster.name)
        stop(cluster)
    zookeeper = cluster.zookeeper and _zookeeper_current(cluster)
    if not zookeeper:
        _stop_zookeeper(cluster)     # one of an older configuration (or of a ZooKeeper-mode past)
    ports = ([cluster.port] + ([] if zookeeper else [cluster.controller_port])
             + ([links.listener_port(cluster)] if cluster.link else []))
    if any(_port_in_use(port) for port in ports):
        raise LocalClusterError(
            f"cannot start {cluster.name}: one of the ports {', '.join(map(str, ports))} is already used by "
            f"another process; stop it or choose other ports with {PORT_ENV.get(cluster.name, 'the port setting')}")
    _write_config(cluster)
    if cluster.zookeeper:
        if not zookeeper:
            _launch_zookeeper(cluster)
    else:
        _format_if_needed(cluster)
    cmd = runtime.java_command("kafka.Kafka", str(cluster.config_file), short_lived=True, version=cluster.jars)
    with open(cluster.log_file, "ab") as out:
        _log_offsets[str(cluster.log_file)] = out.tell()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=cluster.dir, preexec_fn=_raise_open_files)
    cluster.pid_file.write_text(f"{proc.pid}\n")
    _children[str(cluster.config_file)] = proc
    log.info("started %s broker (pid %d), log %s", cluster.name, proc.pid, cluster.log_file)
    return proc.pid


def _zookeeper_text(cluster: LocalCluster) -> str:
    return "".join(f"{k}={v}\n" for k, v in sorted(cluster.zookeeper_properties().items()))


def _zookeeper_current(cluster: LocalCluster) -> bool:
    """True when this cluster's ZooKeeper runs with the configuration it would be started with now."""
    if zookeeper_pid(cluster) is None:
        return False
    try:
        return cluster.zookeeper_config_file.read_text() == _zookeeper_text(cluster)
    except OSError:
        return False


def _launch_zookeeper(cluster: LocalCluster) -> None:
    """The cluster's own ZooKeeper (QuorumPeerMain from the cluster's release's jars), not waited for: the
    broker retries its connection for zookeeper.connection.timeout.ms."""
    cluster.zookeeper_config_file.write_text(_zookeeper_text(cluster))
    cmd = runtime.java_command("org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cluster.zookeeper_config_file),
                               heap="256m", short_lived=True, version=cluster.jars)
    with open(cluster.zookeeper_log_file, "ab") as out:
        _log_offsets[str(cluster.zookeeper_log_file)] = out.tell()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=cluster.dir)
    cluster.zookeeper_pid_file.write_text(f"{proc.pid}\n")
    _children[str(cluster.zookeeper_config_file)] = proc
    log.info("started %s's ZooKeeper (pid %d, port %d), log %s", cluster.name, proc.pid, cluster.controller_port,
             cluster.zookeeper_log_file)


def _stop_zookeeper(cluster: LocalCluster, hard: bool = False) -> bool:
    def alive() -> int | None:
        return zookeeper_pid(cluster) or _live_child(cluster.zookeeper_config_file)

    pid = alive()
    if pid is not None:
        _signal_and_wait(pid, alive, signal.SIGKILL if hard else signal.SIGTERM, 30, f"{cluster.name}'s ZooKeeper")
    cluster.zookeeper_pid_file.unlink(missing_ok=True)
    return pid is not None


# A broker holds a file handle per log segment of every partition and one per connection: 5,000
# partitions (issue #23's scale bench, the source and the target topic each) need more than the usual
# soft limit of 1,024; Kafka's deployment guide asks for 100,000. Raised as far as the hard limit allows.
OPEN_FILES_WANTED = 100_000


def _raise_open_files() -> None:
    """In the broker's process before exec: its soft open-files limit up to OPEN_FILES_WANTED."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES_WANTED if hard == resource.RLIM_INFINITY else min(OPEN_FILES_WANTED, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def wait_ready(cluster: LocalCluster, timeout: float = 90.0) -> None:
    """Return once the broker answers metadata requests; raise with the log tail if it dies or stalls."""
    deadline = time.monotonic() + timeout
    child = _children.get(str(cluster.config_file))
    keeper = _children.get(str(cluster.zookeeper_config_file)) if cluster.zookeeper else None
    while time.monotonic() < deadline:
        if keeper is not None and keeper.poll() is not None:
            raise LocalClusterError(f"the {cluster.name} cluster's ZooKeeper exited during start; from "
                                    f"{cluster.zookeeper_log_file}:\n"
                                    f"{_log_tail(cluster, log_file=cluster.zookeeper_log_file)}")
        exited = child.poll() is not None if child is not None else running_pid(cluster) is None
        if exited:
            raise LocalClusterError(f"the {cluster.name} broker (Kafka {cluster.release}) exited during start; from "
                                    f"{cluster.log_file}:\n{_log_tail(cluster)}")
        if is_reachable(cluster):
            return
        time.sleep(0.5)
    raise LocalClusterError(f"the {cluster.name} broker did not answer within {timeout:.0f} s "
                            f"({waits.machine_now()}); "
                            f"from {cluster.log_file}:\n{_log_tail(cluster)}")


def start(cluster: LocalCluster, timeout: float = 90.0) -> None:
    launch(cluster)
    wait_ready(cluster, timeout)


def ensure_class_archive(version: str | None = None) -> tuple[Path | None, float]:
    """The Kafka JVMs' class archive of ``version``'s jars (jvmarchive.py), built unless it is there: a
    broker of its own (nothing names it: no link, no ``local:`` record) started to answer and stopped, its
    archive checked and installed. Returns (path, seconds spent; 0 when it was there); RuntimeError or
    LocalClusterError says what failed (only start-up time depends on it)."""
    lib = runtime.ensure_kafka_lib(version)
    path = jvmarchive.archive_path(lib)
    if path is None or path.exists():
        return path, 0.0
    started = time.monotonic()
    partial = path.with_suffix(f".{os.getpid()}.partial")
    broker = LocalCluster(f"class-archive-{os.getpid()}", jvmarchive.free_port_pair(), version=version or "")
    try:
        with jvmarchive.training(partial):
            try:
                _launch_broker(broker)
                wait_ready(broker)
            finally:
                stop(broker)
        jvmarchive.install(partial, path, lib, runtime.java_binary(), runtime.classpath(version))
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(broker.dir, ignore_errors=True)
    return path, time.monotonic() - started


def stop(cluster: LocalCluster, hard: bool = False, timeout: float = 60.0) -> bool:
    """Stop this cluster's broker (SIGTERM, or SIGKILL when ``hard``), its link's proxy, then its ZooKeeper if
    it has one running (whatever version the cluster is described with). True if a broker was running."""
    links.stop(cluster)

    def alive() -> int | None:
        return running_pid(cluster) or _live_child(cluster.config_file)

    pid = alive()
    if pid is not None:
        _signal_and_wait(pid, alive, signal.SIGKILL if hard else signal.SIGTERM, timeout, f"{cluster.name} broker")
    cluster.pid_file.unlink(missing_ok=True)
    _stop_zookeeper(cluster, hard)
    return pid is not None


def _signal_and_wait(pid: int, alive: Callable[[], int | None], sig: int, timeout: float, what: str) -> None:
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive() is not None:
        _reap(pid)
        time.sleep(0.2)
    if alive() is not None:
        log.warning("%s (pid %d) ignored SIGTERM for %.0f s; killing it", what, pid, timeout)
        os.kill(pid, signal.SIGKILL)
        while alive() is not None:
            _reap(pid)
            time.sleep(0.2)


def _reap(pid: int) -> None:
    """Collect the exit status if the broker is our child (else it would linger as a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def status(cluster: LocalCluster) -> dict[str, object]:
    pid = running_pid(cluster)
    far = links.current(cluster)
    return {"cluster": cluster.name, "bootstrap": cluster.bootstrap, "pid": pid, "kafka": cluster.release,
            "metadata": "zookeeper" if cluster.zookeeper else "kraft",
            "proxy": None if far is None else {"bootstrap": links.proxied_bootstrap(cluster), "link": far.describe()},
            "running": pid is not None, "reachable": pid is not None and is_reachable(cluster),
            "data": str(cluster.data_dir), "log": str(cluster.log_file)}


def up(clusters: list[LocalCluster] | None = None, timeout: float = 90.0) -> list[LocalCluster]:
    """Start ``clusters`` (default: source and target at the pom's version) and wait until they answer.
    Every version's jars are fetched before any broker starts; if one cluster cannot start, the ones this
    call started are stopped again (those already running before it are left as they were)."""
    clusters = clusters or default_clusters()
    for release in dict.fromkeys(c.jars for c in clusters):
        runtime.ensure_kafka_lib(release)
    before = {c.name: running_pid(c) for c in clusters}
    launched: dict[str, int] = {}
    try:
        for cluster in clusters:  # launch all first: the JVMs boot in parallel
            launched[cluster.name] = -1                  # begun: a failure from here on stops what it started
            launched[cluster.name] = launch(cluster)
        for cluster in clusters:
            wait_ready(cluster, timeout)
    except BaseException:
        for cluster in clusters:   # nothing half-started: what this call started (or began to) is stopped
            if cluster.name in launched and launched[cluster.name] != before[cluster.name]:
                stop(cluster, hard=True)
        raise
    return clusters


def down(clusters: list[LocalCluster] | None = None) -> list[str]:
    stopped = []
    for cluster in clusters or default_clusters():
        if stop(cluster):
            stopped.append(cluster.name)
    return stopped


def known_clusters() -> list[LocalCluster]:
    """Every cluster with a folder under var/kafka (tests and benchmarks start extra ones)."""
    import re

    found = []
    for folder in sorted((paths.home() / "kafka").glob("*/server.properties")):
        text = folder.read_text()
        match = re.search(r"^listeners=\w+://127\.0\.0\.1:(\d+)", text, re.MULTILINE)
        version = re.search(rf"^{VERSION_LINE}(\S+)$", text, re.MULTILINE)
        if match:
            found.append(LocalCluster(name=folder.parent.name, port=int(match.group(1)),
                                      version=version.group(1) if version else ""))
    return found
