// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe compile MODEL.onnx -o MODEL.anec`: the open compiler
//! ([`ane::compiler`]) from the command line.

use std::path::PathBuf;

use ane::compiler::{self, CompileError, Target};
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::common::Ctx;
use crate::exit::{self, Error};

/// What `compile --help` says after the options.
pub const AFTER_HELP: &str =
    "Supported ONNX subset (default domain, float32/float16 tensors, fixed shapes):
  Gemm                transA = 0, any transB, alpha, beta; B and C constant (C per output feature)
  MatMul              a 2-D [batch, features] activation times a constant matrix
  Conv                any kernel, stride, explicit pads and group (depthwise), batch 1; W and B
                      constant; no dilations, no auto_pad SAME_*. A k x k / strided / padded /
                      grouped Conv gathers its window with copy TDs, then one 1x1 convolution
  MaxPool             explicit pads (filled with -inf), ceil_mode 0, no Indices output: exact
  AveragePool         as a 1x1 convolution over the window; pads only with count_include_pad 1
  GlobalAveragePool   one 1x1 convolution reading the pixels as its input channels
  BatchNormalization  inference form, folded into the preceding Conv/Gemm/MatMul
  Relu                fused into the preceding convolution when it has no bias, else its own TD
  Sigmoid             the engine's table non-linearity (Apple's table: linear interpolation
                      between samples 1/2 apart, abs error <= 0.0035; 0/1 beyond -9.94/8.32)
  Gelu                approximate = \"none\": the same with a GELU table (eiln's compiled
                      gelu's layout, samples 1/4 apart, abs error <= 0.0035; identity above 4)
  Clip, LeakyRelu     constant bounds / alpha: the same with a table without samples
                      (eiln's relu6, hardtanh, leakyrelu): exact
  (refused)           Tanh, Erf, Exp, Log, Sqrt, Reciprocal: the engine's tables for them are
                      not understood (td.md 2.4), so nothing could check the program
  Flatten, Reshape    only when the engine tensor stays the same ([1, C, 1, 1] <-> [1, C]): free
  Abs                 one-source planar op (Mul(x, x) is a square reading x twice)
  Concat              on the channel / feature axis (1): one copy TD per input
  Add, Sub, Mul       two activations of the same shape, or an activation and a constant that
                      broadcasts to it (the constant is stored with the weights)
  Max, Min, Mean      two activations of the same shape (Mean of two inputs)
Activations are [batch, features] (stored as (1, features, 1, batch)) or [1, C, H, W]
(stored as itself, or as (1, C, H*W, 1), one pixel per 64-byte row, in a graph with a
window; arrays go in and come back in the model's own shape all the same).
The whole graph becomes one program: intermediates stay in the scratch buffer (slot 3),
the output is slot 4, inputs from slot 5. The .anec keeps the model's input and output
names and shapes: `ane-probe run --program MODEL.anec --in NAME=x.npy --out NAME=y.npy`.
Any other op, attribute or shape is refused with the node's name, its op and the reason
(exit code 3); nothing falls back silently.

Targets: h13 (M1: T8103, T6000, T6001, T6002). t6021 (H14, M2 Pro/Max) is refused as out
of scope until the H14 program container is understood from the hardware record.

Exit codes:
  0  compiled
  2  usage error (bad arguments, unreadable model, unwritable output, --target t6021)
  3  the model cannot be compiled (not ONNX, an unsupported node, a shape beyond the engine)";

/// The target names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TargetArg {
    /// H13: M1 (T8103, T6000/1/2).
    H13,
    /// H14: T6021 (refused: out of scope).
    T6021,
}

/// `compile`'s arguments.
#[derive(Args, Debug)]
pub struct CompileArgs {
    /// The ONNX model.
    #[arg(value_name = "MODEL.onnx")]
    model: PathBuf,
    /// Where to write the compiled program (.anec).
    #[arg(short, long, value_name = "MODEL.anec")]
    output: PathBuf,
    /// The engine generation.
    #[arg(long, value_enum, default_value = "h13")]
    target: TargetArg,
}

/// What `compile --json` prints.
#[derive(Serialize)]
struct Report {
    model: String,
    output: String,
    nodes: usize,
    /// Programs emitted (the whole graph is one).
    programs: u32,
    tds: u32,
    /// Wall time of parsing, shape inference and lowering.
    compile_us: u64,
    weights_bytes: usize,
    tensors: Vec<Io>,
}

#[derive(Serialize)]
struct Io {
    name: String,
    slot: u32,
    direction: &'static str,
    dims: Vec<usize>,
}

/// Runs `compile`.
pub fn compile(ctx: &Ctx, args: &CompileArgs) -> Result<u8, Error> {
    let target = match args.target {
        TargetArg::H13 => Target::H13,
        TargetArg::T6021 => Target::T6021,
    };
    if target == Target::T6021 {
        return Err(Error::Compile(CompileError::Target("t6021")));
    }
    let bytes = std::fs::read(&args.model).map_err(|source| Error::Read {
        what: "ONNX model".into(),
        path: args.model.clone(),
        source,
    })?;
    let t0 = std::time::Instant::now();
    let c = compiler::compile(&bytes, target)?;
    let compile_us = t0.elapsed().as_micros() as u64;
    c.program.validate().map_err(|e| {
        Error::Model(format!(
            "the kernel's validator refuses the compiled program: {e}"
        ))
    })?;
    let anec = c.to_anec()?;
    std::fs::write(&args.output, anec.to_bytes()).map_err(|source| Error::Write {
        what: "compiled program".into(),
        path: args.output.clone(),
        source,
    })?;
    let report = Report {
        model: args.model.display().to_string(),
        output: args.output.display().to_string(),
        nodes: c.nodes,
        programs: 1,
        tds: c.program.td_count,
        compile_us,
        weights_bytes: c.program.weights.len(),
        tensors: c
            .io
            .iter()
            .map(|t| Io {
                name: t.name.clone(),
                slot: t.slot,
                direction: if t.direction == ane::builder::Direction::In {
                    "input"
                } else {
                    "output"
                },
                dims: t.dims.clone(),
            })
            .collect(),
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{}: {} node(s) -> {} program, {} TD(s), {} bytes of weights and constants, compiled in {:.3} ms",
            report.model,
            report.nodes,
            report.programs,
            report.tds,
            report.weights_bytes,
            report.compile_us as f64 / 1000.0
        );
        for t in &report.tensors {
            println!(
                "  {:<6} slot {} '{}' {:?}",
                t.direction, t.slot, t.name, t.dims
            );
        }
        println!("wrote {}", report.output);
    }
    Ok(exit::OK)
}
