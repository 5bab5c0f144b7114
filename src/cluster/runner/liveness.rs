//! Silence is detected, not trusted. A hung API server keeps its watch connections open and
//! sends nothing, so a frozen cache looks exactly like a quiet cluster. A cheap read
//! (`/version`), with the read deadline, tells the two apart: while it fails, the runner
//! says since when and why, skips its passes (the cluster counts as unhealthy) and, past
//! the give-up time, connects again. The watches' own answers count (`Heard`: an event, a
//! bookmark, a list page), so the probe is sent only when the server has said nothing for a
//! scan interval: a thousand clusters whose watches are heard from do not each cost a
//! request every ten seconds.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cluster::cache::heard::Heard;

/// When the server last answered, and the last failure since.
struct Probe {
    last_answer: Instant,
    error: Option<String>,
}

/// The probe task of one runner; it stops when this is dropped.
pub(super) struct Liveness {
    probe: Arc<Mutex<Probe>>,
    heard: Heard,
    task: JoinHandle<()>,
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Liveness {
    pub(super) fn start(
        client: kube::Client,
        heard: Heard,
        every: Duration,
        deadline: Duration,
    ) -> Self {
        let probe = Arc::new(Mutex::new(Probe {
            last_answer: Instant::now(),
            error: None,
        }));
        let shared = probe.clone();
        let watches = heard.clone();
        let task = tokio::spawn(async move {
            loop {
                // Heard from within the interval: no need to ask.
                let quiet_until = watches.last() + every;
                if quiet_until > Instant::now() {
                    tokio::time::sleep_until(quiet_until).await;
                    continue;
                }
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
        Liveness { probe, heard, task }
    }

    /// Why the cluster cannot be trusted now: its API server has not answered for longer
    /// than `max_age`. Measured from its last answer, whether or not a probe is still
    /// waiting: a hung server is flagged on time, however long the read deadline.
    pub(super) fn silent(&self, now: Instant, max_age: Duration) -> Option<String> {
        let probe = lock(&self.probe);
        let last = probe.last_answer.max(self.heard.last());
        let age = now.saturating_duration_since(last);
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
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    fn liveness(probe: Probe) -> Liveness {
        Liveness {
            probe: Arc::new(Mutex::new(probe)),
            heard: Heard::new(),
            task: tokio::spawn(async {}),
        }
    }

    #[tokio::test(start_paused = true)]
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

    /// A watch's answer (an event, a bookmark) is the server answering, probe or no probe.
    #[tokio::test(start_paused = true)]
    async fn what_the_watches_hear_counts_as_an_answer() {
        let t0 = Instant::now();
        let live = liveness(Probe {
            last_answer: t0,
            error: Some("no answer within 10s".into()),
        });
        tokio::time::advance(Duration::from_secs(25)).await;
        let limit = Duration::from_secs(20);
        assert!(live.silent(Instant::now(), limit).is_some(), "silent");
        live.heard.stamp();
        assert_eq!(live.silent(Instant::now(), limit), None, "a bookmark came");
        tokio::time::advance(Duration::from_secs(21)).await;
        assert!(live.silent(Instant::now(), limit).is_some(), "silent again");
    }

    /// The probe asks only after a scan interval without an answer from the watches, and
    /// stops asking while they are heard from.
    #[tokio::test(start_paused = true)]
    async fn the_probe_waits_while_the_watches_are_heard_from() {
        let (client, probes) = counting_client();
        let heard = Heard::new();
        let every = Duration::from_secs(10);
        let live = Liveness::start(client, heard.clone(), every, every);
        tokio::time::sleep(Duration::from_secs(35)).await;
        assert_eq!(
            probes.load(SeqCst),
            3,
            "nothing heard: a probe a scan interval"
        );
        for _ in 0..6 {
            heard.stamp();
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        assert_eq!(
            probes.load(SeqCst),
            3,
            "the watches were heard from every 5 s"
        );
        drop(live);
    }

    /// A client whose every request is a `/version` answer, counted.
    fn counting_client() -> (kube::Client, Arc<AtomicUsize>) {
        let probes = Arc::new(AtomicUsize::new(0));
        let seen = probes.clone();
        let service = tower::service_fn(move |_: http::Request<kube::client::Body>| {
            seen.fetch_add(1, SeqCst);
            let version = r#"{"major":"1","minor":"34","gitVersion":"v1.34.4","gitCommit":"",
                "gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            let body = http_body_util::Full::new(bytes::Bytes::from_static(version.as_bytes()));
            async move { Ok::<_, std::convert::Infallible>(http::Response::new(body)) }
        });
        (kube::Client::new(service, "default"), probes)
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
