// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A compiled program file: the library's [`ane::program`], which the
//! Python package shares.

pub use ane::program::*;

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    /// Fixture `name` in `$ANE_SHARED/fixtures`, or in
    /// `../shared/fixtures` next to the checkout.
    pub(crate) fn fixture(name: &str) -> Option<PathBuf> {
        let dir = match std::env::var_os("ANE_SHARED") {
            Some(shared) => PathBuf::from(shared).join("fixtures"),
            None => PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/fixtures"
            )),
        };
        if !dir.is_dir() {
            eprintln!("SKIPPED: {} is absent; nothing was checked", dir.display());
            return None;
        }
        Some(dir.join(name))
    }
}
