//! What-ifs asked of a running hub (`/api/v1/what-if`): each cluster's runner evaluates the
//! proposal on its own cache between passes (no new connection, no API call), all at once,
//! within one deadline. One what-if runs at a time: each costs two engine passes per
//! cluster, so a second is told to come back rather than queued.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::oneshot;

use super::view::{FleetView, Member};
use crate::cluster::report::Phase;
use crate::cluster::what_if::{Ask, ClusterAnswer, FleetAnswer};
/// A proposal of settings and its reading from a ClusterAutoscaler, for those who ask the
/// fleet a what-if (the server reads the fleet only through the hub).
pub use crate::cluster::what_if::{Proposal, read_cluster_autoscaler};

/// Why a what-if was not evaluated at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WhatIfError {
    #[error("another what-if is being evaluated; ask again in a moment")]
    Busy,
    #[error("no cluster named {name:?} (clusters: {known})")]
    UnknownCluster { name: String, known: String },
}

impl FleetView {
    /// Evaluates `proposal` on the clusters named in `only` (every cluster when empty); a
    /// cluster that does not answer within `deadline` is reported as such.
    pub async fn what_if(
        &self,
        proposal: Proposal,
        only: &[String],
        deadline: Duration,
    ) -> Result<FleetAnswer, WhatIfError> {
        let _turn = self
            .what_if_turn
            .try_lock()
            .map_err(|_| WhatIfError::Busy)?;
        let members = self.members();
        let known = || {
            members
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(name) = only.iter().find(|n| !members.iter().any(|(m, _)| m == *n)) {
            return Err(WhatIfError::UnknownCluster {
                name: name.clone(),
                known: known(),
            });
        }
        let proposal = Arc::new(proposal);
        let asked = members
            .into_iter()
            .filter(|(name, _)| only.is_empty() || only.contains(name))
            .map(|(name, m)| ask(name, m, proposal.clone(), deadline));
        let clusters = futures::future::join_all(asked).await;
        Ok(FleetAnswer::new(&proposal, Timestamp::now(), clusters))
    }
}

/// One cluster's answer, or why there is none.
async fn ask(
    name: String,
    m: Member,
    proposal: Arc<Proposal>,
    deadline: Duration,
) -> ClusterAnswer {
    let (phase, message) = {
        let r = m.report.borrow();
        (r.phase, r.message.clone())
    };
    if phase != Phase::Running {
        let why = message.map_or(String::new(), |m| format!(": {m}"));
        return ClusterAnswer::failed(
            &name,
            format!("not evaluated: the cluster is {}{why}", phase.as_str()),
        );
    }
    let (reply, answer) = oneshot::channel();
    let asked = async {
        m.what_if.send(Ask { proposal, reply }).await.ok()?;
        answer.await.ok()
    };
    match tokio::time::timeout(deadline, asked).await {
        Ok(Some(a)) => a,
        Ok(None) => ClusterAnswer::failed(&name, "not evaluated: the cluster's runner stopped"),
        Err(_) => ClusterAnswer::failed(
            &name,
            format!(
                "no answer within {}s: the cluster's runner is busy (a long pass) or restarting",
                deadline.as_secs()
            ),
        ),
    }
}
