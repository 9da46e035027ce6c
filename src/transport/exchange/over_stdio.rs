//! A case over stdio: a fresh process, the case's bytes, a barrier that attributes the answers,
//! the settle window for servers that answer out of order.

use super::stdio_request::{line_body, read_until_answer};
use super::*;

/// A stdio endpoint, borrowed for one case.
pub(super) struct StdioTarget<'a> {
    pub(super) command: &'a str,
    pub(super) log_dir: Option<&'a std::path::Path>,
    pub(super) pacing: &'a Pacing,
}

/// One case over a fresh process: (per-case witness log), handshake when the case wants a
/// session, the case's bytes, then either its input closed and the process drained to its exit,
/// or a barrier request whose answer attributes every line before it to the case (with a
/// settle window when the barrier was answered first); the lines become the Observation.
pub(super) async fn run_stdio(
    t: &Facts<'_>,
    target: &StdioTarget<'_>,
    witness: Option<&WitnessView>,
    check_alive: bool,
) -> Observation {
    let (case, settings) = (t.case, t.settings);
    let mut obs = Observation::new(crate::case::TransportKind::Stdio);
    let spec = &case.spec;
    let deadline = settings.case_ends(case);
    let (mut proc, own_log) = match start_process(case, target, deadline) {
        Ok(started) => started,
        Err(e) => {
            obs.answer.ending = Ending::Unreachable(chain(&e));
            return obs;
        }
    };
    let witness = own_log.as_ref().or(witness);
    let mut ph = t.client.clone();
    let mut lines: Vec<Line> = Vec::new();
    let modern = t.modern;
    if spec.session == SessionMode::Initialized && modern.is_none() {
        let version = t.handshake.version;
        if let Err(why) = handshake(&mut proc, version, deadline, &mut lines, &mut ph).await {
            obs.sent.setup_error = Some(why);
            obs.after.stderr_tail = proc.stderr_tail();
            proc.kill().await;
            return obs;
        }
    }
    obs.sent.learned = ph.values_of(LEARNED);
    let mark = witness.map(WitnessView::mark);
    // Memory is watched only for cases that bound it.
    let memory = proc
        .pid()
        .filter(|_| case.bounds_memory())
        .map(crate::transport::stdio::MemoryWatch::start);
    let req = &spec.request;
    let mut body = case_body(&ph, req.body.as_ref(), modern, settings, case.spec.caller);
    note_request(&mut obs.sent, &body, settings);
    if !req.raw_line {
        body.push(bytes::Bytes::from_static(b"\n"));
    }
    let body_len = body.len();
    proc.send(body).await;
    if req.close_input {
        drain_to_exit(&mut proc, deadline, &mut lines, &mut obs).await;
    } else {
        let answered = barrier(
            &mut proc,
            settings,
            deadline,
            check_alive,
            &mut lines,
            &mut obs,
        )
        .await;
        let case_answered = lines.iter().any(is_answer);
        // A body the runner cannot read itself (invalid UTF-8, extensions) still expects an
        // answer: a lenient server may repair it and run it asynchronously, answering after the
        // barrier, and that late answer is exactly the failure to catch.
        if answered && obs.sent.expects_response && !case_answered {
            settle(&mut proc, target, settings, body_len, deadline, &mut lines).await;
        }
        if let Some(status) = proc.exit_status() {
            obs.after.exited = Some(status.to_string());
        }
    }
    read_lines(&mut obs, &lines);
    if let (Some(w), Some(mark)) = (witness, mark) {
        obs.after.witness = Some(case_record(w, mark));
    }
    obs.after.memory_growth_kib = memory.as_ref().and_then(|m| m.growth_kib(proc.pid()));
    if obs.after.alive == Some(true) && spec.alive_probe == crate::case::AliveProbe::Downstream {
        // After the witness record is read: the probe's call is not the case's.
        probe_downstream(&mut proc, settings, &mut obs).await;
    }
    obs.after.stderr_tail = proc.stderr_tail();
    proc.kill().await;
    obs
}

/// A fresh process of `target` for `case`, its writes bounded by `deadline`, and the reader of
/// its own witness log when its command asks for one.
pub(super) fn start_process(
    case: &Case,
    target: &StdioTarget<'_>,
    deadline: Instant,
) -> Result<(StdioProcess, Option<WitnessView>), TransportError> {
    let (command, own_log) = case_command(case, target);
    let mut proc = StdioCommand::parse(&command).and_then(|cmd| StdioProcess::spawn(&cmd))?;
    proc.bound_writes(deadline);
    Ok((proc, own_log))
}

/// The target's command for `case`, with a witness log of its own when the command asks for one
/// (`{witness_log}`), and that log's reader. The log's name is unique in the process: lanes
/// share a folder, and one case runs at once on several lanes (personalities, versions), each
/// run truncating the log it opens.
fn case_command(case: &Case, target: &StdioTarget<'_>) -> (String, Option<WitnessView>) {
    match target.log_dir {
        Some(dir) if target.command.contains("{witness_log}") => {
            let path = case_log(dir, &case.id);
            let _ = std::fs::remove_file(&path);
            let quoted = shell_words::quote(&path.to_string_lossy()).into_owned();
            let command = target.command.replace("{witness_log}", &quoted);
            (command, Some(WitnessView::Log(LogReader::new(path))))
        }
        _ => (target.command.to_string(), None),
    }
}

/// A fresh log path in `dir` for one run of case `id`.
fn case_log(dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("{}.{run}.jsonl", id.replace('/', "__")))
}

/// The legacy handshake: `initialize` (the lines before its answer, logs or banners, are judged
/// with the case's output) and `notifications/initialized`; the agreed version goes into the
/// placeholders. Why it failed, when it did.
pub(super) async fn handshake(
    proc: &mut StdioProcess,
    version: Version,
    deadline: Instant,
    lines: &mut Vec<Line>,
    ph: &mut Placeholders,
) -> Result<(), String> {
    let init = json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
        "params": {"protocolVersion": version,
                   "capabilities": {},
                   "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}});
    proc.send(line_body(&init)).await;
    let (answer, before, err) = read_until_answer(proc, INIT_ID, deadline).await;
    lines.extend(before);
    match answer.as_ref().and_then(|a| a.get("result")) {
        Some(result) => {
            if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                ph.set("protocol_version", v);
            }
        }
        None => {
            return Err(match err {
                Some(e) => format!("initialize: {}", chain(&e)),
                None => format!(
                    "initialize was not answered with a result: {}",
                    answer.map_or("no answer".into(), |a| a.to_string())
                ),
            })
        }
    }
    proc.send(line_body(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ))
    .await;
    Ok(())
}

/// A case that closes the server's input: every line until EOF, then the process must exit.
async fn drain_to_exit(
    proc: &mut StdioProcess,
    deadline: Instant,
    lines: &mut Vec<Line>,
    obs: &mut Observation,
) {
    proc.close_input().await;
    obs.sent.input_closed = true;
    loop {
        match proc.read_line(deadline).await {
            Ok(Line::Eof) => break,
            Ok(l) => lines.push(l),
            Err(e) => {
                if lines.is_empty() && e.is_timeout() {
                    obs.answer.ending = Ending::TimedOut;
                }
                break;
            }
        }
    }
    match proc.wait_exit(deadline).await {
        Some(status) => obs.after.exited = Some(status.to_string()),
        None => {
            obs.after.alive_detail = Some("the process did not exit after its input closed".into())
        }
    }
}

/// The barrier: a request of the runner's own after the case's bytes. Every line before its
/// answer is the case's, and its answer is the alive probe. Whether it was answered.
async fn barrier(
    proc: &mut StdioProcess,
    settings: &Speaking,
    deadline: Instant,
    check_alive: bool,
    lines: &mut Vec<Line>,
    obs: &mut Observation,
) -> bool {
    proc.send(line_body(&own_request(
        settings,
        BARRIER_ID,
        liveness_method(settings),
    )))
    .await;
    let (answer, before, err) = read_until_answer(proc, BARRIER_ID, deadline).await;
    lines.extend(before);
    match (&answer, err) {
        (Some(a), _) => {
            // A legacy `ping` must succeed; a modern barrier (`server/discover`) may be
            // refused by a dual-era server whose process the case opened in the legacy era,
            // and an answer with the barrier's id still shows the transport alive.
            let ok = a.get("result").is_some() || settings.version.is_modern();
            obs.after.alive = check_alive.then_some(ok);
            if !ok {
                obs.after.alive_detail =
                    Some(format!("the ping after the case was answered with {a}"));
            }
        }
        (None, Some(e)) if e.is_timeout() => {
            if lines.is_empty() {
                obs.answer.ending = Ending::TimedOut;
            }
            obs.after.alive = check_alive.then_some(false);
            obs.after.alive_detail =
                Some("the ping after the case was not answered before the deadline".into());
        }
        (None, _) => {
            if lines.is_empty() {
                obs.answer.ending = Ending::Closed;
            }
            obs.after.alive = check_alive.then_some(false);
            obs.after.alive_detail = Some(
                "the process closed its output before answering the ping after the case".into(),
            );
        }
    }
    answer.is_some()
}

/// The downstream part of the alive probe (`"alive_probe": "downstream"`), after the barrier's
/// ping: a call of the allowed tool on the same process, which must come back with a result
/// within the probe deadline.
async fn probe_downstream(proc: &mut StdioProcess, settings: &Speaking, obs: &mut Observation) {
    let deadline = Instant::now() + settings.probe_timeout;
    proc.send(line_body(&probe_call(settings))).await;
    let why = match read_until_answer(proc, PROBE_CALL_ID, deadline).await {
        (Some(a), _, _) => match probe_call_answered(&a) {
            Ok(()) => return,
            Err(why) => why,
        },
        (None, _, Some(e)) if e.is_timeout() => {
            "a call of the allowed tool after the case was not answered before the deadline".into()
        }
        (None, _, _) => {
            "the process closed its output before answering a call of the allowed tool after the case"
                .into()
        }
    };
    obs.after.alive = Some(false);
    obs.after.alive_detail = Some(why);
}

/// Whether a line is a JSON-RPC answer (a result or an error).
fn is_answer(line: &Line) -> bool {
    matches!(line, Line::Text(t) if crate::reading::answer_json(t)
        .is_some_and(|v| v.get("result").is_some() || v.get("error").is_some()))
}

/// The barrier was answered before the case: give the case's own answer a bounded moment, as
/// long as this target's order of answers calls for (`pacing`), and teach the pacing how late
/// it came.
async fn settle(
    proc: &mut StdioProcess,
    target: &StdioTarget<'_>,
    settings: &Speaking,
    body_len: u64,
    deadline: Instant,
    lines: &mut Vec<Line>,
) {
    let probed = target
        .pacing
        .probed(order_probe(target.command, settings))
        .await;
    let window = target.pacing.window(probed, body_len, settings.settle);
    let settle_from = Instant::now();
    let settle = (Instant::now() + window).min(deadline);
    let mut late = None;
    while let Ok(line) = proc.read_line(settle).await {
        if line == Line::Eof {
            break;
        }
        let answer = is_answer(&line);
        lines.push(line);
        if answer {
            late = Some(settle_from.elapsed());
            break;
        }
    }
    // Only small cases teach the run how late answers come: a large one's lag is its size's
    // (its own window has the per-MiB allowance), not the server's.
    if let (Some(lag), true) = (late, body_len < 1 << 20) {
        target.pacing.saw_late(lag);
    }
}

/// What the lines say: messages, garbage (a line that is not a JSON-RPC message, or one cut at
/// the line cap), the first bytes, and the text the oracles scan.
pub(super) fn read_lines(obs: &mut Observation, lines: &[Line]) {
    let mut scan = String::new();
    for line in lines {
        let (bytes, whole) = match line {
            Line::Text(t) => (t, true),
            Line::TooLong(t) => (t, false),
            Line::Eof => continue,
        };
        if scan.len() < SCAN_KEEP {
            scan.push_str(&String::from_utf8_lossy(
                &bytes[..bytes.len().min(SCAN_KEEP)],
            ));
            scan.push('\n');
        }
        if obs.answer.prefix.is_empty() {
            obs.answer.prefix = bytes.iter().copied().take(PREFIX_KEEP).collect();
        }
        match crate::reading::answer_json(bytes) {
            Some(v) if whole => obs.answer.messages.push(v),
            _ => obs
                .answer
                .garbage
                .push(bytes.iter().copied().take(PREFIX_KEEP).collect()),
        }
    }
    obs.answer.scan_text = scan;
}

#[cfg(test)]
mod tests {
    use super::case_log;

    #[test]
    fn each_run_of_a_case_logs_to_its_own_file() {
        // Lanes share the folder and run one case at once; a shared log loses events.
        let dir = std::path::Path::new("/tmp/logs");
        let (a, b) = (case_log(dir, "smuggling/x"), case_log(dir, "smuggling/x"));
        assert_ne!(a, b);
        assert!(a.starts_with(dir) && b.starts_with(dir));
        assert_eq!(a.extension().and_then(|e| e.to_str()), Some("jsonl"));
    }
}
