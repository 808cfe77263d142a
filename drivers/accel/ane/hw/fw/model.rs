// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A functional model of the T602x ANE firmware, for the simulator and the
//! host tests.
//!
//! [`FwModel`] owns the registers the firmware shares with the host (the
//! scratch registers, CPU_CONTROL/CPU_STATUS, RVBAR, the IPI doorbell block)
//! and reacts the way the release contract and the ChMan transport describe
//! (`seed-repos.md` §3.3–§3.6, and the choices documented in
//! [`super::boot`] and [`super::chman`]):
//!
//! - after CPU_CONTROL.RUN it posts READY (SCRATCH0, SCRATCH1 and the heap
//!   request in SCRATCH3 set from [`ModelConfig`]);
//! - after the wake value it reads the init struct from the address in
//!   SCRATCH1:0 through [`Mem`], checks it, writes the channel table into
//!   the 'IPC ' surface, frees every target→host slot, and posts DONE;
//! - after the legacy ack it checks that no host→target slot is still
//!   zeroed (the real firmware's DebugTask consumed zeroed slots as commands
//!   and faulted; the model crashes instead) and asks for one SHAREDMALLOC buffer, in which it
//!   keeps its program table, so the host's service path always runs;
//! - then it serves the IO channel whenever its doorbell rings: CONFIG_GET,
//!   PROGRAM_LOAD (256 programs; the 257th is refused with
//!   [`status::TABLE_FULL`]), PROC_CREATE, PROCEDURE_CALL and
//!   CH_PROPERTY_WRITE. A call is executed by the caller's [`Executor`]
//!   before the reply; the model then posts a dispatch event and, after
//!   [`ModelConfig::finish_delay`] ticks, a finish event with the call's
//!   cookie on IO_T2H.
//!
//! The H14 task-descriptor format is not documented, so the model does not
//! interpret program sections: it hands the call's sections and buffers to
//! the [`Executor`], and the kernel's simulator plugs the H13 engine model
//! there (an assumption that H13-style programs stand in for H14 ones).
//!
//! The status codes of refused commands are the model's own (the real
//! firmware's are not known); the host only relies on "nonzero".
//!
//! It is a step function: register writes latch state, [`FwModel::tick`]
//! does the work (the simulator ticks it from its delay hook), and nothing
//! needs a thread, an allocation or floating point. [`Faults`] injects the
//! failures the driver must survive.

use super::boot::{InitError, InitStruct, ALIGN, INIT_LEN};
use super::bytes::{put_u16, put_u32, u32_at, u64_at};
use super::chman::{self, ChannelSpec, Event, EventState, SmRequest, LAYOUT, SLOT_LEN};
use super::msg::{self, IoRef, SectionRef, MAX_IO, MAX_SECTIONS};
use super::regs::{self, SCRATCH_COUNT};

pub use super::super::engine::{Dma as Mem, Fault as MemFault};

/// A set of injected failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults(u32);

impl Faults {
    /// No fault.
    pub const NONE: Faults = Faults(0);
    /// Never post READY after the release.
    pub const NO_READY: Faults = Faults(1 << 0);
    /// Post [`BAD_DONE_VALUE`] instead of DONE.
    pub const BAD_DONE: Faults = Faults(1 << 1);
    /// Never answer the IO ring.
    pub const STALLED_RING: Faults = Faults(1 << 2);
    /// Answer every command with [`ModelConfig::injected_status`].
    pub const ERROR_STATUS: Faults = Faults(1 << 3);
    /// Post dispatch events but no finish events.
    pub const MISSING_FINISH: Faults = Faults(1 << 4);
    /// Write a channel table whose IO entry has doorbell bit 9.
    pub const BAD_CHANNEL_TABLE: Faults = Faults(1 << 5);
    /// Report `ane_cpu` as powered off in PMGR (any engine access is then a
    /// violation).
    pub const ISLAND_OFF: Faults = Faults(1 << 6);
    /// Every fault.
    pub const ALL: Faults = Faults(0x7f);

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The set of `bits`, ignoring unknown ones.
    pub const fn from_bits(bits: u32) -> Faults {
        Faults(bits & Self::ALL.0)
    }

    /// The union with `other`.
    pub const fn with(self, other: Faults) -> Faults {
        Faults(self.0 | other.0)
    }

    /// Whether every fault of `other` is in the set.
    pub const fn contains(self, other: Faults) -> bool {
        self.0 & other.0 == other.0
    }
}

/// The model's reply status codes.
pub mod status {
    /// A malformed command.
    pub const BAD_MESSAGE: u16 = 0x1;
    /// An opcode the model does not serve.
    pub const UNKNOWN_OPCODE: u16 = 0x2;
    /// No such program.
    pub const NO_PROGRAM: u16 = 0x3;
    /// The program table is full.
    pub const TABLE_FULL: u16 = 0x4;
    /// No SHAREDMALLOC buffer for the program table.
    pub const NO_MEMORY: u16 = 0x5;
    /// The executor failed.
    pub const EXEC_FAILED: u16 = 0x6;
    /// The process does not belong to the program.
    pub const BAD_PROCESS: u16 = 0x7;
    /// Too many calls in flight.
    pub const BUSY: u16 = 0x8;
}

/// SCRATCH7 under [`Faults::BAD_DONE`].
pub const BAD_DONE_VALUE: u32 = 0x0804_2007;
/// SCRATCH7 after the model crashed.
pub const CRASH_VALUE: u32 = 0xdead_0001;
/// SCRATCH1:0 after DONE: a firmware-side address.
pub const FW_ADDRESS: u64 = regs::FW_IOVA + 0x40_0000;
/// Programs the firmware table holds.
pub const PROGRAM_SLOTS: u32 = 256;
/// Bytes of one program entry in the SHAREDMALLOC buffer: `u32` section
/// mask, `u32` process id, then `{u64 iova, u64 size}` per section id.
const ENTRY_LEN: u64 = 0xa0;
/// Bytes of the program table.
const PROGRAM_TABLE_LEN: u64 = PROGRAM_SLOTS as u64 * ENTRY_LEN;
/// The SHAREDMALLOC request the model makes.
pub const SM_REQUEST: SmRequest = SmRequest {
    tag: u32::from_le_bytes(*b"PTBL"),
    size: 0x1_0000,
};
/// Calls in flight (awaiting their finish event).
const IN_FLIGHT: usize = 8;
/// Events waiting for a free IO_T2H slot.
const EVENT_QUEUE: usize = 8;

/// Knobs of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    /// Injected failures.
    pub faults: Faults,
    /// Ticks from RUN to READY.
    pub ready_delay: u32,
    /// Ticks from the wake value to DONE.
    pub done_delay: u32,
    /// Ticks from a call's dispatch event to its finish event.
    pub finish_delay: u32,
    /// SCRATCH0 at READY (must be below 0x21).
    pub scratch0: u32,
    /// SCRATCH1 at READY (the ordinal is this + 1).
    pub scratch1: u32,
    /// SCRATCH3 at READY: heap bytes asked for (0 for none).
    pub heap_request: u32,
    /// The CONFIG_GET reply word.
    pub config_word: u32,
    /// RVBAR at power-up ([`regs::RVBAR_LATCHED`]: latched by iBoot).
    pub rvbar: u64,
    /// Status of every reply under [`Faults::ERROR_STATUS`].
    pub injected_status: u16,
}

impl ModelConfig {
    /// A healthy firmware with a latched RVBAR and a 64 KiB heap request.
    pub const DEFAULT: ModelConfig = ModelConfig {
        faults: Faults::NONE,
        ready_delay: 3,
        done_delay: 3,
        finish_delay: 2,
        scratch0: 4,
        scratch1: 0,
        heap_request: 0x1_0000,
        config_word: 0x14,
        rvbar: regs::RVBAR_LATCHED,
        injected_status: 0xe0,
    };
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Where the firmware is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not released.
    Stopped,
    /// Released; READY after this many more ticks.
    Starting(u32),
    /// Released, but parked ([`Faults::NO_READY`]).
    Parked,
    /// READY posted; waiting for the wake value.
    Ready,
    /// Woken; DONE after this many more ticks.
    Initialising(u32),
    /// DONE posted; waiting for the legacy ack.
    AwaitAck,
    /// Serving the rings.
    Running,
    /// Crashed (see [`FwModel::crash`]).
    Crashed,
}

/// Why the model crashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// The init struct could not be read.
    InitRead(MemFault),
    /// The init struct is wrong.
    Init(InitError),
    /// The init struct's ordinal, pool or heap disagree with SCRATCH.
    InitMismatch {
        /// The field's offset.
        offset: usize,
    },
    /// The 'IPC ' surface could not be written or read.
    Ipc(MemFault),
    /// A host→target slot was still zeroed at the ack.
    Owner {
        /// Channel index.
        channel: usize,
        /// Slot index.
        slot: u64,
    },
}

/// Host behaviour the real hardware would punish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Violations {
    /// Writes to a latched RVBAR.
    pub rvbar_rewrites: u32,
    /// Accesses `regs::access_allowed` rejects.
    pub forbidden: u32,
    /// Engine accesses while an island is off.
    pub while_off: u32,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Ticks.
    pub ticks: u64,
    /// Commands answered.
    pub commands: u64,
    /// Calls executed.
    pub calls: u64,
    /// Executor failures.
    pub exec_failures: u64,
    /// Events posted to IO_T2H.
    pub events: u64,
    /// CONFIG_GETs answered.
    pub config_gets: u64,
}

/// One PROCEDURE_CALL, as the [`Executor`] sees it.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// ProgramId.
    pub program: u32,
    /// Process id.
    pub process: u32,
    /// The cookie.
    pub cookie: u64,
    /// Priority (2..=7).
    pub priority: u32,
    /// The program's sections, in id order.
    pub sections: &'a [SectionRef],
    /// The call's buffers, in record order.
    pub io: &'a [IoRef],
}

/// An executor's failure; the call is answered with
/// [`status::EXEC_FAILED`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecFailed {
    /// The executor's own code, for logs.
    pub code: u32,
}

/// Runs calls: the hook where the simulator plugs an engine model.
pub trait Executor {
    /// Executes `call`: reads its inputs and sections from `mem` and writes
    /// its outputs there.
    fn execute<M: Mem + ?Sized>(&mut self, mem: &mut M, call: &Call<'_>) -> Result<(), ExecFailed>;
}

/// An executor that accepts every call and computes nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullExecutor;

impl Executor for NullExecutor {
    fn execute<M: Mem + ?Sized>(
        &mut self,
        _mem: &mut M,
        _call: &Call<'_>,
    ) -> Result<(), ExecFailed> {
        Ok(())
    }
}

/// A call awaiting its finish event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Finish {
    /// The event to post.
    event: Event,
    /// Ticks left.
    ticks: u32,
}

/// The SHAREDMALLOC state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sm {
    /// Not asked yet.
    None,
    /// Asked, not answered.
    Requested,
    /// Answered with this buffer.
    Granted(u64),
    /// Answered with no buffer.
    Refused,
}

/// The firmware model.
#[derive(Clone, Debug)]
pub struct FwModel {
    /// Knobs.
    cfg: ModelConfig,
    /// Where it is.
    phase: Phase,
    /// Why it crashed.
    crash: Option<Crash>,
    /// SCRATCH0..7.
    scratch: [u32; SCRATCH_COUNT],
    /// CPU_CONTROL.
    cpu_control: u32,
    /// CPU_STATUS.
    cpu_status: u32,
    /// RVBAR.
    rvbar: u64,
    /// I2A_CTRL.
    i2a_ctrl: u32,
    /// Doorbells the host rang, not yet seen.
    doorbell: u32,
    /// Doorbells towards the host, not yet acknowledged.
    ipi: u32,
    /// The legacy ack was written.
    acked: bool,
    /// The IO doorbell rang and the ring may hold commands.
    io_kick: bool,
    /// The 'IPC ' surface.
    ipc: u64,
    /// Next IO slot.
    io_cursor: u64,
    /// Next slot per target→host channel.
    t2h_cursor: [u64; chman::CHANNEL_COUNT],
    /// SHAREDMALLOC.
    sm: Sm,
    /// Programs loaded.
    programs: u32,
    /// Next process id.
    next_process: u32,
    /// Next event sequence number.
    seq: u32,
    /// Events waiting for a slot.
    events: [Option<Event>; EVENT_QUEUE],
    /// Calls awaiting their finish.
    finishes: [Option<Finish>; IN_FLIGHT],
    /// The last property write.
    property: Option<(u32, u32, u64)>,
    /// Counters.
    stats: ModelStats,
    /// Host misbehaviour.
    violations: Violations,
}

/// `base + off`, or a fault at `base`.
fn at(base: u64, off: u64) -> Result<u64, MemFault> {
    base.checked_add(off).ok_or(MemFault { iova: base })
}

impl FwModel {
    /// A stopped, fresh ASC.
    pub const fn new(cfg: ModelConfig) -> FwModel {
        FwModel {
            cfg,
            phase: Phase::Stopped,
            crash: None,
            scratch: [0; SCRATCH_COUNT],
            cpu_control: 0,
            cpu_status: regs::CPU_STATUS_FRESH,
            rvbar: cfg.rvbar,
            i2a_ctrl: regs::mbox_ctrl::EMPTY,
            doorbell: 0,
            ipi: 0,
            acked: false,
            io_kick: false,
            ipc: 0,
            io_cursor: 0,
            t2h_cursor: [0; chman::CHANNEL_COUNT],
            sm: Sm::None,
            programs: 0,
            next_process: 1,
            seq: 0,
            events: [None; EVENT_QUEUE],
            finishes: [None; IN_FLIGHT],
            property: None,
            stats: ModelStats {
                ticks: 0,
                commands: 0,
                calls: 0,
                exec_failures: 0,
                events: 0,
                config_gets: 0,
            },
            violations: Violations {
                rvbar_rewrites: 0,
                forbidden: 0,
                while_off: 0,
            },
        }
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Why it crashed, if it did.
    pub fn crash(&self) -> Option<Crash> {
        self.crash
    }

    /// Host misbehaviour seen so far.
    pub fn violations(&self) -> Violations {
        self.violations
    }

    /// The counters.
    pub fn stats(&self) -> ModelStats {
        self.stats
    }

    /// Programs loaded.
    pub fn programs(&self) -> u32 {
        self.programs
    }

    /// The last CH_PROPERTY_WRITE (channel, property, value).
    pub fn last_property(&self) -> Option<(u32, u32, u64)> {
        self.property
    }

    /// The SHAREDMALLOC buffer the host granted, if any.
    pub fn shared_buffer(&self) -> Option<u64> {
        match self.sm {
            Sm::Granted(dva) => Some(dva),
            _ => None,
        }
    }

    /// The injected faults.
    pub fn faults(&self) -> Faults {
        self.cfg.faults
    }

    /// Changes the injected faults (effective from the next event).
    pub fn set_faults(&mut self, faults: Faults) {
        self.cfg.faults = faults;
    }

    /// Whether fault `f` is injected.
    fn fault(&self, f: Faults) -> bool {
        self.cfg.faults.contains(f)
    }

    /// Records an access's violations.
    fn access(&mut self, off: usize, width: usize) {
        if !regs::access_allowed(off, width) {
            self.violations.forbidden = self.violations.forbidden.wrapping_add(1);
        }
        if self.fault(Faults::ISLAND_OFF) {
            self.violations.while_off = self.violations.while_off.wrapping_add(1);
        }
    }

    /// The scratch index of `off`.
    fn scratch_index(off: usize) -> Option<usize> {
        let rel = off.checked_sub(regs::SCRATCH0)?;
        (rel % 4 == 0 && rel / 4 < SCRATCH_COUNT).then_some(rel / 4)
    }

    /// Reads a 32-bit register of the engine window.
    pub fn read32(&mut self, off: usize) -> u32 {
        self.access(off, 4);
        if let Some(i) = Self::scratch_index(off) {
            return self.scratch.get(i).copied().unwrap_or(0);
        }
        match off {
            regs::CPU_CONTROL => self.cpu_control,
            regs::CPU_STATUS => self.cpu_status,
            regs::I2A_CTRL => self.i2a_ctrl,
            regs::IPI_PENDING => self.ipi,
            _ => 0,
        }
    }

    /// Writes a 32-bit register of the engine window.
    pub fn write32(&mut self, off: usize, val: u32) {
        self.access(off, 4);
        if let Some(i) = Self::scratch_index(off) {
            self.write_scratch(i, val);
            return;
        }
        match off {
            regs::CPU_CONTROL => {
                self.cpu_control = val;
                if val & regs::CPU_CONTROL_RUN != 0 && self.phase == Phase::Stopped {
                    self.cpu_status = regs::CPU_STATUS_RELEASED;
                    self.phase = Phase::Starting(self.cfg.ready_delay);
                }
            }
            regs::I2A_CTRL => self.i2a_ctrl = val,
            regs::IPI_SET => self.doorbell |= val,
            regs::IPI_ACK => self.ipi &= !val,
            _ => {}
        }
    }

    /// A scratch write, with the wake value and the legacy ack.
    fn write_scratch(&mut self, i: usize, val: u32) {
        if let Some(s) = self.scratch.get_mut(i) {
            *s = val;
        }
        if i == 7 && val == regs::MAGIC_WAKE && self.phase == Phase::Ready {
            self.phase = Phase::Initialising(self.cfg.done_delay);
        }
        if i == 3 && val == regs::MAGIC_READY && self.phase == Phase::AwaitAck {
            self.acked = true;
        }
    }

    /// Reads a 64-bit register (RVBAR).
    pub fn read64(&mut self, off: usize) -> u64 {
        self.access(off, 8);
        if off == regs::RVBAR {
            self.rvbar
        } else {
            0
        }
    }

    /// Writes a 64-bit register (RVBAR; a latched one must not be written).
    pub fn write64(&mut self, off: usize, val: u64) {
        self.access(off, 8);
        if off == regs::RVBAR {
            if self.rvbar & regs::RVBAR_VALID != 0 {
                self.violations.rvbar_rewrites = self.violations.rvbar_rewrites.wrapping_add(1);
            }
            self.rvbar = val;
        }
    }

    /// Reads a PS word of the `pmgr` window: every island up, unless
    /// [`Faults::ISLAND_OFF`] turns `ane_cpu` off.
    pub fn pmgr_read32(&mut self, off: usize) -> u32 {
        let cpu = regs::ISLANDS.iter().last().map_or(0, |i| i.offset);
        if self.fault(Faults::ISLAND_OFF) && off == cpu {
            regs::ps::ACTIVE
        } else {
            regs::ps::ACTIVE << regs::ps::ACTUAL_SHIFT | regs::ps::ACTIVE
        }
    }

    /// One step of the firmware.
    pub fn tick<M: Mem + ?Sized, E: Executor>(&mut self, mem: &mut M, exec: &mut E) {
        self.stats.ticks = self.stats.ticks.wrapping_add(1);
        match self.phase {
            Phase::Starting(0) => self.post_ready(),
            Phase::Starting(n) => self.phase = Phase::Starting(n - 1),
            Phase::Initialising(0) => {
                if let Err(c) = self.initialise(mem) {
                    self.crash_with(c);
                }
            }
            Phase::Initialising(n) => self.phase = Phase::Initialising(n - 1),
            Phase::AwaitAck if self.acked => {
                if let Err(c) = self.accept_ack(mem) {
                    self.crash_with(c);
                }
            }
            Phase::Running => {
                if let Err(f) = self.serve(mem, exec) {
                    self.crash_with(Crash::Ipc(f));
                }
            }
            _ => {}
        }
    }

    /// Crashes.
    fn crash_with(&mut self, c: Crash) {
        self.crash = Some(c);
        self.phase = Phase::Crashed;
        if let Some(s) = self.scratch.get_mut(7) {
            *s = CRASH_VALUE;
        }
    }

    /// Sets a scratch register.
    fn set_scratch(&mut self, i: usize, v: u32) {
        if let Some(s) = self.scratch.get_mut(i) {
            *s = v;
        }
    }

    /// S4 from the firmware's side.
    fn post_ready(&mut self) {
        if self.fault(Faults::NO_READY) {
            self.phase = Phase::Parked;
            return;
        }
        self.set_scratch(0, self.cfg.scratch0);
        self.set_scratch(1, self.cfg.scratch1);
        self.set_scratch(3, self.cfg.heap_request);
        self.set_scratch(7, regs::MAGIC_READY);
        self.phase = Phase::Ready;
    }

    /// S5–S7 from the firmware's side.
    fn initialise<M: Mem + ?Sized>(&mut self, mem: &mut M) -> Result<(), Crash> {
        let s = |i: usize| u64::from(self.scratch.get(i).copied().unwrap_or(0));
        let dva = s(1) << 32 | s(0);
        let mut b = [0u8; INIT_LEN];
        mem.read(dva, &mut b).map_err(Crash::InitRead)?;
        let init = InitStruct::decode(&b).map_err(Crash::Init)?;
        init.check().map_err(Crash::Init)?;
        let heap = u64::from(self.cfg.heap_request).next_multiple_of(ALIGN);
        if init.ordinal != u64::from(self.cfg.scratch1) + 1 {
            return Err(Crash::InitMismatch { offset: 0x50 });
        }
        if init.pool != dva {
            return Err(Crash::InitMismatch { offset: 0x58 });
        }
        if init.heap_len != heap {
            return Err(Crash::InitMismatch { offset: 0x28 });
        }
        self.ipc = init.ipc;
        self.write_table(mem).map_err(Crash::Ipc)?;
        self.set_scratch(0, FW_ADDRESS as u32);
        self.set_scratch(1, (FW_ADDRESS >> 32) as u32);
        let done = if self.fault(Faults::BAD_DONE) {
            BAD_DONE_VALUE
        } else {
            regs::MAGIC_DONE
        };
        self.set_scratch(7, done);
        self.phase = Phase::AwaitAck;
        Ok(())
    }

    /// Writes the channel table and frees every target→host slot.
    fn write_table<M: Mem + ?Sized>(&mut self, mem: &mut M) -> Result<(), MemFault> {
        let mut entry = [0u8; chman::ENTRY_LEN];
        for (i, spec) in LAYOUT.iter().enumerate() {
            let spec = if i == chman::IO && self.fault(Faults::BAD_CHANNEL_TABLE) {
                ChannelSpec { bit: 9, ..*spec }
            } else {
                *spec
            };
            let _ = chman::encode_entry(&spec, &mut entry);
            mem.write(at(self.ipc, (i * chman::ENTRY_LEN) as u64)?, &entry)?;
            if spec.kind == chman::KIND_T2H {
                for slot in 0..spec.slots {
                    mem.write(self.slot_addr(i, slot)?, &chman::OWNER.to_le_bytes())?;
                }
            }
        }
        Ok(())
    }

    /// Device address of slot `slot` of channel `index`.
    fn slot_addr(&self, index: usize, slot: u64) -> Result<u64, MemFault> {
        let ch = LAYOUT.get(index).map(|s| chman::Channel {
            kind: s.kind,
            bit: s.bit,
            slots: s.slots,
            ring: s.ring,
        });
        let off = ch
            .and_then(|c| c.slot(slot))
            .ok_or(MemFault { iova: self.ipc })?;
        at(self.ipc, off as u64)
    }

    /// The legacy ack: checks the ring-owner init, asks for SHAREDMALLOC.
    fn accept_ack<M: Mem + ?Sized>(&mut self, mem: &mut M) -> Result<(), Crash> {
        for (channel, spec) in LAYOUT.iter().enumerate() {
            if spec.kind != chman::KIND_H2T {
                continue;
            }
            for slot in 0..spec.slots {
                // A zeroed slot reads as a command at address 0 (a
                // published command has a nonzero address in word 0).
                let mut word0 = [0u8; 8];
                mem.read(
                    self.slot_addr(channel, slot).map_err(Crash::Ipc)?,
                    &mut word0,
                )
                .map_err(Crash::Ipc)?;
                if u64::from_le_bytes(word0) == 0 {
                    return Err(Crash::Owner { channel, slot });
                }
            }
        }
        self.phase = Phase::Running;
        let mut slot = [0u8; SLOT_LEN];
        let _ = chman::encode_sm_request(&SM_REQUEST, &mut slot);
        let addr = self.slot_addr(chman::SHAREDMALLOC, 0).map_err(Crash::Ipc)?;
        mem.write(
            at(addr, 8).map_err(Crash::Ipc)?,
            slot.get(8..).unwrap_or(&[]),
        )
        .map_err(Crash::Ipc)?;
        mem.write(addr, &0u64.to_le_bytes()).map_err(Crash::Ipc)?;
        self.sm = Sm::Requested;
        self.ring_host(chman::SHAREDMALLOC);
        Ok(())
    }

    /// Rings the host's doorbell for channel `index`.
    fn ring_host(&mut self, index: usize) {
        let bit = LAYOUT.get(index).map_or(0, |s| s.bit);
        self.ipi |= 1u32.checked_shl(bit).unwrap_or(0);
    }

    /// Reads words 0..2 of a slot.
    fn slot_words<M: Mem + ?Sized>(mem: &mut M, addr: u64) -> Result<[u64; 3], MemFault> {
        let mut b = [0u8; 24];
        mem.read(addr, &mut b)?;
        Ok([
            u64_at(&b, 0).unwrap_or(0),
            u64_at(&b, 8).unwrap_or(0),
            u64_at(&b, 16).unwrap_or(0),
        ])
    }

    /// Serves the rings once.
    fn serve<M: Mem + ?Sized, E: Executor>(
        &mut self,
        mem: &mut M,
        exec: &mut E,
    ) -> Result<(), MemFault> {
        if self.sm == Sm::Requested {
            self.check_sm_answer(mem)?;
        }
        let io_bit = LAYOUT
            .get(chman::IO)
            .map_or(0, |s| 1u32.checked_shl(s.bit).unwrap_or(0));
        if self.doorbell & io_bit != 0 {
            self.io_kick = true;
        }
        self.doorbell = 0;
        self.advance_finishes();
        if self.io_kick && !self.fault(Faults::STALLED_RING) && self.sm != Sm::Requested {
            self.serve_io(mem, exec)?;
        }
        self.flush_events(mem)
    }

    /// Takes the host's SHAREDMALLOC answer, if there is one.
    fn check_sm_answer<M: Mem + ?Sized>(&mut self, mem: &mut M) -> Result<(), MemFault> {
        let addr = self.slot_addr(chman::SHAREDMALLOC, 0)?;
        let [word0, word1, _] = Self::slot_words(mem, addr)?;
        if word0 & chman::OWNER == 0 {
            return Ok(());
        }
        let dva = word0 & !chman::OWNER;
        if dva == 0 || dva % ALIGN != 0 || word1 != 0 {
            self.sm = Sm::Refused;
            return Ok(());
        }
        let zero = [0u8; 256];
        let mut off = 0;
        while off < PROGRAM_TABLE_LEN {
            mem.write(at(dva, off)?, &zero)?;
            off += zero.len() as u64;
        }
        self.sm = Sm::Granted(dva);
        if let Some(c) = self.t2h_cursor.get_mut(chman::SHAREDMALLOC) {
            *c = c.wrapping_add(1);
        }
        Ok(())
    }

    /// Counts down calls in flight and queues their finish events.
    fn advance_finishes(&mut self) {
        for f in self.finishes.iter_mut() {
            match f {
                Some(x) if x.ticks > 0 => x.ticks -= 1,
                Some(x) => {
                    let e = x.event;
                    if let Some(free) = self.events.iter_mut().find(|e| e.is_none()) {
                        *free = Some(e);
                        *f = None;
                    }
                }
                None => {}
            }
        }
    }

    /// Answers every command the host published on IO.
    fn serve_io<M: Mem + ?Sized, E: Executor>(
        &mut self,
        mem: &mut M,
        exec: &mut E,
    ) -> Result<(), MemFault> {
        let slots = LAYOUT.get(chman::IO).map_or(0, |s| s.slots);
        for _ in 0..slots {
            let addr = self.slot_addr(chman::IO, self.io_cursor)?;
            let [word0, word1, word2] = Self::slot_words(mem, addr)?;
            if word0 & chman::OWNER != 0 {
                self.io_kick = false;
                return Ok(());
            }
            let status = if word1 != word2
                || word1 < msg::HEADER_LEN as u64
                || word1 > msg::MAX_MESSAGE as u64
            {
                status::BAD_MESSAGE
            } else {
                self.command(mem, exec, word0, word1 as usize)
            };
            let mut status_bytes = [0u8; 2];
            let _ = put_u16(&mut status_bytes, 0, status);
            // A command at an unreadable address gets no status, only the
            // slot words.
            let _ = at(word0, 6).and_then(|a| mem.write(a, &status_bytes));
            let mut lens = [0u8; 16];
            if let Some(l) = lens.get_mut(..8) {
                l.copy_from_slice(&word1.to_le_bytes());
            }
            mem.write(at(addr, 8)?, &lens)?;
            mem.write(addr, &(word0 | chman::OWNER).to_le_bytes())?;
            self.io_cursor = self.io_cursor.wrapping_add(1);
            self.stats.commands = self.stats.commands.wrapping_add(1);
            self.ring_host(chman::IO);
        }
        Ok(())
    }

    /// Runs one command at `dva`; writes its reply fields and returns the
    /// status.
    fn command<M: Mem + ?Sized, E: Executor>(
        &mut self,
        mem: &mut M,
        exec: &mut E,
        dva: u64,
        len: usize,
    ) -> u16 {
        let mut buf = [0u8; msg::PROGRAM_LOAD_LEN];
        let n = len.min(buf.len());
        let Some(head) = buf.get_mut(..n) else {
            return status::BAD_MESSAGE;
        };
        if mem.read(dva, head).is_err() {
            return status::BAD_MESSAGE;
        }
        let Ok(h) = msg::header(head) else {
            return status::BAD_MESSAGE;
        };
        if self.fault(Faults::ERROR_STATUS) {
            return self.cfg.injected_status;
        }
        let (status, reply) = match h.opcode {
            msg::OP_CONFIG_GET => self.config_get(head),
            msg::OP_PROGRAM_LOAD => self.load(mem, head),
            msg::OP_PROC_CREATE => self.proc_create(mem, head),
            msg::OP_PROCEDURE_CALL => (self.call(mem, exec, dva, head), None),
            msg::OP_CH_PROPERTY_WRITE => match msg::decode_property_write(head) {
                Ok(p) => {
                    self.property = Some(p);
                    (0, None)
                }
                Err(_) => (status::BAD_MESSAGE, None),
            },
            _ => (status::UNKNOWN_OPCODE, None),
        };
        if let Some((off, v)) = reply {
            if at(dva, off as u64)
                .and_then(|a| mem.write(a, &v.to_le_bytes()))
                .is_err()
            {
                return status::BAD_MESSAGE;
            }
        }
        status
    }

    /// CONFIG_GET: the configuration word at +0x08.
    fn config_get(&mut self, head: &[u8]) -> (u16, Option<(usize, u32)>) {
        if head.len() < msg::CONFIG_GET_LEN {
            return (status::BAD_MESSAGE, None);
        }
        self.stats.config_gets = self.stats.config_gets.wrapping_add(1);
        (0, Some((0x08, self.cfg.config_word)))
    }

    /// Device address of program `id`'s entry.
    fn entry_addr(&self, id: u32) -> Option<u64> {
        match self.sm {
            Sm::Granted(dva) => dva.checked_add(u64::from(id) * ENTRY_LEN),
            _ => None,
        }
    }

    /// PROGRAM_LOAD: stores the sections, answers the ProgramId.
    fn load<M: Mem + ?Sized>(&mut self, mem: &mut M, head: &[u8]) -> (u16, Option<(usize, u32)>) {
        let Ok(cmd) = msg::decode_program_load(head) else {
            return (status::BAD_MESSAGE, None);
        };
        if self.programs >= PROGRAM_SLOTS {
            return (status::TABLE_FULL, None);
        }
        let Some(entry) = self.entry_addr(self.programs) else {
            return (status::NO_MEMORY, None);
        };
        let mut e = [0u8; ENTRY_LEN as usize];
        let mut mask = 0u32;
        for s in cmd.sections() {
            mask |= 1 << s.id;
            let o = 8 + (s.id as usize).saturating_sub(1) * 16;
            let _ = super::bytes::put_u64(&mut e, o, s.iova);
            let _ = super::bytes::put_u64(&mut e, o + 8, s.size);
        }
        let _ = put_u32(&mut e, 0, mask);
        let _ = put_u32(&mut e, 4, msg::ID_PLACEHOLDER);
        if mem.write(entry, &e).is_err() {
            return (status::NO_MEMORY, None);
        }
        let id = self.programs;
        self.programs += 1;
        (0, Some((msg::LOAD_PROGRAM_ID, id)))
    }

    /// PROC_CREATE: a new process for the program (one per program).
    fn proc_create<M: Mem + ?Sized>(
        &mut self,
        mem: &mut M,
        head: &[u8],
    ) -> (u16, Option<(usize, u32)>) {
        let Ok(program) = msg::decode_proc_create(head) else {
            return (status::BAD_MESSAGE, None);
        };
        let entry = match self.entry_addr(program) {
            Some(e) if program < self.programs => e,
            _ => return (status::NO_PROGRAM, None),
        };
        let process = self.next_process;
        if at(entry, 4)
            .and_then(|a| mem.write(a, &process.to_le_bytes()))
            .is_err()
        {
            return (status::NO_MEMORY, None);
        }
        self.next_process = self.next_process.wrapping_add(1);
        (0, Some((msg::PROC_ID, process)))
    }

    /// Reads program `id`'s entry: its sections and process.
    fn read_program<M: Mem + ?Sized>(
        &self,
        mem: &mut M,
        id: u32,
        sections: &mut [SectionRef; MAX_SECTIONS],
    ) -> Option<(usize, u32)> {
        let entry = self.entry_addr(id).filter(|_| id < self.programs)?;
        let mut e = [0u8; ENTRY_LEN as usize];
        mem.read(entry, &mut e).ok()?;
        let mask = u32_at(&e, 0)?;
        let mut n = 0;
        for id in 1..=MAX_SECTIONS as u32 {
            if mask & (1 << id) == 0 {
                continue;
            }
            let o = 8 + (id as usize).saturating_sub(1) * 16;
            *sections.get_mut(n)? = SectionRef {
                id,
                iova: u64_at(&e, o)?,
                size: u64_at(&e, o + 8)?,
            };
            n += 1;
        }
        Some((n, u32_at(&e, 4)?))
    }

    /// PROCEDURE_CALL: executes, posts the dispatch event, schedules the
    /// finish.
    fn call<M: Mem + ?Sized, E: Executor>(
        &mut self,
        mem: &mut M,
        exec: &mut E,
        dva: u64,
        head: &[u8],
    ) -> u16 {
        let Ok(cmd) = msg::decode_call_header(head) else {
            return status::BAD_MESSAGE;
        };
        let mut sections = [SectionRef::default(); MAX_SECTIONS];
        let Some((n_sections, process)) = self.read_program(mem, cmd.args.program, &mut sections)
        else {
            return status::NO_PROGRAM;
        };
        if process != cmd.args.process {
            return status::BAD_PROCESS;
        }
        let mut io = [IoRef::default(); MAX_IO];
        for (i, r) in io.iter_mut().enumerate().take(cmd.count) {
            let mut rec = [0u8; msg::CALL_RECORD_LEN];
            let off = (msg::CALL_HEADER_LEN + i * msg::CALL_RECORD_LEN) as u64;
            if at(dva, off).and_then(|a| mem.read(a, &mut rec)).is_err() {
                return status::BAD_MESSAGE;
            }
            match msg::decode_io_record(&rec, i) {
                Ok(x) => *r = x,
                Err(_) => return status::BAD_MESSAGE,
            }
        }
        let free_finish = self.finishes.iter().position(|f| f.is_none());
        let free_event = self.events.iter().position(|e| e.is_none());
        let (Some(fi), Some(ei)) = (free_finish, free_event) else {
            return status::BUSY;
        };
        let call = Call {
            program: cmd.args.program,
            process,
            cookie: cmd.args.cookie,
            priority: cmd.args.priority,
            sections: sections.get(..n_sections).unwrap_or(&[]),
            io: io.get(..cmd.count).unwrap_or(&[]),
        };
        self.stats.calls = self.stats.calls.wrapping_add(1);
        if exec.execute(mem, &call).is_err() {
            self.stats.exec_failures = self.stats.exec_failures.wrapping_add(1);
            return status::EXEC_FAILED;
        }
        let event = |seq, state| Event {
            seq,
            cookie: call.cookie,
            program: call.program,
            process,
            state,
        };
        let dispatch = event(self.next_seq(), EventState::Dispatch);
        if let Some(e) = self.events.get_mut(ei) {
            *e = Some(dispatch);
        }
        if !self.fault(Faults::MISSING_FINISH) {
            let finish = event(self.next_seq(), EventState::Finish);
            if let Some(f) = self.finishes.get_mut(fi) {
                *f = Some(Finish {
                    event: finish,
                    ticks: self.cfg.finish_delay,
                });
            }
        }
        0
    }

    /// The next event sequence number.
    fn next_seq(&mut self) -> u32 {
        let s = self.seq;
        self.seq = self.seq.wrapping_add(1);
        s
    }

    /// Posts queued events, oldest first, while IO_T2H has free slots.
    fn flush_events<M: Mem + ?Sized>(&mut self, mem: &mut M) -> Result<(), MemFault> {
        loop {
            let next = self
                .events
                .iter()
                .enumerate()
                .filter_map(|(i, e)| e.map(|e| (i, e)))
                .min_by_key(|(_, e)| e.seq);
            let Some((i, e)) = next else {
                return Ok(());
            };
            let cursor = self.t2h_cursor.get(chman::IO_T2H).copied().unwrap_or(0);
            let addr = self.slot_addr(chman::IO_T2H, cursor)?;
            let [word0, _, _] = Self::slot_words(mem, addr)?;
            if word0 & chman::OWNER == 0 {
                // The host has not consumed this slot yet: the ring is full.
                return Ok(());
            }
            let mut payload = [0u8; chman::EVENT_LEN];
            let _ = chman::encode_event(&e, &mut payload);
            mem.write(at(addr, chman::PAYLOAD as u64)?, &payload)?;
            mem.write(addr, &0u64.to_le_bytes())?;
            if let Some(c) = self.t2h_cursor.get_mut(chman::IO_T2H) {
                *c = c.wrapping_add(1);
            }
            if let Some(slot) = self.events.get_mut(i) {
                *slot = None;
            }
            self.stats.events = self.stats.events.wrapping_add(1);
            self.ring_host(chman::IO_T2H);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::regs::scratch;
    use super::*;

    #[test]
    fn faults_set() {
        let f = Faults::NO_READY.with(Faults::BAD_DONE);
        assert!(f.contains(Faults::NO_READY));
        assert!(f.contains(Faults::BAD_DONE));
        assert!(!f.contains(Faults::STALLED_RING));
        assert!(f.contains(Faults::NONE));
        assert_eq!(Faults::from_bits(u32::MAX), Faults::ALL);
        assert_eq!(f.bits(), 3);
    }

    #[test]
    fn registers_before_release() {
        let mut m = FwModel::new(ModelConfig::DEFAULT);
        assert_eq!(m.read32(regs::CPU_STATUS), regs::CPU_STATUS_FRESH);
        assert_eq!(m.read64(regs::RVBAR), regs::RVBAR_LATCHED);
        m.write32(scratch(5), 0x55);
        assert_eq!(m.read32(scratch(5)), 0x55);
        assert_eq!(m.read32(scratch(5) + 1), 0, "not a scratch register");
        assert_eq!(m.violations().forbidden, 1, "unaligned");
        m.write32(regs::CPU_CONTROL, 0);
        assert_eq!(m.phase(), Phase::Stopped);
        m.write32(regs::CPU_CONTROL, regs::CPU_CONTROL_RUN);
        assert_eq!(m.phase(), Phase::Starting(3));
        assert_eq!(m.read32(regs::CPU_STATUS), regs::CPU_STATUS_RELEASED);
        m.write64(regs::RVBAR, 0);
        assert_eq!(m.violations().rvbar_rewrites, 1);
        m.read32(regs::FABRIC_FATAL_START);
        assert_eq!(m.violations().forbidden, 2);
        assert_eq!(m.pmgr_read32(0x2e0), 0xff);
        m.set_faults(Faults::ISLAND_OFF);
        assert_eq!(m.pmgr_read32(0x2e0), 0x0f);
        assert_eq!(m.pmgr_read32(0x4000), 0xff);
    }
}
