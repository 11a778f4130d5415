//! Imports read one way (docs/architecture.md, "Floors"): `actors`' top-level modules name only
//! modules of their own floor or a lower one, and no folder of any crate of the workspace holds
//! an import cycle among its files — but one, `actors`' floor 7, the actors that address one
//! another. And crates depend one way (docs/architecture.md, "Crates"): no adapter
//! (`services/store`, `bus`, `models`, `mcp`) depends on `agentd-actors`, and the ports and
//! `agentd-observe` on nothing of the workspace but `agentd-proto`, as their manifests say.
//!
//! In the manner of rust-analyzer's tidy tests this reads the sources. Every path a file names
//! through `crate::`, `super::` or `self::` (in `use` trees, expressions and doc links alike;
//! unit tests aside) is resolved to a module path; where the file's module and the named one
//! part, the two children of their common parent are an edge of that parent's graph. So
//! `a2a/push.rs` naming `crate::a2a::task::Notice` is the edge `push → task` among the children
//! of `a2a`, and `http/mod.rs` naming `crate::sse::EventFeed` is `http → sse` among the crate
//! root's. A file may name its own module's parent (`super::Thing`): that is no edge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `actors/src` and its floor: a module may name modules of its floor
/// or below. A new module gets a floor here (the test says so), and docs/architecture.md draws
/// the same table.
const FLOORS: &[(&str, u8)] = &[
    // 0: leaves, named by everything.
    ("deadline", 0),
    ("errors", 0),
    ("failpoints", 0),
    ("hashing", 0),
    // 1: plain data and the ports to the outside.
    ("config", 1),
    ("ports", 1),
    ("rate_gate", 1),
    ("tree_spend", 1),
    // 2: what tools exist (data about tools, no behaviour).
    ("catalogue", 2),
    // 3: the bundle of ports, config and catalogue every actor holds.
    ("deps", 3),
    // 4: the messages several floors send, and services over the ports.
    ("messages", 4),
    ("lineage", 4),
    ("context_files", 4),
    ("depends_on", 4),
    ("checkpoints", 4),
    ("scheduler", 4),
    // 5: how tools run (the system seen through the `Agents` port).
    ("tools", 5),
    // 6: one turn.
    ("turn", 6),
    // 7: the actors that address one another.
    ("agent", 7),
    ("supervisor", 7),
    ("parent_router", 7),
    ("channel_router", 7),
    // 8: operations over the actors (implements `Agents`).
    ("ops", 8),
    // 9: the facade, and the unit tests' helpers.
    ("system", 9),
    ("testing", 9),
];

/// The one cycle allowed, in `actors`' root: a supervisor starts agents and routers, an agent
/// sends to the routers and the supervisor, the routers deliver to agents and ask the
/// supervisor (docs/architecture.md, "Floors").
const ALLOWED: (&str, &[&str]) = (
    "actors",
    &["agent", "channel_router", "parent_router", "supervisor"],
);

/// parent module → (child → (named child → files naming it)).
type Graphs = BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, BTreeSet<String>>>>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every crate's `src` directory, named by its folder (`actors`, `actors/ports`,
/// `services/agentd`, …): the workspace's members, as its `Cargo.toml` lists them.
fn crates() -> Vec<(String, PathBuf)> {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let manifest: toml::Value = toml::from_str(&manifest).unwrap();
    let mut out: Vec<(String, PathBuf)> = manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .filter(|m| root.join(m).join("src").is_dir())
        .map(|m| (m.clone(), root.join(&m).join("src")))
        .collect();
    out.sort();
    out
}

/// The module path of a source file (`a2a/task/mod.rs` → `["a2a", "task"]`; the crate root
/// and the binaries' `main.rs` → `[]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The text before its unit tests (`#[cfg(test)]`, other attributes, `mod …{`).
fn without_unit_tests(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let start = from + at;
        let mut rest = text[start + "#[cfg(test)]".len()..].trim_start();
        while rest.starts_with("#[") {
            match rest.find(']') {
                Some(end) => rest = rest[end + 1..].trim_start(),
                None => break,
            }
        }
        let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
        if let Some(after) = rest.strip_prefix("mod ") {
            let name_end = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if after[name_end..].trim_start().starts_with('{') {
                return &text[..start];
            }
        }
        from = start + 1;
    }
    text
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Expands the path tree at the start of `s` (`a::b::{c, d::e}`) onto `prefix`, pushing each
/// full path.
fn expand(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut segments = prefix.to_vec();
    let mut rest = s.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        expand(&group[start..i], &segments, out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&group[start..i], &segments, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segments.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.trim_start().strip_prefix("::") {
            Some(next) => rest = next.trim_start(),
            None => break,
        }
    }
    if segments.len() > prefix.len() || !prefix.is_empty() {
        out.push(segments);
    }
}

/// The module paths a file of module `module` names, resolved from `crate::`, `super::` and
/// `self::`.
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let text = without_unit_tests(text);
    let mut out = Vec::new();
    for (at, _) in text.match_indices("::") {
        let head_start = text[..at]
            .rfind(|c: char| !is_ident(c))
            .map_or(0, |i| i + 1);
        let head = &text[head_start..at];
        if head_start > 0 && text[..head_start].ends_with("::") {
            continue; // within a longer path (`super::super::x` is read from its start)
        }
        let mut base: Vec<String> = match head {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            _ => continue,
        };
        let mut rest = &text[at + 2..];
        while let Some(next) = rest.strip_prefix("super::") {
            base.pop();
            rest = next;
        }
        expand(rest, &base, &mut out);
    }
    out
}

/// Each folder's graph among its children, for the crate whose sources are in `src`.
fn graphs(src: &Path) -> Graphs {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let is_child = |parent: &[String], name: &str| {
        let mut child = parent.to_vec();
        child.push(name.to_string());
        modules.iter().any(|m| m.starts_with(&child))
    };
    let mut out = Graphs::new();
    for file in &files {
        let module = module_of(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        for path in named_paths(&text, &module) {
            let common = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
            if common >= module.len() || common >= path.len() {
                continue; // its own module, a descendant, or an ancestor
            }
            let parent = module[..common].to_vec();
            let (from, to) = (&module[common], &path[common]);
            if !is_child(&parent, to) {
                continue; // an item of the parent (`super::Thing`), not a module
            }
            out.entry(parent)
                .or_default()
                .entry(from.clone())
                .or_default()
                .entry(to.clone())
                .or_default()
                .insert(file.strip_prefix(src).unwrap().display().to_string());
        }
    }
    out
}

/// The strongly connected components of more than one node (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        next: usize,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        if let Some(tos) = s.edges.get(v) {
            for w in tos.keys() {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let low = s.low[v].min(s.low[w]);
                    s.low.insert(v, low);
                } else if s.stack.contains(&w) {
                    let low = s.low[v].min(s.index[w]);
                    s.low.insert(v, low);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                component.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v.as_str());
        }
    }
    s.found
}

/// Every cycle but the allowed one, with the edges that make it.
fn unwanted_cycles(name: &str, src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (parent, edges) in graphs(src) {
        for cycle in cycles(&edges) {
            let allowed: BTreeSet<String> = ALLOWED.1.iter().map(|m| m.to_string()).collect();
            if name == ALLOWED.0 && parent.is_empty() && cycle.is_subset(&allowed) {
                continue;
            }
            let mut why = Vec::new();
            for from in &cycle {
                for (to, files) in edges.get(from).into_iter().flatten() {
                    if cycle.contains(to) {
                        why.push(format!("    {from} → {to}: {files:?}"));
                    }
                }
            }
            found.push(format!(
                "{name}/src/{}: {cycle:?}\n{}",
                parent.join("/"),
                why.join("\n")
            ));
        }
    }
    found
}

fn floor(module: &str) -> Option<u8> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

/// `actors`' top-level modules and the ones each names (with the files that name them).
fn actors_top_level() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let src = workspace().join("actors").join("src");
    graphs(&src).remove(&Vec::new()).unwrap_or_default()
}

/// Every edge that goes up a floor, as `from (floor) → to (floor): files`.
fn upward(edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in edges {
        for (to, files) in tos {
            if let (Some(a), Some(b)) = (floor(from), floor(to))
                && b > a
            {
                out.push(format!("{from} ({a}) → {to} ({b}): {files:?}"));
            }
        }
    }
    out
}

#[test]
fn every_actors_module_has_a_floor_and_names_none_above_it() {
    let edges = actors_top_level();
    let src = workspace().join("actors").join("src");
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_string();
            (p.is_dir() || p.extension().is_some_and(|e| e == "rs")).then_some(name)
        })
        .filter(|m| m != "lib")
        .collect();
    let unplaced: Vec<&String> = modules.iter().filter(|m| floor(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "give these modules a floor in FLOORS (and docs/architecture.md): {unplaced:?}"
    );
    let gone: Vec<&str> = FLOORS
        .iter()
        .map(|(m, _)| *m)
        .filter(|m| !modules.contains(*m))
        .collect();
    assert!(
        gone.is_empty(),
        "FLOORS names modules that no longer exist: {gone:?}"
    );
    let found = upward(&edges);
    assert!(
        found.is_empty(),
        "imports that go up a floor:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_folder_of_any_crate_holds_an_import_cycle() {
    let crates = crates();
    for expected in [
        "actors",
        "actors/ports",
        "proto",
        "services/agentd",
        "services/store",
    ] {
        assert!(crates.iter().any(|(n, _)| n == expected), "{crates:?}");
    }
    let found: Vec<String> = crates
        .iter()
        .flat_map(|(name, src)| unwanted_cycles(name, src))
        .collect();
    assert!(
        found.is_empty(),
        "import cycles among the files of one folder:\n{}",
        found.join("\n")
    );
}

/// The reader resolves what the test relies on, so the test above can fail.
#[test]
fn paths_resolve_and_a_cycle_between_siblings_is_caught() {
    let module = ["a2a".to_string(), "push".to_string()];
    let text = "use super::task::{self, Notice, stored::{put, Stored}};\n\
                use crate::{sse::EventFeed, http};\n\
                /// [`super::super::errors`]\nfn f() { self::inner::g(); }\n\
                #[cfg(test)]\n#[allow(clippy::unwrap_used)]\nmod tests { use crate::app::x; }";
    let named: BTreeSet<String> = named_paths(text, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let expected: BTreeSet<String> = [
        "a2a::task::self",
        "a2a::task::Notice",
        "a2a::task::stored::put",
        "a2a::task::stored::Stored",
        "sse::EventFeed",
        "http",
        "errors",
        "a2a::push::inner::g",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    assert_eq!(named, expected);

    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a2a/task")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a2a;").unwrap();
    std::fs::write(src.join("a2a/mod.rs"), "mod push; mod task;").unwrap();
    std::fs::write(
        src.join("a2a/push.rs"),
        "use super::task::Notice;\nuse super::A2a;",
    )
    .unwrap();
    std::fs::write(src.join("a2a/task/mod.rs"), "mod stored;").unwrap();
    std::fs::write(
        src.join("a2a/task/stored.rs"),
        "pub struct S(crate::a2a::push::PushConfig);",
    )
    .unwrap();
    let found = unwanted_cycles("example", src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(r#"{"push", "task"}"#), "{found:?}");
    std::fs::write(
        src.join("a2a/task/stored.rs"),
        "pub struct S(super::Notice);",
    )
    .unwrap();
    assert!(unwanted_cycles("example", src).is_empty());

    // An edge up a floor is caught, one down is not.
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut edge = |a: &str, b: &str| {
        edges
            .entry(a.to_string())
            .or_default()
            .entry(b.to_string())
            .or_default()
            .insert(format!("{a}.rs"));
    };
    edge("config", "tools");
    edge("tools", "deps");
    let found = upward(&edges);
    assert_eq!(found.len(), 1, "config (1) → tools (5): {found:?}");
    assert!(found[0].starts_with("config (1) → tools (5)"), "{found:?}");
}

/// The adapters that feed the actors or serve them, each on the ports: none of them may depend
/// on `agentd-actors` (docs/architecture.md, "Crates").
const ADAPTERS: &[&str] = &[
    "services/store",
    "services/bus",
    "services/models",
    "services/mcp",
];

/// The crates under the actors and the adapters, and the workspace crates each may depend on:
/// the ports and the observability leaf name only the wire vocabulary.
const LEAVES: &[(&str, &[&str])] = &[
    ("actors/ports", &["agentd-proto"]),
    ("actors/observe", &["agentd-proto"]),
    ("proto", &[]),
];

/// Each member folder (`services/bus`, …) with its package name and the names of the packages
/// its `[dependencies]` list (a renamed one by its `package`), target-specific tables too.
fn manifests() -> Vec<(String, String, BTreeSet<String>)> {
    let root = workspace();
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    let mut out = Vec::new();
    for member in manifest["workspace"]["members"].as_array().unwrap() {
        let member = member.as_str().unwrap();
        let text = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        out.push(manifest_of(member, &text));
    }
    out
}

/// [`manifests`]' entry of the member at `folder` whose `Cargo.toml` is `text`.
fn manifest_of(folder: &str, text: &str) -> (String, String, BTreeSet<String>) {
    let value: toml::Value = toml::from_str(text).unwrap();
    let name = value["package"]["name"].as_str().unwrap().to_string();
    let mut tables: Vec<&toml::Value> = value.get("dependencies").into_iter().collect();
    if let Some(targets) = value.get("target").and_then(toml::Value::as_table) {
        tables.extend(targets.values().filter_map(|t| t.get("dependencies")));
    }
    let deps = tables
        .iter()
        .filter_map(|t| t.as_table())
        .flat_map(|t| t.iter())
        .map(|(key, spec)| {
            spec.get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key)
                .to_string()
        })
        .collect();
    (folder.to_string(), name, deps)
}

/// What breaks the crate graph: an adapter on the actors, a leaf on more of the workspace
/// than it may name.
fn crate_graph_breaches(manifests: &[(String, String, BTreeSet<String>)]) -> Vec<String> {
    let ours: BTreeSet<&str> = manifests.iter().map(|(_, name, _)| name.as_str()).collect();
    let mut found = Vec::new();
    for (folder, name, deps) in manifests {
        if ADAPTERS.contains(&folder.as_str()) && deps.contains("agentd-actors") {
            found.push(format!("{folder} ({name}) depends on agentd-actors"));
        }
        if let Some((_, allowed)) = LEAVES.iter().find(|(f, _)| f == folder) {
            for dep in deps.iter().filter(|d| ours.contains(d.as_str())) {
                if !allowed.contains(&dep.as_str()) {
                    found.push(format!("{folder} ({name}) depends on {dep}"));
                }
            }
        }
    }
    found
}

#[test]
fn adapters_compile_against_the_ports_not_the_actors() {
    let manifests = manifests();
    for folder in ADAPTERS.iter().chain(LEAVES.iter().map(|(f, _)| f)) {
        assert!(
            manifests.iter().any(|(f, _, _)| f == folder),
            "{folder} is no workspace member: {manifests:?}"
        );
    }
    let found = crate_graph_breaches(&manifests);
    assert!(
        found.is_empty(),
        "dependencies that break the crate graph:\n{}",
        found.join("\n")
    );
}

/// The reader sees a dependency however it is written, so the test above can fail.
#[test]
fn a_dependency_on_the_actors_is_caught_however_written() {
    let clean = manifests();
    let written = [
        "[package]\nname = \"agentd-bus\"\n[dependencies]\nagentd-actors.workspace = true\n",
        "[package]\nname = \"agentd-bus\"\n[dependencies]\nactors = { package = \"agentd-actors\", path = \"../../actors\" }\n",
        "[package]\nname = \"agentd-bus\"\n[target.'cfg(unix)'.dependencies]\nagentd-actors = { workspace = true }\n",
    ];
    for text in written {
        let mut manifests = clean.clone();
        let bus = manifests
            .iter()
            .position(|(f, _, _)| f == "services/bus")
            .unwrap();
        manifests[bus] = manifest_of("services/bus", text);
        let found = crate_graph_breaches(&manifests);
        assert!(
            found.contains(&"services/bus (agentd-bus) depends on agentd-actors".to_string()),
            "{text}: {found:?}"
        );
    }
    let mut manifests = clean;
    let ports = manifests
        .iter()
        .position(|(f, _, _)| f == "actors/ports")
        .unwrap();
    manifests[ports] = manifest_of(
        "actors/ports",
        "[package]\nname = \"agentd-ports\"\n[dependencies]\nagentd-proto.workspace = true\nagentd-observe.workspace = true\nserde.workspace = true\n",
    );
    let found = crate_graph_breaches(&manifests);
    assert!(
        found.contains(&"actors/ports (agentd-ports) depends on agentd-observe".to_string()),
        "{found:?}"
    );
    assert!(!found.iter().any(|f| f.contains("serde")), "{found:?}");
}
