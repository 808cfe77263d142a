// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Register windows that are revoked at unbind.
//!
//! An [`IoWindow`] maps one memory resource of a platform device (devres
//! unmaps it after remove). Objects that outlive the binding (the engine
//! belongs to the DRM device, which lives while files are open) keep an
//! `Arc` to the window; the driver revokes it in unbind, after which every
//! read gives `None` and every write does nothing, so no register is
//! touched once the device is unbound. Accesses hold the window's lock, so
//! revocation waits for one in flight.

use core::ffi::{c_void, CStr};

use kernel::{
    new_spinlock,
    prelude::*,
    sync::{Arc, SpinLock},
};

use super::glue;
use super::platform::PlatformDev;

/// A revocable MMIO window of `len` bytes.
#[pin_data]
pub struct IoWindow {
    /// The mapped base address; 0 once revoked.
    #[pin]
    base: SpinLock<usize>,
    len: usize,
    /// The physical address of the first byte (0 for windows mapped
    /// otherwise).
    phys: u64,
}

impl IoWindow {
    /// Maps the memory resource called `name` (or, for `None`, the first
    /// one) of `pdev`, which must span at least `len` bytes. Mapping touches
    /// no register. `ENODEV` when there is no such resource.
    pub fn map(pdev: &PlatformDev<'_>, name: Option<&CStr>, len: usize) -> Result<Arc<Self>> {
        Self::map_inner(pdev, name, len, true)
    }

    /// As [`IoWindow::map`], without requesting the region: for a window
    /// other drivers' ranges lie inside (the H14 block holds the DARTs and
    /// the mailbox; its pmgr window lies inside the PMGR node).
    pub fn map_unclaimed(
        pdev: &PlatformDev<'_>,
        name: Option<&CStr>,
        len: usize,
    ) -> Result<Arc<Self>> {
        Self::map_inner(pdev, name, len, false)
    }

    fn map_inner(
        pdev: &PlatformDev<'_>,
        name: Option<&CStr>,
        len: usize,
        claim: bool,
    ) -> Result<Arc<Self>> {
        let mut base: *mut c_void = core::ptr::null_mut();
        let mut phys = 0u64;
        let name = name.map_or(core::ptr::null(), |n| n.as_char_ptr());
        // SAFETY: `pdev` is being probed; `name` is NULL or a C string;
        // `base` and `phys` are valid out pointers.
        kernel::error::to_result(unsafe {
            glue::ane_glue_ioremap(pdev.as_raw(), name, len, claim, &mut base, &mut phys)
        })?;
        Arc::pin_init(
            pin_init!(Self {
                base <- new_spinlock!(base as usize),
                len,
                phys,
            }),
            GFP_KERNEL,
        )
    }

    /// Maps, for reading, the registers of the `index`-th IOMMU in `pdev`'s
    /// `iommus` list (the ANE's DARTs, which the apple-dart driver owns), of
    /// at least `len` bytes, with the IOMMU's interrupt (0 if none).
    /// `Ok(None)` past the end of the list.
    pub fn map_iommu(
        pdev: &PlatformDev<'_>,
        index: u32,
        len: usize,
    ) -> Result<Option<(Arc<Self>, u32)>> {
        let mut base: *mut c_void = core::ptr::null_mut();
        let mut irq: core::ffi::c_int = 0;
        // SAFETY: `pdev` is being probed; the out pointers are valid.
        let ret =
            unsafe { glue::ane_glue_dart_map(pdev.as_raw(), index, len, &mut base, &mut irq) };
        if ret == ENOENT.to_errno() {
            return Ok(None);
        }
        kernel::error::to_result(ret)?;
        let io = Arc::pin_init(
            pin_init!(Self {
                base <- new_spinlock!(base as usize),
                len,
                phys: 0,
            }),
            GFP_KERNEL,
        )?;
        Ok(Some((io, u32::try_from(irq).unwrap_or(0))))
    }

    /// Runs `f` on the address of the `width`-byte register at `off`, with
    /// the lock held, unless the window is revoked or the register is not
    /// inside it and aligned to its width.
    fn access<R>(&self, off: usize, width: usize, f: impl FnOnce(*mut c_void) -> R) -> Option<R> {
        if off % width != 0 || off.checked_add(width).is_none_or(|end| end > self.len) {
            return None;
        }
        let base = self.base.lock();
        (*base != 0).then(|| f((*base + off) as *mut c_void))
    }

    /// Reads the 32-bit register at `off`; `None` once revoked or for an
    /// offset outside the window.
    pub fn read32(&self, off: usize) -> Option<u32> {
        // SAFETY: `access` passes the address of an aligned register inside
        // the live mapping, holding the lock `revoke` takes.
        self.access(off, 4, |a| unsafe { glue::ane_glue_readl(a) })
    }

    /// Writes the 32-bit register at `off`; nothing once revoked.
    pub fn write32(&self, off: usize, val: u32) {
        // SAFETY: As in `read32`.
        self.access(off, 4, |a| unsafe { glue::ane_glue_writel(val, a) });
    }

    /// Reads the 64-bit register at `off`; `None` once revoked or outside.
    pub fn read64(&self, off: usize) -> Option<u64> {
        // SAFETY: As in `read32`.
        self.access(off, 8, |a| unsafe { glue::ane_glue_readq(a) })
    }

    /// Writes the 64-bit register at `off`; nothing once revoked.
    pub fn write64(&self, off: usize, val: u64) {
        // SAFETY: As in `read32`.
        self.access(off, 8, |a| unsafe { glue::ane_glue_writeq(val, a) });
    }

    /// The physical address of the window's first byte (0 if unknown).
    pub fn phys(&self) -> u64 {
        self.phys
    }

    /// Revokes the window: from now on no access reaches the hardware. Waits
    /// for an access in flight. Called at unbind, before devres unmaps it.
    pub fn revoke(&self) {
        *self.base.lock() = 0;
    }
}
