"""``get_provider_info`` for the wheel's ``apache_airflow_provider`` entry point (#24): `airflow providers
list` shows eosmirror and its version. It declares no connection type: the clusters' `kafka` connections
stay the Kafka provider's, and the Spark connection the Spark provider's. The plugin is registered by
its own ``airflow.plugins`` entry point, not listed here (listing it too registers it twice).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

PACKAGE = "eosmirror"


def get_provider_info() -> dict[str, Any]:
    try:
        installed = version(PACKAGE)
    except PackageNotFoundError:    # a checkout on sys.path without the package installed
        installed = "0+unknown"
    return {
        "package-name": PACKAGE,
        "name": "eosmirror",
        "description": ("Exactly-once Kafka-to-Kafka mirror: bounded PySpark micro-batches scheduled by Airflow; "
                        "its DAGs come from a mirrors file, its lag page and metrics from its plugin"),
        "versions": [installed],
    }
