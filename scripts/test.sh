#!/usr/bin/env bash
# Everything CI checks: formatting, lints (warnings are errors) and every test.
# Under CI (CI=true), the outside tools the tests need are installed first.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages some tests run: promtool (package prometheus) checks /metrics;
# tests/fleet/dashboard.rs drives headless Chromium.
need_debian() {
    local tool=$1 package=$2
    command -v "$tool" >/dev/null && return
    if [ "${CI:-}" = "true" ]; then
        echo "installing $package (for $tool)"
        local sudo=""
        [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >/dev/null
    else
        echo "note: $tool is missing; the tests that need it will fail (apt-get install $package)" >&2
    fi
}
# One-shot builds: incremental artifacts would only cost disk and time.
[ "${CI:-}" != "true" ] || export CARGO_INCREMENTAL=0

need_debian promtool prometheus
need_debian chromium chromium
# tests/fleet/cli_demo.rs reads the demo's live view in a tmux pane, as a person sees it.
need_debian tmux tmux
# scripts/real-cluster.sh makes certificates with openssl and probes health with curl.
need_debian openssl openssl
need_debian curl curl
# scripts/image.sh builds and runs the image (tests/real/image.rs) with podman; runc is its OCI
# runtime (Debian's crun refuses this machine's cgroup layout).
need_debian podman podman
need_debian runc runc

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The Helm chart: lint and render with real Helm (tests/fleet/helm_chart.rs checks the output).
scripts/helm-check.sh
# Real Kubernetes (tests/real/, the versus-upstream bench): kube-apiserver, etcd,
# controller-manager, scheduler, kubectl, kwok and upstream cluster-autoscaler, built from
# their Go modules once per machine (cached under ~/.cache/fleetscaler).
scripts/real-cluster.sh build --upstream >/dev/null
# The built test bed needs neither of Go's caches again; on a CI machine their ~7 GB are
# disk the Rust test binaries need.
if [ "${CI:-}" = "true" ]; then
    go clean -cache -modcache
fi
# The image's release binary, once, before the tests (tests/real/image.rs builds the image from it).
# Without the release profile's link-time optimisation: the tests check the image, not its
# speed (benches do, with it), and thin LTO doubles this build on two cores. Exported, so the
# test's own call of image.sh finds the same build.
export CARGO_PROFILE_RELEASE_LTO=false
scripts/image.sh binary
cargo test --workspace --all-targets --locked
