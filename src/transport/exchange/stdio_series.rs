//! A series over stdio: one process (the runner's child, so it is always read), the case's
//! request written `count` times, each step's answer read before the next step is written (a
//! notification, which has none, is followed at once by the next, and every 50 the runner waits
//! for a ping's answer, so a sample shows what they left), while the process is sampled. A `baseline` goes first on the same process; `discover` asks the same process. At
//! the end a `ping` of the runner's own makes sure every step was read before the last sample,
//! and is the alive probe. stdio has one client: there is no other connection to ping, and the
//! findings say so. Nothing here decides pass or fail.

use super::over_stdio::{handshake, read_lines, start_process, StdioTarget};
use super::series::{budget_end, fresh_tag, keep_kind_in, steps_forwarded, template_prefix_of};
use super::stdio_request::{line_body, read_until_answer};
use super::*;
use crate::case::{RequestSpec, SeriesSpec};
use crate::transport::procfs;
use crate::transport::{BaselineSeen, SeriesSeen, StepKind};

/// How often the process is sampled (between steps).
const SAMPLE_EVERY: Duration = Duration::from_millis(25);
/// Notifications written before the runner waits for the process to have read them.
const SYNC_EVERY: u32 = 50;

/// Run `case`'s series over a fresh process of `target`.
pub(super) async fn run_stdio_series(
    t: &Facts<'_>,
    series: &SeriesSpec,
    target: &StdioTarget<'_>,
    witness: Option<&WitnessView>,
    check_alive: bool,
) -> Observation {
    let (case, settings) = (t.case, t.settings);
    let mut obs = Observation::new(crate::case::TransportKind::Stdio);
    let end = budget_end(series, settings);
    let (proc, own_log) = match start_process(case, target, end) {
        Ok(started) => started,
        Err(e) => {
            obs.answer.ending = Ending::Unreachable(chain(&e));
            return obs;
        }
    };
    let witness = own_log.as_ref().or(witness);
    let mut one = OneProcess {
        proc,
        t,
        ph: t.client.clone(),
        end,
        synced: 0,
    };
    if let Err(why) = one.prepare(series).await {
        match why {
            Prepared::Failed(e) => obs.sent.setup_error = Some(e),
            Prepared::Inapplicable(e) => obs.sent.inapplicable = Some(e),
        }
        obs.after.stderr_tail = one.proc.stderr_tail();
        one.proc.kill().await;
        return obs;
    }
    let baseline = match &series.baseline {
        Some(plain) => {
            let seen = one.baseline(plain, series.count).await;
            // The case's own steps get their own budget.
            one.end = budget_end(series, settings);
            Some(seen)
        }
        None => None,
    };
    let mark = witness.map(WitnessView::mark);
    one.synced = 0;
    let (mut seen, kinds) = one.steps(&case.spec.request, series.count).await;
    seen.baseline = baseline;
    let alive = one.sync().await;
    seen.after = one.proc.pid().and_then(procfs::sample);
    let mut obs = kinds.first().map_or_else(
        || {
            let mut o = Observation::new(crate::case::TransportKind::Stdio);
            o.sent.setup_error = Some("the series sent no step before its budget ran out".into());
            o
        },
        |k| (*k.observation).clone(),
    );
    seen.kinds = kinds;
    if check_alive && obs.sent.setup_error.is_none() {
        obs.after.alive = Some(alive.is_ok());
        obs.after.alive_detail = alive.err();
    }
    // Behind a gate: what reached the witness during the steps, less the runner's own pings
    // (by their id, or by their count where the gate gives ids of its own).
    obs.after.witness = witness.zip(mark).map(|(w, m)| {
        let method = obs.sent.method.as_deref();
        steps_forwarded(w.since(m), method, settings, one.synced)
    });
    obs.after.stderr_tail = one.proc.stderr_tail();
    one.proc.kill().await;
    obs.answer.series = Some(Box::new(seen));
    obs
}

/// Why a series could not begin.
enum Prepared {
    Failed(String),
    Inapplicable(String),
}

/// The one process a stdio series speaks to, and what every step is written with.
struct OneProcess<'a> {
    proc: StdioProcess,
    /// The trial's facts: its case, settings, era and handshake version.
    t: &'a Facts<'a>,
    /// The placeholders every step starts from (the handshake's version, what `discover`
    /// learned).
    ph: Placeholders,
    end: Instant,
    /// The runner's own pings sent (what is not the steps' behind a gate).
    synced: usize,
}

impl OneProcess<'_> {
    /// The handshake (legacy lanes, `session: initialized`) and what `discover` learns.
    async fn prepare(&mut self, series: &SeriesSpec) -> Result<(), Prepared> {
        let (case, settings) = (self.t.case, self.t.settings);
        let deadline = settings.case_ends(case).min(self.end);
        if case.spec.session == SessionMode::Initialized && self.t.modern.is_none() {
            let mut lines = Vec::new();
            let proc = &mut self.proc;
            let version = self.t.handshake.version;
            handshake(proc, version, deadline, &mut lines, &mut self.ph)
                .await
                .map_err(Prepared::Failed)?;
        }
        if series.discover == Some(crate::case::Discover::ResourceTemplate) {
            let list = own_request(settings, "gauntlet-discover", "resources/templates/list");
            self.proc.send(line_body(&list)).await;
            let (answer, _, _) =
                read_until_answer(&mut self.proc, "gauntlet-discover", deadline).await;
            let prefix = answer
                .and_then(|a| template_prefix_of(&[a]))
                .ok_or_else(|| {
                    Prepared::Inapplicable(
                        "not applicable: the server lists no resource templates".into(),
                    )
                })?;
            self.ph.set("template_prefix", prefix);
        }
        Ok(())
    }

    /// `series.baseline`: the plain request's own steps, first, on the same process.
    async fn baseline(&mut self, plain: &RequestSpec, count: u32) -> BaselineSeen {
        let (seen, kinds) = self.steps(plain, count).await;
        BaselineSeen::of(&seen, &kinds)
    }

    /// `request` written `count` times, each step's answer read before the next; the process
    /// sampled between steps. What was seen (`after` read once the steps are all answered),
    /// and the kinds of answer, the earliest step's first.
    async fn steps(&mut self, request: &RequestSpec, count: u32) -> (SeriesSeen, Vec<StepKind>) {
        let pid = self.proc.pid();
        let tag = fresh_tag();
        let started = Instant::now();
        let mut seen = SeriesSeen {
            count,
            watched: pid.is_some(),
            one_client: true,
            before: pid.and_then(procfs::sample),
            ..SeriesSeen::default()
        };
        let mut kinds = Vec::new();
        let mut sampled = Instant::now();
        for step in 0..count {
            if Instant::now() >= self.end {
                seen.cut = true;
                break;
            }
            let obs = self.step(request, step, &tag).await;
            let gone = matches!(obs.answer.ending, Ending::Closed | Ending::Unreachable(_));
            // Notifications are not answered: every so many, the runner waits until the
            // process has read them, so that a sample shows what the steps so far left.
            let synced = !obs.sent.expects_response && (step + 1) % SYNC_EVERY == 0;
            keep_kind_in(&mut kinds, step, obs, false);
            seen.sent += 1;
            if synced && self.sync().await.is_err() {
                break;
            }
            if let (Some(pid), true) = (pid, synced || sampled.elapsed() >= SAMPLE_EVERY) {
                sampled = Instant::now();
                if let Some(s) = procfs::sample(pid) {
                    seen.samples.push((seen.sent, s));
                }
            }
            if gone {
                break;
            }
        }
        // Every step read (notifications have no answer to wait for) before the last reading.
        let _ = self.sync().await;
        seen.after = pid.and_then(procfs::sample);
        seen.elapsed = started.elapsed();
        (seen, kinds)
    }

    /// Step `step`: written, and its answer read (with the lines that came before it).
    async fn step(&mut self, request: &RequestSpec, step: u32, tag: &str) -> Observation {
        let (case, settings) = (self.t.case, self.t.settings);
        let mut ph = self.ph.clone();
        ph.set("step", step.to_string())
            .set("fresh", format!("g{tag}-{step}"));
        let mut obs = Observation::new(crate::case::TransportKind::Stdio);
        obs.sent.learned = ph.values_of(LEARNED);
        let mut body = case_body(
            &ph,
            request.body.as_ref(),
            self.t.modern,
            settings,
            case.spec.caller,
        );
        note_request(&mut obs.sent, &body, settings);
        body.push(bytes::Bytes::from_static(b"\n"));
        self.proc.send(body).await;
        let Some(id) = obs.sent.id.clone().filter(|_| obs.sent.expects_response) else {
            return obs;
        };
        let deadline = (Instant::now() + settings.case_deadline(case)).min(self.end);
        let mut lines = Vec::new();
        loop {
            match self.proc.read_line(deadline).await {
                Ok(Line::Eof) => {
                    obs.answer.ending = Ending::Closed;
                    break;
                }
                Ok(line) => {
                    let answers = answers_step(&line, &id);
                    lines.push(line);
                    if answers {
                        break;
                    }
                }
                Err(e) => {
                    obs.answer.ending = if e.is_timeout() {
                        Ending::TimedOut
                    } else {
                        Ending::Closed
                    };
                    break;
                }
            }
        }
        read_lines(&mut obs, &lines);
        obs
    }

    /// A request of the runner's own, answered: every step before it was read. Why not, when
    /// it was not.
    async fn sync(&mut self) -> Result<(), String> {
        let settings = self.t.settings;
        let deadline = Instant::now() + settings.probe_timeout.max(Duration::from_secs(5));
        let ping = own_request(settings, PROBE_ID, liveness_method(settings));
        self.proc.send(line_body(&ping)).await;
        self.synced += 1;
        match read_until_answer(&mut self.proc, PROBE_ID, deadline).await {
            (Some(a), _, _) if a.get("result").is_some() || settings.version.is_modern() => Ok(()),
            (Some(a), _, _) => Err(format!("the ping after the series was answered with {a}")),
            (None, _, Some(e)) if e.is_timeout() => {
                Err("the ping after the series was not answered before the deadline".into())
            }
            (None, _, _) => Err(
                "the process closed its output before answering the ping after the series".into(),
            ),
        }
    }
}

/// Whether `line` answers the step whose id is `id`: a result or error with that id, or an error
/// with a null id (what a server answers a message it could not read an id from: steps go one
/// at a time, so it is this one's).
fn answers_step(line: &Line, id: &Value) -> bool {
    let Line::Text(text) = line else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<Value>(text) else {
        return false;
    };
    match v.get("id") {
        Some(got) if got == id => v.get("result").is_some() || v.get("error").is_some(),
        Some(Value::Null) | None => v.get("error").is_some() && v.get("method").is_none(),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_answered_by_its_id_or_by_an_error_with_none() {
        let id = json!("step-3");
        let line = |v: Value| Line::Text(v.to_string().into_bytes());
        let answered = |v: Value| answers_step(&line(v), &id);
        assert!(answered(
            json!({"jsonrpc": "2.0", "id": "step-3", "result": {}})
        ));
        assert!(answered(
            json!({"jsonrpc": "2.0", "id": "step-3", "error": {"code": -32602}})
        ));
        assert!(answered(
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700}})
        ));
        assert!(!answered(
            json!({"jsonrpc": "2.0", "id": "step-2", "result": {}})
        ));
        assert!(!answered(
            json!({"jsonrpc": "2.0", "id": null, "result": {}})
        ));
        assert!(!answered(
            json!({"jsonrpc": "2.0", "method": "notifications/message"})
        ));
        assert!(!answers_step(&Line::Text(b"not json".to_vec()), &id));
        assert!(!answers_step(&Line::Eof, &id));
    }
}
