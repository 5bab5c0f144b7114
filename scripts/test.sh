#!/usr/bin/env bash
# Everything CI checks: formatting, lints (warnings are errors) and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
# The Helm chart: lint and render with real Helm (tests/helm_chart.rs checks the output).
scripts/helm-check.sh
cargo test --all-targets --locked
