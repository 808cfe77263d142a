// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `--fail-nth OP N`: one call of the driver with the N-th fault-injection
//! site it reaches made to fail, deterministically (the kernel's per-task
//! `/proc/thread-self/fail-nth`, as syzkaller uses it; the sanitizer kernel
//! has `CONFIG_FAULT_INJECTION` and failslab with `ignore-gfp-wait` off,
//! set by tools/qemu/tests/fail_nth.sh). Everything the call needs is set
//! up before, and cleaned up after, without injection.
//!
//! Prints `FAILNTH OP N: OUTCOME fired|clean` and exits 0 when the call
//! either failed with ENOMEM or another errno the call documents (the
//! errno it really returned), or succeeded; `clean` (the N-th site was
//! never reached) tells the caller to stop counting. The leak check is the
//! caller's: after the module is unloaded, a device it kept alive still
//! holds its accel minor, so the next load does not get accel0.

use std::fs::File;
use std::io::{Read, Write};
use std::process::ExitCode;

use crate::fuzz::{allowed, Call};
use ane::device::{raw, Device};
use ane::hw::uapi;
use rustix::io::Errno;

/// The calls, by name.
pub const OPS: &[&str] = &[
    "open",
    "bo_create",
    "mmap",
    "program_create",
    "exec",
    "wait",
    "gem_close",
    "program_destroy",
];

/// The per-task knob, opened for one injected call (as syzkaller does:
/// the file is not seekable, and its first read gives what is left).
struct Knob(File);

impl Knob {
    fn open() -> Result<Knob, String> {
        File::options()
            .read(true)
            .write(true)
            .open("/proc/thread-self/fail-nth")
            .map(Knob)
            .map_err(|e| format!("/proc/thread-self/fail-nth: {e}"))
    }

    fn arm(&mut self, n: u32) -> Result<(), String> {
        write!(self.0, "{n}").map_err(|e| format!("fail-nth: {e}"))
    }

    /// Disarms; whether the N-th site was reached.
    fn fired(&mut self) -> Result<bool, String> {
        let mut s = String::new();
        self.0.read_to_string(&mut s).map_err(|e| e.to_string())?;
        let left: u32 = s
            .trim()
            .parse()
            .map_err(|_| format!("fail-nth reads {s:?}"))?;
        self.arm(0)?;
        Ok(left == 0)
    }
}

/// Runs `f` with the N-th site failing; its outcome and whether it fired.
fn injected<T>(
    n: u32,
    f: impl FnOnce() -> Result<T, Errno>,
) -> Result<(Result<T, Errno>, bool), String> {
    let mut k = Knob::open()?;
    k.arm(n)?;
    let r = f();
    let fired = k.fired()?;
    Ok((r, fired))
}

/// The errno of a library call run under [`injected`]: the library's
/// errors carry the failed system call's; any other error (a node that
/// opened but identified wrongly) is a finding.
fn lib_errno(
    what: &str,
    r: Result<Result<(), ane::device::Error>, Errno>,
) -> Result<Result<(), Errno>, String> {
    match r {
        Ok(Ok(())) => Ok(Ok(())),
        Ok(Err(e)) => e.errno().map(Err).ok_or_else(|| format!("{what}: {e}")),
        Err(e) => Ok(Err(e)),
    }
}

fn run(op: &str, n: u32) -> Result<(String, bool), String> {
    let path = "/dev/accel/accel0";
    let name = |r: &Result<(), Errno>| match r {
        Ok(()) => "ok".to_string(),
        Err(e) => crate::fuzz::errno_name(*e),
    };
    if op == "open" {
        let (r, fired) = injected(n, || Ok(Device::open(path).map(drop)))?;
        let r = lib_errno("open", r)?;
        // Opening allocates (the DRM file, the client's address space):
        // ENOMEM is all it may answer.
        if let Err(e) = r {
            if e != Errno::NOMEM {
                return Err(format!(
                    "open: {} under injection",
                    crate::fuzz::errno_name(e)
                ));
            }
        }
        return Ok((name(&r), fired));
    }
    let d = Device::open(path).map_err(|e| e.to_string())?;
    let (r, fired) = match op {
        "bo_create" => {
            let mut a = uapi::BoCreate {
                size: 3 * 16384,
                ..Default::default()
            };
            let (r, fired) = injected(n, || raw::bo_create(d.fd(), &mut a))?;
            if r.is_ok() {
                let mut c = raw::GemClose {
                    handle: a.handle,
                    pad: 0,
                };
                raw::gem_close(d.fd(), &mut c).map_err(|e| format!("cleanup: {e}"))?;
            }
            (r, fired)
        }
        "mmap" => {
            let mut bo = d.bo_create(16384).map_err(|e| e.to_string())?;
            let (r, fired) = injected(n, || Ok(bo.map().map(drop)))?;
            (lib_errno("mmap", r)?, fired)
        }
        "program_create" => {
            let s = crate::staged(&d).map_err(|e| format!("setup: {e}"))?;
            let mut a = s.args;
            // H14 takes a synthetic H14 program as sections (an H13 stream
            // never reaches the firmware).
            let (bytes, sections) = crate::h14_synthetic(1);
            let _h14_bo = if crate::is_h14(&d) {
                let mut bo = d.bo_create(bytes.len() as u64).map_err(|e| e.to_string())?;
                bo.map().map_err(|e| e.to_string())?[..bytes.len()].copy_from_slice(&bytes);
                a = uapi::ProgramCreate {
                    bo_handle: bo.handle(),
                    offset: 0,
                    size: bytes.len() as u64,
                    sections: sections.as_ptr() as u64,
                    section_count: sections.len() as u32,
                    section_size: std::mem::size_of::<uapi::Section>() as u32,
                    ..Default::default()
                };
                Some(bo)
            } else {
                None
            };
            let (r, fired) = injected(n, || raw::program_create(d.fd(), &mut a))?;
            if r.is_ok() {
                let mut x = uapi::ProgramDestroy {
                    handle: a.handle,
                    pad: 0,
                };
                raw::program_destroy(d.fd(), &mut x).map_err(|e| format!("cleanup: {e}"))?;
            }
            (r, fired)
        }
        "exec" | "wait" => {
            let rd = crate::ready(&d).map_err(|e| format!("setup: {e}"))?;
            let mut a = rd.exec_args();
            let (r, fired) = if op == "exec" {
                injected(n, || raw::exec(d.fd(), &mut a))?
            } else {
                raw::exec(d.fd(), &mut a).map_err(|e| format!("setup EXEC: {e}"))?;
                let mut w = uapi::Wait {
                    job_id: a.job_id,
                    timeout_ns: crate::job_deadline(),
                    ..Default::default()
                };
                injected(n, || raw::wait(d.fd(), &mut w))?
            };
            if r.is_ok() || op == "wait" {
                // Whatever happened, the job ends before the file closes.
                let _ = d.wait(a.job_id, std::time::Duration::from_secs(30));
            }
            (r, fired)
        }
        "gem_close" => {
            let bo = d.bo_create(16384).map_err(|e| e.to_string())?;
            let mut c = raw::GemClose {
                handle: bo.handle(),
                pad: 0,
            };
            std::mem::forget(bo);
            injected(n, || raw::gem_close(d.fd(), &mut c))?
        }
        "program_destroy" => {
            let p = crate::sum_program(&d)?;
            let mut x = uapi::ProgramDestroy {
                handle: p.handle(),
                pad: 0,
            };
            std::mem::forget(p);
            injected(n, || raw::program_destroy(d.fd(), &mut x))?
        }
        _ => return Err(format!("unknown op {op}; ops: {}", OPS.join(", "))),
    };
    let r = r.map(drop);
    // Any errno the call documents (shmem answers ENOSPC when it cannot
    // allocate an inode); the fuzzer's table is the one list of them.
    let call = match op {
        "bo_create" => Call::BoCreate,
        "mmap" => Call::Mmap,
        "program_create" => Call::ProgramCreate,
        "exec" => Call::Exec,
        "wait" => Call::Wait,
        "gem_close" => Call::GemClose,
        _ => Call::ProgramDestroy,
    };
    if let Err(e) = r {
        if e != Errno::NOMEM && !allowed(call, e, false) {
            return Err(format!(
                "{op}: {} under injection",
                crate::fuzz::errno_name(e)
            ));
        }
    }
    Ok((name(&r), fired))
}

/// `--fail-nth OP N`.
pub fn main(args: &[String]) -> ExitCode {
    let (Some(op), Some(n)) = (
        args.first(),
        args.get(1).and_then(|s| s.parse::<u32>().ok()),
    ) else {
        eprintln!("usage: --fail-nth OP N (OP: {})", OPS.join(", "));
        return ExitCode::from(2);
    };
    match run(op, n) {
        Ok((outcome, fired)) => {
            println!(
                "FAILNTH {op} {n}: {outcome} {}",
                if fired { "fired" } else { "clean" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("FAIL fail-nth {op} {n}: {e}");
            ExitCode::from(1)
        }
    }
}
