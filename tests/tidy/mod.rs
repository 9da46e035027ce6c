//! Tidy: the documents and the data stay in step with the code (as rust-analyzer's tidy test
//! does). ARCHITECTURE.md names every module and every case family; the README names only flags
//! that exist and every flag of `run`; requirement IDs quoted in the documents exist; the suite's
//! modules import each other without cycles, in every folder too, and keep the architecture's
//! invariants; every source file opens with a `//!` line. (The committed case schema is checked against the
//! code in `catalogue::schema_json_is_in_step_with_the_code`.)

mod source;

use self::source::{serializations_defaulted, ModuleGraph};
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
        &["check-targets"],
        &["campaign"],
        &["campaign", "merge"],
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

/// Each crate's modules import each other without cycles, at every level: the top-level modules
/// of `src/` (data flows one way), and the files of each folder among themselves (`transport/`'s
/// `http.rs` must not reach up into `exchange/`, which uses it). An import is any path from
/// `crate::`, `super::` or `self::` outside comments and unit tests.
#[test]
fn modules_import_without_cycles() {
    for krate in ["src", "reference-gate/src"] {
        let graph = ModuleGraph::of(&root().join(krate));
        assert!(graph.edges_in("").len() >= 8, "{krate}: {graph:?}");
        let cyclic = graph.cycles();
        assert!(
            cyclic.is_empty(),
            "{krate}: modules on an import cycle (folder: modules): {cyclic:?}"
        );
    }
}

/// The architecture's invariants, read from the import graph: each named module never imports
/// the modules, nor names the paths, listed beside it. ARCHITECTURE.md states each one.
const INVARIANTS: &[(&str, &[&str], &[&str])] = &[
    // "nothing in `case/` does network or process I/O": the case model is data.
    (
        "case",
        &[
            "transport",
            "witness",
            "target",
            "run",
            "trial",
            "verdict",
            "report",
            "fuzz",
            "load",
            "bench",
        ],
        &["std::net", "tokio::net", "std::process", "tokio::process"],
    ),
    // "transports never decide pass or fail".
    ("transport", &["verdict", "report", "trial", "run"], &[]),
    // "verdicts never parse with the gate's parser, and never call into the witness's checks".
    ("verdict", &["witness"], &["reference_gate::"]),
    // "the witness ... shares no parser with `reference-gate/`".
    ("witness", &["verdict"], &["reference_gate::canonical"]),
];

#[test]
fn architecture_invariants_hold_in_the_import_graph() {
    let graph = ModuleGraph::of(&root().join("src"));
    let broken = graph.broken_invariants(INVARIANTS);
    assert!(
        broken.is_empty(),
        "architecture invariants broken: {broken:#?}"
    );
}

/// The modules a sentence "LEAD `a`, `b`; `c` and `d` are the crate's own" names: the public
/// ones, then the crate's own.
fn modules_listed(text: &str, lead: &str) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
    let named = |text: &str| -> BTreeSet<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .map(str::to_string)
            .collect()
    };
    let (_, rest) = text.split_once(lead)?;
    let (public, rest) = rest.split_once(';')?;
    let (own, _) = rest.split_once("are the crate's own")?;
    Some((named(public), named(own)))
}

/// The modules a `lib.rs` declares with `prefix` (`pub mod `, `pub(crate) mod `, `mod `).
fn declared_modules(lib: &str, prefix: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| l.strip_prefix(prefix)?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// The library's public modules are the ones ARCHITECTURE.md's API boundary lists, and the
/// crate's own modules it names are not public: a module made public, or one made private,
/// changes the document too.
#[test]
fn the_public_modules_are_the_api_boundarys() {
    let doc = read("ARCHITECTURE.md");
    let boundary = doc
        .split("## API boundary")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("ARCHITECTURE.md has an API boundary section");
    let (public, own) = modules_listed(boundary, "the public modules are")
        .expect("the section lists the public modules, then the crate's own");
    let lib = read("src/lib.rs");
    assert_eq!(public, declared_modules(&lib, "pub mod "), "public modules");
    let private = declared_modules(&lib, "mod ");
    assert!(
        !own.is_empty() && own.is_subset(&private),
        "the crate's own modules {own:?} are not all private in src/lib.rs ({private:?})"
    );
}

/// The reference gate deploys on its own, so its public surface is a promise too: the modules
/// `reference-gate/src/lib.rs` makes public (`pub mod`) and those it keeps (`pub(crate) mod`) are
/// the ones ARCHITECTURE.md's `reference-gate/` section lists ("Its public modules are ...; ...
/// are the crate's own"), and its lib.rs warns of a `pub` item no other crate can reach.
#[test]
fn the_gates_public_modules_are_the_documented_ones() {
    let doc = read("ARCHITECTURE.md");
    let (public, own) = modules_listed(section(&doc, "reference-gate/"), "Its public modules are")
        .expect("the reference-gate/ section lists the gate's public modules, then its own");
    let lib = read("reference-gate/src/lib.rs");
    assert_eq!(
        public,
        declared_modules(&lib, "pub mod "),
        "the gate's public modules"
    );
    assert_eq!(
        own,
        declared_modules(&lib, "pub(crate) mod "),
        "the gate's own modules"
    );
    assert!(
        lib.contains("#![warn(unreachable_pub)]"),
        "reference-gate/src/lib.rs no longer warns of unreachable pub items"
    );
}

/// Every Rust source file opens with a `//!` line saying what it is for.
#[test]
fn every_source_file_opens_with_a_doc_line() {
    let mut texts = source_texts(&["src", "reference-gate/src", "tests", "fuzz/fuzz_targets"]);
    texts.push(("build.rs".into(), read("build.rs")));
    assert!(texts.len() > 100, "{}", texts.len());
    let bare = without_doc_line(&texts);
    assert!(
        bare.is_empty(),
        "files without a `//!` first line: {bare:?}"
    );
}

/// `(path from the repository root, text)` of every Rust file under `dirs`.
fn source_texts(dirs: &[&str]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for dir in dirs {
        rust_files(&root().join(dir), &mut files);
    }
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(root()).expect("in the tree");
            let text = std::fs::read_to_string(f).expect("source");
            (rel.display().to_string(), text)
        })
        .collect()
}

/// The files whose first line is not a `//!` line.
fn without_doc_line(texts: &[(String, String)]) -> Vec<String> {
    texts
        .iter()
        .filter(|(_, t)| !t.lines().next().is_some_and(|l| l.starts_with("//!")))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Serializing what cannot fail to serialize (a JSON value, a string, the suite's own report
/// types) says so with `expect`: a fallback to an empty string or body would turn a bug into a
/// silent empty answer. Nowhere in either crate does a serialization (`serde_json::to_…(…)`,
/// `yaml_serde::to_string(…)`) end in `.unwrap_or_default()`.
#[test]
fn serializations_never_fall_back_to_nothing() {
    let found = serializations_defaulted(&source_texts(&["src", "reference-gate/src"]));
    assert!(
        found.is_empty(),
        "serializations that fall back to nothing: {found:?}"
    );
}

/// The graph of planted `(module path, source)` pairs.
fn planted(files: &[(&str, &str)]) -> ModuleGraph {
    ModuleGraph::from_texts(
        files
            .iter()
            .map(|(m, t)| (m.to_string(), t.to_string()))
            .collect(),
    )
}

/// A folder's import cycles are caught however they are written: a plain import, a grouped
/// one, a parent's name brought in by a glob, code after a test module; a test module's
/// imports, strings and comments never make one.
#[test]
fn planted_cycles_are_caught() {
    let both = ["transport: exchange", "transport: http"];
    // A folder whose two files use each other (as transport/http.rs and exchange/ once did).
    let g = planted(&[
        ("transport", "//! t\npub mod http;\npub mod exchange;"),
        ("transport::http", "//! h\nuse super::exchange::parse;"),
        (
            "transport::exchange",
            "//! e\nuse crate::transport::http::get;",
        ),
        ("case", "//! c"),
    ]);
    assert_eq!(g.cycles(), both, "{g:?}");
    // The same through grouped imports.
    let g = planted(&[
        ("transport", "//! t"),
        ("transport::http", "//! h\nuse super::{exchange::parse, x};"),
        (
            "transport::exchange",
            "//! e\nuse crate::{case::Case, transport::{self, http::{get, put as p}}};",
        ),
        ("case", "//! c"),
    ]);
    assert_eq!(g.cycles(), both, "{g:?}");
    // Without the back edge, no cycle: a test module's imports never count, nor a path in a
    // string or a comment; code after the test module does.
    let exchange = (
        "transport::exchange",
        "//! e\nuse crate::transport::http::get;",
    );
    let g = planted(&[
        ("transport", "//! t"),
        (
            "transport::http",
            "//! h\n#[cfg(test)]\nmod tests {\n    use super::super::exchange::parse;\n}\nconst S: &str = \"super::exchange::x\";\n// super::exchange::y\nconst C: char = '\"';\nfn f() {}",
        ),
        exchange,
    ]);
    assert!(g.cycles().is_empty(), "{g:?}");
    let g = planted(&[
        ("transport", "//! t"),
        (
            "transport::http",
            "//! h\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn f() { super::exchange::parse(); }",
        ),
        exchange,
    ]);
    assert_eq!(g.cycles(), both, "{g:?}");
}

/// Import cycles through names a module does not write out: a parent's `use` seen through a
/// child's glob, a sibling named through the glob, a parent's re-export by a relative path; and
/// what never makes one: a test-only module, a test item whose signature holds a `;`.
#[test]
fn planted_cycles_through_globs_and_reexports_are_caught() {
    // A parent's `use self::over_http::handshake` seen by a child through `use super::*` (as
    // exchange/clients.rs reached over_http.rs): an edge only when the child uses the name.
    let folder = |clients: &str| {
        planted(&[
            (
                "exchange",
                "//! e\nmod clients;\nmod over_http;\nuse self::over_http::{handshake, run};",
            ),
            ("exchange::clients", clients),
            (
                "exchange::over_http",
                "//! o\nuse super::clients;\nuse super::*;",
            ),
        ])
    };
    let g = folder("//! c\nuse super::*;\nfn f() { handshake(); }");
    assert_eq!(g.cycles(), ["exchange: clients", "exchange: over_http"]);
    assert!(folder("//! c\nuse super::*;\nfn f() { handshakes(); }")
        .cycles()
        .is_empty());
    // A sibling named through the glob (`over_http::run()`), and a name the parent re-exports
    // by a relative path (`pub use model::Coding;`, read as `super::Coding` in `body`).
    let g = folder("//! c\nuse super::*;\nfn f() { over_http::run(); }");
    assert_eq!(g.cycles(), ["exchange: clients", "exchange: over_http"]);
    let g = planted(&[
        (
            "case",
            "//! c\nmod body;\nmod model;\npub use model::Coding;",
        ),
        ("case::body", "//! b\nfn f(c: super::Coding) {}"),
        ("case::model", "//! m\nuse super::body::Body;"),
    ]);
    assert_eq!(g.cycles(), ["case: body", "case: model"]);
    // A module declared for tests only is no part of the graph; a test item whose signature
    // holds a `;` is left out whole.
    let g = planted(&[
        (
            "",
            "//! l\n#[cfg(test)]\nmod testing;\nmod a;\nmod b;\nmod c;",
        ),
        ("a", "//! a\nfn t() { crate::testing::rows(); }"),
        ("testing", "//! t\nuse crate::a::x;"),
        (
            "b",
            "//! b\n#[cfg(test)]\nfn t() -> [u8; 4] { crate::c::four() }\nfn f() {}",
        ),
        ("c", "//! c\nuse crate::b::f;"),
    ]);
    assert!(g.cycles().is_empty(), "{g:?}");
}

/// An invariant broken by a planted import or path is caught (a grouped import too; a path in a
/// string or a comment is not one).
#[test]
fn planted_invariant_breaks_are_caught() {
    // A transport that judges, a case that opens a socket.
    let g = planted(&[
        ("transport", "//! t\nuse crate::{case, verdict::judge};"),
        ("verdict", "//! v\nuse crate::case::Case;"),
        (
            "case",
            "//! c\nuse std::{io, net::TcpStream};\nconst S: &str = \"tokio::net\";\n// tokio::process",
        ),
        ("witness", "//! w\nfn f() { let _ = std::process::Command::new(\"x\"); }"),
    ]);
    assert_eq!(
        g.broken_invariants(INVARIANTS),
        ["case names std::net", "transport -> verdict"]
    );
}

/// A file without its `//!` line and serializations that fall back to nothing (with braces and
/// parentheses in their arguments, with YAML too) are caught.
#[test]
fn planted_bare_files_and_defaulted_serializations_are_caught() {
    let texts = [
        ("a.rs".to_string(), "//! A.\nfn a() {}".to_string()),
        ("b.rs".to_string(), "// B.\nfn b() {}".to_string()),
        ("c.rs".to_string(), String::new()),
    ];
    assert_eq!(without_doc_line(&texts), ["b.rs", "c.rs"]);
    // A serialization that falls back to nothing: on one line, spread over two, with braces
    // and a `)` in a string in its arguments, in YAML; `expect` is what passes.
    let texts = [
        (
            "a.rs".to_string(),
            "//! A.\nfn a(v: &Value) -> String {\n    serde_json::to_string(v).unwrap_or_default()\n}".to_string(),
        ),
        (
            "b.rs".to_string(),
            "//! B.\nfn b(v: &Value) -> Vec<u8> {\n    serde_json::to_vec(v)\n        .unwrap_or_default()\n}\nfn c(v: &Value) -> String {\n    serde_json::to_string(v).expect(\"a value serializes\")\n}".to_string(),
        ),
        (
            "c.rs".to_string(),
            "//! C.\nfn c() -> String {\n    serde_json::to_string(&json!({\"a\": \")\"}))\n        .unwrap_or_default()\n}\nfn d(b: &B) -> String {\n    yaml_serde::to_string(b).unwrap_or_default()\n}".to_string(),
        ),
    ];
    assert_eq!(
        serializations_defaulted(&texts),
        ["a.rs:3", "b.rs:3", "c.rs:3", "c.rs:7"]
    );
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

/// The action's exit-code table (`action/run.sh`: `N) outcome=NAME ;;`) has a row for every
/// code of `src/exit.rs` and no other, each named after its constant (`SETUP_FAILED` is
/// `setup-failed`; `SUCCESS` and `CASES_FAILED` are `passed` and `failed`), so a new code cannot
/// reach a workflow as "crashed".
#[test]
fn the_actions_exit_table_is_the_programs() {
    let code: BTreeMap<String, String> = read("src/exit.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("pub const ")?.split_once(": u8 = "))
        .map(|(name, v)| {
            let outcome = match name {
                "SUCCESS" => "passed".to_string(),
                "CASES_FAILED" => "failed".to_string(),
                other => other.to_ascii_lowercase().replace('_', "-"),
            };
            (v.trim_end_matches(';').to_string(), outcome)
        })
        .collect();
    let action: BTreeMap<String, String> = read("action/run.sh")
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.trim_start().split_once(") outcome=")?;
            let name = rest.strip_suffix(" ;;")?;
            n.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| (n.to_string(), name.to_string()))
        })
        .collect();
    assert_eq!(code.len(), 6, "{code:?}");
    assert_eq!(
        action, code,
        "action/run.sh's exit table against src/exit.rs"
    );
}
