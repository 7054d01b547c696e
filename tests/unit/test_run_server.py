"""The run server (spark/server.py) and its client, without Spark or Kafka: fast.

What is tested: how the server frames a run's output (_Lines) and picks a run's log records
(_RunLog); the protocol of ``Server.handle`` over a real Unix socket pair (ping, stop, a refused
client of other code, a run through a stand-in ``job.execute``); ``bind`` (mode 0600, a stale socket
replaced, a listening server never taken over, a socket path too long for sun_path); the client's
refusals when no server answers, the clusters file handed over as a path, and ``start`` on a cluster master;
``eosmirror run --server`` with --master/--ship-package; a served slot's end with its client (the run's
lease over real loopback sockets: leases.py, runlease.py, ``lifeline._lease_lost``, ``owned_runner``
when the client is gone before the slots start); and the
"process start" step timed from the client's process (``steptimes.time_process``).
A real run through a real server is for the e2e tests (bench ``served``)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from eosmirror import cli
from eosmirror.core import steptimes
from eosmirror.core.errors import ConfigError
from eosmirror.slot import lifeline, runlease
from eosmirror.slot.runlease import RunLeaseError
from eosmirror.slot.slotstate import SlotTask
from eosmirror.spark import job, runner, server, serverclient
from eosmirror.spark import leases as leases_module
from eosmirror.spark.leases import LeaseServer

BUDGET = 5.0   # seconds any one wait in this file may take


@pytest.fixture
def short_dir():
    """A folder with a short path (a socket path must fit sun_path; pytest's tmp_path may not)."""
    folder = Path(tempfile.mkdtemp(prefix="eosm-rs-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def empty_home(short_dir, monkeypatch):
    """EOSMIRROR_HOME on an empty folder: no run server answers there."""
    home = short_dir / "home"
    monkeypatch.setenv("EOSMIRROR_HOME", str(home))
    monkeypatch.delenv("EOSMIRROR_CLUSTERS_FILE", raising=False)
    return home


def dead_process() -> lifeline.Process:
    """A process that was alive (its pid and start time read then) and has ended and been reaped."""
    child = subprocess.Popen(["sleep", "5"])
    try:
        found = lifeline.process(child.pid)
        assert found is not None and found.alive(), f"/proc does not show the live child {child.pid}: {found}"
    finally:
        child.kill()
        child.wait(BUDGET)
    assert not found.alive(), f"{found} still reads as alive once reaped"
    return found


# --- _Lines and _RunLog --------------------------------------------------------------------------------


def test_lines_go_out_complete_and_a_partial_line_waits_for_its_newline():
    sent: list[dict[str, Any]] = []
    lines = server._Lines(sent.append)
    assert lines.write("first\nsec") == len("first\nsec")
    assert sent == [{"out": "first"}], sent
    lines.write("ond")
    assert sent == [{"out": "first"}], f"a line without its newline went out: {sent}"
    lines.write("\n\nthird\n")
    assert sent == [{"out": "first"}, {"out": "second"}, {"out": ""}, {"out": "third"}], sent
    lines.flush()
    assert lines.buffer == ""


@pytest.mark.parametrize(("thread_name", "accepted"), [
    ("eosmirror-run-1", True),         # the run's own thread
    ("eosmirror-run-1_0", True),       # one of its slot threads (ThreadPoolExecutor names them prefix_N)
    ("eosmirror-run-10_0", False),     # a slot thread of run 10: not run 1's
    ("eosmirror-run-10", False),
    ("MainThread", False),
])
def test_a_run_log_takes_only_the_records_of_its_threads(thread_name, accepted):
    handler = server._RunLog("eosmirror-run-1", lambda message: None)
    record = logging.LogRecord("eosmirror.test", logging.INFO, __file__, 1, "a line", None, None)
    record.threadName = thread_name
    assert bool(handler.filter(record)) is accepted


def test_a_run_log_delivers_formatted_lines():
    sent: list[dict[str, Any]] = []
    handler = server._RunLog("eosmirror-run-1", sent.append)
    record = logging.LogRecord("eosmirror.test", logging.WARNING, __file__, 1, "copied %d", (5,), None)
    record.threadName = "eosmirror-run-1_3"
    handler.handle(record)
    assert len(sent) == 1 and sent[0]["log"].endswith("WARNING eosmirror.test: copied 5"), sent


# --- Server.handle over a socket pair ------------------------------------------------------------------


def exchange(srv: server.Server, request: dict[str, Any], name: str = "eosmirror-run-1") -> list[dict[str, Any]]:
    """Send one request to ``srv.handle`` (in a thread named ``name``, as ``serve`` runs it) and read
    its answer lines up to the last one (an "exit" or an "ok"), as the client does, or to the end of
    the connection."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    thread = threading.Thread(target=srv.handle, args=(theirs, name), name=name, daemon=True)
    thread.start()
    messages: list[dict[str, Any]] = []
    ours.settimeout(BUDGET)
    with ours:
        ours.sendall(json.dumps(request).encode() + b"\n")
        stream = ours.makefile("rb")
        try:
            for line in stream:
                messages.append(json.loads(line))
                if "exit" in messages[-1] or "ok" in messages[-1]:
                    break
        except TimeoutError:
            pytest.fail(f"the server did not end its answer within {BUDGET} s; answers so far: {messages}")
    thread.join(BUDGET)
    assert not thread.is_alive(), f"handle still runs {BUDGET} s after answering {messages}"
    return messages


@pytest.fixture
def srv():
    return server.Server(SimpleNamespace(master="local[16]"), SimpleNamespace(address=("127.0.0.1", 7079)))


@pytest.fixture
def no_execute(monkeypatch):
    def execute(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("job.execute ran for a request the server should have refused")

    monkeypatch.setattr(job, "execute", execute)


def test_ping_answers_who_the_server_is(srv):
    answers = exchange(srv, {"op": "ping"})
    assert answers == [{"ok": True, "fingerprint": server.fingerprint(), "master": "local[16]", "pid": os.getpid(),
                        "jvm_pid": os.getppid(), "runs": [], "served": 0, "lease": "127.0.0.1:7079"}], answers


def test_stop_sets_stopping_and_answers(srv):
    assert not srv.stopping.is_set()
    answers = exchange(srv, {"op": "stop"})
    assert answers == [{"ok": True, "runs": []}], answers
    assert srv.stopping.is_set()


def test_a_client_of_other_code_is_refused_with_exit_2(srv, no_execute):
    answers = exchange(srv, {"op": "run", "argv": ["--mirror", "m1"], "fingerprint": "0123456789abcdef"})
    assert len(answers) == 1 and answers[0]["exit"] == 2 and "restart" in answers[0]["error"], answers
    assert srv.runs == 0 and srv.active == {}


def test_a_bad_request_line_gets_no_answer(srv, no_execute):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.settimeout(BUDGET)
    with ours:
        ours.sendall(b"not json\n")
        srv.handle(theirs, "eosmirror-run-1")
        assert ours.recv(100) == b""


def test_a_run_sends_its_log_its_output_and_its_exit_code(srv, monkeypatch):
    seen: dict[str, Any] = {}
    test_log = logging.getLogger("eosmirror.test.served")

    def execute(args: Any, run_slots: Any, out: Any = None, err: Any = None) -> int:
        seen.update(mirror=args.mirror, active=dict(srv.active), runner=run_slots)
        test_log.warning("from the run thread")
        for name in (f"{threading.current_thread().name}_0", "eosmirror-run-70_0"):   # run 7's slot, run 70's
            slot = threading.Thread(target=lambda: test_log.warning("from %s", threading.current_thread().name),
                                    name=name)
            slot.start()
            slot.join(BUDGET)
        out.write("report line 1\nreport ")
        err.write("line 2\n")
        return 0

    monkeypatch.setattr(job, "execute", execute)
    answers = exchange(srv, {"op": "run", "argv": ["--mirror", "m1"], "fingerprint": server.fingerprint()},
                       name="eosmirror-run-7")
    logs = [a["log"].split("eosmirror.test.served: ", 1)[1] for a in answers
            if "log" in a and "eosmirror.test.served" in a["log"]]
    assert logs == ["from the run thread", "from eosmirror-run-7_0"], answers
    assert [a for a in answers if "out" in a] == [{"out": "report line 1"}, {"out": "report line 2"}], answers
    assert answers[-1] == {"exit": 0}, answers
    assert seen["mirror"] == "m1" and seen["active"] == {"eosmirror-run-7": "m1"} and callable(seen["runner"])
    assert srv.active == {} and srv.runs == 1
    assert not any(isinstance(h, server._RunLog) for h in logging.getLogger().handlers), "run log handler left behind"


@pytest.mark.parametrize("spark_conf", [{"spark.executor.memory": "2g"}, {}])
def test_a_mirrors_own_spark_conf_is_named_as_not_applied(spark_conf, srv, monkeypatch, tmp_path):
    monkeypatch.setattr(job, "execute", lambda *args, **kwargs: 0)
    mirrors = tmp_path / "mirrors.yaml"
    mirrors.write_text(json.dumps({"mirrors": [{"name": "m1", "source": {"local": "source"}, "target": {
        "local": "target"}, "topics": ["t"], "spark_conf": spark_conf}]}))
    answers = exchange(srv, {"op": "run", "argv": ["--mirror", "m1", "--config", str(mirrors)],
                             "fingerprint": server.fingerprint()})
    warned = [a["log"] for a in answers if "log" in a and "does not apply here" in a["log"]]
    assert answers[-1] == {"exit": 0}, answers
    assert len(warned) == (1 if spark_conf else 0), answers
    assert not spark_conf or "its spark_conf (spark.executor.memory)" in warned[0], warned


def test_a_failing_run_answers_1_and_a_bad_command_line_2(srv, monkeypatch):
    def execute(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("a bug in one run")

    monkeypatch.setattr(job, "execute", execute)
    answers = exchange(srv, {"op": "run", "argv": ["--mirror", "m1"], "fingerprint": server.fingerprint()})
    assert answers[-1] == {"exit": 1} and srv.active == {}, answers
    answers = exchange(srv, {"op": "run", "argv": ["--no-such-option"], "fingerprint": server.fingerprint()})
    assert answers[-1] == {"exit": 2} and srv.active == {}, answers


# --- bind ----------------------------------------------------------------------------------------------


def test_bind_makes_a_socket_only_this_user_can_use(short_dir):
    path = short_dir / "run" / "s.sock"
    with server.bind(path) as listener:
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600, oct(mode)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(BUDGET)
            client.connect(str(path))
            listener.settimeout(BUDGET)
            listener.accept()[0].close()


def test_bind_replaces_a_stale_socket(short_dir):
    path = short_dir / "s.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()   # a server killed without its clean-up: the file stays, nothing listens
    assert path.exists()
    with server.bind(path) as listener, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(BUDGET)
        client.connect(str(path))
        listener.settimeout(BUDGET)
        listener.accept()[0].close()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_bind_never_takes_over_a_listening_server(short_dir):
    path = short_dir / "s.sock"
    with server.bind(path):
        with pytest.raises(SystemExit, match="already listens"):
            server.bind(path)
        assert path.exists(), "the running server's socket file was removed"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(BUDGET)
            client.connect(str(path))


def test_bind_refuses_a_socket_path_too_long_for_sun_path(short_dir):
    path = short_dir / ("x" * server.SOCKET_PATH_LIMIT) / "s.sock"
    with pytest.raises(SystemExit, match="EOSMIRROR_HOME"):
        server.bind(path)
    assert not path.parent.exists()


# --- the client ----------------------------------------------------------------------------------------


def test_without_a_server_a_run_names_server_start(empty_home):
    assert serverclient.status() is None
    with pytest.raises(serverclient.ServerUnavailable, match="eosmirror server start") as raised:
        serverclient.run(["--mirror", "m1"])
    assert isinstance(raised.value, ConfigError) and raised.value.exit_code == 2
    assert serverclient.stop() is None


def test_a_clients_clusters_file_goes_over_as_a_path_and_the_run_reads_it(empty_home, monkeypatch):
    """The Airflow copy task's resolved connections: the request names the 0600 file (absolute), never
    its content, and the server's run thread resolves from that file, other threads from theirs."""
    from eosmirror.kafka import connections

    secret = "s3cr3t-password"
    clusters = empty_home / "clusters.json"
    clusters.parent.mkdir(parents=True)
    clusters.write_text(json.dumps({"kafka_dr": {"bootstrap.servers": "dr:9092", "sasl.password": secret}}))
    clusters.chmod(0o600)
    monkeypatch.chdir(empty_home)
    monkeypatch.setenv("EOSMIRROR_CLUSTERS_FILE", "clusters.json")   # relative: it must go over absolute
    path = server.socket_path()
    listener = server.bind(path)
    seen: list[bytes] = []

    def answer() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rwb") as stream:
            seen.append(stream.readline())
            stream.write(b'{"exit": 0}\n')
            stream.flush()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        assert serverclient.run(["--mirror", "m1"]) == 0
    finally:
        thread.join(BUDGET)
        listener.close()
    assert seen, f"the fake server saw no request within {BUDGET} s"
    request = json.loads(seen[0])
    assert request["clusters_file"] == str(clusters), request
    assert secret not in seen[0].decode()

    monkeypatch.delenv("EOSMIRROR_CLUSTERS_FILE")
    found: list[Any] = []

    def run_thread() -> None:
        connections.use_clusters_file(request["clusters_file"])
        found.append(connections._from_clusters_file("kafka_dr"))

    worker = threading.Thread(target=run_thread)
    worker.start()
    worker.join(BUDGET)
    assert found == [{"bootstrap.servers": "dr:9092", "sasl.password": secret}], found
    assert connections._from_clusters_file("kafka_dr") is None   # this thread: the environment's (none)


@pytest.mark.parametrize("ship", [False, True])
def test_start_on_a_cluster_master_submits_the_server_there(ship, empty_home, monkeypatch):
    """A cluster master: the driver runs here, the slots there. Shipped code (--py-files) is not
    importable when pyspark.daemon starts, so the warm daemon module is only used without it."""
    spawned: list[list[str]] = []

    class Spawned(Exception):
        pass

    def popen(cmd: list[str], **kwargs: Any) -> None:
        spawned.append(cmd)
        raise Spawned

    monkeypatch.setattr(serverclient.subprocess, "Popen", popen)
    with pytest.raises(Spawned):
        serverclient.start(master="spark://h:7077", conf={"spark.driver.host": "10.0.0.5"}, lease_port=7079,
                           ship_package=ship)
    cmd = spawned[0]
    assert cmd[cmd.index("--master") + 1] == "spark://h:7077"
    assert "spark.driver.host=10.0.0.5" in cmd and cmd[-2:] == ["--lease-port", "7079"], cmd
    assert ("--py-files" in cmd) is ship, cmd
    assert any(c.startswith("spark.python.daemon.module=") for c in cmd) is not ship, cmd


def test_the_client_talks_to_a_serving_server(empty_home, monkeypatch, capsys):
    """status, run (output, log, exit code, a refused client of other code) and stop over the real socket."""
    def execute(args: Any, run_slots: Any, out: Any = None, err: Any = None) -> int:
        logging.getLogger("eosmirror.test.served").warning("copying %s", args.mirror)
        print("the report", file=out)
        return 3

    monkeypatch.setattr(job, "execute", execute)
    srv = server.Server(SimpleNamespace(master="local[16]"), SimpleNamespace(address=("127.0.0.1", 7079)))
    listener = server.bind(server.socket_path())
    serving = threading.Thread(target=srv.serve, args=(listener,), name="test-serve", daemon=True)
    serving.start()
    try:
        answer = serverclient.status()
        assert answer is not None and answer["pid"] == os.getpid() and answer["runs"] == [], answer
        out, err = [], []
        lines = SimpleNamespace(write=lambda text: out.append(text), flush=lambda: None)
        errors = SimpleNamespace(write=lambda text: err.append(text), flush=lambda: None)
        assert serverclient.run(["--mirror", "m1"], out=lines, err=errors) == 3
        assert "".join(out) == "the report\n", out
        assert any("copying m1" in e for e in err), err
        srv.code = "another-version"
        assert serverclient.run(["--mirror", "m1"], out=lines, err=errors) == 2
        assert "restart" in "".join(err), err
    finally:
        srv.stopping.set()
        serving.join(BUDGET)
        listener.close()
    assert not serving.is_alive(), f"serve did not return within {BUDGET} s of stopping"
    assert srv.runs == 1 and srv.connections == 3


# --- eosmirror run --server ----------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [["--master", "local[2]"], ["--ship-package"]])
def test_run_server_refuses_the_servers_own_flags(flags, empty_home, tmp_path, capsys):
    mirrors = tmp_path / "mirrors.yaml"
    mirrors.write_text("mirrors:\n  - name: m1\n    source: {local: source}\n    target: {local: target}\n"
                       "    topics: [t]\n")
    assert cli.main(["run", "m1", "--server", *flags, "--config", str(mirrors)]) == 2
    err = capsys.readouterr().err
    assert "--master" in err and "--server" in err and "no run server" not in err, err


# --- a served slot ends with its client: the run's lease ------------------------------------------------


@pytest.fixture
def leases():
    """A real lease server on loopback, as the run server starts it."""
    served = LeaseServer("127.0.0.1", "127.0.0.1")
    yield served
    served.close()
    assert not served.thread.is_alive(), f"the lease thread still runs {BUDGET} s after close"


@pytest.fixture
def client():
    """A live client process on this host (the run server sees its clients' pids)."""
    child = subprocess.Popen(["sleep", "30"])
    found = lifeline.process(child.pid)
    assert found is not None
    yield child, found
    child.kill()
    child.wait(BUDGET)


class Checked:
    """A client process whose liveness checks by the lease server's thread are counted: a test waits for
    the server to have looked several times instead of sleeping for as long as that should take."""

    def __init__(self, process: lifeline.Process) -> None:
        self.process, self.pid, self.start, self.name, self.checks = process, process.pid, process.start, process.name, 0

    def alive(self) -> bool:
        self.checks += 1
        return self.process.alive()


def wait_checked(client: Checked, times: int, what: str) -> None:
    """Until the lease server has checked ``client`` ``times`` more times (it stops checking a revoked one)."""
    target, deadline = client.checks + times, time.monotonic() + BUDGET
    while client.checks < target:
        assert time.monotonic() < deadline, (f"the lease server checked the client {client.checks - target + times} "
                                             f"of {times} times in {BUDGET} s ({what})")
        time.sleep(0.05)   # the poll interval of this bounded wait


def wait_lost(sock: socket.socket, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() < started + BUDGET:
        if runlease.lost(sock):
            return time.monotonic() - started
        time.sleep(0.05)
    pytest.fail(f"the lease still reads as held {BUDGET} s after {what}")


def test_a_lease_is_held_while_its_client_lives_and_lost_once_it_is_gone(leases, client):
    child, owner = client
    checked = Checked(owner)
    lease = leases.grant(checked, "run-1")
    assert lease[:2] == leases.address and len(lease[2]) == 32, lease
    held = runlease.hold(lease)
    with held:
        wait_checked(checked, 3, "while the client lives")
        assert not runlease.lost(held), "a live client's lease was lost"
        assert lease[2] in leases.grants, "a live client's lease was revoked"
        child.kill()
        child.wait(BUDGET)
        wait_lost(held, "the client was killed")
    with pytest.raises(RunLeaseError, match="no longer holds this run"):   # a slot that starts late starts nothing
        runlease.hold(lease)
    assert lease[2] not in leases.grants


def test_a_reused_pid_is_not_the_client(leases, client):
    _, owner = client
    lease = leases.grant(lifeline.Process(owner.pid, owner.start + 1, "client"), "run-1")
    deadline = time.monotonic() + BUDGET   # same pid, another start time: another process, so the lease is revoked
    while lease[2] in leases.grants:
        assert time.monotonic() < deadline, f"the lease of a reused pid is still granted after {BUDGET} s"
        time.sleep(0.05)   # the poll interval of this bounded wait
    assert lease[2] not in leases.grants
    with pytest.raises(RunLeaseError, match="no longer holds this run"):
        runlease.hold(lease)


def test_the_runs_end_revokes_its_lease_and_a_slot_that_left_is_dropped(leases, client):
    _, owner = client
    first, second = leases.grant(owner, "run-1"), leases.grant(owner, "run-2")
    left, held, other = runlease.hold(first), runlease.hold(first), runlease.hold(second)
    left.close()   # a slot that ended: the server drops its connection
    deadline = time.monotonic() + BUDGET
    while len(leases.grants[first[2]].held) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(leases.grants[first[2]].held) == 1, leases.grants[first[2]]
    leases.revoke(first[2], "the run's slots ended")
    with held, other:
        wait_lost(held, "the run's lease was revoked")
        assert not runlease.lost(other), "revoking one run's lease ended another run's"


def test_an_unknown_token_and_an_unreachable_server_are_refused(leases):
    with pytest.raises(RunLeaseError, match="no longer holds this run"):
        runlease.hold((*leases.address, "0" * 32))
    port = leases.address[1]
    leases.close()
    with pytest.raises(RunLeaseError, match=f"cannot reach the run server's lease at 127.0.0.1:{port}"):
        runlease.hold(("127.0.0.1", port, "0" * 32))


def test_a_peer_that_never_sends_a_token_is_closed(leases, monkeypatch):
    monkeypatch.setattr(leases_module, "TOKEN_SECONDS", 0.5)
    silent = socket.create_connection(leases.address, timeout=BUDGET)
    with silent:
        assert silent.recv(16) == b"", "the silent connection got an answer instead of being closed"
    assert not leases.waiting


def test_a_server_that_ends_ends_every_lease(leases, client):
    _, owner = client
    held = runlease.hold(leases.grant(owner, "run-1"))
    with held:
        leases.close()
        wait_lost(held, "the lease server closed")


class FakeCopier:
    """What the lifeline reads of a slot: its producer (None once closed)."""

    def __init__(self) -> None:
        self.task, self.producer, self.exactly_once = SimpleNamespace(slot=0), "open", True


def test_the_lifeline_is_cut_by_a_lost_lease_and_never_by_a_released_one(leases, client):
    _, owner = client
    checked = Checked(owner)
    ended_run, running = leases.grant(owner, "run-1"), leases.grant(checked, "run-2")
    ended, live = FakeCopier(), FakeCopier()
    try:
        with lifeline._lock:
            lifeline._leases[ended] = runlease.hold(ended_run)
            lifeline._leases[live] = runlease.hold(running)
        assert not lifeline._lease_lost()
        lifeline.release(ended)   # its slot ended; then its run ended and revoked the lease
        leases.revoke(ended_run[2], "the run's slots ended")
        wait_checked(checked, 3, "after the ended run's lease was revoked")
        assert not lifeline._lease_lost(), "a slot that ended still cut the worker's lifeline"
        leases.revoke(running[2], "its client is gone")
        deadline = time.monotonic() + BUDGET
        while not lifeline._lease_lost() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lifeline._lease_lost(), f"a revoked lease did not cut the lifeline within {BUDGET} s"
    finally:
        lifeline.release(ended)
        lifeline.release(live)


def slot_task(slot: int) -> SlotTask:
    return SlotTask(mirror="m1", slot=slot, transactional_id=f"eosmirror.m1.{slot}", generation=1,
                    delivery="exactly_once", progress_group="g", partitions=(), source_conf={}, target_conf={})


def test_no_slot_starts_when_the_client_is_gone(monkeypatch, leases):
    def run_on_spark(tasks: Any) -> Any:
        raise AssertionError(f"slots started for a client that is gone: {tasks}")

    monkeypatch.setattr(runner, "run_on_spark", run_on_spark)
    monkeypatch.setitem(sys.modules, "pyspark", None)   # importing pyspark now fails
    gone = dead_process()
    results = server.owned_runner((gone.pid, gone.start), leases, "run-1")([slot_task(0), slot_task(1)])
    assert [(r.slot, r.transactional_id, r.status, r.error_type) for r in results] == [
        (0, "eosmirror.m1.0", "failed", "ClientGone"), (1, "eosmirror.m1.1", "failed", "ClientGone")], results
    assert not leases.grants


def test_the_slots_of_a_live_client_hold_one_lease_until_the_run_ends(monkeypatch, leases):
    started: list[SlotTask] = []

    def run_on_spark(tasks: list[SlotTask]) -> list[dict[str, Any]]:
        started.extend(tasks)
        assert set(leases.grants) == {tasks[0].lease[2]}, leases.grants   # granted while the slots run
        return [{"slot": t.slot, "status": "ok"} for t in tasks]

    monkeypatch.setattr(runner, "run_on_spark", run_on_spark)
    me = lifeline.process(os.getpid())
    assert server.owned_runner((me.pid, me.start), leases, "run-1")([slot_task(0), slot_task(1)]) == [
        {"slot": 0, "status": "ok"}, {"slot": 1, "status": "ok"}]
    assert len({t.lease for t in started}) == 1 and started[0].lease[:2] == leases.address, started
    assert "lease" not in repr(started[0]) and started[0].lease[2] not in repr(started[0])
    assert not leases.grants, "the run ended and its lease is still granted"


# --- "process start" of a served run -------------------------------------------------------------------


def own_age() -> float:
    with open(f"/proc/{os.getpid()}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")


def test_a_served_run_times_its_clients_start():
    before = time.monotonic()
    child = subprocess.Popen(["sleep", "5"])
    ages: dict[str, float | None] = {}

    def served_run() -> None:
        steptimes.time_process(child.pid)
        ages["client"] = steptimes.process_age()
        steptimes.time_process(None)
        ages["reset"] = steptimes.process_age()

    try:
        time.sleep(0.5)   # elapsed time, not a wait: the client is then at least this old
        thread = threading.Thread(target=served_run, name="eosmirror-run-1")
        thread.start()
        thread.join(BUDGET)
        assert not thread.is_alive(), f"the run thread did not end within {BUDGET} s: {ages}"
        main_age = steptimes.process_age()
        expected = own_age()
        lived = time.monotonic() - before
    finally:
        child.kill()
        child.wait(BUDGET)
    # Orderings, not speeds (/proc counts in 10 ms ticks): the client started after ``before`` and had
    # lived the 0.5 s slept; the run thread's age, once reset, is this process's, older than the client,
    # and read before ``main_age``, itself read before ``expected``.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert ages["client"] is not None and 0.5 - 2 * tick <= ages["client"] <= lived + 2 * tick, (ages, lived)
    assert ages["reset"] is not None and main_age is not None, (ages, main_age)
    assert ages["client"] < ages["reset"] <= main_age + tick and main_age <= expected + tick, (ages, main_age, expected)


def test_server_start_refuses_a_conf_without_a_value_before_starting_anything(empty_home, monkeypatch, capsys):
    def popen(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"start spawned {args} for a bad --conf")

    monkeypatch.setattr(serverclient.subprocess, "Popen", popen)
    assert cli.main(["server", "start", "--conf", "spark.executor.memory"]) == 2
    err = capsys.readouterr().err
    assert "--conf 'spark.executor.memory': expected KEY=VALUE" in err, err


@pytest.mark.parametrize("port", [-1, 70000])
def test_server_start_refuses_a_lease_port_out_of_range_before_starting_anything(port, empty_home, monkeypatch,
                                                                                 capsys):
    def popen(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"start spawned {args} for --lease-port {port}")

    monkeypatch.setattr(serverclient.subprocess, "Popen", popen)
    assert cli.main(["server", "start", "--lease-port", str(port)]) == 2
    assert f"--lease-port {port}: a TCP port from 1 to 65535" in capsys.readouterr().err
