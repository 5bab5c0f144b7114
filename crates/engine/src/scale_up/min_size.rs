//! `enforce_node_group_min_size`: after the pending pods are served, a group whose target is
//! still below its min is raised to it (upstream's `ScaleUpToNodeGroupMinSize`), within the
//! same gates as any scale-up: backoff, max size and the cluster's limits.

use super::Pass;
use crate::limits::NodeUsage;
use crate::plan::ScaleUpAction;
use fleetscaler_model::{Warning, WarningCode};

impl Pass<'_, '_> {
    pub(super) fn enforce_min_sizes(&mut self) {
        if !self.input.settings.enforce_node_group_min_size {
            return;
        }
        for gi in 0..self.targets.len() {
            let min = self.input.groups.groups[gi].min;
            if self.targets[gi] < min {
                self.raise_to_min(gi, min);
            }
        }
    }

    fn raise_to_min(&mut self, gi: usize, min: u64) {
        let id = self.input.groups.groups[gi].id.clone();
        let target = self.targets[gi];
        if let Some(block) = self.group_block(gi) {
            self.warnings.push(Warning::about(
                WarningCode::MinSizeBlocked,
                &id,
                format!(
                    "its target {target} is below its min size {min}, but it cannot grow now: {} ({})",
                    block.message, block.code
                ),
            ));
            return;
        }
        let Ok(template) = &self.input.templates[gi] else {
            return;
        };
        let usage = NodeUsage::of_template(template);
        let (k, binding) = self.limits.room(&usage, min - target);
        let capped = binding.map_or(String::new(), |u| {
            format!("; capped by {} ({})", u.message, u.code)
        });
        let reason = format!(
            "{k} new node(s) to reach the group's min size {min} from a target of {target} (enforce_node_group_min_size){capped}"
        );
        match self.actions.iter_mut().find(|a| a.node_group == id) {
            Some(action) => {
                action.to += k;
                action.reason = format!("{}; then {reason}", action.reason);
            }
            None => self.actions.push(ScaleUpAction {
                node_group: id,
                from: target,
                to: target + k,
                pods: Vec::new(),
                reason,
            }),
        }
        self.targets[gi] += k;
        self.added += k;
        self.limits.add(&usage, k);
    }
}
