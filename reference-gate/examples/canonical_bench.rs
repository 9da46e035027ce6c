//! Canonicalization throughput against plain serde_json typed parsing of the same bytes, side by
//! side in one run (DESIGN.md section 9: the bar is a ratio of at least 0.5).
//!
//!     cargo run --release -p reference-gate --example canonical_bench [SIZE_BYTES]

use reference_gate::canonical::{self, Limits};
use std::time::Instant;

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Call {
    jsonrpc: String,
    id: i64,
    method: String,
    params: Params,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Params {
    name: String,
    arguments: serde_json::Value,
}

fn message(size: usize) -> Vec<u8> {
    let mut args = String::new();
    let mut i = 0;
    while args.len() + 120 < size {
        args.push_str(&format!(
            r#""field_{i}":{{"text":"value number {i} with some words","n":{i},"ok":true}},"#
        ));
        i += 1;
    }
    args.push_str(r#""last":[1,2.5,-3e2,null]"#);
    format!(r#"{{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{{"name":"echo","arguments":{{{args}}}}}}}"#).into_bytes()
}

fn main() {
    let size: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let msg = message(size);
    let limits = Limits {
        max_bytes: 64 << 20,
        max_members: 1 << 20,
        max_string: 64 << 20,
        ..Limits::default()
    };
    let iters = (200_000_000 / msg.len().max(1)).clamp(20, 200_000);
    let mut best = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..iters {
            let c = canonical::parse(std::hint::black_box(&msg), &limits).expect("valid");
            std::hint::black_box(c.forwarding_bytes().len());
        }
        let canon = t.elapsed().as_secs_f64() / iters as f64;
        let t = Instant::now();
        for _ in 0..iters {
            let c: Call = serde_json::from_slice(std::hint::black_box(&msg)).expect("valid");
            std::hint::black_box(c.params.name.len());
        }
        let serde = t.elapsed().as_secs_f64() / iters as f64;
        best = (best.0.min(canon), best.1.min(serde));
    }
    println!(
        "message {} bytes, {iters} iterations x5 (best): canonical parse+serialize {:.2} us, serde_json typed {:.2} us, throughput ratio {:.2}",
        msg.len(),
        best.0 * 1e6,
        best.1 * 1e6,
        best.1 / best.0
    );
}
