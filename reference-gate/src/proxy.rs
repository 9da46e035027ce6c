//! The transport-neutral coordinator: one raw message in; canonicalize first, decide exactly once,
//! forward only canonical bytes; answer from a fixed vocabulary.

use crate::canonical::{self, Canonical, Id, Limits, Message};
use crate::config::ErrorCodes;
use crate::era::{self, Claim};
use crate::forward::Forwarder;
use crate::policy::{AgentActionRequest, Decision, Engine};
use crate::trace::{Trace, Tracer};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Protocol versions the gate speaks to clients unless configured otherwise, oldest first.
pub const SUPPORTED_VERSIONS: &[&str] = era::DEFAULT_VERSIONS;
/// How long the engine may take before its silence counts as a denial.
const ENGINE_DEADLINE: Duration = Duration::from_secs(2);

/// What the client presented. Never forwarded; redacted from `Debug`.
#[derive(Clone, Default)]
pub struct Credentials {
    /// The principal the front established (from a verified token), if any.
    pub principal: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(redacted)")
    }
}

/// How a message was handled; the fronts map it to transport status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Refused before any decision: not a canonical message.
    Malformed,
    /// Answered by the gate itself (initialize, ping, unknown method).
    Local,
    /// A notification, accepted and not answered.
    Accepted,
    /// Denied by policy.
    Denied,
    /// Forwarded, and the downstream's answer relayed.
    Forwarded,
    /// Forwarded, but the downstream failed.
    DownstreamFailed,
    /// A modern request the gate will not serve: a version it is not configured for, missing
    /// capabilities, headers that do not match the body (HTTP 400).
    Refused,
    /// A method the gate does not have (a modern HTTP request: 404).
    UnknownMethod,
}

/// The result of one message. The bytes are a private copy and are not shown by `Debug`.
#[derive(Clone)]
pub struct ProxyResult {
    bytes: Option<Vec<u8>>,
    pub handled: Handled,
    /// Safe to log: correlates with the trace line.
    pub decision_id: String,
    /// For an `initialize` answered locally: the version agreed.
    pub negotiated: Option<String>,
    /// Whether the message was served as a modern (per-request `_meta`) one.
    pub modern: bool,
}

impl ProxyResult {
    /// The answer to send, if any (a copy).
    pub fn response_bytes(&self) -> Option<Vec<u8>> {
        self.bytes.clone()
    }
}

impl fmt::Debug for ProxyResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyResult")
            .field("handled", &self.handled)
            .field("decision_id", &self.decision_id)
            .field(
                "bytes",
                &self
                    .bytes
                    .as_ref()
                    .map(|b| format!("<{} bytes redacted>", b.len())),
            )
            .finish()
    }
}

/// Deliberate defects, for proving that the suite's gate cases catch broken gates. All off in
/// every gate built from a configuration; they can only be switched on through
/// [`Proxy::with_faults`], which exists only with the `faults` cargo feature (the suite's tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Forward the client's raw bytes instead of the canonical bytes.
    pub forward_raw: bool,
    /// Accept duplicate member names; the last one wins.
    pub last_duplicate_wins: bool,
    /// Forward each element of a batch array without asking the policy.
    pub batch_skips_policy: bool,
    /// Put the engine's error text in the denial message.
    pub leak_engine_text: bool,
    /// Allow when the engine fails.
    pub allow_on_engine_error: bool,
    /// Relay whatever the downstream answered, unvalidated.
    pub relay_downstream_verbatim: bool,
    /// Read messages loosely (see `canonical::Leniency`).
    pub leniency: canonical::Leniency,
    /// HTTP front: any Content-Type is taken as JSON.
    pub any_media_type: bool,
    /// HTTP front: no body size limit.
    pub no_size_limit: bool,
    /// HTTP front: modern requests' headers are not compared with their bodies.
    pub skip_binding: bool,
}

/// The gate's coordinator.
pub struct Proxy {
    engine: Arc<dyn Engine>,
    forwarder: Arc<dyn Forwarder>,
    limits: Limits,
    codes: ErrorCodes,
    /// The codes for modern requests (outside the JSON-RPC reserved range by default).
    modern_codes: ErrorCodes,
    /// The versions the gate speaks, oldest first.
    versions: Vec<String>,
    tracer: Tracer,
    faults: Faults,
}

fn error_bytes(id: Option<&Id>, code: i64, message: &str) -> Vec<u8> {
    let id = id.map_or_else(|| b"null".to_vec(), Id::to_canonical);
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    out.extend_from_slice(&id);
    out.extend_from_slice(
        format!(r#","error":{{"code":{code},"message":"{message}"}}}}"#).as_bytes(),
    );
    out
}

fn result_bytes(id: &Id, result: &str) -> Vec<u8> {
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    out.extend_from_slice(&id.to_canonical());
    out.extend_from_slice(format!(r#","result":{result}}}"#).as_bytes());
    out
}

/// Fixed messages: nothing else ever reaches a client.
const MSG_MALFORMED: &str = "Invalid Request";
const MSG_DENIED: &str = "Request denied by policy";
const MSG_DOWNSTREAM: &str = "Downstream server failed";
const MSG_NO_METHOD: &str = "Method not found";
const MSG_HEADER_MISMATCH: &str = "Header mismatch";
const MSG_UNSUPPORTED: &str = "Unsupported protocol version";
const MSG_BAD_META: &str = "Invalid params";

fn decision_id() -> String {
    use rand::Rng;
    let b: [u8; 12] = rand::rng().random();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Proxy {
    pub fn new(
        engine: Arc<dyn Engine>,
        forwarder: Arc<dyn Forwarder>,
        limits: Limits,
        codes: ErrorCodes,
        tracer: Tracer,
    ) -> Proxy {
        Proxy {
            engine,
            forwarder,
            limits,
            codes,
            modern_codes: ErrorCodes::modern(),
            versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
            tracer,
            faults: Faults::default(),
        }
    }

    /// The versions the gate speaks and its codes for modern requests.
    pub fn with_versions(mut self, versions: Vec<String>, modern_codes: ErrorCodes) -> Proxy {
        let mut versions = versions;
        versions.sort();
        versions.dedup();
        self.versions = versions;
        self.modern_codes = modern_codes;
        self
    }

    /// The versions the gate speaks, oldest first.
    pub fn versions(&self) -> &[String] {
        &self.versions
    }

    /// Whether the gate speaks `version` as a legacy (initialize) version.
    pub fn speaks_legacy(&self, version: &str) -> bool {
        !era::is_modern(version) && self.versions.iter().any(|v| v == version)
    }

    /// The answer to a modern request whose headers do not match its body (HTTP 400).
    pub fn header_mismatch(&self, c: &Canonical) -> ProxyResult {
        ProxyResult {
            bytes: Some(error_bytes(
                c.message().id(),
                era::HEADER_MISMATCH,
                MSG_HEADER_MISMATCH,
            )),
            handled: Handled::Refused,
            decision_id: decision_id(),
            negotiated: None,
            modern: true,
        }
    }

    /// The unsupported-version error, listing the versions the gate speaks.
    fn unsupported(&self, id: Option<&Id>, requested: Option<&str>) -> Vec<u8> {
        let data = serde_json::json!({"supported": self.versions, "requested": requested});
        let id = id.map_or_else(|| b"null".to_vec(), Id::to_canonical);
        let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        out.extend_from_slice(&id);
        out.extend_from_slice(
            format!(
                r#","error":{{"code":{},"message":"{MSG_UNSUPPORTED}","data":{data}}}}}"#,
                era::UNSUPPORTED_VERSION
            )
            .as_bytes(),
        );
        out
    }

    /// A deliberately broken proxy, for the suite's tests.
    #[cfg(feature = "faults")]
    pub fn with_faults(mut self, faults: Faults) -> Proxy {
        self.faults = faults;
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The defects switched on (none, outside the suite's tests).
    pub fn faults(&self) -> Faults {
        self.faults
    }

    /// Canonicalize only (the fronts need to know what a message is before session checks).
    pub fn parse(&self, raw: &[u8]) -> Result<Canonical, canonical::Malformed> {
        let mut leniency = self.faults.leniency;
        leniency.last_duplicate_wins |= self.faults.last_duplicate_wins;
        if leniency != canonical::Leniency::default() {
            let mut limits = self.limits;
            if self.faults.no_size_limit {
                limits.max_bytes = usize::MAX;
            }
            return canonical::parse_leniently(raw, &limits, leniency);
        }
        if self.faults.no_size_limit {
            let limits = Limits {
                max_bytes: usize::MAX,
                ..self.limits
            };
            return canonical::parse(raw, &limits);
        }
        canonical::parse(raw, &self.limits)
    }

    /// The `batch_skips_policy` fault: a batch array forwarded element by element, no policy.
    /// `None` for anything else, and always `None` in a correct gate.
    pub async fn batch_fault(&self, server_id: &str, raw: &[u8]) -> Option<ProxyResult> {
        if !self.faults.batch_skips_policy {
            return None;
        }
        let Ok(serde_json::Value::Array(items)) = serde_json::from_slice::<serde_json::Value>(raw)
        else {
            return None;
        };
        let mut answers = Vec::new();
        for item in items {
            let bytes = item.to_string().into_bytes();
            if let Ok(a) = self
                .forwarder
                .forward(server_id, &bytes, item.get("id").is_some())
                .await
            {
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&a) {
                    answers.push(v);
                }
            }
        }
        Some(ProxyResult {
            bytes: Some(serde_json::Value::Array(answers).to_string().into_bytes()),
            handled: Handled::Forwarded,
            decision_id: decision_id(),
            negotiated: None,
            modern: false,
        })
    }

    /// The answer to a message that is not canonical.
    pub fn malformed(&self) -> ProxyResult {
        ProxyResult {
            bytes: Some(error_bytes(None, self.codes.malformed, MSG_MALFORMED)),
            handled: Handled::Malformed,
            decision_id: decision_id(),
            negotiated: None,
            modern: false,
        }
    }

    /// Handle one raw message for `server_id`.
    pub async fn handle(
        &self,
        server_id: &str,
        raw: &[u8],
        credentials: &Credentials,
    ) -> ProxyResult {
        if let Some(r) = self.batch_fault(server_id, raw).await {
            return r;
        }
        match self.parse(raw) {
            Ok(c) => self.handle_parsed(server_id, raw, &c, credentials).await,
            Err(_) => self.malformed(),
        }
    }

    /// Handle a message already canonicalized by [`Proxy::parse`]; `raw` is what it came from.
    pub async fn handle_parsed(
        &self,
        server_id: &str,
        raw: &[u8],
        c: &Canonical,
        credentials: &Credentials,
    ) -> ProxyResult {
        let decision = decision_id();
        // The era is the message's own claim; a modern claim must be a version the gate
        // speaks, with the client's capabilities, before anything else happens.
        let claim = era::claim(c);
        let modern = claim != Claim::Legacy;
        let codes = if modern {
            self.modern_codes
        } else {
            self.codes
        };
        let done = |bytes: Option<Vec<u8>>, handled: Handled| ProxyResult {
            bytes,
            handled,
            decision_id: decision.clone(),
            negotiated: None,
            modern,
        };
        let id = c.message().id();
        let refuse = |bytes: Vec<u8>| done(id.map(|_| bytes), Handled::Refused);
        match &claim {
            Claim::Legacy => {}
            Claim::Malformed => {
                return refuse(error_bytes(id, -32602, MSG_BAD_META));
            }
            Claim::Modern(v) => {
                if !(era::is_modern(v) && self.versions.iter().any(|s| s == v)) {
                    return refuse(self.unsupported(id, Some(v)));
                }
                if !era::has_capabilities(c) {
                    return refuse(error_bytes(id, -32602, MSG_BAD_META));
                }
            }
        }
        let (id, method) = match c.message() {
            Message::Notification { .. } => return done(None, Handled::Accepted),
            Message::Request { id, method, .. } => (id, method.as_str()),
        };
        let unknown = || {
            done(
                Some(error_bytes(Some(id), -32601, MSG_NO_METHOD)),
                Handled::UnknownMethod,
            )
        };
        match method {
            "initialize" if modern => unknown(),
            "initialize" => {
                let requested = match c.message() {
                    Message::Request {
                        params: Some(p), ..
                    } => p
                        .iter()
                        .find(|(k, _)| k == "protocolVersion")
                        .and_then(|(_, v)| v.as_str().map(str::to_string)),
                    _ => None,
                };
                let Some(requested) = requested else {
                    return done(
                        Some(error_bytes(Some(id), -32602, "Invalid params")),
                        Handled::Local,
                    );
                };
                let newest_legacy = self
                    .versions
                    .iter()
                    .filter(|v| !era::is_modern(v))
                    .max()
                    .cloned();
                let Some(newest_legacy) = newest_legacy else {
                    // A modern-only gate names what it speaks to a legacy client.
                    return done(
                        Some(self.unsupported(Some(id), Some(&requested))),
                        Handled::Refused,
                    );
                };
                let version = if self.speaks_legacy(&requested) {
                    requested
                } else {
                    newest_legacy
                };
                let result = format!(
                    r#"{{"protocolVersion":"{version}","capabilities":{{"tools":{{"listChanged":false}}}},"serverInfo":{{"name":"reference-gate","version":"{}"}}}}"#,
                    env!("CARGO_PKG_VERSION")
                );
                let mut r = done(Some(result_bytes(id, &result)), Handled::Local);
                r.negotiated = Some(version);
                r
            }
            "server/discover" if modern => {
                let result = serde_json::json!({
                    "resultType": "complete",
                    "supportedVersions": self.versions,
                    "capabilities": {"tools": {"listChanged": false}},
                    "ttlMs": 0,
                    "_meta": {"io.modelcontextprotocol/serverInfo":
                        {"name": "reference-gate", "version": env!("CARGO_PKG_VERSION")}}
                });
                done(Some(result_bytes(id, &result.to_string())), Handled::Local)
            }
            // 2026-07-28 removed `ping` along with the handshake.
            "ping" if modern => unknown(),
            "ping" => done(Some(result_bytes(id, "{}")), Handled::Local),
            "tools/list" => {
                self.tools_list(server_id, c, id, codes, modern, &done)
                    .await
            }
            "tools/call" => {
                let mut r = self
                    .tools_call(server_id, raw, c, credentials, &decision, codes)
                    .await;
                r.modern = modern;
                r
            }
            _ => unknown(),
        }
    }

    async fn tools_list(
        &self,
        server_id: &str,
        c: &Canonical,
        id: &Id,
        codes: ErrorCodes,
        modern: bool,
        done: impl Fn(Option<Vec<u8>>, Handled) -> ProxyResult,
    ) -> ProxyResult {
        let failed = || {
            done(
                Some(error_bytes(Some(id), codes.downstream, MSG_DOWNSTREAM)),
                Handled::DownstreamFailed,
            )
        };
        let Ok(answer) = self
            .forwarder
            .forward(server_id, c.forwarding_bytes(), true)
            .await
        else {
            return failed();
        };
        let Some(serde_json::Value::Object(result)) =
            valid_answer(&answer, id).and_then(|v| v.get("result").cloned())
        else {
            return failed();
        };
        let tools: Vec<serde_json::Value> = result
            .get("tools")
            .and_then(|t| t.as_array())
            .map(|t| {
                t.iter()
                    .filter(|tool| {
                        tool.get("name")
                            .and_then(|n| n.as_str())
                            .is_some_and(|n| self.engine.visible(server_id, n))
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut result = serde_json::json!({ "tools": tools });
        if modern {
            result["resultType"] = serde_json::Value::String("complete".into());
        }
        let result = result.to_string();
        done(Some(result_bytes(id, &result)), Handled::Forwarded)
    }

    /// A `tools/call` request (`c` holds a request, so it has an id).
    async fn tools_call(
        &self,
        server_id: &str,
        raw: &[u8],
        c: &Canonical,
        credentials: &Credentials,
        decision: &str,
        codes: ErrorCodes,
    ) -> ProxyResult {
        let result = |bytes: Vec<u8>, handled: Handled| ProxyResult {
            bytes: Some(bytes),
            handled,
            decision_id: decision.to_string(),
            negotiated: None,
            modern: false,
        };
        let Some(id) = c.message().id() else {
            return result(
                error_bytes(None, codes.malformed, MSG_MALFORMED),
                Handled::Malformed,
            );
        };
        let Some(call) = c.tool_call() else {
            if self.faults.leniency.lax_envelope {
                // The lax-envelope fault: a call the gate cannot read goes through unchecked.
                return match self
                    .forwarder
                    .forward(server_id, c.forwarding_bytes(), true)
                    .await
                {
                    Ok(answer) => result(answer, Handled::Forwarded),
                    Err(_) => result(
                        error_bytes(Some(id), codes.downstream, MSG_DOWNSTREAM),
                        Handled::DownstreamFailed,
                    ),
                };
            }
            // The canonical parser guarantees a tool call here; refuse if not.
            return result(
                error_bytes(None, codes.malformed, MSG_MALFORMED),
                Handled::Malformed,
            );
        };
        let request = AgentActionRequest {
            server_id: server_id.to_string(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            principal: credentials.principal.clone(),
            timestamp: SystemTime::now(),
            request_id: call.id.clone(),
        };
        let (verdict, engine_text) = self.decide(request.clone()).await;
        self.tracer.record(&Trace {
            decision_id: decision,
            server: server_id,
            tool: &call.name,
            principal: credentials.principal.as_deref(),
            verdict: match verdict {
                Decision::Allow => "allow",
                Decision::Deny => "deny",
            },
        });
        if verdict == Decision::Deny {
            let message = match (&engine_text, self.faults.leak_engine_text) {
                (Some(text), true) => format!("{MSG_DENIED}: {}", text.replace(['"', '\\'], "'")),
                _ => MSG_DENIED.to_string(),
            };
            return result(
                error_bytes(Some(id), codes.denied, &message),
                Handled::Denied,
            );
        }
        let failed = || {
            result(
                error_bytes(Some(id), codes.downstream, MSG_DOWNSTREAM),
                Handled::DownstreamFailed,
            )
        };
        let outgoing = if self.faults.forward_raw {
            raw
        } else {
            c.forwarding_bytes()
        };
        let Ok(answer) = self.forwarder.forward(server_id, outgoing, true).await else {
            return failed();
        };
        if self.faults.relay_downstream_verbatim {
            return result(answer, Handled::Forwarded);
        }
        // Relay only a well-formed success answer for this id; a downstream error is a failure.
        match valid_answer(&answer, id) {
            Some(v) if v.get("result").is_some_and(|r| r.is_object()) => {
                let relayed = serde_json::json!({"jsonrpc": "2.0", "id": id_value(id), "result": v["result"]});
                result(relayed.to_string().into_bytes(), Handled::Forwarded)
            }
            _ => failed(),
        }
    }

    /// Ask the engine once, off the async threads, bounded; an error, a panic or silence denies.
    /// The engine's error text is returned for the trace-free fault path only.
    async fn decide(&self, request: AgentActionRequest) -> (Decision, Option<String>) {
        let failed = if self.faults.allow_on_engine_error {
            Decision::Allow
        } else {
            Decision::Deny
        };
        let engine = self.engine.clone();
        let ask = move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.decide(&request)))
        };
        let answer = if self.engine.runs_inline() {
            // A pure engine (the rule engine): no thread hand-off, no deadline needed.
            Ok(Ok(ask()))
        } else {
            tokio::time::timeout(ENGINE_DEADLINE, tokio::task::spawn_blocking(ask)).await
        };
        match answer {
            Ok(Ok(Ok(Ok(d)))) => (d, None),
            Ok(Ok(Ok(Err(e)))) => (failed, Some(e.0)),
            _ => (failed, None),
        }
    }
}

fn id_value(id: &Id) -> serde_json::Value {
    match id {
        Id::Str(s) => serde_json::Value::String(s.clone()),
        Id::Int(i) => serde_json::Value::from(*i),
    }
}

/// A downstream answer that is one JSON-RPC response for `id`, with exactly one of result and
/// error.
fn valid_answer(bytes: &[u8], id: &Id) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let ok = v.get("jsonrpc") == Some(&serde_json::Value::String("2.0".into()))
        && v.get("id") == Some(&id_value(id))
        && (v.get("result").is_some() != v.get("error").is_some());
    ok.then_some(v)
}
