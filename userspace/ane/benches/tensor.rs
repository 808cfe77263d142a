// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `cargo bench -p ane`: tile/untile throughput against `memcpy` of the same
//! bytes between the same buffers, and against the bound a copy limited by
//! the cache lines of the tiled side can reach (goal: ≥ 0.95 of it, issue
//! 28), and fp16 conversion throughput. A plain harness that prints what it
//! measured; it asserts nothing about speed.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ane::tensor::{tile, untile, Shape};
use half::f16;
use half::slice::HalfFloatSliceExt;

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

/// Times `f(true)` (the baseline) against `f(false)` (the candidate) in
/// alternating batches of about 50 µs each, and returns the fastest batch
/// of each. Alternating gives both sides the same machine conditions, and
/// the fastest batch is the one least disturbed by other load (this runs on
/// shared, virtualised CPUs where a median moves by ±30 % between runs).
fn versus(mut f: impl FnMut(bool)) -> (Duration, Duration) {
    let t = Instant::now();
    for _ in 0..10 {
        f(true);
    }
    let one = (t.elapsed() / 10).max(Duration::from_nanos(10));
    let batch = ((Duration::from_micros(50).as_nanos() / one.as_nanos()) as u32).max(1);
    let (mut base, mut cand) = (Duration::MAX, Duration::MAX);
    for _ in 0..400 {
        for (is_base, best) in [(true, &mut base), (false, &mut cand)] {
            let t = Instant::now();
            for _ in 0..batch {
                f(is_base);
            }
            *best = (*best).min(t.elapsed() / batch);
        }
    }
    (base, cand)
}

/// `len` elements of `v` starting at a 64-byte boundary: the tiled side of a
/// real call is a mapped device buffer (page-aligned), whose rows then start
/// on 64-byte boundaries as the layout intends.
fn aligned(v: &mut [f16], len: usize) -> &mut [f16] {
    let skip = (64 - v.as_ptr() as usize % 64) % 64 / 2;
    &mut v[skip..skip + len]
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn main() {
    println!("tile/untile against memcpy of the dense bytes between the same buffers");
    println!("(fastest of 400 alternating batches; both buffers 64-byte aligned)");
    println!("bound: dense/tiled bytes, the most a copy limited by the cache lines");
    println!("it must write (tile) or read (untile) can reach against memcpy;");
    println!("t/b, u/b: t/m and u/m as a share of the bound (goal >= 0.95)");
    println!(
        "{:>16} {:>10} {:>10} {:>10} {:>10} {:>6} {:>6} {:>6} {:>5} {:>5}",
        "shape (n,c,h,w)",
        "memcpy->t",
        "tile",
        "memcpy<-t",
        "untile",
        "t/m",
        "u/m",
        "bound",
        "t/b",
        "u/b"
    );
    for (n, c, h, w) in [
        (1, 64, 64, 64),
        (1, 256, 32, 128),
        (1, 16, 256, 512),
        (1, 3, 224, 224),
        (1, 64, 56, 56),
        (1, 512, 1, 77),
    ] {
        let shape = Shape::new(n, c, h, w).expect("shape");
        let elems = n * c * h * w;
        // The dense side 64-byte aligned too, as the tiled side is: `memcpy`
        // then runs at its best, whatever the allocator returned.
        let mut dense_storage = vec![f16::ZERO; elems + 32];
        let dense = aligned(&mut dense_storage, elems);
        for (i, v) in dense.iter_mut().enumerate() {
            *v = f16::from_f32((i % 1000) as f32);
        }
        let dense = &*dense;
        let len = shape.layout().buffer_size() / 2;
        let mut storage = vec![f16::ZERO; len + 32];
        let tiled = aligned(&mut storage, len);
        let mut back = vec![f16::ZERO; elems];
        // memcpy into the buffer `tile` writes, against `tile`.
        let (mt, t) = versus(|base| {
            if base {
                tiled[..elems].copy_from_slice(black_box(dense));
            } else {
                tile(&shape, black_box(dense), tiled).expect("tile");
            }
        });
        // memcpy out of the buffer `untile` reads, against `untile`.
        let (mu, u) = versus(|base| {
            if base {
                back.copy_from_slice(black_box(&tiled[..elems]));
            } else {
                untile(&shape, black_box(tiled), &mut back).expect("untile");
            }
        });
        assert_eq!(back, dense);
        let bytes = elems * 2;
        let bound = bytes as f64 / shape.layout().tiled_bytes() as f64;
        let (tm, um) = (
            mt.as_secs_f64() / t.as_secs_f64(),
            mu.as_secs_f64() / u.as_secs_f64(),
        );
        println!(
            "{:>16} {:>5.1} GB/s {:>5.1} GB/s {:>5.1} GB/s {:>5.1} GB/s {:>5.2}x {:>5.2}x {:>5.2}x {:>5.2} {:>5.2}",
            format!("({n},{c},{h},{w})"),
            gbps(bytes, mt),
            gbps(bytes, t),
            gbps(bytes, mu),
            gbps(bytes, u),
            tm,
            um,
            bound,
            tm / bound,
            um / bound
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
    // The slice conversions use the CPU's conversion instructions (F16C,
    // AArch64 FP16) when it has them.
    let slice_to = measure(|| h.convert_from_f32_slice(black_box(&src)));
    let slice_from = measure(|| black_box(&h).convert_to_f32_slice(&mut back));
    let rate = |d: Duration| n as f64 / d.as_secs_f64() / 1e6;
    println!(
        "fp16 conversion, per element: f32->f16 {:.0} M/s, f16->f32 {:.0} M/s",
        rate(to),
        rate(from)
    );
    println!(
        "fp16 conversion, slices:      f32->f16 {:.0} M/s, f16->f32 {:.0} M/s",
        rate(slice_to),
        rate(slice_from)
    );
}
