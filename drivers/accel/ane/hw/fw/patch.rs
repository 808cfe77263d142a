// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The runtime patches iBoot applies to the firmware it preloads, replayed
//! on the driver's own staged copy.
//!
//! iBoot places the pinned image by its Mach-O layout (`__TEXT` at vm 0,
//! `__DATA` at vm 0xC4000) and then fills in a handful of fields before the
//! ASC runs it. A copy the driver stages itself (each segment's file bytes
//! at its `vmaddr` in a zeroed surface of [`STAGED_SIZE`] bytes) lacks
//! them, so [`apply`] writes them:
//!
//! - the `__TEXT` u64 at vm [`DATA_BASE_VM`]: the address the ASC sees
//!   `__DATA` at, `exec_base` + 0xC4000 (0 in the file);
//! - five `__rtk_patch` records ([`RTK_RECORDS`]), each `{u32 tag, u32
//!   length, value}`: the stack guard, `RTK_soc`, `RTK_soc_revision` and
//!   the physical addresses of the ASC CPU block and its wrapper;
//! - the ASC tunables block at vm [`TUNABLES_VM`]: the record count, the
//!   chip-revision key and `{u32 offset, u64 mask, u64 value}` records
//!   ([`T602X_TUNABLES`]).
//!
//! Every precondition (buffer length, table choice, the file's zero DATA
//! base, each record's tag and length, the block's header) is checked
//! before the first write, so a refusal leaves the buffer untouched; a
//! second [`apply`] is refused because the DATA base is no longer zero.
//!
//! Source: joshuaswarren/omarchy-ane `ane/t6021/ane_fw_validate.h` at
//! `c2b7408b621c7e5a19ea39efaf513170bfebaaba` (the addresses, tags, the
//! block layout and the T6021/T6022 table, which it takes from iBootStage2
//! of macOS 26.6.2 (25G83) and which equals the block of its 17 pre-Linux
//! T6021 captures), and its loader `ane/t6021/ane_t6021_fwload.c` (the
//! values: a fresh guard with one zero byte, SoC 0x6021, revision 0x11, the
//! engine window + 0x1000000 / + 0x1400000). Its replay matched all 17
//! pre-Linux T6021 captures byte for byte (`receipts/2026-10-01-t602x-
//! independent` at `908ea53275550168309b4544d8666c18bce36d75`) and ran on
//! a T6021, own memory, through the full gate (`receipts/2026-10-01-t6021-
//! default-on-gate` at `71ebd912ae49a2df73f89190b60bc991b71786f9`: "iBoot
//! patches replayed (soc 0x6021 rev 0x11 DATA 0x100000c4000 cpu
//! 0x285000000 wrapper 0x285400000)", READY and DONE, 16/16 gates).
//! Facts are restated here; no code was taken.

use core::fmt;

use super::super::soc::SocId;
use super::bytes::{array_at, put, put_u32, put_u64, u32_at, u64_at};
use super::image::{STAGED_SIZE, T6021_SEGMENTS};
use super::regs;

/// vm address of the `__TEXT` u64 that holds the `__DATA` base.
pub const DATA_BASE_VM: usize = 0x423c;
/// `__DATA`'s vmaddr, which that field adds to the execution base.
pub const DATA_VMADDR: u64 = T6021_SEGMENTS[1].vmaddr;

/// One `__rtk_patch` record of the pinned image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtkRecord {
    /// The symbol it patches.
    pub name: &'static str,
    /// Its vm address in the staged image.
    pub vm: usize,
    /// The tag word the file carries there.
    pub tag: u32,
    /// The value length word (4 or 8), the value follows it.
    pub len: u32,
}

/// Bytes of a record before its value.
pub const RTK_HEADER: usize = 8;

/// The five records, in the order of [`PatchParams`]' values.
pub const RTK_RECORDS: [RtkRecord; 5] = [
    RtkRecord {
        name: "_rtk_stack_guard",
        vm: 0xc_a848,
        tag: 0x5354_4b47,
        len: 8,
    },
    RtkRecord {
        name: "RTK_soc",
        vm: 0xc_a9b3,
        tag: 0x534f_435f,
        len: 4,
    },
    RtkRecord {
        name: "RTK_soc_revision",
        vm: 0xc_a9bf,
        tag: 0x534f_4352,
        len: 4,
    },
    RtkRecord {
        name: "RTK_cpu_physical_address",
        vm: 0xc_a9cb,
        tag: 0x4370_4164,
        len: 8,
    },
    RtkRecord {
        name: "RTK_cpu_wrapper_physical_address",
        vm: 0xc_a9db,
        tag: 0x5772_4164,
        len: 8,
    },
];

/// vm address of the ASC tunables block (a "type 1" block).
pub const TUNABLES_VM: usize = 0xd_cd78;
/// The most records the block holds (its header byte 2).
pub const TUNABLES_CAPACITY: usize = 0x24;
/// The block's header as the file carries it: type 1, flags 3 (20-byte
/// records), capacity, count 0, key "unset".
pub const TUNABLES_UNSET: [u8; 8] = [
    0x01,
    0x03,
    TUNABLES_CAPACITY as u8,
    0x00,
    0xff,
    0xff,
    0xff,
    0xff,
];
/// Bytes of the block header; the records follow.
pub const TUNABLES_HEADER: usize = 8;
/// Bytes of one record.
pub const TUNABLE_LEN: usize = 20;
/// Bytes of the whole block.
pub const TUNABLES_BLOCK: usize = TUNABLES_HEADER + TUNABLES_CAPACITY * TUNABLE_LEN;

// Every patch site lies inside the staged surface.
const _: () = assert!(TUNABLES_VM + TUNABLES_BLOCK <= STAGED_SIZE);

/// One ASC tunable: `*(base + off) = (*(base + off) & !mask) | val`, done
/// by the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunable {
    /// Offset (iBoot's own table sets bit 30 on it; the block does not).
    pub off: u32,
    /// Bits to change.
    pub mask: u64,
    /// Their value.
    pub val: u64,
}

/// One record list and the chip-revision keys it is filed under, highest
/// first. The block gets the first key not above the chip's revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// The keys, highest first.
    pub keys: &'static [u32],
    /// The records.
    pub records: &'static [Tunable],
}

impl Tunables {
    /// The key the block gets for chip revision `revision`.
    pub fn key(&self, revision: u32) -> Option<u32> {
        self.keys.iter().copied().find(|&k| k <= revision)
    }
}

/// Shorthand for the table.
const fn t(off: u32, mask: u64, val: u64) -> Tunable {
    Tunable { off, mask, val }
}

/// The T6021 and T6022 ASC tunables of the ANE: 24 records under keys
/// 0x10, 0x01, 0x00 (25G83 also has key 0x11, which the 13.5 capture shows
/// absent, so the record leaves it out; the capture's block key is 0x10).
pub const T602X_TUNABLES: Tunables = Tunables {
    keys: &[0x10, 0x01, 0x00],
    records: &[
        t(0x15_0010, 0x3f, 0x10),
        t(0x05_1c08, 0x1000_0000, 0x1000_0000),
        t(0x05_1c18, 0x0010_0000_0000_0000, 0x0010_0000_0000_0000),
        t(0x14_0020, 0xf0_0000, 0x70_0000),
        t(0x14_0120, 0x2eff, 0x2b1),
        t(0x14_0130, 0x3fff, 0x18),
        t(0x14_0138, 0x7fff, 0x64),
        t(0x14_0140, 0x3fff, 0x2f),
        t(0x14_0148, 0x7fff, 0xc8),
        t(0x14_0150, 0x3fff, 0x4f),
        t(0x14_0158, 0x7fff, 0x14e),
        t(0x14_0160, 0x3fff, 0x4f),
        t(0x14_0168, 0x7fff, 0x14e),
        t(0x14_0170, 0x3fff, 0x18),
        t(0x14_0178, 0x7fff, 0x64),
        t(0x14_0180, 0x3fff, 0x28),
        t(0x14_0188, 0x7fff, 0xa7),
        t(0x14_0190, 0x3fff, 0x28),
        t(0x14_0198, 0x7fff, 0xa7),
        t(0x14_01a0, 0x3fff, 0x4f),
        t(0x14_01a8, 0x7fff, 0x14e),
        t(0x14_5010, 0x8_000c, 0xc),
        t(0x14_a008, 0xff0_ffff, 0x2520),
        t(0x14_a010, 0xff0_ffff, 0x200_2520),
    ],
};

/// The T6020 (M2 Pro) ASC tunables of the ANE: one list under key 0x00,
/// at the T6021 offsets, 13 of whose 24 values differ (iBootStage2 25G83
/// of j414s/j416s, as OA-VH `c2b7408b` restates it).
pub const T6020_TUNABLES: Tunables = Tunables {
    keys: &[0x00],
    records: &[
        t(0x15_0010, 0x3f, 0x10),
        t(0x05_1c08, 0x1000_0000, 0x1000_0000),
        t(0x05_1c18, 0x0010_0000_0000_0000, 0x0010_0000_0000_0000),
        t(0x14_0020, 0xf0_0000, 0x70_0000),
        t(0x14_0120, 0x2eff, 0x2b1),
        t(0x14_0130, 0x3fff, 0x18),
        t(0x14_0138, 0x7fff, 0x64),
        t(0x14_0140, 0x3fff, 0x18),
        t(0x14_0148, 0x7fff, 0x64),
        t(0x14_0150, 0x3fff, 0x20),
        t(0x14_0158, 0x7fff, 0x86),
        t(0x14_0160, 0x3fff, 0x4f),
        t(0x14_0168, 0x7fff, 0x14e),
        t(0x14_0170, 0x3fff, 0x8),
        t(0x14_0178, 0x7fff, 0x22),
        t(0x14_0180, 0x3fff, 0x8),
        t(0x14_0188, 0x7fff, 0x22),
        t(0x14_0190, 0x3fff, 0x18),
        t(0x14_0198, 0x7fff, 0x64),
        t(0x14_01a0, 0x3fff, 0x18),
        t(0x14_01a8, 0x7fff, 0x64),
        t(0x14_5010, 0x8_000c, 0xc),
        t(0x14_a008, 0xff0_ffff, 0x2520),
        t(0x14_a010, 0xff0_ffff, 0x100_2520),
    ],
};

/// What the patches write that differs between the H14 chips: `RTK_soc`,
/// `RTK_soc_revision` and the tunables list. The engine window (and so
/// the CPU and wrapper addresses) is the node's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chip {
    /// `RTK_soc`.
    pub soc: u32,
    /// `RTK_soc_revision`; also picks the tunables key.
    pub revision: u32,
    /// The ASC tunables.
    pub tunables: &'static Tunables,
}

/// The T6021 (M2 Max): the values of the 17 pre-Linux captures and of the
/// record's gate (OA-GATE).
pub const T6021_CHIP: Chip = Chip {
    soc: T6021_SOC,
    revision: T6021_REVISION,
    tunables: &T602X_TUNABLES,
};

/// The T6020 (M2 Pro): `RTK_soc` 0x6020, revision 0x01 (ANEMinorVersion 1
/// on four of omarchy-ane's community rows), the T6020 tunables. Source:
/// omarchy-ane `packaging/dt/t6020-ane.dts` and OA-VH at `c2b7408b`; it
/// ran on one M2 Pro only as omarchy-ane's community row `3c9389040f51`
/// (the aurora in-tree driver; CHANGELOG `0477f725`, "T6020 on by
/// default"). Booting the T6020 with the T6021's values would hand its
/// firmware another chip's SoC number and tunables.
pub const T6020_CHIP: Chip = Chip {
    soc: T6020_SOC,
    revision: T6020_REVISION,
    tunables: &T6020_TUNABLES,
};

/// `RTK_soc` of the T6020.
pub const T6020_SOC: u32 = 0x6020;
/// `RTK_soc_revision` of the T6020 (see [`T6020_CHIP`]).
pub const T6020_REVISION: u32 = 0x01;

/// The chip whose `RTK_soc` is `soc`, if the driver boots it.
pub const fn chip_by_soc(soc: u32) -> Option<&'static Chip> {
    match soc {
        T6021_SOC => Some(&T6021_CHIP),
        T6020_SOC => Some(&T6020_CHIP),
        _ => None,
    }
}

/// The chip values of an H14 SoC (`None` for H13, which has no firmware
/// to patch).
pub const fn chip(id: SocId) -> Option<&'static Chip> {
    match id {
        SocId::T6021 => Some(&T6021_CHIP),
        SocId::T6020 => Some(&T6020_CHIP),
        SocId::T8103 | SocId::T6000 => None,
    }
}

/// `RTK_soc` of the T6021.
pub const T6021_SOC: u32 = 0x6021;
/// `RTK_soc_revision` of the T6021: a measured constant (all 17 captures),
/// since Linux is given no chip revision.
pub const T6021_REVISION: u32 = 0x11;
/// Physical base of the T6021 ANE's `engine` window (its first ADT range).
pub const T6021_ENGINE_BASE: u64 = 0x2_8400_0000;
/// `RTK_cpu_physical_address` of the T6021 (0x285000000).
pub const T6021_CPU_PA: u64 = T6021_ENGINE_BASE + regs::ASC_CPU_BASE as u64;
/// `RTK_cpu_wrapper_physical_address` of the T6021 (0x285400000).
pub const T6021_WRAPPER_PA: u64 = T6021_ENGINE_BASE + regs::WRAPPER_BASE as u64;

/// The values the patches write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchParams {
    /// The address the ASC runs vm 0 at: the latched RVBAR entry, or the
    /// staged copy's device address when RVBAR is not latched.
    pub exec_base: u64,
    /// `_rtk_stack_guard`: per boot random, see [`stack_guard`].
    pub stack_guard: u64,
    /// `RTK_soc`.
    pub soc: u32,
    /// `RTK_soc_revision`; also picks the tunables key.
    pub revision: u32,
    /// `RTK_cpu_physical_address`.
    pub cpu_pa: u64,
    /// `RTK_cpu_wrapper_physical_address`.
    pub wrapper_pa: u64,
}

impl PatchParams {
    /// The T6021 values for a given entry and guard.
    pub const fn t6021(exec_base: u64, stack_guard: u64) -> Self {
        Self {
            exec_base,
            stack_guard,
            soc: T6021_SOC,
            revision: T6021_REVISION,
            cpu_pa: T6021_CPU_PA,
            wrapper_pa: T6021_WRAPPER_PA,
        }
    }

    /// The values for `chip` whose `engine` window is at `engine_pa`.
    pub const fn for_chip(chip: &Chip, exec_base: u64, stack_guard: u64, engine_pa: u64) -> Self {
        Self {
            exec_base,
            stack_guard,
            soc: chip.soc,
            revision: chip.revision,
            cpu_pa: engine_pa.wrapping_add(regs::ASC_CPU_BASE as u64),
            wrapper_pa: engine_pa.wrapping_add(regs::WRAPPER_BASE as u64),
        }
    }

    /// The record values in [`RTK_RECORDS`] order.
    fn values(&self) -> [u64; 5] {
        [
            self.stack_guard,
            u64::from(self.soc),
            u64::from(self.revision),
            self.cpu_pa,
            self.wrapper_pa,
        ]
    }
}

/// `random` with byte `pos % 8` cleared: iBoot's guards carry one zero
/// byte (so string overruns stop at it).
pub const fn stack_guard(random: u64, pos: u8) -> u64 {
    random & !(0xff << (8 * (pos % 8) as u32))
}

/// A guard from one random word, as the record's loader makes it: the
/// zero byte's position is the word's top three bits.
pub const fn stack_guard_from(random: u64) -> u64 {
    stack_guard(random, (random >> 61) as u8)
}

/// Why the patches were refused (the buffer is untouched).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchError {
    /// The buffer is smaller than the staged surface.
    StagedTooShort {
        /// Its bytes.
        len: usize,
        /// [`STAGED_SIZE`].
        need: usize,
    },
    /// No key of the table is at or below the chip revision.
    NoTunables {
        /// The revision.
        revision: u32,
    },
    /// The table has more records than the block holds.
    TooManyTunables {
        /// Its records.
        records: usize,
    },
    /// `exec_base` + the DATA vmaddr overflows.
    DataBaseOverflow {
        /// The base.
        exec_base: u64,
    },
    /// The DATA base field is not the file's zero (already patched, or not
    /// the pinned image).
    DataBaseNotZero {
        /// What it holds.
        found: u64,
    },
    /// A `__rtk_patch` record does not carry its tag and length.
    RtkRecord {
        /// Index in [`RTK_RECORDS`].
        index: usize,
        /// The tag found.
        tag: u32,
        /// The length found.
        len: u32,
    },
    /// `RTK_soc` names no chip the driver boots.
    UnknownSoc {
        /// The number.
        soc: u32,
    },
    /// The tunables block header is not the file's.
    TunablesHeader {
        /// The header found.
        found: [u8; 8],
    },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::StagedTooShort { len, need } => {
                write!(f, "staged buffer of {len:#x} bytes, need {need:#x}")
            }
            Self::NoTunables { revision } => {
                write!(f, "no ASC tunables for chip revision {revision:#x}")
            }
            Self::TooManyTunables { records } => {
                write!(f, "{records} tunables, the block holds {TUNABLES_CAPACITY}")
            }
            Self::DataBaseOverflow { exec_base } => {
                write!(f, "exec base {exec_base:#x} + DATA overflows")
            }
            Self::DataBaseNotZero { found } => {
                write!(f, "DATA base field holds {found:#x}, not the file's 0")
            }
            Self::RtkRecord { index, tag, len } => {
                let name = RTK_RECORDS.get(index).map_or("?", |r| r.name);
                write!(
                    f,
                    "__rtk_patch {name}: tag {tag:#010x} length {len}, not the pinned image's"
                )
            }
            Self::UnknownSoc { soc } => write!(f, "no ASC tunables for SoC {soc:#x}"),
            Self::TunablesHeader { found } => {
                write!(
                    f,
                    "tunables block header {found:02x?}, not the pinned image's"
                )
            }
        }
    }
}

/// Replays iBoot's patches with the tunables of the chip `p.soc` names
/// ([`chip_by_soc`]).
pub fn apply(staged: &mut [u8], p: &PatchParams) -> Result<(), PatchError> {
    let chip = chip_by_soc(p.soc).ok_or(PatchError::UnknownSoc { soc: p.soc })?;
    apply_with(staged, p, chip.tunables)
}

/// Replays iBoot's patches on `staged`, the image laid out by `vmaddr`
/// (at least [`STAGED_SIZE`] bytes), with tunables `table`. Checks
/// everything first; on error nothing was written.
pub fn apply_with(staged: &mut [u8], p: &PatchParams, table: &Tunables) -> Result<(), PatchError> {
    if staged.len() < STAGED_SIZE {
        return Err(PatchError::StagedTooShort {
            len: staged.len(),
            need: STAGED_SIZE,
        });
    }
    let short = PatchError::StagedTooShort {
        len: staged.len(),
        need: STAGED_SIZE,
    };
    let key = table.key(p.revision).ok_or(PatchError::NoTunables {
        revision: p.revision,
    })?;
    let count = table.records.len();
    if count > TUNABLES_CAPACITY {
        return Err(PatchError::TooManyTunables { records: count });
    }
    let data_base = p
        .exec_base
        .checked_add(DATA_VMADDR)
        .ok_or(PatchError::DataBaseOverflow {
            exec_base: p.exec_base,
        })?;
    let found = u64_at(staged, DATA_BASE_VM).ok_or(short)?;
    if found != 0 {
        return Err(PatchError::DataBaseNotZero { found });
    }
    for (index, r) in RTK_RECORDS.iter().enumerate() {
        let tag = u32_at(staged, r.vm).ok_or(short)?;
        let len = u32_at(staged, r.vm + 4).ok_or(short)?;
        if tag != r.tag || len != r.len {
            return Err(PatchError::RtkRecord { index, tag, len });
        }
    }
    let header: [u8; 8] = array_at(staged, TUNABLES_VM).ok_or(short)?;
    if header != TUNABLES_UNSET {
        return Err(PatchError::TunablesHeader { found: header });
    }
    // Every write below lies in [0, TUNABLES_VM + TUNABLES_BLOCK), inside
    // STAGED_SIZE, so none can fail after the length check.
    if staged.get(..TUNABLES_VM + TUNABLES_BLOCK).is_none() {
        return Err(short);
    }

    put_u64(staged, DATA_BASE_VM, data_base).ok_or(short)?;
    for (r, v) in RTK_RECORDS.iter().zip(p.values()) {
        let bytes = v.to_le_bytes();
        let value = bytes.get(..r.len as usize).ok_or(short)?;
        put(staged, r.vm + RTK_HEADER, value).ok_or(short)?;
    }
    // count <= TUNABLES_CAPACITY (0x24), so it fits the count byte.
    put(staged, TUNABLES_VM + 3, &[count as u8]).ok_or(short)?;
    put_u32(staged, TUNABLES_VM + 4, key).ok_or(short)?;
    for (i, r) in table.records.iter().enumerate() {
        let at = TUNABLES_VM + TUNABLES_HEADER + i * TUNABLE_LEN;
        put_u32(staged, at, r.off).ok_or(short)?;
        put_u64(staged, at + 4, r.mask).ok_or(short)?;
        put_u64(staged, at + 12, r.val).ok_or(short)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::string::ToString;
    use std::vec;
    use std::vec::Vec;

    use super::super::image::{self, tests::pinned_shape};
    use super::*;

    /// Filler of the record values and the block body before patching.
    const FILL: u8 = 0xa5;

    /// Writes the archive's patch sites into a file at their vm addresses
    /// (through the segment that holds each).
    fn put_vm(file: &mut [u8], vm: usize, bytes: &[u8]) {
        let seg = T6021_SEGMENTS
            .iter()
            .find(|s| vm as u64 >= s.vmaddr && ((vm + bytes.len()) as u64) <= s.vmaddr + s.filesize)
            .expect("inside a segment's file bytes");
        let at = (vm as u64 - seg.vmaddr + seg.fileoff) as usize;
        file[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// The values the archive carries in the records before iBoot's
    /// patches (omarchy-ane receipts/2026-10-01-t602x-independent).
    const ARCHIVE: [u64; 5] = [0xaff, 0xffff_ffff, 0xffff_ffff, 0, 0];

    /// A file of the pinned shape carrying the archive's patch sites. The
    /// block's body is [`FILL`] rather than the archive's zeros, so a
    /// stray write past the records shows.
    fn archive_file() -> Vec<u8> {
        let mut f = pinned_shape();
        for (r, v) in RTK_RECORDS.iter().zip(ARCHIVE) {
            let mut rec = Vec::new();
            rec.extend_from_slice(&r.tag.to_le_bytes());
            rec.extend_from_slice(&r.len.to_le_bytes());
            rec.extend_from_slice(&v.to_le_bytes()[..r.len as usize]);
            put_vm(&mut f, r.vm, &rec);
            // Bytes right after each record are not part of it.
            put_vm(&mut f, r.vm + rec.len(), &[FILL]);
        }
        let mut block = vec![FILL; TUNABLES_BLOCK + 16];
        block[..8].copy_from_slice(&TUNABLES_UNSET);
        put_vm(&mut f, TUNABLES_VM, &block);
        put_vm(&mut f, DATA_BASE_VM - 4, &[FILL; 4]);
        put_vm(&mut f, DATA_BASE_VM + 8, &[FILL; 4]);
        f
    }

    /// Stages a file as the loader does: each segment's file bytes at its
    /// vmaddr in a zeroed surface.
    fn stage(file: &[u8]) -> Vec<u8> {
        let img = image::parse(file).unwrap();
        image::T6021_PIN.check_summary(&img).unwrap();
        let mut staged = vec![0u8; STAGED_SIZE];
        for s in img.segments() {
            let (vm, off, n) = (s.vmaddr as usize, s.fileoff as usize, s.filesize as usize);
            staged[vm..vm + n].copy_from_slice(&file[off..off + n]);
        }
        staged
    }

    fn staged() -> Vec<u8> {
        stage(&archive_file())
    }

    const ENTRY: u64 = 0x100_0000_0000;
    const GUARD: u64 = 0x1122_3344_0066_7788;

    /// The T6020's list has the T6021's offsets and masks and differs in
    /// 13 of 24 values (OA-VH); every firmware-backed SoC of the table has
    /// chip values and every host-driven one has none; a T6020 staged
    /// copy carries 0x6020, revision 1, key 0 and the T6020 values.
    #[test]
    fn t6020_chip_values() {
        use super::super::super::soc::{BackendKind, TABLE};
        let (a, b) = (T602X_TUNABLES.records, T6020_TUNABLES.records);
        assert_eq!(a.len(), b.len());
        let differ = a.iter().zip(b).filter(|(x, y)| x.val != y.val).count();
        assert_eq!(differ, 13);
        assert!(a
            .iter()
            .zip(b)
            .all(|(x, y)| x.off == y.off && x.mask == y.mask));
        for soc in TABLE {
            assert_eq!(
                chip(soc.id).is_some(),
                soc.backend == BackendKind::Firmware,
                "{:?}",
                soc.id
            );
            if let Some(c) = chip(soc.id) {
                assert_eq!(c.soc, soc.id as u32, "RTK_soc is the chip number");
                assert_eq!(chip_by_soc(c.soc), Some(c));
                assert!(c.tunables.key(c.revision).is_some());
            }
        }
        let mut s = staged();
        let p = PatchParams::for_chip(&T6020_CHIP, ENTRY, GUARD, T6021_ENGINE_BASE);
        assert_eq!(p.cpu_pa, T6021_CPU_PA);
        assert_eq!(p.wrapper_pa, T6021_WRAPPER_PA);
        apply(&mut s, &p).unwrap();
        let val = |r: usize| u32_at(&s, RTK_RECORDS[r].vm + RTK_HEADER).unwrap();
        assert_eq!((val(1), val(2)), (0x6020, 0x01));
        assert_eq!(u32_at(&s, TUNABLES_VM + 4), Some(0x00));
        for (i, r) in T6020_TUNABLES.records.iter().enumerate() {
            let at = TUNABLES_VM + TUNABLES_HEADER + i * TUNABLE_LEN;
            assert_eq!(u64_at(&s, at + 12), Some(r.val), "record {i}");
        }
        // A number no chip has is refused before any write.
        let mut s = staged();
        let before = s.clone();
        let p = PatchParams { soc: 0x8112, ..p };
        assert_eq!(
            apply(&mut s, &p),
            Err(PatchError::UnknownSoc { soc: 0x8112 })
        );
        assert!(s == before);
    }

    #[test]
    fn writes_every_patch_and_nothing_else() {
        let before = staged();
        let mut s = before.clone();
        apply(&mut s, &PatchParams::t6021(ENTRY, GUARD)).unwrap();

        // The expected image, written independently byte by byte.
        let mut want = before.clone();
        let mut set = |at: usize, bytes: &[u8]| want[at..at + bytes.len()].copy_from_slice(bytes);
        set(0x423c, &[0x00, 0x40, 0x0c, 0x00, 0x00, 0x01, 0x00, 0x00]);
        set(
            0xc_a848 + 8,
            &[0x88, 0x77, 0x66, 0x00, 0x44, 0x33, 0x22, 0x11],
        );
        set(0xc_a9b3 + 8, &[0x21, 0x60, 0x00, 0x00]);
        set(0xc_a9bf + 8, &[0x11, 0x00, 0x00, 0x00]);
        set(
            0xc_a9cb + 8,
            &[0x00, 0x00, 0x00, 0x85, 0x02, 0x00, 0x00, 0x00],
        );
        set(
            0xc_a9db + 8,
            &[0x00, 0x00, 0x40, 0x85, 0x02, 0x00, 0x00, 0x00],
        );
        set(0xd_cd78 + 3, &[24, 0x10, 0x00, 0x00, 0x00]);
        // First record: 0x150010, mask 0x3f, value 0x10.
        set(
            0xd_cd80,
            &[
                0x10, 0x00, 0x15, 0x00, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0,
            ],
        );
        for (i, r) in T602X_TUNABLES.records.iter().enumerate().skip(1) {
            let at = 0xd_cd80 + 20 * i;
            set(at, &r.off.to_le_bytes());
            set(at + 4, &r.mask.to_le_bytes());
            set(at + 12, &r.val.to_le_bytes());
        }
        // Last record: 0x14a010, mask 0xff0ffff, value 0x2002520.
        assert_eq!(
            want[0xd_cd80 + 20 * 23..0xd_cd80 + 20 * 24],
            [
                0x10, 0xa0, 0x14, 0x00, 0xff, 0xff, 0xf0, 0x0f, 0, 0, 0, 0, 0x20, 0x25, 0x00, 0x02,
                0, 0, 0, 0
            ]
        );
        let diff: Vec<usize> = (0..s.len()).filter(|&i| s[i] != want[i]).collect();
        assert!(
            diff.is_empty(),
            "bytes differ at {:x?}",
            &diff[..diff.len().min(8)]
        );
        // The block's unused capacity and everything around stays.
        assert_eq!(s[0xd_cd80 + 20 * 24], FILL);
        assert_eq!(s[0x423c - 1], FILL);
        assert_eq!(s[0x4244], FILL);
        let changed = s.iter().zip(&before).filter(|(a, b)| a != b).count();
        assert!(changed <= 8 + 8 + 4 + 4 + 8 + 8 + 5 + 24 * 20, "{changed}");
    }

    #[test]
    fn a_second_replay_is_refused() {
        let mut s = staged();
        let p = PatchParams::t6021(ENTRY, GUARD);
        apply(&mut s, &p).unwrap();
        let once = s.clone();
        assert_eq!(
            apply(&mut s, &p),
            Err(PatchError::DataBaseNotZero {
                found: 0x100_000c_4000
            })
        );
        assert!(s == once);
    }

    /// Applies to a staged buffer broken by `f`; asserts the refusal left
    /// it as it was and returns the error.
    fn refused(f: impl FnOnce(&mut Vec<u8>), p: &PatchParams, t: &Tunables) -> PatchError {
        let mut s = staged();
        f(&mut s);
        let before = s.clone();
        let e = apply_with(&mut s, p, t).expect_err("must refuse");
        assert!(s == before, "{e:?} wrote to the buffer");
        e
    }

    #[test]
    fn each_precondition_refuses_before_writing() {
        let p = PatchParams::t6021(ENTRY, GUARD);
        let tab = &T602X_TUNABLES;
        assert_eq!(
            refused(|s| s.truncate(STAGED_SIZE - 1), &p, tab),
            PatchError::StagedTooShort {
                len: STAGED_SIZE - 1,
                need: STAGED_SIZE
            }
        );
        let high = Tunables {
            keys: &[0x10],
            records: T602X_TUNABLES.records,
        };
        let old = PatchParams {
            revision: 0x0f,
            ..p
        };
        assert_eq!(
            refused(|_| {}, &old, &high),
            PatchError::NoTunables { revision: 0x0f }
        );
        static MANY: [Tunable; TUNABLES_CAPACITY + 1] = [t(0, 0, 0); TUNABLES_CAPACITY + 1];
        let many = Tunables {
            keys: &[0],
            records: &MANY,
        };
        assert_eq!(
            refused(|_| {}, &p, &many),
            PatchError::TooManyTunables { records: 37 }
        );
        let far = PatchParams {
            exec_base: u64::MAX - 0x1000,
            ..p
        };
        assert_eq!(
            refused(|_| {}, &far, tab),
            PatchError::DataBaseOverflow {
                exec_base: u64::MAX - 0x1000
            }
        );
        assert_eq!(
            refused(|s| s[0x4243] = 1, &p, tab),
            PatchError::DataBaseNotZero {
                found: 0x0100_0000_0000_0000
            }
        );
        for (index, r) in RTK_RECORDS.iter().enumerate() {
            assert_eq!(
                refused(|s| s[r.vm] ^= 1, &p, tab),
                PatchError::RtkRecord {
                    index,
                    tag: r.tag ^ 1,
                    len: r.len
                }
            );
            assert_eq!(
                refused(|s| s[r.vm + 4] = 12 - r.len as u8, &p, tab),
                PatchError::RtkRecord {
                    index,
                    tag: r.tag,
                    len: 12 - r.len
                }
            );
        }
        for i in 0..8 {
            let mut found = TUNABLES_UNSET;
            found[i] ^= 0x80;
            assert_eq!(
                refused(|s| s[TUNABLES_VM + i] ^= 0x80, &p, tab),
                PatchError::TunablesHeader { found }
            );
        }
        // A zeroed (unstaged) surface is refused at the first record.
        let mut z = vec![0u8; STAGED_SIZE];
        assert_eq!(
            apply(&mut z, &p),
            Err(PatchError::RtkRecord {
                index: 0,
                tag: 0,
                len: 0
            })
        );
        assert!(z.iter().all(|&b| b == 0));
    }

    #[test]
    fn the_key_is_the_first_not_above_the_revision() {
        let k = |r| T602X_TUNABLES.key(r);
        assert_eq!(k(T6021_REVISION), Some(0x10));
        assert_eq!(k(0x10), Some(0x10));
        assert_eq!(k(0x0f), Some(0x01));
        assert_eq!(k(0x01), Some(0x01));
        assert_eq!(k(0x00), Some(0x00));
        let mut s = staged();
        apply(
            &mut s,
            &PatchParams {
                revision: 0x05,
                ..PatchParams::t6021(ENTRY, GUARD)
            },
        )
        .unwrap();
        assert_eq!(s[TUNABLES_VM + 4..TUNABLES_VM + 8], [1, 0, 0, 0]);
        assert_eq!(s[0xc_a9bf + 8..0xc_a9bf + 12], [5, 0, 0, 0]);
    }

    #[test]
    fn the_record_tables() {
        assert_eq!(T602X_TUNABLES.records.len(), 24);
        assert_eq!(T6021_CPU_PA, 0x2_8500_0000);
        assert_eq!(T6021_WRAPPER_PA, 0x2_8540_0000);
        assert_eq!(TUNABLES_BLOCK, 0x2d8);
        // 0x1e8 bytes of the block are written (the captures differ there).
        assert_eq!(TUNABLES_HEADER + 24 * TUNABLE_LEN, 0x1e8);
        // Records do not overlap, and every site lies in the file bytes of
        // the segment that holds it (so staging alone puts the archive's
        // tags there).
        let mut sites: Vec<(usize, usize)> = RTK_RECORDS
            .iter()
            .map(|r| (r.vm, r.vm + RTK_HEADER + r.len as usize))
            .collect();
        sites.push((DATA_BASE_VM, DATA_BASE_VM + 8));
        sites.push((TUNABLES_VM, TUNABLES_VM + TUNABLES_BLOCK));
        sites.sort();
        for w in sites.windows(2) {
            assert!(w[0].1 <= w[1].0, "{w:x?}");
        }
        for (lo, hi) in sites {
            assert!(T6021_SEGMENTS
                .iter()
                .any(|s| lo as u64 >= s.vmaddr && hi as u64 <= s.vmaddr + s.filesize));
        }
        for (r, tag) in RTK_RECORDS
            .iter()
            .zip([*b"GKTS", *b"_COS", *b"RCOS", *b"dApC", *b"dArW"])
        {
            assert_eq!(r.tag.to_le_bytes(), tag, "{}", r.name);
        }
    }

    #[test]
    fn stack_guards_have_one_zero_byte() {
        let r = 0xffff_ffff_ffff_ffffu64;
        for pos in 0..8u8 {
            let g = stack_guard(r, pos);
            assert_eq!(g.to_le_bytes().iter().filter(|&&b| b == 0).count(), 1);
            assert_eq!(g.to_le_bytes()[pos as usize], 0);
        }
        assert_eq!(stack_guard(r, 9), stack_guard(r, 1));
        // The loader's rule: the position is the top three bits.
        assert_eq!(
            stack_guard_from(0x1234_5678_9abc_def0),
            0x1234_5678_9abc_de00
        );
        assert_eq!(
            stack_guard_from(0xe234_5678_9abc_def0),
            0x0034_5678_9abc_def0
        );
        assert_eq!(
            stack_guard_from(0x4234_5678_9abc_def0),
            0x4234_5678_9a00_def0
        );
    }

    #[test]
    fn errors_name_the_site() {
        let e = PatchError::RtkRecord {
            index: 3,
            tag: 0,
            len: 0,
        };
        assert_eq!(
            e.to_string(),
            "__rtk_patch RTK_cpu_physical_address: tag 0x00000000 length 0, not the pinned image's"
        );
    }
}
