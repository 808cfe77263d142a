// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! H13 (M1 generation) task descriptors: decoding and validation.
//!
//! A program for the H13 engine is a chain of task descriptors (TDs) in the
//! command buffer, which the task manager fetches through BAR slot 0. Each TD
//! is a ten-word header followed by register *streams*: one header word
//! `(nwords - 1) << 26 | hardware byte address`, then `nwords` values the
//! engine writes to consecutive register addresses. The engine walks the
//! stream headers, so streams may come in any order, and register state
//! persists from one TD to the next.
//!
//! The parts:
//!
//! - [`regs`]: the register blocks, every register offset and bitfield the
//!   project knows, and typed views of register values;
//! - [`header`]: the ten header words W0..W9;
//! - [`decode`]: walking a program's TDs and their streams into a
//!   [`RegImage`], a per-block register file that readers use by name,
//!   whatever order the streams came in;
//! - [`view`]: by-name, typed access to the blocks of a [`RegImage`];
//! - [`validate`]: the whole-program check the kernel runs once when a
//!   program is created, which returns what every BAR slot is used for and
//!   how large the buffer bound to it must be;
//! - [`error`]: why a program was rejected.
//!
//! All of it is plain `core` code without allocation or panics, because it
//! runs inside the kernel on untrusted bytes.
//!
//! Sources of the facts: `shared/reference/td.md` (the wire format and the
//! bitfield map, which comes from Apple's own register printer) and the real
//! compiled programs the tests read. Where td.md and hw.md disagree on a bit
//! position, td.md is followed.

pub mod decode;
pub mod error;
pub mod header;
pub mod regs;
pub mod validate;
pub mod view;

#[cfg(test)]
pub(crate) mod tests;

pub use decode::{Program, RegImage, RegMask, StreamHeader, Td};
pub use error::{ChainFault, Dma, TdError};
pub use header::Header;
pub use regs::{Block, DataFormat, Field, Reg};
pub use validate::{
    BufferError, ProgramSummary, SlotInfo, SlotMask, SlotUsage, MAX_DMA_EXTENT, TDS_PER_TICK,
};

/// Bytes of the TD header (words W0..W9).
pub const HEADER_SIZE: u32 = 0x28;

/// Number of 32-bit words in the TD header.
pub const HEADER_WORDS: usize = 10;

/// Words before the first register stream of a TD whose W9 is `w9`: ten,
/// or eleven when W9 has both low bits set (omarchy-ane's binder, which
/// walked the programs that ran on hardware, `docs/hardware-record.md`
/// "Task descriptors"). What the eleventh word holds is not known; it is
/// skipped, never taken for a stream.
pub const fn header_len_words(w9: u32) -> usize {
    if w9 & 3 == 3 {
        HEADER_WORDS + 1
    } else {
        HEADER_WORDS
    }
}

/// Size of the TD that compilers v4.2.1 to v7.6.4 emit: the header and seven
/// streams covering the standard register windows.
pub const TD_SIZE_STANDARD: u32 = 0x274;

/// Size of the compact TD that macOS 26 (compiler v9.509) emits; it splits
/// the kernel DMA stream in two and skips the coefficient base/size words.
pub const TD_SIZE_COMPACT: u32 = 0x1F8;

/// Distance between consecutive TDs in the command buffers compilers emit
/// (a 0x274-byte TD padded to 0x300). The chain itself is defined by each
/// header's NextPointer, not by this constant.
pub const TD_STRIDE_STANDARD: u32 = 0x300;

/// Smallest TD accepted: the header plus one stream of one word.
pub const MIN_TD_SIZE: u32 = HEADER_SIZE + 8;

/// Largest TD accepted. The size of the next TD is carried in the 9-bit
/// NextSize header field (and in the same-width size field of the task
/// manager) as `words - 1`, so no TD can be longer than 512 words.
pub const MAX_TD_SIZE: u32 = 512 * 4;

/// Largest TD count: the task manager takes the count in a 16-bit field.
pub const MAX_TD_COUNT: u32 = 0xFFFF;

/// Number of BAR slots (base-address registers) a task queue has; header
/// fields RBase/WBase/TBase/KBase index this table.
pub const BAR_SLOTS: usize = 32;

/// BAR slot of the command buffer (the TD chain).
pub const SLOT_COMMAND: u8 = 0;

/// BAR slot of the kernel coefficients (weights), which the driver places
/// right after the TDs in the command buffer.
pub const SLOT_KERNEL: u8 = 1;

/// Granule of the engine's tile and kernel DMA: addresses and strides are
/// held in bits \[31:6\], so every transfer covers whole 64-byte units.
pub const DMA_GRANULE: u64 = 64;

/// Reads the little-endian 32-bit word at byte `offset` of `bytes`, or `None`
/// when it does not fit.
#[inline]
pub(crate) fn read_le32(bytes: &[u8], offset: usize) -> Option<u32> {
    let end = offset.checked_add(4)?;
    let b = bytes.get(offset..end)?;
    let arr: [u8; 4] = b.try_into().ok()?;
    Some(u32::from_le_bytes(arr))
}
