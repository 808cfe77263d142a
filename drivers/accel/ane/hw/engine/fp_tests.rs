// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Host tests of the integer soft float against the host's hardware
//! floating point: every binary16 value for the conversions, every
//! binary32 exponent and rounding situation for the narrowing, and millions
//! of random and edge-class pairs for the arithmetic, compared bit for bit.
//!
//! The references here use `f32`/`f64` (and the `half` crate for binary16
//! → binary32), which only test code may.

extern crate std;

use std::vec::Vec;

use super::super::test_rng::Rng;
use super::fp::{Overflow, Rounding, F16, F32};

const RNE: Rounding = Rounding::NearestEven;
const RNA: Rounding = Rounding::NearestTiesAway;

/// Hardware binary32 bits with every NaN made canonical.
fn canon32(x: f32) -> u32 {
    if x.is_nan() {
        0x7FC0_0000
    } else {
        x.to_bits()
    }
}

fn canon16(b: u16) -> u16 {
    if b & 0x7FFF > 0x7C00 {
        0x7E00
    } else {
        b
    }
}

fn f16_val(b: u16) -> f64 {
    f64::from(half::f16::from_bits(b).to_f32())
}

/// Rounds an `f64` once to binary16: the test's own reference, written
/// from the definition (scale to the significand's units, `floor`, compare
/// the fraction with one half), independent of the engine's code.
pub(super) fn ref_round(x: f64, r: Rounding, saturate: bool) -> u16 {
    if x.is_nan() {
        return 0x7E00;
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    let over = if saturate { 0x7BFF } else { 0x7C00 };
    if a.is_infinite() {
        return sign | 0x7C00;
    }
    if a == 0.0 {
        return sign;
    }
    let (q, field) = if a < 2f64.powi(-14) {
        (a * 2f64.powi(24), 0i32)
    } else {
        let e = ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        if e > 15 {
            return sign | over;
        }
        (a * 2f64.powi(10 - e), e + 15)
    };
    let fl = q.floor();
    let frac = q - fl;
    let mut m = fl as u32;
    let up = match r {
        Rounding::NearestEven => frac > 0.5 || (frac == 0.5 && m & 1 == 1),
        Rounding::NearestTiesAway => frac >= 0.5,
    };
    if up {
        m += 1;
    }
    let bits = if field == 0 {
        m
    } else {
        ((field as u32) << 10) + (m - 1024)
    };
    if bits >= 0x7C00 {
        return sign | over;
    }
    sign | bits as u16
}

/// Binary16 values of every class: zeros, subnormals (smallest, largest),
/// normals (smallest, one, largest), infinities and NaNs, both signs.
pub(super) const EDGES16: [u16; 22] = [
    0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x3C01, 0xBBFF,
    0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0x1000, 0x6800,
];

/// Binary32 values of every class.
const EDGES32: [u32; 20] = [
    0x0000_0000,
    0x8000_0000,
    0x0000_0001,
    0x8000_0001,
    0x007F_FFFF,
    0x0080_0000,
    0x8080_0000,
    0x3F80_0000,
    0xBF80_0000,
    0x3F80_0001,
    0x7F7F_FFFF,
    0xFF7F_FFFF,
    0x7F80_0000,
    0xFF80_0000,
    0x7FC0_0000,
    0xFFC0_0001,
    0x7F80_0001,
    0x3380_0000,
    0x4B80_0000,
    0x0040_0000,
];

/// A random binary32 that exercises the interesting paths: raw bits,
/// subnormals, values close to each other (passed in `near`), powers of two.
fn gen32(rng: &mut Rng, near: u32) -> u32 {
    match rng.below(8) {
        0 | 1 => rng.u32(),
        2 => rng.u32() & 0x807F_FFFF,   // subnormal
        3 => near ^ (rng.u32() & 0xFF), // same exponent, close
        4 => (near ^ 0x8000_0000)
            .wrapping_add(rng.u32() % 5)
            .wrapping_sub(2), // cancellation
        5 => {
            // exponent a little apart
            let d = (rng.below(40) as u32) << 23;
            (near & 0x8000_0000) | ((near & 0x7FFF_FFFF).wrapping_sub(d) & 0x7FFF_FFFF)
        }
        6 => EDGES32[rng.below(EDGES32.len() as u64) as usize],
        _ => (rng.u32() & 0x8000_0000) | ((rng.below(254) as u32 + 1) << 23),
    }
}

#[test]
fn f16_to_f32_is_exact_for_every_value() {
    for b in 0..=u16::MAX {
        let want = canon32(half::f16::from_bits(b).to_f32());
        assert_eq!(F16(b).to_f32().0, want, "{b:#06x}");
    }
}

#[test]
fn f32_to_f16_every_exponent_and_rounding_case() {
    // For every sign and exponent, every value of the significand bits that
    // survive the narrowing (at most 10), combined with each dropped-bit
    // pattern that decides rounding: zero, one, just below half, half, just
    // above half, all ones, random.
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let mut n = 0u64;
    for sign in [0u32, 0x8000_0000] {
        for exp in 0u32..=255 {
            // Dropped bits: 13 for a normal binary16 result, more below
            // 2^-14 (the result is subnormal), capped at the 23 stored.
            let e = exp as i32 - 127;
            let dropped = (13 + (-14 - e).max(0)).min(23) as u32;
            let kept = 23 - dropped;
            let half = 1u32 << (dropped - 1);
            let all = (1u32 << dropped) - 1;
            for top in 0u32..(1 << kept) {
                for low in [0, 1, half - 1, half, half + 1, all, rng.u32() & all] {
                    let bits = sign | (exp << 23) | (top << dropped) | low;
                    let x = f32::from_bits(bits);
                    let want_rne = canon16(half::f16::from_f32(x).to_bits());
                    assert_eq!(
                        F32(bits).to_f16(RNE, Overflow::Infinity).0,
                        want_rne,
                        "{bits:#x}"
                    );
                    let want_rna = ref_round(f64::from(x), RNA, false);
                    assert_eq!(
                        F32(bits).to_f16(RNA, Overflow::Infinity).0,
                        want_rna,
                        "{bits:#x}"
                    );
                    n += 1;
                }
            }
        }
    }
    assert!(n > 2_000_000, "{n}");
}

#[test]
fn f32_to_f16_random_bits() {
    let mut rng = Rng(99);
    for _ in 0..1_000_000 {
        let b = rng.u32();
        let x = f32::from_bits(b);
        assert_eq!(
            F32(b).to_f16(RNE, Overflow::Infinity).0,
            canon16(half::f16::from_f32(x).to_bits()),
            "{b:#x}"
        );
        assert_eq!(
            F32(b).to_f16(RNA, Overflow::Saturate).0,
            ref_round(f64::from(x), RNA, true)
        );
    }
}

#[test]
fn f32_to_f16_overflow_rule() {
    // 65520 is the binary16 overflow threshold under nearest rounding.
    let cases = [
        (65504.0f32, 0x7BFF, 0x7BFF),
        (65519.0, 0x7BFF, 0x7BFF),
        (65520.0, 0x7C00, 0x7BFF),
        (1e10, 0x7C00, 0x7BFF),
        (f32::MAX, 0x7C00, 0x7BFF),
        (f32::INFINITY, 0x7C00, 0x7C00),
        (-1e10, 0xFC00, 0xFBFF),
        (f32::NEG_INFINITY, 0xFC00, 0xFC00),
    ];
    for (x, inf, sat) in cases {
        let b = F32(x.to_bits());
        assert_eq!(b.to_f16(RNE, Overflow::Infinity).0, inf, "{x}");
        assert_eq!(b.to_f16(RNE, Overflow::Saturate).0, sat, "{x}");
        assert_eq!(b.to_f16(RNA, Overflow::Saturate).0, sat, "{x}");
    }
    // 65488 is halfway between 65472 (even) and 65504 (odd).
    assert_eq!(
        F32(65488.0f32.to_bits()).to_f16(RNE, Overflow::Infinity).0,
        0x7BFE
    );
    assert_eq!(
        F32(65488.0f32.to_bits()).to_f16(RNA, Overflow::Infinity).0,
        0x7BFF
    );
}

fn check_f32_op(a: u32, b: u32) {
    let (x, y) = (f32::from_bits(a), f32::from_bits(b));
    assert_eq!(F32(a).add_rne(F32(b)).0, canon32(x + y), "{a:#x} + {b:#x}");
    assert_eq!(F32(a).sub_rne(F32(b)).0, canon32(x - y), "{a:#x} - {b:#x}");
    assert_eq!(F32(a).mul_rne(F32(b)).0, canon32(x * y), "{a:#x} * {b:#x}");
}

#[test]
fn f32_arithmetic_matches_hardware() {
    for &a in &EDGES32 {
        for &b in &EDGES32 {
            check_f32_op(a, b);
        }
    }
    let mut rng = Rng(0xDEAD_BEEF);
    for _ in 0..2_000_000 {
        let a = gen32(&mut rng, 0x3F80_0000);
        let b = gen32(&mut rng, a);
        check_f32_op(a, b);
        check_f32_op(b, a);
    }
}

/// Every (a, b) where a is any binary16 value and b an edge value or a
/// random one, for `+` and `·` in both rounding modes, against the exact
/// `f64` result rounded once by the test's reference.
#[test]
fn f16_add_mul_round_once() {
    let check = |a: u16, b: u16| {
        let (x, y) = (f16_val(a), f16_val(b));
        for r in [RNE, RNA] {
            // Both exact in f64: a sum needs at most 40 bits, a product 22.
            assert_eq!(
                F16(a).add(F16(b), r).0,
                ref_round(x + y, r, false),
                "{a:#x}+{b:#x} {r:?}"
            );
            assert_eq!(
                F16(a).mul(F16(b), r).0,
                ref_round(x * y, r, false),
                "{a:#x}*{b:#x} {r:?}"
            );
        }
        // Hardware binary32 then the conversion of the `half` crate (RNE):
        // the binary32 detour rounds exactly once for these operations.
        let hw = canon16(half::f16::from_f32(x as f32 + y as f32).to_bits());
        assert_eq!(F16(a).add(F16(b), RNE).0, hw);
    };
    let mut rng = Rng(7);
    for a in 0..=u16::MAX {
        for &b in &EDGES16 {
            check(a, b);
        }
        for _ in 0..4 {
            check(a, rng.u16());
        }
        // Operands of nearby magnitude (ties and cancellation are common).
        let near = a ^ (rng.u16() & 0x0FFF);
        check(a, near);
        check(a, near ^ 0x8000);
    }
    for _ in 0..1_000_000 {
        check(rng.u16(), rng.u16());
    }
}

#[test]
fn ties_round_differently_in_the_two_modes() {
    // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
    let one = F16(0x3C00);
    let half_ulp = F16(0x1000); // 2^-11
    assert_eq!(one.add(half_ulp, RNE).0, 0x3C00);
    assert_eq!(one.add(half_ulp, RNA).0, 0x3C01);
    // 1 + 3 · 2^-11: a tie with an odd lower neighbour, both go up.
    let three_half = F16(0x1600); // 3 · 2^-11
    assert_eq!(one.add(three_half, RNE).0, 0x3C02);
    assert_eq!(one.add(three_half, RNA).0, 0x3C02);
    // Negative ties go away from zero (more negative) in RNA.
    assert_eq!(F16(0xBC00).add(F16(0x9000), RNA).0, 0xBC01);
    assert_eq!(F16(0xBC00).add(F16(0x9000), RNE).0, 0xBC00);
    // A tie in the subnormal range: 2^-25 = half the smallest subnormal.
    let tiny = F32(0x3300_0000); // 2^-25
    assert_eq!(tiny.to_f16(RNE, Overflow::Infinity).0, 0);
    assert_eq!(tiny.to_f16(RNA, Overflow::Infinity).0, 1);
    // Product ties: 1.5 · (1 + 2^-10) · ... chosen so the product is a tie.
    let a = F16(0x3E00); // 1.5
    let b = F16(0x3C01); // 1 + 2^-10
                         // 1.5 + 1.5 · 2^-10 = 1.5 + 2^-10 + 2^-11: a tie above 0x3E01.
    assert_eq!(a.mul(b, RNE).0, 0x3E02);
    assert_eq!(a.mul(b, RNA).0, 0x3E02);
    let c = F16(0x3C03); // 1 + 3 · 2^-10
                         // 1.5 · c = 1.5 + 4.5 · 2^-10: tie between 0x3E04 and 0x3E05.
    assert_eq!(a.mul(c, RNE).0, 0x3E04);
    assert_eq!(a.mul(c, RNA).0, 0x3E05);
}

#[test]
fn signed_zeros_and_invalid_operations() {
    let z = F32::ZERO;
    let nz = F32(0x8000_0000);
    assert_eq!(nz.add_rne(nz).0, 0x8000_0000);
    assert_eq!(nz.add_rne(z).0, 0);
    assert_eq!(z.add_rne(nz).0, 0);
    let x = F32(0x4040_0000);
    assert_eq!(x.sub_rne(x).0, 0, "x - x = +0");
    assert_eq!(F32::INFINITY.sub_rne(F32::INFINITY), F32::NAN);
    assert_eq!(F32::INFINITY.mul_rne(nz), F32::NAN);
    assert_eq!(nz.mul_rne(x).0, 0x8000_0000);
    assert_eq!(F32::NEG_INFINITY.mul_rne(F32(0xBF80_0000)), F32::INFINITY);
    assert_eq!(F16(0x8000).add(F16(0x8000), RNE).0, 0x8000);
    assert_eq!(F16(0x7C00).add(F16(0xFC00), RNE), F16::NAN);
    assert_eq!(
        F16(0x7D00).mul(F16(0x3C00), RNA),
        F16::NAN,
        "NaN payload is canonical"
    );
}

/// Comparison, max, min and ReLU over every pair of a broad set of binary16
/// values, against hardware comparisons and the documented NaN / signed
/// zero rules.
#[test]
fn comparisons_min_max_relu() {
    let mut vals: Vec<u16> = EDGES16.to_vec();
    let mut rng = Rng(3);
    for _ in 0..400 {
        vals.push(rng.u16());
    }
    for &a in &vals {
        let x = half::f16::from_bits(a).to_f32();
        // ReLU: x for x > 0, +0 otherwise, NaN for NaN.
        let relu = F16(a).to_f32().relu().to_f16(RNE, Overflow::Infinity).0;
        let want = if x.is_nan() {
            0x7E00
        } else if x > 0.0 {
            a
        } else {
            0
        };
        assert_eq!(relu, want, "relu {a:#x}");
        for &b in &vals {
            let y = half::f16::from_bits(b).to_f32();
            let (fa, fb) = (F16(a), F16(b));
            assert_eq!(fa.lt(fb), x < y, "{a:#x} < {b:#x}");
            assert_eq!(fa.eq_value(fb), x == y);
            let (fx, fy) = (fa.to_f32(), fb.to_f32());
            assert_eq!(fx.gt(fy), x > y);
            assert_eq!(fx.le(fy), x <= y);
            let (mx, mn) = (fa.max(fb).0, fa.min(fb).0);
            if x.is_nan() || y.is_nan() {
                assert_eq!((mx, mn), (0x7E00, 0x7E00));
            } else if x == y {
                // Equal: identical bits, or ±0.
                let neg = |v: u16| v & 0x8000 != 0;
                let (p, n) = if neg(a) { (b, a) } else { (a, b) };
                assert_eq!(mx, p, "max {a:#x} {b:#x}");
                assert_eq!(mn, n, "min {a:#x} {b:#x}");
                assert!(!neg(mx) || (neg(a) && neg(b)));
            } else {
                assert_eq!(mx, if x > y { a } else { b });
                assert_eq!(mn, if x < y { a } else { b });
            }
        }
    }
}

#[test]
fn helpers() {
    for k in -126..=127 {
        assert_eq!(F32::pow2(k).unwrap().0, 2f32.powi(k).to_bits(), "{k}");
    }
    assert_eq!(F32::pow2(128), None);
    assert_eq!(F32::pow2(-127), None);
    for n in [0u32, 1, 2, 3, 16, 32, 1 << 24, (1 << 24) + 1, u32::MAX] {
        assert_eq!(F32::from_u32(n).0, (n as f32).to_bits(), "{n}");
    }
    let mut rng = Rng(11);
    for _ in 0..200_000 {
        // Values in [0, 64) with every fraction size.
        let x = (rng.below(1 << 30) as f32) / (1u32 << 24) as f32;
        let (i, f) = F32(x.to_bits()).split_int().unwrap();
        assert_eq!(i, x.floor() as u32);
        assert_eq!(f.0, (x - x.floor()).to_bits());
    }
    assert_eq!(F32(0x8000_0000).split_int(), Some((0, F32::ZERO)));
    assert_eq!(F32(0xBF80_0000).split_int(), None);
    assert_eq!(F32::NAN.split_int(), None);
    assert_eq!(F32(3e9f32.to_bits()).split_int(), None);
    assert_eq!(
        F32(1e-40f32.to_bits()).split_int(),
        Some((0, F32(1e-40f32.to_bits())))
    );
    assert!(F16::NAN.is_nan() && F16(0x7C01).is_nan() && !F16::INFINITY.is_nan());
    assert!(F16::NEG_INFINITY.is_infinite() && F16(0x8000).is_zero());
    assert!(F16(0x8000).is_sign_negative() && !F16::ONE.is_sign_negative());
    assert_eq!(F32(0xFFC0_1234).abs(), F32::NAN);
    assert_eq!(F32(0xBF80_0000).abs(), F32::ONE);
    assert_eq!(F32::ONE.neg().0, 0xBF80_0000);
    assert!(F32::NAN.neg().is_nan() && F32(0x8000_0000).is_zero());
}
