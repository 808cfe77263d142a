// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! IEEE 754 binary16 and binary32 arithmetic with integer operations only.
//!
//! The kernel's Rust targets are soft-float and the kernel supplies no
//! floating-point library routines, so the engine model never touches an
//! `f32` or `f64`: values are bit patterns ([`F16`], [`F32`]) and every
//! operation is integer code.
//!
//! # What is implemented, and how exactly
//!
//! - [`F32::add_rne`], [`F32::sub_rne`] and [`F32::mul_rne`] are IEEE 754
//!   binary32 operations rounded to nearest, ties to even, with gradual underflow
//!   (subnormals are produced and consumed), signed zeros (`x − x = +0`,
//!   `−0 + −0 = −0`), infinities and invalid operations (`∞ − ∞`, `0 · ∞`)
//!   giving NaN. Each computes the exact result (the product of two 24-bit
//!   significands fits in 48 bits; a sum is aligned in 64 bits with the
//!   shifted-out bits kept as a sticky bit) and rounds it once.
//! - [`F16::to_f32`] is exact. [`F32::to_f16`] rounds once with a
//!   selectable [`Rounding`] and [`Overflow`] rule.
//! - [`F16::add`] and [`F16::mul`] round the exact sum or product once to
//!   binary16. They widen to binary32, operate there and narrow, which
//!   gives the once-rounded result for either rounding mode: a product of
//!   two binary16 values (22 significant bits) is exact in binary32, and a
//!   sum is either exact in binary32 or (when the operands are so far apart
//!   that it needs more than 24 bits) further than half a binary32 ulp from
//!   every binary16 rounding boundary. The tests check this against exact
//!   `f64` arithmetic on many millions of pairs.
//! - Comparisons follow IEEE 754 (`−0 == +0`; any comparison with NaN is
//!   false); [`F32::max`] and [`F32::min`] return NaN when either input is
//!   NaN and order `−0` below `+0`.
//! - Every NaN result is the canonical quiet NaN ([`F16::NAN`],
//!   [`F32::NAN`]): payloads are not propagated.
//!
//! The code has no panicking paths: shifts and exponent arithmetic are
//! bounded (the bounds are noted where they are used) and done with
//! checked or wrapping operations.

use core::cmp::Ordering;

/// How a result that falls between two representable values is rounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rounding {
    /// Round to nearest, a tie to the value with an even significand
    /// (IEEE 754 `roundTiesToEven`, the default of every IEEE machine).
    #[default]
    NearestEven,
    /// Round to nearest, a tie away from zero (IEEE 754 `roundTiesToAway`).
    NearestTiesAway,
}

/// What a finite result whose magnitude rounds beyond the largest finite
/// value becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overflow {
    /// Infinity of the result's sign (IEEE 754).
    #[default]
    Infinity,
    /// The largest finite value of the result's sign. Infinite inputs stay
    /// infinite.
    Saturate,
}

/// An IEEE 754 binary16 value, held as its bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F16(
    /// The bits.
    pub u16,
);

/// An IEEE 754 binary32 value, held as its bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F32(
    /// The bits.
    pub u32,
);

/// The parameters of one binary format.
struct Format {
    /// Stored significand bits (10 or 23).
    man_bits: u32,
    /// Exponent bias.
    bias: i32,
    /// Smallest normal exponent (1 − bias).
    emin: i32,
    /// All-ones biased exponent (infinities and NaNs).
    max_biased: u32,
    /// The sign bit.
    sign: u32,
    /// The stored significand bits.
    man_mask: u32,
    /// The implicit leading bit of a normal significand.
    implicit: u64,
    /// Positive infinity.
    inf: u32,
    /// Largest finite positive value.
    max: u32,
    /// The canonical quiet NaN.
    nan: u32,
}

const HALF: Format = Format {
    man_bits: 10,
    bias: 15,
    emin: -14,
    max_biased: 0x1F,
    sign: 0x8000,
    man_mask: 0x3FF,
    implicit: 0x400,
    inf: 0x7C00,
    max: 0x7BFF,
    nan: 0x7E00,
};

const SINGLE: Format = Format {
    man_bits: 23,
    bias: 127,
    emin: -126,
    max_biased: 0xFF,
    sign: 0x8000_0000,
    man_mask: 0x7F_FFFF,
    implicit: 0x80_0000,
    inf: 0x7F80_0000,
    max: 0x7F7F_FFFF,
    nan: 0x7FC0_0000,
};

/// A finite, non-zero value `(−1)^neg · sig · 2^exp`.
#[derive(Clone, Copy, Debug)]
struct Num {
    neg: bool,
    sig: u64,
    exp: i32,
}

/// The class of a value and, for finite non-zero ones, its parts.
#[derive(Clone, Copy, Debug)]
enum Class {
    Nan,
    Inf(bool),
    Zero(bool),
    Num(Num),
}

fn unpack(f: &Format, bits: u32) -> Class {
    let neg = bits & f.sign != 0;
    let mag = bits & !f.sign;
    let biased = mag.checked_shr(f.man_bits).unwrap_or(0);
    let man = mag & f.man_mask;
    // man_bits is 10 or 23: every i32 below is a small number.
    let man_bits = i32::try_from(f.man_bits).unwrap_or(0);
    if biased == f.max_biased {
        if man != 0 {
            Class::Nan
        } else {
            Class::Inf(neg)
        }
    } else if biased == 0 {
        if man == 0 {
            Class::Zero(neg)
        } else {
            Class::Num(Num {
                neg,
                sig: u64::from(man),
                exp: f.emin.wrapping_sub(man_bits),
            })
        }
    } else {
        let biased = i32::try_from(biased).unwrap_or(0);
        Class::Num(Num {
            neg,
            sig: u64::from(man) | f.implicit,
            exp: biased.wrapping_sub(f.bias).wrapping_sub(man_bits),
        })
    }
}

/// `x >> d`, with every bit shifted out OR-ed into bit 0 ("jamming"), so
/// that rounding later still sees that the value was inexact.
fn shift_right_jam(x: u64, d: u32) -> u64 {
    if d == 0 {
        x
    } else if d >= 63 {
        u64::from(x != 0)
    } else {
        let lost = x & 1u64.checked_shl(d).map_or(u64::MAX, |b| b.wrapping_sub(1));
        x.checked_shr(d).unwrap_or(0) | u64::from(lost != 0)
    }
}

/// Rounds `(−1)^neg · sig · 2^exp` to format `f` and encodes it. Any
/// inexactness below bit 0 of `sig` must already be jammed into bit 0 (and
/// lie at least two bits below the rounding position, which holds for every
/// caller: they keep 38 or more bits beyond the target precision).
fn round_pack(f: &Format, neg: bool, sig: u64, exp: i32, r: Rounding, o: Overflow) -> u32 {
    let sign = if neg { f.sign } else { 0 };
    if sig == 0 {
        return sign;
    }
    // Normalise so the leading one is at bit 62: the rounding position is
    // then at least 62 − 23 = 39 bits up, so `shift` below is positive.
    let lz = sig.leading_zeros(); // 0..=63 since sig != 0
    let (sig, exp) = if lz == 0 {
        (shift_right_jam(sig, 1), exp.wrapping_add(1))
    } else {
        let up = lz.wrapping_sub(1); // 0..=62
        (
            sig.checked_shl(up).unwrap_or(0),
            exp.wrapping_sub(i32::try_from(up).unwrap_or(0)),
        )
    };
    let man_bits = i32::try_from(f.man_bits).unwrap_or(0);
    // Exponents stay within a few hundred of zero for every caller (the
    // widest is a product of two binary32 values, 2^−298..2^256).
    let top = exp.wrapping_add(62);
    let lsb = if top >= f.emin {
        top.wrapping_sub(man_bits)
    } else {
        f.emin.wrapping_sub(man_bits)
    };
    let shift = u32::try_from(lsb.wrapping_sub(exp)).unwrap_or(u32::MAX);
    let (q, up) = if shift >= 64 {
        // The value is below 2^(lsb − 1), half the smallest step: it rounds
        // to zero in both modes.
        (0u64, false)
    } else {
        let q = sig.checked_shr(shift).unwrap_or(0);
        let ones = 1u64.checked_shl(shift).unwrap_or(0).wrapping_sub(1);
        let rem = sig & ones;
        let half = 1u64.checked_shl(shift.wrapping_sub(1)).unwrap_or(0);
        let up = match rem.cmp(&half) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal => match r {
                Rounding::NearestEven => q & 1 == 1,
                Rounding::NearestTiesAway => true,
            },
        };
        (q, up)
    };
    // q < 2^(man_bits + 1), so neither this nor the carry below overflows.
    let mut q = q.wrapping_add(u64::from(up));
    let mut lsb = lsb;
    if q >= f.implicit.wrapping_shl(1) {
        q >>= 1;
        lsb = lsb.wrapping_add(1);
    }
    if q >= f.implicit {
        let biased = lsb.wrapping_add(man_bits).wrapping_add(f.bias);
        let biased = u32::try_from(biased).unwrap_or(u32::MAX);
        if biased >= f.max_biased {
            return sign
                | match o {
                    Overflow::Infinity => f.inf,
                    Overflow::Saturate => f.max,
                };
        }
        let man = u32::try_from(q.wrapping_sub(f.implicit)).unwrap_or(0);
        sign | biased.checked_shl(f.man_bits).unwrap_or(0) | man
    } else {
        // Subnormal (or zero): the exponent field is 0.
        sign | u32::try_from(q).unwrap_or(0)
    }
}

/// Moves the leading one of a non-zero significand of at most 24 bits to
/// bit 61, adjusting the exponent.
fn norm61(sig: u64, exp: i32) -> (u64, i32) {
    let lz = sig.leading_zeros(); // >= 40 for a binary32 significand
    let up = lz.saturating_sub(2);
    (
        sig.checked_shl(up).unwrap_or(0),
        exp.wrapping_sub(i32::try_from(up).unwrap_or(0)),
    )
}

/// The sum of two finite non-zero binary32 values, rounded to nearest even.
fn add_nums(a: Num, b: Num) -> u32 {
    let (sa, ea) = norm61(a.sig, a.exp);
    let (sb, eb) = norm61(b.sig, b.exp);
    // Order by exponent so that `ea >= eb`.
    let ((sa, ea, na), (sb, eb, nb)) = if ea >= eb {
        ((sa, ea, a.neg), (sb, eb, b.neg))
    } else {
        ((sb, eb, b.neg), (sa, ea, a.neg))
    };
    let d = u32::try_from(ea.wrapping_sub(eb)).unwrap_or(u32::MAX);
    let sb = shift_right_jam(sb, d);
    let r = Rounding::NearestEven;
    let o = Overflow::Infinity;
    if na == nb {
        // Both below 2^62: the sum fits.
        round_pack(&SINGLE, na, sa.wrapping_add(sb), ea, r, o)
    } else {
        match sa.cmp(&sb) {
            Ordering::Greater => round_pack(&SINGLE, na, sa.wrapping_sub(sb), ea, r, o),
            // Only when d == 0, so nothing was jammed.
            Ordering::Less => round_pack(&SINGLE, nb, sb.wrapping_sub(sa), ea, r, o),
            // x − x is +0 when rounding to nearest.
            Ordering::Equal => 0,
        }
    }
}

/// An ordering key: equal for ±0, increasing with the value. Not for NaN.
fn key32(bits: u32) -> i64 {
    let mag = i64::from(bits & 0x7FFF_FFFF);
    if bits & 0x8000_0000 != 0 {
        mag.wrapping_neg()
    } else {
        mag
    }
}

impl F16 {
    /// +0.
    pub const ZERO: F16 = F16(0);
    /// 1.0.
    pub const ONE: F16 = F16(0x3C00);
    /// +∞.
    pub const INFINITY: F16 = F16(0x7C00);
    /// −∞.
    pub const NEG_INFINITY: F16 = F16(0xFC00);
    /// The canonical quiet NaN every operation returns.
    pub const NAN: F16 = F16(0x7E00);
    /// Largest finite value, 65504.
    pub const MAX: F16 = F16(0x7BFF);

    /// Reads a little-endian binary16 from two bytes.
    pub const fn from_le_bytes(b: [u8; 2]) -> F16 {
        F16(u16::from_le_bytes(b))
    }

    /// Whether the value is a NaN.
    pub const fn is_nan(self) -> bool {
        self.0 & 0x7FFF > 0x7C00
    }

    /// Whether the value is +∞ or −∞.
    pub const fn is_infinite(self) -> bool {
        self.0 & 0x7FFF == 0x7C00
    }

    /// Whether the value is +0 or −0.
    pub const fn is_zero(self) -> bool {
        self.0 & 0x7FFF == 0
    }

    /// Whether the sign bit is set (also for −0 and NaNs).
    pub const fn is_sign_negative(self) -> bool {
        self.0 & 0x8000 != 0
    }

    /// The exact binary32 value (NaNs become [`F32::NAN`]).
    pub fn to_f32(self) -> F32 {
        F32(match unpack(&HALF, u32::from(self.0)) {
            Class::Nan => SINGLE.nan,
            Class::Inf(neg) => SINGLE.inf | if neg { SINGLE.sign } else { 0 },
            Class::Zero(neg) => {
                if neg {
                    SINGLE.sign
                } else {
                    0
                }
            }
            // Every binary16 value is exact in binary32.
            Class::Num(n) => round_pack(
                &SINGLE,
                n.neg,
                n.sig,
                n.exp,
                Rounding::NearestEven,
                Overflow::Infinity,
            ),
        })
    }

    /// `self + other`, rounded once to binary16 with `r` (overflow gives ∞).
    pub fn add(self, other: F16, r: Rounding) -> F16 {
        self.to_f32()
            .add_rne(other.to_f32())
            .to_f16(r, Overflow::Infinity)
    }

    /// `self · other`, rounded once to binary16 with `r` (overflow gives ∞).
    pub fn mul(self, other: F16, r: Rounding) -> F16 {
        self.to_f32()
            .mul_rne(other.to_f32())
            .to_f16(r, Overflow::Infinity)
    }

    /// IEEE equality (`−0 == +0`, NaN equals nothing).
    pub fn eq_value(self, other: F16) -> bool {
        self.to_f32().eq_value(other.to_f32())
    }

    /// IEEE `self < other` (false if either is NaN).
    pub fn lt(self, other: F16) -> bool {
        self.to_f32().lt(other.to_f32())
    }

    /// The larger value; NaN if either is NaN; `max(−0, +0) = +0`.
    pub fn max(self, other: F16) -> F16 {
        self.to_f32()
            .max(other.to_f32())
            .to_f16(Rounding::NearestEven, Overflow::Infinity)
    }

    /// The smaller value; NaN if either is NaN; `min(−0, +0) = −0`.
    pub fn min(self, other: F16) -> F16 {
        self.to_f32()
            .min(other.to_f32())
            .to_f16(Rounding::NearestEven, Overflow::Infinity)
    }
}

impl F32 {
    /// +0.
    pub const ZERO: F32 = F32(0);
    /// 1.0.
    pub const ONE: F32 = F32(0x3F80_0000);
    /// +∞.
    pub const INFINITY: F32 = F32(0x7F80_0000);
    /// −∞.
    pub const NEG_INFINITY: F32 = F32(0xFF80_0000);
    /// The canonical quiet NaN every operation returns.
    pub const NAN: F32 = F32(0x7FC0_0000);

    /// Whether the value is a NaN.
    pub const fn is_nan(self) -> bool {
        self.0 & 0x7FFF_FFFF > 0x7F80_0000
    }

    /// Whether the value is +0 or −0.
    pub const fn is_zero(self) -> bool {
        self.0 & 0x7FFF_FFFF == 0
    }

    /// Whether the sign bit is set (also for −0 and NaNs).
    pub const fn is_sign_negative(self) -> bool {
        self.0 & 0x8000_0000 != 0
    }

    /// The value with the sign flipped (NaN stays the canonical NaN).
    pub const fn neg(self) -> F32 {
        if self.is_nan() {
            F32::NAN
        } else {
            F32(self.0 ^ 0x8000_0000)
        }
    }

    /// The magnitude (NaN stays the canonical NaN).
    pub const fn abs(self) -> F32 {
        if self.is_nan() {
            F32::NAN
        } else {
            F32(self.0 & 0x7FFF_FFFF)
        }
    }

    /// 2^k exactly, for `k` in −126..=127 (`None` otherwise).
    pub fn pow2(k: i32) -> Option<F32> {
        if !(-126..=127).contains(&k) {
            return None;
        }
        let biased = u32::try_from(k.wrapping_add(127)).ok()?;
        Some(F32(biased.checked_shl(23)?))
    }

    /// The integer `n`, rounded to nearest even if above 2^24.
    pub fn from_u32(n: u32) -> F32 {
        F32(round_pack(
            &SINGLE,
            false,
            u64::from(n),
            0,
            Rounding::NearestEven,
            Overflow::Infinity,
        ))
    }

    /// `self + other`, rounded to nearest even.
    pub fn add_rne(self, other: F32) -> F32 {
        F32(match (unpack(&SINGLE, self.0), unpack(&SINGLE, other.0)) {
            (Class::Nan, _) | (_, Class::Nan) => SINGLE.nan,
            (Class::Inf(a), Class::Inf(b)) => {
                if a == b {
                    self.0
                } else {
                    SINGLE.nan
                }
            }
            (Class::Inf(_), _) => self.0,
            (_, Class::Inf(_)) => other.0,
            // −0 + −0 = −0; +0 + −0 = +0.
            (Class::Zero(a), Class::Zero(b)) => {
                if a && b {
                    SINGLE.sign
                } else {
                    0
                }
            }
            (Class::Zero(_), Class::Num(_)) => other.0,
            (Class::Num(_), Class::Zero(_)) => self.0,
            (Class::Num(a), Class::Num(b)) => add_nums(a, b),
        })
    }

    /// `self − other`, rounded to nearest even.
    pub fn sub_rne(self, other: F32) -> F32 {
        self.add_rne(other.neg())
    }

    /// `self · other`, rounded to nearest even.
    pub fn mul_rne(self, other: F32) -> F32 {
        let sign = (self.0 ^ other.0) & SINGLE.sign;
        F32(match (unpack(&SINGLE, self.0), unpack(&SINGLE, other.0)) {
            (Class::Nan, _) | (_, Class::Nan) => SINGLE.nan,
            (Class::Inf(_), Class::Zero(_)) | (Class::Zero(_), Class::Inf(_)) => SINGLE.nan,
            (Class::Inf(_), _) | (_, Class::Inf(_)) => sign | SINGLE.inf,
            (Class::Zero(_), _) | (_, Class::Zero(_)) => sign,
            (Class::Num(a), Class::Num(b)) => {
                // Two significands below 2^24: the product is below 2^48.
                let sig = a.sig.checked_mul(b.sig).unwrap_or(0);
                round_pack(
                    &SINGLE,
                    a.neg != b.neg,
                    sig,
                    a.exp.wrapping_add(b.exp),
                    Rounding::NearestEven,
                    Overflow::Infinity,
                )
            }
        })
    }

    /// The value rounded once to binary16 with `r`; a finite value beyond
    /// the binary16 range becomes what `o` says. NaN gives [`F16::NAN`].
    pub fn to_f16(self, r: Rounding, o: Overflow) -> F16 {
        let bits = match unpack(&SINGLE, self.0) {
            Class::Nan => HALF.nan,
            Class::Inf(neg) => HALF.inf | if neg { HALF.sign } else { 0 },
            Class::Zero(neg) => {
                if neg {
                    HALF.sign
                } else {
                    0
                }
            }
            Class::Num(n) => round_pack(&HALF, n.neg, n.sig, n.exp, r, o),
        };
        F16(u16::try_from(bits).unwrap_or(F16::NAN.0))
    }

    /// The IEEE ordering of two values, `None` if either is NaN.
    pub fn compare(self, other: F32) -> Option<Ordering> {
        if self.is_nan() || other.is_nan() {
            None
        } else {
            Some(key32(self.0).cmp(&key32(other.0)))
        }
    }

    /// IEEE equality (`−0 == +0`, NaN equals nothing).
    pub fn eq_value(self, other: F32) -> bool {
        self.compare(other) == Some(Ordering::Equal)
    }

    /// IEEE `self < other`.
    pub fn lt(self, other: F32) -> bool {
        self.compare(other) == Some(Ordering::Less)
    }

    /// IEEE `self > other`.
    pub fn gt(self, other: F32) -> bool {
        self.compare(other) == Some(Ordering::Greater)
    }

    /// IEEE `self <= other`.
    pub fn le(self, other: F32) -> bool {
        matches!(self.compare(other), Some(Ordering::Less | Ordering::Equal))
    }

    /// The larger value; NaN if either is NaN; `max(−0, +0) = +0`.
    pub fn max(self, other: F32) -> F32 {
        match self.compare(other) {
            None => F32::NAN,
            Some(Ordering::Greater) => self,
            Some(Ordering::Less) => other,
            // Equal values differ at most in the sign of zero.
            Some(Ordering::Equal) => F32(self.0 & other.0),
        }
    }

    /// The smaller value; NaN if either is NaN; `min(−0, +0) = −0`.
    pub fn min(self, other: F32) -> F32 {
        match self.compare(other) {
            None => F32::NAN,
            Some(Ordering::Less) => self,
            Some(Ordering::Greater) => other,
            Some(Ordering::Equal) => F32(self.0 | other.0),
        }
    }

    /// `max(x, 0)` with `−0 → +0`; NaN stays NaN.
    pub fn relu(self) -> F32 {
        if self.is_nan() {
            F32::NAN
        } else if self.gt(F32::ZERO) {
            self
        } else {
            F32::ZERO
        }
    }

    /// For `0 <= self < 2^31`: the integer part and the (exact) fraction.
    /// `None` for NaN, negative values (other than −0) and larger ones.
    pub fn split_int(self) -> Option<(u32, F32)> {
        match unpack(&SINGLE, self.0) {
            Class::Zero(_) => Some((0, F32::ZERO)),
            Class::Num(n) if !n.neg => {
                let int = if n.exp >= 0 {
                    // sig < 2^24; refuse anything that reaches 2^31.
                    let e = u32::try_from(n.exp).ok()?;
                    if e >= 7 {
                        return None;
                    }
                    n.sig.checked_shl(e)?
                } else {
                    let s = u32::try_from(n.exp.wrapping_neg()).ok()?;
                    n.sig.checked_shr(s).unwrap_or(0)
                };
                let int = u32::try_from(int).ok()?;
                // Both are exact and within one binade of each other, so
                // the difference is exact.
                Some((int, self.sub_rne(F32::from_u32(int))))
            }
            _ => None,
        }
    }
}
