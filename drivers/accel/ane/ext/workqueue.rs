// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A workqueue the driver owns (the kernel crate can use one, but not
//! create one, in 7.1–7.3).
//!
//! The engine's worker runs on it rather than on a system workqueue so that
//! unbind can drain it: [`OwnedQueue::destroy`] returns only once no work
//! item of the queue runs, so no module code runs after the device is gone.

use core::ptr::NonNull;

use kernel::{bindings, prelude::*, workqueue::Queue};

use super::glue;

/// An ordered, high-priority workqueue, destroyed by [`OwnedQueue::destroy`]
/// or on drop.
pub struct OwnedQueue(NonNull<bindings::workqueue_struct>);

// SAFETY: A workqueue may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: Queueing work is thread-safe.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates the queue.
    pub fn new() -> Result<Self> {
        // SAFETY: No preconditions.
        let raw = unsafe { glue::ane_glue_wq_alloc() };
        NonNull::new(raw).map(Self).ok_or(ENOMEM)
    }

    /// The queue, for queueing work.
    pub fn queue(&self) -> &Queue {
        // SAFETY: The pointer stays a live workqueue while `self` exists,
        // and the returned borrow cannot outlive `self`.
        unsafe { Queue::from_raw(self.0.as_ptr()) }
    }

    /// The raw queue, for the C glue (`ext::fence`).
    pub(crate) fn as_raw(&self) -> *mut bindings::workqueue_struct {
        self.0.as_ptr()
    }

    /// Drains and destroys the queue. Must not be called from one of its
    /// own work items.
    pub fn destroy(self) {
        drop(self);
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: Allocated by `new` and not destroyed yet; `destroy_workqueue`
        // drains it first.
        unsafe { glue::ane_glue_wq_destroy(self.0.as_ptr()) };
    }
}
