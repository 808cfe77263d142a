// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The device side of `run` and `bench`: finding the accel node, loading a
//! program, binding one buffer per slot, and timed EXEC+WAIT.

use std::path::Path;
use std::time::{Duration, Instant};

use ane::device::{Bo, Device, JobStatus, Program};
use ane::hw::uapi;

use ane::hw::engine;
use ane::program::ModelRun;

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
    ane::device::open_first(&root.join("dev/accel")).map_err(|e| match e {
        ane::device::FirstError::NoDevice { dir } => Error::NoDevice { dir },
        ane::device::FirstError::Unusable { path, source } => Error::Unusable { path, source },
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
            bindings.push(b.binding(bo.handle()));
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

/// What runs a loaded program: a [`Session`] on a device, or a
/// [`ModelSession`] on the host engine model.
pub trait Runner {
    /// Fills tensor `i`'s buffer from the dense array (padding zeroed).
    fn write_tensor(&mut self, prog: &ProgramFile, i: usize, dense: &[u8]) -> Result<(), Error>;
    /// Fills tensor `i`'s buffer with 0xFF (fp16 NaN).
    fn poison(&mut self, i: usize) -> Result<(), Error>;
    /// The dense array of tensor `i`.
    fn read_tensor(&mut self, prog: &ProgramFile, i: usize) -> Result<Vec<u8>, Error>;
    /// One run; the time it took.
    fn run_once(&mut self, priority: u32, timeout: Duration) -> Result<Duration, Error>;
}

impl Runner for Session<'_> {
    fn write_tensor(&mut self, prog: &ProgramFile, i: usize, dense: &[u8]) -> Result<(), Error> {
        Session::write_tensor(self, prog, i, dense)
    }
    fn poison(&mut self, i: usize) -> Result<(), Error> {
        Session::poison(self, i)
    }
    fn read_tensor(&mut self, prog: &ProgramFile, i: usize) -> Result<Vec<u8>, Error> {
        Session::read_tensor(self, prog, i)
    }
    fn run_once(&mut self, priority: u32, timeout: Duration) -> Result<Duration, Error> {
        Session::run_once(self, priority, timeout)
    }
}

/// A program on the host engine model ([`ane::hw::engine`]): every slot
/// the program binds gets a host buffer, as the device session binds a BO.
pub struct ModelSession {
    run: ModelRun,
    /// For each tensor of the program, its index in the bindings.
    tensor_binding: Vec<usize>,
    options: engine::Options,
}

impl ModelSession {
    /// Maps `prog` and a buffer for every slot it binds (scratch filled
    /// with 0xA5).
    pub fn new(prog: &ProgramFile) -> Result<ModelSession, Error> {
        let run = ModelRun::new(prog, |_, b| {
            let size = usize::try_from(b.size).map_err(|_| {
                Error::Model(format!(
                    "slot {}: {} bytes do not fit in memory",
                    b.slot, b.size
                ))
            })?;
            Ok::<_, Error>(vec![0xA5; size])
        })?;
        let tensor_binding = (0..prog.tensors.len())
            .map(|i| {
                prog.bindings
                    .iter()
                    .position(|b| b.tensor == Some(i))
                    .ok_or_else(|| Error::Model(format!("tensor {i} has no binding")))
            })
            .collect::<Result<_, _>>()?;
        Ok(ModelSession {
            run,
            tensor_binding,
            options: engine::Options::default(),
        })
    }

    fn buffer(&mut self, i: usize) -> Result<&mut Vec<u8>, Error> {
        self.run
            .buffer_mut(self.tensor_binding[i])
            .ok_or_else(|| Error::Model(format!("tensor {i}: no buffer")))
    }
}

impl Runner for ModelSession {
    fn write_tensor(&mut self, prog: &ProgramFile, i: usize, dense: &[u8]) -> Result<(), Error> {
        let buf = self.buffer(i)?;
        buf.fill(0);
        prog.tensors[i].pack(dense, buf);
        Ok(())
    }
    fn poison(&mut self, i: usize) -> Result<(), Error> {
        self.buffer(i)?.fill(0xFF);
        Ok(())
    }
    fn read_tensor(&mut self, prog: &ProgramFile, i: usize) -> Result<Vec<u8>, Error> {
        let buf = self.buffer(i)?;
        Ok(prog.tensors[i].unpack(buf))
    }
    fn run_once(&mut self, _priority: u32, _timeout: Duration) -> Result<Duration, Error> {
        let t0 = Instant::now();
        self.run
            .execute(&self.options)
            .map_err(Error::ModelRefused)?;
        Ok(t0.elapsed())
    }
}
