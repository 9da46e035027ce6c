//! A series over HTTP: the case's request sent many times over (`series`), each step with its
//! own `{{step}}` and `{{fresh}}`, on a few connections at once, while the runner samples the
//! target's process (memory, CPU, descriptors) and times a `ping` on a connection of its own.
//! One example answer is kept for each kind of answer that came back (status, error code, how
//! it ended), so the judge reads every kind as it reads one case's answer; the series stops at
//! the first answer in the case's `cap` set. Nothing here decides pass or fail.

use super::http_request::{
    http_handshake, http_messages, post_json, post_own, standard_headers, Sent,
};
use super::over_http::{alive_probe, learned_placeholders, read_response};
use super::*;
use crate::case::{SeriesSpec, StatusPattern};
use crate::transport::procfs::{self, ProcSample, Watch};
use crate::transport::{SeriesSeen, StepKind};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// The longest a whole series may take unless it says (`budget_ms`; the run's own deadline may
/// end it sooner); what it sent by then is judged, and the report says it was cut.
const SERIES_BUDGET: Duration = Duration::from_secs(300);
/// How often the process is sampled and the other connection pings.
const SAMPLE_EVERY: Duration = Duration::from_millis(25);
const PING_EVERY: Duration = Duration::from_millis(100);
/// Kinds of answer kept with an example each (what is past them is counted in the last).
const KINDS_KEPT: usize = 8;
/// Session ids kept for closing after the series.
const SESSIONS_KEPT: usize = 20_000;

/// What the steps share while they run.
pub(super) struct Steps {
    next: AtomicU32,
    pub(super) done: AtomicU32,
    pub(super) stop: AtomicBool,
    capped_at: Mutex<Option<(u32, u16)>>,
    kinds: Mutex<Vec<StepKind>>,
    sessions: Mutex<Vec<String>>,
    /// `close_each`: each step's `DELETE` status, counted.
    deletes: Mutex<std::collections::BTreeMap<u16, u32>>,
}

impl Steps {
    pub(super) fn new() -> Steps {
        Steps {
            next: AtomicU32::new(0),
            done: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            capped_at: Mutex::new(None),
            kinds: Mutex::new(Vec::new()),
            sessions: Mutex::new(Vec::new()),
            deletes: Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// The kinds of answer the steps got, the earliest step's first.
    fn kinds_in_order(&self) -> Vec<StepKind> {
        let mut kinds = std::mem::take(&mut *crate::sync::lock(&self.kinds));
        kinds.sort_by_key(|k| k.step);
        kinds
    }
}

/// Run `case`'s series over `url`, in named steps: `prepare` (the session and what `discover`
/// learns), `drive` (the steps, the sampler and the pinger), `after` (the sessions the steps
/// opened: asked again, closed), then the alive probe.
pub(super) async fn run_series(
    t: &Facts<'_>,
    series: &SeriesSpec,
    url: &HttpUrl,
    (witness, watch): (Option<&WitnessView>, Option<&Watch>),
    check_alive: bool,
) -> Observation {
    let (case, settings) = (t.case, t.settings);
    let mut shared = match prepare(t, series, url).await {
        Ok(shared) => shared,
        Err(obs) => return *obs,
    };
    let pid = watch.and_then(Watch::now);
    let baseline = match &series.baseline {
        Some(plain) => {
            let seen = run_baseline(&shared, plain, pid).await;
            // The case's own steps get their own clock and budget.
            shared.started = Instant::now();
            shared.budget_end = budget_end(series, settings);
            Some(seen)
        }
        None => None,
    };
    let shared = Arc::new(shared);
    // Behind a gate: what reached its downstream while the steps ran (the series runs alone on
    // its lane, so that is the steps', less the runner's own pings).
    let mark = witness.map(WitnessView::mark);
    let (mut seen, steps) = drive(&shared, pid).await;
    seen.baseline = baseline;
    let forwarded = witness.zip(mark).map(|(w, m)| w.since(m));
    seen.watched = watch.is_some();
    let sessions = std::mem::take(&mut *crate::sync::lock(&steps.sessions));
    seen.deletes = std::mem::take(&mut *crate::sync::lock(&steps.deletes));
    after(&mut seen, &sessions, series, url, settings, pid).await;
    let kinds = steps.kinds_in_order();
    let mut obs = match kinds.first() {
        Some(k) => (*k.observation).clone(),
        None => {
            let mut obs = Observation::new(crate::case::TransportKind::Http);
            obs.sent.setup_error = Some("the series sent no step before its budget ran out".into());
            obs
        }
    };
    seen.kinds = kinds;
    let pinged = seen.pings.len() + seen.ping_failures.len() + seen.ping_refusals.len();
    obs.after.witness = forwarded
        .map(|events| steps_forwarded(events, obs.sent.method.as_deref(), settings, pinged));
    if check_alive && obs.sent.setup_error.is_none() {
        alive_probe(&mut obs, case, url, settings).await;
    }
    obs.answer.series = Some(Box::new(seen));
    obs
}

/// The series' session (legacy lanes, `session: initialized`) and what `discover` learns; or
/// the observation that ends the case before any step (a failed handshake, a server without
/// what the case needs).
pub(super) async fn prepare(
    t: &Facts<'_>,
    series: &SeriesSpec,
    url: &HttpUrl,
) -> Result<Shared, Box<Observation>> {
    let (case, settings) = (t.case, t.settings);
    let ended = |set: &dyn Fn(&mut Observation)| {
        let mut obs = Observation::new(crate::case::TransportKind::Http);
        set(&mut obs);
        Box::new(obs)
    };
    let hs = match case.spec.session {
        SessionMode::Initialized if t.modern.is_none() => {
            let by = settings.case_ends(case);
            match http_handshake(url, &t.handshake, by).await {
                Ok(hs) => Some(hs),
                Err(e) => return Err(ended(&|o| o.sent.setup_error = Some(chain(&e)))),
            }
        }
        _ => None,
    };
    if series.close_each {
        if let Some(why) = refuses_delete(url, t).await {
            return Err(ended(&|o| o.sent.inapplicable = Some(why.clone())));
        }
    }
    let mut learned: Vec<(&'static str, String)> = Vec::new();
    if series.discover == Some(crate::case::Discover::ResourceTemplate) {
        match template_prefix(url, settings, hs.as_ref(), settings.case_ends(case)).await {
            Some(prefix) => learned.push(("template_prefix", prefix)),
            None => {
                return Err(ended(&|o| {
                    o.sent.inapplicable =
                        Some("not applicable: the server lists no resource templates".into());
                }))
            }
        }
    }
    Ok(Shared {
        case: case.clone(),
        series: series.clone(),
        url: url.clone(),
        settings: settings.clone(),
        client: t.client.clone(),
        modern: t.modern,
        method: t.method.clone(),
        hs,
        learned,
        tag: fresh_tag(),
        started: Instant::now(),
        budget_end: budget_end(series, settings),
    })
}

/// When a series starting now must end: its own budget, or the run's deadline if sooner.
pub(super) fn budget_end(series: &SeriesSpec, settings: &Speaking) -> Instant {
    let own = Instant::now()
        + series
            .budget_ms
            .map_or(SERIES_BUDGET, Duration::from_millis);
    settings
        .run_deadline
        .map_or(own, |end| own.min(Instant::from_std(end)))
}

/// Send the steps on `series.connections` connections while the process (`pid`) is sampled and
/// another connection pings; what they saw, and the steps' shared record.
async fn drive(shared: &Arc<Shared>, pid: Option<u32>) -> (SeriesSeen, Arc<Steps>) {
    let steps = Arc::new(Steps::new());
    let started = Instant::now();
    let sampler = pid.map(|pid| tokio::spawn(sample_while(pid, steps.clone())));
    let pinger = tokio::spawn(ping_while(
        shared.url.clone(),
        shared.settings.clone(),
        steps.clone(),
    ));
    let before = pid.and_then(procfs::sample);
    let workers: Vec<_> = (0..shared.series.connections)
        .map(|_| tokio::spawn(step_loop(shared.clone(), steps.clone())))
        .collect();
    for w in workers {
        let _ = w.await;
    }
    steps.stop.store(true, Ordering::SeqCst);
    let capped_at = *crate::sync::lock(&steps.capped_at);
    let pings = pinger.await.unwrap_or_default();
    let seen = SeriesSeen {
        count: shared.series.count,
        sent: steps.done.load(Ordering::SeqCst),
        capped_at,
        cut: steps.next.load(Ordering::SeqCst) < shared.series.count
            && capped_at.is_none()
            && Instant::now() >= shared.budget_end,
        samples: match sampler {
            Some(s) => s.await.unwrap_or_default(),
            None => Vec::new(),
        },
        before,
        after: pid.and_then(procfs::sample),
        pings: pings.times,
        ping_failures: pings.failures,
        ping_refusals: pings.refusals,
        elapsed: started.elapsed(),
        ..SeriesSeen::default()
    };
    (seen, steps)
}

/// After the steps: whether the first session a step opened is still served (404: let go),
/// and, when the case says so, every such session closed with `DELETE` and the process read
/// again.
async fn after(
    seen: &mut SeriesSeen,
    sessions: &[String],
    series: &SeriesSpec,
    url: &HttpUrl,
    settings: &Speaking,
    pid: Option<u32>,
) {
    if let Some(first) = sessions.first() {
        seen.first_session_answer =
            Some(session_status(url, settings, first, hyper::Method::POST).await);
    }
    if series.close_sessions {
        for s in sessions {
            let _ = session_status(url, settings, s, hyper::Method::DELETE).await;
        }
        seen.sessions_closed = sessions.len();
        if let Some(pid) = pid {
            // Give the server a moment to let go of what the closed sessions held.
            tokio::time::sleep(Duration::from_millis(300)).await;
            seen.after_close = procfs::sample(pid);
        }
    }
}

/// `series.baseline`: the plain request sent `count` times as a series of its own on the same
/// process, before the case's, for what its CPU is judged against.
async fn run_baseline(
    shared: &Shared,
    plain: &crate::case::RequestSpec,
    pid: Option<u32>,
) -> crate::transport::BaselineSeen {
    let mut case = shared.case.clone();
    case.spec.request = plain.clone();
    let series = SeriesSpec {
        baseline: None,
        cap: None,
        close_each: false,
        close_sessions: false,
        ..shared.series.clone()
    };
    let own = Arc::new(Shared {
        case,
        series,
        url: shared.url.clone(),
        settings: shared.settings.clone(),
        client: shared.client.clone(),
        modern: shared.modern,
        method: plain.http_method(),
        hs: shared.hs.clone(),
        learned: shared.learned.clone(),
        tag: fresh_tag(),
        started: Instant::now(),
        budget_end: budget_end(&shared.series, &shared.settings),
    });
    let (seen, steps) = drive(&own, pid).await;
    crate::transport::BaselineSeen::of(&seen, &steps.kinds_in_order())
}

/// `close_each`: why the case does not apply when the server does not let clients end their
/// sessions (a session opened and closed once, its `DELETE` answered 405, as the protocol
/// allows); `None` when it does, or when that could not be told (the steps will show it).
async fn refuses_delete(url: &HttpUrl, t: &Facts<'_>) -> Option<String> {
    let settings = t.settings;
    let by = settings.case_ends(t.case);
    let hs = http_handshake(url, &t.handshake, by).await.ok()?;
    let session = hs.session?;
    (session_status(url, settings, &session, hyper::Method::DELETE).await == 405).then(|| {
        "not applicable: the server does not let clients end their sessions (DELETE answered 405, which it may)".to_string()
    })
}

/// What reached a gate's downstream during the steps, less the runner's own `pinged` pings
/// (its liveness method, on the pinger's session): by their id where the gate kept it, else,
/// when the steps send that method too, as many of that method as the pinger sent.
pub(super) fn steps_forwarded(
    events: Vec<Event>,
    steps_method: Option<&str>,
    settings: &Speaking,
    pinged: usize,
) -> Vec<Event> {
    let own = liveness_method(settings);
    let is_own = |e: &Event, by_id: bool| match e {
        Event::Message { raw, .. } => serde_json::from_str::<Value>(raw).is_ok_and(|v| {
            v.get("method").and_then(Value::as_str) == Some(own)
                && (!by_id || v.get("id") == Some(&Value::from(PROBE_ID)))
        }),
        Event::Tool { .. } => false,
    };
    if steps_method != Some(own) {
        return events.into_iter().filter(|e| !is_own(e, false)).collect();
    }
    let mut left = pinged;
    let mut drop_own = |events: Vec<Event>, by_id: bool| -> Vec<Event> {
        events
            .into_iter()
            .filter(|e| {
                let ours = left > 0 && is_own(e, by_id);
                left -= usize::from(ours);
                !ours
            })
            .collect()
    };
    let events = drop_own(events, true);
    drop_own(events, false)
}

/// The literal start of the server's first resource template (up to its first variable), one
/// with an exploded variable (`{/path*}`) preferred; `None` when it lists none.
async fn template_prefix(
    url: &HttpUrl,
    settings: &Speaking,
    hs: Option<&Handshake>,
    deadline: Instant,
) -> Option<String> {
    let list = own_request(settings, "gauntlet-discover", "resources/templates/list");
    let resp = post_own(url, settings, hs, &list, deadline).await.ok()?;
    template_prefix_of(&http_messages(&resp).0)
}

/// The literal start of the first resource template a `resources/templates/list` answer among
/// `messages` lists (up to its first variable), one with an exploded variable preferred.
pub(super) fn template_prefix_of(messages: &[Value]) -> Option<String> {
    let templates: Vec<String> = messages
        .iter()
        .filter_map(|m| m.pointer("/result/resourceTemplates")?.as_array().cloned())
        .flatten()
        .filter_map(|t| Some(t.get("uriTemplate")?.as_str()?.to_string()))
        .filter(|t| t.contains('{'))
        .collect();
    let chosen = templates
        .iter()
        .find(|t| t.contains("*}"))
        .or(templates.first())?;
    chosen.split('{').next().map(str::to_string)
}

/// A tag for `{{fresh}}` values (see [`Shared::tag`]).
pub(super) fn fresh_tag() -> String {
    use rand::Rng;
    format!("{:08x}", rand::rng().random::<u32>())
}

/// What every connection of a series sends from (owned: each runs as a task of its own).
pub(super) struct Shared {
    pub(super) case: Case,
    pub(super) series: SeriesSpec,
    pub(super) url: HttpUrl,
    settings: Speaking,
    /// The trial's facts a step reads (see [`Facts`]): the client's placeholders, the modern
    /// version and the method, owned so that every connection's task holds them.
    client: Placeholders,
    modern: Option<Version>,
    method: hyper::Method,
    hs: Option<Handshake>,
    /// What `series.discover` learned, for every step's placeholders.
    learned: Vec<(&'static str, String)>,
    /// Unique to this series, so `{{fresh}}` values differ from every earlier run's.
    tag: String,
    /// When the series began (for `rate`), and when it must end.
    started: Instant,
    pub(super) budget_end: Instant,
}

/// One connection's steps: take the next step number, send it, keep what kind of answer it
/// was, until the count, a cap, or the budget.
async fn step_loop(shared: Arc<Shared>, steps: Arc<Steps>) {
    let cap = shared
        .series
        .cap
        .as_ref()
        .map(|c| c.as_slice())
        .unwrap_or(&[]);
    loop {
        if steps.stop.load(Ordering::SeqCst) || Instant::now() >= shared.budget_end {
            return;
        }
        let step = steps.next.fetch_add(1, Ordering::SeqCst);
        if step >= shared.series.count {
            return;
        }
        if let Some(rate) = shared.series.rate {
            // Step n goes no sooner than n / rate seconds after the first, whichever
            // connection sends it.
            let after = Duration::from_secs_f64(f64::from(step) / f64::from(rate));
            tokio::time::sleep_until((shared.started + after).min(shared.budget_end)).await;
        }
        let (obs, session) = send_step(&shared, step).await;
        if let (true, Some(s)) = (shared.series.close_each, &session) {
            let status =
                session_status(&shared.url, &shared.settings, s, hyper::Method::DELETE).await;
            *crate::sync::lock(&steps.deletes).entry(status).or_default() += 1;
        }
        if let Some(s) = session {
            let mut kept = crate::sync::lock(&steps.sessions);
            if kept.len() < SESSIONS_KEPT {
                kept.push(s);
            }
        }
        steps.done.fetch_add(1, Ordering::SeqCst);
        let status = obs.answer.http.as_ref().map(|h| h.status);
        let capped = status.is_some_and(|s| cap.iter().any(|c: &StatusPattern| c.matches(s)));
        if capped {
            let mut at = crate::sync::lock(&steps.capped_at);
            if at.is_none_or(|(first, _)| step < first) {
                *at = status.map(|s| (step, s));
            }
            steps.stop.store(true, Ordering::SeqCst);
        }
        // A target that no longer takes connections will not take the rest either.
        if matches!(obs.answer.ending, Ending::Unreachable(_)) {
            steps.stop.store(true, Ordering::SeqCst);
        }
        keep_kind(&steps, step, obs, capped);
    }
}

impl Shared {
    /// Step `step`'s request (the case's, with this step's placeholders) as it goes on the
    /// wire; what was sent is noted in `obs`.
    pub(super) fn wire(&self, step: u32, obs: &mut Observation) -> Wire {
        let Shared {
            case,
            url,
            settings,
            client,
            modern,
            method,
            hs,
            learned,
            tag,
            ..
        } = self;
        let hs = hs.as_ref();
        let mut ph = learned_placeholders(url, client, hs, None);
        for (name, value) in learned {
            ph.set(name, value.clone());
        }
        ph.set("step", step.to_string())
            .set("fresh", format!("g{tag}-{step}"));
        obs.sent.learned = ph.values_of(LEARNED);
        let sent = Sent {
            url,
            settings,
            handshake: hs,
            modern: *modern,
            placeholders: &ph,
            method,
            caller: case.spec.caller,
        };
        sent.request(&case.spec.request, obs)
    }
}

/// Step `step` of the series: its request sent; what came back, and the session id its answer
/// opened, if any.
pub(super) async fn send_step(shared: &Shared, step: u32) -> (Observation, Option<String>) {
    send_step_by(shared, step, shared.budget_end).await
}

/// [`send_step`], its deadline no later than `by` (the series' budget, or another).
pub(super) async fn send_step_by(
    shared: &Shared,
    step: u32,
    by: Instant,
) -> (Observation, Option<String>) {
    let mut obs = Observation::new(crate::case::TransportKind::Http);
    let wire = shared.wire(step, &mut obs);
    let (url, settings) = (&shared.url, &shared.settings);
    let deadline = (Instant::now() + settings.case_deadline(&shared.case)).min(by);
    let mut session = None;
    // A GET's answer is a stream that answers nothing and may never end: its head is the answer.
    let read = if shared.method == hyper::Method::GET {
        SseRead::HeadOnly
    } else {
        SseRead::ToFirstResponse
    };
    match http::exchange(url, wire, deadline, read).await {
        Ok(resp) => {
            read_response(&mut obs, &resp);
            // Only a session the server opened by accepting the step: one named on a
            // refusal was never the client's, and its 404 afterwards shows no bound.
            if (200..300).contains(&resp.status) {
                session = resp.header("mcp-session-id").map(str::to_string);
            }
        }
        Err(e) if e.is_timeout() => obs.answer.ending = Ending::TimedOut,
        Err(TransportError::Connect(e)) => obs.answer.ending = Ending::Unreachable(e.to_string()),
        Err(_) => obs.answer.ending = Ending::Closed,
    }
    (obs, session)
}

/// Count `obs` under its kind (status, first error code, ending); the first of a kind is kept
/// as its example.
fn keep_kind(steps: &Steps, step: u32, obs: Observation, capped: bool) {
    keep_kind_in(&mut crate::sync::lock(&steps.kinds), step, obs, capped);
}

/// [`keep_kind`] on a list of kinds of one's own.
pub(super) fn keep_kind_in(kinds: &mut Vec<StepKind>, step: u32, obs: Observation, capped: bool) {
    let key = kind_key(&obs);
    if let Some(k) = kinds.iter_mut().find(|k| k.key == key) {
        k.count += 1;
        if step < k.step {
            k.step = step;
            *k.observation = obs;
        }
        return;
    }
    if kinds.len() >= KINDS_KEPT {
        if let Some(last) = kinds.last_mut() {
            last.count += 1;
        }
        return;
    }
    kinds.push(StepKind {
        key,
        step,
        count: 1,
        capped,
        observation: Box::new(obs),
    });
}

/// What tells one kind of answer from another: the HTTP status, the first JSON-RPC error code
/// (or that a result came), and how the exchange ended.
pub(super) fn kind_key(obs: &Observation) -> String {
    let status = obs.answer.http.as_ref().map_or(0, |h| h.status);
    let answer = obs
        .answer
        .messages
        .iter()
        .find_map(|m| {
            if let Some(code) = m.get("error").and_then(|e| e.get("code")) {
                Some(format!("error {code}"))
            } else if m.get("result").is_some() {
                let is_error = m
                    .pointer("/result/isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                Some(if is_error { "isError" } else { "result" }.to_string())
            } else {
                None
            }
        })
        .unwrap_or_else(|| "no message".into());
    let ending = match &obs.answer.ending {
        Ending::Answered => "answered",
        Ending::TimedOut => "timed out",
        Ending::Closed => "closed",
        Ending::Unreachable(_) => "unreachable",
    };
    match obs.answer.http {
        Some(_) => format!("HTTP {status}, {answer}, {ending}"),
        None => format!("{answer}, {ending}"),
    }
}

/// Sample the process tree every [`SAMPLE_EVERY`] until the steps stop: (steps done, sample).
pub(super) async fn sample_while(pid: u32, steps: Arc<Steps>) -> Vec<(u32, ProcSample)> {
    let mut out = Vec::new();
    loop {
        let done = steps.done.load(Ordering::SeqCst);
        let sample = tokio::task::spawn_blocking(move || procfs::sample(pid))
            .await
            .ok()
            .flatten();
        if let Some(s) = sample {
            out.push((done, s));
        }
        if steps.stop.load(Ordering::SeqCst) {
            return out;
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

/// A `ping` on a session of its own every [`PING_EVERY`] while the steps run.
pub(super) async fn ping_while(url: HttpUrl, settings: Speaking, steps: Arc<Steps>) -> Pings {
    let (mut times, mut failures, mut refusals) = (Vec::new(), Vec::new(), Vec::new());
    let ping = own_request(&settings, PROBE_ID, liveness_method(&settings));
    let mut hs: Option<Handshake> = None;
    while !steps.stop.load(Ordering::SeqCst) {
        let begun = Instant::now();
        let deadline = begun + settings.probe_timeout.max(Duration::from_secs(10));
        if hs.is_none() && !settings.version.is_modern() {
            match http_handshake(&url, &settings, deadline).await {
                Ok(h) => hs = Some(h),
                Err(TransportError::Handshake(why)) => {
                    refusals.push(format!("its handshake was refused: {why}"));
                    tokio::time::sleep(PING_EVERY).await;
                    continue;
                }
                Err(e) => {
                    failures.push(format!("its handshake got no answer: {}", chain(&e)));
                    tokio::time::sleep(PING_EVERY).await;
                    continue;
                }
            }
        }
        let answer = post_own(&url, &settings, hs.as_ref(), &ping, deadline).await;
        match answer {
            Ok(resp)
                if http_messages(&resp)
                    .0
                    .iter()
                    .any(|m| m.get("result").is_some()) =>
            {
                times.push(u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX));
            }
            Ok(resp) => {
                // Refused, not kept waiting: no latency to time. Its session may have been
                // evicted or expired: the next ping opens another.
                hs = None;
                refusals.push(format!("answered HTTP {} without a result", resp.status));
            }
            Err(e) => failures.push(chain(&e)),
        }
        tokio::time::sleep(PING_EVERY.saturating_sub(begun.elapsed())).await;
    }
    Pings {
        times,
        failures,
        refusals,
    }
}

/// What the pings on another connection got: each answer's time (ms), the pings that got no
/// answer at all (what a blocked server does), and those refused (what an endpoint that wants
/// what the runner lacks does: no latency to time).
#[derive(Default)]
pub(super) struct Pings {
    pub(super) times: Vec<u64>,
    pub(super) failures: Vec<String>,
    pub(super) refusals: Vec<String>,
}

/// The status a request naming `session` gets: `DELETE` it, or (any other method) `POST` a
/// ping in it.
async fn session_status(
    url: &HttpUrl,
    settings: &Speaking,
    session: &str,
    method: hyper::Method,
) -> u16 {
    let hs = Handshake {
        session: Some(session.to_string()),
        version: settings.version.to_string(),
        server: None,
    };
    let ping = own_request(settings, PROBE_ID, liveness_method(settings));
    let headers = standard_headers(url, settings, Some(&hs), Some(&ping));
    let wire = match method {
        hyper::Method::DELETE => Wire::Request {
            method,
            path: url.path.clone(),
            headers,
            body: crate::case::Body::from_bytes(Vec::new()),
            chunked: false,
        },
        _ => post_json(url, settings, headers, &ping),
    };
    let deadline = Instant::now() + settings.probe_timeout.max(Duration::from_secs(5));
    match http::exchange(url, wire, deadline, SseRead::ToFirstResponse).await {
        Ok(resp) => resp.status,
        Err(_) => 0,
    }
}
