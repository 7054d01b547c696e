"""An on_lag_alert callable for the lag DAG tests: appends each alert (JSON) to $EOSMIRROR_TEST_ALERTS."""

import json
import os


def record(alert):
    with open(os.environ["EOSMIRROR_TEST_ALERTS"], "a") as out:
        out.write(json.dumps(alert) + "\n")
