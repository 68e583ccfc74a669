#!/usr/bin/env bash
# Issue 32's side-by-side run (not part of CI; docs/lab/door.md): JetStream R3 with fsync
# before every ack (../shared/peerbench), then paros over HTTP against a fresh `paros dev`,
# then the same writers in-cell, then the door's floor (`paros dev --lab-null-writes`: the same
# gateway and client with no cell behind them) — in the same minutes, printed as ratios, with
# the bound the two baselines put on HTTP: the cores spent at the cell's CPU per record (the
# in-cell run's, its writers' runtime left out) plus the floor's carry at most
# cores * 1e6 / (cell + floor) records/s.
# Like for like by default: `paros dev --replicas 0` (three voters, no read tier; JetStream's R3
# has none either). REPLICAS=2 measures the cell `paros dev` runs by default.
# usage: ops/scripts/door-peers.sh BIN [RUNS]
# env:   PEERBENCH=../shared/peerbench  SECS=5  REPLICAS=0  (the peer builds into
#        CARGO_TARGET_DIR=${PEER_TARGET:-/tmp/peer-target})
set -uo pipefail
bin=$(realpath "$1"); runs=${2:-1}
peer=${PEERBENCH:-$(dirname "$0")/../../../shared/peerbench}
secs=${SECS:-5}; replicas=${REPLICAS:-0}; port=7499
field() { python3 -c "import json,sys; d=json.load(open('$1')); print(round(d['$2']) if '$2' in d else '?')"; }
for run in $(seq "$runs"); do
  js=$(mktemp)
  (cd "$peer" && CARGO_TARGET_DIR=${PEER_TARGET:-/tmp/peer-target} REPS=1 SECS=$secs MODES=always PUBS=64 \
    FSYNC_CHECK=0 ./bench_nats_durable.sh) > "$js" 2>&1
  js64=$(grep 'always-sync-64pub-100B|msg/s' "$js" | cut -d'|' -f4)
  js64p99=$(grep 'always-sync-64pub-100B|p99' "$js" | cut -d'|' -f4)
  jsasync=$(grep 'always-async-w256-100B|msg/s' "$js" | cut -d'|' -f4)
  d=$(mktemp -d)
  "$bin" dev --listen 127.0.0.1:$port --data-dir "$d/cell" --replicas "$replicas" \
    --quota-requests-per-s 1000000 > "$d/dev.out" 2>&1 &
  dev=$!
  for _ in $(seq 100); do grep -q "serving http" "$d/dev.out" 2>/dev/null && break; sleep 0.1; done
  target=(--target http://127.0.0.1:$port --session --duration-s "$secs" --json)
  "$bin" bench "${target[@]}" --writers 64 --journals 64 > "$d/http64.json" 2>/dev/null
  "$bin" bench "${target[@]}" --writers 1 --journals 1 --in-flight 256 > "$d/http1.json" 2>/dev/null
  kill -INT $dev; wait $dev 2>/dev/null
  "$bin" bench --writers 64 --journals 64 --replicas "$replicas" --duration-s "$secs" --json > "$d/cell64.json" 2>/dev/null
  "$bin" bench --writers 1 --journals 1 --in-flight 256 --replicas "$replicas" --duration-s "$secs" --json \
    > "$d/cell1.json" 2>/dev/null
  "$bin" dev --listen 127.0.0.1:$port --data-dir "$d/floor" --replicas "$replicas" \
    --quota-requests-per-s 1000000 --lab-null-writes > "$d/floor.out" 2>&1 &
  dev=$!
  for _ in $(seq 100); do grep -q "serving http" "$d/floor.out" 2>/dev/null && break; sleep 0.1; done
  "$bin" bench "${target[@]}" --writers 64 --journals 64 > "$d/floor64.json" 2>/dev/null
  "$bin" bench "${target[@]}" --writers 1 --journals 1 --in-flight 256 > "$d/floor1.json" 2>/dev/null
  kill -INT $dev; wait $dev 2>/dev/null
  python3 - "$d" "$run" "$js64" "$js64p99" "$jsasync" "$replicas" <<'PY'
import json, sys
d, run, js64, js64p99, jsasync, replicas = sys.argv[1:]
js64, js64p99, jsasync = float(js64), float(js64p99), float(jsasync)
h64, h1, c64, c1, f64, f1 = (json.load(open(f"{d}/{n}.json"))
                              for n in ("http64", "http1", "cell64", "cell1", "floor64", "floor1"))
door = lambda r: r["cpu_us_per_record"] + r["target_cpu_us_per_record"]  # client + gateway
cores = __import__("os").cpu_count()
rt = (h64.get("target_cpu_split") or {}).get("runtime", float("nan"))
print(f"run {run} (replicas {replicas}): JetStream 64 sync {js64:.0f}/s p99 {js64p99/1000:.1f} ms, async w256 {jsasync:.0f}/s")
print(f"  http 64 writers {h64['records_per_s']:.0f}/s = {h64['records_per_s']/js64:.2f} x JetStream, "
      f"p99 {h64['p99_us']/1000:.1f} ms ({'below' if h64['p99_us'] < js64p99 else 'not below'} JetStream's), "
      f"gateway runtime {rt:.1f} us/record")
print(f"  http 1 writer 256 in flight {h1['records_per_s']:.0f}/s = {h1['records_per_s']/jsasync:.2f} x the async publisher")
print(f"  in-cell 64 writers {c64['records_per_s']:.0f}/s ({c64['cpu_us_per_record']:.1f} us/record); "
      f"http / in-cell = {h64['records_per_s']/c64['records_per_s']:.2f}; "
      f"in-cell 1 writer 256 in flight {c1['records_per_s']:.0f}/s = {c1['records_per_s']/jsasync:.2f} x the async publisher")
print(f"  door floor (no cell): 64 writers {f64['records_per_s']:.0f}/s, client + gateway {door(f64):.1f} us/record "
      f"(gateway {f64['target_cpu_us_per_record']:.1f}); 1 writer 256 in flight {f1['records_per_s']:.0f}/s")
# The cell's own cost: the in-cell run's CPU without its runtime threads (the writers and their
# hop into the nodes, which the floor's gateway pays for again): the bound leans high.
cell = c64["cpu_us_per_record"] - c64["target_cpu_split"].get("runtime", 0.0)
bound = cores * 1e6 / (cell + door(f64))
print(f"  bound: {cores} cores / (cell {cell:.1f} + floor {door(f64):.1f} us) = {bound:.0f}/s "
      f"= {bound/js64:.2f} x JetStream; http spent {door(h64):.1f} us/record "
      f"(client {h64['cpu_us_per_record']:.1f}, gateway {h64['target_cpu_us_per_record']:.1f})")
PY
  rm -rf "$d" "$js"
done
