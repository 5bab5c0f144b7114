//! Errors starting or running a simulated fleet (request-level failures are `ApiError`s).

use std::path::PathBuf;

/// Why a fleet could not start or keep running.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot make the certificates of cluster {cluster}: {message}")]
    Certificate { cluster: String, message: String },
    #[error("cannot build the TLS configuration of cluster {cluster}: {message}")]
    Tls { cluster: String, message: String },
    #[error("cannot listen on 127.0.0.1 for {what}: {source}")]
    Listen {
        what: String,
        source: std::io::Error,
    },
    #[error("cannot write the kubeconfig to {path}: {source}")]
    WriteKubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serialize the kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("cannot build the initial shape of cluster {cluster}: {message}")]
    Shape { cluster: String, message: String },
    #[error("invalid settings: {0}")]
    Settings(String),
    #[error("cannot wait for a shutdown signal: {0}")]
    Signal(std::io::Error),
    #[error("cannot connect with kubeconfig {} (context {context}): {message}", kubeconfig.display())]
    Connect {
        kubeconfig: PathBuf,
        context: String,
        message: String,
    },
    #[error("a machine controller pass stopped: {0}")]
    Pass(String),
}
