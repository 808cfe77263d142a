// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The H13 task manager (TM) and its task queues (TQ), as the drivers that
//! ran on real M1 and M1 Max machines program them.
//!
//! Every offset, value and rule here is cited, with repository, file and
//! commit, in `docs/hardware-record.md` ("H13 task manager"); what the
//! record does not say is listed there as open, and this module then takes
//! the most conservative choice. In short: the TM sits at engine + 0x20000
//! and the eight TQs at engine + 0x21000, 0x148 apart. A job is queued on a
//! TQ (32 buffer-slot base addresses, the first TD's address, size and
//! network id) and started with a push to the TM. The TM reports each
//! finished task as an event on two event lines; an event is popped by
//! reading all four of its registers. A job is finished when both lines
//! carried its last task's finish word and the TM reports idle.
//!
//! - [`seq`]: the register sequences (enable, push, completion, retire,
//!   T6001 drain), written once against the [`seq::Regs`] trait: the
//!   driver runs them on the real window, the simulator and the host
//!   tests on the record's model.
//! - `model` (simulator and host only): the task manager as the record
//!   describes it.

#[cfg(any(not(ane_kernel), ane_test))]
pub mod model;
pub mod seq;

#[cfg(test)]
mod tests;

/// Offset of the TM block in the engine window.
pub const TM_BASE: usize = 0x2_0000;
/// Offset of TQ 0 in the engine window.
pub const TQ_BASE: usize = 0x2_1000;
/// Distance between TQs.
pub const TQ_STRIDE: usize = 0x148;
/// Number of TQs.
pub const TQ_COUNT: usize = 8;
/// Bytes of the engine window the driver maps.
pub const ENGINE_WINDOW: usize = 0x2_4000;

/// Task-manager registers, relative to [`TM_BASE`].
pub mod mgr {
    /// Device address of the first TD to run.
    pub const ADDR: usize = 0x00;
    /// TD size field (bits 31:16, words − 1) and TD count (bits 15:0).
    pub const INFO: usize = 0x04;
    /// Writing `priority | queue << 8` starts the queued job.
    pub const PUSH: usize = 0x08;
    /// Queue enable; bit 12 turns the queues on.
    pub const TQ_EN: usize = 0x0c;
    /// Event count of line `n` is at `EVT_COUNT + n * EVT_STRIDE`.
    pub const EVT_COUNT: usize = 0x14;
    /// Event info word of line `n`: `0x05000000 | nid << 16 | task` for a
    /// finished task.
    pub const EVT_INFO: usize = 0x18;
    /// Second event word (meaning unknown; read to pop the event).
    pub const EVT_UNK1: usize = 0x1c;
    /// Third event word, a TM status snapshot (read to pop the event).
    pub const EVT_TMST: usize = 0x20;
    /// Fourth event word (meaning unknown); reading it completes the pop.
    pub const EVT_UNK2: usize = 0x24;
    /// Distance between the two event lines' registers.
    pub const EVT_STRIDE: usize = 0x14;
    /// Number of event lines.
    pub const EVT_LINES: usize = 2;
    /// Bit 0 set when the TM is idle.
    pub const STATUS: usize = 0x54;
    /// Error latches. The only hardware-backed statement is that
    /// [`super::LATCH_HEALTHY`] is what they read on a healthy engine.
    pub const ERROR: [usize; 3] = [0x58, 0x5c, 0x60];
    /// Interrupt enable, line 0.
    pub const IRQ_EN1: usize = 0x68;
    /// Interrupt acknowledge.
    pub const IRQ_ACK: usize = 0x6c;
    /// Interrupt enable, line 1.
    pub const IRQ_EN2: usize = 0x70;

    /// [`TQ_EN`] bit that enables the queues.
    pub const TQ_EN_ON: u32 = 0x1000;
    /// [`TQ_EN`] bits the T6001 drain clears to stop the task manager.
    pub const TQ_EN_STOP: u32 = 0x3000;
    /// [`IRQ_EN1`] value the enable sequence programs.
    pub const IRQ_EN1_VALUE: u32 = 0x400_0000;
    /// [`IRQ_EN2`] value the enable sequence programs.
    pub const IRQ_EN2_VALUE: u32 = 0x6;
    /// [`IRQ_ACK`] bits set (read-modify-write) after popping events.
    pub const IRQ_ACK_EVENTS: u32 = 0x2;
    /// [`IRQ_ACK`] bits the T6001 drain sets.
    pub const IRQ_ACK_DRAIN: u32 = 0x3;
    /// [`STATUS`] idle bit.
    pub const STATUS_IDLE: u32 = 0x1;
}

/// TQ registers, relative to the queue's base.
pub mod tq {
    /// 1 while the queue holds a job, 0 once the driver released it.
    pub const STATUS: usize = 0x000;
    /// Queue priority.
    pub const PRTY: usize = 0x010;
    /// Base address (low 32 bits) of buffer slot `i` is at `BAR + 4 * i`.
    pub const BAR: usize = 0x020;
    /// Network id field: `nid << 8 | 1` (bit 0: the slot is live).
    pub const NID: usize = 0x0a0;
    /// TD size field: `(td_size / 4 - 1) << 16`.
    pub const SIZE: usize = 0x130;
    /// Device address of the first TD.
    pub const ADDR: usize = 0x134;
    /// [`NID`] bit marking the queue slot live.
    pub const NID_LIVE: u32 = 0x1;
}

/// Per-queue priorities the enable sequence programs.
pub const TQ_PRIORITY: [u32; TQ_COUNT] = [1, 2, 3, 4, 5, 6, 0x1e, 0x1f];

/// The one queue every job uses: the only one the record ran. Priorities
/// are ordered in software by the scheduler.
pub const QUEUE: usize = 4;

/// What each error latch reads on a healthy engine.
pub const LATCH_HEALTHY: [u32; 3] = [0x2222_2222, 0x2222_2222, 0x2222];

/// More events than this pending on a line means the task manager is
/// wedged.
pub const EVT_COUNT_MAX: u32 = 64;

/// Absolute offset of TQ `q`'s register `reg` in the engine window.
#[inline]
pub const fn tq_reg(q: usize, reg: usize) -> usize {
    TQ_BASE + q * TQ_STRIDE + reg
}

/// Absolute offset of TM register `reg` in the engine window.
#[inline]
pub const fn tm_reg(reg: usize) -> usize {
    TM_BASE + reg
}

/// Absolute offset of event register `reg` (an `EVT_*` offset of line 0)
/// of event line `line`.
#[inline]
pub const fn evt_reg(line: usize, reg: usize) -> usize {
    TM_BASE + reg + line * mgr::EVT_STRIDE
}

/// The TD size field for `td_size` bytes (a multiple of 4, at least 4), as
/// both the TQ size register and the TM info register carry it.
#[inline]
pub const fn size_field(td_size: u32) -> u32 {
    ((td_size / 4).saturating_sub(1) & 0x1ff) << 16
}

/// The event info word of a finished task `task` of network `nid`.
#[inline]
pub const fn task_word(nid: u8, task: u32) -> u32 {
    0x0500_0000 | (nid as u32) << 16 | (task & 0xffff)
}

/// The event info word that ends a job of `td_count` TDs run as network
/// `nid`: its last task's finish word.
#[inline]
pub const fn finish_word(nid: u8, td_count: u32) -> u32 {
    task_word(nid, td_count.saturating_sub(1))
}

/// Field of an event info word holding the network id.
#[inline]
pub const fn event_nid(info: u32) -> u8 {
    ((info >> 16) & 0xff) as u8
}

/// The network id the driver stamps on every job: 0x40, the only id any
/// reference pushed (eiln `ane_drv.c` `req.nid = ANE_FIFO_NID`, also at
/// `afeafa4`; m1n1 `fw/ane.py` l.179 `req.nid = self.FIFO_NID`; OA-DRV
/// `ane_submit`). 0x41 and 0x60 only ever sat in the FIFO's tail copy,
/// which nothing pointed the task manager at. Jobs are told apart from a
/// late event as the references do: one job on the engine at a time, a
/// failed one recovered (power cycle or drain to idle) before the next
/// push, and both event lines drained right before every push.
pub const JOB_NID: u8 = 0x40;
