// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! DRM accel driver for the Apple Neural Engine (ANE).
//!
//! One platform driver, `ane`, matched by device-tree compatible, serves two
//! hardware generations behind one UAPI (`include/uapi/drm/ane_accel.h`):
//!
//! - H13 (T8103 M1, T600x M1 Pro/Max): the host drives the engine's task
//!   manager directly.
//! - H14 (T602x M2 Pro/Max): Linux stages the ANE firmware, releases the
//!   ANE's coprocessor and talks to it over a channel protocol.
//!
//! Layout (see `docs/architecture.md`):
//! - [`hw`]: hardware knowledge and the UAPI, plain `core` Rust shared with
//!   the userspace library and the simulator;
//! - [`ext`]: the one glue layer over the kernel (platform drivers through
//!   the C glue, accel device, shmem GEM objects, IOMMU domains, register
//!   windows, interrupts, runtime PM); the rest of the driver uses only
//!   kernel-crate items that are the same in 7.1, 7.2 and 7.3;
//! - `gem`, `vm`, `program`, `job`, `ioctl`: buffers, per-client address
//!   spaces, validated programs, jobs, the remaining ioctls;
//! - `engine`: job scheduling and the H13 task-manager backend;
//! - `sim` (test flavour): the simulated ANE.

use core::{
    ffi::CStr,
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
};

use kernel::{
    device,
    prelude::*,
    sync::{aref::ARef, Arc},
};

pub mod ext;
pub mod hw;

mod engine;
mod gem;
mod h13;
mod h14;
mod ioctl;
mod job;
mod program;
#[cfg(ane_test)]
mod sim;
mod uarray;
mod vm;

use engine::Engine;
use ext::accel::{self, DriverInfo};
use ext::io::IoWindow;
use ext::irq::ThreadedIrq;
use ext::platform::{self as pf, PlatformDev};
use ext::pm::RuntimePm;
use h13::{CompletionIrq, Mmio, H13};
use hw::soc::{BackendKind, SocId, SocInfo};
use hw::uapi;
use kernel::sync::{new_mutex, Mutex};
use vm::{AddressSpace, Vm};

/// The driver: creates an accel device per bound ANE.
///
/// The C glue registers two platform drivers that call it: `ane` binds the
/// H13 SoCs, `ane-fw` the H14 ones; `ane-fw` devices cannot be unbound or
/// bound through sysfs, since a released coprocessor cannot be restarted
/// without a reboot. Their OF tables (and so the module aliases) are in
/// `ane_glue.c`; which SoC a compatible means is [`SocInfo::by_compatible`].
pub(crate) struct AneDriver;

/// Limits from the module parameters, fixed when a device is bound.
pub(crate) struct Limits {
    /// Largest BO, bytes.
    pub(crate) bo_max: u64,
    /// Cap on all BOs of the device, bytes.
    pub(crate) bo_total_max: u64,
    /// Cap on the BOs of one open file, bytes.
    pub(crate) bo_client_max: u64,
    /// Largest program range, bytes.
    pub(crate) program_max: u64,
}

/// Largest program (task descriptors and weights) PROGRAM_CREATE accepts.
const PROGRAM_MAX: u64 = 256 << 20;

/// Data of an accel device. It lives as long as the DRM device, which can
/// outlive the platform binding while files are still open.
pub(crate) struct AneData {
    /// The SoC.
    pub(crate) soc: &'static SocInfo,
    /// Whether this is the simulated ANE.
    pub(crate) simulated: bool,
    /// Size limits.
    pub(crate) limits: Limits,
    /// Bytes of all live BOs.
    pub(crate) bo_total: AtomicU64,
    /// Runtime PM of the platform device.
    pub(crate) pm: RuntimePm,
    /// The platform device.
    pub(crate) parent: ARef<device::Device>,
    /// The engine; `None` when the device has no usable backend.
    engine: Option<Arc<Engine>>,
    /// H14: the firmware and the device-wide address space every client
    /// shares with it.
    fw: Option<(Arc<h14::Firmware>, Arc<Vm>)>,
}

impl AneData {
    /// The engine, if the device has one.
    pub(crate) fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.as_ref()
    }

    /// H14: the firmware.
    pub(crate) fn firmware(&self) -> Option<&Arc<h14::Firmware>> {
        self.fw.as_ref().map(|(f, _)| f)
    }
}

/// Source of the per-file owner ids the scheduler's fairness uses.
static NEXT_OWNER: AtomicUsize = AtomicUsize::new(1);

/// Data of an open file.
#[pin_data]
pub(crate) struct AneFile {
    /// The file's device address space.
    pub(crate) vm: Arc<Vm>,
    /// Identifies the file to the scheduler.
    pub(crate) owner: usize,
    /// Its programs.
    #[pin]
    pub(crate) programs: Mutex<program::Programs>,
    /// Its jobs.
    #[pin]
    pub(crate) jobs: job::Jobs,
    /// The bytes of its BOs, against `bo_client_mb`.
    pub(crate) bytes: Arc<gem::ClientBytes>,
}

impl accel::Driver for AneDriver {
    type Data = AneData;
    type File = AneFile;

    const INFO: DriverInfo = DriverInfo {
        major: uapi::ABI_VERSION as i32,
        minor: 0,
        patchlevel: 0,
        name: c"ane",
        desc: c"Apple Neural Engine",
    };

    const IOCTLS: &'static [kernel::bindings::drm_ioctl_desc] = crate::declare_accel_ioctls! { AneDriver;
        (uapi::cmd::GET_PARAM, uapi::GetParam, ioctl::get_param),
        (uapi::cmd::BO_CREATE, uapi::BoCreate, gem::bo_create),
        (uapi::cmd::BO_INFO, uapi::BoInfo, gem::bo_info),
        (uapi::cmd::PROGRAM_CREATE, uapi::ProgramCreate, program::program_create),
        (uapi::cmd::PROGRAM_DESTROY, uapi::ProgramDestroy, program::program_destroy),
        (uapi::cmd::EXEC, uapi::Exec, job::exec),
        // WAIT sleeps up to the caller's deadline and touches no device
        // resource: it must not hold the unplug SRCU, which every DRM
        // device's unplug waits for.
        (uapi::cmd::WAIT, uapi::Wait, job::wait, unguarded),
    };

    fn open(dev: &accel::Device<Self>) -> Result<Pin<KBox<AneFile>>> {
        // Opening the node wakes the engine, as on macOS; it autosuspends
        // again when idle.
        let _pm = dev.pm.get()?;
        let vm = match &dev.fw {
            // H14: the firmware reaches every client's buffers at any time.
            Some((_, vm)) => vm.clone(),
            None => Vm::new(dev.soc.iova, address_space(dev)?)?,
        };
        let bytes = gem::ClientBytes::new()?;
        KBox::pin_init(
            pin_init!(AneFile {
                vm,
                owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
                programs <- new_mutex!(program::Programs::new()),
                jobs <- job::Jobs::new(),
                bytes,
            }),
            GFP_KERNEL,
        )
    }
}

/// The page tables for a new client: the simulator's, or an IOMMU domain.
fn address_space(dev: &accel::Device<AneDriver>) -> Result<AddressSpace> {
    #[cfg(ane_test)]
    if dev.simulated {
        return Ok(AddressSpace::Sim(sim::SimPageTable::new()?));
    }
    Ok(AddressSpace::Iommu(vm::IommuSpace::new(&dev.parent)?))
}

/// The `boost_idle_ms` parameter.
fn boost_idle_ms() -> u32 {
    ext::param::get(module_parameters::boost_idle_ms.value())
}

/// How long a job may run before it is declared hung.
const JOB_TIMEOUT_MS: u32 = 2000;

/// Data of a bound platform device.
pub(crate) struct AneBound {
    soc: &'static SocInfo,
    engine: Option<Arc<Engine>>,
    /// The engine's completion interrupt, when requested (opt-in; freed
    /// first when the data is dropped, see `Drop`).
    irq: Option<ThreadedIrq<CompletionIrq>>,
    /// The register windows, revoked at unbind.
    windows: KVec<Arc<IoWindow>>,
    /// H14: the firmware.
    fw: Option<Arc<h14::Firmware>>,
    /// H14: keeps the device powered while the coprocessor runs (its power
    /// domains include the coprocessor's).
    _awake: Option<ext::pm::PmRef>,
    #[cfg(ane_test)]
    sim: Option<Arc<sim::SimEngine>>,
    _reg: accel::Registration<AneDriver>,
}

impl AneBound {
    /// Waits for a running interrupt handler to finish.
    fn sync_irq(&self) {
        if let Some(irq) = &self.irq {
            irq.synchronize();
        }
    }
}

/// The simulator's engine type, or a stand-in that never exists outside
/// the test flavour.
#[cfg(ane_test)]
use sim as sim_type;
#[cfg(not(ane_test))]
mod sim_type {
    /// Never constructed: production builds have no simulator.
    pub(crate) enum SimEngine {}
}

/// The engine's registers as [`engine_mmio`] found them.
struct EngineMmio {
    /// What the backend uses.
    mmio: Mmio,
    /// The hardware window, revoked at unbind.
    window: Option<Arc<IoWindow>>,
    /// The simulator, in the test flavour.
    sim: Option<Arc<sim_type::SimEngine>>,
}

/// The register window of the engine: the simulator's model, or the
/// device's "engine" MMIO range. Mapping it touches no register.
fn engine_mmio(pdev: &PlatformDev<'_>, soc: &SocInfo, simulated: bool) -> Result<EngineMmio> {
    #[cfg(ane_test)]
    if simulated {
        let retention = soc.recovery == hw::soc::Recovery::Rebind;
        let sim = sim::SimEngine::new(retention)?;
        return Ok(EngineMmio {
            mmio: Mmio::SimEngine(sim.clone()),
            window: None,
            sim: Some(sim),
        });
    }
    let _ = (simulated, soc);
    let io = map_window(pdev, c"engine", hw::tm::ENGINE_WINDOW)?;
    Ok(EngineMmio {
        mmio: Mmio::Hw(io.clone()),
        window: Some(io),
        sim: None,
    })
}

/// Maps the register window `name` of at least `len` bytes. Mapping
/// touches no register.
fn map_window(pdev: &PlatformDev<'_>, name: &'static CStr, len: usize) -> Result<Arc<IoWindow>> {
    IoWindow::map(pdev, Some(name), len).inspect_err(|e| {
        dev_err!(
            pdev.device(),
            "no usable '{}' register window of {:#x} bytes in the device tree ({:?})\n",
            name.to_str().unwrap_or("?"),
            len,
            e
        )
    })
}

/// Finds the SoC of a device being probed: from the OF match, or (test
/// flavour) from the simulated device's platform data.
fn probe_soc(pdev: &PlatformDev<'_>, compatible: Option<&CStr>) -> Option<(SocId, bool)> {
    if let Some(c) = compatible {
        return SocInfo::by_compatible(c.to_str().ok()?).map(|s| (s.id, false));
    }
    #[cfg(ane_test)]
    if let Some(raw) = pdev.platform_data_u32() {
        return sim::soc_of_param(raw).map(|s| (s, true));
    }
    let _ = pdev;
    None
}

/// Attaches every power domain of the node and checks there are as many
/// as the SoC needs: with an island off, the first engine access would
/// wedge the SoC's fabric.
fn attach_power_domains(pdev: &PlatformDev<'_>, soc: &SocInfo, simulated: bool) -> Result {
    let dev = pdev.device();
    let n = ext::pm::attach_power_domains(dev)?;
    if simulated || n == soc.power_domains.len() {
        return Ok(());
    }
    dev_err!(
        dev,
        "the device tree lists {} power domains, {:?} needs {} ({:?}): refusing to bind\n",
        n,
        soc.id,
        soc.power_domains.len(),
        soc.power_domains
    );
    Err(EINVAL)
}

/// Requests the engine's completion interrupt (the node's first) when the
/// `completion_irq` parameter opts in. The default is polling, as both
/// references shipped: the record says the engine's event interrupt
/// arrives on the DART's line, not on this one.
fn request_completion_irq(
    pdev: &PlatformDev<'_>,
    h13: &Arc<H13>,
) -> Result<Option<ThreadedIrq<CompletionIrq>>> {
    if !ext::param::on(module_parameters::completion_irq.value()) {
        return Ok(None);
    }
    let irq = ThreadedIrq::request(pdev, 0, c"ane", CompletionIrq::new(h13.clone()))?;
    if let Some(i) = &irq {
        h13.set_irq(i.line());
    }
    Ok(irq)
}

/// The DARTs in front of the engine, for their error registers and
/// interrupt lines: the simulator's, or every entry of the node's
/// `iommus` list.
fn dart_windows(
    pdev: &PlatformDev<'_>,
    sim: Option<&Arc<sim_type::SimEngine>>,
    windows: &mut KVec<Arc<IoWindow>>,
) -> Result<(KVec<Mmio>, KVec<u32>)> {
    let mut darts = KVec::new();
    let mut irqs = KVec::<u32>::new();
    #[cfg(ane_test)]
    if let Some(sim) = sim {
        darts.push(Mmio::SimDart(sim.clone()), GFP_KERNEL)?;
        return Ok((darts, irqs));
    }
    let _ = sim;
    for i in 0..hw::dart::MAX_DARTS as u32 {
        let Some((io, irq)) = IoWindow::map_iommu(pdev, i, hw::dart::WINDOW)? else {
            break;
        };
        windows.push(io.clone(), GFP_KERNEL)?;
        darts.push(Mmio::Hw(io), GFP_KERNEL)?;
        if irq != 0 && !irqs.iter().any(|x| *x == irq) {
            irqs.push(irq, GFP_KERNEL)?;
        }
    }
    if darts.is_empty() {
        // No client can get an address space either (each needs the
        // DARTs), so no job can run and no engine register is read.
        dev_warn!(
            pdev.device(),
            "no DART in the node's iommus list: jobs cannot run on this node\n"
        );
    }
    Ok((darts, irqs))
}

/// The device data common to both generations.
fn ane_data(
    dev: &device::Device,
    soc: &'static SocInfo,
    simulated: bool,
    engine: Option<Arc<Engine>>,
    fw: Option<(Arc<h14::Firmware>, Arc<Vm>)>,
) -> AneData {
    let mb = |v: u32| u64::from(v) << 20;
    let bo_total_max = mb(ext::param::get(module_parameters::bo_total_mb.value()));
    AneData {
        soc,
        simulated,
        limits: Limits {
            // One BO can never exceed the device's total.
            bo_max: mb(ext::param::get(module_parameters::bo_max_mb.value())).min(bo_total_max),
            bo_total_max,
            bo_client_max: mb(ext::param::get(module_parameters::bo_client_mb.value()))
                .min(bo_total_max),
            program_max: PROGRAM_MAX,
        },
        bo_total: AtomicU64::new(0),
        pm: RuntimePm::new(dev),
        parent: dev.into(),
        engine,
        fw,
    }
}

/// H13: the host drives the task manager.
fn probe_h13(pdev: &PlatformDev<'_>, soc: &'static SocInfo, simulated: bool) -> Result<AneBound> {
    let dev = pdev.device();
    let EngineMmio {
        mmio,
        window,
        sim: _sim,
    } = engine_mmio(pdev, soc, simulated)?;
    let mut windows = KVec::new();
    if let Some(w) = window {
        windows.push(w, GFP_KERNEL)?;
    }
    let (darts, dart_irqs) = dart_windows(pdev, _sim.as_ref(), &mut windows)?;
    let h13 = H13::new(mmio, darts, dart_irqs, JOB_TIMEOUT_MS, soc.recovery)?;
    let engine = Engine::new(engine::Backend::H13(h13.clone()), boost_idle_ms())?;
    let irq = request_completion_irq(pdev, &h13)?;
    let data = ane_data(dev, soc, simulated, Some(engine.clone()), None);
    let drm = accel::Device::<AneDriver>::new(dev, data)?;
    let reg = accel::Registration::new(drm)?;
    // The simulated engine line refers to the backend and the backend to
    // the simulator: connected only once nothing can fail any more, and
    // disconnected at unbind.
    #[cfg(ane_test)]
    if let Some(sim) = &_sim {
        if ext::param::on(module_parameters::completion_irq.value())
            && ext::param::on(module_parameters::sim_irq.value())
        {
            sim.use_engine_line();
            h13.set_irq(u32::MAX);
        }
    }
    dev_info!(
        dev,
        "Apple Neural Engine: {:?} ({}), {:?}, {:?} backend, completion by {}{}\n",
        soc.id,
        soc.marketing,
        soc.generation,
        soc.backend,
        if h13.has_irq() {
            "interrupt"
        } else {
            "polling"
        },
        if simulated { ", simulated" } else { "" }
    );
    Ok(AneBound {
        soc,
        irq,
        windows,
        engine: Some(engine),
        fw: None,
        _awake: None,
        #[cfg(ane_test)]
        sim: _sim,
        _reg: reg,
    })
}

/// The firmware's register access and the device-wide address space: the
/// simulated coprocessor, or the `engine` and `pmgr` windows and an IOMMU
/// domain attached for the device's lifetime. Mapping touches no register.
fn h14_resources(
    pdev: &PlatformDev<'_>,
    soc: &SocInfo,
    simulated: bool,
) -> Result<(h14::FwRegs, Arc<Vm>, KVec<Arc<IoWindow>>)> {
    // The firmware places its buffers on 16 KiB boundaries, as the DART does.
    const FW_ALIGN: u64 = 0x4000;
    #[cfg(ane_test)]
    if simulated {
        let pt = sim::SimPageTable::new()?;
        let sim = sim::SimFw::new(
            ext::param::get(module_parameters::sim_fw_faults.value()),
            &pt,
        )?;
        let vm = Vm::with_align(soc.iova, AddressSpace::Sim(pt), FW_ALIGN)?;
        return Ok((h14::FwRegs::Sim(sim), vm, KVec::new()));
    }
    let _ = simulated;
    let dev = pdev.device();
    let engine = map_window(pdev, c"engine", hw::fw::regs::ENGINE_WINDOW)?;
    let pmgr = map_window(pdev, c"pmgr", hw::fw::regs::PMGR_WINDOW)?;
    let mut windows = KVec::with_capacity(2, GFP_KERNEL)?;
    windows.push(engine.clone(), GFP_KERNEL)?;
    windows.push(pmgr.clone(), GFP_KERNEL)?;
    let space = vm::IommuSpace::new(dev).inspect_err(|_| {
        dev_err!(
            dev,
            "no IOMMU: the firmware's address space needs the ANE DARTs (iommus)\n"
        )
    })?;
    space.attach()?;
    let vm = Vm::with_align(soc.iova, AddressSpace::Iommu(space), FW_ALIGN)?;
    Ok((h14::FwRegs::Hw { engine, pmgr }, vm, windows))
}

/// H14: Linux starts the ANE firmware and sends it commands.
fn probe_h14(pdev: &PlatformDev<'_>, soc: &'static SocInfo, simulated: bool) -> Result<AneBound> {
    let dev = pdev.device();
    let (regs, vm, windows) = h14_resources(pdev, soc, simulated)?;
    let firmware = h14::Firmware::new(regs, vm.clone())?;
    let engine = Engine::new(engine::Backend::Fw(firmware.clone()), boost_idle_ms())?;
    let data = ane_data(
        dev,
        soc,
        simulated,
        Some(engine.clone()),
        Some((firmware.clone(), vm)),
    );
    let drm = accel::Device::<AneDriver>::new(dev, data)?;
    // Failures are recorded in the firmware state; the device stays bound.
    firmware.start(&drm, dev, ext::param::on(module_parameters::rtkit.value()));
    if firmware.released_hardware() {
        // The firmware cannot be stopped and restarted without a reboot,
        // and it keeps using the memory this module handed it.
        ext::module::pin();
        dev_warn!(
            dev,
            "the ANE coprocessor runs until reboot: the ane module stays loaded, and a new binding will not restart the firmware\n"
        );
    }
    let awake = (firmware.state() == uapi::fw_state::RUNNING || firmware.released_hardware())
        .then(|| drm.pm.hold());
    let reg = match accel::Registration::new(drm) {
        Ok(r) => r,
        Err(e) => {
            firmware.shutdown(dev);
            return Err(e);
        }
    };
    dev_info!(
        dev,
        "Apple Neural Engine: {:?} ({}), {:?}, {:?} backend, firmware {}{}\n",
        soc.id,
        soc.marketing,
        soc.generation,
        soc.backend,
        match firmware.state() {
            uapi::fw_state::RUNNING => "running",
            _ => "failed",
        },
        if simulated { ", simulated" } else { "" }
    );
    Ok(AneBound {
        soc,
        irq: None,
        windows,
        engine: Some(engine),
        fw: Some(firmware),
        _awake: awake,
        #[cfg(ane_test)]
        sim: None,
        _reg: reg,
    })
}

impl pf::Driver for AneDriver {
    type Data = AneBound;

    /// Either driver: the SoC from the matched compatible (or, test
    /// flavour, the simulator's platform data).
    fn probe(pdev: &PlatformDev<'_>, compatible: Option<&CStr>) -> Result<KBox<AneBound>> {
        let dev = pdev.device();
        let Some((id, simulated)) = probe_soc(pdev, compatible) else {
            // Only reachable through a manual bind of a device that matched
            // no table entry.
            dev_err!(dev, "no ANE SoC data for this device\n");
            return Err(ENODEV);
        };
        let soc = id.info();
        // The box first: once a firmware started, nothing may fail any more.
        let slot = KBox::<AneBound>::new_uninit(GFP_KERNEL)?;
        // Power first: nothing below may touch the engine before every
        // island is up.
        attach_power_domains(pdev, soc, simulated)?;
        let bound = match soc.backend {
            BackendKind::HostDriven => probe_h13(pdev, soc, simulated)?,
            BackendKind::Firmware => probe_h14(pdev, soc, simulated)?,
        };
        Ok(slot.write(bound))
    }

    fn unbind(pdev: &PlatformDev<'_>, this: &AneBound) {
        dev_info!(pdev.device(), "unbinding {:?}\n", this.soc.id);
        // Queued jobs end as aborted and the running one finishes; after
        // this no job touches the hardware. The node goes away when the
        // data is dropped, right after.
        if let Some(e) = &this.engine {
            e.shutdown();
        }
        if let Some(f) = &this.fw {
            f.shutdown(pdev.device());
        }
    }

    fn runtime_suspend(data: &AneBound) -> Result {
        pr_debug!("{:?}: runtime suspend\n", data.soc.id);
        if let Some(e) = &data.engine {
            e.suspend();
        }
        // The handler checks the power state first; one already running
        // finishes before the domains go down.
        data.sync_irq();
        // The simulated hardware loses its state like the real one.
        #[cfg(ane_test)]
        if let Some(sim) = &data.sim {
            sim.power_down();
        }
        Ok(())
    }

    fn runtime_resume(data: &AneBound) -> Result {
        pr_debug!("{:?}: runtime resume\n", data.soc.id);
        #[cfg(ane_test)]
        if let Some(sim) = &data.sim {
            sim.power_up();
        }
        if let Some(e) = &data.engine {
            e.resume();
        }
        Ok(())
    }

    fn autosuspend_delay_ms() -> i32 {
        ext::param::get(module_parameters::autosuspend_ms.value())
    }

    fn sleep_begin(data: &AneBound) -> Result {
        // A job holds a runtime-PM reference, which the forced suspend that
        // follows ignores: no job may be running when the power goes.
        if let Some(e) = &data.engine {
            let queued = e.pause();
            pr_info!(
                "{:?}: system sleep: no job running, {} queued until resume\n",
                data.soc.id,
                queued
            );
        }
        Ok(())
    }

    fn sleep_end(data: &AneBound) {
        if let Some(e) = &data.engine {
            e.unpause();
        }
        pr_debug!("{:?}: system sleep over, jobs resumed\n", data.soc.id);
    }
}

impl Drop for AneBound {
    fn drop(&mut self) {
        // The interrupt first (no handler runs after this), then the
        // register windows: whatever outlives the binding (the engine, the
        // firmware) can no longer reach the hardware. Devres unmaps the
        // windows after this.
        self.irq = None;
        for w in self.windows.iter() {
            w.revoke();
        }
    }
}

/// The module: registers the platform drivers (and, in the test flavour,
/// the simulated device).
struct AneModule {
    // Dropped first: unbinds the simulated device while the driver exists.
    #[cfg(ane_test)]
    _sim: Option<ext::platform::PlatformDevice>,
    _driver: pf::Registration<AneDriver>,
}

impl kernel::Module for AneModule {
    fn init(_module: &'static kernel::ThisModule) -> Result<Self> {
        #[cfg(ane_test)]
        selftest::on_load();
        let driver = pf::Registration::new()?;
        Ok(Self {
            #[cfg(ane_test)]
            _sim: sim::register(ext::param::get(module_parameters::sim_soc.value()))?,
            _driver: driver,
        })
    }
}

/// Declares the module, with the test flavour's extra parameters when built
/// with `ANE_TEST=1`.
macro_rules! ane_module {
    ($($extra:tt)*) => {
        kernel::prelude::module! {
            type: AneModule,
            name: "ane",
            authors: ["The ane developers"],
            description: "Apple Neural Engine DRM accel driver",
            license: "Dual MIT/GPL",
            params: {
                autosuspend_ms: i32 {
                    default: 1000,
                    description: "Runtime-PM autosuspend delay in ms (read at bind)",
                },
                bo_max_mb: u32 {
                    default: 1024,
                    description: "Largest buffer object in MiB (read at bind)",
                },
                bo_client_mb: u32 {
                    default: 4096,
                    description: "Cap on the buffer objects of one open file in MiB, so one client cannot pin everything (capped at bo_total_mb; read at bind)",
                },
                bo_total_mb: u32 {
                    default: 8192,
                    description: "Cap on all buffer objects of a device in MiB (read at bind)",
                },
                rtkit: u32 {
                    default: 0,
                    description: "1: T602x: also try an RTKit session over the coprocessor's mailbox after the firmware started (bounded 1 s HELLO wait; read at bind)",
                },
                boost_idle_ms: u32 {
                    default: 100,
                    description: "CPU-cluster boost: every cpufreq policy's minimum is held at its top frequency from the start of a job until this many ms after the last (visible in scaling_min_freq); 0 = off (read at bind)",
                },
                completion_irq: u32 {
                    default: 0,
                    description: "1: also wait for the engine's completion interrupt (the node's first; read at bind). Default 0: polling, as the drivers that ran on hardware did (the record says the event interrupt arrives on the DART's line)",
                },
                $($extra)*
            },
        }
    };
}

#[cfg(not(ane_test))]
ane_module! {}

#[cfg(ane_test)]
ane_module! {
    selftest_warn: u32 {
        default: 0,
        description: "Test flavour only: 1 = emit a kernel WARNING at load, to prove the test harness catches it",
    },
    sim_soc: u32 {
        default: 0,
        description: "Test flavour only: register a simulated ANE of this SoC (0x8103, 0x6001, 0x6021)",
    },
    sim_fw_faults: u32 {
        default: 0,
        description: "Test flavour only: faults the simulated T602x firmware injects (hw::fw::model::Faults bits; read at bind)",
    },
    sim_irq: u32 {
        default: 0,
        description: "Test flavour only: 1 = the simulated engine raises its event interrupt on the engine's own line, for completion_irq=1 (read at bind); 0 = on the DART's line, as the record says",
    },
}

/// Hooks that exist only in the test flavour (`ANE_TEST=1`).
#[cfg(ane_test)]
mod selftest {
    /// Called at module load.
    pub(crate) fn on_load() {
        if crate::ext::param::on(crate::module_parameters::selftest_warn.value()) {
            kernel::warn_on!(true);
        }
    }
}
