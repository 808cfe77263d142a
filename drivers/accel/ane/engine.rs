// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The engine: job scheduling over one backend.
//!
//! One [`Engine`] per bound device serialises the hardware: one job at a
//! time holds the engine (`Sched::running`, taken and given back under the
//! scheduler's lock), and only the holder touches the backend.
//!
//! An H13 job submitted while the engine is idle and nothing is queued is
//! pushed by the submitting thread itself, which then takes one look at
//! it (a few more at once if only the idle bit is missing, which may read
//! late): a job that is already done then is completed right there, with no
//! hop to another thread (the latency the EXEC+WAIT benchmark measures).
//! A job still running after that look is handed, with the engine, to the
//! worker, which looks until it ends.
//!
//! Every other job waits in one first-in-first-out queue per priority
//! ([`Pending`]); the worker (a work item on the engine's own ordered
//! workqueue, spawned when work arrives and exiting when the queues are
//! empty) takes them one at a time: highest priority first and, within a
//! priority, a different client than the one served last whenever one is
//! waiting, so a busy client cannot starve a quiet one. Picking a job costs
//! the same however many clients queued how many jobs (kernel-2 N14): only
//! the last-served client's own jobs, at most `MAX_JOBS_PER_FILE`, can
//! stand before another client's in its queue. Unbind drains and destroys
//! the queue, so no work item runs module code afterwards.
//!
//! System sleep: [`Engine::pause`] stops the worker after the running job
//! (queued jobs stay queued) and [`Engine::unpause`] starts it again, so no
//! job runs while the device is suspended.
//!
//! A chain (several programs in one EXEC) is queued as its first step;
//! whoever holds the engine runs its steps back to back, holding it from
//! the first to the last, and stops at the first step that does not end
//! DONE (the rest are aborted, see `job.rs`). On an idle engine the
//! submitting thread runs the chain as it runs one job: each step pushed
//! and looked at once, the next one pushed when it ended; the first step
//! still running after that look goes to the worker, which runs the rest.
//!
//! Jobs waiting for in-fences (`job.rs`) are parked here (`Sched::parked`)
//! rather than queued: the fences' last callback queues work on the
//! engine's fence queue (its own, so that readiness never waits behind a
//! running job), which submits the job or ends it ABORTED. Shutdown
//! cancels every parked job's wait and returns only once each was
//! unparked, so no fence callback of this module stays registered and no
//! parked job outlives the device.
//!
//! The backend runs each job: [`H13`] drives the task manager
//! (`h13/`), the H14 firmware (`h14/`) runs calls. The scheduler knows
//! nothing of registers.

use kernel::{
    prelude::*,
    sync::{new_condvar, new_mutex, Arc, CondVar, Mutex},
};

use crate::ext::{boost::CpuBoost, fence::Armed, workqueue::OwnedQueue};

use crate::h13::{Active, Outcome, Started, H13};
use crate::hw::tm::seq::Progress;
use crate::hw::uapi::{engine_state, job_status};
use crate::job::{Job, MAX_JOBS_PER_FILE};

/// Ring slots kept when a ring empties.
const RING_KEEP: usize = 64;

/// Jobs of one priority, first in first out: a ring over a `KVec`, so
/// taking a job near the front does not move the rest.
struct JobRing {
    buf: KVec<Option<Arc<Job>>>,
    head: usize,
    len: usize,
}

impl JobRing {
    const fn new() -> Self {
        Self {
            buf: KVec::new(),
            head: 0,
            len: 0,
        }
    }

    fn slot(&self, i: usize) -> usize {
        // `buf` is not empty whenever `i < len`.
        (self.head + i) % self.buf.len().max(1)
    }

    /// The `i`-th job from the front.
    fn get(&self, i: usize) -> Option<&Arc<Job>> {
        if i >= self.len {
            return None;
        }
        self.buf.get(self.slot(i))?.as_ref()
    }

    /// Appends `job`; the ring doubles when full (amortised O(1)).
    fn push(&mut self, job: Arc<Job>) -> Result {
        if self.len == self.buf.len() {
            let cap = (self.buf.len() * 2).max(8);
            let mut buf = KVec::with_capacity(cap, GFP_KERNEL)?;
            for i in 0..self.len {
                let at = self.slot(i);
                let j = self.buf.get_mut(at).and_then(Option::take);
                // Within the capacity just reserved.
                let _ = buf.push_within_capacity(j);
            }
            while buf.len() < cap {
                let _ = buf.push_within_capacity(None);
            }
            self.buf = buf;
            self.head = 0;
        }
        let at = self.slot(self.len);
        if let Some(s) = self.buf.get_mut(at) {
            *s = Some(job);
            self.len += 1;
        }
        Ok(())
    }

    /// Removes the `i`-th job from the front, moving the `i` before it
    /// one place back: O(i).
    fn remove(&mut self, i: usize) -> Option<Arc<Job>> {
        if i >= self.len {
            return None;
        }
        let at = self.slot(i);
        let job = self.buf.get_mut(at)?.take();
        for k in (0..i).rev() {
            let (from, to) = (self.slot(k), self.slot(k + 1));
            let j = self.buf.get_mut(from).and_then(Option::take);
            if let Some(t) = self.buf.get_mut(to) {
                *t = j;
            }
        }
        self.head = self.slot(1);
        self.len -= 1;
        if self.len == 0 && self.buf.len() > RING_KEEP {
            // A flood's peak is not kept until unbind.
            self.buf = KVec::new();
            self.head = 0;
        }
        job
    }
}

/// The queued jobs, one [`JobRing`] per UAPI priority.
struct Pending {
    levels: [JobRing; PRIORITIES],
}

/// UAPI priorities.
const PRIORITIES: usize = crate::hw::uapi::priority::MAX as usize + 1;

impl Pending {
    const fn new() -> Self {
        Self {
            levels: [JobRing::new(), JobRing::new(), JobRing::new()],
        }
    }

    fn len(&self) -> usize {
        self.levels.iter().map(|q| q.len).sum()
    }

    fn is_empty(&self) -> bool {
        self.levels.iter().all(|q| q.len == 0)
    }

    fn push(&mut self, job: Arc<Job>) -> Result {
        let level = (job.priority as usize).min(PRIORITIES - 1);
        self.levels.get_mut(level).ok_or(EINVAL)?.push(job)
    }

    /// Takes every queued job.
    fn drain_all(&mut self) -> impl Iterator<Item = Arc<Job>> + '_ {
        core::iter::from_fn(move || self.levels.iter_mut().find_map(|q| q.remove(0)))
    }
}

/// What runs the jobs.
pub(crate) enum Backend {
    /// H13: the host drives the task manager.
    H13(Arc<H13>),
    /// H14: the firmware runs calls.
    Fw(Arc<crate::h14::Firmware>),
}

struct Sched {
    pending: Pending,
    /// A thread holds the engine: the worker, or a submitter running a
    /// job on an idle engine.
    running: bool,
    dead: bool,
    /// System sleep: no job is started.
    paused: bool,
    last_owner: usize,
    /// A pushed job whose submitter gave it, with the engine, to the
    /// worker.
    handoff: Option<(Arc<Job>, Active)>,
    /// The worker's queue; taken and destroyed at shutdown.
    wq: Option<OwnedQueue>,
    /// Jobs waiting for their in-fences (a chain's first step).
    parked: KVec<Arc<Job>>,
    /// Where the in-fences' last callback queues the work that submits a
    /// parked job; destroyed at shutdown once nothing is parked.
    fence_wq: Option<OwnedQueue>,
    /// Threads waiting on [`Engine::idle`] (pause and shutdown), counted
    /// under this lock: the engine is given back after every job, and
    /// with nobody waiting the wake-up is skipped.
    idle_waiters: u32,
}

/// A device's engine: the job queue and the backend.
#[pin_data]
pub(crate) struct Engine {
    #[pin]
    sched: Mutex<Sched>,
    #[pin]
    idle: CondVar,
    backend: Backend,
    /// Held from the start of each job until a delay after the last.
    boost: CpuBoost,
}

impl Engine {
    /// An engine over `backend`, with the CPU boost held `boost_idle_ms`
    /// after the last job (0: no boost); the device is powered (probe).
    pub(crate) fn new(backend: Backend, boost_idle_ms: u32) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                sched <- new_mutex!(Sched {
                    pending: Pending::new(),
                    running: false,
                    dead: false,
                    paused: false,
                    last_owner: 0,
                    handoff: None,
                    wq: Some(OwnedQueue::new()?),
                    parked: KVec::new(),
                    fence_wq: Some(OwnedQueue::new()?),
                    idle_waiters: 0,
                }),
                idle <- new_condvar!(),
                backend,
                boost: CpuBoost::new(boost_idle_ms),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// Whether a job submitted now may be queued: the engine is ready, or
    /// being recovered by the holder of the engine.
    pub(crate) fn accepts(&self) -> bool {
        match &self.backend {
            Backend::H13(h) => h.accepts(),
            Backend::Fw(_) => true,
        }
    }

    /// Whether the engine takes jobs: an `engine_state` value.
    pub(crate) fn state(&self) -> u64 {
        match &self.backend {
            Backend::H13(h) => h.state(),
            Backend::Fw(_) => engine_state::READY,
        }
    }

    /// Whether completion comes by interrupt.
    pub(crate) fn has_irq(&self) -> bool {
        match &self.backend {
            Backend::H13(h) => h.has_irq(),
            Backend::Fw(_) => false,
        }
    }

    /// Called after the device powered up.
    pub(crate) fn resume(&self) {
        if let Backend::H13(h) = &self.backend {
            h.resume();
        }
    }

    /// Called before the device powers down.
    pub(crate) fn suspend(&self) {
        if let Backend::H13(h) = &self.backend {
            h.suspend();
        }
    }

    /// Runs `job` now if the engine is idle and nothing is queued (H13),
    /// else queues it; `ENODEV` once the engine has shut down, `EIO` while
    /// it is wedged.
    pub(crate) fn submit(self: &Arc<Self>, job: Arc<Job>) -> Result {
        let mut s = self.sched.lock();
        if s.dead {
            return Err(ENODEV);
        }
        if !self.accepts() {
            return Err(EIO);
        }
        if let Backend::H13(h) = &self.backend {
            // A job whose file closed while it was parked is not pushed
            // (the worker aborts it).
            if !s.running && !s.paused && s.pending.is_empty() && !job.is_cancelled() {
                s.running = true;
                s.last_owner = job.owner;
                drop(s);
                self.run_inline(h, job);
                return Ok(());
            }
        }
        s.pending.push(job)?;
        if let Err(e) = self.start_worker(&mut s) {
            // Nothing will run the list; fail every queued job.
            for j in s.pending.drain_all() {
                j.complete(job_status::ABORTED, 0);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Parks `job` (a chain's first step) while `arm` registers the wait for
    /// its in-fences on the fence queue; `arm`'s result is returned. Unless
    /// it is [`Armed::Waiting`], the job is not left parked. `ENODEV` once
    /// the engine is shutting down (then `arm` is not called).
    pub(crate) fn park(
        &self,
        job: &Arc<Job>,
        arm: impl FnOnce(&OwnedQueue) -> Result<Armed>,
    ) -> Result<Armed> {
        let mut s = self.sched.lock();
        if s.dead {
            return Err(ENODEV);
        }
        s.parked.push(job.clone(), GFP_KERNEL)?;
        // Under the lock: shutdown, which sets `dead` under it, either
        // sees the armed job in `parked` and cancels its wait, or came
        // first and refused it above.
        let r = match s.fence_wq.as_ref() {
            Some(wq) => arm(wq),
            None => Err(ENODEV),
        };
        if !matches!(r, Ok(Armed::Waiting)) {
            s.parked.retain(|j| !Arc::ptr_eq(j, job));
        }
        r
    }

    /// A parked job was submitted or ended: it is no longer parked.
    pub(crate) fn unpark(&self, job: &Arc<Job>) {
        let mut s = self.sched.lock();
        s.parked.retain(|j| !Arc::ptr_eq(j, job));
        if s.parked.is_empty() {
            self.wake_idle(&s);
        }
    }

    /// The submitting thread holds the engine: it pushes `job` and takes
    /// one look. Done (or failed) then, the job ends here, and a chain goes
    /// on with its next step the same way while each ends DONE; a step
    /// still running after the look goes to the worker with the engine
    /// (which runs the rest of its chain). The engine is given back (or
    /// handed on to the worker, for what was queued meanwhile).
    fn run_inline(self: &Arc<Self>, h: &Arc<H13>, first: Arc<Job>) {
        let mut job = first;
        loop {
            self.boost.begin();
            let mut active = match h.start(&job) {
                Started::Ended(o) => match self.step_ended(&job, o) {
                    Some(next) => {
                        job = next;
                        continue;
                    }
                    None => return self.release(),
                },
                Started::Running(a) => a,
            };
            match h.look(&mut active) {
                Progress::Running => {}
                p => {
                    let o = h.finish(&job, active, p);
                    match self.step_ended(&job, o) {
                        Some(next) => {
                            job = next;
                            continue;
                        }
                        None => return self.release(),
                    }
                }
            }
            let mut s = self.sched.lock();
            s.handoff = Some((job, active));
            if self.start_worker(&mut s).is_ok() {
                return;
            }
            let back = s.handoff.take();
            drop(s);
            // No worker to hand it to: this thread waits for it.
            if let Some((job, active)) = back {
                let o = h.complete(&job, active);
                if let Some(next) = self.step_ended(&job, o) {
                    self.run_chain(next);
                }
            }
            return self.release();
        }
    }

    /// A step the holder of the engine ran ended: as [`Engine::ended`];
    /// then the chain's next step if this one ended DONE and the next may
    /// run (else the rest of the chain is ended ABORTED here).
    fn step_ended(&self, job: &Job, o: Outcome) -> Option<Arc<Job>> {
        let done = o.status == job_status::DONE;
        self.ended(job, o);
        let next = job.next().filter(|_| done)?;
        if self.may_run_step(&next) {
            Some(next)
        } else {
            // Ends the rest of the chain too.
            next.complete(job_status::ABORTED, 0);
            None
        }
    }

    /// Whether the holder of the engine may run the next step of a chain:
    /// its file is open, the engine takes jobs and is not shutting down.
    fn may_run_step(&self, job: &Job) -> bool {
        !job.is_cancelled() && self.state() == engine_state::READY && !self.sched.lock().dead
    }

    /// Gives the engine back after a job this thread ran; what was queued
    /// meanwhile goes to the worker.
    fn release(self: &Arc<Self>) {
        let mut s = self.sched.lock();
        s.running = false;
        if self.start_worker(&mut s).is_err() {
            for j in s.pending.drain_all() {
                j.complete(job_status::ABORTED, 0);
            }
        }
        if !s.running {
            self.wake_idle(&s);
        }
    }

    /// A job ended: the boost's hold starts to run out, the job's waiters
    /// are woken, and if the engine stopped taking jobs, what was queued
    /// is failed.
    fn ended(&self, job: &Job, o: Outcome) {
        self.boost.end();
        job.complete(o.status, o.fault);
        if self.state() != engine_state::READY {
            // Contained: what was queued cannot run.
            for j in self.sched.lock().pending.drain_all() {
                j.complete(job_status::ABORTED, 0);
            }
        }
    }

    /// Wakes the threads waiting for the engine to be given back or for
    /// the last parked job, if any waits (`s` is the scheduler, locked).
    fn wake_idle(&self, s: &Sched) {
        if s.idle_waiters != 0 {
            self.idle.notify_all();
        }
    }

    /// Starts the worker unless the engine is held, it is paused, or there
    /// is nothing to do; with a handoff in `s` (the engine is held then by
    /// the thread that put it there), the worker takes that job and the
    /// engine with it.
    fn start_worker(self: &Arc<Self>, s: &mut Sched) -> Result {
        if s.handoff.is_none() && (s.running || s.paused || s.dead || s.pending.is_empty()) {
            return Ok(());
        }
        let wq = s.wq.as_ref().ok_or(ENODEV)?;
        let this = self.clone();
        wq.queue()
            .try_spawn(GFP_KERNEL, move || this.work())
            .map_err(|_| ENOMEM)?;
        s.running = true;
        Ok(())
    }

    /// System sleep: no job starts after this returns; the running one has
    /// ended (it is bounded by its timeout). Queued jobs wait; returns how
    /// many.
    pub(crate) fn pause(&self) -> usize {
        let mut s = self.sched.lock();
        s.paused = true;
        s.idle_waiters = s.idle_waiters.saturating_add(1);
        while s.running {
            self.idle.wait(&mut s);
        }
        s.idle_waiters = s.idle_waiters.saturating_sub(1);
        s.pending.len()
    }

    /// After system sleep: queued jobs run again.
    pub(crate) fn unpause(self: &Arc<Self>) {
        let mut s = self.sched.lock();
        s.paused = false;
        if self.start_worker(&mut s).is_err() {
            for j in s.pending.drain_all() {
                j.complete(job_status::ABORTED, 0);
            }
        }
    }

    /// Picks the next job: highest priority, then a client other than the
    /// last one served if any is waiting. Only the last-served client's own
    /// jobs (at most [`MAX_JOBS_PER_FILE`]) can stand before the first of
    /// another client, so the look is bounded however long the queue.
    fn pick(s: &mut Sched) -> Option<Arc<Job>> {
        let last = s.last_owner;
        let q = s.pending.levels.iter_mut().rev().find(|q| q.len != 0)?;
        let pos = (0..q.len.min(MAX_JOBS_PER_FILE + 1))
            .position(|i| q.get(i).is_some_and(|j| j.owner != last))
            .unwrap_or(0);
        let job = q.remove(pos)?;
        s.last_owner = job.owner;
        Some(job)
    }

    fn work(self: Arc<Self>) {
        let handoff = self.sched.lock().handoff.take();
        if let (Some((job, active)), Backend::H13(h)) = (handoff, &self.backend) {
            // The rest of its chain, if any, runs before anything queued.
            let o = h.complete(&job, active);
            if let Some(next) = self.step_ended(&job, o) {
                self.run_chain(next);
            }
        }
        loop {
            let job = {
                let mut s = self.sched.lock();
                let next = if s.dead || s.paused {
                    None
                } else {
                    Self::pick(&mut s)
                };
                match next {
                    Some(j) => j,
                    None => {
                        // Shut down: nothing queued may run. Paused: the
                        // queue waits for the end of system sleep.
                        if s.dead {
                            for j in s.pending.drain_all() {
                                j.complete(job_status::ABORTED, 0);
                            }
                        }
                        s.running = false;
                        self.wake_idle(&s);
                        return;
                    }
                }
            };
            self.run_chain(job);
        }
    }

    /// Runs a job and, while each step ends DONE, the rest of its chain,
    /// holding the engine throughout. A chain stops early when its file
    /// went away, the engine stopped taking jobs, or it is shutting down.
    fn run_chain(&self, mut job: Arc<Job>) {
        if !self.may_run_step(&job) {
            // Ends the rest of the chain too.
            job.complete(job_status::ABORTED, 0);
            return;
        }
        loop {
            self.boost.begin();
            let outcome = match &self.backend {
                Backend::H13(h) => h.run(&job),
                Backend::Fw(fw) => Self::run_fw(fw, &job),
            };
            match self.step_ended(&job, outcome) {
                Some(next) => job = next,
                None => return,
            }
        }
    }

    /// H14: one call through the firmware. A failed call either
    /// quarantined the firmware (it refuses everything after) or was
    /// refused by it in order; there is nothing to recover here.
    fn run_fw(fw: &crate::h14::Firmware, job: &Job) -> Outcome {
        let Some(res) = job.take_res() else {
            return Outcome {
                status: job_status::ABORTED,
                fault: 0,
            };
        };
        let Some(p) = res.program.fw else {
            return Outcome {
                status: job_status::FAULT,
                fault: 0,
            };
        };
        // Priority 2, the only one that ran (OA-T6021-RT; hw-2 §3 item 3):
        // UAPI priorities only order the scheduler's queue, as on H13.
        let priority = crate::hw::fw::msg::MIN_PRIORITY;
        job.mark_started();
        let (status, park) = fw.call(&p, priority, &job.io);
        if park {
            // The firmware saw the buffers' addresses and, without its
            // finish event, may still write there. (A call refused before
            // it was sent, as after quarantine, or refused by the firmware
            // in order, frees them as usual.)
            fw.park(res.into_bos());
        }
        Outcome { status, fault: 0 }
    }

    /// Stops the engine at unbind: queued jobs are aborted, the running one
    /// finishes (or times out) first. No job runs after this returns.
    pub(crate) fn shutdown(&self) {
        let mut s = self.sched.lock();
        s.dead = true;
        // Parked jobs stop waiting for their in-fences: the fence work ends
        // each ABORTED (the engine refuses it now) and unparks it.
        for j in s.parked.iter() {
            j.cancel_deps();
        }
        s.idle_waiters = s.idle_waiters.saturating_add(1);
        while !s.parked.is_empty() {
            self.idle.wait(&mut s);
        }
        let fence_wq = s.fence_wq.take();
        for j in s.pending.drain_all() {
            j.complete(job_status::ABORTED, 0);
        }
        while s.running {
            self.idle.wait(&mut s);
        }
        s.idle_waiters = s.idle_waiters.saturating_sub(1);
        let wq = s.wq.take();
        drop(s);
        // Nothing is parked, so no fence callback of ours is registered and
        // nothing queues fence work any more.
        if let Some(wq) = fence_wq {
            wq.destroy();
        }
        // The worker may still be returning from its last job: wait for it.
        if let Some(wq) = wq {
            wq.destroy();
        }
        // No job begins again: the boost's hold and work end here, not at
        // the engine's drop, which a leak could postpone past the module's
        // unload (kernel-2 N7).
        self.boost.stop();
        if let Backend::H13(h) = &self.backend {
            h.unbind();
        }
    }
}
