#!/usr/bin/env bash
# Group-commit scaling of one build, measured as a ratio in one run (not part of CI):
# alternates `paros bench` with one writer and with 64 writers on 64 journals (100-byte
# records, batch 1), `pairs` times, and prints each pair and the medians.
# Usage: ops/scripts/ratio.sh [pairs=5] [secs=6]
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs="${1:-5}"
secs="${2:-6}"
cargo build --release -p paros >/dev/null
bin="${CARGO_TARGET_DIR:-target}/release/paros"
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
ones=(); many=()
for i in $(seq "$pairs"); do
  one=$("$bin" bench --writers 1 --journals 1 --record-bytes 100 --batch 1 --duration-s "$secs" --json 2>/dev/null | field records_per_s)
  m=$("$bin" bench --writers 64 --journals 64 --record-bytes 100 --batch 1 --duration-s "$secs" --json 2>/dev/null | field records_per_s)
  ones+=("$one"); many+=("$m")
  python3 -c "print(f'pair $i: single_writer={$one:.0f} rec/s  writers64={$m:.0f} rec/s  ratio={$m/$one:.2f}')"
done
python3 - "${ones[*]}" "${many[*]}" <<'PY'
import statistics, sys
ones = [float(x) for x in sys.argv[1].split()]
many = [float(x) for x in sys.argv[2].split()]
ratios = sorted(m / o for o, m in zip(ones, many))
print(f"median single_writer={statistics.median(ones):.0f} rec/s  median writers64={statistics.median(many):.0f} rec/s  "
      f"median pair ratio={statistics.median(ratios):.2f}  min={ratios[0]:.2f}  max={ratios[-1]:.2f}")
PY
