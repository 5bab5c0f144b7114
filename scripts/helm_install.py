"""Installs the fleetscaler chart into a real cluster with Helm's own Go SDK
(helm-python-sdk) and waits until its workloads are ready; prints the release as JSON.

Usage: helm_install.py KUBECONFIG CHART_DIR NAMESPACE VALUES_JSON

Run by tests/real/real_helm.rs against a real control plane (scripts/real-cluster.sh). Exits
non-zero with Helm's error when the install fails or does not get ready in time.
"""

from __future__ import annotations

import json
import sys

import helm_python as helm

RELEASE = "fleetscaler"


def main() -> int:
    kubeconfig, chart, namespace, values = sys.argv[1:5]
    config = helm.Config(kubeconfig_path=kubeconfig, namespace=namespace)
    try:
        release = config.install(
            chart,
            RELEASE,
            json.loads(values),
            namespace=namespace,
            create_namespace=True,
            wait="watcher",
            timeout=180,
        )
    except helm.HelmError as e:
        print(f"helm install failed: {e}", file=sys.stderr)
        return 1
    json.dump(release, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
