//! A node group's replicas, through the `scale` subresource (`autoscaling/v1 Scale`) of its
//! MachineSet or MachineDeployment, for either Machine API group, at the version discovery
//! chose for the group.
//!
//! Every write carries a resourceVersion, so it lands only on the state it was decided
//! from; a 409 means "read again and decide again". A resize's first write goes out against
//! the version in the cache the plan was made from (the Scale of a custom resource carries
//! the resource's own version): when the group has not changed since, one call instead of a
//! read and a write, which under a burst's load is half a second saved per group. A resize also
//! checks that the group still has the replicas the plan saw (`from`): a plan carried out
//! twice, or planned on a cache that was behind, is skipped rather than applied twice.

use std::sync::Arc;

use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};

use super::failure::{Failure, Stop};
use super::{CONFLICT_ATTEMPTS, Context};
use crate::cluster::cache::discovery::machine_api_resource;
use crate::cluster::error::{CallError, Write};
use crate::engine::nodegroups::NodeGroupId;
use crate::model::{MachineApi, ObjectKey, ScalableKind};

/// The MachineSet or MachineDeployment behind a node group, with the group's bounds.
#[derive(Clone, Debug)]
pub(super) struct ScaleTarget {
    pub group: NodeGroupId,
    /// The Machine API group, at the version the cluster is written through.
    pub api: MachineApi,
    pub kind: ScalableKind,
    pub key: ObjectKey,
    pub min: u64,
    pub max: u64,
    /// The replicas and resourceVersion the cache holds, when it has a version.
    pub cached: Option<(u64, Arc<str>)>,
}

impl ScaleTarget {
    /// `MachineSet openshift-machine-api/worker-a`, for messages.
    pub(super) fn describe(&self) -> String {
        format!("{} {}", self.kind.as_str(), self.key)
    }

    /// The resource, at the version chosen for its group.
    pub(super) fn resource(&self) -> ApiResource {
        machine_api_resource(self.api, self.kind.descriptor())
    }

    pub(super) fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), &self.key.namespace, &self.resource())
    }

    /// The Scale as the cache has it, if the cache saw the group at `from` replicas: what a
    /// resize from `from` writes against before reading anything.
    fn cached_at(&self, from: u64) -> Option<Observed> {
        let (replicas, version) = self.cached.as_ref().filter(|(r, _)| *r == from)?;
        let scale = Scale {
            metadata: ObjectMeta {
                name: Some(self.key.name.to_string()),
                namespace: Some(self.key.namespace.to_string()),
                resource_version: Some(version.to_string()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: None,
        };
        Some(Observed {
            replicas: *replicas,
            scale,
        })
    }
}

/// A Scale as read: its replicas, and the object to write back (with its resourceVersion).
#[derive(Clone, Debug)]
pub(super) struct Observed {
    pub replicas: u64,
    scale: Scale,
}

/// Reads the group's Scale.
pub(super) async fn read(ctx: &Context, t: &ScaleTarget) -> Result<Observed, CallError> {
    let api = t.api(&ctx.client);
    let scale = ctx
        .call(
            || format!("get scale of {}", t.describe()),
            api.get_scale(&t.key.name),
        )
        .await?;
    // An absent `spec.replicas` in a Scale is 0 (the field is omitted when empty).
    let replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    Ok(Observed {
        replicas: u64::try_from(replicas).unwrap_or(0),
        scale,
    })
}

/// Writes `to` replicas against the version in `seen` (a 409 if the group changed since).
pub(super) async fn write(
    ctx: &Context,
    t: &ScaleTarget,
    seen: &Observed,
    to: u64,
) -> Result<(), Stop> {
    let replicas = i32::try_from(to).map_err(|_| {
        Failure::Invalid(format!(
            "{}: {to} replicas is more than the API accepts",
            t.describe()
        ))
    })?;
    let mut scale = seen.scale.clone();
    scale.spec = Some(ScaleSpec {
        replicas: Some(replicas),
    });
    scale.status = None;
    let api = t.api(&ctx.client);
    ctx.may_write()?;
    tracing::debug!(node_group.id = %t.group, from = seen.replicas, to, "writing replicas");
    let target = Write {
        method: "PUT",
        kind: t.kind.as_str(),
        subresource: Some("scale"),
        namespace: Some(&t.key.namespace),
        name: &t.key.name,
    };
    ctx.write(
        target,
        || format!("update scale of {} to {to} replicas", t.describe()),
        api.replace_scale(&t.key.name, &PostParams::default(), &scale),
    )
    .await?;
    Ok(())
}

/// Which way a plan resizes a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Resize {
    /// A scale-up: `to` above `from`, at most the group's max.
    Up,
    /// A target fix: `to` below `from`, at least the group's min.
    Fix,
}

/// Why a resize is not written: the plan no longer matches the group, or would take it past
/// its bounds. `what` describes the group.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    #[error("plan is stale: it saw {from} replicas, {what} has {current} now{}", repeated(*.current, *.to))]
    Stale {
        what: String,
        from: u64,
        current: u64,
        to: u64,
    },
    #[error("scale-up of {what} from {from} to {to} is not an increase")]
    NotIncrease { what: String, from: u64, to: u64 },
    #[error("scale-up of {what} to {to} would exceed its max size {max}")]
    AboveMax { what: String, to: u64, max: u64 },
    #[error("target fix of {what} from {from} to {to} is not a decrease")]
    NotDecrease { what: String, from: u64, to: u64 },
    #[error("target fix of {what} to {to} would go below its min size {min}")]
    BelowMin { what: String, to: u64, min: u64 },
}

/// A group already at the plan's target was most likely resized by the same plan before.
fn repeated(current: u64, to: u64) -> String {
    if current == to {
        format!(" (already at {to}: a repeated plan?)")
    } else {
        String::new()
    }
}

/// Whether a resize from `from` to `to` may be written now that the group has `current`
/// replicas; the error is the reason to skip it.
pub(super) fn check_resize(
    kind: Resize,
    t: &ScaleTarget,
    current: u64,
    from: u64,
    to: u64,
) -> Result<(), Refused> {
    let what = t.describe();
    if current != from {
        return Err(Refused::Stale {
            what,
            from,
            current,
            to,
        });
    }
    match kind {
        Resize::Up if to <= from => Err(Refused::NotIncrease { what, from, to }),
        Resize::Up if to > t.max => Err(Refused::AboveMax {
            what,
            to,
            max: t.max,
        }),
        Resize::Fix if to >= from => Err(Refused::NotDecrease { what, from, to }),
        Resize::Fix if to < t.min => Err(Refused::BelowMin {
            what,
            to,
            min: t.min,
        }),
        _ => Ok(()),
    }
}

/// Sets the replicas from `from` to `to` if the group still has `from`: first against the
/// cached version, then re-reading on 409.
pub(super) async fn resize(
    ctx: &Context,
    t: &ScaleTarget,
    kind: Resize,
    from: u64,
    to: u64,
) -> Result<String, Stop> {
    let mut attempt = 1;
    let mut transient = 0;
    let mut cached = t.cached_at(from);
    loop {
        let seen = match cached.take() {
            Some(seen) => Ok(seen),
            None => read(ctx, t).await,
        };
        let seen = match seen {
            Ok(seen) => seen,
            Err(e) => {
                let stop = Stop::from(Failure::Call(e));
                if pause_if_transient(&stop, &mut transient).await {
                    continue;
                }
                return Err(stop);
            }
        };
        check_resize(kind, t, seen.replicas, from, to).map_err(|e| Stop::Skip(e.to_string()))?;
        let Err(stop) = write(ctx, t, &seen, to).await else {
            return Ok(format!("{} replicas {from} -> {to}", t.describe()));
        };
        if stop.is_conflict() && attempt < CONFLICT_ATTEMPTS {
            tracing::debug!(node_group.id = %t.group, attempt, "replicas changed since read (409): reading the Scale again");
            attempt += 1;
        } else if pause_if_transient(&stop, &mut transient).await {
            // "Not now" (429, 5xx): tried again a moment later, a few times, before this
            // pass gives up (and the next pass tries again: no backoff for an API error).
        } else if stop.may_have_landed() {
            // No answer: the write may have landed. A group now at `to` was resized by it
            // (the precondition means nobody else wrote in between).
            return match read(ctx, t).await {
                Ok(now) if now.replicas == to => Ok(format!(
                    "{} replicas {from} -> {to} (confirmed after the write went unanswered)",
                    t.describe()
                )),
                _ => Err(stop),
            };
        } else {
            return Err(stop);
        }
    }
}

/// Waits a moment (jittered, growing) if `stop` says "not now" and tries are left.
async fn pause_if_transient(stop: &Stop, tries: &mut u32) -> bool {
    if !stop.is_transient() || *tries >= TRANSIENT_RETRIES {
        return false;
    }
    *tries += 1;
    tokio::time::sleep(retry_delay(*tries)).await;
    true
}

const TRANSIENT_RETRIES: u32 = 3;

/// 250 ms, 500 ms, 1 s, each ±50 %, so that writers refused together do not return together.
fn retry_delay(retry: u32) -> std::time::Duration {
    let base = 250u64 << retry.saturating_sub(1).min(4);
    crate::cluster::error::jittered(std::time::Duration::from_millis(base))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MachineApiGroup, MachineApiVersion};

    #[test]
    fn retry_delays_grow_and_stay_within_their_jitter() {
        for (retry, base) in [(1, 250), (2, 500), (3, 1000)] {
            let d = retry_delay(retry).as_millis() as u64;
            assert!((base / 2..base * 3 / 2).contains(&d), "{retry}: {d}");
        }
    }

    fn target() -> ScaleTarget {
        ScaleTarget {
            group: NodeGroupId::new(
                MachineApiGroup::OpenShift,
                ScalableKind::MachineSet,
                &ObjectKey::new("ns", "a"),
            ),
            api: MachineApi {
                group: MachineApiGroup::OpenShift,
                version: MachineApiVersion::V1beta1,
            },
            kind: ScalableKind::MachineSet,
            key: ObjectKey::new("ns", "a"),
            min: 1,
            max: 5,
            cached: None,
        }
    }

    /// The path of the scale subresource the executor reads and writes.
    fn scale_path(t: &ScaleTarget) -> String {
        use kube::Resource;
        let path = DynamicObject::url_path(&t.resource(), Some(&t.key.namespace));
        let req = kube::core::Request::new(path)
            .get_subresource("scale", &t.key.name)
            .unwrap();
        req.uri().to_string()
    }

    #[test]
    fn the_scale_subresource_is_reached_at_the_chosen_version() {
        let os = target();
        assert_eq!(
            scale_path(&os),
            "/apis/machine.openshift.io/v1beta1/namespaces/ns/machinesets/a/scale"
        );
        let capi = |version| ScaleTarget {
            api: MachineApi {
                group: MachineApiGroup::ClusterApi,
                version,
            },
            kind: ScalableKind::MachineDeployment,
            key: ObjectKey::new("default", "md-0"),
            ..target()
        };
        assert_eq!(
            scale_path(&capi(MachineApiVersion::V1beta2)),
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machinedeployments/md-0/scale"
        );
        assert_eq!(
            scale_path(&capi(MachineApiVersion::V1beta1)),
            "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machinedeployments/md-0/scale"
        );
    }

    #[test]
    fn a_stale_from_is_refused_naming_both_counts() {
        let err = check_resize(Resize::Up, &target(), 3, 2, 4)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "plan is stale: it saw 2 replicas, MachineSet ns/a has 3 now"
        );
        let again = check_resize(Resize::Up, &target(), 4, 2, 4)
            .unwrap_err()
            .to_string();
        assert!(
            again.ends_with("(already at 4: a repeated plan?)"),
            "{again}"
        );
    }

    #[test]
    fn bounds_are_never_crossed() {
        let t = target();
        assert!(check_resize(Resize::Up, &t, 2, 2, 5).is_ok());
        assert!(
            check_resize(Resize::Up, &t, 2, 2, 6)
                .unwrap_err()
                .to_string()
                .contains("exceed its max size 5")
        );
        assert!(check_resize(Resize::Fix, &t, 3, 3, 1).is_ok());
        assert!(
            check_resize(Resize::Fix, &t, 3, 3, 0)
                .unwrap_err()
                .to_string()
                .contains("below its min size 1")
        );
        assert!(check_resize(Resize::Up, &t, 3, 3, 2).is_err());
        assert!(check_resize(Resize::Fix, &t, 3, 3, 4).is_err());
    }
}
