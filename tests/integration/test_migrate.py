"""Moving onto eosmirror (issue 12) against real brokers: an imported MM2 configuration runs; audit
records, reset and migrate from a group or from MirrorMaker 2 are exact and refuse what they cannot
prove."""

from __future__ import annotations

from pathlib import Path

import yaml

from eosmirror.core import config, mm2import
from tests import helpers


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
