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
use sim::{sim_counter, SIM_DEBUGFS};

/// The simulator's register accesses and the time spent inside them
/// (absent on hardware).
fn sim_counters() -> Option<(u64, u64)> {
    Some((sim_counter("accesses").ok()?, sim_counter("ns").ok()?))
}

/// Switches the simulator's clock (its `ns` counter) on or off; an error
/// on hardware.
fn set_sim_timing(on: bool) -> std::io::Result<()> {
    std::fs::write(format!("{SIM_DEBUGFS}/timing"), if on { "1" } else { "0" })
}

/// A series of EXEC+WAIT round trips, per round trip.
struct RoundTrips {
    mean: Duration,
    /// EXEC to the engine being handed the job, to its end seen, to WAIT
    /// returning (the kernel's stamps, and this process's clock).
    to_start: Duration,
    to_end: Duration,
    to_wake: Duration,
    /// On the simulator: register accesses, and the time spent in them.
    sim: Option<(u64, Duration)>,
}

/// `runs` round trips of `prog` after 20 unmeasured ones.
fn round_trips(
    d: &Device,
    prog: &ane::device::Program<'_>,
    bindings: &[uapi::Binding],
    runs: u32,
) -> RoundTrips {
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
            .exec(prog, bindings, uapi::priority::NORMAL)
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
    let mean = t.elapsed() / runs;
    let per = |ns: u64| Duration::from_nanos(ns / u64::from(runs));
    let sim = sim_counters().zip(sim).map(|((a1, n1), (a0, n0))| {
        (
            a1.wrapping_sub(a0) / u64::from(runs),
            per(n1.saturating_sub(n0)),
        )
    });
    RoundTrips {
        mean,
        to_start: per(to_start),
        to_end: per(to_end),
        to_wake: per(to_wake),
        sim,
    }
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
    let n = 100_000u32;
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
            let runs = 5_000u32;
            let mode = std::env::var("ANE_BENCH_MODE").unwrap_or_else(|_| "polled".into());
            // The simulator's clock is off for the measured round trips: it
            // would add its own cost to every register access.
            let _ = set_sim_timing(false);
            let rt = round_trips(&d, &prog, &bindings, runs);
            println!(
                "exec+wait round trip (64-element add, {mode}): mean {:?} over {runs}",
                rt.mean
            );
            println!(
                "exec+wait breakdown ({mode}): EXEC->engine {:?}, engine->end seen {:?}, end seen->WAIT returned {:?}",
                rt.to_start, rt.to_end, rt.to_wake
            );
            println!(
                "ratio exec+wait / null ioctl ({mode}): {:.1}x (goal <= 5x)",
                rt.mean.as_secs_f64() / null.as_secs_f64()
            );
            // The simulator's share, from a second series with its clock on:
            // the part of that series' mean spent inside the simulated
            // registers (what hardware registers would cost instead).
            if set_sim_timing(true).is_ok() {
                let timed = round_trips(&d, &prog, &bindings, runs);
                let _ = set_sim_timing(false);
                if let Some((accesses, in_sim)) = timed.sim {
                    let own = timed.mean.saturating_sub(in_sim);
                    println!(
                        "simulated registers per exec+wait ({mode}): {accesses} accesses, {:?} inside the simulator of a {:?} round trip timed with its clock on",
                        in_sim, timed.mean
                    );
                    println!(
                        "ratio without the simulator's time ({mode}): {:.1}x",
                        own.as_secs_f64() / null.as_secs_f64()
                    );
                }
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
