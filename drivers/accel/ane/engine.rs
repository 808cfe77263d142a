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

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::{
    io::{mem::DevresIoMem, Io},
    prelude::*,
    sync::{new_condvar, new_mutex, Arc, CondVar, Mutex},
    time::Delta,
    workqueue,
};

use crate::hw::tm::{self, mgr as tmr, tq};
use crate::hw::uapi::job_status;
use crate::job::Job;
use crate::vm::AddressSpace;

/// Register access to the engine window.
pub(crate) enum Mmio {
    /// The hardware's registers (revoked on unbind).
    Hw(DevresIoMem<{ tm::ENGINE_WINDOW }>),
    /// The simulator's register model.
    #[cfg(ane_test)]
    Sim(Arc<crate::sim::SimEngine>),
}

impl Mmio {
    fn read32(&self, off: usize) -> u32 {
        match self {
            Mmio::Hw(io) => io
                .try_access()
                .and_then(|io| (&*io).try_read32(off).ok())
                .unwrap_or(u32::MAX),
            #[cfg(ane_test)]
            Mmio::Sim(s) => s.read32(off),
        }
    }

    fn write32(&self, off: usize, val: u32) {
        match self {
            Mmio::Hw(io) => {
                if let Some(io) = io.try_access() {
                    let _ = (&*io).try_write32(val, off);
                }
            }
            #[cfg(ane_test)]
            Mmio::Sim(s) => s.write32(off, val),
        }
    }
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

    /// Runs one job to completion, timeout or fault. The device is powered
    /// and the job's address space is attached.
    fn run(&self, job: &Job) -> Outcome {
        let q = tm::QUEUE_FOR_PRIORITY
            .get(job.priority as usize)
            .copied()
            .unwrap_or(tm::QUEUE_FOR_PRIORITY[1]);
        let prog = job.program();
        // Events left over from an earlier job must not complete this one.
        let _ = self.drain_events(tm::JOB_NID);

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

        let done = kernel::io::poll::read_poll_timeout(
            || Ok((self.drain_events(tm::JOB_NID), self.error_latch())),
            |(seen, err)| *seen || *err != 0,
            Delta::from_micros(20),
            self.timeout,
        );
        self.mmio.write32(tm::tq_reg(q, tq::STATUS), 0);
        match done {
            Ok((_, 0)) => Outcome {
                status: job_status::DONE,
                fault: 0,
            },
            Ok((_, err)) => Outcome {
                status: job_status::FAULT,
                fault: err,
            },
            Err(_) => Outcome {
                status: job_status::TIMEOUT,
                fault: 0,
            },
        }
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
    /// disabled and enabled again, which drops the wedged job.
    fn recover(&self) {
        let en = self.mmio.read32(tm::tm_reg(tmr::TQ_EN));
        self.mmio
            .write32(tm::tm_reg(tmr::TQ_EN), en & !tmr::TQ_EN_ON);
        self.enable();
    }
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
    backend: H13,
    powered: AtomicBool,
    enabled: AtomicBool,
}

impl Engine {
    /// An engine over `backend`; the device is powered (probe).
    pub(crate) fn new(backend: H13) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                sched <- new_mutex!(Sched {
                    pending: KVec::new(),
                    running: false,
                    dead: false,
                    last_owner: 0,
                }),
                idle <- new_condvar!(),
                backend,
                powered: AtomicBool::new(true),
                enabled: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
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
    /// about to be lost.
    pub(crate) fn suspend(&self) {
        self.powered.store(false, Ordering::Release);
        self.enabled.store(false, Ordering::Release);
    }

    /// Queues `job`; `ENODEV` once the engine has shut down.
    pub(crate) fn submit(self: &Arc<Self>, job: Arc<Job>) -> Result {
        let start = {
            let mut s = self.sched.lock();
            if s.dead {
                return Err(ENODEV);
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
            self.backend.enable();
        }
        let space = job.vm().space();
        if let Err(e) = self.backend.attach(space) {
            pr_warn!("cannot attach the job's address space: {:?}\n", e);
            return Outcome {
                status: job_status::FAULT,
                fault: 0,
            };
        }
        let outcome = self.backend.run(job);
        self.backend.detach(space);
        if outcome.status != job_status::DONE {
            pr_warn!(
                "job {} ended with status {} (fault {:#x}); recovering the task manager\n",
                job.id,
                outcome.status,
                outcome.fault
            );
            self.backend.recover();
        }
        outcome
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
