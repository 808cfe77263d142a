// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Buffer objects (BOs).
//!
//! A BO is a shmem GEM object ([`crate::ext::gem::Object`]) whose pages are
//! pinned and mapped into the creating file's address space when it is
//! created; BO_CREATE returns its device address. The BO lives until its last
//! reference is gone — the handle (dropped by the core `GEM_CLOSE` or when
//! the file closes), every mmap, and every job that uses it — and only then
//! is it unmapped and are its pages released.
//!
//! Sizes round up to the kernel's page size. A maximum size per BO, a cap
//! on the device's total and a cap on each open file's total (so one client
//! cannot pin everything) are module parameters.

use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::{prelude::*, sync::aref::ARef, sync::Arc, sync::SetOnce};

use crate::ext::accel::{Device, File};
use crate::ext::gem::Object;
use crate::hw::uapi;
use crate::vm::{Mapping, Vm, PAGE_SIZE};
use crate::AneDriver;

/// A buffer object of this driver.
pub(crate) type Bo = Object<AneDriver, BoData>;

/// The bytes of BOs one open file holds, against its cap. BOs of the
/// file (and of its programs) keep it alive.
pub(crate) struct ClientBytes {
    used: AtomicU64,
}

impl ClientBytes {
    /// None yet.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                used: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?)
    }
}

/// The driver's data of a BO.
pub(crate) struct BoData {
    dev: ARef<Device<AneDriver>>,
    size: u64,
    /// The file it is counted against (kernel BOs of the firmware: none).
    client: Option<Arc<ClientBytes>>,
    /// Counted against the device cap (the firmware's own memory is not:
    /// its budget is the range reserved for it at probe).
    counted: bool,
    mapping: SetOnce<Mapping>,
}

impl BoData {
    /// The BO's mapping in its file's address space.
    pub(crate) fn mapping(&self) -> Result<&Mapping> {
        self.mapping.as_ref().ok_or(EINVAL)
    }
}

impl Drop for BoData {
    fn drop(&mut self) {
        if self.counted {
            self.dev.bo_total.fetch_sub(self.size, Ordering::Relaxed);
        }
        if let Some(c) = &self.client {
            c.used.fetch_sub(self.size, Ordering::Relaxed);
        }
    }
}

/// Rounds `size` up to the page size; `None` on overflow.
fn page_align(size: u64) -> Option<u64> {
    size.checked_add(PAGE_SIZE - 1)
        .map(|s| s & !(PAGE_SIZE - 1))
}

/// Creates a BO of `size` bytes mapped into `file`'s address space, counted
/// against the device's and the file's caps, without a handle: the caller
/// owns the only reference.
fn create(dev: &Device<AneDriver>, file: &File<AneDriver>, size: u64) -> Result<ARef<Bo>> {
    create_in(dev, file, &file.inner().vm, size)
}

/// Creates a BO of `size` bytes for `file`, mapped into `vm`, counted
/// against the device's and the file's caps, without a handle.
fn create_in(
    dev: &Device<AneDriver>,
    file: &File<AneDriver>,
    vm: &Arc<Vm>,
    size: u64,
) -> Result<ARef<Bo>> {
    create_mapped(dev, Some(&file.inner().bytes), size, |bo| vm.map(bo))
}

/// Creates a BO of the firmware's own memory (H14: its image and runtime
/// grants), `size` bytes, without a handle. It comes out of the range
/// `vm` reserved for the firmware at probe, which is also its budget, and
/// is not counted against the clients' caps: no client's allocations can
/// make a firmware grant fail (kernel-2 N2).
pub(crate) fn create_kernel(dev: &Device<AneDriver>, vm: &Arc<Vm>, size: u64) -> Result<ARef<Bo>> {
    create_mapped_as(dev, None, false, size, |bo| vm.map_reserved(bo), None)
}

/// Creates a copy of a loaded program's section (H14), `size` bytes,
/// without a handle. It comes out of the range `vm` reserved for loaded
/// programs at probe (`fw_program_mb`), which is also its budget, and is
/// not counted against the clients' caps: the firmware keeps it until
/// reboot, and no client's loads may shrink what the others can allocate.
/// `ENOSPC` once that range is full.
pub(crate) fn create_program_copy(
    dev: &Device<AneDriver>,
    vm: &Arc<Vm>,
    size: u64,
) -> Result<ARef<Bo>> {
    create_mapped_as(dev, None, false, size, |bo| vm.map_program(bo), None)
}

/// Creates a kernel BO of `size` bytes mapped at the fixed address `iova`
/// of `vm` (outside its allocator's window), without a handle, of the
/// firmware's memory (not counted against the clients' caps).
pub(crate) fn create_fixed(
    dev: &Device<AneDriver>,
    vm: &Arc<Vm>,
    size: u64,
    iova: u64,
) -> Result<ARef<Bo>> {
    create_mapped_as(dev, None, false, size, |bo| vm.map_fixed(bo, iova), None)
}

/// Creates a BO of `size` bytes, counted against the device cap and
/// `client`'s, and maps it with `map`.
fn create_mapped(
    dev: &Device<AneDriver>,
    client: Option<&Arc<ClientBytes>>,
    size: u64,
    map: impl FnOnce(&Bo) -> Result<Mapping>,
) -> Result<ARef<Bo>> {
    create_mapped_as(dev, client, true, size, map, None)
}

/// [`create_mapped`], counted against the device cap only if `counted`;
/// with `fill`, a kernel-private object whose pages are written by it
/// instead of zeroed ([`Object::new_private`]).
fn create_mapped_as(
    dev: &Device<AneDriver>,
    client: Option<&Arc<ClientBytes>>,
    counted: bool,
    size: u64,
    map: impl FnOnce(&Bo) -> Result<Mapping>,
    fill: Option<crate::ext::gem::Fill<'_>>,
) -> Result<ARef<Bo>> {
    if size == 0 {
        return Err(EINVAL);
    }
    let size = page_align(size).ok_or(E2BIG)?;
    if counted && size > dev.limits.bo_max {
        return Err(E2BIG);
    }
    // Reserve the bytes against the caps first; `BoData`'s drop gives them
    // back on every failure path below.
    let before = if counted {
        dev.bo_total.fetch_add(size, Ordering::Relaxed)
    } else {
        0
    };
    let mine = client.map(|c| c.used.fetch_add(size, Ordering::Relaxed));
    let data = BoData {
        dev: dev.into(),
        size,
        client: client.cloned(),
        counted,
        mapping: SetOnce::new(),
    };
    if (counted && before.saturating_add(size) > dev.limits.bo_total_max)
        || mine.is_some_and(|m| m.saturating_add(size) > dev.limits.bo_client_max)
    {
        drop(data);
        return Err(ENOSPC);
    }
    let len = usize::try_from(size).map_err(|_| E2BIG)?;
    let wc = dev.soc.mem.write_combined();
    let bo = match fill {
        Some(f) => Bo::new_private(dev, len, data, wc, f)?,
        None => Bo::new(dev, len, data, wc)?,
    };
    let mapping = map(&bo)?;
    if !bo.mapping.populate(mapping) {
        return Err(EINVAL);
    }
    Ok(bo)
}

/// A kernel-owned BO in `file`'s address space: no handle, never mapped
/// to userspace, mapped read-only for the device (H13 program copies: the
/// engine must run exactly what was validated).
///
/// Its contents are `pieces`, each at its offset (in offset order, not
/// overlapping), and zeros everywhere else. Each page is written once,
/// straight from the pieces, and nothing zeroes it first; its memory comes
/// in large chunks from the page allocator, not page by page through
/// shmem ([`Object::new_private`]), so a program's weights cost about one
/// pass over them.
pub(crate) fn create_private(
    dev: &Device<AneDriver>,
    file: &File<AneDriver>,
    size: u64,
    pieces: &[(u64, Piece<'_>)],
) -> Result<ARef<Bo>> {
    let size = page_align(size).ok_or(E2BIG)?;
    let mut end = 0u64;
    for (at, piece) in pieces {
        if *at < end {
            return Err(EINVAL);
        }
        end = at.checked_add(piece.len()).ok_or(EINVAL)?;
        if let Piece::Bo(bo, off, len) = piece {
            if off.checked_add(*len).is_none_or(|e| e > bo.size() as u64) {
                return Err(EINVAL);
            }
        }
    }
    if end > size {
        return Err(EINVAL);
    }
    let mut fill = |pages: &[crate::ext::gem::PagePtr]| -> Result {
        // Bytes of the copy written so far.
        let mut done = 0usize;
        for (at, piece) in pieces {
            let at = usize::try_from(*at).map_err(|_| EINVAL)?;
            if at > done {
                // SAFETY: `pages` are the new object's, alive while it is
                // filled; the range is checked.
                unsafe { crate::ext::gem::pages_zero(pages, done, at - done) }?;
            }
            piece.copy_into(pages, at)?;
            done = at
                .checked_add(usize::try_from(piece.len()).map_err(|_| EINVAL)?)
                .ok_or(EINVAL)?;
        }
        let total = pages
            .len()
            .checked_mul(kernel::page::PAGE_SIZE)
            .ok_or(EINVAL)?;
        if done < total {
            // SAFETY: As above.
            unsafe { crate::ext::gem::pages_zero(pages, done, total - done) }?;
        }
        Ok(())
    };
    let vm = &file.inner().vm;
    create_mapped_as(
        dev,
        Some(&file.inner().bytes),
        true,
        size,
        |bo| vm.map_read_only(bo),
        Some(&mut fill),
    )
}

/// Where part of a private copy comes from ([`create_private`]).
pub(crate) enum Piece<'a> {
    /// Kernel memory.
    Bytes(&'a [u8]),
    /// `len` bytes of a BO from an offset.
    Bo(&'a Bo, u64, u64),
}

impl Piece<'_> {
    /// Its length in bytes.
    fn len(&self) -> u64 {
        match self {
            Piece::Bytes(b) => b.len() as u64,
            Piece::Bo(_, _, len) => *len,
        }
    }

    /// Copies the piece into `pages` (a new private object's) at byte
    /// `at` (the ranges are checked).
    fn copy_into(&self, pages: &[crate::ext::gem::PagePtr], at: usize) -> Result {
        match self {
            // SAFETY: `pages` are the new object's, alive while it is
            // filled; `pages_write` checks the range.
            Piece::Bytes(b) => unsafe { crate::ext::gem::pages_write(pages, at, b) },
            Piece::Bo(bo, off, len) => {
                let off = usize::try_from(*off).map_err(|_| EINVAL)?;
                let len = usize::try_from(*len).map_err(|_| EINVAL)?;
                // SAFETY: The caller holds `bo`, so its pages are pinned;
                // the destination pages are the new object's, never one of
                // `bo`'s; `pages_copy` checks both ranges.
                unsafe { crate::ext::gem::pages_copy(pages, at, bo.pages(), off, len) }
            }
        }
    }
}

/// `DRM_IOCTL_ANE_BO_CREATE`.
pub(crate) fn bo_create(
    dev: &Device<AneDriver>,
    args: &mut uapi::BoCreate,
    file: &File<AneDriver>,
) -> Result<u32> {
    if args.flags != 0 {
        return Err(EINVAL);
    }
    let bo = create(dev, file, args.size)?;
    args.handle = bo.create_handle(file)?;
    args.mmap_offset = bo.mmap_offset();
    args.iova = bo.mapping()?.iova();
    Ok(0)
}

/// Runs `f` on each page-sized piece of `[offset, offset + len)` of `bo`:
/// the page, the offset in it, and the piece's offset and length. Long
/// ranges (PROGRAM_CREATE stages up to 256 MiB) yield the CPU every
/// [`RESCHED_BYTES`]; a shorter one never does, so small reads and writes
/// stay callable where sleeping is not allowed.
fn for_each_piece(
    bo: &Bo,
    offset: u64,
    len: usize,
    mut f: impl FnMut(&crate::ext::gem::PagePtr, usize, usize, usize) -> Result,
) -> Result {
    let end = offset.checked_add(len as u64).ok_or(EINVAL)?;
    if end > bo.size() as u64 {
        return Err(EINVAL);
    }
    let pages = bo.pages();
    let (mut done, mut since) = (0usize, 0u64);
    while done < len {
        let at = offset + done as u64;
        let page = pages.get((at / PAGE_SIZE) as usize).ok_or(EINVAL)?;
        let in_page = (at % PAGE_SIZE) as usize;
        let n = core::cmp::min(len - done, PAGE_SIZE as usize - in_page);
        f(page, in_page, done, n)?;
        done += n;
        since += n as u64;
        if since >= RESCHED_BYTES {
            crate::ext::gem::cond_resched();
            since = 0;
        }
    }
    Ok(())
}

/// Copies bytes of `bo` at `offset` into `buf` (a write-combined BO through
/// its write-combined mapping, never the cacheable linear map).
pub(crate) fn read(bo: &Bo, offset: u64, buf: &mut [u8]) -> Result {
    // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and
    // `read_uninit` writes only initialised bytes.
    let buf = unsafe { &mut *(core::ptr::from_mut(buf) as *mut [MaybeUninit<u8>]) };
    read_uninit(bo, offset, buf)
}

/// [`read`] into memory that may be uninitialised (PROGRAM_CREATE's
/// staging buffer, never zeroed first): on success every byte of `buf`
/// has been written. A cached BO is read page by page in C, each whole
/// page with the architecture's page copy when `buf` is page-aligned
/// there (`ane_glue_pages_read`).
pub(crate) fn read_uninit(bo: &Bo, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result {
    let offset = usize::try_from(offset).map_err(|_| EINVAL)?;
    if offset
        .checked_add(buf.len())
        .is_none_or(|end| end > bo.size())
    {
        return Err(EINVAL);
    }
    if bo.write_combined() {
        return bo.wc_read_uninit(offset, buf);
    }
    // SAFETY: `bo` is alive, so its pages are pinned; `pages_read` checks
    // the range.
    unsafe { crate::ext::gem::pages_read(bo.pages(), offset, buf) }
}

/// Copies `buf` into `bo` at `offset` (as [`read`] for a write-combined
/// BO).
pub(crate) fn write(bo: &Bo, offset: u64, buf: &[u8]) -> Result {
    if bo.write_combined() {
        return bo.wc_write(usize::try_from(offset).map_err(|_| EINVAL)?, buf);
    }
    for_each_piece(bo, offset, buf.len(), |page, in_page, at, n| {
        let src = buf.get(at..at + n).ok_or(EINVAL)?;
        // SAFETY: `bo` is alive, so its pages are pinned.
        unsafe { page.write(in_page, src) }
    })
}

/// Bytes [`copy`] moves between two yields of the CPU.
pub(crate) const RESCHED_BYTES: u64 = 1 << 20;

/// Copies `len` bytes at `src_off` of `src` into `dst` at `dst_off`, page
/// to page: one pass over the bytes, without a bounce buffer, one
/// `memcpy` per page-sized piece, yielding the CPU every
/// [`RESCHED_BYTES`] (a program's weights are hundreds of MiB). `EINVAL`
/// if a range is outside its BO, `src` and `dst` are the same BO, or one
/// is write-combined and the other not (a device's BOs share one memory
/// type). Write-combined BOs are copied mapping to mapping.
pub(crate) fn copy(src: &Bo, src_off: u64, dst: &Bo, dst_off: u64, len: u64) -> Result {
    if core::ptr::eq(src, dst) {
        return Err(EINVAL);
    }
    let fits = |off: u64, bo: &Bo| off.checked_add(len).is_some_and(|e| e <= bo.size() as u64);
    if !fits(src_off, src) || !fits(dst_off, dst) {
        return Err(EINVAL);
    }
    if src.write_combined() || dst.write_combined() {
        return copy_wc(src, src_off, dst, dst_off, len);
    }
    let (from, to) = (src.pages(), dst.pages());
    let (mut done, mut since) = (0u64, 0u64);
    while done < len {
        let (s, d) = (src_off + done, dst_off + done);
        let (s_in, d_in) = (s % PAGE_SIZE, d % PAGE_SIZE);
        let n = (len - done).min(PAGE_SIZE - s_in.max(d_in));
        let sp = from.get((s / PAGE_SIZE) as usize).ok_or(EINVAL)?;
        let dp = to.get((d / PAGE_SIZE) as usize).ok_or(EINVAL)?;
        // SAFETY: The caller holds both BOs, so their pages are pinned; they
        // are different objects (checked above), so their pages differ.
        unsafe { dp.copy_from(d_in as usize, sp, s_in as usize, n as usize) }?;
        done += n;
        since += n;
        if since >= RESCHED_BYTES {
            crate::ext::gem::cond_resched();
            since = 0;
        }
    }
    Ok(())
}

/// [`copy`] between two write-combined BOs (the caller checked the
/// ranges): through their write-combined mappings, yielding the CPU every
/// [`RESCHED_BYTES`].
fn copy_wc(src: &Bo, src_off: u64, dst: &Bo, dst_off: u64, len: u64) -> Result {
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(RESCHED_BYTES);
        let at = |off: u64| usize::try_from(off + done).map_err(|_| EINVAL);
        let n_us = usize::try_from(n).map_err(|_| EINVAL)?;
        dst.wc_copy_from(at(dst_off)?, src, at(src_off)?, n_us)?;
        done += n;
        if done < len {
            crate::ext::gem::cond_resched();
        }
    }
    Ok(())
}

/// Looks up a BO of `file`: `ENOENT` for an unknown handle, `EACCES` for a
/// BO mapped in another file's address space.
pub(crate) fn lookup(file: &File<AneDriver>, handle: u32) -> Result<ARef<Bo>> {
    // SAFETY: Every GEM object of this driver's devices is a `Bo`: the
    // driver creates objects only as `Bo` (`create_mapped_as`, the one
    // place that calls `Object::new`/`new_private`), refuses export
    // (`ext::gem`'s `export_refused`) and cannot import (its `drm_driver`
    // has no `gem_prime_import_sg_table`, so the PRIME core refuses with
    // `EINVAL`).
    let bo = unsafe { Bo::lookup(file, handle) }?;
    if !kernel::sync::Arc::ptr_eq(bo.mapping()?.vm(), &file.inner().vm) {
        return Err(EACCES);
    }
    Ok(bo)
}

/// `DRM_IOCTL_ANE_BO_INFO`.
pub(crate) fn bo_info(
    _dev: &Device<AneDriver>,
    args: &mut uapi::BoInfo,
    file: &File<AneDriver>,
) -> Result<u32> {
    if args.pad != 0 {
        return Err(EINVAL);
    }
    let bo = lookup(file, args.handle)?;
    args.size = bo.size() as u64;
    args.mmap_offset = bo.mmap_offset();
    args.iova = bo.mapping()?.iova();
    Ok(0)
}
