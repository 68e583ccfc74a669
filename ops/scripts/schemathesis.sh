#!/usr/bin/env bash
# Contract fuzzing: schemathesis (PyPI) against /v1/openapi.json of a running `paros dev`.
#
# Installs schemathesis into a virtualenv under the cache dir when missing (and python3-venv
# from Debian when the machine lacks it), builds the release `paros`, starts `paros dev` on a
# free loopback port over a fresh data dir, signs up a tenant and runs schemathesis with the
# tenant's token (then, over the admin overview alone, with the admin token), a bounded example
# budget and the checks "no 5xx" (not_a_server_error) and "the response is what the document
# says" (status code, content type, body schema).
# Exits non-zero on any failure; stops `paros dev` with SIGINT on the way out.
#
# Knobs: PAROS_SCHEMATHESIS_EXAMPLES (examples per operation, default 50),
#        PAROS_SCHEMATHESIS_SEED (default 1: the run is reproducible; set "random" for a new one),
#        PAROS_SCHEMATHESIS_TIMEOUT (wall-clock seconds for the tenant's run, default 150; the
#        operator's run over the admin overview gets 60 s more),
#        PAROS_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/paros).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

SCHEMATHESIS_VERSION=4.32.5
cache="${PAROS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paros}"
venv="$cache/venv-schemathesis-$SCHEMATHESIS_VERSION"
examples="${PAROS_SCHEMATHESIS_EXAMPLES:-50}"
seed="${PAROS_SCHEMATHESIS_SEED:-1}"
budget="${PAROS_SCHEMATHESIS_TIMEOUT:-150}"
started=$SECONDS

# --- schemathesis, once per machine --------------------------------------------------------
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -qF "$SCHEMATHESIS_VERSION"; then
  echo "== installing schemathesis $SCHEMATHESIS_VERSION into $venv"
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    # Debian splits venv/ensurepip out of python3; a fresh machine needs them (we run as root).
    if command -v apt-get >/dev/null 2>&1; then
      sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
    else
      echo "schemathesis.sh: python3 with venv is needed and there is no apt-get to install it" >&2
      exit 1
    fi
  fi
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
"$venv/bin/schemathesis" --version
py="$venv/bin/python"

# --- paros dev -----------------------------------------------------------------------------
echo "== building paros (release)"
cargo build --release -p paros --quiet
target_dir=$(cargo metadata --format-version 1 --no-deps | "$py" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
paros="$target_dir/release/paros"

work=$(mktemp -d "${TMPDIR:-/tmp}/paros-schemathesis.XXXXXX")
dev_pid=""
cleanup() {
  local rc=$?
  if [ -n "$dev_pid" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -INT "$dev_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$dev_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$dev_pid" 2>/dev/null; then
      echo "schemathesis.sh: paros dev did not stop on SIGINT within 10 s" >&2
      kill -KILL "$dev_pid" 2>/dev/null || true
      rc=1
    fi
    wait "$dev_pid" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] && [ -s "$work/dev.err" ]; then
    echo "--- paros dev stderr (last 40 lines)" >&2
    tail -n 40 "$work/dev.err" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

echo "== starting paros dev"
"$paros" dev --listen 127.0.0.1:0 --data-dir "$work/data" >"$work/dev.out" 2>"$work/dev.err" &
dev_pid=$!
base=""
for _ in $(seq 1 600); do
  base=$(sed -n 's|^paros dev: serving \(http://[^ ]*\).*|\1|p' "$work/dev.out" | head -n 1)
  [ -n "$base" ] && grep -q '^admin token' "$work/dev.out" && break
  kill -0 "$dev_pid" 2>/dev/null || { echo "schemathesis.sh: paros dev exited before serving" >&2; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { echo "schemathesis.sh: paros dev did not print its address within 60 s" >&2; exit 1; }
echo "paros dev at $base"

# A tenant, and one journal of each mode for the examples in the document to find.
token=$("$py" - "$base" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def call(method, path, body, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())
token = call("POST", "/v1/signup", {"name": "schemathesis"})["token"]
call("POST", "/v1/journals", {"name": "orders"}, token)
call("POST", "/v1/journals", {"name": "events", "mode": "multi_writer"}, token)
print(token)
EOF
)

# --- schemathesis --------------------------------------------------------------------------
# One run as the tenant (every route; the admin overview answers it 403), then one as the
# operator over the admin overview alone, so its 200 answers are checked against the document.
admin=$(sed -n 's/^admin token[^:]*: //p' "$work/dev.out" | head -n 1)
[ -n "$admin" ] || { echo "schemathesis.sh: paros dev printed no admin token" >&2; exit 1; }
seed_args=()
[ "$seed" = "random" ] || seed_args=(--seed "$seed")
# The append session's body (application/x-ndjson) needs a serializer of our own.
export SCHEMATHESIS_HOOKS="$root/ops/scripts/schemathesis_hooks.py"
run_schemathesis() {
  local bearer=$1 seconds=$2
  shift 2
  # From the scratch dir: schemathesis keeps a `.schemathesis/` cache in its working directory.
  (cd "$work" && timeout --signal=INT --kill-after=10 "$seconds" \
    "$venv/bin/schemathesis" --config-file "$root/ops/scripts/schemathesis.toml" run "$base/v1/openapi.json" \
    --header "Authorization: Bearer $bearer" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --phases examples,coverage,fuzzing \
    --max-examples "$examples" \
    "${seed_args[@]}" \
    --request-timeout 10 \
    --continue-on-failure \
    --generation-database none \
    --no-color \
    --report junit --report-dir "$work/report" \
    "$@")
}
set +e
echo "== schemathesis as the tenant: $examples examples per operation, seed $seed"
run_schemathesis "$token" "$budget"
rc=$?
echo "== schemathesis as the operator: GET /v1/admin/overview and /v1/admin/cell"
run_schemathesis "$admin" 60 --include-path-regex '^/v1/admin/(overview|cell)$' --include-method GET
rc_admin=$?
set -e
for r in "$rc" "$rc_admin"; do
  if [ "$r" -eq 124 ] || [ "$r" -eq 130 ]; then
    echo "schemathesis.sh: schemathesis overran its budget" >&2
  fi
done
[ "$rc" -ne 0 ] || rc=$rc_admin
echo "== schemathesis.sh: exit $rc after $((SECONDS - started)) s"
exit "$rc"
