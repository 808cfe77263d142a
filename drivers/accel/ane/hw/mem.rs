// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The memory type of the buffers the engine (H13) or the firmware and its
//! engine (H14) read and write, per SoC, and the simulator's alternatives
//! for a device that does not snoop the CPU's caches.
//!
//! What ran (`docs/hardware-record.md`, "Memory type" rows):
//!
//! - H13 (T8103, T6001): cacheable CPU mappings (kernel copies and user
//!   mmap) and device page-table entries marked `IOMMU_CACHE`, omarchy-ane's
//!   `map_mode=3`, which passed its coherence batteries on both SoCs.
//! - H14 (T602x): omarchy-ane's `ane_t6021.ko` ran every buffer the firmware
//!   saw out of `dma_alloc_coherent` on the ANE platform device, and mapped
//!   it to user space with `dma_mmap_coherent`. Its node (the lab j414c
//!   node restated in its `t602x-ane.dtsi`) has no `dma-coherent`, nor do
//!   the three DART nodes, and the live M2 Max tree marks only the PCIe
//!   controller `dma-coherent`. For a device that is not DMA-coherent the
//!   kernel's coherent allocator cleans the pages' cacheable linear alias
//!   once, maps them to the CPU Normal non-cacheable (arm64's
//!   write-combine attribute, for the kernel and for user space), and maps
//!   them into the IOMMU without `IOMMU_CACHE`; omarchy-ane's own IOMMU
//!   mappings add `IOMMU_CACHE` only `if (dev_is_dma_coherent(...))`. No
//!   source shows the ANE DART snooping the CPU caches on T602x, so the
//!   driver takes that memory type there.

/// How the CPU maps a buffer the device reads or writes, and how the
/// device's page-table entries mark it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemType {
    /// Cacheable CPU mappings; device entries with `IOMMU_CACHE`; no cache
    /// maintenance. Correct only where the device snoops the CPU's caches
    /// (H13, as the record's batteries showed).
    Cached,
    /// Write-combined (Normal non-cacheable on arm64) CPU mappings, kernel
    /// and user; device entries without `IOMMU_CACHE`; the cacheable linear
    /// alias cleaned once when the buffer is created. What the kernel's
    /// coherent allocator gives a device that is not DMA-coherent (H14, as
    /// the record ran).
    WriteCombined,
}

impl MemType {
    /// Whether the CPU maps the buffer write-combined.
    pub const fn write_combined(self) -> bool {
        matches!(self, MemType::WriteCombined)
    }
}

/// The simulator's alternatives for a device that does not snoop the CPU's
/// caches (hw-2 §3 item 7; `sim_fw_faults` bits, played by the simulated
/// T602x's page table). The record does not show the T602x DART cohering,
/// so the driver must be right under both. Simulator and host only.
#[cfg(any(not(ane_kernel), ane_test))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coherence {
    /// A device read of a buffer the CPU maps cacheably returns what memory
    /// held before the CPU's writes (they may still sit in its caches):
    /// [`STALE_BYTE`]s, since nothing was ever cleaned.
    pub stale_to_device: bool,
    /// A device write to a buffer the CPU maps cacheably never reaches what
    /// the CPU reads (its cached lines are never invalidated): the write is
    /// lost to the CPU.
    pub stale_to_cpu: bool,
}

/// What a device read of stale memory returns in the simulator.
#[cfg(any(not(ane_kernel), ane_test))]
pub const STALE_BYTE: u8 = 0xa5;

#[cfg(any(not(ane_kernel), ane_test))]
impl Coherence {
    /// `sim_fw_faults` bit: [`Coherence::stale_to_device`].
    pub const SIM_STALE_TO_DEVICE: u32 = 1 << 21;
    /// `sim_fw_faults` bit: [`Coherence::stale_to_cpu`].
    pub const SIM_STALE_TO_CPU: u32 = 1 << 22;
    /// Both bits of this model.
    pub const SIM_BITS: u32 = Self::SIM_STALE_TO_DEVICE | Self::SIM_STALE_TO_CPU;

    /// The alternatives `bits` choose (other bits are ignored).
    pub const fn from_sim_bits(bits: u32) -> Coherence {
        Coherence {
            stale_to_device: bits & Self::SIM_STALE_TO_DEVICE != 0,
            stale_to_cpu: bits & Self::SIM_STALE_TO_CPU != 0,
        }
    }

    /// Whether a device read of a buffer of type `mem` sees what the CPU
    /// wrote (otherwise it reads [`STALE_BYTE`]s).
    pub const fn device_sees_cpu_writes(self, mem: MemType) -> bool {
        !(self.stale_to_device && matches!(mem, MemType::Cached))
    }

    /// Whether the CPU sees a device write to a buffer of type `mem`
    /// (otherwise the write is lost to it).
    pub const fn cpu_sees_device_writes(self, mem: MemType) -> bool {
        !(self.stale_to_cpu && matches!(mem, MemType::Cached))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::soc::{BackendKind, SocId};

    #[test]
    fn the_coherent_default_sees_everything() {
        let c = Coherence::from_sim_bits(0);
        for m in [MemType::Cached, MemType::WriteCombined] {
            assert!(c.device_sees_cpu_writes(m));
            assert!(c.cpu_sees_device_writes(m));
        }
    }

    #[test]
    fn a_non_snooping_device_misses_cached_lines_in_each_direction() {
        let to_dev = Coherence::from_sim_bits(Coherence::SIM_STALE_TO_DEVICE);
        assert!(!to_dev.device_sees_cpu_writes(MemType::Cached));
        assert!(to_dev.cpu_sees_device_writes(MemType::Cached));
        let to_cpu = Coherence::from_sim_bits(Coherence::SIM_STALE_TO_CPU);
        assert!(to_cpu.device_sees_cpu_writes(MemType::Cached));
        assert!(!to_cpu.cpu_sees_device_writes(MemType::Cached));
        // Write-combined memory never sits in the CPU's caches.
        let both = Coherence::from_sim_bits(Coherence::SIM_BITS);
        assert!(both.device_sees_cpu_writes(MemType::WriteCombined));
        assert!(both.cpu_sees_device_writes(MemType::WriteCombined));
    }

    #[test]
    fn the_bits_are_free_of_the_other_models() {
        use crate::hw::fw::model::Faults;
        use crate::hw::tm::model::Behaviour;
        assert_eq!(Coherence::SIM_BITS & Faults::ALL.bits(), 0);
        assert_eq!(Coherence::SIM_BITS & Behaviour::SIM_BITS, 0);
    }

    #[test]
    fn firmware_socs_write_combine_and_h13_stays_cached() {
        for id in SocId::ALL {
            let info = id.info();
            let want = match info.backend {
                BackendKind::HostDriven => MemType::Cached,
                BackendKind::Firmware => MemType::WriteCombined,
            };
            assert_eq!(info.mem, want, "{:?}", id);
        }
    }
}
