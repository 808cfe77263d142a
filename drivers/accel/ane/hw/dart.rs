// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The ANE's DARTs (its IOMMUs), as far as this driver touches them: it
//! only ever reads their error register, to learn of a translation fault
//! before it reads an engine register (`docs/hardware-record.md`, "DART
//! fault containment"). The DARTs themselves belong to the kernel's
//! apple-dart driver.

/// The error register of the T8020-style DARTs of T8103 and T6001
/// (`apple,t8103-dart`, `apple,t6000-dart`), from the DART's base.
pub const ERROR: usize = 0x40;
/// [`ERROR`] bit 31: a fault is latched.
pub const ERROR_FLAG: u32 = 1 << 31;
/// [`ERROR`] bit 2: the faulting address had no page-table entry.
pub const ERROR_NO_PTE: u32 = 1 << 2;
/// Bytes of a DART window the driver maps (it reads only [`ERROR`]).
pub const WINDOW: usize = 0x100;
/// DARTs in front of the ANE (its `iommus` list).
pub const MAX_DARTS: usize = 3;

/// Whether a read of [`ERROR`] reports a latched fault (an all-ones read,
/// a window that no longer answers, counts as one).
pub const fn faulted(error: u32) -> bool {
    error & ERROR_FLAG != 0
}
