"""Lints and renders the fleetscaler chart with Helm's own Go SDK (helm-python-sdk).

Usage: helm_check.py CHART_DIR OUT_DIR

- `helm lint --strict` (Kubernetes v1.32) for the default values, every file in
  CHART_DIR/examples and the LINTED cases: any error or warning fails; info messages are
  printed.
- Renders each case below into OUT_DIR/<case>.yaml (every manifest, `---` between them),
  which tests/fleet/helm_chart.rs and tests/fleet/chart_*.rs parse and check; a case in
  API_VERSIONS is rendered as for a cluster that serves those API versions (OpenShift).
  Renders that must be the same text (upstream cluster-autoscaler chart's value names against
  the chart's own) are compared there, by tests/fleet/chart_values.rs.
- Renders values that must be refused (schema violations, unsafe combinations, upstream values
  with no meaning here) and fails if one renders, or is refused without the words expected.

Exits non-zero with every problem listed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import helm_python as helm
from helm_python import _native

RELEASE = "fleetscaler"
NAMESPACE = "fleetscaler"
KUBE_VERSION = "v1.32.0"

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://api.example.com:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: prod-east, context: {cluster: c, user: u}}]
current-context: prod-east
"""


# A context name with everything a TOML string must escape.
EDGE_CONTEXT = 'a "quoted" \\ context\twith\nnewline, <ü> & #hash'


# An extra object given as a string of YAML, as upstream's chart users often write them.
EXTRA_ROLE = """apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Release.Name }}-plugin
  namespace: inventory
rules:
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get]
"""


# The same settings under the chart's own names and under upstream cluster-autoscaler
# chart's: the renders must be the same text. Over TLS from a Secret of yours, so that no
# certificate is made anew in each render.
UPSTREAM_BASE = {"serving": {"tls": {"source": "secret", "existingSecret": "my-tls"}},
                 "podDisruptionBudget": {"maxUnavailable": 1, "annotations": {"team": "platform"}}}
RELABEL = [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]
DROP_GO = [{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}]
OWN_NAMES = {
    **UPSTREAM_BASE,
    "metrics": {"serviceMonitor": {
        "enabled": True, "interval": "15s", "labels": {"release": "prom"},
        "annotations": {"team": "platform"}, "relabelings": RELABEL,
        "metricRelabelings": DROP_GO}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
    "extraEnv": [{"name": "FLEETSCALER_DEFAULTS__MAX_NODES_TOTAL", "value": "100"},
                 {"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
    "serviceAccount": {"create": True, "name": "fleet-hub",
                       "annotations": {"example.com/owner": "platform"}},
    "securityContext": {"privileged": False},
}
UPSTREAM_NAMES = {
    **UPSTREAM_BASE,
    # Upstream's defaults for what has no meaning here change nothing.
    "podDisruptionBudget": {**UPSTREAM_BASE["podDisruptionBudget"], "selector": {}},
    "serviceMonitor": {
        "enabled": True, "interval": "15s", "namespace": "fleetscaler", "path": "/metrics",
        "selector": {"release": "prom"}, "annotations": {"team": "platform"},
        "relabelings": RELABEL, "metricRelabelings": DROP_GO},
    "prometheusRule": {"enabled": True, "additionalLabels": {"release": "prom"}},
    "extraEnv": {"FLEETSCALER_DEFAULTS__MAX_NODES_TOTAL": 100,
                 "HTTPS_PROXY": "http://proxy:3128"},
    "rbac": {"serviceAccount": {"create": True, "name": "fleet-hub",
                                "annotations": {"example.com/owner": "platform"},
                                "automountServiceAccountToken": True}},
    "containerSecurityContext": {"privileged": False},
}
# Both names, every upstream one saying otherwise: the chart's own names win each time.
BOTH_NAMES = {
    **OWN_NAMES,
    "serviceMonitor": {
        "enabled": False, "interval": "60s", "selector": {"release": "other"},
        "annotations": {"team": "other"}, "relabelings": DROP_GO, "metricRelabelings": RELABEL},
    "prometheusRule": {**OWN_NAMES["prometheusRule"], "additionalLabels": {"release": "other"}},
    "rbac": {"serviceAccount": {"create": False, "name": "other",
                                "annotations": {"example.com/owner": "other"}}},
    "containerSecurityContext": {"privileged": True},
}


def example(chart: Path, name: str) -> dict:
    return helm.values_from_yaml((chart / "examples" / name).read_text())


def cases(chart: Path) -> dict[str, dict]:
    """The renders tests/fleet/helm_chart.rs and tests/fleet/chart_*.rs check, by name."""
    return {
        "default": {},
        "multi-cluster": example(chart, "multi-cluster.yaml"),
        "kubeconfig-files": {
            "kubeconfigs": {"files": {"prod-east.yaml": KUBECONFIG}},
            "fleet": {"clusters": [{"name": "prod-east"}]},
        },
        "config-toml": {
            "configToml": '[[clusters]]\nname = "prod-east"\n',
            "kubeconfigs": {"existingSecret": "mine"},
        },
        # Strings and numbers the TOML writer must carry exactly.
        "toml-edge": {
            "fleet": {
                "defaults": {
                    "pod_priority_threshold": -10,
                    "max_nodes_total": 7,
                    "scale_down_utilization_threshold": 0.65,
                    "balancing_ignored_labels": ["topology.ebs.csi.aws.com/zone"],
                    "priorities": {"5": [".*\\.spot$"]},
                    "gpus": [],
                },
                "clusters": [{"name": "edge", "context": EDGE_CONTEXT}],
            },
        },
        # The optional PrometheusRule and Grafana dashboard, for a Grafana whose sidecar
        # selects another label (the multi-cluster example has kube-prometheus-stack's).
        "observability": {
            "prometheusRule": {"enabled": True, "annotations": {"team": "platform"}},
            "grafanaDashboard": {"enabled": True, "label": "grafana.example.com/dashboard",
                                 "labelValue": "fleet", "labels": {"team": "platform"}},
        },
        # OpenShift: found by the API it serves (API_VERSIONS), forced on by the value, and
        # turned off by it on a cluster that serves the API.
        "openshift": {},
        "openshift-forced": {"openshift": {"enabled": True}},
        "openshift-off": {"openshift": {"enabled": False}},
        # The certificate from cert-manager, Prometheus with a token from a Secret, the
        # ClusterRoles bound, and the serving limits passed through to fleet.toml.
        "cert-manager": {
            "serving": {"tls": {"source": "certManager", "certManager": {
                "issuerRef": {"name": "platform-ca", "kind": "ClusterIssuer"}}}},
            "metrics": {"serviceMonitor": {"enabled": True,
                                           "bearerTokenSecret": {"name": "scraper-token"}}},
            "rbac": {
                "metricsReaderSubjects": [{"kind": "ServiceAccount", "name": "prometheus",
                                           "namespace": "monitoring"}],
                "viewerSubjects": [{"kind": "ServiceAccount", "name": "status",
                                    "namespace": "platform"}],
            },
            "fleet": {"hub": {"serving": {"max_connections": 64, "request_timeout": "15s"}}},
        },
        # The token from a Secret named as the Prometheus Operator names it (authorization),
        # beside the older bearerTokenSecret, which it wins over.
        "monitor-authorization": {
            "metrics": {"serviceMonitor": {
                "enabled": True,
                "authorization": {"credentials": {"name": "scraper", "key": "sa-token"}},
                "bearerTokenSecret": {"name": "older-name"}}},
        },
        # Your own Secret, served over TLS to anyone (authentication none), with a
        # ServiceMonitor trusting whatever it is given.
        "tls-secret": {
            "serving": {"authentication": "none",
                        "tls": {"source": "secret", "existingSecret": "my-tls"}},
            "metrics": {"serviceMonitor": {"enabled": True,
                                           "tlsConfig": {"insecureSkipVerify": True}}},
            "configToml": '[[clusters]]\nname = "prod-east"\n',
        },
        # Three replicas sharing the clusters through Leases.
        "sharding": {"replicaCount": 3, "sharding": {"enabled": True},
                     "fleet": {"hub": {"sharding": {"lease_duration": "20s"}}}},
        # Clusters found in the inventory: every source on, in every namespace (a ClusterRole),
        # which has to be asked for.
        "membership": {
            "membership": {"enabled": True, "allNamespaces": True, "secrets": {"argocd": True},
                           "clusterProfiles": {"enabled": True},
                           "managedClusters": {"enabled": True}},
            "fleet": {"membership": {
                "resync": "20s",
                "cluster_profiles": {"providers": {"open-cluster-management": {
                    "command": "/usr/local/bin/cp-creds", "args": ["--v=1"],
                    "env": {"CP_CREDS_MODE": "token"}}}},
                "managed_clusters": {"service_account": "fleetscaler-hub"}}},
        },
        # Secrets and ClusterProfiles of two namespaces only (a Role in each), with the
        # plugin copied into a volume by an init container.
        "membership-namespaced": {
            "membership": {"enabled": True, "namespaces": ["fleet", "inventory"],
                           "clusterProfiles": {"enabled": True}},
            "fleet": {"membership": {"cluster_profiles": {"providers": {
                "gke-fleet": {"command": "/plugins/gke-auth"}}}}},
            "initContainers": [{"name": "plugins", "image": "registry.example.com/gke-auth:1",
                                "command": ["cp", "/gke-auth", "/plugins/gke-auth"],
                                "volumeMounts": [{"name": "plugins", "mountPath": "/plugins"}]}],
            "extraVolumes": [{"name": "plugins", "emptyDir": {}}],
            "extraVolumeMounts": [{"name": "plugins", "mountPath": "/plugins", "readOnly": True}],
        },
        # ACM's ManagedClusters alone: cluster-scoped, read everywhere without allNamespaces.
        "membership-managed": {
            "membership": {"enabled": True, "secrets": {"enabled": False},
                           "managedClusters": {"enabled": True}},
        },
        # configToml: membership from the environment.
        "membership-config-toml": {
            "configToml": '[[clusters]]\nname = "prod-east"\n',
            "membership": {"enabled": True, "namespaces": ["fleet"]},
        },
        # The Deployment's scheduling and rollout, extra objects (a map and a string, both
        # through tpl) and extra rules, on one plain replica whose token only those rules need.
        "deployment-values": {
            "replicaCount": 1,
            "leaderElection": {"enabled": False},
            "serving": {"authentication": "none", "tls": {"enabled": False}},
            "priorityClassName": "fleet-critical",
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                 "whenUnsatisfiable": "ScheduleAnyway"},
                {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
                 "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"team": "platform"}}},
            ],
            "updateStrategy": {"type": "Recreate"},
            "revisionHistoryLimit": 3,
            "rbac": {"additionalRules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["plugin-token"],
                 "verbs": ["get"]}]},
            "extraObjects": [
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "{{ include \"fleetscaler.fullname\" . }}-extra"},
                 "data": {"namespace": "{{ .Release.Namespace }}"}},
                EXTRA_ROLE,
            ],
        },
        # Upstream cluster-autoscaler chart's names: the same as the chart's own, and losing
        # to them where both are given.
        "upstream-own-names": OWN_NAMES,
        "upstream-names": UPSTREAM_NAMES,
        "upstream-both-names": BOTH_NAMES,
        # Upstream's names filling what the chart leaves empty (the ServiceMonitor's switch
        # and interval, the ServiceAccount's create) and adding to the security lock-down
        # without loosening it; the PrometheusRule's namespace, interval and rules of yours.
        "upstream-fills": {
            "serviceMonitor": {"enabled": True, "interval": "10s"},
            "rbac": {"serviceAccount": {"create": False, "name": "existing-sa"}},
            "containerSecurityContext": {"readOnlyRootFilesystem": False, "runAsUser": 1000},
            "prometheusRule": {
                "enabled": True, "namespace": "monitoring", "interval": "1m",
                "rules": [{"alert": "FleetscalerAbsent",
                           "expr": 'absent(up{job="{{ include "fleetscaler.fullname" . }}"})',
                           "for": "5m", "labels": {"severity": "critical"}}]},
        },
        # Plain and open, as the chart served before: one port, no certificate, no reviews.
        "single": {
            "replicaCount": 1,
            "leaderElection": {"enabled": False},
            "serving": {"authentication": "none", "tls": {"enabled": False}},
            "networkPolicy": {
                "enabled": True,
                "egress": {
                    "allowAll": False,
                    "rules": [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
                               "ports": [{"port": 6443, "protocol": "TCP"}]}],
                },
            },
        },
    }


# Cases rendered as for a cluster that serves these API versions besides Kubernetes' own.
OPENSHIFT_API = "security.openshift.io/v1"
API_VERSIONS = {"openshift": [OPENSHIFT_API], "openshift-off": [OPENSHIFT_API]}

# Cases linted besides the default values and the examples.
LINTED = ["observability", "openshift-forced", "cert-manager", "single", "sharding",
          "membership", "deployment-values", "upstream-names", "upstream-fills"]


# Values that must not render, with words the error must contain (for the chart's own
# refusals, the message a user reads).
REFUSED = {
    "unknown top-level key": ({"replicas": 2}, "replicas"),
    "replicaCount of the wrong type": ({"replicaCount": "two"}, "replicaCount"),
    "a cluster name that YAML read as a boolean": (
        {"fleet": {"clusters": [{"name": True}]}}, "name"),
    "a cluster without a name": ({"fleet": {"clusters": [{"context": "x"}]}}, "name"),
    "a bad duration": ({"fleet": {"hub": {"scan_interval": "10"}}}, "scan_interval"),
    "hub.listen, which the chart sets": ({"fleet": {"hub": {"listen": "0.0.0.0:1"}}}, "listen"),
    "a misspelt image key": ({"image": {"repo": "x"}}, "repo"),
    "two replicas without leader election": (
        {"leaderElection": {"enabled": False}}, "leaderElection.enabled"),
    "hub.sharding.enabled, which the chart sets": (
        {"fleet": {"hub": {"sharding": {"enabled": True}}}}, "enabled"),
    "a misspelt hub.sharding key": (
        {"fleet": {"hub": {"sharding": {"lease_durations": "9s"}}}}, "lease_durations"),
    "a kubeconfig key that is no file name": (
        {"kubeconfigs": {"files": {"a/b": "x"}}}, "a/b"),
    "a misspelt dashboard key": ({"grafanaDashboard": {"enable": True}}, "enable"),
    "a dashboard label value that is no label value": (
        {"grafanaDashboard": {"labelValue": 1}}, "labelValue"),
    "a rule label that is no string": (
        {"prometheusRule": {"labels": {"release": True}}}, "release"),
    "openshift.enabled neither auto nor a boolean": (
        {"openshift": {"enabled": "yes"}}, "/openshift/enabled"),
    "an authentication the hub does not know": (
        {"serving": {"authentication": "oidc"}}, "authentication"),
    "tokens over plain HTTP": (
        {"serving": {"tls": {"enabled": False}}}, "serving.tls.enabled"),
    "a certificate source the chart does not know": (
        {"serving": {"tls": {"source": "vault"}}}, "source"),
    "cert-manager without an issuer": (
        {"serving": {"tls": {"source": "certManager"}}}, "issuerRef"),
    "a Secret source without the Secret": (
        {"serving": {"tls": {"source": "secret"}}}, "existingSecret"),
    "the probes on the main port": ({"serving": {"probePort": 8080}}, "probePort"),
    "hub.serving's certificate, which the chart sets": (
        {"fleet": {"hub": {"serving": {"tls_cert_file": "/x"}}}}, "tls_cert_file"),
    "a misspelt hub.serving key": (
        {"fleet": {"hub": {"serving": {"max_conections": 3}}}}, "max_conections"),
    "ClusterProfiles without a credential plugin": (
        {"membership": {"enabled": True, "namespaces": ["fleet"],
                        "clusterProfiles": {"enabled": True}}}, "providers"),
    "Secrets of every namespace without allNamespaces": (
        {"membership": {"enabled": True}},
        "membership.secrets (every Secret of each namespace it reads): list the inventory's "
        "namespaces in membership.namespaces, or set membership.allNamespaces: true"),
    "ClusterProfiles of every namespace without allNamespaces": (
        {"membership": {"enabled": True, "secrets": {"enabled": False},
                        "clusterProfiles": {"enabled": True}},
         "fleet": {"membership": {"cluster_profiles": {"providers": {"p": {"command": "/p"}}}}}},
        "membership.clusterProfiles: list the inventory's namespaces in membership.namespaces"),
    "allNamespaces beside named namespaces": (
        {"membership": {"enabled": True, "allNamespaces": True, "namespaces": ["fleet"]}},
        "membership.allNamespaces and membership.namespaces exclude each other"),
    "allNamespaces that is no boolean": (
        {"membership": {"allNamespaces": "yes"}}, "/membership/allNamespaces"),
    "membership.enabled in fleet, which the chart sets": (
        {"fleet": {"membership": {"enabled": True}}}, "enabled"),
    "a membership namespace that is no namespace name": (
        {"membership": {"namespaces": ["Fleet"]}}, "namespaces"),
    "a credential plugin without a command": (
        {"fleet": {"membership": {"cluster_profiles": {"providers": {"p": {"args": []}}}}}},
        "command"),
    "an extra volume mount without a path": (
        {"extraVolumeMounts": [{"name": "plugins"}]}, "mountPath"),
    "a misspelt fleet.membership key": (
        {"fleet": {"membership": {"resyncs": "1s"}}}, "resyncs"),
    "a ServiceMonitor authorization other than Bearer": (
        {"metrics": {"serviceMonitor": {"authorization": {"type": "Basic"}}}},
        "at '/metrics/serviceMonitor/authorization/type': value must be 'Bearer'"),
    "Recreate with rollingUpdate": (
        {"updateStrategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}},
        "updateStrategy.rollingUpdate goes with type RollingUpdate only"),
    "an update strategy the Deployment does not know": (
        {"updateStrategy": {"type": "BlueGreen"}}, "/updateStrategy/type"),
    "a negative revisionHistoryLimit": (
        {"revisionHistoryLimit": -1}, "/revisionHistoryLimit"),
    "a spread constraint without a topologyKey": (
        {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
        "topologyKey"),
    "an extra object without a kind": (
        {"extraObjects": [{"apiVersion": "v1", "metadata": {"name": "x"}}]}, "/extraObjects/0"),
    "an additional rule without verbs": (
        {"rbac": {"additionalRules": [{"apiGroups": [""], "resources": ["secrets"]}]}},
        "verbs"),
    "upstream's ServiceMonitor in another namespace": (
        {"serviceMonitor": {"enabled": True, "namespace": "monitoring"}},
        'serviceMonitor.namespace "monitoring" (upstream cluster-autoscaler\'s chart) must be '
        'the release namespace "fleetscaler", or unset'),
    "upstream's ServiceMonitor on another path": (
        {"serviceMonitor": {"path": "/custom"}},
        "at '/serviceMonitor/path': value must be '/metrics'"),
    "an upstream ServiceMonitor key with no meaning here": (
        {"serviceMonitor": {"jobLabel": "app"}}, "jobLabel"),
    "upstream relabelings as a map": (
        {"serviceMonitor": {"relabelings": {"a": "b"}}}, "/serviceMonitor/relabelings"),
    "upstream's PodDisruptionBudget selector": (
        {"podDisruptionBudget": {"selector": {"app": "x"}}},
        "podDisruptionBudget.selector (upstream cluster-autoscaler's chart) has no equivalent"),
    "minAvailable and maxUnavailable": (
        {"podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}},
        "podDisruptionBudget: set minAvailable or maxUnavailable, not both"),
    "upstream's automountServiceAccountToken false": (
        {"rbac": {"serviceAccount": {"automountServiceAccountToken": False}}},
        "rbac.serviceAccount.automountServiceAccountToken false (upstream cluster-autoscaler's "
        "chart) has no equivalent"),
    "upstream's pod securityContext in the container's": (
        {"securityContext": {"fsGroup": 65534}},
        "securityContext.fsGroup: securityContext is the container's here (upstream "
        "cluster-autoscaler's securityContext is the pod's); move fsGroup to podSecurityContext"),
    "an extraEnv map value that is no scalar": (
        {"extraEnv": {"X": {"valueFrom": {}}}}, "/extraEnv"),
    "a PrometheusRule namespace that is no namespace name": (
        {"prometheusRule": {"namespace": "Monitoring"}}, "/prometheusRule/namespace"),
    "a binding subject without a name": (
        {"rbac": {"viewerSubjects": [{"kind": "Group"}]}}, "name"),
}


def lint(chart: Path, label: str, values: dict, problems: list[str]) -> float:
    started = time.monotonic()
    report = helm.lint(chart, values, strict=True, namespace=NAMESPACE,
                       kube_version=KUBE_VERSION)
    took = time.monotonic() - started
    for message in report.get("messages", []):
        severity = message.get("severity", 0)
        line = f"lint {label}: [{severity}] {message.get('path')}: {message.get('error')}"
        print(line)
        if severity >= 2:
            problems.append(line)
    for error in report.get("errors", []) or []:
        problems.append(f"lint {label}: {error}")
    return took


def render(chart_handle: helm.Chart, values: dict, api_versions: list[str] | None = None) -> str:
    # Chart.render of helm-python-sdk 0.2.2 (pinned in helm-check.sh) passes no API versions
    # on, but the render function of its C library reads them (`helm template
    # --api-versions`), so it is called with the options Chart.render would give plus those.
    opts = {"name": RELEASE, "namespace": NAMESPACE, "is_install": True}
    if api_versions:
        opts["api_versions"] = api_versions
    manifests = json.loads(_native.call_string(
        "helm_render", chart_handle._raw(), json.dumps(values), json.dumps(opts)))
    docs = []
    for path in sorted(manifests):
        if path.endswith("NOTES.txt"):
            continue
        text = manifests[path].strip()
        if text:
            docs.append(f"# Source: {path}\n{text}\n")
    return "---\n".join(docs)


def main() -> int:
    chart = Path(sys.argv[1]).resolve()
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    print(f"helm-python-sdk {helm.__version__}, Helm {helm.helm_sdk_version()}")

    lint_time = lint(chart, "default values", {}, problems)
    for name in sorted(os.listdir(chart / "examples")):
        lint_time += lint(chart, f"examples/{name}", example(chart, name), problems)
    for name in LINTED:
        lint_time += lint(chart, f"case {name}", cases(chart)[name], problems)

    render_time = 0.0
    with helm.Chart.load(chart) as handle:
        for name, values in cases(chart).items():
            started = time.monotonic()
            try:
                text = render(handle, values, API_VERSIONS.get(name, []))
            except helm.HelmError as error:
                problems.append(f"render {name}: {error}")
                continue
            render_time += time.monotonic() - started
            (out / f"{name}.yaml").write_text(text)
        for what, (values, word) in REFUSED.items():
            try:
                render(handle, values)
                problems.append(f"rendered, but must be refused: {what} ({values})")
            except helm.HelmError as error:
                if word not in str(error):
                    problems.append(f"refused for another reason: {what}: {error}")

    print(f"lint: {lint_time:.2f} s; {len(cases(chart))} renders: {render_time:.2f} s; "
          f"{len(REFUSED)} bad values refused; manifests in {out}")
    for p in problems:
        print(f"FAIL {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
