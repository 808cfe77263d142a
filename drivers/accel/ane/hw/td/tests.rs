// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Host tests of the TD decoder and validator: real compiled programs from
//! `../shared/fixtures` (skipped with a message when that directory is
//! absent), a synthetic program built here, systematic mutations of both,
//! and a deterministic fuzz loop.

extern crate std;

use std::fs;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::println;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use super::super::test_rng::Rng;
use super::header::{self, Header};
use super::regs::{
    common, kdma, l2, ne, pe, tile_dst, tile_src, Block, DmaAddr, Field, Nonlinear, PeOp, Reg,
};
use super::validate::MAX_DMA_EXTENT;
use super::*;

// ---------------------------------------------------------------------------
// Helpers

fn rd32(d: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(d[off..off + 4].try_into().unwrap())
}

fn rd64(d: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(d[off..off + 8].try_into().unwrap())
}

fn wr32(d: &mut [u8], off: usize, v: u32) {
    d[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// Byte offset of `reg` in a TD with the standard stream layout (every
/// block complete, in [`Block::ALL`] order).
fn std_off(reg: Reg) -> usize {
    let mut pos = HEADER_SIZE as usize;
    for b in Block::ALL {
        if b == reg.block {
            return pos + 4 + reg.offset as usize;
        }
        pos += 4 + 4 * b.words() as usize;
    }
    unreachable!()
}

fn mask(slots: &[u8]) -> SlotMask {
    let mut m = SlotMask(0);
    for &s in slots {
        m.insert(s);
    }
    m
}

/// Encodes a TD: `header`, then for each block of `order` one stream per
/// run of consecutive registers written in `image` and not in `omit`.
fn encode(header: &Header, image: &RegImage, order: &[Block], omit: &[Reg]) -> Vec<u8> {
    let mut out = Vec::new();
    for w in header.words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for &b in order {
        let mut run: Vec<u32> = Vec::new();
        let mut start = 0;
        let flush = |out: &mut Vec<u8>, run: &mut Vec<u32>, start: u32| {
            if !run.is_empty() {
                let h = decode::StreamHeader::new(b.base() + start, run.len() as u32).unwrap();
                out.extend_from_slice(&h.0.to_le_bytes());
                for v in run.drain(..) {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        };
        for i in 0..b.words() {
            let reg = Reg::new(b, 4 * i);
            match image.get(reg) {
                Some(v) if !omit.contains(&reg) => {
                    if run.is_empty() {
                        start = 4 * i;
                    }
                    run.push(v);
                }
                _ => flush(&mut out, &mut run, start),
            }
        }
        flush(&mut out, &mut run, start);
    }
    out
}

/// A synthetic elementwise add of two (1,64,1,1) fp16 tensors, built from
/// register values td.md §1.4 lists for the compiled `sum` program: sources
/// on slots 6 and 5, destination on slot 4.
fn synthetic_add() -> (Header, RegImage) {
    let mut img = RegImage::new();
    for b in Block::ALL {
        for i in 0..b.words() {
            img.set(Reg::new(b, 4 * i), 0);
        }
    }
    let set = |img: &mut RegImage, r: Reg, v: u32| assert!(img.set(r, v));
    for (r, v) in [
        (common::IN_DIM, 0x1_0001),
        (common::IN_DEPTH, 1),
        (common::CH_CFG, 0x2A),
        (common::CIN, 0x40),
        (common::COUT, 0x40),
        (common::OUT_DIM, 0x1_0001),
        (common::OUT_DEPTH, 1),
        (common::CONV_CFG, 0x5000_A021),
        (common::WORD_20, 0x2041),
        (common::GROUP_CONV_CFG, 0x1_0001),
        (common::TILE_CFG, 1),
        (common::WORD_2C, 4),
        (common::CFG, 0x33),
        (tile_src::DMA_CONFIG, 0x3_3881),
        (tile_src::SRC1_DMA_CONFIG, 0x3_3880),
        (tile_src::ROW_STRIDE, 0x40),
        (tile_src::PLANE_STRIDE, 0x40),
        (tile_src::DEPTH_STRIDE, 0x1000),
        (tile_src::SRC1_ROW_STRIDE, 0x40),
        (tile_src::SRC1_PLANE_STRIDE, 0x40),
        (tile_src::SRC1_DEPTH_STRIDE, 0x1000),
        (tile_src::FMT, 0x100_2031),
        (tile_src::SRC1_FMT, 0x2030),
        (l2::SOURCE_CFG, 0x150_0172),
        (l2::SOURCE_CHANNEL_STRIDE, 0x10),
        (l2::SOURCE_ROW_STRIDE, 0x420),
        (l2::WORD_14, 0x400),
        (l2::WORD_18, 0x400),
        (l2::SRC1_BASE, 0x440),
        (l2::SRC1_CHANNEL_STRIDE, 0x10),
        (l2::SRC1_ROW_STRIDE, 0x420),
        (l2::SRC1_WORD_28, 0x400),
        (l2::SRC1_WORD_2C, 0x400),
        (l2::RESULT_CFG, 0x50_017A),
        (l2::RESULT_BASE, 0x860),
        (pe::CFG, 0x8_0000),
        (pe::BIAS_SCALE, 0x3C00_0000),
        (pe::PRE_SCALE, 0x3C00_0000),
        (pe::FINAL_SCALE, 0x3F80_0000),
        (tile_dst::DMA_CONFIG, 0x400_00C1),
        (tile_dst::ROW_STRIDE, 0x40),
        (tile_dst::PLANE_STRIDE, 0x40),
        (tile_dst::DEPTH_STRIDE, 0x1000),
        (tile_dst::FMT, 0x100_2031),
    ] {
        set(&mut img, r, v);
    }
    let mut h = Header::default();
    h.words[0] = header::EON.put(0, 1);
    h.words[2] = 0x422;
    h.words[4] = 0xFF_F86A;
    h.words[6] = 0x3000_9800;
    let mut w8 = 0;
    for (f, v) in [
        (header::RBASE0, 6),
        (header::RBE0, 1),
        (header::RBASE1, 5),
        (header::RBE1, 1),
        (header::WBASE, 4),
        (header::WBE, 1),
    ] {
        w8 = f.put(w8, v);
    }
    h.words[8] = w8;
    (h, img)
}

pub(crate) fn synthetic_add_td() -> Vec<u8> {
    let (h, img) = synthetic_add();
    let td = encode(&h, &img, &Block::ALL, &[]);
    assert_eq!(td.len(), TD_SIZE_STANDARD as usize);
    td
}

/// Two copies of the synthetic add chained at 0x300, like concat.
pub(crate) fn synthetic_chain() -> Vec<u8> {
    let td = synthetic_add_td();
    let mut p = vec![0u8; 0x300 + td.len()];
    p[..td.len()].copy_from_slice(&td);
    p[0x300..].copy_from_slice(&td);
    // TD0: not the end, NextSize 0x9C, NextPointer 0x300; TD1: TID 1, LNID.
    wr32(&mut p, 0, 0);
    wr32(&mut p, 4, header::NEXT_SIZE.put(0, 0x9C));
    wr32(&mut p, 0x1C, 0x300);
    wr32(&mut p, 0x300, 0x0300_0001);
    p
}

fn validate(p: &[u8], td_size: u32, td_count: u32) -> Result<ProgramSummary, TdError> {
    Program::new(p, td_size, td_count)?.validate()
}

// ---------------------------------------------------------------------------
// Fixtures

/// `$ANE_SHARED/fixtures`, or `../shared/fixtures` next to the checkout.
pub(crate) fn fixtures_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("ANE_SHARED") {
        Some(shared) => PathBuf::from(shared).join("fixtures"),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/fixtures"
        )),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        // Straight to stderr, past the test harness's output capture, so
        // the skip is visible in a normal `cargo test` run.
        let _ = writeln!(
            std::io::stderr(),
            "SKIP: fixture directory {} not found (only the project's own checkout has \
             ../shared); this test on real compiled programs is skipped",
            dir.display()
        );
        None
    }
}

macro_rules! fixtures_or_skip {
    () => {
        match fixtures_dir() {
            Some(d) => d,
            None => return,
        }
    };
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Command,
    Kernel,
    Input,
    Output,
    Scratch,
}

#[derive(Debug)]
pub(crate) struct Section {
    pub(crate) seg: String,
    pub(crate) name: String,
    pub(crate) addr: u64,
    pub(crate) size: u64,
    pub(crate) offset: u32,
}

/// What the tests need from an HWX file: the TD chain, the program state
/// (BAR slot table, TD size and count) and the sections.
#[derive(Debug)]
pub(crate) struct Hwx {
    pub(crate) data: Vec<u8>,
    pub(crate) text: (usize, usize),
    pub(crate) td_size: u32,
    pub(crate) td_count: u32,
    pub(crate) slot_addr: [u64; 32],
    pub(crate) sections: Vec<Section>,
}

impl Hwx {
    pub(crate) fn load(path: &PathBuf) -> Hwx {
        let data = fs::read(path).unwrap();
        assert_eq!(rd32(&data, 0), 0xBEEF_FACE, "HWX magic");
        assert_eq!(rd32(&data, 8), 4, "cpusubtype 4 = H13");
        let ncmds = rd32(&data, 16) as usize;
        let mut off = 32;
        let mut sections = Vec::new();
        let mut state = None;
        for _ in 0..ncmds {
            let (cmd, size) = (rd32(&data, off), rd32(&data, off + 4) as usize);
            if cmd == 0x19 {
                let nsects = rd32(&data, off + 64) as usize;
                for s in 0..nsects {
                    let so = off + 72 + 80 * s;
                    let name = |o: usize| {
                        String::from_utf8_lossy(&data[o..o + 16])
                            .trim_end_matches('\0')
                            .to_string()
                    };
                    sections.push(Section {
                        name: name(so),
                        seg: name(so + 16),
                        addr: rd64(&data, so + 32),
                        size: rd64(&data, so + 40),
                        offset: rd32(&data, so + 48),
                    });
                }
            } else if cmd == 4 && rd32(&data, off + 8) == 1 {
                state = Some(off + 16);
            }
            off += size;
        }
        let st = state.expect("LC_THREAD flavor 1");
        let w = |i: usize| rd32(&data, st + 4 * i);
        let mut slot_addr = [0u64; 32];
        for (k, a) in slot_addr.iter_mut().enumerate() {
            *a = u64::from(w(2 * k)) | (u64::from(w(2 * k + 1)) << 32);
        }
        let text = sections
            .iter()
            .find(|s| s.seg == "__TEXT" && s.name == "__text")
            .unwrap();
        let text = (text.offset as usize, text.size as usize);
        Hwx {
            td_size: (w(514) + 1) * 4,
            td_count: w(515),
            data,
            text,
            slot_addr,
            sections,
        }
    }

    pub(crate) fn program(&self) -> &[u8] {
        &self.data[self.text.0..self.text.0 + self.text.1]
    }

    pub(crate) fn role(&self, slot: u8) -> Option<(Role, u64)> {
        let addr = self.slot_addr[slot as usize];
        if addr == 0 {
            return None;
        }
        let s = self.sections.iter().find(|s| s.addr == addr)?;
        let role = match (s.seg.as_str(), s.name.as_str()) {
            ("__TEXT", "__text") => Role::Command,
            ("__TEXT", "__const") => Role::Kernel,
            ("__FVMLIB", "__const") => Role::Input,
            ("__FVMLIB", "__data") => Role::Output,
            _ => Role::Scratch,
        };
        Some((role, s.size))
    }

    fn summary(&self) -> ProgramSummary {
        validate(self.program(), self.td_size, self.td_count).unwrap()
    }

    fn images(&self) -> Vec<(Header, RegImage)> {
        let p = Program::new(self.program(), self.td_size, self.td_count).unwrap();
        p.tds()
            .map(|td| {
                let td = td.unwrap();
                (td.header(), td.decode().unwrap())
            })
            .collect()
    }
}

pub(crate) fn hwx(dir: &std::path::Path, name: &str) -> Hwx {
    Hwx::load(&dir.join(name))
}

const HWX_FIXTURES: [&str; 9] = [
    "tinygrad_sum.hwx",
    "tinygrad_relu.hwx",
    "tinygrad_sigmoid.hwx",
    "tinygrad_conv.hwx",
    "tinygrad_conv3_w3.hwx",
    "tinygrad_concat.hwx",
    "tinygrad_gemm.hwx",
    "mul_zin541_macos12.hwx",
    "mul_zin764_macos14.hwx",
];

/// Every HWX fixture validates, and what the validator derives from the TDs
/// alone agrees with the slot table and buffer sizes the compiler recorded.
#[test]
fn every_hwx_fixture_validates_and_matches_its_container() {
    let dir = fixtures_or_skip!();
    for name in HWX_FIXTURES {
        let h = hwx(&dir, name);
        assert_eq!(h.text.0, 0x4000, "{name}: TDs at file offset 0x4000");
        assert_eq!(h.td_size, TD_SIZE_STANDARD, "{name}");
        let s = h.summary();
        assert_eq!(s.td_count, h.td_count);
        // tsk_size = (count - 1) * 0x300 + 0x274.
        assert_eq!(s.span, h.text.1 as u64, "{name}: chain spans __text");
        assert_eq!(
            s.span,
            u64::from(h.td_count - 1) * u64::from(TD_STRIDE_STANDARD) + u64::from(TD_SIZE_STANDARD)
        );
        // The kept mask of used slots is the scan's.
        assert_eq!(s.used(), s.with_usage(SlotUsage::NONE), "{name}");
        // Slot 0 holds the TDs; compiled chains also name it in TBase.
        assert!(s.slots[0].usage.contains(SlotUsage::COMMAND), "{name}");
        assert_eq!(
            s.slots[0].usage.union(SlotUsage::TBASE),
            SlotUsage::COMMAND.union(SlotUsage::TBASE)
        );
        let mut sizes = [0u64; 32];
        let mut want_in = SlotMask(0);
        let mut want_out = SlotMask(0);
        for slot in 0u8..32 {
            let info = s.slots[slot as usize];
            let role = h.role(slot);
            if let Some((r, size)) = &role {
                sizes[slot as usize] = *size;
                match r {
                    Role::Input => want_in.insert(slot),
                    Role::Output => want_out.insert(slot),
                    _ => {}
                }
            }
            if slot == 0 || info.usage.is_empty() {
                continue;
            }
            let (r, size) =
                role.unwrap_or_else(|| panic!("{name}: slot {slot} used, not in the slot table"));
            match r {
                Role::Input => {
                    assert_eq!(info.usage, SlotUsage::TILE_READ, "{name} slot {slot}");
                    assert_eq!(info.min_size, size, "{name} slot {slot}: input buffer size");
                }
                Role::Output => {
                    assert_eq!(info.usage, SlotUsage::TILE_WRITE, "{name} slot {slot}");
                    assert_eq!(
                        info.min_size, size,
                        "{name} slot {slot}: output buffer size"
                    );
                }
                Role::Kernel => {
                    assert_eq!((slot, info.usage), (1, SlotUsage::KERNEL_READ), "{name}");
                    assert_eq!(info.min_size, size, "{name}: weights size");
                }
                r => panic!("{name}: slot {slot} has role {r:?}"),
            }
        }
        assert_eq!(s.inputs, want_in, "{name}: inputs");
        assert_eq!(s.outputs, want_out, "{name}: outputs");
        assert!(s.scratch().is_empty(), "{name}");
        // The compiler's buffers are exactly large enough, one byte less is not.
        s.check_buffers(&sizes).unwrap();
        for slot in s.used().iter() {
            let mut small = sizes;
            small[slot as usize] = s.slots[slot as usize].min_size - 1;
            assert_eq!(
                s.check_buffers(&small),
                Err(BufferError {
                    slot,
                    required: s.slots[slot as usize].min_size,
                    bound: small[slot as usize]
                })
            );
        }
        // Messages render.
        assert!(s.to_string().contains("slot 0: command"));
    }
}

#[test]
fn sum_is_one_pe_add_of_slots_6_and_5_into_4() {
    let dir = fixtures_or_skip!();
    let h = hwx(&dir, "tinygrad_sum.hwx");
    assert_eq!(h.td_count, 1);
    let s = h.summary();
    assert_eq!(s.tile_reads(), mask(&[5, 6]));
    assert_eq!(s.tile_writes(), mask(&[4]));
    assert!(s.kernel_reads().is_empty());
    assert_eq!(s.inputs, mask(&[5, 6]));
    assert_eq!(s.outputs, mask(&[4]));
    for slot in [4, 5, 6] {
        // (C-1)·0x40 + roundup(2 bytes, 64) for 64 channels of one fp16.
        assert_eq!(s.slots[slot].min_size, 0x1000);
    }
    assert_eq!(s.slots[0].min_size, 0x274);

    let imgs = h.images();
    let (hd, img) = &imgs[0];
    assert_eq!(
        (hd.rbase(0), hd.rbase(1), hd.wbase(), hd.kbase(0)),
        (Some(6), Some(5), Some(4), None)
    );
    assert!(hd.eon() && hd.src_loc() && hd.dst_loc());
    assert_eq!(img.pe().cfg().op(), Some(PeOp::Add));
    assert_eq!(img.pe().cfg().sec_src(), 2);
    assert_eq!(img.pe().bias_scale().scale(), 0x3C00);
    assert_eq!(img.pe().final_scale_bits(), 1.0f32.to_bits());
    let c = img.common();
    assert_eq!(
        (c.in_dim().w(), c.in_dim().h(), c.cin(), c.cout()),
        (1, 1, 64, 64)
    );
    assert_eq!(
        DataFormat::from_code(c.ch_cfg().in_fmt()),
        Some(DataFormat::F16)
    );
    assert_eq!(c.ch_cfg().src2_in_fmt(), 2);
    let src = img.tile_src().surface(0);
    assert_eq!(
        (
            src.row_stride.bytes(),
            src.plane_stride.bytes(),
            src.depth_stride.bytes()
        ),
        (0x40, 0x40, 0x1000)
    );
    assert_eq!(img.tile_src().surface(1), src);
    assert_eq!(img.tile_src().dma_config().en(), 1);
    assert_eq!(img.tile_src().fmt(0).interleave(), 1);
    assert_eq!(img.l2().result_base().bytes(), 0x860);
    assert_eq!(img.l2().src1_base().bytes(), 0x440);
    assert_eq!(img.tile_dst().dma_config().cache_hint(), 3);
    assert_eq!(img.tile_dst().dma_config().l2_bfr_mode(), 1);
    assert_eq!(img.kernel_dma().enabled_channels(), 0);

    // The synthetic program built from td.md's table is this very TD.
    assert_eq!(h.program(), &synthetic_add_td()[..]);
}

#[test]
fn mul_macos12_and_macos14_agree_except_slots_and_spurious_fields() {
    let dir = fixtures_or_skip!();
    let m12 = hwx(&dir, "mul_zin541_macos12.hwx");
    let m14 = hwx(&dir, "mul_zin764_macos14.hwx");
    let (s12, s14) = (m12.summary(), m14.summary());
    // Same op, same buffers, different slot assignment.
    assert_eq!((s12.inputs, s12.outputs), (mask(&[5, 6]), mask(&[4])));
    assert_eq!((s14.inputs, s14.outputs), (mask(&[4, 5]), mask(&[6])));
    for s in [&s12, &s14] {
        assert_eq!(s.used().count(), 4);
        for slot in s.used().iter().filter(|&x| x != 0) {
            assert_eq!(s.slots[slot as usize].min_size, 0x1000);
        }
        assert!(s.kernel_reads().is_empty());
    }
    let (i12, i14) = (&m12.images()[0], &m14.images()[0]);
    for (h, img) in [i12, i14] {
        assert_eq!(img.pe().cfg().op(), Some(PeOp::Mul));
        assert!(h.rbase(0).is_some() && h.rbase(1).is_some());
    }
    // Every register is written in both and differs only in the kernel DMA
    // block (macOS 14's spurious 0x80 configs and 0x40 sizes), TSrc+0x40
    // and the neural engine's KernelCfg/MACCfg, which a PE op ignores.
    let mut differ = Vec::new();
    for b in Block::ALL {
        for i in 0..b.words() {
            let r = Reg::new(b, 4 * i);
            assert!(i12.1.is_written(r) && i14.1.is_written(r));
            if i12.1.get(r) != i14.1.get(r) {
                differ.push(r);
            }
        }
    }
    assert!(differ.iter().all(|r| r.block == Block::KernelDma
        || *r == tile_src::WORD_40
        || *r == ne::KERNEL_CFG
        || *r == ne::MAC_CFG));
    assert!(differ.contains(&ne::MAC_CFG));
    assert_eq!(i14.1.ne().mac_cfg().0, 0x10_0000);
    assert_eq!(
        i14.1.kernel_dma().enabled_channels(),
        0,
        "0x80 configs are disabled"
    );
    assert_eq!(i14.1.kernel_dma().coeff_dma_config(0).cache_hint(), 2);
    // Header: only LogEvents and the slot word differ.
    let hd: Vec<usize> = (0..10)
        .filter(|&i| i12.0.words[i] != i14.0.words[i])
        .collect();
    assert_eq!(hd, [2, 8]);
}

#[test]
fn concat_is_two_chained_tds_into_one_output() {
    let dir = fixtures_or_skip!();
    let h = hwx(&dir, "tinygrad_concat.hwx");
    assert_eq!((h.td_count, h.text.1), (2, 0x574));
    let p = Program::new(h.program(), h.td_size, h.td_count).unwrap();
    let tds: Vec<_> = p.tds().map(|t| t.unwrap()).collect();
    assert_eq!(
        tds.iter().map(|t| t.offset()).collect::<Vec<_>>(),
        [0, 0x300]
    );
    let (h0, h1) = (tds[0].header(), tds[1].header());
    assert_eq!(
        (h0.next_pointer(), h0.next_size(), h0.eon()),
        (0x300, 0x9C, false)
    );
    assert_eq!(
        (h1.tid(), h1.lnid(), h1.eon(), h1.next_pointer()),
        (1, true, true, 0)
    );
    assert_eq!((h0.rbase(0), h0.wbase()), (Some(6), Some(4)));
    assert_eq!((h1.rbase(0), h1.wbase()), (Some(5), Some(4)));
    let s = p.validate().unwrap();
    assert_eq!(s.inputs, mask(&[5, 6]));
    assert_eq!(s.outputs, mask(&[4]));
    // TD1 writes its 16 channels at +0x100000 = 16384 · 64.
    let img1 = tds[1].decode().unwrap();
    assert_eq!(img1.tile_dst().surface().base.bytes(), 0x10_0000);
    assert_eq!(s.slots[4].min_size, 0x10_0400);
    assert_eq!(s.slots[6].min_size, 0x10_0000);
    assert_eq!(s.slots[5].min_size, 0x400);
    assert_eq!(img1.ne().mac_cfg().nonlinear(), Some(Nonlinear::None));
    assert_eq!(img1.ne().post_scale().post_scale(), 0x3C00);
}

#[test]
fn conv_and_gemm_read_coefficients_from_slot_1() {
    let dir = fixtures_or_skip!();
    for (name, channels, chunk, weight) in [
        ("tinygrad_conv.hwx", 3u32, 0x40u32, 0x4000u16),
        ("tinygrad_conv3_w3.hwx", 3, 0x40, 0x4200),
        ("tinygrad_gemm.hwx", 16, 0x8000, 0),
    ] {
        let h = hwx(&dir, name);
        let s = h.summary();
        assert_eq!(s.kernel_reads(), mask(&[1]), "{name}");
        assert_eq!(s.slots[1].min_size, u64::from(channels * chunk), "{name}");
        assert_eq!(s.inputs, mask(&[5]));
        assert_eq!(s.outputs, mask(&[4]));
        let (hd, img) = &h.images()[0];
        assert_eq!(hd.kbase(0), Some(1));
        let k = img.kernel_dma();
        assert_eq!(k.enabled_channels(), (1u32 << channels) - 1, "{name}");
        for i in 0..channels {
            assert_eq!(k.coeff_base_addr(i).bytes(), i * chunk);
            assert_eq!(k.coeff_bfr_size(i).bytes(), chunk);
            // Each chunk starts with a weight (fp16 2.0 / 3.0 / 0).
            let konst = h
                .sections
                .iter()
                .find(|s| s.seg == "__TEXT" && s.name == "__const")
                .unwrap();
            let at = konst.offset as usize + (i * chunk) as usize;
            assert_eq!(u16::from_le_bytes([h.data[at], h.data[at + 1]]), weight);
        }
        assert_eq!(img.ne().kernel_cfg().kernel_fmt(), 2, "fp16 weights");
        let conv = img.common().conv_cfg();
        assert_eq!((conv.kw(), conv.kh()), (1, 1));
        let cin = img.common().cin();
        assert_eq!(cin, img.common().cout());
        assert_eq!(conv.ocg_size(), if cin == 512 { 5 } else { 0 });
    }
}

#[test]
fn relu_and_sigmoid_differ_in_the_nonlinearity() {
    let dir = fixtures_or_skip!();
    let relu = hwx(&dir, "tinygrad_relu.hwx");
    let sig = hwx(&dir, "tinygrad_sigmoid.hwx");
    let (r, s) = (&relu.images()[0].1, &sig.images()[0].1);
    assert_eq!(r.ne().mac_cfg().nonlinear(), Some(Nonlinear::Relu));
    assert_eq!(s.ne().mac_cfg().nonlinear(), Some(Nonlinear::Lut));
    assert_eq!(r.common().in_dim().w(), 77);
    // relu loads nothing; sigmoid loads its 0x80-byte table through slot 1.
    assert!(relu.summary().kernel_reads().is_empty());
    assert_eq!(sig.summary().slots[1].min_size, 0x80);
    assert_eq!(
        sig.summary().slots[5].min_size,
        0xC0,
        "77 fp16 rounded to 64 bytes"
    );
}

/// The three `.anec` files carry the same TDs after a 0x1000-byte header;
/// their tile table covers what the validator asks for.
#[test]
fn anec_fixtures_validate_like_their_hwx() {
    let dir = fixtures_or_skip!();
    for (anec, hwx_name) in [
        ("sum.anec", "tinygrad_sum.hwx"),
        ("relu.anec", "tinygrad_relu.hwx"),
        ("conv.anec", "tinygrad_conv.hwx"),
    ] {
        let d = fs::read(dir.join(anec)).unwrap();
        let (size, td_size, td_count, tsk_size, krn_size) = (
            rd64(&d, 0),
            rd32(&d, 8),
            rd32(&d, 12),
            rd64(&d, 16),
            rd64(&d, 24),
        );
        assert_eq!(size, tsk_size.next_multiple_of(16) + krn_size);
        let payload = &d[0x1000..0x1000 + size as usize];
        let s = validate(&payload[..tsk_size as usize], td_size, td_count).unwrap();
        assert_eq!(s, hwx(&dir, hwx_name).summary(), "{anec}");
        // The whole payload (TDs, then weights) validates the same.
        let whole = validate(payload, td_size, td_count).unwrap();
        assert_eq!(whole, s);
        let mut sizes = [0u64; 32];
        for (slot, sz) in sizes.iter_mut().enumerate() {
            *sz = u64::from(rd32(&d, 0x28 + 4 * slot)) * 0x4000;
        }
        // The driver derives slot 1 (weights) from slot 0.
        sizes[1] = krn_size;
        s.check_buffers(&sizes).unwrap();
    }
}

/// Reads the 36 kernels of eiln's tarball (40 entries with the directories).
pub(crate) fn eiln_kernels(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let f = fs::File::open(dir.join("eiln_anec_kernels.tar.gz")).unwrap();
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut out = Vec::new();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        if e.header().entry_type().is_file() {
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            out.push((name, data));
        }
    }
    out.sort();
    out
}

/// The TD count of a bare payload: follow NextPointer until it is 0.
pub(crate) fn count_tds(p: &[u8]) -> u32 {
    let (mut off, mut n) = (0usize, 1);
    while rd32(p, off + 0x1C) != 0 {
        off = rd32(p, off + 0x1C) as usize;
        n += 1;
        assert!(n < 64);
    }
    n
}

#[test]
fn eiln_kernels_decode_and_validate() {
    let dir = fixtures_or_skip!();
    let kernels = eiln_kernels(&dir);
    assert_eq!(kernels.len(), 36);
    let plane = 2560 * 0xC80; // (1,1,2560,1600) fp16: 2560 rows of 3200 bytes
    for (name, p) in &kernels {
        let n = count_tds(p);
        let prog = Program::new(p, TD_SIZE_STANDARD, n).unwrap();
        for td in prog.tds() {
            let td = td.unwrap();
            // Every TD carries the seven standard streams, in order.
            let headers: Vec<u32> = td.streams().map(|s| s.unwrap().header.0).collect();
            let std: Vec<u32> = Block::ALL.iter().map(|b| b.full_stream_header()).collect();
            assert_eq!(headers, std, "{name}");
            td.decode().unwrap();
        }
        let s = prog.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.outputs, mask(&[4]), "{name}");
        assert_eq!(s.slots[4].min_size, plane, "{name}");
        assert!(
            !s.inputs.is_empty() && (s.inputs.0 & !mask(&[5, 6]).0) == 0,
            "{name}: inputs {:?}",
            s.inputs
        );
        for slot in s.inputs.iter() {
            assert_eq!(s.slots[slot as usize].min_size, plane, "{name} slot {slot}");
        }
        // Multi-TD kernels keep intermediates in slot 3, never in 0/1.
        assert_eq!(
            s.scratch(),
            if s.tile_writes().contains(3) {
                mask(&[3])
            } else {
                SlotMask(0)
            },
            "{name}"
        );
        assert!(s.kernel_reads().0 & !mask(&[1]).0 == 0);
        // Weights follow the TDs at round_up(tsk_size, 16) (td.md §2.1);
        // the coefficient DMA stays inside them.
        let weights = p.len() as u64 - s.span.next_multiple_of(16);
        assert!(s.slots[1].min_size <= weights, "{name}");
        // The private copy PROGRAM_CREATE makes (the stream, then the
        // weights) covers every read on slots 0 and 1; one weight byte
        // less does not (kernel-2 N1).
        s.check_private(s.span, weights)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if s.slots[1].min_size > 0 {
            assert_eq!(
                s.check_private(s.span, s.slots[1].min_size - 1),
                Err(BufferError {
                    slot: 1,
                    required: s.slots[1].min_size,
                    bound: s.slots[1].min_size - 1
                }),
                "{name}"
            );
        }
        assert!(s.check_private(s.slots[0].min_size - 1, weights).is_err());
        assert_eq!(
            s.kernel_reads().is_empty(),
            s.slots[1].min_size == 0,
            "{name}"
        );
    }
    let op = |n: &str| -> (Header, RegImage) {
        let (_, p) = kernels
            .iter()
            .find(|(k, _)| k.rsplit('/').next() == Some(n))
            .unwrap();
        let td = Program::new(p, TD_SIZE_STANDARD, 1)
            .unwrap()
            .tds()
            .next()
            .unwrap()
            .unwrap();
        (td.header(), td.decode().unwrap())
    };
    for (n, want) in [
        ("add.bin", PeOp::Add),
        ("mul.bin", PeOp::Mul),
        ("max.bin", PeOp::Max),
        ("min.bin", PeOp::Min),
        ("sub.bin", PeOp::Add),
        ("ave.bin", PeOp::Add),
    ] {
        assert_eq!(op(n).1.pe().cfg().op(), Some(want), "{n}");
    }
    assert_eq!(op("sub.bin").1.pe().pre_scale().scale(), 0xBC00, "-1.0");
    assert_eq!(op("ave.bin").1.pe().bias_scale().scale(), 0x3800, "0.5");
    let (sq, _) = op("square.bin");
    assert_eq!((sq.rbase(0), sq.rbase(1)), (Some(5), Some(5)));
    assert_eq!(op("abs.bin").1.pe().cfg().cond(), 1);
    let (add_h, _) = op("add.bin");
    let (sub_h, _) = op("sub.bin");
    assert_eq!(
        (add_h.rbase(0), add_h.rbase(1)),
        (sub_h.rbase(1), sub_h.rbase(0))
    );
}

// ---------------------------------------------------------------------------
// Synthetic programs (no fixtures needed)

#[test]
fn synthetic_programs_validate() {
    let td = synthetic_add_td();
    let s = validate(&td, TD_SIZE_STANDARD, 1).unwrap();
    assert_eq!((s.inputs, s.outputs), (mask(&[5, 6]), mask(&[4])));
    assert_eq!(
        [
            s.slots[4].min_size,
            s.slots[5].min_size,
            s.slots[6].min_size
        ],
        [0x1000; 3]
    );
    assert_eq!(
        s.with_usage(SlotUsage::TILE_READ.union(SlotUsage::TILE_WRITE)),
        SlotMask(0)
    );

    // Read back by name through the block views.
    let img = Td::new(&td, 0, 0).decode().unwrap();
    let c = img.common();
    assert_eq!(
        (
            c.in_dim().w(),
            c.in_dim().h(),
            c.cin(),
            c.cout(),
            c.in_depth()
        ),
        (1, 1, 64, 64, 1)
    );
    assert_eq!((c.out_dim(), c.out_depth()), (c.in_dim(), 1));
    assert_eq!(c.ch_cfg().out_fmt(), 2);
    assert_eq!(c.group_conv_cfg().num_groups(), 1);
    assert_eq!(c.tile_cfg().tile_height(), 1);
    assert_eq!(
        (c.conv_cfg().kw(), c.conv_cfg().kh(), c.conv_cfg().sx()),
        (1, 1, 1)
    );
    assert_eq!(c.cfg().active_ne(), 0);
    assert_eq!((c.task_info().task_id(), c.dpe().category()), (0, 0));
    assert_eq!(img.pe().cfg().op(), Some(PeOp::Add));
    assert_eq!(img.pe().pre_scale().scale(), 0x3C00);
    assert_eq!(img.ne().mac_cfg().nonlinear(), Some(Nonlinear::None));
    assert_eq!(img.ne().kernel_cfg().kernel_fmt(), 0);
    assert_eq!(
        (
            img.ne().acc_bias().shift(),
            img.ne().matrix_vector_bias().bias()
        ),
        (0, 0)
    );
    let src = img.tile_src();
    assert_eq!(src.surface(1).depth_stride.bytes(), 0x1000);
    assert_eq!(
        (
            src.fmt(0).mem_fmt(),
            src.fmt(0).truncate(),
            src.fmt(1).interleave()
        ),
        (2, 3, 0)
    );
    assert_eq!(src.dma_config().cache_hint_reuse(), 14);
    assert_eq!(src.pixel_offset(3).offset(), 0);
    let l2v = img.l2();
    assert_eq!(l2v.source_cfg().source_type(), 2);
    assert_eq!(l2v.result_cfg().l2_bfr_mode(), 1);
    assert_eq!(
        (
            l2v.source_channel_stride().bytes(),
            l2v.source_row_stride().bytes()
        ),
        (0x10, 0x420)
    );
    assert_eq!(
        (l2v.source_base().bytes(), l2v.l2_cfg().padding_mode()),
        (0, 0)
    );
    assert_eq!(
        (
            l2v.conv_result_channel_stride().bytes(),
            l2v.conv_result_row_stride().bytes()
        ),
        (0, 0)
    );
    let dst = img.tile_dst();
    assert_eq!(dst.surface().plane_stride, DmaAddr(0x40));
    assert_eq!((dst.fmt().zero_pad_first(), dst.fmt().fmt_mode()), (0, 1));
    assert_eq!(dst.dma_config().en(), 1);
    assert_eq!(
        img.kernel_dma().coeff_dma_config(15),
        regs::CoeffDmaConfig(0)
    );

    let chain = synthetic_chain();
    let s2 = validate(&chain, TD_SIZE_STANDARD, 2).unwrap();
    assert_eq!(s2.span, 0x574);
    assert_eq!((s2.inputs, s2.outputs), (s.inputs, s.outputs));
    assert_eq!(s2.slots[0].min_size, 0x574);
}

/// The hardware walks stream headers: any order of the same streams gives
/// the same register image and the same summary.
#[test]
fn stream_order_does_not_matter() {
    let (h, img) = synthetic_add();
    let want = validate(&encode(&h, &img, &Block::ALL, &[]), TD_SIZE_STANDARD, 1).unwrap();
    let mut order = Block::ALL;
    for rot in 0..Block::COUNT {
        order.rotate_left(1);
        let mut o = order;
        if rot % 2 == 1 {
            o.reverse();
        }
        let td = encode(&h, &img, &o, &[]);
        let decoded = Td::new(&td, 0, 0).decode().unwrap();
        assert_eq!(decoded, img, "{o:?}");
        assert_eq!(validate(&td, TD_SIZE_STANDARD, 1).unwrap(), want);
    }
}

/// The macOS 26 compact TD: kernel DMA in two streams, coefficient bases and
/// sizes left out, 0x1F8 bytes.
#[test]
fn compact_td_validates() {
    let (h, img) = synthetic_add();
    let mut omit = Vec::new();
    for i in 0..16 {
        omit.push(kdma::COEFF_BASE_ADDR.at(i));
        omit.push(kdma::COEFF_BFR_SIZE.at(i));
    }
    let td = encode(&h, &img, &Block::ALL, &omit);
    assert_eq!(td.len(), TD_SIZE_COMPACT as usize);
    assert_eq!(rd32(&td, 0x28), kdma::COMPACT_STREAM_A);
    assert_eq!(rd32(&td, 0x28 + 4 + 18 * 4), kdma::COMPACT_STREAM_B);
    let s = validate(&td, TD_SIZE_COMPACT, 1).unwrap();
    assert_eq!(s.slots[4].min_size, 0x1000);
    // With a coefficient channel enabled, its base is now unknown.
    let mut img2 = img.clone();
    img2.set(kdma::COEFF_DMA_CONFIG, 0x81);
    let mut h2 = h;
    h2.words[9] = 0x21;
    let td = encode(&h2, &img2, &Block::ALL, &omit);
    assert_eq!(
        validate(&td, TD_SIZE_COMPACT, 1),
        Err(TdError::RegisterNotSet {
            td: 0,
            reg: kdma::COEFF_BASE_ADDR
        })
    );
}

/// Register state persists across TDs: a TD may leave out registers an
/// earlier TD of the program wrote, but not ones nobody wrote.
#[test]
fn state_persists_across_tds() {
    let (h, img) = synthetic_add();
    let strides = [
        tile_dst::ROW_STRIDE,
        tile_dst::PLANE_STRIDE,
        tile_dst::DEPTH_STRIDE,
        tile_dst::GROUP_STRIDE,
    ];
    let l2_words = [
        l2::WORD_14,
        l2::WORD_18,
        l2::SRC1_BASE,
        l2::SRC1_CHANNEL_STRIDE,
    ];
    let mut h0 = h;
    h0.words[0] = 0;
    h0.words[1] = header::NEXT_SIZE.put(0, 0x268 / 4 - 1);
    h0.words[7] = 0x300;
    let td0 = encode(&h0, &img, &Block::ALL, &l2_words);
    let td1 = encode(&h, &img, &Block::ALL, &strides);
    assert_eq!((td0.len(), td1.len()), (0x268, 0x268));
    let mut p = vec![0u8; 0x300 + 0x268];
    p[..0x268].copy_from_slice(&td0);
    p[0x300..].copy_from_slice(&td1);
    let s = validate(&p, 0x268, 2).unwrap();
    assert_eq!(s.slots[4].min_size, 0x1000);
    // TD1 on its own has no destination strides.
    assert_eq!(
        validate(&td1, 0x268, 1),
        Err(TdError::RegisterNotSet {
            td: 0,
            reg: tile_dst::ROW_STRIDE
        })
    );
    // Nor may the kernel DMA configuration be missing.
    let td = encode(&h, &img, &Block::ALL, &[kdma::COEFF_DMA_CONFIG.at(5)]);
    assert_eq!(
        validate(&td, td.len() as u32, 1),
        Err(TdError::RegisterNotSet {
            td: 0,
            reg: kdma::COEFF_DMA_CONFIG.at(5)
        })
    );
}

// ---------------------------------------------------------------------------
// Mutations

/// Applies each mutation to a fresh copy of a one-TD, two-input,
/// one-output program and checks the error.
fn single_td_mutations(name: &str, base: &[u8]) {
    let n = TD_SIZE_STANDARD;
    assert!(validate(base, n, 1).is_ok(), "{name} itself");
    let check = |what: &str, f: &dyn Fn(&mut Vec<u8>), want: TdError| {
        let mut p = base.to_vec();
        f(&mut p);
        let got = validate(&p, n, 1);
        assert_eq!(got, Err(want), "{name}: {what}");
        // Every error renders a message naming the TD.
        let msg = want.to_string();
        assert!(!msg.is_empty());
    };
    let hdr = |reg: Reg| {
        let b = Block::ALL.iter().position(|b| *b == reg.block).unwrap();
        let mut pos = HEADER_SIZE as usize;
        for bb in &Block::ALL[..b] {
            pos += 4 + 4 * bb.words() as usize;
        }
        pos
    };
    let pe_hdr = hdr(pe::CFG);
    let ne_hdr = hdr(ne::KERNEL_CFG);
    let dst_hdr = hdr(tile_dst::DMA_CONFIG);
    let common_hdr = hdr(common::IN_DIM);
    let w8 = rd32(base, 0x20);
    let set = |reg: Reg, v: u32| move |p: &mut Vec<u8>| wr32(p, std_off(reg), v);

    // Size and count.
    assert_eq!(
        validate(&base[..0x270], n, 1),
        Err(TdError::ProgramTooShort {
            needed: 0x274,
            len: 0x270
        })
    );
    assert_eq!(
        validate(&[], n, 1),
        Err(TdError::ProgramTooShort {
            needed: 0x274,
            len: 0
        })
    );
    for bad in [0, 4, 0x2C, 0x275, 0x804, 0x1000, u32::MAX] {
        assert_eq!(
            validate(base, bad, 1),
            Err(TdError::TdSize { td_size: bad }),
            "{name}"
        );
    }
    for bad in [0, 0x1_0000, u32::MAX] {
        assert_eq!(
            validate(base, n, bad),
            Err(TdError::TdCount { td_count: bad }),
            "{name}"
        );
    }
    assert_eq!(
        validate(base, n, 2),
        Err(TdError::ProgramTooShort {
            needed: 0x4E8,
            len: base.len() as u64
        })
    );
    // td_size other than the TD's: the extra words are parsed as streams.
    let mut long = base.to_vec();
    long.extend_from_slice(&[0; 12]);
    assert!(matches!(
        validate(&long, 0x280, 1),
        Err(TdError::DuplicateRegister {
            td: 0,
            offset: 0x274,
            ..
        })
    ));
    assert!(matches!(
        validate(base, 0x270, 1),
        Err(TdError::StreamOverrun { td: 0, .. })
    ));

    // Streams.
    let dst_h = rd32(base, dst_hdr);
    check(
        "stream overrunning the TD",
        &|p: &mut Vec<u8>| wr32(p, dst_hdr, decode::StreamHeader::new(0x17800, 8).unwrap().0),
        TdError::StreamOverrun {
            td: 0,
            offset: dst_hdr as u32,
            header: 0x1C01_7800,
        },
    );
    check(
        "unaligned stream address",
        &|p: &mut Vec<u8>| wr32(p, dst_hdr, dst_h + 2),
        TdError::StreamUnaligned {
            td: 0,
            offset: dst_hdr as u32,
            header: dst_h + 2,
        },
    );
    check(
        "unknown block address",
        &|p: &mut Vec<u8>| wr32(p, pe_hdr, 0x0C00_9800),
        TdError::UnknownRegister {
            td: 0,
            offset: pe_hdr as u32,
            header: 0x0C00_9800,
            addr: 0x9800,
        },
    );
    check(
        "stream past its block window",
        &|p: &mut Vec<u8>| wr32(p, common_hdr, 0xFC00_0000),
        TdError::UnknownRegister {
            td: 0,
            offset: common_hdr as u32,
            header: 0xFC00_0000,
            addr: 0x40,
        },
    );
    check(
        "address beyond 26 bits (EILN's 24-bit reading agrees it is unknown)",
        &|p: &mut Vec<u8>| wr32(p, pe_hdr, 0x0D00_8800),
        TdError::UnknownRegister {
            td: 0,
            offset: pe_hdr as u32,
            header: 0x0D00_8800,
            addr: 0x100_8800,
        },
    );
    check(
        "two streams writing one register",
        &|p: &mut Vec<u8>| wr32(p, ne_hdr, 0x1000_8800),
        TdError::DuplicateRegister {
            td: 0,
            offset: ne_hdr as u32,
            reg: pe::CFG,
        },
    );

    // Header.
    for (word, bit) in [
        (0usize, 26u32),
        (1, 31),
        (2, 24),
        (6, 30),
        (6, 0),
        (8, 27),
        (9, 24),
    ] {
        let at = 4 * word;
        let v = rd32(base, at) | (1 << bit);
        check(
            "reserved header bit",
            &move |p: &mut Vec<u8>| wr32(p, at, v),
            TdError::ReservedHeaderBits {
                td: 0,
                word: word as u8,
                bits: 1 << bit,
            },
        );
    }
    let w0 = rd32(base, 0);
    check(
        "no EON on the last TD",
        &|p: &mut Vec<u8>| wr32(p, 0, w0 & !(1 << 25)),
        TdError::Chain {
            td: 0,
            fault: ChainFault::MissingEnd,
        },
    );
    check(
        "last TD links on",
        &|p: &mut Vec<u8>| wr32(p, 0x1C, 0x300),
        TdError::Chain {
            td: 0,
            fault: ChainFault::LinkAfterEnd {
                next_size: 0,
                next_pointer: 0x300,
            },
        },
    );
    check(
        "last TD announces a next size",
        &|p: &mut Vec<u8>| wr32(p, 4, 0x9C_0000),
        TdError::Chain {
            td: 0,
            fault: ChainFault::LinkAfterEnd {
                next_size: 0x9C,
                next_pointer: 0,
            },
        },
    );

    // Protected slots.
    for slot in [0u32, 1] {
        let v = header::WBASE.put(w8, slot);
        check(
            "DMA write into the command/kernel slot",
            &move |p: &mut Vec<u8>| wr32(p, 0x20, v),
            TdError::WriteToProtectedSlot {
                td: 0,
                slot: slot as u8,
            },
        );
        // Still refused with WBE clear, as DstLoc and the DMA enable are set.
        let v = header::WBE.put(header::WBASE.put(w8, slot), 0);
        check(
            "DMA write with WBE clear",
            &move |p: &mut Vec<u8>| wr32(p, 0x20, v),
            TdError::WriteToProtectedSlot {
                td: 0,
                slot: slot as u8,
            },
        );
    }
    // With WBE, DstLoc and the enable all clear there is no write.
    let mut p = base.to_vec();
    wr32(&mut p, 0x20, header::WBE.put(header::WBASE.put(w8, 0), 0));
    wr32(&mut p, 0x18, header::DST_LOC.put(rd32(base, 0x18), 0));
    wr32(
        &mut p,
        std_off(tile_dst::DMA_CONFIG),
        rd32(base, std_off(tile_dst::DMA_CONFIG)) & !1,
    );
    let s = validate(&p, n, 1).unwrap();
    assert!(s.outputs.is_empty() && s.tile_writes().is_empty(), "{name}");

    // Extents.
    check(
        "plane stride overflowing 4 GiB",
        &set(tile_dst::PLANE_STRIDE, 0xFFFF_FFC0),
        TdError::ExtentTooLarge {
            td: 0,
            dma: Dma::TileDst,
        },
    );
    check(
        "depth stride times a huge depth",
        &|p: &mut Vec<u8>| {
            wr32(p, std_off(tile_dst::DEPTH_STRIDE), 0xFFFF_FFC0);
            wr32(p, std_off(common::OUT_DEPTH), u32::MAX);
        },
        TdError::ExtentTooLarge {
            td: 0,
            dma: Dma::TileDst,
        },
    );
    check(
        "every stride and count at its maximum",
        &|p: &mut Vec<u8>| {
            for r in tile_src::surface(0) {
                wr32(p, std_off(r), 0xFFFF_FFC0);
            }
            wr32(p, std_off(common::IN_DIM), u32::MAX);
            wr32(p, std_off(common::CIN), u32::MAX);
            wr32(p, std_off(common::IN_DEPTH), u32::MAX);
            wr32(p, std_off(common::GROUP_CONV_CFG), u32::MAX);
        },
        TdError::ExtentTooLarge {
            td: 0,
            dma: Dma::TileSrc(0),
        },
    );
    check(
        "base at the end of the 4 GiB",
        &set(tile_src::SRC1_BASE_ADDR, 0xFFFF_FFC0),
        TdError::ExtentTooLarge {
            td: 0,
            dma: Dma::TileSrc(1),
        },
    );
    check(
        "misaligned stride",
        &set(tile_src::ROW_STRIDE, 0x41),
        TdError::Misaligned {
            td: 0,
            reg: tile_src::ROW_STRIDE,
            value: 0x41,
        },
    );
    check(
        "misaligned base",
        &set(tile_dst::BASE_ADDR, 0x20),
        TdError::Misaligned {
            td: 0,
            reg: tile_dst::BASE_ADDR,
            value: 0x20,
        },
    );
    let ch = rd32(base, std_off(common::CH_CFG));
    check(
        "unknown input format",
        &set(common::CH_CFG, ch | 3),
        TdError::UnknownFormat {
            td: 0,
            reg: common::CH_CFG,
            code: 3,
        },
    );
    check(
        "unknown output format",
        &set(common::CH_CFG, ch | 0x30),
        TdError::UnknownFormat {
            td: 0,
            reg: common::CH_CFG,
            code: 3,
        },
    );
    check(
        "zero input channels",
        &set(common::CIN, 0),
        TdError::ZeroDimension {
            td: 0,
            dma: Dma::TileSrc(0),
            reg: common::CIN,
        },
    );
    check(
        "zero output width",
        &set(common::OUT_DIM, 0x1_0000),
        TdError::ZeroDimension {
            td: 0,
            dma: Dma::TileDst,
            reg: common::OUT_DIM,
        },
    );
    check(
        "zero groups",
        &set(common::GROUP_CONV_CFG, 0x1_0000),
        TdError::ZeroDimension {
            td: 0,
            dma: Dma::TileSrc(0),
            reg: common::GROUP_CONV_CFG,
        },
    );
    check(
        "zero depth",
        &set(common::IN_DEPTH, 0),
        TdError::ZeroDimension {
            td: 0,
            dma: Dma::TileSrc(0),
            reg: common::IN_DEPTH,
        },
    );

    // Kernel DMA.
    check(
        "coefficient channel without KBase",
        &|p: &mut Vec<u8>| {
            wr32(p, std_off(kdma::COEFF_DMA_CONFIG.at(2)), 0x81);
            wr32(p, 0x24, 0);
        },
        TdError::CoeffWithoutKernelBase { td: 0, channel: 2 },
    );
    check(
        "extra kernel DMA channel enabled",
        &set(kdma::EXTRA_CONFIG.at(2), 0x81),
        TdError::UnsupportedDma {
            td: 0,
            reg: kdma::EXTRA_CONFIG.at(2),
        },
    );
    check(
        "coefficients past 4 GiB",
        &|p: &mut Vec<u8>| {
            wr32(p, 0x24, 0x21);
            wr32(p, std_off(kdma::COEFF_DMA_CONFIG.at(3)), 0x81);
            wr32(p, std_off(kdma::COEFF_BASE_ADDR.at(3)), 0xFFFF_FFC0);
            wr32(p, std_off(kdma::COEFF_BFR_SIZE.at(3)), 0x80);
        },
        TdError::ExtentTooLarge {
            td: 0,
            dma: Dma::Kernel,
        },
    );
    check(
        "misaligned coefficient base",
        &|p: &mut Vec<u8>| {
            wr32(p, 0x24, 0x21);
            wr32(p, std_off(kdma::COEFF_DMA_CONFIG.at(0)), 0x81);
            wr32(p, std_off(kdma::COEFF_BASE_ADDR.at(0)), 0x44);
        },
        TdError::Misaligned {
            td: 0,
            reg: kdma::COEFF_BASE_ADDR,
            value: 0x44,
        },
    );
    // A valid coefficient load up to exactly 4 GiB, through KBase2 = slot 7.
    let mut p = base.to_vec();
    wr32(
        &mut p,
        0x24,
        header::KBASE0.put(0, 0) | (7 << 12) | (1 << 17),
    );
    wr32(&mut p, std_off(kdma::COEFF_DMA_CONFIG.at(15)), 0x81);
    wr32(&mut p, std_off(kdma::COEFF_BASE_ADDR.at(15)), 0xFFFF_FF80);
    wr32(&mut p, std_off(kdma::COEFF_BFR_SIZE.at(15)), 0x80);
    let s = validate(&p, n, 1).unwrap();
    assert_eq!(s.kernel_reads(), mask(&[7]));
    assert_eq!(s.slots[7].min_size, MAX_DMA_EXTENT);
    assert!(
        s.inputs.contains(7),
        "runtime weights in slot 7 are an input"
    );
}

#[test]
fn mutations_of_synthetic_add_are_rejected() {
    single_td_mutations("synthetic add", &synthetic_add_td());
}

#[test]
fn mutations_of_real_fixtures_are_rejected() {
    let dir = fixtures_or_skip!();
    for name in [
        "tinygrad_sum.hwx",
        "mul_zin541_macos12.hwx",
        "mul_zin764_macos14.hwx",
    ] {
        let h = hwx(&dir, name);
        single_td_mutations(name, h.program());
    }
}

fn chain_mutations(name: &str, base: &[u8]) {
    let n = TD_SIZE_STANDARD;
    let len = base.len() as u64;
    validate(base, n, 2).unwrap();
    let check = |what: &str, at: usize, v: u32, want: TdError| {
        let mut p = base.to_vec();
        wr32(&mut p, at, v);
        assert_eq!(validate(&p, n, 2), Err(want), "{name}: {what}");
        // The walk itself reports link errors too.
        if let TdError::Chain { fault, .. } = want {
            if !matches!(
                fault,
                ChainFault::NextSize { .. } | ChainFault::EarlyEnd | ChainFault::MissingEnd
            ) {
                let prog = Program::new(&p, n, 2).unwrap();
                let items: Vec<_> = prog.tds().collect();
                assert_eq!(items.len(), 2);
                assert_eq!(items[1].as_ref().err(), Some(&want));
            }
        }
    };
    let chain = |fault| TdError::Chain { td: 0, fault };
    check(
        "NextPointer outside",
        0x1C,
        0x400,
        chain(ChainFault::NextPointerOutside { next: 0x400, len }),
    );
    check(
        "NextPointer huge",
        0x1C,
        0xFFFF_FFFC,
        chain(ChainFault::NextPointerOutside {
            next: 0xFFFF_FFFC,
            len,
        }),
    );
    check(
        "NextPointer backwards",
        0x1C,
        0x100,
        chain(ChainFault::NextPointerBackwards { next: 0x100 }),
    );
    check(
        "NextPointer to itself",
        0x1C,
        0,
        chain(ChainFault::NextPointerBackwards { next: 0 }),
    );
    check(
        "NextPointer unaligned",
        0x1C,
        0x302,
        chain(ChainFault::NextPointerUnaligned { next: 0x302 }),
    );
    check(
        "NextSize wrong",
        4,
        0x9B_0000,
        chain(ChainFault::NextSize {
            found: 0x9B,
            expected: 0x9C,
        }),
    );
    check(
        "NextSize larger than the TD",
        4,
        0x1FF_0000,
        chain(ChainFault::NextSize {
            found: 0x1FF,
            expected: 0x9C,
        }),
    );
    check(
        "EON before the end",
        0,
        rd32(base, 0) | (1 << 25),
        chain(ChainFault::EarlyEnd),
    );
    // Counting only the first TD: it does not end the network.
    assert_eq!(validate(base, n, 1), Err(chain(ChainFault::MissingEnd)));
    assert_eq!(
        validate(base, n, 3),
        Err(TdError::ProgramTooShort { needed: 0x75C, len })
    );
    // Cut inside TD1.
    assert_eq!(
        validate(&base[..0x500], n, 2),
        Err(chain(ChainFault::NextPointerOutside {
            next: 0x300,
            len: 0x500
        }))
    );
    // A fault in TD1 names TD1.
    let mut p = base.to_vec();
    wr32(
        &mut p,
        0x300 + 0x20,
        header::WBASE.put(rd32(base, 0x320), 0),
    );
    assert_eq!(
        validate(&p, n, 2),
        Err(TdError::WriteToProtectedSlot { td: 1, slot: 0 })
    );
    let err = validate(&p, n, 2).unwrap_err().to_string();
    assert!(err.starts_with("TD 1: "), "{err}");
}

#[test]
fn chain_mutations_of_synthetic_chain_are_rejected() {
    chain_mutations("synthetic chain", &synthetic_chain());
}

#[test]
fn chain_mutations_of_concat_are_rejected() {
    let dir = fixtures_or_skip!();
    chain_mutations("concat", hwx(&dir, "tinygrad_concat.hwx").program());
}

#[test]
fn error_messages_name_registers() {
    let e = TdError::RegisterNotSet {
        td: 3,
        reg: tile_dst::ROW_STRIDE,
    };
    assert_eq!(
        e.to_string(),
        "TD 3: TileDMADst.RowStride (address 0x17808) is used but no TD of the program has written it"
    );
    let e = TdError::UnknownRegister {
        td: 0,
        offset: 0x228,
        header: 0x0C00_9800,
        addr: 0x9800,
    };
    assert_eq!(
        e.to_string(),
        "TD 0: stream at 0x228 (header 0x0c009800) writes unknown register address 0x09800"
    );
    let e = TdError::Chain {
        td: 1,
        fault: ChainFault::NextSize {
            found: 0x9B,
            expected: 0x9C,
        },
    };
    assert_eq!(
        e.to_string(),
        "TD 1: NextSize is 0x9b but TDs of this program need 0x9c"
    );
    assert_eq!(
        BufferError {
            slot: 4,
            required: 0x1000,
            bound: 0xFC0
        }
        .to_string(),
        "BAR slot 4: program needs 0x1000 bytes, buffer has 0xfc0"
    );
    assert_eq!(
        SlotUsage::TILE_READ
            .union(SlotUsage::KERNEL_READ)
            .to_string(),
        "tile-read|kernel-read"
    );
    assert_eq!(SlotUsage::NONE.to_string(), "unused");
}

// ---------------------------------------------------------------------------
// Fuzzing

/// Decodes and validates `p` every way the API allows; returns whether the
/// program validated. Any panic fails the test.
fn exercise(p: &[u8], td_size: u32, td_count: u32) -> bool {
    let Ok(prog) = Program::new(p, td_size, td_count) else {
        return false;
    };
    let mut state = RegImage::new();
    for td in prog.tds() {
        let Ok(td) = td else { break };
        let h = td.header();
        let _ = (
            h.rbase(0),
            h.rbase(1),
            h.wbase(),
            h.tbase(),
            h.kbase(3),
            h.next_size(),
        );
        for s in td.streams() {
            let Ok(s) = s else { break };
            for (a, _) in s.writes() {
                let _ = Reg::from_addr(a).and_then(Reg::image_index);
            }
        }
        if let Ok(img) = td.decode() {
            state.apply(&img);
            let _ = (
                state.common().in_dim(),
                state.tile_src().surface(1),
                state.kernel_dma().enabled_channels(),
            );
        }
    }
    match prog.validate() {
        Ok(s) => {
            // Invariants of every accepted program.
            assert!(s.span <= p.len() as u64);
            assert!(s.slots[0].usage.contains(SlotUsage::COMMAND));
            assert!(s.slots[0].min_size >= s.span);
            for slot in [0usize, 1] {
                assert!(!s.slots[slot].usage.contains(SlotUsage::TILE_WRITE));
            }
            for info in &s.slots[1..] {
                assert!(info.min_size <= MAX_DMA_EXTENT);
                assert_eq!(info.min_size % DMA_GRANULE, 0, "extents are whole granules");
            }
            let _ = s.to_string();
            true
        }
        Err(e) => {
            let _ = e.to_string();
            false
        }
    }
}

#[test]
fn fuzz_random_bytes_never_panic() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for _ in 0..4000 {
        let len = rng.below(0x1400) as usize;
        let mut p: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Bias towards plausible shapes so the walk gets past the first checks.
        if rng.below(2) == 0 && len >= 0x30 {
            for pos in
                (0x28..len.min(0x274).saturating_sub(3)).step_by(4 * (1 + rng.below(16) as usize))
            {
                let b = Block::ALL[rng.below(7) as usize];
                let h = ((rng.below(u64::from(b.words())) as u32) << 26)
                    | (b.base() + 4 * rng.below(8) as u32);
                p[pos..pos + 4].copy_from_slice(&h.to_le_bytes());
            }
        }
        let td_size = match rng.below(4) {
            0 => TD_SIZE_STANDARD,
            1 => TD_SIZE_COMPACT,
            2 => (rng.below(0x900) as u32) & !3,
            _ => rng.next() as u32,
        };
        let td_count = match rng.below(3) {
            0 => 1,
            1 => 1 + rng.below(8) as u32,
            _ => rng.next() as u32,
        };
        exercise(&p, td_size, td_count);
    }
}

fn mutate_and_exercise(
    rng: &mut Rng,
    base: &[u8],
    td_size: u32,
    td_count: u32,
    rounds: usize,
) -> usize {
    let mut ok = 0;
    for _ in 0..rounds {
        let mut p = base.to_vec();
        for _ in 0..1 + rng.below(6) {
            let i = rng.below(p.len() as u64) as usize & !3;
            let old = rd32(&p, i);
            let v = match rng.below(6) {
                0 => old ^ (1 << rng.below(32)),
                1 => rng.next() as u32,
                2 => 0,
                3 => u32::MAX,
                4 => old.wrapping_add(4),
                _ => {
                    old & 0xFC00_0000
                        | (Block::ALL[rng.below(7) as usize].base() + 4 * rng.below(64) as u32)
                }
            };
            wr32(&mut p, i, v);
        }
        if rng.below(8) == 0 {
            let cut = rng.below(p.len() as u64 + 1) as usize;
            p.truncate(cut);
        }
        if exercise(&p, td_size, td_count) {
            ok += 1;
        }
    }
    ok
}

#[test]
fn fuzz_mutated_synthetic_programs_never_panic() {
    let mut rng = Rng(0xDEAD_BEEF_0BAD_F00D);
    let one = synthetic_add_td();
    let two = synthetic_chain();
    let survived = mutate_and_exercise(&mut rng, &one, TD_SIZE_STANDARD, 1, 2500)
        + mutate_and_exercise(&mut rng, &two, TD_SIZE_STANDARD, 2, 1500);
    // Many mutations hit values the validator does not look at.
    assert!(survived > 100, "{survived}");
}

#[test]
fn fuzz_mutated_fixtures_never_panic() {
    let dir = fixtures_or_skip!();
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    for name in HWX_FIXTURES {
        let h = hwx(&dir, name);
        mutate_and_exercise(&mut rng, h.program(), h.td_size, h.td_count, 500);
    }
    for (_, p) in eiln_kernels(&dir).iter().step_by(3) {
        let n = count_tds(p);
        mutate_and_exercise(&mut rng, p, TD_SIZE_STANDARD, n, 120);
    }
}

#[test]
fn field_constants_match_header_layout() {
    // W9 KBase3 at bits 18..22, its enable at 23 (one pattern for all four).
    let mut h = Header::default();
    h.words[9] = (9 << 18) | (1 << 23);
    assert_eq!(h.kbase(3), Some(9));
    let f = Field::new(18, 5);
    assert_eq!(f.get(h.words[9]), 9);
}

#[test]
#[ignore = "prints the summary of every fixture"]
fn print_fixture_summaries() {
    let dir = fixtures_or_skip!();
    for name in HWX_FIXTURES {
        println!("{name}: {}", hwx(&dir, name).summary());
    }
    for (name, p) in eiln_kernels(&dir) {
        let s = validate(&p, TD_SIZE_STANDARD, count_tds(&p)).unwrap();
        println!(
            "{name}: {s}; inputs {:#x} outputs {:#x}",
            s.inputs.0, s.outputs.0
        );
    }
}

// ---------------------------------------------------------------------------
// The eleven-word header (W9 with both low bits set).

/// A one-TD program whose header is `words` (W9 = `w9`), followed by
/// `extra`, then one stream writing `value` to the first common register.
fn one_stream_td(w9: u32, extra: &[u32], value: u32) -> Vec<u8> {
    let mut words = [0u32; HEADER_WORDS];
    words[9] = w9;
    let mut out = Vec::new();
    for w in words.iter().chain(extra) {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let h = decode::StreamHeader::new(Block::Common.base(), 1).unwrap();
    out.extend_from_slice(&h.0.to_le_bytes());
    out.extend_from_slice(&value.to_le_bytes());
    out
}

#[test]
fn eleven_word_header_skips_its_extra_word() {
    assert_eq!(header_len_words(0x21), 10);
    assert_eq!(header_len_words(0x23), 11);
    // W9 & 3 == 3: the word after the header is not a stream header, even
    // one that would decode as a stream.
    let bogus = decode::StreamHeader::new(Block::Common.base() + 4, 1)
        .unwrap()
        .0;
    let td = one_stream_td(0x23, &[bogus], 0x1234_5678);
    let prog = Program::new(&td, td.len() as u32, 1).unwrap();
    let t = prog.tds().next().unwrap().unwrap();
    assert_eq!(t.header_len(), 44);
    let streams: Vec<_> = t.streams().map(|s| s.unwrap()).collect();
    assert_eq!(streams.len(), 1);
    assert_eq!(
        streams[0].writes().next(),
        Some((Block::Common.base(), 0x1234_5678))
    );
    // The same bytes read with a ten-word header see the extra word as a
    // stream: the rule changes what is decoded.
    let td10 = one_stream_td(0x21, &[bogus], 0x1234_5678);
    let prog = Program::new(&td10, td10.len() as u32, 1).unwrap();
    let t = prog.tds().next().unwrap().unwrap();
    assert_eq!(t.header_len(), 40);
    assert_eq!(
        t.streams()
            .next()
            .unwrap()
            .unwrap()
            .writes()
            .next()
            .map(|w| w.0),
        Some(Block::Common.base() + 4)
    );
}

/// `n` copies of the synthetic add chained every 0x300 bytes, as
/// [`synthetic_chain`] chains two.
fn synthetic_chain_of(n: u32) -> Vec<u8> {
    let td = synthetic_add_td();
    let mut p = vec![0u8; 0x300 * (n as usize - 1) + td.len()];
    for k in 0..n as usize {
        p[0x300 * k..0x300 * k + td.len()].copy_from_slice(&td);
        let at = 0x300 * k;
        if k + 1 < n as usize {
            wr32(&mut p, at, k as u32);
            wr32(&mut p, at + 4, header::NEXT_SIZE.put(0, 0x9C));
            wr32(&mut p, at + 0x1C, (0x300 * (k + 1)) as u32);
        } else {
            wr32(&mut p, at, 0x0300_0000 | k as u32);
        }
    }
    p
}

/// kernel-2 N9: validating a long stream gives the caller a chance to
/// yield the CPU every `TDS_PER_TICK` TDs (the kernel's `cond_resched()`),
/// and the result is the same as without.
#[test]
fn long_stream_validation_ticks() {
    let n = 3 * TDS_PER_TICK + 5;
    let p = synthetic_chain_of(n);
    let prog = Program::new(&p, TD_SIZE_STANDARD, n).unwrap();
    let mut ticks = 0u32;
    let with = prog.validate_with(|| ticks += 1).unwrap();
    assert_eq!(ticks, n / TDS_PER_TICK);
    assert_eq!(with, prog.validate().unwrap());
}
