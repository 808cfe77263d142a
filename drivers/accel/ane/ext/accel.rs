// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! DRM accel devices (`/dev/accel/accelN`).
//!
//! Linux 7.3's `kernel::drm` builds its `drm_driver` privately with
//! `DRIVER_GEM` (and optionally `DRIVER_RENDER`) and `drm_open` in the file
//! operations, and the minor type is fixed when the device is allocated, so
//! it cannot create an accel node. This module does the same job for
//! `DRIVER_GEM | DRIVER_COMPUTE_ACCEL` with `accel_open`:
//!
//! - [`Driver`] describes a driver: its device data, per-file data and ioctls.
//! - [`Device`] embeds the C `struct drm_device` followed by the driver's data
//!   and is reference counted ([`ARef`]).
//! - [`Registration`] registers a device and unplugs it when dropped; ioctls
//!   then fail with `ENODEV` and none is running any more.
//! - [`File`] wraps `struct drm_file` and gives access to the per-file data
//!   created by [`Driver::open`] and dropped at `postclose`.
//! - [`declare_accel_ioctls!`](crate::declare_accel_ioctls) builds the ioctl
//!   table; every handler runs inside `drm_dev_enter()`/`drm_dev_exit()`.
//!
//! Ioctl flags are 0: accel files are never "render clients", and `DRM_AUTH`
//! would shut out every user without `CAP_SYS_ADMIN`.

use core::{ffi::c_int, marker::PhantomData, mem::offset_of, ptr::NonNull};

use kernel::{
    bindings, device,
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};

/// Static information about a driver, reported by `DRM_IOCTL_VERSION`.
pub struct DriverInfo {
    /// Major version (the ABI version).
    pub major: i32,
    /// Minor version.
    pub minor: i32,
    /// Patch level.
    pub patchlevel: i32,
    /// Driver name.
    pub name: &'static core::ffi::CStr,
    /// Driver description.
    pub desc: &'static core::ffi::CStr,
}

/// An accel driver.
pub trait Driver: Sized + 'static {
    /// Data of a device, alive as long as the DRM device (which can outlive the
    /// platform binding while files are open).
    type Data: Send + Sync;
    /// Data of an open file.
    type File: Send + Sync;
    /// Name and version.
    const INFO: DriverInfo;
    /// The ioctl table, from [`declare_accel_ioctls!`](crate::declare_accel_ioctls).
    const IOCTLS: &'static [bindings::drm_ioctl_desc];

    /// Creates the data of a newly opened file.
    fn open(dev: &Device<Self>) -> Result<Pin<KBox<Self::File>>>;

    /// Prints the driver's lines of the file's `/proc/PID/fdinfo` entry
    /// (after the DRM core's `drm-driver` and `drm-client-id`).
    fn show_fdinfo(dev: &Device<Self>, file: &File<Self>, p: &mut FdInfo<'_>);
}

/// The printer of a DRM file's fdinfo (Documentation/gpu/drm-usage-stats.rst).
pub struct FdInfo<'a> {
    p: *mut bindings::drm_printer,
    file: *mut bindings::drm_file,
    _p: PhantomData<&'a ()>,
}

impl FdInfo<'_> {
    /// Prints `key:\tvalue unit` (`unit` may be empty).
    pub fn u64(&mut self, key: &core::ffi::CStr, val: u64, unit: &core::ffi::CStr) {
        // SAFETY: `p` is the live printer of the `show_fdinfo` call this
        // was made for; the strings are NUL-terminated.
        unsafe {
            super::glue::ane_glue_fdinfo_u64(
                self.p.cast(),
                kernel::str::as_char_ptr_in_const_context(key).cast(),
                val,
                kernel::str::as_char_ptr_in_const_context(unit).cast(),
            )
        };
    }

    /// Prints the DRM core's memory lines (`drm-total-memory`,
    /// `drm-shared-memory`, `drm-resident-memory`, ...) for the GEM objects
    /// the file holds handles to.
    pub fn memory(&mut self) {
        // SAFETY: `p` and `file` are the live printer and file of the
        // `show_fdinfo` call this was made for.
        unsafe { super::glue::ane_glue_fdinfo_memory(self.p.cast(), self.file) };
    }
}

/// A DRM accel device with the driver's data.
///
/// # Invariants
///
/// `drm` is an initialised `struct drm_device` whose `driver` is
/// `Device::<T>::VTABLE`, allocated by `__drm_dev_alloc` as part of this
/// struct, and `data` is initialised.
#[repr(C)]
pub struct Device<T: Driver> {
    drm: Opaque<bindings::drm_device>,
    data: T::Data,
}

// SAFETY: `Device<T>` has two fields. `data` is `T::Data`, which
// `Driver` bounds `Send + Sync`. `drm` is only reached through a raw pointer
// (`as_raw`) passed to DRM core functions that do their own locking and may
// be called from any thread on a live device: `drm_dev_get`/`drm_dev_put`
// (atomic refcount), `drm_dev_enter`/`drm_dev_exit` (SRCU), GEM object
// creation, registration and unplug (once each, by probe and unbind); the
// Rust side never reads or writes its fields after `new` set `driver`,
// before the device was shared. Dropping the
// device from another thread is `drm_dev_put`, which frees it with the
// `release` callback on whichever thread drops the last reference, as DRM
// drivers in C do.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: See `Send`.
unsafe impl<T: Driver> Sync for Device<T> {}

// SAFETY: `drm_dev_get`/`drm_dev_put` manage the refcount of the allocation
// that contains `Device<T>`; it is freed (after `release` dropped the data)
// when the count reaches zero.
unsafe impl<T: Driver> AlwaysRefCounted for Device<T> {
    fn inc_ref(&self) {
        // SAFETY: A shared reference proves the refcount is non-zero.
        unsafe { bindings::drm_dev_get(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference; the pointer is valid.
        unsafe { bindings::drm_dev_put(obj.as_ref().as_raw()) };
    }
}

impl<T: Driver> core::ops::Deref for Device<T> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        &self.data
    }
}

impl<T: Driver> Device<T> {
    /// GEM objects, an accel node, and DRM syncobjs, binary and timeline
    /// (the `DRM_IOCTL_SYNCOBJ_*` ioctls on the node; EXEC's fences). The
    /// same constants in 7.1, 7.2 and 7.3: this vtable is the driver's own,
    /// not `kernel::drm::Driver`'s.
    const FEATURES: u32 = bindings::drm_driver_feature_DRIVER_GEM
        | bindings::drm_driver_feature_DRIVER_COMPUTE_ACCEL
        | bindings::drm_driver_feature_DRIVER_SYNCOBJ
        | bindings::drm_driver_feature_DRIVER_SYNCOBJ_TIMELINE;

    /// The driver vtable, with `release` (which drops `data`).
    const VTABLE: bindings::drm_driver = {
        let mut d: bindings::drm_driver = pin_init::zeroed();
        d.open = Some(Self::open_callback);
        d.show_fdinfo = Some(Self::show_fdinfo_callback);
        d.postclose = Some(Self::postclose_callback);
        d.release = Some(Self::release_callback);
        d.major = T::INFO.major;
        d.minor = T::INFO.minor;
        d.patchlevel = T::INFO.patchlevel;
        d.name = kernel::str::as_char_ptr_in_const_context(T::INFO.name).cast_mut();
        d.desc = kernel::str::as_char_ptr_in_const_context(T::INFO.desc).cast_mut();
        d.driver_features = Self::FEATURES;
        d.ioctls = T::IOCTLS.as_ptr();
        d.num_ioctls = T::IOCTLS.len() as c_int;
        // `DRM_ACCEL_FOPS` with this module as owner, from the C glue.
        d.fops = &raw const super::glue::ane_glue_accel_fops;
        d
    };

    /// The vtable used while `data` is not initialised yet: no `release`, so
    /// the device never drops uninitialised data. Its features must equal
    /// `VTABLE`'s: the minor is chosen from them at allocation.
    const ALLOC_VTABLE: bindings::drm_driver = {
        let mut d = Self::VTABLE;
        d.release = None;
        d
    };

    /// Allocates an accel device under `parent`. It is not visible to
    /// userspace until it is registered with [`Registration::new`].
    pub fn new(parent: &device::Device, data: T::Data) -> Result<ARef<Self>> {
        let parent = super::glue::raw_dev(parent);
        // SAFETY: `parent` is a bound device; the sizes describe `Self`,
        // whose `drm` field is at the given offset.
        let raw = unsafe {
            bindings::__drm_dev_alloc(
                parent,
                &Self::ALLOC_VTABLE,
                core::mem::size_of::<Self>(),
                offset_of!(Self, drm),
            )
        };
        // On failure `data` is dropped here, never having been in a device.
        let raw = kernel::error::from_err_ptr(raw)?.cast::<Self>();
        // SAFETY: `raw` points to a zeroed `Self` whose `drm` is initialised;
        // `data` is not initialised, so it is written without dropping.
        unsafe { core::ptr::addr_of_mut!((*raw).data).write(data) };
        // SAFETY: `data` is initialised now; switch to the vtable whose
        // `release` drops it. Nothing else sees the device yet.
        unsafe { (*(*raw).drm.get()).driver = &Self::VTABLE };
        // SAFETY: We own the initial reference from `__drm_dev_alloc`.
        Ok(unsafe { ARef::from_raw(NonNull::new_unchecked(raw)) })
    }

    /// The raw `struct drm_device`.
    pub fn as_raw(&self) -> *mut bindings::drm_device {
        self.drm.get()
    }

    /// Recovers the device from a `struct drm_device` of this driver.
    ///
    /// # Safety
    ///
    /// `raw` must be the `drm` field of a live `Device<T>` and stay valid for
    /// `'a`.
    pub unsafe fn from_raw<'a>(raw: *const bindings::drm_device) -> &'a Self {
        // SAFETY: By the safety requirements, `raw` is inside a `Device<T>`.
        unsafe { &*Self::container_of(raw) }
    }

    /// The `Device<T>` whose `drm` field `raw` points to (`container_of`;
    /// `Opaque<T>` is a transparent wrapper of `T`).
    ///
    /// # Safety
    ///
    /// `raw` must point to the `drm` field of a `Device<T>`.
    unsafe fn container_of(raw: *const bindings::drm_device) -> *mut Self {
        // SAFETY: By the safety requirements, the containing object starts
        // `offset_of!(Self, drm)` bytes before `raw`.
        unsafe {
            raw.cast::<u8>()
                .sub(offset_of!(Self, drm))
                .cast::<Self>()
                .cast_mut()
        }
    }

    /// Enters the device for an access that must not race with unplug:
    /// `None` once the device has been unplugged.
    pub fn enter(&self) -> Option<EnterGuard<'_>> {
        let mut idx: c_int = 0;
        // SAFETY: `drm` is valid; `idx` is written before it is read.
        if unsafe { bindings::drm_dev_enter(self.as_raw(), &mut idx) } {
            Some(EnterGuard {
                idx,
                _p: PhantomData,
            })
        } else {
            None
        }
    }

    extern "C" fn open_callback(
        raw_dev: *mut bindings::drm_device,
        raw_file: *mut bindings::drm_file,
    ) -> c_int {
        // SAFETY: The DRM core passes a device of this driver.
        let dev = unsafe { Self::from_raw(raw_dev) };
        match T::open(dev) {
            Ok(data) => {
                // SAFETY: `raw_file` is the file being opened; nothing else
                // uses `driver_priv` until `postclose`. The data stays where
                // it is until `postclose` rebuilds the box to drop it.
                unsafe {
                    (*raw_file).driver_priv = KBox::into_raw(Pin::into_inner_unchecked(data)).cast()
                };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    extern "C" fn show_fdinfo_callback(
        p: *mut bindings::drm_printer,
        raw_file: *mut bindings::drm_file,
    ) {
        // SAFETY: The DRM core calls this for an open file of this driver
        // (`drm_show_fdinfo` holds a reference to it), whose `open`
        // succeeded, so `minor` and its device are live.
        let (dev, file) = unsafe {
            (
                Self::from_raw((*(*raw_file).minor).dev),
                File::<T>::from_raw(raw_file),
            )
        };
        let mut out = FdInfo {
            p,
            file: raw_file,
            _p: PhantomData,
        };
        T::show_fdinfo(dev, file, &mut out);
    }

    extern "C" fn postclose_callback(
        _raw_dev: *mut bindings::drm_device,
        raw_file: *mut bindings::drm_file,
    ) {
        // SAFETY: `driver_priv` was set by `open_callback` (postclose is only
        // called for files whose open succeeded), and the file is going away.
        let data = unsafe { (*raw_file).driver_priv }.cast::<T::File>();
        if !data.is_null() {
            // SAFETY: It came from `KBox::into_raw` and is no longer used.
            drop(unsafe { KBox::from_raw(data) });
        }
    }

    extern "C" fn release_callback(raw_dev: *mut bindings::drm_device) {
        // SAFETY: Called once, by the last `drm_dev_put`, for a device with
        // `VTABLE`, whose data is initialised. The allocation itself is freed
        // by the DRM core afterwards.
        unsafe {
            let this = Self::container_of(raw_dev);
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*this).data));
        }
    }
}

/// Proof that the device was entered with [`Device::enter`]; exits on drop.
pub struct EnterGuard<'a> {
    idx: c_int,
    _p: PhantomData<&'a ()>,
}

impl Drop for EnterGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `idx` comes from the matching successful `drm_dev_enter`.
        unsafe { bindings::drm_dev_exit(self.idx) };
    }
}

/// A registered accel device. Dropping it unplugs the device: the node goes
/// away, running ioctls finish first, and later ones fail with `ENODEV`.
pub struct Registration<T: Driver> {
    dev: ARef<Device<T>>,
}

impl<T: Driver> Registration<T> {
    /// Registers `dev`, creating `/dev/accel/accelN`.
    ///
    /// # Safety
    ///
    /// `dev` must never have been registered: this is the only
    /// `Registration` ever made of it (a DRM device is registered once
    /// and unplugged once; `ARef` is `Clone`, so the type cannot promise
    /// it).
    pub unsafe fn new(dev: ARef<Device<T>>) -> Result<Self> {
        // SAFETY: `dev` is initialised (`Device::new`) and, by the safety
        // requirements, not registered yet.
        kernel::error::to_result(unsafe { bindings::drm_dev_register(dev.as_raw(), 0) })?;
        Ok(Self { dev })
    }

    /// The registered device.
    pub fn device(&self) -> &Device<T> {
        &self.dev
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: The device was registered by `new`.
        unsafe { bindings::drm_dev_unplug(self.dev.as_raw()) };
    }
}

/// An open file of an accel device.
#[repr(transparent)]
pub struct File<T: Driver>(Opaque<bindings::drm_file>, PhantomData<T>);

impl<T: Driver> File<T> {
    /// Wraps a raw `struct drm_file`.
    ///
    /// # Safety
    ///
    /// `raw` must be an open file of a `Device<T>` whose `open` succeeded, and
    /// stay valid for `'a`.
    pub unsafe fn from_raw<'a>(raw: *mut bindings::drm_file) -> &'a Self {
        // SAFETY: `File` is a transparent wrapper of `drm_file`.
        unsafe { &*raw.cast::<Self>() }
    }

    /// The raw `struct drm_file`.
    pub fn as_raw(&self) -> *mut bindings::drm_file {
        self.0.get()
    }

    /// The driver's data of this file.
    pub fn inner(&self) -> Pin<&T::File> {
        // SAFETY: By the type invariant, `open_callback` stored a live,
        // pinned `KBox<T::File>` there, which lives until `postclose`, after
        // every ioctl on this file has returned.
        unsafe { Pin::new_unchecked(&*(*self.as_raw()).driver_priv.cast::<T::File>()) }
    }
}

/// Whether an ioctl table entry runs inside `drm_dev_enter()` (see
/// [`declare_accel_ioctls`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __accel_ioctl_guarded {
    () => {
        true
    };
    (unguarded) => {
        false
    };
}

/// Builds the `drm_ioctl_desc` table of an accel driver.
///
/// ```ignore
/// declare_accel_ioctls! { Driver;
///     (nr::GET_PARAM, GetParam, handler_fn),
/// }
/// ```
///
/// Entries must be in ioctl-number order without gaps, starting at
/// `DRM_COMMAND_BASE`; the argument type's size must match the number's size
/// field (both checked at compile time). Each handler has the signature
/// `fn(&Device<D>, &mut Arg, &File<D>) -> Result<u32>` and runs inside
/// `drm_dev_enter()` (after unplug the ioctl fails with `ENODEV`), unless
/// the entry ends in `unguarded`: for a handler that touches nothing of the
/// device and may sleep long (a wait), since the unplug SRCU is shared by
/// every DRM device.
#[macro_export]
macro_rules! declare_accel_ioctls {
    ($drv:ty; $(($cmd:expr, $arg:ty, $func:path $(, $mode:ident)?)),* $(,)?) => {{
        const _: () = {
            let mut i: u32 = 0;
            $(
                ::core::assert!($cmd & 0xff == $crate::hw::uapi::DRM_COMMAND_BASE + i);
                ::core::assert!((($cmd >> 16) & 0x3fff) as usize == ::core::mem::size_of::<$arg>());
                i += 1;
            )*
            let _ = i;
        };
        &[$(
            ::kernel::bindings::drm_ioctl_desc {
                cmd: $cmd,
                flags: 0,
                func: {
                    /// # Safety
                    ///
                    /// Only for the DRM core's ioctl dispatch of this driver.
                    unsafe extern "C" fn trampoline(
                        raw_dev: *mut ::kernel::bindings::drm_device,
                        raw_data: *mut ::core::ffi::c_void,
                        raw_file: *mut ::kernel::bindings::drm_file,
                    ) -> ::core::ffi::c_int {
                        // SAFETY: The DRM core calls this only for devices of
                        // this driver, with a file whose open succeeded.
                        let dev = unsafe { $crate::ext::accel::Device::<$drv>::from_raw(raw_dev) };
                        let _guard = if $crate::__accel_ioctl_guarded!($($mode)?) {
                            match dev.enter() {
                                Some(g) => Some(g),
                                None => return ::kernel::error::code::ENODEV.to_errno(),
                            }
                        } else {
                            None
                        };
                        // SAFETY: See above.
                        let file = unsafe { $crate::ext::accel::File::<$drv>::from_raw(raw_file) };
                        // SAFETY: `drm_ioctl()` copied the argument into a
                        // kernel buffer of `_IOC_SIZE(cmd)` bytes (checked to
                        // equal the type's size above), owned by this call;
                        // every bit pattern is valid for UAPI structs.
                        let data = unsafe { &mut *raw_data.cast::<$arg>() };
                        match $func(dev, data, file) {
                            Ok(v) => ::core::ffi::c_int::try_from(v)
                                .unwrap_or(::kernel::error::code::ERANGE.to_errno()),
                            Err(e) => e.to_errno(),
                        }
                    }
                    Some(trampoline)
                },
                name: ::kernel::str::as_char_ptr_in_const_context(
                    ::kernel::c_str!(::core::stringify!($func)),
                ),
            }
        ),*]
    }};
}
