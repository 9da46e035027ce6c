//! Every gate case can fail: the gate profile against deliberately broken gates.
//!
//! Each broken gate is the reference gate with one defect switched on (`reference_gate::proxy::
//! Faults`, available only with the crate's `faults` feature) or with an engine that refuses or
//! fails. The exact set of failing trials per broken gate is a snapshot under
//! `tests/expect/broken-gate/` (refresh with `UPDATE_EXPECT=1`), and every gate-only case must fail
//! under at least one of them. The control runs (no defect; an engine that errors on the canary)
//! must fail nothing.

use crate::util::{bin, version, Failing, InProcessGate, Report};
use crate::util::{Status, TrialVerdict};
use mcp_gauntlet::case::{Catalogue, Profile, TransportKind};
use mcp_gauntlet::target::WITNESS_POLICY;
use mcp_gauntlet::witness;
use reference_gate::config::GateConfig;
use reference_gate::faults::Leniency;
use reference_gate::forward::ConfiguredForwarder;
use reference_gate::policy::{
    Action, ActionKind, AgentActionRequest, Decision, Engine, EngineError, RuleEngine,
};
use reference_gate::proxy::{Faults, Proxy};
use reference_gate::trace::Tracer;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

/// The witness policy, except that the canary makes the engine fail with internal detail.
struct FailsOnCanary(RuleEngine);

impl Engine for FailsOnCanary {
    fn decide(&self, r: &AgentActionRequest) -> Result<Decision, EngineError> {
        if r.tool == witness::CANARY_TOOL {
            return Err(EngineError(
                "policy backend /etc/gauntlet/policy.rego line 12: connection refused".into(),
            ));
        }
        self.0.decide(r)
    }
    fn decide_action(&self, s: &str, a: &Action) -> Result<Decision, EngineError> {
        self.0.decide_action(s, a)
    }
    fn visible(&self, s: &str, t: &str) -> bool {
        self.0.visible(s, t)
    }
}

fn policy() -> GateConfig {
    serde_json::from_str(WITNESS_POLICY).expect("the witness policy parses")
}

/// Start a witness and a gate with `faults` and `engine` in this process; run the gate profile
/// against it through the CLI; return `transport id verdict` for every trial that did not pass.
fn failing(faults: Faults, engine: Arc<dyn Engine>) -> Vec<Failing> {
    failing_in(faults, engine, &crate::util::SERIES_SKIPPED)
}

/// [`failing`] for the trials `libtest` selects (its filters and `--skip`s).
fn failing_in(faults: Faults, engine: Arc<dyn Engine>, libtest: &[&str]) -> Vec<Failing> {
    let gate = InProcessGate::start(
        |_, _| {},
        |cfg| {
            let forwarder = Arc::new(ConfiguredForwarder::new(&cfg.servers, cfg.deadlines));
            Arc::new(
                Proxy::new(engine, forwarder, cfg.limits, cfg.errors, Tracer::none())
                    .with_faults(faults),
            )
        },
    );
    let (dir, gaddr, log) = (&gate.dir, gate.addr, &gate.witness_log);
    let report = dir.path().join("report.json");
    let out = std::process::Command::new(bin())
        .args([
            "run",
            "--profile",
            "gate",
            "--gate-codes",
            "reference",
            "--http",
            &format!("http://{gaddr}/mcp"),
            "--spec",
            VERSIONS,
        ])
        .arg("--witness-log")
        .arg(log)
        .arg("--report")
        .arg(&report)
        .arg("--")
        .args(libtest)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|_| panic!("no report: {}", String::from_utf8_lossy(&out.stderr)));
    let parsed: Report = serde_json::from_str(&text).unwrap();
    let mut lines: Vec<Failing> = parsed
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail || t.verdict == TrialVerdict::Warn)
        .map(Failing::of)
        .collect();
    lines.sort_by(|a, b| a.line.cmp(&b.line));
    lines
}

fn expect_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/expect/broken-gate/{name}.txt"))
}

fn check(name: &str, faults: Faults, engine: Arc<dyn Engine>) {
    let path = expect_path(name);
    crate::util::check_snapshot(
        &format!("broken gate `{name}`"),
        &path,
        failing(faults, engine),
    );
}

fn rules() -> Arc<dyn Engine> {
    Arc::new(policy().policy)
}

/// The versions every broken gate is run at: the newest legacy one and the first modern one.
const VERSIONS: &str = "2025-11-25,2026-07-28";

const BROKEN: &[&str] = &[
    "ignores-header-binding",
    "forwards-raw-bytes",
    "last-duplicate-wins",
    "batch-skips-policy",
    "leaks-engine-text",
    "allows-on-engine-error",
    "relays-downstream-verbatim",
    "refuses-everything",
    "reads-json-leniently",
    "reads-the-envelope-loosely",
    "takes-any-tool-name",
    "takes-any-media-type",
    "has-no-size-limit",
    "allows-by-default",
    "polices-only-tool-calls",
    "matches-resource-uris-as-spelled",
    "forwards-any-response",
    "relays-server-requests",
    "unpoliced-routes",
    "unpoliced-codings",
];

/// Allow unless a rule denies: what a gate with an allow-by-default policy does.
struct AllowByDefault(RuleEngine);

impl Engine for AllowByDefault {
    fn decide(&self, r: &AgentActionRequest) -> Result<Decision, EngineError> {
        let denied = self.0.rules.iter().any(|rule| {
            rule.effect == reference_gate::policy::Effect::Deny
                && rule.tool.as_deref() == Some(r.tool.as_str())
        });
        Ok(if denied {
            Decision::Deny
        } else {
            Decision::Allow
        })
    }
    /// Resources, prompts, methods: allowed unless a deny rule names them exactly (no case
    /// folding, no patterns), as a hand-written allow-list gate would.
    fn decide_action(&self, _: &str, a: &Action) -> Result<Decision, EngineError> {
        let denied = self.0.rules.iter().any(|rule| {
            let subject = match a.kind {
                ActionKind::Resource => &rule.resource,
                ActionKind::Prompt => &rule.prompt,
                ActionKind::Method => &rule.method,
                ActionKind::ServerRequest => &rule.server_request,
            };
            rule.effect == reference_gate::policy::Effect::Deny
                && subject.as_deref().is_some_and(|p| {
                    p == a.subject
                        || p.strip_suffix('*')
                            .is_some_and(|p| a.subject.starts_with(p))
                })
        });
        Ok(if denied {
            Decision::Deny
        } else {
            Decision::Allow
        })
    }
    fn visible(&self, _: &str, _: &str) -> bool {
        true
    }
}

pub(crate) fn lenient(l: Leniency) -> Faults {
    Faults {
        leniency: l,
        ..Faults::default()
    }
}

#[test]
fn reads_json_leniently() {
    // A gate that repairs its input also tends not to check names.
    let l = Leniency {
        lenient_grammar: true,
        first_value_only: true,
        any_tool_name: true,
        ..Leniency::default()
    };
    check("reads-json-leniently", lenient(l), rules());
}

#[test]
fn reads_the_envelope_loosely() {
    check(
        "reads-the-envelope-loosely",
        lenient(Leniency {
            lax_envelope: true,
            ..Leniency::default()
        }),
        rules(),
    );
}

#[test]
fn takes_any_tool_name() {
    check(
        "takes-any-tool-name",
        lenient(Leniency {
            any_tool_name: true,
            ..Leniency::default()
        }),
        rules(),
    );
}

#[test]
fn takes_any_media_type() {
    check(
        "takes-any-media-type",
        Faults {
            any_media_type: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn serves_other_spellings_of_the_endpoint_unchecked() {
    check(
        "unpoliced-routes",
        Faults {
            unpoliced_routes: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn forwards_coded_bodies_unchecked() {
    check(
        "unpoliced-codings",
        Faults {
            unpoliced_codings: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn has_no_size_limit() {
    check(
        "has-no-size-limit",
        Faults {
            no_size_limit: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn allows_by_default() {
    check(
        "allows-by-default",
        Faults::default(),
        Arc::new(AllowByDefault(policy().policy)),
    );
}

/// A series through a gate that lets what its policy does not name through: every unknown
/// prompt asked for reaches the witness (the snapshots leave series out, for time: each sends
/// thousands of requests).
#[test]
fn allows_by_default_lets_a_series_through() {
    let lines = failing_in(
        Faults::default(),
        Arc::new(AllowByDefault(policy().policy)),
        &["state/unknown-prompt-names-are-not-kept"],
    );
    let shown: Vec<&str> = lines.iter().map(|l| l.line.as_str()).collect();
    assert_eq!(
        shown,
        ["http 2026-07-28 state/unknown-prompt-names-are-not-kept warn"],
        "{lines:?}"
    );
    let not_passed: Vec<&str> = lines[0]
        .findings
        .iter()
        .filter(|f| f.status != Status::Pass)
        .map(|f| f.check.as_str())
        .collect();
    assert_eq!(not_passed, ["forwarded"], "{lines:?}");
}

#[test]
fn polices_only_tool_calls() {
    check(
        "polices-only-tool-calls",
        Faults {
            unpoliced_methods: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn matches_resource_uris_as_spelled() {
    check(
        "matches-resource-uris-as-spelled",
        Faults {
            raw_uri_match: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn relays_server_requests() {
    check(
        "relays-server-requests",
        Faults {
            relay_server_requests: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn forwards_any_response() {
    check(
        "forwards-any-response",
        Faults {
            any_response_id: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn control_reference_gate_fails_nothing() {
    let got = failing(Faults::default(), rules());
    assert!(got.is_empty(), "the reference gate fails: {got:#?}");
}

#[test]
fn control_engine_error_is_a_denial() {
    let got = failing(Faults::default(), Arc::new(FailsOnCanary(policy().policy)));
    assert!(
        got.is_empty(),
        "an engine error on the canary fails: {got:#?}"
    );
}

#[test]
fn forwards_raw_bytes() {
    check(
        "forwards-raw-bytes",
        Faults {
            forward_raw: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn last_duplicate_wins() {
    check(
        "last-duplicate-wins",
        Faults {
            last_duplicate_wins: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn batch_skips_policy() {
    check(
        "batch-skips-policy",
        Faults {
            batch_skips_policy: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn leaks_engine_text() {
    let engine = Arc::new(FailsOnCanary(policy().policy));
    check(
        "leaks-engine-text",
        Faults {
            leak_engine_text: true,
            ..Faults::default()
        },
        engine,
    );
}

#[test]
fn allows_on_engine_error() {
    let engine = Arc::new(FailsOnCanary(policy().policy));
    check(
        "allows-on-engine-error",
        Faults {
            allow_on_engine_error: true,
            ..Faults::default()
        },
        engine,
    );
}

#[test]
fn relays_downstream_verbatim() {
    check(
        "relays-downstream-verbatim",
        Faults {
            relay_downstream_verbatim: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn ignores_header_binding() {
    check(
        "ignores-header-binding",
        Faults {
            skip_binding: true,
            ..Faults::default()
        },
        rules(),
    );
}

#[test]
fn refuses_everything() {
    check(
        "refuses-everything",
        Faults::default(),
        Arc::new(RuleEngine::default()),
    );
}

/// Every gate-only case (HTTP) fails under at least one broken gate. The cases written for
/// meta-tool gates and the `identity/` cases do not apply to the reference gate, which has no
/// meta-tool and no principals but a token's: `tests/mapping.rs` shows each failed by a broken
/// meta-tool or per-principal gate.
#[test]
fn every_gate_case_can_fail() {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        return;
    }
    let caught: BTreeSet<String> = BROKEN
        .iter()
        .flat_map(|name| {
            std::fs::read_to_string(expect_path(name))
                .unwrap_or_default()
                .lines()
                .map(|l| l.rsplit_once(' ').map_or(l, |(k, _)| k).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let cat = Catalogue::embedded().unwrap();
    let never: Vec<String> = cat
        .cases
        .iter()
        .filter(|c| {
            c.spec.profiles.as_deref() == Some(&[Profile::Gate])
                && c.applies_to_transport(TransportKind::Http)
                && c.spec.mapping.is_none()
                && c.spec.caller.is_none()
        })
        .flat_map(|c| {
            VERSIONS
                .split(',')
                .filter(|v| c.applies_to_version(version(v)))
                .map(|v| format!("http {v} {}", c.id))
                .collect::<Vec<_>>()
        })
        .filter(|k| !caught.contains(k))
        .collect();
    assert!(
        never.is_empty(),
        "gate cases no broken gate fails:\n  {}",
        never.join("\n  ")
    );
}
