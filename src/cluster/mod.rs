//! One cluster: everything its runner does against that cluster's API server.
//!
//! `client` builds the kube client from a kubeconfig context; `cache` keeps compact
//! projections fed by watchers and hands the engine its snapshot; `executor` turns a
//! [`Plan`](crate::engine::plan::Plan) into API calls that are safe to repeat and to
//! interrupt; `status` and `events` are what users see in the cluster itself; `runner` is
//! the loop that ties them together, one tokio task per cluster; `layering` makes its
//! settings. Nothing here knows about other clusters: isolation is the hub's promise and this
//! module's shape; what the fleet tells a pass comes as one value, `fleet_inputs`.

pub mod cache;
pub mod client;
pub mod error;
pub mod events;
pub mod executor;
pub mod fleet_inputs;
pub mod gate;
pub mod layering;
pub mod metrics;
pub mod outcome;
pub mod pool;
pub mod read;
pub mod report;
pub mod runner;
pub mod status;
pub mod what_if;

use std::fmt;
use std::sync::Arc;

/// CPU work (the engine) from async code: on a multi-threaded runtime it runs in place while
/// the worker's other tasks move to other workers, so one large cluster never stalls the rest.
pub fn cpu<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// A cluster's name, as in fleet.toml (`[[clusters]] name`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName(Arc<str>);

impl ClusterName {
    pub fn new(name: &str) -> Self {
        ClusterName(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for ClusterName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ClusterName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(ClusterName::new(&name))
    }
}
