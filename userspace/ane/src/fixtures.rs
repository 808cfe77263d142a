// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Where the project's tests find the real compiled ANE programs
//! (`../shared/fixtures` of the development checkout, see its
//! `SOURCES.md`): one place for the library's, `ane-probe`'s and their
//! integration tests. A user's clone has no fixtures; tests that need one
//! say so and check nothing.

use std::path::PathBuf;

/// `$ANE_SHARED/fixtures`, or `../shared/fixtures` next to the checkout.
pub fn dir() -> PathBuf {
    match std::env::var_os("ANE_SHARED") {
        Some(shared) => PathBuf::from(shared).join("fixtures"),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/fixtures"
        )),
    }
}

/// The path of fixture `name`, or `None` (with a message on stderr) when
/// the fixture directory is absent.
pub fn path(name: &str) -> Option<PathBuf> {
    let dir = dir();
    if !dir.is_dir() {
        eprintln!(
            "SKIPPED: fixture {name}: {} is absent (only the project's development \
             checkout has ../shared); nothing was checked",
            dir.display()
        );
        return None;
    }
    Some(dir.join(name))
}
