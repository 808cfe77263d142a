// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Error codes the kernel crate's `error::code` lacks in some supported
//! releases: `EOPNOTSUPP` and `ETIME` appear there only in 7.3, so they are
//! built from the C values, which never change.

use kernel::{bindings, prelude::*};

/// `EOPNOTSUPP`: operation not supported.
pub fn eopnotsupp() -> Error {
    Error::from_errno(-(bindings::EOPNOTSUPP as i32))
}

/// `ETIME`: timer expired.
pub fn etime() -> Error {
    Error::from_errno(-(bindings::ETIME as i32))
}
