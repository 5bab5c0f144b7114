//! Turns a plan into API calls that are safe to repeat and to interrupt.
//!
//! Placeholder with the agreed interface, so the runner builds while the executor is being
//! written; every action is reported as skipped.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::gate::WriteGate;
use super::outcome::{Action, Entry};
use crate::engine::nodegroups::NodeGroupId;
use crate::engine::plan::Plan;
use crate::engine::settings::Settings;
use crate::model::ClusterSnapshot;

pub struct ExecutorConfig {
    pub request_timeout: Duration,
    pub dry_run: bool,
    pub gate: WriteGate,
}

pub struct Executor {
    _client: kube::Client,
    _config: ExecutorConfig,
}

pub struct Execution {
    pub entries: Vec<Entry>,
    pub removals: Vec<NodeRemoval>,
}

pub struct NodeRemoval {
    node: Arc<str>,
    group: NodeGroupId,
}

impl Executor {
    pub fn new(client: kube::Client, config: ExecutorConfig) -> Self {
        Executor {
            _client: client,
            _config: config,
        }
    }

    pub async fn recover(&self) -> Vec<Entry> {
        Vec::new()
    }

    pub async fn execute(
        &self,
        plan: &Plan,
        _snapshot: &ClusterSnapshot,
        _settings: &Settings,
        _in_flight: &HashSet<Arc<str>>,
    ) -> Execution {
        let entries = plan
            .scale_up
            .iter()
            .map(|s| {
                let action = Action::ScaleUp {
                    group: s.node_group.clone(),
                    from: s.from,
                    to: s.to,
                };
                Entry::skipped(action, "not built yet")
            })
            .collect();
        Execution {
            entries,
            removals: Vec::new(),
        }
    }
}

impl NodeRemoval {
    pub fn node(&self) -> &Arc<str> {
        &self.node
    }

    pub fn group(&self) -> &NodeGroupId {
        &self.group
    }

    pub async fn run(self) -> Entry {
        let action = Action::RemoveNode {
            group: self.group,
            node: self.node,
            empty: true,
            evicted: Vec::new(),
        };
        Entry::skipped(action, "not built yet")
    }
}
