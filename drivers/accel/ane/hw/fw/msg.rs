// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Firmware commands on the IO channel: encoders, decoders and the program
//! digest.
//!
//! The authority is the hardware record: joshuaswarren/omarchy-ane ("OA"),
//! whose T6021 driver ran inference on the 13.5 firmware. Citations name
//! OA files; `RT` is `ane/t6021/ane_t6021_rtclient_main.c` in its newest
//! stored version (104,569 bytes; the index shows no commit for it, the
//! nearest commit-addressable version is `23f4501bc0beeec01dd6744df9fed385b5bcedd9`),
//! `AH` is `ane/t6021/ane_t6021.h` at `c2b7408b621c7e5a19ea39efaf513170bfebaaba`
//! (opcodes also at `006f99f94e7b8ade510c982b6143a4ac7c132747`).
//!
//! Facts: every command starts with the CSNE header `u32 0; u16 opcode
//! @+4; u8 flags; u8 rsvd` (AH, the CSNE header struct); the firmware
//! answers in the same buffer and the driver accepts the reply only when
//! the opcode at +4 is echoed and the `u16` at +6 is 0 (RT,
//! `ane_rtclient_legacy_exchange`). The layouts:
//!
//! | opcode | command | bytes | fields | source |
//! |---|---|---|---|---|
//! | 0x03 | CONFIG_GET | 0x10 | zeroed; reply: `u32` +0x08 nonzero, else no device | RT probe |
//! | 0x200 | PROGRAM_LOAD | 0x1C0 | section record `id` at `+0x08 + (id−1)·0x30`: `+0 u32 1`, `+4 id`, `+0x18 u64 iova`, `+0x20 u64 size`; absent records zero; ProgramId `0xFFFFFFFF` at +0x1B8, replaced by the reply | RT `ane_rtclient_load_program`; AH |
//! | 0x202 | PROC_CREATE | 0x10 | program `u32` +0x08, `0xFFFFFFFF` at +0x0C, replaced by the process id | RT; AH |
//! | 0x204 | PROCEDURE_CALL | 0x60 + n·0x30 | program `u32` +0x08, process `u32` +0x0C, `u64 0` +0x10, priority `u32` +0x18 (2..=7), cookie `u64` +0x20, count `u32` +0x28; record `i` at `+0x60 + i·0x30`: `+0 u32 1`, `+4 buffer id`, `+8 type` (0 in, 1 out), `+0x18 u64 iova`, `+0x20 u64 size` | RT; AH |
//! | 0x1F | CH_PROPERTY_WRITE | 0x14 | `u32` channel 0 +0x08, `u32` property +0x0C, `u32` value +0x10 | RT `fw_perf_mode` |
//!
//! - Property 0x10aa with value 1 is the only write OA ever sent, and the
//!   only one known safe ([`PERF_MODE`]); nothing else is sent.
//! - The CALL cookie comes back in the call's IO_T2H events (RT, comment of
//!   its cookie constant). OA always sends 0xADD0 ([`CALL_COOKIE`]), and
//!   no other value ever ran (hw-2 row 30), so the driver sends only that.
//!   Calls are told apart as in OA: one call at a time (the transport's
//!   lock is held from the CALL to its finish event), and finish events
//!   left from earlier calls are drained and forgotten before each CALL.
//! - Program unload: OA has no unload path and states that the firmware
//!   never frees programs or processes; its table holds 256 programs and
//!   the 257th LOAD answered a protocol error and quarantined the device
//!   (RT, the program cache's comment; receipt
//!   `receipts/2026-09-29-t6021-installed-path/README.md`). OA caps the
//!   driver at 250 ([`MAX_PROGRAMS`]). 0x201 is only named
//!   ([`OP_PROGRAM_UNLOAD`]) so that nothing sends it by mistake.
//!
//! Still not settled by the record:
//!
//! - the widths of PROCEDURE_CALL's priority and count: written as `u32`
//!   in 8-byte slots (the neighbours are `u64`), read back as `u64`, so both
//!   readings give the same bytes; the firmware's own range for the
//!   priority (AH's comments disagree, 2..=7 vs 8..=15; OA uses 2);
//! - the meaning of the header's flags byte (+6 in a command; OA marks it
//!   an inference) — the driver treats +6 as a `u16` status in replies;
//! - the byte order of the digest's `{u64 id, u64 size}`: little-endian,
//!   the order of OA's in-memory header on arm64.
//!
//! The program digest keys the driver's program cache: SHA-256 over, for
//! each section in the order given, its `{u64 id, u64 size}` then its bytes
//! (RT, the LOAD's digest loop).

use super::bytes::{put_u16, put_u32, put_u64, u16_at, u32_at, u64_at};
#[cfg(not(ane_kernel))]
use super::sha256::Sha256;
use super::sha256::{Hasher, DIGEST_LEN};

/// The PROCEDURE_CALL cookie: the only value that ran on hardware (OA-RT
/// `#define ANE_CALL_COOKIE 0xADD0`, every call of OA-IP on T6021).
pub const CALL_COOKIE: u64 = 0xADD0;

/// Bytes of the CSNE header.
pub const HEADER_LEN: usize = 8;
/// Bytes of the host's command buffer; no message may be larger.
pub const MAX_MESSAGE: usize = 0x4000;

/// CONFIG_GET.
pub const OP_CONFIG_GET: u16 = 0x03;
/// CH_PROPERTY_WRITE.
pub const OP_CH_PROPERTY_WRITE: u16 = 0x1f;
/// PROGRAM_LOAD (`CSNE_CMD_LOAD_PROGRAM`): 0x200, as omarchy-ane's
/// `ane/t6021/ane_t6021.h` at `006f99f94e7b8ade510c982b6143a4ac7c132747`
/// sends it to the firmware that ran inference on T6021. 0x201 is
/// [`OP_PROGRAM_UNLOAD`].
pub const OP_PROGRAM_LOAD: u16 = 0x200;
/// `CSNE_CMD_UNLOAD_PROGRAM` in the firmware's command table. Never sent:
/// OA has no unload path and the firmware never frees a program (see the
/// module documentation); named only so that no caller sends it by
/// mistake (the driver once sent its LOAD as 0x201).
pub const OP_PROGRAM_UNLOAD: u16 = 0x201;
/// PROC_CREATE.
pub const OP_PROC_CREATE: u16 = 0x202;
/// PROCEDURE_CALL.
pub const OP_PROCEDURE_CALL: u16 = 0x204;

/// Bytes of CONFIG_GET.
pub const CONFIG_GET_LEN: usize = 0x10;
/// Bytes of PROGRAM_LOAD.
pub const PROGRAM_LOAD_LEN: usize = 0x1c0;
/// Bytes of PROC_CREATE.
pub const PROC_CREATE_LEN: usize = 0x10;
/// Bytes of PROCEDURE_CALL before its records.
pub const CALL_HEADER_LEN: usize = 0x60;
/// Bytes of one PROCEDURE_CALL record.
pub const CALL_RECORD_LEN: usize = 0x30;
/// Bytes of CH_PROPERTY_WRITE.
pub const PROPERTY_WRITE_LEN: usize = 0x14;

/// Section ids run from 1 to this.
pub const MAX_SECTIONS: usize = 9;
/// Offset of section record 1 in PROGRAM_LOAD.
const LOAD_RECORDS: usize = 0x08;
/// Bytes of one section record.
const LOAD_RECORD_LEN: usize = 0x30;
/// Offset of the ProgramId in PROGRAM_LOAD and its reply.
pub const LOAD_PROGRAM_ID: usize = 0x1b8;
/// Offset of the process id in PROC_CREATE and its reply.
pub const PROC_ID: usize = 0x0c;
/// The "no id yet" value of ProgramId and process id.
pub const ID_PLACEHOLDER: u32 = 0xffff_ffff;
/// The most io records of a PROCEDURE_CALL.
pub const MAX_IO: usize = 64;
/// The lowest PROCEDURE_CALL priority.
pub const MIN_PRIORITY: u32 = 2;
/// The highest PROCEDURE_CALL priority.
pub const MAX_PRIORITY: u32 = 7;

/// Channel, property and value of the `fw_perf_mode` property write, the
/// only one known safe.
pub const PERF_MODE: (u32, u32, u32) = (0, 0x10aa, 1);

/// Programs the firmware's table holds; a LOAD beyond them fails.
pub const FW_PROGRAM_TABLE: u32 = 256;
/// Programs the driver keeps loaded (OA's cap, below the table).
pub const MAX_PROGRAMS: usize = 250;

/// Why a message could not be built or was not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgError {
    /// The buffer is too small for the message.
    Buffer {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The first header word is not zero.
    HeaderWord {
        /// Its value.
        found: u32,
    },
    /// Not the expected opcode.
    Opcode {
        /// The opcode found.
        found: u16,
        /// The opcode wanted.
        expected: u16,
    },
    /// The firmware answered with a nonzero status.
    Status {
        /// The opcode.
        opcode: u16,
        /// The status.
        status: u16,
    },
    /// A message with a length its opcode cannot have.
    Length {
        /// Bytes found.
        found: usize,
    },
    /// Not 1..=9 sections.
    SectionCount {
        /// Sections given.
        count: usize,
    },
    /// A section id outside 1..=9.
    SectionId {
        /// The id.
        id: u32,
    },
    /// A section id given twice.
    DuplicateSection {
        /// The id.
        id: u32,
    },
    /// A malformed section record in a PROGRAM_LOAD.
    SectionRecord {
        /// Record slot (id − 1).
        slot: usize,
    },
    /// Not 1..=64 io records.
    IoCount {
        /// Records given.
        count: u64,
    },
    /// A priority outside 2..=7.
    Priority {
        /// The priority.
        priority: u64,
    },
    /// A malformed io record in a PROCEDURE_CALL.
    IoRecord {
        /// Record index.
        index: usize,
    },
    /// A reserved field that must be zero is not.
    Reserved {
        /// Its offset.
        offset: usize,
    },
    /// The reply's id is still the placeholder: the firmware refused.
    NoId,
    /// CONFIG_GET answered a zero configuration word.
    NoConfig,
}

/// A decoded CSNE header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The opcode.
    pub opcode: u16,
    /// In a reply, the status (0 = success); in a command, flags and
    /// reserved (0).
    pub status: u16,
}

/// One program section, as PROGRAM_LOAD carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectionRef {
    /// Section id, 1..=9.
    pub id: u32,
    /// Its device address.
    pub iova: u64,
    /// Its bytes.
    pub size: u64,
}

/// The direction of a PROCEDURE_CALL buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum IoKind {
    /// The engine reads it.
    #[default]
    Input = 0,
    /// The engine writes it.
    Output = 1,
}

/// One PROCEDURE_CALL buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoRef {
    /// The program's buffer id (an ANEC channel id).
    pub buffer_id: u32,
    /// Input or output.
    pub kind: IoKind,
    /// Its device address.
    pub iova: u64,
    /// Its bytes.
    pub size: u64,
}

/// The fixed part of a PROCEDURE_CALL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallArgs {
    /// ProgramId from PROGRAM_LOAD.
    pub program: u32,
    /// Process id from PROC_CREATE.
    pub process: u32,
    /// 2..=7.
    pub priority: u32,
    /// Echoed in the dispatch and finish events.
    pub cookie: u64,
}

/// A decoded PROCEDURE_CALL header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCmd {
    /// Program, process, priority and cookie.
    pub args: CallArgs,
    /// Number of io records (1..=64).
    pub count: usize,
}

/// A decoded PROGRAM_LOAD: the sections in id order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadCmd {
    /// Only the first `count` are used.
    pub table: [SectionRef; MAX_SECTIONS],
    /// Number of sections.
    pub count: usize,
}

impl LoadCmd {
    /// The sections.
    pub fn sections(&self) -> &[SectionRef] {
        self.table.get(..self.count).unwrap_or(&[])
    }
}

/// Zeroes `out[..len]` and writes a header, or says how much is missing.
fn start(out: &mut [u8], len: usize, opcode: u16) -> Result<&mut [u8], MsgError> {
    let have = out.len();
    let msg = out
        .get_mut(..len)
        .ok_or(MsgError::Buffer { need: len, have })?;
    msg.fill(0);
    put_u16(msg, 4, opcode).ok_or(MsgError::Buffer { need: len, have })?;
    Ok(msg)
}

/// Maps a failed field write (impossible once [`start`] succeeded) to an
/// error.
fn field(r: Option<()>, len: usize) -> Result<(), MsgError> {
    r.ok_or(MsgError::Buffer { need: len, have: 0 })
}

/// Encodes CONFIG_GET; returns its length.
pub fn encode_config_get(out: &mut [u8]) -> Result<usize, MsgError> {
    start(out, CONFIG_GET_LEN, OP_CONFIG_GET)?;
    Ok(CONFIG_GET_LEN)
}

/// Checks a section list: 1..=9 sections, ids 1..=9, no id twice.
pub fn check_sections(sections: &[SectionRef]) -> Result<(), MsgError> {
    if sections.is_empty() || sections.len() > MAX_SECTIONS {
        return Err(MsgError::SectionCount {
            count: sections.len(),
        });
    }
    let mut seen = 0u16;
    for s in sections {
        if s.id == 0 || s.id as usize > MAX_SECTIONS {
            return Err(MsgError::SectionId { id: s.id });
        }
        let bit = 1u16 << s.id;
        if seen & bit != 0 {
            return Err(MsgError::DuplicateSection { id: s.id });
        }
        seen |= bit;
    }
    Ok(())
}

/// Offset of the record of section `id` (1..=9).
fn load_record(id: u32) -> usize {
    LOAD_RECORDS + (id as usize).saturating_sub(1) * LOAD_RECORD_LEN
}

/// Encodes PROGRAM_LOAD; returns its length.
pub fn encode_program_load(out: &mut [u8], sections: &[SectionRef]) -> Result<usize, MsgError> {
    check_sections(sections)?;
    let len = PROGRAM_LOAD_LEN;
    let msg = start(out, len, OP_PROGRAM_LOAD)?;
    for s in sections {
        let r = load_record(s.id);
        field(put_u32(msg, r, 1), len)?;
        field(put_u32(msg, r + 4, s.id), len)?;
        field(put_u64(msg, r + 0x18, s.iova), len)?;
        field(put_u64(msg, r + 0x20, s.size), len)?;
    }
    field(put_u32(msg, LOAD_PROGRAM_ID, ID_PLACEHOLDER), len)?;
    Ok(len)
}

/// Encodes PROC_CREATE for `program`; returns its length.
pub fn encode_proc_create(out: &mut [u8], program: u32) -> Result<usize, MsgError> {
    let len = PROC_CREATE_LEN;
    let msg = start(out, len, OP_PROC_CREATE)?;
    field(put_u32(msg, 0x08, program), len)?;
    field(put_u32(msg, PROC_ID, ID_PLACEHOLDER), len)?;
    Ok(len)
}

/// Bytes of a PROCEDURE_CALL with `count` records.
pub const fn call_len(count: usize) -> usize {
    CALL_HEADER_LEN + count * CALL_RECORD_LEN
}

/// Encodes PROCEDURE_CALL; returns its length.
pub fn encode_procedure_call(
    out: &mut [u8],
    args: &CallArgs,
    io: &[IoRef],
) -> Result<usize, MsgError> {
    if io.is_empty() || io.len() > MAX_IO {
        return Err(MsgError::IoCount {
            count: io.len() as u64,
        });
    }
    if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&args.priority) {
        return Err(MsgError::Priority {
            priority: u64::from(args.priority),
        });
    }
    let len = call_len(io.len());
    let msg = start(out, len, OP_PROCEDURE_CALL)?;
    field(put_u32(msg, 0x08, args.program), len)?;
    field(put_u32(msg, 0x0c, args.process), len)?;
    field(put_u32(msg, 0x18, args.priority), len)?;
    field(put_u64(msg, 0x20, args.cookie), len)?;
    field(put_u32(msg, 0x28, io.len() as u32), len)?;
    for (i, r) in io.iter().enumerate() {
        let o = CALL_HEADER_LEN + i * CALL_RECORD_LEN;
        field(put_u32(msg, o, 1), len)?;
        field(put_u32(msg, o + 4, r.buffer_id), len)?;
        field(put_u32(msg, o + 8, r.kind as u32), len)?;
        field(put_u64(msg, o + 0x18, r.iova), len)?;
        field(put_u64(msg, o + 0x20, r.size), len)?;
    }
    Ok(len)
}

/// Encodes CH_PROPERTY_WRITE; returns its length.
pub fn encode_property_write(
    out: &mut [u8],
    channel: u32,
    property: u32,
    value: u32,
) -> Result<usize, MsgError> {
    let len = PROPERTY_WRITE_LEN;
    let msg = start(out, len, OP_CH_PROPERTY_WRITE)?;
    field(put_u32(msg, 0x08, channel), len)?;
    field(put_u32(msg, 0x0c, property), len)?;
    field(put_u32(msg, 0x10, value), len)?;
    Ok(len)
}

/// Reads a message's header; the first word must be zero.
pub fn header(buf: &[u8]) -> Result<Header, MsgError> {
    let short = MsgError::Buffer {
        need: HEADER_LEN,
        have: buf.len(),
    };
    let word0 = u32_at(buf, 0).ok_or(short)?;
    if word0 != 0 {
        return Err(MsgError::HeaderWord { found: word0 });
    }
    Ok(Header {
        opcode: u16_at(buf, 4).ok_or(short)?,
        status: u16_at(buf, 6).ok_or(short)?,
    })
}

/// Checks a reply as the record does: the expected opcode at +4 and
/// status 0 at +6. Its first word is not judged (the record never looks at
/// it, so a value it did not see must not fail a command).
pub fn check_reply(buf: &[u8], opcode: u16) -> Result<(), MsgError> {
    match reply_status(buf, opcode)? {
        0 => Ok(()),
        status => Err(MsgError::Status { opcode, status }),
    }
}

/// The status at +6 of a reply whose opcode at +4 is `opcode`; a
/// different opcode (the reply is not the command's) is an error.
pub fn reply_status(buf: &[u8], opcode: u16) -> Result<u16, MsgError> {
    let short = MsgError::Buffer {
        need: HEADER_LEN,
        have: buf.len(),
    };
    let found = u16_at(buf, 4).ok_or(short)?;
    if found != opcode {
        return Err(MsgError::Opcode {
            found,
            expected: opcode,
        });
    }
    u16_at(buf, 6).ok_or(short)
}

/// A `u32` of a message that must be at least `need` bytes long.
fn word(buf: &[u8], off: usize, need: usize) -> Result<u32, MsgError> {
    u32_at(buf, off).ok_or(MsgError::Buffer {
        need,
        have: buf.len(),
    })
}

/// A `u64` of a message that must be at least `need` bytes long.
fn dword(buf: &[u8], off: usize, need: usize) -> Result<u64, MsgError> {
    u64_at(buf, off).ok_or(MsgError::Buffer {
        need,
        have: buf.len(),
    })
}

/// Decodes a CONFIG_GET reply: its configuration word, which must be
/// nonzero (else the driver registers no device).
pub fn config_get_reply(buf: &[u8]) -> Result<u32, MsgError> {
    check_reply(buf, OP_CONFIG_GET)?;
    match word(buf, 0x08, CONFIG_GET_LEN)? {
        0 => Err(MsgError::NoConfig),
        w => Ok(w),
    }
}

/// Decodes a PROGRAM_LOAD reply: the ProgramId.
pub fn program_load_reply(buf: &[u8]) -> Result<u32, MsgError> {
    check_reply(buf, OP_PROGRAM_LOAD)?;
    match word(buf, LOAD_PROGRAM_ID, PROGRAM_LOAD_LEN)? {
        ID_PLACEHOLDER => Err(MsgError::NoId),
        id => Ok(id),
    }
}

/// Decodes a PROC_CREATE reply: the process id.
pub fn proc_create_reply(buf: &[u8]) -> Result<u32, MsgError> {
    check_reply(buf, OP_PROC_CREATE)?;
    match word(buf, PROC_ID, PROC_CREATE_LEN)? {
        ID_PLACEHOLDER => Err(MsgError::NoId),
        id => Ok(id),
    }
}

/// Checks a command's header against `opcode` and its length.
fn command(buf: &[u8], opcode: u16, len: usize) -> Result<(), MsgError> {
    let h = header(buf)?;
    if h.opcode != opcode {
        return Err(MsgError::Opcode {
            found: h.opcode,
            expected: opcode,
        });
    }
    if h.status != 0 {
        return Err(MsgError::Reserved { offset: 6 });
    }
    if buf.len() < len {
        return Err(MsgError::Length { found: buf.len() });
    }
    Ok(())
}

/// Decodes a PROGRAM_LOAD command (the firmware side).
pub fn decode_program_load(buf: &[u8]) -> Result<LoadCmd, MsgError> {
    let len = PROGRAM_LOAD_LEN;
    command(buf, OP_PROGRAM_LOAD, len)?;
    let mut cmd = LoadCmd::default();
    for slot in 0..MAX_SECTIONS {
        let id = slot as u32 + 1;
        let r = load_record(id);
        match word(buf, r, len)? {
            0 => continue,
            1 => {}
            _ => return Err(MsgError::SectionRecord { slot }),
        }
        if word(buf, r + 4, len)? != id {
            return Err(MsgError::SectionRecord { slot });
        }
        let s = SectionRef {
            id,
            iova: dword(buf, r + 0x18, len)?,
            size: dword(buf, r + 0x20, len)?,
        };
        let dst = cmd
            .table
            .get_mut(cmd.count)
            .ok_or(MsgError::SectionCount { count: cmd.count })?;
        *dst = s;
        cmd.count += 1;
    }
    check_sections(cmd.sections())?;
    Ok(cmd)
}

/// Decodes a PROC_CREATE command: the program.
pub fn decode_proc_create(buf: &[u8]) -> Result<u32, MsgError> {
    command(buf, OP_PROC_CREATE, PROC_CREATE_LEN)?;
    word(buf, 0x08, PROC_CREATE_LEN)
}

/// Decodes the header of a PROCEDURE_CALL command; the records follow with
/// [`decode_call_record`]. The buffer must hold every record.
pub fn decode_procedure_call(buf: &[u8]) -> Result<CallCmd, MsgError> {
    let cmd = decode_call_header(buf)?;
    if buf.len() < call_len(cmd.count) {
        return Err(MsgError::Length { found: buf.len() });
    }
    Ok(cmd)
}

/// Decodes the first [`CALL_HEADER_LEN`] bytes of a PROCEDURE_CALL (for a
/// reader that fetches the records one by one, see [`decode_io_record`]).
pub fn decode_call_header(buf: &[u8]) -> Result<CallCmd, MsgError> {
    command(buf, OP_PROCEDURE_CALL, CALL_HEADER_LEN)?;
    let need = CALL_HEADER_LEN;
    if dword(buf, 0x10, need)? != 0 {
        return Err(MsgError::Reserved { offset: 0x10 });
    }
    let priority = dword(buf, 0x18, need)?;
    if priority < u64::from(MIN_PRIORITY) || priority > u64::from(MAX_PRIORITY) {
        return Err(MsgError::Priority { priority });
    }
    let count = dword(buf, 0x28, need)?;
    if count == 0 || count > MAX_IO as u64 {
        return Err(MsgError::IoCount { count });
    }
    let count = count as usize;
    Ok(CallCmd {
        args: CallArgs {
            program: word(buf, 0x08, need)?,
            process: word(buf, 0x0c, need)?,
            priority: priority as u32,
            cookie: dword(buf, 0x20, need)?,
        },
        count,
    })
}

/// Decodes io record `index` of a PROCEDURE_CALL.
pub fn decode_call_record(buf: &[u8], index: usize) -> Result<IoRef, MsgError> {
    let bad = MsgError::IoRecord { index };
    let o = index
        .checked_mul(CALL_RECORD_LEN)
        .and_then(|x| x.checked_add(CALL_HEADER_LEN))
        .ok_or(bad)?;
    let end = o.checked_add(CALL_RECORD_LEN).ok_or(bad)?;
    decode_io_record(buf.get(o..end).ok_or(bad)?, index)
}

/// Decodes one io record (the [`CALL_RECORD_LEN`] bytes of record `index`).
pub fn decode_io_record(rec: &[u8], index: usize) -> Result<IoRef, MsgError> {
    let bad = MsgError::IoRecord { index };
    if rec.len() != CALL_RECORD_LEN || u32_at(rec, 0) != Some(1) {
        return Err(bad);
    }
    let kind = match u32_at(rec, 8) {
        Some(0) => IoKind::Input,
        Some(1) => IoKind::Output,
        _ => return Err(bad),
    };
    Ok(IoRef {
        buffer_id: u32_at(rec, 4).ok_or(bad)?,
        kind,
        iova: u64_at(rec, 0x18).ok_or(bad)?,
        size: u64_at(rec, 0x20).ok_or(bad)?,
    })
}

/// Decodes a CH_PROPERTY_WRITE command: channel, property, value.
pub fn decode_property_write(buf: &[u8]) -> Result<(u32, u32, u32), MsgError> {
    let len = PROPERTY_WRITE_LEN;
    command(buf, OP_CH_PROPERTY_WRITE, len)?;
    Ok((
        word(buf, 8, len)?,
        word(buf, 0x0c, len)?,
        word(buf, 0x10, len)?,
    ))
}

/// Why a streamed digest is inconsistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestError {
    /// More bytes were fed than the current section announced.
    Overrun,
    /// A section was started (or the digest finished) before the previous
    /// section's bytes were all fed.
    Incomplete {
        /// Bytes still missing.
        missing: u64,
    },
}

/// The program digest, streamed: [`Self::section`] announces each section's
/// id and size, then [`Self::update`] feeds exactly that many bytes (in as
/// many pieces as convenient, e.g. the seed's 1 MiB chunks). `H` computes
/// the SHA-256 (the kernel's crypto library in the module).
#[derive(Clone, Debug, Default)]
pub struct ProgramDigest<H> {
    /// The hash so far.
    sha: H,
    /// Bytes the current section still expects.
    remaining: u64,
}

impl<H: Hasher> ProgramDigest<H> {
    /// A digest over no section yet, computed with `sha` (fresh).
    pub const fn new(sha: H) -> Self {
        ProgramDigest { sha, remaining: 0 }
    }

    /// Starts a section: hashes `{u64 id, u64 size}`.
    pub fn section(&mut self, id: u64, size: u64) -> Result<(), DigestError> {
        if self.remaining != 0 {
            return Err(DigestError::Incomplete {
                missing: self.remaining,
            });
        }
        self.sha.update(&id.to_le_bytes());
        self.sha.update(&size.to_le_bytes());
        self.remaining = size;
        Ok(())
    }

    /// Feeds bytes of the current section.
    pub fn update(&mut self, bytes: &[u8]) -> Result<(), DigestError> {
        let n = bytes.len() as u64;
        if n > self.remaining {
            return Err(DigestError::Overrun);
        }
        self.sha.update(bytes);
        self.remaining -= n;
        Ok(())
    }

    /// The digest, once every announced byte was fed.
    pub fn finish(self) -> Result<[u8; DIGEST_LEN], DigestError> {
        if self.remaining != 0 {
            return Err(DigestError::Incomplete {
                missing: self.remaining,
            });
        }
        Ok(self.sha.finalize())
    }
}

/// The digest of sections given as `(id, bytes)`, in the order given
/// (host build: the module streams [`ProgramDigest`] with the kernel's
/// hash).
#[cfg(not(ane_kernel))]
pub fn program_digest(sections: &[(u32, &[u8])]) -> [u8; DIGEST_LEN] {
    let mut sha = Sha256::new();
    for (id, bytes) in sections {
        sha.update(&u64::from(*id).to_le_bytes());
        sha.update(&(bytes.len() as u64).to_le_bytes());
        sha.update(bytes);
    }
    sha.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(id: u32) -> SectionRef {
        SectionRef {
            id,
            iova: 0x10_0000 * u64::from(id),
            size: 0x100 + u64::from(id),
        }
    }

    #[test]
    fn config_get() {
        let mut b = [0xaau8; 0x20];
        assert_eq!(encode_config_get(&mut b), Ok(0x10));
        assert_eq!(&b[..8], &[0, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(b[0x10], 0xaa, "nothing written past the message");
        assert_eq!(config_get_reply(&b[..0x10]), Err(MsgError::NoConfig));
        b[8] = 0x14;
        assert_eq!(config_get_reply(&b[..0x10]), Ok(0x14));
        b[6] = 1;
        assert_eq!(
            config_get_reply(&b),
            Err(MsgError::Status {
                opcode: 3,
                status: 1
            })
        );
        assert_eq!(
            encode_config_get(&mut [0u8; 15]),
            Err(MsgError::Buffer { need: 16, have: 15 })
        );
    }

    #[test]
    fn program_load_layout() {
        let mut b = [0u8; PROGRAM_LOAD_LEN];
        let secs = [sec(3), sec(1), sec(9)];
        assert_eq!(encode_program_load(&mut b, &secs), Ok(0x1c0));
        assert_eq!(u16_at(&b, 4), Some(OP_PROGRAM_LOAD));
        // The record's value, not the unload command next to it.
        assert_eq!(u16_at(&b, 4), Some(0x200));
        // Record of id 3 at 0x08 + 2 * 0x30.
        assert_eq!(u32_at(&b, 0x68), Some(1));
        assert_eq!(u32_at(&b, 0x6c), Some(3));
        assert_eq!(u64_at(&b, 0x80), Some(0x30_0000));
        assert_eq!(u64_at(&b, 0x88), Some(0x103));
        // Id 9 is the last record, just before the ProgramId.
        assert_eq!(u32_at(&b, 0x08 + 8 * 0x30 + 4), Some(9));
        assert_eq!(u32_at(&b, 0x1b8), Some(ID_PLACEHOLDER));
        let cmd = decode_program_load(&b).unwrap();
        assert_eq!(cmd.sections(), &[sec(1), sec(3), sec(9)], "id order");
        assert_eq!(program_load_reply(&b), Err(MsgError::NoId));
        b[0x1b8..0x1bc].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(program_load_reply(&b), Ok(7));
    }

    #[test]
    fn program_load_rejects() {
        let mut b = [0u8; PROGRAM_LOAD_LEN];
        assert_eq!(
            encode_program_load(&mut b, &[]),
            Err(MsgError::SectionCount { count: 0 })
        );
        let ten = [sec(1); 10];
        assert_eq!(
            encode_program_load(&mut b, &ten),
            Err(MsgError::SectionCount { count: 10 })
        );
        assert_eq!(
            encode_program_load(&mut b, &[sec(0)]),
            Err(MsgError::SectionId { id: 0 })
        );
        assert_eq!(
            encode_program_load(&mut b, &[sec(10)]),
            Err(MsgError::SectionId { id: 10 })
        );
        assert_eq!(
            encode_program_load(&mut b, &[sec(2), sec(2)]),
            Err(MsgError::DuplicateSection { id: 2 })
        );
        assert!(matches!(
            encode_program_load(&mut [0u8; 0x1bf], &[sec(1)]),
            Err(MsgError::Buffer { .. })
        ));
        encode_program_load(&mut b, &[sec(2)]).unwrap();
        let mut bad = b;
        bad[0x38 + 4] = 5; // record of id 2 claims id 5
        assert_eq!(
            decode_program_load(&bad),
            Err(MsgError::SectionRecord { slot: 1 })
        );
        let mut bad = b;
        bad[0x08] = 2; // present flag other than 0/1
        assert_eq!(
            decode_program_load(&bad),
            Err(MsgError::SectionRecord { slot: 0 })
        );
        let mut empty = b;
        empty[0x38] = 0;
        assert_eq!(
            decode_program_load(&empty),
            Err(MsgError::SectionCount { count: 0 })
        );
        assert_eq!(
            decode_program_load(&b[..0x100]),
            Err(MsgError::Length { found: 0x100 })
        );
    }

    #[test]
    fn proc_create() {
        let mut b = [0u8; 0x10];
        assert_eq!(encode_proc_create(&mut b, 5), Ok(0x10));
        assert_eq!(u16_at(&b, 4), Some(0x202));
        assert_eq!(decode_proc_create(&b), Ok(5));
        assert_eq!(proc_create_reply(&b), Err(MsgError::NoId));
        b[0x0c..0x10].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(proc_create_reply(&b), Ok(9));
        assert_eq!(
            proc_create_reply(&[0u8; 0x10]),
            Err(MsgError::Opcode {
                found: 0,
                expected: 0x202
            })
        );
        // The record never judges a reply's first word.
        b[0] = 1;
        assert_eq!(proc_create_reply(&b), Ok(9));
        // The model still wants the host's commands to start with zero.
        assert_eq!(header(&b), Err(MsgError::HeaderWord { found: 1 }));
    }

    /// The kernel encodes every PROCEDURE_CALL into one buffer kept with
    /// the firmware state (kernel-2 N15: not on the stack, no allocation
    /// per call): what a call sends must not depend on what the buffer
    /// held before, a longer call with every binding included.
    #[test]
    fn procedure_call_into_a_reused_buffer() {
        let args = CallArgs {
            program: 3,
            process: 4,
            priority: 7,
            cookie: 0xadd0,
        };
        let all: std::vec::Vec<IoRef> = (0..MAX_IO as u32)
            .map(|i| IoRef {
                buffer_id: i,
                kind: if i % 2 == 0 {
                    IoKind::Input
                } else {
                    IoKind::Output
                },
                iova: 0x4000 * u64::from(i + 1),
                size: 0x4000,
            })
            .collect();
        let one = [IoRef {
            buffer_id: 1,
            kind: IoKind::Input,
            iova: 0x8000,
            size: 0x4000,
        }];
        let fresh = |io: &[IoRef]| {
            let mut b = std::vec![0u8; call_len(MAX_IO)];
            let n = encode_procedure_call(&mut b, &args, io).unwrap();
            b.truncate(n);
            b
        };
        // A buffer full of stale bytes, as after earlier calls.
        let mut reused = std::vec![0xa5u8; call_len(MAX_IO)];
        for io in [&all[..], &one[..], &all[..7], &one[..]] {
            let n = encode_procedure_call(&mut reused, &args, io).unwrap();
            assert_eq!(n, call_len(io.len()));
            assert_eq!(&reused[..n], &fresh(io)[..], "{} bindings", io.len());
        }
    }

    #[test]
    fn procedure_call() {
        let args = CallArgs {
            program: 3,
            process: 4,
            priority: 2,
            cookie: 0xadd0,
        };
        let io = [
            IoRef {
                buffer_id: 5,
                kind: IoKind::Input,
                iova: 0x8000,
                size: 0x4000,
            },
            IoRef {
                buffer_id: 4,
                kind: IoKind::Output,
                iova: 0xc000,
                size: 0x4000,
            },
        ];
        let mut b = [0u8; 0x200];
        assert_eq!(encode_procedure_call(&mut b, &args, &io), Ok(0xc0));
        assert_eq!(u16_at(&b, 4), Some(0x204));
        assert_eq!(u64_at(&b, 0x20), Some(0xadd0));
        assert_eq!(u64_at(&b, 0x28), Some(2));
        assert_eq!(u32_at(&b, 0x90 + 8), Some(1), "second record is an output");
        let cmd = decode_procedure_call(&b[..0xc0]).unwrap();
        assert_eq!((cmd.args, cmd.count), (args, 2));
        assert_eq!(decode_call_record(&b, 0), Ok(io[0]));
        assert_eq!(decode_call_record(&b, 1), Ok(io[1]));
        assert_eq!(
            decode_call_record(&b, 2),
            Err(MsgError::IoRecord { index: 2 })
        );
        assert_eq!(
            decode_call_record(&b, usize::MAX),
            Err(MsgError::IoRecord { index: usize::MAX })
        );
        assert_eq!(
            decode_procedure_call(&b[..0xbf]),
            Err(MsgError::Length { found: 0xbf })
        );
        for p in [0, 1, 8] {
            let a = CallArgs {
                priority: p,
                ..args
            };
            assert_eq!(
                encode_procedure_call(&mut b, &a, &io),
                Err(MsgError::Priority {
                    priority: u64::from(p)
                })
            );
        }
        assert_eq!(
            encode_procedure_call(&mut b, &args, &[]),
            Err(MsgError::IoCount { count: 0 })
        );
        let many = [io[0]; 65];
        assert_eq!(
            encode_procedure_call(&mut b, &args, &many),
            Err(MsgError::IoCount { count: 65 })
        );
        let mut big = [0u8; call_len(64)];
        assert_eq!(
            encode_procedure_call(&mut big, &args, &[io[0]; 64]),
            Ok(0xc60)
        );
        assert!(call_len(MAX_IO) <= MAX_MESSAGE);
    }

    #[test]
    fn property_write() {
        let mut b = [0u8; 0x14];
        let (c, p, v) = PERF_MODE;
        assert_eq!(encode_property_write(&mut b, c, p, v), Ok(0x14));
        assert_eq!(u16_at(&b, 4), Some(0x1f));
        assert_eq!(decode_property_write(&b), Ok(PERF_MODE));
    }

    #[test]
    fn digest_is_stable_and_ordered() {
        let a: &[u8] = b"kernel bytes";
        let b: &[u8] = &[7u8; 3000];
        let d = program_digest(&[(2, a), (3, b)]);
        assert_eq!(d, program_digest(&[(2, a), (3, b)]), "stable");
        assert_ne!(d, program_digest(&[(3, b), (2, a)]), "order matters");
        assert_ne!(d, program_digest(&[(2, a), (4, b)]), "id matters");
        // The same bytes split differently between sections differ because
        // of the size field.
        assert_ne!(
            program_digest(&[(1, &b"ab"[..]), (2, &b"c"[..])]),
            program_digest(&[(1, &b"a"[..]), (2, &b"bc"[..])])
        );
        // Streaming in chunks gives the same value.
        let mut s = ProgramDigest::new(Sha256::new());
        s.section(2, a.len() as u64).unwrap();
        s.update(&a[..5]).unwrap();
        s.update(&a[5..]).unwrap();
        s.section(3, b.len() as u64).unwrap();
        for chunk in b.chunks(1024) {
            s.update(chunk).unwrap();
        }
        assert_eq!(s.finish(), Ok(d));
        // And the definition, spelled out.
        let mut sha = Sha256::new();
        for (id, bytes) in [(2u64, a), (3, b)] {
            sha.update(&id.to_le_bytes());
            sha.update(&(bytes.len() as u64).to_le_bytes());
            sha.update(bytes);
        }
        assert_eq!(sha.finalize(), d);
    }

    #[test]
    fn digest_stream_misuse() {
        let mut s = ProgramDigest::new(Sha256::new());
        s.section(1, 4).unwrap();
        assert_eq!(s.update(&[0; 5]), Err(DigestError::Overrun));
        s.update(&[0; 3]).unwrap();
        assert_eq!(s.section(2, 0), Err(DigestError::Incomplete { missing: 1 }));
        assert_eq!(
            s.clone().finish(),
            Err(DigestError::Incomplete { missing: 1 })
        );
        s.update(&[0]).unwrap();
        assert!(s.finish().is_ok());
    }

    /// An expected image of `len` bytes: zero but for the little-endian
    /// fields `(offset, width, value)`, written out independently of the
    /// encoders.
    fn image(len: usize, fields: &[(usize, usize, u64)]) -> std::vec::Vec<u8> {
        let mut v = std::vec![0u8; len];
        for &(off, width, value) in fields {
            v[off..off + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        v
    }

    extern crate std;

    // Golden images: each pins a message byte for byte to the record
    // (omarchy-ane "OA"; RT = ane/t6021/ane_t6021_rtclient_main.c, newest
    // stored version, index id 70070193265, no commit exposed, nearest
    // 23f4501bc0beeec01dd6744df9fed385b5bcedd9; AH = ane/t6021/ane_t6021.h
    // at c2b7408b621c7e5a19ea39efaf513170bfebaaba).

    /// CONFIG_GET: opcode 3, 16 zeroed bytes; the reply's `u32` at +8 must
    /// be nonzero (RT probe, the CONFIG_GET exchange; AH opcode enum).
    #[test]
    fn golden_config_get() {
        let mut b = [0xeeu8; 0x10];
        assert_eq!(encode_config_get(&mut b), Ok(0x10));
        assert_eq!(&b[..], &image(0x10, &[(4, 2, 0x03)])[..]);
        let reply = image(0x10, &[(4, 2, 0x03), (8, 4, 0x016e_3600)]);
        assert_eq!(config_get_reply(&reply), Ok(0x016e_3600));
        let zero = image(0x10, &[(4, 2, 0x03)]);
        assert_eq!(config_get_reply(&zero), Err(MsgError::NoConfig));
    }

    /// PROGRAM_LOAD: opcode 0x200, 0x1c0 bytes, record of section `id` at
    /// 0x08 + (id − 1)·0x30 = {u32 1, u32 id, u64 iova @0x18, u64 size
    /// @0x20}, ProgramId placeholder 0xffffffff at 0x1b8 (RT
    /// `ane_rtclient_load_program`, "slot = id − 1"; AH LOAD_PROGRAM struct
    /// and `CSNE_CMD_LOAD_PROGRAM = 0x0200`, also at
    /// 006f99f94e7b8ade510c982b6143a4ac7c132747).
    #[test]
    fn golden_program_load() {
        // The proven add-path shape: ids 1..=5 and 7, slot 5 empty.
        let ids = [1u32, 2, 3, 4, 5, 7];
        let secs: std::vec::Vec<SectionRef> = ids
            .iter()
            .map(|&id| SectionRef {
                id,
                iova: 0x4000_0000 + u64::from(id) * 0x10_0000,
                size: 0x4000 * u64::from(id),
            })
            .collect();
        let mut b = [0xeeu8; 0x1c0];
        assert_eq!(encode_program_load(&mut b, &secs), Ok(0x1c0));
        let mut fields = std::vec![(4, 2, 0x200), (0x1b8, 4, 0xffff_ffff)];
        for s in &secs {
            let r = 0x08 + (s.id as usize - 1) * 0x30;
            fields.extend([
                (r, 4, 1),
                (r + 4, 4, u64::from(s.id)),
                (r + 0x18, 8, s.iova),
                (r + 0x20, 8, s.size),
            ]);
        }
        assert_eq!(&b[..], &image(0x1c0, &fields)[..]);
        assert!(b[0x08 + 5 * 0x30..0x08 + 6 * 0x30].iter().all(|&x| x == 0));
        assert_eq!(u16_at(&b, 4), Some(OP_PROGRAM_LOAD));
        assert_ne!(OP_PROGRAM_LOAD, OP_PROGRAM_UNLOAD);
    }

    /// PROC_CREATE: opcode 0x202, 0x10 bytes, program at 8, placeholder
    /// 0xffffffff at 0xc, replaced by the process id (RT, the CREATE_PROCESS
    /// exchange; AH opcode enum).
    #[test]
    fn golden_proc_create() {
        let mut b = [0xeeu8; 0x10];
        assert_eq!(encode_proc_create(&mut b, 20), Ok(0x10));
        let want = image(0x10, &[(4, 2, 0x202), (8, 4, 20), (0xc, 4, 0xffff_ffff)]);
        assert_eq!(&b[..], &want[..]);
    }

    /// PROCEDURE_CALL: opcode 0x204, 0x60 + n·0x30 bytes: program @8,
    /// process @0xc, u64 0 @0x10, priority u32 @0x18 (2..=7), cookie u64
    /// @0x20, count u32 @0x28; record i at 0x60 + i·0x30 = {u32 1, buffer id
    /// @4, type @8, u64 iova @0x18, u64 size @0x20} (RT, the CALL builder;
    /// AH PROCEDURE_CALL struct).
    #[test]
    fn golden_procedure_call() {
        let args = CallArgs {
            program: 20,
            process: 21,
            priority: 2,
            cookie: 0xadd0,
        };
        let io = [
            IoRef {
                buffer_id: 0,
                kind: IoKind::Input,
                iova: 0x1234_4000,
                size: 0x8000,
            },
            IoRef {
                buffer_id: 3,
                kind: IoKind::Output,
                iova: 0x2000_0000,
                size: 0x4000,
            },
        ];
        let mut b = [0xeeu8; 0xc0];
        assert_eq!(
            encode_procedure_call(&mut b, &args, &io),
            Ok(0x60 + 2 * 0x30)
        );
        let mut fields = std::vec![
            (4, 2, 0x204),
            (8, 4, 20),
            (0xc, 4, 21),
            (0x18, 4, 2),
            (0x20, 8, 0xadd0),
            (0x28, 4, 2),
        ];
        for (i, r) in io.iter().enumerate() {
            let o = 0x60 + i * 0x30;
            fields.extend([
                (o, 4, 1),
                (o + 4, 4, u64::from(r.buffer_id)),
                (o + 8, 4, r.kind as u64),
                (o + 0x18, 8, r.iova),
                (o + 0x20, 8, r.size),
            ]);
        }
        assert_eq!(&b[..], &image(0xc0, &fields)[..]);
    }

    /// CH_PROPERTY_WRITE: opcode 0x1f, 0x14 bytes, u32 channel 0 @8, u32
    /// property 0x10aa @0xc, u32 value 1 @0x10 (RT `fw_perf_mode`, the
    /// property exchange).
    #[test]
    fn golden_property_write() {
        let mut b = [0xeeu8; 0x18];
        let (c, p, v) = PERF_MODE;
        assert_eq!(encode_property_write(&mut b, c, p, v), Ok(0x14));
        let want = image(
            0x14,
            &[(4, 2, 0x1f), (8, 4, 0), (0xc, 4, 0x10aa), (0x10, 4, 1)],
        );
        assert_eq!(&b[..0x14], &want[..]);
        assert_eq!(&b[0x14..], &[0xee; 4], "nothing past 0x14");
    }
}
