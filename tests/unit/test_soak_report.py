"""The soak report's "caught up" figure counts from the mirror's first run, not from the load's start,
and the service-wait budgets scale with the machine's load (no network)."""

from eosmirror_tools.kit import waits
from eosmirror_tools.soak import report


def test_caught_up_counts_from_the_first_run_start_not_from_the_load():
    runs = [{"started": 130.0}, {"started": 100.0}]
    # Lag grows while no run has started, then falls once the first run (t=100) copies.
    series = [(90.0, 0.5), (95.0, 40.0), (100.0, 45.0), (104.0, 12.0), (107.0, 1.9), (110.0, 0.4)]
    got = report.caught_up_after_first_run(runs, series)
    assert got == {"first_run_started": 100.0, "caught_up_s_after_first_run": 7.0}


def test_a_mirror_that_never_caught_up_or_never_ran_says_none():
    assert report.caught_up_after_first_run([{"started": 10.0}], [(11.0, 30.0), (12.0, 31.0)]) == {
        "first_run_started": 10.0, "caught_up_s_after_first_run": None}
    assert report.caught_up_after_first_run([], [(1.0, 0.0)]) == {
        "first_run_started": None, "caught_up_s_after_first_run": None}


def test_service_budgets_grow_with_the_load_and_stay_under_their_cap(monkeypatch):
    monkeypatch.setattr(waits.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(waits.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert waits.service_budget(90) == 90                      # a quiet machine: the quiet figure
    monkeypatch.setattr(waits.os, "getloadavg", lambda: (5.0, 4.0, 3.0))
    assert waits.service_budget(90) == 90 * 2.5                # 2.5 runnable per core
    assert waits.service_budget(90, cap_seconds=200) == 200
    monkeypatch.setattr(waits.os, "getloadavg", lambda: (40.0, 4.0, 3.0))
    assert waits.service_budget(90) == 90 * waits.MAX_FACTOR   # stuck, not slow: never unbounded
    assert "load average 40.0" in waits.machine_now() and "2 cores" in waits.machine_now()


def test_a_dead_mirrormaker2_task_is_found_in_its_log_with_its_cause(tmp_path):
    """Connect kills an exactly-once task on InvalidTxnStateException and never restarts it: the soak
    names that death (and stops waiting for MirrorMaker 2) instead of waiting out its budget."""
    from eosmirror_tools.soak.harness import task_failures

    log = tmp_path / "mm2.log"
    log.write_text(
        "[2026-11-28 05:08:22,945] WARN [Producer ...] Got error produce response ... Error: CONCURRENT_TRANSACTIONS\n"
        "[2026-11-28 05:08:24,243] ERROR ExactlyOnceWorkerSourceTask{id=MirrorSourceConnector-0} Task threw an "
        "uncaught and unrecoverable exception. Task is being killed and will not recover until manually restarted\n"
        "org.apache.kafka.connect.errors.ConnectException: Failed to flush offsets and/or records for task 0\n"
        "\tat org.apache.kafka.connect.runtime.WorkerTask.run(WorkerTask.java:1)\n"
        "Caused by: org.apache.kafka.common.errors.InvalidTxnStateException: invalid state.\n"
        "[2026-11-28 05:08:24,244] INFO refreshing topics took 111 ms\n")
    (found,) = task_failures(log)
    assert "MirrorSourceConnector-0" in found and "Failed to flush" in found and "InvalidTxnStateException" in found
    healthy = tmp_path / "healthy.log"
    healthy.write_text("[2026-11-28 05:08:24,244] INFO refreshing topics took 111 ms\n")
    assert task_failures(healthy) == [] and task_failures(tmp_path / "absent.log") == [] and task_failures(None) == []
