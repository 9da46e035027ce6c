//! Placeholders: the names a case may use (`{{denied_tool}}`, ...), and how a run's values are
//! put into a case's text, JSON and body bytes.

use super::{Body, BodySpec, Placeholders};
use base64::Engine as _;
use bytes::Bytes;

/// Placeholder names a case may use.
pub(crate) const PLACEHOLDERS: &[&str] = &[
    "denied_tool",
    "allowed_tool",
    "protocol_version",
    "session_id",
    "meta",
    "denied_tool_b64",
    "allowed_tool_b64",
    "host",
    "path",
    "path_upper",
    "code_malformed",
    "code_denied",
    "code_downstream",
    "scoped_tool",
    "auth_header",
    "allowed_arg",
    "denied_tool_escaped",
    "denied_prompt",
    "denied_prompt_upper",
    "meta_tool",
    "meta_tool_key",
    "meta_arguments_key",
    "meta_arguments_open",
    "client",
    "step",
    "fresh",
    "template_prefix",
    "liveness_method",
    "message_path",
    "session_param",
];

/// Whether `name` is a placeholder a case may use: one of [`PLACEHOLDERS`] or a token of the
/// `auth/` cases ([`crate::auth::TOKEN_PLACEHOLDERS`]).
pub(crate) fn is_placeholder(name: &str) -> bool {
    PLACEHOLDERS.contains(&name) || crate::auth::TOKEN_PLACEHOLDERS.contains(&name)
}

impl Placeholders {
    pub fn set(&mut self, name: &'static str, value: impl Into<String>) -> &mut Self {
        self.values.insert(name, value.into());
        self
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The values of `names` that are set, to be set again elsewhere.
    pub(crate) fn values_of(&self, names: &[&'static str]) -> Vec<(&'static str, String)> {
        names
            .iter()
            .filter_map(|&n| Some((n, self.get(n)?.to_string())))
            .collect()
    }

    /// Replace every known `{{name}}` in `text`. Unknown names were refused at load time.
    pub fn apply(&self, text: &str) -> String {
        if !text.contains("{{") {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after.find("}}") {
                Some(end) if self.values.contains_key(&after[..end]) => {
                    out.push_str(&self.values[&after[..end]]);
                    rest = &after[end + 2..];
                }
                _ => {
                    out.push_str("{{");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Raw bytes with every known `{{name}}` replaced where it is spelled in UTF-8 (or ASCII), in
    /// UTF-32LE, UTF-32BE, UTF-16LE or UTF-16BE, by the value in the same encoding; the bytes around it (invalid
    /// UTF-8, a BOM) are kept as they are. This is how a base64 body carries `{{meta}}`.
    pub(crate) fn apply_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for (name, value) in &self.values {
            let key = format!("{{{{{name}}}}}");
            let utf16 = |s: &str, le: bool| -> Vec<u8> {
                s.encode_utf16()
                    .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
                    .collect()
            };
            let utf32 = |s: &str, le: bool| -> Vec<u8> {
                s.chars()
                    .map(u32::from)
                    .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
                    .collect()
            };
            for (pattern, replacement) in [
                (key.as_bytes().to_vec(), value.as_bytes().to_vec()),
                (utf32(&key, true), utf32(value, true)),
                (utf32(&key, false), utf32(value, false)),
                (utf16(&key, true), utf16(value, true)),
                (utf16(&key, false), utf16(value, false)),
            ] {
                out = replace_bytes(&out, &pattern, &replacement);
            }
        }
        out
    }

    /// A JSON value with placeholders replaced in its strings and member names.
    pub(crate) fn apply_json_value(&self, value: &serde_json::Value) -> serde_json::Value {
        self.apply_json(value)
    }

    fn apply_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.apply(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.apply_json(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (self.apply(k), self.apply_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The case body with placeholders replaced, as streamable bytes.
    pub fn body(&self, spec: Option<&BodySpec>) -> Body {
        let Some(spec) = spec else {
            return Body::empty();
        };
        match spec {
            BodySpec::Json(v) => {
                // Serializing a Value cannot fail (keys are strings).
                let bytes =
                    serde_json::to_vec(&self.apply_json(v)).expect("a JSON value serializes");
                Body::from_bytes(bytes)
            }
            BodySpec::Text(t) => Body::from_bytes(self.apply(t).into_bytes()),
            // Validated at load time.
            BodySpec::Base64(b) => Body::from_bytes(
                self.apply_bytes(
                    &base64::engine::general_purpose::STANDARD
                        .decode(b)
                        .unwrap_or_default(),
                ),
            ),
            BodySpec::Repeat(r) => {
                let mut body = Body::default();
                body.push(Bytes::from(self.apply(&r.prefix)));
                body.push_repeat(Bytes::from(self.apply(&r.unit)), r.count);
                body.push(Bytes::from(self.apply(&r.suffix)));
                body
            }
            BodySpec::Nest(n) => {
                let mut body = Body::default();
                body.push(Bytes::from(self.apply(&n.prefix)));
                body.push_repeat(Bytes::from(self.apply(&n.open)), n.depth);
                body.push(Bytes::from(self.apply(&n.inner)));
                body.push_repeat(Bytes::from(self.apply(&n.close)), n.depth);
                body.push(Bytes::from(self.apply(&n.suffix)));
                body
            }
        }
    }
}

/// `bytes` with every occurrence of `pattern` replaced by `replacement`.
fn replace_bytes(bytes: &[u8], pattern: &[u8], replacement: &[u8]) -> Vec<u8> {
    if pattern.is_empty() || bytes.len() < pattern.len() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(pattern) {
            out.extend_from_slice(replacement);
            i += pattern.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}
