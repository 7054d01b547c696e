"""pyspark.daemon for the run server (``spark.python.daemon.module``): it imports the slot code
before it forks Python workers, so each worker starts with it loaded. Spark stops a worker that
idles for a minute and forks a new one for the next task; without this, a run every few minutes
would find cold workers (about 1 s each to import pyspark's worker, confluent_kafka and the slot)."""

import eosmirror.slot.copier  # noqa: F401 - imported before the fork: the point of this module


def main() -> None:
    import pyspark.worker  # noqa: F401 - what each forked worker runs: loaded before the fork too
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":   # Spark starts it as `python -m eosmirror.spark.serverdaemon`
    main()
