// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Compiler tests: ONNX models written with the same `prost` messages,
//! compiled, validated by the kernel's validator, written as `.anec`, read
//! back as the library loads programs, run on the host engine model and
//! compared with an f64 CPU evaluation of the ONNX model (the f32
//! weights, no fp16 rounding anywhere).
//!
//! The tolerance is the zoo's (see [`super::zoo`]).

use super::onnx::*;
use super::*;
use crate::parity::Rng;
use crate::program::ProgramFile;

use super::zoo::{self, model, node};

/// Compiles, validates, writes and re-reads the `.anec`, runs it on the
/// engine model with `inputs` (by model name, model order and shape) and
/// returns the output (model order).
fn run(bytes: &[u8], inputs: &[(&str, &[f32])]) -> (Compiled, Vec<f32>) {
    let c = compile(bytes, Target::H13).unwrap();
    let summary = c
        .program
        .validate()
        .expect("the kernel's validator accepts it");
    // Every read of slot 1 (coefficients, constants, tables) stays inside
    // the weights the program carries.
    if let Some(k) = summary.slot(crate::hw::td::SLOT_KERNEL) {
        assert!(
            k.min_size <= c.program.weights.len() as u64,
            "slot 1 read up to {:#x}, {:#x} bytes of weights",
            k.min_size,
            c.program.weights.len()
        );
    }
    let file = c.to_anec().unwrap().to_bytes();
    let a = Anec::parse(&file).unwrap();
    assert_eq!(a.names().len(), c.io.len());
    let p = ProgramFile::parse(std::path::Path::new("model.anec"), &file).unwrap();
    // The loaded program names its tensors as the model does, and gives
    // callers arrays in the model's own shape.
    for t in &c.io {
        let s = p
            .tensors
            .iter()
            .find(|s| s.name == t.name && s.slot == t.slot as usize)
            .unwrap_or_else(|| panic!("no tensor '{}' in the loaded program", t.name));
        assert_eq!(
            s.array_dims(),
            t.dims,
            "'{}': the shape callers see",
            t.name
        );
    }
    let out = c.run_on_model(inputs).unwrap();
    (c, out)
}

/// Checks `got` against the example's reference and bound; returns the
/// max error.
fn check(ex: &zoo::Example, got: &[f32]) -> f64 {
    let e = ex
        .max_error(got)
        .unwrap_or_else(|e| panic!("{}: {e}", ex.name));
    println!(
        "{}: max abs error {e:.3e} (bound {:.3e})",
        ex.name,
        ex.bound()
    );
    e
}

#[test]
fn the_zoo_matches_the_cpu() {
    for seed in [29, 30] {
        for ex in zoo::all(seed) {
            let inputs = ex.input_values();
            let (c, got) = run(&ex.onnx, &inputs);
            assert_eq!(c.program.td_count, ex.tds, "{}", ex.name);
            assert_eq!(c.io.last().unwrap().name, ex.output.0);
            assert_eq!(c.io.last().unwrap().dims, ex.output.1);
            assert_eq!(c.io[0].dims, ex.inputs[0].1);
            check(&ex, &got);
        }
    }
    // The MLP at other batches.
    let mut rng = Rng::new(5);
    for b in [1, 9, 33] {
        let ex = zoo::mlp3(&mut rng, b);
        let (_, got) = run(&ex.onnx, &[("x", &ex.inputs[0].2)]);
        check(&ex, &got);
    }
}

#[test]
fn unsupported_ops_name_the_node() {
    let bytes = model(
        vec![node("act", "LpNormalization", &["x"], &["y"], vec![])],
        vec![],
        vec![ValueInfoProto::float("x", &[2, 3])],
        ValueInfoProto::float("y", &[2, 3]),
    );
    let e = compile(&bytes, Target::H13).unwrap_err();
    match &e {
        CompileError::Unsupported { node, op, reason } => {
            assert_eq!((node.as_str(), op.as_str()), ("act", "LpNormalization"));
            assert!(reason.contains("supported subset"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Non-linearities whose engine table is not understood, and the tanh
    // form of GELU: refused with the reason, not approximated.
    for (op, attrs, why) in [
        ("Tanh", vec![], "table is not understood"),
        ("Erf", vec![], "table is not understood"),
        (
            "Gelu",
            vec![AttributeProto {
                name: "approximate".into(),
                s: b"tanh".to_vec(),
                r#type: 3,
                ..Default::default()
            }],
            "approximate",
        ),
    ] {
        let bytes = model(
            vec![node("nl", op, &["x"], &["y"], attrs)],
            vec![],
            vec![ValueInfoProto::float("x", &[2, 3])],
            ValueInfoProto::float("y", &[2, 3]),
        );
        match compile(&bytes, Target::H13).unwrap_err() {
            CompileError::Unsupported {
                node,
                op: o,
                reason,
            } => {
                assert_eq!((node.as_str(), o.as_str()), ("nl", op));
                assert!(reason.contains(why), "{op}: {reason}");
            }
            other => panic!("{op}: {other:?}"),
        }
    }
    // Window attributes outside the lowering: refused with the reason.
    let attr_s = |name: &str, v: &[u8]| AttributeProto {
        name: name.into(),
        s: v.to_vec(),
        r#type: 3,
        ..Default::default()
    };
    let attr_i = |name: &str, v: &[i64]| AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: 7,
        ..Default::default()
    };
    for (op, attrs, why) in [
        ("Conv", vec![attr_s("auto_pad", b"SAME_UPPER")], "auto_pad"),
        ("Conv", vec![attr_i("dilations", &[2, 2])], "dilations"),
        (
            "Conv",
            vec![attr_i("pads", &[3, 3, 3, 3])],
            "smaller than the kernel",
        ),
        (
            "AveragePool",
            vec![
                attr_i("kernel_shape", &[3, 3]),
                attr_i("pads", &[1, 1, 1, 1]),
            ],
            "count_include_pad",
        ),
        ("MaxPool", vec![], "kernel_shape is missing"),
    ] {
        let (inputs, inits) = if op == "Conv" {
            (
                vec!["x", "W"],
                vec![TensorProto::float("W", &[2, 2, 3, 3], &[0.5; 36])],
            )
        } else {
            (vec!["x"], vec![])
        };
        let bytes = model(
            vec![node("win", op, &inputs, &["y"], attrs)],
            inits,
            vec![ValueInfoProto::float("x", &[1, 2, 4, 4])],
            ValueInfoProto::float("y", &[1, 2, 2, 2]),
        );
        let e = compile(&bytes, Target::H13).unwrap_err().to_string();
        assert!(e.contains("'win'") && e.contains(why), "{op}: {e}");
    }
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
    // A reshape that would move data on the engine.
    let bytes = model(
        vec![
            node("m", "MatMul", &["x", "W"], &["h"], vec![]),
            node("rs", "Reshape", &["h", "s"], &["y"], vec![]),
        ],
        vec![
            TensorProto::float("W", &[3, 4], &[0.5; 12]),
            TensorProto {
                dims: vec![2],
                data_type: INT64,
                int64_data: vec![4, 2],
                ..Default::default()
            },
        ],
        vec![ValueInfoProto::float("x", &[2, 3])],
        ValueInfoProto::float("y", &[4, 2]),
    );
    let mut m = crate::compiler::onnx::decode(&bytes).unwrap();
    m.graph.as_mut().unwrap().initializer[1].name = "s".into();
    let bytes = prost::Message::encode_to_vec(&m);
    let e = compile(&bytes, Target::H13).unwrap_err().to_string();
    assert!(e.contains("'rs'") && e.contains("moves data"), "{e}");
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
    let bytes = zoo::mlp3(&mut rng, 3).onnx;
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

/// Corrupted models never panic: each of the zoo's models with bytes
/// flipped at random is compiled; every outcome must be a program that
/// validates or an error.
#[test]
fn corrupted_models_are_refused_or_compiled_never_panic() {
    let mut rng = Rng::new(99);
    let (mut ok, mut refused) = (0, 0);
    for ex in zoo::all(3) {
        for _ in 0..80 {
            let mut b = ex.onnx.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
            match compile(&b, Target::H13) {
                Ok(c) => {
                    c.program.validate().expect("a compiled program validates");
                    c.to_anec().expect("and fits the container");
                    ok += 1;
                }
                Err(_) => refused += 1,
            }
        }
    }
    println!("corrupted models: {ok} compiled, {refused} refused");
    assert!(ok > 0 && refused > 0);
}

/// Compiles and runs `bytes` on input `x` (see [`run`]); the largest
/// absolute error against `want`.
fn run_max_error(bytes: &[u8], x: &[f32], want: &[f64]) -> f64 {
    let (_, got) = run(bytes, &[("x", x)]);
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(a, b)| (f64::from(*a) - b).abs())
        .fold(0f64, f64::max)
}

/// Convolutions and poolings with windows (k×k, strided, asymmetric
/// padding, grouped, depthwise) against an f64 evaluation, each through
/// the kernel's validator and the `.anec` round trip.
#[test]
fn window_ops_match_the_cpu() {
    use zoo::{conv2d, ints_attr};
    let mut rng = Rng::new(77);
    // (c, h, w, m, k, stride, pads t/l/b/r, group)
    let convs = [
        (3, 7, 6, 4, 3, 1, [1, 1, 1, 1], 1),
        (4, 9, 9, 6, 3, 2, [1, 0, 1, 2], 2),
        (6, 8, 7, 6, 3, 2, [1, 1, 1, 1], 6),
        (5, 5, 5, 3, 2, 1, [0, 0, 0, 0], 1),
        (2, 6, 6, 2, 5, 1, [2, 2, 2, 2], 2),
    ];
    for (c, h, w, m, k, s, p, g) in convs {
        let wt = zoo::rand(&mut rng, m * (c / g) * k * k, 0.4);
        let (oh, ow) = ((h + p[0] + p[2] - k) / s + 1, (w + p[1] + p[3] - k) / s + 1);
        let bytes = model(
            vec![node(
                "conv",
                "Conv",
                &["x", "W"],
                &["y"],
                vec![
                    ints_attr("strides", &[s as i64, s as i64]),
                    ints_attr("pads", &p.map(|v| v as i64)),
                    zoo::int_attr("group", g as i64),
                ],
            )],
            vec![TensorProto::float(
                "W",
                &[m as i64, (c / g) as i64, k as i64, k as i64],
                &wt,
            )],
            vec![ValueInfoProto::float(
                "x",
                &[1, c as i64, h as i64, w as i64],
            )],
            ValueInfoProto::float("y", &[1, m as i64, oh as i64, ow as i64]),
        );
        let x = zoo::rand(&mut rng, c * h * w, 1.0);
        let xd: Vec<f64> = x.iter().map(|&v| f64::from(f16::from_f32(v))).collect();
        let (want, _, _, mag) = conv2d(
            &xd,
            (c, h, w),
            &wt,
            (m, k, k),
            (s, s),
            (p[0], p[1], p[2], p[3]),
            g,
            None,
        );
        let e = run_max_error(&bytes, &x, &want);
        println!("conv c{c} {h}x{w} -> m{m} k{k} s{s} pads {p:?} group {g}: max abs error {e:.2e}");
        assert!(e <= zoo::TOLERANCE * mag, "{e} > {}", zoo::TOLERANCE * mag);
    }
    // Poolings: (op, k, stride, pads, count_include_pad).
    let (c, h, w) = (3, 7, 8);
    for (op, k, s, p, cip) in [
        ("MaxPool", 3, 2, [1, 1, 1, 1], 0),
        ("MaxPool", 2, 2, [0, 0, 0, 0], 0),
        ("AveragePool", 3, 1, [1, 1, 1, 1], 1),
        ("AveragePool", 2, 2, [0, 0, 0, 0], 0),
    ] {
        let (oh, ow) = ((h + p[0] + p[2] - k) / s + 1, (w + p[1] + p[3] - k) / s + 1);
        let bytes = model(
            vec![node(
                "pool",
                op,
                &["x"],
                &["y"],
                vec![
                    ints_attr("kernel_shape", &[k as i64, k as i64]),
                    ints_attr("strides", &[s as i64, s as i64]),
                    ints_attr("pads", &p.map(|v| v as i64)),
                    zoo::int_attr("count_include_pad", cip),
                ],
            )],
            vec![],
            vec![ValueInfoProto::float(
                "x",
                &[1, c as i64, h as i64, w as i64],
            )],
            ValueInfoProto::float("y", &[1, c as i64, oh as i64, ow as i64]),
        );
        let x = zoo::rand(&mut rng, c * h * w, 2.0);
        let xd: Vec<f64> = x.iter().map(|&v| f64::from(f16::from_f32(v))).collect();
        let mut want = vec![0f64; c * oh * ow];
        for ch in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = if op == "MaxPool" {
                        f64::NEG_INFINITY
                    } else {
                        0.0
                    };
                    for dy in 0..k {
                        for dx in 0..k {
                            let (iy, ix) = (
                                (s * oy + dy) as isize - p[0] as isize,
                                (s * ox + dx) as isize - p[1] as isize,
                            );
                            let v = if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                if op == "MaxPool" {
                                    f64::NEG_INFINITY
                                } else {
                                    0.0
                                }
                            } else {
                                xd[(ch * h + iy as usize) * w + ix as usize]
                            };
                            acc = if op == "MaxPool" {
                                acc.max(v)
                            } else {
                                acc + v / (k * k) as f64
                            };
                        }
                    }
                    want[(ch * oh + oy) * ow + ox] = acc;
                }
            }
        }
        let e = run_max_error(&bytes, &x, &want);
        println!("{op} k{k} s{s} pads {p:?}: max abs error {e:.2e}");
        if op == "MaxPool" {
            assert_eq!(e, 0.0, "max pooling is exact");
        } else {
            assert!(e <= zoo::TOLERANCE * 2.0, "{e}");
        }
    }
}

/// Scratch sharing changes where intermediates live, never what the
/// program computes: every zoo model (two seeds) gives bit-identical
/// outputs with and without it on the engine model (scratch starts as
/// 0xA5 bytes, so a buffer read after another took its memory shows), and
/// both programs pass the kernel's validator.
#[test]
fn scratch_sharing_keeps_results_identical() {
    for seed in [29, 7] {
        for ex in zoo::all(seed) {
            let inputs = ex.input_values();
            let one = compile_with(&ex.onnx, Target::H13, false).unwrap();
            let shared = compile(&ex.onnx, Target::H13).unwrap();
            one.program.validate().unwrap();
            shared.program.validate().unwrap();
            let a = one.run_on_model(&inputs).unwrap();
            let b = shared.run_on_model(&inputs).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b), "{} (seed {seed})", ex.name);
        }
    }
}

/// The windowed models' scratch shrinks (each gathered window's memory is
/// taken by later layers'), never grows, and the program's scratch slot is
/// the shared size.
#[test]
fn scratch_sharing_shrinks_the_windowed_models() {
    for ex in zoo::all(29) {
        let c = compile(&ex.onnx, Target::H13).unwrap();
        let s = c.scratch;
        assert!(s.shared <= s.unshared, "{}: {s:?}", ex.name);
        let slot = c
            .program
            .tensors
            .iter()
            .find(|t| t.slot == SLOT_SCRATCH)
            .map(|t| t.buffer_size);
        assert_eq!(slot, Some(granule(s.shared)), "{}", ex.name);
        if ["small_cnn", "mobilenet_block", "mlp3_b4"].contains(&ex.name.as_str()) {
            // At most 3/4 of one-buffer-per-intermediate.
            assert!(4 * s.shared <= 3 * s.unshared, "{}: {s:?}", ex.name);
        }
    }
}

/// The sharing rule: a buffer takes another's memory only when every step
/// touching it depends, through reads of what earlier steps wrote, on
/// every step touching the other, not merely when it comes later in the
/// chain.
#[test]
fn scratch_sharing_follows_the_dependencies() {
    let g = Geom {
        c: 1,
        h: 1,
        w: 1,
        row: 64,
        plane: 64,
        bytes: 64,
    };
    let at = |slot: u32, offset: u32| Loc { slot, offset };
    let pe = |src: Loc, dst: Loc| Step::Pe(PeTask::one(src, dst, false), g);
    let dst_of = |s: &Step| match s {
        Step::Pe(t, _) => t.dst,
        Step::Ne(t, _, _) => t.dst,
    };
    let bufs = [(0, 64), (64, 64), (128, 64)];
    let (a, b, c) = (
        at(SLOT_SCRATCH, 0),
        at(SLOT_SCRATCH, 64),
        at(SLOT_SCRATCH, 128),
    );
    let input = at(SLOT_FIRST_INPUT, 0);
    // input -> A -> B -> C: C depends on both of A's steps and takes A's
    // memory.
    let mut chain = [pe(input, a), pe(a, b), pe(b, c)];
    assert_eq!(share_scratch(&mut chain, &bufs), 128);
    assert_eq!(dst_of(&chain[2]), a);
    // C written from the input: later in the chain than A's last read,
    // but depending on nothing, so it keeps its own memory.
    let mut independent = [pe(input, a), pe(a, b), pe(input, c)];
    assert_eq!(share_scratch(&mut independent, &bufs), 192);
    assert_eq!(dst_of(&independent[2]), c);
}

/// [`SUPPORTED_OPS`] is what the lowering accepts: a one-node model of
/// each listed op is never refused as outside the subset (it may be
/// refused for its missing operands), and ops outside it are.
#[test]
fn supported_ops_is_the_lowering() {
    let refused_as_unknown = |op: &str| {
        let bytes = model(
            vec![node("n", op, &["x"], &["y"], vec![])],
            vec![],
            vec![ValueInfoProto::float("x", &[2, 3])],
            ValueInfoProto::float("y", &[2, 3]),
        );
        matches!(compile(&bytes, Target::H13),
            Err(CompileError::Unsupported { reason, .. }) if reason.contains("is not in the supported subset"))
    };
    for op in SUPPORTED_OPS {
        assert!(!refused_as_unknown(op), "{op}");
    }
    for op in [
        "Softmax",
        "Tanh",
        "Transpose",
        "LayerNormalization",
        "Split",
    ] {
        assert!(refused_as_unknown(op) || op == "Tanh", "{op}");
    }
}
