"""What the tests share, by role: no test file imports another test file, they import from here (and
from tests/helpers.py, tests/airflow_helpers.py). Fixtures shared by a whole directory are in its
conftest.py, built on these modules."""
