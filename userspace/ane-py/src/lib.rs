// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane_rs._native`: the Python binding of the `ane` library.
//!
//! - [`Device`]: an `ane` accel node, or the host engine model (the very
//!   model the kernel's test flavour simulates the hardware with), which
//!   runs everything on a machine without an ANE.
//! - [`Buffer`]: a buffer object (a BO on a device, host memory on the
//!   model), resident across runs and shareable between programs.
//! - [`Model`]: a compiled program (HWX or `.anec`, [`ane::program`])
//!   loaded on a device with a buffer bound to every slot it uses;
//!   `predict` takes and returns fp16 NCHW numpy arrays.
//! - Discovery (`accel_nodes`, `system_info`) and the parity cells.
//!
//! Every error is an `AneError` carrying the library's message; bad
//! arguments are `InputError` naming the field at fault, a missing device
//! `NoDeviceError`, a program the host engine model does not execute
//! `NotSupportedError`. They are classes of the module `ane_rs`.
//!
//! The classes are `Send` and `Sync` and usable from several Python
//! threads: PyO3's borrow flags guard each object, and a model's run lock
//! ([`RunLock`]) keeps one `predict`/`run` at a time on its buffers, taken
//! with the interpreter released so that a waiting thread never blocks the
//! one running.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ane::device::{self, Bo, JobStatus};
use ane::hw::{engine, uapi};
use ane::hwx::Direction;
use ane::parity::{self, DeviceExecutor, Executor, ModelExecutor, Verdict};
use ane::program::{direction_name, ModelRun, ProgramFile, TensorSpec};
use ane::system::{self, SysRoot};
use half::f16;
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyUserWarning};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

// The module named here is what Python prints (`ane_rs.InputError`): the
// package's, not the extension's.
create_exception!(
    ane_rs,
    AneError,
    PyException,
    "An error of the ane library (device, program, engine model)."
);
create_exception!(
    ane_rs,
    InputError,
    AneError,
    "A bad argument: wrong count, dtype, shape or name of a tensor, or a device= that is none of the accepted ones."
);
create_exception!(
    ane_rs,
    NoDeviceError,
    AneError,
    "No accel node of the ane driver exists (pass device=\"model\" to run on the host engine model)."
);
create_exception!(
    ane_rs,
    NotSupportedError,
    AneError,
    "The host engine model does not execute this program."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    AneError::new_err(e.to_string())
}

/// Default wait for a job.
const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// What runs programs.
#[derive(Clone)]
enum Backend {
    /// An open accel node.
    Hw(Arc<device::Device>),
    /// The host engine model.
    Model,
}

impl Backend {
    /// Identity for "is this buffer on this device".
    fn id(&self) -> usize {
        match self {
            Backend::Hw(d) => Arc::as_ptr(d) as usize,
            Backend::Model => 0,
        }
    }
}

/// Opens `node`, or the first accel node of the ane driver (nodes of other
/// drivers are skipped), as `ane-probe` does.
fn open_hw(node: Option<PathBuf>) -> PyResult<device::Device> {
    if let Some(node) = node {
        return device::Device::open(&node).map_err(err);
    }
    device::open_first(Path::new("/dev/accel")).map_err(|e| match e {
        device::FirstError::Unusable { source, .. } => err(source),
        device::FirstError::NoDevice { dir } => NoDeviceError::new_err(format!(
            "no accel node of the ane driver under {} (is the module loaded and bound? \
             `ane-probe doctor` says what is missing); pass device=\"model\" to run on \
             the host engine model (the CPU) instead",
            dir.display()
        )),
    })
}

/// An ANE accel device, or the host engine model.
#[pyclass(module = "ane_rs")]
struct Device {
    backend: Backend,
}

#[pymethods]
impl Device {
    /// Opens `path` (e.g. "/dev/accel/accel0"), or the first node of the
    /// ane driver when None.
    #[new]
    #[pyo3(signature = (path=None))]
    fn new(path: Option<PathBuf>) -> PyResult<Self> {
        Ok(Device {
            backend: Backend::Hw(Arc::new(open_hw(path)?)),
        })
    }

    /// The host engine model as a device: programs run on the CPU exactly
    /// as the kernel's simulated device runs them.
    #[staticmethod]
    fn model() -> Self {
        Device {
            backend: Backend::Model,
        }
    }

    /// "device" or "model".
    #[getter]
    fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Hw(_) => "device",
            Backend::Model => "model",
        }
    }

    /// The accel node, or None for the model.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        match &self.backend {
            Backend::Hw(d) => Some(d.path().to_owned()),
            Backend::Model => None,
        }
    }

    /// The device's parameters (GET_PARAM) as a dict; None for the model.
    fn query<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.backend {
            Backend::Hw(d) => Ok(Some(json(py, &d.query().map_err(err)?)?)),
            Backend::Model => Ok(None),
        }
    }

    /// A new zero-filled buffer of `size` bytes on this device.
    fn buffer(&self, size: u64) -> PyResult<Buffer> {
        Buffer::create(&self.backend, size)
    }

    /// Loads a compiled program (HWX or .anec) on this device.
    fn load(slf: &Bound<'_, Self>, path: PathBuf) -> PyResult<Model> {
        Model::load(slf, path)
    }

    /// Runs the parity cells; one dict per cell (verdict "exact",
    /// "within_bound" or "fail").
    fn parity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut model = ModelExecutor::new();
        let mut hw;
        let exec: &mut dyn Executor = match &self.backend {
            Backend::Hw(d) => {
                hw = DeviceExecutor::new(d);
                &mut hw
            }
            Backend::Model => &mut model,
        };
        let list = PyList::empty(py);
        for cell in parity::cells() {
            let r = parity::run_cell(&cell, exec);
            let d = PyDict::new(py);
            d.set_item("cell", r.cell)?;
            d.set_item("executor", &r.executor)?;
            d.set_item("shape", &r.shape)?;
            d.set_item("elements", r.elements)?;
            d.set_item("max_ulp", r.max_ulp)?;
            d.set_item("mismatches", r.mismatches)?;
            d.set_item("bound_ulp", r.bound_ulp)?;
            d.set_item(
                "verdict",
                match r.verdict {
                    Verdict::Exact => "exact",
                    Verdict::WithinBound(_) => "within_bound",
                    Verdict::Fail => "fail",
                },
            )?;
            d.set_item("error", &r.error)?;
            list.append(d)?;
        }
        Ok(list)
    }

    fn __repr__(&self) -> String {
        match &self.backend {
            Backend::Hw(d) => format!("Device('{}')", d.path().display()),
            Backend::Model => "Device.model()".to_owned(),
        }
    }
}

/// A buffer's storage. In `Hw`, `bo` borrows the device that `_dev` keeps
/// alive; fields drop in declaration order, so the BO goes first.
enum Storage {
    Hw {
        bo: Bo<'static>,
        _dev: Arc<device::Device>,
    },
    Host(Vec<u8>),
}

/// A buffer object: a BO on a device, host memory on the model. Bound to a
/// slot of one or more programs, it stays resident between runs.
#[pyclass(module = "ane_rs")]
struct Buffer {
    storage: Storage,
    device_id: usize,
}

impl Buffer {
    fn create(backend: &Backend, size: u64) -> PyResult<Buffer> {
        let storage = match backend {
            Backend::Hw(dev) => {
                let bo = dev.bo_create(size).map_err(err)?;
                // SAFETY: the BO borrows the device, which lives on the
                // heap behind the Arc stored next to it; the Arc is dropped
                // only after the BO (field order), so the borrow never
                // outlives the device.
                let bo = unsafe { std::mem::transmute::<Bo<'_>, Bo<'static>>(bo) };
                Storage::Hw {
                    bo,
                    _dev: dev.clone(),
                }
            }
            Backend::Model => {
                let size = usize::try_from(size)
                    .map_err(|_| err(format!("{size} bytes do not fit in memory")))?;
                Storage::Host(vec![0; size])
            }
        };
        Ok(Buffer {
            storage,
            device_id: backend.id(),
        })
    }

    fn bytes(&mut self) -> PyResult<&mut [u8]> {
        match &mut self.storage {
            Storage::Hw { bo, .. } => bo.map().map_err(err),
            Storage::Host(v) => Ok(v),
        }
    }

    fn len(&self) -> u64 {
        match &self.storage {
            Storage::Hw { bo, .. } => bo.size(),
            Storage::Host(v) => v.len() as u64,
        }
    }
}

#[pymethods]
impl Buffer {
    /// Bytes: as asked on the model; whole pages on a device, where the
    /// driver rounds a BO up.
    #[getter]
    fn size(&self) -> u64 {
        self.len()
    }

    /// Its device address (None on the model, where it changes per run).
    #[getter]
    fn iova(&self) -> Option<u64> {
        match &self.storage {
            Storage::Hw { bo, .. } => Some(bo.iova()),
            Storage::Host(_) => None,
        }
    }

    /// The raw contents.
    fn read<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        Ok(pyo3::types::PyBytes::new(py, self.bytes()?))
    }

    /// Writes raw bytes at `offset`.
    #[pyo3(signature = (data, offset=0))]
    fn write(&mut self, data: &[u8], offset: usize) -> PyResult<()> {
        let buf = self.bytes()?;
        let end = offset
            .checked_add(data.len())
            .filter(|&e| e <= buf.len())
            .ok_or_else(|| {
                InputError::new_err(format!(
                    "write: {} bytes at offset {offset} do not fit the {}-byte buffer",
                    data.len(),
                    buf.len()
                ))
            })?;
        buf[offset..end].copy_from_slice(data);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("Buffer(size={})", self.len())
    }
}

/// An input or output tensor of a program.
#[pyclass(frozen, get_all, module = "ane_rs")]
struct TensorInfo {
    /// The compiler's name (HWX) or `input<i>`/`output<i>` (`.anec`).
    name: String,
    /// BAR slot.
    slot: usize,
    /// "input" or "output".
    direction: &'static str,
    /// (N, C, H, W).
    shape: (usize, usize, usize, usize),
    /// Byte strides (batch, plane, row, element) in the device buffer.
    strides: (u64, u64, u64, u64),
    /// Bytes of its buffer.
    buffer_size: u64,
    /// The model's own shape, which `predict` takes and returns, when the
    /// program was compiled from a model with another shape than `shape`
    /// (else None).
    model_shape: Option<Vec<usize>>,
}

#[pymethods]
impl TensorInfo {
    fn __repr__(&self) -> String {
        format!(
            "TensorInfo(name='{}', slot={}, direction='{}', shape={:?})",
            self.name, self.slot, self.direction, self.shape
        )
    }
}

impl TensorInfo {
    fn of(t: &TensorSpec) -> Self {
        let [n, c, h, w] = t.dims;
        let [a, b, r, e] = t.strides;
        TensorInfo {
            name: t.name.clone(),
            slot: t.slot,
            direction: direction_name(t.direction),
            shape: (n, c, h, w),
            strides: (a, b, r, e),
            buffer_size: t.buffer_size,
            model_shape: t.model_dims.clone(),
        }
    }
}

/// A program's handle on its device. In `Hw`, `program` borrows the device
/// `_dev` keeps alive (dropped after it, field order).
enum Loaded {
    Hw {
        program: device::Program<'static>,
        dev: Arc<device::Device>,
    },
    Model,
}

/// One run at a time on a model's buffers: `predict` writes the inputs,
/// runs and reads the outputs as one step. Taken with the interpreter
/// released ([`RunLock::acquire`]), so a thread waiting for it never holds
/// up the thread that runs (which needs the interpreter back to finish).
#[derive(Default)]
struct RunLock {
    busy: Mutex<bool>,
    free: Condvar,
}

/// Holds a [`RunLock`] until dropped.
struct RunGuard<'a>(&'a RunLock);

impl RunLock {
    fn acquire(&self, py: Python<'_>) -> RunGuard<'_> {
        py.detach(|| {
            let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            while *busy {
                busy = self.free.wait(busy).unwrap_or_else(|e| e.into_inner());
            }
            *busy = true;
        });
        RunGuard(self)
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.0.free.notify_one();
    }
}

/// What `device=` names: an open device, or the host engine model when
/// asked for by name. Never a silent fallback.
fn resolve_device(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Py<Device>> {
    let Some(d) = device.filter(|d| !d.is_none()) else {
        return Py::new(py, Device::new(None)?);
    };
    if let Ok(d) = d.cast::<Device>() {
        return Ok(d.clone().unbind());
    }
    let bad = || {
        InputError::new_err(format!(
            "device: {}, expected None or \"ane\" (the first accel node of the ane driver), \
             \"model\" (the host engine model), an accel node path or a Device",
            d.repr().map_or_else(|_| "?".into(), |r| r.to_string())
        ))
    };
    if let Ok(name) = d.extract::<String>() {
        return match name.as_str() {
            "model" => Py::new(py, Device::model()),
            "ane" | "device" => Py::new(py, Device::new(None)?),
            p if p.starts_with('/') => Py::new(py, Device::new(Some(PathBuf::from(p)))?),
            _ => Err(bad()),
        };
    }
    if let Ok(p) = d.extract::<PathBuf>() {
        return Py::new(py, Device::new(Some(p))?);
    }
    Err(bad())
}

/// A compiled program loaded on a device, with a resident buffer bound to
/// every slot it uses. `Model(path, device=None)`: on the first accel node
/// of the ane driver (NoDeviceError when there is none), or on
/// `device="model"`, a node path or a `Device`.
#[pyclass(module = "ane_rs")]
struct Model {
    prog: ProgramFile,
    run_lock: RunLock,
    loaded: Loaded,
    device: Py<Device>,
    device_id: usize,
    /// One per entry of `prog.bindings`.
    buffers: Vec<Py<Buffer>>,
}

impl Model {
    fn load(device: &Bound<'_, Device>, path: PathBuf) -> PyResult<Model> {
        let py = device.py();
        let prog = ProgramFile::read(&path).map_err(err)?;
        let backend = device.borrow().backend.clone();
        let loaded = match &backend {
            Backend::Hw(dev) => {
                // The kernel copies the program out of this staging buffer.
                let mut staging = dev.bo_create(prog.payload.len() as u64).map_err(err)?;
                staging.map().map_err(err)?[..prog.payload.len()].copy_from_slice(&prog.payload);
                let program = dev
                    .program_create(
                        &staging,
                        0,
                        prog.payload.len() as u64,
                        prog.td_size,
                        prog.td_count,
                        prog.tsk_size,
                    )
                    .map_err(err)?;
                // SAFETY: as for Buffer: the Arc next to it outlives it.
                let program = unsafe {
                    std::mem::transmute::<device::Program<'_>, device::Program<'static>>(program)
                };
                Loaded::Hw {
                    program,
                    dev: dev.clone(),
                }
            }
            // ProgramFile::read ran the kernel's TD validator, as
            // PROGRAM_CREATE does; the model needs no other handle.
            Backend::Model => Loaded::Model,
        };
        let buffers = prog
            .bindings
            .iter()
            .map(|b| Py::new(py, Buffer::create(&backend, b.size)?))
            .collect::<PyResult<Vec<_>>>()?;
        // What the loader corrected (an .anec header's roles against its
        // descriptors), as `ane-probe run` prints it: a warning, and
        // `Model.notes`.
        for n in &prog.notes {
            let msg =
                std::ffi::CString::new(format!("{}: {n}", prog.path.display())).unwrap_or_default();
            PyErr::warn(py, &py.get_type::<PyUserWarning>(), &msg, 1)?;
        }
        Ok(Model {
            prog,
            run_lock: RunLock::default(),
            loaded,
            device: device.clone().unbind(),
            device_id: backend.id(),
            buffers,
        })
    }

    fn tensor(&self, name: &str) -> PyResult<usize> {
        self.prog
            .tensors
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| {
                InputError::new_err(format!(
                    "no tensor named '{name}' (the program has {})",
                    self.names(None)
                ))
            })
    }

    fn names(&self, dir: Option<Direction>) -> String {
        let n: Vec<String> = self
            .prog
            .tensors
            .iter()
            .filter(|t| dir.is_none_or(|d| t.direction == d))
            .map(|t| format!("'{}'", t.name))
            .collect();
        n.join(", ")
    }

    /// Index in `buffers` of tensor `i`.
    fn binding_of(&self, i: usize) -> usize {
        self.prog
            .bindings
            .iter()
            .position(|b| b.tensor == Some(i))
            .expect("ProgramFile binds every tensor")
    }

    fn write_dense(&self, py: Python<'_>, i: usize, dense: &[u8]) -> PyResult<()> {
        let mut buf = self.buffers[self.binding_of(i)].borrow_mut(py);
        let bytes = buf.bytes()?;
        bytes.fill(0);
        self.prog.tensors[i].pack(dense, bytes);
        Ok(())
    }

    fn read_dense<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyArrayDyn<f16>>> {
        let mut buf = self.buffers[self.binding_of(i)].borrow_mut(py);
        let t = &self.prog.tensors[i];
        let dense = t.unpack(buf.bytes()?);
        let vals: Vec<f16> = dense
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]))
            .collect();
        // In the model's own shape when the program records one.
        let arr = ArrayD::from_shape_vec(IxDyn(&t.array_dims()), vals).map_err(err)?;
        Ok(arr.into_pyarray(py))
    }

    /// Checks `obj` against tensor `i` and returns its dense bytes.
    fn dense_of(&self, i: usize, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
        let t = &self.prog.tensors[i];
        let what = format!("{what} ({})", t.label());
        let Ok(arr) = obj.cast::<PyArrayDyn<f16>>() else {
            let dtype = match obj.getattr("dtype") {
                Ok(d) => format!("dtype {}", d.str()?),
                Err(_) => format!("type {}", obj.get_type().name()?),
            };
            return Err(InputError::new_err(format!(
                "{what}: {dtype}, expected a numpy array of dtype float16"
            )));
        };
        // A compiled model's [batch, features] tensor is (B, F, 1, 1):
        // the model's own 2-D shape is accepted too.
        // A compiled model's [1, C, H, W] value kept in pixel rows is
        // (1, C, H·W, 1), in the same element order: the model's own 4-D
        // shape is accepted too.
        let trimmed = t.dims.len() - t.dims.iter().rev().take_while(|&&d| d == 1).count();
        let pixel_rows = arr.ndim() == 4
            && t.dims[3] == 1
            && arr.shape()[..2] == t.dims[..2]
            && arr.shape()[2].checked_mul(arr.shape()[3]) == Some(t.dims[2]);
        let model_shape =
            pixel_rows || (arr.ndim() >= 2 && arr.shape() == &t.dims[..trimmed.max(2)]);
        if arr.shape() != t.dims && !model_shape {
            return Err(InputError::new_err(format!(
                "{what}: shape {:?}, expected {:?} (N, C, H, W)",
                arr.shape(),
                t.dims
            )));
        }
        let ro = arr.readonly();
        Ok(ro.as_array().iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    /// The EXEC bindings of the model's buffers (device models only).
    fn hw_bindings(&self, py: Python<'_>) -> Vec<uapi::Binding> {
        let mut bindings = Vec::new();
        for (b, buf) in self.prog.bindings.iter().zip(&self.buffers) {
            let buf = buf.borrow(py);
            let Storage::Hw { bo, .. } = &buf.storage else {
                unreachable!("bind() checks the device");
            };
            bindings.push(b.binding(bo.handle()));
        }
        bindings
    }

    fn execute(&self, py: Python<'_>, timeout: Duration) -> PyResult<Duration> {
        let t0 = Instant::now();
        match &self.loaded {
            Loaded::Hw { program, dev } => {
                let bindings = self.hw_bindings(py);
                // Other Python threads run while the job does.
                let (job, status) = py
                    .detach(|| {
                        let job = dev.exec(program, &bindings, uapi::priority::NORMAL)?;
                        Ok::<_, device::Error>((job, dev.wait(job, timeout)?))
                    })
                    .map_err(err)?;
                match status {
                    Some(JobStatus::Done) => Ok(t0.elapsed()),
                    other => Err(AneError::new_err(format!(
                        "job {job} {}",
                        not_done(other, timeout)
                    ))),
                }
            }
            Loaded::Model => {
                let mut run = ModelRun::new(&self.prog, |i, _| {
                    let mut buf = self.buffers[i].borrow_mut(py);
                    Ok::<_, PyErr>(buf.bytes()?.to_vec())
                })?;
                py.detach(|| run.execute(&engine::Options::default()))
                    .map_err(|e| {
                        NotSupportedError::new_err(format!(
                            "program not supported by the model: {e}"
                        ))
                    })?;
                for (i, (b, buf)) in self.prog.bindings.iter().zip(&self.buffers).enumerate() {
                    if b.flags & uapi::bind::OUT == 0 {
                        continue;
                    }
                    let mut buf = buf.borrow_mut(py);
                    let bytes = buf.bytes()?;
                    let region = run.buffer(i).unwrap_or(&[]);
                    let n = region.len().min(bytes.len());
                    bytes[..n].copy_from_slice(&region[..n]);
                }
                Ok(t0.elapsed())
            }
        }
    }
}

#[pymethods]
impl Model {
    /// Loads the compiled program at `path` (HWX or .anec) on `device`:
    /// None or "ane" for the first accel node of the ane driver,
    /// "model" for the host engine model, an accel node path, or a Device.
    #[new]
    #[pyo3(signature = (path, device=None))]
    fn new(py: Python<'_>, path: PathBuf, device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let dev = resolve_device(py, device)?;
        Model::load(dev.bind(py), path)
    }

    /// What the loader corrected in the program file and a user may want
    /// to know (also issued as a UserWarning when loading).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.prog.notes.clone()
    }

    /// The program file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.prog.path.clone()
    }

    /// "hwx" or "anec".
    #[getter]
    fn format(&self) -> String {
        self.prog.format.to_string()
    }

    /// SHA-256 of the file.
    #[getter]
    fn sha256(&self) -> String {
        self.prog.sha256.clone()
    }

    /// The device it is loaded on.
    #[getter]
    fn device(&self, py: Python<'_>) -> Py<Device> {
        self.device.clone_ref(py)
    }

    /// Input tensors, in the order `predict` takes them: the order the
    /// compiled program declares them (HWX), by slot for `.anec`.
    #[getter]
    fn inputs(&self) -> Vec<TensorInfo> {
        self.prog
            .tensors
            .iter()
            .filter(|t| t.direction == Direction::Input)
            .map(TensorInfo::of)
            .collect()
    }

    /// Output tensors, in the order `predict` returns them (declared order,
    /// as the inputs).
    #[getter]
    fn outputs(&self) -> Vec<TensorInfo> {
        self.prog
            .tensors
            .iter()
            .filter(|t| t.direction == Direction::Output)
            .map(TensorInfo::of)
            .collect()
    }

    /// Every slot the task stream uses: (slot, flags, size, tensor name or
    /// None for scratch).
    #[getter]
    fn bindings(&self) -> Vec<(u32, u32, u64, Option<String>)> {
        self.prog
            .bindings
            .iter()
            .map(|b| {
                (
                    b.slot,
                    b.flags,
                    b.size,
                    b.tensor.map(|i| self.prog.tensors[i].name.clone()),
                )
            })
            .collect()
    }

    /// One inference: `inputs` is a list of fp16 NCHW arrays (or arrays in
    /// the model's own shape, `model_shape`) in `self.inputs` order, or a
    /// dict by tensor name. Returns the outputs as fp16 arrays in
    /// `self.outputs` order, each in its `model_shape` when it has one,
    /// else NCHW.
    #[pyo3(signature = (inputs, timeout_ms=DEFAULT_TIMEOUT_MS))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
        timeout_ms: u64,
    ) -> PyResult<Vec<Bound<'py, PyArrayDyn<f16>>>> {
        let ins: Vec<usize> = (0..self.prog.tensors.len())
            .filter(|&i| self.prog.tensors[i].direction == Direction::Input)
            .collect();
        let outs: Vec<usize> = (0..self.prog.tensors.len())
            .filter(|&i| self.prog.tensors[i].direction == Direction::Output)
            .collect();
        let mut dense = Vec::new();
        if let Ok(d) = inputs.cast::<PyDict>() {
            for (k, _) in d.iter() {
                let k: String = k.extract()?;
                let i = self.tensor(&k)?;
                if !ins.contains(&i) {
                    return Err(InputError::new_err(format!(
                        "inputs: '{k}' is an output; the inputs are {}",
                        self.names(Some(Direction::Input))
                    )));
                }
            }
            for &i in &ins {
                let name = &self.prog.tensors[i].name;
                let v = d.get_item(name)?.ok_or_else(|| {
                    InputError::new_err(format!(
                        "inputs: no array for input '{name}' (the inputs are {})",
                        self.names(Some(Direction::Input))
                    ))
                })?;
                dense.push((i, self.dense_of(i, &v, &format!("inputs['{name}']"))?));
            }
        } else {
            let seq: Vec<Bound<'py, PyAny>> = if let Ok(l) = inputs.cast::<PyList>() {
                l.iter().collect()
            } else if let Ok(t) = inputs.cast::<PyTuple>() {
                t.iter().collect()
            } else {
                return Err(InputError::new_err(format!(
                    "inputs: {}, expected a list of numpy arrays or a dict by name",
                    inputs.get_type().name()?
                )));
            };
            if seq.len() != ins.len() {
                return Err(InputError::new_err(format!(
                    "inputs: {} arrays given, the program takes {} ({})",
                    seq.len(),
                    ins.len(),
                    self.names(Some(Direction::Input))
                )));
            }
            for (k, (&i, v)) in ins.iter().zip(&seq).enumerate() {
                dense.push((i, self.dense_of(i, v, &format!("inputs[{k}]"))?));
            }
        }
        let _run = self.run_lock.acquire(py);
        for (i, d) in &dense {
            self.write_dense(py, *i, d)?;
        }
        // An output the engine never wrote must not pass for a result:
        // fill them with fp16 NaN.
        for &i in &outs {
            self.buffers[self.binding_of(i)]
                .borrow_mut(py)
                .bytes()?
                .fill(0xFF);
        }
        self.execute(py, Duration::from_millis(timeout_ms))?;
        outs.iter().map(|&i| self.read_dense(py, i)).collect()
    }

    /// Writes an fp16 NCHW array into tensor `name`'s resident buffer.
    fn write(&self, py: Python<'_>, name: &str, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let i = self.tensor(name)?;
        let d = self.dense_of(i, array, &format!("write('{name}')"))?;
        let _run = self.run_lock.acquire(py);
        self.write_dense(py, i, &d)
    }

    /// Reads tensor `name` out of its resident buffer.
    fn read<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArrayDyn<f16>>> {
        let i = self.tensor(name)?;
        let _run = self.run_lock.acquire(py);
        self.read_dense(py, i)
    }

    /// One run on the buffers as they are (EXEC and WAIT); returns the
    /// seconds it took.
    #[pyo3(signature = (timeout_ms=DEFAULT_TIMEOUT_MS))]
    fn run(&self, py: Python<'_>, timeout_ms: u64) -> PyResult<f64> {
        let _run = self.run_lock.acquire(py);
        Ok(self
            .execute(py, Duration::from_millis(timeout_ms))?
            .as_secs_f64())
    }

    /// The resident buffer of tensor `name`.
    fn buffer(&self, py: Python<'_>, name: &str) -> PyResult<Py<Buffer>> {
        let i = self.tensor(name)?;
        Ok(self.buffers[self.binding_of(i)].clone_ref(py))
    }

    /// Binds `buffer` (of the same device, at least the slot's size) to
    /// tensor `name` instead of its own: bind one program's output buffer
    /// as the next one's input to chain them without copies.
    fn bind(&mut self, py: Python<'_>, name: &str, buffer: Py<Buffer>) -> PyResult<()> {
        let i = self.tensor(name)?;
        let b = self.binding_of(i);
        {
            let buf = buffer.borrow(py);
            if buf.device_id != self.device_id {
                return Err(InputError::new_err(format!(
                    "bind('{name}'): the buffer belongs to another device"
                )));
            }
            let need = self.prog.bindings[b].size;
            if buf.len() < need {
                return Err(InputError::new_err(format!(
                    "bind('{name}'): buffer size {}, the slot needs {need} bytes",
                    buf.len()
                )));
            }
        }
        self.buffers[b] = buffer;
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "Model('{}', inputs=[{}], outputs=[{}])",
            self.prog.path.display(),
            self.names(Some(Direction::Input)),
            self.names(Some(Direction::Output))
        )
    }
}

/// Why a job did not end DONE, as words.
fn not_done(status: Option<JobStatus>, timeout: Duration) -> String {
    match status {
        Some(JobStatus::Done) => "ended DONE".to_owned(),
        Some(JobStatus::Timeout) => "timed out in the engine (the driver recovered it)".to_owned(),
        Some(JobStatus::Fault(detail)) => format!("faulted (detail {detail:#x})"),
        Some(JobStatus::Aborted) => "was aborted".to_owned(),
        None => format!("did not complete within {} ms", timeout.as_millis()),
    }
}

/// Runs `models` back to back, in the given order, as one job: on a
/// device, one chained EXEC (the kernel runs each program as soon as the
/// one before it ended, without a round trip to Python); on the host
/// model, one after the other. A model reads what an earlier one wrote
/// where their buffers are bound together (`Model.bind`). Every model must
/// be on the same device; a model may appear more than once. Returns the
/// seconds it took; a job that does not end DONE raises `AneError` naming
/// the first model that did not run to the end.
#[pyfunction]
#[pyo3(signature = (models, timeout_ms=DEFAULT_TIMEOUT_MS))]
fn run_chain(py: Python<'_>, models: Vec<PyRef<'_, Model>>, timeout_ms: u64) -> PyResult<f64> {
    let Some(first) = models.first() else {
        return Err(InputError::new_err(
            "models: empty, a chain needs at least one model",
        ));
    };
    for (i, m) in models.iter().enumerate() {
        if m.device_id != first.device_id {
            return Err(InputError::new_err(format!(
                "models[{i}]: on another device than models[0]"
            )));
        }
    }
    // Each model's run lock once, in one global order (two chains naming
    // the same models in different orders cannot deadlock).
    let mut order: Vec<&Model> = models.iter().map(|m| &**m).collect();
    order.sort_by_key(|m| *m as *const Model as usize);
    order.dedup_by_key(|m| *m as *const Model as usize);
    let _runs: Vec<RunGuard<'_>> = order.iter().map(|m| m.run_lock.acquire(py)).collect();
    let timeout = Duration::from_millis(timeout_ms);
    let t0 = Instant::now();
    let Loaded::Hw { dev, .. } = &first.loaded else {
        // The host model: the same order, one run after the other.
        for m in &models {
            m.execute(py, timeout)?;
        }
        return Ok(t0.elapsed().as_secs_f64());
    };
    let bindings: Vec<Vec<uapi::Binding>> = models.iter().map(|m| m.hw_bindings(py)).collect();
    let mut steps = Vec::with_capacity(models.len());
    for (m, b) in models.iter().zip(&bindings) {
        let Loaded::Hw { program, .. } = &m.loaded else {
            unreachable!("one device id, one backend");
        };
        steps.push((program, b.as_slice()));
    }
    let (job, ended) = py
        .detach(|| {
            let job = dev.exec_chain(&steps, uapi::priority::NORMAL)?;
            Ok::<_, device::Error>((job, dev.wait_steps(job, timeout)?))
        })
        .map_err(err)?;
    match ended {
        Some((JobStatus::Done, _)) => Ok(t0.elapsed().as_secs_f64()),
        Some((status, done)) => Err(AneError::new_err(format!(
            "chain job {job}: models[{done}] {} (models[0..{done}] ran; the rest did not run)",
            not_done(Some(status), timeout)
        ))),
        None => Err(AneError::new_err(format!(
            "chain job {job} {}",
            not_done(None, timeout)
        ))),
    }
}

/// `value` as Python objects, through JSON.
fn json<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(err)?;
    py.import("json")?.call_method1("loads", (text,))
}

/// The accel nodes under `root` (every driver's), as dicts.
#[pyfunction]
#[pyo3(signature = (root="/"))]
fn accel_nodes<'py>(py: Python<'py>, root: &str) -> PyResult<Bound<'py, PyAny>> {
    json(py, &system::accel_nodes(&SysRoot::new(root)).map_err(err)?)
}

/// What `ane-probe info` reports about the machine: device tree, kernel
/// module, accel nodes, power domains.
#[pyfunction]
#[pyo3(signature = (root="/"))]
fn system_info<'py>(py: Python<'py>, root: &str) -> PyResult<Bound<'py, PyAny>> {
    json(py, &system::system_info(&SysRoot::new(root)).map_err(err)?)
}

/// Compiles the ONNX model at `path` to an H13 program (the `.anec`
/// bytes, also written to `output` when given), as `ane-probe compile`:
/// the supported subset is `ane::compiler`'s; an unsupported node raises
/// `AneError` naming the node, its op and the reason; `target="t6021"`
/// (H14) raises `InputError`: out of scope.
#[pyfunction]
#[pyo3(signature = (path, output=None, target="h13"))]
fn compile<'py>(
    py: Python<'py>,
    path: &str,
    output: Option<&str>,
    target: &str,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    use ane::compiler::{self, CompileError, Target};
    let target = match target {
        "h13" => Target::H13,
        "t6021" => Target::T6021,
        other => {
            return Err(InputError::new_err(format!(
                "target '{other}': h13 or t6021 expected"
            )))
        }
    };
    let bytes = std::fs::read(path).map_err(|e| InputError::new_err(format!("{path}: {e}")))?;
    let c = compiler::compile(&bytes, target).map_err(|e| match e {
        CompileError::Target(_) => InputError::new_err(e.to_string()),
        e => AneError::new_err(format!("compile {path}: {e}")),
    })?;
    c.program.validate().map_err(err)?;
    let file = c.to_anec().map_err(err)?.to_bytes();
    if let Some(o) = output {
        std::fs::write(o, &file).map_err(|e| AneError::new_err(format!("{o}: {e}")))?;
    }
    Ok(pyo3::types::PyBytes::new(py, &file))
}

/// The native module; `ane_rs` re-exports it.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("AneError", py.get_type::<AneError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("NoDeviceError", py.get_type::<NoDeviceError>())?;
    m.add("NotSupportedError", py.get_type::<NotSupportedError>())?;
    m.add_class::<Device>()?;
    m.add_class::<Buffer>()?;
    m.add_class::<Model>()?;
    m.add_class::<TensorInfo>()?;
    m.add_function(wrap_pyfunction!(accel_nodes, m)?)?;
    m.add_function(wrap_pyfunction!(system_info, m)?)?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(run_chain, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
