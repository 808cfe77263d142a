// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! ane-dt on fake system trees: install, status, idempotence, staleness,
//! backup, remove, refusals. The merge itself is faked (dtc's tools may be
//! missing on the host); one test runs the real recipe when fdtoverlay is
//! installed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use ane_dt::fdt::{Builder, Fdt};
use ane_dt::{
    backup, fragment, install, remove, sourced_configs, status, uses_dtbs_unquoted, DtcMerger, Env,
    Error, Merger,
};

static SEQ: AtomicUsize = AtomicUsize::new(0);

struct Tree {
    root: PathBuf,
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

const STOCK: &str = "/usr/lib/modules/7.3.4-1-ARCH/dtbs/apple";
const M1N1_ORIG: &str =
    "# update-m1n1 configuration\nDTBS=/usr/lib/modules/7.3.4-1-ARCH/dtbs/apple\n";

fn put(root: &Path, abs: &str, data: &[u8]) {
    let p = root.join(abs.trim_start_matches('/'));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

fn read(root: &Path, abs: &str) -> Vec<u8> {
    fs::read(root.join(abs.trim_start_matches('/'))).unwrap()
}

fn exists(root: &Path, abs: &str) -> bool {
    root.join(abs.trim_start_matches('/')).exists()
}

/// Writes a tree from a path → properties map, in proper nesting order.
fn emit(nodes: &BTreeMap<String, BTreeMap<String, Vec<u8>>>) -> Vec<u8> {
    fn parent(p: &str) -> &str {
        match p.rfind('/') {
            Some(0) => "/",
            Some(i) => &p[..i],
            None => "",
        }
    }
    fn node(b: &mut Builder, nodes: &BTreeMap<String, BTreeMap<String, Vec<u8>>>, path: &str) {
        let name = if path == "/" {
            ""
        } else {
            path.rsplit('/').next().unwrap()
        };
        b.begin(name);
        for (k, v) in &nodes[path] {
            b.prop(k, v);
        }
        for child in nodes.keys().filter(|c| *c != "/" && parent(c) == path) {
            node(b, nodes, child);
        }
        b.end();
    }
    let mut b = Builder::new();
    node(&mut b, nodes, "/");
    b.finish()
}

fn board_tree(compat: &[&str], extra: &str) -> Vec<u8> {
    let mut b = Builder::new();
    b.begin("")
        .prop_strs("compatible", compat)
        .prop_strs("model", &[extra])
        .begin("soc")
        .begin("power-management@23b700000")
        .begin("power-controller@470")
        .prop_u32s("#power-domain-cells", &[0])
        .prop_u32s("phandle", &[5])
        .end()
        .end()
        .end()
        .end();
    b.finish()
}

/// A compiled overlay as dtc makes it from the project's sources: an empty
/// fragment labelling the stock node by path (phandle 1 in the overlay),
/// one fragment adding the engine with a local reference to it, and the
/// root's omarchy,skip-if-compatible.
fn overlay(ane_compat: &str) -> Vec<u8> {
    let mut b = Builder::new();
    b.begin("")
        .prop_strs("omarchy,skip-if-compatible", &[ane_compat])
        .begin("fragment@0")
        .prop_strs(
            "target-path",
            &["/soc/power-management@23b700000/power-controller@470"],
        )
        .begin("__overlay__")
        .prop_u32s("phandle", &[1])
        .end()
        .end()
        .begin("fragment@1")
        .prop_strs("target-path", &["/soc"])
        .begin("__overlay__")
        .begin("npu@26bc04000")
        .prop_strs("compatible", &[ane_compat])
        .prop_u32s("power-domains", &[1])
        .prop_strs("status", &["okay"])
        .end()
        .end()
        .end()
        .begin("__local_fixups__")
        .begin("fragment@1")
        .begin("__overlay__")
        .begin("npu@26bc04000")
        .prop_u32s("power-domains", &[0])
        .end()
        .end()
        .end()
        .end()
        .end();
    b.finish()
}

fn fake_system(compat: &[&str]) -> Tree {
    let root = std::env::temp_dir().join(format!(
        "ane-dt-test-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&root);
    let mut c = Vec::new();
    for s in compat {
        c.extend_from_slice(s.as_bytes());
        c.push(0);
    }
    put(&root, "/sys/firmware/devicetree/base/compatible", &c);
    put(
        &root,
        &format!("{STOCK}/t8103-j274.dtb"),
        &board_tree(&["apple,j274", "apple,t8103"], "stock"),
    );
    put(
        &root,
        &format!("{STOCK}/t8103-j293.dtb"),
        &board_tree(&["apple,j293", "apple,t8103"], "stock"),
    );
    put(
        &root,
        &format!("{STOCK}/t6001-j314c.dtb"),
        &board_tree(&["apple,j314c", "apple,t6001"], "x"),
    );
    put(
        &root,
        &format!("{STOCK}/t8112-j413.dtb"),
        &board_tree(&["apple,j413", "apple,t8112"], "x"),
    );
    put(
        &root,
        &format!("{STOCK}/s5l8960x-j71.dtb"),
        b"not taken by update-m1n1",
    );
    // An older kernel's trees: the newest kernel must win.
    put(
        &root,
        "/usr/lib/modules/7.3.2-1-ARCH/dtbs/apple/t8103-j274.dtb",
        &board_tree(&["apple,j274", "apple,t8103"], "old"),
    );
    put(
        &root,
        "/usr/share/ane/dt/t8103-ane.dtbo",
        &overlay("apple,t8103-ane"),
    );
    put(&root, "/etc/default/update-m1n1", M1N1_ORIG.as_bytes());
    Tree { root }
}

fn env(t: &Tree) -> Env {
    Env {
        root: t.root.clone(),
        ..Env::default()
    }
}

/// Adds the overlay's node by hand, as fdtoverlay would (or breaks the
/// result on purpose).
struct FakeMerger {
    drop_stock_node: bool,
    calls: std::cell::Cell<usize>,
}

impl FakeMerger {
    fn good() -> Self {
        FakeMerger {
            drop_stock_node: false,
            calls: 0.into(),
        }
    }
}

impl Merger for FakeMerger {
    fn merge(&self, base: &Path, overlay: &Path, out: &Path) -> Result<(), Error> {
        self.calls.set(self.calls.get() + 1);
        let mut f = Fdt::parse(&fs::read(base).unwrap()).unwrap();
        let o = Fdt::parse(&fs::read(overlay).unwrap()).unwrap();
        let compat = o
            .prop("/fragment@1/__overlay__/npu@26bc04000", "compatible")
            .unwrap()
            .to_vec();
        let mut props = BTreeMap::new();
        props.insert("compatible".to_string(), compat);
        props.insert("power-domains".to_string(), 5u32.to_be_bytes().to_vec());
        f.nodes.insert("/soc/npu@26bc04000".into(), props);
        if self.drop_stock_node {
            f.nodes
                .remove("/soc/power-management@23b700000/power-controller@470");
        }
        fs::write(out, emit(&f.nodes)).unwrap();
        Ok(())
    }
}

#[test]
fn install_status_idempotent_remove() {
    let t = fake_system(&["apple,j274", "apple,t8103", "apple,arm-platform"]);
    let e = env(&t);
    let stock_before = read(&t.root, &format!("{STOCK}/t8103-j274.dtb"));

    let s = status(&e).unwrap();
    assert!(s.contains("board:      t8103-j274"), "{s}");
    assert!(
        s.contains(&format!("stock dtb:  {STOCK}/t8103-j274.dtb")),
        "newest kernel first: {s}"
    );
    assert!(s.contains("installed:  no"), "{s}");
    assert!(s.contains("not hooked"), "{s}");

    let m = FakeMerger::good();
    let out = install(&e, &m).unwrap();
    assert!(out.contains("saved"), "first install backs up: {out}");
    assert!(out.contains("sudo update-m1n1"), "{out}");
    assert_eq!(m.calls.get(), 1);

    // The stock tree is untouched; the merged copy has the ANE node.
    assert_eq!(
        read(&t.root, &format!("{STOCK}/t8103-j274.dtb")),
        stock_before
    );
    let merged = Fdt::parse(&read(&t.root, "/var/lib/ane-dt/dtbs/apple/t8103-j274.dtb")).unwrap();
    assert_eq!(
        merged.find_compatible("apple,t8103-ane"),
        ["/soc/npu@26bc04000"]
    );
    // The other trees update-m1n1 takes are linked; others are not.
    let dir = t.root.join("var/lib/ane-dt/dtbs/apple");
    for name in ["t8103-j293.dtb", "t6001-j314c.dtb", "t8112-j413.dtb"] {
        let l = fs::read_link(dir.join(name)).unwrap();
        assert_eq!(l, PathBuf::from(format!("{STOCK}/{name}")));
    }
    assert!(!dir.join("s5l8960x-j71.dtb").exists());

    // update-m1n1's configuration: the original, then one block.
    let conf = String::from_utf8(read(&t.root, "/etc/default/update-m1n1")).unwrap();
    assert!(conf.starts_with(M1N1_ORIG), "{conf}");
    assert_eq!(conf.matches("# BEGIN ane-dt").count(), 1);
    assert!(conf.contains(
        "if [ -r '/var/lib/ane-dt/update-m1n1.sh' ]; then . '/var/lib/ane-dt/update-m1n1.sh'; fi"
    ));
    // The backup holds the pre-install state.
    assert_eq!(
        read(&t.root, "/var/lib/ane-dt/backup/update-m1n1"),
        M1N1_ORIG.as_bytes()
    );
    assert_eq!(
        read(&t.root, "/var/lib/ane-dt/backup/t8103-j274.dtb"),
        stock_before
    );

    let s = status(&e).unwrap();
    assert!(s.contains("installed:  yes, current"), "{s}");
    assert!(s.contains("sources /var/lib/ane-dt/update-m1n1.sh"), "{s}");

    // Idempotent: nothing merged or written again.
    let out = install(&e, &m).unwrap();
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(m.calls.get(), 1);
    assert_eq!(
        String::from_utf8(read(&t.root, "/etc/default/update-m1n1")).unwrap(),
        conf
    );
    assert!(backup(&e).unwrap().contains("kept"));

    // A kernel update changes the stock tree: stale until installed again.
    put(
        &t.root,
        &format!("{STOCK}/t8103-j274.dtb"),
        &board_tree(&["apple,j274", "apple,t8103"], "new kernel"),
    );
    assert!(status(&e).unwrap().contains("STALE"));
    let out = install(&e, &m).unwrap();
    assert!(out.contains("merged"), "{out}");
    assert_eq!(m.calls.get(), 2);
    assert_eq!(
        conf,
        String::from_utf8(read(&t.root, "/etc/default/update-m1n1")).unwrap()
    );
    assert_eq!(
        read(&t.root, "/var/lib/ane-dt/backup/t8103-j274.dtb"),
        stock_before,
        "first backup kept"
    );

    // Remove restores the configuration exactly and keeps the backup.
    let out = remove(&e).unwrap();
    assert!(out.contains("restored /etc/default/update-m1n1"), "{out}");
    assert_eq!(
        read(&t.root, "/etc/default/update-m1n1"),
        M1N1_ORIG.as_bytes()
    );
    assert!(!exists(&t.root, "/var/lib/ane-dt/dtbs"));
    assert!(!exists(&t.root, "/var/lib/ane-dt/state"));
    assert!(!exists(&t.root, "/var/lib/ane-dt/update-m1n1.sh"));
    assert!(exists(&t.root, "/var/lib/ane-dt/backup/update-m1n1"));
    assert!(remove(&e).unwrap().contains("nothing to remove"));
    assert!(status(&e).unwrap().contains("installed:  no"));
}

#[test]
fn unknown_boards_are_refused_and_nothing_is_written() {
    let t = fake_system(&["apple,j413", "apple,t8112", "apple,arm-platform"]);
    let e = env(&t);
    let m = FakeMerger::good();
    match install(&e, &m) {
        Err(Error::Refused(msg)) => {
            assert!(msg.contains("no ANE overlay for this machine"), "{msg}");
            assert!(
                msg.contains("t8103-j274"),
                "lists the supported boards: {msg}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(backup(&e), Err(Error::Refused(_))));
    assert!(status(&e).unwrap().contains("board:      unsupported"));
    assert_eq!(m.calls.get(), 0);
    assert!(!exists(&t.root, "/var/lib/ane-dt"));
    assert_eq!(
        read(&t.root, "/etc/default/update-m1n1"),
        M1N1_ORIG.as_bytes()
    );

    // An explicit board without an overlay (M1 Pro) is refused too.
    let e2 = Env {
        board: Some("t6000-j314s".into()),
        ..env(&t)
    };
    assert!(matches!(install(&e2, &m), Err(Error::Refused(_))));
    // A board whose compatible names another SoC is not a match.
    let t3 = fake_system(&["apple,j274", "apple,t6001"]);
    assert!(matches!(install(&env(&t3), &m), Err(Error::Refused(_))));
}

#[test]
fn a_kernel_tree_with_an_ane_node_is_left_alone() {
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let m = FakeMerger::good();
    // The "stock" tree already has the node (a future kernel).
    let e = env(&t);
    install(&e, &m).unwrap();
    let merged = read(&t.root, "/var/lib/ane-dt/dtbs/apple/t8103-j274.dtb");
    remove(&e).unwrap();
    put(&t.root, &format!("{STOCK}/t8103-j274.dtb"), &merged);
    let out = install(&e, &m).unwrap();
    assert!(out.contains("already describes the ANE"), "{out}");
    assert_eq!(m.calls.get(), 1);
    assert!(!exists(&t.root, "/var/lib/ane-dt/state"));
}

#[test]
fn a_bad_merge_is_caught_before_anything_is_hooked() {
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let e = env(&t);
    let bad = FakeMerger {
        drop_stock_node: true,
        calls: 0.into(),
    };
    match install(&e, &bad) {
        Err(Error::Refused(msg)) => assert!(msg.contains("is missing"), "{msg}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        read(&t.root, "/etc/default/update-m1n1"),
        M1N1_ORIG.as_bytes()
    );
    assert!(!exists(&t.root, "/var/lib/ane-dt/state"));
    assert!(!exists(&t.root, "/var/lib/ane-dt/dtbs"));
    // A wrong overlay (another SoC's compatible) fails verification too.
    put(
        &t.root,
        "/usr/share/ane/dt/t8103-ane.dtbo",
        &overlay("apple,t6000-ane"),
    );
    assert!(matches!(
        install(&e, &FakeMerger::good()),
        Err(Error::Refused(_))
    ));
    assert!(!exists(&t.root, "/var/lib/ane-dt/state"));
}

#[test]
fn missing_inputs_are_refused() {
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let e = env(&t);
    fs::remove_file(t.root.join("usr/share/ane/dt/t8103-ane.dtbo")).unwrap();
    assert!(
        matches!(install(&e, &FakeMerger::good()), Err(Error::Refused(m)) if m.contains("install ane-tools"))
    );
    let e2 = Env {
        dtbs: Some("/nowhere".into()),
        ..env(&t)
    };
    assert!(matches!(
        install(&e2, &FakeMerger::good()),
        Err(Error::Refused(_))
    ));
}

#[test]
fn a_config_created_by_install_is_removed_again() {
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    fs::remove_file(t.root.join("etc/default/update-m1n1")).unwrap();
    let e = Env {
        dtbs: Some(STOCK.into()),
        ..env(&t)
    };
    install(&e, &FakeMerger::good()).unwrap();
    assert!(exists(&t.root, "/etc/default/update-m1n1"));
    remove(&e).unwrap();
    assert!(!exists(&t.root, "/etc/default/update-m1n1"));
}

/// The fragment update-m1n1 sources: DTBS points at the merged set only
/// while the stock tree is unchanged, and it never fails under `set -e`.
#[test]
fn fragment_switches_dtbs_only_while_the_stock_tree_is_unchanged() {
    if Command::new("sh")
        .arg("-c")
        .arg("command -v sha256sum")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("skipped: no sh/sha256sum");
        return;
    }
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let stock = t.root.join("stock.dtb");
    fs::write(&stock, b"stock tree").unwrap();
    let sum = ane_dt::sha256::hex(b"stock tree");
    let frag = t.root.join("frag.sh");
    fs::write(&frag, fragment(stock.to_str().unwrap(), &sum)).unwrap();
    let run = || {
        let o = Command::new("sh")
            .arg("-ec")
            .arg(format!(
                "DTBS=stock-set; . '{}'; echo \"$DTBS\"",
                frag.display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (
            String::from_utf8(o.stdout).unwrap().trim().to_string(),
            String::from_utf8(o.stderr).unwrap(),
        )
    };
    assert_eq!(run().0, "/var/lib/ane-dt/dtbs/apple/*.dtb");
    fs::write(&stock, b"updated kernel tree").unwrap();
    let (dtbs, err) = run();
    assert_eq!(dtbs, "stock-set");
    assert!(err.contains("changed since 'ane-dt install'"), "{err}");
    fs::remove_file(&stock).unwrap();
    assert_eq!(run().0, "stock-set");
}

/// The real merge recipe, when dtc's tools are installed (the project's
/// chroot has them; tools/dt/check.sh runs it on the real board trees).
#[test]
fn dtc_merger_resolves_base_labels_by_path() {
    let have = Command::new("fdtoverlay").arg("--help").output().is_ok();
    if !have {
        eprintln!("skipped: fdtoverlay not installed");
        return;
    }
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let base = t
        .root
        .join(STOCK.trim_start_matches('/'))
        .join("t8103-j274.dtb");
    let ovl = t.root.join("usr/share/ane/dt/t8103-ane.dtbo");
    let out = t.root.join("merged.dtb");
    DtcMerger.merge(&base, &ovl, &out).unwrap();
    let m = Fdt::parse(&fs::read(&out).unwrap()).unwrap();
    let pd = m.prop("/soc/npu@26bc04000", "power-domains").unwrap();
    assert_eq!(
        pd,
        5u32.to_be_bytes(),
        "resolved to the stock node's phandle"
    );
    assert!(!m.has_node("/__symbols__") && !m.has_node("/__local_fixups__"));
    assert!(m.prop("/", "omarchy,skip-if-compatible").is_none());
    let b = Fdt::parse(&fs::read(&base).unwrap()).unwrap();
    ane_dt::verify(
        &b,
        &fs::read(&out).unwrap(),
        ane_dt::boards::by_dtb("t8103-j274").unwrap(),
    )
    .unwrap();

    // Full install with the real merger.
    let e = env(&t);
    install(&e, &DtcMerger).unwrap();
    assert!(status(&e).unwrap().contains("installed:  yes, current"));

    // An overlay that names a node the tree lacks is refused.
    let mut b = Builder::new();
    b.begin("")
        .begin("fragment@0")
        .prop_strs("target-path", &["/soc/nothing@0"])
        .begin("__overlay__")
        .end()
        .end()
        .end();
    let bad = t.root.join("bad.dtbo");
    fs::write(&bad, b.finish()).unwrap();
    assert!(
        matches!(DtcMerger.merge(&base, &bad, &out), Err(Error::Refused(m)) if m.contains("has no node"))
    );
    // One that needs the base's symbols (__fixups__) is refused as well.
    let mut b = Builder::new();
    b.begin("")
        .begin("fragment@0")
        .prop_strs("target-path", &["/soc"])
        .begin("__overlay__")
        .end()
        .end()
        .begin("__fixups__")
        .prop_strs("aic", &["/fragment@0/__overlay__:interrupt-parent:0"])
        .end()
        .end();
    fs::write(&bad, b.finish()).unwrap();
    assert!(
        matches!(DtcMerger.merge(&base, &bad, &out), Err(Error::Refused(m)) if m.contains("__fixups__"))
    );
}

/// Every file below `root` with its contents (symlinks as their targets).
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).unwrap().filter_map(|e| e.ok()) {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                out.insert(rel, fs::read_link(&p).unwrap().display().to_string().into());
            } else if ft.is_dir() {
                out.insert(rel + "/", Vec::new());
                walk(&p, root, out);
            } else {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

const OMARCHY_LIB_TEXT: &[u8] = b"# dtb-overlays.sh (stand-in)\n";
const PLACED: &str = "/usr/lib/omarchy-mac-boot/dtb-overlays/t8103-j274/ane-dt.dtbo";
/// omarchy-mac-boot's /etc/default/update-m1n1, in shape: it sources the
/// library and calls its DTBS function last.
const OMARCHY_CONF: &str = "export LC_ALL=C\n# package overlays\nif [ -r /usr/lib/omarchy-mac/boot/dtb-overlays.sh ]; then\n  . /usr/lib/omarchy-mac/boot/dtb-overlays.sh\n  dtb_overlays_update_m1n1 || :\nfi\n";
/// Arch Linux ARM's update-m1n1 in shape: it sources /etc/default/update-m1n1,
/// then the PKGBUILD's DTBS default, then packs `$DTBS`.
const ALARM_SCRIPT: &str = "#!/bin/sh\n[ -e /etc/default/update-m1n1 ] && . /etc/default/update-m1n1\n: ${DTBS:=$(/bin/ls -d /lib/modules/*-ARCH | sort -rV | head -1)/dtbs/*.dtb}\n: ${CONFIG:=/etc/m1n1.conf}\ncat \"$M1N1\" $DTBS >\"${TARGET}.new\"\n";

/// An Omarchy system: omarchy-mac-boot's library, its overlay directory with
/// another package's overlay, its update-m1n1 configuration, and Arch Linux
/// ARM's update-m1n1.
fn omarchy_system() -> Tree {
    let t = fake_system(&["apple,j274", "apple,t8103", "apple,arm-platform"]);
    put(&t.root, ane_dt::OMARCHY_LIB, OMARCHY_LIB_TEXT);
    put(&t.root, "/etc/default/update-m1n1", OMARCHY_CONF.as_bytes());
    put(&t.root, "/usr/bin/update-m1n1", ALARM_SCRIPT.as_bytes());
    put(
        &t.root,
        "/usr/lib/omarchy-mac-boot/dtb-overlays/t6001/other.dtbo",
        b"another package's overlay",
    );
    fs::create_dir_all(t.root.join("var/lib")).unwrap();
    t
}

#[test]
fn omarchy_install_places_the_overlay_and_remove_takes_exactly_it_away() {
    let t = omarchy_system();
    let e = env(&t);
    let before = snapshot(&t.root);
    let m = FakeMerger::good();

    let s = status(&e).unwrap();
    assert!(
        s.contains("delivery:   omarchy (omarchy-mac-boot found"),
        "{s}"
    );

    let r = install(&e, &m).unwrap();
    assert!(r.starts_with("delivery: omarchy (omarchy-mac-boot found (/usr/lib/omarchy-mac/boot/dtb-overlays.sh))"), "{r}");
    assert!(r.contains(&format!("placed t8103-ane as {PLACED}")), "{r}");
    assert!(r.contains("/etc/default/update-m1n1 untouched"), "{r}");
    assert_eq!(m.calls.get(), 1, "the overlay was proven to merge first");

    // The placed file is the packaged overlay, byte for byte, and carries
    // the property omarchy-mac-boot skips it by.
    let placed = read(&t.root, PLACED);
    assert_eq!(placed, read(&t.root, "/usr/share/ane/dt/t8103-ane.dtbo"));
    let o = Fdt::parse(&placed).unwrap();
    assert_eq!(
        o.strings("/", "omarchy,skip-if-compatible"),
        vec!["apple,t8103-ane".to_string()]
    );

    // Nothing else changed but the new prefix directory, the overlay and
    // ane-dt's own state: no update-m1n1 block, no DTB set, no backup.
    let after = snapshot(&t.root);
    let added: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    assert_eq!(
        added,
        vec![
            "usr/lib/omarchy-mac-boot/dtb-overlays/t8103-j274/",
            "usr/lib/omarchy-mac-boot/dtb-overlays/t8103-j274/ane-dt.dtbo",
            "var/lib/ane-dt/",
            "var/lib/ane-dt/state",
        ]
    );
    for (k, v) in &before {
        assert_eq!(after.get(k), Some(v), "{k} changed");
    }
    let state = String::from_utf8(read(&t.root, "/var/lib/ane-dt/state")).unwrap();
    assert!(state.contains("delivery=omarchy\n"), "{state}");
    assert!(state.contains(&format!("placed={PLACED}\n")), "{state}");
    assert!(state.contains("placed_dir_created=true\n"), "{state}");

    let s = status(&e).unwrap();
    assert!(s.contains(&format!("placed:     {PLACED}\n")), "{s}");
    assert!(
        s.contains("update-m1n1: /etc/default/update-m1n1 not hooked"),
        "{s}"
    );

    // Idempotent.
    let r = install(&e, &m).unwrap();
    assert!(r.contains("already installed"), "{r}");
    assert_eq!(snapshot(&t.root), after);

    // The m1n1 way is refused while this one is installed.
    let e_m1n1 = Env {
        delivery: Some(ane_dt::Delivery::M1n1),
        ..env(&t)
    };
    let r = install(&e_m1n1, &m);
    assert!(
        matches!(&r, Err(Error::Refused(m)) if m.contains("through omarchy already")),
        "{r:?}"
    );

    // Removal restores the tree exactly (ane-dt's empty state directory
    // aside) and leaves the other package's overlay alone.
    let r = remove(&e).unwrap();
    assert!(r.contains(&format!("removed {PLACED}")), "{r}");
    assert!(
        r.contains("removed the directory ane-dt had created"),
        "{r}"
    );
    let mut now = snapshot(&t.root);
    assert_eq!(now.remove("var/lib/ane-dt/"), Some(Vec::new()));
    assert_eq!(now, before);
    assert_eq!(
        remove(&e).unwrap(),
        "nothing installed; nothing to remove\n"
    );
}

#[test]
fn omarchy_remove_keeps_what_it_did_not_place() {
    let t = omarchy_system();
    let e = env(&t);
    // The prefix directory exists already, with another overlay in it.
    let other = "/usr/lib/omarchy-mac-boot/dtb-overlays/t8103-j274/zz-other.dtbo";
    put(&t.root, other, b"other");
    install(&e, &FakeMerger::good()).unwrap();
    let state = String::from_utf8(read(&t.root, "/var/lib/ane-dt/state")).unwrap();
    assert!(state.contains("placed_dir_created=false\n"), "{state}");

    // A placed file someone changed is not removed.
    put(&t.root, PLACED, b"edited");
    let r = remove(&e);
    assert!(
        matches!(&r, Err(Error::Refused(m)) if m.contains("changed since ane-dt placed it")),
        "{r:?}"
    );
    assert_eq!(read(&t.root, PLACED), b"edited");

    put(
        &t.root,
        PLACED,
        &read(&t.root, "/usr/share/ane/dt/t8103-ane.dtbo"),
    );
    remove(&e).unwrap();
    assert!(!exists(&t.root, PLACED));
    assert_eq!(read(&t.root, other), b"other");
}

#[test]
fn omarchy_install_refuses_an_overlay_without_the_skip_property_or_a_bad_merge() {
    let t = omarchy_system();
    let e = env(&t);
    let before = snapshot(&t.root);

    let m = FakeMerger {
        drop_stock_node: true,
        calls: 0.into(),
    };
    assert!(matches!(install(&e, &m), Err(Error::Refused(_))));
    let mut now = snapshot(&t.root);
    now.remove("var/lib/ane-dt/");
    assert_eq!(now, before, "a failed trial merge places nothing");

    // An overlay from before the convention: no omarchy,skip-if-compatible.
    let mut b = Builder::new();
    b.begin("")
        .begin("fragment@0")
        .prop_strs("target-path", &["/soc"])
        .end()
        .end();
    put(&t.root, "/usr/share/ane/dt/t8103-ane.dtbo", &b.finish());
    let r = install(&e, &FakeMerger::good());
    assert!(
        matches!(&r, Err(Error::Refused(m)) if m.contains("omarchy,skip-if-compatible")),
        "{r:?}"
    );
    assert!(!exists(&t.root, PLACED));
}

/// omarchy-mac-boot merges package overlays only when its configuration
/// calls the library's DTBS function with nothing setting DTBS after it,
/// and only into Arch Linux ARM's update-m1n1 (whose DTBS default it
/// reproduces). Otherwise the placed overlay would never reach the boot
/// payload while install said it would: install refuses and says why.
#[test]
fn omarchy_install_refuses_when_omarchy_mac_boot_would_leave_the_overlay_out() {
    // Named, not borrowed as temporaries: the packages' check() builds
    // with the kernel's rustc 1.85, which does not extend their lifetime.
    let dtbs_after = format!("{OMARCHY_CONF}DTBS=/boot/dtbs/*.dtb\n");
    let merge_off = format!("OMARCHY_DTB_OVERLAYS=0\n{OMARCHY_CONF}");
    let cases: &[(&str, Option<&str>, &str, &str)] = &[
        (
            "a DTBS line after the call (the aurora-sep installer's)",
            Some(&dtbs_after),
            ALARM_SCRIPT,
            "sets DTBS after dtb_overlays_update_m1n1 (line 7)",
        ),
        (
            "an edited configuration kept over the packaged one",
            Some("export LC_ALL=C\n# dtb_overlays_update_m1n1\n"),
            ALARM_SCRIPT,
            "does not call dtb_overlays_update_m1n1",
        ),
        (
            "no configuration",
            None,
            ALARM_SCRIPT,
            "does not call dtb_overlays_update_m1n1",
        ),
        (
            "the merge turned off",
            Some(&merge_off),
            ALARM_SCRIPT,
            "sets OMARCHY_DTB_OVERLAYS=0",
        ),
        (
            "an update-m1n1 without Arch Linux ARM's DTBS default",
            Some(OMARCHY_CONF),
            "#!/bin/sh\n[ -e /etc/default/update-m1n1 ] && . /etc/default/update-m1n1\ncat \"$M1N1\" $DTBS >\"${TARGET}.new\"\n",
            "lacks Arch Linux ARM's DTBS default",
        ),
    ];
    for (what, conf, script, says) in cases {
        let t = omarchy_system();
        match conf {
            Some(c) => put(&t.root, "/etc/default/update-m1n1", c.as_bytes()),
            None => fs::remove_file(t.root.join("etc/default/update-m1n1")).unwrap(),
        }
        put(&t.root, "/usr/bin/update-m1n1", script.as_bytes());
        let e = env(&t);
        let r = install(&e, &FakeMerger::good());
        assert!(
            matches!(&r, Err(Error::Refused(m)) if m.contains(says)),
            "{what}: {r:?}"
        );
        assert!(!exists(&t.root, PLACED), "{what}: placed anyway");
        let s = status(&e).unwrap();
        assert!(
            s.contains("omarchy:    ") && s.contains(says),
            "{what}: {s}"
        );
    }
    // The shapes that work: the packaged configuration, and a DTBS set
    // above the call (the library merges over it).
    for conf in [
        OMARCHY_CONF.to_string(),
        format!("DTBS=/usr/lib/modules/7.1.13-3-1-ARCH/dtbs/*.dtb\n{OMARCHY_CONF}"),
    ] {
        let t = omarchy_system();
        put(&t.root, "/etc/default/update-m1n1", conf.as_bytes());
        let e = env(&t);
        let r = install(&e, &FakeMerger::good()).unwrap();
        assert!(r.contains(&format!("placed t8103-ane as {PLACED}")), "{r}");
        let s = status(&e).unwrap();
        assert!(
            s.contains("omarchy:    /etc/default/update-m1n1 calls dtb_overlays_update_m1n1 last; /usr/bin/update-m1n1 has Arch Linux ARM's DTBS default"),
            "{s}"
        );
    }
}

#[test]
fn without_omarchy_the_m1n1_way_is_taken_and_said() {
    let t = fake_system(&["apple,j274", "apple,t8103", "apple,arm-platform"]);
    let r = install(&env(&t), &FakeMerger::good()).unwrap();
    assert!(r.starts_with("delivery: m1n1 (no omarchy-mac-boot"), "{r}");
    assert!(!exists(&t.root, "/usr/lib/omarchy-mac-boot"));
    let state = String::from_utf8(read(&t.root, "/var/lib/ane-dt/state")).unwrap();
    assert!(state.contains("delivery=m1n1\n"), "{state}");
}

/// A stand-in update-m1n1 that reads `conf` and uses `$DTBS` as `use_line`
/// says (the shapes of the real scripts, which tools/dt/distros.sh runs).
fn put_script(root: &Path, conf: &str, use_line: &str) {
    put(
        root,
        "/usr/bin/update-m1n1",
        format!(
            "#!/bin/sh\nset -e\n\n[ -e {conf} ] && . {conf}\n\nif [ -e \"$(dirname \"$0\")\"/functions.sh ]; then\n    . \"$(dirname \"$0\")\"/functions.sh\nelse\n    . /usr/share/asahi-scripts/functions.sh\nfi\n: ${{CONFIG:=/etc/m1n1.conf}}\nif [ -z \"$DTBS\" ]; then exit 1; fi\n{use_line}\n"
        )
        .as_bytes(),
    );
}

fn mode(root: &Path, abs: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(root.join(abs.trim_start_matches('/')))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn set_mode(root: &Path, abs: &str, m: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        root.join(abs.trim_start_matches('/')),
        fs::Permissions::from_mode(m),
    )
    .unwrap();
}

#[test]
fn the_config_file_comes_from_the_installed_script() {
    let script = "#!/bin/sh\n# . /etc/not-this\n[ -e /etc/sysconfig/update-m1n1 ] && . /etc/sysconfig/update-m1n1\n. \"$(dirname \"$0\")\"/functions.sh\nsource /usr/share/asahi-scripts/functions.sh\ncat \"$M1N1\" $DTBS >\"${TARGET}.new\"\n";
    assert_eq!(sourced_configs(script), ["/etc/sysconfig/update-m1n1"]);
    assert!(uses_dtbs_unquoted(script));
    assert!(uses_dtbs_unquoted("cat x ${DTBS}\n"));
    assert!(!uses_dtbs_unquoted(
        "cat \"$M1N1\" \"$DTBS\" >x\n[ -d \"$DTBS\" ]\n# cat $DTBS\n"
    ));
    assert!(!uses_dtbs_unquoted("echo $DTBSX\n"));
    assert_eq!(
        sourced_configs("[ -e /a ] && . /a\n. /b; . /a\n"),
        ["/a", "/b"]
    );

    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let e = env(&t);
    // No script: upstream's file, said so.
    let m = e.m1n1_script();
    assert_eq!(m.conf, "/etc/default/update-m1n1");
    assert!(m.how.contains("no update-m1n1 installed"), "{}", m.how);
    assert_eq!(m.takes_list, None);
    // Fedora's shape.
    put_script(
        &t.root,
        "/etc/sysconfig/update-m1n1",
        "cat \"$M1N1\" $DTBS >\"${TARGET}.new\"",
    );
    let m = e.m1n1_script();
    assert_eq!(m.conf, "/etc/sysconfig/update-m1n1");
    assert_eq!(
        m.how,
        "/usr/bin/update-m1n1 reads /etc/sysconfig/update-m1n1"
    );
    assert_eq!(m.takes_list, Some(true));
    // --m1n1-config wins.
    let e2 = Env {
        m1n1_conf: Some("/etc/mine".into()),
        ..env(&t)
    };
    assert_eq!(e2.m1n1_script().conf, "/etc/mine");
}

#[test]
fn fedora_shape_hooks_sysconfig_and_remove_restores_it_exactly() {
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    put_script(
        &t.root,
        "/etc/sysconfig/update-m1n1",
        "cat \"$M1N1\" $DTBS >\"${TARGET}.new\"",
    );
    // No final newline, an unusual mode: both must come back.
    let orig = b"M1N1=/usr/lib64/m1n1/m1n1.bin\nDTBS=\"/boot/dtb\"";
    put(&t.root, "/etc/sysconfig/update-m1n1", orig);
    set_mode(&t.root, "/etc/sysconfig/update-m1n1", 0o600);
    let e = Env {
        dtbs: Some(STOCK.into()),
        ..env(&t)
    };
    let out = install(&e, &FakeMerger::good()).unwrap();
    assert!(
        out.contains("update-m1n1: /usr/bin/update-m1n1 reads /etc/sysconfig/update-m1n1"),
        "{out}"
    );
    assert!(
        out.contains("added the ane-dt block to /etc/sysconfig/update-m1n1"),
        "{out}"
    );
    let conf = String::from_utf8(read(&t.root, "/etc/sysconfig/update-m1n1")).unwrap();
    assert!(
        conf.starts_with("M1N1=/usr/lib64/m1n1/m1n1.bin\nDTBS=\"/boot/dtb\"\n# BEGIN ane-dt"),
        "{conf}"
    );
    assert_eq!(mode(&t.root, "/etc/sysconfig/update-m1n1"), 0o600);
    // /etc/default is not what this update-m1n1 reads: untouched.
    assert_eq!(
        read(&t.root, "/etc/default/update-m1n1"),
        M1N1_ORIG.as_bytes()
    );
    assert!(status(&e)
        .unwrap()
        .contains("update-m1n1: /etc/sysconfig/update-m1n1 sources"));
    assert!(install(&e, &FakeMerger::good())
        .unwrap()
        .contains("nothing to do"));

    let out = remove(&e).unwrap();
    assert!(out.contains("restored /etc/sysconfig/update-m1n1"), "{out}");
    assert_eq!(read(&t.root, "/etc/sysconfig/update-m1n1"), orig);
    assert_eq!(mode(&t.root, "/etc/sysconfig/update-m1n1"), 0o600);
    assert_eq!(
        read(&t.root, "/etc/default/update-m1n1"),
        M1N1_ORIG.as_bytes()
    );
    assert!(!exists(&t.root, "/var/lib/ane-dt/hook"));
}

#[test]
fn an_edited_config_keeps_the_edit_on_remove() {
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let e = Env {
        dtbs: Some(STOCK.into()),
        ..env(&t)
    };
    install(&e, &FakeMerger::good()).unwrap();
    let mut conf = read(&t.root, "/etc/default/update-m1n1");
    conf.extend_from_slice(b"CONFIG=/etc/m1n1-mine.conf\n");
    put(&t.root, "/etc/default/update-m1n1", &conf);
    let out = remove(&e).unwrap();
    assert!(out.contains("removed the ane-dt block"), "{out}");
    assert_eq!(
        String::from_utf8(read(&t.root, "/etc/default/update-m1n1")).unwrap(),
        format!("{M1N1_ORIG}CONFIG=/etc/m1n1-mine.conf\n")
    );
}

#[test]
fn a_script_that_quotes_dtbs_is_refused_and_nothing_is_written() {
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    put_script(
        &t.root,
        "/etc/default/update-m1n1",
        "cat \"$M1N1\" \"$DTBS\" >\"${TARGET}.new\"",
    );
    let before = snapshot(&t.root);
    let e = Env {
        dtbs: Some(STOCK.into()),
        ..env(&t)
    };
    match install(&e, &FakeMerger::good()) {
        Err(Error::Refused(m)) => assert!(
            m.contains("/usr/bin/update-m1n1 never uses $DTBS unquoted"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(snapshot(&t.root), before);
}

#[test]
fn a_block_in_a_file_update_m1n1_does_not_read_moves_to_the_one_it_reads() {
    // ane-dt 0.1.0 on Fedora: the block went to /etc/default.
    let t = fake_system(&["apple,j274", "apple,t8103"]);
    let e = Env {
        dtbs: Some(STOCK.into()),
        ..env(&t)
    };
    install(&e, &FakeMerger::good()).unwrap();
    put_script(
        &t.root,
        "/etc/sysconfig/update-m1n1",
        "cat \"$M1N1\" $DTBS >\"${TARGET}.new\"",
    );
    put(
        &t.root,
        "/etc/sysconfig/update-m1n1",
        b"DTBS=\"/boot/dtb\"\n",
    );
    let s = status(&e).unwrap();
    assert!(
        s.contains("but update-m1n1 reads /etc/sysconfig/update-m1n1"),
        "{s}"
    );
    let out = install(&e, &FakeMerger::good()).unwrap();
    assert!(out.contains("restored /etc/default/update-m1n1"), "{out}");
    assert!(
        out.contains("added the ane-dt block to /etc/sysconfig/update-m1n1"),
        "{out}"
    );
    assert_eq!(
        read(&t.root, "/etc/default/update-m1n1"),
        M1N1_ORIG.as_bytes()
    );
    remove(&e).unwrap();
    assert_eq!(
        read(&t.root, "/etc/sysconfig/update-m1n1"),
        b"DTBS=\"/boot/dtb\"\n"
    );
}
