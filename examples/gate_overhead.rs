//! Gate overhead on loopback: the same echo calls sent straight to a witness and through the
//! reference gate in front of another witness, in one run, 1 and 64 concurrent clients.
//! Reports throughput and latency percentiles, and the ratio (DESIGN.md section 9).
//!
//!     cargo run --release --example gate_overhead [REQUESTS_PER_CLIENT]
//!
//! Each request is its own TCP connection (the suite's client works that way), the same for both
//! paths, so the difference is the gate's work plus its own downstream connection.

use mcp_gauntlet::lanes::WITNESS_POLICY;
use mcp_gauntlet::transport::http::{exchange, Caps, HttpUrl, Wire};
use mcp_gauntlet::witness::{self, Recorder, Witness, WitnessConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn post(url: &HttpUrl, session: Option<&str>, body: String) -> Option<Vec<u8>> {
    let mut headers = vec![
        ("host".to_string(), url.authority()),
        ("content-type".into(), "application/json".into()),
        (
            "accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("connection".into(), "close".into()),
        ("content-length".into(), body.len().to_string()),
    ];
    if let Some(s) = session {
        headers.push(("mcp-session-id".into(), s.into()));
    }
    let wire = Wire::Request {
        method: "POST".into(),
        path: url.path.clone(),
        headers,
        body: mcp_gauntlet::case::Body::from_bytes(body.into_bytes()),
        chunked: false,
    };
    let resp = exchange(
        url,
        wire,
        Caps::default(),
        tokio::time::Instant::now() + Duration::from_secs(10),
        false,
    )
    .await
    .ok()?;
    let sid = resp.header("mcp-session-id").map(str::to_string);
    Some(sid.map(String::into_bytes).unwrap_or(resp.body))
}

async fn session(url: &HttpUrl) -> String {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    let sid = String::from_utf8(post(url, None, init.into()).await.unwrap()).unwrap();
    post(
        url,
        Some(&sid),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
    )
    .await;
    sid
}

/// `clients` concurrent clients × `n` calls each; returns (calls/s, p50 µs, p99 µs, wrong answers).
async fn load(url: &HttpUrl, clients: usize, n: usize) -> (f64, f64, f64, usize) {
    let sid = Arc::new(session(url).await);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (url, sid) = (url.clone(), sid.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n);
            let mut wrong = 0;
            for i in 0..n {
                let id = c * 1_000_000 + i;
                let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"c{c}-{i}"}}}}}}"#);
                let t = Instant::now();
                let answer = post(&url, Some(&sid), body).await.unwrap_or_default();
                lat.push(t.elapsed());
                let v: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
                if v["id"] != id || v["result"]["content"][0]["text"] != format!("c{c}-{i}") {
                    wrong += 1;
                }
            }
            (lat, wrong)
        }));
    }
    let mut all = Vec::new();
    let mut wrong = 0;
    for t in tasks {
        let (l, w) = t.await.unwrap();
        all.extend(l);
        wrong += w;
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort();
    let pct =
        |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)].as_secs_f64() * 1e6;
    ((clients * n) as f64 / secs, pct(0.5), pct(0.99), wrong)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let w1 = Arc::new(Witness::new(WitnessConfig::default(), Recorder::default()));
        let (direct, _a) = witness::http::spawn("127.0.0.1:0".parse().unwrap(), w1).await.unwrap();
        let w2 = Arc::new(Witness::new(WitnessConfig::default(), Recorder::default()));
        let (behind, _b) = witness::http::spawn("127.0.0.1:0".parse().unwrap(), w2).await.unwrap();
        let mut cfg: reference_gate::config::GateConfig = serde_json::from_str(WITNESS_POLICY).unwrap();
        cfg.servers.insert(cfg.server.clone(), reference_gate::config::Server::Url(format!("http://{behind}/mcp")));
        let proxy = reference_gate::cli::build_proxy(&cfg).unwrap();
        let front = reference_gate::front::http::HttpFront::new(proxy, reference_gate::cli::http_settings(&cfg));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gate = listener.local_addr().unwrap();
        tokio::spawn(reference_gate::front::http::serve(listener, front));
        let direct = HttpUrl::parse(&format!("http://{direct}/mcp")).unwrap();
        let gate = HttpUrl::parse(&format!("http://{gate}/mcp")).unwrap();
        for clients in [1, 64] {
            let per = if clients == 1 { n } else { (n / 16).max(10) };
            let d = load(&direct, clients, per).await;
            let g = load(&gate, clients, per).await;
            println!(
                "{clients:>2} client(s) x {per}: direct {:.0}/s p50 {:.0} us p99 {:.0} us | gate {:.0}/s p50 {:.0} us p99 {:.0} us | throughput ratio {:.2}, p50 added {:.0} us, wrong answers {} direct / {} gate",
                d.0, d.1, d.2, g.0, g.1, g.2, g.0 / d.0, g.1 - d.1, d.3, g.3
            );
        }
    });
}
