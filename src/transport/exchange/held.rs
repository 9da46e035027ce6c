//! Connections held the slow way (`series.hold`, the `connections/` family): `count`
//! connections each send the case's request, or part of it (the head a byte at a time, the body
//! a byte at a time, or all of it and then nothing), and are held for `hold.for_ms` while the
//! process is sampled and another connection pings. Then, with them still held, the request is
//! sent whole on a fresh connection (its answer is the one the judge reads); the held
//! connections are closed, and the process is read again once it has had a moment to let go of
//! them. Nothing here decides pass or fail.

use super::series::{
    kind_key, ping_while, prepare, sample_while, send_step_by, steps_forwarded, Shared, Steps,
};
use super::*;
use crate::case::{HoldSpec, SeriesSpec, Trickle};
use crate::transport::procfs::{self, ProcSample, Watch};
use crate::transport::{HeldSeen, SeriesSeen, StepKind};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// How long opening one held connection may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);
/// How long an `in_turn` connection waits for the head of the one before it.
const IN_TURN_WITHIN: Duration = Duration::from_millis(500);
/// How long the process is given to let go of the closed connections' descriptors.
const RELEASE_WITHIN: Duration = Duration::from_secs(3);
/// The header line a `headers` connection never finishes.
const ENDLESS_HEADER: &[u8] = b"x-gauntlet-slow: ";

/// Run `case`'s held connections against `url`.
pub(super) async fn run_held(
    t: &Facts<'_>,
    (series, hold): (&SeriesSpec, &HoldSpec),
    url: &HttpUrl,
    (witness, watch): (Option<&WitnessView>, Option<&Watch>),
    check_alive: bool,
) -> Observation {
    let (case, settings) = (t.case, t.settings);
    let shared = match prepare(t, series, url).await {
        Ok(shared) => Arc::new(shared),
        Err(obs) => return *obs,
    };
    if let Some(why) = unheld(&shared, hold) {
        let mut obs = Observation::new(crate::case::TransportKind::Http);
        obs.sent.inapplicable = Some(why);
        return obs;
    }
    let pid = watch.and_then(Watch::now);
    let steps = Arc::new(Steps::new());
    let started = Instant::now();
    let mark = witness.map(WitnessView::mark);
    let before = pid.and_then(procfs::sample);
    let sampler = pid.map(|pid| tokio::spawn(sample_while(pid, steps.clone())));
    let pinger = tokio::spawn(ping_while(url.clone(), settings.clone(), steps.clone()));
    let (release, released) = watch::channel(false);
    let held = open_all(&shared, hold, &released, (&steps, started)).await;
    let hold_end = (started + Duration::from_millis(hold.for_ms)).min(shared.budget_end);
    tokio::time::sleep_until(hold_end).await;
    // With every connection still held: a client that sends the request whole, with a
    // deadline of its own (a hold its budget cut short must not time it out at once).
    let own = settings.case_ends(case);
    let (answer, _) = send_step_by(&shared, series.count, own).await;
    let held_sample = pid.and_then(procfs::sample);
    let _ = release.send(true);
    let mut fates = Vec::new();
    for h in held {
        fates.push(h.await.unwrap_or(Fate::NotOpened));
    }
    steps.stop.store(true, Ordering::SeqCst);
    let pings = pinger.await.unwrap_or_default();
    let samples = match sampler {
        Some(s) => s.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let after = match (pid, before) {
        (Some(pid), Some(before)) => released_sample(pid, before).await,
        _ => None,
    };
    let pinged = pings.times.len() + pings.failures.len() + pings.refusals.len();
    let mut obs = answer.clone();
    let opened = held_count(&fates);
    let seen = SeriesSeen {
        count: series.count,
        // The held connections that opened, and the request sent whole: what a gate may have
        // passed on, one message each at most.
        sent: opened + 1,
        // The budget (or the run's deadline) ended the opening or the hold early.
        cut: steps.done.load(Ordering::SeqCst) < series.count
            || hold_end < started + Duration::from_millis(hold.for_ms),
        kinds: vec![StepKind {
            key: kind_key(&answer),
            step: series.count,
            count: 1,
            capped: false,
            observation: Box::new(answer),
        }],
        watched: before.is_some(),
        before,
        samples,
        after,
        pings: pings.times,
        ping_failures: pings.failures,
        ping_refusals: pings.refusals,
        held: Some(tally(hold, &fates, held_sample)),
        elapsed: started.elapsed(),
        ..SeriesSeen::default()
    };
    let forwarded = witness.zip(mark).map(|(w, m)| w.since(m));
    obs.after.witness = forwarded
        .map(|events| steps_forwarded(events, obs.sent.method.as_deref(), settings, pinged));
    if check_alive && obs.sent.setup_error.is_none() {
        super::over_http::alive_probe(&mut obs, case, url, settings).await;
    }
    obs.answer.series = Some(Box::new(seen));
    obs
}

/// Open the held connections: all of them connected first, then each a task of its own that
/// sends and holds it until `released`, begun together so that the requests reach the server
/// at once (a check-then-act race in the server, such as "one stream a session", shows only
/// then); with `hold.in_turn`, one after another ([`open_in_turn`]). The steps' `done` counts
/// them as they are begun.
async fn open_all(
    shared: &Shared,
    hold: &HoldSpec,
    released: &watch::Receiver<bool>,
    (steps, started): (&Steps, Instant),
) -> Vec<tokio::task::JoinHandle<Fate>> {
    if hold.in_turn {
        return open_in_turn(shared, hold, released, (steps, started)).await;
    }
    let mut connecting = Vec::new();
    for _ in 0..shared.series.count {
        if Instant::now() >= shared.budget_end {
            break;
        }
        connecting.push(tokio::spawn(connect(shared.url.connect_addr())));
    }
    let mut connected = Vec::new();
    for c in connecting {
        connected.push(c.await.ok().flatten());
    }
    let mut held = Vec::new();
    for (step, stream) in (0..).zip(connected) {
        // Nobody waits for these answers: the receiver is dropped here.
        held.push(begin(shared, hold, released, (steps, started), (step, stream)).0);
    }
    held
}

/// Step `step`'s held connection set going on `stream`: its task, and what tells when its
/// answer's head came. The step is counted as sent.
fn begin(
    shared: &Shared,
    hold: &HoldSpec,
    released: &watch::Receiver<bool>,
    (steps, started): (&Steps, Instant),
    (step, stream): (u32, Option<TcpStream>),
) -> (
    tokio::task::JoinHandle<Fate>,
    tokio::sync::oneshot::Receiver<()>,
) {
    let (answered, head) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(hold_one(
        stream,
        request_bytes(shared, step).unwrap_or_default(),
        hold.clone(),
        (released.clone(), answered),
        started,
    ));
    steps.done.fetch_add(1, Ordering::SeqCst);
    (task, head)
}

/// `hold.in_turn`: each connection opened, and its request sent, once the one before has the
/// head of its answer. After one wait of [`IN_TURN_WITHIN`] in vain, or once the hold's time
/// is up, the rest are opened without waiting; none is opened past the series' budget.
async fn open_in_turn(
    shared: &Shared,
    hold: &HoldSpec,
    released: &watch::Receiver<bool>,
    (steps, started): (&Steps, Instant),
) -> Vec<tokio::task::JoinHandle<Fate>> {
    let hold_end = started + Duration::from_millis(hold.for_ms);
    let mut waiting = true;
    let mut held = Vec::new();
    for step in 0..shared.series.count {
        if Instant::now() >= shared.budget_end {
            break;
        }
        let stream = connect(shared.url.connect_addr()).await;
        let (task, head) = begin(shared, hold, released, (steps, started), (step, stream));
        held.push(task);
        if waiting {
            waiting = Instant::now() < hold_end
                && tokio::time::timeout(IN_TURN_WITHIN, head).await.is_ok();
        }
    }
    held
}

/// One connection to `addr`, within [`CONNECT_WITHIN`]; `None` when it could not be opened.
async fn connect(addr: String) -> Option<TcpStream> {
    match tokio::time::timeout(CONNECT_WITHIN, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => Some(stream),
        _ => None,
    }
}

/// Step `step`'s request on the wire, as [`send_step`] would send it whole; `None` for a body
/// over 1 MiB.
fn request_bytes(shared: &Shared, step: u32) -> Option<Vec<u8>> {
    let mut scratch = Observation::new(crate::case::TransportKind::Http);
    match shared.wire(step, &mut scratch) {
        Wire::Request {
            method,
            path,
            headers,
            body,
            ..
        } => {
            // Held connections stay open: the runner's usual `connection: close` would ask the
            // server to end an idle one after its answer.
            let headers: Vec<(String, String)> = headers
                .into_iter()
                .filter(|(k, _)| !k.eq_ignore_ascii_case("connection"))
                .collect();
            let mut bytes = http::head_bytes(method.as_str(), &path, &headers);
            bytes.extend(body.to_vec_within(1024 * 1024)?);
            Some(bytes)
        }
        Wire::Raw(bytes) => Some(bytes),
    }
}

/// What became of one held connection.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// It could not be opened.
    NotOpened,
    /// Still open when the runner let it go; `answered` with this status first, if at all,
    /// and `streaming` when that answer is an event stream that had not ended.
    Held {
        answered: Option<u16>,
        streaming: bool,
    },
    /// The server closed it (or reset it) this long after the hold began.
    Closed {
        after: Duration,
        answered: Option<u16>,
    },
}

fn held_count(fates: &[Fate]) -> u32 {
    let opened = fates
        .iter()
        .filter(|f| !matches!(f, Fate::NotOpened))
        .count();
    u32::try_from(opened).unwrap_or(u32::MAX)
}

/// Why the connections cannot be held as the case says: over https, the runner may not open that many
/// descriptors, or the request's body cannot be trickled (none to hold back, chunked, or too
/// large to hold in memory). `None` when they can.
fn unheld(shared: &Shared, hold: &HoldSpec) -> Option<String> {
    if shared.url.tls.is_some() {
        return Some("not applicable: held connections are spoken over plain http only".into());
    }
    let wanted = u64::from(shared.series.count) + 64;
    if let Some(limit) = open_files_limit().filter(|l| *l < wanted) {
        return Some(format!("not applicable: this runner may open {limit} descriptors, and holding {} connections needs about {wanted} (raise `ulimit -n`)", shared.series.count));
    }
    let request = &shared.case.spec.request;
    if hold.trickle == Trickle::Body && request.chunked {
        return Some("not applicable: a chunked body is not trickled".into());
    }
    let bytes = request_bytes(shared, 0)?;
    let head_end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(bytes.len(), |i| i + 4);
    (hold.trickle == Trickle::Body && bytes.len() < head_end + 2)
        .then(|| "not applicable: a body of fewer than two bytes cannot be trickled".into())
}

/// This process's soft limit on open descriptors, from `/proc/self/limits`.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// On a connection opened (`None`: it could not be), send what `hold.trickle` says, and hold it
/// until `released`; what became of it.
async fn hold_one(
    stream: Option<TcpStream>,
    bytes: Vec<u8>,
    hold: HoldSpec,
    (mut released, answered): (watch::Receiver<bool>, tokio::sync::oneshot::Sender<()>),
    started: Instant,
) -> Fate {
    // Told once the answer's head has come (dropped, when the connection ends first).
    let mut answered = Some(answered);
    let Some(mut stream) = stream else {
        return Fate::NotOpened;
    };
    let _ = stream.set_nodelay(true);
    let (first, rest) = split_for(hold.trickle, &bytes);
    let mut read = Reading::default();
    let closed = |read: &Reading| Fate::Closed {
        after: started.elapsed(),
        answered: read.status(),
    };
    if stream.write_all(&first).await.is_err() {
        return closed(&read);
    }
    let mut rest = rest.into_iter();
    let mut tick = tokio::time::interval(Duration::from_millis(hold.every_ms));
    tick.tick().await;
    let mut chunk = [0u8; 4096];
    loop {
        tokio::select! {
            _ = released.changed() => return Fate::Held {
                answered: read.status(),
                streaming: read.open_stream(),
            },
            n = stream.read(&mut chunk) => match n {
                Ok(n) if n > 0 => {
                    read.push(&chunk[..n]);
                    if read.head_complete() {
                        if let Some(tell) = answered.take() {
                            let _ = tell.send(());
                        }
                    }
                }
                _ => return closed(&read),
            },
            _ = tick.tick(), if rest.len() > 0 => {
                if let Some(byte) = rest.next() {
                    if stream.write_all(&[byte]).await.is_err() {
                        return closed(&read);
                    }
                }
            }
        }
    }
}

/// What a held connection sends at once, and what it then sends a byte a tick.
fn split_for(trickle: Trickle, bytes: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let head_end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(bytes.len(), |i| i + 4);
    match trickle {
        Trickle::Idle => (bytes.to_vec(), Vec::new()),
        Trickle::Headers => {
            // The head without its blank line, then a header line that never ends.
            let mut first = bytes[..head_end.saturating_sub(2)].to_vec();
            first.extend_from_slice(ENDLESS_HEADER);
            (first, vec![b'a'; 100_000])
        }
        Trickle::Body => {
            let body = &bytes[head_end..];
            let last = body.len().saturating_sub(1);
            (bytes[..head_end].to_vec(), body[..last].to_vec())
        }
    }
}

/// The bytes of its answer a held connection keeps: the first [`HEAD_KEPT`] (the head) and the
/// last [`TAIL_KEPT`] (where a chunked body ends).
#[derive(Debug, Default)]
struct Reading {
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// How much of an answer's beginning a held connection keeps: its head, as far as it matters.
const HEAD_KEPT: usize = 4096;
/// How much of an answer's end it keeps: a chunked body's last chunk and the one before.
const TAIL_KEPT: usize = 16;
/// The end of a chunked body: the previous chunk's line end, then the zero-length last chunk.
const LAST_CHUNK: &[u8] = b"\r\n0\r\n\r\n";

impl Reading {
    fn push(&mut self, bytes: &[u8]) {
        let room = HEAD_KEPT.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.tail.extend_from_slice(bytes);
        let over = self.tail.len().saturating_sub(TAIL_KEPT);
        self.tail.drain(..over);
    }

    fn status(&self) -> Option<u16> {
        status_of(&self.head)
    }

    fn head_complete(&self) -> bool {
        self.head.windows(4).any(|w| w == b"\r\n\r\n")
    }

    /// Whether the answer read so far is an event stream that has not ended: a 2xx whose head
    /// says `text/event-stream` and gives no length (a body with a length is a whole answer),
    /// and, when chunked, whose last chunk has not come.
    fn open_stream(&self) -> bool {
        let Some(end) = self.head.windows(4).position(|w| w == b"\r\n\r\n") else {
            return false;
        };
        if !self.status().is_some_and(|s| (200..300).contains(&s)) {
            return false;
        }
        let head = String::from_utf8_lossy(&self.head[..end]).to_ascii_lowercase();
        let header = |name: &str| {
            head.split("\r\n")
                .skip(1)
                .filter_map(|line| line.split_once(':'))
                .find(|(n, _)| n.trim() == name)
                .map(|(_, v)| v.trim().to_string())
        };
        let events = header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
        let chunked = header("transfer-encoding").is_some_and(|t| t.contains("chunked"));
        let ended = chunked && (self.tail.ends_with(LAST_CHUNK) || self.head.ends_with(LAST_CHUNK));
        events && header("content-length").is_none() && !ended
    }
}

/// The status of an HTTP answer that begins `read`.
fn status_of(read: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(read.get(..read.len().min(12))?).ok()?;
    let rest = text.strip_prefix("HTTP/1.")?;
    rest.get(2..5)?.parse().ok()
}

/// The process once the held connections are closed: sampled until its descriptors are back
/// where they were before the hold (or [`RELEASE_WITHIN`] has passed).
async fn released_sample(pid: u32, before: ProcSample) -> Option<ProcSample> {
    let until = Instant::now() + RELEASE_WITHIN;
    loop {
        let sample = tokio::task::spawn_blocking(move || procfs::sample(pid))
            .await
            .ok()
            .flatten();
        let back = sample.is_some_and(|s| s.fds <= before.fds);
        if back || Instant::now() >= until {
            return sample;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The held connections' fates, counted.
fn tally(hold: &HoldSpec, fates: &[Fate], held_sample: Option<ProcSample>) -> HeldSeen {
    let mut seen = HeldSeen {
        trickle: Some(hold.trickle),
        every_ms: hold.every_ms,
        for_ms: hold.for_ms,
        held_sample,
        ..HeldSeen::default()
    };
    for fate in fates {
        match *fate {
            Fate::NotOpened => seen.not_opened += 1,
            Fate::Held {
                answered,
                streaming,
            } => {
                seen.held_to_the_end += 1;
                seen.streams_open += u32::from(streaming);
                count_answer(&mut seen, answered);
            }
            Fate::Closed { after, answered } => {
                seen.closed_by_server += 1;
                seen.first_closed_after =
                    Some(seen.first_closed_after.map_or(after, |a| a.min(after)));
                count_answer(&mut seen, answered);
            }
        }
    }
    seen
}

fn count_answer(seen: &mut HeldSeen, answered: Option<u16>) {
    if let Some(status) = answered {
        *seen.answers.entry(status).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUEST: &[u8] = b"POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello";

    #[test]
    fn each_trickle_holds_back_what_it_should() {
        let (first, rest) = split_for(Trickle::Headers, REQUEST);
        assert!(first.ends_with(b"content-length: 5\r\nx-gauntlet-slow: "));
        assert!(!first.windows(4).any(|w| w == b"\r\n\r\n"));
        assert!(rest.iter().all(|b| *b == b'a'));
        let (first, rest) = split_for(Trickle::Body, REQUEST);
        assert!(first.ends_with(b"\r\n\r\n"));
        assert_eq!(rest, b"hell");
        let (first, rest) = split_for(Trickle::Idle, REQUEST);
        assert_eq!(first, REQUEST);
        assert!(rest.is_empty());
    }

    fn read(parts: &[&[u8]]) -> Reading {
        let mut r = Reading::default();
        for p in parts {
            r.push(p);
        }
        r
    }

    #[test]
    fn an_event_stream_is_open_until_its_last_chunk() {
        let head: &[u8] =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(read(&[head]).open_stream());
        assert!(read(&[head, b"9\r\n: open\n\n\r\n"]).open_stream());
        assert!(!read(&[head, b"9\r\n: open\n\n\r\n", b"0\r\n\r\n"]).open_stream());
        let whole: &[u8] =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 4\r\n\r\nid:\n";
        assert!(!read(&[whole]).open_stream());
        let refused: &[u8] = b"HTTP/1.1 409 Conflict\r\ncontent-type: text/event-stream\r\n\r\n";
        assert!(!read(&[refused]).open_stream());
        let json: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n";
        assert!(!read(&[json]).open_stream());
        assert!(!read(&[b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"]).open_stream());
    }

    #[test]
    fn the_status_of_an_answer_is_read_from_its_first_line() {
        assert_eq!(status_of(b"HTTP/1.1 408 Request Timeout\r\n"), Some(408));
        assert_eq!(status_of(b"HTTP/1.0 200 OK"), Some(200));
        assert_eq!(status_of(b"HTTP/1.1 2"), None);
        assert_eq!(status_of(b"garbage"), None);
        assert_eq!(status_of(b""), None);
    }
}
