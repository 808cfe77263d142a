// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! IOMMU paging domains (7.3 has no Rust `iommu_domain` abstraction).
//!
//! An [`IommuDomain`] is an unmanaged paging domain the driver allocates per
//! client and attaches to the engine for that client's jobs (as the rocket
//! driver does), so the DMA-API default domain is never used for buffers and
//! device addresses stay inside the window the engine can reach.

use core::ptr::NonNull;

use kernel::{bindings, device, prelude::*};

use super::accel::Driver;
use super::gem::Object;
use super::glue::raw_dev;

/// An unmanaged IOMMU paging domain.
pub struct IommuDomain(NonNull<bindings::iommu_domain>);

// SAFETY: The domain is a pointer the IOMMU core lets any thread use.
// Attach and detach take the group's mutex. Map and unmap may run
// concurrently on disjoint ranges (the page-table code installs tables
// with cmpxchg, io-pgtable-dart.c); a map over a live entry is refused
// with `EEXIST`, and this driver maps only ranges its `Vm` allocated or
// reserved. Freeing happens once, in `drop`.
unsafe impl Send for IommuDomain {}
// SAFETY: See `Send`.
unsafe impl Sync for IommuDomain {}

impl IommuDomain {
    /// Allocates a paging domain suitable for `dev`'s IOMMU.
    pub fn new(dev: &device::Device) -> Result<Self> {
        // SAFETY: `dev` is a live device.
        let raw = unsafe { bindings::iommu_paging_domain_alloc_flags(raw_dev(dev), 0) };
        let raw = kernel::error::from_err_ptr(raw)?;
        NonNull::new(raw).map(Self).ok_or(ENOMEM)
    }

    /// Maps all of `bo` at `iova`, readable by the device (and writable
    /// when `writable`), in one call over the object's scatter list. A
    /// cached object is mapped `IOMMU_CACHE` (the DART marks the pages
    /// coherent with the CPU's caches, which is how the references ran
    /// T8103 and T6001 with cached CPU mappings); a write-combined one is
    /// not, as the DMA API maps a device that is not DMA-coherent (how the
    /// record ran T6021; `crate::hw::mem`).
    ///
    /// # Safety
    ///
    /// The device may read (and, when `writable`, write) the object's pages
    /// through this mapping at any time, so it must not outlive them: the
    /// caller unmaps `[iova, iova + bo.size())` before the object's pages
    /// are unpinned and released (before its last reference goes).
    pub unsafe fn map_object<T: Driver, D: Send + Sync>(
        &self,
        iova: u64,
        bo: &Object<T, D>,
        writable: bool,
    ) -> Result {
        let sgt = bo.sg_table()?;
        let iova_ul = usize::try_from(iova).map_err(|_| EINVAL)?;
        let write = if writable { bindings::IOMMU_WRITE } else { 0 };
        let cache = if bo.write_combined() {
            0
        } else {
            bindings::IOMMU_CACHE
        };
        let prot = (bindings::IOMMU_READ | write | cache) as i32;
        // SAFETY: The domain is live; `sgt` describes the object's pinned
        // pages, which the caller unmaps before they are released (safety
        // requirements).
        let mapped = unsafe {
            bindings::iommu_map_sg(
                self.0.as_ptr(),
                iova_ul,
                (*sgt.as_raw()).sgl,
                (*sgt.as_raw()).orig_nents,
                prot,
                bindings::GFP_KERNEL_ACCOUNT,
            )
        };
        if mapped < 0 {
            return Err(Error::from_errno(mapped as i32));
        }
        if mapped as usize != bo.size() {
            self.unmap(iova, mapped as u64);
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Maps the physical range `[pa, pa + size)` (device registers, not RAM)
    /// at `iova`, readable and writable, not cacheable, and checks that the
    /// translation reads back.
    ///
    /// # Safety
    ///
    /// Any physical address can be handed to the device this way, so the
    /// caller must name memory the device may read and write for as long
    /// as the mapping exists: device registers, never RAM (which the
    /// kernel may hand to someone else), and no registers through which
    /// the device could make another DMA master reach memory the kernel
    /// owns. The caller unmaps the range with [`IommuDomain::unmap`]
    /// before that stops being so.
    pub unsafe fn map_phys(&self, iova: u64, pa: u64, size: u64) -> Result {
        let iova_ul = usize::try_from(iova).map_err(|_| EINVAL)?;
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        let prot = (bindings::IOMMU_READ | bindings::IOMMU_WRITE) as i32;
        // SAFETY: The domain is live; the caller names a device-register
        // range the device may access while it is mapped (safety
        // requirements), which no one frees.
        kernel::error::to_result(unsafe {
            bindings::iommu_map(
                self.0.as_ptr(),
                iova_ul,
                pa as bindings::phys_addr_t,
                len,
                prot,
                bindings::GFP_KERNEL,
            )
        })?;
        // SAFETY: The domain is live.
        let back =
            unsafe { bindings::iommu_iova_to_phys(self.0.as_ptr(), iova as bindings::dma_addr_t) };
        if back as u64 != pa {
            self.unmap(iova, size);
            return Err(EIO);
        }
        Ok(())
    }

    /// Unmaps `[iova, iova + size)`; the IOMMU core flushes the IOTLB before
    /// returning.
    ///
    /// Safe: it only takes access away from the device (a job that still
    /// uses the range faults in the DART instead of reaching memory), and
    /// an address that is not mapped is skipped by the IOMMU core.
    pub fn unmap(&self, iova: u64, size: u64) {
        let (Ok(iova), Ok(size)) = (usize::try_from(iova), usize::try_from(size)) else {
            return;
        };
        // SAFETY: The domain is live.
        unsafe { bindings::iommu_unmap(self.0.as_ptr(), iova, size) };
    }

    /// Attaches the domain to `dev`, replacing its default domain until
    /// [`IommuDomain::detach`].
    ///
    /// # Safety
    ///
    /// Dropping the domain frees it, and the IOMMU core must never keep a
    /// freed domain attached: the caller detaches it from `dev` (with
    /// [`IommuDomain::detach`]) before it is dropped, or never drops it.
    pub unsafe fn attach(&self, dev: &device::Device) -> Result {
        // SAFETY: Both are live; the caller detaches the domain before it
        // is freed (safety requirements).
        kernel::error::to_result(unsafe {
            bindings::iommu_attach_device(self.0.as_ptr(), raw_dev(dev))
        })
    }

    /// Detaches the domain from `dev`, which gets its default domain back.
    ///
    /// Safe: the IOMMU core checks that this domain is the one attached
    /// (a mismatch only warns and changes nothing), and afterwards the
    /// device reaches none of this domain's mappings.
    pub fn detach(&self, dev: &device::Device) {
        // SAFETY: Both are live; `iommu_detach_device` checks that this
        // domain is the one attached to `dev`'s group.
        unsafe { bindings::iommu_detach_device(self.0.as_ptr(), raw_dev(dev)) };
    }
}

impl Drop for IommuDomain {
    fn drop(&mut self) {
        // SAFETY: The domain was allocated by `new` and is not attached:
        // whoever attached it detached it first (`attach`'s safety
        // requirements).
        unsafe { bindings::iommu_domain_free(self.0.as_ptr()) };
    }
}
