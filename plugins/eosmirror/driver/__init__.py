"""One run of one mirror on the driver: topics, permissions, observation, planning, fencing, verify.

The run itself (``MirrorRun``) is re-exported here: ``from eosmirror import driver`` then
``driver.MirrorRun(...)``.
"""

from eosmirror.driver.run import MirrorRun, Prepared, RunOptions, build_report, run_in_process
from eosmirror.kafka.cluster import cluster_label

__all__ = ["MirrorRun", "Prepared", "RunOptions", "build_report", "cluster_label", "run_in_process"]
