// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe run`: one inference of a compiled program.
//!
//! Everything that can be checked without a device is checked first: the
//! program, the `SLOT=FILE` arguments, the input files' sizes, the output
//! directories. Then the program is loaded, the inputs tiled into their
//! buffers, the outputs poisoned (fp16 NaN), one EXEC+WAIT runs, and the
//! outputs are untiled, hashed, written and compared.

use ane::hwx::Direction;
use ane::reference::{self, UlpStats};
use clap::Args;
use half::f16;
use serde::Serialize;

use crate::common::{check_writable, Ctx, JobArgs};
use crate::exit::{self, Error};
use crate::program::ProgramFile;
use crate::receipt::{self, DeviceInfo, Head, ProgramInfo, TensorHash, Verdict};
use crate::session::{open_device, ModelSession, Runner, Session};
use crate::slots::{self, parse_slot_arg, Resolved, SlotArg, TensorData};
use crate::stats::human_ns;

/// `run`'s arguments.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    job: JobArgs,
    /// An input: SLOT (slot number or tensor name) and a file of dense
    /// little-endian fp16 NCHW data (or `.npy`). Every input needs one.
    #[arg(long = "in", value_name = "SLOT=FILE", value_parser = parse_slot_arg)]
    inputs: Vec<SlotArg>,
    /// Write an output, dense little-endian fp16 NCHW (`.npy` when FILE
    /// ends in `.npy`).
    #[arg(long = "out", value_name = "SLOT=FILE", value_parser = parse_slot_arg)]
    outputs: Vec<SlotArg>,
    /// Compare an output with a file of the same format; a difference
    /// beyond --tolerance-ulp exits with 1.
    #[arg(long = "expect", value_name = "SLOT=FILE", value_parser = parse_slot_arg)]
    expect: Vec<SlotArg>,
    /// fp16 steps an output may differ from --expect.
    #[arg(long, value_name = "N", default_value_t = 0)]
    tolerance_ulp: u32,
}

/// One `--expect` comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ExpectResult {
    /// BAR slot.
    pub slot: usize,
    /// Tensor name.
    pub name: String,
    /// The expectation file.
    pub file: String,
    /// Tolerance used.
    pub tolerance_ulp: u32,
    /// The comparison.
    pub stats: UlpStats,
    /// Whether it passed.
    pub passed: bool,
}

/// The `schema` of `run --json`.
pub const SCHEMA: &str = "ane-probe/run";

/// What `run --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// [`SCHEMA`], version 1, tool, when the run ended.
    #[serde(flatten)]
    pub head: Head,
    /// The program.
    pub program: ProgramInfo,
    /// The device (absent if it could not be queried).
    pub device: Option<DeviceInfo>,
    /// The priority used.
    pub priority: &'static str,
    /// Inputs, by slot.
    pub inputs: Vec<TensorHash>,
    /// Outputs, by slot (empty when the job failed).
    pub outputs: Vec<TensorHash>,
    /// EXEC to completion, when the job completed.
    pub elapsed_ns: Option<u64>,
    /// `--expect` comparisons.
    pub expect: Vec<ExpectResult>,
    /// The verdict.
    pub verdict: Verdict,
    /// What went wrong, when the verdict is not `pass`.
    pub error: Option<String>,
}

/// Everything checked before a device is touched.
pub struct RunPlan {
    /// The program.
    pub program: ProgramFile,
    /// Every input.
    pub inputs: Vec<TensorData>,
    /// `--out` arguments.
    pub outputs: Vec<Resolved>,
    /// Every `--expect`.
    pub expect: Vec<TensorData>,
}

/// Reads the files of resolved arguments.
fn read_all(
    program: &ProgramFile,
    flag: &'static str,
    list: &[Resolved],
) -> Result<Vec<TensorData>, Error> {
    list.iter()
        .map(|r| {
            let dense = slots::read_tensor(flag, &program.tensors[r.tensor], &r.path)?;
            Ok(TensorData {
                tensor: r.tensor,
                dense,
                file: Some(r.path.clone()),
            })
        })
        .collect()
}

/// Checks `run`'s arguments and files against the program.
pub fn plan(
    program: ProgramFile,
    inputs: &[SlotArg],
    outputs: &[SlotArg],
    expect: &[SlotArg],
) -> Result<RunPlan, Error> {
    let ins = slots::resolve(&program, "--in", inputs, Direction::Input)?;
    let outs = slots::resolve(&program, "--out", outputs, Direction::Output)?;
    let exps = slots::resolve(&program, "--expect", expect, Direction::Output)?;
    slots::require_all_inputs(&program, &ins)?;
    for o in &outs {
        check_writable(
            format!("--out file for {}", program.tensors[o.tensor].label()),
            &o.path,
        )?;
    }
    Ok(RunPlan {
        inputs: read_all(&program, "--in", &ins)?,
        expect: read_all(&program, "--expect", &exps)?,
        outputs: outs,
        program,
    })
}

/// Little-endian fp16 bytes as values.
fn halves(bytes: &[u8]) -> Vec<f16> {
    bytes
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// Compares an output with its expectation.
pub fn compare(
    plan: &RunPlan,
    expected: &TensorData,
    actual: &[u8],
    tolerance_ulp: u32,
) -> ExpectResult {
    let t = &plan.program.tensors[expected.tensor];
    // Both sides were checked to be the tensor's size.
    let stats = reference::compare(&halves(&expected.dense), &halves(actual), tolerance_ulp)
        .unwrap_or_default();
    ExpectResult {
        slot: t.slot,
        name: t.name.clone(),
        file: expected
            .file
            .as_deref()
            .map(|f| f.display().to_string())
            .unwrap_or_default(),
        tolerance_ulp,
        passed: stats.passed() && stats.count == t.elements() as usize,
        stats,
    }
}

/// `ane-probe run`.
pub fn run(ctx: &Ctx, args: &RunArgs) -> Result<u8, Error> {
    let program = ProgramFile::read(&args.job.program)?;
    for n in &program.notes {
        eprintln!("ane-probe: note: {}: {n}", program.path.display());
    }
    let plan = plan(program, &args.inputs, &args.outputs, &args.expect)?;
    let prog = &plan.program;
    let dev = if args.job.model {
        None
    } else {
        Some(open_device(&ctx.root, args.job.device.as_deref())?)
    };
    let executor = if dev.is_some() { "device" } else { "model" };

    let mut report = RunReport {
        head: Head::new(SCHEMA, 1),
        program: receipt::program_info(prog),
        device: None,
        priority: args.job.priority.name(),
        inputs: plan
            .inputs
            .iter()
            .map(|d| TensorHash::new(&prog.tensors[d.tensor], &d.dense, "file", d.file.as_deref()))
            .collect(),
        outputs: Vec::new(),
        elapsed_ns: None,
        expect: Vec::new(),
        verdict: Verdict::Pass,
        error: None,
    };
    let result = (|| -> Result<(), Error> {
        let mut s: Box<dyn Runner + '_> = match &dev {
            Some(dev) => {
                let q = dev.query()?;
                report.device = Some(receipt::device_info(dev, &q));
                Box::new(Session::new(dev, prog)?)
            }
            None => Box::new(ModelSession::new(prog)?),
        };
        for d in &plan.inputs {
            s.write_tensor(prog, d.tensor, &d.dense)?;
        }
        for i in (0..prog.tensors.len()).filter(|&i| prog.tensors[i].direction == Direction::Output)
        {
            s.poison(i)?;
        }
        let elapsed = s.run_once(args.job.priority.uapi(), args.job.timeout())?;
        report.elapsed_ns = Some(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
        for i in (0..prog.tensors.len()).filter(|&i| prog.tensors[i].direction == Direction::Output)
        {
            let dense = s.read_tensor(prog, i)?;
            let file = plan.outputs.iter().find(|o| o.tensor == i).map(|o| &o.path);
            if let Some(f) = file {
                slots::write_tensor(&prog.tensors[i], f, &dense)?;
            }
            report.outputs.push(TensorHash::new(
                &prog.tensors[i],
                &dense,
                executor,
                file.map(|f| f.as_path()),
            ));
            for e in plan.expect.iter().filter(|e| e.tensor == i) {
                report
                    .expect
                    .push(compare(&plan, e, &dense, args.tolerance_ulp));
            }
        }
        Ok(())
    })();
    report.head.timestamp = receipt::now();
    let code = match result {
        Ok(()) => {
            let failed: Vec<String> = report
                .expect
                .iter()
                .filter(|e| !e.passed)
                .map(|e| {
                    format!(
                        "slot {} '{}': {} of {} elements beyond {} ULP (max {} at element {})",
                        e.slot,
                        e.name,
                        e.stats.mismatches,
                        e.stats.count,
                        e.tolerance_ulp,
                        e.stats.max_ulp,
                        e.stats.max_ulp_index.unwrap_or(0)
                    )
                })
                .collect();
            if failed.is_empty() {
                exit::OK
            } else {
                report.verdict = Verdict::Mismatch;
                report.error = Some(format!("output mismatch: {}", failed.join("; ")));
                exit::FAILURE
            }
        }
        // A file that cannot be written is the user's problem, not the
        // device's.
        Err(e @ Error::Write { .. }) => return Err(e),
        Err(e) => {
            report.verdict = Verdict::of_error(&e);
            report.error = Some(e.to_string());
            e.code()
        }
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    if let Some(e) = &report.error {
        eprintln!("ane-probe: {e}");
    }
    Ok(code)
}

fn print_text(r: &RunReport) {
    println!(
        "program:  {} ({}, {} TD(s))",
        r.program.path, r.program.format, r.program.td_count
    );
    println!("sha256:   {}", r.program.sha256);
    match &r.device {
        Some(d) => println!("device:   {d}"),
        None => println!("device:   none (the host engine model, --model)"),
    }
    for (kind, list) in [("input ", &r.inputs), ("output", &r.outputs)] {
        for t in list {
            println!(
                "{kind}    slot {} '{}' {:?}  sha256 {}{}",
                t.slot,
                t.name,
                t.dims,
                t.sha256,
                t.file
                    .as_deref()
                    .map(|f| format!("  ({f})"))
                    .unwrap_or_default()
            );
        }
    }
    for e in &r.expect {
        println!(
            "expect    slot {} '{}': {} (max {} ULP, {} of {} elements beyond {})",
            e.slot,
            e.name,
            if e.passed { "match" } else { "MISMATCH" },
            e.stats.max_ulp,
            e.stats.mismatches,
            e.stats.count,
            e.tolerance_ulp
        );
    }
    if let Some(ns) = r.elapsed_ns {
        println!("elapsed:  {} (EXEC to completion)", human_ns(ns));
    }
    println!("verdict:  {}", r.verdict.text());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::tests::fixture;
    use crate::slots::parse_slot_arg;

    #[test]
    fn plan_reads_inputs_and_compare_counts_ulps() {
        let Some(path) = fixture("tinygrad_sum.hwx") else {
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let one = f16::from_f32(1.0).to_le_bytes().repeat(64);
        let f = t.path().join("one.bin");
        std::fs::write(&f, &one).unwrap();
        let arg = |s: &str| parse_slot_arg(&format!("{s}={}", f.display())).unwrap();
        let plan = plan(
            ProgramFile::read(&path).unwrap(),
            &[arg("image"), arg("image2")],
            &[],
            &[arg("probs")],
        )
        .unwrap();
        assert_eq!(plan.inputs.len(), 2);
        assert_eq!(plan.inputs[0].dense, one);
        let e = &plan.expect[0];
        assert!(compare(&plan, e, &one, 0).passed);
        // One element one ULP off: a mismatch at 0 ULP, fine at 1.
        let mut off = one.clone();
        off[10..12].copy_from_slice(&f16::from_bits(0x3C01).to_le_bytes());
        let r = compare(&plan, e, &off, 0);
        assert!(!r.passed);
        assert_eq!((r.stats.mismatches, r.stats.max_ulp_index), (1, Some(5)));
        assert!(compare(&plan, e, &off, 1).passed);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["stats"]["max_ulp"], 1);
    }
}
