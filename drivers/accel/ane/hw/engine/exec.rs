// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Executing one decoded TD: checking that the model knows every setting
//! the operation depends on, then streaming the tensors through the
//! [`Dma`] row chunk by row chunk.

use super::super::td::header::Header;
use super::super::td::regs::{
    common, kdma, l2, ne, pe, tile_dst, tile_src, ChCfg, Channels, CoeffDmaConfig, ConvCfg, Dim,
    DmaAddr, GroupConvCfg, KernelCfg, MacCfg, Nonlinear, PeBiasScale, PeCfg, PeOp, Reg,
    TileDstDmaConfig, TileFmt, TileSrcDmaConfig,
};
use super::super::td::{Dma as DmaKind, RegImage, TdError, BAR_SLOTS, SLOT_COMMAND, SLOT_KERNEL};
use super::fp::{F16, F32};
use super::lut::{Lut, LUT_BYTES};
use super::{Dma, EngineError, Feature, KernelProblem, Options, Port, Site, Stats, WeightOrder};

/// ChCfg code of binary16.
const FMT_F16: u32 = 2;

/// Elements moved per tile DMA transfer of an elementwise operation.
const CHUNK: u32 = 128;

/// Bytes of one chunk buffer (`CHUNK` elements).
const CHUNK_BYTES: usize = 256;

/// Accumulators of one convolution tile (output channels × row elements).
const ACC: u32 = 128;

/// Largest row chunk of a convolution tile.
const CONV_W: u32 = 64;

/// Largest number of weights read at once.
const CONV_IC: u32 = 64;

/// Input elements cached per convolution tile (input channels × row
/// elements).
const XCACHE: u32 = 128;

/// Array lengths of the convolution buffers: `ACC` accumulators, and the
/// bytes of `XCACHE`, `CONV_IC` and `CONV_W` elements.
const ACC_LEN: usize = 128;
const XCACHE_BYTES: usize = 256;
const WEIGHT_BYTES: usize = 128;
const OUT_BYTES: usize = 128;

/// The tile DMA granule.
const GRANULE: u64 = 64;

/// Bytes of [`GRANULE`].
const GRANULE_BYTES: usize = 64;

/// The only ConvCfg the model executes, apart from OCGSize: 1×1 kernel,
/// stride 1, no padding, Ox = Oy = 1 (as in every compiled sample).
const CONV_1X1: u32 = 0x5000_A021;

/// MACCfg bit 20: set on every neural engine op, unnamed.
const MAC_BIT20: u32 = 1 << 20;

/// Charges `n` operations to the budget.
pub(super) fn charge(
    stats: &mut Stats,
    opts: &Options,
    td: u32,
    n: u64,
) -> Result<(), EngineError> {
    let used = stats.ops.saturating_add(n);
    if opts.budget.is_some_and(|b| used > b) {
        return Err(EngineError::Busy { td, ops: stats.ops });
    }
    stats.ops = used;
    Ok(())
}

fn us(x: u32) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// Element `i` of a little-endian binary16 buffer (0 if outside).
fn get16(buf: &[u8], i: usize) -> F16 {
    let at = i.wrapping_mul(2);
    match buf.get(at..at.wrapping_add(2)) {
        Some(&[lo, hi]) => F16::from_le_bytes([lo, hi]),
        _ => F16::ZERO,
    }
}

/// Stores element `i` of a little-endian binary16 buffer (nothing if
/// outside).
fn put16(buf: &mut [u8], i: usize, v: F16) {
    let at = i.wrapping_mul(2);
    let [b0, b1] = v.0.to_le_bytes();
    if let Some([lo, hi]) = buf.get_mut(at..at.wrapping_add(2)) {
        *lo = b0;
        *hi = b1;
    }
}

/// The first `n` bytes of `buf` (all of it if shorter).
fn prefix(buf: &mut [u8], n: usize) -> &mut [u8] {
    let n = n.min(buf.len());
    buf.get_mut(..n).unwrap_or_default()
}

/// Where a tensor is: element `(c, h, w)` is at
/// `base + c · plane + h · row + 2 · w`.
#[derive(Clone, Copy, Debug)]
struct Surface {
    base: u64,
    row: u64,
    plane: u64,
    kind: DmaKind,
}

/// A tensor's extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    c: u32,
    h: u32,
    w: u32,
}

/// The Common settings every operation needs.
struct Common {
    ch: ChCfg,
    input: Shape,
    output: Shape,
    conv: ConvCfg,
    groups: GroupConvCfg,
}

/// The non-linearity after the neural engine.
#[derive(Clone, Copy, Debug)]
enum Act {
    None,
    Relu,
    Lut(Lut),
}

/// Everything that turns a neural engine value into the stored result.
#[derive(Clone, Copy, Debug)]
struct Finish {
    post: F32,
    act: Act,
    opts: Options,
}

impl Finish {
    fn apply(&self, v: F32) -> F16 {
        let v = v.mul_rne(self.post);
        let v = match &self.act {
            Act::None => v,
            Act::Relu => v.relu(),
            Act::Lut(l) => l.eval(v),
        };
        v.to_f16(self.opts.rounding, self.opts.overflow)
    }
}

/// The planar engine's element function.
#[derive(Clone, Copy, Debug)]
struct PeFn {
    op: PeOp,
    two: bool,
    abs: bool,
    pre: F32,
    scale: F32,
    bias: Option<F32>,
    fin: F32,
    opts: Options,
}

impl PeFn {
    fn apply(&self, a: F16, b: F16) -> F16 {
        let a = a.to_f32().mul_rne(self.pre);
        let mut t = if self.two {
            let b = b.to_f32();
            match self.op {
                PeOp::Add => a.add_rne(b),
                PeOp::Mul => a.mul_rne(b),
                PeOp::Max => a.max(b),
                PeOp::Min => a.min(b),
            }
        } else {
            a
        };
        if self.abs {
            t = t.abs();
        }
        t = t.mul_rne(self.scale);
        if let Some(bias) = self.bias {
            t = t.add_rne(bias);
        }
        t.mul_rne(self.fin)
            .to_f16(self.opts.rounding, self.opts.overflow)
    }
}

/// A convolution whose coefficients have been checked.
struct ConvPlan {
    cin: u32,
    cout: u32,
    h: u32,
    w: u32,
    /// Device address of each coefficient channel in use.
    chans: [u64; 16],
    /// Bytes between the weight rows of two output channels.
    row_bytes: u64,
    order: WeightOrder,
    ocg_log: u32,
    /// Coefficient channels in use (1..=16).
    nch: u32,
}

impl ConvPlan {
    /// The device address of weight `W[oc][ic]`.
    fn weights(&self, oc: u32, ic: u32) -> Option<u64> {
        let (ch, row) = match self.order {
            WeightOrder::Blocked => (
                oc.checked_shr(self.ocg_log)?,
                oc & 1u32.checked_shl(self.ocg_log)?.wrapping_sub(1),
            ),
            WeightOrder::Interleaved => (oc.checked_rem(self.nch)?, oc.checked_div(self.nch)?),
        };
        self.chans
            .get(us(ch))?
            .checked_add(u64::from(row).checked_mul(self.row_bytes)?)?
            .checked_add(u64::from(ic).checked_mul(2)?)
    }
}

/// The first `n` accumulators of `acc` (all of them if fewer).
fn prefix_f32(acc: &mut [F32], n: usize) -> &mut [F32] {
    let n = n.min(acc.len());
    acc.get_mut(..n).unwrap_or_default()
}

/// Adds `Σ_i x[i][w] · wt[i]` for `i` in `0..k` to each accumulator
/// `acc[w]`, in ascending `i`, one binary32 rounding per addition (the
/// products of two binary16 values are exact). `x` holds `k` rows of
/// `acc.len()` elements.
fn accumulate(acc: &mut [F32], x: &[u8], wt: &[u8], k: usize) {
    let n = acc.len();
    for (xw, a) in acc.iter_mut().enumerate() {
        let mut v = *a;
        for i in 0..k {
            let xv = get16(x, i.saturating_mul(n).saturating_add(xw));
            v = v.add_rne(xv.to_f32().mul_rne(get16(wt, i).to_f32()));
        }
        *a = v;
    }
}

/// One TD's execution state.
struct Run<'a, D: Dma + ?Sized> {
    mem: &'a mut D,
    bars: &'a [u64; BAR_SLOTS],
    opts: &'a Options,
    stats: &'a mut Stats,
    td: u32,
    img: &'a RegImage,
    h: &'a Header,
}

/// Runs TD `td` (header `h`, register state `img` after decoding it).
#[inline(never)]
pub(super) fn run_td<D: Dma + ?Sized>(
    mem: &mut D,
    bars: &[u64; BAR_SLOTS],
    opts: &Options,
    stats: &mut Stats,
    td: u32,
    h: &Header,
    img: &RegImage,
) -> Result<(), EngineError> {
    let mut run = Run {
        mem,
        bars,
        opts,
        stats,
        td,
        img,
        h,
    };
    run.run()
}

impl<D: Dma + ?Sized> Run<'_, D> {
    fn need(&self, reg: Reg) -> Result<u32, EngineError> {
        self.img
            .get(reg)
            .ok_or(EngineError::Td(TdError::RegisterNotSet {
                td: self.td,
                reg,
            }))
    }

    fn unsupported(&self, feature: Feature, site: Site, value: u32) -> EngineError {
        EngineError::Unsupported {
            td: self.td,
            feature,
            site,
            value,
        }
    }

    fn bad_reg(&self, feature: Feature, reg: Reg, value: u32) -> EngineError {
        self.unsupported(feature, Site::Reg(reg), value)
    }

    fn bad_header(&self, feature: Feature, word: u8) -> EngineError {
        self.unsupported(feature, Site::Header(word), self.h.word(usize::from(word)))
    }

    fn too_large(&self, kind: DmaKind) -> EngineError {
        EngineError::Td(TdError::ExtentTooLarge {
            td: self.td,
            dma: kind,
        })
    }

    fn charge(&mut self, n: u64) -> Result<(), EngineError> {
        charge(self.stats, self.opts, self.td, n)
    }

    fn bar(&self, slot: u8) -> u64 {
        self.bars.get(usize::from(slot)).copied().unwrap_or(0)
    }

    fn read(&mut self, port: Port, iova: u64, buf: &mut [u8]) -> Result<(), EngineError> {
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        self.mem.read(iova, buf).map_err(|f| EngineError::Fault {
            td: self.td,
            port,
            write: false,
            iova: f.iova,
        })?;
        self.stats.bytes_read = self.stats.bytes_read.saturating_add(len);
        Ok(())
    }

    fn write(&mut self, port: Port, iova: u64, buf: &[u8]) -> Result<(), EngineError> {
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        self.mem.write(iova, buf).map_err(|f| EngineError::Fault {
            td: self.td,
            port,
            write: true,
            iova: f.iova,
        })?;
        self.stats.bytes_written = self.stats.bytes_written.saturating_add(len);
        Ok(())
    }

    /// The address of element `(c, y, x)` of `s`.
    fn at(&self, s: &Surface, c: u32, y: u32, x: u32) -> Result<u64, EngineError> {
        u64::from(c)
            .checked_mul(s.plane)
            .and_then(|o| o.checked_add(u64::from(y).checked_mul(s.row)?))
            .and_then(|o| o.checked_add(u64::from(x).checked_mul(2)?))
            .and_then(|o| o.checked_add(s.base))
            .ok_or(self.too_large(s.kind))
    }

    fn run(&mut self) -> Result<(), EngineError> {
        let w6 = self.h.word(6);
        if self.h.td_skip() {
            return Err(self.unsupported(Feature::TdSkip, Site::Header(6), w6));
        }
        if !self.h.src_loc() || !self.h.dst_loc() {
            return Err(self.unsupported(Feature::L2Resident, Site::Header(6), w6));
        }
        let c = self.common()?;
        if self.h.ene() == 0 {
            self.run_pe(&c)
        } else {
            self.run_ne(&c)
        }
    }

    /// Reads and checks the Common, L2 and pixel-offset settings.
    fn common(&self) -> Result<Common, EngineError> {
        let chv = self.need(common::CH_CFG)?;
        let ch = ChCfg(chv);
        let known = ChCfg::IN_FMT.mask() | ChCfg::SRC2_IN_FMT.mask() | ChCfg::OUT_FMT.mask();
        if chv & !known != 0 || ch.in_fmt() != FMT_F16 || ch.out_fmt() != FMT_F16 {
            return Err(self.bad_reg(Feature::ElementFormat, common::CH_CFG, chv));
        }
        for reg in [common::IN_DEPTH, common::OUT_DEPTH] {
            let d = self.need(reg)?;
            if d != 1 {
                return Err(self.bad_reg(Feature::Depth, reg, d));
            }
        }
        let gv = self.need(common::GROUP_CONV_CFG)?;
        let groups = GroupConvCfg(gv);
        if groups.num_groups() != 1 || groups.elem_mult_mode() != 0 {
            return Err(self.bad_reg(Feature::Groups, common::GROUP_CONV_CFG, gv));
        }
        let cv = self.need(common::CONV_CFG)?;
        if ConvCfg::OCG_SIZE.put(cv, 0) != CONV_1X1 {
            return Err(self.bad_reg(Feature::ConvGeometry, common::CONV_CFG, cv));
        }
        let l2v = self.img.value(l2::L2_CFG);
        if l2v != 0 {
            return Err(self.bad_reg(Feature::L2Mode, l2::L2_CFG, l2v));
        }
        for i in 0..4 {
            let reg = tile_src::PIXEL_OFFSET.at(i);
            let v = self.img.value(reg);
            if v != 0 {
                return Err(self.bad_reg(Feature::PixelOffset, reg, v));
            }
        }
        let input = self.shape(common::IN_DIM, common::CIN, DmaKind::TileSrc(0))?;
        let output = self.shape(common::OUT_DIM, common::COUT, DmaKind::TileDst)?;
        Ok(Common {
            ch,
            input,
            output,
            conv: ConvCfg(cv),
            groups,
        })
    }

    fn shape(&self, dim: Reg, channels: Reg, kind: DmaKind) -> Result<Shape, EngineError> {
        let d = Dim(self.need(dim)?);
        let c = Channels(self.need(channels)?).count();
        let zero = |reg| {
            EngineError::Td(TdError::ZeroDimension {
                td: self.td,
                dma: kind,
                reg,
            })
        };
        if d.w() == 0 || d.h() == 0 {
            return Err(zero(dim));
        }
        if c == 0 {
            return Err(zero(channels));
        }
        Ok(Shape {
            c,
            h: d.h(),
            w: d.w(),
        })
    }

    /// Checks a tile DMA Fmt register; returns whether a destination pads
    /// its rows with zeros.
    fn tile_fmt(&self, reg: Reg, dst: bool) -> Result<bool, EngineError> {
        let v = self.need(reg)?;
        let f = TileFmt(v);
        let mut known = TileFmt::FMT_MODE.mask()
            | TileFmt::TRUNCATE.mask()
            | TileFmt::MEM_FMT.mask()
            | TileFmt::INTERLEAVE.mask();
        if dst {
            known |= TileFmt::ZERO_PAD_LAST.mask() | TileFmt::ZERO_PAD_FIRST.mask();
        }
        let ok = v & !known == 0
            && f.fmt_mode() <= 1
            && f.truncate() == 3
            && f.mem_fmt() == FMT_F16
            && f.interleave() <= 1;
        if !ok {
            return Err(self.bad_reg(Feature::TileFormat, reg, v));
        }
        Ok(dst && (f.zero_pad_last() != 0 || f.zero_pad_first() != 0))
    }

    /// Tile DMA source `i` (0 or 1).
    fn source(&self, i: u32) -> Result<Surface, EngineError> {
        let slot = self
            .h
            .rbase(i)
            .ok_or(self.bad_header(Feature::DmaDisabled, 8))?;
        if i == 0 {
            // Source 1 has no enable of its own in the samples (its inferred
            // DMAConfig has bit 0 clear in every two-input op): RBE1 decides.
            let v = self.need(tile_src::DMA_CONFIG)?;
            if TileSrcDmaConfig(v).en() == 0 {
                return Err(self.bad_reg(Feature::DmaDisabled, tile_src::DMA_CONFIG, v));
            }
        }
        self.tile_fmt(tile_src::fmt(i), false)?;
        let [base, row, plane, _, _] = tile_src::surface(i);
        let kind = DmaKind::TileSrc(u8::from(i != 0));
        self.surface(slot, [base, row, plane], kind)
    }

    /// The tile DMA destination, and whether it zero-pads rows.
    fn dest(&self) -> Result<(Surface, bool), EngineError> {
        let v = self.need(tile_dst::DMA_CONFIG)?;
        if TileDstDmaConfig(v).en() == 0 {
            return Err(self.bad_reg(Feature::DmaDisabled, tile_dst::DMA_CONFIG, v));
        }
        let slot = self
            .h
            .wbase()
            .ok_or(self.bad_header(Feature::DmaDisabled, 8))?;
        if slot == SLOT_COMMAND || slot == SLOT_KERNEL {
            return Err(EngineError::Td(TdError::WriteToProtectedSlot {
                td: self.td,
                slot,
            }));
        }
        let pad = self.tile_fmt(tile_dst::FMT, true)?;
        let [base, row, plane, _, _] = tile_dst::SURFACE;
        Ok((
            self.surface(slot, [base, row, plane], DmaKind::TileDst)?,
            pad,
        ))
    }

    fn surface(&self, slot: u8, regs: [Reg; 3], kind: DmaKind) -> Result<Surface, EngineError> {
        let [base, row, plane] = regs;
        // The DMA uses bits [31:6]; lower bits are ignored, as by hardware.
        let base = u64::from(DmaAddr(self.need(base)?).bytes());
        let row = u64::from(DmaAddr(self.need(row)?).bytes());
        let plane = u64::from(DmaAddr(self.need(plane)?).bytes());
        let base = self
            .bar(slot)
            .checked_add(base)
            .ok_or(self.too_large(kind))?;
        Ok(Surface {
            base,
            row,
            plane,
            kind,
        })
    }

    /// The enabled coefficient channels (bit i = channel i). Refuses the
    /// inferred extra kernel DMA channels.
    fn coeff_channels(&self) -> Result<u32, EngineError> {
        let mut mask = 0u32;
        for i in 0..kdma::COEFF_CHANNELS {
            if CoeffDmaConfig(self.need(kdma::COEFF_DMA_CONFIG.at(i))?).en() != 0 {
                mask |= 1u32.checked_shl(i).unwrap_or(0);
            }
        }
        for i in 0..kdma::EXTRA_CHANNELS {
            let reg = kdma::EXTRA_CONFIG.at(i);
            let v = self.need(reg)?;
            if CoeffDmaConfig(v).en() != 0 {
                return Err(self.bad_reg(Feature::ExtraDma, reg, v));
            }
        }
        Ok(mask)
    }

    /// Refuses enabled coefficient channels outside `allowed`.
    fn only_channels(&self, mask: u32, allowed: u32) -> Result<(), EngineError> {
        let extra = mask & !allowed;
        if extra != 0 {
            let reg = kdma::COEFF_DMA_CONFIG.at(extra.trailing_zeros());
            return Err(self.bad_reg(Feature::KernelChannels, reg, self.img.value(reg)));
        }
        Ok(())
    }

    /// The BAR slot of the coefficients, refusing KBase1..3.
    fn kernel_slot(&self, channel: u32) -> Result<u8, EngineError> {
        for k in 1..4 {
            if self.h.kbase(k).is_some() {
                return Err(self.bad_header(Feature::KernelBase, 9));
            }
        }
        self.h
            .kbase(0)
            .ok_or(EngineError::Td(TdError::CoeffWithoutKernelBase {
                td: self.td,
                channel,
            }))
    }

    /// Coefficient channel `k`: its device address and CoeffBfrSize, after
    /// checking it is enabled and holds `needed` bytes.
    fn coeff(&self, slot: u8, mask: u32, k: u32, needed: u64) -> Result<u64, EngineError> {
        let kernel = |problem| EngineError::Kernel {
            td: self.td,
            channel: k,
            problem,
        };
        if mask & 1u32.checked_shl(k).unwrap_or(0) == 0 {
            return Err(kernel(KernelProblem::Disabled));
        }
        let base = DmaAddr(self.need(kdma::COEFF_BASE_ADDR.at(k))?).bytes();
        let size = DmaAddr(self.need(kdma::COEFF_BFR_SIZE.at(k))?).bytes();
        if needed > u64::from(size) {
            return Err(kernel(KernelProblem::TooSmall { needed, size }));
        }
        self.bar(slot)
            .checked_add(u64::from(base))
            .ok_or(self.too_large(DmaKind::Kernel))
    }

    fn elementwise_shape(&self, c: &Common) -> Result<Shape, EngineError> {
        if c.input != c.output {
            let v = self.img.value(common::OUT_DIM);
            return Err(self.bad_reg(Feature::ShapeMismatch, common::OUT_DIM, v));
        }
        Ok(c.input)
    }

    // -----------------------------------------------------------------
    // Planar engine

    fn run_pe(&mut self, c: &Common) -> Result<(), EngineError> {
        let mask = self.coeff_channels()?;
        self.only_channels(mask, 0)?;
        if (0..4).any(|k| self.h.kbase(k).is_some()) {
            // Coefficients on a planar task: their use is not known.
            return Err(self.bad_header(Feature::KernelChannels, 9));
        }
        let cv = self.need(pe::CFG)?;
        let cfg = PeCfg(cv);
        let known = PeCfg::OP_MODE.mask() | PeCfg::COND.mask() | PeCfg::SEC_SRC.mask();
        if cv & !known != 0 {
            return Err(self.bad_reg(Feature::PeCfg, pe::CFG, cv));
        }
        let op = cfg.op().ok_or(self.bad_reg(Feature::PeOp, pe::CFG, cv))?;
        let two = match (cfg.sec_src(), self.h.rbase(1).is_some()) {
            (2, true) => true,
            (0, false) => false,
            _ => return Err(self.bad_reg(Feature::PeSources, pe::CFG, cv)),
        };
        let abs = cfg.cond() != 0;
        if two && abs {
            return Err(self.bad_reg(Feature::PeCfg, pe::CFG, cv));
        }
        if !two && op != PeOp::Add {
            return Err(self.bad_reg(Feature::PeOp, pe::CFG, cv));
        }
        if two && c.ch.src2_in_fmt() != FMT_F16 {
            return Err(self.bad_reg(Feature::ElementFormat, common::CH_CFG, c.ch.0));
        }
        let shape = self.elementwise_shape(c)?;
        let pv = self.need(pe::PRE_SCALE)?;
        if pv & 0xFFFF != 0 {
            return Err(self.bad_reg(Feature::PeScale, pe::PRE_SCALE, pv));
        }
        let pre = F16(u16::try_from(pv >> 16).unwrap_or(0)).to_f32();
        let bs = PeBiasScale(self.need(pe::BIAS_SCALE)?);
        let scale = F16(u16::try_from(bs.scale()).unwrap_or(0)).to_f32();
        let bias = F16(u16::try_from(bs.bias()).unwrap_or(0));
        let f = PeFn {
            op,
            two,
            abs,
            pre,
            scale,
            bias: if bias.is_zero() {
                None
            } else {
                Some(bias.to_f32())
            },
            fin: F32(self.need(pe::FINAL_SCALE)?),
            opts: *self.opts,
        };
        let src0 = self.source(0)?;
        let src1 = if two { Some(self.source(1)?) } else { None };
        let (dst, pad) = self.dest()?;
        self.elementwise(shape, src0, src1, dst, pad, |a, b| f.apply(a, b))
    }

    // -----------------------------------------------------------------
    // Neural engine

    fn run_ne(&mut self, c: &Common) -> Result<(), EngineError> {
        for reg in [pe::CFG, pe::BIAS_SCALE, pe::PRE_SCALE, pe::FINAL_SCALE] {
            let v = self.img.value(reg);
            if v != 0 {
                return Err(self.bad_reg(Feature::PeOnNeTask, reg, v));
            }
        }
        if self.h.rbase(1).is_some() {
            return Err(self.bad_header(Feature::PeSources, 8));
        }
        let mv = self.need(ne::MAC_CFG)?;
        let mac = MacCfg(mv);
        let known = MacCfg::OP_MODE.mask()
            | MacCfg::KERNEL_MODE.mask()
            | MacCfg::BIAS_MODE.mask()
            | MacCfg::MATRIX_BIAS_EN.mask()
            | MacCfg::BINARY_POINT.mask()
            | MacCfg::POST_SCALE_MODE.mask()
            | MacCfg::NONLINEAR_MODE.mask()
            | MAC_BIT20;
        if mv & !known != 0 {
            return Err(self.bad_reg(Feature::MacMode, ne::MAC_CFG, mv));
        }
        if mac.bias_mode() != 0 || mac.matrix_bias_en() != 0 {
            return Err(self.bad_reg(Feature::Bias, ne::MAC_CFG, mv));
        }
        if mac.post_scale_mode() != 0 {
            return Err(self.bad_reg(Feature::PostScale, ne::MAC_CFG, mv));
        }
        let conv = match (mac.op_mode(), mac.kernel_mode()) {
            (0, 0) => true,
            (4, 1) => false,
            _ => return Err(self.bad_reg(Feature::MacMode, ne::MAC_CFG, mv)),
        };
        for reg in [ne::MATRIX_VECTOR_BIAS, ne::ACC_BIAS] {
            let v = self.img.value(reg);
            if v != 0 {
                return Err(self.bad_reg(Feature::Bias, reg, v));
            }
        }
        let psv = self.need(ne::POST_SCALE)?;
        if psv & !0xFFFF != 0 {
            return Err(self.bad_reg(Feature::PostScale, ne::POST_SCALE, psv));
        }
        let post = F16(u16::try_from(psv).unwrap_or(0)).to_f32();
        if (c.groups.unicast_en() != 0) == conv {
            let v = c.groups.0;
            return Err(self.bad_reg(Feature::Unicast, common::GROUP_CONV_CFG, v));
        }
        let mask = self.coeff_channels()?;
        let act = match mac.nonlinear() {
            Some(Nonlinear::None) => Act::None,
            Some(Nonlinear::Relu) => Act::Relu,
            Some(Nonlinear::Lut) => {
                if conv {
                    return Err(self.bad_reg(Feature::KernelChannels, ne::MAC_CFG, mv));
                }
                Act::Lut(self.load_lut(mask)?)
            }
            None => return Err(self.bad_reg(Feature::Nonlinear, ne::MAC_CFG, mv)),
        };
        let fin = Finish {
            post,
            act,
            opts: *self.opts,
        };
        if conv {
            return self.run_conv(c, mask, &fin);
        }
        if !matches!(act, Act::Lut(_)) {
            self.only_channels(mask, 0)?;
        }
        let shape = self.elementwise_shape(c)?;
        let src = self.source(0)?;
        let (dst, pad) = self.dest()?;
        self.elementwise(shape, src, None, dst, pad, |a, _| fin.apply(a.to_f32()))
    }

    fn load_lut(&mut self, mask: u32) -> Result<Lut, EngineError> {
        self.only_channels(mask, 1)?;
        let slot = self.kernel_slot(0)?;
        let bytes = u64::try_from(LUT_BYTES).unwrap_or(u64::MAX);
        let addr = self.coeff(slot, mask, 0, bytes)?;
        let mut buf = [0u8; LUT_BYTES];
        self.read(Port::Kernel, addr, &mut buf)?;
        Lut::parse(&buf)
            .map_err(|(i, v)| self.unsupported(Feature::LutFormat, Site::Lut(i), u32::from(v)))
    }

    /// A 1×1 convolution (inner product when the tensor is 1×1): checks
    /// the coefficients, then streams.
    fn run_conv(&mut self, c: &Common, mask: u32, fin: &Finish) -> Result<(), EngineError> {
        let kv = self.need(ne::KERNEL_CFG)?;
        let k = KernelCfg(kv);
        let known = KernelCfg::KERNEL_FMT.mask()
            | KernelCfg::PALETTIZED_EN.mask()
            | KernelCfg::PALETTIZED_BITS.mask()
            | KernelCfg::SPARSE_FMT.mask()
            | KernelCfg::GROUP_KERNEL_REUSE.mask();
        if kv & !known != 0
            || k.kernel_fmt() != FMT_F16
            || k.palettized_en() != 0
            || k.sparse_fmt() != 0
            || k.group_kernel_reuse() != 0
        {
            return Err(self.bad_reg(Feature::KernelFormat, ne::KERNEL_CFG, kv));
        }
        let (input, output) = (c.input, c.output);
        if input.h != output.h || input.w != output.w {
            let v = self.img.value(common::OUT_DIM);
            return Err(self.bad_reg(Feature::ShapeMismatch, common::OUT_DIM, v));
        }
        let (cin, cout) = (input.c, output.c);
        let ocg_log = c.conv.ocg_size(); // 0..=7
        let ocg = 1u32.checked_shl(ocg_log).unwrap_or(1);
        // cout >= 1 and ocg >= 1.
        let nch = cout.div_ceil(ocg);
        if nch > kdma::COEFF_CHANNELS {
            let v = self.img.value(common::COUT);
            return Err(self.bad_reg(Feature::OutputChannelGroups, common::COUT, v));
        }
        let row_len = u64::from(cin).saturating_mul(2);
        let row_bytes = row_len
            .checked_next_multiple_of(GRANULE)
            .ok_or(self.too_large(DmaKind::Kernel))?;
        if mask == 0 {
            return Err(EngineError::Kernel {
                td: self.td,
                channel: 0,
                problem: KernelProblem::Disabled,
            });
        }
        let slot = self.kernel_slot(mask.trailing_zeros())?;
        let mut plan = ConvPlan {
            cin,
            cout,
            h: input.h,
            w: input.w,
            chans: [0; 16],
            row_bytes,
            order: self.opts.weight_order,
            ocg_log,
            nch,
        };
        for kk in 0..nch {
            // Rows of channel kk (kk < nch <= cout).
            let rows = match plan.order {
                WeightOrder::Blocked => ocg.min(cout.saturating_sub(kk.saturating_mul(ocg))),
                WeightOrder::Interleaved => cout.saturating_sub(kk).div_ceil(nch),
            };
            let needed = u64::from(rows.saturating_sub(1))
                .saturating_mul(row_bytes)
                .saturating_add(row_len);
            let addr = self.coeff(slot, mask, kk, needed)?;
            if let Some(a) = plan.chans.get_mut(us(kk)) {
                *a = addr;
            }
        }
        let src = self.source(0)?;
        let (dst, pad) = self.dest()?;
        self.conv_stream(&plan, &src, &dst, pad, fin)
    }

    /// Streams a planned convolution: for each row chunk of up to 64
    /// elements and each group of output channels whose accumulators fit
    /// in [`ACC`], the input channels are read in blocks together with the
    /// matching weights and accumulated in ascending input-channel order.
    /// Out of line, so its buffers are not in the frame of the other paths.
    #[inline(never)]
    fn conv_stream(
        &mut self,
        plan: &ConvPlan,
        src: &Surface,
        dst: &Surface,
        pad: bool,
        fin: &Finish,
    ) -> Result<(), EngineError> {
        let mut acc = [F32::ZERO; ACC_LEN];
        let mut xbuf = [0u8; XCACHE_BYTES];
        let mut wbuf = [0u8; WEIGHT_BYTES];
        let mut obuf = [0u8; OUT_BYTES];
        for y in 0..plan.h {
            let mut x0 = 0u32;
            while x0 < plan.w {
                let n_w = CONV_W.min(plan.w.wrapping_sub(x0)); // 1..=64
                let n_oc_max = ACC.checked_div(n_w).unwrap_or(1); // >= 2
                let n_ic = CONV_IC.min(XCACHE.checked_div(n_w).unwrap_or(1)); // >= 2
                let row = us(n_w).saturating_mul(2);
                let mut oc0 = 0u32;
                while oc0 < plan.cout {
                    let n_oc = n_oc_max.min(plan.cout.wrapping_sub(oc0));
                    let tile = us(n_oc.saturating_mul(n_w)); // <= ACC
                    for a in acc.iter_mut().take(tile) {
                        *a = F32::ZERO;
                    }
                    let mut ic0 = 0u32;
                    while ic0 < plan.cin {
                        let k_ic = n_ic.min(plan.cin.wrapping_sub(ic0));
                        self.charge(
                            u64::from(n_oc)
                                .saturating_mul(u64::from(n_w))
                                .saturating_mul(u64::from(k_ic)),
                        )?;
                        // Input channels ic0.. of this row chunk, one after
                        // the other in `xbuf`.
                        for i in 0..k_ic {
                            let at = self.at(src, ic0.wrapping_add(i), y, x0)?;
                            let off = us(i).saturating_mul(row);
                            let part = xbuf.get_mut(off..).unwrap_or_default();
                            self.read(Port::TileSrc(0), at, prefix(part, row))?;
                        }
                        for o in 0..n_oc {
                            let waddr = plan
                                .weights(oc0.wrapping_add(o), ic0)
                                .ok_or(self.too_large(DmaKind::Kernel))?;
                            let wbytes = us(k_ic).saturating_mul(2);
                            self.read(Port::Kernel, waddr, prefix(&mut wbuf, wbytes))?;
                            let first = us(o).saturating_mul(us(n_w));
                            let accs = acc.get_mut(first..).unwrap_or_default();
                            accumulate(prefix_f32(accs, us(n_w)), &xbuf, &wbuf, us(k_ic));
                        }
                        ic0 = ic0.wrapping_add(k_ic);
                    }
                    for o in 0..n_oc {
                        let first = us(o).saturating_mul(us(n_w));
                        for xw in 0..us(n_w) {
                            let v = acc.get(first.saturating_add(xw)).copied();
                            put16(&mut obuf, xw, fin.apply(v.unwrap_or(F32::NAN)));
                        }
                        let oc = oc0.wrapping_add(o);
                        let at = self.at(dst, oc, y, x0)?;
                        self.write(Port::TileDst, at, prefix(&mut obuf, row))?;
                        if pad && x0.wrapping_add(n_w) == plan.w {
                            self.pad_row(dst, oc, y, plan.w)?;
                        }
                    }
                    oc0 = oc0.wrapping_add(n_oc);
                }
                x0 = x0.wrapping_add(n_w);
            }
        }
        Ok(())
    }

    // -----------------------------------------------------------------
    // Streaming

    /// Writes zeros from the end of row `(c, y)`'s data (`w` elements) to
    /// the next DMA granule.
    fn pad_row(&mut self, dst: &Surface, c: u32, y: u32, w: u32) -> Result<(), EngineError> {
        let data = u64::from(w).saturating_mul(2);
        let end = data.checked_next_multiple_of(GRANULE).unwrap_or(data);
        let n = usize::try_from(end.saturating_sub(data)).unwrap_or(0);
        if n == 0 {
            return Ok(());
        }
        let at = self.at(dst, c, y, w)?;
        let mut zeros = [0u8; GRANULE_BYTES];
        self.write(Port::TileDst, at, prefix(&mut zeros, n))
    }

    /// Runs `f` on every element of `shape`: `f(src0, src1)` (src1 reads
    /// as 0 when absent), result to `dst`.
    #[inline(never)]
    fn elementwise(
        &mut self,
        shape: Shape,
        src0: Surface,
        src1: Option<Surface>,
        dst: Surface,
        pad: bool,
        f: impl Fn(F16, F16) -> F16,
    ) -> Result<(), EngineError> {
        let mut a = [0u8; CHUNK_BYTES];
        let mut b = [0u8; CHUNK_BYTES];
        let mut o = [0u8; CHUNK_BYTES];
        for c in 0..shape.c {
            for y in 0..shape.h {
                let mut x0 = 0u32;
                while x0 < shape.w {
                    let n = CHUNK.min(shape.w.wrapping_sub(x0));
                    let bytes = us(n).saturating_mul(2);
                    self.charge(u64::from(n))?;
                    let at = self.at(&src0, c, y, x0)?;
                    self.read(Port::TileSrc(0), at, prefix(&mut a, bytes))?;
                    if let Some(s1) = &src1 {
                        let at = self.at(s1, c, y, x0)?;
                        self.read(Port::TileSrc(1), at, prefix(&mut b, bytes))?;
                    }
                    for i in 0..us(n) {
                        put16(&mut o, i, f(get16(&a, i), get16(&b, i)));
                    }
                    let at = self.at(&dst, c, y, x0)?;
                    self.write(Port::TileDst, at, prefix(&mut o, bytes))?;
                    x0 = x0.wrapping_add(n);
                }
                if pad {
                    self.pad_row(&dst, c, y, shape.w)?;
                }
            }
        }
        Ok(())
    }
}
