"""The matrix cells: which Airflow and PySpark lines, and how uv resolves each one.

Airflow: the newest patch of each minor line the wheel supports (pyproject: apache-airflow>=3.1), taken
from PyPI's release list at matrix time. Each cell resolves as Airflow's constraint file for that patch
would have (the files are on GitHub, which our build machines cannot reach): uv's ``--exclude-newer`` at
one day after the patch's upload to PyPI, so Airflow's own dependency tree (pydantic, fastapi, cadwyn,
starlette, svcs, sqlalchemy ...) and everything else come out as they were when that Airflow was released
and tested. Resolved with today's newest instead, Airflow 3.2.2's in-process execution API fails to build
(pydantic 2.14 / fastapi 0.165 / cadwyn 9: "TITerminalStatePayload needs a discriminator field").

The Spark side is what the team's Spark cluster dictates, not Airflow's release: pyspark, pyspark-client
and the Spark provider (providers are released and upgraded apart from Airflow) are exempt from that date
(``--exclude-newer-package`` at the matrix's own start), so every Airflow line is tried with the same
newest 3.5 and the newest 4.x that has a matching pyspark-client. The Spark provider 6.x installs
pyspark-client, which writes the same `pyspark` import package: the two must be one version, so the 4.x
cell pins both; the 3.5 cell keeps the provider on 5.x, which has no pyspark-client.
"""

import datetime as dt
import re
from dataclasses import dataclass, replace

AIRFLOW_LINES = ("3.1", "3.2", "3.3")
PYSPARK_LINES = {   # 4.x first: its build is in uv's cache already (the locked version)
    "4.x": ("pyspark==4.2.0", "pyspark-client==4.2.0", "apache-airflow-providers-apache-spark>=6"),
    "3.5": ("pyspark==3.5.9", "apache-airflow-providers-apache-spark>=5.3,<6"),
}
# Resolved as of the matrix run, not of the Airflow release (see the module docstring).
SPARK_SIDE = ("pyspark", "pyspark-client", "apache-airflow-providers-apache-spark")
# After the newest patch's upload: room for its companion uploads (apache-airflow-core, -task-sdk go out
# in the same release run), still before the dependency releases that came later. Airflow generates its
# constraints at RC time, days earlier, so one day after the final upload is already the later bound.
AFTER_RELEASE = dt.timedelta(days=1)
FINAL = re.compile(r"^\d+\.\d+\.\d+$")    # no rc/b/dev/post: what `pip install apache-airflow` picks


@dataclass(frozen=True)
class Cell:
    airflow: str                          # the minor line, "3.2"
    pyspark: str                          # a PYSPARK_LINES key
    airflow_version: str | None = None    # its newest patch, "3.2.2" (set by released())
    uploaded: dt.datetime | None = None   # when that patch was uploaded to PyPI

    @property
    def name(self) -> str:
        return f"airflow-{self.airflow}_pyspark-{self.pyspark}"

    def requirements(self) -> list[str]:
        major, minor = self.airflow.split(".")
        airflow = (f"apache-airflow=={self.airflow_version}" if self.airflow_version
                   else f"apache-airflow>={major}.{minor}.0,<{major}.{int(minor) + 1}")
        return [airflow, *PYSPARK_LINES[self.pyspark]]

    def exclude_newer(self) -> dt.datetime | None:
        return self.uploaded + AFTER_RELEASE if self.uploaded else None

    def uv_flags(self, now: dt.datetime) -> list[str]:
        """``uv pip install`` options: everything as of the Airflow release, the Spark side as of ``now``."""
        if not self.uploaded:
            return []
        flags = ["--exclude-newer", iso(self.exclude_newer())]
        for package in SPARK_SIDE:
            flags += ["--exclude-newer-package", f"{package}={iso(now)}"]
        return flags

    def released(self, releases: dict[str, list[dict]]) -> "Cell":
        version, uploaded = newest_patch(releases, self.airflow)
        return replace(self, airflow_version=version, uploaded=uploaded)


def iso(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def newest_patch(releases: dict[str, list[dict]], line: str) -> tuple[str, dt.datetime]:
    """``releases``: the "releases" of PyPI's https://pypi.org/pypi/apache-airflow/json. The newest final,
    not yanked patch of ``line`` ("3.2") and the upload time of its last file."""
    candidates = []
    for version, files in releases.items():
        files = [f for f in files if not f.get("yanked")]
        if FINAL.match(version) and version.rsplit(".", 1)[0] == line and files:
            candidates.append((tuple(int(p) for p in version.split(".")), version, files))
    if not candidates:
        raise SystemExit(f"PyPI lists no apache-airflow {line}.x release")
    _, version, files = max(candidates)
    uploaded = max(dt.datetime.fromisoformat(f["upload_time_iso_8601"].replace("Z", "+00:00")) for f in files)
    return version, uploaded


def all_cells() -> list[Cell]:
    return [Cell(a, p) for p in PYSPARK_LINES for a in AIRFLOW_LINES]


def select(names: str | None) -> list[Cell]:
    """``names``: comma-separated cell names or substrings of them (``3.1``, ``pyspark-3.5``); all if empty."""
    cells = all_cells()
    if not names:
        return cells
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    chosen = [c for c in cells if any(w in c.name for w in wanted)]
    if not chosen:
        raise SystemExit(f"no matrix cell matches {names!r}; cells: {', '.join(c.name for c in cells)}")
    return chosen
