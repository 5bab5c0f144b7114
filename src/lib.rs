//! fleetscaler: one hub process that autoscales a fleet of OpenShift / Cluster API clusters.
//!
//! Data flows one way: cluster state is projected into compact [`model`] types, the pure
//! [`engine`] turns a snapshot, its memory and the time into a plan, and the layers above
//! execute and report it. See `docs/architecture.md`.

pub mod cli;
pub mod cluster;
pub mod config;
pub mod engine;
pub mod hub;
pub mod model;
pub mod sim;
