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
    // The loaded program names its tensors as the model does.
    for t in &c.io {
        assert!(p
            .tensors
            .iter()
            .any(|s| s.name == t.name && s.slot == t.slot as usize));
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
            let inputs: Vec<(&str, &[f32])> = ex
                .inputs
                .iter()
                .map(|(n, _, v)| (n.as_str(), v.as_slice()))
                .collect();
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
        ("Softmax", vec![], "table is not understood"),
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
            CompileError::Unsupported { node, op: o, reason } => {
                assert_eq!((node.as_str(), o.as_str()), ("nl", op));
                assert!(reason.contains(why), "{op}: {reason}");
            }
            other => panic!("{op}: {other:?}"),
        }
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
