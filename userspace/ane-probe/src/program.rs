// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A compiled program file: the library's [`ane::program`], which the
//! Python package shares.

pub use ane::program::*;

#[cfg(test)]
pub(crate) mod tests {
    pub(crate) use ane::fixtures::path as fixture;
}
