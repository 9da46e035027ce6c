//! The HTTP+SSE transport of protocol 2024-11-05, the client's side of its stream: a `GET` that
//! opens an event stream, whose first event (`endpoint`) names the URL messages are POSTed to,
//! and on which every answer then arrives as a `message` event.
//!
//! [`EventStream::open`] sends the GET and reads its head; a task reads the body from then on
//! (de-chunked, capped) and hands each complete event to the reader in order. Reading is as
//! strict as for a Streamable HTTP answer: events are split on blank lines (CRLF, LF or CR),
//! `data` lines are joined, comments dropped; what is not an event is never an answer.

use super::http::{self, ChunkDecoder, HttpUrl, SseEvent};
use super::TransportError;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The most event text the runner keeps of one stream (what is past it ends the stream).
const STREAM_CAP: usize = 16 * 1024 * 1024;
/// Events the reading task holds for a reader that has not taken them yet: past it, the task
/// stops reading and the stream's bytes wait in the socket (the server sees a slow client).
const QUEUED_EVENTS: usize = 1024;

/// What the reading task hands on.
#[derive(Debug)]
enum Item {
    Event(SseEvent),
    /// The stream ended: the server closed it (`None`), or it broke (the reason).
    Ended(Option<String>),
}

/// An open event stream.
#[derive(Debug)]
pub(crate) struct EventStream {
    /// The GET's answer head (`body` empty: the body is the stream).
    pub(crate) head: http::HttpResponse,
    events: mpsc::Receiver<Item>,
    ended: Option<Option<String>>,
    task: tokio::task::JoinHandle<()>,
    /// Set: the task stops reading the connection (what the server sends waits in the socket).
    paused: tokio::sync::watch::Sender<bool>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How a wait for the next event ended without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoEvent {
    /// The deadline passed.
    Deadline,
    /// The stream ended: closed by the server (`None`), or broken (why).
    Ended(Option<String>),
}

impl EventStream {
    /// `GET url.path` with `headers` (sent as given, in order), before `deadline`. A non-2xx
    /// answer, or one that is not `text/event-stream`, is returned as the head with its body
    /// read (at most 64 KiB), and no events.
    pub(crate) async fn open(
        url: &HttpUrl,
        headers: &[(String, String)],
        deadline: Instant,
    ) -> Result<EventStream, TransportError> {
        let stream = http::connect(url, deadline).await?;
        let (mut reader, mut writer) = tokio::io::split(stream);
        let head = http::head_bytes("GET", &url.path, headers);
        tokio::time::timeout_at(deadline, writer.write_all(&head))
            .await
            .map_err(|_| TransportError::Timeout("request"))?
            .map_err(TransportError::Io)?;
        let (mut head, mut rest) = http::read_head(&mut reader, deadline).await?;
        let (tx, rx) = mpsc::channel(QUEUED_EVENTS);
        let (paused, pause) = tokio::sync::watch::channel(false);
        let streaming = (200..300).contains(&head.status) && head.is_sse();
        if !streaming {
            // Not a stream: what the body says (a refusal's text) is kept in the head.
            head.body = std::mem::take(&mut rest);
            head.body.truncate(64 * 1024);
        }
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        let task = tokio::spawn(async move {
            // The write half stays open as long as the stream is read: closing it could end
            // the stream.
            let _writer = writer;
            if !streaming {
                let _ = tx.send(Item::Ended(None)).await;
                return;
            }
            let end = read_events(&mut reader, rest, chunked, &tx, pause).await;
            let _ = tx.send(Item::Ended(end)).await;
        });
        Ok(EventStream {
            head,
            events: rx,
            ended: None,
            task,
            paused,
        })
    }

    /// Stop reading the stream (a client that does not read): the connection stays open, and
    /// what the server sends from now on waits in the socket's buffers, then in the server.
    pub(crate) fn pause(&self) {
        let _ = self.paused.send(true);
    }

    /// Close the stream: the connection is shut and nothing more is read.
    pub(crate) fn close(&mut self) {
        self.task.abort();
        self.events.close();
        self.ended = Some(None);
    }

    /// Whether the GET was answered with an event stream.
    pub(crate) fn is_stream(&self) -> bool {
        (200..300).contains(&self.head.status) && self.head.is_sse()
    }

    /// The next event, waiting until `deadline`.
    pub(crate) async fn next(&mut self, deadline: Instant) -> Result<SseEvent, NoEvent> {
        if let Some(end) = &self.ended {
            return Err(NoEvent::Ended(end.clone()));
        }
        match tokio::time::timeout_at(deadline, self.events.recv()).await {
            Err(_) => Err(NoEvent::Deadline),
            Ok(Some(Item::Event(e))) => Ok(e),
            Ok(Some(Item::Ended(end))) => {
                self.ended = Some(end.clone());
                Err(NoEvent::Ended(end))
            }
            Ok(None) => {
                self.ended = Some(None);
                Err(NoEvent::Ended(None))
            }
        }
    }
}

/// Read the stream's body (`rest` already read with the head) into events until it ends:
/// `None` when the server closed it, else why it broke.
async fn read_events<R: tokio::io::AsyncReadExt + Unpin>(
    reader: &mut R,
    rest: Vec<u8>,
    chunked: bool,
    tx: &mpsc::Sender<Item>,
    mut pause: tokio::sync::watch::Receiver<bool>,
) -> Option<String> {
    let mut decoder = chunked.then(ChunkDecoder::default);
    let mut splitter = EventSplitter::default();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut data = rest;
    let mut total = 0usize;
    // No deadline of its own: the task lives as long as its stream is held.
    let forever = Instant::now() + std::time::Duration::from_secs(365 * 24 * 3600);
    loop {
        let mut body = Vec::new();
        match decoder.as_mut() {
            Some(d) => {
                if d.feed(&data, &mut body).is_err() {
                    return Some("the stream's chunked framing is broken".into());
                }
            }
            None => body = std::mem::take(&mut data),
        }
        data.clear();
        total += body.len();
        if total > STREAM_CAP {
            return Some(format!("the stream sent more than {STREAM_CAP} bytes"));
        }
        for event in splitter.feed(&body) {
            if tx.send(Item::Event(event)).await.is_err() {
                return None;
            }
        }
        if decoder.as_ref().is_some_and(|d| d.done) {
            return None;
        }
        // Paused: no more reads until the stream is dropped (the sender goes with it).
        while *pause.borrow_and_update() {
            if pause.changed().await.is_err() {
                return None;
            }
        }
        match http::read_some(reader, &mut chunk, forever, "stream").await {
            Ok(0) => return None,
            Ok(n) => data.extend_from_slice(&chunk[..n]),
            Err(e) => return Some(reference_gate::error_chain(&e)),
        }
    }
}

/// Splits a stream's bytes into complete events as they arrive: line ends (CRLF, LF, or a lone
/// CR, even split across reads) made LF, each block up to a blank line parsed as one event.
#[derive(Debug, Default)]
struct EventSplitter {
    text: Vec<u8>,
    /// The last byte fed was a CR: an LF that starts the next read belongs to it.
    after_cr: bool,
}

impl EventSplitter {
    fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' => {
                    self.text.push(b'\n');
                    self.after_cr = true;
                }
                _ => {
                    self.text.push(b);
                    self.after_cr = false;
                }
            }
        }
        let Some(end) = http::find_last(&self.text, b"\n\n") else {
            return Vec::new();
        };
        let complete: Vec<u8> = self.text.drain(..end + 2).collect();
        http::parse_sse(&complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_reads_and_line_ends() {
        let mut s = EventSplitter::default();
        assert!(s.feed(b"event: endpoint\r").is_empty());
        let got = s.feed(b"\ndata: /messages?session_id=1\r\n\r\ndata: {\"a\"");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].event.as_deref(), Some("endpoint"));
        assert_eq!(got[0].data, "/messages?session_id=1");
        assert!(s.feed(b":1}").is_empty());
        let got = s.feed(b"\r\r: comment\n\nevent: message\ndata: 2\n\n");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].data, "{\"a\":1}");
        assert_eq!(got[1].event.as_deref(), Some("message"));
        assert_eq!(got[1].data, "2");
    }
}
