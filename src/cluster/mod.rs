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
pub mod http;
pub mod kubeconfig;
pub mod layering;
pub mod metrics;
pub mod outcome;
pub mod pool;
pub mod read;
pub mod report;
pub mod runner;
pub mod status;
pub mod what_if;
pub mod what_if_over;

/// CPU work (the engine) from async code: on a multi-threaded runtime it runs in place while
/// the worker's other tasks move to other workers, so one large cluster never stalls the rest.
pub fn cpu<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

pub use crate::model::ClusterName;
