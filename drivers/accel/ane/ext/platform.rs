// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Platform drivers, registered through the C glue.
//!
//! The kernel crate's platform-driver abstraction changed shape between 7.1
//! and 7.2 (driver data with a binding lifetime, device contexts with
//! lifetimes, a new registration call), so this driver does not use it.
//! `ane_glue.c` registers the two C `struct platform_driver`s with their OF
//! tables and `dev_pm_ops` and calls back through one table of function
//! pointers; [`Registration`] fills that table from a [`Driver`]
//! implementation:
//!
//! - probe returns the device's data, which C stores as driver data; runtime
//!   PM is enabled after that (the device is active then);
//! - remove calls [`Driver::unbind`], disables runtime PM (powering the
//!   device down with [`Driver::runtime_suspend`] if it was left active) and
//!   drops the data, all before devres teardown;
//! - system sleep calls [`Driver::sleep_begin`], forces runtime suspend,
//!   and after forcing runtime resume calls [`Driver::sleep_end`].
//!
//! [`PlatformDevice`] registers a device from the module (the test flavour's
//! simulated ANE, which the real driver binds by name).

use core::{
    ffi::{c_int, c_void, CStr},
    marker::PhantomData,
    ptr::NonNull,
};

use kernel::{bindings, device, prelude::*};

use super::glue::{self, device_from_raw, GlueOps};

/// A platform device being probed or removed.
pub struct PlatformDev<'a> {
    pdev: NonNull<c_void>,
    dev: &'a device::Device,
}

impl<'a> PlatformDev<'a> {
    /// The device.
    pub fn device(&self) -> &'a device::Device {
        self.dev
    }

    /// The raw `struct platform_device`, for the other `ext` modules.
    pub(crate) fn as_raw(&self) -> *mut c_void {
        self.pdev.as_ptr()
    }

    /// The first 4 bytes of the device's platform data as a `u32`, if it has
    /// platform data (only [`PlatformDevice::register`] gives it any).
    pub fn platform_data_u32(&self) -> Option<u32> {
        let raw = glue::raw_dev(self.dev);
        // SAFETY: `dev` is live; `platform_data` is set before the device is
        // registered and immutable afterwards. `dev_get_platdata()` is this
        // field read (an inline function).
        let data = unsafe { (*raw).platform_data };
        if data.is_null() {
            return None;
        }
        // The size is not recorded; the only platform data this driver reads
        // is what `PlatformDevice::register` stored from a `u32`.
        let mut v = [0u8; 4];
        // SAFETY: See above: at least 4 bytes were copied there.
        unsafe { core::ptr::copy_nonoverlapping(data.cast::<u8>(), v.as_mut_ptr(), 4) };
        Some(u32::from_ne_bytes(v))
    }
}

/// A platform driver, as the C glue's two drivers call it.
pub trait Driver: 'static {
    /// Data of a bound device.
    type Data: Send + Sync + 'static;

    /// Binds a device; `compatible` is the OF compatible it matched, `None`
    /// for a device bound by name.
    fn probe(pdev: &PlatformDev<'_>, compatible: Option<&CStr>) -> Result<KBox<Self::Data>>;

    /// Called at remove, before runtime PM is disabled and the data dropped.
    fn unbind(pdev: &PlatformDev<'_>, data: &Self::Data);

    /// Powers the device down. Called with the device bound.
    fn runtime_suspend(data: &Self::Data) -> Result;

    /// Powers the device up and restores what the hardware lost.
    fn runtime_resume(data: &Self::Data) -> Result;

    /// Autosuspend delay in milliseconds, read when a device is bound.
    fn autosuspend_delay_ms() -> i32;

    /// System sleep begins: stop starting work and let what runs end. An
    /// error refuses the sleep.
    fn sleep_begin(data: &Self::Data) -> Result;

    /// System sleep ended (the device is resumed): start work again.
    fn sleep_end(data: &Self::Data);

    /// Reboot, power-off or kexec (the device stays bound): stop the
    /// device's DMA.
    fn shutdown(data: &Self::Data);
}

/// The registered platform drivers; unregistered on drop. The C drivers
/// are singletons, so at most one registration exists (the module's).
pub struct Registration<T: Driver>(PhantomData<T>);

// SAFETY: The registration holds no data; registering and unregistering may
// happen on any thread.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: No method takes `&self`.
unsafe impl<T: Driver> Sync for Registration<T> {}

impl<T: Driver> Registration<T> {
    const OPS: GlueOps = GlueOps {
        probe: Self::probe_callback,
        unbind: Self::unbind_callback,
        release: Self::release_callback,
        runtime_suspend: Self::runtime_suspend_callback,
        runtime_resume: Self::runtime_resume_callback,
        autosuspend_delay_ms: Self::autosuspend_callback,
        sleep_begin: Self::sleep_begin_callback,
        sleep_end: Self::sleep_end_callback,
        shutdown: Self::shutdown_callback,
    };

    /// Registers the drivers; from now on matching devices are probed.
    pub fn new() -> Result<Self> {
        // SAFETY: `OPS` is a static table of valid callbacks.
        kernel::error::to_result(unsafe { glue::ane_glue_register(&Self::OPS) })?;
        Ok(Self(PhantomData))
    }

    /// # Safety
    ///
    /// `pdev` and `dev` must be a live platform device and its device, valid
    /// for the call.
    unsafe fn dev<'a>(pdev: *mut c_void, dev: *mut bindings::device) -> Option<PlatformDev<'a>> {
        Some(PlatformDev {
            pdev: NonNull::new(pdev)?,
            // SAFETY: Per the function's contract.
            dev: unsafe { device_from_raw(dev) },
        })
    }

    /// # Safety
    ///
    /// `data` must come from a successful probe of this driver and not have
    /// been released.
    unsafe fn data<'a>(data: *mut c_void) -> &'a T::Data {
        // SAFETY: `probe_callback` stored a `KBox<T::Data>` there, released
        // only by `release_callback`.
        unsafe { &*data.cast::<T::Data>() }
    }

    /// Probe, called by the C glue.
    ///
    /// # Safety
    ///
    /// `pdev`/`dev` must be a live platform device being probed and its
    /// device; `compatible` NULL or a static C string; `data` a valid out
    /// pointer.
    unsafe extern "C" fn probe_callback(
        pdev: *mut c_void,
        dev: *mut bindings::device,
        compatible: *const u8,
        data: *mut *mut c_void,
    ) -> c_int {
        // SAFETY: The platform bus calls probe with a valid device.
        let Some(pdev) = (unsafe { Self::dev(pdev, dev) }) else {
            return EINVAL.to_errno();
        };
        let compatible = (!compatible.is_null()).then(|| {
            // SAFETY: The C glue passes an OF compatible string (static,
            // from the match table) or NULL, checked above.
            unsafe { CStr::from_char_ptr(compatible) }
        });
        match T::probe(&pdev, compatible) {
            Ok(d) => {
                // SAFETY: `data` is the C glue's valid out pointer.
                unsafe { *data = KBox::into_raw(d).cast() };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// Remove, first part, called by the C glue.
    ///
    /// # Safety
    ///
    /// `pdev`/`dev` must be a live bound device and `data` what its probe
    /// returned, not yet released.
    unsafe extern "C" fn unbind_callback(
        pdev: *mut c_void,
        dev: *mut bindings::device,
        data: *mut c_void,
    ) {
        // SAFETY: remove is called with a valid, bound device whose data
        // came from probe.
        if let Some(pdev) = unsafe { Self::dev(pdev, dev) } {
            // SAFETY: As above.
            T::unbind(&pdev, unsafe { Self::data(data) });
        }
    }

    /// Remove, last part: drops the data.
    ///
    /// # Safety
    ///
    /// `data` must be what probe returned; it is not used afterwards.
    unsafe extern "C" fn release_callback(data: *mut c_void) {
        // SAFETY: Called once, last, at remove, with the data from probe; no
        // callback uses it afterwards (runtime PM is disabled).
        drop(unsafe { KBox::from_raw(data.cast::<T::Data>()) });
    }

    /// Runtime suspend.
    ///
    /// # Safety
    ///
    /// `data` must be what probe returned, not yet released.
    unsafe extern "C" fn runtime_suspend_callback(data: *mut c_void) -> c_int {
        // SAFETY: Runtime PM is enabled only while the device is bound with
        // its data stored (see the C glue's probe and remove).
        match T::runtime_suspend(unsafe { Self::data(data) }) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// Runtime resume.
    ///
    /// # Safety
    ///
    /// `data` must be what probe returned, not yet released.
    unsafe extern "C" fn runtime_resume_callback(data: *mut c_void) -> c_int {
        // SAFETY: As in `runtime_suspend_callback`.
        match T::runtime_resume(unsafe { Self::data(data) }) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    extern "C" fn autosuspend_callback() -> c_int {
        T::autosuspend_delay_ms()
    }

    /// System sleep begins.
    ///
    /// # Safety
    ///
    /// `data` must be what probe returned, not yet released.
    unsafe extern "C" fn sleep_begin_callback(data: *mut c_void) -> c_int {
        // SAFETY: The PM core calls system-sleep callbacks only for a bound
        // device, whose data is stored (see the C glue's probe and remove).
        match T::sleep_begin(unsafe { Self::data(data) }) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// System sleep ended.
    ///
    /// # Safety
    ///
    /// `data` must be what probe returned, not yet released.
    unsafe extern "C" fn sleep_end_callback(data: *mut c_void) {
        // SAFETY: As in `sleep_begin_callback`.
        T::sleep_end(unsafe { Self::data(data) })
    }

    /// Reboot, power-off or kexec.
    ///
    /// # Safety
    ///
    /// `data` must be what probe returned, not yet released.
    unsafe extern "C" fn shutdown_callback(data: *mut c_void) {
        // SAFETY: As in `sleep_begin_callback`.
        T::shutdown(unsafe { Self::data(data) })
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered by `new`.
        unsafe { glue::ane_glue_unregister() };
    }
}

/// A platform device registered by this module; unregistered on drop (which
/// unbinds its driver first).
pub struct PlatformDevice(NonNull<bindings::platform_device>);

// SAFETY: Registration and unregistration may happen on any thread.
unsafe impl Send for PlatformDevice {}
// SAFETY: No method takes `&self` apart from drop.
unsafe impl Sync for PlatformDevice {}

impl PlatformDevice {
    /// Registers a device called `name` with instance number `id` and a
    /// copy of `data` as its platform data. A driver of the same name binds
    /// it (when the device has no firmware node to match on).
    pub fn register(name: &'static CStr, id: i32, data: &[u8]) -> Result<Self> {
        let mut info: bindings::platform_device_info = pin_init::zeroed();
        info.name = name.as_char_ptr();
        info.id = id;
        info.data = data.as_ptr().cast();
        info.size_data = data.len();
        // SAFETY: `info` is fully initialised; the core copies `data`.
        let raw = unsafe { bindings::platform_device_register_full(&info) };
        let raw = kernel::error::from_err_ptr(raw)?;
        NonNull::new(raw).map(Self).ok_or(ENOMEM)
    }
}

impl Drop for PlatformDevice {
    fn drop(&mut self) {
        // SAFETY: Registered by `register`.
        unsafe { bindings::platform_device_unregister(self.0.as_ptr()) };
    }
}
