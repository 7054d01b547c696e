"""The benchmark behind ``make bench``: eosmirror side by side with MirrorMaker 2 and two baselines.

Everything runs on the embedded local clusters (started, or reused when already up), on the same
machine, in one run, one configuration after another so that no two measurements share the CPU:

  ceiling          Kafka's ProducerPerformance into the target, transactional and not
  raw loop         one confluent-kafka process: consume -> produce, no transactions, no progress
  eosmirror        ``eosmirror run`` on Spark, exactly_once and at_least_once (plus a slot sweep and
                   an empty run that measures the fixed overhead)
  mm2              MirrorMaker 2 dedicated mode, exactly-once and at-least-once
  distance         eosmirror (spark-submit, run server), tuned MM2 exactly-once and the JVM copier with
                   the source 0, 25 and 100 ms away behind a proxy (the kit's link), the mirror beside the target

Every configuration copies a freshly loaded topic set of its own and is verified afterwards by a
read_committed count on the target; a configuration that does not deliver exactly N records is
reported as not verified, whatever its speed.

Modules: ``settings`` (what to run), ``dataset`` (loading a configuration's topics), one runner
module per system (``ceiling``, ``rawloop``, ``jvmcopier``, ``mirror_runs``; MirrorMaker 2 is the
kit's ``mm2``), ``configurations``
(load, run, verify, clean up), ``results`` (one configuration's numbers), ``suite`` (the order and
the progress lines), ``report``, ``markdown`` and ``chart`` (the outputs), ``profiling`` (optional
pyinstrument profiles); ``rereads``, ``scale``, ``translation``, ``synchistory``, ``served`` and ``distance`` (the
report's other sections) and ``lagreports`` (``make lagbench``). Counting, child processes and the
clusters come from the kit. Nothing here imports Spark or Airflow at module level.
"""
