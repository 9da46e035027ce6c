//! The reference gate as a product: bearer tokens, decision traces, and its error table, through
//! its own HTTP front (the catalogue covers the rest through the gate profile).

use crate::util::InProcessGate;
use mcp_gauntlet::lanes::WITNESS_POLICY;
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
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out)
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
