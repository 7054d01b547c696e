"""The deployment of docker/compose.yaml: secrets, up, health, down.

Compose v2 (`docker compose`) is used when the plugin is there, else Debian's docker-compose 1.29;
the file is compose-spec syntax valid for both. Secrets are generated per run, reach compose through
its environment only, and are never printed.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from eosmirror_tools.deploy.images import DOCKER_DIR, REPO
from eosmirror_tools.deploy.shell import DeployError, log, run, wait_for

PROJECT = "eosmirror-deploy"
NETWORK = f"{PROJECT}_eosmirror"


def compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"]


def generated_secrets() -> dict[str, str]:
    return {
        "EOSMIRROR_POSTGRES_PASSWORD": secrets.token_hex(16),
        "EOSMIRROR_REDIS_PASSWORD": secrets.token_hex(16),
        "EOSMIRROR_AIRFLOW_ADMIN_PASSWORD": secrets.token_urlsafe(18),
        "EOSMIRROR_FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "EOSMIRROR_JWT_SECRET": secrets.token_urlsafe(32),
        "EOSMIRROR_API_SECRET_KEY": secrets.token_urlsafe(32),
        "EOSMIRROR_PROMETHEUS_PASSWORD": secrets.token_urlsafe(18),
    }


@dataclass
class Stack:
    mirrors_file: Path
    alert_rules: Path | None = None     # None: the rules the package ships
    env: dict[str, str] = field(default_factory=generated_secrets)

    def __post_init__(self) -> None:
        self.env = {**self.env, "EOSMIRROR_MIRRORS_FILE": str(self.mirrors_file),
                    "EOSMIRROR_DAGS_DIR": str(REPO / "dags"),
                    **({"EOSMIRROR_ALERT_RULES": str(self.alert_rules)} if self.alert_rules else {})}
        self.compose = [*compose_command(), "-p", PROJECT, "-f", str(DOCKER_DIR / "compose.yaml")]

    def run(self, *args: str, what: str, timeout: float = 600) -> str:
        return run([*self.compose, *args], what, timeout, self.env)

    def up(self) -> None:
        self.run("up", "-d", "--no-build", what="compose up", timeout=900)

    def down(self) -> None:
        """Remove every container, the network and the volumes of the deployment (images stay)."""
        self.run("down", "--volumes", "--remove-orphans", "--timeout", "10", what="compose down", timeout=300)

    def container(self, service: str) -> str:
        """The container id of a service (also when stopped)."""
        out = self.run("ps", "-a", "-q", service, what=f"compose ps {service}", timeout=60).split()
        if not out:
            raise DeployError(f"no container for service {service}")
        return out[0]

    def health(self) -> dict[str, str]:
        """service -> health (or state when it has no healthcheck)."""
        ids = self.run("ps", "-a", "-q", what="compose ps", timeout=60).split()
        if not ids:
            return {}
        fmt = '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} ' \
              '{{if .State.Health}}{{.State.Health.Status}}{{else}}-{{end}} {{.State.ExitCode}}'
        out = run(["docker", "inspect", "--format", fmt, *ids], "docker inspect", 60)
        states = {}
        for line in out.splitlines():
            service, status, health, code = line.split()
            # An exited container keeps its last health status: report that it exited.
            states[service] = health if health != "-" and status == "running" else f"{status}:{code}"
        return states

    def wait_healthy(self, budget: float) -> float:
        started = time.monotonic()

        def check():
            states = self.health()
            bad = {s: h for s, h in states.items() if h not in ("healthy", "exited:0")}
            if any(h.startswith("exited:") and h != "exited:0" for h in bad.values()):
                raise DeployError(f"a container exited: {bad}")
            return (bool(states) and not bad), bad or states

        try:
            wait_for(check, "every service healthy", budget, interval=5)
        except DeployError:
            log.error("unhealthy deployment; last log lines:\n%s", self.logs_tail())
            raise
        return time.monotonic() - started

    def logs_tail(self, lines: int = 15) -> str:
        out = subprocess.run([*self.compose, "logs", "--no-color", "--tail", str(lines)], capture_output=True,
                             env={**os.environ, **self.env}, timeout=120)
        return out.stdout.decode(errors="replace")[-12000:]

    def tester_env(self) -> dict[str, str]:
        return {"AIRFLOW_ADMIN_PASSWORD": self.env["EOSMIRROR_AIRFLOW_ADMIN_PASSWORD"]}


def dump(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
