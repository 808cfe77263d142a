// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Parity cells: the seed project's parity table as data, run on an
//! [`Executor`] and compared with the CPU reference.
//!
//! A [`Cell`] names an operation and a shape; [`Cell::prepare`] builds its
//! program with [`crate::builder`], draws deterministic inputs from the
//! cell's seed (a xorshift generator, so every machine sees the same
//! numbers) and computes the expected output with [`crate::reference`]
//! (round to nearest even). [`run_cell`] runs it and grades it:
//!
//! - elementwise cells (add, add-mul, select) must be **bit-exact**
//!   (signed zeros and NaN bits included): each engine step is one
//!   correctly rounded fp16 operation, as the reference;
//! - convolution and linear cells may differ by **2 ulp**: the reference
//!   accumulates in binary32 in ascending input-channel order, and the
//!   hardware's accumulation order and width are not known (`td.md` §6).
//!   The engine model accumulates exactly like the reference, so on it
//!   they come out exact.
//!
//! The cells ([`cells`]):
//!
//! | cell | op | shape |
//! |---|---|---|
//! | `add_mul` | schema-4 add-mul `(a + b) · c`, two TDs | `(1, 64, 1, 1)`: the tinygrad sum/mul fixtures' tensors |
//! | `select` | tiny select, four TDs | `(1, 16, 1, 1)` |
//! | `conv1x1` | 1×1 convolution 16 → 32 | `(1, 16, 2, 8)` → `(1, 32, 2, 8)`: several rows, a padded row, two output channels per coefficient channel |
//! | `linear_1x256x128` | linear, batch 1 | `256 → 128` |
//! | `linear_32x256x128` | linear, batch 32 (the width) | `256 → 128` |
//! | `add_1x512`, `add_1x896` | add family | `(1, 512, 1, 1)`, `(1, 896, 1, 1)`: the features as channels, like the sum fixture's 64 |
//!
//! Inputs are finite: normal values of magnitude 2^−6 to 2^6 (elementwise)
//! or about 2^−3 to 2^2 (activations) and 2^−5 to 1 (weights), with some
//! exact zeros; `cond` is 0 or 1. The builder's own tests cover
//! subnormals, infinities, NaN and rounding ties on the engine model.
//!
//! Two executors: [`ModelExecutor`] runs the program on the functional
//! engine model ([`crate::hw::engine`]) in host memory, so the table can be
//! produced on any machine; [`DeviceExecutor`] runs it on an `ane` device.

use std::time::Duration;

use half::f16;
use serde::Serialize;

use crate::builder::{self, BuildError, Direction, Program, TensorSlot};
use crate::device::{self, Device, JobStatus};
use crate::hw::engine::{self, Dma, EngineError, Fault};
use crate::reference::{self, Rounding};
use crate::tensor::{self, Shape, TensorError};

/// A deterministic xorshift64* generator for the cells' inputs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (0 is replaced by a constant).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// An index in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// A finite fp16 with a random sign and significand and an unbiased
    /// exponent in `lo..=hi` (normal range), or zero one time in `zeros`
    /// (never when `zeros` is 0).
    pub fn f16_in(&mut self, lo: i32, hi: i32, zeros: u64) -> f16 {
        if zeros != 0 && self.below(zeros) == 0 {
            return f16::ZERO;
        }
        let lo = lo.clamp(-14, 15);
        let hi = hi.clamp(lo, 15);
        let span = (hi - lo + 1) as u64;
        let e = lo + self.below(span) as i32;
        let sign = (self.below(2) as u16) << 15;
        let mant = self.below(1024) as u16;
        f16::from_bits(sign | (((e + 15) as u16) << 10) | mant)
    }
}

/// The operation of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CellOp {
    /// `(a + b) · c` (the seed's schema-4 add-mul).
    AddMul {
        /// Tensor shape `[N, C, H, W]`.
        shape: [usize; 4],
    },
    /// `cond ? a : b`.
    Select {
        /// Tensor shape.
        shape: [usize; 4],
    },
    /// Elementwise `a + b`.
    Add {
        /// Tensor shape.
        shape: [usize; 4],
    },
    /// 1×1 convolution without bias.
    Conv1x1 {
        /// Input channels.
        cin: usize,
        /// Output channels.
        cout: usize,
        /// Height.
        h: usize,
        /// Width.
        w: usize,
    },
    /// Linear layer without bias.
    Linear {
        /// Batch.
        batch: usize,
        /// Input features.
        in_features: usize,
        /// Output features.
        out_features: usize,
    },
}

/// One row of the parity table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// Its name.
    pub name: &'static str,
    /// What it computes.
    pub op: CellOp,
    /// Seed of its inputs.
    pub seed: u64,
}

/// Whether a program's exact bytes ran on hardware according to
/// `docs/hardware-record.md`, and the source that says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// The record shows these bytes running on an Apple machine.
    pub ran_on_hardware: bool,
    /// Which driver, machine and receipt; or why it never ran.
    pub source: &'static str,
}

/// Every parity cell: the project's builder made it, and the record shows
/// no builder output on hardware (hw-2 §3 item 13). No Apple-compiled
/// fixture is recorded as having run through eiln's driver either
/// (`docs/hardware-record.md` names none), so no cell can go first on
/// that ground yet.
pub const PROJECT_BUILT: Provenance = Provenance {
    ran_on_hardware: false,
    source: "never ran: built by this project's builder (userspace/ane/src/builder.rs); docs/hardware-record.md records no builder output on hardware",
};

impl Cell {
    /// Whether this cell's program ran on hardware per the record.
    pub fn provenance(&self) -> Provenance {
        PROJECT_BUILT
    }
}

/// The provenance of the cell named `name` (`None`: no such cell).
pub fn provenance_of(name: &str) -> Option<Provenance> {
    cells()
        .iter()
        .find(|c| c.name == name)
        .map(Cell::provenance)
}

/// `cells` in the order a first contact runs them: programs that ran on
/// hardware per the record first, then the rest, each group in its given
/// order.
pub fn first_contact_order(mut cells: Vec<Cell>, ran: impl Fn(&Cell) -> bool) -> Vec<Cell> {
    cells.sort_by_key(|c| !ran(c));
    cells
}

/// The seed's parity cells (see the module documentation).
pub fn cells() -> Vec<Cell> {
    vec![
        Cell {
            name: "add_mul",
            op: CellOp::AddMul {
                shape: [1, 64, 1, 1],
            },
            seed: 0x5C4E_4D04,
        },
        Cell {
            name: "select",
            op: CellOp::Select {
                shape: [1, 16, 1, 1],
            },
            seed: 0x5E1E_C700,
        },
        Cell {
            name: "conv1x1",
            op: CellOp::Conv1x1 {
                cin: 16,
                cout: 32,
                h: 2,
                w: 8,
            },
            seed: 0xC0_1111,
        },
        Cell {
            name: "linear_1x256x128",
            op: CellOp::Linear {
                batch: 1,
                in_features: 256,
                out_features: 128,
            },
            seed: 0x11_0001,
        },
        Cell {
            name: "linear_32x256x128",
            op: CellOp::Linear {
                batch: 32,
                in_features: 256,
                out_features: 128,
            },
            seed: 0x11_0032,
        },
        Cell {
            name: "add_1x512",
            op: CellOp::Add {
                shape: [1, 512, 1, 1],
            },
            seed: 0xADD_0512,
        },
        Cell {
            name: "add_1x896",
            op: CellOp::Add {
                shape: [1, 896, 1, 1],
            },
            seed: 0xADD_0896,
        },
    ]
}

/// A cell made concrete: its program, inputs and expected output.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The built program.
    pub program: Program,
    /// Dense NCHW data for each input tensor, by tensor name.
    pub inputs: Vec<(&'static str, Vec<f16>)>,
    /// The reference output, dense NCHW in the program's output shape.
    pub expected: Vec<f16>,
    /// The output's shape.
    pub output_shape: Shape,
    /// Largest accepted ULP difference (0: bit-exact required).
    pub bound_ulp: u32,
}

/// Why a cell could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The builder refused.
    #[error("build: {0}")]
    Build(#[from] BuildError),
    /// The reference refused.
    #[error("reference: {0}")]
    Reference(#[from] reference::RefError),
    /// A shape is invalid.
    #[error("shape: {0}")]
    Shape(#[from] tensor::ShapeError),
}

fn shape_of(d: [usize; 4]) -> Result<Shape, tensor::ShapeError> {
    Shape::new(d[0], d[1], d[2], d[3])
}

fn fill(rng: &mut Rng, n: usize, lo: i32, hi: i32, zeros: u64) -> Vec<f16> {
    (0..n).map(|_| rng.f16_in(lo, hi, zeros)).collect()
}

impl Cell {
    /// Builds the program, draws the inputs and computes the reference.
    pub fn prepare(&self) -> Result<Prepared, PrepareError> {
        let mut rng = Rng::new(self.seed);
        let r = Rounding::NearestEven;
        Ok(match self.op {
            CellOp::Add { shape } => {
                let s = shape_of(shape)?;
                let a = fill(&mut rng, s.elements(), -6, 6, 32);
                let b = fill(&mut rng, s.elements(), -6, 6, 32);
                let expected = reference::add(&a, &b, r)?;
                Prepared {
                    program: builder::add(&s)?,
                    inputs: vec![("a", a), ("b", b)],
                    expected,
                    output_shape: s,
                    bound_ulp: 0,
                }
            }
            CellOp::AddMul { shape } => {
                let s = shape_of(shape)?;
                let a = fill(&mut rng, s.elements(), -6, 6, 32);
                let b = fill(&mut rng, s.elements(), -6, 6, 32);
                let c = fill(&mut rng, s.elements(), -3, 3, 32);
                let expected = reference::mul(&reference::add(&a, &b, r)?, &c, r)?;
                Prepared {
                    program: builder::add_mul(&s)?,
                    inputs: vec![("a", a), ("b", b), ("c", c)],
                    expected,
                    output_shape: s,
                    bound_ulp: 0,
                }
            }
            CellOp::Select { shape } => {
                let s = shape_of(shape)?;
                let cond: Vec<f16> = (0..s.elements())
                    .map(|_| {
                        if rng.below(2) == 0 {
                            f16::ZERO
                        } else {
                            f16::ONE
                        }
                    })
                    .collect();
                let a = fill(&mut rng, s.elements(), -6, 6, 32);
                let b = fill(&mut rng, s.elements(), -6, 6, 32);
                let expected = reference::select(&cond, &a, &b)?;
                Prepared {
                    program: builder::select(&s)?,
                    inputs: vec![("cond", cond), ("a", a), ("b", b)],
                    expected,
                    output_shape: s,
                    bound_ulp: 0,
                }
            }
            CellOp::Conv1x1 { cin, cout, h, w } => {
                let xs = Shape::new(1, cin, h, w)?;
                let x = fill(&mut rng, xs.elements(), -3, 2, 32);
                let wt = fill(&mut rng, cin.saturating_mul(cout), -5, 0, 32);
                let (os, expected) = reference::conv1x1(&x, &xs, &wt, cout, None, r)?;
                Prepared {
                    program: builder::conv1x1(cin, cout, h, w, &wt)?,
                    inputs: vec![("x", x)],
                    expected,
                    output_shape: os,
                    bound_ulp: 2,
                }
            }
            CellOp::Linear {
                batch,
                in_features,
                out_features,
            } => {
                let n_in = batch.saturating_mul(in_features);
                let x = fill(&mut rng, n_in, -3, 2, 32);
                let wt = fill(
                    &mut rng,
                    in_features.saturating_mul(out_features),
                    -5,
                    0,
                    32,
                );
                let program = builder::linear(batch, in_features, out_features, &wt)?;
                let y = reference::linear(&x, batch, in_features, &wt, out_features, None, r)?;
                let len = |what: &'static str, found: usize, expected: usize| {
                    reference::RefError::Length {
                        operand: what,
                        expected,
                        found,
                    }
                };
                let x_nchw = builder::linear_input_to_nchw(&x, batch, in_features).ok_or(len(
                    "x",
                    x.len(),
                    n_in,
                ))?;
                // [batch][out] -> [out][batch], the output tensor's order.
                let expected = builder::linear_input_to_nchw(&y, batch, out_features)
                    .ok_or(len("y", y.len(), batch.saturating_mul(out_features)))?;
                Prepared {
                    program,
                    inputs: vec![("x", x_nchw)],
                    expected,
                    output_shape: Shape::new(1, out_features, 1, batch)?,
                    bound_ulp: 2,
                }
            }
        })
    }
}

/// Why an executor could not produce the outputs.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// No data was given for an input tensor.
    #[error("no data for input tensor {name} (slot {slot})")]
    MissingInput {
        /// The tensor.
        name: &'static str,
        /// Its slot.
        slot: u32,
    },
    /// Tiling or untiling failed (wrong length).
    #[error("tensor {name}: {source}")]
    Tensor {
        /// The tensor.
        name: &'static str,
        /// Why.
        source: TensorError,
    },
    /// A size does not fit host memory.
    #[error("tensor {name}: buffer size {size} does not fit in memory")]
    Size {
        /// The tensor.
        name: &'static str,
        /// Bytes.
        size: u64,
    },
    /// The engine model stopped.
    #[error("engine model: {0}")]
    Engine(EngineError),
    /// A device call failed.
    #[error("device: {0}")]
    Device(#[from] device::Error),
    /// The job did not complete in time.
    #[error("the job did not complete within {0:?}")]
    Timeout(Duration),
    /// The job ended without completing.
    #[error("the job ended with {0:?}")]
    Job(JobStatus),
}

/// Something that runs built programs.
pub trait Executor {
    /// A short name for reports (`model`, `device`).
    fn name(&self) -> &str;

    /// Runs `p` with the dense NCHW data of each input tensor and returns
    /// the dense data of each output, in [`Program::outputs`] order.
    fn run(
        &mut self,
        p: &Program,
        inputs: &[(&TensorSlot, &[f16])],
    ) -> Result<Vec<Vec<f16>>, ExecError>;
}

fn input_for<'a>(
    t: &TensorSlot,
    inputs: &[(&TensorSlot, &'a [f16])],
) -> Result<&'a [f16], ExecError> {
    inputs
        .iter()
        .find(|(s, _)| s.slot == t.slot)
        .map(|(_, d)| *d)
        .ok_or(ExecError::MissingInput {
            name: t.name,
            slot: t.slot,
        })
}

/// Device memory of the engine model: disjoint regions of host memory.
#[derive(Clone, Debug, Default)]
pub struct HostMem {
    regions: Vec<(u64, Vec<u8>)>,
}

impl HostMem {
    /// Maps `bytes` at device address `iova`.
    pub fn map(&mut self, iova: u64, bytes: Vec<u8>) {
        self.regions.push((iova, bytes));
    }

    /// The region mapped at exactly `iova`.
    pub fn region(&self, iova: u64) -> Option<&[u8]> {
        self.regions
            .iter()
            .find(|(b, _)| *b == iova)
            .map(|(_, v)| v.as_slice())
    }

    /// The region mapped at exactly `iova`, writable.
    pub fn region_mut(&mut self, iova: u64) -> Option<&mut Vec<u8>> {
        self.regions
            .iter_mut()
            .find(|(b, _)| *b == iova)
            .map(|(_, v)| v)
    }

    /// The region and offset of a transfer of `len` bytes at `iova`, which
    /// must lie inside one region.
    fn locate(&mut self, iova: u64, len: usize) -> Result<(&mut Vec<u8>, usize), Fault> {
        for (base, data) in self.regions.iter_mut() {
            let Some(off) = iova.checked_sub(*base) else {
                continue;
            };
            let Ok(off) = usize::try_from(off) else {
                continue;
            };
            if off >= data.len() {
                continue;
            }
            if off.checked_add(len).is_some_and(|e| e <= data.len()) {
                return Ok((data, off));
            }
            let end = (*base).saturating_add(data.len() as u64);
            return Err(Fault { iova: end });
        }
        Err(Fault { iova })
    }
}

impl Dma for HostMem {
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let len = buf.len();
        let (data, off) = self.locate(iova, len)?;
        buf.copy_from_slice(&data[off..off + len]);
        Ok(())
    }

    fn write(&mut self, iova: u64, buf: &[u8]) -> Result<(), Fault> {
        let (data, off) = self.locate(iova, buf.len())?;
        data[off..off + buf.len()].copy_from_slice(buf);
        Ok(())
    }
}

/// Runs programs on the functional engine model in host memory. The
/// program image is mapped as the driver maps it (TDs at BAR 0, weights at
/// BAR 1 = BAR 0 + `round_up(tsk_size, 16)`); each tensor slot gets a
/// buffer of its `buffer_size`, unmapped gaps between them, output and
/// scratch buffers filled with `0xA5` beforehand.
#[derive(Clone, Debug, Default)]
pub struct ModelExecutor {
    /// The model's options (rounding, overflow, weight order, budget).
    pub options: engine::Options,
    /// What the last run did.
    pub stats: engine::Stats,
}

/// Where [`ModelExecutor`] maps the program image.
const MODEL_PROGRAM_IOVA: u64 = 0x1000_0000;
/// Where it maps the first tensor; each next one follows after a gap.
const MODEL_TENSOR_IOVA: u64 = 0x4000_0000;
/// The unmapped gap after each tensor buffer.
const MODEL_GAP: u64 = 0x10_0000;

impl ModelExecutor {
    /// An executor with the model's default options.
    pub fn new() -> ModelExecutor {
        ModelExecutor::default()
    }
}

impl Executor for ModelExecutor {
    fn name(&self) -> &str {
        "model"
    }

    fn run(
        &mut self,
        p: &Program,
        inputs: &[(&TensorSlot, &[f16])],
    ) -> Result<Vec<Vec<f16>>, ExecError> {
        let mut mem = HostMem::default();
        let mut bars = [0u64; crate::hw::td::BAR_SLOTS];
        bars[0] = MODEL_PROGRAM_IOVA;
        bars[1] = MODEL_PROGRAM_IOVA + p.weights_offset();
        mem.map(MODEL_PROGRAM_IOVA, p.image());
        let mut next = MODEL_TENSOR_IOVA;
        for t in &p.tensors {
            let size = usize::try_from(t.buffer_size).map_err(|_| ExecError::Size {
                name: t.name,
                size: t.buffer_size,
            })?;
            let mut buf = vec![0xA5u8; size];
            if t.direction == Direction::In {
                let data = input_for(t, inputs)?;
                tensor::tile_bytes(&t.shape, &tensor::f16_to_le_bytes(data), &mut buf).map_err(
                    |source| ExecError::Tensor {
                        name: t.name,
                        source,
                    },
                )?;
            }
            if let Some(bar) = bars.get_mut(t.slot as usize) {
                *bar = next;
            }
            mem.map(next, buf);
            next = next
                .saturating_add(t.buffer_size)
                .saturating_add(MODEL_GAP)
                .div_ceil(MODEL_GAP)
                .saturating_mul(MODEL_GAP);
        }
        self.stats = engine::execute(
            &mut mem,
            bars[0],
            p.td_size,
            p.td_count,
            &bars,
            &self.options,
        )
        .map_err(ExecError::Engine)?;
        let mut outs = Vec::new();
        for t in p.outputs() {
            let base = bars.get(t.slot as usize).copied().unwrap_or(0);
            let buf = mem.region(base).unwrap_or(&[]);
            let mut dense = vec![0u8; t.shape.layout().dense_bytes()];
            tensor::untile_bytes(&t.shape, buf, &mut dense).map_err(|source| {
                ExecError::Tensor {
                    name: t.name,
                    source,
                }
            })?;
            outs.push(tensor::f16_from_le_bytes(&dense));
        }
        Ok(outs)
    }
}

/// Runs programs on an `ane` device: PROGRAM_CREATE, one BO per tensor
/// slot, inputs tiled into the mapped BOs, EXEC, WAIT, outputs untiled.
#[derive(Debug)]
pub struct DeviceExecutor<'d> {
    /// The device.
    pub device: &'d Device,
    /// How long to wait for each job.
    pub timeout: Duration,
    /// EXEC priority.
    pub priority: u32,
}

impl<'d> DeviceExecutor<'d> {
    /// An executor on `device` waiting up to 10 s per job at normal
    /// priority.
    pub fn new(device: &'d Device) -> DeviceExecutor<'d> {
        DeviceExecutor {
            device,
            timeout: Duration::from_secs(10),
            priority: crate::hw::uapi::priority::NORMAL,
        }
    }
}

impl Executor for DeviceExecutor<'_> {
    fn name(&self) -> &str {
        "device"
    }

    fn run(
        &mut self,
        p: &Program,
        inputs: &[(&TensorSlot, &[f16])],
    ) -> Result<Vec<Vec<f16>>, ExecError> {
        let dev = self.device;
        let program = dev.load_program(p)?;
        let (mut bos, bindings) = dev.bind_program(p)?;
        for (t, bo) in p.tensors.iter().zip(bos.iter_mut()) {
            if t.direction != Direction::In {
                continue;
            }
            let data = input_for(t, inputs)?;
            let m = bo.map()?;
            tensor::tile_bytes(&t.shape, &tensor::f16_to_le_bytes(data), m).map_err(|source| {
                ExecError::Tensor {
                    name: t.name,
                    source,
                }
            })?;
        }
        let id = dev.exec(&program, &bindings, self.priority)?;
        match dev.wait(id, self.timeout)? {
            Some(JobStatus::Done) => {}
            Some(other) => return Err(ExecError::Job(other)),
            None => return Err(ExecError::Timeout(self.timeout)),
        }
        let mut outs = Vec::new();
        for (t, bo) in p.tensors.iter().zip(bos.iter_mut()) {
            if t.direction != Direction::Out {
                continue;
            }
            let m = bo.map()?;
            let mut dense = vec![0u8; t.shape.layout().dense_bytes()];
            tensor::untile_bytes(&t.shape, m, &mut dense).map_err(|source| ExecError::Tensor {
                name: t.name,
                source,
            })?;
            outs.push(tensor::f16_from_le_bytes(&dense));
        }
        Ok(outs)
    }
}

/// How a cell came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Every output bit equals the reference.
    Exact,
    /// Within the cell's bound; the largest ULP difference seen.
    WithinBound(u32),
    /// Beyond the bound, or the run failed.
    Fail,
}

/// One row of the parity table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CellResult {
    /// The cell's name.
    pub cell: &'static str,
    /// The executor's name.
    pub executor: String,
    /// The output shape (or the operation, when the cell did not build).
    pub shape: String,
    /// Output elements compared.
    pub elements: usize,
    /// Largest ULP difference ([`reference::ULP_NAN_MISMATCH`] when NaNs
    /// disagree).
    pub max_ulp: u32,
    /// Elements beyond the bound (for bit-exact cells: elements whose bits
    /// differ).
    pub mismatches: usize,
    /// The accepted bound (0: bit-exact).
    pub bound_ulp: u32,
    /// The grade.
    pub verdict: Verdict,
    /// Why the cell failed to build or run, if it did.
    pub error: Option<String>,
}

/// Grades `actual` against `expected` with `bound_ulp` (0: bit-exact).
pub fn grade(expected: &[f16], actual: &[f16], bound_ulp: u32) -> (Verdict, reference::UlpStats) {
    match reference::compare(expected, actual, bound_ulp) {
        Ok(s) => {
            let v = if s.bit_mismatches == 0 {
                Verdict::Exact
            } else if bound_ulp > 0 && s.mismatches == 0 {
                Verdict::WithinBound(s.max_ulp)
            } else {
                Verdict::Fail
            };
            (v, s)
        }
        Err(_) => (
            Verdict::Fail,
            reference::UlpStats {
                count: actual.len(),
                max_ulp: reference::ULP_NAN_MISMATCH,
                mismatches: actual.len().max(expected.len()),
                ..Default::default()
            },
        ),
    }
}

/// Prepares `cell`, runs it on `exec` and grades it.
pub fn run_cell(cell: &Cell, exec: &mut dyn Executor) -> CellResult {
    let mut r = CellResult {
        cell: cell.name,
        executor: exec.name().to_string(),
        shape: format!("{:?}", cell.op),
        elements: 0,
        max_ulp: 0,
        mismatches: 0,
        bound_ulp: 0,
        verdict: Verdict::Fail,
        error: None,
    };
    let prep = match cell.prepare() {
        Ok(p) => p,
        Err(e) => {
            r.error = Some(e.to_string());
            return r;
        }
    };
    r.shape = prep.output_shape.to_string();
    r.bound_ulp = prep.bound_ulp;
    let mut args: Vec<(&TensorSlot, &[f16])> = Vec::new();
    for (name, data) in &prep.inputs {
        match prep.program.tensor(name) {
            Some(t) => args.push((t, data)),
            None => {
                r.error = Some(format!("the program has no tensor {name}"));
                return r;
            }
        }
    }
    let outs = match exec.run(&prep.program, &args) {
        Ok(o) => o,
        Err(e) => {
            r.error = Some(e.to_string());
            return r;
        }
    };
    let Some(actual) = outs.first() else {
        r.error = Some("the executor returned no output".to_string());
        return r;
    };
    let (verdict, s) = grade(&prep.expected, actual, prep.bound_ulp);
    r.elements = s.count;
    r.max_ulp = s.max_ulp;
    r.mismatches = if prep.bound_ulp == 0 {
        s.bit_mismatches
    } else {
        s.mismatches
    };
    r.verdict = verdict;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_passes_on_the_model() {
        let mut exec = ModelExecutor::new();
        let results: Vec<CellResult> = cells().iter().map(|c| run_cell(c, &mut exec)).collect();
        for r in &results {
            println!(
                "{:20} {:24} {:6} elements  max {} ulp  {:?}",
                r.cell, r.shape, r.elements, r.max_ulp, r.verdict
            );
            assert!(r.error.is_none(), "{}: {:?}", r.cell, r.error);
            assert_ne!(r.verdict, Verdict::Fail, "{r:?}");
            assert!(r.elements > 0);
        }
        // The model accumulates like the reference: everything is exact.
        assert!(results.iter().all(|r| r.verdict == Verdict::Exact));
        assert_eq!(results.len(), 7);
    }

    #[test]
    fn cells_are_deterministic_and_distinct() {
        let a = cells()[0].prepare().unwrap();
        let b = cells()[0].prepare().unwrap();
        assert_eq!(a.inputs, b.inputs);
        assert_eq!(a.expected, b.expected);
        let names: std::collections::BTreeSet<_> = cells().iter().map(|c| c.name).collect();
        assert_eq!(names.len(), cells().len());
        // Inputs are finite, with some zeros, and select's cond is 0 or 1.
        for c in cells() {
            let p = c.prepare().unwrap();
            for (name, data) in &p.inputs {
                assert!(data.iter().all(|v| v.is_finite()), "{} {name}", c.name);
                if *name == "cond" {
                    assert!(data.iter().all(|v| *v == f16::ZERO || *v == f16::ONE));
                    assert!(data.contains(&f16::ZERO) && data.contains(&f16::ONE));
                }
            }
        }
    }

    #[test]
    fn grading() {
        let one = f16::ONE;
        let next = f16::from_bits(0x3C01);
        assert_eq!(grade(&[one], &[one], 0).0, Verdict::Exact);
        assert_eq!(grade(&[one], &[next], 0).0, Verdict::Fail);
        assert_eq!(grade(&[one], &[next], 2).0, Verdict::WithinBound(1));
        assert_eq!(
            grade(&[f16::ZERO], &[f16::NEG_ZERO], 0).0,
            Verdict::Fail,
            "bit-exact cells see the sign of zero"
        );
        assert_eq!(grade(&[one], &[one, one], 0).0, Verdict::Fail);
    }

    /// An executor that corrupts one output element: the cell must fail,
    /// and a failing run is reported, not panicked on.
    #[test]
    fn failures_are_reported() {
        struct Bad(ModelExecutor, bool);
        impl Executor for Bad {
            fn name(&self) -> &str {
                "bad"
            }
            fn run(
                &mut self,
                p: &Program,
                inputs: &[(&TensorSlot, &[f16])],
            ) -> Result<Vec<Vec<f16>>, ExecError> {
                if self.1 {
                    return Err(ExecError::Timeout(Duration::from_millis(1)));
                }
                let mut o = self.0.run(p, inputs)?;
                o[0][3] = f16::from_bits(o[0][3].to_bits() ^ 0x10);
                Ok(o)
            }
        }
        let cell = cells()[3];
        let r = run_cell(&cell, &mut Bad(ModelExecutor::new(), false));
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.mismatches, 1);
        let r = run_cell(&cell, &mut Bad(ModelExecutor::new(), true));
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.error.unwrap().contains("did not complete"));
        // Missing inputs.
        let p = builder::add(&Shape::new(1, 2, 1, 1).unwrap()).unwrap();
        let e = ModelExecutor::new().run(&p, &[]).unwrap_err();
        assert!(
            matches!(e, ExecError::MissingInput { name: "a", .. }),
            "{e}"
        );
        let json = serde_json_like(&run_cell(&cells()[1], &mut ModelExecutor::new()));
        assert!(json.contains("Exact"));
    }

    /// Serialize support without a JSON crate: the derived impl must at
    /// least drive a serializer; `Debug` stands in for the output.
    fn serde_json_like(r: &CellResult) -> String {
        fn assert_serialize<T: Serialize>(_: &T) {}
        assert_serialize(r);
        format!("{r:?}")
    }
}
