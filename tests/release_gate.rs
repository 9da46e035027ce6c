//! The deployable gate carries no test defects.
//!
//! `cargo build --release -p reference-gate` builds the gate as a user gets it: the `faults`
//! feature off. Then the fault types (`Faults`, `Leniency`, `AuthFaults`) do not exist with
//! fields, their switches are constant `false`, and the code only a fault reaches is not
//! compiled (`#[cfg(feature = "faults")]`): the build itself shows no branch can ask for a fault.
//! This test shows the binary is that build: none of the fault-only functions and not the
//! marker that any fault prints. The same names are looked for in this test binary, which
//! carries the faults (the broken-gate tests switch them on), so the search can find them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Names that only fault-injection code puts into a binary (functions, in the symbol table and
/// the debug line tables of the release profile), and the marker text.
const FAULT_ONLY: &[&str] = &[
    "parse_leniently",
    "parse_with_faults",
    "loosen_envelope",
    "batch_fault",
    "with_faults",
    "FAULT_HEADERS",
    reference_gate::faults::FAULTS_MARKER,
];

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Build the gate's own binary the way a user does and return its path.
fn build_release_gate() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // The workspace's target directory (this test's scratch directory is `<target>/tmp`), so
    // the dependencies already built are reused.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .to_path_buf();
    let mut cmd = Command::new(cargo);
    // The environment cargo gives a test (CARGO_MANIFEST_DIR, OUT_DIR, ...) is not a user's:
    // build scripts that watch those variables would rebuild, here and in the next `cargo test`.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if (key.starts_with("CARGO_") && key != "CARGO_HOME") || key == "OUT_DIR" {
            cmd.env_remove(key.as_ref());
        }
    }
    let out = cmd
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--release",
            "--locked",
            "--offline",
            "-p",
            "reference-gate",
            "--bin",
            "reference-gate",
            "--message-format",
            "json",
        ])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build -p reference-gate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The executable cargo reports for the `reference-gate` binary target.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "reference-gate")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the reference-gate executable")
}

#[test]
fn release_gate_binary_has_no_fault_injection() {
    let control = std::fs::read(std::env::current_exe().expect("own path")).expect("own binary");
    for needle in FAULT_ONLY {
        assert!(
            contains(&control, needle),
            "the test binary (faults on) should contain {needle:?}: the search is blind to it"
        );
    }
    let gate = build_release_gate();
    let bytes = std::fs::read(&gate).expect("the gate binary");
    assert!(
        contains(&bytes, "canonical"),
        "{} looks like no gate binary",
        gate.display()
    );
    let found: Vec<&str> = FAULT_ONLY
        .iter()
        .copied()
        .filter(|n| contains(&bytes, n))
        .collect();
    assert!(
        found.is_empty(),
        "{} carries fault-injection code: {found:?}",
        gate.display()
    );
}
