// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Small ONNX models written from code with the [`onnx`](super::onnx)
//! messages, each with its inputs and an f64 CPU evaluation of the model
//! (the f32 weights, the inputs as the engine receives them, i.e. rounded
//! to fp16, and no other rounding): the compiler's tests, `ane-probe`'s
//! and the onnxruntime cross-check (`cargo run --example onnx_zoo`) use
//! them.
//!
//! # Tolerance
//!
//! The engine stores every value in fp16: weights, constants, inputs and
//! each TD's result are rounded to fp16 (relative error at most 2^-11
//! each) and a convolution accumulates in binary32. For a layer
//! `y = W·x + b` the error of one output is about `3·2^-11 · Σ|W_ji·x_i| +
//! 2·2^-11·|b_j|` plus the propagated error of `x`. Each output is held to
//! [`TOLERANCE`] `·` [`Example::scale`], the scale being the sum over the
//! layers of their largest |activation| (for a product of activations, its
//! factors' magnitudes): four rounding units per layer at that scale,
//! propagated through weights of magnitude below 1.

#![allow(clippy::too_many_arguments)]

use half::f16;
use prost::Message;

use super::onnx::*;
use crate::parity::Rng;

/// The error bound relative to [`Example::scale`]: 2^-9.
pub const TOLERANCE: f64 = 1.0 / 512.0;

/// A model, its inputs and its expected output.
#[derive(Clone, Debug)]
pub struct Example {
    /// A short name (also the file stem the zoo example writes).
    pub name: String,
    /// The ONNX model.
    pub onnx: Vec<u8>,
    /// Each input: model name, dims, values (model order).
    pub inputs: Vec<(String, Vec<usize>, Vec<f32>)>,
    /// The output's name and dims.
    pub output: (String, Vec<usize>),
    /// The f64 evaluation of the model (model order).
    pub reference: Vec<f64>,
    /// The magnitude the tolerance scales with.
    pub scale: f64,
    /// TDs the compiler should emit.
    pub tds: u32,
    /// An absolute error allowed on top of the scaled bound: the sigmoid
    /// table's linear interpolation between samples 1/2 apart errs by up
    /// to `(1/2)²/8 · max|σ''| ≈ 0.0030` (measured 0.0029 on the engine
    /// model), so [`TABLE_ERROR`] for models ending in a Sigmoid, else 0.
    pub table_error: f64,
}

/// The sigmoid table's interpolation error bound (see
/// [`Example::table_error`]).
pub const TABLE_ERROR: f64 = 0.0035;

impl Example {
    /// Each input's model name and values, as `Compiled::run_on_model`
    /// takes them.
    pub fn input_values(&self) -> Vec<(&str, &[f32])> {
        self.inputs
            .iter()
            .map(|(n, _, v)| (n.as_str(), v.as_slice()))
            .collect()
    }

    /// The bound on each output's absolute error.
    pub fn bound(&self) -> f64 {
        TOLERANCE * self.scale + self.table_error
    }

    /// The largest absolute error of `got` (model order), or the first
    /// element beyond [`Example::bound`].
    pub fn max_error(&self, got: &[f32]) -> Result<f64, String> {
        if got.len() != self.reference.len() {
            return Err(format!(
                "{} values, {} expected",
                got.len(),
                self.reference.len()
            ));
        }
        let mut worst = 0f64;
        for (i, (g, w)) in got.iter().zip(&self.reference).enumerate() {
            let e = (f64::from(*g) - w).abs();
            if e > self.bound() || e.is_nan() {
                return Err(format!(
                    "element {i}: engine {g}, reference {w}, error {e:.3e} > {:.3e}",
                    self.bound()
                ));
            }
            worst = worst.max(e);
        }
        Ok(worst)
    }
}

/// Every model of the zoo, from `seed`.
pub fn all(seed: u64) -> Vec<Example> {
    let mut rng = Rng::new(seed);
    vec![
        mlp3(&mut rng, 4),
        mlp_fused(&mut rng),
        conv_block(&mut rng),
        classifier(&mut rng),
        branches(&mut rng),
        residual(&mut rng),
        cnn_head(&mut rng),
        transformer_mlp(&mut rng),
        small_cnn(&mut rng),
        mobilenet_block(&mut rng),
    ]
}

pub(crate) fn node(
    name: &str,
    op: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: name.into(),
        op_type: op.into(),
        attribute: attrs,
        domain: String::new(),
    }
}

pub(crate) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: v,
        r#type: attr_type::INT,
        ..Default::default()
    }
}

pub(crate) fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        f: v,
        r#type: attr_type::FLOAT,
        ..Default::default()
    }
}

pub(crate) fn model(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    output: ValueInfoProto,
) -> Vec<u8> {
    model_at(13, nodes, inits, inputs, output)
}

/// [`model`] importing the default domain at `opset` (`Gelu` is an
/// operator from opset 20 on).
pub(crate) fn model_at(
    opset: i64,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    output: ValueInfoProto,
) -> Vec<u8> {
    ModelProto {
        ir_version: 8,
        producer_name: "ane compiler zoo".into(),
        graph: Some(GraphProto {
            node: nodes,
            name: "g".into(),
            initializer: inits,
            input: inputs,
            output: vec![output],
            value_info: Vec::new(),
        }),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
    }
    .encode_to_vec()
}

pub(crate) fn rand(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| (rng.below(2001) as f32 / 1000.0 - 1.0) * scale)
        .collect()
}

/// f64 `[b][n] = x[b][k] · W` with W `[k][n]` (or `[n][k]` transposed) + bias.
fn gemm(
    x: &[f64],
    b: usize,
    k: usize,
    w: &[f32],
    n: usize,
    trans: bool,
    bias: Option<&[f32]>,
) -> Vec<f64> {
    let mut y = vec![0f64; b * n];
    for i in 0..b {
        for j in 0..n {
            let mut s = bias.map_or(0.0, |v| f64::from(v[j]));
            for t in 0..k {
                let wv = if trans { w[j * k + t] } else { w[t * n + j] };
                s += x[i * k + t] * f64::from(wv);
            }
            y[i * n + j] = s;
        }
    }
    y
}

fn relu(v: Vec<f64>) -> Vec<f64> {
    v.into_iter().map(|x| x.max(0.0)).collect()
}

fn maxabs(v: &[f64]) -> f64 {
    v.iter().fold(0f64, |m, x| m.max(x.abs()))
}

fn fp16(v: f32) -> f64 {
    f64::from(f16::from_f32(v).to_f32())
}

/// A 3-layer MLP 32 → 64 → 48 → 10 of batch `b`: Gemm(transB)+bias →
/// Relu → Gemm+bias → Relu → MatMul.
pub fn mlp3(rng: &mut Rng, b: usize) -> Example {
    let (k, h1, h2, n) = (32, 64, 48, 10);
    let w1 = rand(rng, h1 * k, 0.3);
    let b1 = rand(rng, h1, 0.5);
    let w2 = rand(rng, h1 * h2, 0.2);
    let b2 = rand(rng, h2, 0.5);
    let w3 = rand(rng, h2 * n, 0.3);
    let bytes = model(
        vec![
            node(
                "fc1",
                "Gemm",
                &["x", "w1", "b1"],
                &["a1"],
                vec![int_attr("transB", 1)],
            ),
            node("relu1", "Relu", &["a1"], &["r1"], vec![]),
            node("fc2", "Gemm", &["r1", "w2", "b2"], &["a2"], vec![]),
            node("relu2", "Relu", &["a2"], &["r2"], vec![]),
            node("fc3", "MatMul", &["r2", "w3"], &["logits"], vec![]),
        ],
        vec![
            TensorProto::float("w1", &[h1 as i64, k as i64], &w1),
            TensorProto::float("b1", &[h1 as i64], &b1),
            TensorProto::float("w2", &[h1 as i64, h2 as i64], &w2),
            TensorProto::float("b2", &[h2 as i64], &b2),
            TensorProto::float("w3", &[h2 as i64, n as i64], &w3),
        ],
        vec![ValueInfoProto::float("x", &[b as i64, k as i64])],
        ValueInfoProto::float("logits", &[b as i64, n as i64]),
    );
    let x = rand(rng, b * k, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let a1 = relu(gemm(&xd, b, k, &w1, h1, true, Some(&b1)));
    let a2 = relu(gemm(&a1, b, h1, &w2, h2, false, Some(&b2)));
    let y = gemm(&a2, b, h2, &w3, n, false, None);
    let scale = maxabs(&a1) + maxabs(&a2) + maxabs(&y);
    Example {
        name: format!("mlp3_b{b}"),
        onnx: bytes,
        inputs: vec![("x".into(), vec![b, k], x)],
        output: ("logits".into(), vec![b, n]),
        reference: y,
        scale,
        // 3 convolutions, 2 bias adds, 2 ReLU pass-throughs.
        tds: 7,
        table_error: 0.0,
    }
}

/// A bias-free MLP 16 → 24 → 8 (MatMul → Relu → MatMul): the ReLU fuses
/// into the first convolution, one TD per layer.
pub fn mlp_fused(rng: &mut Rng) -> Example {
    let (b, k, h, n) = (5, 16, 24, 8);
    let w1 = rand(rng, k * h, 0.4);
    let w2 = rand(rng, h * n, 0.4);
    let bytes = model(
        vec![
            node("m1", "MatMul", &["x", "w1"], &["h"], vec![]),
            node("r", "Relu", &["h"], &["hr"], vec![]),
            node("m2", "MatMul", &["hr", "w2"], &["y"], vec![]),
        ],
        vec![
            TensorProto::float("w1", &[k as i64, h as i64], &w1),
            TensorProto::float("w2", &[h as i64, n as i64], &w2),
        ],
        vec![ValueInfoProto::float("x", &[b as i64, k as i64])],
        ValueInfoProto::float("y", &[b as i64, n as i64]),
    );
    let x = rand(rng, b * k, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let hh = relu(gemm(&xd, b, k, &w1, h, false, None));
    let y = gemm(&hh, b, h, &w2, n, false, None);
    let scale = maxabs(&hh) + maxabs(&y);
    Example {
        name: "mlp_fused".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![b, k], x)],
        output: ("y".into(), vec![b, n]),
        reference: y,
        scale,
        tds: 2,
        table_error: 0.0,
    }
}

/// Conv 1×1 (6 → 10 channels, 3×5) + bias, BatchNormalization folded
/// into it, Relu; then Add of a per-channel constant (broadcast) and Mul
/// of two activations.
pub fn conv_block(rng: &mut Rng) -> Example {
    let (c, m, h, w) = (6, 10, 3, 5);
    let wt = rand(rng, m * c, 0.5);
    let bias = rand(rng, m, 0.2);
    let gamma: Vec<f32> = rand(rng, m, 0.5).iter().map(|v| v + 1.0).collect();
    let beta = rand(rng, m, 0.3);
    let mean = rand(rng, m, 0.3);
    let var: Vec<f32> = rand(rng, m, 0.4).iter().map(|v| v.abs() + 0.5).collect();
    let shift = rand(rng, m, 1.0);
    let bytes = model(
        vec![
            node("conv", "Conv", &["x", "W", "B"], &["c"], vec![]),
            node(
                "bn",
                "BatchNormalization",
                &["c", "g", "be", "mu", "var"],
                &["n"],
                vec![],
            ),
            node("relu", "Relu", &["n"], &["r"], vec![]),
            node("shift", "Add", &["r", "s"], &["t"], vec![]),
            node("sq", "Mul", &["t", "r"], &["y"], vec![]),
        ],
        vec![
            TensorProto::float("W", &[m as i64, c as i64, 1, 1], &wt),
            TensorProto::float("B", &[m as i64], &bias),
            TensorProto::float("g", &[m as i64], &gamma),
            TensorProto::float("be", &[m as i64], &beta),
            TensorProto::float("mu", &[m as i64], &mean),
            TensorProto::float("var", &[m as i64], &var),
            TensorProto::float("s", &[m as i64, 1, 1], &shift),
        ],
        vec![ValueInfoProto::float(
            "x",
            &[1, c as i64, h as i64, w as i64],
        )],
        ValueInfoProto::float("y", &[1, m as i64, h as i64, w as i64]),
    );
    let x = rand(rng, c * h * w, 1.0);
    let hw = h * w;
    let mut r = vec![0f64; m * hw];
    let mut y = vec![0f64; m * hw];
    for o in 0..m {
        let s = f64::from(gamma[o]) / (f64::from(var[o]) + 1e-5).sqrt();
        for p in 0..hw {
            let mut acc = f64::from(bias[o]);
            for i in 0..c {
                acc += f64::from(wt[o * c + i]) * fp16(x[i * hw + p]);
            }
            let v = ((acc - f64::from(mean[o])) * s + f64::from(beta[o])).max(0.0);
            r[o * hw + p] = v;
            y[o * hw + p] = (v + f64::from(shift[o])) * v;
        }
    }
    let scale = maxabs(&r) * (1.0 + maxabs(&r) + 1.0);
    Example {
        name: "conv_block".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![1, c, h, w], x)],
        output: ("y".into(), vec![1, m, h, w]),
        reference: y,
        scale,
        // conv, bias add, relu, add constant, mul.
        tds: 5,
        table_error: 0.0,
    }
}

/// A model the compiler must refuse: node `act` is a Softmax.
pub fn unsupported_example() -> Vec<u8> {
    model(
        vec![node("act", "Softmax", &["x"], &["y"], vec![])],
        vec![],
        vec![ValueInfoProto::float("x", &[2, 3])],
        ValueInfoProto::float("y", &[2, 3]),
    )
}

/// A classifier 20 → 16 → 4 of batch 6 with a sigmoid output: Gemm+bias
/// → Relu → MatMul → Add of a per-class constant (broadcast over the
/// batch) → Sigmoid.
pub fn classifier(rng: &mut Rng) -> Example {
    let (b, k, h, n) = (6, 20, 16, 4);
    let w1 = rand(rng, k * h, 0.4);
    let b1 = rand(rng, h, 0.3);
    let w2 = rand(rng, h * n, 0.5);
    let c = rand(rng, n, 1.0);
    let bytes = model(
        vec![
            node("fc1", "Gemm", &["x", "w1", "b1"], &["a"], vec![]),
            node("relu", "Relu", &["a"], &["r"], vec![]),
            node("fc2", "MatMul", &["r", "w2"], &["z"], vec![]),
            node("shift", "Add", &["z", "c"], &["zc"], vec![]),
            node("prob", "Sigmoid", &["zc"], &["p"], vec![]),
        ],
        vec![
            TensorProto::float("w1", &[k as i64, h as i64], &w1),
            TensorProto::float("b1", &[h as i64], &b1),
            TensorProto::float("w2", &[h as i64, n as i64], &w2),
            TensorProto::float("c", &[n as i64], &c),
        ],
        vec![ValueInfoProto::float("x", &[b as i64, k as i64])],
        ValueInfoProto::float("p", &[b as i64, n as i64]),
    );
    let x = rand(rng, b * k, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let r = relu(gemm(&xd, b, k, &w1, h, false, Some(&b1)));
    let z = gemm(&r, b, h, &w2, n, false, Some(&c));
    let y: Vec<f64> = z.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
    // σ is 1/4-Lipschitz: the error of z shrinks through it.
    let scale = maxabs(&r) + maxabs(&z);
    Example {
        name: "classifier".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![b, k], x)],
        output: ("p".into(), vec![b, n]),
        reference: y,
        scale,
        // fc1, its bias, relu, fc2, the constant add, sigmoid.
        tds: 6,
        table_error: TABLE_ERROR,
    }
}

/// Two 1×1 convolution branches of one input, concatenated on the
/// channels and mixed by a third: Conv(8 → 6) → Relu and Conv(8 → 4) →
/// Concat → Conv(10 → 5) on 1×8×4×6.
pub fn branches(rng: &mut Rng) -> Example {
    let (c, ca, cb, m, h, w) = (8, 6, 4, 5, 4, 6);
    let wa = rand(rng, ca * c, 0.4);
    let wb = rand(rng, cb * c, 0.4);
    let wm = rand(rng, m * (ca + cb), 0.4);
    let d = |v: &[usize]| -> Vec<i64> { v.iter().map(|&x| x as i64).collect() };
    let bytes = model(
        vec![
            node("ca", "Conv", &["x", "wa"], &["a"], vec![]),
            node("ra", "Relu", &["a"], &["ar"], vec![]),
            node("cb", "Conv", &["x", "wb"], &["b"], vec![]),
            node(
                "cat",
                "Concat",
                &["ar", "b"],
                &["ab"],
                vec![int_attr("axis", 1)],
            ),
            node("mix", "Conv", &["ab", "wm"], &["y"], vec![]),
        ],
        vec![
            TensorProto::float("wa", &d(&[ca, c, 1, 1]), &wa),
            TensorProto::float("wb", &d(&[cb, c, 1, 1]), &wb),
            TensorProto::float("wm", &d(&[m, ca + cb, 1, 1]), &wm),
        ],
        vec![ValueInfoProto::float("x", &d(&[1, c, h, w]))],
        ValueInfoProto::float("y", &d(&[1, m, h, w])),
    );
    let x = rand(rng, c * h * w, 1.0);
    let hw = h * w;
    let conv = |x: &[f64], cin: usize, wt: &[f32], cout: usize| -> Vec<f64> {
        let mut y = vec![0f64; cout * hw];
        for o in 0..cout {
            for p in 0..hw {
                y[o * hw + p] = (0..cin)
                    .map(|i| f64::from(wt[o * cin + i]) * x[i * hw + p])
                    .sum();
            }
        }
        y
    };
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let a = relu(conv(&xd, c, &wa, ca));
    let b = conv(&xd, c, &wb, cb);
    let ab: Vec<f64> = a.iter().chain(&b).copied().collect();
    let y = conv(&ab, ca + cb, &wm, m);
    let scale = maxabs(&ab) + maxabs(&y);
    Example {
        name: "branches".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![1, c, h, w], x)],
        output: ("y".into(), vec![1, m, h, w]),
        reference: y,
        scale,
        // two convolutions, two concat copies, the mixing convolution.
        tds: 5,
        table_error: 0.0,
    }
}

/// A residual block on [batch, features]: `y = c − Mean(Relu(x·W), x)`
/// with a per-feature constant `c`, and `z = y − x` as the output (Sub of
/// two activations, Sub from a constant, Mean): 24 features, batch 3.
pub fn residual(rng: &mut Rng) -> Example {
    let (b, f) = (3, 24);
    let wt = rand(rng, f * f, 0.3);
    let c = rand(rng, f, 1.0);
    let bytes = model(
        vec![
            node("fc", "MatMul", &["x", "w"], &["h"], vec![]),
            node("relu", "Relu", &["h"], &["r"], vec![]),
            node("avg", "Mean", &["r", "x"], &["m"], vec![]),
            node("flip", "Sub", &["c", "m"], &["y"], vec![]),
            node("res", "Sub", &["y", "x"], &["z"], vec![]),
        ],
        vec![
            TensorProto::float("w", &[f as i64, f as i64], &wt),
            TensorProto::float("c", &[f as i64], &c),
        ],
        vec![ValueInfoProto::float("x", &[b as i64, f as i64])],
        ValueInfoProto::float("z", &[b as i64, f as i64]),
    );
    let x = rand(rng, b * f, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let r = relu(gemm(&xd, b, f, &wt, f, false, None));
    let z: Vec<f64> = (0..b * f)
        .map(|i| f64::from(c[i % f]) - (r[i] + xd[i]) / 2.0 - xd[i])
        .collect();
    let scale = maxabs(&r) + maxabs(&xd) + maxabs(&z);
    Example {
        name: "residual".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![b, f], x)],
        output: ("z".into(), vec![b, f]),
        reference: z,
        scale,
        // matmul+relu, mean, constant sub, sub.
        tds: 4,
        table_error: 0.0,
    }
}

/// A convolutional head on a 1×1 feature map: Conv(16 → 32)+bias,
/// BatchNormalization (folded), Relu, Flatten to [1, 32] (no data moves),
/// Gemm(transB) 32 → 10 + bias.
pub fn cnn_head(rng: &mut Rng) -> Example {
    let (c, m, n) = (16, 32, 10);
    let wc = rand(rng, m * c, 0.4);
    let bc = rand(rng, m, 0.2);
    let gamma: Vec<f32> = rand(rng, m, 0.5).iter().map(|v| v + 1.0).collect();
    let beta = rand(rng, m, 0.3);
    let mean = rand(rng, m, 0.3);
    let var: Vec<f32> = rand(rng, m, 0.4).iter().map(|v| v.abs() + 0.5).collect();
    let wg = rand(rng, n * m, 0.3);
    let bg = rand(rng, n, 0.5);
    let bytes = model(
        vec![
            node("conv", "Conv", &["x", "wc", "bc"], &["c"], vec![]),
            node(
                "bn",
                "BatchNormalization",
                &["c", "g", "be", "mu", "var"],
                &["b"],
                vec![],
            ),
            node("relu", "Relu", &["b"], &["r"], vec![]),
            node("flat", "Flatten", &["r"], &["f"], vec![int_attr("axis", 1)]),
            node(
                "fc",
                "Gemm",
                &["f", "wg", "bg"],
                &["logits"],
                vec![int_attr("transB", 1)],
            ),
        ],
        vec![
            TensorProto::float("wc", &[m as i64, c as i64, 1, 1], &wc),
            TensorProto::float("bc", &[m as i64], &bc),
            TensorProto::float("g", &[m as i64], &gamma),
            TensorProto::float("be", &[m as i64], &beta),
            TensorProto::float("mu", &[m as i64], &mean),
            TensorProto::float("var", &[m as i64], &var),
            TensorProto::float("wg", &[n as i64, m as i64], &wg),
            TensorProto::float("bg", &[n as i64], &bg),
        ],
        vec![ValueInfoProto::float("x", &[1, c as i64, 1, 1])],
        ValueInfoProto::float("logits", &[1, n as i64]),
    );
    let x = rand(rng, c, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let r: Vec<f64> = (0..m)
        .map(|o| {
            let acc: f64 = f64::from(bc[o])
                + (0..c)
                    .map(|i| f64::from(wc[o * c + i]) * xd[i])
                    .sum::<f64>();
            let s = f64::from(gamma[o]) / (f64::from(var[o]) + 1e-5).sqrt();
            ((acc - f64::from(mean[o])) * s + f64::from(beta[o])).max(0.0)
        })
        .collect();
    let y = gemm(&r, 1, m, &wg, n, true, Some(&bg));
    let scale = maxabs(&r) + maxabs(&y);
    Example {
        name: "cnn_head".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![1, c, 1, 1], x)],
        output: ("logits".into(), vec![1, n]),
        reference: y,
        scale,
        // conv, its bias, relu, the gemm and its bias; the flatten is free.
        tds: 5,
        table_error: 0.0,
    }
}

/// A transformer's MLP block on 8 tokens of width 32: MatMul(32 → 64) →
/// Add of a bias → Gelu → MatMul(64 → 32) → Add of a bias (opset 20).
/// The GELU table's error ([`crate::builder::GELU_TABLE_ERROR`]) reaches
/// each output through the second layer's weights: `table_error` is it
/// times the largest `Σ_j |W2[j][i]|`.
pub fn transformer_mlp(rng: &mut Rng) -> Example {
    let (b, d, f) = (8, 32, 64);
    let w1 = rand(rng, d * f, 0.3);
    let b1 = rand(rng, f, 0.5);
    let w2 = rand(rng, f * d, 0.2);
    let b2 = rand(rng, d, 0.5);
    let bytes = model_at(
        20,
        vec![
            node("up", "MatMul", &["x", "w1"], &["u"], vec![]),
            node("up_bias", "Add", &["u", "b1"], &["ub"], vec![]),
            node("act", "Gelu", &["ub"], &["g"], vec![]),
            node("down", "MatMul", &["g", "w2"], &["v"], vec![]),
            node("down_bias", "Add", &["v", "b2"], &["y"], vec![]),
        ],
        vec![
            TensorProto::float("w1", &[d as i64, f as i64], &w1),
            TensorProto::float("b1", &[f as i64], &b1),
            TensorProto::float("w2", &[f as i64, d as i64], &w2),
            TensorProto::float("b2", &[d as i64], &b2),
        ],
        vec![ValueInfoProto::float("x", &[b as i64, d as i64])],
        ValueInfoProto::float("y", &[b as i64, d as i64]),
    );
    let x = rand(rng, b * d, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let u = gemm(&xd, b, d, &w1, f, false, Some(&b1));
    let g: Vec<f64> = u
        .iter()
        .map(|&v| crate::reference::scalar::gelu_f64(v))
        .collect();
    let y = gemm(&g, b, f, &w2, d, false, Some(&b2));
    // GELU is at most 1.13-Lipschitz: the error of u passes through it
    // about unchanged, so u, g and y each count once.
    let scale = maxabs(&u) + maxabs(&g) + maxabs(&y);
    let gain = (0..d)
        .map(|i| (0..f).map(|j| f64::from(w2[j * d + i].abs())).sum::<f64>())
        .fold(0f64, f64::max);
    Example {
        name: "transformer_mlp".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![b, d], x)],
        output: ("y".into(), vec![b, d]),
        reference: y,
        scale,
        // up, its bias, gelu, down, its bias.
        tds: 5,
        table_error: crate::builder::GELU_TABLE_ERROR * gain,
    }
}

/// An f64 2-D convolution of `x` (`[c][h][w]`) by `wt` (`[m][c/group][kh][kw]`)
/// with `stride`, `pads` (top, left, bottom, right), `group` and a bias;
/// returns the output (`[m][oh][ow]`), oh, ow and the largest `Σ|w·x| +
/// |b|` of an output (the magnitude its rounding errors scale with).
pub(crate) fn conv2d(
    x: &[f64],
    (c, h, w): (usize, usize, usize),
    wt: &[f32],
    (m, kh, kw): (usize, usize, usize),
    (sh, sw): (usize, usize),
    (pt, pl, pb, pr): (usize, usize, usize, usize),
    group: usize,
    bias: Option<&[f32]>,
) -> (Vec<f64>, usize, usize, f64) {
    let (oh, ow) = ((h + pt + pb - kh) / sh + 1, (w + pl + pr - kw) / sw + 1);
    let (cg, mg) = (c / group, m / group);
    let mut y = vec![0f64; m * oh * ow];
    let mut mag = 0f64;
    for o in 0..m {
        let g = o / mg;
        for oy in 0..oh {
            for ox in 0..ow {
                let b = bias.map_or(0.0, |b| f64::from(b[o]));
                let (mut acc, mut abs) = (b, b.abs());
                for k in 0..cg {
                    let ci = g * cg + k;
                    for dy in 0..kh {
                        for dx in 0..kw {
                            let (iy, ix) = (
                                (sh * oy + dy) as isize - pt as isize,
                                (sw * ox + dx) as isize - pl as isize,
                            );
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let v = x[(ci * h + iy as usize) * w + ix as usize]
                                * f64::from(wt[((o * cg + k) * kh + dy) * kw + dx]);
                            acc += v;
                            abs += v.abs();
                        }
                    }
                }
                y[(o * oh + oy) * ow + ox] = acc;
                mag = mag.max(abs);
            }
        }
    }
    (y, oh, ow, mag)
}

/// Inference BatchNormalization in f64 over `[m][hw]`, epsilon 1e-5.
fn batch_norm(y: &mut [f64], m: usize, p: &[Vec<f32>; 4]) {
    let hw = y.len() / m;
    for o in 0..m {
        let s = f64::from(p[0][o]) / (f64::from(p[3][o]) + 1e-5).sqrt();
        for v in &mut y[o * hw..(o + 1) * hw] {
            *v = (*v - f64::from(p[2][o])) * s + f64::from(p[1][o]);
        }
    }
}

/// BatchNormalization parameters of `m` channels (scale, B, mean, var)
/// and their initializers named `{name}_g`, `_b`, `_mu`, `_var`.
fn bn_params(rng: &mut Rng, name: &str, m: usize) -> ([Vec<f32>; 4], Vec<TensorProto>) {
    let p = [
        rand(rng, m, 0.3)
            .iter()
            .map(|v| v + 1.0)
            .collect::<Vec<f32>>(),
        rand(rng, m, 0.2),
        rand(rng, m, 0.2),
        rand(rng, m, 0.3).iter().map(|v| v.abs() + 0.7).collect(),
    ];
    let t = ["g", "b", "mu", "var"]
        .iter()
        .zip(&p)
        .map(|(s, v)| TensorProto::float(&format!("{name}_{s}"), &[m as i64], v))
        .collect();
    (p, t)
}

fn bn_node(name: &str, x: &str, y: &str) -> NodeProto {
    let i: Vec<String> = ["g", "b", "mu", "var"]
        .iter()
        .map(|s| format!("{name}_{s}"))
        .collect();
    node(
        name,
        "BatchNormalization",
        &[x, &i[0], &i[1], &i[2], &i[3]],
        &[y],
        vec![float_attr("epsilon", 1e-5)],
    )
}

pub(crate) fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: attr_type::INTS,
        ..Default::default()
    }
}

/// A small CNN on 1×3×8×8: Conv 3×3 pad 1 (3 → 8) with a bias and
/// BatchNormalization folded, Relu, MaxPool 2×2 stride 2, Conv 3×3 stride
/// 2 pad 1 (8 → 12), Relu, GlobalAveragePool, Flatten, Gemm (12 → 5) with
/// a bias.
pub fn small_cnn(rng: &mut Rng) -> Example {
    let (c, h, w, m1, m2, n) = (3, 8, 8, 8, 12, 5);
    let w1 = rand(rng, m1 * c * 9, 0.3);
    let b1 = rand(rng, m1, 0.2);
    let (bn, bn_t) = bn_params(rng, "bn1", m1);
    let w2 = rand(rng, m2 * m1 * 9, 0.15);
    let w3 = rand(rng, n * m2, 0.5);
    let b3 = rand(rng, n, 0.2);
    let pads = ints_attr("pads", &[1, 1, 1, 1]);
    let mut inits = vec![
        TensorProto::float("w1", &[m1 as i64, c as i64, 3, 3], &w1),
        TensorProto::float("b1", &[m1 as i64], &b1),
        TensorProto::float("w2", &[m2 as i64, m1 as i64, 3, 3], &w2),
        TensorProto::float("w3", &[n as i64, m2 as i64], &w3),
        TensorProto::float("b3", &[n as i64], &b3),
    ];
    inits.extend(bn_t);
    let bytes = model(
        vec![
            node(
                "conv1",
                "Conv",
                &["x", "w1", "b1"],
                &["c1"],
                vec![ints_attr("kernel_shape", &[3, 3]), pads.clone()],
            ),
            bn_node("bn1", "c1", "n1"),
            node("relu1", "Relu", &["n1"], &["r1"], vec![]),
            node(
                "pool",
                "MaxPool",
                &["r1"],
                &["p1"],
                vec![
                    ints_attr("kernel_shape", &[2, 2]),
                    ints_attr("strides", &[2, 2]),
                ],
            ),
            node(
                "conv2",
                "Conv",
                &["p1", "w2"],
                &["c2"],
                vec![ints_attr("strides", &[2, 2]), pads],
            ),
            node("relu2", "Relu", &["c2"], &["r2"], vec![]),
            node("gap", "GlobalAveragePool", &["r2"], &["g"], vec![]),
            node("flat", "Flatten", &["g"], &["f"], vec![]),
            node(
                "fc",
                "Gemm",
                &["f", "w3", "b3"],
                &["logits"],
                vec![int_attr("transB", 1)],
            ),
        ],
        inits,
        vec![ValueInfoProto::float(
            "x",
            &[1, c as i64, h as i64, w as i64],
        )],
        ValueInfoProto::float("logits", &[1, n as i64]),
    );
    let x = rand(rng, c * h * w, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let (mut y1, oh1, ow1, mag1) = conv2d(
        &xd,
        (c, h, w),
        &w1,
        (m1, 3, 3),
        (1, 1),
        (1, 1, 1, 1),
        1,
        Some(&b1),
    );
    batch_norm(&mut y1, m1, &bn);
    let r1 = relu(y1);
    let (ph, pw) = (oh1 / 2, ow1 / 2);
    let mut p1 = vec![0f64; m1 * ph * pw];
    for o in 0..m1 {
        for y in 0..ph {
            for xx in 0..pw {
                let at = |dy: usize, dx: usize| r1[(o * oh1 + 2 * y + dy) * ow1 + 2 * xx + dx];
                p1[(o * ph + y) * pw + xx] = at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1));
            }
        }
    }
    let (y2, oh2, ow2, mag2) = conv2d(
        &p1,
        (m1, ph, pw),
        &w2,
        (m2, 3, 3),
        (2, 2),
        (1, 1, 1, 1),
        1,
        None,
    );
    let r2 = relu(y2);
    let px = oh2 * ow2;
    let g: Vec<f64> = (0..m2)
        .map(|o| r2[o * px..(o + 1) * px].iter().sum::<f64>() / px as f64)
        .collect();
    let y = gemm(&g, 1, m2, &w3, n, true, Some(&b3));
    // BN scales the first layer by up to 1.3/√0.7: its magnitude counts
    // twice.
    let scale = 2.0 * mag1 + maxabs(&r1) + mag2 + maxabs(&g) + maxabs(&y);
    debug_assert!(maxabs(&g) > 0.05, "the second layer is not all zero");
    Example {
        name: "small_cnn".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![1, c, h, w], x)],
        output: ("logits".into(), vec![1, n]),
        reference: y,
        scale,
        // conv1: fill + 9 taps × 3 channels, conv, bias, relu; pool: 4
        // taps × 4 rows, 3 max; conv2 (2×2 out): fill + 15 tap rows
        // (the top/left taps have 1 valid row, the others 2), conv with
        // the relu fused; gap; fc, bias.
        tds: 1 + 27 + 3 + 16 + 3 + 1 + 15 + 1 + 1 + 2,
        table_error: 0.0,
    }
}

/// A MobileNet-v2-style inverted residual on 1×8×6×6: Conv 1×1 (8 → 16)
/// with BatchNormalization and Clip(0, 6), then a depthwise Conv 3×3 pad
/// 1 (group 16) with BatchNormalization and Clip(0, 6), then Conv 1×1
/// (16 → 8) with BatchNormalization, then Add of the input.
pub fn mobilenet_block(rng: &mut Rng) -> Example {
    let (c, h, w, e) = (8, 6, 6, 16);
    let w1 = rand(rng, e * c, 0.4);
    let wd = rand(rng, e * 9, 0.4);
    let w3 = rand(rng, c * e, 0.3);
    let (bn1, t1) = bn_params(rng, "bn1", e);
    let (bn2, t2) = bn_params(rng, "bn2", e);
    let (bn3, t3) = bn_params(rng, "bn3", c);
    let mut inits = vec![
        TensorProto::float("w1", &[e as i64, c as i64, 1, 1], &w1),
        TensorProto::float("wd", &[e as i64, 1, 3, 3], &wd),
        TensorProto::float("w3", &[c as i64, e as i64, 1, 1], &w3),
        TensorProto::float("zero", &[], &[0.0]),
        TensorProto::float("six", &[], &[6.0]),
    ];
    inits.extend(t1);
    inits.extend(t2);
    inits.extend(t3);
    let bytes = model(
        vec![
            node("expand", "Conv", &["x", "w1"], &["a"], vec![]),
            bn_node("bn1", "a", "an"),
            node("relu6_1", "Clip", &["an", "zero", "six"], &["ar"], vec![]),
            node(
                "dw",
                "Conv",
                &["ar", "wd"],
                &["d"],
                vec![
                    int_attr("group", e as i64),
                    ints_attr("pads", &[1, 1, 1, 1]),
                ],
            ),
            bn_node("bn2", "d", "dn"),
            node("relu6_2", "Clip", &["dn", "zero", "six"], &["dr"], vec![]),
            node("project", "Conv", &["dr", "w3"], &["p"], vec![]),
            bn_node("bn3", "p", "pn"),
            node("residual", "Add", &["pn", "x"], &["y"], vec![]),
        ],
        inits,
        vec![ValueInfoProto::float(
            "x",
            &[1, c as i64, h as i64, w as i64],
        )],
        ValueInfoProto::float("y", &[1, c as i64, h as i64, w as i64]),
    );
    let x = rand(rng, c * h * w, 1.0);
    let xd: Vec<f64> = x.iter().map(|&v| fp16(v)).collect();
    let clip6 = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| x.clamp(0.0, 6.0)).collect() };
    let (mut a, _, _, mag1) = conv2d(
        &xd,
        (c, h, w),
        &w1,
        (e, 1, 1),
        (1, 1),
        (0, 0, 0, 0),
        1,
        None,
    );
    batch_norm(&mut a, e, &bn1);
    let a = clip6(a);
    let (mut d, _, _, mag2) = conv2d(&a, (e, h, w), &wd, (e, 3, 3), (1, 1), (1, 1, 1, 1), e, None);
    batch_norm(&mut d, e, &bn2);
    let d = clip6(d);
    let (mut p, _, _, mag3) = conv2d(&d, (e, h, w), &w3, (c, 1, 1), (1, 1), (0, 0, 0, 0), 1, None);
    batch_norm(&mut p, c, &bn3);
    let y: Vec<f64> = p.iter().zip(&xd).map(|(a, b)| a + b).collect();
    let scale = 2.0 * (mag1 + mag2 + mag3) + maxabs(&a) + maxabs(&d) + maxabs(&y);
    Example {
        name: "mobilenet_block".into(),
        onnx: bytes,
        inputs: vec![("x".into(), vec![1, c, h, w], x)],
        output: ("y".into(), vec![1, c, h, w]),
        reference: y,
        scale,
        // expand, its BN bias, clip; fill + 48 tap rows (the taps of the
        // top and bottom kernel rows have 5 valid rows, the middle ones
        // 6), dw conv, BN bias, clip; project, BN bias; residual add.
        tds: 3 + 1 + 48 + 3 + 2 + 1,
        table_error: 0.0,
    }
}
