// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Options and steps the commands share: `run` and `bench` submit a
//! program ([`JobArgs`]); `parity` and `mlp` check on a device or the host
//! engine model ([`TargetArgs`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ane::device::Device;
use ane::hw::uapi;
use clap::{Args, ValueEnum};

use crate::exit::Error;
use crate::receipt::{self, DeviceInfo};
use crate::session::open_device;

/// Global options every command sees.
pub struct Ctx {
    /// `--json`.
    pub json: bool,
    /// `--root` (or `/`).
    pub root: PathBuf,
}

/// `--priority`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Priority {
    /// Background work.
    Low,
    /// The default.
    Normal,
    /// Latency-sensitive work.
    High,
}

impl Priority {
    /// The UAPI value.
    pub fn uapi(self) -> u32 {
        match self {
            Priority::Low => uapi::priority::LOW,
            Priority::Normal => uapi::priority::NORMAL,
            Priority::High => uapi::priority::HIGH,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        }
    }
}

/// The program and how to submit it.
#[derive(Args, Debug)]
pub struct JobArgs {
    /// Compiled program: an HWX file or an eiln `.anec` file.
    #[arg(long, value_name = "FILE")]
    pub program: PathBuf,
    /// Accel node to use [default: the first node of the ane driver].
    #[arg(long, value_name = "NODE")]
    pub device: Option<PathBuf>,
    /// Run on the host engine model instead of a device (works on any
    /// machine; timings are the model's, not the engine's).
    #[arg(long, conflicts_with = "device")]
    pub model: bool,
    /// Scheduling priority of the jobs.
    #[arg(long, value_enum, default_value_t = Priority::Normal)]
    pub priority: Priority,
    /// How long to wait for each job before giving up.
    #[arg(long, value_name = "N", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub timeout_ms: u64,
}

impl JobArgs {
    /// `--timeout-ms` as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// Where `parity` and `mlp` run: the host engine model or a device.
#[derive(Args, Debug)]
pub struct TargetArgs {
    /// Run on the host engine model instead of a device (works anywhere).
    #[arg(long)]
    pub model: bool,
    /// Accel node to use [default: the first node of the ane driver].
    #[arg(long, value_name = "NODE", conflicts_with = "model")]
    pub device: Option<PathBuf>,
    /// How long to wait for each job.
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub timeout_ms: u64,
}

impl TargetArgs {
    /// `--timeout-ms` as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Opens the device (`--device`, or the first node of the driver) and
    /// describes it for the report.
    pub fn open(&self, ctx: &Ctx) -> Result<(Device, DeviceInfo), Error> {
        let dev = open_device(&ctx.root, self.device.as_deref())?;
        let info = receipt::device_info(&dev, &dev.query()?);
        Ok((dev, info))
    }
}

/// Refuses an output path whose directory does not exist, before any job
/// runs (so a typo does not cost a run).
pub fn check_writable(what: String, path: &Path) -> Result<(), Error> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(Error::Write {
            what,
            path: path.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("directory {} does not exist", dir.display()),
            ),
        })
    }
}
