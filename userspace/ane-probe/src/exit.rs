// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Exit codes, in one place.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | output differs or device failure: an ioctl failed, a job timed out, faulted or was aborted, outputs differ from what was expected (or between runs), a parity cell or an MLP layer beyond its bound |
//! | 2 | usage error: bad arguments (an unknown parity cell, MLP dimensions the builder refuses, `--in`/`--out` that do not fit the program), unreadable files (the program file too), a malformed firmware container |
//! | 3 | program invalid: the compiled program is malformed, the host engine model cannot run it, or the kernel's validator refused it (PROGRAM_CREATE `EINVAL`); `compile`: the model cannot be compiled (an unsupported node, named) |
//! | 4 | no device: no usable ANE accel node (none, not ours, another ABI, no permission), without `--model` |
//!
//! clap's own usage errors also exit with 2 (clap's default, checked by the
//! CLI tests).

use std::path::PathBuf;
use std::process::ExitCode;

use ane::device;

use crate::program::ProgramError;
use crate::slots::SlotError;

/// Success.
pub const OK: u8 = 0;
/// Mismatch or device failure.
pub const FAILURE: u8 = 1;
/// Usage error.
pub const USAGE: u8 = 2;
/// The compiled program is invalid.
pub const PROGRAM_INVALID: u8 = 3;
/// No usable device.
pub const NO_DEVICE: u8 = 4;

/// The table above, for the top-level `--help`; each command's `--help`
/// lists only the codes it can return (the constants below).
pub const HELP: &str = "Exit codes (each command's --help lists the ones it returns):
  0  success
  1  output differs, a check failed, or the device failed (ioctl error, job timeout or fault)
  2  usage error (bad arguments, unreadable files)
  3  program invalid (malformed, refused by the kernel's validator, or not supported by the host engine model), or a model compile refuses (the node named)
  4  no usable ANE device (run, bench, parity and mlp: use --model to run on the host engine model)";

/// `run` and `bench`.
pub const HELP_JOB: &str = "Exit codes:
  0  success
  1  output differs, or the device failed (ioctl error, job timeout or fault)
  2  usage error (bad arguments, unreadable files)
  3  program invalid (malformed, refused by the kernel's validator, or not supported by the host engine model)
  4  no usable ANE device (use --model to run on the host engine model)";

/// `parity` and `mlp`.
pub const HELP_CHECK: &str = "Exit codes:
  0  every result within its bound
  1  a result beyond its bound, or the device failed
  2  usage error (bad arguments)
  4  no usable ANE device (use --model to run on the host engine model)";

/// `doctor`.
pub const HELP_DOCTOR: &str = "Exit codes:
  0  every rung passed
  1  a rung failed (the output names it and the next step)
  2  usage error (bad arguments, a receipt that cannot be written, a file under /proc or /sys that exists but cannot be read)";

/// `firmware`.
pub const HELP_FIRMWARE: &str = "Exit codes:
  0  the pinned T6021 firmware (installed with --out)
  1  not the pinned firmware (nothing is written)
  2  usage error (unreadable file, malformed container)";

/// `info`.
pub const HELP_INFO: &str = "Exit codes:
  0  the machine described
  2  a file under /proc or /sys that exists cannot be read";

/// Everything that ends a command early. Each variant knows its exit code
/// ([`Error::code`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `--in`/`--out`/`--expect` argument does not fit the program.
    #[error(transparent)]
    Slot(#[from] SlotError),
    /// The program file is unreadable or malformed.
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// A file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// What the file is ("input file for slot 5", ...).
        what: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be created or written.
    #[error("cannot write {what} {path}: {source}")]
    Write {
        /// What the file is.
        what: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The system could not be inspected.
    #[error(transparent)]
    System(#[from] ane::system::Error),
    /// No accel node of the `ane` driver below the root.
    #[error("no ANE accel device found under {dir} (is the ane module loaded and bound?)")]
    NoDevice {
        /// The directory searched.
        dir: PathBuf,
    },
    /// A node that cannot be used as an ANE device (not a DRM node,
    /// another driver, another ABI, no permission).
    #[error("{path} is not a usable ANE device: {source}")]
    Unusable {
        /// The node.
        path: PathBuf,
        /// Why.
        source: device::Error,
    },
    /// Opening the device or an ioctl failed.
    #[error("{0}")]
    Device(#[from] device::Error),
    /// A job did not end with DONE.
    #[error("job {job} {status}")]
    Job {
        /// The job id.
        job: u64,
        /// How it ended, in words.
        status: String,
    },
    /// JSON encoding failed.
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// `parity --cells` names a cell that does not exist.
    #[error("unknown parity cell '{name}' (--cells); valid cells: {valid}")]
    UnknownCell {
        /// The name given.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// `parity --h13-program`: a file the hardware record does not pin
    /// (or that cannot be read); nothing was run.
    #[error("{0}")]
    Unrecorded(String),
    /// `mlp`'s dimensions cannot be built (names the argument and value).
    #[error("mlp: {0}")]
    Mlp(#[from] ane::mlp::MlpError),
    /// A firmware container that cannot be unwrapped.
    #[error("firmware: {0}")]
    Firmware(String),
    /// The host engine model cannot lay out the program (`--model`).
    #[error("{0}")]
    Model(String),
    /// The host engine model refused to execute the program: something it
    /// does not model, or a program that is wrong for it. Never a device
    /// failure.
    #[error("program not supported by the model: {0}")]
    ModelRefused(ane::hw::engine::EngineError),
    /// `compile`: the model cannot be compiled (or the target is out of
    /// scope).
    #[error("compile: {0}")]
    Compile(#[from] ane::compiler::CompileError),
}

impl Error {
    /// The process exit code for this error.
    pub fn code(&self) -> u8 {
        match self {
            Error::Slot(_)
            | Error::Read { .. }
            | Error::Write { .. }
            | Error::System(_)
            | Error::UnknownCell { .. }
            | Error::Unrecorded(_)
            | Error::Mlp(_)
            | Error::Firmware(_) => USAGE,
            Error::Program(ProgramError::Read { .. }) => USAGE,
            Error::Program(_) | Error::Model(_) | Error::ModelRefused(_) => PROGRAM_INVALID,
            Error::NoDevice { .. } | Error::Unusable { .. } => NO_DEVICE,
            // A device that is there but cannot be used by us (no
            // permission, another driver, another ABI) is no device; the
            // kernel refusing a program is an invalid program; any other
            // failing ioctl on an open device is a device failure.
            Error::Device(e) => match e {
                device::Error::NoDevice
                | device::Error::Open { .. }
                | device::Error::NotAne { .. }
                | device::Error::Foreign { .. }
                | device::Error::Abi { .. }
                | device::Error::Ident { .. } => NO_DEVICE,
                device::Error::Ioctl {
                    ioctl: "DRM_IOCTL_ANE_PROGRAM_CREATE",
                    source,
                } if *source == rustix::io::Errno::INVAL => PROGRAM_INVALID,
                device::Error::Program(_) => PROGRAM_INVALID,
                device::Error::Ioctl { .. }
                | device::Error::Invalid { .. }
                | device::Error::Mmap { .. } => FAILURE,
            },
            Error::Job { .. } | Error::Json(_) => FAILURE,
            Error::Compile(ane::compiler::CompileError::Target(_)) => USAGE,
            Error::Compile(_) => PROGRAM_INVALID,
        }
    }
}

/// Converts a code from this module into an [`ExitCode`].
pub fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// Reports `e` on stderr and returns its exit code.
pub fn report(e: &Error) -> ExitCode {
    eprintln!("ane-probe: {e}");
    exit(e.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::io::Errno;

    #[test]
    fn codes() {
        assert_eq!(Error::NoDevice { dir: "/x".into() }.code(), NO_DEVICE);
        assert_eq!(Error::Device(device::Error::NoDevice).code(), NO_DEVICE);
        assert_eq!(Error::Model("refused".into()).code(), PROGRAM_INVALID);
        let refused =
            Error::ModelRefused(ane::hw::engine::EngineError::TdTooLarge { td_size: 0x1000 });
        assert_eq!(refused.code(), PROGRAM_INVALID);
        assert_eq!(
            crate::receipt::Verdict::of_error(&refused),
            crate::receipt::Verdict::NotSupportedByModel
        );
        assert_eq!(
            crate::receipt::Verdict::of_error(&refused).code(),
            PROGRAM_INVALID
        );
        assert!(refused
            .to_string()
            .starts_with("program not supported by the model: TD size 0x1000"));
        assert_eq!(
            Error::Device(device::Error::Ioctl {
                ioctl: "DRM_IOCTL_ANE_PROGRAM_CREATE",
                source: Errno::INVAL
            })
            .code(),
            PROGRAM_INVALID
        );
        assert_eq!(
            Error::Device(device::Error::Ioctl {
                ioctl: "DRM_IOCTL_ANE_PROGRAM_CREATE",
                source: Errno::NOMEM
            })
            .code(),
            FAILURE
        );
        assert_eq!(
            Error::Device(device::Error::Ioctl {
                ioctl: "DRM_IOCTL_ANE_EXEC",
                source: Errno::INVAL
            })
            .code(),
            FAILURE
        );
        assert_eq!(
            Error::Job {
                job: 1,
                status: "timed out".into()
            }
            .code(),
            FAILURE
        );
        assert_eq!(
            Error::Slot(SlotError::Missing {
                missing: "5=image".into()
            })
            .code(),
            USAGE
        );
    }
}
