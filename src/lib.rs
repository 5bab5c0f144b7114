//! fleetscaler: one hub process that autoscales a fleet of OpenShift / Cluster API clusters.
//!
//! Data flows one way: cluster state is projected into compact [`model`] types, the pure
//! [`engine`] turns a snapshot, its memory and the time into a plan, and the layers above
//! execute and report it. The model, the engine and the simulated fleet are crates of their
//! own (`crates/`), re-exported here under their module names. See `docs/architecture.md`.

pub use fleetscaler_engine as engine;
pub use fleetscaler_model as model;
pub use fleetscaler_sim as sim;

pub mod cli;
pub mod cluster;
pub mod config;
pub mod files;
pub mod hub;
pub mod server;
pub mod telemetry;
