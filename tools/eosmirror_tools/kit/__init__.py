"""The test kit: what every suite (bench, chaos, soak, deploy, matrix, the demo) and the tests need.

  cluster     the embedded single-node clusters (KRaft; ZooKeeper for a version before 3.3): started, stopped,
              killed, restarted
  runtime     Java, the Kafka jars (pom.xml pins the default version; others by request) and Kafka's own
              command-line tools
  console     each Kafka version's own ConsoleConsumer and kafka-transactions as judges
  link        distance: a broker behind toxiproxy with latency, jitter and bandwidth per direction
  waits       budgets for waiting on a service, scaled by how busy the machine is
  processes   child processes in a session of their own, their memory and CPU, and killing process trees
  measured    a measured child program that counts the local brokers' CPU apart (processes meets cluster here)
  mm2         MirrorMaker 2 (dedicated mode) as a child process, and when it has copied everything
  machine     the machine a figure came from
  topics      topics and groups a run creates and clears
  workload    numbered records (sequence values), plain and in transactions of which some abort; a bulk loader
  oracle      the exactly-once verdict after a run: duplicates, losses, order, aborted leaks, content, progress
  sampler     the independent time-lag sampler: the same counts, streaming, while a load runs
  counting    exact read_committed record counts, end offsets, transactions still open
  caprate     bytes arriving on the target per second, from outside a mirror
  latency     other clients' produce and fetch latency beside a load, from processes of their own

The suites import the kit and the product; the kit imports no suite, and no suite another.
"""
