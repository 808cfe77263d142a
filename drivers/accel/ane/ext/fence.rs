// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Job fences and DRM syncobjs, through the C glue (the kernel crates of
//! 7.1–7.3 have no `dma_fence` or `drm_syncobj` abstractions).
//!
//! - [`Fence`]: a job's out-fence. It is signalled at most once; dropping
//!   one that was never signalled signals it with `-ECANCELED`, so no fence
//!   of this driver is left unsignalled whatever path drops it.
//! - [`OutSyncobj`]: the syncobj (and, for a timeline point, the chain node)
//!   an EXEC's out-fence goes into, looked up before the job is queued so
//!   that attaching the fence cannot fail.
//! - [`InFences`]: the fences a job waits for. Each gets a callback, which
//!   runs in the signaller's atomic context and only counts down; the last
//!   one queues a work item that calls the driver back in process context.

use core::{
    ffi::{c_int, c_long, c_void},
    ptr::NonNull,
};

use kernel::{bindings, prelude::*};

use super::{accel, glue, workqueue::OwnedQueue};

/// `-ECANCELED`, the error of a job that never ran to completion.
pub const ECANCELED: c_int = -(bindings::ECANCELED as c_int);
/// `-ETIMEDOUT`, a job that timed out.
pub const ETIMEDOUT: c_int = -(bindings::ETIMEDOUT as c_int);
/// `-EIO`, a job the engine or firmware failed.
pub const EIO: c_int = -(bindings::EIO as c_int);

/// A `dma_fence` of this driver, owning one reference.
///
/// # Invariants
///
/// `0` is a live fence made by `ane_glue_fence_new`, and this value owns
/// one reference to it.
pub struct Fence(NonNull<c_void>);

// SAFETY: `dma_fence` is reference counted and signalled under its own
// lock; every operation here may be called from any thread.
unsafe impl Send for Fence {}
// SAFETY: See `Send`.
unsafe impl Sync for Fence {}

impl Fence {
    /// A new unsignalled fence, on a context of its own.
    pub fn new() -> Result<Self> {
        // SAFETY: No preconditions.
        let raw = unsafe { glue::ane_glue_fence_new() };
        NonNull::new(raw).map(Self).ok_or(ENOMEM)
    }

    /// Signals the fence with `error` (0 or a negative errno); a fence
    /// signalled already stays as it is.
    pub fn signal(&self, error: c_int) {
        // SAFETY: By the type invariant the fence is live.
        unsafe { glue::ane_glue_fence_signal(self.0.as_ptr(), error.min(0)) };
    }
}

impl Fence {
    /// Another reference to the fence, which does not signal it.
    pub fn get_ref(&self) -> FenceRef {
        // SAFETY: By the type invariant the fence is live.
        unsafe { glue::ane_glue_fence_get(self.0.as_ptr()) };
        FenceRef(self.0)
    }
}

/// A reference to a [`Fence`] that does not own its signalling: dropping
/// it only drops the reference.
///
/// # Invariants
///
/// `0` is a live fence of this driver and this value owns one reference.
pub struct FenceRef(NonNull<c_void>);

// SAFETY: See `Fence`.
unsafe impl Send for FenceRef {}
// SAFETY: See `Fence`.
unsafe impl Sync for FenceRef {}

/// How a [`FenceRef::wait`] ended.
pub enum WaitEnd {
    /// The fence signalled.
    Signalled,
    /// The time ran out first.
    TimedOut,
}

impl FenceRef {
    /// Waits for the fence, interruptibly, for at most `jiffies` (a fence
    /// signalled already returns at once, even for 0): `ERESTARTSYS` when
    /// a signal came first. No callback of this driver runs in the wait:
    /// the core's default wait sleeps until the signaller wakes it.
    pub fn wait(&self, jiffies: kernel::time::Jiffies) -> Result<WaitEnd> {
        let timeout = c_long::try_from(jiffies).unwrap_or(c_long::MAX);
        // SAFETY: By the type invariant the fence is live.
        let r = unsafe { glue::ane_glue_fence_wait(self.0.as_ptr(), timeout) };
        match r {
            r if r > 0 => Ok(WaitEnd::Signalled),
            0 => Ok(WaitEnd::TimedOut),
            // -ERESTARTSYS: the only error of an interruptible wait.
            r => Err(Error::from_errno(c_int::try_from(r).unwrap_or(c_int::MIN))),
        }
    }
}

impl Drop for FenceRef {
    fn drop(&mut self) {
        // SAFETY: By the type invariant this value owns a reference.
        unsafe { glue::ane_glue_fence_put(self.0.as_ptr()) };
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        // Never left unsignalled: a no-op if it was signalled.
        self.signal(ECANCELED);
        // SAFETY: By the type invariant this value owns a reference.
        unsafe { glue::ane_glue_fence_put(self.0.as_ptr()) };
    }
}

/// The syncobj that gets an EXEC's out-fence.
///
/// # Invariants
///
/// `syncobj` is a syncobj reference from `ane_glue_syncobj_out_get` that
/// this value owns, `chain` a chain node it allocated (null for a binary
/// syncobj, `point` 0).
pub struct OutSyncobj {
    syncobj: NonNull<c_void>,
    chain: *mut c_void,
    point: u64,
}

// SAFETY: A syncobj reference and an unused chain node may be used and
// dropped from any thread.
unsafe impl Send for OutSyncobj {}

impl OutSyncobj {
    /// Looks up syncobj `handle` of `file`: `ENOENT` if unknown; with a
    /// timeline `point`, `EINVAL` unless it is above the timeline's last.
    pub fn find<T: accel::Driver>(file: &accel::File<T>, handle: u32, point: u64) -> Result<Self> {
        let mut syncobj = core::ptr::null_mut();
        let mut chain = core::ptr::null_mut();
        // SAFETY: `file` is a live DRM file; the out pointers are valid.
        let ret = unsafe {
            glue::ane_glue_syncobj_out_get(file.as_raw(), handle, point, &mut syncobj, &mut chain)
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        let syncobj = NonNull::new(syncobj).ok_or(ENOENT)?;
        Ok(Self {
            syncobj,
            chain,
            point,
        })
    }

    /// Puts `fence` in the syncobj (as its timeline point, or in place of
    /// its fence).
    pub fn attach(self, fence: &FenceRef) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: By the type invariants the syncobj reference and chain
        // node are owned here and handed over (the C side drops both); the
        // fence is live and gets a reference of its own.
        unsafe {
            glue::ane_glue_syncobj_out_attach(
                this.syncobj.as_ptr(),
                this.chain,
                fence.0.as_ptr(),
                this.point,
            )
        };
    }
}

impl Drop for OutSyncobj {
    fn drop(&mut self) {
        // SAFETY: By the type invariants both are owned and not attached.
        unsafe { glue::ane_glue_syncobj_out_drop(self.syncobj.as_ptr(), self.chain) };
    }
}

/// What [`InFences::arm`] found.
pub enum Armed {
    /// Every fence had signalled: the callback will not run. The first
    /// fence error (0 if none).
    Ready(c_int),
    /// The callback runs once the last fence signals.
    Waiting,
}

/// The in-fences of a job.
///
/// # Invariants
///
/// `0` is a live `struct ane_glue_deps` from `ane_glue_deps_new`, owned by
/// this value.
pub struct InFences(NonNull<c_void>);

// SAFETY: The set may be filled, armed, cancelled and freed from any
// thread; its callbacks synchronise with atomics and the fences' locks.
unsafe impl Send for InFences {}
// SAFETY: `cancel` (the only `&self` operation) is safe against the
// callbacks; the driver serialises it with `arm` and drop by a lock.
unsafe impl Sync for InFences {}

/// Called in process context, from the queue given to [`InFences::arm`],
/// with the `data` given there and the first fence error (`-ECANCELED`
/// if [`InFences::cancel`] ended the wait).
pub type ReadyFn = unsafe extern "C" fn(data: *mut c_void, error: c_int);

impl InFences {
    /// An empty set with room for `max` fences.
    pub fn new(max: u32) -> Result<Self> {
        // SAFETY: No preconditions.
        let raw = unsafe { glue::ane_glue_deps_new(max) };
        NonNull::new(raw).map(Self).ok_or(ENOMEM)
    }

    /// Adds the fence of `file`'s syncobj `handle` (at timeline `point`, or
    /// 0): `ENOENT` for an unknown handle, `EINVAL` for an empty syncobj, a
    /// point on a binary one, or a point not submitted yet.
    pub fn add<T: accel::Driver>(
        &mut self,
        file: &accel::File<T>,
        handle: u32,
        point: u64,
    ) -> Result {
        // SAFETY: The set is live and not armed yet (`arm` takes it by
        // `&mut` too, and the driver adds before arming); `file` is live.
        let ret = unsafe { glue::ane_glue_deps_add(self.0.as_ptr(), file.as_raw(), handle, point) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }

    /// Waits for every fence added.
    ///
    /// # Safety
    ///
    /// Called once. Unless it returns [`Armed::Ready`], `ready` is called
    /// once with `data` from `wq`, which must stay alive until then, as
    /// must `data`; this set must not be dropped before `ready` starts.
    pub unsafe fn arm(&mut self, wq: &OwnedQueue, ready: ReadyFn, data: *mut c_void) -> Armed {
        let mut error: c_int = 0;
        // SAFETY: The set is live and armed once (the caller's promise);
        // the caller keeps `wq` and `data` alive until `ready`.
        let r = unsafe {
            glue::ane_glue_deps_arm(self.0.as_ptr(), wq.as_raw(), ready, data, &mut error)
        };
        if r != 0 {
            Armed::Ready(error)
        } else {
            Armed::Waiting
        }
    }

    /// Ends the wait early: the callbacks that did not run are removed, and
    /// the ready function runs with `-ECANCELED` (if this removed the last
    /// one). Harmless once every callback ran.
    pub fn cancel(&self) {
        // SAFETY: The set is live; `ane_glue_deps_cancel` only removes
        // callbacks `arm` added (none before `arm`, which the driver runs
        // under the same lock as this).
        unsafe { glue::ane_glue_deps_cancel(self.0.as_ptr()) };
    }
}

impl Drop for InFences {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the set is owned; no callback is
        // left registered (never armed, armed `Ready`, or the ready
        // function, which runs after the last callback, dropped it).
        unsafe { glue::ane_glue_deps_free(self.0.as_ptr()) };
    }
}

/// The out-fence error of a job status: 0 (DONE), `-ETIMEDOUT`, `-EIO`
/// (FAULT) or `-ECANCELED` (ABORTED, and anything else).
pub fn status_error(status: u32) -> c_int {
    use crate::hw::uapi::job_status;
    match status {
        job_status::DONE => 0,
        job_status::TIMEOUT => ETIMEDOUT,
        job_status::FAULT => EIO,
        _ => ECANCELED,
    }
}
