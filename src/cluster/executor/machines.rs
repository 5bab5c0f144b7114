//! Deleting a machine the way the Machine API expects an autoscaler to: mark it with its
//! group's delete annotation (`<group>/delete-machine`, which the MachineSet controller
//! removes first), then lower the group's replicas by exactly one.
//!
//! Before the decrement the executor records on the Machine the replicas it starts from
//! ([`SCALE_DOWN_FROM_ANNOTATION`]) and the group ([`SCALE_DOWN_GROUP_ANNOTATION`]): a run
//! interrupted between the mark and the decrement leaves a machine whose group still has
//! that many replicas, and start-up recovery finishes the decrement. A decrement that fails
//! takes the mark off again. The caller holds the group's lock, so the recorded count is the
//! one the decrement starts from.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use serde_json::{Value, json};

use super::failure::{Failure, Stop};
use super::mark_seen::{MARK_SEEN, mark_seen};
use super::scale::{self, Observed, ScaleTarget};
use super::{CONFLICT_ATTEMPTS, Context, SCALE_DOWN_FROM_ANNOTATION, SCALE_DOWN_GROUP_ANNOTATION};
use crate::cluster::cache::discovery::machine_api_resource;
use crate::cluster::error::{CallError, Write};
use crate::engine::nodegroups::NodeGroupId;
use crate::model::machine_kind::MACHINE;
use crate::model::{MachineApi, MachineApiGroup, ObjectKey, ScalableKind};

/// A Machine, by API group (at the version the cluster is written through) and key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct MachineRef {
    pub api: MachineApi,
    pub key: ObjectKey,
}

impl MachineRef {
    /// `Machine ns/name`, for messages.
    pub(super) fn describe(&self) -> String {
        format!("Machine {}", self.key)
    }

    pub(super) fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(
            client.clone(),
            &self.key.namespace,
            &machine_resource(self.api),
        )
    }

    /// A write to this Machine, for its span.
    fn write(&self, method: &'static str) -> Write<'_> {
        Write {
            method,
            kind: MACHINE.name,
            subresource: None,
            namespace: Some(&self.key.namespace),
            name: &self.key.name,
        }
    }

    pub(super) async fn get(&self, ctx: &Context) -> Result<DynamicObject, CallError> {
        ctx.call(
            || format!("get {}", self.describe()),
            self.api(&ctx.client).get(&self.key.name),
        )
        .await
    }

    /// The Machine, if it is neither gone nor being deleted (else the plan is stale).
    async fn get_live(&self, ctx: &Context) -> Result<DynamicObject, Stop> {
        match self.get(ctx).await {
            Ok(obj) if obj.metadata.deletion_timestamp.is_some() => Err(Stop::Skip(format!(
                "{} is already being deleted",
                self.describe()
            ))),
            Ok(obj) => Ok(obj),
            Err(e) if e.is_not_found() => Err(Stop::Skip(format!("{} is gone", self.describe()))),
            Err(e) => Err(e.into()),
        }
    }

    /// Applies a merge patch to the Machine's metadata.
    async fn patch(&self, ctx: &Context, what: &str, patch: Value) -> Result<(), Stop> {
        ctx.may_write()?;
        tracing::debug!(machine = %self.key, what, "patching machine");
        ctx.write(
            self.write("PATCH"),
            || format!("{what} {}", self.describe()),
            self.api(&ctx.client).patch(
                &self.key.name,
                &PatchParams::default(),
                &Patch::Merge(patch),
            ),
        )
        .await?;
        Ok(())
    }
}

/// The Machines of one API group, at the version chosen for it.
pub(super) fn machine_resource(api: MachineApi) -> ApiResource {
    machine_api_resource(api, &MACHINE)
}

fn annotations(obj: &DynamicObject) -> Option<&BTreeMap<String, String>> {
    obj.metadata.annotations.as_ref()
}

/// Carries the group's delete annotation.
pub(super) fn is_marked(obj: &DynamicObject, api: MachineApiGroup) -> bool {
    annotations(obj).is_some_and(|a| a.contains_key(&api.delete_machine_annotation()))
}

/// The replicas recorded when a decrement was asked for this machine, if any.
pub(super) fn recorded_from(obj: &DynamicObject) -> Option<u64> {
    annotations(obj)?
        .get(SCALE_DOWN_FROM_ANNOTATION)?
        .trim()
        .parse()
        .ok()
}

/// The group recorded with the decrement, if any.
pub(super) fn recorded_group(obj: &DynamicObject) -> Option<&str> {
    annotations(obj)?
        .get(SCALE_DOWN_GROUP_ANNOTATION)
        .map(String::as_str)
}

/// The merge patch that marks a machine (against `resource_version`), recording the
/// decrement's starting count when there will be one.
pub(super) fn mark_patch(
    api: MachineApiGroup,
    resource_version: Option<&str>,
    now: Timestamp,
    decrement: Option<(u64, &NodeGroupId)>,
) -> Value {
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        api.delete_machine_annotation(),
        json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
    );
    if let Some((from, group)) = decrement {
        annotations.insert(SCALE_DOWN_FROM_ANNOTATION.into(), json!(from.to_string()));
        annotations.insert(SCALE_DOWN_GROUP_ANNOTATION.into(), json!(group.as_str()));
    }
    json!({"metadata": {"resourceVersion": resource_version, "annotations": annotations}})
}

/// The merge patch that takes the executor's marks off a machine; the delete annotation
/// too unless someone else had put it there first.
pub(super) fn unmark_patch(api: MachineApiGroup, keep_delete_mark: bool) -> Value {
    let mut annotations = serde_json::Map::new();
    if !keep_delete_mark {
        annotations.insert(api.delete_machine_annotation(), Value::Null);
    }
    annotations.insert(SCALE_DOWN_FROM_ANNOTATION.into(), Value::Null);
    annotations.insert(SCALE_DOWN_GROUP_ANNOTATION.into(), Value::Null);
    json!({"metadata": {"annotations": annotations}})
}

/// The machines controlled by the object with `uid` that are not being deleted.
fn live_machines_of(uid: &str, machines: &[DynamicObject]) -> usize {
    machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter(|m| {
            m.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .count()
}

/// A group lowered by one for a machine.
#[derive(Clone, Debug)]
pub(super) struct Lowered {
    pub group: String,
    pub from: u64,
    pub to: u64,
    /// An earlier run had done it already.
    pub already: bool,
    /// The group was lowered before a watch showed the mark (`mark_seen`).
    pub mark_unseen: bool,
}

impl Lowered {
    pub(super) fn detail(&self, machine: &MachineRef) -> String {
        let how = if self.already {
            "already marked and lowered"
        } else {
            "marked for deletion"
        };
        let unseen = if self.mark_unseen {
            format!(
                " (lowered without a watch showing the mark within {}s: its controller may \
                 delete another machine)",
                MARK_SEEN.as_secs()
            )
        } else {
            String::new()
        };
        format!(
            "{} {how}; {} replicas {} -> {}{unseen}",
            machine.describe(),
            self.group,
            self.from,
            self.to
        )
    }
}

/// A mark-and-lower that did not finish: why, and whether the machine still carries the
/// executor's mark (then the node must stay tainted: recovery may finish the decrement).
#[derive(Debug)]
pub(super) struct Unfinished {
    pub stop: Stop,
    pub mark_left: bool,
}

impl Unfinished {
    pub(super) fn into_stop(self) -> Stop {
        self.stop
    }

    fn unmarked(stop: impl Into<Stop>) -> Self {
        Unfinished {
            stop: stop.into(),
            mark_left: false,
        }
    }
}

/// One machine to delete, in its group.
pub(super) struct MachineDeletion<'a> {
    pub target: &'a ScaleTarget,
    pub machine: &'a MachineRef,
}

impl MachineDeletion<'_> {
    /// Marks the machine and lowers its group by one, never below the group's min.
    /// Idempotent: a machine already marked by an earlier run whose group is already lower
    /// is reported as done. The caller holds the group's lock.
    pub(super) async fn mark_and_lower(&self, ctx: &Context) -> Result<Lowered, Unfinished> {
        let (t, m) = (self.target, self.machine);
        let seen = scale::read(ctx, t).await.map_err(Unfinished::unmarked)?;
        let obj = m.get_live(ctx).await.map_err(Unfinished::unmarked)?;
        let done_before =
            recorded_from(&obj).filter(|f| is_marked(&obj, m.api.group) && seen.replicas < *f);
        if let Some(from) = done_before
            && !self.decrement_spent(ctx, &obj, seen.replicas).await
        {
            return Ok(Lowered {
                group: t.describe(),
                from,
                to: seen.replicas,
                already: true,
                mark_unseen: false,
            });
        }
        if seen.replicas <= t.min {
            return Err(Unfinished::unmarked(at_min(t, seen.replicas)));
        }
        let marked_before = is_marked(&obj, m.api.group);
        let visible = self.mark_and_see(ctx, obj, seen.replicas).await?;
        match self.lower(ctx, seen).await {
            Ok(l) => Ok(Lowered {
                mark_unseen: !visible,
                ..l
            }),
            // The decrement may have landed and could not be checked: taking the mark off
            // would let the group remove some other, undrained machine. The mark stays and
            // recovery settles it from the recorded count.
            Err(stop) if stop.may_have_landed() => Err(Unfinished {
                stop: stop.with_undo(format!(
                    "{} left marked: its decrement may have landed; recovery settles it",
                    m.describe()
                )),
                mark_left: true,
            }),
            Err(stop) => Err(self.unmark(ctx, stop, marked_before).await),
        }
    }

    /// Marks the machine (recording the decrement from `from`), then waits for a watch to
    /// show the mark, so that the group's controller holds it when it sees the decrement
    /// (`mark_seen`); whether one did. A failed mark is undone.
    async fn mark_and_see(
        &self,
        ctx: &Context,
        obj: DynamicObject,
        from: u64,
    ) -> Result<bool, Unfinished> {
        let (t, m) = (self.target, self.machine);
        let marked_before = is_marked(&obj, m.api.group);
        match self.mark(ctx, obj, from).await {
            Ok(()) => {}
            // A mark refused or never sent left nothing; one whose answer was lost may be on.
            Err(stop) if !stop.may_have_landed() => return Err(Unfinished::unmarked(stop)),
            Err(stop) => return Err(self.unmark(ctx, stop, marked_before).await),
        }
        let seen = mark_seen(&m.api(&ctx.client), &m.key.name, m.api.group).await;
        if !seen {
            tracing::warn!(machine = %m.key, node_group.id = %t.group,
                "no watch showed the mark on {} within {}s; lowering {} anyway",
                m.describe(), MARK_SEEN.as_secs(), t.describe());
        }
        Ok(seen)
    }

    /// Whether a decrement recorded on this marked machine was spent on another machine:
    /// the MachineSet has exactly its replicas in machines not being deleted, this one among
    /// them, so its controller deletes nothing more and this machine would stay forever (the
    /// controller chose another, its cache not yet holding the mark). Then the group is
    /// lowered again, as upstream's provider lowers again for a node whose machine is not
    /// being deleted. Anything unread, or a MachineDeployment, counts as not spent: the
    /// old decrement is trusted, never a second one risked.
    async fn decrement_spent(&self, ctx: &Context, obj: &DynamicObject, replicas: u64) -> bool {
        let t = self.target;
        if t.kind != ScalableKind::MachineSet || obj.metadata.deletion_timestamp.is_some() {
            return false;
        }
        match self.live_machines_of_set(ctx).await {
            Ok(Some(live)) if u64::try_from(live).is_ok_and(|l| l == replicas) => {
                tracing::info!(machine = %self.machine.key, node_group.id = %t.group,
                    "{} has {replicas} machines for {replicas} replicas, {} still among them: \
                     its controller deleted another machine for the decrement; lowering again",
                    t.describe(), self.machine.describe());
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::debug!(error = %e, "cannot count the machines of {}", t.describe());
                false
            }
        }
    }

    /// The machines the MachineSet controls that are not being deleted; `None` when its
    /// selector names no labels to list them by.
    async fn live_machines_of_set(&self, ctx: &Context) -> Result<Option<usize>, CallError> {
        let t = self.target;
        let set = ctx
            .call(
                || format!("get {}", t.describe()),
                t.api(&ctx.client).get(&t.key.name),
            )
            .await?;
        let labels = set
            .data
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object);
        let (Some(uid), Some(labels)) = (set.metadata.uid.as_deref(), labels) else {
            return Ok(None);
        };
        let selector: Vec<String> = labels
            .iter()
            .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
            .collect();
        if selector.is_empty() {
            return Ok(None);
        }
        let params = ListParams::default().labels(&selector.join(","));
        let listed = ctx
            .call(
                || format!("list the machines of {}", t.describe()),
                self.machine.api(&ctx.client).list(&params),
            )
            .await?;
        Ok(Some(live_machines_of(uid, &listed.items)))
    }

    /// For a group at its min: marks the machine and deletes it, so the group replaces it.
    pub(super) async fn mark_and_delete(&self, ctx: &Context) -> Result<String, Stop> {
        let (t, m) = (self.target, self.machine);
        let mut obj = m.get_live(ctx).await?;
        let mut attempt = 1;
        loop {
            let rv = obj.metadata.resource_version.as_deref();
            let patch = mark_patch(m.api.group, rv, Timestamp::now(), None);
            match m.patch(ctx, "mark", patch).await {
                Ok(()) => break,
                Err(stop) if stop.is_conflict() && attempt < CONFLICT_ATTEMPTS => {
                    attempt += 1;
                    obj = m.get_live(ctx).await?;
                }
                Err(stop) => return Err(stop),
            }
        }
        let uid = obj.metadata.uid.clone();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        ctx.may_write()?;
        tracing::debug!(machine = %m.key, node_group.id = %t.group, "deleting machine");
        ctx.write(
            m.write("DELETE"),
            || format!("delete {}", m.describe()),
            m.api(&ctx.client).delete(&m.key.name, &params),
        )
        .await?;
        Ok(format!(
            "{} marked and deleted; {} keeps its replicas (at its min size {}) and replaces it",
            m.describe(),
            t.describe(),
            t.min
        ))
    }

    /// Marks the machine, recording the decrement from `from`; re-reads it on 409.
    async fn mark(&self, ctx: &Context, mut obj: DynamicObject, from: u64) -> Result<(), Stop> {
        let (t, m) = (self.target, self.machine);
        let mut attempt = 1;
        loop {
            let rv = obj.metadata.resource_version.as_deref();
            let patch = mark_patch(m.api.group, rv, Timestamp::now(), Some((from, &t.group)));
            match m.patch(ctx, "mark", patch).await {
                Ok(()) => return Ok(()),
                Err(stop) if stop.is_conflict() && attempt < CONFLICT_ATTEMPTS => {
                    attempt += 1;
                    obj = m.get_live(ctx).await?;
                }
                Err(stop) => return Err(stop),
            }
        }
    }

    /// Lowers the group by one from `seen`; on 409 re-reads it, re-checks the min and
    /// records the new starting count on the machine before trying again.
    async fn lower(&self, ctx: &Context, mut seen: Observed) -> Result<Lowered, Stop> {
        let (t, m) = (self.target, self.machine);
        let mut recorded = seen.replicas;
        let mut attempt = 1;
        loop {
            let to = seen.replicas.saturating_sub(1);
            match scale::write(ctx, t, &seen, to).await {
                Ok(()) => {
                    return Ok(Lowered {
                        group: t.describe(),
                        from: seen.replicas,
                        to,
                        already: false,
                        mark_unseen: false,
                    });
                }
                Err(stop) if stop.is_conflict() && attempt < CONFLICT_ATTEMPTS => {
                    attempt += 1;
                    seen = scale::read(ctx, t).await?;
                    // Lower than recorded: a decrement for this marked machine happened
                    // (another writer, or an earlier attempt); lowering again would take
                    // a second machine.
                    if seen.replicas < recorded {
                        return Ok(Lowered {
                            group: t.describe(),
                            from: recorded,
                            to: seen.replicas,
                            already: true,
                            mark_unseen: false,
                        });
                    }
                    if seen.replicas <= t.min {
                        return Err(at_min(t, seen.replicas).into());
                    }
                    if seen.replicas != recorded {
                        let from = json!(seen.replicas.to_string());
                        let patch = json!({"metadata": {"annotations": {SCALE_DOWN_FROM_ANNOTATION: from}}});
                        m.patch(ctx, "record the replicas on", patch).await?;
                        recorded = seen.replicas;
                    }
                }
                Err(stop) => {
                    return match self.landed_anyway(ctx, &stop, recorded).await {
                        Some(lowered) => Ok(lowered),
                        None => Err(stop),
                    };
                }
            }
        }
    }

    /// After a failed write whose fate is unknown (a timeout), the group may be lower
    /// already: then the decrement is done.
    async fn landed_anyway(&self, ctx: &Context, stop: &Stop, from: u64) -> Option<Lowered> {
        if !stop.may_have_landed() {
            return None;
        }
        let now = scale::read(ctx, self.target).await.ok()?;
        (now.replicas < from).then(|| Lowered {
            group: self.target.describe(),
            from,
            to: now.replicas,
            already: false,
            mark_unseen: false,
        })
    }

    /// Takes the mark off after a failure, when this replica may still write.
    async fn unmark(&self, ctx: &Context, stop: Stop, marked_before: bool) -> Unfinished {
        let m = self.machine;
        if ctx.may_write().is_err() {
            let left = format!("{} left marked for the leader's recovery", m.describe());
            return Unfinished {
                stop: stop.with_undo(left),
                mark_left: true,
            };
        }
        match m
            .patch(ctx, "unmark", unmark_patch(m.api.group, marked_before))
            .await
        {
            Ok(()) => Unfinished {
                stop: stop.with_undo(format!("mark removed from {}", m.describe())),
                mark_left: false,
            },
            Err(Stop::Fail(Failure::Call(e))) if e.is_not_found() => Unfinished {
                stop: stop.with_undo(format!("{} is gone", m.describe())),
                mark_left: false,
            },
            Err(e) => {
                let left = format!("the mark on {} could not be removed: {e}", m.describe());
                Unfinished {
                    stop: stop.with_undo(left),
                    mark_left: true,
                }
            }
        }
    }
}

fn at_min(t: &ScaleTarget, replicas: u64) -> Failure {
    Failure::AtMin {
        group: t.describe(),
        replicas,
        min: t.min,
    }
}

#[cfg(test)]
#[path = "machines_tests.rs"]
mod tests;
