#!/usr/bin/env bash
# Two builds (or one build with two sets of flags) alternating on the issue-10 64-writer run, in
# the same minutes (not part of CI). Each line: records/s, p50/p99/p999 (µs), CPU per acknowledged
# record, the slowest second over the median, the mean records/s of the run's first and last
# thirds, the slowest round sync and the writes that waited for a store's applier. With DISK_S=n, each pair is followed by n seconds of raw fjall at batch 1 (one
# fdatasync per 100-byte record, nothing else running): the disk's own stalls over 5 and 15 ms
# per minute in the same minutes, which every write of the cell waits out too.
# Usage: [DISK_S=n] [EXTRA_A="flags"] [EXTRA_B="flags"] ops/scripts/ab.sh pairs secs BIN_A BIN_B
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
      f\"cpu/record {d['cpu_us_per_record']:.1f} slowest/median {d['min_window_ratio']:.2f} first third {first:.0f} last third {last:.0f} \"
      f\"round sync max {d['round_split']['sync']['max_us']} waits for the applier {d.get('store_room_waits', '-')}\")"
  done
  if [ -n "${DISK_S:-}" ]; then
    "$A" bench --raw-fjall --batch 1 --record-bytes 100 --duration-s "$DISK_S" --json 2>/dev/null |
      python3 -c "
import json, sys
d = json.load(sys.stdin); per_min = 60 / $DISK_S
print('pair $i disk', f\"fdatasync p50 {d['p50_us']} p999 {d['p999_us']} max {d['max_us']} \"
      f\"over 5 ms {d['over_5ms'] * per_min:.0f}/min over 15 ms {d['over_15ms'] * per_min:.0f}/min\")"
  fi
done
