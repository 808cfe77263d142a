// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! An RTKit management session with a coprocessor, through the kernel's
//! `apple_rtkit` (7.3 has no Rust binding for it; `ane_glue.c` makes the
//! calls).

use core::{ffi::c_void, ptr::NonNull};

use kernel::{device, prelude::*};

use super::glue::{ane_glue_rtkit_boot, ane_glue_rtkit_free, raw_dev};

/// A running RTKit session; ended when dropped.
pub struct Rtkit(NonNull<c_void>);

// SAFETY: The session is only freed through `Drop`, and `apple_rtkit`
// serialises its own work on its workqueue.
unsafe impl Send for Rtkit {}
// SAFETY: No method takes `&self`.
unsafe impl Sync for Rtkit {}

impl Rtkit {
    /// Starts the mailbox of `dev`'s node and waits (bounded, 1 s) for the
    /// coprocessor's HELLO and endpoint map. `ENODEV` when the node has no
    /// mailbox, `ETIME` when the firmware never said HELLO.
    pub fn boot(dev: &device::Device) -> Result<Self> {
        let mut out: *mut c_void = core::ptr::null_mut();
        // SAFETY: `dev` is a live device being probed; `out` is valid.
        let ret = unsafe { ane_glue_rtkit_boot(raw_dev(dev), &mut out) };
        kernel::error::to_result(ret)?;
        NonNull::new(out).map(Self).ok_or(EINVAL)
    }
}

impl Drop for Rtkit {
    fn drop(&mut self) {
        // SAFETY: The session came from `ane_glue_rtkit_boot` and is freed
        // once.
        unsafe { ane_glue_rtkit_free(self.0.as_ptr()) }
    }
}
