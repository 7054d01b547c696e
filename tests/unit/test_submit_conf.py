"""The Spark settings of one run's spark-submit (spark/submit.py): what a run adds to the mirror's spark_conf."""

from eosmirror.spark import submit


def conf_of(cmd):
    return dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf")


def test_a_bounded_run_starts_no_spark_ui_unless_the_mirror_asks_for_one():
    bounded = submit.job_arguments("m1", "/m.yaml")
    assert conf_of(submit.command("local[2]", bounded, submit.spark_conf({}, "a")))["spark.ui.enabled"] == "false"
    asked = submit.command("local[2]", bounded, submit.spark_conf({"spark.ui.enabled": "true"}, "a"))
    assert conf_of(asked)["spark.ui.enabled"] == "true"


def test_a_follow_run_keeps_sparks_default_ui():
    follow = submit.job_arguments("m1", "/m.yaml", follow_until="2026-11-29T12:00:00+00:00")
    assert "spark.ui.enabled" not in conf_of(submit.command("local[2]", follow, submit.spark_conf({}, "a")))
    assert submit.for_run({"x": "1"}, follow) == {"x": "1"}
