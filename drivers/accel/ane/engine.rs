// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The engine: job scheduling and the H13 task-manager backend.
//!
//! One [`Engine`] per bound device serialises the hardware. Jobs from all
//! files wait in one list; a worker (a work item on the high-priority system
//! workqueue, spawned when work arrives and exiting when the list is empty)
//! takes them one at a time: highest priority first and, within a priority,
//! a different client than the one served last whenever one is waiting, so
//! a busy client cannot starve a quiet one.
//!
//! [`H13`] programs the task manager exactly as `hw::tm` documents: the
//! buffer-slot table and first TD on a task queue, a push, then it waits for
//! the completion event carrying the job's network id (not the idle bit,
//! which can be stale), or an error latch, or the timeout. Registers go
//! through [`Mmio`]: the real engine window, or the simulator's model of it.
//!
//! Completion: when the device has the engine's interrupt, its threaded
//! handler ([`EngineIrq`]) drains the event FIFO and wakes the waiting
//! worker; the worker still polls every [`IRQ_POLL_MS`] in case an
//! interrupt is lost (eiln found it unreliable around runtime PM, hw.md
//! §2.3). Without the interrupt it polls every [`POLL_US`].
//!
//! Recovery: after a timeout or fault the task queues are disabled and
//! enabled again. If an error latch survives that, the engine is wedged
//! and refuses jobs until the SoC's [`Recovery`] step has happened: the next
//! runtime suspend (the task manager loses its state with its power
//! domains) or a new binding (the state is kept in retention).

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::{
    prelude::*,
    sync::{new_condvar, new_mutex, Arc, CondVar, Mutex},
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
    workqueue,
};

use crate::ext::{io::IoWindow, irq};
use crate::hw::soc::Recovery;
use crate::hw::tm::{self, mgr as tmr, tq};
use crate::hw::uapi::{engine_state, job_status};
use crate::job::Job;
use crate::vm::AddressSpace;

/// Register access to the engine window.
pub(crate) enum Mmio {
    /// The hardware's registers (revoked on unbind).
    Hw(Arc<IoWindow>),
    /// The simulator's register model.
    #[cfg(ane_test)]
    Sim(Arc<crate::sim::SimEngine>),
}

impl Mmio {
    fn read32(&self, off: usize) -> u32 {
        match self {
            Mmio::Hw(io) => io.read32(off).unwrap_or(u32::MAX),
            #[cfg(ane_test)]
            Mmio::Sim(s) => s.read32(off),
        }
    }

    fn write32(&self, off: usize, val: u32) {
        match self {
            Mmio::Hw(io) => io.write32(off, val),
            #[cfg(ane_test)]
            Mmio::Sim(s) => s.write32(off, val),
        }
    }
}

/// What runs the jobs.
pub(crate) enum Backend {
    /// H13: the host drives the task manager.
    H13(H13),
    /// H14: the firmware runs calls.
    Fw(Arc<crate::fw::Firmware>),
}

/// How one job ended.
pub(crate) struct Outcome {
    /// A `uapi::job_status` value.
    pub(crate) status: u32,
    /// Backend-specific detail (the error latch, or 0).
    pub(crate) fault: u64,
}

/// The H13 task-manager backend.
pub(crate) struct H13 {
    mmio: Mmio,
    timeout: Delta,
}

impl H13 {
    /// A backend over `mmio`, giving up on a job after `timeout_ms`.
    pub(crate) fn new(mmio: Mmio, timeout_ms: u32) -> Self {
        Self {
            mmio,
            timeout: Delta::from_millis(i64::from(timeout_ms)),
        }
    }

    /// The enable sequence; needed after every power-up, since the TM and TQ
    /// state does not survive the power domains cycling.
    pub(crate) fn enable(&self) {
        let en = self.mmio.read32(tm::tm_reg(tmr::TQ_EN));
        self.mmio
            .write32(tm::tm_reg(tmr::TQ_EN), en | tmr::TQ_EN_ON);
        for (q, prio) in tm::TQ_PRIORITY.iter().enumerate() {
            self.mmio.write32(tm::tq_reg(q, tq::PRTY), *prio);
        }
        self.mmio
            .write32(tm::tm_reg(tmr::IRQ_EN1), tmr::IRQ_EN1_VALUE);
        self.mmio
            .write32(tm::tm_reg(tmr::IRQ_EN2), tmr::IRQ_EN2_VALUE);
    }

    /// Pops every pending event of line 0; returns whether one carried `nid`.
    fn drain_events(&self, nid: u8) -> bool {
        let mut seen = false;
        // The FIFO is small; the bound only guards against a stuck counter.
        for _ in 0..64 {
            if self.mmio.read32(tm::tm_reg(tmr::EVT_COUNT)) == 0 {
                break;
            }
            let info = self.mmio.read32(tm::tm_reg(tmr::EVT_INFO));
            seen |= tm::event_nid(info) == nid;
        }
        self.mmio
            .write32(tm::tm_reg(tmr::IRQ_ACK), tmr::IRQ_ACK_LINE0);
        seen
    }

    fn error_latch(&self) -> u64 {
        tmr::ERROR.iter().enumerate().fold(0u64, |acc, (i, r)| {
            acc | u64::from(self.mmio.read32(tm::tm_reg(*r))) << (i * 16)
        })
    }

    /// Starts one job on its task queue; returns the queue. The device is
    /// powered and the job's address space is attached. Events of earlier
    /// jobs must have been drained (they would complete this one).
    fn start(&self, job: &Job) -> usize {
        let q = tm::QUEUE_FOR_PRIORITY
            .get(job.priority as usize)
            .copied()
            .unwrap_or(tm::QUEUE_FOR_PRIORITY[1]);
        let prog = job.program();
        let size = tm::size_field(prog.td_size);
        self.mmio.write32(tm::tq_reg(q, tq::STATUS), 1);
        for (i, bar) in job.bars.iter().enumerate() {
            // The slot registers hold 32 bits: the window is below 4 GiB.
            self.mmio
                .write32(tm::tq_reg(q, tq::BAR + 4 * i), *bar as u32);
        }
        self.mmio.write32(tm::tq_reg(q, tq::SIZE), size);
        self.mmio
            .write32(tm::tq_reg(q, tq::ADDR), prog.bootstrap_iova as u32);
        self.mmio
            .write32(tm::tq_reg(q, tq::NID), (u32::from(tm::JOB_NID) << 8) | 1);
        self.mmio
            .write32(tm::tm_reg(tmr::ADDR), prog.bootstrap_iova as u32);
        self.mmio
            .write32(tm::tm_reg(tmr::INFO), size | (prog.td_count & 0xffff));
        let prio = tm::TQ_PRIORITY.get(q).copied().unwrap_or(0);
        self.mmio
            .write32(tm::tm_reg(tmr::PUSH), prio | ((q as u32) << 8));
        q
    }

    /// Releases the task queue after the job ended.
    fn finish(&self, q: usize) {
        self.mmio.write32(tm::tq_reg(q, tq::STATUS), 0);
    }

    /// Points the engine's DMA at `space` for one job: attaches the client's
    /// IOMMU domain, or the simulator's page table.
    fn attach(&self, space: &AddressSpace) -> Result {
        match (&self.mmio, space) {
            (Mmio::Hw(_), AddressSpace::Iommu(d)) => d.attach(),
            #[cfg(ane_test)]
            (Mmio::Sim(sim), AddressSpace::Sim(pt)) => {
                sim.attach(pt);
                Ok(())
            }
            #[cfg(ane_test)]
            _ => Err(EINVAL),
        }
    }

    fn detach(&self, space: &AddressSpace) {
        match (&self.mmio, space) {
            (Mmio::Hw(_), AddressSpace::Iommu(d)) => d.detach(),
            #[cfg(ane_test)]
            (Mmio::Sim(sim), _) => sim.detach(),
            #[cfg(ane_test)]
            _ => {}
        }
    }

    /// Recovers the task manager after a timeout or fault: the queues are
    /// disabled and enabled again, which drops the failed job. Returns the
    /// error latch afterwards: nonzero means the engine is still wedged.
    fn recover(&self) -> u64 {
        let en = self.mmio.read32(tm::tm_reg(tmr::TQ_EN));
        self.mmio
            .write32(tm::tm_reg(tmr::TQ_EN), en & !tmr::TQ_EN_ON);
        self.enable();
        let _ = self.drain_events(tm::JOB_NID);
        self.error_latch()
    }
}

/// Poll period while waiting for a job without a completion interrupt.
pub(crate) const POLL_US: i64 = 20;

/// Poll period while waiting for a job with the completion interrupt: only
/// a safety net for a lost interrupt.
pub(crate) const IRQ_POLL_MS: u32 = 1;

/// Completion events drained from the task manager, by the waiting worker
/// or by the interrupt handler, whichever comes first.
struct Events {
    /// The running job's completion event was seen.
    seen: bool,
}

struct Sched {
    pending: KVec<Arc<Job>>,
    running: bool,
    dead: bool,
    last_owner: usize,
}

/// A device's engine: the job queue and the backend.
#[pin_data]
pub(crate) struct Engine {
    #[pin]
    sched: Mutex<Sched>,
    #[pin]
    idle: CondVar,
    #[pin]
    events: Mutex<Events>,
    #[pin]
    event_cv: CondVar,
    backend: Backend,
    recovery: Recovery,
    powered: AtomicBool,
    enabled: AtomicBool,
    irq: AtomicBool,
    /// An `engine_state` value.
    state: AtomicU64,
}

impl Engine {
    /// An engine over `backend` that recovers as `recovery` says; the device
    /// is powered (probe).
    pub(crate) fn new(backend: Backend, recovery: Recovery) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                sched <- new_mutex!(Sched {
                    pending: KVec::new(),
                    running: false,
                    dead: false,
                    last_owner: 0,
                }),
                idle <- new_condvar!(),
                events <- new_mutex!(Events { seen: false }),
                event_cv <- new_condvar!(),
                backend,
                recovery,
                powered: AtomicBool::new(true),
                enabled: AtomicBool::new(false),
                irq: AtomicBool::new(false),
                state: AtomicU64::new(engine_state::READY),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the engine takes jobs: an `engine_state` value.
    pub(crate) fn state(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }

    /// Whether completion comes by interrupt.
    pub(crate) fn has_irq(&self) -> bool {
        self.irq.load(Ordering::Acquire)
    }

    /// Records that the completion interrupt is wired to [`Engine::interrupt`].
    pub(crate) fn set_irq(&self, on: bool) {
        self.irq.store(on, Ordering::Release);
    }

    /// Called after the device powered up. The task manager lost its state;
    /// it is enabled again before the next job runs, not here: the driver
    /// core also resumes a device just to unbind it, and that must not
    /// depend on the engine answering.
    pub(crate) fn resume(&self) {
        self.enabled.store(false, Ordering::Release);
        self.powered.store(true, Ordering::Release);
    }

    /// Called before the device powers down: the task manager's state is
    /// about to be lost. The caller then waits for a running interrupt
    /// handler, which touches no register once this returned.
    pub(crate) fn suspend(&self) {
        self.powered.store(false, Ordering::Release);
        self.enabled.store(false, Ordering::Release);
        // A wedge that a power cycle cures is cured now.
        let _ = self.state.compare_exchange(
            engine_state::WEDGED_POWER_CYCLE,
            engine_state::READY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// The body of the completion interrupt's threaded handler: drains the
    /// event FIFO and wakes the waiting worker. Whether the interrupt was
    /// the engine's (an event or an error latch was pending).
    pub(crate) fn interrupt(&self) -> bool {
        let mut ev = self.events.lock();
        // Never touch the registers of a powered-down engine (its islands
        // are off: reads would wedge the fabric).
        let Backend::H13(h13) = &self.backend else {
            return false;
        };
        if !self.powered.load(Ordering::Acquire) {
            return false;
        }
        let seen = h13.drain_events(tm::JOB_NID);
        let latched = h13.error_latch() != 0;
        ev.seen |= seen;
        if seen || latched {
            self.event_cv.notify_all();
        }
        seen || latched
    }

    /// Waits until the started job's completion event, an error latch or the
    /// timeout.
    fn wait_done(&self, h13: &H13) -> Outcome {
        let start = Instant::<Monotonic>::now();
        let irq = self.has_irq();
        loop {
            let mut ev = self.events.lock();
            ev.seen |= h13.drain_events(tm::JOB_NID);
            let latch = h13.error_latch();
            if latch != 0 {
                return Outcome {
                    status: job_status::FAULT,
                    fault: latch,
                };
            }
            if ev.seen {
                return Outcome {
                    status: job_status::DONE,
                    fault: 0,
                };
            }
            if start.elapsed() > h13.timeout {
                return Outcome {
                    status: job_status::TIMEOUT,
                    fault: 0,
                };
            }
            if irq {
                let _ = self
                    .event_cv
                    .wait_interruptible_timeout(&mut ev, msecs_to_jiffies(IRQ_POLL_MS));
            } else {
                drop(ev);
                fsleep(Delta::from_micros(POLL_US));
            }
        }
    }

    /// Queues `job`; `ENODEV` once the engine has shut down, `EIO` while it
    /// is wedged.
    pub(crate) fn submit(self: &Arc<Self>, job: Arc<Job>) -> Result {
        let start = {
            let mut s = self.sched.lock();
            if s.dead {
                return Err(ENODEV);
            }
            if self.state() != engine_state::READY {
                return Err(EIO);
            }
            s.pending.push(job, GFP_KERNEL)?;
            !core::mem::replace(&mut s.running, true)
        };
        if start {
            let this = self.clone();
            if let Err(e) = workqueue::system_highpri().try_spawn(GFP_KERNEL, move || this.work()) {
                // Undo: nothing will run the list; fail every queued job.
                let mut s = self.sched.lock();
                s.running = false;
                for j in s.pending.drain_all() {
                    j.complete(job_status::ABORTED, 0);
                }
                self.idle.notify_all();
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// Picks the next job: highest priority, then a client other than the
    /// last one served if any is waiting.
    fn pick(s: &mut Sched) -> Option<Arc<Job>> {
        let best = s.pending.iter().map(|j| j.priority).max()?;
        let pos = s
            .pending
            .iter()
            .position(|j| j.priority == best && j.owner != s.last_owner)
            .or_else(|| s.pending.iter().position(|j| j.priority == best))?;
        let job = s.pending.remove(pos).ok()?;
        s.last_owner = job.owner;
        Some(job)
    }

    fn work(self: Arc<Self>) {
        loop {
            let job = {
                let mut s = self.sched.lock();
                match Self::pick(&mut s) {
                    Some(j) if !s.dead => j,
                    other => {
                        if let Some(j) = other {
                            j.complete(job_status::ABORTED, 0);
                        }
                        if s.pending.is_empty() || s.dead {
                            for j in s.pending.drain_all() {
                                j.complete(job_status::ABORTED, 0);
                            }
                            s.running = false;
                            self.idle.notify_all();
                            return;
                        }
                        continue;
                    }
                }
            };
            if job.is_cancelled() {
                job.complete(job_status::ABORTED, 0);
                continue;
            }
            let outcome = self.run_one(&job);
            job.complete(outcome.status, outcome.fault);
        }
    }

    fn run_one(&self, job: &Job) -> Outcome {
        let h13 = match &self.backend {
            Backend::H13(h) => h,
            Backend::Fw(fw) => return Self::run_fw(fw, job),
        };
        if !self.powered.load(Ordering::Acquire) {
            // The job holds a runtime-PM reference, so this means resume
            // failed: nothing can run.
            return Outcome {
                status: job_status::FAULT,
                fault: u64::MAX,
            };
        }
        // Probe and resume touch no register: the first job after either
        // enables the task manager.
        if !self.enabled.swap(true, Ordering::AcqRel) {
            h13.enable();
        }
        let space = job.vm().space();
        if let Err(e) = h13.attach(space) {
            pr_warn!("cannot attach the job's address space: {:?}\n", e);
            return Outcome {
                status: job_status::FAULT,
                fault: 0,
            };
        }
        // Events of an earlier job must not complete this one.
        {
            let mut ev = self.events.lock();
            let _ = h13.drain_events(tm::JOB_NID);
            ev.seen = false;
        }
        let q = h13.start(job);
        let outcome = self.wait_done(h13);
        h13.finish(q);
        h13.detach(space);
        if outcome.status != job_status::DONE {
            self.recover(h13, job, &outcome);
        }
        outcome
    }

    /// H14: one call through the firmware. A failed call quarantines the
    /// firmware (it refuses everything after), so there is nothing to
    /// recover here.
    fn run_fw(fw: &crate::fw::Firmware, job: &Job) -> Outcome {
        let Some(p) = job.program().fw else {
            return Outcome {
                status: job_status::FAULT,
                fault: 0,
            };
        };
        // UAPI priorities 0..=2 onto the firmware's 2..=7.
        let priority = 2 + 2 * job.priority.min(2);
        Outcome {
            status: fw.call(&p, priority, &job.io),
            fault: 0,
        }
    }

    /// Brings the task manager back after a failed job; marks the engine
    /// wedged if an error latch survives, and aborts the queued jobs then.
    fn recover(&self, h13: &H13, job: &Job, outcome: &Outcome) {
        pr_warn!(
            "job {} ended with status {} (fault {:#x}); recovering the task manager\n",
            job.id,
            outcome.status,
            outcome.fault
        );
        let latch = {
            let _ev = self.events.lock();
            h13.recover()
        };
        if latch == 0 {
            return;
        }
        let (state, how) = match self.recovery {
            Recovery::PowerCycle => (
                engine_state::WEDGED_POWER_CYCLE,
                "it recovers when the device next runtime-suspends",
            ),
            _ => (
                engine_state::WEDGED_REBIND,
                "its state is kept across power cycles: unbind and bind the device or reload the module",
            ),
        };
        self.state.store(state, Ordering::Release);
        pr_err!(
            "engine wedged (error latch {:#x} survives a queue reset); {}\n",
            latch,
            how
        );
        for j in self.sched.lock().pending.drain_all() {
            j.complete(job_status::ABORTED, 0);
        }
    }

    /// Stops the engine at unbind: queued jobs are aborted, the running one
    /// finishes (or times out) first. No job runs after this returns.
    pub(crate) fn shutdown(&self) {
        let mut s = self.sched.lock();
        s.dead = true;
        for j in s.pending.drain_all() {
            j.complete(job_status::ABORTED, 0);
        }
        while s.running {
            self.idle.wait(&mut s);
        }
    }
}

/// The completion interrupt's handler.
pub(crate) struct EngineIrq {
    engine: Arc<Engine>,
}

impl EngineIrq {
    /// A handler for `engine`.
    pub(crate) fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }
}

impl irq::Handler for EngineIrq {
    // The hard handler only wakes the thread; the line stays masked
    // (IRQF_ONESHOT) until the thread drained the events.
    fn handle_threaded(&self) -> bool {
        self.engine.interrupt()
    }
}
