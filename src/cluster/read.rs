//! One look at a cluster, read only: what the hub's cache holds after its first sync (every
//! watched kind listed, the infrastructure templates node groups scale from zero with), for
//! commands that decide nothing on their own (`fleetscaler what-if`). Lists only: nothing is
//! written, and the watches end when the look is taken.

use std::time::Duration;

use tokio::time::Instant;

use super::cache::{Cache, Change, discovery, watch};
use crate::model::{ClusterSnapshot, Warning};

/// A cluster as read, and what could not be read.
pub struct Look {
    pub snapshot: ClusterSnapshot,
    pub warnings: Vec<Warning>,
}

/// Reads the cluster behind `client`: discovery, then every kind listed (a kind the cluster
/// refuses to list is left out with a warning, as the hub does), all within `limit`; each
/// request within `request_timeout`.
pub async fn look(
    client: &kube::Client,
    request_timeout: Duration,
    limit: Duration,
) -> Result<Look, String> {
    let started = Instant::now();
    let served = discovery::discover(client, request_timeout)
        .await
        .map_err(|e| format!("cannot discover what the cluster serves: {e}"))?;
    let mut warnings = served.warnings.clone();
    let mut cache = Cache::new(&served.kinds);
    let mut updates = watch::updates(client, &served, request_timeout, Default::default());
    while !cache.is_synced() {
        let left = limit.saturating_sub(started.elapsed());
        let update = match tokio::time::timeout(left, updates.next()).await {
            Ok(Some(u)) => u,
            Ok(None) => {
                return Err("the cluster's watches ended before every kind was listed".into());
            }
            Err(_) => {
                let waiting: Vec<String> = cache.unsynced().iter().map(|k| k.describe()).collect();
                let errors = cache.sync_errors().join("; ");
                return Err(format!(
                    "not every kind listed within {}s (waiting for {}){}",
                    limit.as_secs(),
                    waiting.join(", "),
                    if errors.is_empty() {
                        String::new()
                    } else {
                        format!(": {errors}")
                    }
                ));
            }
        };
        let refused = match &update.change {
            Change::Error(e) if e.forbidden => Some((update.kind, e.message.clone())),
            _ => None,
        };
        cache.apply(update, Instant::now());
        if let Some((kind, message)) = refused {
            warnings.push(kind.not_allowed(&message));
            cache.give_up_on(kind, &message);
        }
    }
    drop(updates);
    let scalables = cache.snapshot().scalables.clone();
    let (templates, problems) =
        super::runner::infra::read_once(client.clone(), request_timeout, scalables.iter()).await;
    cache.set_infrastructure_templates(templates);
    let unread = problems.into_iter().chain(cache.problems());
    warnings.extend(unread.map(|p| super::cache::unreadable(&p)));
    Ok(Look {
        snapshot: cache.snapshot().clone(),
        warnings,
    })
}
