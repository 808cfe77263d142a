// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The ten-word TD header (W0..W9).
//!
//! Bit positions follow td.md §1.2 (Apple's register printer), which differs
//! from the struct layouts some other projects use for W6.

use super::regs::Field;
use super::{read_le32, HEADER_WORDS};

/// W0: TID.
pub const TID: Field = Field::new(0, 16);
/// W0: NID (network id; the driver's bootstrap copy forces 0x40).
pub const NID: Field = Field::new(16, 8);
/// W0: LNID (set on every TD after the first in compiled chains).
pub const LNID: Field = Field::new(24, 1);
/// W0: EON, end of network (set on the last TD of a chain).
pub const EON: Field = Field::new(25, 1);
/// W1: ExeCycles.
pub const EXE_CYCLES: Field = Field::new(0, 16);
/// W1: NextSize, the next TD's length in words minus one (0 on the last).
pub const NEXT_SIZE: Field = Field::new(16, 9);
/// W2..W5: the 24-bit LogEvents, Exceptions, DebugLogEvents and
/// DebugExceptions masks.
pub const EVENTS: Field = Field::new(0, 24);
/// W6: DisallowAbort.
pub const DISALLOW_ABORT: Field = Field::new(8, 1);
/// W6: TDSkip.
pub const TD_SKIP: Field = Field::new(9, 1);
/// W6: KPC.
pub const KPC: Field = Field::new(10, 1);
/// W6: SPL.
pub const SPL: Field = Field::new(11, 1);
/// W6: TSR.
pub const TSR: Field = Field::new(12, 1);
/// W6: SPC.
pub const SPC: Field = Field::new(13, 1);
/// W6: DPC.
pub const DPC: Field = Field::new(14, 1);
/// W6: TSE.
pub const TSE: Field = Field::new(15, 1);
/// W6: NextPriority.
pub const NEXT_PRIORITY: Field = Field::new(16, 6);
/// W6: TDE.
pub const TDE: Field = Field::new(24, 1);
/// W6: SrcLoc (the source comes from memory through tile DMA).
pub const SRC_LOC: Field = Field::new(28, 1);
/// W6: DstLoc (the result goes to memory through tile DMA).
pub const DST_LOC: Field = Field::new(29, 1);
/// W6: TQDis.
pub const TQ_DIS: Field = Field::new(31, 1);
/// W8: RBase0, BAR slot of tile DMA source 0.
pub const RBASE0: Field = Field::new(0, 5);
/// W8: RBE0, RBase0 enable.
pub const RBE0: Field = Field::new(5, 1);
/// W8: RBase1, BAR slot of tile DMA source 1.
pub const RBASE1: Field = Field::new(6, 5);
/// W8: RBE1.
pub const RBE1: Field = Field::new(11, 1);
/// W8: WBase, BAR slot of the tile DMA destination.
pub const WBASE: Field = Field::new(12, 5);
/// W8: WBE.
pub const WBE: Field = Field::new(17, 1);
/// W8: TBase (a BAR slot; its use is not known).
pub const TBASE: Field = Field::new(18, 5);
/// W8: TBE.
pub const TBE: Field = Field::new(23, 1);
/// W8: ENE (ActiveNE + 1 on neural-engine ops, 0 on planar ones).
pub const ENE: Field = Field::new(24, 3);
/// W9: KBase0, BAR slot of the kernel coefficients.
pub const KBASE0: Field = Field::new(0, 5);
/// W9: KBE0.
pub const KBE0: Field = Field::new(5, 1);

/// Bits of each header word that carry a documented field; everything else
/// is reserved and must be zero in a valid TD.
pub const KNOWN_BITS: [u32; HEADER_WORDS] = [
    0x03FF_FFFF, // W0: TID, NID, LNID, EON
    0x01FF_FFFF, // W1: ExeCycles, NextSize
    0x00FF_FFFF, // W2: LogEvents
    0x00FF_FFFF, // W3: Exceptions
    0x00FF_FFFF, // W4: DebugLogEvents
    0x00FF_FFFF, // W5: DebugExceptions
    0xB13F_FF00, // W6: flags 8..15, NextPriority, TDE, SrcLoc, DstLoc, TQDis
    0xFFFF_FFFF, // W7: NextPointer
    0x07FF_FFFF, // W8: RBase0/1, WBase, TBase and enables, ENE
    0x00FF_FFFF, // W9: KBase0..3 and enables
];

/// The ten header words of a TD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// W0..W9 as stored (little-endian in the TD).
    pub words: [u32; HEADER_WORDS],
}

impl Header {
    /// Reads the header from the first 0x28 bytes of `td`.
    #[inline]
    pub fn from_bytes(td: &[u8]) -> Option<Header> {
        let mut words = [0u32; HEADER_WORDS];
        for (i, w) in words.iter_mut().enumerate() {
            *w = read_le32(td, i.checked_mul(4)?)?;
        }
        Some(Header { words })
    }

    /// Header word `i` (W0..W9); 0 for `i` ≥ 10.
    pub fn word(&self, i: usize) -> u32 {
        self.words.get(i).copied().unwrap_or(0)
    }

    /// Reserved bits that are set in word `i`.
    pub fn reserved_bits(&self, i: usize) -> u32 {
        self.word(i) & !KNOWN_BITS.get(i).copied().unwrap_or(0)
    }

    /// TID (W0).
    pub fn tid(&self) -> u32 {
        TID.get(self.word(0))
    }
    /// NID (W0).
    pub fn nid(&self) -> u32 {
        NID.get(self.word(0))
    }
    /// LNID (W0).
    pub fn lnid(&self) -> bool {
        LNID.is_set(self.word(0))
    }
    /// EON, end of network (W0).
    pub fn eon(&self) -> bool {
        EON.is_set(self.word(0))
    }
    /// ExeCycles (W1).
    pub fn exe_cycles(&self) -> u32 {
        EXE_CYCLES.get(self.word(1))
    }
    /// NextSize (W1): the next TD's length in words minus one.
    pub fn next_size(&self) -> u32 {
        NEXT_SIZE.get(self.word(1))
    }
    /// LogEvents (W2).
    pub fn log_events(&self) -> u32 {
        EVENTS.get(self.word(2))
    }
    /// Exceptions (W3).
    pub fn exceptions(&self) -> u32 {
        EVENTS.get(self.word(3))
    }
    /// DebugLogEvents (W4).
    pub fn debug_log_events(&self) -> u32 {
        EVENTS.get(self.word(4))
    }
    /// DebugExceptions (W5).
    pub fn debug_exceptions(&self) -> u32 {
        EVENTS.get(self.word(5))
    }
    /// DisallowAbort (W6).
    pub fn disallow_abort(&self) -> bool {
        DISALLOW_ABORT.is_set(self.word(6))
    }
    /// TDSkip (W6).
    pub fn td_skip(&self) -> bool {
        TD_SKIP.is_set(self.word(6))
    }
    /// KPC (W6).
    pub fn kpc(&self) -> bool {
        KPC.is_set(self.word(6))
    }
    /// SPL (W6).
    pub fn spl(&self) -> bool {
        SPL.is_set(self.word(6))
    }
    /// TSR (W6).
    pub fn tsr(&self) -> bool {
        TSR.is_set(self.word(6))
    }
    /// SPC (W6).
    pub fn spc(&self) -> bool {
        SPC.is_set(self.word(6))
    }
    /// DPC (W6).
    pub fn dpc(&self) -> bool {
        DPC.is_set(self.word(6))
    }
    /// TSE (W6).
    pub fn tse(&self) -> bool {
        TSE.is_set(self.word(6))
    }
    /// NextPriority (W6).
    pub fn next_priority(&self) -> u32 {
        NEXT_PRIORITY.get(self.word(6))
    }
    /// TDE (W6).
    pub fn tde(&self) -> bool {
        TDE.is_set(self.word(6))
    }
    /// SrcLoc (W6): the input comes from memory.
    pub fn src_loc(&self) -> bool {
        SRC_LOC.is_set(self.word(6))
    }
    /// DstLoc (W6): the output goes to memory.
    pub fn dst_loc(&self) -> bool {
        DST_LOC.is_set(self.word(6))
    }
    /// TQDis (W6).
    pub fn tq_dis(&self) -> bool {
        TQ_DIS.is_set(self.word(6))
    }
    /// NextPointer (W7): byte offset of the next TD in the command buffer.
    pub fn next_pointer(&self) -> u32 {
        self.word(7)
    }
    /// The BAR slot tile DMA source `i` (0 or 1) reads, if its enable
    /// (RBE0/RBE1) is set.
    pub fn rbase(&self, i: u32) -> Option<u8> {
        let (base, en) = match i {
            0 => (RBASE0, RBE0),
            1 => (RBASE1, RBE1),
            _ => return None,
        };
        Self::slot(self.word(8), base, en)
    }
    /// The BAR slot the tile DMA destination writes, if WBE is set.
    pub fn wbase(&self) -> Option<u8> {
        Self::slot(self.word(8), WBASE, WBE)
    }
    /// The BAR slot in TBase, if TBE is set.
    pub fn tbase(&self) -> Option<u8> {
        Self::slot(self.word(8), TBASE, TBE)
    }
    /// ENE (W8).
    pub fn ene(&self) -> u32 {
        ENE.get(self.word(8))
    }
    /// The BAR slot in KBase`i` (0..3), if its enable KBE`i` is set.
    pub fn kbase(&self, i: u32) -> Option<u8> {
        if i >= 4 {
            return None;
        }
        // KBase i sits at bit 6·i, its enable right above it.
        let shift = i.checked_mul(6)?;
        let base = Field::new(shift, 5);
        let en = Field::new(shift.checked_add(5)?, 1);
        Self::slot(self.word(9), base, en)
    }

    fn slot(word: u32, base: Field, en: Field) -> Option<u8> {
        if en.is_set(word) {
            u8::try_from(base.get(word)).ok()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_documented_samples() {
        // concat TD0 and TD1 (td.md §1.4).
        let mut h = Header {
            words: [
                0,
                0x9C_0000,
                0x400,
                0,
                0x68,
                0,
                0x3000_9800,
                0x300,
                0x0582_4026,
                0,
            ],
        };
        assert_eq!((h.tid(), h.nid(), h.lnid(), h.eon()), (0, 0, false, false));
        assert_eq!(h.next_size(), 0x9C);
        assert_eq!(h.next_pointer(), 0x300);
        assert_eq!(h.rbase(0), Some(6));
        assert_eq!(h.rbase(1), None);
        assert_eq!(h.wbase(), Some(4));
        assert_eq!(h.tbase(), Some(0));
        assert_eq!(h.ene(), 5);
        assert!(h.spl() && h.tsr() && h.tse() && h.src_loc() && h.dst_loc());
        assert!(!h.tq_dis() && !h.kpc() && !h.tde());
        h.words[0] = 0x0300_0001;
        assert_eq!((h.tid(), h.lnid(), h.eon()), (1, true, true));
        // conv: W9 = 0x21 is KBase0 = 1, enabled.
        h.words[9] = 0x21;
        assert_eq!(h.kbase(0), Some(1));
        assert_eq!(h.kbase(1), None);
        assert_eq!(h.kbase(4), None);
        h.words[9] = 0x00FF_FFFF;
        assert_eq!(h.kbase(3), Some(31));
        for i in 0..HEADER_WORDS {
            assert_eq!(h.reserved_bits(i), 0, "W{i}");
        }
        h.words[6] = 0x4000_0000;
        assert_eq!(h.reserved_bits(6), 0x4000_0000);
        assert_eq!(h.word(10), 0);
    }

    #[test]
    fn from_bytes_needs_40_bytes() {
        let bytes = [0xAAu8; 0x28];
        let h = Header::from_bytes(&bytes).unwrap();
        assert_eq!(h.words, [0xAAAA_AAAA; 10]);
        assert!(Header::from_bytes(&bytes[..0x27]).is_none());
    }
}
