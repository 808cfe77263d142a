// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Register blocks, register offsets and bitfields of the H13 engine, as a
//! TD's streams address them.
//!
//! Every register is named once here, as a [`Reg`] (block plus byte offset
//! from the block's base) in the module of its block, and every documented
//! bitfield once, as a [`Field`] associated constant of the typed value that
//! holds it (for example [`ConvCfg::KW`]). Readers get values through
//! [`RegImage`](super::decode::RegImage) and its block views; builders use
//! [`Field::put`] or the `with` method of each value type.
//!
//! The window of each block is exactly what the compilers' standard streams
//! cover (td.md §1.1); a stream that writes anything else is rejected, since
//! nothing is known about such registers. Offsets are the TD offsets of
//! td.md §1.2 minus the TD offset of the block's first data word. Words
//! marked "inferred" or "unnamed" are known only from the values compilers
//! write.

use core::fmt;

/// A bitfield of a 32-bit register: `width` bits starting at bit `shift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Lowest bit of the field.
    pub shift: u32,
    /// Number of bits.
    pub width: u32,
}

impl Field {
    /// A field of `width` bits at bit `shift`.
    pub const fn new(shift: u32, width: u32) -> Field {
        Field { shift, width }
    }

    /// The field's bits in place. A field reaching past bit 31 is cut there.
    #[inline]
    pub const fn mask(self) -> u32 {
        let ones = match u32::MAX.checked_shr(32u32.saturating_sub(self.width)) {
            Some(m) => m,
            None => 0,
        };
        match ones.checked_shl(self.shift) {
            Some(m) => m,
            None => 0,
        }
    }

    /// Extracts the field from a register value.
    #[inline]
    pub const fn get(self, reg: u32) -> u32 {
        match (reg & self.mask()).checked_shr(self.shift) {
            Some(v) => v,
            None => 0,
        }
    }

    /// Whether a (one-bit) field is non-zero in `reg`.
    #[inline]
    pub const fn is_set(self, reg: u32) -> bool {
        self.get(reg) != 0
    }

    /// Returns `reg` with the field replaced by `value`; bits of `value` that
    /// do not fit the field are dropped.
    pub const fn put(self, reg: u32, value: u32) -> u32 {
        let mask = self.mask();
        let v = match value.checked_shl(self.shift) {
            Some(v) => v,
            None => 0,
        };
        (reg & !mask) | (v & mask)
    }
}

/// A hardware register block, addressed by TD streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// Kernel (coefficient) DMA source, base 0x1F800, 62 words.
    KernelDma,
    /// Common (shapes, formats, convolution and task configuration), base 0x0, 16 words.
    Common,
    /// Tile DMA source (input tensors from memory), base 0x13800, 28 words.
    TileSrc,
    /// L2 (on-engine tile buffer) configuration, base 0x4800, 18 words.
    L2,
    /// Planar engine (elementwise), base 0x8800, 4 words.
    Pe,
    /// Neural engine (MAC array and non-linearity), base 0xC800, 5 words.
    Ne,
    /// Tile DMA destination (output tensor to memory), base 0x17800, 7 words.
    TileDst,
}

impl Block {
    /// Number of blocks.
    pub const COUNT: usize = 7;

    /// Every block, in the order the compilers' standard TD carries them.
    pub const ALL: [Block; Block::COUNT] = [
        Block::KernelDma,
        Block::Common,
        Block::TileSrc,
        Block::L2,
        Block::Pe,
        Block::Ne,
        Block::TileDst,
    ];

    /// Hardware byte address of the block's first register.
    #[inline]
    pub const fn base(self) -> u32 {
        match self {
            Block::KernelDma => 0x1F800,
            Block::Common => 0x0,
            Block::TileSrc => 0x13800,
            Block::L2 => 0x4800,
            Block::Pe => 0x8800,
            Block::Ne => 0xC800,
            Block::TileDst => 0x17800,
        }
    }

    /// Number of 32-bit registers in the block's known window.
    #[inline]
    pub const fn words(self) -> u32 {
        match self {
            Block::KernelDma => 62,
            Block::Common => 16,
            Block::TileSrc => 28,
            Block::L2 => 18,
            Block::Pe => 4,
            Block::Ne => 5,
            Block::TileDst => 7,
        }
    }

    /// Position of the block in [`Block::ALL`].
    pub const fn index(self) -> usize {
        match self {
            Block::KernelDma => 0,
            Block::Common => 1,
            Block::TileSrc => 2,
            Block::L2 => 3,
            Block::Pe => 4,
            Block::Ne => 5,
            Block::TileDst => 6,
        }
    }

    /// Index of the block's first word in a register image
    /// ([`IMAGE_WORDS`] words, blocks in [`Block::ALL`] order).
    #[inline]
    pub const fn image_start(self) -> usize {
        match self {
            Block::KernelDma => 0,
            Block::Common => 62,
            Block::TileSrc => 78,
            Block::L2 => 106,
            Block::Pe => 124,
            Block::Ne => 128,
            Block::TileDst => 133,
        }
    }

    /// The name the reference material uses for the block.
    pub const fn name(self) -> &'static str {
        match self {
            Block::KernelDma => "KernelDMASrc",
            Block::Common => "Common",
            Block::TileSrc => "TileDMASrc",
            Block::L2 => "L2",
            Block::Pe => "PE",
            Block::Ne => "NE",
            Block::TileDst => "TileDMADst",
        }
    }

    /// The one stream header word that writes the whole block, as the
    /// standard TD carries it (for example 0x3C000000 for Common).
    pub const fn full_stream_header(self) -> u32 {
        // words() is 4..=62.
        (self.words().wrapping_sub(1) << 26) | self.base()
    }

    /// Bytes in the block's known window.
    #[inline]
    pub const fn window_bytes(self) -> u32 {
        // words() is at most 62.
        self.words().wrapping_mul(4)
    }

    /// The block whose known window holds byte address `addr`, with the
    /// offset of `addr` inside it.
    #[inline]
    pub fn containing(addr: u32) -> Option<(Block, u32)> {
        Block::ALL.iter().find_map(|&b| {
            let offset = addr.checked_sub(b.base())?;
            if offset < b.window_bytes() {
                Some((b, offset))
            } else {
                None
            }
        })
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Total number of words of a register image: the sum of every block's
/// window.
pub const IMAGE_WORDS: usize = 140;

/// One register: a block and the byte offset from the block's base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    /// The block.
    pub block: Block,
    /// Byte offset from [`Block::base`].
    pub offset: u32,
}

impl Reg {
    /// The register at byte `offset` of `block`.
    pub const fn new(block: Block, offset: u32) -> Reg {
        Reg { block, offset }
    }

    /// Element `i` of a register array starting at `self` (one word apart).
    #[inline]
    pub const fn at(self, i: u32) -> Reg {
        Reg {
            block: self.block,
            offset: self.offset.wrapping_add(i.wrapping_mul(4)),
        }
    }

    /// Hardware byte address.
    pub const fn addr(self) -> u32 {
        self.block.base().wrapping_add(self.offset)
    }

    /// The register at hardware byte address `addr`, if it is a word inside a
    /// known block window.
    #[inline]
    pub fn from_addr(addr: u32) -> Option<Reg> {
        if addr % 4 != 0 {
            return None;
        }
        let (block, offset) = Block::containing(addr)?;
        Some(Reg { block, offset })
    }

    /// Index of this register in a register image, or `None` if it is not a
    /// word of its block's window.
    #[inline]
    pub fn image_index(self) -> Option<usize> {
        if self.offset % 4 != 0 || self.offset >= self.block.window_bytes() {
            return None;
        }
        let word = usize::try_from(self.offset / 4).ok()?;
        self.block.image_start().checked_add(word)
    }

    /// The register's documented name and, for arrays, its element index.
    pub fn name(self) -> Option<(&'static str, Option<u32>)> {
        NAMES.iter().find_map(|&(reg, count, name)| {
            if reg.block != self.block {
                return None;
            }
            let delta = self.offset.checked_sub(reg.offset)?;
            let i = delta / 4;
            if delta % 4 != 0 || i >= count {
                return None;
            }
            Some((name, if count > 1 { Some(i) } else { None }))
        })
    }
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some((name, Some(i))) => write!(f, "{}.{}[{}]", self.block, name, i)?,
            Some((name, None)) => write!(f, "{}.{}", self.block, name)?,
            None => write!(f, "{}+{:#x}", self.block, self.offset)?,
        }
        write!(f, " (address {:#07x})", self.addr())
    }
}

/// Kernel DMA source (coefficients) registers.
pub mod kdma {
    use super::{Block, Reg};

    /// Number of coefficient DMA channels.
    pub const COEFF_CHANNELS: u32 = 16;
    /// Unnamed word 0: 0x40 in every TD that really loads coefficients.
    pub const WORD_00: Reg = Reg::new(Block::KernelDma, 0x00);
    /// Unnamed word 1: always 0.
    pub const WORD_04: Reg = Reg::new(Block::KernelDma, 0x04);
    /// CoeffDMAConfig\[16\]: per-channel enable and cache hints
    /// ([`CoeffDmaConfig`](super::CoeffDmaConfig)).
    pub const COEFF_DMA_CONFIG: Reg = Reg::new(Block::KernelDma, 0x08);
    /// CoeffBaseAddr\[16\]: byte offset of the channel's data from the kernel
    /// slot's base, bits \[31:6\].
    pub const COEFF_BASE_ADDR: Reg = Reg::new(Block::KernelDma, 0x48);
    /// CoeffBfrSize\[16\]: bytes the channel loads, bits \[31:6\].
    pub const COEFF_BFR_SIZE: Reg = Reg::new(Block::KernelDma, 0x88);
    /// Number of the further (inferred) configuration/base/size triples.
    pub const EXTRA_CHANNELS: u32 = 4;
    /// Inferred further DMA configurations\[4\] (0x80 in every sample).
    pub const EXTRA_CONFIG: Reg = Reg::new(Block::KernelDma, 0xC8);
    /// Inferred further DMA base offsets\[4\].
    pub const EXTRA_BASE: Reg = Reg::new(Block::KernelDma, 0xD8);
    /// Inferred further DMA sizes\[4\].
    pub const EXTRA_SIZE: Reg = Reg::new(Block::KernelDma, 0xE8);
    /// The first of the two stream headers of the compact (macOS 26) TD:
    /// words 0x00..0x44 (the two unnamed words and CoeffDMAConfig).
    pub const COMPACT_STREAM_A: u32 = 0x4401_F800;
    /// The second compact stream header: words 0xC8..0xF4.
    pub const COMPACT_STREAM_B: u32 = 0x2C01_F8C8;
}

/// Common registers.
pub mod common {
    use super::{Block, Reg};

    /// InDim: input width and height ([`Dim`](super::Dim)).
    pub const IN_DIM: Reg = Reg::new(Block::Common, 0x00);
    /// Input depth (always 1 in the samples).
    pub const IN_DEPTH: Reg = Reg::new(Block::Common, 0x04);
    /// ChCfg: input/output element formats ([`ChCfg`](super::ChCfg)).
    pub const CH_CFG: Reg = Reg::new(Block::Common, 0x08);
    /// Cin: input channels, bits \[16:0\].
    pub const CIN: Reg = Reg::new(Block::Common, 0x0C);
    /// Cout: output channels, bits \[16:0\].
    pub const COUT: Reg = Reg::new(Block::Common, 0x10);
    /// OutDim: output width and height ([`Dim`](super::Dim)).
    pub const OUT_DIM: Reg = Reg::new(Block::Common, 0x14);
    /// Output depth (always 1 in the samples).
    pub const OUT_DEPTH: Reg = Reg::new(Block::Common, 0x18);
    /// ConvCfg: kernel size, strides, padding ([`ConvCfg`](super::ConvCfg)).
    pub const CONV_CFG: Reg = Reg::new(Block::Common, 0x1C);
    /// Unnamed (0x2041 in every sample).
    pub const WORD_20: Reg = Reg::new(Block::Common, 0x20);
    /// GroupConvCfg ([`GroupConvCfg`](super::GroupConvCfg)).
    pub const GROUP_CONV_CFG: Reg = Reg::new(Block::Common, 0x24);
    /// TileCfg ([`TileCfg`](super::TileCfg)).
    pub const TILE_CFG: Reg = Reg::new(Block::Common, 0x28);
    /// Unnamed (4/9/0x59 on planar-engine ops, 0 on neural-engine ops).
    pub const WORD_2C: Reg = Reg::new(Block::Common, 0x2C);
    /// Unnamed.
    pub const WORD_30: Reg = Reg::new(Block::Common, 0x30);
    /// Cfg ([`CommonCfg`](super::CommonCfg)).
    pub const CFG: Reg = Reg::new(Block::Common, 0x34);
    /// TaskInfo ([`TaskInfo`](super::TaskInfo)).
    pub const TASK_INFO: Reg = Reg::new(Block::Common, 0x38);
    /// DPE ([`Dpe`](super::Dpe)).
    pub const DPE: Reg = Reg::new(Block::Common, 0x3C);
}

/// Tile DMA source registers. The engine has two sources: source 0 is
/// addressed through header RBase0, source 1 (inferred from the two-input
/// samples) through RBase1.
pub mod tile_src {
    use super::{Block, Reg};

    /// DMAConfig ([`TileSrcDmaConfig`](super::TileSrcDmaConfig)).
    pub const DMA_CONFIG: Reg = Reg::new(Block::TileSrc, 0x00);
    /// Inferred second source's DMAConfig.
    pub const SRC1_DMA_CONFIG: Reg = Reg::new(Block::TileSrc, 0x04);
    /// BaseAddr: byte offset from the RBase0 slot, bits \[31:6\].
    pub const BASE_ADDR: Reg = Reg::new(Block::TileSrc, 0x08);
    /// RowStride in bytes, bits \[31:6\].
    pub const ROW_STRIDE: Reg = Reg::new(Block::TileSrc, 0x0C);
    /// PlaneStride (channel stride) in bytes, bits \[31:6\].
    pub const PLANE_STRIDE: Reg = Reg::new(Block::TileSrc, 0x10);
    /// DepthStride in bytes, bits \[31:6\].
    pub const DEPTH_STRIDE: Reg = Reg::new(Block::TileSrc, 0x14);
    /// GroupStride in bytes, bits \[31:6\].
    pub const GROUP_STRIDE: Reg = Reg::new(Block::TileSrc, 0x18);
    /// Inferred second source's BaseAddr (from the RBase1 slot).
    pub const SRC1_BASE_ADDR: Reg = Reg::new(Block::TileSrc, 0x1C);
    /// Inferred second source's RowStride.
    pub const SRC1_ROW_STRIDE: Reg = Reg::new(Block::TileSrc, 0x20);
    /// Inferred second source's PlaneStride.
    pub const SRC1_PLANE_STRIDE: Reg = Reg::new(Block::TileSrc, 0x24);
    /// Inferred second source's DepthStride.
    pub const SRC1_DEPTH_STRIDE: Reg = Reg::new(Block::TileSrc, 0x28);
    /// Inferred second source's GroupStride.
    pub const SRC1_GROUP_STRIDE: Reg = Reg::new(Block::TileSrc, 0x2C);
    /// Fmt ([`TileFmt`](super::TileFmt)).
    pub const FMT: Reg = Reg::new(Block::TileSrc, 0x38);
    /// Inferred second source's Fmt.
    pub const SRC1_FMT: Reg = Reg::new(Block::TileSrc, 0x3C);
    /// Unnamed (0 or 0x100).
    pub const WORD_40: Reg = Reg::new(Block::TileSrc, 0x40);
    /// PixelOffset\[4\], bits \[15:0\].
    pub const PIXEL_OFFSET: Reg = Reg::new(Block::TileSrc, 0x50);

    /// The five address registers (base, row, plane, depth, group) of
    /// source `i`, in that order: source 0 for `i` = 0, source 1 otherwise.
    pub const fn surface(i: u32) -> [Reg; 5] {
        if i == 0 {
            [
                BASE_ADDR,
                ROW_STRIDE,
                PLANE_STRIDE,
                DEPTH_STRIDE,
                GROUP_STRIDE,
            ]
        } else {
            [
                SRC1_BASE_ADDR,
                SRC1_ROW_STRIDE,
                SRC1_PLANE_STRIDE,
                SRC1_DEPTH_STRIDE,
                SRC1_GROUP_STRIDE,
            ]
        }
    }

    /// The Fmt register of source `i`: source 0 for `i` = 0, source 1
    /// otherwise.
    pub const fn fmt(i: u32) -> Reg {
        if i == 0 {
            FMT
        } else {
            SRC1_FMT
        }
    }
}

/// L2 (on-engine buffer) registers. Addresses here are inside the L2, not
/// in memory, and are never DMA targets.
pub mod l2 {
    use super::{Block, Reg};

    /// L2Cfg ([`L2Cfg`](super::L2Cfg)).
    pub const L2_CFG: Reg = Reg::new(Block::L2, 0x00);
    /// SourceCfg ([`L2SourceCfg`](super::L2SourceCfg)).
    pub const SOURCE_CFG: Reg = Reg::new(Block::L2, 0x04);
    /// SourceBase, L2 byte address in bits \[20:4\].
    pub const SOURCE_BASE: Reg = Reg::new(Block::L2, 0x08);
    /// SourceChannelStride, bits \[20:4\].
    pub const SOURCE_CHANNEL_STRIDE: Reg = Reg::new(Block::L2, 0x0C);
    /// SourceRowStride, bits \[20:4\].
    pub const SOURCE_ROW_STRIDE: Reg = Reg::new(Block::L2, 0x10);
    /// Unnamed (input channels × 16 in the samples).
    pub const WORD_14: Reg = Reg::new(Block::L2, 0x14);
    /// Unnamed (input depth × channels × 16 in the samples).
    pub const WORD_18: Reg = Reg::new(Block::L2, 0x18);
    /// Inferred second source's L2 base.
    pub const SRC1_BASE: Reg = Reg::new(Block::L2, 0x1C);
    /// Inferred second source's channel stride.
    pub const SRC1_CHANNEL_STRIDE: Reg = Reg::new(Block::L2, 0x20);
    /// Inferred second source's row stride.
    pub const SRC1_ROW_STRIDE: Reg = Reg::new(Block::L2, 0x24);
    /// Inferred second source's word like 0x14.
    pub const SRC1_WORD_28: Reg = Reg::new(Block::L2, 0x28);
    /// Inferred second source's word like 0x18.
    pub const SRC1_WORD_2C: Reg = Reg::new(Block::L2, 0x2C);
    /// ResultCfg ([`L2ResultCfg`](super::L2ResultCfg)).
    pub const RESULT_CFG: Reg = Reg::new(Block::L2, 0x30);
    /// ResultBase, bits \[20:4\].
    pub const RESULT_BASE: Reg = Reg::new(Block::L2, 0x34);
    /// ConvResultChannelStride, bits \[20:4\].
    pub const CONV_RESULT_CHANNEL_STRIDE: Reg = Reg::new(Block::L2, 0x38);
    /// ConvResultRowStride, bits \[20:4\].
    pub const CONV_RESULT_ROW_STRIDE: Reg = Reg::new(Block::L2, 0x3C);
    /// Unnamed (output channels × 16 in the samples).
    pub const WORD_40: Reg = Reg::new(Block::L2, 0x40);
    /// Unnamed (output depth × channels × 16 in the samples).
    pub const WORD_44: Reg = Reg::new(Block::L2, 0x44);
}

/// Planar engine registers.
pub mod pe {
    use super::{Block, Reg};

    /// Cfg ([`PeCfg`](super::PeCfg)).
    pub const CFG: Reg = Reg::new(Block::Pe, 0x00);
    /// BiasScale ([`PeBiasScale`](super::PeBiasScale)).
    pub const BIAS_SCALE: Reg = Reg::new(Block::Pe, 0x04);
    /// PreScale ([`PePreScale`](super::PePreScale)).
    pub const PRE_SCALE: Reg = Reg::new(Block::Pe, 0x08);
    /// FinalScale, an IEEE single (0x3F800000 = 1.0).
    pub const FINAL_SCALE: Reg = Reg::new(Block::Pe, 0x0C);
}

/// Neural engine registers.
pub mod ne {
    use super::{Block, Reg};

    /// KernelCfg ([`KernelCfg`](super::KernelCfg)).
    pub const KERNEL_CFG: Reg = Reg::new(Block::Ne, 0x00);
    /// MACCfg ([`MacCfg`](super::MacCfg)).
    pub const MAC_CFG: Reg = Reg::new(Block::Ne, 0x04);
    /// MatrixVectorBias, bits \[15:0\].
    pub const MATRIX_VECTOR_BIAS: Reg = Reg::new(Block::Ne, 0x08);
    /// AccBias ([`AccBias`](super::AccBias)).
    pub const ACC_BIAS: Reg = Reg::new(Block::Ne, 0x0C);
    /// PostScale ([`PostScale`](super::PostScale)).
    pub const POST_SCALE: Reg = Reg::new(Block::Ne, 0x10);
}

/// Tile DMA destination registers, addressed through header WBase.
pub mod tile_dst {
    use super::{Block, Reg};

    /// DMAConfig ([`TileDstDmaConfig`](super::TileDstDmaConfig)).
    pub const DMA_CONFIG: Reg = Reg::new(Block::TileDst, 0x00);
    /// BaseAddr: byte offset from the WBase slot, bits \[31:6\].
    pub const BASE_ADDR: Reg = Reg::new(Block::TileDst, 0x04);
    /// RowStride in bytes, bits \[31:6\].
    pub const ROW_STRIDE: Reg = Reg::new(Block::TileDst, 0x08);
    /// PlaneStride in bytes, bits \[31:6\].
    pub const PLANE_STRIDE: Reg = Reg::new(Block::TileDst, 0x0C);
    /// DepthStride in bytes, bits \[31:6\].
    pub const DEPTH_STRIDE: Reg = Reg::new(Block::TileDst, 0x10);
    /// GroupStride in bytes, bits \[31:6\].
    pub const GROUP_STRIDE: Reg = Reg::new(Block::TileDst, 0x14);
    /// Fmt ([`TileFmt`](super::TileFmt)).
    pub const FMT: Reg = Reg::new(Block::TileDst, 0x18);

    /// The five address registers (base, row, plane, depth, group).
    pub const SURFACE: [Reg; 5] = [
        BASE_ADDR,
        ROW_STRIDE,
        PLANE_STRIDE,
        DEPTH_STRIDE,
        GROUP_STRIDE,
    ];
}

/// Names of the documented registers for messages: first register, number
/// of array elements, name.
static NAMES: [(Reg, u32, &str); 64] = [
    (kdma::COEFF_DMA_CONFIG, 16, "CoeffDMAConfig"),
    (kdma::COEFF_BASE_ADDR, 16, "CoeffBaseAddr"),
    (kdma::COEFF_BFR_SIZE, 16, "CoeffBfrSize"),
    (kdma::EXTRA_CONFIG, 4, "ExtraDMAConfig"),
    (kdma::EXTRA_BASE, 4, "ExtraBaseAddr"),
    (kdma::EXTRA_SIZE, 4, "ExtraBfrSize"),
    (common::IN_DIM, 1, "InDim"),
    (common::IN_DEPTH, 1, "InDepth"),
    (common::CH_CFG, 1, "ChCfg"),
    (common::CIN, 1, "Cin"),
    (common::COUT, 1, "Cout"),
    (common::OUT_DIM, 1, "OutDim"),
    (common::OUT_DEPTH, 1, "OutDepth"),
    (common::CONV_CFG, 1, "ConvCfg"),
    (common::GROUP_CONV_CFG, 1, "GroupConvCfg"),
    (common::TILE_CFG, 1, "TileCfg"),
    (common::CFG, 1, "Cfg"),
    (common::TASK_INFO, 1, "TaskInfo"),
    (common::DPE, 1, "DPE"),
    (tile_src::DMA_CONFIG, 1, "DMAConfig"),
    (tile_src::SRC1_DMA_CONFIG, 1, "Src1DMAConfig"),
    (tile_src::BASE_ADDR, 1, "BaseAddr"),
    (tile_src::ROW_STRIDE, 1, "RowStride"),
    (tile_src::PLANE_STRIDE, 1, "PlaneStride"),
    (tile_src::DEPTH_STRIDE, 1, "DepthStride"),
    (tile_src::GROUP_STRIDE, 1, "GroupStride"),
    (tile_src::SRC1_BASE_ADDR, 1, "Src1BaseAddr"),
    (tile_src::SRC1_ROW_STRIDE, 1, "Src1RowStride"),
    (tile_src::SRC1_PLANE_STRIDE, 1, "Src1PlaneStride"),
    (tile_src::SRC1_DEPTH_STRIDE, 1, "Src1DepthStride"),
    (tile_src::SRC1_GROUP_STRIDE, 1, "Src1GroupStride"),
    (tile_src::FMT, 1, "Fmt"),
    (tile_src::SRC1_FMT, 1, "Src1Fmt"),
    (tile_src::PIXEL_OFFSET, 4, "PixelOffset"),
    (l2::L2_CFG, 1, "L2Cfg"),
    (l2::SOURCE_CFG, 1, "SourceCfg"),
    (l2::SOURCE_BASE, 1, "SourceBase"),
    (l2::SOURCE_CHANNEL_STRIDE, 1, "SourceChannelStride"),
    (l2::SOURCE_ROW_STRIDE, 1, "SourceRowStride"),
    (l2::SRC1_BASE, 1, "Src1Base"),
    (l2::SRC1_CHANNEL_STRIDE, 1, "Src1ChannelStride"),
    (l2::SRC1_ROW_STRIDE, 1, "Src1RowStride"),
    (l2::RESULT_CFG, 1, "ResultCfg"),
    (l2::RESULT_BASE, 1, "ResultBase"),
    (l2::CONV_RESULT_CHANNEL_STRIDE, 1, "ConvResultChannelStride"),
    (l2::CONV_RESULT_ROW_STRIDE, 1, "ConvResultRowStride"),
    (pe::CFG, 1, "Cfg"),
    (pe::BIAS_SCALE, 1, "BiasScale"),
    (pe::PRE_SCALE, 1, "PreScale"),
    (pe::FINAL_SCALE, 1, "FinalScale"),
    (ne::KERNEL_CFG, 1, "KernelCfg"),
    (ne::MAC_CFG, 1, "MACCfg"),
    (ne::MATRIX_VECTOR_BIAS, 1, "MatrixVectorBias"),
    (ne::ACC_BIAS, 1, "AccBias"),
    (ne::POST_SCALE, 1, "PostScale"),
    (tile_dst::DMA_CONFIG, 1, "DMAConfig"),
    (tile_dst::BASE_ADDR, 1, "BaseAddr"),
    (tile_dst::ROW_STRIDE, 1, "RowStride"),
    (tile_dst::PLANE_STRIDE, 1, "PlaneStride"),
    (tile_dst::DEPTH_STRIDE, 1, "DepthStride"),
    (tile_dst::GROUP_STRIDE, 1, "GroupStride"),
    (tile_dst::FMT, 1, "Fmt"),
    (kdma::WORD_00, 1, "Word0"),
    (kdma::WORD_04, 1, "Word1"),
];

/// Defines a typed view of one register value: a newtype over the raw word
/// with one [`Field`] constant and one getter per documented bitfield.
macro_rules! reg_value {
    (
        $(#[$m:meta])*
        $name:ident {
            $( $(#[$fm:meta])* $getter:ident, $konst:ident: $shift:literal, $width:literal; )*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name(
            /// The raw register word.
            pub u32,
        );

        impl $name {
            $(
                $(#[$fm])*
                pub const $konst: Field = Field::new($shift, $width);
            )*
            $(
                $(#[$fm])*
                #[inline]
                pub const fn $getter(self) -> u32 {
                    Self::$konst.get(self.0)
                }
            )*

            /// The value with `field` set to `value` (cut to the field's width).
            pub const fn with(self, field: Field, value: u32) -> Self {
                Self(field.put(self.0, value))
            }
        }
    };
}

reg_value! {
    /// CoeffDMAConfig\[i\] of the kernel DMA.
    CoeffDmaConfig {
        /// Channel enable.
        en, EN: 0, 1;
        /// CrH.
        crh, CRH: 4, 2;
        /// Cache hint.
        cache_hint, CACHE_HINT: 6, 4;
        /// PrefetchParticipateEn.
        prefetch_participate_en, PREFETCH_PARTICIPATE_EN: 28, 1;
    }
}

reg_value! {
    /// A byte address or stride held in bits \[31:6\] (tile and kernel DMA
    /// bases, strides and sizes): always a multiple of 64.
    DmaAddr {
        /// The value in 64-byte units.
        units, UNITS: 6, 26;
    }
}

impl DmaAddr {
    /// The byte value the field encodes.
    pub const fn bytes(self) -> u32 {
        self.0 & Self::UNITS.mask()
    }

    /// Whether the bits below the field (\[5:0\]) are clear.
    #[inline]
    pub const fn is_aligned(self) -> bool {
        self.0 & !Self::UNITS.mask() == 0
    }
}

reg_value! {
    /// InDim or OutDim: a width and a height.
    Dim {
        /// Width (Win / Wout).
        w, W: 0, 15;
        /// Height (Hin / Hout).
        h, H: 16, 15;
    }
}

reg_value! {
    /// Cin or Cout: a channel count.
    Channels {
        /// Number of channels.
        count, COUNT: 0, 17;
    }
}

reg_value! {
    /// ChCfg: element formats ([`DataFormat`] codes).
    ChCfg {
        /// Format of the (first) input.
        in_fmt, IN_FMT: 0, 2;
        /// Format of the second input of two-input ops (2 in those samples).
        src2_in_fmt, SRC2_IN_FMT: 2, 2;
        /// Format of the output.
        out_fmt, OUT_FMT: 4, 2;
    }
}

reg_value! {
    /// ConvCfg.
    ConvCfg {
        /// Kernel width.
        kw, KW: 0, 5;
        /// Kernel height.
        kh, KH: 5, 5;
        /// Output channel group size (log2; inferred).
        ocg_size, OCG_SIZE: 10, 3;
        /// Horizontal stride.
        sx, SX: 13, 2;
        /// Vertical stride.
        sy, SY: 15, 2;
        /// Horizontal padding.
        px, PX: 17, 5;
        /// Vertical padding.
        py, PY: 22, 5;
        /// Ox.
        ox, OX: 28, 2;
        /// Oy.
        oy, OY: 30, 2;
    }
}

reg_value! {
    /// GroupConvCfg.
    GroupConvCfg {
        /// Number of groups.
        num_groups, NUM_GROUPS: 0, 13;
        /// UnicastEn.
        unicast_en, UNICAST_EN: 14, 1;
        /// ElemMultMode.
        elem_mult_mode, ELEM_MULT_MODE: 15, 1;
        /// UnicastCin.
        unicast_cin, UNICAST_CIN: 16, 16;
    }
}

reg_value! {
    /// TileCfg.
    TileCfg {
        /// Rows per hardware tile.
        tile_height, TILE_HEIGHT: 0, 15;
    }
}

reg_value! {
    /// Common Cfg. Bits 0, 1, 4 and 5 are set in samples but unnamed.
    CommonCfg {
        /// SmallSourceMode.
        small_source_mode, SMALL_SOURCE_MODE: 2, 1;
        /// ShPref.
        sh_pref, SH_PREF: 8, 3;
        /// ShMin.
        sh_min, SH_MIN: 12, 3;
        /// ShMax.
        sh_max, SH_MAX: 16, 3;
        /// ActiveNE.
        active_ne, ACTIVE_NE: 19, 3;
        /// ContextSwitchIn.
        context_switch_in, CONTEXT_SWITCH_IN: 22, 1;
        /// ContextSwitchOut.
        context_switch_out, CONTEXT_SWITCH_OUT: 24, 1;
        /// AccDoubleBufEn.
        acc_double_buf_en, ACC_DOUBLE_BUF_EN: 26, 1;
    }
}

reg_value! {
    /// TaskInfo.
    TaskInfo {
        /// TaskID.
        task_id, TASK_ID: 0, 16;
        /// TaskQ.
        task_q, TASK_Q: 16, 4;
        /// NID.
        nid, NID: 20, 8;
    }
}

reg_value! {
    /// DPE.
    Dpe {
        /// Category.
        category, CATEGORY: 0, 4;
    }
}

reg_value! {
    /// Tile DMA source DMAConfig.
    TileSrcDmaConfig {
        /// Enable.
        en, EN: 0, 1;
        /// CrH.
        crh, CRH: 4, 2;
        /// CacheHint.
        cache_hint, CACHE_HINT: 6, 4;
        /// CacheHintReuse.
        cache_hint_reuse, CACHE_HINT_REUSE: 10, 4;
        /// CacheHintNoReuse.
        cache_hint_no_reuse, CACHE_HINT_NO_REUSE: 14, 4;
        /// DependencyMode.
        dependency_mode, DEPENDENCY_MODE: 18, 2;
    }
}

reg_value! {
    /// Tile DMA source or destination Fmt. The three zero-pad bits exist
    /// only on the destination.
    TileFmt {
        /// FmtMode.
        fmt_mode, FMT_MODE: 0, 2;
        /// Truncate.
        truncate, TRUNCATE: 4, 2;
        /// Shift.
        shift, SHIFT: 8, 1;
        /// MemFmt.
        mem_fmt, MEM_FMT: 12, 2;
        /// OffsetCh.
        offset_ch, OFFSET_CH: 16, 3;
        /// ZeroPadLast (destination).
        zero_pad_last, ZERO_PAD_LAST: 20, 1;
        /// ZeroPadFirst (destination).
        zero_pad_first, ZERO_PAD_FIRST: 21, 1;
        /// CmpVecFill (destination).
        cmp_vec_fill, CMP_VEC_FILL: 22, 1;
        /// Interleave.
        interleave, INTERLEAVE: 24, 4;
        /// CmpVec.
        cmp_vec, CMP_VEC: 28, 4;
    }
}

reg_value! {
    /// Tile DMA destination DMAConfig.
    TileDstDmaConfig {
        /// Enable.
        en, EN: 0, 1;
        /// CrH.
        crh, CRH: 4, 2;
        /// CacheHint.
        cache_hint, CACHE_HINT: 6, 4;
        /// L2BfrMode.
        l2_bfr_mode, L2_BFR_MODE: 26, 1;
        /// BypassEOW.
        bypass_eow, BYPASS_EOW: 27, 1;
    }
}

reg_value! {
    /// An L2 byte address or stride, held in bits \[20:4\].
    L2Addr {
        /// The value in 16-byte units.
        units, UNITS: 4, 17;
    }
}

impl L2Addr {
    /// The byte value the field encodes.
    pub const fn bytes(self) -> u32 {
        self.0 & Self::UNITS.mask()
    }
}

reg_value! {
    /// L2Cfg.
    L2Cfg {
        /// InputReLU.
        input_relu, INPUT_RELU: 0, 1;
        /// PaddingMode.
        padding_mode, PADDING_MODE: 2, 2;
    }
}

reg_value! {
    /// L2 SourceCfg. Bit 24 is set in two-input samples and unnamed.
    L2SourceCfg {
        /// SourceType.
        source_type, SOURCE_TYPE: 0, 2;
        /// Dependent.
        dependent, DEPENDENT: 2, 2;
        /// AliasConvSrc.
        alias_conv_src, ALIAS_CONV_SRC: 4, 1;
        /// AliasConvRslt.
        alias_conv_rslt, ALIAS_CONV_RSLT: 5, 1;
        /// DMAFmt.
        dma_fmt, DMA_FMT: 6, 2;
        /// DMAInterleave.
        dma_interleave, DMA_INTERLEAVE: 8, 4;
        /// DMACmpVec.
        dma_cmp_vec, DMA_CMP_VEC: 12, 4;
        /// DMAOffsetCh.
        dma_offset_ch, DMA_OFFSET_CH: 16, 3;
        /// AliasPlanarSrc.
        alias_planar_src, ALIAS_PLANAR_SRC: 20, 1;
        /// AliasPlanarRslt.
        alias_planar_rslt, ALIAS_PLANAR_RSLT: 22, 1;
    }
}

reg_value! {
    /// L2 ResultCfg.
    L2ResultCfg {
        /// ResultType.
        result_type, RESULT_TYPE: 0, 2;
        /// L2BfrMode.
        l2_bfr_mode, L2_BFR_MODE: 3, 1;
        /// AliasConvSrc.
        alias_conv_src, ALIAS_CONV_SRC: 4, 1;
        /// AliasConvRslt.
        alias_conv_rslt, ALIAS_CONV_RSLT: 5, 1;
        /// DMAFmt.
        dma_fmt, DMA_FMT: 6, 2;
        /// DMAInterleave.
        dma_interleave, DMA_INTERLEAVE: 8, 4;
        /// DMACmpVec.
        dma_cmp_vec, DMA_CMP_VEC: 12, 4;
        /// DMAOffsetCh.
        dma_offset_ch, DMA_OFFSET_CH: 16, 3;
        /// AliasPlanarSrc.
        alias_planar_src, ALIAS_PLANAR_SRC: 20, 1;
        /// AliasPlanarRslt.
        alias_planar_rslt, ALIAS_PLANAR_RSLT: 22, 1;
    }
}

reg_value! {
    /// Planar engine Cfg.
    PeCfg {
        /// OpMode ([`PeOp`] codes).
        op_mode, OP_MODE: 2, 3;
        /// Condition bit 6 (set in the compiled `abs`).
        cond, COND: 6, 1;
        /// SecSrc: 2 (L2) in every two-input op.
        sec_src, SEC_SRC: 18, 2;
    }
}

impl PeCfg {
    /// The elementwise operation, if its code is known.
    pub const fn op(self) -> Option<PeOp> {
        PeOp::from_code(self.op_mode())
    }
}

reg_value! {
    /// Planar engine BiasScale: two fp16 halves.
    PeBiasScale {
        /// Bias (fp16 bits).
        bias, BIAS: 0, 16;
        /// Scale (fp16 bits).
        scale, SCALE: 16, 16;
    }
}

reg_value! {
    /// Planar engine PreScale: an fp16 in the upper half (the data put it
    /// there, not in \[15:0\]).
    PePreScale {
        /// Scale (fp16 bits).
        scale, SCALE: 16, 16;
    }
}

reg_value! {
    /// Neural engine KernelCfg.
    KernelCfg {
        /// KernelFmt ([`DataFormat`] codes; 2 = fp16 weights).
        kernel_fmt, KERNEL_FMT: 0, 2;
        /// PalettizedEn.
        palettized_en, PALETTIZED_EN: 2, 1;
        /// PalettizedBits.
        palettized_bits, PALETTIZED_BITS: 4, 4;
        /// SparseFmt.
        sparse_fmt, SPARSE_FMT: 8, 1;
        /// GroupKernelReuse.
        group_kernel_reuse, GROUP_KERNEL_REUSE: 10, 1;
    }
}

reg_value! {
    /// Neural engine MACCfg. Bit 20 is set on every neural-engine op and is
    /// unnamed.
    MacCfg {
        /// OpMode.
        op_mode, OP_MODE: 0, 3;
        /// KernelMode.
        kernel_mode, KERNEL_MODE: 3, 1;
        /// BiasMode.
        bias_mode, BIAS_MODE: 4, 1;
        /// MatrixBiasEn.
        matrix_bias_en, MATRIX_BIAS_EN: 6, 1;
        /// BinaryPoint.
        binary_point, BINARY_POINT: 8, 5;
        /// PostScaleMode.
        post_scale_mode, POST_SCALE_MODE: 14, 1;
        /// NonlinearMode ([`Nonlinear`] codes).
        nonlinear_mode, NONLINEAR_MODE: 16, 2;
    }
}

impl MacCfg {
    /// The non-linearity, if its code is known.
    pub const fn nonlinear(self) -> Option<Nonlinear> {
        Nonlinear::from_code(self.nonlinear_mode())
    }
}

reg_value! {
    /// Neural engine MatrixVectorBias.
    MatrixVectorBias {
        /// Bias.
        bias, BIAS: 0, 16;
    }
}

reg_value! {
    /// Neural engine AccBias.
    AccBias {
        /// AccBias.
        acc_bias, ACC_BIAS: 0, 16;
        /// AccBiasShift.
        shift, SHIFT: 16, 5;
    }
}

reg_value! {
    /// Neural engine PostScale.
    PostScale {
        /// PostScale (fp16 bits; 0x3C00 = 1.0).
        post_scale, POST_SCALE: 0, 16;
        /// PostRightShift.
        right_shift, RIGHT_SHIFT: 16, 5;
    }
}

reg_value! {
    /// Tile DMA source PixelOffset\[i\].
    PixelOffset {
        /// Offset.
        offset, OFFSET: 0, 16;
    }
}

/// Element format codes of ChCfg and KernelCfg.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataFormat {
    /// Unsigned 8-bit integer (code 0).
    U8,
    /// Signed 8-bit integer (code 1).
    I8,
    /// IEEE half (code 2).
    F16,
}

impl DataFormat {
    /// The format of a 2-bit code; code 3 is not known.
    #[inline]
    pub const fn from_code(code: u32) -> Option<DataFormat> {
        match code {
            0 => Some(DataFormat::U8),
            1 => Some(DataFormat::I8),
            2 => Some(DataFormat::F16),
            _ => None,
        }
    }

    /// Bytes of one element.
    pub const fn bytes(self) -> u32 {
        match self {
            DataFormat::U8 | DataFormat::I8 => 1,
            DataFormat::F16 => 2,
        }
    }
}

/// Planar engine operations (PE Cfg OpMode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeOp {
    /// Elementwise add (code 0).
    Add,
    /// Elementwise multiply (code 1).
    Mul,
    /// Elementwise maximum (code 2).
    Max,
    /// Elementwise minimum (code 3).
    Min,
}

impl PeOp {
    /// The operation of an OpMode code.
    pub const fn from_code(code: u32) -> Option<PeOp> {
        match code {
            0 => Some(PeOp::Add),
            1 => Some(PeOp::Mul),
            2 => Some(PeOp::Max),
            3 => Some(PeOp::Min),
            _ => None,
        }
    }
}

/// Neural engine non-linearities (MACCfg NonlinearMode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nonlinear {
    /// Pass-through (code 0).
    None,
    /// Built-in ReLU (code 1).
    Relu,
    /// Lookup table loaded through kernel DMA channel 0 (code 2).
    Lut,
}

impl Nonlinear {
    /// The non-linearity of a NonlinearMode code.
    pub const fn from_code(code: u32) -> Option<Nonlinear> {
        match code {
            0 => Some(Nonlinear::None),
            1 => Some(Nonlinear::Relu),
            2 => Some(Nonlinear::Lut),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let f = Field::new(4, 3);
        assert_eq!(f.mask(), 0x70);
        assert_eq!(f.get(0xFFF5), 7);
        assert_eq!(f.put(0xFFFF, 2), 0xFFAF);
        assert_eq!(f.put(0, 0xFF), 0x70, "value cut to width");
        assert_eq!(Field::new(0, 32).mask(), u32::MAX);
        assert_eq!(Field::new(0, 0).mask(), 0);
        assert_eq!(Field::new(31, 4).mask(), 0x8000_0000, "cut at bit 31");
        assert_eq!(Field::new(32, 1).mask(), 0);
        assert_eq!(Field::new(40, 1).get(u32::MAX), 0);
        assert_eq!(Field::new(0, 99).mask(), u32::MAX);
        assert_eq!(ConvCfg(0x5000_B421).ocg_size(), 5);
        assert_eq!(ConvCfg(0).with(ConvCfg::KW, 3).kw(), 3);
    }

    #[test]
    fn blocks_tile_the_image() {
        let mut next = 0;
        for (i, b) in Block::ALL.iter().enumerate() {
            assert_eq!(b.index(), i);
            assert_eq!(b.image_start(), next, "{b}");
            next += b.words() as usize;
            assert_eq!(Block::containing(b.base()), Some((*b, 0)));
            assert_eq!(
                Block::containing(b.base() + b.words() * 4 - 4),
                Some((*b, b.words() * 4 - 4))
            );
            assert_eq!(
                Block::containing(b.base() + b.words() * 4),
                None,
                "{b} window end"
            );
        }
        assert_eq!(next, IMAGE_WORDS);
        // The standard stream headers of td.md §1.1.
        let std: [u32; 7] = [
            0xF401_F800,
            0x3C00_0000,
            0x6C01_3800,
            0x4400_4800,
            0x0C00_8800,
            0x1000_C800,
            0x1801_7800,
        ];
        for (b, h) in Block::ALL.iter().zip(std) {
            assert_eq!(b.full_stream_header(), h, "{b}");
        }
    }

    #[test]
    fn register_names() {
        for &(reg, count, name) in NAMES.iter() {
            for i in 0..count {
                let r = reg.at(i);
                assert!(r.image_index().is_some(), "{name} in window");
                assert_eq!(Reg::from_addr(r.addr()), Some(r));
                let got = r.name().unwrap();
                assert_eq!(got.0, name);
            }
        }
        extern crate std;
        use std::string::ToString;
        assert_eq!(
            kdma::COEFF_BASE_ADDR.at(3).to_string(),
            "KernelDMASrc.CoeffBaseAddr[3] (address 0x1f854)"
        );
        assert_eq!(common::WORD_2C.to_string(), "Common+0x2c (address 0x0002c)");
        assert_eq!(Reg::from_addr(0x1F8F8), None);
        assert_eq!(Reg::from_addr(0x2), None);
        assert_eq!(Reg::new(Block::Pe, 0x10).image_index(), None);
    }
}
