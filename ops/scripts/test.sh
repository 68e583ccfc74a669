#!/usr/bin/env bash
# The whole test suite: formatting, lints, every crate's tests (the house rules among them:
# ops/tests/house.rs), a simulation smoke sweep, and schemathesis against a running `paros dev`.
# Needs a Rust toolchain; installs Debian's chromium when missing (the headless /ui test), and
# schemathesis.sh installs what it needs itself (python3-venv from Debian if missing,
# schemathesis from PyPI into ~/.cache/paros).
set -euo pipefail
cd "$(dirname "$0")/../.."

# The /ui test drives Debian's chromium headless; install it once per machine (we run as root
# in CI; elsewhere through sudo).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (for the /ui test)"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: the /ui test needs chromium and there is no apt-get to install it" >&2
    exit 1
  fi
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

echo "== rustfmt"
cargo fmt --all --check

echo "== clippy"
cargo clippy --workspace --all-targets --release -- -D warnings

echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --release --no-fail-fast
else
  cargo test --workspace --release --no-fail-fast
fi

# nextest runs no doctests: the crate docs' examples (paros-client's run against its fake).
echo "== doctests"
cargo test --doc --workspace --release

if [ -d cell/sim ]; then
  echo "== simulation smoke sweep"
  cargo run --release -p paros-sim -- sweep --seeds "${PAROS_SMOKE_SEEDS:-300}"
fi

echo "== schemathesis against paros dev"
bash ops/scripts/schemathesis.sh
