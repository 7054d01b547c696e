"""Each pytest-xdist worker gets its own home, Airflow home and cluster ports (tests/conftest.py).

xdist's controller process imports conftest.py first and its workers inherit its environment; when
the workers did not undo what the controller set, both ran on gw0's home, Airflow database and
brokers, and the worker that finished first stopped the brokers the other still used."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_two_xdist_workers_get_separate_homes_airflow_homes_and_ports(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PROBE_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "each", "-p", "no:cacheprovider",
                           "tests/unit/xdist_probe.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("gw*.json")}
    assert sorted(seen) == ["gw0", "gw1"], done.stdout[-2000:]
    for key in ("EOSMIRROR_HOME", "AIRFLOW_HOME", "EOSMIRROR_SOURCE_PORT", "EOSMIRROR_TARGET_PORT"):
        assert seen["gw0"][key] != seen["gw1"][key], (key, seen)
    for worker, values in seen.items():
        assert values["EOSMIRROR_HOME"].endswith(f"var/test/{worker}"), values
        assert values["AIRFLOW_HOME"].startswith(values["EOSMIRROR_HOME"]), values
    assert int(seen["gw1"]["EOSMIRROR_SOURCE_PORT"]) - int(seen["gw0"]["EOSMIRROR_SOURCE_PORT"]) == 100, seen
