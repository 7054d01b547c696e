"""The tester container: the eosmirror image plus this checkout's tools/ (read-only), on the
deployment's network, running probe.py commands for the test."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from eosmirror_tools.deploy.images import REPO
from eosmirror_tools.deploy.shell import DeployError, run
from eosmirror_tools.deploy.stack import NETWORK, PROJECT, Stack

NAME = f"{PROJECT}-tester"
MIRRORS_IN_CONTAINER = "/opt/airflow/mirrors/mirrors.yaml"
PACING_SECONDS = 4


class Tester:
    def __init__(self, stack: Stack):
        self.stack = stack

    def start(self) -> None:
        self.remove()
        run(["docker", "run", "-d", "--name", NAME, "--hostname", "tester", "--network", NETWORK,
             "-v", f"{REPO / 'tools'}:/opt/tools:ro", "-v", f"{self.stack.mirrors_file}:{MIRRORS_IN_CONTAINER}:ro",
             "-e", "PYTHONPATH=/opt/tools", "-e", f"EOSMIRROR_CONFIG={MIRRORS_IN_CONTAINER}",
             "-e", "EOSMIRROR_KAFKA_LOG_LEVEL=error", "eosmirror:latest", "sleep", "infinity"],
            "start the tester container", 120)

    def remove(self) -> None:
        subprocess.run(["docker", "rm", "-f", NAME], capture_output=True, timeout=120)

    def probe(self, command: str, *args: Any, timeout: float = 300, check: bool = True) -> dict[str, Any]:
        """Run a probe command; its JSON answer. The admin password travels in the environment."""
        cmd = ["docker", "exec", "-e", "AIRFLOW_ADMIN_PASSWORD", NAME, "python", "-m",
               "eosmirror_tools.deploy.probe", command, *map(str, args)]
        done = subprocess.run(cmd, capture_output=True, timeout=timeout,
                              env={**__import__("os").environ, **self.stack.tester_env()})
        lines = done.stdout.decode(errors="replace").strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else {"error": done.stderr.decode(errors="replace")[-1000:]}
        except json.JSONDecodeError:
            answer = {"error": "\n".join(lines[-5:])[-1000:]}
        if check and (done.returncode != 0 or "error" in answer):
            raise DeployError(f"probe {command} {' '.join(map(str, args))}: {answer.get('error', answer)}")
        return answer

    def start_production(self, topic: str, partitions: int, tag: str) -> None:
        """Background production (docker exec -d) until stop_production(tag)."""
        run(["docker", "exec", "-d", NAME, "python", "-m", "eosmirror_tools.deploy.probe", "produce", topic,
             str(partitions), f"/tmp/stop-{tag}", f"/tmp/produced-{tag}.json"], "start production", 60)

    def stop_production(self, tag: str, budget: float = 180) -> dict[str, Any]:
        from eosmirror_tools.deploy.shell import wait_for

        run(["docker", "exec", NAME, "touch", f"/tmp/stop-{tag}"], "stop production", 60)

        def done():
            out = subprocess.run(["docker", "exec", NAME, "cat", f"/tmp/produced-{tag}.json"], capture_output=True)
            return out.returncode == 0, out.stdout.decode() or out.stderr.decode()

        return json.loads(wait_for(done, f"background production {tag} to stop", budget))


def write_mirrors_file(path: Path, topic: str, lag_schedule: str | None = None) -> Path:
    import yaml

    mirror = {"name": "deploy", "source": {"connection": "kafka_source"}, "target": {"connection": "kafka_target"},
              "topics": [topic], "slots": 3, "max_transaction_seconds": 5,
              # The driver runs in a Celery worker container; executors on the Spark workers connect
              # back to it, so it must listen on the network, not on loopback (eosmirror's default).
              "spark_conf": {"spark.driver.bindAddress": "0.0.0.0", "spark.executor.memory": "512m",
                             "spark.executor.cores": "1", "spark.cores.max": "3",
                             # A cut-off executor is declared lost after 40 s (default 120 s), so the
                             # network-partition fault makes Spark run its slot elsewhere in the test.
                             "spark.network.timeout": "40s", "spark.network.timeoutInterval": "10s",
                             "spark.executor.heartbeatInterval": "5s",
                             # Pacing, test only: every transaction stays open a few seconds after its
                             # first records, so that a fault lands inside a transaction.
                             "spark.executorEnv.EOSMIRROR_FAULTS": json.dumps(
                                 [{"point": "in_transaction", "action": "sleep", "seconds": PACING_SECONDS}])},
              "airflow": {"schedule": None, "retries": 3}}
    if lag_schedule:
        mirror["lag"] = {"schedule": lag_schedule}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"mirrors": [mirror]}, sort_keys=False))
    return path
