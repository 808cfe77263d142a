// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! CPU reference operations for checking ANE results, and fp16 ULP
//! distances for parity tables.
//!
//! These are written from the mathematical definitions, not from any model
//! of the engine. What the ANE itself does is not known bit for bit (no
//! public H13 measurement of its rounding, denormal or overflow behaviour
//! exists, `shared/reference/td.md` §6), so every rounding assumption is
//! explicit here and the comparison helpers report ULP distances instead of
//! demanding equality.
//!
//! # Numeric model
//!
//! - Inputs and outputs are IEEE binary16 ([`half::f16`]). Subnormal inputs
//!   are used as their values and subnormal results are produced (no flush
//!   to zero). A result whose magnitude rounds above 65504 becomes ±infinity
//!   (no saturation). Every NaN result is the quiet NaN `0x7E00`
//!   ([`CANONICAL_NAN`]).
//! - **Elementwise add and mul** compute the exact real result (in `f64`,
//!   which holds the sum or product of two fp16 values exactly: at most 40
//!   significant bits for a sum, 22 for a product) and round it **once** to
//!   fp16 with the caller's [`Rounding`]: round to nearest, ties to even
//!   (IEEE default) or ties away from zero (what the seed project's smoke
//!   test claims for the ANE's add). The two modes differ only on exact
//!   ties; see the tests for which inputs produce one.
//! - **min / max** return one of the inputs unchanged (no rounding); NaN in
//!   either input gives NaN, and −0 orders below +0.
//! - **select** picks `a` where `cond` is non-zero (NaN counts as non-zero,
//!   as in NumPy's `where(cond.astype(bool))`) and `b` elsewhere.
//! - **relu** is `x` for `x > 0`, `+0` for `x ≤ 0` (so `−0 → +0`), NaN for
//!   NaN. No rounding.
//! - **sigmoid** is `1 / (1 + e^−x)` evaluated in `f64` and rounded once to
//!   fp16. It is within a hair of the correctly rounded value; the engine
//!   instead interpolates a 33-sample table, so expect ULP differences off
//!   the sample points.
//! - **1×1 convolution and linear/matmul** multiply fp16 × fp16 exactly in
//!   `f32` (a 22-bit product always fits), accumulate in `f32` with
//!   round-to-nearest-even after every addition, in ascending input-channel
//!   / input-feature order starting from +0, add the bias (as `f32`) after
//!   the last product, and round the `f32` total once to fp16 with the
//!   caller's [`Rounding`].
//!
//! # What the fixtures confirm about rounding
//!
//! Nothing about the engine's own rounding. Every recorded hardware result
//! on the fixture programs (`td.md` §1.7: 3 + 2 = 5, 3 · 2 = 6, the 1×1
//! convolution's 18, ReLU of [−3, 5, −1, 2], sigmoid(3) = `0x3B9F`) is
//! exact or far from a tie, so both [`Rounding`] modes give the same bits
//! and the tests check that. The seed project's claim that the ANE's add
//! rounds ties away from zero is untested by any public data: its H13 add
//! check used quarter values whose sums are exact. What the fixtures do
//! show is that the compiler's sigmoid lookup table holds correctly rounded
//! (ties-to-even) samples, which the HWX tests compare with
//! [`scalar::sigmoid`].

use half::f16;
use serde::Serialize;

use crate::tensor::{Shape, ShapeError};

/// The NaN every operation here returns: quiet, positive, no payload
/// (`0x7E00`, also what eiln's libane fp16 conversion produces).
pub const CANONICAL_NAN: f16 = f16::from_bits(0x7E00);

/// How a real result is rounded to fp16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Rounding {
    /// Round to nearest; a tie goes to the value with an even significand
    /// (IEEE 754 `roundTiesToEven`).
    NearestEven,
    /// Round to nearest; a tie goes to the value of larger magnitude
    /// (IEEE 754 `roundTiesToAway`).
    NearestTiesAway,
}

/// 2^k as an `f64`, for `k` in the normal range.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k) as u64) << 52)
}

/// Rounds `x` to fp16 once, with `rounding`. NaN gives [`CANONICAL_NAN`];
/// magnitudes that round above 65504 give ±infinity; the sign of zero is
/// kept.
pub fn round_f64(x: f64, rounding: Rounding) -> f16 {
    if x.is_nan() {
        return CANONICAL_NAN;
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    const INF: u32 = 0x7C00;
    if a.is_infinite() {
        return f16::from_bits(sign | INF as u16);
    }
    // Scale so that the integer part of `q` is the fp16 encoding's
    // significand (with the implicit bit for normals); scaling by a power
    // of two, `floor` and the subtraction are all exact in f64.
    let (q, exp_field) = if a < pow2(-14) {
        (a * pow2(24), 0u32) // subnormal: units of 2^-24
    } else {
        let e = ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        if e > 15 {
            return f16::from_bits(sign | INF as u16);
        }
        (a * pow2(10 - e), (e + 15) as u32)
    };
    let floor = q.floor();
    let frac = q - floor;
    let mut m = floor as u32;
    let up = match rounding {
        Rounding::NearestEven => frac > 0.5 || (frac == 0.5 && m & 1 == 1),
        Rounding::NearestTiesAway => frac >= 0.5,
    };
    if up {
        m += 1;
    }
    // For normals m is in [1024, 2048]; m == 2048 carries into the exponent.
    // For subnormals m is in [0, 1024]; m == 1024 is the smallest normal.
    let bits = if exp_field == 0 {
        m
    } else {
        (exp_field << 10) + (m - 1024)
    };
    f16::from_bits(sign | bits.min(INF) as u16)
}

/// Rounds an `f32` to fp16 once (the conversion to `f64` is exact).
pub fn round_f32(x: f32, rounding: Rounding) -> f16 {
    round_f64(f64::from(x), rounding)
}

/// The operations on single values. The slice functions of the parent
/// module apply these elementwise.
pub mod scalar {
    use super::{round_f64, Rounding, CANONICAL_NAN};
    use half::f16;

    /// `a + b`, exact, rounded once.
    pub fn add(a: f16, b: f16, rounding: Rounding) -> f16 {
        round_f64(f64::from(a) + f64::from(b), rounding)
    }

    /// `a · b`, exact, rounded once.
    pub fn mul(a: f16, b: f16, rounding: Rounding) -> f16 {
        round_f64(f64::from(a) * f64::from(b), rounding)
    }

    /// The smaller input; NaN if either is NaN; `min(−0, +0) = −0`.
    pub fn min(a: f16, b: f16) -> f16 {
        if a.is_nan() || b.is_nan() {
            return CANONICAL_NAN;
        }
        if a == b {
            // Equal values, possibly zeros of opposite sign: prefer −0.
            return if a.is_sign_negative() { a } else { b };
        }
        if a < b {
            a
        } else {
            b
        }
    }

    /// The larger input; NaN if either is NaN; `max(−0, +0) = +0`.
    pub fn max(a: f16, b: f16) -> f16 {
        if a.is_nan() || b.is_nan() {
            return CANONICAL_NAN;
        }
        if a == b {
            return if a.is_sign_negative() { b } else { a };
        }
        if a > b {
            a
        } else {
            b
        }
    }

    /// `a` where `cond` is non-zero (NaN included), else `b`.
    pub fn select(cond: f16, a: f16, b: f16) -> f16 {
        // `!=` is true for NaN, and ±0 both compare equal to zero.
        if cond != f16::ZERO {
            a
        } else {
            b
        }
    }

    /// `max(x, 0)` with `−0 → +0` and NaN → NaN.
    pub fn relu(x: f16) -> f16 {
        if x.is_nan() {
            CANONICAL_NAN
        } else if x > f16::ZERO {
            x
        } else {
            f16::ZERO
        }
    }

    /// `1 / (1 + e^−x)` in `f64`, rounded once.
    pub fn sigmoid(x: f16, rounding: Rounding) -> f16 {
        let x = f64::from(x);
        round_f64(1.0 / (1.0 + (-x).exp()), rounding)
    }

    /// The error function in `f64`: its Maclaurin series for `|x| <= 3`
    /// (terms below 10^4, so about 12 correct digits survive the
    /// cancellation), beyond that `1 − erfc(x)` with `erfc` from its
    /// continued fraction, evaluated backwards over 60 terms.
    pub fn erf(x: f64) -> f64 {
        if x.is_nan() {
            return x;
        }
        let a = x.abs();
        let v = if a <= 3.0 {
            // erf(a) = 2/√π · Σ (−1)^n a^(2n+1) / (n! (2n+1)).
            let mut term = a; // (−1)^n a^(2n+1) / n!
            let mut sum = a;
            let mut n = 0.0f64;
            while term.abs() > 1e-17 * sum.abs() {
                n += 1.0;
                term *= -a * a / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / core::f64::consts::PI.sqrt()
        } else {
            // erfc(a) = e^−a² / √π · 1 / (a + (1/2) / (a + 1 / (a + (3/2) / (a + …)))).
            let mut tail = a;
            for k in (1..=60).rev() {
                tail = a + f64::from(k) / 2.0 / tail;
            }
            1.0 - (-a * a).exp() / core::f64::consts::PI.sqrt() / tail
        };
        if x < 0.0 {
            -v
        } else {
            v
        }
    }

    /// `x · Φ(x)` (ONNX `Gelu`, `approximate = "none"`) in `f64`.
    pub fn gelu_f64(x: f64) -> f64 {
        0.5 * x * (1.0 + erf(x / core::f64::consts::SQRT_2))
    }

    /// [`gelu_f64`] of an fp16 value, rounded once.
    pub fn gelu(x: f16, rounding: Rounding) -> f16 {
        round_f64(gelu_f64(f64::from(x)), rounding)
    }
}

/// Errors of the reference operations: operands that do not fit together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    /// An operand has the wrong number of elements.
    #[error("operand {operand} has {found} elements, expected {expected}")]
    Length {
        /// Which operand.
        operand: &'static str,
        /// Required element count.
        expected: usize,
        /// Actual element count.
        found: usize,
    },
    /// A size parameter is zero.
    #[error("{what} is 0; it must be at least 1")]
    Zero {
        /// Which parameter.
        what: &'static str,
    },
    /// A product of size parameters overflows `usize`.
    #[error("{what} = {value} makes the operand size overflow")]
    Overflow {
        /// Which parameter.
        what: &'static str,
        /// Its value.
        value: usize,
    },
    /// The output shape is invalid.
    #[error("output shape: {0}")]
    Shape(#[from] ShapeError),
}

fn check_len(operand: &'static str, slice: &[f16], expected: usize) -> Result<(), RefError> {
    if slice.len() != expected {
        return Err(RefError::Length {
            operand,
            expected,
            found: slice.len(),
        });
    }
    Ok(())
}

fn binary(a: &[f16], b: &[f16], op: impl Fn(f16, f16) -> f16) -> Result<Vec<f16>, RefError> {
    check_len("b", b, a.len())?;
    Ok(a.iter().zip(b).map(|(&x, &y)| op(x, y)).collect())
}

/// Elementwise `a + b` (equal lengths; see the module's numeric model).
pub fn add(a: &[f16], b: &[f16], rounding: Rounding) -> Result<Vec<f16>, RefError> {
    binary(a, b, |x, y| scalar::add(x, y, rounding))
}

/// Elementwise `a · b`.
pub fn mul(a: &[f16], b: &[f16], rounding: Rounding) -> Result<Vec<f16>, RefError> {
    binary(a, b, |x, y| scalar::mul(x, y, rounding))
}

/// Elementwise minimum.
pub fn min(a: &[f16], b: &[f16]) -> Result<Vec<f16>, RefError> {
    binary(a, b, scalar::min)
}

/// Elementwise maximum.
pub fn max(a: &[f16], b: &[f16]) -> Result<Vec<f16>, RefError> {
    binary(a, b, scalar::max)
}

/// Elementwise `where(cond, a, b)`.
pub fn select(cond: &[f16], a: &[f16], b: &[f16]) -> Result<Vec<f16>, RefError> {
    check_len("a", a, cond.len())?;
    check_len("b", b, cond.len())?;
    Ok(cond
        .iter()
        .zip(a.iter().zip(b))
        .map(|(&c, (&x, &y))| scalar::select(c, x, y))
        .collect())
}

/// Elementwise ReLU.
pub fn relu(x: &[f16]) -> Vec<f16> {
    x.iter().map(|&v| scalar::relu(v)).collect()
}

/// Elementwise GELU (`x · Φ(x)`), each value rounded once.
pub fn gelu(x: &[f16], rounding: Rounding) -> Vec<f16> {
    x.iter().map(|&v| scalar::gelu(v, rounding)).collect()
}

/// Elementwise sigmoid.
pub fn sigmoid(x: &[f16], rounding: Rounding) -> Vec<f16> {
    x.iter().map(|&v| scalar::sigmoid(v, rounding)).collect()
}

/// `Σ x[i]·w[i]` over the given index pairs, with the module's accumulation
/// rule (exact f32 products, f32 sum in order, then bias, one rounding).
fn dot(pairs: impl Iterator<Item = (f16, f16)>, bias: Option<f16>, rounding: Rounding) -> f16 {
    let mut acc = 0.0f32;
    for (x, w) in pairs {
        acc += f32::from(x) * f32::from(w);
    }
    if let Some(b) = bias {
        acc += f32::from(b);
    }
    round_f32(acc, rounding)
}

fn product(what: &'static str, a: usize, b: usize) -> Result<usize, RefError> {
    a.checked_mul(b)
        .ok_or(RefError::Overflow { what, value: b })
}

/// 1×1 convolution of the dense NCHW `input` of shape `shape` with
/// `weights` laid out `[Cout][Cin]` (row-major) and an optional `bias[Cout]`.
/// Returns the output shape `(N, Cout, H, W)` and the dense output.
pub fn conv1x1(
    input: &[f16],
    shape: &Shape,
    weights: &[f16],
    out_channels: usize,
    bias: Option<&[f16]>,
    rounding: Rounding,
) -> Result<(Shape, Vec<f16>), RefError> {
    let [n, cin, h, w] = shape.dims();
    check_len("input", input, shape.elements())?;
    if out_channels == 0 {
        return Err(RefError::Zero {
            what: "out_channels",
        });
    }
    check_len(
        "weights",
        weights,
        product("out_channels", cin, out_channels)?,
    )?;
    if let Some(b) = bias {
        check_len("bias", b, out_channels)?;
    }
    let out_shape = Shape::new(n, out_channels, h, w)?;
    let hw = h * w; // fits: part of the validated input shape
    let mut out = Vec::with_capacity(out_shape.elements());
    for batch in input.chunks_exact(cin * hw) {
        for (co, wrow) in weights.chunks_exact(cin).enumerate() {
            let b = bias.map(|b| b[co]);
            for p in 0..hw {
                let pairs = wrow
                    .iter()
                    .enumerate()
                    .map(|(ci, &wv)| (batch[ci * hw + p], wv));
                out.push(dot(pairs, b, rounding));
            }
        }
    }
    Ok((out_shape, out))
}

/// Fully connected layer: `x` is `[batch][in_features]`, `weights` is
/// `[out_features][in_features]` (the PyTorch `Linear` layout, and the
/// `[Cout][Cin]` of [`conv1x1`]), `bias` is `[out_features]`. Returns
/// `[batch][out_features]`.
pub fn linear(
    x: &[f16],
    batch: usize,
    in_features: usize,
    weights: &[f16],
    out_features: usize,
    bias: Option<&[f16]>,
    rounding: Rounding,
) -> Result<Vec<f16>, RefError> {
    for (what, v) in [
        ("batch", batch),
        ("in_features", in_features),
        ("out_features", out_features),
    ] {
        if v == 0 {
            return Err(RefError::Zero { what });
        }
    }
    check_len("x", x, product("batch", in_features, batch)?)?;
    check_len(
        "weights",
        weights,
        product("out_features", in_features, out_features)?,
    )?;
    if let Some(b) = bias {
        check_len("bias", b, out_features)?;
    }
    product("out_features", batch, out_features)?;
    let mut out = Vec::with_capacity(batch * out_features);
    for row in x.chunks_exact(in_features) {
        for (o, wrow) in weights.chunks_exact(in_features).enumerate() {
            let pairs = row.iter().copied().zip(wrow.iter().copied());
            out.push(dot(pairs, bias.map(|b| b[o]), rounding));
        }
    }
    Ok(out)
}

/// Matrix product `a · b` with `a` `[m][k]` and `b` `[k][n]`, both
/// row-major; returns `[m][n]`. Same accumulation rule as [`linear`]
/// (ascending `k`).
pub fn matmul(
    a: &[f16],
    m: usize,
    k: usize,
    b: &[f16],
    n: usize,
    rounding: Rounding,
) -> Result<Vec<f16>, RefError> {
    for (what, v) in [("m", m), ("k", k), ("n", n)] {
        if v == 0 {
            return Err(RefError::Zero { what });
        }
    }
    check_len("a", a, product("m", k, m)?)?;
    check_len("b", b, product("n", k, n)?)?;
    product("n", m, n)?;
    let mut out = Vec::with_capacity(m * n);
    for row in a.chunks_exact(k) {
        for j in 0..n {
            let pairs = row.iter().enumerate().map(|(i, &av)| (av, b[i * n + j]));
            out.push(dot(pairs, None, rounding));
        }
    }
    Ok(out)
}

/// [`ulp_diff`] of a NaN and a non-NaN value.
pub const ULP_NAN_MISMATCH: u32 = u32::MAX;

/// Position of `x` on the line of fp16 values: consecutive finite values
/// (and the largest finite value and infinity) are 1 apart, both zeros are 0.
fn ulp_key(x: f16) -> i32 {
    let bits = x.to_bits();
    let magnitude = i32::from(bits & 0x7FFF);
    if bits & 0x8000 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// The number of fp16 steps between `a` and `b`.
///
/// - 0 when the values are equal, and for `+0` vs `−0`;
/// - steps are counted across zero (`−min_subnormal` to `+min_subnormal`
///   is 2) and up to infinity (65504 to `+inf` is 1);
/// - two NaNs (any payloads) are 0 apart; a NaN and a non-NaN are
///   [`ULP_NAN_MISMATCH`] apart.
pub fn ulp_diff(a: f16, b: f16) -> u32 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0,
        (true, false) | (false, true) => ULP_NAN_MISMATCH,
        (false, false) => (ulp_key(a) - ulp_key(b)).unsigned_abs(),
    }
}

/// Summary of a comparison of device output with reference output: the
/// figures of a parity table row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UlpStats {
    /// Elements compared.
    pub count: usize,
    /// Largest [`ulp_diff`] seen ([`ULP_NAN_MISMATCH`] if NaNs disagree).
    pub max_ulp: u32,
    /// Index of the first element with the largest difference, if any
    /// element differs.
    pub max_ulp_index: Option<usize>,
    /// Elements whose ULP difference exceeds the tolerance.
    pub mismatches: usize,
    /// Elements whose bits differ at all (counts `+0` vs `−0` and NaN
    /// payloads, which ULP distance ignores).
    pub bit_mismatches: usize,
    /// Elements where exactly one side is NaN.
    pub nan_mismatches: usize,
}

impl UlpStats {
    /// True when no element exceeds the tolerance.
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// Compares `actual` against `expected` elementwise; differences above
/// `tolerance_ulp` count as mismatches.
pub fn compare(expected: &[f16], actual: &[f16], tolerance_ulp: u32) -> Result<UlpStats, RefError> {
    check_len("actual", actual, expected.len())?;
    let mut s = UlpStats {
        count: expected.len(),
        ..UlpStats::default()
    };
    for (i, (&e, &a)) in expected.iter().zip(actual).enumerate() {
        let d = ulp_diff(e, a);
        if d > s.max_ulp {
            s.max_ulp = d;
            s.max_ulp_index = Some(i);
        }
        if d > tolerance_ulp {
            s.mismatches += 1;
        }
        if e.to_bits() != a.to_bits() {
            s.bit_mismatches += 1;
        }
        if d == ULP_NAN_MISMATCH {
            s.nan_mismatches += 1;
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parity::Rng;
    use Rounding::{NearestEven as RNE, NearestTiesAway as RNA};

    fn h(x: f32) -> f16 {
        f16::from_f32(x)
    }
    fn b(bits: u16) -> f16 {
        f16::from_bits(bits)
    }
    /// The neighbouring f64 values of a non-zero finite `x` (one step
    /// either way in magnitude); `f64::next_up` needs Rust 1.86.
    fn neighbours(x: f64) -> [f64; 2] {
        [
            f64::from_bits(x.to_bits() + 1),
            f64::from_bits(x.to_bits() - 1),
        ]
    }
    const MIN_SUB: u16 = 0x0001; // 2^-24
    const MAX_SUB: u16 = 0x03FF;
    const MIN_NORMAL: u16 = 0x0400; // 2^-14
    const MAX: u16 = 0x7BFF; // 65504
    const INF: u16 = 0x7C00;
    const NEG_INF: u16 = 0xFC00;

    #[test]
    fn rne_matches_half_crate_away_from_subnormal_ties() {
        // `half` converts with round-to-nearest-even. Agree with it on random
        // f32 bit patterns, and on random f64 bit patterns outside the fp16
        // subnormal range: there `half` 2.7's f64 conversion is not correctly
        // rounded on x86_64 (it returns +0 for 2^-25·(1 + 2^-52), which lies
        // above the tie and must round up to 2^-24; consistent with rounding
        // through f32 first), so the exhaustive test below uses the
        // definition instead.
        let mut rng = Rng::new(0x1234_5678_9ABC_DEF1);
        for _ in 0..200_000 {
            let x = f64::from_bits(rng.next_u64());
            if x.is_nan() {
                assert_eq!(round_f64(x, RNE).to_bits(), 0x7E00);
            } else if x.abs() >= f64::powi(2.0, -14) {
                assert_eq!(
                    round_f64(x, RNE).to_bits(),
                    f16::from_f64(x).to_bits(),
                    "{x:e}"
                );
            }
            let y = f32::from_bits(rng.next_u64() as u32);
            if !y.is_nan() {
                assert_eq!(
                    round_f32(y, RNE).to_bits(),
                    f16::from_f32(y).to_bits(),
                    "{y:e}"
                );
            }
        }
        let odd = f64::from_bits(0x3E60_0000_0000_0001); // 2^-25 (1 + 2^-52)
        assert_eq!(round_f64(odd, RNE).to_bits(), MIN_SUB);
    }

    #[test]
    fn every_value_and_every_midpoint() {
        // Every finite fp16 value converts to itself; at every midpoint
        // between neighbours (in magnitude) the modes follow their tie rule,
        // and one f64 step either side goes to the nearer neighbour.
        for bits in 0..=u16::MAX {
            let v = b(bits);
            if v.is_nan() {
                continue;
            }
            let x = f64::from(v);
            assert_eq!(round_f64(x, RNE).to_bits(), bits);
            assert_eq!(round_f64(x, RNA).to_bits(), bits);
            if v.is_infinite() {
                continue;
            }
            // `up` is the neighbour of larger magnitude (may be infinity).
            let up = bits + 1;
            let next = f64::from(b(up));
            let mid = if next.is_finite() {
                (x + next) / 2.0
            } else {
                // Beyond 65504 the next step would be 65536.
                x + x.signum() * 16.0
            };
            let even = if bits & 1 == 0 { bits } else { up };
            assert_eq!(round_f64(mid, RNE).to_bits(), even, "{mid:e}");
            assert_eq!(round_f64(mid, RNA).to_bits(), up, "{mid:e}");
            let [outer, inner] = neighbours(mid);
            for r in [RNE, RNA] {
                assert_eq!(round_f64(outer, r).to_bits(), up, "{outer:e}");
                assert_eq!(round_f64(inner, r).to_bits(), bits, "{inner:e}");
            }
        }
    }

    #[test]
    fn ties_differ_only_on_odd_significands() {
        // 2049 lies halfway between 2048 (even) and 2050 (odd significand).
        assert_eq!(f32::from(round_f64(2049.0, RNE)), 2048.0);
        assert_eq!(f32::from(round_f64(2049.0, RNA)), 2050.0);
        // 2051 between 2050 (odd) and 2052 (even): both modes go up.
        assert_eq!(f32::from(round_f64(2051.0, RNE)), 2052.0);
        assert_eq!(f32::from(round_f64(2051.0, RNA)), 2052.0);
        // Negative ties: away from zero means more negative.
        assert_eq!(f32::from(round_f64(-2049.0, RNE)), -2048.0);
        assert_eq!(f32::from(round_f64(-2049.0, RNA)), -2050.0);
        // 1 + 2^-11 is the tie between 1 and 1 + 2^-10.
        let tie = 1.0 + f64::powi(2.0, -11);
        assert_eq!(round_f64(tie, RNE).to_bits(), 0x3C00);
        assert_eq!(round_f64(tie, RNA).to_bits(), 0x3C01);
        // Just off the tie, both agree.
        let [above, below] = neighbours(tie);
        assert_eq!(round_f64(above, RNE).to_bits(), 0x3C01);
        assert_eq!(round_f64(below, RNA).to_bits(), 0x3C00);
    }

    #[test]
    fn subnormals_zero_and_overflow() {
        let two = |k: i32| f64::powi(2.0, k);
        // Exact subnormals survive.
        assert_eq!(round_f64(two(-24), RNE).to_bits(), MIN_SUB);
        assert_eq!(round_f64(1023.0 * two(-24), RNE).to_bits(), MAX_SUB);
        // Half the smallest subnormal is a tie between 0 and 2^-24.
        assert_eq!(round_f64(two(-25), RNE).to_bits(), 0x0000);
        assert_eq!(round_f64(two(-25), RNA).to_bits(), MIN_SUB);
        assert_eq!(round_f64(-two(-25), RNE).to_bits(), 0x8000);
        assert_eq!(round_f64(-two(-25), RNA).to_bits(), 0x8000 | MIN_SUB);
        // 1.5 * 2^-24: tie between 1 (odd) and 2 units -> both give 2.
        assert_eq!(round_f64(1.5 * two(-24), RNE).to_bits(), 0x0002);
        assert_eq!(round_f64(1.5 * two(-24), RNA).to_bits(), 0x0002);
        // Below the tie: zero with the sign kept.
        assert_eq!(round_f64(two(-26), RNA).to_bits(), 0x0000);
        assert_eq!(round_f64(-two(-26), RNA).to_bits(), 0x8000);
        assert_eq!(round_f64(-0.0, RNE).to_bits(), 0x8000);
        // Rounding up out of the subnormal range gives the smallest normal.
        let top = 1023.5 * two(-24);
        assert_eq!(round_f64(top, RNE).to_bits(), MIN_NORMAL);
        assert_eq!(round_f64(top, RNA).to_bits(), MIN_NORMAL);
        // Overflow: 65520 is the tie between 65504 and 65536 -> inf in both.
        assert_eq!(round_f64(65519.99, RNE).to_bits(), MAX);
        assert_eq!(round_f64(65520.0, RNE).to_bits(), INF);
        assert_eq!(round_f64(65520.0, RNA).to_bits(), INF);
        assert_eq!(round_f64(-65520.0, RNA).to_bits(), NEG_INF);
        assert_eq!(round_f64(1e300, RNE).to_bits(), INF);
        assert_eq!(round_f64(f64::NEG_INFINITY, RNA).to_bits(), NEG_INF);
        assert_eq!(round_f64(f64::NAN, RNE).to_bits(), 0x7E00);
        assert_eq!(round_f64(-f64::NAN, RNA).to_bits(), 0x7E00);
    }

    #[test]
    fn add_and_mul_edge_cases() {
        let add = |x: u16, y: u16, r| scalar::add(b(x), b(y), r).to_bits();
        let mul = |x: u16, y: u16, r| scalar::mul(b(x), b(y), r).to_bits();
        // The recorded hardware results: 3 + 2 = 5, 3 · 2 = 6 (td.md §1.7).
        assert_eq!(scalar::add(h(3.0), h(2.0), RNE), h(5.0));
        assert_eq!(scalar::mul(h(3.0), h(2.0), RNA), h(6.0));
        // 2048 + 1 is a tie: the two modes part.
        assert_eq!(f32::from(scalar::add(h(2048.0), h(1.0), RNE)), 2048.0);
        assert_eq!(f32::from(scalar::add(h(2048.0), h(1.0), RNA)), 2050.0);
        // 65504 + 65504 overflows; 65504 + 8 is below the tie and stays.
        assert_eq!(add(MAX, MAX, RNE), INF);
        assert_eq!(f32::from(scalar::add(h(65504.0), h(8.0), RNA)), 65504.0);
        assert_eq!(
            f32::from(scalar::add(h(65504.0), h(16.0), RNE)),
            f32::INFINITY
        );
        // Subnormal arithmetic is exact (no flush to zero).
        assert_eq!(add(MIN_SUB, MIN_SUB, RNE), 0x0002);
        assert_eq!(add(MAX_SUB, MIN_SUB, RNE), MIN_NORMAL);
        // 2^-24 · 0.5 is a tie between 0 and 2^-24.
        assert_eq!(mul(MIN_SUB, 0x3800, RNE), 0x0000);
        assert_eq!(mul(MIN_SUB, 0x3800, RNA), MIN_SUB);
        // Signed zeros.
        assert_eq!(add(0x8000, 0x8000, RNE), 0x8000);
        assert_eq!(add(0x8000, 0x0000, RNE), 0x0000);
        assert_eq!(mul(0x8000, 0x3C00, RNE), 0x8000);
        assert_eq!(add(0x3C00, 0xBC00, RNA), 0x0000); // x - x = +0
                                                      // Infinities and NaN.
        assert_eq!(add(INF, MAX, RNE), INF);
        assert_eq!(add(INF, NEG_INF, RNE), 0x7E00);
        assert_eq!(mul(INF, 0x0000, RNE), 0x7E00);
        assert_eq!(mul(NEG_INF, 0x3C00, RNA), NEG_INF);
        assert_eq!(add(0x7E01, 0x3C00, RNE), 0x7E00);
        assert_eq!(mul(0xFE00, 0x3C00, RNE), 0x7E00);
        // A product that needs all 22 bits: (1+2^-10)^2 = 1 + 2^-9 + 2^-20.
        assert_eq!(mul(0x3C01, 0x3C01, RNE), 0x3C02);
        // 2048 + (1 + 2^-10) = 2049.0009765625, just above the tie 2049:
        // both modes round up.
        assert_eq!(f32::from(scalar::add(h(2048.0), b(0x3C01), RNE)), 2050.0);
    }

    #[test]
    fn recorded_hardware_results_hold_in_both_modes() {
        // td.md §1.7: none of these is a tie, so they cannot tell the two
        // rounding modes apart.
        for r in [RNE, RNA] {
            assert_eq!(scalar::add(h(3.0), h(2.0), r), h(5.0));
            assert_eq!(scalar::mul(h(3.0), h(2.0), r), h(6.0));
            assert_eq!(scalar::sigmoid(h(3.0), r).to_bits(), 0x3B9F);
            let s = Shape::new(1, 3, 1, 1).unwrap();
            let (_, y) = conv1x1(&[h(3.0); 3], &s, &[h(2.0); 9], 3, None, r).unwrap();
            assert_eq!(y, vec![h(18.0); 3]);
            // gemm.py with weights 0.5 and 256 of 512 inputs 1.0: 128.
            let mut x = vec![h(0.0); 512];
            x[..256].fill(h(1.0));
            let y = linear(&x, 1, 512, &vec![h(0.5); 512], 1, None, r).unwrap();
            assert_eq!(y, vec![h(128.0)]);
        }
    }

    #[test]
    fn min_max_select_relu() {
        assert_eq!(scalar::min(h(1.0), h(-2.0)), h(-2.0));
        assert_eq!(scalar::max(h(1.0), h(-2.0)), h(1.0));
        assert_eq!(scalar::min(b(0x0000), b(0x8000)).to_bits(), 0x8000);
        assert_eq!(scalar::min(b(0x8000), b(0x0000)).to_bits(), 0x8000);
        assert_eq!(scalar::max(b(0x8000), b(0x0000)).to_bits(), 0x0000);
        assert_eq!(scalar::max(b(0x0000), b(0x8000)).to_bits(), 0x0000);
        assert!(scalar::min(b(0x7E00), h(1.0)).is_nan());
        assert!(scalar::max(h(1.0), b(0xFE00)).is_nan());
        assert_eq!(scalar::max(b(NEG_INF), b(MIN_SUB)).to_bits(), MIN_SUB);
        assert_eq!(scalar::min(b(INF), b(MAX)).to_bits(), MAX);

        assert_eq!(scalar::select(h(1.0), h(2.0), h(3.0)), h(2.0));
        assert_eq!(scalar::select(b(0x8000), h(2.0), h(3.0)), h(3.0));
        assert_eq!(scalar::select(b(0x0000), h(2.0), h(3.0)), h(3.0));
        assert_eq!(scalar::select(b(0x7E00), h(2.0), h(3.0)), h(2.0));
        assert_eq!(scalar::select(b(MIN_SUB), h(2.0), h(3.0)), h(2.0));

        // The relu transcript of AB expt3: [-3, 5, -1, 2] -> [0, 5, 0, 2].
        let x = [h(-3.0), h(5.0), h(-1.0), h(2.0)];
        assert_eq!(relu(&x), vec![h(0.0), h(5.0), h(0.0), h(2.0)]);
        assert_eq!(scalar::relu(b(0x8000)).to_bits(), 0x0000);
        assert_eq!(scalar::relu(b(0x8001)).to_bits(), 0x0000);
        assert_eq!(scalar::relu(b(MIN_SUB)).to_bits(), MIN_SUB);
        assert_eq!(scalar::relu(b(INF)).to_bits(), INF);
        assert_eq!(scalar::relu(b(NEG_INF)).to_bits(), 0x0000);
        assert!(scalar::relu(b(0xFE00)).is_nan());
    }

    #[test]
    fn sigmoid_values() {
        // sigmoid(3) on hardware returned 0.95263671875 (0x3B9F), td.md §1.7.
        assert_eq!(scalar::sigmoid(h(3.0), RNE).to_bits(), 0x3B9F);
        assert_eq!(scalar::sigmoid(h(3.0), RNA).to_bits(), 0x3B9F);
        assert_eq!(scalar::sigmoid(h(0.0), RNE), h(0.5));
        assert_eq!(scalar::sigmoid(b(INF), RNE), h(1.0));
        assert_eq!(scalar::sigmoid(b(NEG_INF), RNE).to_bits(), 0x0000);
        assert!(scalar::sigmoid(b(0x7E00), RNE).is_nan());
        // Large negative inputs give subnormal results, not zero.
        let s = scalar::sigmoid(h(-16.0), RNE);
        assert!(s.to_bits() > 0 && s.to_bits() < MIN_NORMAL, "{s}");
        let v = sigmoid(&[h(-5.0), h(0.0), h(5.0)], RNE);
        assert!((f32::from(v[0]) - 0.0067).abs() < 1e-3);
        assert!((f32::from(v[2]) - 0.9933).abs() < 1e-3);
    }

    #[test]
    fn slices_check_lengths() {
        let a = [h(1.0), h(2.0)];
        assert_eq!(
            add(&a, &[h(1.0)], RNE),
            Err(RefError::Length {
                operand: "b",
                expected: 2,
                found: 1
            })
        );
        assert_eq!(mul(&a, &a, RNE).unwrap(), vec![h(1.0), h(4.0)]);
        assert_eq!(min(&a, &[h(0.5), h(3.0)]).unwrap(), vec![h(0.5), h(2.0)]);
        assert_eq!(max(&a, &[h(0.5), h(3.0)]).unwrap(), vec![h(1.0), h(3.0)]);
        assert!(matches!(
            select(&a, &a, &[h(0.0)]),
            Err(RefError::Length { operand: "b", .. })
        ));
        assert!(matches!(
            select(&a, &[h(0.0)], &a),
            Err(RefError::Length { operand: "a", .. })
        ));
        let e = add(&a, &[], RNE).unwrap_err();
        assert_eq!(e.to_string(), "operand b has 0 elements, expected 2");
    }

    #[test]
    fn conv1x1_by_hand() {
        // The conv fixture: 3 channels of 3.0, all weights 2.0 -> 18.0
        // (hardware transcript, td.md §1.7).
        let s = Shape::new(1, 3, 1, 1).unwrap();
        let (os, y) = conv1x1(&[h(3.0); 3], &s, &[h(2.0); 9], 3, None, RNE).unwrap();
        assert_eq!(os.dims(), [1, 3, 1, 1]);
        assert_eq!(y, vec![h(18.0); 3]);

        // Distinct weights, two pixels, a batch of 2, bias.
        // x[n][c][p]: n0 c0 = [1, 2], c1 = [3, 4]; n1 = n0 * -1.
        let s = Shape::new(2, 2, 1, 2).unwrap();
        let x: Vec<f16> = [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0, -4.0]
            .iter()
            .map(|&v| h(v))
            .collect();
        // w[co][ci]: co0 = [1, 10], co1 = [0.5, -1], co2 = [0, 0].
        let w: Vec<f16> = [1.0, 10.0, 0.5, -1.0, 0.0, 0.0]
            .iter()
            .map(|&v| h(v))
            .collect();
        let bias = [h(100.0), h(0.25), h(-7.0)];
        let (os, y) = conv1x1(&x, &s, &w, 3, Some(&bias), RNE).unwrap();
        assert_eq!(os.dims(), [2, 3, 1, 2]);
        let want = [
            131.0, 142.0, -2.25, -2.75, -7.0, -7.0, // n0
            69.0, 58.0, 2.75, 3.25, -7.0, -7.0, // n1
        ];
        let got: Vec<f32> = y.iter().map(|&v| f32::from(v)).collect();
        assert_eq!(got, want);

        assert!(matches!(
            conv1x1(&x, &s, &w, 2, None, RNE),
            Err(RefError::Length {
                operand: "weights",
                expected: 4,
                found: 6
            })
        ));
        assert!(matches!(
            conv1x1(&x[1..], &s, &w, 3, None, RNE),
            Err(RefError::Length {
                operand: "input",
                ..
            })
        ));
        assert!(matches!(
            conv1x1(&x, &s, &w, 3, Some(&bias[..2]), RNE),
            Err(RefError::Length {
                operand: "bias",
                ..
            })
        ));
        assert_eq!(
            conv1x1(&x, &s, &[], 0, None, RNE),
            Err(RefError::Zero {
                what: "out_channels"
            })
        );
    }

    #[test]
    fn accumulation_is_f32_in_order_then_one_rounding() {
        // 2048 + 1 + 1 accumulated in f32 is exactly 2050 (no intermediate
        // fp16 rounding, which would lose each +1 under RNE).
        let x = [h(2048.0), h(1.0), h(1.0)];
        let w = [h(1.0); 3];
        let y = linear(&x, 1, 3, &w, 1, None, RNE).unwrap();
        assert_eq!(f32::from(y[0]), 2050.0);
        // Only the final rounding sees the tie 2049 -> modes differ.
        let y = linear(&x[..2], 1, 2, &w[..2], 1, None, RNE).unwrap();
        assert_eq!(f32::from(y[0]), 2048.0);
        let y = linear(&x[..2], 1, 2, &w[..2], 1, None, RNA).unwrap();
        assert_eq!(f32::from(y[0]), 2050.0);
        // Order matters in f32: 2^24 + 1 - 2^24 = 0 but -2^24 + 2^24 + 1 = 1.
        let big = h(2048.0); // 2048 * 8192 = 2^24
        let x = [big, h(1.0), big];
        let w = [h(8192.0), h(1.0), h(-8192.0)];
        assert_eq!(
            f32::from(linear(&x, 1, 3, &w, 1, None, RNE).unwrap()[0]),
            0.0
        );
        let x = [big, big, h(1.0)];
        let w = [h(8192.0), h(-8192.0), h(1.0)];
        assert_eq!(
            f32::from(linear(&x, 1, 3, &w, 1, None, RNE).unwrap()[0]),
            1.0
        );
        // The bias is added after the last product: 2^24 + 1 - 2^24 = 0,
        // then + 1 = 1 (adding it first would also lose it against 2^24).
        let x = [big, h(1.0), big];
        let w = [h(8192.0), h(1.0), h(-8192.0)];
        let y = linear(&x, 1, 3, &w, 1, Some(&[h(1.0)]), RNE).unwrap();
        assert_eq!(f32::from(y[0]), 1.0);
    }

    #[test]
    fn linear_and_matmul_by_hand() {
        // x [2][3], w [2][3].
        let x: Vec<f16> = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
            .iter()
            .map(|&v| h(v))
            .collect();
        let w: Vec<f16> = [1.0, 0.0, -1.0, 0.5, 0.5, 0.5]
            .iter()
            .map(|&v| h(v))
            .collect();
        let y = linear(&x, 2, 3, &w, 2, Some(&[h(1.0), h(0.0)]), RNE).unwrap();
        let got: Vec<f32> = y.iter().map(|&v| f32::from(v)).collect();
        assert_eq!(got, [-1.0, 3.0, -1.0, 7.5]);
        // matmul with b = w transposed gives the same without bias.
        let bt: Vec<f16> = [1.0, 0.5, 0.0, 0.5, -1.0, 0.5]
            .iter()
            .map(|&v| h(v))
            .collect();
        let y = matmul(&x, 2, 3, &bt, 2, RNE).unwrap();
        let got: Vec<f32> = y.iter().map(|&v| f32::from(v)).collect();
        assert_eq!(got, [-2.0, 3.0, -2.0, 7.5]);
        // The gemm fixture shape (512 -> 512) with all weights 0.5 and
        // 256 inputs of 1.0: every output is 128.
        let mut x = vec![h(0.0); 512];
        x[..256].fill(h(1.0));
        let y = linear(&x, 1, 512, &vec![h(0.5); 512 * 512], 512, None, RNE).unwrap();
        assert!(y.iter().all(|&v| v == h(128.0)));

        assert_eq!(
            linear(&x, 0, 512, &[], 1, None, RNE),
            Err(RefError::Zero { what: "batch" })
        );
        assert!(matches!(
            linear(&x, 1, 512, &[h(0.0); 3], 1, None, RNE),
            Err(RefError::Length {
                operand: "weights",
                ..
            })
        ));
        assert!(matches!(
            linear(&x, usize::MAX, 512, &[], 1, None, RNE),
            Err(RefError::Overflow { what: "batch", .. })
        ));
        assert!(matches!(
            matmul(&x, 1, 512, &[h(0.0); 3], 1, RNE),
            Err(RefError::Length {
                operand: "b",
                expected: 512,
                found: 3
            })
        ));
        assert_eq!(
            matmul(&x, 1, 0, &[], 1, RNE),
            Err(RefError::Zero { what: "k" })
        );
    }

    #[test]
    fn ulp_diff_properties() {
        assert_eq!(ulp_diff(h(1.0), h(1.0)), 0);
        assert_eq!(ulp_diff(b(0x0000), b(0x8000)), 0);
        assert_eq!(ulp_diff(b(0x3C00), b(0x3C01)), 1);
        assert_eq!(ulp_diff(b(MIN_SUB), b(0x8000 | MIN_SUB)), 2);
        assert_eq!(ulp_diff(b(MIN_SUB), b(0x0000)), 1);
        assert_eq!(ulp_diff(b(MIN_SUB), b(0x8000)), 1);
        assert_eq!(ulp_diff(b(MAX_SUB), b(MIN_NORMAL)), 1);
        assert_eq!(ulp_diff(b(MAX), b(INF)), 1);
        assert_eq!(ulp_diff(b(NEG_INF), b(INF)), 2 * 0x7C00);
        assert_eq!(ulp_diff(b(0x7E00), b(0xFE01)), 0);
        assert_eq!(ulp_diff(b(0x7E00), b(INF)), ULP_NAN_MISMATCH);
        assert_eq!(ulp_diff(h(0.0), b(0x7C01)), ULP_NAN_MISMATCH);
        // Symmetry, identity and the triangle inequality on random values.
        let mut rng = Rng::new(42);
        for _ in 0..20_000 {
            let r = rng.next_u64();
            let (x, y, z) = (b(r as u16), b((r >> 16) as u16), b((r >> 32) as u16));
            assert_eq!(ulp_diff(x, y), ulp_diff(y, x));
            assert_eq!(ulp_diff(x, x), 0);
            if !(x.is_nan() || y.is_nan() || z.is_nan()) {
                assert!(ulp_diff(x, z) <= ulp_diff(x, y) + ulp_diff(y, z));
                // Zero distance means equal values.
                assert_eq!(ulp_diff(x, y) == 0, x == y);
            }
        }
    }

    #[test]
    fn compare_summarises() {
        let e = [h(1.0), h(2.0), b(0x0000), b(0x7E00), h(4.0)];
        let a = [h(1.0), b(0x4001), b(0x8000), h(3.0), b(0x4402)];
        let s = compare(&e, &a, 1).unwrap();
        assert_eq!(s.count, 5);
        assert_eq!(s.max_ulp, ULP_NAN_MISMATCH);
        assert_eq!(s.max_ulp_index, Some(3));
        assert_eq!(s.mismatches, 2); // the NaN and the 2-ulp element
        assert_eq!(s.bit_mismatches, 4);
        assert_eq!(s.nan_mismatches, 1);
        assert!(!s.passed());
        let s = compare(&e[..3], &a[..3], 1).unwrap();
        assert_eq!((s.max_ulp, s.max_ulp_index, s.mismatches), (1, Some(1), 0));
        assert!(s.passed());
        let s = compare(&e, &e, 0).unwrap();
        assert_eq!(
            s,
            UlpStats {
                count: 5,
                ..UlpStats::default()
            }
        );
        assert!(compare(&e, &a[..1], 0).is_err());
    }
}
