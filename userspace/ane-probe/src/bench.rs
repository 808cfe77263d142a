// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe bench`: timed runs of a compiled program and a receipt.
//!
//! Inputs are random fp16 values in [−1, 1] from a seeded generator (or
//! files given with `--in`). After `--warmup` untimed runs, each of `-n`
//! runs is one EXEC+WAIT, timed from submission to completion; every timed
//! run's outputs are hashed and must equal the first timed run's, or the
//! verdict is `mismatch`.

use std::path::PathBuf;

use ane::hwx::Direction;
use clap::Args;
use half::f16;

use crate::common::{check_writable, Ctx, JobArgs};
use crate::exit::Error;
use crate::program::ProgramFile;
use crate::progress::{self, Progress};
use crate::receipt::{self, Header, Receipt, Runs, TensorHash, Verdict};
use crate::session::{open_device, ModelSession, Runner, Session};
use crate::slots::{self, parse_slot_arg, SlotArg, TensorData};
use crate::stats::{self, human_ns};

/// `bench`'s arguments.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Timed runs.
    #[arg(short = 'n', long = "runs", value_name = "RUNS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Untimed runs before them.
    #[arg(long, value_name = "N", default_value_t = 10)]
    warmup: u64,
    /// Seed of the random inputs.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Use a file for an input instead of random data (dense little-endian
    /// fp16 NCHW, or `.npy`).
    #[arg(long = "in", value_name = "SLOT=FILE", value_parser = parse_slot_arg)]
    inputs: Vec<SlotArg>,
    /// Write an output of the first timed run (dense fp16 NCHW, `.npy`
    /// when FILE ends in `.npy`).
    #[arg(long = "out", value_name = "SLOT=FILE", value_parser = parse_slot_arg)]
    outputs: Vec<SlotArg>,
    /// Write the JSON receipt to PATH.
    #[arg(long, value_name = "PATH")]
    receipt: Option<PathBuf>,
}

/// splitmix64: small, fast, and the same on every platform.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `elements` random fp16 values in [−1, 1], little-endian, for the input
/// in `slot`: a function of the seed and the slot only.
pub fn random_dense(seed: u64, slot: usize, elements: u64) -> Vec<u8> {
    let mut state = seed ^ (slot as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    let mut out = Vec::with_capacity(elements as usize * 2);
    for _ in 0..elements {
        // 24 random bits → [−1, 1) exactly representable in f32.
        let x = (splitmix64(&mut state) >> 40) as f32 / (1u32 << 23) as f32 - 1.0;
        out.extend_from_slice(&f16::from_f32(x).to_le_bytes());
    }
    out
}

/// The inputs of a bench: files where given, random data elsewhere.
pub fn bench_inputs(
    program: &ProgramFile,
    files: &[SlotArg],
    seed: u64,
) -> Result<Vec<TensorData>, Error> {
    let given = slots::resolve(program, "--in", files, Direction::Input)?;
    let mut out = Vec::new();
    for (i, t) in program.tensors.iter().enumerate() {
        if t.direction != Direction::Input {
            continue;
        }
        match given.iter().find(|r| r.tensor == i) {
            Some(r) => out.push(TensorData {
                tensor: i,
                dense: slots::read_tensor("--in", t, &r.path)?,
                file: Some(r.path.clone()),
            }),
            None => out.push(TensorData {
                tensor: i,
                dense: random_dense(seed, t.slot, t.elements()),
                file: None,
            }),
        }
    }
    Ok(out)
}

/// `ane-probe bench`.
pub fn bench(ctx: &Ctx, args: &BenchArgs) -> Result<u8, Error> {
    let prog = ProgramFile::read(&args.job.program)?;
    let inputs = bench_inputs(&prog, &args.inputs, args.seed)?;
    let outs = slots::resolve(&prog, "--out", &args.outputs, Direction::Output)?;
    for o in &outs {
        check_writable(
            format!("--out file for {}", prog.tensors[o.tensor].label()),
            &o.path,
        )?;
    }
    if let Some(r) = &args.receipt {
        check_writable("receipt".into(), r)?;
    }
    let dev = if args.job.model {
        None
    } else {
        Some(open_device(&ctx.root, args.job.device.as_deref())?)
    };
    let executor = if dev.is_some() { "device" } else { "model" };

    let mut receipt = Receipt {
        header: Header::new(receipt::SCHEMA, receipt::SCHEMA_VERSION, &ctx.root),
        device: None,
        program: receipt::program_info(&prog),
        inputs: inputs
            .iter()
            .map(|d| {
                let source = if d.file.is_some() { "file" } else { "random" };
                TensorHash::new(&prog.tensors[d.tensor], &d.dense, source, d.file.as_deref())
            })
            .collect(),
        outputs: Vec::new(),
        runs: Runs {
            requested: args.runs,
            warmup: args.warmup,
            completed: 0,
            mismatched: 0,
            seed: args.seed,
            priority: args.job.priority.name().into(),
            timeout_ms: args.job.timeout_ms,
        },
        timings: None,
        samples_ns: Vec::new(),
        verdict: Verdict::Pass,
        error: None,
    };
    let output_ids: Vec<usize> = (0..prog.tensors.len())
        .filter(|&i| prog.tensors[i].direction == Direction::Output)
        .collect();
    let bar = Progress::new(
        args.warmup + args.runs,
        "warm-up",
        progress::wanted(ctx.json),
    );
    let result = (|| -> Result<(), Error> {
        let mut s: Box<dyn Runner + '_> = match &dev {
            Some(dev) => {
                let q = dev.query()?;
                receipt.device = Some(receipt::device_info(dev, &q));
                Box::new(Session::new(dev, &prog)?)
            }
            None => Box::new(ModelSession::new(&prog)?),
        };
        for d in &inputs {
            s.write_tensor(&prog, d.tensor, &d.dense)?;
        }
        for &i in &output_ids {
            s.poison(i)?;
        }
        let (priority, timeout) = (args.job.priority.uapi(), args.job.timeout());
        bar.restart(args.warmup, "warm-up");
        for _ in 0..args.warmup {
            s.run_once(priority, timeout)?;
            bar.inc();
        }
        bar.restart(args.runs, "bench");
        let mut first: Option<Vec<String>> = None;
        for _ in 0..args.runs {
            let elapsed = s.run_once(priority, timeout)?;
            receipt
                .samples_ns
                .push(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
            receipt.runs.completed += 1;
            // Outside the timed region: hash this run's outputs.
            let mut hashes = Vec::new();
            for &i in &output_ids {
                let dense = s.read_tensor(&prog, i)?;
                hashes.push(receipt::sha256_hex(&dense));
                if first.is_none() {
                    let file = outs.iter().find(|o| o.tensor == i).map(|o| &o.path);
                    if let Some(f) = file {
                        slots::write_tensor(&prog.tensors[i], f, &dense)?;
                    }
                    receipt.outputs.push(TensorHash::new(
                        &prog.tensors[i],
                        &dense,
                        executor,
                        file.map(|f| f.as_path()),
                    ));
                }
            }
            match &first {
                None => first = Some(hashes),
                Some(f) if *f != hashes => receipt.runs.mismatched += 1,
                Some(_) => {}
            }
            bar.inc();
        }
        Ok(())
    })();
    drop(bar);
    receipt.timings = stats::summarize(&receipt.samples_ns);
    receipt.header.head.timestamp = receipt::now();
    match result {
        Ok(()) if receipt.runs.mismatched > 0 => {
            receipt.verdict = Verdict::Mismatch;
            receipt.error = Some(format!(
                "outputs of {} of {} timed runs differ from the first run's",
                receipt.runs.mismatched, receipt.runs.completed
            ));
        }
        Ok(()) => {}
        Err(e @ Error::Write { .. }) => return Err(e),
        Err(e) => {
            receipt.verdict = Verdict::of_error(&e);
            receipt.error = Some(e.to_string());
        }
    }
    let json = serde_json::to_string_pretty(&receipt)?;
    if let Some(path) = &args.receipt {
        std::fs::write(path, format!("{json}\n")).map_err(|source| Error::Write {
            what: "receipt".into(),
            path: path.clone(),
            source,
        })?;
    }
    if ctx.json {
        println!("{json}");
    } else {
        print_text(&receipt, args.receipt.as_deref());
    }
    if let Some(e) = &receipt.error {
        eprintln!("ane-probe: {e}");
    }
    Ok(receipt.verdict.code())
}

fn print_text(r: &Receipt, path: Option<&std::path::Path>) {
    println!(
        "program:  {} ({}, {} TD(s))",
        r.program.path, r.program.format, r.program.td_count
    );
    println!("sha256:   {}", r.program.sha256);
    if let Some(d) = &r.device {
        println!("device:   {d}");
    }
    println!(
        "runs:     {} of {} timed after {} warm-up, seed {}, priority {}",
        r.runs.completed, r.runs.requested, r.runs.warmup, r.runs.seed, r.runs.priority
    );
    if let Some(t) = &r.timings {
        println!(
            "latency:  median {}  p10 {}  p90 {}  min {}  max {}  mean {}",
            human_ns(t.median_ns),
            human_ns(t.p10_ns),
            human_ns(t.p90_ns),
            human_ns(t.min_ns),
            human_ns(t.max_ns),
            human_ns(t.mean_ns)
        );
    }
    for t in &r.inputs {
        println!(
            "input     slot {} '{}' {:?} ({})  sha256 {}",
            t.slot, t.name, t.dims, t.source, t.sha256
        );
    }
    for t in &r.outputs {
        println!(
            "output    slot {} '{}' {:?}  sha256 {}",
            t.slot, t.name, t.dims, t.sha256
        );
    }
    println!("verdict:  {}", r.verdict.text());
    if let Some(p) = path {
        println!("receipt:  {}", p.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_inputs_are_seeded_per_slot_and_in_range() {
        let a = random_dense(1, 5, 1000);
        assert_eq!(a.len(), 2000);
        assert_eq!(a, random_dense(1, 5, 1000));
        assert_ne!(a, random_dense(2, 5, 1000));
        assert_ne!(a, random_dense(1, 6, 1000));
        let values: Vec<f32> = a
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        assert!(
            values.iter().all(|v| (-1.0..=1.0).contains(v)),
            "{values:?}"
        );
        // Not degenerate: both signs, many distinct values.
        assert!(values.iter().any(|&v| v < -0.5) && values.iter().any(|&v| v > 0.5));
        let mut bits: Vec<u16> = a
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        bits.sort_unstable();
        bits.dedup();
        assert!(bits.len() > 500);
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;
    use crate::program::tests::fixture;

    #[test]
    fn inputs_are_random_unless_given() {
        let Some(path) = fixture("sum.anec") else {
            return;
        };
        let p = ProgramFile::read(&path).unwrap();
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("x.bin");
        std::fs::write(&f, [7u8; 128]).unwrap();
        let given = [parse_slot_arg(&format!("input1={}", f.display())).unwrap()];
        let ins = bench_inputs(&p, &given, 3).unwrap();
        assert_eq!(ins.len(), 2);
        assert_eq!(ins[0].file, None);
        assert_eq!(ins[0].dense, random_dense(3, 5, 64));
        assert_eq!(ins[1].file.as_deref(), Some(f.as_path()));
        assert_eq!(ins[1].dense, [7u8; 128]);
        // An output slot is refused for --in.
        let bad = [parse_slot_arg(&format!("4={}", f.display())).unwrap()];
        assert!(bench_inputs(&p, &bad, 3).is_err());
    }
}
