//! The import graph of `actors/src` reads one way, floor by floor (docs/architecture.md,
//! "Floors"). In the manner of rust-analyzer's tidy tests, this reads the source: every
//! `crate::<module>` a top-level module names (in `use` lines, paths and doc links alike, unit
//! tests aside) is an edge, and an edge may only go to the same floor or a lower one. The only
//! cycle allowed is the natural one between the actors that address one another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module of `actors/src` and its floor: a module may name modules of its floor
/// or below. A new module gets a floor here (the test says so), and docs/architecture.md draws
/// the same table.
const FLOORS: &[(&str, u8)] = &[
    // 0: leaves, named by everything.
    ("clock", 0),
    ("deadline", 0),
    ("errors", 0),
    ("failpoints", 0),
    ("hashing", 0),
    ("metrics", 0),
    ("telemetry", 0),
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
    ("process", 7),
    ("channel_router", 7),
    // 8: operations over the actors (implements `Agents`).
    ("ops", 8),
    // 9: the facade, and the unit tests' helpers.
    ("system", 9),
    ("testing", 9),
];

/// The one cycle the graph may hold: a supervisor starts agents and routers, an agent sends to
/// the routers and the supervisor, the routers deliver to agents and ask the supervisor; the
/// process's `SystemHandle` holds the supervisor's and the router's addresses, and every one of
/// them holds it.
const ACTORS: &[&str] = &[
    "agent",
    "channel_router",
    "parent_router",
    "process",
    "supervisor",
];

/// The top-level modules `text` (one file of module `from`) names as `crate::<module>`.
fn named_modules(text: &str) -> BTreeSet<String> {
    // Unit tests may reach anywhere.
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `agentd_crate::…` and the like
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::{c, d}, e}`: the first segment of each top-level item.
            let (mut depth, mut item_start, mut items) = (0usize, 0usize, Vec::new());
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        items.push(&group[item_start..i]);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&group[item_start..i]);
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
            for item in items {
                let name = first_segment(item.trim());
                if !name.is_empty() {
                    out.insert(name.to_string());
                }
            }
        } else {
            let name = first_segment(rest);
            if !name.is_empty() {
                out.insert(name.to_string());
            }
        }
    }
    out
}

fn first_segment(path: &str) -> &str {
    let end = path
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(path.len());
    &path[..end]
}

/// module → (named module → files that name it), for every `.rs` under `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let first = rel.components().next().unwrap().as_os_str();
            let module = first.to_str().unwrap().trim_end_matches(".rs").to_string();
            if module == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let from = edges.entry(module.clone()).or_default();
            for named in named_modules(&text) {
                if named != module {
                    from.entry(named)
                        .or_default()
                        .insert(rel.display().to_string());
                }
            }
        }
    }
    edges
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn floor(module: &str) -> Option<u8> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

/// Every edge that goes up a floor, as `from (floor) → to (floor): files`.
fn violations(edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in edges {
        for (to, files) in tos {
            let (Some(a), Some(b)) = (floor(from), floor(to)) else {
                continue; // not a module of this crate (`crate::AgentSystem` re-exports…)
            };
            if b > a {
                out.push(format!("{from} ({a}) → {to} ({b}): {files:?}"));
            }
        }
    }
    out
}

/// The strongly connected components of more than one module (Tarjan).
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

#[test]
fn every_module_has_a_floor() {
    let edges = graph(&src());
    let unplaced: Vec<&String> = edges.keys().filter(|m| floor(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "give these modules a floor in FLOORS (and docs/architecture.md): {unplaced:?}"
    );
    let gone: Vec<&str> = FLOORS
        .iter()
        .map(|(m, _)| *m)
        .filter(|m| !edges.contains_key(*m))
        .collect();
    assert!(
        gone.is_empty(),
        "FLOORS names modules that no longer exist: {gone:?}"
    );
}

#[test]
fn no_module_names_a_higher_floor() {
    let found = violations(&graph(&src()));
    assert!(
        found.is_empty(),
        "imports that go up a floor:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_only_cycle_is_the_actors_one() {
    let allowed: BTreeSet<String> = ACTORS.iter().map(|m| m.to_string()).collect();
    for cycle in cycles(&graph(&src())) {
        assert!(
            cycle.is_subset(&allowed),
            "a cycle outside the actors' one: {cycle:?}"
        );
    }
}

/// The reader and the checks catch what they are for (so the tests above can fail).
#[test]
fn an_upward_import_and_a_cycle_are_caught() {
    let text = "use crate::deps::Deps;\nuse crate::{tools::{self, Agents}, clock::Clock};\n\
                /// [`crate::turn::Turn`]\nfn f() { crate::metrics::global(); }\n\
                #[cfg(test)]\nmod tests { use crate::system::AgentSystem; }";
    let named = named_modules(text);
    let expected: BTreeSet<String> = ["deps", "tools", "clock", "turn", "metrics"]
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert_eq!(named, expected);

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
    edge("deps", "config");
    assert_eq!(violations(&edges).len(), 1, "config (1) → tools (5)");
    let found = cycles(&edges);
    assert_eq!(found.len(), 1);
    assert!(found[0].contains("config") && found[0].contains("tools"));
}
