// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The simulated ANE (test flavour only, `ANE_TEST=1`).
//!
//! Module parameter `sim_soc` (a chip number: `0x8103`, `0x6001` or
//! `0x6021`) registers a platform device named `ane` whose platform data
//! names the SoC; the production platform driver binds it by name, so probe,
//! runtime PM, sysfs unbind and remove all run the real code. The simulated
//! hardware sits behind the same interfaces as the real one: here, a
//! software page table in place of the IOMMU.

use kernel::{
    prelude::*,
    sync::{new_mutex, Arc, Mutex},
};

use crate::ext::gem::PagePtr;
use crate::ext::platform::PlatformDevice;
use crate::hw::soc::SocId;
use crate::vm::PAGE_SIZE;

/// Maps the `sim_soc` parameter to a table entry: T6001 is matched by the
/// `apple,t6000-ane` compatible like real T600x chips.
pub(crate) fn soc_of_param(raw: u32) -> Option<SocId> {
    match raw {
        0x6001 => Some(SocId::T6000),
        r => SocId::from_raw(r),
    }
}

/// Registers the simulated device for `sim_soc`, or nothing when it is 0.
pub(crate) fn register(sim_soc: u32) -> Result<Option<PlatformDevice>> {
    if sim_soc == 0 {
        return Ok(None);
    }
    let Some(soc) = soc_of_param(sim_soc) else {
        pr_err!(
            "sim_soc={:#x} is not a supported SoC (0x8103, 0x6001, 0x6021)\n",
            sim_soc
        );
        return Err(EINVAL);
    };
    pr_info!("registering a simulated {:?} ANE\n", soc);
    PlatformDevice::register(c"ane", 0, &(soc as u32).to_ne_bytes()).map(Some)
}

/// One mapped buffer of the software page table.
struct SimMap {
    iova: u64,
    pages: KVec<PagePtr>,
}

/// The simulated engine's page table: what the engine's DMA translates
/// device addresses through. Unmapped addresses fault.
pub(crate) struct SimPageTable(Arc<Mutex<KVec<SimMap>>>);

impl SimPageTable {
    /// An empty page table.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self(Arc::pin_init(new_mutex!(KVec::new()), GFP_KERNEL)?))
    }

    /// Maps `pages` at `iova` (the caller allocated the range).
    pub(crate) fn map(&self, iova: u64, pages: &[PagePtr]) -> Result {
        let mut copy = KVec::with_capacity(pages.len(), GFP_KERNEL)?;
        for p in pages {
            copy.push(*p, GFP_KERNEL)?;
        }
        let mut maps = self.0.lock();
        let pos = maps
            .iter()
            .position(|m| m.iova > iova)
            .unwrap_or(maps.len());
        maps.reserve(1, GFP_KERNEL)?;
        maps.insert_within_capacity(pos, SimMap { iova, pages: copy })
            .map_err(|_| ENOMEM)
    }

    /// Removes the mapping at `iova`.
    pub(crate) fn unmap(&self, iova: u64, _size: u64) {
        let mut maps = self.0.lock();
        if let Some(pos) = maps.iter().position(|m| m.iova == iova) {
            let _ = maps.remove(pos);
        }
    }

    /// Runs `f` on each page-sized chunk of `[iova, iova + len)`: the page,
    /// the offset in it and the chunk's offset and length in the transfer.
    /// `EFAULT` if any byte is unmapped (the engine's translation fault).
    fn walk(
        &self,
        iova: u64,
        len: usize,
        mut f: impl FnMut(&PagePtr, usize, usize, usize) -> Result,
    ) -> Result {
        let maps = self.0.lock();
        let mut done = 0usize;
        while done < len {
            let addr = iova.checked_add(done as u64).ok_or(EFAULT)?;
            let m = maps
                .iter()
                .find(|m| addr >= m.iova && addr - m.iova < (m.pages.len() as u64) * PAGE_SIZE)
                .ok_or(EFAULT)?;
            let off = addr - m.iova;
            let page = m.pages.get((off / PAGE_SIZE) as usize).ok_or(EFAULT)?;
            let in_page = (off % PAGE_SIZE) as usize;
            let chunk = core::cmp::min(len - done, PAGE_SIZE as usize - in_page);
            f(page, in_page, done, chunk)?;
            done += chunk;
        }
        Ok(())
    }

    /// DMA read of `buf.len()` bytes at `iova`.
    #[expect(dead_code, reason = "the engine model is the next step")]
    pub(crate) fn read(&self, iova: u64, buf: &mut [u8]) -> Result {
        let len = buf.len();
        self.walk(iova, len, |page, in_page, at, n| {
            let dst = buf.get_mut(at..at + n).ok_or(EFAULT)?;
            // SAFETY: The page belongs to a live mapping (we hold the table
            // lock, and BOs unmap before releasing their pages).
            unsafe { page.read(in_page, dst) }
        })
    }

    /// DMA write of `buf` at `iova`.
    #[expect(dead_code, reason = "the engine model is the next step")]
    pub(crate) fn write(&self, iova: u64, buf: &[u8]) -> Result {
        self.walk(iova, buf.len(), |page, in_page, at, n| {
            let src = buf.get(at..at + n).ok_or(EFAULT)?;
            // SAFETY: As in `read`.
            unsafe { page.write(in_page, src) }
        })
    }
}
