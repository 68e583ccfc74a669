#!/usr/bin/env bash
# Restart figures of issue 10, paired (not part of CI): each build gets its own copy of a data
# directory and restarts it ROUNDS times, the builds alternating. Each line: fjall's journal on
# node 0 before the run (KB on disk), the open, the first acknowledged write, the resident peaks,
# the read-back time and the records verified.
# Make the directory once, e.g. with 100,000 idle journals and a 2 GiB journal:
#   paros bench --data-dir D --writers 1 --journals 1 --idle-journals 100000 --dormant-after-s 5 \
#     --record-bytes 16384 --batch 16 --stop-after-mib 2048 --duration-s 120
# Usage: [FLAGS="--record-bytes 16384 --batch 16"] ops/scripts/restarts.sh D ROUNDS BIN...
# (copies go to ${WORK:-/tmp}/restart-<n>; FLAGS must name the record size D was written with:
# the bench verifies the records it finds)
set -euo pipefail
src="$1"; rounds="$2"; shift 2
work="${WORK:-/tmp}"
flags="${FLAGS:---record-bytes 16384 --batch 16}"
n=0
for b in "$@"; do
  rm -rf "$work/restart-$n"; cp -a --sparse=always "$src" "$work/restart-$n"; n=$((n + 1))
done
for i in $(seq "$rounds"); do
  n=0
  for b in "$@"; do
    d="$work/restart-$n"; n=$((n + 1))
    jnl=$(du -k "$d"/node-0/*.jnl | awk '{s += $1} END {print s}')
    # shellcheck disable=SC2086 # the flags are meant to split
    "$b" bench --data-dir "$d" --writers 1 --journals 1 $flags --duration-s 2 --json 2>/dev/null |
      python3 -c "
import json, sys
j = json.load(sys.stdin)
print('$b run $i', f'fjall journal before {$jnl} KB', f\"open_s {j['open_s']:.2f} first_write_s {j['first_write_s']:.2f}\",
      f\"rss peak writing {j['rss_peak_write_bytes'] >> 20} MB, all {j['rss_peak_bytes'] >> 20} MB\",
      f\"read_back_s {j['read_back_s']:.0f} verified {j['verified_records']}\")"
  done
done
