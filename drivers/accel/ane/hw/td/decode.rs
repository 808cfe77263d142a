// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Walking a program's TD chain and decoding each TD's streams into a
//! register image.
//!
//! The hardware starts at offset 0 of the command buffer, runs `td_count`
//! TDs of `td_size` bytes, and finds TD k+1 at the NextPointer (a byte offset
//! into the same buffer) of TD k. Inside a TD it walks stream headers from
//! offset 0x28 to the end of the TD: every word there is either a stream
//! header or a register value.
//!
//! The decoder never trusts the bytes: every read is bounds-checked, every
//! step of the chain must move forward inside the program (so a walk always
//! ends), and every register written must belong to a known block window.

use super::error::{ChainFault, TdError};
use super::header::Header;
use super::regs::{Block, Reg, IMAGE_WORDS};
use super::{read_le32, HEADER_SIZE, MAX_TD_COUNT, MAX_TD_SIZE, MIN_TD_SIZE};

/// A stream header word: `(nwords - 1) << 26 | hardware byte address`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamHeader(
    /// The raw word.
    pub u32,
);

impl StreamHeader {
    /// Largest number of words one stream can carry.
    pub const MAX_WORDS: u32 = 64;
    /// Bits of the word that hold the address.
    pub const ADDR_MASK: u32 = 0x03FF_FFFF;

    /// The header of a stream of `words` words (1..=64) starting at `addr`.
    pub const fn new(addr: u32, words: u32) -> Option<StreamHeader> {
        if words == 0 || words > Self::MAX_WORDS || addr & !Self::ADDR_MASK != 0 {
            return None;
        }
        Some(StreamHeader((words.wrapping_sub(1) << 26) | addr))
    }

    /// The header of a stream that writes the whole known window of `block`.
    pub const fn full(block: Block) -> StreamHeader {
        StreamHeader(block.full_stream_header())
    }

    /// Number of register words that follow (1..=64).
    pub const fn words(self) -> u32 {
        // At most 63 + 1.
        (self.0 >> 26).wrapping_add(1)
    }

    /// Hardware byte address of the first register written.
    pub const fn addr(self) -> u32 {
        self.0 & Self::ADDR_MASK
    }

    /// Bytes the stream occupies in the TD, header included.
    pub const fn byte_len(self) -> u32 {
        // At most 65 words.
        self.words().wrapping_add(1).wrapping_mul(4)
    }
}

/// One stream of a TD, known to lie entirely inside it.
#[derive(Clone, Copy, Debug)]
pub struct Stream<'a> {
    /// Byte offset of the stream header in the TD.
    pub offset: u32,
    /// The stream header.
    pub header: StreamHeader,
    data: &'a [u8],
}

impl<'a> Stream<'a> {
    /// The (hardware address, value) pairs the stream writes, in order.
    pub fn writes(&self) -> impl Iterator<Item = (u32, u32)> + 'a {
        let addr = self.header.addr();
        self.data
            .chunks_exact(4)
            .zip(0u32..)
            .filter_map(move |(c, i)| {
                let v = u32::from_le_bytes(c.try_into().ok()?);
                Some((addr.wrapping_add(i.wrapping_mul(4)), v))
            })
    }
}

/// Iterator over the streams of one TD. It stops after the first error.
#[derive(Clone, Debug)]
pub struct StreamIter<'a> {
    td: &'a [u8],
    index: u32,
    pos: usize,
    failed: bool,
}

impl<'a> StreamIter<'a> {
    /// Reads the stream at the current position and moves past it.
    fn step(&mut self) -> Result<Stream<'a>, TdError> {
        let offset = u32::try_from(self.pos).unwrap_or(u32::MAX);
        let raw = read_le32(self.td, self.pos);
        let header = StreamHeader(raw.unwrap_or(0));
        let overrun = TdError::StreamOverrun {
            td: self.index,
            offset,
            header: header.0,
        };
        // A partial word at the end counts as a stream running past it.
        raw.ok_or(overrun)?;
        let start = self.pos.checked_add(4).ok_or(overrun)?;
        let len = usize::try_from(header.words())
            .ok()
            .and_then(|w| w.checked_mul(4))
            .ok_or(overrun)?;
        let end = start.checked_add(len).ok_or(overrun)?;
        let data = self.td.get(start..end).ok_or(overrun)?;
        if header.addr() % 4 != 0 {
            return Err(TdError::StreamUnaligned {
                td: self.index,
                offset,
                header: header.0,
            });
        }
        self.pos = end;
        Ok(Stream {
            offset,
            header,
            data,
        })
    }
}

impl<'a> Iterator for StreamIter<'a> {
    type Item = Result<Stream<'a>, TdError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.td.len() {
            return None;
        }
        let res = self.step();
        if res.is_err() {
            self.failed = true;
        }
        Some(res)
    }
}

/// A set of registers of a register image (one bit per image word).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegMask {
    bits: [u64; 3],
}

impl RegMask {
    /// The empty set.
    pub const fn new() -> RegMask {
        RegMask { bits: [0; 3] }
    }

    #[inline]
    fn locate(index: usize) -> Option<(usize, u32)> {
        if index >= IMAGE_WORDS {
            return None;
        }
        Some((index / 64, u32::try_from(index % 64).ok()?))
    }

    /// Image words `start..start + len` (those below [`IMAGE_WORDS`]).
    #[inline]
    pub fn range(start: usize, len: usize) -> RegMask {
        // The bits below bit `n` of a word (`n` ≤ 64).
        const fn below(n: usize) -> u64 {
            if n >= 64 {
                u64::MAX
            } else {
                (1u64 << n).wrapping_sub(1)
            }
        }
        let end = start.saturating_add(len).min(IMAGE_WORDS);
        let mut m = RegMask::new();
        let mut lo = 0usize;
        for word in m.bits.iter_mut() {
            // The part of `start..end` in this word, as bit positions 0..=64.
            let a = start.saturating_sub(lo);
            let b = end.saturating_sub(lo);
            *word = below(b) & !below(a);
            lo = lo.saturating_add(64);
        }
        m
    }

    /// The lowest image word in both sets, if any.
    #[inline]
    pub fn first_common(&self, other: &RegMask) -> Option<usize> {
        (0usize..)
            .step_by(64)
            .zip(self.bits.iter().zip(other.bits.iter()))
            .find_map(|(lo, (a, b))| {
                let both = a & b;
                if both == 0 {
                    None
                } else {
                    usize::try_from(both.trailing_zeros())
                        .ok()
                        .and_then(|t| lo.checked_add(t))
                }
            })
    }

    /// Adds every word of `other`.
    #[inline]
    pub fn union_with(&mut self, other: &RegMask) {
        for (a, b) in self.bits.iter_mut().zip(other.bits.iter()) {
            *a |= *b;
        }
    }

    /// Adds image word `index`; returns whether it was already present.
    pub fn insert_index(&mut self, index: usize) -> bool {
        let Some((w, b)) = Self::locate(index) else {
            return false;
        };
        match self.bits.get_mut(w) {
            Some(word) => {
                let bit = 1u64.checked_shl(b).unwrap_or(0);
                let had = *word & bit != 0;
                *word |= bit;
                had
            }
            None => false,
        }
    }

    /// Whether image word `index` is in the set.
    #[inline]
    pub fn contains_index(&self, index: usize) -> bool {
        match Self::locate(index) {
            Some((w, b)) => self
                .bits
                .get(w)
                .is_some_and(|word| word & 1u64.checked_shl(b).unwrap_or(0) != 0),
            None => false,
        }
    }

    /// Whether `reg` is in the set.
    pub fn contains(&self, reg: Reg) -> bool {
        reg.image_index().is_some_and(|i| self.contains_index(i))
    }

    /// Number of registers in the set.
    pub fn count(&self) -> u32 {
        self.bits.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|w| *w == 0)
    }

    /// Number of registers of `block` in the set.
    pub fn count_in(&self, block: Block) -> u32 {
        let start = block.image_start();
        let mut n = 0u32;
        for i in 0..block.words() {
            if let Ok(i) = usize::try_from(i) {
                if start.checked_add(i).is_some_and(|j| self.contains_index(j)) {
                    n = n.saturating_add(1);
                }
            }
        }
        n
    }
}

/// The register file of every known block: one value per register of each
/// block window, and which registers have been written.
///
/// It is what the engine holds after a sequence of TDs, independent of the
/// order in which streams came: decode any number of TDs into the same
/// image to model the state that persists across TDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegImage {
    words: [u32; IMAGE_WORDS],
    written: RegMask,
}

impl Default for RegImage {
    fn default() -> Self {
        Self::new()
    }
}

impl RegImage {
    /// An image in which nothing has been written (every value reads 0).
    pub const fn new() -> RegImage {
        RegImage {
            words: [0; IMAGE_WORDS],
            written: RegMask::new(),
        }
    }

    /// The value of `reg`, if it has been written.
    #[inline]
    pub fn get(&self, reg: Reg) -> Option<u32> {
        let i = reg.image_index()?;
        if self.written.contains_index(i) {
            self.words.get(i).copied()
        } else {
            None
        }
    }

    /// The value of `reg`, 0 if it has never been written.
    pub fn value(&self, reg: Reg) -> u32 {
        self.get(reg).unwrap_or(0)
    }

    /// Whether `reg` has been written.
    pub fn is_written(&self, reg: Reg) -> bool {
        self.written.contains(reg)
    }

    /// The set of written registers.
    pub fn written(&self) -> &RegMask {
        &self.written
    }

    /// Writes `value` to image word `index` (of a register known to be
    /// inside its block's window: [`Reg::image_index`]).
    fn set_index(&mut self, index: usize, value: u32) {
        if let Some(w) = self.words.get_mut(index) {
            *w = value;
            self.written.insert_index(index);
        }
    }

    /// Writes the little-endian words of `data` to image words `start..`
    /// (a whole stream into one block's window, [`Td::decode_into`]);
    /// `mask` is [`RegMask::range`] of those words. Words past the image
    /// are dropped (the caller checked there are none).
    fn set_words(&mut self, start: usize, data: &[u8], mask: &RegMask) {
        if let Some(words) = self.words.get_mut(start..) {
            for (w, c) in words.iter_mut().zip(data.chunks_exact(4)) {
                *w = u32::from_le_bytes(c.try_into().unwrap_or([0; 4]));
            }
        }
        self.written.union_with(mask);
    }

    /// Writes `value` to `reg`; returns false (and does nothing) if `reg` is
    /// not inside its block's window.
    pub fn set(&mut self, reg: Reg, value: u32) -> bool {
        let Some(i) = reg.image_index() else {
            return false;
        };
        match self.words.get_mut(i) {
            Some(w) => {
                *w = value;
                self.written.insert_index(i);
                true
            }
            None => false,
        }
    }

    /// The values of `block`'s window, in address order (unwritten ones
    /// read 0).
    pub fn block_words(&self, block: Block) -> &[u32] {
        let start = block.image_start();
        let len = usize::try_from(block.words()).unwrap_or(0);
        start
            .checked_add(len)
            .and_then(|end| self.words.get(start..end))
            .unwrap_or(&[])
    }

    /// Writes every register `other` has written into `self`.
    pub fn apply(&mut self, other: &RegImage) {
        for (i, (dst, src)) in self.words.iter_mut().zip(other.words.iter()).enumerate() {
            if other.written.contains_index(i) {
                *dst = *src;
                self.written.insert_index(i);
            }
        }
    }

    /// Forgets every register.
    pub fn clear(&mut self) {
        *self = RegImage::new();
    }
}

/// One task descriptor: `td_size` bytes, header then streams.
#[derive(Clone, Copy, Debug)]
pub struct Td<'a> {
    index: u32,
    offset: u32,
    bytes: &'a [u8],
}

impl<'a> Td<'a> {
    /// The TD held in `bytes` (all of it, header and streams), numbered
    /// `index` and found at byte `offset` of its program.
    pub fn new(bytes: &'a [u8], index: u32, offset: u32) -> Td<'a> {
        Td {
            index,
            offset,
            bytes,
        }
    }

    /// Position of the TD in the chain, from 0.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Byte offset of the TD in the program.
    pub fn offset(&self) -> u32 {
        self.offset
    }

    /// The TD's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The header words (all zero if the TD is shorter than a header).
    pub fn header(&self) -> Header {
        Header::from_bytes(self.bytes).unwrap_or_default()
    }

    /// Bytes before the first stream: the header, and the extra word that
    /// follows it when W9 asks for one ([`super::header_len_words`]).
    pub fn header_len(&self) -> usize {
        // W9 alone (0 when the TD is shorter than a header, as `header`).
        let w9 = if self.bytes.len() >= super::HEADER_WORDS * 4 {
            read_le32(self.bytes, (super::HEADER_WORDS - 1) * 4).unwrap_or(0)
        } else {
            0
        };
        4 * super::header_len_words(w9)
    }

    /// The streams, in TD order.
    pub fn streams(&self) -> StreamIter<'a> {
        self.streams_after(self.header_len())
    }

    /// The streams, the first at byte `header_len` ([`Td::header_len`]).
    fn streams_after(&self, header_len: usize) -> StreamIter<'a> {
        StreamIter {
            td: self.bytes,
            index: self.index,
            // A TD shorter than its header has no streams; the header read
            // fails instead.
            pos: if self.bytes.len() >= header_len {
                header_len
            } else {
                self.bytes.len()
            },
            failed: false,
        }
    }

    /// Writes every register the TD's streams carry into `image`, checking
    /// each stream. Returns the set of registers this TD wrote.
    ///
    /// On error, `image` may hold part of the TD's writes.
    pub fn decode_into(&self, image: &mut RegImage) -> Result<RegMask, TdError> {
        let header_len = self.header_len();
        if self.bytes.len() < usize::try_from(HEADER_SIZE).unwrap_or(usize::MAX)
            || self.bytes.len() < header_len
        {
            return Err(TdError::StreamOverrun {
                td: self.index,
                offset: 0,
                header: 0,
            });
        }
        let mut mine = RegMask::new();
        for stream in self.streams_after(header_len) {
            let stream = stream?;
            // A stream's words are consecutive registers: when they all lie
            // in one block's window (every stream a compiler writes), the
            // block is looked up once for the whole stream (a TD carries
            // hundreds of words, and every PROGRAM_CREATE decodes every
            // TD); otherwise word by word, for the error that names the
            // first unknown one.
            let first = stream.header.addr();
            let bytes = u32::try_from(stream.data.len()).unwrap_or(u32::MAX);
            let whole = Reg::from_addr(first).filter(|r| {
                r.offset
                    .checked_add(bytes)
                    .is_some_and(|end| end <= r.block.window_bytes())
            });
            if let Some((reg, start)) = whole.and_then(|r| Some((r, r.image_index()?))) {
                // The whole stream at once: its words as one range of the
                // image, checked against what this TD wrote already with
                // one mask operation (the first register written twice, in
                // stream order, is the lowest index of the overlap).
                let range = RegMask::range(start, stream.data.len() / 4);
                if let Some(index) = mine.first_common(&range) {
                    let k = u32::try_from(index.saturating_sub(start)).unwrap_or(u32::MAX);
                    return Err(TdError::DuplicateRegister {
                        td: self.index,
                        offset: stream.offset,
                        reg: Reg {
                            block: reg.block,
                            offset: reg.offset.wrapping_add(k.wrapping_mul(4)),
                        },
                    });
                }
                mine.union_with(&range);
                image.set_words(start, stream.data, &range);
                continue;
            }
            for (addr, value) in stream.writes() {
                let unknown = TdError::UnknownRegister {
                    td: self.index,
                    offset: stream.offset,
                    header: stream.header.0,
                    addr,
                };
                let reg = Reg::from_addr(addr).ok_or(unknown)?;
                let index = reg.image_index().ok_or(unknown)?;
                if mine.insert_index(index) {
                    return Err(TdError::DuplicateRegister {
                        td: self.index,
                        offset: stream.offset,
                        reg,
                    });
                }
                image.set_index(index, value);
            }
        }
        Ok(mine)
    }

    /// The registers this TD writes, on their own.
    pub fn decode(&self) -> Result<RegImage, TdError> {
        let mut image = RegImage::new();
        self.decode_into(&mut image)?;
        Ok(image)
    }
}

/// A program: the bytes of a command buffer holding a chain of `td_count`
/// TDs of `td_size` bytes each, the first at offset 0.
#[derive(Clone, Copy, Debug)]
pub struct Program<'a> {
    bytes: &'a [u8],
    td_size: u32,
    td_count: u32,
}

impl<'a> Program<'a> {
    /// Checks the TD size and count and that the bytes can hold that many
    /// TDs. Nothing else is looked at yet.
    pub fn new(bytes: &'a [u8], td_size: u32, td_count: u32) -> Result<Program<'a>, TdError> {
        if td_size % 4 != 0 || !(MIN_TD_SIZE..=MAX_TD_SIZE).contains(&td_size) {
            return Err(TdError::TdSize { td_size });
        }
        if td_count == 0 || td_count > MAX_TD_COUNT {
            return Err(TdError::TdCount { td_count });
        }
        let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        // td_count < 2^16 and td_size < 2^12: no overflow in u64.
        let needed = u64::from(td_count).saturating_mul(u64::from(td_size));
        if needed > len {
            return Err(TdError::ProgramTooShort { needed, len });
        }
        Ok(Program {
            bytes,
            td_size,
            td_count,
        })
    }

    /// The program's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Bytes per TD.
    pub fn td_size(&self) -> u32 {
        self.td_size
    }

    /// Number of TDs.
    pub fn td_count(&self) -> u32 {
        self.td_count
    }

    /// The TDs in chain order. The walk follows each NextPointer and stops
    /// with an error at the first link that is unaligned, does not move
    /// past the current TD, or leaves the program.
    pub fn tds(&self) -> TdIter<'a> {
        TdIter {
            bytes: self.bytes,
            td_size: self.td_size,
            remaining: self.td_count,
            index: 0,
            state: IterState::At(0),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum IterState {
    At(u32),
    Failed(TdError),
    Done,
}

/// Iterator over a program's TDs in chain order; see [`Program::tds`].
#[derive(Clone, Debug)]
pub struct TdIter<'a> {
    bytes: &'a [u8],
    td_size: u32,
    remaining: u32,
    index: u32,
    state: IterState,
}

impl<'a> TdIter<'a> {
    fn link(&self, td: &Td<'a>) -> Result<u32, TdError> {
        let next = td.header().next_pointer();
        let err = |fault| TdError::Chain {
            td: td.index,
            fault,
        };
        if next % 4 != 0 {
            return Err(err(ChainFault::NextPointerUnaligned { next }));
        }
        let end = u64::from(td.offset).saturating_add(u64::from(self.td_size));
        if u64::from(next) < end {
            return Err(err(ChainFault::NextPointerBackwards { next }));
        }
        let len = u64::try_from(self.bytes.len()).unwrap_or(u64::MAX);
        if u64::from(next).saturating_add(u64::from(self.td_size)) > len {
            return Err(err(ChainFault::NextPointerOutside { next, len }));
        }
        Ok(next)
    }
}

impl<'a> Iterator for TdIter<'a> {
    type Item = Result<Td<'a>, TdError>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = match self.state {
            IterState::Done => return None,
            IterState::Failed(e) => {
                self.state = IterState::Done;
                return Some(Err(e));
            }
            IterState::At(offset) => offset,
        };
        if self.remaining == 0 {
            self.state = IterState::Done;
            return None;
        }
        let len = u64::try_from(self.bytes.len()).unwrap_or(u64::MAX);
        let slice = usize::try_from(offset).ok().and_then(|start| {
            let end = start.checked_add(usize::try_from(self.td_size).ok()?)?;
            self.bytes.get(start..end)
        });
        let Some(bytes) = slice else {
            // Only reachable for a TD 0 that does not fit, which
            // Program::new rules out; links are checked before use.
            self.state = IterState::Done;
            return Some(Err(TdError::ProgramTooShort {
                needed: u64::from(offset).saturating_add(u64::from(self.td_size)),
                len,
            }));
        };
        let td = Td::new(bytes, self.index, offset);
        self.remaining = self.remaining.saturating_sub(1);
        self.index = self.index.saturating_add(1);
        self.state = if self.remaining == 0 {
            IterState::Done
        } else {
            match self.link(&td) {
                Ok(next) => IterState::At(next),
                Err(e) => IterState::Failed(e),
            }
        };
        Some(Ok(td))
    }
}

#[cfg(test)]
mod tests {
    use super::super::regs::{common, pe};
    use super::*;

    fn push(buf: &mut [u8], pos: &mut usize, w: u32) {
        buf[*pos..*pos + 4].copy_from_slice(&w.to_le_bytes());
        *pos += 4;
    }

    #[test]
    fn stream_header_encoding() {
        let h = StreamHeader::full(Block::KernelDma);
        assert_eq!(h.0, 0xF401_F800);
        assert_eq!((h.words(), h.addr(), h.byte_len()), (62, 0x1F800, 0xFC));
        assert_eq!(StreamHeader::new(0x1F800, 18).unwrap().0, 0x4401_F800);
        assert_eq!(StreamHeader::new(0x1F8C8, 12).unwrap().0, 0x2C01_F8C8);
        assert!(StreamHeader::new(0, 0).is_none());
        assert!(StreamHeader::new(0, 65).is_none());
        assert!(StreamHeader::new(0x0400_0000, 1).is_none());
    }

    #[test]
    fn streams_in_any_order_give_one_image() {
        // Header, then PE (4 words) before Common InDim (1 word).
        let mut td = [0u8; 0x28 + 4 + 16 + 4 + 4];
        let mut p = 0x28;
        push(&mut td, &mut p, StreamHeader::full(Block::Pe).0);
        for v in [0x8_0004, 0x3C00_0000, 0x3C00_0000, 0x3F80_0000] {
            push(&mut td, &mut p, v);
        }
        push(&mut td, &mut p, StreamHeader::new(0, 1).unwrap().0);
        push(&mut td, &mut p, 0x1_0001);
        assert_eq!(p, td.len());
        let img = Td::new(&td, 0, 0).decode().unwrap();
        assert_eq!(img.get(pe::CFG), Some(0x8_0004));
        assert_eq!(img.get(pe::FINAL_SCALE), Some(0x3F80_0000));
        assert_eq!(img.get(common::IN_DIM), Some(0x1_0001));
        assert_eq!(img.get(common::OUT_DIM), None);
        assert_eq!(img.written().count(), 5);
        assert_eq!(img.written().count_in(Block::Pe), 4);
        assert_eq!(
            img.block_words(Block::Pe),
            &[0x8_0004, 0x3C00_0000, 0x3C00_0000, 0x3F80_0000]
        );

        // Persisting state: a second image applied over the first.
        let mut state = RegImage::new();
        state.set(common::IN_DIM, 7);
        state.set(common::CIN, 3);
        state.apply(&img);
        assert_eq!(state.get(common::IN_DIM), Some(0x1_0001));
        assert_eq!(state.get(common::CIN), Some(3));
        state.clear();
        assert!(state.written().is_empty());
    }

    #[test]
    fn stream_errors() {
        // A stream claiming 2 words with 1 left.
        let mut td = [0u8; 0x28 + 8];
        let mut p = 0x28;
        push(&mut td, &mut p, StreamHeader::new(0x8800, 2).unwrap().0);
        assert!(matches!(
            Td::new(&td, 3, 0).decode(),
            Err(TdError::StreamOverrun {
                td: 3,
                offset: 0x28,
                header: 0x0400_8800
            })
        ));
        let mut p = 0x28;
        push(&mut td, &mut p, 0x8802);
        assert!(matches!(
            Td::new(&td, 0, 0).decode(),
            Err(TdError::StreamUnaligned { .. })
        ));
        let mut p = 0x28;
        push(&mut td, &mut p, 0x8810);
        assert!(matches!(
            Td::new(&td, 0, 0).decode(),
            Err(TdError::UnknownRegister { addr: 0x8810, .. })
        ));
        // Twice the same register.
        let mut td = [0u8; 0x28 + 16];
        let mut p = 0x28;
        for _ in 0..2 {
            push(&mut td, &mut p, 0x8800);
            push(&mut td, &mut p, 1);
        }
        assert!(matches!(
            Td::new(&td, 0, 0).decode(),
            Err(TdError::DuplicateRegister { offset: 0x30, reg, .. }) if reg == pe::CFG
        ));
        // Too short for a header.
        assert!(Td::new(&td[..0x20], 0, 0).decode().is_err());
        assert_eq!(Td::new(&td[..0x20], 0, 0).streams().count(), 0);
    }

    /// `RegMask::range` (the duplicate check's mask of a whole stream) is
    /// exactly the words `start..start + len` below `IMAGE_WORDS`, one by
    /// one, for every start and length across the three 64-bit words.
    #[test]
    fn range_is_the_words_one_by_one() {
        for start in 0..IMAGE_WORDS + 4 {
            for len in 0..IMAGE_WORDS + 4 {
                let mut want = RegMask::new();
                for i in start..start + len {
                    want.insert_index(i);
                }
                assert_eq!(RegMask::range(start, len), want, "{start}+{len}");
            }
        }
        assert_eq!(RegMask::range(usize::MAX, 2), RegMask::new());
        assert_eq!(
            RegMask::range(1, usize::MAX).count(),
            IMAGE_WORDS as u32 - 1
        );
    }

    #[test]
    fn overlapping_streams_are_duplicates() {
        // PE's four words, then a two-word stream over its third and fourth
        // (both streams lie whole in one block: the block-wise path). The
        // error names the first register written twice, in the second
        // stream, and a stream that only touches what is left is fine.
        let mut td = [0u8; 0x28 + 20 + 12];
        let mut p = 0x28;
        push(&mut td, &mut p, StreamHeader::full(Block::Pe).0);
        for v in [1, 2, 3, 4] {
            push(&mut td, &mut p, v);
        }
        push(&mut td, &mut p, StreamHeader::new(0x8808, 2).unwrap().0);
        push(&mut td, &mut p, 5);
        push(&mut td, &mut p, 6);
        assert!(matches!(
            Td::new(&td, 2, 0).decode(),
            Err(TdError::DuplicateRegister { td: 2, offset: 0x3C, reg })
                if reg == Reg::new(Block::Pe, 8)
        ));
        // Common's first two words after PE: no overlap, all six written.
        let mut p = 0x3C;
        push(&mut td, &mut p, StreamHeader::new(0, 2).unwrap().0);
        let img = Td::new(&td, 2, 0).decode().unwrap();
        assert_eq!(img.written().count(), 6);
        assert_eq!(img.block_words(Block::Pe), &[1, 2, 3, 4]);
        assert_eq!(img.get(common::IN_DIM), Some(5));
        // Masks across the 64-bit words of a `RegMask`.
        let a = RegMask::range(60, 10);
        assert_eq!(a.count(), 10);
        assert!(a.contains_index(60) && a.contains_index(69) && !a.contains_index(70));
        assert_eq!(a.first_common(&RegMask::range(65, 80)), Some(65));
        assert_eq!(a.first_common(&RegMask::range(70, 5)), None);
        assert_eq!(RegMask::range(130, 64).count(), (IMAGE_WORDS - 130) as u32);
    }

    #[test]
    fn program_limits() {
        let buf = [0u8; 0x1000];
        assert!(matches!(
            Program::new(&buf, 0, 1),
            Err(TdError::TdSize { td_size: 0 })
        ));
        assert!(matches!(
            Program::new(&buf, 0x276, 1),
            Err(TdError::TdSize { .. })
        ));
        assert!(matches!(
            Program::new(&buf, 0x2C, 1),
            Err(TdError::TdSize { .. })
        ));
        assert!(matches!(
            Program::new(&buf, 0x804, 1),
            Err(TdError::TdSize { .. })
        ));
        assert!(Program::new(&buf, 0x800, 2).is_ok());
        assert!(matches!(
            Program::new(&buf, 0x274, 0),
            Err(TdError::TdCount { td_count: 0 })
        ));
        assert!(matches!(
            Program::new(&buf, 0x274, 0x1_0000),
            Err(TdError::TdCount { .. })
        ));
        assert!(matches!(
            Program::new(&buf, 0x274, 7),
            Err(TdError::ProgramTooShort {
                needed: 0x112C,
                len: 0x1000
            })
        ));
    }
}
