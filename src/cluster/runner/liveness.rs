//! Silence is detected, not trusted. A hung API server keeps its watch connections open and
//! sends nothing, so a frozen cache looks exactly like a quiet cluster. A cheap read
//! (`/version`) every scan interval, with the read deadline, tells the two apart: while it
//! fails, the runner says since when and why, skips its passes (the cluster counts as
//! unhealthy) and, past the give-up time, connects again.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Since when the probe has failed, and the last error.
#[derive(Default)]
struct Probe {
    failing: Option<(Instant, String)>,
}

/// The probe task of one runner; it stops when this is dropped.
pub(super) struct Liveness {
    probe: Arc<Mutex<Probe>>,
    task: JoinHandle<()>,
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Liveness {
    pub(super) fn start(client: kube::Client, every: Duration, deadline: Duration) -> Self {
        let probe = Arc::new(Mutex::new(Probe::default()));
        let shared = probe.clone();
        let task = tokio::spawn(async move {
            loop {
                let started = Instant::now();
                let outcome = match tokio::time::timeout(deadline, client.apiserver_version()).await
                {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some(format!("no answer within {}s", deadline.as_secs_f64())),
                };
                record(&shared, started, outcome);
                tokio::time::sleep_until(started + every).await;
            }
        });
        Liveness { probe, task }
    }

    /// Why the cluster cannot be trusted now: its API server has not answered for longer
    /// than `max_age`.
    pub(super) fn silent(&self, now: Instant, max_age: Duration) -> Option<String> {
        let probe = lock(&self.probe);
        let (since, error) = probe.failing.as_ref()?;
        let age = now.saturating_duration_since(*since);
        (age > max_age).then(|| {
            format!(
                "the API server has not answered for {}s (GET /version: {error}); the cached view may be frozen",
                age.as_secs()
            )
        })
    }
}

/// A failure keeps the time of the first probe that failed: silence is measured from when
/// the server stopped answering, not from when a deadline noticed.
fn record(probe: &Mutex<Probe>, started: Instant, outcome: Option<String>) {
    let mut p = lock(probe);
    p.failing = match (outcome, p.failing.take()) {
        (None, _) => None,
        (Some(error), Some((since, _))) => Some((since, error)),
        (Some(error), None) => Some((started, error)),
    };
}

/// The probe's state stays consistent whatever panicked while holding it.
fn lock(probe: &Mutex<Probe>) -> MutexGuard<'_, Probe> {
    probe
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_measured_from_the_first_failure_and_ends_with_an_answer() {
        let probe = Mutex::new(Probe::default());
        let t0 = Instant::now();
        record(&probe, t0, Some("timeout".into()));
        record(&probe, t0 + Duration::from_secs(10), Some("refused".into()));
        let liveness = |p: &Mutex<Probe>, now: Instant| {
            let g = lock(p);
            g.failing
                .as_ref()
                .map(|(since, e)| (now.saturating_duration_since(*since), e.clone()))
        };
        assert_eq!(
            liveness(&probe, t0 + Duration::from_secs(12)),
            Some((Duration::from_secs(12), "refused".to_string()))
        );
        record(&probe, t0 + Duration::from_secs(20), None);
        assert_eq!(liveness(&probe, t0 + Duration::from_secs(21)), None);
    }
}
