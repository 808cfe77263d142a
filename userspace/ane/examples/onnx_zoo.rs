// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Writes the compiler's zoo (`ane::compiler::zoo`) for the onnxruntime
//! cross-check and the Python tests: for each model `NAME.onnx`, its input
//! `NAME.in.npy` (f32, the fp16-rounded values the engine receives), the
//! f64 CPU evaluation `NAME.ref.npy` (as f32), the engine model's output
//! of the compiled program `NAME.engine.npy` (f32) and `NAME.json` (input
//! and output names, the tolerance bound, the TD count).
//!
//! It also writes `refused.onnx`, a model the compiler must refuse.
//! `userspace/ane-py/tests/data` holds its output for seed 29.
//!
//! `cargo run -p ane --example onnx_zoo -- DIR [SEED]`, then
//! `python3 ane/examples/onnxruntime_check.py DIR`. After rewriting
//! `userspace/ane-py/tests/data`, rewrite its onnxruntime outputs
//! (`NAME.ort.npy`, the guest's references) with
//! `ANE_RS_WRITE_ORT_REFS=1 pytest userspace/ane-py/tests/test_onnxruntime.py`.

use std::path::PathBuf;

use ane::compiler::{self, zoo, Target};
use half::f16;

fn npy_f32(dims: &[usize], vals: &[f32]) -> Vec<u8> {
    let shape: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let mut h = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        shape.join(", ")
    );
    let unpadded = 10 + h.len() + 1;
    h.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(h.len() as u16).to_le_bytes());
    v.extend_from_slice(h.as_bytes());
    for x in vals {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: onnx_zoo DIR [SEED]")?);
    let seed: u64 = args
        .next()
        .map_or(Ok(29), |s| s.parse().map_err(|_| "SEED"))?;
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for ex in zoo::all(seed) {
        let c = compiler::compile(&ex.onnx, Target::H13).map_err(|e| e.to_string())?;
        let (name, dims, x) = &ex.inputs[0];
        let x16: Vec<f32> = x.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
        let y = c.run_on_model(&[(name.as_str(), x.as_slice())])?;
        let err = ex.max_error(&y)?;
        let w = |f: String, b: &[u8]| std::fs::write(dir.join(f), b).map_err(|e| e.to_string());
        w(format!("{}.onnx", ex.name), &ex.onnx)?;
        w(format!("{}.in.npy", ex.name), &npy_f32(dims, &x16))?;
        w(
            format!("{}.engine.npy", ex.name),
            &npy_f32(&ex.output.1, &y),
        )?;
        let r: Vec<f32> = ex.reference.iter().map(|&v| v as f32).collect();
        w(format!("{}.ref.npy", ex.name), &npy_f32(&ex.output.1, &r))?;
        w(
            format!("{}.json", ex.name),
            format!(
                "{{\"input\": \"{name}\", \"output\": \"{}\", \"bound\": {:e}, \"tds\": {}}}\n",
                ex.output.0,
                ex.bound(),
                c.program.td_count
            )
            .as_bytes(),
        )?;
        println!(
            "{}: {} TD(s), engine vs f64 CPU max abs error {err:.3e} (bound {:.3e})",
            ex.name,
            c.program.td_count,
            ex.bound()
        );
    }
    // A model the compiler refuses (node 'act', a Softmax).
    std::fs::write(dir.join("refused.onnx"), zoo::unsupported_example())
        .map_err(|e| e.to_string())?;
    Ok(())
}
