//! The canonical_bytes target: any bytes; the parser never panics, and what it accepts has
//! forwarding bytes that parse back to the same message and re-canonicalize to themselves.

use super::*;

/// Whether two JSON values are equal with object members in any order (the strict parser
/// refuses duplicate names, so a member found by name is the only one). Allocates nothing: it
/// runs on every input the canonical_bytes target accepts.
fn same_json(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Json::Object(x), Json::Object(y)) => same_members(x, y),
        (Json::Array(_) | Json::Object(_), _) | (_, Json::Array(_) | Json::Object(_)) => false,
        (a, b) => a == b,
    }
}

/// Whether two objects' members are the same, in any order.
fn same_members(x: &[(String, Json)], y: &[(String, Json)]) -> bool {
    x.len() == y.len()
        && x.iter().all(|(k, v)| {
            y.iter()
                .find(|(n, _)| n == k)
                .is_some_and(|(_, w)| same_json(v, w))
        })
}

/// Whether two messages are the same request or notification: id, method, and params with
/// members in any order.
fn same_message(a: &Message, b: &Message) -> bool {
    a.id() == b.id()
        && a.method() == b.method()
        && match (a.params(), b.params()) {
            (None, None) => true,
            (Some(x), Some(y)) => same_members(x, y),
            _ => false,
        }
}

/// Any bytes: no panic; accepted input round-trips through its canonical bytes.
pub fn check_canonical_bytes(data: &[u8]) -> Result<(), Finding> {
    let limits = Limits {
        max_bytes: 64 * 1024,
        ..Limits::default()
    };
    let Ok(first) = canonical::parse(data, &limits) else {
        return Ok(());
    };
    let bytes = first.forwarding_bytes();
    let second = canonical::parse(bytes, &limits).map_err(|e| {
        finding(
            "canonical-bytes-refused",
            format!("{:?}: {}", e.kind(), String::from_utf8_lossy(bytes)),
        )
    })?;
    if !same_message(first.message(), second.message()) {
        return Err(finding(
            "canonical-bytes-changed-the-message",
            String::from_utf8_lossy(bytes),
        ));
    }
    if second.forwarding_bytes() != bytes {
        return Err(finding(
            "canonicalization-not-idempotent",
            format!(
                "{} -> {}",
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(second.forwarding_bytes())
            ),
        ));
    }
    // Whatever we forward, a plain JSON reader reads too.
    if serde_json::from_slice::<serde_json::Value>(bytes).is_err() {
        return Err(finding(
            "canonical-bytes-not-json",
            String::from_utf8_lossy(bytes),
        ));
    }
    Ok(())
}
