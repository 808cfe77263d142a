// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Read-only discovery of the ANE on this machine.
//!
//! Everything here reads files under `/proc` and `/sys` only; nothing touches
//! a device register. All paths are resolved below a [`SysRoot`], so tests
//! run against a fake tree.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::hw::soc::SocInfo;

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
}

/// A device the `ane` driver is bound to.
#[derive(Clone, Debug, Serialize)]
pub struct BoundDevice {
    /// The platform device name.
    pub name: String,
    /// `power/runtime_status` (active, suspended, ...), when runtime PM is on.
    pub runtime_status: Option<String>,
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
    /// Permission bits of the node, e.g. 0o660.
    pub mode: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
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

fn walk_ane_nodes(dir: &Path, rel: &str, out: &mut Vec<AneNode>) -> Result<(), Error> {
    let compatible = read_strings(&dir.join("compatible"))?;
    if compatible.iter().any(|c| is_ane_compatible(c)) {
        out.push(AneNode {
            path: if rel.is_empty() {
                "/".into()
            } else {
                rel.into()
            },
            supported: compatible
                .iter()
                .any(|c| SocInfo::by_compatible(c).is_some()),
            status: read_text(&dir.join("status"))?.unwrap_or_else(|| "okay".into()),
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
        walk_ane_nodes(&dir.join(&name), &format!("{rel}/{name}"), out)?;
    }
    Ok(())
}

/// Reads the device tree, or `None` when the machine has none. A kernel
/// built with `CONFIG_OF` on a non-DT machine (x86) exposes an empty tree
/// without a root `compatible`; that counts as none.
pub fn device_tree(root: &SysRoot) -> Result<Option<DeviceTree>, Error> {
    let base = root.path("/sys/firmware/devicetree/base");
    if !base.is_dir() {
        return Ok(None);
    }
    let compatible = read_strings(&base.join("compatible"))?;
    if compatible.is_empty() {
        return Ok(None);
    }
    let soc = compatible
        .iter()
        .find_map(|c| SocInfo::by_root_compatible(c))
        .map(|s| format!("{:?} ({})", s.id, s.marketing));
    let mut ane_nodes = Vec::new();
    walk_ane_nodes(&base, "", &mut ane_nodes)?;
    Ok(Some(DeviceTree {
        model: read_text(&base.join("model"))?,
        compatible,
        soc,
        ane_nodes,
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
    if let Ok(entries) = fs::read_dir(root.path("/sys/bus/platform/drivers/ane")) {
        for e in entries.filter_map(|e| e.ok()) {
            // Bound devices appear as symlinks to the device directory.
            if !e.file_type().map(|t| t.is_symlink()).unwrap_or(false) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "module" {
                continue;
            }
            bound.push(BoundDevice {
                runtime_status: read_text(&e.path().join("power/runtime_status"))?,
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
        let link = root.path(&format!("/sys/class/accel/{name}/device/driver"));
        let driver = fs::read_link(&link)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        out.push(AccelNode {
            path: format!("/dev/accel/{name}"),
            driver,
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
    Ok(SystemInfo {
        kernel: read_text(&root.path("/proc/sys/kernel/osrelease"))?,
        device_tree: device_tree(root)?,
        module: module_state(root)?,
        accel_nodes: accel_nodes(root)?,
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
}
