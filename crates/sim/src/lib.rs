//! A simulated fleet: N in-memory Kubernetes API servers over HTTPS on loopback, each with a
//! machine controller, a scheduler, kubelets and a workload generator. It stands in for real
//! clusters in `fleetscaler demo`, the end-to-end tests and the benchmarks.
//!
//! `testbed` runs the same machine controller against a real API server
//! (`fleetscaler sim machines`), for control planes on loopback.
//!
//! It never imports `engine`: it is an independent implementation, so its scheduler checks
//! the engine instead of repeating it. See `docs/sim.md`.

pub mod admin;
pub mod api;
pub mod cli;
pub mod cluster;
pub mod controllers;
pub mod csi;
pub mod dra;
pub mod error;
pub mod faults;
pub mod fleet;
pub mod kubeconfig;
pub mod machine_api;
pub mod registry;
pub mod rng;
pub mod settings;
pub mod shape;
pub mod store;
pub mod testbed;
pub mod tls;
pub mod workload;
