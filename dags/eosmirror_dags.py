"""eosmirror DAGs: one per mirror in mirrors.yaml (eosmirror__<name>) and eosmirror_fence.

Declarations only; the tasks live in the eosmirror package. Parsing reads the mirrors.yaml beside
this file (or $EOSMIRROR_CONFIG) and touches no broker, connection or Variable.
"""

import os
from pathlib import Path

from eosmirror.airflow.dags import build_all

globals().update(build_all(os.environ.get("EOSMIRROR_CONFIG") or str(Path(__file__).with_name("mirrors.yaml"))))
