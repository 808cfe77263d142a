// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Test data for the HWX and `.anec` tests: the real fixtures (when the
//! development checkout's `../shared` is present), a builder of synthetic
//! HWX files, a small PRNG, and a reader for the eiln kernel archive.

use std::io::Read;

use crate::tensor::Shape;

/// The bytes of fixture `name`, or `None` (with a message) when the
/// fixture directory is absent, as in a user's clone.
pub(crate) fn fixture(name: &str) -> Option<Vec<u8>> {
    let path = crate::fixtures::path(name)?;
    match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) => panic!("fixture directory exists but {name} cannot be read: {e}"),
    }
}

/// The mutation tests draw from the parity cells' generator.
pub(crate) use crate::parity::Rng;

/// The regular files of a `.tar.gz` archive, as (path, bytes).
pub(crate) fn read_tar_gz(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(archive)
        .read_to_end(&mut tar)
        .expect("gunzip");
    let mut files = Vec::new();
    let mut off = 0;
    while off + 512 <= tar.len() {
        let h = &tar[off..off + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let field = |r: std::ops::Range<usize>| {
            let f = &h[r];
            let end = f.iter().position(|&b| b == 0).unwrap_or(f.len());
            String::from_utf8_lossy(&f[..end]).into_owned()
        };
        let mut name = field(0..100);
        if &h[257..262] == b"ustar" {
            let prefix = field(345..500);
            if !prefix.is_empty() {
                name = format!("{prefix}/{name}");
            }
        }
        let size = usize::from_str_radix(field(124..136).trim(), 8).expect("tar size");
        let kind = h[156];
        off += 512;
        if kind == b'0' || kind == 0 {
            files.push((name, tar[off..off + size].to_vec()));
        }
        off += size.div_ceil(512) * 512;
    }
    files
}

/// One tensor of a synthetic HWX.
#[derive(Clone)]
pub(crate) struct TensorSpec {
    pub(crate) name: &'static str,
    pub(crate) output: bool,
    pub(crate) dims: [usize; 4],
    pub(crate) slot: usize,
}

/// Builds small but complete HWX files in the layout the fixtures show.
#[derive(Clone)]
pub(crate) struct HwxBuilder {
    pub(crate) subtype: u32,
    /// File offset of `__text` (0x4000 or 0x8000).
    pub(crate) text_fileoff: u64,
    pub(crate) text_vmaddr: u64,
    /// Address of the first buffer; `None` puts them after `__TEXT`.
    pub(crate) buffers_vmaddr: Option<u64>,
    pub(crate) td_size: u32,
    pub(crate) td_count: u32,
    pub(crate) weights: Vec<u8>,
    pub(crate) tensors: Vec<TensorSpec>,
    /// `LC_IDFVMLIB` (0x6) or command 0x40.
    pub(crate) region_cmd: u32,
    /// A real task stream (TDs every 0x300 bytes) instead of the
    /// placeholder chain.
    pub(crate) tsk: Option<Vec<u8>>,
}

fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn name16(v: &mut Vec<u8>, s: &str) {
    let mut b = [0u8; 16];
    b[..s.len()].copy_from_slice(s.as_bytes());
    v.extend_from_slice(&b);
}
fn pad8(v: &mut Vec<u8>) {
    while v.len() % 8 != 0 {
        v.push(0);
    }
}
fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}
/// Fixes up the cmdsize of a command built in `v` (from its start).
fn finish(mut v: Vec<u8>) -> Vec<u8> {
    pad8(&mut v);
    let size = v.len() as u32;
    v[4..8].copy_from_slice(&size.to_le_bytes());
    v
}

struct Sect {
    name: &'static str,
    seg: &'static str,
    addr: u64,
    size: u64,
    offset: u32,
    align: u32,
    flags: u32,
}

#[allow(clippy::too_many_arguments)]
fn segment(
    name: &str,
    vmaddr: u64,
    vmsize: u64,
    fileoff: u64,
    filesize: u64,
    prot: u32,
    flags: u32,
    sects: &[Sect],
) -> Vec<u8> {
    let mut v = Vec::new();
    put32(&mut v, super::LC_SEGMENT_64);
    put32(&mut v, 0);
    name16(&mut v, name);
    for x in [vmaddr, vmsize, fileoff, filesize] {
        put64(&mut v, x);
    }
    for x in [prot, prot, sects.len() as u32, flags] {
        put32(&mut v, x);
    }
    for s in sects {
        name16(&mut v, s.name);
        name16(&mut v, s.seg);
        put64(&mut v, s.addr);
        put64(&mut v, s.size);
        for x in [s.offset, s.align, 0, 0, s.flags, 0, 0, 0] {
            put32(&mut v, x);
        }
    }
    finish(v)
}

impl HwxBuilder {
    /// An H13 two-input add like `tinygrad_sum.hwx`, in the v5.4.1 style
    /// (output slot 4, inputs 5 and 6), with no constants.
    pub(crate) fn h13_add() -> HwxBuilder {
        HwxBuilder {
            subtype: 4,
            text_fileoff: 0x4000,
            text_vmaddr: 0x3000_0000,
            buffers_vmaddr: None,
            td_size: super::H13_TD_SIZE,
            td_count: 1,
            weights: Vec::new(),
            tensors: vec![
                TensorSpec {
                    name: "image",
                    output: false,
                    dims: [1, 64, 1, 1],
                    slot: 5,
                },
                TensorSpec {
                    name: "image2",
                    output: false,
                    dims: [1, 64, 1, 1],
                    slot: 6,
                },
                TensorSpec {
                    name: "probs",
                    output: true,
                    dims: [1, 64, 1, 1],
                    slot: 4,
                },
            ],
            region_cmd: super::LC_ANE_MAPPED_REGION,
            tsk: None,
        }
    }

    /// A 1×1 convolution 3→5 channels of width 33 with weights, three TDs.
    pub(crate) fn h13_conv() -> HwxBuilder {
        HwxBuilder {
            td_count: 3,
            weights: (0..5 * 64).map(|i| i as u8).collect(),
            tensors: vec![
                TensorSpec {
                    name: "x",
                    output: false,
                    dims: [1, 3, 2, 33],
                    slot: 5,
                },
                TensorSpec {
                    name: "y",
                    output: true,
                    dims: [1, 5, 2, 33],
                    slot: 4,
                },
            ],
            region_cmd: super::LC_IDFVMLIB,
            ..HwxBuilder::h13_add()
        }
    }

    /// The task stream size: TDs every 0x300 bytes.
    pub(crate) fn tsk_size(&self) -> u64 {
        if let Some(t) = &self.tsk {
            return t.len() as u64;
        }
        u64::from(self.td_count - 1) * 0x300 + u64::from(self.td_size)
    }

    /// The task stream: a valid TD chain with otherwise zero TDs.
    pub(crate) fn task_stream(&self) -> Vec<u8> {
        if let Some(t) = &self.tsk {
            return t.clone();
        }
        let mut t = vec![0u8; self.tsk_size() as usize];
        for i in 0..self.td_count {
            let o = i as usize * 0x300;
            let last = i + 1 == self.td_count;
            let w0 = i | if last { 1 << 25 } else { 0 } | if i > 0 { 1 << 24 } else { 0 };
            t[o..o + 4].copy_from_slice(&w0.to_le_bytes());
            let next = if last { 0 } else { (i + 1) * 0x300 };
            t[o + 0x1C..o + 0x20].copy_from_slice(&next.to_le_bytes());
            // The KernelDMASrc stream header, for recognisability.
            t[o + 0x28..o + 0x2C].copy_from_slice(&0xF401_F800u32.to_le_bytes());
        }
        t
    }

    pub(crate) fn build(&self) -> Vec<u8> {
        let tsk = self.tsk_size();
        let krn = self.weights.len() as u64;
        let const_rel = round_up(tsk, 64);
        let text_seg = round_up(const_rel + krn, 0x4000).max(0x4000);
        let mut buf_addr = self.buffers_vmaddr.unwrap_or(self.text_vmaddr + text_seg);

        let mut cmds: Vec<Vec<u8>> = Vec::new();
        cmds.push(segment("__PAGEZERO", 0, 0x4000, 0, 0, 0, 4, &[]));
        let mut text_sects = vec![Sect {
            name: "__text",
            seg: "__TEXT",
            addr: self.text_vmaddr,
            size: tsk,
            offset: self.text_fileoff as u32,
            align: 14,
            flags: 0x28,
        }];
        if krn > 0 {
            text_sects.push(Sect {
                name: "__const",
                seg: "__TEXT",
                addr: self.text_vmaddr + const_rel,
                size: krn,
                offset: (self.text_fileoff + const_rel) as u32,
                align: 6,
                flags: 0x26,
            });
        }
        cmds.push(segment(
            "__TEXT",
            self.text_vmaddr,
            text_seg,
            self.text_fileoff,
            text_seg,
            5,
            0,
            &text_sects,
        ));

        let mut slots = [0u64; 32];
        slots[0] = self.text_vmaddr;
        if krn > 0 {
            slots[1] = self.text_vmaddr + const_rel;
        }
        let mut addrs = Vec::new();
        for t in &self.tensors {
            let [n, c, h, w] = t.dims;
            let layout = Shape::new(n, c, h, w).unwrap().layout();
            let size = layout.tiled_bytes() as u64;
            let vmsize = layout.buffer_size() as u64;
            let (sname, prot, flags) = if t.output {
                ("__data", 2, 0x23)
            } else {
                ("__const", 1, 0x21)
            };
            cmds.push(segment(
                "__FVMLIB",
                buf_addr,
                vmsize,
                0,
                0,
                prot,
                6,
                &[Sect {
                    name: sname,
                    seg: "__FVMLIB",
                    addr: buf_addr,
                    size,
                    offset: 0,
                    align: 14,
                    flags,
                }],
            ));
            slots[t.slot] = buf_addr;
            addrs.push(buf_addr);
            buf_addr += vmsize;
        }
        for (t, &addr) in self.tensors.iter().zip(&addrs) {
            let mut v = Vec::new();
            put32(&mut v, self.region_cmd);
            put32(&mut v, 0);
            if self.region_cmd == super::LC_IDFVMLIB {
                for x in [0x14, 0, addr as u32] {
                    put32(&mut v, x);
                }
            } else {
                put32(&mut v, 0x18);
                put32(&mut v, 0);
                put64(&mut v, addr);
            }
            v.extend_from_slice(t.name.as_bytes());
            v.push(0);
            cmds.push(finish(v));
        }

        // Program state.
        let mut v = Vec::new();
        for x in [super::LC_THREAD, 0, 1, 532] {
            put32(&mut v, x);
        }
        let mut words = vec![0u32; 532];
        for (k, &a) in slots.iter().enumerate() {
            words[2 * k] = a as u32;
            words[2 * k + 1] = (a >> 32) as u32;
        }
        words[512] = self.text_vmaddr as u32;
        words[513] = (self.text_vmaddr >> 32) as u32;
        words[514] = self.td_size / 4 - 1;
        words[515] = self.td_count;
        words[517] = 0xFFFF;
        words[523] = 16 + 532 * 4;
        for w in words {
            put32(&mut v, w);
        }
        v.extend_from_slice(b"net\0");
        cmds.push(finish(v));

        // Tensor descriptors.
        for t in &self.tensors {
            let [n, c, h, w] = t.dims;
            let layout = Shape::new(n, c, h, w).unwrap().layout();
            let full = if t.output {
                format!("{}@output", t.name)
            } else {
                t.name.to_string()
            };
            let net_off = 16 + 30 * 4;
            let name_off = net_off + 4;
            let region_off = name_off + full.len() as u32 + 1;
            let mut words = [0u32; 30];
            words[0] = 3;
            words[1] = if t.output { 2 } else { 1 };
            words[2] = net_off;
            words[4] = name_off;
            words[5] = 5;
            words[6..10].copy_from_slice(&[n as u32, c as u32, h as u32, w as u32]);
            words[10] = 1;
            let d = |x: usize| [x as u32, (x as u64 >> 32) as u32];
            words[16..18].copy_from_slice(&d(layout.batch_stride()));
            words[18..20].copy_from_slice(&d(layout.plane_stride()));
            words[20..22].copy_from_slice(&d(layout.row_stride()));
            words[22..24].copy_from_slice(&d(2));
            words[24..26].copy_from_slice(&d(layout.tiled_bytes()));
            words[26] = 1;
            words[27] = region_off;
            words[28..30].copy_from_slice(&d(layout.tiled_bytes()));
            let mut v = Vec::new();
            for x in [super::LC_THREAD, 0, 3, 30] {
                put32(&mut v, x);
            }
            for w in words {
                put32(&mut v, w);
            }
            v.extend_from_slice(b"net\0");
            v.extend_from_slice(full.as_bytes());
            v.push(0);
            v.extend_from_slice(t.name.as_bytes());
            v.push(0);
            cmds.push(finish(v));
        }

        let mut v = Vec::new();
        put32(&mut v, super::LC_IDENT);
        put32(&mut v, 0);
        v.extend_from_slice(b"ANEC v1\nzin_ane_compiler v7.6.4\n\t-t h13\n\0");
        cmds.push(finish(v));

        let sizeofcmds: usize = cmds.iter().map(Vec::len).sum();
        let mut file = Vec::new();
        for x in [
            super::MAGIC,
            0x80,
            self.subtype,
            2,
            cmds.len() as u32,
            sizeofcmds as u32,
            0x20_0000,
            0,
        ] {
            put32(&mut file, x);
        }
        for c in &cmds {
            file.extend_from_slice(c);
        }
        assert!(
            file.len() as u64 <= self.text_fileoff,
            "commands overlap __text"
        );
        file.resize(self.text_fileoff as usize, 0);
        file.extend_from_slice(&self.task_stream());
        file.resize((self.text_fileoff + const_rel) as usize, 0);
        file.extend_from_slice(&self.weights);
        file.resize((self.text_fileoff + text_seg) as usize, 0);
        file
    }
}
