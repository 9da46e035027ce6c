//! Fuzz target bodies, as plain functions (feature `fuzzing`): `fuzz/` calls them under
//! libFuzzer, and the suite's tests replay every saved input through them on stable.
//!
//! Each `check_*` function returns the first broken property as a [`Finding`]; the `fuzz_*`
//! wrappers panic on it, which is what a fuzzer needs. The properties:
//!
//! - [`check_canonical_bytes`]: any bytes; the parser never panics, and what it accepts has
//!   forwarding bytes that parse back to the same message and re-canonicalize to themselves.
//! - [`check_smuggle`]: a [`Smuggle`], a denied call inside a wrapper; the proxy forwards
//!   nothing at all (every shape holds a denied or unknown tool somewhere a reader may look).
//! - [`check_roundtrip`]: an [`AllowedCall`] in a random valid spelling; forwarded exactly once,
//!   as canonical bytes that mean the intended message.
//!
//! The differential target (the gate against each downstream personality's reading) needs the
//! witness's readers, so its body lives with the suite (`mcp_gauntlet::fuzz::targets`).

use crate::canonical::{self, Json, Limits, Message};
use crate::config::ErrorCodes;
use crate::forward::{ForwardError, ForwardFuture, Forwarder};
use crate::policy::{Effect, Rule, RuleEngine};
use crate::proxy::{Credentials, Proxy};
use crate::trace::Tracer;
use arbitrary::{Arbitrary, Unstructured};
use std::sync::{Arc, Mutex};

mod binding;
mod canonical_bytes;
mod roundtrip;
mod smuggle;

pub use binding::*;
pub use canonical_bytes::*;
pub use roundtrip::*;
pub use smuggle::*;

/// The tool every shape hides; the policy denies it.
pub const DENIED: &str = "delete_everything";
/// The tools the policy allows.
pub const ALLOWED: [&str; 2] = ["echo", "add"];
/// The server id the fuzz proxy forwards to.
pub const SERVER: &str = "witness";

/// A broken property, with the input's forwarded bytes when they matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub property: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.property, self.detail)
    }
}

fn finding(property: &'static str, detail: impl Into<String>) -> Finding {
    Finding {
        property,
        detail: detail.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// The proxy under fuzzing: the real one, with a recording forwarder and the witness policy.

/// A forwarder that records what it is given and answers every request with an empty result.
#[derive(Default)]
pub struct RecordingForwarder {
    sent: Mutex<Vec<Vec<u8>>>,
}

impl RecordingForwarder {
    pub fn take(&self) -> Vec<Vec<u8>> {
        self.sent
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

impl Forwarder for RecordingForwarder {
    fn forward<'a>(
        &'a self,
        _server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a> {
        Box::pin(async move {
            if let Ok(mut s) = self.sent.lock() {
                s.push(canonical.to_vec());
            }
            if !expects_answer {
                return Ok(Vec::new());
            }
            let id = canonical::parse(canonical, &Limits::default())
                .ok()
                .and_then(|c| c.message().id().map(|i| i.to_canonical()))
                .ok_or(ForwardError::BadAnswer)?;
            let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
            out.extend_from_slice(&id);
            out.extend_from_slice(br#","result":{"content":[]}}"#);
            Ok(out)
        })
    }
}

/// The witness policy: deny the canary, allow echo and add, deny everything else.
pub(crate) fn witness_policy() -> RuleEngine {
    let mut rules = vec![Rule::tool(Effect::Deny, "*", DENIED)];
    for t in ALLOWED {
        rules.push(Rule::tool(Effect::Allow, SERVER, t));
    }
    RuleEngine { rules }
}

/// A proxy with the witness policy in front of a [`RecordingForwarder`].
pub fn fuzz_proxy() -> (Proxy, Arc<RecordingForwarder>) {
    let fwd = Arc::new(RecordingForwarder::default());
    let proxy = Proxy::new(
        Arc::new(witness_policy()),
        fwd.clone(),
        Limits::default(),
        ErrorCodes::default(),
        Tracer::none(),
    );
    (proxy, fwd)
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
}

/// Run `raw` through `proxy` and return what reached the forwarder.
pub fn forwarded_by(proxy: &Proxy, fwd: &RecordingForwarder, raw: &[u8]) -> Vec<Vec<u8>> {
    fwd.take();
    RUNTIME.with(|rt| {
        rt.block_on(proxy.handle(SERVER, raw, &Credentials::default()));
    });
    fwd.take()
}

/// Forwarded bytes must be canonical: they parse, and re-canonicalize to themselves.
fn check_canonical_forwarding(bytes: &[u8]) -> Result<(), Finding> {
    match canonical::parse(bytes, &Limits::default()) {
        Ok(c) if c.forwarding_bytes() == bytes => Ok(()),
        Ok(_) => Err(finding(
            "forwarded-not-canonical",
            String::from_utf8_lossy(bytes),
        )),
        Err(e) => Err(finding(
            "forwarded-unparseable",
            format!("{:?}: {}", e.kind(), String::from_utf8_lossy(bytes)),
        )),
    }
}

/// The fuzz targets' entry points: panic on a finding.
pub fn fuzz_canonical_bytes(data: &[u8]) {
    if let Err(f) = check_canonical_bytes(data) {
        panic!("{f}");
    }
}

pub fn fuzz_smuggle(data: &[u8]) {
    if let Err(f) = check_smuggle(data) {
        panic!("{f}");
    }
}

pub fn fuzz_roundtrip(data: &[u8]) {
    if let Err(f) = check_roundtrip(data) {
        panic!("{f}");
    }
}

pub fn fuzz_binding(data: &[u8]) {
    if let Err(f) = check_binding(data) {
        panic!("{f}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_renders_and_the_gate_forwards_none() {
        // Deterministic sweep over many decoded models.
        for seed in 0..2000u32 {
            let bytes: Vec<u8> = (0..32)
                .map(|i| (seed.wrapping_mul(2654435761).wrapping_add(i * 40503) >> 7) as u8)
                .collect();
            let m = Smuggle::from_bytes(&bytes);
            assert!(!m.to_bytes().is_empty());
            check_smuggle(&bytes).unwrap_or_else(|f| panic!("{m:?}: {f}"));
        }
    }

    #[test]
    fn every_binding_model_is_judged_and_only_exact_allowed_calls_pass() {
        // The model space is small enough to walk whole: every combination, not a sample.
        let all = Binding::all();
        assert_eq!(all.len(), 3 * 23 * 5 * 5 * 5);
        let (proxy, fwd) = fuzz_proxy();
        let (mut admitted, mut forwarded) = (0, 0);
        for m in &all {
            forwarded += check_binding_with(&proxy, &fwd, m, gate_admission)
                .unwrap_or_else(|f| panic!("{f}"));
            let (body, headers) = m.render();
            let c = proxy.parse(&body).unwrap();
            let pairs: Vec<(&str, &[u8])> =
                headers.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            if gate_admission(&c, pairs.as_slice()) {
                admitted += 1;
            }
        }
        // Admitted: headers equal to the body (3 tools x plain or sentinel name x the three
        // string version claims). Forwarded: of those, only the allowed tools at 2026-07-28; the
        // denied tool is bound, then denied; 2025-11-25 and 2099-01-01 claims get -32022.
        assert_eq!(admitted, 3 * 2 * 3);
        assert_eq!(forwarded, 2 * 2);
    }

    #[test]
    fn the_plain_denied_call_is_json_naming_the_tool() {
        let b = Smuggle::plain().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["params"]["name"], DENIED);
    }

    #[test]
    fn allowed_calls_round_trip() {
        for seed in 0..500u32 {
            let bytes: Vec<u8> = (0..48)
                .map(|i| (seed.wrapping_mul(2246822519).wrapping_add(i * 3266489917) >> 11) as u8)
                .collect();
            check_roundtrip(&bytes).unwrap_or_else(|f| panic!("{f}"));
        }
    }

    #[test]
    fn canonical_bytes_property_holds_on_samples() {
        for s in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#[..],
            br#"{ "method" : "tools/call", "params":{"arguments":{"b":[1,2.50e3,"\u00e9"],"a":null},"name":"echo"},"id":"x","jsonrpc":"2.0"}"#,
            b"\xff",
            b"[]",
        ] {
            check_canonical_bytes(s).unwrap();
        }
    }
}
