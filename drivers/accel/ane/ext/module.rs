// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Keeping the module loaded.

/// Takes a reference on this module that is never dropped: it stays loaded
/// until reboot (`rmmod` then fails with `EBUSY`).
pub fn pin() {
    // SAFETY: `__module_get(THIS_MODULE)` in the C glue; the module is
    // loaded while its code runs.
    unsafe { super::glue::ane_glue_module_pin() }
}
