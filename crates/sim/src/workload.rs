//! The simulated workloads: ReplicaSets (of deployments whose replica counts move in waves,
//! served as objects too) and DaemonSets (kept inside the simulation, not served), and the
//! Pods they own.
//! Their mix is what an autoscaler meets: PodDisruptionBudgets, pods with local storage,
//! `safe-to-evict` annotations, kube-system pods, GPU pods that need a group scaled from zero.

use serde_json::{Value, json};

use crate::rng::Rng;

/// The annotation that lets (or forbids) the autoscaler evict a pod.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// What the pods of a workload look like.
#[derive(Clone, Debug)]
pub struct PodTemplate {
    pub app: String,
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    pub gpus: i64,
    pub safe_to_evict: Option<bool>,
    pub local_storage: bool,
    pub node_selector: Value,
    pub tolerations: Value,
    pub priority_class: Option<&'static str>,
}

impl PodTemplate {
    fn new(app: &str, cpu_milli: i64, memory_bytes: i64) -> Self {
        PodTemplate {
            app: app.to_string(),
            cpu_milli,
            memory_bytes,
            gpus: 0,
            safe_to_evict: None,
            local_storage: false,
            node_selector: Value::Null,
            tolerations: Value::Null,
            priority_class: None,
        }
    }
}

/// A ReplicaSet: `base` replicas, moving by ±`amplitude`×`base` over `period_factor` waves.
#[derive(Clone, Debug)]
pub struct ReplicaSetSpec {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub template: PodTemplate,
    pub base: usize,
    pub amplitude: f64,
    pub period_factor: f64,
    /// A PodDisruptionBudget for the deployment: `minAvailable` or `maxUnavailable` value.
    pub pdb: Option<(&'static str, Value)>,
}

impl ReplicaSetSpec {
    /// The replicas wanted `phase` (fraction of the fleet's wave period) into the run.
    pub fn replicas_at(&self, phase: f64) -> usize {
        let angle = std::f64::consts::TAU * phase / self.period_factor;
        let wanted = self.base as f64 * (1.0 + self.amplitude * angle.sin());
        wanted.round().max(0.0) as usize
    }
}

/// A DaemonSet: one pod on every node its template tolerates.
#[derive(Clone, Debug)]
pub struct DaemonSetSpec {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub template: PodTemplate,
}

/// The workloads of one cluster, sized so that `pods_per_node` pods fill `cpu_fill` of a
/// worker with `alloc_cpu_milli` / `alloc_memory` allocatable.
pub fn catalog(
    rng: &mut Rng,
    workers: usize,
    pods_per_node: usize,
    alloc_cpu_milli: i64,
    alloc_memory: i64,
    cpu_fill: f64,
) -> (Vec<ReplicaSetSpec>, Vec<DaemonSetSpec>) {
    let mut uid = || rng.uuid();
    let daemon = |ns: &str, name: &str, cpu: i64, mem: i64, uid: String| {
        let mut template = PodTemplate::new(name, cpu, mem);
        template.tolerations = json!([{"operator": "Exists"}]);
        template.priority_class = Some("system-node-critical");
        DaemonSetSpec {
            namespace: ns.into(),
            name: name.into(),
            uid,
            template,
        }
    };
    let daemons = vec![
        daemon("openshift-dns", "dns-default", 60, 110 << 20, uid()),
        daemon("openshift-monitoring", "node-exporter", 9, 47 << 20, uid()),
    ];
    let per_node = pods_per_node.saturating_sub(daemons.len()).max(1);
    let total = workers * per_node;
    // (namespace, app, share of pods, relative cpu, relative memory, wave amplitude, period)
    let mix: [(&str, &str, f64, f64, f64, f64, f64); 6] = [
        ("shop", "frontend", 0.34, 0.5, 0.5, 0.3, 1.0),
        ("shop", "cart", 0.2, 1.0, 1.0, 0.2, 0.7),
        ("payments", "api", 0.2, 1.2, 1.0, 0.1, 1.3),
        ("analytics", "worker", 0.14, 2.0, 2.0, 0.4, 0.9),
        ("batch", "crunch", 0.1, 3.0, 3.0, 0.8, 0.5),
        ("kube-system", "metrics-agent", 0.02, 0.5, 0.5, 0.0, 1.0),
    ];
    let avg_cpu: f64 = mix.iter().map(|m| m.2 * m.3).sum();
    let avg_mem: f64 = mix.iter().map(|m| m.2 * m.4).sum();
    let cpu_unit = cpu_fill.clamp(0.01, 2.0) * alloc_cpu_milli as f64 / per_node as f64 / avg_cpu;
    let mem_unit = 0.5 * alloc_memory as f64 / per_node as f64 / avg_mem;
    let mut sets = Vec::new();
    for (ns, app, share, cpu, mem, amplitude, period) in mix {
        let mut template = PodTemplate::new(
            app,
            (cpu * cpu_unit).round().max(1.0) as i64,
            round_mi(mem * mem_unit),
        );
        let pdb = match app {
            "frontend" => Some(("minAvailable", json!("50%"))),
            "cart" => Some(("maxUnavailable", json!(1))),
            "api" => Some(("minAvailable", json!("80%"))),
            _ => None,
        };
        if app == "worker" {
            template.local_storage = true;
        }
        if app == "crunch" {
            template.local_storage = true;
            template.safe_to_evict = Some(true);
        }
        sets.push(ReplicaSetSpec {
            namespace: ns.into(),
            name: format!("{app}-{}", rs_hash(rng)),
            uid: rng.uuid(),
            template,
            base: ((total as f64 * share).round() as usize).max(1),
            amplitude,
            period_factor: period,
            pdb,
        });
    }
    // A GPU job that comes and goes: pending pods that only a GPU group scaled from zero fits.
    let mut trainer = PodTemplate::new("trainer", 2000, 8 << 30);
    trainer.gpus = 1;
    trainer.node_selector = json!({"cluster-api/accelerator": "nvidia-a10g"});
    trainer.tolerations =
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    trainer.safe_to_evict = Some(false);
    sets.push(ReplicaSetSpec {
        namespace: "ml".into(),
        name: format!("trainer-{}", rs_hash(rng)),
        uid: rng.uuid(),
        template: trainer,
        base: 1,
        amplitude: 1.5,
        period_factor: 1.0,
        pdb: None,
    });
    (sets, daemons)
}

fn round_mi(bytes: f64) -> i64 {
    ((bytes / f64::from(1 << 20)).round().max(16.0) as i64) << 20
}

fn rs_hash(rng: &mut Rng) -> String {
    format!("{:010x}", rng.next_u64() & 0xff_ffff_ffff)
}

/// Namespaces the workloads live in.
pub const NAMESPACES: [&str; 7] = [
    "shop",
    "payments",
    "analytics",
    "batch",
    "ml",
    "openshift-dns",
    "openshift-monitoring",
];

/// Where a new pod goes.
#[derive(Clone, Copy, Debug)]
pub enum Placement<'a> {
    /// Pending, for the scheduler.
    Unbound,
    /// Pending, with a required node affinity on this node's name (a DaemonSet's pod).
    Pinned(&'a str),
    /// Bound to the node (name, IP) and already Running (the initial population).
    Running(&'a str, &'a str),
}

/// A ReplicaSet's object as the API serves it, asking for `replicas` pods.
pub fn replica_set(rs: &ReplicaSetSpec, replicas: usize) -> Value {
    let labels = json!({"app": rs.template.app});
    let container = json!({"name": rs.template.app,
        "image": format!("registry.example.com/{}:1.0", rs.template.app)});
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": rs.name, "namespace": rs.namespace, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}})
}

/// A pod of `template` owned by `owner` (kind, name, uid), placed as `placement` says.
pub fn pod(
    name: &str,
    namespace: &str,
    owner: (&str, &str, &str),
    template: &PodTemplate,
    placement: Placement<'_>,
    now: &str,
) -> Value {
    let mut requests = json!({"cpu": format!("{}m", template.cpu_milli), "memory": format!("{}Mi", template.memory_bytes >> 20)});
    if template.gpus > 0 {
        requests["nvidia.com/gpu"] = json!(template.gpus.to_string());
    }
    let mut container = json!({"name": template.app, "image": format!("registry.example.com/{}:1.0", template.app),
                               "resources": {"requests": requests}});
    if template.gpus > 0 {
        container["resources"]["limits"] = json!({"nvidia.com/gpu": template.gpus.to_string()});
    }
    let mut spec = json!({"containers": [container], "schedulerName": "default-scheduler", "restartPolicy": "Always",
                          "terminationGracePeriodSeconds": 30, "priority": 0});
    if template.local_storage {
        spec["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
        spec["containers"][0]["volumeMounts"] =
            json!([{"name": "scratch", "mountPath": "/scratch"}]);
    }
    if !template.node_selector.is_null() {
        spec["nodeSelector"] = template.node_selector.clone();
    }
    if !template.tolerations.is_null() {
        spec["tolerations"] = template.tolerations.clone();
    }
    if let Some(pc) = template.priority_class {
        spec["priorityClassName"] = json!(pc);
        spec["priority"] = json!(2_000_001_000);
    }
    let (kind, owner_name, owner_uid) = owner;
    if kind == "DaemonSet"
        && let Placement::Pinned(node) | Placement::Running(node, _) = placement
    {
        // DaemonSet pods are placed by the scheduler through a node affinity on the name.
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    }
    let mut meta = json!({"name": name, "namespace": namespace, "labels": {"app": template.app},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": owner_uid,
                             "controller": true, "blockOwnerDeletion": true}]});
    if let Some(safe) = template.safe_to_evict {
        meta["annotations"] = json!({SAFE_TO_EVICT: safe.to_string()});
    }
    let mut object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                            "status": {"phase": "Pending", "qosClass": "Burstable"}});
    if let Placement::Running(node, ip) = placement {
        object["spec"]["nodeName"] = json!(node);
        set_running(&mut object, ip, now);
    }
    object
}

/// Marks a bound pod Running and Ready, as its kubelet reports it.
pub fn set_running(pod: &mut Value, host_ip: &str, now: &str) {
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let app = pod["spec"]["containers"][0]["name"].clone();
    let image = pod["spec"]["containers"][0]["image"].clone();
    // The resource claim controller's part of the status stays.
    let claims = pod["status"]["resourceClaimStatuses"].take();
    pod["status"] = json!({
        "phase": "Running", "qosClass": "Burstable", "hostIP": host_ip, "podIP": pod_ip(host_ip, pod), "startTime": now,
        "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"),
                       condition("ContainersReady"), condition("PodScheduled")],
        "containerStatuses": [{"name": app, "image": image, "imageID": "", "ready": true, "started": true,
                               "restartCount": 0, "state": {"running": {"startedAt": now}}}],
    });
    if !claims.is_null() {
        pod["status"]["resourceClaimStatuses"] = claims;
    }
}

fn pod_ip(host_ip: &str, pod: &Value) -> String {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let h = name
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let third = host_ip.split('.').nth(2).unwrap_or("0");
    format!("10.128.{third}.{}", h % 250 + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_fills_about_sixty_percent() {
        let mut rng = Rng::new(1);
        let (sets, daemons) = catalog(&mut rng, 10, 30, 7500, 31 << 30, 0.6);
        let cpu: i64 = sets
            .iter()
            .filter(|s| s.template.gpus == 0)
            .map(|s| s.base as i64 * s.template.cpu_milli)
            .sum::<i64>()
            + daemons
                .iter()
                .map(|d| 10 * d.template.cpu_milli)
                .sum::<i64>();
        let ratio = cpu as f64 / (10.0 * 7500.0);
        assert!((0.5..0.75).contains(&ratio), "{ratio}");
        assert!(sets.iter().any(|s| s.pdb.is_some()) && sets.iter().any(|s| s.template.gpus > 0));
    }

    #[test]
    fn waves_start_at_base_and_never_go_negative() {
        let mut rng = Rng::new(1);
        let (sets, _) = catalog(&mut rng, 10, 30, 7500, 31 << 30, 0.6);
        for s in &sets {
            assert_eq!(s.replicas_at(0.0), s.base);
            assert!((0..100).all(|i| s.replicas_at(f64::from(i) / 10.0) <= s.base * 3));
        }
    }

    #[test]
    fn pods_deserialize_as_kubernetes_pods() {
        let mut t = PodTemplate::new("web", 100, 128 << 20);
        t.local_storage = true;
        let running = pod(
            "web-1",
            "shop",
            ("ReplicaSet", "web-x", "u"),
            &t,
            Placement::Running("n1", "10.0.1.5"),
            "2026-01-01T00:00:00Z",
        );
        let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(running).unwrap();
        assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Running"));
        let pending = pod(
            "web-2",
            "shop",
            ("ReplicaSet", "web-x", "u"),
            &t,
            Placement::Unbound,
            "",
        );
        assert!(pending["spec"]["nodeName"].is_null());
    }
}
