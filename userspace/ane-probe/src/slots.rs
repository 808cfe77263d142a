// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `SLOT=FILE` arguments (`--in`, `--out`, `--expect`): parsing, matching
//! against a program's tensors, and reading tensor files.
//!
//! SLOT is a BAR slot number (`5`) or a tensor name (`image`; an HWX
//! output's `@output` suffix may be left off). Tensor files are dense
//! little-endian fp16 NCHW arrays (`N·C·H·W·2` bytes, no header), or `.npy`
//! files holding a C-order `<f2` array of the tensor's shape.

use std::path::{Path, PathBuf};

use ane::hwx::Direction;

use crate::exit::Error;
use crate::npy;
use crate::program::{direction_name, ProgramFile, TensorSpec};

/// What a SLOT names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotRef {
    /// A BAR slot number.
    Number(usize),
    /// A tensor name.
    Name(String),
}

/// One `SLOT=FILE` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotArg {
    /// The slot as written.
    pub slot: SlotRef,
    /// The file.
    pub path: PathBuf,
}

impl SlotArg {
    /// The slot as the user wrote it.
    pub fn slot_text(&self) -> String {
        match &self.slot {
            SlotRef::Number(n) => n.to_string(),
            SlotRef::Name(s) => s.clone(),
        }
    }
}

/// Why `SLOT=FILE` arguments do not fit the program.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// No tensor of the program has that slot or name.
    #[error(
        "{flag} {slot}: the program has no tensor with that slot or name; its {kind}s are: {known}"
    )]
    Unknown {
        /// The flag.
        flag: &'static str,
        /// The slot as written.
        slot: String,
        /// "input" or "output".
        kind: &'static str,
        /// The tensors it has, as `slot=name`.
        known: String,
    },
    /// The same tensor named twice for one flag.
    #[error("{flag} {slot}: {label} is given more than once")]
    Duplicate {
        /// The flag.
        flag: &'static str,
        /// The slot as written the second time.
        slot: String,
        /// The tensor.
        label: String,
    },
    /// An input named for an output flag, or the reverse.
    #[error("{flag} {slot}: {label} is an {actual} of the program, {flag} takes {wanted}s")]
    Direction {
        /// The flag.
        flag: &'static str,
        /// The slot as written.
        slot: String,
        /// The tensor.
        label: String,
        /// Its direction.
        actual: &'static str,
        /// The flag's.
        wanted: &'static str,
    },
    /// Inputs without a `--in`.
    #[error("missing --in for the program's input(s): {missing}")]
    Missing {
        /// The inputs, as `slot=name`.
        missing: String,
    },
    /// A file's size does not match its tensor.
    #[error("{flag} {label}: {path} holds {actual} bytes of data, the tensor {dims:?} (N,C,H,W) needs exactly {expected} (dense little-endian fp16 NCHW)")]
    Size {
        /// The flag.
        flag: &'static str,
        /// The tensor.
        label: String,
        /// The file.
        path: PathBuf,
        /// Its tensor's dims.
        dims: [usize; 4],
        /// Bytes needed.
        expected: u64,
        /// Bytes found.
        actual: u64,
    },
    /// A `.npy` file that does not fit.
    #[error("{flag} {label}: {path}: {reason}")]
    Npy {
        /// The flag.
        flag: &'static str,
        /// The tensor.
        label: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Parses `SLOT=FILE` (for clap's `value_parser`).
pub fn parse_slot_arg(arg: &str) -> Result<SlotArg, String> {
    parse(arg).ok_or_else(|| "expected SLOT=FILE (SLOT a slot number or tensor name)".to_owned())
}

fn parse(arg: &str) -> Option<SlotArg> {
    let (slot, file) = arg.split_once('=')?;
    if slot.is_empty() || file.is_empty() {
        return None;
    }
    let slot = match slot.parse::<usize>() {
        Ok(n) => SlotRef::Number(n),
        Err(_) if slot.bytes().all(|b| b.is_ascii_digit()) => return None,
        Err(_) => SlotRef::Name(slot.to_owned()),
    };
    Some(SlotArg {
        slot,
        path: PathBuf::from(file),
    })
}

/// An argument matched to a tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Index into [`ProgramFile::tensors`].
    pub tensor: usize,
    /// The file.
    pub path: PathBuf,
}

fn matches(t: &TensorSpec, r: &SlotRef) -> bool {
    match r {
        SlotRef::Number(n) => t.slot == *n,
        SlotRef::Name(s) => t.name == *s || t.name.strip_suffix("@output") == Some(s),
    }
}

/// Matches the arguments of `flag` to the program's tensors of direction
/// `want`: unknown slots, tensors of the other direction and duplicates are
/// refused.
pub fn resolve(
    program: &ProgramFile,
    flag: &'static str,
    args: &[SlotArg],
    want: Direction,
) -> Result<Vec<Resolved>, SlotError> {
    let mut out: Vec<Resolved> = Vec::new();
    for a in args {
        let Some(i) = program.tensors.iter().position(|t| matches(t, &a.slot)) else {
            return Err(SlotError::Unknown {
                flag,
                slot: a.slot_text(),
                kind: direction_name(want),
                known: list(program.tensors.iter().filter(|t| t.direction == want)),
            });
        };
        let t = &program.tensors[i];
        if t.direction != want {
            return Err(SlotError::Direction {
                flag,
                slot: a.slot_text(),
                label: t.label(),
                actual: direction_name(t.direction),
                wanted: direction_name(want),
            });
        }
        if out.iter().any(|r| r.tensor == i) {
            return Err(SlotError::Duplicate {
                flag,
                slot: a.slot_text(),
                label: t.label(),
            });
        }
        out.push(Resolved {
            tensor: i,
            path: a.path.clone(),
        });
    }
    Ok(out)
}

/// Refuses when an input of the program has no `--in`.
pub fn require_all_inputs(program: &ProgramFile, inputs: &[Resolved]) -> Result<(), SlotError> {
    let missing: Vec<&TensorSpec> = program
        .tensors
        .iter()
        .enumerate()
        .filter(|(i, t)| t.direction == Direction::Input && !inputs.iter().any(|r| r.tensor == *i))
        .map(|(_, t)| t)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(SlotError::Missing {
            missing: list(missing.into_iter()),
        })
    }
}

fn list<'a>(it: impl Iterator<Item = &'a TensorSpec>) -> String {
    let v: Vec<String> = it.map(|t| format!("{}={}", t.slot, t.name)).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The dense data of one tensor of a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorData {
    /// Index into [`ProgramFile::tensors`].
    pub tensor: usize,
    /// Dense little-endian fp16 NCHW bytes.
    pub dense: Vec<u8>,
    /// The file it came from, if any.
    pub file: Option<PathBuf>,
}

/// Reads the tensor file `path` for `spec` given with `flag`: dense
/// little-endian fp16 NCHW of exactly the tensor's size, or a `.npy` file
/// of its shape. Returns the dense bytes.
pub fn read_tensor(flag: &'static str, spec: &TensorSpec, path: &Path) -> Result<Vec<u8>, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        what: format!("{flag} file for {}", spec.label()),
        path: path.to_owned(),
        source,
    })?;
    let data = if npy::is_npy(&bytes) {
        npy::data_of(&bytes, &spec.dims).map_err(|reason| SlotError::Npy {
            flag,
            label: spec.label(),
            path: path.to_owned(),
            reason,
        })?
    } else {
        &bytes[..]
    };
    if data.len() as u64 != spec.dense_bytes() {
        return Err(SlotError::Size {
            flag,
            label: spec.label(),
            path: path.to_owned(),
            dims: spec.dims,
            expected: spec.dense_bytes(),
            actual: data.len() as u64,
        }
        .into());
    }
    Ok(data.to_vec())
}

/// Writes the dense bytes of `spec` to `path` (`.npy` with a header when
/// the name ends in `.npy`, raw otherwise).
pub fn write_tensor(spec: &TensorSpec, path: &Path, dense: &[u8]) -> Result<(), Error> {
    let bytes = if path.extension().is_some_and(|e| e == "npy") {
        npy::encode(&spec.array_dims(), dense)
    } else {
        dense.to_vec()
    };
    std::fs::write(path, bytes).map_err(|source| Error::Write {
        what: format!("output file for {}", spec.label()),
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Format;

    fn arg(s: &str) -> SlotArg {
        parse_slot_arg(s).unwrap()
    }

    fn tensor(slot: usize, name: &str, direction: Direction) -> TensorSpec {
        TensorSpec {
            slot,
            name: name.into(),
            direction,
            dims: [1, 2, 1, 3],
            strides: [128, 64, 64, 2],
            buffer_size: 0x4000,
            model_dims: None,
        }
    }

    fn program() -> ProgramFile {
        ProgramFile {
            path: "p.hwx".into(),
            format: Format::Hwx,
            sha256: String::new(),
            len: 0,
            td_size: 0,
            td_count: 0,
            tsk_size: 0,
            payload: Vec::new(),
            tensors: vec![
                tensor(4, "probs@output", Direction::Output),
                tensor(5, "image", Direction::Input),
                tensor(6, "image2", Direction::Input),
            ],
            bindings: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn slot_argument_syntax() {
        assert_eq!(
            arg("5=a.bin"),
            SlotArg {
                slot: SlotRef::Number(5),
                path: "a.bin".into()
            }
        );
        assert_eq!(
            arg("image=dir/x=y.bin"),
            SlotArg {
                slot: SlotRef::Name("image".into()),
                path: "dir/x=y.bin".into()
            }
        );
        for bad in ["", "5", "=a", "5=", "image", "99999999999999999999999=a"] {
            assert!(parse_slot_arg(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn resolve_by_number_and_name() {
        let p = program();
        let r = resolve(&p, "--in", &[arg("6=b"), arg("image=a")], Direction::Input).unwrap();
        assert_eq!(r.iter().map(|r| r.tensor).collect::<Vec<_>>(), [2, 1]);
        require_all_inputs(&p, &r).unwrap();
        let r = resolve(&p, "--out", &[arg("probs=o")], Direction::Output).unwrap();
        assert_eq!(r[0].tensor, 0);
    }

    #[test]
    fn resolve_errors_name_the_slot() {
        let p = program();
        let e = resolve(&p, "--in", &[arg("7=a")], Direction::Input).unwrap_err();
        let s = e.to_string();
        assert!(matches!(e, SlotError::Unknown { .. }));
        assert!(
            s.contains("--in 7") && s.contains("5=image, 6=image2"),
            "{s}"
        );

        let e = resolve(&p, "--in", &[arg("5=a"), arg("image=b")], Direction::Input).unwrap_err();
        assert!(matches!(e, SlotError::Duplicate { .. }), "{e}");
        assert!(e.to_string().contains("slot 5 'image'"), "{e}");

        let e = resolve(&p, "--out", &[arg("5=a")], Direction::Output).unwrap_err();
        assert!(matches!(e, SlotError::Direction { .. }), "{e}");
        assert!(e.to_string().contains("is an input"), "{e}");

        let r = resolve(&p, "--in", &[arg("5=a")], Direction::Input).unwrap();
        let e = require_all_inputs(&p, &r).unwrap_err();
        assert!(e.to_string().contains("6=image2"), "{e}");
    }

    #[test]
    fn tensor_file_size_is_checked() {
        let p = program();
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("in.bin");
        std::fs::write(&f, [0u8; 11]).unwrap();
        let e = read_tensor("--in", &p.tensors[1], &f).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("slot 5 'image'")
                && s.contains("holds 11 bytes")
                && s.contains("exactly 12"),
            "{s}"
        );
        assert_eq!(e.code(), crate::exit::USAGE);
        std::fs::write(&f, [1u8; 12]).unwrap();
        assert_eq!(read_tensor("--in", &p.tensors[1], &f).unwrap(), [1u8; 12]);

        let e = read_tensor("--in", &p.tensors[1], &t.path().join("absent")).unwrap_err();
        assert!(e.to_string().contains("absent"), "{e}");
        assert_eq!(e.code(), crate::exit::USAGE);
    }

    #[test]
    fn npy_round_trip() {
        let p = program();
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("x.npy");
        let dense: Vec<u8> = (0..12).collect();
        write_tensor(&p.tensors[1], &f, &dense).unwrap();
        assert_eq!(read_tensor("--in", &p.tensors[1], &f).unwrap(), dense);
    }
}
