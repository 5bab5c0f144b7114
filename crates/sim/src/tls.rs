//! Certificates of a simulated cluster: its own self-signed CA, and a server certificate for
//! `127.0.0.1` / `localhost` signed by it, served with rustls on the ring provider. Clients
//! verify the server against the CA written into the kubeconfig, as with a real cluster.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::SimError;

/// A cluster's CA (for the kubeconfig) and its server's TLS configuration.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub ca_pem: String,
    pub server_config: Arc<ServerConfig>,
}

/// Makes a fresh CA and server certificate for the cluster `name`.
pub fn credentials(name: &str) -> Result<Credentials, SimError> {
    let cert_err = |e: rcgen::Error| SimError::Certificate {
        cluster: name.to_string(),
        message: e.to_string(),
    };
    let ca_key = KeyPair::generate().map_err(cert_err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("fleetscaler-sim {name} CA"));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(cert_err)?;

    let server_key = KeyPair::generate().map_err(cert_err)?;
    let names = vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "::1".to_string(),
    ];
    let mut server_params = CertificateParams::new(names).map_err(cert_err)?;
    server_params
        .distinguished_name
        .push(DnType::CommonName, format!("fleetscaler-sim {name}"));
    server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .map_err(cert_err)?;

    let tls_err = |e: rustls::Error| SimError::Tls {
        cluster: name.to_string(),
        message: e.to_string(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = vec![
        CertificateDer::from(server_cert.der().to_vec()),
        CertificateDer::from(ca_cert.der().to_vec()),
    ];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(tls_err)?;
    // As the API server: HTTP/2 for clients that offer it (client-go, the hub), else 1.1.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Credentials {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(config),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_a_ca_and_a_server_config() {
        let c = credentials("sim-1").unwrap();
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let alpn = &c.server_config.alpn_protocols;
        assert_eq!(alpn, &vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    }
}
