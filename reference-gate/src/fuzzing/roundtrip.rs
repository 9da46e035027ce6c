//! The proxy_roundtrip target's model: an allowed call in a random valid spelling, forwarded
//! exactly once as canonical bytes that mean the intended message.

use super::*;

/// An allowed call in a random valid spelling.
#[derive(Debug, Clone, Arbitrary)]
pub struct AllowedCall {
    pub tool: AllowedTool,
    pub id: ValidId,
    /// Member order: a permutation index of the four envelope members.
    pub order: u8,
    pub space: ValidSpace,
    /// Escape every character of member names as `\uXXXX`.
    pub escape_names: bool,
    pub meta: bool,
}

#[derive(Debug, Clone, Arbitrary)]
pub enum AllowedTool {
    Echo(String),
    Add(i32, i32),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum ValidId {
    Int(i32),
    Str(u32),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum ValidSpace {
    None,
    Space,
    Tab,
    Newline,
    CrLf,
}

impl AllowedCall {
    /// The message as a value, and one valid spelling of it.
    pub fn render(&self) -> (serde_json::Value, Vec<u8>) {
        use serde_json::json;
        let ws = match self.space {
            ValidSpace::None => "",
            ValidSpace::Space => " ",
            ValidSpace::Tab => "\t",
            ValidSpace::Newline => "\n",
            ValidSpace::CrLf => "\r\n",
        };
        let id = match self.id {
            ValidId::Int(n) => json!(n),
            ValidId::Str(n) => json!(format!("req-{n}")),
        };
        let (name, args) = match &self.tool {
            AllowedTool::Echo(t) => ("echo", json!({ "text": t })),
            AllowedTool::Add(a, b) => ("add", json!({ "a": a, "b": b })),
        };
        let mut params = json!({ "name": name, "arguments": args });
        if self.meta {
            params["_meta"] = json!({ "progressToken": 1 });
        }
        let value = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let key = |k: &str| -> String {
            if self.escape_names {
                let e: String = k
                    .chars()
                    .map(|c| format!("\\u{:04x}", u32::from(c)))
                    .collect();
                format!("\"{e}\"")
            } else {
                format!("\"{k}\"")
            }
        };
        let write = |v: &serde_json::Value| -> String {
            fn go(v: &serde_json::Value, ws: &str, key: &dyn Fn(&str) -> String) -> String {
                match v {
                    serde_json::Value::Object(m) => {
                        let inner: Vec<String> = m
                            .iter()
                            .map(|(k, v)| format!("{ws}{}{ws}:{ws}{}", key(k), go(v, ws, key)))
                            .collect();
                        format!("{{{}{ws}}}", inner.join(","))
                    }
                    other => other.to_string(),
                }
            }
            go(v, ws, &key)
        };
        let mut members: Vec<(&str, String)> = ["jsonrpc", "id", "method", "params"]
            .iter()
            .map(|k| (*k, write(&value[*k])))
            .collect();
        // A permutation from the order index (Lehmer code over four members).
        let mut n = usize::from(self.order) % 24;
        let mut ordered = Vec::new();
        for radix in (1..=4).rev() {
            ordered.push(members.remove(n % radix));
            n /= radix;
        }
        let inner: Vec<String> = ordered
            .iter()
            .map(|(k, v)| format!("{ws}{}{ws}:{ws}{v}", key(k)))
            .collect();
        (value, format!("{{{}{ws}}}", inner.join(",")).into_bytes())
    }
}

/// An allowed call is forwarded exactly once, canonical, meaning what was sent.
pub fn check_roundtrip_with(
    proxy: &Proxy,
    fwd: &RecordingForwarder,
    call: &AllowedCall,
) -> Result<(), Finding> {
    let (value, raw) = call.render();
    let sent = forwarded_by(proxy, fwd, &raw);
    let [bytes] = sent.as_slice() else {
        return Err(finding(
            "allowed-call-not-forwarded-once",
            format!(
                "{} forwarded {} times",
                String::from_utf8_lossy(&raw),
                sent.len()
            ),
        ));
    };
    check_canonical_forwarding(bytes)?;
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) if v == value => Ok(()),
        _ => Err(finding(
            "allowed-call-changed",
            format!(
                "{} forwarded as {}",
                String::from_utf8_lossy(&raw),
                String::from_utf8_lossy(bytes)
            ),
        )),
    }
}

/// [`check_roundtrip_with`] on the reference gate, from fuzzer bytes.
pub fn check_roundtrip(data: &[u8]) -> Result<(), Finding> {
    let Ok(call) = AllowedCall::arbitrary(&mut Unstructured::new(data)) else {
        return Ok(());
    };
    let (proxy, fwd) = fuzz_proxy();
    check_roundtrip_with(&proxy, &fwd, &call)
}
