//! The witness's methods, one handler per method family (the lifecycle, tools, resources,
//! prompts), and what they serve: the tools (the canary among them), the resources and prompts,
//! and the careless way it finds a resource by URI.

use super::{Broken, Conversation, Fault, Outcome, Witness, CANARY_MARKER, CANARY_TOOL};
use serde_json::{json, Map, Value};

/// The witness's one resource template, and what a URI of it starts with.
const NOTES_TEMPLATE: &str = "test://notes{/path*}";
const NOTES_PREFIX: &str = "test://notes/";

/// Whether `path` fills the template's `{/path*}`: one or more comma-separated items in one
/// segment, which (an item may itself hold commas, as `[^/]+` does) is any non-empty text
/// without `/`. Read once, left to right.
fn comma_items(path: &str) -> bool {
    !path.is_empty() && !path.contains('/')
}

/// The same question answered as a backtracking matcher of `[^/]+(?:,[^/]+)*$` does: each item
/// may end at any of its bytes (commas included), and every split is tried before giving up,
/// so a path of n commas that cannot match costs about 2^n steps (`backtracking-matcher`).
fn backtracking_items(path: &[u8]) -> bool {
    fn item_from(path: &[u8], start: usize) -> bool {
        let stop = path[start..]
            .iter()
            .position(|b| *b == b'/')
            .map_or(path.len(), |p| start + p);
        (start + 1..=stop).rev().any(|end| rest_from(path, end))
    }
    fn rest_from(path: &[u8], at: usize) -> bool {
        at == path.len() || (path[at] == b',' && at + 1 < path.len() && item_from(path, at + 1))
    }
    !path.is_empty() && item_from(path, 0)
}

impl Witness {
    /// Run a method: its family's handler. `Err(code)` is a protocol error about the params.
    pub(super) fn call(
        &self,
        method: &str,
        params: &Map<String, Value>,
        conv: &mut Conversation,
    ) -> Result<Outcome, i64> {
        match method {
            "initialize" => self.initialize(params, conv),
            "ping" => Ok(Outcome::Result(json!({}))),
            "tools/list" | "tools/call" => self.tools(method, params),
            "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe" => self.resources(method, params, conv),
            "prompts/list" | "prompts/get" => self.prompts(method, params),
            _ => Ok(Outcome::Error(-32601, "Method not found")),
        }
    }

    /// `initialize`: one handshake per conversation, at the version asked if it speaks it
    /// (and it is a legacy one), else at its newest legacy version.
    fn initialize(
        &self,
        params: &Map<String, Value>,
        conv: &mut Conversation,
    ) -> Result<Outcome, i64> {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or(-32602)?;
        if !params.get("capabilities").is_some_and(Value::is_object)
            || !params.get("clientInfo").is_some_and(Value::is_object)
        {
            return Err(-32602);
        }
        let Some(newest) = self.config.newest_legacy() else {
            return Ok(Outcome::Error(-32601, "Method not found"));
        };
        // One handshake per conversation: a second initialize may not renegotiate or
        // take over the session (`any-version` lets it).
        if conv.negotiated.is_some() && !self.config.is(Broken::AnyVersion) {
            return Ok(Outcome::Error(
                -32600,
                "Invalid Request: already initialized",
            ));
        }
        let speaks = self.config.speaks(requested) && !crate::versions::is_modern(requested);
        // `legacy-batch`: agrees to the version that had batches, and allows them.
        let batch_era = self.config.is(Broken::LegacyBatch) && requested == "2025-03-26";
        conv.batches = batch_era;
        let version = if speaks || batch_era || self.config.is(Broken::AnyVersion) {
            requested.to_string()
        } else {
            newest.to_string()
        };
        conv.negotiated = Some(version.clone());
        Ok(Outcome::Result(json!({
            "protocolVersion": version,
            "capabilities": capabilities(),
            "serverInfo": {"name": "mcp-gauntlet-witness", "version": env!("CARGO_PKG_VERSION")}
        })))
    }

    /// `tools/list` and `tools/call`.
    fn tools(&self, method: &str, params: &Map<String, Value>) -> Result<Outcome, i64> {
        if method == "tools/list" {
            return Ok(Outcome::Result(json!({ "tools": tool_list() })));
        }
        let name = params.get("name").and_then(Value::as_str).ok_or(-32602)?;
        let args = match params.get("arguments") {
            None => Map::new(),
            Some(Value::Object(a)) => a.clone(),
            Some(_) => return Err(-32602),
        };
        self.run_tool(name, &args)
    }

    /// `resources/*`: the lists, and a URI read (or subscribed to) the careless way.
    fn resources(
        &self,
        method: &str,
        params: &Map<String, Value>,
        conv: &Conversation,
    ) -> Result<Outcome, i64> {
        match method {
            "resources/list" => {
                return Ok(Outcome::Result(json!({
                    "resources": RESOURCES.iter().map(|(uri, name, _)|
                        json!({"uri": uri, "name": name, "mimeType": "text/plain"})).collect::<Vec<_>>()
                })))
            }
            "resources/templates/list" => {
                return Ok(Outcome::Result(json!({"resourceTemplates": [
                    {"uriTemplate": NOTES_TEMPLATE, "name": "notes", "mimeType": "text/plain"}
                ]})))
            }
            _ => {}
        }
        let uri = params.get("uri").and_then(Value::as_str).ok_or(-32602)?;
        // Like a file server: the URI is resolved before it is looked up.
        let Some((found, _, text)) = RESOURCES
            .iter()
            .find(|(u, _, _)| resolve_uri(uri) == resolve_uri(u))
        else {
            let modern = conv
                .negotiated
                .as_deref()
                .is_some_and(crate::versions::is_modern);
            return Ok(self.read_note(method, uri, modern));
        };
        let secret = *found == SECRET_RESOURCE;
        if method != "resources/read" {
            self.recorder.tool(&format!("{method} {found}"), secret);
            return Ok(Outcome::Result(json!({})));
        }
        self.recorder
            .tool(&format!("resources/read {found}"), secret);
        let text = if secret {
            self.canary_ran();
            self.canary_text()
        } else {
            text.to_string()
        };
        Ok(Outcome::Result(json!({
            "contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]
        })))
    }

    /// `prompts/list` and `prompts/get` (names matched ignoring case, as some servers do).
    fn prompts(&self, method: &str, params: &Map<String, Value>) -> Result<Outcome, i64> {
        if method == "prompts/list" {
            return Ok(Outcome::Result(json!({
                "prompts": PROMPTS.iter().map(|(name, desc)|
                    json!({"name": name, "description": desc})).collect::<Vec<_>>()
            })));
        }
        let name = params.get("name").and_then(Value::as_str).ok_or(-32602)?;
        self.cache_name(name);
        let Some((found, _)) = PROMPTS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
            return Ok(Outcome::Error(-32602, "Unknown prompt"));
        };
        let secret = *found == SECRET_PROMPT;
        self.recorder.tool(&format!("prompts/get {found}"), secret);
        let text = if secret {
            self.canary_ran();
            self.canary_text()
        } else {
            "Say hello.".to_string()
        };
        Ok(Outcome::Result(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}]
        })))
    }

    /// What the canary answers.
    pub(super) fn canary_text(&self) -> String {
        self.config
            .canary_text
            .clone()
            .unwrap_or_else(|| CANARY_MARKER.to_string())
    }

    /// The canary's side channel: a line in `--canary-log`, like a real tool's own log.
    pub(super) fn canary_ran(&self) {
        if let Some(path) = &self.config.canary_log {
            use std::io::Write as _;
            // Best effort: a failed append is not the client's error.
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{CANARY_TOOL} ran");
            }
        }
    }

    /// A URI of its template (`test://notes/a,b`): the note that names those items; anything
    /// else is not found (-32002 before 2026-07-28, which retired that code for -32602).
    fn read_note(&self, method: &str, uri: &str, modern: bool) -> Outcome {
        self.cache_name(uri);
        let items = uri.strip_prefix(NOTES_PREFIX).filter(|path| {
            if self.config.is(Broken::BacktrackingMatcher) {
                backtracking_items(path.as_bytes())
            } else {
                comma_items(path)
            }
        });
        match items {
            Some(path) if method == "resources/read" => Outcome::Result(json!({
                "contents": [{"uri": uri, "mimeType": "text/plain", "text": format!("notes: {path}")}]
            })),
            Some(_) => Outcome::Result(json!({})),
            None if modern => Outcome::Error(-32602, "Resource not found"),
            None => Outcome::Error(-32002, "Resource not found"),
        }
    }

    fn run_tool(&self, name: &str, args: &Map<String, Value>) -> Result<Outcome, i64> {
        let text = |t: String| {
            Outcome::Result(json!({"content": [{"type": "text", "text": t}], "isError": false}))
        };
        let tool_error = |t: &str| {
            Outcome::Result(json!({"content": [{"type": "text", "text": t}], "isError": true}))
        };
        self.cache_name(name);
        if !TOOLS.iter().any(|(n, _)| *n == name) {
            return Ok(Outcome::Error(-32602, "Unknown tool"));
        }
        self.recorder.tool(name, name == CANARY_TOOL);
        if name == CANARY_TOOL {
            self.canary_ran();
        }
        Ok(match name {
            "echo" => match args.get("text").and_then(Value::as_str) {
                Some(t) => text(t.to_string()),
                None => tool_error("echo needs a string `text`"),
            },
            "add" => match (
                args.get("a").and_then(Value::as_f64),
                args.get("b").and_then(Value::as_f64),
            ) {
                (Some(a), Some(b)) => text(format!("{}", a + b)),
                _ => tool_error("add needs numbers `a` and `b`"),
            },
            CANARY_TOOL => text(self.canary_text()),
            "fault_hang" => Outcome::Hang,
            "fault_oversize" => text("x".repeat(2 * 1024 * 1024)),
            "fault_empty" => Outcome::Fault(Fault::Empty),
            "fault_garbage" => Outcome::Fault(Fault::Garbage),
            "fault_close" => Outcome::Fault(Fault::Close),
            "fault_leak" => Outcome::Leak,
            "ask_client" => Outcome::AskClient,
            _ => tool_error("unknown"),
        })
    }
}

/// Tools and their one-line descriptions.
pub(crate) const TOOLS: &[(&str, &str)] = &[
    ("echo", "Returns `text` unchanged."),
    ("add", "Returns a + b."),
    (
        CANARY_TOOL,
        "The canary: denied by the test policy; if it ever runs, it says so in its answer.",
    ),
    ("fault_hang", "Never answers."),
    ("fault_oversize", "Answers with a 2 MiB result."),
    ("fault_empty", "Answers with an empty body."),
    ("fault_garbage", "Answers with bytes that are not JSON."),
    ("fault_close", "Drops the connection without answering."),
    (
        "fault_leak",
        "Answers with an error whose message and data hold a stack trace, a path and a token.",
    ),
    (
        "ask_client",
        "Sends the client a sampling/createMessage request, then answers without waiting for it (2026-07-28: asks for a sample in an input_required result, and completes on the retry).",
    ),
];

/// `ask_client` in 2026-07-28, where a server asks the client only through its answer (a multi
/// round-trip request): the first round is an `input_required` result asking the client to
/// sample; the retry, carrying `inputResponses`, completes. A client that did not declare
/// `sampling` is not asked (the tool reports that it could not ask).
pub(super) fn ask_for_input(params: &Map<String, Value>, capabilities: Option<&Value>) -> Value {
    let text = |t: &str| {
        json!({"content": [{"type": "text", "text": t}], "isError": false,
                                 "resultType": "complete"})
    };
    if params.get("inputResponses").is_some_and(Value::is_object) {
        return text("the client's input was received");
    }
    if capabilities.and_then(|c| c.get("sampling")).is_none() {
        let mut r = text("the client cannot sample");
        r["isError"] = json!(true);
        return r;
    }
    json!({
        "resultType": "input_required",
        "inputRequests": {"sample": {"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say something."}}],
            "maxTokens": 16}}},
        "requestState": "witness-round-1"
    })
}

/// The witness's capabilities (legacy `initialize` and modern `server/discover`).
pub(super) fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": false},
        "resources": {"subscribe": true, "listChanged": false},
        "prompts": {"listChanged": false}
    })
}

/// The resource a gate's policy denies (`fixtures/gate/witness-policy.json`): reading it is the
/// canary, and its text is the canary's.
pub(crate) const SECRET_RESOURCE: &str = "test://secret/key";
/// The prompt the policy does not allow: getting it is the canary.
pub(crate) const SECRET_PROMPT: &str = crate::canary::DENIED_PROMPT;

/// Resources: URI, name, text.
pub(crate) const RESOURCES: &[(&str, &str, &str)] = &[
    ("test://public/readme", "readme", "A public text."),
    (SECRET_RESOURCE, "key", ""),
];

/// Prompts and their descriptions.
pub(crate) const PROMPTS: &[(&str, &str)] = &[
    ("greet", "A greeting."),
    (
        SECRET_PROMPT,
        "The canary prompt: not allowed by the test policy.",
    ),
];

/// How the witness finds a resource, like a careless file server: every escape decoded, `.`
/// and `..` segments resolved, case folded. A gate must judge a URI the way its downstream
/// will read it, or refuse it.
pub(super) fn resolve_uri(uri: &str) -> String {
    let bytes = uri.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(v)) => {
                decoded.push(v);
                i += 3;
            }
            (b'\\', _) => {
                decoded.push(b'/');
                i += 1;
            }
            (b, _) => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8_lossy(&decoded).to_ascii_lowercase();
    let (head, path) = match text.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest.to_string()),
        None => (String::new(), text),
    };
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "." => {}
            ".." => {
                // Like a file server's path: the authority is just the first directory.
                out.pop();
            }
            s => out.push(s),
        }
    }
    head + &out.join("/")
}

fn tool_list() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|(name, desc)| {
            let schema = match *name {
                "echo" => json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                "add" => json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
                _ => json!({"type": "object", "properties": {}}),
            };
            json!({"name": name, "description": desc, "inputSchema": schema})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{backtracking_items, comma_items};

    #[test]
    fn both_matchers_agree_on_what_matches() {
        for path in [
            "a", "a,b", "a,b,c", "", "a,", ",a", "a//b", "a/b", "a,,b", "a,b/x",
        ] {
            assert_eq!(
                comma_items(path),
                backtracking_items(path.as_bytes()),
                "{path:?}"
            );
        }
    }
}
