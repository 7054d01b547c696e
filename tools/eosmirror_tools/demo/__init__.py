"""``make demo`` (``eosmirror demo``): the mirror on the embedded clusters, run through Airflow (run.py),
on the demo data set (data.py). The product loads this package by name and calls ``main``."""

from eosmirror_tools.demo.run import main

__all__ = ["main"]
