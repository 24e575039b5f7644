#!/usr/bin/env bash
# Memory per device connection of one presenced node, measured by
# `presencectl load` over loopback. Usage: scripts/memload.sh [conns] [runs]
# Each run starts a fresh node (seed timings: idle devices), opens the
# connections, waits, and prints RSS, heap and goroutines per connection.
set -euo pipefail
cd "$(dirname "$0")/.."
conns=${1:-5000}; runs=${2:-3}
go build -o bin/ ./cmd/presenced ./cmd/presencectl
for i in $(seq "$runs"); do
  ./bin/presenced --timing seed --listen 127.0.0.1:7650 --admin 127.0.0.1:7750 --node-id memload 2>/dev/null >/dev/null &
  pid=$!
  trap 'kill $pid 2>/dev/null' EXIT
  for _ in $(seq 50); do curl -sf 127.0.0.1:7750/healthz >/dev/null && break; sleep 0.1; done
  ./bin/presencectl load --conns "$conns" --pid "$pid" --url ws://127.0.0.1:7650/ws --admin http://127.0.0.1:7750 --settle 10s | tr '\n' ' '
  echo
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
