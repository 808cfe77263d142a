// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The legacy "ChMan" transport of the 13.5 firmware: the channel table in
//! the 'IPC ' surface, its rings of 64-byte slots, and the host side of an
//! IO exchange.
//!
//! The authority is the hardware record, joshuaswarren/omarchy-ane ("OA"),
//! whose T6021 driver ran inference on this firmware. `RT` is
//! `ane/t6021/ane_t6021_rtclient_main.c` in its newest stored version
//! (104,569 bytes; no commit exposed by the index, nearest
//! `23f4501bc0beeec01dd6744df9fed385b5bcedd9`); `BH` is
//! `ane/t6021/ane_t6021_boot.h` (the version with the ChMan helpers, no
//! commit exposed); `CW` is `receipts/2026-09-30-t6021-call-wait/README.md`
//! at `7a402cd62bcdf4390a479d24f67683c3f1bc2300`.
//!
//! Facts:
//!
//! - After DONE the firmware has written a table of 8 entries of 0x100
//!   bytes (`name[64], u32 type, u32 doorbell bit, u64 slot count, u64
//!   ring`) at the start of 'IPC '; type 0 is host→target, 1 is
//!   target→host, the terminal is type 2. `ring` is the ring's absolute
//!   device address, 'IPC ' + a fixed offset. OA accepts the table only if
//!   every entry equals its static layout ([`LAYOUT`], offsets from
//!   'IPC '), at probe and again before every exchange (BH
//!   `ane_t6021_chman_check`, a mismatch mask; RT
//!   `ane_rtclient_validate_chman` and `ane_rtclient_legacy_exchange`).
//!   [`Table::check_geometry`] does the same and names the first entry and
//!   field that differ.
//! - Word 0 (`u64`) of a slot carries the owner in bit 0. The host owns a
//!   host→target slot when bit 0 is set; before the legacy ack it sets the
//!   owner byte of every host→target slot to 1, or the firmware consumes
//!   zeroed slots as commands.
//! - An IO exchange (RT `ane_rtclient_legacy_exchange`): take the IO slot
//!   at the cursor (bit 0 must be set), write the command, set word1 =
//!   word2 = length, barrier, word0 = the command's device address (bit 0
//!   clear), barrier, ring the channel's doorbell bit at IPI+0. Then poll,
//!   acknowledging pending IPIs and serving SHAREDMALLOC requests. Success
//!   is word0 == address | 1, word1 == length, word2 == 0, the reply opcode
//!   equal to the command's and a zero status; only then does the cursor
//!   advance (a resend to the same slot wedges the ring). Any failure
//!   quarantines the device. After a successful exchange the host drains
//!   BUF_T2H and IO_T2H.
//! - SHAREDMALLOC (channel 5, RT `ane_rtclient_legacy_exchange` and
//!   `ane_rtclient_legacy_alloc`): a published slot (bit 0 clear) must have
//!   word0 exactly 0; `u64` size at +0x08, tag at +0x10 (must fit a `u32`;
//!   checked, not echoed), both read after a read barrier. The host grants
//!   a size that is nonzero, 16 KiB aligned and at most 2 MiB, up to 8192
//!   buffers and 512 MiB in all; the buffer is zeroed, 16 KiB aligned,
//!   outside the firmware's window, and held until reboot. The reply:
//!   word1 = 0, word2 = the number of buffers granted so far (1-based),
//!   barrier, word0 = address | 1, barrier, doorbell bit 5. A malformed
//!   request or one the rule refuses fails the exchange (OA: `-EOPNOTSUPP`
//!   or `-ENOMEM`, then quarantine); the slot is left unanswered.
//! - Target→host channels (BUF_T2H 4, IO_T2H 6) are drained from their
//!   cursor (RT `ane_rtclient_drain_t2h`): a published slot has bit 0
//!   clear, word0 = the payload's device address, word1 = its length. The
//!   payload lies in memory the host gave the firmware — a SHAREDMALLOC
//!   buffer or 'IPC ' — and the host reads it only if `[address, address +
//!   length)` lies wholly inside one of them (RT `ane_rtclient_fw_cpu`).
//!   Then the host hands the slot back (word0 |= 1, barrier, that channel's
//!   doorbell bit) and advances.
//! - An IO_T2H event is 0x28 bytes: `u32 seq, u32 0x300, u64 cookie, u32
//!   program, u32 process, u32 0, u32 state` (RT, the event's comment; CW).
//!   Two per call: state 0 (dispatch) soon after the reply, state 1 when the
//!   procedure finished and its outputs are in memory. A call is finished
//!   by an IO_T2H event of length ≥ 0x20 with its cookie and state 1.
//!
//! The driver's own, stricter choices (documented because OA differs):
//!
//! - BUF_T2H payloads are not read at all (OA reads none either; it posts
//!   none during calls, CW), so their pointers are not checked;
//!
//! Where the record judges less, the driver judges no more after the
//! release (a value the record never saw must not quarantine a working
//! firmware): a reply's first word is not checked (only its opcode and
//! status, as OA), and an event's +0x04 (0x300) and +0x18 (0) words are
//! only counted in [`HostStats::odd_events`] when they differ.
//!
//! Not known (also in OA's own list of open questions):
//!
//! - the meaning of the SHAREDMALLOC tag and of the reply's words beyond
//!   address and count (OA's count is a "lab rule", not decoded);
//! - that target→host slots come up firmware-free (bit 0 set) without the
//!   host's help: OA initialises only host→target rings and reads bit 0
//!   clear as "published", so the firmware must set it; the model does;
//! - the 'IPC ' size: OA sizes it from SCRATCH1 (at most 1 MiB); the layout
//!   needs [`LAYOUT_SPAN`] bytes, and the driver's [`IPC_SIZE`] covers it.

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
/// Bytes the recorded layout spans.
pub const LAYOUT_SPAN: u64 = 0x1_0440;
/// Bytes of the 'IPC ' surface the driver allocates (16 KiB pages).
pub const IPC_SIZE: usize = 0x1_4000;

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
    /// Offset of its ring in 'IPC ' (the table holds 'IPC ' + this).
    pub ring: u64,
}

/// The table the 13.5 firmware writes (BH, `ane_t6021_chman_layout`).
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
    /// Device address of its ring, as the firmware wrote it.
    pub ring: u64,
}

impl Channel {
    /// Offset in 'IPC ' (at `ipc_dva`) of slot `index`, taken modulo the
    /// ring size.
    pub fn slot(&self, index: u64, ipc_dva: u64) -> Option<usize> {
        let i = index.checked_rem(self.slots)?;
        let ring = self.ring.checked_sub(ipc_dva)?;
        let off = ring.checked_add(i.checked_mul(SLOT_LEN as u64)?)?;
        usize::try_from(off).ok()
    }

    /// The doorbell mask of this channel.
    pub fn doorbell(&self) -> u32 {
        1u32.checked_shl(self.bit).unwrap_or(0)
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
    /// An entry's slot count differs.
    Slots {
        /// Entry index.
        index: usize,
        /// The count found.
        found: u64,
    },
    /// An entry's ring is not at 'IPC ' + its offset in [`LAYOUT`].
    Ring {
        /// Entry index.
        index: usize,
        /// The address found.
        found: u64,
        /// The address expected.
        expected: u64,
    },
    /// The 'IPC ' surface cannot hold the layout (or its address plus the
    /// layout overflows).
    Surface {
        /// Bytes of the surface.
        len: u64,
        /// Bytes the layout needs.
        need: u64,
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
    /// a surface of `ipc_len` bytes at device address `ipc_dva`.
    pub fn parse(bytes: &[u8], ipc_dva: u64, ipc_len: u64) -> Result<Table, TableError> {
        let mut t = Table::default();
        for (index, ch) in t.channels.iter_mut().enumerate() {
            let start = index * ENTRY_LEN;
            let entry = bytes
                .get(start..start + ENTRY_LEN)
                .ok_or(TableError::Short)?;
            *ch = parse_entry(index, entry)?;
        }
        t.check_geometry(ipc_dva, ipc_len)?;
        Ok(t)
    }

    /// Checks that every ring is exactly where [`LAYOUT`] puts it in the
    /// surface of `ipc_len` bytes at `ipc_dva`, with its slot count (the
    /// rings then lie inside the surface and never overlap).
    pub fn check_geometry(&self, ipc_dva: u64, ipc_len: u64) -> Result<(), TableError> {
        let surface = TableError::Surface {
            len: ipc_len,
            need: LAYOUT_SPAN,
        };
        if ipc_len < LAYOUT_SPAN || ipc_dva.checked_add(LAYOUT_SPAN).is_none() {
            return Err(surface);
        }
        for (index, (ch, spec)) in self.channels.iter().zip(LAYOUT.iter()).enumerate() {
            if ch.slots != spec.slots {
                return Err(TableError::Slots {
                    index,
                    found: ch.slots,
                });
            }
            let expected = ipc_dva.checked_add(spec.ring).ok_or(surface)?;
            if ch.ring != expected {
                return Err(TableError::Ring {
                    index,
                    found: ch.ring,
                    expected,
                });
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
/// writes it for a surface at `ipc_dva` (for the model and tests).
pub fn encode_entry(spec: &ChannelSpec, ipc_dva: u64, out: &mut [u8]) -> Option<()> {
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
    put_u64(entry, NAME_LEN + 16, ipc_dva.checked_add(spec.ring)?)
}

/// Bytes of an IO_T2H event.
pub const EVENT_LEN: usize = 0x28;
/// The shortest IO_T2H payload that can finish a call: its fields end at
/// the state word (RT reads no further).
pub const EVENT_MIN_LEN: usize = 0x20;
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
    /// Fewer than [`EVENT_MIN_LEN`] bytes.
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

/// Decodes an IO_T2H event from its first [`EVENT_MIN_LEN`] or more bytes
/// (the last 8 of the 0x28 are not interpreted).
pub fn decode_event(b: &[u8]) -> Result<Event, EventError> {
    if b.len() < EVENT_MIN_LEN {
        return Err(EventError::Short);
    }
    let w = |off| u32_at(b, off).ok_or(EventError::Short);
    // The record decides on the length, the cookie and the state only; the
    // +0x04 and +0x18 words are reported by `event_anomaly`, never a
    // reason to drop an event (a value the record did not see must not
    // turn a finished call into a timeout and a quarantine).
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

/// What an event carries that the record never saw: +0x04 other than
/// [`EVENT_MAGIC`] or +0x18 other than 0. Counted and logged, not fatal.
pub fn event_anomaly(b: &[u8]) -> Option<EventError> {
    let magic = u32_at(b, 4)?;
    if magic != EVENT_MAGIC {
        return Some(EventError::Magic { found: magic });
    }
    let zero = u32_at(b, 0x18)?;
    (zero != 0).then_some(EventError::Reserved { found: zero })
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
/// SHAREDMALLOC alignment, of sizes and addresses.
pub const SM_ALIGN: u64 = 0x4000;
/// Offset of the size in a SHAREDMALLOC request slot.
pub const SM_SIZE: usize = 0x08;
/// Offset of the tag in a SHAREDMALLOC request slot.
pub const SM_TAG: usize = 0x10;

/// A SHAREDMALLOC request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmRequest {
    /// The firmware's tag (a `u64` that must fit a `u32`).
    pub tag: u32,
    /// Bytes requested.
    pub size: u64,
}

/// Why a SHAREDMALLOC request was not granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmError {
    /// Fewer than 0x18 bytes.
    Short,
    /// Word 0 of the published slot is not 0.
    Header {
        /// Its value.
        found: u64,
    },
    /// The tag does not fit a `u32`.
    Tag {
        /// Its value.
        found: u64,
    },
    /// A size of 0, not 16 KiB aligned, or above [`SM_MAX_BUFFER`].
    Size {
        /// Bytes requested.
        size: u64,
    },
    /// [`SM_MAX_BUFFERS`] were granted already.
    Count,
    /// The grant would pass [`SM_MAX_TOTAL`].
    Total {
        /// Bytes granted so far.
        granted: u64,
        /// Bytes requested.
        size: u64,
    },
    /// No (usable) memory for it.
    Alloc(MemError),
}

/// Decodes a SHAREDMALLOC request from its published slot: word0 exactly
/// 0, the size at [`SM_SIZE`], a tag that fits a `u32` at [`SM_TAG`]. The
/// size is not judged here (see [`check_grant`]).
pub fn decode_sm_request(slot: &[u8]) -> Result<SmRequest, SmError> {
    let header = u64_at(slot, 0).ok_or(SmError::Short)?;
    if header != 0 {
        return Err(SmError::Header { found: header });
    }
    let size = u64_at(slot, SM_SIZE).ok_or(SmError::Short)?;
    let tag = u64_at(slot, SM_TAG).ok_or(SmError::Short)?;
    let tag = u32::try_from(tag).map_err(|_| SmError::Tag { found: tag })?;
    Ok(SmRequest { tag, size })
}

/// The grant rule: a size that is nonzero, 16 KiB aligned and at most
/// [`SM_MAX_BUFFER`], with `granted` buffers of `bytes` in all before it.
pub fn check_grant(size: u64, granted: u32, bytes: u64) -> Result<(), SmError> {
    if size == 0 || size % SM_ALIGN != 0 || size > SM_MAX_BUFFER {
        return Err(SmError::Size { size });
    }
    if granted >= SM_MAX_BUFFERS {
        return Err(SmError::Count);
    }
    match bytes.checked_add(size) {
        Some(total) if total <= SM_MAX_TOTAL => Ok(()),
        _ => Err(SmError::Total {
            granted: bytes,
            size,
        }),
    }
}

/// Encodes a SHAREDMALLOC request's payload (everything but word0, which
/// the publisher writes last, as 0) into a slot image.
pub fn encode_sm_request(r: &SmRequest, slot: &mut [u8]) -> Option<()> {
    slot.get_mut(..SLOT_LEN)?.fill(0);
    put_u64(slot, SM_SIZE, r.size)?;
    put_u64(slot, SM_TAG, u64::from(r.tag))
}

/// The SHAREDMALLOC buffers granted so far, which the [`FwMem`] keeps
/// behind its handles (the host only counts them). A buffer must stay
/// valid until reboot: the firmware may use it at any time.
pub trait SharedBufs {
    /// The buffer the `index`-th (0-based) allocation of
    /// [`super::boot::BufKind::Shared`] returned, if there was one.
    fn shared_buf(&mut self, index: u32) -> Option<FwBuf>;
}

/// Why an exchange failed. Every error quarantines the [`Host`] except a
/// second [`Host::start`] while an exchange is in flight ([`ExchangeError::Busy`])
/// and [`ExchangeError::Idle`], which are caller misuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeError {
    /// An earlier failure quarantined the device (the driver answers `EIO`
    /// until reboot).
    Quarantined,
    /// An exchange is already in flight (misuse, no quarantine), or the IO
    /// slot at the cursor is not host-owned (the ring is not where the host
    /// left it: quarantines).
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
    /// The channel table no longer matches the layout (checked before
    /// every exchange).
    Table(TableError),
    /// A SHAREDMALLOC request was malformed or refused; it stays
    /// unanswered.
    SharedMalloc {
        /// Its slot (the ring's cursor).
        cursor: u64,
        /// Why.
        error: SmError,
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
    /// The firmware answered in order; the reply is in the command
    /// buffer.
    Done {
        /// Bytes of the reply (the command's length).
        len: usize,
        /// The reply's status (0 = success).
        status: u16,
    },
}

/// A reply received in order ([`Host::exchange_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Bytes of the reply (the command's length).
    pub len: usize,
    /// Its opcode, the command's.
    pub opcode: u16,
    /// Its status (0 = success).
    pub status: u16,
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
    /// SHAREDMALLOC requests refused (each fails its exchange).
    pub sm_refused: u32,
    /// Target→host slots consumed.
    pub drained: u64,
    /// IO_T2H slots shorter than an event, or that did not decode as one.
    pub bad_events: u32,
    /// Finish events dropped because nobody claimed them in time.
    pub lost_finishes: u32,
    /// IO_T2H slots whose payload address lay outside 'IPC ' and every
    /// SHAREDMALLOC buffer: skipped unread, as the record does.
    pub bad_pointers: u32,
    /// Events used although a word the record did not decide on differed
    /// from what it saw ([`event_anomaly`]).
    pub odd_events: u32,
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
    /// The last skipped payload pointer `(channel, dva, len)`, for logs.
    last_bad_pointer: Option<(usize, u64, u64)>,
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
        table
            .check_geometry(ipc.dva, ipc.len as u64)
            .map_err(ExchangeError::Table)?;
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
            last_bad_pointer: None,
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

    /// The 'IPC ' surface.
    pub fn ipc(&self) -> &FwBuf {
        &self.ipc
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
            .slot(cursor, self.ipc.dva)
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
        let r = self.recheck_table(p);
        self.guard(r)?;
        let slot = self.slot_of(IO, self.io_cursor)?;
        let r = self.publish(p, slot, message);
        self.guard(r)?;
        self.in_flight = Some(InFlight { slot, len, opcode });
        Ok(())
    }

    /// Reads the table again and checks it against the layout, as OA does
    /// before every exchange (the firmware must not have moved a ring).
    fn recheck_table<M: FwMem>(&self, mem: &mut M) -> Result<(), ExchangeError> {
        let mut t = Table::default();
        let mut entry = [0u8; ENTRY_LEN];
        for (index, ch) in t.channels.iter_mut().enumerate() {
            read(mem, &self.ipc, index * ENTRY_LEN, &mut entry)?;
            *ch = parse_entry(index, &entry).map_err(ExchangeError::Table)?;
        }
        // Names, types, bits, counts and rings all equal the layout, so
        // the table is still the one validated at boot.
        t.check_geometry(self.ipc.dva, self.ipc.len as u64)
            .map_err(ExchangeError::Table)
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
        let status = msg::reply_status(&header, f.opcode).map_err(ExchangeError::Msg)?;
        Ok(Progress::Done { len: f.len, status })
    }

    /// Copies the reply (or its first `out.len()` bytes) out of the command
    /// buffer.
    pub fn read_reply<M: FwMem>(&self, mem: &mut M, out: &mut [u8]) -> Result<(), ExchangeError> {
        read(mem, &self.cmd, 0, out).map_err(ExchangeError::Mem)
    }

    /// Serves every published SHAREDMALLOC request; a request that is
    /// malformed or breaks the grant rule fails the exchange.
    fn serve_shared_malloc<P: Regs + FwMem>(&mut self, p: &mut P) -> Result<(), ExchangeError> {
        let ch = self.chan(SHAREDMALLOC);
        for _ in 0..ch.slots {
            let cursor = self.t2h_cursor[SHAREDMALLOC];
            let off = self.slot_of(SHAREDMALLOC, cursor)?;
            let mut word0 = [0u8; 8];
            read(p, &self.ipc, off, &mut word0)?;
            if u64::from_le_bytes(word0) & OWNER != 0 {
                break;
            }
            // Read the request only after seeing it published.
            p.barrier();
            let mut slot = [0u8; SM_TAG + 8];
            read(p, &self.ipc, off, &mut slot)?;
            let (dva, count) = decode_sm_request(&slot)
                .and_then(|req| self.sm_alloc(p, req))
                .map_err(|error| {
                    self.stats.sm_refused = self.stats.sm_refused.wrapping_add(1);
                    ExchangeError::SharedMalloc { cursor, error }
                })?;
            let mut answer = [0u8; 16];
            answer[8..].copy_from_slice(&count.to_le_bytes());
            let ipc = self.ipc;
            write(p, &ipc, off.saturating_add(8), &answer)?;
            p.barrier();
            write(p, &ipc, off, &(dva | OWNER).to_le_bytes())?;
            p.barrier();
            p.write32(regs::IPI_SET, ch.doorbell());
            self.t2h_cursor[SHAREDMALLOC] = cursor.wrapping_add(1);
        }
        Ok(())
    }

    /// Grants a SHAREDMALLOC buffer under the rule: its address and the
    /// number of buffers granted so far, this one included.
    fn sm_alloc<M: FwMem>(&mut self, mem: &mut M, req: SmRequest) -> Result<(u64, u64), SmError> {
        check_grant(req.size, self.stats.sm_buffers, self.stats.sm_bytes)?;
        let len = usize::try_from(req.size).map_err(|_| SmError::Size { size: req.size })?;
        // FwMem hands out zeroed buffers.
        let b = mem
            .alloc(super::boot::BufKind::Shared, len)
            .map_err(SmError::Alloc)?;
        if !buffer_ok(&b, len) {
            return Err(SmError::Alloc(MemError::BadBuffer));
        }
        self.stats.sm_buffers += 1;
        self.stats.sm_bytes = self.stats.sm_bytes.saturating_add(req.size);
        Ok((b.dva, u64::from(self.stats.sm_buffers)))
    }

    /// Publishes, then polls every `step_us` up to `polls` times; on
    /// success copies the reply into `reply` (up to its length) and returns
    /// the reply's length. A nonzero status quarantines, as every failed
    /// exchange does in the record.
    pub fn exchange<P: Regs + Delay + FwMem + SharedBufs>(
        &mut self,
        p: &mut P,
        message: &[u8],
        reply: &mut [u8],
        polls: u32,
        step_us: u32,
    ) -> Result<usize, ExchangeError> {
        let r = self.exchange_status(p, message, reply, polls, step_us)?;
        if r.status != 0 {
            return Err(self.fail(ExchangeError::Msg(msg::MsgError::Status {
                opcode: r.opcode,
                status: r.status,
            })));
        }
        Ok(r.len)
    }

    /// [`Self::exchange`] that hands back a nonzero status instead of
    /// quarantining: the firmware returned the slot in order and answered
    /// the command's opcode, so the channel is as the protocol expects and
    /// the caller decides what the status means. Everything else (timeout,
    /// a foreign slot or opcode, memory) still quarantines.
    /// After the reply BUF_T2H and IO_T2H are drained, as OA does after
    /// every command.
    pub fn exchange_status<P: Regs + Delay + FwMem + SharedBufs>(
        &mut self,
        p: &mut P,
        message: &[u8],
        reply: &mut [u8],
        polls: u32,
        step_us: u32,
    ) -> Result<Reply, ExchangeError> {
        self.start(p, message)?;
        let opcode = self.in_flight.map(|f| f.opcode).unwrap_or_default();
        for i in 0..=polls {
            if let Progress::Done { len, status } = self.poll(p)? {
                let n = len.min(reply.len());
                let out = reply.get_mut(..n).unwrap_or(&mut []);
                let r = self.read_reply(p, out);
                self.guard(r)?;
                self.drain(p)?;
                return Ok(Reply {
                    len,
                    opcode,
                    status,
                });
            }
            if i < polls {
                p.sleep_us(step_us);
            }
        }
        Err(self.fail(ExchangeError::Timeout { polls }))
    }

    /// Consumes every published slot of BUF_T2H and IO_T2H, keeping finish
    /// events for [`Self::take_finish`]. Returns the slots consumed.
    pub fn drain<P: Regs + FwMem + SharedBufs>(&mut self, p: &mut P) -> Result<u32, ExchangeError> {
        if self.quarantined {
            return Err(ExchangeError::Quarantined);
        }
        let mut n = 0;
        for index in [BUF_T2H, IO_T2H] {
            let r = self.drain_channel(p, index);
            n += self.guard(r)?;
        }
        Ok(n)
    }

    /// Consumes the published slots of one target→host channel: reads an
    /// IO_T2H event through its pointer, then hands the slot back.
    fn drain_channel<P: Regs + FwMem + SharedBufs>(
        &mut self,
        p: &mut P,
        index: usize,
    ) -> Result<u32, ExchangeError> {
        let ch = self.chan(index);
        let mut n = 0u32;
        for _ in 0..ch.slots {
            let cursor = self.t2h_cursor.get(index).copied().unwrap_or(0);
            let off = self.slot_of(index, cursor)?;
            let mut w = [0u8; 8];
            read(p, &self.ipc, off, &mut w)?;
            let word0 = u64::from_le_bytes(w);
            if word0 & OWNER != 0 {
                break;
            }
            // Read the length only after seeing the slot published.
            p.barrier();
            read(p, &self.ipc, off.saturating_add(8), &mut w)?;
            let len = u64::from_le_bytes(w);
            if index == IO_T2H {
                self.take_event(p, index, word0, len)?;
            }
            let ipc = self.ipc;
            write(p, &ipc, off, &(word0 | OWNER).to_le_bytes())?;
            p.barrier();
            p.write32(regs::IPI_SET, ch.doorbell());
            if let Some(c) = self.t2h_cursor.get_mut(index) {
                *c = c.wrapping_add(1);
            }
            n += 1;
        }
        self.stats.drained = self.stats.drained.wrapping_add(u64::from(n));
        Ok(n)
    }

    /// Reads the event at `dva` (`len` bytes) posted on channel `index`.
    fn take_event<M: FwMem + SharedBufs>(
        &mut self,
        mem: &mut M,
        index: usize,
        dva: u64,
        len: u64,
    ) -> Result<(), ExchangeError> {
        if len < EVENT_MIN_LEN as u64 {
            self.stats.bad_events = self.stats.bad_events.wrapping_add(1);
            return Ok(());
        }
        // As the record does, a payload outside the memory the host gave
        // the firmware is not read; the slot is handed back all the same.
        let Some((buf, off)) = self.resolve(mem, dva, len) else {
            self.stats.bad_pointers = self.stats.bad_pointers.wrapping_add(1);
            self.last_bad_pointer = Some((index, dva, len));
            return Ok(());
        };
        let mut payload = [0u8; EVENT_LEN];
        let n = usize::try_from(len).map_or(EVENT_LEN, |l| l.min(EVENT_LEN));
        let bytes = payload.get_mut(..n).unwrap_or(&mut []);
        read(mem, &buf, off, bytes)?;
        self.note_event(bytes);
        Ok(())
    }

    /// The buffer and offset of `[dva, dva + len)`, if it lies wholly
    /// inside 'IPC ' or one SHAREDMALLOC buffer this host granted.
    fn resolve<M: SharedBufs>(&self, mem: &mut M, dva: u64, len: u64) -> Option<(FwBuf, usize)> {
        let inside = |b: &FwBuf| -> Option<usize> {
            let end = dva.checked_add(len)?;
            let b_end = b.dva.checked_add(b.len as u64)?;
            if dva < b.dva || end > b_end {
                return None;
            }
            usize::try_from(dva - b.dva).ok()
        };
        if let Some(off) = inside(&self.ipc) {
            return Some((self.ipc, off));
        }
        (0..self.stats.sm_buffers).find_map(|i| {
            let b = mem.shared_buf(i).filter(|b| buffer_ok(b, 0))?;
            inside(&b).map(|off| (b, off))
        })
    }

    /// Keeps a finish event.
    fn note_event(&mut self, payload: &[u8]) {
        if event_anomaly(payload).is_some() {
            self.stats.odd_events = self.stats.odd_events.wrapping_add(1);
        }
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

    /// The last payload pointer that was skipped because it lay outside the
    /// host's memory: `(channel, dva, len)`.
    pub fn last_bad_pointer(&self) -> Option<(usize, u64, u64)> {
        self.last_bad_pointer
    }

    /// Forgets every finish event kept so far (before a CALL whose cookie
    /// equals an earlier call's: one left from an earlier call must not end
    /// it). Returns how many were forgotten.
    pub fn forget_finished(&mut self) -> u32 {
        let mut n = 0;
        for s in self.finished.iter_mut() {
            if s.take().is_some() {
                n += 1;
            }
        }
        n
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
    pub fn wait_finish<P: Regs + Delay + FwMem + SharedBufs>(
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

/// Zeroes words 0..2 of every host→target slot and sets its owner byte to 1
/// (the ring-owner init that must precede the legacy ack).
pub fn init_h2t_owners<M: FwMem + ?Sized>(
    mem: &mut M,
    ipc: &FwBuf,
    table: &Table,
) -> Result<(), MemError> {
    // As the record: the slot's first 24 bytes (words 0..2) zeroed, then
    // byte 0 = 1.
    let mut owned = [0u8; 24];
    owned[0] = 1;
    for ch in table.channels.iter().filter(|c| c.kind == KIND_H2T) {
        for i in 0..ch.slots {
            let off = ch.slot(i, ipc.dva).ok_or(MemError::OutOfRange)?;
            write(mem, ipc, off, &owned)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16 KiB-aligned 'IPC ' address well inside the 32-bit space.
    const IPC: u64 = 0x8_0000;

    fn table_bytes() -> [u8; TABLE_LEN] {
        let mut b = [0u8; TABLE_LEN];
        for (i, spec) in LAYOUT.iter().enumerate() {
            encode_entry(spec, IPC, &mut b[i * ENTRY_LEN..]).unwrap();
        }
        b
    }

    #[test]
    fn layout_is_the_recorded_one() {
        let t = Table::parse(&table_bytes(), IPC, IPC_SIZE as u64).unwrap();
        let last = LAYOUT[DATA_CHAIN_H2T];
        assert_eq!(last.ring + last.slots * SLOT_LEN as u64 + 0x40, LAYOUT_SPAN);
        // Rings are back to back after the table.
        assert_eq!(LAYOUT[TERMINAL].ring, TABLE_LEN as u64);
        for w in LAYOUT.windows(2) {
            assert_eq!(w[0].ring + w[0].slots * 64, w[1].ring, "{}", w[1].name);
        }
        assert_eq!(t.channels[IO].ring, IPC + 0xc800, "absolute");
        assert_eq!(t.channels[IO].slot(0x11, IPC), Some(0xc800 + 64));
        assert_eq!(t.channels[IO].slot(0, IPC + 0x1_0000), None);
        assert_eq!(t.channels[IO].doorbell(), 2);
        assert!(LAYOUT_SPAN <= IPC_SIZE as u64);
    }

    /// The table entries, byte for byte: {name[0x40], u32 type, u32 bit, u64
    /// slots, u64 ring = IPC + offset} with OA's static layout (BH
    /// `ane_t6021_chman_layout` and the descriptor struct; BH is
    /// omarchy-ane ane/t6021/ane_t6021_boot.h, index id 70221928368, no
    /// commit exposed).
    #[test]
    fn golden_table_entries() {
        let want: [(&str, u32, u32, u64, u64); CHANNEL_COUNT] = [
            ("TERMINAL", 2, 0, 0x300, 0x800),
            ("IO", 0, 1, 0x10, 0xc800),
            ("DEBUG", 0, 2, 8, 0xcc00),
            ("BUF_H2T", 0, 3, 0x40, 0xce00),
            ("BUF_T2H", 1, 4, 0x40, 0xde00),
            ("SHAREDMALLOC", 1, 5, 8, 0xee00),
            ("IO_T2H", 1, 6, 0x40, 0xf000),
            ("DATA_CHAIN_H2T", 0, 7, 0x10, 0x1_0000),
        ];
        let b = table_bytes();
        for (i, (name, kind, bit, slots, off)) in want.into_iter().enumerate() {
            let e = &b[i * ENTRY_LEN..(i + 1) * ENTRY_LEN];
            let mut img = [0u8; ENTRY_LEN];
            img[..name.len()].copy_from_slice(name.as_bytes());
            img[0x40..0x44].copy_from_slice(&kind.to_le_bytes());
            img[0x44..0x48].copy_from_slice(&bit.to_le_bytes());
            img[0x48..0x50].copy_from_slice(&slots.to_le_bytes());
            img[0x50..0x58].copy_from_slice(&(IPC + off).to_le_bytes());
            assert_eq!(e, &img[..], "{name}");
        }
    }

    #[test]
    fn table_rejects() {
        let good = table_bytes();
        let len = IPC_SIZE as u64;
        assert_eq!(
            Table::parse(&good[..0x7ff], IPC, len),
            Err(TableError::Short)
        );
        assert_eq!(
            Table::parse(&good, IPC, 0x10000),
            Err(TableError::Surface {
                len: 0x10000,
                need: LAYOUT_SPAN
            })
        );
        assert_eq!(
            Table::parse(&good, u64::MAX - 0x1000, len),
            Err(TableError::Surface {
                len,
                need: LAYOUT_SPAN
            })
        );
        // The same table for a surface somewhere else: every ring is off.
        assert_eq!(
            Table::parse(&good, IPC + 0x4000, len),
            Err(TableError::Ring {
                index: TERMINAL,
                found: IPC + 0x800,
                expected: IPC + 0x4800
            })
        );
        let mut b = good;
        b[ENTRY_LEN] = b'X';
        assert_eq!(
            Table::parse(&b, IPC, len),
            Err(TableError::Name { index: 1 })
        );
        let mut b = good;
        b[ENTRY_LEN + 3] = b'Z'; // "IO\0Z": trailing garbage after the name
        assert_eq!(
            Table::parse(&b, IPC, len),
            Err(TableError::Name { index: 1 })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN] = 1;
        assert_eq!(
            Table::parse(&b, IPC, len),
            Err(TableError::Kind { index: 1, found: 1 })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 4] = 9;
        assert_eq!(
            Table::parse(&b, IPC, len),
            Err(TableError::Bit { index: 1, found: 9 })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 8] = 0x20; // IO with 32 slots
        assert_eq!(
            Table::parse(&b, IPC, len),
            Err(TableError::Slots {
                index: 1,
                found: 0x20
            })
        );
        // The old reading: a ring offset instead of an address.
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 16..ENTRY_LEN + NAME_LEN + 24]
            .copy_from_slice(&0xc800u64.to_le_bytes());
        assert_eq!(
            Table::parse(&b, IPC, len),
            Err(TableError::Ring {
                index: 1,
                found: 0xc800,
                expected: IPC + 0xc800
            })
        );
        let mut b = good;
        b[ENTRY_LEN + NAME_LEN + 16] = 0x40; // IO ring one slot late
        assert!(matches!(
            Table::parse(&b, IPC, len),
            Err(TableError::Ring { index: 1, .. })
        ));
    }

    /// The event payload, byte for byte: {u32 seq, u32 0x300, u64 cookie @8,
    /// u32 program @0x10, u32 process @0x14, u32 0 @0x18, u32 state @0x1c},
    /// 0x28 bytes (omarchy-ane RT, the event comment and
    /// `ane_rtclient_drain_t2h`, index id 70070193265, no commit exposed;
    /// receipts/2026-09-30-t6021-call-wait/README.md at
    /// 7a402cd62bcdf4390a479d24f67683c3f1bc2300).
    #[test]
    fn golden_event_payload() {
        let e = Event {
            seq: 0x11,
            cookie: 0xadd0,
            program: 20,
            process: 21,
            state: EventState::Finish,
        };
        let mut b = [0xffu8; EVENT_LEN];
        encode_event(&e, &mut b).unwrap();
        let mut want = [0u8; 0x28];
        want[0..4].copy_from_slice(&0x11u32.to_le_bytes());
        want[4..8].copy_from_slice(&0x300u32.to_le_bytes());
        want[8..0x10].copy_from_slice(&0xadd0u64.to_le_bytes());
        want[0x10..0x14].copy_from_slice(&20u32.to_le_bytes());
        want[0x14..0x18].copy_from_slice(&21u32.to_le_bytes());
        want[0x1c..0x20].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(b, want);
        // RT reads only the first 0x20 bytes.
        assert_eq!(decode_event(&b[..EVENT_MIN_LEN]), Ok(e));
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
        assert_eq!(decode_event(&b[..0x1f]), Err(EventError::Short));
        assert_eq!(event_anomaly(&b), None);
        // Words the record never decided on: still the same event, with
        // the anomaly reported.
        let mut odd = b;
        odd[4] = 1;
        assert_eq!(decode_event(&odd), Ok(e));
        assert_eq!(
            event_anomaly(&odd),
            Some(EventError::Magic { found: 0x301 })
        );
        let mut odd = b;
        odd[0x18] = 1;
        assert_eq!(decode_event(&odd), Ok(e));
        assert_eq!(event_anomaly(&odd), Some(EventError::Reserved { found: 1 }));
        let mut bad = b;
        bad[0x1c] = 2;
        assert_eq!(decode_event(&bad), Err(EventError::State { found: 2 }));
        bad[0x1c] = 0;
        assert_eq!(decode_event(&bad).unwrap().state, EventState::Dispatch);
    }

    /// The SHAREDMALLOC request, byte for byte: word0 exactly 0, u64 size
    /// @0x08, tag @0x10 as a u64 that must fit a u32 (omarchy-ane RT
    /// `ane_rtclient_legacy_exchange`, the malloc-ring service, index id
    /// 70070193265, no commit exposed).
    #[test]
    fn golden_shared_malloc_request() {
        let r = SmRequest {
            tag: 0x5054_424c,
            size: 0x1_0000,
        };
        let mut s = [0xffu8; SLOT_LEN];
        encode_sm_request(&r, &mut s).unwrap();
        let mut want = [0u8; SLOT_LEN];
        want[8..0x10].copy_from_slice(&0x1_0000u64.to_le_bytes());
        want[0x10..0x18].copy_from_slice(&0x5054_424cu64.to_le_bytes());
        assert_eq!(s, want);
        assert_eq!(decode_sm_request(&s), Ok(r));
    }

    #[test]
    fn shared_malloc_requests() {
        let r = SmRequest {
            tag: 7,
            size: 0x4000,
        };
        let mut s = [0u8; SLOT_LEN];
        encode_sm_request(&r, &mut s).unwrap();
        let mut bad = s;
        bad[0] = 1;
        assert_eq!(decode_sm_request(&bad), Err(SmError::Header { found: 1 }));
        let mut bad = s;
        bad[7] = 0x80;
        assert_eq!(
            decode_sm_request(&bad),
            Err(SmError::Header {
                found: 0x8000_0000_0000_0000
            })
        );
        let mut bad = s;
        bad[0x14] = 1; // tag 2^32 + 7
        assert_eq!(
            decode_sm_request(&bad),
            Err(SmError::Tag {
                found: (1 << 32) | 7
            })
        );
        assert_eq!(decode_sm_request(&s[..0x17]), Err(SmError::Short));
    }

    #[test]
    fn shared_malloc_grant_rule() {
        assert_eq!(check_grant(0x4000, 0, 0), Ok(()));
        assert_eq!(check_grant(SM_MAX_BUFFER, 0, 0), Ok(()));
        for size in [0, 0x1000, 0x4001, SM_MAX_BUFFER + SM_ALIGN, u64::MAX] {
            assert_eq!(check_grant(size, 0, 0), Err(SmError::Size { size }));
        }
        assert_eq!(check_grant(0x4000, SM_MAX_BUFFERS - 1, 0), Ok(()));
        assert_eq!(check_grant(0x4000, SM_MAX_BUFFERS, 0), Err(SmError::Count));
        assert_eq!(check_grant(0x4000, 1, SM_MAX_TOTAL - 0x4000), Ok(()));
        assert_eq!(
            check_grant(0x8000, 1, SM_MAX_TOTAL - 0x4000),
            Err(SmError::Total {
                granted: SM_MAX_TOTAL - 0x4000,
                size: 0x8000
            })
        );
        assert_eq!(
            check_grant(0x4000, 1, u64::MAX),
            Err(SmError::Total {
                granted: u64::MAX,
                size: 0x4000
            })
        );
    }
}
