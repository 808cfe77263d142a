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
use crate::hw::td::{self, SlotUsage};
use crate::hw::uapi::bind;
use crate::hwx::{self, Direction, Hwx};

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
    /// A slot the TDs use has no known buffer size.
    #[error("program {path}: slot {slot} is used by the task stream but the container gives it no buffer")]
    UnsizedSlot {
        /// The file.
        path: PathBuf,
        /// The slot.
        slot: u8,
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
    /// Name (HWX: the compiler's; `.anec`: `input<i>`/`output<i>` in
    /// libane's order).
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
    /// Inputs and outputs, by slot.
    pub tensors: Vec<TensorSpec>,
    /// Every slot (other than 0 and 1) the task stream uses, by slot.
    pub bindings: Vec<SlotBinding>,
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
        let p = || path.to_owned();
        // (format, task stream, weights, td_size, td_count, tensors, scratch
        // size of a slot)
        let (format, stream, weights, td_size, td_count, tensors, scratch): (
            _,
            Vec<u8>,
            Vec<u8>,
            _,
            _,
            Vec<TensorSpec>,
            [u64; 32],
        ) = if magic == hwx::MAGIC {
            let h = Hwx::parse(bytes).map_err(|source| ProgramError::Hwx { path: p(), source })?;
            let mut tensors = Vec::new();
            for t in h.tensors() {
                if t.dtype != hwx::DTYPE_FLOAT16 {
                    return Err(ProgramError::Tensor {
                        path: p(),
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
            (
                Format::Hwx,
                h.task_stream().to_vec(),
                h.weights().to_vec(),
                h.td_size(),
                h.td_count(),
                tensors,
                scratch,
            )
        } else {
            let a = Anec::parse(bytes).map_err(|anec| {
                if path.extension().is_some_and(|e| e == "anec") {
                    ProgramError::Anec {
                        path: p(),
                        source: anec,
                    }
                } else {
                    ProgramError::UnknownFormat {
                        path: p(),
                        magic,
                        anec,
                    }
                }
            })?;
            let mut tensors = Vec::new();
            for (dir, list) in [
                (Direction::Output, a.outputs().collect::<Vec<_>>()),
                (Direction::Input, a.inputs().collect::<Vec<_>>()),
            ] {
                for (i, b) in list.into_iter().enumerate() {
                    let l = b.shape.layout();
                    tensors.push(TensorSpec {
                        slot: b.slot,
                        name: format!("{}{i}", direction_name(dir)),
                        direction: dir,
                        dims: b.shape.dims(),
                        strides: [
                            l.batch_stride() as u64,
                            l.plane_stride() as u64,
                            l.row_stride() as u64,
                            ELEMENT,
                        ],
                        buffer_size: b.bytes,
                    });
                }
            }
            let h = a.header();
            let scratch = h.tiles.map(|t| u64::from(t) * TILE_BYTES);
            (
                Format::Anec,
                a.task_stream().to_vec(),
                a.weights().to_vec(),
                h.td_size,
                h.td_count,
                tensors,
                scratch,
            )
        };
        let mut tensors = tensors;
        tensors.sort_by_key(|t| t.slot);
        for t in &tensors {
            t.check(path)?;
        }

        let summary = td::Program::new(&stream, td_size, td_count)
            .and_then(|prog| prog.validate())
            .map_err(|e| ProgramError::Td {
                path: p(),
                error: format!("{e}"),
            })?;

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
                flags = bind::IN;
            }
            let tensor = tensors.iter().position(|t| t.slot == usize::from(slot));
            let known = match tensor {
                Some(i) => tensors[i].buffer_size,
                None => scratch[usize::from(slot)],
            };
            if known == 0 && info.min_size == 0 {
                return Err(ProgramError::UnsizedSlot { path: p(), slot });
            }
            bindings.push(SlotBinding {
                slot: u32::from(slot),
                flags,
                size: known.max(info.min_size),
                tensor,
            });
        }
        // Every tensor must be used the way its direction says: an input
        // read, an output written.
        for t in &tensors {
            let b = bindings.iter().find(|b| b.slot as usize == t.slot);
            let ok = match (t.direction, b) {
                (Direction::Input, Some(b)) => b.flags & bind::IN != 0,
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
                        Direction::Input => "the task stream never reads this slot",
                        Direction::Output => "the task stream never writes this slot",
                    },
                });
            }
        }

        let woff = stream.len().div_ceil(WEIGHTS_ALIGN) * WEIGHTS_ALIGN;
        let mut payload = stream;
        let tsk_size = payload.len() as u64;
        payload.resize(woff, 0);
        payload.extend_from_slice(&weights);
        Ok(ProgramFile {
            path: path.to_owned(),
            format,
            sha256: sha256_hex(bytes),
            len: bytes.len() as u64,
            td_size,
            td_count,
            tsk_size,
            payload,
            tensors,
            bindings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixture `name` in `$ANE_SHARED/fixtures`, or in
    /// `../shared/fixtures` next to the checkout.
    fn fixture(name: &str) -> Option<PathBuf> {
        let dir = match std::env::var_os("ANE_SHARED") {
            Some(shared) => PathBuf::from(shared).join("fixtures"),
            None => PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/fixtures"
            )),
        };
        if !dir.is_dir() {
            eprintln!("SKIPPED: {} is absent; nothing was checked", dir.display());
            return None;
        }
        Some(dir.join(name))
    }

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
            assert!(
                p.payload.len() as u64 >= p.tsk_size.div_ceil(16) * 16,
                "{name}"
            );
        }
    }
}
