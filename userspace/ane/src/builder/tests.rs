// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Tests of the program builder: every program validates with the
//! kernel's validator (and the slot directions it derives are the
//! builder's), matches the compiled fixtures of the same op and shape
//! field by field, runs on the engine model to the CPU reference's
//! results, and bad arguments are refused naming the field.

use super::*;
use crate::hw::engine::{Options, Overflow, Rounding as EngineRounding, WeightOrder};
use crate::hw::td::{Td, SLOT_KERNEL};
use crate::parity::{ExecError, Executor, ModelExecutor, Rng};
use crate::reference::{self, Rounding};

fn shape(n: usize, c: usize, h: usize, w: usize) -> Shape {
    Shape::new(n, c, h, w).unwrap()
}

fn h16(bits: u16) -> f16 {
    f16::from_bits(bits)
}

fn weights(rng: &mut Rng, n: usize) -> Vec<f16> {
    (0..n).map(|_| rng.f16_in(-5, 0, 16)).collect()
}

/// Elementwise shapes: the fixtures', several rows and batches, padded
/// rows, a large channel count.
fn elementwise_shapes() -> Vec<Shape> {
    vec![
        shape(1, 64, 1, 1),
        shape(1, 1, 1, 77),
        shape(2, 3, 5, 7),
        shape(1, 2, 40, 33),
        shape(3, 1, 1, 200),
        shape(1, 896, 1, 1),
    ]
}

/// One program of each kind, with varied shapes.
fn programs() -> Vec<(String, Program)> {
    let mut rng = Rng::new(42);
    let mut v = Vec::new();
    for s in elementwise_shapes() {
        v.push((format!("add {s}"), add(&s).unwrap()));
        v.push((format!("mul {s}"), mul(&s).unwrap()));
        v.push((format!("add_mul {s}"), add_mul(&s).unwrap()));
        v.push((format!("select {s}"), select(&s).unwrap()));
    }
    for (cin, cout, h, w) in [
        (3, 3, 1, 1),
        (16, 32, 2, 8),
        (5, 17, 3, 70),
        (512, 512, 1, 1),
        (1, 2048, 1, 1),
        (40, 1, 1, 1),
    ] {
        let wt = weights(&mut rng, cin * cout);
        v.push((
            format!("conv1x1 {cin}->{cout} {h}x{w}"),
            conv1x1(cin, cout, h, w, &wt).unwrap(),
        ));
    }
    for (b, i, o) in [(1, 256, 128), (32, 256, 128), (7, 33, 100)] {
        let wt = weights(&mut rng, i * o);
        v.push((format!("linear {b}x{i}x{o}"), linear(b, i, o, &wt).unwrap()));
    }
    v
}

#[test]
fn programs_validate_with_the_slot_directions_of_their_tensors() {
    for (name, p) in programs() {
        assert_eq!(p.td_size, 0x274, "{name}");
        assert_eq!(
            p.tsk_size(),
            u64::from(p.td_count - 1) * 0x300 + 0x274,
            "{name}"
        );
        for k in 0..p.td_count as usize {
            let td = &p.tsk[k * 0x300..k * 0x300 + 0x274];
            assert_eq!(
                u32::from_le_bytes(td[0x28..0x2C].try_into().unwrap()),
                0xF401_F800,
                "{name}: TD {k} stream magic"
            );
            // Every TD decodes on its own.
            Td::new(td, k as u32, (k * 0x300) as u32).decode().unwrap();
        }
        let s = p
            .validate()
            .unwrap_or_else(|e| panic!("{name}: rejected: {e}"));
        let mut used = s.used();
        used.remove(0);
        for t in &p.tensors {
            let slot = t.slot as u8;
            assert!(used.contains(slot), "{name}: {} unused", t.name);
            used.remove(slot);
            let derived = if s.inputs.contains(slot) {
                Direction::In
            } else if s.outputs.contains(slot) {
                Direction::Out
            } else if s.scratch().contains(slot) {
                Direction::Scratch
            } else {
                panic!("{name}: slot {slot} has no direction");
            };
            assert_eq!(derived, t.direction, "{name}: {}", t.name);
            let info = s.slot(slot).unwrap();
            assert!(
                info.min_size <= t.buffer_size,
                "{name}: {} needs {:#x}, bound {:#x}",
                t.name,
                info.min_size,
                t.buffer_size
            );
            assert_eq!(t.buffer_size % 0x4000, 0, "{name}");
            assert!(t.buffer_size >= t.shape.layout().buffer_size() as u64);
        }
        // Slot 1 (weights) is used exactly when there are weights, and
        // they cover every enabled coefficient channel.
        if p.weights.is_empty() {
            assert!(used.is_empty(), "{name}: stray slots {used:?}");
        } else {
            assert_eq!(used.iter().collect::<Vec<_>>(), [SLOT_KERNEL], "{name}");
            assert!(s.slot(SLOT_KERNEL).unwrap().min_size <= p.weights.len() as u64);
        }
        // The image: TDs, zeros to 16, weights.
        let img = p.image();
        assert_eq!(&img[..p.tsk.len()], &p.tsk[..]);
        assert_eq!(
            img.len() as u64,
            p.weights_offset() + p.weights.len() as u64
        );
        assert_eq!(p.weights_offset() % 64, 0, "{name}: weights 64-aligned");
    }
}

// ---------------------------------------------------------------------------
// Against the compiled fixtures

/// Header words and registers of TD 0 of two programs.
struct Diff {
    header: Vec<(usize, u32, u32)>,
    regs: Vec<(Reg, u32, u32)>,
}

/// W8 without its slot numbers: the enables and ENE are compared as
/// they are, the slot numbers by role.
const W8_SLOT_FIELDS: u32 = 0x1F | (0x1F << 6) | (0x1F << 12);

fn diff(fixture: &[u8], built: &[u8]) -> Diff {
    let a = Td::new(fixture, 0, 0);
    let b = Td::new(built, 0, 0);
    let (ia, ib) = (a.decode().unwrap(), b.decode().unwrap());
    let mut d = Diff {
        header: Vec::new(),
        regs: Vec::new(),
    };
    for w in 0..10 {
        let mask = if w == 8 { !W8_SLOT_FIELDS } else { u32::MAX };
        let (x, y) = (a.header().word(w), b.header().word(w));
        if x & mask != y & mask {
            d.header.push((w, x, y));
        }
    }
    for blk in Block::ALL {
        for i in 0..blk.words() {
            let r = Reg::new(blk, 4 * i);
            assert!(ia.is_written(r) && ib.is_written(r), "{r}");
            if ia.value(r) != ib.value(r) {
                d.regs.push((r, ia.value(r), ib.value(r)));
            }
        }
    }
    d
}

// The comparison with every compiled fixture is `oracle.rs`.

/// Facts of the chains that no single-TD fixture shows: links, TIDs,
/// LNID/EON, TBE on all but the last, the eiln chains' header words.
#[test]
fn chain_headers() {
    let p = select(&shape(1, 16, 1, 1)).unwrap();
    assert_eq!(p.td_count, 4);
    for k in 0..4u32 {
        let h = Td::new(&p.tsk[k as usize * 0x300..], k, 0).header();
        let last = k == 3;
        assert_eq!(h.tid(), k);
        assert_eq!(h.lnid(), k > 0);
        assert_eq!(h.eon(), last);
        assert_eq!(h.next_size(), if last { 0 } else { 0x9C });
        assert_eq!(h.next_pointer(), if last { 0 } else { (k + 1) * 0x300 });
        assert_eq!(h.tbase(), if last { None } else { Some(0) });
        assert_eq!(h.word(2), if last { 0x422 } else { 0x400 });
        assert_eq!(h.ene(), 0, "planar engine");
        assert!(h.src_loc() && h.dst_loc(), "memory to memory");
    }
    // Sources reading an intermediate carry DependencyMode 1.
    let img = Td::new(&p.tsk[3 * 0x300..], 3, 0).decode().unwrap();
    assert_eq!(img.value(tile_src::DMA_CONFIG), 0x7_3881);
    assert_eq!(img.value(tile_src::SRC1_DMA_CONFIG), 0x7_3880);
    let img = Td::new(&p.tsk[..0x274], 0, 0).decode().unwrap();
    assert_eq!(img.value(tile_src::DMA_CONFIG), 0x3_3881);
    assert_eq!(
        img.value(tile_dst::DMA_CONFIG),
        0x400_03C1,
        "writes scratch"
    );
}

// ---------------------------------------------------------------------------
// On the engine model

/// Binary16 values of every class: zeros, subnormals, the normal range
/// edges, infinities, NaNs, values near 1 (ties).
const EDGES: [u16; 22] = [
    0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x3C01, 0x3BFF,
    0x1000, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x3800, 0x4200,
];

fn random_bits(rng: &mut Rng, n: usize, nan: bool) -> Vec<f16> {
    (0..n)
        .map(|_| loop {
            let v = if rng.below(4) == 0 {
                EDGES[rng.below(EDGES.len() as u64) as usize]
            } else {
                rng.next_u64() as u16
            };
            let v = h16(v);
            if nan || !v.is_nan() {
                break v;
            }
        })
        .collect()
}

fn run(p: &Program, ins: &[(&str, &[f16])], opts: Options) -> Result<Vec<f16>, ExecError> {
    let args: Vec<(&TensorSlot, &[f16])> = ins
        .iter()
        .map(|(n, d)| (p.tensor(n).unwrap(), *d))
        .collect();
    let mut ex = ModelExecutor {
        options: opts,
        ..Default::default()
    };
    Ok(ex.run(p, &args)?.remove(0))
}

fn modes() -> [(Rounding, Options); 2] {
    [
        (Rounding::NearestEven, Options::DEFAULT),
        (
            Rounding::NearestTiesAway,
            Options {
                rounding: EngineRounding::NearestTiesAway,
                ..Options::DEFAULT
            },
        ),
    ]
}

fn assert_bits(what: &str, got: &[f16], want: &[f16]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{what}: element {i}: got {g} ({:#06x}), want {w} ({:#06x})",
            g.to_bits(),
            w.to_bits()
        );
    }
}

/// Add, mul and add-mul on values of every class, NaN included, in both
/// rounding modes: bit-exact.
#[test]
fn elementwise_bit_exact_on_the_model() {
    let mut rng = Rng::new(7);
    let mut ties = 0usize;
    for s in elementwise_shapes() {
        let n = s.elements();
        let (pa, pm, pam) = (add(&s).unwrap(), mul(&s).unwrap(), add_mul(&s).unwrap());
        for round in 0..4 {
            let a = random_bits(&mut rng, n, true);
            let b = random_bits(&mut rng, n, true);
            let c = random_bits(&mut rng, n, true);
            let (r, o) = modes()[round % 2];
            let ins = [("a", &a[..]), ("b", &b[..]), ("c", &c[..])];
            let sum = reference::add(&a, &b, r).unwrap();
            assert_bits(&format!("add {s}"), &run(&pa, &ins[..2], o).unwrap(), &sum);
            let prod = reference::mul(&a, &b, r).unwrap();
            assert_bits(&format!("mul {s}"), &run(&pm, &ins[..2], o).unwrap(), &prod);
            let am = reference::mul(&sum, &c, r).unwrap();
            assert_bits(&format!("add_mul {s}"), &run(&pam, &ins, o).unwrap(), &am);
            // Count the ties the data contains: the modes disagree there.
            let other = reference::add(&a, &b, Rounding::NearestTiesAway).unwrap();
            let rne = reference::add(&a, &b, Rounding::NearestEven).unwrap();
            ties += rne.iter().zip(&other).filter(|(x, y)| x != y).count();
        }
    }
    assert!(ties > 50, "only {ties} rounding ties exercised");
    // The explicit tie 1 + 2^-11 and an overflow.
    let s = shape(1, 2, 1, 1);
    let p = add(&s).unwrap();
    let a = [h16(0x3C00), h16(0x7BFF)];
    let b = [h16(0x1000), h16(0x7BFF)];
    let out = run(&p, &[("a", &a), ("b", &b)], Options::DEFAULT).unwrap();
    assert_eq!([out[0].to_bits(), out[1].to_bits()], [0x3C00, 0x7C00]);
}

/// Select on every non-NaN class for a and b, cond in {+0, -0, 1}:
/// bit-exact (signed zeros and infinities included).
#[test]
fn select_bit_exact_on_the_model() {
    let mut rng = Rng::new(11);
    for s in elementwise_shapes() {
        let n = s.elements();
        let p = select(&s).unwrap();
        for (_, o) in modes() {
            for overflow in [Overflow::Infinity, Overflow::Saturate] {
                let cond: Vec<f16> = (0..n)
                    .map(|_| [f16::ZERO, f16::NEG_ZERO, f16::ONE][rng.below(3) as usize])
                    .collect();
                let a = random_bits(&mut rng, n, false);
                let b = random_bits(&mut rng, n, false);
                let got = run(
                    &p,
                    &[("cond", &cond), ("a", &a), ("b", &b)],
                    Options { overflow, ..o },
                )
                .unwrap();
                let want = reference::select(&cond, &a, &b).unwrap();
                assert_bits(&format!("select {s}"), &got, &want);
            }
        }
    }
    // The cases the multiply-based chain gets wrong.
    let s = shape(1, 4, 1, 1);
    let p = select(&s).unwrap();
    let cond = [f16::ONE, f16::ZERO, f16::ONE, f16::ZERO];
    let a = [f16::NEG_ZERO, f16::ONE, f16::INFINITY, f16::ONE];
    let b = [f16::ONE, f16::NEG_ZERO, f16::ONE, f16::NEG_INFINITY];
    let got = run(
        &p,
        &[("cond", &cond), ("a", &a), ("b", &b)],
        Options::DEFAULT,
    )
    .unwrap();
    assert_bits("select edges", &got, &[a[0], b[1], a[2], b[3]]);
}

/// The most ULPs the engine model may differ from the reference on
/// accumulations (the parity bound); the model is expected to be exact.
const CONV_BOUND: u32 = 2;

/// 1×1 convolution and linear on random data and on every class of
/// value (subnormal products, overflow to ∞, ∞ · 0 = NaN): within 2 ulp
/// of the reference (in practice 0), both rounding modes.
#[test]
fn conv_and_linear_on_the_model() {
    let mut rng = Rng::new(23);
    let mut worst = 0;
    for (cin, cout, h, w) in [(3, 3, 1, 1), (16, 32, 2, 8), (5, 17, 3, 70), (64, 1, 1, 1)] {
        let xs = shape(1, cin, h, w);
        for round in 0..6 {
            let (r, o) = modes()[round % 2];
            let (x, wt) = if round < 2 {
                (
                    (0..xs.elements()).map(|_| rng.f16_in(-4, 3, 16)).collect(),
                    weights(&mut rng, cin * cout),
                )
            } else {
                (
                    random_bits(&mut rng, xs.elements(), round >= 4),
                    random_bits(&mut rng, cin * cout, round >= 4),
                )
            };
            let p = conv1x1(cin, cout, h, w, &wt).unwrap();
            let got = run(&p, &[("x", &x)], o).unwrap();
            let (_, want) = reference::conv1x1(&x, &xs, &wt, cout, None, r).unwrap();
            let st = reference::compare(&want, &got, CONV_BOUND).unwrap();
            assert!(st.passed(), "conv {cin}->{cout} {h}x{w}: {st:?}");
            worst = worst.max(st.max_ulp);
        }
    }
    for (batch, i, o) in [(1, 256, 128), (32, 256, 128), (7, 33, 100)] {
        let x: Vec<f16> = (0..batch * i).map(|_| rng.f16_in(-3, 2, 16)).collect();
        let wt = weights(&mut rng, i * o);
        let p = linear(batch, i, o, &wt).unwrap();
        let xn = linear_input_to_nchw(&x, batch, i).unwrap();
        let got = run(&p, &[("x", &xn)], Options::DEFAULT).unwrap();
        let got = linear_output_from_nchw(&got, batch, o).unwrap();
        let want = reference::linear(&x, batch, i, &wt, o, None, Rounding::NearestEven).unwrap();
        let st = reference::compare(&want, &got, CONV_BOUND).unwrap();
        assert!(st.passed(), "linear {batch}x{i}x{o}: {st:?}");
        worst = worst.max(st.max_ulp);
    }
    println!("conv/linear: max {worst} ulp from the reference (bound {CONV_BOUND})");
    assert_eq!(worst, 0, "the model accumulates exactly like the reference");
}

/// The weight placement matters: with the model's other placement, a
/// convolution that uses several rows per coefficient channel comes out
/// wrong, so the test above does check the layout.
#[test]
fn weight_layout_is_what_the_model_reads() {
    let mut rng = Rng::new(5);
    let (cin, cout) = (8, 40); // OCGSize 2: 4 rows per channel, 10 channels
    let k = KernelLayout::new(cin, cout).unwrap();
    assert_eq!(
        (k.ocg_log, k.channels, k.row_bytes, k.chunk_bytes),
        (2, 10, 64, 256)
    );
    assert_eq!(KernelLayout::new(512, 512).unwrap().ocg_log, 5);
    assert_eq!(KernelLayout::new(3, 3).unwrap().ocg_log, 0);
    assert_eq!(KernelLayout::new(3, 16).unwrap().ocg_log, 0);
    assert_eq!(KernelLayout::new(3, 17).unwrap().ocg_log, 1);
    assert_eq!(KernelLayout::new(3, 2048).unwrap().ocg_log, 7);
    let wt = weights(&mut rng, cin * cout);
    let x: Vec<f16> = (0..cin).map(|_| rng.f16_in(-2, 2, 0)).collect();
    let p = conv1x1(cin, cout, 1, 1, &wt).unwrap();
    let xs = shape(1, cin, 1, 1);
    let (_, want) = reference::conv1x1(&x, &xs, &wt, cout, None, Rounding::NearestEven).unwrap();
    let good = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
    assert_bits("blocked", &good, &want);
    let other = Options {
        weight_order: WeightOrder::Interleaved,
        ..Options::DEFAULT
    };
    let bad = run(&p, &[("x", &x)], other).unwrap();
    assert_ne!(bad, want);
}

// ---------------------------------------------------------------------------
// Bad arguments

#[test]
fn bad_arguments_name_the_field() {
    let too = |e: BuildError, f: &str| match e {
        BuildError::TooLarge { field, .. } => assert_eq!(field, f, "{e}"),
        other => panic!("{f}: {other:?}"),
    };
    let zero = |e: BuildError, f: &str| match e {
        BuildError::Zero { field } => assert_eq!(field, f, "{e}"),
        other => panic!("{f}: {other:?}"),
    };
    // Elementwise: the register widths and the 4 GiB extent.
    too(add(&shape(1, 0x2_0000, 1, 1)).unwrap_err(), "shape N·C");
    too(mul(&shape(2, 0x1_0000, 1, 1)).unwrap_err(), "shape N·C");
    too(add(&shape(1, 1, 0x8000, 1)).unwrap_err(), "shape H");
    too(select(&shape(1, 1, 1, 0x8000)).unwrap_err(), "shape W");
    too(
        add(&shape(1, 0x1_FFFF, 1, 0x7FFF)).unwrap_err(),
        "shape (tiled bytes)",
    );
    too(
        select(&shape(1, 0x8000, 1, 0x7FF0)).unwrap_err(),
        "shape (scratch bytes)",
    );
    assert!(add(&shape(1, 0x8000, 1, 0x7FF0)).is_ok());

    // Convolution.
    let w = vec![f16::ONE; 6];
    zero(conv1x1(0, 3, 1, 1, &w).unwrap_err(), "cin");
    zero(conv1x1(2, 0, 1, 1, &w).unwrap_err(), "cout");
    zero(conv1x1(2, 3, 0, 1, &w).unwrap_err(), "h");
    zero(conv1x1(2, 3, 1, 0, &w).unwrap_err(), "w");
    too(conv1x1(2, 3, 1, 0x8000, &w).unwrap_err(), "w");
    too(conv1x1(2, 3, 0x8000, 1, &w).unwrap_err(), "h");
    too(conv1x1(2, 2049, 1, 1, &w).unwrap_err(), "cout");
    too(conv1x1(0x2_0000, 1, 1, 1, &w).unwrap_err(), "cin");
    let e = conv1x1(2, 3, 1, 1, &w[..5]).unwrap_err();
    assert_eq!(
        e,
        BuildError::Length {
            field: "weights",
            expected: 6,
            found: 5,
            shape: "out × in"
        }
    );
    assert_eq!(
        e.to_string(),
        "weights holds 5 values, 6 expected (out × in)"
    );

    // Linear.
    zero(linear(0, 2, 3, &w).unwrap_err(), "batch");
    zero(linear(1, 0, 3, &w).unwrap_err(), "in_features");
    zero(linear(1, 2, 0, &w).unwrap_err(), "out_features");
    too(linear(0x8000, 2, 3, &w).unwrap_err(), "batch");
    too(linear(1, 2, 4096, &w).unwrap_err(), "out_features");
    assert!(matches!(
        linear(1, 2, 3, &w[..4]).unwrap_err(),
        BuildError::Length {
            field: "weights",
            ..
        }
    ));
    let msg = linear(0x8000, 2, 3, &w).unwrap_err().to_string();
    assert_eq!(msg, "batch = 32768 exceeds the engine's limit of 32767");
}

#[test]
fn linear_layout_helpers() {
    let x: Vec<f16> = (0..6).map(|i| f16::from_f32(i as f32)).collect();
    // [2][3] -> [3][2]
    let t = linear_input_to_nchw(&x, 2, 3).unwrap();
    let want: Vec<f16> = [0., 3., 1., 4., 2., 5.]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    assert_eq!(t, want);
    assert_eq!(linear_output_from_nchw(&t, 2, 3).unwrap(), x);
    assert!(linear_input_to_nchw(&x, 4, 2).is_none());
}

/// ReLU after a linear layer and a convolution: MACCfg NonlinearMode 1 and
/// nothing else differs from the plain program; on the model the result is
/// `relu(reference)` bit for bit (negative sums and `−0` become `+0`), on
/// random data and on values of every class but NaN.
#[test]
fn relu_activation_on_the_model() {
    let mut rng = Rng::new(77);
    // The register: only NonlinearMode changes.
    let wt = weights(&mut rng, 33 * 100);
    let plain = linear(7, 33, 100, &wt).unwrap();
    let relu = linear_with(7, 33, 100, &wt, Activation::Relu).unwrap();
    assert_eq!(relu.validate().is_ok(), plain.validate().is_ok());
    let a = Td::new(&plain.tsk, 0, 0).decode().unwrap();
    let b = Td::new(&relu.tsk, 0, 0).decode().unwrap();
    assert_eq!(a.value(ne::MAC_CFG), 0x10_1C00);
    assert_eq!(b.value(ne::MAC_CFG), 0x11_1C00);
    let d = diff(&plain.tsk, &relu.tsk);
    assert_eq!(d.regs.len(), 1, "{:?}", d.regs);
    assert_eq!(plain.weights, relu.weights);
    assert_eq!(plain.tensors, relu.tensors);
    assert_eq!(
        linear_with(7, 33, 100, &wt, Activation::None).unwrap(),
        plain
    );

    let mut negatives = 0;
    for (batch, i, o, classes) in [(1, 256, 128, false), (7, 33, 100, false), (5, 16, 20, true)] {
        let (x, wt): (Vec<f16>, Vec<f16>) = if classes {
            (
                random_bits(&mut rng, batch * i, false),
                random_bits(&mut rng, i * o, false),
            )
        } else {
            (
                (0..batch * i).map(|_| rng.f16_in(-3, 2, 16)).collect(),
                weights(&mut rng, i * o),
            )
        };
        let p = linear_with(batch, i, o, &wt, Activation::Relu).unwrap();
        let xn = linear_input_to_nchw(&x, batch, i).unwrap();
        let got = run(&p, &[("x", &xn)], Options::DEFAULT).unwrap();
        let got = linear_output_from_nchw(&got, batch, o).unwrap();
        let lin = reference::linear(&x, batch, i, &wt, o, None, Rounding::NearestEven).unwrap();
        negatives += lin.iter().filter(|v| v.is_sign_negative()).count();
        let want: Vec<f16> = reference::relu(&lin);
        if classes {
            // ∞ − ∞ sums are NaN on both sides; compare by ULP there.
            let st = reference::compare(&want, &got, 0).unwrap();
            assert!(st.passed(), "linear+relu {batch}x{i}x{o}: {st:?}");
        } else {
            assert_bits(&format!("linear+relu {batch}x{i}x{o}"), &got, &want);
        }
        assert!(got.iter().all(|v| !v.is_sign_negative() || v.is_nan()));
    }
    assert!(negatives > 100, "the data exercises the negative side");

    // A convolution with ReLU over several rows.
    let xs = shape(1, 16, 2, 8);
    let x: Vec<f16> = (0..xs.elements()).map(|_| rng.f16_in(-3, 2, 16)).collect();
    let wt = weights(&mut rng, 16 * 32);
    let p = conv1x1_with(16, 32, 2, 8, &wt, Activation::Relu).unwrap();
    let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
    let (_, lin) = reference::conv1x1(&x, &xs, &wt, 32, None, Rounding::NearestEven).unwrap();
    assert_bits("conv+relu", &got, &reference::relu(&lin));
}

/// Standalone ReLU (the NE pass-through): validates, and on the model is
/// `reference::relu` bit for bit on every class of value, NaN included.
#[test]
fn relu_on_the_model() {
    let mut rng = Rng::new(31);
    for s in elementwise_shapes() {
        let p = relu(&s).unwrap();
        p.validate().unwrap();
        let x = random_bits(&mut rng, s.elements(), true);
        let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
        let want = reference::relu(&x);
        let st = reference::compare(&want, &got, 0).unwrap();
        assert!(st.passed(), "relu {s}: {st:?}");
    }
}

/// The sigmoid table through the engine model: within the table's
/// interpolation error of the correctly rounded logistic function, exact
/// at the samples (x = k/2 in [−8, 8]), 0 and 1 beyond the clamps, NaN
/// kept.
#[test]
fn sigmoid_on_the_model() {
    let s = shape(1, 3, 4, 40);
    let p = sigmoid(&s).unwrap();
    p.validate().unwrap();
    let mut rng = Rng::new(12);
    let mut x: Vec<f16> = (0..s.elements())
        .map(|_| f16::from_f32((rng.below(4001) as f32 - 2000.0) / 100.0))
        .collect();
    for (i, k) in (-16..=16).enumerate() {
        x[i] = f16::from_f32(k as f32 / 2.0);
    }
    x[40] = f16::NAN;
    x[41] = f16::INFINITY;
    x[42] = f16::NEG_INFINITY;
    let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
    let want = reference::sigmoid(&x, Rounding::NearestEven);
    let mut worst = 0f32;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if x[i].is_nan() {
            assert!(g.is_nan());
            continue;
        }
        let e = (f32::from(*g) - f32::from(*w)).abs();
        if i < 33 {
            assert_eq!(g.to_bits(), w.to_bits(), "sample x = {}", x[i]);
        }
        assert!(e <= 0.0035, "x = {}: {g} vs {w}", x[i]);
        worst = worst.max(e);
    }
    assert_eq!(got[41], f16::ONE);
    assert_eq!(got[42], f16::ZERO);
    println!("sigmoid: max abs error {worst:.2e} from the correctly rounded logistic");
    assert!(worst > 0.0, "the data exercises the interpolation");
}

/// The GELU table through the engine model, on every finite fp16 input:
/// within [`GELU_TABLE_ERROR`] of the correctly rounded `x · Φ(x)`, NaN
/// kept, `+∞` to `+∞` and `−∞` to 0.
#[test]
fn gelu_on_the_model() {
    let s = shape(1, 64, 1, 1024);
    let p = gelu(&s).unwrap();
    p.validate().unwrap();
    let x: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
    let want = reference::gelu(&x, Rounding::NearestEven);
    let (mut worst, mut at) = (0f64, 0f64);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if x[i].is_nan() {
            assert!(g.is_nan(), "NaN in, {g} out");
            continue;
        }
        if x[i].is_infinite() {
            let inf = if x[i] > f16::ZERO {
                f16::INFINITY
            } else {
                f16::ZERO
            };
            assert_eq!(*g, inf, "x = {}", x[i]);
            continue;
        }
        let e = (f64::from(*g) - f64::from(*w)).abs();
        if e > worst {
            (worst, at) = (e, f64::from(x[i]));
        }
    }
    println!("gelu: max abs error {worst:.2e} (at x = {at}) from the correctly rounded x·Φ(x)");
    assert!(worst <= GELU_TABLE_ERROR, "{worst} at x = {at}");
    assert!(worst > 0.0, "the data exercises the interpolation");
}

/// Clip and leaky ReLU (tables without samples) through the engine model
/// are exact on every fp16 input: `min(max(x, lo), hi)` and `x > 0 ? x :
/// fp16(slope · x)`, NaN kept.
#[test]
fn clip_and_leaky_relu_on_the_model() {
    let s = shape(1, 64, 1, 1024);
    let x: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let h = |v: f32| f16::from_f32(v);
    for (lo, hi) in [
        (h(0.0), h(6.0)),
        (h(-1.0), h(1.0)),
        (h(-0.5), f16::INFINITY),
    ] {
        let p = clip(&s, lo.to_bits(), hi.to_bits()).unwrap();
        p.validate().unwrap();
        let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
        for (v, g) in x.iter().zip(&got) {
            let want = if v.is_nan() {
                f16::NAN
            } else if *v < lo {
                lo
            } else if *v > hi {
                hi
            } else {
                *v
            };
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "clip({lo}, {hi}) of {v}: {g}, expected {want}"
            );
        }
    }
    for slope in [h(0.01), h(11.0 / 48.0), h(-2.0)] {
        let p = leaky_relu(&s, slope.to_bits()).unwrap();
        p.validate().unwrap();
        let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
        for (v, g) in x.iter().zip(&got) {
            let want = if v.is_nan() || *v > f16::ZERO {
                *v
            } else {
                h(f32::from(*v) * f32::from(slope))
            };
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "leaky_relu({slope}) of {v}: {g}, expected {want}"
            );
        }
    }
}

/// Concat copies both inputs bit for bit into their channel ranges, on
/// every class of value, NaN payloads aside.
#[test]
fn concat_on_the_model() {
    let mut rng = Rng::new(4);
    for (ca, cb, h, w) in [(3, 5, 2, 7), (16384, 16, 1, 1), (1, 1, 40, 33)] {
        let (sa, sb) = (shape(1, ca, h, w), shape(1, cb, h, w));
        let p = concat(&sa, &sb).unwrap();
        p.validate().unwrap();
        assert_eq!(p.td_count, 2);
        let a = random_bits(&mut rng, sa.elements(), false);
        let b = random_bits(&mut rng, sb.elements(), false);
        let got = run(&p, &[("a", &a), ("b", &b)], Options::DEFAULT).unwrap();
        let want: Vec<f16> = a.iter().chain(&b).copied().collect();
        assert_bits(&format!("concat {sa}+{sb}"), &got, &want);
    }
    assert!(concat(&shape(1, 2, 3, 4), &shape(1, 2, 3, 5)).is_err());
}

/// Sub is exact (`fp16(a − b)`, signed zeros included, as `a + (−b)`);
/// mean is `fp16((a + b) / 2)` within 1 ulp (the binary32 sum may round
/// once before the final rounding when the exponents are far apart).
#[test]
fn sub_and_mean_on_the_model() {
    let mut rng = Rng::new(21);
    for s in elementwise_shapes() {
        let n = s.elements();
        let a = random_bits(&mut rng, n, false);
        let b = random_bits(&mut rng, n, false);
        let p = sub(&s).unwrap();
        p.validate().unwrap();
        let got = run(&p, &[("a", &a), ("b", &b)], Options::DEFAULT).unwrap();
        let neg: Vec<f16> = b.iter().map(|v| -*v).collect();
        let want = reference::add(&a, &neg, Rounding::NearestEven).unwrap();
        let st = reference::compare(&want, &got, 0).unwrap();
        assert!(st.passed(), "sub {s}: {st:?}");
        let p = mean(&s).unwrap();
        p.validate().unwrap();
        let got = run(&p, &[("a", &a), ("b", &b)], Options::DEFAULT).unwrap();
        let want: Vec<f16> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| f16::from_f64((f64::from(*x) + f64::from(*y)) / 2.0))
            .collect();
        let st = reference::compare(&want, &got, 1).unwrap();
        assert!(st.passed(), "mean {s}: {st:?}");
    }
}

/// Square is `fp16(x · x)` and abs `|x|`, both exact, on every class of
/// value.
#[test]
fn square_and_abs_on_the_model() {
    let mut rng = Rng::new(33);
    for s in elementwise_shapes() {
        let x = random_bits(&mut rng, s.elements(), true);
        let p = square(&s).unwrap();
        p.validate().unwrap();
        assert_eq!(p.inputs().count(), 1);
        let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
        let want = reference::mul(&x, &x, Rounding::NearestEven).unwrap();
        let st = reference::compare(&want, &got, 0).unwrap();
        assert!(st.passed(), "square {s}: {st:?}");
        let p = abs(&s).unwrap();
        p.validate().unwrap();
        let got = run(&p, &[("x", &x)], Options::DEFAULT).unwrap();
        let want: Vec<f16> = x
            .iter()
            .map(|v| {
                if v.is_nan() {
                    *v
                } else {
                    f16::from_bits(v.to_bits() & 0x7FFF)
                }
            })
            .collect();
        let st = reference::compare(&want, &got, 0).unwrap();
        assert!(st.passed(), "abs {s}: {st:?}");
    }
}

/// The Parakeet-size stream: 13,701 TDs over 458,018,816 bytes in all,
/// accepted by the kernel's validator, its coefficient reads spread from
/// the first byte of slot 1 to within 64 bytes of its end and never past
/// it (the private copy's check refuses one byte less).
#[test]
fn conv1x1_stream_of_a_real_model() {
    let (count, total) = (13_701u32, 458_018_816u64);
    let probe = conv1x1_stream(128, 128, 1, 32, count, 1 << 20).unwrap();
    let weights = total - probe.weights_offset();
    let p = conv1x1_stream(128, 128, 1, 32, count, weights).unwrap();
    assert_eq!(p.td_count, count);
    assert_eq!(p.weights_offset() + p.weights.len() as u64, total);
    let summary = p.validate().unwrap();
    summary.check_private(p.tsk_size(), weights).unwrap();
    let used = summary.slot(SLOT_KERNEL).unwrap().min_size;
    assert!(
        used <= weights && used + 64 > weights,
        "{used} of {weights}"
    );
    assert!(summary.check_private(p.tsk_size(), used - 1).is_err());
    // One TD: the whole of its coefficients, at 0.
    let one = conv1x1_stream(16, 16, 1, 32, 1, 16 * 64).unwrap();
    one.validate().unwrap();
    assert!(matches!(
        conv1x1_stream(16, 16, 1, 32, 2, 16 * 64 - 1),
        Err(BuildError::Mismatch {
            field: "weights_bytes",
            ..
        })
    ));
    assert!(matches!(
        conv1x1_stream(16, 16, 1, 32, 0, 1 << 20),
        Err(BuildError::Zero { field: "count" })
    ));
}
