//! The differential fuzz target's body: the reference gate's reading of a body against each
//! witness personality's reading of the same bytes. It lives here, not in `reference-gate`,
//! because the personalities are the witness's readers and the gate depends on nothing of the
//! suite.

use crate::reading::{self as json, Personality};
use reference_gate::fuzzing::{
    forwarded_by, fuzz_proxy, Finding, RecordingForwarder, Smuggle, ALLOWED,
};
use reference_gate::proxy::Proxy;
use serde_json::Value;

/// The tool names a downstream reading `value` as `personality` would run (batches included,
/// as a batch-executing server would).
pub(crate) fn tools_run_by(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.iter().flat_map(tools_run_by).collect(),
        Value::Object(o) if o.get("method").and_then(Value::as_str) == Some("tools/call") => o
            .get("params")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .map(|n| vec![n.to_string()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The personalities that would run a tool other than the allowed ones on reading `raw`.
pub(crate) fn personalities_running_denied(raw: &[u8]) -> Vec<(Personality, String)> {
    let mut out = Vec::new();
    for p in Personality::ALL {
        let Ok(values) = json::read(p, raw) else {
            continue;
        };
        for v in &values {
            for name in tools_run_by(v) {
                if !ALLOWED.contains(&name.as_str()) {
                    out.push((p, name));
                }
            }
        }
    }
    out
}

/// If any personality would run a denied (or unknown) tool on `raw`, the gate must have
/// forwarded nothing.
pub fn check_differential_with(
    proxy: &Proxy,
    fwd: &RecordingForwarder,
    raw: &[u8],
) -> Result<(), Finding> {
    let readers = personalities_running_denied(raw);
    if readers.is_empty() {
        return Ok(());
    }
    let sent = forwarded_by(proxy, fwd, raw);
    if let Some(bytes) = sent.first() {
        let who: Vec<String> = readers
            .iter()
            .map(|(p, n)| format!("{} runs {n:?}", p.as_str()))
            .collect();
        return Err(Finding {
            property: "gate-forwarded-what-a-downstream-runs-as-denied",
            detail: format!(
                "{} ({}); the gate forwarded {}",
                String::from_utf8_lossy(raw),
                who.join(", "),
                String::from_utf8_lossy(bytes)
            ),
        });
    }
    Ok(())
}

/// Fuzzer bytes: the first byte picks raw bytes (odd) or a smuggling model (even).
pub fn differential_input(data: &[u8]) -> Vec<u8> {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => rest.to_vec(),
        Some((_, rest)) => Smuggle::from_bytes(rest).to_bytes(),
        None => Vec::new(),
    }
}

/// [`check_differential_with`] on the reference gate, from fuzzer bytes.
pub fn check_differential(data: &[u8]) -> Result<(), Finding> {
    let (proxy, fwd) = fuzz_proxy();
    check_differential_with(&proxy, &fwd, &differential_input(data))
}

pub fn fuzz_differential(data: &[u8]) {
    if let Err(f) = check_differential(data) {
        panic!("{f}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canary::CANARY_TOOL;

    #[test]
    fn readers_disagree_on_a_duplicate_name() {
        let raw = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"delete_everything"}}"#;
        let who = personalities_running_denied(raw);
        assert!(who.iter().any(|(p, _)| *p == Personality::LastWins));
        assert!(!who.iter().any(|(p, _)| *p == Personality::FirstWins));
        assert!(who.iter().all(|(_, n)| n == CANARY_TOOL));
        check_differential_with(&fuzz_proxy().0, &fuzz_proxy().1, raw).unwrap();
    }
}
