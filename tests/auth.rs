//! The `auth/` family: MCP authorization checked on any HTTP endpoint that claims it.
//!
//! A fixture issuer (an ES256 key made here, at test time) signs the tokens; the runner mints
//! the bad ones from its key (`--auth-issuer-key`). The reference gate with JWT validation and
//! the witness with `--auth-config` pass every case; gates with one defect each (no token check
//! at all, `alg: none` accepted, audience ignored, the token forwarded downstream, keys of
//! another issuer) fail exactly the snapshot under `tests/expect/broken-gate/auth-*.txt`
//! (`UPDATE_EXPECT=1` refreshes), and every `auth/` case fails under at least one of them.

use crate::util::TrialVerdict;
use crate::util::{bin, check_snapshot, run_with_report, version, Failing, InProcessGate, Report};
use mcp_gauntlet::auth::Issuer;
use reference_gate::auth::{AuthConfig, AuthFaults, Verifier};
use reference_gate::config::GateConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const ISSUER: &str = "https://issuer.test";
const RESOURCE: &str = "https://gate.test/mcp";
/// A tool only the `admin` scope may call (the good token has `mcp` only).
const SCOPED_TOOL: &str = "admin_report";
const VERSIONS: &str = "2025-11-25,2026-07-28";

/// The issuer's key and public JWKS, written under `dir`.
struct Keys {
    key: PathBuf,
    jwks: PathBuf,
}

fn keys(dir: &Path, name: &str) -> Keys {
    let issuer = Issuer::generate(ISSUER, "k1").unwrap();
    let key = dir.join(format!("{name}-key.pem"));
    let jwks = dir.join(format!("{name}-jwks.json"));
    std::fs::write(&key, issuer.private_pem()).unwrap();
    std::fs::write(&jwks, issuer.jwks()).unwrap();
    Keys { key, jwks }
}

fn auth_config(jwks: &Path, resource: &str) -> AuthConfig {
    serde_json::from_value(serde_json::json!({
        "resource": resource,
        "issuer": ISSUER,
        "jwks_file": jwks.display().to_string(),
        "scopes_supported": ["mcp", "admin"],
    }))
    .unwrap()
}

/// The runner's auth inputs for tokens signed with `key`.
fn auth_args(key: &Path, audience: &str) -> Vec<String> {
    [
        "--auth-issuer-key",
        &key.display().to_string(),
        "--auth-issuer",
        ISSUER,
        "--auth-audience",
        audience,
        "--auth-kid",
        "k1",
        "--auth-scopes",
        "mcp",
        "--auth-scoped-tool",
        SCOPED_TOOL,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// How a broken gate is broken.
#[derive(Clone, Copy)]
enum Defect {
    /// No defect.
    None,
    /// No `auth` section at all: every request is served.
    NoAuth,
    AcceptsNone,
    IgnoresAudience,
    IgnoresLifetime,
    IgnoresIssuer,
    ForwardsToken,
    /// The gate trusts another issuer's keys: no good token is good.
    OtherKeys,
    /// Tools' scopes checked only under `MCP-Protocol-Version: 2025-11-25` (CVE-2026-11719).
    ScopesOnlyAtLatest,
    /// Sessions served to any valid token, not only their opener's (CVE-2026-52869).
    SessionsUnbound,
}

/// Run the gate profile against an in-process gate with JWT validation (and `defect`); the
/// trials that did not pass.
fn gate_failing(defect: Defect) -> Vec<Failing> {
    let dir = tempfile::tempdir().unwrap();
    let runner_keys = keys(dir.path(), "issuer");
    let gate_keys = match defect {
        Defect::OtherKeys => keys(dir.path(), "other"),
        _ => Keys {
            key: runner_keys.key.clone(),
            jwks: runner_keys.jwks.clone(),
        },
    };
    let jwks = gate_keys.jwks.clone();
    let gate = InProcessGate::start_with_front(
        move |cfg: &mut GateConfig, _| {
            if !matches!(defect, Defect::NoAuth) {
                cfg.auth = Some(auth_config(&jwks, RESOURCE));
            }
            cfg.policy.rules.push(
                serde_json::from_value(serde_json::json!(
                    {"effect": "allow", "tool": SCOPED_TOOL, "scope": "admin"}
                ))
                .unwrap(),
            );
        },
        |cfg| reference_gate::cli::build_proxy(cfg).unwrap(),
        move |settings| {
            let faults = AuthFaults {
                accept_none: matches!(defect, Defect::AcceptsNone),
                ignore_audience: matches!(defect, Defect::IgnoresAudience),
                ignore_lifetime: matches!(defect, Defect::IgnoresLifetime),
                ignore_issuer: matches!(defect, Defect::IgnoresIssuer),
                scopes_only_at_latest: matches!(defect, Defect::ScopesOnlyAtLatest),
                sessions_unbound: matches!(defect, Defect::SessionsUnbound),
            };
            if let Some(auth) = settings.auth.take() {
                let cfg = auth.config().clone();
                settings.auth = Some(Arc::new(Verifier::new(cfg).unwrap().with_faults(faults)));
            }
            settings.forward_token = matches!(defect, Defect::ForwardsToken);
        },
    );
    let url = format!("http://{}/mcp", gate.addr);
    let log = gate.witness_log.display().to_string();
    let mut args: Vec<String> = [
        "--profile",
        "gate",
        "--gate-codes",
        "reference",
        "--http",
        url.as_str(),
        "--witness-log",
        log.as_str(),
        "--spec",
        VERSIONS,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(auth_args(&runner_keys.key, RESOURCE));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    // The series through a gate are tests/series.rs's (each sends thousands of requests).
    let (_, report) = run_with_report(&refs, &crate::util::SERIES_SKIPPED);
    failing_of(&report)
}

fn failing_of(report: &Report) -> Vec<Failing> {
    let mut out: Vec<Failing> = report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail || t.verdict == TrialVerdict::Warn)
        .map(Failing::of)
        .collect();
    out.sort_by(|a, b| a.line.cmp(&b.line));
    out
}

fn auth_passes(report: &Report) -> usize {
    report
        .results
        .iter()
        .filter(|t| t.id.starts_with("auth/") && t.verdict == TrialVerdict::Pass)
        .count()
}

fn expect_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/expect/broken-gate/{name}.txt"))
}

/// Gates with one targeted defect each.
const TARGETED: &[&str] = &[
    "auth-accepts-alg-none",
    "auth-ignores-audience",
    "auth-ignores-lifetime",
    "auth-ignores-issuer",
    "auth-forwards-token",
    "auth-scopes-only-at-latest",
    "auth-sessions-unbound",
];

/// Gates that get everything wrong at once.
const BLANKET: &[&str] = &["auth-no-token-check", "auth-trusts-other-keys"];

/// Cases only a blanket gate fails, and why no targeted defect is built for each.
const BLANKET_ONLY: &[(&str, &str)] = &[
    ("auth/no-token-in-a-valid-session", "a missing token is exactly what the no-check gate ignores; a gate that lets a session stand in for a token would be a second front"),
    ("auth/no-token-initialize", "a missing token is exactly what the no-check gate ignores"),
    ("auth/basic-scheme", "a header the gate does not take as Bearer is what the no-check gate ignores"),
    ("auth/malformed-authorization-header", "a header the gate cannot parse is what the no-check gate ignores"),
    ("auth/token-in-the-query-string", "the reference gate has no code that reads the query for tokens, so there is nothing to break but the check itself"),
    ("auth/broken-signature", "jsonwebtoken cannot skip only the signature; the no-check gate takes the token"),
    ("auth/hmac-signed-with-the-public-key", "an HMAC-accepting verifier needs the public key as an HMAC secret, which jsonwebtoken's JWK keys do not expose; the no-check gate takes the token"),
    ("auth/token-lacking-the-scope-of-a-tool", "scopes come from the token; without one the scoped rule never allows and the gate answers 200 with a denial, not 403"),
];

#[test]
fn the_gate_with_jwt_validation_passes_the_whole_gate_profile_with_tokens() {
    let got = gate_failing(Defect::None);
    assert!(got.is_empty(), "the JWT gate fails: {got:#?}");
}

#[test]
fn a_gate_that_checks_no_token_fails_every_refusal() {
    check_snapshot(
        "broken gate `auth-no-token-check`",
        &expect_path("auth-no-token-check"),
        gate_failing(Defect::NoAuth),
    );
}

#[test]
fn a_gate_that_accepts_alg_none() {
    check_snapshot(
        "broken gate `auth-accepts-alg-none`",
        &expect_path("auth-accepts-alg-none"),
        gate_failing(Defect::AcceptsNone),
    );
}

#[test]
fn a_gate_that_ignores_the_audience() {
    check_snapshot(
        "broken gate `auth-ignores-audience`",
        &expect_path("auth-ignores-audience"),
        gate_failing(Defect::IgnoresAudience),
    );
}

#[test]
fn a_gate_that_forwards_the_token() {
    check_snapshot(
        "broken gate `auth-forwards-token`",
        &expect_path("auth-forwards-token"),
        gate_failing(Defect::ForwardsToken),
    );
}

#[test]
fn a_gate_that_ignores_exp_and_nbf() {
    check_snapshot(
        "broken gate `auth-ignores-lifetime`",
        &expect_path("auth-ignores-lifetime"),
        gate_failing(Defect::IgnoresLifetime),
    );
}

#[test]
fn a_gate_that_ignores_the_issuer() {
    check_snapshot(
        "broken gate `auth-ignores-issuer`",
        &expect_path("auth-ignores-issuer"),
        gate_failing(Defect::IgnoresIssuer),
    );
}

#[test]
fn a_gate_that_trusts_another_issuers_keys() {
    check_snapshot(
        "broken gate `auth-trusts-other-keys`",
        &expect_path("auth-trusts-other-keys"),
        gate_failing(Defect::OtherKeys),
    );
}

#[test]
fn a_gate_that_checks_scopes_only_at_the_latest_version() {
    check_snapshot(
        "broken gate `auth-scopes-only-at-latest`",
        &expect_path("auth-scopes-only-at-latest"),
        gate_failing(Defect::ScopesOnlyAtLatest),
    );
}

#[test]
fn a_gate_that_serves_a_session_to_any_valid_token() {
    check_snapshot(
        "broken gate `auth-sessions-unbound`",
        &expect_path("auth-sessions-unbound"),
        gate_failing(Defect::SessionsUnbound),
    );
}

/// Every `auth/` case fails under a targeted broken gate at every version it runs, or, for the
/// cases listed in `BLANKET_ONLY` with a reason, under a blanket one.
#[test]
fn every_auth_case_can_fail() {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        return;
    }
    let targeted = caught_by(TARGETED);
    let blanket = caught_by(BLANKET);
    let cat = mcp_gauntlet::case::Catalogue::embedded().unwrap();
    let mut never = Vec::new();
    for case in cat.cases.iter().filter(|c| c.id.starts_with("auth/")) {
        let listed = BLANKET_ONLY.iter().any(|(id, _)| *id == case.id);
        let keys: Vec<String> = VERSIONS
            .split(',')
            .filter(|v| case.applies_to_version(version(v)))
            .map(|v| format!("{v} {}", case.id))
            .collect();
        for key in &keys {
            if !(targeted.contains(key) || (listed && blanket.contains(key))) {
                never.push(key.clone());
            }
        }
        // A listed case that a targeted gate fails everywhere should leave the list.
        assert!(
            !(listed && keys.iter().all(|k| targeted.contains(k))),
            "{} is caught by a targeted gate: unlist it",
            case.id
        );
    }
    assert!(
        never.is_empty(),
        "auth cases no broken gate fails: {never:#?}"
    );
}

/// `version id` of every failing line in the snapshots named.
fn caught_by(names: &[&str]) -> std::collections::BTreeSet<String> {
    names
        .iter()
        .flat_map(|name| {
            let text = std::fs::read_to_string(expect_path(name)).unwrap_or_default();
            text.lines()
                .filter_map(|l| {
                    let mut parts = l.split(' ');
                    let (_, version, id) = (parts.next()?, parts.next()?, parts.next()?);
                    Some(format!("{version} {id}"))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The witness with `--auth-config` passes the whole server profile with tokens (the auth
/// family included), and without auth inputs the auth family is not run at all.
#[test]
fn the_witness_requiring_tokens_passes_with_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "issuer");
    let resource = "https://witness.test/mcp";
    let cfg = dir.path().join("auth.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&auth_config(&k.jwks, resource)).unwrap(),
    )
    .unwrap();
    let w = crate::util::HttpWitness::start_with(&[
        "--auth-config",
        &cfg.display().to_string(),
        "--auth-tool-scope",
        &format!("{SCOPED_TOOL}=admin"),
    ]);
    let mut args: Vec<String> = ["--http", w.url.as_str(), "--spec", VERSIONS]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(auth_args(&k.key, resource));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, report) = run_with_report(&refs, &[]);
    let failing = failing_of(&report);
    assert_eq!((code, failing.len()), (0, 0), "{failing:#?}");
    let cat = mcp_gauntlet::case::Catalogue::embedded().unwrap();
    let auth: Vec<_> = cat
        .cases
        .iter()
        .filter(|c| c.id.starts_with("auth/"))
        .collect();
    assert!(auth.len() >= 15);
    let trials: usize = VERSIONS
        .split(',')
        .map(|v| {
            auth.iter()
                .filter(|c| c.applies_to_version(version(v)))
                .count()
        })
        .sum();
    assert_eq!(auth_passes(&report), trials);

    // Without a token the endpoint refuses everything; the runner says the auth family does
    // not apply, and the rest fails at the handshake.
    let (_, report) = run_with_report(&["--http", w.url.as_str(), "--spec", "2025-11-25"], &[]);
    assert_eq!(auth_passes(&report), 0);
    assert!(report
        .results
        .iter()
        .filter(|t| t.id.starts_with("auth/"))
        .all(|t| t.verdict == TrialVerdict::Skip));

    // An expired token given as the good one is refused, so the run does not pass (a positive
    // control that can fail): the handshake refuses it, no trial can be sent, and a run that
    // sent nothing tested nothing (exit 4, could not test).
    let issuer = Issuer::from_pem(ISSUER, "k1", &std::fs::read_to_string(&k.key).unwrap()).unwrap();
    let mut claims = issuer.claims(resource, "mcp");
    claims.exp = claims.iat - 600;
    claims.nbf = claims.iat - 1200;
    let expired = issuer.mint(&claims).unwrap();
    let out = std::process::Command::new(bin())
        .args(["run", "--http", w.url.as_str(), "--spec", "2025-11-25"])
        .args(["--auth-token", expired.as_str(), "--", "auth/good-token"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(i32::from(mcp_gauntlet::exit::UNTESTABLE))
    );
}
