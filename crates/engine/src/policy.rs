//! Fleet policy: what the hub decides for every cluster and hands each cluster's engine as an
//! input of its pass, so that a plan made with it is replayable offline (`fleetscaler plan
//! --fleet-policy FILE`) exactly as the hub made it.

use fleetscaler_model::ClusterName;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::nodegroups::NodeGroupId;
use super::template::TemplateNode;

/// The fleet's decisions one cluster's pass takes into account.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetPolicy {
    /// Why scale-down is held back on every cluster (a degraded fleet), while it is: the
    /// pass still finds the unneeded nodes and keeps their timers, and removes none of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_hold: Option<String>,
    /// Scale-ups that failed in other clusters for want of capacity: this cluster's groups of
    /// the same instance type in the same zone (or region), on the same platform, are backed
    /// off until they end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_failures: Vec<SharedFailure>,
}

/// How far a capacity failure reaches: the same instance type in the same zone, or anywhere
/// in the same region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureScope {
    #[default]
    Zone,
    Region,
}

/// What new machines of a group are, as far as capacity goes: read off its template node's
/// well-known labels, and the platform its machines run on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityKey {
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// `aws`, `azure`, `gcp`, `openstack`, ... (`model::platform`): none when the group's
    /// nodes' providerIDs and its provider spec or infrastructure template do not say, and in
    /// policy files written before it was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";

impl CapacityKey {
    /// The key of a group's template; none without an instance type.
    pub fn of(template: &TemplateNode) -> Option<Self> {
        let get = |k: &str| template.labels.get(k).map(str::to_string);
        Some(CapacityKey {
            instance_type: get(INSTANCE_TYPE_LABEL)?,
            zone: get(ZONE_LABEL),
            region: get(REGION_LABEL).or_else(|| get(ZONE_LABEL).map(|z| region_of(&z))),
            platform: template.platform.map(str::to_string),
        })
    }

    /// The same capacity within `scope`: the same platform, and a zone (or region) both name.
    fn covers(&self, other: &CapacityKey, scope: FailureScope) -> bool {
        let place = |k: &CapacityKey| match scope {
            FailureScope::Zone => k.zone.clone(),
            FailureScope::Region => k.region.clone(),
        };
        self.same_platform(other)
            && self.instance_type == other.instance_type
            && place(self).is_some()
            && place(self) == place(other)
    }

    /// Two known platforms must be the same one: an AWS failure says nothing of an OpenStack
    /// cloud whose flavor and zone happen to have the same names. When either side does not
    /// know its platform (a hand-written fleet policy, a policy file from before platforms, a
    /// dump without providerIDs or provider specs), instance type and place decide alone, as
    /// they did before: such names rarely match by chance, and a needless backoff of a few
    /// minutes costs less than each cluster finding the same empty zone for itself.
    fn same_platform(&self, other: &CapacityKey) -> bool {
        match (&self.platform, &other.platform) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }

    pub fn describe(&self) -> String {
        let place = self.zone.as_ref().or(self.region.as_ref());
        match place {
            Some(p) => format!("{} in {p}", self.instance_type),
            None => self.instance_type.clone(),
        }
    }
}

/// AWS and GCP zones are their region and a letter (`us-east-1a`, `europe-west1-b`).
fn region_of(zone: &str) -> String {
    let trimmed = zone.trim_end_matches(|c: char| c.is_ascii_lowercase());
    trimmed.trim_end_matches('-').to_string()
}

/// A scale-up that failed in one cluster for want of capacity, as the hub shares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedFailure {
    /// The cluster it happened in (filled in by the hub).
    #[serde(default)]
    pub cluster: ClusterName,
    pub node_group: NodeGroupId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    pub key: CapacityKey,
    #[serde(default)]
    pub scope: FailureScope,
    /// What the failure said.
    pub reason: String,
    pub at: Timestamp,
    /// The end of the backoff it started there: other clusters back off as long.
    pub until: Timestamp,
    /// The trace of the pass that found it, when traces are on (filled in by the hub): the
    /// passes it backs off groups in link to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceRef>,
}

/// A span of another trace, as OpenTelemetry names it: ids in lowercase hex (32 and 16
/// digits), as trace viewers show them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceRef {
    pub trace_id: String,
    pub span_id: String,
}

impl SharedFailure {
    /// Whether it backs off a group with this key at `now`.
    pub fn applies(&self, key: &CapacityKey, now: Timestamp) -> bool {
        self.until > now && self.key.covers(key, self.scope)
    }

    /// The reason a group of another cluster is backed off.
    pub fn explain(&self) -> String {
        format!("{}; backed off here too until {}", self.what(), self.until)
    }

    /// What failed, where and when: `m5.2xlarge in us-east-1a failed in cluster east at
    /// <time> (machine <ns/name>): <the error>`.
    pub fn what(&self) -> String {
        let machine = self
            .machine
            .as_ref()
            .map_or(String::new(), |m| format!(" (machine {m})"));
        format!(
            "{} failed in cluster {} at {}{machine}: {}",
            self.key.describe(),
            self.cluster,
            self.at,
            self.reason,
        )
    }
}

/// Words of cloud providers' errors that mean "no capacity for this instance type here",
/// not "this cluster is broken" (AWS, Azure, GCP, OpenStack), lower case.
const CAPACITY_ERRORS: &[&str] = &[
    "insufficientinstancecapacity",
    "instancelimitexceeded",
    "insufficient capacity",
    "insufficientcapacity",
    "capacity",
    "quota",
    "zonal_resource_pool_exhausted",
    "resource_pool_exhausted",
    "skunotavailable",
    "allocationfailed",
    "overconstrainedallocationrequest",
    "novalidhost",
];

/// A machine failure about the capacity behind the group.
pub fn is_capacity_error(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    CAPACITY_ERRORS.iter().any(|w| lower.contains(w))
}

/// A policy that cannot be read, named by the path of the field that is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", .0.path(), .0.inner())]
pub struct PolicyError(#[source] serde_path_to_error::Error<serde_json::Error>);

impl FleetPolicy {
    /// A cluster on its own: the fleet holds nothing back.
    pub fn none() -> Self {
        FleetPolicy::default()
    }

    /// Reads a policy as `fleetscaler plan --fleet-policy` takes it (JSON), naming the field
    /// that is wrong.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(PolicyError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: &str, zone: &str) -> CapacityKey {
        CapacityKey {
            instance_type: t.into(),
            zone: Some(zone.into()),
            region: Some(region_of(zone)),
            platform: None,
        }
    }

    fn on(platform: &str, key: CapacityKey) -> CapacityKey {
        CapacityKey {
            platform: Some(platform.into()),
            ..key
        }
    }

    fn failure(key: CapacityKey) -> SharedFailure {
        let at: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        SharedFailure {
            cluster: "a".into(),
            node_group: NodeGroupId::parse("MachineSet/ns/g").unwrap(),
            machine: Some("ns/m".into()),
            key,
            scope: FailureScope::Zone,
            reason: "InsufficientInstanceCapacity".into(),
            at,
            until: at + jiff::SignedDuration::from_mins(5),
            trace: None,
        }
    }

    #[test]
    fn a_failure_covers_the_same_type_in_its_zone_or_region() {
        let f = failure(key("m6i.2xlarge", "us-east-1a"));
        let soon = f.at + jiff::SignedDuration::from_mins(1);
        assert!(f.applies(&key("m6i.2xlarge", "us-east-1a"), soon));
        assert!(!f.applies(&key("m6i.2xlarge", "us-east-1b"), soon));
        assert!(!f.applies(&key("m6i.4xlarge", "us-east-1a"), soon));
        assert!(!f.applies(&key("m6i.2xlarge", "us-east-1a"), f.until));
        let region = SharedFailure {
            scope: FailureScope::Region,
            ..f.clone()
        };
        assert!(region.applies(&key("m6i.2xlarge", "us-east-1c"), soon));
        assert!(!region.applies(&key("m6i.2xlarge", "eu-west-1a"), soon));
        assert!(
            f.explain()
                .contains("m6i.2xlarge in us-east-1a failed in cluster a")
        );
    }

    #[test]
    fn a_failure_covers_its_own_platform_only_when_both_know_theirs() {
        let aws = failure(on("aws", key("m5.2xlarge", "us-east-1a")));
        let soon = aws.at + jiff::SignedDuration::from_mins(1);
        assert!(aws.applies(&on("aws", key("m5.2xlarge", "us-east-1a")), soon));
        // An on-prem cloud whose flavor and zone have the same names is other capacity.
        let openstack = on("openstack", key("m5.2xlarge", "us-east-1a"));
        assert!(!aws.applies(&openstack, soon));
        let region = SharedFailure {
            scope: FailureScope::Region,
            ..aws.clone()
        };
        assert!(!region.applies(&on("gcp", key("m5.2xlarge", "us-east-1c")), soon));
        assert!(region.applies(&on("aws", key("m5.2xlarge", "us-east-1c")), soon));
        // Either side without a platform: instance type and place decide, as before.
        assert!(aws.applies(&key("m5.2xlarge", "us-east-1a"), soon));
        let unknown = failure(key("m5.2xlarge", "us-east-1a"));
        assert!(unknown.applies(&openstack, soon));
        assert!(!unknown.applies(&on("openstack", key("m5.2xlarge", "us-east-1b")), soon));
    }

    #[test]
    fn capacity_errors_are_told_from_others() {
        assert!(is_capacity_error(
            "InsufficientCapacity: We currently do not have sufficient m6i.2xlarge capacity"
        ));
        assert!(is_capacity_error(
            "error launching instance: InstanceLimitExceeded"
        ));
        assert!(!is_capacity_error(
            "InvalidAMIID.NotFound: the image does not exist"
        ));
        assert_eq!(region_of("us-east-1a"), "us-east-1");
        assert_eq!(region_of("europe-west1-b"), "europe-west1");
    }

    #[test]
    fn a_shared_failure_is_read_with_or_without_its_trace() {
        let older = r#"{"sharedFailures": [{"cluster": "east", "nodeGroup": "MachineSet/ns/g",
            "key": {"instanceType": "m5.2xlarge", "zone": "us-east-1a"},
            "reason": "InsufficientInstanceCapacity",
            "at": "2026-11-22T09:58:00Z", "until": "2026-11-22T10:03:00Z"}]}"#;
        let p = FleetPolicy::from_json(older).unwrap();
        assert_eq!(p.shared_failures[0].trace, None);
        assert_eq!(p.shared_failures[0].key.platform, None);
        let json = serde_json::to_value(&p).unwrap();
        assert!(json["sharedFailures"][0].get("trace").is_none(), "{json}");
        assert!(json["sharedFailures"][0]["key"].get("platform").is_none());

        let on_aws = older.replace(r#""zone""#, r#""platform": "aws", "zone""#);
        let p = FleetPolicy::from_json(&on_aws).unwrap();
        assert_eq!(p.shared_failures[0].key.platform.as_deref(), Some("aws"));
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["sharedFailures"][0]["key"]["platform"], "aws");

        let traced = older.replace(
            r#""reason""#,
            r#""trace": {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}, "reason""#,
        );
        let p = FleetPolicy::from_json(&traced).unwrap();
        let trace = p.shared_failures[0].trace.clone().unwrap();
        assert_eq!(trace.trace_id, "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(trace.span_id, "b7ad6b7169203331");
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json["sharedFailures"][0]["trace"],
            serde_json::json!({"traceId": trace.trace_id, "spanId": trace.span_id})
        );
        let e = FleetPolicy::from_json(&traced.replace("spanId", "span"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("sharedFailures[0].trace"), "{e}");
    }

    #[test]
    fn a_policy_is_read_from_json_and_unknown_fields_are_named() {
        let p = FleetPolicy::from_json(r#"{"scaleDownHold": "fleet degraded"}"#).unwrap();
        assert_eq!(p.scale_down_hold.as_deref(), Some("fleet degraded"));
        assert_eq!(FleetPolicy::from_json("{}").unwrap(), FleetPolicy::none());
        let e = FleetPolicy::from_json(r#"{"scaleDownHeld": "x"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("scaleDownHeld"), "{e}");
        let e = FleetPolicy::from_json(r#"{"scaleDownHold": 3}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("scaleDownHold"), "{e}");
    }
}
