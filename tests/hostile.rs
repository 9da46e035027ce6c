//! A hostile endpoint cannot hang or exhaust the runner: every read is capped and every wait ends
//! at a deadline. The servers here misbehave on purpose; the assertions are about what the runner
//! reports, never about how fast it was.

use mcp_gauntlet::case::{parse_case, Case, Source};
use mcp_gauntlet::settings::{Settings, Speaking};
use mcp_gauntlet::transport::exchange::{run_case, Endpoint, Facts};
use mcp_gauntlet::transport::http::HttpUrl;
use mcp_gauntlet::transport::{Ending, Observation};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn ping_case(session: &str) -> Case {
    let text = format!(
        r#"{{"title": "ping", "requirements": ["MCP-UTIL-01"], "session": "{session}",
            "request": {{"body": {{"json": {{"jsonrpc": "2.0", "id": 1, "method": "ping"}}}}}},
            "expect": {{"outcome": "accept"}}}}"#
    );
    Case {
        id: "hostile/ping".into(),
        spec: parse_case("hostile.json", &text).expect("valid case"),
        source: Source::Embedded,
    }
}

fn quick() -> Speaking {
    let settings = Settings {
        case_timeout: Duration::from_millis(500),
        probe_timeout: Duration::from_millis(500),
        ..Settings::default()
    };
    Speaking::new(
        std::sync::Arc::new(settings),
        mcp_gauntlet::versions::Version::new(2025, 11, 25),
    )
}

/// Serve every connection with `answer` (after reading the request head) on 127.0.0.1.
async fn hostile_http<F, Fut>(answer: F) -> HttpUrl
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = s.read(&mut buf).await;
                answer(s).await;
            });
        }
    });
    HttpUrl::parse(&format!("http://{addr}/mcp")).unwrap()
}

async fn run_http(url: HttpUrl) -> Observation {
    let (case, settings) = (ping_case("none"), quick());
    run_case(
        &Facts::of(&case, &settings),
        &Endpoint::Http(url),
        None,
        None,
        true,
    )
    .await
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let url = hostile_http(|s| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(s);
    })
    .await;
    let obs = run_http(url).await;
    assert_eq!(obs.answer.ending, Ending::TimedOut);
    assert_eq!(obs.after.alive, Some(false));
}

#[tokio::test]
async fn an_endless_body_is_cut_at_the_cap_or_the_deadline() {
    let url = hostile_http(|mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n")
            .await;
        let chunk = vec![b'x'; 65536];
        while s.write_all(&chunk).await.is_ok() {}
    })
    .await;
    let obs = run_http(url).await;
    let h = obs.answer.http.expect("a head arrived");
    assert!(h.truncated || h.timed_out, "{h:?}");
    assert!(h.body_len <= 16 * 1024 * 1024);
}

#[tokio::test]
async fn megabytes_of_headers_are_refused() {
    let url = hostile_http(|mut s| async move {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\n").await;
        while s
            .write_all(
                b"x-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
            )
            .await
            .is_ok()
        {}
    })
    .await;
    let obs = run_http(url).await;
    assert!(obs.answer.http.is_none());
    assert_ne!(obs.answer.ending, Ending::Answered);
}

#[tokio::test]
async fn an_endless_event_stream_without_a_response_ends_at_the_deadline() {
    let url = hostile_http(|mut s| async move {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n").await;
        loop {
            if s.write_all(b": keep-alive\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let obs = run_http(url).await;
    let h = obs.answer.http.expect("a head arrived");
    assert!(h.timed_out);
    assert!(obs
        .answer
        .messages
        .iter()
        .all(|m| m.get("result").is_none()));
}

#[tokio::test]
async fn a_body_that_never_finishes_ends_at_the_deadline() {
    let url = hostile_http(|mut s| async move {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"jsonrpc\"").await;
        tokio::time::sleep(Duration::from_secs(60)).await;
    })
    .await;
    let obs = run_http(url).await;
    assert!(obs.answer.http.expect("a head arrived").timed_out);
}

async fn run_stdio(command: &str) -> Observation {
    let endpoint = Endpoint::stdio(command, None);
    let (case, settings) = (ping_case("initialized"), quick());
    run_case(&Facts::of(&case, &settings), &endpoint, None, None, true).await
}

#[tokio::test]
async fn a_stdio_server_printing_without_newlines_is_cut_off() {
    let obs = run_stdio("sh -c 'while :; do printf xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done'").await;
    assert!(obs.sent.setup_error.is_some());
}

#[tokio::test]
async fn a_stdio_server_that_never_reads_is_cut_off() {
    let obs = run_stdio("sleep 60").await;
    assert!(obs.sent.setup_error.is_some());
}

#[tokio::test]
async fn a_stdio_server_that_cannot_start_is_unreachable() {
    let obs = run_stdio("/nonexistent/mcp-server").await;
    assert!(matches!(obs.answer.ending, Ending::Unreachable(_)));
}

/// An HTTP+SSE endpoint whose stream (a `GET`) is answered by `stream`, and whose POSTs are
/// answered `202 Accepted` and otherwise ignored: where its stream is.
async fn hostile_sse<F, Fut>(stream: F) -> HttpUrl
where
    F: Fn(tokio::net::TcpStream, u16) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stream = std::sync::Arc::new(stream);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let stream = stream.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = s.read(&mut buf).await;
                if buf.starts_with(b"GET") {
                    stream(s, addr.port()).await;
                } else {
                    let _ = s
                        .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                        .await;
                }
            });
        }
    });
    HttpUrl::parse(&format!("http://{addr}/sse")).unwrap()
}

async fn run_sse(url: HttpUrl, session: &str) -> Observation {
    let (case, settings) = (ping_case(session), quick());
    run_case(
        &Facts::of(&case, &settings),
        &Endpoint::Sse(url),
        None,
        None,
        true,
    )
    .await
}

const STREAM_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";

/// A stream that never names its message URL is no session: the case is not sent, and the
/// runner says why by the deadline.
#[tokio::test]
async fn an_sse_stream_without_an_endpoint_event_is_no_session() {
    let url = hostile_sse(|mut s, _| async move {
        let _ = s.write_all(STREAM_HEAD).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
    })
    .await;
    let obs = run_sse(url, "none").await;
    assert!(obs.sent.setup_error.is_some(), "{obs:?}");
    assert_eq!(obs.after.alive, None);
}

/// One event that never ends (no blank line) is cut at the stream's cap or the deadline.
#[tokio::test]
async fn an_endless_first_event_is_cut() {
    let url = hostile_sse(|mut s, _| async move {
        let _ = s.write_all(STREAM_HEAD).await;
        let _ = s.write_all(b"event: endpoint\ndata: /m").await;
        let chunk = vec![b'x'; 65536];
        while s.write_all(&chunk).await.is_ok() {}
    })
    .await;
    let obs = run_sse(url, "none").await;
    assert!(obs.sent.setup_error.is_some(), "{obs:?}");
}

/// An endpoint on another origin is not followed: nothing is POSTed there, and the case says so.
#[tokio::test]
async fn an_endpoint_on_another_origin_is_not_followed() {
    let url = hostile_sse(|mut s, _| async move {
        let _ = s.write_all(STREAM_HEAD).await;
        let _ = s
            .write_all(b"event: endpoint\ndata: http://127.0.0.1:9/messages?session_id=1\n\n")
            .await;
        tokio::time::sleep(Duration::from_secs(60)).await;
    })
    .await;
    let obs = run_sse(url.clone(), "none").await;
    // The kind of refusal is `SseOpenError::OtherOrigin` (unit-tested where endpoints are
    // resolved); here: no session, nothing sent, and a case that does not judge the endpoint
    // does not apply.
    assert!(obs.sent.inapplicable.is_some(), "{obs:?}");
    assert!(
        obs.sent.setup_error.is_none() && obs.answer.sse.is_none() && obs.answer.http.is_none()
    );
    // The case that judges the endpoint records it, unsent, for its finding.
    let case = Case {
        id: "hostile/endpoint".into(),
        spec: parse_case(
            "hostile.json",
            r#"{"title": "endpoint", "requirements": ["MCP-SSE-07"], "transports": ["sse"],
                "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}},
                "expect": {"outcome": "accept", "endpoint_same_origin": true}}"#,
        )
        .expect("valid case"),
        source: Source::Embedded,
    };
    let settings = quick();
    let obs = run_case(
        &Facts::of(&case, &settings),
        &Endpoint::Sse(url),
        None,
        None,
        true,
    )
    .await;
    let seen = obs.answer.sse.as_ref().expect("the endpoint was recorded");
    assert!(
        seen.elsewhere && seen.endpoint.contains("127.0.0.1:9"),
        "{obs:?}"
    );
    assert!(
        obs.answer.http.is_none()
            && obs.sent.inapplicable.is_none()
            && obs.sent.setup_error.is_none()
    );
}

/// POSTs accepted and nothing ever on the stream: the case times out at its deadline, and the
/// alive probe (a fresh session's handshake) fails.
#[tokio::test]
async fn posts_accepted_and_never_answered_time_out() {
    let url = hostile_sse(|mut s, port| async move {
        let _ = s.write_all(STREAM_HEAD).await;
        let _ = s
            .write_all(
                format!("event: endpoint\ndata: http://127.0.0.1:{port}/messages?session_id=1\n\n")
                    .as_bytes(),
            )
            .await;
        tokio::time::sleep(Duration::from_secs(60)).await;
    })
    .await;
    let obs = run_sse(url, "none").await;
    assert!(obs.sent.setup_error.is_none(), "{obs:?}");
    assert_eq!(obs.answer.ending, Ending::TimedOut);
    assert_eq!(obs.after.alive, Some(false));
    assert!(obs
        .answer
        .sse
        .and_then(|s| s.post)
        .is_some_and(|p| p.status == 202));
}
