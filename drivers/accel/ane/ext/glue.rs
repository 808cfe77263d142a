// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The declarations of `ane_glue.c` (prototypes in `ane_glue.h`).
//!
//! The C glue is where the module meets the driver core; see its header
//! comment and `docs/kernel-compat.md`. Only the modules of `ext` call these.
//! Kernel structures cross the boundary only as pointers, most of them as
//! `*mut c_void`, so these declarations do not depend on the layout of any
//! kernel structure. C strings are `*const u8`: the kernel's `char` is
//! unsigned on every architecture.

use core::ffi::{c_int, c_long, c_uint, c_void};

use kernel::bindings;

/// `irq_handler_t`: `irqreturn_t (*)(int, void *)`; `irqreturn_t` is a C
/// enum (`IRQ_NONE` 0, `IRQ_HANDLED` 1), passed as an `unsigned int`.
pub(crate) type IrqThreadFn = unsafe extern "C" fn(irq: c_int, cookie: *mut c_void) -> c_uint;

/// `struct ane_glue_ops`: the driver's callbacks, called by the C platform
/// drivers. `pdev` is a `struct platform_device *`, `dev` its `struct
/// device`, `data` what `probe` returned.
#[repr(C)]
pub(crate) struct GlueOps {
    pub(crate) probe: unsafe extern "C" fn(
        pdev: *mut c_void,
        dev: *mut bindings::device,
        compatible: *const u8,
        data: *mut *mut c_void,
    ) -> c_int,
    pub(crate) unbind:
        unsafe extern "C" fn(pdev: *mut c_void, dev: *mut bindings::device, data: *mut c_void),
    pub(crate) release: unsafe extern "C" fn(data: *mut c_void),
    pub(crate) runtime_suspend: unsafe extern "C" fn(data: *mut c_void) -> c_int,
    pub(crate) runtime_resume: unsafe extern "C" fn(data: *mut c_void) -> c_int,
    pub(crate) autosuspend_delay_ms: extern "C" fn() -> c_int,
    pub(crate) sleep_begin: unsafe extern "C" fn(data: *mut c_void) -> c_int,
    pub(crate) sleep_end: unsafe extern "C" fn(data: *mut c_void),
    pub(crate) shutdown: unsafe extern "C" fn(data: *mut c_void),
}

// `struct device` contains a zero-sized array Rust calls FFI-unsafe; only
// pointers to it cross the boundary.
#[allow(improper_ctypes)]
extern "C" {
    pub(crate) fn ane_glue_register(ops: *const GlueOps) -> c_int;
    pub(crate) fn ane_glue_unregister();
    pub(crate) fn ane_glue_module_pin();
    pub(crate) fn ane_glue_may_boost_priority() -> bool;
    /// `p` is a `struct drm_printer *`.
    pub(crate) fn ane_glue_fdinfo_u64(p: *mut c_void, key: *const u8, val: u64, unit: *const u8);
    pub(crate) fn ane_glue_fdinfo_memory(p: *mut c_void, file: *mut bindings::drm_file);
    /// `const struct file_operations`: `DRM_ACCEL_FOPS` owned by this module.
    pub(crate) static ane_glue_accel_fops: bindings::file_operations;

    pub(crate) fn ane_glue_request_firmware(
        dev: *mut bindings::device,
        name: *const u8,
        fw: *mut *mut c_void,
        data: *mut *const u8,
        len: *mut usize,
    ) -> c_int;
    pub(crate) fn ane_glue_release_firmware(fw: *mut c_void);

    pub(crate) fn ane_glue_ioremap(
        pdev: *mut c_void,
        name: *const u8,
        min_size: usize,
        claim: bool,
        out: *mut *mut c_void,
        phys: *mut u64,
    ) -> c_int;
    pub(crate) fn ane_glue_random_u64() -> u64;
    #[cfg(ane_test)]
    pub(crate) fn ane_glue_selftest_kasan();
    pub(crate) fn ane_glue_readl(addr: *const c_void) -> u32;
    pub(crate) fn ane_glue_writel(val: u32, addr: *mut c_void);
    pub(crate) fn ane_glue_readq(addr: *const c_void) -> u64;
    pub(crate) fn ane_glue_writeq(val: u64, addr: *mut c_void);

    pub(crate) fn ane_glue_dart_map(
        pdev: *mut c_void,
        index: c_uint,
        min_size: usize,
        regs: *mut *mut c_void,
        irq: *mut c_int,
    ) -> c_int;
    pub(crate) fn ane_glue_irq_disable(irq: c_uint);
    pub(crate) fn ane_glue_irq_enable(irq: c_uint);
    pub(crate) fn ane_glue_irq_disable_nosync(irq: c_uint);
    pub(crate) fn ane_glue_irq_get_optional(pdev: *mut c_void, index: c_uint) -> c_int;
    pub(crate) fn ane_glue_irq_request(
        irq: c_uint,
        thread_fn: IrqThreadFn,
        name: *const u8,
        cookie: *mut c_void,
    ) -> c_int;
    pub(crate) fn ane_glue_irq_free(irq: c_uint, cookie: *mut c_void);
    pub(crate) fn ane_glue_irq_synchronize(irq: c_uint);

    pub(crate) fn ane_glue_pm_resume_and_get(dev: *mut bindings::device) -> c_int;
    pub(crate) fn ane_glue_pm_put_autosuspend(dev: *mut bindings::device);
    pub(crate) fn ane_glue_pm_domains_attach(dev: *mut bindings::device) -> c_int;
    pub(crate) fn ane_glue_pm_cycle(dev: *mut bindings::device) -> c_int;
    pub(crate) fn ane_glue_pm_get_noresume(dev: *mut bindings::device);
    pub(crate) fn ane_glue_dma_mb();
    pub(crate) fn ane_glue_page_read(
        page: *mut c_void,
        offset: usize,
        dst: *mut c_void,
        len: usize,
    );
    pub(crate) fn ane_glue_page_write(
        page: *mut c_void,
        offset: usize,
        src: *const c_void,
        len: usize,
    );
    pub(crate) fn ane_glue_page_copy(
        dst: *mut c_void,
        dst_off: usize,
        src: *mut c_void,
        src_off: usize,
        len: usize,
    );
    pub(crate) fn ane_glue_vmap_wc(pages: *mut *mut bindings::page, count: c_uint) -> *mut c_void;
    pub(crate) fn ane_glue_vunmap(addr: *const c_void);
    pub(crate) fn ane_glue_wc_copy(dst: *mut c_void, src: *const c_void, len: usize);
    pub(crate) fn ane_glue_clean_for_device(
        dev: *mut bindings::device,
        sgt: *mut bindings::sg_table,
    ) -> c_int;
    pub(crate) fn ane_glue_pages_copy(
        dst: *const *mut bindings::page,
        dst_off: usize,
        src: *const *mut bindings::page,
        src_off: usize,
        len: usize,
    );
    pub(crate) fn ane_glue_pages_write(
        dst: *const *mut bindings::page,
        dst_off: usize,
        src: *const c_void,
        len: usize,
    );
    pub(crate) fn ane_glue_pages_read(
        dst: *mut c_void,
        src: *const *mut bindings::page,
        src_off: usize,
        len: usize,
    );
    pub(crate) fn ane_glue_pages_zero(dst: *const *mut bindings::page, dst_off: usize, len: usize);
    pub(crate) fn ane_glue_chunks_alloc(count: core::ffi::c_ulong) -> *mut *mut bindings::page;
    pub(crate) fn ane_glue_chunks_free(pages: *mut *mut bindings::page, count: core::ffi::c_ulong);
    pub(crate) fn ane_glue_gem_private_init(
        dev: *mut bindings::drm_device,
        obj: *mut bindings::drm_gem_object,
        size: usize,
    );
    pub(crate) fn ane_glue_gem_private_release(obj: *mut bindings::drm_gem_object);
    pub(crate) fn ane_glue_cond_resched();
    /// `ctx` points to `ANE_GLUE_SHA256_CTX_BYTES` bytes, 8-byte aligned.
    pub(crate) fn ane_glue_sha256_init(ctx: *mut c_void);
    pub(crate) fn ane_glue_sha256_update(ctx: *mut c_void, data: *const u8, len: usize);
    pub(crate) fn ane_glue_sha256_final(ctx: *mut c_void, out: *mut u8);
    pub(crate) fn ane_glue_sha256(data: *const u8, len: usize, out: *mut u8);
    pub(crate) fn ane_glue_boost_new(idle_ms: c_uint) -> *mut c_void;
    pub(crate) fn ane_glue_boost_begin(b: *mut c_void);
    pub(crate) fn ane_glue_boost_end(b: *mut c_void);
    pub(crate) fn ane_glue_boost_stop(b: *mut c_void);
    pub(crate) fn ane_glue_boost_free(b: *mut c_void);
    pub(crate) fn ane_glue_wq_alloc() -> *mut bindings::workqueue_struct;
    pub(crate) fn ane_glue_wq_destroy(wq: *mut bindings::workqueue_struct);
    pub(crate) fn ane_glue_rtkit_boot(dev: *mut bindings::device, out: *mut *mut c_void) -> c_int;
    pub(crate) fn ane_glue_rtkit_free(rtk: *mut c_void);

    // Fences (`struct dma_fence *`), syncobjs (`struct drm_syncobj *`),
    // chain nodes (`struct dma_fence_chain *`) and in-fence sets (`struct
    // ane_glue_deps *`) are all `*mut c_void` here.
    pub(crate) fn ane_glue_fence_new() -> *mut c_void;
    pub(crate) fn ane_glue_fence_signal(f: *mut c_void, error: c_int);
    pub(crate) fn ane_glue_fence_wait(f: *mut c_void, timeout: c_long) -> c_long;
    pub(crate) fn ane_glue_fence_get(f: *mut c_void);
    pub(crate) fn ane_glue_fence_put(f: *mut c_void);
    pub(crate) fn ane_glue_syncobj_out_get(
        file: *mut bindings::drm_file,
        handle: u32,
        point: u64,
        out: *mut *mut c_void,
        chain: *mut *mut c_void,
    ) -> c_int;
    pub(crate) fn ane_glue_syncobj_out_attach(
        s: *mut c_void,
        chain: *mut c_void,
        f: *mut c_void,
        point: u64,
    );
    pub(crate) fn ane_glue_syncobj_out_drop(s: *mut c_void, chain: *mut c_void);
    pub(crate) fn ane_glue_deps_new(max: c_uint) -> *mut c_void;
    pub(crate) fn ane_glue_deps_add(
        d: *mut c_void,
        file: *mut bindings::drm_file,
        handle: u32,
        point: u64,
    ) -> c_int;
    pub(crate) fn ane_glue_deps_arm(
        d: *mut c_void,
        wq: *mut bindings::workqueue_struct,
        ready: unsafe extern "C" fn(data: *mut c_void, error: c_int),
        data: *mut c_void,
        error: *mut c_int,
    ) -> c_int;
    pub(crate) fn ane_glue_deps_cancel(d: *mut c_void);
    pub(crate) fn ane_glue_deps_free(d: *mut c_void);
}

/// The `struct device` behind `dev`. `device::Device` is a transparent
/// wrapper of `struct device` in every supported kernel; its raw pointer
/// getter is crate-private, so the reference is cast.
pub(crate) fn raw_dev<Ctx: kernel::device::DeviceContext>(
    dev: &kernel::device::Device<Ctx>,
) -> *mut bindings::device {
    core::ptr::from_ref(dev)
        .cast::<bindings::device>()
        .cast_mut()
}

/// The `device::Device` of a raw `struct device`.
///
/// # Safety
///
/// `dev` must point to a live `struct device` that stays valid for `'a`.
pub(crate) unsafe fn device_from_raw<'a>(dev: *mut bindings::device) -> &'a kernel::device::Device {
    // SAFETY: `device::Device` is a transparent wrapper of `struct device`;
    // the caller guarantees validity for `'a`.
    unsafe { &*dev.cast::<kernel::device::Device>() }
}

/// A random `u64` from the kernel's generator.
pub(crate) fn random_u64() -> u64 {
    // SAFETY: `get_random_u64` has no preconditions.
    unsafe { ane_glue_random_u64() }
}
