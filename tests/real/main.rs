//! The real control planes on loopback (`scripts/real-cluster.sh`) and the hub's image, as one
//! test binary. Control planes are heavy: the tests take turns on them (`real_support::up`).
//!
//! Modules are the former test files (`cargo test --test real real_leader::`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/serving_support/mod.rs"]
mod serving_support;
#[path = "../support/sim_support/mod.rs"]
mod sim_support;
#[path = "../support/tempdir_support/mod.rs"]
mod tempdir_support;

mod real_support;

mod image;
mod real_autoscaling;
mod real_dra;
mod real_faults;
mod real_fidelity;
mod real_helm;
mod real_leader;
mod real_machine_api;
mod real_provisioning;
mod real_scale_down;
mod real_scale_from_zero;
mod real_serving;
mod real_sharding;
mod real_volumes;
mod real_vs_sim;
