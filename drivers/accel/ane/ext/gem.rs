// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Shmem-backed GEM objects for accel devices.
//!
//! `kernel::drm::gem::shmem::Object` requires a `kernel::drm::Device`, which
//! cannot be an accel device in 7.3 (see [`super::accel`]). [`Object`] is the
//! same idea over [`super::accel::Device`]: a `struct drm_gem_shmem_object`
//! followed by driver data, using the C shmem helpers for everything but
//! `free`.
//!
//! Objects are created with their pages allocated and pinned, since the
//! driver maps them into a device address space at creation. mmap goes
//! through the DRM fake offset (`drm_gem_mmap` → the shmem helper). An
//! object is created cached or write-combined, as its device's memory type
//! says (`crate::hw::mem::MemType`): a cached object is mapped cacheably to
//! user space and copied through the kernel's linear map; a write-combined
//! object is mapped write-combined to user space (the shmem helper's
//! `map_wc`) and to the kernel (one `vmap` for its lifetime), and the kernel
//! never touches it through the cacheable linear map. dma-buf export is
//! refused: a buffer belongs to the file that created it.
//!
//! A kernel-private object ([`Object::new_private`]: a program's private
//! copy) has no shmem file, no handle and no mmap: its pages are folios
//! from the page allocator, as large as it gives without effort, written
//! once by the creator and freed a folio at a time.

use core::{
    ffi::c_void,
    marker::PhantomData,
    mem::{ManuallyDrop, MaybeUninit},
    ptr::NonNull,
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};

use kernel::{
    bindings,
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};

use super::accel::{Device, Driver, File};
use super::glue;

/// A page of a GEM object, as a device address space records it: what a
/// page-table entry points at.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct PagePtr(NonNull<bindings::page>);

// SAFETY: A page pointer is a plain address; access goes through `read` and
// `write`, whose callers guarantee the page is alive.
unsafe impl Send for PagePtr {}
// SAFETY: See `Send`.
unsafe impl Sync for PagePtr {}

/// `EINVAL` unless `[offset, offset + len)` lies within one page.
fn in_page(offset: usize, len: usize) -> Result {
    match offset.checked_add(len) {
        Some(end) if end <= kernel::page::PAGE_SIZE => Ok(()),
        _ => Err(EINVAL),
    }
}

// The copies below are made in C (`ane_glue.c`, `memcpy_from_page` and
// `memcpy_to_page`), not with `kernel::page`'s `read_raw`/`write_raw`:
// those require that no write to the same bytes races with the copy, and
// these pages are shared with userspace (mmap) and with the device, which
// may write them at any time. No Rust reference to the page's memory is
// ever formed; a racing write only leaves the copied bytes unspecified, as
// in any kernel copy of user-shared memory.
impl PagePtr {
    /// Copies `dst.len()` bytes out of the page, from `offset`.
    ///
    /// # Safety
    ///
    /// The page must still be pinned by its object (the caller holds the
    /// mapping that points at it).
    pub unsafe fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        in_page(offset, dst.len())?;
        // SAFETY: The page is alive by the safety requirements and the
        // range lies within it (checked above); `dst` is valid for
        // `dst.len()` writes and is not the page's memory. Concurrent
        // writers of the page: see the comment above this impl.
        unsafe {
            glue::ane_glue_page_read(
                self.0.as_ptr().cast(),
                offset,
                dst.as_mut_ptr().cast(),
                dst.len(),
            )
        };
        Ok(())
    }

    /// Copies `src` into the page at `offset`.
    ///
    /// # Safety
    ///
    /// As for [`PagePtr::read`].
    pub unsafe fn write(&self, offset: usize, src: &[u8]) -> Result {
        in_page(offset, src.len())?;
        // SAFETY: As in `read`; `src` is valid for `src.len()` reads.
        unsafe {
            glue::ane_glue_page_write(
                self.0.as_ptr().cast(),
                offset,
                src.as_ptr().cast(),
                src.len(),
            )
        };
        Ok(())
    }
}

impl PagePtr {
    /// Copies `len` bytes at `src_off` of `src` into this page at `offset`,
    /// page to page, without a bounce buffer.
    ///
    /// # Safety
    ///
    /// As for [`PagePtr::read`], for both pages; and the two ranges must
    /// not overlap (the pages of two different objects never do).
    pub unsafe fn copy_from(
        &self,
        offset: usize,
        src: &PagePtr,
        src_off: usize,
        len: usize,
    ) -> Result {
        in_page(offset, len)?;
        in_page(src_off, len)?;
        // SAFETY: Both pages are alive and the ranges do not overlap, by
        // the safety requirements; both ranges lie within their pages
        // (checked above). Concurrent writers: see the comment above the
        // first impl.
        unsafe {
            glue::ane_glue_page_copy(
                self.0.as_ptr().cast(),
                offset,
                src.0.as_ptr().cast(),
                src_off,
                len,
            )
        };
        Ok(())
    }
}

/// What [`Object::new_private`] calls once with the new object's pages,
/// every byte of which it must write.
pub type Fill<'a> = &'a mut dyn FnMut(&[PagePtr]) -> Result;

/// `EINVAL` unless `[offset, offset + len)` lies within the bytes of
/// `pages`.
fn in_pages(pages: &[PagePtr], offset: usize, len: usize) -> Result {
    let end = offset.checked_add(len).ok_or(EINVAL)?;
    match pages.len().checked_mul(kernel::page::PAGE_SIZE) {
        Some(bytes) if end <= bytes => Ok(()),
        _ => Err(EINVAL),
    }
}

/// Copies `len` bytes at `src_off` of the pages `src` (an object's pages,
/// in order) into the pages `dst` at `dst_off`: one copy per piece that
/// stays within a page on both sides, in C, without a bounce buffer,
/// yielding the CPU every MiB.
///
/// # Safety
///
/// Every page of both arrays must stay alive for the call (pinned or
/// owned by an object the caller holds), and no page may be in both.
pub unsafe fn pages_copy(
    dst: &[PagePtr],
    dst_off: usize,
    src: &[PagePtr],
    src_off: usize,
    len: usize,
) -> Result {
    in_pages(dst, dst_off, len)?;
    in_pages(src, src_off, len)?;
    // SAFETY: Both ranges lie within their arrays (checked above), whose
    // pages are alive and distinct by the safety requirements; `PagePtr`
    // is a transparent non-null page pointer. Concurrent writers of the
    // source: see the comment above the first `PagePtr` impl.
    unsafe {
        glue::ane_glue_pages_copy(
            dst.as_ptr().cast(),
            dst_off,
            src.as_ptr().cast(),
            src_off,
            len,
        )
    };
    Ok(())
}

/// Copies `src` into the pages `dst` at `dst_off`, yielding the CPU every
/// MiB.
///
/// # Safety
///
/// Every page of `dst` must stay alive for the call.
pub unsafe fn pages_write(dst: &[PagePtr], dst_off: usize, src: &[u8]) -> Result {
    in_pages(dst, dst_off, src.len())?;
    // SAFETY: The range lies within the array (checked above), whose pages
    // are alive by the safety requirements; `src` is valid for
    // `src.len()` reads and is not one of the pages.
    unsafe {
        glue::ane_glue_pages_write(dst.as_ptr().cast(), dst_off, src.as_ptr().cast(), src.len())
    };
    Ok(())
}

/// Copies `len` bytes at `src_off` of the pages `src` into `dst`, one
/// copy per page-sized piece in C, writing every byte of `dst[..len]`
/// (which may be uninitialised memory), yielding the CPU every MiB of a
/// long copy (a shorter one never sleeps).
///
/// # Safety
///
/// Every page of `src` must stay alive for the call.
pub unsafe fn pages_read(src: &[PagePtr], src_off: usize, dst: &mut [MaybeUninit<u8>]) -> Result {
    in_pages(src, src_off, dst.len())?;
    // SAFETY: The range lies within the array (checked above), whose pages
    // are alive by the safety requirements; `dst` is valid for
    // `dst.len()` writes and is not one of the pages (a Rust slice, not
    // an object's memory). Concurrent writers of the source: see the
    // comment above the first `PagePtr` impl.
    unsafe {
        glue::ane_glue_pages_read(
            dst.as_mut_ptr().cast(),
            src.as_ptr().cast(),
            src_off,
            dst.len(),
        )
    };
    Ok(())
}

/// Zeroes `len` bytes of the pages `dst` from `dst_off`.
///
/// # Safety
///
/// Every page of `dst` must stay alive for the call.
pub unsafe fn pages_zero(dst: &[PagePtr], dst_off: usize, len: usize) -> Result {
    in_pages(dst, dst_off, len)?;
    // SAFETY: The range lies within the array (checked above), whose pages
    // are alive by the safety requirements.
    unsafe { glue::ane_glue_pages_zero(dst.as_ptr().cast(), dst_off, len) };
    Ok(())
}

/// Gives the CPU to another task if one is due (`cond_resched`): long
/// copies call it between pieces, so a kernel without preemption does not
/// stall for the whole copy.
pub fn cond_resched() {
    // SAFETY: Called from process context (an ioctl), where sleeping is
    // allowed; the function takes no arguments.
    unsafe { glue::ane_glue_cond_resched() }
}

/// A scatter list built by [`Object::sg_table`]; freed on drop.
pub struct SgTable(NonNull<bindings::sg_table>);

impl SgTable {
    /// The raw `struct sg_table`.
    pub fn as_raw(&self) -> *mut bindings::sg_table {
        self.0.as_ptr()
    }
}

impl Drop for SgTable {
    fn drop(&mut self) {
        // SAFETY: `drm_gem_shmem_get_sg_table` allocated the table with
        // `kmalloc` and filled it with `sg_alloc_table_from_pages`.
        unsafe {
            bindings::sg_free_table(self.0.as_ptr());
            bindings::kfree(self.0.as_ptr().cast());
        }
    }
}

/// A shmem GEM object of driver `T` carrying data `D`.
///
/// # Invariants
///
/// `obj` is an initialised shmem object of a `Device<T>` whose funcs are
/// `Self::FUNCS`, with its pages pinned; `data` is initialised until `free`.
/// `wc` is null or a `vmap` of all the object's pages, write-combined,
/// valid until `free`. A `private` object ([`Object::new_private`]) has
/// no shmem file: its `pages` array comes from `ane_glue_chunks_alloc`,
/// holds `size / PAGE_SIZE` pages that live until `free`, and no shmem
/// helper other than the scatter-list one is ever called on it.
#[repr(C)]
pub struct Object<T: Driver, D: Send + Sync> {
    obj: Opaque<bindings::drm_gem_shmem_object>,
    data: ManuallyDrop<D>,
    pinned: AtomicBool,
    /// Set at creation, never changed.
    private: bool,
    wc: AtomicPtr<c_void>,
    _p: PhantomData<T>,
}

// SAFETY: GEM objects are thread-safe on the C side; `D` is `Send + Sync`.
unsafe impl<T: Driver, D: Send + Sync> Send for Object<T, D> {}
// SAFETY: See `Send`.
unsafe impl<T: Driver, D: Send + Sync> Sync for Object<T, D> {}

// SAFETY: `drm_gem_object_get`/`put` manage the object's refcount; `free`
// runs when it reaches zero.
unsafe impl<T: Driver, D: Send + Sync> AlwaysRefCounted for Object<T, D> {
    fn inc_ref(&self) {
        // SAFETY: A shared reference proves the refcount is non-zero.
        unsafe { bindings::drm_gem_object_get(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference.
        unsafe { bindings::drm_gem_object_put(obj.as_ref().as_raw()) };
    }
}

impl<T: Driver, D: Send + Sync> core::ops::Deref for Object<T, D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.data
    }
}

/// Refuses dma-buf export (`PRIME_HANDLE_TO_FD`).
extern "C" fn export_refused(
    _obj: *mut bindings::drm_gem_object,
    _flags: i32,
) -> *mut bindings::dma_buf {
    super::errno::eopnotsupp().to_ptr()
}

impl<T: Driver, D: Send + Sync> Object<T, D> {
    const FUNCS: bindings::drm_gem_object_funcs = bindings::drm_gem_object_funcs {
        free: Some(Self::free_callback),
        open: None,
        close: None,
        print_info: Some(bindings::drm_gem_shmem_object_print_info),
        export: Some(export_refused),
        pin: Some(bindings::drm_gem_shmem_object_pin),
        unpin: Some(bindings::drm_gem_shmem_object_unpin),
        get_sg_table: Some(bindings::drm_gem_shmem_object_get_sg_table),
        vmap: Some(bindings::drm_gem_shmem_object_vmap),
        vunmap: Some(bindings::drm_gem_shmem_object_vunmap),
        mmap: Some(bindings::drm_gem_shmem_object_mmap),
        status: Some(Self::status_callback),
        rss: None,
        vm_ops: &raw const bindings::drm_gem_shmem_vm_ops,
        evict: None,
    };

    /// The functions of a private object ([`Object::new_private`]): no
    /// handle, no mmap, no dma-buf, no pin or vmap through the shmem
    /// helpers; only `free`.
    const PRIVATE_FUNCS: bindings::drm_gem_object_funcs = bindings::drm_gem_object_funcs {
        free: Some(Self::free_callback),
        open: None,
        close: None,
        print_info: None,
        export: Some(export_refused),
        pin: None,
        unpin: None,
        get_sg_table: None,
        vmap: None,
        vunmap: None,
        mmap: None,
        status: Some(Self::status_callback),
        rss: None,
        vm_ops: core::ptr::null(),
        evict: None,
    };

    /// Creates an object of `size` bytes (a multiple of the page size) with
    /// its pages allocated and pinned, write-combined for the CPU when
    /// `write_combined` (see the module documentation). `data` is dropped
    /// when the last reference goes, before the pages are released.
    pub fn new(dev: &Device<T>, size: usize, data: D, write_combined: bool) -> Result<ARef<Self>> {
        Self::create(dev, size, data, write_combined)
    }

    /// A kernel-private object of `size` bytes (a non-zero multiple of
    /// the page size), never given a handle or mapped to user space, whose
    /// every byte is written by `fill` once: `fill(pages)` must write all
    /// of the object's `pages` (zeros included), since they are not zeroed
    /// first. Its memory does not come through shmem: it is
    /// allocated in chunks as large as the page allocator gives
    /// (`ane_glue_chunks_alloc`: up to its largest order, falling back to
    /// single pages), charged to the caller's memory cgroup, and freed a
    /// chunk at a time. `fill` writes through the pages' cacheable linear
    /// alias, so a write-combined object takes the same cleaning before
    /// the device sees it as a shmem one.
    pub fn new_private(
        dev: &Device<T>,
        size: usize,
        data: D,
        write_combined: bool,
        fill: Fill<'_>,
    ) -> Result<ARef<Self>> {
        let count = size >> bindings::PAGE_SHIFT;
        if count == 0 || count << bindings::PAGE_SHIFT != size {
            return Err(EINVAL);
        }
        let count_ul = core::ffi::c_ulong::try_from(count).map_err(|_| E2BIG)?;
        // As in `create`: `data` moves in only once the box exists.
        let new = KBox::<Self>::new_uninit(GFP_KERNEL_ACCOUNT)?.write(Self {
            obj: Opaque::zeroed(),
            data: ManuallyDrop::new(data),
            pinned: AtomicBool::new(false),
            private: true,
            wc: AtomicPtr::new(core::ptr::null_mut()),
            _p: PhantomData,
        });
        // SAFETY: No preconditions; a non-null result holds `count` pages.
        let pages = unsafe { glue::ane_glue_chunks_alloc(count_ul) };
        if pages.is_null() {
            let mut new = new;
            // SAFETY: `data` is initialised and never used again.
            unsafe { ManuallyDrop::drop(&mut new.data) };
            return Err(ENOMEM);
        }
        // SAFETY: `obj` is zeroed and not shared yet; `dev` is a live DRM
        // device. The object gets no shmem file and no mmap offset.
        unsafe {
            (*new.obj.get()).base.funcs = &Self::PRIVATE_FUNCS;
            glue::ane_glue_gem_private_init(dev.as_raw(), &raw mut (*new.obj.get()).base, size);
            (*new.obj.get()).pages = pages;
        }
        new.pinned.store(true, Ordering::Release);
        let raw = KBox::into_raw(new);
        // SAFETY: We take over the reference `drm_gem_private_object_init`
        // created; from here on `free_callback` owns the teardown (the
        // pages included).
        let obj = unsafe { ARef::from_raw(NonNull::new_unchecked(raw)) };
        fill(obj.pages())?;
        obj.finish(write_combined)?;
        Ok(obj)
    }

    fn create(dev: &Device<T>, size: usize, data: D, write_combined: bool) -> Result<ARef<Self>> {
        // The allocation first: `data` is moved in only once it cannot
        // fail, since a `ManuallyDrop` field dropped with a value that never
        // reached its box would leak what `data` holds (found by fault
        // injection: the device reference of every BO).
        let new = KBox::<Self>::new_uninit(GFP_KERNEL_ACCOUNT)?.write(Self {
            obj: Opaque::zeroed(),
            data: ManuallyDrop::new(data),
            pinned: AtomicBool::new(false),
            private: false,
            wc: AtomicPtr::new(core::ptr::null_mut()),
            _p: PhantomData,
        });
        // SAFETY: `obj` is zeroed and not shared yet.
        unsafe {
            (*new.obj.get()).base.funcs = &Self::FUNCS;
            // User mmaps (the shmem helper's fault handler) take the
            // object's memory type.
            (*new.obj.get()).set_map_wc(write_combined);
        }
        // SAFETY: `dev` is a live DRM device, `obj` a zeroed shmem object.
        if let Err(e) = kernel::error::to_result(unsafe {
            bindings::drm_gem_shmem_init(dev.as_raw(), new.obj.get(), size)
        }) {
            // `drm_gem_shmem_init` cleaned up after itself; `data` still
            // needs dropping.
            let mut new = new;
            // SAFETY: `data` is initialised and never used again.
            unsafe { ManuallyDrop::drop(&mut new.data) };
            return Err(e);
        }
        let raw = KBox::into_raw(new);
        // SAFETY: We take over the reference `drm_gem_shmem_init` created;
        // from here on `free_callback` owns the teardown.
        let obj = unsafe { ARef::from_raw(NonNull::new_unchecked(raw)) };
        // SAFETY: `obj` is an initialised shmem object.
        kernel::error::to_result(unsafe { bindings::drm_gem_shmem_pin(obj.obj.get()) })?;
        obj.pinned.store(true, Ordering::Release);
        obj.finish(write_combined)?;
        Ok(obj)
    }

    /// The last step of creation: a write-combined object gets its kernel
    /// mapping. On failure the caller drops the object, which unpins.
    fn finish(&self, write_combined: bool) -> Result {
        if write_combined {
            let count = u32::try_from(self.pages().len()).map_err(|_| E2BIG)?;
            // SAFETY: The pages are pinned (shmem) or owned (private) and
            // `pages` holds `count` entries; the mapping is undone in
            // `free_callback`, before the pages go.
            let wc = unsafe { glue::ane_glue_vmap_wc((*self.obj.get()).pages, count) };
            if wc.is_null() {
                return Err(ENOMEM);
            }
            self.wc.store(wc, Ordering::Release);
        }
        Ok(())
    }

    /// Whether the object is write-combined for the CPU.
    pub fn write_combined(&self) -> bool {
        !self.wc.load(Ordering::Acquire).is_null()
    }

    /// The address of byte `offset` of the write-combined kernel mapping,
    /// `len` bytes of which lie inside the object: `EINVAL` for a cached
    /// object or a range outside it.
    fn wc_at(&self, offset: usize, len: usize) -> Result<*mut u8> {
        let base = self.wc.load(Ordering::Acquire);
        if base.is_null() {
            return Err(EINVAL);
        }
        match offset.checked_add(len) {
            // SAFETY: `offset` lies within the mapping of `size` bytes.
            Some(end) if end <= self.size() => Ok(unsafe { base.cast::<u8>().add(offset) }),
            _ => Err(EINVAL),
        }
    }

    /// Copies `dst.len()` bytes at `offset` out of a write-combined object,
    /// through its write-combined mapping. `EINVAL` for a cached object or
    /// a range outside it.
    pub fn wc_read(&self, offset: usize, dst: &mut [u8]) -> Result {
        // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and
        // `wc_read_uninit` writes only initialised bytes.
        let dst = unsafe { &mut *(core::ptr::from_mut(dst) as *mut [MaybeUninit<u8>]) };
        self.wc_read_uninit(offset, dst)
    }

    /// [`Object::wc_read`] into memory that may be uninitialised: every
    /// byte of `dst` is written on success.
    pub fn wc_read_uninit(&self, offset: usize, dst: &mut [MaybeUninit<u8>]) -> Result {
        let src = self.wc_at(offset, dst.len())?;
        // SAFETY: `src` is valid for `dst.len()` bytes while `self` lives
        // (the mapping goes in `free`); `dst` is not the object's memory.
        // No Rust reference to the object's memory is formed: userspace and
        // the device may write it meanwhile (see the comment above the
        // first `PagePtr` impl).
        unsafe { glue::ane_glue_wc_copy(dst.as_mut_ptr().cast(), src.cast(), dst.len()) };
        Ok(())
    }

    /// Copies `src` into a write-combined object at `offset`, through its
    /// write-combined mapping. `EINVAL` as for [`Object::wc_read`].
    pub fn wc_write(&self, offset: usize, src: &[u8]) -> Result {
        let dst = self.wc_at(offset, src.len())?;
        // SAFETY: As in `wc_read`; `src` is valid for `src.len()` reads.
        unsafe { glue::ane_glue_wc_copy(dst.cast(), src.as_ptr().cast(), src.len()) };
        Ok(())
    }

    /// Copies `len` bytes at `src_off` of the write-combined `src` into
    /// this write-combined object at `offset`, mapping to mapping.
    /// `EINVAL` for a cached object, a range outside its object, or `src`
    /// being this object.
    pub fn wc_copy_from(&self, offset: usize, src: &Self, src_off: usize, len: usize) -> Result {
        if core::ptr::eq(self, src) {
            return Err(EINVAL);
        }
        let to = self.wc_at(offset, len)?;
        let from = src.wc_at(src_off, len)?;
        // SAFETY: Both ranges are valid while their objects live; the two
        // objects differ, so do their mappings, and the ranges do not
        // overlap. Concurrent writers: as in `wc_read`.
        unsafe { glue::ane_glue_wc_copy(to.cast(), from.cast(), len) };
        Ok(())
    }

    /// The raw `struct drm_gem_object`.
    pub fn as_raw(&self) -> *mut bindings::drm_gem_object {
        // SAFETY: `obj` is valid; `base` is its first field.
        unsafe { &raw mut (*self.obj.get()).base }
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        // SAFETY: `size` is immutable after initialisation.
        unsafe { (*self.as_raw()).size }
    }

    /// The fake offset to mmap this object at on its device's file.
    pub fn mmap_offset(&self) -> u64 {
        // SAFETY: `drm_gem_shmem_init` created the offset node; it is
        // immutable until `free`.
        unsafe { bindings::drm_vma_node_offset_addr(&raw mut (*self.as_raw()).vma_node) }
    }

    /// The pinned pages backing the object, in order.
    pub fn pages(&self) -> &[PagePtr] {
        let count = self.size() >> bindings::PAGE_SHIFT;
        // SAFETY: The pages stay pinned until `free`; `pages` holds `size /
        // PAGE_SIZE` non-null entries, and `PagePtr` is a transparent
        // wrapper of a non-null page pointer.
        unsafe { core::slice::from_raw_parts((*self.obj.get()).pages.cast::<PagePtr>(), count) }
    }

    /// A scatter list of the object's pages (contiguous pages merged),
    /// not mapped for DMA: the caller maps it into its own IOMMU domain.
    pub fn sg_table(&self) -> Result<SgTable> {
        // SAFETY: The object is initialised and its pages pinned.
        let raw = unsafe { bindings::drm_gem_shmem_get_sg_table(self.obj.get()) };
        let raw = kernel::error::from_err_ptr(raw)?;
        NonNull::new(raw).map(SgTable).ok_or(ENOMEM)
    }

    /// Creates a handle for this object in `file`.
    pub fn create_handle(&self, file: &File<T>) -> Result<u32> {
        let mut handle = 0u32;
        // SAFETY: `file` is an open file of this object's device.
        kernel::error::to_result(unsafe {
            bindings::drm_gem_handle_create(file.as_raw(), self.as_raw(), &mut handle)
        })?;
        Ok(handle)
    }

    /// Looks up `handle` in `file`: `ENOENT` when there is no such handle.
    ///
    /// # Safety
    ///
    /// Every GEM object of a `Device<T>` must be an `Object<T, D>` with
    /// this `D`: the driver creates objects of no other type (no second
    /// `D` for the same `T`) and imports none. Nothing here can check it:
    /// the object is cast by its address.
    pub unsafe fn lookup(file: &File<T>, handle: u32) -> Result<ARef<Self>> {
        // SAFETY: `file` is open; a non-null result carries a reference.
        let raw = unsafe { bindings::drm_gem_object_lookup(file.as_raw(), handle) };
        let raw = NonNull::new(raw).ok_or(ENOENT)?;
        // SAFETY: `base` is the first field of the shmem object, which is
        // the first field of `Self` (both `repr(C)`); by the safety
        // requirements every object of this device is a `Self`.
        Ok(unsafe { ARef::from_raw(raw.cast::<Self>()) })
    }

    /// For fdinfo's `drm-resident-memory`: an object's pages are resident
    /// from its creation (pinned) to its free.
    extern "C" fn status_callback(
        obj: *mut bindings::drm_gem_object,
    ) -> bindings::drm_gem_object_status {
        let this = obj.cast::<Self>();
        // SAFETY: The DRM core calls this for a live object of this driver
        // (it holds the file's handle table lock, so the handle keeps the
        // object alive); every such object is a `Self`, with `obj` first.
        if unsafe { (*this).pinned.load(Ordering::Acquire) } {
            bindings::drm_gem_object_status_DRM_GEM_OBJECT_RESIDENT
        } else {
            0
        }
    }

    extern "C" fn free_callback(obj: *mut bindings::drm_gem_object) {
        let this = obj.cast::<Self>();
        // The order (kernel-2 1.14):
        // 1. A reference to the DRM device, taken first: `data` may hold
        //    the last other one (the driver's `BoData` holds an
        //    `ARef<Device>`), and everything after step 2 still
        //    dereferences `obj->dev` (the shmem helpers' `drm_WARN_ON`s,
        //    `drm_gem_object_release` removing the fake offset from the
        //    device's drmm-managed `vma_offset_manager`).
        // 2. `data`, while the pages are still pinned: it may still reach
        //    them (its device mapping is undone here, before the pages can
        //    be released).
        // 3. The write-combined mapping, then the pages (a shmem object's
        //    pin taken in `create` and its shmem state, which releases
        //    them; a private object's chunks, then its GEM state), then
        //    the allocation.
        // 4. The device reference of step 1, last: nothing of the object
        //    is left to reach the device, which may now be released.
        //
        // SAFETY: The last reference is gone: nothing else uses the object.
        // `obj->dev` is the device the object was initialised on (in
        // `create`: `drm_gem_shmem_init`, or `ane_glue_gem_private_init`
        // for a private object), alive on entry: the GEM core holds no
        // reference to it, but the driver's data does (the only
        // `D` of this driver, `crate::gem::BoData`, holds an
        // `ARef<Device>`), and from step 1 on the reference taken here
        // keeps it alive until step 4. (Taking that reference in `create`
        // instead would make this hold for any `D`.)
        unsafe {
            let drm = (*obj).dev;
            bindings::drm_dev_get(drm);
            ManuallyDrop::drop(&mut (*this).data);
            let wc = (*this).wc.load(Ordering::Acquire);
            if !wc.is_null() {
                glue::ane_glue_vunmap(wc);
            }
            if (*this).private {
                let shmem = (*this).obj.get();
                let pages = core::mem::replace(&mut (*shmem).pages, core::ptr::null_mut());
                let count = ((*obj).size >> bindings::PAGE_SHIFT) as core::ffi::c_ulong;
                glue::ane_glue_chunks_free(pages, count);
                glue::ane_glue_gem_private_release(obj);
            } else {
                if (*this).pinned.load(Ordering::Acquire) {
                    bindings::drm_gem_shmem_unpin((*this).obj.get());
                }
                bindings::drm_gem_shmem_release((*this).obj.get());
            }
            drop(KBox::from_raw(this));
            bindings::drm_dev_put(drm);
        }
    }
}
