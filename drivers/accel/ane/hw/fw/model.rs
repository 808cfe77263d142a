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
//!   the 'IPC ' surface (rings as absolute addresses, 'IPC ' + offset, as
//!   OA's `ane_t6021_chman_check` expects), frees every target→host slot,
//!   and posts DONE;
//! - after the legacy ack it checks that no host→target slot is still
//!   zeroed (the real firmware's DebugTask consumed zeroed slots as commands
//!   and faulted; the model crashes instead) and asks for one SHAREDMALLOC
//!   buffer ([`SM_REQUEST`], in the record's layout: word0 0, size at +0x08,
//!   tag at +0x10), so the host's service path always runs. It keeps its
//!   program table there and publishes its IO_T2H events there: each event
//!   is written into the buffer and the slot carries its address and
//!   length, as the real firmware places payloads in memory the host gave
//!   it. The reply's word2 (the host's allocation count) is recorded, never
//!   used as an index;
//! - then it serves the IO channel whenever its doorbell rings: CONFIG_GET,
//!   PROGRAM_LOAD (256 programs; the 257th is refused with
//!   [`status::TABLE_FULL`]), PROC_CREATE, PROCEDURE_CALL and
//!   CH_PROPERTY_WRITE (never PROGRAM_UNLOAD, which the firmware does not
//!   serve for the driver: it answers [`status::UNKNOWN_OPCODE`]). A call
//!   is executed by the caller's [`Executor`]
//!   before the reply; the model then posts a dispatch event and, after
//!   [`ModelConfig::finish_delay`] ticks, a finish event with the call's
//!   cookie on IO_T2H.
//!
//! PROGRAM_LOAD of a program without the recorded H14 shape (the six
//! section ids, the descriptor's zero frame and task header,
//! [`super::program`]) is refused with [`status::NOT_H14`]: an H13 task
//! stream is never taken for an H14 program.
//!
//! The H14 task format is not documented, so the model cannot execute an
//! H14 program. It hands the call's sections and buffers to the
//! [`Executor`]; the kernel's simulator plugs [`NullExecutor`] there, so
//! a call of a loaded program completes — dispatch event, then a finish
//! event with state 1 (done, the only state the record shows) — and no
//! output byte is written: never invented compute. The host tests plug
//! executors of their own to see what a call carries.
//!
//! The status codes of refused commands are the model's own (the real
//! firmware's are not known); the host only relies on "nonzero".
//!
//! It is a step function: register writes latch state, [`FwModel::tick`]
//! does the work (the simulator ticks it from its delay hook), and nothing
//! needs a thread, an allocation or floating point. [`Faults`] injects the
//! failures the driver must survive.

use super::boot::{InitError, InitStruct, ALIGN, HEAP_FLOOR, INIT_LEN};
use super::bytes::{put_u16, put_u32, u32_at, u64_at};
use super::chman::{self, ChannelSpec, Event, EventState, SmRequest, LAYOUT, SLOT_LEN};
use super::msg::{self, IoRef, SectionRef, MAX_IO, MAX_SECTIONS};
use super::patch;
use super::program;
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
    /// Once its program table is granted, keep asking for 2 MiB
    /// SHAREDMALLOC buffers (and serve no command meanwhile) until the host
    /// refuses one.
    pub const SHAREDMALLOC_HOG: Faults = Faults(1 << 7);
    /// Publish IO_T2H events with a payload address in the firmware's own
    /// memory, which the host never gave it.
    pub const BAD_EVENT_POINTER: Faults = Faults(1 << 8);
    /// Alternative (hw-2 §3 item 2; the record does not say which holds): a
    /// command the firmware refuses gets no reply at all, and the model
    /// serves nothing more (the host's exchange times out), instead of a
    /// reply with a nonzero status.
    pub const SILENT_REFUSAL: Faults = Faults(1 << 9);
    /// Alternative (hw-2 §3 item 5; the record's firmware asks many
    /// times): after every PROGRAM_LOAD it serves, the model asks for one
    /// more [`SM_PER_LOAD_REQUEST`] buffer (and serves no command until the
    /// host answered), instead of one SHAREDMALLOC request per boot.
    pub const SM_PER_LOAD: Faults = Faults(1 << 10);
    /// The alternatives of what the record leaves open (not failures): the
    /// suites must pass under each.
    pub const ALTERNATIVES: Faults = Faults((1 << 9) | (1 << 10));
    /// Refuse every PROGRAM_LOAD with [`ModelConfig::injected_status`] (a
    /// program the firmware does not accept), serving the rest.
    pub const REFUSE_LOAD: Faults = Faults(1 << 11);
    /// Refuse every PROC_CREATE with [`ModelConfig::injected_status`],
    /// serving the rest.
    pub const REFUSE_PROC_CREATE: Faults = Faults(1 << 12);
    /// Alternative (hw-2 §3 item 3; only priority 2 ran, OA-T6021-H's
    /// comments disagree on the range): refuse a PROCEDURE_CALL of any
    /// other priority with [`status::BAD_PRIORITY`]. Bits 13..=17 are the
    /// H13 task manager's ([`crate::hw::tm::model::Behaviour::SIM_BITS`]).
    pub const ONLY_PRIORITY_2: Faults = Faults(1 << 18);
    /// Every fault.
    pub const ALL: Faults = Faults(0x1fff | (1 << 18));

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
    /// A CALL cookie other than [`super::msg::CALL_COOKIE`], the only one
    /// that ran (unless [`super::ModelConfig::any_cookie`]).
    pub const BAD_COOKIE: u16 = 0x9;
    /// PROGRAM_LOAD of a program without the recorded H14 shape
    /// ([`super::super::program`]): an H13 task stream above all. What the
    /// real firmware does with one is not recorded; the model refuses it
    /// in order (the host quarantines on any refused exchange).
    pub const NOT_H14: u16 = 0xa;
    /// A CALL priority other than 2 under
    /// [`super::Faults::ONLY_PRIORITY_2`].
    pub const BAD_PRIORITY: u16 = 0xb;
}

/// SCRATCH7 under [`Faults::BAD_DONE`].
pub const BAD_DONE_VALUE: u32 = 0x0804_2007;
/// SCRATCH7 after the model crashed.
pub const CRASH_VALUE: u32 = 0xdead_0001;
/// SCRATCH1:0 after DONE: a firmware-side address.
pub const FW_ADDRESS: u64 = regs::FW_IOVA + 0x40_0000;
/// Programs the firmware table holds (the 257th LOAD is refused).
pub const PROGRAM_SLOTS: u32 = msg::FW_PROGRAM_TABLE;
/// Bytes of one program entry in the SHAREDMALLOC buffer: `u32` section
/// mask, `u32` process id, then `{u64 iova, u64 size}` per section id.
const ENTRY_LEN: u64 = 0xa0;
/// Bytes of the program table.
const PROGRAM_TABLE_LEN: u64 = PROGRAM_SLOTS as u64 * ENTRY_LEN;
/// Offset of the event payloads in the SHAREDMALLOC buffer: one
/// [`EVENT_STRIDE`]-byte payload per IO_T2H slot.
pub const EVENT_AREA: u64 = 0xc000;
/// Bytes between event payloads.
pub const EVENT_STRIDE: u64 = 0x40;
/// The SHAREDMALLOC request the model makes: the program table and the
/// event payloads (16 KiB aligned, at most 2 MiB).
pub const SM_REQUEST: SmRequest = SmRequest {
    tag: u32::from_le_bytes(*b"PTBL"),
    size: 0x1_0000,
};
/// The requests of [`Faults::SHAREDMALLOC_HOG`].
pub const SM_HOG_REQUEST: SmRequest = SmRequest {
    tag: u32::from_le_bytes(*b"HOG!"),
    size: chman::SM_MAX_BUFFER,
};
/// The extra SHAREDMALLOC request of [`Faults::SM_PER_LOAD`]: 16 KiB.
pub const SM_PER_LOAD_REQUEST: SmRequest = SmRequest {
    tag: u32::from_le_bytes(*b"LOAD"),
    size: 0x4000,
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
    /// Echo any CALL cookie. Off by default: the record ran only
    /// [`msg::CALL_COOKIE`] and knows nothing of other values, so the model
    /// refuses them ([`status::BAD_COOKIE`]); host tests of the cookie
    /// matching itself turn it on.
    pub any_cookie: bool,
    /// The chip whose `RTK_soc`, `RTK_soc_revision` and tunables key the
    /// staged image must carry (the simulated SoC).
    pub chip: &'static patch::Chip,
}

impl ModelConfig {
    /// A healthy firmware with a latched RVBAR and a 64 KiB heap request.
    pub const DEFAULT: ModelConfig = ModelConfig {
        faults: Faults::NONE,
        ready_delay: 3,
        done_delay: 3,
        finish_delay: 2,
        scratch0: 4,
        // The smallest SCRATCH1 with which the record's host-side check
        // (an 'IPC ' surface of at least the table's 0x10440 bytes) passes:
        // the value on hardware is not recorded.
        scratch1: 0x1_043f,
        heap_request: 0x1_0000,
        config_word: 0x14,
        rvbar: regs::RVBAR_LATCHED,
        injected_status: 0xe0,
        any_cookie: false,
        chip: &patch::T6021_CHIP,
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
    /// The PMU page is not mapped at IOVA == PA: the real firmware's power
    /// service faults there ("NO PMD FOR IOVA 0x28e084008") and halts.
    PmuUnmapped(MemFault),
    /// The image is not where the init struct (+0x00) or the latched RVBAR
    /// entry says.
    ImageUnmapped(MemFault),
    /// The image at the entry lacks iBoot's runtime patches (the DATA base
    /// word or `RTK_soc`): the record's unpatched copies ran with a zero
    /// DATA base and never came up. The model never posts READY then.
    Unpatched {
        /// The vm address of the site.
        vm: usize,
    },
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
    /// A release (RUN) before the record's twelve grant writes, in order.
    pub ungranted_release: u32,
    /// A grant write out of the record's order or with another value.
    pub grant_mismatch: u32,
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
    /// CALLs refused for a cookie other than [`msg::CALL_COOKIE`].
    pub bad_cookies: u64,
    /// PROGRAM_LOADs refused for not having the recorded H14 shape
    /// ([`status::NOT_H14`]).
    pub not_h14: u64,
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
    /// Word 2 of the host's last SHAREDMALLOC reply.
    sm_count: Option<u64>,
    /// A [`Faults::SHAREDMALLOC_HOG`] or [`Faults::SM_PER_LOAD`] request
    /// is outstanding.
    hog_pending: bool,
    /// [`Faults::SM_PER_LOAD`]: a LOAD was served, ask for one more buffer.
    load_request: bool,
    /// [`Faults::SILENT_REFUSAL`]: a command was refused; nothing more is
    /// served.
    silenced: bool,
    /// Buffers granted to [`Faults::SHAREDMALLOC_HOG`] requests.
    hog_grants: u32,
    /// The last property write.
    property: Option<(u32, u32, u32)>,
    /// Counters.
    stats: ModelStats,
    /// Host misbehaviour.
    violations: Violations,
    /// Grant writes seen in the record's order.
    granted: usize,
    /// The init struct the host published.
    init: Option<InitStruct>,
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
            sm_count: None,
            hog_pending: false,
            hog_grants: 0,
            load_request: false,
            silenced: false,
            property: None,
            stats: ModelStats {
                ticks: 0,
                commands: 0,
                calls: 0,
                exec_failures: 0,
                events: 0,
                config_gets: 0,
                bad_cookies: 0,
                not_h14: 0,
            },
            violations: Violations {
                rvbar_rewrites: 0,
                forbidden: 0,
                while_off: 0,
                ungranted_release: 0,
                grant_mismatch: 0,
            },
            granted: 0,
            init: None,
        }
    }

    /// The init struct the host published, once the model read it.
    pub fn init(&self) -> Option<InitStruct> {
        self.init
    }

    /// Whether the record's twelve grant writes were seen, in order.
    pub fn granted(&self) -> bool {
        self.granted == regs::GRANT_WRITES.len()
    }

    /// Follows the grant writes: each must be the next of the record's, with
    /// its value, and come before the release.
    fn grant_write(&mut self, off: usize, val: u32) -> bool {
        if !regs::GRANT_WRITES.iter().any(|(o, _)| *o == off) {
            return false;
        }
        if self.phase == Phase::Stopped && regs::GRANT_WRITES.get(self.granted) == Some(&(off, val))
        {
            self.granted += 1;
        } else {
            self.violations.grant_mismatch = self.violations.grant_mismatch.wrapping_add(1);
        }
        true
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
    pub fn last_property(&self) -> Option<(u32, u32, u32)> {
        self.property
    }

    /// The SHAREDMALLOC buffer the host granted, if any.
    pub fn shared_buffer(&self) -> Option<u64> {
        match self.sm {
            Sm::Granted(dva) => Some(dva),
            _ => None,
        }
    }

    /// Word 2 of the host's last SHAREDMALLOC reply (OA: the 1-based count
    /// of buffers granted so far).
    pub fn shared_count(&self) -> Option<u64> {
        self.sm_count
    }

    /// Buffers granted to [`Faults::SHAREDMALLOC_HOG`] requests.
    pub fn hog_grants(&self) -> u32 {
        self.hog_grants
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
        if self.grant_write(off, val) {
            return;
        }
        match off {
            regs::CPU_CONTROL => {
                self.cpu_control = val;
                if val & regs::CPU_CONTROL_RUN != 0 && self.phase == Phase::Stopped {
                    if !self.granted() {
                        self.violations.ungranted_release =
                            self.violations.ungranted_release.wrapping_add(1);
                    }
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
            Phase::Starting(0) => match self.check_patches(mem) {
                Ok(()) => self.post_ready(),
                Err(c) => {
                    self.crash = Some(c);
                    self.phase = Phase::Parked;
                }
            },
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

    /// The entry the core starts at.
    fn entry(&self) -> Option<u64> {
        (self.rvbar & regs::RVBAR_VALID != 0).then_some(self.rvbar & regs::RVBAR_FOLD_MASK)
    }

    /// Checks iBoot's patches on the image at the entry: the DATA base
    /// word, `RTK_soc`, `RTK_soc_revision` and the tunables block of the
    /// configured chip (an unlatched RVBAR's fold points at the staged copy
    /// itself).
    fn check_patches<M: Mem + ?Sized>(&mut self, mem: &mut M) -> Result<(), Crash> {
        let entry = self.entry().unwrap_or(self.rvbar & regs::RVBAR_FOLD_MASK);
        let mut w = [0u8; 8];
        let at = |vm: usize| entry.checked_add(vm as u64).ok_or(MemFault { iova: entry });
        mem.read(
            at(patch::DATA_BASE_VM).map_err(Crash::ImageUnmapped)?,
            &mut w,
        )
        .map_err(Crash::ImageUnmapped)?;
        if u64::from_le_bytes(w) != entry.wrapping_add(patch::DATA_VMADDR) {
            return Err(Crash::Unpatched {
                vm: patch::DATA_BASE_VM,
            });
        }
        let soc = patch::RTK_RECORDS[1].vm + patch::RTK_HEADER;
        let mut d = [0u8; 4];
        mem.read(at(soc).map_err(Crash::ImageUnmapped)?, &mut d)
            .map_err(Crash::ImageUnmapped)?;
        if u32::from_le_bytes(d) != self.cfg.chip.soc {
            return Err(Crash::Unpatched { vm: soc });
        }
        let rev = patch::RTK_RECORDS[2].vm + patch::RTK_HEADER;
        mem.read(at(rev).map_err(Crash::ImageUnmapped)?, &mut d)
            .map_err(Crash::ImageUnmapped)?;
        if u32::from_le_bytes(d) != self.cfg.chip.revision {
            return Err(Crash::Unpatched { vm: rev });
        }
        // The tunables block: this chip's record count and key.
        let block = patch::TUNABLES_VM;
        mem.read(at(block).map_err(Crash::ImageUnmapped)?, &mut w)
            .map_err(Crash::ImageUnmapped)?;
        let tun = self.cfg.chip.tunables;
        let key = tun.key(self.cfg.chip.revision);
        let found_key = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
        if usize::from(w[3]) != tun.records.len() || key != Some(found_key) {
            return Err(Crash::Unpatched { vm: block });
        }
        // And every record's value (the lists of two chips differ in
        // values only).
        for (i, r) in tun.records.iter().enumerate() {
            let val = block + patch::TUNABLES_HEADER + i * patch::TUNABLE_LEN + 12;
            mem.read(at(val).map_err(Crash::ImageUnmapped)?, &mut w)
                .map_err(Crash::ImageUnmapped)?;
            if u64::from_le_bytes(w) != r.val {
                return Err(Crash::Unpatched { vm: val });
            }
        }
        Ok(())
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
        // The firmware runs from the latched entry (or the image address an
        // unlatched RVBAR was folded from) and reads its image through
        // +0x00; its power service writes the PMU page at IOVA == PA.
        let mut word = [0u8; 8];
        let entry = if self.rvbar & regs::RVBAR_VALID != 0 {
            self.rvbar & regs::RVBAR_FOLD_MASK
        } else {
            init.fwim
        };
        for at in [entry, init.fwim] {
            mem.read(at, &mut word).map_err(Crash::ImageUnmapped)?;
        }
        mem.read(regs::PMU_PA + 8, &mut word)
            .map_err(Crash::PmuUnmapped)?;
        let heap = match self.cfg.heap_request {
            0 => 0,
            r => u64::from(r.max(HEAP_FLOOR)),
        };
        self.init = Some(init);
        if init.ordinal != u64::from(self.cfg.scratch1.wrapping_add(1)) {
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
            let _ = chman::encode_entry(&spec, self.ipc, &mut entry);
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
    /// The SHAREDMALLOC slot at the model's cursor.
    fn sm_slot(&self) -> Result<u64, MemFault> {
        let cursor = self
            .t2h_cursor
            .get(chman::SHAREDMALLOC)
            .copied()
            .unwrap_or(0);
        self.slot_addr(chman::SHAREDMALLOC, cursor)
    }

    fn slot_addr(&self, index: usize, slot: u64) -> Result<u64, MemFault> {
        let fault = MemFault { iova: self.ipc };
        let spec = LAYOUT.get(index).ok_or(fault)?;
        let ch = chman::Channel {
            kind: spec.kind,
            bit: spec.bit,
            slots: spec.slots,
            ring: at(self.ipc, spec.ring)?,
        };
        let off = ch.slot(slot, self.ipc).ok_or(fault)?;
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
        self.request_sm(mem, &SM_REQUEST).map_err(Crash::Ipc)?;
        self.sm = Sm::Requested;
        Ok(())
    }

    /// Publishes a SHAREDMALLOC request at the ring's cursor: the size and
    /// tag first, then word0 = 0.
    fn request_sm<M: Mem + ?Sized>(
        &mut self,
        mem: &mut M,
        req: &SmRequest,
    ) -> Result<(), MemFault> {
        let mut slot = [0u8; SLOT_LEN];
        let _ = chman::encode_sm_request(req, &mut slot);
        let addr = self.sm_slot()?;
        mem.write(at(addr, 8)?, slot.get(8..).unwrap_or(&[]))?;
        mem.write(addr, &0u64.to_le_bytes())?;
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
        if self.sm == Sm::Requested || self.hog_pending {
            self.check_sm_answer(mem)?;
        }
        if self.fault(Faults::SHAREDMALLOC_HOG)
            && matches!(self.sm, Sm::Granted(_))
            && !self.hog_pending
        {
            self.request_sm(mem, &SM_HOG_REQUEST)?;
            self.hog_pending = true;
        } else if self.load_request && matches!(self.sm, Sm::Granted(_)) && !self.hog_pending {
            self.load_request = false;
            self.request_sm(mem, &SM_PER_LOAD_REQUEST)?;
            self.hog_pending = true;
        }
        let io_bit = LAYOUT
            .get(chman::IO)
            .map_or(0, |s| 1u32.checked_shl(s.bit).unwrap_or(0));
        if self.doorbell & io_bit != 0 {
            self.io_kick = true;
        }
        self.doorbell = 0;
        self.advance_finishes();
        if self.io_kick
            && !self.fault(Faults::STALLED_RING)
            && !self.silenced
            && self.sm != Sm::Requested
            && !self.hog_pending
        {
            self.serve_io(mem, exec)?;
        }
        self.flush_events(mem)
    }

    /// Takes the host's SHAREDMALLOC answer, if there is one: word0 =
    /// address | 1, word1 = 0; word2 (the host's count) is only recorded.
    fn check_sm_answer<M: Mem + ?Sized>(&mut self, mem: &mut M) -> Result<(), MemFault> {
        let addr = self.sm_slot()?;
        let [word0, word1, word2] = Self::slot_words(mem, addr)?;
        if word0 & chman::OWNER == 0 {
            return Ok(());
        }
        if let Some(c) = self.t2h_cursor.get_mut(chman::SHAREDMALLOC) {
            *c = c.wrapping_add(1);
        }
        self.sm_count = Some(word2);
        let dva = word0 & !chman::OWNER;
        let good = dva != 0 && dva % ALIGN == 0 && word1 == 0;
        if self.hog_pending {
            self.hog_pending = false;
            self.hog_grants = self.hog_grants.wrapping_add(u32::from(good));
            return Ok(());
        }
        if !good {
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
            if status != 0 && self.fault(Faults::SILENT_REFUSAL) {
                // No reply, and nothing served after it.
                self.silenced = true;
                self.io_kick = false;
                return Ok(());
            }
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
        if self.fault(Faults::ERROR_STATUS)
            || (h.opcode == msg::OP_PROGRAM_LOAD && self.fault(Faults::REFUSE_LOAD))
            || (h.opcode == msg::OP_PROC_CREATE && self.fault(Faults::REFUSE_PROC_CREATE))
        {
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
        if !Self::h14_shaped(mem, &cmd) {
            self.stats.not_h14 = self.stats.not_h14.wrapping_add(1);
            return (status::NOT_H14, None);
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
        self.load_request = self.fault(Faults::SM_PER_LOAD);
        (0, Some((msg::LOAD_PROGRAM_ID, id)))
    }

    /// Whether a PROGRAM_LOAD names a program of the recorded H14 shape:
    /// the six section ids and a descriptor that opens with the zero frame
    /// and a task header ([`super::program`]).
    fn h14_shaped<M: Mem + ?Sized>(mem: &mut M, cmd: &msg::LoadCmd) -> bool {
        if program::check_ids(cmd.sections().iter().map(|s| s.id)).is_err() {
            return false;
        }
        let Some(d) = cmd.sections().iter().find(|s| s.id == program::DESCRIPTOR) else {
            return false;
        };
        let mut head = [0u8; program::DESCRIPTOR_HEAD];
        let n = core::cmp::min(d.size, head.len() as u64) as usize;
        let Some(h) = head.get_mut(..n) else {
            return false;
        };
        if mem.read(d.iova, h).is_err() {
            return false;
        }
        program::check_descriptor_head(h, d.size).is_ok()
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
        if !self.cfg.any_cookie && cmd.args.cookie != msg::CALL_COOKIE {
            self.stats.bad_cookies = self.stats.bad_cookies.wrapping_add(1);
            return status::BAD_COOKIE;
        }
        if self.fault(Faults::ONLY_PRIORITY_2) && cmd.args.priority != msg::MIN_PRIORITY {
            return status::BAD_PRIORITY;
        }
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
            // The payload goes into the SHAREDMALLOC buffer, one stride per
            // IO_T2H slot (a slot is reused only after the host consumed
            // it, so its payload is free too); the slot carries its
            // address and length.
            let Sm::Granted(buf) = self.sm else {
                return Ok(());
            };
            let slots = LAYOUT.get(chman::IO_T2H).map_or(1, |s| s.slots.max(1));
            let payload_dva = if self.fault(Faults::BAD_EVENT_POINTER) {
                FW_ADDRESS
            } else {
                at(buf, EVENT_AREA + (cursor % slots) * EVENT_STRIDE)?
            };
            let mut payload = [0u8; chman::EVENT_LEN];
            let _ = chman::encode_event(&e, &mut payload);
            if !self.fault(Faults::BAD_EVENT_POINTER) {
                mem.write(payload_dva, &payload)?;
            }
            mem.write(at(addr, 8)?, &(chman::EVENT_LEN as u64).to_le_bytes())?;
            mem.write(addr, &payload_dva.to_le_bytes())?;
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
