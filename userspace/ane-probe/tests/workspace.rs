// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The workspace's crates are not published: the name `ane` is taken on
//! crates.io (an unrelated binding of Apple's framework), and none of the
//! others is meant for crates.io either. `cargo publish` refuses a crate
//! marked `publish = false`, which `cargo metadata` reports as an empty
//! list of registries it may be published to.

use std::path::Path;
use std::process::Command;

/// `cargo metadata --no-deps` of the manifest at `path`, parsed.
fn metadata(path: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .arg("--manifest-path")
        .arg(path)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// Each package of `meta`: its name and whether it may be published.
fn packages(meta: &serde_json::Value) -> Vec<(String, bool)> {
    meta["packages"]
        .as_array()
        .expect("a package list")
        .iter()
        .map(|p| {
            let name = p["name"].as_str().expect("a name").to_owned();
            // `publish = false` is `[]`; no `publish` key is `null`.
            let publishable = !matches!(&p["publish"], serde_json::Value::Array(a) if a.is_empty());
            (name, publishable)
        })
        .collect()
}

#[test]
fn no_workspace_crate_is_publishable() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = packages(&metadata(&top.join("Cargo.toml")));
    assert!(all.len() >= 5, "{all:?}");
    // The Python extension is a workspace of its own (built by maturin).
    all.extend(packages(&metadata(&top.join("ane-py/Cargo.toml"))));
    let publishable: Vec<_> = all.iter().filter(|(_, p)| *p).map(|(n, _)| n).collect();
    assert!(
        publishable.is_empty(),
        "lack `publish = false`: {publishable:?}"
    );
}
