#!/usr/bin/env bash
# The storage issue's "no regression" figures, each paired with its baseline in the same
# minutes (not part of CI). Every pair runs back to back, `pairs` times, and the medians are
# printed:
#   - one writer, batch 1: the cell's p50 over raw fjall's batch-1 p50 (one fdatasync each);
#   - one writer, batch 64: the cell's records/s over raw fjall's batch-64 records/s.
# With BASE=/path/to/an/older/paros, the same figures of that build run in the same pairs.
# Usage: ops/scripts/paired.sh [pairs=3] [secs=8]
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs="${1:-3}"
secs="${2:-8}"
cargo build --release -p paros >/dev/null
bin="${CARGO_TARGET_DIR:-target}/release/paros"
builds=("$bin")
[ -n "${BASE:-}" ] && builds+=("$BASE")
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
declare -A p50s rates
raws_p50=(); raws_rate=()
for i in $(seq "$pairs"); do
  raw_p50=$("$bin" bench --raw-fjall --record-bytes 100 --batch 1 --duration-s 3 --json 2>/dev/null | field p50_us)
  raw_rate=$("$bin" bench --raw-fjall --record-bytes 100 --batch 64 --duration-s 3 --json 2>/dev/null | field records_per_s)
  raws_p50+=("$raw_p50"); raws_rate+=("$raw_rate")
  for b in "${builds[@]}"; do
    p50=$("$b" bench --writers 1 --journals 1 --record-bytes 100 --batch 1 --duration-s "$secs" --json 2>/dev/null | field p50_us)
    rate=$("$b" bench --writers 1 --journals 1 --record-bytes 100 --batch 64 --duration-s "$secs" --json 2>/dev/null | field records_per_s)
    p50s[$b]="${p50s[$b]:-} $p50"; rates[$b]="${rates[$b]:-} $rate"
    python3 -c "print(f'pair $i $b: batch-1 p50 {$p50} us / fdatasync p50 {$raw_p50} us = {$p50/$raw_p50:.2f}x; batch-64 {$rate:.0f} / raw {$raw_rate:.0f} rec/s = {100*$rate/$raw_rate:.0f}%')"
  done
done
for b in "${builds[@]}"; do
  python3 - "$b" "${p50s[$b]}" "${rates[$b]}" "${raws_p50[*]}" "${raws_rate[*]}" <<'PY'
import statistics, sys
b, p50, rate, raw_p50, raw_rate = sys.argv[1], *[[float(x) for x in a.split()] for a in sys.argv[2:]]
lat = statistics.median(x / r for x, r in zip(p50, raw_p50))
thr = statistics.median(x / r for x, r in zip(rate, raw_rate))
print(f"{b}: median batch-1 p50 / fdatasync p50 = {lat:.2f}x (target <= 2); "
      f"median batch-64 / raw fjall batch-64 = {100 * thr:.0f}% (target >= 50%)")
PY
done
