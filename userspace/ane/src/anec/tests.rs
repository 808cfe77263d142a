// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Tests of the `.anec` parser and the HWX conversion.

use super::*;
use crate::hwx::testdata::{fixture, HwxBuilder, Rng, TensorSpec};

struct Facts {
    anec: &'static str,
    hwx: &'static str,
    size: u64,
    krn_size: u64,
    src: u32,
    dst: u32,
    tiles0: u32,
    dims: [usize; 4],
    strides: (u64, u64),
}

/// The three converted fixtures (SOURCES.md: the tinygrad HWX files run
/// through eiln's anecc).
const FACTS: &[Facts] = &[
    Facts {
        anec: "sum.anec",
        hwx: "tinygrad_sum.hwx",
        size: 0x4280,
        krn_size: 0x4000,
        src: 2,
        dst: 1,
        tiles0: 2,
        dims: [1, 64, 1, 1],
        strides: (0x40, 0x40),
    },
    Facts {
        anec: "relu.anec",
        hwx: "tinygrad_relu.hwx",
        size: 0x4280,
        krn_size: 0x4000,
        src: 1,
        dst: 1,
        tiles0: 2,
        dims: [1, 1, 1, 77],
        strides: (0xC0, 0xC0),
    },
    Facts {
        anec: "conv.anec",
        hwx: "tinygrad_conv.hwx",
        size: 0x340,
        krn_size: 0xC0,
        src: 1,
        dst: 1,
        tiles0: 1,
        dims: [1, 3, 1, 1],
        strides: (0x40, 0x40),
    },
];

#[test]
fn anec_fixtures_parse_with_their_facts() {
    for f in FACTS {
        let Some(bytes) = fixture(f.anec) else { return };
        let a = Anec::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.anec));
        let ctx = f.anec;
        let h = a.header();
        assert_eq!(bytes.len() as u64, 0x1000 + f.size, "{ctx}");
        assert_eq!(a.payload_offset(), PayloadOffset::Anecc, "{ctx}");
        assert_eq!(h.size, f.size, "{ctx}");
        assert_eq!(
            (h.td_size, h.td_count, h.tsk_size),
            (0x274, 1, 0x274),
            "{ctx}"
        );
        assert_eq!(h.krn_size, f.krn_size, "{ctx}");
        assert_eq!((h.src_count, h.dst_count), (f.src, f.dst), "{ctx}");
        assert_eq!(h.tiles[0], f.tiles0, "{ctx}");
        assert_eq!(h.tiles[1..4], [0, 0, 0], "{ctx}");
        let io = 4 + (f.src + f.dst) as usize;
        assert!(h.tiles[4..io].iter().all(|&t| t == 1), "{ctx}");
        assert!(h.tiles[io..].iter().all(|&t| t == 0), "{ctx}");
        // The weights start at round_up(tsk_size, 16) = 0x280.
        assert_eq!(a.weights().len() as u64, f.krn_size, "{ctx}");
        assert_eq!(a.payload().len() - a.weights().len(), 0x280, "{ctx}");
        assert_eq!(a.td_offsets(), [0], "{ctx}");
        assert_eq!(a.td(0).unwrap().len(), 0x274, "{ctx}");
        assert!(a.td(1).is_none(), "{ctx}");
        // Output first, then inputs, with the fixture's shape.
        assert_eq!(a.outputs().count(), f.dst as usize, "{ctx}");
        assert_eq!(a.inputs().count(), f.src as usize, "{ctx}");
        for (i, b) in a.buffers().iter().enumerate() {
            assert_eq!(b.slot, 4 + i, "{ctx}");
            let want = if i == 0 {
                Direction::Output
            } else {
                Direction::Input
            };
            assert_eq!(b.direction, want, "{ctx}");
            assert_eq!(b.shape.dims(), f.dims, "{ctx}");
            assert_eq!(b.bytes, 0x4000, "{ctx}");
            let g = h.nchw[b.slot];
            assert_eq!((g.plane_stride, g.row_stride), f.strides, "{ctx}");
        }
        assert_eq!(a.buffer(4).unwrap().direction, Direction::Output);
        assert_eq!(h.dst_slot(0), 4);
        assert_eq!(h.src_slot(0), 4 + f.dst as usize);
        // Writing it back gives the same bytes.
        assert_eq!(a.to_bytes(), bytes, "{ctx}");
    }
}

#[test]
fn anec_and_hwx_of_the_same_op_agree() {
    for f in FACTS {
        let (Some(anec_bytes), Some(hwx_bytes)) = (fixture(f.anec), fixture(f.hwx)) else {
            return;
        };
        let a = Anec::parse(&anec_bytes).unwrap();
        let x = Hwx::parse(&hwx_bytes).unwrap();
        let ctx = f.anec;
        // The payload is the HWX bytes from __text on.
        let start = x.td_file_offset();
        assert_eq!(
            a.payload(),
            &hwx_bytes[start..start + a.payload().len()],
            "{ctx}"
        );
        assert_eq!(a.task_stream(), x.task_stream(), "{ctx}");
        assert_eq!(a.weights(), x.weights(), "{ctx}");
        assert_eq!(a.td_offsets(), x.td_offsets().unwrap(), "{ctx}");
        let h = a.header();
        assert_eq!(
            (h.td_size, h.td_count, h.tsk_size, h.krn_size),
            (x.td_size(), x.td_count(), x.tsk_size(), x.krn_size()),
            "{ctx}"
        );
        // Every HWX tensor is in the same slot with the same shape and
        // buffer size.
        for t in x.tensors() {
            let b = a.buffer(t.slot).unwrap();
            assert_eq!(b.direction, t.direction, "{ctx} {}", t.name);
            assert_eq!(
                b.shape.dims(),
                t.dims.map(|d| d as usize),
                "{ctx} {}",
                t.name
            );
            assert_eq!(b.bytes, t.buffer_size, "{ctx} {}", t.name);
        }
        // And the conversion reproduces anecc's file byte for byte, except
        // where anecc orders the inputs by slot against the compiler's
        // declaration (sum: image in slot 6 is declared first): there the
        // converted descriptors read the two inputs' slots swapped, TD
        // header word 8 is the only difference, and the inputs keep their
        // declared positions (conversion_keeps_the_declared_input_order).
        let converted = Anec::from_hwx(&x).unwrap();
        let declared: Vec<usize> = x
            .tensors()
            .iter()
            .filter(|t| t.direction == Direction::Input)
            .map(|t| t.slot)
            .collect();
        if declared.is_sorted() {
            assert_eq!(converted, a, "{ctx}");
            assert_eq!(converted.to_bytes(), anec_bytes, "{ctx}");
        } else {
            assert_eq!(f.anec, "sum.anec");
            assert_eq!(converted.header(), a.header(), "{ctx}");
            let (c, o) = (converted.to_bytes(), &anec_bytes);
            let differ: Vec<usize> = (0..c.len()).filter(|&i| c[i] != o[i]).collect();
            let w8 = 0x1000 + 32..0x1000 + 36;
            assert!(
                !differ.is_empty() && differ.iter().all(|i| w8.contains(i)),
                "{ctx}: {differ:x?}"
            );
        }
    }
}

#[test]
fn other_hwx_fixtures_convert_or_refuse() {
    if let Some(b) = fixture("tinygrad_concat.hwx") {
        let a = Anec::from_hwx(&Hwx::parse(&b).unwrap()).unwrap();
        let h = a.header();
        assert_eq!((h.td_count, h.tsk_size, h.size), (2, 0x574, 0x580 + 0x4000));
        assert_eq!(a.td_offsets(), [0, 0x300]);
        // Output 16400 channels at slot 4, then the inputs as declared:
        // input_0 (16384) at 5, input_1 (16) at 6.
        assert_eq!(h.tiles[4..7], [65, 64, 1]);
        assert_eq!(a.buffer(5).unwrap().shape.c(), 16384);
        let back = Anec::parse(&a.to_bytes()).unwrap();
        assert_eq!(back, a);
    }
    if let Some(b) = fixture("tinygrad_gemm.hwx") {
        let a = Anec::from_hwx(&Hwx::parse(&b).unwrap()).unwrap();
        assert_eq!(a.header().size, 0x280 + 0x80000);
        assert_eq!(a.header().tiles[0], 33);
        assert_eq!(a.header().tiles[4..6], [2, 2]);
    }
    if let Some(b) = fixture("mul_zin541_macos12.hwx") {
        assert!(Anec::from_hwx(&Hwx::parse(&b).unwrap()).is_ok());
    }
    // The macOS 14 compiler writes the output through slot 6 and reads
    // slots 4 and 5: the conversion moves the tensors to the positional
    // slots and rewrites the descriptors to match.
    if let Some(b) = fixture("mul_zin764_macos14.hwx") {
        let x = Hwx::parse(&b).unwrap();
        let a = Anec::from_hwx(&x).unwrap();
        macos14_conversion_agrees(&x, &a);
    }
}

/// `a`, converted from `x` whose output follows its inputs, has the output
/// at slot 4 and the inputs after it, descriptors whose roles agree with
/// the header, and computes on the engine model what the HWX computes.
fn macos14_conversion_agrees(x: &Hwx, a: &Anec) {
    use crate::program::tests::run_model;
    use crate::program::ProgramFile;
    use half::f16;
    let h = a.header();
    assert_eq!((h.dst_count, h.src_count), (1, 2));
    let out = x
        .tensors()
        .iter()
        .find(|t| t.direction == Direction::Output)
        .unwrap();
    assert!(
        out.slot > 4,
        "the HWX under test must put the output after the inputs"
    );
    assert_eq!(a.buffer(4).unwrap().direction, Direction::Output);
    assert_eq!(
        a.buffer(4).unwrap().shape.dims(),
        out.dims.map(|d| d as usize)
    );
    // Only TD header words 8 and 9 (the slot fields) may differ.
    for (k, &o) in a.td_offsets().iter().enumerate() {
        let (ta, tx) = (&a.task_stream()[o..], &x.task_stream()[o..]);
        assert_ne!(
            ta[0x20..0x24],
            tx[0x20..0x24],
            "TD {k}: W8 was not rewritten"
        );
        assert_eq!(
            ta[0x28..h.td_size as usize],
            tx[0x28..h.td_size as usize],
            "TD {k}"
        );
        assert_eq!(ta[..0x20], tx[..0x20], "TD {k}");
    }
    let pa = ProgramFile::from_anec(std::path::Path::new("converted.anec"), a).unwrap();
    let px = ProgramFile::from_hwx(std::path::Path::new("orig.hwx"), x).unwrap();
    assert!(pa.notes.is_empty(), "{:?}", pa.notes);
    let ins: Vec<_> = px
        .tensors
        .iter()
        .filter(|t| t.direction == Direction::Input)
        .collect();
    let data: Vec<Vec<f16>> = (0..ins.len())
        .map(|k| {
            (0..ins[k].elements() as usize)
                .map(|i| f16::from_f32(((i * 5 + k * 11) % 13) as f32 - 6.0 + 0.5 * k as f32))
                .collect()
        })
        .collect();
    // HWX input k (declared order) is .anec input k.
    let hx = run_model(
        &px,
        &ins.iter()
            .zip(&data)
            .map(|(t, d)| (t.name.as_str(), d.clone()))
            .collect::<Vec<_>>(),
    );
    let names: Vec<String> = (0..ins.len()).map(|k| format!("input{k}")).collect();
    let ha = run_model(
        &pa,
        &names
            .iter()
            .zip(&data)
            .map(|(n, d)| (n.as_str(), d.clone()))
            .collect::<Vec<_>>(),
    );
    assert_eq!(hx[0].1, ha[0].1);
    assert!(hx[0].1.iter().all(|v| !v.is_nan()));
}

/// (d) The macOS 14 layout on a program built here: a subtraction-like
/// asymmetric op is not needed, the mul of the builder with its tensors
/// moved to the newer compilers' slots (inputs 4 and 5, output 6) is
/// converted and agrees with the HWX.
#[test]
fn output_after_inputs_converts() {
    let shape = Shape::new(1, 3, 2, 40).unwrap();
    let mut p = crate::builder::mul(&shape).unwrap();
    crate::anec::relocate_slots(&mut p.tsk, &[0], &[(5, 4), (6, 5), (4, 6)]);
    let b = HwxBuilder {
        tensors: vec![
            TensorSpec {
                name: "x",
                output: false,
                dims: [1, 3, 2, 40],
                slot: 4,
            },
            TensorSpec {
                name: "y",
                output: false,
                dims: [1, 3, 2, 40],
                slot: 5,
            },
            TensorSpec {
                name: "z",
                output: true,
                dims: [1, 3, 2, 40],
                slot: 6,
            },
        ],
        tsk: Some(p.tsk.clone()),
        ..HwxBuilder::h13_add()
    };
    let x = Hwx::parse(&b.build()).unwrap();
    let a = Anec::from_hwx(&x).unwrap();
    macos14_conversion_agrees(&x, &a);
    assert_eq!(Anec::parse(&a.to_bytes()).unwrap(), a);
}

#[test]
fn synthetic_conversion_round_trips() {
    let x = Hwx::parse(&HwxBuilder::h13_conv().build()).unwrap();
    let a = Anec::from_hwx(&x).unwrap();
    let h = a.header();
    assert_eq!((h.td_count, h.tsk_size, h.krn_size), (3, 0x874, 320));
    assert_eq!(h.size, 0x880 + 320);
    assert_eq!(
        h.nchw[4],
        Nchw {
            n: 1,
            c: 5,
            h: 2,
            w: 33,
            plane_stride: 256,
            row_stride: 128
        }
    );
    assert_eq!(a.weights(), x.weights());
    let bytes = a.to_bytes();
    assert_eq!(bytes.len(), 0x1000 + 0x880 + 320);
    assert_eq!(Anec::parse(&bytes).unwrap(), a);

    // The same program with the payload at 0x800 (libane since e585747).
    let mut v = h.encode();
    v.resize(0x800, 0);
    v.extend_from_slice(a.payload());
    let b = Anec::parse(&v).unwrap();
    assert_eq!(b.payload_offset(), PayloadOffset::Libane);
    assert_eq!(b.to_bytes(), v);

    // Another generation cannot be converted.
    let x = Hwx::parse(
        &HwxBuilder {
            subtype: 5,
            ..HwxBuilder::h13_add()
        }
        .build(),
    )
    .unwrap();
    assert!(matches!(
        Anec::from_hwx(&x),
        Err(ConvertError::UnsupportedArch {
            arch: AneArch::H14,
            cpusubtype: 5
        })
    ));
    // The add builder has inputs at 5, 6 and the output at 4: convertible.
    let a = Anec::from_hwx(&Hwx::parse(&HwxBuilder::h13_add().build()).unwrap()).unwrap();
    assert_eq!((a.header().src_count, a.header().dst_count), (2, 1));
    assert_eq!(a.header().krn_size, 0);
    assert!(a.weights().is_empty());
}

fn valid_file() -> Vec<u8> {
    let x = Hwx::parse(&HwxBuilder::h13_conv().build()).unwrap();
    Anec::from_hwx(&x).unwrap().to_bytes()
}

fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

fn edited(edit: impl FnOnce(&mut Vec<u8>)) -> Result<Anec, AnecError> {
    let mut f = valid_file();
    edit(&mut f);
    Anec::parse(&f)
}

fn is_field(r: &Result<Anec, AnecError>, name: &str, val: u64) -> bool {
    matches!(r, Err(AnecError::Field { field, value, .. }) if *field == name && *value == val)
}

#[test]
fn malformed_files() {
    let good = valid_file();
    let size = good.len() - 0x1000;
    // Truncations: inside the header, at its end, inside padding and payload.
    for len in [0, 1, 0x6A7] {
        assert_eq!(Anec::parse(&good[..len]), Err(AnecError::TooShort { len }));
    }
    for len in [0x6A8, 0x800, 0x1000, 0x1000 + 0x274, good.len() - 1] {
        assert_eq!(
            Anec::parse(&good[..len]),
            Err(AnecError::PayloadLength {
                size: size as u64,
                file_len: len
            }),
            "cut at {len:#x}"
        );
    }
    let mut long = good.clone();
    long.push(0);
    assert!(matches!(
        Anec::parse(&long),
        Err(AnecError::PayloadLength { .. })
    ));
    assert_eq!(
        edited(|f| f[0x900] = 7),
        Err(AnecError::NonZeroPadding {
            offset: 0x900,
            value: 7
        })
    );
    // size: zero, huge, inconsistent (file length adjusted to match).
    assert!(matches!(
        edited(|f| put64(f, 0, u64::MAX)),
        Err(AnecError::PayloadLength { .. })
    ));
    assert!(is_field(
        &edited(|f| {
            put64(f, 0, 0);
            f.truncate(0x1000);
        }),
        "size",
        0
    ));
    let r = edited(|f| {
        put64(f, 0, size as u64 + 16);
        f.extend_from_slice(&[0; 16]);
    });
    assert_eq!(
        r,
        Err(AnecError::SizeMismatch {
            size: size as u64 + 16,
            tsk_size: 0x874,
            krn_size: 320,
            expected: size as u128
        })
    );
    // td_size, td_count, tsk_size, krn_size.
    assert!(is_field(&edited(|f| put32(f, 8, 0x24)), "td_size", 0x24));
    assert!(is_field(&edited(|f| put32(f, 8, 0x276)), "td_size", 0x276));
    assert!(is_field(&edited(|f| put32(f, 8, 0x804)), "td_size", 0x804));
    assert!(is_field(
        &edited(|f| put32(f, 8, u32::MAX)),
        "td_size",
        u32::MAX as u64
    ));
    assert!(is_field(&edited(|f| put32(f, 12, 0)), "td_count", 0));
    assert_eq!(
        edited(|f| put32(f, 12, u32::MAX)),
        Err(AnecError::TdCountMismatch {
            declared: u32::MAX,
            found: 3
        })
    );
    assert!(is_field(
        &edited(|f| put64(f, 16, 0x100)),
        "tsk_size",
        0x100
    ));
    assert!(matches!(
        edited(|f| put64(f, 16, u64::MAX)),
        Err(AnecError::SizeMismatch {
            tsk_size: u64::MAX,
            ..
        })
    ));
    assert!(is_field(&edited(|f| put64(f, 24, 321)), "krn_size", 321));
    assert!(matches!(
        edited(|f| put64(f, 24, u64::MAX - 15)),
        Err(AnecError::SizeMismatch { .. })
    ));
    // A consistent but shorter task: the chain does not end there.
    let r = edited(|f| {
        put64(f, 16, 0x574);
        put64(f, 24, 320 + 0x300);
    });
    assert!(
        matches!(
            r,
            Err(AnecError::Chain(ChainError::TdOutOfBounds { index: 2, .. }))
        ),
        "{r:?}"
    );
    // A chain that ends early.
    assert_eq!(
        edited(|f| put32(f, 0x1000 + 0x300, 1 << 25)),
        Err(AnecError::TdCountMismatch {
            declared: 3,
            found: 2
        })
    );
    // Buffers.
    assert!(is_field(&edited(|f| put32(f, 0x24, 0)), "dst_count", 0));
    for (src, dst) in [(u32::MAX, 1), (1, u32::MAX), (27, 2)] {
        assert_eq!(
            edited(|f| {
                put32(f, 0x20, src);
                put32(f, 0x24, dst);
            }),
            Err(AnecError::TooManyBuffers {
                src_count: src,
                dst_count: dst
            })
        );
    }
    assert_eq!(
        edited(|f| put32(f, 0x28, 0)),
        Err(AnecError::CmdTilesTooSmall {
            tiles: 0,
            size: size as u64
        })
    );
    assert!(is_field(&edited(|f| put32(f, 0x28 + 4, 1)), "tiles[1]", 1));
    assert_eq!(
        edited(|f| put32(f, 0x28 + 4 * 5, 0)),
        Err(AnecError::MissingTile {
            slot: 5,
            role: "input"
        })
    );
    assert_eq!(
        edited(|f| put32(f, 0x28 + 4 * 31, 9)),
        Err(AnecError::UnexpectedTile {
            slot: 31,
            tiles: 9,
            dst_count: 1,
            src_count: 1
        })
    );
    // Scratch slots 2 and 3 may have buffers.
    assert!(edited(|f| put32(f, 0x28 + 4 * 3, 1)).is_ok());
    let nchw = |slot: usize, k: usize| 0xA8 + 48 * slot + 8 * k;
    assert!(matches!(
        edited(|f| put64(f, nchw(4, 1), 0)),
        Err(AnecError::Tensor {
            slot: 4,
            source: ShapeError::Zero {
                dim: crate::tensor::Dim::C
            }
        })
    ));
    assert!(matches!(
        edited(|f| put64(f, nchw(5, 3), u64::MAX)),
        Err(AnecError::Tensor {
            slot: 5,
            source: ShapeError::Overflow {
                dim: crate::tensor::Dim::W,
                ..
            }
        })
    ));
    assert_eq!(
        edited(|f| put64(f, nchw(4, 4), 0x200)),
        Err(AnecError::Stride {
            slot: 4,
            field: "plane_stride",
            found: 0x200,
            expected: 0x100
        })
    );
    assert!(matches!(
        edited(|f| put64(f, nchw(5, 5), 0x42)),
        Err(AnecError::Stride {
            slot: 5,
            field: "row_stride",
            ..
        })
    ));
    // A tensor larger than its buffer: C = 100 needs 100·256 bytes.
    assert_eq!(
        edited(|f| {
            put64(f, nchw(4, 1), 100);
        }),
        Err(AnecError::TileTooSmall {
            slot: 4,
            tiles: 1,
            needed: 0x8000
        })
    );
    let e = edited(|f| put32(f, 8, 0x276)).unwrap_err();
    assert_eq!(e.to_string(), "td_size = 0x276 is not a multiple of 4");
}

#[test]
fn new_checks_payload_length() {
    let a = Anec::parse(&valid_file()).unwrap();
    let mut p = a.payload().to_vec();
    p.pop();
    assert_eq!(
        Anec::new(a.header().clone(), p, PayloadOffset::Anecc),
        Err(AnecError::PayloadSize {
            size: 0x880 + 320,
            payload_len: 0x880 + 319
        })
    );
}

#[test]
fn random_mutations_never_panic() {
    let mut rng = Rng::new(0xA11E_C0DE);
    let mut seeds = vec![valid_file()];
    for name in ["sum.anec", "conv.anec"] {
        if let Some(b) = fixture(name) {
            seeds.push(b);
        }
    }
    let mut accepted = 0;
    for round in 0..4000 {
        let mut f = seeds[round % seeds.len()].clone();
        for _ in 0..1 + rng.index(3) {
            // Mostly the header fields.
            let at = if rng.index(4) != 0 {
                rng.index(0x200)
            } else {
                rng.index(f.len())
            };
            match rng.index(3) {
                0 => f[at] ^= 1 << rng.index(8),
                1 => {
                    let v = [0, 1, u32::MAX, rng.next_u64() as u32][rng.index(4)];
                    let at = at & !3;
                    if at + 4 <= f.len() {
                        f[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
                _ => f[at] = rng.next_u64() as u8,
            }
        }
        if rng.index(8) == 0 {
            let len = rng.index(f.len() + 1);
            f.truncate(len);
        }
        if let Ok(a) = Anec::parse(&f) {
            accepted += 1;
            assert_eq!(a.payload().len() as u64, a.header().size);
            assert_eq!(a.task_stream().len() as u64, a.header().tsk_size);
            assert_eq!(a.weights().len() as u64, a.header().krn_size);
            assert_eq!(a.td_offsets().len(), a.header().td_count as usize);
            assert_eq!(a.to_bytes(), f);
        }
    }
    assert!(accepted > 0);
    for _ in 0..2000 {
        let len = rng.index(0x1400);
        let f: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let _ = Anec::parse(&f);
    }
}

/// A converted program takes its positional inputs in the order the HWX
/// declared them (the order `run`, `predict` and every other positional
/// caller uses for the HWX), not in the order of the HWX's slots: input k
/// of the `.anec` is declared input k of the HWX, with its shape, and the
/// descriptors address it where they addressed that input. tinygrad's sum
/// and concat declare the input in slot 6 before the one in slot 5;
/// concat's inputs differ in shape and its output shows their order.
#[test]
fn conversion_keeps_the_declared_input_order() {
    use crate::hw::td::header::{RBASE0, RBASE1, RBE0, RBE1};
    use crate::program::tests::run_model;
    use crate::program::ProgramFile;
    use half::f16;
    let mut seen = 0;
    for name in [
        "tinygrad_sum.hwx",
        "tinygrad_concat.hwx",
        "mul_zin541_macos12.hwx",
        "mul_zin764_macos14.hwx",
    ] {
        let Some(b) = fixture(name) else { continue };
        seen += 1;
        let x = Hwx::parse(&b).unwrap();
        let a = Anec::from_hwx(&x).unwrap();
        let px = ProgramFile::from_hwx(std::path::Path::new(name), &x).unwrap();
        let pa = ProgramFile::from_anec(std::path::Path::new("converted.anec"), &a).unwrap();
        let inputs = |p: &ProgramFile| -> Vec<(String, usize, [usize; 4])> {
            p.tensors
                .iter()
                .filter(|t| t.direction == Direction::Input)
                .map(|t| (t.name.clone(), t.slot, t.dims))
                .collect()
        };
        let (ix, ia) = (inputs(&px), inputs(&pa));
        assert_eq!(ix.len(), ia.len(), "{name}");
        // Positional input k has declared input k's shape and slot
        // src_slot(k).
        for (k, (xi, ai)) in ix.iter().zip(&ia).enumerate() {
            assert_eq!(xi.2, ai.2, "{name}: input {k} ({}) shape", xi.0);
            assert_eq!(ai.1, a.header().src_slot(k), "{name}: input {k}");
        }
        // Every TD source field that read declared input k's HWX slot
        // reads the .anec's slot of input k.
        for &o in a.td_offsets() {
            let word = |s: &[u8]| u32::from_le_bytes(s[o + 32..o + 36].try_into().unwrap());
            let (wx, wa) = (word(x.task_stream()), word(a.task_stream()));
            for (base, en) in [(RBASE0, RBE0), (RBASE1, RBE1)] {
                if en.get(wx) == 0 {
                    continue;
                }
                if let Some(k) = ix.iter().position(|i| i.1 as u32 == base.get(wx)) {
                    assert_eq!(
                        base.get(wa) as usize,
                        a.header().src_slot(k),
                        "{name}: TD at {o:#x} reads declared input {k} ({})",
                        ix[k].0
                    );
                }
            }
        }
        // The same positional data gives the same result.
        let data: Vec<Vec<f16>> = ix
            .iter()
            .enumerate()
            .map(|(k, i)| {
                let n: usize = i.2.iter().product();
                (0..n)
                    .map(|e| f16::from_f32(((e * 7 + k * 3) % 11) as f32 - 5.0 + 0.25 * k as f32))
                    .collect()
            })
            .collect();
        let feed = |names: &[(String, usize, [usize; 4])]| -> Vec<(String, Vec<f16>)> {
            names
                .iter()
                .zip(&data)
                .map(|(i, d)| (i.0.clone(), d.clone()))
                .collect()
        };
        let (fx, fa) = (feed(&ix), feed(&ia));
        fn as_refs(f: &[(String, Vec<f16>)]) -> Vec<(&str, Vec<f16>)> {
            f.iter().map(|(n, d)| (n.as_str(), d.clone())).collect()
        }
        let (ox, oa) = (run_model(&px, &as_refs(&fx)), run_model(&pa, &as_refs(&fa)));
        assert_eq!(ox[0].1, oa[0].1, "{name}: outputs differ");
    }
    if seen == 0 {
        eprintln!("SKIPPED: no two-input fixture (../shared/fixtures absent)");
    }
}
