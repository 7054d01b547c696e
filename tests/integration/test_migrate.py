"""Moving onto eosmirror (issue 12) against real brokers: an imported MM2 configuration runs; audit
records, reset and migrate from a group or from MirrorMaker 2 are exact and refuse what they cannot
prove."""

from __future__ import annotations

import pytest

from eosmirror.core import config, mm2import
from tests import helpers
from tests.support.groups import commit_offsets
from tests.support.load import home_made_copy

pytestmark = pytest.mark.integration


def test_a_mirror_imported_from_mm2_properties_runs(clusters, source_conf, target_conf, unique, tmp_path):
    topic = helpers.create_topic(source_conf, unique("orders"), partitions=2)
    helpers.seed_sequence(source_conf, topic, 2, 30)
    alias = "mm2src"
    props = (f"clusters = {alias}, dst\n"
             f"{alias}.bootstrap.servers = {source_conf['bootstrap.servers']}\n"
             f"dst.bootstrap.servers = {target_conf['bootstrap.servers']}\n"
             f"{alias}->dst.enabled = true\n"
             f"{alias}->dst.topics = {topic}\n"
             f"tasks.max = 2\nreplication.factor = 1\nemit.heartbeats.enabled = false\n")
    rendered = mm2import.render(mm2import.translate(props), "mm2.properties")
    path = tmp_path / "mirrors.yaml"
    path.write_text(rendered)
    mirror = config.load(path).get(f"{alias}-to-dst")
    assert "emit.heartbeats.enabled = false" in rendered

    report = helpers.run(mirror)

    assert report["status"] == "ok", report
    for partition in range(2):
        copied = helpers.values(helpers.read_all(target_conf, f"{alias}.{topic}", partition))
        assert copied == [f"{partition}-{n}".encode() for n in range(30)]


# --- migrate --from group:, reset, history, translate -----------------------------------------------


def audit_records(target_conf, m):
    from eosmirror.core import migration, naming
    from eosmirror.kafka import readers
    from eosmirror.kafka.cluster import Cluster

    return [r for r in readers.read_all(Cluster.from_settings("target", target_conf), naming.state_topic(m.name), 0,
                                        missing_ok=True)
            if migration.is_audit_key(r.key)]


def test_migrate_from_a_group_seeds_exactly_and_is_audited(clusters, source_conf, target_conf, unique, tmp_path):
    from eosmirror.driver import takeover

    topic = helpers.create_topic(source_conf, unique("legacy"), partitions=2)
    helpers.create_topic(target_conf, topic, partitions=2)
    helpers.seed_sequence(source_conf, topic, 2, 20)
    home_made_copy(source_conf, target_conf, topic, 12)
    group = unique("copier-group")
    commit_offsets(source_conf, group, topic, {0: 12, 1: 12})
    m = helpers.mirror(unique("m"), [topic])
    mirrors = helpers.write_mirror_file(tmp_path / "mirrors.yaml", m)

    dry = helpers.cli("migrate", m.name, "--from", f"group:{group}", "--dry-run", "--config", str(mirrors))
    assert dry.returncode == 0 and "DRY RUN" in dry.stdout, dry.stdout + dry.stderr
    assert helpers.progress_of(target_conf, m, topic, 2) == {0: None, 1: None}   # a dry run writes nothing
    assert audit_records(target_conf, m) == []

    outcome = takeover.take_over(m, f"group:{group}", window=1.0)
    assert [(c["partition"], c["old"], c["new"], c["target_end"]) for c in outcome["partitions"]] == [
        (0, None, 12, 12), (1, None, 12, 12)]
    assert {p: pr.offset for p, pr in helpers.progress_of(target_conf, m, topic, 2).items()} == {0: 12, 1: 12}

    assert helpers.run(m)["status"] == "ok"
    for partition in range(2):   # every source record exactly once, in order
        assert helpers.values(helpers.read_all(target_conf, topic, partition)) == [
            f"{partition}-{n}".encode() for n in range(20)]

    history = helpers.cli("history", m.name, "--config", str(mirrors))
    assert history.returncode == 0 and f"migrate from group:{group} by user:" in history.stdout, history.stdout
    before = helpers.cli("translate", m.name, topic, "0", "5", "--config", str(mirrors))
    assert before.returncode == 2 and "copied before eosmirror took over" in before.stderr, before.stderr
    after = helpers.cli("translate", m.name, topic, "0", "15", "--config", str(mirrors))
    assert after.returncode == 0 and after.stdout.strip().endswith(f"{topic}[0]@15"), after.stdout
    verified = helpers.cli("verify", m.name, "--config", str(mirrors))   # the copier's 12 records are not foreign
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "12 earlier target record(s) were copied before eosmirror took over" in verified.stdout, verified.stdout


def test_migrate_refuses_while_the_group_moves_and_writes_nothing(clusters, source_conf, target_conf, unique):
    import threading

    from eosmirror.driver import takeover
    from eosmirror.driver.migrate import RefusedError

    topic = helpers.create_topic(source_conf, unique("busy"), partitions=2)
    helpers.create_topic(target_conf, topic, partitions=2)
    helpers.seed_sequence(source_conf, topic, 2, 50)
    group = unique("busy-group")
    commit_offsets(source_conf, group, topic, {0: 1, 1: 1})
    stop = threading.Event()

    def still_copying():
        offset = 1
        while not stop.is_set() and offset < 50:
            offset += 1
            commit_offsets(source_conf, group, topic, {0: offset, 1: offset})
            stop.wait(0.2)

    worker = threading.Thread(target=still_copying, daemon=True)
    worker.start()
    m = helpers.mirror(unique("m"), [topic])
    try:
        with __import__("pytest").raises(RefusedError, match="moved during the 2 s check"):
            takeover.take_over(m, f"group:{group}", window=2.0)
    finally:
        stop.set()
        worker.join(10)
    assert helpers.progress_of(target_conf, m, topic, 2) == {0: None, 1: None}
    assert audit_records(target_conf, m) == []


def test_reset_is_checked_audited_and_refused_while_a_transaction_is_open(clusters, source_conf, target_conf,
                                                                           unique, tmp_path, monkeypatch):
    import pytest

    from eosmirror.driver import migrate, takeover
    from eosmirror.driver.migrate import RefusedError

    topic = helpers.create_topic(source_conf, unique("reset"), partitions=2)
    helpers.seed_sequence(source_conf, topic, 2, 10)
    m = helpers.mirror(unique("m"), [topic])
    assert helpers.run(m)["status"] == "ok"
    mirrors = helpers.write_mirror_file(tmp_path / "mirrors.yaml", m)

    dry = helpers.cli("reset", m.name, "--to", f"{topic}:0=4", "--dry-run", "--config", str(mirrors))
    assert dry.returncode == 0 and "DRY RUN" in dry.stdout, dry.stdout + dry.stderr
    assert helpers.progress_of(target_conf, m, topic, 2)[0].offset == 10

    monkeypatch.setenv("EOSMIRROR_PROGRESS_SETTLE_SECONDS", "4")    # the open transaction never settles: wait less
    held = helpers.producer(target_conf, **{"transactional.id": unique("intruder")})
    held.init_transactions(30)
    held.begin_transaction()
    held.produce(topic, value=b"open", partition=1)
    held.flush(10)
    try:
        with pytest.raises(RefusedError, match="a transaction is open on the target"):
            takeover.reset(m, [f"{topic}:0=4"], window=0.5)
    finally:
        held.abort_transaction(30)
    assert helpers.progress_of(target_conf, m, topic, 2)[0].offset == 10

    bad = helpers.cli("reset", m.name, "--to", f"{topic}:0=99", "--config", str(mirrors))
    assert bad.returncode == 2 and "outside the source partition's committed offsets" in bad.stderr, bad.stderr

    outcome = takeover.reset(m, [f"{topic}:0=4"], window=0.5)
    assert [(c["partition"], c["old"], c["new"]) for c in outcome["partitions"]] == [(0, 10, 4)]
    assert helpers.progress_of(target_conf, m, topic, 2)[0].offset == 4
    [record] = migrate.history(m)
    assert (record.action, record.origin, record.who.startswith("user:")) == ("reset", "offsets", True)


def test_after_a_backward_reset_translation_and_group_sync_use_the_chain_the_reset_starts(
        clusters, source_conf, target_conf, target_cluster, unique, tmp_path):
    """A reset 10 -> 4 makes the next run copy 4.. again: its syncs overlap the older ones. The reset's
    sync starts the partition's chain, so positions after it translate exactly (to the NEW copies),
    positions before it are named as such (no number), and recovery takes the reset as the newest."""
    from eosmirror.core import groupfailover
    from eosmirror.driver import groups, takeover
    from eosmirror.kafka import progress, syncstore

    topic = helpers.create_topic(source_conf, unique("rs"), partitions=1)
    helpers.seed_sequence(source_conf, topic, 1, 10)
    m = helpers.mirror(unique("m"), [topic], groups={})
    assert helpers.run(m)["records"] == 10
    mirrors = helpers.write_mirror_file(tmp_path / "mirrors.yaml", m)
    outcome = takeover.reset(m, [f"{topic}:0=4"], window=0.5)
    [change] = outcome["partitions"]
    assert (change["old"], change["new"]) == (10, 4) and change["target_end"] >= 10
    # What progress recovery reads: the reset's sync, not the older sync that ends further up.
    newest = syncstore.latest(target_cluster, m.name, m.progress_group).newest[(topic, 0)]
    assert (newest.source_start, newest.source_end, newest.is_boundary) == (4, 4, True)

    helpers.seed_sequence(source_conf, topic, 1, 5, prefix="b")
    assert helpers.run(m)["records"] == 11                      # source 4..14 copied again after the reset
    source = {r.offset: r for r in helpers.read_all(source_conf, topic, 0)}
    target = {r.offset: r for r in helpers.read_all(target_conf, topic, 0)}
    for offset in (4, 6, 9, 14):
        done = helpers.cli("translate", m.name, topic, "0", str(offset), "--config", str(mirrors))
        assert done.returncode == 0, done.stdout + done.stderr
        translated = int(done.stdout.strip().rsplit("@", 1)[1])
        assert translated == change["target_end"] + offset - 4, done.stdout   # one transaction: no marker within
        assert target[translated].value == source[offset].value
    before = helpers.cli("translate", m.name, topic, "0", "2", "--config", str(mirrors))
    assert before.returncode == 2 and "before the last reset that moved this partition's progress back" in (
        before.stderr), before.stderr
    assert "progress 10 -> 4" in before.stderr and "gives no number" in before.stderr

    after, early = unique("after"), unique("early")
    commit_offsets(source_conf, after, topic, {0: 7})
    commit_offsets(source_conf, early, topic, {0: 2})
    report = groups.move_groups(m, groups.GroupMoveOptions())
    by_group = {g["group"]: g for g in report["groups"]}
    [moved] = by_group[after]["partitions"]
    assert (moved["outcome"], moved["decision"], moved["new_offset"]) == (
        groupfailover.EXACT, groupfailover.WRITE, change["target_end"] + 3), report
    [refused] = by_group[early]["partitions"]
    assert refused["outcome"] == groupfailover.BEFORE_RANGE and refused["new_offset"] is None, report
    written = progress.read(target_cluster, [(topic, 0)], after, stable=False)
    assert written[(topic, 0)].offset == change["target_end"] + 3


def test_after_a_forward_reset_positions_before_it_still_translate_exactly(
        clusters, source_conf, target_conf, target_cluster, unique, tmp_path):
    """A reset 10 -> 15 skips source 10..14; it overlaps nothing, so it is only a gap in the chain:
    positions before it keep their exact translation, a skipped position goes to the first record
    copied after the reset (the reset's target end), later ones are exact."""
    from eosmirror.core import groupfailover
    from eosmirror.driver import groups, migrate, takeover
    from eosmirror.kafka import syncstore

    topic = helpers.create_topic(source_conf, unique("fw"), partitions=1)
    helpers.seed_sequence(source_conf, topic, 1, 10)
    m = helpers.mirror(unique("m"), [topic], groups={})
    assert helpers.run(m)["records"] == 10
    helpers.seed_sequence(source_conf, topic, 1, 10, prefix="b")
    mirrors = helpers.write_mirror_file(tmp_path / "mirrors.yaml", m)
    outcome = takeover.reset(m, [f"{topic}:0=15"], window=0.5)
    [change] = outcome["partitions"]
    assert (change["old"], change["new"]) == (10, 15)
    newest = syncstore.latest(target_cluster, m.name, m.progress_group).newest[(topic, 0)]
    assert (newest.source_start, newest.is_boundary, newest.moved_from) == (15, True, 10)
    assert helpers.run(m)["records"] == 5                        # source 15..19; 10..14 are skipped
    assert [(r.action, r.partitions[0].new) for r in migrate.history(m)] == [("reset", 15)]

    source = {r.offset: r for r in helpers.read_all(source_conf, topic, 0)}
    target = {r.offset: r for r in helpers.read_all(target_conf, topic, 0)}

    def translate(offset):
        done = helpers.cli("translate", m.name, topic, "0", str(offset), "--config", str(mirrors))
        assert done.returncode == 0, done.stdout + done.stderr
        return int(done.stdout.strip().rsplit("@", 1)[1])

    for offset in (0, 3, 9, 15, 17, 19):                         # before and after the reset: exact
        assert target[translate(offset)].value == source[offset].value, offset
    assert translate(15) == change["target_end"]
    assert {translate(offset) for offset in (10, 12, 14)} == {change["target_end"]}   # skipped: the next copy

    before, skipped = unique("before"), unique("skipped")
    commit_offsets(source_conf, before, topic, {0: 3})
    commit_offsets(source_conf, skipped, topic, {0: 12})
    report = groups.move_groups(m, groups.GroupMoveOptions())
    by_group = {g["group"]: g["partitions"][0] for g in report["groups"]}
    assert (by_group[before]["outcome"], target[by_group[before]["new_offset"]].value) == (
        groupfailover.EXACT, source[3].value), report
    assert (by_group[skipped]["outcome"], by_group[skipped]["new_offset"]) == (
        groupfailover.EXACT, change["target_end"]), report


# --- migrate --from mm2 refusals, with offsets written in MM2's format (test_migrate_mm2.py runs MM2) ---

def write_mm2_style_offsets(target_conf, alias, topic, last_copied):
    """Records in MM2's Connect offsets topic, in MirrorSourceTask's format (see core/migration.py)."""
    import json

    offsets_topic = f"mm2-offsets.{alias}.internal"
    helpers.create_topic(target_conf, offsets_topic, partitions=3, cleanup_policy="compact")
    out = helpers.producer(target_conf)
    for partition, offset in last_copied.items():
        key = json.dumps(["MirrorSourceConnector", {"cluster": alias, "partition": partition, "topic": topic}])
        out.produce(offsets_topic, key=key.encode(), value=json.dumps({"offset": offset}).encode(),
                    partition=partition % 3)
    out.flush(30)


def test_migrate_from_mm2_refuses_duplicates_and_other_naming(clusters, source_conf, target_conf, unique):
    import pytest

    from eosmirror.driver import takeover
    from eosmirror.driver.migrate import RefusedError

    alias = "mm" + __import__("uuid").uuid4().hex[:8]
    topic = helpers.create_topic(source_conf, unique("alo"), partitions=2)
    helpers.create_topic(target_conf, topic, partitions=2)
    helpers.seed_sequence(source_conf, topic, 2, 10)
    home_made_copy(source_conf, target_conf, topic, 10)
    again = helpers.producer(target_conf)   # an at-least-once retry: record 9 of partition 1 twice
    again.produce(topic, value=b"1-9", key=b"k4", partition=1)
    again.flush(10)
    write_mm2_style_offsets(target_conf, alias, topic, {0: 9, 1: 9})
    m = helpers.mirror(unique("m"), [topic], source_alias=alias)

    with pytest.raises(RefusedError, match=r"source 10 vs target 11.*at-least-once.*--from target-end"):
        takeover.take_over(m, "mm2", window=0.5)

    prefixed = helpers.mirror(unique("m"), [topic], replication_policy="prefix", source_alias=alias)
    with pytest.raises(RefusedError, match="MM2 named its target topics differently"):
        takeover.take_over(prefixed, "mm2", window=0.5)
    assert helpers.progress_of(target_conf, m, topic, 2) == {0: None, 1: None}


def test_migrate_from_target_end_checks_the_seam_record_by_record(clusters, source_conf, target_conf, unique):
    import pytest

    from eosmirror.driver import takeover
    from eosmirror.driver.migrate import RefusedError

    topic = helpers.create_topic(source_conf, unique("te"), partitions=2)
    helpers.create_topic(target_conf, topic, partitions=2)
    helpers.seed_sequence(source_conf, topic, 2, 30)
    copier = helpers.producer(target_conf, **{"enable.idempotence": True})
    for partition in range(2):   # an at-least-once copier: 0..19, then 15..19 again (a retried batch)
        records = helpers.read_all(source_conf, topic, partition)
        for r in records[:20] + records[15:20]:
            copier.produce(topic, value=r.value, key=r.key, partition=partition, timestamp=r.timestamp)
    copier.flush(30)
    m = helpers.mirror(unique("m"), [topic])

    outcome = takeover.take_over(m, "target-end:5", window=0.5)
    assert [(c["partition"], c["new"], c["target_end"]) for c in outcome["partitions"]] == [(0, 20, 25), (1, 20, 25)]
    assert helpers.run(m)["status"] == "ok"
    for partition in range(2):   # the seam is exact: 20..29 follow 19 once
        assert helpers.values(helpers.read_all(target_conf, topic, partition))[25:] == [
            f"{partition}-{n}".encode() for n in range(20, 30)]

    other = helpers.create_topic(source_conf, unique("te2"), partitions=1)
    helpers.create_topic(target_conf, other, partitions=1)
    helpers.seed_sequence(source_conf, other, 1, 10)
    stray = helpers.producer(target_conf)
    stray.produce(other, value=b"not from the source", partition=0)
    stray.flush(10)
    with pytest.raises(RefusedError, match="not a run of consecutive committed source records"):
        takeover.take_over(helpers.mirror(unique("m"), [other]), "target-end", window=0.5)
