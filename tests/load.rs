//! `mcp-gauntlet load`: the reference gate holds 64 concurrent clients with every answer right,
//! over HTTP and stdio, and the answer checks really count crossed answers (against a server
//! that crosses them).

use crate::util::bin;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// `(sent, ok, wrong, lost)` of the line for `lane` in the summary.
fn counts(out: &str, lane: &str) -> (u64, u64, u64, u64) {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("[{lane}] ")))
        .unwrap_or_else(|| panic!("no line for {lane} in:\n{out}"));
    let n = |word: &str| -> u64 {
        let before = line.split(&format!(" {word}")).next().unwrap();
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    (n("sent,"), n("ok,"), n("wrong,"), n("lost"))
}

#[test]
fn the_gate_holds_64_concurrent_clients_with_every_answer_right() {
    let out = Command::new(bin())
        .args(["load", "--concurrency", "64", "--requests", "1280"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for lane in ["http", "stdio", "gate/http", "gate/stdio"] {
        assert_eq!(counts(&stdout, lane), (1280, 1280, 0, 0), "{lane}");
    }
    for transport in ["http", "stdio"] {
        let line = format!("gate vs direct ({transport}): throughput ratio");
        assert!(stdout.contains(&line), "{stdout}");
    }
}

/// A server that answers each tools/call with the previous call's id and text: crossed answers.
fn crossing_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let last: Arc<Mutex<Option<(serde_json::Value, serde_json::Value)>>> = Arc::default();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let last = last.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let msg: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let answer = match msg["method"].as_str() {
                    Some("initialize") => serde_json::json!({"jsonrpc": "2.0", "id": msg["id"],
                        "result": {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "serverInfo": {"name": "crossing", "version": "0"}}}),
                    Some("tools/call") => {
                        let this = (
                            msg["id"].clone(),
                            msg["params"]["arguments"]["text"].clone(),
                        );
                        let (id, text) = last.lock().unwrap().replace(this.clone()).unwrap_or(this);
                        serde_json::json!({"jsonrpc": "2.0", "id": id,
                            "result": {"content": [{"type": "text", "text": text}]}})
                    }
                    _ => serde_json::Value::Null,
                };
                let mut stream = reader.into_inner();
                let reply = if answer.is_null() {
                    "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .to_string()
                } else {
                    let b = answer.to_string();
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}", b.len())
                };
                let _ = stream.write_all(reply.as_bytes());
            });
        }
    });
    url
}

#[test]
fn crossed_answers_are_counted_and_fail_the_run() {
    let url = crossing_server();
    let out = Command::new(bin())
        .args([
            "load",
            "--http",
            &url,
            "--concurrency",
            "4",
            "--requests",
            "40",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let (sent, ok, wrong, lost) = counts(&stdout, "http");
    assert_eq!((sent, lost), (40, 0), "{stdout}");
    // Only the very first call has no predecessor to be crossed with.
    assert_eq!((ok, wrong), (1, 39), "{stdout}");
}

#[test]
fn a_stdio_target_gets_one_process_per_client() {
    let server = format!("{} witness --stdio", bin().display());
    let out = Command::new(bin())
        .args([
            "load",
            "--stdio",
            &server,
            "--concurrency",
            "3",
            "--requests",
            "30",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(counts(&stdout, "stdio"), (30, 30, 0, 0));
}

#[test]
fn a_server_that_dies_loses_its_answers_and_fails_the_run() {
    // `mute` answers initialize only: every call is lost.
    let server = format!("{} witness --stdio --broken mute", bin().display());
    let out = Command::new(bin())
        .args([
            "load",
            "--stdio",
            &server,
            "--concurrency",
            "2",
            "--requests",
            "4",
        ])
        .args(["--request-timeout", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(counts(&stdout, "stdio"), (4, 0, 0, 4));
}
