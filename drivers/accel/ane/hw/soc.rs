// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The SoCs the driver supports and what differs between them.
//!
//! Every chip-specific fact the driver needs before touching hardware lives in
//! one [`SocInfo`] per device-tree compatible, so that adding a chip means
//! adding one table entry.
//!
//! Facts (see `shared/reference/hw.md`):
//! - T8103 (M1) and T600x (M1 Pro/Max) are the H13 generation: the host
//!   programs the engine's task manager directly; iBoot leaves the ANE
//!   firmware loaded, so Linux never starts it.
//! - T602x (M2 Pro/Max) is H14: Linux stages the ANE firmware, releases the
//!   ANE's coprocessor CPU and exchanges messages with it.
//! - T6000 and T6001 share one die design and one compatible,
//!   `apple,t6000-ane`, as in the upstream device trees of that family.
//! - The engine's DMA only works for device addresses inside
//!   `[0x4000, 0xe000_0000)`; the same window is used for H14 buffers, whose
//!   firmware sits far above it at 1 TiB.

use crate::hw::mem::MemType;
use core::ffi::CStr;

/// ANE hardware generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Generation {
    /// H13: M1 family (A14 class). Host-driven task manager.
    H13 = 13,
    /// H14: M2 family (A15 class). Firmware-driven.
    H14 = 14,
}

/// Who drives the engine's task queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum BackendKind {
    /// The host kernel programs the task manager registers itself.
    HostDriven = 1,
    /// The ANE coprocessor's firmware owns the engine; the host sends it
    /// messages over a shared-memory channel.
    Firmware = 2,
}

/// Identifies one supported SoC family member (the value is the chip number
/// in hex, which is what users read in `ane-probe info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SocId {
    /// M1.
    T8103 = 0x8103,
    /// M1 Pro and M1 Max (one compatible for both).
    T6000 = 0x6000,
    /// M2 Pro.
    T6020 = 0x6020,
    /// M2 Max.
    T6021 = 0x6021,
}

impl SocId {
    /// Every supported SoC, in table order.
    pub const ALL: [SocId; 4] = [SocId::T8103, SocId::T6000, SocId::T6020, SocId::T6021];

    /// Converts a raw chip number (as reported through the UAPI) back.
    pub const fn from_raw(raw: u32) -> Option<SocId> {
        match raw {
            0x8103 => Some(SocId::T8103),
            0x6000 => Some(SocId::T6000),
            0x6020 => Some(SocId::T6020),
            0x6021 => Some(SocId::T6021),
            _ => None,
        }
    }

    /// The static description of this SoC.
    pub fn info(self) -> &'static SocInfo {
        match self {
            SocId::T8103 => &T8103,
            SocId::T6000 => &T6000,
            SocId::T6020 => &T6020,
            SocId::T6021 => &T6021,
        }
    }
}

/// A half-open range of device (IOVA) addresses, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IovaWindow {
    /// First usable address.
    pub start: u64,
    /// One past the last usable address.
    pub end: u64,
}

impl IovaWindow {
    /// Size of the window in bytes.
    pub const fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the window holds no address at all.
    pub const fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Whether `[addr, addr + size)` lies entirely inside the window. A range
    /// whose end overflows `u64` is never inside.
    pub const fn contains_range(&self, addr: u64, size: u64) -> bool {
        match addr.checked_add(size) {
            Some(end) => addr >= self.start && end <= self.end,
            None => false,
        }
    }
}

/// Per-SoC description, attached to each device-tree compatible.
#[derive(Debug)]
pub struct SocInfo {
    /// Which SoC this is.
    pub id: SocId,
    /// The device-tree compatible the driver matches.
    pub compatible: &'static CStr,
    /// Marketing names of the chips behind this compatible.
    pub marketing: &'static str,
    /// Hardware generation.
    pub generation: Generation,
    /// How the engine is driven.
    pub backend: BackendKind,
    /// Device addresses the engine's DMA can reach for buffers.
    pub iova: IovaWindow,
    /// Root (machine) compatibles of the chips behind this entry, as found in
    /// a board device tree's `/compatible`.
    pub root_compatibles: &'static [&'static str],
    /// The power domains the device node lists in `power-domains`, in that
    /// order, which is the order they must come up in (the binding,
    /// `dts/bindings/apple,t8103-ane.yaml`, fixes it). The driver refuses a node
    /// whose list has another length: touching the engine with an island
    /// off wedges the SoC fabric (seed-repos.md §3.8, hazards).
    pub power_domains: &'static [&'static str],
    /// The lengths of `power-domains` lists the driver binds: this
    /// driver's binding ([`SocInfo::power_domains`]) and the other shapes
    /// the record shows working (omarchy-ane's T6001 overlay lists five:
    /// `ane_sys_cpu` and set1..4; AsahiLinux PR #584 lists five on H13).
    pub domain_counts: &'static [usize],
    /// Physical address of the engine register window (the `engine`
    /// range, or the first `reg` of a node without `reg-names`).
    pub engine_base: u64,
    /// What the driver can do after a job timed out or faulted.
    pub recovery: Recovery,
    /// The memory type of every buffer the engine or the firmware touches
    /// (what ran per SoC: [`crate::hw::mem`]).
    pub mem: MemType,
}

/// How the task manager is brought back after a timeout or an error latch.
///
/// The first step is always the same: disable and re-enable the task
/// queues. If an error latch survives that, the engine is *wedged* and the
/// driver refuses jobs until the step below has happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Recovery {
    /// The task manager loses its state when the engine's power domains
    /// cycle (T8103: the SET domains reset it, hw.md §2.3), so the next
    /// runtime suspend/resume cycle clears a wedge.
    PowerCycle = 1,
    /// The task manager's registers are kept in retention across power
    /// cycles (T600x: a timed-out task leaves TM_ERROR1/2 = 0x22222222 and
    /// TM_ERROR3 = 0x2222 that survive genpd cycling; seed-repos.md §4), so
    /// only a new binding (sysfs unbind/bind or a module reload) clears it.
    Rebind = 2,
    /// The firmware owns the engine (H14); its own recovery applies.
    Firmware = 3,
}

impl SocInfo {
    /// Looks up the entry whose compatible is `compatible` (without the NUL).
    pub fn by_compatible(compatible: &str) -> Option<&'static SocInfo> {
        TABLE
            .iter()
            .copied()
            .find(|s| s.compatible.to_bytes() == compatible.as_bytes())
    }

    /// Looks up the entry for a machine whose root `compatible` list holds
    /// `root` (for example `apple,t6001` → the `apple,t6000-ane` entry).
    pub fn by_root_compatible(root: &str) -> Option<&'static SocInfo> {
        TABLE
            .iter()
            .copied()
            .find(|s| s.root_compatibles.contains(&root))
    }
}

/// H13 DMA window: DMA to addresses at or above 0xe000_0000 does not work,
/// and page 0 is kept unused so a zero address is never valid.
const H13_IOVA: IovaWindow = IovaWindow {
    start: 0x4000,
    end: 0xe000_0000,
};

/// M1.
pub static T8103: SocInfo = SocInfo {
    id: SocId::T8103,
    compatible: c"apple,t8103-ane",
    marketing: "M1",
    generation: Generation::H13,
    backend: BackendKind::HostDriven,
    iova: H13_IOVA,
    root_compatibles: &["apple,t8103"],
    power_domains: &["ane_set1", "ane_set2", "ane_set3", "ane_set4", "ane_set5"],
    domain_counts: &[5],
    engine_base: 0x2_6bc0_4000,
    recovery: Recovery::PowerCycle,
    mem: MemType::Cached,
};

/// M1 Pro / M1 Max.
pub static T6000: SocInfo = SocInfo {
    id: SocId::T6000,
    compatible: c"apple,t6000-ane",
    marketing: "M1 Pro/Max",
    generation: Generation::H13,
    backend: BackendKind::HostDriven,
    iova: H13_IOVA,
    root_compatibles: &["apple,t6000", "apple,t6001", "apple,t6002"],
    // The four SET leaves of the seed's layout; their parents come up
    // through genpd (dts/README.md, decision 2).
    power_domains: &["ane_set1", "ane_set2", "ane_set3", "ane_set4"],
    domain_counts: &[4, 5],
    engine_base: 0x2_85c0_4000,
    recovery: Recovery::Rebind,
    mem: MemType::Cached,
};

/// M2 Pro.
pub static T6020: SocInfo = SocInfo {
    id: SocId::T6020,
    compatible: c"apple,t6020-ane",
    marketing: "M2 Pro",
    generation: Generation::H14,
    backend: BackendKind::Firmware,
    iova: H13_IOVA,
    root_compatibles: &["apple,t6020"],
    power_domains: &[
        "ane_sys_mpm",
        "ane_td",
        "ane_base",
        "ane_set1",
        "ane_set2",
        "ane_set3",
        "ane_set4",
        "ane_cpu",
    ],
    domain_counts: &[8],
    engine_base: 0x2_8400_0000,
    recovery: Recovery::Firmware,
    mem: MemType::WriteCombined,
};

/// M2 Max.
pub static T6021: SocInfo = SocInfo {
    id: SocId::T6021,
    compatible: c"apple,t6021-ane",
    marketing: "M2 Max",
    generation: Generation::H14,
    backend: BackendKind::Firmware,
    iova: H13_IOVA,
    root_compatibles: &["apple,t6021"],
    power_domains: &[
        "ane_sys_mpm",
        "ane_td",
        "ane_base",
        "ane_set1",
        "ane_set2",
        "ane_set3",
        "ane_set4",
        "ane_cpu",
    ],
    domain_counts: &[8],
    engine_base: 0x2_8400_0000,
    recovery: Recovery::Firmware,
    mem: MemType::WriteCombined,
};

/// Why a device-tree node is refused before any register is touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRefusal {
    /// A `power-domains` list of a length no working shape has: with an
    /// island off, the first engine access would wedge the SoC's fabric.
    Domains {
        /// Entries in the node's list.
        found: usize,
    },
    /// H14 without `reg-names` (the shape of AsahiLinux PR #584's T602x
    /// node): its one window starts at the H13-style engine offset, which
    /// external-aborts on T6021, and it has no `pmgr` window for the
    /// power checks the release needs.
    Unnamed,
    /// The engine window is not where the record's engine is.
    EngineAt {
        /// The window's physical address.
        found: u64,
    },
}

impl NodeRefusal {
    /// What to tell the user.
    pub const fn advice(&self) -> &'static str {
        match self {
            NodeRefusal::Domains { .. } | NodeRefusal::EngineAt { .. } => {
                "this node does not describe the ANE as any working driver did; install this driver's overlay (`ane-dt install`, docs/install.md) or remove the node"
            }
            NodeRefusal::Unnamed => {
                "this is the shape of AsahiLinux PR #584's M2 node, whose engine window external-aborts on T6021; install this driver's overlay (`ane-dt install`, docs/install.md) instead"
            }
        }
    }
}

/// Where the engine window comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineReg {
    /// The `reg` entry named `engine`.
    Named,
    /// The first `reg` entry of a node without `reg-names`.
    First,
}

/// The engine window of the node of AsahiLinux PR #584 for T602x (the
/// H13-style `+0x1c04000` engine offset; `docs/hardware-record.md`:
/// omarchy-ane's findings record that touching it external-aborts on
/// T6021). Listed so the refusal can be tested; never mapped.
pub const PR584_T602X_ENGINE: u64 = 0x2_85c0_4000;

impl SocInfo {
    /// Checks the node's `power-domains` length (before anything else).
    pub fn check_domains(&self, found: usize) -> Result<(), NodeRefusal> {
        if self.domain_counts.contains(&found) {
            Ok(())
        } else {
            Err(NodeRefusal::Domains { found })
        }
    }

    /// Checks the engine window: `reg` is how it was found, `base` its
    /// physical address (mapping it touched no register). A window named
    /// `engine` is taken as named (this driver's binding; `make check`
    /// holds the overlays to the record's addresses). Without `reg-names`,
    /// H14 is refused (it needs its `engine` and `pmgr` windows by name),
    /// and on H13 the first `reg` must be the record's engine window.
    pub fn check_engine(&self, reg: EngineReg, base: u64) -> Result<(), NodeRefusal> {
        match (self.backend, reg) {
            (_, EngineReg::Named) => Ok(()),
            (BackendKind::Firmware, EngineReg::First) => Err(NodeRefusal::Unnamed),
            (BackendKind::HostDriven, EngineReg::First) if base != self.engine_base => {
                Err(NodeRefusal::EngineAt { found: base })
            }
            (BackendKind::HostDriven, EngineReg::First) => Ok(()),
        }
    }
}

/// Every supported SoC, in the order of the driver's OF match table.
pub static TABLE: [&SocInfo; 4] = [&T8103, &T6000, &T6020, &T6021];

#[cfg(test)]
mod tests {
    use super::*;

    /// The node shapes that exist: this driver's overlays bind; a node
    /// without `reg-names` binds on H13 when its first `reg` is the
    /// engine; omarchy-ane's five-domain T6001 node binds; AsahiLinux PR
    /// #584's T602x node (no `reg-names`, one domain, the H13-style engine
    /// window) is refused before anything is touched.
    #[test]
    fn node_shapes() {
        for soc in TABLE {
            assert_eq!(soc.check_domains(soc.power_domains.len()), Ok(()));
            assert_eq!(soc.check_engine(EngineReg::Named, soc.engine_base), Ok(()));
        }
        // Unnamed H13 windows must be the record's engine.
        assert_eq!(
            T8103.check_engine(EngineReg::First, 0x2_6a00_0000),
            Err(NodeRefusal::EngineAt {
                found: 0x2_6a00_0000
            })
        );
        assert_eq!(T8103.check_domains(5), Ok(()));
        assert_eq!(T8103.check_engine(EngineReg::First, 0x2_6bc0_4000), Ok(()));
        assert_eq!(T6000.check_domains(5), Ok(()), "omarchy-ane's T6001 node");
        assert_eq!(T6000.check_engine(EngineReg::First, 0x2_85c0_4000), Ok(()));
        assert_eq!(
            T6000.check_domains(3),
            Err(NodeRefusal::Domains { found: 3 })
        );
        for soc in [&T6020, &T6021] {
            assert_eq!(soc.check_domains(1), Err(NodeRefusal::Domains { found: 1 }));
            assert_eq!(
                soc.check_engine(EngineReg::First, PR584_T602X_ENGINE),
                Err(NodeRefusal::Unnamed)
            );
        }
        assert!(NodeRefusal::Unnamed.advice().contains("PR #584"));
    }

    #[test]
    fn table_is_consistent() {
        for (i, soc) in TABLE.iter().enumerate() {
            assert_eq!(soc.id, SocId::ALL[i], "table order");
            assert!(!soc.power_domains.is_empty(), "{:?} power domains", soc.id);
            assert_eq!(
                soc.recovery == Recovery::Firmware,
                soc.backend == BackendKind::Firmware,
                "{:?} recovery",
                soc.id
            );
            assert!(core::ptr::eq(soc.id.info(), *soc), "info() of {:?}", soc.id);
            assert_eq!(SocId::from_raw(soc.id as u32), Some(soc.id));
            // Generation and backend go together.
            let want = match soc.generation {
                Generation::H13 => BackendKind::HostDriven,
                Generation::H14 => BackendKind::Firmware,
            };
            assert_eq!(soc.backend, want, "{:?}", soc.id);
            let c = soc.compatible.to_str().unwrap();
            assert!(c.starts_with("apple,t") && c.ends_with("-ane"), "{c}");
            assert!(!soc.iova.is_empty());
            assert_eq!(soc.iova.start % 0x4000, 0, "window start is 16K aligned");
            assert_eq!(soc.iova.end % 0x4000, 0, "window end is 16K aligned");
        }
        // No compatible appears twice.
        for (i, a) in TABLE.iter().enumerate() {
            for b in TABLE.iter().skip(i + 1) {
                assert_ne!(a.compatible, b.compatible);
            }
        }
    }

    #[test]
    fn lookup_by_compatible() {
        assert_eq!(
            SocInfo::by_compatible("apple,t8103-ane").unwrap().id,
            SocId::T8103
        );
        assert_eq!(
            SocInfo::by_compatible("apple,t6000-ane")
                .unwrap()
                .generation,
            Generation::H13
        );
        assert_eq!(
            SocInfo::by_compatible("apple,t6021-ane").unwrap().backend,
            BackendKind::Firmware
        );
        assert!(
            SocInfo::by_compatible("apple,t6001-ane").is_none(),
            "T6001 uses the t6000 compatible"
        );
        assert!(SocInfo::by_compatible("apple,t8103-ane\0").is_none());
        assert!(SocInfo::by_compatible("").is_none());
        assert_eq!(SocId::from_raw(0x6001), None);
        assert_eq!(
            SocInfo::by_root_compatible("apple,t6001").unwrap().id,
            SocId::T6000
        );
        assert_eq!(
            SocInfo::by_root_compatible("apple,t6021").unwrap().id,
            SocId::T6021
        );
        assert_eq!(
            SocInfo::by_root_compatible("apple,t6020").unwrap().id,
            SocId::T6020
        );
        assert_eq!(
            SocInfo::by_root_compatible("apple,t6000").unwrap().id,
            SocId::T6000
        );
        assert!(
            SocInfo::by_root_compatible("apple,t8112").is_none(),
            "M2 is not supported"
        );
        assert!(
            SocInfo::by_root_compatible("apple,j274").is_none(),
            "a board, not a chip"
        );
    }

    #[test]
    fn window_ranges() {
        let w = T8103.iova;
        assert_eq!(w.len(), 0xe000_0000 - 0x4000);
        assert!(w.contains_range(0x4000, 0x4000));
        assert!(w.contains_range(0xe000_0000 - 0x4000, 0x4000));
        assert!(!w.contains_range(0, 0x4000), "page 0 is never mapped");
        assert!(
            !w.contains_range(0xe000_0000 - 0x4000, 0x4001),
            "end is exclusive"
        );
        assert!(!w.contains_range(u64::MAX - 1, 2), "overflowing end");
        assert!(w.contains_range(0x4000, 0), "an empty range at the start");
    }

    /// The overlays' ANE nodes list as many power domains as the table
    /// expects, with the labels the table names, in the table's order (the
    /// driver refuses any other count at probe).
    #[test]
    fn overlays_list_the_table_power_domains() {
        extern crate std;
        use std::string::String;
        use std::vec::Vec;
        let dts = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dts");
        for (file, soc) in [
            ("t8103-ane.dts", &T8103),
            ("t6000-ane.dts", &T6000),
            ("t6001-ane.dts", &T6000),
            ("t6020-ane.dts", &T6020),
            ("t6021-ane.dts", &T6021),
        ] {
            let text = std::fs::read_to_string(std::format!("{dts}/{file}")).unwrap();
            let compat = std::format!("compatible = \"{}\"", soc.compatible.to_str().unwrap());
            // The node's own property, not the root's
            // `omarchy,skip-if-compatible`.
            let at = text
                .match_indices(&compat)
                .map(|(i, _)| i)
                .find(|&i| text[..i].ends_with(['\t', ' ', '\n']) && !text[..i].ends_with("-"))
                .unwrap();
            let node = &text[at..];
            let node = &node[..node.find("};").unwrap()];
            let list = &node[node.find("power-domains =").unwrap()..];
            let list = &list[..list.find(';').unwrap()];
            // `<&ps_ane_set1>` -> `ane_set1`, the PMGR node's label.
            let names: Vec<String> = list
                .split("<&ps_")
                .skip(1)
                .map(|s| std::format!("ane_{}", &s[4..s.find('>').unwrap()]))
                .collect();
            assert_eq!(names, soc.power_domains, "{file}");
        }
    }

    /// The C glue's OF tables (`ane_glue.c`, which the kernel module's
    /// aliases come from) list exactly the compatibles of this table, the
    /// host-driven ones under the `ane` driver and the firmware ones under
    /// `ane-fw`.
    #[test]
    fn glue_tables_match() {
        extern crate std;
        let glue = include_str!("../ane_glue.c");
        let table = |name: &str| -> std::vec::Vec<&str> {
            let start = glue
                .find(&std::format!("of_device_id {name}[] = {{"))
                .unwrap_or_else(|| panic!("no table {name} in ane_glue.c"));
            let body = &glue[start..];
            let body = &body[..body.find("};").expect("table end")];
            body.split(".compatible = \"")
                .skip(1)
                .map(|rest| &rest[..rest.find('"').expect("string end")])
                .collect()
        };
        let want = |backend: BackendKind| -> std::vec::Vec<&str> {
            TABLE
                .iter()
                .filter(|s| s.backend == backend)
                .map(|s| s.compatible.to_str().expect("ASCII"))
                .collect()
        };
        assert_eq!(table("ane_glue_h13_of"), want(BackendKind::HostDriven));
        assert_eq!(table("ane_glue_fw_of"), want(BackendKind::Firmware));
        for c in table("ane_glue_h13_of")
            .into_iter()
            .chain(table("ane_glue_fw_of"))
        {
            assert!(SocInfo::by_compatible(c).is_some(), "{c}");
        }
    }
}
