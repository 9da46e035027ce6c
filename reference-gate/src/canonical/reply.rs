//! Replies from the downstream: read with the same strict grammar, checked as one JSON-RPC
//! response (or a request or notification it sends), and written again canonically.

use super::*;

/// A JSON-RPC response after canonicalization: exactly one of a result object and an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub id: Id,
    pub outcome: Outcome,
}

/// What a response carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The result object's members.
    Result(Vec<(String, Json)>),
    /// An error: an integer code, a message, and the optional `data`.
    Error {
        code: i64,
        message: String,
        data: Option<Json>,
    },
}

/// One accepted response with its canonical bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalReply {
    reply: Reply,
    bytes: Vec<u8>,
}

impl CanonicalReply {
    /// The response, canonically written.
    pub fn new(reply: Reply) -> CanonicalReply {
        let bytes = write_reply(&reply);
        CanonicalReply { reply, bytes }
    }

    pub fn reply(&self) -> &Reply {
        &self.reply
    }

    /// The deterministic re-serialization: the only bytes that may be relayed.
    pub fn forwarding_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The same response under another id (the gate maps ids between its two sides).
    pub(crate) fn with_id(&self, id: Id) -> CanonicalReply {
        CanonicalReply::new(Reply {
            id,
            outcome: self.reply.outcome.clone(),
        })
    }
}

/// Anything one peer may send the other: a request or notification, or a response.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Message(Canonical),
    Reply(CanonicalReply),
}

/// Parse exactly one message of either kind, with the same grammar, limits and envelope rules
/// as [`parse`] (a response's envelope is `jsonrpc`, `id` and one of `result`/`error`).
pub(crate) fn parse_incoming(bytes: &[u8], limits: &Limits) -> Result<Incoming, Malformed> {
    let value = parse_value(bytes, limits, Leniency::STRICT)?;
    let is_reply = matches!(&value, Json::Object(m)
        if !m.iter().any(|(k, _)| k == "method")
            && m.iter().any(|(k, _)| k == "result" || k == "error"));
    if is_reply {
        return Ok(Incoming::Reply(CanonicalReply::new(reply_envelope(value)?)));
    }
    Ok(Incoming::Message(Canonical::new(envelope(
        value,
        Leniency::STRICT,
    )?)))
}

pub(super) fn reply_envelope(value: Json) -> Result<Reply, Malformed> {
    let Json::Object(members) = value else {
        return Err(env_err());
    };
    for (k, _) in &members {
        if !["jsonrpc", "id", "result", "error"].contains(&k.as_str()) {
            return Err(env_err());
        }
    }
    let get = |k: &str| members.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    if get("jsonrpc") != Some(&Json::String("2.0".into())) {
        return Err(env_err());
    }
    let id = match get("id") {
        Some(Json::String(s)) => Id::Str(s.clone()),
        Some(Json::Number(n)) => Id::Int(integer_id(n)?),
        _ => return Err(env_err()),
    };
    let outcome = match (get("result"), get("error")) {
        (Some(Json::Object(r)), None) => Outcome::Result(r.clone()),
        (None, Some(Json::Object(e))) => {
            for (k, _) in e {
                if !["code", "message", "data"].contains(&k.as_str()) {
                    return Err(env_err());
                }
            }
            let e = Json::Object(e.clone());
            let code = match e.get("code") {
                Some(Json::Number(n)) => integer_id(n)?,
                _ => return Err(env_err()),
            };
            let Some(Json::String(message)) = e.get("message") else {
                return Err(env_err());
            };
            Outcome::Error {
                code,
                message: message.clone(),
                data: e.get("data").cloned(),
            }
        }
        _ => return Err(env_err()),
    };
    Ok(Reply { id, outcome })
}

pub(super) fn write_reply(r: &Reply) -> Vec<u8> {
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    write_value(&mut out, &r.id.to_json());
    match &r.outcome {
        Outcome::Result(members) => {
            out.extend_from_slice(b",\"result\":");
            write_members(&mut out, ordered(members, &[]).into_iter());
        }
        Outcome::Error {
            code,
            message,
            data,
        } => {
            out.extend_from_slice(format!(r#","error":{{"code":{code},"message":"#).as_bytes());
            write_string(&mut out, message);
            if let Some(d) = data {
                out.extend_from_slice(b",\"data\":");
                write_value(&mut out, d);
            }
            out.push(b'}');
        }
    }
    out.push(b'}');
    out
}
