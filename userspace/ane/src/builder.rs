// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A builder of H13 programs: task descriptor chains and coefficient
//! buffers for a few operations, in the form Apple's compilers (v4.2.1 to
//! v7.6.4) emit them.
//!
//! Every TD is the standard 0x274-byte descriptor: the ten header words and
//! the seven full register streams (KernelDMASrc `0xF401F800`, Common,
//! TileDMASrc, L2, PE, NE, TileDMADst), every register written in every TD;
//! TDs are laid out 0x300 apart and linked by NextPointer/NextSize, the last
//! one carrying EON (`shared/reference/td.md` §1.1, §3.3). The register
//! values follow the compiled fixtures (`td.md` §1.4–§1.6); the oracle test
//! (`builder/oracle.rs`) compares the builder's TDs with every
//! Apple-compiled fixture of the same op and shape, register by register,
//! and lists every remaining difference with its reason.
//!
//! # Operations
//!
//! | builder | engine | TDs |
//! |---|---|---|
//! | [`add`], [`mul`], [`max`], [`min`] | planar engine, two sources (OpMode 0 / 1 / 2 / 3) | 1 |
//! | [`square`], [`abs`] | planar engine mul of one source by itself / one-source abs (eiln's square, abs) | 1 |
//! | [`sub`], [`mean`] | planar engine add with PreScale −1 on `b` / Scale 0.5 (eiln's sub, ave) | 1 |
//! | [`relu`] | neural engine pass-through with NonlinearMode 1 (tinygrad's relu) | 1 |
//! | [`sigmoid`], [`gelu`] | neural engine pass-through with the table non-linearity ([`sigmoid_table`], [`gelu_table`]) | 1 |
//! | [`concat`] | two neural engine pass-through copies into channel ranges of the output | 2 |
//! | [`add_mul`] | `t = a + b`, then `out = t · c` | 2 |
//! | [`select`] | the chain below | 4 |
//! | [`conv1x1`], [`linear`] | neural engine 1×1 convolution, fp16 coefficients through kernel DMA | 1 |
//! | [`conv1x1_with`], [`linear_with`] | the same, followed by an [`Activation`] (ReLU) | 1 |
//!
//! Elementwise operations take any [`Shape`]: the N·C planes are contiguous
//! in the ANE layout, so a TD sees them as one tensor of N·C channels.
//!
//! **select** (`out = cond ? a : b`) has no engine mode, so it is an exact
//! memory-to-memory chain of planar-engine TDs built from min/max and an
//! infinite mask:
//!
//! 1. `X = (2·cond − 1) · ∞` (one source: Scale 2, Bias −1, FinalScale +∞):
//!    `+∞` where `cond = 1`, `−∞` where `cond = 0`;
//! 2. `u = min(X, a)`: `a` or `−∞`;
//! 3. `v = min(−X, b)` (PreScale −1 on X): `−∞` or `b`;
//! 4. `out = max(u, v)`.
//!
//! Every step returns one of its inputs unchanged, so the result is exact,
//! signed zeros, subnormals and infinities included, for `cond ∈ {+0, −0,
//! 1}` and any non-NaN `a`, `b`. (A NaN in `a` or `b` propagates to the
//! output even where it is not selected; a `cond` of 0.5 or NaN gives NaN.)
//! The multiply-based chain `c·a + (1−c)·b` was not used: it turns
//! `−0` into `+0` and `∞` into NaN.
//!
//! # BAR slots
//!
//! | slot | use |
//! |---|---|
//! | 0 | the TD chain (the driver's) |
//! | 1 | the coefficients (the driver's, at `round_up(tsk_size, 16)`) |
//! | 3 | scratch: the intermediates of a chain, each at its own 64-byte aligned offset (`k · tiled_bytes`), as the compilers place theirs in one `__bss` buffer |
//! | 4 | the output |
//! | 5, 6, 7 | the inputs, in argument order (`a`, `b`, `c`; `cond`, `a`, `b`; `x`) |
//!
//! This is the anecc convention (`td.md` §1.3): outputs from 4, then the
//! inputs, intermediates in slot 3. [`Program::tensors`] lists each slot
//! with its [`Direction`]; the scratch slot is both read and written.
//!
//! # Neural engine
//!
//! Convolution coefficients are `[Cout][Cin]` fp16 (the layout of
//! [`reference::conv1x1`](crate::reference::conv1x1)). Output channels are
//! spread over the 16 coefficient DMA channels in groups of `2^OCGSize`,
//! OCGSize the smallest that fits (`Cout ≤ 16 · 2^OCGSize`, so at most 2048
//! output channels); channel `k` holds output channels `k·2^OCGSize ..`,
//! one row of `round_up(2·Cin, 64)` bytes each, at `k · chunk` of the
//! coefficient buffer (chunk = `2^OCGSize · row`). This is the tinygrad
//! conv (3 channels of one row) and gemm (16 channels of 32 rows) layout,
//! and the order inside a channel is the engine model's
//! [`WeightOrder::Blocked`](crate::hw::engine::WeightOrder) (the fixtures'
//! weights are all equal, so hardware has not decided it, `td.md` §2.3).
//!
//! **ReLU** is the neural engine's built-in non-linearity: MACCfg
//! NonlinearMode (bits 16–17, tinygrad's "NeuronType" 0x11) = 1, applied
//! after PostScale and before the single rounding to fp16, with no
//! coefficient load (`td.md` §1.4: tinygrad's relu has MACCfg `0x11000C`,
//! an espresso-compiled 1×1 convolution with ReLU `0x111C0C`; the engine
//! model, `hw/engine/exec.rs` `run_ne`, maps the code to `Act::Relu`).
//! Since ReLU is monotonic and maps every value `≤ 0` to `+0`, rounding
//! after it equals rounding before it: `fp16(relu(s)) = relu(fp16(s))`,
//! the reference's order.
//!
//! [`linear`] is a 1×1 convolution with the batch as the spatial width, as
//! the gemm fixture does with its batch of 1: its input tensor is
//! `(1, in_features, 1, batch)` and its output `(1, out_features, 1,
//! batch)`, i.e. the transpose of the `[batch][features]` arrays;
//! [`linear_input_to_nchw`] and [`linear_output_from_nchw`] convert.
//!
//! # What is a guess
//!
//! The engine model ignores the L2 registers, TileCfg, the Common Cfg
//! scheduling bits, cache hints and DependencyMode; hardware does not.
//! Their values here are the fixtures' for the fixtures' shapes, and
//! otherwise the rules `td.md` §1.6 fits to the fixtures, extended where
//! it says "not found" (the L2 row-stride padding, TileHeight above one
//! row, the Cfg bits): see the private `l2` module. The chains use the
//! dependency and cache-hint values of the compiled eiln multi-TD kernels
//! for sources that read an intermediate and destinations that write one.
//! None of it has been run on hardware.

use half::f16;
use serde::Serialize;

use crate::hw::td::header;
use crate::hw::td::regs::{self, common, kdma, l2 as l2r, ne, pe, tile_dst, tile_src, Block};
use crate::hw::td::regs::{PeOp, Reg};
use crate::hw::td::{
    ProgramSummary, RegImage, TdError, HEADER_WORDS, TD_SIZE_STANDARD, TD_STRIDE_STANDARD,
};
use crate::tensor::{Shape, ShapeError, BUFFER_GRANULE};

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;

/// BAR slot of the scratch (intermediate) buffer.
pub const SLOT_SCRATCH: u32 = 3;
/// BAR slot of the output.
pub const SLOT_OUTPUT: u32 = 4;
/// BAR slot of the first input; further inputs follow.
pub const SLOT_FIRST_INPUT: u32 = 5;

/// Largest width or height: InDim/OutDim hold 15 bits each.
pub const MAX_SPATIAL: usize = 0x7FFF;
/// Largest channel count of one TD: Cin/Cout hold 17 bits.
pub const MAX_CHANNELS: usize = 0x1_FFFF;
/// Largest OCGSize (a 3-bit field): up to 128 output channels per
/// coefficient channel.
pub const MAX_OCG_LOG: u32 = 7;
/// Largest number of convolution output channels: 16 coefficient
/// channels of 2^7 rows.
pub const MAX_CONV_OUT: usize = (kdma::COEFF_CHANNELS as usize) << MAX_OCG_LOG;
/// No DMA may reach past 4 GiB from its slot (addresses and strides are
/// 32-bit registers).
pub const MAX_EXTENT: u64 = 1 << 32;

/// How a program uses a tensor slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Direction {
    /// Read only: an input.
    In,
    /// Written (last): an output.
    Out,
    /// Written and read back: intermediates.
    Scratch,
}

/// One buffer the program needs bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TensorSlot {
    /// Its name (`a`, `b`, `cond`, `x`, `out`, `scratch`, …).
    pub name: &'static str,
    /// The BAR slot.
    pub slot: u32,
    /// How the program uses it.
    pub direction: Direction,
    /// The tensor's shape (for the scratch slot: the shape of each
    /// intermediate it holds).
    pub shape: Shape,
    /// Bytes to bind: a multiple of 16 KiB covering every access.
    pub buffer_size: u64,
}

/// A built program: what `DRM_IOCTL_ANE_PROGRAM_CREATE` takes, and the
/// tensors to bind at EXEC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Program {
    /// Bytes per TD (0x274).
    pub td_size: u32,
    /// Number of TDs.
    pub td_count: u32,
    /// The task stream: `(td_count − 1) · 0x300 + 0x274` bytes.
    #[serde(skip)]
    pub tsk: Vec<u8>,
    /// The coefficients (BAR slot 1), empty when none are used.
    #[serde(skip)]
    pub weights: Vec<u8>,
    /// Every slot to bind: inputs, the output, scratch.
    pub tensors: Vec<TensorSlot>,
}

impl Program {
    /// Bytes of the task stream.
    pub fn tsk_size(&self) -> u64 {
        self.tsk.len() as u64
    }

    /// Offset of the weights in [`Program::image`]: `round_up(tsk_size, 16)`,
    /// where the driver's BAR 1 points.
    pub fn weights_offset(&self) -> u64 {
        self.tsk_size().div_ceil(16) * 16
    }

    /// The program range PROGRAM_CREATE copies: the task stream, zeros up
    /// to a multiple of 16 bytes, then the weights.
    pub fn image(&self) -> Vec<u8> {
        let woff = usize::try_from(self.weights_offset()).unwrap_or(usize::MAX);
        let mut v = Vec::with_capacity(woff.saturating_add(self.weights.len()));
        v.extend_from_slice(&self.tsk);
        v.resize(woff, 0);
        v.extend_from_slice(&self.weights);
        v
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorSlot> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The inputs, in slot order.
    pub fn inputs(&self) -> impl Iterator<Item = &TensorSlot> {
        self.tensors.iter().filter(|t| t.direction == Direction::In)
    }

    /// The outputs, in slot order.
    pub fn outputs(&self) -> impl Iterator<Item = &TensorSlot> {
        self.tensors
            .iter()
            .filter(|t| t.direction == Direction::Out)
    }

    /// Runs the kernel's validator (`hw::td`) over the task stream.
    pub fn validate(&self) -> Result<ProgramSummary, TdError> {
        crate::hw::td::Program::new(&self.tsk, self.td_size, self.td_count)?.validate()
    }
}

/// Why a program cannot be built. Each names the argument or field at
/// fault and its value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A dimension is zero.
    #[error("{field} is 0; it must be at least 1")]
    Zero {
        /// The argument.
        field: &'static str,
    },
    /// A dimension or size is beyond what the engine's registers hold.
    #[error("{field} = {value} exceeds the engine's limit of {max}")]
    TooLarge {
        /// The argument or derived quantity.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// The coefficients have the wrong number of elements.
    #[error("{field} holds {found} values, {expected} expected ({shape})")]
    Length {
        /// The argument.
        field: &'static str,
        /// Required count.
        expected: usize,
        /// Actual count.
        found: usize,
        /// What the count is made of.
        shape: &'static str,
    },
    /// Operands whose shapes do not fit together.
    #[error("{field}: {reason}")]
    Mismatch {
        /// The operand.
        field: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// A tensor shape is not valid.
    #[error("{field}: {source}")]
    Shape {
        /// Which tensor.
        field: &'static str,
        /// Why.
        source: ShapeError,
    },
}

/// The non-linearity after a neural engine operation (MACCfg
/// NonlinearMode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum Activation {
    /// Pass-through (NonlinearMode 0).
    #[default]
    None,
    /// `max(x, 0)`, `−0` and negatives to `+0` (NonlinearMode 1).
    Relu,
    /// The logistic function through the engine's table
    /// ([`sigmoid_table`], NonlinearMode 2, loaded by kernel DMA channel
    /// 0); only on a pass-through ([`sigmoid`]).
    Sigmoid,
    /// `x · Φ(x)` through the engine's table ([`gelu_table`], as
    /// [`Activation::Sigmoid`]); only on a pass-through ([`gelu`]).
    Gelu,
    /// `min(max(x, lo), hi)` (fp16 bits) through a table without samples
    /// ([`clip_table`]); only on a pass-through ([`clip`]).
    Clip {
        /// The lower bound's fp16 bits.
        lo: u16,
        /// The upper bound's fp16 bits.
        hi: u16,
    },
    /// `x` for `x > 0`, else `slope · x` (fp16 bits), through a table
    /// without samples ([`leaky_relu_table`]); only on a pass-through
    /// ([`leaky_relu`]).
    LeakyRelu {
        /// The negative slope's fp16 bits.
        slope: u16,
    },
}

impl Activation {
    /// The NonlinearMode code.
    pub fn nonlinear_mode(self) -> u32 {
        match self {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::Sigmoid
            | Activation::Gelu
            | Activation::Clip { .. }
            | Activation::LeakyRelu { .. } => 2,
        }
    }

    /// The table this activation loads through kernel DMA channel 0, if
    /// any.
    pub fn table(self) -> Option<[u8; LUT_BYTES as usize]> {
        match self {
            Activation::None | Activation::Relu => None,
            Activation::Sigmoid => Some(sigmoid_table()),
            Activation::Gelu => Some(gelu_table()),
            Activation::Clip { lo, hi } => Some(clip_table(lo, hi)),
            Activation::LeakyRelu { slope } => Some(leaky_relu_table(slope)),
        }
    }
}

// ---------------------------------------------------------------------------
// Register values taken from the fixtures (td.md §1.4).

/// fp16 1.0.
pub(crate) const F16_ONE: u16 = 0x3C00;
/// +∞ and −∞ in binary16.
const F16_INF: u16 = 0x7C00;
const F16_NEG_INF: u16 = 0xFC00;
/// fp16 −1.0 and 0.5.
pub(crate) const F16_MINUS_ONE: u16 = 0xBC00;
pub(crate) const F16_HALF: u16 = 0x3800;
/// fp32 1.0.
pub(crate) const F32_ONE: u32 = 0x3F80_0000;
/// fp32 +∞.
const F32_INF: u32 = 0x7F80_0000;

/// W2 LogEvents of the last TD / of the others.
const W2_LAST: u32 = 0x422;
const W2_MORE: u32 = 0x400;
/// W4 DebugLogEvents of the last TD, of a first TD that is not the last,
/// and of the ones in between (eiln's compiled chains).
const W4_LAST: u32 = 0xFF_F86A;
const W4_FIRST: u32 = 0xFF_F868;
const W4_MIDDLE: u32 = 0xFF_F800;
/// W6: SPL, TSR, TSE, SrcLoc, DstLoc (memory to memory).
const W6: u32 = 0x3000_9800;
/// W9 of a convolution: KBase0 = slot 1, enabled.
const W9_KERNEL: u32 = 0x21;

/// Tile DMA source DMAConfig: enabled, the compilers' cache hints; with
/// DependencyMode 1 when it reads what an earlier TD wrote (eiln chains).
const TSRC_CFG: u32 = 0x3_3881;
const TSRC_CFG_DEP: u32 = 0x7_3881;
/// The inferred second source's DMAConfig with two / one sources.
const TSRC1_CFG: u32 = 0x3_3880;
const TSRC1_CFG_DEP: u32 = 0x7_3880;
const TSRC1_CFG_NONE: u32 = 0x8880;
/// Tile DMA Fmt: FmtMode 1, Truncate 3, MemFmt fp16, Interleave 1.
const TSRC_FMT: u32 = 0x100_2031;
/// The inferred second source's Fmt.
const TSRC1_FMT: u32 = 0x2030;
/// TileDMASrc+0x40 on neural engine TDs.
const TSRC_W40_NE: u32 = 0x100;
/// Destination DMAConfig: planar engine (L2BfrMode) / convolution; cache
/// hint 0xF when it writes an intermediate (eiln chains).
const TDST_CFG_PE: u32 = 0x400_00C1;
const TDST_CFG_CONV: u32 = 0xC1;
const TDST_CFG_SCRATCH_BITS: u32 = 0x300;
/// Destination Fmt with ZeroPadFirst/ZeroPadLast.
const TDST_FMT: u32 = 0x130_2031;

/// ConvCfg 1×1, stride 1, no padding, Ox = Oy = 1.
const CONV_CFG: u32 = 0x5000_A021;
/// ChCfg: fp16 in, (fp16 second input,) fp16 out.
const CH_CFG_ONE: u32 = 0x22;
const CH_CFG_TWO: u32 = 0x2A;
/// Common+0x20.
const COMMON_W20: u32 = 0x2041;
/// Common+0x2C on planar engine TDs.
const COMMON_W2C_PE: u32 = 4;
/// GroupConvCfg: one group, UnicastCin 1.
const GROUP_CONV: u32 = 0x1_0001;
/// Common Cfg of the two-source / one-source planar engine TDs (tinygrad
/// sum; eiln abs).
const CFG_PE_TWO: u32 = 0x33;
const CFG_PE_ONE: u32 = 0x21;
/// TaskInfo of neural engine TDs.
const TASK_INFO_NE: u32 = 0x10_0000;
/// Kernel DMA word 0 when coefficients load; CoeffDMAConfig enabled /
/// disabled (cache hint 2); the size of an unused channel.
const KDMA_W0: u32 = 0x40;
const COEFF_ON: u32 = 0x81;
const COEFF_OFF: u32 = 0x80;
const COEFF_OFF_SIZE: u32 = 0x40;
/// NE KernelCfg fp16 weights; MACCfg of a convolution (BinaryPoint 0x1C,
/// bit 20); PostScale 1.0.
const KERNEL_CFG_F16: u32 = 0x82;
const MAC_CFG_CONV: u32 = 0x10_1C00;
const POST_SCALE_ONE: u32 = 0x3C00;

// ---------------------------------------------------------------------------
// Plans

/// A place in a BAR slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) slot: u32,
    pub(crate) offset: u32,
}

/// One planar engine TD.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PeTask {
    pub(crate) op: PeOp,
    pub(crate) src0: Loc,
    pub(crate) src1: Option<Loc>,
    pub(crate) dst: Loc,
    /// PreScale, Scale, Bias as fp16 bits; FinalScale as fp32 bits.
    pub(crate) pre: u16,
    pub(crate) scale: u16,
    pub(crate) bias: u16,
    pub(crate) fin: u32,
    /// `|PreScale · a|` of a one-source op (PE Cfg bit 6, eiln's abs).
    pub(crate) abs: bool,
}

impl PeTask {
    /// `op` of two sources with unit scales, no bias.
    pub(crate) fn two(op: PeOp, src0: Loc, src1: Loc, dst: Loc) -> PeTask {
        PeTask {
            op,
            src0,
            src1: Some(src1),
            dst,
            pre: F16_ONE,
            scale: F16_ONE,
            bias: 0,
            fin: F32_ONE,
            abs: false,
        }
    }

    /// One source passed through (an add with no second source), or its
    /// absolute value when `abs`.
    pub(crate) fn one(src: Loc, dst: Loc, abs: bool) -> PeTask {
        PeTask {
            src1: None,
            abs,
            ..PeTask::two(PeOp::Add, src, src, dst)
        }
    }
}

/// The TD-level geometry of a tensor in the ANE layout (strides in bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geom {
    pub(crate) c: u32,
    pub(crate) h: u32,
    pub(crate) w: u32,
    pub(crate) row: u32,
    pub(crate) plane: u32,
    /// `c · plane`: the tiled bytes, the DepthStride the compilers write.
    pub(crate) bytes: u32,
}

impl Geom {
    /// The geometry of `shape` with N·C channels, checked against the
    /// register widths. `what` names the tensor in errors.
    pub(crate) fn new(shape: &Shape, what: &'static str) -> Result<Geom, BuildError> {
        let l = shape.layout();
        let c = shape
            .n()
            .checked_mul(shape.c())
            .ok_or(BuildError::TooLarge {
                field: what,
                value: u64::MAX,
                max: MAX_CHANNELS as u64,
            })?;
        limit(what_c(what), c, MAX_CHANNELS)?;
        limit(what_h(what), shape.h(), MAX_SPATIAL)?;
        limit(what_w(what), shape.w(), MAX_SPATIAL)?;
        let bytes = l.tiled_bytes() as u64;
        if bytes >= MAX_EXTENT {
            return Err(BuildError::TooLarge {
                field: what_bytes(what),
                value: bytes,
                max: MAX_EXTENT - 1,
            });
        }
        // Every quantity below is at most `bytes` < 2^32.
        Ok(Geom {
            c: c as u32,
            h: shape.h() as u32,
            w: shape.w() as u32,
            row: l.row_stride() as u32,
            plane: l.plane_stride() as u32,
            bytes: bytes as u32,
        })
    }

    fn dim(&self) -> u32 {
        regs::Dim(0)
            .with(regs::Dim::W, self.w)
            .with(regs::Dim::H, self.h)
            .0
    }

    /// Rows per hardware tile (TileCfg TileHeight): 1 for the fixtures'
    /// single rows, 32 for eiln's and atan2's tall planar tensors.
    fn tile_height(&self) -> u32 {
        self.h.min(32)
    }
}

fn limit(field: &'static str, value: usize, max: usize) -> Result<(), BuildError> {
    if value == 0 {
        return Err(BuildError::Zero { field });
    }
    if value > max {
        return Err(BuildError::TooLarge {
            field,
            value: value as u64,
            max: max as u64,
        });
    }
    Ok(())
}

// Field names for errors, by tensor.
fn what_c(what: &'static str) -> &'static str {
    match what {
        "shape" => "shape N·C",
        "cin" => "cin",
        "cout" => "cout",
        "in_features" => "in_features",
        "out_features" => "out_features",
        _ => "channels",
    }
}
fn what_h(what: &'static str) -> &'static str {
    match what {
        "shape" => "shape H",
        _ => "h",
    }
}
fn what_w(what: &'static str) -> &'static str {
    match what {
        "shape" => "shape W",
        "in_features" | "out_features" => "batch",
        _ => "w",
    }
}
fn what_bytes(what: &'static str) -> &'static str {
    match what {
        "shape" => "shape (tiled bytes)",
        "in_features" => "input tensor (tiled bytes)",
        "out_features" => "output tensor (tiled bytes)",
        "cin" => "input tensor (tiled bytes)",
        _ => "output tensor (tiled bytes)",
    }
}

/// L2 (on-engine buffer) layout: the rules fitted to the fixtures
/// (`td.md` §1.6). The engine model does not read these registers.
mod l2 {
    /// Channel stride in L2: the row rounded to 16 bytes (0x10 for W = 1,
    /// 0xA0 for W = 77), at most 0x400 (eiln's W = 1600).
    pub(super) fn channel_stride(w: u32) -> u32 {
        w.saturating_mul(2)
            .div_ceil(16)
            .saturating_mul(16)
            .min(0x400)
    }

    /// Padding after a planar two-source row: 0x20 in tinygrad's sum
    /// (C = 64), none in eiln's (C = 1).
    pub(super) fn pe_pad(c: u32) -> u32 {
        if c > 1 {
            0x20
        } else {
            0
        }
    }

    /// Padding of a convolution source / result row: 0x30 / 0x20 in the
    /// gemm (0x2000-byte rows), none in the 3-channel conv.
    pub(super) fn conv_pad(bytes: u32, pad: u32) -> u32 {
        if bytes >= 0x400 {
            pad
        } else {
            0
        }
    }

    /// SourceCfg / ResultCfg. The first TD of a chain has AliasPlanarSrc
    /// and AliasPlanarRslt (bits 20, 22) set, later ones not (tinygrad
    /// concat, eiln chains); bit 24 marks two sources.
    pub(super) fn source_cfg(first: bool, two: bool) -> u32 {
        let mut v = 0x172;
        if first {
            v |= 0x50_0000;
        }
        if two {
            v |= 0x100_0000;
        }
        v
    }

    /// ResultCfg: L2BfrMode (bit 3) on planar and pass-through results,
    /// not on convolutions.
    pub(super) fn result_cfg(first: bool, conv: bool) -> u32 {
        let mut v = if conv { 0x172 } else { 0x17A };
        if first {
            v |= 0x50_0000;
        }
        v
    }
}

/// A TD being built: header words and the full register image.
struct TdBuild {
    words: [u32; HEADER_WORDS],
    img: RegImage,
}

impl TdBuild {
    /// Every register of every block written as 0 (the compilers write the
    /// whole window).
    fn new() -> TdBuild {
        let mut img = RegImage::new();
        for b in Block::ALL {
            for i in 0..b.words() {
                img.set(Reg::new(b, 4 * i), 0);
            }
        }
        TdBuild {
            words: [0; HEADER_WORDS],
            img,
        }
    }

    fn set(&mut self, reg: Reg, value: u32) {
        // Every Reg used here is a named register inside its window.
        let _ = self.img.set(reg, value);
    }

    fn w8(&mut self, field: regs::Field, value: u32) {
        self.words[8] = field.put(self.words[8], value);
    }

    /// Common registers shared by every TD: dimensions, depth 1, ConvCfg,
    /// one group, one-row tiles.
    fn common(&mut self, input: &Geom, output: &Geom, ocg_log: u32) {
        self.set(common::IN_DIM, input.dim());
        self.set(common::IN_DEPTH, 1);
        self.set(common::CIN, input.c);
        self.set(common::COUT, output.c);
        self.set(common::OUT_DIM, output.dim());
        self.set(common::OUT_DEPTH, 1);
        self.set(
            common::CONV_CFG,
            regs::ConvCfg(CONV_CFG)
                .with(regs::ConvCfg::OCG_SIZE, ocg_log)
                .0,
        );
        self.set(common::WORD_20, COMMON_W20);
        self.set(common::GROUP_CONV_CFG, GROUP_CONV);
        self.set(common::TILE_CFG, input.tile_height());
    }

    /// Tile DMA source `i` at `loc`.
    fn source(&mut self, i: u32, loc: Loc, g: &Geom, dep: bool) {
        let [base, row, plane, depth, group] = tile_src::surface(i);
        self.set(base, loc.offset);
        self.set(row, g.row);
        self.set(plane, g.plane);
        self.set(depth, g.bytes);
        self.set(group, 0);
        if i == 0 {
            self.set(
                tile_src::DMA_CONFIG,
                if dep { TSRC_CFG_DEP } else { TSRC_CFG },
            );
            self.set(tile_src::FMT, TSRC_FMT);
            self.w8(header::RBASE0, loc.slot);
            self.w8(header::RBE0, 1);
        } else {
            self.set(
                tile_src::SRC1_DMA_CONFIG,
                if dep { TSRC1_CFG_DEP } else { TSRC1_CFG },
            );
            self.set(tile_src::SRC1_FMT, TSRC1_FMT);
            self.w8(header::RBASE1, loc.slot);
            self.w8(header::RBE1, 1);
        }
    }

    /// The tile DMA destination at `loc`.
    fn dest(&mut self, loc: Loc, g: &Geom, cfg: u32) {
        self.set(tile_dst::DMA_CONFIG, cfg);
        self.set(tile_dst::BASE_ADDR, loc.offset);
        self.set(tile_dst::ROW_STRIDE, g.row);
        self.set(tile_dst::PLANE_STRIDE, g.plane);
        self.set(tile_dst::DEPTH_STRIDE, g.bytes);
        self.set(tile_dst::GROUP_STRIDE, 0);
        self.set(tile_dst::FMT, TDST_FMT);
        self.w8(header::WBASE, loc.slot);
        self.w8(header::WBE, 1);
    }

    /// The TD's bytes: header, then the seven full streams.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(TD_SIZE_STANDARD as usize);
        for w in self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for b in Block::ALL {
            out.extend_from_slice(&b.full_stream_header().to_le_bytes());
            for v in self.img.block_words(b) {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }
}

/// Header words W0..W7 of TD `k` of `n` (W8/W9 are set per operation).
fn chain_header(td: &mut TdBuild, k: u32, n: u32) {
    let last = k + 1 == n;
    let mut w0 = header::TID.put(0, k);
    if k > 0 {
        w0 = header::LNID.put(w0, 1);
    }
    if last {
        w0 = header::EON.put(w0, 1);
    }
    td.words[0] = w0;
    td.words[1] = if last {
        0
    } else {
        header::NEXT_SIZE.put(0, TD_SIZE_STANDARD / 4 - 1)
    };
    td.words[2] = if last { W2_LAST } else { W2_MORE };
    td.words[4] = if last {
        W4_LAST
    } else if k == 0 {
        W4_FIRST
    } else {
        W4_MIDDLE
    };
    td.words[6] = W6;
    td.words[7] = if last {
        0
    } else {
        (k + 1) * TD_STRIDE_STANDARD
    };
    if !last {
        // TBase 0 with TBE on every TD that is followed by another
        // (tinygrad concat, eiln chains).
        td.words[8] = header::TBE.put(td.words[8], 1);
    }
}

/// Lays out TDs 0x300 apart.
fn assemble(tds: &[TdBuild]) -> Vec<u8> {
    let n = tds.len();
    let mut tsk = vec![0u8; (n.saturating_sub(1)) * TD_STRIDE_STANDARD as usize];
    tsk.resize(
        (n.saturating_sub(1)) * TD_STRIDE_STANDARD as usize + TD_SIZE_STANDARD as usize,
        0,
    );
    for (k, td) in tds.iter().enumerate() {
        let at = k * TD_STRIDE_STANDARD as usize;
        let bytes = td.encode();
        tsk[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    tsk
}

/// Rounds up to the 16 KiB buffer granule.
pub(crate) fn granule(bytes: u64) -> u64 {
    bytes.div_ceil(BUFFER_GRANULE as u64) * BUFFER_GRANULE as u64
}

/// Builds a chain of planar engine TDs over tensors of geometry `g`.
fn pe_program(tasks: &[PeTask], g: &Geom, tensors: Vec<TensorSlot>) -> Program {
    let steps: Vec<Step> = tasks.iter().map(|t| Step::Pe(*t, *g)).collect();
    chain_program(&steps, tensors, Vec::new())
}

/// One TD of a chain.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// A planar engine TD over tensors of one geometry.
    Pe(PeTask, Geom),
    /// A neural engine TD from the first geometry to the second.
    Ne(NeTask, Geom, Geom),
}

/// The program running `steps` in order, one TD each, with `weights` in
/// slot 1.
pub(crate) fn chain_program(steps: &[Step], tensors: Vec<TensorSlot>, weights: Vec<u8>) -> Program {
    let n = steps.len() as u32;
    let mut written: Vec<u32> = Vec::new();
    let mut tds = Vec::with_capacity(steps.len());
    for (k, s) in steps.iter().enumerate() {
        let k = k as u32;
        let (td, dst) = match s {
            Step::Pe(t, g) => (pe_td(t, g, k, n, &written), t.dst),
            Step::Ne(t, gi, go) => (ne_td(t, gi, go, k, n, &written), t.dst),
        };
        written.push(dst.slot);
        tds.push(td);
    }
    Program {
        td_size: TD_SIZE_STANDARD,
        td_count: n,
        tsk: assemble(&tds),
        weights,
        tensors,
    }
}

/// TD `k` of `n` running `t` over tensors of geometry `g`. Sources that
/// read what an earlier TD wrote (`written`) get DependencyMode 1;
/// destinations in the scratch slot get the intermediate cache hint.
fn pe_td(t: &PeTask, g: &Geom, k: u32, n: u32, written: &[u32]) -> TdBuild {
    let first = k == 0;
    let two = t.src1.is_some();
    let mut td = TdBuild::new();
    chain_header(&mut td, k, n);
    td.common(g, g, 0);
    td.set(common::CH_CFG, if two { CH_CFG_TWO } else { CH_CFG_ONE });
    td.set(common::WORD_2C, COMMON_W2C_PE);
    td.set(common::CFG, if two { CFG_PE_TWO } else { CFG_PE_ONE });
    td.source(0, t.src0, g, written.contains(&t.src0.slot));
    match t.src1 {
        Some(s1) => td.source(1, s1, g, written.contains(&s1.slot)),
        None => td.set(tile_src::SRC1_DMA_CONFIG, TSRC1_CFG_NONE),
    }
    let scratch = t.dst.slot == SLOT_SCRATCH;
    let cfg = TDST_CFG_PE | if scratch { TDST_CFG_SCRATCH_BITS } else { 0 };
    td.dest(t.dst, g, cfg);

    // L2.
    let ch = l2::channel_stride(g.w);
    let cbytes = g.c.saturating_mul(ch);
    let pad = if two { l2::pe_pad(g.c) } else { 0 };
    let srow = cbytes.saturating_add(pad);
    let rows = srow.saturating_mul(g.tile_height());
    td.set(l2r::SOURCE_CFG, l2::source_cfg(first, two));
    td.set(l2r::SOURCE_CHANNEL_STRIDE, ch);
    td.set(l2r::SOURCE_ROW_STRIDE, srow);
    td.set(l2r::WORD_14, cbytes);
    td.set(l2r::WORD_18, cbytes);
    let result_base = if two {
        let src1 = rows.saturating_add(pad);
        td.set(l2r::SRC1_BASE, src1);
        td.set(l2r::SRC1_CHANNEL_STRIDE, ch);
        td.set(l2r::SRC1_ROW_STRIDE, srow);
        td.set(l2r::SRC1_WORD_28, cbytes);
        td.set(l2r::SRC1_WORD_2C, cbytes);
        src1.saturating_add(rows)
    } else {
        rows
    };
    td.set(l2r::RESULT_CFG, l2::result_cfg(first, false));
    td.set(l2r::RESULT_BASE, result_base);

    // The planar engine.
    let op = match t.op {
        PeOp::Add => 0,
        PeOp::Mul => 1,
        PeOp::Max => 2,
        PeOp::Min => 3,
    };
    let mut cfg = regs::PeCfg(0).with(regs::PeCfg::OP_MODE, op);
    if two {
        cfg = cfg.with(regs::PeCfg::SEC_SRC, 2);
    }
    if t.abs {
        cfg = cfg.with(regs::PeCfg::COND, 1);
    }
    td.set(pe::CFG, cfg.0);
    td.set(
        pe::BIAS_SCALE,
        regs::PeBiasScale(0)
            .with(regs::PeBiasScale::SCALE, u32::from(t.scale))
            .with(regs::PeBiasScale::BIAS, u32::from(t.bias))
            .0,
    );
    td.set(
        pe::PRE_SCALE,
        regs::PePreScale(0)
            .with(regs::PePreScale::SCALE, u32::from(t.pre))
            .0,
    );
    td.set(pe::FINAL_SCALE, t.fin);
    td
}

pub(crate) fn slot_of(
    shape: &Shape,
    name: &'static str,
    slot: u32,
    direction: Direction,
) -> TensorSlot {
    TensorSlot {
        name,
        slot,
        direction,
        shape: *shape,
        buffer_size: shape.layout().buffer_size() as u64,
    }
}

fn input(k: u32) -> Loc {
    Loc {
        slot: SLOT_FIRST_INPUT + k,
        offset: 0,
    }
}

const OUT: Loc = Loc {
    slot: SLOT_OUTPUT,
    offset: 0,
};

/// The scratch slot holding `count` intermediates of geometry `g`, and
/// the place of intermediate `k`.
fn scratch(shape: &Shape, g: &Geom, count: u32) -> Result<(TensorSlot, Vec<Loc>), BuildError> {
    let total = u64::from(g.bytes) * u64::from(count);
    if total > MAX_EXTENT {
        return Err(BuildError::TooLarge {
            field: "shape (scratch bytes)",
            value: total,
            max: MAX_EXTENT,
        });
    }
    // k · bytes < 2^32 for k < count; bytes is a multiple of 64.
    let locs = (0..count)
        .map(|k| Loc {
            slot: SLOT_SCRATCH,
            offset: k * g.bytes,
        })
        .collect();
    let t = TensorSlot {
        name: "scratch",
        slot: SLOT_SCRATCH,
        direction: Direction::Scratch,
        shape: *shape,
        buffer_size: granule(total),
    };
    Ok((t, locs))
}

fn sorted(mut v: Vec<TensorSlot>) -> Vec<TensorSlot> {
    v.sort_by_key(|t| t.slot);
    v
}

fn binary(shape: &Shape, op: PeOp) -> Result<Program, BuildError> {
    binary_task(shape, PeTask::two(op, input(0), input(1), OUT))
}

/// One planar task over inputs `a` (slot 5) and `b` (slot 6) into `out`
/// (slot 4).
fn binary_task(shape: &Shape, t: PeTask) -> Result<Program, BuildError> {
    let g = Geom::new(shape, "shape")?;
    let tensors = sorted(vec![
        slot_of(shape, "a", SLOT_FIRST_INPUT, Direction::In),
        slot_of(shape, "b", SLOT_FIRST_INPUT + 1, Direction::In),
        slot_of(shape, "out", SLOT_OUTPUT, Direction::Out),
    ]);
    Ok(pe_program(&[t], &g, tensors))
}

/// Elementwise `out = a + b` (planar engine; `a` in slot 5, `b` in slot 6,
/// `out` in slot 4).
pub fn add(shape: &Shape) -> Result<Program, BuildError> {
    binary(shape, PeOp::Add)
}

/// Elementwise `out = a · b` (slots as [`add`]).
pub fn mul(shape: &Shape) -> Result<Program, BuildError> {
    binary(shape, PeOp::Mul)
}

/// Elementwise `out = a − b` as eiln's compiled sub does it:
/// `(−1 · b) + a`, source 0 (PreScale's operand) reading `b`, source 1
/// `a` (slots as [`add`]). One rounding: `fp16(a − b)`.
pub fn sub(shape: &Shape) -> Result<Program, BuildError> {
    binary_task(
        shape,
        PeTask {
            pre: F16_MINUS_ONE,
            ..PeTask::two(PeOp::Add, input(1), input(0), OUT)
        },
    )
}

/// Elementwise mean `out = (a + b) · 0.5` (Scale 0.5, eiln's `ave`;
/// slots as [`add`]). The sum is rounded to binary32 before the halving,
/// which is exact, so the result is `fp16((a + b) / 2)` unless `a + b`
/// overflows binary32 (it cannot for fp16 operands).
pub fn mean(shape: &Shape) -> Result<Program, BuildError> {
    binary_task(
        shape,
        PeTask {
            scale: F16_HALF,
            ..PeTask::two(PeOp::Add, input(0), input(1), OUT)
        },
    )
}

/// Elementwise `out = a · a` as eiln's compiled square: a multiply whose
/// two sources read the one input (`x` in slot 5, `out` in slot 4).
pub fn square(shape: &Shape) -> Result<Program, BuildError> {
    let g = Geom::new(shape, "shape")?;
    let tensors = sorted(vec![
        slot_of(shape, "x", SLOT_FIRST_INPUT, Direction::In),
        slot_of(shape, "out", SLOT_OUTPUT, Direction::Out),
    ]);
    Ok(pe_program(
        &[PeTask::two(PeOp::Mul, input(0), input(0), OUT)],
        &g,
        tensors,
    ))
}

/// Elementwise `out = |x|` as eiln's compiled abs: a one-source planar op
/// with Cfg bit 6 (`x` in slot 5, `out` in slot 4); exact.
pub fn abs(shape: &Shape) -> Result<Program, BuildError> {
    let g = Geom::new(shape, "shape")?;
    let tensors = sorted(vec![
        slot_of(shape, "x", SLOT_FIRST_INPUT, Direction::In),
        slot_of(shape, "out", SLOT_OUTPUT, Direction::Out),
    ]);
    let t = PeTask {
        src1: None,
        abs: true,
        ..PeTask::two(PeOp::Add, input(0), input(0), OUT)
    };
    Ok(pe_program(&[t], &g, tensors))
}

/// Elementwise `out = max(a, b)` (slots as [`add`]).
pub fn max(shape: &Shape) -> Result<Program, BuildError> {
    binary(shape, PeOp::Max)
}

/// Elementwise `out = min(a, b)` (slots as [`add`]).
pub fn min(shape: &Shape) -> Result<Program, BuildError> {
    binary(shape, PeOp::Min)
}

/// `out = (a + b) · c`, two TDs: `t = a + b` into scratch slot 3, then
/// `out = t · c`. Inputs `a`, `b`, `c` in slots 5, 6, 7; each step rounds
/// to fp16, so the result is `fp16(fp16(a + b) · c)`.
pub fn add_mul(shape: &Shape) -> Result<Program, BuildError> {
    let g = Geom::new(shape, "shape")?;
    let (s, locs) = scratch(shape, &g, 1)?;
    let t = locs[0];
    let tensors = sorted(vec![
        slot_of(shape, "a", SLOT_FIRST_INPUT, Direction::In),
        slot_of(shape, "b", SLOT_FIRST_INPUT + 1, Direction::In),
        slot_of(shape, "c", SLOT_FIRST_INPUT + 2, Direction::In),
        slot_of(shape, "out", SLOT_OUTPUT, Direction::Out),
        s,
    ]);
    Ok(pe_program(
        &[
            PeTask::two(PeOp::Add, input(0), input(1), t),
            PeTask::two(PeOp::Mul, t, input(2), OUT),
        ],
        &g,
        tensors,
    ))
}

/// `out = cond ? a : b` for `cond ∈ {0, 1}`: the four-TD chain of the
/// module documentation, exact for non-NaN `a`, `b`. `cond`, `a`, `b` in
/// slots 5, 6, 7; the intermediates `X`, `u`, `v` at offsets 0, T, 2T of
/// scratch slot 3 (T the tiled tensor size).
pub fn select(shape: &Shape) -> Result<Program, BuildError> {
    let g = Geom::new(shape, "shape")?;
    let (s, locs) = scratch(shape, &g, 3)?;
    let (x, u, v) = (locs[0], locs[1], locs[2]);
    let tensors = sorted(vec![
        slot_of(shape, "cond", SLOT_FIRST_INPUT, Direction::In),
        slot_of(shape, "a", SLOT_FIRST_INPUT + 1, Direction::In),
        slot_of(shape, "b", SLOT_FIRST_INPUT + 2, Direction::In),
        slot_of(shape, "out", SLOT_OUTPUT, Direction::Out),
        s,
    ]);
    let mask = PeTask {
        op: PeOp::Add,
        src0: input(0),
        src1: None,
        dst: x,
        pre: F16_ONE,
        scale: 0x4000, // 2.0
        bias: 0xBC00,  // −1.0
        fin: F32_INF,
        abs: false,
    };
    let keep_a = PeTask::two(PeOp::Min, x, input(1), u);
    let keep_b = PeTask {
        pre: 0xBC00, // −1.0: min(−X, b)
        ..PeTask::two(PeOp::Min, x, input(2), v)
    };
    let merge = PeTask::two(PeOp::Max, u, v, OUT);
    Ok(pe_program(&[mask, keep_a, keep_b, merge], &g, tensors))
}

/// The coefficient layout of a convolution with `cin` inputs and `cout`
/// outputs (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLayout {
    /// log2 of the output channels per coefficient channel (OCGSize).
    pub ocg_log: u32,
    /// Coefficient channels in use.
    pub channels: u32,
    /// Bytes of one output channel's row: `round_up(2·cin, 64)`.
    pub row_bytes: u32,
    /// Bytes of one coefficient channel: `2^ocg_log · row_bytes`.
    pub chunk_bytes: u32,
}

impl KernelLayout {
    /// The layout for `cin` → `cout`, or why there is none.
    pub fn new(cin: usize, cout: usize) -> Result<KernelLayout, BuildError> {
        limit("cin", cin, MAX_CHANNELS)?;
        limit("cout", cout, MAX_CONV_OUT)?;
        let per = cout.div_ceil(kdma::COEFF_CHANNELS as usize);
        let ocg_log = per.next_power_of_two().trailing_zeros();
        let ocg = 1usize << ocg_log;
        let channels = cout.div_ceil(ocg) as u32;
        let row_bytes = (2 * cin).div_ceil(64) * 64;
        let chunk = row_bytes as u64 * ocg as u64;
        let total = chunk * u64::from(channels);
        if total >= MAX_EXTENT {
            return Err(BuildError::TooLarge {
                field: "weights (coefficient bytes)",
                value: total,
                max: MAX_EXTENT - 1,
            });
        }
        Ok(KernelLayout {
            ocg_log,
            channels,
            row_bytes: row_bytes as u32,
            chunk_bytes: chunk as u32,
        })
    }

    /// Bytes of the whole coefficient buffer.
    pub fn total_bytes(&self) -> usize {
        self.chunk_bytes as usize * self.channels as usize
    }

    /// Byte offset of weight `W[oc][ic]`.
    pub fn offset(&self, oc: usize, ic: usize) -> usize {
        let ch = oc >> self.ocg_log;
        let row = oc & ((1usize << self.ocg_log) - 1);
        ch * self.chunk_bytes as usize + row * self.row_bytes as usize + 2 * ic
    }

    /// Packs `[cout][cin]` weights.
    pub(crate) fn pack(&self, weights: &[f16], cin: usize) -> Vec<u8> {
        let mut buf = vec![0u8; self.total_bytes()];
        for (oc, row) in weights.chunks_exact(cin).enumerate() {
            for (ic, w) in row.iter().enumerate() {
                let at = self.offset(oc, ic);
                buf[at..at + 2].copy_from_slice(&w.to_bits().to_le_bytes());
            }
        }
        buf
    }
}

/// One neural engine TD.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NeTask {
    pub(crate) src: Loc,
    pub(crate) dst: Loc,
    /// The coefficient layout and the byte offset of its first channel in
    /// slot 1: a 1×1 convolution; `None`: a pass-through of each channel.
    pub(crate) kernel: Option<(KernelLayout, u32)>,
    pub(crate) act: Activation,
    /// Byte offset in slot 1 of the activation's table when it has one
    /// ([`Activation::table`]; a pass-through only).
    pub(crate) lut: u32,
    /// The whole destination tensor when the TD writes part of it (a
    /// channel range of a concat: `dst` is then the range's start and the
    /// destination strides are the whole tensor's).
    pub(crate) dst_whole: Option<Geom>,
}

/// The pass-through's registers where they differ from a convolution's
/// (tinygrad's relu, compiler v4.2.1): MACCfg OpMode 4 + KernelMode 1
/// (`0x11000C` without its NonlinearMode), KernelCfg without a kernel
/// format, Common Cfg, GroupConvCfg with UnicastEn (bit 14), and the
/// destination in L2BfrMode like a planar result.
const MAC_CFG_PASS: u32 = 0x10_000C;
const KERNEL_CFG_PASS: u32 = 0x80;
const CFG_NE_PASS: u32 = 0x401_0101;
/// Common Cfg of a pass-through without a non-linearity: tinygrad's
/// concat copies set bits 12 and 21 too (their meaning is unknown).
const CFG_NE_COPY: u32 = 0x421_1101;
const GROUP_CONV_PASS: u32 = 0x1_4001;
const TDST_CFG_PASS: u32 = TDST_CFG_PE;

/// TD `k` of `n` running `t` from a tensor of geometry `gi` to one of
/// `go`; `written` are the slots earlier TDs of the chain wrote.
fn ne_td(t: &NeTask, gi: &Geom, go: &Geom, k: u32, n: u32, written: &[u32]) -> TdBuild {
    let first = k == 0;
    let mut td = TdBuild::new();
    chain_header(&mut td, k, n);
    // Kernel DMA: channels in use enabled at base + i · chunk, the others
    // disabled with the 64-byte size the compiler leaves there.
    // A table is channel 0's 128 bytes (tinygrad's sigmoid, eiln's gelu).
    let table = t.kernel.is_none() && t.act.table().is_some();
    let (on_channels, chunk, kbase, ocg_log) = match t.kernel {
        Some((k, base)) => (k.channels, k.chunk_bytes, base, k.ocg_log),
        None if table => (1, LUT_BYTES, t.lut, 0),
        None => (0, 0, 0, 0),
    };
    if on_channels > 0 {
        td.set(kdma::WORD_00, KDMA_W0);
    }
    for i in 0..kdma::COEFF_CHANNELS {
        let on = i < on_channels;
        td.set(
            kdma::COEFF_DMA_CONFIG.at(i),
            if on { COEFF_ON } else { COEFF_OFF },
        );
        td.set(
            kdma::COEFF_BASE_ADDR.at(i),
            if on { kbase + i * chunk } else { 0 },
        );
        td.set(
            kdma::COEFF_BFR_SIZE.at(i),
            if on { chunk } else { COEFF_OFF_SIZE },
        );
    }
    for i in 0..kdma::EXTRA_CHANNELS {
        td.set(kdma::EXTRA_CONFIG.at(i), COEFF_OFF);
    }
    td.common(gi, go, ocg_log);
    td.set(common::CH_CFG, CH_CFG_ONE);
    // Cfg: bits 0 and 2, ShPref = ShMin = ShMax = 4, ActiveNE =
    // ceil(log2(min(Cout, 16))) (conv: 2, gemm: 4), AccDoubleBufEn unless
    // every coefficient channel is in use (set in conv, clear in gemm).
    let active = (go.c.min(16)).next_power_of_two().trailing_zeros();
    let cfg = regs::CommonCfg(0b101)
        .with(regs::CommonCfg::SH_PREF, 4)
        .with(regs::CommonCfg::SH_MIN, 4)
        .with(regs::CommonCfg::SH_MAX, 4)
        .with(regs::CommonCfg::ACTIVE_NE, active)
        .with(
            regs::CommonCfg::ACC_DOUBLE_BUF_EN,
            u32::from(on_channels < kdma::COEFF_CHANNELS),
        );
    let conv = t.kernel.is_some();
    td.set(
        common::CFG,
        match (conv, t.act) {
            (true, _) => cfg.0,
            (false, Activation::None) => CFG_NE_COPY,
            (false, _) => CFG_NE_PASS,
        },
    );
    if !conv {
        td.set(common::GROUP_CONV_CFG, GROUP_CONV_PASS);
    }
    td.set(common::TASK_INFO, TASK_INFO_NE);
    td.source(0, t.src, gi, written.contains(&t.src.slot));
    td.set(tile_src::SRC1_DMA_CONFIG, TSRC1_CFG_NONE);
    td.set(tile_src::WORD_40, TSRC_W40_NE);
    let scratch = t.dst.slot == SLOT_SCRATCH;
    let dcfg = if conv { TDST_CFG_CONV } else { TDST_CFG_PASS };
    td.dest(
        t.dst,
        t.dst_whole.as_ref().unwrap_or(go),
        dcfg | if scratch { TDST_CFG_SCRATCH_BITS } else { 0 },
    );

    // L2.
    let ch = l2::channel_stride(gi.w);
    let ibytes = gi.c.saturating_mul(ch);
    let obytes = go.c.saturating_mul(ch);
    // Rows of 0x400 bytes or more are padded by 0x30 for a convolution
    // (gemm), not for a pass-through (concat's 0x40000-byte rows).
    let srow = if conv {
        ibytes.saturating_add(l2::conv_pad(ibytes, 0x30))
    } else {
        ibytes
    };
    td.set(l2r::SOURCE_CFG, l2::source_cfg(first, false));
    td.set(l2r::SOURCE_CHANNEL_STRIDE, ch);
    td.set(l2r::SOURCE_ROW_STRIDE, srow);
    td.set(l2r::WORD_14, ibytes);
    td.set(l2r::WORD_18, ibytes);
    td.set(l2r::RESULT_CFG, l2::result_cfg(first, conv));
    td.set(l2r::RESULT_BASE, srow.saturating_mul(gi.tile_height()));
    if conv {
        td.set(l2r::CONV_RESULT_CHANNEL_STRIDE, ch);
        td.set(
            l2r::CONV_RESULT_ROW_STRIDE,
            obytes.saturating_add(l2::conv_pad(obytes, 0x20)),
        );
        td.set(l2r::WORD_40, obytes);
        td.set(l2r::WORD_44, obytes);
    }

    // Neural engine: fp16 kernel, convolution or pass-through, the
    // activation, PostScale 1.0.
    td.set(
        ne::KERNEL_CFG,
        if conv {
            KERNEL_CFG_F16
        } else {
            KERNEL_CFG_PASS
        },
    );
    let mac = if t.kernel.is_some() {
        MAC_CFG_CONV
    } else {
        MAC_CFG_PASS
    };
    td.set(
        ne::MAC_CFG,
        regs::MacCfg(mac)
            .with(regs::MacCfg::NONLINEAR_MODE, t.act.nonlinear_mode())
            .0,
    );
    td.set(ne::POST_SCALE, POST_SCALE_ONE);
    td.words[8] = header::ENE.put(td.words[8], active + 1);
    if on_channels > 0 {
        td.words[9] = W9_KERNEL;
    }
    td
}

/// Elementwise ReLU on the neural engine (a pass-through with
/// NonlinearMode 1, no coefficients): `x` in slot 5, `out` in slot 4.
pub fn relu(shape: &Shape) -> Result<Program, BuildError> {
    let g = Geom::new(shape, "shape")?;
    let td = ne_td(
        &NeTask {
            src: input(0),
            dst: OUT,
            kernel: None,
            act: Activation::Relu,
            lut: 0,
            dst_whole: None,
        },
        &g,
        &g,
        0,
        1,
        &[],
    );
    Ok(Program {
        td_size: TD_SIZE_STANDARD,
        td_count: 1,
        tsk: assemble(&[td]),
        weights: Vec::new(),
        tensors: sorted(vec![
            slot_of(shape, "x", SLOT_FIRST_INPUT, Direction::In),
            slot_of(shape, "out", SLOT_OUTPUT, Direction::Out),
        ]),
    })
}

/// Bytes of a non-linearity table.
pub const LUT_BYTES: u32 = 0x80;

/// The logistic function's table, as Apple's compiler v4.2.1 writes it
/// (tinygrad's `sigmoid.hwx`; layout in the engine model's `lut.rs`):
/// halves `x_lo = −9.9375`, `x_hi = 8.3203125` (clamps, from the fixture:
/// no rule for them is known; `x_hi` is `fp16(logit(1 − 2^−12))`, where
/// the logistic function rounds to 1), `y_lo = 0`, `y_hi = 1`; 33 samples
/// `fp16(σ(x))` (round to nearest even) at `x = −8, −7.5, …, 8`; the left
/// tail the line from `(x_lo, 0)` to the first sample, the right one from
/// the last sample to `(x_hi, 1)`, slope and intercept each rounded to
/// fp16; grid exponent 1 (step 1/2); flags 1.
pub fn sigmoid_table() -> [u8; LUT_BYTES as usize] {
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let h = |v: f64| f16::from_f64(v).to_bits();
    let (x_lo, x_hi) = (
        f64::from(f16::from_bits(0xC8F8)),
        f64::from(f16::from_bits(0x4829)),
    );
    let mut halves = [0u16; LUT_BYTES as usize / 2];
    halves[0] = h(x_lo);
    halves[1] = h(x_hi);
    halves[2] = 0;
    halves[3] = F16_ONE;
    let samples: Vec<f64> = (0..33)
        .map(|i| f64::from(f16::from_f64(sig(-8.0 + 0.5 * f64::from(i)))))
        .collect();
    for (i, v) in samples.iter().enumerate() {
        halves[4 + i] = h(*v);
    }
    let (x0, y0) = (-8.0, samples[0]);
    let left = y0 / (x0 - x_lo);
    halves[37] = h(left);
    halves[38] = h(-left * x_lo);
    let (x1, y1) = (8.0, samples[32]);
    let right = (1.0 - y1) / (x_hi - x1);
    halves[39] = h(right);
    halves[40] = h(y1 - right * x1);
    halves[41] = 1;
    halves[42] = 1;
    table_bytes(&halves)
}

/// Elementwise logistic function on the neural engine: a pass-through
/// with NonlinearMode 2 and [`sigmoid_table`] in slot 1; `x` in slot 5,
/// `out` in slot 4. Accuracy: the table interpolates linearly between
/// samples 1/2 apart (error at most `h²/8 · max|σ''| ≈ 0.003` before
/// rounding), clamps to 0 below −9.9375 and to 1 above 8.3203125.
pub fn sigmoid(shape: &Shape) -> Result<Program, BuildError> {
    table_op(shape, Activation::Sigmoid)
}

/// Elementwise GELU on the neural engine: a pass-through with
/// NonlinearMode 2 and [`gelu_table`] in slot 1 (eiln's compiled gelu);
/// `x` in slot 5, `out` in slot 4. Accuracy: [`GELU_TABLE_ERROR`].
pub fn gelu(shape: &Shape) -> Result<Program, BuildError> {
    table_op(shape, Activation::Gelu)
}

/// Elementwise `min(max(x, lo), hi)` on the neural engine (`lo`, `hi`
/// fp16 bits, `lo <= hi`; ±∞ for a missing bound): a pass-through with
/// [`clip_table`], exact (eiln's relu6 and hardtanh).
pub fn clip(shape: &Shape, lo: u16, hi: u16) -> Result<Program, BuildError> {
    table_op(shape, Activation::Clip { lo, hi })
}

/// Elementwise leaky ReLU on the neural engine (`slope` fp16 bits): a
/// pass-through with [`leaky_relu_table`] (eiln's leakyrelu and rrelu):
/// `x` for `x > 0`, else `slope · x` rounded once.
pub fn leaky_relu(shape: &Shape, slope: u16) -> Result<Program, BuildError> {
    table_op(shape, Activation::LeakyRelu { slope })
}

/// A table without samples (grid half 0x40; layout in the engine model's
/// `lut.rs`): the clamps, then the left tail for `x <= 0` and the right
/// one for `x > 0`, each `slope · x + 0`.
fn linear_table(clamps: [u16; 4], left: u16, right: u16) -> [u8; LUT_BYTES as usize] {
    let mut halves = [0u16; LUT_BYTES as usize / 2];
    halves[..4].copy_from_slice(&clamps);
    halves[37] = left;
    halves[39] = right;
    halves[41] = 0x40;
    halves[42] = 1;
    table_bytes(&halves)
}

/// The clip table, as eiln's compiled relu6 (`lo = 0`, `hi = 6`) and
/// hardtanh (`−1`, `1`): `x_lo = y_lo = lo`, `x_hi = y_hi = hi`, both
/// tails the identity.
pub fn clip_table(lo: u16, hi: u16) -> [u8; LUT_BYTES as usize] {
    linear_table([lo, hi, lo, hi], F16_ONE, F16_ONE)
}

/// The leaky ReLU table, as eiln's compiled leakyrelu (slope fp16(0.01))
/// and rrelu (the mean slope fp16(11/48)): no clamps (±∞), left tail
/// `slope · x`, right tail the identity.
pub fn leaky_relu_table(slope: u16) -> [u8; LUT_BYTES as usize] {
    linear_table([F16_NEG_INF, F16_INF, F16_NEG_INF, F16_INF], slope, F16_ONE)
}

/// A table's 64 halves as its little-endian bytes.
fn table_bytes(halves: &[u16; LUT_BYTES as usize / 2]) -> [u8; LUT_BYTES as usize] {
    let mut out = [0u8; LUT_BYTES as usize];
    for (o, v) in out.chunks_exact_mut(2).zip(halves) {
        o.copy_from_slice(&v.to_le_bytes());
    }
    out
}

/// A pass-through with a table non-linearity.
fn table_op(shape: &Shape, act: Activation) -> Result<Program, BuildError> {
    let g = Geom::new(shape, "shape")?;
    let td = ne_td(
        &NeTask {
            src: input(0),
            dst: OUT,
            kernel: None,
            act,
            lut: 0,
            dst_whole: None,
        },
        &g,
        &g,
        0,
        1,
        &[],
    );
    Ok(Program {
        td_size: TD_SIZE_STANDARD,
        td_count: 1,
        tsk: assemble(&[td]),
        weights: act.table().map(|t| t.to_vec()).unwrap_or_default(),
        tensors: sorted(vec![
            slot_of(shape, "x", SLOT_FIRST_INPUT, Direction::In),
            slot_of(shape, "out", SLOT_OUTPUT, Direction::Out),
        ]),
    })
}

/// Largest absolute error of [`gelu`] on the engine model against the
/// correctly rounded `x · Φ(x)`, over every finite fp16 input (measured
/// by `builder::tests::gelu_on_the_model`, which fails above it): the
/// interpolation (`h²/16 · max|GELU''| ≈ 0.0031` with the samples
/// below), the samples' fp16 rounding, and for `x > 4` the identity tail
/// against `x · Φ(x)` (under 2^−10 there).
pub const GELU_TABLE_ERROR: f64 = 0.0035;

/// The GELU table (layout in the engine model's `lut.rs`), modelled on
/// eiln's compiled gelu (the halves other than the samples are that
/// fixture's: `x_lo = −4.3984375` with `y_lo = 0`, `x_hi = y_hi = +∞`,
/// tails `0·x + 0` and `1·x + 0`, grid exponent 2 (step 1/4), flags 1).
/// Apple's 33 samples on `x = −4, −3.75, …, 4` are not point values and
/// their rule is unknown; these are `GELU(x) − h²/16 · GELU''(x)`
/// (`h = 1/4`, `GELU'' = φ(x)(2 − x²)`), which centres the linear
/// interpolation's sag on the curve and so halves its largest error.
pub fn gelu_table() -> [u8; LUT_BYTES as usize] {
    let h = |v: f64| f16::from_f64(v).to_bits();
    let mut halves = [0u16; LUT_BYTES as usize / 2];
    // x_lo = −4.3984375, y_lo = 0, x_hi = y_hi = +∞.
    halves[..4].copy_from_slice(&[0xC466, F16_INF, 0, F16_INF]);
    let step = 0.25f64;
    for i in 0..33u8 {
        let x = -4.0 + step * f64::from(i);
        let phi = (-x * x / 2.0).exp() / (2.0 * core::f64::consts::PI).sqrt();
        let curvature = phi * (2.0 - x * x);
        halves[4 + usize::from(i)] =
            h(crate::reference::scalar::gelu_f64(x) - step * step / 16.0 * curvature);
    }
    // Left tail 0·x + 0 (halves 37, 38 stay 0); right tail 1·x + 0.
    halves[39] = F16_ONE;
    halves[41] = 2;
    halves[42] = 1;
    table_bytes(&halves)
}

/// Channel concatenation `out = [a; b]` of two `(1, C, H, W)` tensors of
/// equal H and W, as tinygrad's compiled concat does it: two
/// neural-engine pass-through copies, the first of `a` into channels
/// `0..Ca` of `out`, the second of `b` into `Ca..Ca+Cb` (the destination
/// base moved by `Ca` planes, its strides the whole output's). `a` in
/// slot 5, `b` in slot 6, `out` in slot 4.
pub fn concat(a: &Shape, b: &Shape) -> Result<Program, BuildError> {
    if a.n() != 1 || b.n() != 1 || (a.h(), a.w()) != (b.h(), b.w()) {
        return Err(BuildError::Mismatch {
            field: "b",
            reason: "a concat needs batch 1 and equal H and W",
        });
    }
    let out = new_shape("output", a.c() + b.c(), a.h(), a.w())?;
    let (ga, gb, go) = (
        Geom::new(a, "shape")?,
        Geom::new(b, "shape")?,
        Geom::new(&out, "shape")?,
    );
    let copy = |src: Loc, at: u32| NeTask {
        src,
        dst: Loc {
            slot: SLOT_OUTPUT,
            offset: at,
        },
        kernel: None,
        act: Activation::None,
        lut: 0,
        dst_whole: Some(go),
    };
    let steps = [
        Step::Ne(copy(input(0), 0), ga, ga),
        Step::Ne(copy(input(1), ga.c * go.plane), gb, gb),
    ];
    Ok(chain_program(
        &steps,
        sorted(vec![
            slot_of(a, "a", SLOT_FIRST_INPUT, Direction::In),
            slot_of(b, "b", SLOT_FIRST_INPUT + 1, Direction::In),
            slot_of(&out, "out", SLOT_OUTPUT, Direction::Out),
        ]),
        Vec::new(),
    ))
}

fn new_shape(field: &'static str, c: usize, h: usize, w: usize) -> Result<Shape, BuildError> {
    Shape::new(1, c, h, w).map_err(|source| BuildError::Shape { field, source })
}

/// One neural engine TD: a 1×1 convolution of `x` (`cin` channels) into
/// `out` (`cout` channels) with `weights` `[cout][cin]`.
fn conv_program(
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    weights: &[f16],
    names: (&'static str, &'static str),
    act: Activation,
) -> Result<Program, BuildError> {
    let k = KernelLayout::new(cin, cout)?;
    limit(what_h(names.0), h, MAX_SPATIAL)?;
    limit(what_w(names.0), w, MAX_SPATIAL)?;
    let expected = cin * cout; // cin, cout ≤ 2^17: no overflow
    if weights.len() != expected {
        return Err(BuildError::Length {
            field: "weights",
            expected,
            found: weights.len(),
            shape: "out × in",
        });
    }
    let xs = new_shape("input", cin, h, w)?;
    let os = new_shape("output", cout, h, w)?;
    let gi = Geom::new(&xs, names.0)?;
    let go = Geom::new(&os, names.1)?;

    let td = ne_td(
        &NeTask {
            src: input(0),
            dst: OUT,
            kernel: Some((k, 0)),
            act,
            lut: 0,
            dst_whole: None,
        },
        &gi,
        &go,
        0,
        1,
        &[],
    );
    let tensors = sorted(vec![
        slot_of(&xs, "x", SLOT_FIRST_INPUT, Direction::In),
        slot_of(&os, "out", SLOT_OUTPUT, Direction::Out),
    ]);
    Ok(Program {
        td_size: TD_SIZE_STANDARD,
        td_count: 1,
        tsk: assemble(&[td]),
        weights: k.pack(weights, cin),
        tensors,
    })
}

/// 1×1 convolution without bias: input `x` `(1, cin, h, w)` in slot 5,
/// output `(1, cout, h, w)` in slot 4, `weights` `[cout][cin]` fp16.
pub fn conv1x1(
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    weights: &[f16],
) -> Result<Program, BuildError> {
    conv1x1_with(cin, cout, h, w, weights, Activation::None)
}

/// [`conv1x1`] followed by `act`.
pub fn conv1x1_with(
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    weights: &[f16],
    act: Activation,
) -> Result<Program, BuildError> {
    conv_program(cin, cout, h, w, weights, ("cin", "cout"), act)
}

/// Fully connected layer without bias, `weights` `[out_features][in_features]`:
/// a 1×1 convolution with the batch as the width. Input `x` is
/// `(1, in_features, 1, batch)` in slot 5, output `(1, out_features, 1,
/// batch)` in slot 4; see [`linear_input_to_nchw`].
pub fn linear(
    batch: usize,
    in_features: usize,
    out_features: usize,
    weights: &[f16],
) -> Result<Program, BuildError> {
    linear_with(batch, in_features, out_features, weights, Activation::None)
}

/// [`linear`] followed by `act`: `act(W·x)`, e.g. one hidden layer of an
/// MLP with [`Activation::Relu`].
pub fn linear_with(
    batch: usize,
    in_features: usize,
    out_features: usize,
    weights: &[f16],
    act: Activation,
) -> Result<Program, BuildError> {
    limit("batch", batch, MAX_SPATIAL)?;
    limit("in_features", in_features, MAX_CHANNELS)?;
    limit("out_features", out_features, MAX_CONV_OUT)?;
    conv_program(
        in_features,
        out_features,
        1,
        batch,
        weights,
        ("in_features", "out_features"),
        act,
    )
}

/// A program of a real model's size from valid descriptors: `count` 1×1
/// convolutions, each of input `x` `(1, cin, h, w)` (slot 5) into `out`
/// `(1, cout, h, w)` (slot 4), in one chain, over `weights_bytes` bytes
/// of coefficients. TD `k` of `n` reads its own coefficients at
/// `k · (weights_bytes − one TD's) / (n − 1)` of slot 1, rounded down to
/// 64 bytes, so the TDs' reads cover the coefficients from the first byte
/// to within 64 bytes of the end (overlapping when they need more than
/// there is).
/// E.g. Parakeet's encoder: 13,701 TDs and 458,018,816 bytes in all.
///
/// [`Program::weights`] is `weights_bytes` zero bytes (allocated lazily
/// by the system): a benchmark writes its own values into the buffer it
/// hands PROGRAM_CREATE.
pub fn conv1x1_stream(
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    count: u32,
    weights_bytes: u64,
) -> Result<Program, BuildError> {
    let k = KernelLayout::new(cin, cout)?;
    limit("h", h, MAX_SPATIAL)?;
    limit("w", w, MAX_SPATIAL)?;
    limit(
        "count",
        count as usize,
        crate::hw::td::MAX_TD_COUNT as usize,
    )?;
    let one = k.total_bytes() as u64;
    if weights_bytes < one || weights_bytes >= MAX_EXTENT {
        return Err(BuildError::Mismatch {
            field: "weights_bytes",
            reason: "must hold one TD's coefficients and stay below 4 GiB",
        });
    }
    let span = weights_bytes - one;
    let base = |i: u32| match count {
        1 => 0,
        // i < n ≤ 2^16 and span < 2^32: no overflow; the result is at
        // most span < 2^32.
        n => (u64::from(i) * span / u64::from(n - 1)) & !63,
    };
    let xs = new_shape("input", cin, h, w)?;
    let os = new_shape("output", cout, h, w)?;
    let gi = Geom::new(&xs, "cin")?;
    let go = Geom::new(&os, "cout")?;
    let steps: Vec<Step> = (0..count)
        .map(|i| {
            Step::Ne(
                NeTask {
                    src: input(0),
                    dst: OUT,
                    kernel: Some((k, base(i) as u32)),
                    act: Activation::None,
                    lut: 0,
                    dst_whole: None,
                },
                gi,
                go,
            )
        })
        .collect();
    let tensors = sorted(vec![
        slot_of(&xs, "x", SLOT_FIRST_INPUT, Direction::In),
        slot_of(&os, "out", SLOT_OUTPUT, Direction::Out),
    ]);
    let len = usize::try_from(weights_bytes).map_err(|_| BuildError::TooLarge {
        field: "weights_bytes",
        value: weights_bytes,
        max: usize::MAX as u64,
    })?;
    Ok(chain_program(&steps, tensors, vec![0u8; len]))
}

/// Transposes `[rows][cols]` into `[cols][rows]`.
fn transpose<T: Copy>(x: &[T], rows: usize, cols: usize) -> Option<Vec<T>> {
    if rows.checked_mul(cols)? != x.len() {
        return None;
    }
    let mut out = Vec::with_capacity(x.len());
    for c in 0..cols {
        for r in 0..rows {
            out.push(x[r * cols + c]);
        }
    }
    Some(out)
}

/// `[batch][in_features]` → the dense NCHW array of [`linear`]'s input
/// `(1, in_features, 1, batch)`; `None` if the length is not
/// `batch · in_features`.
pub fn linear_input_to_nchw(x: &[f16], batch: usize, in_features: usize) -> Option<Vec<f16>> {
    transpose(x, batch, in_features)
}

/// The dense NCHW output `(1, out_features, 1, batch)` of [`linear`] →
/// `[batch][out_features]`.
pub fn linear_output_from_nchw(y: &[f16], batch: usize, out_features: usize) -> Option<Vec<f16>> {
    transpose(y, out_features, batch)
}
