#!/bin/bash
# Keeps a JWT of the Airflow user ${PROMETHEUS_AIRFLOW_USER:-prometheus} in /prometheus/airflow-token
# (renewed every 10 minutes; Airflow's default JWT lifetime is 24 hours), then runs Prometheus.
# The password travels in the environment and reaches curl on stdin: never in argv (ps shows argv).
set -euo pipefail
: "${PROMETHEUS_AIRFLOW_PASSWORD:?set PROMETHEUS_AIRFLOW_PASSWORD (the Airflow user prometheus)}"
export PROMETHEUS_AIRFLOW_USER="${PROMETHEUS_AIRFLOW_USER:-prometheus}"
api="${AIRFLOW_API_URL:-http://airflow-api-server:8080}"
token_file=/prometheus/airflow-token

fetch_token() {
  jq -n '{username: env.PROMETHEUS_AIRFLOW_USER, password: env.PROMETHEUS_AIRFLOW_PASSWORD}' \
    | curl -fsS --max-time 20 -X POST -H 'Content-Type: application/json' --data-binary @- "$api/auth/token" \
    | jq -er .access_token > "$token_file.new" \
    && chmod 0600 "$token_file.new" && mv "$token_file.new" "$token_file"
}

(
  umask 077
  while true; do
    if fetch_token; then
      sleep 600
    else
      echo "prometheus-entrypoint: no token from $api/auth/token yet (is the API server up?); retrying in 5 s" >&2
      sleep 5
    fi
  done
) &

exec /usr/bin/prometheus --config.file=/etc/prometheus/prometheus.yml --storage.tsdb.path=/prometheus \
  --storage.tsdb.retention.time=15d --web.listen-address=:9090 "$@"
