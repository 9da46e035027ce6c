//! Fuzzing: every committed fuzz input replays clean on stable, the fuzz oracles catch gates
//! with known defects, and live fuzzing finds smuggled calls through a lax gate and saves cases
//! that replay as the same failure.

use crate::broken_gate::lenient;
use crate::util::{bin, python3, run_with_report};
use crate::util::{Check, Status, TrialVerdict};
use mcp_gauntlet::fuzz::targets::{check_differential, check_differential_with};
use reference_gate::faults::Leniency;
use reference_gate::fuzzing::{
    check_binding, check_binding_with, check_canonical_bytes, check_roundtrip,
    check_roundtrip_with, check_smuggle, check_smuggle_with, fuzz_proxy, AllowedCall, Binding,
    Finding, Smuggle,
};
use reference_gate::proxy::{Faults, Proxy};
use std::path::Path;
use std::process::Command;

type Body = fn(&[u8]) -> Result<(), Finding>;

const TARGETS: [(&str, Body); 5] = [
    ("canonical_bytes", check_canonical_bytes),
    ("binding", check_binding),
    ("smuggle", check_smuggle),
    ("differential", check_differential),
    ("proxy_roundtrip", check_roundtrip),
];

#[test]
fn every_committed_fuzz_input_replays_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut replayed = 0;
    for (target, body) in TARGETS {
        for dir in ["seeds", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
                continue;
            };
            for e in entries {
                let path = e.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                if let Err(f) = body(&data) {
                    panic!("{target}: {} fails again: {f}", path.display());
                }
                replayed += 1;
            }
        }
    }
    assert!(replayed >= 300, "only {replayed} inputs replayed");
}

/// Deterministic inputs standing in for a fuzzer's.
fn inputs(n: u32, len: usize) -> impl Iterator<Item = Vec<u8>> {
    (0..n).map(move |seed| {
        let mut x = u64::from(seed).wrapping_mul(0x9e3779b97f4a7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    })
}

fn faulty(
    faults: Faults,
) -> (
    Proxy,
    std::sync::Arc<reference_gate::fuzzing::RecordingForwarder>,
) {
    let (p, f) = fuzz_proxy();
    (p.with_faults(faults), f)
}

/// Each defect here lets some smuggling shape through. (A gate that merely reads JSON
/// leniently but forwards canonical bytes of what it read is not among them: every shape holds
/// the denied call, which it still denies; `broken_gate` catches that defect with cases.)
#[test]
fn the_smuggle_and_differential_oracles_catch_defective_gates() {
    let defects: Vec<(&str, Faults)> = vec![
        (
            "last duplicate wins",
            Faults {
                last_duplicate_wins: true,
                ..Faults::default()
            },
        ),
        (
            "batch skips policy",
            Faults {
                batch_skips_policy: true,
                ..Faults::default()
            },
        ),
        (
            "loose envelope",
            lenient(Leniency {
                lax_envelope: true,
                ..Leniency::default()
            }),
        ),
        (
            "first value only",
            lenient(Leniency {
                first_value_only: true,
                ..Leniency::default()
            }),
        ),
    ];
    for (what, faults) in defects {
        let (proxy, fwd) = faulty(faults);
        let smuggled = inputs(3000, 48)
            .position(|d| check_smuggle_with(&proxy, &fwd, &Smuggle::from_bytes(&d)).is_err());
        assert!(smuggled.is_some(), "smuggle misses a gate whose {what}");
        // The same models through the differential oracle (even first byte: model mode).
        let differential = inputs(3000, 48).position(|mut d| {
            d[0] = 0;
            let raw = mcp_gauntlet::fuzz::targets::differential_input(&d);
            check_differential_with(&proxy, &fwd, &raw).is_err()
        });
        assert!(
            differential.is_some(),
            "differential misses a gate whose {what}"
        );
    }
    // The reference gate itself: nothing, on the same inputs.
    for d in inputs(3000, 48) {
        check_smuggle(&d).unwrap();
        check_differential(&d).unwrap();
    }
}

/// A gate that lets every 2026-07-28 request through without comparing its headers, and one that
/// compares only the method: the binding oracle reports both, the reference gate never.
#[test]
fn the_binding_oracle_catches_gates_that_trust_unbound_headers() {
    fn skips_binding(_: &reference_gate::canonical::Canonical, _: &[(&str, &[u8])]) -> bool {
        true
    }
    fn method_only(c: &reference_gate::canonical::Canonical, h: &[(&str, &[u8])]) -> bool {
        h.iter()
            .any(|(k, v)| *k == "mcp-method" && *v == c.message().method().as_bytes())
    }
    for (name, admit) in [
        (
            "skips binding",
            skips_binding as reference_gate::fuzzing::Admission,
        ),
        ("method only", method_only),
    ] {
        let (proxy, fwd) = fuzz_proxy();
        let caught = Binding::all()
            .iter()
            .filter(|m| check_binding_with(&proxy, &fwd, m, admit).is_err())
            .count();
        assert!(caught > 0, "the binding oracle missed a gate that {name}");
    }
    // Bytes a fuzzer would give decode to models, and the reference gate passes them all.
    for data in inputs(400, 16) {
        check_binding(&data).unwrap_or_else(|f| panic!("reference gate: {f}"));
    }
}

#[test]
fn the_roundtrip_oracle_catches_a_gate_forwarding_raw_bytes() {
    let (proxy, fwd) = faulty(Faults {
        forward_raw: true,
        ..Faults::default()
    });
    let caught = inputs(500, 64).any(|d| {
        let Ok(call) =
            <AllowedCall as arbitrary::Arbitrary>::arbitrary(&mut arbitrary::Unstructured::new(&d))
        else {
            return false;
        };
        check_roundtrip_with(&proxy, &fwd, &call).is_err()
    });
    assert!(caught);
    for d in inputs(500, 64) {
        check_roundtrip(&d).unwrap();
    }
}

fn lax_gate() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lax_gate.py");
    format!("python3 {} {{downstream_cmd}}", script.display())
}

#[test]
fn live_fuzzing_finds_a_smuggled_call_through_a_lax_gate_and_saves_a_failing_case() {
    if !python3("the lax gate fixture") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().to_str().unwrap();
    let out = Command::new(bin())
        .args(["fuzz", "--gate-stdio", &lax_gate(), "--seed", "7"])
        .args(["--iterations", "40", "--max-findings", "2", "--save", save])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("seed 7"), "{stderr}");
    let saved: Vec<_> = std::fs::read_dir(dir.path().join("fuzz"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 2, "{stderr}");
    // Each saved file is a valid case.
    let check = Command::new(bin())
        .args(["check-cases", save])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0));
    // Replayed against the lax gate: the same failures.
    let replay = Command::new(bin())
        .args([
            "run",
            "--gate-stdio",
            &lax_gate(),
            "--spec",
            "2025-11-25",
            "--cases",
            save,
            "--",
            "fuzz/",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("0 passed; 2 failed"), "{stdout}");
    // Against the reference gate they pass: the cases judge the gate, not the input.
    let clean = Command::new(bin())
        .args(["run", "--cases", save, "--", "fuzz/"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{stdout}");
}

#[test]
fn live_fuzzing_the_embedded_reference_gate_finds_nothing() {
    let out = Command::new(bin())
        .args(["fuzz", "--seed", "11", "--iterations", "300"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("300 iterations"), "{stderr}");
}

#[test]
fn personality_lanes_show_which_downstream_a_lax_gate_exposes() {
    if !python3("the lax gate fixture") {
        return;
    }
    // The lax gate reads duplicates last-wins, sees echo, and forwards the raw bytes.
    let (code, report) = run_with_report(
        &["--gate-stdio", &lax_gate(), "--spec", "2025-11-25"],
        &["--exact", "smuggling/dup-name-denied-then-allowed"],
    );
    assert_eq!(code, 1);
    let id = "smuggling/dup-name-denied-then-allowed";
    let trials: Vec<_> = report
        .results
        .iter()
        .filter(|t| t.id == id && t.verdict != TrialVerdict::Skip)
        .collect();
    assert_eq!(trials.len(), 5, "{trials:?}");
    let lane = |d: Option<&str>| {
        trials
            .iter()
            .find(|t| t.downstream.as_deref() == d)
            .unwrap_or_else(|| panic!("no trial behind {d:?}"))
    };
    let ran = |t: &crate::util::Trial| {
        t.findings
            .iter()
            .any(|f| f.check == Check::Canary && f.status == Status::Fail)
    };
    // Behind the strict witness: forwarded (a failure), but refused downstream.
    assert_eq!(lane(None).verdict, TrialVerdict::Fail);
    assert!(!ran(lane(None)));
    // Behind a first-wins downstream the denied tool RAN; behind last-wins it did not.
    assert!(ran(lane(Some("first-wins"))));
    assert!(!ran(lane(Some("last-wins"))));
}

/// Live fuzzing speaks a renaming gate's names (`--tool-name`): through a gate that decides on
/// the name the client called, the denied tool called by its new name runs, and is found;
/// without the mapping every input names a tool that gate does not have, and nothing is tested.
#[test]
fn live_fuzzing_spells_its_calls_the_way_a_renaming_gate_names_tools() {
    if !python3("the mapping gate fixture") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fuzz = |flags: &str, mapped: bool| {
        let gate = crate::mapping::mapping_gate(dir.path(), flags);
        let mut cmd = Command::new(bin());
        cmd.args([
            "fuzz",
            "--gate-stdio",
            &gate,
            "--seed",
            "5",
            "--spec",
            "2025-11-25",
        ])
        .args(["--iterations", "40", "--max-findings", "1"]);
        if mapped {
            cmd.args(["--tool-name", "lab_{tool}"]);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let broken = "--prefix lab_ --broken policy-on-exposed-name";
    let (code, stderr) = fuzz(broken, true);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("FINDING"), "{stderr}");
    let (code, stderr) = fuzz(broken, false);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = fuzz("--prefix lab_", true);
    assert_eq!(code, Some(0), "{stderr}");
}
