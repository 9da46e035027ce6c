//! Probes of a target before its cases: which versions it accepts (`probe`), and whether a
//! stdio server answers in order (`order_probe`).

use super::http_request::{http_handshake, http_messages, post_own};
use super::stdio_request::{line_body, read_until_answer};
use super::*;

/// The id of the runner's version probe.
pub(crate) const DISCOVER_ID: &str = "gauntlet-discover";

/// What the version probe learned about a target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Probe {
    /// Known versions the target accepts, oldest first: modern ones listed by `server/discover`
    /// (or by its unsupported-version error), legacy ones whose `initialize` it answered with
    /// that very version.
    pub accepted: Vec<Version>,
    /// Legacy versions it served over HTTP without issuing an `Mcp-Session-Id` (stateless).
    pub stateless: Vec<Version>,
    /// Legacy versions it answered `initialize` for with another version (negotiated away),
    /// and that version as the answer wrote it.
    pub countered: Vec<(Version, String)>,
    /// Versions whose probe got no answer at all (a deadline passed, the connection failed)
    /// in [`PROBE_TRIES`] tries: whether the target offers them could not be told. They are
    /// not tested, and the summary says so.
    pub unclear: Vec<Version>,
    /// The `serverInfo` names `initialize` was answered with.
    pub initialized_by: Vec<String>,
    /// The server name a `server/discover` answer gave (its `_meta` serverInfo).
    pub discovered_by: Option<String>,
    /// Legacy versions whose `initialize` got an answer agreeing to no version, with what the
    /// answer was (`HTTP 401 …`), cut short.
    pub refused: Vec<(Version, String)>,
    /// Modern versions `server/discover` listed whose requests the target then refused (a
    /// `ping` of that version answered with an error), with what it answered: advertised, not
    /// spoken, and not tested.
    pub advertised_refused: Vec<(Version, String)>,
    /// HTTP+SSE: the stream's `endpoint` event named a message URL on another origin (as sent),
    /// where the runner posts nothing: the lane runs, and only the case that judges the endpoint
    /// applies.
    pub sse_elsewhere: Option<String>,
    /// HTTP: `initialize` of 2025-03-26 (a version whose JSON-RPC takes batches) was agreed
    /// to. Not a version the suite tests, but a batch that claims it is legal there.
    pub batch_era: bool,
}

/// How many times a probe that got no answer at all is sent before its version is "could not
/// tell": a loaded target may miss one deadline; a mute one costs three.
pub(crate) const PROBE_TRIES: usize = 3;

impl Probe {
    /// Every server name the probes were answered with (`serverInfo`), once each.
    pub(crate) fn servers(&self) -> Vec<String> {
        let mut names = self.initialized_by.clone();
        names.extend(self.discovered_by.iter().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// Whether the target keeps no sessions (every accepted legacy version was stateless).
    pub(crate) fn is_stateless(&self) -> bool {
        !self.stateless.is_empty()
    }

    /// Whether every probe was answered, and none the way an MCP server does: no version
    /// accepted or answered with another, no `serverInfo`, no `server/discover`. (A target
    /// that left probes unanswered may only be slow to start: it is not judged by them.)
    pub(crate) fn speaks_nothing(&self) -> bool {
        self.accepted.is_empty()
            && self.countered.is_empty()
            && self.initialized_by.is_empty()
            && self.discovered_by.is_none()
            && self.unclear.is_empty()
    }

    /// What the first refused `initialize` was answered with: `initialize 2025-06-18 was
    /// answered: …`.
    pub(crate) fn first_refusal(&self) -> Option<String> {
        self.refused
            .first()
            .map(|(v, why)| format!("initialize {v} was answered: {why}"))
    }

    /// One line for the console: what was found.
    pub fn summary(&self) -> String {
        let shown: Vec<String> = self
            .accepted
            .iter()
            .map(|v| {
                if self.stateless.contains(v) {
                    format!("{v} (stateless: no Mcp-Session-Id)")
                } else {
                    v.to_string()
                }
            })
            .collect();
        let missing: Vec<Version> = versions::KNOWN
            .iter()
            .copied()
            .filter(|v| !self.accepted.contains(v) && !self.unclear.contains(v))
            .collect();
        let mut line = if shown.is_empty() {
            "the target accepted no known protocol version".to_string()
        } else {
            format!("the target accepts {}", shown.join(", "))
        };
        if !missing.is_empty() {
            line.push_str(&format!(
                "; not offered, not tested: {}",
                versions::list(&missing, ", ")
            ));
        }
        if !self.unclear.is_empty() {
            line.push_str(&format!(
                "; could not tell (no answer to {PROBE_TRIES} probes), not tested: {} (name them with --spec to test them)",
                versions::list(&self.unclear, ", ")
            ));
        }
        for (asked, got) in &self.countered {
            line.push_str(&format!("; initialize {asked} was answered with {got}"));
        }
        if self.batch_era {
            line.push_str("; it also agrees to 2025-03-26, where batches are legal (on a server, a batch claiming that version is not judged unless --strict)");
        }
        for (v, why) in &self.advertised_refused {
            line.push_str(&format!(
                "; advertises {v} but refuses its requests (a ping of {v} was answered {why}): not tested"
            ));
        }
        if let Some(relayed) = self.relayed_discover() {
            line.push_str(&format!(
                "; note: server/discover was answered by `{relayed}` but initialize by `{}`: \
                 the modern versions may be offered only because a proxy relays server/discover \
                 to the server behind it (their lanes judge how the proxy handles what it relays)",
                self.initialized_by.join("`, `")
            ));
        }
        line
    }

    /// The server that answered `server/discover`, when modern versions were found that way
    /// and `initialize` was answered by other servers only: a proxy that speaks the legacy
    /// versions itself and relays the methods it does not know.
    pub(crate) fn relayed_discover(&self) -> Option<&str> {
        let by = self.discovered_by.as_deref()?;
        let modern = self.accepted.iter().any(|v| v.is_modern());
        (modern && !self.initialized_by.is_empty() && !self.initialized_by.iter().any(|n| n == by))
            .then_some(by)
    }
}

/// Every known version `endpoint` accepts: one `initialize` per legacy version (accepted when
/// the answer agrees to that version; over HTTP, stateless when no `Mcp-Session-Id` came with
/// it), then a modern `server/discover` (its `supportedVersions`, or the `supported` list of an
/// unsupported-version error). Each probe uses a fresh connection or process; one that hears
/// nothing at all is sent again, up to [`PROBE_TRIES`] times, and its version is then
/// [`Probe::unclear`], never counted as not offered.
/// The probe of an HTTP+SSE stream: whether `initialize` for 2024-11-05 (the transport's one
/// version) is answered with it on the stream, tried as often as any version's probe.
pub(crate) async fn probe_sse(endpoint: &Endpoint, settings: &Speaking) -> Probe {
    let mut out = Probe::default();
    let sse = settings.speaking(versions::SSE);
    let mut answer = Heard::Nothing;
    for _ in 0..PROBE_TRIES {
        answer = legacy_probe(endpoint, &sse).await;
        if answer != Heard::Nothing {
            break;
        }
    }
    match answer {
        Heard::Agreed(a, _, server) if versions::SSE == a.as_str() => {
            out.initialized_by.extend(server);
            out.accepted.push(versions::SSE);
        }
        Heard::Agreed(other, _, server) => {
            out.initialized_by.extend(server);
            out.countered.push((versions::SSE, other));
        }
        Heard::Refused(why) => out.refused.push((versions::SSE, why)),
        Heard::Nothing => out.unclear.push(versions::SSE),
        Heard::Elsewhere(endpoint) => {
            out.accepted.push(versions::SSE);
            out.sse_elsewhere = Some(endpoint);
        }
    }
    out
}

impl Probe {
    /// What [`probe_sse`] found, in words.
    pub(crate) fn sse_summary(&self) -> String {
        if let Some(endpoint) = &self.sse_elsewhere {
            return format!("the HTTP+SSE stream names its message URL on another origin ({endpoint}), where the runner posts nothing: only sse/endpoint-names-the-stream-origin applies");
        }
        if self.accepted.contains(&versions::SSE) {
            return format!("the HTTP+SSE stream accepts {}", versions::SSE);
        }
        if let Some((_, got)) = self.countered.first() {
            return format!(
                "initialize {} on the HTTP+SSE stream was answered with {got} (its lanes speak {} as that transport does)",
                versions::SSE,
                versions::SSE
            );
        }
        if let Some((_, why)) = self.refused.first() {
            return format!("the HTTP+SSE stream refused initialize: {why}");
        }
        "the HTTP+SSE stream answered no initialize".into()
    }
}

pub async fn probe(endpoint: &Endpoint, settings: &Speaking) -> Probe {
    let mut out = Probe::default();
    let modern = settings.speaking(versions::NEWEST);
    for &v in versions::KNOWN.iter().filter(|v| !v.is_modern()) {
        let legacy = settings.speaking(v);
        let mut answer = Heard::Nothing;
        for _ in 0..PROBE_TRIES {
            answer = legacy_probe(endpoint, &legacy).await;
            if answer != Heard::Nothing {
                break;
            }
        }
        match answer {
            Heard::Agreed(a, session, server) if v == a.as_str() => {
                out.initialized_by.extend(server);
                out.accepted.push(v);
                if session == Some(false) {
                    out.stateless.push(v);
                }
            }
            Heard::Agreed(other, _, server) => {
                out.initialized_by.extend(server);
                out.countered.push((v, other));
            }
            Heard::Refused(why) => out.refused.push((v, why)),
            Heard::Nothing | Heard::Elsewhere(_) => out.unclear.push(v),
        }
    }
    out.batch_era = batch_era(endpoint, settings).await;
    // A legacy server may leave a method it does not know unanswered over stdio: silence to
    // server/discover from a target that answered initialize says it offers no modern version.
    let answered_legacy = out.accepted.len() + out.countered.len() > 0;
    let mut listed = None;
    for _ in 0..PROBE_TRIES {
        listed = discover_probe(endpoint, &modern).await;
        if listed.is_some() || answered_legacy {
            break;
        }
    }
    match listed {
        Some((listed, by)) => {
            out.discovered_by = by;
            out.accepted
                .extend(listed.into_iter().filter(|v| v.is_modern()));
        }
        None if answered_legacy => {}
        None => out
            .unclear
            .extend(versions::KNOWN.iter().filter(|v| v.is_modern())),
    }
    confirm_modern(endpoint, settings, &mut out).await;
    out.accepted.sort();
    out.accepted.dedup();
    out.initialized_by.sort();
    out.initialized_by.dedup();
    out.unclear.sort();
    out
}

/// Each modern version `server/discover` listed, tried with a `ping` of that version: one the
/// target refuses (an error answer; a proxy that relays `server/discover` to a modern server
/// behind it and refuses every request without a session, say) is advertised but not spoken,
/// so it is not tested, and the probe says so once instead of every case failing on it.
async fn confirm_modern(endpoint: &Endpoint, settings: &Speaking, out: &mut Probe) {
    let modern: Vec<Version> = out
        .accepted
        .iter()
        .copied()
        .filter(|v| v.is_modern())
        .collect();
    for v in modern {
        let speaking = settings.speaking(v);
        let ping = own_request(&speaking, PING_PROBE_ID, "ping");
        let answer = match endpoint {
            Endpoint::Http(url) => {
                let deadline = Instant::now() + speaking.probe_timeout;
                match post_own(url, &speaking, None, &ping, deadline).await {
                    Ok(resp) => http_messages(&resp)
                        .0
                        .into_iter()
                        .find(|m| m.get("id") == Some(&json!(PING_PROBE_ID))),
                    Err(_) => None,
                }
            }
            Endpoint::Stdio { command, .. } => {
                stdio_probe(command, &ping, PING_PROBE_ID, speaking.probe_timeout).await
            }
            Endpoint::Sse(_) => None,
        };
        // An error that says the method is unknown read the request and spoke the version
        // (a server of that version may serve no `ping`); any other error refused it.
        let refused = answer
            .as_ref()
            .and_then(|a| a.get("error"))
            .filter(|e| e.get("code").and_then(Value::as_i64) != Some(METHOD_NOT_FOUND));
        if let Some(error) = refused {
            out.accepted.retain(|a| *a != v);
            out.advertised_refused.push((v, short(&error.to_string())));
        }
    }
}

/// JSON-RPC's code for a method the server does not have.
const METHOD_NOT_FOUND: i64 = -32601;

/// The id of the `ping` that confirms a modern version.
const PING_PROBE_ID: &str = "gauntlet-modern-ping";

/// A refusal's text for the console, on one line and cut at 160 characters.
fn short(text: &str) -> String {
    let one: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one = one.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

/// What one probe heard.
#[derive(Debug, PartialEq)]
enum Heard {
    /// `initialize` answered with this version (over HTTP: with a session id or not), by the
    /// server its `serverInfo` names.
    Agreed(String, Option<bool>, Option<String>),
    /// An answer that agrees to no version (an error, a refusal status), and what it was.
    Refused(String),
    /// No answer at all: a deadline passed, the connection failed, the process never wrote.
    Nothing,
    /// HTTP+SSE: a stream whose `endpoint` event names another origin (as sent).
    Elsewhere(String),
}

/// One `initialize` for the version of `settings`, on a fresh connection or process.
/// Whether an HTTP target agrees to `initialize` at 2025-03-26, the last version with batches
/// (one try: an unanswered probe leaves the batch cases applying, which is the stricter way).
async fn batch_era(endpoint: &Endpoint, settings: &Speaking) -> bool {
    const LAST_WITH_BATCHES: Version = Version::new(2025, 3, 26);
    if !matches!(endpoint, Endpoint::Http(_)) {
        return false;
    }
    let asked = settings.speaking(LAST_WITH_BATCHES);
    matches!(
        legacy_probe(endpoint, &asked).await,
        Heard::Agreed(a, _, _) if LAST_WITH_BATCHES == a.as_str()
    )
}

async fn legacy_probe(endpoint: &Endpoint, settings: &Speaking) -> Heard {
    match endpoint {
        Endpoint::Http(url) => {
            let deadline = Instant::now() + settings.probe_timeout;
            match http_handshake(url, settings, deadline).await {
                Ok(hs) => Heard::Agreed(hs.version, Some(hs.session.is_some()), hs.server),
                Err(TransportError::Handshake(why)) => Heard::Refused(short(&why)),
                Err(_) => Heard::Nothing,
            }
        }
        Endpoint::Stdio { command, .. } => {
            let init = initialize_request(settings.version);
            let Some(answer) = stdio_probe(command, &init, INIT_ID, settings.probe_timeout).await
            else {
                return Heard::Nothing;
            };
            let result = answer.get("result");
            let server = result.and_then(server_name);
            result
                .and_then(|r| r.get("protocolVersion")?.as_str())
                .map_or_else(
                    || Heard::Refused(short(&answer.to_string())),
                    |v| Heard::Agreed(v.to_string(), None, server),
                )
        }
        Endpoint::Sse(url) => {
            let deadline = Instant::now() + settings.probe_timeout;
            let mut session = match SseSession::open(url, settings, deadline).await {
                Ok(session) => session,
                Err(super::over_sse::SseOpenError::OtherOrigin(endpoint)) => {
                    return Heard::Elsewhere(endpoint)
                }
                Err(_) => return Heard::Nothing,
            };
            match session.handshake(settings, deadline).await {
                Ok(version) => Heard::Agreed(version, None, None),
                Err(why) => Heard::Refused(short(&why)),
            }
        }
    }
}

/// The versions and the server name of a `server/discover` answer.
fn discovered_by(messages: &[Value]) -> (Vec<Version>, Option<String>) {
    let answer = messages
        .iter()
        .find(|m| m.get("id") == Some(&json!(DISCOVER_ID)));
    let list = answer
        .and_then(|m| discovered(m, DISCOVER_ID))
        .unwrap_or_default();
    let by = answer.and_then(|m| m.get("result")).and_then(server_name);
    (list, by)
}

/// One `server/discover`, on a fresh connection or process: the versions it lists (empty when
/// it answered without a list) and the server it names, or `None` when nothing answered.
async fn discover_probe(
    endpoint: &Endpoint,
    modern: &Speaking,
) -> Option<(Vec<Version>, Option<String>)> {
    let discover = own_request(modern, DISCOVER_ID, "server/discover");
    match endpoint {
        Endpoint::Http(url) => {
            let deadline = Instant::now() + modern.probe_timeout;
            let resp = post_own(url, modern, None, &discover, deadline)
                .await
                .ok()?;
            let (msgs, _) = http_messages(&resp);
            Some(discovered_by(&msgs))
        }
        Endpoint::Stdio { command, .. } => {
            let short = modern.probe_timeout.min(Duration::from_secs(3));
            let answer = stdio_probe(command, &discover, DISCOVER_ID, short).await?;
            Some(discovered_by(std::slice::from_ref(&answer)))
        }
        // The transport of 2024-11-05 carries no modern version.
        Endpoint::Sse(_) => Some((Vec::new(), None)),
    }
}

/// The runner's `initialize` asking for `version`.
pub(super) fn initialize_request(version: Version) -> Value {
    json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}})
}

/// A fresh process of the stdio `command` for a probe; a `{witness_log}` command logs to a
/// throwaway file, removed by [`end_probe`].
pub(super) fn start_probe(command: &str) -> Option<(StdioProcess, std::path::PathBuf)> {
    let log = std::env::temp_dir().join(format!(
        "mcp-gauntlet-probe-{}-{:016x}.jsonl",
        std::process::id(),
        rand::random::<u64>()
    ));
    let command = command.replace("{witness_log}", &shell_words::quote(&log.to_string_lossy()));
    let proc = StdioCommand::parse(&command)
        .and_then(|c| StdioProcess::spawn(&c))
        .ok()?;
    Some((proc, log))
}

pub(super) async fn end_probe(proc: StdioProcess, log: &std::path::Path) {
    proc.kill().await;
    let _ = std::fs::remove_file(log);
}

/// Start the stdio server afresh, send one request and read until its answer (bounded by
/// `wait`); the process is killed after.
pub(super) async fn stdio_probe(
    command: &str,
    request: &Value,
    id: &str,
    wait: Duration,
) -> Option<Value> {
    let (mut proc, log) = start_probe(command)?;
    proc.send(line_body(request)).await;
    let (answer, _, _) = read_until_answer(&mut proc, id, Instant::now() + wait).await;
    end_probe(proc, &log).await;
    answer
}

/// The order probe (see `pacing`): a fresh process of `command` gets, four times, a
/// `tools/call` of the allowed tool and a barrier request in one write, and is watched for which
/// it answers first and how long the pair takes. Spoken in the version of `settings`.
pub(crate) async fn order_probe(command: &str, settings: &Speaking) -> Probed {
    const ROUNDS: usize = 4;
    let Some((mut proc, log)) = start_probe(command) else {
        return Probed::UNKNOWN;
    };
    let deadline = Instant::now() + settings.probe_timeout;
    let modern = settings.version.is_modern();
    let mut order = Order::Unknown;
    let mut pace = Duration::ZERO;
    let ready = if modern {
        true
    } else {
        proc.send(line_body(&initialize_request(settings.version)))
            .await;
        let (answer, _, _) = read_until_answer(&mut proc, INIT_ID, deadline).await;
        proc.send(line_body(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ))
        .await;
        answer.is_some_and(|a| a.get("result").is_some())
    };
    for round in (0..ROUNDS).filter(|_| ready) {
        let (call_id, barrier_id) = (
            format!("gauntlet-order-call-{round}"),
            format!("gauntlet-order-barrier-{round}"),
        );
        let call = allowed_call(settings, &call_id, "order probe");
        let barrier = own_request(settings, &barrier_id, liveness_method(settings));
        // Both lines in one write, so the server has read the call before the barrier.
        let sent = Instant::now();
        proc.send(Body::from_bytes(format!("{call}\n{barrier}\n")))
            .await;
        // (call answered, barrier answered) instants, in the order they were read.
        let (mut call_at, mut barrier_at) = (None, None);
        while call_at.is_none() || barrier_at.is_none() {
            match proc.read_line(deadline).await {
                Ok(Line::Text(t)) => {
                    let id = serde_json::from_slice::<Value>(&t)
                        .ok()
                        .filter(|v| v.get("result").is_some() || v.get("error").is_some())
                        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_string));
                    match id {
                        Some(id) if id == call_id => call_at = Some(Instant::now()),
                        Some(id) if id == barrier_id => barrier_at = Some(Instant::now()),
                        _ => {}
                    }
                }
                Ok(Line::TooLong(_)) => {}
                Ok(Line::Eof) | Err(_) => break,
            }
        }
        let (Some(call_at), Some(barrier_at)) = (call_at, barrier_at) else {
            break;
        };
        if round > 0 {
            pace = pace.max(call_at.max(barrier_at) - sent);
        }
        // Once the barrier came first, the target is concurrent; its lag is the longest seen.
        let lag = call_at.saturating_duration_since(barrier_at);
        order = match order {
            Order::Concurrent { lag: seen } => Order::Concurrent { lag: seen.max(lag) },
            _ if call_at > barrier_at => Order::Concurrent { lag },
            _ => Order::Sequential,
        };
    }
    end_probe(proc, &log).await;
    Probed { order, pace }
}

/// The known versions a `server/discover` answer (a result, or an unsupported-version error)
/// lists.
pub(super) fn discovered(answer: &Value, id: &str) -> Option<Vec<Version>> {
    if answer.get("id") != Some(&json!(id)) {
        return None;
    }
    let list = match (answer.get("result"), answer.get("error")) {
        (Some(r), None) => r.get("supportedVersions")?,
        (None, Some(e)) if e.get("code") == Some(&json!(versions::UNSUPPORTED_VERSION)) => {
            e.get("data")?.get("supported")?
        }
        _ => return None,
    };
    Some(
        list.as_array()?
            .iter()
            .filter_map(|v| Version::parse(v.as_str()?))
            .filter(|v| v.is_known())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proxy that speaks the legacy versions itself and relays `server/discover` to a
    /// modern server behind it is named in the summary; a server answering both is not.
    #[test]
    fn a_discover_answered_by_another_server_than_initialize_is_said() {
        let (list, by) = discovered_by(&[json!({"jsonrpc": "2.0", "id": DISCOVER_ID,
            "result": {"supportedVersions": [versions::NEWEST], "_meta":
                {"io.modelcontextprotocol/serverInfo": {"name": "behind", "version": "1"}}}})]);
        assert_eq!(list, vec![versions::NEWEST]);
        let mut p = Probe {
            accepted: vec![versions::NEWEST_LEGACY, versions::NEWEST],
            initialized_by: vec!["proxy".into()],
            discovered_by: by,
            ..Probe::default()
        };
        assert_eq!(p.relayed_discover(), Some("behind"));
        assert!(p.summary().contains("`behind`"), "{}", p.summary());
        p.initialized_by.push("behind".into());
        assert_eq!(p.relayed_discover(), None);
        p.initialized_by = vec!["proxy".into()];
        p.accepted.pop();
        assert_eq!(p.relayed_discover(), None);
        assert_eq!(
            server_name(&json!({"serverInfo": {"name": "s"}})),
            Some("s".to_string())
        );
    }
}
