#!/usr/bin/env bash
# make run: a local 3-node cluster on loopback sharing one SQLite file, with
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
start n1 0 --demo "$demo"
sleep 1.5
start n2 1 --join 127.0.0.1:7946
start n3 2 --join 127.0.0.1:7946
echo "cluster: devices ws://127.0.0.1:760{0,1,2}/ws, admin http://127.0.0.1:770{0,1,2}; Ctrl-C stops it" >&2
wait
