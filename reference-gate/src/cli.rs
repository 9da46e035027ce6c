//! The command line: `reference-gate --config FILE [--listen ADDR] [--downstream URL |
//! --downstream-cmd CMD] [--stdio]`. Shared by the `reference-gate` binary and by mcp-gauntlet,
//! which embeds the gate for its default run.

use crate::config::{GateConfig, Server};
use crate::forward::ConfiguredForwarder;
use crate::front::http::{HttpFront, HttpSettings};
use crate::front::sessions::SessionLimits;
use crate::policy::Engine;
use crate::proxy::Proxy;
use crate::trace::Tracer;
use clap::Parser;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit codes.
pub(crate) const EXIT_OK: u8 = 0;
pub(crate) const EXIT_RUNTIME: u8 = 1;
pub(crate) const EXIT_USAGE: u8 = 2;
pub(crate) const EXIT_CONFIG: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "reference-gate",
    version,
    about = "Authorize-before-forward MCP gate: canonical bytes only, exact error codes."
)]
pub struct Args {
    /// The gate configuration (JSON).
    #[arg(long)]
    pub config: PathBuf,
    /// Listen address for the HTTP front (overrides the config's `listen`).
    #[arg(long, conflicts_with = "stdio")]
    pub listen: Option<String>,
    /// The configured server's downstream URL (overrides the config).
    #[arg(long, conflicts_with = "downstream_cmd")]
    pub downstream: Option<String>,
    /// The configured server's downstream stdio command, one string split like a shell would.
    #[arg(long)]
    pub downstream_cmd: Option<String>,
    /// Serve on stdin/stdout instead of HTTP.
    #[arg(long)]
    pub stdio: bool,
}

/// Why a gate could not be set up or stopped serving. Each message says what to check; the
/// cause, when there is one, is the error's `source` (printed after it by the binary).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthError),
    #[error("--downstream-cmd is not a valid command line (quote it as a POSIX shell would)")]
    DownstreamCmd(#[source] shell_words::ParseError),
    #[error("cannot open the trace file {path} (check that its directory exists and is writable)")]
    Trace {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set up TLS for the https downstreams (check `downstream_ca`)")]
    DownstreamTls(#[source] crate::tls::TlsError),
    #[error("cannot set up TLS for the HTTP front (check `tls.cert` and `tls.key`)")]
    FrontTls(#[source] crate::tls::TlsError),
    #[error("cannot listen on {addr} (is the address in use? give another with --listen)")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the gate stopped serving")]
    Serve(#[source] std::io::Error),
}

/// Load the config and apply the command-line overrides.
pub(crate) fn configure(args: &Args) -> Result<GateConfig, GateError> {
    let mut cfg = GateConfig::load(&args.config)?;
    let server = cfg.server.clone();
    if let Some(url) = &args.downstream {
        cfg.servers.insert(server, Server::Url(url.clone()));
    } else if let Some(cmd) = &args.downstream_cmd {
        let words = shell_words::split(cmd).map_err(GateError::DownstreamCmd)?;
        cfg.servers.insert(server, Server::Command(words));
    }
    if let Some(listen) = &args.listen {
        cfg.listen = listen.clone();
    }
    cfg.validate()?;
    Ok(cfg)
}

/// The proxy a configuration describes, with the configured rule engine.
pub fn build_proxy(cfg: &GateConfig) -> Result<Arc<Proxy>, GateError> {
    let engine: Arc<dyn Engine> = Arc::new(cfg.policy.clone());
    build_proxy_with(cfg, engine)
}

/// The proxy a configuration describes, with another engine.
pub(crate) fn build_proxy_with(
    cfg: &GateConfig,
    engine: Arc<dyn Engine>,
) -> Result<Arc<Proxy>, GateError> {
    let tracer = match &cfg.trace {
        Some(path) => Tracer::file(path).map_err(|source| GateError::Trace {
            path: path.clone(),
            source,
        })?,
        None => Tracer::none(),
    };
    let forwarder = Arc::new(forwarder(cfg)?);
    Ok(Arc::new(
        Proxy::new(engine, forwarder, cfg.limits, cfg.errors, tracer)
            .with_versions(cfg.versions.clone(), cfg.errors_modern),
    ))
}

/// The forwarder a configuration describes: `https` downstreams are checked against the
/// platform's roots and `downstream_ca`, which must load when given.
pub fn forwarder(cfg: &GateConfig) -> Result<ConfiguredForwarder, GateError> {
    let any_https = cfg
        .servers
        .values()
        .any(|s| matches!(s, Server::Url(u) if u.starts_with("https://")));
    if !any_https && cfg.downstream_ca.is_none() {
        return Ok(ConfiguredForwarder::with_tls(
            &cfg.servers,
            cfg.deadlines,
            None,
        ));
    }
    let extra = cfg.downstream_ca.as_deref().map(std::path::Path::new);
    let tls = crate::tls::roots(extra)
        .and_then(crate::tls::client_config)
        .map_err(GateError::DownstreamTls)?;
    Ok(ConfiguredForwarder::with_tls(
        &cfg.servers,
        cfg.deadlines,
        Some(tls),
    ))
}

/// The HTTP front's settings for a configuration (a JWKS file is read now).
pub fn http_settings(cfg: &GateConfig) -> Result<HttpSettings, GateError> {
    let auth = match &cfg.auth {
        Some(a) => Some(Arc::new(crate::auth::Verifier::new(a.clone())?)),
        None => None,
    };
    Ok(HttpSettings {
        server_id: cfg.server.clone(),
        bearer_sha256: cfg.bearer_sha256.clone(),
        read_deadline: Duration::from_millis(cfg.deadlines.client_read_ms),
        refusal_code: cfg.errors.malformed,
        auth,
        sessions: SessionLimits {
            idle: Duration::from_millis(cfg.deadlines.session_idle_ms),
            max: cfg.deadlines.max_sessions,
        },
        #[cfg(feature = "faults")]
        forward_token: false,
    })
}

/// Serve a configuration until killed (HTTP) or until stdin ends (stdio).
pub async fn serve(cfg: GateConfig, stdio: bool) -> Result<(), GateError> {
    let proxy = build_proxy(&cfg)?;
    if stdio {
        crate::front::stdio::serve(
            proxy,
            &cfg.server,
            cfg.errors.malformed,
            tokio::io::stdin(),
            tokio::io::stdout(),
        )
        .await
        .map_err(GateError::Serve)?;
        return Ok(());
    }
    let tls = match &cfg.tls {
        Some(files) => Some(
            crate::tls::server_config(files.cert.as_ref(), files.key.as_ref())
                .map_err(GateError::FrontTls)?,
        ),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .map_err(|source| GateError::Listen {
            addr: cfg.listen.clone(),
            source,
        })?;
    let addr = listener.local_addr().map_err(GateError::Serve)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("listening {scheme}://{addr}{}", crate::front::http::PATH);
    use std::io::Write as _;
    std::io::stdout().flush().map_err(GateError::Serve)?;
    let front = HttpFront::new(proxy, http_settings(&cfg)?);
    match tls {
        Some(tls) => crate::front::http::serve_tls(listener, front, tls).await,
        None => crate::front::http::serve(listener, front).await,
    }
    Ok(())
}

/// The whole command, for `main`.
pub fn main_from_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let cfg = match configure(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reference-gate: {}", crate::error_chain(&e));
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("reference-gate: {e}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    match rt.block_on(serve(cfg, args.stdio)) {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => {
            eprintln!("reference-gate: {}", crate::error_chain(&e));
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}
