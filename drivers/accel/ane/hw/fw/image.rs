// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Structural checks of the ANE firmware image, before anything is touched.
//!
//! The T602x firmware is Apple's selene payload from the macOS 13.5 (22G74)
//! IPSW, the image iBoot preloads for the Asahi stub, installed as
//! `apple/ane/t602x_ane0_fw_selene_rc4x.macho`: a 64-bit little-endian
//! arm64 `MH_PRELOAD` Mach-O of 0x4C5B28 bytes with SHA-256
//! `a9c4b771…3248427bc`. Its exact shape is five load commands (two
//! `LC_SEGMENT_64`, `LC_SYMTAB`, `LC_UUID`, `LC_UNIXTHREAD`) in 0x960 bytes,
//! header flags 0x1, `__TEXT` and `__DATA` at fixed geometry and an
//! ARM_THREAD_STATE64 of at least 66 words whose `pc` is 0. Source:
//! joshuaswarren/omarchy-ane `ane/t6021/ane_fw_validate.h` at
//! `c2b7408b621c7e5a19ea39efaf513170bfebaaba` (the pin and its validator;
//! the driver that ran inference on a T6021 loads through it). An older
//! pin there (`1f2b5eaca7bfaf78378bbb9cb17922ed242da24e`: 0x1A4000 bytes,
//! 7 commands, 3 segments) was a different payload and is superseded.
//!
//! Two separate steps, so tests can build small synthetic images:
//!
//! - [`parse`] checks the structure of any image: the Mach-O header (magic,
//!   CPU type), every load command inside the declared command area and the
//!   file, every `LC_SEGMENT_64` inside the file, segments not overlapping
//!   in the file or in memory, thread states inside their command, and at
//!   most one entry point, which must lie inside a segment. It returns an
//!   [`Image`] summary.
//! - [`Pin::check_summary`], [`Pin::check_size`] and
//!   [`Pin::check_found_digest`] compare against a [`Pin`];
//!   [`Pin::check_shape`] runs all but the digest in the cheapest order
//!   (the module hashes with the kernel's library), [`Pin::check`] (host
//!   build) everything.
//!
//! The entry is the `pc` of the `LC_UNIXTHREAD` ARM_THREAD_STATE64 (or the
//! `entryoff` of an `LC_MAIN`, which the pin refuses). Where the ASC really
//! starts is RVBAR's business; the staged copy is laid out by `vmaddr`
//! (each segment's file bytes copied to its `vmaddr` in a zeroed buffer of
//! [`STAGED_SIZE`] bytes) and then patched by [`super::patch`].

use core::fmt;

use super::bytes::{array_at, u32_at, u64_at};
use super::sha256;

/// `MH_MAGIC_64`: a 64-bit Mach-O in the host's (little-endian) order.
pub const MH_MAGIC_64: u32 = 0xfeed_facf;
/// `MH_PRELOAD`: the file type of a preloaded executable (no dynamic
/// linking), the only type the pin accepts.
pub const MH_PRELOAD: u32 = 5;
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
/// `ARM_THREAD_STATE64`: the thread-state flavor that carries `pc`.
pub const ARM_THREAD_STATE64: u32 = 6;
/// The fewest 32-bit words of an ARM_THREAD_STATE64 that reach `pc`:
/// x0..x28, fp, lr, sp, then pc, 33 64-bit registers (the validator of the
/// module documentation accepts no shorter state).
pub const THREAD_STATE_PC_WORDS: u32 = 66;
/// The most load commands an image may declare (the pinned image has 5).
pub const MAX_LOAD_COMMANDS: u32 = 64;
/// The most segments an [`Image`] holds (the pinned image has 2).
pub const MAX_SEGMENTS: usize = 8;
/// Bytes of the staged firmware surface ("FWIM"): the firmware's own
/// memory that segments are copied into by `vmaddr`, the size the firmware
/// is told (its configuration's byte count). It covers the pinned image's
/// highest `vmaddr + vmsize`, 0x4FC000, and is not derived from the file
/// length (omarchy-ane `ane/t6021/ane_fw_validate.h` at `c2b7408b`).
/// The same value as [`super::regs::FW_MEMORY`].
pub const STAGED_SIZE: usize = super::regs::FW_MEMORY as usize;

/// Bytes of a `segment_command_64` without its sections.
const SEGMENT_CMD_SIZE: usize = 72;
/// Bytes of one `section_64`.
const SECTION_SIZE: usize = 80;
/// Offset of `pc` in an ARM_THREAD_STATE64 state (after its flavor and
/// count): 32 64-bit registers come before it.
const THREAD_STATE_PC: usize = 32 * 8;

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
    /// `filetype` of the header.
    pub filetype: u32,
    /// `ncmds` of the header.
    pub load_commands: u32,
    /// `sizeofcmds` of the header.
    pub sizeofcmds: u32,
    /// `flags` of the header.
    pub flags: u32,
    /// The segments, in file order; only the first `segment_count` are used.
    pub segment_table: [Segment; MAX_SEGMENTS],
    /// How many segments the image has.
    pub segment_count: usize,
    /// The entry point, if a command declares one.
    pub entry: Option<Entry>,
    /// The 32-bit words of the `LC_UNIXTHREAD` ARM_THREAD_STATE64, if the
    /// image has one (a state shorter than [`THREAD_STATE_PC_WORDS`] gives
    /// no entry).
    pub thread_words: Option<u32>,
}

impl Image {
    /// The image's segments.
    pub fn segments(&self) -> &[Segment] {
        self.segment_table.get(..self.segment_count).unwrap_or(&[])
    }

    /// The declared entry value, or 0 when no command declares one (the
    /// pin itself demands a thread entry).
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
    /// A thread command whose states leave it, or that holds no (or more
    /// than one) ARM_THREAD_STATE64.
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
    /// Wrong `filetype`.
    FileType {
        /// `filetype`.
        found: u32,
        /// The pin's.
        expected: u32,
    },
    /// Wrong number of load commands.
    LoadCommands {
        /// `ncmds`.
        found: u32,
        /// The pin's.
        expected: u32,
    },
    /// Wrong `sizeofcmds`.
    CommandsSize {
        /// `sizeofcmds`.
        found: u32,
        /// The pin's.
        expected: u32,
    },
    /// Wrong header `flags`.
    Flags {
        /// `flags`.
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
    /// A segment that is none of the pin's (name or geometry differ).
    Segment {
        /// Index of the segment in file order.
        index: usize,
        /// The segment found.
        found: Segment,
    },
    /// No ARM_THREAD_STATE64, or one too short to hold `pc`.
    ThreadState {
        /// Its 32-bit words, if there is one.
        found: Option<u32>,
        /// The fewest the pin accepts.
        min: u32,
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

/// Writes a segment as `name (vmaddr, vmsize, fileoff, filesize)`.
fn fmt_segment(f: &mut fmt::Formatter<'_>, s: &Segment) -> fmt::Result {
    let name = core::str::from_utf8(s.name()).unwrap_or("?");
    write!(
        f,
        "{name} (vmaddr {:#x}, vmsize {:#x}, fileoff {:#x}, filesize {:#x})",
        s.vmaddr, s.vmsize, s.fileoff, s.filesize
    )
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len } => write!(f, "{len} bytes: shorter than a Mach-O header"),
            Self::BadMagic { found } => write!(f, "magic {found:#010x}: not a 64-bit Mach-O"),
            Self::BadCpuType { found } => write!(f, "cputype {found:#x}: not arm64"),
            Self::CommandCount { ncmds } => write!(f, "{ncmds} load commands"),
            Self::CommandsOutsideFile { sizeofcmds, len } => write!(
                f,
                "sizeofcmds {sizeofcmds:#x} does not fit in the file ({len:#x} bytes)"
            ),
            Self::CommandSize { index, cmd, size } => write!(
                f,
                "load command {index} (cmd {cmd:#x}): bad cmdsize {size:#x}"
            ),
            Self::CommandOverrun { index } => {
                write!(f, "load command {index} runs past the command area")
            }
            Self::CommandsSizeMismatch { declared, used } => write!(
                f,
                "the commands cover {used:#x} bytes, sizeofcmds says {declared:#x}"
            ),
            Self::TooManySegments => write!(f, "more than {MAX_SEGMENTS} segments"),
            Self::SegmentOutsideFile { index } => {
                write!(f, "segment {index} leaves the file")
            }
            Self::SegmentSize { index } => write!(
                f,
                "segment {index}: filesize above vmsize or memory range overflows"
            ),
            Self::SegmentsOverlap { first, second } => {
                write!(f, "segments {first} and {second} overlap")
            }
            Self::DuplicateEntry => write!(f, "more than one entry-point command"),
            Self::BadThreadState { index } => write!(
                f,
                "load command {index}: thread states malformed or not one ARM_THREAD_STATE64"
            ),
            Self::EntryOutside { value } => {
                write!(f, "entry {value:#x} lies outside every segment")
            }
        }
    }
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Size { found, expected } => {
                write!(f, "size {found:#x} bytes, pinned {expected:#x}")
            }
            Self::FileType { found, expected } => {
                write!(f, "filetype {found}, pinned {expected} (MH_PRELOAD)")
            }
            Self::LoadCommands { found, expected } => {
                write!(f, "{found} load commands, pinned {expected}")
            }
            Self::CommandsSize { found, expected } => {
                write!(f, "sizeofcmds {found:#x}, pinned {expected:#x}")
            }
            Self::Flags { found, expected } => {
                write!(f, "header flags {found:#x}, pinned {expected:#x}")
            }
            Self::Segments { found, expected } => {
                write!(f, "{found} segments, pinned {expected}")
            }
            Self::Segment { index, found } => {
                write!(f, "segment {index} ")?;
                fmt_segment(f, &found)?;
                write!(f, " is not in the pinned layout")
            }
            Self::ThreadState {
                found: Some(words),
                min,
            } => write!(
                f,
                "ARM_THREAD_STATE64 of {words} words, at least {min} needed for pc"
            ),
            Self::ThreadState { found: None, .. } => {
                write!(f, "no LC_UNIXTHREAD ARM_THREAD_STATE64")
            }
            Self::Entry { found, expected } => {
                write!(f, "entry pc {found:#x}, pinned {expected:#x}")
            }
            Self::Digest { found } => {
                write!(f, "SHA-256 ")?;
                for b in found {
                    write!(f, "{b:02x}")?;
                }
                write!(f, " is not the pinned payload's")
            }
        }
    }
}

impl fmt::Display for FirmwareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Image(e) => write!(f, "structure: {e}"),
            Self::Pin(e) => write!(f, "pin: {e}"),
        }
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
    /// `filetype`.
    pub filetype: u32,
    /// `ncmds`.
    pub load_commands: u32,
    /// `sizeofcmds`.
    pub sizeofcmds: u32,
    /// Header `flags`.
    pub flags: u32,
    /// Every segment, name and geometry; the image has exactly these, each
    /// once, in any order.
    pub segments: &'static [Segment],
    /// The fewest words of the ARM_THREAD_STATE64.
    pub thread_words: u32,
    /// The thread entry `pc`.
    pub entry: u64,
}

/// A segment name, NUL padded to 16 bytes (longer names are cut).
pub const fn segment_name(s: &[u8]) -> [u8; 16] {
    let mut name = [0u8; 16];
    let mut i = 0;
    while i < s.len() && i < 16 {
        name[i] = s[i];
        i += 1;
    }
    name
}

/// The pinned T6021 image's segments (vmaddr, vmsize, fileoff, filesize):
/// `__TEXT` then `__DATA`, contiguous in memory from 0 to 0x4FC000.
pub const T6021_SEGMENTS: [Segment; 2] = [
    Segment {
        name: segment_name(b"__TEXT"),
        vmaddr: 0,
        vmsize: 0xc_4000,
        fileoff: 0x4000,
        filesize: 0xc_4000,
    },
    Segment {
        name: segment_name(b"__DATA"),
        vmaddr: 0xc_4000,
        vmsize: 0x43_8000,
        fileoff: 0xc_8000,
        filesize: 0x3e_8000,
    },
];

/// The T6021 (M2 Max) firmware: the macOS 13.5 (22G74) selene payload, as
/// omarchy-ane's `ane/t6021/ane_fw_validate.h` at `c2b7408b` pins it.
pub const T6021_PIN: Pin = Pin {
    name: "apple/ane/t602x_ane0_fw_selene_rc4x.macho",
    size: 0x4C_5B28,
    sha256: match sha256::from_hex(
        b"a9c4b771294a6b115624d9480a6248d0899a1681a575e865070b87a3248427bc",
    ) {
        Some(d) => d,
        None => [0; sha256::DIGEST_LEN],
    },
    filetype: MH_PRELOAD,
    load_commands: 5,
    sizeofcmds: 0x960,
    flags: 0x1,
    segments: &T6021_SEGMENTS,
    thread_words: THREAD_STATE_PC_WORDS,
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

    /// Checks the parsed shape: size, header fields, segments, thread
    /// state and entry, in that order.
    pub fn check_summary(&self, image: &Image) -> Result<(), PinError> {
        self.check_size(image.len)?;
        let field = |found: u32, expected: u32, e: fn(u32, u32) -> PinError| {
            if found == expected {
                Ok(())
            } else {
                Err(e(found, expected))
            }
        };
        field(image.filetype, self.filetype, |found, expected| {
            PinError::FileType { found, expected }
        })?;
        field(
            image.load_commands,
            self.load_commands,
            |found, expected| PinError::LoadCommands { found, expected },
        )?;
        field(image.sizeofcmds, self.sizeofcmds, |found, expected| {
            PinError::CommandsSize { found, expected }
        })?;
        field(image.flags, self.flags, |found, expected| PinError::Flags {
            found,
            expected,
        })?;
        if image.segment_count != self.segments.len() {
            return Err(PinError::Segments {
                found: image.segment_count,
                expected: self.segments.len(),
            });
        }
        // Each pinned segment at most once: parse refuses overlapping
        // segments, and two copies of one non-empty segment overlap; the
        // explicit check also covers empty ones.
        let mut used = [false; MAX_SEGMENTS];
        for (index, s) in image.segments().iter().enumerate() {
            let slot = self
                .segments
                .iter()
                .enumerate()
                .position(|(k, p)| p == s && !used.get(k).copied().unwrap_or(true));
            match slot.and_then(|k| used.get_mut(k)) {
                Some(u) => *u = true,
                None => return Err(PinError::Segment { index, found: *s }),
            }
        }
        match image.thread_words {
            Some(words) if words >= self.thread_words => {}
            found => {
                return Err(PinError::ThreadState {
                    found,
                    min: self.thread_words,
                })
            }
        }
        match image.entry {
            Some(Entry {
                kind: EntryKind::Thread,
                value,
            }) if value == self.entry => Ok(()),
            // Parse gives a thread state of enough words an entry, so
            // this is a wrong `pc`; u64::MAX stands for a missing one.
            e => Err(PinError::Entry {
                found: e.map_or(u64::MAX, |e| e.value),
                expected: self.entry,
            }),
        }
    }

    /// Checks `found`, the SHA-256 of the whole file (the module computes
    /// it with the kernel's crypto library).
    pub fn check_found_digest(&self, found: [u8; sha256::DIGEST_LEN]) -> Result<(), PinError> {
        if found != self.sha256 {
            return Err(PinError::Digest { found });
        }
        Ok(())
    }

    /// Checks the SHA-256 of the whole file (host build).
    #[cfg(not(ane_kernel))]
    pub fn check_digest(&self, bytes: &[u8]) -> Result<(), PinError> {
        self.check_found_digest(sha256::digest(bytes))
    }

    /// Every check but the digest, cheapest first: size, structure, shape.
    pub fn check_shape(&self, bytes: &[u8]) -> Result<Image, FirmwareError> {
        self.check_size(bytes.len())?;
        let image = parse(bytes)?;
        self.check_summary(&image)?;
        Ok(image)
    }

    /// Every check, cheapest first: size, structure, shape, SHA-256 (host
    /// build; the module runs [`Self::check_shape`] and then
    /// [`Self::check_found_digest`] with the kernel's hash).
    #[cfg(not(ane_kernel))]
    pub fn check(&self, bytes: &[u8]) -> Result<Image, FirmwareError> {
        let image = self.check_shape(bytes)?;
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
    let filetype = field(12)?;
    let sizeofcmds = field(20)?;
    let flags = field(24)?;
    let cmds = usize::try_from(sizeofcmds)
        .ok()
        .and_then(|n| bytes.get(HEADER_SIZE..HEADER_SIZE.checked_add(n)?))
        .ok_or(ImageError::CommandsOutsideFile { sizeofcmds, len })?;
    let mut image = Image {
        len,
        filetype,
        load_commands: ncmds,
        sizeofcmds,
        flags,
        segment_table: [Segment::default(); MAX_SEGMENTS],
        segment_count: 0,
        entry: None,
        thread_words: None,
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
        LC_UNIXTHREAD => thread(image, index, body)?,
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

/// Walks the `{flavor, count, count words}` states of a thread command
/// (fewer than 8 bytes left over are padding). Exactly one must be an
/// ARM_THREAD_STATE64; when it reaches `pc` that is the entry.
fn thread(image: &mut Image, index: u32, body: &[u8]) -> Result<(), ImageError> {
    let bad = ImageError::BadThreadState { index };
    if image.thread_words.is_some() {
        return Err(ImageError::DuplicateEntry);
    }
    let mut off = 8usize;
    let mut state = None;
    while let (Some(flavor), Some(count)) = (u32_at(body, off), u32_at(body, off + 4)) {
        let start = off + 8;
        let end = usize::try_from(count)
            .ok()
            .and_then(|n| n.checked_mul(4))
            .and_then(|n| n.checked_add(start))
            .filter(|&end| end <= body.len())
            .ok_or(bad)?;
        if flavor == ARM_THREAD_STATE64 {
            if state.is_some() {
                return Err(bad);
            }
            state = Some((count, body.get(start..end).unwrap_or(&[])));
        }
        off = end;
    }
    let (words, regs) = state.ok_or(bad)?;
    image.thread_words = Some(words);
    if words >= THREAD_STATE_PC_WORDS {
        let pc = u64_at(regs, THREAD_STATE_PC).ok_or(bad)?;
        set_entry(image, EntryKind::Thread, pc)?;
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

    use std::string::ToString;
    use std::vec;
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

    /// A small structurally valid image (not the pinned shape): 3 segments,
    /// a thread entry at 0, 7 commands.
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

    /// `LC_SYMTAB`.
    const LC_SYMTAB: u32 = 0x2;
    /// `LC_UUID`.
    const LC_UUID: u32 = 0x1b;

    /// The shape of a synthetic image for [`build_shape`]: header fields,
    /// segments with their section counts, other commands (as `(cmd,
    /// cmdsize)`, zero filled) and the thread state.
    pub(crate) struct Shape {
        pub len: usize,
        pub filetype: u32,
        pub flags: u32,
        pub segs: Vec<(Seg, u32)>,
        pub others: Vec<(u32, u32)>,
        /// (ARM_THREAD_STATE64 words, pc, zero bytes after the state).
        pub thread: Option<(u32, u64, usize)>,
    }

    /// The pinned T6021 image's shape: MH_PRELOAD, flags 0x1, `__TEXT` and
    /// `__DATA` at the pinned geometry, `LC_SYMTAB`, `LC_UUID` and a
    /// 68-word thread state with pc 0, five commands in 0x960 bytes. The
    /// 24 sections are split 8/16 here; the real split is not recorded and
    /// nothing checks it.
    pub(crate) fn real_shape() -> Shape {
        let seg = |s: &Segment, name: &'static [u8], nsects| {
            (
                Seg {
                    name,
                    vmaddr: s.vmaddr,
                    vmsize: s.vmsize,
                    fileoff: s.fileoff,
                    filesize: s.filesize,
                },
                nsects,
            )
        };
        Shape {
            len: T6021_PIN.size,
            filetype: MH_PRELOAD,
            flags: 1,
            segs: vec![
                seg(&T6021_SEGMENTS[0], b"__TEXT", 8),
                seg(&T6021_SEGMENTS[1], b"__DATA", 16),
            ],
            others: vec![(LC_SYMTAB, 24), (LC_UUID, 24)],
            thread: Some((68, 0, 0)),
        }
    }

    /// Builds the image a [`Shape`] describes; `ncmds` and `sizeofcmds`
    /// follow from the commands.
    pub(crate) fn build_shape(shape: &Shape) -> Vec<u8> {
        let mut cmds = Vec::new();
        for (s, nsects) in &shape.segs {
            push32(&mut cmds, LC_SEGMENT_64);
            push32(&mut cmds, 72 + 80 * nsects);
            let name = segment_name(s.name);
            cmds.extend_from_slice(&name);
            for x in [s.vmaddr, s.vmsize, s.fileoff, s.filesize] {
                push64(&mut cmds, x);
            }
            for x in [5, 5, *nsects, 0] {
                push32(&mut cmds, x);
            }
            cmds.resize(cmds.len() + 80 * *nsects as usize, 0);
        }
        for &(cmd, size) in &shape.others {
            push32(&mut cmds, cmd);
            push32(&mut cmds, size);
            cmds.resize(cmds.len() + size as usize - 8, 0);
        }
        if let Some((words, pc, pad)) = shape.thread {
            let state = 4 * words as usize;
            push32(&mut cmds, LC_UNIXTHREAD);
            push32(&mut cmds, (16 + state + pad) as u32);
            push32(&mut cmds, ARM_THREAD_STATE64);
            push32(&mut cmds, words);
            let at = cmds.len();
            cmds.resize(at + state + pad, 0);
            if state >= THREAD_STATE_PC + 8 {
                cmds[at + THREAD_STATE_PC..at + THREAD_STATE_PC + 8]
                    .copy_from_slice(&pc.to_le_bytes());
            }
        }
        let ncmds =
            (shape.segs.len() + shape.others.len()) as u32 + u32::from(shape.thread.is_some());
        let mut f = Vec::with_capacity(shape.len);
        for x in [
            MH_MAGIC_64,
            CPU_TYPE_ARM64,
            0,
            shape.filetype,
            ncmds,
            cmds.len() as u32,
            shape.flags,
            0,
        ] {
            push32(&mut f, x);
        }
        f.extend_from_slice(&cmds);
        assert!(f.len() <= shape.len, "image too small for its commands");
        f.resize(shape.len, 0);
        f
    }

    /// An image with exactly the pinned shape (not its bytes).
    pub(crate) fn pinned_shape() -> Vec<u8> {
        build_shape(&real_shape())
    }

    #[test]
    fn accepts_a_well_formed_image() {
        let f = shaped(0x2000);
        let img = parse(&f).unwrap();
        assert_eq!(img.load_commands, 7);
        assert_eq!(img.segments().len(), 3);
        assert_eq!(img.segments()[1].name(), b"__DATA");
        assert_eq!(img.segments()[1].vmaddr, 0x4000);
        assert_eq!(img.thread_words, Some(68));
        assert_eq!(
            img.entry,
            Some(Entry {
                kind: EntryKind::Thread,
                value: 0
            })
        );
    }

    #[test]
    fn the_synthetic_image_has_the_pinned_shape() {
        let f = pinned_shape();
        let img = parse(&f).unwrap();
        assert_eq!(img.len, 0x4c_5b28);
        assert_eq!(img.filetype, MH_PRELOAD);
        assert_eq!(img.load_commands, 5);
        assert_eq!(img.sizeofcmds, 0x960);
        assert_eq!(img.flags, 1);
        assert_eq!(img.segments(), &T6021_SEGMENTS);
        assert_eq!(img.thread_words, Some(68));
        assert_eq!(img.entry_value(), 0);
        assert_eq!(T6021_PIN.check_summary(&img), Ok(()));
        // Only the digest tells it from Apple's file.
        assert!(matches!(
            T6021_PIN.check(&f),
            Err(FirmwareError::Pin(PinError::Digest { .. }))
        ));
        let pin = Pin {
            sha256: sha256::digest(&f),
            ..T6021_PIN
        };
        assert_eq!(pin.check(&f), Ok(img));
        // A state of 66 words (pc and nothing after it) is enough.
        let mut s = real_shape();
        s.thread = Some((66, 0, 8));
        let img = parse(&build_shape(&s)).unwrap();
        assert_eq!(img.thread_words, Some(66));
        assert_eq!(T6021_PIN.check_summary(&img), Ok(()));
    }

    /// The pin's verdict on an image shaped like the pinned one after `f`.
    fn deviate(f: impl FnOnce(&mut Shape)) -> Result<(), PinError> {
        let mut s = real_shape();
        f(&mut s);
        let image = build_shape(&s);
        T6021_PIN.check_summary(&parse(&image).expect("structurally valid"))
    }

    #[test]
    fn the_pin_refuses_each_single_deviation() {
        assert_eq!(deviate(|_| {}), Ok(()));
        assert_eq!(
            deviate(|s| s.len += 0x4000),
            Err(PinError::Size {
                found: 0x4c_9b28,
                expected: 0x4c_5b28
            })
        );
        assert_eq!(
            deviate(|s| s.filetype = 2),
            Err(PinError::FileType {
                found: 2,
                expected: MH_PRELOAD
            })
        );
        // Seven commands in the same 0x960 bytes (the old W13 count).
        assert_eq!(
            deviate(|s| {
                s.segs[1].1 -= 1;
                s.others.extend([(LC_UUID, 40), (LC_UUID, 40)]);
            }),
            Err(PinError::LoadCommands {
                found: 7,
                expected: 5
            })
        );
        // One more section: 80 bytes more commands.
        assert_eq!(
            deviate(|s| s.segs[0].1 += 1),
            Err(PinError::CommandsSize {
                found: 0x9b0,
                expected: 0x960
            })
        );
        assert_eq!(
            deviate(|s| s.flags = 0x20_0001),
            Err(PinError::Flags {
                found: 0x20_0001,
                expected: 1
            })
        );
        // Three segments in five commands and 0x960 bytes: a __LINKEDIT
        // instead of LC_UUID and one section, LC_SYMTAB padded to match.
        assert_eq!(
            deviate(|s| {
                s.segs[1].1 -= 1;
                s.segs.push((
                    Seg {
                        name: b"__LINKEDIT",
                        vmaddr: 0x4f_c000,
                        vmsize: 0x4000,
                        fileoff: 0x4b_0000,
                        filesize: 0x4000,
                    },
                    0,
                ));
                s.others = vec![(LC_SYMTAB, 56)];
            }),
            Err(PinError::Segments {
                found: 3,
                expected: 2
            })
        );
        // Geometry: each field of each segment, and the name. Most of
        // these single changes would also break the structure (TEXT and
        // DATA touch in memory), so they are made on the summary.
        let good = parse(&pinned_shape()).unwrap();
        for seg in 0..2 {
            for field in 0..5 {
                let mut img = good;
                let g = &mut img.segment_table[seg];
                match field {
                    0 => g.vmaddr += 0x4000,
                    1 => g.vmsize += 0x4000,
                    2 => g.fileoff += 0x4000,
                    3 => g.filesize -= 0x4000,
                    _ => g.name = segment_name(b"__DATA_CONST"),
                }
                let found = *g;
                assert_eq!(
                    T6021_PIN.check_summary(&img),
                    Err(PinError::Segment { index: seg, found }),
                    "segment {seg} field {field}"
                );
            }
        }
        // Built for real: DATA 16 KiB shorter in memory.
        assert!(matches!(
            deviate(|s| s.segs[1].0.vmsize -= 0x4000),
            Err(PinError::Segment { index: 1, .. })
        ));
        // Both segments, DATA first: accepted (any order).
        assert_eq!(deviate(|s| s.segs.reverse()), Ok(()));
        assert_eq!(
            deviate(|s| s.thread = Some((68, 0x100, 0))),
            Err(PinError::Entry {
                found: 0x100,
                expected: 0
            })
        );
        // 64 words end before pc (the command keeps its size).
        assert_eq!(
            deviate(|s| s.thread = Some((64, 0, 16))),
            Err(PinError::ThreadState {
                found: Some(64),
                min: 66
            })
        );
        assert_eq!(
            deviate(|s| {
                s.thread = None;
                s.others.push((LC_UUID, 288));
            }),
            Err(PinError::ThreadState {
                found: None,
                min: 66
            })
        );
    }

    #[test]
    fn pin_errors_name_what_differs() {
        let e = deviate(|s| s.flags = 0x20_0001).unwrap_err();
        assert_eq!(e.to_string(), "header flags 0x200001, pinned 0x1");
        let e = deviate(|s| s.segs[1].0.vmsize = 0x434000).unwrap_err();
        assert_eq!(
            e.to_string(),
            "segment 1 __DATA (vmaddr 0xc4000, vmsize 0x434000, fileoff 0xc8000, \
             filesize 0x3e8000) is not in the pinned layout"
        );
        let e = FirmwareError::from(deviate(|s| s.thread = Some((64, 0, 16))).unwrap_err());
        assert_eq!(
            e.to_string(),
            "pin: ARM_THREAD_STATE64 of 64 words, at least 66 needed for pc"
        );
        let e = FirmwareError::from(ImageError::BadMagic { found: 0xfeed_face });
        assert_eq!(
            e.to_string(),
            "structure: magic 0xfeedface: not a 64-bit Mach-O"
        );
    }

    #[test]
    fn a_segment_counts_once() {
        // Two copies of an empty pinned segment do not overlap, so the pin
        // itself must refuse the second.
        static EMPTY: [Segment; 2] = [
            Segment {
                name: segment_name(b"A"),
                vmaddr: 0,
                vmsize: 0,
                fileoff: 0,
                filesize: 0,
            },
            Segment {
                name: segment_name(b"B"),
                vmaddr: 0,
                vmsize: 0,
                fileoff: 0,
                filesize: 0,
            },
        ];
        let seg = |name| Seg {
            name,
            vmaddr: 0,
            vmsize: 0,
            fileoff: 0,
            filesize: 0,
        };
        let img = parse(&build(&[seg(b"A"), seg(b"A")], None, 0, 0x1000)).unwrap();
        let pin = Pin {
            size: 0x1000,
            filetype: 0xc,
            load_commands: 2,
            sizeofcmds: 144,
            flags: 0,
            segments: &EMPTY,
            ..T6021_PIN
        };
        assert!(matches!(
            pin.check_summary(&img),
            Err(PinError::Segment { index: 1, .. })
        ));
        let img = parse(&build(&[seg(b"B"), seg(b"A")], None, 0, 0x1000)).unwrap();
        assert_eq!(
            pin.check_summary(&img),
            Err(PinError::ThreadState {
                found: None,
                min: 66
            }),
            "any order passes the segment check"
        );
    }

    #[test]
    fn the_t6021_pin() {
        assert_eq!(T6021_PIN.size, 5_004_072);
        assert_eq!(T6021_PIN.sha256[0], 0xa9);
        assert_eq!(T6021_PIN.sha256[31], 0xbc);
        assert_eq!(T6021_PIN.name, "apple/ane/t602x_ane0_fw_selene_rc4x.macho");
        assert_eq!(
            (
                T6021_PIN.filetype,
                T6021_PIN.load_commands,
                T6021_PIN.sizeofcmds,
                T6021_PIN.flags,
                T6021_PIN.segments.len(),
                T6021_PIN.thread_words,
                T6021_PIN.entry
            ),
            (5, 5, 0x960, 1, 2, 66, 0)
        );
        let end = T6021_SEGMENTS[1].vmaddr + T6021_SEGMENTS[1].vmsize;
        assert_eq!(
            T6021_SEGMENTS[0].vmaddr + T6021_SEGMENTS[0].vmsize,
            0xc_4000
        );
        assert_eq!(end, 0x4f_c000);
        assert!(end <= STAGED_SIZE as u64);
        assert_eq!(STAGED_SIZE, 0x50_0000);
        assert_eq!(
            T6021_SEGMENTS[1].fileoff + T6021_SEGMENTS[1].filesize,
            0x4b_0000
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
