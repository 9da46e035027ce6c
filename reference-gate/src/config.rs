//! The gate's configuration file (JSON): where it listens, the trusted downstream servers, the
//! policy, limits, the error-code table and the trace file.

use crate::canonical::Limits;
use crate::policy::RuleEngine;
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::forward::Deadlines;
pub use crate::forward::Server;

/// The error-code table. Defaults follow the gate design: malformed -32600, denied -32001,
/// downstream failure -32002; a downstream's own JSON-RPC error passes with its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ErrorCodes {
    pub malformed: i64,
    pub denied: i64,
    pub downstream: i64,
    /// What a client gets when the downstream answers its request with a JSON-RPC error.
    pub downstream_errors: DownstreamErrors,
}

/// What becomes of a downstream's JSON-RPC error (GATE-DOWN-03).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DownstreamErrors {
    /// Its code reaches the client with a message from the gate's fixed vocabulary and no
    /// `data`; a code the gate itself uses (malformed, denied, downstream failure) becomes the
    /// downstream-failure answer, so a denial is never mistaken for the downstream's error.
    #[default]
    PassCode,
    /// Every downstream error becomes the downstream-failure answer.
    Flatten,
}

impl ErrorCodes {
    /// The default codes for modern (2026-07-28) requests: -32000..-32019 are legacy there and
    /// -32020..-32099 the specification's own, so a gate's codes lie outside the JSON-RPC
    /// reserved range.
    pub fn modern() -> ErrorCodes {
        ErrorCodes {
            malformed: -32600,
            denied: -31001,
            downstream: -31002,
            downstream_errors: DownstreamErrors::PassCode,
        }
    }
}

impl Default for ErrorCodes {
    fn default() -> Self {
        ErrorCodes {
            malformed: -32600,
            denied: -32001,
            downstream: -32002,
            downstream_errors: DownstreamErrors::PassCode,
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    #[serde(default = "default_listen")]
    pub listen: String,
    pub servers: BTreeMap<String, Server>,
    /// The server id client calls go to (the fronts serve one downstream each).
    pub server: String,
    #[serde(default)]
    pub policy: RuleEngine,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub deadlines: Deadlines,
    #[serde(default)]
    pub errors: ErrorCodes,
    /// The codes for modern (2026-07-28 and later) requests.
    #[serde(default = "ErrorCodes::modern")]
    pub errors_modern: ErrorCodes,
    /// The protocol versions the gate speaks: legacy ones through `initialize`, modern ones per
    /// request. Anything else is refused (-32022).
    #[serde(default = "default_versions")]
    pub versions: Vec<crate::Version>,
    /// SHA-256 hex digests of accepted bearer tokens. Empty: no authentication.
    #[serde(default)]
    pub bearer_sha256: Vec<String>,
    /// Decision traces as JSON lines; absent: stderr.
    #[serde(default)]
    pub trace: Option<String>,
    /// Serve the HTTP front over TLS with this certificate and key.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// A PEM file of certificates trusted for `https` downstreams besides the platform's roots.
    #[serde(default)]
    pub downstream_ca: Option<String>,
    /// OAuth: the HTTP front checks a JWT access token on every request (instead of
    /// `bearer_sha256`).
    #[serde(default)]
    pub auth: Option<crate::auth::AuthConfig>,
}

/// The HTTP front's certificate chain (PEM, leaf first) and private key (PEM).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    pub cert: String,
    pub key: String,
}

fn default_versions() -> Vec<crate::Version> {
    crate::era::DEFAULT_VERSIONS.to_vec()
}

fn default_listen() -> String {
    "127.0.0.1:0".into()
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read the configuration {path} (check the path given to --config)")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid gate configuration (see the reference gate's README)")]
    Parse {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the server id `{0}` is not among `servers`")]
    UnknownServer(String),
    #[error("error codes must be distinct, and none of -32700, -32601, -32602, -32603")]
    Codes,
    #[error("the modern error codes must lie outside -32099..=-32000 (the malformed code may be -32600)")]
    ModernCodes,
    #[error(transparent)]
    Rule(#[from] crate::policy::RuleError),
    #[error("`versions` must list protocol versions the gate knows (2025-06-18, 2025-11-25, 2026-07-28), at least one")]
    Versions,
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthError),
    #[error("give `auth` (JWT access tokens) or `bearer_sha256` (token digests), not both")]
    TwoAuthModes,
    #[error("`deadlines.session_idle_ms` and `deadlines.max_sessions` must be at least 1")]
    Sessions,
}

impl GateConfig {
    pub fn load(path: &Path) -> Result<GateConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let cfg: GateConfig = serde_json::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.display().to_string(),
            source,
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.servers.contains_key(&self.server) {
            return Err(ConfigError::UnknownServer(self.server.clone()));
        }
        self.policy.validate()?;
        let reserved = [-32700, -32601, -32602, -32603];
        for e in [self.errors, self.errors_modern] {
            if e.malformed == e.denied
                || e.denied == e.downstream
                || e.malformed == e.downstream
                || reserved.contains(&e.denied)
                || reserved.contains(&e.downstream)
            {
                return Err(ConfigError::Codes);
            }
        }
        let m = self.errors_modern;
        if [m.denied, m.downstream]
            .iter()
            .any(|c| (-32099..=-32000).contains(c))
            || (-32099..=-32000).contains(&m.malformed)
        {
            return Err(ConfigError::ModernCodes);
        }
        // Only versions whose rules the gate implements: a configured future version would be
        // served under rules the gate does not know.
        if self.deadlines.session_idle_ms == 0 || self.deadlines.max_sessions == 0 {
            return Err(ConfigError::Sessions);
        }
        let known = |v: &crate::Version| crate::era::DEFAULT_VERSIONS.contains(v);
        if self.versions.is_empty() || !self.versions.iter().all(known) {
            return Err(ConfigError::Versions);
        }
        if let Some(auth) = &self.auth {
            if !self.bearer_sha256.is_empty() {
                return Err(ConfigError::TwoAuthModes);
            }
            auth.validate()?;
        }
        Ok(())
    }

    /// The downstream of the configured server.
    pub fn downstream(&self) -> Option<&Server> {
        self.servers.get(&self.server)
    }
}
