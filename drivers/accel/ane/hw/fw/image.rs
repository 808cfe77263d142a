// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Structural checks of the ANE firmware image, before anything is touched.
//!
//! The T602x firmware is Apple's selene payload from the macOS 13.5 (22G74)
//! IPSW, installed as `apple/ane/t602x_ane0_fw_selene_rc4x.macho`: a 64-bit
//! little-endian arm64 Mach-O of 0x4C5B28 bytes with SHA-256
//! `a9c4b771…3248427bc`. The seed driver's loader pins it by SHA-256 and
//! checks the exact shape: 7 load commands, 3 segments, entry 0
//! (`seed-repos.md` §3.2).
//!
//! Two separate steps, so tests can build small synthetic images:
//!
//! - [`parse`] checks the structure of any image: the Mach-O header (magic,
//!   CPU type), every load command inside the declared command area and the
//!   file, every `LC_SEGMENT_64` inside the file, segments not overlapping
//!   in the file or in memory, and at most one entry point, which must lie
//!   inside a segment. It returns an [`Image`] summary.
//! - [`Pin::check_summary`], [`Pin::check_size`] and [`Pin::check_digest`]
//!   compare against a [`Pin`]; [`Pin::check`] runs everything in the
//!   cheapest order.
//!
//! What "entry 0" means is not spelled out in the source. Here the entry is
//! the `pc` of an `LC_UNIXTHREAD` ARM_THREAD_STATE64, or the `entryoff` of an
//! `LC_MAIN`; an image without either counts as entry 0 for the pin (the
//! SHA-256 identifies the image anyway; RVBAR, not the Mach-O, decides where
//! the ASC starts, `seed-repos.md` §3.3 S2).

use super::bytes::{array_at, u32_at, u64_at};
use super::sha256;

/// `MH_MAGIC_64`: a 64-bit Mach-O in the host's (little-endian) order.
pub const MH_MAGIC_64: u32 = 0xfeed_facf;
/// `CPU_TYPE_ARM64` (`CPU_TYPE_ARM | CPU_ARCH_ABI64`).
pub const CPU_TYPE_ARM64: u32 = 0x0100_000c;
/// Bytes of a `mach_header_64`.
pub const HEADER_SIZE: usize = 32;
/// `LC_SEGMENT_64`.
pub const LC_SEGMENT_64: u32 = 0x19;
/// `LC_UNIXTHREAD`.
pub const LC_UNIXTHREAD: u32 = 0x5;
/// `LC_MAIN` (`0x28 | LC_REQ_DYLD`).
pub const LC_MAIN: u32 = 0x8000_0028;
/// The most load commands an image may declare (the pinned image has 7).
pub const MAX_LOAD_COMMANDS: u32 = 64;
/// The most segments an [`Image`] holds (the pinned image has 3).
pub const MAX_SEGMENTS: usize = 8;

/// Bytes of a `segment_command_64` without its sections.
const SEGMENT_CMD_SIZE: usize = 72;
/// Bytes of one `section_64`.
const SECTION_SIZE: usize = 80;
/// `ARM_THREAD_STATE64` flavor.
const ARM_THREAD_STATE64: u32 = 6;
/// `ARM_THREAD_STATE64_COUNT` in 32-bit words: x0..x28, fp, lr, sp, pc,
/// cpsr and a pad.
const ARM_THREAD_STATE64_COUNT: u32 = 68;
/// Offset of `pc` in an `LC_UNIXTHREAD` command: cmd, cmdsize, flavor and
/// count, then 32 64-bit registers before it.
const UNIXTHREAD_PC: usize = 16 + 32 * 8;

/// One `LC_SEGMENT_64`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// `segname`, NUL padded.
    pub name: [u8; 16],
    /// Address the segment is linked at.
    pub vmaddr: u64,
    /// Bytes it occupies in memory.
    pub vmsize: u64,
    /// Where its contents start in the file.
    pub fileoff: u64,
    /// Bytes of contents in the file (the rest of `vmsize` is zero).
    pub filesize: u64,
}

impl Segment {
    /// The name without its NUL padding.
    pub fn name(&self) -> &[u8] {
        let len = self.name.iter().position(|&c| c == 0).unwrap_or(16);
        self.name.get(..len).unwrap_or(&[])
    }
}

/// Which load command gave the entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `LC_UNIXTHREAD`: the value is the initial `pc` (a virtual address).
    Thread,
    /// `LC_MAIN`: the value is `entryoff` (a file offset).
    Main,
}

/// The image's entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Where it came from.
    pub kind: EntryKind,
    /// The address or offset.
    pub value: u64,
}

/// The checked summary of an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Image {
    /// Bytes of the file.
    pub len: usize,
    /// `ncmds` of the header.
    pub load_commands: u32,
    /// The segments, in file order; only the first `segment_count` are used.
    pub segment_table: [Segment; MAX_SEGMENTS],
    /// How many segments the image has.
    pub segment_count: usize,
    /// The entry point, if a command declares one.
    pub entry: Option<Entry>,
}

impl Image {
    /// The image's segments.
    pub fn segments(&self) -> &[Segment] {
        self.segment_table.get(..self.segment_count).unwrap_or(&[])
    }

    /// The entry value the pin compares: the declared one, or 0 when no
    /// command declares one (see the module documentation).
    pub fn entry_value(&self) -> u64 {
        self.entry.map_or(0, |e| e.value)
    }
}

/// Why an image is structurally unacceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// The file is shorter than a Mach-O header.
    TooShort {
        /// Bytes of the file.
        len: usize,
    },
    /// Not `MH_MAGIC_64` (a 32-bit, big-endian or fat file, or no Mach-O).
    BadMagic {
        /// The first word.
        found: u32,
    },
    /// Not an arm64 image.
    BadCpuType {
        /// `cputype`.
        found: u32,
    },
    /// No load command, or more than [`MAX_LOAD_COMMANDS`].
    CommandCount {
        /// `ncmds`.
        ncmds: u32,
    },
    /// `sizeofcmds` does not fit in the file after the header.
    CommandsOutsideFile {
        /// `sizeofcmds`.
        sizeofcmds: u32,
        /// Bytes of the file.
        len: usize,
    },
    /// A command's `cmdsize` is below 8, not a multiple of 8, or too small
    /// for its kind.
    CommandSize {
        /// Index of the command.
        index: u32,
        /// Its `cmd`.
        cmd: u32,
        /// Its `cmdsize`.
        size: u32,
    },
    /// A command runs past the end of the command area.
    CommandOverrun {
        /// Index of the command.
        index: u32,
    },
    /// The commands do not fill `sizeofcmds` exactly.
    CommandsSizeMismatch {
        /// `sizeofcmds`.
        declared: u32,
        /// Bytes the commands cover.
        used: usize,
    },
    /// More than [`MAX_SEGMENTS`] segments.
    TooManySegments,
    /// A segment's file range leaves the file.
    SegmentOutsideFile {
        /// Index of the segment.
        index: usize,
    },
    /// A segment has more file bytes than memory, or its memory range
    /// overflows.
    SegmentSize {
        /// Index of the segment.
        index: usize,
    },
    /// Two segments overlap in the file or in memory.
    SegmentsOverlap {
        /// Index of the first.
        first: usize,
        /// Index of the second.
        second: usize,
    },
    /// More than one entry-point command.
    DuplicateEntry,
    /// A thread command that is not one ARM_THREAD_STATE64.
    BadThreadState {
        /// Index of the command.
        index: u32,
    },
    /// The entry point is outside every segment (or, for `LC_MAIN`, outside
    /// the file).
    EntryOutside {
        /// The entry value.
        value: u64,
    },
}

/// Why an image is not the pinned one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinError {
    /// Wrong file size.
    Size {
        /// Bytes of the file.
        found: usize,
        /// Bytes of the pinned image.
        expected: usize,
    },
    /// Wrong number of load commands.
    LoadCommands {
        /// `ncmds`.
        found: u32,
        /// The pin's.
        expected: u32,
    },
    /// Wrong number of segments.
    Segments {
        /// Segments found.
        found: usize,
        /// The pin's.
        expected: usize,
    },
    /// Wrong entry point.
    Entry {
        /// The entry value.
        found: u64,
        /// The pin's.
        expected: u64,
    },
    /// The SHA-256 differs.
    Digest {
        /// The file's SHA-256.
        found: [u8; sha256::DIGEST_LEN],
    },
}

/// Any reason [`Pin::check`] refuses an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirmwareError {
    /// The structure is wrong.
    Image(ImageError),
    /// It is not the pinned image.
    Pin(PinError),
}

impl From<ImageError> for FirmwareError {
    fn from(e: ImageError) -> Self {
        FirmwareError::Image(e)
    }
}

impl From<PinError> for FirmwareError {
    fn from(e: PinError) -> Self {
        FirmwareError::Pin(e)
    }
}

/// An exact firmware image the driver accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The name `request_firmware` looks up.
    pub name: &'static str,
    /// Bytes of the file.
    pub size: usize,
    /// Its SHA-256.
    pub sha256: [u8; sha256::DIGEST_LEN],
    /// `ncmds`.
    pub load_commands: u32,
    /// Number of segments.
    pub segments: usize,
    /// The entry value ([`Image::entry_value`]).
    pub entry: u64,
}

/// The T6021 (M2 Max) firmware: the macOS 13.5 selene payload
/// (`seed-repos.md` §3.2).
pub const T6021_PIN: Pin = Pin {
    name: "apple/ane/t602x_ane0_fw_selene_rc4x.macho",
    size: 0x4C_5B28,
    sha256: match sha256::from_hex(
        b"a9c4b771294a6b115624d9480a6248d0899a1681a575e865070b87a3248427bc",
    ) {
        Some(d) => d,
        None => [0; sha256::DIGEST_LEN],
    },
    load_commands: 7,
    segments: 3,
    entry: 0,
};

impl Pin {
    /// Checks the file size (cheap; do it before reading the image).
    pub fn check_size(&self, len: usize) -> Result<(), PinError> {
        if len != self.size {
            return Err(PinError::Size {
                found: len,
                expected: self.size,
            });
        }
        Ok(())
    }

    /// Checks the parsed shape: size, load commands, segments, entry.
    pub fn check_summary(&self, image: &Image) -> Result<(), PinError> {
        self.check_size(image.len)?;
        if image.load_commands != self.load_commands {
            return Err(PinError::LoadCommands {
                found: image.load_commands,
                expected: self.load_commands,
            });
        }
        if image.segment_count != self.segments {
            return Err(PinError::Segments {
                found: image.segment_count,
                expected: self.segments,
            });
        }
        if image.entry_value() != self.entry {
            return Err(PinError::Entry {
                found: image.entry_value(),
                expected: self.entry,
            });
        }
        Ok(())
    }

    /// Checks the SHA-256 of the whole file.
    pub fn check_digest(&self, bytes: &[u8]) -> Result<(), PinError> {
        let found = sha256::digest(bytes);
        if found != self.sha256 {
            return Err(PinError::Digest { found });
        }
        Ok(())
    }

    /// Every check, cheapest first: size, structure, shape, SHA-256.
    pub fn check(&self, bytes: &[u8]) -> Result<Image, FirmwareError> {
        self.check_size(bytes.len())?;
        let image = parse(bytes)?;
        self.check_summary(&image)?;
        self.check_digest(bytes)?;
        Ok(image)
    }
}

/// Checks the structure of a Mach-O firmware image and summarises it.
pub fn parse(bytes: &[u8]) -> Result<Image, ImageError> {
    let len = bytes.len();
    let field = |off| u32_at(bytes, off).ok_or(ImageError::TooShort { len });
    if len < HEADER_SIZE {
        return Err(ImageError::TooShort { len });
    }
    let magic = field(0)?;
    if magic != MH_MAGIC_64 {
        return Err(ImageError::BadMagic { found: magic });
    }
    let cpu = field(4)?;
    if cpu != CPU_TYPE_ARM64 {
        return Err(ImageError::BadCpuType { found: cpu });
    }
    let ncmds = field(16)?;
    if ncmds == 0 || ncmds > MAX_LOAD_COMMANDS {
        return Err(ImageError::CommandCount { ncmds });
    }
    let sizeofcmds = field(20)?;
    let cmds = usize::try_from(sizeofcmds)
        .ok()
        .and_then(|n| bytes.get(HEADER_SIZE..HEADER_SIZE.checked_add(n)?))
        .ok_or(ImageError::CommandsOutsideFile { sizeofcmds, len })?;
    let mut image = Image {
        len,
        load_commands: ncmds,
        segment_table: [Segment::default(); MAX_SEGMENTS],
        segment_count: 0,
        entry: None,
    };
    let mut off = 0usize;
    for index in 0..ncmds {
        let (cmd, size) = match (u32_at(cmds, off), u32_at(cmds, off + 4)) {
            (Some(c), Some(s)) => (c, s),
            _ => return Err(ImageError::CommandOverrun { index }),
        };
        let bad_size = ImageError::CommandSize { index, cmd, size };
        let n = usize::try_from(size).map_err(|_| bad_size)?;
        if n < 8 || n % 8 != 0 {
            return Err(bad_size);
        }
        let body = off
            .checked_add(n)
            .and_then(|end| cmds.get(off..end))
            .ok_or(ImageError::CommandOverrun { index })?;
        command(&mut image, index, cmd, body)?;
        off += n;
    }
    if off != cmds.len() {
        return Err(ImageError::CommandsSizeMismatch {
            declared: sizeofcmds,
            used: off,
        });
    }
    check_segments(&image)?;
    check_entry(&image)?;
    Ok(image)
}

/// Records one load command (the ones other than segments and entry points
/// are only bounds-checked).
fn command(image: &mut Image, index: u32, cmd: u32, body: &[u8]) -> Result<(), ImageError> {
    let bad_size = ImageError::CommandSize {
        index,
        cmd,
        size: body.len() as u32,
    };
    match cmd {
        LC_SEGMENT_64 => {
            let seg = segment(body).ok_or(bad_size)?;
            let slot = image
                .segment_table
                .get_mut(image.segment_count)
                .ok_or(ImageError::TooManySegments)?;
            *slot = seg;
            image.segment_count += 1;
        }
        LC_UNIXTHREAD => {
            let flavor = u32_at(body, 8).ok_or(bad_size)?;
            let count = u32_at(body, 12).ok_or(bad_size)?;
            let pc = u64_at(body, UNIXTHREAD_PC).ok_or(bad_size)?;
            if flavor != ARM_THREAD_STATE64
                || count != ARM_THREAD_STATE64_COUNT
                || body.len() != 16 + 4 * count as usize
            {
                return Err(ImageError::BadThreadState { index });
            }
            set_entry(image, EntryKind::Thread, pc)?;
        }
        LC_MAIN => {
            let entryoff = u64_at(body, 8).ok_or(bad_size)?;
            if body.len() != 24 {
                return Err(bad_size);
            }
            set_entry(image, EntryKind::Main, entryoff)?;
        }
        _ => {}
    }
    Ok(())
}

/// Decodes a `segment_command_64` whose sections fit in the command.
fn segment(body: &[u8]) -> Option<Segment> {
    let nsects = usize::try_from(u32_at(body, 64)?).ok()?;
    let need = nsects
        .checked_mul(SECTION_SIZE)?
        .checked_add(SEGMENT_CMD_SIZE)?;
    if need > body.len() {
        return None;
    }
    Some(Segment {
        name: array_at(body, 8)?,
        vmaddr: u64_at(body, 24)?,
        vmsize: u64_at(body, 32)?,
        fileoff: u64_at(body, 40)?,
        filesize: u64_at(body, 48)?,
    })
}

/// Records the entry point; a second one is an error.
fn set_entry(image: &mut Image, kind: EntryKind, value: u64) -> Result<(), ImageError> {
    if image.entry.is_some() {
        return Err(ImageError::DuplicateEntry);
    }
    image.entry = Some(Entry { kind, value });
    Ok(())
}

/// `[start, start + len)` as a half-open range, if it does not overflow.
fn range(start: u64, len: u64) -> Option<(u64, u64)> {
    Some((start, start.checked_add(len)?))
}

/// Whether two non-empty half-open ranges intersect.
fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

/// Checks every segment against the file and against the others.
fn check_segments(image: &Image) -> Result<(), ImageError> {
    let len = image.len as u64;
    let segs = image.segments();
    for (index, s) in segs.iter().enumerate() {
        let file = range(s.fileoff, s.filesize).ok_or(ImageError::SegmentOutsideFile { index })?;
        if file.1 > len {
            return Err(ImageError::SegmentOutsideFile { index });
        }
        if s.filesize > s.vmsize || range(s.vmaddr, s.vmsize).is_none() {
            return Err(ImageError::SegmentSize { index });
        }
    }
    for (first, a) in segs.iter().enumerate() {
        for (second, b) in segs.iter().enumerate().skip(first + 1) {
            let clash = |x: Option<(u64, u64)>, y: Option<(u64, u64)>| match (x, y) {
                (Some(x), Some(y)) => overlaps(x, y),
                _ => true,
            };
            if clash(range(a.fileoff, a.filesize), range(b.fileoff, b.filesize))
                || clash(range(a.vmaddr, a.vmsize), range(b.vmaddr, b.vmsize))
            {
                return Err(ImageError::SegmentsOverlap { first, second });
            }
        }
    }
    Ok(())
}

/// Checks that the entry point lies in a segment (or in the file).
fn check_entry(image: &Image) -> Result<(), ImageError> {
    let Some(entry) = image.entry else {
        return Ok(());
    };
    let inside = match entry.kind {
        EntryKind::Thread => image.segments().iter().any(|s| {
            range(s.vmaddr, s.vmsize).is_some_and(|(lo, hi)| entry.value >= lo && entry.value < hi)
        }),
        EntryKind::Main => entry.value < image.len as u64,
    };
    if !inside {
        return Err(ImageError::EntryOutside { value: entry.value });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;

    use std::vec::Vec;

    use super::*;

    /// A synthetic segment for [`build`].
    pub(crate) struct Seg {
        pub name: &'static [u8],
        pub vmaddr: u64,
        pub vmsize: u64,
        pub fileoff: u64,
        pub filesize: u64,
    }

    fn push32(v: &mut Vec<u8>, x: u32) {
        v.extend_from_slice(&x.to_le_bytes());
    }

    fn push64(v: &mut Vec<u8>, x: u64) {
        v.extend_from_slice(&x.to_le_bytes());
    }

    /// Builds a Mach-O with the given segments, an optional thread entry
    /// `pc` and `extra` no-op commands, padded to `len` bytes.
    pub(crate) fn build(segs: &[Seg], pc: Option<u64>, extra: u32, len: usize) -> Vec<u8> {
        let mut cmds = Vec::new();
        for s in segs {
            push32(&mut cmds, LC_SEGMENT_64);
            push32(&mut cmds, 72);
            let mut name = [0u8; 16];
            name[..s.name.len()].copy_from_slice(s.name);
            cmds.extend_from_slice(&name);
            for x in [s.vmaddr, s.vmsize, s.fileoff, s.filesize] {
                push64(&mut cmds, x);
            }
            for x in [5, 5, 0, 0] {
                push32(&mut cmds, x);
            }
        }
        if let Some(pc) = pc {
            push32(&mut cmds, LC_UNIXTHREAD);
            push32(&mut cmds, 16 + 4 * 68);
            push32(&mut cmds, 6);
            push32(&mut cmds, 68);
            for _ in 0..32 {
                push64(&mut cmds, 0);
            }
            push64(&mut cmds, pc);
            push64(&mut cmds, 0);
        }
        for _ in 0..extra {
            push32(&mut cmds, 0x2); // LC_SYMTAB-sized no-op
            push32(&mut cmds, 24);
            push64(&mut cmds, 0);
            push64(&mut cmds, 0);
        }
        let ncmds = segs.len() as u32 + u32::from(pc.is_some()) + extra;
        let mut f = Vec::new();
        for x in [
            MH_MAGIC_64,
            CPU_TYPE_ARM64,
            0,
            0xc,
            ncmds,
            cmds.len() as u32,
            0,
            0,
        ] {
            push32(&mut f, x);
        }
        f.extend_from_slice(&cmds);
        assert!(f.len() <= len, "image too small for its commands");
        f.resize(len, 0);
        f
    }

    /// A small image shaped like the pinned one: 3 segments, a thread
    /// entry at 0, 7 commands.
    pub(crate) fn shaped(len: usize) -> Vec<u8> {
        build(
            &[
                Seg {
                    name: b"__TEXT",
                    vmaddr: 0,
                    vmsize: 0x4000,
                    fileoff: 0,
                    filesize: 0x1000,
                },
                Seg {
                    name: b"__DATA",
                    vmaddr: 0x4000,
                    vmsize: 0x8000,
                    fileoff: 0x1000,
                    filesize: 0x800,
                },
                Seg {
                    name: b"__LINKEDIT",
                    vmaddr: 0xc000,
                    vmsize: 0x4000,
                    fileoff: 0x1800,
                    filesize: 0x100,
                },
            ],
            Some(0),
            3,
            len,
        )
    }

    #[test]
    fn accepts_a_well_formed_image() {
        let f = shaped(0x2000);
        let img = parse(&f).unwrap();
        assert_eq!(img.load_commands, 7);
        assert_eq!(img.segments().len(), 3);
        assert_eq!(img.segments()[1].name(), b"__DATA");
        assert_eq!(img.segments()[1].vmaddr, 0x4000);
        assert_eq!(
            img.entry,
            Some(Entry {
                kind: EntryKind::Thread,
                value: 0
            })
        );
        let pin = Pin {
            size: 0x2000,
            sha256: sha256::digest(&f),
            ..T6021_PIN
        };
        assert_eq!(pin.check(&f), Ok(img));
    }

    #[test]
    fn pin_checks_are_separate() {
        let f = shaped(0x2000);
        let img = parse(&f).unwrap();
        assert_eq!(
            T6021_PIN.check(&f),
            Err(FirmwareError::Pin(PinError::Size {
                found: 0x2000,
                expected: 0x4C_5B28
            }))
        );
        let pin = Pin {
            size: 0x2000,
            ..T6021_PIN
        };
        assert_eq!(pin.check_summary(&img), Ok(()));
        assert!(matches!(pin.check_digest(&f), Err(PinError::Digest { .. })));
        let pin4 = Pin { segments: 4, ..pin };
        assert_eq!(
            pin4.check_summary(&img),
            Err(PinError::Segments {
                found: 3,
                expected: 4
            })
        );
        let pin8 = Pin {
            load_commands: 8,
            ..pin
        };
        assert_eq!(
            pin8.check_summary(&img),
            Err(PinError::LoadCommands {
                found: 7,
                expected: 8
            })
        );
        let moved = Image {
            entry: Some(Entry {
                kind: EntryKind::Thread,
                value: 4,
            }),
            ..img
        };
        assert_eq!(
            pin.check_summary(&moved),
            Err(PinError::Entry {
                found: 4,
                expected: 0
            })
        );
        let none = Image { entry: None, ..img };
        assert_eq!(
            pin.check_summary(&none),
            Ok(()),
            "no entry command reads as 0"
        );
    }

    #[test]
    fn the_t6021_pin() {
        assert_eq!(T6021_PIN.size, 5_004_072);
        assert_eq!(T6021_PIN.sha256[0], 0xa9);
        assert_eq!(T6021_PIN.sha256[31], 0xbc);
        assert_eq!(T6021_PIN.name, "apple/ane/t602x_ane0_fw_selene_rc4x.macho");
        assert_eq!(
            (T6021_PIN.load_commands, T6021_PIN.segments, T6021_PIN.entry),
            (7, 3, 0)
        );
    }

    #[test]
    fn rejects_bad_headers() {
        let f = shaped(0x2000);
        assert_eq!(parse(&f[..31]), Err(ImageError::TooShort { len: 31 }));
        let mut g = f.clone();
        g[0] = 0xce;
        assert_eq!(parse(&g), Err(ImageError::BadMagic { found: 0xfeed_face }));
        let mut g = f.clone();
        g[4] = 7;
        assert_eq!(
            parse(&g),
            Err(ImageError::BadCpuType { found: 0x0100_0007 })
        );
        let mut g = f.clone();
        g[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(parse(&g), Err(ImageError::CommandCount { ncmds: 0 }));
        let mut g = f.clone();
        g[20..24].copy_from_slice(&0x3000u32.to_le_bytes());
        assert!(matches!(
            parse(&g),
            Err(ImageError::CommandsOutsideFile { .. })
        ));
        let mut g = f.clone();
        g[20..24].copy_from_slice(&0x800u32.to_le_bytes());
        assert!(matches!(
            parse(&g),
            Err(ImageError::CommandsSizeMismatch { .. })
        ));
        let mut g = f.clone();
        g[16..20].copy_from_slice(&8u32.to_le_bytes());
        assert_eq!(parse(&g), Err(ImageError::CommandOverrun { index: 7 }));
        // First command's cmdsize: not a multiple of 8, then past the end.
        let mut g = f.clone();
        g[36..40].copy_from_slice(&73u32.to_le_bytes());
        assert!(matches!(
            parse(&g),
            Err(ImageError::CommandSize { index: 0, .. })
        ));
        let mut g = f.clone();
        g[36..40].copy_from_slice(&0x1000u32.to_le_bytes());
        assert_eq!(parse(&g), Err(ImageError::CommandOverrun { index: 0 }));
    }

    #[test]
    fn rejects_bad_segments() {
        let seg = |vmaddr, vmsize, fileoff, filesize| Seg {
            name: b"S",
            vmaddr,
            vmsize,
            fileoff,
            filesize,
        };
        let outside = build(&[seg(0, 0x4000, 0x1800, 0x1000)], None, 0, 0x2000);
        assert_eq!(
            parse(&outside),
            Err(ImageError::SegmentOutsideFile { index: 0 })
        );
        let wrap = build(&[seg(0, 0x4000, u64::MAX, 2)], None, 0, 0x2000);
        assert_eq!(
            parse(&wrap),
            Err(ImageError::SegmentOutsideFile { index: 0 })
        );
        let fat = build(&[seg(0, 0x100, 0, 0x200)], None, 0, 0x2000);
        assert_eq!(parse(&fat), Err(ImageError::SegmentSize { index: 0 }));
        let vm_wrap = build(&[seg(u64::MAX, 2, 0, 0)], None, 0, 0x2000);
        assert_eq!(parse(&vm_wrap), Err(ImageError::SegmentSize { index: 0 }));
        let file_overlap = build(
            &[seg(0, 0x1000, 0, 0x800), seg(0x1000, 0x1000, 0x400, 0x800)],
            None,
            0,
            0x2000,
        );
        assert_eq!(
            parse(&file_overlap),
            Err(ImageError::SegmentsOverlap {
                first: 0,
                second: 1
            })
        );
        let vm_overlap = build(
            &[seg(0, 0x1000, 0, 0x800), seg(0x800, 0x1000, 0x800, 0x800)],
            None,
            0,
            0x2000,
        );
        assert_eq!(
            parse(&vm_overlap),
            Err(ImageError::SegmentsOverlap {
                first: 0,
                second: 1
            })
        );
        let nine: Vec<Seg> = (0..9).map(|i| seg(i * 0x1000, 0x1000, 0, 0)).collect();
        assert_eq!(
            parse(&build(&nine, None, 0, 0x2000)),
            Err(ImageError::TooManySegments)
        );
        // Empty ranges never overlap.
        let empty = build(&[seg(0, 0, 0, 0), seg(0, 0x1000, 0, 0)], None, 0, 0x2000);
        assert!(parse(&empty).is_ok());
    }

    #[test]
    fn rejects_bad_entries() {
        let seg = Seg {
            name: b"T",
            vmaddr: 0x1000,
            vmsize: 0x1000,
            fileoff: 0,
            filesize: 0x100,
        };
        let f = build(&[seg], Some(0x2000), 0, 0x2000);
        assert_eq!(parse(&f), Err(ImageError::EntryOutside { value: 0x2000 }));
        let seg = Seg {
            name: b"T",
            vmaddr: 0x1000,
            vmsize: 0x1000,
            fileoff: 0,
            filesize: 0x100,
        };
        let f = build(&[seg], Some(0x1ffc), 0, 0x2000);
        assert_eq!(parse(&f).unwrap().entry.unwrap().value, 0x1ffc);
        // Two thread commands.
        let mut f = build(&[], Some(0), 0, 0x1000);
        let cmd: Vec<u8> = f[32..32 + 16 + 4 * 68].to_vec();
        f.truncate(32);
        f.extend_from_slice(&cmd);
        f.extend_from_slice(&cmd);
        f[16..20].copy_from_slice(&2u32.to_le_bytes());
        f[20..24].copy_from_slice(&(2 * cmd.len() as u32).to_le_bytes());
        f.resize(0x1000, 0);
        assert_eq!(parse(&f), Err(ImageError::DuplicateEntry));
        // A wrong flavor.
        let mut g = build(&[], Some(0), 0, 0x1000);
        g[40] = 5;
        assert_eq!(parse(&g), Err(ImageError::BadThreadState { index: 0 }));
    }
}
