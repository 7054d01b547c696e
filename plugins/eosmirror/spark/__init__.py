"""The Spark edge: the spark-submit command, the job's entry point (``job.py``) and the slot runner."""
