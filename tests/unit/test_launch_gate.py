"""The launch gate (spark/gate.py): spark-submit starts while `eosmirror run` plans, and its job does
nothing until the launcher answers. Real processes and the real gate; the plan's answer is faked (no brokers)."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from eosmirror.core import config
from eosmirror.core.errors import EosMirrorError
from eosmirror.core.runreport import RunFailure
from eosmirror.spark import gate, job, launch
from eosmirror.spark.launch import Way
from tests.support.waiting import wait_for

MIRROR = config.parse({"mirrors": [{"name": "m1", "source": {"local": "source"}, "target": {"local": "target"},
                                    "topics": ["orders"]}]}, __import__("pathlib").Path("m.yaml")).mirrors[0]


def test_without_a_gate_the_job_starts_at_once():
    assert gate.wait({}) == (True, 0.0)


def test_the_job_waits_for_go_or_stop(tmp_path):
    launcher = gate.LaunchGate()
    try:
        env = launcher.env()
        assert env[gate.PID_ENV] == str(os.getpid())
        launcher.answer(gate.GO)
        launcher.answer(gate.STOP)   # the first answer stands
        assert gate.wait(env)[0] is True
    finally:
        launcher.remove()
    stopped = gate.LaunchGate()
    stopped.answer(gate.STOP)
    assert gate.wait(stopped.env())[0] is False
    stopped.remove()
    assert gate.wait(stopped.env())[0] is False   # the gate removed: the launcher went another way


def test_a_dead_launcher_or_no_answer_fails_loudly():
    launcher = gate.LaunchGate()
    try:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()
        with pytest.raises(EosMirrorError, match=f"the launcher \\(pid {dead}\\) ended without answering"):
            gate.wait({**launcher.env(), gate.PID_ENV: dead})
        started = time.monotonic()
        with pytest.raises(EosMirrorError, match="no answer from the launcher .* in 0 s"):
            gate.wait(launcher.env(), budget=0.2)
        assert time.monotonic() - started < 5
        (launcher.path / "answer").write_text("maybe")
        with pytest.raises(EosMirrorError, match="unknown answer 'maybe'"):
            gate.wait(launcher.env())
    finally:
        launcher.remove()


JOB = textwrap.dedent("""
    import sys
    from pathlib import Path
    from eosmirror.core.report import result_line
    from eosmirror.core.runreport import RunFailure
    from eosmirror.spark import gate
    print("JVM starting", file=sys.stderr, flush=True)
    Path(sys.argv[1] + ".at-the-gate").write_text("waiting")
    go, waited = gate.wait()
    if not go:
        sys.exit(0)
    Path(sys.argv[1]).write_text("passed the gate")
    print("copying", flush=True)
    print(result_line(RunFailure(mirror="m1", error="a report", exit_code=3)), flush=True)
    sys.exit(3)
""")


@pytest.fixture
def fake_job(tmp_path, monkeypatch):
    """A job command that waits at the gate like job.py; the plan answers ``fake_job.empty``."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    fake_job.marker = tmp_path / "passed"
    fake_job.cmd = lambda: [sys.executable, str(script), str(fake_job.marker)]
    fake_job.empty = False
    fake_job.started = []
    real_start = launch._start

    def recording_start(cmd, extra_env, hold_stderr=False):
        started = real_start(cmd, extra_env, hold_stderr)
        fake_job.started.append((started, dict(extra_env or {})))
        return started
    monkeypatch.setattr(launch, "_start", recording_start)
    def plan(mirror, options):
        if fake_job.plan_until_the_job_waits:   # the job reaches the gate while the launcher still plans
            at_the_gate = Path(f"{fake_job.marker}.at-the-gate")
            wait_for("the job to wait at the launch gate", lambda: (at_the_gate.exists(), at_the_gate), 30)
        return fake_job.empty, ("run", "plan") if fake_job.empty else None
    fake_job.plan_until_the_job_waits = False
    monkeypatch.setattr(launch, "_plan", plan)
    return fake_job


def decide(fake, *extra, **flags):
    args = job.parser().parse_args(["--mirror", "m1", *extra])
    lines = []
    how, submitted = launch.decide_beside_submit(MIRROR, args, job.options_from(args), fake.cmd, lines.append,
                                                 **flags)
    return how, submitted, lines


def test_a_run_with_records_to_copy_goes_through_the_job_started_beside_the_plan(fake_job, capfd):
    fake_job.plan_until_the_job_waits = True
    how, submitted, lines = decide(fake_job)
    assert how.way is Way.SPARK_SUBMIT
    code, found = submitted
    assert code == 3 and isinstance(found, RunFailure) and found.error == "a report"
    assert lines == ["copying"] and fake_job.marker.read_text() == "passed the gate"
    (process, env), = fake_job.started
    assert gate.GATE_ENV in env and not os.path.exists(env[gate.GATE_ENV])   # removed after the run
    assert "JVM starting" in capfd.readouterr().err   # held until the launcher chose the job, then shown


def test_a_run_with_nothing_to_copy_stops_the_job_at_the_gate(fake_job, capfd):
    fake_job.empty, fake_job.plan_until_the_job_waits = True, True
    how, submitted, lines = decide(fake_job)
    assert how.way is Way.IN_PROCESS and submitted is None and lines == []
    (process, env), = fake_job.started
    assert process.proc.wait(timeout=30) in (0, -15)   # left at the gate, or ended by the launcher
    assert not fake_job.marker.exists()
    assert "JVM starting" not in capfd.readouterr().err   # the unused job's output is dropped


def test_a_failing_plan_stops_the_job(fake_job, monkeypatch):
    def broken(mirror, options):
        raise RuntimeError("the plan broke")
    monkeypatch.setattr(launch, "_plan", broken)
    with pytest.raises(RuntimeError, match="the plan broke"):
        decide(fake_job)
    (process, _), = fake_job.started
    assert process.proc.wait(timeout=30) in (0, -15) and not fake_job.marker.exists()


def test_runs_that_do_not_plan_here_or_whose_driver_runs_elsewhere_start_the_job_after_deciding(fake_job):
    """No gate for a dry run, --inprocess, a follow run (no plan to overlap), nor a driver in cluster deploy
    mode (on another host: neither the gate directory nor spark-submit's environment reaches it)."""
    for extra, flags, way in ((("--dry-run",), {}, Way.IN_PROCESS), ((), {"inprocess": True}, Way.IN_PROCESS),
                              (("--follow-seconds", "60"), {}, Way.SPARK_SUBMIT),
                              ((), {"gated": False}, Way.SPARK_SUBMIT)):
        fake_job.started.clear()
        how, submitted, _ = decide(fake_job, *extra, **flags)
        assert how.way is way
        if way is Way.SPARK_SUBMIT:   # no gate: the job starts at once
            (_, env), = fake_job.started
            assert gate.GATE_ENV not in env and submitted is not None and submitted[0] == 3
        else:
            assert fake_job.started == [] and submitted is None


def test_without_spark_submit_an_empty_run_still_runs_here_and_a_copy_names_what_is_missing(fake_job):
    def missing():
        raise FileNotFoundError("spark-submit not found: install the project (`make setup`) or put Spark on PATH")
    fake_job.cmd = missing
    fake_job.empty = True
    how, submitted, _ = decide(fake_job)
    assert how.way is Way.IN_PROCESS and submitted is None and fake_job.started == []
    fake_job.empty = False
    with pytest.raises(FileNotFoundError, match="spark-submit not found"):
        decide(fake_job)
