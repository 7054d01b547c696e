"""eosmirror: an exactly-once Kafka mirror, run by Apache Airflow as bounded PySpark jobs.

Executors receive only part of this package (core, kafka, slot) as a zip on ``--py-files``; Spark
puts that zip ahead of site-packages, also on the driver. ``extend_path`` lets ``eosmirror`` span both,
so the driver still finds ``eosmirror.spark`` and ``eosmirror.driver`` in the installed copy.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
