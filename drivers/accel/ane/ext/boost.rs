// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The CPU-cluster boost (omarchy-ane's `ane_boost.c`): from the start of a
//! job until a delay after the last one ended, every cpufreq policy's
//! minimum frequency is held at its top. On T8103 the memory side follows
//! the CPU clusters' performance state; omarchy-ane measured the Parakeet
//! encoder at 171 ms without the hold and 138 ms with it. The frequency
//! QoS calls are C (`ane_glue.c`); the effect shows in each policy's
//! `scaling_min_freq`.

use core::ffi::c_void;

use super::glue;

/// The boost of one device; nothing when created with a delay of 0.
pub struct CpuBoost(*mut c_void);

// SAFETY: The C state may be used from any thread: `begin` and `end` take
// its mutex, and its delayed work takes the same mutex.
unsafe impl Send for CpuBoost {}
// SAFETY: Shared references reach only `begin` and `end`, which serialise
// on the C state's mutex; `free` (in `drop`) needs `&mut self`.
unsafe impl Sync for CpuBoost {}

impl CpuBoost {
    /// A boost held `idle_ms` after the last job; 0 (or an allocation
    /// failure, which only costs speed) disables it.
    pub fn new(idle_ms: u32) -> Self {
        // SAFETY: No preconditions.
        Self(unsafe { glue::ane_glue_boost_new(idle_ms) })
    }

    /// Whether it is enabled.
    pub fn enabled(&self) -> bool {
        !self.0.is_null()
    }

    /// A job starts (process context; may sleep).
    pub fn begin(&self) {
        // SAFETY: NULL or the live boost from `new`.
        unsafe { glue::ane_glue_boost_begin(self.0) }
    }

    /// A job ended (process context; may sleep): the hold ends the
    /// boost's delay after the last end, unless another job begins.
    pub fn end(&self) {
        // SAFETY: NULL or the live boost from `new`.
        unsafe { glue::ane_glue_boost_end(self.0) }
    }
}

impl CpuBoost {
    /// No job begins any more (the engine shut down): the hold ends now
    /// and its delayed work is cancelled, so none stays queued after the
    /// driver is gone, even should the boost never be dropped.
    pub fn stop(&self) {
        // SAFETY: NULL or the live boost from `new`; its mutex serialises
        // this with `begin`, `end` and the work.
        unsafe { glue::ane_glue_boost_stop(self.0) }
    }
}

impl Drop for CpuBoost {
    fn drop(&mut self) {
        // SAFETY: NULL or the live boost from `new`, freed once; it waits
        // for its delayed work.
        unsafe { glue::ane_glue_boost_free(self.0) }
    }
}
