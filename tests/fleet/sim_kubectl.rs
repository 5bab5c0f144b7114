#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! kubectl against the simulated fleet: get, scale, watch and apply, as a person would use
//! them. kubectl is the test bed's own build (`scripts/real-cluster.sh build`, from
//! `k8s.io/kubernetes/cmd/kubectl`), the same one the real control planes are checked with,
//! so a machine without kubectl runs this test too.

use crate::sim_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::{FleetSettings, Shape, Timing};
use sim_support::eventually;

/// The test bed's kubectl (built once per machine, cached).
pub(crate) fn kubectl_bin() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-cluster.sh");
    let out = Command::new(script).arg("build").output().unwrap();
    assert!(
        out.status.success(),
        "building the test bed failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("kubectl")
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(kubectl_bin());
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=20s")
        .args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fleetscaler-sim-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A class, a claim bound to its volume and a CSINode, written straight into the store.
fn storage_objects(cluster: &fleetscaler::sim::fleet::ClusterHandle) {
    use serde_json::json;
    let mut state = cluster.state();
    let objects = [
        (
            Resource::StorageClasses,
            "",
            json!({"metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}),
        ),
        (
            Resource::PersistentVolumes,
            "",
            json!({"metadata": {"name": "pv-db-0"},
            "spec": {"storageClassName": "gp3", "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": "default", "name": "data-db-0"},
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}},
            "status": {"phase": "Bound"}}),
        ),
        (
            Resource::PersistentVolumeClaims,
            "default",
            json!({"metadata": {"name": "data-db-0"},
            "spec": {"storageClassName": "gp3", "volumeName": "pv-db-0",
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"}}),
        ),
        (
            Resource::CsiNodes,
            "",
            json!({"metadata": {"name": "worker-a"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1"}]}}),
        ),
    ];
    for (resource, ns, object) in objects {
        state.create(resource, ns, object).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_scales_watches_and_applies() {
    let fleet = Fleet::start(FleetSettings {
        clusters: 2,
        mixed_flavors: true,
        shape: Shape {
            nodes_per_group: 1,
            pods_per_node: 6,
            ..Shape::default()
        },
        timing: Timing {
            wave_period: Duration::from_secs(3600),
            ..Timing::fast()
        },
        ..FleetSettings::default()
    })
    .await
    .unwrap();
    let dir = scratch_dir();
    let kc = dir.join("kubeconfig");
    fleet.write_kubeconfig(&kc).unwrap();
    let sim1 = fleet.cluster(1).unwrap();

    let (ok, out) = kubectl(&kc, &["--context", "sim-1", "get", "nodes"]).await;
    assert!(ok, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.contains(" Ready ")).count(),
        6,
        "{out}"
    );
    assert!(out.contains("control-plane,master"), "{out}");
    let (ok, out) = kubectl(&kc, &["--context", "sim-1", "get", "pods", "-A"]).await;
    assert!(
        ok && out.contains("Running") && out.contains("NAMESPACE"),
        "{out}"
    );
    let (ok, out) = kubectl(&kc, &["--context", "sim-1", "get", "machinesets", "-A"]).await;
    assert!(
        ok && out.contains(&format!("{}-worker-us-east-1a", sim1.infra)) && out.contains("DESIRED"),
        "{out}"
    );
    let (ok, out) = kubectl(
        &kc,
        &["--context", "sim-2", "get", "machinedeployments", "-A"],
    )
    .await;
    assert!(ok && out.contains("md-worker-us-east-1a"), "{out}");

    // The storage kinds the hub's volume simulation reads, each with its columns.
    storage_objects(sim1);
    let (ok, out) = kubectl(
        &kc,
        &[
            "--context",
            "sim-1",
            "get",
            "pvc,pv,storageclass,csinode",
            "-A",
        ],
    )
    .await;
    assert!(ok, "{out}");
    for expected in [
        "persistentvolumeclaim/data-db-0",
        "pv-db-0",
        "storageclass.storage.k8s.io/gp3",
        "WaitForFirstConsumer",
        "csinode.storage.k8s.io/worker-a",
        "default/data-db-0",
    ] {
        assert!(out.contains(expected), "{expected} missing from:\n{out}");
    }

    let set = format!("{}-worker-us-east-1b", sim1.infra);
    let (ok, out) = kubectl(
        &kc,
        &[
            "--context",
            "sim-1",
            "-n",
            "openshift-machine-api",
            "scale",
            &format!("machineset/{set}"),
            "--replicas=2",
        ],
    )
    .await;
    assert!(ok && out.contains("scaled"), "{out}");
    assert_eq!(
        sim1.get(Resource::OcpMachineSets, "openshift-machine-api", &set)
            .unwrap()["spec"]["replicas"],
        2
    );

    // A watch shows a pod applied from a file, then its change.
    let mut watch = Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(&kc)
        .args([
            "--context",
            "sim-1",
            "get",
            "pods",
            "-n",
            "default",
            "--watch",
            "--output-watch-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let manifest = dir.join("pod.yaml");
    let pod = |label: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hello\n  labels:\n    app: {label}\nspec:\n  containers:\n  - name: c\n    image: nginx\n    resources:\n      requests:\n        cpu: 100m\n        memory: 64Mi\n"
        )
    };
    std::fs::write(&manifest, pod("one")).unwrap();
    let path = manifest.to_str().unwrap();
    let (ok, out) = kubectl(&kc, &["--context", "sim-1", "apply", "-f", path]).await;
    assert!(ok && out.contains("pod/hello created"), "{out}");
    std::fs::write(&manifest, pod("two")).unwrap();
    let (ok, out) = kubectl(&kc, &["--context", "sim-1", "apply", "-f", path]).await;
    assert!(ok && out.contains("pod/hello configured"), "{out}");
    assert_eq!(
        sim1.get(Resource::Pods, "default", "hello").unwrap()["metadata"]["labels"]["app"],
        "two"
    );
    eventually(Duration::from_secs(10), "the pod running", || async {
        (sim1.get(Resource::Pods, "default", "hello")?["status"]["phase"] == "Running")
            .then_some(())
    })
    .await;
    watch.kill().unwrap();
    let output = tokio::task::spawn_blocking(move || watch.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let seen = String::from_utf8_lossy(&output.stdout);
    assert!(
        seen.contains("ADDED") && seen.contains("MODIFIED") && seen.contains("hello"),
        "{seen}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    fleet.shutdown().await;
}
