"""The foreign-write comparison (core/foreign.py), its lag status and its refusal: pure, no brokers."""

from __future__ import annotations

from eosmirror.core import foreign, lag
from eosmirror.core.errors import EXIT_FOREIGN, ForeignWriteError, TargetMismatchError
from eosmirror.core.foreign import Accounting, ForeignRecords
from eosmirror.kafka import progress, transactions

T = ("orders", 3)


def test_the_accounting_travels_in_the_progress_metadata_and_older_metadata_has_none():
    meta = progress.decode_metadata(progress.encode_metadata("src", "id", 2, Accounting(40, 41)))
    assert Accounting.of_metadata(meta) == Accounting(40, 41) and meta["src"] == "src"
    assert Accounting.of_metadata(progress.decode_metadata(progress.encode_metadata("src", "id", 2))) is None
    assert Accounting.of_metadata({"tr": "x", "te": 3}) is None and Accounting.of_metadata({"tr": 5, "te": 4}) is None


def test_a_written_transaction_moves_the_accounting_past_its_records_and_expects_its_marker():
    assert Accounting(10, 11).after_write(15, 5) == Accounting(20, 21)
    assert Accounting(10, 11).after_write(15, 0) == Accounting(10, 11)          # idle: unchanged
    assert Accounting.checked(30) == Accounting(30, 30)


def test_each_partition_is_judged_from_its_high_watermark():
    acc = Accounting(20, 21)
    assert foreign.judge(acc, 21) == foreign.CLEAN          # the copies and their commit marker: no read
    assert foreign.judge(acc, 25) == foreign.SUSPECT        # something lies beyond: read it
    assert foreign.judge(acc, 20) == foreign.BEHIND         # the marker not written yet, or records lost
    assert foreign.judge(None, 25) == foreign.UNACCOUNTED


def test_only_suspects_are_read_from_where_the_copies_end_up_to_the_last_stable_offset():
    accounting = {("a", 0): Accounting(20, 21), ("a", 1): Accounting(5, 5), ("a", 2): Accounting(7, 8),
                  ("a", 3): None}
    highs = {("a", 0): 21, ("a", 1): 9, ("a", 2): 12, ("a", 3): 100}
    stables = {("a", 0): 21, ("a", 1): 9, ("a", 2): 10, ("a", 3): 100}
    # ("a", 2): the marker of its last copy lies in [7, 12) somewhere, so the read starts at 7, not 8;
    # records at and above the last stable offset 10 are not decided yet.
    assert foreign.ranges_to_read(accounting, highs, stables) == {("a", 1): (5, 9), ("a", 2): (7, 10)}


def test_data_records_beyond_the_copies_are_foreign_and_markers_or_aborted_records_are_not():
    reads = {T: (30, (24, 25)), ("orders", 4): (12, ())}    # ("orders", 4): only markers / aborted records
    found = foreign.found(reads, {T: 30, ("orders", 4): 12}, {T: Accounting(20, 21), ("orders", 4): Accounting(9, 10)})
    assert found == [ForeignRecords("orders", 3, (24, 25), 20, 30)]


def test_records_a_follow_run_committed_after_the_first_read_are_the_mirrors_not_foreign():
    """The planner reads while the previous run's follower still commits: a record is foreign only if
    the progress read again (stable) after it was read still does not account for it."""
    reads = {T: (30, (21, 22, 23, 28))}
    now = {T: Accounting(24, 25)}                           # the follower committed 21..23 meanwhile
    assert [r.offsets for r in foreign.found(reads, {T: 30}, now)] == [(28,)]


def test_the_refusal_names_partition_offsets_producers_and_what_to_do():
    record = ForeignRecords("orders", 3, tuple(range(24, 40)), 20, 41, ("producer id 7 epoch 0 (not the mirror's)",))
    error = foreign.refusal("target (localhost:9092)", "mirror m", [record], "", "localhost:9092")
    assert isinstance(error, ForeignWriteError) and isinstance(error, TargetMismatchError)
    assert error.exit_code == EXIT_FOREIGN == 8
    text = str(error)
    assert "orders[3]: 16 foreign record(s) at offset(s) 24, 25, 26" in text and "(6 more)" in text
    assert "producer id 7 epoch 0 (not the mirror's)" in text
    assert "describe-producers --topic orders --partition 3" in text and "docs/failing-loudly.md" in text


def test_describe_producers_output_is_parsed_and_the_mirrors_own_producer_is_marked():
    output = ("ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\t"
              "CurrentTransactionStartOffset\n"
              "1000\t3\t0\t-1\t1764367200000\tNone\n"
              "2001\t0\t-1\t4\t1764367260000\tNone\n")
    rows = transactions.parse_producers(output)
    assert [r["ProducerId"] for r in rows] == ["1000", "2001"]
    named, note = foreign.with_producers([ForeignRecords("orders", 3, (24,), 20, 30)], {T: rows},
                                         {"1000": "eosmirror.m.0"})
    assert named[0].producers == (
        "producer id 1000 epoch 3, last write 2025-11-28T22:00:00Z (the mirror's eosmirror.m.0)",
        "producer id 2001 epoch 0, last sequence 4, last write 2025-11-28T22:01:00Z (not the mirror's)")
    assert note == ""
    only_own, note = foreign.with_producers([ForeignRecords("orders", 3, (24,), 20, 30)], {T: rows[:1]},
                                            {"1000": "eosmirror.m.0"})
    assert "no producer but the mirror's is known on orders[3]" in note and "without idempotence" in note


def sample(foreign_records: int = 0, run_failed: bool = False) -> lag.MirrorSample:
    part = lag.PartitionSample("orders", 3, high_watermark=50, last_stable=50, progress=50, foreign=foreign_records,
                               foreign_at=24 if foreign_records else None)
    other = lag.PartitionSample("orders", 4, high_watermark=50, last_stable=50, progress=50)
    run = lag.RunOutcome("r1", "failed" if run_failed else "ok", 1_000, error="refused" if run_failed else None)
    return lag.MirrorSample("m", 2_000, (part, other), last_run=run, last_success_ms=1_000)


def test_the_lag_view_says_foreign_for_that_partition_and_the_mirror_and_alerts():
    status = lag.evaluate([], sample(foreign_records=16, run_failed=True), lag.Policy(lag_interval_ms=60_000))
    assert status.status == "FOREIGN" and status.alerting
    assert [p.status for p in status.partitions] == ["FOREIGN", "ERROR"]     # the other partition: the failed run
    assert "16 record(s) on its target partition were not written by the mirror (the first at offset 24)" \
        in status.partitions[0].reason
    assert any(a.startswith("mirror m: FOREIGN:") and "orders[3]" in a for a in status.alerts())
    assert lag.evaluate([], sample(), lag.Policy(lag_interval_ms=60_000)).status == "OK"


def test_a_sample_keeps_its_foreign_records_and_older_samples_read_as_none():
    decoded = lag.MirrorSample.decode(sample(foreign_records=16).encode())
    assert (decoded.partitions[0].foreign, decoded.partitions[0].foreign_at) == (16, 24)
    assert (decoded.partitions[1].foreign, decoded.partitions[1].foreign_at) == (0, None)
    old = b'{"v":1,"m":"m","t":5,"ok":null,"run":null,"p":[["orders",3,50,50,50,0,null,null]]}'
    assert lag.MirrorSample.decode(old).partitions[0].foreign == 0


def test_the_accept_foreign_param_reaches_that_run_only_and_is_validated():
    """The mirror DAG's manual Param ``accept_foreign`` (default false) becomes ``--accept-foreign`` of that run's
    job (spark-submit or the run server: the CLI's spark-submit and server paths pass the flag on too) and the
    preflight's options; a value that is no boolean is refused like the other Params."""
    import logging
    from types import SimpleNamespace

    import pytest
    from airflow.sdk.exceptions import ParamValidationError

    from eosmirror.airflow import copytask, tasks
    from eosmirror.airflow.dags import build_mirror_dag
    from eosmirror.spark import job, serverclient, submit
    from tests.support.configs import one

    param = build_mirror_dag(one(name="af"), None).params.get_param("accept_foreign")
    assert param.resolve() is False and param.resolve(True) is True
    with pytest.raises(ParamValidationError):
        param.resolve("yes")
    argv = submit.job_arguments("af", accept_foreign=True)
    assert "--accept-foreign" in argv and "--accept-foreign" not in submit.job_arguments("af")
    assert job.options_from(job.parser().parse_args(argv)).accept_foreign is True
    cli_args = job.parser().parse_args(["--mirror", "af", "--accept-foreign"])
    cli_args.mirror, cli_args.follow_seconds = "af", None
    assert "--accept-foreign" in serverclient.job_arguments(cli_args)
    assert tasks.run_options({"params": {"accept_foreign": True}}).accept_foreign is True
    assert tasks.run_options({"params": {}}).accept_foreign is False
    # the copy task's job arguments (spark-submit or the run server) for a manual run with the Param ticked
    operator = SimpleNamespace(mirror="af", until=None, log=logging.getLogger("test"))
    manual = {"dag_run": SimpleNamespace(run_type="manual", conf={"accept_foreign": True}),
              "params": {"accept_foreign": True}}
    assert "--accept-foreign" in copytask._job_arguments(operator, manual, one(name="af"), "/m.yaml")
    assert "--accept-foreign" not in copytask._job_arguments(operator, {**manual, "params": {}}, one(name="af"),
                                                             "/m.yaml")
