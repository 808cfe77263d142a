// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Registering a platform device from a module, and reading its platform
//! data. 7.3's kernel crate only offers faux devices for this, which cannot
//! be unbound and whose driver has no PM operations; the simulated ANE must
//! be a real platform device that the real driver binds by name.

use core::ptr::NonNull;

use kernel::{bindings, device, prelude::*};

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

/// The first 4 bytes of `dev`'s platform data as a `u32`, if it has that
/// much.
pub fn platform_data_u32<Ctx: device::DeviceContext>(dev: &device::Device<Ctx>) -> Option<u32> {
    let raw = core::ptr::from_ref(dev).cast::<bindings::device>();
    // SAFETY: `dev` is live; `platform_data` is set before the device is
    // registered and immutable afterwards. `dev_get_platdata()` is this
    // field read (an inline function).
    let data = unsafe { (*raw).platform_data };
    if data.is_null() {
        return None;
    }
    // The size is not recorded; the only platform data this driver reads is
    // what `PlatformDevice::register` stored from a `u32`.
    let mut v = [0u8; 4];
    // SAFETY: See above: at least 4 bytes were copied there.
    unsafe { core::ptr::copy_nonoverlapping(data.cast::<u8>(), v.as_mut_ptr(), 4) };
    Some(u32::from_ne_bytes(v))
}
