// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Host build of the `ane` driver's shared hardware crate.
//!
//! The sources live in `drivers/accel/ane/hw/` and are compiled, unchanged,
//! into the kernel module. This file only supplies what a crate root must
//! carry (the kernel's lint set forbids crate attributes in included files).

#![no_std]

#[path = "../../../drivers/accel/ane/hw/mod.rs"]
mod hw;

pub use hw::*;
