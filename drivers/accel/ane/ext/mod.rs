// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Abstractions the Linux 7.3 kernel crate lacks, in one place.
//!
//! Everything here is version-specific glue over `kernel::bindings` (and, for
//! inline-only C helpers, `ane_glue.c`): the rest of the driver uses only the
//! safe types defined here and the kernel crate's own abstractions. When the
//! kernel crate grows an equivalent (a Rust accel device, runtime PM), the
//! matching file here is the only one to replace.
//!
//! - [`accel`]: a DRM device with `DRIVER_COMPUTE_ACCEL` (`/dev/accel/accelN`),
//!   its files and ioctl dispatch.
//! - [`dma`]: barriers for memory shared with a device.
//! - [`gem`]: shmem-backed GEM objects carrying driver data.
//! - [`iommu`]: unmanaged IOMMU paging domains.
//! - [`module`]: pinning the module in memory.
//! - [`platform`]: module-registered platform devices (the simulator).
//! - [`pm`]: runtime PM and a platform driver adapter that supplies
//!   `dev_pm_ops`.
//! - [`rtkit`]: an RTKit session with a coprocessor (`apple_rtkit`).
//! - [`time`]: absolute monotonic time for deadlines.

pub mod accel;
pub mod dma;
pub mod gem;
pub mod iommu;
pub mod module;
pub mod platform;
pub mod pm;
pub mod rtkit;
pub mod time;
