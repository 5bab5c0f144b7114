//! A what-if asked of the runner (`/api/v1/what-if`): evaluated on the runner's own cache,
//! memory and fleet policy between two passes, so that it costs no API call and sees what
//! the next pass would.

use jiff::Timestamp;
use tokio::sync::{OwnedMutexGuard, mpsc};
use tokio::time::Instant;

use super::Runner;
use crate::cluster::pool::Urgency;
use crate::cluster::what_if::{Ask, ClusterAnswer, evaluate};
use crate::telemetry::TRACES;

/// The runner's end of its cluster's what-if inbox, if it holds it.
pub(super) type Asks = Option<OwnedMutexGuard<mpsc::Receiver<Ask>>>;

/// The next what-if; never, without the inbox.
pub(super) async fn next(asks: &mut Asks) -> Option<Ask> {
    match asks {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl Runner {
    /// Answers one what-if, on a turn of the fleet's pool like a pass; a cache too old to
    /// act on is not evaluated either.
    pub(super) async fn answer_what_if(&mut self, ask: Ask) {
        let name = self.ctx.name.as_str().to_string();
        let now = Timestamp::now();
        let answer = match self.untrusted_now(Instant::now()) {
            Some(why) => ClusterAnswer::failed(&name, format!("not evaluated: {why}")),
            None => {
                // A question asked, not a pod waiting: behind passes for pending pods.
                let _turn = self.ctx.pool.turn(Urgency::Other).await;
                let spec = self.spec.borrow().clone();
                let policy = self.ctx.fleet.policy(&name, now);
                let span = tracing::info_span!(target: TRACES, "what-if", k8s.cluster.name = %name);
                let snapshot = self.cache.snapshot();
                let state = &self.state;
                let work = || {
                    span.in_scope(|| {
                        evaluate(&name, &spec, snapshot, state, &policy, &ask.proposal, now)
                    })
                };
                crate::cluster::cpu(work)
            }
        };
        // The asker may have given up (its deadline passed): nothing to do then.
        let _ = ask.reply.send(answer);
    }
}
