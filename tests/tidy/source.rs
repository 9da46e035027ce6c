//! What tidy reads in Rust source: the code with its comments, literals and unit tests blanked
//! out (`code_only`), the paths its `use` declarations name with their braces expanded
//! (`use_paths`), and the import graph of a crate's modules built from both (`ModuleGraph`),
//! which follows names that a glob import (`use super::*`) brings in from a parent's own `use`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `text` with every comment and every string, byte-string, raw-string and char literal blanked
/// (a string becomes `""`, a char `' '`); newlines are kept, so line numbers still hold.
pub fn blank_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let after_ident = i > 0 && is_ident(c[i - 1]);
        let next = c.get(i + 1).copied();
        let end = match c[i] {
            '/' if next == Some('/') => (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len()),
            '/' if next == Some('*') => block_comment_end(&c, i),
            'r' | 'b' if !after_ident && raw_string_body(&c, i).is_some() => {
                let (hashes, body) = raw_string_body(&c, i).unwrap_or((0, i));
                raw_string_end(&c, body, hashes)
            }
            '"' => string_end(&c, i + 1),
            '\'' if next == Some('\\') => {
                // An escaped char: `'\n'`, `'\''`, `'\u{1F600}'`.
                let from = (i + 3).min(c.len());
                (from..c.len())
                    .find(|&j| c[j] == '\'')
                    .map_or(c.len(), |j| j + 1)
            }
            '\'' if c.get(i + 2) == Some(&'\'') => i + 3,
            ch => {
                out.push(ch);
                i += 1;
                continue;
            }
        };
        let blank = match c[i] {
            '/' => "",
            '\'' => "' '",
            _ => "\"\"",
        };
        out.push_str(blank);
        out.extend(c[i..end.min(c.len())].iter().filter(|&&ch| ch == '\n'));
        i = end.max(i + 1);
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The index just past the block comment (nested ones too) that starts at `i`.
fn block_comment_end(c: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    c.len()
}

/// At `r"`, `r#"`, `br"`...: the number of `#` and the index of the first character inside.
fn raw_string_body(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = match (c[i], c.get(i + 1)) {
        ('b', Some('r')) => i + 2,
        ('r', _) => i + 1,
        _ => return None,
    };
    let start = j;
    while c.get(j) == Some(&'#') {
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((j - start, j + 1))
}

fn raw_string_end(c: &[char], mut j: usize, hashes: usize) -> usize {
    while j < c.len() {
        if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
            return j + 1 + hashes;
        }
        j += 1;
    }
    c.len()
}

/// The index just past the closing quote of a string whose first character is at `j`.
fn string_end(c: &[char], mut j: usize) -> usize {
    while j < c.len() {
        match c[j] {
            '\\' => j += 2,
            '"' => return j + 1,
            _ => j += 1,
        }
    }
    c.len()
}

/// Blanked `code` (see [`blank_literals`]) without the items marked `#[cfg(test)]`: the
/// attribute and its item, up to the item's `;` or its closing brace. Code after a test module
/// stays.
pub fn without_tests(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        // Braces count for the item's end; a `;` ends it only outside every bracket
        // (`fn f() -> [u8; 4] {` goes on to its body).
        let (mut depth, mut inner) = (0usize, 0usize);
        let mut end = item.len();
        for (k, ch) in item.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' if depth > 0 => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                '(' | '[' => inner += 1,
                ')' | ']' => inner = inner.saturating_sub(1),
                ';' if depth == 0 && inner == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        out.extend(item[..end].chars().filter(|&ch| ch == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The code of a source text as tidy reads it: no comments, no literals, no unit tests.
pub fn code_only(text: &str) -> String {
    without_tests(&blank_literals(text))
}

/// Every path the `use` declarations of `code` (as [`code_only`] gives it) name, braces
/// expanded, with the name each brings into scope: `use crate::{a::{self, B}, c as d}` gives
/// `(crate::a, a)`, `(crate::a::B, B)` and `(crate::c, d)`; a glob names `*`.
pub fn use_paths(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("use") {
        let before = code[..at].chars().next_back();
        let after = code[at + 3..].chars().next();
        if before.is_some_and(is_ident) || !after.is_some_and(char::is_whitespace) {
            continue;
        }
        let Some(len) = code[at..].find(';') else {
            continue;
        };
        let tree: String = code[at + 3..at + len]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let tree = tree
            .replace(" ::", "::")
            .replace(":: ", "::")
            .replace(" {", "{")
            .replace("{ ", "{")
            .replace(" }", "}")
            .replace(" ,", ",");
        expand_use(tree.trim_start_matches("::"), "", &mut out);
    }
    out
}

fn expand_use(tree: &str, prefix: &str, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head = format!("{prefix}{}", &tree[..open]);
        let inner = tree[open + 1..]
            .strip_suffix('}')
            .unwrap_or(&tree[open + 1..]);
        for item in split_top_level(inner) {
            expand_use(item, &head, out);
        }
        return;
    }
    let (leaf, alias) = match tree.split_once(" as ") {
        Some((l, a)) => (l.trim(), Some(a.trim())),
        None => (tree, None),
    };
    let path = if leaf == "self" {
        prefix.trim_end_matches("::").to_string()
    } else {
        format!("{prefix}{leaf}")
    };
    let name = alias
        .map(str::to_string)
        .unwrap_or_else(|| path.rsplit("::").next().unwrap_or("").to_string());
    out.push((path, name));
}

/// `a, b::{c, d}, e` split at the commas outside braces.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (k, ch) in s.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The paths the code names from `crate::`, `super::` and `self::`, as written
/// (`super::exchange::parse`); grouped imports are read by [`use_paths`].
fn paths_named(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':') {
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

/// Whether `word` occurs in `code` as a whole identifier.
fn names_word(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// A crate's modules and what each one's code names: module paths (`transport::exchange`), the
/// module paths each imports, and the other paths its code mentions (`std::net::TcpStream`).
#[derive(Debug, Default)]
pub struct ModuleGraph {
    /// Module path -> the module paths its code imports (resolved, possibly past a module into
    /// its items: `case::model::Case`).
    imports: BTreeMap<String, BTreeSet<String>>,
    /// Module path -> its code as [`code_only`] gives it, then every path its `use`
    /// declarations name, one a line.
    code: BTreeMap<String, String>,
}

impl ModuleGraph {
    /// The library's modules below `base` (a binary's `main.rs` is a crate of its own).
    pub fn of(base: &Path) -> ModuleGraph {
        let mut files = Vec::new();
        super::rust_files(base, &mut files);
        let mut texts = Vec::new();
        for f in files {
            let rel = f.strip_prefix(base).expect("below the crate");
            if rel == Path::new("main.rs") || rel.starts_with("bin") {
                continue;
            }
            let text = std::fs::read_to_string(&f).expect("source");
            texts.push((module_path(rel), text));
        }
        ModuleGraph::from_texts(texts)
    }

    /// The graph of `(module path, source)` pairs (`mod.rs` is its folder's module; the crate
    /// root is `""`). Modules declared only for tests (`#[cfg(test)] mod testing;`) are left
    /// out. A path into a module counts as an import of it, and also of whatever that module's
    /// own `use` declarations bring in under the name the path ends with (`super::Body`, with
    /// `pub use body::Body;` above, imports `body`); a glob (`use super::*`) brings in every
    /// such name the module's code uses, and the sibling modules its code names (`over_http::`).
    pub fn from_texts(texts: Vec<(String, String)>) -> ModuleGraph {
        let test_only: BTreeSet<String> = texts
            .iter()
            .flat_map(|(m, t)| test_modules(t).into_iter().map(move |c| join(m, &c)))
            .collect();
        let texts: Vec<(String, String)> = texts
            .into_iter()
            .filter(|(m, _)| {
                !test_only
                    .iter()
                    .any(|t| m == t || m.starts_with(&format!("{t}::")))
            })
            .collect();
        let modules: BTreeSet<String> = texts.iter().map(|(m, _)| m.clone()).collect();
        let mut graph = ModuleGraph::default();
        // Module -> (what each of its `use` declarations names, resolved; the name it binds).
        let mut uses: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        for (module, text) in texts {
            let code = code_only(&text);
            let declared = use_paths(&code);
            let resolve_here = |p: &str| resolve(&module, p, &modules);
            let targets = paths_named(&code)
                .iter()
                .chain(declared.iter().map(|(p, _)| p))
                .filter_map(|p| resolve_here(p))
                .collect();
            graph.imports.insert(module.clone(), targets);
            let listed: Vec<&str> = declared.iter().map(|(p, _)| p.as_str()).collect();
            graph
                .code
                .insert(module.clone(), format!("{code}\n{}", listed.join("\n")));
            let resolved = declared
                .iter()
                .filter_map(|(p, name)| Some((resolve_here(p)?, name.clone())))
                .collect();
            uses.insert(module, resolved);
        }
        for (module, imports) in &mut graph.imports {
            let code = &graph.code[module];
            let mut brought = BTreeSet::new();
            for target in imports.iter() {
                let (from, name) = target.rsplit_once("::").unwrap_or(("", target));
                let reexports = uses.get(from).into_iter().flatten();
                if name == "*" {
                    brought.extend(
                        reexports
                            .filter(|(_, n)| n != "*" && names_word(code, n))
                            .map(|(p, _)| p.clone()),
                    );
                    brought.extend(
                        modules
                            .iter()
                            .filter(|m| m.rsplit_once("::").map_or("", |(f, _)| f) == from)
                            .filter(|m| {
                                let child = m.rsplit("::").next().unwrap_or("");
                                code.contains(&format!("{child}::")) && names_word(code, child)
                            })
                            .cloned(),
                    );
                } else {
                    brought.extend(reexports.filter(|(_, n)| n == name).map(|(p, _)| p.clone()));
                }
            }
            imports.extend(brought);
        }
        graph
    }

    /// The direct children of `folder` (a module path; `""` the crate root) and, for each, the
    /// siblings its code (or its descendants' code) imports.
    pub fn edges_in(&self, folder: &str) -> BTreeMap<String, BTreeSet<String>> {
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
    pub fn is_module(&self, folder: &str, name: &str) -> bool {
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
    pub fn cycles(&self) -> Vec<String> {
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
    pub fn broken_invariants(&self, rules: &[(&str, &[&str], &[&str])]) -> Vec<String> {
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
    if stem != "mod" && !(parts.is_empty() && stem == "lib") {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// `path` as a path from the crate root, read in `module`: from `crate::`, `super::` or
/// `self::`, or from one of the module's own children (`use model::Case;` in `case/mod.rs`).
/// `None` when it climbs above the root or starts elsewhere (`std::`, another crate).
fn resolve(module: &str, path: &str, modules: &BTreeSet<String>) -> Option<String> {
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
        Some(&"super") => {}
        Some(first) if modules.contains(&join(module, first)) => {}
        _ => return None,
    }
    while parts.peek() == Some(&"super") {
        parts.next();
        here.pop()?;
    }
    let rest: Vec<&str> = parts.filter(|p| !p.is_empty()).collect();
    Some(here.into_iter().chain(rest).collect::<Vec<_>>().join("::"))
}

/// `module::child` (`child` when `module` is the crate root).
fn join(module: &str, child: &str) -> String {
    if module.is_empty() {
        child.to_string()
    } else {
        format!("{module}::{child}")
    }
}

/// The modules `text` declares for tests only (`#[cfg(test)] mod testing;`).
fn test_modules(text: &str) -> Vec<String> {
    let code = blank_literals(text);
    let mut out = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let item = code[at + "#[cfg(test)]".len()..].trim_start();
        let item = item.strip_prefix("pub ").unwrap_or(item);
        if let Some(rest) = item.strip_prefix("mod ") {
            let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            if rest[name.len()..].trim_start().starts_with(';') {
                out.push(name);
            }
        }
    }
    out
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

/// `file:line` of each serialization (`serde_json::to_string(…)`, `yaml_serde::to_vec(…)`...)
/// whose result is `.unwrap_or_default()`ed, its arguments and the call possibly spread over
/// lines and holding braces of their own.
pub fn serializations_defaulted(texts: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, text) in texts {
        let code = blank_literals(text);
        for (i, _) in code.match_indices("::to_") {
            let call = &code[i + 2..];
            let open = call
                .find(|c: char| !is_ident(c))
                .filter(|&k| call[k..].starts_with('('));
            let fname = open.map(|k| &call[..k]);
            if !matches!(
                fname,
                Some("to_string" | "to_string_pretty" | "to_vec" | "to_vec_pretty")
            ) {
                continue;
            }
            let Some(args_end) = open.and_then(|k| closing_paren(&call[k..]).map(|e| k + e)) else {
                continue;
            };
            if call[args_end + 1..]
                .trim_start()
                .starts_with(".unwrap_or_default()")
            {
                out.push(format!("{name}:{}", code[..i].matches('\n').count() + 1));
            }
        }
    }
    out
}

/// In `s`, which starts with `(`, the index of its matching `)`.
fn closing_paren(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (k, ch) in s.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}
