//! What tidy reads in Rust source, parsed with `syn`: what each module's code names outside its
//! unit tests (its `use` trees with their braces expanded, every other path, in macro bodies
//! too, and every identifier), the import graph of a crate's modules built from it
//! (`ModuleGraph`), which follows names that a glob import (`use super::*`) brings in from a
//! parent's own `use`; and the serializations that fall back to nothing, read from the tokens.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use syn::visit::{self, Visit};

/// What one source file's code names, its `#[cfg(test)]` items left out.
#[derive(Default)]
struct Names {
    /// Each path its `use` declarations name, braces expanded, with the name it brings into
    /// scope: `use crate::{a::{self, B}, c as d}` gives `(crate::a, a)`, `(crate::a::B, B)` and
    /// `(crate::c, d)`; a glob names `*`.
    uses: Vec<(Vec<String>, String)>,
    /// Every other path of two segments or more (`super::exchange::parse`), in items, types,
    /// expressions, attributes and macro bodies (`format!("{}", crate::a::b())`).
    paths: Vec<Vec<String>>,
    /// Every identifier.
    idents: BTreeSet<String>,
    /// The modules declared for tests only (`#[cfg(test)] mod testing;`).
    test_modules: Vec<String>,
}

impl Names {
    fn of(module: &str, text: &str) -> Names {
        let file = syn::parse_file(text)
            .unwrap_or_else(|e| panic!("module `{module}`, line {}: {e}", e.span().start().line));
        let mut names = Names::default();
        names.visit_file(&file);
        names
    }

    /// The paths `a::b` in a macro body or an attribute's arguments, and their identifiers.
    fn scan(&mut self, tokens: TokenStream) {
        let (mut path, mut colons) = (Vec::new(), 0);
        for token in tokens {
            match token {
                TokenTree::Ident(i) => {
                    if colons != 2 {
                        self.add_path(std::mem::take(&mut path));
                    }
                    self.idents.insert(i.to_string());
                    path.push(i.to_string());
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' => colons += 1,
                other => {
                    self.add_path(std::mem::take(&mut path));
                    colons = 0;
                    if let TokenTree::Group(g) = other {
                        self.scan(g.stream());
                    }
                }
            }
        }
        self.add_path(path);
    }

    fn add_path(&mut self, path: Vec<String>) {
        if path.len() >= 2 {
            self.paths.push(path);
        }
    }
}

/// Whether `attrs` mark their item as compiled for tests only.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        matches!(&a.meta, syn::Meta::List(l)
            if l.path.is_ident("cfg") && l.tokens.to_string() == "test")
    })
}

/// Visitor methods that pass over a node marked `#[cfg(test)]`, whatever it holds.
macro_rules! skip_tests {
    ($($visit:ident: $node:ident),* $(,)?) => {$(
        fn $visit(&mut self, node: &'ast syn::$node) {
            if !is_test(&node.attrs) {
                visit::$visit(self, node);
            }
        }
    )*};
}

impl<'ast> Visit<'ast> for Names {
    skip_tests!(
        visit_item_const: ItemConst, visit_item_enum: ItemEnum, visit_item_fn: ItemFn,
        visit_item_extern_crate: ItemExternCrate, visit_item_foreign_mod: ItemForeignMod,
        visit_item_impl: ItemImpl, visit_item_macro: ItemMacro, visit_item_static: ItemStatic,
        visit_item_struct: ItemStruct, visit_item_trait: ItemTrait, visit_item_type: ItemType,
        visit_item_trait_alias: ItemTraitAlias, visit_item_union: ItemUnion,
        visit_impl_item_const: ImplItemConst, visit_impl_item_fn: ImplItemFn,
        visit_impl_item_macro: ImplItemMacro, visit_impl_item_type: ImplItemType,
        visit_trait_item_const: TraitItemConst, visit_trait_item_fn: TraitItemFn,
        visit_trait_item_macro: TraitItemMacro, visit_trait_item_type: TraitItemType,
        visit_local: Local, visit_stmt_macro: StmtMacro, visit_field: Field,
        visit_variant: Variant, visit_arm: Arm, visit_field_value: FieldValue,
    );

    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        if !is_test(&node.attrs) {
            visit::visit_item_mod(self, node);
        } else if node.content.is_none() {
            self.test_modules.push(node.ident.to_string());
        }
    }

    fn visit_item_use(&mut self, node: &'ast syn::ItemUse) {
        if !is_test(&node.attrs) {
            expand_use(&node.tree, &mut Vec::new(), &mut self.uses);
            visit::visit_item_use(self, node);
        }
    }

    fn visit_path(&mut self, node: &'ast syn::Path) {
        self.add_path(node.segments.iter().map(|s| s.ident.to_string()).collect());
        visit::visit_path(self, node);
    }

    fn visit_macro(&mut self, node: &'ast syn::Macro) {
        self.scan(node.tokens.clone());
        visit::visit_macro(self, node);
    }

    fn visit_meta_list(&mut self, node: &'ast syn::MetaList) {
        self.scan(node.tokens.clone());
        visit::visit_meta_list(self, node);
    }

    fn visit_ident(&mut self, node: &'ast syn::Ident) {
        self.idents.insert(node.to_string());
    }
}

/// Each path of a `use` tree below `prefix`, with the name it brings into scope.
fn expand_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let mut leaf = |name: &syn::Ident, alias: Option<&syn::Ident>| {
        let mut path = prefix.clone();
        if name != "self" {
            path.push(name.to_string());
        }
        let bound = alias.map_or_else(
            || path.last().cloned().unwrap_or_default(),
            |a| a.to_string(),
        );
        out.push((path, bound));
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            expand_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => leaf(&n.ident, None),
        syn::UseTree::Rename(r) => leaf(&r.ident, Some(&r.rename)),
        syn::UseTree::Glob(_) => {
            let glob = prefix.iter().cloned().chain(["*".to_string()]).collect();
            out.push((glob, "*".to_string()));
        }
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| expand_use(t, prefix, out)),
    }
}

/// A crate's modules and what each one's code names: module paths (`transport::exchange`), the
/// module paths each imports, and every path its code names (`std::net::TcpStream`).
#[derive(Debug, Default)]
pub struct ModuleGraph {
    /// Module path -> the module paths its code imports (resolved, possibly past a module into
    /// its items: `case::model::Case`).
    imports: BTreeMap<String, BTreeSet<String>>,
    /// Module path -> every path its code names, as written, `use` trees expanded.
    named: BTreeMap<String, BTreeSet<String>>,
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
        let mut read: Vec<(String, Names)> = texts
            .into_iter()
            .map(|(m, t)| {
                let names = Names::of(&m, &t);
                (m, names)
            })
            .collect();
        let test_only: BTreeSet<String> = read
            .iter()
            .flat_map(|(m, n)| n.test_modules.iter().map(move |c| join(m, c)))
            .collect();
        read.retain(|(m, _)| {
            !test_only
                .iter()
                .any(|t| m == t || m.starts_with(&format!("{t}::")))
        });
        let modules: BTreeSet<String> = read.iter().map(|(m, _)| m.clone()).collect();
        let mut graph = ModuleGraph::default();
        // Module -> (what each of its `use` declarations names, resolved; the name it binds).
        let mut uses: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
        for (module, names) in &read {
            let resolved: Vec<(String, String)> = names
                .uses
                .iter()
                .filter_map(|(p, name)| Some((resolve(module, p, &modules)?, name.clone())))
                .collect();
            let targets = names
                .paths
                .iter()
                .filter_map(|p| resolve(module, p, &modules))
                .chain(resolved.iter().map(|(p, _)| p.clone()))
                .collect();
            graph.imports.insert(module.clone(), targets);
            let named = names.uses.iter().map(|(p, _)| p).chain(&names.paths);
            graph
                .named
                .insert(module.clone(), named.map(|p| p.join("::")).collect());
            uses.insert(module, resolved);
        }
        for (module, names) in &read {
            let imports = graph.imports.get_mut(module).expect("every module");
            let mut brought = BTreeSet::new();
            for target in imports.iter() {
                let (from, name) = target.rsplit_once("::").unwrap_or(("", target));
                let reexports = uses.get(from).into_iter().flatten();
                if name == "*" {
                    brought.extend(
                        reexports
                            .filter(|(_, n)| n != "*" && names.idents.contains(n))
                            .map(|(p, _)| p.clone()),
                    );
                    // A sibling the code names by a path from it (`over_http::run()`).
                    let named_first = |child: &str| {
                        let mut all = names.paths.iter().chain(names.uses.iter().map(|(p, _)| p));
                        all.any(|p| p.len() >= 2 && p[0] == child)
                    };
                    brought.extend(
                        modules
                            .iter()
                            .filter(|m| m.rsplit_once("::").map_or("", |(f, _)| f) == from)
                            .filter(|m| named_first(m.rsplit("::").next().unwrap_or("")))
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
        let path = join(folder, name);
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
            for (m, named) in &self.named {
                let inside = m == module || m.starts_with(&format!("{module}::"));
                for path in *never_named {
                    if inside && named.iter().any(|p| p.contains(path)) {
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
fn resolve(module: &str, path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    let mut here: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    let mut parts = path.iter().map(String::as_str).peekable();
    match *parts.peek()? {
        "crate" => {
            here.clear();
            parts.next();
        }
        "self" => {
            parts.next();
        }
        "super" => {}
        first if modules.contains(&join(module, first)) => {}
        _ => return None,
    }
    while parts.next_if_eq(&"super").is_some() {
        here.pop()?;
    }
    Some(here.into_iter().chain(parts).collect::<Vec<_>>().join("::"))
}

/// `module::child` (`child` when `module` is the crate root).
fn join(module: &str, child: &str) -> String {
    if module.is_empty() {
        child.to_string()
    } else {
        format!("{module}::{child}")
    }
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
/// lines and holding braces of their own; in macro bodies and unit tests too.
pub fn serializations_defaulted(texts: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, text) in texts {
        let tokens = text.parse().unwrap_or_else(|e| panic!("{name}: {e:?}"));
        defaulted_in(tokens, name, &mut out);
    }
    out
}

/// `::to_…(…).unwrap_or_default()` in `tokens` and the groups they hold, in the order written.
fn defaulted_in(tokens: TokenStream, name: &str, out: &mut Vec<String>) {
    const SERIALIZERS: &[&str] = &["to_string", "to_string_pretty", "to_vec", "to_vec_pretty"];
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (k, token) in tokens.iter().enumerate() {
        use TokenTree::{Group, Ident, Punct};
        if let [Punct(colon), Ident(to), Group(args), Punct(dot), Ident(then), Group(none), ..] =
            &tokens[k..]
        {
            if colon.as_char() == ':'
                && SERIALIZERS.contains(&to.to_string().as_str())
                && args.delimiter() == Delimiter::Parenthesis
                && dot.as_char() == '.'
                && then == "unwrap_or_default"
                && none.stream().is_empty()
            {
                out.push(format!("{name}:{}", to.span().start().line));
            }
        }
        if let Group(g) = token {
            defaulted_in(g.stream(), name, out);
        }
    }
}
