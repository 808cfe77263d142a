// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! An RTKit management session with a coprocessor, through the kernel's
//! `apple_rtkit` (7.3 has no Rust binding for it; `ane_glue.c` makes the
//! calls).

use core::{ffi::c_int, ffi::c_void, ptr::NonNull};

use kernel::{bindings, device, prelude::*};

// `struct device` contains a zero-sized array Rust calls FFI-unsafe; only
// pointers to it cross the boundary.
#[allow(improper_ctypes)]
extern "C" {
    fn ane_glue_rtkit_boot(dev: *mut bindings::device, out: *mut *mut c_void) -> c_int;
    fn ane_glue_rtkit_free(rtk: *mut c_void);
}

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
        let ret = unsafe {
            ane_glue_rtkit_boot(
                core::ptr::from_ref(dev)
                    .cast::<bindings::device>()
                    .cast_mut(),
                &mut out,
            )
        };
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
