"""Airflow version differences, in one place (#30): the rest of eosmirror imports these, never ``airflow``
version checks of its own. Supported: Airflow >= 3.1 (pyproject.toml), checked by `make matrix`.

Imports are inside the functions: importing eosmirror needs no Airflow (tests/unit/test_code_shape.py).
"""

from typing import Any


def fail_exception() -> type[Exception]:
    """``AirflowFailException`` (fail now, no retry): airflow.sdk.exceptions from 3.2, airflow.exceptions in 3.1."""
    try:
        from airflow.sdk.exceptions import AirflowFailException
    except ImportError:   # Airflow 3.1: Task SDK 1.1 has no AirflowFailException yet
        from airflow.exceptions import AirflowFailException as Airflow31FailException
        fail_31: type[Exception] = Airflow31FailException   # Any to mypy: a module __getattr__ in Airflow >= 3.2
        return fail_31
    return AirflowFailException


def cron_data_interval_timetable(cron: str, timezone: str = "UTC") -> Any:
    """The cron timetable whose runs cover [previous tick, tick): airflow.sdk from 3.2, airflow.timetables in 3.1."""
    try:
        from airflow.sdk import CronDataIntervalTimetable
    except ImportError:   # Airflow 3.1: Task SDK 1.1 does not export the timetables yet
        from airflow.timetables.interval import CronDataIntervalTimetable as Airflow31CronTimetable
        return Airflow31CronTimetable(cron, timezone=timezone)
    return CronDataIntervalTimetable(cron, timezone=timezone)
