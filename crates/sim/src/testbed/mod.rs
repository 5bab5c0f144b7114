//! The test-bed machine controller: the simulated fleet's machine controller run against a
//! real Kubernetes API server (`fleetscaler sim machines`), for control planes on loopback
//! where kwok stands in for kubelets. MachineSet and MachineDeployment replicas become
//! Machines and then Nodes, fewer replicas delete Machines (marked ones first), status
//! replicas are kept and failure modes are honoured exactly as in the simulated fleet:
//! the logic is the same code (`controllers::machines`), run over [`world::KubeWorld`].

pub mod discovery;
pub mod requests;
mod run;
pub mod world;

pub use run::{MachinesArgs, run};

/// The annotation kwok manages nodes by: it turns them Ready and runs their pods.
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
