// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The H13 backend (T8103, T6001): the host drives the task manager.
//!
//! Everything it writes and reads is `hw::tm::seq`, the sequences the
//! hardware record documents (`docs/hardware-record.md`); this file only
//! decides when. One job at a time, by whoever holds the engine (the
//! submitting thread when it found the engine idle, else the scheduler's
//! worker; `engine.rs`):
//!
//! 1. if a DART latched a fault, no engine register is read: the job fails
//!    and the engine is contained (below);
//! 2. the task manager is enabled after every power-up, the job's address
//!    space attached, stale events drained, the error latches noted;
//! 3. the job gets the next network id (stamped on its bootstrap TD and its
//!    queue) and is pushed on queue 4;
//! 4. it is done only when both event lines carried its last task's finish
//!    word and the task manager reports idle — polled (the default, as the
//!    references shipped), or from the opt-in interrupt; the DARTs are
//!    looked at before every look at the engine;
//! 5. done: the queue is retired, a change of the error latches reported
//!    (they are not a fault criterion).
//!
//! The address space stays attached after a job that ended DONE, so its
//! client's next job needs no IOMMU attach; it is detached, always with the
//! engine idle, before another client's is attached, before the device
//! runtime-suspends and at unbind.
//!
//! Containment: a job that timed out or faulted may still be running, so
//! its buffers stay mapped and its address space attached ([`Held`]) until
//! the engine is proven stopped, which a power cycle does on both SoCs.
//! The recovery runs at once, on both SoCs in the record's order (OA-TM
//! `ane_tm_recover`): a forced power cycle of the device and every power
//! domain, their state checked, the drain, the idle poll. The engine takes
//! jobs again when the task manager is usable: on T8103 when it then reads
//! idle (the cycle reset it); on T6001, which keeps the task manager in
//! retention, only after a new binding: even when the idle bit comes back
//! the record saw later jobs compute garbage. The DARTs' interrupt lines
//! are masked from the first push after a power-up and unmasked only after
//! the next power cycle (T8103), never while the engine may still raise
//! its event interrupt. At unbind, buffers of a job that was never proven
//! stopped are leaked and the module pinned, rather than freed under a
//! possibly running engine.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::{
    prelude::*,
    sync::{new_condvar, new_mutex, Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
};

use crate::ext::io::IoWindow;
use crate::ext::pm::RuntimePm;
use crate::hw::dart;
use crate::hw::obs::{H13Obs, JobOutcome};
use crate::hw::soc::Recovery;
use crate::hw::tm::{
    self,
    seq::{self, JobHost, NotStarted, Progress, Push},
};
use crate::hw::uapi::{engine_state, fault, job_status};
use crate::job::{Job, JobRes};
use crate::vm::{AddressSpace, Vm};

/// A register window: the hardware's, or (test flavour) the simulator's.
pub(crate) enum Mmio {
    /// The hardware's registers (revoked on unbind).
    Hw(Arc<IoWindow>),
    /// The simulated engine window.
    #[cfg(ane_test)]
    SimEngine(Arc<crate::sim::SimEngine>),
    /// The simulated DART window.
    #[cfg(ane_test)]
    SimDart(Arc<crate::sim::SimEngine>),
}

impl seq::Regs for Mmio {
    fn read32(&self, off: usize) -> u32 {
        match self {
            Mmio::Hw(io) => io.read32(off).unwrap_or(u32::MAX),
            #[cfg(ane_test)]
            Mmio::SimEngine(s) => s.read32(off),
            #[cfg(ane_test)]
            Mmio::SimDart(s) => s.dart_read32(off),
        }
    }

    fn write32(&self, off: usize, val: u32) {
        match self {
            Mmio::Hw(io) => io.write32(off, val),
            #[cfg(ane_test)]
            Mmio::SimEngine(s) => s.write32(off, val),
            // The driver never writes a DART register.
            #[cfg(ane_test)]
            Mmio::SimDart(_) => {}
        }
    }
    fn read32_run(&self, off: usize, out: &mut [u32]) {
        match self {
            #[cfg(ane_test)]
            Mmio::SimEngine(s) => s.read32_run(off, out),
            _ => seq::read32_each(self, off, out),
        }
    }

    fn write32_run(&self, off: usize, vals: &[u32]) {
        match self {
            #[cfg(ane_test)]
            Mmio::SimEngine(s) => s.write32_run(off, vals),
            _ => seq::write32_each(self, off, vals),
        }
    }
}

/// The DARTs' error registers.
struct Darts<'a>(&'a [Mmio]);

impl seq::Dart for Darts<'_> {
    fn fault(&self) -> Option<u32> {
        self.0
            .iter()
            .map(|m| seq::Regs::read32(m, dart::ERROR))
            .find(|e| dart::faulted(*e))
    }
}

/// Poll period with the completion interrupt: only a safety net.
const IRQ_POLL_MS: u32 = 1;

/// What the engine's DMA may reach.
struct Held {
    /// Resources of failed jobs, kept until the engine is proven stopped.
    jobs: KVec<JobRes>,
    /// A power cycle happened since they were kept (T8103).
    cycled: bool,
    /// The address space attached to the engine, if any.
    attached: Option<Arc<Vm>>,
    /// The sequence state of the next job, allocated once (at most one
    /// job is on the engine; its [`Active`] holds the state meanwhile).
    spare: Option<KBox<seq::Started>>,
}

/// Between the (opt-in) completion interrupt and the polling worker.
struct Waiting {
    /// The handler ran since the worker last looked.
    woken: bool,
    /// The handler masked its line (the worker unmasks it once it popped
    /// and acknowledged the events).
    masked: bool,
}

/// A job on the engine: pushed, not yet ended. Its resources stay here
/// until [`H13::finish`] frees or keeps them. Its sequence state is the
/// backend's one [`seq::Started`] (boxed, taken from [`Held::spare`] for the
/// job and given back at its end), so handing an `Active` on moves a
/// pointer, not the few hundred bytes of the job's event log.
pub(crate) struct Active {
    seq: KBox<seq::Started>,
    res: JobRes,
    pushed: Instant<Monotonic>,
}

/// What [`H13::start`] did with a job.
pub(crate) enum Started {
    /// Pushed: look at it until it ends.
    Running(Active),
    /// Never pushed, or refused: how it ended.
    Ended(Outcome),
}

/// How one job ended.
pub(crate) struct Outcome {
    /// A `uapi::job_status` value.
    pub(crate) status: u32,
    /// A `uapi::fault` value, or 0.
    pub(crate) fault: u64,
}

impl Outcome {
    fn new(status: u32, fault: u64) -> Self {
        Self { status, fault }
    }
}

/// The H13 task-manager backend.
#[pin_data]
pub(crate) struct H13 {
    mmio: Mmio,
    darts: KVec<Mmio>,
    /// The DARTs' interrupt lines, masked from the first push after a
    /// power-up until the engine lost power again (the engine's event
    /// interrupt arrives on them, and apple-dart would clear a fault latch
    /// the poll must see; hw-2 risk 8).
    dart_irqs: KVec<u32>,
    /// The DART lines are masked ([`H13::mask_darts`]).
    darts_masked: AtomicBool,
    timeout: Delta,
    recovery: Recovery,
    /// An `engine_state` value.
    state: AtomicU64,
    /// T8103: the device's runtime PM, for the recovery's power cycle.
    pm: RuntimePm,
    /// A recovery is under way (the holder of the engine runs it): jobs
    /// submitted meanwhile queue behind it instead of being refused.
    recovering: AtomicBool,
    powered: AtomicBool,
    enabled: AtomicBool,
    /// The completion interrupt's line, when requested (0: polling).
    irq: AtomicU32,
    #[pin]
    held: Mutex<Held>,
    #[pin]
    waiting: Mutex<Waiting>,
    #[pin]
    wake: CondVar,
    /// What normal operation read, for the first owner's receipt
    /// (`hw::obs`; debugfs `observations`). A leaf lock, held only to
    /// copy a record in or out.
    #[pin]
    obs: Mutex<H13Obs>,
}

impl H13 {
    /// A backend over the engine window `mmio` and the DART windows
    /// `darts`, giving up on a job after `timeout_ms`, recovering as
    /// `recovery` says (a power cycle through `pm`). The device is powered
    /// (probe).
    pub(crate) fn new(
        mmio: Mmio,
        darts: KVec<Mmio>,
        dart_irqs: KVec<u32>,
        timeout_ms: u32,
        recovery: Recovery,
        pm: RuntimePm,
    ) -> Result<Arc<Self>> {
        let spare = KBox::new(seq::Started::new(), GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                mmio,
                darts,
                dart_irqs,
                darts_masked: AtomicBool::new(false),
                timeout: Delta::from_millis(i64::from(timeout_ms)),
                recovery,
                state: AtomicU64::new(engine_state::READY),
                pm,
                recovering: AtomicBool::new(false),
                powered: AtomicBool::new(true),
                enabled: AtomicBool::new(false),
                irq: AtomicU32::new(0),
                held <- new_mutex!(Held {
                    jobs: KVec::new(),
                    cycled: false,
                    attached: None,
                    spare: Some(spare),
                }),
                waiting <- new_mutex!(Waiting {
                    woken: false,
                    masked: false,
                }),
                wake <- new_condvar!(),
                obs <- new_mutex!(H13Obs::default()),
            }),
            GFP_KERNEL,
        )
    }

    /// A copy of the observation record (debugfs `observations`).
    pub(crate) fn observations(&self) -> H13Obs {
        *self.obs.lock()
    }

    /// Whether the engine takes jobs: an `engine_state` value.
    pub(crate) fn state(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }

    /// Whether a job submitted now may be queued: the engine is ready, or
    /// the holder of the engine is recovering it (the job then runs after
    /// the recovery, or ends ABORTED if the recovery fails).
    pub(crate) fn accepts(&self) -> bool {
        self.state() == engine_state::READY || self.recovering.load(Ordering::Acquire)
    }

    /// Whether completion comes by interrupt.
    pub(crate) fn has_irq(&self) -> bool {
        self.irq.load(Ordering::Acquire) != 0
    }

    /// Records that the completion interrupt (line `irq`; `u32::MAX` for
    /// the simulator's line) is wired to [`H13::interrupt`].
    pub(crate) fn set_irq(&self, irq: u32) {
        self.irq.store(irq, Ordering::Release);
    }

    /// Called after the device powered up: the task manager lost its state
    /// (T8103) and is enabled again before the next job, not here (the
    /// driver core also resumes a device just to unbind it).
    pub(crate) fn resume(&self) {
        self.obs.lock().resumed();
        self.enabled.store(false, Ordering::Release);
        self.powered.store(true, Ordering::Release);
        if self.recovery == Recovery::PowerCycle {
            // T8103: the power cycle reset the task manager, its interrupt
            // enables with it; nothing can be raised on the DART lines
            // before the next enable, and the next push masks them again.
            // T6001 keeps the task manager (enables, events) in retention:
            // its lines stay masked while the device is bound.
            self.unmask_darts();
        }
    }

    /// Masks the DARTs' interrupt lines unless they are masked already
    /// (just before a push).
    fn mask_darts(&self) {
        if self.darts_masked.swap(true, Ordering::AcqRel) {
            return;
        }
        for irq in self.dart_irqs.iter() {
            crate::ext::irq::mask(*irq);
        }
        #[cfg(ane_test)]
        if let Mmio::SimEngine(sim) = &self.mmio {
            sim.dart_masked(true);
        }
    }

    /// Unmasks the DARTs' interrupt lines, if masked: only once the engine
    /// can no longer raise its event interrupt (it lost power, and with it
    /// the interrupt enables).
    fn unmask_darts(&self) {
        if !self.darts_masked.swap(false, Ordering::AcqRel) {
            return;
        }
        for irq in self.dart_irqs.iter() {
            crate::ext::irq::unmask(*irq);
        }
        #[cfg(ane_test)]
        if let Mmio::SimEngine(sim) = &self.mmio {
            sim.dart_masked(false);
        }
    }

    /// Called before the device powers down. The caller then waits for a
    /// running interrupt handler, which touches no register once this
    /// returned.
    pub(crate) fn suspend(&self) {
        self.obs.lock().suspended();
        self.powered.store(false, Ordering::Release);
        self.enabled.store(false, Ordering::Release);
        // Without power the engine runs nothing, on either SoC: buffers
        // kept from a failed job may go once the device is back (the power
        // is really off only after this returns).
        // That this callback ran does not prove the engine stopped (genpd
        // powers a domain off only once nothing else in it is active, and
        // the DARTs share one): a wedge is cleared only by the recovery,
        // which checks the engine after its power cycle.
        let mut h = self.held.lock();
        h.cycled = true;
        if h.jobs.is_empty() {
            // The last job ended DONE: the engine is idle.
            self.detach_locked(&mut h);
        }
    }

    /// The body of the (opt-in) completion interrupt's threaded handler.
    /// It claims the interrupt only when the engine can have raised it
    /// (kernel-2 N13): powered, and a DART fault latched or an event
    /// pending ([`seq::irq_status`]: DART error words, then the two event
    /// counts; nothing is popped or acknowledged). Then it masks its own
    /// line (the events stay pending until the worker pops and
    /// acknowledges them, which also unmasks it) and wakes the worker.
    /// Anything else is `IRQ_NONE`, so a shared or stuck line reaches the
    /// interrupt core's spurious-interrupt detector instead of waking the
    /// worker over and over. Whether it claimed the interrupt.
    pub(crate) fn interrupt(&self) -> bool {
        if !self.powered.load(Ordering::Acquire) {
            return false;
        }
        // Registers are read only while powered: `suspend` clears
        // `powered` and its caller then waits for a running handler.
        if seq::irq_status(&self.mmio, &Darts(&self.darts)) == seq::IrqStatus::Nothing {
            return false;
        }
        let line = self.irq.load(Ordering::Acquire);
        let mut w = self.waiting.lock();
        if line != 0 && line != u32::MAX && !w.masked {
            crate::ext::irq::mask_nosync(line);
            w.masked = true;
        }
        w.woken = true;
        self.wake.notify_all();
        true
    }

    /// Test flavour: delivers a raised simulated engine line to the
    /// handler, as the interrupt core would (the simulator has no thread of
    /// its own).
    #[cfg(ane_test)]
    fn sim_line(&self) {
        if let Mmio::SimEngine(sim) = &self.mmio {
            if self.has_irq() && sim.take_engine_line() {
                sim.count_irq(self.interrupt());
            }
        }
    }

    /// Frees the buffers of failed jobs once a power cycle proved the engine
    /// stopped.
    fn release_cycled(&self) {
        let freed = {
            let mut h = self.held.lock();
            if !h.cycled || h.jobs.is_empty() {
                h.cycled = false;
                return;
            }
            h.cycled = false;
            core::mem::take(&mut h.jobs)
        };
        self.free_held(freed);
    }

    /// Frees held jobs the engine was proven not to use any more: the
    /// attached address space is detached if it is one of theirs, then the
    /// resources dropped.
    fn free_held(&self, jobs: KVec<JobRes>) {
        let mut h = self.held.lock();
        if jobs
            .iter()
            .any(|res| h.attached.as_ref().is_some_and(|a| Arc::ptr_eq(a, &res.vm)))
        {
            self.detach_locked(&mut h);
        }
        drop(h);
        drop(jobs);
    }

    /// Runs one job to its end (the device is powered: the job held a
    /// runtime-PM reference until now).
    pub(crate) fn run(&self, job: &Job) -> Outcome {
        match self.start(job) {
            Started::Ended(o) => o,
            Started::Running(a) => self.complete(job, a),
        }
    }

    /// Readies the engine for `job` (resources `res`) when [`H13::start`]'s
    /// common case does not hold: frees what a power cycle released,
    /// enables the task manager after a power-up (the DARTs looked at
    /// first) and attaches the job's address space. The resources back, or
    /// how the job ended (its resources kept or dropped).
    fn prepare(&self, job: &Job, res: JobRes) -> core::result::Result<JobRes, Outcome> {
        self.release_cycled();
        let darts = Darts(&self.darts);
        if !self.enabled.load(Ordering::Acquire) {
            // The enable reads the engine: the DARTs are looked at first.
            // Otherwise `seq::start_job` looks at them before its first
            // engine read, and nothing before it reads the engine (the
            // attach below touches only the IOMMU): one look per push.
            if let Some(e) = seq::Dart::fault(&darts) {
                // Latched before this job: no engine read is safe.
                pr_err!("a DART reports fault {:#x} before job {}\n", e, job.id);
                self.contain(res, Progress::DartFault(e));
                return Err(Outcome::new(
                    job_status::FAULT,
                    fault::encode(fault::DART, e),
                ));
            }
            self.enabled.store(true, Ordering::Release);
            seq::enable(&self.mmio);
        }
        if let Err(e) = self.switch_to(&res.vm) {
            pr_warn!("cannot attach the job's address space: {:?}\n", e);
            return Err(Outcome::new(job_status::FAULT, 0));
        }
        Ok(res)
    }

    /// Pushes one job (the device is powered: the job held a runtime-PM
    /// reference until now). Only the holder of the engine calls this,
    /// then [`H13::look`] and [`H13::complete`] or [`H13::finish`].
    pub(crate) fn start(&self, job: &Job) -> Started {
        let Some(res) = job.take_res() else {
            return Started::Ended(Outcome::new(job_status::ABORTED, 0));
        };
        if !self.powered.load(Ordering::Acquire) {
            // Resume failed: nothing can run.
            return Started::Ended(Outcome::new(job_status::FAULT, 0));
        }
        if self.state() != engine_state::READY {
            // Queued while a recovery ran that did not bring it back.
            return Started::Ended(Outcome::new(job_status::ABORTED, 0));
        }
        let darts = Darts(&self.darts);
        // The common case under one lock, the job state taken with it: the
        // engine enabled, nothing kept from a failed job and this job's
        // space attached already, so that `release_cycled`, the enable and
        // `switch_to` ([`H13::prepare`]) would do nothing. (The job's
        // runtime-PM reference keeps `enabled` as it is meanwhile.)
        let mut spare = None;
        let ready = self.enabled.load(Ordering::Acquire) && {
            let mut h = self.held.lock();
            let ready =
                h.jobs.is_empty() && h.attached.as_ref().is_some_and(|a| Arc::ptr_eq(a, &res.vm));
            if ready {
                h.cycled = false;
                spare = h.spare.take();
            }
            ready
        };
        let res = if ready {
            res
        } else {
            let res = match self.prepare(job, res) {
                Ok(res) => res,
                Err(o) => return Started::Ended(o),
            };
            spare = self.held.lock().spare.take();
            res
        };
        // A new state only when the last `Active` was dropped without its
        // `finish`.
        let mut started = match spare {
            Some(b) => b,
            None => match KBox::new(seq::Started::new(), GFP_KERNEL) {
                Ok(b) => b,
                Err(_) => {
                    pr_warn!("job {}: no memory for its sequence state\n", job.id);
                    return Started::Ended(Outcome::new(job_status::FAULT, 0));
                }
            },
        };
        let prog = &res.program;
        let push = Push {
            queue: tm::QUEUE,
            nid: tm::JOB_NID,
            bars: &job.bars[..],
            td_size: prog.td_size,
            td_count: prog.td_count,
            // The engine's window is below 4 GiB.
            first_td: prog.bootstrap_iova as u32,
        };
        let mut host = Host {
            h13: self,
            job,
            res: &res,
            pushed: None,
        };
        let r = seq::start_job(&self.mmio, &darts, &mut host, &push, &mut started);
        let pushed = host.pushed;
        let e = match r {
            Ok(()) => {
                // `mask_darts` noted the time, just before the push.
                let pushed = pushed.unwrap_or_else(Instant::<Monotonic>::now);
                // Test flavour: an event interrupt the push raised reaches
                // the handler before the first look pops the events, as a
                // hardware interrupt raised when the engine posts would.
                #[cfg(ane_test)]
                self.sim_line();
                return Started::Running(Active {
                    seq: started,
                    res,
                    pushed,
                });
            }
            Err(e) => e,
        };
        self.held.lock().spare = Some(started);
        match e {
            NotStarted::DartFault(e) => {
                pr_err!("job {}: DART fault {:#x} before the push\n", job.id, e);
                self.contain(res, Progress::DartFault(e));
                Started::Ended(Outcome::new(
                    job_status::FAULT,
                    fault::encode(fault::DART, e),
                ))
            }
            NotStarted::Wedged(o) => {
                pr_err!("event line {} reports {} events\n", o.line, o.count);
                self.contain(res, Progress::Wedged(o));
                Started::Ended(Outcome::new(job_status::TIMEOUT, 0))
            }
            NotStarted::Unstamped => {
                // Nothing was pushed: the space may stay attached.
                pr_warn!("job {}: cannot stamp the network id\n", job.id);
                Started::Ended(Outcome::new(job_status::FAULT, 0))
            }
        }
    }

    /// The submitting thread's look at the job it pushed: one look (the
    /// DARTs, then both event lines, then the idle bit), and if both lines
    /// carried the finish word but the idle bit is not set yet, up to
    /// [`seq::IDLE_LOOKS`] more at once (the idle bit may read late: the
    /// record's Open item 4), so a job that ended at its push ends here
    /// under either reading. Does not wait.
    pub(crate) fn look(&self, a: &mut Active) -> Progress {
        seq::first_look(&mut a.seq.completion, &self.mmio, &Darts(&self.darts))
    }

    /// Looks at a pushed job until it ended or its time is up, waiting
    /// between looks (polling, or the opt-in interrupt), then ends it.
    pub(crate) fn complete(&self, job: &Job, mut a: Active) -> Outcome {
        let mut host = Host {
            h13: self,
            job,
            res: &a.res,
            pushed: Some(a.pushed),
        };
        let progress = seq::poll_until_end(&self.mmio, &Darts(&self.darts), &mut host, &mut a.seq);
        self.finish(job, a, progress)
    }

    /// Ends a pushed job on what the last look saw: `Running` means its
    /// time is up. The queue is retired and the address space kept
    /// attached, or the job's buffers kept and the engine contained if it
    /// failed. The DART lines stay masked ([`H13::mask_darts`]).
    pub(crate) fn finish(&self, job: &Job, a: Active, progress: Progress) -> Outcome {
        let Active {
            seq: started,
            res,
            pushed,
        } = a;
        let (nid, td_count) = (tm::JOB_NID, res.program.td_count);
        let end = seq::end_job(&self.mmio, &started, progress);
        self.observe(&end, &started.completion, nid, td_count, pushed);
        let s = started.completion.strays;
        self.held.lock().spare = Some(started);
        #[cfg(ane_test)]
        self.sim_line();
        // Unless a DART fault kept it from reading the engine, the last look
        // popped and acknowledged what a completion interrupt signalled:
        // its line may take the next one. (Polled, there is no line and no
        // handler: nothing to reset.)
        let line = self.irq.load(Ordering::Acquire);
        if line != 0 && !matches!(end.progress, Progress::DartFault(_)) {
            let mut w = self.waiting.lock();
            w.woken = false;
            if core::mem::take(&mut w.masked) && line != u32::MAX {
                crate::ext::irq::unmask(line);
            }
        }
        if s.intermediate != 0 || s.foreign != 0 {
            pr_debug!(
                "job {}: {} intermediate, {} foreign events (last {:#x})\n",
                job.id,
                s.intermediate,
                s.foreign,
                s.last_foreign
            );
        }
        // Read only after a failure: what differs from a healthy engine.
        let changed = end.after.filter(|a| *a != tm::LATCH_HEALTHY);
        match end.progress {
            Progress::Done => {
                // The space stays attached for its client's next job.
                Outcome::new(job_status::DONE, 0)
            }
            Progress::DartFault(e) => {
                pr_err!("job {}: DART fault {:#x}\n", job.id, e);
                self.contain(res, end.progress);
                Outcome::new(job_status::FAULT, fault::encode(fault::DART, e))
            }
            Progress::Running | Progress::Wedged(_) => {
                pr_warn!(
                    "job {} did not finish ({:?}); error latches {:x?} (healthy {:x?})\n",
                    job.id,
                    end.progress,
                    end.after,
                    tm::LATCH_HEALTHY
                );
                self.contain(res, end.progress);
                let f = match changed {
                    Some(a) if a[0] != tm::LATCH_HEALTHY[0] => fault::encode(fault::LATCH, a[0]),
                    _ => 0,
                };
                Outcome::new(job_status::TIMEOUT, f)
            }
        }
    }

    /// Notes what one job's sequence read in the observation record: its
    /// words and counts, and the time from its push to now. No register
    /// is read for it.
    fn observe(
        &self,
        end: &seq::Ended,
        c: &seq::Completion,
        nid: u8,
        td_count: u32,
        pushed: Instant<Monotonic>,
    ) {
        let outcome = match end.progress {
            Progress::Done => JobOutcome::Done,
            Progress::Running => JobOutcome::Timeout,
            Progress::Wedged(_) => JobOutcome::Wedged,
            Progress::DartFault(_) => JobOutcome::DartFault,
        };
        let ns = u64::try_from(pushed.elapsed().as_nanos()).unwrap_or(0);
        let seen = &c.seen;
        // Written in place: the record's event log is copied once, only
        // as far as it holds events.
        self.obs.lock().job_with(|j| {
            j.nid = nid;
            j.td_count = td_count;
            j.outcome = outcome;
            j.looks = seen.looks;
            j.ns = ns;
            j.status_first = seen.status_first;
            j.status_last = seen.status_last;
            j.dart_error = match end.progress {
                Progress::DartFault(e) => e,
                _ => 0,
            };
            j.latches = end.after;
            j.events.copy_from(&seen.events);
        });
    }

    /// Keeps a failed job's buffers (its address space stays attached) and
    /// recovers the engine as the SoC allows.
    fn contain(&self, res: JobRes, why: Progress) {
        {
            let mut h = self.held.lock();
            // Only a power cycle after this point proves this job stopped.
            h.cycled = false;
            let unkept = if h.jobs.reserve(1, GFP_KERNEL).is_ok() {
                h.jobs.push_within_capacity(res).err().map(|e| e.0)
            } else {
                Some(res)
            };
            if let Some(mut res) = unkept {
                // Nowhere to keep it: never free it either.
                pr_err!("cannot keep a failed job's buffers: leaking them\n");
                res.drop_pm();
                crate::ext::module::pin();
                core::mem::forget(res);
            }
        }
        self.recover(why);
        // The kept buffers must not keep the device from the power cycle
        // that frees them; until here their job's reference kept the
        // device powered for the recovery's register accesses.
        for res in self.held.lock().jobs.iter_mut() {
            res.drop_pm();
        }
    }

    /// Marks the engine as taking no jobs and recovers it as the SoC
    /// allows (the device is powered: the failed job's runtime-PM reference
    /// is still held). Both SoCs run the record's recovery at once
    /// ([`seq::recover`], OA-TM `ane_tm_recover`): a forced power cycle of
    /// the device and every power domain (no power, no DMA), their state
    /// checked, then the drain and the idle poll. T8103 is ready again when
    /// the task manager reads idle. T6001 never is until it is bound again,
    /// whatever the recovery shows: omarchy-ane saw its task manager kept
    /// in retention through such a cycle and tasks dispatched afterwards
    /// "complete but compute nondeterministic garbage" (OA-TM), and only a
    /// module reload cured it (OA-T6001-RCPT); a wrong answer is worse than
    /// EIO. The cycle still runs there: it stops the failed job's DMA and
    /// leaves the engine in the state the record's reload recovered from.
    fn recover(&self, why: Progress) {
        // No job is taken from here on, until the engine is proven usable.
        let state = match self.recovery {
            Recovery::PowerCycle => {
                self.recovering.store(true, Ordering::Release);
                engine_state::WEDGED_POWER_CYCLE
            }
            _ => engine_state::WEDGED_REBIND,
        };
        self.state.store(state, Ordering::Release);
        let mut host = Recovering {
            h13: self,
            dart_since: None,
            idle_since: None,
        };
        let got = seq::recover(&self.mmio, &Darts(&self.darts), &mut host);
        if matches!(got, seq::Recovered::Idle | seq::Recovered::Busy) {
            // The drain enabled the task manager: it may raise its event
            // interrupt again, and only a later power cycle proves that the
            // failed job is not running (the queues were started again).
            self.enabled.store(true, Ordering::Release);
            self.held.lock().cycled = false;
        }
        let how = match (self.recovery, got) {
            (Recovery::PowerCycle, seq::Recovered::Idle) => {
                pr_info!("engine power-cycled, task manager drained and idle; the engine is ready\n");
                let freed = core::mem::take(&mut self.held.lock().jobs);
                self.free_held(freed);
                self.state.store(engine_state::READY, Ordering::Release);
                self.recovering.store(false, Ordering::Release);
                return;
            }
            (Recovery::PowerCycle, _) => {
                self.state
                    .store(engine_state::WEDGED_REBIND, Ordering::Release);
                self.recovering.store(false, Ordering::Release);
                "the power cycle did not bring the task manager back idle: unbind and bind the device"
            }
            (_, seq::Recovered::Idle) => {
                "power-cycled and drained, the task manager reads idle, but the record saw jobs after such a recovery compute garbage: unbind and bind the device"
            }
            (_, seq::Recovered::Busy) => {
                "power-cycled and drained, the task manager stays busy (its state is kept in retention): unbind and bind the device"
            }
            (_, seq::Recovered::DartLatched) => {
                "a DART fault stays latched after the power cycle, no engine register was read: unbind and bind the device"
            }
            (_, seq::Recovered::PowerFailed) => {
                "the power cycle failed, no engine register was touched after it: unbind and bind the device"
            }
        };
        pr_err!("engine stopped taking jobs after {:?}; {}\n", why, how);
    }

    /// At unbind, after the last job: frees what a power cycle proved safe,
    /// forcing one if none happened since the failure; anything else kept
    /// (the forced cycle failed) is leaked (and the module pinned), never
    /// freed under an engine that may still be running.
    pub(crate) fn unbind(&self) {
        // A line the handler masked after the last look is unmasked before
        // it is freed.
        let line = self.irq.load(Ordering::Acquire);
        if core::mem::take(&mut self.waiting.lock().masked) && line != 0 && line != u32::MAX {
            crate::ext::irq::unmask(line);
        }
        // The DART lines go back to apple-dart only when the engine cannot
        // raise its event interrupt: on T8103 when it was not enabled since
        // its last power cycle. Otherwise (a job ran since, or T6001's
        // retained task manager) they stay masked until reboot: a raised
        // interrupt on them would be one apple-dart cannot acknowledge.
        if self.recovery == Recovery::PowerCycle && !self.enabled.load(Ordering::Acquire) {
            self.unmask_darts();
        } else if self.darts_masked.load(Ordering::Acquire) && !self.dart_irqs.is_empty() {
            pr_info!("the ANE DARTs' interrupt lines stay masked until reboot (the engine may still raise its event interrupt on them)\n");
        }
        let mut h = self.held.lock();
        if h.jobs.is_empty() {
            self.detach_locked(&mut h);
            return;
        }
        if !h.cycled {
            // No power cycle since the failure (it came within the
            // autosuspend delay, or power/control is "on"): forced now, so
            // the buffers are freed rather than leaked with the module
            // pinned, which a later binding could not undo (kernel-2 N7).
            // Its suspend callback marks the cycle.
            drop(h);
            if let Err(e) = self.pm.cycle() {
                pr_err!("unbind: the power cycle failed: {:?}\n", e);
            }
            h = self.held.lock();
        }
        let jobs = core::mem::take(&mut h.jobs);
        if h.cycled {
            drop(h);
            self.free_held(jobs);
            return;
        }
        pr_err!(
            "unbinding with {} failed job(s) whose engine was never proven stopped: their buffers stay mapped until reboot\n",
            jobs.len()
        );
        crate::ext::module::pin();
        core::mem::forget(jobs);
    }

    /// Points the engine's DMA at `vm` (the engine is idle: only the holder
    /// of the engine calls this, before its push). Nothing to do when it is
    /// attached already; another client's space is detached first, unless
    /// it belongs to a failed job whose buffers are held (`EBUSY`: never
    /// switched under an engine that may still run).
    fn switch_to(&self, vm: &Arc<Vm>) -> Result {
        let mut h = self.held.lock();
        if h.attached.as_ref().is_some_and(|a| Arc::ptr_eq(a, vm)) {
            return Ok(());
        }
        if !h.jobs.is_empty() {
            return Err(EBUSY);
        }
        self.detach_locked(&mut h);
        self.attach(vm.space())?;
        h.attached = Some(vm.clone());
        Ok(())
    }

    /// Detaches the attached address space, if any; the engine is idle.
    fn detach_locked(&self, h: &mut Held) {
        if let Some(vm) = h.attached.take() {
            self.detach(vm.space());
        }
    }

    /// Attaches the client's IOMMU domain, or the simulator's page table.
    fn attach(&self, space: &AddressSpace) -> Result {
        match (&self.mmio, space) {
            (Mmio::Hw(_), AddressSpace::Iommu(d)) => d.attach(),
            #[cfg(ane_test)]
            (Mmio::SimEngine(sim), AddressSpace::Soft(pt)) => {
                let pt = pt
                    .as_any()
                    .downcast_ref::<crate::sim::SimPageTable>()
                    .ok_or(EINVAL)?;
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
            (Mmio::SimEngine(sim), _) => sim.detach(),
            #[cfg(ane_test)]
            _ => {}
        }
    }
}

/// The driver's side of [`seq::start_job`], the waits between looks and
/// [`seq::end_job`] for one job.
struct Host<'a> {
    h13: &'a H13,
    job: &'a Job,
    res: &'a JobRes,
    /// When the job was pushed (`mask_darts` comes just before); `None`
    /// until then.
    pushed: Option<Instant<Monotonic>>,
}

impl JobHost for Host<'_> {
    fn stamp(&mut self, nid: u8) -> bool {
        self.res.program.stamp_nid(nid).is_ok()
    }

    fn mask_darts(&mut self) {
        self.h13.mask_darts();
        // The push follows.
        self.pushed = Some(Instant::<Monotonic>::now());
        self.job.mark_started();
    }

    fn pause(&mut self) -> bool {
        // Only a pushed job is waited for.
        let Some(pushed) = self.pushed else {
            return false;
        };
        let elapsed = pushed.elapsed();
        if elapsed > self.h13.timeout {
            return false;
        }
        let h = self.h13;
        let line = h.irq.load(Ordering::Acquire);
        if line == 0 {
            // Every 20 µs at first, backing off with the job's age.
            let age = u64::try_from(elapsed.as_nanos() / 1000).unwrap_or(0);
            let us = seq::poll_interval_us(age);
            fsleep(Delta::from_micros(i64::try_from(us).unwrap_or(i64::MAX)));
            return true;
        }
        let mut w = h.waiting.lock();
        // The last look popped and acknowledged what the handler saw.
        if core::mem::take(&mut w.masked) {
            crate::ext::irq::unmask(line);
        }
        #[cfg(ane_test)]
        {
            drop(w);
            h.sim_line();
            w = h.waiting.lock();
        }
        if !core::mem::take(&mut w.woken) {
            let r = h
                .wake
                .wait_interruptible_timeout(&mut w, msecs_to_jiffies(IRQ_POLL_MS));
            w.woken = false;
            if matches!(r, CondVarTimeoutResult::Signal { .. }) {
                // A signal is pending (the job runs in its submitter's
                // thread, `Engine::run_inline`): the interruptible wait
                // returns at once, so sleep without it rather than spin on
                // the registers for the whole job (kernel-2 N12).
                drop(w);
                fsleep(Delta::from_millis(i64::from(IRQ_POLL_MS)));
            }
        }
        true
    }
}

/// The driver's side of [`seq::recover`].
struct Recovering<'a> {
    h13: &'a H13,
    /// Since when a DART fault latch is waited for (looks 1 ms apart, for
    /// up to 100 ms).
    dart_since: Option<Instant<Monotonic>>,
    /// Since when the idle bit is polled (looks 100 µs apart, for up to
    /// 1 s, OA's `readl_poll_timeout` bound). Both bounds are times, not
    /// counts: a loaded machine's sleeps run long, and a count of them
    /// kept a failed job from ending for tens of seconds.
    idle_since: Option<Instant<Monotonic>>,
}

/// Whether `bound` has passed since `since` (started now if not yet).
fn elapsed_past(since: &mut Option<Instant<Monotonic>>, bound: Delta) -> bool {
    let start = *since.get_or_insert_with(Instant::<Monotonic>::now);
    start.elapsed() > bound
}

impl seq::RecoveryHost for Recovering<'_> {
    fn power_cycle(&mut self) -> bool {
        // The glue's cycle checks that the device and each domain are
        // active again (the genpd state; the driver maps no pmgr words on
        // H13), and `resume` then marked the engine powered.
        if let Err(e) = self.h13.pm.cycle() {
            pr_err!("recovery: the power cycle failed: {:?}\n", e);
            return false;
        }
        if !self.h13.powered.load(Ordering::Acquire) {
            pr_err!("recovery: the device did not power up again\n");
            return false;
        }
        true
    }

    fn wait_dart(&mut self) -> bool {
        if elapsed_past(&mut self.dart_since, Delta::from_millis(100)) {
            pr_err!("recovery: a DART fault stays latched after the power cycle\n");
            return false;
        }
        fsleep(Delta::from_millis(1));
        true
    }

    fn mask_darts(&mut self) {
        // The power-up unmasked the DART lines on T8103 (`resume`).
        self.h13.mask_darts();
    }

    fn pause(&mut self) -> bool {
        if elapsed_past(&mut self.idle_since, Delta::from_millis(1000)) {
            return false;
        }
        fsleep(Delta::from_micros(100));
        true
    }
}

/// The opt-in completion interrupt's handler.
pub(crate) struct CompletionIrq {
    h13: Arc<H13>,
}

impl CompletionIrq {
    /// A handler for `h13`.
    pub(crate) fn new(h13: Arc<H13>) -> Self {
        Self { h13 }
    }
}

impl crate::ext::irq::Handler for CompletionIrq {
    // The hard handler only wakes the thread; the line stays masked
    // (IRQF_ONESHOT) until the thread popped and acknowledged the events.
    fn handle_threaded(&self) -> bool {
        self.h13.interrupt()
    }
}
