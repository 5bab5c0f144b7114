//! fleet.toml `[hub.serving]`: how the API, the dashboard and `/metrics` are served (TLS,
//! who may read them, limits), and where the probes are. See docs/hub.md, "Serving".
//!
//! The default is the hub as it always served: plain HTTP, no authentication, probes on the
//! main port. With a certificate, or with `authentication = "kubernetes"`, the main port is
//! secured and the probes move to `probe_listen`, plain and open, as the kubelet needs them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigIssue;
use crate::engine::settings::duration_serde;
use crate::model::duration::format_go_duration;

/// hyper needs at least this much to read a request's head, and a service-account token
/// alone is about 1 KiB.
const MIN_HEADER_BYTES: usize = 4096;
const MAX_HEADER_BYTES: usize = 1 << 20;
/// Nothing the hub serves reads a body: a larger cap would only be room for abuse.
const MAX_BODY_BYTES: usize = 1 << 20;
const MAX_CONNECTIONS: usize = 65_536;
const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServingConfig {
    /// PEM certificate chain of the main port; with `tls_key_file`, the port serves HTTPS
    /// only. Re-read when the file changes (cert-manager, OpenShift's service CA).
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// `none`: anyone who reaches the port; `kubernetes`: a bearer token that the management
    /// cluster's TokenReview accepts, for a user its SubjectAccessReview allows `get` on the
    /// path (a non-resource URL), as kube-rbac-proxy and controller-runtime's metrics do.
    pub authentication: Authentication,
    /// Kubeconfig context of the management cluster that reviews tokens and access (looked
    /// up in `hub.kubeconfigs`); the in-cluster service account when absent.
    pub context: Option<String>,
    /// Plain HTTP address of `/livez`, `/readyz` and `/healthz` while the main port is
    /// secured (TLS or authentication); otherwise the probes stay on `hub.listen`.
    pub probe_listen: String,
    /// Connections served at once on the main port; more are closed at once, unserved.
    pub max_connections: usize,
    /// Request line and headers; longer ones are answered 431.
    pub max_request_header_bytes: usize,
    /// Request bodies (nothing served reads one); longer ones are answered 413.
    pub max_request_body_bytes: usize,
    /// Deadline of one request: reviews, the answer, and each write of it.
    #[serde(with = "duration_serde")]
    pub request_timeout: Duration,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Authentication {
    #[default]
    None,
    Kubernetes,
}

impl Default for ServingConfig {
    fn default() -> Self {
        ServingConfig {
            tls_cert_file: None,
            tls_key_file: None,
            authentication: Authentication::None,
            context: None,
            probe_listen: "0.0.0.0:8081".into(),
            max_connections: 256,
            max_request_header_bytes: 32 * 1024,
            max_request_body_bytes: 4096,
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl ServingConfig {
    /// The certificate and key files, when the main port serves HTTPS.
    pub fn tls(&self) -> Option<(&Path, &Path)> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some((cert, key)),
            _ => None,
        }
    }

    /// Whether the main port is secured, which moves the probes to `probe_listen`.
    pub fn secured(&self) -> bool {
        self.tls().is_some() || self.authentication == Authentication::Kubernetes
    }

    /// Every problem, keyed `hub.serving.<key>`; `listen` is `hub.listen`.
    pub fn validate(&self, listen: &str, issues: &mut Vec<ConfigIssue>) {
        let mut bad = |key: &str, message: String| {
            issues.push(ConfigIssue {
                key: format!("hub.serving.{key}"),
                message,
            })
        };
        for (key, file, other) in [
            ("tls_cert_file", &self.tls_cert_file, &self.tls_key_file),
            ("tls_key_file", &self.tls_key_file, &self.tls_cert_file),
        ] {
            match (file, other) {
                (Some(f), _) if f.as_os_str().is_empty() => bad(key, "must not be empty".into()),
                (None, Some(_)) => bad(
                    key,
                    "needed too: TLS takes a certificate and its key".into(),
                ),
                _ => {}
            }
        }
        if self.authentication == Authentication::Kubernetes && self.tls().is_none() {
            bad(
                "authentication",
                "\"kubernetes\" reads bearer tokens, which must not cross the network in \
                 clear: set tls_cert_file and tls_key_file"
                    .into(),
            );
        }
        if self.context.as_deref().is_some_and(|c| c.trim().is_empty()) {
            bad(
                "context",
                "must not be empty (leave it out for in-cluster)".into(),
            );
        }
        self.validate_probe_listen(listen, &mut bad);
        self.validate_limits(&mut bad);
    }

    fn validate_probe_listen(&self, listen: &str, bad: &mut impl FnMut(&str, String)) {
        let Ok(probes) = self.probe_listen.parse::<SocketAddr>() else {
            bad(
                "probe_listen",
                format!(
                    "{:?} is not an address such as 0.0.0.0:8081",
                    self.probe_listen
                ),
            );
            return;
        };
        let main = listen.parse::<SocketAddr>().ok();
        // Port 0 picks a free port for each: they cannot clash.
        if self.secured() && probes.port() != 0 && main.is_some_and(|m| m.port() == probes.port()) {
            bad(
                "probe_listen",
                format!(
                    "{probes} takes hub.listen's port: the probes need a port of their own \
                     while the main port is secured"
                ),
            );
        }
    }

    fn validate_limits(&self, bad: &mut impl FnMut(&str, String)) {
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            bad(
                "max_connections",
                format!(
                    "{} is not within 1..={MAX_CONNECTIONS}",
                    self.max_connections
                ),
            );
        }
        if !(MIN_HEADER_BYTES..=MAX_HEADER_BYTES).contains(&self.max_request_header_bytes) {
            bad(
                "max_request_header_bytes",
                format!(
                    "{} is not within {MIN_HEADER_BYTES}..={MAX_HEADER_BYTES} (a \
                     service-account token alone is about 1 KiB)",
                    self.max_request_header_bytes
                ),
            );
        }
        if self.max_request_body_bytes > MAX_BODY_BYTES {
            bad(
                "max_request_body_bytes",
                format!(
                    "{} is more than {MAX_BODY_BYTES}: nothing served reads a body",
                    self.max_request_body_bytes
                ),
            );
        }
        if self.request_timeout.is_zero() || self.request_timeout > MAX_REQUEST_TIMEOUT {
            bad(
                "request_timeout",
                format!(
                    "{} must be more than 0s and at most {}",
                    format_go_duration(self.request_timeout),
                    format_go_duration(MAX_REQUEST_TIMEOUT)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetConfig;

    fn issues(text: &str) -> Vec<(String, String)> {
        match FleetConfig::parse(text, "test") {
            Ok(_) => Vec::new(),
            Err(e) => e.issues.into_iter().map(|i| (i.key, i.message)).collect(),
        }
    }

    fn keys(text: &str) -> Vec<String> {
        issues(text).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn the_default_serves_as_before_plain_and_open() {
        let c = FleetConfig::parse("", "test").unwrap().hub.serving;
        assert!(!c.secured());
        assert_eq!(c.tls(), None);
        assert_eq!(c.authentication, Authentication::None);
        assert_eq!(c.max_connections, 256);
    }

    #[test]
    fn tls_and_kubernetes_authentication_read_and_secure_the_port() {
        let text = "[hub.serving]\ntls_cert_file = \"/tls/tls.crt\"\n\
                    tls_key_file = \"/tls/tls.key\"\nauthentication = \"kubernetes\"\n\
                    context = \"management\"\nrequest_timeout = \"5s\"\n";
        let c = FleetConfig::parse(text, "test").unwrap().hub.serving;
        assert!(c.secured());
        assert_eq!(
            c.tls(),
            Some((Path::new("/tls/tls.crt"), Path::new("/tls/tls.key")))
        );
        assert_eq!(c.authentication, Authentication::Kubernetes);
        assert_eq!(c.request_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_certificate_without_its_key_is_named() {
        assert_eq!(
            keys("[hub.serving]\ntls_cert_file = \"/tls/tls.crt\"\n"),
            ["hub.serving.tls_key_file"]
        );
        assert_eq!(
            keys("[hub.serving]\ntls_key_file = \"/k\"\n"),
            ["hub.serving.tls_cert_file"]
        );
        assert_eq!(
            keys("[hub.serving]\ntls_cert_file = \"\"\ntls_key_file = \"/k\"\n"),
            ["hub.serving.tls_cert_file"]
        );
    }

    #[test]
    fn tokens_are_never_read_over_plain_http() {
        let found = issues("[hub.serving]\nauthentication = \"kubernetes\"\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "hub.serving.authentication");
        assert!(found[0].1.contains("tls_cert_file"), "{found:?}");
    }

    #[test]
    fn unknown_keys_and_values_are_refused_with_their_path() {
        let found = issues("[hub.serving]\nauthentication = \"oidc\"\n");
        assert_eq!(found[0].0, "hub.serving.authentication", "{found:?}");
        let found = issues("[hub.serving]\nmax_conections = 3\n");
        assert!(found[0].1.contains("max_conections"), "{found:?}");
    }

    #[test]
    fn limits_out_of_range_are_named() {
        let text = "[hub.serving]\nmax_connections = 0\nmax_request_header_bytes = 100\n\
                    max_request_body_bytes = 2000000\nrequest_timeout = \"0s\"\n\
                    probe_listen = \"8081\"\n";
        assert_eq!(
            keys(text),
            [
                "hub.serving.probe_listen",
                "hub.serving.max_connections",
                "hub.serving.max_request_header_bytes",
                "hub.serving.max_request_body_bytes",
                "hub.serving.request_timeout",
            ]
        );
    }

    #[test]
    fn a_secured_port_needs_the_probes_elsewhere() {
        let text = "[hub]\nlisten = \"0.0.0.0:8443\"\n[hub.serving]\n\
                    tls_cert_file = \"/c\"\ntls_key_file = \"/k\"\nprobe_listen = \"0.0.0.0:8443\"\n";
        assert_eq!(keys(text), ["hub.serving.probe_listen"]);
        // Unsecured, the probe address is not used at all; port 0 never clashes.
        assert!(keys("[hub.serving]\nprobe_listen = \"0.0.0.0:8080\"\n").is_empty());
        let zero = "[hub]\nlisten = \"127.0.0.1:0\"\n[hub.serving]\n\
                    tls_cert_file = \"/c\"\ntls_key_file = \"/k\"\nprobe_listen = \"127.0.0.1:0\"\n";
        assert!(keys(zero).is_empty());
    }
}
