//! The witness's HTTP+SSE front (the transport of 2024-11-05): `GET /sse` opens a session and
//! its event stream, whose first event (`endpoint`) names `/messages?session_id=ID`; a `POST`
//! there is read as the Streamable HTTP front reads one (Origin and Host, media type, size) and
//! its message handed to the protocol core, whose answer goes on that session's stream. The
//! `POST` itself is answered `202 Accepted`, or refused with a status and a JSON-RPC error
//! when the body is not a message the core takes (the answer is then the POST's).
//!
//! Sessions are bounded ([`MAX_STREAMS`], the oldest let go), each stream queues at most
//! [`QUEUE`] events for a client that does not read (past it the session is ended), and a
//! session ends with its stream.

use super::rules::{
    accepts, content_type_ok, header_list, host_ok, origin_ok, read_body, BodyRead, Local,
    READ_DEADLINE,
};
use super::{Broken, Conversation, Fault, Reply, Witness, MAX_MESSAGE};
use bytes::Bytes;
use hyper::body::{Frame, Incoming};
use hyper::header::HeaderMap;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Where a client opens its stream.
pub const STREAM_PATH: &str = "/sse";
/// Where a session's messages are POSTed (with `?session_id=ID`).
pub const MESSAGE_PATH: &str = "/messages";
/// Streams open at once at most: at the cap the oldest session is ended.
pub const MAX_STREAMS: usize = 1000;
/// Events a stream holds for a client that is not reading: past it the session is ended.
pub const QUEUE: usize = 256;

/// The protocol versions the witness speaks over this transport: 2024-11-05 and the legacy
/// versions after it (a client of this transport may agree to a newer one).
pub fn versions() -> Vec<crate::versions::Version> {
    let mut v = vec![
        crate::versions::SSE,
        crate::versions::Version::new(2025, 3, 26),
    ];
    v.extend(
        crate::versions::KNOWN
            .iter()
            .copied()
            .filter(|v| !v.is_modern()),
    );
    v
}

/// A response body that is either whole or a stream fed by a channel.
pub struct EventBody {
    first: Option<Bytes>,
    rx: Option<mpsc::Receiver<Bytes>>,
}

impl EventBody {
    pub(super) fn whole(bytes: impl Into<Bytes>) -> EventBody {
        EventBody {
            first: Some(bytes.into()),
            rx: None,
        }
    }

    /// `first`, then what `rx` is fed, until its sender is dropped.
    pub(super) fn stream(first: Bytes, rx: mpsc::Receiver<Bytes>) -> EventBody {
        EventBody {
            first: (!first.is_empty()).then_some(first),
            rx: Some(rx),
        }
    }
}

impl hyper::body::Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        match self.rx.as_mut() {
            None => Poll::Ready(None),
            Some(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rx.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match (&self.first, &self.rx) {
            (Some(b), None) => hyper::body::SizeHint::with_exact(b.len() as u64),
            (None, None) => hyper::body::SizeHint::with_exact(0),
            _ => hyper::body::SizeHint::default(),
        }
    }
}

type Answer = Response<EventBody>;

/// One open session: its conversation, its stream's sender, and when it was opened (for the
/// cap).
struct Open {
    conv: Conversation,
    tx: mpsc::Sender<Bytes>,
    opened: u64,
}

/// The front's sessions.
#[derive(Default)]
struct Streams {
    open: HashMap<String, Open>,
    clock: u64,
}

/// The witness behind this front, and its sessions.
pub(super) struct Front {
    w: Arc<Witness>,
    local: Local,
    streams: Mutex<Streams>,
    /// `sse-wrong-stream`: the stream of the session that last POSTed each request id.
    by_id: Mutex<HashMap<String, mpsc::Sender<Bytes>>>,
}

/// The names every JavaScript object answers to, which `sse-prototype-sessions` finds as
/// sessions.
const PROTOTYPE_NAMES: &[&str] = &[
    "__proto__",
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
    "__defineGetter__",
    "__lookupGetter__",
];

/// Serve `witness` over HTTP+SSE on `listener` until the task is dropped or aborted.
pub async fn serve(listener: TcpListener, witness: Arc<Witness>) {
    let front = Front::new(
        witness,
        Local {
            port: listener.local_addr().map(|a| a.port()).unwrap_or(0),
            scheme: "http",
        },
    );
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let front = front.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let front = front.clone();
                async move { Ok::<_, Infallible>(front.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_DEADLINE)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Bind `addr` and serve `witness` over HTTP+SSE there: the address bound and the server task.
pub async fn spawn(
    addr: std::net::SocketAddr,
    witness: Arc<Witness>,
) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((local, tokio::spawn(serve(listener, witness))))
}

impl Front {
    /// The front of `w` served at `local`, without sessions yet.
    pub(super) fn new(w: Arc<Witness>, local: Local) -> Arc<Front> {
        Arc::new(Front {
            w,
            local,
            streams: Mutex::default(),
            by_id: Mutex::default(),
        })
    }

    /// Whether this front serves `path` (the stream's or the messages'; under `sse-any-path`,
    /// any path whose query names a session: the Streamable HTTP front keeps its own first).
    pub(super) fn serves(&self, path: &str, query: Option<&str>) -> bool {
        path == STREAM_PATH
            || path == MESSAGE_PATH
            || (self.w.config.is(Broken::SseAnyPath)
                && query.is_some_and(|q| q.split('&').any(|kv| kv.starts_with("session_id="))))
    }

    pub(super) async fn handle(self: &Arc<Self>, req: Request<Incoming>) -> Answer {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path();
        let query = parts.uri.query().unwrap_or("");
        // `lax-headers`: a PUT is taken as a POST, as the Streamable HTTP front takes it.
        let posted = parts.method == Method::POST
            || (self.w.config.is(Broken::LaxHeaders) && parts.method == Method::PUT);
        let message_path =
            path == MESSAGE_PATH || (self.w.config.is(Broken::SseAnyPath) && path != STREAM_PATH);
        let known =
            (path == STREAM_PATH && parts.method == Method::GET) || (message_path && posted);
        if !known {
            let status = if path == STREAM_PATH || path == MESSAGE_PATH {
                StatusCode::METHOD_NOT_ALLOWED
            } else {
                StatusCode::NOT_FOUND
            };
            return plain(status, "");
        }
        let checked = !self.w.config.is(Broken::NoOrigin);
        let local_origin =
            origin_ok(&parts.headers, self.local) && host_ok(&parts.headers, self.local.port);
        if checked && !local_origin {
            return self.refusal(StatusCode::FORBIDDEN, "Forbidden: origin not allowed");
        }
        if parts.method == Method::GET {
            return self.open_stream(&parts.headers);
        }
        self.post(query, &parts.headers, body).await
    }

    /// `GET /sse`: a new session, its stream starting with the `endpoint` event.
    fn open_stream(self: &Arc<Self>, headers: &HeaderMap) -> Answer {
        if !accepts(headers, "text/event-stream") {
            return self.refusal(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: the stream needs text/event-stream",
            );
        }
        let id = super::random_session_id();
        // `sse-unbounded-queue`: a queue no client can fill (a million events).
        let queue = if self.w.config.is(Broken::SseUnboundedQueue) {
            1 << 20
        } else {
            QUEUE
        };
        let (tx, rx) = mpsc::channel(queue);
        {
            let mut streams = crate::sync::lock(&self.streams);
            if streams.open.len() >= MAX_STREAMS {
                let oldest = streams
                    .open
                    .iter()
                    .min_by_key(|(_, o)| o.opened)
                    .map(|(id, _)| id.clone());
                if let Some(oldest) = oldest {
                    streams.open.remove(&oldest);
                }
            }
            streams.clock += 1;
            let opened = streams.clock;
            streams.open.insert(
                id.clone(),
                Open {
                    conv: Conversation::default(),
                    tx: tx.clone(),
                    opened,
                },
            );
        }
        // The session ends with its stream: when the client goes, so does what it held
        // (`sse-keep-ended-sessions`: it stays, and takes messages nobody will read the
        // answers to).
        if !self.w.config.is(Broken::SseKeepEndedSessions) {
            let front = self.clone();
            let ended = id.clone();
            tokio::spawn(async move {
                tx.closed().await;
                crate::sync::lock(&front.streams).open.remove(&ended);
            });
        }
        // `sse-foreign-endpoint`: the message URL on another host (127.0.0.2, this port).
        let origin = if self.w.config.is(Broken::SseForeignEndpoint) {
            format!("{}://127.0.0.2:{}", self.local.scheme, self.local.port)
        } else {
            String::new()
        };
        Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(EventBody {
                first: Some(Bytes::from(format!(
                    "event: endpoint\ndata: {origin}{MESSAGE_PATH}?session_id={id}\n\n"
                ))),
                rx: Some(rx),
            })
            .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, ""))
    }

    /// `POST /messages?session_id=ID`: the session, the media type and size, then the message
    /// to the core and its answer to the stream.
    async fn post(&self, query: &str, headers: &HeaderMap, body: Incoming) -> Answer {
        let ids: Vec<&str> = query
            .split('&')
            .filter_map(|kv| kv.strip_prefix("session_id="))
            .collect();
        if self.w.config.is(Broken::SsePrototypeSessions)
            && ids.iter().any(|id| PROTOTYPE_NAMES.contains(id))
        {
            return type_error_page();
        }
        let Some((id, mut conv, tx)) = self.session_named(&ids) else {
            return match ids.as_slice() {
                [_] => self.refusal(StatusCode::NOT_FOUND, "Not Found: unknown session"),
                _ => self.refusal(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: one session_id is required",
                ),
            };
        };
        let id = id.as_str();
        if !self.w.config.is(Broken::LaxHeaders) && !content_type_ok(headers) {
            return self.refusal(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: application/json required",
            );
        }
        let body = match self.read_message(headers, body).await {
            Ok(body) => body,
            Err(refusal) => return refusal,
        };
        self.w.recorder.message("sse", &body, header_list(headers));
        let reply = self.w.handle_body(&body, &mut conv);
        if let Some(open) = crate::sync::lock(&self.streams).open.get_mut(id) {
            open.conv = conv;
        }
        if self.w.config.is(Broken::SseWrongStream) {
            if let Reply::Message(m) = &reply {
                return self.send_by_id(m.clone(), tx).await;
            }
        }
        match reply {
            Reply::Refused(_) if self.w.config.is(Broken::Crash500) => type_error_page(),
            Reply::Refused(err) => json_answer(StatusCode::BAD_REQUEST, &err),
            Reply::Crash => plain(StatusCode::INTERNAL_SERVER_ERROR, ""),
            Reply::Accepted | Reply::Hang | Reply::Fault(Fault::Empty) => accepted(),
            Reply::Message(m) | Reply::Unknown(m) => self.send(id, &tx, &[m]),
            Reply::Sequence(ms) => self.send(id, &tx, &ms),
            Reply::Fault(Fault::Garbage) => {
                let _ = tx.try_send(Bytes::from_static(b"event: message\ndata: <html>oops\n\n"));
                accepted()
            }
            Reply::Fault(Fault::Close) => {
                crate::sync::lock(&self.streams).open.remove(id);
                accepted()
            }
        }
    }

    /// The POST's body, read within the size limit (refused before it is read when its declared
    /// length is past it; `unbounded` reads up to 1.5 GiB, so a test cannot take the machine
    /// down), in no content coding but identity (415 otherwise: this front inflates nothing).
    async fn read_message(&self, headers: &HeaderMap, body: Incoming) -> Result<Vec<u8>, Answer> {
        let coded = headers
            .get_all(hyper::header::CONTENT_ENCODING)
            .iter()
            .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
        if coded && !self.w.config.is(Broken::LaxHeaders) {
            return Err(self.refusal(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: no content coding is read here",
            ));
        }
        let unbounded = self.w.config.is(Broken::Unbounded);
        let declared = headers
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let too_large = || self.refusal(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large");
        if !unbounded && declared.is_some_and(|n| n > MAX_MESSAGE as u64) {
            return Err(too_large());
        }
        let limit = if unbounded { 3 << 29 } else { MAX_MESSAGE };
        match read_body(body, limit).await {
            BodyRead::Done(b) => Ok(b),
            BodyRead::TooLarge => Err(too_large()),
            BodyRead::Failed => Err(self.refusal(StatusCode::BAD_REQUEST, "Bad Request")),
        }
    }

    /// The session one `session_id` names (its id, conversation and stream); under
    /// `sse-any-session`, the newest one whatever the query names.
    fn session_named(&self, ids: &[&str]) -> Option<(String, Conversation, mpsc::Sender<Bytes>)> {
        let streams = crate::sync::lock(&self.streams);
        let found = match ids {
            [id] => streams.open.get_key_value(*id),
            _ => None,
        };
        let found = found.or_else(|| {
            self.w
                .config
                .is(Broken::SseAnySession)
                .then(|| streams.open.iter().max_by_key(|(_, o)| o.opened))
                .flatten()
        });
        found.map(|(id, o)| (id.clone(), o.conv.clone(), o.tx.clone()))
    }

    /// Queue `messages` on a session's stream: a client that reads none of a full queue loses
    /// its session.
    fn send(&self, id: &str, tx: &mpsc::Sender<Bytes>, messages: &[Value]) -> Answer {
        for m in messages {
            let event = Bytes::from(format!("event: message\ndata: {m}\n\n"));
            if tx.try_send(event).is_err() {
                crate::sync::lock(&self.streams).open.remove(id);
                return self.refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable: the session's stream is not being read",
                );
            }
        }
        accepted()
    }

    /// `sse-wrong-stream`: the answer goes to whichever session last POSTed its id, after
    /// waiting 150 ms for another to.
    async fn send_by_id(&self, m: Value, tx: mpsc::Sender<Bytes>) -> Answer {
        let key = m.get("id").map(Value::to_string).unwrap_or_default();
        crate::sync::lock(&self.by_id).insert(key.clone(), tx.clone());
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        let to = crate::sync::lock(&self.by_id)
            .get(&key)
            .cloned()
            .unwrap_or(tx);
        let _ = to.try_send(Bytes::from(format!("event: message\ndata: {m}\n\n")));
        accepted()
    }

    /// A refusal of the front's own: the status and a JSON-RPC error whose id is null.
    fn refusal(&self, status: StatusCode, message: &str) -> Answer {
        self.w.refused();
        json_answer(
            status,
            &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}}),
        )
    }
}

/// What express shows when a handler throws (`sse-prototype-sessions`).
fn type_error_page() -> Answer {
    let mut answer = Response::new(EventBody::whole(Bytes::from_static(
        b"<!DOCTYPE html><html><body><pre>TypeError: transport.handlePostMessage is not a function<br> &nbsp; &nbsp;at /srv/gateway/index.js:42:19</pre></body></html>",
    )));
    *answer.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    answer
}

fn accepted() -> Answer {
    Response::builder()
        .status(StatusCode::ACCEPTED)
        .body(EventBody::whole(Bytes::new()))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, ""))
}

fn json_answer(status: StatusCode, body: &Value) -> Answer {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(EventBody::whole(body.to_string()))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, ""))
}

fn plain(status: StatusCode, text: &'static str) -> Answer {
    let mut answer = Response::new(EventBody::whole(Bytes::from_static(text.as_bytes())));
    *answer.status_mut() = status;
    answer
}
