// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Firmware files, through the C firmware loader.
//!
//! `kernel::firmware` exists only with `CONFIG_RUST_FW_LOADER_ABSTRACTIONS`,
//! which some kernels the driver supports leave off (Debian's 7.2 default
//! configuration does); `request_firmware()` is there whenever the firmware
//! loader is.

use core::{ffi::c_void, ptr::NonNull};

use kernel::{device, prelude::*};

use super::glue::{self, raw_dev};

/// A loaded firmware file; released when dropped.
pub struct Firmware {
    fw: NonNull<c_void>,
    data: *const u8,
    len: usize,
}

impl Firmware {
    /// Loads `/lib/firmware/<name>` for `dev` (`request_firmware()`: may
    /// sleep; `ENOENT` when the file is not there).
    pub fn request(name: &CStr, dev: &device::Device) -> Result<Self> {
        let mut fw: *mut c_void = core::ptr::null_mut();
        let mut data: *const u8 = core::ptr::null();
        let mut len = 0usize;
        // SAFETY: `dev` is live; `name` is a C string; the out pointers are
        // valid.
        kernel::error::to_result(unsafe {
            glue::ane_glue_request_firmware(
                raw_dev(dev),
                name.as_char_ptr(),
                &mut fw,
                &mut data,
                &mut len,
            )
        })?;
        let fw = NonNull::new(fw).ok_or(EINVAL)?;
        Ok(Self { fw, data, len })
    }

    /// The file's contents.
    pub fn data(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: The loader keeps `len` bytes at `data` until
        // `release_firmware()`, which only `drop` calls.
        unsafe { core::slice::from_raw_parts(self.data, self.len) }
    }
}

impl Drop for Firmware {
    fn drop(&mut self) {
        // SAFETY: `fw` came from `ane_glue_request_firmware` and is released
        // once.
        unsafe { glue::ane_glue_release_firmware(self.fw.as_ptr()) };
    }
}
