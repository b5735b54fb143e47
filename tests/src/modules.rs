//! The module graph of a crate, read from its source text: which modules use which, and the
//! cycles among them. The workspace's rule is that dependencies point one way between the
//! modules of a crate: no two siblings use each other, directly or around a longer loop.
//!
//! A module is a file of `src/` (`a/b.rs` and `a/b/mod.rs` are `a::b`); a use is any path that
//! starts with `crate`, `super` or `self`, in a `use` statement (groups expanded) or in code,
//! followed down to the deepest module it names, through the `pub use` re-exports a module
//! makes. A use between two modules counts between the two siblings under their nearest common
//! parent that hold them (a child using its parent's items, or a parent its child's, is not a
//! loop). Test-only modules (`#[cfg(test)] mod x`, inline or in files) are left out: a test may
//! use whatever it tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate (`[]` is the crate root).
pub type ModPath = Vec<String>;

/// The crate's source: each module's text, with comments and test-only modules removed.
#[derive(Debug, Default)]
pub struct Crate {
    modules: BTreeMap<ModPath, String>,
}

impl Crate {
    /// Reads every module under `src` (binaries under `src/bin/` are crates of their own and
    /// are left out).
    pub fn read(src: &Path) -> std::io::Result<Crate> {
        let mut files = Vec::new();
        walk(src, &mut files)?;
        let mut texts = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(src).unwrap_or(&f);
            if rel.starts_with("bin") {
                continue;
            }
            let text = std::fs::read_to_string(&f)?;
            texts.insert(mod_path(rel), text);
        }
        Ok(Crate::from_texts(texts))
    }

    /// A crate of the given modules' texts.
    pub fn from_texts(texts: BTreeMap<ModPath, String>) -> Crate {
        let mut test_only: BTreeSet<ModPath> = BTreeSet::new();
        let mut modules = BTreeMap::new();
        for (path, text) in &texts {
            let (text, test_mods) = strip(text);
            for name in test_mods {
                let mut child = path.clone();
                child.push(name);
                test_only.insert(child);
            }
            modules.insert(path.clone(), text);
        }
        modules.retain(|p, _| !test_only.iter().any(|t| p.starts_with(t)));
        Crate { modules }
    }

    /// Every use between sibling modules: `(from, to)`, each the child of their nearest common
    /// parent.
    pub fn edges(&self) -> BTreeSet<(ModPath, ModPath)> {
        let exports = self.exports();
        let mut edges = BTreeSet::new();
        for (here, text) in &self.modules {
            for path in paths(text) {
                let Some(target) = self.resolve(here, &path, &exports) else { continue };
                let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common == here.len() || common == target.len() {
                    continue;
                }
                edges.insert((here[..=common].to_vec(), target[..=common].to_vec()));
            }
        }
        edges
    }

    /// The cycles among sibling modules: each a set of two or more that reach one another.
    pub fn cycles(&self) -> Vec<BTreeSet<ModPath>> {
        strongly_connected(&self.edges()).into_iter().filter(|c| c.len() > 1).collect()
    }

    /// What each module's `pub use` statements make it stand for: name → the module it names.
    fn exports(&self) -> BTreeMap<ModPath, BTreeMap<String, ModPath>> {
        let mut out: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
        for (here, text) in &self.modules {
            for (path, name) in reexports(text) {
                let (base, rest) = start(here, &path);
                let mut target = base;
                for seg in &rest {
                    let mut next = target.clone();
                    next.push(seg.clone());
                    if !self.modules.contains_key(&next) {
                        break;
                    }
                    target = next;
                }
                if target != *here && !rest.is_empty() {
                    out.entry(here.clone()).or_default().insert(name, target);
                }
            }
        }
        out
    }

    /// The deepest module `path`, used in `here`, names (through re-exports).
    fn resolve(
        &self,
        here: &ModPath,
        path: &[String],
        exports: &BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    ) -> Option<ModPath> {
        let (mut target, rest) = start(here, path);
        let mut rest = rest.into_iter().peekable();
        // Each step goes down one module or one re-export; a re-export loop cannot hold it
        // longer than the crate has modules.
        for _ in 0..=self.modules.len() * 2 {
            let Some(seg) = rest.peek() else { break };
            let mut next = target.clone();
            next.push(seg.clone());
            if self.modules.contains_key(&next) {
                target = next;
            } else if let Some(t) = exports.get(&target).and_then(|e| e.get(seg)) {
                target = t.clone();
            } else {
                break;
            }
            rest.next();
        }
        (target != *here).then_some(target)
    }
}

/// Where a path starting with `crate`, `super` or `self` begins, in `here`, and what follows.
fn start(here: &ModPath, path: &[String]) -> (ModPath, Vec<String>) {
    let mut segs = path.iter().peekable();
    let mut base = here.clone();
    if segs.peek().is_some_and(|s| *s == "crate") {
        base.clear();
        segs.next();
    }
    while let Some(s) = segs.peek() {
        match s.as_str() {
            "super" => {
                base.pop();
            }
            "self" => {}
            _ => break,
        }
        segs.next();
    }
    (base, segs.cloned().collect())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn mod_path(rel: &Path) -> ModPath {
    let mut parts: ModPath =
        rel.with_extension("").iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The text without comments, string and character literals (kept as empty quotes), and
/// inline `#[cfg(test)]` modules; and the names of the test-only modules it declares.
fn strip(text: &str) -> (String, Vec<String>) {
    let code = lex(text);
    let mut out = String::with_capacity(code.len());
    let mut names = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let decl = after.trim_start();
        let decl =
            decl.strip_prefix("pub(crate)").or_else(|| decl.strip_prefix("pub")).unwrap_or(decl);
        let Some(item) = decl.trim_start().strip_prefix("mod ") else {
            rest = after;
            continue;
        };
        let name: String =
            item.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let tail = item.trim_start()[name.len()..].trim_start();
        names.push(name);
        if let Some(body) = tail.strip_prefix('{') {
            let mut depth = 1usize;
            let mut end = body.len();
            for (i, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &body[end..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    (out, names)
}

/// Source text with comments removed and string and character literals emptied, so that
/// neither a path in a doc comment nor a brace in a string is taken for code.
fn lex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while chars.get(i).is_some_and(|&c| c != '\n') {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while let Some(&c) = chars.get(i) {
                let n = chars.get(i + 1).copied();
                if c == '/' && n == Some('*') {
                    depth += 1;
                    i += 2;
                } else if c == '*' && n == Some('/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && matches!(next, Some('#' | '"')) && !ident_before(&chars, i) {
            // A raw string: r"..." or r#"..."#.
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            if chars.get(i + 1 + hashes) == Some(&'"') {
                i += 2 + hashes;
                loop {
                    match chars.get(i) {
                        None => break,
                        Some('"')
                            if chars[i + 1..]
                                .iter()
                                .take(hashes)
                                .filter(|&&c| c == '#')
                                .count()
                                == hashes =>
                        {
                            i += 1 + hashes;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                out.push_str("\"\"");
            } else {
                out.push(c);
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while let Some(&c) = chars.get(i) {
                i += if c == '\\' { 2 } else { 1 };
                if c == '"' {
                    break;
                }
            }
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{7f}'), or a lifetime ('a), kept.
            let close = if next == Some('\\') {
                chars[i + 2..].iter().position(|&c| c == '\'').map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && chars.get(i - 1).is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// Every path starting with `crate`, `super` or `self` in the text: those of `use` statements
/// (groups expanded) and those written in code.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for tree in use_trees(code, false) {
        for path in expand(&tree) {
            out.push(path);
        }
    }
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let word_start = i == 0
            || !bytes.get(i - 1).is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == ':');
        if word_start && matches!(bytes.get(i), Some('c' | 's')) {
            let rest: String = bytes[i..].iter().take(200).collect();
            if rest.starts_with("crate::")
                || rest.starts_with("super::")
                || rest.starts_with("self::")
            {
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let segs: Vec<String> =
                    path.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
                if segs.len() > 1 {
                    out.push(segs);
                }
                i += path.len().max(1);
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The trees of `use` statements (`pub_only`: only `pub` and `pub(...)` ones).
fn use_trees(code: &str, pub_only: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = &rest[..at];
        let boundary = before.chars().last().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let after = &rest[at + 4..];
        let Some(end) = after.find(';') else { break };
        if boundary {
            let line = before.rsplit(['\n', ';', '{', '}']).next().unwrap_or("").trim();
            let is_pub = line.starts_with("pub");
            if !pub_only || is_pub {
                out.push(after[..end].split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
        rest = &after[end..];
    }
    out
}

/// The paths of a use tree, its groups expanded; `as` renames dropped.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![
            path.split("::").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect(),
        ];
    };
    let prefix = &tree[..open];
    let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    let mut out = Vec::new();
    for part in parts.iter().filter(|p| !p.trim().is_empty()) {
        for sub in expand(part) {
            let mut path: Vec<String> =
                prefix.split("::").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
            path.extend(sub.into_iter().filter(|s| s != "self"));
            out.push(path);
        }
    }
    out
}

/// The `pub use` re-exports of a module's text: each path and the name it is known by.
fn reexports(code: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for tree in use_trees(code, true) {
        for path in expand_named(&tree) {
            out.push(path);
        }
    }
    out
}

/// Like [`expand`], with the name each path is known by (its last segment, or its rename).
fn expand_named(tree: &str) -> Vec<(Vec<String>, String)> {
    let flat: Vec<&str> = tree.split(',').collect();
    let renamed: BTreeMap<String, String> = flat
        .iter()
        .filter_map(|p| {
            let mut it = p.split(" as ");
            let from = it.next()?.trim().rsplit("::").next()?.trim_matches(['{', '}', ' ']);
            let to = it.next()?.trim().trim_matches(['{', '}', ' ']);
            Some((from.to_owned(), to.to_owned()))
        })
        .collect();
    expand(tree)
        .into_iter()
        .filter_map(|p| {
            let last = p.last()?.clone();
            let name = renamed.get(&last).cloned().unwrap_or(last);
            (p.first().is_some_and(|f| f == "crate" || f == "super" || f == "self")
                || !p.is_empty())
            .then_some((normalize(p), name))
        })
        .collect()
}

/// A re-export's path as one that starts at `self` when it names a child module (`pub use
/// child::Item` in a module is `self::child::Item`).
fn normalize(path: Vec<String>) -> Vec<String> {
    match path.first().map(String::as_str) {
        Some("crate" | "super" | "self") => path,
        _ => std::iter::once("self".to_owned()).chain(path).collect(),
    }
}

/// Tarjan's strongly connected components of the graph.
fn strongly_connected(edges: &BTreeSet<(ModPath, ModPath)>) -> Vec<BTreeSet<ModPath>> {
    let mut next: BTreeMap<&ModPath, Vec<&ModPath>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
        next.entry(b).or_default();
    }
    struct Walk<'a> {
        next: &'a BTreeMap<&'a ModPath, Vec<&'a ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on: BTreeSet<&'a ModPath>,
        out: Vec<BTreeSet<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for &w in self.next.get(v).map(Vec::as_slice).unwrap_or_default() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    component.insert(w.clone());
                    if w == v {
                        break;
                    }
                }
                self.out.push(component);
            }
        }
    }
    let mut walk = Walk {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in next.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn krate(files: &[(&str, &str)]) -> Crate {
        Crate::from_texts(
            files
                .iter()
                .map(|(p, t)| {
                    let path = if p.is_empty() {
                        Vec::new()
                    } else {
                        p.split("::").map(str::to_owned).collect()
                    };
                    (path, (*t).to_owned())
                })
                .collect(),
        )
    }

    fn names(c: &BTreeSet<ModPath>) -> Vec<String> {
        c.iter().map(|p| p.join("::")).collect()
    }

    #[test]
    fn two_siblings_using_each_other_are_a_cycle() {
        let c = krate(&[
            ("", "mod a; mod b;"),
            ("a", "use super::b::B; pub struct A;"),
            ("b", "use crate::a::A; pub struct B;"),
        ]);
        let cycles = c.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(names(&cycles[0]), ["a", "b"]);
    }

    #[test]
    fn a_loop_through_a_re_export_and_a_group_is_found() {
        let c = krate(&[
            ("", "mod a; mod b; mod c; pub use c::C;"),
            ("a", "use crate::{C, b::{self, B}};"),
            ("b", "pub struct B;"),
            ("c", "pub struct C; fn f() { let _ = crate::a::g(); }"),
        ]);
        assert_eq!(c.cycles().iter().map(names).collect::<Vec<_>>(), [["a", "c"]]);
    }

    #[test]
    fn parents_children_comments_strings_and_tests_make_no_cycle() {
        let c = krate(&[
            ("", "mod a; mod b; pub use a::A;"),
            (
                "a",
                "mod inner; use inner::I; pub struct A; // crate::b::B\n#[cfg(test)]\nmod tests;",
            ),
            ("a::inner", "use super::A; pub struct I; const S: &str = \"crate::b::B {\";"),
            ("b", "use crate::a::A; #[cfg(test)] mod tests { use crate::b::*; }"),
            ("a::tests", "use crate::b::B;"),
        ]);
        assert!(c.cycles().is_empty(), "{:?}", c.cycles());
    }
}
