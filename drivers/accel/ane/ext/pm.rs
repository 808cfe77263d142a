// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Runtime power management for platform drivers.
//!
//! Linux 7.3 has no Rust runtime-PM abstraction, and `platform::Adapter`
//! registers drivers without `driver.pm`, so the PM core would never call a
//! Rust driver. This module supplies both:
//!
//! - [`PmDriver`]: a platform driver with runtime suspend/resume callbacks
//!   and an autosuspend delay.
//! - [`Adapter`]: registers such a driver like `platform::Adapter` does, plus
//!   `dev_pm_ops`. It enables runtime PM after probe stored the driver data
//!   (the device is active then) and disables it in unbind, before the data
//!   is dropped (which happens before devres teardown), powering the device
//!   down itself if it was left active. System sleep forces runtime suspend.
//! - [`RuntimePm`]/[`PmRef`]: take a usage reference (resuming the device)
//!   and drop it with autosuspend.
//! - [`attach_power_domains`]: genpd attach of every power domain of a
//!   device node, which the platform bus only does for a single domain.

use core::{ffi::c_int, marker::PhantomData};

use kernel::{
    acpi, bindings,
    device::{self, CoreInternal},
    driver, of, platform,
    prelude::*,
    sync::aref::ARef,
    types::Opaque,
    ThisModule,
};

// The helpers of `ane_glue.c`. `struct device` contains a zero-sized array
// Rust calls FFI-unsafe; only pointers to it cross the boundary.
#[allow(improper_ctypes)]
extern "C" {
    fn ane_glue_pm_enable(dev: *mut bindings::device, delay_ms: c_int);
    fn ane_glue_pm_disable(dev: *mut bindings::device) -> bool;
    fn ane_glue_pm_resume_and_get(dev: *mut bindings::device) -> c_int;
    fn ane_glue_pm_put_autosuspend(dev: *mut bindings::device);
    fn ane_glue_pm_force_suspend(dev: *mut bindings::device) -> c_int;
    fn ane_glue_pm_force_resume(dev: *mut bindings::device) -> c_int;
    fn ane_glue_pm_domains_attach(dev: *mut bindings::device) -> c_int;
    fn ane_glue_pm_get_noresume(dev: *mut bindings::device);
}

fn raw_dev<Ctx: device::DeviceContext>(dev: &device::Device<Ctx>) -> *mut bindings::device {
    // `device::Device` is a transparent wrapper of `struct device`; its raw
    // pointer getter is crate-private.
    core::ptr::from_ref(dev)
        .cast::<bindings::device>()
        .cast_mut()
}

/// A platform driver with runtime PM.
pub trait PmDriver: platform::Driver + 'static {
    /// Whether sysfs offers no `bind`/`unbind` for this driver's devices
    /// (`driver.suppress_bind_attrs`).
    const SUPPRESS_BIND_ATTRS: bool = false;

    /// Autosuspend delay in milliseconds, read when a device is bound.
    fn autosuspend_delay_ms() -> i32;

    /// Powers the device down. Called with the device bound.
    fn runtime_suspend(data: Pin<&Self::Data<'_>>) -> Result;

    /// Powers the device up and restores what the hardware lost.
    fn runtime_resume(data: Pin<&Self::Data<'_>>) -> Result;
}

/// Registers a [`PmDriver`] (see the module documentation).
pub struct Adapter<T: PmDriver>(PhantomData<T>);

// SAFETY: Same layout facts as `platform::Adapter`: the driver type is the C
// `struct platform_driver`, which embeds `struct device_driver` at `driver`,
// and the driver data is `T::Data`.
unsafe impl<T: PmDriver> driver::DriverLayout for Adapter<T> {
    type DriverType = bindings::platform_driver;
    type DriverData<'bound> = T::Data<'bound>;
    const DEVICE_DRIVER_OFFSET: usize = core::mem::offset_of!(Self::DriverType, driver);
}

impl<T: PmDriver> driver::Adapter for Adapter<T> {
    type IdInfo = T::IdInfo;

    fn of_id_table() -> Option<of::IdTable<Self::IdInfo>> {
        T::OF_ID_TABLE
    }

    fn acpi_id_table() -> Option<acpi::IdTable<Self::IdInfo>> {
        T::ACPI_ID_TABLE
    }
}

// SAFETY: `unregister` is only called after `register` succeeded, by
// `driver::Registration`.
unsafe impl<T: PmDriver> driver::RegistrationOps for Adapter<T> {
    unsafe fn register(
        pdrv: &Opaque<Self::DriverType>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result {
        let of_table = T::OF_ID_TABLE.map_or(core::ptr::null(), |t| t.as_ptr());
        let acpi_table = T::ACPI_ID_TABLE.map_or(core::ptr::null(), |t| t.as_ptr());
        // SAFETY: The driver struct is not registered yet; we own it.
        unsafe {
            let p = pdrv.get();
            (*p).driver.name = name.as_char_ptr();
            (*p).driver.pm = &Self::PM_OPS;
            (*p).driver.of_match_table = of_table;
            (*p).driver.acpi_match_table = acpi_table;
            (*p).driver.suppress_bind_attrs = T::SUPPRESS_BIND_ATTRS;
            (*p).probe = Some(Self::probe_callback);
            (*p).remove = Some(Self::remove_callback);
        }
        // SAFETY: `pdrv` is valid and stays pinned until `unregister`.
        kernel::error::to_result(unsafe {
            bindings::__platform_driver_register(pdrv.get(), module.as_ptr(), name.as_char_ptr())
        })
    }

    unsafe fn unregister(pdrv: &Opaque<Self::DriverType>) {
        // SAFETY: Registered by `register`.
        unsafe { bindings::platform_driver_unregister(pdrv.get()) };
    }
}

impl<T: PmDriver> Adapter<T> {
    const PM_OPS: bindings::dev_pm_ops = {
        let mut ops: bindings::dev_pm_ops = pin_init::zeroed();
        ops.runtime_suspend = Some(Self::runtime_suspend_callback);
        ops.runtime_resume = Some(Self::runtime_resume_callback);
        ops.suspend = Some(ane_glue_pm_force_suspend);
        ops.resume = Some(ane_glue_pm_force_resume);
        ops
    };

    extern "C" fn probe_callback(pdev: *mut bindings::platform_device) -> c_int {
        // SAFETY: The platform bus calls probe with a valid device, which
        // stays valid for the call.
        let pdev = unsafe { &*pdev.cast::<platform::Device<CoreInternal<'_>>>() };
        // SAFETY: The match data of this driver's tables is `T::IdInfo`.
        let info = unsafe { <Self as driver::Adapter>::id_info(pdev.as_ref()) };
        kernel::error::from_result(|| {
            pdev.as_ref().set_drvdata(T::probe(pdev, info))?;
            // Runtime PM only once the data the callbacks use exists.
            // SAFETY: The device is bound (probe succeeded).
            unsafe { ane_glue_pm_enable(raw_dev(pdev.as_ref()), T::autosuspend_delay_ms()) };
            Ok(0)
        })
    }

    extern "C" fn remove_callback(pdev: *mut bindings::platform_device) {
        // SAFETY: As in `probe_callback`.
        let pdev = unsafe { &*pdev.cast::<platform::Device<CoreInternal<'_>>>() };
        // SAFETY: `remove` only follows a successful probe, which stored a
        // `T::Data` with `set_drvdata`.
        let data = unsafe { pdev.as_ref().drvdata_borrow::<T::Data<'_>>() };
        T::unbind(pdev, data);
        // The data is dropped right after this callback, before devres
        // teardown: no PM callback may run after that.
        // SAFETY: Runtime PM was enabled in probe.
        if unsafe { ane_glue_pm_disable(raw_dev(pdev.as_ref())) } {
            if let Err(e) = T::runtime_suspend(data) {
                dev_warn!(pdev.as_ref(), "power-down at unbind failed: {:?}\n", e);
            }
        }
    }

    /// # Safety
    ///
    /// `dev` must be a device bound to this driver.
    unsafe fn data<'a>(dev: *mut bindings::device) -> Pin<&'a T::Data<'a>> {
        // SAFETY: Runtime PM is enabled only while the device is bound with
        // its data stored (see probe and remove), so the data is there.
        unsafe {
            let dev = &*dev.cast::<device::Device<CoreInternal<'_>>>();
            dev.drvdata_borrow::<T::Data<'_>>()
        }
    }

    extern "C" fn runtime_suspend_callback(dev: *mut bindings::device) -> c_int {
        // SAFETY: The PM core calls this only while runtime PM is enabled.
        let data = unsafe { Self::data(dev) };
        match T::runtime_suspend(data) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    extern "C" fn runtime_resume_callback(dev: *mut bindings::device) -> c_int {
        // SAFETY: As above.
        let data = unsafe { Self::data(dev) };
        match T::runtime_resume(data) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}

/// Runtime PM of one device.
pub struct RuntimePm {
    dev: ARef<device::Device>,
}

impl RuntimePm {
    /// Runtime PM of `dev`, whose driver is registered through [`Adapter`].
    pub fn new(dev: &device::Device) -> Self {
        Self { dev: dev.into() }
    }

    /// Resumes the device if needed and keeps it resumed until the returned
    /// reference is dropped.
    pub fn get(&self) -> Result<PmRef> {
        // SAFETY: `dev` is a live device.
        kernel::error::to_result(unsafe { ane_glue_pm_resume_and_get(raw_dev(&self.dev)) })?;
        Ok(PmRef {
            dev: self.dev.clone(),
        })
    }

    /// Keeps a device that is active (being probed) from suspending until
    /// the returned reference is dropped.
    pub fn hold(&self) -> PmRef {
        // SAFETY: `dev` is a live device.
        unsafe { ane_glue_pm_get_noresume(raw_dev(&self.dev)) };
        PmRef {
            dev: self.dev.clone(),
        }
    }
}

/// A runtime PM usage reference; dropping it lets the device autosuspend.
pub struct PmRef {
    dev: ARef<device::Device>,
}

impl Drop for PmRef {
    fn drop(&mut self) {
        // SAFETY: We hold a usage reference taken by `RuntimePm::get`.
        unsafe { ane_glue_pm_put_autosuspend(raw_dev(&self.dev)) };
    }
}

/// Attaches `dev` to every power domain its device-tree node lists, in list
/// order, each with a runtime-PM device link: from then on, resuming the
/// device powers all of them (parents first, through genpd) and suspending
/// it lets them go. The domains are powered when this returns, and stay
/// attached until the device is unbound (devres).
///
/// Returns the number of domains: 0 for a device without a node or without
/// `power-domains`, 1 when the bus already attached a single domain.
/// `EPROBE_DEFER` while a domain's provider has not probed yet.
pub fn attach_power_domains(dev: &device::Device<device::Core<'_>>) -> Result<usize> {
    // SAFETY: `dev` is being probed, so it is valid and bound for devres.
    let n = unsafe { ane_glue_pm_domains_attach(raw_dev(dev)) };
    kernel::error::to_result(n)?;
    Ok(n as usize)
}
