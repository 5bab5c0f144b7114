//! Everything that runs against the simulated fleet, the CLI, the chart and the docs, as one
//! test binary: each test binary links the whole crate, and the machine has two cores.
//!
//! Modules are the former test files (`cargo test --test fleet hub_e2e::`); the support
//! modules are the harnesses they share, each written once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/serving_support/mod.rs"]
mod serving_support;
#[path = "../support/sim_support/mod.rs"]
mod sim_support;
#[path = "../support/tempdir_support/mod.rs"]
mod tempdir_support;

mod chart_support;
mod dashboard_support;
mod docs_support;
mod e2e_support;
mod fuzz_support;
mod hub_support;
mod otlp_support;
mod rbac_support;
mod replica_support;

mod chart_membership;
mod chart_observability;
mod chart_serving;
mod chart_sharding;
mod chart_values;
mod cli_check_config;
mod cli_completions;
mod cli_demo;
mod cli_dump;
mod cli_explain;
mod cli_logs;
mod cli_plan;
mod cli_status;
mod cli_what_if;
mod dashboard;
mod dashboard_fleet_intelligence;
mod dashboard_sharding;
mod docs;
mod docs_commands;
mod fuzz;
mod helm_chart;
mod hub_cache;
mod hub_client;
mod hub_dra;
mod hub_e2e;
mod hub_executor;
mod hub_fleet;
mod hub_fleet_intelligence;
mod hub_hostile;
mod hub_idle;
mod hub_machines;
mod hub_membership;
mod hub_observability;
mod hub_otlp_metrics;
mod hub_provisioning;
mod hub_recovery;
mod hub_report;
mod hub_restart;
mod hub_serving;
mod hub_serving_limits;
mod hub_sharding;
mod hub_tracing;
mod hub_volumes;
mod hub_what_if;
mod managed_rbac;
mod sim_api;
mod sim_cli;
mod sim_controllers;
mod sim_faults;
mod sim_kubectl;
mod sim_smoke;
mod sim_testbed;
mod sim_watch;
