"""`eosmirror run` with nothing to copy: no Spark, and the run completes the plan that decided so
(its partitions are observed once, not twice), its slots still refresh every partition's progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cli, create_topic, mirror, progress_of, run, seed_sequence, write_mirror_file
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 12


@pytest.fixture
def copied(source_conf, unique):
    """A mirror that has copied everything of its topic: the next run has nothing to copy."""
    topic = create_topic(source_conf, unique("src"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, 10)
    m = mirror(unique("m"), [topic])
    assert run(m)["status"] == "ok"
    return m, topic


def test_an_empty_run_plans_once_runs_without_spark_and_refreshes_every_progress(target_conf, copied, tmp_path):
    m, topic = copied
    before = progress_of(target_conf, m, topic, PARTITIONS)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    result_file = tmp_path / "empty.json"
    # No --inprocess: the CLI decides; with nothing pending, the spark-submit it started beside its plan
    # (spark/gate.py) never passes the launch gate: no Spark context, and nothing of it is left running.
    empty = cli("run", m.name, "--config", str(config_file), "--result-json", str(result_file), timeout=120)
    assert empty.returncode == 0, empty.stdout + empty.stderr
    assert "SparkContext" not in empty.stdout + empty.stderr and "Using incubator modules" not in empty.stderr
    assert_no_job_left(m.name)
    report = json.loads(result_file.read_text())
    assert report["status"] == "ok" and report["records"] == 0
    assert {s["status"] for s in report["slots"]} == {"nothing-to-do"} and len(report["slots"]) == m.slots
    assert all(p["pending"] == 0 and p["origin"] == "progress" for p in report["plan"])
    assert {"process start", "resolve", "observe and plan", "target sync", "generation", "slots",
            "lag record"} <= set(report["steps"])
    after = progress_of(target_conf, m, topic, PARTITIONS)
    assert {p: a.offset for p, a in after.items()} == {p: b.offset for p, b in before.items()}
    # Every partition's progress was committed again by this run (idle progress must not expire).
    assert all(after[p].committed_ms > before[p].committed_ms for p in range(PARTITIONS))


def assert_no_job_left(mirror_name: str, budget: float = 20.0) -> None:
    """No process of a job for ``mirror_name`` (spark-submit's JVM, its Python driver) within ``budget`` s."""
    def jobs_left():
        left = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--mirror" in argv and mirror_name.encode() in argv and any(b"spark" in a.lower() for a in argv):
                left.append(cmdline.parent.name)
        return not left, f"pids {left}"
    wait_for(f"the stopped job of {mirror_name} to end", jobs_left, budget)


def test_the_run_completes_the_plan_that_found_nothing_to_copy_instead_of_observing_again(
        source_conf, copied, tmp_path):
    """The plan found nothing; a record written between the plan and the run proves the run did not
    observe the partitions again: it completes the plan it was handed (nothing to copy), and the
    record is left for the next run."""
    from eosmirror.driver.run import run_in_process
    from eosmirror.spark import job, launch

    m, topic = copied
    args = job.parser().parse_args(["--mirror", m.name, "--config", str(write_mirror_file(tmp_path / "m.yaml", m))])
    how = launch.decide(m, args, job.options_from(args))
    planned = how.planned
    assert how.way is launch.Way.IN_PROCESS and planned is not None
    seed_sequence(source_conf, topic, 1, 1, prefix="after-the-plan-")
    code, result = job.run(m.name, args, run_in_process, planned)
    assert code == 0 and result.ok and result.records == 0
    assert result.run_id == planned[0].options.run_id
    # With a record pending, the plan says Spark (and hands over no plan); a run that plans copies it.
    assert launch.decide(m, args, job.options_from(args)).way is launch.Way.SPARK_SUBMIT
    assert run(m)["records"] == 1


def test_the_airflow_copy_task_runs_an_empty_run_here_on_the_plan_that_decided_so(copied, tmp_path, caplog):
    """The copy task's empty run: in the task's process, no Spark. It hands its plan to job.run as the
    test above does, where a record written after the plan shows that the run does not plan again."""
    import logging
    from types import SimpleNamespace

    from eosmirror.airflow import copytask
    from eosmirror.core.runreport import SlotStatus
    from eosmirror.spark import launch

    m, _ = copied
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    operator = SimpleNamespace(mirror=m.name, log=logging.getLogger("copy-task"), config_path=str(config_file),
                               application_args=["--mirror", m.name, "--config", str(config_file)])
    with caplog.at_level(logging.INFO, logger="copy-task"):
        mirror, _ = copytask._read_mirror(operator)
        how, args = copytask._decide(operator, mirror)
        assert how.way is launch.Way.IN_PROCESS and how.planned is not None
        result = copytask._run_here(operator, mirror, how, args)
    assert result.ok and result.records == 0
    assert {s.status for s in result.slots} == {SlotStatus.NOTHING_TO_DO}
    assert any("nothing to copy: the slots refresh their progress in this process, without Spark" in r.getMessage()
               for r in caplog.records)
