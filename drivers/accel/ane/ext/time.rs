// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Absolute `CLOCK_MONOTONIC` time. 7.3's `kernel::time::Instant` keeps its
//! nanosecond value crate-private, but the UAPI's WAIT deadline is an
//! absolute monotonic time userspace reads with `clock_gettime()`.

use kernel::bindings;

/// Nanoseconds of `CLOCK_MONOTONIC` now (the clock userspace's
/// `CLOCK_MONOTONIC` reads).
pub fn monotonic_ns() -> i64 {
    // SAFETY: `ktime_get()` has no preconditions.
    unsafe { bindings::ktime_get() }
}
