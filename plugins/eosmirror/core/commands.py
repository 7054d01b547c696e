"""Each disaster-recovery command declared once: its options with defaults, ranges and help. The CLI
flags (clidr.py), the DAG Params (airflow/drdags.py) and the operator (airflow/operators.py) are all
made from these declarations, and every value, whichever way it came, is checked by ``values`` here:
a value out of range is a ConfigError naming the option and the fix (exit 2, a DAG run failed without
retries), before anything is written. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from eosmirror.core.errors import ConfigError


@dataclass(frozen=True)
class Option:
    name: str                          # the Param's name; the flag is --<name with dashes>
    default: Any
    help: str
    title: str
    minimum: float | None = None       # inclusive
    maximum: float | None = None       # inclusive
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def kind(self) -> type:
        return bool if isinstance(self.default, bool) else str if isinstance(self.default, str) else float

    def check(self, value: Any, command: str, mirror: str) -> Any:
        """``value`` converted to this option's kind, or a ConfigError naming the option and its range."""
        if value is None or value == "":
            return self.default
        where = f"{command} {mirror}: {self.flag} (DAG Param {self.name})"
        if self.kind is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false"):
                    raise ConfigError(f"{where}: expected true or false, given {value!r}")
                return value.lower() == "true"
            return bool(value)
        if self.kind is str:
            if self.choices and value not in self.choices:
                raise ConfigError(f"{where}: {value!r} is not one of {', '.join(self.choices)}")
            return str(value)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number of seconds, given {value!r}") from None
        if (self.minimum is not None and number < self.minimum) or (self.maximum is not None and number > self.maximum):
            raise ConfigError(f"{where}: {number:g} is out of range; give a value in [{self.minimum:g}, "
                              f"{self.maximum:g}] (default {self.default:g})")
        return number


@dataclass(frozen=True)
class CommandSpec:
    name: str
    help: str
    options: tuple[Option, ...]

    def defaults(self) -> dict[str, Any]:
        return {o.name: o.default for o in self.options}

    def values(self, given: Mapping[str, Any], mirror: str) -> dict[str, Any]:
        """Every option's checked value from ``given`` (parsed flags or a run's Params; missing: default)."""
        return {o.name: o.check(given.get(o.name), self.name, mirror) for o in self.options}


SWITCHOVER = CommandSpec("switchover", "planned switchover: wait until the source is quiet, final run, fence, group "
                                       "sync, verify; ends with 'zero loss: safe to switch' only when every step held",
                         (Option("wait_seconds", 300.0, "how long to wait for the source to be quiet", "Wait at most (s)",
                                 2, 86_400),
                          Option("quiet_seconds", 10.0, "how long no new committed record may arrive on the source",
                                 "Quiet for (s)", 1, 3600),
                          Option("cancel", False, "give up a switchover stopped after switching-over: back to "
                                                  "mirroring (its runs continue from the committed progress)",
                                 "Cancel the stopped switchover")))
PROMOTE = CommandSpec("promote", "unplanned promotion: fence, record what the target holds, report what may be lost "
                                 "(works while the source is unreachable)",
                      (Option("source_seconds", 10.0, "the longest any step waits on the source (it may be gone)",
                              "Wait on the source (s)", 1, 300),))
REVERSE = CommandSpec("reverse", "after a promotion or switchover, once the old source answers: report the divergence "
                                 "and prepare the reverse mirror <mirror>__reverse from that point",
                      (Option("divergence", "report", "report: only report the old source's records that never "
                                                      "reached the target; copy: also copy them once to side topics "
                                                      "<topic>.diverged.<mirror>", "Divergence",
                              choices=("report", "copy")),
                       Option("source_seconds", 10.0, "how long to wait for the old source to answer",
                              "Wait on the old source (s)", 1, 300),
                       Option("settle_seconds", 120.0, "how long to wait, once, for open transactions on the old "
                                                       "source to end", "Settle for (s)", 1, 3600)))
RESUME = CommandSpec("resume", "after the switch back (`eosmirror switchover <mirror>__reverse`): the forward mirror "
                               "continues after the reverse mirror's last copy; the reverse mirror is retired",
                     (Option("check_seconds", 3.0, "how long the new primary's ends must stay still before the "
                                                   "progress moves", "Check for (s)", 0.1, 600),
                      Option("accept_records_after_switch_back", False, "resume although the new primary received "
                                                                        "records after the switch back (they stay "
                                                                        "there, not on the old source, and are named "
                                                                        "in the report)",
                             "Accept records written to the new primary after the switch back")))

COMMANDS = {spec.name: spec for spec in (SWITCHOVER, PROMOTE, REVERSE, RESUME)}
