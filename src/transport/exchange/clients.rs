//! A `clients` case: the same request sent by several clients at once, each on its own
//! connection (and handshake, where the lane has one), each with its own mark. What the others
//! got is kept beside the first client's answer, for the `crossed` check.

use super::http_request::{http_handshake, http_messages, Sent};
use super::*;
use crate::transport::{ClientAnswer, ClientsSeen};

/// How much of each further client's answer is kept: enough for any mark to show.
const TEXT_KEEP: usize = 64 * 1024;

/// The marks of `n` clients: unique to this trial (a salt), and none a part of another (the
/// count follows the number).
pub(super) fn marks(n: u8) -> Vec<String> {
    let salt: u32 = rand::random();
    (1..=n)
        .map(|k| format!("gauntlet-client-{k}-of-{n}-{salt:08x}"))
        .collect()
}

/// One further client, ready to send, or refused before it could.
pub(super) enum Prepared {
    Ready(Wire),
    Refused(String),
}

/// What the further clients send: each one's handshake (sequentially, before anyone sends the
/// case's request, so that the requests themselves go out together) and its request, built as
/// the first client's is with its own mark and session.
pub(super) async fn prepare(
    t: &Facts<'_>,
    first: &Sent<'_>,
    marks: &[String],
    deadline: Instant,
) -> Vec<Prepared> {
    let mut out = Vec::new();
    for mark in marks {
        let hs = match first.handshake {
            Some(_) => match http_handshake(first.url, &t.handshake, deadline).await {
                Ok(hs) => Some(hs),
                Err(e) => {
                    out.push(Prepared::Refused(chain(&e)));
                    continue;
                }
            },
            None => None,
        };
        let mut ph = first.placeholders.clone();
        ph.set("client", mark.clone());
        if let Some(hs) = &hs {
            ph.set("protocol_version", hs.version.clone())
                .set("session_id", hs.session.clone().unwrap_or_default());
        }
        let sent = Sent {
            handshake: hs.as_ref(),
            placeholders: &ph,
            ..*first
        };
        // What the request was is noted on the first client's observation; these are copies.
        let mut scratch = Observation::new(crate::case::TransportKind::Http);
        out.push(Prepared::Ready(
            sent.request(&t.case.spec.request, &mut scratch),
        ));
    }
    out
}

/// In flight: each further client's exchange, started now.
pub(super) type InFlight =
    Vec<Result<tokio::task::JoinHandle<Result<HttpResponse, TransportError>>, String>>;

/// Start every ready client's request at once.
pub(super) fn send(url: &HttpUrl, prepared: Vec<Prepared>, deadline: Instant) -> InFlight {
    prepared
        .into_iter()
        .map(|p| match p {
            Prepared::Ready(wire) => {
                let url = url.clone();
                Ok(tokio::spawn(async move {
                    http::exchange(&url, wire, deadline, SseRead::ToFirstResponse).await
                }))
            }
            Prepared::Refused(e) => Err(e),
        })
        .collect()
}

/// What each further client got, in client order.
pub(super) async fn collect(marks: Vec<String>, in_flight: InFlight) -> ClientsSeen {
    let mut others = Vec::new();
    for f in in_flight {
        let answer = match f {
            Err(e) => ClientAnswer {
                setup_error: Some(e),
                ending: Ending::Closed,
                status: None,
                messages: Vec::new(),
                text: String::new(),
            },
            Ok(task) => match task.await {
                Ok(Ok(resp)) => {
                    let (messages, _) = http_messages(&resp);
                    let keep = resp.body.len().min(TEXT_KEEP);
                    ClientAnswer {
                        setup_error: None,
                        ending: if resp.timed_out {
                            Ending::TimedOut
                        } else {
                            Ending::Answered
                        },
                        status: Some(resp.status),
                        messages,
                        text: String::from_utf8_lossy(&resp.body[..keep]).into_owned(),
                    }
                }
                Ok(Err(e)) => ClientAnswer {
                    setup_error: None,
                    ending: match e {
                        e if e.is_timeout() => Ending::TimedOut,
                        TransportError::Connect(e) => Ending::Unreachable(e.to_string()),
                        _ => Ending::Closed,
                    },
                    status: None,
                    messages: Vec::new(),
                    text: String::new(),
                },
                // The task panicked: nothing came back to this client.
                Err(_) => ClientAnswer {
                    setup_error: None,
                    ending: Ending::Closed,
                    status: None,
                    messages: Vec::new(),
                    text: String::new(),
                },
            },
        };
        others.push(answer);
    }
    ClientsSeen { marks, others }
}
