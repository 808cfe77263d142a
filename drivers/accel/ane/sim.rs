// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The simulated ANE (test flavour only, `ANE_TEST=1`).
//!
//! The H13 engine is `hw::tm::model::TmModel`, the task manager as the
//! hardware record describes it (two four-word event lines, the exact
//! finish word, the idle bit, latches reading 0x22222222, the DART's error
//! register, the event interrupt on the DART's line, T6001 retention), with
//! the functional engine model running each pushed job over the attached
//! page table. Faults to inject through debugfs
//! (`/sys/kernel/debug/ane-sim/`), each a count of the next pushes it
//! applies to: `hang`, `error`, `stale`, `drop_line1`, `no_idle`,
//! `dart_fault`, `spurious_irq` (engine-line interrupts with no event
//! behind them, `sim_irq` only); `exec` = 0 makes pushed jobs finish without running their
//! program (for the overhead benchmark), `exec_delay_ms` makes each take
//! that long (for the system sleep test: the engine is busy from the push
//! until the first register access after the delay). Read-only counters: `irqs`
//! (engine-line interrupts the driver's handler claimed), `irqs_spurious`
//! (claimed while the engine had no event pending), `irqs_none` (refused),
//! `dart_line`
//! (times the event interrupt was raised on the DART's line), `lockups`
//! (engine register reads made while a DART fault was latched: on hardware
//! each would hang the SoC), `power_downs` (times the engine lost power:
//! runtime suspends and the recovery's forced cycles), `accesses` (register accesses of the engine
//! and DART windows; `reads` and `writes` split them) and `ns` (time spent
//! inside them, counted only while
//! `timing` is 1: reading the clock twice per access costs about a tenth of
//! a simulated round trip, so the benchmark measures without it first),
//! `attaches` (address spaces attached to the engine), `attached` (1
//! while one is), `maps` and `unmaps` (calls into the software page tables,
//! where hardware makes one IOMMU call each).
//!
//! What would hang or corrupt real hardware is logged with a line the QEMU
//! judge fails a run on: `ane-sim: LOCKUP` (an engine register read after a
//! DART fault, or any engine access while powered down) and
//! `ane-sim: UNMAPPED-BUSY` (memory a running job reaches unmapped, or its
//! address space switched, under it), and `ane-sim: DART-STORM` (the
//! engine's event interrupt reaching a DART line the driver had unmasked:
//! apple-dart cannot acknowledge it). The task manager plays the
//! alternatives `sim_fw_faults` bits 13..17 choose
//! (`Behaviour::from_sim_bits`).
//!
//! Completion interrupt: with `sim_irq` set (and the driver's opt-in
//! `completion_irq`), the event interrupt is raised on the engine's own
//! line, and the driver's handler runs for it; otherwise it goes to the
//! DART's line, as the record says, and the driver polls.
//!
//! Module parameter `sim_soc` (a chip number: `0x8103`, `0x6000`,
//! `0x6001`, `0x6020` or `0x6021`) registers a platform device named `ane` whose platform data
//! names the SoC; the production platform driver binds it by name, so probe,
//! runtime PM, sysfs unbind and remove all run the real code. The simulated
//! hardware sits behind the same interfaces as the real one: here, a
//! software page table in place of the IOMMU.

use kernel::{
    debugfs::{Dir, File},
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        new_mutex, Arc, Mutex,
    },
    time::{Delta, Instant, Monotonic},
};

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::ext::gem::PagePtr;
use crate::ext::platform::PlatformDevice;
use crate::hw::engine;
use crate::hw::fw::model::{Faults, FwModel, ModelConfig, NullExecutor};
use crate::hw::mem::{Coherence, MemType, STALE_BYTE};
use crate::hw::soc::SocId;
use crate::hw::tm::{
    self,
    model::{Behaviour, Inject, Job as TmJob, Ran, TmModel},
};
use crate::vm::SoftPageTable;

/// The kernel's page size (the pages a mapping lists).
const PAGE_SIZE: u64 = kernel::page::PAGE_SIZE as u64;

/// Maps the `sim_soc` parameter to a table entry: T6001 is matched by the
/// `apple,t6000-ane` compatible like real T600x chips.
pub(crate) fn soc_of_param(raw: u32) -> Option<SocId> {
    match raw {
        0x6001 => Some(SocId::T6000),
        r => SocId::from_raw(r),
    }
}

/// Registers the simulated device for `sim_soc`, or nothing when it is 0.
pub(crate) fn register(sim_soc: u32) -> Result<Option<PlatformDevice>> {
    if sim_soc == 0 {
        return Ok(None);
    }
    let Some(soc) = soc_of_param(sim_soc) else {
        pr_err!(
            "sim_soc={:#x} is not a supported SoC (0x8103, 0x6000, 0x6001, 0x6020, 0x6021)\n",
            sim_soc
        );
        return Err(EINVAL);
    };
    pr_info!("registering a simulated {:?} ANE\n", soc);
    // Bound by name: the H14 driver for firmware SoCs.
    let name = match soc.info().backend {
        crate::hw::soc::BackendKind::HostDriven => c"ane",
        crate::hw::soc::BackendKind::Firmware => c"ane-fw",
    };
    PlatformDevice::register(name, 0, &(soc as u32).to_ne_bytes()).map(Some)
}

/// The simulated H13 engine: the record's task-manager model
/// (`hw::tm::model`), whose pushes run the functional engine model
/// (`hw::engine`) over the attached page table, like the hardware fetching
/// through its IOMMU.
#[pin_data]
pub(crate) struct SimEngine {
    #[pin]
    state: Mutex<SimState>,
    _dir: Dir,
    #[pin]
    hang: File<Atomic<u32>>,
    #[pin]
    error: File<Atomic<u32>>,
    #[pin]
    stale: File<Atomic<u32>>,
    #[pin]
    drop_line1: File<Atomic<u32>>,
    #[pin]
    no_idle: File<Atomic<u32>>,
    #[pin]
    dart_fault: File<Atomic<u32>>,
    /// 0: pushed jobs finish at once without running the program (the
    /// driver-overhead benchmark).
    #[pin]
    exec: File<Atomic<u32>>,
    /// Milliseconds each pushed job takes on top of running it (the system
    /// sleep test wants jobs still queued when the sleep begins).
    #[pin]
    exec_delay_ms: File<Atomic<u32>>,
    #[pin]
    irqs: File<Atomic<u32>>,
    /// Spurious interrupts to raise on the engine's own line, one at each
    /// chance the driver's test hook gives it, with no event behind them
    /// (kernel-2 N13: a shared or stuck line).
    #[pin]
    spurious_irq: File<Atomic<u32>>,
    /// Interrupts the handler claimed while the engine had no event
    /// pending (must stay 0).
    #[pin]
    irqs_spurious: File<Atomic<u32>>,
    /// Interrupts the handler refused (`IRQ_NONE`).
    #[pin]
    irqs_none: File<Atomic<u32>>,
    #[pin]
    dart_line: File<Atomic<u32>>,
    #[pin]
    lockups: File<Atomic<u32>>,
    /// Times the engine lost power (runtime suspends, and the recovery's
    /// forced power cycles).
    #[pin]
    power_downs: File<Atomic<u32>>,
    /// Register accesses of the engine and DART windows (the benchmark
    /// reports them per job).
    #[pin]
    accesses: File<Atomic<u32>>,
    /// The reads among them.
    #[pin]
    reads: File<Atomic<u32>>,
    /// The writes among them.
    #[pin]
    writes: File<Atomic<u32>>,
    /// Nanoseconds spent inside the register accessors (the model, and
    /// with `exec` the program's run): what the benchmark subtracts to
    /// show the driver's own share.
    #[pin]
    ns: File<Atomic<u64>>,
    /// 1: `ns` is counted.
    #[pin]
    timing: File<Atomic<u32>>,
    /// Address spaces attached (the IOMMU attaches of real hardware).
    #[pin]
    attaches: File<Atomic<u32>>,
    /// 1 while an address space is attached.
    #[pin]
    attached: File<Atomic<u32>>,
    /// [`MAP_CALLS`] and [`UNMAP_CALLS`], read-only.
    #[pin]
    maps: File<()>,
    #[pin]
    unmaps: File<()>,
    /// The event interrupt goes to the engine's own line.
    engine_line: AtomicBool,
}

struct SimState {
    model: KBox<TmModel>,
    /// The engine's power domains are up (runtime PM).
    powered: bool,
    attached: Option<SimPageTable>,
    /// The engine line was raised and not yet delivered.
    raised: bool,
    /// A deferred push (`exec_delay_ms`) runs at the first access after
    /// this.
    due: Option<(Instant<Monotonic>, Delta)>,
    /// What the attached table was last told the engine reaches.
    live: bool,
    /// The model's interrupts on the DART line and lockups, as last
    /// copied to debugfs.
    published: (u32, u32),
    /// The model's DART-line storms last reported.
    storms: u32,
}

/// DMA of the engine model through a software page table.
struct PtDma<'a>(&'a SimPageTable);

impl engine::Dma for PtDma<'_> {
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> core::result::Result<(), engine::Fault> {
        self.0.read(iova, buf).map_err(|_| engine::Fault { iova })
    }

    fn write(&mut self, iova: u64, buf: &[u8]) -> core::result::Result<(), engine::Fault> {
        self.0.write(iova, buf).map_err(|_| engine::Fault { iova })
    }
}

impl SimEngine {
    /// A powered engine; `retention` keeps the task manager's state across
    /// power cycles (T6001).
    /// `alternatives` are `sim_fw_faults` bits choosing how the task
    /// manager behaves where the record is silent
    /// ([`Behaviour::from_sim_bits`]).
    pub(crate) fn new(retention: bool, alternatives: u32) -> Result<Arc<Self>> {
        let behaviour = Behaviour::from_sim_bits(alternatives);
        if alternatives & Behaviour::SIM_BITS != 0 {
            pr_info!(
                "ane-sim: task manager alternatives {:#x}: {:?}\n",
                alternatives & Behaviour::SIM_BITS,
                behaviour
            );
        }
        let model = KBox::new(TmModel::new(retention, behaviour), GFP_KERNEL)?;
        let dir = Dir::new(c"ane-sim");
        Arc::pin_init(
            try_pin_init!(Self {
                state <- new_mutex!(SimState {
                    model,
                    powered: true,
                    attached: None,
                    raised: false,
                    due: None,
                    live: false,
                    published: (0, 0),
                    storms: 0,
                }),
                hang <- dir.read_write_file(c"hang", Atomic::<u32>::new(0)),
                error <- dir.read_write_file(c"error", Atomic::<u32>::new(0)),
                stale <- dir.read_write_file(c"stale", Atomic::<u32>::new(0)),
                drop_line1 <- dir.read_write_file(c"drop_line1", Atomic::<u32>::new(0)),
                no_idle <- dir.read_write_file(c"no_idle", Atomic::<u32>::new(0)),
                dart_fault <- dir.read_write_file(c"dart_fault", Atomic::<u32>::new(0)),
                exec <- dir.read_write_file(c"exec", Atomic::<u32>::new(1)),
                exec_delay_ms <- dir.read_write_file(c"exec_delay_ms", Atomic::<u32>::new(0)),
                irqs <- dir.read_only_file(c"irqs", Atomic::<u32>::new(0)),
                spurious_irq <- dir.read_write_file(c"spurious_irq", Atomic::<u32>::new(0)),
                irqs_spurious <- dir.read_only_file(c"irqs_spurious", Atomic::<u32>::new(0)),
                irqs_none <- dir.read_only_file(c"irqs_none", Atomic::<u32>::new(0)),
                dart_line <- dir.read_only_file(c"dart_line", Atomic::<u32>::new(0)),
                lockups <- dir.read_only_file(c"lockups", Atomic::<u32>::new(0)),
                power_downs <- dir.read_only_file(c"power_downs", Atomic::<u32>::new(0)),
                accesses <- dir.read_only_file(c"accesses", Atomic::<u32>::new(0)),
                reads <- dir.read_only_file(c"reads", Atomic::<u32>::new(0)),
                writes <- dir.read_only_file(c"writes", Atomic::<u32>::new(0)),
                ns <- dir.read_only_file(c"ns", Atomic::<u64>::new(0)),
                timing <- dir.read_write_file(c"timing", Atomic::<u32>::new(0)),
                attaches <- dir.read_only_file(c"attaches", Atomic::<u32>::new(0)),
                attached <- dir.read_only_file(c"attached", Atomic::<u32>::new(0)),
                maps <- dir.read_callback_file(c"maps", (), &|(), f| {
                    writeln!(f, "{}", MAP_CALLS.load(Ordering::Relaxed))
                }),
                unmaps <- dir.read_callback_file(c"unmaps", (), &|(), f| {
                    writeln!(f, "{}", UNMAP_CALLS.load(Ordering::Relaxed))
                }),
                engine_line: AtomicBool::new(false),
                _dir: dir,
            }? Error),
            GFP_KERNEL,
        )
    }

    /// Points the engine's DMA at `pt` (the IOMMU attach of real hardware).
    pub(crate) fn attach(&self, pt: &SimPageTable) {
        let mut s = self.state.lock();
        if s.model.busy() {
            pr_err!("ane-sim: UNMAPPED-BUSY: address space switched under a running engine\n");
        }
        s.attached = Some(pt.share());
        self.attaches.fetch_add(1, Relaxed);
        self.attached.store(1, Relaxed);
    }

    /// Detaches the page table.
    pub(crate) fn detach(&self) {
        let mut s = self.state.lock();
        if s.model.busy() {
            pr_err!("ane-sim: UNMAPPED-BUSY: address space detached under a running engine\n");
        }
        if let Some(pt) = s.attached.take() {
            pt.set_live(None);
        }
        s.live = false;
        self.attached.store(0, Relaxed);
    }

    /// Marks what the attached table's running job reaches (when that
    /// changed: a push, or the job's end).
    fn track(s: &mut SimState) {
        let running = s.model.running();
        if running.is_none() && !s.live {
            return;
        }
        if let Some(pt) = &s.attached {
            pt.set_live(running);
        }
        s.live = running.is_some();
    }

    /// Runs a deferred push whose time has come.
    fn catch_up(&self, s: &mut SimState) {
        let Some((pushed, delay)) = s.due else {
            return;
        };
        if pushed.elapsed() < delay {
            return;
        }
        s.due = None;
        let before = s.model.dart_line_raised();
        let engine = self.engine(s.attached.as_ref().map(SimPageTable::share));
        s.model.run_deferred(engine);
        self.note_line(s, before);
    }

    /// What runs a job the model starts: its program over `pt`, or, with
    /// `exec` off, nothing (the job finishes at once).
    fn engine(&self, pt: Option<SimPageTable>) -> impl FnOnce(&TmJob) -> Ran + '_ {
        move |job| {
            if self.exec.load(Relaxed) != 0 {
                run(pt.as_ref(), job)
            } else {
                Ran::Finished
            }
        }
    }

    /// Notes an event interrupt raised since the model's count was
    /// `before`, when it goes to the engine's own line.
    fn note_line(&self, s: &mut SimState, before: u32) {
        if s.model.dart_line_raised() != before && self.engine_line.load(Ordering::Acquire) {
            s.raised = true;
        }
    }

    /// Routes the event interrupt to the engine's own line (`sim_irq`).
    pub(crate) fn use_engine_line(&self) {
        self.engine_line.store(true, Ordering::Release);
    }

    /// Whether the engine line was raised since the last call, by the
    /// engine or (`spurious_irq`) by nothing the engine has: the driver's
    /// test hook delivers either to its handler.
    pub(crate) fn take_engine_line(&self) -> bool {
        if core::mem::take(&mut self.state.lock().raised) {
            return true;
        }
        self.engine_line.load(Ordering::Acquire) && Self::take(&self.spurious_irq)
    }

    /// Counts one interrupt delivered to the driver's handler: whether it
    /// claimed it (`IRQ_HANDLED`). A claim while the engine has no event
    /// pending (looked at after the handler, which pops nothing) is one
    /// the interrupt core's spurious-interrupt detector could never see.
    pub(crate) fn count_irq(&self, claimed: bool) {
        if !claimed {
            self.irqs_none.fetch_add(1, Relaxed);
            return;
        }
        self.irqs.fetch_add(1, Relaxed);
        if self.state.lock().model.pending_events() == 0 {
            self.irqs_spurious.fetch_add(1, Relaxed);
        }
    }

    /// The driver masked (`true`) or unmasked the DARTs' interrupt lines.
    pub(crate) fn dart_masked(&self, masked: bool) {
        let mut s = self.state.lock();
        s.model.set_dart_masked(masked);
        self.publish(&mut s);
    }

    /// Power loss and power-up (runtime suspend): the model loses its state
    /// unless the task manager is kept in retention.
    pub(crate) fn power_down(&self) {
        let mut s = self.state.lock();
        s.model.power_cycle();
        s.powered = false;
        s.due = None;
        Self::track(&mut s);
        drop(s);
        self.power_downs.fetch_add(1, Relaxed);
    }

    /// Power-up (runtime resume).
    pub(crate) fn power_up(&self) {
        self.state.lock().powered = true;
    }

    /// An engine register access while the engine's islands are off: on
    /// hardware it would wedge the fabric.
    fn check_powered(s: &SimState, off: usize) {
        if !s.powered {
            // The judge fails a run on this line (tools/qemu/judge.sh).
            pr_err!(
                "ane-sim: LOCKUP: engine register {:#x} accessed while powered down\n",
                off
            );
        }
    }

    /// Copies the model's counters to debugfs when they changed (the
    /// atomics are calls into C: not on every access).
    fn publish(&self, s: &mut SimState) {
        let m = &s.model;
        let line = m.dart_line_raised();
        if line != s.published.0 {
            s.published.0 = line;
            self.dart_line.store(line, Relaxed);
        }
        let lockups = m.lockups();
        if lockups != s.published.1 {
            s.published.1 = lockups;
            self.lockups.store(lockups, Relaxed);
            // The judge fails a run on this line (tools/qemu/judge.sh).
            pr_err!("ane-sim: LOCKUP: an engine register was read after a DART fault (the SoC would hang)\n");
        }
        let storms = m.dart_storms();
        if storms != s.storms {
            s.storms = storms;
            if !self.engine_line.load(Ordering::Acquire) {
                // The judge fails a run on this line (tools/qemu/judge.sh).
                pr_err!("ane-sim: DART-STORM: the engine's event interrupt reached an unmasked DART line (apple-dart cannot acknowledge it)\n");
            }
        }
    }

    /// A register read of the engine window.
    pub(crate) fn read32(&self, off: usize) -> u32 {
        let mut v = 0;
        self.read32_run(off, core::slice::from_mut(&mut v));
        v
    }

    /// Reads of consecutive registers from `off` on, under one lock.
    pub(crate) fn read32_run(&self, off: usize, out: &mut [u32]) {
        let t = self.clock();
        self.count(&self.reads, out.len());
        let mut guard = self.state.lock();
        let s = &mut *guard;
        // What an access does besides the model's read, once for the run.
        Self::check_powered(s, off);
        self.catch_up(s);
        for (i, v) in out.iter_mut().enumerate() {
            *v = s.model.read(off + 4 * i);
        }
        self.publish(s);
        Self::track(s);
        drop(guard);
        self.spent(t);
    }

    /// The time an access starts, while `timing` is on.
    fn clock(&self) -> Option<Instant<Monotonic>> {
        (self.timing.load(Relaxed) != 0).then(Instant::<Monotonic>::now)
    }

    /// Counts the time since `t` (from [`Self::clock`]) as spent in the
    /// simulator.
    fn spent(&self, t: Option<Instant<Monotonic>>) {
        if let Some(t) = t {
            let ns = t.elapsed().as_nanos();
            self.ns.fetch_add(u64::try_from(ns).unwrap_or(0), Relaxed);
        }
    }

    /// Counts `n` register accesses, reads or writes as `kind` says.
    fn count(&self, kind: &Atomic<u32>, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.accesses.fetch_add(n, Relaxed);
        kind.fetch_add(n, Relaxed);
    }

    /// A read of the DART window.
    pub(crate) fn dart_read32(&self, off: usize) -> u32 {
        let t = self.clock();
        self.count(&self.reads, 1);
        let mut guard = self.state.lock();
        self.catch_up(&mut guard);
        let v = guard.model.dart_read32(off);
        drop(guard);
        self.spent(t);
        v
    }

    /// Takes one from a fault-injection counter; whether there was one.
    fn take(counter: &Atomic<u32>) -> bool {
        let v = counter.load(Relaxed);
        if v == 0 {
            return false;
        }
        counter.store(v - 1, Relaxed);
        true
    }

    /// The injection for the next push, in a fixed order of precedence.
    fn inject(&self) -> Option<Inject> {
        [
            (&self.hang, Inject::Hang),
            (&self.error, Inject::Error),
            (&self.dart_fault, Inject::DartFault),
            (&self.stale, Inject::Stale),
            (&self.drop_line1, Inject::DropLine1),
            (&self.no_idle, Inject::NoIdle),
        ]
        .into_iter()
        .find(|(c, _)| Self::take(c))
        .map(|(_, i)| i)
    }

    /// A register write of the engine window; a push runs the job (after
    /// `exec_delay_ms`, at the first access from then on).
    pub(crate) fn write32(&self, off: usize, val: u32) {
        self.write32_run(off, core::slice::from_ref(&val));
    }

    /// Writes of consecutive registers from `off` on, under one lock.
    pub(crate) fn write32_run(&self, off: usize, vals: &[u32]) {
        let t = self.clock();
        self.count(&self.writes, vals.len());
        let mut guard = self.state.lock();
        let s = &mut *guard;
        // What an access does besides the model's write, once for the run.
        Self::check_powered(s, off);
        self.catch_up(s);
        let before = s.model.dart_line_raised();
        let push = tm::tm_reg(tm::mgr::PUSH);
        for (i, v) in vals.iter().enumerate() {
            let off = off + 4 * i;
            if off == push {
                self.push_locked(s, *v);
            } else {
                // Only a push runs a job.
                s.model.write(off, *v, None, |_| Ran::Finished);
            }
        }
        self.note_line(s, before);
        self.publish(s);
        Self::track(s);
        drop(guard);
        self.spent(t);
    }

    /// The PUSH register written: the model starts the job, with the next
    /// fault injection, over the attached page table (deferred by
    /// `exec_delay_ms`).
    fn push_locked(&self, s: &mut SimState, val: u32) {
        let inject = self.inject();
        let delay = self.exec_delay_ms.load(Relaxed);
        s.model.set_defer(delay != 0);
        let pt = s.attached.as_ref().map(SimPageTable::share);
        s.model
            .write(tm::tm_reg(tm::mgr::PUSH), val, inject, self.engine(pt));
        if s.model.has_deferred() {
            s.due = Some((
                Instant::<Monotonic>::now(),
                Delta::from_millis(i64::from(delay)),
            ));
        }
    }
}

/// Runs a pushed job on the functional model over `pt`.
fn run(pt: Option<&SimPageTable>, job: &TmJob) -> Ran {
    let Some(pt) = pt else {
        // Nothing attached: the first fetch faults in the DART.
        return Ran::DmaFault(job.first_td);
    };
    let opts = engine::Options::default();
    match engine::execute(
        &mut PtDma(pt),
        job.first_td,
        job.td_size,
        job.td_count,
        &job.bars,
        &opts,
    ) {
        Ok(_) => Ran::Finished,
        Err(engine::EngineError::Fault { iova, .. }) => Ran::DmaFault(iova),
        Err(e) => {
            pr_debug!("simulated engine: {:?}\n", e);
            Ran::Failed
        }
    }
}

/// The simulated T602x coprocessor: the firmware model of `hw::fw::model`
/// behind the registers of the engine window, reaching memory through the
/// device-wide page table. Faults to inject at start come from the
/// `sim_fw_faults` parameter (the `hw::fw::model::Faults` bits).
///
/// The H14 task format is not documented, so nothing executes a call: the
/// model refuses an H13 task stream at PROGRAM_LOAD, and a call of a loaded
/// H14 program completes (finish state 1) without writing one output byte
/// ([`NullExecutor`]; `hw::fw::model`).
#[pin_data]
pub(crate) struct SimFw {
    #[pin]
    model: Mutex<FwModel>,
    pt: SimPageTable,
    _dir: Dir,
    /// `/sys/kernel/debug/ane-sim/fw_faults`: the faults in force, read at
    /// every step (so a test can break a running firmware).
    #[pin]
    faults: File<Atomic<u32>>,
}

impl SimFw {
    /// A stopped coprocessor of `chip` with `faults`, fetching through
    /// `pt`; a call's finish event comes `finish_delay` ticks after its
    /// dispatch (0: the model's default).
    pub(crate) fn new(
        faults: u32,
        finish_delay: u32,
        pt: &SimPageTable,
        chip: &'static crate::hw::fw::patch::Chip,
    ) -> Result<Arc<Self>> {
        let mut cfg = ModelConfig::DEFAULT;
        cfg.faults = Faults::from_bits(faults);
        // The simulated chip checks the patches of its own SoC.
        cfg.chip = chip;
        if finish_delay != 0 {
            cfg.finish_delay = finish_delay;
        }
        let dir = Dir::new(c"ane-sim");
        Arc::pin_init(
            try_pin_init!(Self {
                model <- new_mutex!(FwModel::new(cfg)),
                pt: pt.share(),
                faults <- dir.read_write_file(c"fw_faults", Atomic::<u32>::new(faults)),
                _dir: dir,
            }? Error),
            GFP_KERNEL,
        )
    }

    /// A 32-bit register read.
    pub(crate) fn read32(&self, off: usize) -> u32 {
        self.model.lock().read32(off)
    }

    /// A 32-bit register write.
    pub(crate) fn write32(&self, off: usize, val: u32) {
        self.model.lock().write32(off, val)
    }

    /// A 64-bit register read.
    pub(crate) fn read64(&self, off: usize) -> u64 {
        self.model.lock().read64(off)
    }

    /// A 64-bit register write.
    pub(crate) fn write64(&self, off: usize, val: u64) {
        self.model.lock().write64(off, val)
    }

    /// A read of the power words.
    pub(crate) fn pmgr_read32(&self, off: usize) -> u32 {
        self.model.lock().pmgr_read32(off)
    }

    /// Lets the firmware run one step.
    pub(crate) fn tick(&self) {
        let mut m = self.model.lock();
        m.set_faults(Faults::from_bits(self.faults.load(Relaxed)));
        m.tick(&mut PtDma(&self.pt), &mut NullExecutor);
    }
}

/// One mapped buffer of the software page table.
struct SimMap {
    iova: u64,
    pages: KVec<PagePtr>,
    /// The device may write it (a DMA write to a read-only mapping faults,
    /// as the DART's permission check does).
    writable: bool,
    /// How the CPU maps it, for the [`Coherence`] alternatives.
    mem: MemType,
}

/// The simulated engine's page table: what the engine's DMA translates
/// device addresses through. Unmapped addresses fault.
pub(crate) struct SimPageTable(Arc<SimPt>);

/// Calls of [`SimPageTable::map`] and [`SimPageTable::unmap`] of every
/// table (debugfs `maps`, `unmaps`): where hardware makes one IOMMU call
/// each, so the benchmark can show a buffer costs one map and one unmap
/// call, not one per page.
static MAP_CALLS: AtomicU64 = AtomicU64::new(0);
static UNMAP_CALLS: AtomicU64 = AtomicU64::new(0);

/// Device addresses a running job reaches: its first TD and its slots.
type Live = [u64; crate::hw::td::BAR_SLOTS + 1];

#[pin_data(PinnedDrop)]
struct SimPt {
    #[pin]
    maps: Mutex<KVec<SimMap>>,
    /// Attached to the device for its lifetime (the H14 address space):
    /// it must be detached before the table goes.
    device_wide: AtomicBool,
    /// While the engine may be running a job through this table: the
    /// addresses it reaches. Unmapping one of them then is the driver
    /// freeing memory under a running engine.
    #[pin]
    live: Mutex<Option<Live>>,
    /// Whether the device sees the CPU's cached lines and the CPU the
    /// device's writes (`sim_fw_faults` bits of `hw::mem::Coherence`).
    coherence: Coherence,
}

#[pinned_drop]
impl PinnedDrop for SimPt {
    fn drop(self: Pin<&mut Self>) {
        if self.device_wide.load(Ordering::Acquire) {
            // The judge fails a run on this line (tools/qemu/judge.sh): on
            // hardware this is an IOMMU domain freed while attached.
            pr_err!("ane-sim: FREED-ATTACHED: a device-wide page table was freed while attached\n");
        }
    }
}

impl SimPageTable {
    /// An empty page table of a device that snoops the CPU's caches.
    pub(crate) fn new() -> Result<Self> {
        Self::with_coherence(Coherence::default())
    }

    /// An empty page table whose device sees the CPU's caches as
    /// `coherence` says: under its alternatives a device read of a buffer
    /// the CPU maps cacheably returns [`STALE_BYTE`]s, and a device write
    /// to one is lost to the CPU (the model keeps one copy of memory, what
    /// the CPU sees, so the device's own later reads miss it too).
    pub(crate) fn with_coherence(coherence: Coherence) -> Result<Self> {
        Ok(Self(Arc::pin_init(
            pin_init!(SimPt {
                maps <- new_mutex!(KVec::new()),
                device_wide: AtomicBool::new(false),
                live <- new_mutex!(None),
                coherence,
            }),
            GFP_KERNEL,
        )?))
    }

    /// Marks the table attached to the device for its lifetime, as the
    /// hardware path attaches its IOMMU domain.
    pub(crate) fn attach_device(&self) {
        self.0.device_wide.store(true, Ordering::Release);
    }

    /// Detaches it again.
    pub(crate) fn detach_device(&self) {
        self.0.device_wide.store(false, Ordering::Release);
    }

    /// Another handle on the same page table.
    pub(crate) fn share(&self) -> Self {
        Self(self.0.clone())
    }

    fn set_live(&self, job: Option<&TmJob>) {
        *self.0.live.lock() = job.map(|j| {
            let mut live = [0u64; crate::hw::td::BAR_SLOTS + 1];
            live[0] = j.first_td;
            for (l, b) in live.iter_mut().skip(1).zip(j.bars.iter()) {
                *l = *b;
            }
            live
        });
    }

    /// Maps `pages` at `iova` (the caller allocated the range), writable by
    /// the engine when `writable`, mapped by the CPU as `mem` says.
    pub(crate) fn map(&self, iova: u64, pages: &[PagePtr], writable: bool, mem: MemType) -> Result {
        MAP_CALLS.fetch_add(1, Ordering::Relaxed);
        let mut copy = KVec::with_capacity(pages.len(), GFP_KERNEL)?;
        for p in pages {
            copy.push(*p, GFP_KERNEL)?;
        }
        let mut maps = self.0.maps.lock();
        let pos = maps
            .iter()
            .position(|m| m.iova > iova)
            .unwrap_or(maps.len());
        maps.reserve(1, GFP_KERNEL)?;
        maps.insert_within_capacity(
            pos,
            SimMap {
                iova,
                pages: copy,
                writable,
                mem,
            },
        )
        .map_err(|_| ENOMEM)
    }

    /// Removes the mapping at `iova`.
    pub(crate) fn unmap(&self, iova: u64, size: u64) {
        UNMAP_CALLS.fetch_add(1, Ordering::Relaxed);
        let reached = self.0.live.lock().is_some_and(|live| {
            live.iter()
                .any(|a| *a != 0 && *a >= iova && *a - iova < size)
        });
        if reached {
            // The judge fails a run on this line (tools/qemu/judge.sh).
            pr_err!(
                "ane-sim: UNMAPPED-BUSY: IOVA {:#x} unmapped while the engine may access it\n",
                iova
            );
        }
        let mut maps = self.0.maps.lock();
        if let Some(pos) = maps.iter().position(|m| m.iova == iova) {
            let _ = maps.remove(pos);
        }
    }

    /// Runs `f` on each page-sized chunk of `[iova, iova + len)`: the page,
    /// the offset in it, the chunk's offset and length in the transfer,
    /// and the mapping's memory type.
    /// `EFAULT` if any byte is unmapped (the engine's translation fault), or
    /// mapped read-only and `write` (its permission fault).
    fn walk(
        &self,
        iova: u64,
        len: usize,
        write: bool,
        mut f: impl FnMut(&PagePtr, usize, usize, usize, MemType) -> Result,
    ) -> Result {
        let maps = self.0.maps.lock();
        let mut done = 0usize;
        while done < len {
            let addr = iova.checked_add(done as u64).ok_or(EFAULT)?;
            let m = maps
                .iter()
                .find(|m| addr >= m.iova && addr - m.iova < (m.pages.len() as u64) * PAGE_SIZE)
                .ok_or(EFAULT)?;
            if write && !m.writable {
                return Err(EFAULT);
            }
            let off = addr - m.iova;
            let page = m.pages.get((off / PAGE_SIZE) as usize).ok_or(EFAULT)?;
            let in_page = (off % PAGE_SIZE) as usize;
            let chunk = core::cmp::min(len - done, PAGE_SIZE as usize - in_page);
            f(page, in_page, done, chunk, m.mem)?;
            done += chunk;
        }
        Ok(())
    }

    /// DMA read of `buf.len()` bytes at `iova`.
    pub(crate) fn read(&self, iova: u64, buf: &mut [u8]) -> Result {
        let len = buf.len();
        let coherence = self.0.coherence;
        self.walk(iova, len, false, |page, in_page, at, n, mem| {
            let dst = buf.get_mut(at..at + n).ok_or(EFAULT)?;
            if !coherence.device_sees_cpu_writes(mem) {
                dst.fill(STALE_BYTE);
                return Ok(());
            }
            // SAFETY: The page belongs to a live mapping (we hold the table
            // lock, and BOs unmap before releasing their pages).
            unsafe { page.read(in_page, dst) }
        })
    }

    /// DMA write of `buf` at `iova`.
    pub(crate) fn write(&self, iova: u64, buf: &[u8]) -> Result {
        let coherence = self.0.coherence;
        self.walk(iova, buf.len(), true, |page, in_page, at, n, mem| {
            if !coherence.cpu_sees_device_writes(mem) {
                return Ok(());
            }
            let src = buf.get(at..at + n).ok_or(EFAULT)?;
            // SAFETY: As in `read`.
            unsafe { page.write(in_page, src) }
        })
    }
}

/// The seam: the address-space code maps and unmaps through this table as
/// it does through an IOMMU domain.
impl SoftPageTable for SimPageTable {
    fn map(&self, iova: u64, pages: &[PagePtr], writable: bool, mem: MemType) -> Result {
        SimPageTable::map(self, iova, pages, writable, mem)
    }

    fn unmap(&self, iova: u64, size: u64) {
        SimPageTable::unmap(self, iova, size)
    }

    fn attach_device(&self) {
        SimPageTable::attach_device(self)
    }

    fn detach_device(&self) {
        SimPageTable::detach_device(self)
    }

    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}
