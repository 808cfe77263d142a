// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The module's options as the driver declares them (`ane_drv.rs`) and as
//! `packaging/common/ane.conf` documents them agree, and the CPU-cluster
//! boost, a power policy, is off unless an administrator turns it on
//! (kernel-2 N6).

use std::collections::BTreeMap;
use std::path::PathBuf;

fn top() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `name: type { default: VALUE, ... }` entries of the production params.
fn driver_defaults() -> BTreeMap<String, String> {
    let src = std::fs::read_to_string(top().join("drivers/accel/ane/ane_drv.rs")).unwrap();
    let params = src.split("params: {").nth(1).expect("a params block");
    let mut out = BTreeMap::new();
    let mut name = None;
    for line in params.lines() {
        let t = line.trim();
        if t.starts_with("$(") {
            break;
        }
        if let Some(head) = t.strip_suffix('{') {
            if let Some((n, _ty)) = head.split_once(':') {
                name = Some(n.trim().to_owned());
            }
        } else if let Some(v) = t.strip_prefix("default:") {
            let v = v.trim().trim_end_matches(',').to_owned();
            out.insert(name.take().expect("a default inside a param"), v);
        }
    }
    out
}

/// `#options ane NAME=VALUE` lines of ane.conf.
fn conf_defaults() -> BTreeMap<String, String> {
    let conf = std::fs::read_to_string(top().join("packaging/common/ane.conf")).unwrap();
    conf.lines()
        .filter_map(|l| l.strip_prefix("#options ane "))
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("NAME=VALUE");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

#[test]
fn ane_conf_shows_the_driver_defaults() {
    let driver = driver_defaults();
    assert!(driver.len() >= 7, "parsed params: {driver:?}");
    assert_eq!(conf_defaults(), driver);
}

#[test]
fn cpu_boost_is_off_by_default() {
    assert_eq!(
        driver_defaults().get("boost_idle_ms").map(String::as_str),
        Some("0")
    );
}
