#!/usr/bin/env bash
# Lints and renders charts/fleetscaler with real Helm (v4's Go SDK, through the PyPI package
# helm-python-sdk: no helm binary), for the default values, the examples, the optional
# dashboard and PrometheusRule, and OpenShift (as Helm sees it through the API versions the
# cluster serves), and upstream cluster-autoscaler chart's value names beside the chart's own,
# and checks that bad values are refused with the message expected (scripts/helm_check.py says
# what exactly). The rendered manifests go to OUT_DIR (default target/helm-render), where
# tests/fleet/helm_chart.rs and tests/fleet/chart_*.rs check them.
#
# The SDK is installed once into a virtualenv under target/helm-venv. `helm-check.sh
# --python` only makes sure of that and prints the virtualenv's interpreter (for
# scripts/helm_install.py, which tests/real/real_helm.rs runs).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/helm-render}
sdk_version=0.2.2
venv=target/helm-venv

have_sdk() {
    "$venv/bin/python" -c "import helm_python, sys; sys.exit(helm_python.__version__ != '$sdk_version')" 2>/dev/null
}

make_venv() {
    if ! command -v python3 >/dev/null; then
        if [ "${CI:-}" = true ]; then
            apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null
        else
            echo "helm-check: python3 is missing; install it (Debian: apt-get install python3 python3-venv)" >&2
            exit 1
        fi
    fi
    rm -rf "$venv"
    if ! python3 -m venv "$venv" 2>/dev/null; then
        if [ "${CI:-}" = true ]; then
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
            rm -rf "$venv"
            python3 -m venv "$venv"
        else
            echo "helm-check: python3 cannot make a virtualenv; install venv (Debian: apt-get install python3-venv)" >&2
            exit 1
        fi
    fi
    if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "helm-python-sdk==$sdk_version"; then
        echo "helm-check: pip could not install helm-python-sdk==$sdk_version from PyPI into $venv" >&2
        exit 1
    fi
}

have_sdk || make_venv
if [ "$out" = --python ]; then
    echo "$PWD/$venv/bin/python"
    exit 0
fi
exec "$venv/bin/python" scripts/helm_check.py charts/fleetscaler "$out"
