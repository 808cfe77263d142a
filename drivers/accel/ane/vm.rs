// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Per-client device address spaces.
//!
//! Every open file gets its own [`Vm`]: an IOVA allocator over the SoC's DMA
//! window (shared algorithm in [`crate::hw::iova`]) and the page tables the
//! engine translates through. A program can therefore only reach the buffers
//! of the file that runs it. Each BO is mapped once, in one batch, when it is
//! created, and unmapped (with the translation caches flushed) when its last
//! reference goes: [`Mapping`] owns that.
//!
//! The page tables are an [`AddressSpace`]: on hardware an IOMMU (DART)
//! domain; in the test flavour, a software page table plugged in through
//! [`SoftPageTable`] (the simulator's). This file names no simulator type
//! and no driver BO type: buffers are any [`Object`].

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::{
    device,
    prelude::*,
    sync::{aref::ARef, new_mutex, Arc, Mutex},
};

use crate::ext::accel::Driver;
use crate::ext::gem::Object;
#[cfg(ane_test)]
use crate::ext::gem::PagePtr;
use crate::ext::iommu::IommuDomain;
use crate::hw::iova::{AllocError, IovaAllocator, Node, NodeStore};
#[cfg(ane_test)]
use crate::hw::mem::MemType;
use crate::hw::soc::IovaWindow;

/// Unmapped guard bytes after every buffer, in pages.
const GUARD_PAGES: u64 = 1;

/// The DART's page size on every supported SoC.
pub(crate) const DART_PAGE: u64 = 0x4000;

/// The page size of this kernel (16K on Asahi, 4K on the x86 test kernel).
pub(crate) const PAGE_SIZE: u64 = kernel::page::PAGE_SIZE as u64;

/// The IOVA allocator's tree nodes in a `KVec`.
struct KVecStore(KVec<Node>);

impl NodeStore for KVecStore {
    type Error = Error;

    fn slots(&self) -> usize {
        self.0.len()
    }

    fn push(&mut self, node: Node) -> Result {
        self.0.push(node, GFP_KERNEL_ACCOUNT)?;
        Ok(())
    }

    fn get(&self, i: usize) -> Option<&Node> {
        self.0.get(i)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut Node> {
        self.0.get_mut(i)
    }
}

/// A software page table (test flavour): the seam where the simulator
/// plugs in under the same address-space code the hardware path runs.
#[cfg(ane_test)]
pub(crate) trait SoftPageTable: Send + Sync {
    /// Maps `pages` at `iova`; the CPU maps them as `mem` says (the
    /// simulator plays a device that does not snoop the CPU's caches on
    /// it).
    fn map(&self, iova: u64, pages: &[PagePtr], writable: bool, mem: MemType) -> Result;
    /// Unmaps `[iova, iova + size)`.
    fn unmap(&self, iova: u64, size: u64);
    /// Marks the table attached to the device for its lifetime.
    fn attach_device(&self);
    /// Detaches it again.
    fn detach_device(&self);
    /// The table itself, for the engine model that translates through it.
    fn as_any(&self) -> &dyn core::any::Any;
}

/// The page tables of one address space.
pub(crate) enum AddressSpace {
    /// An IOMMU (DART) paging domain, attached to the engine for this
    /// client's jobs.
    Iommu(IommuSpace),
    /// A software page table (the simulated engine's).
    #[cfg(ane_test)]
    Soft(Arc<dyn SoftPageTable>),
}

impl AddressSpace {
    fn map<T: Driver, D: Send + Sync>(
        &self,
        iova: u64,
        bo: &Object<T, D>,
        writable: bool,
    ) -> Result {
        match self {
            AddressSpace::Iommu(d) => {
                if bo.write_combined() {
                    // Before the device may see the pages (`ext::dma`).
                    crate::ext::dma::clean_for_device(&d.dev, bo)?;
                }
                // SAFETY: The mapping is undone before `bo`'s pages go.
                // This is reached only through `Vm::map_with` and
                // `Vm::map_fixed`, whose `Mapping` (which unmaps on drop)
                // is dropped at once on failure, or kept in the object's
                // own data (`gem::create_mapped_as` stores it in `BoData`;
                // the object's `free` drops its data before it unpins the
                // pages, `ext::gem::Object::free_callback`), or, for H14's
                // alias of the firmware image, kept in the firmware's
                // `maps`, which go before its `bos` (`h14::Firmware`'s
                // `stage` and `shutdown`, `FwMemory`'s `Drop`).
                unsafe { d.domain.map_object(iova, bo, writable) }
            }
            #[cfg(ane_test)]
            AddressSpace::Soft(pt) => {
                let mem = if bo.write_combined() {
                    MemType::WriteCombined
                } else {
                    MemType::Cached
                };
                pt.map(iova, bo.pages(), writable, mem)
            }
        }
    }

    /// Maps the physical range `[pa, pa + size)` at `iova`.
    ///
    /// # Safety
    ///
    /// As for [`IommuDomain::map_phys`].
    unsafe fn map_phys(&self, iova: u64, pa: u64, size: u64) -> Result {
        match self {
            // SAFETY: The caller's safety requirements are the domain's.
            AddressSpace::Iommu(d) => unsafe { d.domain.map_phys(iova, pa, size) },
            // The simulator has no device registers to map.
            #[cfg(ane_test)]
            AddressSpace::Soft(_) => Err(EINVAL),
        }
    }

    fn unmap(&self, iova: u64, size: u64) {
        match self {
            AddressSpace::Iommu(d) => d.domain.unmap(iova, size),
            #[cfg(ane_test)]
            AddressSpace::Soft(pt) => pt.unmap(iova, size),
        }
    }
}

impl AddressSpace {
    /// Attaches the space to the device for the device's lifetime (H14:
    /// the firmware reaches it at any time). Dropping the space detaches it
    /// first, so the IOMMU never keeps a freed domain.
    pub(crate) fn attach_device(&self) -> Result {
        match self {
            AddressSpace::Iommu(d) => d.attach(),
            #[cfg(ane_test)]
            AddressSpace::Soft(pt) => {
                pt.attach_device();
                Ok(())
            }
        }
    }
}

impl Drop for AddressSpace {
    fn drop(&mut self) {
        match self {
            AddressSpace::Iommu(d) => d.detach_if_attached(),
            #[cfg(ane_test)]
            AddressSpace::Soft(pt) => pt.detach_device(),
        }
    }
}

/// An IOMMU domain and the engine device it is attached to (per job on H13,
/// for the device's lifetime on H14).
pub(crate) struct IommuSpace {
    domain: IommuDomain,
    dev: ARef<device::Device>,
    /// The domain is attached: it must be detached before it is freed.
    attached: AtomicBool,
}

impl IommuSpace {
    /// A new paging domain for `dev`.
    pub(crate) fn new(dev: &device::Device) -> Result<Self> {
        Ok(Self {
            domain: IommuDomain::new(dev)?,
            dev: dev.into(),
            attached: AtomicBool::new(false),
        })
    }

    /// Attaches the domain to the engine.
    pub(crate) fn attach(&self) -> Result {
        // SAFETY: The domain is detached before it is freed: `attached` is
        // set right after, and `AddressSpace`'s `Drop` (the only owner of
        // an `IommuSpace`) detaches a space whose flag is set before its
        // domain drops; H14's released firmware never drops its space.
        unsafe { self.domain.attach(&self.dev) }?;
        self.attached.store(true, Ordering::Release);
        Ok(())
    }

    /// Detaches it again.
    pub(crate) fn detach(&self) {
        self.attached.store(false, Ordering::Release);
        self.domain.detach(&self.dev)
    }

    /// Detaches it if it is attached (before the domain is freed).
    fn detach_if_attached(&self) {
        if self.attached.swap(false, Ordering::AcqRel) {
            self.domain.detach(&self.dev)
        }
    }
}

/// The address allocators of one space: the clients' window and, on H14,
/// the firmware's range reserved at probe (kernel-2 N2).
struct Pools {
    client: IovaAllocator<KVecStore>,
    firmware: Option<IovaAllocator<KVecStore>>,
    /// H14: the loaded programs' section copies, which the firmware keeps
    /// until reboot: their own range, so they can take neither the
    /// clients' window nor the room of the firmware's grants.
    programs: Option<IovaAllocator<KVecStore>>,
}

/// Which allocator placed a [`Mapping`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pool {
    Client,
    Firmware,
    Programs,
    /// At an address the caller reserved ([`Vm::map_fixed`]).
    Fixed,
}

/// A client's device address space.
#[pin_data]
pub(crate) struct Vm {
    #[pin]
    iova: Mutex<Pools>,
    space: AddressSpace,
    /// The clients' window (all of the SoC's unless part is reserved).
    window: IovaWindow,
    /// Mappings start at multiples of this.
    align: u64,
}

impl Vm {
    /// The page tables.
    pub(crate) fn space(&self) -> &AddressSpace {
        &self.space
    }

    /// A new, empty address space over `window`, whose mappings start on
    /// 16 KiB boundaries whatever the kernel's page size (the DART's page,
    /// and where the references place every buffer).
    pub(crate) fn new(window: IovaWindow, space: AddressSpace) -> Result<Arc<Self>> {
        Self::with_align(window, space, DART_PAGE)
    }

    /// A new, empty address space over `window` whose mappings start at
    /// multiples of `align` (a power of two, at least the page size).
    pub(crate) fn with_align(
        window: IovaWindow,
        space: AddressSpace,
        align: u64,
    ) -> Result<Arc<Self>> {
        Self::with_reserve(window, space, align, 0, 0)
    }

    /// [`Self::with_align`], with the first `reserve` bytes of `window` (a
    /// multiple of `align`) kept for [`Self::map_reserved`] and the next
    /// `programs` bytes (a multiple of `align`) for [`Self::map_program`]:
    /// the clients' window starts where the reserved ranges end, so no
    /// client mapping can take the addresses the firmware needs. (At the
    /// bottom: the firmware's boot buffers, allocated first, keep the
    /// addresses they had when the whole window was one allocator's.)
    pub(crate) fn with_reserve(
        window: IovaWindow,
        space: AddressSpace,
        align: u64,
        reserve: u64,
        programs: u64,
    ) -> Result<Arc<Self>> {
        let align = align.max(PAGE_SIZE);
        // The guard gap keeps the alignment: a whole number of `align`s.
        let guard = (GUARD_PAGES * PAGE_SIZE).next_multiple_of(align);
        let fw_end = window.start.checked_add(reserve).ok_or(EINVAL)?;
        let split = fw_end.checked_add(programs).ok_or(EINVAL)?;
        if reserve % align != 0 || programs % align != 0 || split >= window.end {
            return Err(EINVAL);
        }
        let clients = IovaWindow {
            start: split,
            end: window.end,
        };
        let client =
            IovaAllocator::new(clients, align, guard, KVecStore(KVec::new())).ok_or(EINVAL)?;
        let firmware = if reserve == 0 {
            None
        } else {
            let w = IovaWindow {
                start: window.start,
                end: fw_end,
            };
            Some(IovaAllocator::new(w, align, guard, KVecStore(KVec::new())).ok_or(EINVAL)?)
        };
        let programs = if programs == 0 {
            None
        } else {
            let w = IovaWindow {
                start: fw_end,
                end: split,
            };
            Some(IovaAllocator::new(w, align, guard, KVecStore(KVec::new())).ok_or(EINVAL)?)
        };
        Arc::pin_init(
            pin_init!(Self {
                iova <- new_mutex!(Pools {
                    client,
                    firmware,
                    programs,
                }),
                space,
                window: clients,
                align,
            }),
            GFP_KERNEL,
        )
    }

    /// The clients' window.
    pub(crate) fn window(&self) -> IovaWindow {
        self.window
    }

    /// Maps all of `bo` at a newly allocated address, readable and writable
    /// by the device.
    pub(crate) fn map<T: Driver, D: Send + Sync>(
        self: &Arc<Self>,
        bo: &Object<T, D>,
    ) -> Result<Mapping> {
        self.map_with(bo, true, Pool::Client)
    }

    /// Maps all of `bo`, readable and writable, in the range reserved at
    /// creation ([`Self::with_reserve`]); `ENOSPC` when it is full or
    /// there is none.
    pub(crate) fn map_reserved<T: Driver, D: Send + Sync>(
        self: &Arc<Self>,
        bo: &Object<T, D>,
    ) -> Result<Mapping> {
        self.map_with(bo, true, Pool::Firmware)
    }

    /// Maps all of `bo`, readable and writable, in the range reserved at
    /// creation for loaded programs ([`Self::with_reserve`]); `ENOSPC`
    /// when it is full or there is none.
    pub(crate) fn map_program<T: Driver, D: Send + Sync>(
        self: &Arc<Self>,
        bo: &Object<T, D>,
    ) -> Result<Mapping> {
        self.map_with(bo, true, Pool::Programs)
    }

    /// Maps all of `bo` at a newly allocated address, readable by the
    /// device only (program copies: the engine must not change what was
    /// validated).
    pub(crate) fn map_read_only<T: Driver, D: Send + Sync>(
        self: &Arc<Self>,
        bo: &Object<T, D>,
    ) -> Result<Mapping> {
        self.map_with(bo, false, Pool::Client)
    }

    fn map_with<T: Driver, D: Send + Sync>(
        self: &Arc<Self>,
        bo: &Object<T, D>,
        writable: bool,
        pool: Pool,
    ) -> Result<Mapping> {
        let size = bo.size() as u64;
        // The address range covers whole alignment units; only the BO's
        // pages are mapped.
        let span = size.checked_next_multiple_of(self.align).ok_or(E2BIG)?;
        let iova = {
            let mut pools = self.iova.lock();
            let alloc = match pool {
                Pool::Firmware => pools.firmware.as_mut().ok_or(ENOSPC)?,
                Pool::Programs => pools.programs.as_mut().ok_or(ENOSPC)?,
                _ => &mut pools.client,
            };
            alloc.alloc(span).map_err(|e| match e {
                AllocError::BadSize => EINVAL,
                AllocError::NoSpace => ENOSPC,
                AllocError::Store(e) => e,
            })?
        };
        if let Err(e) = self.space.map(iova, bo, writable) {
            self.free(pool, iova);
            return Err(e);
        }
        Ok(Mapping {
            vm: self.clone(),
            iova,
            size,
            pool,
        })
    }

    /// Gives `iova` back to the allocator of `pool`.
    fn free(&self, pool: Pool, iova: u64) {
        let mut pools = self.iova.lock();
        match pool {
            Pool::Client => {
                pools.client.free(iova);
            }
            Pool::Firmware => {
                if let Some(f) = pools.firmware.as_mut() {
                    f.free(iova);
                }
            }
            Pool::Programs => {
                if let Some(f) = pools.programs.as_mut() {
                    f.free(iova);
                }
            }
            Pool::Fixed => {}
        }
    }

    /// Maps all of `bo` at `iova`, an address outside the allocator's
    /// window that the caller reserved (the H14 firmware's own window).
    pub(crate) fn map_fixed<T: Driver, D: Send + Sync>(
        self: &Arc<Self>,
        bo: &Object<T, D>,
        iova: u64,
    ) -> Result<Mapping> {
        self.space.map(iova, bo, true)?;
        Ok(Mapping {
            vm: self.clone(),
            iova,
            size: bo.size() as u64,
            pool: Pool::Fixed,
        })
    }
}

impl Vm {
    /// Maps the device-register page(s) `[pa, pa + size)` at `iova`, an
    /// address outside the allocator's window that the caller reserved (the
    /// H14 firmware reaches its PMU page at IOVA == PA).
    ///
    /// # Safety
    ///
    /// `[pa, pa + size)` must be memory the engine may read and write for
    /// as long as the returned mapping lives, as for
    /// [`IommuDomain::map_phys`]: device registers, never RAM. (The
    /// mapping holds the `Vm`, so it is unmapped before the domain is
    /// freed.)
    pub(crate) unsafe fn map_phys(
        self: &Arc<Self>,
        iova: u64,
        pa: u64,
        size: u64,
    ) -> Result<Mapping> {
        // SAFETY: The caller's safety requirements; the `Mapping` returned
        // unmaps the range when it drops, and holds the `Vm` (so the
        // domain) until then.
        unsafe { self.space.map_phys(iova, pa, size) }?;
        Ok(Mapping {
            vm: self.clone(),
            iova,
            size,
            pool: Pool::Fixed,
        })
    }
}

/// A buffer mapped into a [`Vm`]; unmapped and its addresses freed on drop.
pub(crate) struct Mapping {
    vm: Arc<Vm>,
    iova: u64,
    size: u64,
    /// The allocator that placed it, or none ([`Vm::map_fixed`]).
    pool: Pool,
}

impl Mapping {
    /// The device address of the first byte.
    pub(crate) fn iova(&self) -> u64 {
        self.iova
    }

    /// The address space.
    pub(crate) fn vm(&self) -> &Arc<Vm> {
        &self.vm
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        self.vm.space.unmap(self.iova, self.size);
        self.vm.free(self.pool, self.iova);
    }
}

/// The users whose files may be open at once on a device-wide address
/// space (H14, kernel-2 1.12). Every T602x client shares one address space
/// with the firmware, and their programs are opaque to the kernel, so a
/// client's program can reach any other client's buffers: nothing a
/// driver can check separates them. Files of one user may share it (they
/// could read each other's memory anyway); by default a file of another
/// user is refused with `EBUSY` while any is open, unless the
/// administrator allowed several users (`multi_user`).
#[pin_data]
pub(crate) struct Tenants {
    multi_user: bool,
    #[pin]
    held: Mutex<Held>,
}

/// The user holding the space and how many files it has open.
struct Held {
    user: Option<kernel::task::Kuid>,
    files: usize,
}

/// One open file's hold on the space: released when the file closes.
pub(crate) struct Tenancy(Arc<Tenants>);

impl Tenants {
    /// The space's tenants; `multi_user` lets files of different users be
    /// open at once.
    pub(crate) fn new(multi_user: bool) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                multi_user,
                held <- new_mutex!(Held { user: None, files: 0 }),
            }),
            GFP_KERNEL,
        )
    }

    /// Admits a file of the current task's effective user: `EBUSY` while
    /// files of another user are open and several users are not allowed.
    pub(crate) fn enter(self: &Arc<Self>) -> Result<Tenancy> {
        let me = kernel::task::Kuid::current_euid();
        let mut held = self.held.lock();
        match held.user {
            Some(user) if !self.multi_user && user != me => return Err(EBUSY),
            _ => {}
        }
        held.user = Some(me);
        held.files += 1;
        Ok(Tenancy(self.clone()))
    }
}

impl Drop for Tenancy {
    fn drop(&mut self) {
        let mut held = self.0.held.lock();
        held.files = held.files.saturating_sub(1);
        if held.files == 0 {
            held.user = None;
        }
    }
}
