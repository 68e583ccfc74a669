#!/usr/bin/env bash
# Where the gateway's microseconds go: a fresh `paros dev` on a temporary directory under
# `perf record -g` while `paros bench --target` drives it with W writers on W journals for SECS
# seconds; prints the bench's report (its CPU per record by thread role) and perf's top
# symbols by self time (`perf report --no-children`), then by thread name (`--sort comm`).
# usage: ops/scripts/profile-http.sh BIN [WRITERS] [SECS]   (BIN: a release `paros`; its
#        debug info, profile.release debug = 1, names the symbols)
# env:   BENCH_ARGS="--session" (more `paros bench` flags, e.g. --session, --http1, --in-flight N);
#        TOP=n symbols shown (40); CALLGRAPH=dwarf for whole stacks (large, slow; default fp);
#        KEEP=1 keeps the temporary directory with perf.data (else it is deleted);
#        DEV_ARGS="--replicas 0" (more `paros dev` flags).
# Needs perf (/usr/bin/perf) and the right to profile the process (root, or
# kernel.perf_event_paranoid <= 1).
set -euo pipefail
BIN=$(realpath "$1"); W=${2:-64}; S=${3:-10}; TOP=${TOP:-40}; CALLGRAPH=${CALLGRAPH:-fp}
D=$(mktemp -d /tmp/door-profile-XXXXXX)
cleanup() { [ "${KEEP:-0}" = 1 ] && echo "kept $D" >&2 || rm -rf "$D"; }
trap cleanup EXIT
"$BIN" dev --listen 127.0.0.1:0 --data-dir "$D/data" --quota-requests-per-s 1000000 ${DEV_ARGS:-} > "$D/dev.out" 2>/dev/null &
DEV=$!
for _ in $(seq 100); do grep -q "serving http" "$D/dev.out" 2>/dev/null && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$D/dev.out" | head -1)
# The bench signs up, creates and claims first (a second or two); perf samples the whole run.
perf record -q -F 999 --call-graph "$CALLGRAPH" -p "$DEV" -o "$D/perf.data" 2> "$D/perf.err" &
PERF=$!
# shellcheck disable=SC2086
"$BIN" bench --target "$URL" --writers "$W" --journals "$W" --duration-s "$S" ${BENCH_ARGS:-} > "$D/bench.out"
kill -INT "$PERF"; wait "$PERF" || true
kill -INT "$DEV"; wait "$DEV" || true
cat "$D/bench.out"
echo
echo "== perf: top $TOP symbols by self time (the whole dev process, claims and read-back included) =="
perf report -i "$D/perf.data" --no-children --stdio --sort dso,symbol --percent-limit 0.3 -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | sed -E 's/[[:space:]-]+$//' | head -n "$TOP"
echo
echo "== perf: top $TOP symbols of tokio's threads (HTTP, auth, handlers, the hop to the node) =="
perf report -i "$D/perf.data" --no-children --stdio --comms tokio-rt-worker,tokio-runtime-w --sort dso,symbol \
    --percent-limit 0.3 -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | sed -E 's/[[:space:]-]+$//' | head -n "$TOP"
echo
echo "== perf: by thread name =="
perf report -i "$D/perf.data" --no-children --stdio --sort comm -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | sed -E 's/[[:space:]-]+$//' | head -n 15
