"""Resolve a mirror's cluster references to librdkafka settings.

Resolution order for ``connection: <id>``:
  1. the resolved-clusters file named by ``EOSMIRROR_CLUSTERS_FILE`` (a 0600 JSON file the Airflow
     task writes for the Spark job and deletes afterwards: secrets never travel on a command line);
  2. an ``AIRFLOW_CONN_<ID>`` environment variable in Airflow's JSON form;
  3. Airflow's own connection lookup (imported lazily; needs a configured Airflow).
The connection's ``extra`` holds the librdkafka settings (the Kafka provider's ``kafka`` type).

``local: <name>`` (the embedded clusters of the demo and the tests) reads the settings that
``eosmirror local up`` recorded in ``<EOSMIRROR_HOME>/local/clusters.json``; the run path never
imports the launcher.

Inline ``config:`` values of the form ``${NAME}`` are read from the environment at use time.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

from eosmirror.core.config import ENV_REF_RE, ClusterRef
from eosmirror.core.errors import ConfigError

CLUSTERS_FILE_ENV = "EOSMIRROR_CLUSTERS_FILE"


def _expand(settings: dict[str, Any], where: str) -> dict[str, Any]:
    out = {}
    for key, value in settings.items():
        if isinstance(value, str):
            match = ENV_REF_RE.match(value)
            if match:
                name = match.group(1)
                if name not in os.environ:
                    raise ConfigError(f"{where}: `{key}` refers to ${{{name}}}, which is not set in the environment")
                value = os.environ[name]
        out[key] = value
    return out


_this_run = threading.local()


def use_clusters_file(path: str | None) -> None:
    """Runs of this thread read resolved connections from ``path`` instead of $EOSMIRROR_CLUSTERS_FILE:
    the run server's run for a client (an Airflow copy task) that was handed one. None: the environment's."""
    _this_run.clusters_file = path


def _from_clusters_file(conn_id: str) -> dict[str, Any] | None:
    path = getattr(_this_run, "clusters_file", None) or os.environ.get(CLUSTERS_FILE_ENV)
    if not path:
        return None
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except OSError:
        raise ConfigError(f"{CLUSTERS_FILE_ENV}={path} does not exist") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"{path} is readable by others (mode {stat.filemode(mode)}); it holds secrets and "
                          f"must be 0600")
    clusters = json.loads(file.read_text())
    found = clusters.get(conn_id)
    return dict(found) if found is not None else None


def _extra_to_settings(extra: Any, conn_id: str) -> dict[str, Any]:
    if isinstance(extra, str):
        try:
            extra = json.loads(extra) if extra.strip() else {}
        except json.JSONDecodeError:
            raise ConfigError(f"connection {conn_id!r}: its extra is not JSON; it must hold librdkafka settings "
                              f"such as {{\"bootstrap.servers\": \"host:9092\"}}") from None
    if not isinstance(extra, dict) or "bootstrap.servers" not in extra:
        raise ConfigError(f"connection {conn_id!r}: its extra must be a JSON object of librdkafka settings "
                          f"including bootstrap.servers")
    return dict(extra)


def _from_env_connection(conn_id: str) -> dict[str, Any] | None:
    raw = os.environ.get(f"AIRFLOW_CONN_{conn_id.upper().replace('-', '_').replace('.', '_')}")
    if not raw:
        return None
    try:
        document = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError(f"AIRFLOW_CONN_{conn_id.upper()} must be Airflow's JSON connection form with an "
                          f"`extra` of librdkafka settings") from None
    return _extra_to_settings(document.get("extra", {}), conn_id)


def _from_airflow(conn_id: str) -> dict[str, Any]:
    try:
        from airflow.sdk import BaseHook
    except ImportError:  # pragma: no cover - Airflow is a dependency, but executors may lack it
        raise ConfigError(f"connection {conn_id!r} cannot be resolved: Airflow is not importable here") from None
    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - Airflow raises several types for "not found"
        raise ConfigError(f"connection {conn_id!r} is not defined in Airflow ({type(exc).__name__}); create it "
                          f"with type `kafka` and librdkafka settings in its extra") from None
    return _extra_to_settings(conn.extra_dejson, conn_id)


def resolve(ref: ClusterRef, where: str) -> dict[str, Any]:
    """The librdkafka settings of a cluster reference, secrets included (never log the result)."""
    if ref.local:
        return _local_cluster(ref.local, where)
    if ref.config is not None:
        return _expand(dict(ref.config), where)
    conn_id = ref.connection
    assert conn_id
    for lookup in (_from_clusters_file, _from_env_connection):
        found = lookup(conn_id)
        if found is not None:
            return dict(found)
    return _from_airflow(conn_id)


def local_clusters_file() -> Path:
    from eosmirror import paths  # here: eosmirror.paths is not in the executors' zip, only loaders need it

    return paths.home() / "local" / "clusters.json"


def record_local_cluster(name: str, settings: dict[str, Any]) -> Path:
    """Called by the local launcher when it starts a cluster (0600: a SASL cluster's settings hold passwords)."""
    path = local_clusters_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(path.read_text()) if path.exists() else {}
    known[name] = settings
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    write_clusters_file(tmp, known)
    tmp.replace(path)
    return path


def _local_cluster(name: str, where: str) -> dict[str, Any]:
    path = local_clusters_file()
    known = json.loads(path.read_text()) if path.exists() else {}
    if name not in known:
        raise ConfigError(f"{where}: the local cluster {name!r} was never started on this machine (nothing in "
                          f"{path}). `local:` names an embedded development cluster: start it in a checkout of "
                          f"eosmirror with `eosmirror local up` (an installed eosmirror finds a checkout's clusters "
                          f"with EOSMIRROR_HOME=<checkout>/var), or point the mirror at a real cluster with "
                          f"`connection: <airflow connection id>`")
    return dict(known[name])


def write_clusters_file(path: Path, clusters: dict[str, dict[str, Any]]) -> Path:
    """Write resolved cluster settings for a child process: created 0600 before any byte is written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(clusters, out)
    return path
