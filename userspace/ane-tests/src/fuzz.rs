// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-fuzz`: a structure-aware ioctl fuzzer of the accel node.
//!
//! `ane-ioctl-tests --fuzz SEED CALLS` forks [`PROCS`] children of this
//! binary (`--fuzz-child SEED' CALLS' INDEX`, each with a seed derived from
//! SEED and printed, so one child replays alone), waits for them, then
//! checks that the device still computes: its canary BOs are unchanged and
//! a known-good job (the sum fixture) matches the CPU reference.
//!
//! Each child keeps a pool of live handles (BOs with their mappings,
//! programs, pending jobs) on its own file and a second, "foreign" file,
//! and mixes valid calls, mutated valid calls (flipped fields, boundary
//! sizes, stale, foreign and freed-then-reused handles, program bytes
//! mutated from real compiled programs, GEM_CLOSE / munmap / close of the
//! file against pending jobs) and random ones (a random command number of
//! the driver's range with random bytes). Every call is counted by ioctl
//! and outcome; an outcome outside the documented set of its ioctl (see
//! [`allowed`]), a success where the call had to fail, a child killed by a
//! signal or a changed canary fails the run.
//!
//! With `ANE_FUZZ_INJECT=1` (issue 17, point 3) every fuzzed ioctl and
//! mmap of the node runs with fault injection armed for this process
//! only ([`fi`]); ENOMEM is then an allowed outcome of every call.

use std::collections::BTreeMap;
use std::process::ExitCode;

use ane::device::{raw, Device};
use ane::hw::uapi::{self, param};
use rustix::io::Errno;

/// Processes fuzzing at once.
pub const PROCS: u64 = 4;

/// The fuzzed calls, with fault injection armed around each when
/// `ANE_FUZZ_INJECT` is set: `/proc/self/make-it-fail` is 1 for the
/// duration of the syscall only, so the kernel's failslab (configured with
/// `task-filter` by tools/qemu/tests/fuzz_inject.sh) fails slab
/// allocations made on that call's behalf, in the driver's ioctl and mmap
/// paths and the DRM core beneath them, and nowhere else: not the
/// fuzzer's own memory, the job worker, the setup, the canaries or the
/// checks after the run. The children are separate processes, so each
/// opens its own file.
mod fi {
    use std::cell::RefCell;
    use std::fs::File;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::sync::OnceLock;

    use ane::device::{raw, Device};
    use ane::hw::uapi;
    use rustix::io::Errno;

    /// Which calls inject: `ANE_FUZZ_INJECT=1` all of them, or a comma
    /// list of names (`exec,mmap,...`: the raw ioctl names, `mmap`,
    /// `random`) to find which call a failure comes from.
    fn which() -> &'static Option<Vec<String>> {
        static ON: OnceLock<Option<Vec<String>>> = OnceLock::new();
        ON.get_or_init(|| {
            let v = std::env::var("ANE_FUZZ_INJECT").ok()?;
            match v.as_str() {
                "" | "0" => None,
                "1" => Some(Vec::new()),
                list => Some(list.split(',').map(str::to_owned).collect()),
            }
        })
    }

    /// Whether this run injects.
    pub fn enabled() -> bool {
        which().is_some()
    }

    /// Whether calls named `name` inject.
    fn enabled_for(name: &str) -> bool {
        which()
            .as_ref()
            .is_some_and(|l| l.is_empty() || l.iter().any(|n| n == name))
    }

    thread_local! {
        static KNOB: RefCell<Option<File>> = const { RefCell::new(None) };
    }

    /// Opens this process's knob; an error names it (the sanitizer
    /// kernel's `CONFIG_FAULT_INJECTION` provides it).
    pub fn init() -> Result<(), String> {
        if !enabled() {
            return Ok(());
        }
        let f = File::options()
            .write(true)
            .open("/proc/self/make-it-fail")
            .map_err(|e| format!("ANE_FUZZ_INJECT: /proc/self/make-it-fail: {e}"))?;
        KNOB.with(|k| *k.borrow_mut() = Some(f));
        Ok(())
    }

    fn set(on: bool) {
        KNOB.with(|k| {
            if let Some(f) = k.borrow_mut().as_mut() {
                // A failed write leaves injection as it was: the counts
                // show whether any ENOMEM was injected at all.
                let _ = f.write_all(if on { b"1" } else { b"0" });
            }
        })
    }

    /// Runs `f`, a call named `name`, with injection armed (when enabled
    /// for it).
    pub fn armed<T>(name: &str, f: impl FnOnce() -> T) -> T {
        if !enabled_for(name) {
            return f();
        }
        set(true);
        let r = f();
        set(false);
        r
    }

    macro_rules! wrap {
        ($($name:ident: $t:ty),* $(,)?) => {$(
            /// The raw ioctl of the same name, armed.
            pub fn $name(fd: impl AsFd, arg: &mut $t) -> Result<(), Errno> {
                armed(stringify!($name), || raw::$name(fd, arg))
            }
        )*};
    }
    wrap!(
        gem_close: raw::GemClose,
        get_param: uapi::GetParam,
        bo_create: uapi::BoCreate,
        bo_info: uapi::BoInfo,
        program_create: uapi::ProgramCreate,
        program_destroy: uapi::ProgramDestroy,
        exec: uapi::Exec,
        wait: uapi::Wait,
    );

    /// [`super::mmap_bo`], armed.
    pub fn mmap_bo(d: &Device, offset: u64, len: usize) -> Result<*mut u8, Errno> {
        armed("mmap", || super::mmap_bo(d, offset, len))
    }
}
/// Canary BOs per process (and in the parent).
const CANARIES: usize = 3;
/// Cap on live BOs of the pool (beyond it, creating one closes one).
const MAX_BOS: usize = 48;
/// Cap on live programs of the pool.
const MAX_PROGS: usize = 8;
/// H14: mutated programs one process may have the firmware load. The
/// firmware never frees a program (256 per boot, the driver stops at 250:
/// `docs/hardware-record.md`), so every distinct mutated program that loads
/// uses a slot until reboot; four processes at this budget leave room for
/// the checks after the run and the other suites.
const H14_MUTATED_LOADS: u32 = 40;
/// Cap on mappings kept after their handle was closed.
const MAX_ORPHANS: usize = 8;
/// Cap on jobs in flight (the kernel's own cap is larger).
const MAX_JOBS: usize = 12;

/// A small deterministic PRNG (splitmix64): the whole run follows from
/// the seed.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        if v.is_empty() {
            None
        } else {
            v.get(self.below(v.len() as u64) as usize)
        }
    }
}

/// The seed of child `index` of a run seeded `seed`.
pub fn child_seed(seed: u64, index: u64) -> u64 {
    Rng::new(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03)).next()
}

/// The short name of an errno, as the counts print it.
pub fn errno_name(e: Errno) -> String {
    let n = e.raw_os_error();
    let name = match n {
        1 => "EPERM",
        2 => "ENOENT",
        4 => "EINTR",
        5 => "EIO",
        6 => "ENXIO",
        7 => "E2BIG",
        9 => "EBADF",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        19 => "ENODEV",
        22 => "EINVAL",
        25 => "ENOTTY",
        28 => "ENOSPC",
        34 => "ERANGE",
        62 => "ETIME",
        75 => "EOVERFLOW",
        95 => "EOPNOTSUPP",
        _ => return format!("E#{n}"),
    };
    name.into()
}

/// The calls the fuzzer makes, as counted.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Call {
    GetParam,
    BoCreate,
    BoInfo,
    GemClose,
    Mmap,
    Munmap,
    ProgramCreate,
    ProgramDestroy,
    Exec,
    Wait,
    CloseFile,
    Random,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::GetParam => "GET_PARAM",
            Call::BoCreate => "BO_CREATE",
            Call::BoInfo => "BO_INFO",
            Call::GemClose => "GEM_CLOSE",
            Call::Mmap => "mmap",
            Call::Munmap => "munmap",
            Call::ProgramCreate => "PROGRAM_CREATE",
            Call::ProgramDestroy => "PROGRAM_DESTROY",
            Call::Exec => "EXEC",
            Call::Wait => "WAIT",
            Call::CloseFile => "close(fd)",
            Call::Random => "random",
        }
    }
}

/// The errnos an ioctl documents (header, ioctl.rs and the DRM core);
/// anything else is a bug. Kept conservative: EFAULT is only allowed where
/// the call passed a pointer the fuzzer broke on purpose (`bad_ptr`).
pub fn allowed(call: Call, e: Errno, bad_ptr: bool) -> bool {
    use Errno as E;
    if e == E::FAULT {
        return bad_ptr || call == Call::Random;
    }
    if e == E::INTR {
        return true;
    }
    let set: &[Errno] = match call {
        Call::GetParam => &[E::INVAL],
        Call::BoCreate => &[E::INVAL, E::TOOBIG, E::NOSPC, E::NOMEM],
        Call::BoInfo => &[E::INVAL, E::NOENT, E::ACCESS],
        Call::GemClose => &[E::INVAL, E::NOENT],
        Call::Mmap => &[E::INVAL, E::ACCESS, E::NOMEM, E::PERM, E::OVERFLOW],
        Call::Munmap => &[E::INVAL],
        Call::ProgramCreate => &[
            E::INVAL,
            E::NOENT,
            E::ACCESS,
            E::TOOBIG,
            E::NOSPC,
            E::NOMEM,
            E::IO,
            // H14: not the recorded program shape.
            E::NOEXEC,
        ],
        Call::ProgramDestroy => &[E::INVAL, E::NOENT],
        Call::Exec => &[
            E::INVAL,
            E::NOENT,
            E::ACCESS,
            E::PERM,
            E::IO,
            E::BUSY,
            E::NOSPC,
            E::NOMEM,
            E::TOOBIG,
        ],
        Call::Wait => &[E::INVAL, E::NOENT, E::TIME],
        Call::CloseFile => &[],
        Call::Random => return true,
    };
    set.contains(&e)
}

/// What a call had to do: anything the documented set allows, succeed
/// (a valid call: only the caps may refuse it), or fail (an invalid one).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Want {
    Any,
    /// Success, or one of these errnos (caps, a wedged engine).
    Ok(&'static [Errno]),
    Fail,
}

/// Counts and verdicts of one process.
#[derive(Default)]
pub struct Stats {
    pub counts: BTreeMap<(Call, String), u64>,
    pub unexpected: Vec<String>,
    pub job_status: BTreeMap<String, u64>,
}

impl Stats {
    fn record(&mut self, step: u64, call: Call, what: &str, r: Result<(), Errno>, want: Want) {
        self.record_ptr(step, call, what, r, want, false)
    }

    fn record_ptr(
        &mut self,
        step: u64,
        call: Call,
        what: &str,
        r: Result<(), Errno>,
        want: Want,
        bad_ptr: bool,
    ) {
        let outcome = match r {
            Ok(()) => "ok".to_string(),
            Err(e) => errno_name(e),
        };
        *self.counts.entry((call, outcome.clone())).or_default() += 1;
        let bad = match (r, want) {
            // Injected: any call may run out of memory, nothing else.
            (Err(Errno::NOMEM), _) if fi::enabled() => None,
            (Err(e), _) if !allowed(call, e, bad_ptr) => Some("errno outside the documented set"),
            (Ok(()), Want::Fail) => Some("succeeded where it had to fail"),
            (Err(e), Want::Ok(ok)) if !ok.contains(&e) => Some("a valid call failed"),
            _ => None,
        };
        if let Some(why) = bad {
            let line = format!("step {step}: {} {what}: {outcome}: {why}", call.name());
            println!("UNEXPECTED {line}");
            self.unexpected.push(line);
        }
    }

    fn flag(&mut self, step: u64, line: String) {
        let line = format!("step {step}: {line}");
        println!("UNEXPECTED {line}");
        self.unexpected.push(line);
    }
}

/// A BO of the pool.
struct PBo {
    handle: u32,
    size: u64,
    offset: u64,
    map: Option<*mut u8>,
    /// Length of the mapping (the BO's size, or less).
    map_len: usize,
    /// Bound to a job once: a job may write it at any time.
    bound: bool,
}

/// A program of the pool: its handle and the fixture it came from.
struct PProg {
    handle: u32,
    fixture: usize,
    mutated: bool,
}

/// A job in flight with the program it runs.
struct PJob {
    id: u64,
    /// The syncobj that got its out-fence, 0 for none.
    out: u32,
}

/// A canary: a BO no job binds, filled with a pattern.
pub struct Canary {
    handle: u32,
    ptr: *mut u8,
    len: usize,
    seed: u64,
}

fn pattern(seed: u64, i: usize) -> u8 {
    (seed.wrapping_mul(i as u64 | 1).wrapping_add(i as u64 * 131) >> 7) as u8
}

pub(crate) fn mmap_bo(d: &Device, offset: u64, len: usize) -> Result<*mut u8, Errno> {
    // SAFETY: A fresh shared mapping of the node at the BO's fake offset;
    // the kernel checks offset and length. Nothing else refers to it.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            d.fd(),
            offset,
        )
    }?;
    Ok(p.cast())
}

pub(crate) fn munmap(p: *mut u8, len: usize) -> Result<(), Errno> {
    // SAFETY: `p` is a mapping of `len` bytes this process made and no
    // slice of it outlives this call.
    unsafe { rustix::mm::munmap(p.cast(), len) }
}

/// Creates `n` canaries on `d`, each `pages` pages of a pattern.
pub fn make_canaries(d: &Device, seed: u64, n: usize) -> Result<Vec<Canary>, String> {
    let page = rustix::param::page_size() as u64;
    let mut v = Vec::new();
    for i in 0..n {
        let mut a = uapi::BoCreate {
            size: page * (1 + i as u64 * 3),
            ..Default::default()
        };
        raw::bo_create(d.fd(), &mut a).map_err(|e| format!("canary BO_CREATE: {e}"))?;
        let len = (page * (1 + i as u64 * 3)) as usize;
        let ptr = mmap_bo(d, a.mmap_offset, len).map_err(|e| format!("canary mmap: {e}"))?;
        let seed = seed
            .wrapping_add(i as u64)
            .wrapping_mul(0x2545_f491_4f6c_dd1d)
            | 1;
        // SAFETY: our fresh mapping of `len` bytes.
        let m = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        for (j, b) in m.iter_mut().enumerate() {
            *b = pattern(seed, j);
        }
        v.push(Canary {
            handle: a.handle,
            ptr,
            len,
            seed,
        });
    }
    Ok(v)
}

/// Checks the canaries: the first changed byte of each, if any.
pub fn check_canaries(c: &[Canary]) -> Result<(), String> {
    for k in c {
        // SAFETY: the canary's mapping, never unmapped before this.
        let m = unsafe { std::slice::from_raw_parts(k.ptr, k.len) };
        if let Some(j) = (0..k.len).find(|&j| m[j] != pattern(k.seed, j)) {
            return Err(format!(
                "canary handle {} ({} bytes) changed at byte {j}: {:#04x}, want {:#04x}",
                k.handle,
                k.len,
                m[j],
                pattern(k.seed, j)
            ));
        }
    }
    Ok(())
}

/// The compiled programs the fuzzer loads (those present in the guest).
const FIXTURES: &[&str] = &[
    "tinygrad_sum.hwx",
    "tinygrad_relu.hwx",
    "mul_zin541_macos12.hwx",
    "tinygrad_concat.hwx",
    "tinygrad_conv.hwx",
];

/// One fuzzing process.
struct Fuzzer {
    d: Device,
    /// A second file of the same process: its handles are foreign here.
    other: Option<Device>,
    other_bos: Vec<u32>,
    rng: Rng,
    h14: bool,
    /// Whether jobs of mutated programs run (see [`Fuzzer::exec`]).
    mutated_exec: bool,
    /// H14: mutated programs the firmware loaded ([`H14_MUTATED_LOADS`]).
    h14_mutated_loads: u32,
    page: u64,
    bo_max: u64,
    fixtures: Vec<ane::hwx::Hwx>,
    bos: Vec<PBo>,
    progs: Vec<PProg>,
    jobs: Vec<PJob>,
    /// Handles closed or destroyed, job ids waited for.
    dead_bos: Vec<u32>,
    dead_progs: Vec<u32>,
    dead_jobs: Vec<u64>,
    /// Mappings whose handle was closed (the mapping keeps the object).
    orphans: Vec<(*mut u8, usize)>,
    canaries: Vec<Canary>,
    /// Syncobjs of `d` that hold a fence (created signalled, or an
    /// earlier fenced EXEC's out-syncobj): valid in-fences.
    syncobjs: Vec<u32>,
    stats: Stats,
    step: u64,
}

impl Fuzzer {
    fn live_bo(&self, h: u32) -> bool {
        self.bos.iter().any(|b| b.handle == h) || self.canaries.iter().any(|c| c.handle == h)
    }
    fn live_prog(&self, h: u32) -> bool {
        self.progs.iter().any(|p| p.handle == h)
    }
    fn is_canary(&self, h: u32) -> bool {
        self.canaries.iter().any(|c| c.handle == h)
    }

    /// A BO handle that is likely not live in this file (stale, foreign
    /// or random); callers check [`Fuzzer::live_bo`].
    fn bad_bo_handle(&mut self) -> u32 {
        match self.rng.below(4) {
            0 => self.rng.pick(&self.dead_bos).copied().unwrap_or(0),
            1 => self.rng.pick(&self.other_bos).copied().unwrap_or(u32::MAX),
            2 => [0, u32::MAX, 1 << 31, 0x10000][self.rng.below(4) as usize],
            _ => self.rng.next() as u32,
        }
    }

    fn size_choice(&mut self) -> u64 {
        let p = self.page;
        match self.rng.below(8) {
            0 => 1,
            1 => p - 1,
            2 => p,
            3 => p + 1,
            4 => 2 * p,
            5 => 16384,
            6 => 1 + self.rng.below(8 * p),
            _ => p * (1 + self.rng.below(16)),
        }
    }

    fn gem_close(&mut self, h: u32) -> Result<(), Errno> {
        let mut c = raw::GemClose { handle: h, pad: 0 };
        fi::gem_close(self.d.fd(), &mut c)
    }

    // ------------------------------------------------------------ BOs

    fn bo_create_valid(&mut self) {
        if self.bos.len() >= MAX_BOS {
            return self.gem_close_valid();
        }
        let size = self.size_choice();
        let mut a = uapi::BoCreate {
            size,
            ..Default::default()
        };
        let r = fi::bo_create(self.d.fd(), &mut a);
        let step = self.step;
        self.stats.record(
            step,
            Call::BoCreate,
            &format!("size {size}"),
            r,
            Want::Ok(&[Errno::NOSPC, Errno::NOMEM]),
        );
        if r.is_err() {
            return;
        }
        // `size` is in-only: the BO has it rounded up to the page size.
        let want = size.div_ceil(self.page) * self.page;
        if a.iova % self.page != 0 {
            self.stats
                .flag(step, format!("BO_CREATE size {size}: iova {:#x}", a.iova));
        }
        if self.live_bo(a.handle) {
            self.stats
                .flag(step, format!("BO_CREATE returned live handle {}", a.handle));
        }
        self.dead_bos.retain(|&h| h != a.handle);
        // A freed-then-reused number must name the new object.
        let mut i = uapi::BoInfo {
            handle: a.handle,
            ..Default::default()
        };
        let r = fi::bo_info(self.d.fd(), &mut i);
        self.stats
            .record(step, Call::BoInfo, "fresh handle", r, Want::Ok(&[]));
        if r.is_ok() && (i.size != want || i.mmap_offset != a.mmap_offset || i.iova != a.iova) {
            self.stats
                .flag(step, format!("BO_INFO of fresh handle {}: {i:?}", a.handle));
        }
        self.bos.push(PBo {
            handle: a.handle,
            size: want,
            offset: a.mmap_offset,
            map: None,
            map_len: 0,
            bound: false,
        });
    }

    fn bo_create_bad(&mut self) {
        let max = self.bo_max;
        let (size, flags, what) = match self.rng.below(7) {
            0 => (0, 0, "size 0"),
            1 => (max + 1, 0, "size max+1"),
            2 => (u64::MAX, 0, "size u64::MAX"),
            3 => (u64::MAX - self.page + 2, 0, "size rounding to 0"),
            4 => (1 << (40 + self.rng.below(24)), 0, "size huge"),
            5 => (self.page, 1 << self.rng.below(32), "flag bit"),
            _ => (self.page, self.rng.next() as u32 | 1, "random flags"),
        };
        let mut a = uapi::BoCreate {
            size,
            flags,
            handle: self.rng.next() as u32,
            mmap_offset: self.rng.next(),
            iova: self.rng.next(),
        };
        let r = fi::bo_create(self.d.fd(), &mut a);
        self.stats
            .record(self.step, Call::BoCreate, what, r, Want::Fail);
        if r.is_ok() {
            let _ = self.gem_close(a.handle);
        }
    }

    fn bo_info(&mut self) {
        let valid = self.rng.chance(50) && !self.bos.is_empty();
        let (handle, want, what) = if valid {
            let b = &self.bos[self.rng.below(self.bos.len() as u64) as usize];
            (b.handle, Want::Ok(&[]), "live")
        } else {
            let h = self.bad_bo_handle();
            let want = if self.live_bo(h) {
                Want::Any
            } else {
                Want::Fail
            };
            (h, want, "stale/foreign/random")
        };
        let pad = if self.rng.chance(10) {
            1 << self.rng.below(32)
        } else {
            0
        };
        let want = if pad != 0 { Want::Fail } else { want };
        let mut a = uapi::BoInfo {
            handle,
            pad,
            ..Default::default()
        };
        let r = fi::bo_info(self.d.fd(), &mut a);
        self.stats.record(
            self.step,
            Call::BoInfo,
            &format!("{what} handle {handle} pad {pad}"),
            r,
            want,
        );
        if r.is_ok() && pad == 0 {
            if let Some(b) = self.bos.iter().find(|b| b.handle == handle) {
                if a.size != b.size || a.mmap_offset != b.offset {
                    let step = self.step;
                    self.stats.flag(
                        step,
                        format!("BO_INFO {handle}: {a:?} vs pool size {}", b.size),
                    );
                }
            }
        }
    }

    fn gem_close_valid(&mut self) {
        if self.bos.is_empty() {
            return;
        }
        // A closed but mapped BO still holds its memory (and counts
        // against the file's cap): unmap the oldest beyond a few, or a
        // long run ends up refusing every BO_CREATE with ENOSPC.
        if self.orphans.len() >= MAX_ORPHANS {
            let (p, len) = self.orphans.remove(0);
            let r = munmap(p, len);
            self.stats
                .record(self.step, Call::Munmap, "oldest orphan", r, Want::Ok(&[]));
        }
        let i = self.rng.below(self.bos.len() as u64) as usize;
        let b = self.bos.swap_remove(i);
        let r = self.gem_close(b.handle);
        self.stats
            .record(self.step, Call::GemClose, "live", r, Want::Ok(&[]));
        self.dead_bos.push(b.handle);
        if let Some(p) = b.map.filter(|_| !b.bound) {
            // The mapping keeps the object: it must still be usable.
            // SAFETY: our mapping of `map_len` bytes.
            let m = unsafe { std::slice::from_raw_parts_mut(p, b.map_len) };
            m[0] = 0x5a;
            m[b.map_len - 1] = 0xa5;
            if m[0] != 0x5a || m[b.map_len - 1] != 0xa5 {
                let step = self.step;
                self.stats
                    .flag(step, "mapping unusable after GEM_CLOSE".into());
            }
            self.orphans.push((p, b.map_len));
        } else if let Some(p) = b.map {
            self.orphans.push((p, b.map_len));
        }
    }

    fn gem_close_bad(&mut self) {
        let h = self.bad_bo_handle();
        if self.live_bo(h) {
            return;
        }
        let pad = if self.rng.chance(20) { 1 } else { 0 };
        let mut c = raw::GemClose { handle: h, pad };
        let r = fi::gem_close(self.d.fd(), &mut c);
        self.stats.record(
            self.step,
            Call::GemClose,
            &format!("dead handle {h} pad {pad}"),
            r,
            Want::Fail,
        );
    }

    fn mmap(&mut self) {
        if self.bos.is_empty() {
            return;
        }
        let i = self.rng.below(self.bos.len() as u64) as usize;
        let (size, offset) = (self.bos[i].size, self.bos[i].offset);
        let kind = self.rng.below(10);
        let (off, len, want, what) = match kind {
            0 => (
                offset,
                size as usize + self.page as usize,
                Want::Fail,
                "len > size",
            ),
            1 => (
                offset + self.page * 1024,
                self.page as usize,
                Want::Any,
                "offset past",
            ),
            2 => (
                self.rng.next() & !(self.page - 1) & 0xffff_ffff_f000,
                self.page as usize,
                Want::Any,
                "random offset",
            ),
            _ => (offset, size as usize, Want::Ok(&[]), "whole"),
        };
        let r = fi::mmap_bo(&self.d, off, len);
        self.stats
            .record(self.step, Call::Mmap, what, r.map(|_| ()), want);
        let Ok(p) = r else { return };
        if kind >= 3 && self.bos[i].map.is_none() {
            // SAFETY: our fresh mapping of `len` bytes.
            let m = unsafe { std::slice::from_raw_parts_mut(p, len) };
            m[0] = 1;
            m[len - 1] = 2;
            self.bos[i].map = Some(p);
            self.bos[i].map_len = len;
        } else {
            let _ = munmap(p, len);
        }
    }

    fn munmap_one(&mut self) {
        if let Some(i) = (0..self.bos.len()).find(|&i| self.bos[i].map.is_some()) {
            let p = self.bos[i].map.take().unwrap_or(std::ptr::null_mut());
            let r = munmap(p, self.bos[i].map_len);
            self.stats
                .record(self.step, Call::Munmap, "live", r, Want::Ok(&[]));
        } else if let Some((p, len)) = self.orphans.pop() {
            let r = munmap(p, len);
            self.stats
                .record(self.step, Call::Munmap, "orphan", r, Want::Ok(&[]));
        }
    }

    // ------------------------------------------------------------ programs

    /// Stages fixture `f` in a new BO of the pool: the PROGRAM_CREATE
    /// arguments and sections (H14) for it, and the BO's mapping.
    fn stage(
        &mut self,
        f: usize,
    ) -> Option<(uapi::ProgramCreate, Vec<uapi::Section>, *mut u8, usize)> {
        let hwx = &self.fixtures[f];
        // H14: a synthetic H14 program per fixture (an H13 stream never
        // reaches the firmware); H13: the fixture's stream and weights.
        let (h14_bytes, h14_sections) = crate::h14_synthetic(f as u8 + 1);
        let (stream, weights) = if self.h14 {
            (h14_bytes, Vec::new())
        } else {
            (hwx.task_stream().to_vec(), hwx.weights().to_vec())
        };
        let (td_size, td_count) = (hwx.td_size(), hwx.td_count());
        let layout = ane::device::Staging::new(stream.len(), weights.len());
        let size = layout.size;
        let mut a = uapi::BoCreate {
            size: size.max(1),
            ..Default::default()
        };
        let r = fi::bo_create(self.d.fd(), &mut a);
        self.stats.record(
            self.step,
            Call::BoCreate,
            "program staging",
            r,
            Want::Ok(&[Errno::NOSPC, Errno::NOMEM]),
        );
        r.ok()?;
        let len = (size.max(1).div_ceil(self.page) * self.page) as usize;
        // In the pool before the mmap: if that fails (an injected ENOMEM)
        // the BO still lives and its handle must not pass for a dead one.
        self.bos.push(PBo {
            handle: a.handle,
            size: len as u64,
            offset: a.mmap_offset,
            map: None,
            map_len: 0,
            bound: true,
        });
        let p = fi::mmap_bo(&self.d, a.mmap_offset, len);
        self.stats.record(
            self.step,
            Call::Mmap,
            "program staging",
            p.map(|_| ()),
            Want::Ok(&[]),
        );
        let p = p.ok()?;
        if let Some(b) = self.bos.last_mut() {
            b.map = Some(p);
            b.map_len = len;
        }
        // SAFETY: our fresh mapping of `len` bytes.
        let m = unsafe { std::slice::from_raw_parts_mut(p, len) };
        layout.fill(m, &stream, &weights).ok()?;
        let mut sections = Vec::new();
        let mut args = uapi::ProgramCreate {
            bo_handle: a.handle,
            offset: 0,
            size,
            ..Default::default()
        };
        if self.h14 {
            sections = h14_sections;
            args.section_count = sections.len() as u32;
            args.section_size = std::mem::size_of::<uapi::Section>() as u32;
        } else {
            args.td_size = td_size;
            args.td_count = td_count;
            args.tsk_size = layout.tsk_size;
        }
        Some((args, sections, p, stream.len()))
    }

    fn program_create(&mut self, mutate: bool) {
        if self.fixtures.is_empty() {
            return;
        }
        // Past the budget, an H14 process loads only the fixtures, which
        // the driver's digest cache serves without a new firmware slot.
        let mutate = mutate && !(self.h14 && self.h14_mutated_loads >= H14_MUTATED_LOADS);
        if self.progs.len() >= MAX_PROGS {
            return self.program_destroy_valid();
        }
        let f = self.rng.below(self.fixtures.len() as u64) as usize;
        let Some((mut a, mut sections, map, stream_len)) = self.stage(f) else {
            return;
        };
        let mut want = Want::Ok(&[Errno::NOSPC, Errno::NOMEM]);
        let mut what = format!("{} valid", FIXTURES[f]);
        let mut bad_ptr = false;
        if mutate {
            want = Want::Any;
            let field = self.rng.below(16);
            what = format!("{} mutated field {field}", FIXTURES[f]);
            let flip = 1u64 << self.rng.below(64);
            match field {
                0 => {
                    a.flags = 1 << self.rng.below(32);
                    want = Want::Fail;
                }
                1 => {
                    a.pad = 1 << self.rng.below(32);
                    want = Want::Fail;
                }
                2 => {
                    a.bo_handle = self.bad_bo_handle();
                    if !self.live_bo(a.bo_handle) {
                        want = Want::Fail;
                    }
                }
                3 => a.offset ^= flip,
                4 => a.size ^= flip,
                5 => {
                    a.size = [0, 1, self.page - 1, self.page, u64::MAX][self.rng.below(5) as usize]
                }
                6 => a.td_size ^= flip as u32 | (flip >> 32) as u32,
                7 => a.td_count ^= flip as u32 | (flip >> 32) as u32,
                8 => a.tsk_size ^= flip,
                9 => a.section_count = [0, 1, 9, 10, 1000, u32::MAX][self.rng.below(6) as usize],
                10 => {
                    a.section_size = [0, 1, 8, 23, 25, 4096, u32::MAX][self.rng.below(7) as usize]
                }
                11 => {
                    a.sections = [1, 4096, u64::MAX - 7, 0xdead_0000][self.rng.below(4) as usize];
                    bad_ptr = true;
                }
                12 if !sections.is_empty() => {
                    let s = self.rng.below(sections.len() as u64) as usize;
                    match self.rng.below(4) {
                        0 => sections[s].id = self.rng.below(12) as u32,
                        1 => sections[s].flags = 1 << self.rng.below(32),
                        2 => sections[s].offset ^= flip,
                        _ => sections[s].size ^= flip,
                    }
                }
                13 if self.h14 => {
                    a.td_size = self.rng.below(4096) as u32;
                    want = Want::Fail;
                }
                _ => {
                    // Bytes of the real program: flip a few of its stream.
                    // SAFETY: the staging mapping, `stream_len` or more bytes.
                    let m = unsafe { std::slice::from_raw_parts_mut(map, stream_len) };
                    for _ in 0..1 + self.rng.below(4) {
                        let at = self.rng.below(stream_len as u64) as usize;
                        if self.rng.chance(50) {
                            m[at] ^= 1 << self.rng.below(8);
                        } else {
                            m[at] = self.rng.next() as u8;
                        }
                    }
                    what = format!("{} mutated bytes", FIXTURES[f]);
                }
            }
        }
        if !sections.is_empty() && a.sections == 0 {
            a.sections = sections.as_ptr() as u64;
        }
        if a.section_count as usize > sections.len() && !bad_ptr {
            // The kernel reads past the vector: give it real memory.
            sections.resize((a.section_count as usize).min(16), uapi::Section::default());
            a.sections = sections.as_ptr() as u64;
            bad_ptr = a.section_count > 16;
        }
        if a.section_size as usize > std::mem::size_of::<uapi::Section>() {
            bad_ptr = true;
        }
        a.handle = self.rng.next() as u32;
        let r = fi::program_create(self.d.fd(), &mut a);
        self.stats
            .record_ptr(self.step, Call::ProgramCreate, &what, r, want, bad_ptr);
        if r.is_ok() {
            if self.live_prog(a.handle) {
                let step = self.step;
                self.stats.flag(
                    step,
                    format!("PROGRAM_CREATE returned live handle {}", a.handle),
                );
            }
            self.dead_progs.retain(|&h| h != a.handle);
            if mutate && self.h14 {
                self.h14_mutated_loads += 1;
            }
            self.progs.push(PProg {
                handle: a.handle,
                fixture: f,
                mutated: mutate,
            });
        }
    }

    fn program_destroy_valid(&mut self) {
        if self.progs.is_empty() {
            return;
        }
        let i = self.rng.below(self.progs.len() as u64) as usize;
        let p = self.progs.swap_remove(i);
        let mut a = uapi::ProgramDestroy {
            handle: p.handle,
            pad: 0,
        };
        let r = fi::program_destroy(self.d.fd(), &mut a);
        self.stats
            .record(self.step, Call::ProgramDestroy, "live", r, Want::Ok(&[]));
        self.dead_progs.push(p.handle);
    }

    fn program_destroy_bad(&mut self) {
        let (handle, pad) = match self.rng.below(4) {
            0 => (self.rng.pick(&self.dead_progs).copied().unwrap_or(0), 0),
            1 => (self.rng.next() as u32, 0),
            2 => ([0, u32::MAX][self.rng.below(2) as usize], 0),
            _ => (
                self.progs.first().map(|p| p.handle).unwrap_or(1),
                1 << self.rng.below(32),
            ),
        };
        if pad == 0 && self.live_prog(handle) {
            return;
        }
        let mut a = uapi::ProgramDestroy { handle, pad };
        let r = fi::program_destroy(self.d.fd(), &mut a);
        self.stats.record(
            self.step,
            Call::ProgramDestroy,
            &format!("handle {handle} pad {pad}"),
            r,
            Want::Fail,
        );
    }

    // ------------------------------------------------------------ jobs

    /// Valid bindings of program `p`: pool BOs big enough, or new ones.
    fn bindings_for(&mut self, f: usize) -> Option<Vec<uapi::Binding>> {
        let tensors: Vec<(u64, usize, ane::hwx::Direction)> = self.fixtures[f]
            .tensors()
            .iter()
            .map(|t| (t.buffer_size, t.slot, t.direction))
            .collect();
        let mut v = Vec::new();
        for (size, slot, dir) in tensors {
            let reuse: Vec<usize> = (0..self.bos.len())
                .filter(|&i| self.bos[i].size >= size)
                .collect();
            let handle = if !reuse.is_empty() && self.rng.chance(70) {
                let i = *self.rng.pick(&reuse)?;
                self.bos[i].bound = true;
                self.bos[i].handle
            } else {
                let mut a = uapi::BoCreate {
                    size,
                    ..Default::default()
                };
                let r = fi::bo_create(self.d.fd(), &mut a);
                self.stats.record(
                    self.step,
                    Call::BoCreate,
                    "binding",
                    r,
                    Want::Ok(&[Errno::NOSPC, Errno::NOMEM]),
                );
                r.ok()?;
                self.bos.push(PBo {
                    handle: a.handle,
                    size: size.div_ceil(self.page) * self.page,
                    offset: a.mmap_offset,
                    map: None,
                    map_len: 0,
                    bound: true,
                });
                a.handle
            };
            v.push(uapi::Binding {
                slot: slot as u32,
                bo_handle: handle,
                offset: 0,
                size,
                flags: match dir {
                    ane::hwx::Direction::Input => uapi::bind::IN,
                    ane::hwx::Direction::Output => uapi::bind::OUT,
                },
                pad: 0,
            });
        }
        Some(v)
    }

    /// A chained EXEC of 1..=4 valid programs, each on its own fresh
    /// bindings; mutated, one field of the array or of a step is wrong.
    fn exec_chain(&mut self, mutate: bool) {
        if self.jobs.len() >= MAX_JOBS {
            return self.wait_valid();
        }
        let valid: Vec<usize> = (0..self.progs.len())
            .filter(|&i| !self.progs[i].mutated)
            .collect();
        if valid.is_empty() {
            return self.program_create(false);
        }
        let n = 1 + self.rng.below(4) as usize;
        let mut all: Vec<Vec<uapi::Binding>> = Vec::with_capacity(n);
        let mut progs = Vec::with_capacity(n);
        for _ in 0..n {
            let pi = *self.rng.pick(&valid).unwrap_or(&0);
            let Some(b) = self.bindings_for(self.progs[pi].fixture) else {
                return;
            };
            progs.push(self.progs[pi].handle);
            all.push(b);
        }
        if all.iter().flatten().any(|b| self.is_canary(b.bo_handle)) {
            return;
        }
        let mut steps: Vec<uapi::ExecStep> = all
            .iter()
            .zip(&progs)
            .map(|(b, &p)| crate::exec_step(p, b))
            .collect();
        let mut a = uapi::Exec {
            priority: self.rng.below(2) as u32,
            step_count: n as u32,
            step_size: std::mem::size_of::<uapi::ExecStep>() as u32,
            job_id: self.rng.next(),
            ..Default::default()
        };
        let mut want = Want::Ok(&[Errno::IO, Errno::BUSY, Errno::NOMEM]);
        let mut what = format!("chain of {n} valid");
        let mut bad_ptr = false;
        let mut raw_ptr = None;
        if mutate {
            let k = self.rng.below(8);
            what = format!("chain of {n} mutated {k}");
            let i = self.rng.below(n as u64) as usize;
            want = Want::Fail;
            match k {
                0 => {
                    a.step_count =
                        [uapi::MAX_CHAIN_STEPS + 1, 1 << 20, u32::MAX][self.rng.below(3) as usize];
                    bad_ptr = true;
                }
                1 => {
                    a.step_size = [0, 1, 23, 4097, u32::MAX][self.rng.below(5) as usize];
                    bad_ptr = true;
                }
                2 => {
                    raw_ptr = Some([0u64, 1, 4096, u64::MAX - 23][self.rng.below(4) as usize]);
                    bad_ptr = true;
                }
                3 => steps[i].pad = 1 << self.rng.below(32),
                4 => a.program = progs[0],
                5 => {
                    let h = self.rng.pick(&self.dead_progs).copied().unwrap_or(0);
                    if self.live_prog(h) {
                        return;
                    }
                    steps[i].program = h;
                }
                6 => steps[i].binding_count = [0, 33, u32::MAX][self.rng.below(3) as usize],
                _ => steps[i].binding_size = [0, 8, 31][self.rng.below(3) as usize],
            }
        }
        a.steps = raw_ptr.unwrap_or(steps.as_ptr() as u64);
        self.submit(&mut a, &what, want, bad_ptr);
    }

    /// A syncobj of `d` holding a signalled fence, or a new empty one
    /// (`None` if the core refused).
    fn new_syncobj(&mut self, signalled: bool) -> Option<u32> {
        let mut c = raw::SyncobjCreate {
            handle: 0,
            flags: if signalled {
                raw::SYNCOBJ_CREATE_SIGNALED
            } else {
                0
            },
        };
        raw::syncobj_create(self.d.fd(), &mut c).ok()?;
        Some(c.handle)
    }

    /// An EXEC of a valid program with fences: in-fences from syncobjs that
    /// hold one (a signalled one, or earlier jobs' out-fences, which may be
    /// pending), an out-syncobj (binary, or a timeline point above the
    /// last); mutated, one fence field is made bad.
    fn exec_fenced(&mut self, mutate: bool) {
        if self.jobs.len() >= MAX_JOBS {
            return self.wait_valid();
        }
        let valid: Vec<usize> = (0..self.progs.len())
            .filter(|&i| !self.progs[i].mutated)
            .collect();
        let Some(&pi) = self.rng.pick(&valid) else {
            return self.program_create(false);
        };
        let Some(bindings) = self.bindings_for(self.progs[pi].fixture) else {
            return;
        };
        if bindings.iter().any(|b| self.is_canary(b.bo_handle)) {
            return;
        }
        if self.syncobjs.len() < 8 {
            if let Some(h) = self.new_syncobj(true) {
                self.syncobjs.push(h);
            }
        }
        let n = self.rng.below(3) as usize;
        let mut ins: Vec<uapi::ExecSyncobj> = (0..n)
            .filter_map(|_| self.rng.pick(&self.syncobjs).copied())
            .map(|handle| uapi::ExecSyncobj {
                handle,
                flags: 0,
                point: 0,
            })
            .collect();
        // The out-fence: a fresh binary syncobj, which then holds a fence.
        let Some(out) = self.new_syncobj(false) else {
            return;
        };
        let mut a = uapi::Exec {
            program: self.progs[pi].handle,
            priority: self.rng.below(2) as u32,
            binding_count: bindings.len() as u32,
            bindings: bindings.as_ptr() as u64,
            binding_size: std::mem::size_of::<uapi::Binding>() as u32,
            job_id: self.rng.next(),
            out_syncobj: out,
            ..Default::default()
        };
        let mut want = Want::Ok(&[Errno::IO, Errno::BUSY, Errno::NOMEM]);
        let mut what = format!("fenced, {n} in");
        let mut bad_ptr = false;
        let mut raw_ptr = None;
        if mutate {
            let k = self.rng.below(10);
            what = format!("fenced mutated {k}");
            want = Want::Fail;
            if ins.is_empty() && k < 6 {
                ins.push(uapi::ExecSyncobj {
                    handle: self.syncobjs.first().copied().unwrap_or(0),
                    flags: 0,
                    point: 0,
                });
            }
            let i = self.rng.below(ins.len().max(1) as u64) as usize;
            match k {
                0 => {
                    a.in_syncobj_count =
                        [uapi::MAX_IN_SYNCOBJS + 1, 1 << 20, u32::MAX][self.rng.below(3) as usize];
                    bad_ptr = true;
                }
                1 => {
                    a.in_syncobj_size = [1, 8, 15, 4097, u32::MAX][self.rng.below(5) as usize];
                    bad_ptr = true;
                }
                2 => {
                    raw_ptr = Some([1u64, 4096, u64::MAX - 15][self.rng.below(3) as usize]);
                    bad_ptr = true;
                }
                3 => ins[i].flags = 1 << self.rng.below(32),
                4 => {
                    // An empty syncobj, or a handle that is none.
                    ins[i].handle = match self.rng.below(2) {
                        0 => self.new_syncobj(false).unwrap_or(0),
                        _ => [0, u32::MAX, 1 << 31][self.rng.below(3) as usize],
                    }
                }
                // A point on a binary syncobj.
                5 => ins[i].point = 1 + self.rng.below(1 << 20),
                6 => a.out_syncobj = [u32::MAX, 1 << 31][self.rng.below(2) as usize],
                7 => {
                    a.out_syncobj = 0;
                    a.out_point = 1 + self.rng.below(1 << 20);
                }
                8 => a.pad2 = 1 << self.rng.below(32),
                _ => {
                    // A pointer or size without a count.
                    a.in_syncobj_count = 0;
                    a.in_syncobj_size = 16;
                }
            }
        }
        if !ins.is_empty() && a.in_syncobj_count == 0 && !(mutate && a.in_syncobj_size == 16) {
            a.in_syncobj_count = ins.len() as u32;
        }
        if a.in_syncobj_count != 0 && a.in_syncobj_size == 0 {
            a.in_syncobj_size = std::mem::size_of::<uapi::ExecSyncobj>() as u32;
        }
        a.in_syncobjs = raw_ptr.unwrap_or(if ins.is_empty() {
            0
        } else {
            ins.as_ptr() as u64
        });
        if a.in_syncobj_count == 0 && a.in_syncobj_size == 0 {
            a.in_syncobjs = 0;
        }
        if self.submit(&mut a, &what, want, bad_ptr) && a.out_syncobj == out {
            if self.syncobjs.len() < 64 {
                self.syncobjs.push(out);
            } else {
                let i = self.rng.below(64) as usize;
                self.syncobjs[i] = out;
            }
        } else {
            let mut d = raw::SyncobjDestroy {
                handle: out,
                pad: 0,
            };
            let _ = raw::syncobj_destroy(self.d.fd(), &mut d);
        }
    }

    /// Runs one EXEC and records it; a job it returns joins the pending
    /// list (its id must not be one already pending). Whether it queued.
    fn submit(&mut self, a: &mut uapi::Exec, what: &str, want: Want, bad_ptr: bool) -> bool {
        let r = fi::exec(self.d.fd(), a);
        self.stats
            .record_ptr(self.step, Call::Exec, what, r, want, bad_ptr);
        if r == Err(Errno::IO) {
            self.backoff();
        }
        if r.is_ok() {
            if self.jobs.iter().any(|j| j.id == a.job_id) {
                let step = self.step;
                self.stats
                    .flag(step, format!("EXEC returned pending job id {}", a.job_id));
            }
            self.jobs.push(PJob {
                id: a.job_id,
                out: a.out_syncobj,
            });
        }
        r.is_ok()
    }

    fn exec(&mut self, mutate: bool) {
        if self.jobs.len() >= MAX_JOBS {
            return self.wait_valid();
        }
        if self.progs.is_empty() {
            return self.program_create(false);
        }
        // Mostly valid programs: a mutated one that passes the checks may
        // fault or hang, which wedges the engine (EXEC is EIO until it
        // recovers) and starves the rest of the run.
        let valid: Vec<usize> = (0..self.progs.len())
            .filter(|&i| !self.progs[i].mutated)
            .collect();
        // Only where a wedge recovers by itself (T8103's power cycle): a
        // T6001 wedged by a fault needs a rebind, a T6021 whose firmware
        // quarantined itself a reboot.
        let pi = if !valid.is_empty() && (!self.mutated_exec || self.rng.chance(95)) {
            *self.rng.pick(&valid).unwrap_or(&0)
        } else {
            self.rng.below(self.progs.len() as u64) as usize
        };
        let (prog, f, pmut) = (
            self.progs[pi].handle,
            self.progs[pi].fixture,
            self.progs[pi].mutated,
        );
        if pmut && !self.mutated_exec {
            return;
        }
        let Some(mut bindings) = self.bindings_for(f) else {
            return;
        };
        // Valid: success unless the engine is wedged (EIO, after a fault
        // of a mutated program) or this file has too many jobs.
        let mut want = if pmut {
            Want::Any
        } else {
            Want::Ok(&[Errno::IO, Errno::BUSY, Errno::NOMEM])
        };
        let mut a = uapi::Exec {
            program: prog,
            priority: self.rng.below(3) as u32,
            binding_count: bindings.len() as u32,
            binding_size: std::mem::size_of::<uapi::Binding>() as u32,
            job_id: self.rng.next(),
            ..Default::default()
        };
        let mut what = format!("{} valid", FIXTURES[f]);
        let mut bad_ptr = false;
        let mut raw_ptr = None;
        if mutate {
            want = Want::Any;
            let k = self.rng.below(18);
            what = format!("{} mutated {k}", FIXTURES[f]);
            let flip = 1u64 << self.rng.below(64);
            let b = self.rng.below(bindings.len() as u64) as usize;
            match k {
                0 => {
                    a.flags = 1 << self.rng.below(32);
                    want = Want::Fail;
                }
                1 => {
                    a.pad = 1 << self.rng.below(32);
                    want = Want::Fail;
                }
                2 => {
                    a.priority = 3 + self.rng.below(u32::MAX as u64 - 3) as u32;
                    want = Want::Fail;
                }
                3 => {
                    let h = self.rng.pick(&self.dead_progs).copied().unwrap_or(0);
                    if !self.live_prog(h) {
                        a.program = h;
                        want = Want::Fail;
                    }
                }
                4 => {
                    let h = self.bad_bo_handle();
                    if !self.live_bo(h) {
                        bindings[b].bo_handle = h;
                        want = Want::Fail;
                    }
                }
                5 => bindings[b].offset ^= flip,
                6 => bindings[b].size ^= flip,
                7 => {
                    bindings[b].size =
                        [0, 1, self.page - 1, self.page, u64::MAX][self.rng.below(5) as usize]
                }
                8 => bindings[b].flags = self.rng.below(8) as u32,
                9 => {
                    bindings[b].pad = 1 << self.rng.below(32);
                    want = Want::Fail;
                }
                10 => {
                    bindings[b].slot =
                        [32, 33, u32::MAX, self.rng.below(32) as u32][self.rng.below(4) as usize]
                }
                11 => {
                    a.binding_count = [0, 33, 1000, u32::MAX][self.rng.below(4) as usize];
                    bad_ptr = true;
                }
                12 => {
                    a.binding_size = [0, 1, 8, 31, 33, 4096, u32::MAX][self.rng.below(7) as usize];
                    bad_ptr = true;
                }
                13 => {
                    raw_ptr = Some([1u64, 4096, u64::MAX - 31][self.rng.below(3) as usize]);
                    bad_ptr = true;
                }
                14 => {
                    // The same slot twice.
                    let dup = bindings[b];
                    bindings.push(dup);
                    a.binding_count += 1;
                }
                15 => {
                    // A BO of the other file (its handle numbers).
                    if let Some(&h) = self.rng.pick(&self.other_bos) {
                        if !self.live_bo(h) {
                            bindings[b].bo_handle = h;
                            want = Want::Fail;
                        }
                    }
                }
                _ => {
                    // Offset just past the end, or overflowing.
                    bindings[b].offset = [self.page * 64, u64::MAX - 4095, 1, self.page - 1]
                        [self.rng.below(4) as usize];
                }
            }
        }
        a.bindings = raw_ptr.unwrap_or(bindings.as_ptr() as u64);
        // Never let a canary be bound (the pool excludes them; keep the
        // random handles from naming one).
        if bindings.iter().any(|b| self.is_canary(b.bo_handle)) {
            return;
        }
        if self.submit(&mut a, &what, want, bad_ptr) {
            // Against the running job: close, unmap or destroy what it uses.
            match self.rng.below(6) {
                0 => {
                    let hs: Vec<u32> = bindings.iter().map(|b| b.bo_handle).collect();
                    for h in hs {
                        if let Some(i) = self.bos.iter().position(|b| b.handle == h) {
                            let b = self.bos.swap_remove(i);
                            let r = self.gem_close(b.handle);
                            self.stats.record(
                                self.step,
                                Call::GemClose,
                                "bound to a running job",
                                r,
                                Want::Ok(&[]),
                            );
                            self.dead_bos.push(b.handle);
                            if let Some(p) = b.map {
                                let r = munmap(p, b.map_len);
                                self.stats.record(
                                    self.step,
                                    Call::Munmap,
                                    "bound to a running job",
                                    r,
                                    Want::Ok(&[]),
                                );
                            }
                        }
                    }
                }
                1 => {
                    if let Some(i) = self.progs.iter().position(|p| p.handle == prog) {
                        let p = self.progs.swap_remove(i);
                        let mut d = uapi::ProgramDestroy {
                            handle: p.handle,
                            pad: 0,
                        };
                        let r = fi::program_destroy(self.d.fd(), &mut d);
                        self.stats.record(
                            self.step,
                            Call::ProgramDestroy,
                            "of a running job",
                            r,
                            Want::Ok(&[]),
                        );
                        self.dead_progs.push(p.handle);
                    }
                }
                _ => {}
            }
        }
    }

    /// The engine is wedged (EXEC is EIO): on T8103 it recovers at the
    /// next runtime suspend, which needs every job and wait done: end ours
    /// and pause, so the run goes on with a working engine.
    fn backoff(&mut self) {
        let mut s = uapi::GetParam {
            param: param::ENGINE_STATE,
            ..Default::default()
        };
        if raw::get_param(self.d.fd(), &mut s).is_err()
            || s.value != uapi::engine_state::WEDGED_POWER_CYCLE
        {
            return;
        }
        self.drain();
        std::thread::sleep(std::time::Duration::from_millis(400));
    }

    /// Waits for every job of the pool (they all end: done, timeout,
    /// fault or aborted).
    fn drain(&mut self) {
        while let Some(j) = self.jobs.pop() {
            let mut w = uapi::Wait {
                job_id: j.id,
                timeout_ns: crate::job_deadline(),
                ..Default::default()
            };
            let r = raw::wait(self.d.fd(), &mut w);
            self.stats
                .record(self.step, Call::Wait, "drain", r, Want::Ok(&[]));
            self.dead_jobs.push(j.id);
            if r.is_ok() {
                self.job_ended(w.status);
            }
        }
    }

    fn job_ended(&mut self, status: u32) {
        let st = match status {
            uapi::job_status::DONE => "done",
            uapi::job_status::TIMEOUT => "timeout",
            uapi::job_status::FAULT => "fault",
            uapi::job_status::ABORTED => "aborted",
            _ => {
                let step = self.step;
                self.stats.flag(step, format!("WAIT: status {status}"));
                "?"
            }
        };
        *self.stats.job_status.entry(st.into()).or_default() += 1;
    }

    fn wait_valid(&mut self) {
        if self.jobs.is_empty() {
            return;
        }
        let i = self.rng.below(self.jobs.len() as u64) as usize;
        let id = self.jobs[i].id;
        if self.jobs[i].out != 0 && self.rng.below(3) == 0 {
            return self.wait_by_syncobj(i);
        }
        let now = ane::device::monotonic_ns();
        let (deadline, what) = match self.rng.below(4) {
            0 => (0, "deadline in the past"),
            1 => (now + 1_000_000, "1 ms"),
            _ => (now + 30_000_000_000, "30 s"),
        };
        let mut w = uapi::Wait {
            job_id: id,
            timeout_ns: deadline,
            ..Default::default()
        };
        let r = fi::wait(self.d.fd(), &mut w);
        self.stats
            .record(self.step, Call::Wait, what, r, Want::Ok(&[Errno::TIME]));
        if r.is_ok() {
            self.jobs.swap_remove(i);
            self.dead_jobs.push(id);
            self.job_ended(w.status);
        }
    }

    /// WAIT is built on the out-fence: once `DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`
    /// saw job `i`'s out-fence signalled (every job ends, within the job
    /// timeout), a WAIT with a deadline in the past must return its status.
    fn wait_by_syncobj(&mut self, i: usize) {
        let (id, out) = (self.jobs[i].id, self.jobs[i].out);
        let (h, p) = ([out], [0u64]);
        let mut a = raw::SyncobjTimelineWait {
            handles: h.as_ptr() as u64,
            points: p.as_ptr() as u64,
            timeout_nsec: crate::job_deadline(),
            count_handles: 1,
            flags: raw::SYNCOBJ_WAIT_ALL,
            ..Default::default()
        };
        let r = loop {
            match raw::syncobj_timeline_wait(self.d.fd(), &mut a) {
                Err(Errno::INTR) => continue,
                r => break r,
            }
        };
        self.stats.record(
            self.step,
            Call::Wait,
            "SYNCOBJ_TIMELINE_WAIT on the out-syncobj",
            r,
            Want::Ok(&[]),
        );
        if r.is_err() {
            return;
        }
        let mut w = uapi::Wait {
            job_id: id,
            timeout_ns: 0,
            ..Default::default()
        };
        let r = raw::wait(self.d.fd(), &mut w);
        self.stats.record(
            self.step,
            Call::Wait,
            "after its out-fence signalled, deadline in the past",
            r,
            Want::Ok(&[]),
        );
        if r.is_ok() {
            self.jobs.swap_remove(i);
            self.dead_jobs.push(id);
            self.job_ended(w.status);
        }
    }

    fn wait_bad(&mut self) {
        let (id, pad) = match self.rng.below(4) {
            0 => (self.rng.pick(&self.dead_jobs).copied().unwrap_or(0), 0),
            1 => (self.rng.next(), 0),
            2 => ([0, u64::MAX][self.rng.below(2) as usize], 0),
            _ => (self.jobs.first().map(|j| j.id).unwrap_or(1), 1),
        };
        if pad == 0 && self.jobs.iter().any(|j| j.id == id) {
            return;
        }
        let mut w = uapi::Wait {
            job_id: id,
            timeout_ns: ane::device::monotonic_ns() + 1_000_000,
            pad,
            ..Default::default()
        };
        let r = fi::wait(self.d.fd(), &mut w);
        self.stats.record(
            self.step,
            Call::Wait,
            &format!("job {id} pad {pad}"),
            r,
            Want::Fail,
        );
    }

    // ------------------------------------------------------------ misc

    fn get_param(&mut self) {
        let (p, pad, want) = match self.rng.below(6) {
            0 => (param::COUNT + self.rng.below(100) as u32, 0, Want::Fail),
            1 => (self.rng.next() as u32 | 0x100, 0, Want::Fail),
            2 => (self.rng.below(param::COUNT as u64) as u32, 1, Want::Fail),
            _ => {
                // Every parameter below COUNT reads on every SoC.
                let p = self.rng.below(param::COUNT as u64) as u32;
                (p, 0, Want::Ok(&[]))
            }
        };
        let mut a = uapi::GetParam {
            param: p,
            pad,
            value: self.rng.next(),
        };
        let r = fi::get_param(self.d.fd(), &mut a);
        self.stats.record(
            self.step,
            Call::GetParam,
            &format!("param {p} pad {pad}"),
            r,
            want,
        );
    }

    /// Uses the other file: BOs and jobs there, then closes it with jobs
    /// in flight, its mappings kept.
    fn other_file(&mut self) {
        if self.other.is_none() {
            match Device::open(self.d.path()) {
                Ok(o) => self.other = Some(o),
                Err(e) => {
                    let step = self.step;
                    self.stats.flag(step, format!("reopen: {e}"));
                    return;
                }
            }
            self.other_bos.clear();
        }
        let Some(o) = self.other.as_ref() else { return };
        match self.rng.below(4) {
            0 | 1 => {
                let mut a = uapi::BoCreate {
                    size: self.page * (1 + self.rng.below(4)),
                    ..Default::default()
                };
                let r = fi::bo_create(o.fd(), &mut a);
                self.stats.record(
                    self.step,
                    Call::BoCreate,
                    "other file",
                    r,
                    Want::Ok(&[Errno::NOSPC, Errno::NOMEM]),
                );
                if r.is_ok() {
                    self.other_bos.push(a.handle);
                }
            }
            2 => {
                // A job on the other file, then close it at once.
                if let Some(hwx) = self.fixtures.first() {
                    let r = (|| -> Result<(), ane::device::Error> {
                        // H14: a synthetic H14 program (an H13 stream
                        // never reaches the firmware).
                        let p = if self.h14 {
                            crate::h14_load(o, 1)?
                        } else {
                            o.load_hwx(hwx)?
                        };
                        let (bos, b) = o.bind_hwx(hwx)?;
                        o.exec(&p, &b, uapi::priority::NORMAL)?;
                        std::mem::forget(bos);
                        std::mem::forget(p);
                        Ok(())
                    })();
                    let r = r.map_err(|e| match e {
                        ane::device::Error::Ioctl { source, .. } => source,
                        _ => Errno::IO,
                    });
                    self.stats.record(
                        self.step,
                        Call::Exec,
                        "other file, closed at once",
                        r,
                        Want::Ok(&[Errno::IO, Errno::BUSY, Errno::NOSPC, Errno::NOMEM]),
                    );
                }
                self.other = None;
                *self
                    .stats
                    .counts
                    .entry((Call::CloseFile, "ok".into()))
                    .or_default() += 1;
            }
            _ => {
                self.other = None;
                *self
                    .stats
                    .counts
                    .entry((Call::CloseFile, "ok".into()))
                    .or_default() += 1;
            }
        }
    }

    /// A random command number of the driver's range (and a few beyond
    /// its last) with random bytes, random direction and size.
    fn random_ioctl(&mut self) {
        // Relative to DRM_COMMAND_BASE (`ioc` adds it): the driver's 7 and
        // a few past its last.
        let nr = self.rng.below(12) as u32;
        // Mostly the right direction and size (else the DRM core refuses
        // it before the driver sees it) and small words (else a pad or
        // flags word refuses it first).
        let cmds = [
            uapi::cmd::GET_PARAM,
            uapi::cmd::BO_CREATE,
            uapi::cmd::BO_INFO,
            uapi::cmd::PROGRAM_CREATE,
            uapi::cmd::PROGRAM_DESTROY,
            uapi::cmd::EXEC,
            uapi::cmd::WAIT,
        ];
        let real = cmds.get(nr as usize).copied();
        let (dir, size) = match real {
            Some(c) if self.rng.chance(70) => (c >> 30, ((c >> 16) & 0x3fff) as usize),
            _ => (
                self.rng.below(4) as u32,
                [0usize, 8, 16, 24, 32, 40, 56, 64, 72, 128][self.rng.below(10) as usize],
            ),
        };
        let mut buf = [0u64; 32];
        for w in buf.iter_mut() {
            *w = match self.rng.below(10) {
                0..=3 => 0,
                4..=6 => self.rng.below(64) << (32 * self.rng.below(2)),
                _ => self.rng.next(),
            };
        }
        // Keep a WAIT from blocking for the age of the universe on a job
        // that happens to exist: the deadline word becomes "now".
        if nr == uapi::nr::WAIT {
            buf[1] = ane::device::monotonic_ns() as u64;
        }
        // Random bytes must not destroy or consume what the pool holds (the
        // pool's later valid calls would then fail): the handle or job id
        // word of DESTROY and WAIT never names a live one.
        if nr == uapi::nr::PROGRAM_DESTROY && self.live_prog(buf[0] as u32) {
            buf[0] ^= 1 << 31;
        }
        if nr == uapi::nr::WAIT && self.jobs.iter().any(|j| j.id == buf[0]) {
            buf[0] ^= 1 << 63;
        }
        let op = uapi::ioc(dir, nr, size);
        let r = fi::armed("random", || dyn_ioctl(&self.d, op, &mut buf));
        if r.is_ok() && nr == uapi::nr::BO_CREATE {
            self.adopt_unknown_bos();
        }
        self.stats
            .record(self.step, Call::Random, &format!("{op:#x}"), r, Want::Any);
        // Whatever it created lives until the file closes.
    }

    /// After a random call created a BO whose handle may not have been
    /// copied back: find live handles the pool does not know (handles are
    /// allocated lowest-free) and adopt them, so no later "stale" pick
    /// names a live BO.
    fn adopt_unknown_bos(&mut self) {
        let max = self
            .bos
            .iter()
            .map(|b| b.handle)
            .chain(self.dead_bos.iter().copied())
            .chain(self.canaries.iter().map(|c| c.handle))
            .max()
            .unwrap_or(0);
        for h in 1..=max + 8 {
            if self.live_bo(h) {
                continue;
            }
            let mut i = uapi::BoInfo {
                handle: h,
                ..Default::default()
            };
            if raw::bo_info(self.d.fd(), &mut i).is_ok() {
                self.dead_bos.retain(|&d| d != h);
                self.bos.push(PBo {
                    handle: h,
                    size: i.size,
                    offset: i.mmap_offset,
                    map: None,
                    map_len: 0,
                    bound: false,
                });
            }
        }
    }

    fn one(&mut self) {
        match self.rng.below(100) {
            0..=9 => self.bo_create_valid(),
            10..=13 => self.bo_create_bad(),
            14..=19 => self.bo_info(),
            20..=25 => self.gem_close_valid(),
            26..=28 => self.gem_close_bad(),
            29..=34 => self.mmap(),
            35..=37 => self.munmap_one(),
            38..=42 => self.program_create(false),
            43..=49 => self.program_create(true),
            50..=52 => self.program_destroy_valid(),
            53..=55 => self.program_destroy_bad(),
            56..=65 => self.exec(false),
            66..=69 => self.exec(true),
            70..=71 => self.exec_chain(false),
            72..=73 => self.exec_chain(true),
            74..=80 => self.wait_valid(),
            81..=83 => self.wait_bad(),
            84..=88 => self.get_param(),
            89..=91 => self.other_file(),
            92 => self.exec_fenced(false),
            93 => self.exec_fenced(true),
            _ => self.random_ioctl(),
        }
    }

    fn calls(&self) -> u64 {
        self.stats.counts.values().sum()
    }
}

/// An ioctl with a command number known only at run time, on `buf`.
fn dyn_ioctl(d: &Device, op: u32, buf: &mut [u64; 32]) -> Result<(), Errno> {
    struct Dyn<'a>(u32, &'a mut [u64; 32]);
    // SAFETY: the buffer is 256 bytes, more than any size the opcode can
    // encode here (at most 128), and the kernel writes at most that.
    unsafe impl rustix::ioctl::Ioctl for Dyn<'_> {
        type Output = ();
        const IS_MUTATING: bool = true;
        fn opcode(&self) -> rustix::ioctl::Opcode {
            self.0 as rustix::ioctl::Opcode
        }
        fn as_ptr(&mut self) -> *mut core::ffi::c_void {
            self.1.as_mut_ptr().cast()
        }
        unsafe fn output_from_ptr(
            _: rustix::ioctl::IoctlOutput,
            _: *mut core::ffi::c_void,
        ) -> rustix::io::Result<()> {
            Ok(())
        }
    }
    // SAFETY: see `Dyn`.
    unsafe { rustix::ioctl::ioctl(d.fd(), Dyn(op, buf)) }
}

fn load_fixtures() -> Vec<ane::hwx::Hwx> {
    FIXTURES.iter().filter_map(|n| crate::fixture(n)).collect()
}

/// Runs one fuzzing process: `calls` calls from `seed`, then drains its
/// jobs and checks its canaries. Returns the counts.
pub fn fuzz_process(path: &str, seed: u64, calls: u64) -> Result<Stats, String> {
    fi::init()?;
    let d = Device::open(path).map_err(|e| e.to_string())?;
    let h14 = crate::is_h14(&d);
    let mutated_exec = !h14 && crate::recovery(&d)? == ane::hw::soc::Recovery::PowerCycle;
    let page = rustix::param::page_size() as u64;
    let bo_max = d.get_param(param::BO_MAX_SIZE).map_err(|e| e.to_string())?;
    let fixtures = load_fixtures();
    if fixtures.len() < FIXTURES.len() {
        // Which fixtures exist changes the sequence: say so for replay.
        println!(
            "fuzz: {} of {} fixtures present",
            fixtures.len(),
            FIXTURES.len()
        );
    }
    let canaries = make_canaries(&d, seed, CANARIES)?;
    let mut f = Fuzzer {
        d,
        other: None,
        other_bos: Vec::new(),
        rng: Rng::new(seed),
        h14,
        mutated_exec,
        h14_mutated_loads: 0,
        page,
        bo_max,
        fixtures,
        bos: Vec::new(),
        progs: Vec::new(),
        jobs: Vec::new(),
        dead_bos: Vec::new(),
        dead_progs: Vec::new(),
        dead_jobs: Vec::new(),
        orphans: Vec::new(),
        canaries,
        syncobjs: Vec::new(),
        stats: Stats::default(),
        step: 0,
    };
    let t0 = std::time::Instant::now();
    while f.calls() < calls {
        f.one();
        f.step += 1;
        // Progress on stderr (the parent collects stdout at the end): a
        // hang shows where it stopped.
        if f.step % 5000 == 0 {
            eprintln!(
                "fuzz: seed {seed:#x}: step {}, {} calls, {:.0} s",
                f.step,
                f.calls(),
                t0.elapsed().as_secs_f64()
            );
        }
        if f.step > calls * 4 {
            break;
        }
    }
    // Drain: every job ends (done, timeout, fault), none hangs.
    f.drain();
    if let Err(e) = check_canaries(&f.canaries) {
        let step = f.step;
        f.stats.flag(step, e);
    }
    Ok(std::mem::take(&mut f.stats))
}

/// Prints a counts table: one row per call, one column per outcome.
pub fn print_table(label: &str, counts: &BTreeMap<(Call, String), u64>) {
    let mut outcomes: Vec<&String> = counts.keys().map(|(_, o)| o).collect();
    outcomes.sort_by_key(|o| (o.as_str() != "ok", o.to_string()));
    outcomes.dedup();
    let mut head = format!("{label:<16}");
    for o in &outcomes {
        head += &format!(" {o:>8}");
    }
    head += &format!(" {:>8}", "total");
    println!("{head}");
    let mut calls: Vec<Call> = counts.keys().map(|(c, _)| *c).collect();
    calls.dedup();
    let mut col_total = vec![0u64; outcomes.len()];
    for c in calls {
        let mut line = format!("{:<16}", c.name());
        let mut t = 0;
        for (k, o) in outcomes.iter().enumerate() {
            let n = counts.get(&(c, (*o).clone())).copied().unwrap_or(0);
            col_total[k] += n;
            t += n;
            line += &format!(" {n:>8}");
        }
        line += &format!(" {t:>8}");
        println!("{line}");
    }
    let mut line = format!("{:<16}", "all");
    for n in &col_total {
        line += &format!(" {n:>8}");
    }
    line += &format!(" {:>8}", col_total.iter().sum::<u64>());
    println!("{line}");
}

/// `--fuzz-child SEED CALLS INDEX [PATH]`: one process of a run. Prints
/// its table and `FUZZCOUNT call outcome n` lines for the parent.
pub fn child_main(args: &[String]) -> ExitCode {
    let seed = args.first().and_then(|s| parse_u64(s)).unwrap_or(1);
    let calls = args.get(1).and_then(|s| parse_u64(s)).unwrap_or(1000);
    let index = args.get(2).and_then(|s| parse_u64(s)).unwrap_or(0);
    let path = args
        .get(3)
        .map(String::as_str)
        .unwrap_or("/dev/accel/accel0");
    match fuzz_process(path, seed, calls) {
        Ok(st) => {
            for ((c, o), n) in &st.counts {
                println!("FUZZCOUNT {} {o} {n}", *c as u8);
            }
            for (s, n) in &st.job_status {
                println!("FUZZJOB {s} {n}");
            }
            print_table(&format!("child {index}"), &st.counts);
            if st.unexpected.is_empty() {
                ExitCode::SUCCESS
            } else {
                println!(
                    "child {index} (seed {seed:#x}): {} unexpected outcome(s)",
                    st.unexpected.len()
                );
                ExitCode::from(1)
            }
        }
        Err(e) => {
            println!("child {index} (seed {seed:#x}): {e}");
            ExitCode::from(1)
        }
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

const CALLS: [Call; 12] = [
    Call::GetParam,
    Call::BoCreate,
    Call::BoInfo,
    Call::GemClose,
    Call::Mmap,
    Call::Munmap,
    Call::ProgramCreate,
    Call::ProgramDestroy,
    Call::Exec,
    Call::Wait,
    Call::CloseFile,
    Call::Random,
];

/// Unbinds and binds the platform device behind `d` (the documented
/// recovery of a T6001 wedged by a DART fault).
fn rebind(d: &Device) -> Result<(), String> {
    let node = d
        .path()
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("accel0")
        .to_string();
    let link = format!("/sys/class/accel/{node}/device");
    let pdev = std::fs::read_link(&link).map_err(|e| format!("{link}: {e}"))?;
    let name = pdev
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("platform device name")?
        .to_string();
    let drv = "/sys/bus/platform/drivers/ane";
    std::fs::write(format!("{drv}/unbind"), &name).map_err(|e| format!("unbind: {e}"))?;
    std::fs::write(format!("{drv}/bind"), &name).map_err(|e| format!("bind: {e}"))
}

/// After the run: the engine must be usable (recovered the documented way
/// if a mutated program legitimately wedged it) and compute correctly.
pub(crate) fn known_good(d: Device) -> Result<(), String> {
    let state = crate::engine_state(&d)?;
    let d = if state == uapi::engine_state::WEDGED_POWER_CYCLE {
        println!("fuzz: engine wedged until a power cycle: waiting for autosuspend");
        crate::wait_suspended(&d)?;
        d
    } else if state == uapi::engine_state::WEDGED_REBIND {
        println!("fuzz: engine wedged until rebind: rebinding");
        rebind(&d)?;
        drop(d);
        // The node comes back, maybe under another minor.
        let mut again = Device::discover();
        for _ in 0..50 {
            if again.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            again = Device::discover();
        }
        again.map_err(|e| format!("after rebind: {e}"))?
    } else {
        d
    };
    let fw = d.get_param(param::FW_STATE).map_err(|e| e.to_string())?;
    if fw != uapi::fw_state::NONE && fw != uapi::fw_state::RUNNING {
        return Err(format!("firmware state {fw} after the run"));
    }
    if fw == uapi::fw_state::RUNNING {
        // T6021: an H13 stream never reaches the firmware and the simulated
        // one computes nothing, so the known-good job is a synthetic H14
        // program's call that completes, the firmware still running.
        let program = crate::h14_load(&d, 0x33).map_err(|e| format!("H14 program: {e}"))?;
        let hwx = crate::fixture("tinygrad_sum.hwx").ok_or(crate::SKIP)?;
        let (_bos, bindings) = d.bind_hwx(&hwx).map_err(|e| e.to_string())?;
        let id = d
            .exec(&program, &bindings, uapi::priority::NORMAL)
            .map_err(|e| format!("H14 EXEC: {e}"))?;
        let st = d
            .wait(
                id,
                std::time::Duration::from_nanos(crate::JOB_TIMEOUT_NS.unsigned_abs()),
            )
            .map_err(|e| e.to_string())?;
        if st != Some(ane::device::JobStatus::Done) {
            return Err(format!("H14 call after the run: {st:?}"));
        }
        println!("fuzz: an H14 call completes after the run (no compute on the simulated T6021)");
        return Ok(());
    }
    // Every parity cell (built programs, no fixtures needed) within its
    // bound, then the compiled sum fixture against the CPU reference.
    let mut exec = ane::parity::DeviceExecutor::new(&d);
    exec.timeout = std::time::Duration::from_nanos(crate::JOB_TIMEOUT_NS.unsigned_abs());
    let cells = ane::parity::cells();
    for c in &cells {
        let r = ane::parity::run_cell(c, &mut exec);
        if r.verdict == ane::parity::Verdict::Fail {
            return Err(format!("parity cell {}: {r:?}", c.name));
        }
    }
    println!(
        "fuzz: {} parity cells within their bounds after the run",
        cells.len()
    );
    use ane::reference::{self as r, Rounding::NearestEven as Rne};
    let add: crate::Reference = |i, _| r::add(&i[0], &i[1], Rne).expect("add");
    match crate::run_fixture(&d, "tinygrad_sum.hwx", 0, &add) {
        Err(e) if e == crate::SKIP => {
            println!("fuzz: no fixtures: the sum fixture was not run");
            Ok(())
        }
        r => r,
    }
}

/// `--fuzz SEED CALLS [PATH]`: the whole run.
pub fn parent_main(args: &[String]) -> ExitCode {
    let seed = args.first().and_then(|s| parse_u64(s)).unwrap_or(1);
    let calls = args.get(1).and_then(|s| parse_u64(s)).unwrap_or(10_000);
    let path = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "/dev/accel/accel0".into());
    let t0 = std::time::Instant::now();
    let d = match Device::open(&path) {
        Ok(d) => d,
        Err(e) => {
            println!("FAIL fuzz: {e}");
            return ExitCode::from(1);
        }
    };
    let soc = d.get_param(param::SOC_ID).unwrap_or(0);
    println!("fuzz: seed {seed:#x}, {calls} calls in {PROCS} processes, soc {soc:#x}");
    let canaries = match make_canaries(&d, seed ^ 0xcafe, CANARIES) {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL fuzz: {e}");
            return ExitCode::from(1);
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            println!("FAIL fuzz: {e}");
            return ExitCode::from(1);
        }
    };
    let mut children = Vec::new();
    for i in 0..PROCS {
        let cs = child_seed(seed, i);
        let n = calls / PROCS + u64::from(i < calls % PROCS);
        println!("fuzz: child {i}: seed {cs:#x} ({n} calls; replay: ane-ioctl-tests --fuzz-child {cs:#x} {n} {i})");
        let c = std::process::Command::new(&exe)
            .arg("--fuzz-child")
            .arg(format!("{cs:#x}"))
            .arg(n.to_string())
            .arg(i.to_string())
            .arg(&path)
            .stdout(std::process::Stdio::piped())
            .spawn();
        match c {
            Ok(c) => children.push((i, cs, c)),
            Err(e) => {
                println!("FAIL fuzz: spawn: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let mut failed = Vec::new();
    let mut total: BTreeMap<(Call, String), u64> = BTreeMap::new();
    let mut jobs: BTreeMap<String, u64> = BTreeMap::new();
    for (i, cs, c) in children {
        let out = match c.wait_with_output() {
            Ok(o) => o,
            Err(e) => {
                failed.push(format!("child {i}: {e}"));
                continue;
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["FUZZCOUNT", c, o, n] => {
                    let call = c.parse::<usize>().ok().and_then(|c| CALLS.get(c).copied());
                    if let (Some(call), Ok(n)) = (call, n.parse::<u64>()) {
                        *total.entry((call, (*o).to_string())).or_default() += n;
                    }
                }
                ["FUZZJOB", s, n] => {
                    *jobs.entry((*s).to_string()).or_default() += n.parse::<u64>().unwrap_or(0);
                }
                _ => println!("{line}"),
            }
        }
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = out.status.signal() {
            failed.push(format!("child {i} (seed {cs:#x}) killed by signal {sig}"));
        } else if !out.status.success() {
            failed.push(format!("child {i} (seed {cs:#x}) failed: {}", out.status));
        }
    }
    print_table("all processes", &total);
    println!(
        "jobs ended: {}",
        jobs.iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Err(e) = check_canaries(&canaries) {
        failed.push(format!("parent canary: {e}"));
    }
    if let Err(e) = known_good(d) {
        failed.push(format!("known-good job after the run: {e}"));
    }
    let n: u64 = total.values().sum();
    let secs = t0.elapsed().as_secs_f64();
    if failed.is_empty() {
        println!("PASS fuzz: seed {seed:#x}, {n} calls, {secs:.1} s, canaries intact, parity cells and known-good job correct");
        ExitCode::SUCCESS
    } else {
        for f in &failed {
            println!("FAIL fuzz: {f}");
        }
        ExitCode::from(1)
    }
}

// ---------------------------------------------------------------- regressions

/// A regression test of a bug the fuzzer found: `Ok` when the driver
/// behaves as documented; `Err(SKIP)` where it does not apply.
type Regression = fn(&Device) -> Result<(), String>;

/// The regressions, by name, with what they check.
pub const REGRESSIONS: &[(&str, &str, Regression)] = &[
    (
        "h14-bad-binding-quarantines",
        "H14: EXEC of a valid program with its input bound to a slot the \
         program does not use is accepted by the kernel (it cannot read \
         the firmware's program format) and the firmware refuses the call \
         with a status; the job must fail alone and the firmware keep \
         running (found by the fuzzer: the driver quarantined \
         the firmware until reboot for every client)",
        h14_bad_binding,
    ),
    (
        "h14-short-output-binding-contained",
        "H14: EXEC of a valid program with its output bound with one page \
         (less than the tensor needs): the job may fail, the firmware \
         keeps running and the next valid job computes",
        h14_short_binding,
    ),
];

/// One EXEC of the sum fixture on H14 with its bindings changed by `f`;
/// after it, the firmware must still run and a valid job compute.
fn h14_exec_then_healthy(
    d: &Device,
    f: impl FnOnce(&mut Vec<uapi::Binding>, &[ane::hwx::HwxTensor]),
) -> Result<(), String> {
    if !crate::is_h14(d) {
        return Err(crate::SKIP.into());
    }
    let hwx = crate::fixture("tinygrad_sum.hwx").ok_or(crate::SKIP)?;
    let program = crate::h14_load(d, 1).map_err(|e| e.to_string())?;
    let (_bos, mut bindings) = d.bind_hwx(&hwx).map_err(|e| e.to_string())?;
    f(&mut bindings, hwx.tensors());
    let mut a = uapi::Exec {
        program: program.handle(),
        priority: uapi::priority::NORMAL,
        binding_count: bindings.len() as u32,
        bindings: bindings.as_ptr() as u64,
        binding_size: std::mem::size_of::<uapi::Binding>() as u32,
        ..Default::default()
    };
    let r = raw::exec(d.fd(), &mut a);
    let how = match r {
        Err(e) => format!("EXEC {}", errno_name(e)),
        Ok(()) => {
            let st = d
                .wait(a.job_id, std::time::Duration::from_secs(30))
                .map_err(|e| e.to_string())?;
            format!("EXEC ok, job {st:?}")
        }
    };
    let fw = d.get_param(param::FW_STATE).map_err(|e| e.to_string())?;
    if fw != uapi::fw_state::RUNNING {
        return Err(format!(
            "{how}; then firmware state {fw} (4 = quarantined until reboot)"
        ));
    }
    let st = crate::h14_run_sum(d, &program)?;
    if st != Ok(ane::device::JobStatus::Done) {
        return Err(format!("{how}; then a valid job: {st:?}"));
    }
    Ok(())
}

fn h14_bad_binding(d: &Device) -> Result<(), String> {
    h14_exec_then_healthy(d, |b, t| {
        let used: Vec<u32> = t.iter().map(|t| t.slot as u32).collect();
        let free = (4..uapi::NUM_SLOTS)
            .find(|s| !used.contains(s))
            .unwrap_or(31);
        if let Some(i) = t
            .iter()
            .position(|t| t.direction == ane::hwx::Direction::Input)
        {
            b[i].slot = free;
        }
    })
}

fn h14_short_binding(d: &Device) -> Result<(), String> {
    let page = rustix::param::page_size() as u64;
    h14_exec_then_healthy(d, |b, t| {
        if let Some(i) = t
            .iter()
            .position(|t| t.direction == ane::hwx::Direction::Output)
        {
            b[i].size = page.min(b[i].size);
            b[i].offset = 0;
        }
    })
}

/// `--fuzz-regress [NAME...]`: runs the named regressions (all without a
/// name). `--fuzz-regress --open NAME...`: the named ones are known open
/// bugs: each must still fail (XFAIL), and one that passes fails the run
/// (it was fixed: move it to the plain list).
pub fn regress_main(args: &[String]) -> ExitCode {
    let (open, names) = match args.first().map(String::as_str) {
        Some("--open") => (true, &args[1..]),
        _ => (false, args),
    };
    let d = match Device::discover() {
        Ok(d) => d,
        Err(e) => {
            println!("FAIL fuzz-regress: {e}");
            return ExitCode::from(1);
        }
    };
    let mut failed = 0;
    for (name, what, f) in REGRESSIONS {
        if !names.is_empty() && !names.iter().any(|n| n == name) {
            continue;
        }
        match (f(&d), open) {
            (Err(e), _) if e == crate::SKIP => println!("SKIP regression {name}: does not apply"),
            (Ok(()), false) => println!("PASS regression {name}"),
            (Err(e), true) => println!("XFAIL regression {name} (open bug): {e}"),
            (Ok(()), true) => {
                println!("FAIL regression {name}: passes now; the bug is fixed, run it as a plain regression");
                failed += 1;
            }
            (Err(e), false) => {
                println!("FAIL regression {name}: {e}\n     ({what})");
                failed += 1;
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
