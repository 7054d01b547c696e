import json

import pytest

from eosmirror.slot import faults


def test_rules_parse_and_filter_by_slot(monkeypatch):
    monkeypatch.setenv(faults.ENV, json.dumps([{"point": "before_commit", "action": "abort", "slot": 1}]))
    f = faults.Faults.from_env()
    f.hit("before_commit", 0)  # other slot: nothing
    with pytest.raises(faults.InjectedAbort):
        f.hit("before_commit", 1)


def test_once_marker_fires_exactly_once(tmp_path):
    f = faults.Faults([faults.Rule(point="after_init", action="abort", once=str(tmp_path / "m"))])
    with pytest.raises(faults.InjectedAbort):
        f.hit("after_init", 0)
    f.hit("after_init", 0)


def test_unknown_point_is_rejected(monkeypatch):
    monkeypatch.setenv(faults.ENV, json.dumps([{"point": "somewhere", "action": "kill"}]))
    with pytest.raises(ValueError, match="unknown point"):
        faults.Faults.from_env()
