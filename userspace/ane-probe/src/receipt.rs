// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! What `run` and `bench` report, and the bench **receipt**: one JSON
//! object that says what ran where, with which bytes, how fast, and with
//! what verdict. The schema is versioned ([`SCHEMA_VERSION`]); fields are
//! only ever added within a version.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use ane::device::{Device, Query};
use ane::hw::soc::SocId;
use ane::hw::uapi;
use ane::system::{self, SysRoot};
use serde::Serialize;

use crate::program::{ProgramFile, TensorSpec};
use crate::stats::Latency;

/// The `schema` value of a bench receipt.
pub const SCHEMA: &str = "ane-probe/bench-receipt";
/// Its version.
pub const SCHEMA_VERSION: u32 = 1;

pub use ane::program::sha256_hex;

/// This tool.
#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    /// "ane-probe".
    pub name: &'static str,
    /// The crate version.
    pub version: &'static str,
}

/// This tool's identity.
pub fn tool() -> Tool {
    Tool {
        name: env!("CARGO_PKG_NAME"),
        version: env!("CARGO_PKG_VERSION"),
    }
}

/// The host, from `uname`.
#[derive(Clone, Debug, Serialize)]
pub struct Host {
    /// Node name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Kernel build string (`uname -v`).
    pub kernel_version: String,
    /// Machine (`uname -m`).
    pub machine: String,
}

/// Reads the host's `uname`.
pub fn host() -> Host {
    let u = rustix::system::uname();
    let s = |c: &std::ffi::CStr| c.to_string_lossy().into_owned();
    Host {
        hostname: s(u.nodename()),
        kernel_release: s(u.release()),
        kernel_version: s(u.version()),
        machine: s(u.machine()),
    }
}

/// The `ane` kernel module.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Module {
    /// Whether `/sys/module/ane` exists.
    pub loaded: bool,
    /// `/sys/module/ane/version`, when present.
    pub version: Option<String>,
    /// `/sys/module/ane/srcversion`, when present.
    pub srcversion: Option<String>,
}

/// Reads `/sys/module/ane` below `root`.
pub fn module(root: &Path) -> Module {
    let dir = root.join("sys/module/ane");
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .ok()
            .map(|s| s.trim_end_matches(['\n', '\0']).to_owned())
    };
    Module {
        loaded: dir.is_dir(),
        version: read("version"),
        srcversion: read("srcversion"),
    }
}

/// The board, from the device tree.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Board {
    /// `/model`.
    pub model: Option<String>,
    /// `/compatible`.
    pub compatible: Vec<String>,
    /// The SoC the driver's table recognises from the root compatible.
    pub soc: Option<String>,
}

/// Reads the device tree below `root` (empty when there is none or it
/// cannot be read).
pub fn board(root: &Path) -> Board {
    match system::device_tree(&SysRoot::new(root)) {
        Ok(Some(dt)) => Board {
            model: dt.model,
            compatible: dt.compatible,
            soc: dt.soc,
        },
        _ => Board::default(),
    }
}

/// The accel device used.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    /// The node.
    pub node: String,
    /// DRM driver version, `major.minor.patchlevel`.
    pub driver_version: String,
    /// Chip number, hex (`0x8103`).
    pub soc_id: String,
    /// The SoC's name in the driver's table (`T8103`), when known.
    pub soc: Option<String>,
    /// Marketing names of the chips behind it.
    pub marketing: Option<String>,
    /// ANE generation (13, 14).
    pub generation: u64,
    /// "host-driven" or "firmware".
    pub backend: String,
    /// The kernel's page size.
    pub page_size: u64,
}

impl std::fmt::Display for DeviceInfo {
    /// `NODE (SOC, H13, host-driven)`, as the text outputs name a device.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, H{}, {})",
            self.node,
            self.soc.as_deref().unwrap_or(&self.soc_id),
            self.generation,
            self.backend
        )
    }
}

/// The fields every `--json` output of ane-probe starts with (flattened
/// into it: the keys stand at the top level). [`Head::new`] is the one
/// place they are made.
#[derive(Clone, Debug, Serialize)]
pub struct Head {
    /// The output's schema name, `ane-probe/<what>`.
    pub schema: &'static str,
    /// Its version.
    pub schema_version: u32,
    /// This tool.
    pub tool: Tool,
    /// When the output was made (a run: when it ended), RFC 3339 UTC.
    pub timestamp: String,
}

impl Head {
    /// The head of a `schema` output made now.
    pub fn new(schema: &'static str, schema_version: u32) -> Head {
        Head {
            schema,
            schema_version,
            tool: tool(),
            timestamp: now(),
        }
    }
}

/// Any JSON body under the [`Head`]: what the commands whose output has
/// no header of its own print.
#[derive(Serialize)]
pub struct Headed<'a, T: Serialize> {
    /// The head.
    #[serde(flatten)]
    pub head: Head,
    /// The body, an object whose keys follow the head's.
    #[serde(flatten)]
    pub body: &'a T,
}

/// `body` as pretty JSON under a [`Head`] of `schema`, version 1.
pub fn headed_json<T: Serialize>(schema: &'static str, body: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&Headed {
        head: Head::new(schema, 1),
        body,
    })
}

/// The [`Head`] and the machine facts every report of `doctor`, `bench`,
/// `parity` and `mlp` starts with (flattened into it).
#[derive(Clone, Debug, Serialize)]
pub struct Header {
    /// Schema, version, tool, timestamp.
    #[serde(flatten)]
    pub head: Head,
    /// The host.
    pub host: Host,
    /// The kernel module.
    pub module: Module,
    /// The board.
    pub board: Board,
}

impl Header {
    /// The header of a `schema` report made now, on the machine below
    /// `root`.
    pub fn new(schema: &'static str, schema_version: u32, root: &Path) -> Header {
        Header {
            head: Head::new(schema, schema_version),
            host: host(),
            module: module(root),
            board: board(root),
        }
    }
}

/// Describes an open device from its version and `GET_PARAM`s.
pub fn device_info(dev: &Device, q: &Query) -> DeviceInfo {
    let v = dev.version();
    let soc = u32::try_from(q.soc_id).ok().and_then(SocId::from_raw);
    DeviceInfo {
        node: dev.path().display().to_string(),
        driver_version: format!("{}.{}.{}", v.major, v.minor, v.patchlevel),
        soc_id: format!("{:#x}", q.soc_id),
        soc: soc.map(|s| format!("{s:?}")),
        marketing: soc.map(|s| s.info().marketing.to_owned()),
        generation: q.generation,
        backend: match q.backend {
            uapi::backend::HOST_DRIVEN => "host-driven".into(),
            uapi::backend::FIRMWARE => "firmware".into(),
            other => format!("unknown ({other})"),
        },
        page_size: q.page_size,
    }
}

/// The program that ran.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramInfo {
    /// Path as given.
    pub path: String,
    /// SHA-256 of the file.
    pub sha256: String,
    /// "hwx" or "anec".
    pub format: String,
    /// File size.
    pub bytes: u64,
    /// Bytes of one TD.
    pub td_size: u32,
    /// Number of TDs.
    pub td_count: u32,
}

/// Describes a program file.
pub fn program_info(p: &ProgramFile) -> ProgramInfo {
    ProgramInfo {
        path: p.path.display().to_string(),
        sha256: p.sha256.clone(),
        format: p.format.to_string(),
        bytes: p.len,
        td_size: p.td_size,
        td_count: p.td_count,
    }
}

/// One input or output with the hash of its dense bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TensorHash {
    /// BAR slot.
    pub slot: usize,
    /// Tensor name.
    pub name: String,
    /// `[N, C, H, W]`.
    pub dims: [usize; 4],
    /// SHA-256 of the dense little-endian fp16 NCHW bytes.
    pub sha256: String,
    /// Inputs: "random" or "file"; outputs: "device".
    pub source: &'static str,
    /// The file read or written, if any.
    pub file: Option<String>,
}

impl TensorHash {
    /// Hashes `dense` as the data of `spec`.
    pub fn new(spec: &TensorSpec, dense: &[u8], source: &'static str, file: Option<&Path>) -> Self {
        TensorHash {
            slot: spec.slot,
            name: spec.name.clone(),
            dims: spec.dims,
            sha256: sha256_hex(dense),
            source,
            file: file.map(|f| f.display().to_string()),
        }
    }
}

/// How a bench ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every run completed and every run's outputs were identical.
    Pass,
    /// Every run completed but outputs differed between runs.
    Mismatch,
    /// An ioctl failed or a job timed out, faulted or was aborted.
    DeviceFailure,
    /// The host engine model does not execute this program (`--model`).
    NotSupportedByModel,
    /// The kernel's validator refused the program.
    ProgramInvalid,
}

impl Verdict {
    /// The exit code it implies.
    pub fn code(self) -> u8 {
        match self {
            Verdict::Pass => crate::exit::OK,
            Verdict::Mismatch | Verdict::DeviceFailure => crate::exit::FAILURE,
            Verdict::NotSupportedByModel | Verdict::ProgramInvalid => crate::exit::PROGRAM_INVALID,
        }
    }

    /// The verdict of a run that ended with `e`: a program the model or
    /// the kernel refuses is not a device failure.
    pub fn of_error(e: &crate::exit::Error) -> Verdict {
        match e {
            crate::exit::Error::ModelRefused(_) => Verdict::NotSupportedByModel,
            e if e.code() == crate::exit::PROGRAM_INVALID => Verdict::ProgramInvalid,
            _ => Verdict::DeviceFailure,
        }
    }

    /// In words, for the text outputs.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Mismatch => "mismatch",
            Verdict::DeviceFailure => "device failure",
            Verdict::NotSupportedByModel => "program not supported by the model",
            Verdict::ProgramInvalid => "program invalid",
        }
    }
}

/// Run counts and settings of a bench.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Runs {
    /// Timed runs asked for.
    pub requested: u64,
    /// Untimed runs before them.
    pub warmup: u64,
    /// Timed runs that completed.
    pub completed: u64,
    /// Timed runs whose outputs differed from the first timed run's.
    pub mismatched: u64,
    /// Seed of the random inputs.
    pub seed: u64,
    /// "low", "normal" or "high".
    pub priority: String,
    /// The per-job wait limit.
    pub timeout_ms: u64,
}

/// The bench receipt.
#[derive(Clone, Debug, Serialize)]
pub struct Receipt {
    /// [`SCHEMA`], [`SCHEMA_VERSION`], tool, host; the timestamp is when
    /// the bench ended.
    #[serde(flatten)]
    pub header: Header,
    /// The accel device (absent if it could not be queried).
    pub device: Option<DeviceInfo>,
    /// The program.
    pub program: ProgramInfo,
    /// Inputs, by slot.
    pub inputs: Vec<TensorHash>,
    /// Outputs of the first timed run, by slot.
    pub outputs: Vec<TensorHash>,
    /// Runs and settings.
    pub runs: Runs,
    /// Latency of each timed run's EXEC+WAIT (absent if none completed).
    pub timings: Option<Latency>,
    /// Every timed run's latency, in order.
    pub samples_ns: Vec<u64>,
    /// The verdict.
    pub verdict: Verdict,
    /// What went wrong, when the verdict is not `pass`.
    pub error: Option<String>,
}

/// Formats seconds since the epoch as RFC 3339 UTC (`1970-01-01T00:00:00Z`).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The current time, RFC 3339 UTC.
pub fn now() -> String {
    rfc3339(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats;

    #[test]
    fn sha256_of_known_strings() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_709_164_800 + 3723), "2024-02-29T01:02:03Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
        assert!(now().ends_with('Z'));
    }

    #[test]
    fn module_and_board_below_a_root() {
        let t = tempfile::tempdir().unwrap();
        let m = module(t.path());
        assert!(!m.loaded && m.version.is_none() && m.srcversion.is_none());
        let dir = t.path().join("sys/module/ane");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("version"), "0.1\n").unwrap();
        std::fs::write(dir.join("srcversion"), "ABC123\n").unwrap();
        let m = module(t.path());
        assert!(m.loaded);
        assert_eq!(m.version.as_deref(), Some("0.1"));
        assert_eq!(m.srcversion.as_deref(), Some("ABC123"));
        let b = board(t.path());
        assert!(b.model.is_none() && b.compatible.is_empty());
    }

    /// A receipt as `bench` builds it, with made-up device facts.
    pub(crate) fn sample() -> Receipt {
        let spec = TensorSpec {
            slot: 5,
            name: "image".into(),
            direction: ane::hwx::Direction::Input,
            dims: [1, 1, 1, 4],
            strides: [64, 64, 64, 2],
            buffer_size: 0x4000,
            model_dims: None,
        };
        let samples = vec![1000, 1200, 1100];
        Receipt {
            header: Header {
                head: Head {
                    schema: SCHEMA,
                    schema_version: SCHEMA_VERSION,
                    tool: tool(),
                    timestamp: rfc3339(0),
                },
                host: host(),
                module: Module::default(),
                board: Board::default(),
            },
            device: Some(DeviceInfo {
                node: "/dev/accel/accel0".into(),
                driver_version: "1.0.0".into(),
                soc_id: "0x8103".into(),
                soc: Some("T8103".into()),
                marketing: Some("M1".into()),
                generation: 13,
                backend: "host-driven".into(),
                page_size: 16384,
            }),
            program: ProgramInfo {
                path: "p.hwx".into(),
                sha256: sha256_hex(b"p"),
                format: "hwx".into(),
                bytes: 1,
                td_size: 0x274,
                td_count: 1,
            },
            inputs: vec![TensorHash::new(&spec, &[0; 8], "random", None)],
            outputs: vec![],
            runs: Runs {
                requested: 3,
                warmup: 1,
                completed: 3,
                mismatched: 0,
                seed: 1,
                priority: "normal".into(),
                timeout_ms: 5000,
            },
            timings: stats::summarize(&samples),
            samples_ns: samples,
            verdict: Verdict::Pass,
            error: None,
        }
    }

    #[test]
    fn receipt_json_shape() {
        let v = serde_json::to_value(sample()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "schema",
            "schema_version",
            "tool",
            "timestamp",
            "host",
            "module",
            "board",
            "device",
            "program",
            "inputs",
            "outputs",
            "runs",
            "timings",
            "samples_ns",
            "verdict",
            "error",
        ] {
            assert!(keys.contains(&k), "missing {k} in {keys:?}");
        }
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["tool"]["name"], "ane-probe");
        assert_eq!(v["verdict"], "pass");
        assert_eq!(v["timings"]["median_ns"], 1100);
        assert_eq!(v["timings"]["p10_ns"], 1020);
        assert_eq!(v["inputs"][0]["slot"], 5);
        assert_eq!(v["inputs"][0]["dims"], serde_json::json!([1, 1, 1, 4]));
        assert_eq!(v["inputs"][0]["sha256"].as_str().unwrap().len(), 64);
        assert!(v["host"]["kernel_release"].is_string());
        assert!(v["module"]["srcversion"].is_null());
        assert_eq!(v["device"]["soc"], "T8103");
        let mut r = sample();
        r.verdict = Verdict::DeviceFailure;
        assert_eq!(
            serde_json::to_value(&r).unwrap()["verdict"],
            "device-failure"
        );
        assert_eq!(Verdict::DeviceFailure.code(), crate::exit::FAILURE);
        assert_eq!(Verdict::Mismatch.code(), crate::exit::FAILURE);
        assert_eq!(Verdict::Pass.code(), crate::exit::OK);
    }
}
