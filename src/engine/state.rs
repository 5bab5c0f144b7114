//! `EngineState`: what the engine remembers from one pass to the next. Serializable, so a
//! sequence of passes can be replayed with `fleetscaler plan --state`.

use serde::{Deserialize, Serialize};

/// The engine's memory across passes. Scale-up needs none: everything it decides follows
/// from the snapshot; scale-down and cluster health add their timers here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineState {}
