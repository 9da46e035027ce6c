//! The transport rules the witness's two HTTP fronts share (Streamable HTTP in `http.rs`,
//! HTTP+SSE in `sse.rs`): where it is served, Origin and Host, media types and `Accept`, and
//! how a body is read within a limit. A leaf: it imports neither front.

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use std::time::Duration;

/// Where the witness is served: its port and scheme, as `Origin` and `Host` must name them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Local {
    pub(super) port: u16,
    /// `http` or `https`.
    pub(super) scheme: &'static str,
}

/// How long a client may take to send headers, or the body.
pub(super) const READ_DEADLINE: Duration = Duration::from_secs(30);

pub(super) enum BodyRead {
    Done(Vec<u8>),
    TooLarge,
    Failed,
}

pub(super) async fn read_body(mut body: Incoming, limit: usize) -> BodyRead {
    let mut out = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return BodyRead::Failed;
            };
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > limit {
                    return BodyRead::TooLarge;
                }
                out.extend_from_slice(&data);
            }
        }
        BodyRead::Done(Vec::new())
    };
    match tokio::time::timeout(READ_DEADLINE * 4, read).await {
        Ok(BodyRead::Done(_)) => BodyRead::Done(out),
        Ok(other) => other,
        Err(_) => BodyRead::Failed,
    }
}

/// `Origin` absent, or exactly `SCHEME://{127.0.0.1|localhost|[::1]}:PORT` (the scheme it is
/// served with); one header only.
pub(super) fn origin_ok(headers: &HeaderMap, local: Local) -> bool {
    let mut values = headers.get_all(hyper::header::ORIGIN).iter();
    let Some(first) = values.next() else {
        return true;
    };
    if values.next().is_some() {
        return false;
    }
    let Ok(origin) = first.to_str() else {
        return false;
    };
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|h| origin == format!("{}://{h}:{}", local.scheme, local.port))
}

/// Exactly one `Host`, naming a loopback name and this port (DNS-rebinding defence, MCP-HTTP-SEC-03).
pub(super) fn host_ok(headers: &HeaderMap, port: u16) -> bool {
    let mut values = headers.get_all(hyper::header::HOST).iter();
    let (Some(first), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(host) = first.to_str() else {
        return false;
    };
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|h| host.eq_ignore_ascii_case(&format!("{h}:{port}")))
}

/// Exactly one Content-Type whose media type is `application/json` (any case), with no
/// parameter but an optional `charset=utf-8`.
pub(super) fn content_type_ok(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(hyper::header::CONTENT_TYPE).iter();
    let (Some(first), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(ct) = first.to_str() else {
        return false;
    };
    let mut parts = ct.split(';');
    let media = parts.next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return false;
    }
    parts.all(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        let v = v.trim().trim_matches('"');
        k.trim().eq_ignore_ascii_case("charset") && v.eq_ignore_ascii_case("utf-8")
    })
}

/// Whether the `Accept` headers admit `wanted` (see [`admits`]).
pub(super) fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let values: Vec<&str> = headers
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    admits(&values.join(","), wanted)
}

/// A weight as RFC 9110 section 12.4.2 writes it: `0` or `1`, with at most three decimals
/// (`1` only with zeros).
fn weight_of(v: &str) -> Option<f32> {
    let mut halves = v.splitn(2, '.');
    let int = halves.next()?;
    let dec = halves.next().unwrap_or("");
    if dec.len() > 3 || dec.chars().any(|c| !c.is_ascii_digit()) {
        return None;
    }
    match int {
        "0" => format!("0.{dec}0").parse().ok(),
        "1" if dec.chars().all(|c| c == '0') => Some(1.0),
        _ => None,
    }
}

/// Whether an `Accept` value admits the media type `wanted` (lower case): of the ranges that
/// match it, the most specific (exact, then `type/*`, then `*/*`) decides, the heaviest among
/// equals, by its weight `q` (default 1; 0, a weight that is not one, or two weights refuse).
/// Names compare without case (RFC 9110 section 12.5.1).
/// Tested against the table the gate and the oracle share (`accept-headers.json`).
fn admits(accept: &str, wanted: &str) -> bool {
    let family = format!("{}/*", wanted.split('/').next().unwrap_or(""));
    let mut decisive: Option<(u8, f32)> = None;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let range = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let rank = match range.as_str() {
            r if r == wanted => 3,
            r if r == family => 2,
            "*/*" => 1,
            _ => continue,
        };
        let given: Vec<&str> = parts
            .filter_map(|p| p.split_once('='))
            .filter(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map(|(_, v)| v.trim())
            .collect();
        let weight = match given.as_slice() {
            [] => 1.0,
            [one] => weight_of(one).unwrap_or(0.0),
            // A weight given twice is no weight.
            _ => 0.0,
        };
        if decisive.is_none_or(|(r, w)| rank > r || (rank == r && weight > w)) {
            decisive = Some((rank, weight));
        }
    }
    decisive.is_some_and(|(_, w)| w > 0.0)
}

pub(super) fn header_list(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// The witness reads `Accept` as the shared table says (the gate and the oracle are held to
    /// the same table).
    #[test]
    fn accept_headers_follow_the_shared_table() {
        for (accept, json, sse) in crate::testing::accept_rows() {
            assert_eq!(
                super::admits(&accept, "application/json"),
                json,
                "{accept:?}"
            );
            assert_eq!(
                super::admits(&accept, "text/event-stream"),
                sse,
                "{accept:?}"
            );
        }
    }
}
