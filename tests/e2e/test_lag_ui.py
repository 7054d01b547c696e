"""The "Mirror lag" page on a real `airflow api-server` (port 18480, the project's Airflow home):
anonymous requests are refused; with a JWT from /auth/token the JSON equals `eosmirror lag --json`
and the metrics parse; in headless Chromium (Debian's package), after logging in through Airflow's
login form, the page shows the CLI's numbers, the mirror's chart and partitions, and it opens inside
the Airflow UI from Browse > Mirror lag. Screenshots go to build/ui/."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from eosmirror.airflow import home
from eosmirror.driver import lag
from eosmirror_tools.kit import waits
from tests import browser
from tests.helpers import cli, create_topic, mirror, mirrors_file, run, seed_sequence

pytestmark = pytest.mark.e2e
PORT = 18480
BASE = f"http://127.0.0.1:{PORT}"
SHOTS = Path(__file__).parents[2] / "build" / "ui"


def http(path, token=None, data=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(BASE + path, data=json.dumps(data).encode() if data else None, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except urllib.error.URLError as exc:   # not listening yet
        return 0, str(exc)


@pytest.fixture(scope="module")
def lag_mirror(source_conf, tmp_path_factory):
    """A mirror of a topic of 2 x 10 records, in a mirrors.yaml of its own."""
    suffix = uuid.uuid4().hex[:6]
    topic = create_topic(source_conf, f"ui-src-{suffix}", 2)
    seed_sequence(source_conf, topic, 2, 10)
    name = f"ui-{suffix}"
    fields = {"max_records_per_partition": 4, "max_lag_seconds": 3600}
    path = mirrors_file(tmp_path_factory.mktemp("ui") / "mirrors.yaml", [
        {"name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [re.escape(topic)],
         "slots": 2, **fields}])
    return mirror(name, [topic], **fields), topic, path


@pytest.fixture(scope="module")
def api_process(lag_mirror, tmp_path_factory):
    """`airflow api-server` on PORT with the mirror's mirrors file, started before ``lagging`` records the
    mirror's history: its start (seconds of a core) goes on while the runs and the samples take theirs.
    Stopped (its process group) afterwards."""
    home.migrate()
    _, _, path = lag_mirror
    env = {**os.environ, **home.airflow_environ(), "AIRFLOW__API__PORT": str(PORT), "AIRFLOW__API__HOST": "127.0.0.1",
           "AIRFLOW__API__BASE_URL": BASE, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{BASE}/execution/",
           "EOSMIRROR_CONFIG": str(path)}
    log = tmp_path_factory.mktemp("api") / "api-server.log"
    proc = subprocess.Popen([str(Path(sys.executable).with_name("airflow")), "api-server", "--port", str(PORT)],
                            env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc, log
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)


@pytest.fixture(scope="module")
def lagging(lag_mirror, api_process, source_conf):
    """The mirror 2 x 14 offsets behind with recorded samples (recorded while the API server starts)."""
    m, topic, path = lag_mirror
    assert run(m)["status"] == "ok"
    for step in range(4):   # a short history for the chart: the lag grows, then a run shrinks it
        lag.report(m, record=True)
        seed_sequence(source_conf, topic, 2, 3, prefix=f"more{step}-")
        time.sleep(1)   # elapsed time, not a wait: the chart's samples one second apart
    assert run(m)["status"] == "ok"
    return m, topic, path


@pytest.fixture(scope="module")
def api_server(lagging, api_process):
    """The started API server once it answers, and a JWT from /auth/token."""
    proc, log = api_process
    _, _, path = lagging
    budget = waits.service_budget(180, cap_seconds=400)
    deadline = time.monotonic() + budget
    while http("/api/v2/monitor/health")[0] != 200:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise AssertionError(f"the API server did not answer within {budget:.0f} s (exit code {proc.poll()}; "
                                 f"{waits.machine_now()}):\n{log.read_text()[-3000:]}")
        time.sleep(1)
    status, body = http("/auth/token", data={"username": "admin", "password": admin_password()})
    assert status in (200, 201), body
    return json.loads(body)["access_token"], path


def admin_password():
    return json.loads((home.airflow_home() / "simple_auth_manager_passwords.json.generated").read_text())["admin"]


def log_in(chrome, username, password):
    """Fill Airflow's login form (a React form: values set through the native setter + input events)."""
    chrome.open(f"{BASE}/", "document.querySelectorAll('input').length >= 2", timeout=90)
    assert "/auth/login" in chrome.evaluate("location.href")
    chrome.evaluate(f"""(() => {{
        const set = (el, v) => {{ Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(el, v);
                                 el.dispatchEvent(new Event('input', {{bubbles: true}})); }};
        const inputs = [...document.querySelectorAll('input')];
        set(inputs.find(i => i.type !== 'password'), {json.dumps(username)});
        set(inputs.find(i => i.type === 'password'), {json.dumps(password)}); }})()""")
    deadline = time.monotonic() + 30   # the form enables its button once it has seen both values
    while chrome.evaluate("document.querySelector('button[type=submit]').disabled"):
        assert time.monotonic() < deadline, "the login form's button stayed disabled"
        time.sleep(0.2)
    chrome.evaluate("document.querySelector('button[type=submit]').click()")
    deadline = time.monotonic() + 60
    while "/auth/login" in chrome.evaluate("location.href"):
        assert time.monotonic() < deadline, "the login form did not log in within 60 s"
        time.sleep(0.3)


def cli_figures(path, name):
    out = cli("lag", name, "--json", "--config", str(path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["mirrors"][0]


def test_real_api_server_refuses_anonymous_and_serves_the_clis_figures(api_server, lagging):
    from prometheus_client.parser import text_string_to_metric_families

    token, path = api_server
    m, topic, _ = lagging
    for route in ("/eosmirror/", f"/eosmirror/mirror/{m.name}", "/eosmirror/api/lag", "/eosmirror/metrics"):
        status, body = http(route)
        assert status == 401 and m.name not in body, (route, status, body[:200])
    started = time.monotonic()
    status, body = http(f"/eosmirror/api/lag?mirror={m.name}", token)
    took = time.monotonic() - started
    assert status == 200, body
    (page,) = json.loads(body)["mirrors"]
    shown = cli_figures(path, m.name)
    keys = ("status", "record_lag", "max_lag_seconds")
    assert [page[k] for k in keys] == [shown[k] for k in keys] == ["OK", 28, 3600.0]
    assert [(p["progress"], p["record_lag"]) for p in page["partitions"]] == [
        (p["progress"], p["record_lag"]) for p in shown["partitions"]] == [(8, 14), (8, 14)]
    status, text = http("/eosmirror/metrics", token)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    records = {s.labels["partition"]: s.value for s in families["eosmirror_lag_records"].samples
               if s.labels["mirror"] == m.name}
    assert records == {"0": 14, "1": 14}
    print(f"/eosmirror/api/lag for one mirror of 2 partitions: {took * 1000:.0f} ms")


def test_the_page_in_a_headless_browser(api_server, lagging, tmp_path):
    _, path = api_server
    m, topic, _ = lagging
    shown = cli_figures(path, m.name)
    chrome = browser.Chromium(tmp_path / "profile", PORT + 1)
    try:
        # Anonymous: the page gives no data; then log in through Airflow's own login form.
        chrome.open(f"{BASE}/eosmirror/", "document.readyState === 'complete'")
        assert chrome.evaluate("document.querySelector('#mirrors')") is None
        log_in(chrome, "admin", admin_password())
        chrome.open(f"{BASE}/eosmirror/", "document.querySelector('#mirrors') !== null")
        row = chrome.evaluate(f"""(() => {{ const r = document.querySelector("tr[data-mirror='{m.name}']");
            return {{status: r.querySelector('[data-status]').dataset.status,
                     record_lag: Number(r.querySelector('.record-lag').textContent)}}; }})()""")
        assert row == {"status": shown["status"], "record_lag": shown["record_lag"]}, (row, shown)
        chrome.screenshot(SHOTS / "mirror-lag.png")
        chrome.evaluate(f"document.querySelector(\"tr[data-mirror='{m.name}'] a\").click()")
        chrome.open(f"{BASE}/eosmirror/mirror/{m.name}?range=1h", "document.querySelector('#lag-chart') !== null")
        parts = chrome.evaluate("""[...document.querySelectorAll('#partitions tr[data-partition]')].map(
            r => [r.dataset.partition, Number(r.querySelector('.record-lag').textContent)])""")
        assert parts == [[f"{p['source_topic']}[{p['partition']}]", p["record_lag"]] for p in shown["partitions"]]
        assert int(chrome.evaluate("document.querySelector('#lag-chart').dataset.samples")) >= 3
        chrome.screenshot(SHOTS / "mirror-lag-mirror.png")
        # Inside the Airflow UI: the "Mirror lag" navigation entry's route embeds the page.
        embedded = ("(() => { const f = document.querySelector('iframe'); const d = f && f.contentDocument; "
                    f"return !!(d && d.querySelector(\"tr[data-mirror='{m.name}']\")); }})()")
        chrome.open(f"{BASE}/plugin/mirror-lag", embedded, timeout=90)
        assert "/eosmirror/" in chrome.evaluate("document.querySelector('iframe').src")
        chrome.screenshot(SHOTS / "mirror-lag-in-airflow.png")
        # The navigation entry: Browse > Mirror lag.
        chrome.evaluate("[...document.querySelectorAll('button, a')].find(e => e.innerText.trim() === 'Browse').click()")
        deadline = time.monotonic() + 30
        while not chrome.evaluate("[...document.querySelectorAll('a, [role=menuitem]')].some("
                                  "e => e.innerText.trim() === 'Mirror lag')"):
            assert time.monotonic() < deadline, "no 'Mirror lag' entry under Browse"
            time.sleep(0.3)
        chrome.screenshot(SHOTS / "mirror-lag-nav.png")
    finally:
        chrome.close()
