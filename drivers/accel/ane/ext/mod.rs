// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The driver's one glue layer over the kernel, in one place.
//!
//! Everything here is glue over `kernel::bindings` and `ane_glue.c` (through
//! [`glue`]): the rest of the driver uses only the safe types defined here
//! and the parts of the kernel crate that are the same in every supported
//! kernel (7.1 to 7.3; `docs/kernel-compat.md` lists each item with its
//! evidence). The kernel crate's driver-core abstractions changed between
//! 7.1 and 7.2, so driver registration, register windows and interrupts go
//! through the C glue instead. When the kernel crate grows an equivalent
//! that is stable across the supported releases (a Rust accel device,
//! runtime PM), the matching file here is the only one to replace.
//!
//! - [`accel`]: a DRM device with `DRIVER_COMPUTE_ACCEL` (`/dev/accel/accelN`),
//!   its files and ioctl dispatch.
//! - [`dma`]: barriers for memory shared with a device.
//! - [`errno`]: error codes some supported kernel crates lack.
//! - [`fence`]: job out-fences, syncobjs and in-fence waits (`dma_fence`,
//!   `drm_syncobj` through the C glue).
//! - [`firmware`]: firmware files through the C loader.
//! - [`gem`]: shmem-backed GEM objects carrying driver data.
//! - [`glue`]: the declarations of `ane_glue.c`.
//! - [`io`]: register windows revoked at unbind.
//! - [`iommu`]: unmanaged IOMMU paging domains.
//! - [`irq`]: threaded interrupt handlers.
//! - [`module`]: pinning the module in memory.
//! - [`param`]: reading module parameters (the one kernel-crate API whose
//!   shape differs between the supported releases).
//! - [`platform`]: the platform drivers (registered by the C glue) and
//!   module-registered platform devices (the simulator).
//! - [`pm`]: runtime PM references and power-domain attach.
//! - [`rtkit`]: an RTKit session with a coprocessor (`apple_rtkit`).
//! - [`sha256`]: SHA-256 from the kernel's crypto library.
//! - [`time`]: absolute monotonic time for deadlines.

pub mod accel;
pub mod boost;
pub mod dma;
pub mod errno;
pub mod fence;
pub mod firmware;
pub mod gem;
pub(crate) mod glue;
pub mod io;
pub mod iommu;
pub mod irq;
pub mod module;
pub mod param;
pub mod platform;
pub mod pm;
pub mod rtkit;
pub mod sha256;
pub mod time;
pub mod workqueue;
