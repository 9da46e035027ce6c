//! The gate as an OAuth 2.1 resource server (MCP authorization; RFC 6750, 8707, 9068, 9728).
//!
//! A request's `Authorization: Bearer` token must be a JWT access token signed by a key of the
//! configured JWKS (a file, or a URL fetched over https and cached), with an allowed asymmetric
//! algorithm (never `none`, never HMAC: a JWKS is public, so an HMAC key taken from it proves
//! nothing), issued by the configured issuer, for this gate's resource URI as audience, and
//! within `exp`/`nbf` give or take a bounded leeway. Its `scope` claim is what policy rules may
//! require. The token itself is never forwarded, logged or echoed: only its subject (for
//! traces) and scopes leave this module.

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest bearer token read; longer ones are refused unparsed.
pub(crate) const MAX_TOKEN: usize = 8 * 1024;
/// Largest JWKS document read (file or URL).
pub(crate) const MAX_JWKS: usize = 256 * 1024;
/// Largest leeway for `exp`/`nbf` a configuration may set.
pub(crate) const MAX_LEEWAY_S: u64 = 300;
/// How long a fetched JWKS is used before it is fetched again.
const JWKS_TTL: Duration = Duration::from_secs(300);
/// A token with a key id the cached JWKS lacks refetches it, at most this often.
const JWKS_MIN_REFRESH: Duration = Duration::from_secs(30);
/// Keys from a JWKS URL are used at most this long after the last successful fetch: an issuer
/// that withdrew a key is believed within the hour even when its JWKS stays unreachable.
const JWKS_MAX_STALE: Duration = Duration::from_secs(3600);
/// Longest `sub` taken (a longer one is refused): sessions are bound to the whole subject.
const MAX_SUBJECT: usize = 256;
/// The whole JWKS fetch (connect, TLS, answer).
const JWKS_FETCH_DEADLINE: Duration = Duration::from_secs(5);

/// The `auth` section of the gate's configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// This gate's resource URI (RFC 8707): the audience every token must name, and the
    /// `resource` of its Protected Resource Metadata.
    pub resource: String,
    /// The authorization server that issues tokens (`iss`), listed in the metadata.
    pub issuer: String,
    /// The issuer's keys: a JWKS file…
    #[serde(default)]
    pub jwks_file: Option<String>,
    /// …or a JWKS URL (https, or http on loopback), fetched and cached.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Accepted signature algorithms (JOSE names). Asymmetric ones only.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds (at most 300).
    #[serde(default = "default_leeway")]
    pub leeway_s: u64,
    /// Scopes listed in the metadata (`scopes_supported`).
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// A PEM file of certificates trusted for an https `jwks_url` besides the platform's roots.
    #[serde(default)]
    pub jwks_ca: Option<String>,
}

fn default_algorithms() -> Vec<String> {
    ["RS256", "PS256", "ES256", "ES384", "EdDSA"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn default_leeway() -> u64 {
    60
}

/// Why an `auth` section or its keys were refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    #[error("auth: give exactly one of `jwks_file` and `jwks_url`")]
    KeySource,
    #[error("auth: `{0}` is not an accepted algorithm (asymmetric JOSE names only: RS256, PS256, ES256, ES384, EdDSA, ...)")]
    Algorithm(String),
    #[error("auth: `leeway_s` may be at most {MAX_LEEWAY_S}")]
    Leeway,
    #[error("auth: `{0}` must be an absolute http(s) URI without a fragment")]
    Uri(String),
    #[error("auth: cannot read the JWKS {0}")]
    JwksRead(String, #[source] std::io::Error),
    #[error("auth: the JWKS is not a JSON Web Key Set")]
    JwksParse(#[source] serde_json::Error),
    #[error("auth: the JWKS holds no usable public key (symmetric `oct` keys are refused)")]
    NoKeys,
    #[error("auth: the JWKS could not be fetched")]
    JwksFetch,
    #[error("auth: cannot set up TLS for the JWKS URL")]
    Tls(#[source] crate::tls::TlsError),
    #[error(
        "auth: an http `jwks_url` must be on loopback (127.0.0.1, [::1], localhost); use https"
    )]
    PlainRemote,
}

impl AuthConfig {
    pub fn validate(&self) -> Result<(), AuthError> {
        if self.jwks_file.is_some() == self.jwks_url.is_some() {
            return Err(AuthError::KeySource);
        }
        if self.algorithms.is_empty() {
            return Err(AuthError::Algorithm(String::new()));
        }
        for name in &self.algorithms {
            allowed_algorithm(name)?;
        }
        if self.leeway_s > MAX_LEEWAY_S {
            return Err(AuthError::Leeway);
        }
        for uri in [
            Some(&self.resource),
            Some(&self.issuer),
            self.jwks_url.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            let absolute = uri.starts_with("https://") || uri.starts_with("http://");
            if !absolute || uri.contains('#') || uri.len() < "http://x".len() {
                return Err(AuthError::Uri(uri.clone()));
            }
        }
        if let Some(url) = &self.jwks_url {
            let loopback = ["http://127.0.0.1", "http://[::1]", "http://localhost"]
                .iter()
                .any(|p| {
                    url.strip_prefix(p)
                        .is_some_and(|r| r.starts_with([':', '/']))
                });
            if url.starts_with("http://") && !loopback {
                return Err(AuthError::PlainRemote);
            }
        }
        Ok(())
    }

    /// Where the Protected Resource Metadata is served (RFC 9728 section 3.1): the well-known
    /// path inserted between the resource's authority and its path.
    pub(crate) fn metadata_url(&self) -> String {
        let (scheme, rest) = self.resource.split_once("://").unwrap_or(("https", ""));
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let path = path.split('?').next().unwrap_or("").trim_end_matches('/');
        format!("{scheme}://{authority}{WELL_KNOWN}{path}")
    }

    /// The path part of [`AuthConfig::metadata_url`].
    pub fn metadata_path(&self) -> String {
        let url = self.metadata_url();
        let rest = url.split_once("://").map_or("", |(_, r)| r);
        rest.find('/')
            .map_or(WELL_KNOWN.to_string(), |i| rest[i..].to_string())
    }
}

/// The well-known path of Protected Resource Metadata.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// An algorithm name from the allow-list: asymmetric only.
fn allowed_algorithm(name: &str) -> Result<Algorithm, AuthError> {
    let bad = || AuthError::Algorithm(name.to_string());
    let alg = Algorithm::from_str(name).map_err(|_| bad())?;
    match alg {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => Err(bad()),
        other => Ok(other),
    }
}

/// Why a request's credentials were refused: the 401 challenge differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No credentials at all (RFC 6750 section 3.1: the challenge carries no error code).
    Missing,
    /// A token was given and is not acceptable: `error="invalid_token"`.
    Invalid,
    /// Credentials sent two ways at once (header and query): `error="invalid_request"`, 400.
    Ambiguous,
}

/// A token that passed every check.
#[derive(Clone, PartialEq, Eq)]
pub struct Verified {
    /// `sub` (required, at most 256 bytes): who the caller is, for traces and sessions.
    pub subject: String,
    /// The `scope` claim, split on spaces.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verified")
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

#[derive(serde::Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

struct Key {
    kid: Option<String>,
    alg: Option<Algorithm>,
    key: DecodingKey,
}

/// How a `jwks_url` is fetched.
struct Remote {
    url: String,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

struct Cache {
    keys: std::sync::Arc<Vec<Key>>,
    fetched: Option<Instant>,
    /// The last successful fetch (URL keys only).
    fetched_ok: Option<Instant>,
}

/// Deliberate defects for the suite's broken-gate tests (feature `faults` only; nothing in a
/// configuration turns them on).
#[cfg(feature = "faults")]
#[derive(Debug, Clone, Copy, Default)]
pub struct AuthFaults {
    /// A token with `alg: none` is taken without a signature.
    pub accept_none: bool,
    /// The audience is not checked (a token for any resource passes).
    pub ignore_audience: bool,
    /// `exp` and `nbf` are not checked.
    pub ignore_lifetime: bool,
    /// The issuer is not checked.
    pub ignore_issuer: bool,
    /// Tools' required scopes are checked only for requests that say `MCP-Protocol-Version:
    /// 2025-11-25` or later: one without the header, or claiming an older version, is served
    /// by an "older handler" that checks none (CVE-2026-11719).
    pub scopes_only_at_latest: bool,
    /// A session is served to any valid token, not only to the principal that opened it
    /// (CVE-2026-52869).
    pub sessions_unbound: bool,
}

/// Validates bearer tokens for one gate.
pub struct Verifier {
    #[cfg(feature = "faults")]
    faults: AuthFaults,
    config: AuthConfig,
    validation: Validation,
    remote: Option<Remote>,
    cache: Mutex<Cache>,
    /// Serializes JWKS fetches, so a burst of unknown key ids fetches once.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("resource", &self.config.resource)
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier for a validated `auth` section; a JWKS file is read now, a URL on first use.
    pub fn new(config: AuthConfig) -> Result<Verifier, AuthError> {
        config.validate()?;
        let algorithms = config
            .algorithms
            .iter()
            .map(|a| allowed_algorithm(a))
            .collect::<Result<Vec<_>, _>>()?;
        let mut validation = Validation::new(algorithms[0]);
        validation.algorithms = algorithms;
        validation.leeway = config.leeway_s;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_audience(&[&config.resource]);
        validation.set_issuer(&[&config.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let keys = match &config.jwks_file {
            Some(path) => {
                let bytes =
                    std::fs::read(path).map_err(|e| AuthError::JwksRead(path.clone(), e))?;
                if bytes.len() > MAX_JWKS {
                    return Err(AuthError::NoKeys);
                }
                parse_jwks(&bytes)?
            }
            None => Vec::new(),
        };
        let remote = match &config.jwks_url {
            Some(url) if url.starts_with("https://") => {
                let extra = config.jwks_ca.as_deref().map(std::path::Path::new);
                let tls = crate::tls::roots(extra)
                    .and_then(crate::tls::client_config)
                    .map_err(AuthError::Tls)?;
                Some(Remote {
                    url: url.clone(),
                    tls: Some(tls),
                })
            }
            Some(url) => Some(Remote {
                url: url.clone(),
                tls: None,
            }),
            None => None,
        };
        Ok(Verifier {
            #[cfg(feature = "faults")]
            faults: AuthFaults::default(),
            config,
            validation,
            remote,
            cache: Mutex::new(Cache {
                keys: std::sync::Arc::new(keys),
                fetched: None,
                fetched_ok: None,
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// The `scopes_only_at_latest` fault: whether a request with this `MCP-Protocol-Version`
    /// header (or none) has its tools' scopes left unchecked.
    #[cfg(feature = "faults")]
    pub(crate) fn skips_scopes_for(&self, header: Option<&[u8]>) -> bool {
        self.faults.scopes_only_at_latest && header.is_none_or(|v| v < b"2025-11-25".as_slice())
    }

    /// The `sessions_unbound` fault.
    #[cfg(feature = "faults")]
    pub(crate) fn sessions_unbound(&self) -> bool {
        self.faults.sessions_unbound
    }

    /// This verifier with deliberate defects.
    #[cfg(feature = "faults")]
    pub fn with_faults(mut self, faults: AuthFaults) -> Verifier {
        eprintln!("{}", crate::faults::FAULTS_MARKER);
        if faults.ignore_audience {
            self.validation.validate_aud = false;
        }
        if faults.ignore_lifetime {
            self.validation.validate_exp = false;
            self.validation.validate_nbf = false;
        }
        if faults.ignore_issuer {
            self.validation.iss = None;
        }
        self.faults = faults;
        self
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// Check a request's credentials: its `Authorization` values (all of them) and whether its
    /// query carries an `access_token`. Fails closed on anything unexpected.
    pub async fn verify(
        &self,
        authorization: &[&[u8]],
        token_in_query: bool,
    ) -> Result<Verified, Refusal> {
        // A token in the query is never honoured (MCP: clients must not send one there): alone
        // it counts as no credentials, beside a header as an ambiguous request.
        let value = match (authorization, token_in_query) {
            ([], _) => return Err(Refusal::Missing),
            ([_], true) => return Err(Refusal::Ambiguous),
            ([one], false) => *one,
            _ => return Err(Refusal::Invalid),
        };
        let token = bearer_token(value).ok_or(Refusal::Invalid)?;
        #[cfg(feature = "faults")]
        if self.faults.accept_none {
            if let Some(v) = unsigned(token) {
                return Ok(v);
            }
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Invalid)?;
        if !self.validation.algorithms.contains(&header.alg) {
            return Err(Refusal::Invalid);
        }
        // The token's algorithm, already on the allow-list, is the only one its key may verify
        // (the library wants one family per check).
        let mut validation = self.validation.clone();
        validation.algorithms = vec![header.alg];
        let keys = self.keys_for(header.kid.as_deref()).await;
        let candidates: Vec<&Key> = keys
            .iter()
            .filter(|k| match (&header.kid, &k.kid) {
                (Some(want), Some(have)) => want == have,
                // A token without a key id is checked only against a set of one key.
                (None, _) => keys.len() == 1,
                (Some(_), None) => false,
            })
            .filter(|k| k.alg.is_none_or(|a| a == header.alg))
            .collect();
        for key in candidates {
            if let Ok(data) = jsonwebtoken::decode::<Claims>(token, &key.key, &validation) {
                // The whole subject identifies the caller (sessions are bound to it).
                let subject = data.claims.sub.unwrap_or_default();
                if subject.is_empty() || subject.len() > MAX_SUBJECT {
                    return Err(Refusal::Invalid);
                }
                let scopes = data
                    .claims
                    .scope
                    .unwrap_or_default()
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                return Ok(Verified { subject, scopes });
            }
        }
        Err(Refusal::Invalid)
    }

    /// The keys to check a token with `kid` against: the file's, or the URL's (fetched when
    /// none are cached, when the cache is old, or when `kid` is unknown and the last fetch is
    /// not too recent).
    async fn keys_for(&self, kid: Option<&str>) -> std::sync::Arc<Vec<Key>> {
        let Some(remote) = &self.remote else {
            return self.cached();
        };
        let stale = |c: &Cache| match c.fetched {
            None => true,
            Some(t) => {
                let age = t.elapsed();
                let unknown =
                    kid.is_some_and(|k| !c.keys.iter().any(|x| x.kid.as_deref() == Some(k)));
                age > JWKS_TTL || (unknown && age > JWKS_MIN_REFRESH)
            }
        };
        if !self.cache.lock().map(|c| stale(&c)).unwrap_or(true) {
            return self.cached();
        }
        let _one = self.fetching.lock().await;
        if !self.cache.lock().map(|c| stale(&c)).unwrap_or(true) {
            return self.cached();
        }
        let fetched = fetch_jwks(remote).await;
        if let Ok(mut c) = self.cache.lock() {
            // A failed fetch keeps the old keys (if any) and waits before trying again.
            if let Ok(keys) = fetched {
                c.keys = std::sync::Arc::new(keys);
                c.fetched_ok = Some(Instant::now());
            }
            c.fetched = Some(Instant::now());
        }
        self.cached()
    }

    /// The keys in force: a file's, or a URL's while the last successful fetch is less than
    /// [`JWKS_MAX_STALE`] old (none after that).
    fn cached(&self) -> std::sync::Arc<Vec<Key>> {
        let remote = self.remote.is_some();
        self.cache
            .lock()
            .ok()
            .filter(|c| !remote || c.fetched_ok.is_some_and(|t| t.elapsed() < JWKS_MAX_STALE))
            .map(|c| c.keys.clone())
            .unwrap_or_else(|| std::sync::Arc::new(Vec::new()))
    }

    /// The `WWW-Authenticate` value of a refusal.
    pub fn challenge(&self, refusal: Refusal) -> String {
        let meta = self.config.metadata_url();
        match refusal {
            Refusal::Missing => format!(r#"Bearer resource_metadata="{meta}""#),
            Refusal::Invalid => {
                format!(r#"Bearer error="invalid_token", resource_metadata="{meta}""#)
            }
            Refusal::Ambiguous => {
                format!(r#"Bearer error="invalid_request", resource_metadata="{meta}""#)
            }
        }
    }

    /// The `WWW-Authenticate` value of a 403 for a call that needs `scope`.
    pub fn scope_challenge(&self, scope: &str) -> String {
        format!(
            r#"Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{}""#,
            self.config.metadata_url()
        )
    }

    /// The Protected Resource Metadata document (RFC 9728 section 2).
    pub fn metadata(&self) -> Vec<u8> {
        let mut doc = serde_json::json!({
            "resource": self.config.resource,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !self.config.scopes_supported.is_empty() {
            doc["scopes_supported"] = serde_json::json!(self.config.scopes_supported);
        }
        serde_json::to_vec(&doc).expect("the metadata document serializes")
    }
}

/// The accept-none fault: the claims of an `alg: none` token, unchecked.
#[cfg(feature = "faults")]
fn unsigned(token: &str) -> Option<Verified> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = token.split('.');
    let header: serde_json::Value =
        serde_json::from_slice(&b64.decode(parts.next()?).ok()?).ok()?;
    if header.get("alg").and_then(serde_json::Value::as_str) != Some("none") {
        return None;
    }
    let claims: Claims = serde_json::from_slice(&b64.decode(parts.next()?).ok()?).ok()?;
    Some(Verified {
        subject: claims.sub.unwrap_or_default(),
        scopes: claims
            .scope
            .unwrap_or_default()
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// The token of `Bearer <token68>` (scheme in any case, one or more spaces: RFC 9110 section
/// 11.4), or `None`.
fn bearer_token(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.len() > MAX_TOKEN {
        return None;
    }
    let body = token.trim_end_matches('=');
    let token68 = body
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    token68.then_some(token)
}

/// The public keys of a JWKS document; symmetric keys are skipped.
fn parse_jwks(bytes: &[u8]) -> Result<Vec<Key>, AuthError> {
    let set: JwkSet = serde_json::from_slice(bytes).map_err(AuthError::JwksParse)?;
    let keys: Vec<Key> = set.keys.iter().filter_map(key_of).collect();
    if keys.is_empty() {
        return Err(AuthError::NoKeys);
    }
    Ok(keys)
}

fn key_of(jwk: &Jwk) -> Option<Key> {
    if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
        return None;
    }
    let alg = match jwk.common.key_algorithm {
        Some(a) => Some(Algorithm::from_str(&a.to_string()).ok()?),
        None => None,
    };
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        key: DecodingKey::from_jwk(jwk).ok()?,
    })
}

/// GET a JWKS over https (or http on loopback), bounded in time and size.
async fn fetch_jwks(remote: &Remote) -> Result<Vec<Key>, AuthError> {
    let by = tokio::time::Instant::now() + JWKS_FETCH_DEADLINE;
    let body = crate::forward::get(&remote.url, MAX_JWKS, remote.tls.clone(), by)
        .await
        .map_err(|_| AuthError::JwksFetch)?;
    parse_jwks(&body)
}
