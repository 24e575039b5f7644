#!/bin/bash
# analyze.sh DIR: where the lookups of a profiled bench run went (BENCHMARKS.md,
# "What limits each figure", lookup). DIR is `bench run ... --profile DIR`'s:
# trace-node-*.out, trace-bench-*.out, lookups-presence-*.txt. Prints the
# node's handling of each lookup in its trace (wake-up, to the actor's future,
# the actor's round trip, after it) and, for the lookups in both traces, their
# split: the bench before its request's write, the node (its wake-up
# included) until its answer's write, the bench after it.
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "$1"
go tool trace -d=parsed trace-node-*.out > node.txt 2>&1
go tool trace -d=parsed trace-bench-*.out > bench.txt 2>&1
python3 "$here/parse.py" node.txt node.pkl > /dev/null
python3 "$here/parse.py" bench.txt bench.pkl > /dev/null
python3 "$here/node.py" node.pkl lookups-*.txt | grep -v "lookup conn goroutines"
python3 "$here/split.py" node.pkl bench.pkl lookups-*.txt
