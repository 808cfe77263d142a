// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A compiled program file (HWX or `.anec`), reduced to what running it
//! needs (`ane-probe run` and `bench`, the Python package): the payload the kernel loads, the tensors with their
//! strided layout, and the binding of every BAR slot the program uses.
//!
//! The slots to bind and their directions come from the very validator the
//! kernel runs at PROGRAM_CREATE ([`crate::hw::td`]), so a program this module
//! accepts binds exactly as EXEC demands; the tensors' shapes and strides
//! come from the container. Nothing here touches a device.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::anec::{Anec, TILE_BYTES};
use crate::hw::engine;
use crate::hw::td::{self, SlotUsage};
use crate::hw::uapi::{self, bind};
use crate::hwx::{self, Direction, Hwx};
use crate::parity::HostMem;

/// The kernel finds the weights at `round_up(tsk_size, 16)`.
const WEIGHTS_ALIGN: usize = 16;
/// BAR slot of the task stream.
const SLOT_COMMAND: u8 = 0;
/// BAR slot of the weights.
const SLOT_KERNEL: u8 = 1;
/// Bytes of one fp16 element.
const ELEMENT: u64 = 2;

/// Why a program file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// The file could not be read.
    #[error("cannot read program {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Neither an HWX nor an `.anec` file.
    #[error("program {path}: not an HWX file (first word {magic:#010x}, HWX has {:#010x}) and not an .anec file ({anec})", hwx::MAGIC)]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Its first little-endian word.
        magic: u32,
        /// Why the `.anec` parser refused it.
        anec: crate::anec::AnecError,
    },
    /// The HWX parser refused it.
    #[error("program {path}: {source}")]
    Hwx {
        /// The file.
        path: PathBuf,
        /// Why.
        source: hwx::HwxError,
    },
    /// The `.anec` parser refused it.
    #[error("program {path}: {source}")]
    Anec {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::anec::AnecError,
    },
    /// The TD validator (the kernel's) refused the task stream.
    #[error("program {path}: the task stream fails validation: {error}")]
    Td {
        /// The file.
        path: PathBuf,
        /// The validator's verdict.
        error: String,
    },
    /// A tensor this tool cannot fill or read.
    #[error("program {path}: tensor '{tensor}' (slot {slot}): {field} = {value}: {reason}")]
    Tensor {
        /// The file.
        path: PathBuf,
        /// Tensor name.
        tensor: String,
        /// Its slot.
        slot: usize,
        /// The field at fault.
        field: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The container format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Apple's HWX.
    Hwx,
    /// eiln's `.anec`.
    Anec,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Hwx => "hwx",
            Format::Anec => "anec",
        })
    }
}

/// One input or output tensor: fp16 NCHW in a strided buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TensorSpec {
    /// BAR slot.
    pub slot: usize,
    /// Name (HWX: the compiler's; `.anec`: `input<i>`/`output<i>` in slot
    /// order, with the roles the task descriptors give the slots).
    pub name: String,
    /// Read or written by the program.
    #[serde(serialize_with = "ser_direction")]
    pub direction: Direction,
    /// `[N, C, H, W]`.
    pub dims: [usize; 4],
    /// Byte strides `[batch, plane, row, element]`.
    pub strides: [u64; 4],
    /// Bytes of its buffer.
    pub buffer_size: u64,
    /// The model's own shape, when the program was compiled from a model
    /// whose array shape differs from `dims` (the `.anec` names block: a
    /// `[batch, features]` array, or `[1, C, H, W]` kept in pixel rows as
    /// `(1, C, H·W, 1)`). The dense element order is the same; arrays are
    /// taken and returned in this shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_dims: Option<Vec<usize>>,
}

fn ser_direction<S: serde::Serializer>(d: &Direction, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(direction_name(*d))
}

/// "input" or "output".
pub fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Input => "input",
        Direction::Output => "output",
    }
}

impl TensorSpec {
    /// Elements (`N·C·H·W`).
    pub fn elements(&self) -> u64 {
        self.dims.iter().map(|&d| d as u64).product()
    }

    /// Bytes of the dense little-endian fp16 NCHW array.
    pub fn dense_bytes(&self) -> u64 {
        self.elements() * ELEMENT
    }

    /// The shape callers see: the model's own (`model_dims`) when the
    /// program records one, else `[N, C, H, W]`.
    pub fn array_dims(&self) -> Vec<usize> {
        self.model_dims
            .clone()
            .unwrap_or_else(|| self.dims.to_vec())
    }

    /// `slot 5 'image'`, for messages.
    pub fn label(&self) -> String {
        format!("slot {} '{}'", self.slot, self.name)
    }

    /// Checks dims, strides and buffer size so that [`pack`](Self::pack)
    /// and [`unpack`](Self::unpack) stay inside the buffer.
    fn check(&self, path: &Path) -> Result<(), ProgramError> {
        let err = |field, value: String, reason| ProgramError::Tensor {
            path: path.to_owned(),
            tensor: self.name.clone(),
            slot: self.slot,
            field,
            value,
            reason,
        };
        if self.dims.contains(&0) {
            return Err(err(
                "dims",
                format!("{:?}", self.dims),
                "every dimension must be at least 1",
            ));
        }
        if self.strides[3] != ELEMENT {
            return Err(err(
                "element stride",
                self.strides[3].to_string(),
                "only dense fp16 rows (element stride 2) are supported",
            ));
        }
        // Byte one past the last element, with checked arithmetic.
        let [n, c, h, w] = self.dims.map(|d| d as u64);
        let end = (|| {
            let mut end = w.checked_mul(ELEMENT)?;
            for (count, stride) in [
                (n, self.strides[0]),
                (c, self.strides[1]),
                (h, self.strides[2]),
            ] {
                end = end.checked_add((count - 1).checked_mul(stride)?)?;
            }
            Some(end)
        })();
        match end {
            Some(end) if end <= self.buffer_size && usize::try_from(end).is_ok() => Ok(()),
            _ => Err(err(
                "strides",
                format!("{:?}", self.strides),
                "the tensor does not fit its buffer",
            )),
        }
    }

    /// Byte offsets of every row, in dense order.
    fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        let [n, c, h, _] = self.dims;
        let [bs, ps, rs, _] = self.strides.map(|s| s as usize);
        (0..n).flat_map(move |ni| {
            (0..c).flat_map(move |ci| (0..h).map(move |hi| ni * bs + ci * ps + hi * rs))
        })
    }

    /// Writes the dense array into `buf` (the device buffer) in the
    /// tensor's strided layout. `dense` must be [`dense_bytes`](Self::dense_bytes)
    /// long and `buf` at least the tensor's extent (checked at parse).
    pub fn pack(&self, dense: &[u8], buf: &mut [u8]) {
        let row = self.dims[3] * ELEMENT as usize;
        for (src, off) in dense.chunks_exact(row).zip(self.rows()) {
            buf[off..off + row].copy_from_slice(src);
        }
    }

    /// Reads the dense array out of `buf`.
    pub fn unpack(&self, buf: &[u8]) -> Vec<u8> {
        let row = self.dims[3] * ELEMENT as usize;
        let mut dense = Vec::with_capacity(self.dense_bytes() as usize);
        for off in self.rows() {
            dense.extend_from_slice(&buf[off..off + row]);
        }
        dense
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::hw::fw::sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How one BAR slot is bound for EXEC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SlotBinding {
    /// The slot.
    pub slot: u32,
    /// `uapi::bind` flags the program's use of the slot demands.
    pub flags: u32,
    /// Bytes to bind.
    pub size: u64,
    /// Index into [`ProgramFile::tensors`], or `None` for scratch.
    pub tensor: Option<usize>,
}

impl SlotBinding {
    /// The EXEC binding of this slot to the whole of BO `bo_handle`.
    pub fn binding(&self, bo_handle: u32) -> uapi::Binding {
        uapi::Binding {
            slot: self.slot,
            bo_handle,
            offset: 0,
            size: self.size,
            flags: self.flags,
            pad: 0,
        }
    }
}

/// Where the host model maps the program (the task stream at BAR 0, the
/// weights at BAR 1 = BAR 0 + round_up(tsk_size, 16)), as the driver does.
const MODEL_PROGRAM_IOVA: u64 = 0x1000_0000;
/// Where it maps the first bound buffer; each next one follows after an
/// unmapped gap, so a stray access faults.
const MODEL_SLOT_IOVA: u64 = 0x4000_0000;
/// The gap.
const MODEL_GAP: u64 = 0x10_0000;

/// A program laid out in the host engine model's memory
/// ([`crate::hw::engine`]) with a buffer for every slot it binds, as EXEC
/// binds BOs on a device.
#[derive(Clone, Debug)]
pub struct ModelRun {
    /// The model's memory.
    pub mem: HostMem,
    bars: [u64; td::BAR_SLOTS],
    td_size: u32,
    td_count: u32,
    /// The device address of each entry of [`ProgramFile::bindings`], same
    /// order.
    pub slot_iova: Vec<u64>,
}

impl ModelRun {
    /// Maps `prog` and, for each of its bindings, the buffer `init`
    /// returns for it (index into [`ProgramFile::bindings`], binding).
    pub fn new<E>(
        prog: &ProgramFile,
        mut init: impl FnMut(usize, &SlotBinding) -> Result<Vec<u8>, E>,
    ) -> Result<ModelRun, E> {
        let mut mem = HostMem::default();
        let mut bars = [0u64; td::BAR_SLOTS];
        bars[usize::from(SLOT_COMMAND)] = MODEL_PROGRAM_IOVA;
        bars[usize::from(SLOT_KERNEL)] =
            MODEL_PROGRAM_IOVA + prog.tsk_size.next_multiple_of(WEIGHTS_ALIGN as u64);
        mem.map(MODEL_PROGRAM_IOVA, prog.payload.clone());
        let mut next = MODEL_SLOT_IOVA;
        let mut slot_iova = Vec::with_capacity(prog.bindings.len());
        for (i, b) in prog.bindings.iter().enumerate() {
            mem.map(next, init(i, b)?);
            if let Some(bar) = bars.get_mut(b.slot as usize) {
                *bar = next;
            }
            slot_iova.push(next);
            next = next
                .saturating_add(b.size)
                .saturating_add(MODEL_GAP)
                .div_ceil(MODEL_GAP)
                .saturating_mul(MODEL_GAP);
        }
        Ok(ModelRun {
            mem,
            bars,
            td_size: prog.td_size,
            td_count: prog.td_count,
            slot_iova,
        })
    }

    /// The buffer of binding `i`.
    pub fn buffer(&self, i: usize) -> Option<&[u8]> {
        self.mem.region(*self.slot_iova.get(i)?)
    }

    /// The buffer of binding `i`, writable.
    pub fn buffer_mut(&mut self, i: usize) -> Option<&mut Vec<u8>> {
        let iova = *self.slot_iova.get(i)?;
        self.mem.region_mut(iova)
    }

    /// Runs the program once on the model.
    pub fn execute(
        &mut self,
        options: &engine::Options,
    ) -> Result<engine::Stats, engine::EngineError> {
        engine::execute(
            &mut self.mem,
            self.bars[usize::from(SLOT_COMMAND)],
            self.td_size,
            self.td_count,
            &self.bars,
            options,
        )
    }
}

/// A parsed, validated program file.
#[derive(Clone, Debug)]
pub struct ProgramFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// SHA-256 of the whole file, lowercase hex.
    pub sha256: String,
    /// File size in bytes.
    pub len: u64,
    /// Bytes of one TD.
    pub td_size: u32,
    /// Number of TDs.
    pub td_count: u32,
    /// Bytes of the task stream.
    pub tsk_size: u64,
    /// Task stream, zero padding to 16 bytes, weights: what PROGRAM_CREATE
    /// takes.
    pub payload: Vec<u8>,
    /// Inputs and outputs: for HWX in the order the compiler declared
    /// them (positional inputs are matched in this order), for `.anec` by
    /// slot.
    pub tensors: Vec<TensorSpec>,
    /// Every slot (other than 0 and 1) the task stream uses, by slot:
    /// tensors and scratch alike, sized and flagged from what validation
    /// derives.
    pub bindings: Vec<SlotBinding>,
    /// What the loader corrected and a user may want to know (an `.anec`
    /// header whose roles contradict the task descriptors).
    pub notes: Vec<String>,
}

impl ProgramFile {
    /// Reads and validates `path`.
    pub fn read(path: &Path) -> Result<ProgramFile, ProgramError> {
        let bytes = std::fs::read(path).map_err(|source| ProgramError::Read {
            path: path.to_owned(),
            source,
        })?;
        ProgramFile::parse(path, &bytes)
    }

    /// Validates the bytes of a program file read from `path`.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<ProgramFile, ProgramError> {
        let magic = bytes
            .get(..4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if magic == hwx::MAGIC {
            let h = Hwx::parse(bytes).map_err(|source| ProgramError::Hwx {
                path: path.to_owned(),
                source,
            })?;
            return ProgramFile::from_hwx(path, &h);
        }
        let a = Anec::parse(bytes).map_err(|anec| {
            if path.extension().is_some_and(|e| e == "anec") {
                ProgramError::Anec {
                    path: path.to_owned(),
                    source: anec,
                }
            } else {
                ProgramError::UnknownFormat {
                    path: path.to_owned(),
                    magic,
                    anec,
                }
            }
        })?;
        ProgramFile::from_anec(path, &a)
    }

    /// A parsed HWX program (`path` names it in messages). Its tensors keep
    /// the order the compiler declared them in (load-command order), which
    /// is the order positional inputs are matched in; their directions must
    /// agree with what the task descriptors do to their slots.
    pub fn from_hwx(path: &Path, h: &Hwx) -> Result<ProgramFile, ProgramError> {
        let mut tensors = Vec::new();
        for t in h.tensors() {
            if t.dtype != hwx::DTYPE_FLOAT16 {
                return Err(ProgramError::Tensor {
                    path: path.to_owned(),
                    tensor: t.name.clone(),
                    slot: t.slot,
                    field: "dtype",
                    value: t.dtype.to_string(),
                    reason: "only float16 (5) tensors are supported",
                });
            }
            tensors.push(TensorSpec {
                slot: t.slot,
                name: t.name.clone(),
                direction: t.direction,
                dims: t.dims.map(|d| d as usize),
                strides: t.strides,
                buffer_size: t.buffer_size,
                model_dims: None,
            });
        }
        let mut scratch = [0u64; 32];
        for (slot, &addr) in h.program().bar_slots.iter().enumerate() {
            if addr != 0 {
                if let Some(seg) = h.segments().iter().find(|s| s.vmaddr == addr) {
                    scratch[slot] = seg.vmsize;
                }
            }
        }
        let bytes = h.bytes();
        Parts {
            path,
            format: Format::Hwx,
            sha256: sha256_hex(bytes),
            len: bytes.len() as u64,
            stream: h.task_stream(),
            weights: h.weights(),
            td_size: h.td_size(),
            td_count: h.td_count(),
            tensors,
            scratch,
            roles: Roles::Declared,
        }
        .finish()
    }

    /// A parsed `.anec` program (`path` names it in messages). The header
    /// says which slots hold tensors and their shapes; which of them are
    /// inputs and which outputs is derived from the task descriptors (a
    /// slot they write is an output, one they only read an input), because
    /// exported program families exist whose header roles are the reverse
    /// of what their descriptors do (source on slot 4, destination on slot
    /// 5). Where the header disagrees, [`ProgramFile::notes`] says so. The
    /// tensors are named `input<i>` and `output<i>` in slot order.
    pub fn from_anec(path: &Path, a: &Anec) -> Result<ProgramFile, ProgramError> {
        let tensors = a
            .buffers()
            .iter()
            .map(|b| {
                let l = b.shape.layout();
                let mut t = TensorSpec {
                    slot: b.slot,
                    name: String::new(),
                    direction: b.direction,
                    dims: b.shape.dims(),
                    strides: [
                        l.batch_stride() as u64,
                        l.plane_stride() as u64,
                        l.row_stride() as u64,
                        ELEMENT,
                    ],
                    buffer_size: b.bytes,
                    model_dims: None,
                };
                // The compiler's names block: the model's name, and for a
                // [batch, features] array stored as (1, F, 1, B) the
                // model's order (batch steps one element, features one
                // plane).
                if let Some(n) = a.names().iter().find(|n| usize::from(n.slot) == b.slot) {
                    t.name = n.name.clone();
                    let model: Vec<usize> = n.dims.iter().map(|&d| d as usize).collect();
                    if model.iter().product::<usize>() == t.dims.iter().product::<usize>()
                        && model[..] != t.dims[..]
                    {
                        t.model_dims = Some(model);
                    }
                    if n.layout == crate::anec::IoLayout::BatchFeatures {
                        t.dims = [n.dims[0] as usize, n.dims[1] as usize, 1, 1];
                        t.strides = [
                            ELEMENT,
                            l.plane_stride() as u64,
                            l.row_stride() as u64,
                            ELEMENT,
                        ];
                    }
                }
                t
            })
            .collect();
        let h = a.header();
        let bytes = a.to_bytes();
        Parts {
            path,
            format: Format::Anec,
            sha256: sha256_hex(&bytes),
            len: bytes.len() as u64,
            stream: a.task_stream(),
            weights: a.weights(),
            td_size: h.td_size,
            td_count: h.td_count,
            tensors,
            scratch: h.tiles.map(|t| u64::from(t) * TILE_BYTES),
            roles: Roles::Derived,
        }
        .finish()
    }
}

/// Where the tensors' directions come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Roles {
    /// From the container; the task stream must agree.
    Declared,
    /// From the task stream (`.anec`); the container's are only checked.
    Derived,
}

/// What both containers give [`ProgramFile`].
struct Parts<'a> {
    path: &'a Path,
    format: Format,
    sha256: String,
    len: u64,
    stream: &'a [u8],
    weights: &'a [u8],
    td_size: u32,
    td_count: u32,
    tensors: Vec<TensorSpec>,
    /// Buffer size the container gives each slot (0: none).
    scratch: [u64; 32],
    roles: Roles,
}

impl Parts<'_> {
    fn finish(self) -> Result<ProgramFile, ProgramError> {
        let path = self.path;
        let p = || path.to_owned();
        let mut tensors = self.tensors;
        let mut notes = Vec::new();
        for t in &tensors {
            t.check(path)?;
        }

        let summary = td::Program::new(self.stream, self.td_size, self.td_count)
            .and_then(|prog| prog.validate())
            .map_err(|e| ProgramError::Td {
                path: p(),
                error: format!("{e}"),
            })?;

        if self.roles == Roles::Derived {
            for t in tensors.iter_mut() {
                let slot = u8::try_from(t.slot).unwrap_or(u8::MAX);
                let usage = summary.slot(slot).map(|i| i.usage).unwrap_or_default();
                let written = usage.contains(SlotUsage::TILE_WRITE);
                let read =
                    usage.contains(SlotUsage::TILE_READ) || usage.contains(SlotUsage::KERNEL_READ);
                let derived = match (read, written) {
                    (_, true) if summary.inputs.contains(slot) => {
                        return Err(ProgramError::Tensor {
                            path: p(),
                            tensor: format!("{}{}", direction_name(t.direction), t.slot),
                            slot: t.slot,
                            field: "direction",
                            value: usage.to_string(),
                            reason: "the task stream reads this slot before it writes it \
                                     (an in-place buffer is neither an input nor an output)",
                        });
                    }
                    (_, true) => Direction::Output,
                    (true, false) => Direction::Input,
                    (false, false) => {
                        return Err(ProgramError::Tensor {
                            path: p(),
                            tensor: format!("{}{}", direction_name(t.direction), t.slot),
                            slot: t.slot,
                            field: "direction",
                            value: direction_name(t.direction).into(),
                            reason: "the task stream neither reads nor writes this slot",
                        });
                    }
                };
                if derived != t.direction {
                    notes.push(format!(
                        "slot {}: the header makes it an {}, but the task descriptors {} it; \
                         it is bound as an {}",
                        t.slot,
                        direction_name(t.direction),
                        if written { "write" } else { "only read" },
                        direction_name(derived)
                    ));
                    t.direction = derived;
                }
            }
            tensors.sort_by_key(|t| t.slot);
            let (mut i, mut o) = (0, 0);
            for t in tensors.iter_mut() {
                let n = match t.direction {
                    Direction::Input => &mut i,
                    Direction::Output => &mut o,
                };
                if t.name.is_empty() {
                    t.name = format!("{}{n}", direction_name(t.direction));
                }
                *n += 1;
            }
        }

        let mut bindings = Vec::new();
        for slot in summary.used().iter() {
            if slot == SLOT_COMMAND || slot == SLOT_KERNEL {
                continue;
            }
            let Some(info) = summary.slot(slot) else {
                continue;
            };
            let usage = info.usage;
            let read =
                usage.contains(SlotUsage::TILE_READ) || usage.contains(SlotUsage::KERNEL_READ);
            let written = usage.contains(SlotUsage::TILE_WRITE);
            let mut flags = 0;
            if read {
                flags |= bind::IN;
            }
            if written {
                flags |= bind::OUT;
            }
            if flags == 0 {
                // Named only by TBase: EXEC wants it bound, nothing is
                // known to reach into it.
                flags = bind::IN;
            }
            let tensor = tensors.iter().position(|t| t.slot == usize::from(slot));
            let known = match tensor {
                Some(i) => tensors[i].buffer_size,
                None => self.scratch[usize::from(slot)],
            };
            // A slot no DMA sizes and the container gives no buffer (only
            // TBase names it) gets one granule: EXEC refuses empty buffers.
            let size = known
                .max(info.min_size)
                .max(if known == 0 && info.min_size == 0 {
                    TILE_BYTES
                } else {
                    0
                });
            bindings.push(SlotBinding {
                slot: u32::from(slot),
                flags,
                size,
                tensor,
            });
        }
        // Every tensor must be used the way its direction says: an input
        // read, an output written.
        for t in &tensors {
            let b = bindings.iter().find(|b| b.slot as usize == t.slot);
            let ok = match (t.direction, b) {
                (Direction::Input, Some(b)) => b.flags & bind::IN != 0 && b.flags & bind::OUT == 0,
                (Direction::Output, Some(b)) => b.flags & bind::OUT != 0,
                (_, None) => false,
            };
            if !ok {
                return Err(ProgramError::Tensor {
                    path: p(),
                    tensor: t.name.clone(),
                    slot: t.slot,
                    field: "direction",
                    value: direction_name(t.direction).into(),
                    reason: match t.direction {
                        Direction::Input if b.is_some() => {
                            "the task stream writes this input's slot"
                        }
                        Direction::Input => "the task stream never reads this slot",
                        Direction::Output => "the task stream never writes this slot",
                    },
                });
            }
        }

        let woff = self.stream.len().div_ceil(WEIGHTS_ALIGN) * WEIGHTS_ALIGN;
        let mut payload = self.stream.to_vec();
        let tsk_size = payload.len() as u64;
        payload.resize(woff, 0);
        payload.extend_from_slice(self.weights);
        Ok(ProgramFile {
            path: p(),
            format: self.format,
            sha256: self.sha256,
            len: self.len,
            td_size: self.td_size,
            td_count: self.td_count,
            tsk_size,
            payload,
            tensors,
            bindings,
            notes,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::anec::{AnecHeader, Nchw, PayloadOffset};
    use crate::builder;
    use crate::tensor::Shape;
    use half::f16;

    pub(crate) use crate::fixtures::path as fixture;

    fn spec(dims: [usize; 4]) -> TensorSpec {
        let shape = crate::tensor::Shape::new(dims[0], dims[1], dims[2], dims[3]).unwrap();
        let l = shape.layout();
        TensorSpec {
            slot: 4,
            name: "t".into(),
            direction: Direction::Input,
            dims,
            strides: [
                l.batch_stride() as u64,
                l.plane_stride() as u64,
                l.row_stride() as u64,
                2,
            ],
            buffer_size: l.buffer_size() as u64,
            model_dims: None,
        }
    }

    #[test]
    fn pack_matches_the_library_tiler() {
        for dims in [[1, 1, 1, 77], [1, 3, 5, 33], [2, 2, 3, 40]] {
            let s = spec(dims);
            s.check(Path::new("x")).unwrap();
            let dense: Vec<u8> = (0..s.dense_bytes()).map(|i| (i * 7 + 3) as u8).collect();
            let mut ours = vec![0u8; s.buffer_size as usize];
            s.pack(&dense, &mut ours);
            let shape = crate::tensor::Shape::new(dims[0], dims[1], dims[2], dims[3]).unwrap();
            let mut theirs = vec![0u8; s.buffer_size as usize];
            crate::tensor::tile_bytes(&shape, &dense, &mut theirs).unwrap();
            assert_eq!(ours, theirs, "{dims:?}");
            assert_eq!(s.unpack(&ours), dense);
        }
    }

    #[test]
    fn strides_outside_the_buffer_are_refused() {
        let mut s = spec([1, 2, 1, 8]);
        s.strides[1] = s.buffer_size;
        let e = s.check(Path::new("p.hwx")).unwrap_err().to_string();
        assert!(e.contains("strides") && e.contains("does not fit"), "{e}");
        let mut s = spec([1, 1, 1, 8]);
        s.strides[3] = 4;
        let e = s.check(Path::new("p.hwx")).unwrap_err().to_string();
        assert!(e.contains("element stride = 4"), "{e}");
    }

    #[test]
    fn garbage_is_neither_format() {
        let e = ProgramFile::parse(Path::new("junk.bin"), b"not a program at all")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("junk.bin") && e.contains("not an HWX file"),
            "{e}"
        );
    }

    /// Runs `p` once on the host engine model, as `ane-probe run --model`
    /// does: every binding gets a buffer (scratch filled with 0xA5, outputs
    /// with fp16 NaN), `inputs` (by tensor name, dense fp16) are tiled in;
    /// returns every output's dense values, by tensor name.
    pub(crate) fn run_model(
        p: &ProgramFile,
        inputs: &[(&str, Vec<f16>)],
    ) -> Vec<(String, Vec<f16>)> {
        use crate::hw::engine;
        use crate::parity::HostMem;
        let mut mem = HostMem::default();
        let mut bars = [0u64; crate::hw::td::BAR_SLOTS];
        bars[0] = 0x1000_0000;
        bars[1] = bars[0] + p.tsk_size.next_multiple_of(16);
        mem.map(bars[0], p.payload.clone());
        let mut at = Vec::new();
        for (k, b) in p.bindings.iter().enumerate() {
            let iova = 0x4000_0000 + k as u64 * 0x1000_0000;
            let fill = match b.tensor.map(|i| p.tensors[i].direction) {
                None => 0xA5,
                Some(Direction::Output) => 0xFF,
                Some(Direction::Input) => 0,
            };
            mem.map(iova, vec![fill; b.size as usize]);
            bars[b.slot as usize] = iova;
            at.push((b.tensor, iova));
        }
        let iova_of = |i: usize| at.iter().find(|(t, _)| *t == Some(i)).unwrap().1;
        for (name, vals) in inputs {
            let i = p.tensors.iter().position(|t| t.name == *name).unwrap();
            let dense: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            p.tensors[i].pack(&dense, mem.region_mut(iova_of(i)).unwrap());
        }
        engine::execute(
            &mut mem,
            bars[0],
            p.td_size,
            p.td_count,
            &bars,
            &engine::Options::default(),
        )
        .unwrap_or_else(|e| panic!("{}: the model refused it: {e:?}", p.path.display()));
        (0..p.tensors.len())
            .filter(|&i| p.tensors[i].direction == Direction::Output)
            .map(|i| {
                let dense = p.tensors[i].unpack(mem.region(iova_of(i)).unwrap());
                let v = dense
                    .chunks(2)
                    .map(|c| f16::from_le_bytes([c[0], c[1]]))
                    .collect();
                (p.tensors[i].name.clone(), v)
            })
            .collect()
    }

    /// An `.anec` file (payload at 0x1000) holding `tsk` and `weights`,
    /// with `outputs` then `inputs` at the positional slots from 4 (tiles
    /// and nchw from each shape's ANE layout) and no other buffer.
    pub(crate) fn anec_file(
        tsk: &[u8],
        weights: &[u8],
        td_count: u32,
        outputs: &[Shape],
        inputs: &[Shape],
    ) -> Vec<u8> {
        let mut tiles = [0u32; 32];
        let mut nchw = [Nchw::default(); 32];
        for (slot, s) in (4..).zip(outputs.iter().chain(inputs)) {
            let l = s.layout();
            tiles[slot] = (l.buffer_size() as u64).div_ceil(TILE_BYTES) as u32;
            let [n, c, h, w] = s.dims().map(|d| d as u64);
            nchw[slot] = Nchw {
                n,
                c,
                h,
                w,
                plane_stride: l.plane_stride() as u64,
                row_stride: l.row_stride() as u64,
            };
        }
        let woff = tsk.len().div_ceil(16) * 16;
        let mut payload = tsk.to_vec();
        payload.resize(woff, 0);
        payload.extend_from_slice(weights);
        tiles[0] = (payload.len() as u64).div_ceil(TILE_BYTES) as u32;
        let h = AnecHeader {
            size: payload.len() as u64,
            td_size: 0x274,
            td_count,
            tsk_size: tsk.len() as u64,
            krn_size: weights.len() as u64,
            src_count: inputs.len() as u32,
            dst_count: outputs.len() as u32,
            tiles,
            nchw,
        };
        Anec::new(h, payload, PayloadOffset::Anecc)
            .unwrap()
            .to_bytes()
    }

    /// Small integers, exact in fp16 through the tests' sums and products.
    fn ints(n: usize, seed: usize) -> Vec<f16> {
        (0..n)
            .map(|i| f16::from_f32(((i * 7 + seed * 3) % 9) as f32 - 4.0))
            .collect()
    }

    /// (a) The add-mul chain writes `a + b` into scratch slot 3 and reads
    /// it back; the `.anec` names only the four tensors and gives slot 3 no
    /// buffer. The loader binds it (read and write, the size validation
    /// derives), and the program runs to the exact result.
    #[test]
    fn scratch_slots_are_bound_from_validation() {
        let shape = Shape::new(1, 3, 2, 40).unwrap();
        let b = builder::add_mul(&shape).unwrap();
        let file = anec_file(&b.tsk, &b.weights, b.td_count, &[shape], &[shape; 3]);
        let p = ProgramFile::parse(Path::new("addmul.anec"), &file).unwrap();
        let scratch = p
            .bindings
            .iter()
            .find(|b| b.slot == 3)
            .expect("slot 3 bound");
        assert_eq!(scratch.tensor, None);
        assert_eq!(scratch.flags, bind::IN | bind::OUT);
        let need = b.validate().unwrap().slot(3).unwrap().min_size;
        assert!(need > 0 && scratch.size == need, "{scratch:?} vs {need:#x}");
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        let n = 3 * 2 * 40;
        let (x, y, z) = (ints(n, 1), ints(n, 2), ints(n, 3));
        let out = run_model(
            &p,
            &[
                ("input0", x.clone()),
                ("input1", y.clone()),
                ("input2", z.clone()),
            ],
        );
        let want: Vec<f16> = (0..n).map(|i| (x[i] + y[i]) * z[i]).collect();
        assert_eq!(out, vec![("output0".to_string(), want)]);
    }

    /// (a) A slot only TBase names has no DMA extent and, here, no buffer
    /// in the container: EXEC still wants it bound, so it gets one granule.
    #[test]
    fn a_slot_only_tbase_names_gets_a_granule() {
        let shape = Shape::new(1, 2, 1, 8).unwrap();
        let mut b = builder::add(&shape).unwrap();
        use crate::hw::td::header::{TBASE, TBE};
        let w8 = u32::from_le_bytes(b.tsk[0x20..0x24].try_into().unwrap());
        let w8 = TBE.put(TBASE.put(w8, 9), 1);
        b.tsk[0x20..0x24].copy_from_slice(&w8.to_le_bytes());
        let file = anec_file(&b.tsk, &b.weights, 1, &[shape], &[shape; 2]);
        let p = ProgramFile::parse(Path::new("tbase.anec"), &file).unwrap();
        let t = p
            .bindings
            .iter()
            .find(|b| b.slot == 9)
            .expect("slot 9 bound");
        assert_eq!((t.flags, t.size, t.tensor), (bind::IN, TILE_BYTES, None));
    }

    /// (b, c) The exported family's layout: the descriptors read slot 4
    /// and write slot 5, while the header's positional roles say slot 4 is
    /// the output. The loader takes the roles from the descriptors, says so
    /// in the notes (naming both slots), never reports the unwritten slot 4
    /// as an output, and the program computes the convolution.
    #[test]
    fn header_roles_contradicting_the_descriptors_are_derived() {
        let (cin, cout, h, w) = (3, 5, 2, 33);
        let weights: Vec<f16> = (0..cin * cout)
            .map(|i| f16::from_f32((i % 5) as f32 - 2.0))
            .collect();
        let mut b = builder::conv1x1(cin, cout, h, w, &weights).unwrap();
        crate::anec::relocate_slots(&mut b.tsk, &[0], &[(5, 4), (4, 5)]);
        let x_shape = Shape::new(1, cin, h, w).unwrap();
        let y_shape = Shape::new(1, cout, h, w).unwrap();
        // Header: "output" at slot 4 with the shape the TDs read there.
        let file = anec_file(&b.tsk, &b.weights, 1, &[x_shape], &[y_shape]);
        let p = ProgramFile::parse(Path::new("export.anec"), &file).unwrap();
        let roles: Vec<_> = p
            .tensors
            .iter()
            .map(|t| (t.slot, t.name.as_str(), t.direction))
            .collect();
        assert_eq!(
            roles,
            [
                (4, "input0", Direction::Input),
                (5, "output0", Direction::Output)
            ]
        );
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        assert!(
            p.notes[0].starts_with("slot 4: the header makes it an output"),
            "{:?}",
            p.notes
        );
        assert!(
            p.notes[1].starts_with("slot 5: the header makes it an input"),
            "{:?}",
            p.notes
        );
        let x = ints(cin * h * w, 4);
        let out = run_model(&p, &[("input0", x.clone())]);
        let plane = h * w;
        let want: Vec<f16> = (0..cout * plane)
            .map(|k| {
                let (o, e) = (k / plane, k % plane);
                let s: f32 = (0..cin)
                    .map(|i| weights[o * cin + i].to_f32() * x[i * plane + e].to_f32())
                    .sum();
                f16::from_f32(s)
            })
            .collect();
        assert_eq!(out, vec![("output0".to_string(), want)]);
    }

    /// (b) A header slot the descriptors never touch is refused, naming it.
    #[test]
    fn a_header_slot_the_descriptors_ignore_is_refused() {
        let shape = Shape::new(1, 2, 1, 8).unwrap();
        let b = builder::add(&shape).unwrap();
        let file = anec_file(&b.tsk, &b.weights, 1, &[shape], &[shape; 3]);
        let e = ProgramFile::parse(Path::new("extra.anec"), &file)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(slot 7)") && e.contains("neither reads nor writes"),
            "{e}"
        );
    }

    /// (c) HWX inputs keep the order the compiler declared them in, not
    /// their slot order: `sub`-like asymmetric operands could otherwise be
    /// swapped silently. concat declares input_0 (slot 6) before input_1
    /// (slot 5), and its output starts with input_0.
    #[test]
    fn hwx_inputs_keep_the_declared_order() {
        let Some(path) = fixture("tinygrad_concat.hwx") else {
            return;
        };
        let p = ProgramFile::read(&path).unwrap();
        let ins: Vec<_> = p
            .tensors
            .iter()
            .filter(|t| t.direction == Direction::Input)
            .map(|t| (t.name.as_str(), t.slot))
            .collect();
        assert_eq!(ins, [("input_0", 6), ("input_1", 5)]);
        let (a, b) = (ints(16384, 5), ints(16, 6));
        let out = run_model(&p, &[("input_0", a.clone()), ("input_1", b.clone())]);
        assert_eq!(out[0].1, [a, b].concat());
    }

    #[test]
    fn fixtures_parse_and_bind_every_tensor() {
        for name in [
            "tinygrad_sum.hwx",
            "tinygrad_relu.hwx",
            "tinygrad_conv.hwx",
            "tinygrad_gemm.hwx",
            "tinygrad_sigmoid.hwx",
            "tinygrad_concat.hwx",
            "tinygrad_conv3_w3.hwx",
            "mul_zin541_macos12.hwx",
            "mul_zin764_macos14.hwx",
            "sum.anec",
            "relu.anec",
            "conv.anec",
        ] {
            let Some(path) = fixture(name) else { return };
            let p = ProgramFile::read(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!p.tensors.is_empty(), "{name}");
            for d in [Direction::Input, Direction::Output] {
                assert!(p.tensors.iter().any(|t| t.direction == d), "{name}");
            }
            for t in &p.tensors {
                assert!(
                    p.bindings
                        .iter()
                        .any(|b| b.tensor.is_some_and(|i| p.tensors[i] == *t)),
                    "{name}: {t:?}"
                );
            }
            assert_eq!(p.sha256.len(), 64);
            // Every fixture's header agrees with its descriptors.
            assert!(p.notes.is_empty(), "{name}: {:?}", p.notes);
            assert!(
                p.payload.len() as u64 >= p.tsk_size.div_ceil(16) * 16,
                "{name}"
            );
        }
    }
}
