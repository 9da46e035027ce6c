//! The reference gate as a product: bearer tokens, decision traces, and its error table, through
//! its own HTTP front (the catalogue covers the rest through the gate profile).

use crate::util::InProcessGate;
use crate::util::{Check, Status};
use mcp_gauntlet::target::WITNESS_POLICY;
use reference_gate::config::GateConfig;
use std::io::{Read, Write};

struct Running {
    /// Keeps the witness and the gate running.
    _gate: InProcessGate,
    addr: std::net::SocketAddr,
    trace: std::path::PathBuf,
}

fn start(edit: impl FnOnce(&mut GateConfig)) -> Running {
    let gate = InProcessGate::start(
        |cfg, dir| {
            cfg.trace = Some(dir.join("trace.jsonl").display().to_string());
            edit(cfg);
        },
        |cfg| reference_gate::cli::build_proxy(cfg).unwrap(),
    );
    let (addr, trace) = (gate.addr, gate.dir.path().join("trace.jsonl"));
    Running {
        _gate: gate,
        addr,
        trace,
    }
}

/// POST `body` with `extra` header lines; returns the status and the raw response.
fn post(addr: std::net::SocketAddr, extra: &str, body: &str) -> (u16, String) {
    let head = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}"
    );
    send(addr, &head, body)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn session(resp: &str) -> String {
    resp.lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn bearer_tokens_are_checked_by_digest() {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(b"good-token")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let gate = start(|c| c.bearer_sha256 = vec![digest]);
    let (status, resp) = post(gate.addr, "", INIT);
    assert_eq!(status, 401);
    assert!(resp
        .to_ascii_lowercase()
        .contains("www-authenticate: bearer"));
    assert_eq!(
        post(gate.addr, "Authorization: Bearer bad-token\r\n", INIT).0,
        401
    );
    assert_eq!(
        post(gate.addr, "Authorization: Basic Z29vZC10b2tlbg==\r\n", INIT).0,
        401
    );
    assert_eq!(
        post(gate.addr, "Authorization: bearer good-token\r\n", INIT).0,
        200
    );
}

#[test]
fn decisions_are_traced_without_arguments_or_credentials() {
    let gate = start(|_| {});
    let (_, resp) = post(gate.addr, "", INIT);
    let sid = session(&resp);
    let h = format!("Mcp-Session-Id: {sid}\r\nAuthorization: Bearer client-secret-777\r\n");
    let call = |name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{name}","arguments":{{"text":"argument-secret-555"}}}}}}"#
        )
    };
    let (status, resp) = post(gate.addr, &h, &call("echo"));
    assert_eq!(status, 200, "{resp}");
    let (status, resp) = post(gate.addr, &h, &call("delete_everything"));
    assert_eq!(status, 200);
    assert!(resp.contains("-32001"));
    let trace = std::fs::read_to_string(&gate.trace).unwrap();
    let lines: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one line per decision: {trace}");
    assert_eq!(lines[0]["verdict"], "allow");
    assert_eq!(lines[1]["verdict"], "deny");
    assert_eq!(lines[1]["tool"], "delete_everything");
    assert!(lines
        .iter()
        .all(|l| l["decision_id"].as_str().is_some_and(|d| d.len() == 24)));
    assert!(!trace.contains("argument-secret-555") && !trace.contains("client-secret-777"));
}

#[test]
fn config_refuses_colliding_error_codes() {
    let mut cfg: GateConfig = serde_json::from_str(WITNESS_POLICY).unwrap();
    cfg.errors.denied = cfg.errors.downstream;
    assert!(matches!(
        cfg.validate(),
        Err(reference_gate::config::ConfigError::Codes)
    ));
    cfg.errors.denied = -32601;
    assert!(matches!(
        cfg.validate(),
        Err(reference_gate::config::ConfigError::Codes)
    ));
}

/// An engine that panics or fails on the canary, run inline or on a blocking thread.
struct Faulty {
    inline: bool,
    panics: bool,
}

impl reference_gate::policy::Engine for Faulty {
    fn decide(
        &self,
        r: &reference_gate::policy::AgentActionRequest,
    ) -> Result<reference_gate::policy::Decision, reference_gate::policy::EngineError> {
        if r.tool == "delete_everything" {
            if self.panics {
                panic!("engine bug");
            }
            return Err(reference_gate::policy::EngineError("backend down".into()));
        }
        Ok(reference_gate::policy::Decision::Allow)
    }
    fn runs_inline(&self) -> bool {
        self.inline
    }
}

#[test]
fn an_engine_that_panics_or_fails_denies_inline_or_not() {
    use reference_gate::fuzzing::{forwarded_by, RecordingForwarder};
    use reference_gate::proxy::Proxy;
    let denied = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_everything","arguments":{}}}"#;
    let allowed = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#;
    for inline in [true, false] {
        for panics in [true, false] {
            let fwd = std::sync::Arc::new(RecordingForwarder::default());
            let proxy = Proxy::new(
                std::sync::Arc::new(Faulty { inline, panics }),
                fwd.clone(),
                Default::default(),
                Default::default(),
                reference_gate::trace::Tracer::none(),
            );
            assert!(
                forwarded_by(&proxy, &fwd, denied).is_empty(),
                "inline {inline}, panics {panics}"
            );
            assert_eq!(forwarded_by(&proxy, &fwd, allowed).len(), 1);
        }
    }
}

/// A 2026-07-28 call with its headers right.
fn modern_call(tool: &str) -> (String, String) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"hi"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let headers = format!(
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n"
    );
    (headers, body)
}

fn error_code(resp: &str) -> Option<i64> {
    let body = resp.split("\r\n\r\n").nth(1)?;
    let v: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    v["error"]["code"].as_i64()
}

fn witness_received(gate: &Running, tool: &str) -> bool {
    std::fs::read_to_string(gate._gate.witness_log.as_path())
        .unwrap_or_default()
        .contains(&format!("\"{tool}\""))
}

#[test]
fn the_gate_serves_only_the_versions_it_is_configured_for() {
    // Legacy only: a 2026-07-28 request is refused with -32022 naming what the gate speaks, and
    // nothing reaches the downstream; initialize still works.
    let legacy = start(|c| c.versions = vec![reference_gate::Version::new(2025, 11, 25)]);
    let (headers, body) = modern_call("echo");
    let (status, resp) = post(legacy.addr, &headers, &body);
    assert_eq!(status, 400, "{resp}");
    assert_eq!(error_code(&resp), Some(-32022));
    assert!(resp.contains(r#""supported":["2025-11-25"]"#), "{resp}");
    assert!(!witness_received(&legacy, "echo"));
    assert_eq!(post(legacy.addr, "", INIT).0, 200);

    // Modern only: initialize is told the supported versions; a modern call is forwarded with
    // the headers the downstream checks (the witness refuses unbound requests), statelessly.
    let modern = start(|c| c.versions = vec![reference_gate::Version::new(2026, 7, 28)]);
    let (status, resp) = post(modern.addr, "", INIT);
    assert_eq!(status, 400, "{resp}");
    assert_eq!(error_code(&resp), Some(-32022));
    assert!(resp.contains(r#""supported":["2026-07-28"]"#), "{resp}");
    let (status, resp) = post(modern.addr, &headers, &body);
    assert_eq!(status, 200, "{resp}");
    assert!(resp.contains(r#""text":"hi""#), "{resp}");
    assert!(
        !resp.to_ascii_lowercase().contains("mcp-session-id"),
        "{resp}"
    );
    assert!(witness_received(&modern, "echo"));
}

#[test]
fn modern_denials_and_failures_use_codes_outside_the_reserved_range() {
    let gate = start(|_| {});
    let (headers, body) = modern_call("delete_everything");
    let (status, resp) = post(gate.addr, &headers, &body);
    assert_eq!(status, 200, "{resp}");
    assert_eq!(error_code(&resp), Some(-31001));
    // The configured table is used, and a table inside -32099..-32000 is refused at load.
    let mut cfg: GateConfig = serde_json::from_str(WITNESS_POLICY).unwrap();
    cfg.errors_modern.denied = -32010;
    assert!(matches!(
        cfg.validate(),
        Err(reference_gate::config::ConfigError::ModernCodes)
    ));
    // A legacy session keeps the legacy table.
    let (_, resp) = post(gate.addr, "", INIT);
    let sid = session(&resp);
    let call = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"delete_everything","arguments":{}}}"#;
    let (_, resp) = post(gate.addr, &format!("Mcp-Session-Id: {sid}\r\n"), call);
    assert_eq!(error_code(&resp), Some(-32001), "{resp}");
}

#[test]
fn a_modern_claim_never_skips_the_session_of_a_legacy_request() {
    let gate = start(|_| {});
    // A legacy body (no _meta) under 2026 headers, without a session: -32020, not served.
    let call = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#;
    let (status, resp) = post(
        gate.addr,
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
        call,
    );
    assert_eq!(status, 400, "{resp}");
    assert_eq!(error_code(&resp), Some(-32020));
    // A 2026 body under the session's legacy version header: -32020 too.
    let (_, resp) = post(gate.addr, "", INIT);
    let sid = session(&resp);
    let (_, body) = modern_call("echo");
    let (status, resp) = post(
        gate.addr,
        &format!("Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n"),
        &body,
    );
    assert_eq!(status, 400, "{resp}");
    assert_eq!(error_code(&resp), Some(-32020));
    assert!(!witness_received(&gate, "echo"));
}

/// The JSON-RPC messages in an HTTP answer (a JSON body, or SSE `data` values).
fn messages(resp: &str) -> Vec<serde_json::Value> {
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
    // A chunked body: keep the lines that are JSON or SSE data.
    let mut out = Vec::new();
    for line in body.lines() {
        let text = line.strip_prefix("data:").map(str::trim).unwrap_or(line);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            if v.is_object() {
                out.push(v);
            }
        }
    }
    out
}

fn with_session(s: &str) -> String {
    format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n")
}

fn witness_lines(gate: &Running) -> Vec<serde_json::Value> {
    let log = gate._gate.witness_log.clone();
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_server_request_is_answered_only_from_the_session_it_was_sent_to() {
    let gate = start(|cfg| {
        cfg.policy.rules.push(
            serde_json::from_str(r#"{"effect":"allow","server_request":"sampling/createMessage"}"#)
                .unwrap(),
        )
    });
    let init = INIT.replace(r#""capabilities":{}"#, r#""capabilities":{"sampling":{}}"#);
    let a = session(&post(gate.addr, "", &init).1);
    let b = session(&post(gate.addr, "", &init).1);
    assert!(!a.is_empty() && !b.is_empty() && a != b);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_client","arguments":{}}}"#;
    let (status, out) = post(gate.addr, &with_session(&a), call);
    assert_eq!(status, 200, "{out}");
    let seen = messages(&out);
    let asked = seen
        .iter()
        .find(|m| m["method"] == "sampling/createMessage")
        .unwrap_or_else(|| panic!("no sampling request relayed: {out}"));
    // The id is the gate's own, never the downstream's.
    let gate_id = asked["id"].as_str().unwrap().to_string();
    assert!(gate_id.starts_with("gate-"), "{asked}");
    assert!(
        seen.iter().any(|m| m["id"] == 2 && m["result"].is_object()),
        "{out}"
    );
    let reply = format!(
        r#"{{"jsonrpc":"2.0","id":"{gate_id}","result":{{"role":"assistant","content":{{"type":"text","text":"from-a"}},"model":"m"}}}}"#
    );
    // Another session naming that id is refused, and nothing goes downstream.
    let (status, out) = post(
        gate.addr,
        &with_session(&b),
        &reply.replace("from-a", "from-b"),
    );
    assert_eq!(status, 400, "{out}");
    // The session it was sent to answers it once.
    assert_eq!(post(gate.addr, &with_session(&a), &reply).0, 202);
    assert_eq!(post(gate.addr, &with_session(&a), &reply).0, 400);
    let answers: Vec<String> = witness_lines(&gate)
        .iter()
        .filter_map(|e| e["raw"].as_str().map(str::to_string))
        .filter(|raw| raw.contains("\"result\"") && !raw.contains("\"method\""))
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(
        answers[0].contains("from-a") && answers[0].contains("witness-sample-"),
        "{answers:?}"
    );
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario against one running gate, step by step: lists, then each use, then what reached the witness"
)]
fn resources_and_prompts_are_listed_and_used_under_the_same_rules() {
    let gate = start(|_| {});
    let s = session(&post(gate.addr, "", INIT).1);
    let ask = |body: &str| {
        let (_, out) = post(gate.addr, &with_session(&s), body);
        messages(&out).pop().unwrap_or_default()
    };
    let list = ask(r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#);
    let uris: Vec<&str> = list["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(uris, ["test://public/readme"], "{list}");
    let read = ask(
        r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"TEST://public/r%65adme"}}"#,
    );
    // Judged and forwarded in one spelling.
    assert_eq!(
        read["result"]["contents"][0]["uri"], "test://public/readme",
        "{read}"
    );
    let denied = ask(
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"test://secret/key"}}"#,
    );
    assert_eq!(denied["error"]["code"], -32001, "{denied}");
    let prompts = ask(r#"{"jsonrpc":"2.0","id":5,"method":"prompts/list"}"#);
    assert_eq!(
        prompts["result"]["prompts"].as_array().map(Vec::len),
        Some(1),
        "{prompts}"
    );
    let greet = ask(r#"{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"greet"}}"#);
    assert!(greet["result"]["messages"].is_array(), "{greet}");
    // A completion is judged on the same one spelling of the URI: dot segments are refused
    // before any decision.
    let completion = ask(
        r#"{"jsonrpc":"2.0","id":8,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"test://public/../secret/key"},"argument":{"name":"x","value":""}}}"#,
    );
    assert_eq!(completion["error"]["code"], -32602, "{completion}");
    // No rule allows logging/setLevel: it does not exist here.
    let level =
        ask(r#"{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"info"}}"#);
    assert_eq!(level["error"]["code"], -32601, "{level}");
    let forwarded: Vec<String> = witness_lines(&gate)
        .iter()
        .filter_map(|e| e["raw"].as_str().map(str::to_string))
        .collect();
    assert!(
        !forwarded
            .iter()
            .any(|r| r.contains("secret") || r.contains("logging/")),
        "{forwarded:?}"
    );
    assert!(
        forwarded
            .iter()
            .any(|r| r.contains(r#""uri":"test://public/readme""#)),
        "{forwarded:?}"
    );
    // Each use was decided once and traced, with its kind.
    let traces: Vec<serde_json::Value> = std::fs::read_to_string(&gate.trace)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let decided = |kind: &str, subject: &str, verdict: &str| {
        traces
            .iter()
            .filter(|t| t["kind"] == kind && t["tool"] == subject && t["verdict"] == verdict)
            .count()
    };
    assert_eq!(
        decided("resource", "test://secret/key", "deny"),
        1,
        "{traces:?}"
    );
    assert_eq!(
        decided("resource", "test://public/readme", "allow"),
        1,
        "{traces:?}"
    );
    assert_eq!(decided("prompt", "greet", "allow"), 1, "{traces:?}");
    assert_eq!(
        decided("method", "logging/setLevel", "deny"),
        1,
        "{traces:?}"
    );
}

#[test]
fn a_call_that_times_out_is_cancelled_downstream() {
    let gate = start(|cfg| cfg.deadlines.request_ms = 400);
    let s = session(&post(gate.addr, "", INIT).1);
    let call = r#"{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"fault_hang","arguments":{}}}"#;
    let (_, out) = post(gate.addr, &with_session(&s), call);
    let answer = messages(&out).pop().unwrap_or_default();
    assert_eq!(answer["id"], "slow-1", "{out}");
    assert_eq!(answer["error"]["code"], -32002, "{out}");
    // GATE-DOWN-04: the downstream is told, naming the request it was sent, before the client
    // hears of the failure (a later cancellation would land in the client's next exchange).
    let cancelled = witness_lines(&gate).iter().any(|e| {
        e["raw"].as_str().is_some_and(|raw| {
            raw.contains("notifications/cancelled") && raw.contains(r#""requestId":"slow-1""#)
        })
    });
    assert!(cancelled, "{:?}", witness_lines(&gate));
}

/// A second listening stream on one session, while the first is open: the downstream refuses
/// it with 409 and so does the gate (the downstream did not fail: no 502).
#[test]
fn a_second_listening_stream_is_refused_as_the_downstream_refuses_it() {
    let gate = start(|_| {});
    let (_, resp) = post(gate.addr, "", INIT);
    let sid = session(&resp);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, _) = post(gate.addr, &with_session(&sid), initialized);
    assert_eq!(status, 202);
    let head = format!(
        "GET /mcp HTTP/1.1\r\nAccept: text/event-stream\r\n{}",
        with_session(&sid)
    );
    // The first stream stays open: only its status line is read.
    let mut first = std::net::TcpStream::connect(gate.addr).unwrap();
    first
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let request = format!("{head}Host: {}\r\n\r\n", gate.addr);
    first.write_all(request.as_bytes()).unwrap();
    let mut status_line = [0u8; 12];
    first.read_exact(&mut status_line).unwrap();
    assert_eq!(&status_line[9..12], b"200");
    let (status, resp) = send(gate.addr, &head, "");
    assert_eq!(status, 409, "{resp}");
}

/// Send `head` (request line and headers, without the final blank line) and `body`.
fn send(addr: std::net::SocketAddr, head: &str, body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let req = format!(
        "{head}Host: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
}

fn challenge(resp: &str) -> Option<String> {
    resp.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .starts_with("www-authenticate:")
            .then(|| l["www-authenticate:".len()..].trim().to_string())
    })
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario against one running gate, step by step: every bad token, then scopes, then what reached the witness and the trace"
)]
fn jwt_access_tokens_are_checked_as_an_oauth_resource_server() {
    use mcp_gauntlet::auth::{AuthInputs, Issuer};
    let keys = tempfile::tempdir().unwrap();
    let issuer = Issuer::generate("https://issuer.test", "k1").unwrap();
    let jwks = keys.path().join("jwks.json");
    std::fs::write(&jwks, issuer.jwks()).unwrap();
    let resource = "https://gate.test/mcp";
    let auth: reference_gate::auth::AuthConfig = serde_json::from_value(serde_json::json!({
        "resource": resource,
        "issuer": "https://issuer.test",
        "jwks_file": jwks.display().to_string(),
        "scopes_supported": ["mcp", "math"],
    }))
    .unwrap();
    let gate = start(move |cfg| {
        cfg.auth = Some(auth);
        // `add` needs the `math` scope (the witness policy allows it without).
        cfg.policy
            .rules
            .retain(|r| r.tool.as_deref() != Some("add"));
        cfg.policy.rules.push(
            serde_json::from_str(r#"{"effect":"allow","tool":"add","scope":"math"}"#).unwrap(),
        );
    });
    let inputs = AuthInputs {
        issuer: Some((issuer, resource.to_string())),
        scopes: "mcp".into(),
        ..AuthInputs::default()
    };
    let tokens: std::collections::BTreeMap<&str, String> = inputs
        .tokens()
        .unwrap()
        .iter()
        .map(|(kind, token)| (kind.placeholder(), token.to_string()))
        .collect();
    let bearer = |t: &str| format!("Authorization: Bearer {t}\r\n");
    let meta = "https://gate.test/.well-known/oauth-protected-resource/mcp";

    // No credentials: 401 and a challenge naming the metadata, without an error code.
    let (status, resp) = post(gate.addr, "", INIT);
    assert_eq!(status, 401);
    assert_eq!(
        challenge(&resp).as_deref(),
        Some(format!(r#"Bearer resource_metadata="{meta}""#).as_str())
    );
    // Every bad token (every minted one but the good one and another user's): 401 invalid_token.
    let bad = mcp_gauntlet::auth::TOKEN_PLACEHOLDERS
        .iter()
        .filter(|n| !matches!(**n, "token_good" | "token_other_subject"));
    for &name in bad {
        let (status, resp) = post(gate.addr, &bearer(&tokens[name]), INIT);
        assert_eq!(status, 401, "{name}: {resp}");
        let c = challenge(&resp).unwrap_or_default();
        assert!(c.contains(r#"error="invalid_token""#), "{name}: {c}");
        assert!(
            !resp.contains(&tokens[name]),
            "{name}: the token is never echoed"
        );
    }
    let good = &tokens["token_good"];
    for malformed in [
        format!("Authorization: Basic {good}\r\n"),
        format!("Authorization: Bearer {good}\r\nAuthorization: Bearer {good}\r\n"),
        "Authorization: Bearer\r\n".to_string(),
        format!("Authorization: Bearer {}\r\n", "a".repeat(9000)),
    ] {
        assert_eq!(post(gate.addr, &malformed, INIT).0, 401, "{malformed:.60}");
    }
    // In the query string only: no credentials. Beside a header: ambiguous, 400.
    let query_head = format!(
        "POST /mcp?access_token={good} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    );
    assert_eq!(send(gate.addr, &query_head, INIT).0, 401);
    assert_eq!(
        send(gate.addr, &format!("{query_head}{}", bearer(good)), INIT).0,
        400
    );
    // The good token, in any case of the scheme name, after one or more spaces (RFC 9110 11.4).
    assert_eq!(
        post(
            gate.addr,
            &format!("Authorization: Bearer  {good}\r\n"),
            INIT
        )
        .0,
        200
    );
    let (status, resp) = post(
        gate.addr,
        &format!("Authorization: bearer {good}\r\n"),
        INIT,
    );
    assert_eq!(status, 200, "{resp}");
    let sid = session(&resp);
    // Sessions are not authentication: the session alone is refused.
    let call = |tool: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"a":1,"b":2,"text":"hi"}}}}}}"#
        )
    };
    assert_eq!(post(gate.addr, &with_session(&sid), &call("echo")).0, 401);
    let (status, resp) = post(
        gate.addr,
        &format!("{}{}", with_session(&sid), bearer(good)),
        &call("echo"),
    );
    assert_eq!(status, 200, "{resp}");
    assert!(messages(&resp)[0].get("result").is_some(), "{resp}");
    // A scope the token lacks: 403, naming the scope.
    let (status, resp) = post(
        gate.addr,
        &format!("{}{}", with_session(&sid), bearer(good)),
        &call("add"),
    );
    assert_eq!(status, 403, "{resp}");
    let c = challenge(&resp).unwrap_or_default();
    assert!(
        c.contains(r#"error="insufficient_scope""#) && c.contains(r#"scope="math""#),
        "{c}"
    );
    assert!(!witness_lines(&gate).iter().any(|e| e["raw"]
        .as_str()
        .is_some_and(|r| r.contains(r#""name":"add""#))));
    // With the scope, the call goes through.
    let Some((issuer, aud)) = &inputs.issuer else {
        unreachable!()
    };
    let math = issuer.mint(&issuer.claims(aud, "mcp math")).unwrap();
    let (status, resp) = post(
        gate.addr,
        &format!("{}{}", with_session(&sid), bearer(&math)),
        &call("add"),
    );
    assert_eq!(status, 200, "{resp}");
    assert!(messages(&resp)[0].get("result").is_some(), "{resp}");
    // No token reached the downstream or the trace.
    let seen = std::fs::read_to_string(&gate._gate.witness_log).unwrap_or_default();
    let trace = std::fs::read_to_string(&gate.trace).unwrap_or_default();
    for t in tokens.values().chain([&math]) {
        assert!(!seen.contains(t.as_str()) && !trace.contains(t.as_str()));
    }
    // The metadata, without credentials, at its well-known path.
    let (status, resp) = send(
        gate.addr,
        "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\n",
        "",
    );
    assert_eq!(status, 200, "{resp}");
    let doc = messages(&resp).pop().unwrap_or_default();
    assert_eq!(doc["resource"], resource);
    assert_eq!(doc["authorization_servers"][0], "https://issuer.test");
}

/// A JWKS served over loopback HTTP by a thread, counting the requests it answers.
struct JwksServer {
    url: String,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn serve_jwks(body: String) -> JwksServer {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        // A bounded number of answers: the thread ends when the test has long stopped asking.
        for stream in listener.incoming().take(16) {
            let Ok(mut s) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let _ = s.read(&mut buf);
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    JwksServer { url, hits }
}

#[test]
fn a_jwks_url_is_fetched_once_and_cached_and_a_missing_one_refuses_every_token() {
    use mcp_gauntlet::auth::Issuer;
    let issuer = Issuer::generate("https://issuer.test", "k1").unwrap();
    let jwks = serve_jwks(issuer.jwks());
    let config = |url: &str| -> reference_gate::auth::AuthConfig {
        serde_json::from_value(serde_json::json!({
            "resource": "https://gate.test/mcp",
            "issuer": "https://issuer.test",
            "jwks_url": url,
        }))
        .unwrap()
    };
    let auth = config(&jwks.url);
    let gate = start(move |cfg| cfg.auth = Some(auth));
    let token = issuer
        .mint(&issuer.claims("https://gate.test/mcp", ""))
        .unwrap();
    let bearer = format!("Authorization: Bearer {token}\r\n");
    for _ in 0..3 {
        assert_eq!(post(gate.addr, &bearer, INIT).0, 200);
    }
    assert_eq!(jwks.hits.load(std::sync::atomic::Ordering::SeqCst), 1);

    // Nothing listening where the keys should be: no token is good (fail closed).
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/jwks.json", dead.local_addr().unwrap());
    drop(dead);
    let auth = config(&dead_url);
    let gate = start(move |cfg| cfg.auth = Some(auth));
    assert_eq!(post(gate.addr, &bearer, INIT).0, 401);

    // A JWKS over the 256 KiB bound is not read: no token is good.
    let padding = "x".repeat(300 * 1024);
    let big = issuer
        .jwks()
        .replacen('{', &format!("{{\"padding\":\"{padding}\","), 1);
    let jwks_big = serve_jwks(big);
    let auth = config(&jwks_big.url);
    let gate = start(move |cfg| cfg.auth = Some(auth));
    assert_eq!(post(gate.addr, &bearer, INIT).0, 401);

    // Plain http is for loopback only; a configuration naming another host is refused.
    let remote = config("http://keys.example/jwks.json");
    assert!(matches!(
        remote.validate(),
        Err(reference_gate::auth::AuthError::PlainRemote)
    ));
}

/// One handshake per connection over stdio too (MCP-LIFE-09): a second `initialize` on an
/// initialized stdio session is refused, not answered as a new handshake at another version.
/// The embedded default's gate lanes over stdio, strict, on that case (the HTTP front refuses
/// it for carrying a session).
#[test]
fn a_second_initialize_over_stdio_is_refused() {
    let out = assert_cmd::Command::new(crate::util::bin())
        .args(["run", "--strict", "--report"])
        .arg(std::env::temp_dir().join(format!("second-init-{}.json", std::process::id())))
        .args([
            "--",
            "--exact",
            "lifecycle/second-initialize-on-initialized-session",
        ])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let ran: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("[gate/stdio") && l.ends_with(" ok"))
        .collect();
    assert_eq!(ran.len(), 2, "both legacy versions over stdio: {stdout}");
}

/// A gate in front of stdio witnesses started with `witness_args` (a child per client
/// session) whose sessions go idle after `idle_ms`, at most `max` at once; each child writes its
/// pid to the returned file.
fn stdio_gate(witness_args: &str, idle_ms: u64, max: usize) -> (Running, std::path::PathBuf) {
    let pids = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let pids = pids.keep().unwrap();
    let script = format!(
        "echo $$ >> '{}'; exec '{}' witness --stdio {witness_args}",
        pids.display(),
        crate::util::bin().display()
    );
    let gate = start(|cfg| {
        cfg.servers.insert(
            cfg.server.clone(),
            reference_gate::config::Server::Command(vec!["sh".into(), "-c".into(), script]),
        );
        cfg.deadlines.session_idle_ms = idle_ms;
        cfg.deadlines.max_sessions = max;
    });
    (gate, pids)
}

fn pids(file: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn alive(pid: u32) -> bool {
    // A child the gate killed is reaped by it (`wait`), so its /proc entry goes.
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Wait (at most 20 s) until `pid` has ended.
fn ends(pid: u32) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

const ECHO: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;

/// A client that never says DELETE costs nothing once idle: its session is forgotten and its
/// downstream child ends; a session in use is kept.
#[test]
fn an_idle_session_is_forgotten_and_its_stdio_child_ends() {
    let (gate, file) = stdio_gate("", 300, 100);
    let s = session(&post(gate.addr, "", INIT).1);
    let (status, out) = post(gate.addr, &with_session(&s), ECHO);
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("\"hi\""), "{out}");
    let child = *pids(&file).first().expect("the session's child started");
    assert!(ends(child), "the idle session's child {child} still runs");
    let (status, out) = post(gate.addr, &with_session(&s), ECHO);
    assert_eq!(status, 404, "a forgotten session is unknown: {out}");
    let _ = std::fs::remove_file(file);
}

/// At the cap the least recently used session goes (its child with it), not an arbitrary one.
#[test]
fn at_the_session_cap_the_least_recently_used_session_goes() {
    let (gate, file) = stdio_gate("", 600_000, 2);
    // A session's child starts when it is first needed (the gate answers a repeated
    // initialize from the first one's answer).
    let opened = || {
        let s = session(&post(gate.addr, "", INIT).1);
        assert_eq!(post(gate.addr, &with_session(&s), ECHO).0, 200);
        s
    };
    let a = opened();
    let b = opened();
    assert_eq!(pids(&file).len(), 2, "a child per session");
    // `a` is used again, so `b` is the least recently used when `c` opens.
    assert_eq!(post(gate.addr, &with_session(&a), ECHO).0, 200);
    let c = opened();
    let started = pids(&file);
    assert_eq!(started.len(), 3, "{started:?}");
    assert!(ends(started[1]), "b's child still runs");
    assert!(alive(started[0]) && alive(started[2]), "{started:?}");
    assert_eq!(post(gate.addr, &with_session(&b), ECHO).0, 404);
    assert_eq!(post(gate.addr, &with_session(&a), ECHO).0, 200);
    assert_eq!(post(gate.addr, &with_session(&c), ECHO).0, 200);
    let _ = std::fs::remove_file(file);
}

/// GATE-DOWN-03: a downstream's JSON-RPC error reaches the client with its code and the gate's
/// own words (none of the downstream's text or data); a gate configured to flatten answers
/// with its downstream-failure code.
#[test]
fn a_downstream_error_passes_its_code_not_its_text() {
    let leak = r#"{"jsonrpc":"2.0","id":36,"method":"tools/call","params":{"name":"fault_leak","arguments":{}}}"#;
    for (flatten, code, message) in [
        (false, -32603, "Internal error"),
        (true, -32002, "Downstream server failed"),
    ] {
        let gate = start(|cfg| {
            if flatten {
                cfg.errors.downstream_errors = reference_gate::config::DownstreamErrors::Flatten;
            }
        });
        let s = session(&post(gate.addr, "", INIT).1);
        let (status, out) = post(gate.addr, &with_session(&s), leak);
        assert_eq!(status, 200, "{out}");
        let answer = messages(&out).pop().unwrap_or_default();
        assert_eq!(answer["id"], 36, "{out}");
        assert_eq!(answer["error"]["code"], code, "{out}");
        assert_eq!(answer["error"]["message"], message, "{out}");
        assert!(answer["error"].get("data").is_none(), "{out}");
        assert!(
            !out.contains("/srv/") && !out.contains("witness-internal-token"),
            "{out}"
        );
    }
}

/// The lists a gate filters and the server requests it decides are traced like every other
/// decision: the exchange's decision id, the subject, the verdict (and for a list, how many
/// items were shown and hidden).
#[test]
fn list_filtering_and_server_requests_are_traced() {
    let gate = start(|_| {});
    let init = INIT.replace(r#""capabilities":{}"#, r#""capabilities":{"sampling":{}}"#);
    let s = session(&post(gate.addr, "", &init).1);
    let list = r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}"#;
    let (status, out) = post(gate.addr, &with_session(&s), list);
    assert_eq!(status, 200, "{out}");
    assert!(!out.contains("delete_everything"), "{out}");
    let ask = r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ask_client","arguments":{}}}"#;
    let (status, out) = post(gate.addr, &with_session(&s), ask);
    assert_eq!(status, 200, "{out}");
    assert!(!out.contains("sampling/createMessage"), "{out}");
    let traces: Vec<serde_json::Value> = std::fs::read_to_string(&gate.trace)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let listed = traces
        .iter()
        .find(|t| t["kind"] == "list")
        .unwrap_or_else(|| panic!("no list trace: {traces:?}"));
    assert_eq!(listed["tool"], "tools/list");
    assert_eq!(listed["verdict"], "filter");
    assert_eq!(listed["hidden"], 1, "the canary: {listed}");
    assert!(listed["shown"].as_u64().is_some_and(|n| n >= 2), "{listed}");
    let asked = traces
        .iter()
        .find(|t| t["kind"] == "server_request")
        .unwrap_or_else(|| panic!("no server-request trace: {traces:?}"));
    assert_eq!(asked["tool"], "sampling/createMessage");
    assert_eq!(asked["verdict"], "deny");
    // Under the decision id of the call that carried it.
    let call = traces
        .iter()
        .find(|t| t["tool"] == "ask_client")
        .unwrap_or_else(|| panic!("no call trace: {traces:?}"));
    assert_eq!(asked["decision_id"], call["decision_id"]);
}

/// A downstream that dies on what the gate lets through (a message over 512 KiB kills the
/// `fragile` stdio witness) fails that request with the downstream code, within its deadline,
/// and the client's session goes on: the next request gets a new child and its answer.
#[test]
fn a_stdio_downstream_that_dies_is_replaced_for_the_next_request() {
    let (gate, pids_file) = stdio_gate("--broken fragile", 600_000, 100);
    let s = session(&post(gate.addr, "", INIT).1);
    assert_eq!(post(gate.addr, &with_session(&s), ECHO).0, 200);
    // Two strings of 300 KiB: within the gate's bounds (1 MiB, strings of 512 KiB), past what
    // the fragile witness survives.
    let half = "a".repeat(300 * 1024);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{half}","pad":"{half}"}}}}}}"#
    );
    let (status, out) = post(gate.addr, &with_session(&s), &huge);
    assert_eq!(status, 200, "{out}");
    let answer = messages(&out).pop().unwrap_or_default();
    assert_eq!(answer["id"], 3, "{out}");
    assert_eq!(answer["error"]["code"], -32002, "{out}");
    let first = *pids(&pids_file).first().expect("the first child");
    for id in 4..7 {
        let call = ECHO.replace(r#""id":2"#, &format!(r#""id":{id}"#));
        let (status, out) = post(gate.addr, &with_session(&s), &call);
        assert_eq!(status, 200, "{out}");
        let answer = messages(&out).pop().unwrap_or_default();
        assert_eq!(answer["id"], id, "{out}");
        assert_eq!(answer["result"]["content"][0]["text"], "hi", "{out}");
    }
    assert_eq!(
        pids(&pids_file).len(),
        2,
        "one new child, kept for what follows"
    );
    // The crashed one was reaped when it was replaced.
    assert!(ends(first), "the crashed child {first} is still there");
    let _ = std::fs::remove_file(pids_file);
}

/// A 2026-07-28 server asks the client through its answer (an `input_required` result whose
/// `inputRequests` hold a sampling request): the round reaches the client only under a
/// `server_request` rule for it, and the retry with the client's `inputResponses` completes.
#[test]
fn a_multi_round_trip_request_is_decided_like_a_server_request() {
    let round = |id: u64, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ask_client","arguments":{{}}{extra},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"sampling":{{}}}}}}}}}}"#
        )
    };
    let headers =
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: ask_client\r\n";
    // The witness policy allows the tool, and no server request.
    let gate = start(|_| {});
    let (status, out) = post(gate.addr, headers, &round(1, ""));
    assert_eq!(status, 200, "{out}");
    let answer = messages(&out).pop().unwrap_or_default();
    assert_eq!(answer["error"]["code"], -31001, "{out}");
    assert!(!out.contains("sampling/createMessage"), "{out}");
    // Allowed: the round reaches the client, and its retry completes.
    let gate = start(|cfg| {
        cfg.policy.rules.push(
            serde_json::from_str(r#"{"effect":"allow","server_request":"sampling/createMessage"}"#)
                .unwrap(),
        );
    });
    let (status, out) = post(gate.addr, headers, &round(1, ""));
    assert_eq!(status, 200, "{out}");
    let answer = messages(&out).pop().unwrap_or_default();
    assert_eq!(answer["result"]["resultType"], "input_required", "{out}");
    let asked = &answer["result"]["inputRequests"]["sample"];
    assert_eq!(asked["method"], "sampling/createMessage", "{out}");
    let state = answer["result"]["requestState"]
        .as_str()
        .unwrap_or_default();
    let retry = round(
        2,
        &format!(
            r#","inputResponses":{{"sample":{{"role":"assistant","content":{{"type":"text","text":"ok"}},"model":"m"}}}},"requestState":"{state}""#
        ),
    );
    let (status, out) = post(gate.addr, headers, &retry);
    assert_eq!(status, 200, "{out}");
    let answer = messages(&out).pop().unwrap_or_default();
    assert_eq!(answer["id"], 2, "{out}");
    assert_eq!(answer["result"]["resultType"], "complete", "{out}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "the client's input was received",
        "{out}"
    );
}

/// `"alive_probe": "downstream"` (`downstream/fault-close-recovers`): a stdio gate whose
/// downstream died and that goes on answering by itself (ping, initialize) but forwards nothing
/// any more (the fixture, as the reference gate was before it replaced dead children) fails it on
/// the alive check, while it passes `downstream/fault-close`, whose probe is a ping; the
/// reference gate passes both.
#[test]
fn a_gate_whose_downstream_stays_dead_fails_the_probe_that_goes_through_it() {
    if !crate::util::python3("the stays-down gate fixture") {
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/stays_down_gate.py"
    );
    let brittle = format!("python3 {script} {{downstream_cmd}}");
    let policy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/gate/witness-policy.json"
    );
    let reference = format!(
        "{} reference-gate --config {policy} --stdio --downstream-cmd {{downstream_cmd}}",
        crate::util::bin().display()
    );
    let verdicts = |gate: &str| {
        let (_, report) = crate::util::run_with_report(
            &[
                "--gate-stdio",
                gate,
                "--gate-codes",
                "reference",
                "--spec",
                "2025-11-25",
            ],
            &["downstream/fault-close"],
        );
        report
            .results
            .iter()
            .filter(|t| t.id.starts_with("downstream/fault-close"))
            .map(|t| {
                let alive = t
                    .findings
                    .iter()
                    .any(|f| f.check == Check::Alive && f.status == Status::Fail);
                (t.id.clone(), t.verdict.to_string(), alive)
            })
            .collect::<std::collections::BTreeSet<_>>()
    };
    let got = verdicts(&brittle);
    let want: std::collections::BTreeSet<_> = [
        (
            "downstream/fault-close".to_string(),
            "pass".to_string(),
            false,
        ),
        (
            "downstream/fault-close-recovers".to_string(),
            "fail".to_string(),
            true,
        ),
    ]
    .into();
    assert_eq!(got, want);
    let got = verdicts(&reference);
    let want: std::collections::BTreeSet<_> = [
        (
            "downstream/fault-close".to_string(),
            "pass".to_string(),
            false,
        ),
        (
            "downstream/fault-close-recovers".to_string(),
            "pass".to_string(),
            false,
        ),
    ]
    .into();
    assert_eq!(got, want);
}
