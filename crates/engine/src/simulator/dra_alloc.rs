//! Allocating one claim's devices on one node: each request's first alternative that can
//! be had, greedily, devices in slice order; with `matchAttribute` constraints, once per
//! combination of the constrained attributes' values found on the node (at most
//! `MAX_COMBINATIONS`), the first that works.

use fleetscaler_model::dra::{AllocationMode, AttributeValue, ClaimSpec, DeviceChoice, DeviceId};
use fleetscaler_model::dra::{DeviceRequest, MatchAttribute};
use std::sync::Arc;

use std::collections::HashMap;

use super::{Candidate, CounterKey, Eval, Objects, SimNode, Visible};

/// How many combinations of constrained values are tried before the claim counts as not
/// satisfiable on the node: cautious, never a node bought on a guess.
const MAX_COMBINATIONS: usize = 256;

/// Each constraint with the value its devices must have, for one try.
type Fixed<'a> = [(&'a MatchAttribute, &'a AttributeValue)];

/// The devices of one claim on `node`, besides `picked`, or why there are not enough.
pub(super) fn allocate(
    objects: &Objects,
    eval: &mut Eval,
    spec: &ClaimSpec,
    (node, idx): (&SimNode, usize),
    picked: &[DeviceId],
) -> Result<Vec<DeviceId>, String> {
    let visible = objects.candidates(node, idx);
    let found = &visible;
    if spec.constraints.is_empty() {
        return allocate_with(objects, eval, &spec.requests, found, picked, &[]);
    }
    let mut values: Vec<Vec<&AttributeValue>> = Vec::new();
    for c in &spec.constraints {
        let mut seen: Vec<&AttributeValue> = Vec::new();
        for f in &found.devices {
            if let Some(v) = f.device.attribute(f.driver, &c.attribute)
                && !seen.contains(&v)
            {
                seen.push(v);
            }
        }
        if seen.is_empty() {
            return Err(format!(
                "no device the node can use has the attribute {} its matchAttribute constraint needs",
                c.attribute
            ));
        }
        values.push(seen);
    }
    let mut last = String::new();
    let mut at = vec![0usize; values.len()];
    for _ in 0..MAX_COMBINATIONS {
        let fixed: Vec<(&MatchAttribute, &AttributeValue)> = spec
            .constraints
            .iter()
            .zip(&at)
            .zip(&values)
            .map(|((c, &i), v)| (c, v[i]))
            .collect();
        match allocate_with(objects, eval, &spec.requests, found, picked, &fixed) {
            Ok(devices) => return Ok(devices),
            Err(why) => last = why,
        }
        if !next_combination(&mut at, &values) {
            return Err(format!(
                "{last} (with one value of each matchAttribute constraint)"
            ));
        }
    }
    Err(format!(
        "{last} (tried {MAX_COMBINATIONS} combinations of matchAttribute values)"
    ))
}

/// Advances an odometer over the values; false once every combination was had.
fn next_combination(at: &mut [usize], values: &[Vec<&AttributeValue>]) -> bool {
    for (i, v) in at.iter_mut().zip(values) {
        *i += 1;
        if *i < v.len() {
            return true;
        }
        *i = 0;
    }
    false
}

fn allocate_with(
    objects: &Objects,
    eval: &mut Eval,
    requests: &[DeviceRequest],
    found: &Visible<'_>,
    picked: &[DeviceId],
    fixed: &Fixed<'_>,
) -> Result<Vec<DeviceId>, String> {
    let mut taken: Vec<DeviceId> = picked.to_vec();
    let start = taken.len();
    for request in requests {
        let bound: Vec<(&MatchAttribute, &AttributeValue)> = fixed
            .iter()
            .filter(|(c, _)| c.binds(&request.name))
            .copied()
            .collect();
        let mut last = String::new();
        let mut done = false;
        for choice in &request.choices {
            match choose(objects, eval, choice, found, &taken, &bound) {
                Ok(devices) => {
                    taken.extend(devices);
                    done = true;
                    break;
                }
                Err(why) => last = why,
            }
        }
        if !done {
            return Err(format!("request {}: {last}", request.name));
        }
    }
    Ok(taken.split_off(start))
}

/// The devices for one alternative of a request, or why there are not enough.
fn choose(
    objects: &Objects,
    eval: &mut Eval,
    choice: &DeviceChoice,
    found: &Visible<'_>,
    taken: &[DeviceId],
    fixed: &Fixed<'_>,
) -> Result<Vec<DeviceId>, String> {
    let empty = Vec::new();
    let class_selectors = objects.classes.get(&choice.class).unwrap_or(&empty);
    let mut left = counters_left(objects, eval, found, taken);
    let mut free = Vec::new();
    let mut busy = 0;
    for c in found.devices.iter().filter(|c| !c.device.tainted) {
        let constrained = fixed
            .iter()
            .all(|(m, v)| c.device.attribute(c.driver, &m.attribute) == Some(*v));
        let wanted = constrained
            && class_selectors
                .iter()
                .chain(&choice.selectors)
                .all(|e| eval.matches(e, c.driver, c.device));
        if !wanted {
            continue;
        }
        let id = c.id();
        let wanted_more = match choice.mode {
            AllocationMode::ExactCount(n) => (free.len() as i64) < n,
            AllocationMode::All => true,
        };
        if eval.in_use(objects, &id, taken) || found.held.contains(&id) || !wanted_more {
            busy += usize::from(wanted_more);
        } else if take_counters(&mut left, c) {
            free.push(id);
        } else {
            // Its partitions' counters are used up by devices in use.
            busy += 1;
        }
    }
    let what = || {
        let sub = if choice.name.is_empty() {
            String::new()
        } else {
            format!(" (subrequest {})", choice.name)
        };
        format!("device class {}{sub}", choice.class)
    };
    match choice.mode {
        AllocationMode::ExactCount(n) if free.len() as i64 >= n => {
            free.truncate(n as usize);
            Ok(free)
        }
        AllocationMode::ExactCount(n) => Err(format!(
            "needs {n} device(s) of {} matching its selectors; the node has {} such device(s) free and {busy} in use",
            what(),
            free.len()
        )),
        AllocationMode::All if busy == 0 && !free.is_empty() => Ok(free),
        AllocationMode::All => Err(format!(
            "needs all devices of {} matching its selectors, at least one and none in use; the node has {} free and {busy} in use",
            what(),
            free.len()
        )),
    }
}

/// What is left of each shared counter the node can use, after the devices in use and
/// those taken for this claim.
fn counters_left(
    objects: &Objects,
    eval: &Eval,
    found: &Visible<'_>,
    taken: &[DeviceId],
) -> HashMap<CounterKey, i128> {
    let mut left = found.capacity.clone();
    if left.is_empty() {
        return left;
    }
    for c in found
        .devices
        .iter()
        .filter(|c| !c.device.consumes.is_empty())
    {
        let id = c.id();
        if eval.in_use(objects, &id, taken) || found.held.contains(&id) {
            for set in &c.device.consumes {
                for (name, q) in &set.counters {
                    let key = (
                        c.driver.clone(),
                        c.pool.clone(),
                        set.name.clone(),
                        name.clone(),
                    );
                    if let Some(v) = left.get_mut(&key) {
                        *v -= q.nanos();
                    }
                }
            }
        }
    }
    left
}

/// Takes what the device consumes from `left`, if all of it is there; a counter its pool
/// does not publish has nothing to give.
fn take_counters(left: &mut HashMap<CounterKey, i128>, c: &Candidate<'_>) -> bool {
    let key = |set: &Arc<str>, name: &Arc<str>| {
        (c.driver.clone(), c.pool.clone(), set.clone(), name.clone())
    };
    let fits = c.device.consumes.iter().all(|set| {
        set.counters.iter().all(|(name, q)| {
            left.get(&key(&set.name, name))
                .is_some_and(|v| *v >= q.nanos())
        })
    });
    if fits {
        for set in &c.device.consumes {
            for (name, q) in &set.counters {
                if let Some(v) = left.get_mut(&key(&set.name, name)) {
                    *v -= q.nanos();
                }
            }
        }
    }
    fits
}
