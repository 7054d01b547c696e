"""DagBag integrity over dags/: no import errors, and the policies every eosmirror DAG must keep."""

import time

import pytest

from eosmirror.airflow import dags
from eosmirror.core import config
from tests.airflow_helpers import DAGS
from tests.helpers import mirrors_file

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dagbag():
    from tests.airflow_helpers import dagbag as load

    return load()


def test_no_import_errors_and_one_dag_per_mirror(dagbag):
    expected = {dags.mirror_dag_id(n) for n in config.load().names()} | {dags.FENCE_DAG_ID, dags.LAG_DAG_ID,
                                                                                 dags.MIGRATE_DAG_ID} | {
        dags.readiness_dag_id(n) for n in config.load().names()}
    assert set(dagbag.dag_ids) >= expected


def test_the_fence_dag_offers_each_identity_mirrors_reverse_mirror(tmp_path):
    """A reverse mirror copies after `eosmirror reverse`: its zombie producers are fenced like any mirror's."""
    path = mirrors_file(tmp_path / "mirrors.yaml", [
        {"name": name, "source": {"config": {"bootstrap.servers": "127.0.0.1:1"}},
         "target": {"config": {"bootstrap.servers": "127.0.0.1:2"}}, "topics": ["t"], "replication_policy": policy,
         **({"source_alias": "dc1"} if policy == "prefix" else {})}
        for name, policy in (("east", "identity"), ("west", "prefix"), ("north", "identity"))])
    fence = dags.build_fence_dag(config.load(path), str(path))
    assert fence.params.get_param("mirror").schema["enum"] == ["east", "east__reverse", "north", "north__reverse",
                                                                "west"]


def test_every_dag_has_tags_docs_retries_and_one_active_run(dagbag):
    for dag_id in dagbag.dag_ids:
        dag = dagbag.get_dag(dag_id)
        assert dag.tags and "eosmirror" in dag.tags, dag_id
        assert dag.doc_md and len(dag.doc_md) > 100, dag_id
        assert dag.max_active_runs == 1, dag_id
        for task in dag.tasks:
            assert task.retries >= 1 and task.owner, (dag_id, task.task_id)


def test_mirror_dags_use_a_data_interval_timetable_and_validated_params(dagbag):
    from airflow.sdk import CronDataIntervalTimetable

    for name in config.load().names():
        dag = dagbag.get_dag(dags.mirror_dag_id(name))
        assert isinstance(dag.timetable, CronDataIntervalTimetable)
        assert set(dag.params.keys()) == {"until", "max_records_per_partition", "topics", "dry_run", "accept_foreign"}
        assert dag.task_dict["preflight"].downstream_task_ids == {"copy"}
        assert dag.task_dict["copy"].downstream_task_ids == {"publish"}


def test_parsing_touches_no_broker_or_connection(tmp_path, monkeypatch):
    """Clusters that do not exist and connections that are not defined: parsing still works, fast."""
    path = mirrors_file(tmp_path / "mirrors.yaml", [
        {"name": f"offline{i}", "source": {"connection": "no_such_conn"},
         "target": {"config": {"bootstrap.servers": "10.255.255.1:9092"}}, "topics": ["x"]} for i in range(5)])
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(path))
    from airflow.models import DagBag

    started = time.monotonic()
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert {f"eosmirror__offline{i}" for i in range(5)} <= set(bag.dag_ids)
    assert time.monotonic() - started < 30


def test_invalid_mirror_file_is_an_import_error_that_names_the_field(tmp_path, monkeypatch):
    bad = tmp_path / "mirrors.yaml"
    bad.write_text("mirrors:\n  - name: m\n    source: {local: source}\n    target: {local: target}\n"
                   "    topics: [x]\n    slots: many\n")
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(bad))
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert any("`slots`: 'many' is not allowed" in str(e) for e in bag.import_errors.values())


def test_optional_run_params_are_not_marked_required_in_the_trigger_form(dagbag):
    # Airflow's form marks a field required (*) unless its JSON-schema type admits null; every run
    # Param has a default meaning "the mirror's own setting", so none of them may show as required.
    for name in config.load().names():
        params = dagbag.get_dag(dags.mirror_dag_id(name)).params
        for key in ("until", "max_records_per_partition", "topics", "dry_run", "accept_foreign"):
            schema_type = params.get_param(key).schema["type"]
            assert isinstance(schema_type, list) and "null" in schema_type, (name, key, schema_type)


def test_group_dags_exist_for_mirrors_with_a_groups_section_with_validated_params(dagbag):
    mirrors = config.load()
    with_groups = {dags.groups_dag_id(m.name) for m in mirrors.mirrors if m.groups}
    assert with_groups, "the repository's mirrors.yaml should show a groups section"
    assert {d for d in dagbag.dag_ids if d.startswith("eosmirror_groups__")} == with_groups
    for m in mirrors.mirrors:
        if m.groups:
            dag = dagbag.get_dag(dags.groups_dag_id(m.name))
            assert set(dag.params.keys()) == {"direction", "dry_run", "allow_rewind", "groups"}
            assert list(dag.task_dict) == ["sync_groups"]
            assert dag.params.get_param("direction").schema["enum"] == ["failover", "failback"]


def test_a_teams_two_line_dag_file_loads_the_same_dags_as_dags_folder(dagbag, tmp_path):
    """docs/install.md: with the wheel installed, a team's DAG file is the factory import and one call."""
    from airflow.models import DagBag

    folder = tmp_path / "team_dags"
    folder.mkdir()
    two_lines = ("from eosmirror.airflow.factory import mirror_dags\n"
                 f"globals().update(mirror_dags({str(config.default_config_path())!r}))\n")
    (folder / "mirrors_dag.py").write_text(two_lines)
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    assert len(two_lines.splitlines()) == 2
    assert sorted(bag.dag_ids) == sorted(dagbag.dag_ids) and len(bag.dag_ids) >= 5, (bag.dag_ids, dagbag.dag_ids)


def test_an_identity_mirror_gets_its_reverse_dag_and_a_paused_reverse_mirror_dag_a_prefix_mirror_neither(tmp_path):
    """docs/disaster-recovery.md, the way back: parsing still reads the file only."""
    path = mirrors_file(tmp_path / "mirrors.yaml", [
        {"name": "dr", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders"],
         "airflow": {"schedule": "@hourly"}},
        {"name": "px", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders"],
         "replication_policy": "prefix", "source_alias": "dc1"}])
    built = dags.build_all(str(path))
    assert {"eosmirror_reverse__dr", "eosmirror__dr__reverse"} <= set(built)
    assert not {d for d in built if d.endswith("__px__reverse") or d == "eosmirror_reverse__px"}
    back = built["eosmirror__dr__reverse"]
    assert back.is_paused_upon_creation is True and "reverse" in back.tags
    assert back.params.get_param("until") is not None and built["eosmirror__dr"].is_paused_upon_creation is None
    reverse = built["eosmirror_reverse__dr"]
    assert "disaster-recovery" in reverse.tags
    assert reverse.params.get_param("divergence").schema["enum"] == ["report", "copy"]
    assert list(reverse.task_dict) == ["reverse", "verdict"] and reverse.max_active_runs == 1
    # the switch back (the reverse mirror's switchover) and the resume
    assert {"eosmirror_switchover__dr__reverse", "eosmirror_resume__dr"} <= set(built)
    assert not {"eosmirror_switchover__px__reverse", "eosmirror_resume__px"} & set(built)
    resume = built["eosmirror_resume__dr"]
    assert list(resume.task_dict) == ["resume", "verdict"] and resume.max_active_runs == 1 and resume.schedule is None
    assert "disaster-recovery" in resume.tags and resume.params.get_param("check_seconds").value == 3
    switch_back = built["eosmirror_switchover__dr__reverse"]
    assert set(switch_back.task_dict) == {"readiness", "switchover", "verdict"}
    assert switch_back.task_dict["readiness"].downstream_task_ids == {"switchover"}


def test_each_mirror_has_a_daily_readiness_dag_and_the_switchover_runs_readiness_first(tmp_path):
    """#51 item 4: `airflow.readiness_schedule` (default @daily) per mirror; the switchover DAG's first task is
    the readiness report, which a Param may let the run go past."""
    path = mirrors_file(tmp_path / "mirrors.yaml", [
        {"name": "dr", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders"]},
        {"name": "hourly", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["pay"],
         "airflow": {"readiness_schedule": "@hourly"}}])
    built = dags.build_all(str(path))
    daily, hourly = built["eosmirror_readiness__dr"], built["eosmirror_readiness__hourly"]
    assert list(daily.task_dict) == ["readiness"] and "readiness" in daily.tags and daily.max_active_runs == 1
    assert daily.timetable.expression in ("@daily", "0 0 * * *"), daily.timetable.expression
    assert hourly.timetable.expression in ("@hourly", "0 * * * *"), hourly.timetable.expression
    switchover = built["eosmirror_switchover__dr"]
    assert switchover.task_dict["readiness"].downstream_task_ids == {"switchover"}
    assert switchover.params.get_param("ignore_readiness").value is False
    assert "ignore_readiness" not in built["eosmirror_promote__dr"].params


def test_the_install_pages_own_dag_with_the_operators_loads(tmp_path):
    """docs/install.md's example of a team's own DAG, taken from the page: it loads, and its tasks are the
    operators, their mirror still a template until the run renders it."""
    import re
    from pathlib import Path

    from airflow.models import DagBag

    from eosmirror.airflow.operators import GroupSyncOperator, MirrorCopyOperator

    page = (Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()
    example = next(code for code in re.findall(r"```python\n(.*?)```", page, re.S) if "MirrorCopyOperator" in code)
    (tmp_path / "orders_handover.py").write_text(example)
    bag = DagBag(dag_folder=str(tmp_path))
    assert bag.import_errors == {}
    dag = bag.get_dag("orders_handover")
    assert {t.task_id: type(t).__name__ for t in dag.tasks} == {
        "copy": MirrorCopyOperator.__name__, "groups": GroupSyncOperator.__name__}
    assert dag.get_task("copy").mirror == "{{ params.mirror }}"
