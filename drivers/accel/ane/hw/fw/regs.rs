// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! T602x (H14) registers of the ANE's ASC, its wrapper, scratch, doorbell
//! and mailbox blocks, the PMGR power-state words, the magic values of the
//! release contract and the firmware's device-address map.
//!
//! Facts: `seed-repos.md` §3.1–§3.5 and `hw.md` §3.1–§3.2. Offsets are
//! relative to the device's `engine` window, which on T6021 is the whole
//! 32 MiB ADT range at `0x284000000` (there is no H13-style `+0x1c04000`
//! engine delta: touching `0x285c04000` external-aborted). Every access must
//! be non-posted.
//!
//! Hazards the source repeats: reads of `[FABRIC_FATAL_START,
//! FABRIC_FATAL_END)` are fabric-fatal, CoreSight at `0x1010000` must not be
//! touched, any engine read with an ANE power island off wedges the fabric,
//! and raw PMGR power-state writes reset the machine. The driver therefore
//! reads the PMGR window only, and only through a read-only interface (see
//! [`super::boot::Pmgr`]).

/// Bytes of the T6021 engine window.
pub const ENGINE_WINDOW: usize = 0x200_0000;

/// The ASC CPU block (`RTK_cpu_physical_address`, 0x285000000).
pub const ASC_CPU_BASE: usize = 0x100_0000;
/// Reset vector base address register (64 bit). iBoot latches it.
pub const RVBAR: usize = 0x105_0000;
/// CoreSight external debug power/reset control. Documented only: the
/// driver never touches it (CoreSight is fused off on T6021).
pub const EDPRCR: usize = 0x101_0310;
/// Start of the CoreSight block that must never be accessed.
pub const CORESIGHT_BASE: usize = 0x101_0000;
/// A CNTVCT mirror; not a transport.
pub const CNTVCT_MIRROR: usize = 0x117_0000;

/// The ASC wrapper (0x285400000).
pub const WRAPPER_BASE: usize = 0x140_0000;
/// CPU control; [`CPU_CONTROL_RUN`] releases the CPU.
pub const CPU_CONTROL: usize = WRAPPER_BASE + 0x44;
/// CPU_CONTROL.RUN, bit 4.
pub const CPU_CONTROL_RUN: u32 = 1 << 4;
/// CPU status (m1n1 layout).
pub const CPU_STATUS: usize = WRAPPER_BASE + 0x48;
/// CPU_STATUS bit 0: running (m1n1; Asahi's docs call bit 0 "idle").
pub const CPU_STATUS_RUNNING: u32 = 1 << 0;
/// CPU_STATUS bit 1: stopped.
pub const CPU_STATUS_STOPPED: u32 = 1 << 1;
/// CPU_STATUS of a fresh, stopped ASC.
pub const CPU_STATUS_FRESH: u32 = 0x2a;
/// CPU_STATUS after release on T6021 (also seen on working macOS, so not a
/// park signature).
pub const CPU_STATUS_RELEASED: u32 = 0x28;

/// The ASC mailbox (0x285408000), ASC v4 layout.
pub const MBOX_BASE: usize = WRAPPER_BASE + 0x8000;
/// Host-to-IOP FIFO control.
pub const A2I_CTRL: usize = MBOX_BASE + 0x110;
/// IOP-to-host FIFO control. Findings §4 sets its ENABLE bit before the
/// release; the shipped boot contract does not.
pub const I2A_CTRL: usize = MBOX_BASE + 0x114;
/// Host-to-IOP message, low 64 bits.
pub const A2I_SEND0: usize = MBOX_BASE + 0x800;
/// Host-to-IOP message, high word.
pub const A2I_SEND1: usize = MBOX_BASE + 0x808;
/// IOP-to-host message, low 64 bits (pop on read).
pub const I2A_RECV0: usize = MBOX_BASE + 0x830;
/// IOP-to-host message, high word.
pub const I2A_RECV1: usize = MBOX_BASE + 0x838;

/// Mailbox CTRL fields.
pub mod mbox_ctrl {
    /// Bit 0: enable.
    pub const ENABLE: u32 = 1 << 0;
    /// Bits 11:8: write pointer.
    pub const WPTR_SHIFT: u32 = 8;
    /// Bits 15:12: read pointer.
    pub const RPTR_SHIFT: u32 = 12;
    /// Bit 16: full.
    pub const FULL: u32 = 1 << 16;
    /// Bit 17: empty.
    pub const EMPTY: u32 = 1 << 17;
    /// Bit 18: overflow latch.
    pub const OVERFLOW: u32 = 1 << 18;
    /// Bit 19: underflow latch.
    pub const UNDERFLOW: u32 = 1 << 19;
    /// Bits 23:20: FIFO count.
    pub const FIFOCNT_SHIFT: u32 = 20;
    /// Mask of a 4-bit pointer or count field after shifting.
    pub const FIELD_MASK: u32 = 0xf;
}

/// Number of scratch registers.
pub const SCRATCH_COUNT: usize = 8;
/// SCRATCH0; SCRATCH`n` is at `SCRATCH0 + 4 * n`.
pub const SCRATCH0: usize = 0x184_0048;

/// The offset of SCRATCH`n`, for `n` below [`SCRATCH_COUNT`].
pub const fn scratch(n: usize) -> usize {
    SCRATCH0 + 4 * (n % SCRATCH_COUNT)
}

/// The doorbell (IPI) block.
pub const IPI_BASE: usize = 0x184_4000;
/// Writing a bit rings the firmware's doorbell for that channel bit.
pub const IPI_SET: usize = IPI_BASE;
/// Doorbells the firmware rang towards the host.
pub const IPI_PENDING: usize = IPI_BASE + 0x8000;
/// Writing the value read from [`IPI_PENDING`] acknowledges it.
pub const IPI_ACK: usize = IPI_BASE + 0xc000;

/// First offset of the fabric-fatal hole.
pub const FABRIC_FATAL_START: usize = 0x185_4000;
/// One past its last offset.
pub const FABRIC_FATAL_END: usize = 0x1c0_4000;

/// Optional pre-CPU table (engine +0xB38/+0xB98/+0xBF8 ← 0x01FF01FF). The
/// shipped default skips it and so does this driver; listed for reference.
pub const PRE_CPU_TABLE: [usize; 3] = [0xb38, 0xb98, 0xbf8];
/// The value of the pre-CPU table.
pub const PRE_CPU_TABLE_VALUE: u32 = 0x01ff_01ff;

/// The "grant" writes the record's release performs before S1, in order:
/// twelve 32-bit `(offset, value)` pairs (joshuaswarren/omarchy-ane
/// `ane/t6021/ane_t6021_boot.h`, step P-1 of `ane_t6021_boot_run`, default
/// path; it ran inference on T6021). The same file's findings say macOS 13.5
/// writes only +0x000 and +0x400 (with other values) and that skipping the
/// other ten changed nothing; the driver keeps all twelve because this exact
/// sequence is the one that booted (`docs/hardware-record.md`, Open).
pub const GRANT_WRITES: [(usize, u32); 12] = [
    (0x000, 0x0000_0010),
    (0x038, 0x0005_0020),
    (0x03c, 0x000a_0030),
    (0x400, 0x4001_0001),
    (0x600, 0x01ff_ffff),
    (0x738, 0x0020_0020),
    (0x798, 0x0010_0030),
    (0x7f8, 0x0100_000a),
    (0x900, 0x0000_0101),
    (0x410, 0x0000_1100),
    (0x420, 0x0000_1100),
    (0x430, 0x0000_1100),
];

/// Whether the driver may access `[off, off + width)` of the engine window:
/// inside the window, outside the fabric-fatal hole and outside CoreSight.
/// A [`super::boot::Regs`] implementation may use it as a last guard.
pub const fn access_allowed(off: usize, width: usize) -> bool {
    let Some(end) = off.checked_add(width) else {
        return false;
    };
    let coresight_end = CORESIGHT_BASE + 0x1000;
    width != 0
        && end <= ENGINE_WINDOW
        && off % width == 0
        && !(off < FABRIC_FATAL_END && end > FABRIC_FATAL_START)
        && !(off < coresight_end && end > CORESIGHT_BASE)
}

/// The value SCRATCH7 carries when the firmware is ready for its init
/// struct (S4) and when it is done with it (S7); also the legacy ack the
/// host writes to SCRATCH3.
pub const MAGIC_READY: u32 = 0x0804_2006;
/// Alias of [`MAGIC_READY`] for the S7 poll.
pub const MAGIC_DONE: u32 = MAGIC_READY;
/// The wake value the host writes to SCRATCH7 after publishing (S6).
pub const MAGIC_WAKE: u32 = 0xf7fb_dff9;

/// Where iBoot latches RVBAR: entry `0x10000000000` with bit 0 (valid) set.
pub const RVBAR_LATCHED: u64 = 0x100_0000_0001;
/// RVBAR bit 0: valid (latched).
pub const RVBAR_VALID: u64 = 1;
/// Bits the fold sets when RVBAR is not latched.
pub const RVBAR_FOLD_SET: u64 = 0x0081_0000_0000_0001;
/// Bits of the entry IOVA the fold keeps.
pub const RVBAR_FOLD_MASK: u64 = 0xff7e_ffff_ffff_f800;

/// The RVBAR value for entry IOVA `iova` (used only when RVBAR is not
/// latched; a latched RVBAR is never rewritten).
pub const fn rvbar_fold(iova: u64) -> u64 {
    RVBAR_FOLD_SET | (iova & RVBAR_FOLD_MASK)
}

/// PMGR power-state (PS) word fields.
pub mod ps {
    /// Bits 3:0: target state.
    pub const TARGET_MASK: u32 = 0xf;
    /// Shift of the actual state.
    pub const ACTUAL_SHIFT: u32 = 4;
    /// Bits 7:4: actual state.
    pub const ACTUAL_MASK: u32 = 0xf << ACTUAL_SHIFT;
    /// Bit 28: auto enable.
    pub const AUTO_ENABLE: u32 = 1 << 28;
    /// The state of a powered island.
    pub const ACTIVE: u32 = 0xf;

    /// The ACTUAL field of a PS word.
    pub const fn actual(word: u32) -> u32 {
        (word & ACTUAL_MASK) >> ACTUAL_SHIFT
    }

    /// The TARGET field of a PS word.
    pub const fn target(word: u32) -> u32 {
        word & TARGET_MASK
    }
}

/// A PMGR power island of the ANE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Island {
    /// The genpd / device-tree name.
    pub name: &'static str,
    /// Offset of its PS word in the `pmgr` window (`0x28e080000`).
    pub offset: usize,
}

/// The eight ANE islands in raise order (`ane_cpu` last); all must read
/// ACTUAL [`ps::ACTIVE`] before any engine access.
pub const ISLANDS: [Island; 8] = [
    Island {
        name: "ane_sys_mpm",
        offset: 0x4000,
    },
    Island {
        name: "ane_td",
        offset: 0x4008,
    },
    Island {
        name: "ane_base",
        offset: 0x4010,
    },
    Island {
        name: "ane_set1",
        offset: 0x4018,
    },
    Island {
        name: "ane_set2",
        offset: 0x4020,
    },
    Island {
        name: "ane_set3",
        offset: 0x4028,
    },
    Island {
        name: "ane_set4",
        offset: 0x4030,
    },
    Island {
        name: "ane_cpu",
        offset: 0x2e0,
    },
];

/// Bytes of the `pmgr` window.
pub const PMGR_WINDOW: usize = 0x4034;

/// The firmware's device-address window: 1 TiB, reserved for 16 MiB by
/// `reserved-memory/ane-alias-iova` so no buffer lands there.
pub const FW_IOVA: u64 = 0x100_0000_0000;
/// Size of the firmware window.
pub const FW_IOVA_SIZE: u64 = 0x100_0000;

/// Whether `[dva, dva + len)` touches the firmware window (every host
/// buffer handed to the firmware must not).
pub const fn in_fw_window(dva: u64, len: u64) -> bool {
    let end = match dva.checked_add(len) {
        Some(e) => e,
        None => return true,
    };
    dva < FW_IOVA + FW_IOVA_SIZE && end > FW_IOVA
}

/// The page the firmware's power service reaches IOVA == PA
/// (`pmu_pa`; without the mapping it halts with `NO PMD FOR IOVA`).
pub const PMU_PA: u64 = 0x2_8e08_4000;

/// One entry of the ADT `segment-ranges` of the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwSegment {
    /// Name (the Mach-O segment it holds).
    pub name: &'static str,
    /// Where iBoot placed it.
    pub phys: u64,
    /// The device address the ASC sees.
    pub iova: u64,
    /// Bytes.
    pub size: u64,
}

/// The firmware memory map: TEXT then DATA, contiguous from [`FW_IOVA`].
pub const FW_SEGMENTS: [FwSegment; 2] = [
    FwSegment {
        name: "TEXT",
        phys: 0x100_0084_8000,
        iova: FW_IOVA,
        size: 0xc_4000,
    },
    FwSegment {
        name: "DATA",
        phys: 0x100_0140_0000,
        iova: FW_IOVA + 0xc_4000,
        size: 0x43_8000,
    },
];

/// Bytes of the firmware's own memory, the staged "FWIM" surface (the init
/// struct's +0x10 field): it covers the pinned image's segments (to
/// 0x4FC000) and is a fixed size, not derived from the file. Source:
/// joshuaswarren/omarchy-ane `ane/t6021/ane_fw_validate.h` at
/// `c2b7408b621c7e5a19ea39efaf513170bfebaaba`; its loader allocates this
/// plus [`FW_EXTRA_RAM`] as one coherent buffer (`ane_t6021_fwload.c`,
/// the own-memory version that ran on T6021 on 2026-09-29).
pub const FW_MEMORY: u64 = 0x50_0000;
/// Default extra RAM after the firmware (`fw_extra_ram`): the only grant
/// that ran on hardware (same sources as [`FW_MEMORY`]; 0x700000 bytes in
/// all, 448 DART pages).
pub const FW_EXTRA_RAM: u64 = 0x20_0000;
/// The most extra RAM the record allows (16 MiB; larger grants never ran).
pub const FW_EXTRA_RAM_MAX: u64 = 0x100_0000;
/// Extra RAM comes in DART pages (16 KiB).
pub const FW_EXTRA_RAM_ALIGN: u64 = 0x4000;

/// Whether `extra` bytes of extra RAM are inside the record's envelope:
/// a multiple of [`FW_EXTRA_RAM_ALIGN`] and at most [`FW_EXTRA_RAM_MAX`].
pub const fn fw_extra_ram_ok(extra: u64) -> bool {
    extra <= FW_EXTRA_RAM_MAX && extra % FW_EXTRA_RAM_ALIGN == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_is_consistent() {
        assert_eq!(scratch(0), 0x184_0048);
        assert_eq!(scratch(7), 0x184_0064);
        assert_eq!(scratch(3), 0x184_0054, "legacy ack register");
        assert_eq!(CPU_CONTROL, 0x140_0044);
        assert_eq!(I2A_CTRL, 0x140_8114);
        assert_eq!(rvbar_fold(FW_IOVA), 0x0081_0100_0000_0001);
        assert_eq!(ps::actual(0xff), 0xf);
        assert_eq!(ps::target(0x1000_00f3), 3);
        let seg_end = FW_SEGMENTS[1].iova + FW_SEGMENTS[1].size;
        assert_eq!(
            FW_SEGMENTS[0].iova + FW_SEGMENTS[0].size,
            FW_SEGMENTS[1].iova
        );
        assert!(seg_end - FW_IOVA <= FW_MEMORY);
        assert!(ISLANDS.iter().all(|i| i.offset + 4 <= PMGR_WINDOW));
        assert!(GRANT_WRITES.iter().all(|(off, _)| access_allowed(*off, 4)));
        assert!(fw_extra_ram_ok(FW_EXTRA_RAM));
        assert!(fw_extra_ram_ok(0));
        assert!(fw_extra_ram_ok(FW_EXTRA_RAM_MAX));
        assert!(!fw_extra_ram_ok(FW_EXTRA_RAM_MAX + FW_EXTRA_RAM_ALIGN));
        assert!(!fw_extra_ram_ok(FW_EXTRA_RAM + 0x1000), "not a DART page");
        assert_eq!((FW_MEMORY + FW_EXTRA_RAM) / FW_EXTRA_RAM_ALIGN, 448);
    }

    #[test]
    fn guards() {
        for off in [
            SCRATCH0,
            scratch(7),
            CPU_CONTROL,
            CPU_STATUS,
            IPI_SET,
            IPI_PENDING,
            IPI_ACK,
        ] {
            assert!(access_allowed(off, 4), "{off:#x}");
        }
        assert!(access_allowed(RVBAR, 8));
        assert!(!access_allowed(FABRIC_FATAL_START, 4));
        assert!(!access_allowed(FABRIC_FATAL_START - 4, 8));
        assert!(!access_allowed(FABRIC_FATAL_END - 4, 4));
        assert!(access_allowed(FABRIC_FATAL_END, 4));
        assert!(!access_allowed(EDPRCR, 4));
        assert!(!access_allowed(ENGINE_WINDOW, 4));
        assert!(!access_allowed(usize::MAX - 1, 4));
        assert!(!access_allowed(SCRATCH0 + 1, 4), "unaligned");
        assert!(!access_allowed(SCRATCH0, 0), "empty");
        assert!(in_fw_window(FW_IOVA, 1));
        assert!(in_fw_window(FW_IOVA - 1, 2));
        assert!(!in_fw_window(FW_IOVA - 0x4000, 0x4000));
        assert!(!in_fw_window(FW_IOVA + FW_IOVA_SIZE, 0x4000));
        assert!(in_fw_window(u64::MAX, 2));
    }
}
