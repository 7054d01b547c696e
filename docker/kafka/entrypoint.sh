#!/bin/bash
# Writes server.properties from the environment, formats the storage once, then runs the broker.
#   KAFKA_NODE_ID       this node's id (1..n)
#   KAFKA_CLUSTER_ID    the cluster's id (22 characters of base64, the same on every node)
#   KAFKA_VOTERS        the controller quorum, e.g. 1@src-kafka-1:9093,2@src-kafka-2:9093,3@src-kafka-3:9093
#   KAFKA_ADVERTISED_HOST  the name clients use for this broker (default: the container's hostname)
#   KAFKA_HEAP          JVM heap (default 512m)
#   KAFKA_EXTRA_*       any further setting: KAFKA_EXTRA_LOG_RETENTION_MS=1 becomes log.retention.ms=1
set -euo pipefail
: "${KAFKA_NODE_ID:?}" "${KAFKA_CLUSTER_ID:?}" "${KAFKA_VOTERS:?}"
data=/var/lib/kafka/data
config=/var/lib/kafka/server.properties
host="${KAFKA_ADVERTISED_HOST:-$(hostname)}"
cat > "$config" <<PROPS
process.roles=broker,controller
node.id=${KAFKA_NODE_ID}
controller.quorum.voters=${KAFKA_VOTERS}
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
advertised.listeners=PLAINTEXT://${host}:9092
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=${data}
num.partitions=3
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=12
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=12
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPS
# KAFKA_EXTRA_FOO_BAR=x -> foo.bar=x
while IFS='=' read -r name value; do
  key="$(echo "${name#KAFKA_EXTRA_}" | tr 'A-Z_' 'a-z.')"
  echo "${key}=${value}" >> "$config"
done < <(env | grep '^KAFKA_EXTRA_' || true)

java=(java "-Xmx${KAFKA_HEAP:-512m}" "-Xms${KAFKA_HEAP:-512m}" -XX:+UseG1GC -Djava.awt.headless=true
      -Dlog4j2.configurationFile=/opt/kafka/log4j2.properties -cp '/opt/kafka/libs/*')
if [ ! -f "$data/meta.properties" ]; then
  "${java[@]}" kafka.tools.StorageTool format --cluster-id="$KAFKA_CLUSTER_ID" --config "$config" --ignore-formatted
fi
# A file handle per log segment of every partition: Kafka's deployment guide asks for 100,000 open files.
# Raised here as far as the container's hard limit allows, not with compose `ulimits`: a host whose engine
# may not raise the hard limit (a locked-down or nested dockerd) refuses to start a container that asks.
want=100000
hard="$(ulimit -Hn)"
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then
  echo "open files: the host's hard limit is $hard, below the $want Kafka's guide asks for;" \
       "a broker with many partitions may fail with 'Too many open files'" >&2
  want="$hard"
fi
ulimit -Sn "$want"
exec "${java[@]}" kafka.Kafka "$config"
