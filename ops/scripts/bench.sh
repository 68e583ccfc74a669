#!/usr/bin/env bash
# The benchmark set the node-host issue reports, in one run of one build (not part of CI).
# Prints one JSON object per line, labelled.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-10}"
cargo build --release -p paros >/dev/null
bin="${CARGO_TARGET_DIR:-target}/release/paros"
run() {
  local label="$1"; shift
  printf '%s ' "$label"
  "$bin" bench "$@" --duration-s "$secs" --json 2>/dev/null
}
run single_writer_batch1 --writers 1 --journals 1 --record-bytes 100 --batch 1
run writers64_batch1     --writers 64 --journals 64 --record-bytes 100 --batch 1
run single_writer_batch64 --writers 1 --journals 1 --record-bytes 100 --batch 64
run raw_fjall_batch64    --raw-fjall --record-bytes 100 --batch 64
