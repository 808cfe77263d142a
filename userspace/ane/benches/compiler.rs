// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `cargo bench -p ane --bench compiler` (part of `make bench`): for each
//! model of the compiler's zoo (`ane::compiler::zoo`), the compile time
//! (median of repeated compiles), the programs and TDs emitted, and on the
//! host engine model the engine passes (TDs executed), its operations
//! (multiply-accumulates and elementwise results), the bytes its DMAs
//! moved and the run time, with the largest error against the f64
//! evaluation; and the scratch slot's bytes with every intermediate at its
//! own offset ("scratch 1:1") and as the program uses it, shared where the
//! chain orders the accesses ("scratch"). A plain harness that prints what it measured; it asserts
//! nothing about speed.

use std::time::{Duration, Instant};

use ane::compiler::{self, zoo, Target};

/// Median time of `f` over enough runs to last about 200 ms (at least 3).
fn median<T>(mut f: impl FnMut() -> T) -> Duration {
    let t = Instant::now();
    std::hint::black_box(f());
    let one = t.elapsed().max(Duration::from_nanos(100));
    let runs = ((Duration::from_millis(200).as_nanos() / one.as_nanos()) as usize).clamp(3, 1000);
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    v.sort();
    v[v.len() / 2]
}

fn main() {
    println!(
        "{:<18} {:>11} {:>8} {:>5} {:>11} {:>9} {:>7} {:>10} {:>10} {:>11} {:>10}",
        "compiler: model",
        "compile",
        "programs",
        "TDs",
        "scratch 1:1",
        "scratch",
        "passes",
        "ops",
        "DMA bytes",
        "engine run",
        "max error"
    );
    for ex in zoo::all(29) {
        let compile = median(|| compiler::compile(&ex.onnx, Target::H13));
        let c = match compiler::compile(&ex.onnx, Target::H13) {
            Ok(c) => c,
            Err(e) => {
                println!("{:<18} refused: {e}", ex.name);
                continue;
            }
        };
        let inputs = ex.input_values();
        let (out, stats) = match c.run_on_model_with_stats(&inputs) {
            Ok(r) => r,
            Err(e) => {
                println!("{:<18} engine model: {e}", ex.name);
                continue;
            }
        };
        let run = median(|| c.run_on_model(&inputs));
        let err = ex
            .max_error(&out)
            .map_or_else(|e| format!("FAIL: {e}"), |e| format!("{e:.2e}"));
        println!(
            "{:<18} {:>9.1?} {:>8} {:>5} {:>11} {:>9} {:>7} {:>10} {:>10} {:>9.1?} {:>10}",
            ex.name,
            compile,
            1,
            c.program.td_count,
            c.scratch.unshared,
            c.scratch.shared,
            stats.tds,
            stats.ops,
            stats.bytes_read + stats.bytes_written,
            run,
            err
        );
    }
}
