// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `cargo bench -p ane --bench validate` (part of `make bench`): the
//! kernel's TD validator (`hw::td`, the code PROGRAM_CREATE runs) over the
//! Parakeet-size task stream of `make bench` (13,701 TDs,
//! `builder::conv1x1_stream`), as the median time per program and per TD
//! on the host. A plain harness that prints what it measured; it asserts
//! nothing about speed. `ANE_BENCH_VALIDATE_RUNS` sets the number of runs
//! (e.g. 1 under an instruction-counting profiler).

use std::time::{Duration, Instant};

use ane::builder;

fn main() {
    let (count, total) = (13_701u32, 458_018_816u64);
    let probe = builder::conv1x1_stream(128, 128, 1, 32, count, 1 << 20).expect("probe");
    let mut p = builder::conv1x1_stream(128, 128, 1, 32, count, total - probe.weights_offset())
        .expect("program");
    // Only the stream is validated.
    drop(std::mem::take(&mut p.weights));
    let runs: usize = std::env::var("ANE_BENCH_VALIDATE_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(21)
        .max(1);
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(
                ane::hw::td::Program::new(std::hint::black_box(&p.tsk), p.td_size, p.td_count)
                    .and_then(|p| p.validate())
                    .expect("valid"),
            );
            t.elapsed()
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "validate: Parakeet-size stream ({count} TDs, {} bytes): {median:?} median of {runs}, {} ns per TD",
        p.tsk.len(),
        median.as_nanos() / u128::from(count)
    );
}
