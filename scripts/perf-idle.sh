#!/usr/bin/env bash
# Where a server's CPU goes while N devices heartbeat, as the kernel sees
# it. Go's own profile (bench run --profile) misses the runtime's sysmon
# thread: it runs without a P, and no profiling signal samples it. This
# runs `bench run` (one run, a 20 s idle window) and, 3 s into each
# system's idle window, attaches perf to its server for 5 s: `perf stat`
# counts its sleeps (sysmon's usleep is a nanosleep) and context switches,
# `perf record -g` samples every thread. It prints, per system, the CPU
# perf saw, the sleeps and switches per second, and the share of samples
# under runtime.sysmon (BENCHMARKS.md, "What limits each figure").
#
#   scripts/perf-idle.sh                 presence and centrifugo, 19,000 devices
#   N=5000 SYSTEMS=presence scripts/perf-idle.sh
#
# Needs perf (Debian: apt-get install linux-perf), make build, and for
# Centrifugo make centrifugo. Loopback only, like bench.
set -euo pipefail
N=${N:-19000}
SYSTEMS=${SYSTEMS:-presence,centrifugo}
BIN=${BIN:-bin}
OUT=${OUT:-$BIN/perf-idle}
command -v perf >/dev/null || { echo "perf-idle: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
ulimit -n 20000
mkdir -p "$OUT"
rm -f "$OUT"/*.data "$OUT"/*.stat "$OUT"/*.attached

# attach SYSTEM EXE: perf on the newest process named EXE, once.
attach() {
  [ -e "$OUT/$1.attached" ] && return
  touch "$OUT/$1.attached"
  local pid
  pid=$(pgrep -n -x "$2") || { echo "perf-idle: no $2 process" >&2; return; }
  perf stat -e syscalls:sys_enter_nanosleep,context-switches,task-clock -p "$pid" -o "$OUT/$1.stat" -- sleep 5 >/dev/null 2>&1 &
  perf record -g -p "$pid" -o "$OUT/$1.data" -- sleep 5 >/dev/null 2>&1 &
  echo "perf-idle: perf on $1 ($2, pid $pid) for 5 s"
}

# The bench's progress line says "<system> idle K/20 s"; \r separates its
# updates (tr unbuffered: the lines must come as they are printed).
"$BIN/bench" run --n "$N" --runs 1 --hold 0 --rounds 1 --idle 20s --systems "$SYSTEMS" --bin "$BIN" 2>&1 >"$OUT/table.md" |
  stdbuf -o0 tr '\r' '\n' | while IFS= read -r line; do
    case "$line" in
      *"presence idle 3/"*) attach presence presenced ;;
      *"centrifugo idle 3/"*) attach centrifugo centrifugo ;;
    esac
  done
wait

for s in ${SYSTEMS//,/ }; do
  [ -e "$OUT/$s.stat" ] || continue
  awk -v s="$s" '
    /task-clock/ { cpu = $1 }
    /nanosleep/ { gsub(",", "", $1); sleeps = $1 }
    /context-switches/ { gsub(",", "", $1); cs = $1 }
    END { printf "%s: %.0f ms of CPU in 5 s, %.0f sleeps/s, %.0f context switches/s\n", s, cpu, sleeps / 5, cs / 5 }' "$OUT/$s.stat"
  perf report -i "$OUT/$s.data" --children --sort sym --stdio 2>/dev/null |
    awk -v s="$s" '$NF == "runtime.sysmon" && $1 ~ /%$/ { printf "%s: %s of the samples under runtime.sysmon\n", s, $1; found = 1 }
      END { if (!found) printf "%s: no sample under runtime.sysmon\n", s }'
done
