//! Memory-cgroup accounting (kernel-2 U5, N9): what a client makes the
//! kernel keep is charged to the client's cgroup, so `memory.max` bounds
//! one user's clients together, whatever number of files they open.
//!
//! The suite runs inside a cgroup v2 directory the caller made for it
//! (`tools/qemu/tests/memcg.sh`: memory controller enabled, this process
//! already moved in) and reads that cgroup's own counters.

use super::*;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

/// One of the cgroup's files.
fn cg_file(cg: &Path, name: &str) -> PathBuf {
    cg.join(name)
}

/// A counter file's value (`max` reads as `u64::MAX`).
fn cg_read(cg: &Path, name: &str) -> Result<u64, String> {
    let path = cg_file(cg, name);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = text.trim();
    if text == "max" {
        return Ok(u64::MAX);
    }
    text.parse()
        .map_err(|e| format!("{}: {text:?}: {e}", path.display()))
}

fn cg_write(cg: &Path, name: &str, value: &str) -> Result<(), String> {
    let path = cg_file(cg, name);
    std::fs::write(&path, value).map_err(|e| format!("{}: {e}", path.display()))
}

/// `memory.peak` opened for reading and resetting: a write resets the
/// peak to the current usage for reads through the same open file
/// (cgroup v2, Documentation/admin-guide/cgroup-v2.rst).
struct Peak(std::fs::File);

impl Peak {
    fn reset(cg: &Path) -> Result<Self, String> {
        let path = cg_file(cg, "memory.peak");
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        f.write_all(b"reset\n")
            .map_err(|e| format!("{}: reset: {e}", path.display()))?;
        Ok(Peak(f))
    }

    fn read(&mut self) -> Result<u64, String> {
        let mut s = String::new();
        self.0
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.0.read_to_string(&mut s))
            .map_err(|e| format!("memory.peak: {e}"))?;
        s.trim()
            .parse()
            .map_err(|e| format!("memory.peak: {s:?}: {e}"))
    }
}

/// A program of `count` conv TDs over `weights` bytes, written into a BO
/// of its size.
fn staged(
    d: &Device,
    count: u32,
    weights: u64,
) -> Result<(ane::builder::Program, ane::device::Bo<'_>), String> {
    let p = ane::builder::conv1x1_stream(128, 128, 1, 32, count, weights)
        .map_err(|e| format!("program: {e}"))?;
    let total = p.weights_offset() + weights;
    let mut bo = d.bo_create(total).map_err(|e| format!("BO_CREATE: {e}"))?;
    let m = bo.map().map_err(|e| format!("map: {e}"))?;
    m[..p.tsk.len()].copy_from_slice(&p.tsk);
    Ok((p, bo))
}

/// PROGRAM_CREATE's private copy stays charged to the creator while the
/// program exists, and the task-stream staging the ioctl holds while it
/// validates is charged too (it shows in the peak, then goes).
fn program_memory_is_charged(d: &Device, cg: &Path) -> TestResult {
    // About 4 MiB of task stream (5,400 TDs) and 8 MiB of weights.
    let (p, bo) = staged(d, 5400, 8 * MIB)?;
    let total = p.weights_offset() + 8 * MIB;
    let tsk = p.tsk_size();
    let before = cg_read(cg, "memory.current")?;
    let mut peak = Peak::reset(cg)?;
    let prog = d
        .program_create(&bo, 0, total, p.td_size, p.td_count, tsk)
        .map_err(|e| format!("PROGRAM_CREATE: {e}"))?;
    let after = cg_read(cg, "memory.current")?;
    let top = peak.read()?;
    let kept = after.saturating_sub(before);
    if kept < total * 9 / 10 {
        return Err(format!(
            "the program's private copy ({total} bytes) is not charged to its creator: memory.current grew by {kept} bytes"
        ));
    }
    let transient = top.saturating_sub(after);
    if transient < tsk * 9 / 10 {
        return Err(format!(
            "the {tsk}-byte task-stream staging is not charged: memory.peak is only {transient} bytes above the usage after PROGRAM_CREATE"
        ));
    }
    drop(prog);
    drop(bo);
    let gone = cg_read(cg, "memory.current")?;
    if gone > before.saturating_sub(total) + 2 * MIB {
        return Err(format!(
            "closing the program and its BO left {} bytes charged ({before} before the program, {gone} after)",
            gone.saturating_sub(before.saturating_sub(total))
        ));
    }
    println!(
        "memcg: program of {total} bytes: {kept} bytes kept, {transient} bytes of staging at the peak"
    );
    Ok(())
}

/// Several files of one cgroup together cannot pin more than its
/// `memory.max`: BO_CREATE past it fails with ENOMEM (no OOM kill: the
/// shmem helper allocates with __GFP_RETRY_MAYFAIL), what was created
/// stays usable, and closing everything uncharges it.
fn files_share_the_cgroup_limit(_: &Device, cg: &Path) -> TestResult {
    const FILES: usize = 4;
    const BO: u64 = 8 * MIB;
    const ROOM: u64 = 40 * MIB;
    let files: Vec<Device> = (0..FILES).map(|_| open()).collect::<Result<_, _>>()?;
    let start = cg_read(cg, "memory.current")?;
    let limit = start + ROOM;
    cg_write(cg, "memory.max", &limit.to_string())?;
    let result = (|| {
        let mut bos = Vec::new();
        let mut refused = None;
        for i in 0..(ROOM / BO * 3) as usize {
            match files[i % FILES].bo_create(BO) {
                Ok(bo) => bos.push(bo),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
            let now = cg_read(cg, "memory.current")?;
            if now > limit {
                return Err(format!("memory.current {now} passed memory.max {limit}"));
            }
        }
        let created = bos.len() as u64;
        match refused {
            None => {
                return Err(format!(
                    "{created} BOs of {BO} bytes over {FILES} files were all created under a {ROOM}-byte cgroup limit"
                ))
            }
            Some(e) if e.errno() != Some(Errno::NOMEM) => {
                return Err(format!("BO_CREATE past the cgroup limit: {e} (want ENOMEM)"))
            }
            Some(_) => {}
        }
        if created * BO > ROOM || created < ROOM / BO / 2 {
            return Err(format!(
                "{created} BOs of {BO} bytes fit under a {ROOM}-byte limit"
            ));
        }
        // What was created is intact and still usable.
        for (i, bo) in bos.iter_mut().enumerate() {
            let m = bo.map().map_err(|e| format!("map BO {i}: {e}"))?;
            m[0] = i as u8;
            m[m.len() - 1] = !(i as u8);
        }
        let kills = std::fs::read_to_string(cg_file(cg, "memory.events"))
            .map_err(|e| format!("memory.events: {e}"))?;
        if kills
            .lines()
            .any(|l| l.starts_with("oom_kill ") && l != "oom_kill 0")
        {
            return Err(format!("the cgroup saw an OOM kill: {kills:?}"));
        }
        println!("memcg: {created} BOs of {BO} bytes over {FILES} files under a {ROOM}-byte limit, then ENOMEM");
        Ok(())
    })();
    cg_write(cg, "memory.max", "max")?;
    result?;
    drop(files);
    let end = cg_read(cg, "memory.current")?;
    if end > start + 2 * MIB {
        return Err(format!(
            "closing the files left {} bytes charged",
            end - start
        ));
    }
    // The device still serves this client.
    match run_sum(&open()?)? {
        ane::device::JobStatus::Done => Ok(()),
        st => Err(format!("a job after the limit: {st:?}")),
    }
}

type CgTest = fn(&Device, &Path) -> TestResult;

/// `--memcg CGROUP_DIR`.
pub(crate) fn main(args: &[String]) -> std::process::ExitCode {
    let Some(cg) = args.first().map(PathBuf::from) else {
        eprintln!("usage: --memcg CGROUP_DIR (this process already in it)");
        return std::process::ExitCode::from(2);
    };
    let d = match open() {
        Ok(d) => d,
        Err(e) => {
            println!("FAIL open: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let tests: &[(&str, CgTest)] = &[
        (
            "a program's memory is charged to its creator's cgroup",
            program_memory_is_charged,
        ),
        (
            "one cgroup's files together stay within its memory.max",
            files_share_the_cgroup_limit,
        ),
    ];
    let mut failed = 0;
    for (name, t) in tests {
        match t(&d, &cg) {
            Ok(()) => println!("PASS {name}"),
            Err(e) => {
                println!("FAIL {name}: {e}");
                failed += 1;
            }
        }
    }
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}
