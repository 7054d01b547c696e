"""The "Mirror lag" page, its JSON and /eosmirror/metrics, served by Airflow's own API app (in process,
with the plugin loaded from plugins/ and Airflow's auth manager): anonymous requests are refused; the
figures equal `eosmirror lag --json`; the metrics parse with prometheus_client's parser."""

import json
import re

import pytest

from eosmirror.driver import lag
from tests.helpers import cli, create_topic, mirror, run, seed_sequence
from tests.support.airflow_dags import mirror_def, use_mirrors

pytestmark = pytest.mark.e2e
ROUTES = ["/eosmirror/", "/eosmirror/mirror/x", "/eosmirror/api/lag", "/eosmirror/metrics", "/eosmirror/readiness/x"]


@pytest.fixture(scope="module")
def api():
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    client = TestClient(create_app())
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    return client, {"Authorization": f"Bearer {token}"}


@pytest.fixture
def lagging(source_conf, target_conf, unique, tmp_path, monkeypatch):
    """A mirror 2 x 6 offsets behind (capped runs), with two recorded samples; EOSMIRROR_CONFIG names it."""
    topic = create_topic(source_conf, unique("src"), 2)
    seed_sequence(source_conf, topic, 2, 10)
    name = unique("m")
    fields = {"max_records_per_partition": 4, "max_lag_seconds": 3600}
    path = use_mirrors(tmp_path, monkeypatch, mirror_def(name, [topic], **fields))
    m = mirror(name, [topic], **fields)
    first = run(m)
    assert first["status"] == "ok", first      # the report says why (once seen failed in a fresh clone's suite)
    for _ in range(2):
        lag.report(m, record=True)
    return m, topic, path


def test_anonymous_requests_get_401_and_no_data(api):
    client, _ = api
    for route in ROUTES:
        response = client.get(route)
        assert response.status_code == 401 and "eosmirror_lag" not in response.text, (route, response.text)
    assert client.get("/eosmirror/", headers={"Authorization": "Bearer not-a-token"}).status_code in (401, 403)


def test_the_plugin_registers_the_nav_entry_and_the_app(api):
    client, auth = api
    plugins = client.get("/api/v2/plugins", headers=auth).json()["plugins"]
    (ours,) = [p for p in plugins if p["name"] == "eosmirror"]
    assert ours["external_views"][0]["name"] == "Mirror lag" and ours["external_views"][0]["href"] == "/eosmirror/"
    assert ours["fastapi_apps"][0]["url_prefix"] == "/eosmirror"


def _cli_figures(path, name):
    out = cli("lag", name, "--json", "--config", str(path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["mirrors"][0]


def _same_figures(page, shown):
    assert (page["mirror"], page["status"], page["record_lag"]) == (shown["mirror"], shown["status"], shown["record_lag"])
    assert abs(page["time_lag_seconds"] - shown["time_lag_seconds"]) < 10   # both measured "now", moments apart
    keys = ("source_topic", "partition", "status", "high_watermark", "last_stable", "progress", "record_lag")
    assert [[p[k] for k in keys] for p in page["partitions"]] == [[p[k] for k in keys] for p in shown["partitions"]]


def test_page_json_and_metrics_show_the_clis_figures(api, lagging):
    from prometheus_client.parser import text_string_to_metric_families

    client, auth = api
    m, topic, path = lagging
    shown = _cli_figures(path, m.name)
    assert shown["record_lag"] == 12 and [p["record_lag"] for p in shown["partitions"]] == [6, 6]
    (page,) = client.get("/eosmirror/api/lag", params={"mirror": m.name}, headers=auth).json()["mirrors"]
    _same_figures(page, shown)
    html = client.get("/eosmirror/", headers=auth).text
    row = re.search(rf"<tr data-mirror='{re.escape(m.name)}'>(.*?)</tr>", html).group(1)
    assert f"data-status='{shown['status']}'" in row and "<td class='record-lag'>12</td>" in row
    response = client.get("/eosmirror/metrics", headers=auth)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(response.text) for s in family.samples}
    for p in shown["partitions"]:
        labels = (("mirror", m.name), ("partition", str(p["partition"])), ("topic", topic))
        assert samples[("eosmirror_lag_records", labels)] == p["record_lag"]
        assert abs(samples[("eosmirror_lag_seconds", labels)] - p["time_lag_seconds"]) < 10
        assert samples[("eosmirror_lag_status", tuple(sorted(labels + (("status", p["status"]),))))] == 1
    assert samples[("eosmirror_mirror_status", (("mirror", m.name), ("status", shown["status"])))] == 1
    assert samples[("eosmirror_mirror_slo_breached", (("mirror", m.name),))] == 0


def test_mirror_page_has_the_chart_and_one_row_per_partition(api, lagging):
    client, auth = api
    m, topic, _ = lagging
    for window in ("1h", "24h", "7d"):
        response = client.get(f"/eosmirror/mirror/{m.name}", params={"range": window}, headers=auth)
        assert response.status_code == 200
        chart = re.search(r"<svg id='lag-chart'[^>]*data-samples='(\d+)'", response.text)
        assert chart and int(chart.group(1)) >= 2, response.text[:500]
        # The recovery point's windows count the recorded samples whatever the chart's range.
        counts = dict(re.findall(r"<tr data-window='(last hour|last day)'><td>[^<]*</td><td>(\d+)</td>", response.text))
        assert int(counts["last hour"]) >= 2 and counts["last day"] == counts["last hour"], response.text[-1500:]
        assert "<polyline class='record-lag'" in response.text and "<polyline class='time-lag'" in response.text
        rows = re.findall(r"<tr data-partition='([^']+)'>", response.text)
        assert rows == [f"{topic}[0]", f"{topic}[1]"]
    assert client.get("/eosmirror/mirror/no-such-mirror", headers=auth).status_code == 404


def test_the_overview_the_readiness_page_and_the_metrics_show_the_recorded_readiness_report(api, lagging):
    """#51 item 4: the report `eosmirror readiness --record` appends is the one the page, the column and the
    metrics show."""
    from prometheus_client.parser import text_string_to_metric_families

    client, auth = api
    m, _, path = lagging
    assert 'data-verdict=\'\'' in client.get("/eosmirror/", headers=auth).text     # no report yet: "no report"
    out = cli("readiness", m.name, "--json", "--record", "--config", str(path))
    assert out.returncode in (0, 9), out.stderr
    verdict = json.loads(out.stdout)["verdict"]
    assert (out.returncode == 0) == (verdict == "READY")
    html = client.get("/eosmirror/", headers=auth).text
    row = re.search(rf"<tr data-mirror='{re.escape(m.name)}'>(.*?)</tr>", html).group(1)
    assert f"class='readiness' data-verdict='{verdict}'" in row and f"href='readiness/{m.name}'" in row
    page = client.get(f"/eosmirror/readiness/{m.name}", headers=auth)
    assert page.status_code == 200 and f"id='verdict'><span class='status' data-verdict='{verdict}'" in page.text
    assert "data-reports='1'" in page.text
    assert client.get("/eosmirror/readiness/no-such-mirror", headers=auth).status_code == 404
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(client.get("/eosmirror/metrics", headers=auth).text)
               for s in family.samples}
    assert samples[("eosmirror_readiness_ready", (("mirror", m.name),))] == (1 if verdict == "READY" else 0)
