// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Userspace library for the `ane` Apple Neural Engine DRM accel driver.
//!
//! - [`device`]: the accel device: discovery, typed ioctls, buffer objects.
//! - [`system`]: read-only discovery of the machine, its device tree, the
//!   kernel module and the accel nodes (what `ane-probe info` prints).
//! - [`hwx`]: parser of Apple's HWX compiled-program container.
//! - [`anec`]: parser and writer of eiln's `.anec` program container, and
//!   conversion from HWX.
//! - [`tensor`]: NCHW fp16 shapes, the ANE's strided buffer layout, and
//!   tiling/untiling between it and dense arrays.
//! - [`reference`](mod@reference): CPU reference operations with explicit
//!   fp16 rounding, and ULP comparison for parity tables.
//! - [`builder`]: an H13 program builder (task descriptors and
//!   coefficients) for add, mul, select, add-mul, 1×1 convolution and
//!   linear layers.
//! - [`compiler`]: ONNX models (a subset: Gemm, MatMul, 1×1 Conv,
//!   BatchNormalization folded, Relu, Add/Mul/Max/Min) to one H13 program
//!   with the model's input and output names.
//! - [`mlp`]: a two-layer perceptron as two chained programs sharing the
//!   hidden buffer, run on the engine model or a device and checked
//!   against the CPU reference.
//! - [`program`]: a compiled program file (HWX or `.anec`) validated by
//!   the kernel's TD validator, with the binding of every slot it uses.
//! - [`h14`]: the H14 program container Apple's compiler emits for T602x,
//!   read into the six sections the T6021 firmware takes.
//! - [`parity`]: the parity cells as data, and their execution on the
//!   engine model or the device against the CPU reference.
//!
//! The hardware facts (SoC table, and later the UAPI and program formats)
//! come from [`hw`], the very code the kernel driver is built from.

pub use ane_hw as hw;

pub mod anec;
pub mod builder;
pub mod compiler;
pub mod device;
#[doc(hidden)]
pub mod fixtures;
pub mod h14;
pub mod hwx;
pub mod mlp;
pub mod parity;
pub mod program;
pub mod recorded;
pub mod reference;
pub mod system;
pub mod tensor;
