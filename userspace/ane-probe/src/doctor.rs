// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe doctor`: the first-contact ladder for a real Mac.
//!
//! Each rung runs only when every rung below it passed, and each ends with
//! a verdict and, when it did not pass, the next step to take:
//!
//! 0. `soc`: whether this Mac can have the ANE driver at all, and by which
//!    path: H13 (M1, M1 Pro/Max: the host programs the engine), H14 (M2
//!    Pro/Max: the driver starts the ANE's firmware), or not supported
//!    (plain M2 T8112, M1 and M2 Ultra, M3, M4, ...: no hardware record in
//!    this project), and whether an overlay describes the board's ANE. It comes
//!    first so that nobody installs headers, Rust metadata and a DKMS
//!    module for a machine the driver cannot serve;
//! 1. `kernel`: the running kernel, and whether its headers (with the Rust
//!    metadata an out-of-tree Rust module needs, `rust/libkernel.rmeta`)
//!    are installed, and the rustc the DKMS build will use is the one that
//!    built the kernel (`CONFIG_RUSTC_VERSION_TEXT`: a distribution's own
//!    build must be the `rustc` in PATH, checked with `rustc --version`;
//!    rustup's is selected per kernel, named), unless the module is loaded
//!    already;
//! 2. `module`: the `ane` module is loaded;
//! 3. `device`: a device-tree node of the driver's, enabled and bound, with
//!    its power domains (or, without a device tree, the simulated device);
//! 4. `node`: its accel node opens as this driver's device;
//! 5. `firmware` (M2 Pro/Max only): the coprocessor's firmware runs, and
//!    an H14 program was supplied (`--h14-program`) that reads as an H14
//!    container (`ane::h14`) and is either pinned by the hardware record
//!    ([`PINNED_H14`], empty today: the record gives no hash) or
//!    acknowledged as unpinned (`--h14-unpinned`); otherwise the ladder
//!    stops here with what to supply and where to get it (omarchy-ane's
//!    hardware-proven fixtures): an H13 task stream is never sent to the
//!    T6021 firmware;
//! 6. `job`: one tiny job with a short timeout: on H13 the smallest parity
//!    cell; on H14 one call of the supplied program (its output bytes
//!    written are recorded; there is no reference to compare with);
//! 7. `parity`: every parity cell against the CPU reference (H13 only: the
//!    cells are H13 programs).
//!
//! It only reads sysfs, procfs, the device tree and the headers (and runs
//! `rustc --version`) and submits jobs through
//! the driver: nothing the hardware record marks as dangerous (no register
//! access, no power-state write, no firmware release). The whole run is
//! written to one JSON receipt a user can attach to a bug report:
//! `--receipt FILE`, by default `$XDG_STATE_HOME/ane-probe/doctor.json`
//! (`~/.local/state/ane-probe/doctor.json` without `XDG_STATE_HOME`), never
//! the current directory unasked. Exit codes ([`exit::HELP_DOCTOR`]): 0
//! when every rung passed, 1 when one failed, 2 on a usage error.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ane::hw::soc::{Generation, SocId, SocInfo};
use ane::parity::{self, DeviceExecutor, Verdict};
use ane::system::{self, SysRoot, SystemInfo};
use clap::Args;
use serde::Serialize;

use crate::common::Ctx;
use crate::exit::{self, Error};
use crate::receipt::Header;
use crate::session;

/// `doctor`'s arguments.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Where to write the JSON receipt [default:
    /// $XDG_STATE_HOME/ane-probe/doctor.json, or
    /// ~/.local/state/ane-probe/doctor.json without XDG_STATE_HOME].
    #[arg(long, value_name = "FILE")]
    receipt: Option<PathBuf>,
    /// How long the tiny job and each parity cell may take.
    #[arg(long, value_name = "N", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    timeout_ms: u64,
    /// M2 Pro/Max: an Apple-compiled H14 program that ran on hardware
    /// (for example one of omarchy-ane's published H14 fixtures) for the
    /// job rung. Without it the ladder stops at the firmware rung: an H13
    /// task stream is never sent to the T6021 firmware.
    #[arg(long, value_name = "FILE")]
    h14_program: Option<PathBuf>,
    /// Run the `--h14-program` although the hardware record pins no
    /// sha256 for it. The record pins none yet ([`PINNED_H14`]), so every
    /// H14 job rung needs this acknowledgement today.
    #[arg(long)]
    h14_unpinned: bool,
    /// M1 (H13): a program whose exact bytes ran on an M1 according to
    /// the hardware record (`ane::recorded`, pinned by sha256: tinygrad's
    /// sum as `sum.anec` or `tinygrad_sum.hwx`); the job rung runs it
    /// first. Without it the job rung runs the closest project-built
    /// program and says so; a file the record does not pin is not run.
    #[arg(long, value_name = "FILE")]
    h13_program: Option<PathBuf>,
}

/// H14 programs the hardware record pins, as (name, sha256): the job
/// rung runs one of these without `--h14-unpinned`. Empty: the record
/// (`docs/hardware-record.md`, "H14 programs") names omarchy-ane's
/// hardware-proven fixtures but gives no hash of any of them, so nothing
/// can be verified yet and the user must acknowledge that.
pub const PINNED_H14: &[(&str, &str)] = &[];

/// The `schema` of the receipt.
pub const SCHEMA: &str = "ane-probe/doctor";

/// The receipt's default place, from the environment (`XDG_STATE_HOME`,
/// then `HOME`, as the XDG base directory specification has it); `None`
/// when neither is set to an absolute path.
pub fn default_receipt(xdg_state_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    let abs = |v: Option<&str>| v.filter(|v| v.starts_with('/')).map(PathBuf::from);
    abs(xdg_state_home)
        .or_else(|| abs(home).map(|h| h.join(".local/state")))
        .map(|d| d.join("ane-probe/doctor.json"))
}

/// Apple SoCs the driver has no entry for, with why.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("apple,t8112", "T8112 (M2)"),
    ("apple,t6022", "T6022 (M2 Ultra)"),
    ("apple,t8122", "T8122 (M3)"),
    ("apple,t6030", "T6030 (M3 Pro)"),
    ("apple,t6031", "T6031 (M3 Max)"),
    ("apple,t6034", "T6034 (M3 Max)"),
    ("apple,t8132", "T8132 (M4)"),
    ("apple,t6040", "T6040 (M4 Pro)"),
    ("apple,t6041", "T6041 (M4 Max)"),
];

/// What the driver does on a SoC of its table.
fn path_of(s: &SocInfo) -> &'static str {
    match s.generation {
        Generation::H13 => "H13 path: the host programs the engine's task manager",
        Generation::H14 => "H14 path: the driver starts the ANE's firmware, which you supply from your macOS 13.5 restore image (ane-probe firmware)",
    }
}

/// Rung 0: is this Mac supported, by which path, and does an overlay
/// describe its ANE.
fn soc(info: &SystemInfo) -> Outcome {
    // The test flavour's simulated device (QEMU): bound without a node.
    if let Some(dev) = info.module.bound.iter().find(|d| d.of_node.is_none()) {
        let sim = info
            .accel_nodes
            .iter()
            .filter_map(|a| a.state.as_ref()?.soc_id.as_deref())
            .filter_map(|id| u32::from_str_radix(id.trim_start_matches("0x"), 16).ok())
            .find_map(SocId::from_raw)
            .map(|id| {
                let s = id.info();
                format!(" {:?} ({}), {}", s.id, s.marketing, path_of(s))
            })
            .unwrap_or_default();
        return Ok(format!(
            "{} bound without a device-tree node: the test flavour's simulated device{sim}",
            dev.name
        ));
    }
    let Some(dt) = &info.device_tree else {
        return Err((
            "no device tree: this is not an Apple silicon Mac running Asahi Linux".into(),
            "the driver needs an M1 (T8103), M1 Pro/Max (T6000/T6001) or M2 Pro/Max (T6020/T6021) Mac running Asahi Linux".into(),
        ));
    };
    let compat = &dt.compatible;
    let board = compat.first().map_or("?", String::as_str);
    // The M1 Ultra is two M1 Max dies, each with its own ANE. The T6000
    // table would match one die's engine, but no overlay describes either
    // and no record shows any driver running them (omarchy-ane ships a
    // T6002 overlay opt-in and marked untested): say so as the Ultra,
    // before the table lookup names it an M1 Pro/Max.
    if compat.iter().any(|c| c == "apple,t6002") && !dt.ane_nodes.iter().any(|n| n.supported) {
        return Err((
            "T6002 (M1 Ultra): not supported: no overlay describes its ANEs (one on each of its two dies), and no driver is recorded running an M1 Ultra's ANE".into(),
            "no setup step helps on this Mac yet; do not install the headers, ane-rust-meta or the DKMS module for it (docs/install.md section 1 lists the supported Macs)".into(),
        ));
    }
    if let Some(s) = compat.iter().find_map(|c| SocInfo::by_root_compatible(c)) {
        let name = format!("{:?} ({})", s.id, s.marketing);
        let path = path_of(s);
        if dt.ane_nodes.iter().any(|n| n.supported) {
            return Ok(format!(
                "{name}: supported, {path}; the device tree describes its ANE already"
            ));
        }
        if let Some(b) = ane_dt::boards::by_root_compatible(compat) {
            return Ok(format!(
                "{name}: supported, {path}; overlay {} for {} ({})",
                b.overlay, b.name, b.dtb
            ));
        }
        return Err((
            format!("{name}: the driver knows this SoC ({path}), but no overlay describes the ANE of board {board} yet"),
            "nothing to install until an overlay exists for this board (docs/install.md section 1 lists the supported boards, dts/README.md the overlays)".into(),
        ));
    }
    if let Some((c, name)) = UNSUPPORTED
        .iter()
        .find(|(c, _)| compat.iter().any(|x| x == c))
    {
        // The plain M2 is the one a reader may expect: omarchy-ane ships
        // an overlay for it, opt-in and marked untested, and no record
        // shows any driver running its ANE.
        let why = if *c == "apple,t8112" {
            " (no driver is recorded running its ANE: omarchy-ane ships a T8112 overlay opt-in and marked untested, and its firmware boot needs a chip revision read from eFuses that nobody has checked on one)"
        } else {
            ""
        };
        return Err((
            format!("{name}: not supported: this project has no hardware record for its ANE{why} (no confirmed registers, power domains or firmware), so the driver has no entry for it"),
            "no setup step helps on this Mac; do not install the headers, ane-rust-meta or the DKMS module for it (docs/install.md section 1 lists the supported Macs)".into(),
        ));
    }
    if compat.iter().any(|c| c.starts_with("apple,")) {
        return Err((
            format!(
                "an Apple machine whose SoC the driver does not know (compatible: {})",
                compat.join(", ")
            ),
            "no setup step helps on this Mac (docs/install.md section 1 lists the supported Macs)"
                .into(),
        ));
    }
    Err((
        format!("not an Apple silicon Mac (compatible: {})", compat.join(", ")),
        "the driver needs an M1 (T8103), M1 Pro/Max (T6000/T6001) or M2 Pro/Max (T6020/T6021) Mac running Asahi Linux".into(),
    ))
}

/// How a rung ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict3 {
    /// It holds.
    Pass,
    /// It does not; see `next`.
    Fail,
    /// Not run: a rung below failed (or it does not apply here).
    Skip,
}

/// One rung of the ladder.
#[derive(Clone, Debug, Serialize)]
pub struct Rung {
    /// Its name.
    pub name: &'static str,
    /// How it ended.
    pub verdict: Verdict3,
    /// What was found.
    pub detail: String,
    /// What to do next, when it did not pass.
    pub next: Option<String>,
    /// How long it took, in milliseconds.
    pub ms: f64,
}

/// One program the `job` or `parity` rung ran.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramRow {
    /// The rung.
    pub rung: &'static str,
    /// The program: a parity cell's name, or the file.
    pub program: String,
    /// The sha256 of the file, for a file.
    pub sha256: Option<String>,
    /// Whether this exact program ran on hardware per
    /// docs/hardware-record.md.
    pub ran_on_hardware: bool,
    /// The record's source for that, or why it never ran.
    pub provenance: String,
    /// `pass` (matched its reference) or `fail`.
    pub verdict: &'static str,
    /// What happened.
    pub detail: String,
}

/// The receipt.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// [`SCHEMA`], version 1, tool, host, module, board.
    #[serde(flatten)]
    pub header: Header,
    /// Every rung, in ladder order.
    pub rungs: Vec<Rung>,
    /// Every program the `job` and `parity` rungs ran, in order, each
    /// with whether it ran on hardware per the record.
    pub programs: Vec<ProgramRow>,
    /// The driver's observation record, read after the ladder, each
    /// field tagged with the open items it answers (`observe`).
    pub observations: crate::observe::Observations,
    /// `pass` when every rung that applies passed, else `fail`.
    pub verdict: &'static str,
}

/// The outcome of one rung's check.
type Outcome = Result<String, (String, String)>;

/// The ladder so far: runs a rung only when none failed below it.
struct Ladder {
    rungs: Vec<Rung>,
    failed: bool,
}

impl Ladder {
    fn rung(&mut self, name: &'static str, check: impl FnOnce() -> Outcome) {
        if self.failed {
            self.rungs.push(Rung {
                name,
                verdict: Verdict3::Skip,
                detail: "not run: a rung below failed".into(),
                next: None,
                ms: 0.0,
            });
            return;
        }
        let t = Instant::now();
        let r = check();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let (verdict, detail, next) = match r {
            Ok(d) => (Verdict3::Pass, d, None),
            Err((d, n)) => {
                self.failed = true;
                (Verdict3::Fail, d, Some(n))
            }
        };
        self.rungs.push(Rung {
            name,
            verdict,
            detail,
            next,
            ms,
        });
    }

    fn skip(&mut self, name: &'static str, why: &str) {
        self.rungs.push(Rung {
            name,
            verdict: Verdict3::Skip,
            detail: why.into(),
            next: None,
            ms: 0.0,
        });
    }
}

/// The Rust metadata of the kernel crate, below the build tree.
pub const RUST_META: &str = "rust/libkernel.rmeta";

/// Rung 1: the kernel, and its headers when the module is not loaded.
fn kernel(root: &Path, info: &SystemInfo) -> Outcome {
    let Some(release) = info.kernel.clone() else {
        return Err((
            "the kernel release cannot be read".into(),
            "run on the machine itself (procfs mounted)".into(),
        ));
    };
    if info.module.loaded {
        return Ok(format!("{release}; the ane module is loaded"));
    }
    let build = root.join(format!("lib/modules/{release}/build"));
    if !build.join("Makefile").is_file() {
        return Err((
            format!("{release}: no kernel headers at {}", build.display()),
            "install the headers of the running kernel (linux-asahi-headers or kernel-16k-devel), then the ane DKMS package (docs/install.md)".into(),
        ));
    }
    // The kernel's crate is `kernel`, its metadata `libkernel.rmeta` (as
    // the Makefile's kdir-check, the DKMS pre-build check and
    // ane-rust-meta look for it).
    if !build.join(RUST_META).is_file() {
        return Err((
            format!(
                "{release}: headers without the kernel's Rust metadata ({} is missing)",
                build.join(RUST_META).display()
            ),
            "Fedora: install kernel-16k-devel for this exact kernel (it ships rust/); Arch/Omarchy: run ane-rust-meta, which rebuilds it for these headers (docs/install.md section 2)".into(),
        ));
    }
    match rustc_text(&build) {
        None => Ok(format!("{release}; headers with Rust metadata")),
        Some(text) => rustc_check(&release, &text)
            .map(|m| format!("{release}; headers with Rust metadata; {m}")),
    }
}

/// The kernel's `CONFIG_RUSTC_VERSION_TEXT`, from the headers' `.config`.
fn rustc_text(build: &Path) -> Option<String> {
    std::fs::read_to_string(build.join(".config"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_RUSTC_VERSION_TEXT="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// The rustc the DKMS build will use for a kernel built by `text`, as
/// packaging/dkms/pre-build.sh chooses it: a text naming a distribution's
/// own build (`... (Fedora 1.93.1-1.fc43)`) needs exactly that rustc in
/// PATH, which this checks by running `rustc --version`; a plain text
/// (rustup's) is built with `RUSTUP_TOOLCHAIN=<version>` as root, whose
/// toolchains this user cannot see, so the rung names it.
fn rustc_check(release: &str, text: &str) -> Outcome {
    // "rustc 1.93.1 (01f6ddf75 2026-02-11) (Fedora 1.93.1-1.fc43)": the
    // last parenthesised group after the commit's.
    let distro = text
        .strip_suffix(')')
        .and_then(|t| t.split_once(") (").map(|(_, d)| d))
        .filter(|d| !d.contains(") ("));
    let Some(distro) = distro else {
        let ver = text.split_whitespace().nth(1).unwrap_or("?");
        return Ok(format!(
            "kernel built by rustup's rustc {ver}: DKMS builds with RUSTUP_TOOLCHAIN={ver} (root needs it: sudo rustup toolchain install {ver} --profile minimal)"
        ));
    };
    let have = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if have.as_deref() == Some(text) {
        return Ok(format!("rustc in PATH is the kernel's (\"{text}\")"));
    }
    let have = have.map_or("none".to_string(), |h| format!("\"{h}\""));
    let fix = match distro.split_once(' ') {
        Some(("Fedora", build)) => format!(
            "sudo dnf install rust-{build} rust-std-static-{build} (the kernel's own build; if your release no longer carries it, take it from Fedora's Koji; a rustup toolchain cannot match a Fedora-built kernel), then sudo dkms autoinstall -k {release}"
        ),
        _ => format!(
            "install exactly the rustc build \"{text}\" as the rustc in PATH (a rustup toolchain of the same version is another build), then sudo dkms autoinstall -k {release}"
        ),
    };
    Err((
        format!("{release}: built by \"{text}\", but the rustc in PATH is {have}: the DKMS build would be refused (rustc reads only its own build's metadata)"),
        fix,
    ))
}

/// Rung 2: the module.
fn module(info: &SystemInfo) -> Outcome {
    if info.module.loaded {
        Ok(format!(
            "loaded ({})",
            info.module.version.as_deref().unwrap_or("no version")
        ))
    } else {
        Err((
            "the ane module is not loaded".into(),
            "sudo modprobe ane; if that fails, `dmesg | grep -i ane` says why (and `dkms status ane` whether it was built)".into(),
        ))
    }
}

/// Rung 3: the node, bound, with its power domains.
fn device(info: &SystemInfo) -> Outcome {
    let bound = &info.module.bound;
    // A device bound without a device-tree node is the test flavour's
    // simulated one (on a device-tree machine too, such as QEMU's virt).
    if let Some(dev) = bound.iter().find(|d| d.of_node.is_none()) {
        return Ok(format!(
            "{} bound without a device-tree node (simulated)",
            dev.name
        ));
    }
    match &info.device_tree {
        Some(dt) => {
            let node = dt.ane_nodes.iter().find(|n| n.supported);
            let Some(node) = node else {
                return Err((
                    match dt.soc.as_deref() {
                        Some(soc) => format!("{soc}: no ANE node this driver supports in the device tree"),
                        None => "this SoC is not supported by the driver".into(),
                    },
                    "install the overlay for this machine: sudo ane-dt install (docs/install.md), then reboot".into(),
                ));
            };
            if node.status != "okay" {
                return Err((
                    format!("{} is {}", node.path, node.status),
                    "the node is disabled: reinstall the overlay (sudo ane-dt install)".into(),
                ));
            }
            let Some(dev) = bound.first() else {
                return Err((
                    format!("{} is not bound to the driver", node.path),
                    "`dmesg | grep -i ane` gives the refusal and what to install".into(),
                ));
            };
            Ok(format!(
                "{} bound as {}, {} power domain link(s), runtime-pm {}",
                node.path,
                dev.name,
                dev.power_domains.len(),
                dev.runtime_status.as_deref().unwrap_or("n/a")
            ))
        }
        None => match bound.first() {
            Some(dev) => Ok(format!("no device tree; {} bound", dev.name)),
            None => Err((
                "no device tree and no bound device".into(),
                "the ANE needs an Apple silicon Mac running Asahi Linux".into(),
            )),
        },
    }
}

/// Rung 4: the accel node opens as this driver's device; its firmware
/// state, for rung 5.
fn node(info: &SystemInfo) -> Result<(String, Option<String>), (String, String)> {
    let Some(a) = info.accel_nodes.iter().find(|a| a.state.is_some()) else {
        return Err((
            "no accel node of the ane driver".into(),
            "`ls -l /dev/accel` and `dmesg | grep -i ane`: the device is bound but registered no node".into(),
        ));
    };
    let st = a.state.as_ref().map_or_else(Default::default, Clone::clone);
    if !st.opened {
        return Err((
            format!(
                "{} cannot be opened: {}",
                a.path,
                st.error.as_deref().unwrap_or("?")
            ),
            "join the render group (or log in at the seat) so the udev rule grants access; see packaging/common/70-ane.rules".into(),
        ));
    }
    Ok((
        format!(
            "{} soc={} engine={}",
            a.path,
            st.soc_id.as_deref().unwrap_or("?"),
            st.engine_state.as_deref().unwrap_or("?")
        ),
        st.fw_state.map(|f| match st.fw_fail_step {
            Some(step) if f == "failed" => format!("failed at release step {step}"),
            _ => f,
        }),
    ))
}

/// What rung 5 asks for when no H14 program was supplied.
pub const SUPPLY_H14: &str = "supply an Apple-compiled H14 program that ran on hardware, one of omarchy-ane's published H14 fixtures (github.com/joshuaswarren/omarchy-ane, fixtures/h14-anec/<name>/program-0.anec; add is the one its M2 Max ran bit-exact): ane-probe doctor --h14-program FILE --h14-unpinned (the hardware record pins no sha256 for any of them yet, so --h14-unpinned acknowledges the file is not verified). The doctor never sends an H13 task stream (HWX, eiln's .anec, a parity cell) to the T6021 firmware: nothing records what the firmware does with one, and a refusal quarantines the ANE until reboot";

/// Rung 5's verdict on the supplied H14 program: its bytes read as an
/// H14 container (`ane::h14`), and either its sha256 is one `pins` lists
/// or the user acknowledged an unpinned program. Returns the program and
/// the rung's detail.
fn vet_h14(
    path: &Path,
    bytes: &std::io::Result<Vec<u8>>,
    unpinned: bool,
    pins: &[(&str, &str)],
) -> Result<(ane::h14::Program, String), (String, String)> {
    let bytes = bytes.as_ref().map_err(|e| {
        (
            format!("cannot read the H14 program {}: {e}", path.display()),
            SUPPLY_H14.to_string(),
        )
    })?;
    let sha = ane::program::sha256_hex(bytes);
    let what = format!(
        "H14 program {} ({} bytes, sha256 {sha})",
        path.display(),
        bytes.len()
    );
    let p = ane::h14::parse(bytes).map_err(|e| {
        (
            format!("{what}: {e}"),
            format!("nothing was sent to the firmware; {SUPPLY_H14}"),
        )
    })?;
    let pin = match pins.iter().find(|(_, h)| *h == sha) {
        Some((name, _)) => format!("pinned by the hardware record as {name}"),
        None if unpinned => "not pinned by the hardware record (run with --h14-unpinned)".into(),
        None => {
            return Err((
                format!("{what}: the hardware record pins no sha256 for it (it pins none yet); nothing was sent to the firmware"),
                "if it is one of omarchy-ane's hardware-proven H14 fixtures (fixtures/h14-anec/<name>/program-0.anec), rerun with --h14-unpinned to run it unverified".into(),
            ))
        }
    };
    let detail = format!(
        "{what}: {} task(s), {} input(s), output {} bytes; {pin}",
        p.tasks.len(),
        p.header.input_count,
        p.io.last().map_or(0, |o| o.size)
    );
    Ok((p, detail))
}

/// Rung 5 (H14): the firmware runs, and the job rung has a program the
/// firmware can run: `h14` is the `--h14-program` file, as its path and
/// its bytes (`Err` when it could not be read), `unpinned` the user's
/// acknowledgement. The program is left in `vetted` for the job rung.
fn firmware(
    state: &str,
    h14: Option<(&Path, &std::io::Result<Vec<u8>>)>,
    unpinned: bool,
    vetted: &mut Option<ane::h14::Program>,
) -> Outcome {
    if state != "running" {
        return Err((
            format!("firmware {state}"),
            "check the firmware file: ane-probe firmware /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho; a coprocessor that was released needs a reboot before another start (docs/install.md)".into(),
        ));
    }
    let Some((path, bytes)) = h14 else {
        return Err((
            "the coprocessor's firmware runs; no H14 program to run on it".into(),
            SUPPLY_H14.into(),
        ));
    };
    let (p, detail) = vet_h14(path, bytes, unpinned, PINNED_H14)
        .map_err(|(d, n)| (format!("the coprocessor's firmware runs; {d}"), n))?;
    *vetted = Some(p);
    Ok(format!("the coprocessor's firmware runs; {detail}"))
}

/// Rung 6 on H14: the vetted program, once: loaded (PROGRAM_CREATE with
/// its six sections), inputs filled with fp16 1.0, the output with 0xff,
/// one call at the firmware priority that ran (2), waited for with
/// `timeout`. There is no reference output for
/// an arbitrary program, so the rung records how many output bytes the
/// call wrote (the simulated firmware executes no H14 program: 0).
fn job_h14(root: &Path, timeout: Duration, p: &ane::h14::Program) -> Outcome {
    let dev = session::open_device(root, None).map_err(|e| {
        (
            format!("cannot open the device: {e}"),
            "see rung `node`".into(),
        )
    })?;
    let fail = |what: &str, e: ane::device::Error| {
        (
            format!("{what}: {e}"),
            "`ane-probe info` shows the firmware state; attach this receipt and `dmesg` to issue 25".into(),
        )
    };
    let program = dev.load_h14(p).map_err(|e| fail("PROGRAM_CREATE", e))?;
    let (mut bos, bindings) = dev.bind_h14(p).map_err(|e| fail("buffers", e))?;
    for (bo, b) in bos.iter_mut().zip(&bindings) {
        let m = bo.map().map_err(|e| fail("buffers", e))?;
        let m = &mut m[..b.size as usize];
        if b.flags & ane::hw::uapi::bind::OUT != 0 {
            m.fill(0xff);
        } else {
            for h in m.chunks_exact_mut(2) {
                h.copy_from_slice(&0x3c00u16.to_le_bytes());
            }
        }
    }
    let t = Instant::now();
    // LOW is the firmware's priority 2, the only one that ran on hardware
    // (omarchy-ane `ANE_M2_PRIORITY_DEFAULT`, "the proven value").
    let id = dev
        .exec(&program, &bindings, ane::hw::uapi::priority::LOW)
        .map_err(|e| fail("EXEC", e))?;
    let st = dev.wait(id, timeout).map_err(|e| fail("WAIT", e))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if st != Some(ane::device::JobStatus::Done) {
        return Err((
            format!("the call ended {st:?} after {ms:.1} ms"),
            "`ane-probe info` shows the firmware state (a failed call quarantines it until reboot); attach this receipt and `dmesg` to issue 25".into(),
        ));
    }
    let mut written = 0usize;
    let mut total = 0usize;
    for (bo, b) in bos.iter_mut().zip(&bindings) {
        if b.flags & ane::hw::uapi::bind::OUT != 0 {
            let m = bo.map().map_err(|e| fail("buffers", e))?;
            total += b.size as usize;
            written += m[..b.size as usize].iter().filter(|&&x| x != 0xff).count();
        }
    }
    Ok(format!(
        "one call of the H14 program: done in {ms:.1} ms; {written} of {total} output bytes written (no reference output: not compared)"
    ))
}

/// A rung the ladder only reaches after a failure below it, which it then
/// records as skipped without calling this.
fn unreachable_rung(name: &str) -> Outcome {
    Err((
        format!("{name}: not run (no H14 program passed the firmware rung)"),
        SUPPLY_H14.into(),
    ))
}

/// The recorded program given with `--h13-program`: its path and bytes
/// (`Err` when unreadable).
type H13File<'a> = Option<(&'a Path, &'a std::io::Result<Vec<u8>>)>;

/// Vets a file given as a recorded H13 program: its sha256 must be one
/// the record pins. Returns the record's entry and the sha256, or the
/// message (with the pinned programs) why it is not run.
pub fn vet_h13(
    path: &Path,
    bytes: &[u8],
) -> Result<(&'static ane::recorded::Recorded, String), String> {
    let sha = ane::program::sha256_hex(bytes);
    ane::recorded::by_sha256(&sha).map(|r| (r, sha.clone())).ok_or_else(|| {
        format!(
            "{} (sha256 {sha}) is not a program the hardware record shows running on hardware; nothing was run",
            path.display()
        )
    })
}

/// The programs the record pins, for messages.
pub fn h13_pins() -> String {
    ane::recorded::H13
        .iter()
        .map(|r| format!("{} (sha256 {})", r.file, r.sha256))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Runs a recorded program once on `runner` (a device session or the
/// host model): every input filled with the value it had when it ran,
/// the output poisoned, one run with `timeout`, every output element
/// compared with the recorded result.
pub fn run_recorded(
    runner: &mut dyn session::Runner,
    prog: &crate::program::ProgramFile,
    r: &ane::recorded::Recorded,
    timeout: Duration,
) -> Result<String, String> {
    let mut next_input = r.inputs.iter();
    let mut outputs = Vec::new();
    for (i, t) in prog.tensors.iter().enumerate() {
        if t.direction == ane::hwx::Direction::Output {
            runner.poison(i).map_err(|e| e.to_string())?;
            outputs.push(i);
            continue;
        }
        let v = next_input
            .next()
            .ok_or("more inputs than the record ran it with")?;
        let dense: Vec<u8> = (0..t.elements()).flat_map(|_| v.to_le_bytes()).collect();
        runner
            .write_tensor(prog, i, &dense)
            .map_err(|e| e.to_string())?;
    }
    let took = runner
        .run_once(ane::hw::uapi::priority::NORMAL, timeout)
        .map_err(|e| e.to_string())?;
    for i in outputs {
        let out = runner.read_tensor(prog, i).map_err(|e| e.to_string())?;
        let bad = out
            .chunks_exact(2)
            .filter(|h| u16::from_le_bytes([h[0], h[1]]) != r.expect)
            .count();
        if bad != 0 {
            return Err(format!(
                "{bad} of {} output elements differ from the recorded result {:#06x}",
                out.len() / 2,
                r.expect
            ));
        }
    }
    Ok(format!(
        "done in {:.3} ms; every output element is the recorded result",
        took.as_secs_f64() * 1e3
    ))
}

/// Rung 6 on H13: first the recorded program (`--h13-program`), when
/// given and pinned by the record; then the closest project-built
/// program ([`ane::recorded::stand_in`]). A given file the record does
/// not pin is not run: the rung fails and says what to supply.
fn job(root: &Path, timeout: Duration, h13: H13File<'_>, rows: &mut Vec<ProgramRow>) -> Outcome {
    let pins = h13_pins();
    // The file is vetted before the device is opened: an unpinned one is
    // never run.
    let recorded = match h13 {
        Some((path, bytes)) => {
            let bytes = bytes.as_ref().map_err(|e| {
                (
                    format!("cannot read the H13 program {}: {e}", path.display()),
                    format!("supply a program the hardware record pins: {pins}"),
                )
            })?;
            let (r, sha) = vet_h13(path, bytes).map_err(|e| {
                (
                    e,
                    format!("supply one it pins: {pins} (../shared/fixtures of the project; docs/first-contact.md), or omit --h13-program"),
                )
            })?;
            Some((path, bytes, sha, r))
        }
        None => None,
    };
    let dev = session::open_device(root, None).map_err(|e| {
        (
            format!("cannot open the device: {e}"),
            "see rung `node`".into(),
        )
    })?;
    let mut detail = Vec::new();
    match recorded {
        Some((path, bytes, sha, r)) => {
            let res = crate::program::ProgramFile::parse(path, bytes)
                .map_err(|e| e.to_string())
                .and_then(|prog| {
                    let mut s = session::Session::new(&dev, &prog).map_err(|e| e.to_string())?;
                    run_recorded(&mut s, &prog, r, timeout)
                });
            rows.push(ProgramRow {
                rung: "job",
                program: path.display().to_string(),
                sha256: Some(sha),
                ran_on_hardware: r.provenance.ran_on_hardware,
                provenance: r.provenance.source.into(),
                verdict: if res.is_ok() { "pass" } else { "fail" },
                detail: res.clone().unwrap_or_else(|e| e),
            });
            match res {
                Ok(d) => detail.push(format!("{} (ran on hardware per the record): {d}", r.file)),
                Err(e) => {
                    return Err((
                        format!("{}, the program the record shows running on an M1: {e}", r.file),
                        "`ane-probe info` shows the engine state; attach this receipt and `dmesg` to issue 25".into(),
                    ))
                }
            }
        }
        None => detail.push(format!(
            "no recorded program given (--h13-program FILE, one of {pins}): ran the closest project-built program instead"
        )),
    }
    let cell = ane::recorded::stand_in();
    let p = cell.provenance();
    let mut exec = DeviceExecutor::new(&dev);
    exec.timeout = timeout;
    let r = parity::run_cell(&cell, &mut exec);
    let res = match (r.verdict, &r.error) {
        (Verdict::Fail, Some(e)) => Err(format!("{}: {e}", cell.name)),
        (Verdict::Fail, None) => Err(format!(
            "{}: the output differs from the CPU reference",
            cell.name
        )),
        _ => Ok(format!(
            "{} (the recorded sum's operation and shape, built by this project; never ran on hardware) ran and matched the CPU reference",
            cell.name
        )),
    };
    rows.push(ProgramRow {
        rung: "job",
        program: cell.name.into(),
        sha256: None,
        ran_on_hardware: p.ran_on_hardware,
        provenance: p.source.into(),
        verdict: if res.is_ok() { "pass" } else { "fail" },
        detail: res.clone().unwrap_or_else(|e| e),
    });
    match res {
        Ok(d) => {
            detail.push(d);
            Ok(detail.join("; "))
        }
        Err(e) => Err((
            e,
            "`ane-probe info` shows the engine state; attach this receipt and `dmesg` to a bug report".into(),
        )),
    }
}

/// Rung 7: every parity cell, in first-contact order.
fn parity_all(root: &Path, timeout: Duration, rows: &mut Vec<ProgramRow>) -> Outcome {
    let dev = session::open_device(root, None).map_err(|e| {
        (
            format!("cannot open the device: {e}"),
            "see rung `node`".into(),
        )
    })?;
    let mut exec = DeviceExecutor::new(&dev);
    exec.timeout = timeout;
    let cells = parity::first_contact_order(parity::cells(), |c| c.provenance().ran_on_hardware);
    let results: Vec<_> = cells
        .iter()
        .map(|c| parity::run_cell(c, &mut exec))
        .collect();
    for (c, r) in cells.iter().zip(&results) {
        let p = c.provenance();
        rows.push(ProgramRow {
            rung: "parity",
            program: c.name.into(),
            sha256: None,
            ran_on_hardware: p.ran_on_hardware,
            provenance: p.source.into(),
            verdict: if r.verdict == Verdict::Fail {
                "fail"
            } else {
                "pass"
            },
            detail: r
                .error
                .clone()
                .unwrap_or_else(|| format!("max {} ulp", r.max_ulp)),
        });
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .map(|r| r.cell)
        .collect();
    if failed.is_empty() {
        Ok(format!("{} cells within their bounds", results.len()))
    } else {
        Err((
            format!("cells failed: {}", failed.join(", ")),
            "`ane-probe parity` prints the table; attach it and this receipt to a bug report"
                .into(),
        ))
    }
}

/// `ane-probe doctor`.
pub fn doctor(ctx: &Ctx, args: &DoctorArgs) -> Result<u8, Error> {
    let receipt = match &args.receipt {
        Some(r) => r.clone(),
        None => {
            let env = |k| std::env::var(k).ok();
            let r = default_receipt(env("XDG_STATE_HOME").as_deref(), env("HOME").as_deref())
                .ok_or_else(|| Error::Write {
                    what: "receipt".into(),
                    path: "$XDG_STATE_HOME/ane-probe/doctor.json".into(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "neither XDG_STATE_HOME nor HOME is set; pass --receipt FILE",
                    ),
                })?;
            if let Some(dir) = r.parent() {
                std::fs::create_dir_all(dir).map_err(|source| Error::Write {
                    what: "receipt directory".into(),
                    path: dir.to_owned(),
                    source,
                })?;
            }
            r
        }
    };
    crate::common::check_writable("receipt".into(), &receipt)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let info = system::system_info(&SysRoot::new(&ctx.root))?;
    let mut l = Ladder {
        rungs: Vec::new(),
        failed: false,
    };
    l.rung("soc", || soc(&info));
    l.rung("kernel", || kernel(&ctx.root, &info));
    l.rung("module", || module(&info));
    l.rung("device", || device(&info));
    let mut fw = None;
    l.rung("node", || {
        node(&info).map(|(d, f)| {
            fw = f;
            d
        })
    });
    let h14 = args
        .h14_program
        .as_ref()
        .map(|p| (p.as_path(), std::fs::read(p)));
    let mut vetted = None;
    let mut programs = Vec::new();
    let on_firmware = match fw.as_deref() {
        Some("none") | None if !l.failed => {
            l.skip("firmware", "this SoC runs no firmware under Linux");
            false
        }
        _ => {
            let state = fw.clone().unwrap_or_else(|| "unknown".into());
            l.rung("firmware", || {
                firmware(
                    &state,
                    h14.as_ref().map(|(p, b)| (*p, b)),
                    args.h14_unpinned,
                    &mut vetted,
                )
            });
            true
        }
    };
    if on_firmware {
        match &vetted {
            Some(p) => {
                l.rung("job", || job_h14(&ctx.root, timeout, p));
                if let (Some(r), Some((path, bytes))) = (l.rungs.last(), &h14) {
                    let sha = bytes.as_ref().ok().map(|b| ane::program::sha256_hex(b));
                    let pinned = sha
                        .as_deref()
                        .and_then(|s| PINNED_H14.iter().find(|(_, h)| *h == s));
                    programs.push(ProgramRow {
                        rung: "job",
                        program: path.display().to_string(),
                        sha256: sha.clone(),
                        ran_on_hardware: pinned.is_some(),
                        provenance: match pinned {
                            Some((name, _)) => format!("ran on hardware: pinned by the hardware record as {name}"),
                            None => "not verified: the hardware record pins no sha256 for any H14 program (run with --h14-unpinned)".into(),
                        },
                        verdict: if r.verdict == Verdict3::Pass { "pass" } else { "fail" },
                        detail: r.detail.clone(),
                    });
                }
            }
            // The firmware rung failed: the ladder records the skip.
            None => l.rung("job", || unreachable_rung("job")),
        }
        if !l.failed {
            l.skip(
                "parity",
                "the parity cells are H13 programs: never sent to the T6021 firmware",
            );
        } else {
            l.rung("parity", || unreachable_rung("parity"));
        }
    } else {
        let h13 = args
            .h13_program
            .as_ref()
            .map(|p| (p.clone(), std::fs::read(p)));
        l.rung("job", || {
            job(
                &ctx.root,
                timeout,
                h13.as_ref().map(|(p, b)| (p.as_path(), b)),
                &mut programs,
            )
        });
        l.rung("parity", || parity_all(&ctx.root, timeout, &mut programs));
    }
    let failed = l.failed;
    // What the driver observed, read last so that it includes the jobs of
    // the rungs above (also after a failure: then it matters most).
    let node = info
        .accel_nodes
        .iter()
        .find(|a| a.state.as_ref().is_some_and(|s| s.opened))
        .map(|a| PathBuf::from(&a.path));
    let observations = crate::observe::read(node.as_deref());
    let report = Report {
        header: Header::new(SCHEMA, 1, &ctx.root),
        rungs: l.rungs,
        programs,
        observations,
        verdict: if failed { "fail" } else { "pass" },
    };
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(&receipt, format!("{json}\n")).map_err(|source| Error::Write {
        what: "receipt".into(),
        path: receipt.clone(),
        source,
    })?;
    if ctx.json {
        println!("{json}");
    } else {
        for r in &report.rungs {
            let v = match r.verdict {
                Verdict3::Pass => "ok  ",
                Verdict3::Fail => "FAIL",
                Verdict3::Skip => "skip",
            };
            println!("{v} {:<9} {} ({:.0} ms)", r.name, r.detail, r.ms);
            if let Some(n) = &r.next {
                println!("     next: {n}");
            }
        }
        for p in &report.programs {
            println!(
                "     program {} ({}): {}; {}",
                p.program,
                p.rung,
                p.verdict,
                if p.ran_on_hardware {
                    "ran on hardware per the record"
                } else {
                    "never ran on hardware"
                }
            );
        }
        let o = &report.observations;
        match (&o.path, o.read) {
            (Some(path), true) => println!(
                "observations: {} fields from {path}, each tagged with the open items it answers",
                o.fields.len()
            ),
            _ => println!(
                "observations: not read: {} (the receipt lacks the driver's observation record)",
                o.why_not.as_deref().unwrap_or("?")
            ),
        }
        println!("receipt: {}", receipt.display());
    }
    Ok(if failed { exit::FAILURE } else { exit::OK })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// T6021 without `--h14-program`: the ladder stops at the firmware
    /// rung with what to supply and where to get it; never a job of an
    /// H13 stream.
    #[test]
    fn t6021_stops_at_the_firmware_rung_without_an_h14_program() {
        let mut v = None;
        let (d, next) = firmware("running", None, false, &mut v).unwrap_err();
        assert!(d.contains("no H14 program"), "{d}");
        assert!(next.contains("--h14-program FILE --h14-unpinned"), "{next}");
        assert!(
            next.contains("omarchy-ane's published H14 fixtures"),
            "{next}"
        );
        assert!(
            next.contains("fixtures/h14-anec/<name>/program-0.anec"),
            "{next}"
        );
        assert!(next.contains("pins no sha256"), "{next}");
        assert!(next.contains("never sends an H13 task stream"), "{next}");
        assert!(v.is_none());
        let missing: std::io::Result<Vec<u8>> =
            Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(firmware(
            "running",
            Some((Path::new("/x.bin"), &missing)),
            true,
            &mut v
        )
        .is_err());
        assert!(v.is_none());
        assert!(firmware("failed", None, true, &mut v)
            .unwrap_err()
            .0
            .contains("firmware failed"));
    }

    /// A file that is not an H14 container (here three bytes, and an H13
    /// task stream of the project's builder) is refused at the firmware
    /// rung with the field named; nothing reaches the job rung.
    #[test]
    fn t6021_refuses_what_is_not_an_h14_container() {
        let mut v = None;
        let abc: std::io::Result<Vec<u8>> = Ok(b"abc".to_vec());
        let (d, next) =
            firmware("running", Some((Path::new("/x.bin"), &abc)), true, &mut v).unwrap_err();
        assert!(
            d.contains("sha256 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            "{d}"
        );
        assert!(d.contains("file size"), "{d}");
        assert!(next.contains("nothing was sent"), "{next}");
        let shape = ane::tensor::Shape::new(1, 8, 8, 8).unwrap();
        let h13: std::io::Result<Vec<u8>> = Ok(ane::builder::add(&shape).unwrap().image());
        let (d, _) =
            firmware("running", Some((Path::new("/cell"), &h13)), true, &mut v).unwrap_err();
        assert!(d.contains("H14 program"), "{d}");
        assert!(v.is_none());
    }

    /// Issue 25 point 1: a file given as the H13 program that the record
    /// does not pin is never run: the rung fails before the device is
    /// opened (no device here), naming the pinned programs; no row is
    /// written for it.
    #[test]
    fn an_unpinned_h13_program_is_never_run() {
        let root = Path::new("/nonexistent-root");
        let mut rows = Vec::new();
        let bytes: std::io::Result<Vec<u8>> = Ok(b"not the recorded sum".to_vec());
        let (d, next) = job(
            root,
            Duration::from_millis(1),
            Some((Path::new("/x.anec"), &bytes)),
            &mut rows,
        )
        .unwrap_err();
        assert!(
            d.contains(
                "not a program the hardware record shows running on hardware; nothing was run"
            ),
            "{d}"
        );
        assert!(next.contains(ane::recorded::H13[0].sha256), "{next}");
        assert!(rows.is_empty());
        // The pinned bytes pass the vetting and reach the device, which
        // is absent here.
        if let Some(p) = ane::fixtures::path("sum.anec") {
            let bytes = std::fs::read(&p);
            let (d, _) = job(
                root,
                Duration::from_millis(1),
                Some((&p, &bytes)),
                &mut rows,
            )
            .unwrap_err();
            assert!(d.contains("cannot open the device"), "{d}");
        }
    }

    /// The receipt's schema: the programs rows say whether each program
    /// ran on hardware with the source, and the observation record keeps
    /// each field with the open items it answers.
    #[test]
    fn receipt_carries_program_rows_and_tagged_observations() {
        let r = ane::recorded::H13[0];
        let text = "schema ane-observations 1\ngeneration h13\njobs 3\nevents_foreign 2\nlast.latches none\n";
        let report = Report {
            header: Header::new(SCHEMA, 1, Path::new("/")),
            rungs: Vec::new(),
            programs: vec![ProgramRow {
                rung: "job",
                program: r.file.into(),
                sha256: Some(r.sha256.into()),
                ran_on_hardware: true,
                provenance: r.provenance.source.into(),
                verdict: "pass",
                detail: "done".into(),
            }],
            observations: crate::observe::Observations {
                read: true,
                path: Some("/sys/kernel/debug/ane-ane/observations".into()),
                why_not: None,
                fields: crate::observe::parse(text).unwrap(),
            },
            verdict: "pass",
        };
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        let row = &v["programs"][0];
        assert_eq!(row["ran_on_hardware"], true);
        assert!(row["provenance"]
            .as_str()
            .unwrap()
            .contains("eiln's DRM driver"));
        assert_eq!(row["sha256"], r.sha256);
        let fields = v["observations"]["fields"].as_array().unwrap();
        assert_eq!(fields.len(), 4);
        for f in fields {
            assert!(f["name"].is_string() && f["value"].is_string(), "{f}");
            assert!(!f["answers"].as_array().unwrap().is_empty(), "{f}");
        }
        assert_eq!(fields[2]["name"], "events_foreign");
        assert_eq!(fields[2]["value"], "2");
        assert_eq!(fields[3]["answers"], serde_json::json!(["5", "12"]));
        assert_eq!(v["observations"]["read"], true);
    }

    /// The record pins no H14 program: a valid container runs only with
    /// `--h14-unpinned`; one whose sha256 a pin list names runs without.
    #[test]
    fn t6021_runs_an_h14_program_only_pinned_or_acknowledged() {
        assert!(
            PINNED_H14.is_empty(),
            "the record pins none: update the docs"
        );
        let bytes = ane::h14::synth::add();
        let sha = ane::program::sha256_hex(&bytes);
        let ok: std::io::Result<Vec<u8>> = Ok(bytes);
        let mut v = None;
        let (d, next) = firmware(
            "running",
            Some((Path::new("/add.anec"), &ok)),
            false,
            &mut v,
        )
        .unwrap_err();
        assert!(d.contains("pins no sha256"), "{d}");
        assert!(next.contains("--h14-unpinned"), "{next}");
        assert!(v.is_none(), "an unpinned program reached the job rung");
        let d = firmware("running", Some((Path::new("/add.anec"), &ok)), true, &mut v).unwrap();
        assert!(d.contains(&sha) && d.contains("not pinned"), "{d}");
        assert_eq!(v.as_ref().map(|p| p.refs.len()), Some(3));
        let (_, d) = vet_h14(Path::new("/add.anec"), &ok, false, &[("add", sha.as_str())]).unwrap();
        assert!(d.contains("pinned by the hardware record as add"), "{d}");
    }
}
