// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The built `ane-probe` binary on a machine without an ANE: usage errors,
//! file errors and the "nothing to probe" path, with their exit codes
//! (0 ok, 1 mismatch or device failure, 2 usage error or nothing to probe).
//!
//! Tests that need a valid compiled program use the shared fixtures of the
//! development checkout and say SKIPPED when it is absent.

use std::path::Path;
use std::process::{Command, Output};

fn probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ane-probe"))
        .args(args)
        .output()
        .expect("run ane-probe")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` and checks it exits with `want`, returning stderr.
fn exits_with(want: i32, args: &[&str]) -> String {
    let o = probe(args);
    assert_eq!(code(&o), want, "{args:?}: stderr: {}", stderr(&o));
    stderr(&o)
}

/// Runs `args` and checks it exits with 2 (usage error), returning stderr.
fn usage_error(args: &[&str]) -> String {
    exits_with(2, args)
}

/// Runs `args` and checks it exits with 3 (program invalid).
fn program_invalid(args: &[&str]) -> String {
    exits_with(3, args)
}

/// Runs `args` and checks it exits with 4 (no usable device).
fn no_device(args: &[&str]) -> String {
    exits_with(4, args)
}

use ane::fixtures::path as fixture;

/// An empty directory to use as `--root` (no /dev/accel, no /sys), and a
/// 128-byte input file (a [1, 64, 1, 1] fp16 tensor) inside it.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in128.bin"), [0u8; 128]).unwrap();
        std::fs::write(dir.path().join("in100.bin"), [0u8; 100]).unwrap();
        Scene { dir }
    }
    fn root(&self) -> String {
        self.dir.path().display().to_string()
    }
    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

#[test]
fn clap_usage_errors_exit_2() {
    usage_error(&[]);
    usage_error(&["frobnicate"]);
    usage_error(&["run"]); // --program missing
    usage_error(&["info", "--no-such-flag"]);
    let e = usage_error(&["bench", "--program", "p.hwx", "-n", "0"]);
    assert!(e.contains("--runs"), "{e}");
    let e = usage_error(&["run", "--program", "p.hwx", "--priority", "urgent"]);
    assert!(e.contains("urgent"), "{e}");
    let e = usage_error(&["run", "--program", "p.hwx", "--timeout-ms", "0"]);
    assert!(e.contains("--timeout-ms"), "{e}");
}

#[test]
fn help_and_version_exit_0() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["bench", "--help"],
        &["parity", "--help"],
        &["mlp", "--help"],
    ] {
        let o = probe(args);
        assert_eq!(code(&o), 0, "{args:?}");
    }
}

#[test]
fn bad_slot_syntax_names_the_argument() {
    for bad in ["5", "=a.bin", "5=", "image"] {
        let e = usage_error(&["run", "--program", "p.hwx", "--in", bad]);
        assert!(e.contains("SLOT=FILE") && e.contains("--in"), "{bad}: {e}");
    }
    let e = usage_error(&["bench", "--program", "p.hwx", "--out", "4"]);
    assert!(e.contains("--out"), "{e}");
}

#[test]
fn help_documents_the_exit_codes() {
    for cmd in [&["--help"][..], &["run", "--help"], &["bench", "--help"]] {
        let o = probe(cmd);
        assert_eq!(code(&o), 0, "{cmd:?}");
        let out = String::from_utf8_lossy(&o.stdout);
        for line in [
            "1  output differs",
            "2  usage error",
            "3  program invalid",
            "4  no usable ANE device",
        ] {
            assert!(out.contains(line), "{cmd:?} lacks '{line}': {out}");
        }
    }
}

#[test]
fn missing_program_exits_2_malformed_exits_3() {
    let s = Scene::new();
    let absent = s.file("absent.hwx");
    let e = usage_error(&["run", "--program", &absent, "--root", &s.root()]);
    assert!(
        e.contains("cannot read program") && e.contains("absent.hwx"),
        "{e}"
    );
    let e = program_invalid(&[
        "bench",
        "--program",
        &s.file("in128.bin"),
        "--root",
        &s.root(),
    ]);
    assert!(
        e.contains("in128.bin") && e.contains("not an HWX file"),
        "{e}"
    );
}

#[test]
fn info_on_an_empty_root() {
    let s = Scene::new();
    let o = probe(&["info", "--root", &s.root()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = probe(&["--json", "info", "--root", &s.root()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["accel_nodes"], serde_json::json!([]));
    assert_eq!(v["genpd"]["state"], "absent");
}

#[test]
fn parity_on_the_model_passes_and_reports_every_cell() {
    let o = probe(&["parity", "--model"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("cell") && out.contains("max ulp") && out.contains("verdict"));
    assert_eq!(out.matches("| exact").count(), 7, "{out}");
    let o = probe(&["--json", "parity", "--model", "--cells", "select,conv1x1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "ane-probe/parity");
    assert_eq!(v["executor"], "model");
    assert_eq!(v["verdict"], "pass");
    assert!(v["device"].is_null() && v["host"]["machine"].is_string());
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0]["cell"], "select");
    assert_eq!(cells[0]["verdict"], "exact");
    assert_eq!(cells[1]["bound_ulp"], 2);
}

#[test]
fn parity_usage_errors_exit_2() {
    let s = Scene::new();
    let e = usage_error(&["parity", "--model", "--cells", "add,select"]);
    assert!(e.contains("'add'") && e.contains("add_1x512"), "{e}");
    let e = no_device(&["parity", "--root", &s.root()]);
    assert!(e.contains("no ANE accel device"), "{e}");
    usage_error(&["parity", "--model", "--device", "/dev/accel/accel0"]);
    let e = no_device(&["parity", "--device", &s.file("in128.bin")]);
    assert!(e.contains("not a usable ANE device"), "{e}");
}

/// Issue 25 point 1: `parity --h13-program` runs the program the record
/// shows running on an M1 first, with the inputs it ran with, and its row
/// says so with the source; a file the record does not pin is refused
/// before anything runs (exit 2).
#[test]
fn parity_runs_the_recorded_program_first() {
    let Some(p) = fixture("sum.anec") else {
        return;
    };
    let p = p.to_str().unwrap();
    let o = probe(&[
        "--json",
        "parity",
        "--model",
        "--cells",
        "select",
        "--h13-program",
        p,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["recorded"];
    assert_eq!(r["verdict"], "exact", "{r}");
    assert_eq!(r["ran_on_hardware"], true);
    assert_eq!(r["sha256"], ane::recorded::H13[0].sha256);
    assert!(r["provenance"]
        .as_str()
        .unwrap()
        .contains("eiln's DRM driver"));
    assert_eq!(v["cells"][0]["ran_on_hardware"], false);
    let o = probe(&["parity", "--model", "--cells", "select", "--h13-program", p]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("ran on hardware per the record"), "{out}");
    let Some(relu) = fixture("relu.anec") else {
        return;
    };
    let e = usage_error(&["parity", "--model", "--h13-program", relu.to_str().unwrap()]);
    assert!(
        e.contains("not a program the hardware record shows running on hardware"),
        "{e}"
    );
    assert!(e.contains(ane::recorded::H13[0].sha256), "{e}");
}

#[test]
fn mlp_on_the_model_passes() {
    let o = probe(&["mlp", "--model"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("hidden") && out.contains("output") && out.contains("pass"),
        "{out}"
    );
    let o = probe(&[
        "--json", "mlp", "--model", "--in", "33", "--hidden", "70", "--out", "19", "--batch", "5",
        "--seed", "9",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "ane-probe/mlp");
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["shape"]["hidden"], 70);
    assert_eq!(v["seed"], 9);
    assert_eq!(v["layers"][0]["layer"], "hidden");
    assert_eq!(v["layers"][0]["elements"], 350);
    assert_eq!(v["layers"][1]["verdict"], "exact");
}

#[test]
fn mlp_usage_errors_exit_2() {
    let s = Scene::new();
    let e = usage_error(&["mlp", "--model", "--hidden", "0"]);
    assert!(e.contains("--hidden"), "{e}");
    let e = usage_error(&["mlp", "--model", "--out", "5000"]);
    assert!(e.contains("out_features = 5000"), "{e}");
    let e = no_device(&["mlp", "--root", &s.root()]);
    assert!(e.contains("no ANE accel device"), "{e}");
}

#[test]
fn wrong_input_size_names_slot_and_sizes() {
    let Some(p) = fixture("tinygrad_sum.hwx") else {
        return;
    };
    let s = Scene::new();
    let e = usage_error(&[
        "run",
        "--program",
        p.to_str().unwrap(),
        "--root",
        &s.root(),
        "--in",
        &format!("5={}", s.file("in100.bin")),
        "--in",
        &format!("image={}", s.file("in128.bin")),
    ]);
    assert!(
        e.contains("--in slot 5 'image2'")
            && e.contains("holds 100 bytes")
            && e.contains("exactly 128"),
        "{e}"
    );
}

#[test]
fn missing_input_file_names_the_file() {
    let Some(p) = fixture("sum.anec") else { return };
    let s = Scene::new();
    let e = usage_error(&[
        "run",
        "--program",
        p.to_str().unwrap(),
        "--root",
        &s.root(),
        "--in",
        &format!("5={}", s.file("in128.bin")),
        "--in",
        &format!("6={}", s.file("nope.bin")),
    ]);
    assert!(e.contains("nope.bin") && e.contains("slot 6"), "{e}");
}

#[test]
fn slot_errors_exit_2() {
    let Some(p) = fixture("tinygrad_sum.hwx") else {
        return;
    };
    let s = Scene::new();
    let p = p.to_str().unwrap();
    let root = s.root();
    let inp = s.file("in128.bin");
    let a = |slot: &str| format!("{slot}={inp}");
    // Unknown slot.
    let e = usage_error(&["run", "--program", p, "--root", &root, "--in", &a("9")]);
    // Listed in the order the compiler declared them: image (slot 6)
    // first.
    assert!(
        e.contains("--in 9") && e.contains("6=image, 5=image2"),
        "{e}"
    );
    // The same slot twice, by number and by name.
    let e = usage_error(&[
        "run",
        "--program",
        p,
        "--root",
        &root,
        "--in",
        &a("5"),
        "--in",
        &a("image2"),
    ]);
    assert!(e.contains("more than once"), "{e}");
    // An input given as --out.
    let e = usage_error(&[
        "run",
        "--program",
        p,
        "--root",
        &root,
        "--in",
        &a("5"),
        "--in",
        &a("6"),
        "--out",
        &a("5"),
    ]);
    assert!(e.contains("--out 5") && e.contains("is an input"), "{e}");
    // An output given as --in.
    let e = usage_error(&["run", "--program", p, "--root", &root, "--in", &a("probs")]);
    assert!(e.contains("is an output"), "{e}");
    // A missing input.
    let e = usage_error(&["run", "--program", p, "--root", &root, "--in", &a("5")]);
    assert!(e.contains("missing --in") && e.contains("6=image"), "{e}");
    // An output into a directory that does not exist.
    let e = usage_error(&[
        "run",
        "--program",
        p,
        "--root",
        &root,
        "--in",
        &a("5"),
        "--in",
        &a("6"),
        "--out",
        "probs=/nonexistent-dir/out.bin",
    ]);
    assert!(e.contains("/nonexistent-dir"), "{e}");
}

#[test]
fn no_device_exits_4() {
    let Some(p) = fixture("tinygrad_sum.hwx") else {
        return;
    };
    let s = Scene::new();
    let p = p.to_str().unwrap();
    let inp = s.file("in128.bin");
    let e = no_device(&[
        "run",
        "--program",
        p,
        "--root",
        &s.root(),
        "--in",
        &format!("5={inp}"),
        "--in",
        &format!("6={inp}"),
    ]);
    assert!(
        e.contains("no ANE accel device found under") && e.contains(&s.root()),
        "{e}"
    );

    let receipt = s.file("receipt.json");
    let e = no_device(&[
        "--json",
        "bench",
        "--program",
        p,
        "--root",
        &s.root(),
        "-n",
        "3",
        "--receipt",
        &receipt,
    ]);
    assert!(e.contains("no ANE accel device found"), "{e}");
    assert!(!Path::new(&receipt).exists(), "no receipt without a device");

    // .anec programs take the same path.
    let Some(a) = fixture("relu.anec") else {
        return;
    };
    let e = no_device(&[
        "bench",
        "--program",
        a.to_str().unwrap(),
        "--root",
        &s.root(),
    ]);
    assert!(e.contains("no ANE accel device found"), "{e}");
}

#[test]
fn a_node_that_is_not_a_drm_device_is_refused() {
    let Some(p) = fixture("tinygrad_sum.hwx") else {
        return;
    };
    let s = Scene::new();
    // A regular file as the node: DRM_IOCTL_VERSION fails on it. That is
    // a device that cannot be used, not a job failure: exit 4.
    let e = no_device(&[
        "bench",
        "--program",
        p.to_str().unwrap(),
        "--device",
        &s.file("in128.bin"),
    ]);
    assert!(
        e.contains("DRM_IOCTL_VERSION") || e.contains("cannot open"),
        "{e}"
    );
}

#[test]
fn firmware_not_the_pinned_image_exits_1_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A Mach-O header of the right kind, but not Apple's image.
    let mut bytes = Vec::new();
    for x in [0xfeed_facfu32, 0x0100_000c, 0, 0xc, 0, 0, 0, 0] {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    bytes.resize(0x4000, 0);
    let file = dir.path().join("fw.macho");
    std::fs::write(&file, &bytes).unwrap();
    let out = dir.path().join("installed.macho");
    let o = probe(&[
        "firmware",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("NOT the pinned T6021 firmware"));
    assert!(!out.exists(), "an unpinned image must not be installed");
}

/// A file with the pinned image's exact shape (size 0x4c5b28, MH_PRELOAD,
/// five commands in 0x960 bytes, flags 0x1, __TEXT and __DATA at their
/// pinned geometry, a 68-word thread state with pc 0) but not its bytes.
fn pinned_shape(filetype: u32) -> Vec<u8> {
    fn put(v: &mut Vec<u8>, words: &[u64], wide: bool) {
        for &w in words {
            if wide {
                v.extend_from_slice(&w.to_le_bytes());
            } else {
                v.extend_from_slice(&(w as u32).to_le_bytes());
            }
        }
    }
    let mut c = Vec::new();
    for (name, geo, nsects) in [
        (b"__TEXT", [0, 0xc_4000, 0x4000, 0xc_4000], 8u64),
        (b"__DATA", [0xc_4000, 0x43_8000, 0xc_8000, 0x3e_8000], 16),
    ] {
        put(&mut c, &[0x19, 72 + 80 * nsects], false);
        let mut n = [0u8; 16];
        n[..6].copy_from_slice(name);
        c.extend_from_slice(&n);
        put(&mut c, &geo, true);
        put(&mut c, &[5, 5, nsects, 0], false);
        c.resize(c.len() + 80 * nsects as usize, 0);
    }
    put(&mut c, &[0x2, 24, 0, 0, 0, 0], false); // LC_SYMTAB
    put(&mut c, &[0x1b, 24, 0, 0, 0, 0], false); // LC_UUID
    put(&mut c, &[0x5, 16 + 4 * 68, 6, 68], false); // LC_UNIXTHREAD
    c.resize(c.len() + 4 * 68, 0);
    let mut f = Vec::new();
    let cmds = c.len() as u64;
    put(
        &mut f,
        &[0xfeed_facf, 0x0100_000c, 0, filetype.into(), 5, cmds, 1, 0],
        false,
    );
    f.extend_from_slice(&c);
    f.resize(0x4c_5b28, 0);
    f
}

#[test]
fn firmware_messages_name_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fw.macho");
    let check = |bytes: &[u8]| {
        std::fs::write(&file, bytes).unwrap();
        let o = probe(&["firmware", file.to_str().unwrap()]);
        assert_eq!(code(&o), 1, "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The right shape: only the digest is left to differ.
    let out = check(&pinned_shape(5));
    assert!(
        out.contains("structure: arm64 Mach-O, 5 load commands, 2 segments"),
        "{out}"
    );
    assert!(out.contains("is not the pinned payload's"), "{out}");
    let out = check(&pinned_shape(2));
    assert!(
        out.contains("pin: filetype 2, pinned 5 (MH_PRELOAD)"),
        "{out}"
    );
    let out = check(&pinned_shape(5)[..0x4000]);
    assert!(out.contains("size 0x4000 bytes, pinned 0x4c5b28"), "{out}");
}

#[test]
fn firmware_broken_container_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fw.im4p");
    // A DER sequence whose first string is not "IM4P".
    std::fs::write(&file, [0x30, 0x06, 0x16, 0x04, b'I', b'M', b'G', b'4']).unwrap();
    let o = probe(&["firmware", file.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("magic"), "{}", stderr(&o));
}

/// Writes `contents` to `rel` below the scene's root.
fn put(s: &Scene, rel: &str, contents: &[u8]) {
    let p = s.dir.path().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, contents).unwrap();
}

/// A root compatible list as the device tree stores it.
fn compat(list: &[&str]) -> Vec<u8> {
    list.iter()
        .flat_map(|c| [c.as_bytes(), b"\0"].concat())
        .collect()
}

/// Runs `doctor` below the scene's root; its exit code, stdout and receipt.
fn doctor(s: &Scene) -> (i32, String, serde_json::Value) {
    let receipt = s.file("doctor.json");
    let o = probe(&["doctor", "--root", &s.root(), "--receipt", &receipt]);
    let v = serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
    (code(&o), String::from_utf8_lossy(&o.stdout).into_owned(), v)
}

/// `doctor` on an empty root: the first rung (is this Mac supported)
/// fails, every later one is skipped, the receipt says so, and the exit
/// code is 1.
#[test]
fn doctor_stops_at_the_first_failed_rung_and_writes_a_receipt() {
    let s = Scene::new();
    let (rc, out, v) = doctor(&s);
    assert_eq!(rc, 1, "{out}");
    assert_eq!(v["schema"], "ane-probe/doctor");
    assert_eq!(v["verdict"], "fail");
    let rungs = v["rungs"].as_array().unwrap();
    let names: Vec<&str> = rungs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["soc", "kernel", "module", "device", "node", "firmware", "job", "parity"]
    );
    assert_eq!(rungs[0]["verdict"], "fail");
    assert!(rungs[0]["next"].is_string());
    assert!(out.contains("FAIL soc       no device tree"), "{out}");
    assert!(
        rungs[1..].iter().all(|r| r["verdict"] == "skip"),
        "{rungs:?}"
    );

    // An M1 Mac mini with a kernel release, no headers, no module: rung 0
    // names the path, rung 1 says what to install.
    put(&s, "proc/sys/kernel/osrelease", b"7.1.13-3-1-ARCH\n");
    put(
        &s,
        "sys/firmware/devicetree/base/compatible",
        &compat(&["apple,j274", "apple,t8103", "apple,arm-platform"]),
    );
    let (rc, out, _) = doctor(&s);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.contains("ok   soc       T8103 (M1): supported, H13 path")
            && out.contains("overlay t8103 for Mac mini (M1, 2020)"),
        "{out}"
    );
    assert!(out.contains("FAIL kernel"), "{out}");
    assert!(out.contains("7.1.13-3-1-ARCH: no kernel headers"), "{out}");
    assert!(out.contains("next: install the headers"), "{out}");
    // A receipt path in a missing directory is refused before anything runs.
    let e = probe(&[
        "doctor",
        "--root",
        &s.root(),
        "--receipt",
        "/nonexistent/dir/r.json",
    ]);
    assert_eq!(code(&e), 2, "{}", stderr(&e));
}

/// The kernel's Rust metadata is `rust/libkernel.rmeta` (the crate is
/// `kernel`): headers that hold it pass rung `kernel`, and a missing one
/// names that file and the per-distribution fix.
#[test]
fn doctor_finds_the_kernels_rust_metadata() {
    let s = Scene::new();
    put(
        &s,
        "proc/sys/kernel/osrelease",
        b"7.1.13-402.asahi.fc44.aarch64+16k\n",
    );
    put(
        &s,
        "proc/device-tree/compatible",
        &compat(&["apple,j316c", "apple,t6001", "apple,arm-platform"]),
    );
    let build = "lib/modules/7.1.13-402.asahi.fc44.aarch64+16k/build";
    put(&s, &format!("{build}/Makefile"), b"");
    let (_, out, _) = doctor(&s);
    assert!(
        out.contains("FAIL kernel") && out.contains("rust/libkernel.rmeta is missing"),
        "{out}"
    );
    assert!(
        out.contains("kernel-16k-devel") && out.contains("ane-rust-meta"),
        "{out}"
    );
    put(&s, &format!("{build}/rust/libkernel.rmeta"), b"");
    let (rc, out, v) = doctor(&s);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.contains("ok   soc       T6000 (M1 Pro/Max): supported"),
        "{out}"
    );
    assert!(
        out.contains(
            "ok   kernel    7.1.13-402.asahi.fc44.aarch64+16k; headers with Rust metadata"
        ),
        "{out}"
    );
    assert!(out.contains("FAIL module"), "{out}");
    assert_eq!(v["rungs"][1]["verdict"], "pass");
}

/// Rung `kernel` checks the rustc the DKMS build will use against the
/// kernel's CONFIG_RUSTC_VERSION_TEXT: a Fedora-built kernel needs exactly
/// Fedora's rust build in PATH (the fix names it); a rustup-built kernel
/// gets its toolchain by RUSTUP_TOOLCHAIN, which the rung names.
#[test]
fn doctor_checks_the_kernels_rustc() {
    let release = "7.1.13-402.asahi.fc44.aarch64+16k";
    let text = "rustc 1.93.1 (01f6ddf75 2026-02-11) (Fedora 1.93.1-1.fc43)";
    let s = Scene::new();
    put(
        &s,
        "proc/sys/kernel/osrelease",
        format!("{release}\n").as_bytes(),
    );
    put(
        &s,
        "proc/device-tree/compatible",
        &compat(&["apple,j316c", "apple,t6001", "apple,arm-platform"]),
    );
    let build = format!("lib/modules/{release}/build");
    put(&s, &format!("{build}/Makefile"), b"");
    put(&s, &format!("{build}/rust/libkernel.rmeta"), b"");
    put(
        &s,
        &format!("{build}/.config"),
        format!("CONFIG_RUST=y\nCONFIG_RUSTC_VERSION_TEXT=\"{text}\"\n").as_bytes(),
    );
    // A fake rustc in PATH printing `says`.
    let run = |says: &str| {
        let bin = s.dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let rustc = bin.join("rustc");
        std::fs::write(&rustc, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&rustc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let receipt = s.file("doctor.json");
        let o = Command::new(env!("CARGO_BIN_EXE_ane-probe"))
            .args(["doctor", "--root", &s.root(), "--receipt", &receipt])
            .env("PATH", &bin)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = run("rustc 1.94.0 (4a4ef493e 2026-03-02) (Fedora 1.94.0-1.fc44)");
    assert!(
        out.contains(&format!("FAIL kernel    {release}: built by \"{text}\", but the rustc in PATH is \"rustc 1.94.0"))
            && out.contains("sudo dnf install rust-1.93.1-1.fc43 rust-std-static-1.93.1-1.fc43")
            && out.contains("a rustup toolchain cannot match"),
        "{out}"
    );
    let out = run(text);
    assert!(
        out.contains(&format!("ok   kernel    {release}; headers with Rust metadata; rustc in PATH is the kernel's (\"{text}\")")),
        "{out}"
    );
    // A rustup-built kernel (Arch): the build's toolchain is named.
    put(
        &s,
        &format!("{build}/.config"),
        b"CONFIG_RUSTC_VERSION_TEXT=\"rustc 1.93.1 (01f6ddf75 2026-02-11)\"\n",
    );
    let out = run("rustc 1.80.0 (051478957 2024-07-21)");
    assert!(
        out.contains("ok   kernel") && out.contains("DKMS builds with RUSTUP_TOOLCHAIN=1.93.1 (root needs it: sudo rustup toolchain install 1.93.1 --profile minimal)"),
        "{out}"
    );
}

/// Rung `soc` comes first and says whether the Mac is supported and how,
/// before any setup step is asked for.
#[test]
fn doctor_names_the_socs_path_first() {
    let case = |list: &[&str]| {
        let s = Scene::new();
        put(&s, "proc/sys/kernel/osrelease", b"7.1.13-3-1-ARCH\n");
        put(&s, "sys/firmware/devicetree/base/compatible", &compat(list));
        let (rc, out, v) = doctor(&s);
        assert_eq!(v["rungs"][0]["name"], "soc");
        (rc, out, v)
    };
    // Plain M2: no hardware record, said so, and nothing below runs.
    let (rc, out, v) = case(&["apple,j413", "apple,t8112", "apple,arm-platform"]);
    assert_eq!(rc, 1);
    assert!(
        out.contains(
            "FAIL soc       T8112 (M2): not supported: this project has no hardware record"
        ),
        "{out}"
    );
    assert!(out.contains("do not install the headers"), "{out}");
    assert_eq!(v["rungs"][1]["verdict"], "skip");
    assert!(
        out.contains("no driver is recorded running its ANE"),
        "the plain M2's reason: {out}"
    );
    // M2 Max: the firmware path.
    let (_, out, _) = case(&["apple,j414c", "apple,t6021", "apple,arm-platform"]);
    assert!(
        out.contains("ok   soc       T6021 (M2 Max): supported, H14 path: the driver starts the ANE's firmware"),
        "{out}"
    );
    // M1 Pro and M2 Pro: supported, with their own overlays.
    let (_, out, _) = case(&["apple,j314s", "apple,t6000", "apple,arm-platform"]);
    assert!(
        out.contains("ok   soc       T6000 (M1 Pro/Max): supported, H13 path")
            && out.contains("overlay t6000 for MacBook Pro (14-inch, M1 Pro, 2021) (t6000-j314s)"),
        "{out}"
    );
    let (_, out, _) = case(&["apple,j474s", "apple,t6020", "apple,arm-platform"]);
    assert!(
        out.contains("ok   soc       T6020 (M2 Pro): supported, H14 path")
            && out.contains("overlay t6020 for Mac mini (M2 Pro, 2023) (t6020-j474s)"),
        "{out}"
    );
    // M1 Ultra: named as itself (not as the M1 Pro/Max whose table would
    // serve one die), no overlay, no recorded run, nothing below runs.
    let (rc, out, v) = case(&["apple,j375d", "apple,t6002", "apple,arm-platform"]);
    assert_eq!(rc, 1);
    assert!(
        out.contains(
            "FAIL soc       T6002 (M1 Ultra): not supported: no overlay describes its ANEs"
        ) && out.contains("no driver is recorded running an M1 Ultra's ANE")
            && out.contains("do not install the headers"),
        "{out}"
    );
    assert!(!out.contains("T6000 (M1 Pro/Max)"), "{out}");
    assert_eq!(v["rungs"][1]["verdict"], "skip");
    // An Apple SoC nobody has listed, and a machine that is no Mac.
    let (_, out, _) = case(&["apple,j999", "apple,t9999"]);
    assert!(
        out.contains("FAIL soc       an Apple machine whose SoC"),
        "{out}"
    );
    let (_, out, _) = case(&["linux,dummy-virt"]);
    assert!(
        out.contains("FAIL soc       not an Apple silicon Mac"),
        "{out}"
    );
}

/// Without --receipt the receipt goes where `doctor --help` says:
/// $XDG_STATE_HOME/ane-probe/doctor.json, else
/// ~/.local/state/ane-probe/doctor.json; never the current directory.
#[test]
fn doctor_writes_the_receipt_where_the_help_says() {
    let help = String::from_utf8_lossy(&probe(&["doctor", "--help"]).stdout).into_owned();
    assert!(
        help.contains("$XDG_STATE_HOME/ane-probe/doctor.json")
            && help.contains("~/.local/state/ane-probe/doctor.json"),
        "{help}"
    );
    let s = Scene::new();
    let cwd = s.dir.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let run = |env: &[(&str, &std::path::Path)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ane-probe"));
        c.args(["doctor", "--root", &s.root()])
            .current_dir(&cwd)
            .env_remove("XDG_STATE_HOME")
            .env_remove("HOME");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let home = s.dir.path().join("home");
    let o = run(&[("HOME", &home)]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let at = home.join(".local/state/ane-probe/doctor.json");
    assert!(at.is_file(), "no receipt at {}", at.display());
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("receipt: {}", at.display())));
    let state = s.dir.path().join("state");
    let o = run(&[("HOME", &home), ("XDG_STATE_HOME", &state)]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(state.join("ane-probe/doctor.json").is_file());
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "wrote into the CWD"
    );
    // Neither set: a usage error that says what to pass.
    let o = run(&[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--receipt"), "{}", stderr(&o));
}

/// `run --model` and `bench --model`: tinygrad's compiled sum on the host
/// engine model, on a machine without an ANE: 1.0 + 2.0 = 3.0 exactly, the
/// output written and compared, a bench receipt with the model as executor.
#[test]
fn run_and_bench_on_the_model() {
    let Some(program) = fixture("tinygrad_sum.hwx") else {
        return;
    };
    let program = program.display().to_string();
    let s = Scene::new();
    let fill = |name: &str, v: f32| {
        let b = half::f16::from_f32(v).to_le_bytes().repeat(64);
        std::fs::write(s.file(name), b).unwrap();
        s.file(name)
    };
    let (one, two, three) = (
        fill("one.bin", 1.0),
        fill("two.bin", 2.0),
        fill("three.bin", 3.0),
    );
    let out = s.file("sum.bin");
    let o = probe(&[
        "run",
        "--model",
        "--program",
        &program,
        "--in",
        &format!("5={one}"),
        "--in",
        &format!("6={two}"),
        "--out",
        &format!("4={out}"),
        "--expect",
        &format!("4={three}"),
        "--root",
        &s.root(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&three).unwrap());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("the host engine model"), "{text}");
    // A wrong expectation: output differs, exit 1.
    let o = probe(&[
        "run",
        "--model",
        "--program",
        &program,
        "--in",
        &format!("5={one}"),
        "--in",
        &format!("6={two}"),
        "--expect",
        &format!("4={two}"),
        "--root",
        &s.root(),
    ]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let receipt = s.file("r.json");
    let o = probe(&[
        "bench",
        "--model",
        "--program",
        &program,
        "-n",
        "3",
        "--warmup",
        "1",
        "--receipt",
        &receipt,
        "--root",
        &s.root(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["runs"]["completed"], 3);
    assert_eq!(v["outputs"][0]["source"], "model");
    // --model and --device exclude each other.
    usage_error(&[
        "run",
        "--model",
        "--device",
        "/dev/accel/accel0",
        "--program",
        &program,
    ]);
}

/// tinygrad's ReLU with TDSkip set in its TD: valid for the container and
/// the validator, but not something the engine model executes.
fn model_refused_program(s: &Scene) -> Option<String> {
    let bytes = std::fs::read(fixture("tinygrad_relu.hwx")?).unwrap();
    let hwx = ane::hwx::Hwx::parse(&bytes).unwrap();
    let w6 = hwx.td_file_offset() + 4 * 6;
    let mut bytes = bytes.clone();
    bytes[w6 + 1] |= 1 << 1; // W6 bit 9: TDSkip.
    let path = s.file("skip.hwx");
    std::fs::write(&path, bytes).unwrap();
    Some(path)
}

/// A program the engine model refuses is an unsupported program (exit 3),
/// not a device failure, in text and JSON, with the model's reason in
/// words rather than a debug dump.
#[test]
fn a_program_the_model_refuses_exits_3_as_not_supported() {
    let s = Scene::new();
    let Some(p) = model_refused_program(&s) else {
        return;
    };
    let input = s.file("in.bin");
    std::fs::write(&input, [0u8; 154]).unwrap();
    let run = |json: bool| {
        let mut args = vec![];
        if json {
            args.push("--json");
        }
        let inp = format!("image={input}");
        args.extend(["run", "--model", "--program", &p, "--in", &inp, "--root"]);
        let root = s.root();
        args.push(&root);
        let o = probe(&args);
        assert_eq!(code(&o), 3, "{}", stderr(&o));
        o
    };
    let o = run(false);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(
        out.contains("verdict:  program not supported by the model"),
        "{out}"
    );
    assert!(!out.contains("device failure"), "{out}");
    assert!(
        err.contains("program not supported by the model")
            && err.contains("the engine model does not support TD skip"),
        "{err}"
    );
    assert!(
        !err.contains("Unsupported {") && !err.contains("feature:"),
        "{err}"
    );
    let o = run(true);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "not-supported-by-model");
    let e = v["error"].as_str().unwrap();
    assert!(
        e.starts_with("program not supported by the model: TD 0:"),
        "{e}"
    );

    let receipt = s.file("r.json");
    let o = probe(&[
        "bench",
        "--model",
        "--program",
        &p,
        "-n",
        "2",
        "--receipt",
        &receipt,
        "--root",
        &s.root(),
    ]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("program not supported by the model"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
    assert_eq!(v["verdict"], "not-supported-by-model");
}

/// The `Exit codes:` table of `args --help`: (code, text) pairs, and the
/// help's text before it.
fn exit_table(args: &[&str]) -> (Vec<(i32, String)>, String) {
    let o = probe(args);
    assert_eq!(code(&o), 0, "{args:?}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let at = out
        .find("Exit codes")
        .unwrap_or_else(|| panic!("{args:?}: no exit codes in --help: {out}"));
    let table = out[at..]
        .lines()
        .skip(1)
        .map_while(|l| {
            let l = l.trim();
            let (c, text) = l.split_once("  ")?;
            Some((c.parse().ok()?, text.trim().to_owned()))
        })
        .collect();
    (table, out[..at].to_owned())
}

/// Every `--help` lists the exit codes its command can return, no other,
/// and names only options the command has; every documented code is
/// produced here, except the few that need hardware (listed with why).
#[test]
fn help_exit_codes_agree_with_behaviour() {
    let s = Scene::new();
    let root = s.root();
    let sum = fixture("tinygrad_sum.hwx").map(|p| p.display().to_string());
    let refused = model_refused_program(&s);
    let input = s.file("in128.bin");
    let ones = s.file("ones.bin");
    std::fs::write(&ones, half::f16::from_f32(1.0).to_le_bytes().repeat(64)).unwrap();
    let relu_in = s.file("relu_in.bin");
    std::fs::write(&relu_in, [0u8; 154]).unwrap();
    let bad_im4p = s.file("bad.im4p");
    std::fs::write(&bad_im4p, [0x30, 0x06, 0x16, 0x04, b'I', b'M', b'G', b'4']).unwrap();
    let not_pinned = s.file("fw.macho");
    let mut macho = Vec::new();
    for x in [0xfeed_facfu32, 0x0100_000c, 0, 0xc, 0, 0, 0, 0] {
        macho.extend_from_slice(&x.to_le_bytes());
    }
    macho.resize(0x4000, 0);
    std::fs::write(&not_pinned, macho).unwrap();
    // A file under /sys that exists but cannot be read (a directory).
    let unreadable = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(unreadable.path().join("sys/module/ane/version")).unwrap();
    let unreadable = unreadable.path().display().to_string();
    let receipt = s.file("r.json");

    let a = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let ins = |p: &str| {
        a(&[
            "--program",
            p,
            "--root",
            &root,
            "--in",
            &format!("5={input}"),
            "--in",
            &format!("6={input}"),
        ])
    };
    let with = |mut pre: Vec<String>, post: Vec<String>| {
        pre.extend(post);
        pre
    };
    // (command, code) -> the arguments that produce it, or None with why
    // not here.
    type Case = (&'static str, i32, Result<Vec<String>, &'static str>);
    let need = |o: Option<Vec<String>>| o.ok_or("fixture absent");
    let mut cases: Vec<Case> = vec![
        ("info", 0, Ok(a(&["info", "--root", &root]))),
        ("info", 2, Ok(a(&["info", "--root", &unreadable]))),
        (
            "doctor",
            0,
            Err("every rung passing needs a bound ANE and its jobs"),
        ),
        (
            "doctor",
            1,
            Ok(a(&["doctor", "--root", &root, "--receipt", &receipt])),
        ),
        (
            "doctor",
            2,
            Ok(a(&["doctor", "--receipt", "/nonexistent/r.json"])),
        ),
        (
            "parity",
            0,
            Ok(a(&["parity", "--model", "--cells", "select"])),
        ),
        (
            "parity",
            1,
            Err("a cell beyond its bound needs a wrong engine"),
        ),
        (
            "parity",
            2,
            Ok(a(&["parity", "--model", "--cells", "nope"])),
        ),
        ("parity", 4, Ok(a(&["parity", "--root", &root]))),
        ("mlp", 0, Ok(a(&["mlp", "--model"]))),
        (
            "mlp",
            1,
            Err("a layer beyond its bound needs a wrong engine"),
        ),
        ("mlp", 2, Ok(a(&["mlp", "--model", "--hidden", "0"]))),
        ("mlp", 4, Ok(a(&["mlp", "--root", &root]))),
        (
            "firmware",
            0,
            Err("the pinned image is Apple's and not redistributed"),
        ),
        ("firmware", 1, Ok(a(&["firmware", &not_pinned]))),
        ("firmware", 2, Ok(a(&["firmware", &bad_im4p]))),
        (
            "run",
            2,
            Ok(a(&["run", "--program", &s.file("absent.hwx")])),
        ),
        (
            "bench",
            2,
            Ok(a(&["bench", "--program", &s.file("absent.hwx")])),
        ),
        (
            "bench",
            1,
            Err("runs that differ need a device that misbehaves"),
        ),
    ];
    for cmd in ["run", "bench"] {
        let model_ok = sum.as_ref().map(|p| {
            let mut v = with(a(&[cmd, "--model"]), ins(p));
            if cmd == "bench" {
                v.extend(a(&["-n", "1", "--warmup", "0"]));
            }
            v
        });
        cases.push((cmd, 0, need(model_ok)));
        cases.push((
            cmd,
            3,
            need(refused.as_ref().map(|p| {
                a(&[
                    cmd,
                    "--model",
                    "--program",
                    p,
                    "--root",
                    &root,
                    "--in",
                    &format!("image={relu_in}"),
                ])
            })),
        ));
        cases.push((cmd, 4, need(sum.as_ref().map(|p| with(a(&[cmd]), ins(p))))));
    }
    // Zeros plus zeros against ones: the output differs.
    cases.push((
        "run",
        1,
        need(sum.as_ref().map(|p| {
            with(a(&["run", "--model"]), ins(p))
                .into_iter()
                .chain(a(&["--expect", &format!("4={ones}")]))
                .collect()
        })),
    ));

    let mut all_codes = std::collections::BTreeSet::new();
    for cmd in [
        "info", "doctor", "run", "bench", "parity", "mlp", "firmware",
    ] {
        let (table, options) = exit_table(&[cmd, "--help"]);
        assert!(!table.is_empty(), "{cmd}: empty exit table");
        // Options the table names exist in this command's help.
        for (_, text) in &table {
            for flag in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                if flag.starts_with("--") {
                    assert!(
                        options.contains(flag),
                        "{cmd} --help: exit table names {flag}, which {cmd} does not have"
                    );
                }
            }
        }
        let documented: Vec<i32> = table.iter().map(|(c, _)| *c).collect();
        let covered: Vec<i32> = cases.iter().filter(|c| c.0 == cmd).map(|c| c.1).collect();
        let mut sorted = covered.clone();
        sorted.sort();
        assert_eq!(
            documented, sorted,
            "{cmd}: documented codes vs the cases here"
        );
        all_codes.extend(documented);
    }
    for (cmd, want, args) in &cases {
        match args {
            Ok(args) => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = probe(&args);
                assert_eq!(code(&o), *want, "{cmd} {args:?}: stderr {}", stderr(&o));
            }
            Err(why) => eprintln!("SKIPPED {cmd} exit {want}: {why}"),
        }
    }
    // The top-level table is the union of the commands'.
    let (top, _) = exit_table(&["--help"]);
    let top: std::collections::BTreeSet<i32> = top.iter().map(|(c, _)| *c).collect();
    assert_eq!(top, all_codes);
}

/// Every `--json` output starts with the same head: schema (named after
/// the command), schema_version, tool, timestamp.
#[test]
fn every_json_output_has_the_same_head() {
    let s = Scene::new();
    let root = s.root();
    let fw = s.file("fw.macho");
    let mut macho = Vec::new();
    for x in [0xfeed_facfu32, 0x0100_000c, 0, 0xc, 0, 0, 0, 0] {
        macho.extend_from_slice(&x.to_le_bytes());
    }
    macho.resize(0x4000, 0);
    std::fs::write(&fw, macho).unwrap();
    let receipt = s.file("d.json");
    let mut runs: Vec<(&str, Vec<String>)> = vec![
        ("info", vec!["info".into(), "--root".into(), root.clone()]),
        (
            "doctor",
            vec![
                "doctor".into(),
                "--root".into(),
                root.clone(),
                "--receipt".into(),
                receipt,
            ],
        ),
        (
            "parity",
            vec![
                "parity".into(),
                "--model".into(),
                "--cells".into(),
                "select".into(),
            ],
        ),
        ("mlp", vec!["mlp".into(), "--model".into()]),
        ("firmware", vec!["firmware".into(), fw]),
    ];
    if let Some(p) = fixture("tinygrad_sum.hwx") {
        let p = p.display().to_string();
        let input = s.file("in128.bin");
        let common = [
            "--model".to_owned(),
            "--program".into(),
            p,
            "--in".into(),
            format!("5={input}"),
            "--in".into(),
            format!("6={input}"),
        ];
        let mut run = vec!["run".to_owned()];
        run.extend(common.iter().cloned());
        runs.push(("run", run));
        let mut bench = vec!["bench".to_owned()];
        bench.extend(common.iter().cloned());
        bench.extend(["-n".into(), "1".into()]);
        runs.push(("bench-receipt", bench));
    }
    for (name, args) in runs {
        let mut all = vec!["--json"];
        all.extend(args.iter().map(String::as_str));
        let o = probe(&all);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{all:?}: {e}: {}", String::from_utf8_lossy(&o.stdout)));
        assert_eq!(v["schema"], format!("ane-probe/{name}"), "{all:?}");
        assert_eq!(v["schema_version"], 1, "{all:?}");
        assert_eq!(v["tool"]["name"], "ane-probe", "{all:?}");
        assert!(v["timestamp"].as_str().unwrap().ends_with('Z'), "{all:?}");
        assert!(v["tool"]["version"].is_string(), "{all:?}");
    }
}

// ---------------------------------------------------------------------------
// compile

/// A version 1.0 `.npy` of fp16 values (C order).
fn npy_f16(dims: &[usize], vals: &[f32]) -> Vec<u8> {
    let shape: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let mut h = format!(
        "{{'descr': '<f2', 'fortran_order': False, 'shape': ({},), }}",
        shape.join(", ")
    );
    let unpadded = 10 + h.len() + 1;
    h.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(h.len() as u16).to_le_bytes());
    v.extend_from_slice(h.as_bytes());
    for x in vals {
        v.extend_from_slice(&half::f16::from_f32(*x).to_le_bytes());
    }
    v
}

fn npy_values(bytes: &[u8]) -> Vec<f32> {
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + hlen..]
        .chunks(2)
        .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect()
}

/// Every zoo model: compiled by `ane-probe compile`, run by `ane-probe run
/// --model` with the model's tensor names and an input in the model's
/// shape, and the output within the zoo's fp16 tolerance of the CPU.
#[test]
fn compile_and_run_the_zoo_on_the_model() {
    let dir = tempfile::tempdir().unwrap();
    for ex in ane::compiler::zoo::all(7) {
        let onnx = dir.path().join(format!("{}.onnx", ex.name));
        let anec = dir.path().join(format!("{}.anec", ex.name));
        std::fs::write(&onnx, &ex.onnx).unwrap();
        let o = probe(&[
            "compile",
            onnx.to_str().unwrap(),
            "-o",
            anec.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0, "{}: {}", ex.name, stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains(&format!("{} TD(s)", ex.tds)), "{text}");
        let (name, dims, vals) = &ex.inputs[0];
        let x = dir.path().join(format!("{}_x.npy", ex.name));
        std::fs::write(&x, npy_f16(dims, vals)).unwrap();
        let y = dir.path().join(format!("{}_y.npy", ex.name));
        let o = probe(&[
            "run",
            "--model",
            "--program",
            anec.to_str().unwrap(),
            "--in",
            &format!("{name}={}", x.display()),
            "--out",
            &format!("{}={}", ex.output.0, y.display()),
        ]);
        assert_eq!(code(&o), 0, "{}: {}", ex.name, stderr(&o));
        let got = npy_values(&std::fs::read(&y).unwrap());
        let err = ex
            .max_error(&got)
            .unwrap_or_else(|e| panic!("{}: {e}", ex.name));
        println!(
            "{}: max abs error {err:.3e} (bound {:.3e})",
            ex.name,
            ex.bound()
        );
    }
}

#[test]
fn compile_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.anec");
    let out = out.to_str().unwrap();
    // An unsupported op: exit 3, the node and the op named.
    let m = dir.path().join("bad.onnx");
    std::fs::write(&m, ane::compiler::zoo::unsupported_example()).unwrap();
    let e = program_invalid(&["compile", m.to_str().unwrap(), "-o", out]);
    assert!(e.contains("'act'") && e.contains("Softmax"), "{e}");
    assert!(!Path::new(out).exists(), "nothing written");
    // Not ONNX: exit 3.
    let junk = dir.path().join("junk.onnx");
    std::fs::write(&junk, b"\xff\xff\xff\xff").unwrap();
    program_invalid(&["compile", junk.to_str().unwrap(), "-o", out]);
    // H14 is out of scope: a usage error, whatever the model.
    let e = usage_error(&[
        "compile",
        m.to_str().unwrap(),
        "-o",
        out,
        "--target",
        "t6021",
    ]);
    assert!(e.contains("out of scope"), "{e}");
    assert!(
        e.contains("H14 (T6021) program container is not yet understood"),
        "the reason: {e}"
    );
    // A missing model: usage error.
    usage_error(&["compile", "/nonexistent.onnx", "-o", out]);
    // The help documents the subset and the target.
    let o = probe(&["compile", "--help"]);
    assert_eq!(code(&o), 0);
    let help = String::from_utf8_lossy(&o.stdout);
    // Every op the compiler lowers, named in the op column of the
    // subset's table.
    for op in ane::compiler::SUPPORTED_OPS {
        let listed = help.lines().any(|l| {
            let col: String = l.chars().take(22).collect();
            l.starts_with("  ") && col.split([',', ' ']).any(|w| w == *op)
        });
        assert!(listed, "help lacks {op}: {help}");
    }
    for s in [
        "t6021",
        "H14 program container is understood",
        "exit code 3",
    ] {
        assert!(help.contains(s), "help lacks {s}: {help}");
    }
}
