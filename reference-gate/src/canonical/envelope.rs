//! The JSON-RPC envelope of a client's message: its members, its id, a `tools/call`'s params
//! (and the look-alike member names that imitate protected ones), and the canonical bytes
//! written from it.

use super::*;

/// Envelope members a client message may carry.
pub(super) const ENVELOPE: &[&str] = &["jsonrpc", "id", "method", "params"];

/// `tools/call` params members: the call, and a 2026-07-28 retry's answers to the server's input
/// requests with the state the server gave it.
pub(super) const TOOL_PARAMS: &[&str] = &[
    "name",
    "arguments",
    "_meta",
    "inputResponses",
    "requestState",
];

/// Member names that a case- or Unicode-folded variant may not imitate.
pub(super) const PROTECTED: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "name",
    "arguments",
    "_meta",
    "task",
    "inputResponses",
    "requestState",
];

pub(super) fn env_err() -> Malformed {
    Malformed::new(MalformedKind::Envelope)
}

/// Folded form of a member name for look-alike checks: ASCII case and the Unicode characters
/// that case-fold onto ASCII letters (U+017F long s, U+212A Kelvin sign, U+0130/U+0131 dotted I).
/// Whether `name`, folded (ASCII case, and the non-ASCII letters that some readers fold to
/// ASCII ones: long s, Kelvin sign, dotted and dotless i), is the ASCII name `ascii`. Compares
/// char by char, allocating nothing: it runs for every member of every `params`.
pub(super) fn folds_to(name: &str, ascii: &str) -> bool {
    // Every char is at least one byte: a shorter name cannot fold to `ascii`.
    if name.len() < ascii.len() {
        return false;
    }
    let mut want = ascii.bytes();
    for c in name.chars() {
        let folded = match c {
            '\u{17f}' => 's',
            '\u{212a}' => 'k',
            '\u{130}' | '\u{131}' => 'i',
            c => c.to_ascii_lowercase(),
        };
        match want.next() {
            Some(b) if u32::from(folded) == u32::from(b.to_ascii_lowercase()) => {}
            _ => return false,
        }
    }
    want.next().is_none()
}

pub(super) fn imitates_protected(name: &str) -> bool {
    PROTECTED.iter().any(|p| *p != name && folds_to(name, p))
}

/// The lax-envelope fault's pre-pass: unknown members dropped, non-object params dropped, a null
/// id removed (a notification then), any other id type turned into a string.
#[cfg(feature = "faults")]
pub(super) fn loosen_envelope(members: &mut Vec<(String, Json)>) {
    members.retain(|(k, _)| ENVELOPE.contains(&k.as_str()));
    if let Some(at) = members
        .iter()
        .position(|(k, v)| k == "params" && !matches!(v, Json::Object(_)))
    {
        members.remove(at);
    }
    match members.iter().position(|(k, _)| k == "id") {
        Some(at) if members[at].1 == Json::Null => {
            members.remove(at);
        }
        Some(at)
            if !matches!(&members[at].1, Json::String(_))
                && !matches!(&members[at].1, Json::Number(n) if integer_id(n).is_ok()) =>
        {
            let text = String::from_utf8_lossy(&members[at].1.to_canonical()).into_owned();
            members[at].1 = Json::String(text);
        }
        _ => {}
    }
}

/// The JSON-RPC envelope rules in the order the specification states them, one early refusal
/// per rule; a `tools/call` is checked further by [`tool_call_params`].
pub(super) fn envelope(value: Json, len: Leniency) -> Result<Message, Malformed> {
    let Json::Object(members) = value else {
        return Err(env_err());
    };
    #[cfg(feature = "faults")]
    let members = {
        let mut members = members;
        if len.lax_envelope() {
            loosen_envelope(&mut members);
        }
        members
    };
    for (k, _) in &members {
        if !ENVELOPE.contains(&k.as_str()) {
            return Err(env_err());
        }
    }
    let get = |k: &str| members.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    if get("jsonrpc") != Some(&Json::String("2.0".into())) {
        return Err(env_err());
    }
    let method = match get("method") {
        Some(Json::String(m)) if !m.is_empty() => m.clone(),
        _ => return Err(env_err()),
    };
    match get("params") {
        None => {}
        Some(Json::Object(p))
            if !len.lax_envelope() && p.iter().any(|(k, _)| imitates_protected(k)) =>
        {
            return Err(env_err());
        }
        Some(Json::Object(_)) => {}
        Some(_) => return Err(env_err()),
    }
    let id = match get("id") {
        None => None,
        Some(Json::String(s)) => Some(Id::Str(s.clone())),
        Some(Json::Number(n)) => Some(Id::Int(integer_id(n)?)),
        Some(_) => return Err(env_err()),
    };
    // Move params out (no copy of a possibly large arguments tree).
    let params = members
        .into_iter()
        .find(|(k, _)| k == "params")
        .and_then(|(_, v)| match v {
            Json::Object(p) => Some(p),
            _ => None,
        });
    if method == "tools/call" {
        tool_call_params(id.is_some(), params.as_ref(), len)?;
    }
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification { method, params },
    })
}

/// A `tools/call` must be a request; its params a plain name, an object of arguments, and
/// optionally `_meta` and a multi-round-trip retry's `inputResponses` (an object) and
/// `requestState` (a string); nothing else.
pub(super) fn tool_call_params(
    is_request: bool,
    params: Option<&Vec<(String, Json)>>,
    len: Leniency,
) -> Result<(), Malformed> {
    if !is_request && !len.lax_envelope() {
        return Err(env_err());
    }
    let tool = || Malformed::new(MalformedKind::ToolCall);
    let Some(p) = params else {
        // The careless gate lets a call it cannot read through; the proxy decides what then.
        return if len.lax_envelope() {
            Ok(())
        } else {
            Err(tool())
        };
    };
    for (k, _) in p {
        if !TOOL_PARAMS.contains(&k.as_str()) && !len.lax_envelope() {
            return Err(tool());
        }
    }
    let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    match get("name") {
        Some(Json::String(n)) if len.any_tool_name() || plain_tool_name(n) => {}
        _ => return Err(tool()),
    }
    match get("arguments") {
        None | Some(Json::Object(_)) => {}
        Some(_) if len.lax_envelope() => {}
        Some(_) => return Err(tool()),
    }
    match (get("_meta"), get("inputResponses"), get("requestState")) {
        (
            None | Some(Json::Object(_)),
            None | Some(Json::Object(_)),
            None | Some(Json::String(_)),
        ) => Ok(()),
        _ => Err(tool()),
    }
}

/// An id number: an integer literal (no fraction, no exponent, no `-0`) within ±(2^53−1).
pub(super) fn integer_id(n: &str) -> Result<i64, Malformed> {
    if n.contains(['.', 'e', 'E']) || n == "-0" {
        return Err(env_err());
    }
    let v: i64 = n.parse().map_err(|_| env_err())?;
    if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v) {
        return Err(env_err());
    }
    Ok(v)
}

/// A plain tool name (MCP 2025-11-25 guidance): 1–128 characters of `A-Z a-z 0-9 _ - .`.
pub(crate) fn plain_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// Members of `obj` with `first` (in that order) leading and the rest sorted.
pub(super) fn ordered<'a>(obj: &'a [(String, Json)], first: &[&str]) -> Vec<&'a (String, Json)> {
    let mut out: Vec<&(String, Json)> = first
        .iter()
        .filter_map(|f| obj.iter().find(|(k, _)| k == f))
        .collect();
    let mut rest: Vec<&(String, Json)> = obj
        .iter()
        .filter(|(k, _)| !first.contains(&k.as_str()))
        .collect();
    rest.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.extend(rest);
    out
}

pub(super) fn write_message(m: &Message) -> Vec<u8> {
    let mut env: Vec<(String, Json)> = vec![("jsonrpc".into(), Json::String("2.0".into()))];
    if let Some(id) = m.id() {
        env.push(("id".into(), id.to_json()));
    }
    env.push(("method".into(), Json::String(m.method().into())));
    let params = match m {
        Message::Request { params, .. } | Message::Notification { params, .. } => params,
    };
    let mut out = Vec::new();
    out.push(b'{');
    for (i, (k, v)) in env.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(&mut out, k);
        out.push(b':');
        write_value(&mut out, v);
    }
    if let Some(p) = params {
        out.extend_from_slice(b",\"params\":");
        let first: &[&str] = if m.method() == "tools/call" {
            TOOL_PARAMS
        } else {
            &[]
        };
        write_members(&mut out, ordered(p, first).into_iter());
    }
    out.push(b'}');
    out
}
