#!/usr/bin/env bash
# What a replica tier costs the voters' threads per acknowledged record (not part of CI;
# docs/lab/reads.md). Each round runs the in-cell bench three ways, through
# ops/scripts/replicas-apart.sh (the bench on CPU 0, every replica thread moved to CPU 1):
#
#   0        no replicas, CPU 1 idle;
#   0+busy   no replicas, CPU 1 kept busy by a process that is not paros (a control: what the
#            other core's work alone does to CPU 0's threads);
#   0+paros  no replicas, CPU 1 held by a second, unrelated `paros bench` (no replicas,
#            SIDE_WRITERS writers, default 4): a paros load of its own on the other core, sharing
#            nothing with the measured cell but the machine;
#   R        REPLICAS replicas, on CPU 1.
#
# ARMS="0 1 2" (say) runs other arms instead; `N+busy` is N replicas with CPU 1 kept busy by a
# shell loop, `0+paros` as above. Default: "0 0+busy REPLICAS".
# After SETTLE seconds, `perf stat` counts for WINDOW seconds the task clock of the three voters'
# node threads and, apart, of their storage threads (a thread's own clock, in ns, not the
# bench's 10 ms ticks). Records acknowledged in the window: the bench's records/s × WINDOW (the
# run lasts SETTLE + WINDOW + 2 s, so the window is inside its steady part). This machine's
# virtual CPUs expose no hardware counters, so instructions cannot be counted instead.
#
# The voters' threads are the first three `paros-node-` and `paros-store-XXX` threads by id:
# the embedded cell opens its voters before its replicas (see replicas-apart.sh).
#
# usage: ops/scripts/voter-counters.sh BIN ROUNDS REPLICAS [bench flags…]
# e.g.:  ops/scripts/voter-counters.sh target/release/paros 6 2 --writers 16 --journals 16
set -uo pipefail
bin="$1"; rounds="$2"; replicas="$3"; shift 3
settle="${SETTLE:-3}"; window="${WINDOW:-5}"
here="$(cd "$(dirname "$0")" && pwd)"
command -v perf > /dev/null || { echo "voter-counters: needs perf (apt-get install linux-perf)" >&2; exit 2; }
duration=$((settle + window + 2))

first_threads() { # pid pattern → the first three thread ids whose name matches, comma-joined
  for t in /proc/"$1"/task/*; do echo "$(basename "$t") $(cat "$t/comm" 2>/dev/null)"; done |
    sort -n | grep -E " $2\$" | head -n 3 | cut -d' ' -f1 | paste -sd,
}

clock_ms() { # tids file → the threads' task clock over the window, in ms, into file
  perf stat -x, -e task-clock -t "$1" -- sleep "$window" 2>&1 >/dev/null |
    awk -F, '$3 ~ /^task-clock/ {c=$1} END {print c+0}' > "$2"
}

run() { # arm replicas busy
  local arm="$1" r="$2" busy="$3" out pid="" apart spinner=""
  shift 3
  out=$(mktemp)
  if [ "$busy" = 1 ]; then
    taskset -c 1 sh -c 'while :; do :; done' & spinner=$!
  elif [ "$busy" = paros ]; then
    # Its arguments do not start with `bench --replicas`, so the measured bench is told apart.
    taskset -c 1 "$bin" bench --writers "${SIDE_WRITERS:-4}" --journals "${SIDE_WRITERS:-4}" --replicas 0 \
      --duration-s $((duration + 3)) --json > /dev/null 2>&1 & spinner=$!
  fi
  "$here/replicas-apart.sh" "$bin" "$r" --duration-s "$duration" "$@" > "$out" &
  apart=$!
  for _ in $(seq 200); do
    pid=$(pgrep -f -n "^$bin bench --replicas $r " || true)
    [ -n "$pid" ] && [ "$(first_threads "$pid" 'paros-node-[0-9a-f]{4}' | tr , '\n' | wc -l)" -ge 3 ] && break
    sleep 0.05
  done
  sleep "$settle"
  clock_ms "$(first_threads "$pid" 'paros-node-[0-9a-f]{4}')" "$out.nodes" & local c1=$!
  clock_ms "$(first_threads "$pid" 'paros-store-[0-9a-f]{3}')" "$out.stores" & local c2=$!
  wait "$c1" "$c2" "$apart"
  if [ -n "$spinner" ]; then kill "$spinner" 2>/dev/null; wait "$spinner" 2>/dev/null; fi
  local rate nms sms
  rate=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_per_s"])' "$out")
  nms=$(cat "$out.nodes"); sms=$(cat "$out.stores")
  rm -f "$out" "$out.nodes" "$out.stores"
  awk -v a="$arm" -v i="$round" -v rate="$rate" -v nms="$nms" -v sms="$sms" -v w="$window" \
    'BEGIN {n = rate * w; printf "%d\t%s\t%.0f\t%.2f\t%.2f\n", i, a, rate, nms * 1000 / n, sms * 1000 / n}'
}

printf 'round\tarm\trecords_per_s\tvoter_node_us_per_record\tvoter_store_us_per_record\n'
for round in $(seq "$rounds"); do
  for arm in ${ARMS:-0 0+busy $replicas}; do
    case "$arm" in
      *+busy) run "$arm" "${arm%+busy}" 1 "$@" ;;
      *+paros) run "$arm" "${arm%+paros}" paros "$@" ;;
      *) run "$arm" "$arm" 0 "$@" ;;
    esac
  done
done
