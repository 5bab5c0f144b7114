//! Pure domain types: resource amounts, compact projections of the Kubernetes and
//! Machine API objects the autoscaler reads, and the `ClusterSnapshot` handed to the engine.

pub mod quantity;

pub use quantity::{Quantity, QuantityError};
