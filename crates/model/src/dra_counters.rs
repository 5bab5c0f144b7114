//! Partitionable devices: the counters a ResourceSlice shares (`sharedCounters`) and what
//! each device consumes of them (`consumesCounters`), and device taints.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as resourcev1;

use super::too_many;
use crate::meta::{FieldError, Projector};
use crate::quantity::Quantity;

/// Counter sets per slice, and sets a device consumes from (the API's limits, rounded up).
pub const MAX_COUNTER_SETS: usize = 8;
/// Counters per set.
pub const MAX_COUNTERS: usize = 32;

/// A named set of counters: what a slice has (`sharedCounters`) or a device takes
/// (`consumesCounters`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CounterSet {
    pub name: Arc<str>,
    pub counters: Vec<(Arc<str>, Quantity)>,
}

fn counters(
    list: &BTreeMap<String, resourcev1::Counter>,
    path: &str,
    p: &mut Projector,
) -> Result<Vec<(Arc<str>, Quantity)>, FieldError> {
    too_many(path, list.len(), MAX_COUNTERS)?;
    list.iter()
        .map(|(k, c)| {
            let q = Quantity::parse(&c.value.0)
                .map_err(|e| FieldError::new(format!("{path}[{k}].value"), e))?;
            Ok((p.str(k), q))
        })
        .collect()
}

/// A slice's `sharedCounters`.
pub fn shared(
    sets: Option<&Vec<resourcev1::CounterSet>>,
    p: &mut Projector,
) -> Result<Vec<CounterSet>, FieldError> {
    let sets = sets.map(Vec::as_slice).unwrap_or_default();
    too_many("spec.sharedCounters", sets.len(), MAX_COUNTER_SETS)?;
    sets.iter()
        .enumerate()
        .map(|(i, s)| {
            Ok(CounterSet {
                name: p.str(&s.name),
                counters: counters(
                    &s.counters,
                    &format!("spec.sharedCounters[{i}].counters"),
                    p,
                )?,
            })
        })
        .collect()
}

/// A device's `consumesCounters`.
pub fn consumed(
    uses: Option<&Vec<resourcev1::DeviceCounterConsumption>>,
    path: &str,
    p: &mut Projector,
) -> Result<Vec<CounterSet>, FieldError> {
    let uses = uses.map(Vec::as_slice).unwrap_or_default();
    let at = format!("{path}.consumesCounters");
    too_many(&at, uses.len(), MAX_COUNTER_SETS)?;
    uses.iter()
        .enumerate()
        .map(|(i, u)| {
            Ok(CounterSet {
                name: p.str(&u.counter_set),
                counters: counters(&u.counters, &format!("{at}[{i}].counters"), p)?,
            })
        })
        .collect()
}

/// A taint that keeps a device from being allocated (`NoSchedule`, `NoExecute`); requests
/// that tolerate taints are not simulated, so any such taint makes the device unavailable.
pub fn tainted(taints: Option<&Vec<resourcev1::DeviceTaint>>) -> bool {
    taints
        .into_iter()
        .flatten()
        .any(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
}
