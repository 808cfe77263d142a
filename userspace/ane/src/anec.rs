// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! eiln's `.anec` container: a compiled H13 program ready for submission.
//!
//! An `.anec` file is a fixed little-endian header followed by the payload
//! the driver runs (facts: `shared/reference/td.md` §4, `eiln.md` §7.2;
//! checked against the `sum.anec`, `relu.anec` and `conv.anec` fixtures):
//!
//! | offset | field | type |
//! |---|---|---|
//! | 0x000 | `size`: payload bytes, `round_up(tsk_size, 16) + krn_size` | u64 |
//! | 0x008 | `td_size`: bytes of one TD | u32 |
//! | 0x00C | `td_count`: TDs in the chain | u32 |
//! | 0x010 | `tsk_size`: bytes of the TD chain | u64 |
//! | 0x018 | `krn_size`: bytes of weights after it | u64 |
//! | 0x020 | `src_count`, 0x024 `dst_count`: inputs and outputs | u32 |
//! | 0x028 | `tiles[32]`: buffer size of each BAR slot in 16 KiB units | u32 |
//! | 0x0A8 | `nchw[32][6]`: `{N, C, H, W, plane stride, row stride}` per slot | u64 |
//!
//! The header structure is 0x6A8 bytes. The payload starts at file offset
//! 0x1000 in files written by eiln's `anecc` (and in every fixture); eiln's
//! libane reads it at 0x800 since its commit e585747. The two cannot be
//! confused: the file length is the payload offset plus `size`, and this
//! parser accepts either (see [`PayloadOffset`]).
//!
//! Slot conventions (libane): slot 0 is the payload (TDs then weights),
//! slot 1 the weights (the driver derives it; `tiles[1]` is 0), slots 2–3
//! scratch, then outputs at slots `4..4+dst_count` and inputs after them.
//! The file has no magic and no version; validation is therefore thorough:
//! sizes must agree, the TD chain must be well formed and exactly
//! `td_count` long, and every input/output slot must describe a valid ANE
//! tensor that fits its buffer.

use crate::hwx::{self, AneArch, ChainError, Direction, Hwx};
use crate::tensor::{Shape, ShapeError, BUFFER_GRANULE};

/// Bytes of the header structure.
pub const HEADER_SIZE: usize = 0x6A8;
/// Number of BAR slots.
pub const SLOTS: usize = 32;
/// The first input/output slot.
pub const FIRST_IO_SLOT: usize = 4;
/// `tiles[]` unit: 16 KiB (an ANE buffer granule, not the page size).
pub const TILE_BYTES: u64 = BUFFER_GRANULE as u64;
/// Largest TD size: `td_size/4 − 1` must fit the 9-bit TD size fields
/// (W1 NextSize, the program-state size word).
pub const TD_SIZE_MAX: u32 = 0x800;

/// Where the payload starts in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadOffset {
    /// 0x1000, as eiln's `anecc` writes (and libane read before e585747).
    Anecc,
    /// 0x800, as eiln's libane reads since e585747.
    Libane,
}

impl PayloadOffset {
    /// The offset in bytes.
    pub fn bytes(self) -> usize {
        match self {
            PayloadOffset::Anecc => 0x1000,
            PayloadOffset::Libane => 0x800,
        }
    }
}

/// The tensor geometry of one slot: `{N, C, H, W, plane stride, row
/// stride}` (strides in bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Nchw {
    /// Batch.
    pub n: u64,
    /// Channels.
    pub c: u64,
    /// Height.
    pub h: u64,
    /// Width.
    pub w: u64,
    /// Bytes from one channel plane to the next.
    pub plane_stride: u64,
    /// Bytes from one row to the next.
    pub row_stride: u64,
}

/// The decoded header, unvalidated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnecHeader {
    /// Payload bytes.
    pub size: u64,
    /// Bytes of one TD.
    pub td_size: u32,
    /// Number of TDs.
    pub td_count: u32,
    /// Bytes of the TD chain.
    pub tsk_size: u64,
    /// Bytes of weights.
    pub krn_size: u64,
    /// Number of inputs.
    pub src_count: u32,
    /// Number of outputs.
    pub dst_count: u32,
    /// Buffer size of each slot in 16 KiB units.
    pub tiles: [u32; SLOTS],
    /// Tensor geometry of each slot.
    pub nchw: [Nchw; SLOTS],
}

fn rd32(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn rd64(b: &[u8], o: usize) -> u64 {
    b.get(o..o + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

impl AnecHeader {
    /// Decodes the first [`HEADER_SIZE`] bytes of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<AnecHeader, AnecError> {
        if bytes.len() < HEADER_SIZE {
            return Err(AnecError::TooShort { len: bytes.len() });
        }
        let mut tiles = [0u32; SLOTS];
        for (i, t) in tiles.iter_mut().enumerate() {
            *t = rd32(bytes, 0x28 + 4 * i);
        }
        let mut nchw = [Nchw::default(); SLOTS];
        for (i, g) in nchw.iter_mut().enumerate() {
            let v = |k: usize| rd64(bytes, 0xA8 + 48 * i + 8 * k);
            *g = Nchw {
                n: v(0),
                c: v(1),
                h: v(2),
                w: v(3),
                plane_stride: v(4),
                row_stride: v(5),
            };
        }
        Ok(AnecHeader {
            size: rd64(bytes, 0x00),
            td_size: rd32(bytes, 0x08),
            td_count: rd32(bytes, 0x0C),
            tsk_size: rd64(bytes, 0x10),
            krn_size: rd64(bytes, 0x18),
            src_count: rd32(bytes, 0x20),
            dst_count: rd32(bytes, 0x24),
            tiles,
            nchw,
        })
    }

    /// Encodes the header structure ([`HEADER_SIZE`] bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_SIZE);
        v.extend_from_slice(&self.size.to_le_bytes());
        v.extend_from_slice(&self.td_size.to_le_bytes());
        v.extend_from_slice(&self.td_count.to_le_bytes());
        v.extend_from_slice(&self.tsk_size.to_le_bytes());
        v.extend_from_slice(&self.krn_size.to_le_bytes());
        v.extend_from_slice(&self.src_count.to_le_bytes());
        v.extend_from_slice(&self.dst_count.to_le_bytes());
        for t in self.tiles {
            v.extend_from_slice(&t.to_le_bytes());
        }
        for g in &self.nchw {
            for x in [g.n, g.c, g.h, g.w, g.plane_stride, g.row_stride] {
                v.extend_from_slice(&x.to_le_bytes());
            }
        }
        v
    }

    /// The slot of output `i` (libane's `dst_bdx`).
    pub fn dst_slot(&self, i: usize) -> usize {
        FIRST_IO_SLOT + i
    }

    /// The slot of input `i` (libane's `src_bdx`).
    pub fn src_slot(&self, i: usize) -> usize {
        FIRST_IO_SLOT + self.dst_count as usize + i
    }
}

/// Why an `.anec` file or header was rejected. Every variant names the
/// field and value at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnecError {
    /// Shorter than the header.
    #[error("file is {len} bytes, shorter than the {HEADER_SIZE:#x}-byte .anec header")]
    TooShort {
        /// File length.
        len: usize,
    },
    /// The file length fits neither payload offset.
    #[error("size = {size:#x}, but the {file_len:#x}-byte file is neither 0x1000 + size (anecc) nor 0x800 + size (libane)")]
    PayloadLength {
        /// The header's `size`.
        size: u64,
        /// File length.
        file_len: usize,
    },
    /// Non-zero bytes between the header and the payload.
    #[error("byte {offset:#x} between the header and the payload is {value:#04x}, not 0")]
    NonZeroPadding {
        /// File offset.
        offset: usize,
        /// Its value.
        value: u8,
    },
    /// The payload is not `size` bytes.
    #[error("size = {size:#x}, but the payload has {payload_len:#x} bytes")]
    PayloadSize {
        /// The header's `size`.
        size: u64,
        /// Payload length.
        payload_len: usize,
    },
    /// A header field is out of range on its own.
    #[error("{field} = {value:#x} {problem}")]
    Field {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// `size` is not `round_up(tsk_size, 16) + krn_size`.
    #[error("size = {size:#x}, but round_up(tsk_size {tsk_size:#x}, 16) + krn_size {krn_size:#x} = {expected:#x}")]
    SizeMismatch {
        /// The header's `size`.
        size: u64,
        /// The header's `tsk_size`.
        tsk_size: u64,
        /// The header's `krn_size`.
        krn_size: u64,
        /// What `size` must be.
        expected: u128,
    },
    /// The TD chain in the payload is malformed.
    #[error("task stream: {0}")]
    Chain(#[from] ChainError),
    /// The TD chain has another length than `td_count`.
    #[error("td_count = {declared}, but the task stream chains {found} TDs")]
    TdCountMismatch {
        /// The header's `td_count`.
        declared: u32,
        /// TDs in the chain.
        found: usize,
    },
    /// `tsk_size` is not where the last TD ends.
    #[error("tsk_size = {tsk_size:#x}, but the last TD ends at {end:#x}")]
    TaskSizeMismatch {
        /// The header's `tsk_size`.
        tsk_size: u64,
        /// End of the last TD.
        end: u64,
    },
    /// More inputs and outputs than slots.
    #[error("src_count = {src_count} and dst_count = {dst_count}: 4 + src_count + dst_count exceeds the {SLOTS} slots")]
    TooManyBuffers {
        /// The header's `src_count`.
        src_count: u32,
        /// The header's `dst_count`.
        dst_count: u32,
    },
    /// `tiles[0]` cannot hold the payload.
    #[error("tiles[0] = {tiles} (16 KiB units) cannot hold the {size:#x}-byte payload")]
    CmdTilesTooSmall {
        /// `tiles[0]`.
        tiles: u32,
        /// The header's `size`.
        size: u64,
    },
    /// An input/output slot has no buffer.
    #[error("tiles[{slot}] = 0, but slot {slot} is an {role} slot")]
    MissingTile {
        /// The slot.
        slot: usize,
        /// "input" or "output".
        role: &'static str,
    },
    /// A slot past the inputs and outputs has a buffer.
    #[error("tiles[{slot}] = {tiles}, but slot {slot} is past the {dst_count} outputs and {src_count} inputs")]
    UnexpectedTile {
        /// The slot.
        slot: usize,
        /// `tiles[slot]`.
        tiles: u32,
        /// The header's `dst_count`.
        dst_count: u32,
        /// The header's `src_count`.
        src_count: u32,
    },
    /// An input/output slot's shape is invalid.
    #[error("nchw[{slot}]: {source}")]
    Tensor {
        /// The slot.
        slot: usize,
        /// What is wrong with the shape.
        source: ShapeError,
    },
    /// An input/output slot's stride is not the ANE layout's.
    #[error(
        "nchw[{slot}].{field} = {found:#x}, but the ANE layout of its shape needs {expected:#x}"
    )]
    Stride {
        /// The slot.
        slot: usize,
        /// "plane_stride" or "row_stride".
        field: &'static str,
        /// The header's value.
        found: u64,
        /// The layout's value.
        expected: u64,
    },
    /// An input/output slot's buffer is smaller than its tensor.
    #[error("tiles[{slot}] = {tiles} (16 KiB units) is too small for its tensor, which needs {needed:#x} bytes")]
    TileTooSmall {
        /// The slot.
        slot: usize,
        /// `tiles[slot]`.
        tiles: u32,
        /// Bytes the tensor's buffer needs.
        needed: u64,
    },
}

/// One input or output of a validated program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnecBuffer {
    /// Its BAR slot.
    pub slot: usize,
    /// Read or written by the program.
    pub direction: Direction,
    /// Its tensor shape (fp16, ANE layout).
    pub shape: Shape,
    /// Its buffer size in bytes (`tiles[slot]`·16 KiB).
    pub bytes: u64,
}

/// A validated `.anec` program.
#[derive(Clone, PartialEq, Eq)]
pub struct Anec {
    header: AnecHeader,
    payload: Vec<u8>,
    payload_offset: PayloadOffset,
    td_offsets: Vec<usize>,
    buffers: Vec<AnecBuffer>,
    names: Vec<IoName>,
}

/// How a model's array maps to an engine tensor (the names block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoLayout {
    /// The model's `[N, C, H, W]` (or fewer dims) is the tensor itself.
    Nchw,
    /// The model's `[batch, features]` is the tensor `(1, features, 1,
    /// batch)`.
    BatchFeatures,
}

/// One entry of the names block: the model's name, dims and layout of the
/// tensor in a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoName {
    /// The BAR slot.
    pub slot: u8,
    /// The layout.
    pub layout: IoLayout,
    /// The model's dims.
    pub dims: Vec<u32>,
    /// The model's name (UTF-8, at most 255 bytes).
    pub name: String,
}

/// Magic of the names block, at [`HEADER_SIZE`] in the header padding.
///
/// This project's extension of the container: eiln's readers read the
/// header structure and the payload only, so the block is invisible to
/// them. Layout: the 8-byte magic, a u32 count, then per entry u8 slot,
/// u8 layout (0 NCHW, 1 batch-features), u8 rank, u8 name length, rank
/// u32 dims, the name; zeros up to the payload.
pub const NAMES_MAGIC: &[u8; 8] = b"ANENAMES";

fn encode_names(names: &[IoName]) -> Vec<u8> {
    let mut v = NAMES_MAGIC.to_vec();
    v.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for n in names {
        v.push(n.slot);
        v.push(match n.layout {
            IoLayout::Nchw => 0,
            IoLayout::BatchFeatures => 1,
        });
        v.push(n.dims.len() as u8);
        v.push(n.name.len() as u8);
        for d in &n.dims {
            v.extend_from_slice(&d.to_le_bytes());
        }
        v.extend_from_slice(n.name.as_bytes());
    }
    v
}

/// Decodes a names block (`bytes` from its magic to the payload), or
/// `None` if it is malformed.
fn decode_names(bytes: &[u8]) -> Option<(Vec<IoName>, usize)> {
    if bytes.get(..8)? != NAMES_MAGIC {
        return None;
    }
    let count = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?) as usize;
    let mut at = 12;
    let mut names = Vec::new();
    for _ in 0..count {
        let h = bytes.get(at..at + 4)?;
        let (slot, layout, rank, len) = (h[0], h[1], h[2] as usize, h[3] as usize);
        at += 4;
        let layout = match layout {
            0 => IoLayout::Nchw,
            1 => IoLayout::BatchFeatures,
            _ => return None,
        };
        if usize::from(slot) >= SLOTS || rank == 0 || rank > 4 {
            return None;
        }
        let dims = (0..rank)
            .map(|i| {
                bytes
                    .get(at + 4 * i..at + 4 * i + 4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            })
            .collect::<Option<Vec<u32>>>()?;
        at += 4 * rank;
        let name = std::str::from_utf8(bytes.get(at..at + len)?)
            .ok()?
            .to_string();
        at += len;
        names.push(IoName {
            slot,
            layout,
            dims,
            name,
        });
    }
    Some((names, at))
}

impl std::fmt::Debug for Anec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anec")
            .field("size", &self.header.size)
            .field("td_size", &self.header.td_size)
            .field("td_count", &self.header.td_count)
            .field("tsk_size", &self.header.tsk_size)
            .field("krn_size", &self.header.krn_size)
            .field("payload_offset", &self.payload_offset)
            .field("buffers", &self.buffers)
            .finish()
    }
}

fn field(field: &'static str, value: u64, problem: &'static str) -> AnecError {
    AnecError::Field {
        field,
        value,
        problem,
    }
}

/// Checks every header rule against the payload; returns the TD offsets
/// and the input/output buffers.
fn validate(h: &AnecHeader, payload: &[u8]) -> Result<(Vec<usize>, Vec<AnecBuffer>), AnecError> {
    if payload.len() as u64 != h.size {
        return Err(AnecError::PayloadSize {
            size: h.size,
            payload_len: payload.len(),
        });
    }
    if h.size == 0 {
        return Err(field("size", 0, "is 0"));
    }
    let td_size = u64::from(h.td_size);
    if (h.td_size as usize) < hwx::TD_HEADER_SIZE {
        return Err(field(
            "td_size",
            td_size,
            "is smaller than the 0x28-byte TD header",
        ));
    }
    if h.td_size % 4 != 0 {
        return Err(field("td_size", td_size, "is not a multiple of 4"));
    }
    if h.td_size > TD_SIZE_MAX {
        return Err(field(
            "td_size",
            td_size,
            "is larger than 0x800, the TD size fields' limit",
        ));
    }
    if h.td_count == 0 {
        return Err(field("td_count", 0, "is 0"));
    }
    if h.tsk_size < td_size {
        return Err(field("tsk_size", h.tsk_size, "is smaller than td_size"));
    }
    if h.krn_size % 16 != 0 {
        return Err(field("krn_size", h.krn_size, "is not a multiple of 16"));
    }
    let expected = u128::from(h.tsk_size).div_ceil(16) * 16 + u128::from(h.krn_size);
    if u128::from(h.size) != expected {
        return Err(AnecError::SizeMismatch {
            size: h.size,
            tsk_size: h.tsk_size,
            krn_size: h.krn_size,
            expected,
        });
    }
    // tsk_size <= size == payload.len(), so this is in bounds.
    let stream = &payload[..h.tsk_size as usize];
    let td_offsets = hwx::td_chain(stream, h.td_size as usize)?;
    if td_offsets.len() != h.td_count as usize {
        return Err(AnecError::TdCountMismatch {
            declared: h.td_count,
            found: td_offsets.len(),
        });
    }
    let end = td_offsets.last().map_or(0, |&o| o + h.td_size as usize);
    if end != stream.len() {
        return Err(AnecError::TaskSizeMismatch {
            tsk_size: h.tsk_size,
            end: end as u64,
        });
    }

    if h.dst_count == 0 {
        return Err(field("dst_count", 0, "is 0; a program needs an output"));
    }
    let io_end = FIRST_IO_SLOT as u64 + u64::from(h.src_count) + u64::from(h.dst_count);
    if io_end > SLOTS as u64 {
        return Err(AnecError::TooManyBuffers {
            src_count: h.src_count,
            dst_count: h.dst_count,
        });
    }
    let io_end = io_end as usize;
    if u64::from(h.tiles[0]) * TILE_BYTES < h.size {
        return Err(AnecError::CmdTilesTooSmall {
            tiles: h.tiles[0],
            size: h.size,
        });
    }
    if h.tiles[1] != 0 {
        return Err(field(
            "tiles[1]",
            u64::from(h.tiles[1]),
            "is not 0; the driver places the weights slot itself",
        ));
    }
    let mut buffers = Vec::with_capacity(io_end - FIRST_IO_SLOT);
    for slot in FIRST_IO_SLOT..io_end {
        let (direction, role) = if slot < FIRST_IO_SLOT + h.dst_count as usize {
            (Direction::Output, "output")
        } else {
            (Direction::Input, "input")
        };
        let tiles = h.tiles[slot];
        if tiles == 0 {
            return Err(AnecError::MissingTile { slot, role });
        }
        let g = h.nchw[slot];
        let shape = Shape::from_u64(g.n, g.c, g.h, g.w)
            .map_err(|source| AnecError::Tensor { slot, source })?;
        let layout = shape.layout();
        for (name, found, expected) in [
            ("plane_stride", g.plane_stride, layout.plane_stride()),
            ("row_stride", g.row_stride, layout.row_stride()),
        ] {
            if found != expected as u64 {
                return Err(AnecError::Stride {
                    slot,
                    field: name,
                    found,
                    expected: expected as u64,
                });
            }
        }
        let bytes = u64::from(tiles) * TILE_BYTES;
        if bytes < layout.buffer_size() as u64 {
            return Err(AnecError::TileTooSmall {
                slot,
                tiles,
                needed: layout.buffer_size() as u64,
            });
        }
        buffers.push(AnecBuffer {
            slot,
            direction,
            shape,
            bytes,
        });
    }
    for (slot, &tiles) in h.tiles.iter().enumerate().skip(io_end) {
        if tiles != 0 {
            return Err(AnecError::UnexpectedTile {
                slot,
                tiles,
                dst_count: h.dst_count,
                src_count: h.src_count,
            });
        }
    }
    Ok((td_offsets, buffers))
}

/// Why an HWX program cannot be expressed as an `.anec` file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// `.anec` holds H13 programs only.
    #[error("the HWX is for {arch:?} (cpusubtype {cpusubtype}); .anec holds H13 programs only")]
    UnsupportedArch {
        /// The HWX's generation.
        arch: AneArch,
        /// Its `cpusubtype`.
        cpusubtype: u32,
    },
    /// A tensor is not float16.
    #[error("tensor {name}: dtype {dtype} is not float16 (5)")]
    Dtype {
        /// Tensor name.
        name: String,
        /// Its data type code.
        dtype: u32,
    },
    /// A tensor's shape is invalid.
    #[error("tensor {name}: {source}")]
    Shape {
        /// Tensor name.
        name: String,
        /// What is wrong.
        source: ShapeError,
    },
    /// A tensor's recorded strides or buffer size differ from the ANE layout
    /// that `.anec` readers assume.
    #[error(
        "tensor {name}: {field} = {found:#x}, but the ANE layout of its shape gives {expected:#x}"
    )]
    Layout {
        /// Tensor name.
        name: String,
        /// Which quantity.
        field: &'static str,
        /// The HWX's value.
        found: u64,
        /// The layout's value.
        expected: u64,
    },
    /// A scratch slot of the HWX lies where `.anec`'s positional layout
    /// puts the tensors (outputs from slot 4, then inputs).
    #[error("BAR slot {slot} is scratch in the HWX, but .anec puts outputs at slots 4..{outputs_end} and inputs at {outputs_end}..{inputs_end}")]
    ScratchInTensorSlots {
        /// The scratch slot.
        slot: usize,
        /// `4 + dst_count`.
        outputs_end: usize,
        /// `4 + dst_count + src_count`.
        inputs_end: usize,
    },
    /// A BAR slot holds an address that is neither a tensor nor a segment.
    #[error("BAR slot {slot} holds address {addr:#x}, which starts no tensor and no segment")]
    UnknownSlot {
        /// The slot.
        slot: usize,
        /// Its address.
        addr: u64,
    },
    /// A buffer is too large for `tiles[]`.
    #[error("BAR slot {slot}: buffer of {bytes:#x} bytes is too large for tiles[]")]
    TooLarge {
        /// The slot.
        slot: usize,
        /// Buffer size.
        bytes: u64,
    },
    /// The converted header fails validation.
    #[error("converted program is invalid: {0}")]
    Invalid(#[from] AnecError),
}

fn slot_u8(slot: usize) -> u8 {
    u8::try_from(slot).unwrap_or(u8::MAX)
}

/// Rewrites the BAR slot fields of every TD header in `stream` (TDs at
/// `td_offsets`): each RBase0/1, WBase, TBase (W8) and KBase0..3 (W9) that
/// holds a `from` of `map` gets its `to`. Enable bits are left alone.
pub fn relocate_slots(stream: &mut [u8], td_offsets: &[usize], map: &[(u8, u8)]) {
    use crate::hw::td::header::{RBASE0, RBASE1, TBASE, WBASE};
    use crate::hw::td::Field;
    let moved = |v: u32| {
        map.iter()
            .find(|&&(from, _)| u32::from(from) == v)
            .map(|&(_, to)| u32::from(to))
    };
    let kbase = |k: u32| Field::new(6 * k, 5);
    for &o in td_offsets {
        for (word, fields) in [
            (8usize, [RBASE0, RBASE1, WBASE, TBASE]),
            (9, [kbase(0), kbase(1), kbase(2), kbase(3)]),
        ] {
            let at = o + 4 * word;
            let Some(b) = stream.get_mut(at..at + 4) else {
                continue;
            };
            let mut w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            for f in fields {
                if let Some(to) = moved(f.get(w)) {
                    w = f.put(w, to);
                }
            }
            b.copy_from_slice(&w.to_le_bytes());
        }
    }
}

impl Anec {
    /// Validates a header and its payload.
    pub fn new(
        header: AnecHeader,
        payload: Vec<u8>,
        payload_offset: PayloadOffset,
    ) -> Result<Anec, AnecError> {
        let (td_offsets, buffers) = validate(&header, &payload)?;
        Ok(Anec {
            header,
            payload,
            payload_offset,
            td_offsets,
            buffers,
            names: Vec::new(),
        })
    }

    /// [`Anec::new`] with a names block; every name must name an input or
    /// output slot whose element count its dims match, and the block must
    /// fit before the payload.
    pub fn with_names(
        header: AnecHeader,
        payload: Vec<u8>,
        payload_offset: PayloadOffset,
        names: Vec<IoName>,
    ) -> Result<Anec, AnecError> {
        let mut a = Anec::new(header, payload, payload_offset)?;
        a.set_names(names)?;
        Ok(a)
    }

    fn set_names(&mut self, names: Vec<IoName>) -> Result<(), AnecError> {
        for n in &names {
            let b = self.buffer(usize::from(n.slot)).ok_or(field(
                "names",
                u64::from(n.slot),
                "names a slot that is no input or output",
            ))?;
            let count = n
                .dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(u64::from(d)));
            if count != Some(b.shape.elements() as u64)
                || n.name.len() > 255
                || n.dims.is_empty()
                || n.dims.len() > 4
            {
                return Err(field(
                    "names",
                    u64::from(n.slot),
                    "dims do not match the slot's tensor, or the name is longer than 255 bytes",
                ));
            }
            if n.layout == IoLayout::BatchFeatures
                && (n.dims.len() != 2
                    || (b.shape.c(), b.shape.w()) != (n.dims[1] as usize, n.dims[0] as usize))
            {
                return Err(field(
                    "names",
                    u64::from(n.slot),
                    "batch-features dims do not match (1, F, 1, B)",
                ));
            }
        }
        if HEADER_SIZE + encode_names(&names).len() > self.payload_offset.bytes() {
            return Err(field(
                "names",
                names.len() as u64,
                "the names block does not fit before the payload",
            ));
        }
        self.names = names;
        Ok(())
    }

    /// The names block (empty when the file has none).
    pub fn names(&self) -> &[IoName] {
        &self.names
    }

    /// Parses and validates an `.anec` file.
    pub fn parse(bytes: &[u8]) -> Result<Anec, AnecError> {
        let header = AnecHeader::decode(bytes)?;
        let payload_len = |o: PayloadOffset| o.bytes() as u64;
        let offset = match (bytes.len() as u64).checked_sub(header.size) {
            Some(n) if n == payload_len(PayloadOffset::Anecc) => PayloadOffset::Anecc,
            Some(n) if n == payload_len(PayloadOffset::Libane) => PayloadOffset::Libane,
            _ => {
                return Err(AnecError::PayloadLength {
                    size: header.size,
                    file_len: bytes.len(),
                })
            }
        };
        let start = offset.bytes();
        let mut names = Vec::new();
        let mut pad_from = HEADER_SIZE;
        if bytes[HEADER_SIZE..start].starts_with(NAMES_MAGIC) {
            let (n, len) = decode_names(&bytes[HEADER_SIZE..start]).ok_or(field(
                "names",
                HEADER_SIZE as u64,
                "the names block is malformed",
            ))?;
            names = n;
            pad_from = HEADER_SIZE + len;
        }
        if let Some(i) = bytes[pad_from..start].iter().position(|&b| b != 0) {
            return Err(AnecError::NonZeroPadding {
                offset: pad_from + i,
                value: bytes[pad_from + i],
            });
        }
        let mut a = Anec::new(header, bytes[start..].to_vec(), offset)?;
        if !names.is_empty() {
            a.set_names(names)?;
        }
        Ok(a)
    }

    /// The file: header, zero padding to the payload offset, payload.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.header.encode();
        if !self.names.is_empty() {
            v.extend_from_slice(&encode_names(&self.names));
        }
        v.resize(self.payload_offset.bytes(), 0);
        v.extend_from_slice(&self.payload);
        v
    }

    /// Converts a compiled H13 HWX program, much as eiln's `anecc` does:
    /// the payload is `__text`, zero padding to a 16-byte boundary, then
    /// `__const`, and the tensors take `.anec`'s positional slots (outputs
    /// from slot 4, then inputs), each **in the order the compiler
    /// declared them** (load-command order): positional input k of the
    /// `.anec` is positional input k of the HWX. anecc orders them by HWX
    /// slot instead, which swaps the inputs of a program whose compiler
    /// declared the input in slot 6 before the one in slot 5 (tinygrad's
    /// sum and concat); this conversion differs from anecc's output there.
    /// When every tensor is already in its place (compilers up to macOS 13
    /// with inputs declared in slot order) the payload is the HWX's bytes
    /// unchanged; otherwise every TD header's slot fields (RBase, WBase,
    /// TBase, KBase) are rewritten to the new slots, so that the header's
    /// roles are what the descriptors do. Scratch slots (2–3) get their
    /// segment's size. The payload offset is 0x1000.
    pub fn from_hwx(hwx: &Hwx) -> Result<Anec, ConvertError> {
        let arch = hwx.arch();
        if arch != AneArch::H13 {
            return Err(ConvertError::UnsupportedArch {
                arch,
                cpusubtype: hwx.header().cpusubtype,
            });
        }
        let tsk = hwx.task_stream();
        let mut payload = Vec::with_capacity(tsk.len().div_ceil(16) * 16 + hwx.weights().len());
        payload.extend_from_slice(tsk);
        payload.resize(tsk.len().div_ceil(16) * 16, 0);
        payload.extend_from_slice(hwx.weights());

        // Declared (load-command) order, the order positional callers use
        // for the HWX: not slot order.
        let outputs: Vec<&hwx::HwxTensor> = hwx
            .tensors()
            .iter()
            .filter(|t| t.direction == Direction::Output)
            .collect();
        let inputs: Vec<&hwx::HwxTensor> = hwx
            .tensors()
            .iter()
            .filter(|t| t.direction == Direction::Input)
            .collect();
        let outputs_end = FIRST_IO_SLOT + outputs.len();
        let inputs_end = outputs_end + inputs.len();

        let mut tiles = [0u32; SLOTS];
        let mut nchw = [Nchw::default(); SLOTS];
        let granules = |slot: usize, bytes: u64| {
            u32::try_from(bytes.div_ceil(TILE_BYTES))
                .map_err(|_| ConvertError::TooLarge { slot, bytes })
        };
        // Where each tensor goes: outputs from slot 4, then inputs, each in
        // the order the compiler declared them. Where that moves a tensor
        // (macOS 14 and later put the output after the inputs; some
        // compilers declare slot 6 before slot 5), the task descriptors are
        // rewritten to address the new slots.
        let mut relocate: Vec<(u8, u8)> = Vec::new();
        for (to, t) in (FIRST_IO_SLOT..).zip(outputs.iter().chain(inputs.iter())) {
            if t.slot != to {
                relocate.push((slot_u8(t.slot), slot_u8(to)));
            }
            if t.dtype != hwx::DTYPE_FLOAT16 {
                return Err(ConvertError::Dtype {
                    name: t.name.clone(),
                    dtype: t.dtype,
                });
            }
            let [n, c, h, w] = t.dims.map(u64::from);
            let shape = Shape::from_u64(n, c, h, w).map_err(|source| ConvertError::Shape {
                name: t.name.clone(),
                source,
            })?;
            let layout = shape.layout();
            for (name, found, expected) in [
                ("plane stride", t.strides[1], layout.plane_stride()),
                ("row stride", t.strides[2], layout.row_stride()),
                ("element stride", t.strides[3], 2),
                ("buffer size", t.buffer_size, layout.buffer_size()),
            ] {
                if found != expected as u64 {
                    return Err(ConvertError::Layout {
                        name: t.name.clone(),
                        field: name,
                        found,
                        expected: expected as u64,
                    });
                }
            }
            tiles[to] = granules(to, t.buffer_size)?;
            nchw[to] = Nchw {
                n,
                c,
                h,
                w,
                plane_stride: layout.plane_stride() as u64,
                row_stride: layout.row_stride() as u64,
            };
        }
        // Scratch and any other slot the program state binds: it keeps its
        // slot, which must not be one the tensors now occupy.
        for (slot, &addr) in hwx.program().bar_slots.iter().enumerate().skip(2) {
            if addr == 0 || hwx.tensors().iter().any(|t| t.slot == slot) {
                continue;
            }
            let seg = hwx
                .segments()
                .iter()
                .find(|s| s.vmaddr == addr)
                .ok_or(ConvertError::UnknownSlot { slot, addr })?;
            if (FIRST_IO_SLOT..inputs_end).contains(&slot) {
                return Err(ConvertError::ScratchInTensorSlots {
                    slot,
                    outputs_end,
                    inputs_end,
                });
            }
            tiles[slot] = granules(slot, seg.vmsize)?;
        }
        if !relocate.is_empty() {
            let td_size = hwx.td_size() as usize;
            let offsets = hwx::td_chain(&payload[..tsk.len()], td_size)
                .map_err(|e| ConvertError::Invalid(AnecError::Chain(e)))?;
            relocate_slots(&mut payload[..tsk.len()], &offsets, &relocate);
        }
        let size = payload.len() as u64;
        tiles[0] = granules(0, size)?;
        let header = AnecHeader {
            size,
            td_size: hwx.td_size(),
            td_count: hwx.td_count(),
            tsk_size: hwx.tsk_size(),
            krn_size: hwx.krn_size(),
            src_count: inputs.len() as u32,
            dst_count: outputs.len() as u32,
            tiles,
            nchw,
        };
        Ok(Anec::new(header, payload, PayloadOffset::Anecc)?)
    }

    /// The header.
    pub fn header(&self) -> &AnecHeader {
        &self.header
    }
    /// The payload: the TD chain, padding, the weights.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }
    /// Where the payload was (or will be) in the file.
    pub fn payload_offset(&self) -> PayloadOffset {
        self.payload_offset
    }
    /// The TD chain (`tsk_size` bytes).
    pub fn task_stream(&self) -> &[u8] {
        // Validated: tsk_size <= size == payload.len().
        &self.payload[..self.header.tsk_size as usize]
    }
    /// The weights (`krn_size` bytes after `round_up(tsk_size, 16)`).
    pub fn weights(&self) -> &[u8] {
        let start = self.payload.len() - self.header.krn_size as usize;
        &self.payload[start..]
    }
    /// Offset of each TD in the task stream.
    pub fn td_offsets(&self) -> &[usize] {
        &self.td_offsets
    }
    /// The bytes of TD `index`.
    pub fn td(&self, index: usize) -> Option<&[u8]> {
        let start = *self.td_offsets.get(index)?;
        self.task_stream()
            .get(start..start + self.header.td_size as usize)
    }
    /// Every input and output, by slot.
    pub fn buffers(&self) -> &[AnecBuffer] {
        &self.buffers
    }
    /// The outputs, in libane's order.
    pub fn outputs(&self) -> impl Iterator<Item = &AnecBuffer> {
        self.buffers
            .iter()
            .filter(|b| b.direction == Direction::Output)
    }
    /// The inputs, in libane's order.
    pub fn inputs(&self) -> impl Iterator<Item = &AnecBuffer> {
        self.buffers
            .iter()
            .filter(|b| b.direction == Direction::Input)
    }
    /// The buffer of BAR slot `slot`, if it is an input or output.
    pub fn buffer(&self, slot: usize) -> Option<&AnecBuffer> {
        self.buffers.iter().find(|b| b.slot == slot)
    }
}

#[cfg(test)]
mod tests;
