//! Waiting for Ctrl-C or SIGTERM (what Kubernetes sends a pod to stop it).

/// Returns at the next Ctrl-C or SIGTERM. If signals cannot be listened for, it never
/// returns and says why on stderr.
pub async fn shutdown_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                eprintln!("cannot listen for SIGTERM ({e}); Ctrl-C still stops");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
