//! The subcommands' work at the binary's edge: reading files, the clock, printing. `main`
//! only parses arguments and calls these.

mod ages;
pub mod check_config;
pub mod demo;
pub mod dump;
pub mod explain;
mod fit;
mod kubeconfigs;
pub mod plan;
mod render;
pub mod run;
mod signal;
pub mod status;
pub mod view;
pub mod what_if;
mod what_if_text;
