// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-dt`: install, inspect, back up and remove the ANE device-tree
//! overlay in the device trees update-m1n1 puts into the boot payload.
//!
//! Exit codes: 0 done (or nothing to do), 1 refused or failed, 2 usage.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use ane_dt::{backup, install, remove, status, Delivery, DtcMerger, Env, Error, OVERLAYS};

const AFTER: &str = "\
Never use a GRUB `devicetree` line instead: it replaces the tree m1n1 fixes
up at every boot.

Exit codes: 0 done (or nothing to do), 1 refused or failed, 2 usage.";

/// Install the Apple Neural Engine device-tree overlay into the device trees
/// update-m1n1 puts into the boot payload.
#[derive(Debug, Parser)]
#[command(version, after_help = AFTER, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The board's DTB name (t8103-j274, ...) instead of the running device
    /// tree's.
    #[arg(long, global = true, value_name = "NAME")]
    board: Option<String>,
    /// The stock DTB directory instead of the automatic choice.
    #[arg(long, global = true, value_name = "DIR")]
    dtbs: Option<String>,
    /// The compiled overlays.
    #[arg(long, global = true, value_name = "DIR", default_value = OVERLAYS)]
    overlays: String,
    /// How the overlay reaches the payload instead of the automatic choice.
    #[arg(long, global = true, value_name = "WAY")]
    delivery: Option<Way>,
    /// update-m1n1's configuration file instead of the one the installed
    /// update-m1n1 sources.
    #[arg(long = "m1n1-config", global = true, value_name = "FILE", value_parser = absolute)]
    m1n1_config: Option<String>,
    /// Operate on a system tree below DIR (tests, chroots).
    #[arg(long, global = true, value_name = "DIR", default_value = "/")]
    root: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// What the board, the stock and merged device trees and update-m1n1's
    /// configuration look like (read-only).
    Status,
    /// Arch Linux ARM, Fedora: merge the ANE overlay into a copy of this
    /// board's stock DTB and point update-m1n1 at it, in the configuration
    /// file the installed update-m1n1 reads. Omarchy (omarchy-mac-boot
    /// installed): place the overlay in its package-overlay directory
    /// /usr/lib/omarchy-mac-boot/dtb-overlays/<board>/ instead. Says which.
    /// Then run `sudo update-m1n1` and reboot.
    Install,
    /// Save update-m1n1's configuration and the stock DTB (install does this
    /// on its first run).
    Backup,
    /// Undo exactly what install did; then run `sudo update-m1n1` and
    /// reboot.
    Remove,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Way {
    /// A merged DTB set update-m1n1's DTBS points at (Arch Linux ARM, Fedora).
    M1n1,
    /// omarchy-mac-boot's package-overlay directory (Omarchy).
    Omarchy,
}

fn absolute(v: &str) -> Result<String, String> {
    if v.starts_with('/') {
        Ok(v.to_string())
    } else {
        Err(format!("takes an absolute path, not '{v}'"))
    }
}

fn main() -> ExitCode {
    // clap exits with 2 on usage errors (and 0 for --help/--version).
    let cli = Cli::parse();
    let env = Env {
        root: cli.root,
        overlays: cli.overlays,
        dtbs: cli.dtbs,
        board: cli.board,
        delivery: cli.delivery.map(|w| match w {
            Way::M1n1 => Delivery::M1n1,
            Way::Omarchy => Delivery::Omarchy,
        }),
        m1n1_conf: cli.m1n1_config,
    };
    let result = match cli.command {
        Command::Status => status(&env),
        Command::Install => install(&env, &DtcMerger),
        Command::Backup => backup(&env),
        Command::Remove => remove(&env),
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e @ Error::Refused(_)) | Err(e @ Error::Io(..)) => {
            eprintln!("ane-dt: {e}");
            ExitCode::from(1)
        }
    }
}
