// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Userspace library for the `ane` Apple Neural Engine DRM accel driver.
//!
//! - [`system`]: read-only discovery of the machine, its device tree, the
//!   kernel module and the accel nodes (what `ane-probe info` prints).
//!
//! The hardware facts (SoC table, and later the UAPI and program formats)
//! come from [`hw`], the very code the kernel driver is built from.

pub use ane_hw as hw;

pub mod system;
