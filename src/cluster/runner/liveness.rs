//! Silence is detected, not trusted. A hung API server keeps its watch connections open and
//! sends nothing, so a frozen cache looks exactly like a quiet cluster. A cheap read
//! (`/version`) every scan interval, with the read deadline, tells the two apart: while it
//! fails, the runner says since when and why, skips its passes (the cluster counts as
//! unhealthy) and, past the give-up time, connects again.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

/// When the server last answered, and the last failure since.
struct Probe {
    last_answer: Instant,
    error: Option<String>,
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
        let probe = Arc::new(Mutex::new(Probe {
            last_answer: Instant::now(),
            error: None,
        }));
        let shared = probe.clone();
        let task = tokio::spawn(async move {
            loop {
                let started = Instant::now();
                let outcome = match tokio::time::timeout(deadline, client.apiserver_version()).await
                {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => answered(e),
                    Err(_) => Err(format!("no answer within {}s", deadline.as_secs_f64())),
                };
                record(&shared, Instant::now(), outcome);
                tokio::time::sleep_until(started + every).await;
            }
        });
        Liveness { probe, task }
    }

    /// Why the cluster cannot be trusted now: its API server has not answered for longer
    /// than `max_age`. Measured from its last answer, whether or not a probe is still
    /// waiting: a hung server is flagged on time, however long the read deadline.
    pub(super) fn silent(&self, now: Instant, max_age: Duration) -> Option<String> {
        let probe = lock(&self.probe);
        let age = now.saturating_duration_since(probe.last_answer);
        (age > max_age).then(|| {
            let error = probe.error.as_deref().unwrap_or("still waiting for an answer");
            format!(
                "the API server has not answered for {}s (GET /version: {error}); the cached view may be frozen",
                age.as_secs()
            )
        })
    }
}

/// Any HTTP answer, an error status included (a 429 from a server shedding load, a 403, a
/// 500), shows the server alive: only a call that got no answer at all is silence.
fn answered(e: kube::Error) -> Result<(), String> {
    match e {
        kube::Error::Api(_) => Ok(()),
        other => Err(other.to_string()),
    }
}

fn record(probe: &Mutex<Probe>, at: Instant, outcome: Result<(), String>) {
    let mut p = lock(probe);
    match outcome {
        Ok(()) => {
            p.last_answer = at;
            p.error = None;
        }
        Err(e) => p.error = Some(e),
    }
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

    fn liveness(probe: Probe) -> Liveness {
        Liveness {
            probe: Arc::new(Mutex::new(probe)),
            task: tokio::spawn(async {}),
        }
    }

    #[tokio::test]
    async fn silence_is_measured_from_the_last_answer_and_ends_with_one() {
        let t0 = Instant::now();
        let live = liveness(Probe {
            last_answer: t0,
            error: None,
        });
        // A probe still waiting (a hung server) is silence all the same.
        assert_eq!(
            live.silent(t0 + Duration::from_secs(19), Duration::from_secs(20)),
            None
        );
        let why = live
            .silent(t0 + Duration::from_secs(21), Duration::from_secs(20))
            .unwrap();
        assert!(
            why.contains("not answered for 21s") && why.contains("still waiting"),
            "{why}"
        );
        record(
            &live.probe,
            t0 + Duration::from_secs(22),
            Err("connection refused".into()),
        );
        let why = live
            .silent(t0 + Duration::from_secs(25), Duration::from_secs(20))
            .unwrap();
        assert!(why.contains("connection refused"), "{why}");
        record(&live.probe, t0 + Duration::from_secs(30), Ok(()));
        assert_eq!(
            live.silent(t0 + Duration::from_secs(31), Duration::from_secs(20)),
            None
        );
    }

    #[test]
    fn a_throttling_server_is_alive() {
        let throttled = kube::Error::Api(
            kube::core::Status::failure("Too many requests", "TooManyRequests")
                .with_code(429)
                .boxed(),
        );
        assert_eq!(answered(throttled), Ok(()));
    }
}
