//! The runner's TLS client: which certificates an https target must present.
//!
//! By default the platform's trusted roots (rustls-native-certs); `--ca FILE` adds the
//! certificates of a PEM file (a test CA, a company CA); `--insecure` checks nothing but the
//! handshake's signatures, for a target whose certificate cannot be checked at all (the CLI
//! warns loudly). Only HTTP/1.1 is offered through ALPN: the runner's client speaks nothing
//! else, whatever the server could.

use reference_gate::tls::{client_config, provider, roots, TlsError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;

/// How the runner checks an https target's certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// A PEM file of certificates trusted besides the platform's roots.
    pub ca: Option<PathBuf>,
    /// Accept any certificate (signatures are still checked, so the handshake is real).
    pub insecure: bool,
}

impl TlsOptions {
    /// The client configuration these options describe.
    pub fn client(&self) -> Result<Arc<ClientConfig>, TlsError> {
        if self.insecure {
            let provider = provider();
            let mut config = ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(TlsError::Config)?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            config.alpn_protocols = vec![reference_gate::tls::ALPN_HTTP1.to_vec()];
            return Ok(Arc::new(config));
        }
        client_config(roots(self.ca.as_deref())?)
    }
}

/// `--insecure`: any certificate for any name, but the handshake signatures must verify with
/// the certificate presented (a real TLS session with an unauthenticated server).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
