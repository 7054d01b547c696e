"""eosmirror DAGs for the mirrors.yaml beside this file (or $EOSMIRROR_CONFIG): the same two lines a team
with its own Airflow writes (docs/install.md). Declarations only; eosmirror.airflow.factory builds them."""

import os
from pathlib import Path

from eosmirror.airflow.factory import mirror_dags

globals().update(mirror_dags(os.environ.get("EOSMIRROR_CONFIG") or Path(__file__).with_name("mirrors.yaml")))
