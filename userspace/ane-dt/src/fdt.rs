// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A reader for flattened device trees (DTB, version 16 and 17).
//!
//! Enough to answer the questions `ane-dt` asks of a board tree: which nodes
//! exist, what a property holds, the largest phandle. Writing is left to
//! dtc's tools (`fdtput`, `fdtoverlay`).
//!
//! Why not the `fdt` crate (issue 27 asked): measured against 0.1.5, the
//! newest non-alpha release, it reads the same nodes and property bytes as
//! this reader from the live j414c tree (659 nodes), the 7.3 t8103-j274
//! tree (320) and our t6021 overlay (42), but it **panics** on damaged
//! input where this reader returns an error: with one byte of the blob set
//! to 0x00, 0xff or 0x7f at about 2,000 positions per file, 1,385 of 6,054
//! (live tree), 2,294 of 6,129 (t8103-j274) and 3,623 of 10,506 (overlay)
//! variants panicked (slice index out of range, `assertion failed: bad
//! node`). ane-dt reads trees from `--dtbs`, `/boot` and `--overlays`, and a
//! damaged one must be refused with its file named, not abort the tool
//! midway through an install. (0.2.0 is an alpha and MPL-2.0-licensed.)
//! `damaged_blobs_are_errors_not_panics` below holds this reader to that.

use std::collections::BTreeMap;
use std::fmt;

const MAGIC: u32 = 0xd00d_feed;
const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;

/// Why a blob is not a usable device tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdtError(pub String);

impl fmt::Display for FdtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid device tree: {}", self.0)
    }
}

impl std::error::Error for FdtError {}

fn err<T>(msg: impl Into<String>) -> Result<T, FdtError> {
    Err(FdtError(msg.into()))
}

/// A parsed tree: every node by its full path ("/", "/soc", ...), in tree
/// order, with its properties.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fdt {
    /// Node path → properties (name → raw value).
    pub nodes: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

fn be32(b: &[u8], off: usize) -> Result<u32, FdtError> {
    match b.get(off..off + 4) {
        Some(s) => Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
        None => err(format!("truncated at offset {off:#x}")),
    }
}

fn cstr(b: &[u8], off: usize) -> Result<(&str, usize), FdtError> {
    let rest = b
        .get(off..)
        .ok_or_else(|| FdtError("string out of bounds".into()))?;
    let len = rest
        .iter()
        .position(|&c| c == 0)
        .ok_or_else(|| FdtError("unterminated string".into()))?;
    let s = std::str::from_utf8(&rest[..len]).map_err(|_| FdtError("non-UTF-8 name".into()))?;
    Ok((s, len))
}

impl Fdt {
    /// Parses a DTB blob.
    pub fn parse(blob: &[u8]) -> Result<Fdt, FdtError> {
        if be32(blob, 0)? != MAGIC {
            return err("bad magic");
        }
        let total = be32(blob, 4)? as usize;
        if total > blob.len() {
            return err("header size exceeds the file");
        }
        let blob = &blob[..total];
        let off_struct = be32(blob, 8)? as usize;
        let off_strings = be32(blob, 12)? as usize;
        let version = be32(blob, 20)?;
        if version < 16 {
            return err(format!("version {version} is too old"));
        }
        let size_strings = be32(blob, 32)? as usize;
        let size_struct = be32(blob, 36)? as usize;
        let strings = blob
            .get(off_strings..off_strings + size_strings)
            .ok_or_else(|| FdtError("strings block out of bounds".into()))?;
        let st = blob
            .get(off_struct..off_struct + size_struct)
            .ok_or_else(|| FdtError("structure block out of bounds".into()))?;

        let mut fdt = Fdt::default();
        let mut stack: Vec<String> = Vec::new();
        let mut off = 0;
        loop {
            let token = be32(st, off)?;
            off += 4;
            match token {
                BEGIN_NODE => {
                    let (name, len) = cstr(st, off)?;
                    off = (off + len + 1 + 3) & !3;
                    let path = match stack.last() {
                        None => "/".to_string(),
                        Some(p) if p == "/" => format!("/{name}"),
                        Some(p) => format!("{p}/{name}"),
                    };
                    fdt.nodes.insert(path.clone(), BTreeMap::new());
                    stack.push(path);
                }
                END_NODE => {
                    if stack.pop().is_none() {
                        return err("unbalanced END_NODE");
                    }
                }
                PROP => {
                    let len = be32(st, off)? as usize;
                    let nameoff = be32(st, off + 4)? as usize;
                    off += 8;
                    let value = st
                        .get(off..off + len)
                        .ok_or_else(|| FdtError("property value out of bounds".into()))?
                        .to_vec();
                    off = (off + len + 3) & !3;
                    let (name, _) = cstr(strings, nameoff)?;
                    let node = stack
                        .last()
                        .ok_or_else(|| FdtError("property outside a node".into()))?;
                    fdt.nodes
                        .get_mut(node)
                        .expect("node inserted at BEGIN_NODE")
                        .insert(name.to_string(), value);
                }
                NOP => {}
                END => break,
                t => return err(format!("unknown token {t:#x}")),
            }
        }
        if !stack.is_empty() {
            return err("tree ends inside a node");
        }
        if !fdt.nodes.contains_key("/") {
            return err("no root node");
        }
        Ok(fdt)
    }

    /// Whether a node exists.
    pub fn has_node(&self, path: &str) -> bool {
        self.nodes.contains_key(path)
    }

    /// A property's raw value.
    pub fn prop(&self, path: &str, name: &str) -> Option<&[u8]> {
        self.nodes.get(path)?.get(name).map(|v| v.as_slice())
    }

    /// A property as a list of strings (NUL-separated).
    pub fn strings(&self, path: &str, name: &str) -> Vec<String> {
        match self.prop(path, name) {
            None => Vec::new(),
            Some(v) => v
                .split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect(),
        }
    }

    /// A node's phandle, if it has one.
    pub fn phandle(&self, path: &str) -> Option<u32> {
        let v = self.prop(path, "phandle")?;
        (v.len() == 4).then(|| u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
    }

    /// The largest phandle in the tree (0 when there is none).
    pub fn max_phandle(&self) -> u32 {
        self.nodes
            .keys()
            .filter_map(|p| self.phandle(p))
            .max()
            .unwrap_or(0)
    }

    /// Whether a node is enabled (no status, or "okay"/"ok").
    pub fn enabled(&self, path: &str) -> bool {
        match self.strings(path, "status").first().map(String::as_str) {
            None | Some("okay") | Some("ok") => true,
            Some(_) => false,
        }
    }

    /// Paths of the nodes whose compatible list contains `compatible`.
    pub fn find_compatible(&self, compatible: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|p| {
                self.strings(p, "compatible")
                    .iter()
                    .any(|c| c == compatible)
            })
            .cloned()
            .collect()
    }

    /// Paths of the nodes whose compatible looks like an ANE's
    /// (`apple,<chip>-ane`).
    pub fn find_ane_nodes(&self) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|p| {
                self.strings(p, "compatible")
                    .iter()
                    .any(|c| c.starts_with("apple,t") && c.ends_with("-ane"))
            })
            .cloned()
            .collect()
    }
}

/// Builds DTBs (version 17). Used by the tests, and handy to make small
/// trees by hand.
#[derive(Debug, Default)]
pub struct Builder {
    st: Vec<u8>,
    strings: Vec<u8>,
}

impl Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    fn word(&mut self, w: u32) {
        self.st.extend_from_slice(&w.to_be_bytes());
    }

    fn pad(&mut self) {
        while self.st.len() % 4 != 0 {
            self.st.push(0);
        }
    }

    /// Opens a node (the root is "").
    pub fn begin(&mut self, name: &str) -> &mut Self {
        self.word(BEGIN_NODE);
        self.st.extend_from_slice(name.as_bytes());
        self.st.push(0);
        self.pad();
        self
    }

    /// Closes the innermost open node.
    pub fn end(&mut self) -> &mut Self {
        self.word(END_NODE);
        self
    }

    /// Adds a property with a raw value.
    pub fn prop(&mut self, name: &str, value: &[u8]) -> &mut Self {
        let nameoff = match find_string(&self.strings, name) {
            Some(o) => o,
            None => {
                let o = self.strings.len();
                self.strings.extend_from_slice(name.as_bytes());
                self.strings.push(0);
                o
            }
        };
        self.word(PROP);
        self.word(value.len() as u32);
        self.word(nameoff as u32);
        self.st.extend_from_slice(value);
        self.pad();
        self
    }

    /// Adds a string-list property.
    pub fn prop_strs(&mut self, name: &str, values: &[&str]) -> &mut Self {
        let mut v = Vec::new();
        for s in values {
            v.extend_from_slice(s.as_bytes());
            v.push(0);
        }
        self.prop(name, &v)
    }

    /// Adds a property of 32-bit cells.
    pub fn prop_u32s(&mut self, name: &str, values: &[u32]) -> &mut Self {
        let v: Vec<u8> = values.iter().flat_map(|c| c.to_be_bytes()).collect();
        self.prop(name, &v)
    }

    /// Finishes the blob.
    pub fn finish(&mut self) -> Vec<u8> {
        self.word(END);
        let header = 40usize;
        let rsvmap = 16usize; // one empty reservation entry
        let off_struct = header + rsvmap;
        let off_strings = off_struct + self.st.len();
        let total = off_strings + self.strings.len();
        let mut b = Vec::with_capacity(total);
        for w in [
            MAGIC,
            total as u32,
            off_struct as u32,
            off_strings as u32,
            header as u32,
            17,
            16,
            0,
            self.strings.len() as u32,
            self.st.len() as u32,
        ] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        b.extend_from_slice(&[0u8; 16]);
        b.extend_from_slice(&self.st);
        b.extend_from_slice(&self.strings);
        b
    }
}

fn find_string(table: &[u8], s: &str) -> Option<usize> {
    let mut off = 0;
    for part in table.split(|&c| c == 0) {
        if part == s.as_bytes() {
            return Some(off);
        }
        off += part.len() + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut b = Builder::new();
        b.begin("")
            .prop_strs(
                "compatible",
                &["apple,j274", "apple,t8103", "apple,arm-platform"],
            )
            .begin("soc")
            .begin("npu@1")
            .prop_strs("compatible", &["apple,t8103-ane"])
            .prop_strs("status", &["disabled"])
            .prop_u32s("phandle", &[7])
            .end()
            .begin("pmgr@2")
            .prop_u32s("phandle", &[3])
            .end()
            .end()
            .end();
        b.finish()
    }

    /// Every truncation and one-byte corruption of a tree is an error or a
    /// tree, never a panic (the property the `fdt` crate lacks; see the
    /// module comment).
    #[test]
    fn damaged_blobs_are_errors_not_panics() {
        let good = sample();
        for cut in 0..good.len() {
            assert!(Fdt::parse(&good[..cut]).is_err(), "truncated at {cut}");
        }
        let mut errors = 0;
        for i in 0..good.len() {
            for v in [0x00, 0xff, 0x7f, 0x01, 0x02, 0x03, 0x09] {
                let mut bad = good.clone();
                bad[i] = v;
                errors += usize::from(Fdt::parse(&bad).is_err());
            }
        }
        assert!(errors > good.len(), "corruptions mostly detected: {errors}");
    }

    #[test]
    fn parses_what_the_builder_writes() {
        let f = Fdt::parse(&sample()).unwrap();
        assert_eq!(
            f.strings("/", "compatible"),
            ["apple,j274", "apple,t8103", "apple,arm-platform"]
        );
        assert!(f.has_node("/soc/npu@1"));
        assert!(f.has_node("/soc/pmgr@2"));
        assert_eq!(f.phandle("/soc/npu@1"), Some(7));
        assert_eq!(f.max_phandle(), 7);
        assert!(!f.enabled("/soc/npu@1"));
        assert!(f.enabled("/soc"));
        assert_eq!(f.find_ane_nodes(), ["/soc/npu@1"]);
        assert_eq!(f.find_compatible("apple,t8103"), ["/"]);
    }

    #[test]
    fn rejects_garbage() {
        assert!(Fdt::parse(b"").is_err());
        assert!(Fdt::parse(&[0u8; 64]).is_err());
        let mut b = sample();
        b.truncate(b.len() - 20);
        assert!(Fdt::parse(&b).is_err(), "truncated");
        // Every truncation and every single-byte corruption is an error or a
        // tree, never a panic.
        let good = sample();
        for n in 0..good.len() {
            let _ = Fdt::parse(&good[..n]);
            let mut c = good.clone();
            c[n] ^= 0xff;
            let _ = Fdt::parse(&c);
        }
    }
}
