//! The simulated controllers of a cluster.

pub mod disruption;
