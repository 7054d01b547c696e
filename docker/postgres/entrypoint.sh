#!/bin/bash
# Initialises the cluster on first start (role and database `airflow`, password from the environment,
# md5 logins from the network), then runs PostgreSQL in the foreground.
set -euo pipefail
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
bin=/usr/lib/postgresql/15/bin
data=/var/lib/postgresql/data
if [ ! -s "$data/PG_VERSION" ]; then
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  "$bin/initdb" -D "$data" -U postgres --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 --pwfile="$pwfile" >/dev/null
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$data/pg_hba.conf"
  "$bin/pg_ctl" -D "$data" -o "-c listen_addresses=''" -w start >/dev/null
  # The password comes from the environment through psql's quoting, never onto a command line.
  psql -v ON_ERROR_STOP=1 -U postgres -d postgres >/dev/null <<'SQL'
\getenv pw POSTGRES_PASSWORD
CREATE ROLE airflow LOGIN PASSWORD :'pw';
CREATE DATABASE airflow OWNER airflow;
SQL
  "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
fi
exec "$bin/postgres" -D "$data" -c listen_addresses='*' -c max_connections=200
