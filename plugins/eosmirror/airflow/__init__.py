"""The Airflow edge: DAG factories, operators, task bodies and this project's local Airflow home.

Airflow is imported inside functions, so ``import eosmirror.airflow`` costs nothing; the one exception is
``operators`` (the operator classes), which only the DAG factory and DAG files import.
"""
