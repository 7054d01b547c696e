"""Container healthchecks that stay cheap: no Airflow import (a few seconds of CPU each time on a
small host), only the standard library, psycopg2 or celery.

  healthcheck.py http <url>        the URL answers 2xx
  healthcheck.py job <JobType>     this host's Airflow job (SchedulerJob, DagProcessorJob,
                                   TriggererJob) is running and heartbeated in the last 60 s
  healthcheck.py celery            this host's Celery worker answers a ping through the broker
"""

import os
import socket
import sys
import urllib.request

HEARTBEAT_SECONDS = 60


def http(url: str) -> None:
    with urllib.request.urlopen(url, timeout=5) as response:
        if not 200 <= response.status < 300:
            sys.exit(f"{url}: HTTP {response.status}")


def job(job_type: str) -> None:
    import psycopg2

    dsn = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].replace("postgresql+psycopg2://", "postgresql://")
    with psycopg2.connect(dsn, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM job WHERE job_type = %s AND state = 'running' AND hostname LIKE %s "
                    "AND latest_heartbeat > now() - make_interval(secs => %s)",
                    (job_type, socket.gethostname() + "%", HEARTBEAT_SECONDS))
        if cur.fetchone()[0] < 1:
            sys.exit(f"no running {job_type} of {socket.gethostname()} heartbeated in {HEARTBEAT_SECONDS} s")


def celery() -> None:
    from celery import Celery

    app = Celery(broker=os.environ["AIRFLOW__CELERY__BROKER_URL"])
    name = f"celery@{socket.gethostname()}"
    if not app.control.ping(destination=[name], timeout=5):
        sys.exit(f"{name} did not answer a ping")


if __name__ == "__main__":
    checks = {"http": http, "job": job, "celery": celery}
    checks[sys.argv[1]](*sys.argv[2:])
