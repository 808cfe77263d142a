// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A two-layer perceptron `y = W2 · relu(W1 · x)` as two chained programs,
//! checked against an independent CPU reference.
//!
//! # The programs
//!
//! Layer 1 is [`builder::linear_with`] with [`Activation::Relu`], layer 2
//! [`builder::linear`]; both without bias, weights `[out][in]`. A batch of
//! `B` rows is the spatial width, as in every [`builder::linear`]: layer 1
//! reads `x` as `(1, in, 1, B)` from slot 5 and writes `h` as
//! `(1, hidden, 1, B)` to slot 4; layer 2 reads `h` from its slot 5 and
//! writes `y` `(1, out, 1, B)` to its slot 4.
//!
//! # Chaining without a copy
//!
//! The buffer layer 1 writes is bound, unchanged, as layer 2's input:
//! on a device ([`DeviceMlp`]) the same BO (handle, offset 0, same size) is
//! bound `OUT` to the first program and `IN` to the second; on the engine
//! model ([`ModelMlp`]) the same host region is mapped at both slots. That
//! is correct only if the tiled layouts agree, which [`Mlp::new`] checks
//! ([`ChainError`]): layer 1's output and layer 2's input are the same
//! [`Shape`] `(1, hidden, 1, B)`, and the ANE layout is a function of the
//! shape alone (row stride `round_up(2·B, 64)`, one row per channel plane,
//! planes back to back, the buffer rounded to 16 KiB), so the row stride,
//! plane stride, tiled bytes and bound size are equal. The padding bytes
//! at the end of each row are written by layer 1 (the destination's
//! ZeroPadLast) and never read by layer 2 as data (the source DMA reads
//! `B` elements per row).
//!
//! The buffers stay resident: [`DeviceMlp::load`] creates both programs
//! and the three BOs (`x`, `h`, `y`) once; each [`MlpRunner::run`] writes
//! `x`, submits layer 1, waits, submits layer 2, waits and reads `h` and
//! `y`. Layer 2 is submitted only after layer 1 completed: the UAPI makes
//! no promise about the order of two queued jobs of one client.
//!
//! # The reference and the bound
//!
//! [`reference`] computes, from the same fp16 inputs and independently of
//! the builder, `h = relu(fp16(W1·x))` and `y = fp16(W2·h)` with
//! [`reference::linear`] (exact fp16 products, binary32 sums in ascending
//! input order, one rounding to nearest even) and [`reference::relu`].
//!
//! [`grade`] checks
//!
//! - the **hidden layer** within **2 ulp** of `h` elementwise: the bound
//!   of the parity table's linear cells (the hardware's accumulation order
//!   and width are not known, `td.md` §6); ReLU is 1-Lipschitz and maps
//!   `≤ 0` to `+0`, so it adds no error;
//! - the **output** within 2 ulp per layer, with the hidden layer's
//!   actual error propagated (a condition-number bound): layer 2 ran on
//!   the `h'` it read from the shared buffer, whose exact dot products
//!   differ from those of `h` by at most
//!   `P_j = Σ_i |W2_ji| · |h'_i − h_i|` (so `P_j / |y_j|` is at most the
//!   hidden layer's relative error times the condition number
//!   `Σ|W2_ji·h_i| / |Σ W2_ji·h_i|` of the dot product). Layer 2's own
//!   deviation is again 2 ulp, and the roundings of the reference and of
//!   the exact sum over `h'` add half an ulp each, so
//!   `|y'_j − y_j| ≤ E_j = P_j + 3·ulp(m_j)`, where `m_j = |y_j| + P_j +
//!   3·ulp(|y_j| + P_j)` bounds the magnitude of every value involved.
//!   With an exact hidden layer this is 3 ulp (6 where `m_j` reaches the
//!   next binade). Non-finite outputs must match exactly (both NaN, or
//!   equal bits). Using the measured `h'` rather than the a-priori
//!   `|h'_i − h_i| ≤ 2 ulp` keeps the output check sharp: the a-priori
//!   bound is tens of ulp for typical data and would hide a wrong layer 2.
//!
//! On the engine model both layers are bit-exact (it accumulates like the
//! reference); the bounds are for hardware. Inputs are drawn like the
//! parity cells' linear inputs: `x` normal values of magnitude 2^−3 to
//! 2^2, weights 2^−5 to 1, random signs, some exact zeros.

use half::f16;
use serde::Serialize;

use crate::builder::{self, Activation, BuildError, Program, TensorSlot};
use crate::device::{self, Bo, Device, JobStatus};
use crate::hw::engine;
use crate::parity::{self, ExecError, HostMem, Rng, Verdict};
use crate::reference::{self, RefError, Rounding, UlpStats};
use crate::tensor::{self, Shape};

/// The dimensions of an MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MlpShape {
    /// Rows of `x` (the programs' width).
    pub batch: usize,
    /// Input features.
    pub in_features: usize,
    /// Hidden features (layer 1's outputs, layer 2's inputs).
    pub hidden: usize,
    /// Output features.
    pub out_features: usize,
}

impl MlpShape {
    /// The defaults of `ane-probe mlp`: 8 rows of 64 → 128 → 32.
    pub const DEFAULT: MlpShape = MlpShape {
        batch: 8,
        in_features: 64,
        hidden: 128,
        out_features: 32,
    };

    /// Multiply-accumulates of one run.
    pub fn macs(&self) -> u64 {
        let b = self.batch as u64;
        b.saturating_mul(self.in_features as u64)
            .saturating_mul(self.hidden as u64)
            .saturating_add(
                b.saturating_mul(self.hidden as u64)
                    .saturating_mul(self.out_features as u64),
            )
    }
}

/// Why the two programs cannot be chained through one buffer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// A program lacks a tensor.
    #[error("layer {layer} has no tensor named {name}")]
    Missing {
        /// 1 or 2.
        layer: u32,
        /// The tensor.
        name: &'static str,
    },
    /// The tensors differ in a layout quantity.
    #[error(
        "layer 1's output and layer 2's input differ in {field}: {first} vs {second}; \
         they cannot share a buffer"
    )]
    Layout {
        /// The quantity (shape, row stride, plane stride, tiled bytes, buffer size).
        field: &'static str,
        /// Layer 1's value.
        first: String,
        /// Layer 2's value.
        second: String,
    },
}

/// Why an MLP cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MlpError {
    /// A layer's program cannot be built (names the argument and value).
    #[error("layer {layer}: {source}")]
    Build {
        /// 1 or 2.
        layer: u32,
        /// Why.
        source: BuildError,
    },
    /// The layers cannot share the hidden buffer.
    #[error(transparent)]
    Chain(#[from] ChainError),
}

/// The two programs and their weights.
#[derive(Clone, Debug)]
pub struct Mlp {
    /// Its dimensions.
    pub shape: MlpShape,
    /// `[hidden][in_features]`.
    pub w1: Vec<f16>,
    /// `[out_features][hidden]`.
    pub w2: Vec<f16>,
    /// `relu(W1 · x)`.
    pub layer1: Program,
    /// `W2 · h`.
    pub layer2: Program,
}

fn check_same(field: &'static str, first: String, second: String) -> Result<(), ChainError> {
    if first == second {
        Ok(())
    } else {
        Err(ChainError::Layout {
            field,
            first,
            second,
        })
    }
}

impl Mlp {
    /// Builds both layers and checks that they chain (see the module
    /// documentation).
    pub fn new(shape: MlpShape, w1: Vec<f16>, w2: Vec<f16>) -> Result<Mlp, MlpError> {
        let layer1 = builder::linear_with(
            shape.batch,
            shape.in_features,
            shape.hidden,
            &w1,
            Activation::Relu,
        )
        .map_err(|source| MlpError::Build { layer: 1, source })?;
        let layer2 = builder::linear(shape.batch, shape.hidden, shape.out_features, &w2)
            .map_err(|source| MlpError::Build { layer: 2, source })?;
        let mlp = Mlp {
            shape,
            w1,
            w2,
            layer1,
            layer2,
        };
        mlp.check_chain()?;
        Ok(mlp)
    }

    /// Random weights from `seed` (then [`Mlp::input`] draws `x` from the
    /// same generator).
    pub fn random(shape: MlpShape, rng: &mut Rng) -> Result<Mlp, MlpError> {
        let n1 = shape.hidden.saturating_mul(shape.in_features);
        let n2 = shape.out_features.saturating_mul(shape.hidden);
        // Refuse absurd sizes before allocating: the builder's limits.
        for (field, v, max) in [
            ("batch", shape.batch, builder::MAX_SPATIAL),
            ("in_features", shape.in_features, builder::MAX_CHANNELS),
            ("hidden", shape.hidden, builder::MAX_CONV_OUT),
            ("out_features", shape.out_features, builder::MAX_CONV_OUT),
        ] {
            let layer = if field == "out_features" { 2 } else { 1 };
            if v == 0 {
                return Err(MlpError::Build {
                    layer,
                    source: BuildError::Zero { field },
                });
            }
            if v > max {
                return Err(MlpError::Build {
                    layer,
                    source: BuildError::TooLarge {
                        field,
                        value: v as u64,
                        max: max as u64,
                    },
                });
            }
        }
        let w1 = (0..n1).map(|_| rng.f16_in(-5, 0, 32)).collect();
        let w2 = (0..n2).map(|_| rng.f16_in(-5, 0, 32)).collect();
        Mlp::new(shape, w1, w2)
    }

    /// A random `[batch][in_features]` input.
    pub fn input(&self, rng: &mut Rng) -> Vec<f16> {
        let n = self.shape.batch.saturating_mul(self.shape.in_features);
        (0..n).map(|_| rng.f16_in(-3, 2, 32)).collect()
    }

    /// Layer 1's output tensor.
    pub fn hidden_out(&self) -> Option<&TensorSlot> {
        self.layer1.outputs().next()
    }

    /// Layer 2's input tensor.
    pub fn hidden_in(&self) -> Option<&TensorSlot> {
        self.layer2.inputs().next()
    }

    /// Checks that layer 1's output buffer can be layer 2's input buffer.
    pub fn check_chain(&self) -> Result<(), ChainError> {
        let a = self.hidden_out().ok_or(ChainError::Missing {
            layer: 1,
            name: "out",
        })?;
        let b = self.hidden_in().ok_or(ChainError::Missing {
            layer: 2,
            name: "x",
        })?;
        if self.layer2.inputs().count() != 1 {
            return Err(ChainError::Layout {
                field: "number of inputs",
                first: "1".into(),
                second: self.layer2.inputs().count().to_string(),
            });
        }
        let (la, lb) = (a.shape.layout(), b.shape.layout());
        check_same("shape", a.shape.to_string(), b.shape.to_string())?;
        check_same(
            "row stride",
            la.row_stride().to_string(),
            lb.row_stride().to_string(),
        )?;
        check_same(
            "plane stride",
            la.plane_stride().to_string(),
            lb.plane_stride().to_string(),
        )?;
        check_same(
            "tiled bytes",
            la.tiled_bytes().to_string(),
            lb.tiled_bytes().to_string(),
        )?;
        check_same(
            "buffer size",
            a.buffer_size.to_string(),
            b.buffer_size.to_string(),
        )
    }
}

/// The CPU reference of an MLP.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// `relu(fp16(W1·x))`, `[batch][hidden]`.
    pub hidden: Vec<f16>,
    /// `fp16(W2·h)`, `[batch][out_features]`.
    pub output: Vec<f16>,
}

/// Smallest fp16 subnormal.
const F16_TINY: f64 = 1.0 / 16_777_216.0; // 2^−24

/// The spacing of fp16 values at magnitude `v` (≥ 0): `2^−24` below
/// `2^−14`, else `2^(⌊log2 v⌋ − 10)`, at most `2^5` (the top binade).
pub fn f16_ulp_at(v: f64) -> f64 {
    let v = v.abs();
    if !v.is_finite() {
        return 32.0;
    }
    if v < 1.0 / 16_384.0 {
        return F16_TINY;
    }
    let e = v.log2().floor().min(15.0);
    (e - 10.0).exp2()
}

/// Computes the reference of `mlp` on `x` (`[batch][in_features]`).
pub fn reference(mlp: &Mlp, x: &[f16]) -> Result<Reference, RefError> {
    let s = mlp.shape;
    let r = Rounding::NearestEven;
    let pre = reference::linear(x, s.batch, s.in_features, &mlp.w1, s.hidden, None, r)?;
    let hidden = reference::relu(&pre);
    let output = reference::linear(&hidden, s.batch, s.hidden, &mlp.w2, s.out_features, None, r)?;
    Ok(Reference { hidden, output })
}

/// The output's error budget `E_j` (module documentation) when layer 2
/// read `hidden` (`[batch][hidden]`, as produced) instead of the
/// reference's; same order as [`Reference::output`]. A non-finite hidden
/// difference gives an infinite budget (the hidden layer fails then).
pub fn output_bound(mlp: &Mlp, r: &Reference, hidden: &[f16]) -> Vec<f64> {
    let s = mlp.shape;
    let mut out = Vec::with_capacity(r.output.len());
    let rows = r
        .hidden
        .chunks_exact(s.hidden)
        .zip(hidden.chunks_exact(s.hidden));
    for (row, (href, hgot)) in rows.enumerate() {
        for (j, wrow) in mlp.w2.chunks_exact(s.hidden).enumerate() {
            let p: f64 = wrow
                .iter()
                .zip(href.iter().zip(hgot))
                .map(|(w, (a, b))| {
                    let d = f64::from(a.to_f32()) - f64::from(b.to_f32());
                    if d == 0.0 {
                        0.0
                    } else if d.is_nan() {
                        f64::INFINITY
                    } else {
                        f64::from(w.to_f32()).abs() * d.abs()
                    }
                })
                .sum();
            let y = r
                .output
                .get(row * s.out_features + j)
                .map_or(0.0, |v| f64::from(v.to_f32()).abs());
            let m0 = y + p;
            let m = m0 + 3.0 * f16_ulp_at(m0);
            out.push(p + 3.0 * f16_ulp_at(m));
        }
    }
    out
}

/// Outputs of one run, `[batch][features]`.
#[derive(Clone, Debug, PartialEq)]
pub struct MlpOutputs {
    /// Layer 1's output, read back from the shared buffer.
    pub hidden: Vec<f16>,
    /// Layer 2's output.
    pub output: Vec<f16>,
}

/// Something that runs an MLP's two programs chained through one buffer.
pub trait MlpRunner {
    /// A short name for reports (`model`, `device`).
    fn name(&self) -> &str;

    /// Runs both layers on `x` (`[batch][in_features]`).
    fn run(&mut self, x: &[f16]) -> Result<MlpOutputs, ExecError>;
}

fn tile_into(t: &TensorSlot, dense: &[f16], buf: &mut [u8]) -> Result<(), ExecError> {
    tensor::tile_bytes(&t.shape, &tensor::f16_to_le_bytes(dense), buf).map_err(|source| {
        ExecError::Tensor {
            name: t.name,
            source,
        }
    })
}

fn untile_from(t: &TensorSlot, buf: &[u8]) -> Result<Vec<f16>, ExecError> {
    let mut dense = vec![0u8; t.shape.layout().dense_bytes()];
    tensor::untile_bytes(&t.shape, buf, &mut dense).map_err(|source| ExecError::Tensor {
        name: t.name,
        source,
    })?;
    Ok(tensor::f16_from_le_bytes(&dense))
}

/// `[batch][features]` ↔ the `(1, features, 1, batch)` NCHW order.
fn to_nchw(
    t: &TensorSlot,
    x: &[f16],
    batch: usize,
    features: usize,
) -> Result<Vec<f16>, ExecError> {
    builder::linear_input_to_nchw(x, batch, features).ok_or(ExecError::Tensor {
        name: t.name,
        source: tensor::TensorError::DenseLength {
            shape: t.shape,
            expected: batch.saturating_mul(features),
            found: x.len(),
            unit: "elements",
        },
    })
}

fn from_nchw(y: &[f16], batch: usize, features: usize) -> Vec<f16> {
    builder::linear_output_from_nchw(y, batch, features).unwrap_or_default()
}

fn tensors(mlp: &Mlp) -> Result<(&TensorSlot, &TensorSlot, &TensorSlot), ExecError> {
    let missing = |name| ExecError::MissingInput { name, slot: 0 };
    let x = mlp.layer1.inputs().next().ok_or(missing("x"))?;
    let h = mlp.hidden_out().ok_or(missing("out"))?;
    let y = mlp.layer2.outputs().next().ok_or(missing("out"))?;
    Ok((x, h, y))
}

/// Runs an MLP on the functional engine model: both program images and
/// the `x`, `h`, `y` buffers in one host address space, `h` mapped once
/// and pointed to by layer 1's slot 4 and layer 2's slot 5.
#[derive(Clone, Debug)]
pub struct ModelMlp<'m> {
    mlp: &'m Mlp,
    /// The model's options.
    pub options: engine::Options,
}

impl<'m> ModelMlp<'m> {
    /// A runner for `mlp` with the model's default options.
    pub fn new(mlp: &'m Mlp) -> ModelMlp<'m> {
        ModelMlp {
            mlp,
            options: engine::Options::default(),
        }
    }
}

/// Where [`ModelMlp`] maps things: program images, then tensors, each
/// followed by an unmapped gap.
const MODEL_PROGRAM1_IOVA: u64 = 0x1000_0000;
const MODEL_PROGRAM2_IOVA: u64 = 0x2000_0000;
const MODEL_X_IOVA: u64 = 0x4000_0000;
const MODEL_H_IOVA: u64 = 0x8000_0000;
const MODEL_Y_IOVA: u64 = 0xC000_0000;

fn host_buffer(t: &TensorSlot) -> Result<Vec<u8>, ExecError> {
    let size = usize::try_from(t.buffer_size).map_err(|_| ExecError::Size {
        name: t.name,
        size: t.buffer_size,
    })?;
    Ok(vec![0xA5u8; size])
}

impl MlpRunner for ModelMlp<'_> {
    fn name(&self) -> &str {
        "model"
    }

    fn run(&mut self, x: &[f16]) -> Result<MlpOutputs, ExecError> {
        let mlp = self.mlp;
        let s = mlp.shape;
        let (xt, ht, yt) = tensors(mlp)?;
        let mut mem = HostMem::default();
        mem.map(MODEL_PROGRAM1_IOVA, mlp.layer1.image());
        mem.map(MODEL_PROGRAM2_IOVA, mlp.layer2.image());
        let mut xb = host_buffer(xt)?;
        tile_into(xt, &to_nchw(xt, x, s.batch, s.in_features)?, &mut xb)?;
        mem.map(MODEL_X_IOVA, xb);
        mem.map(MODEL_H_IOVA, host_buffer(ht)?);
        mem.map(MODEL_Y_IOVA, host_buffer(yt)?);
        for (p, base, input, output) in [
            (&mlp.layer1, MODEL_PROGRAM1_IOVA, MODEL_X_IOVA, MODEL_H_IOVA),
            (&mlp.layer2, MODEL_PROGRAM2_IOVA, MODEL_H_IOVA, MODEL_Y_IOVA),
        ] {
            let mut bars = [0u64; crate::hw::td::BAR_SLOTS];
            bars[0] = base;
            bars[1] = base + p.weights_offset();
            bars[builder::SLOT_FIRST_INPUT as usize] = input;
            bars[builder::SLOT_OUTPUT as usize] = output;
            engine::execute(&mut mem, base, p.td_size, p.td_count, &bars, &self.options)
                .map_err(ExecError::Engine)?;
        }
        let h = untile_from(ht, mem.region(MODEL_H_IOVA).unwrap_or(&[]))?;
        let y = untile_from(yt, mem.region(MODEL_Y_IOVA).unwrap_or(&[]))?;
        Ok(MlpOutputs {
            hidden: from_nchw(&h, s.batch, s.hidden),
            output: from_nchw(&y, s.batch, s.out_features),
        })
    }
}

/// An MLP resident on a device: both programs created, the `x`, `h` and
/// `y` BOs allocated and the bindings built once; `h` is one BO bound as
/// layer 1's output and layer 2's input.
#[derive(Debug)]
pub struct DeviceMlp<'d> {
    mlp: &'d Mlp,
    dev: &'d Device,
    programs: [device::Program<'d>; 2],
    /// `x`, `h`, `y`.
    bos: [Bo<'d>; 3],
    bindings: [[crate::hw::uapi::Binding; 2]; 2],
    /// How long to wait for each job.
    pub timeout: std::time::Duration,
    /// EXEC priority.
    pub priority: u32,
    /// Both layers as one chained EXEC (one job) instead of one EXEC and
    /// WAIT per layer.
    pub chained: bool,
    /// Two EXECs linked only by a fence: layer 1 signals a syncobj that
    /// layer 2 waits for (no WAIT between them); layer 1 at
    /// `first_priority`, so a test can queue it behind layer 2.
    pub fenced: bool,
    /// Layer 1's priority in the fenced run.
    pub first_priority: u32,
}

impl<'d> DeviceMlp<'d> {
    /// Loads both programs and creates the buffers.
    pub fn load(dev: &'d Device, mlp: &'d Mlp) -> Result<DeviceMlp<'d>, ExecError> {
        if mlp.layer1.tensors.len() != 2 || mlp.layer2.tensors.len() != 2 {
            return Err(ExecError::Size {
                name: "tensors",
                size: (mlp.layer1.tensors.len() + mlp.layer2.tensors.len()) as u64,
            });
        }
        let (xt, ht, yt) = tensors(mlp)?;
        let ht2 = mlp.hidden_in().ok_or(ExecError::MissingInput {
            name: "x",
            slot: builder::SLOT_FIRST_INPUT,
        })?;
        let programs = [
            dev.load_program(&mlp.layer1)?,
            dev.load_program(&mlp.layer2)?,
        ];
        let bos = [
            dev.bo_create(xt.buffer_size)?,
            dev.bo_create(ht.buffer_size)?,
            dev.bo_create(yt.buffer_size)?,
        ];
        let bindings = [
            [
                device::tensor_binding(xt, &bos[0]),
                device::tensor_binding(ht, &bos[1]),
            ],
            [
                device::tensor_binding(ht2, &bos[1]),
                device::tensor_binding(yt, &bos[2]),
            ],
        ];
        Ok(DeviceMlp {
            mlp,
            dev,
            programs,
            bos,
            bindings,
            timeout: std::time::Duration::from_secs(10),
            priority: crate::hw::uapi::priority::NORMAL,
            chained: false,
            fenced: false,
            first_priority: crate::hw::uapi::priority::NORMAL,
        })
    }

    fn run_layer(&self, k: usize) -> Result<(), ExecError> {
        let id = self
            .dev
            .exec(&self.programs[k], &self.bindings[k], self.priority)?;
        self.wait_job(id)
    }

    /// Both layers in one chained EXEC.
    fn run_chain(&self) -> Result<(), ExecError> {
        let steps = [
            (&self.programs[0], &self.bindings[0][..]),
            (&self.programs[1], &self.bindings[1][..]),
        ];
        let id = self.dev.exec_chain(&steps, self.priority)?;
        self.wait_job(id)
    }

    /// Layer 2 waits for layer 1's out-fence; only layer 2 is waited for
    /// before the outputs are read (layer 1's job is reaped after).
    fn run_fenced(&self) -> Result<(), ExecError> {
        let link = self.dev.syncobj(false)?;
        let first = self.dev.exec_after(
            &self.programs[0],
            &self.bindings[0],
            self.first_priority,
            &device::Fences {
                wait: Vec::new(),
                signal: Some((&link, 0)),
            },
        )?;
        let second = self.dev.exec_after(
            &self.programs[1],
            &self.bindings[1],
            self.priority,
            &device::Fences {
                wait: vec![(&link, 0)],
                signal: None,
            },
        );
        let second = match second {
            Ok(id) => id,
            Err(e) => {
                let _ = self.wait_job(first);
                return Err(e.into());
            }
        };
        let end = self.wait_job(second);
        self.wait_job(first)?;
        end
    }

    fn wait_job(&self, id: u64) -> Result<(), ExecError> {
        match self.dev.wait(id, self.timeout)? {
            Some(JobStatus::Done) => Ok(()),
            Some(other) => Err(ExecError::Job(other)),
            None => Err(ExecError::Timeout(self.timeout)),
        }
    }
}

impl MlpRunner for DeviceMlp<'_> {
    fn name(&self) -> &str {
        "device"
    }

    fn run(&mut self, x: &[f16]) -> Result<MlpOutputs, ExecError> {
        let mlp = self.mlp;
        let s = mlp.shape;
        let (xt, ht, yt) = tensors(mlp)?;
        let xn = to_nchw(xt, x, s.batch, s.in_features)?;
        tile_into(xt, &xn, self.bos[0].map()?)?;
        // Poison h and y, so that a layer that never ran cannot pass.
        self.bos[1].map()?.fill(0xFF);
        self.bos[2].map()?.fill(0xFF);
        if self.fenced {
            self.run_fenced()?;
        } else if self.chained {
            self.run_chain()?;
        } else {
            self.run_layer(0)?;
            self.run_layer(1)?;
        }
        let h = untile_from(ht, self.bos[1].map()?)?;
        let y = untile_from(yt, self.bos[2].map()?)?;
        Ok(MlpOutputs {
            hidden: from_nchw(&h, s.batch, s.hidden),
            output: from_nchw(&y, s.batch, s.out_features),
        })
    }
}

/// How one layer came out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerResult {
    /// `hidden` or `output`.
    pub layer: &'static str,
    /// The tensor's shape on the engine.
    pub shape: String,
    /// Elements compared.
    pub elements: usize,
    /// Largest ULP difference from the reference.
    pub max_ulp: u32,
    /// Elements beyond their bound.
    pub mismatches: usize,
    /// Largest bound of an element, in ulp of the reference value (2 for
    /// the hidden layer). Large where the reference is small through
    /// cancellation: the dot product's condition number.
    pub bound_ulp: u32,
    /// The median element's bound, in ulp.
    pub median_bound_ulp: u32,
    /// The grade.
    pub verdict: Verdict,
}

/// How an MLP run came out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MlpResult {
    /// The runner's name.
    pub executor: String,
    /// The dimensions.
    pub shape: MlpShape,
    /// Both layers (empty when the run failed).
    pub layers: Vec<LayerResult>,
    /// Exact when both layers are bit-exact, within the bound, or fail.
    pub verdict: Verdict,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

/// Grades the output layer: `|actual − expected| ≤ bound` elementwise,
/// non-finite values bit-equal (any NaN matches any NaN).
/// Returns the verdict, the statistics and each element's bound in ulp
/// of the reference value.
pub fn grade_output(
    expected: &[f16],
    actual: &[f16],
    bound: &[f64],
) -> (Verdict, UlpStats, Vec<u32>) {
    let compared = if bound.len() == expected.len() {
        reference::compare(expected, actual, u32::MAX - 1)
    } else {
        Err(RefError::Length {
            operand: "bound",
            expected: expected.len(),
            found: bound.len(),
        })
    };
    let mut st = match compared {
        Ok(s) => s,
        Err(_) => {
            return (
                Verdict::Fail,
                UlpStats {
                    count: actual.len(),
                    max_ulp: reference::ULP_NAN_MISMATCH,
                    mismatches: actual.len().max(expected.len()),
                    ..Default::default()
                },
                Vec::new(),
            )
        }
    };
    let mut bound_ulp = Vec::with_capacity(bound.len());
    st.mismatches = 0;
    for ((e, a), b) in expected.iter().zip(actual).zip(bound) {
        let (ef, af) = (f64::from(e.to_f32()), f64::from(a.to_f32()));
        let ok = if e.is_finite() && a.is_finite() {
            (ef - af).abs() <= *b
        } else {
            (e.is_nan() && a.is_nan()) || e.to_bits() == a.to_bits()
        };
        if !ok {
            st.mismatches += 1;
        }
        let u = (b / f16_ulp_at(ef)).floor();
        bound_ulp.push(if u >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            u as u32
        });
    }
    let v = if st.bit_mismatches == 0 {
        Verdict::Exact
    } else if st.mismatches == 0 {
        Verdict::WithinBound(st.max_ulp)
    } else {
        Verdict::Fail
    };
    (v, st, bound_ulp)
}

/// Grades one run's outputs against the reference.
pub fn grade(mlp: &Mlp, r: &Reference, got: &MlpOutputs) -> Vec<LayerResult> {
    let s = mlp.shape;
    let shape = |c: usize| {
        Shape::new(1, c, 1, s.batch)
            .map(|x| x.to_string())
            .unwrap_or_default()
    };
    let (hv, hs) = parity::grade(&r.hidden, &got.hidden, HIDDEN_BOUND_ULP);
    let bound = if got.hidden.len() == r.hidden.len() {
        output_bound(mlp, r, &got.hidden)
    } else {
        Vec::new()
    };
    let (ov, os, mut obound) = grade_output(&r.output, &got.output, &bound);
    obound.sort_unstable();
    let median = obound.get(obound.len() / 2).copied().unwrap_or(0);
    vec![
        LayerResult {
            layer: "hidden",
            shape: shape(s.hidden),
            elements: hs.count,
            max_ulp: hs.max_ulp,
            mismatches: hs.mismatches,
            bound_ulp: HIDDEN_BOUND_ULP,
            median_bound_ulp: HIDDEN_BOUND_ULP,
            verdict: hv,
        },
        LayerResult {
            layer: "output",
            shape: shape(s.out_features),
            elements: os.count,
            max_ulp: os.max_ulp,
            mismatches: os.mismatches,
            bound_ulp: obound.last().copied().unwrap_or(0),
            median_bound_ulp: median,
            verdict: ov,
        },
    ]
}

/// The hidden layer's bound: the parity table's for a linear layer.
pub const HIDDEN_BOUND_ULP: u32 = 2;

/// Runs `mlp` on `x` with `runner` and grades both layers.
pub fn run_mlp(mlp: &Mlp, x: &[f16], runner: &mut dyn MlpRunner) -> MlpResult {
    let mut res = MlpResult {
        executor: runner.name().to_string(),
        shape: mlp.shape,
        layers: Vec::new(),
        verdict: Verdict::Fail,
        error: None,
    };
    let r = match reference(mlp, x) {
        Ok(r) => r,
        Err(e) => {
            res.error = Some(format!("reference: {e}"));
            return res;
        }
    };
    let got = match runner.run(x) {
        Ok(g) => g,
        Err(e) => {
            res.error = Some(e.to_string());
            return res;
        }
    };
    res.layers = grade(mlp, &r, &got);
    res.verdict = if res.layers.iter().any(|l| l.verdict == Verdict::Fail) {
        Verdict::Fail
    } else if res.layers.iter().all(|l| l.verdict == Verdict::Exact) {
        Verdict::Exact
    } else {
        Verdict::WithinBound(res.layers.iter().map(|l| l.max_ulp).max().unwrap_or(0))
    };
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> MlpShape {
        MlpShape {
            batch: 5,
            in_features: 33,
            hidden: 70,
            out_features: 19,
        }
    }

    #[test]
    fn default_and_odd_shapes_are_exact_on_the_model() {
        for (shape, seed) in [
            (MlpShape::DEFAULT, 1),
            (small(), 7),
            (
                MlpShape {
                    batch: 1,
                    in_features: 1,
                    hidden: 1,
                    out_features: 1,
                },
                3,
            ),
        ] {
            let mut rng = Rng::new(seed);
            let mlp = Mlp::random(shape, &mut rng).unwrap();
            let x = mlp.input(&mut rng);
            let res = run_mlp(&mlp, &x, &mut ModelMlp::new(&mlp));
            assert!(res.error.is_none(), "{res:?}");
            assert_eq!(res.verdict, Verdict::Exact, "{res:?}");
            assert_eq!(res.layers.len(), 2);
            assert_eq!(res.layers[0].elements, shape.batch * shape.hidden);
            assert_eq!(res.layers[1].elements, shape.batch * shape.out_features);
            assert!(
                (3..=6).contains(&res.layers[1].bound_ulp),
                "an exact hidden layer leaves 3 ulp (6 across a binade): {res:?}"
            );
        }
    }

    #[test]
    fn relu_does_something_and_the_reference_is_independent() {
        let mut rng = Rng::new(11);
        let mlp = Mlp::random(MlpShape::DEFAULT, &mut rng).unwrap();
        let x = mlp.input(&mut rng);
        let r = reference(&mlp, &x).unwrap();
        let zeros = r.hidden.iter().filter(|v| v.to_bits() == 0).count();
        assert!(
            zeros > r.hidden.len() / 4,
            "relu zeroes about half: {zeros}"
        );
        assert!(r.hidden.iter().all(|v| !v.is_sign_negative()));
        // Without the ReLU the second layer would see negative values: the
        // model really applies it (a linear-only layer 1 fails the check).
        let mut plain = mlp.clone();
        plain.layer1 = builder::linear(8, 64, 128, &mlp.w1).unwrap();
        let res = run_mlp(&plain, &x, &mut ModelMlp::new(&plain));
        assert_eq!(res.verdict, Verdict::Fail);
        assert!(res.layers[0].mismatches > 0);
    }

    #[test]
    fn the_output_bound_tolerates_two_ulp_per_layer() {
        let mut rng = Rng::new(5);
        let mlp = Mlp::random(small(), &mut rng).unwrap();
        let x = mlp.input(&mut rng);
        let r = reference(&mlp, &x).unwrap();
        let s = mlp.shape;
        // Perturb the hidden layer by up to 2 ulp, recompute layer 2 from
        // it, and perturb the result by 2 ulp: within the bound.
        let step = |v: f16, k: i32| {
            if v.to_bits() == 0 && k < 0 {
                return v;
            }
            let b = i32::from(v.to_bits()) + if v.is_sign_negative() { -k } else { k };
            f16::from_bits(b.clamp(0, 0xFFFF) as u16)
        };
        let h2: Vec<f16> = r
            .hidden
            .iter()
            .enumerate()
            .map(|(i, &v)| step(v, if i % 2 == 0 { 2 } else { -2 }))
            .collect();
        let y2 = reference::linear(
            &h2,
            s.batch,
            s.hidden,
            &mlp.w2,
            s.out_features,
            None,
            Rounding::NearestEven,
        )
        .unwrap();
        let y3: Vec<f16> = y2
            .iter()
            .enumerate()
            .map(|(i, &v)| step(v, if i % 3 == 0 { 2 } else { -2 }))
            .collect();
        let got = MlpOutputs {
            hidden: h2,
            output: y3,
        };
        let layers = grade(&mlp, &r, &got);
        assert_eq!(layers[0].verdict, Verdict::WithinBound(2), "{layers:?}");
        assert!(
            matches!(layers[1].verdict, Verdict::WithinBound(_)),
            "{layers:?}"
        );
        // With an exact hidden layer, 10 ulp on the output fail.
        let exact_h = MlpOutputs {
            hidden: r.hidden.clone(),
            output: r
                .output
                .iter()
                .map(|&v| {
                    if v.to_bits() & 0x7FFF > 0x400 {
                        step(v, 10)
                    } else {
                        v
                    }
                })
                .collect(),
        };
        let l = grade(&mlp, &r, &exact_h);
        assert_eq!(l[0].verdict, Verdict::Exact);
        assert_eq!(l[1].verdict, Verdict::Fail, "{l:?}");
        // A gross error fails.
        let mut bad = got.clone();
        bad.output[3] = f16::from_f32(bad.output[3].to_f32() * 1.5 + 1.0);
        assert_eq!(grade(&mlp, &r, &bad)[1].verdict, Verdict::Fail);
        bad.output[3] = f16::NAN;
        assert_eq!(grade(&mlp, &r, &bad)[1].verdict, Verdict::Fail);
    }

    #[test]
    fn the_layers_chain_and_bad_shapes_name_the_field() {
        let mut rng = Rng::new(1);
        let mlp = Mlp::random(small(), &mut rng).unwrap();
        assert_eq!(mlp.check_chain(), Ok(()));
        let a = mlp.hidden_out().unwrap();
        let b = mlp.hidden_in().unwrap();
        assert_eq!(a.shape, b.shape);
        assert_eq!(a.buffer_size, b.buffer_size);
        assert_eq!(a.slot, builder::SLOT_OUTPUT);
        assert_eq!(b.slot, builder::SLOT_FIRST_INPUT);
        // A layer 2 of another width cannot share the buffer.
        let mut other = mlp.clone();
        other.layer2 = builder::linear(6, 70, 19, &mlp.w2).unwrap();
        let e = other.check_chain().unwrap_err();
        assert!(e.to_string().contains("shape"), "{e}");
        let e = Mlp::random(
            MlpShape {
                hidden: 0,
                ..small()
            },
            &mut rng,
        )
        .unwrap_err();
        assert!(e.to_string().contains("hidden is 0"), "{e}");
        let e = Mlp::random(
            MlpShape {
                out_features: 5000,
                ..small()
            },
            &mut rng,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("layer 2") && e.to_string().contains("out_features = 5000"),
            "{e}"
        );
        let e = Mlp::new(small(), vec![f16::ONE; 3], mlp.w2.clone()).unwrap_err();
        assert!(e.to_string().contains("weights holds 3 values"), "{e}");
    }

    #[test]
    fn ulp_spacing() {
        assert_eq!(f16_ulp_at(1.0), 1.0 / 1024.0);
        assert_eq!(f16_ulp_at(1.5), 1.0 / 1024.0);
        assert_eq!(f16_ulp_at(2.0), 1.0 / 512.0);
        assert_eq!(f16_ulp_at(0.0), F16_TINY);
        assert_eq!(f16_ulp_at(1e-6), F16_TINY);
        assert_eq!(f16_ulp_at(65504.0), 32.0);
        assert_eq!(f16_ulp_at(1e9), 32.0);
        assert_eq!(f16_ulp_at(-3.0), 1.0 / 512.0);
    }
}
