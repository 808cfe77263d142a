// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Jobs: one execution of a program with a set of buffer bindings, or a
//! chain of such steps run back to back.
//!
//! EXEC checks every binding against its BO and, on H13, against the
//! program's validated summary (each slot the program uses is bound, large
//! enough, with the right direction; nothing else is bound), builds the
//! slot table of device addresses (H13) or the call's buffer list (H14),
//! and queues the job on the engine. The job holds references to the program and
//! to every BO it uses, and a runtime-PM reference ([`JobRes`]), until it
//! ends — so closing handles, destroying the program or closing the file
//! while it runs frees nothing the engine is using. When it ends the engine
//! takes those references away: a finished job nobody waits for keeps only
//! its status, and a failed one's buffers stay with the engine until it is
//! proven stopped.
//!
//! A chain is a list of [`Job`]s, one per step, each holding its own
//! program, buffers and slot table; every step is checked before any is
//! queued. The engine schedules the first step and, while each step ends
//! DONE, runs the next one at once without giving the engine to another
//! job. The last step (the tail) stands for the chain: it alone is in the
//! file's list under the job id, its end wakes WAIT, and it counts the steps
//! that ended DONE. A step that fails ends the chain there: the steps after
//! it are aborted, the tail taking the failed step's status and fault.
//!
//! Fences (DRM syncobjs): every job has a `dma_fence` ([`Fence`], held by
//! the tail), its out-fence. It is signalled in one place, [`Job::end`] of
//! the tail, with the chain's status mapped to an error, after the status
//! is recorded; and a [`Fence`] dropped unsignalled signals `-ECANCELED`.
//! An EXEC may name a syncobj that gets the out-fence, and syncobjs whose
//! fences the job waits for ([`InFences`]).
//!
//! WAIT is built on the out-fence: it waits for that fence, as a
//! `DRM_IOCTL_SYNCOBJ_WAIT` on the job's out-syncobj would, until an
//! absolute `CLOCK_MONOTONIC` deadline, then reports the status recorded
//! before the fence signalled. So WAIT and a syncobj wait cannot disagree,
//! and a client that waited for many jobs' syncobjs at once collects each
//! status with a WAIT whose deadline has passed, which never sleeps. A
//! job's final status is reported once, then the job is forgotten.
//!
//! A job with
//! in-fences that have not all signalled is parked with the engine
//! ([`crate::engine::Engine::park`]) and EXEC returns; the fences'
//! callbacks count down, and the last one queues the engine's fence work,
//! which submits the job ([`deps_ready`]), or ends it ABORTED when a fence
//! failed or the wait was cancelled (file closed, device unbound).

use core::{
    ffi::{c_int, c_void},
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
};

use kernel::{
    prelude::*,
    sync::{aref::ARef, new_mutex, Arc, Mutex},
    time::{msecs_to_jiffies, Jiffies},
};

use crate::engine::Engine;
use crate::ext::accel::{Device, File};
use crate::ext::fence::{self, Armed, Fence, FenceRef, InFences, OutSyncobj, WaitEnd};
use crate::ext::pm::PmRef;
use crate::gem::{self, Bo};
use crate::hw::fw::msg::{IoKind, IoRef};
use crate::hw::td::{SlotUsage, BAR_SLOTS, SLOT_COMMAND, SLOT_KERNEL};
use crate::hw::uapi::{self, bind, job_status};
use crate::program::Program;
use crate::uarray;
use crate::vm::Vm;
use crate::AneDriver;

/// Jobs a file may have queued or unwaited at once.
pub(crate) const MAX_JOBS_PER_FILE: usize = 64;

/// Device addresses of buffers must be 64-byte aligned (the DMA granule).
const BIND_ALIGN: u64 = 64;

/// One queued or finished job.
#[pin_data]
pub(crate) struct Job {
    /// The id returned by EXEC.
    pub(crate) id: u64,
    /// Which file submitted it (for fair scheduling).
    pub(crate) owner: usize,
    /// UAPI priority.
    pub(crate) priority: u32,
    /// Device address per buffer slot: built once, in place, by EXEC's
    /// checks (boxed, so that moving a step or a job moves a pointer, not
    /// the 256-byte table).
    pub(crate) bars: KBox<[u64; BAR_SLOTS]>,
    /// H14: the call's buffers (empty on H13).
    pub(crate) io: KVec<IoRef>,
    #[pin]
    res: Mutex<Option<JobRes>>,
    cancelled: AtomicBool,
    /// Its file's engine time.
    usage: Arc<Usage>,
    /// When EXEC queued it, the engine was handed it, its end was seen
    /// (`CLOCK_MONOTONIC` ns, 0 until then).
    times: [AtomicU64; 3],
    /// Status and fault, PENDING until the step ended.
    #[pin]
    state: Mutex<(u32, u64)>,
    /// The chain's next step; `None` for the last (or only) one.
    next: Option<Arc<Job>>,
    /// The chain's last step, which stands for the chain; `None` for that
    /// step itself (and for a job of one program).
    tail: Option<Arc<Job>>,
    /// On the tail: how many steps of the chain ended DONE.
    steps_done: AtomicU32,
    /// On the tail: the out-fence, signalled (and dropped) when the chain
    /// ends.
    #[pin]
    fence: Mutex<Option<Fence>>,
    /// On the tail: a reference to the out-fence, which WAIT waits for.
    done: Option<FenceRef>,
    /// On the tail: the in-fences, from EXEC until the last signalled (the
    /// fence work takes them).
    #[pin]
    deps: Mutex<Option<InFences>>,
}

/// What a job keeps alive until it ended: its program, address space,
/// buffers and a runtime-PM reference.
pub(crate) struct JobRes {
    /// The program.
    pub(crate) program: Arc<Program>,
    /// The address space the job runs in.
    pub(crate) vm: Arc<Vm>,
    _bos: KVec<ARef<Bo>>,
    pm: Option<PmRef>,
}

impl JobRes {
    /// Gives up the runtime-PM reference (a failed job whose buffers the
    /// engine keeps must not keep the device from power-cycling).
    pub(crate) fn drop_pm(&mut self) {
        self.pm = None;
    }

    /// The job's buffers; the program, the address space and the PM
    /// reference are dropped.
    pub(crate) fn into_bos(self) -> KVec<ARef<Bo>> {
        self._bos
    }
}

impl Job {
    /// Takes the job's resources for running it; `None` if they were taken
    /// already.
    pub(crate) fn take_res(&self) -> Option<JobRes> {
        self.res.lock().take()
    }

    /// The step that stands for this step's chain (itself for the last
    /// step or a job of one program).
    fn chain(&self) -> &Job {
        self.tail.as_deref().unwrap_or(self)
    }

    /// The chain's next step, to run once this one ended DONE.
    pub(crate) fn next(&self) -> Option<Arc<Job>> {
        self.next.clone()
    }

    /// Stops waiting for the in-fences, if the job still does: the job then
    /// ends ABORTED (from the engine's fence work).
    pub(crate) fn cancel_deps(&self) {
        if let Some(d) = self.chain().deps.lock().as_ref() {
            d.cancel();
        }
    }

    /// Whether the submitting file went away before the job ran.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.chain().cancelled.load(Ordering::Acquire)
    }

    /// Notes that the engine was handed the job now (and, for a chain's
    /// first step, the chain).
    pub(crate) fn mark_started(&self) {
        let now = crate::ext::time::monotonic_ns() as u64;
        // The chain's start is its first step's: the tail keeps the time
        // an earlier step gave it.
        let _ =
            self.chain().times[1].compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        if self.tail.is_some() {
            self.times[1].store(now, Ordering::Relaxed);
        }
    }

    /// Records the step's end. DONE: the engine goes on with the next step,
    /// if any. Anything else ends the chain: the steps after this one never
    /// run (their resources are released), and the chain reports this
    /// step's status and fault.
    pub(crate) fn complete(&self, status: u32, fault: u64) {
        if status == job_status::DONE {
            // Before the tail's state: a WAIT that returned counts it.
            self.chain().steps_done.fetch_add(1, Ordering::Relaxed);
            self.end(status, fault);
            return;
        }
        self.end(status, fault);
        let mut next = self.next.clone();
        while let Some(j) = next {
            next = j.next.clone();
            if next.is_none() {
                j.end(status, fault);
            } else {
                j.end(job_status::ABORTED, 0);
            }
        }
    }

    /// Records the end of this step and wakes its waiters; resources not
    /// taken by the engine are released. The chain's time (from its first
    /// step's start to its end) counts for the file once, at the tail.
    fn end(&self, status: u32, fault: u64) {
        let ended = crate::ext::time::monotonic_ns() as u64;
        self.times[2].store(ended, Ordering::Relaxed);
        let started = self.times[1].load(Ordering::Relaxed);
        if started != 0 && self.tail.is_none() {
            // Before the state: a WAIT that returned counts this job.
            self.usage
                .busy_ns
                .fetch_add(ended.saturating_sub(started), Ordering::Relaxed);
        }
        drop(self.take_res());
        // Recorded before the fence signals: whoever saw the fence
        // signalled (WAIT, or a syncobj wait followed by a WAIT that does
        // not sleep) finds the status. The state's lock orders the two.
        *self.state.lock() = (status, fault);
        if self.tail.is_none() {
            // The chain ended: the one place its out-fence is signalled,
            // which wakes WAIT and every syncobj waiter. Taken first: its
            // callbacks do not run under the lock.
            let f = self.fence.lock().take();
            if let Some(f) = f {
                f.signal(fence::status_error(status));
            }
        }
    }
}

/// A file's use of the engine, for its fdinfo (`drm-engine-ane`).
pub(crate) struct Usage {
    /// Nanoseconds its jobs held the engine: from the push to the end seen,
    /// the two times WAIT reports, summed over every job that started.
    busy_ns: AtomicU64,
}

impl Usage {
    /// Nothing used yet.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                busy_ns: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// The engine time of the file's ended jobs, in ns.
    pub(crate) fn busy_ns(&self) -> u64 {
        self.busy_ns.load(Ordering::Relaxed)
    }
}

/// The jobs of one file.
#[pin_data(PinnedDrop)]
pub(crate) struct Jobs {
    next_id: AtomicU64,
    #[pin]
    list: Mutex<KVec<Arc<Job>>>,
}

impl Jobs {
    /// No jobs.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            next_id: AtomicU64::new(1),
            list <- new_mutex!(KVec::new()),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for Jobs {
    fn drop(self: Pin<&mut Self>) {
        // The file is closing: jobs that have not run yet are skipped, and
        // those waiting for in-fences stop waiting.
        for j in self.list.lock().iter() {
            j.cancelled.store(true, Ordering::Release);
            j.cancel_deps();
        }
    }
}

/// Reads a binding array (`count` elements of `size` bytes at `addr`),
/// handing each binding to `each` as it is read (no copy of the array).
fn read_bindings(
    addr: u64,
    count: u32,
    size: u32,
    mut each: impl FnMut(&uapi::Binding) -> Result,
) -> Result {
    let ours = core::mem::size_of::<uapi::Binding>();
    uarray::read_each(addr, count as usize, BAR_SLOTS, size, ours, |b| {
        each(&uapi::Binding {
            slot: uarray::u32_at(b, 0)?,
            bo_handle: uarray::u32_at(b, 4)?,
            offset: uarray::u64_at(b, 8)?,
            size: uarray::u64_at(b, 16)?,
            flags: uarray::u32_at(b, 24)?,
            pad: uarray::u32_at(b, 28)?,
        })
    })
}

/// Reads the step array of a chained EXEC; `E2BIG` past
/// [`uapi::MAX_CHAIN_STEPS`], `EINVAL` for a bad element size or nonzero
/// bytes past the struct this kernel knows, `EFAULT` for unreadable memory.
fn read_steps(args: &uapi::Exec) -> Result<KVec<uapi::ExecStep>> {
    let count = args.step_count as usize;
    let max = uapi::MAX_CHAIN_STEPS as usize;
    if count > max {
        return Err(E2BIG);
    }
    let ours = core::mem::size_of::<uapi::ExecStep>();
    let mut out = KVec::with_capacity(count, GFP_KERNEL)?;
    uarray::read_each(args.steps, count, max, args.step_size, ours, |b| {
        let step = uapi::ExecStep {
            program: uarray::u32_at(b, 0)?,
            binding_count: uarray::u32_at(b, 4)?,
            bindings: uarray::u64_at(b, 8)?,
            binding_size: uarray::u32_at(b, 16)?,
            pad: uarray::u32_at(b, 20)?,
        };
        out.push(step, GFP_KERNEL)?;
        Ok(())
    })?;
    Ok(out)
}

/// Reads the in-syncobjs of an EXEC and takes their fences: `E2BIG` past
/// [`uapi::MAX_IN_SYNCOBJS`]; `EINVAL` for a bad element size, nonzero
/// flags or bytes past the struct, or a syncobj without the fence asked for;
/// `ENOENT` for an unknown handle; `EFAULT` for unreadable memory.
fn read_in_fences(args: &uapi::Exec, file: &File<AneDriver>) -> Result<Option<InFences>> {
    let count = args.in_syncobj_count as usize;
    if count == 0 {
        if args.in_syncobjs != 0 || args.in_syncobj_size != 0 {
            return Err(EINVAL);
        }
        return Ok(None);
    }
    let max = uapi::MAX_IN_SYNCOBJS as usize;
    if count > max {
        return Err(E2BIG);
    }
    let mut deps = InFences::new(args.in_syncobj_count)?;
    let ours = core::mem::size_of::<uapi::ExecSyncobj>();
    uarray::read_each(
        args.in_syncobjs,
        count,
        max,
        args.in_syncobj_size,
        ours,
        |b| {
            let handle = uarray::u32_at(b, 0)?;
            let flags = uarray::u32_at(b, 4)?;
            let point = uarray::u64_at(b, 8)?;
            if flags != 0 {
                return Err(EINVAL);
            }
            deps.add(file, handle, point)
        },
    )?;
    Ok(Some(deps))
}

/// The out-syncobj of an EXEC, if it names one: `ENOENT` for an unknown
/// handle, `EINVAL` for a point without a handle or a timeline point not
/// above the last.
fn out_syncobj(args: &uapi::Exec, file: &File<AneDriver>) -> Result<Option<OutSyncobj>> {
    if args.out_syncobj == 0 {
        if args.out_point != 0 {
            return Err(EINVAL);
        }
        return Ok(None);
    }
    OutSyncobj::find(file, args.out_syncobj, args.out_point).map(Some)
}

/// A job parked until its in-fences signal: what the fence work needs.
struct Parked {
    head: Arc<Job>,
    engine: Arc<Engine>,
}

/// The engine's fence work, once the last in-fence of a parked job
/// signalled (or the wait was cancelled): submits the job, or ends it
/// ABORTED when a fence failed, the wait was cancelled or the engine
/// refuses it.
///
/// # Safety
///
/// `data` is the `KBox<Parked>` that [`park`] leaked for this call; called
/// once.
unsafe extern "C" fn deps_ready(data: *mut c_void, error: c_int) {
    // SAFETY: By the safety requirements, `data` is an owned `Parked`.
    let p = unsafe { KBox::from_raw(data.cast::<Parked>()) };
    // Freed at the end: the C set whose work item runs this is not used
    // after this function returns.
    let deps = Job::chain(&p.head).deps.lock().take();
    if error != 0 || p.engine.submit(p.head.clone()).is_err() {
        p.head.complete(job_status::ABORTED, 0);
    }
    p.engine.unpark(&p.head);
    drop(deps);
}

/// Queues `head` once `deps` signalled: parked with the engine, or at once
/// if they all have. Errors leave the job unqueued and not parked.
fn park(engine: &Arc<Engine>, head: &Arc<Job>, deps: InFences) -> Result {
    *Job::chain(head).deps.lock() = Some(deps);
    let data = KBox::into_raw(KBox::new(
        Parked {
            head: head.clone(),
            engine: engine.clone(),
        },
        GFP_KERNEL,
    )?)
    .cast::<c_void>();
    let armed = engine.park(head, |wq| {
        let mut d = Job::chain(head).deps.lock();
        let deps = Option::as_mut(&mut *d).ok_or(EINVAL)?;
        // SAFETY: Armed once (the job is parked once); `wq` is the engine's
        // fence queue, which shutdown destroys only after every parked job
        // was unparked, by `deps_ready` itself; `data` is leaked until then;
        // the set is dropped by `deps_ready` (or below, when it never runs).
        Ok(unsafe { deps.arm(wq, deps_ready, data) })
    });
    if let Ok(Armed::Waiting) = armed {
        return Ok(());
    }
    // `deps_ready` will not run: `data` and the set are still ours.
    // SAFETY: `data` came from `KBox::into_raw` above and was not handed on.
    drop(unsafe { KBox::from_raw(data.cast::<Parked>()) });
    drop(Job::chain(head).deps.lock().take());
    match armed? {
        Armed::Ready(0) => engine.submit(head.clone()),
        // A failed in-fence: the job never runs.
        _ => {
            head.complete(job_status::ABORTED, 0);
            Ok(())
        }
    }
}

/// One checked step: the program, its slot table (H13) or call buffers
/// (H14), and the BOs it uses.
struct Step {
    program: Arc<Program>,
    bars: KBox<[u64; BAR_SLOTS]>,
    io: KVec<IoRef>,
    bos: KVec<ARef<Bo>>,
}

/// Checks one program's bindings against its BOs and, on H13, against the
/// program's validated summary.
fn check_step(
    file: &File<AneDriver>,
    handle: u32,
    addr: u64,
    count: u32,
    size: u32,
) -> Result<Step> {
    let program = file.inner().programs.lock().get(handle)?;
    let summary = program.summary.as_ref();
    let h14 = program.fw.is_some();
    // Zeroed by the allocator, in place: no table built on the stack and
    // copied.
    let mut bars = KBox::<[u64; BAR_SLOTS]>::zeroed(GFP_KERNEL_ACCOUNT)?;
    let mut io = KVec::new();
    let mut bound = 0u32;
    // A bad count is refused by `read_each`, not by a failed allocation.
    let mut bos = KVec::with_capacity((count as usize).min(BAR_SLOTS), GFP_KERNEL_ACCOUNT)?;
    read_bindings(addr, count, size, |b| {
        let slot = u8::try_from(b.slot).map_err(|_| EINVAL)?;
        if usize::from(slot) >= BAR_SLOTS || slot == SLOT_COMMAND || slot == SLOT_KERNEL {
            return Err(EINVAL);
        }
        if bound & (1 << slot) != 0 {
            return Err(EINVAL);
        }
        if b.pad != 0 || b.flags == 0 || b.flags & !bind::ALL != 0 {
            return Err(EINVAL);
        }
        if b.size == 0 || b.offset % BIND_ALIGN != 0 {
            return Err(EINVAL);
        }
        let bo = gem::lookup(file, b.bo_handle)?;
        let end = b.offset.checked_add(b.size).ok_or(EINVAL)?;
        if end > bo.size() as u64 {
            return Err(EINVAL);
        }
        let iova = bo.mapping()?.iova() + b.offset;
        if h14 {
            // The firmware validates its own programs (their format is not
            // public); the kernel checks the buffers it hands over.
            let kind = if b.flags & bind::OUT != 0 {
                IoKind::Output
            } else {
                IoKind::Input
            };
            let buffer_id = u32::from(slot);
            io.push(
                IoRef {
                    buffer_id,
                    kind,
                    iova,
                    size: b.size,
                },
                GFP_KERNEL_ACCOUNT,
            )?;
        } else {
            let info = summary.and_then(|s| s.slot(slot)).ok_or(EINVAL)?;
            // Only slots the program uses may be bound, with the direction
            // the program uses them in, and large enough.
            let usage = info.usage;
            if usage.is_empty() {
                return Err(EINVAL);
            }
            let read =
                usage.contains(SlotUsage::TILE_READ) || usage.contains(SlotUsage::KERNEL_READ);
            let written = usage.contains(SlotUsage::TILE_WRITE);
            if read && b.flags & bind::IN == 0 || written && b.flags & bind::OUT == 0 {
                return Err(EINVAL);
            }
            if b.size < info.min_size {
                return Err(ENOSPC);
            }
            if let Some(bar) = bars.get_mut(usize::from(slot)) {
                *bar = iova;
            }
        }
        bound |= 1 << slot;
        bos.push(bo, GFP_KERNEL_ACCOUNT)?;
        Ok(())
    })?;
    // Every slot the program touches must be bound (0 and 1 are the
    // program's own).
    let kernel_slots = (1u32 << SLOT_COMMAND) | (1u32 << SLOT_KERNEL);
    if summary.is_some_and(|s| s.used().0 & !kernel_slots & !bound != 0) {
        return Err(EINVAL);
    }
    bars[usize::from(SLOT_COMMAND)] = program.stream_iova;
    bars[usize::from(SLOT_KERNEL)] = program.weights_iova;
    Ok(Step {
        program,
        bars,
        io,
        bos,
    })
}

/// The checked steps of an EXEC: its one program (no list to allocate),
/// or its chain.
enum Steps {
    One(Option<Step>),
    Chain(KVec<Step>),
}

impl Steps {
    /// The last step not yet taken, taking it.
    fn pop(&mut self) -> Option<Step> {
        match self {
            Steps::One(st) => st.take(),
            Steps::Chain(v) => v.pop(),
        }
    }
}

/// Checks the steps of an EXEC: its one program, or its chain.
fn check_steps(args: &uapi::Exec, file: &File<AneDriver>) -> Result<Steps> {
    if args.step_count == 0 {
        // One program; a step array without a count is a mistake.
        if args.steps != 0 || args.step_size != 0 {
            return Err(EINVAL);
        }
        let step = check_step(
            file,
            args.program,
            args.bindings,
            args.binding_count,
            args.binding_size,
        )?;
        return Ok(Steps::One(Some(step)));
    }
    // A chain: the one-program fields stay zero.
    if args.program != 0 || args.binding_count != 0 || args.bindings != 0 || args.binding_size != 0
    {
        return Err(EINVAL);
    }
    let steps = read_steps(args)?;
    let mut out = KVec::with_capacity(steps.len(), GFP_KERNEL)?;
    for st in steps.iter() {
        if st.pad != 0 {
            return Err(EINVAL);
        }
        let step = check_step(
            file,
            st.program,
            st.bindings,
            st.binding_count,
            st.binding_size,
        )?;
        out.push(step, GFP_KERNEL)?;
    }
    Ok(Steps::Chain(out))
}

/// `DRM_IOCTL_ANE_EXEC`.
pub(crate) fn exec(
    dev: &Device<AneDriver>,
    args: &mut uapi::Exec,
    file: &File<AneDriver>,
) -> Result<u32> {
    if args.flags != 0 || args.pad != 0 || args.pad2 != 0 {
        return Err(EINVAL);
    }
    if args.priority > uapi::priority::MAX {
        return Err(EINVAL);
    }
    // One client's high-priority jobs overtake everyone's: a privilege.
    if args.priority == uapi::priority::HIGH && !crate::ext::module::may_boost_priority() {
        return Err(EPERM);
    }
    let engine = dev.engine().ok_or(ENODEV)?;
    let f = file.inner();
    let mut steps = check_steps(args, file)?;
    if let Some(fw) = dev.firmware() {
        if fw.state() != uapi::fw_state::RUNNING {
            return Err(EIO);
        }
    }
    let deps = read_in_fences(args, file)?;
    let out = out_syncobj(args, file)?;
    // Every job has its out-fence (WAIT waits for it), attached to a
    // syncobj when EXEC names one.
    let mut out_fence = Some(Fence::new()?);

    let mut list = f.jobs.list.lock();
    if list.len() >= MAX_JOBS_PER_FILE {
        return Err(EBUSY);
    }
    // A wedged engine refuses the job before it takes a power reference:
    // a refused client must not keep the device powered.
    if !engine.accepts() {
        return Err(EIO);
    }
    let id = f.jobs.next_id.fetch_add(1, Ordering::Relaxed);
    let priority = args.priority;
    let owner = f.owner;
    let queued = crate::ext::time::monotonic_ns() as u64;
    // Built from the last step back: each step holds the next one and the
    // tail.
    let mut next: Option<Arc<Job>> = None;
    let mut tail: Option<Arc<Job>> = None;
    while let Some(st) = steps.pop() {
        let pm = dev.pm.get()?;
        let vm = f.vm.clone();
        let (step_next, step_tail) = (next.take(), tail.clone());
        // The tail (built first) holds the out-fence.
        let step_fence = if tail.is_none() {
            out_fence.take()
        } else {
            None
        };
        let step_done = step_fence.as_ref().map(Fence::get_ref);
        let job = Arc::pin_init(
            pin_init!(Job {
                id,
                owner,
                priority,
                bars: st.bars,
                io: st.io,
                res <- new_mutex!(Some(JobRes {
                    program: st.program,
                    vm,
                    _bos: st.bos,
                    pm: Some(pm),
                })),
                cancelled: AtomicBool::new(false),
                usage: f.usage.clone(),
                times: [AtomicU64::new(queued), AtomicU64::new(0), AtomicU64::new(0)],
                state <- new_mutex!((job_status::PENDING, 0)),
                next: step_next,
                tail: step_tail,
                steps_done: AtomicU32::new(0),
                fence <- new_mutex!(step_fence),
                done: step_done,
                deps <- new_mutex!(None),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        if tail.is_none() {
            tail = Some(job.clone());
        }
        next = Some(job);
    }
    let (Some(head), Some(tail)) = (next, tail) else {
        return Err(EINVAL);
    };
    list.push(tail.clone(), GFP_KERNEL_ACCOUNT)?;
    // The engine may run the job in this thread: not under the list's lock.
    drop(list);
    let queued = match deps {
        None => engine.submit(head.clone()),
        Some(deps) => park(engine, &head, deps),
    };
    if let Err(e) = queued {
        // Never run: a WAIT that guessed its id returns, and it is gone
        // (its out-fence, never attached, is signalled).
        head.complete(job_status::ABORTED, 0);
        f.jobs.list.lock().retain(|j| j.id != id);
        return Err(e);
    }
    // Queued: the syncobj gets the fence (it may have signalled already).
    if let (Some(out), Some(r)) = (out, tail.done.as_ref()) {
        out.attach(r);
    }
    args.job_id = id;
    Ok(0)
}

/// `DRM_IOCTL_ANE_WAIT`: waits for the job's out-fence until the deadline,
/// then reports the job once.
pub(crate) fn wait(
    _dev: &Device<AneDriver>,
    args: &mut uapi::Wait,
    file: &File<AneDriver>,
) -> Result<u32> {
    if args.pad != 0 || args.pad2 != 0 {
        return Err(EINVAL);
    }
    let jobs = &file.inner().jobs;
    let job = jobs
        .list
        .lock()
        .iter()
        .find(|j| j.id == args.job_id)
        .cloned()
        .ok_or(ENOENT)?;
    // Only tails are in the list, and every tail has its fence.
    let done = job.done.as_ref().ok_or(EINVAL)?;
    // First without sleeping: a job that ended is collected whatever the
    // deadline, without reading the clock.
    let mut jiffies: Jiffies = 0;
    while let WaitEnd::TimedOut = done.wait(jiffies)? {
        let now = crate::ext::time::monotonic_ns();
        if args.timeout_ns <= now {
            return Err(crate::ext::errno::etime());
        }
        // Rounded up, so the deadline has passed when the time runs out;
        // jiffies being coarse, the loop looks again anyway.
        let left_ms = ((args.timeout_ns - now) / 1_000_000).saturating_add(1);
        jiffies = msecs_to_jiffies(u32::try_from(left_ms).unwrap_or(u32::MAX));
    }
    // Recorded before the fence signalled (`Job::end`).
    let (status, fault) = *job.state.lock();
    if status == job_status::PENDING {
        return Err(EIO);
    }
    args.status = status;
    args.fault = fault;
    args.queued_ns = job.times[0].load(Ordering::Relaxed);
    args.started_ns = job.times[1].load(Ordering::Relaxed);
    args.ended_ns = job.times[2].load(Ordering::Relaxed);
    args.steps_done = job.steps_done.load(Ordering::Relaxed);
    jobs.list.lock().retain(|j| j.id != args.job_id);
    Ok(0)
}
