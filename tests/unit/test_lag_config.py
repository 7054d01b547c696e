"""Config fields of the lag reports: max_lag_seconds, on_lag_alert, lag.schedule, lag.history_days."""

from pathlib import Path

import pytest

from eosmirror.core import config
from eosmirror.core.errors import ConfigError

P = Path("mirrors.yaml")


def raw(name="m1", **fields):
    return {"name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["a"], **fields}


def test_defaults_no_slo_every_five_minutes_seven_days():
    m = config.parse({"mirrors": [raw()]}, P).mirrors[0]
    assert m.max_lag_seconds is None and m.on_lag_alert is None
    assert (m.lag.schedule, m.lag.history_days) == ("*/5 * * * *", 7)


def test_fields_are_read_from_defaults_and_mirrors():
    doc = {"defaults": {"lag": {"schedule": "*/2 * * * *", "history_days": 3}},
           "mirrors": [raw(max_lag_seconds=90, on_lag_alert="ops.alerts.page"), raw("m2")]}
    first, second = config.parse(doc, P).mirrors
    assert (first.max_lag_seconds, first.on_lag_alert) == (90.0, "ops.alerts.page")
    assert first.lag == second.lag == config.LagSettings(schedule="*/2 * * * *", history_days=3)


@pytest.mark.parametrize("fields, words", [
    ({"max_lag_seconds": 0}, ["`max_lag_seconds`", "0 is not allowed", "1.0 to"]),
    ({"max_lag_seconds": "fast"}, ["`max_lag_seconds`", "'fast'"]),
    ({"on_lag_alert": "not a name"}, ["`on_lag_alert`", "'not a name'", "dotted Python name"]),
    ({"on_lag_alert": "nodots"}, ["`on_lag_alert`", "'nodots'"]),
    ({"lag": {"schedule": "every 5"}}, ["`lag.schedule`", "cron"]),
    ({"lag": {"history_days": 0}}, ["`lag.history_days`", "1 to 90"]),
    ({"lag": {"retention": 3}}, ["`lag.retention`", "no such field"]),
])
def test_bad_values_name_mirror_field_and_value(fields, words):
    with pytest.raises(ConfigError) as info:
        config.parse({"mirrors": [raw(**fields)]}, P)
    assert "mirror 'm1'" in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_mirrors_that_disagree_on_the_lag_schedule_are_refused():
    doc = {"mirrors": [raw(lag={"schedule": "*/2 * * * *"}), raw("m2")]}
    with pytest.raises(ConfigError, match=r"`lag.schedule` differs between mirrors .*set `lag.schedule` once, in `defaults`"):
        config.parse(doc, P)
