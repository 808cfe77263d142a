// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The simulated ANE (test flavour only, `ANE_TEST=1`).
//!
//! Fault injection (for the recovery tests) through debugfs:
//! `/sys/kernel/debug/ane-sim/hang` and `.../error` hold how many of the next
//! pushes hang (no completion event ever comes) or latch an engine error;
//! `.../sticky` how many of the next injected errors survive a queue reset
//! (so only the SoC's wedge recovery clears them). `.../irqs` counts the
//! simulated completion interrupts the driver's handler claimed.
//!
//! Per SoC: on T600x (retention) the task-manager registers survive power
//! cycles and queue resets, and resetting the queues under a hung task
//! latches TM_ERROR1/2 = 0x22222222, TM_ERROR3 = 0x2222, as the seed
//! project recorded on T6001 (seed-repos.md §4). On T8103 power loss clears
//! everything and a queue reset clears the latches (an assumption: what the
//! hardware clears exactly is not known).
//!
//! Completion interrupt: with `sim_irq` set, a push that posts an event or
//! latches an error then calls the driver's interrupt handler body
//! ([`Engine::interrupt`]) once the register lock is dropped, as the
//! engine's interrupt line would; without it the driver polls.
//!
//! Module parameter `sim_soc` (a chip number: `0x8103`, `0x6001` or
//! `0x6021`) registers a platform device named `ane` whose platform data
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
};

use crate::engine::Engine;
use crate::ext::gem::PagePtr;
use crate::ext::platform::PlatformDevice;
use crate::hw::engine;
use crate::hw::fw::model::{Call, ExecFailed, Executor, Faults, FwModel, Mem, ModelConfig};
use crate::hw::soc::SocId;
use crate::hw::tm::{self, mgr as tmr, tq};
use crate::vm::PAGE_SIZE;

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
            "sim_soc={:#x} is not a supported SoC (0x8103, 0x6001, 0x6021)\n",
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

/// The simulated engine: a register file with the task manager's map
/// (`hw::tm`) whose PUSH runs the job through the functional model
/// (`hw::engine`) over the attached page table, like the hardware fetching
/// through its IOMMU.
///
/// Like the hardware, it forgets all register state when powered down
/// ([`SimEngine::power_down`]): the driver must run the enable sequence
/// again after resume, or pushes are ignored and jobs time out.
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
    sticky: File<Atomic<u32>>,
    #[pin]
    irqs: File<Atomic<u32>>,
    /// The driver's interrupt handler, while the "line" is connected.
    #[pin]
    irq_sink: Mutex<Option<Arc<Engine>>>,
    /// The task manager is kept in retention (T600x).
    retention: bool,
}

/// Error-latch code the simulator reports for an injected engine error.
const INJECTED_ERROR: u32 = 0xe0;

struct SimState {
    words: KVVec<u32>,
    events: KVec<u32>,
    attached: Option<SimPageTable>,
    /// A pushed task hangs.
    hung: bool,
    /// The latched error survives queue resets.
    sticky: bool,
}

/// TM_ERROR1..3 after the queues are reset under a hung task on T6001.
const RETENTION_HANG_LATCH: [u32; 3] = [0x2222_2222, 0x2222_2222, 0x2222];

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
    /// A powered-down engine; `retention` keeps the task manager's
    /// registers across power cycles and queue resets (T600x).
    pub(crate) fn new(retention: bool) -> Result<Arc<Self>> {
        let mut words = KVVec::with_capacity(tm::ENGINE_WINDOW / 4, GFP_KERNEL)?;
        words.resize(tm::ENGINE_WINDOW / 4, 0, GFP_KERNEL)?;
        let dir = Dir::new(c"ane-sim");
        Arc::pin_init(
            try_pin_init!(Self {
                state <- new_mutex!(SimState {
                    words,
                    events: KVec::new(),
                    attached: None,
                    hung: false,
                    sticky: false,
                }),
                hang <- dir.read_write_file(c"hang", Atomic::<u32>::new(0)),
                error <- dir.read_write_file(c"error", Atomic::<u32>::new(0)),
                sticky <- dir.read_write_file(c"sticky", Atomic::<u32>::new(0)),
                irqs <- dir.read_write_file(c"irqs", Atomic::<u32>::new(0)),
                irq_sink <- new_mutex!(None),
                retention,
                _dir: dir,
            }? Error),
            GFP_KERNEL,
        )
    }

    /// Points the engine's DMA at `pt` (the IOMMU attach of real hardware).
    pub(crate) fn attach(&self, pt: &SimPageTable) {
        self.state.lock().attached = Some(SimPageTable(pt.0.clone()));
    }

    /// Detaches the page table.
    pub(crate) fn detach(&self) {
        self.state.lock().attached = None;
    }

    /// Connects the simulated completion interrupt to `engine`'s handler.
    pub(crate) fn connect_irq(&self, engine: Arc<Engine>) {
        *self.irq_sink.lock() = Some(engine);
    }

    /// Disconnects it (unbind; also breaks the reference cycle).
    pub(crate) fn disconnect_irq(&self) {
        *self.irq_sink.lock() = None;
    }

    /// Power loss: every register and pending event is gone, unless the
    /// task manager is kept in retention.
    pub(crate) fn power_down(&self) {
        if self.retention {
            return;
        }
        let mut s = self.state.lock();
        for w in s.words.iter_mut() {
            *w = 0;
        }
        s.events.clear();
        s.hung = false;
        s.sticky = false;
    }

    /// A register read.
    pub(crate) fn read32(&self, off: usize) -> u32 {
        let mut s = self.state.lock();
        if off == tm::tm_reg(tmr::EVT_COUNT) {
            return s.events.len() as u32;
        }
        if off == tm::tm_reg(tmr::EVT_INFO) {
            // Reading the info word pops the event.
            return if s.events.is_empty() {
                0
            } else {
                s.events.remove(0).unwrap_or(0)
            };
        }
        s.words.get(off / 4).copied().unwrap_or(0)
    }

    /// A register write; a write to PUSH runs the queued job.
    pub(crate) fn write32(&self, off: usize, val: u32) {
        if self.write_locked(off, val) {
            // The interrupt line: the handler runs without the register
            // lock, as it would in its own thread.
            let sink = self.irq_sink.lock().clone();
            if let Some(engine) = sink {
                if engine.interrupt() {
                    let n = self.irqs.load(Relaxed);
                    self.irqs.store(n.wrapping_add(1), Relaxed);
                }
            }
        }
    }

    /// The write under the register lock; whether it raised the interrupt.
    fn write_locked(&self, off: usize, val: u32) -> bool {
        let mut s = self.state.lock();
        if let Some(w) = s.words.get_mut(off / 4) {
            *w = val;
        }
        let mut raise = false;
        if off == tm::tm_reg(tmr::PUSH) {
            if Self::take(&self.hang) {
                // A hang: the job never completes and posts no event.
                s.hung = true;
            } else if Self::take(&self.error) {
                s.sticky = Self::take(&self.sticky);
                Self::latch(&mut s, INJECTED_ERROR);
                raise = true;
            } else {
                raise = Self::push(&mut s, val);
            }
        }
        if off == tm::tm_reg(tmr::TQ_EN) && val & tmr::TQ_EN_ON == 0 {
            self.reset_queues(&mut s);
        }
        raise
    }

    /// Turning the queues off drops the running task and its events; on
    /// T8103 it clears the error latches (the driver's recovery relies on
    /// that), unless an injected error is sticky. On a retention SoC the
    /// latches stay, and a hung task leaves the T6001 timeout signature.
    fn reset_queues(&self, s: &mut SimState) {
        s.events.clear();
        if self.retention {
            if core::mem::take(&mut s.hung) {
                for (r, v) in tmr::ERROR.iter().zip(RETENTION_HANG_LATCH) {
                    if let Some(w) = s.words.get_mut(tm::tm_reg(*r) / 4) {
                        *w = v;
                    }
                }
            }
            return;
        }
        s.hung = false;
        if s.sticky {
            return;
        }
        for r in tmr::ERROR {
            if let Some(w) = s.words.get_mut(tm::tm_reg(r) / 4) {
                *w = 0;
            }
        }
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

    fn reg(s: &SimState, off: usize) -> u32 {
        s.words.get(off / 4).copied().unwrap_or(0)
    }

    /// Runs a pushed job; whether it raised the interrupt (an event or an
    /// error latch).
    fn push(s: &mut SimState, val: u32) -> bool {
        // Queues off (after a power cycle without the enable sequence): the
        // push goes nowhere.
        if Self::reg(s, tm::tm_reg(tmr::TQ_EN)) & tmr::TQ_EN_ON == 0 {
            return false;
        }
        let q = ((val >> 8) & 7) as usize;
        let mut bars = [0u64; 32];
        for (i, bar) in bars.iter_mut().enumerate() {
            *bar = u64::from(Self::reg(s, tm::tq_reg(q, tq::BAR + 4 * i)));
        }
        let addr = u64::from(Self::reg(s, tm::tm_reg(tmr::ADDR)));
        let info = Self::reg(s, tm::tm_reg(tmr::INFO));
        let td_size = ((info >> 16) & 0x1ff).saturating_add(1) * 4;
        let td_count = info & 0xffff;
        let Some(pt) = s.attached.as_ref().map(|p| SimPageTable(p.0.clone())) else {
            Self::latch(s, 1);
            return true;
        };
        // The network id of the first TD comes back in the event.
        let mut w0 = [0u8; 4];
        if pt.read(addr, &mut w0).is_err() {
            Self::latch(s, 2);
            return true;
        }
        let nid = w0[2];
        let opts = engine::Options::default();
        match engine::execute(&mut PtDma(&pt), addr, td_size, td_count, &bars, &opts) {
            Ok(_) => {
                let ev = (1u32 << 24) | (u32::from(nid) << 16);
                if s.events.push(ev, GFP_KERNEL).is_err() {
                    Self::latch(s, 3);
                }
            }
            Err(e) => {
                pr_debug!("simulated engine: {:?}\n", e);
                Self::latch(s, 0x100);
            }
        }
        true
    }

    fn latch(s: &mut SimState, code: u32) {
        if let Some(w) = s.words.get_mut(tm::tm_reg(tmr::ERROR[0]) / 4) {
            *w = code;
        }
    }
}

/// The simulated T602x coprocessor: the firmware model of `hw::fw::model`
/// behind the registers of the engine window, reaching memory through the
/// device-wide page table. Faults to inject at start come from the
/// `sim_fw_faults` parameter (the `hw::fw::model::Faults` bits).
///
/// Calls run on the H13 engine model ([`SimExec`]): the H14 program format
/// is not public, so the simulator stands an H13 program in for it.
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
    /// A stopped coprocessor with `faults`, fetching through `pt`.
    pub(crate) fn new(faults: u32, pt: &SimPageTable) -> Result<Arc<Self>> {
        let mut cfg = ModelConfig::DEFAULT;
        cfg.faults = Faults::from_bits(faults);
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
        m.tick(&mut PtDma(&self.pt), &mut SimExec);
    }
}

/// Bytes between TDs in a compiled H13 task stream, and the bytes of one.
const TD_SPACING: u64 = 0x300;
const TD_SIZE: u32 = 0x274;

/// The simulator's stand-in for the H14 engine: a call's program is an H13
/// one, section 1 its task stream (TDs 0x300 apart, as the macOS 12–14
/// compilers lay them out) and section 2 its weights, and each buffer's id
/// is its H13 buffer slot. Only this simulator assumes that; the driver
/// passes sections and buffers through untouched.
pub(crate) struct SimExec;

impl Executor for SimExec {
    fn execute<M: Mem + ?Sized>(
        &mut self,
        mem: &mut M,
        call: &Call<'_>,
    ) -> core::result::Result<(), ExecFailed> {
        let section = |id: u32| call.sections.iter().find(|s| s.id == id);
        let stream = section(1).ok_or(ExecFailed { code: 1 })?;
        let mut bars = [0u64; crate::hw::td::BAR_SLOTS];
        bars[0] = stream.iova;
        if let Some(w) = section(2) {
            bars[1] = w.iova;
        }
        for io in call.io {
            *bars
                .get_mut(io.buffer_id as usize)
                .ok_or(ExecFailed { code: 2 })? = io.iova;
        }
        let td_count =
            u32::try_from(stream.size.div_ceil(TD_SPACING)).map_err(|_| ExecFailed { code: 3 })?;
        engine::execute(
            mem,
            stream.iova,
            TD_SIZE,
            td_count,
            &bars,
            &engine::Options::default(),
        )
        .map(|_| ())
        .map_err(|e| {
            pr_debug!("simulated H14 call: {:?}\n", e);
            ExecFailed { code: 4 }
        })
    }
}

/// One mapped buffer of the software page table.
struct SimMap {
    iova: u64,
    pages: KVec<PagePtr>,
}

/// The simulated engine's page table: what the engine's DMA translates
/// device addresses through. Unmapped addresses fault.
pub(crate) struct SimPageTable(Arc<Mutex<KVec<SimMap>>>);

impl SimPageTable {
    /// An empty page table.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self(Arc::pin_init(new_mutex!(KVec::new()), GFP_KERNEL)?))
    }

    /// Another handle on the same page table.
    pub(crate) fn share(&self) -> Self {
        Self(self.0.clone())
    }

    /// Maps `pages` at `iova` (the caller allocated the range).
    pub(crate) fn map(&self, iova: u64, pages: &[PagePtr]) -> Result {
        let mut copy = KVec::with_capacity(pages.len(), GFP_KERNEL)?;
        for p in pages {
            copy.push(*p, GFP_KERNEL)?;
        }
        let mut maps = self.0.lock();
        let pos = maps
            .iter()
            .position(|m| m.iova > iova)
            .unwrap_or(maps.len());
        maps.reserve(1, GFP_KERNEL)?;
        maps.insert_within_capacity(pos, SimMap { iova, pages: copy })
            .map_err(|_| ENOMEM)
    }

    /// Removes the mapping at `iova`.
    pub(crate) fn unmap(&self, iova: u64, _size: u64) {
        let mut maps = self.0.lock();
        if let Some(pos) = maps.iter().position(|m| m.iova == iova) {
            let _ = maps.remove(pos);
        }
    }

    /// Runs `f` on each page-sized chunk of `[iova, iova + len)`: the page,
    /// the offset in it and the chunk's offset and length in the transfer.
    /// `EFAULT` if any byte is unmapped (the engine's translation fault).
    fn walk(
        &self,
        iova: u64,
        len: usize,
        mut f: impl FnMut(&PagePtr, usize, usize, usize) -> Result,
    ) -> Result {
        let maps = self.0.lock();
        let mut done = 0usize;
        while done < len {
            let addr = iova.checked_add(done as u64).ok_or(EFAULT)?;
            let m = maps
                .iter()
                .find(|m| addr >= m.iova && addr - m.iova < (m.pages.len() as u64) * PAGE_SIZE)
                .ok_or(EFAULT)?;
            let off = addr - m.iova;
            let page = m.pages.get((off / PAGE_SIZE) as usize).ok_or(EFAULT)?;
            let in_page = (off % PAGE_SIZE) as usize;
            let chunk = core::cmp::min(len - done, PAGE_SIZE as usize - in_page);
            f(page, in_page, done, chunk)?;
            done += chunk;
        }
        Ok(())
    }

    /// DMA read of `buf.len()` bytes at `iova`.
    pub(crate) fn read(&self, iova: u64, buf: &mut [u8]) -> Result {
        let len = buf.len();
        self.walk(iova, len, |page, in_page, at, n| {
            let dst = buf.get_mut(at..at + n).ok_or(EFAULT)?;
            // SAFETY: The page belongs to a live mapping (we hold the table
            // lock, and BOs unmap before releasing their pages).
            unsafe { page.read(in_page, dst) }
        })
    }

    /// DMA write of `buf` at `iova`.
    pub(crate) fn write(&self, iova: u64, buf: &[u8]) -> Result {
        self.walk(iova, buf.len(), |page, in_page, at, n| {
            let src = buf.get(at..at + n).ok_or(EFAULT)?;
            // SAFETY: As in `read`.
            unsafe { page.write(in_page, src) }
        })
    }
}
