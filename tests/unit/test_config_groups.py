"""The optional `groups` section of a mirror (consumer-group failover/failback), validated like every field."""

import pytest

from eosmirror.core import config
from tests.support.configs import error_of, one


def test_a_mirror_without_a_groups_section_has_no_group_sync():
    assert one().groups is None


def test_an_empty_groups_section_gets_mm2_like_defaults():
    g = one(groups={}).groups
    assert g.include == (".*",)
    assert {"console-consumer-.*", "connect-.*", "__.*"} <= set(g.exclude)
    assert any("eosmirror" in pattern for pattern in g.exclude)
    assert (g.schedule, g.allow_rewind) == ("*/5 * * * *", False)


def test_groups_fields_are_read():
    g = one(groups={"include": "orders-.*", "exclude": ["orders-test"], "schedule": None, "allow_rewind": True}).groups
    assert (g.include, g.exclude, g.schedule, g.allow_rewind) == (("orders-.*",), ("orders-test",), None, True)


@pytest.mark.parametrize("fields, field, shown", [
    ({"groups": {"include": ["("]}}, "groups.include", "`(`"),   # as written, not a repr
    ({"groups": {"exclude": [3]}}, "groups.exclude", "[3]"),
    ({"groups": {"schedule": "61 * * * *"}}, "groups.schedule", "'61 * * * *'"),
    ({"groups": {"schedule": "* * * * * *"}}, "groups.schedule", "'* * * * * *'"),
    ({"groups": {"allow_rewind": "yes"}}, "groups.allow_rewind", "'yes'"),
    ({"groups": ["include"]}, "groups", "['include']"),
])
def test_a_bad_groups_value_names_mirror_field_and_value(fields, field, shown):
    text = error_of(**fields)
    assert f"mirror 'm1': field `{field}`: {shown} is not allowed; expected " in text, text


def test_an_unknown_groups_field_suggests_the_nearest():
    text = error_of(groups={"allow_rewinds": True})
    assert "field `groups.allow_rewinds`" in text and "did you mean `allow_rewind`" in text


def test_groups_come_from_defaults_too():
    parsed = config.parse({"defaults": {"groups": {"allow_rewind": True}},
                           "mirrors": [{"name": "m1", "source": {"local": "source"}, "target": {"local": "target"},
                                        "topics": ["a"]}]}, config.Path("x.yaml"))
    assert parsed.mirrors[0].groups.allow_rewind is True
