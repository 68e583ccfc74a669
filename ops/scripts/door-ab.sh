#!/usr/bin/env bash
# Two builds of the door, paired (not part of CI; lab/door.md): each pair runs a fresh `paros dev`
# per build (A then B, the order alternating from pair to pair), `paros bench --target … $BENCH`
# against it, then the in-cell bench of build A with 0 and with 2 read replicas (`paros dev`
# runs two) in the same minutes. Each line: records/s, p50/p99 (µs), the bench's own CPU per
# record (the client) and the dev process's, split by thread role.
# usage: ops/scripts/door-ab.sh PAIRS SECS BIN_A BIN_B
# env:   BENCH="--writers 64 --journals 64 --session" (the bench's flags); NO_INCELL=1 skips the
#        in-cell runs; the port is 7499.
set -uo pipefail
pairs="$1"; secs="$2"; A="$3"; B="$4"
BENCH=${BENCH:---writers 64 --journals 64 --session}
port=7499
run() { # name bin
  local name=$1 bin=$2 d=/tmp/bd-door-$RANDOM
  rm -rf "$d"
  "$bin" dev --listen 127.0.0.1:$port --data-dir "$d" --quota-requests-per-s 1000000 > "$d.out" 2>&1 &
  local dev=$!
  for _ in $(seq 100); do grep -q "serving http" "$d.out" 2>/dev/null && break; sleep 0.1; done
  "$bin" bench --target http://127.0.0.1:$port $BENCH --duration-s "$secs" --json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin); s = d.get('target_cpu_split') or {}
split = ' '.join(f'{k} {v:.1f}' for k, v in sorted(s.items()) if v >= 0.05)
print('$name', f\"rec/s {d['records_per_s']:.0f} p50 {d['p50_us']} p99 {d['p99_us']} client {d['cpu_us_per_record']:.1f} \"
      f\"dev {d.get('target_cpu_us_per_record', 0):.1f} ({split})\", flush=True)"
  kill -INT $dev; wait $dev 2>/dev/null
  rm -rf "$d" "$d.out"
}
for i in $(seq "$pairs"); do
  if [ $((i % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for name in $order; do bin="${!name}"; echo -n "pair $i "; run "$name" "$bin"; done
  if [ -z "${NO_INCELL:-}" ]; then
    for r in 0 2; do
    "$A" bench --writers 64 --journals 64 --replicas $r --duration-s "$secs" --json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin); s = d.get('target_cpu_split') or {}
split = ' '.join(f'{k} {v:.1f}' for k, v in sorted(s.items()) if v >= 0.05)
print('pair $i in-cell replicas $r', f\"rec/s {d['records_per_s']:.0f} p50 {d['p50_us']} p99 {d['p99_us']} cpu {d['cpu_us_per_record']:.1f} ({split})\", flush=True)"
    done
  fi
done
