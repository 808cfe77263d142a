// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Whole-program validation, run once when a program is created.
//!
//! [`Program::validate`] walks the TD chain, checks every header and stream,
//! replays the register writes into one register image (state persists
//! across TDs), and for every TD works out which BAR slots its DMAs touch
//! and how far into each slot they reach. The result, a fixed-size
//! [`ProgramSummary`], lets the submit path check each bound buffer with
//! [`ProgramSummary::check_buffers`] without looking at the TDs again.
//!
//! The rules, and why:
//!
//! - Header reserved bits must be clear and the chain must be well formed:
//!   NextSize announces a TD of the program's size on every TD but the
//!   last, which has EON set and links nowhere. The engine would fetch a
//!   longer next TD than the one validated otherwise.
//! - Every stream lies inside its TD, writes only known registers, and no
//!   register twice in one TD.
//! - A register that decides where a DMA goes must have been written by
//!   this TD or an earlier one of the program; otherwise its value would be
//!   whatever the previous program left. This covers every coefficient and
//!   extra kernel DMA configuration word (so the set of enabled channels is
//!   known), the tile DMA destination configuration, and the shape, format,
//!   base and stride registers of each DMA that runs.
//! - Tile DMA source `i` reads BAR slot RBase`i` when RBE`i` is set. The
//!   destination is taken to write slot WBase when WBE, DstLoc or the
//!   destination's DMA enable is set (any of them, to stay on the safe
//!   side); writing the command (0) or kernel (1) slot is refused. The
//!   kernel DMA reads every enabled KBase slot, up to the furthest enabled
//!   channel's base + size (which KBase a channel uses is not known).
//! - The furthest byte a tile DMA touches is
//!   `base + (C-1)·plane + (H-1)·row + (D-1)·depth + (G-1)·group + row`,
//!   where `row` is the width times the element size (times the interleave
//!   factor, when larger than one) rounded up to the 64-byte DMA granule.
//!   For every compiled sample this equals the buffer size the compiler
//!   recorded. All arithmetic is checked, and nothing may reach past 4 GiB.
//! - TBase (with TBE) is recorded but not sized: its use is unknown, and
//!   compiled programs set it to slot 0.

use core::fmt;

use super::decode::{Program, RegImage, Td};
use super::error::{ChainFault, Dma, TdError};
use super::header::{Header, WBASE};
use super::regs::{
    common, kdma, tile_dst, tile_src, ChCfg, Channels, CoeffDmaConfig, DataFormat, Dim, DmaAddr,
    GroupConvCfg, Reg, TileDstDmaConfig, TileFmt,
};
use super::{BAR_SLOTS, DMA_GRANULE, HEADER_WORDS, SLOT_COMMAND, SLOT_KERNEL};

/// No DMA may reach past this many bytes from its slot's base: BARs and
/// offsets are 32-bit device addresses.
pub const MAX_DMA_EXTENT: u64 = 1 << 32;

/// How a program uses one BAR slot (a set of flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotUsage(
    /// The flag bits.
    pub u8,
);

impl SlotUsage {
    /// Not used.
    pub const NONE: SlotUsage = SlotUsage(0);
    /// Holds the TD chain (slot 0).
    pub const COMMAND: SlotUsage = SlotUsage(1);
    /// Read by a tile DMA source.
    pub const TILE_READ: SlotUsage = SlotUsage(2);
    /// Written by the tile DMA destination.
    pub const TILE_WRITE: SlotUsage = SlotUsage(4);
    /// Read by the kernel (coefficient) DMA.
    pub const KERNEL_READ: SlotUsage = SlotUsage(8);
    /// Named by TBase with TBE set (use unknown; not sized).
    pub const TBASE: SlotUsage = SlotUsage(16);

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: SlotUsage) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets of flags.
    pub const fn union(self, other: SlotUsage) -> SlotUsage {
        SlotUsage(self.0 | other.0)
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for SlotUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(SlotUsage, &str); 5] = [
            (SlotUsage::COMMAND, "command"),
            (SlotUsage::TILE_READ, "tile-read"),
            (SlotUsage::TILE_WRITE, "tile-write"),
            (SlotUsage::KERNEL_READ, "kernel-read"),
            (SlotUsage::TBASE, "tbase"),
        ];
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("unused")?;
        }
        Ok(())
    }
}

/// A set of BAR slots (bit n = slot n).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotMask(
    /// The bits.
    pub u32,
);

impl SlotMask {
    fn bit(slot: u8) -> u32 {
        1u32.checked_shl(u32::from(slot)).unwrap_or(0)
    }

    /// Whether `slot` is in the set.
    pub fn contains(self, slot: u8) -> bool {
        self.0 & Self::bit(slot) != 0
    }

    /// Adds `slot` (slots ≥ 32 are ignored).
    pub fn insert(&mut self, slot: u8) {
        self.0 |= Self::bit(slot);
    }

    /// Removes `slot`.
    pub fn remove(&mut self, slot: u8) {
        self.0 &= !Self::bit(slot);
    }

    /// Number of slots in the set.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The slots in the set, in increasing order.
    pub fn iter(self) -> impl Iterator<Item = u8> {
        (0u8..32).filter(move |&s| self.contains(s))
    }
}

/// What one BAR slot is used for and how large its buffer must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotInfo {
    /// How the program uses the slot.
    pub usage: SlotUsage,
    /// Smallest buffer (in bytes, from the slot's base) that covers every
    /// DMA extent of the program into this slot. For slot 0 it also covers
    /// the TD chain.
    pub min_size: u64,
}

/// The result of validating a program: fixed size, no allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramSummary {
    /// Bytes per TD.
    pub td_size: u32,
    /// Number of TDs.
    pub td_count: u32,
    /// End of the furthest TD, in bytes from the program's start.
    pub span: u64,
    /// Per BAR slot usage and minimum size.
    pub slots: [SlotInfo; BAR_SLOTS],
    /// Slots other than 0 and 1 that the program reads before (or without)
    /// writing them: its inputs.
    pub inputs: SlotMask,
    /// Slots whose last access in the program is a write: its outputs.
    pub outputs: SlotMask,
    touched: SlotMask,
    /// Slots with any usage: [`ProgramSummary::used`], kept as the slots
    /// are noted (EXEC asks for it every time).
    used: SlotMask,
}

impl ProgramSummary {
    fn new(td_size: u32, td_count: u32) -> ProgramSummary {
        ProgramSummary {
            td_size,
            td_count,
            span: 0,
            slots: [SlotInfo::default(); BAR_SLOTS],
            inputs: SlotMask(0),
            outputs: SlotMask(0),
            touched: SlotMask(0),
            used: SlotMask(0),
        }
    }

    /// The information for `slot`, `None` for slots ≥ 32.
    pub fn slot(&self, slot: u8) -> Option<&SlotInfo> {
        self.slots.get(usize::from(slot))
    }

    /// Slots whose usage has every flag of `usage`.
    pub fn with_usage(&self, usage: SlotUsage) -> SlotMask {
        let mut m = SlotMask(0);
        for (slot, info) in (0u8..).zip(self.slots.iter()) {
            if !info.usage.is_empty() && info.usage.contains(usage) {
                m.insert(slot);
            }
        }
        m
    }

    /// Every slot the program uses: those with any usage (the same as
    /// `with_usage(SlotUsage::NONE)`, without the scan of 32 slots).
    pub fn used(&self) -> SlotMask {
        self.used
    }

    /// Slots read by a tile DMA source.
    pub fn tile_reads(&self) -> SlotMask {
        self.with_usage(SlotUsage::TILE_READ)
    }

    /// Slots written by the tile DMA destination.
    pub fn tile_writes(&self) -> SlotMask {
        self.with_usage(SlotUsage::TILE_WRITE)
    }

    /// Slots read by the kernel DMA (weights).
    pub fn kernel_reads(&self) -> SlotMask {
        self.with_usage(SlotUsage::KERNEL_READ)
    }

    /// Slots written and then read again, whose last access is a read:
    /// intermediate buffers.
    pub fn scratch(&self) -> SlotMask {
        SlotMask(self.tile_writes().0 & !self.outputs.0)
    }

    /// Checks that the buffer bound to each slot (`sizes[n]` bytes for slot
    /// n, 0 when nothing is bound) covers what the program needs.
    pub fn check_buffers(&self, sizes: &[u64; BAR_SLOTS]) -> Result<(), BufferError> {
        for ((slot, info), &bound) in (0u8..).zip(self.slots.iter()).zip(sizes.iter()) {
            if bound < info.min_size {
                return Err(BufferError {
                    slot,
                    required: info.min_size,
                    bound,
                });
            }
        }
        Ok(())
    }

    /// Checks the program's own slots against the private copy the kernel
    /// makes of it: every DMA extent on slot 0 (the task stream) must stay
    /// within the `stream` bytes copied from the stream, and every extent on
    /// slot 1 (the weights) within the `weights` bytes copied from the
    /// weights. Past them the engine would read into the guard gap and
    /// fault the DART, which a client must not be able to do on purpose.
    pub fn check_private(&self, stream: u64, weights: u64) -> Result<(), BufferError> {
        let mut sizes = [u64::MAX; BAR_SLOTS];
        sizes[usize::from(SLOT_COMMAND)] = stream;
        sizes[usize::from(SLOT_KERNEL)] = weights;
        self.check_buffers(&sizes)
    }

    /// Records an access of `slot`. Within a TD, reads are noted before the
    /// write, as the engine reads its sources before storing the result.
    fn note(&mut self, slot: u8, usage: SlotUsage, size: u64, access: Option<Access>) {
        if let Some(info) = self.slots.get_mut(usize::from(slot)) {
            info.usage = info.usage.union(usage);
            info.min_size = info.min_size.max(size);
            if !info.usage.is_empty() {
                self.used.insert(slot);
            }
        }
        match access {
            Some(Access::Read) => {
                if !self.touched.contains(slot) && slot != SLOT_COMMAND && slot != SLOT_KERNEL {
                    self.inputs.insert(slot);
                }
                self.touched.insert(slot);
                self.outputs.remove(slot);
            }
            Some(Access::Write) => {
                self.touched.insert(slot);
                self.outputs.insert(slot);
            }
            None => {}
        }
    }
}

impl fmt::Display for ProgramSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} TD(s) of {:#x} bytes spanning {:#x}",
            self.td_count, self.td_size, self.span
        )?;
        for (slot, info) in (0u8..).zip(self.slots.iter()) {
            if !info.usage.is_empty() {
                write!(f, "; slot {slot}: {} >= {:#x}", info.usage, info.min_size)?;
            }
        }
        Ok(())
    }
}

/// A bound buffer is smaller than the program needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferError {
    /// BAR slot.
    pub slot: u8,
    /// Bytes the program needs.
    pub required: u64,
    /// Bytes bound.
    pub bound: u64,
}

impl fmt::Display for BufferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BAR slot {}: program needs {:#x} bytes, buffer has {:#x}",
            self.slot, self.required, self.bound
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// The shape registers of one side (input or output) of a TD.
struct Shape {
    dim: Reg,
    channels: Reg,
    depth: Reg,
}

const IN_SHAPE: Shape = Shape {
    dim: common::IN_DIM,
    channels: common::CIN,
    depth: common::IN_DEPTH,
};

const OUT_SHAPE: Shape = Shape {
    dim: common::OUT_DIM,
    channels: common::COUT,
    depth: common::OUT_DEPTH,
};

/// Register reads for one TD, turning absent or malformed values into
/// errors that name the TD.
struct Ctx<'a> {
    td: u32,
    image: &'a RegImage,
}

impl Ctx<'_> {
    #[inline]
    fn need(&self, reg: Reg) -> Result<u32, TdError> {
        self.image
            .get(reg)
            .ok_or(TdError::RegisterNotSet { td: self.td, reg })
    }

    #[inline]
    fn dma_addr(&self, reg: Reg) -> Result<u64, TdError> {
        let value = self.need(reg)?;
        if !DmaAddr(value).is_aligned() {
            return Err(TdError::Misaligned {
                td: self.td,
                reg,
                value,
            });
        }
        Ok(u64::from(value))
    }

    #[inline]
    fn elem_bytes(&self, reg: Reg, code: u32) -> Result<u32, TdError> {
        DataFormat::from_code(code)
            .map(DataFormat::bytes)
            .ok_or(TdError::UnknownFormat {
                td: self.td,
                reg,
                code,
            })
    }

    /// The end of the bytes a tile DMA touches, from its slot's base.
    fn extent(
        &self,
        dma: Dma,
        surface: [Reg; 5],
        shape: &Shape,
        elem_bytes: u32,
        fmt: Reg,
    ) -> Result<u64, TdError> {
        let [base, row, plane, depth, group] = surface;
        let base = self.dma_addr(base)?;
        let row = self.dma_addr(row)?;
        let plane = self.dma_addr(plane)?;
        let depth = self.dma_addr(depth)?;
        let group = self.dma_addr(group)?;
        let dim = Dim(self.need(shape.dim)?);
        let channels = Channels(self.need(shape.channels)?).count();
        let depths = self.need(shape.depth)?;
        let groups = GroupConvCfg(self.need(common::GROUP_CONV_CFG)?).num_groups();
        let interleave = TileFmt(self.need(fmt)?).interleave().max(1);

        let zero = |reg| TdError::ZeroDimension {
            td: self.td,
            dma,
            reg,
        };
        let too_large = TdError::ExtentTooLarge { td: self.td, dma };
        let width = dim.w();
        if width == 0 || dim.h() == 0 {
            return Err(zero(shape.dim));
        }
        let row_bytes = u64::from(width)
            .checked_mul(u64::from(elem_bytes))
            .and_then(|b| b.checked_mul(u64::from(interleave)))
            .and_then(|b| b.checked_next_multiple_of(DMA_GRANULE))
            .ok_or(too_large)?;
        let mut end = base;
        for (count, stride, reg) in [
            (channels, plane, shape.channels),
            (dim.h(), row, shape.dim),
            (depths, depth, shape.depth),
            (groups, group, common::GROUP_CONV_CFG),
        ] {
            let steps = u64::from(count).checked_sub(1).ok_or(zero(reg))?;
            end = steps
                .checked_mul(stride)
                .and_then(|d| end.checked_add(d))
                .ok_or(too_large)?;
        }
        let end = end.checked_add(row_bytes).ok_or(too_large)?;
        if end > MAX_DMA_EXTENT {
            return Err(too_large);
        }
        Ok(end)
    }

    /// Tile DMA source `i` (0 or 1).
    fn source_extent(&self, i: u32) -> Result<u64, TdError> {
        let ch = ChCfg(self.need(common::CH_CFG)?);
        let mut bytes = self.elem_bytes(common::CH_CFG, ch.in_fmt())?;
        if i != 0 {
            bytes = bytes.max(self.elem_bytes(common::CH_CFG, ch.src2_in_fmt())?);
        }
        let dma = Dma::TileSrc(if i == 0 { 0 } else { 1 });
        self.extent(
            dma,
            tile_src::surface(i),
            &IN_SHAPE,
            bytes,
            tile_src::fmt(i),
        )
    }

    /// The tile DMA destination.
    fn dest_extent(&self) -> Result<u64, TdError> {
        let ch = ChCfg(self.need(common::CH_CFG)?);
        let bytes = self.elem_bytes(common::CH_CFG, ch.out_fmt())?;
        self.extent(
            Dma::TileDst,
            tile_dst::SURFACE,
            &OUT_SHAPE,
            bytes,
            tile_dst::FMT,
        )
    }

    /// The furthest byte any enabled coefficient channel reads, and the
    /// first enabled channel (`None` if none is enabled).
    fn kernel_extent(&self) -> Result<Option<(u64, u32)>, TdError> {
        let mut found: Option<(u64, u32)> = None;
        for i in 0..kdma::COEFF_CHANNELS {
            let cfg = CoeffDmaConfig(self.need(kdma::COEFF_DMA_CONFIG.at(i))?);
            if cfg.en() == 0 {
                continue;
            }
            let base = self.dma_addr(kdma::COEFF_BASE_ADDR.at(i))?;
            let size = self.dma_addr(kdma::COEFF_BFR_SIZE.at(i))?;
            let end = base.checked_add(size).ok_or(TdError::ExtentTooLarge {
                td: self.td,
                dma: Dma::Kernel,
            })?;
            found = Some(match found {
                Some((e, first)) => (e.max(end), first),
                None => (end, i),
            });
        }
        for i in 0..kdma::EXTRA_CHANNELS {
            let reg = kdma::EXTRA_CONFIG.at(i);
            if CoeffDmaConfig(self.need(reg)?).en() != 0 {
                return Err(TdError::UnsupportedDma { td: self.td, reg });
            }
        }
        if let Some((end, _)) = found {
            if end > MAX_DMA_EXTENT {
                return Err(TdError::ExtentTooLarge {
                    td: self.td,
                    dma: Dma::Kernel,
                });
            }
        }
        Ok(found)
    }
}

fn check_header(td: &Td<'_>, h: &Header, last: u32, td_size: u32) -> Result<(), TdError> {
    for (i, word) in (0u8..).zip(0..HEADER_WORDS) {
        let bits = h.reserved_bits(word);
        if bits != 0 {
            return Err(TdError::ReservedHeaderBits {
                td: td.index(),
                word: i,
                bits,
            });
        }
    }
    let chain = |fault| TdError::Chain {
        td: td.index(),
        fault,
    };
    if td.index() < last {
        if h.eon() {
            return Err(chain(ChainFault::EarlyEnd));
        }
        let expected = (td_size / 4).saturating_sub(1);
        if h.next_size() != expected {
            return Err(chain(ChainFault::NextSize {
                found: h.next_size(),
                expected,
            }));
        }
    } else {
        if !h.eon() {
            return Err(chain(ChainFault::MissingEnd));
        }
        if h.next_size() != 0 || h.next_pointer() != 0 {
            return Err(chain(ChainFault::LinkAfterEnd {
                next_size: h.next_size(),
                next_pointer: h.next_pointer(),
            }));
        }
    }
    Ok(())
}

/// Works out the DMAs of one TD, with `image` holding the register state
/// after it.
fn check_dma(
    td: &Td<'_>,
    h: &Header,
    image: &RegImage,
    sum: &mut ProgramSummary,
) -> Result<(), TdError> {
    let ctx = Ctx {
        td: td.index(),
        image,
    };

    // Kernel coefficients.
    let kernel = ctx.kernel_extent()?;
    let mut any_kbase = false;
    for k in 0..4 {
        if let Some(slot) = h.kbase(k) {
            any_kbase = true;
            let size = kernel.map_or(0, |(end, _)| end);
            sum.note(slot, SlotUsage::KERNEL_READ, size, Some(Access::Read));
        }
    }
    if let (Some((_, channel)), false) = (kernel, any_kbase) {
        return Err(TdError::CoeffWithoutKernelBase {
            td: td.index(),
            channel,
        });
    }

    // Tile DMA sources.
    for i in 0..2 {
        if let Some(slot) = h.rbase(i) {
            let size = ctx.source_extent(i)?;
            sum.note(slot, SlotUsage::TILE_READ, size, Some(Access::Read));
        }
    }

    // Tile DMA destination.
    let dst = TileDstDmaConfig(ctx.need(tile_dst::DMA_CONFIG)?);
    if h.wbase().is_some() || h.dst_loc() || dst.en() != 0 {
        let slot = u8::try_from(WBASE.get(h.word(8))).unwrap_or(u8::MAX);
        if slot == SLOT_COMMAND || slot == SLOT_KERNEL {
            return Err(TdError::WriteToProtectedSlot {
                td: td.index(),
                slot,
            });
        }
        let size = ctx.dest_extent()?;
        sum.note(slot, SlotUsage::TILE_WRITE, size, Some(Access::Write));
    }

    if let Some(slot) = h.tbase() {
        sum.note(slot, SlotUsage::TBASE, 0, None);
    }
    Ok(())
}

/// TDs [`Program::validate_with`] checks between two calls of its `tick`
/// (at most 128 KiB of stream, at `MAX_TD_SIZE`).
pub const TDS_PER_TICK: u32 = 64;

impl Program<'_> {
    /// Validates the whole program; see the module documentation for the
    /// rules. Runs in time linear in the program's length.
    pub fn validate(&self) -> Result<ProgramSummary, TdError> {
        self.validate_with(|| {})
    }

    /// [`Self::validate`], calling `tick` after every [`TDS_PER_TICK`] TDs:
    /// the kernel yields the CPU there (`cond_resched()`), since a stream
    /// of up to `MAX_TD_COUNT` TDs takes long on a kernel without
    /// preemption (kernel-2 N9).
    pub fn validate_with(&self, mut tick: impl FnMut()) -> Result<ProgramSummary, TdError> {
        let mut sum = ProgramSummary::new(self.td_size(), self.td_count());
        let mut image = RegImage::new();
        let last = self.td_count().saturating_sub(1);
        let mut since = 0u32;
        for td in self.tds() {
            since += 1;
            if since == TDS_PER_TICK {
                tick();
                since = 0;
            }
            let td = td?;
            let h = td.header();
            check_header(&td, &h, last, self.td_size())?;
            td.decode_into(&mut image)?;
            let end = u64::from(td.offset()).saturating_add(u64::from(self.td_size()));
            sum.span = sum.span.max(end);
            check_dma(&td, &h, &image, &mut sum)?;
        }
        let span = sum.span;
        sum.note(SLOT_COMMAND, SlotUsage::COMMAND, span, None);
        Ok(sum)
    }
}
