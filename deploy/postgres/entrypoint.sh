#!/bin/sh
# presence-postgres's entrypoint (deploy/postgres/build.sh), as the
# postgres user: the first start initializes $PGDATA (the volume) with
# the superuser $POSTGRES_USER, password $POSTGRES_PASSWORD (scram-sha-256)
# and the database $POSTGRES_DB, as the postgres:16 image does; every
# start then runs the server listening on every interface of the
# container. Only dash's builtins are at hand: no rm, no cat.
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set (deploy/.env)}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  # the password through a pipe: it is never written to a file
  printf '%s\n' "$POSTGRES_PASSWORD" |
    initdb -D "$PGDATA" -U "$user" --pwfile=/dev/stdin --auth=scram-sha-256 \
      --encoding=UTF8 --locale=C >/dev/null
  # password logins from the networks the container is on (samenet: the
  # compose network) and loopback; nothing else
  printf '%s\n' '# written by presence-postgres: password logins from the container networks' \
    'local all all scram-sha-256' \
    'host all all samenet scram-sha-256' >"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    printf 'CREATE DATABASE "%s";\n' "$db" | postgres --single -D "$PGDATA" -j -c log_checkpoints=off postgres >/dev/null
  fi
  echo "presence-postgres: initialized $PGDATA (user $user, database $db)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp \
  -c password_encryption=scram-sha-256 -c jit=off "$@"
