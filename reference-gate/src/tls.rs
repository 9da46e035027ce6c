//! TLS with rustls (ring provider): a server configuration from PEM files, for the gate's HTTP
//! front and the suite's witness, and a client configuration that trusts the platform's roots
//! plus the certificates of an optional PEM file, for https downstreams.
//!
//! Only HTTP/1.1 is offered through ALPN, on both sides: the fronts and the forwarder speak it.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The ALPN protocol both sides offer.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Why a TLS configuration could not be built. Kinds matter, text does not.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read the PEM file {path}: check the path and that it holds PEM text")]
    Pem {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{0} holds no certificate (expected `-----BEGIN CERTIFICATE-----` blocks)")]
    NoCertificate(PathBuf),
    #[error("no trusted root certificate: the platform has none and no CA file was given")]
    NoRoots,
    #[error("the certificate and key do not make a TLS configuration")]
    Config(#[source] rustls::Error),
}

/// The crypto provider every configuration here uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM file, in order.
pub(crate) fn load_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem {
        path: path.to_path_buf(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(certs)
}

/// A server configuration from a certificate chain (leaf first) and its private key, both PEM.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = load_certificates(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Pem {
        path: key.to_path_buf(),
        source,
    })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
    Ok(Arc::new(config))
}

/// The platform's trusted roots plus every certificate in `extra` (a PEM file). Platform roots
/// that fail to load or parse are skipped; an empty store is an error.
pub fn roots(extra: Option<&Path>) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra {
        let (added, _) = roots.add_parsable_certificates(load_certificates(path)?);
        if added == 0 {
            return Err(TlsError::NoCertificate(path.to_path_buf()));
        }
    }
    if roots.is_empty() {
        return Err(TlsError::NoRoots);
    }
    Ok(roots)
}

/// A client configuration that checks server certificates against `roots`.
pub fn client_config(roots: RootCertStore) -> Result<Arc<ClientConfig>, TlsError> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
    Ok(Arc::new(config))
}

/// The name a client checks a server's certificate against: an IP address or a DNS name, from a
/// URL's host (brackets of an IPv6 literal removed).
pub fn server_name(host: &str) -> Option<rustls::pki_types::ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string()).ok()
}
