#!/usr/bin/env bash
# Everything CI checks: formatting, lints (warnings are errors) and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked
