//! Tidy: the documents and the data stay in step with the code (as rust-analyzer's tidy test
//! does). ARCHITECTURE.md names every module and every case family; the README names only flags
//! that exist and every flag of `run`; requirement IDs quoted in the documents exist; the suite's
//! modules import each other without cycles. (The committed case schema is checked against the
//! code in `catalogue::schema_json_is_in_step_with_the_code`.)

use super::util::bin;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a source directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The text of ARCHITECTURE.md's section whose heading is `` ### `title` ``.
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    doc.split(&format!("### `{title}`"))
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section `{title}`"))
}

/// Every source file of both crates is named in ARCHITECTURE.md, so a new module cannot go
/// undescribed: a file at the top of `src/` by its path (`src/trial.rs`), a file in a folder
/// of `src/` in that folder's section, the gate's files in the `reference-gate/` section (a
/// folder there by its name, `front/`).
#[test]
fn architecture_names_every_module() {
    let doc = read("ARCHITECTURE.md");
    let mut missing = Vec::new();
    for krate in ["src", "reference-gate/src"] {
        let base = root().join(krate);
        let mut files = Vec::new();
        rust_files(&base, &mut files);
        for f in files {
            let rel = f
                .strip_prefix(&base)
                .expect("below the crate")
                .to_string_lossy()
                .replace('\\', "/");
            if matches!(rel.as_str(), "lib.rs" | "main.rs") {
                continue;
            }
            let (dir, file) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
            // A folder's own file (`mod.rs`) is named by the folder; a nested folder
            // (`transport/exchange/`) is described in its top folder's section.
            let (top, nested) = dir.split_once('/').unwrap_or((dir, ""));
            let wanted = match (file, nested) {
                ("mod.rs", "") => String::new(),
                ("mod.rs", nested) => format!("`{}/`", nested.rsplit('/').next().unwrap_or(nested)),
                (file, _) => format!("`{file}`"),
            };
            let named = match (krate, top) {
                ("src", "") => doc.contains(&format!("src/{file}")),
                ("src", top) => section(&doc, &format!("src/{top}/")).contains(&wanted),
                (_, "") => section(&doc, "reference-gate/").contains(&wanted),
                (_, top) => section(&doc, "reference-gate/").contains(&format!("`{top}/`")),
            };
            if !named {
                missing.push(format!("{krate}/{rel}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name these files: {missing:?}"
    );
}

/// The case families: every folder under `cases/` is named in ARCHITECTURE.md as `` `name/` ``,
/// and every family the document's `cases/` section names exists.
#[test]
fn architecture_lists_every_case_family() {
    let doc = read("ARCHITECTURE.md");
    let families: BTreeSet<String> = std::fs::read_dir(root().join("cases"))
        .expect("cases/")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(families.len() >= 15, "{families:?}");
    let named: BTreeSet<String> = section(&doc, "cases/")
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|s| s.strip_suffix('/'))
        .filter(|s| !s.is_empty() && !s.contains('/') && *s != "cases")
        .map(str::to_string)
        .collect();
    let undocumented: Vec<_> = families.difference(&named).collect();
    let stale: Vec<_> = named.difference(&families).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's case families: missing {undocumented:?}, no such folder {stale:?}"
    );
}

/// The flags each command takes, from its own `--help`.
fn flags_of(args: &[&str]) -> BTreeSet<String> {
    let out = Command::new(bin())
        .args(args)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{args:?} --help");
    long_flags(&String::from_utf8_lossy(&out.stdout))
}

fn long_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let before = text[..i].chars().next_back();
        if name.len() > 1 && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-') {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// Flags the README may name that are not this program's: cargo's, libtest's, an example's.
const OTHER_PROGRAMS_FLAGS: &[&str] = &[
    "--git",
    "--locked",
    "--path",
    "--root",
    "--release",
    "--workspace",
    "--test",
    "--test-threads",
    "--list",
    "--exact",
    "--format",
    "--help",
    "--version",
    // The example gate's own flags in a `--gate` command template.
    "--upstream",
    "--port",
];

/// The README names only flags that exist, and every flag of `run` (the command users start
/// with) is in it.
#[test]
fn readme_flags_are_the_programs() {
    let readme = long_flags(&read("README.md"));
    let mut known: BTreeSet<String> = OTHER_PROGRAMS_FLAGS.iter().map(|s| s.to_string()).collect();
    let commands: &[&[&str]] = &[
        &["run"],
        &["fuzz"],
        &["load"],
        &["bench"],
        &["witness"],
        &["matrix"],
        &["auth-issuer"],
        &["check-cases"],
        &["schema"],
        &["reference-gate"],
    ];
    let mut by_command = BTreeMap::new();
    for c in commands {
        let flags = flags_of(c);
        known.extend(flags.iter().cloned());
        by_command.insert(c.join(" "), flags);
    }
    let unknown: Vec<_> = readme.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "README.md names flags no command takes: {unknown:?}"
    );
    let undocumented: Vec<_> = by_command["run"]
        .iter()
        .filter(|f| !readme.contains(*f) && !OTHER_PROGRAMS_FLAGS.contains(&f.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "`run` flags the README does not name: {undocumented:?}"
    );
}

/// Requirement IDs quoted in the README, ARCHITECTURE.md and docs/ are in the catalogue: any
/// word that starts like a catalogue ID (`MCP-`, `GATE-`, ...: the prefixes the catalogue
/// uses) and ends in a number.
#[test]
fn quoted_requirement_ids_exist() {
    let known = mcp_gauntlet::case::requirements();
    let prefixes: BTreeSet<String> = known
        .keys()
        .filter_map(|id| id.split('-').next())
        .map(|p| format!("{p}-"))
        .collect();
    assert!(prefixes.len() >= 3, "{prefixes:?}");
    let (mut checked, mut unknown) = (0, BTreeSet::new());
    for doc in ["README.md", "ARCHITECTURE.md", "docs/case-format.md"] {
        let text = read(doc);
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            let id = word.trim_end_matches('-');
            let quoted = prefixes.iter().any(|p| id.starts_with(p.as_str()))
                && id.ends_with(|c: char| c.is_ascii_digit());
            if quoted {
                checked += 1;
                if !known.contains_key(id) {
                    unknown.insert(format!("{doc}: {id}"));
                }
            }
        }
    }
    assert!(
        checked >= 10,
        "only {checked} requirement IDs found in the documents"
    );
    assert!(unknown.is_empty(), "unknown requirement IDs: {unknown:?}");
}

/// Each crate's top-level modules import each other without cycles: data flows one way. An
/// import is any `crate::name` outside comments and unit tests.
#[test]
fn modules_import_without_cycles() {
    for krate in ["src", "reference-gate/src"] {
        let edges = imports(&root().join(krate));
        assert!(edges.len() >= 8, "{krate}: {edges:?}");
        let cyclic: Vec<&String> = edges
            .keys()
            .filter(|m| reaches(&edges, m, m, &mut BTreeSet::new()))
            .collect();
        assert!(
            cyclic.is_empty(),
            "{krate}: modules on an import cycle: {cyclic:?} (imports: {edges:?})"
        );
    }
}

/// Which top-level modules each top-level module of the crate at `base` names.
fn imports(base: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(base, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(base).expect("below the crate").to_path_buf();
        let top = rel
            .components()
            .next()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string()
            })
            .expect("a name");
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("source");
        // Unit tests may reach anywhere; comments and doc links are not imports.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                edges.entry(top.clone()).or_default().insert(name);
            }
        }
    }
    edges
}

/// Whether a path of imports leads from `from` to `to`.
fn reaches(
    edges: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    to: &str,
    seen: &mut BTreeSet<String>,
) -> bool {
    for next in edges.get(from).into_iter().flatten() {
        if next == to || (seen.insert(next.clone()) && reaches(edges, next, to, seen)) {
            return true;
        }
    }
    false
}

/// Every exit code of `src/exit.rs` is a row of the README's exit-code table, and the table
/// has no other: the codes are part of the command-line contract.
#[test]
fn readme_exit_codes_are_the_programs() {
    let code: BTreeSet<String> = read("src/exit.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("pub const ")?.split_once(": u8 = "))
        .map(|(_, v)| v.trim_end_matches(';').to_string())
        .collect();
    let readme = read("README.md");
    let table = readme
        .split("### Exit codes")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .expect("README.md has an Exit codes section");
    let documented: BTreeSet<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split_once(" |"))
        .map(|(n, _)| n.to_string())
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(code.len(), 6, "{code:?}");
    assert_eq!(code, documented);
}
