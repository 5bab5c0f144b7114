//! Pure domain types: resource amounts, compact projections of the Kubernetes and
//! Machine API objects the autoscaler reads, and the `ClusterSnapshot` handed to the engine.
//!
//! Projections keep only the fields decisions read, with strings, label sets and pod specs
//! interned, so a store of millions of pods stays small and equal pods share one spec.
//! Conversion from the API types names the field that could not be read. Nothing here does
//! I/O or reads the clock.

pub mod autoscaler;
pub mod cluster_name;
pub mod controller;
pub mod dra;
pub mod dump;
pub mod duration;
pub mod infra;
pub mod labels;
pub mod machine;
pub mod machine_api;
pub mod machine_kind;
pub mod meta;
pub mod node;
pub mod platform;
pub mod pod;
pub mod pod_spec;
pub mod provisioning;
pub mod quantity;
pub mod quote;
pub mod resources;
pub mod scheduling;
pub mod snapshot;
pub mod storage;
pub mod warning;
pub mod workload;

pub use cluster_name::ClusterName;
pub use labels::{LabelSelector, Labels};
pub use machine::{Machine, ScalableKind, ScalableResource};
pub use machine_api::{MachineApi, MachineApiGroup, MachineApiVersion, MachineApis};
pub use machine_kind::MachineKind;
pub use meta::{FieldError, ObjectKey, Projector};
pub use node::Node;
pub use pod::{Pod, PodId, PodSpec};
pub use quantity::{Quantity, QuantityError};
pub use quote::{bounded, quote};
pub use resources::Resources;
pub use snapshot::ClusterSnapshot;
pub use warning::{Warning, WarningCode};
