"""on_lag_alert: called with the alert's figures; a broken hook is reported beside the alert, never instead."""

from pathlib import Path

import pytest

from eosmirror.airflow import lagtasks
from eosmirror.core import config

CALLS = []


def hook(alert):
    CALLS.append(alert)


def broken(alert):
    raise RuntimeError("pager down")


def mirrors(**hooks):
    raw = [{"name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["a"],
            "on_lag_alert": dotted} for name, dotted in hooks.items()]
    return config.parse({"mirrors": raw}, Path("m.yaml"))


def test_the_hook_gets_the_alert_and_a_broken_or_missing_hook_is_reported():
    CALLS.clear()
    found = mirrors(a=f"{__name__}.hook", b=f"{__name__}.broken", c="no_such_module_x.f")
    problems = lagtasks.call_hooks(found, [{"mirror": "a", "status": "STALLED"}, {"mirror": "b"}, {"mirror": "c"}])
    assert CALLS == [{"mirror": "a", "status": "STALLED"}]
    assert problems[0] == f"mirror b: on_lag_alert {__name__}.broken failed: RuntimeError: pager down"
    assert problems[1].startswith("mirror c: on_lag_alert no_such_module_x.f failed: LookupError: ")


def test_a_mirror_without_a_hook_is_skipped():
    assert lagtasks.call_hooks(mirrors(a=None), [{"mirror": "a"}]) == []


def test_load_hook_refuses_what_is_not_callable():
    with pytest.raises(LookupError, match="is not callable"):
        lagtasks.load_hook(f"{__name__}.CALLS")
