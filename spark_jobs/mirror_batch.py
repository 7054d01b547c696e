"""spark-submit entry point of one bounded mirror run.

    spark-submit spark_jobs/mirror_batch.py --mirror demo [--until 2026-11-21T10:00:00Z] \
        [--max-records-per-partition N] [--max-bytes-per-slot N] [--topics a,b] [--dry-run] \
        [--result-json PATH] [--config dags/mirrors.yaml]

Parses arguments and calls the core (eosmirror.spark.job); exit code 0 only if every slot committed
or had nothing to do, 1 on failure, 2 on bad configuration or arguments.
"""

import sys

from eosmirror.spark.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
