"""The matrix's cells (#30): which Airflow patch each line resolves to, and the uv flags that resolve it
as of that patch's release (tools/eosmirror_tools/matrix/cells.py)."""

import datetime as dt

import pytest

from eosmirror_tools.matrix import cells

UTC = dt.timezone.utc


def upload(when: str, yanked: bool = False) -> dict:
    return {"upload_time_iso_8601": when, "yanked": yanked}


# The shape of https://pypi.org/pypi/apache-airflow/json "releases" (3.2.x times as PyPI lists them).
RELEASES = {
    "3.1.8": [upload("2026-03-11T19:27:55.990351Z")],
    "3.2.0": [upload("2026-04-07T12:52:05.226807Z")],
    "3.2.1": [upload("2026-04-22T08:00:18.197345Z")],
    "3.2.2rc3": [upload("2026-05-27T04:05:24.015884Z")],
    "3.2.2": [upload("2026-05-29T05:19:55.297954Z"), upload("2026-05-29T05:20:10.088560Z")],
    "3.2.10": [],                                              # a version with no files is not a release
    "3.3.0b1": [upload("2026-06-17T11:29:26.248077Z")],
    "3.3.1": [upload("2026-08-12T08:10:18.204405Z")],
    "3.3.2": [upload("2026-09-17T08:38:26.148357Z", yanked=True)],
    "3.4.0b1": [upload("2026-10-13T18:24:37.248516Z")],
}


def test_newest_patch_is_the_newest_final_release_of_the_line_with_its_last_upload():
    assert cells.newest_patch(RELEASES, "3.2") == ("3.2.2", dt.datetime(2026, 5, 29, 5, 20, 10, 88560, tzinfo=UTC))
    assert cells.newest_patch(RELEASES, "3.1")[0] == "3.1.8"
    assert cells.newest_patch(RELEASES, "3.3")[0] == "3.3.1"       # 3.3.2 yanked, no pre-releases
    with pytest.raises(SystemExit, match="no apache-airflow 3.4.x release"):
        cells.newest_patch(RELEASES, "3.4")                           # betas only


def test_numeric_order_not_string_order():
    releases = {"3.2.9": [upload("2026-01-01T00:00:00Z")], "3.2.10": [upload("2026-02-01T00:00:00Z")]}
    assert cells.newest_patch(releases, "3.2")[0] == "3.2.10"


def test_a_released_cell_pins_the_patch_and_resolves_as_of_a_day_after_it():
    cell = cells.Cell("3.2", "4.x").released(RELEASES)
    assert cell.name == "airflow-3.2_pyspark-4.x"
    assert cell.requirements() == ["apache-airflow==3.2.2", "pyspark==4.2.0", "pyspark-client==4.2.0",
                                   "apache-airflow-providers-apache-spark>=6"]
    now = dt.datetime(2026, 11, 26, 1, 7, 48, 123, tzinfo=UTC)
    assert cell.uv_flags(now) == [
        "--exclude-newer", "2026-05-30T05:20:10Z",
        "--exclude-newer-package", "pyspark=2026-11-26T01:07:48Z",
        "--exclude-newer-package", "pyspark-client=2026-11-26T01:07:48Z",
        "--exclude-newer-package", "apache-airflow-providers-apache-spark=2026-11-26T01:07:48Z"]


def test_an_unreleased_cell_keeps_the_range_and_no_date():
    cell = cells.Cell("3.1", "3.5")
    assert cell.requirements() == ["apache-airflow>=3.1.0,<3.2", "pyspark==3.5.9",
                                   "apache-airflow-providers-apache-spark>=5.3,<6"]
    assert cell.uv_flags(dt.datetime.now(UTC)) == []
    assert cell.exclude_newer() is None


def test_every_line_has_its_cells_and_select_matches_substrings():
    assert [c.name for c in cells.select("3.2")] == ["airflow-3.2_pyspark-4.x", "airflow-3.2_pyspark-3.5"]
    assert len(cells.select(None)) == len(cells.AIRFLOW_LINES) * len(cells.PYSPARK_LINES)
    with pytest.raises(SystemExit, match="no matrix cell matches"):
        cells.select("2.10")
