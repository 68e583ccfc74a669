//! The client library's examples, run as a newcomer runs them: against a `paros dev` each test
//! starts. The README's Rust lines are the story's own.

mod common;

use std::path::Path;

use common::{start, stop};
use paros_client::{Bytes, ReadItem, Seq};

#[allow(dead_code)]
#[path = "../../clients/rust/examples/story.rs"]
mod story;

#[allow(dead_code)]
#[path = "../../clients/rust/examples/checkpoint_fold.rs"]
mod checkpoint_fold;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_reads_the_gap_then_the_records_past_the_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start(&dir.path().join("paros-data"));
    let read = story::story(&url).await.map_err(|e| e.to_string());
    stop(child);

    let items = read.expect("the story runs");
    let mut expected = vec![ReadItem::Gap { from: Seq(0), to: Seq(50) }];
    expected.extend((50..100).map(|n| ReadItem::Record { seq: Seq(n), data: Bytes::from(format!("order {n}")) }));
    assert_eq!(items, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_folder_reaches_the_owners_state_across_the_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start(&dir.path().join("paros-data"));
    let outcome = checkpoint_fold::checkpoint_and_fold(&url).await.map_err(|e| e.to_string());
    stop(child);

    let checkpoint_fold::Outcome { owner, folded, first_seq } = outcome.expect("the example runs");
    assert_eq!(owner, checkpoint_fold::Total { sum: 5050, count: 100 }, "the owner folded 1..=100");
    assert_eq!(folded, owner, "the folder restored from the run and folded the rest");
    assert!(first_seq > Seq(0), "the owner truncated the journal: it begins at {first_seq}");
}

#[test]
fn the_readme_shows_the_storys_own_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("clients/rust/examples/story.rs")).unwrap();
    let heading = "## Using the Rust library";
    let start = readme.find(heading).unwrap_or_else(|| panic!("the README has {heading:?}"));
    let rest = &readme[start + heading.len()..];
    let section = &rest[..rest.find("\n#").unwrap_or(rest.len())];
    let code: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| !l.starts_with("cargo "))
        .map(str::trim)
        .collect();
    assert!(code.len() >= 8, "the README shows the story's lines: {code:?}");
    let lines: Vec<&str> = example.lines().map(str::trim).collect();
    for line in code {
        assert!(lines.contains(&line), "README line not in examples/story.rs: {line}");
    }
}
