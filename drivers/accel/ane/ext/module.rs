// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Keeping a module loaded (7.3's `ThisModule` has no reference counting).

use kernel::{bindings, ThisModule};

/// Takes a reference on `module` that is never dropped: it stays loaded
/// until reboot (`rmmod` then fails with `EBUSY`).
pub fn pin(module: &ThisModule) {
    let m = module.as_ptr();
    if m.is_null() {
        // Built in: nothing to pin.
        return;
    }
    // SAFETY: `m` is this module, loaded while its code runs.
    unsafe { bindings::__module_get(m) }
}
