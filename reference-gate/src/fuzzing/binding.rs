//! The binding target's model: a 2026-07-28 `tools/call` whose version, method and name
//! headers are right, wrong, doubled, re-cased, base64-encoded or missing, in front of the policy.

use super::*;

/// A tool a message or a header can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum Tool {
    Denied,
    Echo,
    Add,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Denied => DENIED,
            Tool::Echo => ALLOWED[0],
            Tool::Add => ALLOWED[1],
        }
    }
}

/// How `Mcp-Name` is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum NameHeader {
    /// Plain, naming this tool.
    Plain(Tool),
    /// The base64 sentinel of this tool's name.
    Sentinel(Tool),
    /// Upper case of this tool's name.
    Upper(Tool),
    /// With a leading tab inside the value (visible after trimming? it must not match).
    Padded(Tool),
    /// Twice: these two tools.
    Twice(Tool, Tool),
    /// A sentinel whose payload is not base64.
    BadSentinel,
    Missing,
}

/// How `Mcp-Method` is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum MethodHeader {
    Right,
    ToolsList,
    Upper,
    Twice,
    Missing,
}

/// A protocol version, as a header or in `_meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum VersionClaim {
    Modern,
    Legacy,
    Future,
    Missing,
    /// `_meta` only: the version as a number; as a header: two values.
    Odd,
}

/// A `tools/call` and the 2026-07-28 headers sent with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub struct Binding {
    pub body: Tool,
    pub name: NameHeader,
    pub method: MethodHeader,
    pub header_version: VersionClaim,
    pub meta_version: VersionClaim,
}

impl Binding {
    pub fn from_bytes(data: &[u8]) -> Binding {
        Binding::arbitrary(&mut Unstructured::new(data)).unwrap_or(Binding {
            body: Tool::Denied,
            name: NameHeader::Plain(Tool::Denied),
            method: MethodHeader::Right,
            header_version: VersionClaim::Modern,
            meta_version: VersionClaim::Modern,
        })
    }

    /// Every model.
    pub fn all() -> Vec<Binding> {
        let tools = [Tool::Denied, Tool::Echo, Tool::Add];
        let mut names = Vec::new();
        for t in tools {
            names.extend([
                NameHeader::Plain(t),
                NameHeader::Sentinel(t),
                NameHeader::Upper(t),
                NameHeader::Padded(t),
            ]);
            for u in tools {
                names.push(NameHeader::Twice(t, u));
            }
        }
        names.extend([NameHeader::BadSentinel, NameHeader::Missing]);
        let methods = [
            MethodHeader::Right,
            MethodHeader::ToolsList,
            MethodHeader::Upper,
            MethodHeader::Twice,
            MethodHeader::Missing,
        ];
        let versions = [
            VersionClaim::Modern,
            VersionClaim::Legacy,
            VersionClaim::Future,
            VersionClaim::Missing,
            VersionClaim::Odd,
        ];
        let mut out = Vec::new();
        for body in tools {
            for name in &names {
                for method in methods {
                    for header_version in versions {
                        for meta_version in versions {
                            out.push(Binding {
                                body,
                                name: *name,
                                method,
                                header_version,
                                meta_version,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The body and the headers, as the HTTP front would see them.
    pub fn render(&self) -> (Vec<u8>, Vec<(&'static str, Vec<u8>)>) {
        use base64::Engine as _;
        let version = |v: VersionClaim| match v {
            VersionClaim::Modern => Some("2026-07-28"),
            VersionClaim::Legacy => Some("2025-11-25"),
            VersionClaim::Future => Some("2099-01-01"),
            VersionClaim::Missing | VersionClaim::Odd => None,
        };
        let mut meta = serde_json::json!({"io.modelcontextprotocol/clientCapabilities": {}});
        match (self.meta_version, version(self.meta_version)) {
            (VersionClaim::Odd, _) => meta[crate::era::META_VERSION] = serde_json::json!(20260728),
            (_, Some(v)) => meta[crate::era::META_VERSION] = serde_json::json!(v),
            (_, None) => {}
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": self.body.name(), "arguments": {}, "_meta": meta}});
        let mut headers: Vec<(&'static str, Vec<u8>)> = Vec::new();
        match (self.header_version, version(self.header_version)) {
            (VersionClaim::Odd, _) => {
                headers.push(("mcp-protocol-version", b"2026-07-28".to_vec()));
                headers.push(("mcp-protocol-version", b"2025-11-25".to_vec()));
            }
            (_, Some(v)) => headers.push(("mcp-protocol-version", v.as_bytes().to_vec())),
            (_, None) => {}
        }
        match self.method {
            MethodHeader::Right => headers.push(("mcp-method", b"tools/call".to_vec())),
            MethodHeader::ToolsList => headers.push(("mcp-method", b"tools/list".to_vec())),
            MethodHeader::Upper => headers.push(("mcp-method", b"TOOLS/CALL".to_vec())),
            MethodHeader::Twice => {
                headers.push(("mcp-method", b"tools/call".to_vec()));
                headers.push(("mcp-method", b"tools/call".to_vec()));
            }
            MethodHeader::Missing => {}
        }
        let b64 = |t: Tool| {
            format!(
                "=?base64?{}?=",
                base64::engine::general_purpose::STANDARD.encode(t.name())
            )
        };
        match self.name {
            NameHeader::Plain(t) => headers.push(("mcp-name", t.name().as_bytes().to_vec())),
            NameHeader::Sentinel(t) => headers.push(("mcp-name", b64(t).into_bytes())),
            NameHeader::Upper(t) => {
                headers.push(("mcp-name", t.name().to_ascii_uppercase().into_bytes()))
            }
            NameHeader::Padded(t) => {
                headers.push(("mcp-name", format!("{}\t", t.name()).into_bytes()))
            }
            NameHeader::Twice(a, b) => {
                headers.push(("mcp-name", a.name().as_bytes().to_vec()));
                headers.push(("mcp-name", b.name().as_bytes().to_vec()));
            }
            NameHeader::BadSentinel => headers.push(("mcp-name", b"=?base64?!!?=".to_vec())),
            NameHeader::Missing => {}
        }
        (body.to_string().into_bytes(), headers)
    }

    /// The tools the request names anywhere: the body's, and every `Mcp-Name` (decoded).
    fn named(&self) -> Vec<Tool> {
        let mut out = vec![self.body];
        match self.name {
            NameHeader::Plain(t)
            | NameHeader::Sentinel(t)
            | NameHeader::Upper(t)
            | NameHeader::Padded(t) => out.push(t),
            NameHeader::Twice(a, b) => out.extend([a, b]),
            NameHeader::BadSentinel | NameHeader::Missing => {}
        }
        out
    }
}

/// A 2026-07-28 `tools/call` with headers in any state, through the HTTP front's admission
/// ([`crate::era::admit`]) and the real proxy. A legacy route needs a session, which this model
/// never has, so only admitted modern requests reach the proxy. Properties: a request that names
/// the denied tool in its body or in any header forwards nothing; whatever is forwarded had
/// every header equal to its body. Returns how many messages were forwarded.
pub fn check_binding_with(
    proxy: &Proxy,
    fwd: &RecordingForwarder,
    model: &Binding,
    admit: Admission,
) -> Result<usize, Finding> {
    let (body, headers) = model.render();
    let Ok(c) = proxy.parse(&body) else {
        return Ok(0);
    };
    let pairs: Vec<(&str, &[u8])> = headers.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    if !admit(&c, pairs.as_slice()) {
        return Ok(0);
    }
    fwd.take();
    RUNTIME.with(|rt| {
        rt.block_on(proxy.handle_parsed(SERVER, &body, &c, &Credentials::default()));
    });
    let sent = fwd.take();
    for bytes in &sent {
        check_canonical_forwarding(bytes)?;
    }
    if sent.is_empty() {
        return Ok(0);
    }
    if model.named().contains(&Tool::Denied) {
        return Err(finding(
            "denied-name-forwarded",
            format!("{model:?} was forwarded"),
        ));
    }
    let bound = model.name == NameHeader::Plain(model.body)
        || model.name == NameHeader::Sentinel(model.body);
    let exact = bound
        && model.method == MethodHeader::Right
        && model.header_version == VersionClaim::Modern
        && model.meta_version == VersionClaim::Modern;
    if !exact {
        return Err(finding(
            "unbound-request-forwarded",
            format!("{model:?} was forwarded though its headers do not equal its body"),
        ));
    }
    Ok(sent.len())
}

/// Whether the HTTP front lets a parsed message with these headers through to the proxy.
pub type Admission = fn(&crate::canonical::Canonical, &[(&str, &[u8])]) -> bool;

/// The reference gate's admission: a modern request whose headers bind to its body.
pub(crate) fn gate_admission(c: &crate::canonical::Canonical, headers: &[(&str, &[u8])]) -> bool {
    crate::era::admit(c, headers) == Some(Ok(()))
}

/// [`check_binding_with`] on a model decoded from fuzzer bytes, with the gate's admission.
pub fn check_binding(data: &[u8]) -> Result<(), Finding> {
    let model = Binding::from_bytes(data);
    let (proxy, fwd) = fuzz_proxy();
    check_binding_with(&proxy, &fwd, &model, gate_admission).map(|_| ())
}
