// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The H14 (T602x) firmware backend: staging the ANE firmware, releasing
//! the coprocessor and talking to it.
//!
//! The contract itself (image checks, the release sequence, the channel
//! protocol) is plain code in [`crate::hw::fw`]; this file supplies what it
//! runs on — register access, waiting and firmware memory — and keeps the
//! firmware's state for the ioctls:
//!
//! - [`Firmware::start`] requests the image, checks its structure (and, on
//!   hardware, the SHA-256 pin) before anything is touched, stages its
//!   segments in kernel memory mapped at the firmware's entry address
//!   (1 TiB, a window the device tree reserves), runs the release contract
//!   and a CONFIG_GET. Every failure ends in [`fw_state::FAILED`] with the
//!   step and the captured registers kept for debugfs; the device stays
//!   bound and idle, and nothing is retried in this boot.
//! - A protocol failure after the start quarantines the firmware
//!   ([`fw_state::QUARANTINED`]); it refuses every command until reboot.
//!   A call the firmware refuses in order (a well-formed reply with a
//!   status) is not a protocol failure: that job fails alone.
//!
//! Memory: one device-wide address space ([`Vm`]) holds the firmware, its
//! shared structures and every client's buffers, since the firmware
//! reaches them at any time (unlike H13, whose clients' spaces are attached
//! per job). Once the coprocessor was released, the firmware may use its
//! memory until the machine reboots: on hardware the driver then never
//! frees it, and keeps the module loaded (the simulator's firmware stops
//! with its device, so the test flavour frees everything).

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::{
    prelude::*,
    str::CString,
    sync::{aref::ARef, new_mutex, Arc, Mutex},
    time::{delay::fsleep, Delta, Instant, Monotonic},
};

use crate::ext::{accel::Device, io::IoWindow};
use crate::gem::{self, Bo};
use crate::hw::fw::{
    boot::{self, BootError, BufKind, Captured, FwBuf, MemError},
    chman::{ExchangeError, Host, SharedBufs},
    image,
    msg::{self, CallArgs, IoRef, ProgramDigest, SectionRef},
    patch, regs,
};
use crate::hw::obs::{CallEnd, FwBoot, FwObs};
use crate::hw::uapi::{fw_state, job_status};
use crate::vm::{Mapping, Vm};
use crate::AneDriver;

/// Register access to the coprocessor.
pub(crate) enum FwRegs {
    /// The device's `engine` (32 MiB) and read-only `pmgr` windows.
    Hw {
        /// The ANE block.
        engine: Arc<IoWindow>,
        /// The ANE power words, read-only.
        pmgr: Arc<IoWindow>,
    },
    /// The simulator's firmware model.
    #[cfg(ane_test)]
    Sim(Arc<crate::sim::SimFw>),
}

impl FwRegs {
    fn read32(&self, off: usize) -> u32 {
        if !regs::access_allowed(off, 4) {
            return 0;
        }
        match self {
            FwRegs::Hw { engine, .. } => engine.read32(off).unwrap_or(u32::MAX),
            #[cfg(ane_test)]
            FwRegs::Sim(s) => s.read32(off),
        }
    }

    fn write32(&self, off: usize, val: u32) {
        if !regs::access_allowed(off, 4) {
            return;
        }
        match self {
            FwRegs::Hw { engine, .. } => engine.write32(off, val),
            #[cfg(ane_test)]
            FwRegs::Sim(s) => s.write32(off, val),
        }
    }

    fn read64(&self, off: usize) -> u64 {
        if !regs::access_allowed(off, 8) {
            return 0;
        }
        match self {
            FwRegs::Hw { engine, .. } => engine.read64(off).unwrap_or(u64::MAX),
            #[cfg(ane_test)]
            FwRegs::Sim(s) => s.read64(off),
        }
    }

    fn write64(&self, off: usize, val: u64) {
        if !regs::access_allowed(off, 8) {
            return;
        }
        match self {
            FwRegs::Hw { engine, .. } => engine.write64(off, val),
            #[cfg(ane_test)]
            FwRegs::Sim(s) => s.write64(off, val),
        }
    }

    fn pmgr_read32(&self, off: usize) -> u32 {
        match self {
            FwRegs::Hw { pmgr, .. } => pmgr.read32(off).unwrap_or(0),
            #[cfg(ane_test)]
            FwRegs::Sim(s) => s.pmgr_read32(off),
        }
    }

    fn wait_us(&self, us: u32) {
        #[cfg(ane_test)]
        if let FwRegs::Sim(s) = self {
            // The model advances by ticks, not by time: one per wait, so a
            // budget of polls plays out the same, only faster.
            let _ = us;
            s.tick();
            return;
        }
        fsleep(Delta::from_micros(i64::from(us)));
    }

    fn simulated(&self) -> bool {
        !matches!(self, FwRegs::Hw { .. })
    }

    /// The physical address of the `engine` window (the simulator stands
    /// for a T6021 at its address).
    fn engine_pa(&self) -> u64 {
        match self {
            FwRegs::Hw { engine, .. } => engine.phys(),
            #[cfg(ane_test)]
            FwRegs::Sim(_) => patch::T6021_ENGINE_BASE,
        }
    }
}

/// The firmware's memory: kernel BOs in the device-wide address space,
/// and the extra mappings the firmware needs (its image at the entry, the
/// PMU page at IOVA == PA).
struct FwMemory {
    vm: Arc<Vm>,
    bos: KVec<ARef<Bo>>,
    maps: KVec<Mapping>,
    /// The buffers allocated as `BufKind::Shared` (SHAREDMALLOC grants), in
    /// order: the transport resolves event pointers through them.
    shared: KVec<FwBuf>,
    /// Loaded programs' section copies, which the firmware may read at any
    /// time. Apart from `bos` (indexed by `FwBuf` id, and pushed to by
    /// SHAREDMALLOC grants during an exchange), so that the room `load`
    /// reserves for them is theirs (kernel-2 N11).
    sections: KVec<ARef<Bo>>,
}

impl Drop for FwMemory {
    fn drop(&mut self) {
        // The fixed mappings first: the firmware image's alias maps the
        // pages of a BO in `bos`, which must not be released while the
        // device can still reach them (fields would drop in declaration
        // order, `bos` before `maps`).
        self.maps.clear();
    }
}

/// What the hardware-independent code runs on during one operation.
struct Ctx<'a> {
    dev: &'a Device<AneDriver>,
    regs: &'a FwRegs,
    mem: &'a mut FwMemory,
}

impl boot::Regs for Ctx<'_> {
    fn read32(&mut self, off: usize) -> u32 {
        self.regs.read32(off)
    }
    fn write32(&mut self, off: usize, val: u32) {
        self.regs.write32(off, val)
    }
    fn read64(&mut self, off: usize) -> u64 {
        self.regs.read64(off)
    }
    fn write64(&mut self, off: usize, val: u64) {
        self.regs.write64(off, val)
    }
}

impl boot::Pmgr for Ctx<'_> {
    fn pmgr_read32(&mut self, off: usize) -> u32 {
        self.regs.pmgr_read32(off)
    }
}

impl boot::Delay for Ctx<'_> {
    fn sleep_us(&mut self, us: u32) {
        self.regs.wait_us(us)
    }
}

impl Ctx<'_> {
    fn bo(&self, buf: &FwBuf) -> Result<&ARef<Bo>, MemError> {
        self.mem.bos.get(buf.id as usize).ok_or(MemError::BadBuffer)
    }
}

impl boot::FwMem for Ctx<'_> {
    fn alloc(&mut self, kind: BufKind, len: usize) -> Result<FwBuf, MemError> {
        let id = u32::try_from(self.mem.bos.len()).map_err(|_| MemError::NoMemory)?;
        let bo = gem::create_kernel(self.dev, &self.mem.vm, len as u64)
            .map_err(|_| MemError::NoMemory)?;
        let dva = bo.mapping().map_err(|_| MemError::NoMemory)?.iova();
        self.mem
            .bos
            .push(bo, GFP_KERNEL)
            .map_err(|_| MemError::NoMemory)?;
        let buf = FwBuf { id, dva, len };
        if kind == BufKind::Shared {
            // On failure the BO stays held (with the others); the refused
            // grant quarantines the transport.
            self.mem
                .shared
                .push(buf, GFP_KERNEL)
                .map_err(|_| MemError::NoMemory)?;
        }
        Ok(buf)
    }

    fn write_bytes(&mut self, buf: &FwBuf, off: usize, src: &[u8]) -> Result<(), MemError> {
        let bo = self.bo(buf)?;
        gem::write(bo, off as u64, src).map_err(|_| MemError::OutOfRange)
    }

    fn read_bytes(&mut self, buf: &FwBuf, off: usize, dst: &mut [u8]) -> Result<(), MemError> {
        let bo = self.bo(buf)?;
        gem::read(bo, off as u64, dst).map_err(|_| MemError::OutOfRange)
    }

    fn barrier(&mut self) {
        crate::ext::dma::mb();
    }
}

impl SharedBufs for Ctx<'_> {
    fn shared_buf(&mut self, index: u32) -> Option<FwBuf> {
        self.mem.shared.get(index as usize).copied()
    }
}

/// The firmware's transport and memory, behind one lock: commands are
/// serialised on it (as the record serialises them on its firmware lock).
struct State {
    /// The transport, once started.
    host: Option<Host>,
    /// Everything the firmware may touch.
    mem: FwMemory,
    /// The coprocessor was released: its memory stays.
    released: bool,
    /// The DRM device, for allocations while the transport runs (set at
    /// start, dropped at shutdown: the firmware's BOs refer to it too).
    dev: Option<ARef<Device<AneDriver>>>,
    /// The optional RTKit session.
    rtkit: Option<crate::ext::rtkit::Rtkit>,
    /// The PROCEDURE_CALL command buffer, [`msg::call_len`]`(MAX_IO)`
    /// bytes (3 KiB), allocated once with the firmware state: a call
    /// neither puts it on the kernel stack nor allocates it (kernel-2
    /// N15). Used under the state lock, by one call at a time; each
    /// encoding zeroes the bytes it sends first.
    call_cmd: KVec<u8>,
}

/// The digest key of a program given as `(id, bo, offset, size)` parts:
/// each section's id and size, then its bytes.
fn digest_parts<'a>(parts: impl Iterator<Item = (u32, &'a Bo, u64, u64)>) -> Result<[u8; 32]> {
    let mut digest = ProgramDigest::new(crate::ext::sha256::Sha256::new());
    let mut chunk = [0u8; 256];
    for (id, bo, offset, size) in parts {
        digest.section(u64::from(id), size).map_err(|_| EINVAL)?;
        let mut done = 0u64;
        let mut since = 0u64;
        while done < size {
            let n = core::cmp::min(size - done, chunk.len() as u64) as usize;
            let c = chunk.get_mut(..n).ok_or(EINVAL)?;
            gem::read(bo, offset.checked_add(done).ok_or(EINVAL)?, c)?;
            digest.update(c).map_err(|_| EINVAL)?;
            done += n as u64;
            // Sections are up to hundreds of MiB: yield the CPU between
            // pieces on kernels without preemption (kernel-2 N9).
            since += n as u64;
            if since >= gem::RESCHED_BYTES {
                crate::ext::gem::cond_resched();
                since = 0;
            }
        }
    }
    digest.finish().map_err(|_| EINVAL)
}

/// A program the firmware has loaded, with its process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FwProgram {
    /// ProgramId.
    pub(crate) program: u32,
    /// Process id.
    pub(crate) process: u32,
}

/// Programs the driver keeps loaded; the firmware's table holds 256, never
/// frees one, and a LOAD beyond it fails and quarantines (OA's cap,
/// `hw::fw::msg::MAX_PROGRAMS`).
const MAX_PROGRAMS: usize = msg::MAX_PROGRAMS;
/// Buffers parked at most. Past this the firmware is quarantined: a
/// firmware that keeps failing calls after seeing their buffers must not
/// pin the clients' memory without bound.
const MAX_PARKED: usize = 1024;
/// Polls of a PROGRAM_LOAD, PROC_CREATE or CALL reply: 5 s at
/// [`REPLY_POLL_US`]. A reply that does not come is a broken transport. How
/// long a call may then run until its finish event is the device's own
/// limit ([`Firmware::new`]'s `call_ms`): a long model is not a broken
/// transport (kernel-2 N2).
const COMMAND_POLLS: u32 = 100_000;

/// The firmware of one H14 device.
#[pin_data]
pub(crate) struct Firmware {
    #[pin]
    state: Mutex<State>,
    /// The failed boot step (`Step as u64 + 1`, 0 if none) and the
    /// registers captured at the failure: apart from `state`, so GET_PARAM
    /// never waits behind a running call (kernel-2 N5, old 1.10).
    #[pin]
    diag: Mutex<(u64, Option<Captured>)>,
    /// What normal operation read, for the first owner's receipt
    /// (`hw::obs`; debugfs `observations`): apart from `state`, so a read
    /// never waits behind a running call. A leaf lock.
    #[pin]
    obs: Mutex<FwObs>,
    /// Programs loaded into the firmware, by digest: apart from `state`,
    /// so that creating a program the firmware has loaded already never
    /// waits behind a running call (kernel-2 old 1.10). Taken after
    /// `state` when both are held.
    #[pin]
    programs: Mutex<KVec<([u8; 32], FwProgram)>>,
    /// Buffers of calls that failed after their addresses reached the
    /// firmware: it may still touch them, so they are parked until reboot
    /// (the record parks such buffers too). Each buffer once, at most
    /// [`MAX_PARKED`]. Apart from `state`, so that parking never waits
    /// behind another client's firmware exchange (kernel-2 old 1.10).
    /// Taken after `state` when both are held.
    #[pin]
    parked: Mutex<KVec<ARef<Bo>>>,
    /// The `fw_state` value, readable without waiting for a running call.
    fw_state: AtomicU64,
    /// Commands the firmware refused in order (the first is logged).
    refused: AtomicU64,
    /// The device-wide address space.
    vm: Arc<Vm>,
    regs: FwRegs,
    /// The chip values iBoot's patches carry (`RTK_soc`, revision,
    /// tunables).
    chip: &'static patch::Chip,
    /// Polls of a call's finish event (its time limit).
    finish_polls: u32,
}

/// A real coprocessor was released in this boot (by any binding): it cannot
/// be released again until reboot.
static RELEASED_THIS_BOOT: AtomicBool = AtomicBool::new(false);

/// Polls of a CONFIG_GET reply (3 s at 50 µs, seed-repos.md §3.3 step 12).
const CONFIG_GET_POLLS: u32 = 60_000;
/// Microseconds between reply polls.
const REPLY_POLL_US: u32 = 50;

impl Firmware {
    /// Firmware of `chip` that has not started, over `regs`, with its
    /// memory in `vm`; a call may run `call_ms` milliseconds until its
    /// finish event.
    pub(crate) fn new(
        regs: FwRegs,
        vm: Arc<Vm>,
        chip: &'static patch::Chip,
        call_ms: u32,
    ) -> Result<Arc<Self>> {
        let finish_polls = u32::try_from(u64::from(call_ms) * 1000 / u64::from(REPLY_POLL_US))
            .unwrap_or(u32::MAX)
            .max(1);
        let call_cmd = KVec::from_elem(0u8, msg::call_len(msg::MAX_IO), GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                state <- new_mutex!(State {
                    host: None,
                    mem: FwMemory {
                        vm: vm.clone(),
                        bos: KVec::new(),
                        maps: KVec::new(),
                        shared: KVec::new(),
                        sections: KVec::new(),
                    },
                    released: false,
                    dev: None,
                    rtkit: None,
                    call_cmd,
                }),
                programs <- new_mutex!(KVec::new()),
                parked <- new_mutex!(KVec::new()),
                diag <- new_mutex!((0, None)),
                obs <- new_mutex!(FwObs::default()),
                fw_state: AtomicU64::new(fw_state::OFF),
                refused: AtomicU64::new(0),
                vm,
                regs,
                chip,
                finish_polls,
            }),
            GFP_KERNEL,
        )
    }

    /// The `fw_state` value.
    pub(crate) fn state(&self) -> u64 {
        self.fw_state.load(Ordering::Acquire)
    }

    fn set_state(&self, state: u64) {
        self.fw_state.store(state, Ordering::Release);
    }

    /// Whether a real coprocessor was released: it then runs until reboot.
    pub(crate) fn released_hardware(&self) -> bool {
        self.state.lock().released && !self.regs.simulated()
    }

    /// The failed boot step (1-based), 0 if none, and the registers
    /// captured then: SCRATCH0..7, CPU_STATUS, CPU_CONTROL, RVBAR (low,
    /// high), IPI pending.
    fn failure(&self) -> (u64, Option<[u64; CAPTURE_COUNT]>) {
        let (fail_step, captured) = *self.diag.lock();
        let captured = captured.as_ref().map(|c| {
            let mut v = [0u64; CAPTURE_COUNT];
            for (d, s) in v.iter_mut().zip(c.scratch.iter()) {
                *d = u64::from(*s);
            }
            let n = c.scratch.len();
            v[n] = u64::from(c.cpu_status);
            v[n + 1] = u64::from(c.cpu_control);
            v[n + 2] = c.rvbar & 0xffff_ffff;
            v[n + 3] = c.rvbar >> 32;
            v[n + 4] = u64::from(c.ipi_pending);
            v
        });
        (fail_step, captured)
    }

    /// A copy of the observation record (debugfs `observations`).
    pub(crate) fn observations(&self) -> FwObs {
        *self.obs.lock()
    }

    /// Starts the firmware (probe). Failures are recorded, not returned:
    /// the device stays bound in the failed state, which GET_PARAM reports;
    /// the failed step and the captured registers are in debugfs
    /// ([`FwReport`]).
    ///
    /// With `rtkit`, a started firmware is also offered an RTKit session
    /// over the coprocessor's mailbox (for firmware that speaks it; the
    /// macOS 13.5 image never said HELLO, seed-repos.md §3.4). Its outcome
    /// is logged; the channel transport is used either way.
    pub(crate) fn start(
        &self,
        dev: &Device<AneDriver>,
        pdev: &kernel::device::Device,
        rtkit: bool,
    ) {
        let mut st = self.state.lock();
        let t0 = Instant::<Monotonic>::now();
        let r = self.start_locked(dev, pdev, &mut st);
        if let Some(b) = self.obs.lock().boot.as_mut() {
            b.ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(0);
        }
        if let Err(e) = r {
            self.set_state(fw_state::FAILED);
            dev_err!(pdev, "ANE firmware not started: {}\n", e);
            return;
        }
        if rtkit {
            match crate::ext::rtkit::Rtkit::boot(pdev) {
                Ok(r) => {
                    dev_info!(pdev, "RTKit session with the ANE coprocessor running\n");
                    st.rtkit = Some(r);
                }
                Err(e) if e == ENODEV => {
                    dev_info!(pdev, "RTKit: the node has no mailbox; channel transport only\n")
                }
                Err(e) => dev_warn!(
                    pdev,
                    "RTKit: no session ({:?}; ETIME means no HELLO within 1 s); channel transport only\n",
                    e
                ),
            }
        }
    }

    // The start is three calls that are never inlined into one another or
    // into the probe: each step's locals (the parsed image, the boot
    // record, the channel host) then take stack only while that step runs,
    // and the deepest chain (the boot's allocations down into the slab
    // allocator under lockdep) stays far inside a 16 KiB kernel stack. One
    // merged frame of 3.3 KiB under the probe's overflowed it on arm64.
    fn start_locked(
        &self,
        dev: &Device<AneDriver>,
        pdev: &kernel::device::Device,
        st: &mut State,
    ) -> core::result::Result<(), &'static str> {
        if !self.regs.simulated() && RELEASED_THIS_BOOT.load(Ordering::Acquire) {
            return Err(
                "the coprocessor was already released in this boot; only a reboot restarts it",
            );
        }
        let fwim = self.load_and_stage(dev, pdev, st)?;
        let booted = self.release(dev, pdev, st, fwim)?;
        self.connect(dev, pdev, st, &booted)
    }

    /// Loads the firmware file, checks it, and stages it for the core;
    /// the image's device address.
    #[inline(never)]
    fn load_and_stage(
        &self,
        dev: &Device<AneDriver>,
        pdev: &kernel::device::Device,
        st: &mut State,
    ) -> core::result::Result<u64, &'static str> {
        let pin = &image::T6021_PIN;
        let name = CString::try_from_fmt(fmt!("{}", pin.name)).map_err(|_| "out of memory")?;
        let fw = crate::ext::firmware::Firmware::request(&name, pdev).map_err(|_| {
            "cannot load the firmware file (see docs/install.md: it is extracted from the user's own macOS image)"
        })?;
        let bytes = fw.data();
        let img = image::parse(bytes).map_err(|e| {
            dev_err!(pdev, "firmware image: {:?}\n", e);
            "the firmware file is not a valid arm64 Mach-O image"
        })?;
        if self.regs.simulated() {
            dev_info!(
                pdev,
                "simulated coprocessor: the firmware pin is not checked\n"
            );
        } else {
            // The digest with the kernel's own SHA-256 (lib/crypto).
            pin.check_shape(bytes)
                .and_then(|_| {
                    pin.check_found_digest(crate::ext::sha256::digest(bytes))
                        .map_err(image::FirmwareError::from)
                })
                .map_err(|e| {
                    dev_err!(pdev, "firmware pin: {:?}\n", e);
                    "the firmware file is not the pinned macOS 13.5 image"
                })?;
        }
        // Where the core will start: a latched RVBAR's entry, where the
        // image is aliased; reading RVBAR needs the islands up and a core
        // not yet running, which the same checks as the release's first
        // step prove (no register is written). `boot::boot` repeats them
        // right before its first write, since staging lies in between.
        let mut ctx = Ctx {
            dev,
            regs: &self.regs,
            mem: &mut st.mem,
        };
        if let Err(e) = boot::preflight(&mut ctx).and_then(|()| boot::not_running(&mut ctx)) {
            return Err(self.boot_failed(pdev, st, e));
        }
        let rvbar = self.regs.read64(regs::RVBAR);
        let entry = (rvbar & regs::RVBAR_VALID != 0).then_some(rvbar & regs::RVBAR_FOLD_MASK);
        if entry.is_some_and(|e| e != regs::FW_IOVA) {
            dev_err!(pdev, "latched RVBAR {:#x}\n", rvbar);
            return Err("the coprocessor's latched entry is not the reserved firmware window");
        }
        self.stage(dev, st, bytes, &img, entry)
            .map_err(|_| "cannot stage the firmware image")
    }

    /// Releases the core into the staged image.
    #[inline(never)]
    fn release(
        &self,
        dev: &Device<AneDriver>,
        pdev: &kernel::device::Device,
        st: &mut State,
        fwim: u64,
    ) -> core::result::Result<boot::Booted, &'static str> {
        let cfg = boot::BootConfig {
            fwim_dva: fwim,
            ..boot::BootConfig::DEFAULT
        };
        let mut ctx = Ctx {
            dev,
            regs: &self.regs,
            mem: &mut st.mem,
        };
        let booted = match boot::boot(&mut ctx, &cfg) {
            Ok(b) => b,
            Err(e) => return Err(self.boot_failed(pdev, st, e)),
        };
        self.mark_released(st);
        Ok(booted)
    }

    /// Sets up the channel transport over the running firmware and asks
    /// for its configuration: the firmware is then RUNNING.
    #[inline(never)]
    fn connect(
        &self,
        dev: &Device<AneDriver>,
        pdev: &kernel::device::Device,
        st: &mut State,
        booted: &boot::Booted,
    ) -> core::result::Result<(), &'static str> {
        let mut ctx = Ctx {
            dev,
            regs: &self.regs,
            mem: &mut st.mem,
        };
        let mut host = Host::new(&mut ctx, booted.ipc, booted.table).map_err(|e| {
            dev_err!(pdev, "firmware transport: {:?}\n", e);
            "cannot set up the channel transport"
        })?;
        let mut cmd = [0u8; 0x40];
        let mut reply = [0u8; 0x40];
        let n = msg::encode_config_get(&mut cmd).map_err(|_| "CONFIG_GET encoding")?;
        let word = host
            .exchange(
                &mut ctx,
                cmd.get(..n).unwrap_or(&[]),
                &mut reply,
                CONFIG_GET_POLLS,
                REPLY_POLL_US,
            )
            .map_err(|e| log_exchange(pdev, "CONFIG_GET", e))
            .and_then(|_| {
                msg::config_get_reply(&reply).map_err(|e| {
                    dev_err!(pdev, "CONFIG_GET reply: {:?}\n", e);
                    "CONFIG_GET failed"
                })
            })?;
        if word == 0 {
            return Err("CONFIG_GET returned no configuration");
        }
        dev_info!(
            pdev,
            "ANE firmware running (boot ordinal {}, configuration {:#x})\n",
            booted.ordinal,
            word
        );
        // Values the release read anyway, kept for the receipt.
        self.obs.lock().boot = Some(FwBoot {
            scratch0: booted.scratch0,
            scratch1: booted.ordinal.wrapping_sub(1),
            scratch3: booted.scratch3,
            fw_address: booted.fw_address,
            cpu_status: booted.cpu_status,
            rvbar_latched: booted.rvbar_latched,
            config: word,
            ns: 0,
        });
        st.host = Some(host);
        st.dev = Some(dev.into());
        self.set_state(fw_state::RUNNING);
        Ok(())
    }

    /// Runs `f` with the transport, the firmware's memory and registers,
    /// with the state lock held by the caller; `EIO` unless the firmware
    /// is running. A failed exchange quarantines the firmware: it refuses
    /// every later command until reboot.
    fn with_host_locked<T>(
        &self,
        st: &mut State,
        what: &str,
        f: impl FnOnce(&mut Host, &mut Ctx<'_>) -> core::result::Result<T, ExchangeError>,
    ) -> Result<T> {
        if self.state() != fw_state::RUNNING {
            return Err(EIO);
        }
        let (Some(host), Some(dev)) = (st.host.as_mut(), st.dev.as_ref()) else {
            return Err(EIO);
        };
        let mut ctx = Ctx {
            dev,
            regs: &self.regs,
            mem: &mut st.mem,
        };
        match f(host, &mut ctx) {
            Ok(v) => Ok(v),
            Err(e) => {
                pr_err!(
                    "ANE firmware: {} failed: {:?}; quarantined until reboot\n",
                    what,
                    e
                );
                self.set_state(fw_state::QUARANTINED);
                Err(match e {
                    ExchangeError::Timeout { .. } | ExchangeError::FinishTimeout { .. } => {
                        ETIMEDOUT
                    }
                    _ => EIO,
                })
            }
        }
    }

    /// The device-wide address space.
    pub(crate) fn vm(&self) -> Arc<Vm> {
        self.vm.clone()
    }

    /// Keeps a failed call's resources until reboot: the firmware saw their
    /// addresses and may still write there. (The simulator's firmware stops
    /// with its device: there they go at unbind.)
    ///
    /// A buffer already parked is not parked again. Past [`MAX_PARKED`]
    /// buffers (or without memory to record one) the firmware is
    /// quarantined and the buffer leaked, with one message.
    pub(crate) fn park(&self, bos: KVec<ARef<Bo>>) {
        let mut parked = self.parked.lock();
        let mut full = false;
        for bo in bos.into_iter() {
            if parked.iter().any(|p| core::ptr::eq::<Bo>(&**p, &*bo)) {
                continue;
            }
            let kept = if parked.len() >= MAX_PARKED {
                Err(bo)
            } else {
                match parked.reserve(1, GFP_KERNEL) {
                    Ok(()) => parked.push_within_capacity(bo).map_err(|e| e.0),
                    Err(_) => Err(bo),
                }
            };
            if let Err(bo) = kept {
                // Never free it: the firmware may still write there.
                core::mem::forget(bo);
                full = true;
            }
        }
        drop(parked);
        if full && self.state() != fw_state::QUARANTINED {
            self.set_state(fw_state::QUARANTINED);
            pr_err!(
                "ANE firmware: more than {} buffers of failed calls parked; quarantined until reboot\n",
                MAX_PARKED
            );
        }
    }

    /// Loads a program given as `(id, copy)` sections (kernel copies in the
    /// device-wide address space), and creates its process. A program with
    /// the same digest (ids, sizes and bytes) is loaded once: its ids are
    /// returned without firmware traffic. The copies of a newly loaded
    /// program stay with the firmware, which may read them at any time.
    pub(crate) fn load(&self, sections: KVec<(u32, ARef<Bo>, u64)>) -> Result<FwProgram> {
        let mut refs = [SectionRef::default(); msg::MAX_SECTIONS];
        for (i, (id, bo, size)) in sections.iter().enumerate() {
            let r = refs.get_mut(i).ok_or(EINVAL)?;
            *r = SectionRef {
                id: *id,
                iova: bo.mapping()?.iova(),
                size: *size,
            };
        }
        let key = digest_parts(sections.iter().map(|(id, bo, size)| (*id, &**bo, 0, *size)))?;
        let refs = refs.get(..sections.len()).ok_or(EINVAL)?;
        // A program loaded already is found without waiting for the
        // transport, which a running call may hold for seconds.
        if let Some(p) = self.cached(&key) {
            return Ok(p);
        }
        // A new program needs the transport: it waits for the running
        // command (a call is bounded by `fw_call_ms` plus the reply limit).
        // The state lock from the second lookup to the insert: two
        // identical loads cannot both reach the firmware, nor can the
        // table overflow (programs are inserted only under it).
        let mut st = self.state.lock();
        if let Some(p) = self.cached(&key) {
            return Ok(p);
        }
        if self.programs.lock().len() >= MAX_PROGRAMS {
            return Err(ENOSPC);
        }
        self.programs.lock().reserve(1, GFP_KERNEL)?;
        st.mem.sections.reserve(sections.len(), GFP_KERNEL)?;
        let mut reply = [0u8; msg::PROGRAM_LOAD_LEN];
        let program = self.with_host_locked(&mut st, "PROGRAM_LOAD", |host, ctx| {
            let mut cmd = [0u8; msg::PROGRAM_LOAD_LEN];
            let n = msg::encode_program_load(&mut cmd, refs).map_err(ExchangeError::Msg)?;
            let answer = host.exchange_status(
                ctx,
                cmd.get(..n).unwrap_or(&[]),
                &mut reply,
                COMMAND_POLLS,
                REPLY_POLL_US,
            )?;
            if answer.status != 0 {
                return Ok(Err(answer.status));
            }
            msg::program_load_reply(&reply)
                .map(Ok)
                .map_err(ExchangeError::Msg)
        });
        // The firmware may keep reading the copies whatever the outcome:
        // they stay with it (never freed, as in the record).
        for (_, bo, _) in sections {
            if let Err(e) = st.mem.sections.push_within_capacity(bo) {
                core::mem::forget(e);
            }
        }
        let program = self.refusal("PROGRAM_LOAD", program?)?;
        let process = self.with_host_locked(&mut st, "PROC_CREATE", |host, ctx| {
            let mut cmd = [0u8; 0x40];
            let mut reply = [0u8; 0x40];
            let n = msg::encode_proc_create(&mut cmd, program).map_err(ExchangeError::Msg)?;
            let answer = host.exchange_status(
                ctx,
                cmd.get(..n).unwrap_or(&[]),
                &mut reply,
                COMMAND_POLLS,
                REPLY_POLL_US,
            )?;
            if answer.status != 0 {
                return Ok(Err(answer.status));
            }
            msg::proc_create_reply(&reply)
                .map(Ok)
                .map_err(ExchangeError::Msg)
        })?;
        let process = self.refusal("PROC_CREATE", process)?;
        let p = FwProgram { program, process };
        if self.programs.lock().push_within_capacity((key, p)).is_err() {
            return Err(ENOMEM);
        }
        drop(st);
        Ok(p)
    }

    /// The loaded program with digest `key`.
    fn cached(&self, key: &[u8; 32]) -> Option<FwProgram> {
        let programs = self.programs.lock();
        programs.iter().find(|(k, _)| k == key).map(|(_, p)| *p)
    }

    /// The program whose sections, given as `(id, bo, offset, size)` parts
    /// of client memory, have the content of one loaded already, found
    /// without copying them: a client may create a loaded program again
    /// once the range for the copies is full. (A client that changes the
    /// bytes meanwhile gets the program of what was read.)
    pub(crate) fn loaded<'a>(
        &self,
        parts: impl Iterator<Item = (u32, &'a Bo, u64, u64)>,
    ) -> Result<Option<FwProgram>> {
        let key = digest_parts(parts)?;
        Ok(self.cached(&key))
    }

    /// A command the firmware refused in order (its slot came back with
    /// the command's opcode and a nonzero status) fails alone with
    /// `EINVAL` (kernel-2 N2): the transport is intact, so one client's
    /// program the firmware does not accept must not disable the engine
    /// for everyone. The first refusal is logged.
    fn refusal<T>(&self, what: &str, r: core::result::Result<T, u16>) -> Result<T> {
        r.map_err(|status| {
            if self.refused.fetch_add(1, Ordering::Relaxed) == 0 {
                pr_warn!(
                    "ANE firmware: {} refused (status {:#x}); the ioctl fails alone, later refusals are not logged\n",
                    what,
                    status
                );
            }
            EINVAL
        })
    }

    /// Runs one call to completion: the job is done only when the
    /// firmware's finish event for its cookie arrived (the reply and the
    /// dispatch event only mean it started). Returns a `job_status` value
    /// and whether the firmware was handed the call (then it saw the
    /// buffers' addresses).
    ///
    /// Returns the job status and whether the call's buffers must be
    /// parked: the call failed after its buffers' addresses reached the
    /// firmware and no reply said it was refused in order.
    pub(crate) fn call(&self, p: &FwProgram, priority: u32, io: &[IoRef]) -> (u32, bool) {
        // The only cookie that ran (OA-RT `ANE_CALL_COOKIE`). Calls are one
        // at a time (the state lock is held from the CALL to its finish),
        // and a finish kept from an earlier call is forgotten first.
        let cookie = msg::CALL_COOKIE;
        let args = CallArgs {
            program: p.program,
            process: p.process,
            priority,
            cookie,
        };
        let mut sent = false;
        let mut stats = None;
        let t0 = Instant::<Monotonic>::now();
        let mut st = self.state.lock();
        // The command (3 KiB with every binding) is the buffer allocated
        // with the state, taken for the call and put back after it: not
        // on the stack, no allocation per call (kernel-2 N15). Taking it
        // leaves an empty vector in its place, which allocates nothing.
        let mut cmd = core::mem::replace(&mut st.call_cmd, KVec::new());
        let r = self.with_host_locked(&mut st, "PROCEDURE_CALL", |host, ctx| {
            let mut reply = [0u8; 0x60];
            let n = msg::encode_procedure_call(&mut cmd, &args, io).map_err(ExchangeError::Msg)?;
            host.drain(ctx)?;
            host.forget_finished();
            sent = true;
            let answer = host.exchange_status(
                ctx,
                cmd.get(..n).unwrap_or(&[]),
                &mut reply,
                COMMAND_POLLS,
                REPLY_POLL_US,
            )?;
            if answer.status != 0 {
                // Refused in order: no finish event follows.
                stats = Some(host.stats());
                return Ok(answer.status);
            }
            let r = host
                .wait_finish(ctx, cookie, self.finish_polls, REPLY_POLL_US)
                .map(|_| 0);
            stats = Some(host.stats());
            r
        });
        st.call_cmd = cmd;
        drop(st);
        {
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(0);
            let mut o = self.obs.lock();
            o.call(
                match r {
                    Ok(0) => CallEnd::Done,
                    Ok(s) => CallEnd::Refused(u32::from(s)),
                    Err(_) => CallEnd::Failed,
                },
                ns,
            );
            if let Some(h) = stats {
                o.host = h;
            }
        }
        let status = match r {
            Ok(0) => job_status::DONE,
            Ok(status) => {
                // The record quarantines on any failed exchange; a call
                // the firmware refused in order (slot returned, the
                // command's opcode, a status) fails alone instead, so that
                // one client's bad bindings cannot disable the engine for
                // everyone until reboot. Its buffers are parked by the
                // caller as for any failed call (docs/hardware-record.md,
                // "Refused calls", open).
                if self.refused.fetch_add(1, Ordering::Relaxed) == 0 {
                    pr_warn!(
                        "ANE firmware: PROCEDURE_CALL refused (status {:#x}); the call fails alone, later refusals are not logged\n",
                        status
                    );
                }
                job_status::FAULT
            }
            Err(e) if e == ETIMEDOUT => job_status::TIMEOUT,
            Err(_) => job_status::FAULT,
        };
        // A call refused in order has no finish event to come and the
        // firmware dropped its buffers: nothing to park (kernel-2 N3).
        (status, sent && r.is_err())
    }

    /// Stages the image as the record's own-memory mode does: one buffer of
    /// the firmware's memory plus its extra RAM (0x500000 + 0x200000, the
    /// only envelope that booted), each segment's file bytes at its
    /// `vmaddr`, iBoot's runtime patches replayed on the copy
    /// ([`patch::apply`]), mapped at an ordinary device address (the init
    /// struct's +0x00) and, when RVBAR is latched, aliased at the entry;
    /// then the PMU page at IOVA == PA. Returns the ordinary address.
    fn stage(
        &self,
        dev: &Device<AneDriver>,
        st: &mut State,
        bytes: &[u8],
        img: &image::Image,
        entry: Option<u64>,
    ) -> Result<u64> {
        for s in img.segments() {
            let end = s.vmaddr.checked_add(s.vmsize).ok_or(EINVAL)?;
            if end > regs::FW_MEMORY || s.filesize > s.vmsize {
                return Err(E2BIG);
            }
        }
        let size = regs::FW_MEMORY + regs::FW_EXTRA_RAM;
        let bo = gem::create_kernel(dev, &st.mem.vm, size)?;
        let dva = bo.mapping()?.iova();
        // An unlatched RVBAR gets the fold of this address: it must survive.
        if dva & !regs::RVBAR_FOLD_MASK != 0 {
            return Err(EINVAL);
        }
        let mut staged = KVVec::new();
        staged.resize(image::STAGED_SIZE, 0u8, GFP_KERNEL)?;
        for s in img.segments() {
            let from = usize::try_from(s.fileoff).map_err(|_| EINVAL)?;
            let len = usize::try_from(s.filesize).map_err(|_| EINVAL)?;
            let at = usize::try_from(s.vmaddr).map_err(|_| EINVAL)?;
            let src = bytes
                .get(from..from.checked_add(len).ok_or(EINVAL)?)
                .ok_or(EINVAL)?;
            staged
                .get_mut(at..at.checked_add(len).ok_or(EINVAL)?)
                .ok_or(EINVAL)?
                .copy_from_slice(src);
        }
        let engine = self.regs.engine_pa();
        let random = crate::ext::glue::random_u64();
        let params = patch::PatchParams::for_chip(
            self.chip,
            entry.unwrap_or(dva),
            patch::stack_guard_from(random),
            engine,
        );
        if let Err(e) = patch::apply(&mut staged, &params) {
            pr_err!("ANE firmware: iBoot patches not replayed: {:?}\n", e);
            return Err(EINVAL);
        }
        pr_info!(
            "ANE firmware: iBoot patches replayed (soc {:#x} rev {:#x}, DATA {:#x}, cpu {:#x}, wrapper {:#x})\n",
            params.soc,
            params.revision,
            params.exec_base + patch::DATA_VMADDR,
            params.cpu_pa,
            params.wrapper_pa
        );
        gem::write(&bo, 0, &staged)?;
        // The image is kept in `bos` before its alias goes into `maps`: a
        // failed push must drop the alias (unmapped at once) while the
        // image lives, never the image while its alias still maps it.
        st.mem.bos.push(bo, GFP_KERNEL)?;
        if let Some(entry) = entry {
            let image = st.mem.bos.last().ok_or(EINVAL)?;
            let alias = st.mem.vm.map_fixed(image, entry)?;
            st.mem.maps.push(alias, GFP_KERNEL)?;
        }
        const PMU_PAGE: u64 = 0x4000;
        if self.regs.simulated() {
            // The simulated firmware's PMU page is RAM at the same address.
            let pmu = gem::create_fixed(dev, &st.mem.vm, PMU_PAGE, regs::PMU_PA)?;
            st.mem.bos.push(pmu, GFP_KERNEL)?;
        } else {
            // SAFETY: `PMU_PA` is a register page of the SoC's power
            // manager (inside the PMGR block at 0x28e080000), not RAM and
            // no DMA master's registers: the page the record's firmware
            // reaches at IOVA == PA for its power service, mapped as the
            // record maps it (`hw::fw::regs::PMU_PA`). Registers never go
            // away while this mapping (kept in `maps`) lives.
            let pmu = unsafe { st.mem.vm.map_phys(regs::PMU_PA, regs::PMU_PA, PMU_PAGE) }?;
            st.mem.maps.push(pmu, GFP_KERNEL)?;
        }
        Ok(dva)
    }

    fn mark_released(&self, st: &mut State) {
        st.released = true;
        if !self.regs.simulated() {
            RELEASED_THIS_BOOT.store(true, Ordering::Release);
        }
    }

    /// Records a failed boot; the message for the log.
    fn boot_failed(
        &self,
        pdev: &kernel::device::Device,
        st: &mut State,
        e: BootError,
    ) -> &'static str {
        if e.released() {
            self.mark_released(st);
        }
        *self.diag.lock() = (e.step as u64 + 1, e.captured);
        dev_err!(
            pdev,
            "firmware release failed at {:?}: {:?}; registers {:x?}\n",
            e.step,
            e.reason,
            e.captured
        );
        "the release contract failed"
    }

    /// Unbind: on the simulator everything is freed. On hardware a released
    /// coprocessor keeps running and may still use its memory, so that
    /// memory is left allocated until reboot.
    pub(crate) fn shutdown(&self, pdev: &kernel::device::Device) {
        let mut st = self.state.lock();
        st.rtkit = None;
        let parked = core::mem::take(&mut *self.parked.lock());
        if st.released && !self.regs.simulated() {
            // The coprocessor may still write into these.
            core::mem::forget(parked);
        } else {
            drop(parked);
        }
        st.host = None;
        // Without the transport no command may pass the RUNNING check any
        // more, and GET_PARAM must not report a running firmware until the
        // node goes (kernel-2 N15). A released coprocessor keeps running
        // but takes no command from Linux until reboot (QUARANTINED); the
        // simulator's firmware stops with its device (OFF).
        self.set_state(if st.released && !self.regs.simulated() {
            fw_state::QUARANTINED
        } else {
            fw_state::OFF
        });
        st.dev = None;
        self.programs.lock().clear();
        st.mem.shared.clear();
        if st.released && !self.regs.simulated() {
            dev_warn!(
                pdev,
                "the ANE firmware keeps running until reboot; its {} buffers stay allocated\n",
                st.mem.bos.len() + st.mem.sections.len()
            );
            // The address space stays attached and allocated too: a
            // reference that is never dropped keeps the domain from being
            // detached or freed under the running firmware.
            core::mem::forget(st.mem.vm.clone());
            for m in st.mem.maps.drain_all() {
                // Deliberately kept: the coprocessor may still reach these.
                core::mem::forget(m);
            }
            for bo in st.mem.bos.drain_all() {
                // Deliberately leaked: the coprocessor may still write here.
                core::mem::forget(bo);
            }
            for bo in st.mem.sections.drain_all() {
                // Deliberately leaked: the coprocessor may still read here.
                core::mem::forget(bo);
            }
            return;
        }
        st.mem.maps.clear();
        st.mem.bos.clear();
        st.mem.sections.clear();
    }
}

/// Logs a failed exchange; the message.
fn log_exchange(pdev: &kernel::device::Device, what: &str, e: ExchangeError) -> &'static str {
    dev_err!(pdev, "{} exchange failed: {:?}\n", what, e);
    "a firmware exchange failed"
}

/// Registers a failed start captured: SCRATCH0..7, CPU_STATUS, CPU_CONTROL,
/// RVBAR low and high, IPI pending.
const CAPTURE_COUNT: usize = crate::hw::fw::regs::SCRATCH_COUNT + 5;

/// The debugfs file `firmware` of an H14 device: why the firmware failed to
/// start. A diagnostic, not an interface: two lines, `fail_step N` (the
/// release step that failed, 1-based as `hw::fw::boot::Step` + 1, 0 if
/// none) and `capture` followed by the [`CAPTURE_COUNT`] registers in hex,
/// or `none` when nothing was captured (a preflight failure reads no engine
/// register).
pub(crate) struct FwReport(pub(crate) Arc<Firmware>);

impl core::fmt::Debug for FwReport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (step, captured) = self.0.failure();
        writeln!(f, "fail_step {step}")?;
        write!(f, "capture")?;
        match captured {
            Some(regs) => {
                for r in regs {
                    write!(f, " {r:#x}")?;
                }
            }
            None => write!(f, " none")?,
        }
        // debugfs ends the text with a newline.
        Ok(())
    }
}
