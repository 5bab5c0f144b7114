//! The marks of a node being removed: the `ToBeDeletedByClusterAutoscaler` taint (effect
//! NoSchedule, value the unix time it was put on), which keeps new pods off and tells other
//! autoscaler passes the node is going, and optionally the cordon (`spec.unschedulable`).
//!
//! Each change is one read-modify-write of the Node against the resourceVersion read, so a
//! concurrent change to its taints is never lost (409: read again). The executor records
//! that it cordoned a node ([`CORDONED_ANNOTATION`]) and uncordons only those: a node an
//! administrator cordoned stays cordoned.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::failure::{Failure, Stop};
use super::{CONFLICT_ATTEMPTS, CORDONED_ANNOTATION, Context};
use crate::cluster::error::Write;
use crate::model::node::TO_BE_DELETED_TAINT;

fn has_taint(node: &Node) -> bool {
    taints(node).iter().any(|t| t.key == TO_BE_DELETED_TAINT)
}

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Whether the executor cordoned this node.
pub(super) fn cordoned_by_us(node: &Node) -> bool {
    node.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(CORDONED_ANNOTATION))
}

/// Whether the node carries a mark of a removal: the taint, or the executor's cordon.
pub(super) fn is_marked(node: &Node) -> bool {
    has_taint(node) || cordoned_by_us(node)
}

/// The merge patch that taints (and with `cordon`, cordons) the node, against its
/// resourceVersion; `None` when it already is.
pub(super) fn mark_patch(node: &Node, now: Timestamp, cordon: bool) -> Option<Value> {
    let cordons = cordon && !unschedulable(node);
    if has_taint(node) && !cordons {
        return None;
    }
    let mut list = taints(node).to_vec();
    if !has_taint(node) {
        list.push(Taint {
            key: TO_BE_DELETED_TAINT.to_string(),
            value: Some(now.as_second().to_string()),
            effect: "NoSchedule".to_string(),
            time_added: None,
        });
    }
    let mut patch = json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": list},
    });
    if cordons {
        patch["spec"]["unschedulable"] = json!(true);
        patch["metadata"]["annotations"] = json!({CORDONED_ANNOTATION: "true"});
    }
    Some(patch)
}

/// The merge patch that removes the taint and the executor's cordon, against the node's
/// resourceVersion; `None` when there is neither.
pub(super) fn unmark_patch(node: &Node) -> Option<Value> {
    if !is_marked(node) {
        return None;
    }
    let kept: Vec<&Taint> = taints(node)
        .iter()
        .filter(|t| t.key != TO_BE_DELETED_TAINT)
        .collect();
    let mut patch = json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {"taints": if kept.is_empty() { Value::Null } else { json!(kept) }},
    });
    if cordoned_by_us(node) {
        patch["spec"]["unschedulable"] = json!(false);
        patch["metadata"]["annotations"] = json!({CORDONED_ANNOTATION: null});
    }
    Some(patch)
}

/// Taints (and cordons) a node for its removal; a node already tainted is left as it is.
pub(super) async fn mark(ctx: &Context, name: &str, cordon: bool) -> Result<String, Stop> {
    read_modify_write(ctx, name, "taint", |node| {
        if node.metadata.deletion_timestamp.is_some() {
            return Err(Stop::Skip(format!("node {name} is being deleted")));
        }
        Ok(mark_patch(node, Timestamp::now(), cordon))
    })
    .await
    .map(|changed| match changed {
        Some(after) if after.cordoned => {
            format!("node {name} tainted {TO_BE_DELETED_TAINT}:NoSchedule and cordoned")
        }
        Some(_) if !cordon => format!(
            "node {name} tainted {TO_BE_DELETED_TAINT}:NoSchedule, not cordoned (cordon_node_before_terminating = false)"
        ),
        Some(_) => format!("node {name} tainted {TO_BE_DELETED_TAINT}:NoSchedule"),
        None => format!("node {name} already tainted {TO_BE_DELETED_TAINT}"),
    })
}

/// Removes the taint and the executor's cordon from a node (a node gone is fine).
pub(super) async fn unmark(ctx: &Context, name: &str) -> Result<String, Stop> {
    let changed = read_modify_write(ctx, name, "untaint", |node| Ok(unmark_patch(node))).await;
    match changed {
        Ok(Some(after)) if after.uncordoned => Ok(format!(
            "{TO_BE_DELETED_TAINT} taint removed from node {name} and uncordoned"
        )),
        Ok(Some(_)) => Ok(format!(
            "{TO_BE_DELETED_TAINT} taint removed from node {name}"
        )),
        Ok(None) => Ok(format!(
            "node {name} carries no {TO_BE_DELETED_TAINT} taint"
        )),
        Err(Stop::Fail(Failure::Call(e))) if e.is_not_found() => Ok(format!("node {name} is gone")),
        Err(stop) => Err(stop),
    }
}

/// What a write did to the cordon.
struct Written {
    cordoned: bool,
    uncordoned: bool,
}

/// Reads the node, asks `change` for a patch, writes it against the version read; again on
/// 409. `Ok(None)`: nothing to change.
async fn read_modify_write(
    ctx: &Context,
    name: &str,
    what: &str,
    change: impl Fn(&Node) -> Result<Option<Value>, Stop>,
) -> Result<Option<Written>, Stop> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut attempt = 1;
    loop {
        let node = ctx
            .call(|| format!("get node {name}"), api.get(name))
            .await?;
        let Some(patch) = change(&node)? else {
            return Ok(None);
        };
        let written = Written {
            cordoned: patch["spec"]["unschedulable"] == json!(true),
            uncordoned: patch["spec"]["unschedulable"] == json!(false),
        };
        ctx.may_write()?;
        tracing::debug!(k8s.node.name = name, what, "patching node");
        let target = Write {
            method: "PATCH",
            kind: "Node",
            subresource: None,
            namespace: None,
            name,
        };
        let result = ctx
            .write(
                target,
                || format!("{what} node {name}"),
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch)),
            )
            .await;
        match result {
            Ok(_) => return Ok(Some(written)),
            Err(e) if e.is_conflict() && attempt < CONFLICT_ATTEMPTS => attempt += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(spec: Value, annotations: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "resourceVersion": "7", "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    fn at() -> Timestamp {
        Timestamp::from_second(1_700_000_000).unwrap()
    }

    #[test]
    fn marking_adds_the_taint_and_records_the_cordon() {
        let n = node(
            json!({"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}),
            json!({}),
        );
        let p = mark_patch(&n, at(), true).unwrap();
        assert_eq!(
            p,
            json!({
                "metadata": {"resourceVersion": "7", "annotations": {CORDONED_ANNOTATION: "true"}},
                "spec": {"unschedulable": true, "taints": [
                    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
                    {"key": TO_BE_DELETED_TAINT, "value": "1700000000", "effect": "NoSchedule"}]}
            })
        );
        let without_cordon = mark_patch(&n, at(), false).unwrap();
        assert!(without_cordon["spec"].get("unschedulable").is_none());
        assert!(without_cordon["metadata"].get("annotations").is_none());
    }

    #[test]
    fn marking_is_idempotent_and_leaves_an_admin_cordon_alone() {
        let tainted = node(
            json!({"unschedulable": true, "taints": [{"key": TO_BE_DELETED_TAINT, "value": "1", "effect": "NoSchedule"}]}),
            json!({}),
        );
        assert_eq!(mark_patch(&tainted, at(), true), None);
        // Cordoned by an administrator: tainted, not recorded as our cordon.
        let admin = node(json!({"unschedulable": true}), json!({}));
        let p = mark_patch(&admin, at(), true).unwrap();
        assert!(p["metadata"].get("annotations").is_none());
        let after = node(p["spec"].clone(), json!({}));
        let undo = unmark_patch(&after).unwrap();
        assert_eq!(undo["spec"]["taints"], Value::Null);
        assert!(undo["spec"].get("unschedulable").is_none(), "{undo}");
    }

    #[test]
    fn unmarking_removes_only_our_taint_and_our_cordon() {
        let n = node(
            json!({"unschedulable": true, "taints": [
                {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
                {"key": TO_BE_DELETED_TAINT, "value": "1", "effect": "NoSchedule"}]}),
            json!({CORDONED_ANNOTATION: "true"}),
        );
        let p = unmark_patch(&n).unwrap();
        assert_eq!(
            p,
            json!({
                "metadata": {"resourceVersion": "7", "annotations": {CORDONED_ANNOTATION: null}},
                "spec": {"unschedulable": false, "taints": [
                    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}
            })
        );
        assert_eq!(unmark_patch(&node(json!({}), json!({}))), None);
    }
}
