//! The scale mode's test bed: one real control plane (`up --large`) with OpenShift
//! MachineSets in three zones and a labelled one, every node full of running pods owned by
//! ReplicaSets, and the burst of Deployments that cannot fit in it. Also what the
//! apiserver's audit log says a contender asked of it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::time::Instant;

use crate::real_support::{
    ControlPlane, MachineSetShape, eventually, openshift_machine_set_shaped,
};

/// Pods a node holds (the groups' `maxPods`, as a VPC CNI's ENI limit sets it): the
/// background fills every node to it, so no burst pod fits anywhere.
pub const MAX_PODS: u32 = 30;
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// The label of the batch group's nodes, which the batch Deployment selects.
pub const BATCH_LABEL: &str = "workload";
/// The label every burst pod carries (what the bench watches).
pub const BURST_APP: &str = "burst";

/// The sizes of one run.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Nodes of each zone's 4-CPU general group at the start (and its minimum).
    pub general_per_zone: u32,
    /// Nodes of the 8-CPU batch group (zone a) at the start (and its minimum).
    pub batch_nodes: u32,
    /// Burst pods of 100m without constraints.
    pub web: u32,
    /// Burst pods of 100m spread evenly over the zones.
    pub spread: u32,
    /// Burst pods of 200m that ask for the batch group's label.
    pub batch: u32,
}

impl Shape {
    pub fn nodes(&self) -> u32 {
        self.general_per_zone * ZONES.len() as u32 + self.batch_nodes
    }

    pub fn background_pods(&self) -> u32 {
        self.nodes() * MAX_PODS
    }

    pub fn burst_pods(&self) -> u32 {
        self.web + self.spread + self.batch
    }
}

/// A node group of the bed.
pub struct Group {
    pub name: String,
    pub zone: &'static str,
    pub cpu: u32,
    pub nodes: u32,
    pub batch: bool,
}

pub fn groups(shape: &Shape) -> Vec<Group> {
    let mut groups: Vec<Group> = ZONES
        .iter()
        .map(|zone| Group {
            name: format!("general-{zone}"),
            zone,
            cpu: 4,
            nodes: shape.general_per_zone,
            batch: false,
        })
        .collect();
    groups.push(Group {
        name: format!("batch-{}", ZONES[0]),
        zone: ZONES[0],
        cpu: 8,
        nodes: shape.batch_nodes,
        batch: true,
    });
    groups
}

/// A MachineSet at its minimum, room for 200 more nodes, capacity in the scale-from-zero
/// annotations (which the test-bed cloud gives its nodes), zone in the providerSpec (which
/// the cloud sets as the nodes' `topology.kubernetes.io/zone`).
fn machine_set(cluster: &str, g: &Group) -> String {
    // The batch nodes are dedicated (label and taint): without the taint the scheduler
    // puts plain pods on the new 8-CPU nodes first (least allocated), and the batch pods
    // then need more of them than they would alone.
    let (label, taint) = if g.batch {
        (
            format!("\n          {BATCH_LABEL}: batch"),
            format!(
                "\n      taints:\n      - {{key: {BATCH_LABEL}, value: batch, effect: NoSchedule}}"
            ),
        )
    } else {
        (String::new(), String::new())
    };
    let shape = MachineSetShape {
        replicas: g.nodes,
        min: g.nodes,
        max: g.nodes + 200,
        cpu: g.cpu,
        max_pods: MAX_PODS,
        zone: g.zone,
        instance_type: if g.cpu == 4 {
            "m6i.xlarge"
        } else {
            "m6i.2xlarge"
        },
        node_labels: &label,
        taints: &taint,
    };
    openshift_machine_set_shaped(cluster, &g.name, &shape)
}

/// An admin client of the control plane.
pub async fn client(cp: &ControlPlane) -> Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    Client::try_from(config).unwrap()
}

/// The groups at their minimum, every node Ready. Returns the seconds it took.
pub fn nodes(cp: &ControlPlane, shape: &Shape) -> f64 {
    let start = Instant::now();
    for g in groups(shape) {
        cp.apply(&machine_set(&cp.name, &g));
    }
    let want = shape.nodes() as usize;
    eventually(Duration::from_secs(1200), "every node Ready", || {
        let out = cp.kubectl(&["get", "nodes", "--no-headers"]);
        let ready = out
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count();
        if ready < want {
            std::thread::sleep(Duration::from_secs(2));
        }
        (ready == want).then_some(())
    });
    start.elapsed().as_secs_f64()
}

/// Fills every node with `MAX_PODS` running pods. The pods are made already bound
/// (`spec.nodeName`) and own by no controller: the scheduler binds a few dozen pods a
/// second on two shared cores, and a ReplicaSet adopts its orphans one patch at a time
/// (9,000 took 15 minutes here). Neither contender looks at a running pod's owner unless
/// it would drain its node, and no group may shrink below these nodes. Returns the seconds
/// it took.
pub async fn background(cp: &ControlPlane, client: &Client) -> f64 {
    let start = Instant::now();
    let nodes: Api<Node> = Api::all(client.clone());
    let mut pods = Vec::new();
    for node in nodes.list(&ListParams::default()).await.unwrap() {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        // Past half of each node's CPU (86% general, 80% batch): no contender sees one as
        // unneeded, whatever its group's minimum says.
        let cpu = if labels.contains_key(BATCH_LABEL) {
            "200m"
        } else {
            "100m"
        };
        for k in 0..MAX_PODS {
            pods.push(background_pod(&format!("{name}-{k}"), &name, cpu));
        }
    }
    create_pods(client, pods).await;
    tokio::task::block_in_place(|| {
        eventually(
            Duration::from_secs(1800),
            "the background pods all running",
            || {
                let others = cp.kubectl(&[
                    "get",
                    "pods",
                    "-A",
                    "--no-headers",
                    "--field-selector",
                    "status.phase!=Running",
                ]);
                if !others.trim().is_empty() {
                    std::thread::sleep(Duration::from_secs(2));
                }
                others.trim().is_empty().then_some(())
            },
        )
    });
    start.elapsed().as_secs_f64()
}

fn background_pod(name: &str, node: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "base"}},
        "spec": {
            "nodeName": node, "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "app", "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]
        }
    }))
    .unwrap()
}

/// Creates the pods, many at a time, retrying what the apiserver refuses while busy.
async fn create_pods(client: &Client, pods: Vec<Pod>) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(pods)
        .map(|pod| {
            let api = api.clone();
            async move {
                for attempt in 0.. {
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(_) => return,
                        Err(kube::Error::Api(e)) if e.code == 409 => return,
                        Err(_) if attempt < 20 => {
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                        Err(e) => panic!("creating {:?}: {e}", pod.metadata.name),
                    }
                }
            }
        })
        .buffer_unordered(64)
        .collect::<()>()
        .await;
}

/// After a contender has scaled the burst's nodes away: the burst's Deployments gone,
/// exactly the bed's nodes left, and none with a mark an autoscaler left (its taints,
/// cordon): the state the first contender started from.
pub fn reset(cp: &ControlPlane, shape: &Shape) {
    for part in BURST_PARTS {
        cp.kubectl(&[
            "delete",
            "deployment",
            "-n",
            "default",
            &format!("{BURST_APP}-{part}"),
        ]);
    }
    let want = shape.nodes() as usize;
    eventually(Duration::from_secs(600), "the bed as it started", || {
        let pods = cp.kubectl(&[
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            "app=burst",
            "-o",
            "name",
        ]);
        let nodes = cp.items(&["nodes"]);
        let settled = pods.trim().is_empty() && nodes.len() == want;
        if !settled {
            std::thread::sleep(Duration::from_secs(2));
        }
        settled.then_some(())
    });
    const MARKS: [&str; 2] = [
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
    ];
    for node in cp.items(&["nodes"]) {
        let name = crate::real_support::name(&node);
        for t in node["spec"]["taints"].as_array().into_iter().flatten() {
            let key = t["key"].as_str().unwrap_or_default();
            if MARKS.contains(&key) {
                cp.kubectl(&["taint", "node", &name, &format!("{key}-")]);
            }
        }
        if node["spec"]["unschedulable"] == true {
            cp.kubectl(&["uncordon", &name]);
        }
    }
}

/// The burst: a Deployment of plain pods, one spread over the zones, one that asks for the
/// batch group's label.
pub fn burst(shape: &Shape) -> String {
    let spread = format!(
        "\n      topologySpreadConstraints:\n      - maxSkew: 1\n        \
         topologyKey: topology.kubernetes.io/zone\n        whenUnsatisfiable: DoNotSchedule\n        \
         labelSelector: {{matchLabels: {{app: {BURST_APP}, part: spread}}}}"
    );
    let batch = format!(
        "\n      nodeSelector: {{{BATCH_LABEL}: batch}}\n      \
         tolerations: [{{key: {BATCH_LABEL}, value: batch, effect: NoSchedule}}]"
    );
    [
        burst_deployment("web", shape.web, "100m", ""),
        burst_deployment("spread", shape.spread, "100m", &spread),
        burst_deployment("batch", shape.batch, "200m", &batch),
    ]
    .join("---\n")
}

pub const BURST_PARTS: [&str; 3] = ["web", "spread", "batch"];

fn burst_deployment(part: &str, replicas: u32, cpu: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {BURST_APP}-{part}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {BURST_APP}, part: {part}}}}}
  template:
    metadata: {{labels: {{app: {BURST_APP}, part: {part}}}}}
    spec:
      terminationGracePeriodSeconds: 5{extra}
      containers:
      - name: app
        image: registry.example/app:1
        resources: {{requests: {{cpu: "{cpu}", memory: 128Mi}}}}
"#
    )
}

/// What one client asked of the apiserver, by verb, from the audit log (which records
/// every request of a service account, a watch once however long it lasts).
#[derive(Clone, Debug, Default)]
pub struct Requests {
    pub by_verb: BTreeMap<String, usize>,
}

impl Requests {
    pub fn total(&self) -> usize {
        self.by_verb.values().sum()
    }

    pub fn describe(&self) -> String {
        let verbs: Vec<String> = self
            .by_verb
            .iter()
            .map(|(v, n)| format!("{v} {n}"))
            .collect();
        format!("{} ({})", self.total(), verbs.join(", "))
    }
}

/// The requests of `user` in the control plane's audit log.
pub fn requests(cp: &ControlPlane, user: &str) -> Requests {
    let text = std::fs::read_to_string(cp.dir().join("logs/audit.log")).unwrap_or_default();
    let needle = format!("\"username\":\"{user}\"");
    // A request that streams (a watch) has two events, ResponseStarted and
    // ResponseComplete, under one audit ID.
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Requests::default();
    for line in text.lines().filter(|l| l.contains(&needle)) {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let id = event["auditID"].as_str().unwrap_or_default().to_string();
        if seen.insert(id) {
            let verb = event["verb"].as_str().unwrap_or("?").to_string();
            *out.by_verb.entry(verb).or_default() += 1;
        }
    }
    out
}
