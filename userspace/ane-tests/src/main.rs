// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-ioctl-tests`: the driver's ioctl suite, run inside a QEMU guest
//! against the simulated ANE (or on a real Mac). Every test talks to the
//! kernel through real ioctls; the bad-input table sends one malformed
//! request per row and checks the exact errno.
//!
//! Prints one line per test and ends with `N passed, N failed`; the exit
//! status is non-zero if anything failed.

use std::process::ExitCode;

mod failnth;
mod fuzz;
mod fwimage;
mod hostile;
mod sim;

use ane::device::{raw, Device};
use ane::hw::uapi::{self, param};
use rustix::io::Errno;
use sim::{sim_counter, SIM_DEBUGFS};

type TestResult = Result<(), String>;
type Test = (&'static str, fn(&Device) -> TestResult);

macro_rules! check {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

// After `check!`, which it uses.
mod fences;
mod memcg;

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
    // A DRM name of its own (the other ANE drivers register "ane"), the
    // major by the DRM convention.
    check!(v.name == uapi::DRIVER_NAME, "name {}", v.name);
    check!(v.major == uapi::ABI_VERSION as i32, "major {}", v.major);
    // eiln/omarchy-ane's libane (name "ane", major 1 or 2) must not take
    // this node for one of its own.
    check!(
        !ane::device::eiln_omarchy_accepts(v),
        "eiln/omarchy-ane's rule accepts major {}",
        v.major
    );
    let ident = d.get_param(param::IDENT).map_err(|e| e.to_string())?;
    check!(ident == uapi::IDENT_MAGIC, "IDENT {ident:#x}");
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
    // H14: the bottom of the SoC's window is reserved for the firmware's
    // own memory; clients get the rest (kernel-2 N2).
    let h14 = q.backend == uapi::backend::FIRMWARE;
    check!(
        (q.iova_start == info.iova.start || h14 && q.iova_start > info.iova.start)
            && q.iova_start < q.iova_end
            && q.iova_end == info.iova.end,
        "iova window {:#x}..{:#x}, the SoC's {:#x}..{:#x}",
        q.iova_start,
        q.iova_end,
        info.iova.start,
        info.iova.end
    );
    check!(
        q.bo_max_size > 0 && q.bo_total_max >= q.bo_max_size,
        "bo limits {q:?}"
    );
    check!(q.max_bindings == u64::from(uapi::NUM_SLOTS), "max bindings");
    check!(q.max_program_size > 0, "max program size");
    // No test or debug bit in the UAPI: COMPLETION_IRQ is the only one.
    check!(
        q.features & !uapi::feature::COMPLETION_IRQ == 0,
        "unknown feature bits {:#x}",
        q.features
    );
    // The simulator is the test flavour's, seen in its debugfs only.
    check!(
        std::path::Path::new(SIM_DEBUGFS).is_dir() || std::env::var_os("ANE_HW").is_some(),
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
    // H13: each file has its own address space: a fresh file's first BO
    // gets the first address of the window, whatever the other file holds.
    // (H14 clients share the firmware's address space.)
    if is_h14(d) {
        return Ok(());
    }
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

/// Holds the device open across a sysfs unbind done by the caller (who
/// creates `flag` afterwards): ioctls must then fail with ENODEV, and the
/// BO mapping made before must still be usable.
fn after_unbind(path: &str, flag: &str) -> TestResult {
    let d = Device::open(path).map_err(|e| e.to_string())?;
    let mut bo = d.bo_create(4096).map_err(|e| e.to_string())?;
    let m = bo.map().map_err(|e| e.to_string())?;
    m.fill(0x3c);
    let ptr = m.as_mut_ptr();
    let len = m.len();
    // Jobs queued, one waiting for another's fence, when the device goes.
    let fences = match fixture("tinygrad_sum.hwx") {
        Some(_) => Some(fences::unbind_pending_fences(&d)?),
        None => None,
    };
    println!("READY");
    let mut waited = 0;
    while !std::path::Path::new(flag).exists() {
        std::thread::sleep(std::time::Duration::from_millis(50));
        waited += 1;
        check!(waited < 600, "nobody unbound the device");
    }
    let mut a = uapi::GetParam::default();
    let r = raw::get_param(d.fd(), &mut a);
    check!(r == Err(Errno::NODEV), "ioctl after unbind: {r:?}");
    let r = d.bo_create(4096).map(|_| ());
    check!(r.is_err(), "BO_CREATE after unbind succeeded");
    // SAFETY: `bo` (and its mapping) is alive.
    let m = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
    check!(m.iter().all(|b| *b == 0x3c), "mapping lost its contents");
    m.fill(0x5a);
    if let Some(f) = fences {
        fences::unbind_fences_ended(f)?;
        println!("fences queued before unbind: all signalled");
    }
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

/// HIGH priority needs CAP_SYS_NICE: a child that dropped it gets EPERM
/// for HIGH and runs NORMAL; with it, HIGH runs.
fn high_priority_needs_privilege(d: &Device) -> TestResult {
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    require_h13(d)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .arg("--child-priority")
        .arg(d.path())
        .output()
        .map_err(|e| e.to_string())?;
    check!(
        out.status.success(),
        "child without CAP_SYS_NICE: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let mut a = r.exec_args();
    a.priority = uapi::priority::HIGH;
    raw::exec(d.fd(), &mut a).map_err(|e| format!("privileged HIGH EXEC: {e}"))?;
    let st = d
        .wait(a.job_id, std::time::Duration::from_secs(20))
        .map_err(|e| e.to_string())?;
    check!(st == Some(ane::device::JobStatus::Done), "HIGH job: {st:?}");
    Ok(())
}

/// `--child-priority NODE`: without CAP_SYS_NICE, HIGH is EPERM and
/// NORMAL runs.
fn child_priority(path: &str) -> TestResult {
    let d = Device::open(std::path::Path::new(path)).map_err(|e| e.to_string())?;
    // Drop CAP_SYS_NICE from every set of this process.
    use rustix::thread::{capabilities, set_capabilities, CapabilitySet};
    let mut caps = capabilities(None).map_err(|e| format!("capget: {e}"))?;
    caps.effective.remove(CapabilitySet::SYS_NICE);
    caps.permitted.remove(CapabilitySet::SYS_NICE);
    caps.inheritable.remove(CapabilitySet::SYS_NICE);
    set_capabilities(None, caps).map_err(|e| format!("capset: {e}"))?;
    let r = ready(&d).map_err(|e| format!("setup: {e}"))?;
    let mut a = r.exec_args();
    a.priority = uapi::priority::HIGH;
    let e = raw::exec(d.fd(), &mut a);
    check!(e == Err(Errno::PERM), "unprivileged HIGH EXEC: {e:?}");
    let mut a = r.exec_args();
    a.priority = uapi::priority::NORMAL;
    raw::exec(d.fd(), &mut a).map_err(|e| format!("unprivileged NORMAL EXEC: {e}"))?;
    let st = d
        .wait(a.job_id, std::time::Duration::from_secs(20))
        .map_err(|e| e.to_string())?;
    check!(
        st == Some(ane::device::JobStatus::Done),
        "NORMAL job: {st:?}"
    );
    Ok(())
}

fn device_total_cap(d: &Device) -> TestResult {
    // The suite loads the module with bo_total_mb=64 and bo_client_mb=32:
    // one file stops at its own cap while the device has room, a second
    // fills the device, a third then gets nothing; everything comes back
    // on close.
    let q = d.query().map_err(|e| e.to_string())?;
    if q.bo_total_max > 256 << 20 {
        return Ok(()); // nothing to check with the default caps
    }
    let client_max = param_value(d, param::BO_CLIENT_MAX)?;
    check!(
        client_max == q.bo_total_max / 2,
        "client cap {client_max} (device {})",
        q.bo_total_max
    );
    let chunk = q.bo_total_max / 4;
    // Creates chunks on `dev` until refused; the handles and the refusal.
    let fill = |dev: &Device, most: usize| -> (Vec<u32>, Option<Errno>) {
        let mut held = Vec::new();
        for _ in 0..most {
            let mut a = uapi::BoCreate {
                size: chunk,
                ..Default::default()
            };
            match raw::bo_create(dev.fd(), &mut a) {
                Ok(()) => held.push(a.handle),
                Err(e) => return (held, Some(e)),
            }
        }
        (held, None)
    };
    // Fresh files: the suite's own file holds buffers of earlier tests.
    let first = Device::open(d.path()).map_err(|e| e.to_string())?;
    let (a_held, a_err) = fill(&first, 8);
    check!(
        a_held.len() == 2 && a_err == Some(Errno::NOSPC),
        "one file: {} chunks, then {a_err:?} (its cap is 2)",
        a_held.len()
    );
    let second = Device::open(d.path()).map_err(|e| e.to_string())?;
    // Up to its own cap, or less where the suite's own file holds part of
    // the device cap (the H14 firmware's memory is outside it).
    let (b_held, _) = fill(&second, 2);
    check!(!b_held.is_empty(), "second file: no chunk");
    let third = Device::open(d.path()).map_err(|e| e.to_string())?;
    let (c_held, c_err) = fill(&third, 1);
    check!(
        c_held.is_empty() && c_err == Some(Errno::NOSPC),
        "a full device gave a third file {} chunks ({c_err:?})",
        c_held.len()
    );
    drop(second);
    // Freed bytes are reusable.
    let (c_held, c_err) = fill(&third, 1);
    check!(c_held.len() == 1, "after a close: {c_err:?}");
    for h in a_held {
        let mut c = raw::GemClose { handle: h, pad: 0 };
        raw::gem_close(first.fd(), &mut c).map_err(|e| e.to_string())?;
    }
    Ok(())
}

// ---------------------------------------------------------------- programs

/// Where the guest finds the compiled fixtures (copied from ../shared by
/// the harness); tests that need them are skipped when it is absent.
fn fixture(name: &str) -> Option<ane::hwx::Hwx> {
    let dir = std::env::var("ANE_FIXTURES").unwrap_or_else(|_| "/fixtures".into());
    let bytes = std::fs::read(format!("{dir}/{name}")).ok()?;
    ane::hwx::Hwx::parse(&bytes).ok()
}

/// How long the tests wait for a job that must complete. The guests run
/// under QEMU's emulation, with the simulated engine executing programs in
/// the kernel, on shared machines that may be several times slower than the
/// one the suites were timed on: a wait that must succeed is given two
/// minutes, so the machine's speed never decides a test (a hung job still
/// fails it, and the run's own limit, tools/check.sh, bounds the total).
/// Tests of the timeout itself use their own short deadlines.
pub(crate) const JOB_TIMEOUT_NS: i64 = 120_000_000_000;

/// [`JOB_TIMEOUT_NS`] from now, as WAIT's absolute deadline.
pub(crate) fn job_deadline() -> i64 {
    ane::device::monotonic_ns() + JOB_TIMEOUT_NS
}

const SKIP: &str = "SKIP";
const SKIP_RETENTION: &str = "SKIP-RETENTION";
const SKIP_FIRMWARE: &str = "SKIP-FIRMWARE";
/// A test that compares computed outputs, on the simulated T6021: its
/// firmware model executes no H14 program (`hw::fw::model`).
const SKIP_NO_H14_COMPUTE: &str = "SKIP-NO-H14-COMPUTE";

/// A synthetic program of the shape every program that ran on the T6021
/// firmware had (`hw::fw::program`): the six sections 1-5 and 7, each 64
/// bytes of `fill`, except the descriptor (3), a zero frame and one 8-word
/// task. Its bytes mean nothing to a real firmware and it is never run on
/// hardware: it only carries the transport tests through the simulated
/// one, which completes its calls and writes no output.
pub(crate) fn h14_synthetic(fill: u8) -> (Vec<u8>, Vec<uapi::Section>) {
    use ane::hw::fw::program::{task_word0, DESCRIPTOR, FRAME, SECTION_IDS};
    let mut bytes = Vec::new();
    let mut sections = Vec::new();
    for id in SECTION_IDS {
        let offset = bytes.len() as u64;
        if id == DESCRIPTOR {
            let mut d = vec![0u8; FRAME + 32];
            d[FRAME..FRAME + 4].copy_from_slice(&task_word0(8).to_le_bytes());
            bytes.extend_from_slice(&d);
        } else {
            bytes.extend_from_slice(&[fill; 64]);
        }
        sections.push(uapi::Section {
            id,
            flags: 0,
            offset,
            size: bytes.len() as u64 - offset,
        });
    }
    (bytes, sections)
}

/// [`h14_synthetic`] loaded through the library.
pub(crate) fn h14_load(d: &Device, fill: u8) -> ane::device::Result<ane::device::Program<'_>> {
    let (bytes, sections) = h14_synthetic(fill);
    let mut bo = d.bo_create(bytes.len() as u64)?;
    bo.map()?[..bytes.len()].copy_from_slice(&bytes);
    d.program_create_sections(&bo, 0, bytes.len() as u64, &sections)
}

/// [`h14_load`], its error as text.
fn h14_program(d: &Device, fill: u8) -> Result<ane::device::Program<'_>, String> {
    h14_load(d, fill).map_err(|e| e.to_string())
}

/// The elementwise add program: in the guest, from its HWX; on the
/// firmware backend (H14) a synthetic H14 program instead, since an H13
/// stream is never sent there.
fn sum_program(d: &Device) -> Result<ane::device::Program<'_>, String> {
    let hwx = fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    if is_h14(d) {
        return h14_program(d, 1);
    }
    d.load_hwx(&hwx).map_err(|e| e.to_string())
}

fn program_create_destroy(d: &Device) -> TestResult {
    let p = sum_program(d)?;
    let h = p.handle();
    drop(p);
    let mut a = uapi::ProgramDestroy { handle: h, pad: 0 };
    check!(
        errno(raw::program_destroy(d.fd(), &mut a)) == Some(Errno::NOENT),
        "destroyed twice"
    );
    Ok(())
}

/// PROGRAM_CREATE copies a program's bytes into its private copy with
/// the kernel's page copy where a page of the caller's BO lines up with a
/// page of the copy, and with `memcpy` for everything else. The same
/// program (a 256 → 256 linear layer: 128 KiB of weights over many pages)
/// created from offset 0 (the weights line up after their first partial
/// page), from one page in (line up, other pages) and from 48 bytes in
/// (nothing lines up: all `memcpy`, the staging read of the stream too)
/// must compute the same output bytes from the same input.
fn program_copy_alignments(d: &Device) -> TestResult {
    require_h13(d)?;
    let (batch, features) = (32usize, 256usize);
    let w: Vec<half::f16> = data(3, features * features);
    let p = ane::builder::linear_with(
        batch,
        features,
        features,
        &w,
        ane::builder::Activation::None,
    )
    .map_err(|e| e.to_string())?;
    let image = p.image();
    let len = image.len();
    let page = rustix::param::page_size();
    let mut outputs = Vec::new();
    for off in [0usize, page, 48] {
        let mut bo = d.bo_create((off + len) as u64).map_err(|e| e.to_string())?;
        bo.map().map_err(|e| e.to_string())?[off..off + len].copy_from_slice(&image);
        let prog = d
            .program_create(
                &bo,
                off as u64,
                len as u64,
                p.td_size,
                p.td_count,
                p.tsk_size(),
            )
            .map_err(|e| format!("offset {off}: {e}"))?;
        let (mut bos, bindings) = d.bind_program(&p).map_err(|e| e.to_string())?;
        for (i, (t, bo)) in p.tensors.iter().zip(bos.iter_mut()).enumerate() {
            let m = bo.map().map_err(|e| e.to_string())?;
            if t.direction == ane::builder::Direction::In {
                let v = data(i as u32 + 11, m.len() / 2);
                for (c, x) in m.chunks_exact_mut(2).zip(v) {
                    c.copy_from_slice(&x.to_le_bytes());
                }
            } else {
                m.fill(0xff);
            }
        }
        exec_done(
            d,
            &prog,
            &bindings,
            uapi::priority::NORMAL,
            &format!("offset {off}"),
        )?;
        let mut out = Vec::new();
        for (t, bo) in p.tensors.iter().zip(bos.iter_mut()) {
            if t.direction == ane::builder::Direction::Out {
                out.extend_from_slice(bo.map().map_err(|e| e.to_string())?);
            }
        }
        check!(
            out.iter().any(|b| *b != 0xff),
            "offset {off}: the output was never written"
        );
        outputs.push((off, out));
    }
    for (off, out) in &outputs[1..] {
        check!(
            *out == outputs[0].1,
            "created from offset {off}, the program computes other bytes than from offset 0"
        );
    }
    Ok(())
}

/// One EXEC of `prog` and its WAIT (up to 60 s), which must end DONE;
/// `what` names the run in the message.
fn exec_done(
    d: &Device,
    prog: &ane::device::Program<'_>,
    bindings: &[uapi::Binding],
    priority: u32,
    what: &str,
) -> TestResult {
    let id = d
        .exec(prog, bindings, priority)
        .map_err(|e| e.to_string())?;
    let st = d
        .wait(id, std::time::Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    check!(
        st == Some(ane::device::JobStatus::Done),
        "{what}: job ended {st:?}"
    );
    Ok(())
}

/// Deterministic finite fp16 test data.
fn data(seed: u32, n: usize) -> Vec<half::f16> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            half::f16::from_f32(((x % 20001) as f32 - 10000.0) / 97.0)
        })
        .collect()
}

/// The reference of one fixture: inputs (in tensor order) to outputs.
type Reference = fn(&[Vec<half::f16>], &[[u32; 4]]) -> Vec<half::f16>;
/// The same, as a closure.
type RefFn<'a> = &'a dyn Fn(&[Vec<half::f16>], &[[u32; 4]]) -> Vec<half::f16>;

fn conv_all(w: f32) -> impl Fn(&[Vec<half::f16>], &[[u32; 4]]) -> Vec<half::f16> {
    move |ins: &[Vec<half::f16>], dims: &[[u32; 4]]| {
        let [n, c, h, wd] = dims[0];
        let shape = ane::tensor::Shape::new(n as usize, c as usize, h as usize, wd as usize)
            .expect("shape");
        let weights = vec![half::f16::from_f32(w); (c * c) as usize];
        ane::reference::conv1x1(
            &ins[0],
            &shape,
            &weights,
            c as usize,
            None,
            ane::reference::Rounding::NearestEven,
        )
        .expect("conv")
        .1
    }
}

/// Runs compiled fixture `name` on the simulator with deterministic inputs
/// and compares every output element with `reference` (within `ulp`).
fn run_fixture(d: &Device, name: &str, ulp: u32, reference: RefFn<'_>) -> TestResult {
    run_fixture_at(d, name, ulp, reference, uapi::priority::NORMAL)
}

/// [`run_fixture`] at a given job priority.
fn run_fixture_at(
    d: &Device,
    name: &str,
    ulp: u32,
    reference: RefFn<'_>,
    priority: u32,
) -> TestResult {
    let hwx = fixture(name).ok_or(SKIP)?;
    let prog = d.load_hwx(&hwx).map_err(|e| e.to_string())?;
    let (mut bos, bindings) = d.bind_hwx(&hwx).map_err(|e| e.to_string())?;
    let mut inputs = Vec::new();
    let mut in_dims = Vec::new();
    let mut outputs = Vec::new();
    for (i, (t, bo)) in hwx.tensors().iter().zip(bos.iter_mut()).enumerate() {
        let m = bo.map().map_err(|e| e.to_string())?;
        let [n, c, h, w] = t.dims.map(u64::from);
        if t.direction == ane::hwx::Direction::Input {
            let v = data(i as u32 + 7, (n * c * h * w) as usize);
            put_nchw(m, t.dims, &t.strides, &v);
            inputs.push(v);
            in_dims.push(t.dims);
        } else {
            m.fill(0xff);
            outputs.push((i, t.dims, t.strides));
        }
    }
    exec_done(d, &prog, &bindings, priority, name)?;
    let want = reference(&inputs, &in_dims);
    let mut got = Vec::new();
    for (idx, dims, strides) in outputs {
        let m = bos[idx].map().map_err(|e| e.to_string())?;
        got.extend(get_nchw(m, dims, &strides));
    }
    let stats = ane::reference::compare(&want, &got, ulp).map_err(|e| e.to_string())?;
    check!(stats.passed(), "{name}: {stats:?}");
    println!(
        "     {name}: {} elements, max {} ulp, {} mismatches",
        stats.count, stats.max_ulp, stats.mismatches
    );
    Ok(())
}

fn fixtures_match_reference(d: &Device) -> TestResult {
    use ane::reference::{self as r, Rounding::NearestEven as Rne};
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    if is_h14(d) {
        return Err(SKIP_NO_H14_COMPUTE.into());
    }
    let add: Reference = |i, _| r::add(&i[0], &i[1], Rne).expect("add");
    let mul: Reference = |i, _| r::mul(&i[0], &i[1], Rne).expect("mul");
    let relu: Reference = |i, _| r::relu(&i[0]);
    let concat: Reference = |i, _| i.concat();
    for prio in [
        uapi::priority::LOW,
        uapi::priority::NORMAL,
        uapi::priority::HIGH,
    ] {
        run_fixture_at(d, "tinygrad_sum.hwx", 0, &add, prio)?;
    }
    run_fixture(d, "mul_zin541_macos12.hwx", 0, &mul)?;
    run_fixture(d, "mul_zin764_macos14.hwx", 0, &mul)?;
    run_fixture(d, "tinygrad_relu.hwx", 0, &relu)?;
    run_fixture(d, "tinygrad_concat.hwx", 0, &concat)?;
    // 1x1 convolutions with the compiled weights (all 2.0 / all 3.0):
    // accumulations, within 2 ulp.
    run_fixture(d, "tinygrad_conv.hwx", 2, &conv_all(2.0))?;
    run_fixture(d, "tinygrad_conv3_w3.hwx", 2, &conv_all(3.0))?;
    // 512 -> 512 inner product whose compiled weights are all zero.
    let zeros: Reference = |_, dims| vec![half::f16::ZERO; dims[0][1] as usize];
    run_fixture(d, "tinygrad_gemm.hwx", 0, &zeros)?;
    Ok(())
}

/// Submits one sum job on fresh buffers and waits for it.
fn run_sum(d: &Device) -> Result<ane::device::JobStatus, String> {
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let mut prog = uapi::ProgramDestroy {
        handle: r.prog,
        pad: 0,
    };
    let st = run_ready(d, &r)?.ok_or("job still pending after 20 s")?;
    let _ = raw::program_destroy(d.fd(), &mut prog);
    Ok(st)
}

/// The `key: value` lines of this process's fdinfo entry for `d`, read
/// as nvtop and qmassa read another process's: `/proc/PID/fdinfo/FD`.
fn fdinfo(d: &Device) -> Result<std::collections::HashMap<String, String>, String> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/{}/fdinfo/{}", std::process::id(), d.fd().as_raw_fd());
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect())
}

/// An fdinfo memory figure in bytes: a number and a unit of
/// Documentation/gpu/drm-usage-stats.rst (none, KiB, MiB, GiB).
fn fdinfo_bytes(
    info: &std::collections::HashMap<String, String>,
    key: &str,
) -> Result<u64, String> {
    let v = info.get(key).ok_or(format!("fdinfo has no {key}"))?;
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = num.parse().map_err(|_| format!("{key}: {v:?}"))?;
    let shift = match unit.trim() {
        "" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        u => return Err(format!("{key}: unit {u:?}")),
    };
    Ok(n << shift)
}

/// DRM fdinfo: the driver's name, the engine time of the file's jobs
/// (exactly the sum of what each WAIT reported between the push and the
/// end seen) and the memory of the BOs it holds, all resident.
fn fdinfo_reports_usage(_: &Device) -> TestResult {
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    // A file of its own: only this test's buffers and jobs are on it.
    let d = open()?;
    let info = fdinfo(&d)?;
    check!(
        info.get("drm-driver").map(String::as_str) == Some(uapi::DRIVER_NAME),
        "drm-driver: {:?}",
        info.get("drm-driver")
    );
    check!(info.contains_key("drm-client-id"), "no drm-client-id");
    check!(
        info.get("drm-engine-ane").map(String::as_str) == Some("0 ns"),
        "drm-engine-ane of a new file: {:?}",
        info.get("drm-engine-ane")
    );
    // Documentation/gpu/drm-usage-stats.rst: drm-total-, drm-shared- and
    // drm-resident-<region> (every BO is pinned, so resident; none is
    // shared: no dma-buf export); not the deprecated drm-memory-<region>
    // (amdgpu's alias), and no drm-engine-capacity- (one engine).
    check!(
        fdinfo_bytes(&info, "drm-shared-memory")? == 0,
        "drm-shared-memory of a new file: {:?}",
        info.get("drm-shared-memory")
    );
    let stray: Vec<&String> = info
        .keys()
        .filter(|k| k.starts_with("drm-memory-") || k.starts_with("drm-engine-capacity-"))
        .collect();
    check!(stray.is_empty(), "fdinfo keys the spec reserves: {stray:?}");
    let a = d
        .bo_create(3 << 20)
        .map_err(|e| format!("BO_CREATE: {e}"))?;
    let b = d
        .bo_create(64 << 10)
        .map_err(|e| format!("BO_CREATE: {e}"))?;
    let mut held = a.size() + b.size();
    let info = fdinfo(&d)?;
    for key in ["drm-total-memory", "drm-resident-memory"] {
        let got = fdinfo_bytes(&info, key)?;
        check!(got == held, "{key}: {got} bytes, the BOs hold {held}");
    }
    let r = ready(&d).map_err(|e| format!("setup: {e}"))?;
    held += r.bos.iter().map(|b| b.size()).sum::<u64>();
    // The guest's clock may be jiffies (1 ms): short jobs can start and
    // end on the same tick, so run until the WAITs report some busy time.
    let mut busy = 0u64;
    for i in 0..64 {
        if i >= 3 && busy > 0 {
            break;
        }
        let mut a = r.exec_args();
        raw::exec(d.fd(), &mut a).map_err(|e| format!("EXEC: {e}"))?;
        let (res, w) = wait_raw(&d, a.job_id);
        res.map_err(|e| format!("WAIT: {e}"))?;
        check!(
            w.status == uapi::job_status::DONE,
            "job {i}: status {}",
            w.status
        );
        busy += w.ended_ns - w.started_ns;
    }
    let info = fdinfo(&d)?;
    let engine = info.get("drm-engine-ane").cloned().unwrap_or_default();
    check!(
        busy > 0 && engine == format!("{busy} ns"),
        "drm-engine-ane: {engine:?}, the jobs' WAITs add up to {busy} ns"
    );
    // H14's program sections are buffers of their own.
    if !is_h14(&d) {
        for key in ["drm-total-memory", "drm-resident-memory"] {
            let got = fdinfo_bytes(&info, key)?;
            check!(
                got == held,
                "{key} with the job's buffers: {got}, held {held}"
            );
        }
    }
    let before = fdinfo_bytes(&info, "drm-total-memory")?;
    let size = a.size();
    drop(a);
    let got = fdinfo_bytes(&fdinfo(&d)?, "drm-total-memory")?;
    check!(
        got + size == before,
        "drm-total-memory after a {size}-byte BO was closed: {got}, was {before}"
    );
    drop(b);
    Ok(())
}

/// A raw WAIT for `job_id` until the guests' job deadline: its result and
/// the arguments as the kernel filled them in.
fn wait_raw(d: &Device, job_id: u64) -> (Result<(), Errno>, uapi::Wait) {
    let mut w = uapi::Wait {
        job_id,
        timeout_ns: job_deadline(),
        ..Default::default()
    };
    let res = raw::wait(d.fd(), &mut w);
    (res, w)
}

/// Like [`run_sum`], with the raw status and fault word of the WAIT.
fn run_sum_detail(d: &Device) -> Result<(u32, u64), String> {
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let mut a = r.exec_args();
    raw::exec(d.fd(), &mut a).map_err(|e| format!("EXEC: {e}"))?;
    let (res, w) = wait_raw(d, a.job_id);
    res.map_err(|e| format!("WAIT: {e}"))?;
    let mut prog = uapi::ProgramDestroy {
        handle: r.prog,
        pad: 0,
    };
    let _ = raw::program_destroy(d.fd(), &mut prog);
    Ok((w.status, w.fault))
}

fn inject(what: &str, n: u32) -> TestResult {
    std::fs::write(format!("{SIM_DEBUGFS}/{what}"), n.to_string())
        .map_err(|e| format!("{what}: {e}"))
}

fn job_after_autosuspend(d: &Device) -> TestResult {
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    // A running firmware keeps the device powered: it never suspends.
    require_h13(d)?;
    wait_suspended(d)?;
    // The engine lost its state while suspended; resume must restore it.
    let st = run_sum(d)?;
    check!(
        st == ane::device::JobStatus::Done,
        "job after resume: {st:?}"
    );
    Ok(())
}

/// Skips a test that needs the sum fixture and the simulator's fault
/// injection (absent on hardware).
fn require_fault_injection() -> TestResult {
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    if !std::path::Path::new(SIM_DEBUGFS).exists() {
        return Err(SKIP.into());
    }
    Ok(())
}

/// The byte offset of every element of a `dims` tensor with byte `strides`,
/// in (n, c, h, w) order.
fn nchw_offsets(dims: [u32; 4], strides: &[u64; 4]) -> impl Iterator<Item = usize> + '_ {
    let [n, c, h, w] = dims.map(u64::from);
    (0..n).flat_map(move |a| {
        (0..c).flat_map(move |b| {
            (0..h).flat_map(move |y| {
                (0..w).map(move |x| {
                    (a * strides[0] + b * strides[1] + y * strides[2] + x * strides[3]) as usize
                })
            })
        })
    })
}

/// Writes `v` (in (n, c, h, w) order) into the strided tensor in `m`.
pub(crate) fn put_nchw(m: &mut [u8], dims: [u32; 4], strides: &[u64; 4], v: &[half::f16]) {
    for (o, x) in nchw_offsets(dims, strides).zip(v) {
        m[o..o + 2].copy_from_slice(&x.to_bits().to_le_bytes());
    }
}

/// Reads the strided tensor in `m` in (n, c, h, w) order.
pub(crate) fn get_nchw(m: &[u8], dims: [u32; 4], strides: &[u64; 4]) -> Vec<half::f16> {
    nchw_offsets(dims, strides)
        .map(|o| half::f16::from_bits(u16::from_le_bytes([m[o], m[o + 1]])))
        .collect()
}

/// Whether the device runs the firmware backend (H14).
fn is_h14(d: &Device) -> bool {
    param_value(d, param::BACKEND).ok() == Some(uapi::backend::FIRMWARE)
}

/// Skips a test that only applies to the host-driven backend (H13).
fn require_h13(d: &Device) -> TestResult {
    if is_h14(d) {
        return Err(SKIP_FIRMWARE.into());
    }
    Ok(())
}

/// The SoC's recovery strategy.
fn recovery(d: &Device) -> Result<ane::hw::soc::Recovery, String> {
    let id = param_value(d, param::SOC_ID)?;
    let soc = ane::hw::soc::SocId::from_raw(id as u32).ok_or(format!("soc {id:#x}"))?;
    Ok(soc.info().recovery)
}

/// Skips a test whose injected fault would wedge a SoC that keeps the task
/// manager in retention (only a rebind recovers it; `--wedge` covers that).
fn require_in_place_recovery(d: &Device) -> TestResult {
    require_h13(d)?;
    require_fault_injection()?;
    if recovery(d)? != ane::hw::soc::Recovery::PowerCycle {
        return Err(SKIP_RETENTION.into());
    }
    Ok(())
}

fn param_value(d: &Device, p: u32) -> Result<u64, String> {
    let mut a = uapi::GetParam {
        param: p,
        pad: 0,
        value: 0,
    };
    raw::get_param(d.fd(), &mut a).map_err(|e| format!("GET_PARAM {p}: {e}"))?;
    Ok(a.value)
}

fn engine_state(d: &Device) -> Result<u64, String> {
    param_value(d, param::ENGINE_STATE)
}

/// EXEC of the sum program; the errno if it is refused.
fn exec_sum_errno(d: &Device) -> Result<Option<Errno>, String> {
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let mut a = r.exec_args();
    match raw::exec(d.fd(), &mut a) {
        Err(e) => Ok(Some(e)),
        Ok(()) => {
            d.wait(
                a.job_id,
                std::time::Duration::from_nanos(JOB_TIMEOUT_NS.unsigned_abs()),
            )
            .map_err(|e| e.to_string())?;
            Ok(None)
        }
    }
}

/// A sysfs power attribute of the device behind `d`.
fn power_attr(d: &Device, name: &str) -> String {
    format!(
        "/sys/class/accel/{}/device/power/{name}",
        d.path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("accel0")
    )
}

/// Runtime suspend forbidden (`power/control` = `on`) while it lives, and
/// allowed again (`auto`) when dropped. The containment tests hold one from
/// before the failing job until the refused EXEC: the suite's autosuspend
/// delay is 200 ms, and on a slow or loaded machine the device could
/// otherwise power-cycle between the failure and the EXEC, which cures the
/// engine and lets the EXEC run, so the test would hinge on the machine's
/// speed.
struct Awake(String);

impl Awake {
    fn hold(d: &Device) -> Result<Awake, String> {
        let path = power_attr(d, "control");
        std::fs::write(&path, "on").map_err(|e| format!("{path}: {e}"))?;
        Ok(Awake(path))
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.0, "auto") {
            eprintln!("{}: {e}", self.0);
        }
    }
}

/// Waits until the device runtime-suspends (the suite loads the module
/// with a short autosuspend delay).
fn wait_suspended(d: &Device) -> TestResult {
    let status = power_attr(d, "runtime_status");
    let mut state = String::new();
    // 30 s: the delay is 200 ms, but the guest may run on a slow machine.
    for _ in 0..300 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        state = std::fs::read_to_string(&status).map_err(|e| e.to_string())?;
        if state.trim() == "suspended" {
            return Ok(());
        }
    }
    Err(format!("device never autosuspended: {}", state.trim()))
}

/// After a failed job on T8103 (kernel-2 N8): the driver power-cycles the
/// device at once (the record's recovery: domains cycled, state checked,
/// drain, idle), so the engine is ready again and runs the next job while
/// `awake` still keeps the device from runtime-suspending: no client's
/// activity can postpone the recovery any more.
fn recovered_by_forced_power_cycle(d: &Device, awake: Awake) -> TestResult {
    let state = engine_state(d)?;
    check!(
        state == uapi::engine_state::READY,
        "engine state after the failed job's recovery: {state}"
    );
    let st = run_sum(d)?;
    check!(
        st == ane::device::JobStatus::Done,
        "job after the recovery, the device never runtime-suspended: {st:?}"
    );
    drop(awake);
    Ok(())
}

/// An engine error (the latches leave their healthy value and the job never
/// finishes): a timeout reporting the latch, then containment.
fn engine_error_times_out_with_latch(d: &Device) -> TestResult {
    require_in_place_recovery(d)?;
    let awake = Awake::hold(d)?;
    inject("error", 1)?;
    let (st, fault) = run_sum_detail(d)?;
    check!(st == uapi::job_status::TIMEOUT, "errored job ended {st}");
    check!(
        fault >> uapi::fault::KIND_SHIFT == uapi::fault::LATCH && fault as u32 != 0x2222_2222,
        "fault word {fault:#x}: no changed latch"
    );
    recovered_by_forced_power_cycle(d, awake)
}

/// A DART fault: FAULT with the DART's error word, no engine register read
/// after it (the simulator logs a LOCKUP otherwise, which fails the run),
/// nothing unmapped until the power cycle.
fn dart_fault_is_contained(d: &Device) -> TestResult {
    require_in_place_recovery(d)?;
    let awake = Awake::hold(d)?;
    inject("dart_fault", 1)?;
    let (st, fault) = run_sum_detail(d)?;
    check!(st == uapi::job_status::FAULT, "faulting job ended {st}");
    check!(
        fault >> uapi::fault::KIND_SHIFT == uapi::fault::DART && fault & (1 << 31) != 0,
        "fault word {fault:#x}: not a DART fault"
    );
    check!(
        sim_counter("lockups")? == 0,
        "an engine register was read after the fault"
    );
    recovered_by_forced_power_cycle(d, awake)
}

/// Line 1 never carries the finish word, or the idle bit never sets: the
/// job is not done (the record needs both lines and idle), so it times out.
fn missing_line_or_idle_times_out(d: &Device) -> TestResult {
    require_in_place_recovery(d)?;
    for what in ["drop_line1", "no_idle"] {
        let awake = Awake::hold(d)?;
        inject(what, 1)?;
        let st = run_sum(d)?;
        check!(
            st == ane::device::JobStatus::Timeout,
            "{what}: job ended {st:?}"
        );
        recovered_by_forced_power_cycle(d, awake).map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// A stale event of another network id at the head of both lines: popped,
/// ignored, and the job completes on its own finish words.
fn stale_event_ignored(d: &Device) -> TestResult {
    require_h13(d)?;
    require_fault_injection()?;
    inject("stale", 1)?;
    let st = run_sum(d)?;
    check!(
        st == ane::device::JobStatus::Done,
        "job with a stale event: {st:?}"
    );
    Ok(())
}

fn completion_by_interrupt(d: &Device) -> TestResult {
    require_h13(d)?;
    require_fault_injection()?;
    let want = std::env::var("ANE_EXPECT_IRQ").map_or(true, |v| v != "0");
    let features = param_value(d, param::FEATURES)?;
    check!(
        (features & uapi::feature::COMPLETION_IRQ != 0) == want,
        "features {features:#x}, completion interrupt expected: {want}"
    );
    let irqs = || -> Result<u64, String> {
        let s =
            std::fs::read_to_string(format!("{SIM_DEBUGFS}/irqs")).map_err(|e| e.to_string())?;
        s.trim().parse::<u64>().map_err(|e| e.to_string())
    };
    let before = irqs()?;
    let line_before = sim_counter("dart_line")?;
    let st = run_sum(d)?;
    check!(st == ane::device::JobStatus::Done, "job: {st:?}");
    let after = irqs()?;
    // The record: the event interrupt is raised (on the DART's line unless
    // the simulator routes it to the engine's).
    check!(
        sim_counter("dart_line")? > line_before,
        "the job raised no event interrupt"
    );
    if want {
        check!(
            after > before,
            "no interrupt claimed the job ({before} -> {after})"
        );
    } else {
        check!(
            after == before,
            "interrupts without a line ({before} -> {after})"
        );
    }
    Ok(())
}

/// kernel-2 N13: interrupts on the engine's line with no event behind them
/// (a shared or stuck line) are refused (`IRQ_NONE`, left to the interrupt
/// core's spurious-interrupt detector), never claimed; the job still
/// completes, by its own event interrupt or the safety poll.
fn spurious_interrupts_not_claimed(d: &Device) -> TestResult {
    require_h13(d)?;
    require_fault_injection()?;
    // Only with the opt-in completion interrupt (`ioctl_irq`).
    if param_value(d, param::FEATURES)? & uapi::feature::COMPLETION_IRQ == 0 {
        return Err(SKIP.into());
    }
    let (claimed, refused) = (sim_counter("irqs_spurious")?, sim_counter("irqs_none")?);
    // The job runs 30 ms: the worker waits about 1 ms at a time, and each
    // wait gives the simulator a chance to raise one spurious interrupt.
    inject("exec_delay_ms", 30)?;
    inject("spurious_irq", 10)?;
    let st = run_sum(d);
    let left = std::fs::read_to_string(format!("{SIM_DEBUGFS}/spurious_irq"));
    inject("spurious_irq", 0)?;
    inject("exec_delay_ms", 0)?;
    let st = st?;
    check!(st == ane::device::JobStatus::Done, "job: {st:?}");
    let claimed = sim_counter("irqs_spurious")? - claimed;
    let refused = sim_counter("irqs_none")? - refused;
    check!(
        claimed == 0,
        "the handler claimed {claimed} interrupt(s) with no event pending ({refused} refused)"
    );
    check!(
        refused > 0,
        "no spurious interrupt reached the handler (left: {left:?})"
    );
    Ok(())
}

/// `--suspend`: jobs are queued, the system goes through a sleep cycle
/// (`/sys/power/pm_test` = devices: the devices suspend and resume), and
/// every job ends DONE. The driver reports how many jobs it held queued
/// across the sleep; the cycle is repeated until that was at least one.
/// The simulator logs any engine access while powered down, which fails
/// the run.
fn suspend_while_queued() -> Result<usize, String> {
    let d = open()?;
    require_fault_injection()?;
    let r = ready(&d).map_err(|e| format!("setup: {e}"))?;
    let sys =
        |path: &str, v: &str| std::fs::write(path, v).map_err(|e| format!("{path} <- {v}: {e}"));
    // Each job takes 20 ms: 48 of them outlast the start of the sleep.
    inject("exec_delay_ms", 20)?;
    for attempt in 1..=5 {
        let mut ids = Vec::new();
        for _ in 0..48 {
            let mut a = r.exec_args();
            raw::exec(d.fd(), &mut a).map_err(|e| format!("EXEC: {e}"))?;
            ids.push(a.job_id);
        }
        sys("/sys/power/pm_test", "devices")?;
        let slept = sys("/sys/power/state", "freeze");
        sys("/sys/power/pm_test", "none")?;
        slept?;
        for id in ids {
            let st = d
                .wait(id, std::time::Duration::from_secs(20))
                .map_err(|e| e.to_string())?;
            check!(
                st == Some(ane::device::JobStatus::Done),
                "job {id} after the sleep: {st:?}"
            );
        }
        let log = std::process::Command::new("dmesg")
            .output()
            .map_err(|e| format!("dmesg: {e}"))?;
        let log = String::from_utf8_lossy(&log.stdout);
        let queued = log
            .lines()
            .filter_map(|l| l.split("system sleep: no job running, ").nth(1))
            .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
            .next_back()
            .ok_or("the driver did not report the sleep")?;
        println!("attempt {attempt}: {queued} job(s) were queued across the sleep");
        if queued > 0 {
            inject("exec_delay_ms", 0)?;
            return Ok(queued);
        }
    }
    Err("no job was ever queued across the sleep".into())
}

/// `--wedge hang|error`: on a SoC that keeps the task manager in retention,
/// the injected fault wedges the engine; EXEC is refused with EIO until the
/// device is bound again, and then jobs run.
fn wedge_and_rebind(what: &str) -> TestResult {
    // `-awake`: power/control=on from before the failure to after the
    // rebind, so the unbind comes before any runtime power cycle
    // (kernel-2 N7): the driver must prove the engine stopped itself
    // rather than leak the job's buffers and pin the module.
    let (what, awake) = match what.strip_suffix("-awake") {
        Some(w) => (w, true),
        None => (what, false),
    };
    let refcnt = || -> Result<u64, String> {
        let r = std::fs::read_to_string("/sys/module/ane/refcnt")
            .map_err(|e| format!("refcnt: {e}"))?;
        r.trim().parse().map_err(|e| format!("refcnt {r:?}: {e}"))
    };
    let d = open()?;
    let refs = refcnt()?;
    require_fault_injection()?;
    check!(
        recovery(&d)? == ane::hw::soc::Recovery::Rebind,
        "--wedge needs a retention SoC (sim_soc=0x6001)"
    );
    check!(
        engine_state(&d)? == uapi::engine_state::READY,
        "not ready at start"
    );
    // Held awake through the failure, so the one power cycle between the
    // push and the job's end is the recovery's own: the record's order
    // (OA-TM `ane_tm_recover`) starts with a forced cycle of every power
    // domain, which stops the failed job's DMA (issue 25 point 5).
    let hold = Awake::hold(&d)?;
    let downs = sim_counter("power_downs")?;
    inject(what, 1)?;
    let st = run_sum(&d)?;
    // Neither finishes: a timeout either way (the latches are no verdict).
    check!(
        st == ane::device::JobStatus::Timeout,
        "{what}: job ended {st:?}"
    );
    let cycles = sim_counter("power_downs")? - downs;
    check!(
        cycles == 1,
        "{what}: the recovery power-cycled the engine {cycles} times, want 1 (forced, before the drain)"
    );
    let hold = if awake {
        Some(hold)
    } else {
        drop(hold);
        None
    };
    let state = engine_state(&d)?;
    check!(
        state == uapi::engine_state::WEDGED_REBIND,
        "engine state after {what}: {state}"
    );
    let e = exec_sum_errno(&d)?;
    check!(e == Some(Errno::IO), "EXEC on a wedged engine: {e:?}");
    // A runtime power cycle does not help (retention): still wedged.
    if !awake {
        wait_suspended(&d)?;
        check!(
            engine_state(&d)? == uapi::engine_state::WEDGED_REBIND,
            "a power cycle cleared a retention wedge"
        );
    }
    let link = format!(
        "/sys/class/accel/{}/device",
        d.path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("accel0")
    );
    let pdev = std::fs::read_link(&link).map_err(|e| format!("{link}: {e}"))?;
    let name = pdev
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("platform device name")?
        .to_string();
    drop(d);
    let drv = "/sys/bus/platform/drivers/ane";
    std::fs::write(format!("{drv}/unbind"), &name).map_err(|e| format!("unbind: {e}"))?;
    std::fs::write(format!("{drv}/bind"), &name).map_err(|e| format!("bind: {e}"))?;
    drop(hold);
    let d = open()?;
    check!(
        engine_state(&d)? == uapi::engine_state::READY,
        "not ready after rebind"
    );
    let st = run_sum(&d)?;
    check!(
        st == ane::device::JobStatus::Done,
        "job after rebind: {st:?}"
    );
    // The module can still be unloaded: nothing pinned it.
    let now = refcnt()?;
    check!(
        now == refs,
        "module references with one file open: {refs} before, {now} after the rebind (pinned)"
    );
    Ok(())
}

/// `--fw-expect STATE STEP CAPTURE`: the H14 firmware state GET_PARAM
/// reports, and the driver's debugfs failure report: STATE one of
/// off/running/failed/quarantined, STEP the failed release step (1-based, 0
/// for none), CAPTURE `yes` (registers were captured: CPU_STATUS must show
/// the released core) or `no` (`capture none`).
fn fw_expect(
    state: Option<&String>,
    step: Option<&String>,
    capture: Option<&String>,
) -> Result<String, String> {
    let d = open()?;
    let names = ["none", "off", "running", "failed", "quarantined"];
    let got = param_value(&d, param::FW_STATE)?;
    let got_name = names.get(got as usize).copied().unwrap_or("?");
    let report = ane::system::fw_report(d.path())?;
    let (fail_step, caps) = (report.fail_step, report.capture);
    let line = format!("state {got_name}, step {fail_step}, captured {caps:x?}");
    if let Some(w) = state {
        check!(got_name == w, "{line}: want state {w}");
    }
    if let Some(w) = step {
        check!(fail_step.to_string() == *w, "{line}: want step {w}");
    }
    match capture.map(String::as_str) {
        Some("yes") => {
            check!(
                caps.len() == ane::system::FW_CAPTURE_COUNT,
                "{line}: want a capture"
            );
            // Index 8: CPU_STATUS; 0x28 once the core was released.
            check!(
                caps[8] == 0x28,
                "{line}: CPU_STATUS not that of a released core"
            );
        }
        Some("no") => check!(caps.is_empty(), "{line}: want no capture"),
        _ => {}
    }
    Ok(line)
}

/// One EXEC of the sum fixture on an H14 device (program loaded through
/// `load_hwx`, which uses sections there); the job's status, or the errno
/// if EXEC is refused.
fn h14_run_sum(
    d: &Device,
    program: &ane::device::Program<'_>,
) -> Result<Result<ane::device::JobStatus, Errno>, String> {
    let hwx = fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    let (_bos, bindings) = d.bind_hwx(&hwx).map_err(|e| e.to_string())?;
    let mut a = uapi::Exec {
        program: program.handle(),
        binding_count: bindings.len() as u32,
        bindings: bindings.as_ptr() as u64,
        binding_size: std::mem::size_of::<uapi::Binding>() as u32,
        ..Default::default()
    };
    if let Err(e) = raw::exec(d.fd(), &mut a) {
        return Ok(Err(e));
    }
    // The slow-call test's simulated firmware finishes after 120000 polls
    // and the driver counts its limit in polls too, so on a loaded TCG
    // host a call can take minutes of guest time: wait long enough that
    // only a lost completion (neither DONE nor TIMEOUT) fails here.
    let st = d
        .wait(a.job_id, std::time::Duration::from_secs(300))
        .map_err(|e| e.to_string())?
        .ok_or("job still pending after 300 s")?;
    Ok(Ok(st))
}

/// A malformed H14 section list: name, errno, how to break it.
type SectionCase = (
    &'static str,
    Errno,
    fn(&mut Vec<uapi::Section>, &mut uapi::ProgramCreate),
);

/// Raw PROGRAM_CREATE of `bytes` as `sections`, changed by `f`; a program
/// it creates is destroyed again.
fn h14_create_raw(
    d: &Device,
    bytes: &[u8],
    mut sections: Vec<uapi::Section>,
    f: impl FnOnce(&mut Vec<uapi::Section>, &mut uapi::ProgramCreate),
) -> Result<(), Errno> {
    let mut bo = d.bo_create(bytes.len() as u64).map_err(|_| Errno::IO)?;
    bo.map().map_err(|_| Errno::IO)?[..bytes.len()].copy_from_slice(bytes);
    let mut a = uapi::ProgramCreate {
        bo_handle: bo.handle(),
        offset: 0,
        size: bytes.len() as u64,
        section_size: std::mem::size_of::<uapi::Section>() as u32,
        ..Default::default()
    };
    f(&mut sections, &mut a);
    a.sections = sections.as_ptr() as u64;
    if a.section_count == 0 {
        a.section_count = sections.len() as u32;
    }
    raw::program_create(d.fd(), &mut a)?;
    let mut destroy = uapi::ProgramDestroy {
        handle: a.handle,
        pad: 0,
    };
    raw::program_destroy(d.fd(), &mut destroy)
}

/// PROGRAM_CREATE of the synthetic H14 program, changed by `f`.
fn h14_create_with(
    d: &Device,
    f: impl FnOnce(&mut Vec<uapi::Section>, &mut uapi::ProgramCreate),
) -> Result<(), Errno> {
    let (bytes, sections) = h14_synthetic(1);
    h14_create_raw(d, &bytes, sections, f)
}

/// Issue 25 point 3: an H13 task stream never reaches the T6021 firmware.
/// The library refuses it (naming `backend`), the kernel refuses it with
/// ENOEXEC however it is dressed (sections 1 and 2 as the library once
/// staged it; the six recorded ids with the stream as descriptor), the
/// firmware keeps running (nothing was sent), and a call of an H14 program
/// completes without the simulated firmware writing an output byte.
fn h14_refuses_h13_streams(d: &Device) -> TestResult {
    let hwx = fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    match d.load_hwx(&hwx) {
        Err(ane::device::Error::Invalid {
            field: "backend",
            reason,
            ..
        }) => check!(
            reason.contains("never sent to the T6021 firmware"),
            "library refusal without the reason: {reason}"
        ),
        Err(e) => {
            return Err(format!(
                "load_hwx of an H13 stream: {e} (want the backend refusal)"
            ))
        }
        Ok(_) => return Err("load_hwx of an H13 stream on the firmware backend: loaded".into()),
    }
    let stream = hwx.task_stream();
    let weights = hwx.weights();
    let woff = stream.len().div_ceil(16) * 16;
    let mut bytes = vec![0u8; woff + weights.len()];
    bytes[..stream.len()].copy_from_slice(stream);
    bytes[woff..].copy_from_slice(weights);
    let as_library = vec![
        uapi::Section {
            id: 1,
            flags: 0,
            offset: 0,
            size: stream.len() as u64,
        },
        uapi::Section {
            id: 2,
            flags: 0,
            offset: woff as u64,
            size: weights.len() as u64,
        },
    ];
    let r = h14_create_raw(d, &bytes, as_library, |_, _| {});
    check!(
        r == Err(Errno::NOEXEC),
        "H13 stream as sections 1+2: {r:?}, want ENOEXEC"
    );
    // The recorded ids, the H13 stream as the descriptor.
    let (mut syn, mut sections) = h14_synthetic(1);
    let at = syn.len() as u64;
    syn.extend_from_slice(stream);
    for s in sections
        .iter_mut()
        .filter(|s| s.id == ane::hw::fw::program::DESCRIPTOR)
    {
        s.offset = at;
        s.size = stream.len() as u64;
    }
    let r = h14_create_raw(d, &syn, sections, |_, _| {});
    check!(
        r == Err(Errno::NOEXEC),
        "H13 stream as the descriptor: {r:?}, want ENOEXEC"
    );
    let state = param_value(d, param::FW_STATE)?;
    check!(
        state == uapi::fw_state::RUNNING,
        "firmware state after the refusals: {state} (nothing may reach the firmware)"
    );
    // An H14 program's call completes and writes no output.
    let program = h14_program(d, 2)?;
    let (mut bos, bindings) = d.bind_hwx(&hwx).map_err(|e| e.to_string())?;
    for bo in bos.iter_mut() {
        bo.map().map_err(|e| e.to_string())?.fill(0x5a);
    }
    let id = d
        .exec(&program, &bindings, uapi::priority::NORMAL)
        .map_err(|e| e.to_string())?;
    let st = d
        .wait(id, std::time::Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    check!(st == Some(ane::device::JobStatus::Done), "H14 call: {st:?}");
    for (i, bo) in bos.iter_mut().enumerate() {
        let m = bo.map().map_err(|e| e.to_string())?;
        check!(
            m.iter().all(|&b| b == 0x5a),
            "buffer {i} changed: the simulated firmware computed something"
        );
    }
    Ok(())
}

/// `--h14`: the firmware path of the simulated T6021: compiled fixtures
/// loaded as sections run through PROGRAM_LOAD / PROC_CREATE / CALL and
/// match the CPU reference; the same program loads twice (digest cache);
/// malformed section lists are refused.
fn h14_suite() -> TestResult {
    let d = open()?;
    check!(
        param_value(&d, param::FW_STATE)? == uapi::fw_state::RUNNING,
        "firmware not running"
    );
    h14_refuses_h13_streams(&d)?;
    let p1 = sum_program(&d)?;
    let p2 = sum_program(&d)?;
    for p in [&p1, &p2] {
        let st = h14_run_sum(&d, p)?;
        check!(st == Ok(ane::device::JobStatus::Done), "sum: {st:?}");
    }
    let bad: [SectionCase; 8] = [
        ("td fields set", Errno::INVAL, |_, a| a.td_size = 0x274),
        ("no sections", Errno::INVAL, |s, _| s.clear()),
        ("section id 0", Errno::INVAL, |s, _| s[0].id = 0),
        ("section id 10", Errno::INVAL, |s, _| s[0].id = 10),
        ("duplicate id", Errno::INVAL, |s, _| {
            let dup = s[0];
            s.push(dup)
        }),
        ("section past the range", Errno::INVAL, |s, _| {
            if let Some(last) = s.last_mut() {
                last.size += 1
            }
        }),
        ("section flags", Errno::INVAL, |s, _| s[0].flags = 1),
        ("short section struct", Errno::INVAL, |_, a| {
            a.section_size = 8
        }),
    ];
    for (name, want, f) in bad {
        let got = h14_create_with(&d, f);
        check!(got == Err(want), "{name}: got {got:?}, want {want:?}");
    }
    Ok(())
}

/// `--h14-slow done|timeout`: one sum call on a firmware whose calls finish
/// late (`sim_fw_finish_delay`): within the device's call limit
/// (`fw_call_ms`) it must complete and the firmware keep running (a long
/// model is not a broken transport, kernel-2 N2); past it the job times
/// out and the firmware is quarantined (the record's rule).
fn h14_slow(want: &str) -> Result<String, String> {
    let d = open()?;
    let program = sum_program(&d)?;
    let t0 = std::time::Instant::now();
    // Meanwhile another reader asks for the firmware's failed step (the
    // debugfs report, which left the UAPI) over and over: no answer may
    // wait for the running call (kernel-2 N5, old 1.10). The longest
    // answer is compared with the call's length.
    let over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asker = {
        let over = over.clone();
        let node = d.path().to_owned();
        std::thread::spawn(move || -> Result<(f64, u32), String> {
            let (mut longest, mut n) = (0f64, 0u32);
            while !over.load(std::sync::atomic::Ordering::Acquire) {
                let t = std::time::Instant::now();
                ane::system::fw_report(&node)?;
                longest = longest.max(t.elapsed().as_secs_f64());
                n += 1;
            }
            Ok((longest, n))
        })
    };
    // And another client creates the program the call runs, which the
    // firmware has loaded already, over and over: found by its digest, it
    // must not wait for the running call either (old 1.10: the driver's
    // program table sat behind the firmware's transport lock).
    let creator = {
        let over = over.clone();
        std::thread::spawn(move || -> Result<(f64, u32), String> {
            let d = open()?;
            let (mut longest, mut n) = (0f64, 0u32);
            while !over.load(std::sync::atomic::Ordering::Acquire) {
                let t = std::time::Instant::now();
                let p = sum_program(&d)?;
                longest = longest.max(t.elapsed().as_secs_f64());
                drop(p);
                n += 1;
            }
            Ok((longest, n))
        })
    };
    let st = h14_run_sum(&d, &program);
    let secs = t0.elapsed().as_secs_f64();
    over.store(true, std::sync::atomic::Ordering::Release);
    let (asked, n) = asker.join().map_err(|_| "asker panicked")??;
    let created = creator.join().map_err(|_| "creator panicked")?;
    if want == "done" {
        // (After a call that timed out the firmware is quarantined and
        // refuses creation: only the call within its limit is judged.)
        let (longest, m) = created?;
        check!(
            m >= 3 && longest < secs * 0.75,
            "the longest of {m} PROGRAM_CREATEs of a loaded program took {longest:.2} s during a call of {secs:.2} s (it waited for the call: want 3 or more, each under 3/4 of the call)"
        );
    }
    let st = st?;
    // A read that waited for the call lasts about as long as the call
    // (the old driver: 29.85 s of a 36.34 s call) and leaves room for one
    // or two reads; one that does not keeps answering throughout. The
    // call's length follows the machine's speed (120000 simulated polls),
    // so the bound is relative, with room for a loaded sanitizer guest.
    let answered_apart = n >= 3 && asked < secs * 0.75;
    check!(
        answered_apart,
        "the longest of {n} reads of the firmware report took {asked:.2} s during a call of {secs:.2} s (it waited for the call: want 3 reads or more, each under 3/4 of the call)"
    );
    let fw = param_value(&d, param::FW_STATE)?;
    let line = format!("call {st:?} after {secs:.1} s, firmware state {fw}");
    match want {
        "done" => check!(
            st == Ok(ane::device::JobStatus::Done) && fw == uapi::fw_state::RUNNING,
            "{line}: want DONE and the firmware running"
        ),
        _ => check!(
            st == Ok(ane::device::JobStatus::Timeout) && fw == uapi::fw_state::QUARANTINED,
            "{line}: want TIMEOUT and the firmware quarantined"
        ),
    }
    Ok(format!("h14-slow: {line}"))
}

/// Loaded programs' section copies stay with the T6021 firmware until
/// reboot (it has no unload), so they must not be charged to any client
/// (issue 26 item 2, kernel-2 1.9). `free`: loading distinct programs
/// leaves the bytes a new client can allocate unchanged (run under small
/// caps). `full`: under a small `fw_program_mb`, new programs are loaded
/// until the range is full, which fails that PROGRAM_CREATE alone with
/// ENOSPC; the firmware keeps running, a program loaded before still
/// runs, and creating a loaded one again still succeeds.
fn h14_programs(mode: &str) -> Result<String, String> {
    let path = "/dev/accel/accel0";
    let d = open()?;
    if !is_h14(&d) {
        return Err(SKIP_FIRMWARE.into());
    }
    let sum = sum_program(&d)?;
    let errno = |r: &ane::device::Result<ane::device::Program<'_>>| match r {
        Err(ane::device::Error::Ioctl { source, .. }) => Some(*source),
        _ => None,
    };
    if mode == "free" {
        let before = crate::hostile::free_bytes(path)?;
        let mut kept = Vec::new();
        for fill in 0x60u8..0x78 {
            kept.push(h14_program(&d, fill)?);
        }
        let loaded = crate::hostile::free_bytes(path)?;
        drop(kept);
        let after = crate::hostile::free_bytes(path)?;
        check!(
            loaded == before && after == before,
            "bytes a new client can allocate: {before} before loading 24 programs, {loaded} with them loaded, {after} after their handles closed"
        );
        return Ok(format!(
            "24 programs loaded, {before} bytes allocatable to a new client before and after"
        ));
    }
    let mut n = 0u32;
    let mut full = None;
    for fill in 0x60u8..=0xff {
        let r = h14_load(&d, fill);
        if r.is_err() {
            full = Some((fill, errno(&r), r.err().map(|e| e.to_string())));
            break;
        }
        n += 1;
    }
    let Some((fill, e, text)) = full else {
        return Err(format!("{n} new programs loaded, the range never filled"));
    };
    check!(
        e == Some(Errno::NOSPC),
        "program {fill:#x} past the full range: {text:?} (want ENOSPC)"
    );
    let state = param_value(&d, param::FW_STATE)?;
    check!(
        state == uapi::fw_state::RUNNING,
        "firmware state after the refused load: {state}"
    );
    let st = h14_run_sum(&d, &sum)?;
    check!(
        st == Ok(ane::device::JobStatus::Done),
        "call of a program loaded before the range filled: {st:?}"
    );
    let again = h14_load(&d, 1);
    check!(
        again.is_ok(),
        "a loaded program created again with the range full: {:?}",
        again.err().map(|e| e.to_string())
    );
    Ok(format!(
        "{n} new programs filled the range, the next failed alone with ENOSPC; the firmware runs, a loaded program runs and can be created again"
    ))
}

/// `--h14-memory`: the firmware's own memory (its image, boot buffers and
/// SHAREDMALLOC grants) comes from a range and budget reserved at bind, not
/// from the clients' (kernel-2 N2): with the firmware running, new files
/// can allocate the whole device cap, and both caps fit the address window
/// clients share. Returns the bytes allocated.
fn h14_memory() -> Result<u64, String> {
    let d = open()?;
    if !is_h14(&d) {
        return Err(SKIP_FIRMWARE.into());
    }
    check!(
        param_value(&d, param::FW_STATE)? == uapi::fw_state::RUNNING,
        "firmware not running"
    );
    let q = d.query().map_err(|e| e.to_string())?;
    let client = param_value(&d, param::BO_CLIENT_MAX)?;
    let window = q.iova_end - q.iova_start;
    check!(
        q.bo_total_max <= window && client <= window,
        "caps {} (device) and {client} (file) bytes, but the window all H14 clients share is {window} bytes",
        q.bo_total_max
    );
    drop(d);
    if q.bo_total_max > 256 << 20 {
        // The default caps: more than the guest's memory to fill.
        return Ok(0);
    }
    let chunk = 1 << 20;
    let mut total = 0u64;
    let mut files = Vec::new();
    while total < q.bo_total_max && files.len() < 64 {
        let f = open()?;
        let mut got = 0;
        loop {
            let mut a = uapi::BoCreate {
                size: chunk,
                ..Default::default()
            };
            match raw::bo_create(f.fd(), &mut a) {
                Ok(()) => got += chunk,
                Err(Errno::NOSPC) => break,
                Err(e) => return Err(format!("BO_CREATE after {total} bytes: {e}")),
            }
        }
        files.push(f);
        total += got;
        if got == 0 {
            break;
        }
    }
    check!(
        total == q.bo_total_max,
        "new files could allocate {total} of the device cap's {} bytes with the firmware running: the firmware's memory is counted against the clients' cap",
        q.bo_total_max
    );
    drop(files);
    let d = open()?;
    check!(
        param_value(&d, param::FW_STATE)? == uapi::fw_state::RUNNING,
        "firmware not running after the clients filled the cap"
    );
    Ok(total)
}

/// `--h14-fault BITS`: a fault injected into the running firmware makes the
/// next call fail (FAULT or TIMEOUT), quarantines the firmware, and every
/// later EXEC and PROGRAM_CREATE is refused with EIO. The exception is an
/// error status (the model's `ERROR_STATUS`, 8): the firmware refused the
/// call in order, so the call fails alone, the firmware keeps running and,
/// once the fault is cleared, the next call computes.
///
/// The alternatives the module was loaded with (`sim_fw_faults`, the
/// model's `Faults::ALTERNATIVES` bits) stay in force. Under
/// SILENT_REFUSAL (512) a refused call gets no reply, so the error-status
/// case ends like every other fault: timeout, quarantine, EIO.
fn h14_fault(bits: &str) -> TestResult {
    let d = open()?;
    let program = sum_program(&d)?;
    let path = format!("{SIM_DEBUGFS}/fw_faults");
    let now: u32 = std::fs::read_to_string(&path)
        .map_err(|e| format!("fw_faults: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("fw_faults: {e}"))?;
    let alternatives = now & ane::hw::fw::model::Faults::ALTERNATIVES.bits();
    let silent = alternatives & ane::hw::fw::model::Faults::SILENT_REFUSAL.bits() != 0;
    let set = |v: &str| -> TestResult {
        let v: u32 = v.parse().map_err(|e| format!("fault bits {v}: {e}"))?;
        std::fs::write(&path, (v | alternatives).to_string()).map_err(|e| format!("fw_faults: {e}"))
    };
    set(bits)?;
    if bits == "2048" || bits == "4096" {
        // The firmware refuses a program at PROGRAM_LOAD (2048) or at
        // PROC_CREATE (4096) with a status, in order: only that
        // PROGRAM_CREATE fails (EINVAL) and the firmware keeps running for
        // everyone (kernel-2 N2). This synthetic H14 program was never
        // loaded in this boot of the firmware, so its load reaches it.
        let fill = if bits == "2048" { 0x50 } else { 0x51 };
        let r = h14_load(&d, fill).map(|p| p.handle());
        let errno = match &r {
            Err(ane::device::Error::Ioctl { source, .. }) => Some(*source),
            _ => None,
        };
        let state = param_value(&d, param::FW_STATE)?;
        check!(
            errno == Some(Errno::INVAL) && state == uapi::fw_state::RUNNING,
            "PROGRAM_CREATE the firmware refuses: {r:?}, then firmware state {state} (4 = quarantined until reboot)"
        );
        set("0")?;
        let st = h14_run_sum(&d, &program)?;
        check!(
            st == Ok(ane::device::JobStatus::Done),
            "a call after a refused program: {st:?}"
        );
        // The refused program loads once the firmware accepts it.
        let p = h14_load(&d, fill).map_err(|e| format!("the refused program, accepted: {e}"))?;
        drop(p);
        return Ok(());
    }
    if bits == "8" && !silent {
        let st = h14_run_sum(&d, &program)?;
        check!(
            matches!(st, Ok(ane::device::JobStatus::Fault(_))),
            "call refused with a status: {st:?}"
        );
        let state = param_value(&d, param::FW_STATE)?;
        check!(
            state == uapi::fw_state::RUNNING,
            "state after a refused call: {state} (the call must fail alone)"
        );
        // A refused call's buffers are not parked (kernel-2 N3): calls
        // that each bind a quarter of the device cap, refused in order,
        // hand every byte back, so eight of them fit under the cap.
        let q = d.query().map_err(|e| e.to_string())?;
        if q.bo_total_max <= 256 << 20 {
            let hwx = fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
            let chunk = q.bo_total_max / 4;
            for i in 0..8 {
                let (_bos, mut bindings) = d.bind_hwx(&hwx).map_err(|e| e.to_string())?;
                let big = d
                    .bo_create(chunk)
                    .map_err(|e| format!("refused call {i}: a {chunk}-byte buffer: {e}"))?;
                bindings.push(uapi::Binding {
                    bo_handle: big.handle(),
                    slot: 20,
                    flags: uapi::bind::IN,
                    offset: 0,
                    size: chunk,
                    ..Default::default()
                });
                let mut a = uapi::Exec {
                    program: program.handle(),
                    binding_count: bindings.len() as u32,
                    bindings: bindings.as_ptr() as u64,
                    binding_size: std::mem::size_of::<uapi::Binding>() as u32,
                    ..Default::default()
                };
                raw::exec(d.fd(), &mut a).map_err(|e| format!("refused call {i}: EXEC: {e}"))?;
                let st = d
                    .wait(a.job_id, std::time::Duration::from_secs(60))
                    .map_err(|e| e.to_string())?;
                check!(
                    matches!(st, Some(ane::device::JobStatus::Fault(_))),
                    "refused call {i}: {st:?}"
                );
            }
        }
        set("0")?;
        let st = h14_run_sum(&d, &program)?;
        check!(
            st == Ok(ane::device::JobStatus::Done),
            "the next call after a refused one: {st:?}"
        );
        return Ok(());
    }
    let st = h14_run_sum(&d, &program)?;
    check!(
        matches!(
            st,
            Ok(ane::device::JobStatus::Fault(_)) | Ok(ane::device::JobStatus::Timeout)
        ),
        "call under fault {bits}: {st:?}"
    );
    let state = param_value(&d, param::FW_STATE)?;
    check!(
        state == uapi::fw_state::QUARANTINED,
        "state after the failed call: {state}"
    );
    let st = h14_run_sum(&d, &program)?;
    check!(st == Err(Errno::IO), "EXEC after quarantine: {st:?}");
    let r = h14_create_with(&d, |_, _| {});
    check!(
        r == Err(Errno::IO),
        "PROGRAM_CREATE after quarantine: {r:?}"
    );
    Ok(())
}

fn injected_hang_recovers(d: &Device) -> TestResult {
    require_in_place_recovery(d)?;
    let awake = Awake::hold(d)?;
    inject("hang", 1)?;
    let st = run_sum(d)?;
    check!(
        st == ane::device::JobStatus::Timeout,
        "hung job ended {st:?}"
    );
    recovered_by_forced_power_cycle(d, awake)
}

/// `--hung-job MAX_MS`: a job the simulator hangs ends TIMEOUT, and the
/// WAIT that reports it returns within `MAX_MS` of the EXEC (the
/// `job_timeout_ms` parameter plus the recovery; kernel-2 U6).
fn hung_job_main(args: &[String]) -> ExitCode {
    let Some(max) = args.first().and_then(|a| a.parse::<u128>().ok()) else {
        eprintln!("usage: --hung-job MAX_MS");
        return ExitCode::from(2);
    };
    let result = (|| -> TestResult {
        let d = open()?;
        require_fault_injection()?;
        inject("hang", 1)?;
        let t0 = std::time::Instant::now();
        let st = run_sum(&d)?;
        let ms = t0.elapsed().as_millis();
        check!(st == ane::device::JobStatus::Timeout, "ended {st:?}");
        println!("hung job: TIMEOUT after {ms} ms");
        check!(ms <= max, "TIMEOUT after {ms} ms, want <= {max} ms");
        Ok(())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("hung job: {e}");
            ExitCode::from(1)
        }
    }
}

/// The uid the tenancy test's other user runs as.
const OTHER_UID: u32 = 1000;

/// Runs this binary with `args`, to become [`OTHER_UID`] itself
/// (`--open-errno`); the child, or why not.
fn as_other_user(args: &[&str]) -> Result<std::process::Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    std::process::Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn as uid {OTHER_UID}: {e}"))
}

/// `--open-errno NODE [hold]`: becomes [`OTHER_UID`], opens the node and
/// prints `open: ok` or `open: errno N`; with `hold`, keeps it open until
/// stdin closes.
fn open_errno_main(args: &[String]) -> ExitCode {
    let Some(path) = args.first() else {
        eprintln!("usage: --open-errno NODE [hold]");
        return ExitCode::from(2);
    };
    // The raw per-thread calls (this process has one thread): the C
    // library's setuid() needs more of the kernel than the test kernels
    // build (std's `Command::uid` got ENOSYS there).
    use rustix::thread::{set_thread_res_gid, set_thread_res_uid, Gid, Uid};
    let gid = Gid::from_raw(OTHER_UID);
    let uid = Uid::from_raw(OTHER_UID);
    if let Err(e) =
        set_thread_res_gid(gid, gid, gid).and_then(|()| set_thread_res_uid(uid, uid, uid))
    {
        println!("open: cannot become uid {OTHER_UID}: {e}");
        return ExitCode::from(1);
    }
    match Device::open(std::path::Path::new(path)) {
        Ok(d) => {
            println!("open: ok");
            if args.get(1).map(String::as_str) == Some("hold") {
                use std::io::{Read, Write};
                let _ = std::io::stdout().flush();
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
            }
            drop(d);
        }
        Err(e) => match e.errno() {
            Some(n) => println!("open: errno {}", n.raw_os_error()),
            None => println!("open: {e}"),
        },
    }
    ExitCode::SUCCESS
}

/// What another user's `--open-errno` printed.
fn other_user_open(path: &str) -> Result<String, String> {
    let out = as_other_user(&["--open-errno", path])?
        .wait_with_output()
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `--tenancy single|multi NODE` (kernel-2 1.12): on a T602x, whose
/// clients share one address space, another user's open is EBUSY while
/// this user has a file open and succeeds once it is closed (and then
/// holds off this user in turn); with `multi_user=1` both users' files
/// are open at once.
fn tenancy_main(args: &[String]) -> ExitCode {
    let (Some(mode), Some(path)) = (args.first(), args.get(1)) else {
        eprintln!("usage: --tenancy single|multi NODE");
        return ExitCode::from(2);
    };
    let result = (|| -> TestResult {
        let mine = Device::open(std::path::Path::new(path)).map_err(|e| e.to_string())?;
        let got = other_user_open(path)?;
        if mode == "multi" {
            check!(
                got == "open: ok",
                "multi_user=1, another user's open: {got}"
            );
            println!("tenancy: another user's open beside mine: ok");
            return Ok(());
        }
        let busy = format!("open: errno {}", Errno::BUSY.raw_os_error());
        check!(
            got == busy,
            "another user's open while mine is open: {got} (want EBUSY)"
        );
        drop(mine);
        // Now the other user holds it, and this user is refused.
        let mut other = as_other_user(&["--open-errno", path, "hold"])?;
        let mut line = String::new();
        {
            use std::io::BufRead;
            let out = other.stdout.as_mut().ok_or("no stdout")?;
            std::io::BufReader::new(out)
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
        }
        let refused = Device::open(std::path::Path::new(path));
        drop(other.stdin.take());
        let _ = other.wait();
        check!(
            line.trim() == "open: ok",
            "another user's open after mine closed: {}",
            line.trim()
        );
        match refused {
            Err(e) if e.errno() == Some(Errno::BUSY) => {}
            Err(e) => {
                return Err(format!(
                    "my open while another user's is open: {e} (want EBUSY)"
                ))
            }
            Ok(_) => return Err("my open while another user's is open succeeded".into()),
        }
        // Both closed: this user again.
        Device::open(std::path::Path::new(path))
            .map_err(|e| format!("my open after both closed: {e}"))?;
        println!("tenancy: one user at a time: ok");
        Ok(())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("tenancy: {e}");
            ExitCode::from(1)
        }
    }
}

fn extended_bindings_accepted(d: &Device) -> TestResult {
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    // A newer userspace's larger binding struct, extra bytes zero.
    exec_extended(d, 0).map_err(|e| format!("extended bindings refused: {e}"))
}

fn wait_deadline_passes_first(d: &Device) -> TestResult {
    require_in_place_recovery(d)?;
    let awake = Awake::hold(d)?;
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    inject("hang", 1)?;
    let mut a = r.exec_args();
    raw::exec(d.fd(), &mut a).map_err(|e| format!("EXEC: {e}"))?;
    // A deadline in the past while the job hangs: ETIME, job kept.
    let mut w = uapi::Wait {
        job_id: a.job_id,
        timeout_ns: ane::device::monotonic_ns() - 1,
        ..Default::default()
    };
    let r1 = raw::wait(d.fd(), &mut w);
    check!(r1 == Err(Errno::TIME), "past deadline: {r1:?}");
    // Then it ends (timeout) and can still be waited for.
    let st = d
        .wait(
            a.job_id,
            std::time::Duration::from_nanos(JOB_TIMEOUT_NS.unsigned_abs()),
        )
        .map_err(|e| e.to_string())?;
    check!(
        st == Some(ane::device::JobStatus::Timeout),
        "hung job ended {st:?}"
    );
    recovered_by_forced_power_cycle(d, awake)
}

/// The submitting thread runs a job on an idle engine: one that ends at
/// once (the simulator's program execution off) is done when EXEC returns;
/// one still running then goes to the worker, and a job submitted
/// meanwhile queues behind it; both end DONE.
fn idle_engine_runs_in_exec(d: &Device) -> TestResult {
    require_fault_injection()?;
    require_h13(d)?;
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let past = |id| uapi::Wait {
        job_id: id,
        timeout_ns: 0,
        ..Default::default()
    };
    inject("exec", 0)?;
    let mut a = r.exec_args();
    let ran = raw::exec(d.fd(), &mut a);
    let returned = ane::device::monotonic_ns();
    inject("exec", 1)?;
    ran.map_err(|e| format!("EXEC: {e}"))?;
    // Its end is stamped before EXEC returned (the submitting thread ended
    // it, not the worker), also when the idle bit reads late (simulator
    // alternative 32768): a wait with a deadline, not a race with the
    // worker (the end stamp is the kernel's CLOCK_MONOTONIC).
    let mut w = uapi::Wait {
        job_id: a.job_id,
        timeout_ns: returned + JOB_TIMEOUT_NS,
        ..Default::default()
    };
    let got = raw::wait(d.fd(), &mut w);
    check!(
        got.is_ok() && w.status == uapi::job_status::DONE,
        "a job that ended at its push: {got:?}, status {}",
        w.status
    );
    check!(
        w.ended_ns as i64 <= returned,
        "a job that ended at its push ended {} ns after EXEC returned (the worker ended it)",
        w.ended_ns as i64 - returned
    );
    check!(
        w.queued_ns <= w.started_ns && w.started_ns <= w.ended_ns,
        "stamps out of order: {} {} {}",
        w.queued_ns,
        w.started_ns,
        w.ended_ns
    );

    // 300 ms a job: still running when EXEC returns.
    inject("exec_delay_ms", 300)?;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut a = r.exec_args();
        let ran = raw::exec(d.fd(), &mut a);
        if let Err(e) = ran {
            inject("exec_delay_ms", 0)?;
            return Err(format!("EXEC: {e}"));
        }
        ids.push(a.job_id);
    }
    let mut w = past(ids[0]);
    let early = raw::wait(d.fd(), &mut w);
    let mut ends = Vec::new();
    for id in &ids {
        ends.push(d.wait(*id, std::time::Duration::from_secs(20)));
    }
    inject("exec_delay_ms", 0)?;
    check!(
        early == Err(Errno::TIME),
        "a 300 ms job, right after EXEC: {early:?}"
    );
    for (id, st) in ids.iter().zip(ends) {
        let st = st.map_err(|e| e.to_string())?;
        check!(st == Some(ane::device::JobStatus::Done), "job {id}: {st:?}");
    }
    chain_runs_in_exec(d, &r)
}

/// The chain half of [`idle_engine_runs_in_exec`]: a chain whose steps end
/// at their push runs whole in EXEC (every step DONE, its end stamped
/// before EXEC returned); a chain whose first step is still running after
/// the look goes to the worker, which runs the rest: every step DONE.
fn chain_runs_in_exec(d: &Device, r: &Ready<'_>) -> TestResult {
    let steps: Vec<(u32, &[uapi::Binding])> = vec![(r.prog, &r.bindings[..]); 3];
    inject("exec", 0)?;
    let ran = exec_chain_raw(d, &steps);
    let returned = ane::device::monotonic_ns();
    inject("exec", 1)?;
    let id = ran.map_err(|e| format!("chained EXEC: {e}"))?;
    let mut w = uapi::Wait {
        job_id: id,
        timeout_ns: returned + JOB_TIMEOUT_NS,
        ..Default::default()
    };
    let got = raw::wait(d.fd(), &mut w);
    check!(
        got.is_ok() && w.status == uapi::job_status::DONE && w.steps_done == 3,
        "a chain whose steps end at their push: {got:?}, status {}, steps_done {}",
        w.status,
        w.steps_done
    );
    check!(
        w.ended_ns as i64 <= returned,
        "a chain whose steps end at their push ended {} ns after EXEC returned (the worker ran it)",
        w.ended_ns as i64 - returned
    );
    inject("exec_delay_ms", 100)?;
    let ran = exec_chain_raw(d, &steps[..2]);
    let id = match ran {
        Ok(id) => id,
        Err(e) => {
            inject("exec_delay_ms", 0)?;
            return Err(format!("chained EXEC: {e}"));
        }
    };
    let mut early = uapi::Wait {
        job_id: id,
        timeout_ns: 0,
        ..Default::default()
    };
    let early = raw::wait(d.fd(), &mut early);
    let mut w = uapi::Wait {
        job_id: id,
        timeout_ns: ane::device::monotonic_ns() + 20_000_000_000,
        ..Default::default()
    };
    let got = raw::wait(d.fd(), &mut w);
    inject("exec_delay_ms", 0)?;
    check!(
        early == Err(Errno::TIME),
        "a chain of 100 ms steps, right after EXEC: {early:?}"
    );
    check!(
        got.is_ok() && w.status == uapi::job_status::DONE && w.steps_done == 2,
        "a chain handed to the worker: {got:?}, status {}, steps_done {}",
        w.status,
        w.steps_done
    );
    Ok(())
}

/// Runs the sum program once on `r` (opened on `d`); its status.
fn run_ready(d: &Device, r: &Ready<'_>) -> Result<Option<ane::device::JobStatus>, String> {
    let mut a = r.exec_args();
    raw::exec(d.fd(), &mut a).map_err(|e| format!("EXEC: {e}"))?;
    d.wait(a.job_id, std::time::Duration::from_secs(20))
        .map_err(|e| e.to_string())
}

/// `got`'s hidden layer and output equal `per_layer`'s bit for bit; the
/// message names `what` ran.
fn same_bits_as_per_layer(
    what: &str,
    got: &ane::mlp::MlpOutputs,
    per_layer: &ane::mlp::MlpOutputs,
) -> TestResult {
    let bits = |v: &[half::f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<u16>>();
    check!(
        bits(&got.hidden) == bits(&per_layer.hidden),
        "{what}'s hidden layer differs from the per-layer run"
    );
    check!(
        bits(&got.output) == bits(&per_layer.output),
        "{what}'s output differs from the per-layer run"
    );
    Ok(())
}

/// A chained EXEC gives what one EXEC per program gives: the two-layer MLP
/// (layer 2 reads the hidden buffer layer 1 wrote) run as one chain equals,
/// bit for bit, the same MLP run layer by layer, and passes the reference;
/// a chain of three sum steps reports all three DONE in one WAIT.
fn chain_equals_per_program(d: &Device) -> TestResult {
    use ane::mlp::{self, DeviceMlp, Mlp, MlpRunner, MlpShape};
    require_h13(d)?;
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    let mut rng = ane::parity::Rng::new(28);
    let net = Mlp::random(MlpShape::DEFAULT, &mut rng).map_err(|e| e.to_string())?;
    let x = net.input(&mut rng);
    let mut runner = DeviceMlp::load(d, &net).map_err(|e| e.to_string())?;
    runner.timeout = std::time::Duration::from_secs(20);
    let per_layer = runner.run(&x).map_err(|e| format!("per layer: {e}"))?;
    runner.chained = true;
    let chained = runner.run(&x).map_err(|e| format!("chained: {e}"))?;
    same_bits_as_per_layer("the chain", &chained, &per_layer)?;
    let graded = mlp::run_mlp(&net, &x, &mut runner);
    check!(
        graded.verdict != ane::parity::Verdict::Fail,
        "the chained MLP fails the reference: {:?}",
        graded.error
    );
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let steps: Vec<(u32, &[uapi::Binding])> = vec![(r.prog, &r.bindings[..]); 3];
    let id = exec_chain_raw(d, &steps).map_err(|e| format!("EXEC: {e}"))?;
    let (res, w) = wait_raw(d, id);
    res.map_err(|e| format!("WAIT: {e}"))?;
    check!(
        w.status == uapi::job_status::DONE && w.steps_done == 3,
        "chain of 3: status {} steps_done {}",
        w.status,
        w.steps_done
    );
    check!(
        w.started_ns != 0 && w.started_ns <= w.ended_ns,
        "chain times {w:?}"
    );
    Ok(())
}

/// A chain stops at its first step that is not DONE: the first of three
/// steps DART-faults (the simulator's injection), the chain reports that
/// step's FAULT with no step done, the two steps after it never run (their
/// buffers, filled with a canary, are untouched), and the engine recovers.
fn chain_stops_at_a_failed_step(d: &Device) -> TestResult {
    require_in_place_recovery(d)?;
    let awake = Awake::hold(d)?;
    let first = ready(d).map_err(|e| format!("setup: {e}"))?;
    let mut rest = ready(d).map_err(|e| format!("setup: {e}"))?;
    for bo in rest.bos.iter_mut() {
        bo.map().map_err(|e| e.to_string())?.fill(0xA5);
    }
    inject("dart_fault", 1)?;
    let steps: Vec<(u32, &[uapi::Binding])> = vec![
        (first.prog, &first.bindings[..]),
        (rest.prog, &rest.bindings[..]),
        (rest.prog, &rest.bindings[..]),
    ];
    let id = exec_chain_raw(d, &steps).map_err(|e| format!("EXEC: {e}"))?;
    let (res, w) = wait_raw(d, id);
    res.map_err(|e| format!("WAIT: {e}"))?;
    check!(
        w.status == uapi::job_status::FAULT && w.steps_done == 0,
        "chain whose first step faults: status {} steps_done {}",
        w.status,
        w.steps_done
    );
    check!(
        w.fault >> uapi::fault::KIND_SHIFT == uapi::fault::DART,
        "chain fault word {:#x}: not the failed step's DART fault",
        w.fault
    );
    for bo in rest.bos.iter_mut() {
        let m = bo.map().map_err(|e| e.to_string())?;
        check!(
            m.iter().all(|&b| b == 0xA5),
            "a step after the failed one ran (its buffers changed)"
        );
    }
    recovered_by_forced_power_cycle(d, awake)
}

/// One step of a chained EXEC: `program` on `bindings`.
fn exec_step(program: u32, bindings: &[uapi::Binding]) -> uapi::ExecStep {
    uapi::ExecStep {
        program,
        binding_count: bindings.len() as u32,
        bindings: bindings.as_ptr() as u64,
        binding_size: std::mem::size_of::<uapi::Binding>() as u32,
        pad: 0,
    }
}

/// A chained EXEC of `steps` (program handle, bindings); the job id.
fn exec_chain_raw(d: &Device, steps: &[(u32, &[uapi::Binding])]) -> Result<u64, Errno> {
    let raw_steps: Vec<uapi::ExecStep> = steps.iter().map(|(p, b)| exec_step(*p, b)).collect();
    let mut a = uapi::Exec {
        priority: uapi::priority::NORMAL,
        steps: raw_steps.as_ptr() as u64,
        step_count: raw_steps.len() as u32,
        step_size: std::mem::size_of::<uapi::ExecStep>() as u32,
        ..Default::default()
    };
    raw::exec(d.fd(), &mut a)?;
    Ok(a.job_id)
}

fn space_kept_between_a_clients_jobs(d: &Device) -> TestResult {
    require_fault_injection()?;
    require_h13(d)?;
    let done = Some(ane::device::JobStatus::Done);
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let before = sim_counter("attaches")?;
    for i in 0..3 {
        let st = run_ready(d, &r)?;
        check!(st == done, "job {i}: {st:?}");
    }
    let own = sim_counter("attaches")?.wrapping_sub(before);
    check!(own <= 1, "three jobs of one client: {own} attaches");
    check!(
        sim_counter("attached")? == 1,
        "the client's space was detached after its job"
    );
    {
        // Another client's job: its space replaces the first.
        let d2 = Device::open(d.path()).map_err(|e| e.to_string())?;
        let r2 = ready(&d2).map_err(|e| format!("setup: {e}"))?;
        let st = run_ready(&d2, &r2)?;
        check!(st == done, "the other client's job: {st:?}");
        let all = sim_counter("attaches")?.wrapping_sub(before);
        check!(
            all == own + 1,
            "another client's job: {all} attaches in all"
        );
    }
    // The engine is idle: its space goes before the power does.
    wait_suspended(d)?;
    check!(
        sim_counter("attached")? == 0,
        "an address space stayed attached across runtime suspend"
    );
    let st = run_ready(d, &r)?;
    check!(st == done, "job after resume: {st:?}");
    Ok(())
}

fn close_fd_with_pending_job(d: &Device) -> TestResult {
    require_in_place_recovery(d)?;
    {
        let d2 = Device::open(d.path()).map_err(|e| e.to_string())?;
        let r = ready(&d2).map_err(|e| format!("setup: {e}"))?;
        // The first job hangs, so the second is still queued at close.
        inject("hang", 1)?;
        for _ in 0..2 {
            let mut a = r.exec_args();
            raw::exec(d2.fd(), &mut a).map_err(|e| format!("EXEC: {e}"))?;
        }
        // Everything goes away with jobs in flight.
    }
    // If the worker had not reached them, the closed file's jobs were
    // dropped unrun and the injected hang is still armed: disarm it.
    inject("hang", 0)?;
    // If the worker reached the hung job, it times out (2 s) and the engine
    // refuses jobs, keeping the closed file's buffers, until the power
    // cycle; then the device works for others.
    for _ in 0..30 {
        if engine_state(d)? != uapi::engine_state::READY {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if engine_state(d)? != uapi::engine_state::READY {
        wait_suspended(d)?;
    }
    let st = run_sum(d)?;
    check!(
        st == ane::device::JobStatus::Done,
        "job after the close: {st:?}"
    );
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
    // The firmware diagnostics left the UAPI for debugfs: the numbers past
    // IDENT that once read them are no parameter.
    ("get_param: param = COUNT + 12", Errno::INVAL, |d| {
        get_param(d, param::COUNT + 12, 0)
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

/// A staged copy of the sum program in a BO, ready for PROGRAM_CREATE.
struct Staged<'d> {
    bo: ane::device::Bo<'d>,
    args: uapi::ProgramCreate,
}

fn staged(d: &Device) -> Result<Staged<'_>, Errno> {
    staged_from(d, "tinygrad_sum.hwx")
}

/// Fixture `name` staged for PROGRAM_CREATE: the task stream, then the
/// weights at round_up(tsk_size, 16).
fn staged_from<'d>(d: &'d Device, name: &str) -> Result<Staged<'d>, Errno> {
    let hwx = fixture(name).ok_or(Errno::NOSYS)?;
    let stream = hwx.task_stream();
    let tsk = stream.len() as u64;
    let weights_at = tsk.div_ceil(16) * 16;
    let size = weights_at + hwx.weights().len() as u64;
    let mut bo = d.bo_create(size.max(1)).map_err(|_| Errno::IO)?;
    {
        let m = bo.map().map_err(|_| Errno::IO)?;
        m[..stream.len()].copy_from_slice(stream);
        m[weights_at as usize..size as usize].copy_from_slice(hwx.weights());
    }
    let args = uapi::ProgramCreate {
        bo_handle: bo.handle(),
        offset: 0,
        size,
        td_size: hwx.td_size(),
        td_count: hwx.td_count(),
        tsk_size: tsk,
        ..Default::default()
    };
    Ok(Staged { bo, args })
}

/// PROGRAM_CREATE with `a`; a program it creates is destroyed again.
fn create_then_destroy(d: &Device, a: &mut uapi::ProgramCreate) -> Result<(), Errno> {
    let r = raw::program_create(d.fd(), a);
    if r.is_ok() {
        let mut x = uapi::ProgramDestroy {
            handle: a.handle,
            pad: 0,
        };
        let _ = raw::program_destroy(d.fd(), &mut x);
    }
    r
}

fn create_with(d: &Device, f: impl FnOnce(&mut uapi::ProgramCreate)) -> Result<(), Errno> {
    let s = staged(d)?;
    let mut a = s.args;
    f(&mut a);
    let r = create_then_destroy(d, &mut a);
    drop(s.bo);
    r
}

/// PROGRAM_CREATE of the convolution fixture with its weights cut to
/// `keep(needed)` bytes, where `needed` is how far its coefficient DMA
/// reads on slot 1 (kernel-2 N1: a read past the private copy would fault
/// the DART).
fn conv_weights_cut(d: &Device, keep: fn(u64) -> u64) -> Result<(), Errno> {
    let s = staged_from(d, "tinygrad_conv.hwx")?;
    let hwx = fixture("tinygrad_conv.hwx").ok_or(Errno::NOSYS)?;
    let summary = ane::hw::td::Program::new(hwx.task_stream(), hwx.td_size(), hwx.td_count())
        .and_then(|p| p.validate())
        .map_err(|_| Errno::IO)?;
    let needed = summary.slots[1].min_size;
    if needed == 0 {
        return Err(Errno::IO);
    }
    let mut a = s.args;
    a.size = a.tsk_size.div_ceil(16) * 16 + keep(needed);
    let r = create_then_destroy(d, &mut a);
    drop(s.bo);
    r
}

fn corrupt_stream(d: &Device, at: usize, val: u32) -> Result<(), Errno> {
    let mut s = staged(d)?;
    let m = s.bo.map().map_err(|_| Errno::IO)?;
    m[at..at + 4].copy_from_slice(&val.to_le_bytes());
    let mut a = s.args;
    raw::program_create(d.fd(), &mut a)
}

/// A created sum program with valid bindings, for EXEC rows.
struct Ready<'d> {
    prog: u32,
    bos: Vec<ane::device::Bo<'d>>,
    bindings: Vec<uapi::Binding>,
}

impl Ready<'_> {
    /// EXEC arguments running the program on these bindings.
    fn exec_args(&self) -> uapi::Exec {
        uapi::Exec {
            program: self.prog,
            binding_count: self.bindings.len() as u32,
            bindings: self.bindings.as_ptr() as u64,
            binding_size: std::mem::size_of::<uapi::Binding>() as u32,
            ..Default::default()
        }
    }
}

fn ready(d: &Device) -> Result<Ready<'_>, Errno> {
    if is_h14(d) {
        // The firmware backend takes a synthetic H14 program (an H13
        // stream is never sent there) with the sum fixture's bindings; the
        // handle lives until the file closes, like the raw H13 one below.
        let hwx = fixture("tinygrad_sum.hwx").ok_or(Errno::NOSYS)?;
        let program = h14_program(d, 1).map_err(|_| Errno::IO)?;
        let prog = program.handle();
        std::mem::forget(program);
        let (bos, bindings) = d.bind_hwx(&hwx).map_err(|_| Errno::IO)?;
        return Ok(Ready {
            prog,
            bos,
            bindings,
        });
    }
    let s = staged(d)?;
    let mut a = s.args;
    raw::program_create(d.fd(), &mut a)?;
    let hwx = fixture("tinygrad_sum.hwx").ok_or(Errno::NOSYS)?;
    let (bos, bindings) = d.bind_hwx(&hwx).map_err(|_| Errno::IO)?;
    Ok(Ready {
        prog: a.handle,
        bos,
        bindings,
    })
}

fn exec_with(
    d: &Device,
    f: impl FnOnce(&mut uapi::Exec, &mut Vec<uapi::Binding>, &Ready<'_>),
) -> Result<(), Errno> {
    let r = ready(d)?;
    let mut bindings = r.bindings.clone();
    let mut a = uapi::Exec {
        program: r.prog,
        priority: uapi::priority::NORMAL,
        binding_count: bindings.len() as u32,
        binding_size: std::mem::size_of::<uapi::Binding>() as u32,
        ..Default::default()
    };
    f(&mut a, &mut bindings, &r);
    if a.bindings == 0 {
        a.bindings = bindings.as_ptr() as u64;
    } else if a.bindings == 1 {
        a.bindings = 0; // the caller asked for NULL
    }
    let res = exec_reaped(d, &mut a);
    drop(r.bos);
    res
}

/// EXEC, and when it queued a job, the WAIT that reaps it (whatever its
/// end): the EXEC's result.
fn exec_reaped(d: &Device, a: &mut uapi::Exec) -> Result<(), Errno> {
    let res = raw::exec(d.fd(), a);
    if res.is_ok() {
        let _ = wait_raw(d, a.job_id);
    }
    res
}

/// `items` as a newer userspace would pass them: each element 8 bytes
/// larger than the kernel's struct, the first extra byte `tail`, the rest
/// zero. The bytes and the element size.
///
/// # Safety
///
/// `T` must be a plain `repr(C)` struct of integers without padding (the
/// UAPI structs), so that its bytes may be read.
unsafe fn widened<T>(items: &[T], tail: u8) -> (Vec<u8>, usize) {
    let size = std::mem::size_of::<T>();
    let elem = size + 8;
    let mut out = vec![0u8; elem * items.len()];
    for (i, item) in items.iter().enumerate() {
        // SAFETY: `item` is a live `T` of `size` bytes, all of them
        // initialised (the caller's guarantee).
        let bytes = unsafe { std::slice::from_raw_parts((item as *const T).cast::<u8>(), size) };
        out[i * elem..i * elem + size].copy_from_slice(bytes);
        out[i * elem + size] = tail;
    }
    (out, elem)
}

/// EXEC with bindings of `extra` bytes more than the kernel's struct, the
/// first extra byte set to `tail`.
fn exec_extended(d: &Device, tail: u8) -> Result<(), Errno> {
    let r = ready(d)?;
    // SAFETY: `Binding` is a plain `repr(C)` struct of integers.
    let (raw_bindings, elem) = unsafe { widened(&r.bindings, tail) };
    let mut a = uapi::Exec {
        program: r.prog,
        priority: uapi::priority::NORMAL,
        binding_count: r.bindings.len() as u32,
        bindings: raw_bindings.as_ptr() as u64,
        binding_size: elem as u32,
        ..Default::default()
    };
    raw::exec(d.fd(), &mut a)?;
    wait_raw(d, a.job_id).0
}

/// A chained EXEC of two steps, each the ready program on its bindings,
/// changed by `f` before the call; its job is waited for when it queued.
fn chain_with(
    d: &Device,
    f: impl FnOnce(&mut uapi::Exec, &mut Vec<uapi::ExecStep>, &mut Vec<uapi::Binding>),
) -> Result<(), Errno> {
    let r = ready(d)?;
    let mut bindings = r.bindings.clone();
    // `bindings` 0 until after `f`: these bindings, wherever they are then.
    let step = uapi::ExecStep {
        bindings: 0,
        ..exec_step(r.prog, &bindings)
    };
    let mut steps = vec![step; 2];
    let mut a = uapi::Exec {
        priority: uapi::priority::NORMAL,
        step_count: 2,
        step_size: std::mem::size_of::<uapi::ExecStep>() as u32,
        ..Default::default()
    };
    f(&mut a, &mut steps, &mut bindings);
    for st in steps.iter_mut() {
        // 0: these bindings; 1: the caller asked for NULL.
        st.bindings = match st.bindings {
            0 => bindings.as_ptr() as u64,
            1 => 0,
            other => other,
        };
    }
    // 0: these steps; 1: NULL.
    a.steps = match a.steps {
        0 => steps.as_ptr() as u64,
        1 => 0,
        other => other,
    };
    let res = exec_reaped(d, &mut a);
    drop(r.bos);
    res
}

/// A chained EXEC whose steps are `extra` bytes larger than the kernel's
/// struct, the first extra byte of each set to `tail`.
fn chain_extended(d: &Device, tail: u8) -> Result<(), Errno> {
    let r = ready(d)?;
    let step = exec_step(r.prog, &r.bindings);
    // SAFETY: `ExecStep` is a plain `repr(C)` struct of integers.
    let (raw_steps, elem) = unsafe { widened(&[step, step], tail) };
    let mut a = uapi::Exec {
        priority: uapi::priority::NORMAL,
        steps: raw_steps.as_ptr() as u64,
        step_count: 2,
        step_size: elem as u32,
        ..Default::default()
    };
    raw::exec(d.fd(), &mut a)?;
    let (res, w) = wait_raw(d, a.job_id);
    res?;
    drop(r.bos);
    if w.status == uapi::job_status::DONE && w.steps_done == 2 {
        Ok(())
    } else {
        Err(Errno::IO)
    }
}

fn slot_of(r: &Ready<'_>, output: bool) -> usize {
    r.bindings
        .iter()
        .position(|b| (b.flags == uapi::bind::OUT) == output)
        .unwrap_or(0)
}

/// Rows that need the sum fixture (skipped without it).
const PROGRAM_BAD_INPUTS: &[Case] = &[
    ("program_create: flags != 0", Errno::INVAL, |d| {
        create_with(d, |a| a.flags = 1)
    }),
    ("program_create: pad != 0", Errno::INVAL, |d| {
        create_with(d, |a| a.pad = 1)
    }),
    ("program_create: size 0", Errno::INVAL, |d| {
        create_with(d, |a| a.size = 0)
    }),
    ("program_create: tsk_size 0", Errno::INVAL, |d| {
        create_with(d, |a| a.tsk_size = 0)
    }),
    ("program_create: td_size 0", Errno::INVAL, |d| {
        create_with(d, |a| a.td_size = 0)
    }),
    ("program_create: td_count 0", Errno::INVAL, |d| {
        create_with(d, |a| a.td_count = 0)
    }),
    (
        "program_create: td_size not a multiple of 4",
        Errno::INVAL,
        |d| create_with(d, |a| a.td_size = 0x273),
    ),
    (
        "program_create: td_size beyond the maximum",
        Errno::INVAL,
        |d| create_with(d, |a| a.td_size = 0x10000),
    ),
    ("program_create: td_count u32::MAX", Errno::INVAL, |d| {
        create_with(d, |a| a.td_count = u32::MAX)
    }),
    ("program_create: tsk_size > size", Errno::INVAL, |d| {
        create_with(d, |a| a.tsk_size = a.size + 1)
    }),
    (
        "program_create: offset + size beyond the BO",
        Errno::INVAL,
        |d| create_with(d, |a| a.offset = 1 << 20),
    ),
    (
        "program_create: offset + size overflows",
        Errno::INVAL,
        |d| create_with(d, |a| a.offset = u64::MAX),
    ),
    (
        "program_create: size beyond the program maximum",
        Errno::TOOBIG,
        |d| create_with(d, |a| a.size = 1 << 40),
    ),
    ("program_create: unknown BO handle", Errno::NOENT, |d| {
        create_with(d, |a| a.bo_handle = 0xdead)
    }),
    ("program_create: sections on H13", Errno::INVAL, |d| {
        create_with(d, |a| a.section_count = 1)
    }),
    (
        "program_create: sections pointer on H13",
        Errno::INVAL,
        |d| create_with(d, |a| a.sections = 0x1000),
    ),
    ("program_create: section_size on H13", Errno::INVAL, |d| {
        create_with(d, |a| a.section_size = 24)
    }),
    (
        "program_create: td_count larger than the stream",
        Errno::INVAL,
        |d| create_with(d, |a| a.td_count = 2),
    ),
    (
        "program_create: weights one byte shorter than slot 1's reads",
        Errno::INVAL,
        |d| conv_weights_cut(d, |n| n - 1),
    ),
    (
        "program_create: no weights for a program that reads slot 1",
        Errno::INVAL,
        |d| conv_weights_cut(d, |_| 0),
    ),
    ("program_create: corrupt stream header", Errno::INVAL, |d| {
        corrupt_stream(d, 0x28, 0xffff_ffff)
    }),
    (
        "program_create: unknown register block",
        Errno::INVAL,
        |d| corrupt_stream(d, 0x124, 0x3c00_7000),
    ),
    ("program_destroy: unknown handle", Errno::NOENT, |d| {
        let mut a = uapi::ProgramDestroy {
            handle: 0xbeef,
            pad: 0,
        };
        raw::program_destroy(d.fd(), &mut a)
    }),
    ("program_destroy: pad != 0", Errno::INVAL, |d| {
        let mut a = uapi::ProgramDestroy { handle: 1, pad: 1 };
        raw::program_destroy(d.fd(), &mut a)
    }),
    ("exec: unknown program", Errno::NOENT, |d| {
        exec_with(d, |a, _, _| a.program = 0xbeef)
    }),
    ("exec: flags != 0", Errno::INVAL, |d| {
        exec_with(d, |a, _, _| a.flags = 1)
    }),
    ("exec: pad != 0", Errno::INVAL, |d| {
        exec_with(d, |a, _, _| a.pad = 1)
    }),
    ("exec: priority beyond HIGH", Errno::INVAL, |d| {
        exec_with(d, |a, _, _| a.priority = 3)
    }),
    ("exec: no bindings", Errno::INVAL, |d| {
        exec_with(d, |a, _, _| a.binding_count = 0)
    }),
    ("exec: 33 bindings", Errno::INVAL, |d| {
        exec_with(d, |a, _, _| a.binding_count = 33)
    }),
    (
        "exec: binding_size smaller than the struct",
        Errno::INVAL,
        |d| exec_with(d, |a, _, _| a.binding_size = 16),
    ),
    ("exec: binding_size huge", Errno::INVAL, |d| {
        exec_with(d, |a, _, _| a.binding_size = 1 << 20)
    }),
    ("exec: bindings pointer NULL", Errno::FAULT, |d| {
        exec_with(d, |a, _, _| a.bindings = 1)
    }),
    ("exec: bind slot 0 (command)", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].slot = 0)
    }),
    ("exec: bind slot 1 (weights)", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].slot = 1)
    }),
    ("exec: bind slot 32", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].slot = 32)
    }),
    ("exec: same slot twice", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[1].slot = b[0].slot)
    }),
    ("exec: binding flags 0", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].flags = 0)
    }),
    ("exec: unknown binding flag", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].flags |= 1 << 7)
    }),
    ("exec: binding pad != 0", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].pad = 1)
    }),
    ("exec: unknown BO handle", Errno::NOENT, |d| {
        exec_with(d, |_, b, _| b[0].bo_handle = 0xdead)
    }),
    ("exec: offset + size beyond the BO", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].offset = 1 << 20)
    }),
    ("exec: offset + size overflows", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].offset = u64::MAX - 63)
    }),
    ("exec: misaligned offset", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| {
            b[0].offset = 8;
            b[0].size -= 64;
        })
    }),
    (
        "exec: extended binding with a nonzero unknown byte",
        Errno::INVAL,
        |d| exec_extended(d, 1),
    ),
    ("exec: binding size 0", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].size = 0)
    }),
    (
        "exec: buffer smaller than the program needs",
        Errno::NOSPC,
        |d| exec_with(d, |_, b, _| b[0].size = 64),
    ),
    ("exec: a used slot left unbound", Errno::INVAL, |d| {
        exec_with(d, |a, b, _| {
            b.truncate(2);
            a.binding_count = 2;
        })
    }),
    ("exec: a slot the program does not use", Errno::INVAL, |d| {
        exec_with(d, |_, b, _| b[0].slot = 9)
    }),
    ("exec: output bound as input only", Errno::INVAL, |d| {
        exec_with(d, |_, b, r| {
            let i = slot_of(r, true);
            b[i].flags = uapi::bind::IN;
        })
    }),
    ("exec: input bound as output only", Errno::INVAL, |d| {
        exec_with(d, |_, b, r| {
            let i = slot_of(r, false);
            b[i].flags = uapi::bind::OUT;
        })
    }),
    // Chains: the step array and each step's fields.
    (
        "exec chain: step_count over MAX_CHAIN",
        Errno::TOOBIG,
        |d| chain_with(d, |a, _, _| a.step_count = uapi::MAX_CHAIN_STEPS + 1),
    ),
    ("exec chain: step_count u32::MAX", Errno::TOOBIG, |d| {
        chain_with(d, |a, _, _| a.step_count = u32::MAX)
    }),
    ("exec chain: step_size 0", Errno::INVAL, |d| {
        chain_with(d, |a, _, _| a.step_size = 0)
    }),
    (
        "exec chain: step_size smaller than the struct",
        Errno::INVAL,
        |d| chain_with(d, |a, _, _| a.step_size -= 1),
    ),
    ("exec chain: step_size huge", Errno::INVAL, |d| {
        chain_with(d, |a, _, _| a.step_size = 1 << 20)
    }),
    (
        "exec chain: extended step with a nonzero unknown byte",
        Errno::INVAL,
        |d| chain_extended(d, 1),
    ),
    ("exec chain: steps pointer NULL", Errno::FAULT, |d| {
        chain_with(d, |a, _, _| a.steps = 1)
    }),
    ("exec chain: program set beside steps", Errno::INVAL, |d| {
        chain_with(d, |a, s, _| a.program = s[0].program)
    }),
    (
        "exec chain: binding_count set beside steps",
        Errno::INVAL,
        |d| chain_with(d, |a, s, _| a.binding_count = s[0].binding_count),
    ),
    ("exec chain: bindings set beside steps", Errno::INVAL, |d| {
        chain_with(d, |a, _, b| a.bindings = b.as_ptr() as u64)
    }),
    (
        "exec chain: binding_size set beside steps",
        Errno::INVAL,
        |d| chain_with(d, |a, s, _| a.binding_size = s[0].binding_size),
    ),
    (
        "exec: steps pointer without step_count",
        Errno::INVAL,
        |d| {
            chain_with(d, |a, s, _| {
                a.step_count = 0;
                a.steps = s.as_ptr() as u64;
                a.step_size = 0;
            })
        },
    ),
    ("exec: step_size without step_count", Errno::INVAL, |d| {
        exec_with(d, |a, _, _| a.step_size = 24)
    }),
    ("exec chain: step pad != 0", Errno::INVAL, |d| {
        chain_with(d, |_, s, _| s[1].pad = 1)
    }),
    ("exec chain: unknown program in step 1", Errno::NOENT, |d| {
        chain_with(d, |_, s, _| s[1].program = 0xdead)
    }),
    ("exec chain: step binding_count 0", Errno::INVAL, |d| {
        chain_with(d, |_, s, _| s[1].binding_count = 0)
    }),
    ("exec chain: step bindings NULL", Errno::FAULT, |d| {
        chain_with(d, |_, s, _| s[1].bindings = 1)
    }),
    (
        "exec chain: step binding_size smaller than the struct",
        Errno::INVAL,
        |d| chain_with(d, |_, s, _| s[1].binding_size = 8),
    ),
    (
        "exec chain: step binding to an unknown BO",
        Errno::NOENT,
        |d| chain_with(d, |_, _, b| b[0].bo_handle = 0xdead),
    ),
    ("wait: unknown job", Errno::NOENT, |d| {
        let mut w = uapi::Wait {
            job_id: 1 << 40,
            timeout_ns: ane::device::monotonic_ns(),
            ..Default::default()
        };
        raw::wait(d.fd(), &mut w)
    }),
    ("wait: pad != 0", Errno::INVAL, |d| {
        let mut w = uapi::Wait {
            job_id: 1,
            pad: 1,
            ..Default::default()
        };
        raw::wait(d.fd(), &mut w)
    }),
    ("wait: pad2 != 0", Errno::INVAL, |d| {
        let mut w = uapi::Wait {
            job_id: 1,
            pad2: 1,
            ..Default::default()
        };
        raw::wait(d.fd(), &mut w)
    }),
    ("wait: a finished job twice", Errno::NOENT, |d| {
        let r = ready(d)?;
        let mut a = r.exec_args();
        raw::exec(d.fd(), &mut a)?;
        let (res, mut w) = wait_raw(d, a.job_id);
        res?;
        raw::wait(d.fd(), &mut w)
    }),
];

/// The exit of a mode that makes one check: `PASS <line>` and 0 when it
/// passed (`Ok(line)`), `FAIL <label>: <error>` and 1 when not.
fn verdict(r: Result<String, String>, label: &str) -> ExitCode {
    match r {
        Ok(line) => {
            println!("PASS {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("FAIL {label}: {e}");
            ExitCode::from(1)
        }
    }
}

/// A mode the suite runs in a child process, on the node at its path.
type ChildMode = fn(&str) -> TestResult;

/// Runs a child mode on the node at `path` (default accel0): exit 0 on
/// success, 1 with the reason on stderr otherwise.
fn run_child(child: ChildMode, path: Option<&str>) -> ExitCode {
    match child(path.unwrap_or("/dev/accel/accel0")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("child: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str);
    if mode == Some("--after-unbind") {
        let path = args
            .get(2)
            .map(String::as_str)
            .unwrap_or("/dev/accel/accel0");
        let flag = args.get(3).map(String::as_str).unwrap_or("/tmp/unbound");
        return match after_unbind(path, flag) {
            Ok(()) => {
                println!("after-unbind: ok");
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("after-unbind: {e}");
                ExitCode::from(1)
            }
        };
    }
    if mode == Some("--fences") {
        return fences::main();
    }
    if mode == Some("--tenancy") {
        return tenancy_main(&args[2..]);
    }
    if mode == Some("--open-errno") {
        return open_errno_main(&args[2..]);
    }
    if mode == Some("--hung-job") {
        return hung_job_main(&args[2..]);
    }
    if mode == Some("--memcg") {
        return memcg::main(&args[2..]);
    }
    if mode == Some("--fuzz") {
        return fuzz::parent_main(&args[2..]);
    }
    if mode == Some("--fail-nth") {
        return failnth::main(&args[2..]);
    }
    if mode == Some("--fuzz-regress") {
        return fuzz::regress_main(&args[2..]);
    }
    if mode == Some("--hostile") {
        return hostile::parent_main(&args[2..]);
    }
    if mode == Some("--hostile-child") {
        return hostile::child_main(&args[2..]);
    }
    if mode == Some("--fuzz-child") {
        return fuzz::child_main(&args[2..]);
    }
    if mode == Some("--write-fw-image") {
        let Some(path) = args.get(2) else {
            eprintln!("usage: --write-fw-image PATH");
            return ExitCode::from(2);
        };
        return match std::fs::write(path, fwimage::build()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{path}: {e}");
                ExitCode::from(1)
            }
        };
    }
    if mode == Some("--write-h14-synth") {
        // A synthetic H14 container of the add program's shape
        // (ane::h14::synth), for the doctor's T6021 job rung on the
        // simulator; never Apple's bytes, never for hardware.
        let Some(path) = args.get(2) else {
            eprintln!("usage: --write-h14-synth PATH");
            return ExitCode::from(2);
        };
        return match std::fs::write(path, ane::h14::synth::add()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{path}: {e}");
                ExitCode::from(1)
            }
        };
    }
    if mode == Some("--fw-expect") {
        let want = (args.get(2), args.get(3), args.get(4));
        let r = fw_expect(want.0, want.1, want.2).map(|line| format!("firmware: {line}"));
        return verdict(r, "firmware");
    }
    if mode == Some("--h14") {
        let r = h14_suite()
            .map(|()| "h14: fixtures through the firmware, digest cache, section checks".into());
        return verdict(r, "h14");
    }
    if mode == Some("--h14-slow") {
        let r = h14_slow(args.get(2).map(String::as_str).unwrap_or("done"));
        return verdict(r, "h14-slow");
    }
    if mode == Some("--h14-programs") {
        let r = h14_programs(args.get(2).map(String::as_str).unwrap_or("free"))
            .map(|l| format!("h14 programs: {l}"));
        return verdict(r, "h14-programs");
    }
    if mode == Some("--h14-memory") {
        let r = h14_memory().map(|n| {
            format!("h14: the clients' caps fit their window; {n} bytes allocatable with the firmware running, its memory outside them")
        });
        return verdict(r, "h14-memory");
    }
    if mode == Some("--h14-fault") {
        let bits = args.get(2).map(String::as_str).unwrap_or("8");
        let r = h14_fault(bits).map(|()| match bits {
            "2048" | "4096" => format!(
                "h14 fault {bits}: the refused program failed alone (EINVAL), the firmware kept running"
            ),
            "8" => format!("h14 fault {bits}: the refused call failed alone, the firmware kept running"),
            _ => format!("h14 fault {bits}: call failed, quarantined, EIO after"),
        });
        return verdict(r, &format!("h14 fault {bits}"));
    }
    if mode == Some("--suspend") {
        let r = suspend_while_queued()
            .map(|n| format!("system sleep with {n} job(s) queued: all done after resume"));
        return verdict(r, "suspend while queued");
    }
    if mode == Some("--wedge") {
        let what = args.get(2).map(String::as_str).unwrap_or("hang");
        let r = wedge_and_rebind(what).map(|()| format!("wedge ({what}) -> EIO, rebind recovers"));
        return verdict(r, &format!("wedge ({what})"));
    }
    let children: [(&str, ChildMode); 2] = [
        ("--child-priority", child_priority),
        ("--child-bo-traffic", child_bo_traffic),
    ];
    if let Some((_, child)) = children.iter().find(|(m, _)| mode == Some(*m)) {
        return run_child(*child, args.get(2).map(String::as_str));
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
        ("fdinfo reports usage", fdinfo_reports_usage),
        (
            "an out-fence reports the job's end",
            fences::out_fence_reports_the_end,
        ),
        (
            "an in-fence holds the job until it signals",
            fences::in_fence_holds_the_job,
        ),
        (
            "EXECs linked only by a fence compute the MLP",
            fences::fences_link_an_mlp,
        ),
        (
            "a syncobj wait, then WAIT collects without sleeping",
            fences::syncobj_wait_then_collect,
        ),
        (
            "closing a file signals its pending fences",
            fences::close_with_pending_fences,
        ),
        (
            "a chain equals one EXEC per program",
            chain_equals_per_program,
        ),
        (
            "a chain stops at a failed step",
            chain_stops_at_a_failed_step,
        ),
        ("GEM_CLOSE while mmapped", gem_close_while_mapped),
        ("another fd's handle is unusable", other_fd_handle_unusable),
        ("close fd with live BOs", close_fd_with_live_bos),
        ("two processes at once", two_processes),
        (
            "HIGH priority needs CAP_SYS_NICE",
            high_priority_needs_privilege,
        ),
        ("device and per-file BO caps", device_total_cap),
        ("program create/destroy", program_create_destroy),
        (
            "a program copied at any alignment computes the same",
            program_copy_alignments,
        ),
        (
            "compiled fixtures match the CPU reference",
            fixtures_match_reference,
        ),
        (
            "job after autosuspend (engine state restored)",
            job_after_autosuspend,
        ),
        (
            "injected hang: timeout, recovered at once by a forced power cycle, next job runs",
            injected_hang_recovers,
        ),
        (
            "engine error: timeout with the changed latch, contained",
            engine_error_times_out_with_latch,
        ),
        (
            "DART fault: fault word, no engine read after it, contained",
            dart_fault_is_contained,
        ),
        (
            "missing line-1 finish word or idle bit: timeout",
            missing_line_or_idle_times_out,
        ),
        ("stale event of another job: ignored", stale_event_ignored),
        (
            "completion by interrupt or polling",
            completion_by_interrupt,
        ),
        (
            "spurious interrupts are refused, not claimed",
            spurious_interrupts_not_claimed,
        ),
        (
            "an idle engine runs the job in EXEC; a running one goes to the worker",
            idle_engine_runs_in_exec,
        ),
        (
            "a client's address space stays attached between its jobs",
            space_kept_between_a_clients_jobs,
        ),
        ("close fd with a job pending", close_fd_with_pending_job),
        (
            "extended binding structs accepted",
            extended_bindings_accepted,
        ),
        (
            "wait: deadline passes before the job ends",
            wait_deadline_passes_first,
        ),
    ];
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (name, t) in tests {
        match t(&dev) {
            Ok(()) => {
                println!("PASS {name}");
                passed += 1;
            }
            Err(e) if e == SKIP => {
                println!("SKIP {name}: no fixtures (ANE_FIXTURES)");
                skipped += 1;
            }
            Err(e) if e == SKIP_FIRMWARE => {
                println!(
                    "SKIP {name}: H13 task-manager test; the firmware backend's faults are covered by --h14-fault"
                );
                skipped += 1;
            }
            Err(e) if e == SKIP_NO_H14_COMPUTE => {
                println!(
                    "SKIP {name}: the simulated T6021 firmware executes no H14 program (outputs untouched); compute is tested on H13"
                );
                skipped += 1;
            }
            Err(e) if e == SKIP_RETENTION => {
                println!(
                    "SKIP {name}: this SoC keeps the task manager in retention; a fault wedges it until rebind (--wedge)"
                );
                skipped += 1;
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
    let have_fixtures = fixture("tinygrad_sum.hwx").is_some();
    let h14 = is_h14(&dev);
    // Rows about H13 TD streams and the slot usage the kernel derives from
    // them; on H14 the firmware validates programs (--h14 checks the
    // section list), the rest of EXEC's rules are the same.
    let h13_only = |name: &str| {
        name.starts_with("program_create:")
            || [
                "exec: buffer smaller than the program needs",
                "exec: a used slot left unbound",
                "exec: a slot the program does not use",
                "exec: output bound as input only",
                "exec: input bound as output only",
            ]
            .contains(&name)
    };
    for (name, want, f) in PROGRAM_BAD_INPUTS.iter().chain(fences::FENCE_BAD_INPUTS) {
        if h14 && h13_only(name) {
            println!("SKIP bad input: {name}: H13 program rules");
            skipped += 1;
            continue;
        }
        if !have_fixtures {
            println!("SKIP bad input: {name}: no fixtures");
            skipped += 1;
            continue;
        }
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
    println!(
        "bad-input table: {} rows",
        BAD_INPUTS.len() + PROGRAM_BAD_INPUTS.len() + fences::FENCE_BAD_INPUTS.len()
    );
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
