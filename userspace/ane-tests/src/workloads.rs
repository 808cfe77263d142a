// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Real workload shapes for `ane-bench` (issue 28 item 3), on the
//! simulated T8103 with program execution off, so every figure is the
//! driver's (and the kernel's) own cost:
//!
//! - a program of the Parakeet encoder's size (omarchy-ane runs it on an
//!   M1: one 458,018,816-byte program of 13,701 TDs), synthesized at run
//!   time from valid descriptors ([`ane::builder::conv1x1_stream`]): BO
//!   create, filling it, PROGRAM_CREATE (staging and validation), the
//!   first EXEC+WAIT and a second, and closing, each beside a `memcpy` of
//!   the same bytes in the same run, with the simulator's page-table calls
//!   (one map and one unmap call per buffer is the goal: hardware makes
//!   one IOMMU call for each) and the memory the kernel holds for it;
//! - a chain of 77 one-layer programs sharing resident buffers, as an MLP
//!   runs: each layer's output BO is the next one's input, one EXEC+WAIT
//!   per layer.
//!
//! Under QEMU's instruction-counting clock a guest nanosecond is one
//! instruction; `u` names the unit.

use ane::builder::{self, Activation};
use ane::device::{raw, tensor_binding, Device, Program};
use ane::hw::uapi;
use half::f16;

use crate::sim::sim_counter;

/// The Parakeet encoder program omarchy-ane runs (anchors.md §4).
const PARAKEET_BYTES: u64 = 458_018_816;
const PARAKEET_TDS: u32 = 13_701;

/// Layers of the MLP omarchy-ane times at 32.17 ms.
const MLP_LAYERS: usize = 77;

/// One EXEC and the WAIT for it; `Done` or a panic (a benchmark, not a
/// test: a failed job makes its figures meaningless).
pub fn exec_wait(d: &Device, prog: &Program<'_>, bindings: &[uapi::Binding]) {
    let id = d
        .exec(prog, bindings, uapi::priority::NORMAL)
        .expect("exec");
    wait_done(d, id);
}

/// EXEC+WAIT as a client waiting through a syncobj does it: EXEC with an
/// out-syncobj, `DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT` on it, then WAIT with a
/// deadline in the past to collect the status (which must not sleep).
/// Prints the mean per job beside `exec_wait`'s.
pub fn fence_path(d: &Device, prog: &Program<'_>, bindings: &[uapi::Binding], u: &str, mode: &str) {
    const RUNS: u64 = 2_000;
    let s = d.syncobj(false).expect("syncobj");
    let h = [s.handle()];
    let p = [0u64];
    let fences = ane::device::Fences {
        wait: Vec::new(),
        signal: Some((&s, 0)),
    };
    let one = || {
        let id = d
            .exec_after(prog, bindings, uapi::priority::NORMAL, &fences)
            .expect("exec");
        let mut w = raw::SyncobjTimelineWait {
            handles: h.as_ptr() as u64,
            points: p.as_ptr() as u64,
            timeout_nsec: ane::device::monotonic_ns() + 10_000_000_000,
            count_handles: 1,
            flags: raw::SYNCOBJ_WAIT_ALL,
            ..Default::default()
        };
        raw::syncobj_timeline_wait(d.fd(), &mut w).expect("syncobj wait");
        let mut w = uapi::Wait {
            job_id: id,
            timeout_ns: 0,
            ..Default::default()
        };
        raw::wait(d.fd(), &mut w).expect("WAIT after the fence");
        assert_eq!(w.status, uapi::job_status::DONE);
    };
    let timed = |f: &dyn Fn()| {
        for _ in 0..20 {
            f();
        }
        let t = now();
        for _ in 0..RUNS {
            f();
        }
        (now() - t) / RUNS
    };
    let fenced = timed(&one);
    let plain = timed(&|| exec_wait(d, prog, bindings));
    println!(
        "exec+wait through a syncobj ({mode}): EXEC with an out-syncobj, SYNCOBJ_TIMELINE_WAIT, WAIT past its deadline {fenced} {u} per job; EXEC+WAIT {plain} {u}"
    );
}

/// The WAIT for job `id` (up to 10 s); `Done` or a panic.
fn wait_done(d: &Device, id: u64) -> uapi::Wait {
    let mut w = uapi::Wait {
        job_id: id,
        timeout_ns: ane::device::monotonic_ns() + 10_000_000_000,
        ..Default::default()
    };
    raw::wait(d.fd(), &mut w).expect("wait");
    assert_eq!(w.status, uapi::job_status::DONE);
    w
}

/// The guest clock in nanoseconds (instructions under icount).
fn now() -> u64 {
    ane::device::monotonic_ns() as u64
}

/// The simulator's page-table calls so far: (maps, unmaps); zeros on
/// hardware.
fn pt_calls() -> (u64, u64) {
    (
        sim_counter("maps").unwrap_or(0),
        sim_counter("unmaps").unwrap_or(0),
    )
}

/// A `/proc/meminfo` field in KiB.
fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `a / b` with two decimals.
fn ratio(a: u64, b: u64) -> String {
    format!("{:.2}", a as f64 / b.max(1) as f64)
}

/// Runs `f`; its result and how long it took on the guest clock.
fn timed<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let t = now();
    let r = f();
    (r, now() - t)
}

/// Copies `src` into `dst` (the same length) 4 KiB at a time as the
/// x86_64 kernel's `copy_page` copies a page, a second reference for the
/// private copy PROGRAM_CREATE makes with it: with the CPU's `rep_good`
/// flag one `rep movsq` per page, without it (as under QEMU's TCG) the
/// kernel's unrolled loop, eight 64-bit loads then eight stores per 64
/// bytes with a prefetch. Under an instruction-counting clock the two
/// differ from glibc's vector `memcpy` by how many instructions a byte
/// takes, not by the work. Returns which of the two ran; the bytes past
/// the last whole page are copied with `copy_from_slice`.
#[cfg(target_arch = "x86_64")]
fn kernel_page_copy(dst: &mut [u8], src: &[u8]) -> &'static str {
    const PAGE: usize = 4096;
    let rep_good = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "rep_good"));
    let len = src.len().min(dst.len());
    let whole = len / PAGE * PAGE;
    for (d, s) in dst[..whole]
        .chunks_exact_mut(PAGE)
        .zip(src[..whole].chunks_exact(PAGE))
    {
        // SAFETY: `d` and `s` are 4 KiB each and do not overlap (one is
        // borrowed mutably); the assembly reads 4 KiB from `s` (and
        // prefetches, which never faults) and writes 4 KiB to `d`, and
        // touches no other memory or the stack.
        unsafe {
            if rep_good {
                core::arch::asm!(
                    "rep movsq",
                    inout("rcx") PAGE / 8 => _,
                    inout("rsi") s.as_ptr() => _,
                    inout("rdi") d.as_mut_ptr() => _,
                    options(nostack, preserves_flags),
                );
            } else {
                core::arch::asm!(
                    "2:",
                    "dec {n}",
                    "mov {a}, [{s}]",
                    "mov {b}, [{s} + 8]",
                    "mov {c}, [{s} + 16]",
                    "mov {e}, [{s} + 24]",
                    "mov {f}, [{s} + 32]",
                    "mov {g}, [{s} + 40]",
                    "mov {h}, [{s} + 48]",
                    "mov {i}, [{s} + 56]",
                    "prefetcht0 [{s} + 320]",
                    "mov [{d}], {a}",
                    "mov [{d} + 8], {b}",
                    "mov [{d} + 16], {c}",
                    "mov [{d} + 24], {e}",
                    "mov [{d} + 32], {f}",
                    "mov [{d} + 40], {g}",
                    "mov [{d} + 48], {h}",
                    "mov [{d} + 56], {i}",
                    "lea {s}, [{s} + 64]",
                    "lea {d}, [{d} + 64]",
                    "jnz 2b",
                    n = inout(reg) PAGE / 64 => _,
                    s = inout(reg) s.as_ptr() => _,
                    d = inout(reg) d.as_mut_ptr() => _,
                    a = out(reg) _,
                    b = out(reg) _,
                    c = out(reg) _,
                    e = out(reg) _,
                    f = out(reg) _,
                    g = out(reg) _,
                    h = out(reg) _,
                    i = out(reg) _,
                    options(nostack),
                );
            }
        }
    }
    dst[whole..len].copy_from_slice(&src[whole..len]);
    if rep_good {
        "rep movsq per page"
    } else {
        "the unrolled loop, no rep_good"
    }
}

/// The Parakeet-size program, measured. `u` is the unit of the guest
/// clock ("insn" or "ns").
pub fn parakeet(d: &Device, u: &str) {
    // The same TD over and over, each reading its own stretch of the
    // coefficients; 128 → 128 channels over a 1×32 tensor.
    let probe = builder::conv1x1_stream(128, 128, 1, 32, PARAKEET_TDS, 1 << 20).expect("probe");
    let weights = PARAKEET_BYTES - probe.weights_offset();
    let mut p = builder::conv1x1_stream(128, 128, 1, 32, PARAKEET_TDS, weights).expect("program");
    // Never touched: the benchmark writes the coefficients into the BO.
    drop(std::mem::take(&mut p.weights));
    let total = PARAKEET_BYTES;
    let len = total as usize;
    let woff = p.weights_offset() as usize;
    println!(
        "parakeet-size program: {total} bytes ({} of {} TDs, {} of weights), built at run time",
        p.tsk.len(),
        p.td_count,
        total - p.weights_offset()
    );

    let calls0 = pt_calls();
    let (bo, create) = timed(|| d.bo_create(total).expect("BO"));
    let mut bo = bo;
    let calls1 = pt_calls();
    let pages = total.div_ceil(rustix::param::page_size() as u64);
    let (_, fill) = timed(|| {
        let m = bo.map().expect("map");
        m[..p.tsk.len()].copy_from_slice(&p.tsk);
        m[p.tsk.len()..woff].fill(0);
        for (i, c) in m[woff..len].chunks_mut(8).enumerate() {
            let v = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    });
    println!(
        "parakeet BO_CREATE: {create} {u} ({} per page of {pages}), page-table map calls {} (goal 1 per buffer); mmap and fill by the caller {fill} {u}",
        create / pages,
        calls1.0 - calls0.0
    );

    // memcpy of the same bytes, out of the same BO, into memory touched
    // beforehand (so no page fault is timed).
    let memcpy = {
        let mut dst = vec![1u8; len];
        let m = bo.map().expect("map");
        let (_, t) = timed(|| dst.copy_from_slice(std::hint::black_box(&m[..len])));
        std::hint::black_box(&dst);
        t
    };
    println!("parakeet memcpy of the program's {total} bytes (user space, same run): {memcpy} {u}");
    // The second reference: the same bytes copied as the kernel's page
    // copy (which PROGRAM_CREATE's private copy uses) copies them.
    #[cfg(target_arch = "x86_64")]
    let kcopy = {
        let mut dst = vec![1u8; len];
        let m = bo.map().expect("map");
        let (how, t) = timed(|| kernel_page_copy(&mut dst, std::hint::black_box(&m[..len])));
        assert!(dst[..] == m[..len], "the kernel-style copy differs");
        println!(
            "parakeet second reference, the same bytes copied as the x86 kernel's copy_page copies pages ({how}; user space, same run): {t} {u} = {}x the memcpy",
            ratio(t, memcpy)
        );
        t
    };

    let shmem0 = meminfo("Shmem:");
    let free0 = meminfo("MemFree:");
    let calls0 = pt_calls();
    let tsk = p.tsk_size();
    let (prog, create_prog) = timed(|| {
        d.program_create(&bo, 0, total, p.td_size, p.td_count, tsk)
            .expect("program")
    });
    let calls1 = pt_calls();
    let shmem1 = meminfo("Shmem:");
    let free1 = meminfo("MemFree:");
    println!(
        "parakeet PROGRAM_CREATE (stage, validate, private copy): {create_prog} {u} = {}x the memcpy (goal <= 1.00x); page-table map calls {} (goal 1)",
        ratio(create_prog, memcpy),
        calls1.0 - calls0.0
    );
    #[cfg(target_arch = "x86_64")]
    println!(
        "parakeet PROGRAM_CREATE against the second reference (the kernel's page copy of the same bytes): {}x",
        ratio(create_prog, kcopy)
    );
    // The private copy is not shmem (it comes from the page allocator in
    // large chunks): what it costs is what MemFree lost.
    let used = free0.saturating_sub(free1);
    println!(
        "parakeet memory: kernel's private copy {used} KiB (MemFree) for the {} KiB program (+{} KiB), of which shmem {} KiB; the caller's BO ({} KiB) may be closed once the program exists",
        total / 1024,
        used.saturating_sub(total / 1024),
        shmem1.saturating_sub(shmem0),
        total / 1024
    );

    let (bos, bindings) = d.bind_program(&p).expect("bindings");
    let (_, first) = timed(|| exec_wait(d, &prog, &bindings));
    let (_, second) = timed(|| exec_wait(d, &prog, &bindings));
    println!("parakeet EXEC+WAIT (program execution off): first {first} {u}, second {second} {u}");

    let calls0 = pt_calls();
    let (_, destroy) = timed(|| drop(prog));
    let calls1 = pt_calls();
    let (_, close) = timed(|| drop(bo));
    let calls2 = pt_calls();
    drop(bos);
    println!(
        "parakeet close: PROGRAM_DESTROY {destroy} {u} ({} unmap calls), the caller's BO (munmap, GEM_CLOSE) {close} {u} ({} unmap calls) (goal 1 unmap call per buffer, none per page); together {}x the memcpy",
        calls1.1 - calls0.1,
        calls2.1 - calls1.1,
        ratio(destroy + close, memcpy)
    );

    // The breakdown (after the close, so the guest holds one large buffer
    // at a time): the same TDs over one TD's coefficients (every TD reads
    // the same 32 KiB), so PROGRAM_CREATE stages and validates the same
    // stream but copies almost no weights; and a BO of the private copy's
    // size, created and closed, for what its allocation costs.
    {
        let one = builder::KernelLayout::new(128, 128)
            .expect("layout")
            .total_bytes() as u64;
        let small = builder::conv1x1_stream(128, 128, 1, 32, PARAKEET_TDS, one).expect("small");
        let size = small.weights_offset() + one;
        let mut sbo = d.bo_create(size).expect("BO");
        sbo.map().expect("map")[..small.tsk.len()].copy_from_slice(&small.tsk);
        let (sp, stream_only) = timed(|| {
            d.program_create(
                &sbo,
                0,
                size,
                small.td_size,
                small.td_count,
                small.tsk_size(),
            )
        });
        drop(sp.expect("small program"));
        drop(sbo);
        let (alloc, alloc_t) = timed(|| d.bo_create(total + 0x4000).expect("BO"));
        drop(alloc);
        // The private copy's pages are allocated and written in one pass
        // (not zeroed first): the rest of PROGRAM_CREATE is that pass.
        let weights = create_prog.saturating_sub(stream_only);
        println!(
            "parakeet PROGRAM_CREATE breakdown: the same {} TDs over 32 KiB of weights (stage, validate, a private copy of 10 MiB) {stream_only} {u}; the rest, allocating and writing the private copy's {} bytes of weights in one pass, {weights} {u} = {}x the memcpy; for comparison, a zeroed BO of the copy's size (BO_CREATE) {alloc_t} {u}",
            p.td_count,
            total - p.weights_offset(),
            ratio(weights, memcpy)
        );
    }
}

/// 77 one-layer programs (256 → 256, ReLU, batch 32) in a chain over
/// two resident buffers: layer k reads the buffer layer k−1 wrote. Prints
/// per-layer figures: PROGRAM_CREATE, and EXEC+WAIT of the chain.
pub fn mlp_chain(d: &Device, u: &str, mode: &str) {
    let (features, batch) = (256usize, 32usize);
    let w: Vec<f16> = (0..features * features)
        .map(|i| f16::from_f32(((i * 37 % 101) as f32 - 50.0) / 4096.0))
        .collect();
    let layers: Vec<builder::Program> = (0..MLP_LAYERS)
        .map(|_| {
            builder::linear_with(batch, features, features, &w, Activation::Relu).expect("layer")
        })
        .collect();
    let t = now();
    let progs: Vec<Program<'_>> = layers
        .iter()
        .map(|l| d.load_program(l).expect("program"))
        .collect();
    let create = (now() - t) / MLP_LAYERS as u64;
    // Two resident activation buffers, ping-pong: each layer's input is the
    // previous layer's output BO, bound again without a copy.
    let x = layers[0].tensor("x").expect("x");
    let out = layers[0].tensor("out").expect("out");
    let bufs = [
        d.bo_create(x.buffer_size).expect("a"),
        d.bo_create(out.buffer_size).expect("b"),
    ];
    let bindings: Vec<[uapi::Binding; 2]> = (0..MLP_LAYERS)
        .map(|k| {
            let (i, o) = (&bufs[k % 2], &bufs[(k + 1) % 2]);
            [tensor_binding(x, i), tensor_binding(out, o)]
        })
        .collect();
    let run = || {
        for (p, b) in progs.iter().zip(&bindings) {
            exec_wait(d, p, b);
        }
    };
    let per_exec = passes(run);
    println!(
        "mlp chain ({mode}, {MLP_LAYERS} programs of {features}->{features}, batch {batch}, 2 resident buffers): PROGRAM_CREATE {create} {u} per program; one EXEC+WAIT per program: first pass {} {u} per program, then {} {u} per program{}; whole chain {} {u}",
        per_exec.first / MLP_LAYERS as u64,
        per_exec.per_pass / MLP_LAYERS as u64,
        per_exec.counts(MLP_LAYERS as u64),
        per_exec.per_pass
    );
    // The same 77 programs as one chained EXEC (one job, one WAIT).
    let steps: Vec<(&Program<'_>, &[uapi::Binding])> = progs
        .iter()
        .zip(&bindings)
        .map(|(p, b)| (p, &b[..]))
        .collect();
    let chained = passes(|| exec_chain_wait(d, &steps));
    println!(
        "mlp chain ({mode}, the same {MLP_LAYERS} programs as one chained EXEC): first pass {} {u} per program, then {} {u} per program{}; whole chain {} {u} = {}x one EXEC per program (goal < 1.00x; omarchy-ane on an M1, add+ReLU: 0.160 ms chained against 0.679 ms per op = 0.24x)",
        chained.first / MLP_LAYERS as u64,
        chained.per_pass / MLP_LAYERS as u64,
        chained.counts(MLP_LAYERS as u64),
        chained.per_pass,
        ratio(chained.per_pass, per_exec.per_pass)
    );
}

/// One chained EXEC of `steps` and the WAIT for it; every step DONE or a
/// panic.
fn exec_chain_wait(d: &Device, steps: &[(&Program<'_>, &[uapi::Binding])]) {
    let id = d
        .exec_chain(steps, uapi::priority::NORMAL)
        .expect("exec chain");
    let w = wait_done(d, id);
    assert_eq!(w.steps_done as usize, steps.len());
}

/// Passes of a workload: the first, then the mean of [`PASSES`] with the
/// register accesses and the client's wake-ups over them.
struct Passes {
    first: u64,
    per_pass: u64,
    /// Register reads and writes over the measured passes (simulator).
    regs: Option<(u64, u64)>,
    /// The client's sleeps (voluntary context switches) over them.
    wakeups: u64,
}

/// Measured passes after the first.
const PASSES: u64 = 10;

impl Passes {
    /// Per `per` (programs of a pass): register reads and writes, and the
    /// client's wake-ups, as text.
    fn counts(&self, per: u64) -> String {
        let n = PASSES * per;
        let regs = self.regs.map_or(String::new(), |(r, w)| {
            format!(", {} reads, {} writes", r / n, w / n)
        });
        format!(
            "{regs}, {} wake-ups of the client per pass",
            crate::milli(self.wakeups * 1000 / PASSES)
        )
    }
}

/// Runs `run` once, then [`PASSES`] times measured.
fn passes(run: impl Fn()) -> Passes {
    let (_, first) = timed(&run);
    let regs0 = sim_counter("reads").ok().zip(sim_counter("writes").ok());
    let sched0 = crate::sched_counters();
    let (_, all) = timed(|| {
        for _ in 0..PASSES {
            run();
        }
    });
    let sched1 = crate::sched_counters();
    let regs = regs0
        .zip(sim_counter("reads").ok().zip(sim_counter("writes").ok()))
        .map(|((r0, w0), (r1, w1))| (r1.wrapping_sub(r0), w1.wrapping_sub(w0)));
    Passes {
        first,
        per_pass: all / PASSES,
        regs,
        wakeups: sched1.voluntary - sched0.voluntary,
    }
}

/// Elementwise add then ReLU over one 64x64 fp16 plane (the pair the issue
/// quotes from omarchy-ane: 0.160 ms chained against 0.679 ms per op on
/// an M1): the add's output BO is the ReLU's input. One EXEC per op
/// against one chained EXEC, per pair.
pub fn add_relu(d: &Device, u: &str, mode: &str) {
    with_add_relu(d, |per_op, chained| {
        let per_op = passes(per_op);
        let chained = passes(chained);
        println!(
            "add+relu ({mode}, 64x64 fp16): one EXEC per op {} {u} per pair{}; one chained EXEC {} {u} per pair{}; chained / per op {}x (goal < 1.00x; omarchy-ane on an M1: 0.24x)",
            per_op.per_pass,
            per_op.counts(1),
            chained.per_pass,
            chained.counts(1),
            ratio(chained.per_pass, per_op.per_pass)
        );
    });
}

/// `ANE_BENCH_PROFILE=chain|perop`: `runs` pairs of add+ReLU, chained or
/// one EXEC per op, between two calls of `mark` (after 20 unmarked ones).
pub fn add_relu_profile(d: &Device, chain: bool, runs: u32, mark: &dyn Fn() -> u32) {
    with_add_relu(d, |per_op, chained| {
        let pair: &dyn Fn() = if chain { &chained } else { &per_op };
        for _ in 0..20 {
            pair();
        }
        mark();
        for _ in 0..runs {
            pair();
        }
        mark();
    });
}

/// Builds the add and ReLU programs and their buffers, and hands `f` one
/// pair run one EXEC per op and one pair run as a chained EXEC.
fn with_add_relu(d: &Device, f: impl FnOnce(&dyn Fn(), &dyn Fn())) {
    let shape = ane::tensor::Shape::new(1, 1, 64, 64).expect("shape");
    let add = builder::add(&shape).expect("add");
    let relu = builder::relu(&shape).expect("relu");
    let (pa, pr) = (
        d.load_program(&add).expect("add program"),
        d.load_program(&relu).expect("relu program"),
    );
    let t = |p: &builder::Program, n: &str| p.tensor(n).cloned().expect("tensor");
    let (a, b, sum, x, out) = (
        t(&add, "a"),
        t(&add, "b"),
        t(&add, "out"),
        t(&relu, "x"),
        t(&relu, "out"),
    );
    let bo = |size| d.bo_create(size).expect("BO");
    let (ba, bb, bs, bo_out) = (
        bo(a.buffer_size),
        bo(b.buffer_size),
        bo(sum.buffer_size.max(x.buffer_size)),
        bo(out.buffer_size),
    );
    let add_b = [
        tensor_binding(&a, &ba),
        tensor_binding(&b, &bb),
        tensor_binding(&sum, &bs),
    ];
    let relu_b = [tensor_binding(&x, &bs), tensor_binding(&out, &bo_out)];
    let per_op = || {
        exec_wait(d, &pa, &add_b);
        exec_wait(d, &pr, &relu_b);
    };
    let steps: [(&Program<'_>, &[uapi::Binding]); 2] = [(&pa, &add_b), (&pr, &relu_b)];
    let chained = || exec_chain_wait(d, &steps);
    f(&per_op, &chained);
}
