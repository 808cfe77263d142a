// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The H13 task manager (TM) and its task queues (TQ): register map and the
//! values the driver programs.
//!
//! Facts (`shared/reference/hw.md` §2.3, `seed-repos.md` "ABI 1 semantics"):
//! the TM sits at engine + 0x20000, the eight TQs at engine + 0x21000 with a
//! stride of 0x148. A job is queued on a TQ (32 base-address registers for
//! the program's buffer slots, the first TD's address, size and network id)
//! and started with a push to the TM; its completion shows up as an event
//! in the TM's interrupt FIFOs tagged with the network id. The TM and TQ
//! state is lost when the ANE power domains cycle, so the enable sequence
//! runs after every power-up.
//!
//! The simulator implements this same map, so the real programming sequence
//! runs against it.

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
    /// Event count of interrupt line `n` is at `EVT_COUNT + n * EVT_STRIDE`.
    pub const EVT_COUNT: usize = 0x14;
    /// Event info of line `n` (count 31:24, network id 23:16); reading it
    /// pops the event.
    pub const EVT_INFO: usize = 0x18;
    /// Distance between the two interrupt lines' registers.
    pub const EVT_STRIDE: usize = 0x14;
    /// Network id of the TD last committed for execution (bits 23:16).
    pub const COMMIT_INFO: usize = 0x44;
    /// Bit 0 set when the TM is idle.
    pub const STATUS: usize = 0x54;
    /// Error latches; all zero when healthy.
    pub const ERROR: [usize; 3] = [0x58, 0x5c, 0x60];
    /// Interrupt enable, line 0.
    pub const IRQ_EN1: usize = 0x68;
    /// Interrupt acknowledge.
    pub const IRQ_ACK: usize = 0x6c;
    /// Interrupt enable, line 1.
    pub const IRQ_EN2: usize = 0x70;

    /// [`TQ_EN`] bit that enables the queues.
    pub const TQ_EN_ON: u32 = 0x1000;
    /// [`IRQ_EN1`] value the driver programs.
    pub const IRQ_EN1_VALUE: u32 = 0x400_0000;
    /// [`IRQ_EN2`] value the driver programs.
    pub const IRQ_EN2_VALUE: u32 = 0x6;
    /// [`IRQ_ACK`] bit acknowledging line 0's events.
    pub const IRQ_ACK_LINE0: u32 = 0x2;
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
    /// Network id field: `nid << 8 | 1`.
    pub const NID: usize = 0x0a0;
    /// TD size field: `(td_size / 4 - 1) << 16`.
    pub const SIZE: usize = 0x130;
    /// Device address of the first TD.
    pub const ADDR: usize = 0x134;
}

/// Per-queue priorities the enable sequence programs.
pub const TQ_PRIORITY: [u32; TQ_COUNT] = [1, 2, 3, 4, 5, 6, 0x1e, 0x1f];

/// Absolute offset of TQ `q`'s register `reg` in the engine window.
pub const fn tq_reg(q: usize, reg: usize) -> usize {
    TQ_BASE + q * TQ_STRIDE + reg
}

/// Absolute offset of TM register `reg` in the engine window.
pub const fn tm_reg(reg: usize) -> usize {
    TM_BASE + reg
}

/// The TD size field for `td_size` bytes (a multiple of 4, at least 4), as
/// both the TQ size register and the TM info register carry it.
pub const fn size_field(td_size: u32) -> u32 {
    ((td_size / 4).saturating_sub(1) & 0x1ff) << 16
}

/// Network id the driver stamps on the first TD of every job. Events carry
/// it back, so a completion can be matched to the job that was pushed.
pub const JOB_NID: u8 = 0x40;

/// Field of an event info word holding the network id.
pub const fn event_nid(info: u32) -> u8 {
    ((info >> 16) & 0xff) as u8
}

/// The queue the driver uses for each UAPI priority (low, normal, high).
pub const QUEUE_FOR_PRIORITY: [usize; 3] = [3, 4, 5];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map() {
        assert_eq!(tq_reg(4, tq::ADDR), 0x21000 + 4 * 0x148 + 0x134);
        assert!(tq_reg(TQ_COUNT - 1, tq::ADDR) + 4 <= ENGINE_WINDOW);
        assert!(tm_reg(mgr::IRQ_EN2) < TQ_BASE);
        assert_eq!(size_field(0x274), ((0x274 / 4) - 1) << 16);
        assert_eq!(size_field(0), 0);
        assert_eq!(event_nid(0x0140_0000), 0x40);
    }
}
