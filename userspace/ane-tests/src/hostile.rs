// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! ane-fuzz's hostile-client mode (issue 26, item 8): no client can break
//! the engine for the others.
//!
//! `ane-ioctl-tests --hostile SEED CALLS [PATH]` runs one well-behaved
//! client (this process) beside hostile processes that make `CALLS`
//! calls between them, and prints one table row for the SoC:
//!
//! - the well-behaved client runs the sum fixture over and over, each job
//!   on fresh inputs, and compares every output element with the CPU
//!   reference exactly (0 ulp); it counts jobs that ended DONE and jobs
//!   whose every element matched, and times each round trip (EXEC to the
//!   WAIT that returns it), alone first ([`BASE_JOBS`]) and then for as
//!   long as the hostile processes run;
//! - the hostile processes ([`KINDS`]): two ane-fuzz children (mutated and
//!   random calls, mutated programs the validator or the firmware must
//!   refuse, on T8103 mutated programs executed, stale and foreign
//!   handles, closes against pending jobs), a submission flood (the queue
//!   kept at its cap, HIGH priority asked for without the privilege, the
//!   file closed with jobs pending), an open/close and mmap storm (with
//!   mappings used after their file closed, and attempts to unbind the
//!   device and pin its power through sysfs) and an allocation exhaustion
//!   (every file at its cap, held, freed, taken again). All but the fuzz
//!   children run as an unprivileged user (uid 65534), as a hostile client
//!   on a real system would; the script adds a system sleep cycle where
//!   the driver supports one during a run (H13);
//! - after the run: the engine's and the firmware's state (neither wedged
//!   nor quarantined), the bytes a new client can allocate (the same as
//!   before the run: nothing leaked or parked), the parity cells and the
//!   known-good job; the script then unloads the module and asks kmemleak.
//!
//! Any job of the well-behaved client that does not end DONE with an exact
//! result fails the run; each is counted and printed with why. (T8103
//! recovers a hostile program's fault at once by a forced power cycle,
//! kernel-2 N8: the good client's jobs queue behind it and run after it.)

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ane::device::{raw, Device, JobStatus};
use ane::hw::uapi::{self, param};
use rustix::io::Errno;

use crate::fuzz::{self, Call};

/// The hostile process kinds, one process each ("fuzz" twice).
pub const KINDS: &[&str] = &["fuzz", "fuzz", "flood", "storm", "exhaust"];

/// Jobs the well-behaved client runs alone, before the hostile load.
pub const BASE_JOBS: usize = 40;

/// The unprivileged user the hostile processes (but the fuzz children)
/// run as.
const NOBODY: u32 = 65534;

/// The sum fixture, set up once: program, buffers, bindings.
struct Good<'d> {
    d: &'d Device,
    hwx: ane::hwx::Hwx,
    prog: ane::device::Program<'d>,
    bos: Vec<ane::device::Bo<'d>>,
    bindings: Vec<uapi::Binding>,
}

/// How one job of the well-behaved client ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// DONE and every element equal to the reference.
    Exact,
    /// DONE with a wrong result.
    Wrong(String),
    /// Not DONE, or refused: why.
    Failed(String),
}

impl<'d> Good<'d> {
    fn new(d: &'d Device) -> Result<Self, String> {
        let hwx = crate::fixture("tinygrad_sum.hwx").ok_or(crate::SKIP)?;
        let prog = load(d, &hwx)?;
        let (bos, bindings) = d.bind_hwx(&hwx).map_err(|e| format!("bind: {e}"))?;
        Ok(Good {
            d,
            hwx,
            prog,
            bos,
            bindings,
        })
    }

    /// One job on inputs derived from `seed`: its outcome and round trip.
    fn job(&mut self, seed: u32) -> Result<(Outcome, Duration), String> {
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        for (i, (t, bo)) in self
            .hwx
            .tensors()
            .iter()
            .zip(self.bos.iter_mut())
            .enumerate()
        {
            let m = bo.map().map_err(|e| e.to_string())?;
            let [n, c, h, w] = t.dims.map(u64::from);
            if t.direction == ane::hwx::Direction::Input {
                let v = crate::data(
                    seed.wrapping_mul(31).wrapping_add(i as u32 + 7),
                    (n * c * h * w) as usize,
                );
                crate::put_nchw(m, t.dims, &t.strides, &v);
                inputs.push(v);
            } else {
                m.fill(0xff);
                outputs.push((i, t.dims, t.strides));
            }
        }
        let t0 = Instant::now();
        let id = match self
            .d
            .exec(&self.prog, &self.bindings, uapi::priority::NORMAL)
        {
            Ok(id) => id,
            Err(e) => return Ok((Outcome::Failed(format!("EXEC: {e}")), t0.elapsed())),
        };
        let st = self
            .d
            .wait(
                id,
                Duration::from_nanos(crate::JOB_TIMEOUT_NS.unsigned_abs()),
            )
            .map_err(|e| e.to_string())?;
        let rtt = t0.elapsed();
        match st {
            Some(JobStatus::Done) => {}
            other => return Ok((Outcome::Failed(format!("job {other:?}")), rtt)),
        }
        if crate::is_h14(self.d) {
            // The firmware backend runs only H14 programs, and the firmware
            // model computes nothing for the synthetic one: its recorded
            // behaviour is DONE with every output byte left as it was.
            for (idx, _, _) in outputs {
                let m = self.bos[idx].map().map_err(|e| e.to_string())?;
                if let Some(at) = m.iter().position(|&b| b != 0xff) {
                    return Ok((Outcome::Wrong(format!("output byte {at} written")), rtt));
                }
            }
            return Ok((Outcome::Exact, rtt));
        }
        use ane::reference::{self as r, Rounding::NearestEven as Rne};
        let want = r::add(&inputs[0], &inputs[1], Rne).map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        for (idx, dims, strides) in outputs {
            let m = self.bos[idx].map().map_err(|e| e.to_string())?;
            got.extend(crate::get_nchw(m, dims, &strides));
        }
        let s = ane::reference::compare(&want, &got, 0).map_err(|e| e.to_string())?;
        Ok((
            if s.passed() {
                Outcome::Exact
            } else {
                Outcome::Wrong(format!("{} of {} elements differ", s.mismatches, s.count))
            },
            rtt,
        ))
    }
}

/// The add program on `d`: the HWX's H13 stream, or on the firmware backend
/// (which is never sent an H13 stream) the synthetic H14 program.
fn load<'d>(d: &'d Device, hwx: &ane::hwx::Hwx) -> Result<ane::device::Program<'d>, String> {
    if crate::is_h14(d) {
        return crate::h14_load(d, 1).map_err(|e| format!("load: {e}"));
    }
    d.load_hwx(hwx).map_err(|e| format!("load: {e}"))
}

/// The `p`th percentile (0..=100) of `v`, in microseconds.
fn pct(v: &mut [Duration], p: usize) -> u128 {
    if v.is_empty() {
        return 0;
    }
    v.sort();
    let i = ((v.len() - 1) * p).div_ceil(100);
    v[i.min(v.len() - 1)].as_micros()
}

/// The bytes new clients can allocate on `path` (in 256 KiB BOs, over as
/// many files as it takes), all freed again before returning.
pub(crate) fn free_bytes(path: &str) -> Result<u64, String> {
    let chunk = 256 << 10;
    let mut total = 0;
    let mut files = Vec::new();
    for _ in 0..64 {
        let d = Device::open(path).map_err(|e| e.to_string())?;
        let mut got = 0;
        loop {
            let mut a = uapi::BoCreate {
                size: chunk,
                ..Default::default()
            };
            match raw::bo_create(d.fd(), &mut a) {
                Ok(()) => got += chunk,
                Err(Errno::NOSPC) | Err(Errno::NOMEM) => break,
                Err(e) => return Err(format!("BO_CREATE: {e}")),
            }
        }
        files.push(d);
        total += got;
        if got == 0 {
            break;
        }
    }
    Ok(total)
}

/// The engine and firmware state as a word for the table.
fn state_word(d: &Device) -> String {
    let e = crate::engine_state(d).unwrap_or(u64::MAX);
    let f = crate::param_value(d, param::FW_STATE).unwrap_or(u64::MAX);
    let e = match e {
        uapi::engine_state::READY => "ready".to_string(),
        uapi::engine_state::WEDGED_POWER_CYCLE => "wedged-until-power-cycle".to_string(),
        uapi::engine_state::WEDGED_REBIND => "wedged-until-rebind".to_string(),
        x => format!("engine-{x}"),
    };
    let f = match f {
        uapi::fw_state::NONE => String::new(),
        uapi::fw_state::RUNNING => ", fw running".to_string(),
        x => format!(", fw state {x} (not running)"),
    };
    format!("{e}{f}")
}

/// `--hostile SEED CALLS [PATH]`: the whole run, one table row.
pub fn parent_main(args: &[String]) -> ExitCode {
    match parent(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("FAIL hostile: {e}");
            ExitCode::from(1)
        }
    }
}

fn parent(args: &[String]) -> Result<(), String> {
    let seed = args.first().and_then(|s| parse_u64(s)).unwrap_or(0x26);
    let calls = args.get(1).and_then(|s| parse_u64(s)).unwrap_or(10_000);
    let path = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "/dev/accel/accel0".into());
    let d = Device::open(&path).map_err(|e| e.to_string())?;
    let soc = d.get_param(param::SOC_ID).map_err(|e| e.to_string())?;
    let mut good = Good::new(&d)?;
    // With the good client's own buffers and program already counted.
    let free_before = free_bytes(&path)?;
    let mut jobs = 0u32;
    // Alone.
    let mut alone = Vec::new();
    let mut failures: BTreeMap<Outcome, u64> = BTreeMap::new();
    for _ in 0..BASE_JOBS {
        let (o, rtt) = good.job(jobs)?;
        jobs += 1;
        if o != Outcome::Exact {
            return Err(format!("job {jobs} without hostile load: {o:?}"));
        }
        alone.push(rtt);
    }
    // The hostile processes may open the node (a hostile client on a real
    // system has the access the udev rule gives every user).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| format!("chmod {path}: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut children = Vec::new();
    let n = KINDS.len() as u64;
    for (i, kind) in KINDS.iter().enumerate() {
        let cs = fuzz::child_seed(seed, i as u64);
        let c = calls / n + u64::from((i as u64) < calls % n);
        let out = format!("/tmp/hostile-{i}.out");
        let file = std::fs::File::create(&out).map_err(|e| format!("{out}: {e}"))?;
        let mut cmd = std::process::Command::new(&exe);
        if *kind == "fuzz" {
            cmd.arg("--fuzz-child")
                .arg(format!("{cs:#x}"))
                .arg(c.to_string())
                .arg(i.to_string())
                .arg(&path);
        } else {
            cmd.arg("--hostile-child")
                .arg(kind)
                .arg(format!("{cs:#x}"))
                .arg(c.to_string())
                .arg(&path);
        }
        println!("hostile: process {i}: {kind}, seed {cs:#x}, {c} calls");
        let child = if *kind == "fuzz" {
            cmd.stdout(file).spawn()
        } else {
            use std::os::unix::process::CommandExt;
            let err = file.try_clone().map_err(|e| e.to_string())?;
            let mut unpriv = std::process::Command::new(&exe);
            unpriv
                .args(cmd.get_args())
                .uid(NOBODY)
                .gid(NOBODY)
                .stdout(err);
            match unpriv.spawn() {
                // A kernel without CONFIG_MULTIUSER (the test kernels) has
                // no other user: the process runs as root, and skips the
                // sysfs writes only root may make.
                Err(e) if e.raw_os_error() == Some(38) => {
                    println!("hostile: process {i}: no setuid in this kernel (no CONFIG_MULTIUSER): runs as root, without its sysfs writes");
                    cmd.stdout(file).spawn()
                }
                r => r,
            }
        }
        .map_err(|e| format!("spawn {kind}: {e}"))?;
        children.push((i, *kind, cs, child, out));
    }
    // Beside them.
    let t0 = Instant::now();
    let mut loaded = Vec::new();
    let mut exact = 0u64;
    let mut done = 0u64;
    let mut running = children.len();
    let mut status = vec![None; children.len()];
    while running > 0 {
        let (o, rtt) = good.job(jobs)?;
        jobs += 1;
        loaded.push(rtt);
        match &o {
            Outcome::Exact => {
                exact += 1;
                done += 1;
            }
            Outcome::Wrong(_) => done += 1,
            Outcome::Failed(_) => {}
        }
        if o != Outcome::Exact {
            println!(
                "hostile: good job {jobs} at {:.1} s: {o:?} ({})",
                t0.elapsed().as_secs_f64(),
                state_word(&d)
            );
            *failures.entry(o).or_default() += 1;
        }
        for (k, (_, _, _, c, _)) in children.iter_mut().enumerate() {
            if status[k].is_none() {
                if let Ok(Some(s)) = c.try_wait() {
                    status[k] = Some(s);
                    running -= 1;
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let mut failed = Vec::new();
    let mut hostile_calls = 0u64;
    for (k, (i, kind, cs, _, out)) in children.iter().enumerate() {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["FUZZCOUNT", _, _, n] | ["HOSTILECOUNT", _, n] => {
                    hostile_calls += n.parse::<u64>().unwrap_or(0)
                }
                ["FUZZJOB", ..] => {}
                _ if line.starts_with("UNEXPECTED")
                    || line.contains("unexpected")
                    || line.starts_with("child") && !line.contains("  ") =>
                {
                    println!("process {i} ({kind}): {line}")
                }
                _ => {}
            }
        }
        use std::os::unix::process::ExitStatusExt;
        match status[k] {
            Some(s) if s.success() => {}
            Some(s) => failed.push(match s.signal() {
                Some(sig) => format!("process {i} ({kind}, seed {cs:#x}) killed by signal {sig}"),
                None => format!("process {i} ({kind}, seed {cs:#x}) failed: {s}"),
            }),
            None => failed.push(format!("process {i} ({kind}) never ended")),
        }
    }
    let during = loaded.len() as u64;
    // T8103 recovers from a hostile program's fault at once; should an
    // older driver wait for the next autosuspend, let it happen first.
    if crate::engine_state(&d)? == uapi::engine_state::WEDGED_POWER_CYCLE {
        println!(
            "hostile: engine wedged until a power cycle after the run: waiting for autosuspend"
        );
        crate::wait_suspended(&d)?;
    }
    // A failed job's buffers stay mapped until the power cycle and are
    // released when the next job starts (T8103's containment): one job of
    // the good client after the run lets that happen before the count.
    let (after_job, _) = good.job(jobs)?;
    if after_job != Outcome::Exact {
        failed.push(format!(
            "the good client's first job after the run: {after_job:?}"
        ));
    }
    let state_after = state_word(&d);
    let st = crate::engine_state(&d)?;
    let fw = crate::param_value(&d, param::FW_STATE)?;
    let healthy = st == uapi::engine_state::READY
        && (fw == uapi::fw_state::NONE || fw == uapi::fw_state::RUNNING);
    if !healthy {
        failed.push(format!("device state after the run: {state_after}"));
    }
    // What is left to new clients: the same as before (our own buffers
    // are the same ones).
    let free_after = if healthy { free_bytes(&path)? } else { 0 };
    if healthy && free_after != free_before {
        failed.push(format!(
            "{} bytes a new client could allocate before the run, {} after: {} bytes kept",
            free_before,
            free_after,
            free_before as i64 - free_after as i64
        ));
    }
    let (mut a, mut l) = (alone.clone(), loaded.clone());
    let row = format!(
        "HOSTILE soc {soc:#x} | hostile calls {hostile_calls} in {secs:.0} s | good jobs {during} | DONE {:.2}% | exact {:.2}% | alone p50 {} us p99 {} us | loaded p50 {} us p99 {} us | after: {state_after}, {} bytes free before and {} after",
        100.0 * done as f64 / during.max(1) as f64,
        100.0 * exact as f64 / during.max(1) as f64,
        pct(&mut a, 50),
        pct(&mut a, 99),
        pct(&mut l, 50),
        pct(&mut l, 99),
        free_before,
        free_after,
    );
    println!("{row}");
    for (o, n) in &failures {
        println!("hostile: {n} good job(s): {o:?}");
        failed.push(format!("{n} good job(s) did not end exact: {o:?}"));
    }
    drop(good);
    if healthy {
        if let Err(e) = fuzz::known_good(d) {
            failed.push(format!("known-good job after the run: {e}"));
        }
    }
    if failed.is_empty() {
        println!("PASS hostile: soc {soc:#x}, {hostile_calls} hostile calls, {during} good jobs all exact");
        Ok(())
    } else {
        for f in &failed {
            println!("FAIL hostile: {f}");
        }
        Err(format!("{} finding(s) on soc {soc:#x}", failed.len()))
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// One hostile process's counts.
#[derive(Default)]
struct Tally {
    calls: u64,
    by: BTreeMap<String, u64>,
    unexpected: Vec<String>,
}

impl Tally {
    /// Counts one call; an errno outside `call`'s documented set, or a
    /// success where `must_fail`, is unexpected.
    fn note(&mut self, call: Call, what: &str, r: Result<(), Errno>, must_fail: bool) {
        self.calls += 1;
        let o = match r {
            Ok(()) => "ok".to_string(),
            Err(e) => fuzz::errno_name(e),
        };
        *self.by.entry(format!("{what} {o}")).or_default() += 1;
        let bad = match r {
            Err(e) if !fuzz::allowed(call, e, false) => Some("errno outside the documented set"),
            Ok(()) if must_fail => Some("succeeded for an unprivileged client"),
            _ => None,
        };
        if let Some(why) = bad {
            let line = format!("{what}: {o}: {why}");
            println!("UNEXPECTED {line}");
            if self.unexpected.len() < 20 {
                self.unexpected.push(line);
            }
        }
    }

    /// A sysfs write an unprivileged process must not be allowed.
    fn note_sysfs(&mut self, what: &str, r: std::io::Result<()>) {
        self.calls += 1;
        let o = match &r {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("{:?}", e.kind()),
        };
        *self.by.entry(format!("{what} {o}")).or_default() += 1;
        if r.is_ok() {
            let line = format!("{what}: succeeded for an unprivileged client");
            println!("UNEXPECTED {line}");
            self.unexpected.push(line);
        }
    }
}

/// `--hostile-child KIND SEED CALLS [PATH]`: one hostile process.
pub fn child_main(args: &[String]) -> ExitCode {
    let kind = args.first().map(String::as_str).unwrap_or("flood");
    let seed = args.get(1).and_then(|s| parse_u64(s)).unwrap_or(1);
    let calls = args.get(2).and_then(|s| parse_u64(s)).unwrap_or(1000);
    let path = args
        .get(3)
        .map(String::as_str)
        .unwrap_or("/dev/accel/accel0");
    let mut t = Tally::default();
    let mut rng = fuzz::Rng::new(seed);
    let r = match kind {
        "flood" => flood(path, calls, &mut rng, &mut t),
        "storm" => storm(path, calls, &mut rng, &mut t),
        "exhaust" => exhaust(path, calls, &mut rng, &mut t),
        k => Err(format!("unknown hostile kind {k}")),
    };
    println!("HOSTILECOUNT {kind} {}", t.calls);
    for (k, n) in &t.by {
        println!("  {kind}: {k}: {n}");
    }
    match r {
        Ok(()) if t.unexpected.is_empty() => ExitCode::SUCCESS,
        Ok(()) => {
            println!("{kind}: {} unexpected outcome(s)", t.unexpected.len());
            ExitCode::from(1)
        }
        Err(e) => {
            println!("{kind}: unexpected: {e}");
            ExitCode::from(1)
        }
    }
}

/// Submission flood: the queue kept at its cap on one file, HIGH priority
/// asked for without the privilege, the file closed with jobs pending.
fn flood(path: &str, calls: u64, rng: &mut fuzz::Rng, t: &mut Tally) -> Result<(), String> {
    let hwx = crate::fixture("tinygrad_sum.hwx").ok_or("no fixture")?;
    // Root has CAP_SYS_NICE: HIGH must fail only for an unprivileged one.
    let privileged = is_root();
    while t.calls < calls {
        let d = Device::open(path).map_err(|e| e.to_string())?;
        let prog = load(&d, &hwx)?;
        let (bos, bindings) = d.bind_hwx(&hwx).map_err(|e| format!("bind: {e}"))?;
        let mut ids = std::collections::VecDeque::new();
        let round = 50 + rng.below(200);
        for _ in 0..round {
            if t.calls >= calls {
                break;
            }
            let high = rng.chance(5);
            let mut a = uapi::Exec {
                program: prog.handle(),
                priority: if high {
                    uapi::priority::HIGH
                } else {
                    uapi::priority::NORMAL
                },
                binding_count: bindings.len() as u32,
                bindings: bindings.as_ptr() as u64,
                binding_size: std::mem::size_of::<uapi::Binding>() as u32,
                ..Default::default()
            };
            let r = raw::exec(d.fd(), &mut a);
            t.note(
                Call::Exec,
                if high { "EXEC high" } else { "EXEC" },
                r,
                high && !privileged,
            );
            match r {
                Ok(()) => ids.push_back(a.job_id),
                Err(_) if !high => {
                    // At the cap: reap the oldest (briefly), then go on.
                    if let Some(id) = ids.pop_front() {
                        let mut w = uapi::Wait {
                            job_id: id,
                            timeout_ns: ane::device::monotonic_ns() + 5_000_000,
                            ..Default::default()
                        };
                        let r = raw::wait(d.fd(), &mut w);
                        let r = if r == Err(Errno::TIME) { Ok(()) } else { r };
                        t.note(Call::Wait, "WAIT", r, false);
                    }
                }
                Err(_) => {}
            }
        }
        // Closed with whatever is still queued.
        drop(bos);
        drop(prog);
        drop(d);
        t.calls += 1;
        *t.by.entry("close with jobs pending".into()).or_default() += 1;
    }
    Ok(())
}

/// Open/close and mmap storm, mappings used after their file closed, and
/// sysfs writes an unprivileged client must not be allowed.
fn storm(path: &str, calls: u64, rng: &mut fuzz::Rng, t: &mut Tally) -> Result<(), String> {
    let page = rustix::param::page_size() as u64;
    let node = std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("accel0")
        .to_string();
    let dev = std::fs::read_link(format!("/sys/class/accel/{node}/device"))
        .ok()
        .and_then(|p| p.file_name().and_then(|n| n.to_str()).map(String::from))
        .unwrap_or_default();
    while t.calls < calls {
        let d = match Device::open(path) {
            Ok(d) => d,
            Err(e) => return Err(format!("open: {e}")),
        };
        t.calls += 1;
        let mut maps = Vec::new();
        for _ in 0..1 + rng.below(6) {
            let pages = 1 + rng.below(8);
            let mut a = uapi::BoCreate {
                size: pages * page,
                ..Default::default()
            };
            let r = raw::bo_create(d.fd(), &mut a);
            t.note(Call::BoCreate, "BO_CREATE", r, false);
            if r.is_err() {
                continue;
            }
            let len = (pages * page) as usize;
            let m = fuzz::mmap_bo(&d, a.mmap_offset, len);
            t.note(Call::Mmap, "mmap", m.map(|_| ()), false);
            if let Ok(p) = m {
                maps.push((p, len, rng.next() as u8));
            }
            if rng.chance(30) {
                let mut c = raw::GemClose {
                    handle: a.handle,
                    ..Default::default()
                };
                let r = raw::gem_close(d.fd(), &mut c);
                t.note(Call::GemClose, "GEM_CLOSE (mapped)", r, false);
            }
        }
        // The file closes; the mappings stay and must still be memory.
        drop(d);
        for (p, len, v) in maps {
            // SAFETY: our own mapping of `len` bytes, not unmapped yet.
            let m = unsafe { std::slice::from_raw_parts_mut(p, len) };
            m.fill(v);
            if m.iter().any(|&b| b != v) {
                return Err("a mapping kept after close did not hold its bytes".into());
            }
            let r = fuzz::munmap(p, len);
            t.note(Call::Munmap, "munmap after close", r, false);
        }
        if rng.chance(5) && !dev.is_empty() && !is_root() {
            t.note_sysfs(
                "unbind",
                std::fs::write("/sys/bus/platform/drivers/ane/unbind", &dev),
            );
            t.note_sysfs(
                "power/control on",
                std::fs::write(
                    format!("/sys/bus/platform/devices/{dev}/power/control"),
                    "on",
                ),
            );
        }
    }
    Ok(())
}

/// Whether this process runs as root (its sysfs writes would succeed: an
/// administrator's, not a client's).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(true)
}

/// Allocation exhaustion: files at their cap (and the device at its),
/// touched, held, freed, taken again.
fn exhaust(path: &str, calls: u64, rng: &mut fuzz::Rng, t: &mut Tally) -> Result<(), String> {
    let page = rustix::param::page_size() as u64;
    while t.calls < calls {
        let mut files = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let d = Device::open(path).map_err(|e| e.to_string())?;
            t.calls += 1;
            let mut size = page << rng.below(6);
            let mut held = 0;
            while t.calls < calls && held < 64 {
                let mut a = uapi::BoCreate {
                    size,
                    ..Default::default()
                };
                let r = raw::bo_create(d.fd(), &mut a);
                t.note(Call::BoCreate, "BO_CREATE", r, false);
                match r {
                    Ok(()) => {
                        held += 1;
                        if let Ok(p) = fuzz::mmap_bo(&d, a.mmap_offset, page as usize) {
                            // SAFETY: our fresh mapping of one page.
                            unsafe { p.write(0x5a) };
                            let _ = fuzz::munmap(p, page as usize);
                        }
                        size = size.saturating_mul(2);
                    }
                    Err(_) if size > page => size /= 2,
                    Err(_) => break,
                }
            }
            files.push(d);
        }
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        drop(files);
    }
    Ok(())
}
