// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The boards an overlay exists for. Any other board is refused.

/// One supported board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Board {
    /// The DTB's name without `.dtb`, as in the kernel tree (`t8103-j274`).
    pub dtb: &'static str,
    /// The board's first root compatible (`apple,j274`).
    pub compatible: &'static str,
    /// The SoC's root compatible (`apple,t8103`).
    pub soc: &'static str,
    /// The overlay's name without `-ane.dtbo` (`t8103`).
    pub overlay: &'static str,
    /// The compatible of the ANE node the overlay adds.
    pub ane_compatible: &'static str,
    /// What the machine is.
    pub name: &'static str,
}

const fn b(
    dtb: &'static str,
    compatible: &'static str,
    soc: &'static str,
    overlay: &'static str,
    ane_compatible: &'static str,
    name: &'static str,
) -> Board {
    Board {
        dtb,
        compatible,
        soc,
        overlay,
        ane_compatible,
        name,
    }
}

/// Every board with an overlay: the 7.3 board trees the overlays are checked
/// against (tools/dt/check.sh covers the MacBook/Mac mini/Mac Studio ones).
pub const BOARDS: &[Board] = &[
    b(
        "t8103-j274",
        "apple,j274",
        "apple,t8103",
        "t8103",
        "apple,t8103-ane",
        "Mac mini (M1, 2020)",
    ),
    b(
        "t8103-j293",
        "apple,j293",
        "apple,t8103",
        "t8103",
        "apple,t8103-ane",
        "MacBook Pro (13-inch, M1, 2020)",
    ),
    b(
        "t8103-j313",
        "apple,j313",
        "apple,t8103",
        "t8103",
        "apple,t8103-ane",
        "MacBook Air (M1, 2020)",
    ),
    b(
        "t8103-j456",
        "apple,j456",
        "apple,t8103",
        "t8103",
        "apple,t8103-ane",
        "iMac (24-inch, M1, 2021, 4 ports)",
    ),
    b(
        "t8103-j457",
        "apple,j457",
        "apple,t8103",
        "t8103",
        "apple,t8103-ane",
        "iMac (24-inch, M1, 2021, 2 ports)",
    ),
    b(
        "t6000-j314s",
        "apple,j314s",
        "apple,t6000",
        "t6000",
        "apple,t6000-ane",
        "MacBook Pro (14-inch, M1 Pro, 2021)",
    ),
    b(
        "t6000-j316s",
        "apple,j316s",
        "apple,t6000",
        "t6000",
        "apple,t6000-ane",
        "MacBook Pro (16-inch, M1 Pro, 2021)",
    ),
    b(
        "t6001-j314c",
        "apple,j314c",
        "apple,t6001",
        "t6001",
        "apple,t6000-ane",
        "MacBook Pro (14-inch, M1 Max, 2021)",
    ),
    b(
        "t6001-j316c",
        "apple,j316c",
        "apple,t6001",
        "t6001",
        "apple,t6000-ane",
        "MacBook Pro (16-inch, M1 Max, 2021)",
    ),
    b(
        "t6001-j375c",
        "apple,j375c",
        "apple,t6001",
        "t6001",
        "apple,t6000-ane",
        "Mac Studio (M1 Max, 2022)",
    ),
    b(
        "t6020-j414s",
        "apple,j414s",
        "apple,t6020",
        "t6020",
        "apple,t6020-ane",
        "MacBook Pro (14-inch, M2 Pro, 2023)",
    ),
    b(
        "t6020-j416s",
        "apple,j416s",
        "apple,t6020",
        "t6020",
        "apple,t6020-ane",
        "MacBook Pro (16-inch, M2 Pro, 2023)",
    ),
    b(
        "t6020-j474s",
        "apple,j474s",
        "apple,t6020",
        "t6020",
        "apple,t6020-ane",
        "Mac mini (M2 Pro, 2023)",
    ),
    b(
        "t6021-j414c",
        "apple,j414c",
        "apple,t6021",
        "t6021",
        "apple,t6021-ane",
        "MacBook Pro (14-inch, M2 Max, 2023)",
    ),
    b(
        "t6021-j416c",
        "apple,j416c",
        "apple,t6021",
        "t6021",
        "apple,t6021-ane",
        "MacBook Pro (16-inch, M2 Max, 2023)",
    ),
    b(
        "t6021-j475c",
        "apple,j475c",
        "apple,t6021",
        "t6021",
        "apple,t6021-ane",
        "Mac Studio (M2 Max, 2023)",
    ),
];

/// The board whose root compatible list is `compatible` (board first, then
/// the SoC, as in every Apple tree).
pub fn by_root_compatible(compatible: &[String]) -> Option<&'static Board> {
    BOARDS.iter().find(|b| {
        compatible.first().map(String::as_str) == Some(b.compatible)
            && compatible.iter().any(|c| c == b.soc)
    })
}

/// The board whose DTB is named `dtb` (`t8103-j274`, with or without `.dtb`).
pub fn by_dtb(dtb: &str) -> Option<&'static Board> {
    let dtb = dtb.strip_suffix(".dtb").unwrap_or(dtb);
    BOARDS.iter().find(|b| b.dtb == dtb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for b in BOARDS {
            assert!(b.dtb.starts_with(b.overlay), "{}", b.dtb);
            assert_eq!(format!("apple,{}", b.overlay), b.soc, "{}", b.dtb);
            let jname = b.dtb.split_once('-').unwrap().1;
            assert_eq!(format!("apple,{jname}"), b.compatible);
            assert!(b.ane_compatible.starts_with("apple,t") && b.ane_compatible.ends_with("-ane"));
        }
    }

    #[test]
    fn lookups() {
        let c = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            by_root_compatible(&c(&["apple,j274", "apple,t8103", "apple,arm-platform"]))
                .unwrap()
                .dtb,
            "t8103-j274"
        );
        assert_eq!(
            by_root_compatible(&c(&["apple,j316c", "apple,t6001", "apple,arm-platform"]))
                .unwrap()
                .overlay,
            "t6001"
        );
        // A board of an unsupported SoC, or a board/SoC mismatch, is unknown.
        assert!(
            by_root_compatible(&c(&["apple,j413", "apple,t8112", "apple,arm-platform"])).is_none()
        );
        assert!(by_root_compatible(&c(&["apple,j274", "apple,t6001"])).is_none());
        assert!(by_root_compatible(&[]).is_none());
        assert_eq!(
            by_dtb("t6021-j475c.dtb").unwrap().ane_compatible,
            "apple,t6021-ane"
        );
        assert_eq!(by_dtb("t6000-j314s").unwrap().overlay, "t6000");
        assert_eq!(
            by_root_compatible(&c(&["apple,j474s", "apple,t6020", "apple,arm-platform"]))
                .unwrap()
                .ane_compatible,
            "apple,t6020-ane"
        );
        // An M2 Pro board name with the M2 Max chip is no board of ours.
        assert!(by_root_compatible(&c(&["apple,j414s", "apple,t6021"])).is_none());
    }

    /// The overlay of every board exists, and its ANE node carries the
    /// board's ANE compatible, which is a compatible of the driver.
    #[test]
    fn every_overlay_exists_with_the_boards_compatible() {
        let dts = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dts");
        let soc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../drivers/accel/ane/hw/soc.rs"
        ))
        .unwrap();
        for b in BOARDS {
            let text = std::fs::read_to_string(format!("{dts}/{}-ane.dts", b.overlay))
                .unwrap_or_else(|e| panic!("{}: {e}", b.overlay));
            let node = format!("\t\t\t\tcompatible = \"{}\";", b.ane_compatible);
            assert!(
                text.contains(&node),
                "{}: no node {}",
                b.overlay,
                b.ane_compatible
            );
            assert!(
                soc.contains(&format!("c\"{}\"", b.ane_compatible)),
                "{} is not in soc.rs",
                b.ane_compatible
            );
        }
    }

    /// The M1 Pro and M2 Pro overlays are the M1 Max and M2 Max ones: the
    /// same text after the header comment, but for the M2 Pro's node
    /// compatible and skip-if-compatible.
    #[test]
    fn twin_overlays_match() {
        let dts = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dts");
        let body = |soc: &str| {
            let t = std::fs::read_to_string(format!("{dts}/{soc}-ane.dts")).unwrap();
            t[t.find("*/").unwrap()..].to_string()
        };
        assert_eq!(body("t6000"), body("t6001"));
        let t6021 = body("t6021")
            .replace(
                "skip-if-compatible = \"apple,t6021-ane\", \"apple,t6020-ane\";",
                "skip-if-compatible = \"apple,t6020-ane\";",
            )
            .replacen(
                "compatible = \"apple,t6021-ane\";",
                "compatible = \"apple,t6020-ane\";",
                1,
            );
        assert_eq!(body("t6020"), t6021);
    }
}
