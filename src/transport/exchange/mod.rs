//! One case over one transport: the MCP handshake (when the case wants a session), the case's
//! bytes, the answer, the witness's record, and the alive probe, all before their deadlines.

use super::http::{self, HttpResponse, HttpUrl, SseRead, Wire};
use super::pacing::{Order, Pacing, Probed};
use super::stdio::{Line, StdioCommand, StdioProcess};
use super::{Ending, HttpSeen, Observation, TransportError};
use crate::case::{Body, BodySpec, Caller, Case, Placeholders, SessionMode};
use crate::mapping::CallMapping;
use crate::record::{Event, LogReader, WitnessView};
use crate::settings::Speaking;
use crate::versions::{self, Version};
use base64::Engine as _;
use reference_gate::error_chain as chain;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

mod clients;
mod facts;
mod held;
mod http_request;
mod over_http;
mod over_sse;
mod over_stdio;
mod probe;
mod series;
mod stdio_request;
mod stdio_series;

pub use self::facts::Facts;
use self::over_http::run_http;
use self::over_sse::run_sse;
pub(crate) use self::over_sse::{SseOpenError, SseSession};
use self::over_stdio::{run_stdio, StdioTarget};
use self::probe::order_probe;
pub(crate) use self::probe::{probe, probe_sse, Probe};

/// The id of the runner's own initialize, barrier and probe requests.
pub(crate) const INIT_ID: &str = "gauntlet-init";
pub(crate) const BARRIER_ID: &str = "gauntlet-barrier";
pub(crate) const PROBE_ID: &str = "gauntlet-alive";
/// The id of the alive probe's call of the allowed tool (`"alive_probe": "downstream"`).
pub(crate) const PROBE_CALL_ID: &str = "gauntlet-alive-call";
/// How much answer text the oracles scan.
const SCAN_KEEP: usize = 1024 * 1024;
const PREFIX_KEEP: usize = 512;

/// Where the cases go.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Http(HttpUrl),
    /// A stdio server started afresh for every case. If the command holds `{witness_log}`, each
    /// case gets its own log file there and the runner reads it as the witness's record.
    Stdio {
        command: String,
        log_dir: Option<std::path::PathBuf>,
        /// What the run learned about how the target orders its answers (the settle window).
        pacing: std::sync::Arc<Pacing>,
    },
    /// An HTTP+SSE (2024-11-05) endpoint: the URL whose GET opens the event stream.
    Sse(HttpUrl),
}

impl Endpoint {
    /// A stdio target started with `command` for every case (see [`Endpoint::Stdio`]).
    pub fn stdio(command: impl Into<String>, log_dir: Option<std::path::PathBuf>) -> Endpoint {
        Endpoint::Stdio {
            command: command.into(),
            log_dir,
            pacing: std::sync::Arc::default(),
        }
    }
}

/// What a handshake established.
#[derive(Debug, Clone, Default)]
struct Handshake {
    session: Option<String>,
    version: String,
    /// The `serverInfo` name of the `initialize` answer.
    server: Option<String>,
}

/// What reached the witness since `mark`, less the runner's own barrier (stdio, HTTP+SSE): the
/// case's record.
fn case_record(w: &WitnessView, mark: usize) -> Vec<Event> {
    w.since(mark)
        .into_iter()
        .filter(|e| !matches!(e, Event::Message { raw, .. } if raw.contains(BARRIER_ID)))
        .collect()
}

/// The tool-name placeholders for a denied and an allowed tool spelled `denied` and `allowed`.
fn set_tool_names(p: &mut Placeholders, denied: &str, allowed: &str) {
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t.as_bytes());
    // The denied name with its first character as a JSON escape, for text bodies.
    let escaped = match denied.chars().next() {
        Some(c) => {
            let mut units = [0u16; 2];
            let escapes: String = c
                .encode_utf16(&mut units)
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect();
            escapes + &denied[c.len_utf8()..]
        }
        None => String::new(),
    };
    p.set("denied_tool", denied)
        .set("allowed_tool", allowed)
        .set("denied_tool_b64", b64(denied))
        .set("allowed_tool_b64", b64(allowed))
        .set("denied_tool_escaped", escaped);
}

/// The prompt-name placeholders for the denied prompt spelled `denied`: as it is, and in
/// capitals (what a case-insensitive reader takes for it).
fn set_prompt_names(p: &mut Placeholders, denied: &str) {
    p.set("denied_prompt", denied)
        .set("denied_prompt_upper", denied.to_uppercase());
}

/// Run the case of `t` (its facts, prepared once) against `endpoint`. `witness` is where the
/// runner reads what reached the witness (for a stdio endpoint with `{witness_log}` the per-case
/// log is used instead).
pub async fn run_case(
    t: &Facts<'_>,
    endpoint: &Endpoint,
    witness: Option<&WitnessView>,
    watch: Option<&super::procfs::Watch>,
    check_alive: bool,
) -> Observation {
    let started = Instant::now();
    let settings = t.settings;
    // The side channel's length before the case: whatever is appended after is this case's.
    let log_start = settings
        .canary_log
        .as_ref()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()));
    let mut obs = match endpoint {
        Endpoint::Http(url) => match &t.case.spec.series {
            Some(series) => match &series.hold {
                Some(hold) => {
                    held::run_held(t, (series, hold), url, (witness, watch), check_alive).await
                }
                None => series::run_series(t, series, url, (witness, watch), check_alive).await,
            },
            None => run_http(t, url, witness, check_alive).await,
        },
        Endpoint::Stdio {
            command,
            log_dir,
            pacing,
        } => {
            let target = StdioTarget {
                command,
                log_dir: log_dir.as_deref(),
                pacing,
            };
            match &t.case.spec.series {
                Some(series) => {
                    stdio_series::run_stdio_series(t, series, &target, witness, check_alive).await
                }
                None => run_stdio(t, &target, witness, check_alive).await,
            }
        }
        Endpoint::Sse(url) => run_sse(t, url, (witness, watch), check_alive).await,
    };
    obs.elapsed = started.elapsed();
    obs.sent.meta = t.meta.clone();
    if let (Some(path), Some(start)) = (&settings.canary_log, log_start) {
        obs.after.canary_log = Some(appended_since(path, start));
    }
    obs
}

/// What was appended to `path` after its first `start` bytes (at most 4 KiB of it, lossy).
fn appended_since(path: &std::path::Path, start: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let mut buf = Vec::new();
    // A log that shrank was rotated or truncated: read it from the start.
    let len = f.metadata().map_or(0, |m| m.len());
    let from = if len < start { 0 } else { start };
    if f.seek(SeekFrom::Start(from)).is_err() {
        return String::new();
    }
    let _ = f.take(4096).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Further HTTP responses in the bytes read after the first one on a connection, with the
/// JSON-RPC messages in each one's body (JSON or SSE).
pub(crate) fn trailing_answers(bytes: &[u8]) -> Vec<super::TrailingAnswer> {
    http::responses_in(bytes)
        .into_iter()
        .map(|(status, body)| {
            let messages = match crate::reading::answer_json(&body) {
                Some(v) => vec![v],
                None => http::sse_messages(&body).into_iter().flatten().collect(),
            };
            super::TrailingAnswer { status, messages }
        })
        .collect()
}

/// How many of the case's bytes a failure message shows.
const SENT_SHOWN: usize = 200;

/// Note what the case's body says about itself, once, whichever transport carries it: its id,
/// method, and whether it is a request, for the transport and the judge alike. Returns the body
/// as the runner reads it (a plain JSON reading), when it can.
fn note_request(sent: &mut super::Sent, body: &Body, settings: &Speaking) -> Option<Value> {
    sent.expects_response = true;
    sent.prefix = body.prefix(SENT_SHOWN);
    sent.len = body.len();
    let bytes = body.to_vec_within(8 * 1024 * 1024)?;
    sent.extent = Some(super::Extent::of(&bytes));
    sent.denied_ids = denied_call_ids(&bytes, &settings.denied_tool, &settings.mapping);
    sent.detectable_id = crate::reading::detectable_id(&bytes);
    // Only where no plain reading detects one (the lenient reading reads it too).
    sent.repaired_id = sent
        .detectable_id
        .is_none()
        .then(|| crate::reading::repaired_id(&bytes))
        .flatten();
    sent.ambiguous = crate::reading::ambiguous(&bytes);
    // A BOM is skipped here so the runner can know the id of a request a server may accept.
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
    let value = serde_json::from_slice::<Value>(bytes).ok()?;
    sent.batch = super::BatchSent::of(&value);
    if let Value::Object(o) = &value {
        sent.readable = true;
        sent.id = o.get("id").cloned();
        sent.expects_response = o.contains_key("id");
        sent.method = o.get("method").and_then(Value::as_str).map(str::to_string);
    }
    Some(value)
}

/// Ids that every reading of `bytes` (each personality's, over the whole body and over each
/// line) gives to a `tools/call` of `denied_tool` (spelled through `mapping`), and no reading
/// gives to anything else. An id that some reading takes as another method or tool (a duplicate
/// `name`, say) is left out: its successful answer could be the harmless reading's.
pub(crate) fn denied_call_ids(
    bytes: &[u8],
    denied_tool: &str,
    mapping: &CallMapping,
) -> Vec<Value> {
    let mut denied: Vec<Value> = Vec::new();
    let mut other: Vec<Value> = Vec::new();
    let visit = |m: &Value| {
        let Some(id) = m.get("id").filter(|i| !i.is_null()) else {
            return;
        };
        let is_denied = m.get("method").and_then(Value::as_str) == Some("tools/call")
            && m.get("params")
                .and_then(|p| mapping.called_tool(p))
                .as_deref()
                == Some(denied_tool);
        let list = if is_denied { &mut denied } else { &mut other };
        if !list.contains(id) {
            list.push(id.clone());
        }
    };
    crate::reading::each_message_read(bytes, visit);
    denied.retain(|id| !other.contains(id));
    denied
}

/// The body as a lenient JSON reader takes it (comments, NaN, BOM, repaired UTF-8, last
/// duplicate wins), when that reading is one message.
fn lenient_reading(body: &Body) -> Option<Value> {
    let bytes = body.to_vec_within(8 * 1024 * 1024)?;
    let mut values = crate::reading::read(crate::reading::Personality::Lenient, &bytes).ok()?;
    (values.len() == 1).then(|| values.remove(0))
}

/// What `{{meta}}` stands for: the modern `_meta` in a modern lane, else an empty object.
fn meta_placeholder(settings: &Speaking) -> Value {
    if settings.version.is_modern() {
        versions::request_meta(settings.version)
    } else {
        json!({})
    }
}

/// The placeholders an exchange fills in from what it learned of the target.
const LEARNED: &[&str] = &[
    "host",
    "path",
    "path_upper",
    "message_path",
    "session_param",
    "protocol_version",
    "session_id",
    "client",
];

/// The case's body with placeholders replaced (`ph`, the client's spelling). A JSON body is
/// written with the tools' own names and then has every `tools/call` rewritten through the call
/// mapping (whatever tool it names), gets `caller`'s identity arguments, and the modern `_meta`
/// when `modern`; a text body's calls are written into a meta-tool's arguments, where there is
/// one.
fn case_body(
    ph: &Placeholders,
    spec: Option<&BodySpec>,
    modern: Option<Version>,
    settings: &Speaking,
    caller: Option<Caller>,
) -> Body {
    let mapped = !settings.mapping.is_direct();
    let identity = settings
        .identity
        .as_ref()
        .filter(|i| !i.argument_names().is_empty());
    match spec {
        Some(BodySpec::Json(v)) if mapped || identity.is_some() || modern.is_some() => {
            let mut value = if mapped {
                let mut own = ph.clone();
                set_tool_names(&mut own, &settings.denied_tool, &settings.allowed_tool);
                let mut value = own.apply_json_value(v);
                settings.mapping.rewrite(&mut value);
                value
            } else {
                ph.apply_json_value(v)
            };
            if let Some(identity) = identity {
                identity.add_arguments(&mut value, caller);
            }
            if let Some(version) = modern {
                versions::add_meta(&mut value, version);
            }
            Body::from_bytes(serde_json::to_vec(&value).expect("a JSON value serializes"))
        }
        // Through a meta-tool, a text body's calls are written into its arguments.
        Some(spec) => ph.body(Some(&settings.mapping.text_body(spec))),
        None => ph.body(None),
    }
}

/// The server a result names: `serverInfo.name` (an `initialize` result) or the `_meta`
/// serverInfo of a 2026-07-28 result.
fn server_name(result: &Value) -> Option<String> {
    result
        .pointer("/serverInfo/name")
        .or_else(|| {
            result
                .get("_meta")?
                .get("io.modelcontextprotocol/serverInfo")?
                .get("name")
        })
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The request the runner's alive probe and stdio barrier send: `ping`, which 2026-07-28
/// removed; there `server/discover`, which every modern server must implement.
fn liveness_method(settings: &Speaking) -> &'static str {
    if settings.version.is_modern() {
        "server/discover"
    } else {
        "ping"
    }
}

/// The alive probe's call of the allowed tool (`"alive_probe": "downstream"`).
fn probe_call(settings: &Speaking) -> Value {
    allowed_call(settings, PROBE_CALL_ID, "gauntlet-alive")
}

/// A runner-made call of the allowed tool with `text` (id `id`): spelled through the call
/// mapping, with the run's identity arguments, in the lane's era.
fn allowed_call(settings: &Speaking, id: &str, text: &str) -> Value {
    let mut arguments = serde_json::Map::new();
    arguments.insert(settings.allowed_arg.clone(), json!(text));
    let (name, arguments) = settings
        .mapping
        .call(&settings.allowed_tool, Value::Object(arguments));
    let mut m = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}});
    if let Some(identity) = &settings.identity {
        identity.add_arguments(&mut m, None);
    }
    if settings.version.is_modern() {
        versions::add_meta(&mut m, settings.version);
    }
    m
}

/// Whether the answer to the probe's call shows that it reached a tool: a result that is not a
/// tool error. Why not, when it does not.
fn probe_call_answered(answer: &Value) -> Result<(), String> {
    match answer.get("result") {
        Some(r) if r.get("isError") != Some(&Value::Bool(true)) => Ok(()),
        _ => {
            let text: String = answer.to_string().chars().take(300).collect();
            Err(format!(
                "a call of the allowed tool after the case was answered with {text}"
            ))
        }
    }
}

/// A runner-made request (ping, initialize) in the lane's era.
fn own_request(settings: &Speaking, id: &str, method: &str) -> Value {
    let mut m = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if settings.version.is_modern() {
        versions::add_meta(&mut m, settings.version);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_ids_are_those_every_reading_agrees_on() {
        let direct = CallMapping::default();
        let plain = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_everything"}}"#;
        assert_eq!(
            denied_call_ids(plain, "delete_everything", &direct),
            vec![json!(7)]
        );
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_everything"}}]"#;
        assert_eq!(
            denied_call_ids(batch, "delete_everything", &direct),
            vec![json!(2)]
        );
        // Duplicate names: one reading calls echo with the same id, so a result proves nothing.
        let dup = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"delete_everything"}}"#;
        assert!(denied_call_ids(dup, "delete_everything", &direct).is_empty());
        let dup_method = br#"{"jsonrpc":"2.0","id":4,"method":"ping","method":"tools/call","params":{"name":"delete_everything"}}"#;
        assert!(denied_call_ids(dup_method, "delete_everything", &direct).is_empty());
        // A BOM and invalid UTF-8 elsewhere do not hide the call from the lenient reading.
        let bom = b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_everything\",\"arguments\":{\"t\":\"\xff\"}}}";
        assert_eq!(
            denied_call_ids(bom, "delete_everything", &direct),
            vec![json!(5)]
        );
    }

    #[test]
    fn trailing_answers_are_read_as_http_responses() {
        let bytes = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}HTTP/1.1 400 Bad Request\r\ntransfer-encoding: chunked\r\n\r\n5\r\nerror\r\n0\r\n\r\n";
        let got = trailing_answers(bytes);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].status, 200);
        assert_eq!(
            got[0].messages,
            vec![json!({"jsonrpc":"2.0","id":7,"result":{}})]
        );
        assert_eq!(got[1].status, 400);
        assert!(got[1].messages.is_empty());
        let sse = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        assert_eq!(trailing_answers(sse)[0].messages.len(), 1);
        assert!(trailing_answers(b"").is_empty());
    }
}
