"""Monitoring shipped with the wheel (#24): Prometheus alert rules over /eosmirror/metrics (alerts.yml).

``rules_path()`` finds the file in an installed wheel or a checkout, e.g. to copy it beside a
Prometheus configuration: ``python -c "from eosmirror.monitoring import rules_path; print(rules_path())"``.
"""

from pathlib import Path


def rules_path() -> Path:
    return Path(__file__).with_name("alerts.yml")
