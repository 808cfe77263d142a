// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The H14 (T602x, M2 Pro/Max) firmware path: everything the driver and the
//! simulator share about starting the ANE coprocessor's firmware and talking
//! to it, in plain `core` Rust.
//!
//! On H14 the host does not program the engine: Linux stages Apple's
//! firmware image, releases the ANE's ASC CPU, hands it its memory through
//! the scratch registers, and then exchanges commands with it over the
//! legacy "ChMan" rings in a shared 'IPC ' surface, ringing an IPI doorbell
//! (`shared/reference/seed-repos.md` §3, `hw.md` §3). The parts:
//!
//! - [`sha256`]: the SHA-256 interface of the firmware pin and the program
//!   digest (the module hashes with the kernel's crypto library);
//! - [`image`]: structural checks of the firmware Mach-O and its pin;
//! - [`patch`]: the runtime patches iBoot applies to the image it preloads,
//!   replayed on the driver's own staged copy;
//! - [`regs`]: register offsets, bitfields and magic values;
//! - [`boot`]: the release contract (S1..S7 and the legacy ack) over small
//!   traits the kernel implements;
//! - [`chman`]: the channel table, ring slots and the host side of an
//!   exchange as a non-blocking state machine;
//! - [`msg`]: command encoders and reply decoders, and the program digest;
//! - [`program`]: the shape of the H14 programs that ran, and the refusal
//!   of anything else (an H13 task stream never reaches the firmware);
//! - `model`: a functional model of the firmware for the simulator (not in
//!   the production kernel module).
//!
//! Nothing here allocates or panics on untrusted input: every length and
//! offset that comes from the image, the firmware or the user is checked.

mod bytes;

pub mod boot;
pub mod chman;
pub mod image;
#[cfg(any(not(ane_kernel), ane_test))]
pub mod model;
pub mod msg;
pub mod patch;
pub mod program;
pub mod regs;
pub mod sha256;

#[cfg(test)]
mod tests;
