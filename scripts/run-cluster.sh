#!/usr/bin/env bash
# make run: a local 3-node cluster on loopback sharing one SQLite file, with
# the dashboard on every admin address (http://127.0.0.1:7700/) and
# demo devices on n1. Devices: ws://127.0.0.1:7600/ws (n1), :7601 (n2),
# :7602 (n3); admin: http://127.0.0.1:7700, :7701, :7702. Ctrl-C stops all.
# Kill one (kill -9 $(cat presence-data/n2.pid)) and watch the others.
set -euo pipefail
cd "$(dirname "$0")/.."
timing=${TIMING:-fast}; demo=${DEMO:-20}
mkdir -p presence-data
pids=()
stop() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT INT TERM
start() { # name index extra...
  local name=$1 i=$2; shift 2
  ./bin/presenced --node-id "$name" --timing "$timing" --listen "127.0.0.1:760$i" --admin "127.0.0.1:770$i" \
    --gossip "127.0.0.1:794$((6 + i))" --policy-dsn sqlite:presence-data/presence.db "$@" &
  pids+=($!)
  echo $! > "presence-data/$name.pid"
}
ready() { # index: wait for /readyz, or stop if the node died
  local i=$1 pid=${pids[-1]}
  if ! command -v curl >/dev/null 2>&1; then sleep 1.5; return 0; fi
  for _ in $(seq 100); do
    if curl -sf "http://127.0.0.1:770$i/readyz" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "run-cluster: n$((i + 1)) did not start (see above)" >&2; exit 1; fi
    sleep 0.2
  done
  echo "run-cluster: n$((i + 1)) not ready after 20 s" >&2; exit 1
}
start n1 0 --demo "$demo"
ready 0
start n2 1 --join 127.0.0.1:7946
ready 1
start n3 2 --join 127.0.0.1:7946
ready 2
echo "cluster: dashboard http://127.0.0.1:7700/ (and :7701, :7702); devices ws://127.0.0.1:760{0,1,2}/ws; Ctrl-C stops it" >&2
wait
