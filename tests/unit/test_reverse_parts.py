"""The way back after a promotion, without brokers: the reverse states, the generated reverse mirror,
the side topics' naming rule and the divergence arithmetic (core/mirrorstate, core/config, core/naming,
core/divergence)."""

import re
from dataclasses import replace
from pathlib import Path

import pytest

from eosmirror.core import config, divergence, naming
from eosmirror.core import mirrorstate as ms
from eosmirror.core.errors import EXIT_CONFIG, ConfigError

POINTS = (ms.PartitionPoint("orders", "orders", 0, target_end=120, progress=100, observed_end=130, observed_ms=9_000),
          ms.PartitionPoint("orders", "orders", 1, target_end=51, progress=50))


def mirrors(**fields):
    raw = {"name": "dr", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders.*"],
           "airflow": {"schedule": "@hourly"}, **fields}
    return config.parse({"mirrors": [raw]}, Path("m.yaml"))


def test_the_side_topic_naming_rule_and_the_reverse_names():
    assert naming.diverged_topic("orders", "dr") == "orders.diverged.dr"
    assert re.fullmatch(naming.diverged_topic_pattern("dr"), naming.diverged_topic("orders.eu", "dr"))
    assert not re.fullmatch(naming.diverged_topic_pattern("dr"), "orders.diverged.other")
    assert naming.reverse_mirror_name("dr") == "dr__reverse" and naming.forward_mirror_name("dr__reverse") == "dr"
    assert naming.forward_mirror_name("dr") is None and naming.forward_mirror_name("__reverse") is None
    assert naming.diverged_transactional_id("eosmirror", "dr") == "eosmirror.dr.diverged"
    assert naming.diverged_origin("orders", 2, 17) == b"orders/2/17"


def test_the_reverse_records_carry_the_promotion_or_switchover_point_on():
    """(Which state may be reversed: test_transitions.py, the table.)"""
    promoted = ms.MirrorState(ms.Phase.PROMOTED, 10_000, "cli:ops", POINTS)
    reversing = ms.MirrorState(ms.Phase.REVERSING, 11_000, "cli:ops", POINTS, ms.reverse_note(promoted))
    done = ms.MirrorState(ms.Phase.REVERSED, 12_000, "cli:ops", POINTS, ms.reverse_note(reversing, "divergence 3"))
    assert done.note.startswith("promoted at 1970-01-01 00:00:10 UTC") and done.note.endswith("; divergence 3")
    assert ms.MirrorState.decode(done.encode()) == done
    switched = ms.MirrorState(ms.Phase.SWITCHED_OVER, 10_000, "cli:ops", POINTS)
    assert ms.reverse_note(switched).startswith("switched-over at ")


def test_the_generated_reverse_mirror_swaps_the_clusters_and_owns_its_names():
    file = mirrors(slots=3, start_from="latest", groups={}, progress_group="custom")
    forward = file.get("dr")
    back = file.get("dr__reverse")
    assert back == forward.reverse()
    assert (back.source, back.target) == (forward.target, forward.source)
    assert back.name == "dr__reverse" and back.progress_group == "eosmirror.dr__reverse"
    assert back.slots == 3 and back.start_from == "earliest"
    # the forward mirror's groups section selects the groups a failover of the reverse mirror moves, and the
    # reverse knows its forward mirror (whose progress group, here a configured one, it cannot derive)
    assert back.groups == forward.groups is not None and back.forward is forward
    assert back.forward.progress_group == "custom"
    assert back.topics == forward.topics and naming.diverged_topic_pattern("dr") in back.topics_exclude
    assert "reverse" in back.airflow.tags and back.airflow.schedule == "@hourly"
    with pytest.raises(ConfigError, match="no mirror named 'other__reverse'"):
        file.get("other__reverse")


def test_a_prefix_mirror_has_no_reverse_and_the_suffix_is_reserved():
    prefixed = mirrors(replication_policy="prefix", source_alias="dc1")
    with pytest.raises(ConfigError, match="replication_policy: prefix") as refused:
        prefixed.get("dr__reverse")
    assert "the same topic names" in str(refused.value) and refused.value.exit_code == EXIT_CONFIG
    with pytest.raises(ConfigError, match="ends with '__reverse'"):
        mirrors(name="x__reverse")


def test_the_divergence_counts_records_not_offsets_and_says_where_they_stay():
    # offsets 100..109 with a marker at 104 and an aborted record at 107: 8 records
    records = [(o, 1_000 + o) for o in range(100, 110) if o not in (104, 107)]
    part = divergence.summarize("orders", 0, 100, 111, records, side_topic="orders.diverged.dr")
    assert (part.count, part.first_offset, part.last_offset, part.first_ms, part.last_ms) == (8, 100, 109, 1100, 1109)
    empty = divergence.summarize("orders", 1, 50, 52, [], side_topic="orders.diverged.dr")
    assert empty.count == 0 and empty.side_topic is None
    report = divergence.DivergenceReport("dr", "copy", "source cluster (local)", (part, empty))
    text = "\n".join(report.lines())
    assert report.total == 8 and "orders[0]: 8 record(s), offsets 100..109" in text
    assert "copied once to orders.diverged.dr[0]" in text and "they stay in source cluster (local) orders[0]" in text
    assert "orders[1]: nothing diverged" in text and "Kafka cannot cut a log's tail" in text
    assert "none" in divergence.DivergenceReport("dr", "report", "s", (empty,)).lines()[-1]
    with pytest.raises(ValueError, match="outside"):
        divergence.summarize("orders", 0, 100, 105, [(105, 1)])
    assert divergence.divergence_start(None, 7) == 7 and divergence.divergence_start(100, 7) == 100
    assert divergence.divergence_start(5, 7) == 7
    assert replace(part, side_topic=None).line("s").endswith("not copied (divergence: report)")
    shorter = divergence.summarize("orders", 2, 100, 90, [])          # the old log ends before the progress
    assert "lost the records at offsets 90..99 that the target has" in shorter.line("s") and shorter.count == 0


def test_a_side_topic_is_copied_once_and_other_data_there_is_refused():
    expected = [b"orders/0/100", b"orders/0/101"]
    assert divergence.side_topic_state("orders.diverged.dr", 0, [], expected) is False         # copy now
    assert divergence.side_topic_state("orders.diverged.dr", 0, list(expected), expected) is True   # copied
    with pytest.raises(divergence.SideTopicRefusedError, match="holds other data") as refused:
        divergence.side_topic_state("orders.diverged.dr", 0, [None], expected)
    assert refused.value.exit_code == EXIT_CONFIG and "1 of them not diverged records" in str(refused.value)
    with pytest.raises(divergence.SideTopicRefusedError, match="not exactly the 2"):
        divergence.side_topic_state("orders.diverged.dr", 0, expected[:1], expected)


def test_a_reverse_mirror_never_takes_either_progress_group_for_a_consumer_group():
    file = mirrors(groups={}, progress_group="custom")
    assert config.own_groups(file.get("dr")) == ("custom",)
    assert config.own_groups(file.get("dr__reverse")) == ("eosmirror.dr__reverse", "custom")
