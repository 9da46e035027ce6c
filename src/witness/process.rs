//! The witness as a process of its own (`mcp-gauntlet witness`): its authorization read from a
//! configuration file, and its serving over HTTP (plain or TLS) on an address it prints first,
//! or over stdin and stdout.

use super::Witness;
use reference_gate::auth::Verifier;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the witness could not start serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WitnessSetupError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not an auth configuration", path.display())]
    AuthConfig {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Auth(#[from] reference_gate::auth::AuthError),
    #[error(transparent)]
    Tls(#[from] reference_gate::tls::TlsError),
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("cannot listen, or say where")]
    Io(#[from] std::io::Error),
}

/// The token verifier the configuration file at `path` describes (the reference gate's `auth`
/// section: resource, issuer, jwks_file or jwks_url, ...).
pub fn auth_verifier(path: &Path) -> Result<Arc<Verifier>, WitnessSetupError> {
    let text = std::fs::read_to_string(path).map_err(|source| WitnessSetupError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config: reference_gate::auth::AuthConfig =
        serde_json::from_str(&text).map_err(|source| WitnessSetupError::AuthConfig {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(Arc::new(Verifier::new(config)?))
}

/// Serve `witness` over HTTP on `addr` (TLS with the certificate chain and key files of `tls`),
/// once listening printing `listening URL` on stdout, until the process ends.
pub async fn serve_http(
    addr: &str,
    witness: Arc<Witness>,
    tls: Option<(&Path, &Path)>,
) -> Result<(), WitnessSetupError> {
    let resolved = tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| WitnessSetupError::Resolve(addr.to_string()))?;
    let tls = match tls {
        Some((cert, key)) => Some(reference_gate::tls::server_config(cert, key)?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(resolved).await?;
    let local = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("listening {scheme}://{local}{}", super::http::PATH);
    std::io::Write::flush(&mut std::io::stdout())?;
    match tls {
        Some(tls) => super::http::serve_tls(listener, witness, tls).await,
        None => super::http::serve(listener, witness).await,
    }
    Ok(())
}

/// Serve `witness` over HTTP+SSE (2024-11-05) on `addr` until killed; prints `listening
/// http://ADDR/sse` first.
pub async fn serve_sse(addr: &str, witness: Arc<Witness>) -> Result<(), WitnessSetupError> {
    let resolved = tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| WitnessSetupError::Resolve(addr.to_string()))?;
    let listener = tokio::net::TcpListener::bind(resolved).await?;
    let local = listener.local_addr()?;
    println!("listening http://{local}{}", super::sse::STREAM_PATH);
    std::io::Write::flush(&mut std::io::stdout())?;
    super::sse::serve(listener, witness).await;
    Ok(())
}
