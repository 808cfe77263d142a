// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The legacy "ChMan" transport of the 13.5 firmware: the channel table in
//! the 'IPC ' surface, its rings of 64-byte slots, and the host side of an
//! IO exchange.
//!
//! Facts (`seed-repos.md` §3.5, §3.6, §3.3 step 11):
//!
//! - After DONE the firmware has written a table of 8 entries of 0x100
//!   bytes (`name[64], u32 type, u32 doorbell bit, u64 slot count, u64 ring
//!   offset`) at the start of 'IPC '; type 0 is host→target, 1 is
//!   target→host, the terminal is type 2. [`LAYOUT`] is the table the seed
//!   recorded (the whole layout spans 0x10440 bytes).
//! - Word 0 (`u64`) of a slot carries the owner in bit 0. The host owns a
//!   host→target slot when bit 0 is set; before the legacy ack it sets the
//!   owner byte of every host→target slot to 1, or the firmware consumes
//!   zeroed slots as commands.
//! - An IO exchange: take the IO slot at the cursor (bit 0 must be set),
//!   write the command, set word1 = word2 = length, barrier, word0 = the
//!   command's device address (bit 0 clear), barrier, ring the channel's
//!   doorbell bit at IPI+0. Then poll, acknowledging pending IPIs and
//!   serving SHAREDMALLOC requests. Success is word0 == address | 1, word1
//!   == length, word2 == 0, the reply opcode equal to the command's and a
//!   zero status; only then does the cursor advance (a resend to the same
//!   slot wedges the ring). Any failure quarantines the device.
//! - SHAREDMALLOC (channel 5): a request has header 0 and a `u32` tag; the
//!   host allocates a 16 KiB-aligned buffer (≤ 2 MiB each, ≤ 8192 buffers,
//!   ≤ 512 MiB in all, held until reboot), writes word1 = 0, word2 = its
//!   index, word0 = address | 1, and rings bit 5.
//! - Target→host channels (BUF_T2H 4, IO_T2H 6) are drained after every
//!   command: a published slot has bit 0 clear; the host sets it and rings
//!   that channel's bit. IO_T2H carries 0x28-byte events `u32 seq, u32
//!   0x300, u64 cookie, u32 program, u32 process, u32 0, u32 state` (0
//!   dispatch, 1 finish); a CALL is complete only at its finish event.
//!
//! Not in the reference material, chosen here (and implemented the same way
//! by `super::model`):
//!
//! - where a target→host payload lives: inline in its slot, from
//!   [`PAYLOAD`] (+0x08) on; an event's last 8 bytes (0x20..0x28) are
//!   reserved and ignored;
//! - the SHAREDMALLOC request: word0 = 0, `u32` tag at +0x08, `u32` 0 at
//!   +0x0c, requested bytes (`u64`) at +0x10;
//! - a SHAREDMALLOC request the host cannot honour is answered with address
//!   0 (word0 = 1) rather than left unanswered, so the ring keeps moving;
//! - target→host slots are free for the firmware while bit 0 is set; the
//!   firmware sets it on every target→host slot when it writes the table
//!   (a zeroed slot would otherwise read as published);
//! - the 'IPC ' surface is [`IPC_SIZE`] bytes: the seed's size formula is
//!   unclear, and the recorded layout needs 0x10440.

use super::boot::{Delay, FwBuf, FwMem, MemError, Regs};
use super::bytes::{put_u32, put_u64, u32_at, u64_at};
use super::msg::{self, MsgError};
use super::regs;

/// Entries of the table.
pub const CHANNEL_COUNT: usize = 8;
/// Bytes of one entry.
pub const ENTRY_LEN: usize = 0x100;
/// Bytes of an entry's name.
pub const NAME_LEN: usize = 64;
/// Bytes of the table, at offset 0 of 'IPC '.
pub const TABLE_LEN: usize = CHANNEL_COUNT * ENTRY_LEN;
/// Bytes of a ring slot.
pub const SLOT_LEN: usize = 64;
/// Offset of a target→host payload in its slot (chosen, see above).
pub const PAYLOAD: usize = 8;
/// Bytes the recorded layout spans.
pub const LAYOUT_SPAN: u64 = 0x1_0440;
/// Bytes of the 'IPC ' surface the driver allocates (16 KiB pages).
pub const IPC_SIZE: usize = 0x1_4000;
/// The most slots a ring may have (bounds every drain loop).
pub const MAX_SLOTS: u64 = 0x1000;

/// Word 0 bit 0: the host owns a host→target slot / has consumed a
/// target→host slot.
pub const OWNER: u64 = 1;

/// Channel type: host to target.
pub const KIND_H2T: u32 = 0;
/// Channel type: target to host.
pub const KIND_T2H: u32 = 1;
/// Channel type of the terminal.
pub const KIND_TERMINAL: u32 = 2;

/// Index of the terminal channel.
pub const TERMINAL: usize = 0;
/// Index of the IO (command) channel.
pub const IO: usize = 1;
/// Index of the debug channel.
pub const DEBUG: usize = 2;
/// Index of the host→target buffer channel.
pub const BUF_H2T: usize = 3;
/// Index of the target→host buffer channel.
pub const BUF_T2H: usize = 4;
/// Index of the SHAREDMALLOC channel.
pub const SHAREDMALLOC: usize = 5;
/// Index of the IO events channel.
pub const IO_T2H: usize = 6;
/// Index of the data-chain channel.
pub const DATA_CHAIN_H2T: usize = 7;

/// One expected table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelSpec {
    /// Its name.
    pub name: &'static str,
    /// [`KIND_H2T`], [`KIND_T2H`] or [`KIND_TERMINAL`].
    pub kind: u32,
    /// Its doorbell bit.
    pub bit: u32,
    /// Slots of its ring.
    pub slots: u64,
    /// Offset of its ring in 'IPC '.
    pub ring: u64,
}

/// The table the 13.5 firmware writes (`seed-repos.md` §3.5).
pub const LAYOUT: [ChannelSpec; CHANNEL_COUNT] = [
    ChannelSpec {
        name: "TERMINAL",
        kind: KIND_TERMINAL,
        bit: 0,
        slots: 0x300,
        ring: 0x800,
    },
    ChannelSpec {
        name: "IO",
        kind: KIND_H2T,
        bit: 1,
        slots: 0x10,
        ring: 0xc800,
    },
    ChannelSpec {
        name: "DEBUG",
        kind: KIND_H2T,
        bit: 2,
        slots: 0x8,
        ring: 0xcc00,
    },
    ChannelSpec {
        name: "BUF_H2T",
        kind: KIND_H2T,
        bit: 3,
        slots: 0x40,
        ring: 0xce00,
    },
    ChannelSpec {
        name: "BUF_T2H",
        kind: KIND_T2H,
        bit: 4,
        slots: 0x40,
        ring: 0xde00,
    },
    ChannelSpec {
        name: "SHAREDMALLOC",
        kind: KIND_T2H,
        bit: 5,
        slots: 0x8,
        ring: 0xee00,
    },
    ChannelSpec {
        name: "IO_T2H",
        kind: KIND_T2H,
        bit: 6,
        slots: 0x40,
        ring: 0xf000,
    },
    ChannelSpec {
        name: "DATA_CHAIN_H2T",
        kind: KIND_H2T,
        bit: 7,
        slots: 0x10,
        ring: 0x1_0000,
    },
];

/// One validated table entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Channel {
    /// Its type.
    pub kind: u32,
    /// Its doorbell bit.
    pub bit: u32,
    /// Slots of its ring.
    pub slots: u64,
    /// Offset of its ring in 'IPC '.
    pub ring: u64,
}

impl Channel {
    /// Offset in 'IPC ' of slot `index` (taken modulo the ring size).
    pub fn slot(&self, index: u64) -> Option<usize> {
        let i = index.checked_rem(self.slots)?;
        let off = self.ring.checked_add(i.checked_mul(SLOT_LEN as u64)?)?;
        usize::try_from(off).ok()
    }

    /// The doorbell mask of this channel.
    pub fn doorbell(&self) -> u32 {
        1u32.checked_shl(self.bit).unwrap_or(0)
    }

    /// Bytes of its ring.
    fn span(&self) -> Option<(u64, u64)> {
        let len = self.slots.checked_mul(SLOT_LEN as u64)?;
        Some((self.ring, self.ring.checked_add(len)?))
    }
}

/// Why the channel table is not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableError {
    /// Fewer bytes than the table.
    Short,
    /// An entry's name is not the expected one (or not NUL-terminated).
    Name {
        /// Entry index.
        index: usize,
    },
    /// An entry's type differs.
    Kind {
        /// Entry index.
        index: usize,
        /// The type found.
        found: u32,
    },
    /// An entry's doorbell bit differs.
    Bit {
        /// Entry index.
        index: usize,
        /// The bit found.
        found: u32,
    },
    /// A ring with no slot or more than [`MAX_SLOTS`].
    Slots {
        /// Entry index.
        index: usize,
        /// The count found.
        found: u64,
    },
    /// A ring not on a slot boundary, inside the table, or past the surface.
    Ring {
        /// Entry index.
        index: usize,
        /// The ring offset found.
        ring: u64,
    },
    /// Two rings overlap.
    Overlap {
        /// First entry.
        first: usize,
        /// Second entry.
        second: usize,
    },
}

/// The validated channel table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// The entries, by index.
    pub channels: [Channel; CHANNEL_COUNT],
}

impl Table {
    /// Entry `index`.
    pub fn channel(&self, index: usize) -> Option<&Channel> {
        self.channels.get(index)
    }

    /// Parses and validates the table from its first [`TABLE_LEN`] bytes, for
    /// a surface of `ipc_len` bytes.
    pub fn parse(bytes: &[u8], ipc_len: u64) -> Result<Table, TableError> {
        let mut t = Table::default();
        for (index, ch) in t.channels.iter_mut().enumerate() {
            let start = index * ENTRY_LEN;
            let entry = bytes
                .get(start..start + ENTRY_LEN)
                .ok_or(TableError::Short)?;
            *ch = parse_entry(index, entry)?;
        }
        t.check_geometry(ipc_len)?;
        Ok(t)
    }

    /// Checks every ring against the surface and the other rings.
    pub fn check_geometry(&self, ipc_len: u64) -> Result<(), TableError> {
        let limit = ipc_len.min(usize::MAX as u64);
        for (index, ch) in self.channels.iter().enumerate() {
            if ch.slots == 0 || ch.slots > MAX_SLOTS {
                return Err(TableError::Slots {
                    index,
                    found: ch.slots,
                });
            }
            let bad = TableError::Ring {
                index,
                ring: ch.ring,
            };
            let (lo, hi) = ch.span().ok_or(bad)?;
            if lo % SLOT_LEN as u64 != 0 || lo < TABLE_LEN as u64 || hi > limit {
                return Err(bad);
            }
        }
        for (first, a) in self.channels.iter().enumerate() {
            for (second, b) in self.channels.iter().enumerate().skip(first + 1) {
                if let (Some(x), Some(y)) = (a.span(), b.span()) {
                    if x.0 < y.1 && y.0 < x.1 {
                        return Err(TableError::Overlap { first, second });
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parses entry `index` (its [`ENTRY_LEN`] bytes) and checks its name, type
/// and doorbell bit against [`LAYOUT`].
pub fn parse_entry(index: usize, entry: &[u8]) -> Result<Channel, TableError> {
    let spec = LAYOUT.get(index).ok_or(TableError::Short)?;
    let name = entry.get(..NAME_LEN).ok_or(TableError::Short)?;
    let want = spec.name.as_bytes();
    let name_ok = name.get(..want.len()) == Some(want)
        && name
            .get(want.len()..)
            .is_some_and(|rest| rest.iter().all(|&c| c == 0));
    if !name_ok {
        return Err(TableError::Name { index });
    }
    let ch = Channel {
        kind: u32_at(entry, NAME_LEN).ok_or(TableError::Short)?,
        bit: u32_at(entry, NAME_LEN + 4).ok_or(TableError::Short)?,
        slots: u64_at(entry, NAME_LEN + 8).ok_or(TableError::Short)?,
        ring: u64_at(entry, NAME_LEN + 16).ok_or(TableError::Short)?,
    };
    if ch.kind != spec.kind {
        return Err(TableError::Kind {
            index,
            found: ch.kind,
        });
    }
    if ch.bit != spec.bit {
        return Err(TableError::Bit {
            index,
            found: ch.bit,
        });
    }
    Ok(ch)
}

/// Encodes one entry into `out` ([`ENTRY_LEN`] bytes), as the firmware
/// writes it (for the model and tests).
pub fn encode_entry(spec: &ChannelSpec, out: &mut [u8]) -> Option<()> {
    let entry = out.get_mut(..ENTRY_LEN)?;
    entry.fill(0);
    entry
        .get_mut(..spec.name.len().min(NAME_LEN - 1))?
        .copy_from_slice(
            spec.name
                .as_bytes()
                .get(..spec.name.len().min(NAME_LEN - 1))?,
        );
    put_u32(entry, NAME_LEN, spec.kind)?;
    put_u32(entry, NAME_LEN + 4, spec.bit)?;
    put_u64(entry, NAME_LEN + 8, spec.slots)?;
    put_u64(entry, NAME_LEN + 16, spec.ring)
}

/// Bytes of an IO_T2H event.
pub const EVENT_LEN: usize = 0x28;
/// The constant second word of an event.
pub const EVENT_MAGIC: u32 = 0x300;

/// What an IO_T2H event announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventState {
    /// The call was dispatched (not complete; outputs not yet written).
    Dispatch,
    /// The call finished; its outputs are visible.
    Finish,
}

/// An IO_T2H event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The firmware's sequence number.
    pub seq: u32,
    /// The cookie of the PROCEDURE_CALL (its +0x20).
    pub cookie: u64,
    /// ProgramId.
    pub program: u32,
    /// Process id.
    pub process: u32,
    /// Dispatch or finish.
    pub state: EventState,
}

/// Why bytes are not an IO_T2H event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventError {
    /// Fewer than [`EVENT_LEN`] bytes.
    Short,
    /// The second word is not 0x300.
    Magic {
        /// Its value.
        found: u32,
    },
    /// The reserved word at +0x18 is not zero.
    Reserved {
        /// Its value.
        found: u32,
    },
    /// A state other than 0 or 1.
    State {
        /// Its value.
        found: u32,
    },
}

/// Decodes an IO_T2H event.
pub fn decode_event(b: &[u8]) -> Result<Event, EventError> {
    if b.len() < EVENT_LEN {
        return Err(EventError::Short);
    }
    let w = |off| u32_at(b, off).ok_or(EventError::Short);
    let magic = w(4)?;
    if magic != EVENT_MAGIC {
        return Err(EventError::Magic { found: magic });
    }
    let zero = w(0x18)?;
    if zero != 0 {
        return Err(EventError::Reserved { found: zero });
    }
    let state = match w(0x1c)? {
        0 => EventState::Dispatch,
        1 => EventState::Finish,
        found => return Err(EventError::State { found }),
    };
    Ok(Event {
        seq: w(0)?,
        cookie: u64_at(b, 8).ok_or(EventError::Short)?,
        program: w(0x10)?,
        process: w(0x14)?,
        state,
    })
}

/// Encodes an event into `out` ([`EVENT_LEN`] bytes).
pub fn encode_event(e: &Event, out: &mut [u8]) -> Option<()> {
    out.get_mut(..EVENT_LEN)?.fill(0);
    put_u32(out, 0, e.seq)?;
    put_u32(out, 4, EVENT_MAGIC)?;
    put_u64(out, 8, e.cookie)?;
    put_u32(out, 0x10, e.program)?;
    put_u32(out, 0x14, e.process)?;
    let state = match e.state {
        EventState::Dispatch => 0,
        EventState::Finish => 1,
    };
    put_u32(out, 0x1c, state)
}

/// Largest SHAREDMALLOC buffer.
pub const SM_MAX_BUFFER: u64 = 2 << 20;
/// Most SHAREDMALLOC buffers.
pub const SM_MAX_BUFFERS: u32 = 8192;
/// Most SHAREDMALLOC bytes in all.
pub const SM_MAX_TOTAL: u64 = 512 << 20;
/// SHAREDMALLOC alignment.
pub const SM_ALIGN: u64 = 0x4000;

/// A SHAREDMALLOC request (layout chosen, see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmRequest {
    /// The firmware's tag.
    pub tag: u32,
    /// Bytes requested.
    pub size: u64,
}

/// Why a SHAREDMALLOC slot is not a valid request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmError {
    /// Fewer than 0x18 bytes.
    Short,
    /// The header word is not 0.
    Header {
        /// Its value.
        found: u64,
    },
    /// The reserved word is not 0.
    Reserved,
    /// A size of 0 or above [`SM_MAX_BUFFER`].
    Size {
        /// Bytes requested.
        size: u64,
    },
}

/// Decodes a SHAREDMALLOC request from its slot.
pub fn decode_sm_request(slot: &[u8]) -> Result<SmRequest, SmError> {
    let header = u64_at(slot, 0).ok_or(SmError::Short)?;
    if header != 0 {
        return Err(SmError::Header { found: header });
    }
    if u32_at(slot, 0x0c).ok_or(SmError::Short)? != 0 {
        return Err(SmError::Reserved);
    }
    let size = u64_at(slot, 0x10).ok_or(SmError::Short)?;
    if size == 0 || size > SM_MAX_BUFFER {
        return Err(SmError::Size { size });
    }
    Ok(SmRequest {
        tag: u32_at(slot, 8).ok_or(SmError::Short)?,
        size,
    })
}

/// Encodes a SHAREDMALLOC request's payload (everything but word0, which
/// the publisher writes last) into a slot image.
pub fn encode_sm_request(r: &SmRequest, slot: &mut [u8]) -> Option<()> {
    slot.get_mut(..SLOT_LEN)?.fill(0);
    put_u32(slot, 8, r.tag)?;
    put_u64(slot, 0x10, r.size)
}

/// Why an exchange failed. Every error but [`ExchangeError::Busy`] and
/// [`ExchangeError::Idle`] quarantines the [`Host`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeError {
    /// An earlier failure quarantined the device (the driver answers
    /// `ETIMEDOUT` until reboot).
    Quarantined,
    /// The IO slot at the cursor is not host-owned, or an exchange is in
    /// flight.
    Busy,
    /// [`Host::poll`] without an exchange in flight.
    Idle,
    /// A message longer than the command buffer or shorter than a header.
    Length {
        /// Its bytes.
        len: usize,
    },
    /// Device memory could not be accessed.
    Mem(MemError),
    /// The reply was malformed or carried a nonzero status.
    Msg(MsgError),
    /// The slot came back with unexpected words.
    BadSlot {
        /// word0.
        word0: u64,
        /// word1.
        word1: u64,
        /// word2.
        word2: u64,
    },
    /// No reply within the poll budget.
    Timeout {
        /// Polls made.
        polls: u32,
    },
    /// No finish event for the cookie within the poll budget.
    FinishTimeout {
        /// The cookie.
        cookie: u64,
    },
}

impl From<MemError> for ExchangeError {
    fn from(e: MemError) -> Self {
        ExchangeError::Mem(e)
    }
}

/// The state of a poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The firmware still owns the slot.
    Pending,
    /// The reply is valid; it is in the command buffer.
    Done {
        /// Bytes of the reply (the command's length).
        len: usize,
    },
}

/// An exchange in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InFlight {
    /// Offset of the IO slot in 'IPC '.
    slot: usize,
    /// Bytes of the command.
    len: usize,
    /// Its opcode.
    opcode: u16,
}

/// Counters of the host side, for debugfs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Exchanges completed.
    pub exchanges: u64,
    /// SHAREDMALLOC buffers handed out.
    pub sm_buffers: u32,
    /// SHAREDMALLOC bytes handed out.
    pub sm_bytes: u64,
    /// SHAREDMALLOC requests refused.
    pub sm_refused: u32,
    /// Target→host slots consumed.
    pub drained: u64,
    /// IO_T2H slots that did not decode as events.
    pub bad_events: u32,
    /// Finish events dropped because nobody claimed them in time.
    pub lost_finishes: u32,
}

/// Unclaimed finish events kept by the host.
const FINISHED: usize = 8;

/// The host side of the ChMan transport, once the firmware has booted.
#[derive(Clone, Debug)]
pub struct Host {
    /// The 'IPC ' surface.
    ipc: FwBuf,
    /// The command buffer ([`msg::MAX_MESSAGE`] bytes).
    cmd: FwBuf,
    /// The validated table.
    table: Table,
    /// Next IO slot.
    io_cursor: u64,
    /// Next slot of each target→host channel (by channel index).
    t2h_cursor: [u64; CHANNEL_COUNT],
    /// The exchange in flight.
    in_flight: Option<InFlight>,
    /// Set by any failure.
    quarantined: bool,
    /// Finish events not claimed yet.
    finished: [Option<Event>; FINISHED],
    /// Counters.
    stats: HostStats,
}

/// Whether `buf` is a usable firmware buffer of at least `len` bytes.
fn buffer_ok(buf: &FwBuf, len: usize) -> bool {
    buf.len >= len
        && buf.dva != 0
        && buf.dva % SM_ALIGN == 0
        && !regs::in_fw_window(buf.dva, buf.len as u64)
}

impl Host {
    /// Sets up the host side over the booted firmware's 'IPC ' surface and
    /// table, allocating the command buffer.
    pub fn new<M: FwMem>(mem: &mut M, ipc: FwBuf, table: Table) -> Result<Host, ExchangeError> {
        let cmd = mem.alloc(super::boot::BufKind::Command, msg::MAX_MESSAGE)?;
        if !buffer_ok(&cmd, msg::MAX_MESSAGE) {
            return Err(ExchangeError::Mem(MemError::BadBuffer));
        }
        Ok(Host {
            ipc,
            cmd,
            table,
            io_cursor: 0,
            t2h_cursor: [0; CHANNEL_COUNT],
            in_flight: None,
            quarantined: false,
            finished: [None; FINISHED],
            stats: HostStats::default(),
        })
    }

    /// Whether a failure quarantined the device.
    pub fn quarantined(&self) -> bool {
        self.quarantined
    }

    /// The counters.
    pub fn stats(&self) -> HostStats {
        self.stats
    }

    /// The table in use.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The command buffer.
    pub fn command_buffer(&self) -> &FwBuf {
        &self.cmd
    }

    /// Records `e` as fatal and returns it.
    fn fail(&mut self, e: ExchangeError) -> ExchangeError {
        self.quarantined = true;
        self.in_flight = None;
        e
    }

    /// Quarantines on error.
    fn guard<T>(&mut self, r: Result<T, ExchangeError>) -> Result<T, ExchangeError> {
        r.map_err(|e| self.fail(e))
    }

    /// Reads words 0..2 of the slot at `off` of 'IPC '.
    fn slot_words<M: FwMem>(&self, mem: &mut M, off: usize) -> Result<[u64; 3], MemError> {
        let mut b = [0u8; 24];
        read(mem, &self.ipc, off, &mut b)?;
        Ok([
            u64_at(&b, 0).unwrap_or(0),
            u64_at(&b, 8).unwrap_or(0),
            u64_at(&b, 16).unwrap_or(0),
        ])
    }

    /// Channel `index` of the table.
    fn chan(&self, index: usize) -> Channel {
        self.table.channel(index).copied().unwrap_or_default()
    }

    /// Offset of the slot at `cursor` of channel `index`.
    fn slot_of(&self, index: usize, cursor: u64) -> Result<usize, ExchangeError> {
        self.chan(index)
            .slot(cursor)
            .ok_or(ExchangeError::Mem(MemError::OutOfRange))
    }

    /// Publishes `message` on the IO channel and rings its doorbell.
    pub fn start<P: Regs + FwMem>(
        &mut self,
        p: &mut P,
        message: &[u8],
    ) -> Result<(), ExchangeError> {
        if self.quarantined {
            return Err(ExchangeError::Quarantined);
        }
        if self.in_flight.is_some() {
            return Err(ExchangeError::Busy);
        }
        let len = message.len();
        let opcode = match msg::header(message) {
            Ok(h) if len <= msg::MAX_MESSAGE => h.opcode,
            _ => return Err(ExchangeError::Length { len }),
        };
        let slot = self.slot_of(IO, self.io_cursor)?;
        let r = self.publish(p, slot, message);
        self.guard(r)?;
        self.in_flight = Some(InFlight { slot, len, opcode });
        Ok(())
    }

    /// Steps 1–3 of an exchange.
    fn publish<P: Regs + FwMem>(
        &mut self,
        p: &mut P,
        slot: usize,
        message: &[u8],
    ) -> Result<(), ExchangeError> {
        let [word0, _, _] = self.slot_words(p, slot)?;
        if word0 & OWNER == 0 {
            return Err(ExchangeError::Busy);
        }
        let cmd = self.cmd;
        write(p, &cmd, 0, message)?;
        let len = message.len() as u64;
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&len.to_le_bytes());
        lens[8..].copy_from_slice(&len.to_le_bytes());
        let ipc = self.ipc;
        write(p, &ipc, slot.saturating_add(8), &lens)?;
        p.barrier();
        write(p, &ipc, slot, &(cmd.dva & !OWNER).to_le_bytes())?;
        p.barrier();
        p.write32(regs::IPI_SET, self.chan(IO).doorbell());
        Ok(())
    }

    /// One non-blocking step while an exchange is in flight: acknowledges
    /// doorbells, serves SHAREDMALLOC, then checks the IO slot.
    pub fn poll<P: Regs + FwMem>(&mut self, p: &mut P) -> Result<Progress, ExchangeError> {
        if self.quarantined {
            return Err(ExchangeError::Quarantined);
        }
        let Some(f) = self.in_flight else {
            return Err(ExchangeError::Idle);
        };
        let pending = p.read32(regs::IPI_PENDING);
        if pending != 0 {
            p.write32(regs::IPI_ACK, pending);
        }
        let r = self.serve_shared_malloc(p);
        self.guard(r)?;
        let r = self.check_reply(p, f);
        let progress = self.guard(r)?;
        if let Progress::Done { .. } = progress {
            self.in_flight = None;
            self.io_cursor = self.io_cursor.wrapping_add(1);
            self.stats.exchanges = self.stats.exchanges.wrapping_add(1);
        }
        Ok(progress)
    }

    /// Step 6: validates the IO slot and the reply header.
    fn check_reply<P: Regs + FwMem>(
        &mut self,
        p: &mut P,
        f: InFlight,
    ) -> Result<Progress, ExchangeError> {
        let [word0, word1, word2] = self.slot_words(p, f.slot)?;
        if word0 & OWNER == 0 {
            return Ok(Progress::Pending);
        }
        if word0 != self.cmd.dva | OWNER || word1 != f.len as u64 || word2 != 0 {
            return Err(ExchangeError::BadSlot {
                word0,
                word1,
                word2,
            });
        }
        let mut header = [0u8; msg::HEADER_LEN];
        let cmd = self.cmd;
        read(p, &cmd, 0, &mut header)?;
        msg::check_reply(&header, f.opcode).map_err(ExchangeError::Msg)?;
        Ok(Progress::Done { len: f.len })
    }

    /// Copies the reply (or its first `out.len()` bytes) out of the command
    /// buffer.
    pub fn read_reply<M: FwMem>(&self, mem: &mut M, out: &mut [u8]) -> Result<(), ExchangeError> {
        read(mem, &self.cmd, 0, out).map_err(ExchangeError::Mem)
    }

    /// Serves every published SHAREDMALLOC request.
    fn serve_shared_malloc<P: Regs + FwMem>(&mut self, p: &mut P) -> Result<(), ExchangeError> {
        let ch = self.chan(SHAREDMALLOC);
        let mut served = false;
        for _ in 0..ch.slots {
            let off = self.slot_of(SHAREDMALLOC, self.t2h_cursor[SHAREDMALLOC])?;
            let mut slot = [0u8; SLOT_LEN];
            read(p, &self.ipc, off, &mut slot)?;
            if u64_at(&slot, 0).unwrap_or(OWNER) & OWNER != 0 {
                break;
            }
            let (dva, index) = match decode_sm_request(&slot) {
                Ok(req) => self.sm_alloc(p, req),
                Err(_) => (0, u64::MAX),
            };
            let mut answer = [0u8; 16];
            answer[8..].copy_from_slice(&index.to_le_bytes());
            let ipc = self.ipc;
            write(p, &ipc, off.saturating_add(8), &answer)?;
            p.barrier();
            write(p, &ipc, off, &(dva | OWNER).to_le_bytes())?;
            p.barrier();
            self.t2h_cursor[SHAREDMALLOC] = self.t2h_cursor[SHAREDMALLOC].wrapping_add(1);
            served = true;
        }
        if served {
            p.write32(regs::IPI_SET, ch.doorbell());
        }
        Ok(())
    }

    /// Allocates a SHAREDMALLOC buffer within the limits; `(0, MAX)` when
    /// refused.
    fn sm_alloc<M: FwMem>(&mut self, mem: &mut M, req: SmRequest) -> (u64, u64) {
        let size = match req.size.checked_add(SM_ALIGN - 1) {
            Some(s) => s & !(SM_ALIGN - 1),
            None => 0,
        };
        let total = self.stats.sm_bytes.saturating_add(size);
        if size == 0 || self.stats.sm_buffers >= SM_MAX_BUFFERS || total > SM_MAX_TOTAL {
            self.stats.sm_refused = self.stats.sm_refused.wrapping_add(1);
            return (0, u64::MAX);
        }
        match mem.alloc(super::boot::BufKind::Shared, size as usize) {
            Ok(b) if buffer_ok(&b, size as usize) => {
                let index = u64::from(self.stats.sm_buffers);
                self.stats.sm_buffers += 1;
                self.stats.sm_bytes = total;
                (b.dva, index)
            }
            _ => {
                self.stats.sm_refused = self.stats.sm_refused.wrapping_add(1);
                (0, u64::MAX)
            }
        }
    }

    /// Publishes, then polls every `step_us` up to `polls` times; on
    /// success copies the reply into `reply` (up to its length) and returns
    /// the reply's length.
    pub fn exchange<P: Regs + Delay + FwMem>(
        &mut self,
        p: &mut P,
        message: &[u8],
        reply: &mut [u8],
        polls: u32,
        step_us: u32,
    ) -> Result<usize, ExchangeError> {
        self.start(p, message)?;
        for _ in 0..polls {
            if let Progress::Done { len } = self.poll(p)? {
                let n = len.min(reply.len());
                let out = reply.get_mut(..n).unwrap_or(&mut []);
                self.read_reply(p, out)?;
                return Ok(len);
            }
            p.sleep_us(step_us);
        }
        if let Progress::Done { len } = self.poll(p)? {
            let n = len.min(reply.len());
            let out = reply.get_mut(..n).unwrap_or(&mut []);
            self.read_reply(p, out)?;
            return Ok(len);
        }
        Err(self.fail(ExchangeError::Timeout { polls }))
    }

    /// Consumes every published slot of BUF_T2H and IO_T2H, keeping finish
    /// events for [`Self::take_finish`]. Returns the slots consumed.
    pub fn drain<P: Regs + FwMem>(&mut self, p: &mut P) -> Result<u32, ExchangeError> {
        let mut n = 0;
        for index in [BUF_T2H, IO_T2H] {
            let r = self.drain_channel(p, index);
            n += self.guard(r)?;
        }
        Ok(n)
    }

    /// Consumes the published slots of one target→host channel.
    fn drain_channel<P: Regs + FwMem>(
        &mut self,
        p: &mut P,
        index: usize,
    ) -> Result<u32, ExchangeError> {
        let ch = self.chan(index);
        let mut n = 0u32;
        for _ in 0..ch.slots {
            let cursor = self.t2h_cursor.get(index).copied().unwrap_or(0);
            let off = self.slot_of(index, cursor)?;
            let mut slot = [0u8; SLOT_LEN];
            read(p, &self.ipc, off, &mut slot)?;
            let word0 = u64_at(&slot, 0).unwrap_or(OWNER);
            if word0 & OWNER != 0 {
                break;
            }
            if index == IO_T2H {
                self.note_event(slot.get(PAYLOAD..).unwrap_or(&[]));
            }
            let ipc = self.ipc;
            write(p, &ipc, off, &(word0 | OWNER).to_le_bytes())?;
            if let Some(c) = self.t2h_cursor.get_mut(index) {
                *c = c.wrapping_add(1);
            }
            n += 1;
        }
        if n > 0 {
            p.barrier();
            p.write32(regs::IPI_SET, ch.doorbell());
            self.stats.drained = self.stats.drained.wrapping_add(u64::from(n));
        }
        Ok(n)
    }

    /// Keeps a finish event.
    fn note_event(&mut self, payload: &[u8]) {
        let e = match decode_event(payload) {
            Ok(e) => e,
            Err(_) => {
                self.stats.bad_events = self.stats.bad_events.wrapping_add(1);
                return;
            }
        };
        if e.state != EventState::Finish {
            return;
        }
        if let Some(free) = self.finished.iter_mut().find(|s| s.is_none()) {
            *free = Some(e);
            return;
        }
        // Full: drop the oldest (lowest sequence number).
        self.stats.lost_finishes = self.stats.lost_finishes.wrapping_add(1);
        if let Some(old) = self
            .finished
            .iter_mut()
            .min_by_key(|s| s.map_or(0, |e| e.seq))
        {
            *old = Some(e);
        }
    }

    /// Claims the finish event of `cookie`, if it arrived.
    pub fn take_finish(&mut self, cookie: u64) -> Option<Event> {
        self.finished
            .iter_mut()
            .find(|s| s.is_some_and(|e| e.cookie == cookie))
            .and_then(|s| s.take())
    }

    /// Drains and waits (every `step_us`, up to `polls` times) for the
    /// finish event of `cookie`.
    pub fn wait_finish<P: Regs + Delay + FwMem>(
        &mut self,
        p: &mut P,
        cookie: u64,
        polls: u32,
        step_us: u32,
    ) -> Result<Event, ExchangeError> {
        if self.quarantined {
            return Err(ExchangeError::Quarantined);
        }
        for i in 0..=polls {
            let pending = p.read32(regs::IPI_PENDING);
            if pending != 0 {
                p.write32(regs::IPI_ACK, pending);
            }
            self.drain(p)?;
            if let Some(e) = self.take_finish(cookie) {
                return Ok(e);
            }
            if i < polls {
                p.sleep_us(step_us);
            }
        }
        Err(self.fail(ExchangeError::FinishTimeout { cookie }))
    }
}

/// Reads `out.len()` bytes at `off` of `buf`, bounds-checked.
pub(crate) fn read<M: FwMem + ?Sized>(
    mem: &mut M,
    buf: &FwBuf,
    off: usize,
    out: &mut [u8],
) -> Result<(), MemError> {
    match off.checked_add(out.len()) {
        Some(end) if end <= buf.len => mem.read_bytes(buf, off, out),
        _ => Err(MemError::OutOfRange),
    }
}

/// Writes `src` at `off` of `buf`, bounds-checked.
pub(crate) fn write<M: FwMem + ?Sized>(
    mem: &mut M,
    buf: &FwBuf,
    off: usize,
    src: &[u8],
) -> Result<(), MemError> {
    match off.checked_add(src.len()) {
        Some(end) if end <= buf.len => mem.write_bytes(buf, off, src),
        _ => Err(MemError::OutOfRange),
    }
}

/// Sets the owner byte of every host→target slot to 1 (the ring-owner init
/// that must precede the legacy ack).
pub fn init_h2t_owners<M: FwMem + ?Sized>(
    mem: &mut M,
    ipc: &FwBuf,
    table: &Table,
) -> Result<(), MemError> {
    for ch in table.channels.iter().filter(|c| c.kind == KIND_H2T) {
        for i in 0..ch.slots {
            let off = ch.slot(i).ok_or(MemError::OutOfRange)?;
            write(mem, ipc, off, &[1])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_bytes() -> [u8; TABLE_LEN] {
        let mut b = [0u8; TABLE_LEN];
        for (i, spec) in LAYOUT.iter().enumerate() {
            encode_entry(spec, &mut b[i * ENTRY_LEN..]).unwrap();
        }
        b
    }

    #[test]
    fn layout_is_the_recorded_one() {
        let t = Table::parse(&table_bytes(), IPC_SIZE as u64).unwrap();
        let last = t.channels[DATA_CHAIN_H2T];
        assert_eq!(last.ring + last.slots * SLOT_LEN as u64 + 0x40, LAYOUT_SPAN);
        // Rings are back to back after the table.
        assert_eq!(t.channels[TERMINAL].ring, TABLE_LEN as u64);
        for w in LAYOUT.windows(2) {
            assert_eq!(w[0].ring + w[0].slots * 64, w[1].ring, "{}", w[1].name);
        }
        assert_eq!(t.channels[IO].slot(0x11), Some(0xc800 + 64));
        assert_eq!(t.channels[IO].doorbell(), 2);
        assert!(LAYOUT_SPAN <= IPC_SIZE as u64);
    }

    #[test]
    fn table_rejects() {
        let good = table_bytes();
        assert_eq!(
            Table::parse(&good[..0x7ff], 0x14000),
            Err(TableError::Short)
        );
        assert_eq!(
            Table::parse(&good, 0x10000),
            Err(TableError::Ring {
                index: DATA_CHAIN_H2T,
                ring: 0x10000
            })
        );
        let mut b = good;
        b[ENTRY_LEN] = b'X';
        assert_eq!(
            Table::parse(&b, 0x14000),
            Err(TableError::Name { index: 1 })
        );
        let mut b = good;
        b[ENTRY_LEN + 3] = b'Z'; // "IO\0Z": trailing garbage after the name
        assert_eq!(
            Table::parse(&b, 0x14000),
            Err(TableError::Name { index: 1 })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN] = 1;
        assert_eq!(
            Table::parse(&b, 0x14000),
            Err(TableError::Kind { index: 1, found: 1 })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 4] = 9;
        assert_eq!(
            Table::parse(&b, 0x14000),
            Err(TableError::Bit { index: 1, found: 9 })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 8] = 0;
        assert_eq!(
            Table::parse(&b, 0x14000),
            Err(TableError::Slots { index: 1, found: 0 })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 16] = 0x10; // IO ring at 0xc810: misaligned
        assert!(matches!(
            Table::parse(&b, 0x14000),
            Err(TableError::Ring { index: 1, .. })
        ));
        let mut b = good;
        b[2 * ENTRY_LEN + NAME_LEN + 16..2 * ENTRY_LEN + NAME_LEN + 24]
            .copy_from_slice(&0xc800u64.to_le_bytes()); // DEBUG on top of IO
        assert_eq!(
            Table::parse(&b, 0x14000),
            Err(TableError::Overlap {
                first: 1,
                second: 2
            })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 16..ENTRY_LEN + NAME_LEN + 24]
            .copy_from_slice(&0u64.to_le_bytes());
        assert!(
            matches!(
                Table::parse(&b, 0x14000),
                Err(TableError::Ring { index: 1, ring: 0 })
            ),
            "inside the table"
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 8..ENTRY_LEN + NAME_LEN + 16]
            .copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Table::parse(&b, u64::MAX),
            Err(TableError::Slots { index: 1, .. })
        ));
    }

    #[test]
    fn events_round_trip() {
        let e = Event {
            seq: 7,
            cookie: 0xadd0,
            program: 3,
            process: 4,
            state: EventState::Finish,
        };
        let mut b = [0xffu8; EVENT_LEN];
        encode_event(&e, &mut b).unwrap();
        assert_eq!(&b[4..8], &0x300u32.to_le_bytes());
        assert_eq!(&b[0x20..], &[0u8; 8]);
        assert_eq!(decode_event(&b), Ok(e));
        assert_eq!(decode_event(&b[..0x27]), Err(EventError::Short));
        let mut bad = b;
        bad[4] = 1;
        assert_eq!(decode_event(&bad), Err(EventError::Magic { found: 0x301 }));
        let mut bad = b;
        bad[0x18] = 1;
        assert_eq!(decode_event(&bad), Err(EventError::Reserved { found: 1 }));
        let mut bad = b;
        bad[0x1c] = 2;
        assert_eq!(decode_event(&bad), Err(EventError::State { found: 2 }));
        bad[0x1c] = 0;
        assert_eq!(decode_event(&bad).unwrap().state, EventState::Dispatch);
    }

    #[test]
    fn shared_malloc_requests() {
        let r = SmRequest {
            tag: 0x5054_424c,
            size: 0x1_0000,
        };
        let mut s = [0xffu8; SLOT_LEN];
        encode_sm_request(&r, &mut s).unwrap();
        assert_eq!(decode_sm_request(&s), Ok(r));
        let mut bad = s;
        bad[0] = 1;
        assert_eq!(decode_sm_request(&bad), Err(SmError::Header { found: 1 }));
        let mut bad = s;
        bad[0x0c] = 1;
        assert_eq!(decode_sm_request(&bad), Err(SmError::Reserved));
        let big = SmRequest {
            tag: 0,
            size: SM_MAX_BUFFER + 1,
        };
        encode_sm_request(&big, &mut s).unwrap();
        assert_eq!(
            decode_sm_request(&s),
            Err(SmError::Size {
                size: SM_MAX_BUFFER + 1
            })
        );
        assert_eq!(decode_sm_request(&s[..0x17]), Err(SmError::Short));
    }
}
