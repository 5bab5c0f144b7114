#!/usr/bin/env bash
# Everything CI checks: formatting, lints (warnings are errors) and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# tests/dashboard.rs drives headless Chromium (Debian's `chromium`).
if [ "${CI:-}" = "true" ] && ! command -v chromium >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked
