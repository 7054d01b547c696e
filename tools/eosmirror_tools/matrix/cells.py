"""The matrix cells: which Airflow and PySpark lines, and the requirements that select them.

Airflow: the newest patch of each minor line the wheel supports (pyproject: apache-airflow>=3.1), chosen
by uv's resolver from a range. PySpark: the newest 3.5 and the newest 4.x that has a matching
pyspark-client (the Spark provider 6.x installs pyspark-client, which writes the same `pyspark` import
package: the two must be one version, so the 4.x cell pins both; the 3.5 cell keeps the provider on 5.x,
which has no pyspark-client).
"""

from dataclasses import dataclass

AIRFLOW_LINES = ("3.1", "3.2", "3.3")
PYSPARK_LINES = {   # 4.x first: its build is in uv's cache already (the locked version)
    "4.x": ("pyspark==4.2.0", "pyspark-client==4.2.0", "apache-airflow-providers-apache-spark>=6"),
    "3.5": ("pyspark==3.5.9", "apache-airflow-providers-apache-spark>=5.3,<6"),
}


@dataclass(frozen=True)
class Cell:
    airflow: str
    pyspark: str

    @property
    def name(self) -> str:
        return f"airflow-{self.airflow}_pyspark-{self.pyspark}"

    def requirements(self) -> list[str]:
        major, minor = self.airflow.split(".")
        return [f"apache-airflow>={major}.{minor}.0,<{major}.{int(minor) + 1}", *PYSPARK_LINES[self.pyspark]]


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
