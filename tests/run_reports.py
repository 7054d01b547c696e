"""Run reports for tests: a literal report of the shape every release before the typed report wrote
(no ``report_version``), and a builder of small typed reports.

``OLD_REPORT`` is a real one: a 3-partition, 2-slot run of the code before core/runreport.py, its
JSON copied verbatim (topic and mirror names shortened, the host name replaced).
"""

import json
from typing import Any

from eosmirror.core.runreport import RunReport

OLD_REPORT: dict[str, Any] = json.loads("""
{
  "bytes": 75,
  "delivery": "exactly_once",
  "dry_run": false,
  "errors": [],
  "fenced_transactional_ids": ["eosmirror.m1.0", "eosmirror.m1.1"],
  "finished_at": "2026-11-28T00:36:00.550076+00:00",
  "follow_until": null,
  "generation": 1,
  "generation_changed": true,
  "mb_per_second": 0.0,
  "mirror": "m1",
  "plan": [
    {
      "available": 5,
      "end": 5,
      "lost": 0,
      "origin": "start_from",
      "partition": 0,
      "pending": 5,
      "slot": 0,
      "source_topic": "orders",
      "start": 0,
      "target_topic": "orders"
    },
    {
      "available": 5,
      "end": 5,
      "lost": 0,
      "origin": "start_from",
      "partition": 2,
      "pending": 5,
      "slot": 0,
      "source_topic": "orders",
      "start": 0,
      "target_topic": "orders"
    },
    {
      "available": 5,
      "end": 5,
      "lost": 0,
      "origin": "start_from",
      "partition": 1,
      "pending": 5,
      "slot": 1,
      "source_topic": "orders",
      "start": 0,
      "target_topic": "orders"
    }
  ],
  "records": 15,
  "records_per_second": 25.4,
  "run_id": "e9ef5c88ae61",
  "seconds": 3.258,
  "slot_seconds_max": 0.591,
  "slots": [
    {
      "aborts": 0,
      "attempt_pid": 29441,
      "bytes": 50,
      "copy_seconds": 0.0,
      "error": null,
      "error_type": null,
      "executor": {
        "eosmirror": "/tmp/oldreport/plugins/eosmirror/__init__.py",
        "host": "worker-1",
        "python": "/work/wt/report/.venv/bin/python"
      },
      "follow_end": null,
      "follow_seconds": 0.0,
      "max_transaction_seconds": 0.101,
      "partitions": [
        {
          "bytes": 25,
          "complete": true,
          "end": 5,
          "partition": 0,
          "planned_end": 5,
          "record_age_ms": 4240,
          "records": 5,
          "source_topic": "orders",
          "start": 0,
          "target_from": 0,
          "target_to": 5,
          "target_topic": "orders"
        },
        {
          "bytes": 25,
          "complete": true,
          "end": 5,
          "partition": 2,
          "planned_end": 5,
          "record_age_ms": 4240,
          "records": 5,
          "source_topic": "orders",
          "start": 0,
          "target_from": 0,
          "target_to": 5,
          "target_topic": "orders"
        }
      ],
      "records": 10,
      "seconds": 0.591,
      "slot": 0,
      "source_commit_error": null,
      "status": "committed",
      "transaction_seconds": 0.101,
      "transactional_id": "eosmirror.m1.0",
      "transactions": 1
    },
    {
      "aborts": 0,
      "attempt_pid": 29441,
      "bytes": 25,
      "copy_seconds": 0.0,
      "error": null,
      "error_type": null,
      "executor": {
        "eosmirror": "/tmp/oldreport/plugins/eosmirror/__init__.py",
        "host": "worker-1",
        "python": "/work/wt/report/.venv/bin/python"
      },
      "follow_end": null,
      "follow_seconds": 0.0,
      "max_transaction_seconds": 0.135,
      "partitions": [
        {
          "bytes": 25,
          "complete": true,
          "end": 5,
          "partition": 1,
          "planned_end": 5,
          "record_age_ms": 4181,
          "records": 5,
          "source_topic": "orders",
          "start": 0,
          "target_from": 0,
          "target_to": 5,
          "target_topic": "orders"
        }
      ],
      "records": 5,
      "seconds": 0.53,
      "slot": 1,
      "source_commit_error": null,
      "status": "committed",
      "transaction_seconds": 0.135,
      "transactional_id": "eosmirror.m1.1",
      "transactions": 1
    }
  ],
  "source": "source cluster (local cluster 'source', 127.0.0.1:33092)",
  "started_at": "2026-11-28T00:35:57.291889+00:00",
  "status": "ok",
  "steps": {
    "generation": 1.214,
    "observe and plan": 1.086,
    "process start": 18.96,
    "resolve": 0.04,
    "slots": 0.598,
    "snapshot": 0.173,
    "target sync": 0.147
  },
  "target": "target cluster (local cluster 'target', 127.0.0.1:43092)",
  "target_bootstrap": "127.0.0.1:43092",
  "topic_sync": "created 1 target topic(s): orders",
  "topics": [{"partitions": 3, "source": "orders", "target": "orders"}],
  "until": null
}
""")

# The hand-written slot results of that code (driver/run.py, spark/runner.py, spark/server.py).
OLD_PLACEHOLDER_SLOTS = [
    {"slot": 0, "transactional_id": "eosmirror.m1.0", "status": "dry-run", "records": 0, "bytes": 0,
     "partitions": [], "error": None},
    {"slot": 1, "transactional_id": "eosmirror.m1.1", "status": "nothing-to-do", "records": 0, "bytes": 0,
     "partitions": [], "error": None},
    {"slot": 2, "transactional_id": "eosmirror.m1.2", "status": "failed", "records": 0, "bytes": 0,
     "partitions": [], "error": "Spark task failed: boom", "error_type": "SparkTaskFailed"},
]

# What the job printed when a run stopped before its slots (spark/job.py ``execute``).
OLD_FAILURE = {"mirror": "m1", "status": "failed", "error": "no such mirror", "error_type": "ConfigError",
               "exit_code": 2}


def report(**fields: Any) -> RunReport:
    """A small typed report: the old report's run with ``fields`` (JSON-shaped) replacing its keys."""
    return RunReport.from_dict({**OLD_REPORT, "slots": [], "plan": [], **fields})
