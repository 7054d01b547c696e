"""A planned switchover with the source a region away (issue #52 item 5): the source broker behind a
100 ms round-trip proxy (kit/link.py), the mirror and its target beside each other, as deployed. The
operator's command (`eosmirror switchover --inprocess`: its final run copies in the command's process; the CLI
drill, tests/e2e/test_dr_drill.py, sends one through spark-submit at this distance) must prove zero loss with the
budgets it has, say the round trip it measured, and publish the recovery time.

The records are judged through the source broker's direct listener and the target by librdkafka readers;
the group's position on the target by the committed offsets Kafka returns."""

from __future__ import annotations

import pytest

from eosmirror_tools.kit import link
from tests.helpers import cli, committed_offsets, create_topic, mirror, mirrors_file, read_all, run
from tests.support.clusters import CLI_BUDGET, PARTITIONS, json_tail, killable_cluster, own_port
from tests.support.groups import consume_and_commit
from tests.support.load import Load

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
RTT_MS = 100


def test_a_switchover_with_the_source_100_ms_away_proves_zero_loss_and_publishes_its_recovery_time(
        target_conf, unique, tmp_path):
    with killable_cluster("far-switch", own_port(50), link=link.Link.round_trip(RTT_MS)) as far:
        direct, far_conf = far.client_config(), far.far_config()
        topic = create_topic(direct, unique("orders"), partitions=PARTITIONS)
        m = mirror(unique("m"), [topic], source={"config": far_conf}, groups={})
        config = mirrors_file(tmp_path / "mirrors.yaml", [{
            "name": m.name, "source": {"config": far_conf}, "target": {"local": "target"}, "topics": list(m.topics),
            "slots": m.slots, "max_transaction_seconds": m.max_transaction_seconds, "groups": {}}])
        group = unique("app")
        with Load(direct, topic, "f") as load:
            load.wait_more(20, "the producers before the first run")
            assert run(m)["status"] == "ok"
            committed = consume_and_commit(direct, group, topic, {k: 10 for k in range(PARTITIONS)})
        code_out = cli("switchover", m.name, "--config", str(config), "--quiet-seconds", "3", "--wait-seconds", "120",
                       "--no-pause", "--json", "--inprocess", timeout=CLI_BUDGET)
        assert code_out.returncode == 0, (code_out.stdout + code_out.stderr)[-4000:]
        outcome = json_tail(code_out.stdout)
        assert outcome["safe"] and outcome["verdict"] == "zero loss: safe to switch", outcome
        assert outcome["source_round_trip_ms"] >= RTT_MS, outcome["source_round_trip_ms"]
        assert outcome["final_run"]["status"] == "ok" and outcome["groups"] is not None, outcome

        on_target = committed_offsets(target_conf, group, topic, PARTITIONS)
        for k in range(PARTITIONS):
            source_records, target_records = read_all(direct, topic, k), read_all(target_conf, topic, k)
            assert [r.value for r in target_records] == [r.value for r in source_records], k
            assert len(source_records) >= 20, (k, len(source_records))
            # The group resumes on the target at the record after the last one it processed on the source.
            next_on_source = next(r.value for r in source_records if r.offset >= committed[k])
            next_on_target = next(r.value for r in target_records if r.offset >= on_target[k])
            assert next_on_target == next_on_source, (k, committed[k], on_target[k])
        steps = {s["name"]: s["seconds"] for s in outcome["steps"]}
        print(f"switchover with the source {outcome['source_round_trip_ms']} ms away (round trip): trigger to safe "
              f"{outcome['recovery_seconds']} s; steps {steps}; sent {load.sent} per partition")
