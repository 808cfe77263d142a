// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A synthetic stand-in for the T602x ANE firmware: a small arm64 Mach-O
//! that passes the driver's structural checks (the simulated coprocessor
//! does not run it, and the test flavour skips the SHA-256 pin). Apple's
//! image is never redistributed.

use ane::hw::fw::image::{CPU_TYPE_ARM64, LC_SEGMENT_64, LC_UNIXTHREAD, MH_MAGIC_64};

fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// Three segments (text, data, linkedit) and a thread entry at 0, like the
/// pinned image's shape; 64 KiB, with a recognisable pattern in the text.
pub fn build() -> Vec<u8> {
    // (name, vmaddr, vmsize, fileoff, filesize)
    let segs: [(&[u8], u64, u64, u64, u64); 3] = [
        (b"__TEXT", 0, 0x8000, 0, 0x8000),
        (b"__DATA", 0x8000, 0x10000, 0x8000, 0x4000),
        (b"__LINKEDIT", 0x18000, 0x4000, 0xc000, 0x4000),
    ];
    let mut cmds = Vec::new();
    for (name, vmaddr, vmsize, fileoff, filesize) in segs {
        put32(&mut cmds, LC_SEGMENT_64);
        put32(&mut cmds, 72);
        let mut n = [0u8; 16];
        n[..name.len()].copy_from_slice(name);
        cmds.extend_from_slice(&n);
        for x in [vmaddr, vmsize, fileoff, filesize] {
            put64(&mut cmds, x);
        }
        for x in [5, 5, 0, 0] {
            put32(&mut cmds, x);
        }
    }
    // ARM_THREAD_STATE64: 33 registers, pc, cpsr (+ pad), pc = 0.
    put32(&mut cmds, LC_UNIXTHREAD);
    put32(&mut cmds, 16 + 4 * 68);
    put32(&mut cmds, 6);
    put32(&mut cmds, 68);
    for _ in 0..34 {
        put64(&mut cmds, 0);
    }
    let mut f = Vec::new();
    for x in [
        MH_MAGIC_64,
        CPU_TYPE_ARM64,
        0,
        0xc,
        4,
        cmds.len() as u32,
        0,
        0,
    ] {
        put32(&mut f, x);
    }
    f.extend_from_slice(&cmds);
    f.resize(0x10000, 0);
    for (i, b) in f.iter_mut().enumerate().take(0x8000).skip(0x1000) {
        *b = (i * 7) as u8;
    }
    f
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_checker_accepts_it() {
        let img = super::build();
        let parsed = ane::hw::fw::image::parse(&img).expect("structurally valid");
        assert_eq!(parsed.segments().len(), 3);
        assert_eq!(parsed.entry_value(), 0);
    }
}
