// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Threaded interrupt handlers, requested through the C glue.
//!
//! A [`ThreadedIrq`] owns its handler (boxed, so the cookie the kernel holds
//! stays valid) and frees the line when dropped, before the handler goes
//! away: not devres, whose teardown runs after the driver data is gone.

use core::ffi::{c_int, c_uint, c_void, CStr};

use kernel::prelude::*;

use super::glue;
use super::platform::PlatformDev;

/// A threaded interrupt handler.
pub trait Handler: Send + Sync + 'static {
    /// Runs in the IRQ thread with the line masked. Returns whether the
    /// interrupt was this device's.
    fn handle_threaded(&self) -> bool;
}

/// A requested interrupt line with its handler; freed on drop.
pub struct ThreadedIrq<H: Handler> {
    irq: c_uint,
    handler: KBox<H>,
}

impl<H: Handler> ThreadedIrq<H> {
    /// The line number.
    pub fn line(&self) -> u32 {
        self.irq
    }

    /// Requests the device's interrupt line `index` (`IRQF_ONESHOT`: the
    /// hard handler only wakes the thread, and the line stays masked until
    /// the thread returned). `None` when the node has no such line.
    pub fn request(
        pdev: &PlatformDev<'_>,
        index: u32,
        name: &'static CStr,
        handler: H,
    ) -> Result<Option<Self>> {
        // SAFETY: `pdev` is being probed.
        let irq = unsafe { glue::ane_glue_irq_get_optional(pdev.as_raw(), index) };
        if irq == ENXIO.to_errno() {
            return Ok(None);
        }
        kernel::error::to_result(irq)?;
        let irq = irq as c_uint;
        let handler = KBox::new(handler, GFP_KERNEL)?;
        let cookie = core::ptr::from_ref::<H>(&handler)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `cookie` points to the boxed handler, which lives until
        // `drop` freed the line; `name` is a static C string.
        kernel::error::to_result(unsafe {
            glue::ane_glue_irq_request(irq, Self::thread_fn, name.as_char_ptr(), cookie)
        })?;
        Ok(Some(Self { irq, handler }))
    }

    /// The IRQ thread's function.
    ///
    /// # Safety
    ///
    /// `cookie` must be the handler this line was requested with, alive.
    unsafe extern "C" fn thread_fn(_irq: c_int, cookie: *mut c_void) -> c_uint {
        // SAFETY: The cookie is the boxed handler, alive while the line is
        // requested (see `request` and `drop`).
        let handler = unsafe { &*cookie.cast::<H>() };
        // IRQ_HANDLED is 1, IRQ_NONE 0.
        c_uint::from(handler.handle_threaded())
    }

    /// Waits for a running handler to finish.
    pub fn synchronize(&self) {
        // SAFETY: The line is requested.
        unsafe { glue::ane_glue_irq_synchronize(self.irq) };
    }
}

impl<H: Handler> Drop for ThreadedIrq<H> {
    fn drop(&mut self) {
        let cookie = core::ptr::from_ref::<H>(&self.handler)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: Requested in `request` with this cookie; after this no
        // handler runs, so the box may go.
        unsafe { glue::ane_glue_irq_free(self.irq, cookie) };
    }
}

/// Masks interrupt line `irq` (another driver's: the DART's) until
/// [`unmask`]; waits for its running handlers. Process context only.
pub fn mask(irq: u32) {
    // SAFETY: `disable_irq` takes any line number (one without a
    // descriptor is ignored) and may sleep: the caller is in process
    // context.
    unsafe { glue::ane_glue_irq_disable(irq) }
}

/// Masks interrupt line `irq` without waiting for its handlers (from the
/// line's own handler).
pub fn mask_nosync(irq: u32) {
    // SAFETY: `disable_irq_nosync` takes any line number and does not
    // sleep.
    unsafe { glue::ane_glue_irq_disable_nosync(irq) }
}

/// Undoes one [`mask`] or [`mask_nosync`].
pub fn unmask(irq: u32) {
    // SAFETY: As in `mask`; `enable_irq` warns (and does nothing) on a
    // line that was not masked.
    unsafe { glue::ane_glue_irq_enable(irq) }
}
