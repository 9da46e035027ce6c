//! The reference gate's bounds, as a separate process so its memory can be read: a 1 GiB body
//! (declared and chunked) and a 10 MiB stdio line are refused with peak RSS under 32 MiB; slow
//! headers and bodies are cut off by its read deadline; 1,000 idle connections do not starve a
//! new one; a downstream that dies is answered with the downstream error code, and the gate
//! recovers when it returns, with no answer crossed.

use crate::util::{bin, HttpWitness};
use mcp_gauntlet::target::WITNESS_POLICY;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A reference gate process.
struct Gate {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(edit: impl FnOnce(&mut serde_json::Value)) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg: serde_json::Value = serde_json::from_str(WITNESS_POLICY).unwrap();
    edit(&mut cfg);
    let path = dir.path().join("gate.json");
    std::fs::write(&path, cfg.to_string()).unwrap();
    (dir, path)
}

fn start_gate(downstream: &str, edit: impl FnOnce(&mut serde_json::Value)) -> Gate {
    let (dir, path) = config(edit);
    let mut child = Command::new(bin())
        .args(["reference-gate", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0", "--downstream", downstream])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first.trim().strip_prefix("listening http://").unwrap();
    let addr = url.trim_end_matches("/mcp").parse().unwrap();
    Gate {
        child,
        addr,
        _dir: dir,
    }
}

/// Peak resident memory of a process, in KiB (Linux `VmHWM`).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(15))).unwrap();
    s
}

fn status_of(s: &mut TcpStream) -> u16 {
    let mut head = [0u8; 12];
    match s.read_exact(&mut head) {
        Ok(()) => std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        Err(_) => 0,
    }
}

/// A POST's head up to the framing headers.
fn head(addr: SocketAddr) -> String {
    format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n")
}

#[test]
fn a_1_gib_body_is_refused_with_bounded_memory() {
    let witness = HttpWitness::start(&[], None);
    let gate = start_gate(&witness.url, |_| {});
    let chunk = vec![b' '; 64 * 1024];
    // Declared: 413 from the length alone; whatever is sent after is not kept.
    let mut s = connect(gate.addr);
    write!(s, "{}Content-Length: 1073741824\r\n\r\n", head(gate.addr)).unwrap();
    for _ in 0..128 {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    assert_eq!(status_of(&mut s), 413);
    // Chunked: refused once the bound is passed while reading, long before 1 GiB.
    let mut s = connect(gate.addr);
    write!(s, "{}Transfer-Encoding: chunked\r\n\r\n", head(gate.addr)).unwrap();
    let mut sent = 0usize;
    while sent < 1 << 30 {
        let ok = write!(s, "{:x}\r\n", chunk.len()).is_ok()
            && s.write_all(&chunk).is_ok()
            && s.write_all(b"\r\n").is_ok();
        if !ok {
            break;
        }
        sent += chunk.len();
    }
    assert_eq!(status_of(&mut s), 413);
    assert!(sent < 1 << 30, "the gate read a whole 1 GiB body");
    if let Some(kib) = peak_rss_kib(gate.child.id()) {
        eprintln!("gate peak RSS after a 1 GiB body (declared, then chunked; {sent} bytes sent): {kib} KiB");
        assert!(kib < 32 * 1024, "peak RSS {kib} KiB");
    }
}

#[test]
fn a_10_mib_stdio_line_is_refused_with_bounded_memory() {
    let (_dir, path) = config(|_| {});
    let downstream = format!("{} witness --stdio", bin().display());
    let mut child = Command::new(bin())
        .args(["reference-gate", "--stdio", "--config"])
        .arg(&path)
        .args(["--downstream-cmd", &downstream])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let _ = writeln!(stdin, "{init}");
        let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"");
        let junk = vec![b'a'; 1024 * 1024];
        for _ in 0..10 {
            let _ = stdin.write_all(&junk);
        }
        let _ = stdin.write_all(b"\"}}}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n");
        stdin
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = Vec::new();
    // Bounded: the gate answers three lines (or closes); the test's own timeout is the harness's.
    for _ in 0..3 {
        match lines.next() {
            Some(Ok(l)) => answers.push(l),
            _ => break,
        }
    }
    let kib = peak_rss_kib(pid);
    drop(writer.join());
    let _ = child.kill();
    let _ = child.wait();
    let v: Vec<serde_json::Value> = answers
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 3, "{answers:?}");
    assert_eq!(v[1]["id"], serde_json::Value::Null, "{answers:?}");
    assert!(v[1]["error"]["code"].is_i64(), "{answers:?}");
    assert_eq!(v[2]["id"], 3);
    if let Some(kib) = kib {
        eprintln!("stdio gate peak RSS after a 10 MiB line: {kib} KiB");
        assert!(kib < 32 * 1024, "peak RSS {kib} KiB");
    }
}

#[test]
fn slow_headers_and_slow_bodies_are_cut_off() {
    let witness = HttpWitness::start(&[], None);
    let gate = start_gate(&witness.url, |c| {
        c["deadlines"]["client_read_ms"] = 300.into()
    });
    // Headers that never end: the connection is closed (a read of 0 bytes or an error status),
    // not held open; the read timeout is far above the gate's 300 ms deadline.
    let mut s = connect(gate.addr);
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut rest = Vec::new();
    let read = s.read_to_end(&mut rest);
    assert!(read.is_ok(), "the gate held a slow header open: {read:?}");
    // A body that stops: answered with an error, or closed.
    let mut s = connect(gate.addr);
    write!(
        s,
        "{}Content-Length: 100\r\n\r\n{{\"jsonrpc\"",
        head(gate.addr)
    )
    .unwrap();
    let mut rest = Vec::new();
    let read = s.read_to_end(&mut rest);
    assert!(read.is_ok(), "the gate held a slow body open: {read:?}");
    let text = String::from_utf8_lossy(&rest);
    assert!(rest.is_empty() || text.starts_with("HTTP/1.1 4"), "{text}");
}

fn initialize(addr: SocketAddr) -> (u16, String) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    post(addr, "", body)
}

fn post(addr: SocketAddr, extra: &str, body: &str) -> (u16, String) {
    let mut s = connect(addr);
    write!(
        s,
        "{}Connection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        head(addr),
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    (
        out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0),
        out,
    )
}

#[test]
fn a_thousand_idle_connections_do_not_starve_a_new_one() {
    let witness = HttpWitness::start(&[], None);
    let gate = start_gate(&witness.url, |_| {});
    let idle: Vec<TcpStream> = (0..1000).map(|_| connect(gate.addr)).collect();
    let (status, out) = initialize(gate.addr);
    assert_eq!(status, 200, "{out}");
    drop(idle);
}

fn call(addr: SocketAddr, session: &str, id: u64, text: &str) -> serde_json::Value {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#
    );
    let (_, out) = post(
        addr,
        &format!("Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"),
        &body,
    );
    let json = out.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(json).unwrap_or_default()
}

#[test]
fn a_dead_downstream_is_answered_with_the_downstream_code_and_the_gate_recovers() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let witness = HttpWitness::start_at(&listen, &[]);
    let gate = start_gate(&witness.url, |c| {
        c["deadlines"]["connect_ms"] = 500.into();
        c["deadlines"]["request_ms"] = 1000.into();
    });
    let (_, out) = initialize(gate.addr);
    let session = out
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .unwrap()
        .trim()
        .to_string();
    let code = |v: &serde_json::Value| v["error"]["code"].as_i64();
    let ok = |v: &serde_json::Value, id: u64, text: &str| {
        v["id"] == id && v["result"]["content"][0]["text"] == text
    };
    let first = call(gate.addr, &session, 1, "before");
    assert!(ok(&first, 1, "before"), "{first}");
    // The downstream dies: the gate answers -32002 for this request, with its id.
    drop(witness);
    let down = call(gate.addr, &session, 2, "while-down");
    assert_eq!(
        (down["id"].as_u64(), code(&down)),
        (Some(2), Some(-32002)),
        "{down}"
    );
    // It comes back (a new process, a new downstream session): the gate recovers.
    let _witness = HttpWitness::start_at(&listen, &[]);
    let back = call(gate.addr, &session, 3, "after");
    assert!(ok(&back, 3, "after"), "{back}");
    let again = call(gate.addr, &session, 4, "again");
    assert!(ok(&again, 4, "again"), "{again}");
}

#[test]
fn under_load_a_downstream_restart_never_crosses_or_loses_an_answer() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let witness = HttpWitness::start_at(&listen, &[]);
    let gate = start_gate(&witness.url, |c| {
        c["deadlines"]["connect_ms"] = 500.into();
        c["deadlines"]["request_ms"] = 1000.into();
    });
    let url = format!("http://{}/mcp", gate.addr);
    let load = Command::new(bin())
        .args(["load", "--http", &url, "--concurrency", "8", "--time", "3"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The downstream dies and comes back while the clients keep calling.
    std::thread::sleep(Duration::from_millis(1000));
    drop(witness);
    std::thread::sleep(Duration::from_millis(300));
    let _witness = HttpWitness::start_at(&listen, &[]);
    let out = load.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let n = |word: &str| -> u64 {
        let before = stdout.split(&format!(" {word}")).next().unwrap();
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    eprintln!("{stdout}");
    // Refusals with the request's own id (-32002) are expected while it is down; an answer
    // with another id or another request's text, or no answer at all, never.
    assert_eq!((n("wrong,"), n("lost")), (0, 0), "{stdout}");
    assert!(n("ok,") > 0, "{stdout}");
}

#[test]
fn a_downstream_that_never_accepts_is_answered_within_the_deadline() {
    // Bound and listening, never accepting: connects complete in the kernel, nothing answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let gate = start_gate(&url, |c| {
        c["deadlines"]["connect_ms"] = 300.into();
        c["deadlines"]["request_ms"] = 500.into();
    });
    // initialize opens the client's own downstream session, so it needs the downstream too:
    // the downstream-failure answer with its id, within the deadline, and no session.
    let (status, out) = initialize(gate.addr);
    assert_eq!(status, 200, "{out}");
    assert!(
        !out.to_ascii_lowercase().contains("mcp-session-id"),
        "{out}"
    );
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("");
    let answer: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    drop(silent);
}
