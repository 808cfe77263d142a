// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Barriers for memory a device reads and writes (the kernel's `dma_mb()`
//! is a macro, so `ane_glue.c` wraps it).

/// Orders every earlier memory access before every later one, as seen by a
/// device sharing the memory (`dma_mb()`).
pub fn mb() {
    // SAFETY: A barrier; no preconditions.
    unsafe { super::glue::ane_glue_dma_mb() }
}
