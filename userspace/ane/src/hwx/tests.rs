// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Tests of the HWX parser: the real fixtures, synthetic files, malformed
//! variants and random mutations.

use super::testdata::{fixture, read_tar_gz, HwxBuilder, Rng};
use super::*;
use crate::reference::{self, Rounding};
use half::f16;

struct TensorFact {
    direction: Direction,
    name: &'static str,
    dims: [u32; 4],
    slot: usize,
    buffer_size: u64,
}

struct Facts {
    file: &'static str,
    len: usize,
    compiler: &'static str,
    region_cmd: u32,
    td_count: u32,
    tsk_size: u64,
    krn_size: u64,
    text_nreloc: u32,
    tensors: &'static [TensorFact],
}

const IN: Direction = Direction::Input;
const OUT: Direction = Direction::Output;

const fn t(
    direction: Direction,
    name: &'static str,
    dims: [u32; 4],
    slot: usize,
    buffer_size: u64,
) -> TensorFact {
    TensorFact {
        direction,
        name,
        dims,
        slot,
        buffer_size,
    }
}

/// What `shared/fixtures/SOURCES.md` and `td.md` §3 say about each file.
const FACTS: &[Facts] = &[
    Facts {
        file: "tinygrad_sum.hwx",
        len: 49152,
        compiler: "4.2.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0x4000,
        text_nreloc: 0,
        tensors: &[
            t(IN, "image", [1, 64, 1, 1], 6, 0x4000),
            t(IN, "image2", [1, 64, 1, 1], 5, 0x4000),
            t(OUT, "probs@output", [1, 64, 1, 1], 4, 0x4000),
        ],
    },
    Facts {
        file: "mul_zin541_macos12.hwx",
        len: 49152,
        compiler: "5.4.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0x4000,
        text_nreloc: 0,
        tensors: &[
            t(IN, "image", [1, 64, 1, 1], 5, 0x4000),
            t(IN, "image2", [1, 64, 1, 1], 6, 0x4000),
            t(OUT, "probs@output", [1, 64, 1, 1], 4, 0x4000),
        ],
    },
    Facts {
        file: "mul_zin764_macos14.hwx",
        len: 49152,
        compiler: "7.6.4",
        region_cmd: LC_ANE_MAPPED_REGION,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0x4000,
        text_nreloc: 0,
        // The v7.6.4 compiler puts the inputs first and the output last.
        tensors: &[
            t(IN, "image", [1, 64, 1, 1], 4, 0x4000),
            t(IN, "image2", [1, 64, 1, 1], 5, 0x4000),
            t(OUT, "probs@output", [1, 64, 1, 1], 6, 0x4000),
        ],
    },
    Facts {
        file: "tinygrad_relu.hwx",
        len: 49152,
        compiler: "4.2.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0x4000,
        text_nreloc: 0,
        tensors: &[
            t(IN, "image", [1, 1, 1, 77], 5, 0x4000),
            t(OUT, "probs@output", [1, 1, 1, 77], 4, 0x4000),
        ],
    },
    Facts {
        file: "tinygrad_sigmoid.hwx",
        len: 32768,
        compiler: "4.2.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0x80,
        text_nreloc: 1,
        tensors: &[
            t(IN, "image", [1, 1, 1, 77], 5, 0x4000),
            t(OUT, "probs@output", [1, 1, 1, 77], 4, 0x4000),
        ],
    },
    Facts {
        file: "tinygrad_conv.hwx",
        len: 32768,
        compiler: "4.2.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0xC0,
        text_nreloc: 3,
        tensors: &[
            t(IN, "image", [1, 3, 1, 1], 5, 0x4000),
            t(OUT, "probs@output", [1, 3, 1, 1], 4, 0x4000),
        ],
    },
    Facts {
        file: "tinygrad_conv3_w3.hwx",
        len: 32768,
        compiler: "4.2.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0xC0,
        text_nreloc: 3,
        tensors: &[
            t(IN, "image", [1, 3, 1, 1], 5, 0x4000),
            t(OUT, "probs@output", [1, 3, 1, 1], 4, 0x4000),
        ],
    },
    Facts {
        file: "tinygrad_gemm.hwx",
        len: 557056,
        compiler: "4.2.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 1,
        tsk_size: 0x274,
        krn_size: 0x80000,
        text_nreloc: 16,
        tensors: &[
            t(IN, "image", [1, 512, 1, 1], 5, 0x8000),
            t(OUT, "probs@output", [1, 512, 1, 1], 4, 0x8000),
        ],
    },
    Facts {
        file: "tinygrad_concat.hwx",
        len: 49152,
        compiler: "4.2.1",
        region_cmd: LC_IDFVMLIB,
        td_count: 2,
        tsk_size: 0x574,
        krn_size: 0x4000,
        text_nreloc: 0,
        tensors: &[
            t(IN, "input_0", [1, 16384, 1, 1], 6, 0x100000),
            t(IN, "input_1", [1, 16, 1, 1], 5, 0x4000),
            t(OUT, "output@output", [1, 16400, 1, 1], 4, 0x104000),
        ],
    },
];

fn le32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

#[test]
fn every_hwx_fixture_parses_with_its_facts() {
    for f in FACTS {
        let Some(bytes) = fixture(f.file) else { return };
        let hwx = Hwx::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.file));
        let ctx = f.file;
        assert_eq!(bytes.len(), f.len, "{ctx}");
        let h = hwx.header();
        assert_eq!(
            (h.magic, h.cputype, h.cpusubtype, h.filetype, h.flags),
            (MAGIC, 0x80, 4, 2, 0x20_0000),
            "{ctx}"
        );
        assert_eq!(hwx.arch(), AneArch::H13, "{ctx}");
        assert_eq!(hwx.arch().generation(), Some(Generation::H13), "{ctx}");
        assert_eq!(hwx.compiler_version(), Some(f.compiler), "{ctx}");

        // The task stream: at file offset 0x4000, address 0x30000000.
        let text = hwx.text_section();
        assert_eq!(hwx.td_file_offset(), 0x4000, "{ctx}");
        assert_eq!(
            (text.offset, text.addr, text.align),
            (0x4000, 0x3000_0000, 14),
            "{ctx}"
        );
        assert_eq!(text.nreloc, f.text_nreloc, "{ctx}");
        assert_eq!(
            text.flags,
            if f.text_nreloc > 0 { 0x128 } else { 0x28 },
            "{ctx}"
        );
        assert_eq!(hwx.td_size(), H13_TD_SIZE, "{ctx}");
        assert_eq!(hwx.td_count(), f.td_count, "{ctx}");
        assert_eq!(hwx.tsk_size(), f.tsk_size, "{ctx}");
        assert_eq!(
            hwx.tsk_size(),
            u64::from(f.td_count - 1) * 0x300 + 0x274,
            "{ctx}: TD stride 0x300"
        );
        let offsets: Vec<usize> = (0..f.td_count as usize).map(|i| i * 0x300).collect();
        assert_eq!(hwx.td_offsets(), Some(&offsets[..]), "{ctx}");
        assert_eq!(
            hwx.task_stream(),
            &bytes[0x4000..0x4000 + f.tsk_size as usize]
        );
        for i in 0..f.td_count as usize {
            let td = hwx.td(i).unwrap();
            assert_eq!(td.len(), 0x274);
            // Every H13 TD's first stream is KernelDMASrc (td.md §1.1).
            assert_eq!(le32_at(td, 0x28), 0xF401_F800, "{ctx} TD {i}");
        }
        assert!(hwx.td(f.td_count as usize).is_none());

        // The constants follow at round_up(tsk_size, 64) (v4.2.1 rule).
        let konst = hwx.const_section().unwrap();
        let rel = f.tsk_size.div_ceil(64) * 64;
        assert_eq!(u64::from(konst.offset), 0x4000 + rel, "{ctx}");
        assert_eq!(konst.addr, 0x3000_0000 + rel, "{ctx}");
        assert_eq!(
            (konst.size, konst.align, konst.flags),
            (f.krn_size, 6, 0x26),
            "{ctx}"
        );
        assert_eq!(hwx.krn_size(), f.krn_size, "{ctx}");
        assert_eq!(hwx.weights().len() as u64, f.krn_size, "{ctx}");

        // Program state: slot 0 = __text, slot 1 = __const.
        let p = hwx.program();
        assert_eq!(p.bar_slots[0], text.addr, "{ctx}");
        assert_eq!(p.bar_slots[1], konst.addr, "{ctx}");
        assert_eq!(p.td0_addr, text.addr, "{ctx}");

        // Regions and tensors.
        assert_eq!(hwx.mapped_regions().len(), f.tensors.len(), "{ctx}");
        assert!(
            hwx.mapped_regions().iter().all(|r| r.cmd == f.region_cmd),
            "{ctx}"
        );
        assert_eq!(hwx.tensors().len(), f.tensors.len(), "{ctx}");
        for (got, want) in hwx.tensors().iter().zip(f.tensors) {
            assert_eq!(got.direction, want.direction, "{ctx} {}", want.name);
            assert_eq!(got.name, want.name, "{ctx}");
            assert_eq!(got.dims, want.dims, "{ctx} {}", want.name);
            assert_eq!(got.slot, want.slot, "{ctx} {}", want.name);
            assert_eq!(got.buffer_size, want.buffer_size, "{ctx} {}", want.name);
            assert_eq!(got.dtype, DTYPE_FLOAT16, "{ctx}");
            let [n, c, h, w] = want.dims.map(|d| d as usize);
            let layout = crate::tensor::Shape::new(n, c, h, w).unwrap().layout();
            assert_eq!(
                got.strides,
                [
                    layout.batch_stride() as u64,
                    layout.plane_stride() as u64,
                    layout.row_stride() as u64,
                    2
                ],
                "{ctx} {}",
                want.name
            );
            assert_eq!(got.size, layout.tiled_bytes() as u64, "{ctx}");
            assert_eq!(got.buffer_size, layout.buffer_size() as u64, "{ctx}");
            // The buffer segment: no file data, vmsize = buffer size.
            let seg = hwx
                .segments()
                .iter()
                .find(|s| s.vmaddr == got.vmaddr)
                .unwrap();
            assert_eq!((seg.name.as_str(), seg.filesize), ("__FVMLIB", 0), "{ctx}");
            let prot = if got.direction == IN { 1 } else { 2 };
            assert_eq!((seg.maxprot, seg.initprot), (prot, prot), "{ctx}");
        }
        // The TD's base registers index exactly these slots (td.md §1.3):
        // W8 WBase = the output slot; RBase0/1 the input slots.
        let w8 = le32_at(hwx.task_stream(), 0x20);
        let out = hwx.tensors().iter().find(|t| t.direction == OUT).unwrap();
        if f.td_count == 1 {
            assert_eq!((w8 >> 12) & 31, out.slot as u32, "{ctx}: WBase");
            let mut reads = vec![(w8 & 31) as usize];
            if w8 & (1 << 11) != 0 {
                reads.push(((w8 >> 6) & 31) as usize);
            }
            let mut ins: Vec<usize> = hwx
                .tensors()
                .iter()
                .filter(|t| t.direction == IN)
                .map(|t| t.slot)
                .collect();
            reads.sort();
            ins.sort();
            assert_eq!(reads, ins, "{ctx}: RBase");
        }
    }
}

#[test]
fn weights_of_conv_and_gemm_fixtures() {
    for (file, w) in [
        ("tinygrad_conv.hwx", 2.0f32),
        ("tinygrad_conv3_w3.hwx", 3.0),
    ] {
        let Some(bytes) = fixture(file) else { return };
        let hwx = Hwx::parse(&bytes).unwrap();
        // Three 64-byte blocks, one per output channel: Cin = 3 fp16
        // weights, then zero padding (td.md §2.2).
        let k = hwx.weights();
        assert_eq!(k.len(), 3 * 64);
        for block in k.chunks_exact(64) {
            for i in 0..3 {
                let v = f16::from_bits(u16::from_le_bytes([block[2 * i], block[2 * i + 1]]));
                assert_eq!(f32::from(v), w, "{file}");
            }
            assert!(block[6..].iter().all(|&b| b == 0), "{file}");
        }
        // The reference 1x1 convolution with these weights and input 3.0:
        // 3 * w * 3 (the conv.ane transcript reports 18 for w = 2).
        let weights: Vec<f16> = k
            .chunks_exact(64)
            .flat_map(|b| {
                (0..3).map(move |i| f16::from_bits(u16::from_le_bytes([b[2 * i], b[2 * i + 1]])))
            })
            .collect();
        let shape = crate::tensor::Shape::new(1, 3, 1, 1).unwrap();
        let (_, y) = reference::conv1x1(
            &[f16::from_f32(3.0); 3],
            &shape,
            &weights,
            3,
            None,
            Rounding::NearestEven,
        )
        .unwrap();
        assert!(y.iter().all(|&v| f32::from(v) == 9.0 * w), "{file}");
    }
    let Some(bytes) = fixture("tinygrad_gemm.hwx") else {
        return;
    };
    let hwx = Hwx::parse(&bytes).unwrap();
    // 512x512 fp16, all zero in the compiled file.
    assert_eq!(hwx.weights().len(), 512 * 512 * 2);
    assert!(hwx.weights().iter().all(|&b| b == 0));
}

#[test]
fn sigmoid_lut_samples_are_rne_sigmoid() {
    let Some(bytes) = fixture("tinygrad_sigmoid.hwx") else {
        return;
    };
    let hwx = Hwx::parse(&bytes).unwrap();
    let k = hwx.weights();
    assert_eq!(k.len(), 0x80);
    let half = |i: usize| f16::from_bits(u16::from_le_bytes([k[2 * i], k[2 * i + 1]]));
    // Input clamp and output range (td.md §2.4).
    assert_eq!(f32::from(half(0)), -9.9375);
    assert_eq!(f32::from(half(1)), 8.3203125);
    assert_eq!((f32::from(half(2)), f32::from(half(3))), (0.0, 1.0));
    // 33 samples at x = -8 .. 8 step 0.5 are the correctly rounded (RNE)
    // sigmoid, which the reference computes independently.
    for i in 0..33 {
        let x = f16::from_f32(-8.0 + 0.5 * i as f32);
        let want = reference::scalar::sigmoid(x, Rounding::NearestEven);
        assert_eq!(
            half(4 + i).to_bits(),
            want.to_bits(),
            "sample {i} (x = {x})"
        );
    }
    // The sample at x = 3 is what the hardware returned (0x3B9F).
    assert_eq!(half(26).to_bits(), 0x3B9F);
}

#[test]
fn eiln_kernel_payloads_chain() {
    // The raw payloads of eiln's kernels archive: TDs + weights, no
    // header. SOURCES.md and td.md §5 say 40; the archive holds 36 (7
    // binary, 18 unary, 11 activation), which is also what td.md's own
    // list names. Their chains must be well formed, with 0x300 strides, and
    // the weights a whole number of 16-byte units after
    // round_up(tsk_size, 16).
    let Some(archive) = fixture("eiln_anec_kernels.tar.gz") else {
        return;
    };
    let files = read_tar_gz(&archive);
    assert_eq!(files.len(), 36);
    let mut multi = 0;
    for (name, payload) in &files {
        let offsets =
            td_chain(payload, H13_TD_SIZE as usize).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!((1..=8).contains(&offsets.len()), "{name}");
        for (i, &o) in offsets.iter().enumerate() {
            assert_eq!(o, i * 0x300, "{name}");
            assert_eq!(le32_at(payload, o + 0x28), 0xF401_F800, "{name}");
        }
        if offsets.len() > 1 {
            multi += 1;
        }
        let tsk = (offsets.len() - 1) * 0x300 + 0x274;
        let krn = payload.len() - tsk.div_ceil(16) * 16;
        assert_eq!(krn % 16, 0, "{name}");
        assert!(krn > 0, "{name}");
    }
    assert!(multi >= 10, "the archive has many multi-TD kernels");
    let norm = files
        .iter()
        .find(|(n, _)| n.ends_with("unary/norm.bin"))
        .unwrap();
    assert_eq!(td_chain(&norm.1, 0x274).unwrap().len(), 8);
}

#[test]
fn synthetic_files_parse() {
    let b = HwxBuilder::h13_add();
    let hwx = Hwx::parse(&b.build()).unwrap();
    assert_eq!(hwx.td_file_offset(), 0x4000);
    assert_eq!(
        (hwx.td_count(), hwx.td_size(), hwx.tsk_size()),
        (1, 0x274, 0x274)
    );
    assert!(hwx.const_section().is_none());
    assert!(hwx.weights().is_empty());
    assert_eq!(hwx.compiler_version(), Some("7.6.4"));
    let slots: Vec<usize> = hwx.tensors().iter().map(|t| t.slot).collect();
    assert_eq!(slots, [5, 6, 4]);
    assert_eq!(hwx.tensors()[2].name, "probs@output");
    assert_eq!(hwx.tensors()[2].region_name, "probs");

    let b = HwxBuilder::h13_conv();
    let hwx = Hwx::parse(&b.build()).unwrap();
    assert_eq!(hwx.td_offsets(), Some(&[0, 0x300, 0x600][..]));
    assert_eq!(hwx.tsk_size(), 0x874);
    assert_eq!(hwx.weights(), &b.weights[..]);
    assert_eq!(hwx.const_section().unwrap().offset, 0x4880);
    assert_eq!(hwx.tensors()[0].strides, [768, 256, 128, 2]);
    assert!(hwx.mapped_regions().iter().all(|r| r.cmd == LC_IDFVMLIB));

    // The macOS 26 layout: buffers first, __text at file offset 0x8000,
    // compact 0x1F8-byte TD.
    let b = HwxBuilder {
        text_fileoff: 0x8000,
        text_vmaddr: 0x3000_C000,
        buffers_vmaddr: Some(0x3000_0000),
        td_size: H13_COMPACT_TD_SIZE,
        ..HwxBuilder::h13_add()
    };
    let hwx = Hwx::parse(&b.build()).unwrap();
    assert_eq!(hwx.td_file_offset(), 0x8000);
    assert_eq!((hwx.td_size(), hwx.tsk_size()), (0x1F8, 0x1F8));
    assert_eq!(hwx.tensors()[0].vmaddr, 0x3000_0000);

    // Another generation: parsed, but the H13 chain is not followed.
    let b = HwxBuilder {
        subtype: 5,
        ..HwxBuilder::h13_add()
    };
    let hwx = Hwx::parse(&b.build()).unwrap();
    assert_eq!(hwx.arch(), AneArch::H14);
    assert_eq!(hwx.td_offsets(), None);
    assert_eq!(hwx.td(0), None);
    assert_eq!(AneArch::from_cpusubtype(3), AneArch::Unknown(3));
    assert_eq!(AneArch::H17.generation(), None);
}

#[test]
fn td_chain_errors() {
    let b = HwxBuilder::h13_conv();
    let stream = b.task_stream();
    assert_eq!(td_chain(&stream, 0x274).unwrap(), [0, 0x300, 0x600]);
    assert_eq!(
        td_chain(&stream, 0x24),
        Err(ChainError::TdSizeTooSmall { td_size: 0x24 })
    );
    assert_eq!(
        td_chain(&stream[..0x873], 0x274),
        Err(ChainError::TdOutOfBounds {
            index: 2,
            offset: 0x600,
            td_size: 0x274,
            len: 0x873
        })
    );
    let set = |s: &mut Vec<u8>, o: usize, v: u32| s[o..o + 4].copy_from_slice(&v.to_le_bytes());
    let mut s = stream.clone();
    set(&mut s, 0x31C, 0);
    assert_eq!(
        td_chain(&s, 0x274),
        Err(ChainError::Unterminated {
            index: 1,
            offset: 0x300
        })
    );
    let mut s = stream.clone();
    set(&mut s, 0x31C, 0x300);
    assert_eq!(
        td_chain(&s, 0x274),
        Err(ChainError::NextPointerBackwards {
            index: 1,
            offset: 0x300,
            next: 0x300
        })
    );
    set(&mut s, 0x31C, 0x502); // before the end of TD 1 and unaligned
    assert!(matches!(
        td_chain(&s, 0x274),
        Err(ChainError::NextPointerUnaligned { next: 0x502, .. })
    ));
    set(&mut s, 0x31C, 0x400); // overlaps TD 1
    assert!(matches!(
        td_chain(&s, 0x274),
        Err(ChainError::NextPointerBackwards { next: 0x400, .. })
    ));
    set(&mut s, 0x31C, 0xFFFF_FFFC);
    assert!(matches!(
        td_chain(&s, 0x274),
        Err(ChainError::TdOutOfBounds { index: 2, .. })
    ));
    // A TD right after its predecessor (no padding) is accepted.
    set(&mut s, 0x31C, 0x574);
    let mut s2 = s.clone();
    s2.resize(0x574 + 0x274, 0);
    set(&mut s2, 0x574, 1 << 25);
    assert_eq!(td_chain(&s2, 0x274).unwrap(), [0, 0x300, 0x574]);
}

/// Builds a valid synthetic file, applies `edit`, and parses the result.
fn parse_edited(b: &HwxBuilder, edit: impl FnOnce(&mut Vec<u8>, &Hwx)) -> Result<Hwx, HwxError> {
    let mut bytes = b.build();
    let valid = Hwx::parse(&bytes).unwrap();
    edit(&mut bytes, &valid);
    Hwx::parse(&bytes)
}

fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// File offset of the first load command with code `cmd` (and, for
/// threads, flavor).
fn cmd_offset(h: &Hwx, cmd: u32, flavor: Option<u32>) -> usize {
    h.load_commands()
        .iter()
        .find(|c| c.cmd == cmd && flavor.is_none_or(|f| le32_at(h.bytes(), c.offset + 8) == f))
        .map(|c| c.offset)
        .unwrap()
}

/// File offset of the `__TEXT` segment command and of its first section.
fn text_cmd(h: &Hwx) -> (usize, usize) {
    let o = h
        .load_commands()
        .iter()
        .filter(|c| c.cmd == LC_SEGMENT_64)
        .map(|c| c.offset)
        .find(|&o| &h.bytes()[o + 8..o + 14] == b"__TEXT")
        .unwrap();
    (o, o + 72)
}

#[test]
fn malformed_headers_and_commands() {
    let b = HwxBuilder::h13_conv();
    assert_eq!(Hwx::parse(&[]), Err(HwxError::TooShort { len: 0 }));
    assert_eq!(
        parse_edited(&b, |f, _| put32(f, 0, 0xFEED_FACF)),
        Err(HwxError::BadMagic { found: 0xFEED_FACF })
    );
    let e = parse_edited(&b, |f, _| put32(f, 0, 0xCEFA_EFBE)).unwrap_err();
    assert_eq!(e.to_string(), "magic is 0xcefaefbe, expected 0xbeefface");
    assert!(matches!(
        parse_edited(&b, |f, _| put32(f, 20, 0xFFFF_FFF0)),
        Err(HwxError::CommandsOutOfFile {
            sizeofcmds: 0xFFFF_FFF0,
            ..
        })
    ));
    assert!(matches!(
        parse_edited(&b, |f, _| put32(f, 16, u32::MAX)),
        Err(HwxError::TooManyCommands {
            ncmds: u32::MAX,
            ..
        })
    ));
    // One command fewer than the commands present: sizes disagree.
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, 16, h.header().ncmds - 1)),
        Err(HwxError::CommandsSizeMismatch { .. })
    ));
    // One more: the extra command has no room.
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, 16, h.header().ncmds + 1)),
        Err(HwxError::BadCommandSize { problem, .. }) if problem.contains("cannot start")
    ));
    assert!(matches!(
        parse_edited(&b, |f, _| put32(f, 32 + 4, 4)),
        Err(HwxError::BadCommandSize {
            index: 0,
            cmdsize: 4,
            offset: 32,
            ..
        })
    ));
    assert!(matches!(
        parse_edited(&b, |f, _| put32(f, 32 + 4, 0x4C)),
        Err(HwxError::BadCommandSize {
            problem: "is not a multiple of 8",
            ..
        })
    ));
    assert!(matches!(
        parse_edited(&b, |f, _| put32(f, 32 + 4, 0x10_0000)),
        Err(HwxError::BadCommandSize {
            problem: "runs past the end of sizeofcmds",
            ..
        })
    ));
}

#[test]
fn malformed_segments_and_sections() {
    let b = HwxBuilder::h13_conv();
    // nsects that does not match cmdsize, including a huge one.
    for nsects in [3u32, 1, u32::MAX] {
        let e = parse_edited(&b, |f, h| put32(f, text_cmd(h).0 + 64, nsects)).unwrap_err();
        assert!(
            matches!(&e, HwxError::SegmentSize { segment, nsects: n, cmdsize: 0xE8, .. } if segment == "__TEXT" && *n == nsects),
            "{e}"
        );
    }
    // Segment file range beyond the file, or overflowing.
    for (fileoff, filesize) in [(0x4000, 0x10_0000), (u64::MAX - 1, 2), (0x4000, u64::MAX)] {
        let e = parse_edited(&b, |f, h| {
            put64(f, text_cmd(h).0 + 40, fileoff);
            put64(f, text_cmd(h).0 + 48, filesize);
        })
        .unwrap_err();
        assert!(
            matches!(e, HwxError::SegmentOutOfFile { fileoff: o, filesize: s, file_len: 0x8000, .. } if o == fileoff && s == filesize),
            "{e}"
        );
    }
    assert!(matches!(
        parse_edited(&b, |f, h| put64(f, text_cmd(h).0 + 32, u64::MAX)),
        Err(HwxError::SegmentVmOverflow { .. })
    ));
    // Section file data outside its segment: offset + size overflow, past
    // the segment, before it.
    let (_, text) = {
        let h = Hwx::parse(&b.build()).unwrap();
        text_cmd(&h)
    };
    for (offset, size) in [(0x4000u32, u64::MAX), (0x7F00, 0x200), (0x3000, 0x874)] {
        let e = parse_edited(&b, |f, _| {
            put32(f, text + 48, offset);
            put64(f, text + 40, size);
            // Keep the vm range plausible so the file check is reached.
            put64(f, text + 32, 0x3000_0000);
        })
        .unwrap_err();
        let expected_vm = size > 0x4000;
        assert!(
            if expected_vm {
                matches!(e, HwxError::SectionOutOfVm { .. })
            } else {
                matches!(&e, HwxError::SectionOutOfSegment { section, offset: o, .. } if section == "__TEXT,__text" && *o == offset)
            },
            "{e}"
        );
    }
    // Section address outside the segment.
    assert!(matches!(
        parse_edited(&b, |f, _| put64(f, text + 32, 0x2FFF_FFC0)),
        Err(HwxError::SectionOutOfVm {
            addr: 0x2FFF_FFC0,
            ..
        })
    ));
    assert!(matches!(
        parse_edited(&b, |f, _| put32(f, text + 52, 64)),
        Err(HwxError::SectionAlign { align: 64, .. })
    ));
    let e = parse_edited(&b, |f, _| put32(f, text + 52, 15)).unwrap_err();
    assert_eq!(
        e,
        HwxError::SectionMisaligned {
            section: "__TEXT,__text".into(),
            offset: 0x4000,
            align: 15
        }
    );
    assert_eq!(
        e.to_string(),
        "section __TEXT,__text: offset 0x4000 is not a multiple of 2^15"
    );
    // Renaming __text: missing; renaming __const to __text: duplicate.
    assert_eq!(
        parse_edited(&b, |f, _| f[text + 2] = b'X'),
        Err(HwxError::MissingSection {
            section: "__TEXT,__text"
        })
    );
    assert_eq!(
        parse_edited(&b, |f, _| f[text + 80..text + 88]
            .copy_from_slice(b"__text\0\0")),
        Err(HwxError::DuplicateSection {
            section: "__TEXT,__text"
        })
    );
    // Zero-fill or empty task stream.
    assert_eq!(
        parse_edited(&b, |f, _| put32(f, text + 64, 0x1)),
        Err(HwxError::EmptyTaskStream { size: 0x874 })
    );
    assert_eq!(
        parse_edited(&b, |f, _| put64(f, text + 40, 0)),
        Err(HwxError::EmptyTaskStream { size: 0 })
    );
}

#[test]
fn malformed_program_state_and_tensors() {
    let b = HwxBuilder::h13_conv();
    let prog = |h: &Hwx| cmd_offset(h, LC_THREAD, Some(THREAD_PROGRAM));
    let word = |h: &Hwx, i: usize| prog(h) + 16 + 4 * i;
    // No program state (flavor changed), two of them.
    assert_eq!(
        parse_edited(&b, |f, h| put32(f, prog(h) + 8, 7)),
        Err(HwxError::MissingProgramState)
    );
    assert!(matches!(
        parse_edited(&b, |f, h| {
            let t = cmd_offset(h, LC_THREAD, Some(THREAD_TENSOR));
            put32(f, t + 8, 1);
        }),
        // The tensor descriptor has only 30 words.
        Err(HwxError::ThreadTooShort {
            flavor: 1,
            count: 30,
            need: 516,
            ..
        })
    ));
    // Count beyond the command, huge count.
    for count in [600u32, 0x4000_0000, u32::MAX] {
        assert!(matches!(
            parse_edited(&b, |f, h| put32(f, prog(h) + 12, count)),
            Err(HwxError::ThreadCount { flavor: 1, count: c, .. }) if c == count
        ));
    }
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, prog(h) + 12, 515)),
        Err(HwxError::ThreadTooShort {
            count: 515,
            need: 516,
            ..
        })
    ));
    assert_eq!(
        parse_edited(&b, |f, h| put32(f, word(h, 512), 0x3000_0040)),
        Err(HwxError::Td0Address {
            state: 0x3000_0040,
            text: 0x3000_0000
        })
    );
    // TD size: too small, larger than the task stream, absurd.
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, word(h, 514), 8)),
        Err(HwxError::BadTdSize {
            td_size: 0x24,
            word: 8,
            ..
        })
    ));
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, word(h, 514), 0x21D)),
        Err(HwxError::BadTdSize { td_size: 0x878, .. })
    ));
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, word(h, 514), u32::MAX)),
        Err(HwxError::BadTdSize {
            problem: "does not fit in 32 bits",
            ..
        })
    ));
    // A different plausible TD size breaks the chain's end.
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, word(h, 514), 0x7D)),
        Err(HwxError::TaskSizeMismatch {
            tsk_size: 0x874,
            end: 0x7F8
        })
    ));
    assert_eq!(
        parse_edited(&b, |f, h| put32(f, word(h, 515), 0)),
        Err(HwxError::ZeroTdCount)
    );
    assert_eq!(
        parse_edited(&b, |f, h| put32(f, word(h, 515), 2)),
        Err(HwxError::TdCountMismatch {
            declared: 2,
            found: 3
        })
    );
    assert_eq!(
        parse_edited(&b, |f, h| put32(f, word(h, 515), u32::MAX)),
        Err(HwxError::TdCountMismatch {
            declared: u32::MAX,
            found: 3
        })
    );
    // A broken chain inside __text.
    assert!(matches!(
        parse_edited(&b, |f, h| put32(f, h.td_file_offset() + 0x31C, 0)),
        Err(HwxError::Chain(ChainError::Unterminated { index: 1, .. }))
    ));

    // Tensor descriptors.
    let tens = |h: &Hwx| cmd_offset(h, LC_THREAD, Some(THREAD_TENSOR));
    assert_eq!(
        parse_edited(&b, |f, h| put32(f, tens(h) + 16 + 4, 7)),
        Err(HwxError::TensorField {
            index: 7,
            field: "direction",
            value: 7
        })
    );
    for off in [0x98, 0xFFFF_FFFF] {
        assert!(matches!(
            parse_edited(&b, |f, h| put32(f, tens(h) + 16 + 16, off)),
            Err(HwxError::BadString { field: "tensor name", offset, .. }) if offset == off
        ));
    }
    // No NUL at all after the descriptor words: the strings run off the
    // end of the command.
    let e = parse_edited(&b, |f, h| {
        let t = tens(h);
        let size = le32_at(f, t + 4) as usize;
        for byte in &mut f[t + 16 + 120..t + size] {
            if *byte == 0 {
                *byte = b'z';
            }
        }
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            HwxError::BadString {
                field: "tensor name",
                ..
            }
        ),
        "{e}"
    );
    // Binding: region name unknown, no BAR slot, no segment.
    let e = parse_edited(&b, |f, h| {
        let t = tens(h);
        let at = t + le32_at(f, t + 16 + 27 * 4) as usize;
        f[at] = b'q';
    })
    .unwrap_err();
    assert_eq!(
        e,
        HwxError::UnboundTensor {
            name: "x".into(),
            problem: "no LC_IDFVMLIB or 0x40 region has its region name"
        }
    );
    assert!(matches!(
        parse_edited(&b, |f, h| {
            let slot = h.tensors()[0].slot;
            put32(f, word(h, 2 * slot), 0x1234_0000);
        }),
        Err(HwxError::UnboundTensor {
            problem: "no BAR slot holds its address",
            ..
        })
    ));
    assert!(matches!(
        parse_edited(&b, |f, h| {
            let r = cmd_offset(h, LC_IDFVMLIB, None);
            put32(f, r + 16, 0x1234_0000);
        }),
        Err(HwxError::UnboundTensor {
            problem: "no buffer segment starts at its region's address",
            ..
        })
    ));
    // Region command: name offset outside, or command too short.
    assert!(matches!(
        parse_edited(&b, |f, h| put32(
            f,
            cmd_offset(h, LC_IDFVMLIB, None) + 8,
            0x40
        )),
        Err(HwxError::BadString {
            field: "region name",
            offset: 0x40,
            ..
        })
    ));
}

/// Every prefix that ends at a structural boundary fails with the error of
/// the first structure it cuts.
#[test]
fn truncations() {
    let b = HwxBuilder::h13_conv();
    let full = b.build();
    let h = Hwx::parse(&full).unwrap();
    let sizeofcmds = h.header().sizeofcmds as usize;
    for len in [0, 1, 4, 31] {
        assert_eq!(Hwx::parse(&full[..len]), Err(HwxError::TooShort { len }));
    }
    // Inside the load commands.
    for c in h.load_commands() {
        for cut in [c.offset, c.offset + 4, c.offset + c.size as usize - 1] {
            assert!(
                matches!(
                    Hwx::parse(&full[..cut]),
                    Err(HwxError::CommandsOutOfFile { .. })
                ),
                "cut at {cut:#x}"
            );
        }
    }
    // After the commands, before the end of __TEXT's file data.
    let text_end = h.td_file_offset() + 0x4000;
    for cut in [
        32 + sizeofcmds,
        h.td_file_offset(),
        h.td_file_offset() + 0x274,
        h.td_file_offset() + 0x880,
        text_end - 1,
    ] {
        assert!(
            matches!(
                Hwx::parse(&full[..cut]),
                Err(HwxError::SegmentOutOfFile { ref segment, .. }) if segment == "__TEXT"
            ),
            "cut at {cut:#x}"
        );
    }
    assert!(Hwx::parse(&full[..text_end]).is_ok());
}

fn check_invariants(h: &Hwx) {
    // Whatever parsed must be internally consistent.
    assert_eq!(h.task_stream().len() as u64, h.tsk_size());
    assert!(h.td_size() as u64 <= h.tsk_size());
    if let Some(offsets) = h.td_offsets() {
        assert_eq!(offsets.len(), h.td_count() as usize);
        for i in 0..offsets.len() {
            assert_eq!(h.td(i).unwrap().len(), h.td_size() as usize);
        }
    }
    for t in h.tensors() {
        assert!(t.slot < BAR_SLOTS);
    }
}

#[test]
fn random_mutations_never_panic() {
    let mut rng = Rng::new(0x0005_EED0_FA11_C0DE);
    let mut seeds = vec![
        HwxBuilder::h13_add().build(),
        HwxBuilder::h13_conv().build(),
    ];
    for name in [
        "tinygrad_concat.hwx",
        "tinygrad_sigmoid.hwx",
        "mul_zin764_macos14.hwx",
    ] {
        if let Some(b) = fixture(name) {
            seeds.push(b);
        }
    }
    let mut accepted = 0;
    for round in 0..3000 {
        let mut f = seeds[round % seeds.len()].clone();
        // Mutations concentrate on the header and load commands.
        let cmds_end = 32 + le32_at(&f, 20) as usize;
        for _ in 0..1 + rng.index(4) {
            if f.is_empty() {
                break;
            }
            let hot = rng.index(4) != 0;
            let at = if hot {
                rng.index(cmds_end.min(f.len()))
            } else {
                rng.index(f.len())
            };
            match rng.index(4) {
                0 => f[at] ^= 1 << rng.index(8),
                1 => f[at] = rng.next_u64() as u8,
                2 => {
                    if at + 4 <= f.len() {
                        let v = match rng.index(4) {
                            0 => 0,
                            1 => u32::MAX,
                            2 => rng.next_u64() as u32 & 0xFFFF,
                            _ => rng.next_u64() as u32,
                        };
                        put32(&mut f, at & !3, v);
                    }
                }
                _ => {
                    let len = rng.index(f.len() + 1);
                    f.truncate(len);
                }
            }
        }
        if let Ok(h) = Hwx::parse(&f) {
            check_invariants(&h);
            accepted += 1;
        }
    }
    // Some mutations (in padding, names) leave the file valid.
    assert!(accepted > 0);
    // Pure noise.
    for _ in 0..2000 {
        let len = rng.index(300);
        let mut f: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if f.len() >= 4 && rng.index(2) == 0 {
            put32(&mut f, 0, MAGIC);
        }
        if let Ok(h) = Hwx::parse(&f) {
            check_invariants(&h);
        }
    }
}
