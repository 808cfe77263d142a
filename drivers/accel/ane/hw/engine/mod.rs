// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A functional model of the H13 engine: it executes a program's task
//! descriptors on binary16 data through the device address space, as the
//! simulated ANE of the driver's test flavour needs.
//!
//! [`execute`] fetches `td_count` TDs through a [`Dma`] (the first at the
//! given address, each next one at BAR slot 0 + NextPointer, like the task
//! manager), decodes each with the [`td`](super::td) decoder into one
//! register image that persists from TD to TD, and runs it: tile DMA reads
//! the source tensors from their BAR slots, the planar engine (elementwise
//! operations) or the neural engine (1×1 convolution / inner product from
//! kernel-DMA coefficients, or pass-through, then ReLU or the table
//! non-linearity) computes, and tile DMA writes the result. Tensors are
//! streamed row chunk by row chunk, so the model needs no allocation and
//! little stack, and everything is integer code (no floating point, see
//! [`fp`]).
//!
//! Whatever the model does not know how to execute is refused with
//! [`EngineError::Unsupported`], naming the register and value: the model
//! never guesses at an unknown mode. It executes the register combinations
//! the compiled fixtures use, and the nearby ones the reference material
//! explains.
//!
//! # What is supported
//!
//! A TD is a *planar-engine* task when header W8.ENE is 0 and a
//! *neural-engine* task otherwise (td.md §1.4: ENE = Cfg.ActiveNE + 1 on
//! every neural-engine sample, 0 on planar ones).
//!
//! - Planar engine, two sources (PE Cfg SecSrc = 2, RBE1 set): add, mul,
//!   max, min (OpMode 0..3) of tile DMA sources 0 and 1, with
//!   `out = (((PreScale · a) ⊕ b) · Scale + Bias) · FinalScale`, where `a`
//!   is source 0 (RBase0). This covers sub (PreScale −1) and average
//!   (Scale 0.5). One source (SecSrc = 0, RBE1 clear): OpMode 0 only,
//!   `out = (t · Scale + Bias) · FinalScale` with `t = PreScale · a`, or
//!   `|PreScale · a|` when Cfg bit 6 is set (abs, scale, scale-and-bias).
//! - Neural engine, MACCfg OpMode 4 + KernelMode 1: pass-through of each
//!   channel (ReLU, table non-linearities, copies such as concat).
//! - Neural engine, MACCfg OpMode 0 + KernelMode 0: 1×1 convolution,
//!   `out[o] = Σ_i x[i] · W[o][i]`, with binary16 weights (KernelCfg
//!   KernelFmt 2) from the enabled coefficient channels.
//! - Then, on the neural engine: `· PostScale`, then the non-linearity
//!   (none, ReLU, or a plain table, see `lut.rs`).
//! - Tensors: binary16 (ChCfg formats 2), one depth slice, one group, equal
//!   input and output width and height, element `(c, h, w)` at
//!   `BAR[slot] + BaseAddr + c · PlaneStride + h · RowStride + 2 · w`.
//! - Multi-TD chains (concat, eiln's `cube`) whose TDs each go memory to
//!   memory (header W6 SrcLoc and DstLoc set): each TD's result is rounded
//!   to binary16 in memory before the next reads it. A TD that keeps its
//!   source or result in L2 is refused.
//! - Slots: tile DMA source `i` reads BAR slot RBase`i` (RBE`i` set), the
//!   destination writes WBase (WBE set, never slot 0 or 1), coefficients
//!   come from KBase0; TD k+1 is at BAR 0 + NextPointer (td.md §3.3).
//!
//! Of the fixtures, tinygrad's sum, ReLU, sigmoid, both 1×1 convolutions,
//! gemm and concat, both compiled mul programs, the three `.anec` files and
//! 15 of eiln's 36 kernels (add, sub, mul, ave, max, min, abs, square,
//! cube, relu, gelu, hardtanh, leaky ReLU, ReLU6, RReLU) execute; the other
//! 21 are refused (L2-resident chains, range-reduced or symmetric tables,
//! AccBias).
//!
//! The stack use is small: on x86_64 at `-O2` the deepest path is about
//! 3 KiB (the convolution streamer's frame is about 1.6 KiB, the TD fetch
//! buffer [`MAX_DECODABLE_TD`] bytes); every buffer is a fixed array of at
//! most that size.
//!
//! # What only hardware can confirm
//!
//! Nothing below has been measured on H13 hardware (td.md §6–§7); every
//! recorded hardware output on the fixtures is also produced by this
//! model, but none of them is a rounding tie or a large accumulation.
//!
//! - **Arithmetic**: binary16 inputs are widened exactly to binary32, every
//!   intermediate step is one binary32 operation rounded to nearest even
//!   (the planar engine's PreScale, operation, Scale, Bias and FinalScale in
//!   that order; the neural engine's multiply-accumulate, PostScale,
//!   non-linearity), and the result is rounded once to binary16 with
//!   [`Options::rounding`]. For a single add or multiply this is the
//!   correctly rounded result (see [`fp`]); an average cannot overflow in
//!   between (`(65504 + 65504) · 0.5 = 65504`). A zero Bias is not added
//!   (so −0 survives), and the absent second operand of a one-source
//!   planar operation is not added either.
//! - **Which operand PreScale scales**: source 0. eiln's compiled `sub`
//!   swaps RBase0 and RBase1 relative to `add` while its first input stays
//!   in slot 5, which fits `x − y = (−1 · y) + x` only if PreScale applies
//!   to RBase0's source (td.md §1.5 calls it unproven).
//! - **Rounding mode**: [`Rounding::NearestEven`] by default. The seed
//!   project's claim that the ANE's add rounds ties away from zero rests on
//!   a smoke test whose inputs (quarter values) never produce a tie, so no
//!   public data decides it; round-to-nearest-even is the IEEE default and
//!   what the compiler's table samples use. [`Rounding::NearestTiesAway`]
//!   is available for when hardware says otherwise.
//! - **Special values**: subnormals are produced and consumed (no flush to
//!   zero); overflow gives ±∞ ([`Options::overflow`] can saturate
//!   instead); every NaN output is `0x7E00`; `max`/`min` return NaN when
//!   either input is NaN and order −0 below +0; ReLU maps −0 and negatives
//!   to +0 and NaN to NaN. These match the project's CPU reference
//!   (`userspace/ane/src/reference.rs`).
//! - **Accumulation**: binary32, starting from +0, adding the exact
//!   binary32 product of each input channel and weight in ascending input
//!   channel order, rounding after every addition (the H17 measurement of
//!   an fp32-class accumulator is the only data, td.md §6; the order is a
//!   guess). The hardware may add in another order or keep more bits; the
//!   project's parity tests allow 2 ulp for accumulations.
//! - **Coefficient layout**: output channel `o` of a convolution lives in
//!   coefficient channel `o >> OCGSize` (row `o mod 2^OCGSize`,
//!   [`WeightOrder::Blocked`]) or `o mod n` (row `o / n`, with `n` the number
//!   of channels in use, [`WeightOrder::Interleaved`]); a row holds the
//!   `Cin` binary16 weights in input-channel order and rows are
//!   `roundup(2·Cin, 64)` bytes apart from CoeffBaseAddr (td.md §2.2–§2.3:
//!   all fixture weights are equal, so the order is not determined).
//! - **Table non-linearity**: the layout and evaluation rules in `lut.rs`
//!   (linear interpolation between samples in binary32, tails, clamps, the
//!   split at zero of sample-less tables, NaN in gives NaN out), applied to
//!   the binary32 value after PostScale; only flag value 1 is modelled.
//!   The hardware's sigmoid(3.0) = `0x3B9F` (a sample point) is reproduced;
//!   between samples nothing has been measured.
//! - **Registers ignored**: the L2 layout (addresses, strides, source and
//!   result configuration), TileCfg, Common Cfg (scheduling, double
//!   buffering), TaskInfo, DPE, cache hints, DependencyMode, MACCfg
//!   BinaryPoint (fixed point only) and bit 20, and KernelCfg on a
//!   pass-through. Apple's compiler sets these per shape and op family
//!   without changing the arithmetic, as far as the samples show.
//! - **Destination padding**: when TileDMADst Fmt ZeroPadFirst or
//!   ZeroPadLast is set, the bytes from the end of each row's data to the
//!   next 64-byte DMA granule are written with zeros; otherwise they are
//!   left untouched.
//! - **Budget**: [`Options::budget`] counts one unit per TD fetched, per
//!   elementwise output element and per multiply-accumulate; running out
//!   stops the engine mid-TD with [`EngineError::Busy`], leaving whatever it
//!   had written (the simulator's model of a hang).

mod exec;
pub mod fp;
mod lut;

#[cfg(test)]
mod fp_tests;
#[cfg(test)]
mod tests;

use core::fmt;

use super::td::header::Header;
use super::td::regs::Reg;
use super::td::{ChainFault, RegImage, Td, TdError, BAR_SLOTS, MAX_TD_COUNT};
use super::td::{MAX_TD_SIZE, MIN_TD_SIZE, SLOT_COMMAND};

pub use fp::{Overflow, Rounding, F16, F32};

/// Device memory as the engine's DMA sees it. The kernel's simulator
/// implements it over its software page table, tests over a `Vec`.
pub trait Dma {
    /// Reads `buf.len()` bytes from device address `iova`.
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Writes `buf` to device address `iova`.
    fn write(&mut self, iova: u64, buf: &[u8]) -> Result<(), Fault>;
}

/// A translation fault: a DMA touched an unmapped device address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The first address of the transfer that could not be translated.
    pub iova: u64,
}

/// How a convolution's output channels are spread over the coefficient
/// channels (the hardware's choice is not known; see the module
/// documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WeightOrder {
    /// Output channel `o` is row `o mod 2^OCGSize` of coefficient channel
    /// `o >> OCGSize` (consecutive groups, matching the name OCGSize).
    #[default]
    Blocked,
    /// Output channel `o` is row `o / n` of coefficient channel `o mod n`,
    /// `n` being the number of coefficient channels in use.
    Interleaved,
}

/// Knobs of the model, which the kernel's simulator exposes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Operations the engine may perform before it reports that it is
    /// still busy ([`EngineError::Busy`], fault injection of a hang);
    /// `None` for no limit. See the module documentation for the unit.
    pub budget: Option<u64>,
    /// Rounding of results to binary16.
    pub rounding: Rounding,
    /// What a finite result beyond the binary16 range becomes.
    pub overflow: Overflow,
    /// Placement of convolution weights in the coefficient channels.
    pub weight_order: WeightOrder,
}

impl Options {
    /// The defaults: no budget, round to nearest even, overflow to
    /// infinity, blocked weights.
    pub const DEFAULT: Options = Options {
        budget: None,
        rounding: Rounding::NearestEven,
        overflow: Overflow::Infinity,
        weight_order: WeightOrder::Blocked,
    };
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// TDs executed completely.
    pub tds: u32,
    /// Operations performed, in the unit of [`Options::budget`].
    pub ops: u64,
    /// Bytes read through [`Dma::read`].
    pub bytes_read: u64,
    /// Bytes written through [`Dma::write`].
    pub bytes_written: u64,
}

/// Which DMA of the engine made an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// The task manager fetching a TD.
    Fetch,
    /// Tile DMA source 0 or 1.
    TileSrc(u8),
    /// Tile DMA destination.
    TileDst,
    /// Kernel (coefficient) DMA.
    Kernel,
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Port::Fetch => f.write_str("TD fetch"),
            Port::TileSrc(i) => write!(f, "tile DMA source {i}"),
            Port::TileDst => f.write_str("tile DMA destination"),
            Port::Kernel => f.write_str("kernel DMA"),
        }
    }
}

/// Where the value that decided an [`EngineError::Unsupported`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// TD header word W0..W9.
    Header(u8),
    /// A register.
    Reg(Reg),
    /// A binary16 half of the non-linearity table (0..64).
    Lut(u8),
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Header(w) => write!(f, "header word W{w}"),
            Site::Reg(r) => write!(f, "{r}"),
            Site::Lut(i) => write!(f, "non-linearity table half {i}"),
        }
    }
}

/// Which feature the model does not execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// W6 TDSkip.
    TdSkip,
    /// W6 SrcLoc or DstLoc clear: a source or result kept in L2.
    L2Resident,
    /// A tile DMA the operation needs is disabled or has no BAR slot.
    DmaDisabled,
    /// An element format other than binary16.
    ElementFormat,
    /// A tile DMA Fmt field value other than the compiled samples'.
    TileFormat,
    /// Non-zero PixelOffset.
    PixelOffset,
    /// L2Cfg InputReLU or PaddingMode.
    L2Mode,
    /// A depth other than 1.
    Depth,
    /// Grouped convolution or ElemMultMode.
    Groups,
    /// A kernel other than 1×1, stride 1, no padding.
    ConvGeometry,
    /// Input and output shapes that an elementwise operation cannot have.
    ShapeMismatch,
    /// A planar engine OpMode other than add, mul, max, min (or not add
    /// with one source).
    PeOp,
    /// Unknown planar engine Cfg bits, or the condition bit with two
    /// sources.
    PeCfg,
    /// A second source the operation cannot have: planar engine SecSrc
    /// other than none (with RBE1 clear) or tile DMA source 1 (with RBE1
    /// set), or RBE1 on a neural engine task.
    PeSources,
    /// A PreScale with its low half set.
    PeScale,
    /// Planar engine registers set on a neural engine task.
    PeOnNeTask,
    /// A MACCfg operation other than convolution or pass-through, or
    /// unknown MACCfg bits.
    MacMode,
    /// BiasMode, MatrixBiasEn, PostScaleMode, MatrixVectorBias or AccBias.
    Bias,
    /// PostRightShift or unknown PostScale bits.
    PostScale,
    /// NonlinearMode 3.
    Nonlinear,
    /// Coefficients that are not plain binary16 (format, palette, sparse).
    KernelFormat,
    /// GroupConvCfg UnicastEn other than what the operation needs.
    Unicast,
    /// Coefficient channels enabled where the operation loads none, or a
    /// table non-linearity together with a convolution.
    KernelChannels,
    /// KBase1..3 (which coefficient channel uses them is not known).
    KernelBase,
    /// One of the inferred extra kernel DMA channels.
    ExtraDma,
    /// More output channels than 16 coefficient channels of 2^OCGSize hold.
    OutputChannelGroups,
    /// A non-linearity table layout the model does not know.
    LutFormat,
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Feature::TdSkip => "TD skip",
            Feature::L2Resident => "a source or result kept in L2",
            Feature::DmaDisabled => "a disabled tile DMA",
            Feature::ElementFormat => "an element format other than fp16",
            Feature::TileFormat => "this tile DMA format",
            Feature::PixelOffset => "pixel offsets",
            Feature::L2Mode => "L2 input ReLU or padding",
            Feature::Depth => "a depth other than 1",
            Feature::Groups => "grouped or element-multiply convolution",
            Feature::ConvGeometry => "a kernel other than 1x1, stride 1, no padding",
            Feature::ShapeMismatch => "these input and output shapes",
            Feature::PeOp => "this planar engine operation",
            Feature::PeCfg => "these planar engine Cfg bits",
            Feature::PeSources => "this second-source selection",
            Feature::PeScale => "this planar engine PreScale encoding",
            Feature::PeOnNeTask => "planar engine settings on a neural engine task",
            Feature::MacMode => "this MACCfg operation",
            Feature::Bias => "neural engine biases",
            Feature::PostScale => "this PostScale encoding",
            Feature::Nonlinear => "this non-linearity",
            Feature::KernelFormat => "coefficients other than plain fp16",
            Feature::Unicast => "this unicast setting",
            Feature::KernelChannels => "these coefficient channels",
            Feature::KernelBase => "KBase1..3",
            Feature::ExtraDma => "the extra kernel DMA channels",
            Feature::OutputChannelGroups => {
                "more output channels than 16 coefficient channels hold"
            }
            Feature::LutFormat => "this non-linearity table layout",
        })
    }
}

/// What is wrong with the coefficients of a convolution or table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelProblem {
    /// A coefficient channel that holds needed weights is not enabled.
    Disabled,
    /// The channel's buffer (CoeffBfrSize) is smaller than its data.
    TooSmall {
        /// Bytes needed.
        needed: u64,
        /// CoeffBfrSize.
        size: u32,
    },
}

/// Why execution stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// The TD size or count is out of range, a TD does not decode, its link
    /// to the next is broken, or a register it needs was never written:
    /// the same errors the validator gives (TD numbers in chain order).
    Td(TdError),
    /// The TD size is larger than any TD that can decode
    /// ([`MAX_DECODABLE_TD`]).
    TdTooLarge {
        /// The TD size given.
        td_size: u32,
    },
    /// A DMA touched an unmapped device address.
    Fault {
        /// TD number.
        td: u32,
        /// Which DMA.
        port: Port,
        /// Whether it was a write.
        write: bool,
        /// The address the [`Dma`] reported.
        iova: u64,
    },
    /// The TD uses something the model does not execute.
    Unsupported {
        /// TD number.
        td: u32,
        /// What.
        feature: Feature,
        /// Where the deciding value is.
        site: Site,
        /// The value.
        value: u32,
    },
    /// A coefficient channel does not hold what the operation reads.
    Kernel {
        /// TD number.
        td: u32,
        /// The coefficient channel.
        channel: u32,
        /// What is wrong.
        problem: KernelProblem,
    },
    /// The operation budget ran out: the engine is still busy.
    Busy {
        /// TD number.
        td: u32,
        /// Operations performed before stopping.
        ops: u64,
    },
}

impl From<TdError> for EngineError {
    fn from(e: TdError) -> Self {
        EngineError::Td(e)
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EngineError::Td(e) => write!(f, "{e}"),
            EngineError::TdTooLarge { td_size } => write!(
                f,
                "TD size {td_size:#x} exceeds {MAX_DECODABLE_TD:#x}, beyond which no TD decodes"
            ),
            EngineError::Fault {
                td,
                port,
                write,
                iova,
            } => write!(
                f,
                "TD {td}: {port} {} fault at device address {iova:#x}",
                if write { "write" } else { "read" }
            ),
            EngineError::Unsupported {
                td,
                feature,
                site,
                value,
            } => write!(
                f,
                "TD {td}: the engine model does not support {feature} ({site} = {value:#x})"
            ),
            EngineError::Kernel {
                td,
                channel,
                problem,
            } => match problem {
                KernelProblem::Disabled => write!(
                    f,
                    "TD {td}: coefficient channel {channel} holds needed weights but is disabled"
                ),
                KernelProblem::TooSmall { needed, size } => write!(
                    f,
                    "TD {td}: coefficient channel {channel} loads {size:#x} bytes, {needed:#x} needed"
                ),
            },
            EngineError::Busy { td, ops } => write!(
                f,
                "TD {td}: still busy after {ops} operations (budget exhausted)"
            ),
        }
    }
}

/// The longest TD that can decode: the header and, for each of the
/// [`IMAGE_WORDS`](super::td::regs::IMAGE_WORDS) registers, a one-word stream (a longer TD must write some
/// register twice or an unknown one, which the decoder refuses).
/// (40 + 8 · 140 = 1160; a test checks it against the decoder's constants.)
pub const MAX_DECODABLE_TD: u32 = 1160;

/// [`MAX_DECODABLE_TD`] as a buffer length.
const MAX_DECODABLE_LEN: usize = 1160;

/// Fetches TD `index` (`td_size` bytes at `iova`, found at byte `offset` of
/// the command buffer) and decodes it into `image`. Kept out of line so its
/// buffer does not add to the frame of the execution code.
#[inline(never)]
fn fetch<D: Dma + ?Sized>(
    mem: &mut D,
    iova: u64,
    td_size: u32,
    index: u32,
    offset: u32,
    image: &mut RegImage,
    stats: &mut Stats,
) -> Result<Header, EngineError> {
    let mut buf = [0u8; MAX_DECODABLE_LEN];
    let len = usize::try_from(td_size).unwrap_or(usize::MAX);
    let bytes = buf
        .get_mut(..len)
        .ok_or(EngineError::TdTooLarge { td_size })?;
    mem.read(iova, bytes).map_err(|f| EngineError::Fault {
        td: index,
        port: Port::Fetch,
        write: false,
        iova: f.iova,
    })?;
    stats.bytes_read = stats.bytes_read.saturating_add(u64::from(td_size));
    let td = Td::new(bytes, index, offset);
    td.decode_into(image)?;
    Ok(td.header())
}

/// Checks the link from TD `index` (header `h`) to the next and returns the
/// next TD's offset in the command buffer.
fn link(h: &Header, index: u32, td_size: u32) -> Result<u32, EngineError> {
    let chain = |fault| EngineError::Td(TdError::Chain { td: index, fault });
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
    let next = h.next_pointer();
    if next % 4 != 0 {
        return Err(chain(ChainFault::NextPointerUnaligned { next }));
    }
    Ok(next)
}

/// Runs `td_count` TDs of `td_size` bytes, the first at device address
/// `td_iova` and each next one at `bars[0]` + the previous TD's
/// NextPointer, with `bars[slot]` the base device address of each BAR slot.
/// Register state starts empty and persists from TD to TD.
///
/// The link of each TD but the last is checked before it runs (NextSize
/// announces a TD of `td_size` bytes, NextPointer is word aligned, EON is
/// clear); a TD runs only once it has decoded completely. Results of the
/// TDs that ran stay in memory when a later one fails.
pub fn execute<D: Dma + ?Sized>(
    mem: &mut D,
    td_iova: u64,
    td_size: u32,
    td_count: u32,
    bars: &[u64; BAR_SLOTS],
    opts: &Options,
) -> Result<Stats, EngineError> {
    if td_size % 4 != 0 || !(MIN_TD_SIZE..=MAX_TD_SIZE).contains(&td_size) {
        return Err(TdError::TdSize { td_size }.into());
    }
    if td_size > MAX_DECODABLE_TD {
        return Err(EngineError::TdTooLarge { td_size });
    }
    if td_count == 0 || td_count > MAX_TD_COUNT {
        return Err(TdError::TdCount { td_count }.into());
    }
    let cmd_base = bars.get(usize::from(SLOT_COMMAND)).copied().unwrap_or(0);
    let mut image = RegImage::new();
    let mut stats = Stats::default();
    let mut iova = td_iova;
    let mut offset = 0u32;
    for index in 0..td_count {
        exec::charge(&mut stats, opts, index, 1)?;
        let h = fetch(mem, iova, td_size, index, offset, &mut image, &mut stats)?;
        let last = index.wrapping_add(1) == td_count;
        let next = if last {
            None
        } else {
            Some(link(&h, index, td_size)?)
        };
        exec::run_td(mem, bars, opts, &mut stats, index, &h, &image)?;
        stats.tds = stats.tds.saturating_add(1);
        if let Some(next) = next {
            offset = next;
            iova = cmd_base
                .checked_add(u64::from(next))
                .ok_or(EngineError::Fault {
                    td: index.wrapping_add(1),
                    port: Port::Fetch,
                    write: false,
                    iova: u64::MAX,
                })?;
        }
    }
    Ok(stats)
}
