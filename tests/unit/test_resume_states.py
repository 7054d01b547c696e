"""The switch back and resume (core/mirrorstate.py), without brokers: who may resume, who may be switched
back, what a retired reverse mirror refuses, and the next step each state names."""

import pytest

from eosmirror.core import mirrorstate as ms
from eosmirror.core.errors import EXIT_CONFIG

REVERSED = ms.MirrorState(ms.Phase.REVERSED, 10, "cli:ops", note="promoted at ...")
SWITCHED_BACK = ms.MirrorState(ms.Phase.SWITCHED_OVER, 20, "cli:ops", note=ms.Phase.SWITCHED_OVER.value)
PREPARED = ms.MirrorState(ms.Phase.MIRRORING, 15, "cli:ops", note="prepared by `eosmirror reverse dr`")
RETIRED = ms.MirrorState(ms.Phase.RETIRED, 30, "cli:ops")


def refusal(check, *args) -> str:
    with pytest.raises(ms.StateRefusedError) as refused:
        check(*args)
    assert refused.value.exit_code == EXIT_CONFIG
    return str(refused.value)


def test_resume_needs_a_reversed_mirror_whose_reverse_mirror_was_switched_back():
    assert ms.check_may_resume(REVERSED, SWITCHED_BACK, "dr") is True
    resuming = ms.resuming_state(40, "cli:ops", (), "after the switch back")
    assert ms.check_may_resume(resuming, RETIRED, "dr") is True              # an unfinished resume continues
    assert ms.check_may_resume(resuming, SWITCHED_BACK, "dr") is True
    text = refusal(ms.check_may_resume, REVERSED, PREPARED, "dr")
    assert "has not been switched back" in text and "`eosmirror switchover dr__reverse`" in text
    assert "`eosmirror resume dr`" in text
    assert "not prepared" in refusal(ms.check_may_resume, REVERSED, ms.MIRRORING, "dr")
    assert "copies already" in refusal(ms.check_may_resume, ms.MIRRORING, ms.MIRRORING, "dr")
    resumed = ms.MirrorState(ms.Phase.MIRRORING, 50, "cli:ops", note="resumed after the switch back")
    assert "copies already" in refusal(ms.check_may_resume, resumed, RETIRED, "dr")   # done: nothing to resume
    promoted = ms.MirrorState(ms.Phase.PROMOTED, 5, "cli:ops")
    text = refusal(ms.check_may_resume, promoted, ms.MIRRORING, "dr")
    assert "promoted since" in text and "`eosmirror reverse dr`" in text


def test_only_a_prepared_reverse_mirror_is_switched_back_and_a_retired_one_copies_nothing():
    assert ms.check_may_switch_over(PREPARED, "dr__reverse") is True
    assert ms.check_may_switch_over(SWITCHED_BACK, "dr__reverse") is False   # done already
    text = refusal(ms.check_may_switch_over, ms.MIRRORING, "dr__reverse")
    assert "not prepared" in text and "`eosmirror reverse dr`" in text
    assert "retired since" in refusal(ms.check_may_switch_over, RETIRED, "dr__reverse")
    text = refusal(ms.check_may_copy, RETIRED, "dr__reverse")
    assert "retired since" in text and "`eosmirror reverse dr` prepares it again" in text
    assert "finish the resume" in refusal(ms.check_may_copy, ms.resuming_state(1, "x", (), ""), "dr")
    assert "finish the resume" in refusal(ms.check_may_switch_over, ms.resuming_state(1, "x", (), ""), "dr")
    with pytest.raises(ms.StateRefusedError):
        ms.check_may_promote(ms.resuming_state(1, "x", (), ""), "dr")


def test_each_state_names_its_next_step_and_the_way_back_is_no_longer_unbuilt():
    assert "`eosmirror switchover dr__reverse`" in ms.next_step(REVERSED, "dr")
    assert "`eosmirror resume dr`" in ms.next_step(REVERSED, "dr")
    assert "not built" not in ms.next_step(REVERSED, "dr")
    assert "`eosmirror resume dr`" in ms.next_step(SWITCHED_BACK, "dr__reverse")
    assert "`eosmirror resume dr` again" in ms.next_step(ms.resuming_state(1, "x", (), ""), "dr")
    assert "`eosmirror reverse dr`" in ms.next_step(ms.MIRRORING, "dr__reverse")
    assert "`eosmirror promote dr`" in ms.next_step(SWITCHED_BACK, "dr")    # a forward switchover: unchanged


def test_the_resuming_record_keeps_where_the_forward_mirror_continues():
    points = (ms.PartitionPoint("orders", "orders", 1, target_end=70, progress=400),
              ms.PartitionPoint("orders", "orders", 0, target_end=80, progress=300))
    written = ms.resuming_state(60, "cli:ops", points, "after the switch back of dr__reverse")
    assert [p.partition for p in written.points] == [0, 1]
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
