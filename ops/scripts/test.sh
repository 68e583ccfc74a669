#!/usr/bin/env bash
# The whole test suite: lints, every crate's tests, a simulation smoke sweep, and schemathesis
# against a running `paros dev`. Needs a Rust toolchain; schemathesis.sh installs what it needs
# itself (python3-venv from Debian if missing, schemathesis from PyPI into ~/.cache/paros).
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "== clippy"
cargo clippy --workspace --all-targets --release -- -D warnings

echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --release --no-fail-fast
else
  cargo test --workspace --release --no-fail-fast
fi

if [ -d cell/sim ]; then
  echo "== simulation smoke sweep"
  cargo run --release -p paros-sim -- sweep --seeds "${PAROS_SMOKE_SEEDS:-300}"
fi

echo "== schemathesis against paros dev"
bash ops/scripts/schemathesis.sh
