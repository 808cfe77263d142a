// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Ioctl handlers that are not about one object kind (those live with their
//! objects: `gem.rs` for BOs).

use kernel::prelude::*;

use crate::ext::accel::{Device, File};
use crate::hw::uapi::{self, param};
use crate::vm::PAGE_SIZE;
use crate::AneDriver;

/// `DRM_IOCTL_ANE_GET_PARAM`.
pub(crate) fn get_param(
    dev: &Device<AneDriver>,
    args: &mut uapi::GetParam,
    _file: &File<AneDriver>,
) -> Result<u32> {
    if args.pad != 0 {
        return Err(EINVAL);
    }
    let soc = dev.soc;
    args.value = match args.param {
        param::ABI_VERSION => u64::from(uapi::ABI_VERSION),
        param::SOC_ID => u64::from(soc.id as u32),
        param::GENERATION => u64::from(soc.generation as u32),
        param::BACKEND => u64::from(soc.backend as u32),
        param::PAGE_SIZE => PAGE_SIZE,
        param::IOVA_START => dev.limits.iova.start,
        param::IOVA_END => dev.limits.iova.end,
        param::BO_MAX_SIZE => dev.limits.bo_max,
        param::BO_TOTAL_MAX => dev.limits.bo_total_max,
        param::BO_CLIENT_MAX => dev.limits.bo_client_max,
        param::MAX_BINDINGS => u64::from(uapi::NUM_SLOTS),
        param::MAX_PROGRAM_SIZE => dev.limits.program_max,
        param::FW_STATE => dev.firmware().map_or(uapi::fw_state::NONE, |f| f.state()),
        param::IDENT => uapi::IDENT_MAGIC,
        param::MAX_CHAIN => u64::from(uapi::MAX_CHAIN_STEPS),
        param::MAX_IN_SYNCOBJS => u64::from(uapi::MAX_IN_SYNCOBJS),
        param::FEATURES => {
            if dev.engine().is_some_and(|e| e.has_irq()) {
                uapi::feature::COMPLETION_IRQ
            } else {
                0
            }
        }
        param::ENGINE_STATE => dev
            .engine()
            .map_or(uapi::engine_state::READY, |e| e.state()),
        _ => return Err(EINVAL),
    };
    Ok(0)
}
