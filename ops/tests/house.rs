//! The house rules, checked on the source tree itself:
//! - the crates stand on floors and every dependency arrow runs down (from `cargo metadata`);
//! - the gateway and the registry reach the node host through ports of their own, never through
//!   paros-node's types;
//! - no import circle between the modules of one crate;
//! - no line of Rust longer than 120 columns.
//!
//! `docs/architecture.md` draws the same floors; change both together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The floors, lowest first. A crate may depend only on crates of lower floors.
const FLOORS: &[&[&str]] = &[
    &["paros-core"],
    &["paros-api"],
    &["paros-client", "paros-node"],
    &["paros-store", "paros-bus", "paros-replica", "paros-registry"],
    &["paros-embedded", "paros-gateway", "paros-sim"],
    &["paros"],
];

/// Arrows the floors would allow that the house still refuses: these crates talk to the node
/// host through ports they define, so the node's types never leak up into them.
const PORTS_ONLY: &[(&str, &str)] = &[("paros-gateway", "paros-node"), ("paros-registry", "paros-node")];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("ops/ sits in the workspace root").to_path_buf()
}

fn floor_of(name: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&name))
}

/// Every workspace crate with its workspace dependencies (normal and build; dev-dependencies
/// may reach up: a test of a low crate may drive a whole cell) and its source directory.
fn workspace() -> Vec<(String, Vec<String>, PathBuf)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().expect("a package has a name").to_owned();
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(str::to_owned)
                .collect();
            let manifest = PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"));
            (name, deps, manifest.parent().expect("a manifest sits in its crate").join("src"))
        })
        .collect()
}

#[test]
fn every_crate_arrow_runs_down_a_floor() {
    let mut wrong = Vec::new();
    for (name, deps, _) in workspace() {
        let Some(floor) = floor_of(&name) else {
            wrong.push(format!("{name} stands on no floor: add it to FLOORS and docs/architecture.md"));
            continue;
        };
        for dep in deps {
            match floor_of(&dep) {
                Some(f) if f < floor => {}
                _ => wrong.push(format!("{name} (floor {floor}) depends on {dep}, which is not below it")),
            }
            if PORTS_ONLY.contains(&(name.as_str(), dep.as_str())) {
                wrong.push(format!("{name} depends on {dep}: it must reach it through a port of its own"));
            }
        }
    }
    assert!(wrong.is_empty(), "arrows that run back:\n{}", wrong.join("\n"));
}

#[test]
fn the_floor_check_refuses_an_arrow_back() {
    // The check itself can fail: the node above the client, or a store under the node, is refused.
    assert!(floor_of("paros-client") >= floor_of("paros-node"), "client and node share a floor");
    assert!(floor_of("paros-node") < floor_of("paros-store"));
    assert_eq!(floor_of("paros-unknown"), None);
}

/// A crate's modules: module path (`""` for the root, `a::b`) → file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read a source dir").flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::path);
        for e in entries {
            let path = e.path();
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(stem);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let root_file = matches!(stem.as_str(), "lib" | "main" | "mod");
                let binary_beside_lib = prefix.is_empty() && stem == "main" && out.contains_key("");
                let mut p = prefix.to_vec();
                if !root_file {
                    p.push(stem);
                }
                if !binary_beside_lib {
                    out.insert(p.join("::"), path);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    if src.is_dir() {
        walk(src, &[], &mut out);
    }
    out
}

/// The code of a file without comments (a doc link is no import) and without its
/// `#[cfg(test)]` tail (unit tests may reach anywhere).
fn code(text: &str) -> String {
    let text = text.find("#[cfg(test)]\nmod ").map_or(text, |i| &text[..i]);
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The `crate::`/`super::` paths a file names, `use` groups expanded, relative to `module`.
fn named_paths(text: &str, module: &str) -> Vec<Vec<String>> {
    let parent: Vec<String> = {
        let mut p: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
        p.pop();
        p
    };
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut rest = text;
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            let tail = &rest[i + start.len()..];
            rest = tail;
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let base: Vec<String> = if start == "crate::" { Vec::new() } else { parent.clone() };
            if let Some(group) = tail.strip_prefix('{') {
                let end = matching_brace(group);
                for item in split_top(&group[..end]) {
                    out.push(join(&base, path_segments(item)));
                }
            } else {
                out.push(join(&base, path_segments(tail)));
            }
        }
    }
    out
}

fn join(base: &[String], tail: Vec<String>) -> Vec<String> {
    base.iter().cloned().chain(tail).collect()
}

fn path_segments(s: &str) -> Vec<String> {
    s.trim()
        .split("::")
        .map_while(|seg| {
            let seg: String = seg.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            (!seg.is_empty()).then_some(seg)
        })
        .collect()
}

fn matching_brace(s: &str) -> usize {
    let mut depth = 1;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    s.len()
}

fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut from, mut out) = (0, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[from..]);
    out
}

/// Module → modules it imports from. A module naming its own descendants (declaring and
/// re-exporting them) is no arrow; a child naming its parent is.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut graph = BTreeMap::new();
    for (module, file) in &mods {
        let text = std::fs::read_to_string(file).expect("read a source file");
        let mut to = BTreeSet::new();
        for path in named_paths(&code(&text), module) {
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|m| mods.contains_key(m))
                .expect("the root module exists");
            let descendant = module.is_empty() || target == *module || target.starts_with(&format!("{module}::"));
            if !descendant {
                to.insert(target);
            }
        }
        graph.insert(module.clone(), to);
    }
    graph
}

/// The strongly connected sets of more than one module.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(m) = stack.pop() {
            for n in graph.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    stack.push(n.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reach(m))).collect();
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for (m, r) in &reaches {
        let set: Vec<String> = r.iter().filter(|n| reaches[n].contains(*m)).cloned().collect();
        if set.len() > 1 {
            found.insert(set);
        }
    }
    found.into_iter().collect()
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut wrong = Vec::new();
    for (name, _, src) in workspace() {
        for circle in circles(&import_graph(&src)) {
            wrong.push(format!("{name}: {}", circle.join(" ↔ ")));
        }
    }
    assert!(wrong.is_empty(), "import circles:\n{}", wrong.join("\n"));
}

#[test]
fn the_circle_check_sees_a_circle() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\npub mod c;\n").expect("write");
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").expect("write");
    std::fs::write(src.join("b.rs"), "use crate::{c::C, a::{self}};\npub struct B;\n").expect("write");
    std::fs::write(src.join("c.rs"), "use super::a::A;\npub struct C;\n").expect("write");
    assert_eq!(circles(&import_graph(src)), vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]);
    std::fs::write(src.join("c.rs"), "pub struct C;\n").expect("write");
    std::fs::write(src.join("b.rs"), "use crate::c::C;\npub struct B;\n").expect("write");
    assert!(circles(&import_graph(src)).is_empty());
}

#[test]
fn no_line_is_longer_than_120_columns() {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read a dir").flatten() {
            let path = e.path();
            let name = e.file_name();
            if path.is_dir() {
                if !name.to_string_lossy().starts_with('.') && name != "target" {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path).expect("read a source file");
                for (n, line) in text.lines().enumerate() {
                    let width = line.chars().count();
                    if width > 120 {
                        out.push(format!("{}:{}: {width} columns", path.display(), n + 1));
                    }
                }
            }
        }
    }
    let mut long = Vec::new();
    for (_, _, src) in workspace() {
        walk(src.parent().expect("src sits in its crate"), &mut long);
    }
    assert!(long.is_empty(), "lines over 120 columns:\n{}", long.join("\n"));
}

#[test]
fn the_client_builds_no_c_crypto_library() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-p", "paros-client", "-e", "normal", "--prefix", "none", "-f", "{p}"])
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("rustls"), "the client's default features speak TLS:\n{tree}");
    for c in ["aws-lc-sys", "openssl-sys", "native-tls"] {
        assert!(!tree.lines().any(|l| l.starts_with(c)), "the client's default features build {c}");
    }
}
