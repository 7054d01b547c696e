"""No dead end (issue #50): a switchover stopped right after each of its steps from `switching-over` on is
cancelled back to mirroring (the mirror goes on) or continued (it runs the final run again); a completed
planned switchover has the way back a promotion has (`reverse` from the switchover point, nothing
diverged). Judged by Kafka's Java consumer (read_committed): every source record once on the target.

A stop is a fault injected right after the step (EOSMIRROR_TRANSITION_FAULT, driver/transition.py), as a
crash there would leave it."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from eosmirror.core.mirrorstate import Phase
from eosmirror.kafka import state
from eosmirror.kafka.cluster import Cluster
from tests.helpers import cli, create_topic, mirror, seed_sequence, write_mirror_file
from tests.support.consumers import java_group_read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
PARTITIONS = 2
CLI_BUDGET = 180
# The steps a switchover stops after, each cancelled; the last one's stop is continued instead.
CANCELLED_AFTER = ("record switching-over", "final run", "fence", "record lag", "group sync")
CONTINUED_AFTER = "verify"


def command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return cli(*args, env=env, timeout=CLI_BUDGET)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"eosmirror {' '.join(args)} did not end within {CLI_BUDGET} s:\n{exc.stdout!s}\n{exc.stderr!s}")


def said(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def every_value(conf: dict, topic: str, group: str) -> Counter:
    read = java_group_read(conf, topic, group)
    return Counter(f"{k}:{value}" for k, records in read.items() for _, value in records)


def test_a_stopped_switchover_is_cancelled_or_continued_and_a_switched_over_mirror_has_a_way_back(
        source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("ways"), partitions=PARTITIONS)
    m = mirror(unique("m"), [topic], groups={})
    config = str(write_mirror_file(tmp_path / "mirrors.yaml", m, groups={}))
    target = Cluster.from_settings("target", target_conf)
    quick = ("--config", config, "--quiet-seconds", "1", "--wait-seconds", "30", "--no-dags", "--json", "--inprocess")

    for i, step in enumerate(CANCELLED_AFTER):
        seed_sequence(source_conf, topic, PARTITIONS, 5, prefix=f"r{i}-")
        if step != "final run":    # that one's final run copies (in the command's process); the others find it done
            assert command("run", m.name, "--config", config, "--inprocess").returncode == 0
        stopped = command("switchover", m.name, *quick, env={"EOSMIRROR_TRANSITION_FAULT": f"switchover:{step}"})
        assert stopped.returncode == 1 and f"injected fault after the step '{step}'" in stopped.stderr, said(stopped)
        assert state.read_mirror_state(target, m.name, m.progress_group).phase is Phase.SWITCHING_OVER, step
        if i == 0:   # the refusal and the idempotent cancel read only the phase: checked once, not per step
            refused = command("run", m.name, "--config", config, "--inprocess")
            assert refused.returncode == 2 and "switching-over" in refused.stderr and "--cancel" in refused.stderr, (
                said(refused))
        cancelled = command("switchover", m.name, "--config", config, "--cancel", "--no-dags", "--json")
        assert cancelled.returncode == 0, said(cancelled)
        assert json.loads(cancelled.stdout)["state"] == "mirroring", said(cancelled)
        if i == 0:
            again = command("switchover", m.name, "--config", config, "--cancel", "--no-dags")   # idempotent
            assert again.returncode == 0 and "already" in again.stdout, said(again)
        ran = command("run", m.name, "--config", config, "--inprocess")                     # the mirror goes on
        assert ran.returncode == 0, said(ran)

    seed_sequence(source_conf, topic, PARTITIONS, 5, prefix="last-")
    assert command("run", m.name, "--config", config, "--inprocess").returncode == 0
    stopped = command("switchover", m.name, *quick, env={"EOSMIRROR_TRANSITION_FAULT": f"switchover:{CONTINUED_AFTER}"})
    assert stopped.returncode == 1, said(stopped)
    continued = command("switchover", m.name, *quick)
    assert continued.returncode == 0, said(continued)
    assert "the slots run in this process (--inprocess)" in continued.stderr, said(continued)
    outcome = json.loads(continued.stdout)
    steps = {s["name"]: s["status"] for s in outcome["steps"]}
    assert outcome["safe"] and steps["record switching-over"] == "skipped" and steps["final run"] == "ran", outcome
    assert outcome["recovery_seconds"] > 0 and outcome["state"] == "switched-over", outcome

    on_source = every_value(source_conf, topic, unique("check-source"))
    on_target = every_value(target_conf, topic, unique("check-target"))
    assert sum(on_source.values()) == PARTITIONS * 5 * (len(CANCELLED_AFTER) + 1)
    assert on_target == on_source, (f"missing {sorted((on_source - on_target).elements())[:5]}, "
                                    f"duplicated {sorted((on_target - on_source).elements())[:5]}")

    # The way back after a planned switchover: `reverse` from the switchover point, nothing diverged.
    back = command("reverse", m.name, "--config", config, "--no-dags", "--json")
    assert back.returncode == 0, said(back)
    report = json.loads(back.stdout)
    assert report["state"] == "reversed" and report["divergence"]["total"] == 0, report
    assert {s["name"]: s["status"] for s in report["steps"]}["prepare the reverse mirror"] == "ran", report
    old = Cluster.from_settings("source", source_conf)
    reverse_mirror = m.reverse()
    assert state.read_mirror_state(old, reverse_mirror.name, reverse_mirror.progress_group).phase is Phase.MIRRORING
    wrong = command("switchover", m.name, "--config", config, "--cancel", "--no-dags")
    assert wrong.returncode == 2 and "reversed since" in wrong.stderr and "Next:" in wrong.stderr, said(wrong)
