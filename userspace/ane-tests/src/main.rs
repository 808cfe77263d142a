// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-ioctl-tests`: the driver's ioctl suite, run inside a QEMU guest
//! against the simulated ANE (or on a real Mac). Every test talks to the
//! kernel through real ioctls; the bad-input table sends one malformed
//! request per row and checks the exact errno.
//!
//! Prints one line per test and ends with `N passed, N failed`; the exit
//! status is non-zero if anything failed.

use std::process::ExitCode;

use ane::device::{raw, Device};
use ane::hw::uapi::{self, param};
use rustix::io::Errno;

type TestResult = Result<(), String>;
type Test = (&'static str, fn(&Device) -> TestResult);

macro_rules! check {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// The errno of a raw ioctl, or `None` on success.
fn errno(r: Result<(), Errno>) -> Option<Errno> {
    r.err()
}

fn open() -> Result<Device, String> {
    Device::discover().map_err(|e| e.to_string())
}

// ---------------------------------------------------------------- success

fn version_reports_ane(d: &Device) -> TestResult {
    let v = d.version();
    check!(v.name == "ane", "name {}", v.name);
    check!(v.major == uapi::ABI_VERSION as i32, "major {}", v.major);
    Ok(())
}

fn query_is_consistent(d: &Device) -> TestResult {
    let q = d.query().map_err(|e| e.to_string())?;
    check!(
        q.abi_version == u64::from(uapi::ABI_VERSION),
        "abi {}",
        q.abi_version
    );
    let soc =
        ane::hw::soc::SocId::from_raw(q.soc_id as u32).ok_or(format!("soc {:#x}", q.soc_id))?;
    let info = soc.info();
    check!(
        q.generation == info.generation as u64,
        "generation {}",
        q.generation
    );
    check!(q.backend == info.backend as u64, "backend {}", q.backend);
    let page = rustix::param::page_size() as u64;
    check!(
        q.page_size == page,
        "page size {} vs the system's {}",
        q.page_size,
        page
    );
    check!(
        q.iova_start == info.iova.start && q.iova_end == info.iova.end,
        "iova window"
    );
    check!(
        q.bo_max_size > 0 && q.bo_total_max >= q.bo_max_size,
        "bo limits {q:?}"
    );
    check!(q.max_bindings == u64::from(uapi::NUM_SLOTS), "max bindings");
    check!(q.max_program_size > 0, "max program size");
    check!(
        q.features & uapi::feature::SIMULATED != 0 || std::env::var_os("ANE_HW").is_some(),
        "not the simulator"
    );
    Ok(())
}

fn bo_create_info_map(d: &Device) -> TestResult {
    let page = rustix::param::page_size() as u64;
    let mut bo = d.bo_create(1).map_err(|e| e.to_string())?;
    check!(bo.size() == page, "1 byte rounds to a page: {}", bo.size());
    let q = d.query().map_err(|e| e.to_string())?;
    check!(
        bo.iova() >= q.iova_start && bo.iova() + bo.size() <= q.iova_end,
        "iova {:#x} outside the window",
        bo.iova()
    );
    check!(
        bo.iova() % page == 0,
        "iova {:#x} not page aligned",
        bo.iova()
    );
    let m = bo.map().map_err(|e| e.to_string())?;
    check!(m.iter().all(|b| *b == 0), "new BO not zeroed");
    for (i, b) in m.iter_mut().enumerate() {
        *b = i as u8;
    }
    let m = bo.map().map_err(|e| e.to_string())?;
    check!(m.iter().enumerate().all(|(i, b)| *b == i as u8), "readback");
    // Two BOs never overlap and keep a guard gap.
    let b2 = d.bo_create(3 * page).map_err(|e| e.to_string())?;
    check!(b2.size() == 3 * page, "size {}", b2.size());
    let (a0, a1) = (bo.iova(), bo.iova() + bo.size());
    let (b0, b1) = (b2.iova(), b2.iova() + b2.size());
    check!(
        a1 < b0 || b1 < a0,
        "BOs overlap or touch: {a0:#x}..{a1:#x} {b0:#x}..{b1:#x}"
    );
    Ok(())
}

fn gem_close_while_mapped(d: &Device) -> TestResult {
    let mut bo = d.bo_create(8192).map_err(|e| e.to_string())?;
    let len = bo.size() as usize;
    let ptr = bo.map().map_err(|e| e.to_string())?.as_mut_ptr();
    let mut c = raw::GemClose {
        handle: bo.handle(),
        pad: 0,
    };
    raw::gem_close(d.fd(), &mut c).map_err(|e| format!("GEM_CLOSE: {e}"))?;
    // The handle is gone, the mapping keeps the object alive.
    let mut info = uapi::BoInfo {
        handle: bo.handle(),
        ..Default::default()
    };
    check!(
        errno(raw::bo_info(d.fd(), &mut info)) == Some(Errno::NOENT),
        "closed handle still usable"
    );
    // SAFETY: The mapping is still ours (`bo` is alive and unmaps on drop).
    let m = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
    m[0] = 0xa5;
    m[len - 1] = 0x5a;
    check!(
        m[0] == 0xa5 && m[len - 1] == 0x5a,
        "mapping unusable after GEM_CLOSE"
    );
    // `bo`'s drop closes the (already closed) handle again: harmless EINVAL.
    Ok(())
}

fn other_fd_handle_unusable(d: &Device) -> TestResult {
    let d2 = Device::open(d.path()).map_err(|e| e.to_string())?;
    let bo = d.bo_create(4096).map_err(|e| e.to_string())?;
    // A handle number of one file means nothing in another.
    let mut info = uapi::BoInfo {
        handle: bo.handle(),
        ..Default::default()
    };
    let b2 = d2.bo_create(4096).map_err(|e| e.to_string())?;
    if b2.handle() != bo.handle() {
        check!(
            errno(raw::bo_info(d2.fd(), &mut info)) == Some(Errno::NOENT),
            "foreign handle accepted"
        );
    }
    // Each file has its own address space: a fresh file's first BO gets
    // the first address of the window, whatever the other file holds.
    let d3 = Device::open(d.path()).map_err(|e| e.to_string())?;
    let first = d3.bo_create(4096).map_err(|e| e.to_string())?;
    let start = d.get_param(param::IOVA_START).map_err(|e| e.to_string())?;
    check!(
        first.iova() == start,
        "fresh file's first BO at {:#x}, not {start:#x}",
        first.iova()
    );
    Ok(())
}

fn close_fd_with_live_bos(d: &Device) -> TestResult {
    let d2 = Device::open(d.path()).map_err(|e| e.to_string())?;
    let mut bos = Vec::new();
    for i in 1..8u64 {
        bos.push(d2.bo_create(i * 4096).map_err(|e| e.to_string())?);
    }
    let _ = bos[0].map().map_err(|e| e.to_string())?;
    // Leak the RAII wrappers: the kernel must clean up on close by itself.
    std::mem::forget(bos);
    drop(d2);
    Ok(())
}

/// The child half of [`two_processes`]: BO traffic on its own fd.
fn child_bo_traffic(path: &str) -> Result<(), String> {
    let c = Device::open(path).map_err(|e| e.to_string())?;
    for _ in 0..32 {
        let mut bo = c.bo_create(16384).map_err(|e| e.to_string())?;
        bo.map().map_err(|e| e.to_string())?.fill(7);
    }
    Ok(())
}

fn two_processes(d: &Device) -> TestResult {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(exe)
        .arg("--child-bo-traffic")
        .arg(d.path())
        .spawn()
        .map_err(|e| e.to_string())?;
    for _ in 0..32 {
        let mut bo = d.bo_create(16384).map_err(|e| e.to_string())?;
        bo.map().map_err(|e| e.to_string())?.fill(9);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    check!(status.success(), "child failed: {status}");
    Ok(())
}

fn device_total_cap(d: &Device) -> TestResult {
    // With the module loaded with a small bo_total_mb, creating more than
    // the cap fails with ENOSPC and gives everything back on close.
    let q = d.query().map_err(|e| e.to_string())?;
    if q.bo_total_max > 256 << 20 {
        return Ok(()); // the suite runs with bo_total_mb=64; nothing to check otherwise
    }
    let chunk = q.bo_total_max / 4;
    let mut held = Vec::new();
    let mut last = None;
    for _ in 0..8 {
        let mut a = uapi::BoCreate {
            size: chunk,
            ..Default::default()
        };
        match raw::bo_create(d.fd(), &mut a) {
            Ok(()) => held.push(a.handle),
            Err(e) => {
                last = Some(e);
                break;
            }
        }
    }
    check!(
        last == Some(Errno::NOSPC),
        "cap not enforced: {last:?} after {} BOs",
        held.len()
    );
    check!(held.len() <= 4, "more than the cap allocated");
    for h in held {
        let mut c = raw::GemClose { handle: h, pad: 0 };
        raw::gem_close(d.fd(), &mut c).map_err(|e| e.to_string())?;
    }
    // Freed bytes are reusable.
    let mut a = uapi::BoCreate {
        size: chunk,
        ..Default::default()
    };
    raw::bo_create(d.fd(), &mut a).map_err(|e| format!("after freeing: {e}"))?;
    let mut c = raw::GemClose {
        handle: a.handle,
        pad: 0,
    };
    raw::gem_close(d.fd(), &mut c).map_err(|e| e.to_string())?;
    Ok(())
}

// ---------------------------------------------------------------- bad input

type Case = (&'static str, Errno, fn(&Device) -> Result<(), Errno>);

fn get_param(d: &Device, p: u32, pad: u32) -> Result<(), Errno> {
    let mut a = uapi::GetParam {
        param: p,
        pad,
        value: 0,
    };
    raw::get_param(d.fd(), &mut a)
}

fn bo_create(d: &Device, size: u64, flags: u32) -> Result<(), Errno> {
    let mut a = uapi::BoCreate {
        size,
        flags,
        ..Default::default()
    };
    let r = raw::bo_create(d.fd(), &mut a);
    if r.is_ok() {
        let mut c = raw::GemClose {
            handle: a.handle,
            pad: 0,
        };
        let _ = raw::gem_close(d.fd(), &mut c);
    }
    r
}

fn bo_info(d: &Device, handle: u32, pad: u32) -> Result<(), Errno> {
    let mut a = uapi::BoInfo {
        handle,
        pad,
        ..Default::default()
    };
    raw::bo_info(d.fd(), &mut a)
}

fn freed_handle(d: &Device) -> u32 {
    let bo = d.bo_create(4096).expect("bo");
    let h = bo.handle();
    drop(bo);
    h
}

const BAD_INPUTS: &[Case] = &[
    ("get_param: pad != 0", Errno::INVAL, |d| {
        get_param(d, param::ABI_VERSION, 1)
    }),
    ("get_param: pad = u32::MAX", Errno::INVAL, |d| {
        get_param(d, param::SOC_ID, u32::MAX)
    }),
    (
        "get_param: param = COUNT (one past the last)",
        Errno::INVAL,
        |d| get_param(d, param::COUNT, 0),
    ),
    ("get_param: param = u32::MAX", Errno::INVAL, |d| {
        get_param(d, u32::MAX, 0)
    }),
    ("bo_create: size 0", Errno::INVAL, |d| bo_create(d, 0, 0)),
    ("bo_create: unknown flag bit 0", Errno::INVAL, |d| {
        bo_create(d, 4096, 1)
    }),
    ("bo_create: unknown flag bit 31", Errno::INVAL, |d| {
        bo_create(d, 4096, 1 << 31)
    }),
    (
        "bo_create: size u64::MAX (rounding overflows)",
        Errno::TOOBIG,
        |d| bo_create(d, u64::MAX, 0),
    ),
    ("bo_create: size > bo_max_size", Errno::TOOBIG, |d| {
        let max = d.get_param(param::BO_MAX_SIZE).map_err(|_| Errno::IO)?;
        bo_create(d, max + 1, 0)
    }),
    ("bo_create: size 1 << 62", Errno::TOOBIG, |d| {
        bo_create(d, 1 << 62, 0)
    }),
    ("bo_info: handle 0", Errno::NOENT, |d| bo_info(d, 0, 0)),
    ("bo_info: handle u32::MAX", Errno::NOENT, |d| {
        bo_info(d, u32::MAX, 0)
    }),
    ("bo_info: pad != 0", Errno::INVAL, |d| {
        let bo = d.bo_create(4096).map_err(|_| Errno::IO)?;
        bo_info(d, bo.handle(), 1)
    }),
    ("bo_info: freed handle", Errno::NOENT, |d| {
        bo_info(d, freed_handle(d), 0)
    }),
    ("bo_info: another fd's handle", Errno::NOENT, |d| {
        let d2 = Device::open(d.path()).map_err(|_| Errno::IO)?;
        let a = d2.bo_create(4096).map_err(|_| Errno::IO)?;
        let b = d2.bo_create(4096).map_err(|_| Errno::IO)?;
        // Pick a handle that exists in d2 but not in d.
        let h = a.handle().max(b.handle()) + 100;
        let _ = (a, b);
        bo_info(d, h, 0)
    }),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child-bo-traffic") {
        let path = args
            .get(2)
            .map(String::as_str)
            .unwrap_or("/dev/accel/accel0");
        return match child_bo_traffic(path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("child: {e}");
                ExitCode::from(1)
            }
        };
    }
    let dev = match open() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ane-ioctl-tests: {e}");
            return ExitCode::from(2);
        }
    };
    let tests: &[Test] = &[
        ("version reports ane", version_reports_ane),
        ("query is consistent", query_is_consistent),
        ("bo create/info/map", bo_create_info_map),
        ("GEM_CLOSE while mmapped", gem_close_while_mapped),
        ("another fd's handle is unusable", other_fd_handle_unusable),
        ("close fd with live BOs", close_fd_with_live_bos),
        ("two processes at once", two_processes),
        ("device total cap", device_total_cap),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, t) in tests {
        match t(&dev) {
            Ok(()) => {
                println!("PASS {name}");
                passed += 1;
            }
            Err(e) => {
                println!("FAIL {name}: {e}");
                failed += 1;
            }
        }
    }
    for (name, want, f) in BAD_INPUTS {
        match f(&dev) {
            Err(e) if e == *want => {
                println!("PASS bad input: {name} -> {want:?}");
                passed += 1;
            }
            other => {
                println!("FAIL bad input: {name}: got {other:?}, want {want:?}");
                failed += 1;
            }
        }
    }
    println!("bad-input table: {} rows", BAD_INPUTS.len());
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
