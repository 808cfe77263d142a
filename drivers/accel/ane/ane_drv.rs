// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! DRM accel driver for the Apple Neural Engine (ANE).
//!
//! One platform driver, `ane`, matched by device-tree compatible, serves two
//! hardware generations behind one UAPI:
//!
//! - H13 (T8103 M1, T600x M1 Pro/Max): the host drives the engine's task
//!   manager directly.
//! - H14 (T602x M2 Pro/Max): Linux stages the ANE firmware, releases the
//!   ANE's coprocessor and talks to it over a channel protocol.
//!
//! Hardware knowledge lives in [`hw`], plain `core` Rust shared with the
//! userspace library and the simulator; this crate is the kernel glue.
//! `docs/architecture.md` describes the layers.

use kernel::{device::Core, of, platform, prelude::*};

pub mod hw;

use hw::soc::{SocId, SocInfo};

kernel::of_device_table!(
    OF_TABLE,
    <AneDriver as platform::Driver>::IdInfo,
    [
        (of::DeviceId::new(hw::soc::T8103.compatible), SocId::T8103),
        (of::DeviceId::new(hw::soc::T6000.compatible), SocId::T6000),
        (of::DeviceId::new(hw::soc::T6020.compatible), SocId::T6020),
        (of::DeviceId::new(hw::soc::T6021.compatible), SocId::T6021),
    ]
);

/// The platform driver.
struct AneDriver;

/// Per-device state of a bound ANE.
struct AneDevice {
    soc: &'static SocInfo,
}

impl platform::Driver for AneDriver {
    type IdInfo = SocId;
    type Data<'bound> = AneDevice;
    const OF_ID_TABLE: Option<of::IdTable<Self::IdInfo>> = Some(&OF_TABLE);

    fn probe<'bound>(
        pdev: &'bound platform::Device<Core<'_>>,
        id: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let dev = pdev.as_ref();
        let Some(id) = id else {
            // Only reachable through a manual bind of a device that matched
            // no table entry.
            dev_err!(dev, "no ANE SoC data for this device\n");
            return Err(ENODEV);
        };
        let soc = id.info();
        dev_info!(
            dev,
            "Apple Neural Engine: {:?} ({}), {:?}, {:?} backend\n",
            soc.id,
            soc.marketing,
            soc.generation,
            soc.backend
        );
        Ok(AneDevice { soc })
    }

    fn unbind<'bound>(pdev: &'bound platform::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        dev_info!(pdev.as_ref(), "unbinding {:?}\n", this.soc.id);
    }
}

/// The module: registers the platform driver.
#[pin_data]
struct AneModule {
    #[pin]
    _driver: kernel::driver::Registration<platform::Adapter<AneDriver>>,
}

impl kernel::InPlaceModule for AneModule {
    fn init(module: &'static kernel::ThisModule) -> impl PinInit<Self, Error> {
        #[cfg(ane_test)]
        selftest::on_load();
        try_pin_init!(Self {
            _driver <- kernel::driver::Registration::new(
                <Self as kernel::ModuleMetadata>::NAME,
                module,
            ),
        })
    }
}

/// Declares the module, with the test flavour's extra parameters when built
/// with `ANE_TEST=1`.
macro_rules! ane_module {
    ($($params:tt)*) => {
        kernel::prelude::module! {
            type: AneModule,
            name: "ane",
            authors: ["The ane developers"],
            description: "Apple Neural Engine DRM accel driver",
            license: "Dual MIT/GPL",
            $($params)*
        }
    };
}

#[cfg(not(ane_test))]
ane_module! {}

#[cfg(ane_test)]
ane_module! {
    params: {
        selftest_warn: bool {
            default: false,
            description: "Test flavour only: emit a kernel WARNING at load, to prove the test harness catches it",
        },
    },
}

/// Hooks that exist only in the test flavour (`ANE_TEST=1`).
#[cfg(ane_test)]
mod selftest {
    /// Called at module load.
    pub(crate) fn on_load() {
        if crate::module_parameters::selftest_warn.value() {
            kernel::warn_on!(true);
        }
    }
}
