#!/usr/bin/env bash
# One pair, same flags, same minutes: `paros bench --target` against a fresh `paros dev`, then
# the in-cell `paros bench`; prints both, their ratio and the dev process's CPU per record.
# usage: ops/scripts/http-ratio.sh BIN WRITERS JOURNALS SECONDS   (BIN: a release `paros`)
set -euo pipefail
BIN=$1; W=$2; J=$3; S=$4
D=$(mktemp -d)
"$BIN" dev --listen 127.0.0.1:0 --data-dir "$D/data" --quota-requests-per-s 1000000 > "$D/dev.out" 2>/dev/null &
DEV=$!
for _ in $(seq 100); do grep -q "serving http" "$D/dev.out" 2>/dev/null && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$D/dev.out" | head -1)
T0=$(awk '{print $14+$15}' /proc/$DEV/stat)
"$BIN" bench --target "$URL" --writers $W --journals $J --duration-s $S --json > "$D/http.json"
T1=$(awk '{print $14+$15}' /proc/$DEV/stat)
kill -INT $DEV; wait $DEV || true
"$BIN" bench --writers $W --journals $J --duration-s $S --json > "$D/cell.json"
python3 - "$D" $T0 $T1 <<'PY'
import json,sys
d=sys.argv[1]; t0,t1=int(sys.argv[2]),int(sys.argv[3])
h=json.load(open(d+"/http.json")); c=json.load(open(d+"/cell.json"))
def g(r,*ks):
    for k in ks:
        if k in r: return r[k]
    return None
hr=g(h,"records_per_s"); cr=g(c,"records_per_s")
acked=g(h,"records_acked","acked_records","records")
cpu=(t1-t0)/100.0
print(f"http rec/s={hr:.0f} p50_us={g(h,'p50_us')} p99_us={g(h,'p99_us')} | in_cell rec/s={cr:.0f} p50_us={g(c,'p50_us')} p99_us={g(c,'p99_us')} | ratio={hr/cr:.2f} | dev cpu_s={cpu:.2f} acked={acked} cpu_us_per_rec={(cpu*1e6/acked) if acked else float('nan'):.0f}")
PY
rm -rf "$D"
