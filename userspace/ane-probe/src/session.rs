// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The device side of `run` and `bench`: finding the accel node, loading a
//! program, binding one buffer per slot, and timed EXEC+WAIT.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ane::device::{Bo, Device, JobStatus, Program};
use ane::hw::uapi;

use crate::exit::Error;
use crate::program::ProgramFile;

/// Opens `node` if given, else the first accel node of the `ane` driver in
/// `root`/dev/accel (nodes of other drivers are skipped; an `ane` node that
/// cannot be used is the error reported).
pub fn open_device(root: &Path, node: Option<&Path>) -> Result<Device, Error> {
    // Anything that goes wrong while opening (including DRM_IOCTL_VERSION
    // on a node that is not a DRM device) means there is nothing to probe.
    let unusable = |path: &Path, source| Error::Unusable {
        path: path.to_owned(),
        source,
    };
    if let Some(node) = node {
        return Device::open(node).map_err(|e| unusable(node, e));
    }
    let dir = root.join("dev/accel");
    let mut nodes: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("accel"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    let mut last = None;
    for n in nodes {
        match Device::open(&n) {
            Ok(d) => return Ok(d),
            Err(ane::device::Error::NotAne { .. }) => {}
            Err(e) => last = Some(unusable(&n, e)),
        }
    }
    Err(match last {
        Some(e) => e,
        None => Error::NoDevice { dir },
    })
}

/// A program loaded on a device with a buffer bound to every slot it uses.
pub struct Session<'d> {
    dev: &'d Device,
    program: Program<'d>,
    /// One BO per entry of [`ProgramFile::bindings`], same order.
    bos: Vec<Bo<'d>>,
    bindings: Vec<uapi::Binding>,
    /// For each tensor of the program, its index in `bos`.
    tensor_bo: Vec<usize>,
}

impl<'d> Session<'d> {
    /// Loads `prog` and creates its buffers.
    pub fn new(dev: &'d Device, prog: &ProgramFile) -> Result<Session<'d>, Error> {
        let program = {
            // The kernel copies the program out of this staging buffer.
            let mut staging = dev.bo_create(prog.payload.len() as u64)?;
            staging.map()?[..prog.payload.len()].copy_from_slice(&prog.payload);
            dev.program_create(
                &staging,
                0,
                prog.payload.len() as u64,
                prog.td_size,
                prog.td_count,
                prog.tsk_size,
            )?
        };
        let mut bos = Vec::new();
        let mut bindings = Vec::new();
        for b in &prog.bindings {
            let bo = dev.bo_create(b.size)?;
            bindings.push(uapi::Binding {
                slot: b.slot,
                bo_handle: bo.handle(),
                offset: 0,
                size: b.size,
                flags: b.flags,
                pad: 0,
            });
            bos.push(bo);
        }
        let tensor_bo = (0..prog.tensors.len())
            .map(|i| {
                prog.bindings
                    .iter()
                    .position(|b| b.tensor == Some(i))
                    .expect("ProgramFile binds every tensor")
            })
            .collect();
        Ok(Session {
            dev,
            program,
            bos,
            bindings,
            tensor_bo,
        })
    }

    /// The buffer of tensor `i`.
    pub fn buffer(&mut self, i: usize) -> Result<&mut [u8], Error> {
        Ok(self.bos[self.tensor_bo[i]].map()?)
    }

    /// Fills tensor `i`'s buffer from the dense array (padding zeroed).
    pub fn write_tensor(
        &mut self,
        prog: &ProgramFile,
        i: usize,
        dense: &[u8],
    ) -> Result<(), Error> {
        let buf = self.buffer(i)?;
        buf.fill(0);
        prog.tensors[i].pack(dense, buf);
        Ok(())
    }

    /// Fills tensor `i`'s buffer with 0xFF (fp16 NaN), so that an output
    /// the engine never wrote cannot pass for a result.
    pub fn poison(&mut self, i: usize) -> Result<(), Error> {
        self.buffer(i)?.fill(0xFF);
        Ok(())
    }

    /// The dense array of tensor `i`.
    pub fn read_tensor(&mut self, prog: &ProgramFile, i: usize) -> Result<Vec<u8>, Error> {
        let buf = self.buffer(i)?;
        Ok(prog.tensors[i].unpack(buf))
    }

    /// One EXEC and WAIT; returns the time from submission to completion.
    pub fn run_once(&self, priority: u32, timeout: Duration) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let job = self.dev.exec(&self.program, &self.bindings, priority)?;
        let status = self.dev.wait(job, timeout)?;
        let elapsed = t0.elapsed();
        let status = match status {
            Some(JobStatus::Done) => return Ok(elapsed),
            Some(JobStatus::Timeout) => {
                "timed out in the engine (the driver recovered it)".to_owned()
            }
            Some(JobStatus::Fault(detail)) => format!("faulted (detail {detail:#x})"),
            Some(JobStatus::Aborted) => "was aborted".to_owned(),
            None => format!(
                "did not complete within {} ms (--timeout-ms)",
                timeout.as_millis()
            ),
        };
        Err(Error::Job { job, status })
    }
}
