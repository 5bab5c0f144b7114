//! OpenShift's restricted-v2 SecurityContextConstraints as its admission applies them to a
//! pod spec, for the chart's OpenShift renders: what it would refuse. There is no OpenShift
//! API server to ask here, so its rules (OpenShift 4.11 and later) are written down.

use serde_json::Value;

/// The UIDs and GIDs of a namespace (its `openshift.io/sa.scc.uid-range` and
/// `openshift.io/sa.scc.supplemental-groups` annotations): OpenShift gives every project a
/// block of 10,000 far above the image's own 65532.
pub const NAMESPACE_RANGE: std::ops::Range<i64> = 1_000_650_000..1_000_660_000;

/// The volume types restricted-v2 allows.
const VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// What restricted-v2 refuses in `pod` (a PodSpec) for a namespace whose range is `range`:
/// host namespaces and ports, privileged or escalating containers, capabilities beyond
/// NET_BIND_SERVICE or ALL not dropped, UIDs and fsGroups outside the range (MustRunAsRange,
/// MustRunAs), fixed SELinux options, a seccomp profile other than the runtime's default,
/// and volume types it does not list.
pub fn restricted_v2(pod: &Value, range: std::ops::Range<i64>) -> Vec<String> {
    let mut refused = Vec::new();
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod[host] == true {
            refused.push(host.to_string());
        }
    }
    let psc = &pod["securityContext"];
    check_ids(psc, "pod", &range, &mut refused);
    if let Some(group) = psc["fsGroup"].as_i64()
        && !range.contains(&group)
    {
        refused.push(format!("pod: fsGroup {group} outside {range:?}"));
    }
    check_seccomp(psc, "pod", &mut refused);
    let containers = ["initContainers", "containers"]
        .iter()
        .flat_map(|k| pod[*k].as_array().cloned().unwrap_or_default());
    for c in containers {
        let name = format!("container {}", c["name"]);
        let sc = &c["securityContext"];
        if sc["privileged"] == true {
            refused.push(format!("{name}: privileged"));
        }
        if sc["allowPrivilegeEscalation"] != false {
            refused.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        let drop = sc["capabilities"]["drop"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !drop.iter().any(|d| d == "ALL") {
            refused.push(format!("{name}: capabilities.drop lacks ALL"));
        }
        for add in sc["capabilities"]["add"].as_array().into_iter().flatten() {
            if add != "NET_BIND_SERVICE" {
                refused.push(format!("{name}: capability {add} added"));
            }
        }
        check_ids(sc, &name, &range, &mut refused);
        check_seccomp(sc, &name, &mut refused);
        for port in c["ports"].as_array().into_iter().flatten() {
            if port["hostPort"].as_i64().is_some_and(|p| p != 0) {
                refused.push(format!("{name}: hostPort {}", port["hostPort"]));
            }
        }
    }
    for v in pod["volumes"].as_array().into_iter().flatten() {
        let kinds: Vec<&String> = v
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .filter(|k| *k != "name")
            .collect();
        for kind in kinds {
            if !VOLUMES.contains(&kind.as_str()) {
                refused.push(format!("volume {}: type {kind}", v["name"]));
            }
        }
    }
    refused
}

/// runAsUser must fall in the namespace's range (MustRunAsRange); SELinux options are the
/// namespace's (MustRunAs), so any set by the chart would have to match them.
fn check_ids(sc: &Value, what: &str, range: &std::ops::Range<i64>, refused: &mut Vec<String>) {
    if let Some(uid) = sc["runAsUser"].as_i64()
        && !range.contains(&uid)
    {
        refused.push(format!("{what}: runAsUser {uid} outside {range:?}"));
    }
    if !sc["seLinuxOptions"].is_null() {
        refused.push(format!("{what}: seLinuxOptions {}", sc["seLinuxOptions"]));
    }
}

fn check_seccomp(sc: &Value, what: &str, refused: &mut Vec<String>) {
    let profile = &sc["seccompProfile"]["type"];
    if !(profile.is_null() || profile == "RuntimeDefault") {
        refused.push(format!("{what}: seccompProfile {profile}"));
    }
}
