//! Live-endpoint fuzzing (`mcp-gauntlet fuzz`): smuggling models generated from a seed, each
//! turned into a case, sent over the target's lanes and judged by the catalogue's own oracles.
//! A failure is shrunk (one field of the model simplified at a time, kept while it still fails)
//! and saved as a case file that `run --cases DIR` replays.

use crate::case::{self, Case, Profile, Source, TransportKind};
use crate::error::RunError;
use crate::fuzz::targets::tools_run_by;
use crate::reading::{self as json, Personality};
use crate::settings::Settings;
use crate::target::Target;
use crate::target::{self, Lane};
use crate::verdict::Status;
use base64::Engine as _;
use rand::{Rng, SeedableRng};
use reference_gate::fuzzing::{Separator, Shape, Smuggle};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `mcp-gauntlet fuzz`.
#[derive(Debug, Clone)]
pub struct FuzzOptions {
    pub target: Target,
    /// The profile for `--http`/`--stdio` targets (gate targets are always judged as gates).
    pub profile: Profile,
    /// The generator's seed; a random one (printed) when absent.
    pub seed: Option<u64>,
    /// Stop after this many iterations…
    pub iterations: Option<u64>,
    /// …or after this long (whichever comes first; 1000 iterations when neither is given).
    pub time: Option<Duration>,
    /// Stop after this many distinct findings.
    pub max_findings: usize,
    /// Write each shrunk failure as a case file here.
    pub save: Option<PathBuf>,
    pub settings: Settings,
    /// Which protocol versions to speak (lanes repeat per version, inputs cycle through them).
    pub spec: crate::versions::Spec,
    pub self_exe: Option<PathBuf>,
    /// Print progress to stderr.
    pub progress: bool,
}

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            target: Target::Embedded,
            profile: Profile::Server,
            seed: None,
            iterations: None,
            time: None,
            max_findings: 10,
            save: None,
            settings: Settings::default(),
            spec: crate::versions::Spec::Accepted,
            self_exe: None,
            progress: true,
        }
    }
}

/// One failure, shrunk.
#[derive(Debug, Clone)]
pub struct FuzzFinding {
    /// The lane it failed on (`gate/stdio`…).
    pub lane: String,
    pub model: Smuggle,
    /// The case file's text.
    pub case_json: String,
    /// Where it was saved.
    pub saved: Option<PathBuf>,
    /// The catalogue's explanation of the failure.
    pub explanation: String,
    /// The iteration that first found it.
    pub iteration: u64,
    /// Later findings of the same cause (see [`cause`]), not kept.
    pub same_cause: u64,
    /// What makes it this finding and no other: the lane, the checks that failed, and the
    /// parts of the shrunk input that matter to them.
    pub cause: String,
}

/// The cause of a finding: its lane, the checks that failed, and the shrunk model, without the
/// denied name's spelling unless the call got somewhere with it (the canary ran, or it was
/// forwarded): a finding about the id, the answer's shape or the outcome is the same finding
/// whatever the name beside it is spelled like.
fn cause(model: &Smuggle, lane: &str, failed: &[&str]) -> String {
    let reached = failed.iter().any(|c| matches!(*c, "canary" | "forwarded"));
    let name = if reached {
        format!("{:?}", model.name)
    } else {
        "any name".into()
    };
    format!(
        "[{lane}] {} | {:?} {:?} {:?} {:?} {name}",
        failed.join(","),
        model.shape,
        model.id,
        model.space,
        model.encoding
    )
}

/// What a fuzzing run did.
#[derive(Debug, Clone)]
pub struct FuzzOutcome {
    pub seed: u64,
    pub iterations: u64,
    pub elapsed: Duration,
    pub findings: Vec<FuzzFinding>,
}

/// The denied and the allowed tool as the target names them (through `--tool-name`).
fn tool_names(settings: &Settings) -> (String, String) {
    let m = &settings.mapping;
    (
        m.spelled(&settings.denied_tool),
        m.spelled(&settings.allowed_tool),
    )
}

/// How a model is judged on a lane, or `None` when it says nothing there (a valid call of the
/// canary is a legitimate request to a plain server). Its calls name the tools as `settings`
/// says the target names them.
fn case_text(
    model: &Smuggle,
    profile: Profile,
    transport: TransportKind,
    settings: &Settings,
) -> Option<String> {
    // Over stdio a line break ends a message: an allowed call, a line break, then the denied
    // call are two messages, and the first is rightly served.
    if transport == TransportKind::Stdio
        && matches!(
            model.shape,
            Shape::Concatenated {
                separator: Separator::Newline | Separator::CrLf
            }
        )
    {
        return None;
    }
    let (denied, allowed) = tool_names(settings);
    let bytes = model.to_bytes_named(&denied, &allowed);
    let body =
        serde_json::json!({ "base64": base64::engine::general_purpose::STANDARD.encode(&bytes) });
    let title = format!("fuzz: {model:?}");
    let expect = match profile {
        // Every shape hides a denied call: a gate refuses it and forwards nothing.
        Profile::Gate => serde_json::json!({ "outcome": ["reject", "silent"], "forwarded": false }),
        Profile::Server => {
            // A plain server may run a well-formed call of the canary; judge only bytes a
            // strict reader refuses or reads as something else.
            let unbom = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
            match json::read(Personality::Strict, unbom) {
                Ok(values) => {
                    if values.iter().flat_map(tools_run_by).any(|n| n == denied) {
                        return None;
                    }
                    // Well-formed JSON that a strict server reads as something harmless (or
                    // refuses): whatever it answers, the canary must not run and it must live.
                    serde_json::json!({ "outcome": ["reject", "silent", "accept"] })
                }
                // Not JSON to a strict reader: refused or ignored, never run.
                Err(_) => serde_json::json!({ "outcome": ["reject", "silent"] }),
            }
        }
    };
    let requirements = match profile {
        Profile::Gate => vec!["GATE-PARSE-01", "GATE-DENY-01", "GATE-FWD-01"],
        Profile::Server => vec!["JSON-ENC-01", "JSONRPC-ERR-02", "MCP-MSG-01"],
    };
    let case = serde_json::json!({
        "title": title,
        "requirements": requirements,
        "level": "must",
        "transports": [transport.as_str()],
        "profiles": [profile.as_str()],
        "request": { "body": body },
        "expect": expect,
    });
    serde_json::to_string_pretty(&case).ok()
}

fn case_id(model: &Smuggle, lane: &Lane) -> String {
    // A stable name from the bytes: the same input saves to the same file.
    let bytes = model.to_bytes();
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes
        .iter()
        .chain(lane.id.transport.as_str().as_bytes())
        .chain(lane.id.profile.as_str().as_bytes())
    {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
    format!(
        "fuzz/{}-{}-{h:016x}",
        lane.id.profile.as_str(),
        lane.id.transport.as_str()
    )
}

/// Send one model over one lane; `Some((explanation, failed checks))` when the catalogue's
/// oracles fail it.
async fn try_model(
    model: &Smuggle,
    lane: &Lane,
    settings: &Arc<Settings>,
) -> Result<Option<(String, Vec<&'static str>)>, RunError> {
    let Some(text) = case_text(model, lane.id.profile, lane.id.transport, settings) else {
        return Ok(None);
    };
    let id = case_id(model, lane);
    let spec = case::parse_case(&format!("{id}.json"), &text)?;
    let settings = &lane.settings(settings);
    let case = Case {
        id,
        spec,
        source: Source::Embedded,
    };
    let judging = crate::trial::Judging {
        settings,
        strict: false,
        secrets: &[],
    };
    let judged = judging.run(&case, lane).await;
    let (obs, v) = (judged.observation, judged.verdict);
    let mut failed: Vec<&'static str> = v
        .findings
        .iter()
        .filter(|f| f.status == Status::Fail)
        .map(|f| f.check.as_str())
        .collect();
    failed.sort_unstable();
    failed.dedup();
    Ok((v.status == Status::Fail).then(|| (v.explain(&lane.id.to_string(), &case, &obs), failed)))
}

/// Keep simplifying a failing model while a simpler one still fails: the simplest found, and
/// its explanation.
fn shrink(
    rt: &tokio::runtime::Runtime,
    model: Smuggle,
    found: (String, Vec<&'static str>),
    lane: &Lane,
    settings: &Arc<Settings>,
) -> Result<(Smuggle, (String, Vec<&'static str>)), RunError> {
    let (mut best, mut best_found) = (model, found);
    'shrink: loop {
        for candidate in best.simpler() {
            if let Some(f) = rt.block_on(try_model(&candidate, lane, settings))? {
                best = candidate;
                best_found = f;
                continue 'shrink;
            }
        }
        return Ok((best, best_found));
    }
}

/// Write a finding's case file as `DIR/<id>.json`; its path.
fn save(dir: &std::path::Path, id: &str, text: &str) -> Result<PathBuf, RunError> {
    let path = dir.join(format!("{id}.json"));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(RunError::Setup)?;
    }
    std::fs::write(&path, format!("{text}\n")).map_err(|source| RunError::Write {
        path: path.display().to_string(),
        source,
    })?;
    Ok(path)
}

/// Run the fuzzer. Blocks.
#[allow(
    clippy::too_many_lines,
    reason = "the fuzzing loop in its steps (draw a model, try it, shrink, skip duplicates, save, report progress) over one set of counters"
)]
pub fn fuzz(opts: FuzzOptions) -> Result<FuzzOutcome, RunError> {
    let seed = opts.seed.unwrap_or_else(|| rand::rng().random());
    let mut settings = opts.settings.clone();
    settings.exact_codes |= opts.target.runs_the_reference_gate();
    let settings = Arc::new(settings);
    let (opened, _) = target::open_lanes(
        &opts.target,
        opts.profile,
        opts.self_exe.as_ref(),
        &opts.spec,
        &Arc::new(opts.settings.clone()),
        true,
    )?;
    let (rt, lanes, target_name) = (&opened.rt, &opened.lanes, &opened.name);
    let say = |line: String| {
        if opts.progress {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    };
    say(format!(
        "fuzzing {target_name} with seed {seed} (repeat with --seed {seed})"
    ));
    let max_iterations = match (opts.iterations, opts.time) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => 1000,
    };
    let deadline = opts.time.map(|t| Instant::now() + t);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut last_report = started;
    let mut findings: Vec<FuzzFinding> = Vec::new();
    let mut iterations = 0u64;
    while iterations < max_iterations
        && deadline.is_none_or(|d| Instant::now() < d)
        && findings.len() < opts.max_findings
    {
        let noise: [u8; 48] = rng.random();
        let model = Smuggle::from_bytes(&noise);
        let lane = &lanes[(iterations as usize) % lanes.len()];
        iterations += 1;
        let Some(found) = rt.block_on(try_model(&model, lane, &settings))? else {
            if last_report.elapsed() > Duration::from_secs(2) {
                last_report = Instant::now();
                let secs = started.elapsed().as_secs_f64().max(1e-9);
                say(format!(
                    "  {iterations} iterations, {:.0}/s, {} findings",
                    iterations as f64 / secs,
                    findings.len()
                ));
            }
            continue;
        };
        let (best, (best_expl, failed)) = shrink(rt, model, found, lane, &settings)?;
        let why = cause(&best, &lane.id.to_string(), &failed);
        if let Some(f) = findings.iter_mut().find(|f| f.cause == why) {
            f.same_cause += 1;
            continue;
        }
        let Some(text) = case_text(&best, lane.id.profile, lane.id.transport, &settings) else {
            continue;
        };
        let saved = match &opts.save {
            Some(dir) => Some(save(dir, &case_id(&best, lane), &text)?),
            None => None,
        };
        say(format!(
            "FINDING at iteration {iterations} on [{}]: {best:?}{}",
            lane.id,
            saved
                .as_ref()
                .map(|p| format!(" (saved as {})", p.display()))
                .unwrap_or_default()
        ));
        findings.push(FuzzFinding {
            lane: lane.id.to_string(),
            model: best,
            case_json: text,
            saved,
            explanation: best_expl,
            iteration: iterations,
            same_cause: 0,
            cause: why,
        });
    }
    let elapsed = started.elapsed();
    let copies: u64 = findings.iter().map(|f| f.same_cause).sum();
    say(format!(
        "done: {iterations} iterations in {:.1} s ({:.0}/s), {} findings of distinct causes ({copies} more of the same causes not kept); seed {seed}",
        elapsed.as_secs_f64(),
        iterations as f64 / elapsed.as_secs_f64().max(1e-9),
        findings.len()
    ));
    for f in &findings {
        say(format!("  {} (found {} times)", f.cause, f.same_cause + 1));
    }
    Ok(FuzzOutcome {
        seed,
        iterations,
        elapsed,
        findings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reference_gate::fuzzing::{Encoding, IdSpelling, NameSpelling, Shape, Space};

    #[test]
    fn findings_of_one_cause_are_one_whatever_the_name_beside_them() {
        let model = |name| Smuggle {
            shape: Shape::Plain,
            name,
            id: IdSpelling::NegativeZero,
            space: Space::None,
            encoding: Encoding::Utf8,
        };
        let (a, b) = (model(NameSpelling::Upper), model(NameSpelling::Fullwidth));
        // An answer's shape or id does not depend on how the tool was spelled...
        assert_eq!(cause(&a, "http", &["shape"]), cause(&b, "http", &["shape"]));
        // ...but a call that ran, or was forwarded, is its spelling's.
        assert_ne!(
            cause(&a, "http", &["canary"]),
            cause(&b, "http", &["canary"])
        );
        assert_ne!(
            cause(&a, "gate/http", &["forwarded"]),
            cause(&b, "gate/http", &["forwarded"])
        );
        // Other checks, another lane: other causes.
        assert_ne!(
            cause(&a, "http", &["shape"]),
            cause(&a, "http", &["id", "shape"])
        );
        assert_ne!(
            cause(&a, "http", &["shape"]),
            cause(&a, "stdio", &["shape"])
        );
    }
}
