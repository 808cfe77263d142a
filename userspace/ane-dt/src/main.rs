// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-dt`: install, inspect, back up and remove the ANE device-tree
//! overlay in the device trees update-m1n1 puts into the boot payload.
//!
//! Exit codes: 0 done (or nothing to do), 1 refused or failed, 2 usage.

use std::path::PathBuf;
use std::process::ExitCode;

use ane_dt::{backup, install, remove, status, Delivery, DtcMerger, Env, Error};

const USAGE: &str = "\
usage: ane-dt [OPTIONS] status|install|backup|remove

  status    what the board, the stock and merged device trees and update-m1n1's
            configuration look like (read-only)
  install   Arch Linux ARM, Fedora: merge the ANE overlay into a copy of this
            board's stock DTB and point update-m1n1 at it. Omarchy (omarchy-mac-boot
            installed): place the overlay in its package-overlay directory
            /usr/lib/omarchy-mac-boot/dtb-overlays/<board>/ instead. Says which.
            Then run `sudo update-m1n1` and reboot
  backup    save update-m1n1's configuration and the stock DTB (install does
            this on its first run)
  remove    undo exactly what install did; then run `sudo update-m1n1` and
            reboot

options:
  --board NAME     the board's DTB name (t8103-j274, ...) instead of the
                   running device tree's
  --dtbs DIR       the stock DTB directory instead of the automatic choice
  --overlays DIR   the compiled overlays (default /usr/share/ane/dt)
  --delivery WAY   m1n1 or omarchy instead of the automatic choice
  --m1n1-config FILE
                   update-m1n1's configuration file instead of the one the
                   installed update-m1n1 sources
  --root DIR       operate on a system tree below DIR (tests, chroots)

Never use a GRUB `devicetree` line instead: it replaces the tree m1n1 fixes
up at every boot.";

fn main() -> ExitCode {
    let mut env = Env::default();
    let mut cmd = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let r = match a.as_str() {
            "--board" => value("--board").map(|v| env.board = Some(v)),
            "--dtbs" => value("--dtbs").map(|v| env.dtbs = Some(v)),
            "--overlays" => value("--overlays").map(|v| env.overlays = v),
            "--delivery" => value("--delivery").and_then(|v| {
                Delivery::from_name(&v)
                    .map(|d| env.delivery = Some(d))
                    .ok_or_else(|| format!("--delivery takes m1n1 or omarchy, not '{v}'"))
            }),
            "--m1n1-config" => value("--m1n1-config").and_then(|v| {
                if v.starts_with('/') {
                    env.m1n1_conf = Some(v);
                    Ok(())
                } else {
                    Err(format!("--m1n1-config takes an absolute path, not '{v}'"))
                }
            }),
            "--root" => value("--root").map(|v| env.root = PathBuf::from(v)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "-V" | "--version" => {
                println!("ane-dt {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            c @ ("status" | "install" | "backup" | "remove") if cmd.is_none() => {
                cmd = Some(c.to_string());
                Ok(())
            }
            other => Err(format!("unexpected argument '{other}'")),
        };
        if let Err(e) = r {
            eprintln!("ane-dt: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let result = match cmd.as_deref() {
        Some("status") => status(&env),
        Some("install") => install(&env, &DtcMerger),
        Some("backup") => backup(&env),
        Some("remove") => remove(&env),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
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
