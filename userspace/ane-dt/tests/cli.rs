// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! ane-dt's command line: usage errors exit 2 and name the option, options
//! work before and after the command, refusals exit 1.

use std::process::{Command, Output};

fn ane_dt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ane-dt"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn usage_errors_exit_2_and_name_the_option() {
    let o = ane_dt(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Usage: ane-dt [OPTIONS] <COMMAND>"));

    let o = ane_dt(&["--delivery", "grub", "status"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("'--delivery <WAY>'") && e.contains("m1n1, omarchy"),
        "{e}"
    );

    let o = ane_dt(&["status", "--m1n1-config", "etc/sysconfig/update-m1n1"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("'--m1n1-config <FILE>'") && e.contains("absolute path"),
        "{e}"
    );

    let o = ane_dt(&["instal"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'instal'"));
}

#[test]
fn options_go_before_or_after_the_command_and_refusals_exit_1() {
    let root = std::env::temp_dir().join(format!("ane-dt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let r = root.to_str().unwrap();
    for args in [
        ["--root", r, "--board", "t8112-j413", "install"],
        ["install", "--root", r, "--board", "t8112-j413"],
    ] {
        let o = ane_dt(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&o).contains("no ANE overlay for board t8112-j413"),
            "{}",
            stderr(&o)
        );
    }
    let o = ane_dt(&["status", "--root", r, "--board", "t8103-j274"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("board:      t8103-j274"), "{out}");
    assert!(
        out.contains("m1n1 conf:  /etc/default/update-m1n1 (no update-m1n1 installed"),
        "{out}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}
