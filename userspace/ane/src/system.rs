// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Read-only discovery of the ANE on this machine.
//!
//! Everything here reads files under `/proc`, `/sys` (debugfs included)
//! and asks the accel node's `DRM_ANE_GET_PARAM`, which reports driver
//! state; nothing touches a device register. All paths are resolved below
//! a [`SysRoot`], so tests run against a fake tree.
//!
//! Besides the basics it reports, per bound device, its runtime-PM status
//! and its power domains: each `supplier:genpd:*` device link of the
//! device (one virtual genpd device per domain when a node lists several,
//! [`PowerDomainLink`]) with the link's and the supplier's status, and,
//! when `/sys/kernel/debug/pm_genpd/pm_genpd_summary` is readable (root,
//! debugfs mounted), the state of the domains those devices sit in and of
//! their parents ([`GenpdSummary`]). Per `ane` accel node it reports the
//! firmware state, engine state and completion mode ([`AccelState`]), or
//! why the node could not be opened. Per device-tree node it says where
//! the node's compatible comes from ([`DtOrigin`]).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::hw::soc::SocInfo;
use crate::hw::uapi;

/// The file-system root that `/proc` and `/sys` are read below.
#[derive(Clone, Debug)]
pub struct SysRoot(PathBuf);

impl Default for SysRoot {
    fn default() -> Self {
        SysRoot(PathBuf::from("/"))
    }
}

impl SysRoot {
    /// A root other than `/` (for tests and for inspecting a mounted image).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SysRoot(path.into())
    }

    fn path(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }
}

/// Errors of system discovery.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file that exists could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
}

/// The device-tree view of the machine.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceTree {
    /// `/model`, e.g. "Apple MacBook Pro (14-inch, M1 Max, 2021)".
    pub model: Option<String>,
    /// `/compatible`, in order.
    pub compatible: Vec<String>,
    /// The SoC this machine is, when it is one the driver supports.
    pub soc: Option<String>,
    /// Nodes whose compatible names an ANE (`apple,*-ane`).
    pub ane_nodes: Vec<AneNode>,
    /// Root nodes an overlay build can leave behind (`__symbols__`,
    /// `__fixups__`, `__local_fixups__`), those present. A merged tree
    /// made by `tools/dt/merge.sh` or `ane-dt` carries none of them, so
    /// their absence proves nothing.
    pub overlay_traces: Vec<String>,
}

/// Device-tree ANE compatibles the Linux kernel tree ships in its board
/// trees: none (upstream Linux 7.3 describes no ANE, `dts/README.md`).
pub const KERNEL_TREE_ANE_COMPATIBLES: &[&str] = &[];

/// Where a device-tree node's compatible comes from, as far as can be
/// told from the running system.
#[derive(Clone, Debug, Serialize)]
pub struct DtOrigin {
    /// `kernel-tree` (a compatible of [`KERNEL_TREE_ANE_COMPATIBLES`]),
    /// `project-overlay` (one of the driver's table, `hw::soc`, which only
    /// this project's overlays in `dts/` describe), or `unknown`.
    pub compatible_source: &'static str,
    /// Labels of `/__symbols__` that name this node (an overlay compiled
    /// with `-@`, or a tree built with symbols).
    pub symbols: Vec<String>,
}

/// One device-tree node that describes an ANE.
#[derive(Clone, Debug, Serialize)]
pub struct AneNode {
    /// Path below the tree root, e.g. `/soc/ane@26a000000`.
    pub path: String,
    /// The node's compatible list.
    pub compatible: Vec<String>,
    /// The `status` property; absent means "okay".
    pub status: String,
    /// Whether the driver has a table entry for one of the compatibles.
    pub supported: bool,
    /// Where the compatible comes from.
    pub origin: DtOrigin,
}

/// A device the `ane` driver is bound to.
#[derive(Clone, Debug, Serialize)]
pub struct BoundDevice {
    /// The platform device name.
    pub name: String,
    /// `power/runtime_status` (active, suspended, ...), when runtime PM is on.
    pub runtime_status: Option<String>,
    /// The device-tree node behind it (`of_node`), path below the tree root.
    pub of_node: Option<String>,
    /// Its `supplier:genpd:*` device links, by name.
    pub power_domains: Vec<PowerDomainLink>,
}

/// One power domain of a bound device, seen through its device link.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PowerDomainLink {
    /// The supplier device (`genpd:0:ane.0`: genpd's virtual device for
    /// the node's domain 0).
    pub supplier: String,
    /// The link's `status` (`active`, `available`, `supplier unbinding`, …).
    pub link_status: Option<String>,
    /// The link's `runtime_pm` flag: the supplier resumes with the device.
    pub runtime_pm: Option<bool>,
    /// The supplier's `power/runtime_status`.
    pub runtime_status: Option<String>,
    /// The genpd domain the supplier sits in, from the genpd summary.
    pub domain: Option<String>,
    /// That domain's state (`on`, `off-0`), from the genpd summary.
    pub domain_status: Option<String>,
}

/// What `pm_genpd_summary` says about the ANE's domains.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GenpdSummary {
    /// `read`, `absent` (no such file: debugfs not mounted, or no genpd)
    /// or `unreadable`.
    pub state: &'static str,
    /// Why it could not be read.
    pub error: Option<String>,
    /// The domains holding a device of a bound `ane` device (or one of its
    /// virtual genpd devices), then their parents, transitively.
    pub domains: Vec<GenpdDomain>,
}

/// One domain of the genpd summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GenpdDomain {
    /// Its name.
    pub name: String,
    /// `on`, or `off-<state index>`.
    pub status: String,
    /// Its child domains.
    pub children: Vec<String>,
    /// Its devices and their runtime-PM status.
    pub devices: Vec<GenpdDevice>,
}

/// A device in a genpd domain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GenpdDevice {
    /// Device name.
    pub name: String,
    /// `active`, `suspended`, `unsupported`, … as the summary prints it.
    pub runtime_status: String,
}

/// The kernel module's state.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ModuleState {
    /// Whether `ane` is loaded.
    pub loaded: bool,
    /// `/sys/module/ane/version` or `srcversion`, when present.
    pub version: Option<String>,
    /// Devices bound to the `ane` platform driver.
    pub bound: Vec<BoundDevice>,
}

/// One accel device node.
#[derive(Clone, Debug, Serialize)]
pub struct AccelNode {
    /// `/dev/accel/accelN`.
    pub path: String,
    /// The kernel driver behind it (from sysfs), e.g. `ane`.
    pub driver: Option<String>,
    /// The device the node belongs to (its parent in sysfs), e.g.
    /// `26bc04000.npu`.
    pub device: Option<String>,
    /// The module that owns the driver (its `module` link in sysfs), e.g.
    /// `ane` or `ane_t6021`.
    pub module: Option<String>,
    /// Where that module comes from, as far as sysfs tells: `built-in`,
    /// `in-tree`, or `out-of-tree` (taint flag O: DKMS or hand-built),
    /// with the DKMS file when one is installed for the running kernel.
    pub module_origin: Option<String>,
    /// `DRM_IOCTL_VERSION`: `name major.minor.patchlevel "desc"`, for nodes
    /// that were opened.
    pub drm_version: Option<String>,
    /// Whose node it is by its DRM version: `this driver`, or the foreign
    /// driver it names (see `device::identify`).
    pub identity: Option<String>,
    /// Permission bits of the node, e.g. 0o660.
    pub mode: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// What GET_PARAM says, for nodes of the `ane` driver (or of an
    /// unknown driver); absent for other drivers' nodes.
    pub state: Option<AccelState>,
}

/// The driver state of an accel node, from `DRM_ANE_GET_PARAM`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AccelState {
    /// Whether the node could be opened as an `ane` device.
    pub opened: bool,
    /// Why it could not (permission, another driver, ABI).
    pub error: Option<String>,
    /// SoC id, hex.
    pub soc_id: Option<String>,
    /// `none` (no firmware run by Linux on this generation), `off`,
    /// `running`, `failed`.
    pub fw_state: Option<String>,
    /// `ready`, `wedged-power-cycle` (clears at the next runtime suspend),
    /// `wedged-rebind` (unbind and bind the device).
    pub engine_state: Option<String>,
    /// Feature names: `completion-irq`, `bit<N>` for others.
    pub features: Vec<String>,
    /// `interrupt` (COMPLETION_IRQ) or `polling`.
    pub completion: Option<String>,
    /// Parameters that could not be read, with the reason.
    pub param_errors: Vec<String>,
    /// Whether the device is the test flavour's simulated ANE (it is
    /// bound without a device-tree node; a real ANE always has one).
    pub simulated: bool,
    /// H14, firmware failed: the release step that failed, `N (name)`, or
    /// `none` for a failure outside the release (the image, CONFIG_GET).
    /// From the driver's debugfs file `ane-<device>/firmware` (root, debugfs
    /// mounted); a diagnostic, not part of the UAPI.
    pub fw_fail_step: Option<String>,
    /// H14, firmware failed after registers were readable: SCRATCH0..7,
    /// CPU_STATUS, CPU_CONTROL, RVBAR low and high, IPI pending.
    pub fw_capture: Vec<u64>,
}

/// The release steps as the debugfs `fail_step` line numbers them (1-based;
/// the kernel's `hw::fw::boot::Step` + 1).
pub const FW_STEPS: [&str; 12] = [
    "preflight",
    "grant writes",
    "scratch init",
    "RVBAR",
    "CPU release",
    "READY",
    "prepare",
    "publish",
    "DONE",
    "channel table",
    "ring init",
    "ack",
];

/// The name of a debugfs `fail_step` value.
pub fn fw_step_name(v: u64) -> String {
    match v {
        0 => "none".into(),
        n => match usize::try_from(n - 1).ok().and_then(|i| FW_STEPS.get(i)) {
            Some(name) => format!("{n} ({name})"),
            None => format!("{n} (unknown)"),
        },
    }
}

/// Everything `ane-probe info` reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SystemInfo {
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// Device tree, when the machine has one.
    pub device_tree: Option<DeviceTree>,
    /// The `ane` module.
    pub module: ModuleState,
    /// Accel nodes present.
    pub accel_nodes: Vec<AccelNode>,
    /// The genpd summary's view of the ANE's power domains.
    pub genpd: GenpdSummary,
}

/// Reads a file that may be absent: `Ok(None)` when it does not exist.
fn read_opt(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// A text file's contents without the trailing newline or NULs.
fn read_text(path: &Path) -> Result<Option<String>, Error> {
    Ok(read_opt(path)?.map(|b| {
        String::from_utf8_lossy(&b)
            .trim_end_matches(['\n', '\0'])
            .to_owned()
    }))
}

/// A device-tree string list (NUL separated).
fn read_strings(path: &Path) -> Result<Vec<String>, Error> {
    Ok(read_opt(path)?
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default())
}

fn is_ane_compatible(c: &str) -> bool {
    c.starts_with("apple,") && c.ends_with("-ane")
}

/// Where `compatible` comes from (see [`DtOrigin`]).
pub fn compatible_source(compatible: &[String]) -> &'static str {
    if compatible
        .iter()
        .any(|c| KERNEL_TREE_ANE_COMPATIBLES.contains(&c.as_str()))
    {
        "kernel-tree"
    } else if compatible
        .iter()
        .any(|c| SocInfo::by_compatible(c).is_some())
    {
        "project-overlay"
    } else {
        "unknown"
    }
}

/// `/__symbols__`: label → node path.
fn symbols(base: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(base.join("__symbols__")) else {
        return out;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "name" {
            continue;
        }
        if let Ok(Some(v)) = read_text(&e.path()) {
            out.push((name, v));
        }
    }
    out.sort();
    out
}

fn walk_ane_nodes(
    dir: &Path,
    rel: &str,
    syms: &[(String, String)],
    out: &mut Vec<AneNode>,
) -> Result<(), Error> {
    let compatible = read_strings(&dir.join("compatible"))?;
    if compatible.iter().any(|c| is_ane_compatible(c)) {
        let path = if rel.is_empty() {
            "/".to_owned()
        } else {
            rel.to_owned()
        };
        out.push(AneNode {
            supported: compatible
                .iter()
                .any(|c| SocInfo::by_compatible(c).is_some()),
            status: read_text(&dir.join("status"))?.unwrap_or_else(|| "okay".into()),
            origin: DtOrigin {
                compatible_source: compatible_source(&compatible),
                symbols: syms
                    .iter()
                    .filter(|(_, p)| *p == path)
                    .map(|(l, _)| l.clone())
                    .collect(),
            },
            path,
            compatible,
        });
    }
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(source) => {
            return Err(Error::Read {
                path: dir.to_owned(),
                source,
            })
        }
    };
    let mut children: Vec<_> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    children.sort();
    for name in children {
        if rel.is_empty() && name.starts_with("__") {
            // __symbols__, __fixups__, __local_fixups__: no device nodes.
            continue;
        }
        walk_ane_nodes(&dir.join(&name), &format!("{rel}/{name}"), syms, out)?;
    }
    Ok(())
}

/// Reads the device tree, or `None` when the machine has none. A kernel
/// built with `CONFIG_OF` on a non-DT machine (x86) exposes an empty tree
/// without a root `compatible`; that counts as none. The tree is read at
/// `/sys/firmware/devicetree/base`, or at `/proc/device-tree` (normally a
/// link to it) when sysfs does not show it.
pub fn device_tree(root: &SysRoot) -> Result<Option<DeviceTree>, Error> {
    let base = ["/sys/firmware/devicetree/base", "/proc/device-tree"]
        .iter()
        .map(|p| root.path(p))
        .find(|p| p.is_dir());
    let Some(base) = base else {
        return Ok(None);
    };
    let compatible = read_strings(&base.join("compatible"))?;
    if compatible.is_empty() {
        return Ok(None);
    }
    let soc = compatible
        .iter()
        .find_map(|c| SocInfo::by_root_compatible(c))
        .map(|s| format!("{:?} ({})", s.id, s.marketing));
    let mut ane_nodes = Vec::new();
    walk_ane_nodes(&base, "", &symbols(&base), &mut ane_nodes)?;
    let overlay_traces = ["__symbols__", "__fixups__", "__local_fixups__"]
        .iter()
        .filter(|n| base.join(n).is_dir())
        .map(|n| (*n).to_owned())
        .collect();
    Ok(Some(DeviceTree {
        model: read_text(&base.join("model"))?,
        compatible,
        soc,
        ane_nodes,
        overlay_traces,
    }))
}

/// Reads the `ane` module's state.
pub fn module_state(root: &SysRoot) -> Result<ModuleState, Error> {
    let module = root.path("/sys/module/ane");
    if !module.is_dir() {
        return Ok(ModuleState::default());
    }
    let version = match read_text(&module.join("version"))? {
        Some(v) => Some(v),
        None => read_text(&module.join("srcversion"))?,
    };
    let mut bound = Vec::new();
    // `ane` binds the H13 SoCs, `ane-fw` the H14 ones.
    for driver in [
        "/sys/bus/platform/drivers/ane",
        "/sys/bus/platform/drivers/ane-fw",
    ] {
        let Ok(entries) = fs::read_dir(root.path(driver)) else {
            continue;
        };
        for e in entries.filter_map(|e| e.ok()) {
            // Bound devices appear as symlinks to the device directory.
            if !e.file_type().map(|t| t.is_symlink()).unwrap_or(false) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "module" {
                continue;
            }
            let dir = e.path();
            bound.push(BoundDevice {
                runtime_status: read_text(&dir.join("power/runtime_status"))?,
                of_node: of_node_path(&dir),
                power_domains: power_domain_links(&dir),
                name,
            });
        }
    }
    bound.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ModuleState {
        loaded: true,
        version,
        bound,
    })
}

/// The device-tree path of a device's `of_node` link (the part after
/// `devicetree/base`).
fn of_node_path(dev: &Path) -> Option<String> {
    let target = fs::read_link(dev.join("of_node")).ok()?;
    let t = target.to_string_lossy().into_owned();
    Some(match t.find("devicetree/base") {
        Some(i) => {
            let rest = &t[i + "devicetree/base".len()..];
            if rest.is_empty() {
                "/".to_owned()
            } else {
                rest.to_owned()
            }
        }
        None => t,
    })
}

/// Prefix of the consumer's link names for genpd suppliers.
const GENPD_SUPPLIER: &str = "supplier:genpd:";

/// The `supplier:genpd:*` device links in a device directory. Unreadable
/// attributes are left empty: this is a report, not a check.
fn power_domain_links(dev: &Path) -> Vec<PowerDomainLink> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dev) else {
        return out;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(supplier) = name.strip_prefix(GENPD_SUPPLIER) else {
            continue;
        };
        let link = e.path();
        let text = |rel: &str| read_text(&link.join(rel)).ok().flatten();
        out.push(PowerDomainLink {
            supplier: supplier.to_owned(),
            link_status: text("status"),
            runtime_pm: text("runtime_pm").map(|v| v.trim() == "1"),
            runtime_status: text("supplier/power/runtime_status"),
            domain: None,
            domain_status: None,
        });
    }
    // genpd:0:…, genpd:1:…: the node's list order (numeric).
    let index = |s: &str| -> u64 {
        s.strip_prefix("genpd:")
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX)
    };
    out.sort_by(|a, b| {
        index(&a.supplier)
            .cmp(&index(&b.supplier))
            .then_with(|| a.supplier.cmp(&b.supplier))
    });
    out
}

/// Where the genpd summary lives.
pub const GENPD_SUMMARY: &str = "/sys/kernel/debug/pm_genpd/pm_genpd_summary";

/// Parses `pm_genpd_summary` (`drivers/pmdomain/core.c`,
/// `summary_show`): a domain line starts in column 0 (`name status
/// performance`), a line of children is indented by 48 columns
/// (comma-separated names), a device line by 4 (`name runtime-status
/// performance mode`). The three header lines are skipped.
pub fn parse_genpd_summary(text: &str) -> Vec<GenpdDomain> {
    let mut out: Vec<GenpdDomain> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty()
            || line.starts_with("domain ")
            || line.trim_start().starts_with("/device")
            || line.starts_with("---")
        {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut words = line.split_whitespace();
        if indent == 0 {
            out.push(GenpdDomain {
                name: words.next().unwrap_or_default().to_owned(),
                status: words.next().unwrap_or_default().to_owned(),
                children: Vec::new(),
                devices: Vec::new(),
            });
            continue;
        }
        let Some(d) = out.last_mut() else { continue };
        if indent > 8 {
            d.children.extend(
                line.split(',')
                    .map(|c| c.trim().to_owned())
                    .filter(|c| !c.is_empty()),
            );
        } else if let Some(name) = words.next() {
            d.devices.push(GenpdDevice {
                name: name.to_owned(),
                runtime_status: words.next().unwrap_or_default().to_owned(),
            });
        }
    }
    out
}

/// Whether `dev` (a name in the genpd summary) belongs to the bound
/// device `bound`: the device itself (one domain, attached directly) or
/// one of genpd's virtual devices for it (`genpd:<i>:<bound>`).
fn genpd_device_of(dev: &str, bound: &str) -> bool {
    dev == bound
        || dev
            .strip_prefix("genpd:")
            .and_then(|r| r.split_once(':'))
            .is_some_and(|(i, name)| name == bound && i.parse::<u32>().is_ok())
}

/// Reads the genpd summary and keeps the domains of `bound` devices and
/// their parents; fills in each link's domain and its status.
pub fn genpd_summary(root: &SysRoot, bound: &mut [BoundDevice]) -> GenpdSummary {
    let path = root.path(GENPD_SUMMARY);
    let text = match fs::read(&path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return GenpdSummary {
                state: "absent",
                error: None,
                domains: Vec::new(),
            }
        }
        Err(e) => {
            return GenpdSummary {
                state: "unreadable",
                error: Some(format!("cannot read {}: {e}", path.display())),
                domains: Vec::new(),
            }
        }
    };
    let all = parse_genpd_summary(&text);
    let mut keep: Vec<String> = all
        .iter()
        .filter(|d| {
            d.devices
                .iter()
                .any(|dev| bound.iter().any(|b| genpd_device_of(&dev.name, &b.name)))
        })
        .map(|d| d.name.clone())
        .collect();
    // Parents, transitively (a domain lists its children).
    let mut i = 0;
    while i < keep.len() {
        let child = keep[i].clone();
        for d in &all {
            if d.children.contains(&child) && !keep.contains(&d.name) {
                keep.push(d.name.clone());
            }
        }
        i += 1;
    }
    for b in bound.iter_mut() {
        for l in &mut b.power_domains {
            if let Some(d) = all
                .iter()
                .find(|d| d.devices.iter().any(|dev| dev.name == l.supplier))
            {
                l.domain = Some(d.name.clone());
                l.domain_status = Some(d.status.clone());
            }
        }
    }
    GenpdSummary {
        state: "read",
        error: None,
        domains: keep
            .iter()
            .filter_map(|n| all.iter().find(|d| &d.name == n).cloned())
            .collect(),
    }
}

/// The name of a `fw_state` value.
pub fn fw_state_name(v: u64) -> String {
    match v {
        uapi::fw_state::NONE => "none".into(),
        uapi::fw_state::OFF => "off".into(),
        uapi::fw_state::RUNNING => "running".into(),
        uapi::fw_state::FAILED => "failed".into(),
        other => format!("unknown ({other})"),
    }
}

/// The name of an `engine_state` value.
pub fn engine_state_name(v: u64) -> String {
    match v {
        uapi::engine_state::READY => "ready".into(),
        uapi::engine_state::WEDGED_POWER_CYCLE => "wedged-power-cycle".into(),
        uapi::engine_state::WEDGED_REBIND => "wedged-rebind".into(),
        other => format!("unknown ({other})"),
    }
}

/// The names of the `features` bits.
pub fn feature_names(bits: u64) -> Vec<String> {
    (0..64)
        .filter(|b| bits & (1u64 << b) != 0)
        .map(|b| match 1u64 << b {
            uapi::feature::COMPLETION_IRQ => "completion-irq".to_owned(),
            _ => format!("bit{b}"),
        })
        .collect()
}

/// The H14 firmware's failure report, read from the driver's debugfs file
/// `<debugfs>/ane-<device>/firmware`: the failed release step (0 for none)
/// and the captured registers (empty when nothing was captured).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FwReport {
    /// `fail_step`: 1-based release step, 0 for none.
    pub fail_step: u64,
    /// `capture`: SCRATCH0..7, CPU_STATUS, CPU_CONTROL, RVBAR low and
    /// high, IPI pending; empty for `none`.
    pub capture: Vec<u64>,
}

/// Number of registers a firmware failure captures.
pub const FW_CAPTURE_COUNT: usize = 13;

/// Parses the text of the debugfs `firmware` file; the error names the
/// line that does not parse.
pub fn parse_fw_report(text: &str) -> std::result::Result<FwReport, String> {
    let mut r = FwReport::default();
    let (mut step, mut capture) = (false, false);
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("fail_step") => {
                r.fail_step = words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| format!("fail_step line {line:?}"))?;
                step = true;
            }
            Some("capture") => {
                for w in words {
                    if w == "none" {
                        break;
                    }
                    let v = w
                        .strip_prefix("0x")
                        .and_then(|h| u64::from_str_radix(h, 16).ok())
                        .ok_or_else(|| format!("capture value {w:?}"))?;
                    r.capture.push(v);
                }
                if !r.capture.is_empty() && r.capture.len() != FW_CAPTURE_COUNT {
                    return Err(format!(
                        "capture has {} values, not {FW_CAPTURE_COUNT}",
                        r.capture.len()
                    ));
                }
                capture = true;
            }
            _ => {}
        }
    }
    match (step, capture) {
        (true, true) => Ok(r),
        _ => Err("no fail_step or capture line".into()),
    }
}

/// The path of the driver's debugfs file `file` for the device behind
/// `/dev/accel/<node>` (`/sys/kernel/debug/ane-<device>/<file>`).
fn debugfs_file(node: &Path, file: &str) -> std::result::Result<String, String> {
    let name = node
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or("no node name")?;
    let dev = fs::read_link(format!("/sys/class/accel/{name}/device"))
        .map_err(|e| format!("/sys/class/accel/{name}/device: {e}"))?;
    let dev = dev
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or("no device name")?;
    Ok(format!("/sys/kernel/debug/ane-{dev}/{file}"))
}

/// The debugfs firmware report of the device behind `/dev/accel/<node>`.
pub fn fw_report(node: &Path) -> std::result::Result<FwReport, String> {
    let path = debugfs_file(node, "firmware")?;
    let text =
        fs::read_to_string(&path).map_err(|e| format!("{path}: {e} (debugfs mounted? root?)"))?;
    parse_fw_report(&text).map_err(|e| format!("{path}: {e}"))
}

/// The debugfs observation record (`hw::obs`, the driver's
/// `observations` file) of the device behind `/dev/accel/<node>`, as
/// text; why not when it cannot be read (debugfs is root's).
pub fn observations_text(node: &Path) -> std::result::Result<(String, String), String> {
    let path = debugfs_file(node, "observations")?;
    let text = fs::read_to_string(&path).map_err(|e| {
        format!("{path}: {e} (debugfs is readable by root only: run the doctor with sudo; is debugfs mounted at /sys/kernel/debug?)")
    })?;
    Ok((path, text))
}

/// Whether the device behind `/dev/accel/<node>` is bound without a
/// device-tree node: the test flavour's simulated ANE.
fn node_simulated(node: &Path) -> bool {
    node.file_name().is_some_and(|n| {
        let dev = Path::new("/sys/class/accel").join(n).join("device");
        dev.exists() && !dev.join("of_node").exists()
    })
}

/// Opens `node` and reads the state parameters; says why when it cannot.
pub fn accel_state(node: &Path) -> AccelState {
    let dev = match crate::device::Device::open(node) {
        Ok(d) => d,
        Err(e) => {
            return AccelState {
                error: Some(e.to_string()),
                ..Default::default()
            }
        }
    };
    let mut s = AccelState {
        opened: true,
        ..Default::default()
    };
    let mut get = |name: &str, p: u32| match dev.get_param(p) {
        Ok(v) => Some(v),
        Err(e) => {
            s.param_errors.push(format!("{name}: {e}"));
            None
        }
    };
    let soc = get("SOC_ID", uapi::param::SOC_ID);
    let fw = get("FW_STATE", uapi::param::FW_STATE);
    let engine = get("ENGINE_STATE", uapi::param::ENGINE_STATE);
    let features = get("FEATURES", uapi::param::FEATURES);
    s.soc_id = soc.map(|v| format!("{v:#x}"));
    s.fw_state = fw.map(fw_state_name);
    if fw == Some(uapi::fw_state::FAILED) {
        match fw_report(node) {
            Ok(r) => {
                s.fw_fail_step = Some(fw_step_name(r.fail_step));
                s.fw_capture = r.capture;
            }
            Err(e) => s.param_errors.push(format!("firmware report: {e}")),
        }
    }
    s.simulated = node_simulated(node);
    s.engine_state = engine.map(engine_state_name);
    if let Some(f) = features {
        s.features = feature_names(f);
        s.completion = Some(if f & uapi::feature::COMPLETION_IRQ != 0 {
            "interrupt".into()
        } else {
            "polling".into()
        });
    }
    s
}

/// Where a loaded module comes from: `built-in` (no `initstate`),
/// `out-of-tree` (taint flag O; DKMS or hand-built), else `in-tree`. A
/// module file under `updates/dkms` of the running kernel is named.
fn module_origin(root: &SysRoot, module: &str) -> Option<String> {
    let dir = root.path(&format!("/sys/module/{module}"));
    if !dir.is_dir() {
        return None;
    }
    if !dir.join("initstate").exists() {
        return Some("built-in".into());
    }
    let taint = read_text(&dir.join("taint"))
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut origin = if taint.contains('O') {
        "out-of-tree (DKMS or hand-built)".to_owned()
    } else {
        "in-tree".to_owned()
    };
    if let Ok(Some(release)) = read_text(&root.path("/proc/sys/kernel/osrelease")) {
        let names = [module.to_owned(), module.replace('_', "-")];
        'found: for n in &names {
            for ext in ["ko", "ko.xz", "ko.zst", "ko.gz"] {
                let f = format!("/lib/modules/{release}/updates/dkms/{n}.{ext}");
                if root.path(&f).exists() {
                    origin += &format!("; DKMS file {f}");
                    break 'found;
                }
            }
        }
    }
    Some(origin)
}

/// Whether a node of `driver` may be opened to read its DRM version: ANE
/// drivers of any origin (ours: `ane`, `ane-fw`; others' names contain
/// `ane` too) and nodes whose driver sysfs does not name. Other drivers'
/// devices are not woken.
fn may_open(driver: Option<&str>) -> bool {
    driver.is_none_or(|d| d.to_ascii_lowercase().contains("ane"))
}

/// Lists `/dev/accel/accel*` with the driver behind each node.
pub fn accel_nodes(root: &SysRoot) -> Result<Vec<AccelNode>, Error> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(root.path("/dev/accel")) else {
        return Ok(out);
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("accel") {
            continue;
        }
        let meta = match fs::metadata(e.path()) {
            Ok(m) => m,
            Err(source) => {
                return Err(Error::Read {
                    path: e.path(),
                    source,
                })
            }
        };
        let link_name = |rel: &str| {
            fs::read_link(root.path(&format!("/sys/class/accel/{name}/{rel}")))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        };
        let driver = link_name("device/driver");
        let device = link_name("device");
        let module = link_name("device/driver/module");
        let module_origin = module.as_deref().and_then(|m| module_origin(root, m));
        let (mut drm_version, mut identity, mut state) = (None, None, None);
        if may_open(driver.as_deref()) {
            if let Ok(v) = crate::device::node_version(e.path()) {
                drm_version = Some(format!(
                    "{} {}.{}.{} \"{}\"",
                    v.name, v.major, v.minor, v.patchlevel, v.desc
                ));
                identity = Some(match crate::device::identify(&v) {
                    crate::device::Identity::Ours => "this driver".to_owned(),
                    crate::device::Identity::NotAne => format!("not an ANE driver ('{}')", v.name),
                    crate::device::Identity::Foreign(what) => format!("foreign ANE driver: {what}"),
                    crate::device::Identity::UnknownAbi => format!(
                        "this driver's name with an incompatible ABI {} (the library speaks {})",
                        v.major,
                        uapi::ABI_VERSION
                    ),
                });
            }
            // Says itself why a foreign node is refused.
            state = Some(accel_state(&e.path()));
        }
        out.push(AccelNode {
            path: format!("/dev/accel/{name}"),
            state,
            driver,
            device,
            module,
            module_origin,
            drm_version,
            identity,
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Collects everything `ane-probe info` reports.
pub fn system_info(root: &SysRoot) -> Result<SystemInfo, Error> {
    let mut module = module_state(root)?;
    let genpd = genpd_summary(root, &mut module.bound);
    Ok(SystemInfo {
        kernel: read_text(&root.path("/proc/sys/kernel/osrelease"))?,
        device_tree: device_tree(root)?,
        module,
        accel_nodes: accel_nodes(root)?,
        genpd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn write(root: &Path, rel: &str, data: &[u8]) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }

    #[test]
    fn empty_root_reports_nothing() {
        let t = tempfile::tempdir().unwrap();
        let info = system_info(&SysRoot::new(t.path())).unwrap();
        assert!(info.kernel.is_none());
        assert!(info.device_tree.is_none());
        assert!(!info.module.loaded);
        assert!(info.accel_nodes.is_empty());
    }

    #[test]
    fn finds_soc_and_ane_nodes() {
        let t = tempfile::tempdir().unwrap();
        let dt = "sys/firmware/devicetree/base";
        write(
            t.path(),
            &format!("{dt}/model"),
            b"Apple MacBook Pro (14-inch, M1 Max, 2021)\0",
        );
        write(
            t.path(),
            &format!("{dt}/compatible"),
            b"apple,j314c\0apple,t6001\0apple,arm-platform\0",
        );
        write(
            t.path(),
            &format!("{dt}/soc/ane@285c04000/compatible"),
            b"apple,t6000-ane\0",
        );
        write(
            t.path(),
            &format!("{dt}/soc/npu@1/compatible"),
            b"apple,t9999-ane\0",
        );
        write(t.path(), &format!("{dt}/soc/npu@1/status"), b"disabled\0");
        write(
            t.path(),
            &format!("{dt}/soc/dart@1/compatible"),
            b"apple,t6000-dart\0",
        );
        let tree = device_tree(&SysRoot::new(t.path())).unwrap().unwrap();
        assert_eq!(
            tree.model.as_deref(),
            Some("Apple MacBook Pro (14-inch, M1 Max, 2021)")
        );
        assert_eq!(tree.compatible.len(), 3);
        assert_eq!(tree.soc.as_deref(), Some("T6000 (M1 Pro/Max)"));
        assert_eq!(tree.ane_nodes.len(), 2);
        assert_eq!(tree.ane_nodes[0].path, "/soc/ane@285c04000");
        assert!(tree.ane_nodes[0].supported);
        assert_eq!(tree.ane_nodes[0].status, "okay");
        assert_eq!(tree.ane_nodes[1].status, "disabled");
        assert!(!tree.ane_nodes[1].supported);
    }

    #[test]
    fn empty_tree_is_no_tree() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("sys/firmware/devicetree/base")).unwrap();
        assert!(device_tree(&SysRoot::new(t.path())).unwrap().is_none());
    }

    #[test]
    fn proc_device_tree_is_read_when_sysfs_shows_none() {
        let t = tempfile::tempdir().unwrap();
        write(
            t.path(),
            "proc/device-tree/compatible",
            b"apple,j274\0apple,t8103\0apple,arm-platform\0",
        );
        let tree = device_tree(&SysRoot::new(t.path())).unwrap().unwrap();
        assert_eq!(tree.soc.as_deref(), Some("T8103 (M1)"));
    }

    #[test]
    fn unsupported_machine_has_no_soc() {
        let t = tempfile::tempdir().unwrap();
        write(
            t.path(),
            "sys/firmware/devicetree/base/compatible",
            b"apple,j413\0apple,t8112\0",
        );
        let tree = device_tree(&SysRoot::new(t.path())).unwrap().unwrap();
        assert!(tree.soc.is_none());
        assert!(tree.ane_nodes.is_empty());
    }

    #[test]
    fn module_and_bound_devices() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "sys/module/ane/srcversion", b"ABCDEF\n");
        let dev = t.path().join("sys/devices/platform/ane-sim.0");
        write(
            t.path(),
            "sys/devices/platform/ane-sim.0/power/runtime_status",
            b"suspended\n",
        );
        let drv = t.path().join("sys/bus/platform/drivers/ane");
        fs::create_dir_all(&drv).unwrap();
        symlink(&dev, drv.join("ane-sim.0")).unwrap();
        symlink(t.path().join("sys/module/ane"), drv.join("module")).unwrap();
        fs::write(drv.join("bind"), b"").unwrap();
        let m = module_state(&SysRoot::new(t.path())).unwrap();
        assert!(m.loaded);
        assert_eq!(m.version.as_deref(), Some("ABCDEF"));
        assert_eq!(m.bound.len(), 1);
        assert_eq!(m.bound[0].name, "ane-sim.0");
        assert_eq!(m.bound[0].runtime_status.as_deref(), Some("suspended"));
    }

    /// A summary as the 7.3 kernel prints it: two ANE domains on a parent,
    /// genpd's virtual devices of a bound device, an unrelated domain.
    const SUMMARY: &str = "\
domain                          status          children        performance
    /device                         runtime status                  managed by
------------------------------------------------------------------------------
ane_sys                         on                              0
                                                ane_set1, ane_set2
ane_set1                        on                              0
    genpd:0:26a000000.ane           active                      0           SW
ane_set2                        off-0                           0
    genpd:1:26a000000.ane           suspended                   0           SW
disp0                           on                              0
    genpd:0:disp0                   active                      0           SW
";

    #[test]
    fn genpd_summary_parses() {
        let d = parse_genpd_summary(SUMMARY);
        assert_eq!(d.len(), 4);
        assert_eq!(d[0].name, "ane_sys");
        assert_eq!(d[0].status, "on");
        assert_eq!(d[0].children, ["ane_set1", "ane_set2"]);
        assert!(d[0].devices.is_empty());
        assert_eq!(d[2].status, "off-0");
        assert_eq!(
            d[2].devices,
            [GenpdDevice {
                name: "genpd:1:26a000000.ane".into(),
                runtime_status: "suspended".into()
            }]
        );
        assert!(genpd_device_of("genpd:1:26a000000.ane", "26a000000.ane"));
        assert!(genpd_device_of("26a000000.ane", "26a000000.ane"));
        assert!(!genpd_device_of("genpd:x:26a000000.ane", "26a000000.ane"));
        assert!(!genpd_device_of("genpd:0:disp0", "26a000000.ane"));
    }

    /// A bound device with two genpd device links, its of_node, the genpd
    /// summary, a device tree with symbols, and an accel node that is not
    /// a DRM device (a regular file): everything read-only, nothing fails.
    #[test]
    fn power_domains_origin_and_accel_state() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let base = "sys/firmware/devicetree/base";
        write(
            r,
            &format!("{base}/compatible"),
            b"apple,j274\0apple,t8103\0",
        );
        write(
            r,
            &format!("{base}/soc/ane@26a000000/compatible"),
            b"apple,t8103-ane\0",
        );
        write(
            r,
            &format!("{base}/__symbols__/ane"),
            b"/soc/ane@26a000000\0",
        );
        write(
            r,
            &format!("{base}/__symbols__/ps_ane_sys"),
            b"/soc/pmgr/x\0",
        );
        fs::create_dir_all(r.join(format!("{base}/__local_fixups__"))).unwrap();
        let dev = r.join("sys/devices/platform/soc/26a000000.ane");
        write(
            r,
            "sys/devices/platform/soc/26a000000.ane/power/runtime_status",
            b"suspended\n",
        );
        symlink(
            r.join(format!("{base}/soc/ane@26a000000")),
            dev.join("of_node"),
        )
        .unwrap();
        for (i, st) in [(0, "active"), (1, "suspended")] {
            let sup = r.join(format!("sys/devices/genpd:{i}:26a000000.ane"));
            write(
                r,
                &format!("sys/devices/genpd:{i}:26a000000.ane/power/runtime_status"),
                format!("{st}\n").as_bytes(),
            );
            let link = r.join(format!(
                "sys/devices/virtual/devlink/genpd:genpd:{i}:26a000000.ane--platform:26a000000.ane"
            ));
            fs::create_dir_all(&link).unwrap();
            fs::write(link.join("status"), "active\n").unwrap();
            fs::write(link.join("runtime_pm"), "1\n").unwrap();
            symlink(&sup, link.join("supplier")).unwrap();
            symlink(
                &link,
                dev.join(format!("supplier:genpd:genpd:{i}:26a000000.ane")),
            )
            .unwrap();
        }
        // A DART link is not a power domain.
        fs::create_dir_all(dev.join("supplier:platform:231004000.iommu")).unwrap();
        write(r, "sys/module/ane/version", b"0.1\n");
        let drv = r.join("sys/bus/platform/drivers/ane");
        fs::create_dir_all(&drv).unwrap();
        symlink(&dev, drv.join("26a000000.ane")).unwrap();
        write(
            r,
            "sys/kernel/debug/pm_genpd/pm_genpd_summary",
            SUMMARY.as_bytes(),
        );
        write(r, "dev/accel/accel0", b"");

        let info = system_info(&SysRoot::new(r)).unwrap();
        let b = &info.module.bound[0];
        assert_eq!(b.of_node.as_deref(), Some("/soc/ane@26a000000"));
        assert_eq!(b.power_domains.len(), 2);
        let l = &b.power_domains[1];
        assert_eq!(l.supplier, "genpd:1:26a000000.ane");
        assert_eq!(l.link_status.as_deref(), Some("active"));
        assert_eq!(l.runtime_pm, Some(true));
        assert_eq!(l.runtime_status.as_deref(), Some("suspended"));
        assert_eq!(l.domain.as_deref(), Some("ane_set2"));
        assert_eq!(l.domain_status.as_deref(), Some("off-0"));
        assert_eq!(b.power_domains[0].domain.as_deref(), Some("ane_set1"));
        assert_eq!(info.genpd.state, "read");
        let names: Vec<&str> = info.genpd.domains.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            ["ane_set1", "ane_set2", "ane_sys"],
            "the parent too, not disp0"
        );

        let dt = info.device_tree.unwrap();
        assert_eq!(dt.ane_nodes.len(), 1);
        assert_eq!(dt.ane_nodes[0].origin.compatible_source, "project-overlay");
        assert_eq!(dt.ane_nodes[0].origin.symbols, ["ane"]);
        assert_eq!(dt.overlay_traces, ["__symbols__", "__local_fixups__"]);

        let a = &info.accel_nodes[0];
        let st = a.state.as_ref().unwrap();
        assert!(!st.opened);
        assert!(
            st.error.as_deref().unwrap().contains("DRM_IOCTL_VERSION"),
            "{st:?}"
        );
        assert!(st.fw_state.is_none() && st.features.is_empty());
    }

    /// Which module owns which accel node: an omarchy-ane DKMS module on
    /// one node, a built-in driver on another, read from sysfs alone (the
    /// nodes are plain files, so nothing is opened successfully).
    #[test]
    fn accel_node_owner_module_and_origin() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        write(r, "proc/sys/kernel/osrelease", b"7.1.13-3-1-ARCH\n");
        for (node, dev, drv, module, taint) in [
            (
                "accel0",
                "284000000.npu",
                "ane_t6021",
                "ane_t6021",
                Some("OE\n"),
            ),
            ("accel1", "26bc04000.npu", "ane", "ane", None),
        ] {
            write(r, &format!("dev/accel/{node}"), b"");
            let d = r.join(format!("sys/devices/platform/soc/{dev}"));
            let drvdir = r.join(format!("sys/bus/platform/drivers/{drv}"));
            let moddir = r.join(format!("sys/module/{module}"));
            fs::create_dir_all(&d).unwrap();
            fs::create_dir_all(&drvdir).unwrap();
            fs::create_dir_all(&moddir).unwrap();
            symlink(&drvdir, d.join("driver")).unwrap();
            symlink(&moddir, drvdir.join("module")).unwrap();
            if let Some(taint) = taint {
                write(r, &format!("sys/module/{module}/initstate"), b"live\n");
                write(r, &format!("sys/module/{module}/taint"), taint.as_bytes());
            }
            let class = r.join(format!("sys/class/accel/{node}"));
            fs::create_dir_all(&class).unwrap();
            symlink(&d, class.join("device")).unwrap();
        }
        write(
            r,
            "lib/modules/7.1.13-3-1-ARCH/updates/dkms/ane_t6021.ko.zst",
            b"",
        );
        let nodes = accel_nodes(&SysRoot::new(r)).unwrap();
        let a = &nodes[0];
        assert_eq!(a.device.as_deref(), Some("284000000.npu"));
        assert_eq!(a.driver.as_deref(), Some("ane_t6021"));
        assert_eq!(a.module.as_deref(), Some("ane_t6021"));
        let o = a.module_origin.as_deref().unwrap();
        assert!(o.starts_with("out-of-tree"), "{o}");
        assert!(
            o.ends_with("DKMS file /lib/modules/7.1.13-3-1-ARCH/updates/dkms/ane_t6021.ko.zst"),
            "{o}"
        );
        // An ANE driver's node is opened (and fails here: a plain file).
        assert!(a.state.as_ref().is_some_and(|s| !s.opened));
        assert!(a.drm_version.is_none() && a.identity.is_none());
        let b = &nodes[1];
        assert_eq!(b.module.as_deref(), Some("ane"));
        assert_eq!(b.module_origin.as_deref(), Some("built-in"));
        assert!(may_open(Some("ane-fw")) && may_open(None));
        assert!(!may_open(Some("ivpu")));
    }

    #[test]
    fn genpd_summary_absent_or_unreadable() {
        let t = tempfile::tempdir().unwrap();
        let s = genpd_summary(&SysRoot::new(t.path()), &mut []);
        assert_eq!(s.state, "absent");
        // A directory where the file should be cannot be read.
        fs::create_dir_all(t.path().join("sys/kernel/debug/pm_genpd/pm_genpd_summary")).unwrap();
        let s = genpd_summary(&SysRoot::new(t.path()), &mut []);
        assert_eq!(s.state, "unreadable");
        assert!(s.error.unwrap().contains("pm_genpd_summary"));
    }

    #[test]
    fn names_of_states_and_features() {
        assert_eq!(
            compatible_source(&["apple,t6000-ane".into()]),
            "project-overlay"
        );
        assert_eq!(compatible_source(&["apple,t9999-ane".into()]), "unknown");
        assert_eq!(fw_state_name(uapi::fw_state::NONE), "none");
        assert_eq!(fw_state_name(9), "unknown (9)");
        assert_eq!(fw_step_name(0), "none");
        assert_eq!(fw_step_name(2), "2 (grant writes)");
        assert_eq!(fw_step_name(6), "6 (READY)");
        assert_eq!(fw_step_name(12), "12 (ack)");
        assert_eq!(fw_step_name(13), "13 (unknown)");
        assert_eq!(
            engine_state_name(uapi::engine_state::WEDGED_REBIND),
            "wedged-rebind"
        );
        assert_eq!(
            feature_names(uapi::feature::COMPLETION_IRQ | 1 << 5),
            ["completion-irq", "bit5"]
        );
        assert!(feature_names(0).is_empty());
    }

    #[test]
    fn fw_report_parses() {
        let caps = (0..13)
            .map(|i| format!(" {:#x}", i * 16))
            .collect::<String>();
        let r = parse_fw_report(&format!("fail_step 5\ncapture{caps}\n")).unwrap();
        assert_eq!(r.fail_step, 5);
        assert_eq!(r.capture, (0..13).map(|i| i * 16).collect::<Vec<u64>>());
        let r = parse_fw_report("fail_step 0\ncapture none\n").unwrap();
        assert_eq!(r, FwReport::default());
        assert!(parse_fw_report("fail_step 1\n").is_err());
        assert!(parse_fw_report("fail_step x\ncapture none\n").is_err());
        assert!(parse_fw_report("fail_step 1\ncapture 0x1 0x2\n").is_err());
    }
}
