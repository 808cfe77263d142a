// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The release ("boot contract") of the T602x ANE firmware, as a routine
//! over four small traits the kernel implements.
//!
//! The record is joshuaswarren/omarchy-ane's `ane_t6021.ko`, which booted
//! this firmware and ran inference on a T6021 (receipts from 2026-09-29):
//! `ane/t6021/ane_t6021_boot.h` (`ane_t6021_boot_run`, the init-struct
//! helpers) and `ane/t6021/ane_t6021_boot.c` (its kernel backend and static
//! inputs). `docs/hardware-record.md` lists each step with its source.
//!
//! 1. Preflight: every ANE power island's PS word reads ACTUAL 0xf, or
//!    nothing is written (and no engine register is even read: an engine
//!    read with an island off wedges the fabric).
//!    Then CPU_STATUS must not show a running core (the record's start path
//!    is only taken with its RUNNING bit clear).
//! 2. Grant: the twelve writes of [`regs::GRANT_WRITES`], in order (the
//!    record's default path; its optional pre-CPU table stays skipped, as
//!    its default does: hardware hung with it).
//! 3. S1: SCRATCH0–7 ← 0, SCRATCH6 ← 1 (the channel transport, not the
//!    mailbox), SCRATCH7 pulsed 1 → 0.
//! 4. S2: RVBAR: if bit 0 (latched by iBoot) is set, leave it; only an
//!    unlatched RVBAR gets the fold of the staged image's address.
//! 5. S3: CPU_CONTROL ← 0, then ← RUN. From here on the CPU runs: the
//!    driver must keep the module pinned until reboot whatever happens
//!    next ([`BootError::released`]).
//! 6. S4: poll SCRATCH7 for READY (0x08042006), 1000 × 1 ms.
//! 7. S5: SCRATCH0 must be below 0x21; SCRATCH1 + 1 (u32 arithmetic) is
//!    the boot ordinal and sizes 'IPC ' (at least one 16 KiB page, at most
//!    1 MiB); SCRATCH3 asks for a heap (0: none; else at least one page, at
//!    most 32 MiB). Allocate the 0x40000-byte 'DDM ' pool, 'IPC ' and the
//!    heap, and fill the 0x174-byte init struct at offset 0 of the pool:
//!    the pool word at +0x60 is the pool's size, the 256-byte template at
//!    +0x6C carries 4 at template +0xC0 and, with nap prevention (the
//!    record's default), bit 0 of template +0x84.
//! 8. S6: barrier, SCRATCH0/1 ← the pool's device address (low, high),
//!    SCRATCH7 ← wake (0xf7fbdff9).
//! 9. S7: poll SCRATCH7 for DONE (0x08042006); SCRATCH1:0 then hold a
//!    firmware-produced device address, kept raw and never dereferenced.
//! 10. Legacy ack: validate the channel table in 'IPC ', set the owner byte
//!     of every host→target ring slot, barrier, SCRATCH3 ← 0x08042006.
//!
//! The record's backend sleeps 30 ms at every phase marker (before each
//! grant write and each step); [`BootConfig::phase_gap_us`] keeps that
//! pacing, the conservative choice since nothing says the firmware does
//! not depend on it.
//!
//! Choices where the record is silent:
//!
//! - 'IPC ' is allocated with at least [`chman::LAYOUT_SPAN`] bytes (rounded
//!   to 16 KiB) whatever SCRATCH1 says, so the table the firmware writes
//!   always lies inside it (the record's own host-side check refuses a
//!   smaller surface after the release);
//! - a poll that ends with a value that is neither the expected one nor the
//!   one it started from reports [`Reason::BadMagic`]; otherwise
//!   [`Reason::Timeout`];
//! - the findings' "set I2A_CTRL bit 0 before S3" is off by default
//!   ([`BootConfig::enable_i2a`]), as in the record's default path.

use super::chman::{self, Table};
use super::regs::{self, scratch, SCRATCH_COUNT};

/// 32-bit and 64-bit access to the device's `engine` window. Offsets are
/// relative to the window; implementations must use non-posted accesses and
/// may refuse offsets [`regs::access_allowed`] rejects (reading 0).
pub trait Regs {
    /// Reads the 32-bit register at `off`.
    fn read32(&mut self, off: usize) -> u32;
    /// Writes the 32-bit register at `off`.
    fn write32(&mut self, off: usize, val: u32);
    /// Reads the 64-bit register at `off`.
    fn read64(&mut self, off: usize) -> u64;
    /// Writes the 64-bit register at `off` (RVBAR only).
    fn write64(&mut self, off: usize, val: u64);
}

/// Read-only access to the `pmgr` window. There is deliberately no write:
/// raw power-state writes reset the machine.
pub trait Pmgr {
    /// Reads the 32-bit PS word at `off` of the `pmgr` window.
    fn pmgr_read32(&mut self, off: usize) -> u32;
}

/// Waiting. Every wait in this module is a bounded number of these steps.
pub trait Delay {
    /// Sleeps (or spins) about `us` microseconds.
    fn sleep_us(&mut self, us: u32);
}

/// What a firmware buffer is for (the kernel may name or account them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufKind {
    /// The 0x40000-byte 'DDM ' pool, which holds the init struct.
    Ddm,
    /// The 'IPC ' surface (channel table and rings).
    Ipc,
    /// The heap SCRATCH3 asked for.
    Heap,
    /// The host's command buffer.
    Command,
    /// A SHAREDMALLOC buffer (held until reboot).
    Shared,
}

/// A device-visible, zeroed, coherent buffer the firmware may access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwBuf {
    /// The kernel's handle for it.
    pub id: u32,
    /// Its device address: nonzero, 16 KiB aligned, outside the firmware
    /// window.
    pub dva: u64,
    /// Its bytes.
    pub len: usize,
}

/// Why firmware memory could not be allocated or accessed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// No memory (or a limit was reached).
    NoMemory,
    /// An access outside the buffer.
    OutOfRange,
    /// An unknown buffer id.
    BadBuffer,
}

/// Coherent DMA memory for the firmware. Buffers live until reboot (the
/// firmware may keep using them).
pub trait FwMem {
    /// Allocates a zeroed buffer of at least `len` bytes whose device
    /// address is 16 KiB aligned and outside [`regs::FW_IOVA`]'s window.
    fn alloc(&mut self, kind: BufKind, len: usize) -> Result<FwBuf, MemError>;
    /// Writes `src` at byte `off` of `buf` (callers check the range first).
    fn write_bytes(&mut self, buf: &FwBuf, off: usize, src: &[u8]) -> Result<(), MemError>;
    /// Reads `dst.len()` bytes at byte `off` of `buf`.
    fn read_bytes(&mut self, buf: &FwBuf, off: usize, dst: &mut [u8]) -> Result<(), MemError>;
    /// Orders earlier memory accesses before later ones and before the next
    /// register access (`dma_wmb`/`dma_rmb`, or `mb` to be safe).
    fn barrier(&mut self);
}

/// Bytes of the 'DDM ' pool.
pub const POOL_SIZE: usize = 0x4_0000;
/// Largest heap SCRATCH3 may ask for.
pub const MAX_HEAP: u32 = 32 << 20;
/// SCRATCH0 must be below this.
pub const SCRATCH0_LIMIT: u32 = 0x21;
/// Buffer alignment the firmware needs.
pub const ALIGN: u64 = 0x4000;

/// Bytes of the init struct.
pub const INIT_LEN: usize = 0x174;
/// Value of the init struct's +0x10: the firmware's configuration size.
pub const INIT_FW_MEMORY: u64 = regs::FW_MEMORY;
/// Value of +0x18: the rest of a 256 MiB space.
pub const INIT_FW_REST: u64 = 0x1000_0000 - regs::FW_MEMORY;
/// Value of +0x68.
pub const INIT_COUNT: u32 = 64;
/// Offset of the 256-byte template.
pub const INIT_TEMPLATE: usize = 0x6c;
/// Offset (in the struct) of the template's control word, template +0xC0.
pub const INIT_TEMPLATE_KEY: usize = INIT_TEMPLATE + 0xc0;
/// The control word's value (its optional bit 0x10 stays clear).
pub const INIT_TEMPLATE_VALUE: u32 = 4;
/// Offset (in the struct) of the nap-prevention byte, template +0x84; its
/// bit 0 keeps the firmware from napping.
pub const INIT_NAP: usize = INIT_TEMPLATE + 0x84;
/// Smallest heap (one DART page), when the firmware asks for one.
pub const HEAP_FLOOR: u32 = 0x4000;
/// Largest 'IPC ' surface the firmware may ask for.
pub const MAX_IPC: u32 = 0x10_0000;

/// The fields of the init struct.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InitStruct {
    /// +0x00 the staged firmware image's device address.
    pub fwim: u64,
    /// +0x08 the 'IPC ' surface.
    pub ipc: u64,
    /// +0x10 [`INIT_FW_MEMORY`].
    pub fw_memory: u64,
    /// +0x18 [`INIT_FW_REST`].
    pub fw_rest: u64,
    /// +0x20 the heap (0 if none).
    pub heap: u64,
    /// +0x28 its bytes as granted (the request, at least [`HEAP_FLOOR`]).
    pub heap_len: u64,
    /// +0x30 (`u32`) the previous image's length: 0 on the first boot.
    pub prev_fw_len: u32,
    /// +0x50 the boot ordinal (SCRATCH1 + 1).
    pub ordinal: u64,
    /// +0x58 the 'DDM ' pool.
    pub pool: u64,
    /// +0x60 the pool's size ([`POOL_SIZE`]).
    pub pool_word0: u64,
    /// +0x68 [`INIT_COUNT`].
    pub count: u32,
    /// Template +0xC0 [`INIT_TEMPLATE_VALUE`].
    pub template_key: u32,
    /// Template +0x84 bit 0: nap prevention.
    pub prevent_nap: bool,
}

/// Offsets of the `u64` fields.
const INIT_U64: [usize; 9] = [0x00, 0x08, 0x10, 0x18, 0x20, 0x28, 0x50, 0x58, 0x60];

/// Why an init struct is not acceptable (the model's check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitError {
    /// Fewer than [`INIT_LEN`] bytes.
    Short,
    /// A field has a value the contract fixes otherwise.
    Field {
        /// Its offset.
        offset: usize,
    },
    /// A device address that is zero, unaligned or in the firmware window.
    Address {
        /// Its offset.
        offset: usize,
    },
}

impl InitStruct {
    /// The `u64` fields, in [`INIT_U64`] order.
    fn u64_fields(&self) -> [u64; 9] {
        [
            self.fwim,
            self.ipc,
            self.fw_memory,
            self.fw_rest,
            self.heap,
            self.heap_len,
            self.ordinal,
            self.pool,
            self.pool_word0,
        ]
    }

    /// Encodes the struct; every byte not named here is 0.
    pub fn encode(&self) -> [u8; INIT_LEN] {
        let mut b = [0u8; INIT_LEN];
        for (off, v) in INIT_U64.iter().zip(self.u64_fields()) {
            let _ = super::bytes::put_u64(&mut b, *off, v);
        }
        let _ = super::bytes::put_u32(&mut b, 0x30, self.prev_fw_len);
        let _ = super::bytes::put_u32(&mut b, 0x68, self.count);
        let _ = super::bytes::put_u32(&mut b, INIT_TEMPLATE_KEY, self.template_key);
        if let Some(n) = b.get_mut(INIT_NAP) {
            *n |= u8::from(self.prevent_nap);
        }
        b
    }

    /// Decodes a struct.
    pub fn decode(b: &[u8]) -> Result<InitStruct, InitError> {
        if b.len() < INIT_LEN {
            return Err(InitError::Short);
        }
        let q = |off| super::bytes::u64_at(b, off).unwrap_or(0);
        let d = |off| super::bytes::u32_at(b, off).unwrap_or(0);
        Ok(InitStruct {
            fwim: q(0x00),
            ipc: q(0x08),
            fw_memory: q(0x10),
            fw_rest: q(0x18),
            heap: q(0x20),
            heap_len: q(0x28),
            prev_fw_len: d(0x30),
            ordinal: q(0x50),
            pool: q(0x58),
            pool_word0: q(0x60),
            count: d(0x68),
            template_key: d(INIT_TEMPLATE_KEY),
            prevent_nap: b.get(INIT_NAP).is_some_and(|n| n & 1 != 0),
        })
    }

    /// Checks the fixed values and the addresses.
    pub fn check(&self) -> Result<(), InitError> {
        let heap_ok = if self.heap == 0 {
            self.heap_len == 0
        } else {
            (u64::from(HEAP_FLOOR)..=u64::from(MAX_HEAP)).contains(&self.heap_len)
        };
        let fixed = [
            (0x10, self.fw_memory == INIT_FW_MEMORY),
            (0x18, self.fw_rest == INIT_FW_REST),
            (0x28, heap_ok),
            (0x60, self.pool_word0 == POOL_SIZE as u64),
            (0x68, self.count == INIT_COUNT),
            (INIT_TEMPLATE_KEY, self.template_key == INIT_TEMPLATE_VALUE),
        ];
        if let Some((offset, _)) = fixed.iter().find(|(_, ok)| !ok) {
            return Err(InitError::Field { offset: *offset });
        }
        let addrs = [
            (0x08, self.ipc, true),
            (0x58, self.pool, true),
            (0x20, self.heap, self.heap != 0),
        ];
        for (offset, dva, required) in addrs {
            if required && !dva_ok(dva, 1) {
                return Err(InitError::Address { offset });
            }
        }
        Ok(())
    }
}

/// Whether `dva` is usable for a firmware buffer of `len` bytes.
fn dva_ok(dva: u64, len: u64) -> bool {
    dva != 0 && dva % ALIGN == 0 && !regs::in_fw_window(dva, len)
}

/// Parameters of a boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootConfig {
    /// The staged firmware image's device address: init struct +0x00, and
    /// what an unlatched RVBAR gets folded from.
    pub fwim_dva: u64,
    /// Init struct +0x30 (0 on the first boot).
    pub prev_fw_len: u32,
    /// Polls of SCRATCH7 for READY.
    pub ready_polls: u32,
    /// Polls of SCRATCH7 for DONE.
    pub done_polls: u32,
    /// Microseconds between polls.
    pub poll_us: u32,
    /// Microseconds of pause at every phase boundary (the record: 30 ms).
    pub phase_gap_us: u32,
    /// Set the nap-prevention bit (the record's default).
    pub prevent_nap: bool,
    /// Set I2A_CTRL.ENABLE before the release.
    pub enable_i2a: bool,
}

impl BootConfig {
    /// The record's values: 1000 polls of 1 ms each, 30 ms phase gaps, nap
    /// prevention on; the image at [`regs::FW_IOVA`] until the caller
    /// stages it elsewhere.
    pub const DEFAULT: BootConfig = BootConfig {
        fwim_dva: regs::FW_IOVA,
        prev_fw_len: 0,
        ready_polls: 1000,
        done_polls: 1000,
        poll_us: 1000,
        phase_gap_us: 30_000,
        prevent_nap: true,
        enable_i2a: false,
    };
}

impl Default for BootConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The step of the contract a [`BootError`] happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// The island gate (nothing touched).
    Preflight,
    /// The grant writes.
    Grant,
    /// S1.
    ScratchInit,
    /// S2.
    Rvbar,
    /// S3.
    Release,
    /// S4.
    Ready,
    /// S5.
    Prepare,
    /// S6.
    Publish,
    /// S7.
    Done,
    /// Reading and validating the channel table.
    ChannelTable,
    /// The host→target ring-owner init.
    RingInit,
    /// The legacy ack.
    Ack,
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A power island is not up.
    IslandOff {
        /// Index in [`regs::ISLANDS`].
        island: usize,
        /// Its PS word.
        word: u32,
    },
    /// The coprocessor already runs (CPU_STATUS bit 0 before the release):
    /// someone else released it, and the driver must not touch it.
    AlreadyRunning {
        /// CPU_STATUS.
        status: u32,
    },
    /// A register never showed the expected value.
    Timeout {
        /// The register polled.
        register: usize,
        /// The value awaited.
        expected: u32,
        /// Polls made.
        polls: u32,
    },
    /// A register changed, but to a wrong value.
    BadMagic {
        /// The register polled.
        register: usize,
        /// The value it holds.
        found: u32,
        /// The value awaited.
        expected: u32,
    },
    /// A scratch value out of its range.
    ScratchRange {
        /// Scratch register index.
        index: usize,
        /// Its value.
        value: u32,
    },
    /// An allocation failed.
    Alloc {
        /// For what.
        kind: BufKind,
        /// Its error.
        err: MemError,
    },
    /// An allocation returned an unusable buffer.
    BadBuffer {
        /// For what.
        kind: BufKind,
        /// Its device address.
        dva: u64,
    },
    /// A memory access failed.
    Mem(MemError),
    /// The channel table is not acceptable.
    Table(chman::TableError),
}

/// The registers a failed boot leaves behind, for the driver to expose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Captured {
    /// SCRATCH0..7.
    pub scratch: [u32; SCRATCH_COUNT],
    /// CPU_STATUS.
    pub cpu_status: u32,
    /// CPU_CONTROL.
    pub cpu_control: u32,
    /// RVBAR.
    pub rvbar: u64,
    /// IPI pending bits.
    pub ipi_pending: u32,
}

/// A failed boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootError {
    /// Where.
    pub step: Step,
    /// Why.
    pub reason: Reason,
    /// The registers at the failure; `None` when the engine window must not
    /// be read (a preflight failure).
    pub captured: Option<Captured>,
}

impl BootError {
    /// Whether RUN was written: the CPU may be running, so the driver must
    /// pin itself until reboot and refuse a retry in this boot.
    pub fn released(&self) -> bool {
        self.step > Step::Release
    }

    /// Whether any engine register was written.
    pub fn touched(&self) -> bool {
        self.step > Step::Preflight
    }
}

/// What a successful boot leaves for the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Booted {
    /// The 'DDM ' pool (holds the init struct).
    pub pool: FwBuf,
    /// The 'IPC ' surface.
    pub ipc: FwBuf,
    /// The heap, if SCRATCH3 asked for one.
    pub heap: Option<FwBuf>,
    /// The validated channel table.
    pub table: Table,
    /// SCRATCH0 at READY.
    pub scratch0: u32,
    /// The boot ordinal (SCRATCH1 + 1 at READY).
    pub ordinal: u32,
    /// SCRATCH3 at READY (the heap bytes the firmware asked for).
    pub scratch3: u32,
    /// SCRATCH1:0 at DONE (kept raw, never dereferenced).
    pub fw_address: u64,
    /// RVBAR was latched (and left alone).
    pub rvbar_latched: bool,
    /// CPU_STATUS after DONE.
    pub cpu_status: u32,
}

/// Reads the registers a [`BootError`] carries.
pub fn capture<R: Regs + ?Sized>(r: &mut R) -> Captured {
    let mut c = Captured::default();
    for (i, s) in c.scratch.iter_mut().enumerate() {
        *s = r.read32(scratch(i));
    }
    c.cpu_status = r.read32(regs::CPU_STATUS);
    c.cpu_control = r.read32(regs::CPU_CONTROL);
    c.rvbar = r.read64(regs::RVBAR);
    c.ipi_pending = r.read32(regs::IPI_PENDING);
    c
}

/// Builds a [`BootError`] with the captured registers.
fn fail<R: Regs + ?Sized>(r: &mut R, step: Step, reason: Reason) -> BootError {
    BootError {
        step,
        reason,
        captured: Some(capture(r)),
    }
}

/// Checks that every ANE island reads ACTUAL 0xf, reading only `pmgr`.
pub fn preflight<P: Pmgr + ?Sized>(p: &mut P) -> Result<(), BootError> {
    for (island, i) in regs::ISLANDS.iter().enumerate() {
        let word = p.pmgr_read32(i.offset);
        if regs::ps::actual(word) != regs::ps::ACTIVE {
            return Err(BootError {
                step: Step::Preflight,
                reason: Reason::IslandOff { island, word },
                captured: None,
            });
        }
    }
    Ok(())
}

/// Checks, once the islands are up, that the coprocessor is not running
/// already (the record only starts a core whose CPU_STATUS RUNNING bit is
/// clear). Reads one register, writes none.
pub fn not_running<R: Regs + ?Sized>(r: &mut R) -> Result<(), BootError> {
    let status = r.read32(regs::CPU_STATUS);
    if status & regs::CPU_STATUS_RUNNING != 0 {
        return Err(BootError {
            step: Step::Preflight,
            reason: Reason::AlreadyRunning { status },
            captured: None,
        });
    }
    Ok(())
}

/// Runs the whole release contract.
pub fn boot<P: Regs + Pmgr + Delay + FwMem>(
    p: &mut P,
    cfg: &BootConfig,
) -> Result<Booted, BootError> {
    preflight(p)?;
    not_running(p)?;
    grant(p, cfg);
    gap(p, cfg);
    scratch_init(p);
    gap(p, cfg);
    let rvbar_latched = rvbar(p, cfg);
    gap(p, cfg);
    release(p, cfg);
    gap(p, cfg);
    poll(
        p,
        Step::Ready,
        0,
        regs::MAGIC_READY,
        cfg.ready_polls,
        cfg.poll_us,
    )?;
    gap(p, cfg);
    let prep = prepare(p, cfg)?;
    publish(p, &prep, cfg);
    poll(
        p,
        Step::Done,
        regs::MAGIC_WAKE,
        regs::MAGIC_DONE,
        cfg.done_polls,
        cfg.poll_us,
    )?;
    let fw_address = u64::from(p.read32(scratch(1))) << 32 | u64::from(p.read32(scratch(0)));
    let table = read_table(p, &prep.ipc)?;
    chman::init_h2t_owners(p, &prep.ipc, &table)
        .map_err(|e| fail(p, Step::RingInit, Reason::Mem(e)))?;
    p.barrier();
    p.write32(scratch(3), regs::MAGIC_READY);
    Ok(Booted {
        pool: prep.pool,
        ipc: prep.ipc,
        heap: prep.heap,
        table,
        scratch0: prep.scratch0,
        ordinal: prep.ordinal,
        scratch3: prep.scratch3,
        fw_address,
        rvbar_latched,
        cpu_status: p.read32(regs::CPU_STATUS),
    })
}

/// The pause at a phase boundary (none when [`BootConfig::phase_gap_us`]
/// is 0).
fn gap<P: Delay + ?Sized>(p: &mut P, cfg: &BootConfig) {
    if cfg.phase_gap_us != 0 {
        p.sleep_us(cfg.phase_gap_us);
    }
}

/// The grant writes, in the record's order, a phase gap before each.
fn grant<P: Regs + Delay + ?Sized>(p: &mut P, cfg: &BootConfig) {
    for (off, val) in regs::GRANT_WRITES {
        gap(p, cfg);
        p.write32(off, val);
    }
}

/// S1: clear the scratch registers, SCRATCH6 ← 1, pulse SCRATCH7.
fn scratch_init<R: Regs + ?Sized>(r: &mut R) {
    for i in 0..SCRATCH_COUNT {
        r.write32(scratch(i), 0);
    }
    r.write32(scratch(6), 1);
    r.write32(scratch(7), 1);
    r.write32(scratch(7), 0);
}

/// S2: leaves a latched RVBAR alone, folds the entry into an unlatched one.
/// Returns whether it was latched.
fn rvbar<R: Regs + ?Sized>(r: &mut R, cfg: &BootConfig) -> bool {
    let latched = r.read64(regs::RVBAR) & regs::RVBAR_VALID != 0;
    if !latched {
        r.write64(regs::RVBAR, regs::rvbar_fold(cfg.fwim_dva));
    }
    latched
}

/// S3: CPU_CONTROL ← 0, then RUN.
fn release<R: Regs + ?Sized>(r: &mut R, cfg: &BootConfig) {
    if cfg.enable_i2a {
        let v = r.read32(regs::I2A_CTRL);
        r.write32(regs::I2A_CTRL, v | regs::mbox_ctrl::ENABLE);
    }
    r.write32(regs::CPU_CONTROL, 0);
    r.write32(regs::CPU_CONTROL, regs::CPU_CONTROL_RUN);
}

/// Polls SCRATCH7 until it reads `want`, at most `polls` sleeps.
fn poll<P: Regs + Delay + ?Sized>(
    p: &mut P,
    step: Step,
    from: u32,
    want: u32,
    polls: u32,
    step_us: u32,
) -> Result<(), BootError> {
    let reg = scratch(7);
    let mut v = p.read32(reg);
    for _ in 0..polls {
        if v == want {
            return Ok(());
        }
        p.sleep_us(step_us);
        v = p.read32(reg);
    }
    if v == want {
        return Ok(());
    }
    let reason = if v != from {
        Reason::BadMagic {
            register: reg,
            found: v,
            expected: want,
        }
    } else {
        Reason::Timeout {
            register: reg,
            expected: want,
            polls,
        }
    };
    Err(fail(p, step, reason))
}

/// What S5 prepared.
struct Prepared {
    /// The pool.
    pool: FwBuf,
    /// The IPC surface.
    ipc: FwBuf,
    /// The heap.
    heap: Option<FwBuf>,
    /// SCRATCH0.
    scratch0: u32,
    /// The ordinal.
    ordinal: u32,
    /// SCRATCH3.
    scratch3: u32,
}

/// Allocates one buffer and checks it.
fn alloc<P: Regs + FwMem + ?Sized>(
    p: &mut P,
    kind: BufKind,
    len: usize,
) -> Result<FwBuf, BootError> {
    let b = match p.alloc(kind, len) {
        Ok(b) => b,
        Err(err) => return Err(fail(p, Step::Prepare, Reason::Alloc { kind, err })),
    };
    if b.len < len || !dva_ok(b.dva, b.len as u64) {
        return Err(fail(
            p,
            Step::Prepare,
            Reason::BadBuffer { kind, dva: b.dva },
        ));
    }
    Ok(b)
}

/// S5: checks the scratch values, allocates, writes the init struct.
fn prepare<P: Regs + FwMem + ?Sized>(p: &mut P, cfg: &BootConfig) -> Result<Prepared, BootError> {
    let range =
        |p: &mut P, index, value| fail(p, Step::Prepare, Reason::ScratchRange { index, value });
    let s0 = p.read32(scratch(0));
    if s0 >= SCRATCH0_LIMIT {
        return Err(range(p, 0, s0));
    }
    let s1 = p.read32(scratch(1));
    // The record increments in u32 arithmetic (wrapping) and sizes 'IPC '
    // as max(one page, ordinal).
    let ordinal = s1.wrapping_add(1);
    let ipc_request = ordinal.max(ALIGN as u32);
    if ipc_request > MAX_IPC {
        return Err(range(p, 1, s1));
    }
    let s3 = p.read32(scratch(3));
    if s3 > MAX_HEAP {
        return Err(range(p, 3, s3));
    }
    let heap_len = if s3 == 0 { 0 } else { s3.max(HEAP_FLOOR) };
    let pool = alloc(p, BufKind::Ddm, POOL_SIZE)?;
    let ipc_len = (ipc_request as usize)
        .max(chman::LAYOUT_SPAN as usize)
        .next_multiple_of(ALIGN as usize);
    let ipc = alloc(p, BufKind::Ipc, ipc_len)?;
    let heap = if heap_len == 0 {
        None
    } else {
        let len = (heap_len as usize).next_multiple_of(ALIGN as usize);
        Some(alloc(p, BufKind::Heap, len)?)
    };
    let init = InitStruct {
        fwim: cfg.fwim_dva,
        ipc: ipc.dva,
        fw_memory: INIT_FW_MEMORY,
        fw_rest: INIT_FW_REST,
        heap: heap.map_or(0, |h| h.dva),
        heap_len: u64::from(heap_len),
        prev_fw_len: cfg.prev_fw_len,
        ordinal: u64::from(ordinal),
        pool: pool.dva,
        pool_word0: POOL_SIZE as u64,
        count: INIT_COUNT,
        template_key: INIT_TEMPLATE_VALUE,
        prevent_nap: cfg.prevent_nap,
    };
    chman::write(p, &pool, 0, &init.encode())
        .map_err(|e| fail(p, Step::Prepare, Reason::Mem(e)))?;
    Ok(Prepared {
        pool,
        ipc,
        heap,
        scratch0: s0,
        ordinal,
        scratch3: s3,
    })
}

/// S6: publishes the pool and wakes the firmware.
fn publish<P: Regs + FwMem + Delay + ?Sized>(p: &mut P, prep: &Prepared, cfg: &BootConfig) {
    p.barrier();
    p.write32(scratch(0), prep.pool.dva as u32);
    p.write32(scratch(1), (prep.pool.dva >> 32) as u32);
    gap(p, cfg);
    p.write32(scratch(7), regs::MAGIC_WAKE);
    gap(p, cfg);
}

/// Reads and validates the channel table, entry by entry.
fn read_table<P: Regs + FwMem + ?Sized>(p: &mut P, ipc: &FwBuf) -> Result<Table, BootError> {
    let mut t = Table::default();
    let mut entry = [0u8; chman::ENTRY_LEN];
    for (index, ch) in t.channels.iter_mut().enumerate() {
        let off = index * chman::ENTRY_LEN;
        chman::read(p, ipc, off, &mut entry)
            .map_err(|e| fail(p, Step::ChannelTable, Reason::Mem(e)))?;
        *ch = chman::parse_entry(index, &entry)
            .map_err(|e| fail(p, Step::ChannelTable, Reason::Table(e)))?;
    }
    t.check_geometry(ipc.dva, ipc.len as u64)
        .map_err(|e| fail(p, Step::ChannelTable, Reason::Table(e)))?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The init struct byte for byte, as the record fills it
    /// (omarchy-ane `ane_t6021_boot.h` `ane_t6021_init_struct_fill` and the
    /// nap bit of `ane_t6021_boot.c`).
    #[test]
    fn init_struct_layout() {
        let s = InitStruct {
            fwim: 0x8_0000,
            ipc: 0x8000,
            fw_memory: INIT_FW_MEMORY,
            fw_rest: INIT_FW_REST,
            heap: 0x10_0000,
            heap_len: 0x4000,
            prev_fw_len: 0,
            ordinal: 0x1_0440,
            pool: 0x4_0000,
            pool_word0: 0x4_0000,
            count: INIT_COUNT,
            template_key: INIT_TEMPLATE_VALUE,
            prevent_nap: true,
        };
        let b = s.encode();
        let mut want = [0u8; 0x174];
        let put =
            |w: &mut [u8; 0x174], off: usize, v: &[u8]| w[off..off + v.len()].copy_from_slice(v);
        put(&mut want, 0x00, &0x8_0000u64.to_le_bytes());
        put(&mut want, 0x08, &0x8000u64.to_le_bytes());
        put(&mut want, 0x10, &0x50_0000u64.to_le_bytes());
        put(&mut want, 0x18, &0xfb0_0000u64.to_le_bytes());
        put(&mut want, 0x20, &0x10_0000u64.to_le_bytes());
        put(&mut want, 0x28, &0x4000u64.to_le_bytes());
        put(&mut want, 0x50, &0x1_0440u64.to_le_bytes());
        put(&mut want, 0x58, &0x4_0000u64.to_le_bytes());
        put(&mut want, 0x60, &0x4_0000u64.to_le_bytes());
        put(&mut want, 0x68, &64u32.to_le_bytes());
        put(&mut want, 0x6c + 0xc0, &4u32.to_le_bytes());
        want[0x6c + 0x84] = 1;
        assert_eq!(b, want);
        assert_eq!(INIT_TEMPLATE_KEY, 0x12c);
        assert_eq!(INIT_NAP, 0xf0);
        assert_eq!(InitStruct::decode(&b), Ok(s));
        assert_eq!(s.check(), Ok(()));
        assert_eq!(InitStruct::decode(&b[..0x173]), Err(InitError::Short));
        let no_nap = InitStruct {
            prevent_nap: false,
            ..s
        };
        assert_eq!(no_nap.encode()[0xf0], 0);
        let bad = InitStruct { count: 63, ..s };
        assert_eq!(bad.check(), Err(InitError::Field { offset: 0x68 }));
        let bad = InitStruct { pool_word0: 0, ..s };
        assert_eq!(bad.check(), Err(InitError::Field { offset: 0x60 }));
        let bad = InitStruct {
            template_key: 0,
            ..s
        };
        assert_eq!(bad.check(), Err(InitError::Field { offset: 0x12c }));
        let bad = InitStruct { ipc: 0x8001, ..s };
        assert_eq!(bad.check(), Err(InitError::Address { offset: 0x08 }));
        let bad = InitStruct {
            pool: regs::FW_IOVA,
            ..s
        };
        assert_eq!(bad.check(), Err(InitError::Address { offset: 0x58 }));
        let bad = InitStruct {
            heap: 0,
            heap_len: 0x4000,
            ..s
        };
        assert_eq!(bad.check(), Err(InitError::Field { offset: 0x28 }));
        let bad = InitStruct {
            heap_len: 0x100,
            ..s
        };
        assert_eq!(bad.check(), Err(InitError::Field { offset: 0x28 }));
    }

    /// The debugfs `fail_step` is `Step as u64 + 1`; `h14::FwReport` and
    /// the library's step names list the numbers.
    #[test]
    fn step_numbers_match_the_uapi() {
        let steps = [
            Step::Preflight,
            Step::Grant,
            Step::ScratchInit,
            Step::Rvbar,
            Step::Release,
            Step::Ready,
            Step::Prepare,
            Step::Publish,
            Step::Done,
            Step::ChannelTable,
            Step::RingInit,
            Step::Ack,
        ];
        for (i, s) in steps.iter().enumerate() {
            assert_eq!(*s as usize + 1, i + 1);
        }
    }

    #[test]
    fn released_and_touched() {
        let e = |step| BootError {
            step,
            reason: Reason::Mem(MemError::NoMemory),
            captured: None,
        };
        assert!(!e(Step::Preflight).touched());
        assert!(e(Step::Grant).touched());
        assert!(e(Step::ScratchInit).touched());
        assert!(
            !e(Step::Release).released(),
            "a failure inside S3 cannot happen after RUN"
        );
        assert!(e(Step::Ready).released());
        assert!(e(Step::Ack).released());
    }
}
