// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The neural engine's programmable non-linearity (MACCfg NonlinearMode 2):
//! a 128-byte table of binary16 values loaded through kernel DMA channel 0.
//!
//! Layout (td.md §2.4, derived from tinygrad's `sigmoid.hwx` and eiln's
//! compiled activation kernels), in binary16 halves:
//!
//! | half | content |
//! |---|---|
//! | 0, 1 | `x_lo`, `x_hi`: inputs below / above give `y_lo` / `y_hi` |
//! | 2, 3 | `y_lo`, `y_hi` |
//! | 4..=36 | 33 samples on a uniform grid |
//! | 37, 38 | left tail: slope, intercept |
//! | 39, 40 | right tail: slope, intercept |
//! | 41 | `k` = log2(1 / grid step), or 0x40 for a table without samples |
//! | 42 | flags |
//! | 43..=63 | zero |
//!
//! Only tables with flags = 1 are modelled: every such table in the
//! fixtures fits a grid centred on zero, `x = (i − 16) · 2^−k` for sample
//! `i` (sigmoid: −8..8 in steps of 1/2; GELU: −4..4 in steps of 1/4), with
//! the tails meeting the first and last samples. Other flag values select
//! symmetry or range reduction (tanh, exp, log, reciprocal, square root),
//! whose rules are not known; such tables are refused.
//!
//! Evaluation (an assumption only hardware can confirm, see the engine
//! documentation): NaN stays NaN; `x < x_lo` gives `y_lo` and `x > x_hi`
//! gives `y_hi`; otherwise, with `t = x · 2^k + 16`, `t < 0` uses the left
//! tail, `t > 32` the right tail, and anything else interpolates linearly
//! between samples `⌊t⌋` and `⌊t⌋ + 1`. A table without samples (k = 0x40:
//! ReLU6, hard tanh, leaky ReLU) uses the left tail for `x <= 0` and the
//! right one for `x > 0`. Tails are `slope · x + intercept` (a zero
//! intercept is not added, so `−0` keeps its sign); interpolation is
//! `s[i] + f · (s[i+1] − s[i])`; every step is a binary32 operation rounded
//! to nearest even.

use super::fp::{F16, F32};

/// Bytes of a table.
pub(super) const LUT_BYTES: usize = 0x80;

/// Number of samples.
const SAMPLES: usize = 33;

/// Half index of the first sample.
const FIRST_SAMPLE: usize = 4;

/// Half index of the grid-step exponent.
const STEP_HALF: usize = 41;

/// Half index of the flags.
const FLAGS_HALF: usize = 42;

/// The only flag value modelled.
const FLAGS_PLAIN: u16 = 1;

/// Grid-step value of a table without samples.
const LINEAR_ONLY: u16 = 0x40;

/// Largest grid-step exponent accepted (a step of 2^−15).
const MAX_STEP_LOG2: u16 = 15;

#[derive(Clone, Copy, Debug)]
enum Body {
    /// Samples on the grid `(i − 16) · 2^−k`; `scale` is 2^k.
    Table { scale: F32, samples: [F16; SAMPLES] },
    /// No samples: the two tails meet at zero.
    Linear,
}

/// A parsed table.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lut {
    x_lo: F32,
    x_hi: F32,
    y_lo: F32,
    y_hi: F32,
    left: (F32, F32),
    right: (F32, F32),
    body: Body,
}

fn half(bytes: &[u8; LUT_BYTES], i: usize) -> u16 {
    let at = i.wrapping_mul(2);
    match (bytes.get(at), bytes.get(at.wrapping_add(1))) {
        (Some(&lo), Some(&hi)) => u16::from_le_bytes([lo, hi]),
        _ => 0,
    }
}

impl Lut {
    /// Parses a table; on a layout the model does not know, returns the
    /// half index and value that decided it.
    pub(super) fn parse(bytes: &[u8; LUT_BYTES]) -> Result<Lut, (u8, u16)> {
        let h = |i: usize| half(bytes, i);
        let f = |i: usize| F16(h(i)).to_f32();
        let flags = h(FLAGS_HALF);
        if flags != FLAGS_PLAIN {
            return Err((42, flags));
        }
        for i in FLAGS_HALF.wrapping_add(1)..LUT_BYTES / 2 {
            if h(i) != 0 {
                return Err((u8::try_from(i).unwrap_or(u8::MAX), h(i)));
            }
        }
        let k = h(STEP_HALF);
        let body = if k == LINEAR_ONLY {
            Body::Linear
        } else if k <= MAX_STEP_LOG2 {
            let scale = F32::pow2(i32::from(k)).ok_or((41, k))?;
            let mut samples = [F16::ZERO; SAMPLES];
            for (i, s) in samples.iter_mut().enumerate() {
                *s = F16(h(FIRST_SAMPLE.wrapping_add(i)));
            }
            Body::Table { scale, samples }
        } else {
            return Err((41, k));
        };
        Ok(Lut {
            x_lo: f(0),
            x_hi: f(1),
            y_lo: f(2),
            y_hi: f(3),
            left: (f(37), f(38)),
            right: (f(39), f(40)),
            body,
        })
    }

    fn tail((slope, intercept): (F32, F32), x: F32) -> F32 {
        let y = slope.mul_rne(x);
        // Like the planar engine's bias, a zero intercept is not added, so
        // the sign of a zero product survives.
        if intercept.is_zero() {
            y
        } else {
            y.add_rne(intercept)
        }
    }

    /// The table's value at `x`.
    pub(super) fn eval(&self, x: F32) -> F32 {
        if x.is_nan() {
            return F32::NAN;
        }
        if x.lt(self.x_lo) {
            return self.y_lo;
        }
        if x.gt(self.x_hi) {
            return self.y_hi;
        }
        match &self.body {
            Body::Linear => {
                if x.gt(F32::ZERO) {
                    Self::tail(self.right, x)
                } else {
                    Self::tail(self.left, x)
                }
            }
            Body::Table { scale, samples } => {
                let t = x.mul_rne(*scale).add_rne(F32::from_u32(16));
                if t.lt(F32::ZERO) {
                    return Self::tail(self.left, x);
                }
                if t.gt(F32::from_u32(32)) {
                    return Self::tail(self.right, x);
                }
                // 0 <= t <= 32 here, so the split exists.
                let Some((i, frac)) = t.split_int() else {
                    return F32::NAN;
                };
                let i = usize::try_from(i).unwrap_or(usize::MAX);
                let s0 = samples.get(i).map(|s| s.to_f32());
                let s1 = samples.get(i.wrapping_add(1)).map(|s| s.to_f32());
                match (s0, s1) {
                    (Some(s0), Some(s1)) => s0.add_rne(frac.mul_rne(s1.sub_rne(s0))),
                    // t == 32: the last sample.
                    (Some(s0), None) => s0,
                    _ => F32::NAN,
                }
            }
        }
    }
}
