// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The workspace's crates are not published: the name `ane` is taken on
//! crates.io (an unrelated binding of Apple's framework), and none of the
//! others is meant for crates.io either. `cargo publish` refuses a crate
//! marked `publish = false`.

use std::path::Path;

/// Crates whose manifest belongs to another line of work and is still to
/// be marked; the test fails once one of them is marked, so the list only
/// shrinks.
const PENDING: &[&str] = &["ane-dt"];

fn members(workspace: &str) -> Vec<String> {
    let start = workspace.find("members").expect("a members list");
    let list = &workspace[start..];
    let list = &list[list.find('[').unwrap() + 1..list.find(']').unwrap()];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

fn unpublished(manifest: &str) -> bool {
    manifest
        .lines()
        .any(|l| l.split('#').next().unwrap().replace(' ', "") == "publish=false")
}

#[test]
fn no_workspace_crate_is_publishable() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ws = std::fs::read_to_string(top.join("Cargo.toml")).unwrap();
    let members = members(&ws);
    assert!(members.len() >= 4, "{members:?}");
    let mut extra = vec!["ane-py".to_owned()];
    extra.extend(members);
    for m in &extra {
        let manifest = std::fs::read_to_string(top.join(m).join("Cargo.toml")).unwrap();
        let marked = unpublished(&manifest);
        if PENDING.contains(&m.as_str()) {
            assert!(!marked, "{m} is marked now: drop it from PENDING");
        } else {
            assert!(marked, "{m}/Cargo.toml lacks `publish = false`");
        }
    }
}
