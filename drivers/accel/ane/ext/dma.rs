// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Barriers and cache maintenance for memory a device reads and writes
//! (the kernel's `dma_mb()` is a macro, so `ane_glue.c` wraps it).

use kernel::{device, prelude::*};

use super::accel::Driver;
use super::gem::Object;
use super::glue::raw_dev;

/// Orders every earlier memory access before every later one, as seen by a
/// device sharing the memory (`dma_mb()`).
pub fn mb() {
    // SAFETY: A barrier; no preconditions.
    unsafe { super::glue::ane_glue_dma_mb() }
}

/// Writes the CPU's cached lines of `bo`'s pages back to memory, once,
/// before a write-combined object is handed to `dev`: the kernel zeroed
/// the pages through its cacheable linear map, and a dirty line evicted
/// later would overwrite what the device or a write-combined CPU mapping
/// stored meanwhile. The DMA API's coherent allocator does the same for a
/// device that is not DMA-coherent (`arch_dma_prep_coherent`); the DMA
/// API itself does it here (a mapping towards the device in its default
/// domain, unmapped at once), and nothing for a coherent device.
pub fn clean_for_device<T: Driver, D: Send + Sync>(
    dev: &device::Device,
    bo: &Object<T, D>,
) -> Result {
    let sgt = bo.sg_table()?;
    // SAFETY: `dev` is live; `sgt` is a fresh scatter list of the object's
    // pinned pages, used by nothing else and freed on drop.
    kernel::error::to_result(unsafe {
        super::glue::ane_glue_clean_for_device(raw_dev(dev), sgt.as_raw())
    })
}
