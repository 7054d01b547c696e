"""How a mirror-file field is read: the *kinds* (bounds, choices, formats) and their error values.

Each kind's ``parse`` checks and converts one YAML value, ``what`` says what passes (the error text and the
field reference use it). A wrong value raises ``Invalid`` with the path below where it is caught; ``core.config``
turns it into a ConfigError naming the file, mirror and dotted field. Values under secret-looking keys are never
echoed (``core.secrets``)."""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass
from typing import Any, Collection

from eosmirror.core import secrets

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
ENV_REF_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
POLICIES = ("identity", "prefix")
DELIVERIES = ("exactly_once", "at_least_once")
TRUNCATION_POLICIES = ("fail", "skip_to_log_start")
TARGET_GUARDS = ("report", "refuse")
LOCAL_CLUSTERS = ("source", "target")
# A Kafka principal as ACLs and super.users name it: <type>:<name> (KafkaPrincipal.toString), e.g. User:mirror,
# User:CN=mirror,OU=ops; a wildcard name (User:*) is no one principal.
PRINCIPAL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*:(?!\*$)\S(.*\S)?$")

# Airflow's cron presets (airflow.sdk CronMixin maps them before croniter sees them).
CRON_PRESETS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@weekly": "0 0 * * 0",
                "@monthly": "0 0 1 * *", "@quarterly": "0 0 1 */3 *", "@yearly": "0 0 1 1 *"}


class Invalid(Exception):
    """A value is wrong. ``path`` is relative to where it is caught; each level prefixes its field."""

    def __init__(self, problem: str, *path: str):
        super().__init__(problem)
        self.problem, self.path = problem, tuple(path)

    def under(self, *prefix: str) -> "Invalid":
        return Invalid(self.problem, *prefix, *self.path)


def _yaml_word(value: Any) -> str:
    return "null" if value is None else str(value).lower()


def suggestion(word: Any, known: Collection[str]) -> str:
    close = difflib.get_close_matches(str(word), list(known), n=1) if isinstance(word, str) else []
    return f" (did you mean `{close[0]}`?)" if close else ""


def bad(value: Any, allowed: str, key: str | None = None, choices: Collection[str] = ()) -> Invalid:
    """``value`` is not allowed. ``key`` (a settings entry) extends the field path and decides redaction."""
    shown = _yaml_word(value) if value is None or isinstance(value, bool) else repr(secrets.redact(value, key))
    return Invalid(f"{shown} is not allowed; expected {allowed}{suggestion(value, choices)}",
                    *((key,) if key is not None else ()))


@dataclass(frozen=True, kw_only=True)
class Kind:
    """How one field is read from YAML: ``parse`` checks and converts, ``what`` says what passes."""

    allowed: str = ""   # replaces the generated description when the field needs its own words

    def describe(self) -> str:
        raise NotImplementedError

    def what(self) -> str:
        return self.allowed or self.describe()

    def parse(self, value: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Int(Kind):
    low: int
    high: int
    optional: bool = False

    def describe(self) -> str:
        return f"an integer from {self.low} to {self.high}" + (" or null" if self.optional else "")

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not self.low <= value <= self.high:
            raise bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class Seconds(Kind):
    low: float
    high: float
    optional: bool = False

    def describe(self) -> str:
        return f"a number of seconds from {float(self.low)} to {float(self.high)}" + (" or null" if self.optional else "")

    def parse(self, value: Any) -> float | None:
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.low <= value <= self.high:
            raise bad(value, self.what())
        return float(value)


@dataclass(frozen=True, kw_only=True)
class Choice(Kind):
    choices: tuple[str, ...]

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise bad(value, self.what(), choices=self.choices)
        return value


@dataclass(frozen=True, kw_only=True)
class Name(Kind):
    optional: bool = False

    def describe(self) -> str:
        return ("a name of letters, digits, '.', '_' or '-' (at most 100 characters)"
                + (" or null" if self.optional else ""))

    def parse(self, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or not NAME_RE.match(value):
            raise bad(value, self.what())
        return value


DOTTED_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


@dataclass(frozen=True, kw_only=True)
class Dotted(Kind):
    """A dotted Python name ``package.module.function``; only its form is checked here (importing
    user code at config load would run it in every DAG parse)."""

    def describe(self) -> str:
        return "a dotted Python name such as `mypackage.alerts.on_lag` or null"

    def parse(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not DOTTED_NAME_RE.match(value):
            raise bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class Text(Kind):
    def describe(self) -> str:
        return "a non-empty string"

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class Separator(Kind):
    def describe(self) -> str:
        return "1 to 5 of the characters a topic name may hold (letters, digits, '.', '_', '-')"

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,5}", value):
            raise bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class Flag(Kind):
    def describe(self) -> str:
        return "true or false"

    def parse(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class Strings(Kind):
    noun: str = "strings"
    refused: tuple[str, ...] = ()
    refused_why: str = ""

    def describe(self) -> str:
        return f"a list of {self.noun}"

    def parse(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(value, self.what())
        for item in value:
            if item in self.refused:
                raise bad(item, f"a topic config other than {', '.join(self.refused)} ({self.refused_why})")
        return tuple(value)


@dataclass(frozen=True, kw_only=True)
class Principals(Kind):
    def describe(self) -> str:
        return "a list of Kafka principals `<type>:<name>` (e.g. `User:CN=mirror`; no wildcard `User:*`)"

    def parse(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(value, self.what())
        for item in value:
            if not PRINCIPAL_RE.match(item):
                raise bad(item, self.what())
        return tuple(dict.fromkeys(value))


@dataclass(frozen=True, kw_only=True)
class Patterns(Kind):
    required: bool
    noun: str = "topic"

    def describe(self) -> str:
        return ("a non-empty list of regular expressions" if self.required
                else "a list of regular expressions") + f" (each must match a whole {self.noun} name)"

    def parse(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or (self.required and not value) or not all(isinstance(v, str) for v in value):
            raise bad(value, self.what())
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                # As written (one level of escaping), not a repr that doubles every backslash.
                raise Invalid(f"`{pattern}` is not allowed; expected a valid regular expression ({exc})") from None
        return tuple(value)


@dataclass(frozen=True, kw_only=True)
class Time(Kind):
    """A timestamp, made timezone-aware (UTC when the file gives no zone); ``words`` pass unchanged."""

    words: tuple[str, ...] = ()

    def describe(self) -> str:
        return "an ISO-8601 date or timestamp"

    def parse(self, value: Any) -> str | dt.datetime:
        if isinstance(value, str) and value in self.words:
            return value
        parsed = None
        if isinstance(value, dt.datetime):
            parsed = value
        elif isinstance(value, dt.date):   # YAML reads an unquoted 2026-01-31 as a date
            parsed = dt.datetime(value.year, value.month, value.day)
        elif isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                pass
        if parsed is None:
            raise bad(value, self.what(), choices=self.words)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


@dataclass(frozen=True, kw_only=True)
class Cron(Kind):
    """What airflow.sdk.CronDataIntervalTimetable accepts: a preset, or 5 cron fields croniter can run."""

    def describe(self) -> str:
        return (f"a 5-field cron expression (for example '*/15 * * * *'), one of {', '.join(CRON_PRESETS)}, "
                f"or null (manual runs only)")

    def parse(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise bad(value, self.what())
        expression = CRON_PRESETS.get(value.strip(), value)
        if len(expression.split()) != 5:   # croniter would also take 6 or 7 fields; Airflow does not
            raise bad(value, self.what(), choices=CRON_PRESETS)
        problem = _cron_problem(expression)
        if problem:
            raise bad(value, f"{self.what()}; {problem}")
        return value


def schedule_interval_seconds(schedule: str) -> float:
    """The longest gap between two fires of a cron schedule over its next 50 fires (a follow bound
    must outlast the longest interval, not the average one)."""
    from croniter import croniter

    it = croniter(CRON_PRESETS.get(schedule.strip(), schedule), dt.datetime(2026, 1, 1))
    fires = [it.get_next(dt.datetime) for _ in range(51)]
    return float(max((b - a).total_seconds() for a, b in zip(fires, fires[1:])))


def _cron_problem(expression: str) -> str | None:
    # croniter is what Airflow's cron timetables run on (an Airflow dependency, so always installed).
    from croniter import CroniterBadCronError, CroniterBadDateError, croniter

    try:
        croniter(expression, dt.datetime(2026, 1, 1)).get_next(dt.datetime)
    except CroniterBadCronError as exc:
        return f"croniter refuses it: {exc}"
    except CroniterBadDateError:
        return "it never fires (no such date, e.g. February 30)"
    return None


