"""The Airflow edge: DAG factories, task bodies and this project's local Airflow home.

Airflow itself is imported inside functions only, so ``import eosmirror.airflow`` costs nothing.
"""
