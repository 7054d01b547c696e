"""The resume's state records (core/mirrorstate.py) and its option check, without brokers (who may resume
and what each state refuses: test_transitions.py)."""

import pytest

from eosmirror.core import mirrorstate as ms
from eosmirror.core.transitions import Command
from eosmirror.driver.transition import Transition

RETIRED = ms.MirrorState(ms.Phase.RETIRED, 30, "cli:ops")


def test_the_resuming_record_keeps_where_the_forward_mirror_continues():
    points = (ms.PartitionPoint("orders", "orders", 1, target_end=70, progress=400),
              ms.PartitionPoint("orders", "orders", 0, target_end=80, progress=300))
    kept = []
    run = Transition(Command.RESUME, "dr", lambda line: None, by="cli:ops", record_to=kept.append)
    written = run.record(ms.Phase.RESUMING, points, "after the switch back of dr__reverse")
    assert kept == [written] and [p.partition for p in written.points] == [0, 1]      # partition order
    assert (written.by, written.note, run.steps[0].name) == ("cli:ops", "after the switch back of dr__reverse",
                                                            "record resuming")
    assert ms.MirrorState.decode(written.encode()) == written
    assert ms.MirrorState.decode(RETIRED.encode()).phase is ms.Phase.RETIRED


def test_resume_refuses_a_check_window_out_of_range_before_any_broker(tmp_path):
    from eosmirror.core import config
    from eosmirror.core.errors import ConfigError
    from eosmirror.driver import resume
    from tests.helpers import mirrors_file

    path = mirrors_file(tmp_path / "mirrors.yaml", [
        {"name": "east", "source": {"config": {"bootstrap.servers": "127.0.0.1:1"}},
         "target": {"config": {"bootstrap.servers": "127.0.0.1:2"}}, "topics": ["t"],
         "replication_policy": "identity"}])
    mirror = config.load(path).get("east")
    for bad in (0.0, -1.0, 601.0):
        with pytest.raises(ConfigError, match=r"check seconds must be in \(0, 600\]"):
            resume.resume(mirror, window=bad)
