#!/usr/bin/env bash
# Two builds (or one build with two sets of flags) alternating on the issue-10 64-writer run, in
# the same minutes (not part of CI). Each line: records/s, p50/p99/p999 (µs), CPU per acknowledged
# record, the slowest second over the median, and the mean records/s of the run's first and last
# thirds. Usage: [EXTRA_A="flags"] [EXTRA_B="flags"] ops/scripts/ab.sh pairs secs BIN_A BIN_B
set -euo pipefail
pairs="$1"; secs="$2"; A="$3"; B="$4"
for i in $(seq "$pairs"); do
  for name in A B; do
    bin="${!name}"; extra_var="EXTRA_$name"; extra="${!extra_var:-}"
    # shellcheck disable=SC2086 # the extra flags are meant to split
    "$bin" bench --writers 64 --journals 64 --record-bytes 100 --batch 1 --duration-s "$secs" $extra --json 2>/dev/null |
      python3 -c "
import json, sys
d = json.load(sys.stdin); ws = d['windows']; n = max(len(ws) // 3, 1)
first = sum(w['records'] for w in ws[:n]) / n; last = sum(w['records'] for w in ws[-n:]) / n
print('pair $i $name', f\"records/s {d['records_per_s']:.0f} p50 {d['p50_us']} p99 {d['p99_us']} p999 {d['p999_us']} \"
      f\"cpu/record {d['cpu_us_per_record']:.1f} slowest/median {d['min_window_ratio']:.2f} first third {first:.0f} last third {last:.0f}\")"
  done
done
