// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The H14 program container: the `.anec` file Apple's compiler emits for
//! T602x, read into the six sections the kernel hands the firmware
//! (PROGRAM_CREATE with sections, ids 1-5 and 7).
//!
//! The format is what the one driver that ran programs on the T6021
//! firmware reads (omarchy-ane libane `ane_m2.c`, `ane_m2_program_build`,
//! and `ane_m2.h`; `docs/hardware-record.md`, "H14 programs"): its loader
//! parsed these files into sections byte-identical to its lab builder's,
//! and its add program ran bit-exact with them. Each field below names
//! that source. What this reader does not derive (the operand binding of
//! matmul and select programs, the scratch buffer some multi-task programs
//! need) is refused with the field named, never guessed.
//!
//! The container: a [`HEADER`]-byte header, then the payload: the task
//! stream at offset 0 and the constants (the "kernel" section) at the end,
//! 64-byte aligned. The sections built from it:
//!
//! | id | name | content |
//! |---|---|---|
//! | 1 | generic | the io table: one entry per input and the output, sized from the header's tile counts |
//! | 2 | kernel | the constants, as stored |
//! | 3 | descriptor | the task stream, as stored |
//! | 4 | operation | one record binding each BAR slot the tasks use to a buffer id |
//! | 5 | procedure | the one procedure every program that ran had |
//! | 7 | tdprop | one segment covering the descriptor, with its block count |
//!
//! The kernel's own shape rules (`hw::fw::program`) are applied to the
//! result, so a program this reader builds is never one the kernel
//! refuses.

use crate::hw::fw::program as shape;
use crate::hw::uapi;

/// Bytes of the header (OA `ANEC_M2_HEADER_SIZE`).
pub const HEADER: usize = 0x1000;

/// The header's version word (+0x24) in every file the compiler emitted
/// (OA: "anec header version word is not the emitted 1").
pub const VERSION: u32 = 1;

/// Tile counts are in units of 1 << this many bytes (OA
/// `ANE_M2_TILE_UNIT_SHIFT`: the add fixture's tiles\[4..6\] == 2 is its
/// 0x8000-byte allocation).
pub const TILE_SHIFT: u32 = 14;

/// The largest tile count taken (OA: "unusable tile count").
pub const MAX_TILES: u32 = 1 << 20;

/// The output's buffer id; input *k* is `FIRST_INPUT + k` (OA: "H14
/// channel contract … output = channel 4, input k = channel 5+k"; its
/// encoder parity suite covers one and two inputs, three is its inference,
/// and its add ran on hardware with ids 5, 6 and 4).
pub const OUTPUT_ID: u32 = 4;
/// The first input's buffer id.
pub const FIRST_INPUT: u32 = 5;
/// At most this many inputs (OA refuses more: "no receipt").
pub const MAX_INPUTS: u32 = 3;

/// The buffer id that names the constants (the kernel section) in the
/// operation record (OA: "tag 2 (kernel)").
pub const KERNEL_TAG: u32 = 2;

/// At most this many tasks (OA `ANE_M2_MAX_CALLS`, the derived build's
/// envelope).
pub const MAX_TASKS: usize = 128;

/// Task-stream register offsets a BAR reference may patch (OA
/// `TD_KDMA_LO`/`TD_KDMA_HI`, `TD_DST`, `TD_SRC_A`, `TD_SRC_B`).
pub mod reg {
    /// KernelDMA registers: `KDMA_LO..KDMA_HI`.
    pub const KDMA_LO: u32 = 0x1900;
    /// End of the KernelDMA registers.
    pub const KDMA_HI: u32 = 0x1a40;
    /// TileDMA destination base.
    pub const DST: u32 = 0x1508;
    /// TileDMA source A base.
    pub const SRC_A: u32 = 0x1110;
    /// TileDMA source B base.
    pub const SRC_B: u32 = 0x1128;
}

/// Why a file is not an H14 program this reader can build: the field, its
/// value and the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("H14 program: {field} = {value:#x}: {reason}")]
pub struct Error {
    /// The header field or structure at fault.
    pub field: &'static str,
    /// Its value (or the offending offset).
    pub value: u64,
    /// The rule it breaks.
    pub reason: &'static str,
}

fn err<T>(field: &'static str, value: u64, reason: &'static str) -> Result<T, Error> {
    Err(Error {
        field,
        value,
        reason,
    })
}

fn u32_at(b: &[u8], off: usize, field: &'static str) -> Result<u32, Error> {
    match off.checked_add(4).and_then(|e| b.get(off..e)) {
        Some(w) => Ok(u32::from_le_bytes([w[0], w[1], w[2], w[3]])),
        None => err(field, off as u64, "past the end of the data"),
    }
}

fn u64_at(b: &[u8], off: usize, field: &'static str) -> Result<u64, Error> {
    let lo = u32_at(b, off, field)?;
    let hi = u32_at(b, off + 4, field)?;
    Ok(u64::from(lo) | u64::from(hi) << 32)
}

/// The header's fields (offsets from the file's start; all little-endian).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// +0x00 u64: bytes after the header; must be the file's size minus
    /// [`HEADER`] (OA: "header payload size disagrees with file size").
    pub payload: u64,
    /// +0x08 u32: bytes of the first task (OA "firstTaskBytes", checked
    /// against the walked first task).
    pub first_task_bytes: u32,
    /// +0x0c u32: tasks in the stream (OA "taskCount", checked against
    /// the walk).
    pub task_count: u32,
    /// +0x10 u64: bytes of the task stream, at payload offset 0.
    pub task_stream_size: u64,
    /// +0x18 u64: bytes of the constants, at the payload's end.
    pub constants_size: u64,
    /// +0x20 u32: inputs (1 to [`MAX_INPUTS`]).
    pub input_count: u32,
    /// +0x24 u32: [`VERSION`].
    pub version: u32,
}

/// Whether the engine reads or writes a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// An input.
    Input,
    /// The output.
    Output,
}

/// One runtime buffer of the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Io {
    /// Its buffer id (the channel id; the EXEC binding's slot).
    pub buffer_id: u32,
    /// Input or output.
    pub dir: Dir,
    /// Its allocation: `tiles[buffer_id] << TILE_SHIFT` (header +0x28 +
    /// 4·id, OA "the lab builder's allocation_bytes").
    pub size: u64,
}

/// One task of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task {
    /// Byte offset in the task stream.
    pub offset: usize,
    /// Its length in words, header included.
    pub words: u32,
}

/// One operation-record binding: the firmware puts buffer `tag`'s address
/// into BAR slot `slot` (OA `struct ane_m2_ref`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ref {
    /// BAR slot (0..63).
    pub slot: u32,
    /// Buffer id: [`KERNEL_TAG`] or an io buffer's id.
    pub tag: u32,
}

/// An H14 program read from its container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// The header.
    pub header: Header,
    /// The inputs in ascending id, then the output.
    pub io: Vec<Io>,
    /// The tasks of the stream.
    pub tasks: Vec<Task>,
    /// The operation record's bindings, by slot.
    pub refs: Vec<Ref>,
    /// The sections, in id order: (id, bytes).
    pub sections: Vec<(u32, Vec<u8>)>,
}

/// Walks the task stream (OA `split_h14_tasks`): a zero length word is a
/// 16-byte filler frame; a task is at least [`shape::TASK_HEADER_WORDS`]
/// words, fits the stream, and ends on the next 16-byte boundary with zero
/// filler; bytes after the last task are zero.
pub fn split_tasks(stream: &[u8]) -> Result<Vec<Task>, Error> {
    let frame = shape::FRAME;
    let mut tasks = Vec::new();
    let mut off = 0usize;
    while off < stream.len() {
        if stream.len() - off < 4 {
            if stream[off..].iter().any(|&b| b != 0) {
                return err(
                    "task stream",
                    off as u64,
                    "nonzero bytes after the last task",
                );
            }
            break;
        }
        let words = shape::task_words(u32_at(stream, off, "task stream")?);
        if words == 0 {
            off = (off + frame).min(stream.len());
            continue;
        }
        if words < shape::TASK_HEADER_WORDS {
            return err(
                "task length",
                u64::from(words),
                "a task is shorter than the 8-word H14 task header",
            );
        }
        let bytes = words as usize * 4;
        if bytes > stream.len() - off {
            return err(
                "task length",
                u64::from(words),
                "a task runs past the end of the task stream",
            );
        }
        let end = (off + bytes).next_multiple_of(frame).min(stream.len());
        if stream[off + bytes..end].iter().any(|&b| b != 0) {
            return err(
                "task stream",
                (off + bytes) as u64,
                "nonzero bytes in the filler after a task",
            );
        }
        if tasks.len() == MAX_TASKS {
            return err(
                "task count",
                tasks.len() as u64 + 1,
                "more tasks than the 128 omarchy-ane's reader takes",
            );
        }
        tasks.push(Task { offset: off, words });
        off = end;
    }
    Ok(tasks)
}

/// One BAR reference record of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BarRef {
    slot: u32,
    reg: u32,
    /// The byte offset inside the bound buffer (payload words 1 and, when
    /// present, 2 as the high half; OA `check_bound_slots`).
    offset: u64,
}

/// The BAR reference records of one task (OA `refs_of_task`): records
/// start after the 8-word header (9 when word 7's low two bits are both
/// set); a record header with bit 31 set carries 1 + popcount(bits 30:15)
/// payload words, otherwise bits 20:15 + 1; a header with bit 31 clear and
/// bit 29 set is a BAR reference: slot in bits 28:23 (bit 28 set is
/// refused: the field's width is undecided), patched register (bits 14:0)
/// × 4.
fn bar_refs(task: &[u8]) -> Result<Vec<BarRef>, Error> {
    let words = task.len() / 4;
    let mut idx = if u32_at(task, 28, "task header")? & 3 == 3 {
        9
    } else {
        8
    };
    let mut out = Vec::new();
    while idx < words {
        let h = u32_at(task, idx * 4, "task record")?;
        let count = if h & 0x8000_0000 != 0 {
            1 + ((h >> 15) & 0xffff).count_ones() as usize
        } else {
            ((h >> 15) & 0x3f) as usize + 1
        };
        if idx + 1 + count > words {
            return err(
                "task record",
                u64::from(h),
                "a record declares more payload words than its task holds",
            );
        }
        if h & 0x8000_0000 == 0 && h & 0x2000_0000 != 0 {
            if h & 0x1000_0000 != 0 {
                return err(
                    "BAR reference",
                    u64::from(h),
                    "bit 28 set: the slot field's width is not known",
                );
            }
            let lo = u32_at(task, (idx + 1) * 4, "BAR reference")?;
            let hi = if count > 1 {
                u32_at(task, (idx + 2) * 4, "BAR reference")?
            } else {
                0
            };
            out.push(BarRef {
                slot: (h >> 23) & 0x3f,
                reg: (h & 0x7fff) * 4,
                offset: u64::from(lo) | u64::from(hi) << 32,
            });
        }
        idx += 1 + count;
    }
    Ok(out)
}

/// The buffer a BAR reference names, by the rule that ran on hardware
/// (OA `bar_ref_tag_legacy`; its add program ran bit-exact with the refs
/// it derives): KernelDMA → the constants; TileDMA destination → the
/// output; a TileDMA source at slot 0 or 1 → the constants, at slot 4 or
/// above → input 0 (source A) or 1 (source B); anything else refused.
fn tag_of(r: &BarRef) -> Result<u32, Error> {
    match r.reg {
        x if (reg::KDMA_LO..reg::KDMA_HI).contains(&x) => Ok(KERNEL_TAG),
        reg::DST => Ok(OUTPUT_ID),
        reg::SRC_A | reg::SRC_B if r.slot <= 1 => Ok(KERNEL_TAG),
        reg::SRC_A | reg::SRC_B if r.slot <= 3 => err(
            "BAR slot",
            u64::from(r.slot),
            "a TileDMA source at slot 2 or 3 collides with the section ids",
        ),
        reg::SRC_A => Ok(FIRST_INPUT),
        reg::SRC_B => Ok(FIRST_INPUT + 1),
        x => err(
            "BAR register",
            u64::from(x),
            "a BAR reference outside the known registers (sources 0x1110/0x1128, destination 0x1508, KernelDMA 0x1900..0x1a3f)",
        ),
    }
}

/// The operation record's bindings for the whole program (OA
/// `derive_refs` on the shapes it binds by the rule above): one binding per
/// slot across all tasks; a slot bound to two buffers, a matmul (two or
/// more source-A slots above 1) or a select (a source-B slot below a
/// source-A slot) program is refused, since their binding needs rules
/// this reader does not have. Every BAR offset must lie inside the bound
/// buffer (OA `check_bound_slots`).
fn derive_refs(
    stream: &[u8],
    tasks: &[Task],
    io: &[Io],
    constants: u64,
) -> Result<Vec<Ref>, Error> {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(bar_refs(
            &stream[t.offset..t.offset + t.words as usize * 4],
        )?);
    }
    let slots = |r: u32| {
        let mut v: Vec<u32> = all
            .iter()
            .filter(|b| b.reg == r && b.slot > 1)
            .map(|b| b.slot)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (a, b) = (slots(reg::SRC_A), slots(reg::SRC_B));
    if a.len() >= 2 {
        return err(
            "BAR slots",
            a.len() as u64,
            "a matmul program (two or more source-A slots): its operand binding is not derived by this reader",
        );
    }
    if let (Some(&blo), Some(&ahi)) = (b.first(), a.last()) {
        if blo < ahi {
            return err(
                "BAR slots",
                u64::from(blo),
                "a select program (a source-B slot below a source-A slot): its operand binding is not derived by this reader",
            );
        }
    }
    let mut refs: Vec<Ref> = Vec::new();
    for r in &all {
        let tag = tag_of(r)?;
        match refs.iter().find(|x| x.slot == r.slot) {
            Some(x) if x.tag != tag => {
                return err(
                    "BAR slot",
                    u64::from(r.slot),
                    "one slot names two buffers (a scratch merge this reader does not do)",
                )
            }
            Some(_) => {}
            None => refs.push(Ref { slot: r.slot, tag }),
        }
        let size = if tag == KERNEL_TAG {
            constants
        } else {
            match io.iter().find(|i| i.buffer_id == tag) {
                Some(i) => i.size,
                None => {
                    return err(
                        "BAR slot",
                        u64::from(r.slot),
                        "names an input the header does not declare",
                    )
                }
            }
        };
        if r.offset >= size {
            return err(
                "BAR offset",
                r.offset,
                "a BAR reference's offset lies outside its buffer",
            );
        }
    }
    if refs.is_empty() {
        return err("BAR slots", 0, "the task stream holds no BAR reference");
    }
    refs.sort_unstable();
    Ok(refs)
}

/// The tdprop section's block count (OA `tdprop_block_count`, the
/// firmware's own walk): stride 0x30 if the descriptor's first word has
/// bit 2 set, else 0x10; each block is ((its length word × 4) + 15)
/// rounded down to 16, and a zero length word fails; with bit 0 of the
/// first word set, the last block's word at +0x18 must be zero.
fn tdprop_blocks(desc: &[u8]) -> Result<u32, Error> {
    let w0 = u32_at(desc, 0, "descriptor")?;
    let stride = if w0 & 4 != 0 { 0x30 } else { 0x10 };
    let (mut cur, mut last, mut blocks) = (stride, 0usize, 0u32);
    while cur < desc.len() {
        let blk = shape::task_words(u32_at(desc, cur, "descriptor block")?);
        if blk == 0 {
            return err("descriptor block", cur as u64, "a zero block length word");
        }
        last = cur;
        cur += ((blk as usize) * 4 + 0xf) & 0x3ff0;
        blocks += 1;
    }
    if w0 & 1 != 0 && desc.len() > stride && u32_at(desc, last + 0x18, "descriptor block")? != 0 {
        return err(
            "descriptor block",
            last as u64,
            "the last block's tail word is not zero",
        );
    }
    if blocks == 0 {
        return err(
            "descriptor block",
            0,
            "no block: the firmware's walk would refuse it",
        );
    }
    Ok(blocks)
}

fn put32(v: &mut [u8], off: usize, x: u32) {
    v[off..off + 4].copy_from_slice(&x.to_le_bytes());
}

fn put64(v: &mut [u8], off: usize, x: u64) {
    v[off..off + 8].copy_from_slice(&x.to_le_bytes());
}

/// Section 1: a 0x208-byte header (u32 1 at +0, version 0x10 at +4, the
/// entry count at +0x204) and one 0x30-byte entry per buffer: u32 1, its
/// id, its direction (0 in, 1 out), its kind (1 in, 2 out) at +0x10, its
/// size (u64) at +0x20 and 0xffff at +0x28 (OA `emit_io_sections`).
fn generic(io: &[Io]) -> Vec<u8> {
    let mut g = vec![0u8; 0x208 + 0x30 * io.len()];
    put32(&mut g, 0, 1);
    put32(&mut g, 4, 0x10);
    put32(&mut g, 0x204, io.len() as u32);
    for (k, b) in io.iter().enumerate() {
        let e = 0x208 + 0x30 * k;
        put32(&mut g, e, 1);
        put32(&mut g, e + 4, b.buffer_id);
        put32(&mut g, e + 8, u32::from(b.dir == Dir::Output));
        put32(&mut g, e + 0x10, if b.dir == Dir::Output { 2 } else { 1 });
        put64(&mut g, e + 0x20, b.size);
        put32(&mut g, e + 0x28, 0xffff);
    }
    g
}

/// Section 4: u32 record count (1), then one 0x40c-byte record with the
/// binding count at +0x08 and the {slot, tag} pairs from +0x0c (OA
/// `emit_io_sections`; one record for the whole program is the form that
/// ran).
fn operation(refs: &[Ref]) -> Vec<u8> {
    let mut o = vec![0u8; 4 + 0x40c];
    put32(&mut o, 0, 1);
    put32(&mut o, 4 + 8, refs.len() as u32);
    for (j, r) in refs.iter().enumerate() {
        put32(&mut o, 4 + 0x0c + 8 * j, r.slot);
        put32(&mut o, 4 + 0x10 + 8 * j, r.tag);
    }
    o
}

/// Section 5: the fixed procedure every program that ran carried (OA
/// `emit_io_sections`, "mirrors the h14conv procedure.bin").
fn procedure() -> Vec<u8> {
    let mut p = vec![0u8; 0x38];
    put32(&mut p, 0, 1);
    put64(&mut p, 0x08, 0x18);
    put64(&mut p, 0x10, 0x20);
    put32(&mut p, 0x18, 1);
    put32(&mut p, 0x1c, 3);
    put32(&mut p, 0x28, 1);
    put32(&mut p, 0x30, 0xffff_ffff);
    put32(&mut p, 0x34, 4);
    p
}

/// Section 7: one segment over the whole descriptor: u32 1, the block
/// count at +0x0c, the descriptor's size (u64) at +0x20 (OA).
fn tdprop(blocks: u32, desc_size: u64) -> Vec<u8> {
    let mut t = vec![0u8; 40];
    put32(&mut t, 0, 1);
    put32(&mut t, 0x0c, blocks);
    put64(&mut t, 0x20, desc_size);
    t
}

/// Reads an H14 container into its sections, checking every field.
pub fn parse(file: &[u8]) -> Result<Program, Error> {
    if file.len() < HEADER {
        return err(
            "file size",
            file.len() as u64,
            "shorter than the 0x1000-byte H14 header",
        );
    }
    let h = Header {
        payload: u64_at(file, 0x00, "payload")?,
        first_task_bytes: u32_at(file, 0x08, "first task bytes")?,
        task_count: u32_at(file, 0x0c, "task count")?,
        task_stream_size: u64_at(file, 0x10, "task stream size")?,
        constants_size: u64_at(file, 0x18, "constants size")?,
        input_count: u32_at(file, 0x20, "input count")?,
        version: u32_at(file, 0x24, "version")?,
    };
    let payload_len = (file.len() - HEADER) as u64;
    if h.payload != payload_len {
        return err(
            "payload",
            h.payload,
            "differs from the file's size minus the header",
        );
    }
    if h.version != VERSION {
        return err(
            "version",
            u64::from(h.version),
            "not the 1 Apple's compiler emits",
        );
    }
    if !(1..=MAX_INPUTS).contains(&h.input_count) {
        return err("input count", u64::from(h.input_count), "outside 1..=3");
    }
    if h.constants_size > h.payload {
        return err(
            "constants size",
            h.constants_size,
            "larger than the payload",
        );
    }
    let const_off = h.payload - h.constants_size;
    if const_off % 64 != 0 {
        return err(
            "constants size",
            h.constants_size,
            "the constants do not start 64-byte aligned",
        );
    }
    if h.task_stream_size > const_off {
        return err(
            "task stream size",
            h.task_stream_size,
            "the task stream runs into the constants",
        );
    }
    let min = (shape::FRAME + shape::TASK_HEADER_WORDS as usize * 4) as u64;
    if h.task_stream_size < min {
        return err(
            "task stream size",
            h.task_stream_size,
            "shorter than the zero frame and one task header",
        );
    }
    let mut io = Vec::new();
    for k in 0..=h.input_count {
        let (id, dir) = if k < h.input_count {
            (FIRST_INPUT + k, Dir::Input)
        } else {
            (OUTPUT_ID, Dir::Output)
        };
        let tiles = u32_at(file, 0x28 + 4 * id as usize, "tile count")?;
        if tiles == 0 || tiles > MAX_TILES {
            return err(
                "tile count",
                u64::from(tiles),
                "zero or above 1 << 20 for an io buffer",
            );
        }
        io.push(Io {
            buffer_id: id,
            dir,
            size: u64::from(tiles) << TILE_SHIFT,
        });
    }
    // Both sizes are bounded by the payload, which is in memory.
    let stream = &file[HEADER..HEADER + h.task_stream_size as usize];
    let constants = &file[HEADER + const_off as usize..];
    if stream[..shape::FRAME].iter().any(|&b| b != 0) {
        return err(
            "task stream",
            0,
            "does not open with the 16-byte zero frame",
        );
    }
    let tasks = split_tasks(stream)?;
    if tasks.is_empty() {
        return err("task count", 0, "the task stream holds no task");
    }
    if tasks.len() != h.task_count as usize {
        return err(
            "task count",
            u64::from(h.task_count),
            "differs from the tasks in the stream",
        );
    }
    if h.first_task_bytes != tasks[0].words * 4 {
        return err(
            "first task bytes",
            u64::from(h.first_task_bytes),
            "differs from the first task's length",
        );
    }
    let refs = derive_refs(stream, &tasks, &io, h.constants_size)?;
    let blocks = tdprop_blocks(stream)?;
    let sections = vec![
        (1, generic(&io)),
        (2, constants.to_vec()),
        (shape::DESCRIPTOR, stream.to_vec()),
        (4, operation(&refs)),
        (5, procedure()),
        (7, tdprop(blocks, h.task_stream_size)),
    ];
    // The kernel's own shape rules: a program built here is never one
    // PROGRAM_CREATE refuses.
    let shape_err = |e: shape::NotH14| Error {
        field: "sections",
        value: 0,
        reason: match e {
            shape::NotH14::Sections { .. } => "not the six section ids the kernel takes",
            _ => "the descriptor fails the kernel's shape check",
        },
    };
    shape::check_ids(sections.iter().map(|(id, _)| *id)).map_err(shape_err)?;
    let head = &stream[..shape::DESCRIPTOR_HEAD.min(stream.len())];
    shape::check_descriptor_head(head, stream.len() as u64).map_err(shape_err)?;
    Ok(Program {
        header: h,
        io,
        tasks,
        refs,
        sections,
    })
}

impl Program {
    /// The sections laid out in one buffer (each at a 64-byte boundary)
    /// and their PROGRAM_CREATE records (offsets relative to its start).
    pub fn staging(&self) -> (Vec<u8>, Vec<uapi::Section>) {
        let mut bytes = Vec::new();
        let mut records = Vec::new();
        for (id, s) in &self.sections {
            bytes.resize(bytes.len().next_multiple_of(64), 0);
            records.push(uapi::Section {
                id: *id,
                flags: 0,
                offset: bytes.len() as u64,
                size: s.len() as u64,
            });
            bytes.extend_from_slice(s);
        }
        (bytes, records)
    }
}

/// Synthetic containers built from the format's rules above (no
/// Apple-compiled bytes), for tests: the library's, `ane-probe`'s and the
/// guest's. Their tasks carry only BAR references; they mean nothing to a
/// real firmware and are never run on hardware.
#[doc(hidden)]
pub mod synth {
    use super::*;

    /// A BAR reference record: header (one payload word) and the offset.
    pub fn bar(slot: u32, reg: u32, offset: u32) -> [u32; 2] {
        [(1 << 29) | (slot << 23) | (reg / 4), offset]
    }

    /// A task of `records` after the 8-word header.
    pub fn task(records: &[u32]) -> Vec<u32> {
        let words = 8 + records.len() as u32;
        let mut t = vec![shape::task_word0(words), 0, 0, 0, 0, 0, 0, 0];
        t.extend_from_slice(records);
        t
    }

    /// A container: `tasks` after the zero frame, `constants` bytes at the
    /// payload's 64-byte aligned end, `inputs` inputs, every io buffer
    /// `tiles` tiles.
    pub fn container(tasks: &[Vec<u32>], constants: usize, inputs: u32, tiles: u32) -> Vec<u8> {
        let mut stream = vec![0u8; shape::FRAME];
        for t in tasks {
            for w in t {
                stream.extend_from_slice(&w.to_le_bytes());
            }
            stream.resize(stream.len().next_multiple_of(16), 0);
        }
        let const_off = stream.len().next_multiple_of(64);
        let payload = const_off + constants;
        let mut f = vec![0u8; HEADER + payload];
        put64(&mut f, 0x00, payload as u64);
        put32(&mut f, 0x08, tasks[0].len() as u32 * 4);
        put32(&mut f, 0x0c, tasks.len() as u32);
        put64(&mut f, 0x10, stream.len() as u64);
        put64(&mut f, 0x18, constants as u64);
        put32(&mut f, 0x20, inputs);
        put32(&mut f, 0x24, VERSION);
        for id in 4..8 {
            put32(&mut f, 0x28 + 4 * id, tiles);
        }
        f[HEADER..HEADER + stream.len()].copy_from_slice(&stream);
        for (i, b) in f[HEADER + const_off..].iter_mut().enumerate() {
            *b = i as u8 | 1;
        }
        f
    }

    /// The add program's shape: source A at slot 4, destination at slot 5,
    /// source B at slot 6 (the bindings omarchy-ane's add ran with).
    pub fn add() -> Vec<u8> {
        let r: Vec<u32> = [
            bar(4, reg::SRC_A, 0),
            bar(5, reg::DST, 0),
            bar(6, reg::SRC_B, 0),
        ]
        .concat();
        container(&[task(&r)], 64, 2, 2)
    }
}

#[cfg(test)]
mod tests;
