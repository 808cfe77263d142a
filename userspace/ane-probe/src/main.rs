// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe`: inspect and exercise the Apple Neural Engine.
//!
//! Commands:
//!
//! - `info`: the machine, device tree (with each ANE node's compatible
//!   origin), module, bound devices (runtime PM, power domains through
//!   their genpd device links and `pm_genpd_summary` when readable) and
//!   accel nodes (firmware state, engine state and completion mode from
//!   GET_PARAM, or why the node cannot be opened). Read-only: it never
//!   touches a register.
//! - `compile MODEL.onnx -o MODEL.anec [--target h13]`: the open
//!   compiler ([`ane::compiler`]); an unsupported node exits with 3 and
//!   names the node, `--target t6021` is refused (out of scope).
//! - `run --program FILE --in SLOT=FILE … [--out SLOT=FILE …]
//!   [--expect SLOT=FILE …]`: one inference of a compiled program (HWX or
//!   eiln `.anec`). Tensor files are dense little-endian fp16 NCHW arrays
//!   (`N·C·H·W·2` bytes, no header) or `.npy` files of `<f2` data; SLOT is
//!   a BAR slot number or a tensor name.
//! - `bench --program FILE [-n RUNS] [--warmup N] [--receipt PATH]`: timed
//!   EXEC+WAIT runs on seeded random inputs, latency percentiles and a JSON
//!   receipt (see [`receipt`]).
//! - `parity [--model] [--cells NAME,…] [--device NODE]`: the parity
//!   cells ([`ane::parity`]) on the device or, with `--model`, on the host
//!   engine model; a table `cell | shape | max ulp | mismatches | verdict`.
//! - `mlp [--model] [--in N] [--hidden N] [--out N] [--batch N] [--seed N]`:
//!   `y = W2·relu(W1·x)` as two built programs chained through one
//!   resident buffer, graded against the CPU reference ([`ane::mlp`]).
//! - `firmware [--ipsw] FILE [--out PATH]`: checks the user's T6021
//!   firmware (their macOS 13.5 restore image with `--ipsw`, the `.im4p`
//!   member of it, or its payload) against
//!   the driver's pin and installs it with `--out`; exit 1 when it is not
//!   the pinned image.
//!
//! - `doctor [--receipt FILE]`: the first-contact ladder, from "is this
//!   Mac supported, and by which path" to the parity cells ([`doctor`]).
//!
//! `--json` (any command) prints one JSON object instead of text, which
//! starts with the same head (`schema` = `ane-probe/<command>`,
//! `schema_version`, `tool`, `timestamp`: [`receipt::Head`]). A
//! progress bar is drawn on stderr during `bench` and `parity` when stderr
//! is a terminal and `--json` is not given.
//!
//! Exit codes ([`exit`]; each command's `--help` lists the ones it
//! returns): 0 success, 1 output differs or
//! device failure (ioctl failure, job timeout or fault, a parity cell or
//! MLP layer beyond its bound), 2 usage error (bad arguments or files, an
//! unknown parity cell; clap's usage errors included), 3 program invalid,
//! 4 no usable device (without `--model`).

use std::path::PathBuf;
use std::process::ExitCode;

use ane::system::{self, SysRoot, SystemInfo};
use clap::{Parser, Subcommand};

mod bench;
mod common;
mod compile;
mod doctor;
mod exit;
mod firmware;
mod ipsw;
mod mlp;
mod npy;
mod observe;
mod parity;
mod program;
mod progress;
mod receipt;
mod run;
mod session;
mod slots;
mod stats;

#[derive(Parser)]
#[command(version, about, after_help = exit::HELP)]
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
    #[command(after_help = exit::HELP_INFO)]
    Info,
    /// The first-contact ladder: is this Mac supported (and by which
    /// path), kernel, module, device-tree node, accel node, firmware (M2
    /// Pro/Max), one tiny job, the parity cells; each rung with its verdict
    /// and next step, and a JSON receipt.
    #[command(after_help = exit::HELP_DOCTOR)]
    Doctor(doctor::DoctorArgs),
    /// Compile an ONNX model to an H13 program (.anec).
    #[command(after_help = compile::AFTER_HELP)]
    Compile(compile::CompileArgs),
    /// Run a compiled program (HWX or .anec) once on given inputs.
    #[command(after_help = exit::HELP_JOB)]
    Run(run::RunArgs),
    /// Time repeated runs of a compiled program and write a receipt.
    #[command(after_help = exit::HELP_JOB)]
    Bench(bench::BenchArgs),
    /// Run the parity cells on the device (or the engine model) against
    /// the CPU reference.
    #[command(after_help = exit::HELP_CHECK)]
    Parity(parity::ParityArgs),
    /// Run a two-layer MLP chained through a resident buffer against the
    /// CPU reference.
    #[command(after_help = exit::HELP_CHECK)]
    Mlp(mlp::MlpArgs),
    /// Check the T6021 firmware (the .im4p from your macOS 13.5 restore
    /// image, or its Mach-O payload) against the driver's pin; install it
    /// with --out.
    #[command(after_help = exit::HELP_FIRMWARE)]
    Firmware(firmware::FirmwareArgs),
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
                println!(
                    "  origin:      {}{}",
                    match n.origin.compatible_source {
                        "kernel-tree" => "compatible shipped by the kernel tree",
                        "project-overlay" =>
                            "compatible of this project's overlays (the kernel tree ships no ANE node)",
                        _ => "compatible of unknown origin (neither the kernel tree's nor this project's)",
                    },
                    if n.origin.symbols.is_empty() {
                        String::new()
                    } else {
                        format!("; /__symbols__ labels: {}", n.origin.symbols.join(", "))
                    }
                );
            }
            if !dt.overlay_traces.is_empty() {
                println!("overlay traces: {}", dt.overlay_traces.join(", "));
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
            "bound device:  {} runtime-pm={}{}",
            d.name,
            d.runtime_status.as_deref().unwrap_or("n/a"),
            d.of_node
                .as_deref()
                .map(|n| format!(" of-node={n}"))
                .unwrap_or_default()
        );
        if d.power_domains.is_empty() {
            println!("  power domains: no genpd device links");
        }
        for l in &d.power_domains {
            println!(
                "  power domain: {} link={}{} runtime-pm={} domain={}",
                l.supplier,
                l.link_status.as_deref().unwrap_or("?"),
                match l.runtime_pm {
                    Some(true) => " (pm-managed)",
                    _ => "",
                },
                l.runtime_status.as_deref().unwrap_or("n/a"),
                match (&l.domain, &l.domain_status) {
                    (Some(d), Some(s)) => format!("{d} ({s})"),
                    (Some(d), None) => d.clone(),
                    _ => "unknown".into(),
                }
            );
        }
    }
    if m.loaded && m.bound.is_empty() {
        println!("bound device:  none");
    }
    let g = &info.genpd;
    match g.state {
        "read" if g.domains.is_empty() => {
            println!("genpd summary: no domain of a bound ane device")
        }
        "read" => {
            for d in &g.domains {
                let devs: Vec<String> = d
                    .devices
                    .iter()
                    .map(|x| format!("{}={}", x.name, x.runtime_status))
                    .collect();
                println!(
                    "genpd domain:  {} {}{}{}",
                    d.name,
                    d.status,
                    if d.children.is_empty() {
                        String::new()
                    } else {
                        format!(" children=[{}]", d.children.join(", "))
                    },
                    if devs.is_empty() {
                        String::new()
                    } else {
                        format!(" devices=[{}]", devs.join(", "))
                    }
                );
            }
        }
        "absent" => println!("genpd summary: absent (debugfs not mounted or no genpd)"),
        _ => println!(
            "genpd summary: unreadable ({})",
            g.error.as_deref().unwrap_or("?")
        ),
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
        if a.device.is_some() || a.module.is_some() {
            println!(
                "  owner:       device={} module={}{}",
                a.device.as_deref().unwrap_or("?"),
                a.module.as_deref().unwrap_or("?"),
                a.module_origin
                    .as_deref()
                    .map(|o| format!(" ({o})"))
                    .unwrap_or_default()
            );
        }
        if let Some(v) = &a.drm_version {
            println!(
                "  drm version: {v}: {}",
                a.identity.as_deref().unwrap_or("?")
            );
        }
        if let Some(st) = &a.state {
            if st.opened {
                println!(
                    "  state:       soc={} fw={} engine={} completion={} features=[{}]{}",
                    st.soc_id.as_deref().unwrap_or("?"),
                    st.fw_state.as_deref().unwrap_or("?"),
                    st.engine_state.as_deref().unwrap_or("?"),
                    st.completion.as_deref().unwrap_or("?"),
                    st.features.join(", "),
                    if st.simulated { " simulated" } else { "" }
                );
                if let Some(step) = &st.fw_fail_step {
                    println!("  firmware:    failed at release step {step}");
                }
                if let [sc @ .., status, control, rvbar_lo, rvbar_hi, ipi] = &st.fw_capture[..] {
                    let sc: Vec<String> = sc.iter().map(|v| format!("{v:#x}")).collect();
                    println!(
                        "  firmware:    SCRATCH0..7=[{}] CPU_STATUS={status:#x} CPU_CONTROL={control:#x} RVBAR={:#x} IPI={ipi:#x}",
                        sc.join(" "),
                        rvbar_hi << 32 | rvbar_lo
                    );
                }
                for e in &st.param_errors {
                    println!("  state:       cannot read {e}");
                }
            } else {
                println!(
                    "  state:       cannot open: {}",
                    st.error.as_deref().unwrap_or("?")
                );
            }
        }
    }
    if info.accel_nodes.is_empty() {
        println!("accel node:    none");
    }
}

fn info(ctx: &common::Ctx) -> Result<u8, exit::Error> {
    let info = system::system_info(&SysRoot::new(&ctx.root))?;
    if ctx.json {
        println!("{}", receipt::headed_json("ane-probe/info", &info)?);
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
        Command::Doctor(args) => doctor::doctor(&ctx, args),
        Command::Compile(args) => compile::compile(&ctx, args),
        Command::Run(args) => run::run(&ctx, args),
        Command::Bench(args) => bench::bench(&ctx, args),
        Command::Parity(args) => parity::parity(&ctx, args),
        Command::Mlp(args) => mlp::mlp(&ctx, args),
        Command::Firmware(args) => firmware::firmware(cli.json, args),
    };
    match result {
        Ok(code) => exit::exit(code),
        Err(e) => exit::report(&e),
    }
}
