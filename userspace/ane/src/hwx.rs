// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! HWX: the container Apple's ANE compiler writes a compiled program into.
//!
//! An HWX file is laid out like a 64-bit little-endian Mach-O file with its
//! own magic, `0xBEEFFACE`. What this parser relies on (facts from
//! `shared/reference/td.md` §3 and `hw.md` §2.5, checked against every
//! fixture in `shared/fixtures`):
//!
//! - The 32-byte header's `cpusubtype` names the ANE generation
//!   (4 = H13, the M1 family; 5 = H14, …; see [`AneArch`]).
//! - `LC_SEGMENT_64` (0x19) commands describe segments and their sections.
//!   `__TEXT,__text` holds the task stream (the chain of task descriptors,
//!   "TDs"); `__TEXT,__const` holds the weights, lookup tables and other
//!   constants the TDs load. One segment per input/output tensor (named
//!   `__FVMLIB`) has no file data; its `vmsize` is the tensor's buffer size.
//!   Where the TDs start in the file depends on the compiler: offset 0x4000
//!   for the macOS 12–14 compilers, 0x8000 for macOS 26; the parser takes it
//!   from the section, never from a constant.
//! - `LC_IDFVMLIB` (0x6, older compilers) and the ANE-specific command 0x40
//!   (newer ones) name each tensor buffer and give its address.
//! - `LC_THREAD` (0x4) flavor 1 is the program state: the address each of
//!   the 32 BAR slots gets (the TD's base registers index these), the size
//!   of the first TD in words minus one, and the number of TDs. Flavor 3
//!   describes one input or output tensor (direction, name, shape, strides).
//! - H13 TDs form a chain: TD 0 is at the start of `__text`, TD *k*+1 at the
//!   byte offset in TD *k*'s word 7 (NextPointer), and the last TD has the
//!   end-of-network bit (word 0, bit 25) set.
//!
//! Parsing checks every offset and size against the file with checked
//! arithmetic and reports the first field at fault; it never panics.

use std::fmt;
use std::ops::Range;

use serde::Serialize;

use crate::hw::soc::Generation;

/// The HWX magic number (the first little-endian `u32` of the file).
pub const MAGIC: u32 = 0xBEEF_FACE;
/// Size of the Mach-O-style file header.
pub const HEADER_SIZE: usize = 32;
/// Load command: symbol table.
pub const LC_SYMTAB: u32 = 0x2;
/// Load command: thread state (program state and tensor descriptors).
pub const LC_THREAD: u32 = 0x4;
/// Load command: a named, fixed-address buffer (older compilers).
pub const LC_IDFVMLIB: u32 = 0x6;
/// Load command: the compiler's identification text.
pub const LC_IDENT: u32 = 0x8;
/// Load command: a 64-bit segment with its sections.
pub const LC_SEGMENT_64: u32 = 0x19;
/// Load command: a named buffer region (the ANE-specific command of newer
/// compilers, in place of [`LC_IDFVMLIB`]).
pub const LC_ANE_MAPPED_REGION: u32 = 0x40;
/// `LC_THREAD` flavor of the program state.
pub const THREAD_PROGRAM: u32 = 1;
/// `LC_THREAD` flavor of a tensor descriptor.
pub const THREAD_TENSOR: u32 = 3;
/// Number of BAR slots a program can address.
pub const BAR_SLOTS: usize = 32;
/// Size of the fixed TD header (words W0..W9) that every H13 TD starts with.
pub const TD_HEADER_SIZE: usize = 0x28;
/// Size of an H13 TD as the macOS 12–14 compilers emit it.
pub const H13_TD_SIZE: u32 = 0x274;
/// Size of the compact H13 TD of the macOS 26 compiler.
pub const H13_COMPACT_TD_SIZE: u32 = 0x1F8;

const SEGMENT_COMMAND_SIZE: u64 = 72;
const SECTION_SIZE: u64 = 80;
const THREAD_HEADER_SIZE: usize = 16;
/// Program-state word indices.
const PROGRAM_TD0_ADDR: usize = 512;
const PROGRAM_TD_WORDS: usize = 514;
const PROGRAM_TD_COUNT: usize = 515;
const PROGRAM_MIN_WORDS: u32 = 516;
/// Tensor-descriptor word indices.
const TENSOR_MIN_WORDS: u32 = 30;
/// W0 bit 25: end of network (this is the last TD).
const TD_W0_EON: u32 = 1 << 25;
/// Byte offset of W7 (NextPointer) in a TD.
const TD_NEXT_POINTER: usize = 0x1C;

/// The ANE generation named by the header's `cpusubtype`.
///
/// The numbering is the one the HWX format uses (freedomtan's
/// `hwx_dump`, cited in `td.md` §3.1). Only H13 files are available as
/// fixtures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AneArch {
    /// cpusubtype 1.
    H11,
    /// cpusubtype 4: M1 family (T8103, T600x).
    H13,
    /// cpusubtype 5: M2 family.
    H14,
    /// cpusubtype 6.
    H15,
    /// cpusubtype 7: M4 family.
    H16,
    /// cpusubtype 9: M5 family.
    H17,
    /// cpusubtype 10.
    H18,
    /// A subtype with no known generation.
    Unknown(u32),
}

impl AneArch {
    /// The generation of a header `cpusubtype`.
    pub fn from_cpusubtype(subtype: u32) -> AneArch {
        match subtype {
            1 => AneArch::H11,
            4 => AneArch::H13,
            5 => AneArch::H14,
            6 => AneArch::H15,
            7 => AneArch::H16,
            9 => AneArch::H17,
            10 => AneArch::H18,
            other => AneArch::Unknown(other),
        }
    }

    /// The driver's [`Generation`], for the generations it supports.
    pub fn generation(self) -> Option<Generation> {
        match self {
            AneArch::H13 => Some(Generation::H13),
            AneArch::H14 => Some(Generation::H14),
            _ => None,
        }
    }
}

/// Why a task stream's TD chain is malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// The TD size cannot even hold the TD header.
    #[error("td_size {td_size:#x} is smaller than the {TD_HEADER_SIZE:#x}-byte TD header")]
    TdSizeTooSmall {
        /// The TD size.
        td_size: usize,
    },
    /// A TD extends past the end of the task stream.
    #[error("TD {index} at offset {offset:#x} (+{td_size:#x} bytes) runs past the {len:#x}-byte task stream")]
    TdOutOfBounds {
        /// Position in the chain.
        index: usize,
        /// Byte offset of the TD.
        offset: usize,
        /// The TD size.
        td_size: usize,
        /// Length of the task stream.
        len: usize,
    },
    /// A NextPointer does not point past the end of its own TD (it would
    /// overlap or loop).
    #[error("TD {index} at offset {offset:#x}: NextPointer {next:#x} does not point past the end of this TD")]
    NextPointerBackwards {
        /// Position in the chain.
        index: usize,
        /// Byte offset of the TD.
        offset: usize,
        /// The NextPointer value.
        next: u32,
    },
    /// A NextPointer is not word aligned.
    #[error("TD {index} at offset {offset:#x}: NextPointer {next:#x} is not a multiple of 4")]
    NextPointerUnaligned {
        /// Position in the chain.
        index: usize,
        /// Byte offset of the TD.
        offset: usize,
        /// The NextPointer value.
        next: u32,
    },
    /// A TD has neither the end-of-network bit nor a NextPointer.
    #[error("TD {index} at offset {offset:#x}: NextPointer is 0 but the end-of-network bit (W0 bit 25) is clear")]
    Unterminated {
        /// Position in the chain.
        index: usize,
        /// Byte offset of the TD.
        offset: usize,
    },
}

fn le32(data: &[u8], offset: usize) -> Option<u32> {
    let end = offset.checked_add(4)?;
    let bytes: [u8; 4] = data.get(offset..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

fn le64(data: &[u8], offset: usize) -> Option<u64> {
    let end = offset.checked_add(8)?;
    let bytes: [u8; 8] = data.get(offset..end)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Follows the H13 TD chain through `stream` and returns the byte offset of
/// every TD, in order.
///
/// TD 0 is at offset 0; a TD with the end-of-network bit (W0 bit 25) ends
/// the chain; otherwise its W7 (NextPointer) is the offset of the next TD,
/// which must start at or after the end of the current one. Every TD must
/// lie inside `stream`. The chain is therefore finite and strictly
/// increasing. Nothing else in the TDs is interpreted.
pub fn td_chain(stream: &[u8], td_size: usize) -> Result<Vec<usize>, ChainError> {
    if td_size < TD_HEADER_SIZE {
        return Err(ChainError::TdSizeTooSmall { td_size });
    }
    let mut offsets = Vec::new();
    let mut offset = 0usize;
    loop {
        let index = offsets.len();
        let out_of_bounds = ChainError::TdOutOfBounds {
            index,
            offset,
            td_size,
            len: stream.len(),
        };
        let end = match offset.checked_add(td_size) {
            Some(end) if end <= stream.len() => end,
            _ => return Err(out_of_bounds),
        };
        // In bounds: td_size covers both words.
        let w0 = le32(stream, offset).ok_or(out_of_bounds.clone())?;
        let next = le32(stream, offset + TD_NEXT_POINTER).ok_or(out_of_bounds)?;
        offsets.push(offset);
        if w0 & TD_W0_EON != 0 {
            return Ok(offsets);
        }
        if next == 0 {
            return Err(ChainError::Unterminated { index, offset });
        }
        if next % 4 != 0 {
            return Err(ChainError::NextPointerUnaligned {
                index,
                offset,
                next,
            });
        }
        match usize::try_from(next) {
            Ok(n) if n >= end => offset = n,
            _ => {
                return Err(ChainError::NextPointerBackwards {
                    index,
                    offset,
                    next,
                })
            }
        }
    }
}

/// Why an HWX file was rejected. Every variant names the field and the
/// value at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HwxError {
    /// Shorter than the file header.
    #[error("file is {len} bytes, shorter than the {HEADER_SIZE}-byte HWX header")]
    TooShort {
        /// File length.
        len: usize,
    },
    /// Not an HWX file.
    #[error("magic is {found:#010x}, expected {MAGIC:#010x}")]
    BadMagic {
        /// The first word of the file.
        found: u32,
    },
    /// The load commands extend past the end of the file.
    #[error("sizeofcmds = {sizeofcmds:#x}: the load commands run past the end of the {file_len:#x}-byte file")]
    CommandsOutOfFile {
        /// The header's `sizeofcmds`.
        sizeofcmds: u32,
        /// File length.
        file_len: usize,
    },
    /// More load commands than `sizeofcmds` can hold (8 bytes each at least).
    #[error("ncmds = {ncmds} load commands cannot fit in sizeofcmds = {sizeofcmds:#x}")]
    TooManyCommands {
        /// The header's `ncmds`.
        ncmds: u32,
        /// The header's `sizeofcmds`.
        sizeofcmds: u32,
    },
    /// A load command's size is unusable.
    #[error(
        "load command {index} (cmd {cmd:#x}) at offset {offset:#x}: cmdsize {cmdsize:#x} {problem}"
    )]
    BadCommandSize {
        /// Index of the load command.
        index: u32,
        /// Its `cmd`.
        cmd: u32,
        /// Its file offset.
        offset: usize,
        /// Its `cmdsize`.
        cmdsize: u32,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The load commands do not fill `sizeofcmds` exactly.
    #[error("the {ncmds} load commands take {used:#x} bytes, but sizeofcmds = {sizeofcmds:#x}")]
    CommandsSizeMismatch {
        /// The header's `ncmds`.
        ncmds: u32,
        /// Bytes the commands take.
        used: usize,
        /// The header's `sizeofcmds`.
        sizeofcmds: u32,
    },
    /// A segment command's size does not match its section count.
    #[error(
        "segment {segment}: nsects = {nsects} needs cmdsize {expected:#x}, found {cmdsize:#x}"
    )]
    SegmentSize {
        /// Segment name.
        segment: String,
        /// Its `nsects`.
        nsects: u32,
        /// Its `cmdsize`.
        cmdsize: u32,
        /// `72 + 80·nsects`.
        expected: u64,
    },
    /// A segment's file range is outside the file.
    #[error("segment {segment}: fileoff {fileoff:#x} + filesize {filesize:#x} lies outside the {file_len:#x}-byte file")]
    SegmentOutOfFile {
        /// Segment name.
        segment: String,
        /// Its `fileoff`.
        fileoff: u64,
        /// Its `filesize`.
        filesize: u64,
        /// File length.
        file_len: usize,
    },
    /// A segment's address range wraps around.
    #[error("segment {segment}: vmaddr {vmaddr:#x} + vmsize {vmsize:#x} overflows")]
    SegmentVmOverflow {
        /// Segment name.
        segment: String,
        /// Its `vmaddr`.
        vmaddr: u64,
        /// Its `vmsize`.
        vmsize: u64,
    },
    /// A section's file data lies outside its segment's file range.
    #[error("section {section}: offset {offset:#x} + size {size:#x} lies outside its segment's file range {seg_fileoff:#x}+{seg_filesize:#x}")]
    SectionOutOfSegment {
        /// `SEGMENT,section`.
        section: String,
        /// Its `offset`.
        offset: u32,
        /// Its `size`.
        size: u64,
        /// The segment's `fileoff`.
        seg_fileoff: u64,
        /// The segment's `filesize`.
        seg_filesize: u64,
    },
    /// A section's address range lies outside its segment's.
    #[error("section {section}: addr {addr:#x} + size {size:#x} lies outside its segment's range {vmaddr:#x}+{vmsize:#x}")]
    SectionOutOfVm {
        /// `SEGMENT,section`.
        section: String,
        /// Its `addr`.
        addr: u64,
        /// Its `size`.
        size: u64,
        /// The segment's `vmaddr`.
        vmaddr: u64,
        /// The segment's `vmsize`.
        vmsize: u64,
    },
    /// A section's alignment exponent is absurd.
    #[error("section {section}: align = {align} (a power-of-two exponent) is larger than 63")]
    SectionAlign {
        /// `SEGMENT,section`.
        section: String,
        /// Its `align`.
        align: u32,
    },
    /// A section's file offset does not honour its alignment.
    #[error("section {section}: offset {offset:#x} is not a multiple of 2^{align}")]
    SectionMisaligned {
        /// `SEGMENT,section`.
        section: String,
        /// Its `offset`.
        offset: u32,
        /// Its `align`.
        align: u32,
    },
    /// A required section is absent.
    #[error("section {section} is missing")]
    MissingSection {
        /// `SEGMENT,section`.
        section: &'static str,
    },
    /// A section that must be unique appears twice.
    #[error("section {section} appears more than once")]
    DuplicateSection {
        /// `SEGMENT,section`.
        section: &'static str,
    },
    /// The task stream has no bytes in the file.
    #[error("section __TEXT,__text (the task stream) has no file data: size {size:#x}")]
    EmptyTaskStream {
        /// Its `size`.
        size: u64,
    },
    /// A string field does not point at a NUL-terminated string inside its
    /// load command.
    #[error("load command {index} (cmd {cmd:#x}): {field} offset {offset:#x} is not a NUL-terminated string inside the command")]
    BadString {
        /// Index of the load command.
        index: u32,
        /// Its `cmd`.
        cmd: u32,
        /// Which string.
        field: &'static str,
        /// The offset found.
        offset: u32,
    },
    /// An `LC_THREAD` state does not fit in its command.
    #[error("load command {index} (LC_THREAD flavor {flavor}): count = {count} words do not fit in cmdsize {cmdsize:#x}")]
    ThreadCount {
        /// Index of the load command.
        index: u32,
        /// The thread flavor.
        flavor: u32,
        /// Its `count`.
        count: u32,
        /// Its `cmdsize`.
        cmdsize: u32,
    },
    /// An `LC_THREAD` state has fewer words than the parser reads.
    #[error("load command {index} (LC_THREAD flavor {flavor}): count = {count} words, at least {need} needed")]
    ThreadTooShort {
        /// Index of the load command.
        index: u32,
        /// The thread flavor.
        flavor: u32,
        /// Its `count`.
        count: u32,
        /// Words needed.
        need: u32,
    },
    /// No program state.
    #[error("no LC_THREAD flavor 1 (program state)")]
    MissingProgramState,
    /// Two program states.
    #[error("load command {index}: a second LC_THREAD flavor 1 (program state)")]
    DuplicateProgramState {
        /// Index of the second one.
        index: u32,
    },
    /// The program state's TD 0 address is not the task stream's.
    #[error("program state: TD 0 address {state:#x} is not the __TEXT,__text address {text:#x}")]
    Td0Address {
        /// Address in the program state.
        state: u64,
        /// The section's `addr`.
        text: u64,
    },
    /// The program state's TD size is unusable.
    #[error("program state: td_size = {td_size:#x} bytes (size word {word:#x}) {problem}")]
    BadTdSize {
        /// The TD size, `(word + 1)·4`.
        td_size: u64,
        /// The raw word.
        word: u32,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The program state's TD count is zero.
    #[error("program state: td_count = 0")]
    ZeroTdCount,
    /// The TD chain in `__text` is malformed.
    #[error("task stream: {0}")]
    Chain(#[from] ChainError),
    /// The TD chain has another length than the program state says.
    #[error("program state: td_count = {declared}, but the task stream chains {found} TDs")]
    TdCountMismatch {
        /// `td_count` of the program state.
        declared: u32,
        /// TDs in the chain.
        found: usize,
    },
    /// The task stream is not exactly as long as its TD chain.
    #[error("task stream: size {tsk_size:#x}, but its last TD ends at {end:#x}")]
    TaskSizeMismatch {
        /// `__text` size.
        tsk_size: u64,
        /// End of the last TD.
        end: u64,
    },
    /// A tensor descriptor field has an invalid value.
    #[error("load command {index} (tensor descriptor): {field} = {value:#x} is invalid")]
    TensorField {
        /// Index of the load command.
        index: u32,
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// A tensor descriptor cannot be tied to a buffer and BAR slot.
    #[error("tensor {name}: {problem}")]
    UnboundTensor {
        /// The tensor's name.
        name: String,
        /// What is missing.
        problem: &'static str,
    },
}

/// The file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MachHeader {
    /// [`MAGIC`].
    pub magic: u32,
    /// CPU type (0x80 in every known file).
    pub cputype: u32,
    /// The ANE generation, see [`AneArch`].
    pub cpusubtype: u32,
    /// File type (2 in every known file).
    pub filetype: u32,
    /// Number of load commands.
    pub ncmds: u32,
    /// Bytes of load commands after the header.
    pub sizeofcmds: u32,
    /// Header flags.
    pub flags: u32,
    /// Reserved word.
    pub reserved: u32,
}

/// One load command, as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LoadCommand {
    /// Position among the load commands.
    pub index: u32,
    /// The command code.
    pub cmd: u32,
    /// File offset.
    pub offset: usize,
    /// `cmdsize`.
    pub size: u32,
}

/// A section of a segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Section {
    /// Section name, e.g. `__text`.
    pub name: String,
    /// The segment name recorded in the section, e.g. `__TEXT`.
    pub segment: String,
    /// Address.
    pub addr: u64,
    /// Size in bytes.
    pub size: u64,
    /// File offset of its data (meaningful when [`Section::in_file`]).
    pub offset: u32,
    /// Alignment, as a power-of-two exponent.
    pub align: u32,
    /// File offset of its relocations.
    pub reloff: u32,
    /// Number of relocations.
    pub nreloc: u32,
    /// Type and attributes.
    pub flags: u32,
    /// Reserved words.
    pub reserved: [u32; 3],
    /// Whether the section has bytes in the file (its segment has file data,
    /// it is not zero-fill, and its size is not zero).
    pub in_file: bool,
}

impl Section {
    /// The file byte range of the section's data, when it has any.
    pub fn file_range(&self) -> Option<Range<usize>> {
        if !self.in_file {
            return None;
        }
        // Validated against the file length during parsing.
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(usize::try_from(self.size).ok()?)?;
        Some(start..end)
    }
}

/// An `LC_SEGMENT_64` segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// Segment name, e.g. `__TEXT` or `__FVMLIB`.
    pub name: String,
    /// Address.
    pub vmaddr: u64,
    /// Size of its address range (for tensor buffers: the buffer size).
    pub vmsize: u64,
    /// File offset of its data.
    pub fileoff: u64,
    /// Bytes of file data.
    pub filesize: u64,
    /// Maximum protection.
    pub maxprot: u32,
    /// Initial protection.
    pub initprot: u32,
    /// Segment flags.
    pub flags: u32,
    /// Its sections.
    pub sections: Vec<Section>,
}

/// A named buffer region (`LC_IDFVMLIB` or command 0x40).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MappedRegion {
    /// The load command it came from ([`LC_IDFVMLIB`] or
    /// [`LC_ANE_MAPPED_REGION`]).
    pub cmd: u32,
    /// Buffer name (outputs may carry an `@output` suffix).
    pub name: String,
    /// Buffer address.
    pub vmaddr: u64,
}

/// The program state (`LC_THREAD` flavor 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProgramState {
    /// Address bound to each BAR slot, 0 where unused. Slot 0 is the task
    /// stream, slot 1 the constants, slots 2–3 scratch, slots 4.. the
    /// tensors in the compiler's order.
    pub bar_slots: [u64; BAR_SLOTS],
    /// Address of TD 0.
    pub td0_addr: u64,
    /// Size of one TD in bytes (from the size word: `(word + 1)·4`).
    pub td_size: u32,
    /// Number of TDs.
    pub td_count: u32,
}

/// Whether a tensor is read or written by the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Direction {
    /// Read by the program.
    Input,
    /// Written by the program.
    Output,
}

/// An input or output tensor (`LC_THREAD` flavor 3), tied to its buffer.
///
/// The descriptor's word layout is decoded from the fixtures (`td.md` §3.5):
/// word 1 direction, 4 name, 5 data type, 6–9 N C H W, 16/18/20/22 the
/// batch, plane, row and element strides, 24 the size, 27 the name of its
/// buffer region.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HwxTensor {
    /// Read or written.
    pub direction: Direction,
    /// Tensor name (outputs of older compilers end in `@output`).
    pub name: String,
    /// Name of its buffer region (see [`MappedRegion`]).
    pub region_name: String,
    /// Data type code (5 = float16).
    pub dtype: u32,
    /// `[N, C, H, W]`.
    pub dims: [u32; 4],
    /// Byte strides `[batch, plane, row, element]`.
    pub strides: [u64; 4],
    /// Byte size recorded in the descriptor (`N·C·plane_stride`).
    pub size: u64,
    /// Buffer address.
    pub vmaddr: u64,
    /// Buffer size (its segment's `vmsize`; a multiple of 16 KiB).
    pub buffer_size: u64,
    /// The BAR slot the program addresses it through.
    pub slot: usize,
}

/// Data type code of float16 in tensor descriptors.
pub const DTYPE_FLOAT16: u32 = 5;

/// A parsed and validated HWX file.
#[derive(Clone, PartialEq, Eq)]
pub struct Hwx {
    data: Vec<u8>,
    header: MachHeader,
    commands: Vec<LoadCommand>,
    segments: Vec<Segment>,
    regions: Vec<MappedRegion>,
    program: ProgramState,
    tensors: Vec<HwxTensor>,
    text: Section,
    text_range: Range<usize>,
    konst: Option<Section>,
    const_range: Range<usize>,
    td_offsets: Option<Vec<usize>>,
    compiler: Option<String>,
}

impl fmt::Debug for Hwx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hwx")
            .field("len", &self.data.len())
            .field("header", &self.header)
            .field("segments", &self.segments)
            .field("regions", &self.regions)
            .field("program", &self.program)
            .field("tensors", &self.tensors)
            .field("td_offsets", &self.td_offsets)
            .field("compiler", &self.compiler)
            .finish()
    }
}

/// The string at `offset` inside one load command, up to its NUL.
fn cstr(cmd_bytes: &[u8], offset: u32) -> Option<String> {
    let rest = cmd_bytes.get(usize::try_from(offset).ok()?..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// A fixed-size, NUL-padded name field.
fn fixed_name(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Section types whose data is not in the file.
fn is_zerofill(flags: u32) -> bool {
    matches!(flags & 0xFF, 0x1 | 0xC | 0x12)
}

/// A tensor descriptor before it is tied to its buffer.
struct RawTensor {
    direction: Direction,
    name: String,
    region_name: String,
    dtype: u32,
    dims: [u32; 4],
    strides: [u64; 4],
    size: u64,
}

/// State of one parse.
struct Parser<'a> {
    data: &'a [u8],
    segments: Vec<Segment>,
    regions: Vec<MappedRegion>,
    program: Option<ProgramState>,
    raw_tensors: Vec<RawTensor>,
    compiler: Option<String>,
}

impl Parser<'_> {
    fn segment(&mut self, index: u32, cmd: &[u8]) -> Result<(), HwxError> {
        let cmdsize = cmd.len() as u32;
        let too_small = || HwxError::BadCommandSize {
            index,
            cmd: LC_SEGMENT_64,
            offset: 0,
            cmdsize,
            problem: "is too small for LC_SEGMENT_64",
        };
        if (cmd.len() as u64) < SEGMENT_COMMAND_SIZE {
            return Err(too_small());
        }
        let u64_at = |o| le64(cmd, o).unwrap_or(0);
        let u32_at = |o| le32(cmd, o).unwrap_or(0);
        let name = fixed_name(&cmd[8..24]);
        let (vmaddr, vmsize, fileoff, filesize) = (u64_at(24), u64_at(32), u64_at(40), u64_at(48));
        let (maxprot, initprot, nsects, flags) = (u32_at(56), u32_at(60), u32_at(64), u32_at(68));
        let expected = SEGMENT_COMMAND_SIZE + SECTION_SIZE * u64::from(nsects);
        if expected != u64::from(cmdsize) {
            return Err(HwxError::SegmentSize {
                segment: name,
                nsects,
                cmdsize,
                expected,
            });
        }
        let file_len = self.data.len();
        match fileoff.checked_add(filesize) {
            Some(end) if end <= file_len as u64 => {}
            _ => {
                return Err(HwxError::SegmentOutOfFile {
                    segment: name,
                    fileoff,
                    filesize,
                    file_len,
                })
            }
        }
        let Some(vmend) = vmaddr.checked_add(vmsize) else {
            return Err(HwxError::SegmentVmOverflow {
                segment: name,
                vmaddr,
                vmsize,
            });
        };
        let mut sections = Vec::with_capacity(nsects as usize);
        for k in 0..nsects as usize {
            // In bounds: cmdsize == 72 + 80·nsects.
            let base = SEGMENT_COMMAND_SIZE as usize + k * SECTION_SIZE as usize;
            let s = &cmd[base..base + SECTION_SIZE as usize];
            let u64_at = |o| le64(s, o).unwrap_or(0);
            let u32_at = |o| le32(s, o).unwrap_or(0);
            let sect = Section {
                name: fixed_name(&s[0..16]),
                segment: fixed_name(&s[16..32]),
                addr: u64_at(32),
                size: u64_at(40),
                offset: u32_at(48),
                align: u32_at(52),
                reloff: u32_at(56),
                nreloc: u32_at(60),
                flags: u32_at(64),
                reserved: [u32_at(68), u32_at(72), u32_at(76)],
                in_file: false,
            };
            let full = format!("{},{}", sect.segment, sect.name);
            match sect.addr.checked_add(sect.size) {
                Some(end) if sect.addr >= vmaddr && end <= vmend => {}
                _ => {
                    return Err(HwxError::SectionOutOfVm {
                        section: full,
                        addr: sect.addr,
                        size: sect.size,
                        vmaddr,
                        vmsize,
                    })
                }
            }
            if sect.align > 63 {
                return Err(HwxError::SectionAlign {
                    section: full,
                    align: sect.align,
                });
            }
            let in_file = filesize > 0 && !is_zerofill(sect.flags) && sect.size > 0;
            if in_file {
                let off = u64::from(sect.offset);
                match off.checked_add(sect.size) {
                    Some(end) if off >= fileoff && end <= fileoff + filesize => {}
                    _ => {
                        return Err(HwxError::SectionOutOfSegment {
                            section: full,
                            offset: sect.offset,
                            size: sect.size,
                            seg_fileoff: fileoff,
                            seg_filesize: filesize,
                        })
                    }
                }
                if off % (1u64 << sect.align) != 0 {
                    return Err(HwxError::SectionMisaligned {
                        section: full,
                        offset: sect.offset,
                        align: sect.align,
                    });
                }
            }
            sections.push(Section { in_file, ..sect });
        }
        self.segments.push(Segment {
            name,
            vmaddr,
            vmsize,
            fileoff,
            filesize,
            maxprot,
            initprot,
            flags,
            sections,
        });
        Ok(())
    }

    fn region(&mut self, index: u32, cmd_code: u32, cmd: &[u8]) -> Result<(), HwxError> {
        // LC_IDFVMLIB: {name_off u32, minor u32, header_addr u32};
        // command 0x40: {name_off u32, u32, vmaddr u64}.
        let fixed = if cmd_code == LC_IDFVMLIB { 20 } else { 24 };
        if cmd.len() < fixed {
            return Err(HwxError::BadCommandSize {
                index,
                cmd: cmd_code,
                offset: 0,
                cmdsize: cmd.len() as u32,
                problem: "is too small for a buffer region command",
            });
        }
        let name_off = le32(cmd, 8).unwrap_or(0);
        let vmaddr = if cmd_code == LC_IDFVMLIB {
            u64::from(le32(cmd, 16).unwrap_or(0))
        } else {
            le64(cmd, 16).unwrap_or(0)
        };
        let name = cstr(cmd, name_off).ok_or(HwxError::BadString {
            index,
            cmd: cmd_code,
            field: "region name",
            offset: name_off,
        })?;
        self.regions.push(MappedRegion {
            cmd: cmd_code,
            name,
            vmaddr,
        });
        Ok(())
    }

    fn thread(&mut self, index: u32, cmd: &[u8]) -> Result<(), HwxError> {
        let cmdsize = cmd.len() as u32;
        if cmd.len() < THREAD_HEADER_SIZE {
            return Err(HwxError::BadCommandSize {
                index,
                cmd: LC_THREAD,
                offset: 0,
                cmdsize,
                problem: "is too small for LC_THREAD",
            });
        }
        let flavor = le32(cmd, 8).unwrap_or(0);
        let count = le32(cmd, 12).unwrap_or(0);
        let fits = (count as usize)
            .checked_mul(4)
            .and_then(|b| b.checked_add(THREAD_HEADER_SIZE))
            .is_some_and(|end| end <= cmd.len());
        if !fits {
            return Err(HwxError::ThreadCount {
                index,
                flavor,
                count,
                cmdsize,
            });
        }
        let word = |i: usize| le32(cmd, THREAD_HEADER_SIZE + 4 * i).unwrap_or(0);
        let dword = |i: usize| u64::from(word(i)) | (u64::from(word(i + 1)) << 32);
        let need = |min: u32| {
            if count < min {
                Err(HwxError::ThreadTooShort {
                    index,
                    flavor,
                    count,
                    need: min,
                })
            } else {
                Ok(())
            }
        };
        match flavor {
            THREAD_PROGRAM => {
                need(PROGRAM_MIN_WORDS)?;
                if self.program.is_some() {
                    return Err(HwxError::DuplicateProgramState { index });
                }
                let mut bar_slots = [0u64; BAR_SLOTS];
                for (k, slot) in bar_slots.iter_mut().enumerate() {
                    *slot = dword(2 * k);
                }
                let size_word = word(PROGRAM_TD_WORDS);
                let td_size = (u64::from(size_word) + 1) * 4;
                let td_size = u32::try_from(td_size).map_err(|_| HwxError::BadTdSize {
                    td_size,
                    word: size_word,
                    problem: "does not fit in 32 bits",
                })?;
                self.program = Some(ProgramState {
                    bar_slots,
                    td0_addr: dword(PROGRAM_TD0_ADDR),
                    td_size,
                    td_count: word(PROGRAM_TD_COUNT),
                });
            }
            THREAD_TENSOR => {
                need(TENSOR_MIN_WORDS)?;
                let direction = match word(1) {
                    1 => Direction::Input,
                    2 => Direction::Output,
                    other => {
                        return Err(HwxError::TensorField {
                            index,
                            field: "direction",
                            value: u64::from(other),
                        })
                    }
                };
                let string = |field, at: usize| {
                    let offset = word(at);
                    cstr(cmd, offset).ok_or(HwxError::BadString {
                        index,
                        cmd: LC_THREAD,
                        field,
                        offset,
                    })
                };
                self.raw_tensors.push(RawTensor {
                    direction,
                    name: string("tensor name", 4)?,
                    region_name: string("tensor region name", 27)?,
                    dtype: word(5),
                    dims: [word(6), word(7), word(8), word(9)],
                    strides: [dword(16), dword(18), dword(20), dword(22)],
                    size: dword(24),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn ident(&mut self, cmd: &[u8]) {
        const KEY: &[u8] = b"zin_ane_compiler v";
        let text = &cmd[8.min(cmd.len())..];
        if let Some(pos) = text.windows(KEY.len()).position(|w| w == KEY) {
            let rest = &text[pos + KEY.len()..];
            let end = rest
                .iter()
                .position(|b| b.is_ascii_whitespace() || *b == 0)
                .unwrap_or(rest.len());
            if end > 0 {
                self.compiler = Some(String::from_utf8_lossy(&rest[..end]).into_owned());
            }
        }
    }
}

impl Hwx {
    /// Parses and validates an HWX file (the bytes are copied).
    pub fn parse(bytes: &[u8]) -> Result<Hwx, HwxError> {
        Hwx::from_vec(bytes.to_vec())
    }

    /// Parses and validates an HWX file, taking ownership of its bytes.
    pub fn from_vec(data: Vec<u8>) -> Result<Hwx, HwxError> {
        let len = data.len();
        if len < HEADER_SIZE {
            return Err(HwxError::TooShort { len });
        }
        let w = |i: usize| le32(&data, 4 * i).unwrap_or(0);
        let header = MachHeader {
            magic: w(0),
            cputype: w(1),
            cpusubtype: w(2),
            filetype: w(3),
            ncmds: w(4),
            sizeofcmds: w(5),
            flags: w(6),
            reserved: w(7),
        };
        if header.magic != MAGIC {
            return Err(HwxError::BadMagic {
                found: header.magic,
            });
        }
        let cmds_end = HEADER_SIZE + header.sizeofcmds as usize;
        if header.sizeofcmds as usize > len - HEADER_SIZE {
            return Err(HwxError::CommandsOutOfFile {
                sizeofcmds: header.sizeofcmds,
                file_len: len,
            });
        }
        if header.ncmds > header.sizeofcmds / 8 {
            return Err(HwxError::TooManyCommands {
                ncmds: header.ncmds,
                sizeofcmds: header.sizeofcmds,
            });
        }

        let mut p = Parser {
            data: &data,
            segments: Vec::new(),
            regions: Vec::new(),
            program: None,
            raw_tensors: Vec::new(),
            compiler: None,
        };
        let mut commands = Vec::with_capacity(header.ncmds as usize);
        let mut offset = HEADER_SIZE;
        for index in 0..header.ncmds {
            let bad = |cmd, cmdsize, problem| HwxError::BadCommandSize {
                index,
                cmd,
                offset,
                cmdsize,
                problem,
            };
            if cmds_end - offset < 8 {
                return Err(bad(
                    0,
                    0,
                    "cannot start: fewer than 8 bytes of sizeofcmds remain",
                ));
            }
            let cmd = le32(&data, offset).unwrap_or(0);
            let cmdsize = le32(&data, offset + 4).unwrap_or(0);
            if cmdsize < 8 {
                return Err(bad(cmd, cmdsize, "is smaller than 8"));
            }
            if cmdsize % 8 != 0 {
                return Err(bad(cmd, cmdsize, "is not a multiple of 8"));
            }
            if cmdsize as usize > cmds_end - offset {
                return Err(bad(cmd, cmdsize, "runs past the end of sizeofcmds"));
            }
            let bytes = &data[offset..offset + cmdsize as usize];
            let located = |e: HwxError| match e {
                HwxError::BadCommandSize {
                    index,
                    cmd,
                    cmdsize,
                    problem,
                    ..
                } => HwxError::BadCommandSize {
                    index,
                    cmd,
                    offset,
                    cmdsize,
                    problem,
                },
                other => other,
            };
            match cmd {
                LC_SEGMENT_64 => p.segment(index, bytes).map_err(located)?,
                LC_THREAD => p.thread(index, bytes).map_err(located)?,
                LC_IDFVMLIB | LC_ANE_MAPPED_REGION => {
                    p.region(index, cmd, bytes).map_err(located)?
                }
                LC_IDENT => p.ident(bytes),
                _ => {}
            }
            commands.push(LoadCommand {
                index,
                cmd,
                offset,
                size: cmdsize,
            });
            offset += cmdsize as usize;
        }
        if offset != cmds_end {
            return Err(HwxError::CommandsSizeMismatch {
                ncmds: header.ncmds,
                used: offset - HEADER_SIZE,
                sizeofcmds: header.sizeofcmds,
            });
        }

        let find = |seg: &str, name: &str| {
            p.segments
                .iter()
                .flat_map(|s| s.sections.iter())
                .filter(|s| s.segment == seg && s.name == name)
                .collect::<Vec<_>>()
        };
        let text = match find("__TEXT", "__text")[..] {
            [] => {
                return Err(HwxError::MissingSection {
                    section: "__TEXT,__text",
                })
            }
            [s] => s.clone(),
            _ => {
                return Err(HwxError::DuplicateSection {
                    section: "__TEXT,__text",
                })
            }
        };
        let konst = match find("__TEXT", "__const")[..] {
            [] => None,
            [s] => Some(s.clone()),
            _ => {
                return Err(HwxError::DuplicateSection {
                    section: "__TEXT,__const",
                })
            }
        };
        let text_range = text
            .file_range()
            .ok_or(HwxError::EmptyTaskStream { size: text.size })?;
        let const_range = konst.as_ref().and_then(Section::file_range).unwrap_or(0..0);

        let program = p.program.take().ok_or(HwxError::MissingProgramState)?;
        if program.td0_addr != text.addr {
            return Err(HwxError::Td0Address {
                state: program.td0_addr,
                text: text.addr,
            });
        }
        let bad_td_size = |problem| HwxError::BadTdSize {
            td_size: u64::from(program.td_size),
            word: program.td_size / 4 - 1,
            problem,
        };
        if (program.td_size as usize) < TD_HEADER_SIZE {
            return Err(bad_td_size("is smaller than the 0x28-byte TD header"));
        }
        if u64::from(program.td_size) > text.size {
            return Err(bad_td_size("is larger than the task stream"));
        }
        if program.td_count == 0 {
            return Err(HwxError::ZeroTdCount);
        }
        let arch = AneArch::from_cpusubtype(header.cpusubtype);
        let td_offsets = if arch == AneArch::H13 {
            let stream = &data[text_range.clone()];
            let offsets = td_chain(stream, program.td_size as usize)?;
            if offsets.len() != program.td_count as usize {
                return Err(HwxError::TdCountMismatch {
                    declared: program.td_count,
                    found: offsets.len(),
                });
            }
            // Non-empty: a chain has at least TD 0.
            let end = offsets.last().map_or(0, |&o| o + program.td_size as usize);
            if end != stream.len() {
                return Err(HwxError::TaskSizeMismatch {
                    tsk_size: text.size,
                    end: end as u64,
                });
            }
            Some(offsets)
        } else {
            None
        };

        let mut tensors = Vec::with_capacity(p.raw_tensors.len());
        for raw in p.raw_tensors.drain(..) {
            let unbound = |problem| HwxError::UnboundTensor {
                name: raw.name.clone(),
                problem,
            };
            let region = p
                .regions
                .iter()
                .find(|r| r.name == raw.region_name)
                .ok_or(unbound("no LC_IDFVMLIB or 0x40 region has its region name"))?;
            let vmaddr = region.vmaddr;
            let segment = p
                .segments
                .iter()
                .find(|s| s.vmaddr == vmaddr && s.filesize == 0)
                .ok_or(unbound("no buffer segment starts at its region's address"))?;
            let slot = program
                .bar_slots
                .iter()
                .position(|&a| a == vmaddr)
                .ok_or(unbound("no BAR slot holds its address"))?;
            tensors.push(HwxTensor {
                direction: raw.direction,
                name: raw.name,
                region_name: raw.region_name,
                dtype: raw.dtype,
                dims: raw.dims,
                strides: raw.strides,
                size: raw.size,
                vmaddr,
                buffer_size: segment.vmsize,
                slot,
            });
        }

        Ok(Hwx {
            header,
            commands,
            segments: p.segments,
            regions: p.regions,
            program,
            tensors,
            text,
            text_range,
            konst,
            const_range,
            td_offsets,
            compiler: p.compiler,
            data,
        })
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
    /// The file header.
    pub fn header(&self) -> &MachHeader {
        &self.header
    }
    /// The ANE generation the program was compiled for.
    pub fn arch(&self) -> AneArch {
        AneArch::from_cpusubtype(self.header.cpusubtype)
    }
    /// Every load command, in file order.
    pub fn load_commands(&self) -> &[LoadCommand] {
        &self.commands
    }
    /// Every segment, in file order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }
    /// The section `segment,name`, if present (the first one).
    pub fn section(&self, segment: &str, name: &str) -> Option<&Section> {
        self.segments
            .iter()
            .flat_map(|s| s.sections.iter())
            .find(|s| s.segment == segment && s.name == name)
    }
    /// `__TEXT,__text`: the task stream.
    pub fn text_section(&self) -> &Section {
        &self.text
    }
    /// `__TEXT,__const`: the constants, when present.
    pub fn const_section(&self) -> Option<&Section> {
        self.konst.as_ref()
    }
    /// The named buffer regions.
    pub fn mapped_regions(&self) -> &[MappedRegion] {
        &self.regions
    }
    /// The program state.
    pub fn program(&self) -> &ProgramState {
        &self.program
    }
    /// The input and output tensors, in load-command order.
    pub fn tensors(&self) -> &[HwxTensor] {
        &self.tensors
    }
    /// The compiler version from `LC_IDENT` (e.g. `4.2.1`), when present.
    pub fn compiler_version(&self) -> Option<&str> {
        self.compiler.as_deref()
    }

    /// The task stream: the TD chain, `tsk_size` bytes.
    pub fn task_stream(&self) -> &[u8] {
        &self.data[self.text_range.clone()]
    }
    /// File offset of TD 0.
    pub fn td_file_offset(&self) -> usize {
        self.text_range.start
    }
    /// Bytes of the task stream.
    pub fn tsk_size(&self) -> u64 {
        self.text.size
    }
    /// Bytes of one TD.
    pub fn td_size(&self) -> u32 {
        self.program.td_size
    }
    /// Number of TDs.
    pub fn td_count(&self) -> u32 {
        self.program.td_count
    }
    /// Offset of each TD in the task stream (H13 files only: the chain is
    /// followed and checked against `td_count` and `tsk_size`).
    pub fn td_offsets(&self) -> Option<&[usize]> {
        self.td_offsets.as_deref()
    }
    /// The bytes of TD `index` (H13 files only).
    pub fn td(&self, index: usize) -> Option<&[u8]> {
        let start = *self.td_offsets.as_ref()?.get(index)?;
        self.task_stream()
            .get(start..start.checked_add(self.td_size() as usize)?)
    }
    /// The constants (`__TEXT,__const`): weights, lookup tables. Empty when
    /// the section is absent.
    pub fn weights(&self) -> &[u8] {
        &self.data[self.const_range.clone()]
    }
    /// Bytes of constants.
    pub fn krn_size(&self) -> u64 {
        self.const_range.len() as u64
    }
}

#[cfg(test)]
pub(crate) mod testdata;

#[cfg(test)]
mod tests;
