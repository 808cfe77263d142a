// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! An open compiler: ONNX models to H13 programs.
//!
//! [`compile`] reads an ONNX model (the protobuf, decoded by `prost` with
//! the messages of [`onnx`]), infers every shape from the graph inputs and
//! the initializers, and lowers the graph to **one** H13 program: a TD
//! chain built by [`builder`](crate::builder)'s TD constructors, the
//! coefficients and constants in slot 1, every intermediate resident in
//! scratch slot 3 (sharing memory where the chain orders the accesses,
//! `share_scratch`), the graph's output in slot 4 and its inputs from
//! slot 5.
//! [`Compiled::to_anec`] writes it as the `.anec` container the library
//! loads, with the model's input and output names and shapes (see
//! [`crate::anec`]'s names block).
//!
//! # The supported subset
//!
//! | ONNX op | lowering | TDs |
//! |---|---|---|
//! | `Gemm` (transA 0, any transB, alpha, beta; B and C constant) | 1×1 convolution, batch as the width; bias as a planar add of a constant | 1 (+1 with C) |
//! | `MatMul` (2-D activation × constant) | as Gemm without C | 1 |
//! | `Conv` (1×1 kernel, stride 1, no padding, group 1, batch 1; W and B constant) | 1×1 convolution; bias as a planar add | 1 (+1 with B) |
//! | `Conv` with a k×k kernel, strides, explicit pads or groups (depthwise) | the window gathered by copy TDs ([`Window`]), then one 1×1 convolution over the taps | copies + 1 (+1 with B) |
//! | `MaxPool`, `AveragePool` (explicit pads; `count_include_pad` 1 with pads) | the window gathered, then planar max TDs / a 1×1 convolution of weights 1/(kh·kw) | copies + taps − 1 / copies + 1 |
//! | `GlobalAveragePool` | one 1×1 convolution reading the pixels as its input channels | 1 |
//! | `BatchNormalization` (inference, constant parameters) | folded into the preceding Conv/Gemm/MatMul's weights and bias | 0 |
//! | `Relu` | fused into the preceding convolution when it has no bias and no other reader, else a neural-engine pass-through | 0 or 1 |
//! | `Sigmoid` | neural-engine pass-through with the table non-linearity ([`builder::sigmoid_table`], Apple's table: linear interpolation, step 1/2) | 1 |
//! | `Gelu` (`approximate = "none"`) | the same with [`builder::gelu_table`] (eiln's compiled gelu's layout, step 1/4) | 1 |
//! | `Clip` (constant bounds), `LeakyRelu` | the same with a table without samples ([`builder::clip_table`], [`builder::leaky_relu_table`]: eiln's relu6 / hardtanh, leakyrelu / rrelu), exact | 1 |
//! | `Flatten`, `Reshape` (constant shape) of a computed value that keeps the engine tensor (`[1, C, 1, 1]` ↔ `[1, C]`) | a change of the model's view only | 0 |
//! | `Abs` | one-source planar op with Cfg bit 6 (eiln's abs) | 1 |
//! | `Concat` on the channel / feature axis (axis 1) | one neural-engine pass-through copy per input into its channel range | n |
//! | `Add`, `Sub`, `Mul`, `Max`, `Min`, `Mean` (two inputs) of two activations of the same shape | planar engine, two sources (`Sub` as `(−1·y) + x`, `Mean` with Scale 0.5, as eiln's compiled sub and ave) | 1 |
//! | `Add`, `Sub`, `Mul` of an activation and a constant that broadcasts to it | planar engine; the constant materialized in slot 1 | 1 |
//!
//! Everything else is refused with [`CompileError::Unsupported`], naming the
//! node, its op and the reason; nothing falls back silently.
//!
//! # Layouts
//!
//! A 2-D activation `[batch, features]` lives on the engine as `(1,
//! features, 1, batch)` (features as channels, as [`builder::linear`]), a
//! 4-D one `[1, C, H, W]` as itself. The compiled program records the
//! model's shape and this layout for each input and output, so callers
//! pass and receive arrays in the model's own shape.
//!
//! # Numerics
//!
//! Weights, constants and activations are fp16 on the engine; every TD
//! rounds its result to fp16 (a convolution accumulates in binary32 on the
//! engine model). A bias is added by its own TD after the convolution's
//! rounding, so a layer with a bias rounds twice. BatchNormalization is
//! folded in f32 before the weights are rounded to fp16.
//!
//! # Targets
//!
//! Only H13 (M1, T8103/T6000/T6001/T6002) programs are emitted. H14
//! (T6021) is out of scope until its program container is understood from
//! the hardware record; [`Target::T6021`] is refused.

pub mod onnx;
pub mod zoo;

use std::collections::HashMap;

use half::f16;

use crate::anec::{Anec, AnecError, AnecHeader, IoLayout, IoName, Nchw, PayloadOffset, SLOTS};
use crate::builder::{
    self, chain_program, granule, slot_of, Activation, BuildError, Direction, Geom, KernelLayout,
    Loc, NeTask, PeTask, Program, Step, TensorSlot, SLOT_FIRST_INPUT, SLOT_OUTPUT, SLOT_SCRATCH,
};
use crate::hw::td::regs::PeOp;
use crate::tensor::Shape;

/// The ONNX op types the compiler lowers (each under the conditions of
/// the table above); every other op is refused by name.
pub const SUPPORTED_OPS: &[&str] = &[
    "Gemm",
    "MatMul",
    "Conv",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "BatchNormalization",
    "Relu",
    "Sigmoid",
    "Gelu",
    "Clip",
    "LeakyRelu",
    "Flatten",
    "Reshape",
    "Abs",
    "Concat",
    "Add",
    "Sub",
    "Mul",
    "Max",
    "Min",
    "Mean",
];

/// The engine generation to compile for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// H13 (M1 family).
    H13,
    /// H14 (T6021, M2 Pro/Max): refused.
    T6021,
}

/// Why a model was not compiled.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The file is not an ONNX model.
    #[error("not an ONNX model: {0}")]
    Parse(#[from] prost::DecodeError),
    /// The model is malformed or outside what the compiler handles as a
    /// whole (no graph, symbolic shapes, several outputs).
    #[error("model: {0}")]
    Model(String),
    /// A node the compiler cannot lower.
    #[error("node '{node}' ({op}): {reason}")]
    Unsupported {
        /// The node's name (or its first output when it has none).
        node: String,
        /// Its op type.
        op: String,
        /// Why.
        reason: String,
    },
    /// A lowered operation is beyond the engine's limits.
    #[error("node '{node}': {source}")]
    Build {
        /// The node.
        node: String,
        /// The builder's reason.
        source: BuildError,
    },
    /// The target is out of scope.
    #[error("target {0} is out of scope: only H13 (M1) programs are emitted; the H14 (T6021) program container is not yet understood from the hardware record")]
    Target(&'static str),
    /// The program did not fit the container.
    #[error("container: {0}")]
    Container(#[from] AnecError),
}

/// An input or output of the compiled model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoTensor {
    /// The model's name.
    pub name: String,
    /// The BAR slot.
    pub slot: u32,
    /// Input or output.
    pub direction: Direction,
    /// The model's dims.
    pub dims: Vec<usize>,
    /// How the model's array maps to the engine tensor.
    pub layout: IoLayout,
    /// The engine tensor.
    pub shape: Shape,
}

/// A compiled model.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The program.
    pub program: Program,
    /// Inputs then the output, by slot.
    pub io: Vec<IoTensor>,
    /// Node count of the model.
    pub nodes: usize,
    /// The scratch slot's size.
    pub scratch: ScratchBytes,
}

/// The scratch slot's size (bytes, 64-byte aligned buffers, before the
/// 16 KiB granule of the slot), with and without sharing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchBytes {
    /// Every intermediate at its own offset.
    pub unshared: u64,
    /// Intermediates whose accesses are ordered by the chain's
    /// dependencies sharing memory (`share_scratch`): what the program
    /// uses.
    pub shared: u64,
}

/// A value of the graph during lowering.
#[derive(Clone, Debug)]
struct Val {
    dims: Vec<usize>,
    layout: IoLayout,
    shape: Shape,
    /// Where it lives, once placed.
    loc: Option<Loc>,
}

/// A high-level operation before placement.
#[derive(Clone, Debug)]
enum Op {
    /// `out = act(W · x + bias)` as a 1×1 convolution.
    Conv {
        node: String,
        x: String,
        out: String,
        cin: usize,
        cout: usize,
        /// `[cout][cin]`, f32 until packed.
        w: Vec<f32>,
        bias: Option<Vec<f32>>,
        relu: bool,
    },
    /// Two-source planar op; `b` is a value or a constant (dense, in the
    /// engine tensor's NCHW order).
    /// `out = ((pre · a) ⊕ b) · scale`, `a` the planar engine's source 0.
    Binary {
        node: String,
        op: PeOp,
        a: String,
        b: Operand,
        out: String,
        pre: u16,
        scale: u16,
    },
    /// `|x|` on the planar engine.
    Abs {
        node: String,
        x: String,
        out: String,
    },
    /// Channel concatenation: one pass-through copy per input.
    Concat {
        node: String,
        inputs: Vec<String>,
        out: String,
    },
    /// The window gather of a spatial op ([`Window`]): `out` (`T·C`
    /// channels, tap-major, on the output grid) from `x`, with `fill`
    /// where a tap falls in the padding.
    Im2col {
        node: String,
        x: String,
        out: String,
        win: Window,
        fill: f32,
    },
    /// The maximum over the `taps` channel blocks of an [`Op::Im2col`]
    /// output, on the planar engine.
    MaxTaps {
        node: String,
        x: String,
        out: String,
        taps: usize,
    },
    /// The mean over every pixel of each channel: one 1×1 convolution
    /// reading the pixels as its input channels.
    GlobalAverage {
        node: String,
        x: String,
        out: String,
    },
    /// A neural-engine pass-through with ReLU or the sigmoid table.
    Unary {
        node: String,
        x: String,
        out: String,
        act: Activation,
    },
}

impl Op {
    /// The value the op writes.
    fn out_mut(&mut self) -> &mut String {
        match self {
            Op::Conv { out, .. }
            | Op::Binary { out, .. }
            | Op::Abs { out, .. }
            | Op::Concat { out, .. }
            | Op::Im2col { out, .. }
            | Op::MaxTaps { out, .. }
            | Op::GlobalAverage { out, .. }
            | Op::Unary { out, .. } => out,
        }
    }
}

#[derive(Clone, Debug)]
enum Operand {
    Value(String),
    Const(Vec<f32>),
}

/// The sliding window of a k×k / strided / padded convolution or a
/// pooling over a `[1, C, H, W]` value in pixel rows ([`engine_shape`]).
///
/// It is lowered as a gather ("im2col") of copy TDs, each a
/// neural-engine pass-through (tinygrad's concat copy) between strided
/// views: tap `t = (dy, dx)` of input channel `c` over output pixel `(oy,
/// ox)` is input pixel `(sh·oy + dy − pt, sw·ox + dx − pl)`, a row at a
/// 64-byte multiple, so a view of the valid output rectangle of one tap is
/// a base offset, a row stride `sw·64` and a plane stride `sh·W·64`. The
/// gathered `T·C` channels then feed one 1×1 convolution (or a chain of
/// planar max operations): the engine features used are those of the
/// fixtures (1×1 convolution, pass-through copy, planar max), with DMA
/// strides chosen by the compiler.
#[derive(Clone, Copy, Debug)]
struct Window {
    c: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    /// Padding at the top and the left.
    pt: usize,
    pl: usize,
    oh: usize,
    ow: usize,
}

impl Window {
    /// Reads `kernel_shape` (unless given), `strides`, `pads`,
    /// `dilations`, `auto_pad` and `ceil_mode` of `n` over a `[1, c, h,
    /// w]` input.
    fn parse(
        n: &onnx::NodeProto,
        (c, h, w): (usize, usize, usize),
        kernel: Option<(usize, usize)>,
    ) -> Result<Window, CompileError> {
        let two = |name: &str, default: i64| -> Result<(usize, usize), CompileError> {
            match n.ints(name) {
                None => Ok((default as usize, default as usize)),
                Some(&[a, b]) if a >= 0 && b >= 0 && a <= 1 << 15 && b <= 1 << 15 => {
                    Ok((a as usize, b as usize))
                }
                Some(v) => Err(unsupported(
                    n,
                    format!("{name} {v:?}: two values of 0..=32768 are needed"),
                )),
            }
        };
        let (kh, kw) = match kernel {
            Some(k) => k,
            None => {
                if n.ints("kernel_shape").is_none() {
                    return Err(unsupported(n, "kernel_shape is missing"));
                }
                two("kernel_shape", 1)?
            }
        };
        let (sh, sw) = two("strides", 1)?;
        if two("dilations", 1)? != (1, 1) {
            return Err(unsupported(n, "dilations other than 1 are not supported"));
        }
        if n.int("ceil_mode", 0) != 0 {
            return Err(unsupported(n, "ceil_mode 1 is not supported"));
        }
        let ap = n
            .attr("auto_pad")
            .map(|a| String::from_utf8_lossy(&a.s).into_owned());
        if ap.as_deref().is_some_and(|s| s != "NOTSET" && s != "VALID") {
            return Err(unsupported(
                n,
                "auto_pad SAME_* is not supported: give explicit pads",
            ));
        }
        let (pt, pl, pb, pr) = match n.ints("pads") {
            None => (0, 0, 0, 0),
            Some(&[a, b, c2, d]) if [a, b, c2, d].iter().all(|&v| (0..=1 << 15).contains(&v)) => {
                (a as usize, b as usize, c2 as usize, d as usize)
            }
            Some(v) => {
                return Err(unsupported(
                    n,
                    format!("pads {v:?}: four values of 0..=32768 are needed"),
                ))
            }
        };
        if kh == 0 || kw == 0 || sh == 0 || sw == 0 {
            return Err(unsupported(n, "a zero kernel size or stride"));
        }
        if pt >= kh || pb >= kh || pl >= kw || pr >= kw {
            return Err(unsupported(
                n,
                format!(
                    "pads {:?} must be smaller than the kernel {kh}x{kw}",
                    [pt, pl, pb, pr]
                ),
            ));
        }
        let (hp, wp) = (h + pt + pb, w + pl + pr);
        if hp < kh || wp < kw {
            return Err(unsupported(
                n,
                format!("the {kh}x{kw} kernel is larger than the padded {hp}x{wp} input"),
            ));
        }
        Ok(Window {
            c,
            h,
            w,
            kh,
            kw,
            sh,
            sw,
            pt,
            pl,
            oh: (hp - kh) / sh + 1,
            ow: (wp - kw) / sw + 1,
        })
    }

    fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// Whether some tap of some output pixel falls in the padding.
    fn pads(&self) -> bool {
        (0..self.kh).any(|dy| self.range(dy, self.pt, self.sh, self.h, self.oh) != (0, self.oh))
            || (0..self.kw)
                .any(|dx| self.range(dx, self.pl, self.sw, self.w, self.ow) != (0, self.ow))
    }

    /// The output positions `[o0, o1)` whose tap `d` reads inside the
    /// input (`s·o + d − p` in `0..n`).
    fn range(&self, d: usize, p: usize, s: usize, n: usize, on: usize) -> (usize, usize) {
        // s·o + d >= p and s·o + d − p <= n − 1.
        let o0 = p.saturating_sub(d).div_ceil(s);
        let o1 = if n + p < d + 1 {
            0
        } else {
            ((n + p - d - 1) / s + 1).min(on)
        };
        (o0.min(o1), o1)
    }
}

/// Appends the [`Op::Im2col`] of node `n`'s window over its first input
/// and returns the name of the gathered value.
fn gather(
    ops: &mut Vec<Op>,
    producer: &mut HashMap<String, usize>,
    n: &onnx::NodeProto,
    out: &str,
    win: Window,
    fill: f32,
) -> String {
    let col = format!("{out}#window");
    producer.insert(col.clone(), ops.len());
    ops.push(Op::Im2col {
        node: node_name(n),
        x: n.input[0].clone(),
        out: col.clone(),
        win,
        fill,
    });
    col
}

/// Whether node `n` needs its graph's 4-D values in pixel rows: a
/// pooling, or a Conv whose kernel, stride, padding or groups are not
/// those of a plain 1×1 convolution.
fn spatial(n: &onnx::NodeProto, consts: &HashMap<String, (Vec<usize>, Vec<f32>)>) -> bool {
    match n.op_type.as_str() {
        "MaxPool" | "AveragePool" | "GlobalAveragePool" => true,
        "Conv" => {
            let k = n
                .input
                .get(1)
                .and_then(|w| consts.get(w))
                .map(|(d, _)| d.get(2..4) != Some(&[1, 1][..]));
            k.unwrap_or(false)
                || n.int("group", 1) != 1
                || n.ints("strides").is_some_and(|s| s.iter().any(|&v| v != 1))
                || n.ints("pads").is_some_and(|s| s.iter().any(|&v| v != 0))
        }
        _ => false,
    }
}

fn unsupported(n: &onnx::NodeProto, reason: impl Into<String>) -> CompileError {
    CompileError::Unsupported {
        node: node_name(n),
        op: n.op_type.clone(),
        reason: reason.into(),
    }
}

fn node_name(n: &onnx::NodeProto) -> String {
    if n.name.is_empty() {
        n.output.first().cloned().unwrap_or_default()
    } else {
        n.name.clone()
    }
}

/// The engine tensor of a value of `dims`, or why there is none.
///
/// With `pixel_rows` (a graph with a spatial window: a k×k or strided or
/// padded or grouped Conv, or a pooling), a `[1, C, H, W]` value is the
/// engine tensor `(1, C, H·W, 1)`: every pixel in its own 64-byte row, so
/// that a shift by any pixel is a DMA base offset and a stride a row
/// stride (see [`Window`]). The dense element order is NCHW either way.
fn engine_shape(dims: &[usize], pixel_rows: bool) -> Result<(IoLayout, Shape), String> {
    let (layout, shape) = match *dims {
        [b, f] => (IoLayout::BatchFeatures, Shape::new(1, f, 1, b)),
        [1, c, h, w] if pixel_rows => {
            let hw = h
                .checked_mul(w)
                .ok_or_else(|| format!("{dims:?}: H·W overflows"))?;
            (IoLayout::Nchw, Shape::new(1, c, hw, 1))
        }
        [1, c, h, w] => (IoLayout::Nchw, Shape::new(1, c, h, w)),
        [n, _, _, _] => {
            return Err(format!(
                "a 4-D tensor of batch {n}: only batch 1 is supported for NCHW tensors"
            ))
        }
        _ => {
            return Err(format!(
                "rank {} ({dims:?}): only [batch, features] and [1, C, H, W] are supported",
                dims.len()
            ))
        }
    };
    let shape = shape.map_err(|e| e.to_string())?;
    // Within the registers' limits (channels, width, height, 4 GiB) before
    // anything is sized from it.
    Geom::new(&shape, "shape").map_err(|e| format!("{dims:?}: {e}"))?;
    Ok((layout, shape))
}

/// The most bytes one materialized constant (a bias or a broadcast
/// operand, stored at the full tensor's size) may take: 64 MiB.
pub const MAX_CONSTANT_BYTES: usize = 64 << 20;

/// Refuses to materialize a constant of `shape` beyond
/// [`MAX_CONSTANT_BYTES`].
fn constant_fits(shape: &Shape) -> Result<(), String> {
    let bytes = shape.layout().tiled_bytes();
    if bytes > MAX_CONSTANT_BYTES {
        return Err(format!(
            "a constant of {shape} would take {bytes} bytes in the program, more than {MAX_CONSTANT_BYTES}"
        ));
    }
    Ok(())
}

/// The element count of `dims`, or `None` when it overflows.
fn checked_count(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// Broadcasts constant `c` of `cdims` to `dims` (numpy rules) and returns
/// it in the engine tensor's dense NCHW order.
fn broadcast_const(
    c: &[f32],
    cdims: &[usize],
    dims: &[usize],
    layout: IoLayout,
) -> Option<Vec<f32>> {
    if cdims.len() > dims.len() {
        return None;
    }
    let pad = dims.len() - cdims.len();
    let full: Vec<usize> = (0..dims.len())
        .map(|i| if i < pad { 1 } else { cdims[i - pad] })
        .collect();
    for (a, b) in full.iter().zip(dims) {
        if *a != 1 && a != b {
            return None;
        }
    }
    let count: usize = dims.iter().product();
    let mut model = Vec::with_capacity(count);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..count {
        let mut off = 0;
        for (i, &d) in full.iter().enumerate() {
            off = off * d + if d == 1 { 0 } else { idx[i] };
        }
        model.push(c[off]);
        for i in (0..dims.len()).rev() {
            idx[i] += 1;
            if idx[i] < dims[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    Some(to_engine_order(&model, dims, layout))
}

/// The model's dense array → the engine tensor's dense NCHW array.
pub fn to_engine_order<T: Copy>(model: &[T], dims: &[usize], layout: IoLayout) -> Vec<T> {
    match layout {
        IoLayout::Nchw => model.to_vec(),
        IoLayout::BatchFeatures => {
            let (b, f) = (dims[0], dims[1]);
            (0..f)
                .flat_map(|j| (0..b).map(move |i| model[i * f + j]))
                .collect()
        }
    }
}

/// The engine tensor's dense NCHW array → the model's dense array.
pub fn from_engine_order<T: Copy>(engine: &[T], dims: &[usize], layout: IoLayout) -> Vec<T> {
    match layout {
        IoLayout::Nchw => engine.to_vec(),
        IoLayout::BatchFeatures => {
            let (b, f) = (dims[0], dims[1]);
            (0..b)
                .flat_map(|i| (0..f).map(move |j| engine[j * b + i]))
                .collect()
        }
    }
}

/// [`tile_const`] as the bytes stored in slot 1; errors name `node`.
fn const_bytes(shape: &Shape, dense: &[f16], node: &str) -> Result<Vec<u8>, CompileError> {
    let tiled =
        tile_const(shape, dense).map_err(|e| CompileError::Model(format!("node '{node}': {e}")))?;
    Ok(tiled
        .iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .collect())
}

/// A constant tensor in the ANE layout, as many bytes as a tile DMA reads
/// of it (the tiled bytes, not the 16 KiB-rounded buffer).
fn tile_const(shape: &Shape, dense: &[f16]) -> Result<Vec<f16>, crate::tensor::TensorError> {
    let mut v = crate::tensor::tile_to_vec(shape, dense)?;
    v.truncate(shape.layout().tiled_bytes() / 2);
    Ok(v)
}

/// Compiles an ONNX model file's bytes for `target`.
pub fn compile(bytes: &[u8], target: Target) -> Result<Compiled, CompileError> {
    compile_with(bytes, target, true)
}

/// [`compile`], with scratch sharing on or off (`share`; off: every
/// intermediate at its own offset, the tests' baseline).
pub(crate) fn compile_with(
    bytes: &[u8],
    target: Target,
    share: bool,
) -> Result<Compiled, CompileError> {
    if target == Target::T6021 {
        return Err(CompileError::Target("t6021"));
    }
    let model = onnx::decode(bytes)?;
    let g = model
        .graph
        .as_ref()
        .ok_or_else(|| CompileError::Model("the model has no graph".into()))?;
    for o in &model.opset_import {
        if !o.domain.is_empty() && o.domain != "ai.onnx" {
            return Err(CompileError::Model(format!(
                "operator set '{}' is not supported (only the default ONNX domain)",
                o.domain
            )));
        }
    }

    // Constants.
    let mut consts: HashMap<String, (Vec<usize>, Vec<f32>)> = HashMap::new();
    for t in &g.initializer {
        let data = t
            .to_f32()
            .map_err(|e| CompileError::Model(format!("initializer '{}': {e}", t.name)))?;
        let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
        if checked_count(&dims) != Some(data.len()) {
            return Err(CompileError::Model(format!(
                "initializer '{}': {} values for dims {dims:?}",
                t.name,
                data.len()
            )));
        }
        consts.insert(t.name.clone(), (dims, data));
    }
    // Pixel rows for every 4-D value when a node slides a window.
    let pixel_rows = g.node.iter().any(|n| spatial(n, &consts));
    // Inputs.
    let mut vals: HashMap<String, Val> = HashMap::new();
    let mut inputs = Vec::new();
    for vi in g.input.iter().filter(|v| !consts.contains_key(&v.name)) {
        let dims = vi
            .dims()
            .map_err(|e| CompileError::Model(format!("input '{}' {e}", vi.name)))?;
        let (layout, shape) = engine_shape(&dims, pixel_rows)
            .map_err(|e| CompileError::Model(format!("input '{}': {e}", vi.name)))?;
        vals.insert(
            vi.name.clone(),
            Val {
                dims,
                layout,
                shape,
                loc: None,
            },
        );
        inputs.push(vi.name.clone());
    }
    if inputs.is_empty() {
        return Err(CompileError::Model("the graph has no input".into()));
    }
    if g.output.len() != 1 {
        return Err(CompileError::Model(format!(
            "the graph has {} outputs; one is supported",
            g.output.len()
        )));
    }
    let output = g.output[0].name.clone();
    // Readers of each value.
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for n in &g.node {
        for i in &n.input {
            *readers.entry(i.as_str()).or_default() += 1;
        }
    }
    *readers.entry(output.as_str()).or_default() += 1;

    // Lower to high-level ops, inferring shapes.
    let mut ops: Vec<Op> = Vec::new();
    // The op index that produced a value.
    let mut producer: HashMap<String, usize> = HashMap::new();
    for n in &g.node {
        if !n.domain.is_empty() && n.domain != "ai.onnx" {
            return Err(unsupported(
                n,
                format!("domain '{}' is not supported", n.domain),
            ));
        }
        let out = n
            .output
            .first()
            .cloned()
            .ok_or_else(|| unsupported(n, "has no output"))?;
        if n.input.first().is_none_or(|i| i.is_empty()) {
            return Err(unsupported(n, "has no first input"));
        }
        let val_of = |name: &str| -> Result<Val, CompileError> {
            vals.get(name).cloned().ok_or_else(|| {
                if consts.contains_key(name) {
                    unsupported(
                        n,
                        format!("input '{name}' is a constant where an activation is needed"),
                    )
                } else {
                    unsupported(
                        n,
                        format!("input '{name}' is not produced by a supported node"),
                    )
                }
            })
        };
        let konst = |i: usize, what: &str| -> Result<&(Vec<usize>, Vec<f32>), CompileError> {
            let name = n
                .input
                .get(i)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| unsupported(n, format!("{what} is missing")))?;
            consts.get(name).ok_or_else(|| {
                unsupported(n, format!("{what} '{name}' must be a constant initializer"))
            })
        };
        let new_val = |dims: Vec<usize>| -> Result<Val, CompileError> {
            let (layout, shape) = engine_shape(&dims, pixel_rows).map_err(|e| unsupported(n, e))?;
            Ok(Val {
                dims,
                layout,
                shape,
                loc: None,
            })
        };
        let op = n.op_type.as_str();
        let (new_op, dims): (Option<Op>, Vec<usize>) = match op {
            "Gemm" | "MatMul" => {
                let x = val_of(&n.input[0])?;
                let [b, k] = x.dims[..] else {
                    return Err(unsupported(n, format!("input A is {:?}; a 2-D [batch, features] activation is needed", x.dims)));
                };
                if op == "Gemm" && n.int("transA", 0) != 0 {
                    return Err(unsupported(n, "transA = 1 is not supported"));
                }
                let (wd, w) = konst(1, "B")?;
                let trans_b = op == "Gemm" && n.int("transB", 0) != 0;
                let (wk, wn) = match wd[..] {
                    [r, c] if trans_b => (c, r),
                    [r, c] => (r, c),
                    _ => return Err(unsupported(n, format!("B is {wd:?}; 2-D is needed"))),
                };
                if wk != k {
                    return Err(unsupported(n, format!("A is [{b}, {k}] but B has {wk} rows")));
                }
                let alpha = if op == "Gemm" { n.float("alpha", 1.0) } else { 1.0 };
                let beta = if op == "Gemm" { n.float("beta", 1.0) } else { 1.0 };
                // [N][K] weights.
                let mut wt = vec![0f32; wn * k];
                for o in 0..wn {
                    for i in 0..k {
                        let v = if trans_b { w[o * k + i] } else { w[i * wn + o] };
                        wt[o * k + i] = alpha * v;
                    }
                }
                let bias = if op == "Gemm" && n.input.get(2).is_some_and(|s| !s.is_empty()) {
                    let (cd, c) = konst(2, "C")?;
                    let per = match cd[..] {
                        [m] if m == wn => c.clone(),
                        [1, m] if m == wn => c.clone(),
                        [m] | [1, m] if m == 1 => vec![c[0]; wn],
                        _ => {
                            return Err(unsupported(n, format!("C is {cd:?}; only a bias per output feature ([N] or [1, N]) is supported")))
                        }
                    };
                    Some(per.iter().map(|v| beta * v).collect())
                } else {
                    None
                };
                (
                    Some(Op::Conv {
                        node: node_name(n),
                        x: n.input[0].clone(),
                        out: out.clone(),
                        cin: k,
                        cout: wn,
                        w: wt,
                        bias,
                        relu: false,
                    }),
                    vec![b, wn],
                )
            }
            "Conv" => {
                let x = val_of(&n.input[0])?;
                let [1, c, h, w] = x.dims[..] else {
                    return Err(unsupported(n, format!("input is {:?}; [1, C, H, W] is needed", x.dims)));
                };
                let (wd, wv) = konst(1, "W")?;
                let [m, wc, kh, kw] = wd[..] else {
                    return Err(unsupported(n, format!("W is {wd:?}; 4-D is needed")));
                };
                let group = n.int("group", 1);
                if group < 1 || c % group as usize != 0 || m % group as usize != 0 {
                    return Err(unsupported(n, format!("group {group} does not divide {c} input and {m} output channels")));
                }
                let group = group as usize;
                if wc * group != c {
                    return Err(unsupported(n, format!("input has {c} channels, W expects {wc} per group of {group}")));
                }
                let bias = if n.input.get(2).is_some_and(|s| !s.is_empty()) {
                    let (bd, b) = konst(2, "B")?;
                    if bd[..] != [m] {
                        return Err(unsupported(n, format!("B is {bd:?}, [{m}] expected")));
                    }
                    Some(b.clone())
                } else {
                    None
                };
                let win = Window::parse(n, (c, h, w), Some((kh, kw)))?;
                let (x_name, cin, wx) = if spatial(n, &consts) {
                    // Gather the taps, then one 1×1 convolution over
                    // them: W'[oc][t·C + ci] = W[oc][ci − g·wc][dy][dx]
                    // for ci in oc's group g, else 0.
                    let t = win.taps();
                    let mut wx = vec![0f32; m * t * c];
                    let mg = m / group;
                    for oc in 0..m {
                        let gi = oc / mg;
                        for k in 0..wc {
                            let ci = gi * wc + k;
                            for tap in 0..t {
                                wx[oc * t * c + tap * c + ci] = wv[((oc * wc + k) * kh * kw) + tap];
                            }
                        }
                    }
                    let col = gather(&mut ops, &mut producer, n, &out, win, 0.0);
                    vals.insert(col.clone(), new_val(vec![1, t * c, win.oh, win.ow])?);
                    (col, t * c, wx)
                } else {
                    (n.input[0].clone(), c, wv.clone())
                };
                (
                    Some(Op::Conv {
                        node: node_name(n),
                        x: x_name,
                        out: out.clone(),
                        cin,
                        cout: m,
                        w: wx,
                        bias,
                        relu: false,
                    }),
                    vec![1, m, win.oh, win.ow],
                )
            }
            "MaxPool" | "AveragePool" => {
                let x = val_of(&n.input[0])?;
                let [1, c, h, w] = x.dims[..] else {
                    return Err(unsupported(n, format!("input is {:?}; [1, C, H, W] is needed", x.dims)));
                };
                if n.output.len() > 1 {
                    return Err(unsupported(n, "the Indices output is not supported"));
                }
                if n.int("storage_order", 0) != 0 {
                    return Err(unsupported(n, "storage_order 1 is not supported"));
                }
                let win = Window::parse(n, (c, h, w), None)?;
                let max = op == "MaxPool";
                if !max && win.pads() && n.int("count_include_pad", 0) == 0 {
                    return Err(unsupported(n, "padding with count_include_pad = 0 divides border pixels by fewer taps: not supported (count_include_pad = 1 is)"));
                }
                let t = win.taps();
                let fill = if max { f32::NEG_INFINITY } else { 0.0 };
                let col = gather(&mut ops, &mut producer, n, &out, win, fill);
                vals.insert(col.clone(), new_val(vec![1, t * c, win.oh, win.ow])?);
                let o = if max {
                    Op::MaxTaps {
                        node: node_name(n),
                        x: col,
                        out: out.clone(),
                        taps: t,
                    }
                } else {
                    // The mean as a depthwise 1×1 convolution over the taps.
                    let mut wx = vec![0f32; c * t * c];
                    for ch in 0..c {
                        for tap in 0..t {
                            wx[ch * t * c + tap * c + ch] = 1.0 / t as f32;
                        }
                    }
                    Op::Conv {
                        node: node_name(n),
                        x: col,
                        out: out.clone(),
                        cin: t * c,
                        cout: c,
                        w: wx,
                        bias: None,
                        relu: false,
                    }
                };
                (Some(o), vec![1, c, win.oh, win.ow])
            }
            "GlobalAveragePool" => {
                let x = val_of(&n.input[0])?;
                let [1, c, _, _] = x.dims[..] else {
                    return Err(unsupported(n, format!("input is {:?}; [1, C, H, W] is needed", x.dims)));
                };
                (
                    Some(Op::GlobalAverage {
                        node: node_name(n),
                        x: n.input[0].clone(),
                        out: out.clone(),
                    }),
                    vec![1, c, 1, 1],
                )
            }
            "BatchNormalization" => {
                let x = val_of(&n.input[0])?;
                if n.output.len() > 1 {
                    return Err(unsupported(n, "training mode (several outputs) is not supported"));
                }
                let eps = n.float("epsilon", 1e-5);
                let mut p = Vec::new();
                for (i, what) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
                    p.push(konst(i, what)?.1.clone());
                }
                let ch = x.shape.c();
                if p.iter().any(|v| v.len() != ch) {
                    return Err(unsupported(n, format!("parameters must have {ch} values")));
                }
                let src = &n.input[0];
                let pi = producer.get(src).copied();
                let foldable = pi.is_some_and(|i| {
                    matches!(&ops[i], Op::Conv { relu: false, .. }) && readers.get(src.as_str()) == Some(&1)
                });
                let Some(pi) = pi.filter(|_| foldable) else {
                    return Err(unsupported(n, "only a BatchNormalization right after a Conv/Gemm/MatMul whose output nothing else reads is supported (it is folded)"));
                };
                let Op::Conv { w, bias, cin, out: o, .. } = &mut ops[pi] else {
                    unreachable!()
                };
                let cin = *cin;
                let b = bias.get_or_insert_with(|| vec![0.0; ch]);
                for c in 0..ch {
                    let s = p[0][c] / (p[3][c] + eps).sqrt();
                    for v in &mut w[c * cin..(c + 1) * cin] {
                        *v *= s;
                    }
                    b[c] = (b[c] - p[2][c]) * s + p[1][c];
                }
                *o = out.clone();
                producer.insert(out.clone(), pi);
                vals.insert(out.clone(), x.clone());
                continue;
            }
            "Relu" => {
                let x = val_of(&n.input[0])?;
                let src = &n.input[0];
                if let Some(&pi) = producer.get(src) {
                    if let Op::Conv { relu, out: o, .. } = &mut ops[pi] {
                        if !*relu && readers.get(src.as_str()) == Some(&1) {
                            *relu = true;
                            *o = out.clone();
                            producer.insert(out.clone(), pi);
                            vals.insert(out.clone(), x.clone());
                            continue;
                        }
                    }
                }
                (
                    Some(Op::Unary {
                        node: node_name(n),
                        x: src.clone(),
                        out: out.clone(),
                        act: Activation::Relu,
                    }),
                    x.dims.clone(),
                )
            }
            "Flatten" | "Reshape" => {
                let x = val_of(&n.input[0])?;
                let dims: Vec<usize> = if op == "Flatten" {
                    let axis = n.int("axis", 1);
                    let r = x.dims.len() as i64;
                    let axis = if axis < 0 { axis + r } else { axis };
                    if !(0..=r).contains(&axis) {
                        return Err(unsupported(n, format!("axis {axis} of a rank-{r} tensor")));
                    }
                    let (a, b) = x.dims.split_at(axis as usize);
                    vec![a.iter().product(), b.iter().product()]
                } else {
                    let (_, shape) = konst(1, "shape")?;
                    let total: usize = x.dims.iter().product();
                    let mut d = Vec::with_capacity(shape.len());
                    let mut infer = None;
                    for (i, &v) in shape.iter().enumerate() {
                        match v {
                            -1.0 if infer.is_none() => {
                                infer = Some(i);
                                d.push(1);
                            }
                            0.0 => d.push(x.dims.get(i).copied().unwrap_or(0)),
                            v if v >= 1.0 && v <= total as f32 => d.push(v as usize),
                            v => {
                                return Err(unsupported(n, format!("shape entry {v} of {shape:?} is not a valid dimension")))
                            }
                        }
                    }
                    let known = checked_count(&d).filter(|&k| k > 0);
                    if let (Some(i), Some(k)) = (infer, known) {
                        d[i] = total / k;
                    }
                    if checked_count(&d) != Some(total) {
                        return Err(unsupported(n, format!("shape {shape:?} does not hold the {total} elements of {:?}", x.dims)));
                    }
                    d
                };
                let nv = new_val(dims)?;
                // Only a change of the model's view: the engine tensor
                // must stay the same, e.g. [1, C, 1, 1] <-> [1, C].
                if nv.shape != x.shape {
                    return Err(unsupported(n, format!("{:?} -> {:?} moves data on the engine ({} -> {}); only reshapes that keep the engine tensor are supported", x.dims, nv.dims, x.shape, nv.shape)));
                }
                let src = &n.input[0];
                let Some(pi) = producer.get(src).copied().filter(|_| readers.get(src.as_str()) == Some(&1)) else {
                    return Err(unsupported(n, "only the reshape of a computed value that nothing else reads is supported"));
                };
                *ops[pi].out_mut() = out.clone();
                producer.insert(out.clone(), pi);
                vals.insert(out.clone(), nv);
                continue;
            }
            "Abs" => {
                let x = val_of(&n.input[0])?;
                (
                    Some(Op::Abs {
                        node: node_name(n),
                        x: n.input[0].clone(),
                        out: out.clone(),
                    }),
                    x.dims.clone(),
                )
            }
            "Sigmoid" | "Gelu" | "Clip" | "LeakyRelu" => {
                let act = match op {
                    "Gelu" => {
                        let approx = n.attr("approximate").map(|a| a.s.as_slice());
                        if approx.is_some_and(|a| a != b"none") {
                            return Err(unsupported(n, "approximate = \"tanh\": only the exact GELU (approximate = \"none\") has a table here (builder::gelu_table)"));
                        }
                        Activation::Gelu
                    }
                    "Clip" => {
                        // Bounds from inputs 1 and 2 (opset 11+) or the
                        // attributes (opset 6); absent means unbounded.
                        let bound = |i: usize, attr: &str, default: f32| -> Result<f32, CompileError> {
                            if n.input.get(i).is_some_and(|s| !s.is_empty()) {
                                let (_, v) = konst(i, attr)?;
                                match v.as_slice() {
                                    [b] => Ok(*b),
                                    _ => Err(unsupported(n, format!("{attr} must be a scalar"))),
                                }
                            } else {
                                Ok(n.float(attr, default))
                            }
                        };
                        let lo = f16::from_f32(bound(1, "min", f32::NEG_INFINITY)?);
                        let hi = f16::from_f32(bound(2, "max", f32::INFINITY)?);
                        if lo.is_nan() || hi.is_nan() || lo > hi {
                            return Err(unsupported(n, format!("bounds min {lo} > max {hi} (or NaN): only min <= max is lowered")));
                        }
                        Activation::Clip { lo: lo.to_bits(), hi: hi.to_bits() }
                    }
                    "LeakyRelu" => {
                        let slope = f16::from_f32(n.float("alpha", 0.01));
                        if !slope.is_finite() {
                            return Err(unsupported(n, format!("alpha {slope} is not a finite fp16 value")));
                        }
                        Activation::LeakyRelu { slope: slope.to_bits() }
                    }
                    _ => Activation::Sigmoid,
                };
                let x = val_of(&n.input[0])?;
                (
                    Some(Op::Unary {
                        node: node_name(n),
                        x: n.input[0].clone(),
                        out: out.clone(),
                        act,
                    }),
                    x.dims.clone(),
                )
            }
            "Tanh" | "Erf" | "Exp" | "Log" | "Sqrt" | "Reciprocal" => {
                return Err(unsupported(n, format!("the engine's {op} table is not understood: Apple's compiled tables for it use table flags other than 1 (eiln's tanh 0x60, exp 0xA, sqrt 0xC5, log2 0xC9; reciprocal is the undocumented MACCfg operation 0x121C08), whose symmetry / range-reduction rule is unknown (td.md §2.4), so the engine model refuses them and nothing checks such a program")));
            }
            "Concat" => {
                let vs = n
                    .input
                    .iter()
                    .map(|i| val_of(i))
                    .collect::<Result<Vec<Val>, _>>()?;
                let rank = vs[0].dims.len() as i64;
                let mut axis = n.int("axis", 1);
                if axis < 0 {
                    axis += rank;
                }
                if axis != 1 {
                    return Err(unsupported(n, format!("axis {} of a rank-{rank} tensor: only the channel / feature axis (1) is supported", n.int("axis", 1))));
                }
                let mut dims = vs[0].dims.clone();
                dims[1] = 0;
                for v in &vs {
                    let mut d = v.dims.clone();
                    d[1] = dims[1];
                    if d != dims {
                        return Err(unsupported(n, format!("inputs {:?} and {:?} differ beyond the concatenated axis", vs[0].dims, v.dims)));
                    }
                    dims[1] += v.dims[1];
                }
                (
                    Some(Op::Concat {
                        node: node_name(n),
                        inputs: n.input.clone(),
                        out: out.clone(),
                    }),
                    dims,
                )
            }
            "Add" | "Mul" | "Max" | "Min" | "Sub" | "Mean" => {
                if n.input.len() != 2 {
                    return Err(unsupported(n, "exactly two inputs are supported"));
                }
                let pe = match op {
                    "Mul" => PeOp::Mul,
                    "Max" => PeOp::Max,
                    "Min" => PeOp::Min,
                    _ => PeOp::Add,
                };
                let one = builder::F16_ONE;
                let scale = if op == "Mean" { builder::F16_HALF } else { one };
                let (x_name, y_name) = (&n.input[0], &n.input[1]);
                // (a, b, PreScale) with out = (pre · a) ⊕ b.
                let (a, b, pre) = match (vals.get(x_name), vals.get(y_name)) {
                    // x − y = (−1 · y) + x, as eiln's compiled sub.
                    (Some(_), Some(_)) if op == "Sub" => {
                        (y_name, Operand::Value(x_name.clone()), builder::F16_MINUS_ONE)
                    }
                    (Some(_), Some(_)) => (x_name, Operand::Value(y_name.clone()), one),
                    (Some(_), None) | (None, Some(_)) => {
                        let x_is_value = vals.contains_key(x_name);
                        let (v, c) = if x_is_value {
                            (x_name, y_name)
                        } else {
                            (y_name, x_name)
                        };
                        if !matches!(op, "Add" | "Mul" | "Sub") {
                            return Err(unsupported(n, "a constant operand is supported for Add, Sub and Mul only"));
                        }
                        let (cd, cv) = consts.get(c).ok_or_else(|| {
                            unsupported(n, format!("input '{c}' is not produced by a supported node"))
                        })?;
                        let x = &vals[v];
                        constant_fits(&x.shape).map_err(|e| unsupported(n, e))?;
                        let mut dense = broadcast_const(cv, cd, &x.dims, x.layout).ok_or_else(|| {
                            unsupported(n, format!("constant {cd:?} does not broadcast to {:?}", x.dims))
                        })?;
                        let mut pre = one;
                        if op == "Sub" {
                            if x_is_value {
                                // x − c = x + (−c)
                                dense.iter_mut().for_each(|v| *v = -*v);
                            } else {
                                // c − x = (−1 · x) + c
                                pre = builder::F16_MINUS_ONE;
                            }
                        }
                        (v, Operand::Const(dense), pre)
                    }
                    _ => return Err(unsupported(n, "needs at least one activation input")),
                };
                let av = val_of(a)?;
                if let Operand::Value(bn) = &b {
                    let bv = val_of(bn)?;
                    if bv.dims != av.dims {
                        return Err(unsupported(n, format!("operands {:?} and {:?}: broadcasting between two activations is not supported (the planar engine reads two tensors of one shape)", av.dims, bv.dims)));
                    }
                }
                (
                    Some(Op::Binary {
                        node: node_name(n),
                        op: pe,
                        a: a.clone(),
                        b,
                        out: out.clone(),
                        pre,
                        scale,
                    }),
                    av.dims.clone(),
                )
            }
            other => {
                return Err(unsupported(
                    n,
                    format!(
                        "{other} is not in the supported subset ({}; each op's conditions: `ane-probe compile --help`)",
                        SUPPORTED_OPS.join(", ")
                    ),
                ))
            }
        };
        if let Some(o) = new_op {
            producer.insert(out.clone(), ops.len());
            ops.push(o);
        }
        vals.insert(out, new_val(dims)?);
    }
    if !vals.contains_key(&output) {
        return Err(CompileError::Model(format!(
            "output '{output}' is not computed by the graph's nodes"
        )));
    }
    if ops.is_empty() || inputs.contains(&output) {
        return Err(CompileError::Model("the graph computes nothing".into()));
    }
    lower(&ops, &mut vals, &inputs, &output, g.node.len(), share)
}

/// Places every value and emits the TD chain.
fn lower(
    ops: &[Op],
    vals: &mut HashMap<String, Val>,
    inputs: &[String],
    output: &str,
    nodes: usize,
    share: bool,
) -> Result<Compiled, CompileError> {
    let mut io = Vec::new();
    let mut tensors: Vec<TensorSlot> = Vec::new();
    for (i, name) in inputs.iter().enumerate() {
        let v = vals.get_mut(name).expect("inputs are values");
        let slot = SLOT_FIRST_INPUT + i as u32;
        if slot as usize >= SLOTS {
            return Err(CompileError::Model(
                "too many inputs for the BAR slots".into(),
            ));
        }
        v.loc = Some(Loc { slot, offset: 0 });
        tensors.push(slot_of(&v.shape, "input", slot, Direction::In));
        io.push(IoTensor {
            name: name.clone(),
            slot,
            direction: Direction::In,
            dims: v.dims.clone(),
            layout: v.layout,
            shape: v.shape,
        });
    }
    {
        let v = vals.get_mut(output).expect("checked");
        v.loc = Some(Loc {
            slot: SLOT_OUTPUT,
            offset: 0,
        });
        tensors.push(slot_of(&v.shape, "output", SLOT_OUTPUT, Direction::Out));
        io.push(IoTensor {
            name: output.to_string(),
            slot: SLOT_OUTPUT,
            direction: Direction::Out,
            dims: v.dims.clone(),
            layout: v.layout,
            shape: v.shape,
        });
    }
    // Scratch: every intermediate first at its own offset (`bufs`), then
    // shared where the chain orders the accesses (share_scratch).
    let mut scratch_end: u64 = 0;
    let mut scratch_shape: Option<Shape> = None;
    let mut bufs: Vec<(u64, u64)> = Vec::new();
    let mut place = |shape: &Shape| -> Result<Loc, CompileError> {
        let bytes = shape.layout().tiled_bytes() as u64;
        let at = scratch_end;
        scratch_end += bytes.div_ceil(64) * 64;
        bufs.push((at, scratch_end - at));
        if scratch_end >= builder::MAX_EXTENT {
            return Err(CompileError::Model("intermediates exceed 4 GiB".into()));
        }
        scratch_shape.get_or_insert(*shape);
        Ok(Loc {
            slot: SLOT_SCRATCH,
            offset: at as u32,
        })
    };
    let mut weights: Vec<u8> = Vec::new();
    let push_const = |weights: &mut Vec<u8>, bytes: &[u8]| -> u32 {
        weights.resize(weights.len().div_ceil(64) * 64, 0);
        let at = weights.len() as u32;
        weights.extend_from_slice(bytes);
        at
    };
    let mut steps: Vec<Step> = Vec::new();
    let loc_of = |vals: &mut HashMap<String, Val>,
                  place: &mut dyn FnMut(&Shape) -> Result<Loc, CompileError>,
                  name: &str|
     -> Result<(Loc, Shape), CompileError> {
        let v = vals.get_mut(name).expect("every op output is a value");
        if v.loc.is_none() {
            v.loc = Some(place(&v.shape)?);
        }
        Ok((v.loc.expect("placed"), v.shape))
    };
    let geom = |s: &Shape, node: &str| {
        Geom::new(s, "shape").map_err(|source| CompileError::Build {
            node: node.to_string(),
            source,
        })
    };
    for op in ops {
        match op {
            Op::Conv {
                node,
                x,
                out,
                cin,
                cout,
                w,
                bias,
                relu,
            } => {
                let (src, xs) = loc_of(vals, &mut place, x)?;
                let (dst, os) = loc_of(vals, &mut place, out)?;
                let k = KernelLayout::new(*cin, *cout).map_err(|source| CompileError::Build {
                    node: node.clone(),
                    source,
                })?;
                let w16: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
                let kat = push_const(&mut weights, &k.pack(&w16, *cin));
                let (gi, go) = (geom(&xs, node)?, geom(&os, node)?);
                // Bias and ReLU after it need intermediates.
                let conv_dst = if bias.is_some() { place(&os)? } else { dst };
                let fused = if bias.is_none() && *relu {
                    Activation::Relu
                } else {
                    Activation::None
                };
                steps.push(Step::Ne(
                    NeTask {
                        src,
                        dst: conv_dst,
                        kernel: Some((k, kat)),
                        act: fused,
                        lut: 0,
                        dst_whole: None,
                    },
                    gi,
                    go,
                ));
                if let Some(b) = bias {
                    constant_fits(&os).map_err(|reason| CompileError::Unsupported {
                        node: node.clone(),
                        op: "bias".into(),
                        reason,
                    })?;
                    // The bias as a constant tensor of the output's shape.
                    let (c, h, wd) = (os.c(), os.h(), os.w());
                    let dense: Vec<f16> = (0..c)
                        .flat_map(|ci| std::iter::repeat_n(f16::from_f32(b[ci]), h * wd))
                        .collect();
                    let bytes = const_bytes(&os, &dense, node)?;
                    let bat = push_const(&mut weights, &bytes);
                    let add_dst = if *relu { place(&os)? } else { dst };
                    steps.push(Step::Pe(
                        PeTask::two(
                            PeOp::Add,
                            conv_dst,
                            Loc {
                                slot: u32::from(crate::hw::td::SLOT_KERNEL),
                                offset: bat,
                            },
                            add_dst,
                        ),
                        go,
                    ));
                    if *relu {
                        steps.push(Step::Ne(
                            NeTask {
                                src: add_dst,
                                dst,
                                kernel: None,
                                act: Activation::Relu,
                                lut: 0,
                                dst_whole: None,
                            },
                            go,
                            go,
                        ));
                    }
                }
            }
            Op::Binary {
                node,
                op,
                a,
                b,
                out,
                pre,
                scale,
            } => {
                let (s0, s) = loc_of(vals, &mut place, a)?;
                let s1 = match b {
                    Operand::Value(bn) => loc_of(vals, &mut place, bn)?.0,
                    Operand::Const(dense) => {
                        let d16: Vec<f16> = dense.iter().map(|&v| f16::from_f32(v)).collect();
                        let bytes = const_bytes(&s, &d16, node)?;
                        Loc {
                            slot: u32::from(crate::hw::td::SLOT_KERNEL),
                            offset: push_const(&mut weights, &bytes),
                        }
                    }
                };
                let (dst, _) = loc_of(vals, &mut place, out)?;
                steps.push(Step::Pe(
                    PeTask {
                        op: *op,
                        src0: s0,
                        src1: Some(s1),
                        dst,
                        pre: *pre,
                        scale: *scale,
                        bias: 0,
                        fin: builder::F32_ONE,
                        abs: false,
                    },
                    geom(&s, node)?,
                ));
            }
            Op::Abs { node, x, out } => {
                let (src, s) = loc_of(vals, &mut place, x)?;
                let (dst, _) = loc_of(vals, &mut place, out)?;
                steps.push(Step::Pe(PeTask::one(src, dst, true), geom(&s, node)?));
            }
            Op::Concat { node, inputs, out } => {
                let (dst, os) = loc_of(vals, &mut place, out)?;
                let go = geom(&os, node)?;
                let mut at = dst.offset;
                for i in inputs {
                    let (src, s) = loc_of(vals, &mut place, i)?;
                    let g = geom(&s, node)?;
                    steps.push(Step::Ne(
                        NeTask {
                            src,
                            dst: Loc {
                                slot: dst.slot,
                                offset: at,
                            },
                            kernel: None,
                            act: Activation::None,
                            lut: 0,
                            dst_whole: Some(go),
                        },
                        g,
                        g,
                    ));
                    at += g.c * go.plane;
                }
            }
            Op::Im2col {
                node,
                x,
                out,
                win,
                fill,
            } => {
                let (src, xs) = loc_of(vals, &mut place, x)?;
                let (dst, cs) = loc_of(vals, &mut place, out)?;
                let row = xs.layout().row_stride() as u32; // one pixel
                let xp = xs.layout().plane_stride() as u32;
                let cp = cs.layout().plane_stride() as u32;
                let u = |v: usize| v as u32;
                let copy = |src: Loc, gi: Geom, dst: Loc, go: Geom| {
                    Step::Ne(
                        NeTask {
                            src,
                            dst,
                            kernel: None,
                            act: Activation::None,
                            lut: 0,
                            dst_whole: None,
                        },
                        gi,
                        go,
                    )
                };
                let view = |c: u32, h: u32, row: u32, plane: u32| Geom {
                    c,
                    h,
                    w: 1,
                    row,
                    plane,
                    bytes: c.saturating_mul(plane),
                };
                if win.pads() {
                    // The padding's value everywhere first, copied from
                    // a constant of the gathered tensor's size.
                    constant_fits(&cs).map_err(|reason| CompileError::Unsupported {
                        node: node.clone(),
                        op: "padding".into(),
                        reason,
                    })?;
                    let dense = vec![f16::from_f32(*fill); cs.elements()];
                    let bytes = const_bytes(&cs, &dense, node)?;
                    let at = push_const(&mut weights, &bytes);
                    let g = geom(&cs, node)?;
                    let kslot = u32::from(crate::hw::td::SLOT_KERNEL);
                    steps.push(copy(
                        Loc {
                            slot: kslot,
                            offset: at,
                        },
                        g,
                        dst,
                        g,
                    ));
                }
                for dy in 0..win.kh {
                    let (oy0, oy1) = win.range(dy, win.pt, win.sh, win.h, win.oh);
                    for dx in 0..win.kw {
                        let (ox0, ox1) = win.range(dx, win.pl, win.sw, win.w, win.ow);
                        if oy0 >= oy1 || ox0 >= ox1 {
                            continue;
                        }
                        let t = dy * win.kw + dx;
                        let (ny, nx) = (oy1 - oy0, ox1 - ox0);
                        // Input pixel of output (oy0, ox0) for this tap.
                        let iy0 = win.sh * oy0 + dy - win.pt;
                        let ix0 = win.sw * ox0 + dx - win.pl;
                        let in_px = |oy: usize| u(((iy0 + win.sh * (oy - oy0)) * win.w + ix0) * 64);
                        let out_px = |oy: usize| u((oy * win.ow + ox0) * 64);
                        let srow = u(win.sw) * row;
                        if win.c <= ny {
                            // One TD per channel: output rows as channels.
                            for ci in 0..win.c {
                                steps.push(copy(
                                    Loc {
                                        slot: src.slot,
                                        offset: src.offset + u(ci) * xp + in_px(oy0),
                                    },
                                    view(u(ny), u(nx), srow, u(win.sh * win.w) * row),
                                    Loc {
                                        slot: dst.slot,
                                        offset: dst.offset + u(t * win.c + ci) * cp + out_px(oy0),
                                    },
                                    view(u(ny), u(nx), row, u(win.ow) * row),
                                ));
                            }
                        } else {
                            // One TD per output row: all channels.
                            for oy in oy0..oy1 {
                                steps.push(copy(
                                    Loc {
                                        slot: src.slot,
                                        offset: src.offset + in_px(oy),
                                    },
                                    view(u(win.c), u(nx), srow, xp),
                                    Loc {
                                        slot: dst.slot,
                                        offset: dst.offset + u(t * win.c) * cp + out_px(oy),
                                    },
                                    view(u(win.c), u(nx), row, cp),
                                ));
                            }
                        }
                    }
                }
            }
            Op::MaxTaps { node, x, out, taps } => {
                let (src, cs) = loc_of(vals, &mut place, x)?;
                let (dst, os) = loc_of(vals, &mut place, out)?;
                let g = geom(&os, node)?;
                let block = |t: usize| Loc {
                    slot: src.slot,
                    offset: src.offset + (t * os.c()) as u32 * cs.layout().plane_stride() as u32,
                };
                let mut cur = block(0);
                if *taps == 1 {
                    steps.push(Step::Ne(
                        NeTask {
                            src: cur,
                            dst,
                            kernel: None,
                            act: Activation::None,
                            lut: 0,
                            dst_whole: None,
                        },
                        g,
                        g,
                    ));
                }
                for t in 1..*taps {
                    let to = if t + 1 == *taps { dst } else { place(&os)? };
                    steps.push(Step::Pe(PeTask::two(PeOp::Max, cur, block(t), to), g));
                    cur = to;
                }
            }
            Op::GlobalAverage { node, x, out } => {
                let (src, xs) = loc_of(vals, &mut place, x)?;
                let (dst, os) = loc_of(vals, &mut place, out)?;
                // The pixels (rows of x) as the input channels, the
                // channels (planes of x) as the rows; one output channel
                // whose rows are the planes of `out`.
                let (p, c) = (xs.h() as u32, xs.c() as u32);
                let row = xs.layout().row_stride() as u32;
                let op_ = os.layout().plane_stride() as u32;
                let gi = Geom {
                    c: p,
                    h: c,
                    w: 1,
                    row: xs.layout().plane_stride() as u32,
                    plane: row,
                    bytes: p.saturating_mul(row),
                };
                let go = Geom {
                    c: 1,
                    h: c,
                    w: 1,
                    row: op_,
                    plane: c.saturating_mul(op_),
                    bytes: c.saturating_mul(op_),
                };
                let k = KernelLayout::new(p as usize, 1).map_err(|source| CompileError::Build {
                    node: node.clone(),
                    source,
                })?;
                let w16 = vec![f16::from_f32(1.0 / p as f32); p as usize];
                let kat = push_const(&mut weights, &k.pack(&w16, p as usize));
                steps.push(Step::Ne(
                    NeTask {
                        src,
                        dst,
                        kernel: Some((k, kat)),
                        act: Activation::None,
                        lut: 0,
                        dst_whole: None,
                    },
                    gi,
                    go,
                ));
            }
            Op::Unary { node, x, out, act } => {
                let (src, s) = loc_of(vals, &mut place, x)?;
                let (dst, _) = loc_of(vals, &mut place, out)?;
                let g = geom(&s, node)?;
                let lut = match act.table() {
                    Some(t) => push_const(&mut weights, &t),
                    None => 0,
                };
                steps.push(Step::Ne(
                    NeTask {
                        src,
                        dst,
                        kernel: None,
                        act: *act,
                        lut,
                        dst_whole: None,
                    },
                    g,
                    g,
                ));
            }
        }
    }
    let scratch = ScratchBytes {
        unshared: scratch_end,
        shared: if share {
            share_scratch(&mut steps, &bufs)
        } else {
            scratch_end
        },
    };
    if let Some(s) = scratch_shape {
        tensors.push(TensorSlot {
            name: "scratch",
            slot: SLOT_SCRATCH,
            direction: Direction::Scratch,
            shape: s,
            buffer_size: granule(scratch.shared),
        });
    }
    tensors.sort_by_key(|t| t.slot);
    weights.resize(weights.len().div_ceil(64) * 64, 0);
    let program = chain_program(&steps, tensors, weights);
    Ok(Compiled {
        program,
        io,
        nodes,
        scratch,
    })
}

/// The places a step reads (sources) and writes (destination).
fn step_locs(s: &Step) -> (Vec<Loc>, Loc) {
    match s {
        Step::Pe(t, _) => {
            let mut r = vec![t.src0];
            r.extend(t.src1);
            (r, t.dst)
        }
        Step::Ne(t, _, _) => (vec![t.src], t.dst),
    }
}

fn step_locs_mut(s: &mut Step) -> Vec<&mut Loc> {
    match s {
        Step::Pe(t, _) => {
            let mut v = vec![&mut t.src0, &mut t.dst];
            v.extend(t.src1.as_mut());
            v
        }
        Step::Ne(t, _, _) => vec![&mut t.src, &mut t.dst],
    }
}

/// A set of step indices.
#[derive(Clone)]
struct Steps(Vec<u64>);

impl Steps {
    fn new(n: usize) -> Steps {
        Steps(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn union(&mut self, o: &Steps) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
    fn is_subset(&self, o: &Steps) -> bool {
        self.0.iter().zip(&o.0).all(|(a, b)| a & !b == 0)
    }
}

/// Shares scratch memory between intermediates and rewrites the steps'
/// scratch offsets; returns the scratch size. `bufs` are the
/// intermediates as placed one after another (start, length), every
/// scratch [`Loc`] of `steps` inside one of them.
///
/// The hardware record is silent on how far a TD may run ahead of the
/// one before it. What every chain already relies on is that a source read
/// with DependencyMode 1 (every source an earlier TD of the chain wrote,
/// [`chain_program`]) sees those writes complete. Buffer `y` may take
/// memory of buffer `x` only when every step touching `y` depends,
/// through such reads, on every step touching `x`: then each access to
/// `y` follows each access to `x` under that one rule, whatever else the
/// engine overlaps. Buffers placed in order of first access, each at the
/// lowest offset clear of every placed buffer it may not share with.
fn share_scratch(steps: &mut [Step], bufs: &[(u64, u64)]) -> u64 {
    let n = steps.len();
    // Which buffer (scratch) or slot (others; the constants' slot is
    // read-only) a place is in.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Region {
        Buf(usize),
        Slot(u32),
    }
    let region = |l: &Loc| -> Option<Region> {
        if l.slot == SLOT_SCRATCH {
            let off = u64::from(l.offset);
            bufs.iter()
                .position(|&(at, len)| off >= at && off < at + len)
                .map(Region::Buf)
        } else if l.slot == u32::from(crate::hw::td::SLOT_KERNEL) {
            None
        } else {
            Some(Region::Slot(l.slot))
        }
    };
    let mut access: Vec<Steps> = vec![Steps::new(n); bufs.len()];
    let mut before: Vec<Steps> = Vec::with_capacity(n);
    let mut writes: Vec<Option<Region>> = Vec::with_capacity(n);
    for (j, s) in steps.iter().enumerate() {
        let (reads, dst) = step_locs(s);
        let mut dep = Steps::new(n);
        for r in reads.iter().filter_map(&region) {
            for (w, wr) in writes.iter().enumerate() {
                if *wr == Some(r) {
                    dep.insert(w);
                    dep.union(&before[w]);
                }
            }
            if let Region::Buf(b) = r {
                access[b].insert(j);
            }
        }
        let d = region(&dst);
        if let Some(Region::Buf(b)) = d {
            access[b].insert(j);
        }
        writes.push(d);
        before.push(dep);
    }
    // `after[b]`: the steps every access to `b` depends on.
    let after: Vec<Option<Steps>> = access
        .iter()
        .map(|a| {
            let mut common: Option<Steps> = None;
            for (j, dep) in before.iter().enumerate() {
                if a.0[j / 64] & (1 << (j % 64)) != 0 {
                    common = Some(match common {
                        None => dep.clone(),
                        Some(mut c) => {
                            for (x, y) in c.0.iter_mut().zip(&dep.0) {
                                *x &= y;
                            }
                            c
                        }
                    });
                }
            }
            common
        })
        .collect();
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    let first = |b: usize| {
        access[b]
            .0
            .iter()
            .enumerate()
            .find(|(_, w)| **w != 0)
            .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    };
    order.sort_by_key(|&b| (first(b).unwrap_or(usize::MAX), b));
    let mut at: Vec<Option<u64>> = vec![None; bufs.len()];
    let mut end = 0;
    for &y in &order {
        let len = bufs[y].1;
        // Placed buffers `y` may not share with, by offset.
        let mut busy: Vec<(u64, u64)> = order
            .iter()
            .filter_map(|&x| at[x].map(|o| (x, o)))
            .filter(|&(x, _)| match &after[y] {
                Some(dep) => !access[x].is_subset(dep),
                None => true,
            })
            .map(|(x, o)| (o, o + bufs[x].1))
            .collect();
        busy.sort_unstable();
        let mut o = 0;
        for (s, e) in busy {
            if o + len <= s {
                break;
            }
            o = o.max(e);
        }
        at[y] = Some(o);
        end = end.max(o + len);
    }
    for s in steps.iter_mut() {
        for l in step_locs_mut(s) {
            if let Some(Region::Buf(b)) = region(l) {
                let new = at[b].unwrap_or(bufs[b].0) + (u64::from(l.offset) - bufs[b].0);
                l.offset = new as u32;
            }
        }
    }
    end
}

impl Compiled {
    /// The `.anec` container: header, names block, payload at 0x1000.
    pub fn to_anec(&self) -> Result<Anec, CompileError> {
        let p = &self.program;
        let mut tiles = [0u32; SLOTS];
        let mut nchw = [Nchw::default(); SLOTS];
        // Slot 0 holds the payload; slot 1 (the weights) is the driver's.
        tiles[0] = (p.image().len() as u64).div_ceil(crate::anec::TILE_BYTES) as u32;
        for t in &p.tensors {
            let s = t.slot as usize;
            tiles[s] = (t.buffer_size / crate::anec::TILE_BYTES) as u32;
            if t.direction != Direction::Scratch {
                let l = t.shape.layout();
                nchw[s] = Nchw {
                    n: t.shape.n() as u64,
                    c: t.shape.c() as u64,
                    h: t.shape.h() as u64,
                    w: t.shape.w() as u64,
                    plane_stride: l.plane_stride() as u64,
                    row_stride: l.row_stride() as u64,
                };
            }
        }
        let header = AnecHeader {
            size: p.image().len() as u64,
            td_size: p.td_size,
            td_count: p.td_count,
            tsk_size: p.tsk_size(),
            krn_size: p.weights.len() as u64,
            src_count: p.inputs().count() as u32,
            dst_count: p.outputs().count() as u32,
            tiles,
            nchw,
        };
        let names = self
            .io
            .iter()
            .map(|t| IoName {
                slot: t.slot as u8,
                layout: t.layout,
                dims: t.dims.iter().map(|&d| d as u32).collect(),
                name: t.name.clone(),
            })
            .collect();
        Ok(Anec::with_names(
            header,
            p.image(),
            PayloadOffset::Anecc,
            names,
        )?)
    }
}

impl Compiled {
    /// Runs the compiled model once on the host engine model, through the
    /// path every program takes: the `.anec` bytes are loaded as a
    /// [`ProgramFile`](crate::program::ProgramFile) (validated, slots
    /// bound as EXEC would), the inputs given by model name in the model's
    /// own order and shape (rounded to fp16), and the output returned in
    /// the model's order. Scratch starts as 0xA5 bytes, the output as NaN.
    pub fn run_on_model(&self, inputs: &[(&str, &[f32])]) -> Result<Vec<f32>, String> {
        self.run_on_model_with_stats(inputs).map(|(v, _)| v)
    }

    /// [`Compiled::run_on_model`], with what the engine model counted:
    /// the TDs it executed (one engine pass each), its operations and the
    /// bytes its DMAs moved.
    pub fn run_on_model_with_stats(
        &self,
        inputs: &[(&str, &[f32])],
    ) -> Result<(Vec<f32>, crate::hw::engine::Stats), String> {
        use crate::program::{ModelRun, ProgramFile};
        let file = self.to_anec().map_err(|e| e.to_string())?.to_bytes();
        let p = ProgramFile::parse(std::path::Path::new("compiled.anec"), &file)
            .map_err(|e| e.to_string())?;
        for t in p
            .tensors
            .iter()
            .filter(|t| t.direction == crate::hwx::Direction::Input)
        {
            if !inputs.iter().any(|(n, _)| *n == t.name) {
                return Err(format!("input '{}' is not given", t.name));
            }
        }
        let mut run = ModelRun::new(&p, |_, b| -> Result<Vec<u8>, String> {
            let Some(i) = b.tensor else {
                return Ok(vec![0xA5; b.size as usize]);
            };
            let t = &p.tensors[i];
            let mut buf = vec![0xFF; b.size as usize];
            if t.direction == crate::hwx::Direction::Input {
                let (_, v) = inputs
                    .iter()
                    .find(|(n, _)| *n == t.name)
                    .ok_or_else(|| format!("input '{}' is not given", t.name))?;
                if v.len() as u64 != t.elements() {
                    return Err(format!(
                        "input '{}' has {} values, {} expected",
                        t.name,
                        v.len(),
                        t.elements()
                    ));
                }
                let dense: Vec<u8> = v
                    .iter()
                    .flat_map(|&x| f16::from_f32(x).to_le_bytes())
                    .collect();
                t.pack(&dense, &mut buf);
            }
            Ok(buf)
        })?;
        let stats = run
            .execute(&crate::hw::engine::Options::default())
            .map_err(|e| format!("the engine model refused the program: {e:?}"))?;
        let (k, b) = p
            .bindings
            .iter()
            .enumerate()
            .find(|(_, b)| {
                b.tensor
                    .is_some_and(|i| p.tensors[i].direction == crate::hwx::Direction::Output)
            })
            .ok_or("the program has no output")?;
        let t = &p.tensors[b.tensor.unwrap_or_default()];
        let dense = t.unpack(run.buffer(k).ok_or("no output buffer")?);
        let out = dense
            .chunks(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        Ok((out, stats))
    }
}

#[cfg(test)]
mod tests;
