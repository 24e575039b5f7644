#!/usr/bin/env bash
# make run: a local 3-node cluster on loopback sharing one SQLite file, and
# demo devices in a process of their own (presencectl demo) spread over the
# nodes and reconnecting through the Go SDK: kill a node and watch its
# devices move to the others. Prints the addresses, then one status line of
# every node every 5 s and each member failure or fence; the nodes' logs
# are in presence-data/n{1,2,3}.log. WEBHOOK=1 also starts a webhook
# receiver (presencectl webhook-listen) on loopback with a generated
# secret, the nodes posting every change to it; what it receives is in
# presence-data/webhooks.log. Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/.."
timing=${TIMING:-fast}; demo=${DEMO:-20}; webhook=${WEBHOOK:-0}
life=15s; [ "$timing" = seed ] && life=20m
# first ports of the three nodes (another checkout may run its own)
L=${LISTEN_PORT:-7600}; A=${ADMIN_PORT:-7700}; G=${GOSSIP_PORT:-7946}; W=${WEBHOOK_PORT:-7800}
seeds=127.0.0.1:$G,127.0.0.1:$((G + 1)),127.0.0.1:$((G + 2))
mkdir -p presence-data
pids=()
stop() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT INT TERM
start() { # name index extra...
  local name=$1 i=$2; shift 2
  ./bin/presenced --node-id "$name" --timing "$timing" --listen "127.0.0.1:$((L + i))" --admin "127.0.0.1:$((A + i))" \
    --gossip "127.0.0.1:$((G + i))" --join "$seeds" --policy-dsn sqlite:presence-data/presence.db "$@" 2>"presence-data/$name.log" &
  pids+=($!)
  echo $! > "presence-data/$name.pid"
}
ready() { # index: wait for /readyz, or stop if the node died
  local i=$1 pid=${pids[-1]}
  if ! command -v curl >/dev/null 2>&1; then sleep 1.5; return 0; fi
  for _ in $(seq 100); do
    if curl -sf "http://127.0.0.1:$((A + i))/readyz" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "run-cluster: n$((i + 1)) did not start:" >&2; cat "presence-data/n$((i + 1)).log" >&2; exit 1; fi
    sleep 0.2
  done
  echo "run-cluster: n$((i + 1)) not ready after 20 s (presence-data/n$((i + 1)).log)" >&2; exit 1
}
hooks=() # the nodes' webhook flags
if [ "$webhook" = 1 ]; then
  # a fresh secret, in a file the nodes read (--webhook-secret-file) and in
  # the receiver's environment: in no process listing
  (umask 077; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > presence-data/webhook.secret)
  PRESENCE_WEBHOOK_SECRET=$(cat presence-data/webhook.secret) ./bin/presencectl webhook-listen --listen "127.0.0.1:$W" \
    > presence-data/webhooks.log 2>&1 &
  pids+=($!)
  hooks=(--webhook-url "http://127.0.0.1:$W/" --webhook-secret-file presence-data/webhook.secret)
fi
cat <<MSG
presence: 3 nodes ($timing timings), $demo demo devices
  dashboard  http://127.0.0.1:$A/   (and :$((A + 1)), :$((A + 2)))
  devices    ws://127.0.0.1:$L/ws   (and :$((L + 1)), :$((L + 2)))
  logs       presence-data/n1.log n2.log n3.log
  demo app   http://127.0.0.1:$L/demo?users=$demo&nodes=127.0.0.1:$((L + 1)),127.0.0.1:$((L + 2))
  try        kill -9 \$(cat presence-data/n2.pid)   # its devices reconnect to n1 and n3
MSG
if [ "$webhook" = 1 ]; then
  echo "  webhooks   http://127.0.0.1:$W/ receives every change, signatures checked: tail -f presence-data/webhooks.log"
  echo "             delivery state: curl -s 127.0.0.1:$A/api/webhooks"
fi
cat <<MSG
Ctrl-C stops it.
MSG
# every node lists all three as seeds: n1 starts the cluster through
# itself, and a node restarted by hand finds the others
for i in 0 1 2; do start "n$((i + 1))" $i ${hooks[@]+"${hooks[@]}"}; ready $i; done
# member failures and fences as they happen, one line each
tail -q -n 0 -F presence-data/n1.log presence-data/n2.log presence-data/n3.log 2>/dev/null |
  grep --line-buffered -E 'msg="(member (failed|left)|fenced)' | sed -u -E 's/^time=[^T]*T([0-9:]{8})[^ ]* level=([A-Z]+) msg="([^"]*)" node=([^ ]*)(.*)/\1 \4: \3\5/' &
pids+=($!)
./bin/presencectl demo --devices "$demo" --life "$life" \
  --ws "ws://127.0.0.1:$L/ws,ws://127.0.0.1:$((L + 1))/ws,ws://127.0.0.1:$((L + 2))/ws" \
  --admin "http://127.0.0.1:$A,http://127.0.0.1:$((A + 1)),http://127.0.0.1:$((A + 2))" &
pids+=($!)
wait
