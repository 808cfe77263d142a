// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Latency statistics of `bench`.

use serde::Serialize;

/// Summary of latency samples, in nanoseconds (rounded to the nearest).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// Number of samples.
    pub count: usize,
    /// Fastest.
    pub min_ns: u64,
    /// 10th percentile.
    pub p10_ns: u64,
    /// Median (50th percentile).
    pub median_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// Slowest.
    pub max_ns: u64,
    /// Arithmetic mean.
    pub mean_ns: u64,
}

/// The `p`-th percentile (0 ≤ `p` ≤ 100) of ascending `sorted` samples,
/// interpolating linearly between the two nearest ranks (NumPy's default,
/// "linear"): rank `p/100·(n−1)`. `None` for no samples.
pub fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = (p.clamp(0.0, 100.0) / 100.0) * last as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let (a, b) = (sorted[lo] as f64, sorted[hi] as f64);
    Some(a + (b - a) * (rank - lo as f64))
}

/// Summarizes `samples` (any order); `None` when there are none.
pub fn summarize(samples: &[u64]) -> Option<Latency> {
    let mut s = samples.to_vec();
    s.sort_unstable();
    let pct = |p| percentile(&s, p).map(|v| v.round() as u64);
    let sum: u128 = s.iter().map(|&v| u128::from(v)).sum();
    let n = s.len() as u128;
    Some(Latency {
        count: s.len(),
        min_ns: *s.first()?,
        p10_ns: pct(10.0)?,
        median_ns: pct(50.0)?,
        p90_ns: pct(90.0)?,
        max_ns: *s.last()?,
        mean_ns: ((sum + n / 2) / n) as u64,
    })
}

/// `1234567` ns as `1.235 ms`, for text output.
pub fn human_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns} ns"),
        10_000..=9_999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_linearly() {
        let s: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile(&s, 0.0), Some(1.0));
        assert_eq!(percentile(&s, 100.0), Some(10.0));
        assert_eq!(percentile(&s, 50.0), Some(5.5));
        assert!((percentile(&s, 10.0).unwrap() - 1.9).abs() < 1e-9);
        assert!((percentile(&s, 90.0).unwrap() - 9.1).abs() < 1e-9);
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[42], 10.0), Some(42.0));
        // Odd count: the median is the middle sample.
        assert_eq!(percentile(&[1, 2, 100], 50.0), Some(2.0));
    }

    #[test]
    fn summary_of_unsorted_samples() {
        let l = summarize(&[300, 100, 200, 500, 400]).unwrap();
        assert_eq!(
            l,
            Latency {
                count: 5,
                min_ns: 100,
                p10_ns: 140,
                median_ns: 300,
                p90_ns: 460,
                max_ns: 500,
                mean_ns: 300,
            }
        );
        assert_eq!(summarize(&[]), None);
        let one = summarize(&[7]).unwrap();
        assert_eq!(
            (one.min_ns, one.median_ns, one.max_ns, one.mean_ns),
            (7, 7, 7, 7)
        );
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(999), "999 ns");
        assert_eq!(human_ns(12_345), "12.3 µs");
        assert_eq!(human_ns(12_345_678), "12.346 ms");
        assert_eq!(human_ns(12_345_678_901), "12.346 s");
    }
}
