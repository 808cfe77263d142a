// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-dt`: put the ANE device-tree overlay into the device trees the Mac
//! boots with, the only way Asahi allows.
//!
//! m1n1 applies no overlays and a GRUB `devicetree` line would replace the
//! tree m1n1 fixes up for every boot, so the overlay is merged offline into
//! a copy of the board's stock DTB, and update-m1n1 is pointed at a DTB set
//! made of that copy plus the other stock DTBs:
//!
//! - stock DTBs: the kernel's (`/boot/dtb/apple` on Fedora,
//!   `/usr/lib/modules/<newest>/dtbs[/apple]` on Arch), never modified;
//! - `/var/lib/ane-dt/dtbs/apple/*.dtb`: links to the stock DTBs, and the
//!   merged one for this board;
//! - `/var/lib/ane-dt/update-m1n1.sh`: sets `DTBS` to the glob
//!   `/var/lib/ane-dt/dtbs/apple/*.dtb`, but only while the stock DTB it was
//!   made from is unchanged (after a kernel update the stock trees are used
//!   until `ane-dt install` runs again). A glob, not the directory: every
//!   update-m1n1 runs `cat "$M1N1" $DTBS`, which expands it, but the
//!   asahi-alarm fork has no directory expansion and would fail with "Is a
//!   directory" (and with it the pacman hook);
//! - one marked block at the end of update-m1n1's configuration file sources
//!   it. Which file that is, is read from the installed script itself (the
//!   file it sources: `/etc/default/update-m1n1` upstream and on Arch,
//!   `/etc/sysconfig/update-m1n1` on Fedora); `remove` restores that file
//!   byte for byte (or removes it again if install created it);
//! - `/var/lib/ane-dt/backup`: the configuration and stock DTB as they were
//!   before the first install.
//!
//! On Omarchy, omarchy-mac-boot already owns `DTBS`: its configuration merges
//! every package overlay in `/usr/lib/omarchy-mac-boot/dtb-overlays/PREFIX/`
//! into the device trees whose file name is `PREFIX.dtb` or starts with
//! `PREFIX-`, with plain `fdtoverlay`, and leaves an overlay out of a tree
//! that already has an available node with one of the compatibles its root
//! lists in `omarchy,skip-if-compatible`. There `ane-dt` puts the overlay
//! into that directory (prefix: the board's DTB name), after proving that it
//! merges into the stock tree, and touches nothing else: no
//! `/etc/default/update-m1n1` block, no DTB set. It takes that path when
//! omarchy-mac-boot's library or overlay directory is present (or
//! `--delivery omarchy`), and says which path it took.
//!
//! `/var/lib/ane-dt/state` records what was installed and how; `remove`
//! undoes exactly that.
//!
//! Every operation is idempotent, refuses boards without an overlay, and
//! never runs update-m1n1 itself.

pub mod boards;
pub mod fdt;
pub mod sha256;

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use boards::Board;
use fdt::Fdt;

/// Where things are. Every absolute path is taken below `root` (`/` on a
/// real system; a fake tree in the tests).
#[derive(Debug, Clone)]
pub struct Env {
    /// The system root.
    pub root: PathBuf,
    /// Directory of the compiled overlays (`<soc>-ane.dtbo`), absolute.
    pub overlays: String,
    /// The stock DTB directory, absolute; found automatically when `None`.
    pub dtbs: Option<String>,
    /// The board's DTB name (`t8103-j274`); read from the running device
    /// tree when `None`.
    pub board: Option<String>,
    /// How the overlay reaches the boot payload; detected when `None`.
    pub delivery: Option<Delivery>,
    /// update-m1n1's configuration file, absolute; read from the installed
    /// script when `None`.
    pub m1n1_conf: Option<String>,
}

/// The installed update-m1n1, as far as ane-dt needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct M1n1Script {
    /// The script (absolute), if one is installed.
    pub script: Option<String>,
    /// The configuration file it sources (absolute), where the block goes.
    pub conf: String,
    /// How `conf` was chosen, for the user.
    pub how: String,
    /// Whether the script uses `$DTBS` unquoted, so that a glob or list of
    /// files works (`None`: no script to ask).
    pub takes_list: Option<bool>,
}

/// The absolute configuration files a shell script sources (`. /path` or
/// `source /path`, alone or after `&&`), in order, except function
/// libraries; paths built from variables are skipped.
pub fn sourced_configs(script: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in script.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        for part in line.split("&&").flat_map(|p| p.split(';')) {
            let part = part.trim();
            let Some(arg) = part
                .strip_prefix(". ")
                .or_else(|| part.strip_prefix("source "))
            else {
                continue;
            };
            let arg = arg.trim().trim_matches(|c| c == '"' || c == '\'');
            if arg.starts_with('/')
                && !arg.contains('$')
                && !arg.contains(char::is_whitespace)
                && !arg.ends_with(".sh")
                && !out.iter().any(|o| o == arg)
            {
                out.push(arg.to_string());
            }
        }
    }
    out
}

/// Whether a shell script uses `$DTBS` (or `${DTBS}`) unquoted somewhere,
/// as every known update-m1n1 does in `cat "$M1N1" $DTBS`: then the shell
/// splits and expands a glob or a list of files in it.
pub fn uses_dtbs_unquoted(script: &str) -> bool {
    script
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .any(|l| {
            ["$DTBS", "${DTBS}"].iter().any(|v| {
                l.match_indices(v).any(|(i, _)| {
                    let before = l[..i].chars().next_back();
                    let after = l[i + v.len()..].chars().next();
                    before.is_some_and(char::is_whitespace)
                        && after.is_none_or(|c| c.is_whitespace() || c == ';')
                })
            })
        })
}

/// How the overlay reaches the device trees update-m1n1 packs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// A merged DTB set that `/etc/default/update-m1n1` points `DTBS` at
    /// (Arch Linux ARM, Fedora).
    M1n1,
    /// omarchy-mac-boot's package-overlay directory (Omarchy).
    Omarchy,
}

impl Delivery {
    /// The name `--delivery` and the state file use.
    pub fn name(self) -> &'static str {
        match self {
            Delivery::M1n1 => "m1n1",
            Delivery::Omarchy => "omarchy",
        }
    }

    /// The inverse of `name`.
    pub fn from_name(name: &str) -> Option<Delivery> {
        match name {
            "m1n1" => Some(Delivery::M1n1),
            "omarchy" => Some(Delivery::Omarchy),
            _ => None,
        }
    }
}

/// The directory ane-dt owns.
pub const STATE_DIR: &str = "/var/lib/ane-dt";
/// update-m1n1's configuration when the installed script names none
/// (upstream asahi-scripts' and Arch's default).
pub const M1N1_CONF: &str = "/etc/default/update-m1n1";
/// Where the distributions install update-m1n1, in the order looked at.
pub const M1N1_SCRIPTS: &[&str] = &[
    "/usr/bin/update-m1n1",
    "/usr/local/bin/update-m1n1",
    "/usr/sbin/update-m1n1",
];
/// What `DTBS` is set to: every tree of the merged set, as a glob the
/// script's unquoted `$DTBS` expands.
pub const DTBS_GLOB: &str = "/var/lib/ane-dt/dtbs/apple/*.dtb";
/// The installed overlays.
pub const OVERLAYS: &str = "/usr/share/ane/dt";
/// omarchy-mac-boot's package-overlay directory: `PREFIX/NAME.dtbo`.
pub const OMARCHY_OVERLAYS: &str = "/usr/lib/omarchy-mac-boot/dtb-overlays";
/// omarchy-mac-boot's overlay library, which its update-m1n1 configuration
/// sources.
pub const OMARCHY_LIB: &str = "/usr/lib/omarchy-mac/boot/dtb-overlays.sh";
/// The file name ane-dt gives its overlay in the board's prefix directory.
pub const OMARCHY_NAME: &str = "ane-dt.dtbo";
/// The root property omarchy-mac-boot reads to leave an overlay out.
pub const SKIP_IF_COMPATIBLE: &str = "omarchy,skip-if-compatible";
/// The function of omarchy-mac-boot's library that its
/// `/etc/default/update-m1n1` calls to set `DTBS` to the overlaid trees.
pub const OMARCHY_CALL: &str = "dtb_overlays_update_m1n1";
/// The `DTBS` default line Arch Linux ARM's asahi-scripts PKGBUILD inserts
/// into update-m1n1. omarchy-mac-boot's library merges overlays only into
/// an update-m1n1 holding exactly this line (the default it reproduces when
/// nothing set `DTBS`); with any other script it leaves every overlay out.
pub const ALARM_DTBS_DEFAULT: &str =
    ": ${DTBS:=$(/bin/ls -d /lib/modules/*-ARCH | sort -rV | head -1)/dtbs/*.dtb}";

/// Whether omarchy-mac-boot will merge package overlays when update-m1n1
/// runs: `conf` (the configuration update-m1n1 sources, `conf_text` its
/// contents) must call [`OMARCHY_CALL`] with no later line assigning
/// `DTBS` (the last assignment wins, and the library then never sees it)
/// and without `OMARCHY_DTB_OVERLAYS=0` (its off switch); `script` (the
/// installed update-m1n1) must hold [`ALARM_DTBS_DEFAULT`]. `Ok` says what
/// was found, `Err` what leaves the overlays out and how to fix it.
pub fn omarchy_merges(
    conf: &str,
    conf_text: Option<&str>,
    script: Option<&str>,
    script_text: Option<&str>,
) -> Result<String, String> {
    let lines: Vec<&str> = conf_text
        .unwrap_or("")
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .collect();
    let words = |l: &str| -> Vec<String> {
        l.split(|c: char| c.is_whitespace() || c == ';')
            .map(str::to_string)
            .collect()
    };
    let Some(call) = lines
        .iter()
        .rposition(|l| words(l).iter().any(|w| w == OMARCHY_CALL))
    else {
        return Err(format!(
            "{conf} does not call {OMARCHY_CALL}, so omarchy-mac-boot merges no package overlay into what update-m1n1 packs (a locally edited copy kept over the package's {conf}.pacnew?); restore omarchy-mac-boot's {conf}, or use `--delivery m1n1`"
        ));
    };
    if let Some(i) = lines.iter().position(|l| {
        words(l)
            .iter()
            .any(|w| w.trim_matches(['"', '\'']) == "OMARCHY_DTB_OVERLAYS=0")
    }) {
        return Err(format!(
            "{conf} sets OMARCHY_DTB_OVERLAYS=0 (line {}), which turns omarchy-mac-boot's overlay merge off; remove that line",
            i + 1
        ));
    }
    let assigns = |l: &str| {
        let l = l.strip_prefix("export ").unwrap_or(l).trim_start();
        l.starts_with("DTBS=") || l.contains("${DTBS:=") || l.contains("${DTBS=")
    };
    if let Some(i) = (call + 1..lines.len()).find(|&i| assigns(lines[i])) {
        return Err(format!(
            "{conf} sets DTBS after {OMARCHY_CALL} (line {}): that list is what update-m1n1 packs, so every package overlay is left out; move the DTBS line above the call (the library merges over a DTBS set before it)",
            i + 1
        ));
    }
    let script = script.unwrap_or("update-m1n1");
    match script_text {
        None => Err(format!(
            "no update-m1n1 installed ({}): nothing would pack the overlay; install asahi-scripts",
            M1N1_SCRIPTS.join(", ")
        )),
        Some(t) if !t.lines().any(|l| l.trim() == ALARM_DTBS_DEFAULT) => Err(format!(
            "{script} lacks Arch Linux ARM's DTBS default, and omarchy-mac-boot's library merges overlays only into that update-m1n1; use `--delivery m1n1`"
        )),
        Some(_) => Ok(format!(
            "{conf} calls {OMARCHY_CALL} last; {script} has Arch Linux ARM's DTBS default"
        )),
    }
}
const BEGIN: &str = "# BEGIN ane-dt: ANE device-tree overlay (undo with `ane-dt remove`)";
const END: &str = "# END ane-dt";

impl Default for Env {
    fn default() -> Self {
        Env {
            root: PathBuf::from("/"),
            overlays: OVERLAYS.to_string(),
            dtbs: None,
            board: None,
            delivery: None,
            m1n1_conf: None,
        }
    }
}

/// Why an operation did not happen.
#[derive(Debug)]
pub enum Error {
    /// Refused on purpose (unknown board, missing input, ...); exit 1.
    Refused(String),
    /// A file operation failed.
    Io(String, io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Refused(m) => write!(f, "{m}"),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {}

fn refuse<T>(msg: impl Into<String>) -> Result<T, Error> {
    Err(Error::Refused(msg.into()))
}

fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |e| Error::Io(what, e)
}

/// Merges an overlay into a board DTB. The real one uses dtc's tools; the
/// tests can substitute their own.
pub trait Merger {
    /// Writes `out` = `base` + `overlay`.
    fn merge(&self, base: &Path, overlay: &Path, out: &Path) -> Result<(), Error>;
}

/// The merge recipe of `tools/dt/merge.sh`: plain `fdtoverlay`, as
/// omarchy-mac-boot runs it. The overlay reaches existing nodes only by
/// `target-path` (every reference is local: no `__fixups__`); each target
/// must exist in the base. `verify` then checks that no phandle moved
/// (fdtoverlay older than dtc 1.7.1 renumbers a labelled target).
#[derive(Debug, Default)]
pub struct DtcMerger;

fn run(tool: &str, args: &[&str]) -> Result<(), Error> {
    let out = Command::new(tool).args(args).output().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::Refused(format!(
                "{tool} not found: install dtc (Arch: dtc, Fedora: dtc, Debian: device-tree-compiler)"
            ))
        } else {
            Error::Io(format!("running {tool}"), e)
        }
    })?;
    if !out.status.success() {
        return refuse(format!(
            "{tool} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn read_fdt(path: &Path) -> Result<Fdt, Error> {
    let blob = fs::read(path).map_err(io(format!("reading {}", path.display())))?;
    Fdt::parse(&blob).map_err(|e| Error::Refused(format!("{}: {e}", path.display())))
}

/// The overlay's fragment target paths, in order.
pub fn target_paths(overlay: &Fdt) -> Vec<String> {
    overlay
        .nodes
        .keys()
        .filter(|p| p.starts_with("/fragment@") && p.matches('/').count() == 1)
        .filter_map(|p| overlay.strings(p, "target-path").into_iter().next())
        .collect()
}

/// Checks that `overlay` can be applied to `base` by plain fdtoverlay.
pub fn check_applicable(base: &Fdt, overlay: &Fdt, what: &str) -> Result<(), Error> {
    if overlay.has_node("/__fixups__") {
        return refuse(format!(
            "{what} has unresolved references (__fixups__): it needs symbols no board tree has; install the overlay of this ane-tools version"
        ));
    }
    let targets = target_paths(overlay);
    if targets.is_empty() {
        return refuse(format!("{what} has no fragment with a target-path"));
    }
    if let Some(t) = targets.iter().find(|t| !base.has_node(t)) {
        return refuse(format!(
            "the stock tree has no node {t}: {what} does not fit this tree"
        ));
    }
    Ok(())
}

impl Merger for DtcMerger {
    fn merge(&self, base: &Path, overlay: &Path, out: &Path) -> Result<(), Error> {
        let b = read_fdt(base)?;
        let o = read_fdt(overlay)?;
        check_applicable(&b, &o, &overlay.display().to_string())?;
        run(
            "fdtoverlay",
            &[
                "-i",
                base.to_str().expect("UTF-8 path"),
                "-o",
                out.to_str().expect("UTF-8 path"),
                overlay.to_str().expect("UTF-8 path"),
            ],
        )
    }
}

/// Where the installed state stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The board.
    pub board: String,
    /// The stock DTB the merged one was made from (absolute).
    pub stock: String,
    /// Its SHA-256.
    pub stock_sha256: String,
    /// SHA-256 of the overlay that was applied.
    pub overlay_sha256: String,
    /// SHA-256 of the merged DTB.
    pub merged_sha256: String,
    /// How it was delivered.
    pub delivery: Delivery,
    /// Omarchy: the overlay file ane-dt placed (absolute), and whether
    /// ane-dt created its prefix directory.
    pub placed: Option<String>,
    /// Whether ane-dt created the placed file's directory.
    pub placed_dir_created: bool,
    /// update-m1n1: the configuration file that holds the block.
    pub conf: Option<String>,
}

impl State {
    fn to_text(&self) -> String {
        let mut t = format!(
            "board={}\nstock={}\nstock_sha256={}\noverlay_sha256={}\nmerged_sha256={}\ndelivery={}\n",
            self.board,
            self.stock,
            self.stock_sha256,
            self.overlay_sha256,
            self.merged_sha256,
            self.delivery.name()
        );
        if let Some(p) = &self.placed {
            let _ = writeln!(t, "placed={p}");
            let _ = writeln!(t, "placed_dir_created={}", self.placed_dir_created);
        }
        if let Some(c) = &self.conf {
            let _ = writeln!(t, "conf={c}");
        }
        t
    }

    fn parse(text: &str) -> Option<State> {
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                .map(str::to_string)
        };
        Some(State {
            board: get("board")?,
            stock: get("stock")?,
            stock_sha256: get("stock_sha256")?,
            overlay_sha256: get("overlay_sha256")?,
            merged_sha256: get("merged_sha256")?,
            // A state written before deliveries existed is update-m1n1's.
            delivery: get("delivery").map_or(Some(Delivery::M1n1), |d| Delivery::from_name(&d))?,
            placed: get("placed"),
            placed_dir_created: get("placed_dir_created").as_deref() == Some("true"),
            conf: get("conf"),
        })
    }
}

impl Env {
    /// `abs` (an absolute system path) below the root.
    pub fn at(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// The board, from `--board` or the running device tree's root
    /// compatible. Unknown boards are refused.
    pub fn board(&self) -> Result<&'static Board, Error> {
        if let Some(name) = &self.board {
            return boards::by_dtb(name).map_or_else(
                || refuse(format!("no ANE overlay for board {name}; {}", supported())),
                Ok,
            );
        }
        let path = self.at("/sys/firmware/devicetree/base/compatible");
        let raw = match fs::read(&path) {
            Ok(r) => r,
            Err(_) => {
                return refuse(format!(
                    "cannot read {}: not a device-tree machine?",
                    path.display()
                ))
            }
        };
        let compatible: Vec<String> = raw
            .split(|&c| c == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        boards::by_root_compatible(&compatible).map_or_else(
            || {
                refuse(format!(
                    "no ANE overlay for this machine ({}); {}",
                    compatible.join(", "),
                    supported()
                ))
            },
            Ok,
        )
    }

    /// The stock DTB directory holding `board`'s DTB: `--dtbs`, else
    /// `/boot/dtb/apple`, `/boot/dtb`, then `/usr/lib/modules/<kernel>/dtbs/apple`
    /// and `.../dtbs` for the newest kernel first (update-m1n1 uses the newest).
    pub fn stock_dir(&self, board: &Board) -> Result<String, Error> {
        let file = format!("{}.dtb", board.dtb);
        if let Some(d) = &self.dtbs {
            if self.at(d).join(&file).is_file() {
                return Ok(d.trim_end_matches('/').to_string());
            }
            return refuse(format!("{d} has no {file}"));
        }
        let mut candidates = vec!["/boot/dtb/apple".to_string(), "/boot/dtb".to_string()];
        let mut kernels: Vec<String> = fs::read_dir(self.at("/usr/lib/modules"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        kernels.sort_by(|a, b| version_cmp(b, a));
        for k in kernels {
            candidates.push(format!("/usr/lib/modules/{k}/dtbs/apple"));
            candidates.push(format!("/usr/lib/modules/{k}/dtbs"));
        }
        for c in candidates {
            if self.at(&c).join(&file).is_file() {
                return Ok(c);
            }
        }
        refuse(format!(
            "no stock {file} found (looked in /boot/dtb and /usr/lib/modules/*/dtbs); pass --dtbs DIR"
        ))
    }

    fn overlay_path(&self, board: &Board) -> PathBuf {
        self.at(&self.overlays)
            .join(format!("{}-ane.dtbo", board.overlay))
    }

    fn state(&self) -> Option<State> {
        State::parse(&fs::read_to_string(self.at(&format!("{STATE_DIR}/state"))).ok()?)
    }

    /// How to deliver, and why: `--delivery`, else omarchy-mac-boot's
    /// package-overlay support when it is installed, else update-m1n1.
    pub fn delivery(&self) -> (Delivery, String) {
        if let Some(d) = self.delivery {
            return (d, "chosen with --delivery".to_string());
        }
        for marker in [OMARCHY_LIB, OMARCHY_OVERLAYS] {
            if self.at(marker).exists() {
                return (
                    Delivery::Omarchy,
                    format!("omarchy-mac-boot found ({marker})"),
                );
            }
        }
        (
            Delivery::M1n1,
            "no omarchy-mac-boot: update-m1n1's DTBS (Arch Linux ARM, Fedora)".to_string(),
        )
    }

    /// The installed update-m1n1 and the configuration file it reads:
    /// `--m1n1-config`, else the file the installed script sources, else
    /// upstream's `/etc/default/update-m1n1` (and `how` says so).
    pub fn m1n1_script(&self) -> M1n1Script {
        let found = M1N1_SCRIPTS
            .iter()
            .find_map(|s| Some((*s, fs::read_to_string(self.at(s)).ok()?)));
        let takes_list = found.as_ref().map(|(_, text)| uses_dtbs_unquoted(text));
        let script = found.as_ref().map(|(s, _)| s.to_string());
        let (conf, how) = if let Some(c) = &self.m1n1_conf {
            (c.clone(), "chosen with --m1n1-config".to_string())
        } else {
            match &found {
                None => (
                    M1N1_CONF.to_string(),
                    format!(
                        "no update-m1n1 installed ({}); assuming {M1N1_CONF}",
                        M1N1_SCRIPTS.join(", ")
                    ),
                ),
                Some((s, text)) => {
                    let confs = sourced_configs(text);
                    match confs.as_slice() {
                        [] => (
                            M1N1_CONF.to_string(),
                            format!("{s} sources no configuration file ane-dt recognizes; assuming {M1N1_CONF}"),
                        ),
                        [c] => (c.clone(), format!("{s} reads {c}")),
                        [.., c] => (
                            c.clone(),
                            format!("{s} reads {}; using the last, which wins", confs.join(", ")),
                        ),
                    }
                }
            }
        };
        M1n1Script {
            script,
            conf,
            how,
            takes_list,
        }
    }

    /// The configuration files that may hold an ane-dt block: the one the
    /// state names, the one update-m1n1 reads now, and upstream's default
    /// (where earlier ane-dt versions always put it).
    fn conf_candidates(&self) -> Vec<String> {
        let mut c: Vec<String> = Vec::new();
        let st = self.state().and_then(|s| s.conf);
        for p in [
            st,
            Some(self.m1n1_script().conf),
            Some(M1N1_CONF.to_string()),
        ]
        .into_iter()
        .flatten()
        {
            if !c.contains(&p) {
                c.push(p);
            }
        }
        c
    }

    fn has_block(&self, conf: &str) -> bool {
        fs::read_to_string(self.at(conf))
            .map(|t| t.lines().any(|l| l == BEGIN))
            .unwrap_or(false)
    }

    /// The configuration file holding an ane-dt block, if any.
    /// [`omarchy_merges`] for this root's update-m1n1 and its
    /// configuration.
    pub fn omarchy_check(&self) -> Result<String, String> {
        let m = self.m1n1_script();
        let conf_text = fs::read_to_string(self.at(&m.conf)).ok();
        let script_text = m
            .script
            .as_ref()
            .and_then(|s| fs::read_to_string(self.at(s)).ok());
        omarchy_merges(
            &m.conf,
            conf_text.as_deref(),
            m.script.as_deref(),
            script_text.as_deref(),
        )
    }

    fn hooked_conf(&self) -> Option<String> {
        self.conf_candidates()
            .into_iter()
            .find(|c| self.has_block(c))
    }

    fn hook_present(&self) -> bool {
        self.hooked_conf().is_some()
    }
}

fn supported() -> String {
    let names: Vec<&str> = boards::BOARDS.iter().map(|b| b.dtb).collect();
    format!("overlays exist for: {}", names.join(", "))
}

/// Compares kernel release strings numerically where they hold numbers
/// (`7.10.1` > `7.9.2`).
pub fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, String)> {
        let mut out: Vec<(bool, String)> = Vec::new();
        for c in s.chars() {
            let d = c.is_ascii_digit();
            match out.last_mut() {
                Some((kind, cur)) if *kind == d => cur.push(c),
                _ => out.push((d, c.to_string())),
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(cb.iter()) {
        let o = if x.0 && y.0 {
            let (nx, ny) = (x.1.trim_start_matches('0'), y.1.trim_start_matches('0'));
            nx.len().cmp(&ny.len()).then_with(|| nx.cmp(ny))
        } else {
            x.1.cmp(&y.1)
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len())
}

/// A shell-quoted string.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// update-m1n1 only takes these from a DTB directory.
fn m1n1_takes(name: &str) -> bool {
    name.ends_with(".dtb") && (name.starts_with("t6") || name.starts_with("t81"))
}

/// What `status` found, as lines of text.
pub fn status(env: &Env) -> Result<String, Error> {
    let mut s = String::new();
    let board = match env.board() {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(s, "board:      unsupported ({e})");
            return Ok(s);
        }
    };
    let _ = writeln!(
        s,
        "board:      {} ({}), overlay {}-ane",
        board.dtb, board.name, board.overlay
    );
    let ovl = env.overlay_path(board);
    let _ = writeln!(
        s,
        "overlay:    {}{}",
        ovl.display(),
        if ovl.is_file() {
            ""
        } else {
            " (missing: install ane-tools)"
        }
    );
    match env.stock_dir(board) {
        Ok(dir) => {
            let stock = format!("{dir}/{}.dtb", board.dtb);
            let _ = writeln!(s, "stock dtb:  {stock}");
            if let Ok(f) = read_fdt(&env.at(&stock)) {
                let anes: Vec<String> = f
                    .find_ane_nodes()
                    .into_iter()
                    .filter(|p| f.enabled(p))
                    .collect();
                if !anes.is_empty() {
                    let _ = writeln!(
                        s,
                        "            already has an enabled ANE node: {}",
                        anes.join(", ")
                    );
                }
            }
            match env.state() {
                None => {
                    let _ = writeln!(s, "installed:  no");
                }
                Some(st) => {
                    let now = fs::read(env.at(&st.stock)).map(|b| sha256::hex(&b)).ok();
                    let ovl_now = fs::read(&ovl).map(|b| sha256::hex(&b)).ok();
                    let fresh = now.as_deref() == Some(&st.stock_sha256)
                        && ovl_now.as_deref() == Some(&st.overlay_sha256)
                        && st.stock == stock;
                    let _ = writeln!(
                        s,
                        "installed:  {} (made from {})",
                        if fresh {
                            "yes, current"
                        } else {
                            "STALE: the stock tree or the overlay changed; run `ane-dt install`"
                        },
                        st.stock
                    );
                }
            }
        }
        Err(e) => {
            let _ = writeln!(s, "stock dtb:  {e}");
        }
    }
    let (delivery, why) = env.delivery();
    let _ = writeln!(s, "delivery:   {} ({why})", delivery.name());
    if delivery == Delivery::Omarchy {
        let _ = writeln!(
            s,
            "omarchy:    {}",
            match env.omarchy_check() {
                Ok(m) => m,
                Err(e) => format!("OVERLAYS LEFT OUT: {e}"),
            }
        );
    }
    if let Some(p) = env.state().and_then(|st| st.placed) {
        let _ = writeln!(
            s,
            "placed:     {p}{}",
            if env.at(&p).is_file() {
                ""
            } else {
                " (MISSING)"
            }
        );
    }
    let m = env.m1n1_script();
    let _ = writeln!(s, "m1n1 conf:  {} ({})", m.conf, m.how);
    let _ = writeln!(
        s,
        "update-m1n1: {}",
        match env.hooked_conf() {
            Some(c) if c == m.conf => format!("{c} sources {STATE_DIR}/update-m1n1.sh"),
            Some(c) => format!(
                "{c} sources {STATE_DIR}/update-m1n1.sh, but update-m1n1 reads {}: run `ane-dt install` again",
                m.conf
            ),
            None => format!("{} not hooked", m.conf),
        }
    );
    let running = running_ane_nodes(&env.at("/sys/firmware/devicetree/base"));
    let _ = writeln!(
        s,
        "running:    {}",
        if running.is_empty() {
            "the booted device tree has no ANE node".to_string()
        } else {
            format!("ANE node in the booted tree: {}", running.join(", "))
        }
    );
    Ok(s)
}

fn running_ane_nodes(base: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(base.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        if let Ok(c) = fs::read(dir.join("compatible")) {
            if c.split(|&b| b == 0)
                .any(|x| x.starts_with(b"apple,t") && x.ends_with(b"-ane"))
            {
                out.push(if rel.is_empty() {
                    "/".into()
                } else {
                    rel.clone()
                });
            }
        }
        if rel.matches('/').count() >= 3 {
            continue;
        }
        if let Ok(rd) = fs::read_dir(&dir) {
            for e in rd.filter_map(|e| e.ok()) {
                let p = e.path();
                if p.is_dir() && !p.is_symlink() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    stack.push((p, format!("{rel}/{name}")));
                }
            }
        }
    }
    out.sort();
    out
}

/// Saves the pre-install state (update-m1n1's configuration and the stock
/// board DTB) once; later calls keep the first backup.
pub fn backup(env: &Env) -> Result<String, Error> {
    let board = env.board()?;
    let dir = env.stock_dir(board)?;
    let bdir = env.at(&format!("{STATE_DIR}/backup"));
    if bdir.join("done").is_file() {
        return Ok(format!(
            "backup already present in {STATE_DIR}/backup (kept)\n"
        ));
    }
    fs::create_dir_all(&bdir).map_err(io(format!("creating {}", bdir.display())))?;
    let conf = env.m1n1_script().conf;
    match fs::read(env.at(&conf)) {
        Ok(text) => {
            if env.has_block(&conf) {
                return refuse(format!(
                    "{conf} already holds the ane-dt block but no backup exists; run `ane-dt remove` first"
                ));
            }
            fs::write(bdir.join("update-m1n1"), text).map_err(io("writing the backup"))?
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::write(bdir.join("update-m1n1.absent"), b"").map_err(io("writing the backup"))?
        }
        Err(e) => return Err(Error::Io(format!("reading {conf}"), e)),
    }
    let stock = format!("{dir}/{}.dtb", board.dtb);
    fs::copy(env.at(&stock), bdir.join(format!("{}.dtb", board.dtb)))
        .map_err(io(format!("copying {stock}")))?;
    fs::write(bdir.join("done"), format!("stock={stock}\nconf={conf}\n"))
        .map_err(io("writing the backup"))?;
    Ok(format!("saved {conf} and {stock} to {STATE_DIR}/backup\n"))
}

/// Installs the overlay for this board the way this system takes it
/// (`Env::delivery`), and says which way that was.
pub fn install(env: &Env, merger: &dyn Merger) -> Result<String, Error> {
    let (delivery, why) = env.delivery();
    let installed = env.state().map(|st| st.delivery);
    if let Some(d) = installed.filter(|d| *d != delivery) {
        return refuse(format!(
            "the overlay is installed through {} already, not {}; run `ane-dt remove` first",
            d.name(),
            delivery.name()
        ));
    }
    let head = format!("delivery: {} ({why})\n", delivery.name());
    let body = match delivery {
        Delivery::M1n1 => install_m1n1(env, merger)?,
        Delivery::Omarchy => install_omarchy(env, merger)?,
    };
    Ok(head + &body)
}

/// Merges the overlay into `stock` as a trial (into the state directory,
/// removed again) and checks the result: the overlay applies to this tree.
fn trial_merge(
    env: &Env,
    merger: &dyn Merger,
    base: &Fdt,
    stock: &str,
    ovl: &Path,
    board: &Board,
) -> Result<Vec<u8>, Error> {
    let sdir = env.at(STATE_DIR);
    fs::create_dir_all(&sdir).map_err(io(format!("creating {}", sdir.display())))?;
    let out = sdir.join("trial.dtb");
    let res = merger
        .merge(&env.at(stock), ovl, &out)
        .and_then(|()| fs::read(&out).map_err(io("reading the merged tree")))
        .and_then(|blob| verify(base, &blob, board).map(|()| blob));
    let _ = fs::remove_file(&out);
    res
}

/// Omarchy: the overlay goes into omarchy-mac-boot's package-overlay
/// directory under the board's prefix, once it is proven to merge into the
/// stock tree. Nothing else is written but ane-dt's state.
fn install_omarchy(env: &Env, merger: &dyn Merger) -> Result<String, Error> {
    let board = env.board()?;
    if let Some(c) = env.hooked_conf() {
        return refuse(format!(
            "{c} holds an ane-dt block from an update-m1n1 install; run `ane-dt remove` first"
        ));
    }
    if let Err(e) = env.omarchy_check() {
        return refuse(e);
    }
    let ovl = env.overlay_path(board);
    if !ovl.is_file() {
        return refuse(format!("{} is missing (install ane-tools)", ovl.display()));
    }
    let ovl_blob = fs::read(&ovl).map_err(io(format!("reading {}", ovl.display())))?;
    let o = Fdt::parse(&ovl_blob).map_err(|e| Error::Refused(format!("{}: {e}", ovl.display())))?;
    let skip = o.strings("/", SKIP_IF_COMPATIBLE);
    if !skip.iter().any(|c| c == board.ane_compatible) {
        return refuse(format!(
            "{} lacks {SKIP_IF_COMPATIBLE} = \"{}\": omarchy-mac-boot would apply it over a kernel tree that has the node; install the overlay of this ane-tools version",
            ovl.display(),
            board.ane_compatible
        ));
    }
    let Stock {
        dir: _,
        path: stock,
        blob: stock_blob,
        fdt: base,
    } = Stock::read(env, board)?;
    let prefix_dir = format!("{OMARCHY_OVERLAYS}/{}", board.dtb);
    let placed = format!("{prefix_dir}/{OMARCHY_NAME}");
    let ovl_sha = sha256::hex(&ovl_blob);
    let stock_sha = sha256::hex(&stock_blob);
    if let Some(st) = env.state() {
        let same = fs::read(env.at(&placed))
            .map(|b| sha256::hex(&b) == ovl_sha)
            .unwrap_or(false);
        if same && st.placed.as_deref() == Some(placed.as_str()) {
            return Ok(format!("already installed as {placed}; nothing to do\n"));
        }
    }
    let existing = enabled_ane_nodes(&base);
    let mut report = String::new();
    if !existing.is_empty() {
        let _ = writeln!(
            report,
            "{stock} already describes the ANE ({}); omarchy-mac-boot will leave the overlay out while it does",
            existing.join(", ")
        );
    }
    let merged = trial_merge(env, merger, &base, &stock, &ovl, board)?;
    let pdir = env.at(&prefix_dir);
    let created = !pdir.is_dir();
    fs::create_dir_all(&pdir).map_err(io(format!("creating {prefix_dir}")))?;
    write_atomic(&env.at(&placed), &ovl_blob)?;
    let st = State {
        board: board.dtb.to_string(),
        stock: stock.clone(),
        stock_sha256: stock_sha,
        overlay_sha256: ovl_sha,
        merged_sha256: sha256::hex(&merged),
        delivery: Delivery::Omarchy,
        placed: Some(placed.clone()),
        placed_dir_created: created,
        conf: None,
    };
    fs::write(env.at(STATE_DIR).join("state"), st.to_text()).map_err(io("writing the state"))?;
    let _ = writeln!(
        report,
        "placed {}-ane as {placed} (it merges into {stock}); {} untouched",
        board.overlay,
        env.m1n1_script().conf
    );
    let _ = writeln!(
        report,
        "omarchy-mac-boot merges it at every update-m1n1 run. Next: `sudo update-m1n1`, reboot, then `ane-probe info`."
    );
    Ok(report)
}

/// The board's stock tree: its path, bytes and parse.
struct Stock {
    /// The directory of the board's stock DTBs.
    dir: String,
    path: String,
    blob: Vec<u8>,
    fdt: Fdt,
}

impl Stock {
    /// Reads and parses the stock tree of `board`, refusing a tree whose
    /// root compatible is another board's.
    fn read(env: &Env, board: &Board) -> Result<Stock, Error> {
        let dir = env.stock_dir(board)?;
        let path = format!("{dir}/{}.dtb", board.dtb);
        let blob = fs::read(env.at(&path)).map_err(io(format!("reading {path}")))?;
        let fdt = Fdt::parse(&blob).map_err(|e| Error::Refused(format!("{path}: {e}")))?;
        if fdt.strings("/", "compatible").first().map(String::as_str) != Some(board.compatible) {
            return refuse(format!(
                "{path} is not the tree of {} ({})",
                board.dtb, board.compatible
            ));
        }
        Ok(Stock {
            dir,
            path,
            blob,
            fdt,
        })
    }
}

/// The enabled ANE nodes of `fdt`.
fn enabled_ane_nodes(fdt: &Fdt) -> Vec<String> {
    fdt.find_ane_nodes()
        .into_iter()
        .filter(|p| fdt.enabled(p))
        .collect()
}

/// Merges the overlay for this board and hooks update-m1n1 up to the result.
fn install_m1n1(env: &Env, merger: &dyn Merger) -> Result<String, Error> {
    let board = env.board()?;
    let m = env.m1n1_script();
    if m.takes_list == Some(false) {
        return refuse(format!(
            "{} never uses $DTBS unquoted, so it cannot take the list of device trees ane-dt would give it in DTBS; nothing changed (please report this update-m1n1)",
            m.script.as_deref().unwrap_or("update-m1n1")
        ));
    }
    let ovl = env.overlay_path(board);
    if !ovl.is_file() {
        return refuse(format!("{} is missing (install ane-tools)", ovl.display()));
    }
    let Stock {
        dir,
        path: stock,
        blob: stock_blob,
        fdt: base,
    } = Stock::read(env, board)?;
    let existing = enabled_ane_nodes(&base);
    if !existing.is_empty() {
        return Ok(format!(
            "{stock} already describes the ANE ({}); nothing to do{}\n",
            existing.join(", "),
            if env.hook_present() {
                " (`ane-dt remove` drops the old overlay setup)"
            } else {
                ""
            }
        ));
    }
    let ovl_blob = fs::read(&ovl).map_err(io(format!("reading {}", ovl.display())))?;
    let stock_sha = sha256::hex(&stock_blob);
    let ovl_sha = sha256::hex(&ovl_blob);
    let sdir = env.at(STATE_DIR);
    let merged = sdir.join("dtbs/apple").join(format!("{}.dtb", board.dtb));

    if let Some(st) = env.state() {
        let merged_ok = fs::read(&merged)
            .map(|b| sha256::hex(&b) == st.merged_sha256)
            .unwrap_or(false);
        let fragment_ok = fs::read_to_string(sdir.join("update-m1n1.sh"))
            .is_ok_and(|f| f == fragment(&stock, &stock_sha));
        if st.stock == stock
            && st.stock_sha256 == stock_sha
            && st.overlay_sha256 == ovl_sha
            && merged_ok
            && fragment_ok
            && env.hooked_conf().as_deref() == Some(m.conf.as_str())
        {
            return Ok(format!(
                "already installed for {} from {stock}; nothing to do\n",
                board.dtb
            ));
        }
    }

    let mut report = format!("update-m1n1: {}\n", m.how);
    report += &backup(env)?;

    // Merge into a new DTB set next to the old one, check it, then swap.
    let new = sdir.join("dtbs.new");
    let _ = fs::remove_dir_all(&new);
    fs::create_dir_all(new.join("apple")).map_err(io(format!("creating {}", new.display())))?;
    let out = new.join("apple").join(format!("{}.dtb", board.dtb));
    let merged_blob = merger
        .merge(&env.at(&stock), &ovl, &out)
        .and_then(|()| fs::read(&out).map_err(io("reading the merged tree")))
        .and_then(|blob| verify(&base, &blob, board).map(|()| blob))
        .inspect_err(|_| {
            let _ = fs::remove_dir_all(&new);
        })?;
    let rd = fs::read_dir(env.at(&dir)).map_err(io(format!("listing {dir}")))?;
    let mut linked = 0;
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !m1n1_takes(&name) || name == format!("{}.dtb", board.dtb) {
            continue;
        }
        // The links name the real system path (what update-m1n1 will read).
        std::os::unix::fs::symlink(format!("{dir}/{name}"), new.join("apple").join(&name))
            .map_err(io("linking the stock DTBs"))?;
        linked += 1;
    }
    let old = sdir.join("dtbs");
    let _ = fs::remove_dir_all(&old);
    fs::rename(&new, &old).map_err(io("installing the DTB set"))?;

    let st = State {
        board: board.dtb.to_string(),
        stock: stock.clone(),
        stock_sha256: stock_sha.clone(),
        overlay_sha256: ovl_sha,
        merged_sha256: sha256::hex(&merged_blob),
        delivery: Delivery::M1n1,
        placed: None,
        placed_dir_created: false,
        conf: Some(m.conf.clone()),
    };
    fs::write(sdir.join("state"), st.to_text()).map_err(io("writing the state"))?;
    fs::write(sdir.join("update-m1n1.sh"), fragment(&stock, &stock_sha))
        .map_err(io("writing the fragment"))?;
    // A block in a file this update-m1n1 does not read (an older ane-dt's
    // /etc/default on Fedora) is moved to the one it reads.
    for c in env.conf_candidates() {
        if c != m.conf && env.has_block(&c) {
            unhook(env, &c, &mut report)?;
        }
    }
    hook(env, &m.conf, &mut report)?;
    let _ = writeln!(
        report,
        "merged {}-ane into {} ({} other stock DTBs linked) in {STATE_DIR}/dtbs",
        board.overlay, stock, linked
    );
    let _ = writeln!(
        report,
        "update-m1n1 now takes its device trees from there (DTBS={DTBS_GLOB}, set in {}). Next: `sudo update-m1n1`, reboot, then `ane-probe info`.",
        m.conf
    );
    Ok(report)
}

/// The merged tree keeps the board's compatible and every stock node, and
/// has exactly one enabled node of the expected ANE compatible.
pub fn verify(base: &Fdt, merged: &[u8], board: &Board) -> Result<(), Error> {
    let m = Fdt::parse(merged).map_err(|e| Error::Refused(format!("merged tree: {e}")))?;
    if m.prop("/", "compatible") != base.prop("/", "compatible") {
        return refuse("merged tree: the board compatible changed");
    }
    if let Some(p) = base.nodes.keys().find(|p| !m.has_node(p)) {
        return refuse(format!(
            "merged tree: node {p} of the stock tree is missing"
        ));
    }
    for p in base.nodes.keys() {
        if base.phandle(p).is_some() && m.phandle(p) != base.phandle(p) {
            return refuse(format!(
                "merged tree: the phandle of {p} changed (fdtoverlay before dtc 1.7.1 renumbers a node an overlay fragment labels: install dtc 1.7.1 or newer)"
            ));
        }
    }
    if m.has_node("/__symbols__") && !base.has_node("/__symbols__")
        || m.has_node("/ane-base-symbols")
    {
        return refuse("merged tree: overlay bookkeeping was left in");
    }
    let anes = m.find_compatible(board.ane_compatible);
    match anes.as_slice() {
        [p] if m.enabled(p) => Ok(()),
        _ => refuse(format!(
            "merged tree: expected one enabled {} node, found {:?}",
            board.ane_compatible, anes
        )),
    }
}

/// The shell fragment update-m1n1 sources (it runs with `set -e`: nothing
/// here may fail).
pub fn fragment(stock: &str, stock_sha: &str) -> String {
    format!(
        "# Generated by ane-dt. Gives update-m1n1 the device trees with the ANE\n\
         # overlay, as long as the stock tree they were made from is unchanged;\n\
         # after a kernel update the stock trees are used until `ane-dt install`\n\
         # runs again.\n\
         ane_dt_stock={stock}\n\
         ane_dt_sum={sum}\n\
         if [ -r \"$ane_dt_stock\" ] && [ \"$(sha256sum <\"$ane_dt_stock\" | cut -d' ' -f1)\" = \"$ane_dt_sum\" ]; then\n\
         \tDTBS={dtbs}\n\
         else\n\
         \techo \"ane-dt: $ane_dt_stock changed since 'ane-dt install'; using the stock device trees (run: ane-dt install)\" >&2\n\
         fi\n\
         unset ane_dt_stock ane_dt_sum\n",
        stock = sq(stock),
        sum = sq(stock_sha),
        dtbs = sq(DTBS_GLOB),
    )
}

/// Where `hook` records what the configuration file was before it added
/// the block: `hook/conf` names the file, `hook/before` holds its bytes, or
/// `hook/absent` says it did not exist.
const HOOK_DIR: &str = "/var/lib/ane-dt/hook";

/// Appends the block to `conf` (creating the file if needed) and records
/// what the file was before, so that `unhook` can restore it exactly.
fn hook(env: &Env, conf: &str, report: &mut String) -> Result<(), Error> {
    if env.has_block(conf) {
        return Ok(());
    }
    let path = env.at(conf);
    let hdir = env.at(HOOK_DIR);
    let _ = fs::remove_dir_all(&hdir);
    fs::create_dir_all(&hdir).map_err(io(format!("creating {HOOK_DIR}")))?;
    let before = match fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::Io(format!("reading {conf}"), e)),
    };
    match &before {
        Some(b) => fs::write(hdir.join("before"), b),
        None => fs::write(hdir.join("absent"), b""),
    }
    .and_then(|()| fs::write(hdir.join("conf"), conf))
    .map_err(io(format!("writing {HOOK_DIR}")))?;
    let mut text = String::from_utf8(before.unwrap_or_default())
        .map_err(|_| Error::Refused(format!("{conf} is not UTF-8 text; not touching it")))?;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let _ = write!(
        text,
        "{BEGIN}\nif [ -r {f} ]; then . {f}; fi\n{END}\n",
        f = sq(&format!("{STATE_DIR}/update-m1n1.sh"))
    );
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    }
    write_atomic(&path, text.as_bytes())?;
    let _ = writeln!(report, "added the ane-dt block to {conf}");
    Ok(())
}

/// Takes the block out of `conf` again: the file exactly as it was before
/// `hook` (bytes and mode; removed if hook created it) when nothing else
/// changed in it since, else the file minus the block's lines.
fn unhook(env: &Env, conf: &str, report: &mut String) -> Result<(), Error> {
    let path = env.at(conf);
    let text = fs::read_to_string(&path).map_err(io(format!("reading {conf}")))?;
    let mut out = String::new();
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end_matches('\n');
        if l == BEGIN {
            inside = true;
        } else if inside && l == END {
            inside = false;
        } else if !inside {
            out.push_str(line);
        }
    }
    let hdir = env.at(HOOK_DIR);
    let recorded = fs::read_to_string(hdir.join("conf")).is_ok_and(|c| c == conf);
    let absent = if recorded {
        hdir.join("absent").is_file()
    } else {
        // Hooked by an earlier ane-dt, which recorded only the first backup.
        env.at(&format!("{STATE_DIR}/backup/update-m1n1.absent"))
            .is_file()
    };
    let before = if recorded {
        fs::read(hdir.join("before")).ok()
    } else {
        None
    };
    if absent && out.trim().is_empty() {
        fs::remove_file(&path).map_err(io(format!("removing {conf}")))?;
        let _ = writeln!(report, "removed {conf} (ane-dt had created it)");
    } else if let Some(b) = before.filter(|b| {
        out.as_bytes() == b.as_slice() || out.as_bytes() == [b.as_slice(), b"\n"].concat()
    }) {
        write_atomic(&path, &b)?;
        let _ = writeln!(report, "restored {conf} as it was before `ane-dt install`");
    } else {
        write_atomic(&path, out.as_bytes())?;
        let _ = writeln!(report, "removed the ane-dt block from {conf}");
    }
    if recorded {
        fs::remove_dir_all(&hdir).map_err(io(format!("removing {HOOK_DIR}")))?;
    }
    Ok(())
}

/// Replaces `path` by `data` atomically, keeping the mode of the file it
/// replaces.
fn write_atomic(path: &Path, data: &[u8]) -> Result<(), Error> {
    let tmp = path.with_extension("ane-dt.tmp");
    fs::write(&tmp, data).map_err(io(format!("writing {}", tmp.display())))?;
    if let Ok(meta) = fs::metadata(path) {
        fs::set_permissions(&tmp, meta.permissions())
            .map_err(io(format!("setting the mode of {}", tmp.display())))?;
    }
    fs::rename(&tmp, path).map_err(io(format!("replacing {}", path.display())))
}

/// Undoes `install`: restores update-m1n1's configuration as it was (or
/// removes the file, if ane-dt created it), drops the merged DTB set, the
/// fragment and the state. The backup is kept.
pub fn remove(env: &Env) -> Result<String, Error> {
    let mut report = String::new();
    if let Some(st) = env.state().filter(|st| st.delivery == Delivery::Omarchy) {
        if let Some(placed) = &st.placed {
            let path = env.at(placed);
            match fs::read(&path) {
                Ok(b) if sha256::hex(&b) != st.overlay_sha256 => {
                    return refuse(format!(
                        "{placed} changed since ane-dt placed it; left in place (remove it by hand, then `ane-dt remove`)"
                    ));
                }
                Ok(_) => {
                    fs::remove_file(&path).map_err(io(format!("removing {placed}")))?;
                    let _ = writeln!(report, "removed {placed}");
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let _ = writeln!(report, "{placed} was already gone");
                }
                Err(e) => return Err(Error::Io(format!("reading {placed}"), e)),
            }
            if st.placed_dir_created {
                if let Some(dir) = path.parent() {
                    // Only while empty: another package's overlay stays.
                    if fs::remove_dir(dir).is_ok() {
                        let _ = writeln!(report, "removed the directory ane-dt had created for it");
                    }
                }
            }
        }
    }
    for c in env.conf_candidates() {
        if env.has_block(&c) {
            unhook(env, &c, &mut report)?;
        }
    }
    // A record whose block is gone already (the file was replaced by hand).
    let _ = fs::remove_dir_all(env.at(HOOK_DIR));
    let sdir = env.at(STATE_DIR);
    let mut removed = false;
    let mut removed_dtbs = false;
    for name in ["dtbs", "dtbs.new"] {
        if sdir.join(name).exists() {
            fs::remove_dir_all(sdir.join(name))
                .map_err(io(format!("removing {STATE_DIR}/{name}")))?;
            removed_dtbs = true;
        }
    }
    for name in ["state", "update-m1n1.sh", "trial.dtb"] {
        if sdir.join(name).exists() {
            fs::remove_file(sdir.join(name)).map_err(io(format!("removing {STATE_DIR}/{name}")))?;
            removed = true;
        }
    }
    if report.is_empty() && !removed && !removed_dtbs {
        return Ok("nothing installed; nothing to remove\n".to_string());
    }
    if removed_dtbs {
        let _ = writeln!(report, "removed the merged device trees from {STATE_DIR}");
    }
    let _ = writeln!(
        report,
        "Next: `sudo update-m1n1` and reboot to boot the stock device tree again."
    );
    Ok(report)
}
