// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Reading module parameters on every supported kernel.
//!
//! The one kernel-crate difference between the supported releases that the
//! driver's own code meets: `module_parameters::NAME.value()` returns `&T`
//! in 7.1 and 7.2 and `T` in 7.3. [`get`] accepts either, so the driver
//! reads a parameter as `param::get(module_parameters::NAME.value())` on all
//! of them. Parameters are integers: `bool` parameters exist only from 7.3
//! (`PARAM_OPS_BOOL`), so on/off parameters are `u32` with 0 = off.

/// A parameter value as `value()` returns it: `T` or `&T`.
pub trait ParamValue<T: Copy> {
    /// The value.
    fn get(self) -> T;
}

impl<T: Copy> ParamValue<T> for T {
    fn get(self) -> T {
        self
    }
}

impl<T: Copy> ParamValue<T> for &T {
    fn get(self) -> T {
        *self
    }
}

/// The value of a module parameter, from what `value()` returned.
pub fn get<T: Copy>(v: impl ParamValue<T>) -> T {
    v.get()
}

/// Whether an on/off (`u32`) parameter is on.
pub fn on(v: impl ParamValue<u32>) -> bool {
    v.get() != 0
}
