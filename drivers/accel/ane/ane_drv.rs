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
//! - `bind`: probe per generation, unbind, runtime PM and system sleep;
//! - `gem`, `vm`, `program`, `job`, `ioctl`: buffers, per-client address
//!   spaces, validated programs, jobs, the remaining ioctls;
//! - `engine`: job scheduling over one backend per generation, `h13`
//!   (the host drives the task manager) or `h14` (the firmware);
//! - `sim` (test flavour): the simulated ANE.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use kernel::{
    device,
    prelude::*,
    sync::{aref::ARef, Arc},
};

pub mod ext;
pub mod hw;

mod bind;
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
use ext::platform as pf;
use ext::pm::RuntimePm;
use hw::soc::SocInfo;
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
    /// The device addresses clients' buffers get (H14: the SoC's window
    /// without the range reserved for the firmware).
    pub(crate) iova: hw::soc::IovaWindow,
}

/// Largest program (task descriptors and weights) PROGRAM_CREATE accepts:
/// 1 GiB, room for the largest model users run (Parakeet's encoder, one
/// 458,018,816-byte program of 13,701 TDs, ran on an M1 under omarchy-ane).
/// The task stream alone stays at most [`crate::program::STREAM_MAX`].
const PROGRAM_MAX: u64 = 1 << 30;

/// Data of an accel device. It lives as long as the DRM device, which can
/// outlive the platform binding while files are still open.
pub(crate) struct AneData {
    /// The SoC.
    pub(crate) soc: &'static SocInfo,
    /// Whether this is the simulated ANE (test flavour only: nothing in
    /// production, the UAPI included, tells a simulator apart).
    #[cfg(ane_test)]
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
    /// H14: whose files may be open on the shared address space.
    tenants: Option<Arc<vm::Tenants>>,
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
    /// Its use of the engine, for fdinfo.
    pub(crate) usage: Arc<job::Usage>,
    /// H14: its hold on the shared address space, for its user.
    _tenancy: Option<vm::Tenancy>,
}

impl accel::Driver for AneDriver {
    type Data = AneData;
    type File = AneFile;

    const INFO: DriverInfo = DriverInfo {
        major: uapi::ABI_VERSION as i32,
        minor: uapi::DRIVER_MINOR as i32,
        patchlevel: 0,
        name: c"ane_accel",
        desc: c"Apple Neural Engine",
    };

    const IOCTLS: &'static [kernel::bindings::drm_ioctl_desc] = crate::declare_accel_ioctls! { AneDriver;
        (uapi::cmd::GET_PARAM, uapi::GetParam, ioctl::get_param),
        (uapi::cmd::BO_CREATE, uapi::BoCreate, gem::bo_create),
        (uapi::cmd::BO_INFO, uapi::BoInfo, gem::bo_info),
        // PROGRAM_CREATE enters the device itself: on H14 not across its
        // firmware exchanges, which may wait seconds for a running call.
        (uapi::cmd::PROGRAM_CREATE, uapi::ProgramCreate, program::program_create, unguarded),
        (uapi::cmd::PROGRAM_DESTROY, uapi::ProgramDestroy, program::program_destroy),
        (uapi::cmd::EXEC, uapi::Exec, job::exec),
        // WAIT sleeps up to the caller's deadline and touches no device
        // resource: it must not hold the unplug SRCU, which every DRM
        // device's unplug waits for.
        (uapi::cmd::WAIT, uapi::Wait, job::wait, unguarded),
    };

    fn open(dev: &accel::Device<Self>) -> Result<Pin<KBox<AneFile>>> {
        // H14: files of one user at a time, unless several are allowed
        // (kernel-2 1.12; before the engine is woken or anything is
        // allocated for the file).
        let tenancy = dev.tenants.as_ref().map(|t| t.enter()).transpose()?;
        // Opening the node wakes the engine, as on macOS; it autosuspends
        // again when idle. Runtime PM is enabled only once probe returned
        // (the node exists a little earlier) and disabled at remove after
        // the node was unplugged: `EACCES` means the device is still in its
        // probe, powered by it, so there is nothing to wake and the open
        // succeeds (kernel-2 N15: an open racing probe got `EACCES`).
        let _pm = match dev.pm.get() {
            Ok(r) => Some(r),
            Err(e) if e == EACCES => None,
            Err(e) => return Err(e),
        };
        let vm = match &dev.fw {
            // H14: the firmware reaches every client's buffers at any time.
            Some((_, vm)) => vm.clone(),
            None => Vm::new(dev.soc.iova, address_space(dev)?)?,
        };
        let bytes = gem::ClientBytes::new()?;
        let usage = job::Usage::new()?;
        KBox::pin_init(
            pin_init!(AneFile {
                vm,
                owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
                programs <- new_mutex!(program::Programs::new()),
                jobs <- job::Jobs::new(),
                bytes,
                usage,
                _tenancy: tenancy,
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// fdinfo (Documentation/gpu/drm-usage-stats.rst): after the DRM
    /// core's `drm-driver: ane` and `drm-client-id`, the engine time of the
    /// file's ended jobs and the memory of the BOs it holds handles to
    /// (all resident: pinned from creation).
    fn show_fdinfo(
        _dev: &accel::Device<Self>,
        file: &accel::File<Self>,
        p: &mut accel::FdInfo<'_>,
    ) {
        p.u64(c"drm-engine-ane", file.inner().usage.busy_ns(), c" ns");
        p.memory();
    }
}

/// The page tables for a new client: the simulator's, or an IOMMU domain.
fn address_space(dev: &accel::Device<AneDriver>) -> Result<AddressSpace> {
    #[cfg(ane_test)]
    if dev.simulated {
        let pt: Arc<dyn vm::SoftPageTable> = Arc::new(sim::SimPageTable::new()?, GFP_KERNEL)?;
        return Ok(AddressSpace::Soft(pt));
    }
    Ok(AddressSpace::Iommu(vm::IommuSpace::new(&dev.parent)?))
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
                    description: "Cap on all buffer objects of a device in MiB (read at bind). On T602x, where all clients share one device address space, it and bo_client_mb are capped at that space's size",
                },
                job_timeout_ms: u32 {
                    default: 2000,
                    description: "H13 (M1, M1 Pro/Max): how long one job may run before it is declared hung and the engine recovered, in ms (10..=60000, read at bind). Raise it for models that legitimately run longer; a hung job holds the engine from every client this long",
                },
                fw_call_ms: u32 {
                    default: 5000,
                    description: "T602x: how long one call (a job) may run on the firmware until its finish event, in ms; past it the job times out and the firmware is quarantined until reboot (the record's rule). Raise it for models that legitimately run longer (read at bind)",
                },
                fw_mem_mb: u32 {
                    default: 704,
                    description: "T602x: device addresses reserved at bind for the firmware's own memory (its image and its SHAREDMALLOC grants, at most 512 MiB by the record, plus a guard page each), in MiB; these are its budget, outside the clients' caps (read at bind)",
                },
                fw_program_mb: u32 {
                    default: 256,
                    description: "T602x: device addresses reserved at bind for the section copies of the programs the firmware loaded, which it keeps until reboot (the record has no unload), in MiB; their budget, outside the clients' caps and the firmware's own memory: once full, PROGRAM_CREATE of a new program fails with ENOSPC (read at bind)",
                },
                rtkit: u32 {
                    default: 0,
                    description: "1: T602x: also try an RTKit session over the coprocessor's mailbox after the firmware started (bounded 1 s HELLO wait; read at bind). Experimental: the record never starts this mailbox, and saw its line 884 interrupt at about 0.7 M/s while it was started",
                },
                boost_idle_ms: u32 {
                    default: 0,
                    description: "CPU-cluster boost, a power policy for the administrator: every cpufreq policy's minimum is held at its top frequency from the start of a job until this many ms after the last (visible in scaling_min_freq). Default 0 = off; 100 is what omarchy-ane measured (T8103: a 171 ms encoder ran in 138 ms) (read at bind)",
                },
                multi_user: u32 {
                    default: 0,
                    description: "1: T602x (M2 Pro/Max): let files of different users be open at once. All T602x clients share one device address space with the firmware and their programs are opaque to the kernel, so any client's program can read and write any other client's buffers; by default the files open at one time must belong to one user, and another user's open gets EBUSY (read at bind)",
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
    selftest_kasan: u32 {
        default: 0,
        description: "Test flavour only: 1 = read one byte past a kmalloc'd buffer at load, to prove the sanitizer kernel's harness catches the KASAN report",
    },
    sim_soc: u32 {
        default: 0,
        description: "Test flavour only: register a simulated ANE of this SoC (0x8103, 0x6000, 0x6001, 0x6020, 0x6021)",
    },
    sim_fw_faults: u32 {
        default: 0,
        description: "Test flavour only: faults and alternatives the simulated T602x firmware (hw::fw::model::Faults), its memory (hw::mem::Coherence::SIM_BITS) and the H13 task manager (hw::tm::model::Behaviour::SIM_BITS) play; read at bind",
    },
    sim_fw_finish_delay: u32 {
        default: 0,
        description: "Test flavour only: polls from a simulated T602x call's dispatch to its finish event (0: the model's default; read at bind)",
    },
    sim_node: u32 {
        default: 0,
        description: "Test flavour only: the device-tree node shape the simulated device stands for: 0 = this driver's overlay, 1 = no reg-names and AsahiLinux PR #584's power-domain count (read at bind)",
    },
    sim_irq: u32 {
        default: 0,
        description: "Test flavour only: 1 = the simulated engine raises its event interrupt on the engine's own line, for completion_irq=1 (read at bind); 0 = on the DART's line, as the record says",
    },
    sim_probe_delay_ms: u32 {
        default: 0,
        description: "Test flavour only: a simulated device's probe sleeps this long after its accel node is registered, before runtime PM is enabled (the window an open can land in; kernel-2 N15)",
    },
}

/// Hooks that exist only in the test flavour (`ANE_TEST=1`).
#[cfg(ane_test)]
mod selftest {
    /// The kernel's SHA-256 as the module reaches it (`ext::sha256`), one
    /// shot and streamed in uneven pieces, against FIPS 180-4's "abc" and
    /// two-block examples: a wrong context size or call in the glue shows
    /// as a kernel warning in every guest run.
    fn sha256_known_answers() -> bool {
        use crate::hw::fw::sha256::Hasher;
        const ABC: [u8; 32] = [
            0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
            0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
            0xf2, 0x00, 0x15, 0xad,
        ];
        const TWO: &[u8] = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        const TWO_DIGEST: [u8; 32] = [
            0x24, 0x8d, 0x6a, 0x61, 0xd2, 0x06, 0x38, 0xb8, 0xe5, 0xc0, 0x26, 0x93, 0x0c, 0x3e,
            0x60, 0x39, 0xa3, 0x3c, 0xe4, 0x59, 0x64, 0xff, 0x21, 0x67, 0xf6, 0xec, 0xed, 0xd4,
            0x19, 0xdb, 0x06, 0xc1,
        ];
        let mut s = crate::ext::sha256::Sha256::new();
        s.update(&TWO[..1]);
        s.update(&TWO[1..40]);
        s.update(&TWO[40..]);
        crate::ext::sha256::digest(b"abc") == ABC
            && crate::ext::sha256::digest(TWO) == TWO_DIGEST
            && s.finalize() == TWO_DIGEST
    }

    /// Called at module load.
    pub(crate) fn on_load() {
        kernel::warn_on!(!sha256_known_answers());
        if crate::ext::param::on(crate::module_parameters::selftest_warn.value()) {
            kernel::warn_on!(true);
        }
        if crate::ext::param::on(crate::module_parameters::selftest_kasan.value()) {
            // SAFETY: The function takes no argument and touches only a
            // buffer it allocates and frees itself; its out-of-bounds read
            // is the deliberate KASAN report, its only effect.
            unsafe { crate::ext::glue::ane_glue_selftest_kasan() };
        }
    }
}
