// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Runtime power management.
//!
//! The kernel crate has no runtime-PM abstraction; the C glue supplies the
//! `dev_pm_ops` of the platform drivers (see [`super::platform`]) and the
//! inline runtime-PM calls. This module offers:
//!
//! - [`RuntimePm`]/[`PmRef`]: take a usage reference (resuming the device)
//!   and drop it with autosuspend.
//! - [`attach_power_domains`]: genpd attach of every power domain of a
//!   device node, which the platform bus only does for a single domain.

use kernel::{device, prelude::*, sync::aref::ARef};

use super::glue::{self, raw_dev};

/// Runtime PM of one device.
pub struct RuntimePm {
    dev: ARef<device::Device>,
}

impl RuntimePm {
    /// Runtime PM of `dev`, whose driver is registered through
    /// [`super::platform::Registration`].
    pub fn new(dev: &device::Device) -> Self {
        Self { dev: dev.into() }
    }

    /// Resumes the device if needed and keeps it resumed until the returned
    /// reference is dropped.
    pub fn get(&self) -> Result<PmRef> {
        // SAFETY: `dev` is a live device.
        kernel::error::to_result(unsafe { glue::ane_glue_pm_resume_and_get(raw_dev(&self.dev)) })?;
        Ok(PmRef {
            dev: self.dev.clone(),
        })
    }

    /// Power-cycles the device now, whatever its usage count: its
    /// runtime-suspend callback, every attached power domain cycled (genpd
    /// powers each off once nothing else in it is active), then the
    /// runtime-resume callback; `EIO` when a domain is not active
    /// afterwards. The caller holds a usage reference ([`RuntimePm::get`])
    /// and keeps everything else off the hardware meanwhile; runtime PM
    /// sees the device active throughout.
    pub fn cycle(&self) -> Result {
        // SAFETY: `dev` is a live device; the caller's usage reference
        // keeps its driver bound (unbind waits for the engine's holder).
        kernel::error::to_result(unsafe { glue::ane_glue_pm_cycle(raw_dev(&self.dev)) })
    }

    /// Keeps a device that is active (being probed) from suspending until
    /// the returned reference is dropped.
    pub fn hold(&self) -> PmRef {
        // SAFETY: `dev` is a live device.
        unsafe { glue::ane_glue_pm_get_noresume(raw_dev(&self.dev)) };
        PmRef {
            dev: self.dev.clone(),
        }
    }
}

/// A runtime PM usage reference; dropping it lets the device autosuspend.
pub struct PmRef {
    dev: ARef<device::Device>,
}

impl Drop for PmRef {
    fn drop(&mut self) {
        // SAFETY: We hold a usage reference taken by `RuntimePm::get`.
        unsafe { glue::ane_glue_pm_put_autosuspend(raw_dev(&self.dev)) };
    }
}

/// Attaches `dev` to every power domain its device-tree node lists, in list
/// order, each with a runtime-PM device link: from then on, resuming the
/// device powers all of them (parents first, through genpd) and suspending
/// it lets them go. The domains are powered when this returns, and stay
/// attached until the device is unbound (devres).
///
/// Returns the number of domains: 0 for a device without a node or without
/// `power-domains`, 1 when the bus already attached a single domain.
/// `EPROBE_DEFER` while a domain's provider has not probed yet.
///
/// Call only from probe.
pub fn attach_power_domains(dev: &device::Device) -> Result<usize> {
    // SAFETY: `dev` is being probed, so it is valid and bound for devres.
    let n = unsafe { glue::ane_glue_pm_domains_attach(raw_dev(dev)) };
    kernel::error::to_result(n)?;
    Ok(n as usize)
}
