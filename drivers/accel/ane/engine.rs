// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The engine: job scheduling over one backend.
//!
//! One [`Engine`] per bound device serialises the hardware. Jobs from all
//! files wait in one list; a worker (a work item on the high-priority system
//! workqueue, spawned when work arrives and exiting when the list is empty)
//! takes them one at a time: highest priority first and, within a priority,
//! a different client than the one served last whenever one is waiting, so
//! a busy client cannot starve a quiet one.
//!
//! The backend runs each job: [`H13`] drives the task manager
//! (`h13/`), the H14 firmware (`fw.rs`) runs calls. The scheduler knows
//! nothing of registers.

use kernel::{
    prelude::*,
    sync::{new_condvar, new_mutex, Arc, CondVar, Mutex},
    workqueue,
};

use crate::h13::{Outcome, H13};
use crate::hw::uapi::{engine_state, job_status};
use crate::job::Job;

/// What runs the jobs.
pub(crate) enum Backend {
    /// H13: the host drives the task manager.
    H13(Arc<H13>),
    /// H14: the firmware runs calls.
    Fw(Arc<crate::fw::Firmware>),
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
    backend: Backend,
}

impl Engine {
    /// An engine over `backend`; the device is powered (probe).
    pub(crate) fn new(backend: Backend) -> Result<Arc<Self>> {
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
            }),
            GFP_KERNEL,
        )
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
                let next = if s.dead { None } else { Self::pick(&mut s) };
                match next {
                    Some(j) => j,
                    None => {
                        for j in s.pending.drain_all() {
                            j.complete(job_status::ABORTED, 0);
                        }
                        s.running = false;
                        self.idle.notify_all();
                        return;
                    }
                }
            };
            if job.is_cancelled() {
                job.complete(job_status::ABORTED, 0);
                continue;
            }
            let outcome = match &self.backend {
                Backend::H13(h) => h.run(&job),
                Backend::Fw(fw) => Self::run_fw(fw, &job),
            };
            job.complete(outcome.status, outcome.fault);
            if self.state() != engine_state::READY {
                // Contained: what was queued cannot run.
                for j in self.sched.lock().pending.drain_all() {
                    j.complete(job_status::ABORTED, 0);
                }
            }
        }
    }

    /// H14: one call through the firmware. A failed call quarantines the
    /// firmware (it refuses everything after), so there is nothing to
    /// recover here.
    fn run_fw(fw: &crate::fw::Firmware, job: &Job) -> Outcome {
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
        // UAPI priorities 0..=2 onto the firmware's 2..=7.
        let priority = 2 + 2 * job.priority.min(2);
        Outcome {
            status: fw.call(&p, priority, &job.io),
            fault: 0,
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
        drop(s);
        if let Backend::H13(h) = &self.backend {
            h.unbind();
        }
    }
}
