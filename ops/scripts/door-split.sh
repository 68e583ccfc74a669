#!/usr/bin/env bash
# Issue 32's reach, measured (not part of CI; docs/lab/door.md, "the door and the cell in
# series"). A write over HTTP spends part of its cycle in the door (client, HTTP/2, gateway,
# and back) and the rest in the cell; with W writes in flight, on average N of them are in the
# cell and W - N in the door, and both parts carry the same records/s. So whatever the split,
# HTTP carries at most min(cell(N), door(W - N)), where cell(N) is the in-cell bench with N
# writes in flight and door(M) the door's floor (`paros dev --lab-null-writes`) with M — each
# measured alone, with the whole machine to itself. The best split is an upper bound on what
# this door in front of this cell can carry at W in flight; the script prints it beside
# JetStream R3 (../shared/peerbench) and paros over HTTP, all in the same minutes.
# Two shapes, as the targets: W = 64 writers with one write each (N writers on N
# journals), and one writer on one journal with W = 256 pipelined on a session.
# usage: ops/scripts/door-split.sh BIN [RUNS]
# env:   PEERBENCH=../shared/peerbench  SECS=5  REPLICAS=0  STEP=8  (the peer builds into
#        CARGO_TARGET_DIR=${PEER_TARGET:-/tmp/peer-target})
set -uo pipefail
bin=$(realpath "$1"); runs=${2:-1}
peer=${PEERBENCH:-$(dirname "$0")/../../../shared/peerbench}
secs=${SECS:-5}; replicas=${REPLICAS:-0}; step=${STEP:-8}; port=7499
rate() { python3 -c "import json; print(round(json.load(open('$1'))['records_per_s']))"; }
serve() { # serve DIR [FLAGS…]: a fresh `paros dev` on $port; its pid in $dev
  local dir=$1; shift
  "$bin" dev --listen 127.0.0.1:$port --data-dir "$dir/data" --replicas "$replicas" \
    --quota-requests-per-s 1000000 "$@" > "$dir.out" 2>&1 &
  dev=$!
  for _ in $(seq 100); do grep -q "serving http" "$dir.out" 2>/dev/null && break; sleep 0.1; done
}
for run in $(seq "$runs"); do
  d=$(mktemp -d)
  (cd "$peer" && CARGO_TARGET_DIR=${PEER_TARGET:-/tmp/peer-target} REPS=1 SECS=$secs MODES=always PUBS=64 \
    FSYNC_CHECK=0 ./bench_nats_durable.sh) > "$d/js" 2>&1
  js64=$(grep 'always-sync-64pub-100B|msg/s' "$d/js" | cut -d'|' -f4)
  jsasync=$(grep 'always-async-w256-100B|msg/s' "$d/js" | cut -d'|' -f4)
  http=(--target http://127.0.0.1:$port --session --duration-s "$secs" --json)
  serve "$d/http"
  h64=$(rate <("$bin" bench "${http[@]}" --writers 64 --journals 64 2>/dev/null))
  h1=$(rate <("$bin" bench "${http[@]}" --writers 1 --journals 1 --in-flight 256 2>/dev/null))
  kill -INT $dev; wait $dev 2>/dev/null
  # The cell alone, N of the W in flight (N = step, 2 step, …, W).
  cell=(--replicas "$replicas" --duration-s "$secs" --json)
  declare -A c64 c1 f64 f1
  for n in $(seq "$step" "$step" 64); do
    c64[$n]=$(rate <("$bin" bench "${cell[@]}" --writers "$n" --journals "$n" 2>/dev/null))
  done
  for n in $(seq $((step * 4)) $((step * 4)) 256); do
    c1[$n]=$(rate <("$bin" bench "${cell[@]}" --writers 1 --journals 1 --in-flight "$n" 2>/dev/null))
  done
  # The door alone, the rest in flight.
  serve "$d/floor" --lab-null-writes
  for n in $(seq "$step" "$step" 64); do
    f64[$n]=$(rate <("$bin" bench "${http[@]}" --writers "$n" --journals "$n" 2>/dev/null))
  done
  for n in $(seq $((step * 4)) $((step * 4)) 256); do
    f1[$n]=$(rate <("$bin" bench "${http[@]}" --writers 1 --journals 1 --in-flight "$n" 2>/dev/null))
  done
  kill -INT $dev; wait $dev 2>/dev/null
  echo "run $run (replicas $replicas): JetStream R3 always: 64 sync publishers ${js64}/s, async w256 ${jsasync}/s"
  best() { # best W TOTAL-ARRAY-NAME DOOR-ARRAY-NAME STEP JS LABEL HTTP
    local w=$1 step=$4 js=$5 label=$6 h=$7 top=0 at=0
    local -n cells=$2 doors=$3
    for n in $(seq "$step" "$step" $((w - step))); do
      local c=${cells[$n]} f=${doors[$((w - n))]}
      local m=$((c < f ? c : f))
      printf '  %s: cell(%d) %d, door(%d) %d -> %d\n' "$label" "$n" "$c" $((w - n)) "$f" "$m"
      if [ "$m" -gt "$top" ]; then top=$m; at=$n; fi
    done
    python3 -c "print(f'  {\"$label\"}: best split {$at} in the cell: at most {$top}/s = {$top/$js:.2f} x JetStream; over HTTP {$h}/s = {$h/$js:.2f} x ({$h/$top:.2f} of the bound); the cell alone at $w {${cells[$w]}}/s = {${cells[$w]}/$js:.2f} x, the door alone at $w {${doors[$w]}}/s')"
  }
  best 64 c64 f64 "$step" "$js64" "64 writers" "$h64"
  best 256 c1 f1 $((step * 4)) "$jsasync" "1 writer, 256 in flight" "$h1"
  unset c64 c1 f64 f1
  rm -rf "$d"
done
