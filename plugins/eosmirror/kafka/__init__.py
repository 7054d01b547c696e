"""Everything that talks to Kafka: clients per role, bounded calls and error translation, offsets,
the mirror's progress, its state topic and its offset-sync store.

Executors import this package (with ``core`` and ``slot``); it never imports the driver, Spark or Airflow.
"""
