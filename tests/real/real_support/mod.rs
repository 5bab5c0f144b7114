//! Real control planes on loopback (`scripts/real-cluster.sh`: etcd, kube-apiserver,
//! controller-manager, scheduler, kwok and the test-bed machine controller) and the hub's
//! real binary against them. Everything is checked the way a user would: with kubectl and
//! the hub's HTTP API.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-cluster.sh")
}

use crate::tempdir_support;
pub use tempdir_support::TempDir;

/// One real control plane. Dropping it stops every process it started.
pub struct ControlPlane {
    pub name: String,
    dir: PathBuf,
    _tmp: TempDir,
    _turn: Arc<Turn>,
}

/// The control planes of one test at a time: a test binary runs its tests in parallel, and
/// two tests' control planes at once would starve each other on two cores.
pub struct Turn;

static BUSY: Mutex<bool> = Mutex::new(false);
static FREED: Condvar = Condvar::new();

impl Turn {
    /// Waits until no other test holds control planes.
    fn take() -> Turn {
        let mut busy = BUSY.lock().unwrap_or_else(PoisonError::into_inner);
        while *busy {
            busy = FREED.wait(busy).unwrap_or_else(PoisonError::into_inner);
        }
        *busy = true;
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        *BUSY.lock().unwrap_or_else(PoisonError::into_inner) = false;
        FREED.notify_one();
    }
}

/// Starts control planes named `names` at once (each takes some seconds), once no other
/// test holds any; they are the test's until the last of them is dropped. A test calls this
/// once.
pub fn up(names: &[&str], options: &[&str]) -> Vec<ControlPlane> {
    let turn = Arc::new(Turn::take());
    let started: Vec<_> = names
        .iter()
        .map(|name| {
            let name = name.to_string();
            let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
            let turn = turn.clone();
            std::thread::spawn(move || ControlPlane::up(&name, &options, turn))
        })
        .collect();
    started.into_iter().map(|t| t.join().unwrap()).collect()
}

impl ControlPlane {
    fn up(name: &str, options: &[String], turn: Arc<Turn>) -> ControlPlane {
        let tmp = TempDir::new(&format!("real-{name}"));
        let dir = tmp.path().join("cp");
        let out = Command::new(script())
            .arg("up")
            .arg(&dir)
            .args(["--name", name, "--owner", &std::process::id().to_string()])
            .args(options)
            .env("FLEETSCALER_BIN", env!("CARGO_BIN_EXE_fleetscaler"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "real-cluster.sh up {name} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ControlPlane {
            name: name.to_string(),
            dir,
            _tmp: tmp,
            _turn: turn,
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn bin(&self) -> PathBuf {
        let bin = std::fs::read_to_string(self.dir.join("run/bin")).unwrap();
        PathBuf::from(bin.trim())
    }

    /// kubectl of the test bed's own build, as the cluster admin.
    pub fn kubectl_command(&self) -> Command {
        let mut c = Command::new(self.bin().join("kubectl"));
        c.arg("--kubeconfig").arg(self.kubeconfig());
        c
    }

    pub fn try_kubectl(&self, args: &[&str]) -> Result<String, String> {
        let out = self.kubectl_command().args(args).output().unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.try_kubectl(args)
            .unwrap_or_else(|e| panic!("{}: kubectl {args:?} failed: {e}", self.name))
    }

    /// `kubectl get ARGS -o json`, parsed.
    pub fn get(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all)).unwrap()
    }

    /// The items of `kubectl get ARGS -o json`.
    pub fn items(&self, args: &[&str]) -> Vec<Value> {
        self.get(args)["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `kubectl apply --server-side` of a YAML text.
    pub fn apply(&self, yaml: &str) {
        let mut child = self
            .kubectl_command()
            .args(["apply", "--server-side", "--validate=strict", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(yaml.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}: kubectl apply failed: {}\n{yaml}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn run_script(&self, args: &[&str]) -> String {
        let out = Command::new(script()).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "real-cluster.sh {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops and starts one component again (`kube-apiserver`, `etcd`, ...).
    pub fn restart(&self, component: &str) {
        let dir = self.dir.to_string_lossy().into_owned();
        self.run_script(&["restart", &dir, component]);
    }

    /// Compacts etcd to its current revision; returns that revision.
    pub fn compact(&self) -> u64 {
        let dir = self.dir.to_string_lossy().into_owned();
        self.run_script(&["compact", &dir]).parse().unwrap()
    }

    pub fn log(&self, component: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("logs/{component}.log"))).unwrap_or_default()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("down").arg(&self.dir).status();
    }
}

/// Polls `check` (every 100 ms) until it yields `Some`, for at most `limit`.
pub fn eventually<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The hub's real binary, `fleetscaler run`, on a fleet.toml of the test's making.
pub struct HubProcess {
    child: Option<Child>,
    pub log: PathBuf,
    pub addr: String,
}

impl HubProcess {
    pub fn start(dir: &Path, tag: &str, fleet_toml: &str) -> HubProcess {
        let config = dir.join(format!("{tag}.toml"));
        std::fs::write(&config, fleet_toml).unwrap();
        let log = dir.join(format!("{tag}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .args(["run", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("RUST_LOG", "fleetscaler=debug,info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let addr = eventually(Duration::from_secs(30), "the hub's listen address", || {
            let text = std::fs::read_to_string(&log).ok()?;
            // `serving http://ADDR/` or, with TLS, `serving https://ADDR/`.
            let rest = text.split("serving http").nth(1)?;
            let rest = rest
                .strip_prefix("s://")
                .or_else(|| rest.strip_prefix("://"))?;
            rest.split('/').next().map(str::to_string)
        });
        HubProcess {
            child: Some(child),
            log,
            addr,
        }
    }

    /// GET `path` of the hub's API as JSON.
    pub fn api(&self, path: &str) -> Value {
        let body = http_get(&self.addr, path).unwrap_or_else(|| panic!("GET {path} failed"));
        serde_json::from_str(&body).unwrap()
    }

    /// The cluster's last plan, when the hub has one and answers.
    pub fn plan(&self, cluster: &str) -> Option<Value> {
        let text = http_get(&self.addr, &format!("/api/v1/clusters/{cluster}/plan"))?;
        serde_json::from_str(&text).ok()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGTERM, then wait: the hub cleans up (status ConfigMap, Lease) before it exits.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let child = self.child.take().unwrap();
        terminate(child)
    }

    /// SIGKILL: the hub gets no chance to clean up.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

fn terminate(mut child: Child) -> std::process::ExitStatus {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap()
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            terminate(child);
        }
    }
}

/// A plain HTTP/1.0 GET; the body, if the answer is 200.
pub fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut tcp = TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(tcp, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    tcp.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_string()))
}

/// The names of the cluster's Nodes, sorted.
pub fn node_names(cp: &ControlPlane) -> Vec<String> {
    let mut names: Vec<String> = cp.items(&["nodes"]).iter().map(name).collect();
    names.sort();
    names
}

/// How many of the cluster's Nodes are Ready.
pub fn ready_nodes(cp: &ControlPlane) -> usize {
    cp.items(&["nodes"]).iter().filter(|n| is_ready(n)).count()
}

/// The Nodes carrying the autoscaler's deletion taint.
pub fn tainted_for_deletion(cp: &ControlPlane) -> Vec<String> {
    cp.items(&["nodes"])
        .iter()
        .filter(|n| {
            n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == "ToBeDeletedByClusterAutoscaler")
        })
        .map(name)
        .collect()
}

/// `name` of an object.
pub fn name(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Whether a Node reports Ready.
pub fn is_ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Pods of `app=NAME` in `default` that run.
pub fn running_pods(cp: &ControlPlane, app: &str) -> usize {
    cp.items(&["pods", "-n", "default", "-l", &format!("app={app}")])
        .iter()
        .filter(|p| {
            p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
        })
        .count()
}

/// An OpenShift MachineSet of `cpu`-CPU workers (capacity from the scale-from-zero
/// annotations, which the test-bed machine controller also reads) between min and max.
pub fn openshift_machine_set(
    cluster: &str,
    name: &str,
    replicas: u32,
    min: u32,
    max: u32,
    cpu: u32,
) -> String {
    let shape = MachineSetShape {
        replicas,
        min,
        max,
        cpu,
        ..MachineSetShape::default()
    };
    openshift_machine_set_shaped(cluster, name, &shape)
}

/// What a test or bench chooses of an OpenShift MachineSet.
pub struct MachineSetShape<'a> {
    pub replicas: u32,
    pub min: u32,
    pub max: u32,
    pub cpu: u32,
    pub max_pods: u32,
    /// `placement.availabilityZone`, which the test-bed cloud gives the nodes as their zone.
    pub zone: &'a str,
    pub instance_type: &'a str,
    /// YAML lines (each starting with a newline) added to the nodes' labels, and to the
    /// machines' `spec` (taints).
    pub node_labels: &'a str,
    pub taints: &'a str,
}

impl Default for MachineSetShape<'_> {
    fn default() -> Self {
        MachineSetShape {
            replicas: 1,
            min: 1,
            max: 10,
            cpu: 4,
            max_pods: 110,
            zone: "us-east-1a",
            instance_type: "m6i.xlarge",
            node_labels: "",
            taints: "",
        }
    }
}

/// An OpenShift MachineSet of `shape`.
pub fn openshift_machine_set_shaped(cluster: &str, name: &str, shape: &MachineSetShape) -> String {
    let MachineSetShape {
        replicas,
        min,
        max,
        cpu,
        max_pods,
        zone,
        instance_type,
        node_labels,
        taints,
    } = shape;
    format!(
        r#"apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: {name}
  namespace: openshift-machine-api
  labels:
    machine.openshift.io/cluster-api-cluster: {cluster}
  annotations:
    machine.openshift.io/cluster-api-autoscaler-node-group-min-size: "{min}"
    machine.openshift.io/cluster-api-autoscaler-node-group-max-size: "{max}"
    capacity.cluster-autoscaler.kubernetes.io/cpu: "{cpu}"
    capacity.cluster-autoscaler.kubernetes.io/memory: "{mem}Gi"
    capacity.cluster-autoscaler.kubernetes.io/maxPods: "{max_pods}"
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      machine.openshift.io/cluster-api-cluster: {cluster}
      machine.openshift.io/cluster-api-machineset: {name}
  template:
    metadata:
      labels:
        machine.openshift.io/cluster-api-cluster: {cluster}
        machine.openshift.io/cluster-api-machineset: {name}
    spec:
      metadata:
        labels:
          node-role.kubernetes.io/worker: ""{node_labels}{taints}
      providerSpec:
        value:
          apiVersion: machine.openshift.io/v1beta1
          kind: AWSMachineProviderConfig
          instanceType: {instance_type}
          placement:
            availabilityZone: {zone}
            region: us-east-1
"#,
        mem = cpu * 4
    )
}

/// A Cluster API (v1beta2) MachineDeployment of `cpu`-CPU workers between min and max, and
/// the AWSMachineTemplate (the test bed's cloud) its machines are cloned from.
pub fn capi_machine_deployment(
    cluster: &str,
    name: &str,
    replicas: u32,
    min: u32,
    max: u32,
    cpu: u32,
) -> String {
    format!(
        r#"apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachineTemplate
metadata:
  name: {name}
  namespace: openshift-cluster-api
spec:
  template:
    spec:
      instanceType: m6i.xlarge
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: {name}
  namespace: openshift-cluster-api
  labels:
    cluster.x-k8s.io/cluster-name: {cluster}
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "{min}"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "{max}"
    capacity.cluster-autoscaler.kubernetes.io/cpu: "{cpu}"
    capacity.cluster-autoscaler.kubernetes.io/memory: "{mem}Gi"
    capacity.cluster-autoscaler.kubernetes.io/maxPods: "110"
spec:
  clusterName: {cluster}
  replicas: {replicas}
  selector:
    matchLabels:
      cluster.x-k8s.io/cluster-name: {cluster}
      cluster.x-k8s.io/deployment-name: {name}
  template:
    metadata:
      labels:
        cluster.x-k8s.io/cluster-name: {cluster}
        cluster.x-k8s.io/deployment-name: {name}
        node-role.kubernetes.io/worker: ""
    spec:
      clusterName: {cluster}
      failureDomain: us-east-1a
      bootstrap:
        dataSecretName: {name}-bootstrap
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: AWSMachineTemplate
        name: {name}
"#,
        mem = cpu * 4
    )
}

/// A Deployment of `replicas` pods asking `cpu` each (and a small memory request).
pub fn deployment(name: &str, replicas: u32, cpu: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: default
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: app
        image: registry.example/app:1
        resources:
          requests:
            cpu: "{cpu}"
            memory: 256Mi
"#
    )
}

/// The apiserver's audit log (every write, and every request of a service account).
pub fn audit(cp: &ControlPlane) -> Vec<Value> {
    cp.log("audit")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Audited requests on `resource` (and `subresource`, if given) answered `code`.
pub fn audited(cp: &ControlPlane, resource: &str, subresource: Option<&str>, code: i64) -> usize {
    audit(cp)
        .iter()
        .filter(|e| e["objectRef"]["resource"] == resource)
        .filter(|e| subresource.is_none_or(|s| e["objectRef"]["subresource"] == s))
        .filter(|e| e["responseStatus"]["code"] == code)
        .count()
}

/// The user the hub is when it reaches a cluster through `managed_kubeconfig`.
pub const HUB_USER: &str = "system:serviceaccount:fleetscaler:fleetscaler-hub";

/// Applies docs/managed-cluster-rbac.yaml as it stands and writes, at `path`, a kubeconfig
/// (context = the control plane's name) that reaches the cluster with the token of its
/// ServiceAccount: what docs/install.md tells users to do.
pub fn managed_kubeconfig(cp: &ControlPlane, path: &Path) {
    let rbac = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/managed-cluster-rbac.yaml");
    cp.kubectl(&["apply", "-f", &rbac.to_string_lossy()]);
    let token = eventually(
        Duration::from_secs(30),
        "the ServiceAccount's token",
        || {
            let secret = cp.get(&["secret", "-n", "fleetscaler", "fleetscaler-hub-token"]);
            secret["data"]["token"].as_str().map(str::to_string)
        },
    );
    let view =
        |path: &str| cp.kubectl(&["config", "view", "--raw", "-o", &format!("jsonpath={path}")]);
    let server = view("{.clusters[0].cluster.server}");
    let ca = view("{.clusters[0].cluster.certificate-authority-data}");
    let token = String::from_utf8(base64_decode(&token)).unwrap();
    let name = &cp.name;
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: {name}-hub\n  user:\n    token: {token}\n\
             contexts:\n- name: {name}\n  context: {{cluster: {name}, user: {name}-hub}}\ncurrent-context: {name}\n"
        ),
    )
    .unwrap();
}

/// Requests of the hub's ServiceAccount the apiserver refused (403), as `verb URI`.
pub fn refused_hub_requests(cp: &ControlPlane) -> Vec<String> {
    audit(cp)
        .iter()
        .filter(|e| e["user"]["username"] == HUB_USER && e["responseStatus"]["code"] == 403)
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect()
}

/// Requests of the hub's ServiceAccount the apiserver answered at all.
pub fn hub_requests(cp: &ControlPlane) -> usize {
    audit(cp)
        .iter()
        .filter(|e| e["user"]["username"] == HUB_USER)
        .count()
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap()
}

/// Makes the ReplicaSet of `app`, when it scales down, keep one pod on each node (the
/// others cost nothing to delete): a scale-down then has nodes to drain, not just empty
/// ones.
pub fn keep_one_pod_per_node(cp: &ControlPlane, app: &str) {
    let mut kept = std::collections::BTreeSet::new();
    for p in cp.items(&["pods", "-n", "default", "-l", &format!("app={app}")]) {
        let node = p["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if kept.insert(node) {
            cp.kubectl(&[
                "annotate",
                "pod",
                "-n",
                "default",
                &name(&p),
                "controller.kubernetes.io/pod-deletion-cost=100",
            ]);
        }
    }
}

/// The hub (`fleetscaler run`) autoscaling the one cluster `cp` with the managed-cluster
/// RBAC's token, its ClusterAutoscaler ignored; `tables` (such as `[defaults]`) come before
/// the cluster. The hub's files live in the returned directory.
pub fn hub_for(cp: &ControlPlane, tables: &str) -> (HubProcess, crate::tempdir_support::TempDir) {
    let name = &cp.name;
    let dir = crate::tempdir_support::TempDir::new(&format!("real-{name}"));
    let kubeconfig = dir.path().join(format!("{name}.kubeconfig"));
    managed_kubeconfig(cp, &kubeconfig);
    let toml = format!(
        "{HUB_SECTION}\n{tables}\n[[clusters]]\nname = \"{name}\"\nkubeconfig = \"{}\"\nuse_cluster_autoscaler = false\n",
        kubeconfig.display()
    );
    let hub = HubProcess::start(dir.path(), "hub", &toml);
    (hub, dir)
}

/// `[hub]` of the tests' fleet.toml files: a pass every 2 s, and 200 ms after an event.
pub const HUB_SECTION: &str =
    "[hub]\nscan_interval = \"2s\"\ndebounce = \"200ms\"\nrequest_timeout = \"5s\"\n";

/// A ServiceAccount `namespace/name` bound to the ClusterRole `role`, and at `path` a
/// kubeconfig (context = the control plane's name) that reaches the cluster with its token:
/// a client whose every request the audit log records (the admin's reads are not).
pub fn service_account_kubeconfig(
    cp: &ControlPlane,
    namespace: &str,
    name: &str,
    role: &str,
    path: &Path,
) {
    cp.apply(&format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: {name}, namespace: {namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {namespace}-{name}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}
subjects: [{{kind: ServiceAccount, name: {name}, namespace: {namespace}}}]
---
apiVersion: v1
kind: Secret
metadata:
  name: {name}-token
  namespace: {namespace}
  annotations: {{kubernetes.io/service-account.name: {name}}}
type: kubernetes.io/service-account-token
"#
    ));
    let token = eventually(
        Duration::from_secs(30),
        "the ServiceAccount's token",
        || {
            let secret = cp.get(&["secret", "-n", namespace, &format!("{name}-token")]);
            secret["data"]["token"].as_str().map(str::to_string)
        },
    );
    let token = String::from_utf8(base64_decode(&token)).unwrap();
    let view =
        |path: &str| cp.kubectl(&["config", "view", "--raw", "-o", &format!("jsonpath={path}")]);
    let server = view("{.clusters[0].cluster.server}");
    let ca = view("{.clusters[0].cluster.certificate-authority-data}");
    let cluster = &cp.name;
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\n\
             contexts:\n- name: {cluster}\n  context: {{cluster: {cluster}, user: {name}}}\ncurrent-context: {cluster}\n"
        ),
    )
    .unwrap();
}
