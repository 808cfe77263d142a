// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `cargo bench -p ane`: tile/untile throughput against `memcpy` of the same
//! bytes (goal ≥ 0.8×), and fp16 conversion throughput. A plain harness that
//! prints medians; it asserts nothing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ane::tensor::{tile, untile, Shape};
use half::f16;

/// Median time of `f` over enough runs to last about 200 ms.
fn measure(mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    f();
    let one = t.elapsed().max(Duration::from_nanos(100));
    let runs = ((Duration::from_millis(200).as_nanos() / one.as_nanos()) as usize).clamp(5, 10_000);
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    v.sort();
    v[v.len() / 2]
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn main() {
    println!("tile/untile vs memcpy of the dense bytes (median of many runs)");
    println!(
        "{:>22} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "shape (n,c,h,w)", "memcpy", "tile", "untile", "t/m", "u/m"
    );
    for (n, c, h, w) in [
        (1, 64, 64, 64),
        (1, 256, 32, 128),
        (1, 16, 256, 512),
        (1, 3, 224, 224),
        (1, 512, 1, 77),
    ] {
        let shape = Shape::new(n, c, h, w).expect("shape");
        let elems = n * c * h * w;
        let dense: Vec<f16> = (0..elems)
            .map(|i| f16::from_f32((i % 1000) as f32))
            .collect();
        let mut tiled = vec![f16::ZERO; shape.layout().buffer_size() / 2];
        let mut back = vec![f16::ZERO; elems];
        let mut copy = vec![f16::ZERO; elems];
        let m = measure(|| copy.copy_from_slice(black_box(&dense)));
        let t = measure(|| tile(&shape, black_box(&dense), &mut tiled).expect("tile"));
        let u = measure(|| untile(&shape, black_box(&tiled), &mut back).expect("untile"));
        assert_eq!(back, dense);
        let bytes = elems * 2;
        println!(
            "{:>22} {:>6.2}GB/s {:>6.2}GB/s {:>6.2}GB/s {:>6.2}x {:>6.2}x",
            format!("({n},{c},{h},{w})"),
            gbps(bytes, m),
            gbps(bytes, t),
            gbps(bytes, u),
            m.as_secs_f64() / t.as_secs_f64(),
            m.as_secs_f64() / u.as_secs_f64()
        );
    }
    let n = 1 << 22;
    let src: Vec<f32> = (0..n).map(|i| (i as f32) * 0.001 - 2000.0).collect();
    let mut h = vec![f16::ZERO; n];
    let mut back = vec![0f32; n];
    let to = measure(|| {
        for (d, s) in h.iter_mut().zip(black_box(&src)) {
            *d = f16::from_f32(*s);
        }
    });
    let from = measure(|| {
        for (d, s) in back.iter_mut().zip(black_box(&h)) {
            *d = s.to_f32();
        }
    });
    println!(
        "fp16 conversion: f32->f16 {:.0} M/s, f16->f32 {:.0} M/s",
        n as f64 / to.as_secs_f64() / 1e6,
        n as f64 / from.as_secs_f64() / 1e6
    );
}
