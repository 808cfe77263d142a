// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Hardware knowledge of the Apple Neural Engine, shared by every consumer.
//!
//! This module tree is plain `core` Rust: no `alloc`, no `std`, no kernel
//! crate. It is compiled twice from the same files:
//!
//! - into the kernel module, where the crate root `ane_drv.rs` declares
//!   `pub mod hw;`;
//! - as the host crate `ane-hw` (`userspace/ane-hw`), whose `lib.rs` carries
//!   the crate attributes (`#![no_std]`) and includes this file by path, so
//!   `cargo test` runs the unit tests below on the host and the userspace
//!   library and simulator use the very same definitions.
//!
//! Files in this tree therefore never carry crate-level attributes, and every
//! public item is documented (the kernel builds with `-Wmissing_docs`).
//!
//! `fw/` is the H14 (T602x) firmware path: image pin, boot contract, ChMan, firmware model.
//!
//! The functional models ([`engine`], and `fw::model`) serve the simulator
//! and the userspace host model only: the kernel module's production
//! flavour is built with `--cfg ane_kernel` and without `--cfg ane_test`
//! (see `Kbuild`), and leaves them out.

pub mod dart;
#[cfg(any(not(ane_kernel), ane_test))]
pub mod engine;
pub mod fw;
pub mod iova;
pub mod mem;
pub mod obs;
pub mod soc;
pub mod td;
pub mod tm;
pub mod uapi;

#[cfg(test)]
mod test_rng;
