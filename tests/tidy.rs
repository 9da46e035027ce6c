//! Tidy: the documents and the data stay in step with the code (as rust-analyzer's tidy test
//! does). ARCHITECTURE.md names every module and every case family; the README names only flags
//! that exist and every flag of `run`; requirement IDs quoted in the documents exist; the suite's
//! modules import each other without cycles, in every folder too, and keep the architecture's
//! invariants; every source file opens with a `//!` line. (The committed case schema is checked against the
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
/// silent empty answer. Nowhere in either crate does `serde_json::to_…(…)` end in
/// `.unwrap_or_default()`.
#[test]
fn serializations_never_fall_back_to_nothing() {
    let found = serializations_defaulted(&source_texts(&["src", "reference-gate/src"]));
    assert!(
        found.is_empty(),
        "serializations that fall back to nothing: {found:?}"
    );
}

/// `file:line` of each `serde_json::to_…(…)` whose result is `.unwrap_or_default()`ed, the
/// call possibly spread over a few lines.
fn serializations_defaulted(texts: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, text) in texts {
        for (i, _) in text.match_indices("serde_json::to_") {
            let line = text[..i].matches('\n').count() + 1;
            // The statement the call is in: up to its `;` or the end of its block.
            let rest = &text[i..];
            let end = rest.find([';', '{', '}']).unwrap_or(rest.len());
            if rest[..end].contains(".unwrap_or_default()") {
                out.push(format!("{name}:{line}"));
            }
        }
    }
    out
}

/// A crate's modules and what each one's code names: module paths (`transport::exchange`), the
/// module paths each names, and the other paths its code mentions (`std::net::TcpStream`).
#[derive(Debug, Default)]
struct ModuleGraph {
    /// Module path -> the module paths its code imports (resolved, possibly past a module into
    /// its items: `case::model::Case`).
    imports: BTreeMap<String, BTreeSet<String>>,
    /// Module path -> its code, comments and unit tests left out.
    code: BTreeMap<String, String>,
}

impl ModuleGraph {
    fn of(base: &Path) -> ModuleGraph {
        let mut files = Vec::new();
        rust_files(base, &mut files);
        let mut texts = Vec::new();
        for f in files {
            let rel = f.strip_prefix(base).expect("below the crate");
            let text = std::fs::read_to_string(&f).expect("source");
            texts.push((module_path(rel), text));
        }
        ModuleGraph::from_texts(texts)
    }

    /// The graph of `(module path, source)` pairs (`mod.rs` is its folder's module; the crate
    /// root is `""`).
    fn from_texts(texts: Vec<(String, String)>) -> ModuleGraph {
        let mut graph = ModuleGraph::default();
        for (module, text) in texts {
            // Unit tests may reach anywhere; comments and doc links are not imports.
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or("")
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let targets = paths_named(&code)
                .into_iter()
                .filter_map(|p| resolve(&module, &p))
                .collect();
            graph.imports.insert(module.clone(), targets);
            graph.code.insert(module, code);
        }
        graph
    }

    /// The direct children of `folder` (a module path; `""` the crate root) and, for each, the
    /// siblings its code (or its descendants' code) imports.
    fn edges_in(&self, folder: &str) -> BTreeMap<String, BTreeSet<String>> {
        let child_of = |path: &str| -> Option<String> {
            let rest = if folder.is_empty() {
                path
            } else {
                path.strip_prefix(folder)?.strip_prefix("::")?
            };
            let child = rest.split("::").next()?;
            (!child.is_empty()).then(|| child.to_string())
        };
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, targets) in &self.imports {
            let Some(from) = child_of(module) else {
                continue;
            };
            if folder.is_empty() && (from == "lib" || from == "main") {
                continue;
            }
            for t in targets {
                if let Some(to) = child_of(t) {
                    // A name that is not a module here (an item of the folder's own module).
                    if to != from && self.is_module(folder, &to) {
                        edges.entry(from.clone()).or_default().insert(to);
                    }
                }
            }
        }
        edges
    }

    /// Whether `folder::name` is one of the crate's modules.
    fn is_module(&self, folder: &str, name: &str) -> bool {
        let path = if folder.is_empty() {
            name.to_string()
        } else {
            format!("{folder}::{name}")
        };
        self.imports
            .keys()
            .any(|m| *m == path || m.starts_with(&format!("{path}::")))
    }

    /// Every folder's modules that lie on an import cycle among their siblings, as
    /// `folder: module`.
    fn cycles(&self) -> Vec<String> {
        let folders: BTreeSet<String> = self
            .imports
            .keys()
            .map(|m| m.rsplit_once("::").map_or("", |(f, _)| f).to_string())
            .collect();
        let mut out = Vec::new();
        for folder in folders {
            let edges = self.edges_in(&folder);
            for m in edges.keys() {
                if reaches(&edges, m, m, &mut BTreeSet::new()) {
                    out.push(format!("{folder}: {m}"));
                }
            }
        }
        out
    }

    /// Each invariant `(module, modules it never imports, paths it never names)` that the code
    /// breaks, as `module -> what`.
    fn broken_invariants(&self, rules: &[(&str, &[&str], &[&str])]) -> Vec<String> {
        let top = self.edges_in("");
        let mut out = Vec::new();
        for (module, never, never_named) in rules {
            assert!(self.is_module("", module), "no module `{module}`");
            for n in *never {
                if top.get(*module).is_some_and(|t| t.contains(*n)) {
                    out.push(format!("{module} -> {n}"));
                }
            }
            for (m, code) in &self.code {
                let inside = m == module || m.starts_with(&format!("{module}::"));
                for path in *never_named {
                    if inside && code.contains(path) {
                        out.push(format!("{m} names {path}"));
                    }
                }
            }
        }
        out
    }
}

/// A source file's module path from its path below the crate root (`transport/exchange/mod.rs`
/// is `transport::exchange`; `lib.rs` is `""`).
fn module_path(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && !(parts.is_empty() && matches!(stem, "lib" | "main")) {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// The paths the code names from `crate::`, `super::` and `self::`, as written
/// (`super::exchange::parse`).
fn paths_named(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(path.trim_end_matches(':').to_string());
        }
    }
    out
}

/// `path` (from `crate::`, `super::` or `self::`) as a path from the crate root, read in
/// `module`; `None` when it climbs above the root.
fn resolve(module: &str, path: &str) -> Option<String> {
    let mut here: Vec<&str> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").collect()
    };
    let mut parts = path.split("::").peekable();
    match parts.peek() {
        Some(&"crate") => {
            here.clear();
            parts.next();
        }
        Some(&"self") => {
            parts.next();
        }
        _ => {}
    }
    while parts.peek() == Some(&"super") {
        parts.next();
        here.pop()?;
    }
    let rest: Vec<&str> = parts.filter(|p| !p.is_empty()).collect();
    Some(here.into_iter().chain(rest).collect::<Vec<_>>().join("::"))
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

/// The tidy rules catch what they are for: a planted cycle inside a folder, a planted import
/// that breaks an invariant, a planted path a module must not name, a file without its `//!`
/// line, and a serialization that falls back to nothing.
#[test]
fn the_rules_fail_on_planted_violations() {
    let graph = |files: &[(&str, &str)]| {
        ModuleGraph::from_texts(
            files
                .iter()
                .map(|(m, t)| (m.to_string(), t.to_string()))
                .collect(),
        )
    };
    // A folder whose two files use each other (as transport/http.rs and exchange/ once did).
    let g = graph(&[
        ("transport", "//! t\npub mod http;\npub mod exchange;"),
        ("transport::http", "//! h\nuse super::exchange::parse;"),
        (
            "transport::exchange",
            "//! e\nuse crate::transport::http::get;",
        ),
        ("case", "//! c"),
    ]);
    assert_eq!(
        g.cycles(),
        ["transport: exchange", "transport: http"],
        "{g:?}"
    );
    // Without the back edge, no cycle; a test module's imports never count.
    let g = graph(&[
        ("transport", "//! t"),
        (
            "transport::http",
            "//! h\n#[cfg(test)]\nuse super::exchange::parse;",
        ),
        (
            "transport::exchange",
            "//! e\nuse crate::transport::http::get;",
        ),
    ]);
    assert!(g.cycles().is_empty(), "{g:?}");
    // The invariants: a transport that judges, a case that opens a socket.
    let g = graph(&[
        ("transport", "//! t\nuse crate::verdict::judge;"),
        ("verdict", "//! v\nuse crate::case::Case;"),
        (
            "case",
            "//! c\nfn f() { let _ = std::net::TcpStream::connect(\"x\"); }",
        ),
        ("witness", "//! w"),
    ]);
    assert_eq!(
        g.broken_invariants(INVARIANTS),
        ["case names std::net", "transport -> verdict"]
    );
    // A file without its doc line.
    let texts = [
        ("a.rs".to_string(), "//! A.\nfn a() {}".to_string()),
        ("b.rs".to_string(), "// B.\nfn b() {}".to_string()),
        ("c.rs".to_string(), String::new()),
    ];
    assert_eq!(without_doc_line(&texts), ["b.rs", "c.rs"]);
    // A serialization that falls back to nothing, on one line or spread over two.
    let texts = [
        (
            "a.rs".to_string(),
            "//! A.\nfn a(v: &Value) -> String {\n    serde_json::to_string(v).unwrap_or_default()\n}".to_string(),
        ),
        (
            "b.rs".to_string(),
            "//! B.\nfn b(v: &Value) -> Vec<u8> {\n    serde_json::to_vec(v)\n        .unwrap_or_default()\n}\nfn c(v: &Value) -> String {\n    serde_json::to_string(v).expect(\"a value serializes\")\n}".to_string(),
        ),
    ];
    assert_eq!(serializations_defaulted(&texts), ["a.rs:3", "b.rs:3"]);
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
