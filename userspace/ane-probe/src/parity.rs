// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe parity`: the parity cells ([`ane::parity`]) on a device or,
//! with `--model`, on the host engine model, graded against the CPU
//! reference.
//!
//! Elementwise cells must be bit-exact; convolution and linear cells may
//! differ by 2 ulp (the hardware's accumulation order is not known). The
//! exit code is 0 when every cell passes, 1 when one fails (or the device
//! fails a job), 2 without a device (and no `--model`) or for an unknown
//! cell name.

use ane::parity::{self, Cell, CellResult, DeviceExecutor, Executor, ModelExecutor, Verdict};
use clap::Args;
use serde::Serialize;

use crate::common::{Ctx, TargetArgs};
use crate::exit::{self, Error};
use crate::progress::{self, Progress};
use crate::receipt::{DeviceInfo, Header};

/// `parity`'s arguments.
#[derive(Args, Debug)]
pub struct ParityArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Only these cells, comma-separated [default: all].
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    cells: Vec<String>,
    /// First run this program, one whose exact bytes ran on an M1 per the
    /// hardware record (pinned by sha256: tinygrad's sum as `sum.anec` or
    /// `tinygrad_sum.hwx`), with the inputs it ran with, against the
    /// result it gave; a file the record does not pin is refused (exit 2).
    #[arg(long, value_name = "FILE")]
    h13_program: Option<std::path::PathBuf>,
}

/// The recorded program `parity --h13-program` ran before the cells.
#[derive(Clone, Debug, Serialize)]
pub struct RecordedRow {
    /// The file.
    pub program: String,
    /// Its sha256.
    pub sha256: String,
    /// Whether this exact program ran on hardware per the record.
    pub ran_on_hardware: bool,
    /// The record's source.
    pub provenance: &'static str,
    /// `exact` (every element the recorded result) or `fail`.
    pub verdict: &'static str,
    /// What happened.
    pub detail: String,
}

/// The `schema` of `parity --json`.
pub const SCHEMA: &str = "ane-probe/parity";

/// One row of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Cell name.
    pub cell: &'static str,
    /// Output shape.
    pub shape: String,
    /// Elements compared.
    pub elements: usize,
    /// Largest ULP difference (4294967295: a NaN where a number was due).
    pub max_ulp: u32,
    /// Elements beyond the bound (bit-exact cells: differing bits).
    pub mismatches: usize,
    /// The accepted bound (0: bit-exact).
    pub bound_ulp: u32,
    /// `exact`, `within-bound` or `fail`.
    pub verdict: &'static str,
    /// Why the cell failed to build or run.
    pub error: Option<String>,
    /// Whether this exact program ran on hardware per
    /// docs/hardware-record.md.
    pub ran_on_hardware: bool,
    /// The record's source for that, or why it never ran.
    pub provenance: &'static str,
}

/// The name of a verdict in JSON.
pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Exact => "exact",
        Verdict::WithinBound(_) => "within-bound",
        Verdict::Fail => "fail",
    }
}

/// The verdict as the table prints it.
pub fn verdict_text(v: Verdict) -> String {
    match v {
        Verdict::Exact => "exact".into(),
        Verdict::WithinBound(n) => format!("within {n} ulp"),
        Verdict::Fail => "FAIL".into(),
    }
}

/// A ULP figure for the table.
pub fn ulp_text(u: u32) -> String {
    if u == ane::reference::ULP_NAN_MISMATCH {
        "NaN".into()
    } else {
        u.to_string()
    }
}

impl Row {
    fn new(r: &CellResult) -> Row {
        let p = parity::provenance_of(r.cell).unwrap_or(parity::PROJECT_BUILT);
        Row {
            ran_on_hardware: p.ran_on_hardware,
            provenance: p.source,
            cell: r.cell,
            shape: r.shape.clone(),
            elements: r.elements,
            max_ulp: r.max_ulp,
            mismatches: r.mismatches,
            bound_ulp: r.bound_ulp,
            verdict: verdict_name(r.verdict),
            error: r.error.clone(),
        }
    }
}

/// `parity --json`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// [`SCHEMA`], version 1, tool, host, when the run ended.
    #[serde(flatten)]
    pub header: Header,
    /// `model` or `device`.
    pub executor: String,
    /// The device (absent with `--model`).
    pub device: Option<DeviceInfo>,
    /// The recorded program run first (`--h13-program`), if any.
    pub recorded: Option<RecordedRow>,
    /// Every cell run, in table order.
    pub cells: Vec<Row>,
    /// `pass` when no cell failed, else `fail`.
    pub verdict: &'static str,
}

/// The cells named by `--cells` (all when empty), in first-contact order:
/// programs that ran on hardware per the record first, then the others in
/// table order.
pub fn select_cells(names: &[String]) -> Result<Vec<Cell>, Error> {
    let all = parity::first_contact_order(parity::cells(), |c| c.provenance().ran_on_hardware);
    if names.is_empty() {
        return Ok(all);
    }
    for n in names {
        if !all.iter().any(|c| c.name == n.as_str()) {
            return Err(Error::UnknownCell {
                name: n.clone(),
                valid: all.iter().map(|c| c.name).collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok(all
        .into_iter()
        .filter(|c| names.iter().any(|n| n.as_str() == c.name))
        .collect())
}

fn run_all(cells: &[Cell], exec: &mut dyn Executor, bar: &Progress) -> Vec<CellResult> {
    cells
        .iter()
        .map(|c| {
            let r = parity::run_cell(c, exec);
            bar.inc();
            r
        })
        .collect()
}

/// `ane-probe parity`.
pub fn parity(ctx: &Ctx, args: &ParityArgs) -> Result<u8, Error> {
    let cells = select_cells(&args.cells)?;
    // The recorded program is vetted before anything runs.
    let recorded = match &args.h13_program {
        None => None,
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| Error::Unrecorded(format!("--h13-program {}: {e}", path.display())))?;
            let (r, sha) = crate::doctor::vet_h13(path, &bytes).map_err(|e| {
                Error::Unrecorded(format!(
                    "--h13-program: {e}; the record pins {}",
                    crate::doctor::h13_pins()
                ))
            })?;
            let prog = crate::program::ProgramFile::parse(path, &bytes)?;
            Some((path.clone(), sha, r, prog))
        }
    };
    let record_row = |path: &std::path::Path,
                      sha: &str,
                      r: &ane::recorded::Recorded,
                      res: Result<String, String>| RecordedRow {
        program: path.display().to_string(),
        sha256: sha.into(),
        ran_on_hardware: r.provenance.ran_on_hardware,
        provenance: r.provenance.source,
        verdict: if res.is_ok() { "exact" } else { "fail" },
        detail: res.unwrap_or_else(|e| e),
    };
    let mut recorded_row = None;
    let bar_wanted = progress::wanted(ctx.json);
    let (executor, device, results) = if args.target.model {
        if let Some((path, sha, r, prog)) = &recorded {
            let res = crate::session::ModelSession::new(prog)
                .map_err(|e| e.to_string())
                .and_then(|mut m| {
                    crate::doctor::run_recorded(&mut m, prog, r, args.target.timeout())
                });
            recorded_row = Some(record_row(path, sha, r, res));
        }
        let bar = Progress::new(cells.len() as u64, "parity", bar_wanted);
        let r = run_all(&cells, &mut ModelExecutor::new(), &bar);
        ("model", None, r)
    } else {
        let (dev, info) = args.target.open(ctx)?;
        if let Some((path, sha, r, prog)) = &recorded {
            let res = crate::session::Session::new(&dev, prog)
                .map_err(|e| e.to_string())
                .and_then(|mut s| {
                    crate::doctor::run_recorded(&mut s, prog, r, args.target.timeout())
                });
            recorded_row = Some(record_row(path, sha, r, res));
        }
        let mut exec = DeviceExecutor::new(&dev);
        exec.timeout = args.target.timeout();
        let bar = Progress::new(cells.len() as u64, "parity", bar_wanted);
        let r = run_all(&cells, &mut exec, &bar);
        ("device", Some(info), r)
    };
    let rows: Vec<Row> = results.iter().map(Row::new).collect();
    let failed = results.iter().any(|r| r.verdict == Verdict::Fail)
        || recorded_row.as_ref().is_some_and(|r| r.verdict == "fail");
    let report = Report {
        header: Header::new(SCHEMA, 1, &ctx.root),
        executor: executor.into(),
        device,
        recorded: recorded_row,
        cells: rows,
        verdict: if failed { "fail" } else { "pass" },
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report, &results);
    }
    for r in &results {
        if let Some(e) = &r.error {
            eprintln!("ane-probe: cell {}: {e}", r.cell);
        }
    }
    Ok(if failed { exit::FAILURE } else { exit::OK })
}

/// Formats rows as a table with aligned columns.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let parts: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        parts.join(" | ").trim_end().to_owned()
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    out.push('\n');
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&rule.join("-+-"));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out
}

fn print_table(r: &Report, results: &[CellResult]) {
    match &r.device {
        Some(d) => println!("executor: device {d}"),
        None => println!("executor: engine model (host)"),
    }
    if let Some(rec) = &r.recorded {
        println!(
            "recorded program {} (sha256 {}): {}: {}; {}",
            rec.program,
            rec.sha256,
            rec.verdict,
            rec.detail,
            if rec.ran_on_hardware {
                "ran on hardware per the record"
            } else {
                "never ran on hardware"
            }
        );
    }
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|c| {
            vec![
                c.cell.to_owned(),
                c.shape.clone(),
                ulp_text(c.max_ulp),
                c.mismatches.to_string(),
                if parity::provenance_of(c.cell).is_some_and(|p| p.ran_on_hardware) {
                    "ran".into()
                } else {
                    "never ran".into()
                },
                verdict_text(c.verdict),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "cell",
                "shape",
                "max ulp",
                "mismatches",
                "on hardware",
                "verdict"
            ],
            &rows
        )
    );
    println!("on hardware: whether that exact program ran on an Apple machine per docs/hardware-record.md (--json: provenance)");
    println!("verdict:  {}", r.verdict);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every receipt row says whether its program ran on hardware, with
    /// the record's source; programs that ran come first.
    #[test]
    fn rows_say_whether_the_program_ran_on_hardware() {
        for c in parity::cells() {
            let r = parity::run_cell(&c, &mut ModelExecutor::new());
            let row = Row::new(&r);
            assert!(
                !row.ran_on_hardware,
                "{}: the record shows no builder output on hardware",
                c.name
            );
            assert!(
                row.provenance.starts_with("never ran: "),
                "{}",
                row.provenance
            );
            let v = serde_json::to_value(&row).unwrap();
            assert_eq!(v["ran_on_hardware"], false);
            assert!(v["provenance"]
                .as_str()
                .unwrap()
                .contains("hardware-record"));
        }
        let cells = parity::cells();
        let last = cells.last().unwrap().name;
        let order = parity::first_contact_order(cells, |c| c.name == last);
        assert_eq!(order[0].name, last, "a program that ran goes first");
    }

    #[test]
    fn cell_selection() {
        assert_eq!(select_cells(&[]).unwrap().len(), parity::cells().len());
        let c = select_cells(&["select".into(), "add_mul".into()]).unwrap();
        let names: Vec<&str> = c.iter().map(|c| c.name).collect();
        assert_eq!(names, ["add_mul", "select"], "table order");
        let e = select_cells(&["add".into()]).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("'add'") && m.contains("add_1x512") && m.contains("conv1x1"),
            "{m}"
        );
        assert_eq!(e.code(), exit::USAGE);
    }

    #[test]
    fn table_layout() {
        let t = table(
            &["cell", "verdict"],
            &[vec!["a_long_name".into(), "exact".into()]],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "cell        | verdict");
        assert_eq!(lines[1], "------------+--------");
        assert_eq!(lines[2], "a_long_name | exact");
        assert_eq!(verdict_text(Verdict::WithinBound(2)), "within 2 ulp");
        assert_eq!(verdict_text(Verdict::Fail), "FAIL");
        assert_eq!(ulp_text(u32::MAX), "NaN");
    }
}
