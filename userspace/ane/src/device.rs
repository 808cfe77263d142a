// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The accel device: discovery, typed ioctl wrappers and buffer objects.
//!
//! [`Device::discover`] finds the `/dev/accel/accel*` node of this driver.
//! Other ANE drivers (eiln/ane, omarchy-ane, Aurora's in-tree port) register
//! the DRM name `ane` with other ioctls; this driver registers
//! [`uapi::DRIVER_NAME`]. A node is judged by its `DRM_IOCTL_VERSION` first
//! ([`identify`]: our name and major) and only then asked
//! `DRM_ANE_PARAM_IDENT`; a foreign `ane` node is refused with what it is,
//! before any driver-private ioctl reaches it.
//! [`Bo`] is a buffer object that closes its GEM handle and unmaps itself
//! when dropped. The [`raw`] module passes UAPI structs to the kernel
//! unchanged, for tests that must send malformed requests.

use std::ffi::c_void;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};

use crate::hw::uapi::{self, param};

/// What an open's errno means for this driver, when it says more than the
/// errno's text.
fn open_hint(e: Errno) -> &'static str {
    if e == Errno::BUSY {
        " (on an M2 Pro/Max, files of one user at a time share the ANE; another user has it open, and the administrator can allow several users with the module option multi_user=1)"
    } else {
        ""
    }
}

/// Errors of device access. Each names what was being done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No accel node belongs to this driver.
    #[error("no ANE accel device found under /dev/accel (is the ane module loaded and bound?)")]
    NoDevice,
    /// The node could not be opened.
    #[error("cannot open {path}: {source}{}", open_hint(*source))]
    Open {
        /// The node.
        path: PathBuf,
        /// Why.
        source: Errno,
    },
    /// The node belongs to another driver.
    #[error("{path} is driven by '{name}', not '{}'", uapi::DRIVER_NAME)]
    NotAne {
        /// The node.
        path: PathBuf,
        /// The driver's name.
        name: String,
    },
    /// The node belongs to another ANE driver (DRM name `ane`).
    #[error("{path} is an 'ane' device with DRM major {major} ({what}; it calls itself \"{desc}\"), not this driver")]
    Foreign {
        /// The node.
        path: PathBuf,
        /// Its DRM major.
        major: i32,
        /// Which driver reports that major.
        what: &'static str,
        /// Its DRM description.
        desc: String,
    },
    /// The kernel speaks another ABI version.
    #[error("{path} is a '{}' device with DRM major {got}, an ABI incompatible with this library's {want} (update the library or the kernel)", uapi::DRIVER_NAME)]
    Abi {
        /// The node.
        path: PathBuf,
        /// Kernel's version.
        got: i32,
        /// Ours.
        want: u32,
    },
    /// The name and major are ours but `DRM_ANE_PARAM_IDENT` is not.
    #[error(
        "{path} reports DRM name '{}' and major {major}, but {found}: not this driver",
        uapi::DRIVER_NAME
    )]
    Ident {
        /// The node.
        path: PathBuf,
        /// Its DRM major.
        major: i32,
        /// What `DRM_ANE_PARAM_IDENT` gave.
        found: String,
    },
    /// An ioctl failed.
    #[error("{ioctl} failed: {source}")]
    Ioctl {
        /// Which ioctl.
        ioctl: &'static str,
        /// The errno.
        source: Errno,
    },
    /// A value does not fit what the kernel returned or accepts.
    #[error("{field} = {value}: {reason}")]
    Invalid {
        /// The field at fault.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// mmap failed.
    #[error("mmap of a {size}-byte buffer failed: {source}")]
    Mmap {
        /// Bytes.
        size: u64,
        /// Why.
        source: Errno,
    },
    /// The program cannot be bound: the kernel's validator refuses its task
    /// stream, or a tensor disagrees with what the stream does to its slot.
    #[error("{0}")]
    Program(Box<crate::program::ProgramError>),
}

impl Error {
    /// The errno of a failed system call (open, an ioctl, mmap), if that
    /// is what failed.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Open { source, .. }
            | Error::Ioctl { source, .. }
            | Error::Mmap { source, .. } => Some(*source),
            _ => None,
        }
    }
}

/// Result of device operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Raw ioctls: the kernel gets exactly the struct passed.
pub mod raw {
    use super::*;
    use rustix::ioctl::{ioctl, opcode, Opcode, Updater};

    /// `struct drm_version` (`DRM_IOCTL_VERSION`).
    #[repr(C)]
    #[derive(Debug)]
    pub struct DrmVersion {
        /// Major version.
        pub version_major: i32,
        /// Minor version.
        pub version_minor: i32,
        /// Patch level.
        pub version_patchlevel: i32,
        /// Bytes of `name`.
        pub name_len: usize,
        /// Buffer for the name.
        pub name: *mut u8,
        /// Bytes of `date`.
        pub date_len: usize,
        /// Buffer for the date.
        pub date: *mut u8,
        /// Bytes of `desc`.
        pub desc_len: usize,
        /// Buffer for the description.
        pub desc: *mut u8,
    }

    /// `struct drm_gem_close` (`DRM_IOCTL_GEM_CLOSE`).
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct GemClose {
        /// The handle.
        pub handle: u32,
        /// Must be zero.
        pub pad: u32,
    }

    const VERSION: Opcode = opcode::read_write::<DrmVersion>(b'd', 0x00);
    const GEM_CLOSE: Opcode = opcode::write::<GemClose>(b'd', 0x09);

    macro_rules! rw {
        ($(#[$m:meta])* $name:ident, $op:expr, $t:ty) => {
            $(#[$m])*
            pub fn $name(fd: impl AsFd, arg: &mut $t) -> std::result::Result<(), Errno> {
                const OP: Opcode = $op as Opcode;
                // SAFETY: `arg` is a valid, exclusively borrowed value of the
                // type the opcode encodes; the kernel only reads through the
                // user pointers it may contain.
                unsafe { ioctl(fd, Updater::<OP, $t>::new(arg)) }
            }
        };
    }

    rw!(
        /// `DRM_IOCTL_VERSION`. The buffers in `arg` must be valid for their lengths.
        version, VERSION, DrmVersion
    );
    rw!(
        /// `DRM_IOCTL_GEM_CLOSE`.
        gem_close, GEM_CLOSE, GemClose
    );
    rw!(
        /// `DRM_IOCTL_ANE_GET_PARAM`.
        get_param, uapi::cmd::GET_PARAM, uapi::GetParam
    );
    rw!(
        /// `DRM_IOCTL_ANE_BO_CREATE`.
        bo_create, uapi::cmd::BO_CREATE, uapi::BoCreate
    );
    rw!(
        /// `DRM_IOCTL_ANE_BO_INFO`.
        bo_info, uapi::cmd::BO_INFO, uapi::BoInfo
    );
    rw!(
        /// `DRM_IOCTL_ANE_PROGRAM_CREATE`.
        program_create, uapi::cmd::PROGRAM_CREATE, uapi::ProgramCreate
    );
    rw!(
        /// `DRM_IOCTL_ANE_PROGRAM_DESTROY`.
        program_destroy, uapi::cmd::PROGRAM_DESTROY, uapi::ProgramDestroy
    );
    rw!(
        /// `DRM_IOCTL_ANE_EXEC`. The kernel reads `binding_count` elements of
        /// `binding_size` bytes at the user pointer `bindings`.
        exec, uapi::cmd::EXEC, uapi::Exec
    );
    rw!(
        /// `DRM_IOCTL_ANE_WAIT`.
        wait, uapi::cmd::WAIT, uapi::Wait
    );

    /// `struct drm_syncobj_create`.
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct SyncobjCreate {
        /// Out: the handle.
        pub handle: u32,
        /// In: [`SYNCOBJ_CREATE_SIGNALED`] or 0.
        pub flags: u32,
    }

    /// `DRM_SYNCOBJ_CREATE_SIGNALED`: created holding a signalled fence.
    pub const SYNCOBJ_CREATE_SIGNALED: u32 = 1;

    /// `struct drm_syncobj_destroy`.
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct SyncobjDestroy {
        /// The handle.
        pub handle: u32,
        /// Must be zero.
        pub pad: u32,
    }

    /// `struct drm_syncobj_handle` (`DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD`).
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct SyncobjHandle {
        /// In: the handle.
        pub handle: u32,
        /// In: [`SYNCOBJ_HANDLE_TO_FD_EXPORT_SYNC_FILE`] or 0.
        pub flags: u32,
        /// Out: the file descriptor.
        pub fd: i32,
        /// Must be zero.
        pub pad: u32,
        /// In: the timeline point to export (0 for binary).
        pub point: u64,
    }

    /// `DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE`.
    pub const SYNCOBJ_HANDLE_TO_FD_EXPORT_SYNC_FILE: u32 = 1;

    /// `struct drm_syncobj_array` (`DRM_IOCTL_SYNCOBJ_SIGNAL`, `_RESET`).
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct SyncobjArray {
        /// User pointer to `u32` handles.
        pub handles: u64,
        /// Number of handles.
        pub count_handles: u32,
        /// Must be zero.
        pub pad: u32,
    }

    /// `struct drm_syncobj_timeline_array` (`DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL`,
    /// `_QUERY`).
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct SyncobjTimelineArray {
        /// User pointer to `u32` handles.
        pub handles: u64,
        /// User pointer to `u64` points.
        pub points: u64,
        /// Number of handles.
        pub count_handles: u32,
        /// Flags (0).
        pub flags: u32,
    }

    /// `struct drm_syncobj_timeline_wait` (`DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`).
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct SyncobjTimelineWait {
        /// User pointer to `u32` handles.
        pub handles: u64,
        /// User pointer to `u64` points.
        pub points: u64,
        /// Absolute `CLOCK_MONOTONIC` deadline, ns.
        pub timeout_nsec: i64,
        /// Number of handles.
        pub count_handles: u32,
        /// `DRM_SYNCOBJ_WAIT_FLAGS_*`.
        pub flags: u32,
        /// Out.
        pub first_signaled: u32,
        /// Must be zero.
        pub pad: u32,
        /// Deadline hint (0: none).
        pub deadline_nsec: u64,
    }

    /// `DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL`.
    pub const SYNCOBJ_WAIT_ALL: u32 = 1;
    /// `DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT`.
    pub const SYNCOBJ_WAIT_FOR_SUBMIT: u32 = 2;

    /// `struct sync_file_info` (`SYNC_IOC_FILE_INFO` on a sync file).
    #[repr(C)]
    #[derive(Debug, Default)]
    pub struct SyncFileInfo {
        /// The fence's name.
        pub name: [u8; 32],
        /// 1 signalled, 0 active, below 0 signalled with that error.
        pub status: i32,
        /// Flags (0).
        pub flags: u32,
        /// Fences in the file (in: 0 asks for none of their details).
        pub num_fences: u32,
        /// Must be zero.
        pub pad: u32,
        /// User pointer to fence details (0).
        pub sync_fence_info: u64,
    }

    const SYNCOBJ_CREATE: Opcode = opcode::read_write::<SyncobjCreate>(b'd', 0xBF);
    const SYNCOBJ_DESTROY: Opcode = opcode::read_write::<SyncobjDestroy>(b'd', 0xC0);
    const SYNCOBJ_HANDLE_TO_FD: Opcode = opcode::read_write::<SyncobjHandle>(b'd', 0xC1);
    const SYNCOBJ_RESET: Opcode = opcode::read_write::<SyncobjArray>(b'd', 0xC4);
    const SYNCOBJ_SIGNAL: Opcode = opcode::read_write::<SyncobjArray>(b'd', 0xC5);
    const SYNCOBJ_TIMELINE_WAIT: Opcode = opcode::read_write::<SyncobjTimelineWait>(b'd', 0xCA);
    const SYNCOBJ_QUERY: Opcode = opcode::read_write::<SyncobjTimelineArray>(b'd', 0xCB);
    const SYNCOBJ_TIMELINE_SIGNAL: Opcode = opcode::read_write::<SyncobjTimelineArray>(b'd', 0xCD);
    const SYNC_FILE_INFO: Opcode = opcode::read_write::<SyncFileInfo>(b'>', 4);

    rw!(
        /// `DRM_IOCTL_SYNCOBJ_CREATE`.
        syncobj_create, SYNCOBJ_CREATE, SyncobjCreate
    );
    rw!(
        /// `DRM_IOCTL_SYNCOBJ_DESTROY`.
        syncobj_destroy, SYNCOBJ_DESTROY, SyncobjDestroy
    );
    rw!(
        /// `DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD`.
        syncobj_handle_to_fd, SYNCOBJ_HANDLE_TO_FD, SyncobjHandle
    );
    rw!(
        /// `DRM_IOCTL_SYNCOBJ_RESET`. `handles` must be valid for the count.
        syncobj_reset, SYNCOBJ_RESET, SyncobjArray
    );
    rw!(
        /// `DRM_IOCTL_SYNCOBJ_SIGNAL`. `handles` must be valid for the count.
        syncobj_signal, SYNCOBJ_SIGNAL, SyncobjArray
    );
    rw!(
        /// `DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`. The pointers must be valid for
        /// the count.
        syncobj_timeline_wait, SYNCOBJ_TIMELINE_WAIT, SyncobjTimelineWait
    );
    rw!(
        /// `DRM_IOCTL_SYNCOBJ_QUERY`. The pointers must be valid for the
        /// count.
        syncobj_query, SYNCOBJ_QUERY, SyncobjTimelineArray
    );
    rw!(
        /// `DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL`. The pointers must be valid for
        /// the count.
        syncobj_timeline_signal, SYNCOBJ_TIMELINE_SIGNAL, SyncobjTimelineArray
    );
    rw!(
        /// `SYNC_IOC_FILE_INFO` on a sync file descriptor.
        sync_file_info, SYNC_FILE_INFO, SyncFileInfo
    );
}

/// A DRM syncobj of a [`Device`]'s file, destroyed on drop. A binary
/// syncobj holds one fence; a timeline one a point per signal. Pass it to
/// [`Device::exec_after`] as an in-fence (the job waits for it) or as the
/// out-fence (the job's end signals it).
#[derive(Debug)]
pub struct Syncobj<'d> {
    dev: &'d Device,
    handle: u32,
}

/// How a job's out-fence ended: [`Syncobj::fence_status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceStatus {
    /// Not signalled yet.
    Pending,
    /// Signalled without error (the job ended DONE).
    Signalled,
    /// Signalled with this errno: `ETIMEDOUT` (TIMEOUT), `EIO` (FAULT),
    /// `ECANCELED` (ABORTED).
    Error(Errno),
}

impl Syncobj<'_> {
    /// The handle on the device's file.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    fn ioctl_err(ioctl: &'static str) -> impl FnOnce(Errno) -> Error {
        move |source| Error::Ioctl { ioctl, source }
    }

    /// Signals it from userspace (`DRM_IOCTL_SYNCOBJ_SIGNAL`): it holds a
    /// signalled fence.
    pub fn signal(&self) -> Result<()> {
        let h = [self.handle];
        let mut a = raw::SyncobjArray {
            handles: h.as_ptr() as u64,
            count_handles: 1,
            pad: 0,
        };
        raw::syncobj_signal(&self.dev.fd, &mut a)
            .map_err(Self::ioctl_err("DRM_IOCTL_SYNCOBJ_SIGNAL"))
    }

    /// Signals timeline point `point` (`DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL`).
    pub fn signal_point(&self, point: u64) -> Result<()> {
        let (h, p) = ([self.handle], [point]);
        let mut a = raw::SyncobjTimelineArray {
            handles: h.as_ptr() as u64,
            points: p.as_ptr() as u64,
            count_handles: 1,
            flags: 0,
        };
        raw::syncobj_timeline_signal(&self.dev.fd, &mut a)
            .map_err(Self::ioctl_err("DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL"))
    }

    /// The timeline's last signalled point (`DRM_IOCTL_SYNCOBJ_QUERY`).
    pub fn query(&self) -> Result<u64> {
        let (h, mut p) = ([self.handle], [0u64]);
        let mut a = raw::SyncobjTimelineArray {
            handles: h.as_ptr() as u64,
            points: p.as_mut_ptr() as u64,
            count_handles: 1,
            flags: 0,
        };
        raw::syncobj_query(&self.dev.fd, &mut a)
            .map_err(Self::ioctl_err("DRM_IOCTL_SYNCOBJ_QUERY"))?;
        Ok(p[0])
    }

    /// Waits up to `timeout` for the fence at `point` (0: a binary
    /// syncobj's fence) to signal, waiting also for it to be submitted;
    /// `Ok(false)` when the time passed first.
    pub fn wait(&self, point: u64, timeout: std::time::Duration) -> Result<bool> {
        let (h, p) = ([self.handle], [point]);
        let deadline =
            monotonic_ns().saturating_add(i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX));
        let mut a = raw::SyncobjTimelineWait {
            handles: h.as_ptr() as u64,
            points: p.as_ptr() as u64,
            timeout_nsec: deadline,
            count_handles: 1,
            flags: raw::SYNCOBJ_WAIT_ALL | raw::SYNCOBJ_WAIT_FOR_SUBMIT,
            ..Default::default()
        };
        loop {
            match raw::syncobj_timeline_wait(&self.dev.fd, &mut a) {
                Ok(()) => return Ok(true),
                Err(Errno::TIME) => return Ok(false),
                Err(Errno::INTR) => continue,
                Err(source) => {
                    return Err(Error::Ioctl {
                        ioctl: "DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT",
                        source,
                    })
                }
            }
        }
    }

    /// The state of the fence at `point` (0 for binary), read through a
    /// sync file: the job's end status as an errno.
    pub fn fence_status(&self, point: u64) -> Result<FenceStatus> {
        let fd = self.export_sync_file(point)?;
        let mut info = raw::SyncFileInfo::default();
        raw::sync_file_info(&fd, &mut info).map_err(Self::ioctl_err("SYNC_IOC_FILE_INFO"))?;
        Ok(match info.status {
            0 => FenceStatus::Pending,
            s if s > 0 => FenceStatus::Signalled,
            e => FenceStatus::Error(Errno::from_raw_os_error(-e)),
        })
    }

    /// The fence at `point` as a sync file, which outlives this syncobj
    /// and its device file (poll it for POLLIN: signalled).
    pub fn export_sync_file(&self, point: u64) -> Result<OwnedFd> {
        let mut a = raw::SyncobjHandle {
            handle: self.handle,
            flags: raw::SYNCOBJ_HANDLE_TO_FD_EXPORT_SYNC_FILE,
            fd: -1,
            pad: 0,
            point,
        };
        raw::syncobj_handle_to_fd(&self.dev.fd, &mut a)
            .map_err(Self::ioctl_err("DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD"))?;
        // SAFETY: The kernel returned a new file descriptor we now own.
        Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(a.fd) })
    }
}

impl Drop for Syncobj<'_> {
    fn drop(&mut self) {
        let mut a = raw::SyncobjDestroy {
            handle: self.handle,
            pad: 0,
        };
        let _ = raw::syncobj_destroy(&self.dev.fd, &mut a);
    }
}

/// An EXEC's fences for [`Device::exec_after`]: the syncobjs (and timeline
/// points, 0 for binary) the job waits for, and the one its end signals.
#[derive(Debug, Default)]
pub struct Fences<'a, 'd> {
    /// In-fences: the job starts once all signalled (a failed one aborts it).
    pub wait: Vec<(&'a Syncobj<'d>, u64)>,
    /// Out-fence: signalled when the job ends.
    pub signal: Option<(&'a Syncobj<'d>, u64)>,
}

/// `DRM_IOCTL_VERSION`'s answer.
#[derive(Clone, Debug)]
pub struct Version {
    /// Major (the ABI version for `ane`).
    pub major: i32,
    /// Minor.
    pub minor: i32,
    /// Patch level.
    pub patchlevel: i32,
    /// Driver name.
    pub name: String,
    /// Description.
    pub desc: String,
}

/// Reads the DRM version of an open node.
pub fn version(fd: impl AsFd) -> std::result::Result<Version, Errno> {
    let mut name = [0u8; 64];
    let mut desc = [0u8; 128];
    let mut v = raw::DrmVersion {
        version_major: 0,
        version_minor: 0,
        version_patchlevel: 0,
        name_len: name.len(),
        name: name.as_mut_ptr(),
        date_len: 0,
        date: std::ptr::null_mut(),
        desc_len: desc.len(),
        desc: desc.as_mut_ptr(),
    };
    raw::version(&fd, &mut v)?;
    let text = |b: &[u8], len: usize| String::from_utf8_lossy(&b[..len.min(b.len())]).into_owned();
    Ok(Version {
        major: v.version_major,
        minor: v.version_minor,
        patchlevel: v.version_patchlevel,
        name: text(&name, v.name_len),
        desc: text(&desc, v.desc_len),
    })
}

/// Who is behind an accel node, judged from its `DRM_IOCTL_VERSION` alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// Name [`uapi::DRIVER_NAME`], major [`uapi::ABI_VERSION`]: this
    /// driver, to be confirmed by `DRM_ANE_PARAM_IDENT`.
    Ours,
    /// A driver of another name, no ANE driver known.
    NotAne,
    /// Name `ane`: another ANE driver (the eiln/omarchy-ane family); what
    /// reports it.
    Foreign(&'static str),
    /// Name [`uapi::DRIVER_NAME`] with a major this library does not
    /// speak (an incompatible UAPI).
    UnknownAbi,
}

/// Judges a node by its DRM version. No driver-private ioctl may be sent
/// before this says [`Identity::Ours`]: another `ane` driver gives our
/// ioctl numbers other meanings.
pub fn identify(v: &Version) -> Identity {
    if v.name == "ane" {
        return Identity::Foreign(match v.major {
            1 => "eiln/ane, omarchy-ane's ane.ko or an in-tree port of it such as Aurora's: their ABI 1, M1",
            2 => "omarchy-ane's ane_t6021.ko or an in-tree port of it: their ABI 2, M2",
            _ => "an ANE driver of the eiln/omarchy-ane family",
        });
    }
    if v.name != uapi::DRIVER_NAME {
        return Identity::NotAne;
    }
    if v.major == uapi::ABI_VERSION as i32 {
        Identity::Ours
    } else {
        Identity::UnknownAbi
    }
}

/// The rule by which eiln/omarchy-ane's libane (`is_ane_device()`) takes a
/// node for one of its own: name `ane`, major 1 (ABI 1) or 2 (ABI 2). Kept
/// here so tests can show that it refuses this driver's node.
pub fn eiln_omarchy_accepts(v: &Version) -> bool {
    v.name == "ane" && matches!(v.major, 1 | 2)
}

/// Opens `path` and reads its DRM version, nothing else.
pub fn node_version(path: impl AsRef<Path>) -> Result<Version> {
    let path = path.as_ref();
    let fd = rustix::fs::open(path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(
        |source| Error::Open {
            path: path.to_owned(),
            source,
        },
    )?;
    version(&fd).map_err(|source| Error::Ioctl {
        ioctl: "DRM_IOCTL_VERSION",
        source,
    })
}

/// Everything `DRM_ANE_GET_PARAM` reports, decoded.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Query {
    /// ABI version.
    pub abi_version: u64,
    /// Chip number (0x8103, ...).
    pub soc_id: u64,
    /// 13 or 14.
    pub generation: u64,
    /// A `uapi::backend` value.
    pub backend: u64,
    /// The kernel's page size.
    pub page_size: u64,
    /// First device address.
    pub iova_start: u64,
    /// One past the last.
    pub iova_end: u64,
    /// Largest BO.
    pub bo_max_size: u64,
    /// Cap on all BOs.
    pub bo_total_max: u64,
    /// Most bindings per EXEC.
    pub max_bindings: u64,
    /// Most steps per chained EXEC.
    pub max_chain: u64,
    /// Largest program.
    pub max_program_size: u64,
    /// A `uapi::fw_state` value.
    pub fw_state: u64,
    /// `uapi::feature` bits.
    pub features: u64,
}

/// An open ANE accel device.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
    path: PathBuf,
    version: Version,
}

/// Why [`open_first`] found no usable device.
#[derive(Debug)]
pub enum FirstError {
    /// No accel node of this driver in the directory.
    NoDevice {
        /// The directory searched.
        dir: PathBuf,
    },
    /// A node of this driver could not be used (the last such error).
    Unusable {
        /// The node.
        path: PathBuf,
        /// Why.
        source: Error,
    },
}

/// Opens the first accel node (`accel*`, in name order) of this driver in
/// `dir`: nodes of other drivers are skipped; when every `ane` node fails,
/// the last failure is returned.
pub fn open_first(dir: &Path) -> std::result::Result<Device, FirstError> {
    let mut nodes: Vec<PathBuf> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("accel"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    let mut last = None;
    for n in nodes {
        match Device::open(&n) {
            Ok(d) => return Ok(d),
            Err(Error::NotAne { .. }) => {}
            Err(source) => last = Some(FirstError::Unusable { path: n, source }),
        }
    }
    Err(last.unwrap_or_else(|| FirstError::NoDevice {
        dir: dir.to_owned(),
    }))
}

/// A slice length as the `u32` count field `field` of an ioctl argument, or
/// the error naming that field.
fn count_u32(n: usize, field: &'static str, reason: &'static str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Invalid {
        field,
        value: n as u64,
        reason,
    })
}
impl Device {
    /// Opens `path` and checks that it is an `ane` node of our ABI version.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let fd = rustix::fs::open(&path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(
            |source| Error::Open {
                path: path.clone(),
                source,
            },
        )?;
        let version = version(&fd).map_err(|source| Error::Ioctl {
            ioctl: "DRM_IOCTL_VERSION",
            source,
        })?;
        match identify(&version) {
            Identity::Ours => {}
            Identity::NotAne => {
                return Err(Error::NotAne {
                    path,
                    name: version.name,
                })
            }
            Identity::Foreign(what) => {
                return Err(Error::Foreign {
                    path,
                    major: version.major,
                    what,
                    desc: version.desc,
                })
            }
            Identity::UnknownAbi => {
                return Err(Error::Abi {
                    path,
                    got: version.major,
                    want: uapi::ABI_VERSION,
                })
            }
        }
        let dev = Self { fd, path, version };
        // Only now, with name and major ours, the first private ioctl.
        let found = match dev.get_param(param::IDENT) {
            Ok(uapi::IDENT_MAGIC) => return Ok(dev),
            Ok(v) => format!(
                "DRM_ANE_PARAM_IDENT is {v:#x}, not {:#x}",
                uapi::IDENT_MAGIC
            ),
            Err(e) => e.to_string(),
        };
        Err(Error::Ident {
            major: dev.version.major,
            path: dev.path,
            found,
        })
    }

    /// Opens the first `/dev/accel/accel*` node of this driver.
    pub fn discover() -> Result<Self> {
        let mut nodes: Vec<PathBuf> = fs::read_dir("/dev/accel")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("accel"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        nodes.sort();
        // Other drivers' nodes are skipped; an ANE node that fails (no
        // permission, another ANE driver, ABI mismatch) is the error
        // reported when no node of this driver is found.
        let mut last = Error::NoDevice;
        for node in nodes {
            match Self::open(&node) {
                Ok(d) => return Ok(d),
                Err(Error::NotAne { .. }) => {}
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The node's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The driver's version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// The file descriptor (for raw ioctls).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// One `DRM_ANE_GET_PARAM` value.
    pub fn get_param(&self, param: u32) -> Result<u64> {
        let mut a = uapi::GetParam {
            param,
            ..Default::default()
        };
        raw::get_param(&self.fd, &mut a).map_err(|source| Error::Ioctl {
            ioctl: "DRM_IOCTL_ANE_GET_PARAM",
            source,
        })?;
        Ok(a.value)
    }

    /// Every parameter.
    pub fn query(&self) -> Result<Query> {
        let p = |n| self.get_param(n);
        Ok(Query {
            abi_version: p(param::ABI_VERSION)?,
            soc_id: p(param::SOC_ID)?,
            generation: p(param::GENERATION)?,
            backend: p(param::BACKEND)?,
            page_size: p(param::PAGE_SIZE)?,
            iova_start: p(param::IOVA_START)?,
            iova_end: p(param::IOVA_END)?,
            bo_max_size: p(param::BO_MAX_SIZE)?,
            bo_total_max: p(param::BO_TOTAL_MAX)?,
            max_bindings: p(param::MAX_BINDINGS)?,
            max_chain: p(param::MAX_CHAIN)?,
            max_program_size: p(param::MAX_PROGRAM_SIZE)?,
            fw_state: p(param::FW_STATE)?,
            features: p(param::FEATURES)?,
        })
    }

    /// Creates a buffer object of at least `size` bytes.
    pub fn bo_create(&self, size: u64) -> Result<Bo<'_>> {
        if size == 0 {
            return Err(Error::Invalid {
                field: "size",
                value: 0,
                reason: "a buffer needs at least one byte",
            });
        }
        let mut a = uapi::BoCreate {
            size,
            ..Default::default()
        };
        raw::bo_create(&self.fd, &mut a).map_err(|source| Error::Ioctl {
            ioctl: "DRM_IOCTL_ANE_BO_CREATE",
            source,
        })?;
        // From here on the handle is owned: `Bo`'s drop closes it, also if
        // BO_INFO fails.
        let mut bo = Bo {
            dev: self,
            handle: a.handle,
            size: 0,
            iova: a.iova,
            mmap_offset: a.mmap_offset,
            map: None,
        };
        let mut info = uapi::BoInfo {
            handle: a.handle,
            ..Default::default()
        };
        raw::bo_info(&self.fd, &mut info).map_err(|source| Error::Ioctl {
            ioctl: "DRM_IOCTL_ANE_BO_INFO",
            source,
        })?;
        bo.size = info.size;
        Ok(bo)
    }
}

/// Bytes between the task stream and the weights of a program range: the
/// kernel finds the weights at `round_up(tsk_size, 16)`.
pub const WEIGHTS_ALIGN: u64 = 16;

/// Where a task stream and its weights go in the BO an H13 program is
/// created from. (The firmware backend, H14, never takes a task stream:
/// [`check_stream_backend`].)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staging {
    /// Bytes of the task stream, at offset 0.
    pub tsk_size: u64,
    /// Offset of the weights: `round_up(tsk_size, WEIGHTS_ALIGN)`.
    pub weights_offset: u64,
    /// Bytes of the whole range.
    pub size: u64,
}

impl Staging {
    /// The layout of a `stream_len`-byte stream and `weights_len` bytes of
    /// weights.
    pub fn new(stream_len: usize, weights_len: usize) -> Self {
        let tsk_size = stream_len as u64;
        let weights_offset = tsk_size.div_ceil(WEIGHTS_ALIGN) * WEIGHTS_ALIGN;
        let weights = weights_len as u64;
        Staging {
            tsk_size,
            weights_offset,
            size: weights_offset + weights,
        }
    }

    /// Copies `stream` and `weights` into `m` at their offsets; `m` must
    /// hold [`Self::size`] bytes.
    pub fn fill(&self, m: &mut [u8], stream: &[u8], weights: &[u8]) -> Result<()> {
        let short = || Error::Invalid {
            field: "size",
            value: self.size,
            reason: "the staging BO is smaller than the program",
        };
        let woff = self.weights_offset as usize;
        m.get_mut(..stream.len())
            .ok_or_else(short)?
            .copy_from_slice(stream);
        m.get_mut(woff..woff + weights.len())
            .ok_or_else(short)?
            .copy_from_slice(weights);
        Ok(())
    }
}

/// Why an H13 task stream is never handed to the T6021 firmware: the
/// record's firmware runs Apple-compiled H14 programs (omarchy-ane
/// `load_program`: six sections, ids 1-5 and 7; hw-2 T15) and nothing
/// records what it does with an H13 stream (at best a refusal that
/// quarantines the ANE until reboot).
pub const H13_ON_FIRMWARE: &str = "an H13 task stream is never sent to the T6021 firmware: it runs only Apple-compiled H14 programs that ran on hardware (omarchy-ane's published H14 fixtures); load one with Device::program_create_sections";

/// Refuses an H13 task stream (HWX, `.anec`, a builder cell) on the
/// firmware backend (`backend` is `DRM_ANE_PARAM_BACKEND`), naming the
/// field: `backend`.
pub fn check_stream_backend(backend: u64) -> Result<()> {
    if backend == uapi::backend::FIRMWARE {
        return Err(Error::Invalid {
            field: "backend",
            value: backend,
            reason: H13_ON_FIRMWARE,
        });
    }
    Ok(())
}

/// Why a section list is refused before it reaches the kernel: only the
/// shape of the programs that ran on the T6021 firmware is sent.
pub const H14_SECTIONS: &str = "an H14 program has exactly the sections 1, 2, 3, 4, 5 and 7 (generic, kernel, descriptor, operation, procedure, tdprop), as every program that ran on the T6021 firmware (omarchy-ane's loader); an H13 task stream as section 1 (and weights as 2) is not an H14 program";

/// Checks an H14 section list's ids (field `sections`, the value the ids
/// as a mask): exactly 1-5 and 7, each once.
pub fn check_h14_sections(sections: &[uapi::Section]) -> Result<()> {
    crate::hw::fw::program::check_ids(sections.iter().map(|s| s.id)).map_err(|e| {
        let mask = match e {
            crate::hw::fw::program::NotH14::Sections { mask } => u64::from(mask),
            _ => 0,
        };
        Error::Invalid {
            field: "sections",
            value: mask,
            reason: H14_SECTIONS,
        }
    })
}

/// A validated program held by the kernel; destroyed when dropped.
#[derive(Debug)]
pub struct Program<'d> {
    dev: &'d Device,
    handle: u32,
}

impl Program<'_> {
    /// The program handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        let mut a = uapi::ProgramDestroy {
            handle: self.handle,
            pad: 0,
        };
        let _ = raw::program_destroy(&self.dev.fd, &mut a);
    }
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    /// Completed.
    Done,
    /// The engine did not finish in time (it was recovered).
    Timeout,
    /// The engine reported an error; the detail is backend-specific.
    Fault(u64),
    /// It never ran to completion.
    Aborted,
}

/// The current `CLOCK_MONOTONIC` time in nanoseconds.
pub fn monotonic_ns() -> i64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec)
}

impl Device {
    /// Hands `size` bytes at `offset` of `bo` (task stream of `tsk_size`
    /// bytes, then the weights at `round_up(tsk_size, 16)`) to the kernel,
    /// which copies and validates them.
    pub fn program_create(
        &self,
        bo: &Bo<'_>,
        offset: u64,
        size: u64,
        td_size: u32,
        td_count: u32,
        tsk_size: u64,
    ) -> Result<Program<'_>> {
        let mut a = uapi::ProgramCreate {
            bo_handle: bo.handle,
            offset,
            size,
            td_size,
            td_count,
            tsk_size,
            ..Default::default()
        };
        self.create_program(&mut a)
    }

    /// Loads a compiled HWX program: its task stream and weights are laid
    /// out in a staging BO the way the kernel expects, then handed over.
    pub fn load_hwx(&self, hwx: &crate::hwx::Hwx) -> Result<Program<'_>> {
        self.load_stream(
            hwx.task_stream(),
            hwx.weights(),
            hwx.td_size(),
            hwx.td_count(),
        )
    }

    /// Stages an H13 task stream and its weights in a BO the way the
    /// kernel expects (weights at `round_up(tsk_size, 16)`) and creates the
    /// program. On the firmware backend (T6021) nothing is staged or sent:
    /// the stream is refused with [`H13_ON_FIRMWARE`], naming `backend`.
    fn load_stream(
        &self,
        stream: &[u8],
        weights: &[u8],
        td_size: u32,
        td_count: u32,
    ) -> Result<Program<'_>> {
        check_stream_backend(self.get_param(uapi::param::BACKEND)?)?;
        let layout = Staging::new(stream.len(), weights.len());
        let mut bo = self.bo_create(layout.size.max(1))?;
        let m = bo.map()?;
        layout.fill(m, stream, weights)?;
        let (size, tsk) = (layout.size, layout.tsk_size);
        self.program_create(&bo, 0, size, td_size, td_count, tsk)
    }

    /// PROGRAM_CREATE with `a`, whose handle the returned program owns.
    fn create_program(&self, a: &mut uapi::ProgramCreate) -> Result<Program<'_>> {
        raw::program_create(&self.fd, a).map_err(|source| Error::Ioctl {
            ioctl: "DRM_IOCTL_ANE_PROGRAM_CREATE",
            source,
        })?;
        Ok(Program {
            dev: self,
            handle: a.handle,
        })
    }

    /// Hands a program made of `sections` (offsets relative to `offset`)
    /// in `size` bytes at `offset` of `bo` to the firmware backend (H14).
    /// The section ids must be those of every program that ran on the
    /// T6021 firmware (1-5 and 7, [`check_h14_sections`]); the kernel
    /// also checks the descriptor section and refuses anything else with
    /// `ENOEXEC`.
    pub fn program_create_sections(
        &self,
        bo: &Bo<'_>,
        offset: u64,
        size: u64,
        sections: &[uapi::Section],
    ) -> Result<Program<'_>> {
        check_h14_sections(sections)?;
        let mut a = uapi::ProgramCreate {
            bo_handle: bo.handle,
            offset,
            size,
            sections: sections.as_ptr() as u64,
            section_count: count_u32(sections.len(), "section_count", "too many sections")?,
            section_size: std::mem::size_of::<uapi::Section>() as u32,
            ..Default::default()
        };
        self.create_program(&mut a)
    }

    /// Hands an H14 program read from its container ([`crate::h14`]) to
    /// the firmware backend: its six sections staged in one BO (the
    /// kernel keeps its own copies).
    pub fn load_h14(&self, p: &crate::h14::Program) -> Result<Program<'_>> {
        let (bytes, sections) = p.staging();
        let mut bo = self.bo_create(bytes.len() as u64)?;
        bo.map()?[..bytes.len()].copy_from_slice(&bytes);
        self.program_create_sections(&bo, 0, bytes.len() as u64, &sections)
    }

    /// The io buffers of an H14 program, zeroed, and their bindings (slot
    /// = buffer id, `IN` or `OUT`, the io table's size), in the io table's
    /// order. Each BO is one 16 KiB page larger than what is bound:
    /// omarchy-ane measured the engine reading and writing slightly past
    /// a surface's end (DART faults at the end of an output and at
    /// end + 0x100 of an input) and allocates that guard page behind
    /// every buffer (libane `ane_m2_guard`).
    pub fn bind_h14(&self, p: &crate::h14::Program) -> Result<(Vec<Bo<'_>>, Vec<uapi::Binding>)> {
        const GUARD: u64 = 0x4000;
        let mut bos = Vec::new();
        let mut bindings = Vec::new();
        for io in &p.io {
            let mut bo = self.bo_create(io.size + GUARD)?;
            bo.map()?.fill(0);
            bindings.push(uapi::Binding {
                slot: io.buffer_id,
                bo_handle: bo.handle,
                offset: 0,
                size: io.size,
                flags: match io.dir {
                    crate::h14::Dir::Input => uapi::bind::IN,
                    crate::h14::Dir::Output => uapi::bind::OUT,
                },
                pad: 0,
            });
            bos.push(bo);
        }
        Ok((bos, bindings))
    }

    /// The buffers a compiled HWX program needs, and the bindings that
    /// attach each to its slot, ready for [`Device::exec`]: first one BO
    /// per tensor, in tensor order, then one per further slot the task
    /// stream uses (scratch the descriptors write and read back, a slot
    /// only TBase names). Which slots, their flags (`IN` for a slot read,
    /// `OUT` for one written, both for scratch) and their minimum sizes
    /// come from the kernel's own TD validator ([`crate::program`]), so
    /// EXEC accepts the set; a tensor whose direction contradicts the task
    /// stream is refused here with its slot named.
    pub fn bind_hwx(&self, hwx: &crate::hwx::Hwx) -> Result<(Vec<Bo<'_>>, Vec<uapi::Binding>)> {
        let p = crate::program::ProgramFile::from_hwx(std::path::Path::new("hwx"), hwx)
            .map_err(|e| Error::Program(Box::new(e)))?;
        self.bind_file(&p)
    }

    /// Loads a program file (HWX or `.anec`, read by
    /// [`crate::program::ProgramFile`]).
    pub fn load_file(&self, p: &crate::program::ProgramFile) -> Result<Program<'_>> {
        let woff = usize::try_from(p.tsk_size.div_ceil(WEIGHTS_ALIGN) * WEIGHTS_ALIGN)
            .unwrap_or(usize::MAX);
        let stream = p.payload.get(..p.tsk_size as usize).unwrap_or(&[]);
        let weights = p.payload.get(woff..).unwrap_or(&[]);
        self.load_stream(stream, weights, p.td_size, p.td_count)
    }

    /// One BO per tensor of `p`, in [`crate::program::ProgramFile::tensors`]
    /// order, then one per scratch slot, and their bindings (every slot of
    /// [`crate::program::ProgramFile::bindings`], with its flags and size).
    pub fn bind_file(
        &self,
        p: &crate::program::ProgramFile,
    ) -> Result<(Vec<Bo<'_>>, Vec<uapi::Binding>)> {
        let order = (0..p.tensors.len())
            .filter_map(|i| p.bindings.iter().find(|b| b.tensor == Some(i)))
            .chain(p.bindings.iter().filter(|b| b.tensor.is_none()));
        let mut bos = Vec::new();
        let mut bindings = Vec::new();
        for b in order {
            let bo = self.bo_create(b.size)?;
            bindings.push(b.binding(bo.handle()));
            bos.push(bo);
        }
        Ok((bos, bindings))
    }

    /// Submits a job; returns its id.
    pub fn exec(
        &self,
        program: &Program<'_>,
        bindings: &[uapi::Binding],
        priority: u32,
    ) -> Result<u64> {
        let mut a = uapi::Exec {
            program: program.handle,
            priority,
            binding_count: count_u32(bindings.len(), "binding_count", "too many bindings")?,
            bindings: bindings.as_ptr() as u64,
            binding_size: std::mem::size_of::<uapi::Binding>() as u32,
            ..Default::default()
        };
        self.submit(&mut a)
    }

    /// A new syncobj on this file: holding a signalled fence if `signalled`,
    /// else empty (an empty one is no in-fence: EXEC refuses it).
    pub fn syncobj(&self, signalled: bool) -> Result<Syncobj<'_>> {
        let mut a = raw::SyncobjCreate {
            handle: 0,
            flags: if signalled {
                raw::SYNCOBJ_CREATE_SIGNALED
            } else {
                0
            },
        };
        raw::syncobj_create(&self.fd, &mut a).map_err(|source| Error::Ioctl {
            ioctl: "DRM_IOCTL_SYNCOBJ_CREATE",
            source,
        })?;
        Ok(Syncobj {
            dev: self,
            handle: a.handle,
        })
    }

    /// [`Device::exec`] with fences: the job waits for `fences.wait` (EXEC
    /// returns at once) and signals `fences.signal` when it ends. Needs
    /// driver minor 1.
    pub fn exec_after(
        &self,
        program: &Program<'_>,
        bindings: &[uapi::Binding],
        priority: u32,
        fences: &Fences<'_, '_>,
    ) -> Result<u64> {
        if self.version.minor < uapi::DRIVER_MINOR as i32 {
            return Err(Error::Invalid {
                field: "in_syncobjs",
                value: self.version.minor as u64,
                reason: "this kernel's ane driver predates EXEC fences (minor 1)",
            });
        }
        let ins: Vec<uapi::ExecSyncobj> = fences
            .wait
            .iter()
            .map(|(s, point)| uapi::ExecSyncobj {
                handle: s.handle,
                flags: 0,
                point: *point,
            })
            .collect();
        let (out_syncobj, out_point) = fences.signal.map_or((0, 0), |(s, p)| (s.handle, p));
        let mut a = uapi::Exec {
            program: program.handle,
            priority,
            binding_count: count_u32(bindings.len(), "binding_count", "too many bindings")?,
            bindings: bindings.as_ptr() as u64,
            binding_size: std::mem::size_of::<uapi::Binding>() as u32,
            in_syncobjs: if ins.is_empty() {
                0
            } else {
                ins.as_ptr() as u64
            },
            in_syncobj_count: count_u32(ins.len(), "in_syncobj_count", "too many in-fences")?,
            in_syncobj_size: if ins.is_empty() {
                0
            } else {
                std::mem::size_of::<uapi::ExecSyncobj>() as u32
            },
            out_syncobj,
            out_point,
            ..Default::default()
        };
        self.submit(&mut a)
    }

    /// Runs the EXEC `a` describes; the job id.
    fn submit(&self, a: &mut uapi::Exec) -> Result<u64> {
        raw::exec(&self.fd, a).map_err(|source| Error::Ioctl {
            ioctl: "DRM_IOCTL_ANE_EXEC",
            source,
        })?;
        Ok(a.job_id)
    }

    /// Submits a chain: the programs run back to back in the given order,
    /// each with its bindings, as one job (one id). A step may read what
    /// an earlier step wrote. At most `DRM_ANE_PARAM_MAX_CHAIN` steps.
    pub fn exec_chain(
        &self,
        steps: &[(&Program<'_>, &[uapi::Binding])],
        priority: u32,
    ) -> Result<u64> {
        if steps.is_empty() {
            return Err(Error::Invalid {
                field: "step_count",
                value: 0,
                reason: "a chain needs at least one program",
            });
        }
        let mut raw_steps = Vec::with_capacity(steps.len());
        for (i, (program, bindings)) in steps.iter().enumerate() {
            raw_steps.push(uapi::ExecStep {
                program: program.handle,
                binding_count: u32::try_from(bindings.len()).map_err(|_| Error::Invalid {
                    field: "steps[].binding_count",
                    value: i as u64,
                    reason: "too many bindings in this step",
                })?,
                bindings: bindings.as_ptr() as u64,
                binding_size: std::mem::size_of::<uapi::Binding>() as u32,
                pad: 0,
            });
        }
        let mut a = uapi::Exec {
            priority,
            steps: raw_steps.as_ptr() as u64,
            step_count: count_u32(raw_steps.len(), "step_count", "too many steps")?,
            step_size: std::mem::size_of::<uapi::ExecStep>() as u32,
            ..Default::default()
        };
        self.submit(&mut a)
    }

    /// Waits up to `timeout` for job `id`. `Ok(None)` when the time passed
    /// first (the job is still pending and can be waited for again).
    pub fn wait(&self, id: u64, timeout: std::time::Duration) -> Result<Option<JobStatus>> {
        Ok(self.wait_steps(id, timeout)?.map(|(s, _)| s))
    }

    /// [`Device::wait`], with the number of steps (programs) of the job
    /// that ended DONE: all of a chain that succeeded, those before the
    /// failed step otherwise.
    pub fn wait_steps(
        &self,
        id: u64,
        timeout: std::time::Duration,
    ) -> Result<Option<(JobStatus, u32)>> {
        let deadline =
            monotonic_ns().saturating_add(i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX));
        let mut a = uapi::Wait {
            job_id: id,
            timeout_ns: deadline,
            ..Default::default()
        };
        loop {
            match raw::wait(&self.fd, &mut a) {
                Ok(()) => break,
                Err(Errno::TIME) => return Ok(None),
                Err(Errno::INTR) => continue,
                Err(source) => {
                    return Err(Error::Ioctl {
                        ioctl: "DRM_IOCTL_ANE_WAIT",
                        source,
                    })
                }
            }
        }
        let status = match a.status {
            uapi::job_status::DONE => JobStatus::Done,
            uapi::job_status::TIMEOUT => JobStatus::Timeout,
            uapi::job_status::FAULT => JobStatus::Fault(a.fault),
            uapi::job_status::ABORTED => JobStatus::Aborted,
            other => {
                return Err(Error::Invalid {
                    field: "status",
                    value: u64::from(other),
                    reason: "unknown job status from the kernel",
                })
            }
        };
        Ok(Some((status, a.steps_done)))
    }
}

/// A buffer object; closes its handle (and unmaps) when dropped.
#[derive(Debug)]
pub struct Bo<'d> {
    dev: &'d Device,
    handle: u32,
    size: u64,
    iova: u64,
    mmap_offset: u64,
    map: Option<*mut c_void>,
}

// SAFETY: a `Bo` is a GEM handle, plain numbers and, once mapped, a private
// mapping of the BO. The mapping is reachable only through `map(&mut
// self)`, so a shared `&Bo` exposes no memory; moving a `Bo` to another
// thread moves the sole owner of the mapping and of the handle, which any
// thread may unmap and close. The `&Device` it holds is itself Send and
// Sync (an fd the kernel serializes ioctls on).
unsafe impl Send for Bo<'_> {}
// SAFETY: see `Send` above: `&Bo` gives no access to the mapping.
unsafe impl Sync for Bo<'_> {}

impl Bo<'_> {
    /// GEM handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Size in bytes (a multiple of the page size).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Device address.
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// The mmap offset on the device fd.
    pub fn mmap_offset(&self) -> u64 {
        self.mmap_offset
    }

    /// The buffer's memory, mapped on first use.
    pub fn map(&mut self) -> Result<&mut [u8]> {
        let len = usize::try_from(self.size).map_err(|_| Error::Invalid {
            field: "size",
            value: self.size,
            reason: "larger than the address space",
        })?;
        let ptr = match self.map {
            Some(p) => p,
            None => {
                // SAFETY: A fresh shared mapping of the BO's fake offset; the
                // kernel checks offset and length.
                let p = unsafe {
                    rustix::mm::mmap(
                        std::ptr::null_mut(),
                        len,
                        ProtFlags::READ | ProtFlags::WRITE,
                        MapFlags::SHARED,
                        &self.dev.fd,
                        self.mmap_offset,
                    )
                }
                .map_err(|source| Error::Mmap {
                    size: self.size,
                    source,
                })?;
                self.map = Some(p);
                p
            }
        };
        // SAFETY: The mapping is `len` bytes, lives until `self` is dropped
        // and is only reachable through this exclusive borrow.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
    }
}

impl Drop for Bo<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.map.take() {
            // SAFETY: `p` is our mapping of `size` bytes; no slice of it
            // outlives `self`.
            let _ = unsafe { rustix::mm::munmap(p, self.size as usize) };
        }
        let mut c = raw::GemClose {
            handle: self.handle,
            pad: 0,
        };
        let _ = raw::gem_close(&self.dev.fd, &mut c);
    }
}

impl Device {
    /// Loads a program made by [`crate::builder`]: its task stream and
    /// weights are laid out in a staging BO as [`Device::load_hwx`] does
    /// (weights at `round_up(tsk_size, 16)`), then handed over.
    pub fn load_program(&self, p: &crate::builder::Program) -> Result<Program<'_>> {
        self.load_stream(&p.tsk, &p.weights, p.td_size, p.td_count)
    }

    /// One BO per tensor slot of a built program, in [`crate::builder::Program::tensors`]
    /// order, and the bindings that attach each to its slot: inputs `IN`,
    /// outputs `OUT`, the scratch slot (written, then read back by a later
    /// TD) `IN | OUT`, as EXEC requires of a slot used both ways.
    pub fn bind_program(
        &self,
        p: &crate::builder::Program,
    ) -> Result<(Vec<Bo<'_>>, Vec<uapi::Binding>)> {
        let mut bos = Vec::new();
        let mut bindings = Vec::new();
        for t in &p.tensors {
            let bo = self.bo_create(t.buffer_size)?;
            bindings.push(tensor_binding(t, &bo));
            bos.push(bo);
        }
        Ok((bos, bindings))
    }
}

/// The binding of tensor slot `t` of a built program to `bo` (offset 0,
/// `t.buffer_size` bytes), with the direction flags
/// [`Device::bind_program`] uses. It lets a caller bind a BO it already
/// holds, such as an earlier program's output, to a later program's input
/// ([`crate::mlp`] chains two layers this way, without a copy).
pub fn tensor_binding(t: &crate::builder::TensorSlot, bo: &Bo<'_>) -> uapi::Binding {
    use crate::builder::Direction;
    uapi::Binding {
        slot: t.slot,
        bo_handle: bo.handle(),
        offset: 0,
        size: t.buffer_size,
        flags: match t.direction {
            Direction::In => uapi::bind::IN,
            Direction::Out => uapi::bind::OUT,
            Direction::Scratch => uapi::bind::IN | uapi::bind::OUT,
        },
        pad: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device, its buffers and programs can be shared between threads
    /// (the Python binding's classes are used from several).
    #[test]
    fn handles_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Device>();
        send_sync::<Bo<'static>>();
        send_sync::<Program<'static>>();
    }

    /// An H13 task stream is refused on the firmware backend, with the
    /// field named and why; the host-driven backend takes it.
    #[test]
    fn an_h13_stream_is_refused_on_the_firmware_backend() {
        let e = check_stream_backend(uapi::backend::FIRMWARE).unwrap_err();
        match &e {
            Error::Invalid { field, reason, .. } => {
                assert_eq!(*field, "backend");
                assert!(
                    reason.contains("never sent to the T6021 firmware"),
                    "{reason}"
                );
            }
            e => panic!("{e:?}"),
        }
        check_stream_backend(uapi::backend::HOST_DRIVEN).unwrap();
    }

    /// The section ids of an H14 program are checked before the ioctl:
    /// an H13 stream staged as sections 1 and 2 is refused, naming
    /// `sections`; the recorded six pass.
    #[test]
    fn an_h13_stream_as_sections_is_refused() {
        let s = |ids: &[u32]| -> Vec<uapi::Section> {
            ids.iter()
                .map(|&id| uapi::Section {
                    id,
                    flags: 0,
                    offset: 0,
                    size: 16,
                })
                .collect()
        };
        match check_h14_sections(&s(&[1, 2])).unwrap_err() {
            Error::Invalid {
                field,
                value,
                reason,
            } => {
                assert_eq!((field, value), ("sections", 0b110));
                assert!(reason.contains("1, 2, 3, 4, 5 and 7"), "{reason}");
            }
            e => panic!("{e:?}"),
        }
        check_h14_sections(&s(&[1, 2, 3, 4, 5, 7])).unwrap();
    }

    #[test]
    fn staging_layout() {
        let l = Staging::new(100, 10);
        assert_eq!((l.tsk_size, l.weights_offset, l.size), (100, 112, 122));
        let mut m = vec![0xAAu8; 122];
        l.fill(&mut m, &[1; 100], &[2; 10]).unwrap();
        assert!(m[..100].iter().all(|&b| b == 1));
        assert!(
            m[100..112].iter().all(|&b| b == 0xAA),
            "the gap is left alone"
        );
        assert!(m[112..].iter().all(|&b| b == 2));
        assert!(l.fill(&mut m[..121], &[1; 100], &[2; 10]).is_err());
        let l = Staging::new(32, 0);
        assert_eq!((l.weights_offset, l.size), (32, 32));
    }

    fn v(name: &str, major: i32) -> Version {
        Version {
            major,
            minor: 0,
            patchlevel: 0,
            name: name.into(),
            desc: "Apple Neural Engine".into(),
        }
    }

    /// What this driver reports (`ane_drv.rs`: name `uapi::DRIVER_NAME`,
    /// major `uapi::ABI_VERSION`).
    fn ours() -> Version {
        v(uapi::DRIVER_NAME, uapi::ABI_VERSION as i32)
    }

    #[test]
    fn their_rule_refuses_our_node() {
        // eiln/omarchy-ane's libane must not take our node for theirs...
        assert!(!eiln_omarchy_accepts(&ours()));
        // ...while it does take theirs (the rule is emulated faithfully).
        assert!(eiln_omarchy_accepts(&v("ane", 1)));
        assert!(eiln_omarchy_accepts(&v("ane", 2)));
        assert!(!eiln_omarchy_accepts(&v("ivpu", 1)));
    }

    #[test]
    fn we_refuse_their_nodes() {
        assert_eq!(identify(&ours()), Identity::Ours);
        for major in [1, 2] {
            assert!(
                matches!(identify(&v("ane", major)), Identity::Foreign(_)),
                "major {major}"
            );
        }
        // Any "ane" node is another driver's, whatever its major (the
        // major 100 this driver once reported under that name included).
        for major in [0, 3, 100] {
            assert!(
                matches!(identify(&v("ane", major)), Identity::Foreign(_)),
                "major {major}"
            );
        }
        assert_eq!(
            identify(&v(uapi::DRIVER_NAME, uapi::ABI_VERSION as i32 + 1)),
            Identity::UnknownAbi
        );
        assert_eq!(identify(&v(uapi::DRIVER_NAME, 0)), Identity::UnknownAbi);
        assert_eq!(identify(&v("ivpu", 1)), Identity::NotAne);
        assert_eq!(identify(&v("ane-fw", 1)), Identity::NotAne);
        // No version both rules accept: the two families never meet.
        for name in ["ane", uapi::DRIVER_NAME] {
            for major in -1..=300 {
                let x = v(name, major);
                assert!(!(eiln_omarchy_accepts(&x) && identify(&x) == Identity::Ours));
            }
        }
    }

    #[test]
    fn foreign_message_names_what_it_found() {
        let Identity::Foreign(what) = identify(&v("ane", 1)) else {
            panic!()
        };
        let e = Error::Foreign {
            path: "/dev/accel/accel0".into(),
            major: 1,
            what,
            desc: "Apple Neural Engine".into(),
        };
        let m = e.to_string();
        assert!(
            m.starts_with(
                "/dev/accel/accel0 is an 'ane' device with DRM major 1 (eiln/ane, omarchy-ane"
            ),
            "{m}"
        );
        assert!(m.ends_with("not this driver"), "{m}");
    }
}
