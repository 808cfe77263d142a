// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-bench`: driver overhead benchmarks, run in a QEMU guest by
//! `make bench` (or on a Mac). Not a test: it prints measurements.
//!
//! - a null ioctl (`DRM_IOCTL_VERSION`) against an EXEC+WAIT round trip of
//!   the smallest real program (tinygrad's 64-element add), as means, their
//!   ratio, and where the round trip's time went (the kernel's stamps in
//!   WAIT) and, on the simulator, how many register accesses each took;
//!   `ANE_BENCH_MODE` names the completion mode the module was loaded with;
//! - creating, mapping (touching every page) and freeing a 256 MiB BO.

use std::time::{Duration, Instant};

use ane::device::{raw, version, Device};
use ane::hw::uapi;

mod sim;
use sim::sim_counter;

/// The simulator's register accesses and the time spent inside them
/// (absent on hardware).
fn sim_counters() -> Option<(u64, u64)> {
    Some((sim_counter("accesses").ok()?, sim_counter("ns").ok()?))
}

fn main() {
    let d = match Device::discover() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ane-bench: {e}");
            std::process::exit(2);
        }
    };
    // Guest clocks under TCG can be coarse (a jiffy), so every figure is a
    // batch total divided by its count.
    let n = 20_000u32;
    let t = Instant::now();
    for _ in 0..n {
        let _ = version(d.fd());
    }
    let null = t.elapsed() / n;
    println!("null ioctl (DRM_IOCTL_VERSION): mean {:?} over {n}", null);

    let dir = std::env::var("ANE_FIXTURES").unwrap_or_else(|_| "/fixtures".into());
    match std::fs::read(format!("{dir}/tinygrad_sum.hwx")) {
        Err(_) => println!("exec+wait: skipped (no fixtures)"),
        Ok(bytes) => {
            let hwx = ane::hwx::Hwx::parse(&bytes).expect("fixture parses");
            let prog = d.load_hwx(&hwx).expect("program");
            let (_bos, bindings) = d.bind_hwx(&hwx).expect("buffers");
            let runs = 500u32;
            let mode = std::env::var("ANE_BENCH_MODE").unwrap_or_else(|_| "polled".into());
            // Where each round trip's time went, from the kernel's stamps:
            // EXEC to the engine being handed the job, to its end seen, to
            // WAIT returning (this process's clock).
            let (mut to_start, mut to_end, mut to_wake) = (0u64, 0u64, 0u64);
            let mut t = Instant::now();
            let mut sim = sim_counters();
            for i in 0..runs + 20 {
                if i == 20 {
                    t = Instant::now();
                    (to_start, to_end, to_wake) = (0, 0, 0);
                    sim = sim_counters();
                }
                let id = d
                    .exec(&prog, &bindings, uapi::priority::NORMAL)
                    .expect("exec");
                let mut w = uapi::Wait {
                    job_id: id,
                    timeout_ns: ane::device::monotonic_ns() + 10_000_000_000,
                    ..Default::default()
                };
                raw::wait(d.fd(), &mut w).expect("wait");
                let woke = ane::device::monotonic_ns() as u64;
                assert_eq!(w.status, uapi::job_status::DONE);
                to_start += w.started_ns.saturating_sub(w.queued_ns);
                to_end += w.ended_ns.saturating_sub(w.started_ns);
                to_wake += woke.saturating_sub(w.ended_ns);
            }
            let rt = t.elapsed() / runs;
            // The simulator's share: register accesses and the time spent
            // in them (what hardware registers would cost instead).
            let sim = sim_counters()
                .zip(sim)
                .map(|((a1, n1), (a0, n0))| (a1.wrapping_sub(a0), n1.saturating_sub(n0)));
            let per = |ns: u64| Duration::from_nanos(ns / u64::from(runs));
            println!(
                "exec+wait round trip (64-element add, {mode}): mean {:?} over {runs}",
                rt
            );
            println!(
                "exec+wait breakdown ({mode}): EXEC->engine {:?}, engine->end seen {:?}, end seen->WAIT returned {:?}",
                per(to_start),
                per(to_end),
                per(to_wake)
            );
            println!(
                "ratio exec+wait / null ioctl ({mode}): {:.1}x (goal <= 5x)",
                rt.as_secs_f64() / null.as_secs_f64()
            );
            if let Some((accesses, ns)) = sim {
                let in_sim = Duration::from_nanos(ns / u64::from(runs));
                let own = rt.saturating_sub(in_sim);
                println!(
                    "simulated registers per exec+wait ({mode}): {} accesses, {:?} inside the simulator",
                    accesses / u64::from(runs),
                    in_sim
                );
                println!(
                    "ratio without the simulator's time ({mode}): {:.1}x",
                    own.as_secs_f64() / null.as_secs_f64()
                );
            }
        }
    }

    let size: u64 = 256 << 20;
    let t = Instant::now();
    let mut bo = d.bo_create(size).expect("256 MiB BO");
    let created = t.elapsed();
    let m = bo.map().expect("map");
    let page = rustix::param::page_size();
    for i in (0..m.len()).step_by(page) {
        m[i] = 1;
    }
    let mapped = t.elapsed();
    drop(bo);
    let freed = t.elapsed();
    println!(
        "256 MiB BO: create {:?}, + map and touch every page {:?}, + free {:?} (total)",
        created,
        mapped - created,
        freed - mapped
    );
    let mut a = uapi::GetParam::default();
    let _ = raw::get_param(d.fd(), &mut a);
}
