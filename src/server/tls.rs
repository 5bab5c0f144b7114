//! HTTPS on the main port: rustls (ring), HTTP/1.1, with the certificate re-read when its
//! files change. cert-manager and OpenShift's service CA renew the Secret in place and the
//! kubelet swaps the mounted files atomically; the hub notices within a second of the next
//! connection, without a restart. A pair that cannot be read (a half-written file, a key that
//! does not match) is logged and the previous certificate kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// The files are looked at (their metadata only) at most this often, on a new connection.
const CHECK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Read(#[from] crate::files::FileError),
    #[error("{}: {message}", path.display())]
    Pem { path: PathBuf, message: String },
    #[error("the key {} and the certificate {}: {message}", key.display(), cert.display())]
    Pair {
        cert: PathBuf,
        key: PathBuf,
        message: String,
    },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// An acceptor serving the pair `cert`, `key` (PEM), re-read when they change.
pub(super) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let store = CertStore::load(cert, key, provider.clone())?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(store));
    // The server speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[derive(Debug)]
struct CertStore {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    state: Mutex<Served>,
}

#[derive(Debug)]
struct Served {
    key: Arc<CertifiedKey>,
    stamp: Stamp,
    checked: Instant,
    /// The files as they were when they last failed to load: not tried again until they
    /// change, so a bad pair is logged once.
    failed: Option<Stamp>,
}

/// What tells that a file changed: its modification time, length and (on Unix) inode.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp(Vec<(SystemTime, u64, u64)>);

impl Stamp {
    fn of(files: &[&Path]) -> std::io::Result<Stamp> {
        let mut out = Vec::with_capacity(files.len());
        for f in files {
            let m = std::fs::metadata(f)?;
            out.push((m.modified()?, m.len(), inode(&m)));
        }
        Ok(Stamp(out))
    }
}

#[cfg(unix)]
fn inode(m: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(m)
}

#[cfg(not(unix))]
fn inode(_: &std::fs::Metadata) -> u64 {
    0
}

impl CertStore {
    fn load(cert: &Path, key: &Path, provider: Arc<CryptoProvider>) -> Result<CertStore, TlsError> {
        // Read first: its errors name the file.
        let loaded = load_pair(cert, key, &provider)?;
        let stamp = Stamp::of(&[cert, key]).map_err(|source| {
            TlsError::Read(crate::files::FileError::Io {
                path: cert.display().to_string(),
                source,
            })
        })?;
        Ok(CertStore {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            provider,
            state: Mutex::new(Served {
                key: Arc::new(loaded),
                stamp,
                checked: Instant::now(),
                failed: None,
            }),
        })
    }

    fn current(&self) -> Arc<CertifiedKey> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.checked.elapsed() >= CHECK_EVERY {
            s.checked = Instant::now();
            self.refresh(&mut s);
        }
        s.key.clone()
    }

    fn refresh(&self, s: &mut Served) {
        // Missing for a moment while the kubelet swaps the files: look again next time.
        let Ok(stamp) = Stamp::of(&[&self.cert, &self.key]) else {
            return;
        };
        if stamp == s.stamp || s.failed.as_ref() == Some(&stamp) {
            return;
        }
        match load_pair(&self.cert, &self.key, &self.provider) {
            Ok(key) => {
                tracing::info!(
                    "serving the new certificate of {} (its files changed)",
                    self.cert.display()
                );
                s.key = Arc::new(key);
                s.stamp = stamp;
                s.failed = None;
            }
            Err(e) => {
                tracing::warn!("keeping the certificate served so far: {e}");
                s.failed = Some(stamp);
            }
        }
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn load_pair(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let read = |path: &Path| crate::files::read(path, crate::files::PEM);
    let pem = |path: &Path, message: String| TlsError::Pem {
        path: path.to_path_buf(),
        message,
    };
    let chain = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(pem(cert, "holds no PEM certificate".into()));
    }
    let private = PrivateKeyDer::from_pem_slice(&read(key)?)
        .map_err(|e| pem(key, format!("not a PEM private key: {e}")))?;
    CertifiedKey::from_der(chain, private, provider).map_err(|e| TlsError::Pair {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    fn write(dir: &Path, (cert, key): &(String, String)) -> (PathBuf, PathBuf) {
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        // A new file, as the kubelet's swap makes: a new inode whatever the clock says.
        for (path, text) in [(&c, cert), (&k, key)] {
            let tmp = path.with_extension("new");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, path).unwrap();
        }
        (c, k)
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fleetscaler-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn store(dir: &Path) -> CertStore {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        CertStore::load(&dir.join("tls.crt"), &dir.join("tls.key"), provider).unwrap()
    }

    fn served(s: &CertStore) -> Vec<u8> {
        // As if the last look were old: the next connection looks again.
        s.state.lock().unwrap().checked -= CHECK_EVERY;
        s.current().cert[0].to_vec()
    }

    #[test]
    fn a_renewed_pair_is_served_and_a_broken_one_is_not() {
        let dir = temp_dir("renew");
        let first = pair("a.example");
        write(&dir, &first);
        let s = store(&dir);
        let first_der = served(&s);

        let second = pair("b.example");
        write(&dir, &second);
        let second_der = served(&s);
        assert_ne!(first_der, second_der, "the renewed certificate");

        // A key that is not the certificate's: the previous pair stays.
        let mismatched = (pair("c.example").0, second.1.clone());
        write(&dir, &mismatched);
        assert_eq!(served(&s), second_der);
        assert!(s.state.lock().unwrap().failed.is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = temp_dir("errors");
        let provider = rustls::crypto::ring::default_provider();
        let missing = load_pair(&dir.join("no.crt"), &dir.join("no.key"), &provider);
        assert!(
            missing.unwrap_err().to_string().contains("no.crt"),
            "the missing file named"
        );
        let (c, k) = write(&dir, &("not pem".into(), pair("x").1));
        let e = load_pair(&c, &k, &provider).unwrap_err().to_string();
        assert!(
            e.contains("tls.crt") && e.contains("no PEM certificate"),
            "{e}"
        );
        let (c, k) = write(&dir, &(pair("x").0, "nope".into()));
        let e = load_pair(&c, &k, &provider).unwrap_err().to_string();
        assert!(e.contains("tls.key"), "{e}");
        let (c, k) = write(&dir, &(pair("x").0, pair("y").1));
        let e = load_pair(&c, &k, &provider).unwrap_err().to_string();
        assert!(e.contains("tls.key") && e.contains("tls.crt"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
