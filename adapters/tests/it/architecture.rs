//! The floors of `adapters`, read from its source: services import each other in no
//! circle, the replica's state imports no service, nothing below the handlers
//! imports HTTP, and storage opens transactions only through the unit of work's
//! runner.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn source_dir(under: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(under)
}

/// Every `.rs` file under `dir`, with its module path relative to `dir` (`mod.rs`
/// names its directory; the directory's own `mod.rs` is the empty path).
fn modules(dir: &Path) -> BTreeMap<String, (String, bool)> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, (String, bool)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(base).unwrap().with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                let is_mod = parts.last().is_some_and(|p| p == "mod");
                if is_mod {
                    parts.pop();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                out.insert(parts.join("::"), (text, is_mod));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The text without comments (line comments and doc comments).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `prefix::{a, b::c, d::{e, f}}` as `prefix::a`, `prefix::b::c`, `prefix::d::e`...
fn expand(prefix: &str, body: &str, out: &mut Vec<String>) {
    let mut depth = 0;
    let mut item = String::new();
    let mut items = Vec::new();
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    items.push(item);
    for item in items {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        match item.split_once("::{") {
            Some((head, rest)) if rest.ends_with('}') => {
                expand(&format!("{prefix}::{head}"), &rest[..rest.len() - 1], out);
            }
            _ if item.starts_with('{') && item.ends_with('}') => {
                expand(prefix, &item[1..item.len() - 1], out);
            }
            _ => out.push(format!(
                "{prefix}::{}",
                item.split(" as ").next().unwrap_or(item).trim()
            )),
        }
    }
}

/// Every path of a file that starts at the crate's `services`, `super` or `self`.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for statement in code.split(';') {
        let Some(used) = statement.trim().strip_prefix("use ").or_else(|| {
            statement
                .trim()
                .strip_prefix("pub use ")
                .or_else(|| statement.trim().strip_prefix("pub(crate) use "))
        }) else {
            continue;
        };
        let used: String = used.split_whitespace().collect::<Vec<_>>().join(" ");
        match used.split_once("::{") {
            Some((head, rest)) if rest.ends_with('}') => {
                expand(head, &rest[..rest.len() - 1], &mut out);
            }
            _ => out.push(used),
        }
    }
    // Paths written inline (`super::quotas::charge(...)`).
    let text = code;
    for start in ["crate::services::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(path.trim_end_matches(':').to_owned());
        }
    }
    out
}

/// The module of `services` a path names from module `current`, if any.
fn resolve(current: &str, path: &str, known: &BTreeSet<String>) -> Option<String> {
    let mut parts: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if current.is_empty() {
        Vec::new()
    } else {
        current.split("::").collect()
    };
    match parts.first().copied() {
        Some("crate") => {
            if parts.get(1) != Some(&"services") {
                return None;
            }
            base.clear();
            parts.drain(..2);
        }
        Some("self") => {
            parts.remove(0);
        }
        Some("super") => {
            while parts.first() == Some(&"super") {
                parts.remove(0);
                base.pop();
            }
        }
        _ => return None,
    }
    let candidate: Vec<&str> = base.into_iter().chain(parts).collect();
    (0..=candidate.len())
        .rev()
        .map(|n| candidate[..n].join("::"))
        .find(|m| known.contains(m))
}

/// The strongly connected groups of more than one module.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Reachability by depth-first search from each module (a few dozen modules).
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(m) = stack.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<String, BTreeSet<String>> =
        edges.keys().map(|m| (m.clone(), reach(m))).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for (m, from_m) in &reached {
        if !from_m.contains(m) || groups.iter().any(|g| g.contains(m)) {
            continue;
        }
        let group: Vec<String> = reached
            .iter()
            .filter(|(other, from_other)| from_m.contains(*other) && from_other.contains(m))
            .map(|(other, _)| other.clone())
            .collect();
        groups.push(group);
    }
    groups
}

#[test]
fn no_service_imports_a_module_that_imports_it() {
    let services = modules(&source_dir("services"));
    let known: BTreeSet<String> = services.keys().cloned().collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, (text, _)) in &services {
        let targets = edges.entry(module.clone()).or_default();
        for path in paths(&code(text)) {
            if let Some(target) = resolve(module, &path, &known) {
                let inside = target.is_empty()
                    || target == *module
                    || module.starts_with(&format!("{target}::"));
                if !inside {
                    targets.insert(target);
                }
            }
        }
    }
    // The parser sees the edges a reader sees (a sanity check of the test itself).
    assert!(
        edges["pipelines"].contains("checks"),
        "{:?}",
        edges["pipelines"]
    );
    assert!(edges["admin::features"].contains("admin::users"));
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "services importing each other in a circle: {found:?}"
    );
}

#[test]
fn the_replicas_state_imports_no_service_and_no_floor_below_the_handlers_imports_http() {
    for (module, (text, _)) in modules(&source_dir("replica")) {
        assert!(
            !code(&text).contains("crate::services"),
            "replica::{module} imports a service"
        );
    }
    for floor in ["services", "storage", "replica", "workers"] {
        for (module, (text, _)) in modules(&source_dir(floor)) {
            let code = code(&text);
            assert!(
                !code.contains("crate::http::") && !code.contains("axum::"),
                "{floor}::{module} imports HTTP"
            );
        }
    }
}

/// Storage opens a transaction only in the unit of work (`storage/unit.rs`), but for
/// the two that must not run twice: the export's archive is read once as it is
/// written, and the grouped writers' multi-part insert binds its cells by moving
/// them.
/// Workflows own their units: a storage function runs SQL on the transaction a
/// service or a worker gives it, and audit events reach the outbox only through the
/// unit's `enqueue_audit`, a step of the workflow. What storage still runs as a unit
/// of its own is the audit chain's append (the heads locked and the events sealed
/// under the lock, one event or a group) and a scan's page on SQLite (PostgreSQL
/// writes it in one statement, without a transaction); this list may only shrink.
#[test]
fn storage_runs_units_of_its_own_only_for_the_chain_append() {
    let mut units = Vec::new();
    let mut audits = Vec::new();
    for (module, (text, _)) in modules(&source_dir("storage")) {
        if module == "unit" {
            continue;
        }
        let code = code(&text);
        let count = code.matches("unit_of_work!(").count();
        if count > 0 {
            units.push((module.clone(), count));
        }
        let enqueued = code.matches(".enqueue(").count();
        if enqueued > 0 {
            audits.push((module, enqueued));
        }
    }
    let expected: Vec<(String, usize)> = [("audit", 2), ("sweeps", 1)]
        .into_iter()
        .map(|(m, n)| (m.to_owned(), n))
        .collect();
    assert_eq!(
        units, expected,
        "storage modules that run a unit of their own"
    );
    assert_eq!(
        audits,
        Vec::<(String, usize)>::new(),
        "storage modules that enqueue audit events themselves"
    );
}

#[test]
fn storage_opens_transactions_only_through_the_unit_of_work() {
    let mut opened = Vec::new();
    for (module, (text, _)) in modules(&source_dir("storage")) {
        let count = code(&text).matches(".begin().await").count();
        // `unit` opens units of work; `pooler` is how every transaction begins (on a
        // pooler's connection, or the pool's).
        if count > 0 && module != "unit" && module != "pooler" {
            opened.push((module, count));
        }
    }
    assert_eq!(
        opened,
        vec![("exports".to_owned(), 1), ("rows".to_owned(), 1)],
        "storage modules that open a transaction of their own"
    );
}
