// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Keeping the module loaded, and the caller's privileges.

/// Takes a reference on this module that is never dropped: it stays loaded
/// until reboot (`rmmod` then fails with `EBUSY`).
pub fn pin() {
    // SAFETY: `__module_get(THIS_MODULE)` in the C glue; the module is
    // loaded while its code runs.
    unsafe { super::glue::ane_glue_module_pin() }
}

/// Whether the calling task may raise a job's priority above normal
/// (`CAP_SYS_NICE`).
pub fn may_boost_priority() -> bool {
    // SAFETY: `capable()` on the current task; no preconditions.
    unsafe { super::glue::ane_glue_may_boost_priority() }
}
