// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe`: inspect and exercise the Apple Neural Engine.
//!
//! Commands:
//!
//! - `info`: the machine, device tree, module and accel nodes (read-only).
//! - `run --program FILE --in SLOT=FILE … [--out SLOT=FILE …]
//!   [--expect SLOT=FILE …]`: one inference of a compiled program (HWX or
//!   eiln `.anec`). Tensor files are dense little-endian fp16 NCHW arrays
//!   (`N·C·H·W·2` bytes, no header) or `.npy` files of `<f2` data; SLOT is
//!   a BAR slot number or a tensor name.
//! - `bench --program FILE [-n RUNS] [--warmup N] [--receipt PATH]`: timed
//!   EXEC+WAIT runs on seeded random inputs, latency percentiles and a JSON
//!   receipt (see [`receipt`]).
//!
//! `--json` (any command) prints one JSON object instead of text. A
//! progress bar is drawn on stderr during `bench` when stderr is a terminal
//! and `--json` is not given.
//!
//! Exit codes ([`exit`]): 0 success, 1 mismatch or device failure (ioctl
//! failure, job timeout or fault), 2 usage error or nothing to probe (bad
//! arguments or files, no usable device; clap's usage errors included).

use std::path::PathBuf;
use std::process::ExitCode;

use ane::system::{self, SysRoot, SystemInfo};
use clap::{Parser, Subcommand};

mod bench;
mod common;
mod exit;
mod npy;
mod program;
mod progress;
mod receipt;
mod run;
mod session;
mod slots;
mod stats;

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Read /proc, /sys and /dev below this directory instead of `/`.
    #[arg(long, global = true, value_name = "DIR", hide = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe the machine, device tree, module and accel nodes (read-only).
    Info,
    /// Run a compiled program (HWX or .anec) once on given inputs.
    Run(run::RunArgs),
    /// Time repeated runs of a compiled program and write a receipt.
    Bench(bench::BenchArgs),
}

fn print_info(info: &SystemInfo) {
    println!(
        "kernel:        {}",
        info.kernel.as_deref().unwrap_or("unknown")
    );
    match &info.device_tree {
        None => println!("device tree:   none (not a device-tree machine)"),
        Some(dt) => {
            println!(
                "model:         {}",
                dt.model.as_deref().unwrap_or("unknown")
            );
            println!("compatible:    {}", dt.compatible.join(", "));
            println!(
                "soc:           {}",
                dt.soc.as_deref().unwrap_or("not supported by ane")
            );
            if dt.ane_nodes.is_empty() {
                println!("ane dt node:   none (install the overlay for this SoC)");
            }
            for n in &dt.ane_nodes {
                println!(
                    "ane dt node:   {} [{}] status={} {}",
                    n.path,
                    n.compatible.join(", "),
                    n.status,
                    if n.supported {
                        "supported"
                    } else {
                        "unsupported compatible"
                    }
                );
            }
        }
    }
    let m = &info.module;
    if m.loaded {
        println!(
            "module:        loaded ({})",
            m.version.as_deref().unwrap_or("no version")
        );
    } else {
        println!("module:        not loaded");
    }
    for d in &m.bound {
        println!(
            "bound device:  {} runtime-pm={}",
            d.name,
            d.runtime_status.as_deref().unwrap_or("n/a")
        );
    }
    if m.loaded && m.bound.is_empty() {
        println!("bound device:  none");
    }
    for a in &info.accel_nodes {
        println!(
            "accel node:    {} driver={} mode={:04o} uid={} gid={}",
            a.path,
            a.driver.as_deref().unwrap_or("?"),
            a.mode,
            a.uid,
            a.gid
        );
    }
    if info.accel_nodes.is_empty() {
        println!("accel node:    none");
    }
}

fn info(ctx: &common::Ctx) -> Result<u8, exit::Error> {
    let info = system::system_info(&SysRoot::new(&ctx.root))?;
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print_info(&info);
    }
    Ok(exit::OK)
}

fn main() -> ExitCode {
    // clap exits with 2 on usage errors (and 0 for --help/--version).
    let cli = Cli::parse();
    let ctx = common::Ctx {
        json: cli.json,
        root: cli.root.unwrap_or_else(|| PathBuf::from("/")),
    };
    let result = match &cli.command {
        Command::Info => info(&ctx),
        Command::Run(args) => run::run(&ctx, args),
        Command::Bench(args) => bench::bench(&ctx, args),
    };
    match result {
        Ok(code) => exit::exit(code),
        Err(e) => exit::report(&e),
    }
}
