#!/usr/bin/env bash
# The in-cell bench with the read replicas on a core of their own (not part of CI;
# docs/lab/reads.md). The whole bench starts on CPU 0 (its writers, readers, runtime and the
# three voters, each thread inheriting the mask); once the replicas' threads exist they move to
# CPU 1. So the voters never share a core with a replica, as on machines of their own, and
# "replicas cost the voters nothing" is measured, not the two cores' shared budget.
#
# The replicas' threads are told apart by creation order: the embedded cell opens the three
# voters' stores and threads first, and every thread created after the third voter's storage
# thread (`paros-store-XXX`) is a replica's (checked in the run of docs/lab/reads.md with each
# thread's `Cpus_allowed_list`).
# usage: ops/scripts/replicas-apart.sh BIN REPLICAS [bench flags…]   (prints the bench's JSON)
# e.g.:  for r in 0 1 2; do ops/scripts/replicas-apart.sh target/release/paros $r --writers 16 --journals 16; done
set -uo pipefail
bin="$1"; replicas="$2"; shift 2
[ "$(nproc)" -ge 2 ] || { echo "replicas-apart: needs two cores" >&2; exit 2; }
out=$(mktemp)
taskset -c 0 "$bin" bench --replicas "$replicas" --json "$@" > "$out" 2>/dev/null &
pid=$!
threads() { for t in /proc/$pid/task/*; do echo "$(basename "$t") $(cat "$t/comm" 2>/dev/null)"; done | sort -n; }
if [ "$replicas" -gt 0 ]; then
  for _ in $(seq 200); do
    [ "$(threads | grep -cE ' paros-store-[0-9a-f]{3}$')" -ge $((3 + replicas)) ] && break
    sleep 0.05
  done
  last=$(threads | grep -E ' paros-store-[0-9a-f]{3}$' | sed -n 3p | cut -d' ' -f1)
  for tid in $(threads | cut -d' ' -f1); do
    [ "$tid" -gt "$last" ] && taskset -p -c 1 "$tid" > /dev/null
  done
fi
wait $pid
cat "$out"; rm -f "$out"
