// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Binding a platform device: the driver's probe per generation (the
//! device's register windows, DARTs, power domains and interrupt, the
//! backend and the accel device), unbind, runtime PM and system sleep, as
//! the C glue calls them through [`pf::Driver`].

use core::{ffi::CStr, sync::atomic::AtomicU64};

use kernel::{
    debugfs::{self, Dir},
    device,
    prelude::*,
    str::CString,
    sync::Arc,
};

use crate::engine::{self, Engine};
use crate::ext::{
    self, accel,
    io::IoWindow,
    irq::ThreadedIrq,
    platform::{self as pf, PlatformDev},
    pm::RuntimePm,
};
use crate::h13::{CompletionIrq, Mmio, H13};
use crate::h14;
use crate::hw::{
    self,
    soc::{BackendKind, EngineReg, NodeRefusal, SocId, SocInfo},
    uapi,
};
#[cfg(ane_test)]
use crate::sim;
use crate::vm::{self, AddressSpace, Vm};
use crate::{module_parameters, AneData, AneDriver, Limits, PROGRAM_MAX};

/// The `boost_idle_ms` parameter.
fn boost_idle_ms() -> u32 {
    ext::param::get(module_parameters::boost_idle_ms.value())
}

/// The range `job_timeout_ms` may take: below 10 ms a legitimate job
/// would be cut short by the polling period alone; above a minute a hung
/// job would hold the engine from every client for longer than any
/// recorded model runs (kernel-2 U6).
const JOB_TIMEOUT_MS: core::ops::RangeInclusive<u32> = 10..=60_000;

/// H13: how long a job may run before it is declared hung (the
/// `job_timeout_ms` parameter), or `EINVAL`, said in the log, outside
/// [`JOB_TIMEOUT_MS`].
fn job_timeout_ms(dev: &device::Device) -> Result<u32> {
    let ms = ext::param::get(module_parameters::job_timeout_ms.value());
    if JOB_TIMEOUT_MS.contains(&ms) {
        return Ok(ms);
    }
    dev_err!(
        dev,
        "job_timeout_ms={} is outside {}..={}: not binding\n",
        ms,
        JOB_TIMEOUT_MS.start(),
        JOB_TIMEOUT_MS.end()
    );
    Err(EINVAL)
}

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
    /// The debugfs directory `ane-<device>`: `observations` (what normal
    /// operation read, for the first owner's receipt) and, H14, `firmware`
    /// (why a start failed): diagnostics, kept out of the UAPI.
    _debugfs: Option<DebugFiles>,
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
        let (reg, base, _) = sim_shape(soc);
        soc.check_engine(reg, base)
            .map_err(|r| refuse(pdev.device(), soc, r))?;
        let retention = soc.recovery == hw::soc::Recovery::Rebind;
        let sim = sim::SimEngine::new(
            retention,
            ext::param::get(module_parameters::sim_fw_faults.value()),
        )?;
        return Ok(EngineMmio {
            mmio: Mmio::SimEngine(sim.clone()),
            window: None,
            sim: Some(sim),
        });
    }
    let _ = simulated;
    let io = h13_engine_window(pdev, soc)?;
    Ok(EngineMmio {
        mmio: Mmio::Hw(io.clone()),
        window: Some(io),
        sim: None,
    })
}

/// Maps the register window `name` (the first, for `None`) of at least
/// `len` bytes. Mapping touches no register.
fn map_window(
    pdev: &PlatformDev<'_>,
    name: Option<&'static CStr>,
    len: usize,
) -> Result<Arc<IoWindow>> {
    IoWindow::map(pdev, name, len).inspect_err(|e| {
        dev_err!(
            pdev.device(),
            "no usable '{}' register window of {:#x} bytes in the device tree ({:?})\n",
            name.and_then(|n| n.to_str().ok()).unwrap_or("first"),
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

/// Refuses the node, saying why and what to do; nothing was touched.
fn refuse(dev: &device::Device, soc: &SocInfo, r: NodeRefusal) -> Error {
    dev_err!(
        dev,
        "refusing this {:?} node before touching it: {:x?}: {}\n",
        soc.id,
        r,
        r.advice()
    );
    ENODEV
}

/// The node shape the simulated device stands for (`sim_node`): whether it
/// has `reg-names`, its engine window's address and its power-domain count.
#[cfg(ane_test)]
fn sim_shape(soc: &SocInfo) -> (EngineReg, u64, usize) {
    let shape: u32 = ext::param::get(module_parameters::sim_node.value());
    if shape == 1 {
        // AsahiLinux PR #584: no reg-names; five domains on H13, one on
        // T602x, whose window is the H13-style engine offset.
        return match soc.backend {
            BackendKind::HostDriven => (EngineReg::First, soc.engine_base, 5),
            BackendKind::Firmware => (EngineReg::First, hw::soc::PR584_T602X_ENGINE, 1),
        };
    }
    (EngineReg::Named, soc.engine_base, soc.power_domains.len())
}

/// Attaches every power domain of the node and checks the list has a
/// length a working node has: with an island off, the first engine access
/// would wedge the SoC's fabric.
fn attach_power_domains(pdev: &PlatformDev<'_>, soc: &SocInfo, simulated: bool) -> Result {
    let dev = pdev.device();
    let n = ext::pm::attach_power_domains(dev)?;
    #[cfg(ane_test)]
    let n = if simulated { sim_shape(soc).2 } else { n };
    let _ = simulated;
    soc.check_domains(n).map_err(|r| refuse(dev, soc, r))
}

/// Maps the H13 engine window: the `reg` entry named `engine`, or the first
/// of a node without `reg-names`; it must be where the record's engine is.
/// Mapping touches no register.
fn h13_engine_window(pdev: &PlatformDev<'_>, soc: &SocInfo) -> Result<Arc<IoWindow>> {
    let len = hw::tm::ENGINE_WINDOW;
    let (io, reg) = match IoWindow::map(pdev, Some(c"engine"), len) {
        Ok(io) => (io, EngineReg::Named),
        Err(e) if e == ENODEV => (map_window(pdev, None, len)?, EngineReg::First),
        Err(e) => {
            dev_err!(pdev.device(), "the 'engine' register window: {:?}\n", e);
            return Err(e);
        }
    };
    soc.check_engine(reg, io.phys())
        .map_err(|r| refuse(pdev.device(), soc, r))?;
    Ok(io)
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
    tenants: Option<Arc<vm::Tenants>>,
) -> AneData {
    let mb = |v: u32| u64::from(v) << 20;
    // Clients' buffers must fit the addresses they can get: one file's
    // within its window; on H14, where every file and the firmware share
    // one space, all of them within the clients' part of it (kernel-2 N2).
    let iova = fw.as_ref().map_or(soc.iova, |(_, vm)| vm.window());
    let window = iova.end.saturating_sub(iova.start);
    let mut bo_total_max = mb(ext::param::get(module_parameters::bo_total_mb.value()));
    if fw.is_some() {
        bo_total_max = bo_total_max.min(window);
    }
    #[cfg(not(ane_test))]
    let _ = simulated;
    AneData {
        soc,
        #[cfg(ane_test)]
        simulated,
        limits: Limits {
            // One BO can never exceed the device's total.
            bo_max: mb(ext::param::get(module_parameters::bo_max_mb.value())).min(bo_total_max),
            bo_total_max,
            bo_client_max: mb(ext::param::get(module_parameters::bo_client_mb.value()))
                .min(bo_total_max)
                .min(window),
            program_max: PROGRAM_MAX,
            iova,
        },
        bo_total: AtomicU64::new(0),
        pm: RuntimePm::new(dev),
        parent: dev.into(),
        engine,
        fw,
        tenants,
    }
}

/// H13: the host drives the task manager. Never inlined into the probe
/// (nor `probe_h14`): only one generation's locals take stack.
#[inline(never)]
fn probe_h13(pdev: &PlatformDev<'_>, soc: &'static SocInfo, simulated: bool) -> Result<AneBound> {
    let dev = pdev.device();
    // Checked before any register is mapped.
    let timeout_ms = job_timeout_ms(dev)?;
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
    let h13 = H13::new(
        mmio,
        darts,
        dart_irqs,
        timeout_ms,
        soc.recovery,
        RuntimePm::new(dev),
    )?;
    let engine = Engine::new(engine::Backend::H13(h13.clone()), boost_idle_ms())?;
    let irq = request_completion_irq(pdev, &h13)?;
    let data = ane_data(dev, soc, simulated, Some(engine.clone()), None, None);
    let drm = accel::Device::<AneDriver>::new(dev, data)?;
    // SAFETY: `drm` was allocated just above and is registered only here.
    let reg = unsafe { accel::Registration::new(drm) }?;
    // Test flavour: hold the window between the node's registration and
    // runtime PM's enabling open, so a test can open the node in it.
    #[cfg(ane_test)]
    if simulated {
        let ms: u32 = ext::param::get(module_parameters::sim_probe_delay_ms.value());
        if ms > 0 {
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(i64::from(ms)));
        }
    }
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
        _debugfs: debug_files(dev, Observations::H13(h13.clone()), None),
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
        let (reg, base, _) = sim_shape(soc);
        soc.check_engine(reg, base)
            .map_err(|r| refuse(pdev.device(), soc, r))?;
        let faults = ext::param::get(module_parameters::sim_fw_faults.value());
        // The alternatives for a firmware and engine that do not snoop the
        // CPU's caches (`hw::mem::Coherence`): open on T602x only, the
        // record proves the H13 attributes.
        let pt = sim::SimPageTable::with_coherence(hw::mem::Coherence::from_sim_bits(faults))?;
        let sim = sim::SimFw::new(
            faults,
            ext::param::get(module_parameters::sim_fw_finish_delay.value()),
            &pt,
            h14_chip(soc)?,
        )?;
        let pt: Arc<dyn vm::SoftPageTable> = Arc::new(pt, GFP_KERNEL)?;
        let space = AddressSpace::Soft(pt);
        space.attach_device()?;
        let vm = {
            let (fw, programs) = fw_reserve(soc, FW_ALIGN);
            Vm::with_reserve(soc.iova, space, FW_ALIGN, fw, programs)?
        };
        return Ok((h14::FwRegs::Sim(sim), vm, KVec::new()));
    }
    let _ = simulated;
    let dev = pdev.device();
    // The windows by name only: a node without reg-names (PR #584's shape)
    // is refused without mapping anything.
    // Neither window is claimed: the block holds the DARTs and the mailbox,
    // whose drivers request their own ranges, and the pmgr words lie inside
    // the PMGR node.
    let engine = match IoWindow::map_unclaimed(pdev, Some(c"engine"), hw::fw::regs::ENGINE_WINDOW) {
        Ok(io) => io,
        Err(e) if e == ENODEV => return Err(refuse(dev, soc, NodeRefusal::Unnamed)),
        Err(e) => {
            dev_err!(dev, "the 'engine' register window: {:?}\n", e);
            return Err(e);
        }
    };
    let pmgr = IoWindow::map_unclaimed(pdev, Some(c"pmgr"), hw::fw::regs::PMGR_WINDOW)
        .inspect_err(|e| dev_err!(dev, "no usable 'pmgr' register window ({:?})\n", e))?;
    let mut windows = KVec::with_capacity(2, GFP_KERNEL)?;
    windows.push(engine.clone(), GFP_KERNEL)?;
    windows.push(pmgr.clone(), GFP_KERNEL)?;
    let space = vm::IommuSpace::new(dev).inspect_err(|_| {
        dev_err!(
            dev,
            "no IOMMU: the firmware's address space needs the ANE DARTs (iommus)\n"
        )
    })?;
    let space = AddressSpace::Iommu(space);
    // Detached again when the space drops, on every error path below and
    // at unbind.
    space.attach_device()?;
    let vm = {
        let (fw, programs) = fw_reserve(soc, FW_ALIGN);
        Vm::with_reserve(soc.iova, space, FW_ALIGN, fw, programs)?
    };
    Ok((h14::FwRegs::Hw { engine, pmgr }, vm, windows))
}

/// The firmware patch values of an H14 SoC (every firmware-backed table
/// entry has them; `hw::fw::patch` tests that).
fn h14_chip(soc: &SocInfo) -> Result<&'static hw::fw::patch::Chip> {
    hw::fw::patch::chip(soc.id).ok_or(ENODEV)
}

/// H14: the device addresses reserved for the firmware's own memory
/// (`fw_mem_mb`) and, after them, for loaded programs' section copies
/// (`fw_program_mb`), whole multiples of `align`, together at most half
/// the window (the firmware's share first).
fn fw_reserve(soc: &SocInfo, align: u64) -> (u64, u64) {
    let mb = |v: u32| u64::from(v) << 20;
    let half = soc.iova.end.saturating_sub(soc.iova.start) / 2;
    let room = half / align * align;
    let fit = |want: u64, room: u64| want.min(room).next_multiple_of(align).min(room);
    let fw = fit(
        mb(ext::param::get(module_parameters::fw_mem_mb.value())),
        room,
    );
    let programs = fit(
        mb(ext::param::get(module_parameters::fw_program_mb.value())),
        room.saturating_sub(fw),
    );
    (fw, programs)
}

/// The debugfs directory of a bound device and its files.
struct DebugFiles {
    _dir: Dir,
    _observations: Option<Pin<KBox<debugfs::File<Observations>>>>,
    _firmware: Option<Pin<KBox<debugfs::File<h14::FwReport>>>>,
}

/// The debugfs file `observations`: the device's observation record
/// (`hw::obs`), what normal operation read (event words, STATUS words,
/// DART error words and latches of failed jobs, timings, power
/// transitions; on T6021 the start's scratch values and the calls), as
/// `key value` lines. Reading it touches no register.
pub(crate) enum Observations {
    /// An H13 device.
    H13(Arc<H13>),
    /// An H14 device.
    Fw(Arc<h14::Firmware>),
}

impl core::fmt::Debug for Observations {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Observations::H13(h) => h.observations().write(f),
            Observations::Fw(fw) => fw.observations().write(f),
        }
    }
}

/// The debugfs directory `ane-<device name>` with the file `observations`
/// ([`Observations`]) and, for an H14 device, `firmware`
/// ([`h14::FwReport`]). Debugfs is optional: without it (not configured,
/// out of memory) the device works, and the doctor says what it could not
/// read.
fn debug_files(
    dev: &device::Device,
    obs: Observations,
    fw: Option<&Arc<h14::Firmware>>,
) -> Option<DebugFiles> {
    let name = dev.name().to_str().ok()?;
    let name = CString::try_from_fmt(fmt!("ane-{name}")).ok()?;
    let dir = Dir::new(&name);
    let observations = KBox::pin_init(dir.read_only_file(c"observations", obs), GFP_KERNEL).ok();
    let firmware = fw.and_then(|fw| {
        KBox::pin_init(
            dir.read_only_file(c"firmware", h14::FwReport(fw.clone())),
            GFP_KERNEL,
        )
        .ok()
    });
    Some(DebugFiles {
        _dir: dir,
        _observations: observations,
        _firmware: firmware,
    })
}

/// H14: Linux starts the ANE firmware and sends it commands.
#[inline(never)]
fn probe_h14(pdev: &PlatformDev<'_>, soc: &'static SocInfo, simulated: bool) -> Result<AneBound> {
    let dev = pdev.device();
    let (regs, vm, windows) = h14_resources(pdev, soc, simulated)?;
    let firmware = h14::Firmware::new(
        regs,
        vm.clone(),
        h14_chip(soc)?,
        ext::param::get(module_parameters::fw_call_ms.value()),
    )?;
    let engine = Engine::new(engine::Backend::Fw(firmware.clone()), boost_idle_ms())?;
    let tenants = vm::Tenants::new(ext::param::on(module_parameters::multi_user.value()))?;
    let data = ane_data(
        dev,
        soc,
        simulated,
        Some(engine.clone()),
        Some((firmware.clone(), vm)),
        Some(tenants),
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
    // SAFETY: `drm` was allocated above (`Device::new`) and is registered
    // only here.
    let reg = match unsafe { accel::Registration::new(drm) } {
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
    let debugfs = debug_files(dev, Observations::Fw(firmware.clone()), Some(&firmware));
    Ok(AneBound {
        soc,
        irq: None,
        windows,
        engine: Some(engine),
        fw: Some(firmware),
        _awake: awake,
        _debugfs: debugfs,
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
        // H14: the forced suspend would cut the coprocessor's power under
        // its running firmware (genpd powers the domains off once the
        // device is suspended), and the record has no power protocol for
        // it: a firmware that lost power cannot be started again until
        // reboot. System sleep and hibernation are refused instead
        // (kernel-2 N4).
        if let Some(fw) = &data.fw {
            if fw.state() == uapi::fw_state::RUNNING {
                pr_err!(
                    "{:?}: system sleep refused: the ANE coprocessor's firmware is running and cannot be powered down and started again (no power protocol is known for it); sleep is possible again after a reboot without the ane driver bound\n",
                    data.soc.id
                );
                return Err(EBUSY);
            }
        }
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

    fn shutdown(data: &AneBound) {
        // H13: queued jobs end aborted and the running one finishes (or
        // times out and is contained), then no job starts: the engine's DMA
        // has stopped before the next kernel or the firmware takes the
        // memory (kernel-2 N10).
        if let Some(e) = &data.engine {
            e.shutdown();
            pr_info!("{:?}: shutdown: engine stopped\n", data.soc.id);
        }
        // H14: the record has no command that stops the coprocessor, which
        // keeps DMAing through this kernel's DART tables: a kexec from
        // here is unsafe, a reboot or power-off cuts its power.
        if let Some(fw) = &data.fw {
            if fw.state() == uapi::fw_state::RUNNING {
                pr_warn!(
                    "{:?}: shutdown: the ANE coprocessor's firmware keeps running (the record has no way to stop it); a kexec from this kernel is unsafe\n",
                    data.soc.id
                );
            }
        }
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
