"""One launcher (spark/launch.py): how a run executes, from the mirror, its arguments and the host."""

import pytest

from eosmirror.core import config
from eosmirror.spark import job, launch, runargs, runner, server, serverclient
from eosmirror.spark.launch import Way

MIRROR = config.parse({"mirrors": [{"name": "m1", "source": {"local": "source"}, "target": {"local": "target"},
                                    "topics": ["orders"]}]}, __import__("pathlib").Path("m.yaml")).mirrors[0]


def decide(*extra, **flags):
    args = job.parser().parse_args(["--mirror", "m1", *extra])
    return launch.decide(MIRROR, args, job.options_from(args), **flags)


@pytest.fixture
def plan(monkeypatch):
    """The plan's answer, without brokers: (nothing to copy, the plan); records the plans made."""
    made = []

    def fake(mirror, options):
        made.append(options)
        return plan.empty, ("run", "plan") if plan.empty else None
    plan.empty = False
    monkeypatch.setattr(launch, "_plan", fake)
    plan.made = made
    return plan


def test_asked_in_process_a_dry_run_and_asked_server_decide_without_a_plan(plan):
    assert decide(inprocess=True).way is Way.IN_PROCESS
    assert decide("--dry-run", served=True).way is Way.IN_PROCESS
    assert decide(served=True).way is Way.RUN_SERVER
    assert plan.made == []


def test_nothing_to_copy_runs_here_on_the_plan_that_decided_so(plan):
    plan.empty = True
    how = decide(run_server=True)
    assert (how.way, how.planned) == (Way.IN_PROCESS, ("run", "plan"))


def test_a_follow_run_never_plans_here_and_goes_to_spark(plan):
    plan.empty = True
    assert decide("--follow-seconds", "60").way is Way.SPARK_SUBMIT
    assert plan.made == []


def test_airflow_run_server_only_when_a_server_of_this_code_answers(plan, monkeypatch):
    monkeypatch.setattr(serverclient, "status", lambda: None)
    how = decide(run_server=True)
    assert how.way is Way.SPARK_SUBMIT and how.warning and "no run server answers" in how.why
    monkeypatch.setattr(serverclient, "status", lambda: {"fingerprint": "old", "pid": 1, "master": "local"})
    assert "other eosmirror code" in decide(run_server=True).why
    monkeypatch.setattr(serverclient, "status", lambda: {"fingerprint": server.fingerprint(), "pid": 7,
                                                         "master": "local[2]"})
    how = decide(run_server=True)
    assert how.way is Way.RUN_SERVER and not how.warning and "pid 7" in how.why
    assert decide().way is Way.SPARK_SUBMIT   # without the setting


def test_the_lean_command_line_path_follows_the_same_rules():
    assert runargs.served_command_line(["run", "m1", "--server"])
    assert not runargs.served_command_line(["run", "m1", "--server", "--dry-run"])
    assert not runargs.served_command_line(["run", "m1", "--server", "--inprocess"])
    assert not runargs.served_command_line(["plan", "m1", "--server"])


def test_slots_need_spark_only_to_copy_or_to_follow():
    assert not runner.slots_need_spark(pending=False, follows=False)
    assert runner.slots_need_spark(pending=True, follows=False) and runner.slots_need_spark(pending=False, follows=True)
