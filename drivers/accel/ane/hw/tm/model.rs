// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The H13 task manager as the hardware record describes it (simulator and
//! host tests only; not in the production module).
//!
//! What is modelled, each point from `docs/hardware-record.md`:
//!
//! - two event lines, each a FIFO of four-word events; an event leaves the
//!   FIFO only after all four of its words were read, in order (every
//!   reference pops that way; whether fewer reads pop is not known, so the
//!   model takes the reading under which a shorter pop is a bug);
//! - a finished task posts `0x05000000 | nid << 16 | task` on both lines;
//!   with [`Behaviour::intermediate_events`] every task does, otherwise
//!   only the last;
//! - the idle bit is clear from the push until the job's events are posted,
//!   and for [`Behaviour::idle_lag`] status reads after that;
//! - the error latches read `0x22222222` (`0x2222` for the third) when
//!   healthy (EILN) and after a T6001 task died (OA): they carry no
//!   verdict; an injected engine error changes the first one; on T8103 a
//!   write restores the healthy value, on T6001 writes are ignored (OA);
//! - a DMA fault stops the engine (no event, never idle) and latches the
//!   DART's error register; any engine register read while the DART fault
//!   is latched is counted as a lockup (the record: such reads hung the
//!   SoC);
//! - the event interrupt is raised on the DART's interrupt line
//!   ([`TmModel::dart_line_raised`]); the acknowledge is a write of bit 1
//!   (which lowers it unless [`Behaviour::ack_keeps_irq`]); the driver
//!   tells the model when it masks that line, and the model counts every
//!   time the interrupt reaches it unmasked ([`TmModel::dart_storms`]);
//! - on T8103 a power cycle loses every register and event, which is how
//!   a hung task is recovered; on T6001 ([`TmModel::new`] `retention`) the
//!   task manager keeps its state in retention, a hung task stays hung
//!   through power cycles and the drain sequence (OA tried it; it did not
//!   recover), and only a new binding (a fresh model) clears it; the
//!   alternatives [`Behaviour::revive_garbage`] (the drain revives it, but
//!   nothing computed afterwards is right) and [`Behaviour::cycle_resets`]
//!   (a power cycle resets it after all) play the readings the record
//!   does not support.

use super::seq::Regs;
use super::{mgr, tm_reg, tq, tq_reg, LATCH_HEALTHY, TM_BASE, TQ_BASE, TQ_COUNT, TQ_STRIDE};
use crate::hw::td::BAR_SLOTS;

use crate::hw::dart::ERROR_NO_PTE as DART_ERROR_NO_PTE;
pub use crate::hw::dart::{ERROR as DART_ERROR, ERROR_FLAG as DART_ERROR_FLAG};

/// Words of the TM block the model keeps.
const TM_WORDS: usize = 0x80 / 4;
/// Words of one TQ.
const TQ_WORDS: usize = TQ_STRIDE / 4;
/// Events a line holds.
const FIFO: usize = 64;

/// How the modelled engine behaves where the record leaves a choice; the
/// defaults are the record's plain reading.
#[derive(Clone, Copy, Debug)]
pub struct Behaviour {
    /// Every task posts an event, not only the last.
    pub intermediate_events: bool,
    /// Status reads after the events before the idle bit shows.
    pub idle_lag: u32,
    /// The acknowledge (`IRQ_ACK |= 2`) does not lower the event
    /// interrupt: it stays raised until the task manager loses power (EILN
    /// README: "I don't know how to … ack it"; hw-2 §3 item 8).
    pub ack_keeps_irq: bool,
    /// An event leaves its line when its INFO word is read; the other
    /// three words read that event's values (hw-2 §3 item 9: the record
    /// only shows that four reads suffice).
    pub pop_on_info: bool,
    /// Only network id 0x40, the one every reference pushed, runs; a push
    /// of any other id is taken and never runs (hw-2 §3 item 10).
    pub only_nid_40: bool,
    /// T6001: the drain's queue stop does end a hung task and the idle bit
    /// comes back, but every job after it completes without computing
    /// (OA-TM, `ane_tm_recover`: after a cycle "tasks dispatched afterwards
    /// complete but compute nondeterministic garbage"; hw-2 §3 item 14).
    pub revive_garbage: bool,
    /// T6001: a power cycle does reset the task manager, as on T8103 (the
    /// record says it does not: OA-TM `ane_tm_recover`, "TQ_EN still reads
    /// 0x3000 after a 20 ms and a 2 s gate"; the simulator plays the
    /// other reading so a driver that would only be safe under one of
    /// them fails a test).
    pub cycle_resets: bool,
}

impl Behaviour {
    /// `sim_fw_faults` bit: [`Behaviour::ack_keeps_irq`].
    pub const SIM_ACK_KEEPS_IRQ: u32 = 1 << 13;
    /// `sim_fw_faults` bit: [`Behaviour::pop_on_info`].
    pub const SIM_POP_ON_INFO: u32 = 1 << 14;
    /// `sim_fw_faults` bit: [`Behaviour::intermediate_events`], and the
    /// idle bit three status reads late ([`Behaviour::idle_lag`]).
    pub const SIM_EVERY_TASK: u32 = 1 << 15;
    /// `sim_fw_faults` bit: [`Behaviour::only_nid_40`].
    pub const SIM_ONLY_NID_40: u32 = 1 << 16;
    /// `sim_fw_faults` bit: [`Behaviour::revive_garbage`].
    pub const SIM_REVIVE_GARBAGE: u32 = 1 << 17;
    /// `sim_fw_faults` bit: [`Behaviour::cycle_resets`].
    pub const SIM_CYCLE_RESETS: u32 = 1 << 19;
    /// Every task-manager bit of `sim_fw_faults` (the firmware model's
    /// [`crate::hw::fw::model::Faults`] take the others).
    pub const SIM_BITS: u32 = Self::SIM_ACK_KEEPS_IRQ
        | Self::SIM_POP_ON_INFO
        | Self::SIM_EVERY_TASK
        | Self::SIM_ONLY_NID_40
        | Self::SIM_REVIVE_GARBAGE
        | Self::SIM_CYCLE_RESETS;

    /// The behaviour the simulator's `sim_fw_faults` bits choose (the
    /// record's plain reading for bits not in [`Behaviour::SIM_BITS`]).
    pub const fn from_sim_bits(bits: u32) -> Self {
        let every = bits & Self::SIM_EVERY_TASK != 0;
        Self {
            intermediate_events: every,
            idle_lag: if every { 3 } else { 0 },
            ack_keeps_irq: bits & Self::SIM_ACK_KEEPS_IRQ != 0,
            pop_on_info: bits & Self::SIM_POP_ON_INFO != 0,
            only_nid_40: bits & Self::SIM_ONLY_NID_40 != 0,
            revive_garbage: bits & Self::SIM_REVIVE_GARBAGE != 0,
            cycle_resets: bits & Self::SIM_CYCLE_RESETS != 0,
        }
    }

    /// The record's plain reading.
    pub const DEFAULT: Self = Self {
        intermediate_events: false,
        idle_lag: 0,
        ack_keeps_irq: false,
        pop_on_info: false,
        only_nid_40: false,
        revive_garbage: false,
        cycle_resets: false,
    };
}

/// One injected misbehaviour, consumed by the next push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// The job never finishes: no event, never idle.
    Hang,
    /// The job stops with an engine error: the latches change, no event.
    Error,
    /// An event of another network sits at the head of both lines.
    Stale,
    /// Line 1 never carries the finish word.
    DropLine1,
    /// The events come but the idle bit never sets.
    NoIdle,
    /// The engine's DMA faults in the DART.
    DartFault,
}

/// The job a push asked for.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    /// Device address of the first TD.
    pub first_td: u64,
    /// Bytes per TD.
    pub td_size: u32,
    /// TDs.
    pub td_count: u32,
    /// Device address per buffer slot.
    pub bars: [u64; BAR_SLOTS],
    /// The network id the queue carries.
    pub nid: u8,
}

/// What running a job did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ran {
    /// Every task finished.
    Finished,
    /// DMA faulted at this device address.
    DmaFault(u64),
    /// The engine could not run the program (an engine error).
    Failed,
}

#[derive(Clone, Copy, Debug)]
struct Fifo {
    ev: [[u32; 4]; FIFO],
    head: usize,
    len: usize,
    /// Words of the head event read so far, in order.
    read: u8,
    /// [`Behaviour::pop_on_info`]: the words of the event the last INFO
    /// read popped.
    popped: [u32; 4],
}

impl Fifo {
    const EMPTY: Self = Self {
        ev: [[0; 4]; FIFO],
        head: 0,
        len: 0,
        read: 0,
        popped: [0; 4],
    };

    fn push(&mut self, ev: [u32; 4]) -> bool {
        if self.len == FIFO {
            return false;
        }
        let at = (self.head + self.len) % FIFO;
        if let Some(slot) = self.ev.get_mut(at) {
            *slot = ev;
        }
        self.len += 1;
        true
    }

    fn push_front(&mut self, ev: [u32; 4]) {
        if self.len == FIFO {
            return;
        }
        self.head = (self.head + FIFO - 1) % FIFO;
        if let Some(slot) = self.ev.get_mut(self.head) {
            *slot = ev;
        }
        self.len += 1;
        self.read = 0;
    }

    /// A read of word `w` (0 = info .. 3 = unk2) of the head event; with
    /// `pop_on_info` the INFO read pops it and the other words read the
    /// popped event.
    fn read(&mut self, w: u8, pop_on_info: bool) -> u32 {
        if pop_on_info {
            if w != 0 {
                return self.popped.get(usize::from(w)).copied().unwrap_or(0);
            }
            if self.len == 0 {
                return 0;
            }
            self.popped = self.ev.get(self.head).copied().unwrap_or([0; 4]);
            self.head = (self.head + 1) % FIFO;
            self.len -= 1;
            self.read = 0;
            return self.popped[0];
        }
        if self.len == 0 {
            return 0;
        }
        let v = self
            .ev
            .get(self.head)
            .and_then(|e| e.get(usize::from(w)))
            .copied()
            .unwrap_or(0);
        // Only the words read in order count towards the pop.
        if w == self.read {
            self.read += 1;
        } else if w == 0 {
            self.read = 1;
        } else {
            self.read = 0;
        }
        if self.read == 4 {
            self.head = (self.head + 1) % FIFO;
            self.len -= 1;
            self.read = 0;
        }
        v
    }
}

/// The task manager, its queues and the DART's error register.
pub struct TmModel {
    tm: [u32; TM_WORDS],
    tq: [[u32; TQ_WORDS]; TQ_COUNT],
    lines: [Fifo; mgr::EVT_LINES],
    /// A job is running (pushed, not finished).
    busy: bool,
    /// Status reads left before idle shows.
    idle_lag: u32,
    /// Never idle again until reset.
    stuck: bool,
    retention: bool,
    behaviour: Behaviour,
    dart_error: u32,
    /// Engine register reads while a DART fault was latched.
    lockups: u32,
    /// Times the event interrupt was raised on the DART's line.
    dart_line: u32,
    /// The interrupt is pending (raised, not acknowledged).
    irq_pending: bool,
    /// The DART's interrupt line is masked (the interrupt controller's
    /// state, which a power cycle of the engine does not change).
    dart_masked: bool,
    /// Times the event interrupt reached an unmasked DART line: raised
    /// while the line was unmasked, or the line unmasked while it was
    /// raised. apple-dart's handler cannot acknowledge it (IRQ_NONE), so
    /// on hardware a level that stays raised storms the line (hw-2 risk 8).
    dart_storms: u32,
    /// [`Behaviour::revive_garbage`]: jobs complete without running.
    garbage: bool,
    pushes: u32,
    /// The job the engine may still be running.
    current: Option<Job>,
    /// Pushes are taken but run only at [`TmModel::run_deferred`] (a job
    /// that takes time).
    defer: bool,
    /// The running job waits for [`TmModel::run_deferred`], with this
    /// injection.
    deferred: Option<Option<Inject>>,
}

/// Per-event TMST word the model reports (the record does not decode it).
const TMST: u32 = 0;

impl TmModel {
    /// A powered-up task manager; `retention` keeps state across power
    /// cycles (T6001).
    pub const fn new(retention: bool, behaviour: Behaviour) -> Self {
        let mut tm = [0u32; TM_WORDS];
        tm[mgr::STATUS / 4] = mgr::STATUS_IDLE;
        tm[mgr::ERROR[0] / 4] = LATCH_HEALTHY[0];
        tm[mgr::ERROR[1] / 4] = LATCH_HEALTHY[1];
        tm[mgr::ERROR[2] / 4] = LATCH_HEALTHY[2];
        Self {
            tm,
            tq: [[0; TQ_WORDS]; TQ_COUNT],
            lines: [Fifo::EMPTY; mgr::EVT_LINES],
            busy: false,
            idle_lag: 0,
            stuck: false,
            retention,
            behaviour,
            dart_error: 0,
            lockups: 0,
            dart_line: 0,
            irq_pending: false,
            dart_masked: false,
            dart_storms: 0,
            garbage: false,
            pushes: 0,
            current: None,
            defer: false,
            deferred: None,
        }
    }

    /// While `on`, a push starts its job (the engine is busy, nothing is
    /// posted) and the job runs only at [`TmModel::run_deferred`]: a job
    /// that takes time.
    pub fn set_defer(&mut self, on: bool) {
        self.defer = on;
    }

    /// Whether a pushed job waits for [`TmModel::run_deferred`].
    pub fn has_deferred(&self) -> bool {
        self.deferred.is_some() && self.busy
    }

    /// Runs the job a deferred push started, if it is still running (a
    /// power cycle or stopping the queues drops it).
    pub fn run_deferred(&mut self, run: impl FnOnce(&Job) -> Ran) {
        let Some(inject) = self.deferred.take() else {
            return;
        };
        if let (true, Some(job)) = (self.busy, self.current) {
            self.run_pushed(job, inject, run);
        }
    }

    /// Changes the behaviour where the record leaves a choice.
    pub fn set_behaviour(&mut self, b: Behaviour) {
        self.behaviour = b;
    }

    /// Power loss and power-up: on T8103 every register and event is lost;
    /// in retention (T6001) nothing changes, unless
    /// [`Behaviour::cycle_resets`].
    pub fn power_cycle(&mut self) {
        if self.retention && !self.behaviour.cycle_resets {
            // The registers are kept, a hung task's wedge with them, but
            // without power nothing runs: no DMA after this.
            self.busy = false;
            self.deferred = None;
            return;
        }
        let b = self.behaviour;
        let (lockups, dart_line, dart_error, pushes, defer) = (
            self.lockups,
            self.dart_line,
            self.dart_error,
            self.pushes,
            self.defer,
        );
        let (dart_masked, dart_storms) = (self.dart_masked, self.dart_storms);
        *self = Self::new(self.retention, b);
        self.dart_masked = dart_masked;
        self.dart_storms = dart_storms;
        self.defer = defer;
        self.lockups = lockups;
        self.dart_line = dart_line;
        self.pushes = pushes;
        // The DART is not in the engine's power domains; its owner clears
        // the latched fault, which the model does once the engine that
        // caused it lost power.
        let _ = dart_error;
    }

    /// Engine register reads made while a DART fault was latched.
    pub fn lockups(&self) -> u32 {
        self.lockups
    }

    /// Times the event interrupt was raised on the DART's interrupt line.
    pub fn dart_line_raised(&self) -> u32 {
        self.dart_line
    }

    /// The driver masked (`true`) or unmasked the DART's interrupt line.
    pub fn set_dart_masked(&mut self, masked: bool) {
        self.dart_masked = masked;
        if !masked && self.irq_pending {
            self.dart_storms += 1;
        }
    }

    /// Times the event interrupt reached the DART's line unmasked.
    pub fn dart_storms(&self) -> u32 {
        self.dart_storms
    }

    /// Events pending on both lines (what the event counts read).
    pub fn pending_events(&self) -> usize {
        self.lines.iter().map(|f| f.len).sum()
    }

    /// Pushes seen.
    pub fn pushes(&self) -> u32 {
        self.pushes
    }

    /// The job the engine may still be accessing memory for, if any.
    pub fn running(&self) -> Option<&Job> {
        self.current.as_ref().filter(|_| self.busy)
    }

    /// Whether a job is running (pushed, not finished, not stopped by a
    /// power cycle): whether the engine may still access memory.
    pub fn busy(&self) -> bool {
        self.busy
    }

    /// The DART's error register.
    pub fn dart_read32(&self, off: usize) -> u32 {
        if off == DART_ERROR {
            self.dart_error
        } else {
            0
        }
    }

    /// A write to the DART's error register (its owner acknowledging).
    pub fn dart_write32(&mut self, off: usize, val: u32) {
        if off == DART_ERROR {
            self.dart_error &= !val;
        }
    }

    fn tm_word(&mut self, off: usize) -> Option<&mut u32> {
        self.tm.get_mut(off.checked_sub(TM_BASE)? / 4)
    }

    fn tq_word(&mut self, off: usize) -> Option<&mut u32> {
        let rel = off.checked_sub(TQ_BASE)?;
        let (q, r) = (rel / TQ_STRIDE, rel % TQ_STRIDE);
        self.tq.get_mut(q)?.get_mut(r / 4)
    }

    /// The line and word (0..4) an event register is, if it is one.
    fn evt(off: usize) -> Option<(usize, u8)> {
        let rel = off.checked_sub(tm_reg(mgr::EVT_COUNT))?;
        let (line, r) = (rel / mgr::EVT_STRIDE, rel % mgr::EVT_STRIDE);
        if line >= mgr::EVT_LINES {
            return None;
        }
        Some((line, (r / 4) as u8))
    }

    /// A register read of the engine window.
    pub fn read(&mut self, off: usize) -> u32 {
        if self.dart_error & DART_ERROR_FLAG != 0 {
            // On hardware this read would not return.
            self.lockups += 1;
            return u32::MAX;
        }
        if let Some((line, w)) = Self::evt(off) {
            let Some(f) = self.lines.get_mut(line) else {
                return 0;
            };
            let pop_on_info = self.behaviour.pop_on_info;
            return match w {
                0 => f.len as u32,
                w => f.read(w - 1, pop_on_info),
            };
        }
        if off == tm_reg(mgr::STATUS) {
            let idle = !self.busy && !self.stuck && {
                if self.idle_lag > 0 {
                    self.idle_lag -= 1;
                    false
                } else {
                    true
                }
            };
            return u32::from(idle);
        }
        if let Some(w) = self.tm_word(off) {
            return *w;
        }
        self.tq_word(off).map(|w| *w).unwrap_or(0)
    }

    /// A register write of the engine window; a write to PUSH hands the
    /// queued job to `run` (the functional engine over the job's address
    /// space), unless `inject` says otherwise.
    pub fn write(
        &mut self,
        off: usize,
        val: u32,
        inject: Option<Inject>,
        run: impl FnOnce(&Job) -> Ran,
    ) {
        if off == tm_reg(mgr::IRQ_ACK) {
            if val & mgr::IRQ_ACK_EVENTS != 0 && !self.behaviour.ack_keeps_irq {
                self.irq_pending = false;
            }
            return;
        }
        if mgr::ERROR.iter().any(|r| tm_reg(*r) == off) {
            if self.retention {
                // OA: both write-back and zero clears are ignored on T6001.
                return;
            }
            // The latch reads healthy again.
            for (r, h) in mgr::ERROR.iter().zip(LATCH_HEALTHY) {
                if tm_reg(*r) == off {
                    if let Some(w) = self.tm_word(off) {
                        *w = h;
                    }
                }
            }
            return;
        }
        if off == tm_reg(mgr::TQ_EN) {
            if let Some(w) = self.tm_word(off) {
                *w = val;
            }
            if val & mgr::TQ_EN_STOP == 0 && self.retention && self.behaviour.revive_garbage {
                // The alternative: the stop ends a hung task, and what
                // runs after it is not to be trusted.
                self.garbage |= self.busy || self.stuck;
                self.busy = false;
                self.stuck = false;
                self.deferred = None;
            }
            if val & mgr::TQ_EN_STOP == 0 && !self.retention {
                // Stopping the queues drops the running task (on T6001 the
                // record saw a hung task survive it).
                self.busy = false;
                self.stuck = false;
                self.deferred = None;
            }
            return;
        }
        if off == tm_reg(mgr::PUSH) {
            self.push(val, inject, run);
            return;
        }
        if let Some(w) = self.tm_word(off) {
            *w = val;
            return;
        }
        if let Some(w) = self.tq_word(off) {
            *w = val;
        }
    }

    /// An event the engine posts late, on both lines (for example a
    /// previous job's finish word arriving after its retire).
    pub fn post_late(&mut self, info: u32) {
        self.post(info, [true, true]);
    }

    fn post(&mut self, info: u32, lines: [bool; 2]) {
        for (f, on) in self.lines.iter_mut().zip(lines) {
            if on {
                let _ = f.push([info, 0, TMST, 0]);
            }
        }
        if self.tm[mgr::IRQ_EN1 / 4] != 0 || self.tm[mgr::IRQ_EN2 / 4] != 0 {
            // The record: this interrupt arrives on the DART's line.
            // Counted per raise; a level the acknowledge does not lower is
            // counted each time an event signals it again.
            if !self.irq_pending || self.behaviour.ack_keeps_irq {
                self.dart_line += 1;
            }
            if !self.dart_masked {
                self.dart_storms += 1;
            }
            self.irq_pending = true;
        }
    }

    fn push(&mut self, val: u32, inject: Option<Inject>, run: impl FnOnce(&Job) -> Ran) {
        self.pushes += 1;
        if self.tm[mgr::TQ_EN / 4] & mgr::TQ_EN_ON == 0 || self.busy || self.stuck {
            // Queues off (not enabled since power-up) or busy: the push
            // goes nowhere.
            return;
        }
        let q = ((val >> 8) & 7) as usize;
        let Some(regs) = self.tq.get(q) else {
            return;
        };
        let mut bars = [0u64; BAR_SLOTS];
        for (i, b) in bars.iter_mut().enumerate() {
            *b = u64::from(regs.get((tq::BAR + 4 * i) / 4).copied().unwrap_or(0));
        }
        let nid_reg = regs.get(tq::NID / 4).copied().unwrap_or(0);
        let info = self.tm[mgr::INFO / 4];
        let job = Job {
            first_td: u64::from(self.tm[mgr::ADDR / 4]),
            td_size: (((info >> 16) & 0x1ff) + 1) * 4,
            td_count: info & 0xffff,
            bars,
            nid: ((nid_reg >> 8) & 0xff) as u8,
        };
        if nid_reg & tq::NID_LIVE == 0 || job.td_count == 0 {
            return;
        }
        self.busy = true;
        self.current = Some(job);
        if self.behaviour.only_nid_40 && job.nid != 0x40 {
            // Taken, never run: the job hangs.
            self.stuck = true;
            return;
        }
        if inject == Some(Inject::Stale) {
            let stale = super::task_word(job.nid.wrapping_add(0x80), 0);
            for f in self.lines.iter_mut() {
                f.push_front([stale, 0, TMST, 0]);
            }
        }
        if self.defer {
            self.deferred = Some(inject);
            return;
        }
        self.run_pushed(job, inject, run);
    }

    /// The engine runs the job `push` started.
    fn run_pushed(&mut self, job: Job, inject: Option<Inject>, run: impl FnOnce(&Job) -> Ran) {
        let ran = match inject {
            Some(Inject::Hang) => {
                // Running for good: no event, never idle.
                self.stuck = true;
                return;
            }
            Some(Inject::Error) => Ran::Failed,
            Some(Inject::DartFault) => Ran::DmaFault(job.first_td),
            // Completes without computing: outputs are left as they were.
            _ if self.garbage => Ran::Finished,
            _ => run(&job),
        };
        match ran {
            Ran::Finished => {}
            Ran::Failed => {
                // The engine stops; the latches leave their healthy value.
                self.tm[mgr::ERROR[0] / 4] = 0x2222_2232;
                self.stuck = true;
                return;
            }
            Ran::DmaFault(_) => {
                self.dart_error = DART_ERROR_FLAG | DART_ERROR_NO_PTE;
                self.stuck = true;
                return;
            }
        }
        let last = job.td_count - 1;
        if self.behaviour.intermediate_events {
            for t in 0..last {
                self.post(super::task_word(job.nid, t), [true, true]);
            }
        }
        let line1 = inject != Some(Inject::DropLine1);
        self.post(super::task_word(job.nid, last), [true, line1]);
        self.busy = false;
        if inject == Some(Inject::NoIdle) {
            self.stuck = true;
        }
        self.idle_lag = self.behaviour.idle_lag;
    }
}

/// A [`TmModel`] behind a [`Regs`] interface, with the engine run by a
/// callback and one injection for the next push (host tests).
pub struct ModelRegs<F: FnMut(&Job) -> Ran> {
    /// The model.
    pub model: core::cell::RefCell<TmModel>,
    /// The next push's injection.
    pub inject: core::cell::Cell<Option<Inject>>,
    run: core::cell::RefCell<F>,
}

impl<F: FnMut(&Job) -> Ran> ModelRegs<F> {
    /// `model` running jobs through `run`.
    pub fn new(model: TmModel, run: F) -> Self {
        Self {
            model: core::cell::RefCell::new(model),
            inject: core::cell::Cell::new(None),
            run: core::cell::RefCell::new(run),
        }
    }
}

impl<F: FnMut(&Job) -> Ran> Regs for ModelRegs<F> {
    fn read32(&self, off: usize) -> u32 {
        self.model.borrow_mut().read(off)
    }

    fn write32(&self, off: usize, val: u32) {
        let inject = if off == tm_reg(mgr::PUSH) {
            self.inject.take()
        } else {
            None
        };
        let mut run = self.run.borrow_mut();
        self.model
            .borrow_mut()
            .write(off, val, inject, |j| (*run)(j));
    }
}

#[allow(dead_code)]
const _: () = {
    assert!(tq_reg(TQ_COUNT - 1, tq::ADDR) < TQ_BASE + TQ_COUNT * TQ_STRIDE);
};
