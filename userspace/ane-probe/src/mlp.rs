// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe mlp`: a two-layer perceptron `y = W2 · relu(W1 · x)` built
//! with the program builder, run as two programs chained through one
//! resident buffer (layer 1's output BO is layer 2's input BO, no copy),
//! and graded against the CPU reference; see [`ane::mlp`] for the chain
//! and for the bound (hidden layer within 2 ulp, output within the hidden
//! layer's error propagated through `W2` plus 3 ulp).

use ane::mlp::{self, DeviceMlp, Mlp, MlpResult, MlpShape, ModelMlp};
use ane::parity::{Rng, Verdict};
use clap::Args;
use serde::Serialize;

use crate::common::{Ctx, TargetArgs};
use crate::exit::{self, Error};
use crate::parity::{table, ulp_text, verdict_name, verdict_text};
use crate::receipt::{DeviceInfo, Header};

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(v) => Ok(v),
        Err(e) => Err(e.to_string()),
    }
}

/// `mlp`'s arguments.
#[derive(Args, Debug)]
pub struct MlpArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Input features.
    #[arg(long = "in", value_name = "N", default_value_t = MlpShape::DEFAULT.in_features,
          value_parser = positive)]
    in_features: usize,
    /// Hidden features.
    #[arg(long, value_name = "N", default_value_t = MlpShape::DEFAULT.hidden,
          value_parser = positive)]
    hidden: usize,
    /// Output features.
    #[arg(long = "out", value_name = "N", default_value_t = MlpShape::DEFAULT.out_features,
          value_parser = positive)]
    out_features: usize,
    /// Rows of the input.
    #[arg(long, value_name = "N", default_value_t = MlpShape::DEFAULT.batch,
          value_parser = positive)]
    batch: usize,
    /// Seed of the weights and the input.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Run both layers as one chained EXEC (one job) instead of one EXEC
    /// and WAIT per layer.
    #[arg(long, conflicts_with = "fenced")]
    chain: bool,
    /// Run the layers as two EXECs linked only by a DRM syncobj fence:
    /// layer 2 waits in the kernel for layer 1's out-fence, with no WAIT
    /// between them (driver minor 1).
    #[arg(long)]
    fenced: bool,
}

/// The `schema` of `mlp --json`.
pub const SCHEMA: &str = "ane-probe/mlp";

/// One layer's row.
#[derive(Clone, Debug, Serialize)]
pub struct LayerRow {
    /// `hidden` or `output`.
    pub layer: &'static str,
    /// Tensor shape on the engine.
    pub shape: String,
    /// Elements compared.
    pub elements: usize,
    /// Largest ULP difference from the reference.
    pub max_ulp: u32,
    /// Elements beyond their bound.
    pub mismatches: usize,
    /// Largest per-element bound, in ulp (large where cancellation makes
    /// the reference small).
    pub bound_ulp: u32,
    /// The median element's bound, in ulp.
    pub median_bound_ulp: u32,
    /// `exact`, `within-bound` or `fail`.
    pub verdict: &'static str,
}

/// `mlp --json`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// [`SCHEMA`], version 1, tool, host, when the run ended.
    #[serde(flatten)]
    pub header: Header,
    /// `model` or `device`.
    pub executor: String,
    /// The device (absent with `--model`).
    pub device: Option<DeviceInfo>,
    /// The dimensions.
    pub shape: MlpShape,
    /// Seed of the weights and input.
    pub seed: u64,
    /// Multiply-accumulates of the run.
    pub macs: u64,
    /// Both layers (empty when the run failed).
    pub layers: Vec<LayerRow>,
    /// `pass` or `fail`.
    pub verdict: &'static str,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

/// `ane-probe mlp`.
pub fn mlp(ctx: &Ctx, args: &MlpArgs) -> Result<u8, Error> {
    let shape = MlpShape {
        batch: args.batch,
        in_features: args.in_features,
        hidden: args.hidden,
        out_features: args.out_features,
    };
    let mut rng = Rng::new(args.seed);
    let net = Mlp::random(shape, &mut rng)?;
    let x = net.input(&mut rng);
    let (executor, device, result) = if args.target.model {
        (
            "model",
            None,
            mlp::run_mlp(&net, &x, &mut ModelMlp::new(&net)),
        )
    } else {
        let (dev, info) = args.target.open(ctx)?;
        let result = match DeviceMlp::load(&dev, &net) {
            Ok(mut runner) => {
                runner.timeout = args.target.timeout();
                runner.chained = args.chain;
                runner.fenced = args.fenced;
                mlp::run_mlp(&net, &x, &mut runner)
            }
            Err(e) => MlpResult {
                executor: "device".into(),
                shape,
                layers: Vec::new(),
                verdict: Verdict::Fail,
                error: Some(e.to_string()),
            },
        };
        ("device", Some(info), result)
    };
    let pass = result.verdict != Verdict::Fail;
    let report = Report {
        header: Header::new(SCHEMA, 1, &ctx.root),
        executor: executor.into(),
        device,
        shape,
        seed: args.seed,
        macs: shape.macs(),
        layers: result
            .layers
            .iter()
            .map(|l| LayerRow {
                layer: l.layer,
                shape: l.shape.clone(),
                elements: l.elements,
                max_ulp: l.max_ulp,
                mismatches: l.mismatches,
                bound_ulp: l.bound_ulp,
                median_bound_ulp: l.median_bound_ulp,
                verdict: verdict_name(l.verdict),
            })
            .collect(),
        verdict: if pass { "pass" } else { "fail" },
        error: result.error.clone(),
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report, &result);
    }
    if let Some(e) = &result.error {
        eprintln!("ane-probe: mlp: {e}");
    }
    Ok(if pass { exit::OK } else { exit::FAILURE })
}

fn print_text(r: &Report, res: &MlpResult) {
    match &r.device {
        Some(d) => println!("executor: device {d}"),
        None => println!("executor: engine model (host)"),
    }
    let s = r.shape;
    println!(
        "mlp:      y = W2·relu(W1·x), batch {}, {} → {} → {} ({} MACs), seed {}",
        s.batch, s.in_features, s.hidden, s.out_features, r.macs, r.seed
    );
    println!("chain:    layer 1's output buffer bound as layer 2's input (no copy)");
    let rows: Vec<Vec<String>> = res
        .layers
        .iter()
        .map(|l| {
            vec![
                l.layer.to_owned(),
                l.shape.clone(),
                ulp_text(l.max_ulp),
                l.mismatches.to_string(),
                if l.layer == "hidden" {
                    format!("{} ulp", l.bound_ulp)
                } else {
                    format!(
                        "propagated: median {}, max {} ulp",
                        l.median_bound_ulp, l.bound_ulp
                    )
                },
                verdict_text(l.verdict),
            ]
        })
        .collect();
    if !rows.is_empty() {
        print!(
            "{}",
            table(
                &[
                    "layer",
                    "shape",
                    "max ulp",
                    "mismatches",
                    "bound",
                    "verdict"
                ],
                &rows
            )
        );
    }
    println!("verdict:  {} ({})", r.verdict, verdict_text(res.verdict));
}
