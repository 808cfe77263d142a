// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Rust mirror of `include/uapi/drm/ane_accel.h`, the driver's UAPI.
//!
//! The kernel's ioctl handlers and the userspace library both use these
//! definitions; a host test compiles the C header and checks that every
//! struct size and field offset agrees with this file. See the header for
//! the rules every ioctl follows (zero pads, unknown flags rejected, capped
//! sizes, extensible arrays).

/// The DRM driver name (`DRM_ANE_DRIVER_NAME`). Other ANE drivers (eiln/ane,
/// omarchy-ane and Aurora's in-tree port of it) register `ane` with another
/// ioctl set; this distinct name keeps their clients off this node and
/// ours off theirs.
pub const DRIVER_NAME: &str = "ane_accel";

/// The UAPI version (`DRM_ANE_ABI_VERSION`), reported as the DRM driver
/// major and by [`param::ABI_VERSION`]. By the DRM convention it changes
/// only on an incompatible UAPI change; compatible additions raise the
/// minor.
pub const ABI_VERSION: u32 = 1;

/// What [`param::IDENT`] returns: ASCII `aneaccel`, fixed forever. With
/// [`DRIVER_NAME`] it tells this driver from every other ANE driver.
pub const IDENT_MAGIC: u64 = u64::from_be_bytes(*b"aneaccel");

/// Driver-private ioctl numbers, relative to `DRM_COMMAND_BASE`.
pub mod nr {
    /// [`super::GetParam`].
    pub const GET_PARAM: u32 = 0x00;
    /// [`super::BoCreate`].
    pub const BO_CREATE: u32 = 0x01;
    /// [`super::BoInfo`].
    pub const BO_INFO: u32 = 0x02;
    /// [`super::ProgramCreate`].
    pub const PROGRAM_CREATE: u32 = 0x03;
    /// [`super::ProgramDestroy`].
    pub const PROGRAM_DESTROY: u32 = 0x04;
    /// [`super::Exec`].
    pub const EXEC: u32 = 0x05;
    /// [`super::Wait`].
    pub const WAIT: u32 = 0x06;
}

/// `DRM_COMMAND_BASE` of `drm.h`: driver ioctls start here.
pub const DRM_COMMAND_BASE: u32 = 0x40;
/// `DRM_IOCTL_BASE` of `drm.h`, the ioctl type byte `'d'`.
pub const DRM_IOCTL_BASE: u32 = b'd' as u32;

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// Encodes an ioctl number the way Linux's generic `_IOC()` does (x86 and
/// arm64 both use it): direction, argument size, type and number.
pub const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    // Sizes are checked below to fit the 14-bit field.
    (dir << 30) | ((size as u32) << 16) | (DRM_IOCTL_BASE << 8) | (DRM_COMMAND_BASE + nr)
}

/// `DRM_IOWR(DRM_COMMAND_BASE + nr, T)`.
pub const fn iowr<T>(nr: u32) -> u32 {
    ioc(IOC_READ | IOC_WRITE, nr, core::mem::size_of::<T>())
}

/// `DRM_IOW(DRM_COMMAND_BASE + nr, T)`.
pub const fn iow<T>(nr: u32) -> u32 {
    ioc(IOC_WRITE, nr, core::mem::size_of::<T>())
}

/// Full ioctl request numbers, as userspace passes them to `ioctl(2)`.
pub mod cmd {
    use super::*;
    /// `DRM_IOCTL_ANE_GET_PARAM`.
    pub const GET_PARAM: u32 = iowr::<GetParam>(nr::GET_PARAM);
    /// `DRM_IOCTL_ANE_BO_CREATE`.
    pub const BO_CREATE: u32 = iowr::<BoCreate>(nr::BO_CREATE);
    /// `DRM_IOCTL_ANE_BO_INFO`.
    pub const BO_INFO: u32 = iowr::<BoInfo>(nr::BO_INFO);
    /// `DRM_IOCTL_ANE_PROGRAM_CREATE`.
    pub const PROGRAM_CREATE: u32 = iowr::<ProgramCreate>(nr::PROGRAM_CREATE);
    /// `DRM_IOCTL_ANE_PROGRAM_DESTROY`.
    pub const PROGRAM_DESTROY: u32 = iow::<ProgramDestroy>(nr::PROGRAM_DESTROY);
    /// `DRM_IOCTL_ANE_EXEC`.
    pub const EXEC: u32 = iowr::<Exec>(nr::EXEC);
    /// `DRM_IOCTL_ANE_WAIT`.
    pub const WAIT: u32 = iowr::<Wait>(nr::WAIT);
}

/// Parameters readable with [`GetParam`] (`enum drm_ane_param`).
pub mod param {
    /// [`super::ABI_VERSION`].
    pub const ABI_VERSION: u32 = 0;
    /// Chip number (0x8103, 0x6000, 0x6020, 0x6021).
    pub const SOC_ID: u32 = 1;
    /// 13 or 14.
    pub const GENERATION: u32 = 2;
    /// A [`super::backend`] value.
    pub const BACKEND: u32 = 3;
    /// The kernel's page size; BO sizes are rounded up to it.
    pub const PAGE_SIZE: u32 = 4;
    /// First device address a BO can get.
    pub const IOVA_START: u32 = 5;
    /// One past the last device address.
    pub const IOVA_END: u32 = 6;
    /// Largest single BO in bytes.
    pub const BO_MAX_SIZE: u32 = 7;
    /// Cap on the total size of all BOs of the device.
    pub const BO_TOTAL_MAX: u32 = 8;
    /// Most bindings one EXEC takes.
    pub const MAX_BINDINGS: u32 = 9;
    /// Largest program range in bytes.
    pub const MAX_PROGRAM_SIZE: u32 = 10;
    /// A [`super::fw_state`] value.
    pub const FW_STATE: u32 = 11;
    /// [`super::feature`] bits.
    pub const FEATURES: u32 = 12;
    /// A [`super::engine_state`] value.
    pub const ENGINE_STATE: u32 = 13;
    /// Cap on the total size of the BOs of one open file.
    pub const BO_CLIENT_MAX: u32 = 14;
    /// [`super::IDENT_MAGIC`], always: identifies this driver's UAPI.
    pub const IDENT: u32 = BO_CLIENT_MAX + 1;
    /// Most steps (programs) one EXEC chains: [`super::MAX_CHAIN_STEPS`].
    pub const MAX_CHAIN: u32 = 16;
    /// Most in-syncobjs one EXEC takes: [`super::MAX_IN_SYNCOBJS`].
    pub const MAX_IN_SYNCOBJS: u32 = 17;
    /// One past the highest parameter.
    pub const COUNT: u32 = MAX_IN_SYNCOBJS + 1;
}

/// `enum drm_ane_backend`.
pub mod backend {
    /// H13: the kernel drives the task manager.
    pub const HOST_DRIVEN: u64 = 1;
    /// H14: the ANE firmware does.
    pub const FIRMWARE: u64 = 2;
}

/// `enum drm_ane_fw_state`.
pub mod fw_state {
    /// This generation runs no firmware of Linux's.
    pub const NONE: u64 = 0;
    /// Not started yet (or, the simulator's, stopped at unbind).
    pub const OFF: u64 = 1;
    /// Running.
    pub const RUNNING: u64 = 2;
    /// Start failed; the device stays bound but idle.
    pub const FAILED: u64 = 3;
    /// A protocol failure after the start, or an unbind while the
    /// coprocessor runs: commands are refused until reboot.
    pub const QUARANTINED: u64 = 4;
}

/// `enum drm_ane_engine_state`: whether the engine takes jobs.
pub mod engine_state {
    /// It does.
    pub const READY: u64 = 0;
    /// T8103: the recovery's forced power cycle is running; it clears when
    /// that ends (or becomes `WEDGED_REBIND` if it failed).
    pub const WEDGED_POWER_CYCLE: u64 = 1;
    /// Wedged; clears when the device is bound again.
    pub const WEDGED_REBIND: u64 = 2;
}

/// `DRM_ANE_FAULT_*`: what `Wait::fault` carries (kind in bits 39:32, a
/// 32-bit word below).
pub mod fault {
    /// Where the kind sits.
    pub const KIND_SHIFT: u32 = 32;
    /// H13: a DART translation fault; the word is the DART's error register.
    pub const DART: u64 = 1;
    /// H13: the task manager's first error latch after the failed job, when
    /// it is not the healthy 0x22222222.
    pub const LATCH: u64 = 2;

    /// The fault value of `kind` with `word`.
    pub const fn encode(kind: u64, word: u32) -> u64 {
        kind << KIND_SHIFT | word as u64
    }
}

/// `DRM_ANE_FEATURE_*` bits.
pub mod feature {
    /// Completion is signalled by the engine's interrupt.
    pub const COMPLETION_IRQ: u64 = 1 << 0;
}

/// `DRM_ANE_BIND_*` binding flags.
pub mod bind {
    /// The engine reads the buffer.
    pub const IN: u32 = 1 << 0;
    /// The engine writes the buffer.
    pub const OUT: u32 = 1 << 1;
    /// Every defined flag.
    pub const ALL: u32 = IN | OUT;
}

/// `enum drm_ane_priority`.
pub mod priority {
    /// Background work.
    pub const LOW: u32 = 0;
    /// The default.
    pub const NORMAL: u32 = 1;
    /// Latency-sensitive work.
    pub const HIGH: u32 = 2;
    /// The highest valid value.
    pub const MAX: u32 = HIGH;
}

/// `enum drm_ane_job_status`.
pub mod job_status {
    /// Not finished.
    pub const PENDING: u32 = 0;
    /// Finished successfully.
    pub const DONE: u32 = 1;
    /// The engine did not finish in time; it was recovered.
    pub const TIMEOUT: u32 = 2;
    /// The engine or firmware reported an error.
    pub const FAULT: u32 = 3;
    /// Never ran to completion (device removed, file closed).
    pub const ABORTED: u32 = 4;
}

/// Number of buffer slots (base-address registers) a program can use.
pub const NUM_SLOTS: u32 = 32;

/// Most steps one EXEC chains (what [`param::MAX_CHAIN`] reports): room for
/// a 77-layer MLP run as one chain.
pub const MAX_CHAIN_STEPS: u32 = 128;

/// Most in-syncobjs one EXEC waits for (what [`param::MAX_IN_SYNCOBJS`]
/// reports).
pub const MAX_IN_SYNCOBJS: u32 = 32;

/// The DRM driver minor: 1 added the EXEC syncobj fields (in-fences and an
/// out-fence).
pub const DRIVER_MINOR: u32 = 1;

/// `struct drm_ane_get_param`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GetParam {
    /// In: a [`param`] value.
    pub param: u32,
    /// Must be zero.
    pub pad: u32,
    /// Out.
    pub value: u64,
}

/// `struct drm_ane_bo_create`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoCreate {
    /// In: bytes, rounded up to the page size.
    pub size: u64,
    /// In: must be zero.
    pub flags: u32,
    /// Out: GEM handle.
    pub handle: u32,
    /// Out: offset to mmap on the accel fd.
    pub mmap_offset: u64,
    /// Out: device address in this file's address space.
    pub iova: u64,
}

/// `struct drm_ane_bo_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoInfo {
    /// In.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
    /// Out.
    pub size: u64,
    /// Out.
    pub mmap_offset: u64,
    /// Out.
    pub iova: u64,
}

/// `struct drm_ane_section`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Section {
    /// Section id.
    pub id: u32,
    /// Must be zero.
    pub flags: u32,
    /// Offset within the program range.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
}

/// `struct drm_ane_program_create`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramCreate {
    /// In: BO holding the compiled program.
    pub bo_handle: u32,
    /// In: must be zero.
    pub flags: u32,
    /// In: start of the program in the BO.
    pub offset: u64,
    /// In: program bytes (task descriptors, then weights).
    pub size: u64,
    /// In: bytes per task descriptor.
    pub td_size: u32,
    /// In: number of task descriptors.
    pub td_count: u32,
    /// In: bytes of the task stream at the start of the range.
    pub tsk_size: u64,
    /// In: user pointer to [`Section`]s (H14).
    pub sections: u64,
    /// In.
    pub section_count: u32,
    /// In: the element size userspace uses.
    pub section_size: u32,
    /// Out: program handle.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `struct drm_ane_program_destroy`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramDestroy {
    /// Program handle.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `struct drm_ane_binding`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    /// The program's buffer slot.
    pub slot: u32,
    /// BO handle.
    pub bo_handle: u32,
    /// Offset within the BO.
    pub offset: u64,
    /// Bytes from `offset`.
    pub size: u64,
    /// [`bind`] flags.
    pub flags: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `struct drm_ane_exec`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exec {
    /// In: program handle.
    pub program: u32,
    /// In: must be zero.
    pub flags: u32,
    /// In: a [`priority`] value.
    pub priority: u32,
    /// In: number of [`Binding`]s.
    pub binding_count: u32,
    /// In: user pointer to [`Binding`]s.
    pub bindings: u64,
    /// In: the element size userspace uses.
    pub binding_size: u32,
    /// Must be zero.
    pub pad: u32,
    /// Out.
    pub job_id: u64,
    /// In: user pointer to [`ExecStep`]s, or 0 for one program.
    pub steps: u64,
    /// In: number of [`ExecStep`]s; 0 for one program.
    pub step_count: u32,
    /// In: the element size userspace uses.
    pub step_size: u32,
    /// In: user pointer to [`ExecSyncobj`]s the job waits for, or 0.
    pub in_syncobjs: u64,
    /// In: number of [`ExecSyncobj`]s (0..=[`MAX_IN_SYNCOBJS`]).
    pub in_syncobj_count: u32,
    /// In: the element size userspace uses.
    pub in_syncobj_size: u32,
    /// In: syncobj handle that gets the job's out-fence; 0 for none.
    pub out_syncobj: u32,
    /// Must be zero.
    pub pad2: u32,
    /// In: timeline point of the out-fence; 0 for a binary syncobj.
    pub out_point: u64,
}

/// `struct drm_ane_exec_syncobj`: one in-fence of an EXEC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecSyncobj {
    /// In: syncobj handle.
    pub handle: u32,
    /// In: must be zero.
    pub flags: u32,
    /// In: timeline point; 0 for a binary syncobj.
    pub point: u64,
}

/// `struct drm_ane_exec_step`: one program of a chain.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecStep {
    /// In: program handle.
    pub program: u32,
    /// In: number of [`Binding`]s.
    pub binding_count: u32,
    /// In: user pointer to [`Binding`]s.
    pub bindings: u64,
    /// In: the element size userspace uses.
    pub binding_size: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `struct drm_ane_wait`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wait {
    /// In.
    pub job_id: u64,
    /// In: absolute `CLOCK_MONOTONIC` deadline in nanoseconds.
    pub timeout_ns: i64,
    /// Out: a [`job_status`] value.
    pub status: u32,
    /// Must be zero.
    pub pad: u32,
    /// Out: a [`fault`] value, 0 if none.
    pub fault: u64,
    /// Out: when EXEC queued the job (`CLOCK_MONOTONIC` ns).
    pub queued_ns: u64,
    /// Out: when the engine was handed the job; 0 if it never was.
    pub started_ns: u64,
    /// Out: when the job's end was seen.
    pub ended_ns: u64,
    /// Out: steps (programs) that ended DONE.
    pub steps_done: u32,
    /// Must be zero.
    pub pad2: u32,
}

// Sizes are part of the ABI (and must fit the ioctl size field).
const _: () = {
    assert!(core::mem::size_of::<GetParam>() == 16);
    assert!(core::mem::size_of::<BoCreate>() == 32);
    assert!(core::mem::size_of::<BoInfo>() == 32);
    assert!(core::mem::size_of::<Section>() == 24);
    assert!(core::mem::size_of::<ProgramCreate>() == 64);
    assert!(core::mem::size_of::<ProgramDestroy>() == 8);
    assert!(core::mem::size_of::<Binding>() == 32);
    assert!(core::mem::size_of::<Exec>() == 88);
    assert!(core::mem::size_of::<ExecSyncobj>() == 16);
    assert!(core::mem::size_of::<ExecStep>() == 24);
    assert!(core::mem::size_of::<Wait>() == 64);
};

/// Every UAPI struct with its C name and fields, for the layout test.
#[cfg(test)]
macro_rules! ane_uapi_structs {
    ($m:ident) => {
        $m!(GetParam, "drm_ane_get_param", [param, pad, value]);
        $m!(
            BoCreate,
            "drm_ane_bo_create",
            [size, flags, handle, mmap_offset, iova]
        );
        $m!(
            BoInfo,
            "drm_ane_bo_info",
            [handle, pad, size, mmap_offset, iova]
        );
        $m!(Section, "drm_ane_section", [id, flags, offset, size]);
        $m!(
            ProgramCreate,
            "drm_ane_program_create",
            [
                bo_handle,
                flags,
                offset,
                size,
                td_size,
                td_count,
                tsk_size,
                sections,
                section_count,
                section_size,
                handle,
                pad
            ]
        );
        $m!(ProgramDestroy, "drm_ane_program_destroy", [handle, pad]);
        $m!(
            Binding,
            "drm_ane_binding",
            [slot, bo_handle, offset, size, flags, pad]
        );
        $m!(
            Exec,
            "drm_ane_exec",
            [
                program,
                flags,
                priority,
                binding_count,
                bindings,
                binding_size,
                pad,
                job_id,
                steps,
                step_count,
                step_size,
                in_syncobjs,
                in_syncobj_count,
                in_syncobj_size,
                out_syncobj,
                pad2,
                out_point
            ]
        );
        $m!(ExecSyncobj, "drm_ane_exec_syncobj", [handle, flags, point]);
        $m!(
            ExecStep,
            "drm_ane_exec_step",
            [program, binding_count, bindings, binding_size, pad]
        );
        $m!(
            Wait,
            "drm_ane_wait",
            [
                job_id, timeout_ns, status, pad, fault, queued_ns, started_ns, ended_ns,
                steps_done, pad2
            ]
        );
    };
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;
    use std::string::String;

    /// Compiles a C program that prints `sizeof`/`offsetof` of every struct
    /// and field from `include/uapi/drm/ane_accel.h`, and compares them with
    /// this file. Skipped (with a message) when no C compiler or no `drm.h`
    /// is installed, unless `ANE_REQUIRE_LAYOUT_TEST` is set (`make check`
    /// sets it in the build chroot, which has both).
    #[test]
    fn c_header_layout_matches() {
        let required = std::env::var_os("ANE_REQUIRE_LAYOUT_TEST").is_some();
        let top = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let header = format!("{top}/include/uapi/drm/ane_accel.h");
        let drm_inc = ["/usr/include/drm", "/usr/include/libdrm"]
            .into_iter()
            .find(|d| std::path::Path::new(&format!("{d}/drm.h")).exists());
        let Some(drm_inc) = drm_inc else {
            assert!(!required, "no drm.h to check the C header against");
            std::println!("SKIP: no drm.h (install linux-libc-dev)");
            return;
        };
        let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n");
        c += &format!("#include \"{header}\"\n");
        c += "int main(void) {\n";
        let mut want = String::new();
        macro_rules! emit {
            ($ty:ident, $cname:literal, [$($f:ident),*]) => {
                c += &format!("printf(\"%s %zu\\n\", \"{}\", sizeof(struct {}));\n", $cname, $cname);
                want += &format!("{} {}\n", $cname, core::mem::size_of::<$ty>());
                $(
                    c += &format!(
                        "printf(\"%s.%s %zu %zu\\n\", \"{0}\", \"{1}\", offsetof(struct {0}, {1}), sizeof(((struct {0} *)0)->{1}));\n",
                        $cname, stringify!($f));
                    want += &format!("{}.{} {} {}\n", $cname, stringify!($f),
                        core::mem::offset_of!($ty, $f), {
                            let v: $ty = Default::default();
                            core::mem::size_of_val(&v.$f)
                        });
                )*
            };
        }
        ane_uapi_structs!(emit);
        // The enum and flag values too.
        let consts: &[(&str, u64)] = &[
            ("DRM_ANE_ABI_VERSION", u64::from(ABI_VERSION)),
            ("DRM_ANE_PARAM_FW_STATE", u64::from(param::FW_STATE)),
            ("DRM_ANE_PARAM_FEATURES", u64::from(param::FEATURES)),
            ("DRM_ANE_PARAM_ENGINE_STATE", u64::from(param::ENGINE_STATE)),
            (
                "DRM_ANE_PARAM_BO_CLIENT_MAX",
                u64::from(param::BO_CLIENT_MAX),
            ),
            ("DRM_ANE_PARAM_IDENT", u64::from(param::IDENT)),
            ("DRM_ANE_PARAM_MAX_CHAIN", u64::from(param::MAX_CHAIN)),
            (
                "DRM_ANE_PARAM_MAX_IN_SYNCOBJS",
                u64::from(param::MAX_IN_SYNCOBJS),
            ),
            ("DRM_ANE_MAX_IN_SYNCOBJS", u64::from(MAX_IN_SYNCOBJS)),
            ("DRM_ANE_DRIVER_MINOR", u64::from(DRIVER_MINOR)),
            ("DRM_ANE_IDENT_MAGIC", IDENT_MAGIC),
            ("DRM_ANE_FW_FAILED", fw_state::FAILED),
            ("DRM_ANE_FW_QUARANTINED", fw_state::QUARANTINED),
            ("DRM_ANE_ENGINE_READY", engine_state::READY),
            (
                "DRM_ANE_ENGINE_WEDGED_POWER_CYCLE",
                engine_state::WEDGED_POWER_CYCLE,
            ),
            ("DRM_ANE_ENGINE_WEDGED_REBIND", engine_state::WEDGED_REBIND),
            ("DRM_ANE_FAULT_KIND_SHIFT", u64::from(fault::KIND_SHIFT)),
            ("DRM_ANE_FAULT_DART", fault::DART),
            ("DRM_ANE_FAULT_LATCH", fault::LATCH),
            ("DRM_ANE_FEATURE_COMPLETION_IRQ", feature::COMPLETION_IRQ),
        ];
        for (name, v) in consts {
            c += &format!("printf(\"%s %llu\\n\", \"{name}\", (unsigned long long)({name}));\n");
            want += &format!("{name} {v}\n");
        }
        c += "printf(\"DRM_ANE_DRIVER_NAME %s\\n\", DRM_ANE_DRIVER_NAME);\n";
        want += &format!("DRM_ANE_DRIVER_NAME {DRIVER_NAME}\n");
        c += "return 0; }\n";
        let dir = std::env::temp_dir().join(format!("ane-uapi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("layout.c");
        let bin = dir.join("layout");
        std::fs::write(&src, c).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = std::process::Command::new(&cc)
            .args(["-Wall", "-Werror", "-I", drm_inc, "-o"])
            .arg(&bin)
            .arg(&src)
            .status();
        match status {
            Err(e) => {
                assert!(!required, "no C compiler ({cc}: {e})");
                std::println!("SKIP: no C compiler ({cc}: {e})");
                return;
            }
            Ok(s) => assert!(s.success(), "the C header does not compile"),
        }
        let out = std::process::Command::new(&bin).output().unwrap();
        let got = String::from_utf8(out.stdout).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(got, want, "C header and Rust mirror disagree");
    }

    #[test]
    fn identity() {
        assert_eq!(IDENT_MAGIC, 0x616e_6561_6363_656c);
        // Not the name eiln/omarchy-ane's libane accepts (it takes any
        // "ane" node of major 1 or 2).
        assert_ne!(DRIVER_NAME, "ane");
        assert_eq!(param::IDENT, 15);
        assert_eq!(param::COUNT, 18);
    }

    #[test]
    fn ioctl_numbers() {
        // DRM_IOWR(0x40, struct drm_ane_get_param): 0xc0106440.
        assert_eq!(cmd::GET_PARAM, 0xc010_6440);
        assert_eq!(cmd::BO_CREATE, 0xc020_6441);
        assert_eq!(cmd::PROGRAM_DESTROY, 0x4008_6444);
        assert_eq!(cmd::WAIT, 0xc040_6446);
        // 88 bytes from driver minor 1 (56 before: the DRM core matches
        // the number, not the size, and zero-extends a shorter struct).
        assert_eq!(cmd::EXEC, 0xc058_6445);
    }
}
