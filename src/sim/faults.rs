//! Fault injection for one simulated cluster, switchable at run time: added latency, a
//! share of requests failing with 500 or 429, watches cut, and a full outage (connections
//! refused or left hanging). Tests hold the switch directly; the CLI's admin endpoint
//! sets it over HTTP.

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
    /// 500 (InternalError) or 429 (TooManyRequests); anything else is treated as 500.
    pub error_code: u16,
    /// When not empty, only requests whose path contains one of these fail (`/scale`: the
    /// scale subresource alone).
    pub error_paths: Vec<String>,
    /// Open watches are cut, and new ones end right after they start.
    pub drop_watches: bool,
    pub outage: Option<Outage>,
}

impl Faults {
    /// Checks the values an operator may get wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(format!(
                "errorRate must be within 0..=1, got {}",
                self.error_rate
            ));
        }
        if self.error_code != 0 && self.error_code != 500 && self.error_code != 429 {
            return Err(format!(
                "errorCode must be 500 or 429, got {}",
                self.error_code
            ));
        }
        Ok(())
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

    /// A receiver woken on every change (watches and hung connections wait on it).
    pub fn subscribe(&self) -> watch::Receiver<Faults> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            Faults {
                error_rate: 0.2,
                error_code: 429,
                ..Default::default()
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn json_form_is_camel_case_and_strict() {
        let f: Faults = serde_json::from_str(r#"{"latencyMs": 5, "outage": "hang"}"#).unwrap();
        assert_eq!(f.outage, Some(Outage::Hang));
        assert!(serde_json::from_str::<Faults>(r#"{"latency": 5}"#).is_err());
    }
}
