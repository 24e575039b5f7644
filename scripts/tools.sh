#!/bin/sh
# Installs what the tests need beyond Go, if missing (idempotent):
# protoc (Debian's protobuf-compiler), the PostgreSQL server binaries
# (Debian's postgresql; tests start their own throwaway server) and a
# headless browser for the dashboard's and the browser SDK's tests
# (Debian's chromium), iptables
# for the chaos partition (Debian's iptables) and promtool for the alert
# rules' test (Debian's prometheus; its service is not started), and
# redis-server for the Redis-TTL side of `make bench` (Debian's
# redis-server; its service is not started: the bench starts its own).
set -eu
need=""
command -v protoc >/dev/null 2>&1 || need="$need protobuf-compiler"
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need="$need postgresql"
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need="$need chromium"
command -v iptables >/dev/null 2>&1 || need="$need iptables"
command -v promtool >/dev/null 2>&1 || need="$need prometheus"
command -v redis-server >/dev/null 2>&1 || need="$need redis-server"
[ -z "$need" ] && exit 0
echo "installing:$need"
if [ "$(id -u)" != 0 ]; then
  echo "not root: install$need yourself" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq $need >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq $need >/dev/null; }
