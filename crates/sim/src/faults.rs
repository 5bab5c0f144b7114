//! Fault injection for one simulated cluster, switchable at run time: added latency, a
//! share of requests failing with 500 or 429 (or 403, as RBAC refusing a kind), watches
//! cut, a full outage (connections refused or left hanging), and the cloud out of capacity
//! for an instance type in a zone (`capacity`: machines of that type and zone that finish
//! provisioning while the fault is in force go Failed with the cloud's error), and
//! resources RBAC refuses (`forbidden`: every request for them gets a 403, as a client
//! whose role lacks them). Tests hold the switch directly; the CLI's admin endpoint sets it
//! over HTTP, e.g.
//!
//! ```json
//! {"capacity": [{"instanceType": "m6i.2xlarge", "zone": "us-east-1a"}]}
//! ```

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// How an outage shows to clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outage {
    /// New connections are closed at once, open ones fail their next request.
    Refuse,
    /// Connections are accepted and never answered until the outage ends.
    Hang,
}

/// The faults in force for one cluster. The default is a healthy cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Faults {
    /// Added to every request before it is handled.
    pub latency_ms: u64,
    /// Share of requests (0..=1) answered with `error_code` instead of being handled.
    pub error_rate: f64,
    /// 500 (InternalError), 429 (TooManyRequests) or 403 (Forbidden: RBAC denying the
    /// targeted paths, with `error_paths` and `error_rate` 1); anything else is treated as 500.
    pub error_code: u16,
    /// When not empty, only requests whose path and query contain one of these fail
    /// (`/scale`: the scale subresource alone; `watch=true`: watches alone).
    pub error_paths: Vec<String>,
    /// Open watches are cut, and new ones end right after they start.
    pub drop_watches: bool,
    pub outage: Option<Outage>,
    /// The cloud has no capacity for these instance types (in these zones): their machines
    /// fail at the end of provisioning. The API server itself is unaffected.
    pub capacity: Vec<CapacityFault>,
    /// Resources the cluster's clients may not touch, as RBAC refusing them: every request
    /// for one, whatever its verb, gets `403 Forbidden` in the API server's words. Named as
    /// kubectl names them: a core resource by its plural (`persistentvolumeclaims`), any
    /// other as `<plural>.<group>` (`csinodes.storage.k8s.io`).
    pub forbidden: Vec<String>,
}

/// At most this many capacity faults at once: each machine finishing provisioning is
/// checked against all of them.
pub const MAX_CAPACITY_FAULTS: usize = 32;
/// At most this many forbidden resources at once.
pub const MAX_FORBIDDEN: usize = 32;
const MAX_NAME_CHARS: usize = 128;
const MAX_REASON_CHARS: usize = 128;
const MAX_MESSAGE_CHARS: usize = 1024;

/// Why faults are refused; a capacity fault's problem names its entry and field.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InvalidFaults {
    #[error("errorRate must be within 0..=1, got {0}")]
    ErrorRate(f64),
    #[error("errorCode must be 500, 429 or 403, got {0}")]
    ErrorCode(u16),
    #[error("capacity holds at most {MAX_CAPACITY_FAULTS} faults, got {0}")]
    TooMany(usize),
    #[error("forbidden holds at most {MAX_FORBIDDEN} resources, got {0}")]
    TooManyForbidden(usize),
    #[error("forbidden[{index}] {source}")]
    Forbidden {
        index: usize,
        #[source]
        source: BadValue,
    },
    #[error("capacity[{index}].{field} {source}")]
    Capacity {
        index: usize,
        field: &'static str,
        #[source]
        source: BadValue,
    },
}

/// What is wrong with one value of a capacity fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadValue {
    #[error("must not be empty")]
    Empty,
    #[error("is longer than {max} characters ({chars})")]
    TooLong { max: usize, chars: usize },
    #[error("has {0:?}: a cloud error code is letters, digits, '_', '.' and '-'")]
    NotACode(char),
}

/// Why the admin endpoint's body is not faults.
#[derive(Debug, thiserror::Error)]
pub enum FaultsError {
    #[error("invalid faults: {}", json_problem(.0))]
    Json(#[source] serde_path_to_error::Error<serde_json::Error>),
    #[error(transparent)]
    Invalid(#[from] InvalidFaults),
}

/// The parser's problem, with the field's path when there is one: `.` is the whole body,
/// `?` a body that is not JSON at all.
fn json_problem(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    match e.path().to_string().as_str() {
        "." | "?" => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    }
}

/// The cloud cannot launch `instance_type` in `zone`: a machine of that profile finishing
/// provisioning goes Failed with `error launching instance: <reason>: <message>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityFault {
    pub instance_type: String,
    /// Absent: every zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The cloud's error code, as in `InsufficientInstanceCapacity` (the default) or
    /// `InstanceLimitExceeded`.
    #[serde(default = "default_reason")]
    pub reason: String,
    /// The cloud's words after the code; absent: AWS's "We currently do not have
    /// sufficient <type> capacity in the Availability Zone you requested (<zone>)."
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// AWS's error code for an instance type out of capacity in a zone.
pub const DEFAULT_CAPACITY_REASON: &str = "InsufficientInstanceCapacity";

fn default_reason() -> String {
    DEFAULT_CAPACITY_REASON.to_string()
}

impl CapacityFault {
    /// Whether a machine of `instance_type` in `zone` is hit.
    pub fn matches(&self, instance_type: &str, zone: &str) -> bool {
        self.instance_type == instance_type && self.zone.as_deref().is_none_or(|z| z == zone)
    }

    /// The failure message of a machine of `instance_type` in `zone`, as the cloud's API
    /// would put it: the code, then the message.
    pub fn failure_message(&self, instance_type: &str, zone: &str) -> String {
        launch_error(&self.reason, self.message.as_deref(), instance_type, zone)
    }

    /// Checks one entry; errors name `capacity[<index>].<field>`.
    fn validate(&self, index: usize) -> Result<(), InvalidFaults> {
        let named = |field: &'static str| {
            move |source| InvalidFaults::Capacity {
                index,
                field,
                source,
            }
        };
        check_name(&self.instance_type).map_err(named("instanceType"))?;
        if let Some(zone) = &self.zone {
            check_name(zone).map_err(named("zone"))?;
        }
        check_reason(&self.reason).map_err(named("reason"))?;
        if let Some(message) = &self.message {
            check_length(message, MAX_MESSAGE_CHARS).map_err(named("message"))?;
        }
        Ok(())
    }
}

/// An instance type or zone: not blank, and short.
fn check_name(name: &str) -> Result<(), BadValue> {
    if name.trim().is_empty() {
        return Err(BadValue::Empty);
    }
    check_length(name, MAX_NAME_CHARS)
}

fn check_length(text: &str, max: usize) -> Result<(), BadValue> {
    match text.chars().count() {
        chars if chars > max => Err(BadValue::TooLong { max, chars }),
        _ => Ok(()),
    }
}

/// A cloud error code is one short token, as providers' codes are: it goes into a
/// machine's failure message, which the hub reads to tell capacity errors from others.
fn check_reason(reason: &str) -> Result<(), BadValue> {
    if reason.is_empty() {
        return Err(BadValue::Empty);
    }
    check_length(reason, MAX_REASON_CHARS)?;
    match reason
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        Some(c) => Err(BadValue::NotACode(c)),
        None => Ok(()),
    }
}

/// `error launching instance: <reason>: <message>`, with AWS's words for a zone out of
/// capacity when no message is given.
pub fn launch_error(
    reason: &str,
    message: Option<&str>,
    instance_type: &str,
    zone: &str,
) -> String {
    match message {
        Some(m) => format!("error launching instance: {reason}: {m}"),
        None => format!(
            "error launching instance: {reason}: We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested ({zone})."
        ),
    }
}

impl Faults {
    /// Checks the values an operator may get wrong.
    pub fn validate(&self) -> Result<(), InvalidFaults> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(InvalidFaults::ErrorRate(self.error_rate));
        }
        if ![0, 500, 429, 403].contains(&self.error_code) {
            return Err(InvalidFaults::ErrorCode(self.error_code));
        }
        if self.capacity.len() > MAX_CAPACITY_FAULTS {
            return Err(InvalidFaults::TooMany(self.capacity.len()));
        }
        for (index, fault) in self.capacity.iter().enumerate() {
            fault.validate(index)?;
        }
        if self.forbidden.len() > MAX_FORBIDDEN {
            return Err(InvalidFaults::TooManyForbidden(self.forbidden.len()));
        }
        for (index, resource) in self.forbidden.iter().enumerate() {
            check_name(resource).map_err(|source| InvalidFaults::Forbidden { index, source })?;
        }
        Ok(())
    }

    /// Whether these faults refuse requests for `resource` of API group `group` (`""`:
    /// core), as [`Faults::forbidden`] names them.
    pub fn forbids(&self, group: &str, resource: &str) -> bool {
        self.forbidden.iter().any(|f| match f.split_once('.') {
            Some((plural, g)) => plural == resource && g == group,
            None => group.is_empty() && f == resource,
        })
    }

    /// Reads faults as the admin endpoint takes them (JSON), checked; errors name the
    /// field, as `capacity[0]: missing field `instanceType``.
    pub fn from_json(body: &[u8]) -> Result<Faults, FaultsError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let faults: Faults =
            serde_path_to_error::deserialize(&mut de).map_err(FaultsError::Json)?;
        faults.validate()?;
        Ok(faults)
    }
}

/// The run-time switch of one cluster's faults.
#[derive(Debug)]
pub struct FaultSwitch {
    tx: watch::Sender<Faults>,
}

impl Default for FaultSwitch {
    fn default() -> Self {
        FaultSwitch {
            tx: watch::Sender::new(Faults::default()),
        }
    }
}

impl FaultSwitch {
    /// The faults now in force.
    pub fn get(&self) -> Faults {
        self.tx.borrow().clone()
    }

    /// Puts `faults` in force at once.
    pub fn set(&self, faults: Faults) {
        self.tx.send_replace(faults);
    }

    /// Back to a healthy cluster.
    pub fn clear(&self) {
        self.set(Faults::default());
    }

    /// The capacity faults now in force (cloning nothing when there are none).
    pub fn capacity(&self) -> Vec<CapacityFault> {
        self.tx.borrow().capacity.clone()
    }

    /// A receiver woken on every change (watches and hung connections wait on it).
    pub fn subscribe(&self) -> watch::Receiver<Faults> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_resources_are_named_as_kubectl_names_them_and_bounded() {
        let f = Faults {
            forbidden: vec![
                "persistentvolumeclaims".into(),
                "csinodes.storage.k8s.io".into(),
            ],
            ..Default::default()
        };
        assert!(f.validate().is_ok());
        assert!(f.forbids("", "persistentvolumeclaims"));
        assert!(f.forbids("storage.k8s.io", "csinodes"));
        assert!(!f.forbids("storage.k8s.io", "persistentvolumeclaims"));
        assert!(!f.forbids("", "csinodes"));
        assert!(!f.forbids("", "persistentvolumes"));
        let blank = Faults {
            forbidden: vec!["pods".into(), " ".into()],
            ..Default::default()
        };
        assert_eq!(
            blank.validate().unwrap_err().to_string(),
            "forbidden[1] must not be empty"
        );
        let many = Faults {
            forbidden: vec!["pods".into(); MAX_FORBIDDEN + 1],
            ..Default::default()
        };
        assert_eq!(
            many.validate().unwrap_err(),
            InvalidFaults::TooManyForbidden(MAX_FORBIDDEN + 1)
        );
        let json = br#"{"forbidden": ["storageclasses.storage.k8s.io"]}"#;
        let parsed = Faults::from_json(json).unwrap();
        assert!(parsed.forbids("storage.k8s.io", "storageclasses"));
    }

    #[test]
    fn validation_rejects_out_of_range_values() {
        assert!(
            Faults {
                error_rate: 1.5,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            Faults {
                error_code: 404,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        for code in [429, 403] {
            assert!(
                Faults {
                    error_rate: 0.2,
                    error_code: code,
                    ..Default::default()
                }
                .validate()
                .is_ok()
            );
        }
    }

    fn fault(instance_type: &str, zone: Option<&str>) -> CapacityFault {
        CapacityFault {
            instance_type: instance_type.into(),
            zone: zone.map(str::to_string),
            reason: DEFAULT_CAPACITY_REASON.into(),
            message: None,
        }
    }

    fn with_capacity(capacity: Vec<CapacityFault>) -> Faults {
        Faults {
            capacity,
            ..Faults::default()
        }
    }

    #[test]
    fn capacity_faults_are_validated_entry_by_entry() {
        let ok = fault("m6i.2xlarge", Some("us-east-1a"));
        assert_eq!(with_capacity(vec![ok.clone()]).validate(), Ok(()));
        let bad = |f: CapacityFault| {
            with_capacity(vec![ok.clone(), f])
                .validate()
                .unwrap_err()
                .to_string()
        };
        let e = bad(fault(" ", None));
        assert!(
            e.starts_with("capacity[1].instanceType must not be empty"),
            "{e}"
        );
        let e = bad(fault("m6i.2xlarge", Some("")));
        assert!(e.starts_with("capacity[1].zone must not be empty"), "{e}");
        let e = bad(fault(&"m".repeat(129), None));
        assert!(e.starts_with("capacity[1].instanceType is longer"), "{e}");
        for reason in ["", "Insufficient Capacity", "no:colon", &"R".repeat(129)] {
            let e = bad(CapacityFault {
                reason: reason.into(),
                ..ok.clone()
            });
            assert!(e.starts_with("capacity[1].reason "), "{reason:?}: {e}");
        }
        let e = bad(CapacityFault {
            message: Some("x".repeat(1025)),
            ..ok.clone()
        });
        assert!(
            e.starts_with("capacity[1].message is longer than 1024"),
            "{e}"
        );
        let fine = CapacityFault {
            reason: "Server.InsufficientInstanceCapacity_2-b".into(),
            message: Some("x".repeat(1024)),
            ..ok.clone()
        };
        assert_eq!(with_capacity(vec![fine]).validate(), Ok(()));
        let e = with_capacity(vec![ok; 33])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 32 faults, got 33"), "{e}");
    }

    #[test]
    fn a_capacity_fault_matches_its_type_in_its_zone_or_in_all() {
        let zonal = fault("m6i.2xlarge", Some("us-east-1a"));
        assert!(zonal.matches("m6i.2xlarge", "us-east-1a"));
        assert!(!zonal.matches("m6i.2xlarge", "us-east-1b"));
        assert!(!zonal.matches("m6i.4xlarge", "us-east-1a"));
        let everywhere = fault("m6i.2xlarge", None);
        assert!(everywhere.matches("m6i.2xlarge", "us-east-1c"));
        assert!(!everywhere.matches("m6i.4xlarge", "us-east-1c"));
    }

    #[test]
    fn the_failure_message_says_the_reason_as_the_cloud_would() {
        assert_eq!(
            fault("m6i.2xlarge", None).failure_message("m6i.2xlarge", "us-east-1a"),
            "error launching instance: InsufficientInstanceCapacity: We currently do not have \
             sufficient m6i.2xlarge capacity in the Availability Zone you requested (us-east-1a)."
        );
        let quota = CapacityFault {
            reason: "InstanceLimitExceeded".into(),
            message: Some("You have requested more instances than your limit allows.".into()),
            ..fault("m6i.2xlarge", None)
        };
        assert_eq!(
            quota.failure_message("m6i.2xlarge", "us-east-1a"),
            "error launching instance: InstanceLimitExceeded: You have requested more instances \
             than your limit allows."
        );
    }

    #[test]
    fn capacity_json_has_defaults_and_errors_name_the_field() {
        let f = Faults::from_json(br#"{"capacity": [{"instanceType": "m6i.2xlarge"}]}"#).unwrap();
        assert_eq!(f.capacity, vec![fault("m6i.2xlarge", None)]);
        let e = Faults::from_json(br#"{"capacity": [{"zone": "us-east-1a"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("capacity[0]") && e.contains("instanceType"),
            "{e}"
        );
        let e = Faults::from_json(br#"{"capacity": [{"instanceType": "a", "zones": []}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("capacity[0]") && e.contains("zones"), "{e}");
        let e = Faults::from_json(br#"{"capacity": [{"instanceType": "a", "reason": 3}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("capacity[0].reason"), "{e}");
        let e = Faults::from_json(br#"{"capacity": [{"instanceType": ""}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("capacity[0].instanceType"), "{e}");
        let e = Faults::from_json(b"{").unwrap_err().to_string();
        assert!(e.starts_with("invalid faults: EOF"), "{e}");
        // The form a GET answers with reads back as it was.
        let round = Faults::from_json(&serde_json::to_vec(&f).unwrap()).unwrap();
        assert_eq!(round, f);
    }

    #[test]
    fn json_form_is_camel_case_and_strict() {
        let f: Faults = serde_json::from_str(r#"{"latencyMs": 5, "outage": "hang"}"#).unwrap();
        assert_eq!(f.outage, Some(Outage::Hang));
        assert!(serde_json::from_str::<Faults>(r#"{"latency": 5}"#).is_err());
    }
}
