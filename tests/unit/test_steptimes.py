"""The run report's per-step timing."""

import time

from eosmirror.core import report
from eosmirror.core.steptimes import StepTimes, process_age, timing_line
from tests import run_reports


def test_steps_keep_their_order_and_a_repeated_step_adds_up():
    steps = StepTimes()
    with steps.step("resolve"):
        time.sleep(0.01)   # elapsed time, not a wait: the step lasts at least this long
    steps.add("slots", 1.5)
    steps.add("resolve", 0.5)
    found = steps.as_dict()
    assert list(found) == ["resolve", "slots"] and found["slots"] == 1.5 and 0.51 <= found["resolve"] < 1.0
    assert timing_line(found).startswith("steps: resolve 0.5") and timing_line({}) == ""


def test_a_process_knows_its_age():
    age = process_age()
    assert age is not None and 0 < age < 24 * 3600


def test_the_summary_prints_the_timing_line():
    result = run_reports.report(steps={"process start": 0.9, "resolve": 0.05, "slots": 0.2})
    assert "steps: process start 0.90 s, resolve 0.05 s, slots 0.20 s" in report.summary(result)
