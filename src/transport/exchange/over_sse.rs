//! A case over the HTTP+SSE transport of 2024-11-05: a stream opened with `GET`, the message URL
//! its `endpoint` event names, the case's bytes POSTed there, and the answers read on the
//! stream, attributed by a barrier as over stdio (every message before the barrier's answer is
//! the case's).
//!
//! A POST the server refuses (any status outside 2xx) is the case's answer itself, as over
//! Streamable HTTP; a POST it accepts hands the answer to the stream, and the observation then
//! has no HTTP answer of its own (`Observation::http` is `None`; the POST is kept in
//! `SseSeen::post`).

use super::clients;
use super::http_request::{post_json, standard_headers, Sent};
use super::over_http::{learned_placeholders, read_response};
use super::*;
use crate::case::SseStream;
use crate::transport::procfs::{self, Watch};
use crate::transport::sse::{EventStream, NoEvent};
use crate::transport::{ClientAnswer, ClientsSeen, SseSeen};

/// How long the runner waits past the barrier's answer for an answer to the case's request that
/// has not come (servers that answer each message in a task of their own may answer the
/// barrier first).
const SETTLE: Duration = Duration::from_millis(300);
/// POSTs of an `unread` case when it does not say (`sse.posts`).
const DEFAULT_UNREAD_POSTS: u32 = 1000;
/// How long one POST of an `unread` case may wait for its answer: one left waiting longer is a
/// server that stopped taking messages (it pushes back), which is a bound.
const UNREAD_POST_WAIT: Duration = Duration::from_secs(2);
/// How long the runner lets a server notice a stream it closed before it POSTs to its session.
const STREAM_CLOSE_GRACE: Duration = Duration::from_millis(250);

/// Why a stream could not be opened as this transport's.
#[derive(Debug, thiserror::Error)]
pub enum SseOpenError {
    #[error(transparent)]
    Transport(TransportError),
    #[error("GET answered HTTP {status} ({content_type}), not an event stream")]
    NotAStream { status: u16, content_type: String },
    #[error("the stream's first event is not `endpoint`: {0}")]
    NoEndpoint(String),
    #[error("the endpoint event names another origin: {0}")]
    OtherOrigin(String),
    #[error("the endpoint event names no URL the runner can read: {0}")]
    BadEndpoint(String),
}

/// An open session of the transport: its stream, and where its messages go.
pub(crate) struct SseSession {
    stream: EventStream,
    /// The `endpoint` event's data, as sent.
    pub(crate) endpoint: String,
    /// The message URL: the endpoint resolved against the stream's URL.
    pub(crate) post_to: HttpUrl,
    /// Events that were neither messages nor the first `endpoint`, as `event: data`.
    stray: Vec<String>,
}

/// What the stream carried while the runner waited for one answer.
#[derive(Debug, Default)]
struct Heard {
    /// The answer waited for, when it came.
    answer: Option<Value>,
    /// Every other JSON message, in order.
    messages: Vec<Value>,
    /// `data` that is not JSON.
    garbage: Vec<Vec<u8>>,
    /// The text of every event read (for the oracles that scan answers).
    text: String,
    /// How the wait ended without the answer.
    missed: Option<NoEvent>,
}

impl SseSession {
    /// `GET url` for an event stream (with the run's headers and identity) and its first event,
    /// which must be `endpoint`: a message URL on the stream's own origin (the runner posts
    /// nothing elsewhere).
    pub(crate) async fn open(
        url: &HttpUrl,
        settings: &Speaking,
        deadline: Instant,
    ) -> Result<SseSession, SseOpenError> {
        let mut headers = vec![
            ("host".to_string(), url.authority()),
            ("accept".to_string(), "text/event-stream".to_string()),
            ("cache-control".to_string(), "no-cache".to_string()),
        ];
        for (k, v) in &settings.extra_headers {
            headers.push((k.to_ascii_lowercase(), v.clone()));
        }
        if let Some(identity) = &settings.identity {
            headers.extend(identity.headers(None));
        }
        let mut at = url.clone();
        at.path = super::http_request::request_path(url, settings, None);
        let mut stream = EventStream::open(&at, &headers, deadline)
            .await
            .map_err(SseOpenError::Transport)?;
        if !stream.is_stream() {
            return Err(SseOpenError::NotAStream {
                status: stream.head.status,
                content_type: stream
                    .head
                    .content_type()
                    .unwrap_or_else(|| "no content type".into()),
            });
        }
        let first = match stream.next(deadline).await {
            Ok(e) => e,
            Err(NoEvent::Deadline) => {
                return Err(SseOpenError::NoEndpoint(
                    "no event before the deadline".into(),
                ))
            }
            Err(NoEvent::Ended(why)) => {
                return Err(SseOpenError::NoEndpoint(format!(
                    "the stream ended first{}",
                    why.map(|w| format!(" ({w})")).unwrap_or_default()
                )))
            }
        };
        if first.event.as_deref() != Some("endpoint") {
            return Err(SseOpenError::NoEndpoint(format!(
                "event {:?} with data {:?}",
                first.event.as_deref().unwrap_or("message"),
                first.data.chars().take(200).collect::<String>()
            )));
        }
        let endpoint = first.data.trim().to_string();
        let post_to = resolve_endpoint(url, &endpoint)?;
        Ok(SseSession {
            stream,
            endpoint,
            post_to,
            stray: Vec::new(),
        })
    }

    /// The query parameter of the message URL that names the session, and its value: the
    /// first of `session_id`, `sessionId`, `session`, else the query's first parameter
    /// (`session_id` and the whole query when it has none of the form `name=value`).
    pub(crate) fn session_param(&self) -> (String, String) {
        let query = self.post_to.path.split_once('?').map_or("", |(_, q)| q);
        let pairs: Vec<(&str, &str)> = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        ["session_id", "sessionId", "session"]
            .iter()
            .find_map(|name| pairs.iter().find(|(k, _)| k == name))
            .or_else(|| pairs.first())
            .map_or_else(
                || ("session_id".to_string(), query.to_string()),
                |(k, v)| ((*k).to_string(), (*v).to_string()),
            )
    }

    /// Close the stream (the client goes away), and give the server a moment to notice.
    async fn close_stream(&mut self) {
        self.stream.close();
        tokio::time::sleep(STREAM_CLOSE_GRACE).await;
    }

    /// POST a runner-made message to the message URL: its status, when it was answered.
    async fn post_own(
        &self,
        settings: &Speaking,
        message: &Value,
        deadline: Instant,
    ) -> Result<u16, String> {
        let headers = standard_headers(&self.post_to, settings, None, Some(message));
        let wire = post_json(&self.post_to, settings, headers, message);
        match http::exchange(&self.post_to, wire, deadline, SseRead::ToFirstResponse).await {
            Ok(resp) => Ok(resp.status),
            Err(e) => Err(chain(&e)),
        }
    }

    /// Read the stream until a message answers `id` (or the deadline, or the stream's end).
    async fn hear(&mut self, wanted: &Value, deadline: Instant) -> Heard {
        let mut heard = Heard::default();
        loop {
            let event = match self.stream.next(deadline).await {
                Ok(e) => e,
                Err(end) => {
                    heard.missed = Some(end);
                    return heard;
                }
            };
            if !heard.text.is_empty() {
                heard.text.push('\n');
            }
            heard.text.push_str(&event.data);
            match event.event.as_deref() {
                None | Some("message") => {}
                Some(other) => {
                    self.stray.push(format!(
                        "{other}: {}",
                        event.data.chars().take(200).collect::<String>()
                    ));
                    continue;
                }
            }
            if event.data.trim().is_empty() {
                continue;
            }
            match crate::reading::answer_json(event.data.as_bytes()) {
                Some(v) if v.get("id") == Some(wanted) && v.get("method").is_none() => {
                    heard.answer = Some(v);
                    return heard;
                }
                Some(v) => heard.messages.push(v),
                None => heard.garbage.push(
                    event
                        .data
                        .into_bytes()
                        .into_iter()
                        .take(PREFIX_KEEP)
                        .collect(),
                ),
            }
        }
    }

    /// The legacy handshake over the stream: `initialize` POSTed, its answer read on the stream,
    /// `notifications/initialized`. The version agreed, or why it failed.
    pub(crate) async fn handshake(
        &mut self,
        settings: &Speaking,
        deadline: Instant,
    ) -> Result<String, String> {
        let init = json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
            "params": {"protocolVersion": settings.version, "capabilities": {},
                       "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}});
        match self.post_own(settings, &init, deadline).await {
            Ok(s) if (200..300).contains(&s) => {}
            Ok(s) => return Err(format!("initialize was POSTed and answered HTTP {s}")),
            Err(why) => return Err(format!("initialize: {why}")),
        }
        let heard = self.hear(&json!(INIT_ID), deadline).await;
        let Some(result) = heard.answer.as_ref().and_then(|a| a.get("result")) else {
            return Err(format!(
                "initialize was not answered on the stream with a result: {}",
                heard
                    .answer
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| missed_words(heard.missed.as_ref()))
            ));
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map_or_else(|| settings.version.to_string(), str::to_string);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        // Its answer does not matter to the handshake; a failure shows in the case itself.
        let _ = self.post_own(settings, &note, deadline).await;
        Ok(version)
    }

    /// After an accepted POST of the case: a barrier `ping` whose answer closes what belongs to
    /// the case, a settle window when the case's request is still unanswered then, and what
    /// was heard written into `obs`.
    async fn attribute(&mut self, obs: &mut Observation, settings: &Speaking, deadline: Instant) {
        let barrier = own_request(settings, BARRIER_ID, "ping");
        let posted = self.post_own(settings, &barrier, deadline).await;
        let mut heard = match posted {
            Ok(s) if (200..300).contains(&s) => self.hear(&json!(BARRIER_ID), deadline).await,
            // No barrier on this stream: what comes within the settle window is the case's.
            _ => {
                self.hear(&json!(BARRIER_ID), deadline.min(Instant::now() + SETTLE))
                    .await
            }
        };
        let answered = |h: &Heard| {
            h.messages.iter().any(|m| {
                m.get("method").is_none() && (m.get("result").is_some() || m.get("error").is_some())
            })
        };
        if heard.answer.is_some() && obs.sent.expects_response && !answered(&heard) {
            let more = self
                .hear(&json!(BARRIER_ID), deadline.min(Instant::now() + SETTLE))
                .await;
            heard.messages.extend(more.messages);
            heard.garbage.extend(more.garbage);
            heard.text.push_str(&more.text);
            if matches!(more.missed, Some(NoEvent::Ended(_))) {
                heard.missed = more.missed;
            }
        }
        obs.answer.ending = match &heard.missed {
            _ if !heard.messages.is_empty() || !heard.garbage.is_empty() => Ending::Answered,
            Some(NoEvent::Deadline) if heard.answer.is_none() => Ending::TimedOut,
            Some(NoEvent::Ended(_)) => Ending::Closed,
            _ => Ending::Answered,
        };
        obs.answer.prefix = heard.text.bytes().take(PREFIX_KEEP).collect();
        obs.answer.scan_text = heard.text.chars().take(SCAN_KEEP).collect();
        obs.answer.messages = heard.messages;
        obs.answer.garbage = heard.garbage;
        if let (Some(seen), Some(NoEvent::Ended(why))) = (obs.answer.sse.as_mut(), &heard.missed) {
            seen.stream_ended = Some(why.clone().unwrap_or_else(|| "closed by the server".into()));
        }
    }
}

/// How a wait on the stream ended, in words.
fn missed_words(missed: Option<&NoEvent>) -> String {
    match missed {
        Some(NoEvent::Deadline) | None => "nothing before the deadline".into(),
        Some(NoEvent::Ended(None)) => "the stream was closed".into(),
        Some(NoEvent::Ended(Some(why))) => format!("the stream broke: {why}"),
    }
}

/// The message URL an `endpoint` event names, resolved against the stream's URL: an absolute
/// URL (which must be on the stream's origin), an absolute path, or a path relative to the
/// stream's.
fn resolve_endpoint(stream: &HttpUrl, endpoint: &str) -> Result<HttpUrl, SseOpenError> {
    if endpoint.is_empty() || endpoint.chars().any(char::is_control) {
        return Err(SseOpenError::BadEndpoint(endpoint.to_string()));
    }
    if endpoint.contains("://") {
        let named = HttpUrl::parse(endpoint)
            .map_err(|_| SseOpenError::BadEndpoint(endpoint.to_string()))?;
        let same = named.scheme() == stream.scheme()
            && named.host.eq_ignore_ascii_case(&stream.host)
            && named.port == stream.port;
        if !same {
            return Err(SseOpenError::OtherOrigin(endpoint.to_string()));
        }
        let mut at = stream.clone();
        at.path = named.path;
        return Ok(at);
    }
    if endpoint.starts_with("//") {
        return Err(SseOpenError::OtherOrigin(endpoint.to_string()));
    }
    let mut at = stream.clone();
    at.path = if endpoint.starts_with('/') {
        endpoint.to_string()
    } else {
        let base = stream.path.split('?').next().unwrap_or("/");
        let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
        format!("{}{endpoint}", if dir.is_empty() { "/" } else { dir })
    };
    Ok(at)
}

/// One case over the transport: a session of its own (its stream, the handshake when the case
/// wants one), the case's bytes POSTed to its message URL (by several clients at once, each in
/// a session of its own, for a `clients` case), the answer (the POST's refusal, or what the
/// stream carried before the barrier's answer), the witness's record, and the alive probe in a
/// fresh session.
pub(super) async fn run_sse(
    t: &Facts<'_>,
    url: &HttpUrl,
    (witness, watch): (Option<&WitnessView>, Option<&Watch>),
    check_alive: bool,
) -> Observation {
    let (case, settings) = (t.case, t.settings);
    let mut obs = Observation::new(crate::case::TransportKind::Sse);
    let deadline = settings.case_ends(case);
    let spec = &case.spec;
    let marks = spec.clients.map(clients::marks);
    let first = marks.as_ref().map(|m| m[0].clone());
    let (mut session, ph) = match ready(t, url, first, deadline).await {
        Ok(ready) => ready,
        Err(Unready::Elsewhere(endpoint)) => {
            elsewhere(&mut obs, case, endpoint);
            return obs;
        }
        Err(Unready::Failed(why)) => {
            obs.sent.setup_error = Some(why);
            return obs;
        }
    };
    obs.answer.sse = Some(SseSeen {
        endpoint: session.endpoint.clone(),
        ..SseSeen::default()
    });
    obs.sent.learned = ph.values_of(LEARNED);
    let wire = case_wire(t, &session, &ph, &mut obs);
    let others = match &marks {
        Some(m) => other_clients(t, url, &m[1..], deadline).await,
        None => Vec::new(),
    };
    let stream = spec.sse.as_ref().map_or(SseStream::Open, |s| s.stream);
    let closed = stream == SseStream::Closed;
    if closed {
        session.close_stream().await;
    }
    if stream == SseStream::Unread {
        let target = (url, watch);
        return unread(obs, session, &wire, case, target, settings, check_alive).await;
    }
    let mark = witness.map(WitnessView::mark);
    let answer_id = obs.sent.id.clone();
    let in_flight: Vec<_> = others
        .into_iter()
        .map(|o| o.map(|c| tokio::spawn(c.exchange(answer_id.clone(), deadline))))
        .collect();
    match http::exchange(&session.post_to, wire, deadline, SseRead::ToFirstResponse).await {
        Ok(resp) if (200..300).contains(&resp.status) && !closed => {
            if let Some(seen) = obs.answer.sse.as_mut() {
                seen.post = Some(post_seen(&resp));
            }
            session.attribute(&mut obs, settings, deadline).await;
        }
        Ok(resp) => read_response(&mut obs, &resp),
        Err(e) if e.is_timeout() => obs.answer.ending = Ending::TimedOut,
        Err(TransportError::Connect(e)) => obs.answer.ending = Ending::Unreachable(e.to_string()),
        Err(_) => obs.answer.ending = Ending::Closed,
    }
    if let Some(m) = marks {
        obs.answer.clients = Some(collect_clients(m, in_flight).await);
    }
    if let Some(seen) = obs.answer.sse.as_mut() {
        seen.stray_events = std::mem::take(&mut session.stray);
    }
    if let (Some(w), Some(mark)) = (witness, mark) {
        obs.after.witness = Some(case_record(w, mark));
    }
    drop(session);
    if check_alive {
        sse_alive_probe(&mut obs, case, url, settings).await;
    }
    obs
}

/// The rest of an `unread` case (`sse.stream: unread`): the session's stream no longer read,
/// the request POSTed `posts` times on it (`post_unread`), the target's process read before
/// and after them when it is known, the session let go, the alive probe.
async fn unread(
    mut obs: Observation,
    session: SseSession,
    wire: &Wire,
    case: &Case,
    (url, watch): (&HttpUrl, Option<&Watch>),
    settings: &Speaking,
    check_alive: bool,
) -> Observation {
    let posts = case.spec.sse.as_ref().and_then(|s| s.posts);
    let pid = watch.and_then(Watch::now);
    let before = pid.and_then(procfs::sample);
    session.stream.pause();
    let deadline = settings.case_ends(case);
    let seen = post_unread(
        &session.post_to,
        wire,
        posts.unwrap_or(DEFAULT_UNREAD_POSTS),
        deadline,
        &mut obs,
    )
    .await;
    // What the queued answers cost, read while the session still holds them.
    let after = pid.and_then(procfs::sample);
    if let Some(sse) = obs.answer.sse.as_mut() {
        sse.unread = Some(crate::transport::UnreadSeen {
            memory_kib: before.zip(after).map(|(b, a)| (b.rss_kib, a.rss_kib)),
            ..seen
        });
    }
    drop(session);
    if check_alive {
        sse_alive_probe(&mut obs, case, url, settings).await;
    }
    obs
}

/// A session for one client of the case: its stream open, its handshake done when the case
/// wants one, and the placeholders it writes the case's request with (its mark, in a `clients`
/// case). Why not, when it could not be had.
async fn ready(
    t: &Facts<'_>,
    url: &HttpUrl,
    mark: Option<String>,
    deadline: Instant,
) -> Result<(SseSession, Placeholders), Unready> {
    let mut session = match SseSession::open(url, t.settings, deadline).await {
        Ok(session) => session,
        Err(SseOpenError::OtherOrigin(endpoint)) => return Err(Unready::Elsewhere(endpoint)),
        Err(e) => {
            let why = format!("opening the event stream: {}", chain(&e));
            return Err(Unready::Failed(why));
        }
    };
    let mut ph = learned_placeholders(&session.post_to, &t.client, None, mark.as_ref());
    if t.case.spec.session == SessionMode::Initialized {
        let version = session
            .handshake(&t.handshake, deadline)
            .await
            .map_err(Unready::Failed)?;
        ph.set("protocol_version", version);
    }
    let (param, id) = session.session_param();
    ph.set("session_id", id).set("session_param", param);
    Ok((session, ph))
}

/// Why a client's session could not be had.
enum Unready {
    /// The endpoint event named a message URL on another origin (as sent).
    Elsewhere(String),
    /// Anything else, said.
    Failed(String),
}

/// An endpoint on another origin: the case that judges the endpoint (`endpoint_same_origin`)
/// records it, unsent, for its finding; any other case does not apply, saying why.
fn elsewhere(obs: &mut Observation, case: &Case, endpoint: String) {
    if case.spec.expect.endpoint_same_origin == Some(true) {
        obs.answer.sse = Some(SseSeen {
            endpoint,
            elsewhere: true,
            ..SseSeen::default()
        });
    } else {
        obs.sent.inapplicable = Some(format!(
            "not applicable: the stream's endpoint event names another origin ({endpoint}), where the runner posts nothing (sse/endpoint-names-the-stream-origin judges it)"
        ));
    }
}

/// The case's request as one client of `session` sends it (its placeholders `ph`), to the
/// session's message URL; what it was is noted on `obs`.
fn case_wire(
    t: &Facts<'_>,
    session: &SseSession,
    ph: &Placeholders,
    obs: &mut Observation,
) -> Wire {
    Sent {
        url: &session.post_to,
        settings: t.settings,
        handshake: None,
        modern: None,
        placeholders: ph,
        method: &t.method,
        caller: t.case.spec.caller,
    }
    .request(&t.case.spec.request, obs)
}

/// A further client of a `clients` case, ready to send its request in its own session.
struct OtherClient {
    session: SseSession,
    wire: Wire,
}

impl OtherClient {
    /// POST its request and read its own stream until the request's id is answered (or the
    /// deadline): what it got.
    async fn exchange(mut self, id: Option<Value>, deadline: Instant) -> ClientAnswer {
        let posted = http::exchange(
            &self.session.post_to,
            self.wire,
            deadline,
            SseRead::ToFirstResponse,
        )
        .await;
        let resp = match posted {
            Ok(resp) => resp,
            Err(e) => {
                return ClientAnswer {
                    setup_error: None,
                    ending: if e.is_timeout() {
                        Ending::TimedOut
                    } else {
                        Ending::Closed
                    },
                    status: None,
                    messages: Vec::new(),
                    text: String::new(),
                }
            }
        };
        let (mut messages, _) = super::http_request::http_messages(&resp);
        let mut text = String::from_utf8_lossy(&resp.body).into_owned();
        let mut ending = Ending::Answered;
        if let (true, Some(id)) = ((200..300).contains(&resp.status), id) {
            let heard = self.session.hear(&id, deadline).await;
            messages.extend(heard.messages);
            messages.extend(heard.answer);
            text.push_str(&heard.text);
            if messages.is_empty() && heard.missed.is_some() {
                ending = Ending::TimedOut;
            }
        }
        ClientAnswer {
            setup_error: None,
            ending,
            status: Some(resp.status),
            messages,
            text: text.chars().take(64 * 1024).collect(),
        }
    }
}

/// The further clients of a `clients` case, each in a session of its own (opened one after
/// another, before anyone sends, so the requests themselves go out together), each request
/// written as the first client's with its own mark and session; or why one could not be.
async fn other_clients(
    t: &Facts<'_>,
    url: &HttpUrl,
    marks: &[String],
    deadline: Instant,
) -> Vec<Result<OtherClient, String>> {
    let mut out = Vec::new();
    for mark in marks {
        let (session, mut ph) = match ready(t, url, Some(mark.clone()), deadline).await {
            Ok(r) => r,
            Err(Unready::Failed(why)) => {
                out.push(Err(why));
                continue;
            }
            Err(Unready::Elsewhere(endpoint)) => {
                out.push(Err(format!(
                    "the endpoint event names another origin ({endpoint})"
                )));
                continue;
            }
        };
        ph.set("client", mark.clone());
        // What the request was is noted on the first client's observation; these are copies.
        let mut scratch = Observation::new(crate::case::TransportKind::Sse);
        let wire = case_wire(t, &session, &ph, &mut scratch);
        out.push(Ok(OtherClient { session, wire }));
    }
    out
}

/// What each further client got, in client order.
async fn collect_clients(
    marks: Vec<String>,
    in_flight: Vec<Result<tokio::task::JoinHandle<ClientAnswer>, String>>,
) -> ClientsSeen {
    let mut others = Vec::new();
    for f in in_flight {
        let nothing = |setup_error| ClientAnswer {
            setup_error,
            ending: Ending::Closed,
            status: None,
            messages: Vec::new(),
            text: String::new(),
        };
        others.push(match f {
            Err(why) => nothing(Some(why)),
            Ok(task) => task.await.unwrap_or_else(|_| nothing(None)),
        });
    }
    ClientsSeen { marks, others }
}

/// `sse.stream: unread`: `wire` POSTed `posts` times, one after another (each its own
/// connection, each within [`UNREAD_POST_WAIT`]), on a session whose stream is not read, until
/// one is not accepted or the case's time runs out. A POST answered with a status outside 2xx
/// is written into `obs` as the case's answer; otherwise the case has none (nothing is read).
async fn post_unread(
    post_to: &HttpUrl,
    wire: &Wire,
    posts: u32,
    deadline: Instant,
    obs: &mut Observation,
) -> crate::transport::UnreadSeen {
    let mut seen = crate::transport::UnreadSeen {
        asked: posts,
        bytes: match wire {
            Wire::Request { body, .. } => usize::try_from(body.len()).unwrap_or(usize::MAX),
            Wire::Raw(bytes) => bytes.len(),
        },
        ..Default::default()
    };
    for _ in 0..posts {
        if Instant::now() >= deadline {
            seen.cut = true;
            break;
        }
        let by = deadline.min(Instant::now() + UNREAD_POST_WAIT);
        let answered = http::exchange(post_to, wire.clone(), by, SseRead::ToFirstResponse).await;
        let stopped = match answered {
            Ok(r) if (200..300).contains(&r.status) => {
                seen.accepted += 1;
                continue;
            }
            Ok(r) => {
                // The POST not accepted is the case's answer (its status, what its body says).
                read_response(obs, &r);
                format!("answered HTTP {}", r.status)
            }
            Err(e) if e.is_timeout() && by < deadline => format!(
                "left waiting over {} s (the server stopped taking messages)",
                UNREAD_POST_WAIT.as_secs()
            ),
            Err(e) if e.is_timeout() => {
                seen.cut = true;
                break;
            }
            Err(e) => chain(&e),
        };
        seen.stopped_by = Some(stopped);
        break;
    }
    seen
}

/// The POST's answer as the HTTP facts the oracles read.
fn post_seen(resp: &HttpResponse) -> HttpSeen {
    HttpSeen {
        status: resp.status,
        content_type: resp.content_type(),
        headers: resp.headers.clone(),
        body_len: resp.body.len(),
        truncated: resp.truncated,
        timed_out: resp.timed_out,
        cut_short: resp.cut_short,
        body_sent: resp.body_sent,
        answered_after: resp.answered_after,
    }
}

/// The alive probe over the transport: a fresh session (stream and handshake) and a `ping` (and
/// for `"alive_probe": "downstream"` a call of the allowed tool) answered on its stream.
async fn sse_alive_probe(obs: &mut Observation, case: &Case, url: &HttpUrl, settings: &Speaking) {
    let ping = own_request(settings, PROBE_ID, "ping");
    let (mut alive, mut detail) = match sse_request(url, settings, &ping, PROBE_ID).await {
        Ok(answer) if answer.get("result").is_some() => (true, None),
        Ok(answer) => (
            false,
            Some(format!("ping after the case was answered with {answer}")),
        ),
        Err(why) => (false, Some(format!("ping after the case: {why}"))),
    };
    if alive && case.spec.alive_probe == crate::case::AliveProbe::Downstream {
        let call = probe_call(settings);
        (alive, detail) = match sse_request(url, settings, &call, PROBE_CALL_ID).await {
            Ok(answer) => match probe_call_answered(&answer) {
                Ok(()) => (true, None),
                Err(why) => (false, Some(why)),
            },
            Err(why) => (
                false,
                Some(format!("a call of the allowed tool after the case: {why}")),
            ),
        };
    }
    obs.after.alive = Some(alive);
    obs.after.alive_detail = detail;
}

/// One runner request in a session of its own, within the probe deadline: its answer on the
/// stream, or why none came.
pub(crate) async fn sse_request(
    url: &HttpUrl,
    settings: &Speaking,
    message: &Value,
    id: &str,
) -> Result<Value, String> {
    let deadline = Instant::now() + settings.probe_timeout;
    let mut session = SseSession::open(url, settings, deadline)
        .await
        .map_err(|e| format!("opening a stream: {}", chain(&e)))?;
    session.handshake(settings, deadline).await?;
    match session.post_own(settings, message, deadline).await {
        Ok(s) if (200..300).contains(&s) => {}
        Ok(s) => return Err(format!("POSTed and answered HTTP {s}")),
        Err(why) => return Err(why),
    }
    let heard = session.hear(&json!(id), deadline).await;
    heard
        .answer
        .ok_or_else(|| missed_words(heard.missed.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_on_the_streams_origin_only() {
        let stream = HttpUrl::parse("http://127.0.0.1:8000/mcp/sse").unwrap();
        let at = |e: &str| resolve_endpoint(&stream, e).map(|u| u.path);
        assert_eq!(
            at("/messages/?session_id=ab").unwrap(),
            "/messages/?session_id=ab"
        );
        assert_eq!(
            at("messages?sessionId=1").unwrap(),
            "/mcp/messages?sessionId=1"
        );
        assert_eq!(
            at("http://127.0.0.1:8000/m?session_id=1").unwrap(),
            "/m?session_id=1"
        );
        assert!(matches!(
            resolve_endpoint(&stream, "http://evil.example/m"),
            Err(SseOpenError::OtherOrigin(_))
        ));
        assert!(matches!(
            resolve_endpoint(&stream, "//evil.example/m"),
            Err(SseOpenError::OtherOrigin(_))
        ));
        assert!(matches!(
            resolve_endpoint(&stream, "http://127.0.0.1:9/m"),
            Err(SseOpenError::OtherOrigin(_))
        ));
        assert!(matches!(
            resolve_endpoint(&stream, ""),
            Err(SseOpenError::BadEndpoint(_))
        ));
    }
}
