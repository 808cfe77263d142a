// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Host tests of the engine model: the compiled fixture programs run on
//! random binary16 data in a `Vec`-backed device memory and are compared
//! with CPU references computed here, independently of the engine (from
//! exact `f64` arithmetic rounded once, or `f32` accumulation for
//! convolutions); DMA faults, the operation budget, refused features,
//! broken chains, and a fuzz loop over mutated programs.
//!
//! Fixtures come from `../shared/fixtures` through the TD tests' loaders;
//! without that directory the fixture tests print a skip message and pass.

extern crate std;

use std::collections::BTreeMap;
use std::fs;
use std::println;
use std::string::String;
use std::vec;
use std::vec::Vec;

use super::super::td::header;
use super::super::td::regs::{
    common, kdma, ne, pe, tile_dst, tile_src, Block, ConvCfg, MacCfg, Reg, IMAGE_WORDS,
};
use super::super::td::tests::{count_tds, eiln_kernels, fixtures_dir, hwx, Hwx, Role};
use super::super::td::{
    ChainFault, Dma as DmaKind, StreamHeader, TdError, HEADER_SIZE, TD_SIZE_STANDARD,
};
use super::super::test_rng::Rng;
use super::fp_tests::{ref_round, EDGES16};
use super::*;

macro_rules! fixtures_or_skip {
    () => {
        match fixtures_dir() {
            Some(d) => d,
            None => return,
        }
    };
}

// ---------------------------------------------------------------------------
// Device memory

/// Sparse device memory: mapped regions, everything else faults.
#[derive(Clone, Default)]
struct Mem {
    regions: BTreeMap<u64, Vec<u8>>,
}

impl Mem {
    fn map(&mut self, iova: u64, bytes: Vec<u8>) {
        self.regions.insert(iova, bytes);
    }

    /// The region holding `iova` and the offset in it.
    fn find(&self, iova: u64) -> Option<(u64, usize)> {
        let (&base, data) = self.regions.range(..=iova).next_back()?;
        let off = (iova - base) as usize;
        (off < data.len()).then_some((base, off))
    }

    /// Walks `[iova, iova + len)` region by region; faults at the first
    /// unmapped byte.
    fn walk(
        &mut self,
        iova: u64,
        len: usize,
        mut f: impl FnMut(&mut [u8], usize),
    ) -> Result<(), Fault> {
        let mut done = 0usize;
        while done < len {
            let addr = iova
                .checked_add(done as u64)
                .ok_or(Fault { iova: u64::MAX })?;
            let (base, off) = self.find(addr).ok_or(Fault { iova: addr })?;
            let data = self.regions.get_mut(&base).unwrap();
            let n = (data.len() - off).min(len - done);
            f(&mut data[off..off + n], done);
            done += n;
        }
        Ok(())
    }

    fn bytes(&self, iova: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let (base, off) = self.find(iova + out.len() as u64).expect("mapped");
            let data = &self.regions[&base];
            let n = (data.len() - off).min(len - out.len());
            out.extend_from_slice(&data[off..off + n]);
        }
        out
    }

    fn put(&mut self, iova: u64, src: &[u8]) {
        self.walk(iova, src.len(), |d, at| {
            let n = d.len();
            d.copy_from_slice(&src[at..at + n])
        })
        .unwrap();
    }
}

impl Dma for Mem {
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let len = buf.len();
        self.walk(iova, len, |d, at| buf[at..at + d.len()].copy_from_slice(d))
    }

    fn write(&mut self, iova: u64, buf: &[u8]) -> Result<(), Fault> {
        self.walk(iova, buf.len(), |d, at| {
            let n = d.len();
            d.copy_from_slice(&buf[at..at + n])
        })
    }
}

// ---------------------------------------------------------------------------
// Tensors

/// A tensor in the ANE's strided layout: element (c, h, w) at
/// `c · plane + h · row + 2 · w`.
#[derive(Clone, Copy, Debug)]
struct Layout {
    c: usize,
    h: usize,
    w: usize,
    row: u64,
    plane: u64,
}

impl Layout {
    const fn new(c: usize, h: usize, w: usize, row: u64, plane: u64) -> Layout {
        Layout {
            c,
            h,
            w,
            row,
            plane,
        }
    }

    fn len(&self) -> usize {
        self.c * self.h * self.w
    }

    fn put(&self, mem: &mut Mem, base: u64, data: &[u16]) {
        assert_eq!(data.len(), self.len());
        for c in 0..self.c {
            for y in 0..self.h {
                let at = base + c as u64 * self.plane + y as u64 * self.row;
                let row = &data[(c * self.h + y) * self.w..][..self.w];
                let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
                mem.put(at, &bytes);
            }
        }
    }

    fn get(&self, mem: &Mem, base: u64) -> Vec<u16> {
        let mut out = Vec::with_capacity(self.len());
        for c in 0..self.c {
            for y in 0..self.h {
                let at = base + c as u64 * self.plane + y as u64 * self.row;
                let b = mem.bytes(at, 2 * self.w);
                out.extend(b.chunks(2).map(|p| u16::from_le_bytes([p[0], p[1]])));
            }
        }
        out
    }

    /// The bytes between each row's data and the next 64-byte granule.
    fn padding(&self, mem: &Mem, base: u64) -> Vec<u8> {
        let data = 2 * self.w as u64;
        let pad = data.next_multiple_of(64) - data;
        let mut out = Vec::new();
        for c in 0..self.c {
            for y in 0..self.h {
                let at = base + c as u64 * self.plane + y as u64 * self.row + data;
                out.extend(mem.bytes(at, pad as usize));
            }
        }
        out
    }
}

/// Random binary16 values of every class (a quarter from the edge list).
fn random_f16(rng: &mut Rng, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| {
            if rng.below(4) == 0 {
                EDGES16[rng.below(EDGES16.len() as u64) as usize]
            } else {
                rng.u16()
            }
        })
        .collect()
}

/// Random finite binary16 values in ±`2^k` (with zeros and subnormals).
fn random_finite(rng: &mut Rng, n: usize, k: i32, positive: bool) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let e = rng.below((k + 15) as u64 + 1) as u16; // 0 (subnormal) ..= k + 15
            let m = rng.u16() & 0x3FF;
            let s = if positive { 0 } else { rng.u16() & 0x8000 };
            s | (e << 10) | m
        })
        .collect()
}

fn val(b: u16) -> f64 {
    f64::from(half::f16::from_bits(b).to_f32())
}

fn is_nan16(b: u16) -> bool {
    b & 0x7FFF > 0x7C00
}

/// Distance in units in the last place between two binary16 values (equal
/// NaNs 0, NaN against a number `u32::MAX`).
fn ulps(a: u16, b: u16) -> u32 {
    match (is_nan16(a), is_nan16(b)) {
        (true, true) => return 0,
        (false, false) => {}
        _ => return u32::MAX,
    }
    let key = |v: u16| -> i32 {
        let m = i32::from(v & 0x7FFF);
        if v & 0x8000 != 0 {
            -m
        } else {
            m
        }
    };
    key(a).abs_diff(key(b))
}

/// The largest ulp distance between two outputs, and the number of
/// elements that differ at all.
fn compare(got: &[u16], want: &[u16]) -> (u32, usize) {
    assert_eq!(got.len(), want.len());
    let mut max = 0;
    let mut diff = 0;
    for (&g, &w) in got.iter().zip(want) {
        let d = ulps(g, w);
        max = max.max(d);
        diff += usize::from(d != 0);
    }
    (max, diff)
}

fn assert_bit_exact(what: &str, got: &[u16], want: &[u16]) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what}: element {i}: got {g:#06x}, want {w:#06x}");
    }
    assert_eq!(got.len(), want.len());
}

// References, from the definitions (see the engine documentation for the
// NaN and signed-zero rules).

fn r_add(a: u16, b: u16, r: Rounding) -> u16 {
    ref_round(val(a) + val(b), r, false)
}
fn r_mul(a: u16, b: u16, r: Rounding) -> u16 {
    ref_round(val(a) * val(b), r, false)
}
fn r_max(a: u16, b: u16) -> u16 {
    let (x, y) = (val(a), val(b));
    if x.is_nan() || y.is_nan() {
        0x7E00
    } else if x == y {
        a & b // ±0: +0 wins
    } else if x > y {
        a
    } else {
        b
    }
}
fn r_min(a: u16, b: u16) -> u16 {
    let (x, y) = (val(a), val(b));
    if x.is_nan() || y.is_nan() {
        0x7E00
    } else if x == y {
        a | b
    } else if x < y {
        a
    } else {
        b
    }
}
fn r_relu(a: u16) -> u16 {
    let x = val(a);
    if x.is_nan() {
        0x7E00
    } else if x > 0.0 {
        a
    } else {
        0
    }
}
fn canon(a: u16) -> u16 {
    if is_nan16(a) {
        0x7E00
    } else {
        a
    }
}

/// `Σ x[i] · w[i]` the way the project's CPU reference does it: exact
/// binary32 products added in `f32` in ascending order from +0, rounded
/// once to binary16.
fn r_dot_f32(x: &[u16], w: &[u16], r: Rounding) -> u16 {
    let mut acc = 0f32;
    for (&a, &b) in x.iter().zip(w) {
        acc += half::f16::from_bits(a).to_f32() * half::f16::from_bits(b).to_f32();
    }
    ref_round(f64::from(acc), r, false)
}

/// The exactly rounded dot product (`f64` is exact for these sizes when
/// every term has the same sign).
fn r_dot_exact(x: &[u16], w: &[u16]) -> u16 {
    let s: f64 = x.iter().zip(w).map(|(&a, &b)| val(a) * val(b)).sum();
    ref_round(s, Rounding::NearestEven, false)
}

/// The non-linearity table evaluated in `f64` by the rules documented in
/// `lut.rs`, rounded once.
fn r_lut(tab: &[u16], x: u16) -> u16 {
    let h = |i: usize| val(tab[i]);
    let x = val(x);
    let y = if x.is_nan() {
        f64::NAN
    } else if x < h(0) {
        h(2)
    } else if x > h(1) {
        h(3)
    } else {
        let tail = |s: f64, i: f64| if i == 0.0 { s * x } else { s * x + i };
        if tab[41] == 0x40 {
            if x > 0.0 {
                tail(h(39), h(40))
            } else {
                tail(h(37), h(38))
            }
        } else {
            let t = x * 2f64.powi(i32::from(tab[41])) + 16.0;
            if t < 0.0 {
                tail(h(37), h(38))
            } else if t > 32.0 {
                tail(h(39), h(40))
            } else {
                let i = t.floor() as usize;
                let f = t - t.floor();
                if i == 32 {
                    h(4 + 32)
                } else {
                    h(4 + i) + f * (h(5 + i) - h(4 + i))
                }
            }
        }
    };
    ref_round(y, Rounding::NearestEven, false)
}

// ---------------------------------------------------------------------------
// Running programs

/// A program with its memory, ready to run.
struct Setup {
    mem: Mem,
    bars: [u64; 32],
    td_iova: u64,
    td_size: u32,
    td_count: u32,
}

impl Setup {
    fn run(&mut self, opts: &Options) -> Result<Stats, EngineError> {
        execute(
            &mut self.mem,
            self.td_iova,
            self.td_size,
            self.td_count,
            &self.bars,
            opts,
        )
    }
}

/// Output buffers start filled with this byte, to see what the engine
/// writes.
const SENTINEL: u8 = 0xA5;

/// Maps every slot of an HWX at its compiled address: the TDs, the
/// weights, and input and output buffers of the recorded sizes.
fn hwx_setup(h: &Hwx) -> Setup {
    let mut mem = Mem::default();
    let mut bars = [0u64; 32];
    for slot in 0u8..32 {
        let Some((role, size)) = h.role(slot) else {
            continue;
        };
        let addr = h.slot_addr[slot as usize];
        bars[slot as usize] = addr;
        let bytes = match role {
            Role::Command => h.program().to_vec(),
            Role::Kernel => {
                let s = h.sections.iter().find(|s| s.addr == addr).unwrap();
                h.data[s.offset as usize..][..s.size as usize].to_vec()
            }
            Role::Output => vec![SENTINEL; size as usize],
            _ => vec![0u8; size as usize],
        };
        mem.map(addr, bytes);
    }
    Setup {
        mem,
        bars,
        td_iova: bars[0],
        td_size: h.td_size,
        td_count: h.td_count,
    }
}

/// The slots of an HWX with `role`, in slot order.
fn slots(h: &Hwx, role: Role) -> Vec<u8> {
    (0u8..32)
        .filter(|&s| h.role(s).map(|(r, _)| r) == Some(role.clone()))
        .collect()
}

const ALL_MODES: [Rounding; 2] = [Rounding::NearestEven, Rounding::NearestTiesAway];

fn opts(r: Rounding) -> Options {
    Options {
        rounding: r,
        ..Options::DEFAULT
    }
}

// ---------------------------------------------------------------------------
// HWX fixtures

/// Planar engine add and mul of two (1,64,1,1) tensors: bit-exact in both
/// rounding modes, on random values of every class.
#[test]
fn hwx_elementwise_add_mul_bit_exact() {
    let dir = fixtures_or_skip!();
    let l = Layout::new(64, 1, 1, 0x40, 0x40);
    for (name, mul, zero_pad) in [
        ("tinygrad_sum.hwx", false, false),
        ("mul_zin541_macos12.hwx", true, true),
        ("mul_zin764_macos14.hwx", true, true),
    ] {
        let h = hwx(&dir, name);
        let mut s = hwx_setup(&h);
        let ins = slots(&h, Role::Input);
        let outs = slots(&h, Role::Output);
        assert_eq!((ins.len(), outs.len()), (2, 1), "{name}");
        let mut rng = Rng(0x5EED ^ name.len() as u64);
        for round in 0..200 {
            let a = random_f16(&mut rng, l.len());
            let b = random_f16(&mut rng, l.len());
            l.put(&mut s.mem, s.bars[ins[0] as usize], &a);
            l.put(&mut s.mem, s.bars[ins[1] as usize], &b);
            let r = ALL_MODES[round % 2];
            let st = s.run(&opts(r)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((st.tds, st.ops), (1, 1 + 64));
            let got = l.get(&s.mem, s.bars[outs[0] as usize]);
            let want: Vec<u16> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| if mul { r_mul(x, y, r) } else { r_add(x, y, r) })
                .collect();
            assert_bit_exact(name, &got, &want);
        }
        // Row padding: zeroed when the destination asks for it, untouched
        // otherwise.
        let pad = l.padding(&s.mem, s.bars[outs[0] as usize]);
        let fill = if zero_pad { 0 } else { SENTINEL };
        assert!(pad.iter().all(|&b| b == fill), "{name}: padding");
        println!("{name}: 200 x 64 elements bit-exact (both rounding modes)");
    }
}

/// The hardware transcripts (td.md §1.7): 3 + 2 = 5, 3 · 2 = 6; and the
/// rounding and overflow knobs on a tie and an overflow.
#[test]
fn hwx_transcripts_and_knobs() {
    let dir = fixtures_or_skip!();
    let l = Layout::new(64, 1, 1, 0x40, 0x40);
    for (name, want) in [
        ("tinygrad_sum.hwx", 0x4500u16),
        ("mul_zin541_macos12.hwx", 0x4600),
    ] {
        let h = hwx(&dir, name);
        let mut s = hwx_setup(&h);
        let ins = slots(&h, Role::Input);
        let out = s.bars[slots(&h, Role::Output)[0] as usize];
        l.put(&mut s.mem, s.bars[ins[0] as usize], &[0x4200; 64]); // 3.0
        l.put(&mut s.mem, s.bars[ins[1] as usize], &[0x4000; 64]); // 2.0
        s.run(&Options::DEFAULT).unwrap();
        assert!(l.get(&s.mem, out).iter().all(|&v| v == want), "{name}");
    }
    let h = hwx(&dir, "tinygrad_sum.hwx");
    let mut s = hwx_setup(&h);
    let ins = slots(&h, Role::Input);
    let out = s.bars[4];
    // 1 + 2^-11 is a tie; 65504 + 65504 overflows.
    let mut a = vec![0x3C00u16; 64];
    let mut b = vec![0x1000u16; 64];
    a[1] = 0x7BFF;
    b[1] = 0x7BFF;
    l.put(&mut s.mem, s.bars[ins[0] as usize], &a);
    l.put(&mut s.mem, s.bars[ins[1] as usize], &b);
    s.run(&Options::DEFAULT).unwrap();
    assert_eq!(&l.get(&s.mem, out)[..2], &[0x3C00, 0x7C00]);
    s.run(&Options {
        rounding: Rounding::NearestTiesAway,
        overflow: Overflow::Saturate,
        ..Options::DEFAULT
    })
    .unwrap();
    assert_eq!(&l.get(&s.mem, out)[..2], &[0x3C01, 0x7BFF]);
}

/// Runs a one-input program on every binary16 value, `w` at a time.
fn every_f16_through(s: &mut Setup, input: u64, output: u64, l: Layout) -> (Vec<u16>, Vec<u16>) {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let mut got = Vec::new();
    for chunk in all.chunks(l.len()) {
        let mut x = chunk.to_vec();
        x.resize(l.len(), 0);
        l.put(&mut s.mem, input, &x);
        s.run(&Options::DEFAULT).unwrap();
        got.extend_from_slice(&l.get(&s.mem, output)[..chunk.len()]);
    }
    (all, got)
}

/// ReLU (1,1,1,77) on every binary16 value: bit-exact; row padding zeroed.
#[test]
fn hwx_relu_every_value() {
    let dir = fixtures_or_skip!();
    let h = hwx(&dir, "tinygrad_relu.hwx");
    let mut s = hwx_setup(&h);
    let l = Layout::new(1, 1, 77, 0xC0, 0xC0);
    let (input, output) = (s.bars[5], s.bars[4]);
    let (all, got) = every_f16_through(&mut s, input, output, l);
    let want: Vec<u16> = all.iter().map(|&x| r_relu(x)).collect();
    assert_bit_exact("relu", &got, &want);
    assert!(l.padding(&s.mem, output).iter().all(|&b| b == 0));
    // The transcript: [-3, 5, -1, 2] -> [0, 5, 0, 2].
    let mut x = vec![0u16; 77];
    x[..4].copy_from_slice(&[0xC200, 0x4500, 0xBC00, 0x4000]);
    l.put(&mut s.mem, input, &x);
    s.run(&Options::DEFAULT).unwrap();
    assert_eq!(&l.get(&s.mem, output)[..4], &[0, 0x4500, 0, 0x4000]);
    println!("relu: all 65536 inputs bit-exact");
}

/// Sigmoid through the 128-byte table: every binary16 input within 1 ulp
/// of the table rules evaluated in `f64`, within the interpolation error of
/// the true sigmoid, and exactly the hardware's sigmoid(3) = 0x3B9F.
#[test]
fn hwx_sigmoid_table() {
    let dir = fixtures_or_skip!();
    let h = hwx(&dir, "tinygrad_sigmoid.hwx");
    let mut s = hwx_setup(&h);
    let tab: Vec<u16> = s
        .mem
        .bytes(s.bars[1], 128)
        .chunks(2)
        .map(|p| u16::from_le_bytes([p[0], p[1]]))
        .collect();
    let l = Layout::new(1, 1, 77, 0xC0, 0xC0);
    let (input, output) = (s.bars[5], s.bars[4]);
    let (all, got) = every_f16_through(&mut s, input, output, l);
    let want: Vec<u16> = all.iter().map(|&x| r_lut(&tab, x)).collect();
    let (max, diff) = compare(&got, &want);
    assert!(max <= 1, "sigmoid: {max} ulp from the f64 table evaluation");
    let mut worst = 0f64;
    for (&x, &y) in all.iter().zip(&got) {
        let xv = val(x);
        if xv.is_nan() {
            assert_eq!(y, 0x7E00);
            continue;
        }
        let e = (val(y) - 1.0 / (1.0 + (-xv).exp())).abs();
        worst = worst.max(e);
    }
    assert!(worst < 0.0035, "sigmoid error {worst}");
    // Hardware (td.md §1.7): sigmoid(3.0) = 0x3B9F; [-5, 0, 5] ~ [0.007, 0.5, 0.993].
    let at = |v: u16| got[v as usize];
    assert_eq!(at(0x4200), 0x3B9F);
    assert_eq!(at(0), 0x3800);
    assert!((val(at(0xC500)) - 0.007).abs() < 0.001 && (val(at(0x4500)) - 0.993).abs() < 0.001);
    println!(
        "sigmoid: 65536 inputs, max {max} ulp from the f64 table model ({diff} differ), \
         max |error| vs 1/(1+e^-x) {worst:.5}"
    );
}

/// Writes `w[oc][ic]` into a coefficient buffer with the documented
/// layout: output channel oc in coefficient channel oc >> ocg_log (blocked)
/// or oc % n (interleaved), rows of roundup(2 · Cin, 64) bytes.
fn pack_weights(w: &[Vec<u16>], chunk: usize, ocg_log: u32, order: WeightOrder) -> Vec<u8> {
    let cout = w.len();
    let cin = w[0].len();
    let ocg = 1usize << ocg_log;
    let n = cout.div_ceil(ocg);
    let row = (2 * cin).next_multiple_of(64);
    let mut buf = vec![0u8; n * chunk];
    for (oc, ws) in w.iter().enumerate() {
        let (ch, r) = match order {
            WeightOrder::Blocked => (oc / ocg, oc % ocg),
            WeightOrder::Interleaved => (oc % n, oc / n),
        };
        let at = ch * chunk + r * row;
        for (ic, v) in ws.iter().enumerate() {
            buf[at + 2 * ic..at + 2 * ic + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    buf
}

/// One run of a 1×1 convolution fixture with `w` (None: the compiled
/// weights) on input `x`; returns the output.
fn conv_run(s: &mut Setup, cin: usize, cout: usize, x: &[u16], o: &Options) -> Vec<u16> {
    let lin = Layout::new(cin, 1, 1, 0x40, 0x40);
    let lout = Layout::new(cout, 1, 1, 0x40, 0x40);
    lin.put(&mut s.mem, s.bars[5], x);
    let st = s.run(o).unwrap();
    assert_eq!(st.ops, 1 + (cin * cout) as u64, "one per TD and per MAC");
    lout.get(&s.mem, s.bars[4])
}

/// 1×1 convolutions 3→3 with the compiled weights (2.0 and 3.0) and random
/// ones, and the 512→512 inner product with random weights in both
/// placements: against the f32-accumulating reference (≤ 2 ulp required;
/// the model is expected to match it exactly) and, on positive data,
/// against the exactly rounded sum.
#[test]
fn hwx_conv_and_gemm() {
    let dir = fixtures_or_skip!();
    let mut rng = Rng(0xC0471);
    for (name, w0) in [
        ("tinygrad_conv.hwx", 0x4000u16),
        ("tinygrad_conv3_w3.hwx", 0x4200),
    ] {
        let h = hwx(&dir, name);
        let mut s = hwx_setup(&h);
        // The transcript: all 3.0, weights 2.0 -> 18.0.
        if w0 == 0x4000 {
            let out = conv_run(&mut s, 3, 3, &[0x4200; 3], &Options::DEFAULT);
            assert_eq!(out, [0x4C80; 3], "18.0");
        }
        let compiled = vec![vec![w0; 3]; 3];
        let mut max_ulp = 0;
        for round in 0..300 {
            let w = if round < 100 {
                compiled.clone()
            } else {
                let w: Vec<Vec<u16>> = (0..3)
                    .map(|_| random_finite(&mut rng, 3, 2, false))
                    .collect();
                s.mem
                    .put(s.bars[1], &pack_weights(&w, 0x40, 0, WeightOrder::Blocked));
                w
            };
            let x = random_finite(&mut rng, 3, 4, false);
            let r = ALL_MODES[round % 2];
            let got = conv_run(&mut s, 3, 3, &x, &opts(r));
            let want: Vec<u16> = w.iter().map(|ws| r_dot_f32(&x, ws, r)).collect();
            max_ulp = max_ulp.max(compare(&got, &want).0);
        }
        assert!(max_ulp <= 2, "{name}: {max_ulp} ulp");
        println!("{name}: 300 runs, max {max_ulp} ulp from the f32 reference");
    }

    let h = hwx(&dir, "tinygrad_gemm.hwx");
    let mut s = hwx_setup(&h);
    let (cin, cout) = (512, 512);
    for order in [WeightOrder::Blocked, WeightOrder::Interleaved] {
        let o = Options {
            weight_order: order,
            ..Options::DEFAULT
        };
        let (mut max_ref, mut max_exact) = (0, 0);
        for round in 0..4 {
            let positive = round >= 2;
            let w: Vec<Vec<u16>> = (0..cout)
                .map(|_| random_finite(&mut rng, cin, -2, positive))
                .collect();
            s.mem.put(s.bars[1], &pack_weights(&w, 0x8000, 5, order));
            let x = random_finite(&mut rng, cin, 0, positive);
            let got = conv_run(&mut s, cin, cout, &x, &o);
            let want: Vec<u16> = w
                .iter()
                .map(|ws| r_dot_f32(&x, ws, Rounding::NearestEven))
                .collect();
            max_ref = max_ref.max(compare(&got, &want).0);
            if positive {
                let exact: Vec<u16> = w.iter().map(|ws| r_dot_exact(&x, ws)).collect();
                max_exact = max_exact.max(compare(&got, &exact).0);
            }
        }
        assert!(
            max_ref <= 2 && max_exact <= 2,
            "gemm {order:?}: {max_ref} / {max_exact} ulp"
        );
        println!(
            "gemm 512x512 {order:?}: max {max_ref} ulp from the f32 reference, \
             {max_exact} ulp from the exact sum (positive data)"
        );
    }
    // The compiled gemm weights are all zero: the output is +0.
    let h = hwx(&dir, "tinygrad_gemm.hwx");
    let mut s = hwx_setup(&h);
    let got = conv_run(
        &mut s,
        cin,
        cout,
        &random_finite(&mut rng, cin, 0, false),
        &Options::DEFAULT,
    );
    assert!(got.iter().all(|&v| v == 0));
}

/// Concat: two chained TDs copy (1,16384,1,1) and (1,16,1,1) into one
/// (1,16400,1,1) output; bit-exact (NaN made canonical). Also run with the
/// first TD fetched from a separate bootstrap copy, as the driver does.
#[test]
fn hwx_concat_two_tds() {
    let dir = fixtures_or_skip!();
    let h = hwx(&dir, "tinygrad_concat.hwx");
    let mut rng = Rng(0xCA7);
    for btsp in [false, true] {
        let mut s = hwx_setup(&h);
        let a = random_f16(&mut rng, 16384);
        let b = random_f16(&mut rng, 16);
        Layout::new(16384, 1, 1, 0x40, 0x40).put(&mut s.mem, s.bars[6], &a);
        Layout::new(16, 1, 1, 0x40, 0x40).put(&mut s.mem, s.bars[5], &b);
        if btsp {
            let mut td0 = h.program()[..h.td_size as usize].to_vec();
            td0[2] = 0x40; // NID 0x40, like libane's set_nid
            s.mem.map(0x7000_0000, td0);
            s.td_iova = 0x7000_0000;
        }
        let st = s.run(&Options::DEFAULT).unwrap();
        assert_eq!((st.tds, st.ops), (2, 2 + 16400));
        assert_eq!(
            st.bytes_written,
            2 * 16400 + 62 * 16400,
            "data and zero padding"
        );
        let got = Layout::new(16400, 1, 1, 0x40, 0x40).get(&s.mem, s.bars[4]);
        let want: Vec<u16> = a.iter().chain(&b).map(|&v| canon(v)).collect();
        assert_bit_exact("concat", &got, &want);
    }
    println!("concat: 16400 channels over 2 TDs bit-exact");
}

// ---------------------------------------------------------------------------
// .anec fixtures and eiln's kernels

/// Maps a bare payload (TDs, then weights at round_up(tsk_size, 16), the
/// driver's BAR 1) and the given tile slots.
fn payload_setup(p: &[u8], td_count: u32, tiles: &[(u8, usize)]) -> Setup {
    let mut mem = Mem::default();
    let mut bars = [0u64; 32];
    bars[0] = 0x1000_0000;
    let tsk = (td_count as usize - 1) * 0x300 + 0x274;
    bars[1] = bars[0] + tsk.next_multiple_of(16) as u64;
    mem.map(bars[0], p.to_vec());
    for (i, &(slot, size)) in tiles.iter().enumerate() {
        bars[slot as usize] = 0x2000_0000 + (i as u64) * 0x0100_0000;
        mem.map(bars[slot as usize], vec![SENTINEL; size]);
    }
    Setup {
        mem,
        bars,
        td_iova: bars[0],
        td_size: TD_SIZE_STANDARD,
        td_count,
    }
}

/// The three `.anec` fixtures: the header's tile table sizes the buffers
/// and BAR 1 is derived from BAR 0 as the driver does.
#[test]
fn anec_fixtures() {
    let dir = fixtures_or_skip!();
    let mut rng = Rng(0xA7EC);
    for name in ["sum.anec", "relu.anec", "conv.anec"] {
        let d = fs::read(dir.join(name)).unwrap();
        let rd32 = |o: usize| u32::from_le_bytes(d[o..o + 4].try_into().unwrap());
        let size = u64::from_le_bytes(d[0..8].try_into().unwrap()) as usize;
        let td_count = rd32(12);
        let tiles: Vec<(u8, usize)> = (3u8..32)
            .filter(|&s| rd32(0x28 + 4 * s as usize) != 0)
            .map(|s| (s, rd32(0x28 + 4 * s as usize) as usize * 0x4000))
            .collect();
        let mut s = payload_setup(&d[0x1000..0x1000 + size], td_count, &tiles);
        let (got, want) = match name {
            "sum.anec" => {
                let l = Layout::new(64, 1, 1, 0x40, 0x40);
                let (a, b) = (random_f16(&mut rng, 64), random_f16(&mut rng, 64));
                l.put(&mut s.mem, s.bars[5], &a);
                l.put(&mut s.mem, s.bars[6], &b);
                s.run(&Options::DEFAULT).unwrap();
                let want = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| r_add(x, y, Rounding::NearestEven));
                (l.get(&s.mem, s.bars[4]), want.collect::<Vec<_>>())
            }
            "relu.anec" => {
                let l = Layout::new(1, 1, 77, 0xC0, 0xC0);
                let a = random_f16(&mut rng, 77);
                l.put(&mut s.mem, s.bars[5], &a);
                s.run(&Options::DEFAULT).unwrap();
                (
                    l.get(&s.mem, s.bars[4]),
                    a.iter().map(|&x| r_relu(x)).collect(),
                )
            }
            _ => {
                let l = Layout::new(3, 1, 1, 0x40, 0x40);
                let a = random_finite(&mut rng, 3, 4, false);
                l.put(&mut s.mem, s.bars[5], &a);
                s.run(&Options::DEFAULT).unwrap();
                let w = [0x4000u16; 3];
                let want = (0..3).map(|_| r_dot_f32(&a, &w, Rounding::NearestEven));
                (l.get(&s.mem, s.bars[4]), want.collect())
            }
        };
        assert_bit_exact(name, &got, &want);
    }
}

/// eiln's kernels operate on (1,1,2560,1600) tensors; inputs on slots 5
/// and 6 (in that order), output 4, scratch 3.
const EILN: Layout = Layout::new(1, 2560, 1600, 0xC80, 0x7D_0000);
const EILN_PLANE: usize = 0x7D_0000;

/// What the model is expected to do with each of eiln's kernels: the
/// reference for the ones it executes, `None` for the ones it refuses.
/// A reference: (the kernel's table, x, y) -> expected output.
type EilnRef = fn(&[u16], u16, u16) -> u16;

fn eiln_reference(name: &str) -> Option<EilnRef> {
    Some(match name {
        "add" => |_, x, y| r_add(x, y, Rounding::NearestEven),
        // sub: PreScale −1 scales source 0 (RBase0 = slot 6): x − y.
        "sub" => |_, x, y| ref_round(val(x) - val(y), Rounding::NearestEven, false),
        "mul" => |_, x, y| r_mul(x, y, Rounding::NearestEven),
        "ave" => |_, x, y| ref_round((val(x) + val(y)) / 2.0, Rounding::NearestEven, false),
        "max" => |_, x, y| r_max(x, y),
        "min" => |_, x, y| r_min(x, y),
        "abs" => |_, x, _| canon(x & 0x7FFF),
        "square" => |_, x, _| r_mul(x, x, Rounding::NearestEven),
        "cube" => |_, x, _| r_mul(r_mul(x, x, Rounding::NearestEven), x, Rounding::NearestEven),
        "relu" => |_, x, _| r_relu(x),
        "gelu" | "hardtanh" | "leakyrelu" | "relu6" | "rrelu" => |t, x, _| r_lut(t, x),
        _ => return None,
    })
}

/// Every one of eiln's 36 kernels: the ones the model executes match the
/// reference bit for bit (≤ 1 ulp for interpolated tables) over a band of
/// rows of random data; the others are refused with `Unsupported` before
/// they write a wrong number. To keep the host test fast, each program's
/// InDim/OutDim height is cut from 2560 to `ROWS` rows (the registers
/// are otherwise untouched); `add` also runs at full size.
#[test]
fn eiln_kernels_run_or_refuse() {
    let dir = fixtures_or_skip!();
    const ROWS: usize = 24;
    let kernels = eiln_kernels(&dir);
    assert_eq!(kernels.len(), 36);
    let mut rng = Rng(0xE11);
    let (mut ran, mut refused) = (Vec::new(), Vec::new());
    for (path, p) in &kernels {
        let name = path.rsplit('/').next().unwrap().trim_end_matches(".bin");
        let n = count_tds(p);
        let full = name == "add";
        let mut p = p.clone();
        let rows = if full { 2560 } else { ROWS };
        for k in 0..n as usize {
            for reg in [common::IN_DIM, common::OUT_DIM] {
                let at = 0x300 * k + 0x124 + 4 + reg.offset as usize;
                let v = u32::from_le_bytes(p[at..at + 4].try_into().unwrap());
                if v != 0x0A00_0640 {
                    continue; // a reduction's (1, 1) side
                }
                p[at..at + 4].copy_from_slice(&(((rows as u32) << 16) | 1600).to_le_bytes());
            }
        }
        // Scratch (slot 3) holds up to two planes in the multi-TD kernels.
        let tiles = [
            (3u8, 4 * EILN_PLANE),
            (4, EILN_PLANE),
            (5, EILN_PLANE),
            (6, EILN_PLANE),
        ];
        let mut s = payload_setup(&p, n, &tiles);
        let l = Layout { h: rows, ..EILN };
        let x = random_f16(&mut rng, l.len());
        let y = random_f16(&mut rng, l.len());
        l.put(&mut s.mem, s.bars[5], &x);
        l.put(&mut s.mem, s.bars[6], &y);
        let res = s.run(&Options::DEFAULT);
        match eiln_reference(name) {
            Some(f) => {
                let st = res.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(st.tds, n);
                let tab: Vec<u16> = s
                    .mem
                    .bytes(
                        s.bars[1],
                        128.min(p.len() - (s.bars[1] - s.bars[0]) as usize),
                    )
                    .chunks(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect();
                let got = l.get(&s.mem, s.bars[4]);
                let want: Vec<u16> = x.iter().zip(&y).map(|(&a, &b)| f(&tab, a, b)).collect();
                let (max, diff) = compare(&got, &want);
                let limit = if tab.len() == 64 && tab[42] == 1 && tab[41] != 0x40 {
                    1
                } else {
                    0
                };
                assert!(max <= limit, "{name}: {max} ulp ({diff} differ)");
                ran.push(std::format!("{name} ({max} ulp)"));
            }
            None => match res {
                Err(EngineError::Unsupported {
                    td,
                    feature,
                    site,
                    value,
                }) => {
                    refused.push(std::format!(
                        "{name} (TD {td}: {feature}, {site} = {value:#x})"
                    ));
                    // Nothing was written to the output by the refused TD.
                    if td + 1 == n {
                        let out = s.mem.bytes(s.bars[4], 64);
                        assert!(out.iter().all(|&b| b == SENTINEL), "{name}");
                    }
                }
                other => panic!("{name}: expected Unsupported, got {other:?}"),
            },
        }
    }
    println!("eiln kernels executed: {}", ran.join(", "));
    println!("eiln kernels refused:\n  {}", refused.join("\n  "));
    assert_eq!(ran.len(), 15);
}

// ---------------------------------------------------------------------------
// Synthetic programs: faults, budget, refusals

/// Byte offset of `reg` in a TD with the standard stream layout.
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

fn rd(p: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(p[off..off + 4].try_into().unwrap())
}

fn wr(p: &mut [u8], off: usize, v: u32) {
    p[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// The fixture programs used for the fault and refusal tests.
fn fixture(name: &str) -> Option<(Hwx, Setup)> {
    let dir = fixtures_dir()?;
    let h = hwx(&dir, name);
    let s = hwx_setup(&h);
    Some((h, s))
}

/// Runs `p` (a modified program) in the memory of `s`.
fn run_with(s: &Setup, p: &[u8], o: &Options) -> (Result<Stats, EngineError>, Mem) {
    let mut mem = s.mem.clone();
    mem.map(s.bars[0], p.to_vec());
    let r = execute(&mut mem, s.bars[0], s.td_size, s.td_count, &s.bars, o);
    (r, mem)
}

#[test]
fn dma_faults_name_the_port_and_address() {
    let Some((h, s)) = fixture("tinygrad_conv.hwx") else {
        return;
    };
    let p = h.program().to_vec();
    let o = Options::DEFAULT;
    let cases: [(u8, Port, bool); 3] = [
        (5, Port::TileSrc(0), false),
        (4, Port::TileDst, true),
        (1, Port::Kernel, false),
    ];
    for (slot, port, write) in cases {
        let mut s2 = Setup {
            mem: s.mem.clone(),
            ..Setup { ..hwx_setup(&h) }
        };
        s2.mem.regions.remove(&s.bars[slot as usize]);
        let (r, _) = run_with(&s2, &p, &o);
        assert_eq!(
            r,
            Err(EngineError::Fault {
                td: 0,
                port,
                write,
                iova: s.bars[slot as usize]
            }),
            "slot {slot}"
        );
    }
    // A buffer one row short: the fault is at its end.
    let mut s2 = hwx_setup(&h);
    s2.mem.map(s.bars[4], vec![0; 0x80]);
    let (r, _) = run_with(&s2, &p, &o);
    assert_eq!(
        r,
        Err(EngineError::Fault {
            td: 0,
            port: Port::TileDst,
            write: true,
            iova: s.bars[4] + 0x80
        })
    );
    // The TD itself unmapped.
    let mut s3 = hwx_setup(&h);
    let r = execute(&mut s3.mem, 0xDEAD_0000, h.td_size, 1, &s3.bars, &o);
    assert_eq!(
        r,
        Err(EngineError::Fault {
            td: 0,
            port: Port::Fetch,
            write: false,
            iova: 0xDEAD_0000
        })
    );
    let msg = std::format!("{}", r.unwrap_err());
    assert!(
        msg.contains("TD fetch read fault at device address 0xdead0000"),
        "{msg}"
    );
}

#[test]
fn budget_stops_the_engine() {
    let Some((h, mut s)) = fixture("tinygrad_concat.hwx") else {
        return;
    };
    let total = s.run(&Options::DEFAULT).unwrap().ops;
    assert_eq!(total, 2 + 16400);
    let with = |b| Options {
        budget: Some(b),
        ..Options::DEFAULT
    };
    assert_eq!(s.run(&with(total)).unwrap().ops, total);
    // Every channel of these (C,1,1) tensors is one chunk of one element.
    assert_eq!(
        s.run(&with(total - 1)),
        Err(EngineError::Busy {
            td: 1,
            ops: total - 1
        }),
        "TD 1 ran out on its last channel"
    );
    assert_eq!(s.run(&with(0)), Err(EngineError::Busy { td: 0, ops: 0 }));
    assert_eq!(
        s.run(&with(1 + 16384)),
        Err(EngineError::Busy {
            td: 1,
            ops: 1 + 16384
        }),
        "TD 1's fetch"
    );
    assert_eq!(
        s.run(&with(1 + 12800)),
        Err(EngineError::Busy {
            td: 0,
            ops: 1 + 12800
        })
    );
    // A (1,1,77) row is one chunk: the budget stops before it.
    if let Some((_, mut r)) = fixture("tinygrad_relu.hwx") {
        assert_eq!(r.run(&with(77)), Err(EngineError::Busy { td: 0, ops: 1 }));
        assert_eq!(r.run(&with(78)).unwrap().ops, 78);
    }
    let msg = std::format!("{}", s.run(&with(0)).unwrap_err());
    assert!(msg.contains("still busy"), "{msg}");
    let _ = h;
}

/// Each mutation of a fixture's registers is refused with the feature and
/// register it names, before the output is touched.
#[test]
fn unsupported_settings_are_refused() {
    let dir = fixtures_or_skip!();
    type Mutation = (&'static str, &'static str, Reg, u32, Feature);
    let cases: &[Mutation] = &[
        (
            "tinygrad_sum.hwx",
            "PE OpMode 4",
            pe::CFG,
            0x8_0010,
            Feature::PeOp,
        ),
        (
            "tinygrad_sum.hwx",
            "PE Cfg bit 1",
            pe::CFG,
            0x8_0002,
            Feature::PeCfg,
        ),
        (
            "tinygrad_sum.hwx",
            "SecSrc 3",
            pe::CFG,
            0xC_0000,
            Feature::PeSources,
        ),
        (
            "tinygrad_sum.hwx",
            "abs of two",
            pe::CFG,
            0x8_0040,
            Feature::PeCfg,
        ),
        (
            "tinygrad_sum.hwx",
            "PreScale low half",
            pe::PRE_SCALE,
            0x3C00_0001,
            Feature::PeScale,
        ),
        (
            "tinygrad_sum.hwx",
            "int8 input",
            common::CH_CFG,
            0x29,
            Feature::ElementFormat,
        ),
        (
            "tinygrad_sum.hwx",
            "uint8 second input",
            common::CH_CFG,
            0x22,
            Feature::ElementFormat,
        ),
        (
            "tinygrad_sum.hwx",
            "depth 2",
            common::IN_DEPTH,
            2,
            Feature::Depth,
        ),
        (
            "tinygrad_sum.hwx",
            "groups",
            common::GROUP_CONV_CFG,
            0x1_0002,
            Feature::Groups,
        ),
        (
            "tinygrad_sum.hwx",
            "3x3",
            common::CONV_CFG,
            0x5000_A063,
            Feature::ConvGeometry,
        ),
        (
            "tinygrad_sum.hwx",
            "stride 2",
            common::CONV_CFG,
            0x5000_C021,
            Feature::ConvGeometry,
        ),
        (
            "tinygrad_sum.hwx",
            "shape",
            common::COUT,
            0x20,
            Feature::ShapeMismatch,
        ),
        (
            "tinygrad_sum.hwx",
            "src fmt",
            tile_src::FMT,
            0x0100_2021,
            Feature::TileFormat,
        ),
        (
            "tinygrad_sum.hwx",
            "interleave 2",
            tile_src::FMT,
            0x0200_2031,
            Feature::TileFormat,
        ),
        (
            "tinygrad_sum.hwx",
            "dst fmt",
            tile_dst::FMT,
            0x0100_1031,
            Feature::TileFormat,
        ),
        (
            "tinygrad_sum.hwx",
            "pixel offset",
            tile_src::PIXEL_OFFSET,
            4,
            Feature::PixelOffset,
        ),
        (
            "tinygrad_sum.hwx",
            "L2 input relu",
            Reg::new(Block::L2, 0),
            1,
            Feature::L2Mode,
        ),
        (
            "tinygrad_sum.hwx",
            "dst disabled",
            tile_dst::DMA_CONFIG,
            0x0400_00C0,
            Feature::DmaDisabled,
        ),
        (
            "tinygrad_sum.hwx",
            "src disabled",
            tile_src::DMA_CONFIG,
            0x3_3880,
            Feature::DmaDisabled,
        ),
        (
            "tinygrad_sum.hwx",
            "coefficients",
            kdma::COEFF_DMA_CONFIG,
            0x81,
            Feature::KernelChannels,
        ),
        (
            "tinygrad_relu.hwx",
            "NonlinearMode 3",
            ne::MAC_CFG,
            0x13_000C,
            Feature::Nonlinear,
        ),
        (
            "tinygrad_relu.hwx",
            "MAC OpMode 1",
            ne::MAC_CFG,
            0x11_0009,
            Feature::MacMode,
        ),
        (
            "tinygrad_relu.hwx",
            "MAC bit 7",
            ne::MAC_CFG,
            0x11_008C,
            Feature::MacMode,
        ),
        (
            "tinygrad_relu.hwx",
            "BiasMode",
            ne::MAC_CFG,
            0x11_001C,
            Feature::Bias,
        ),
        (
            "tinygrad_relu.hwx",
            "PostScaleMode",
            ne::MAC_CFG,
            0x11_400C,
            Feature::PostScale,
        ),
        (
            "tinygrad_relu.hwx",
            "AccBias",
            ne::ACC_BIAS,
            0x68E,
            Feature::Bias,
        ),
        (
            "tinygrad_relu.hwx",
            "MatrixVectorBias",
            ne::MATRIX_VECTOR_BIAS,
            1,
            Feature::Bias,
        ),
        (
            "tinygrad_relu.hwx",
            "PostRightShift",
            ne::POST_SCALE,
            0x1_3C00,
            Feature::PostScale,
        ),
        (
            "tinygrad_relu.hwx",
            "not unicast",
            common::GROUP_CONV_CFG,
            0x1_0001,
            Feature::Unicast,
        ),
        (
            "tinygrad_relu.hwx",
            "PE on NE",
            pe::CFG,
            4,
            Feature::PeOnNeTask,
        ),
        (
            "tinygrad_relu.hwx",
            "extra DMA",
            kdma::EXTRA_CONFIG,
            0x81,
            Feature::ExtraDma,
        ),
        (
            "tinygrad_conv.hwx",
            "int8 weights",
            ne::KERNEL_CFG,
            0x81,
            Feature::KernelFormat,
        ),
        (
            "tinygrad_conv.hwx",
            "palette",
            ne::KERNEL_CFG,
            0x86,
            Feature::KernelFormat,
        ),
        (
            "tinygrad_conv.hwx",
            "conv + LUT",
            ne::MAC_CFG,
            0x12_1C00,
            Feature::KernelChannels,
        ),
        (
            "tinygrad_conv.hwx",
            "unicast conv",
            common::GROUP_CONV_CFG,
            0x1_4001,
            Feature::Unicast,
        ),
        (
            "tinygrad_gemm.hwx",
            "too many groups",
            common::CONV_CFG,
            0x5000_A021,
            Feature::OutputChannelGroups,
        ),
        (
            "tinygrad_sigmoid.hwx",
            "LUT flags",
            ne::MAC_CFG,
            0x12_000C,
            Feature::LutFormat,
        ),
    ];
    for &(name, what, reg, value, feature) in cases {
        let h = hwx(&dir, name);
        let s = hwx_setup(&h);
        let mut p = h.program().to_vec();
        wr(&mut p, std_off(reg), value);
        let mut s = s;
        if what == "LUT flags" {
            // Half 42 of the table = 0x60 (tanh's symmetric table).
            let at = s.bars[1] + 84;
            s.mem.put(at, &[0x60, 0]);
        }
        let (r, mem) = run_with(&s, &p, &Options::DEFAULT);
        match r {
            Err(EngineError::Unsupported {
                td: 0,
                feature: f,
                site,
                value: v,
            }) => {
                assert_eq!(f, feature, "{name}: {what}");
                match site {
                    Site::Reg(r) => {
                        let (_, got) = (r, v);
                        if r == reg {
                            assert_eq!(got, value, "{name}: {what}");
                        }
                    }
                    Site::Lut(i) => assert_eq!((i, v), (42, 0x60)),
                    Site::Header(_) => {}
                }
            }
            other => panic!("{name}: {what}: got {other:?}"),
        }
        // The output was not touched.
        let out = slots(&h, Role::Output)[0];
        assert!(
            mem.bytes(s.bars[out as usize], 64)
                .iter()
                .all(|&b| b == SENTINEL),
            "{name}: {what}"
        );
    }
    // Header bits.
    let h = hwx(&dir, "tinygrad_sum.hwx");
    let s = hwx_setup(&h);
    for (what, word, value, feature) in [
        ("TDSkip", 6, 0x3000_9A00u32, Feature::TdSkip),
        ("SrcLoc", 6, 0x2000_9800, Feature::L2Resident),
        ("DstLoc", 6, 0x1000_9800, Feature::L2Resident),
        ("RBE1 off", 8, 0x2_4166, Feature::PeSources),
        ("WBE off", 8, 0x0_4966, Feature::DmaDisabled),
        ("KBase1", 9, 0x0800, Feature::KernelChannels),
    ] {
        let mut p = h.program().to_vec();
        wr(&mut p, 4 * word, value);
        let (r, _) = run_with(&s, &p, &Options::DEFAULT);
        assert!(
            matches!(r, Err(EngineError::Unsupported { feature: f, .. }) if f == feature),
            "{what}: {r:?}"
        );
    }
    let h = hwx(&dir, "tinygrad_conv.hwx");
    let s = hwx_setup(&h);
    let mut p = h.program().to_vec();
    wr(&mut p, 4 * 9, 0x21 | 0x800 | (2 << 6)); // KBase1 = slot 2, enabled
    let (r, _) = run_with(&s, &p, &Options::DEFAULT);
    assert!(
        matches!(
            r,
            Err(EngineError::Unsupported {
                feature: Feature::KernelBase,
                ..
            })
        ),
        "{r:?}"
    );
}

/// Malformed coefficient setups, chains and sizes give precise errors.
#[test]
fn malformed_programs() {
    let Some((h, s)) = fixture("tinygrad_conv.hwx") else {
        return;
    };
    let o = Options::DEFAULT;
    let base = h.program().to_vec();
    let mut p = base.clone();
    wr(&mut p, std_off(kdma::COEFF_DMA_CONFIG.at(1)), 0x80);
    assert_eq!(
        run_with(&s, &p, &o).0,
        Err(EngineError::Kernel {
            td: 0,
            channel: 1,
            problem: KernelProblem::Disabled
        })
    );
    let mut p = base.clone();
    wr(&mut p, std_off(kdma::COEFF_BFR_SIZE.at(2)), 0);
    assert_eq!(
        run_with(&s, &p, &o).0,
        Err(EngineError::Kernel {
            td: 0,
            channel: 2,
            problem: KernelProblem::TooSmall { needed: 6, size: 0 }
        })
    );
    let mut p = base.clone();
    wr(&mut p, 4 * 9, 0);
    assert_eq!(
        run_with(&s, &p, &o).0,
        Err(EngineError::Td(TdError::CoeffWithoutKernelBase {
            td: 0,
            channel: 0
        }))
    );
    let mut p = base.clone();
    let w8 = (rd(&p, 32) & !0x3_F000) | 0x2_1000;
    wr(&mut p, 4 * 8, w8);
    assert_eq!(
        run_with(&s, &p, &o).0,
        Err(EngineError::Td(TdError::WriteToProtectedSlot {
            td: 0,
            slot: 1
        }))
    );
    let mut p = base.clone();
    wr(&mut p, std_off(common::IN_DIM), 0x1_0000);
    assert_eq!(
        run_with(&s, &p, &o).0,
        Err(EngineError::Td(TdError::ZeroDimension {
            td: 0,
            dma: DmaKind::TileSrc(0),
            reg: common::IN_DIM
        }))
    );
    // A stream that writes an unknown register: the decoder's error.
    let mut p = base.clone();
    wr(&mut p, 0x228, 0x0C00_8810);
    assert!(matches!(
        run_with(&s, &p, &o).0,
        Err(EngineError::Td(TdError::UnknownRegister { td: 0, .. }))
    ));
    // Sizes and counts.
    let mut mem = s.mem.clone();
    for (size, count, want) in [
        (
            0x276,
            1,
            EngineError::Td(TdError::TdSize { td_size: 0x276 }),
        ),
        (0x24, 1, EngineError::Td(TdError::TdSize { td_size: 0x24 })),
        (0x274, 0, EngineError::Td(TdError::TdCount { td_count: 0 })),
        (
            0x274,
            0x1_0000,
            EngineError::Td(TdError::TdCount { td_count: 0x1_0000 }),
        ),
        (
            MAX_DECODABLE_TD + 4,
            1,
            EngineError::TdTooLarge {
                td_size: MAX_DECODABLE_TD + 4,
            },
        ),
    ] {
        assert_eq!(
            execute(&mut mem, s.bars[0], size, count, &s.bars, &o),
            Err(want)
        );
    }
    // Never written: a TD cut before its last stream (the tile DMA
    // destination's) leaves those registers unset.
    let Some((hr, mut sr)) = fixture("tinygrad_relu.hwx") else {
        return;
    };
    sr.td_size = 0x254;
    assert_eq!(
        sr.run(&o),
        Err(EngineError::Td(TdError::RegisterNotSet {
            td: 0,
            reg: tile_dst::DMA_CONFIG
        }))
    );
    let _ = hr;
}

#[test]
fn chains_are_checked_before_a_td_runs() {
    let Some((h, s)) = fixture("tinygrad_concat.hwx") else {
        return;
    };
    let o = Options::DEFAULT;
    let base = h.program().to_vec();
    let chain = |fault| Err(EngineError::Td(TdError::Chain { td: 0, fault }));
    let mut p = base.clone();
    wr(&mut p, 4, 0x9B_0000);
    let (r, mem) = run_with(&s, &p, &o);
    assert_eq!(
        r,
        chain(ChainFault::NextSize {
            found: 0x9B,
            expected: 0x9C
        })
    );
    assert!(mem.bytes(s.bars[4], 64).iter().all(|&b| b == SENTINEL));
    let mut p = base.clone();
    wr(&mut p, 0x1C, 0x302);
    assert_eq!(
        run_with(&s, &p, &o).0,
        chain(ChainFault::NextPointerUnaligned { next: 0x302 })
    );
    let mut p = base.clone();
    wr(&mut p, 0, header::EON.put(0, 1));
    assert_eq!(run_with(&s, &p, &o).0, chain(ChainFault::EarlyEnd));
    // A NextPointer past the mapped command buffer: TD 1's fetch faults,
    // after TD 0 ran.
    let mut p = base.clone();
    wr(&mut p, 0x1C, 0x4000_0000);
    let (r, mem) = run_with(&s, &p, &o);
    assert_eq!(
        r,
        Err(EngineError::Fault {
            td: 1,
            port: Port::Fetch,
            write: false,
            iova: s.bars[0] + 0x4000_0000
        })
    );
    assert!(
        !mem.bytes(s.bars[4], 2).iter().all(|&b| b == SENTINEL),
        "TD 0 ran"
    );
    // Running one TD of the two stops after TD 0 (td.md §1.4).
    let mut mem = s.mem.clone();
    let st = execute(&mut mem, s.bars[0], s.td_size, 1, &s.bars, &o).unwrap();
    assert_eq!(st.tds, 1);
}

#[test]
fn max_decodable_td_is_tight() {
    assert_eq!(MAX_DECODABLE_TD, HEADER_SIZE + 8 * IMAGE_WORDS as u32);
    // A TD of exactly that size decodes: every register as its own
    // one-word stream.
    let mut td = vec![0u8; HEADER_SIZE as usize];
    td[0..4].copy_from_slice(&header::EON.put(0, 1).to_le_bytes());
    for b in Block::ALL {
        for i in 0..b.words() {
            td.extend(
                StreamHeader::new(b.base() + 4 * i, 1)
                    .unwrap()
                    .0
                    .to_le_bytes(),
            );
            td.extend(0u32.to_le_bytes());
        }
    }
    assert_eq!(td.len() as u32, MAX_DECODABLE_TD);
    let mut mem = Mem::default();
    mem.map(0x1000, td.clone());
    let bars = [0x1000u64; 32];
    // It decodes, then stops at the first thing it cannot run (SrcLoc is
    // clear in this header).
    let r = execute(
        &mut mem,
        0x1000,
        MAX_DECODABLE_TD,
        1,
        &bars,
        &Options::DEFAULT,
    );
    assert!(matches!(
        r,
        Err(EngineError::Unsupported {
            feature: Feature::L2Resident,
            ..
        })
    ));
    let _ = (ConvCfg(0), MacCfg(0));
}

// ---------------------------------------------------------------------------
// Fuzz

/// Values that make fields interesting.
const WORDS: [u32; 16] = [
    0,
    1,
    2,
    3,
    4,
    0x40,
    0x80,
    0x81,
    0xFFFF,
    0x1_0001,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
    0x3C00,
    0x0A00_0640,
    0x5000_A021,
];

/// Mutated fixture programs and random bytes never make the engine panic;
/// with a budget every run ends. Prints how the runs ended.
#[test]
fn fuzz_never_panics() {
    let dir = fixtures_or_skip!();
    let mut rng = Rng(0xF022);
    let names = [
        "tinygrad_sum.hwx",
        "tinygrad_relu.hwx",
        "tinygrad_sigmoid.hwx",
        "tinygrad_conv.hwx",
        "tinygrad_concat.hwx",
        "tinygrad_gemm.hwx",
        "mul_zin764_macos14.hwx",
    ];
    let mut setups: Vec<(Hwx, Setup)> = names
        .iter()
        .map(|n| {
            let h = hwx(&dir, n);
            let s = hwx_setup(&h);
            (h, s)
        })
        .collect();
    let mut outcomes: BTreeMap<String, u32> = BTreeMap::new();
    let budget = Options {
        budget: Some(5_000),
        rounding: Rounding::NearestTiesAway,
        overflow: Overflow::Saturate,
        weight_order: WeightOrder::Interleaved,
    };
    for i in 0..5000 {
        let pick = rng.below(setups.len() as u64) as usize;
        let (h, s) = &mut setups[pick];
        let mut p = h.program().to_vec();
        let words = p.len() / 4;
        for _ in 0..1 + rng.below(4) {
            let at = 4 * rng.below(words as u64) as usize;
            let v = match rng.below(4) {
                0 => rd(&p, at) ^ (1 << rng.below(32)),
                1 => WORDS[rng.below(WORDS.len() as u64) as usize],
                2 => rng.u32(),
                _ => rd(&p, at).wrapping_add(rng.u32() % 9).wrapping_sub(4),
            };
            wr(&mut p, at, v);
        }
        // The buffers keep whatever earlier runs wrote: any data will do.
        s.mem.map(s.bars[0], p);
        let (size, count) = if i % 50 == 0 {
            ((rng.u32() % 0x900) & !3, rng.u32() % 4)
        } else {
            (s.td_size, s.td_count)
        };
        let r = execute(&mut s.mem, s.bars[0], size, count, &s.bars, &budget);
        let key = match r {
            Ok(_) => String::from("ok"),
            Err(EngineError::Td(e)) => {
                let d = std::format!("{e:?}");
                std::format!("td:{}", d.split([' ', '{', '(']).next().unwrap())
            }
            Err(EngineError::Unsupported { feature, .. }) => {
                std::format!("unsupported:{feature:?}")
            }
            Err(e) => {
                let d = std::format!("{e:?}");
                String::from(d.split([' ', '{']).next().unwrap())
            }
        };
        *outcomes.entry(key).or_default() += 1;
    }
    // Random bytes as a whole program.
    for _ in 0..300 {
        let len = 0x28 + 4 * rng.below(300) as usize;
        let p: Vec<u8> = (0..len).map(|_| rng.u16() as u8).collect();
        let mut mem = Mem::default();
        mem.map(0x1000, p);
        let bars = [0x1000u64; 32];
        let _ = execute(
            &mut mem,
            0x1000,
            len as u32,
            1 + rng.u32() % 3,
            &bars,
            &budget,
        );
    }
    println!("fuzz outcomes: {outcomes:?}");
    assert!(outcomes.get("ok").copied().unwrap_or(0) > 100);
}

// ---------------------------------------------------------------------------
// Without fixtures

/// The TD tests' synthetic add (two (1,64,1,1) sources on slots 6 and 5,
/// destination slot 4), chained twice: runs without `../shared`.
#[test]
fn synthetic_add_chain_runs_without_fixtures() {
    use super::super::td::tests::{synthetic_add_td, synthetic_chain};
    let l = Layout::new(64, 1, 1, 0x40, 0x40);
    let mut rng = Rng(5);
    for (prog, count) in [(synthetic_add_td(), 1u32), (synthetic_chain(), 2)] {
        let mut mem = Mem::default();
        let mut bars = [0u64; 32];
        bars[0] = 0x10_0000;
        mem.map(bars[0], prog);
        for slot in [4u8, 5, 6] {
            bars[slot as usize] = 0x20_0000 + u64::from(slot) * 0x1_0000;
            mem.map(bars[slot as usize], vec![SENTINEL; 0x1000]);
        }
        let (a, b) = (random_f16(&mut rng, 64), random_f16(&mut rng, 64));
        l.put(&mut mem, bars[6], &a);
        l.put(&mut mem, bars[5], &b);
        for r in ALL_MODES {
            let st = execute(&mut mem, bars[0], TD_SIZE_STANDARD, count, &bars, &opts(r)).unwrap();
            assert_eq!(st.tds, count);
            assert_eq!(st.ops, u64::from(count) * 65);
            assert_eq!(st.bytes_read, u64::from(count) * (0x274 + 2 * 128));
            let want: Vec<u16> = a.iter().zip(&b).map(|(&x, &y)| r_add(x, y, r)).collect();
            assert_bit_exact("synthetic add", &l.get(&mem, bars[4]), &want);
            // No ZeroPad bits in this destination: padding untouched.
            assert!(l.padding(&mem, bars[4]).iter().all(|&v| v == SENTINEL));
        }
        // Faults, budget.
        let mut m2 = mem.clone();
        m2.regions.remove(&bars[5]);
        assert_eq!(
            execute(
                &mut m2,
                bars[0],
                TD_SIZE_STANDARD,
                count,
                &bars,
                &Options::DEFAULT
            ),
            Err(EngineError::Fault {
                td: 0,
                port: Port::TileSrc(1),
                write: false,
                iova: bars[5]
            })
        );
        let o = Options {
            budget: Some(30),
            ..Options::DEFAULT
        };
        assert_eq!(
            execute(&mut mem, bars[0], TD_SIZE_STANDARD, count, &bars, &o),
            Err(EngineError::Busy { td: 0, ops: 30 })
        );
    }
}

#[test]
fn options_and_messages() {
    assert_eq!(Options::default(), Options::DEFAULT);
    assert_eq!(Options::DEFAULT.rounding, Rounding::NearestEven);
    let e = EngineError::Unsupported {
        td: 2,
        feature: Feature::PeOp,
        site: Site::Reg(pe::CFG),
        value: 0x10,
    };
    assert_eq!(
        std::format!("{e}"),
        "TD 2: the engine model does not support this planar engine operation \
         (PE.Cfg (address 0x08800) = 0x10)"
    );
    let e = EngineError::Kernel {
        td: 0,
        channel: 3,
        problem: KernelProblem::TooSmall {
            needed: 0x80,
            size: 0x40,
        },
    };
    assert_eq!(
        std::format!("{e}"),
        "TD 0: coefficient channel 3 loads 0x40 bytes, 0x80 needed"
    );
    let e = EngineError::Fault {
        td: 1,
        port: Port::TileDst,
        write: true,
        iova: 0x1234,
    };
    assert_eq!(
        std::format!("{e}"),
        "TD 1: tile DMA destination write fault at device address 0x1234"
    );
    assert!(std::format!("{}", EngineError::TdTooLarge { td_size: 0x800 }).contains("0x488"));
    assert!(std::format!("{}", Site::Lut(42)).contains("half 42"));
    assert!(std::format!("{}", Site::Header(6)).contains("W6"));
    assert!(std::format!("{}", Port::TileSrc(1)).contains("source 1"));
    assert_eq!(
        std::format!("{}", EngineError::from(TdError::TdCount { td_count: 0 })),
        std::format!("{}", TdError::TdCount { td_count: 0 })
    );
}
