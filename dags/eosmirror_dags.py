"""eosmirror DAGs: one per mirror in mirrors.yaml (eosmirror__<name>) and eosmirror_fence.

Declarations only; the tasks live in the eosmirror package. Parsing reads mirrors.yaml
(or $EOSMIRROR_CONFIG) and touches no broker, connection or Variable.
"""

import os

from eosmirror.airflow_dags import build_all

globals().update(build_all(os.environ.get("EOSMIRROR_CONFIG")))
