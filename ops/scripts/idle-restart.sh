#!/usr/bin/env bash
# An idle `paros dev` restarted on a copy of a data directory and asked nothing (not part of
# CI): its resident set every 5 s for SECS seconds, its peak, and the campaigns and leaderships
# its nodes counted (from `/metrics`). The restart's check-ins run in that time.
# Usage: ops/scripts/idle-restart.sh BIN DATA_DIR [SECS=45] (the directory is used as it is: pass a copy)
set -euo pipefail
bin="$1"; dir="$2"; secs="${3:-45}"
log=$(mktemp)
"$bin" dev --data-dir "$dir" --listen 127.0.0.1:0 >"$log" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null || true; rm -f "$log"' EXIT
rss=""
for _ in $(seq $((secs / 5))); do
  sleep 5
  rss="$rss $(($(awk '/VmRSS/ {print $2}' "/proc/$pid/status") / 1024))"
done
peak=$(($(awk '/VmHWM/ {print $2}' "/proc/$pid/status") / 1024))
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1)
counts=$(curl -s "$url/metrics" |
  awk '/^paros_gateway_node_(campaigns|leaderships_won)_total/ {split($1, n, "{"); s[n[1]] += $2} END {for (k in s) printf "%s %d  ", k, s[k]}')
echo "$bin: resident MB every 5 s:$rss; peak $peak MB; $counts"
