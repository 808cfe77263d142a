// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe`: inspect and exercise the Apple Neural Engine.
//!
//! Exit codes: 0 success, 1 mismatch or device failure, 2 usage error or
//! nothing to probe.

use std::process::ExitCode;

use ane::system::{self, SysRoot, SystemInfo};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Read /proc, /sys and /dev below this directory instead of `/`.
    #[arg(long, global = true, value_name = "DIR", hide = true)]
    root: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe the machine, device tree, module and accel nodes (read-only).
    Info,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = cli.root.map(SysRoot::new).unwrap_or_default();
    match cli.command {
        Command::Info => match system::system_info(&root) {
            Ok(info) => {
                if cli.json {
                    match serde_json::to_string_pretty(&info) {
                        Ok(s) => println!("{s}"),
                        Err(e) => {
                            eprintln!("ane-probe: cannot encode JSON: {e}");
                            return ExitCode::from(1);
                        }
                    }
                } else {
                    print_info(&info);
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ane-probe: {e}");
                ExitCode::from(2)
            }
        },
    }
}
