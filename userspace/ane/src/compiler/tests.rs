// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Compiler tests: ONNX models written with the same `prost` messages,
//! compiled, validated by the kernel's validator, written as `.anec`, read
//! back as the library loads programs, run on the host engine model and
//! compared with an f64 CPU evaluation of the ONNX model (the f32
//! weights, no fp16 rounding anywhere).
//!
//! # Tolerance
//!
//! The engine computes in fp16 storage: the weights, constants, inputs and
//! every TD's result are rounded to fp16 (relative error at most 2^-11
//! each), a convolution accumulates in binary32. For a layer `y = W·x + b`
//! the error of one output is at most about `3·2^-11 · Σ|W_ji·x_i| + 2·2^-11·|b_j|`
//! plus the propagated error of `x`. The tests bound each output by
//! `TOL · (Σ over the layers of the largest |activation|)` with `TOL =
//! 2^-9` (four single-rounding units per layer's scale: the weight, input,
//! accumulation-result and bias-add roundings, propagated through weights
//! of magnitude below 1), and print the measured maximum error.

use super::onnx::*;
use super::*;
use crate::hw::engine;
use crate::parity::{HostMem, Rng};
use crate::program::ProgramFile;
use prost::Message;

fn node(
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

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: v,
        r#type: attr_type::INT,
        ..Default::default()
    }
}

fn model(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    output: ValueInfoProto,
) -> Vec<u8> {
    ModelProto {
        ir_version: 8,
        producer_name: "ane compiler tests".into(),
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
            version: 13,
        }],
    }
    .encode_to_vec()
}

fn rand(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| (rng.below(2001) as f32 / 1000.0 - 1.0) * scale)
        .collect()
}

/// Compiles, validates, writes and re-reads the `.anec`, runs it on the
/// engine model with `inputs` (by model name, model order and shape) and
/// returns the output (model order).
fn run(bytes: &[u8], inputs: &[(&str, &[f32])]) -> (Compiled, Vec<f32>) {
    let c = compile(bytes, Target::H13).unwrap();
    c.program
        .validate()
        .expect("the kernel's validator accepts it");
    let file = c.to_anec().unwrap().to_bytes();
    let a = Anec::parse(&file).unwrap();
    assert_eq!(a.names().len(), c.io.len());
    let p = ProgramFile::parse(std::path::Path::new("model.anec"), &file).unwrap();
    // The loaded program names its tensors as the model does.
    for t in &c.io {
        assert!(p
            .tensors
            .iter()
            .any(|s| s.name == t.name && s.slot == t.slot as usize));
    }
    let mut mem = HostMem::default();
    let mut bars = [0u64; crate::hw::td::BAR_SLOTS];
    bars[0] = 0x1000_0000;
    bars[1] = bars[0] + p.tsk_size.next_multiple_of(16);
    mem.map(bars[0], p.payload.clone());
    let mut at = Vec::new();
    for (k, b) in p.bindings.iter().enumerate() {
        let iova = 0x4000_0000 + k as u64 * 0x1000_0000;
        mem.map(iova, vec![0xFF; b.size as usize]);
        bars[b.slot as usize] = iova;
        at.push((b.tensor, iova));
    }
    let iova_of = |i: usize| at.iter().find(|(t, _)| *t == Some(i)).unwrap().1;
    for (name, vals) in inputs {
        let i = p.tensors.iter().position(|t| t.name == *name).unwrap();
        // The model's own order: TensorSpec maps it.
        let dense: Vec<u8> = vals
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect();
        p.tensors[i].pack(&dense, mem.region_mut(iova_of(i)).unwrap());
    }
    engine::execute(
        &mut mem,
        bars[0],
        p.td_size,
        p.td_count,
        &bars,
        &engine::Options::default(),
    )
    .unwrap_or_else(|e| panic!("the engine model refused it: {e:?}"));
    let o = p
        .tensors
        .iter()
        .position(|t| t.direction == crate::hwx::Direction::Output)
        .unwrap();
    let dense = p.tensors[o].unpack(mem.region(iova_of(o)).unwrap());
    let out = dense
        .chunks(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect();
    (c, out)
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

const TOL: f64 = 1.0 / 512.0;

fn check(name: &str, got: &[f32], want: &[f64], scale: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{name}");
    let mut worst = 0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let e = (f64::from(*g) - w).abs();
        assert!(
            e <= TOL * scale,
            "{name}: element {i}: engine {g}, reference {w}, error {e} > {}",
            TOL * scale
        );
        worst = worst.max(e);
    }
    println!(
        "{name}: max abs error {worst:.3e} (bound {:.3e})",
        TOL * scale
    );
    worst
}

fn maxabs(v: &[f64]) -> f64 {
    v.iter().fold(0f64, |m, x| m.max(x.abs()))
}

/// A 3-layer MLP: Gemm(transB)+bias → Relu → Gemm+bias → Relu → MatMul.
fn mlp3(rng: &mut Rng, b: usize) -> (Vec<u8>, Vec<f32>, Vec<f64>, f64) {
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
    let xd: Vec<f64> = x
        .iter()
        .map(|&v| f64::from(f16::from_f32(v).to_f32()))
        .collect();
    let a1 = relu(gemm(&xd, b, k, &w1, h1, true, Some(&b1)));
    let a2 = relu(gemm(&a1, b, h1, &w2, h2, false, Some(&b2)));
    let y = gemm(&a2, b, h2, &w3, n, false, None);
    let scale = maxabs(&a1) + maxabs(&a2) + maxabs(&y);
    (bytes, x, y, scale)
}

#[test]
fn mlp3_matches_the_cpu() {
    let mut rng = Rng::new(29);
    for b in [1, 4, 9] {
        let (bytes, x, want, scale) = mlp3(&mut rng, b);
        let (c, got) = run(&bytes, &[("x", &x)]);
        // 3 convolutions, 2 bias adds, 2 ReLU pass-throughs.
        assert_eq!(c.program.td_count, 7);
        assert_eq!(c.io[0].dims, [b, 32]);
        assert_eq!(c.io[1].name, "logits");
        check(&format!("mlp3 batch {b}"), &got, &want, scale);
    }
}

/// A bias-free MLP fuses ReLU into the convolution: one TD per layer.
#[test]
fn relu_fuses_without_bias() {
    let mut rng = Rng::new(3);
    let (b, k, h, n) = (5, 16, 24, 8);
    let w1 = rand(&mut rng, k * h, 0.4);
    let w2 = rand(&mut rng, h * n, 0.4);
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
    let x = rand(&mut rng, b * k, 1.0);
    let xd: Vec<f64> = x
        .iter()
        .map(|&v| f64::from(f16::from_f32(v).to_f32()))
        .collect();
    let hh = relu(gemm(&xd, b, k, &w1, h, false, None));
    let y = gemm(&hh, b, h, &w2, n, false, None);
    let (c, got) = run(&bytes, &[("x", &x)]);
    assert_eq!(c.program.td_count, 2);
    check("matmul-relu-matmul", &got, &y, maxabs(&hh) + maxabs(&y));
}

/// Conv 1×1 + bias, BatchNormalization folded into it, ReLU; then Add of
/// a per-channel constant (broadcast) and Mul of two activations.
#[test]
fn conv_bn_relu_and_elementwise() {
    let mut rng = Rng::new(8);
    let (c, m, h, w) = (6, 10, 3, 5);
    let wt = rand(&mut rng, m * c, 0.5);
    let bias = rand(&mut rng, m, 0.2);
    let gamma: Vec<f32> = rand(&mut rng, m, 0.5).iter().map(|v| v + 1.0).collect();
    let beta = rand(&mut rng, m, 0.3);
    let mean = rand(&mut rng, m, 0.3);
    let var: Vec<f32> = rand(&mut rng, m, 0.4)
        .iter()
        .map(|v| v.abs() + 0.5)
        .collect();
    let shift = rand(&mut rng, m, 1.0);
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
    let x = rand(&mut rng, c * h * w, 1.0);
    let hw = h * w;
    let mut r = vec![0f64; m * hw];
    let mut y = vec![0f64; m * hw];
    for o in 0..m {
        let s = f64::from(gamma[o]) / (f64::from(var[o]) + 1e-5).sqrt();
        for p in 0..hw {
            let mut acc = f64::from(bias[o]);
            for i in 0..c {
                acc += f64::from(wt[o * c + i]) * f64::from(f16::from_f32(x[i * hw + p]).to_f32());
            }
            let v = ((acc - f64::from(mean[o])) * s + f64::from(beta[o])).max(0.0);
            r[o * hw + p] = v;
            y[o * hw + p] = (v + f64::from(shift[o])) * v;
        }
    }
    let (cm, got) = run(&bytes, &[("x", &x)]);
    // conv, bias add, relu, add constant, mul.
    assert_eq!(cm.program.td_count, 5);
    let scale = maxabs(&r) * (1.0 + maxabs(&r) + 1.0);
    check("conv-bn-relu-add-mul", &got, &y, scale);
}

#[test]
fn unsupported_ops_name_the_node() {
    let bytes = model(
        vec![node("act", "Softmax", &["x"], &["y"], vec![])],
        vec![],
        vec![ValueInfoProto::float("x", &[2, 3])],
        ValueInfoProto::float("y", &[2, 3]),
    );
    let e = compile(&bytes, Target::H13).unwrap_err();
    match &e {
        CompileError::Unsupported { node, op, reason } => {
            assert_eq!((node.as_str(), op.as_str()), ("act", "Softmax"));
            assert!(reason.contains("supported subset"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A 3x3 convolution: refused with the reason.
    let bytes = model(
        vec![node("c3", "Conv", &["x", "W"], &["y"], vec![])],
        vec![TensorProto::float("W", &[2, 2, 3, 3], &[0.5; 36])],
        vec![ValueInfoProto::float("x", &[1, 2, 4, 4])],
        ValueInfoProto::float("y", &[1, 2, 2, 2]),
    );
    let e = compile(&bytes, Target::H13).unwrap_err().to_string();
    assert!(e.contains("'c3'") && e.contains("3x3"), "{e}");
    // Broadcasting between two activations.
    let bytes = model(
        vec![
            node("m", "MatMul", &["x", "W"], &["h"], vec![]),
            node("add", "Add", &["h", "z"], &["y"], vec![]),
        ],
        vec![TensorProto::float("W", &[3, 4], &[0.5; 12])],
        vec![
            ValueInfoProto::float("x", &[2, 3]),
            ValueInfoProto::float("z", &[1, 4]),
        ],
        ValueInfoProto::float("y", &[2, 4]),
    );
    let e = compile(&bytes, Target::H13).unwrap_err().to_string();
    assert!(e.contains("'add'") && e.contains("broadcasting"), "{e}");
    // H14 is refused whatever the model.
    let e = compile(&bytes, Target::T6021).unwrap_err().to_string();
    assert!(e.contains("out of scope"), "{e}");
    // Not a model at all.
    assert!(matches!(
        compile(b"\xff\xff\xff", Target::H13),
        Err(CompileError::Parse(_))
    ));
}

/// Every emitted program passes the kernel's validator, and the `.anec`
/// round trip keeps the names block; a corrupted block is refused.
#[test]
fn names_block_round_trip() {
    let mut rng = Rng::new(1);
    let (bytes, ..) = mlp3(&mut rng, 3);
    let c = compile(&bytes, Target::H13).unwrap();
    let file = c.to_anec().unwrap().to_bytes();
    let a = Anec::parse(&file).unwrap();
    assert_eq!(a.names()[0].name, "x");
    assert_eq!(a.names()[0].dims, [3, 32]);
    assert_eq!(a.names()[1].name, "logits");
    assert_eq!(a.to_bytes(), file);
    let mut bad = file.clone();
    bad[crate::anec::HEADER_SIZE + 12] = 31; // slot 31: no tensor
    assert!(Anec::parse(&bad).is_err());
}
