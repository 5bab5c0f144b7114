//! Starting and stopping a simulated fleet, and the handles tests and the CLI hold: each
//! cluster's address, credentials, fault switch, Machine API and state.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, MutexGuard};

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::cluster::Cluster;
use crate::controllers::{self, Controllers, machines::MachineController, workloads::Workloads};
use crate::error::SimError;
use crate::faults::FaultSwitch;
use crate::kubeconfig::{self, Entry};
use crate::machine_api::{FAILURE_MODE_ANNOTATION, MachineApi};
use crate::registry::{State, key_for};
use crate::rng::Rng;
use crate::settings::{Flavor, FleetSettings};
use crate::{shape, tls};

/// How a MachineSet's new machines misbehave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureMode {
    /// Machines fail: phase Failed with an error message.
    Fail,
    /// Machines never get a node.
    NoNode,
    /// Machines get a node that never turns Ready.
    NotReady,
}

impl FailureMode {
    /// The value of the failure-mode annotation.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureMode::Fail => "fail",
            FailureMode::NoNode => "no-node",
            FailureMode::NotReady => "not-ready",
        }
    }
}

/// One running simulated cluster.
#[derive(Clone, Debug)]
pub struct ClusterHandle {
    pub cluster: Arc<Cluster>,
    pub addr: SocketAddr,
    pub ca_pem: String,
    /// The cluster's infrastructure name, the value of its Machine API cluster label.
    pub infra: String,
}

impl ClusterHandle {
    /// The context name, `sim-<n>`.
    pub fn name(&self) -> &str {
        &self.cluster.name
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn token(&self) -> &str {
        &self.cluster.token
    }

    /// The run-time fault switch.
    pub fn faults(&self) -> &FaultSwitch {
        &self.cluster.faults
    }

    /// The Machine API this cluster uses.
    pub fn machine_api(&self) -> MachineApi {
        MachineApi::of(self.cluster.flavor)
    }

    /// The cluster's state, for tests that look behind the API. Hold it briefly.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.cluster.lock()
    }

    /// The object `namespace/name` of `resource`, as stored.
    pub fn get(&self, resource: Resource, namespace: &str, name: &str) -> Option<Value> {
        self.state()
            .store
            .get(resource, &key_for(resource, namespace, name))
            .map(|o| o.value())
    }

    /// Every object of `resource`, as stored.
    pub fn list(&self, resource: Resource) -> Vec<Value> {
        self.state()
            .store
            .range(resource, None, None)
            .map(|o| o.value())
            .collect()
    }

    /// Compacts the cluster's history as etcd's compaction does; returns the version.
    pub fn compact(&self) -> u64 {
        self.state().store.compact()
    }

    /// Sets (or with `None` clears) the failure mode of the worker group `group` (a MachineSet
    /// on OpenShift, a MachineDeployment on Cluster API) for machines created from now on.
    pub fn set_failure_mode(&self, group: &str, mode: Option<FailureMode>) -> Result<(), ApiError> {
        let api = self.machine_api();
        let resource = match api.flavor {
            Flavor::OpenShift => api.machine_sets,
            Flavor::ClusterApi => Resource::CapiMachineDeployments,
        };
        let key = key_for(resource, api.namespace, group);
        self.state().modify(resource, &key, |v| {
            if !v["metadata"]["annotations"].is_object() {
                v["metadata"]["annotations"] = json!({});
            }
            match mode {
                Some(m) => {
                    v["metadata"]["annotations"][FAILURE_MODE_ANNOTATION] = json!(m.as_str())
                }
                None => {
                    if let Some(a) = v["metadata"]["annotations"].as_object_mut() {
                        a.remove(FAILURE_MODE_ANNOTATION);
                    }
                }
            }
        })?;
        Ok(())
    }

    /// This cluster's kubeconfig entry.
    pub fn entry(&self) -> Entry {
        Entry {
            name: self.name().to_string(),
            server: self.server_url(),
            ca_pem: self.ca_pem.clone(),
            token: self.token().to_string(),
        }
    }

    /// The kube client configuration of this cluster, read from its kubeconfig as the hub
    /// would read it.
    pub async fn kube_config(&self) -> Result<kube::Config, SimError> {
        let yaml = kubeconfig::render(&[self.entry()])?;
        let err = |e: String| SimError::Kubeconfig(e);
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).map_err(|e| err(e.to_string()))?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| err(e.to_string()))
    }

    /// A kube client for this cluster with kube's default settings (which retry 429s).
    pub async fn client(&self) -> Result<kube::Client, SimError> {
        let config = self.kube_config().await?;
        kube::Client::try_from(config).map_err(|e| SimError::Kubeconfig(e.to_string()))
    }
}

/// A running simulated fleet. Dropping it without `shutdown` leaves its tasks to end with the
/// runtime.
#[derive(Debug)]
pub struct Fleet {
    clusters: Vec<ClusterHandle>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Fleet {
    /// Builds and starts every cluster of `settings`: shape, certificates, listener, server
    /// and controllers.
    pub async fn start(settings: FleetSettings) -> Result<Fleet, SimError> {
        if settings.clusters == 0 {
            return Err(SimError::Settings(
                "a fleet needs at least one cluster".into(),
            ));
        }
        let (shutdown, _) = watch::channel(false);
        // Clusters are built in parallel: the initial population of large ones takes a while.
        let mut builds = Vec::new();
        for i in 1..=settings.clusters {
            let settings = settings.clone();
            builds.push(tokio::task::spawn_blocking(move || {
                build_cluster(i, &settings)
            }));
        }
        let mut fleet = Fleet {
            clusters: Vec::new(),
            shutdown,
            tasks: Vec::new(),
        };
        for build in builds {
            let (cluster, ca_pem, tls_config, built) = build
                .await
                .map_err(|e| SimError::Settings(format!("building a cluster failed: {e}")))??;
            let listener =
                TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(|source| SimError::Listen {
                        what: cluster.name.clone(),
                        source,
                    })?;
            let addr = listener.local_addr().map_err(|source| SimError::Listen {
                what: cluster.name.clone(),
                source,
            })?;
            let cluster = Arc::new(cluster);
            let acceptor = TlsAcceptor::from(tls_config);
            fleet.tasks.push(tokio::spawn(crate::api::server::serve(
                cluster.clone(),
                listener,
                acceptor,
                fleet.shutdown.subscribe(),
            )));
            if settings.controllers {
                let api = MachineApi::of(cluster.flavor);
                let started = wave_start(&settings, fleet.clusters.len());
                let workloads = settings
                    .shape
                    .workloads
                    .then(|| Workloads::new(built.replica_sets, built.daemon_sets, started));
                let machines = settings
                    .shape
                    .machine_controller
                    .then(|| MachineController::new(api));
                let ctl = Controllers::new(machines, workloads);
                fleet.tasks.push(tokio::spawn(controllers::run(
                    cluster.clone(),
                    ctl,
                    fleet.shutdown.subscribe(),
                )));
            }
            fleet.clusters.push(ClusterHandle {
                cluster,
                addr,
                ca_pem,
                infra: built.infra,
            });
        }
        Ok(fleet)
    }

    /// The clusters, `sim-1` first.
    pub fn clusters(&self) -> &[ClusterHandle] {
        &self.clusters
    }

    /// The cluster `sim-<n>` (1-based), if there is one.
    pub fn cluster(&self, n: usize) -> Option<&ClusterHandle> {
        self.clusters.get(n.checked_sub(1)?)
    }

    /// The fleet's kubeconfig.
    pub fn kubeconfig(&self) -> Result<String, SimError> {
        kubeconfig::render(
            &self
                .clusters
                .iter()
                .map(ClusterHandle::entry)
                .collect::<Vec<_>>(),
        )
    }

    /// Writes the fleet's kubeconfig to `path` (readable by the owner only: it holds tokens).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), SimError> {
        let yaml = self.kubeconfig()?;
        let err = |source| SimError::WriteKubeconfig {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(path, yaml).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
        Ok(())
    }

    /// Stops every server and controller and waits for them.
    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// When the waves of the cluster with index `i` (from 0) started.
fn wave_start(settings: &FleetSettings, i: usize) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    if !settings.stagger_waves || settings.clusters == 0 {
        return now;
    }
    let share = i as f64 / settings.clusters as f64;
    let ahead = settings.timing.wave_period.mul_f64(share);
    now.checked_sub(ahead).unwrap_or(now)
}

type Built = (Cluster, String, Arc<rustls::ServerConfig>, shape::Built);

fn build_cluster(i: usize, settings: &FleetSettings) -> Result<Built, SimError> {
    let name = format!("sim-{i}");
    let flavor = if settings.mixed_flavors && i.is_multiple_of(2) {
        Flavor::ClusterApi
    } else {
        settings.shape.flavor
    };
    let seed = settings
        .seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i as u64);
    let mut state = State::new(settings.history_window, seed);
    let built =
        shape::build(&mut state, &name, flavor, &settings.shape).map_err(|e| SimError::Shape {
            cluster: name.clone(),
            message: e.message,
        })?;
    let credentials = tls::credentials(&name)?;
    let mut token_rng = Rng::new(seed ^ 0x706b_656e);
    let token = format!(
        "sim-{:016x}{:016x}",
        token_rng.next_u64(),
        token_rng.next_u64()
    );
    let cluster = Cluster::new(name, flavor, settings.timing.clone(), token, state, seed);
    Ok((
        cluster,
        credentials.ca_pem,
        credentials.server_config,
        built,
    ))
}
