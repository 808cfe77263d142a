// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A synthetic stand-in for the T602x ANE firmware: a file with the exact
//! shape `T6021_PIN` checks (MH_PRELOAD, flags 1, `__TEXT` and `__DATA` at
//! the pinned geometry, `LC_SYMTAB`, `LC_UUID`, a 68-word thread state with
//! pc 0; five commands in 0x960 bytes; 0x4C5B28 bytes), carrying at iBoot's
//! patch sites the values the archive has there, so the driver's staging
//! replays the patches exactly as on hardware. Only its SHA-256 differs
//! from Apple's image (the test flavour skips that check); Apple's image is
//! never redistributed.

use ane::hw::fw::image::{
    ARM_THREAD_STATE64, CPU_TYPE_ARM64, LC_SEGMENT_64, LC_UNIXTHREAD, MH_MAGIC_64, MH_PRELOAD,
    T6021_PIN, T6021_SEGMENTS,
};
use ane::hw::fw::patch::{DATA_BASE_VM, RTK_RECORDS, TUNABLES_UNSET, TUNABLES_VM};

/// `LC_SYMTAB`.
const LC_SYMTAB: u32 = 0x2;
/// `LC_UUID`.
const LC_UUID: u32 = 0x1b;
/// Bytes of the load commands of the pinned image.
const SIZEOFCMDS: usize = 0x960;
/// The values the archive carries in the `__rtk_patch` records, in
/// `RTK_RECORDS` order (omarchy-ane receipts/2026-10-01-t602x-independent).
const ARCHIVE: [u64; 5] = [0xaff, 0xffff_ffff, 0xffff_ffff, 0, 0];

fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// Writes `bytes` at vm address `vm` of the file (through the segment that
/// holds it).
fn put_vm(f: &mut [u8], vm: usize, bytes: &[u8]) {
    let s = T6021_SEGMENTS
        .iter()
        .find(|s| (vm as u64) >= s.vmaddr && (vm + bytes.len()) as u64 <= s.vmaddr + s.filesize)
        .expect("a patch site inside a segment's file bytes");
    let at = (s.fileoff + vm as u64 - s.vmaddr) as usize;
    f[at..at + bytes.len()].copy_from_slice(bytes);
}

/// The image.
pub fn build() -> Vec<u8> {
    let mut cmds = Vec::new();
    // Segments with 8 and 16 sections (the real split is not recorded).
    for (s, nsects) in T6021_SEGMENTS.iter().zip([8u32, 16]) {
        put32(&mut cmds, LC_SEGMENT_64);
        put32(&mut cmds, 72 + 80 * nsects);
        cmds.extend_from_slice(&s.name);
        for x in [s.vmaddr, s.vmsize, s.fileoff, s.filesize] {
            put64(&mut cmds, x);
        }
        for x in [5, 5, nsects, 0] {
            put32(&mut cmds, x);
        }
        cmds.resize(cmds.len() + 80 * nsects as usize, 0);
    }
    for cmd in [LC_SYMTAB, LC_UUID] {
        put32(&mut cmds, cmd);
        put32(&mut cmds, 24);
        cmds.resize(cmds.len() + 16, 0);
    }
    // ARM_THREAD_STATE64: 68 words, pc (register 32) = 0.
    put32(&mut cmds, LC_UNIXTHREAD);
    put32(&mut cmds, 16 + 4 * 68);
    put32(&mut cmds, ARM_THREAD_STATE64);
    put32(&mut cmds, 68);
    cmds.resize(cmds.len() + 4 * 68, 0);
    assert_eq!(cmds.len(), SIZEOFCMDS, "the pinned command area");
    let mut f = Vec::new();
    for x in [
        MH_MAGIC_64,
        CPU_TYPE_ARM64,
        0,
        MH_PRELOAD,
        5,
        cmds.len() as u32,
        1,
        0,
    ] {
        put32(&mut f, x);
    }
    f.extend_from_slice(&cmds);
    f.resize(T6021_PIN.size, 0);
    // A recognisable pattern in the text, clear of the patch sites.
    for (i, b) in f.iter_mut().enumerate().take(0x4000 + 0x4000).skip(0x5000) {
        *b = (i * 7) as u8;
    }
    // The archive's patch sites: the DATA base word is 0 (the zeroed file
    // has it), the records carry their tags, lengths and archive values,
    // and the tunables block its unset header.
    for (r, v) in RTK_RECORDS.iter().zip(ARCHIVE) {
        let mut rec = Vec::new();
        put32(&mut rec, r.tag);
        put32(&mut rec, r.len);
        rec.extend_from_slice(&v.to_le_bytes()[..r.len as usize]);
        put_vm(&mut f, r.vm, &rec);
    }
    put_vm(&mut f, TUNABLES_VM, &TUNABLES_UNSET);
    put_vm(&mut f, DATA_BASE_VM, &[0; 8]);
    f
}

#[cfg(test)]
mod tests {
    use ane::hw::fw::{image, patch};

    #[test]
    fn the_pin_accepts_its_shape_and_the_patches_apply() {
        let f = super::build();
        let img = image::parse(&f).expect("structurally valid");
        image::T6021_PIN
            .check_summary(&img)
            .expect("the pinned shape");
        image::T6021_PIN
            .check_size(f.len())
            .expect("the pinned size");
        assert!(
            image::T6021_PIN.check_digest(&f).is_err(),
            "not Apple's bytes"
        );
        let mut staged = vec![0u8; image::STAGED_SIZE];
        for s in img.segments() {
            let (vm, off, n) = (s.vmaddr as usize, s.fileoff as usize, s.filesize as usize);
            staged[vm..vm + n].copy_from_slice(&f[off..off + n]);
        }
        let p = patch::PatchParams::t6021(0x100_0000_0000, 0x1234);
        patch::apply(&mut staged, &p).expect("the archive's patch sites");
        assert_eq!(
            &staged[patch::DATA_BASE_VM..patch::DATA_BASE_VM + 8],
            &0x100_000c_4000u64.to_le_bytes()
        );
    }
}
