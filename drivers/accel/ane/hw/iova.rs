// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Device-address (IOVA) allocation for a client's address space.
//!
//! First-fit allocation of aligned ranges inside an [`IovaWindow`], keeping a
//! guard gap of unmapped addresses after every range, so a DMA that runs past
//! the end of one buffer faults instead of reading its neighbour. The
//! algorithm is shared; the storage of the allocated ranges is supplied by
//! the user through [`RangeStore`] (a `KVec` in the kernel, a `Vec` in host
//! tests), since this crate has no allocator.

use super::soc::IovaWindow;

/// Sorted storage of allocated `(start, size)` ranges.
pub trait RangeStore {
    /// Error of a failed insertion (out of memory).
    type Error;
    /// Number of ranges.
    fn len(&self) -> usize;
    /// Whether there is no range.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `i`-th range in address order.
    fn get(&self, i: usize) -> Option<(u64, u64)>;
    /// Inserts a range at position `i`, shifting later ones.
    fn insert(&mut self, i: usize, range: (u64, u64)) -> Result<(), Self::Error>;
    /// Removes and returns the `i`-th range.
    fn remove(&mut self, i: usize) -> Option<(u64, u64)>;
}

/// Why an allocation failed.
#[derive(Debug, PartialEq, Eq)]
pub enum AllocError<E> {
    /// Size zero, not a multiple of the alignment, or larger than the window.
    BadSize,
    /// No gap is large enough.
    NoSpace,
    /// The range store could not grow.
    Store(E),
}

/// An IOVA allocator over one window.
pub struct IovaAllocator<S: RangeStore> {
    window: IovaWindow,
    align: u64,
    guard: u64,
    used: u64,
    store: S,
}

impl<S: RangeStore> IovaAllocator<S> {
    /// An allocator handing out `align`-aligned ranges (a power of two) of
    /// `window`, each followed by `guard` unused bytes (a multiple of
    /// `align`). Returns `None` for an invalid alignment or guard.
    pub fn new(window: IovaWindow, align: u64, guard: u64, store: S) -> Option<Self> {
        // `align` is a power of two from here on: masks replace divisions.
        if !align.is_power_of_two() || guard & (align - 1) != 0 || window.is_empty() {
            return None;
        }
        Some(Self {
            window,
            align,
            guard,
            used: 0,
            store,
        })
    }

    /// Bytes currently allocated (guards not counted).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Number of live allocations.
    pub fn count(&self) -> usize {
        self.store.len()
    }

    fn align_up(&self, v: u64) -> Option<u64> {
        let mask = self.align - 1;
        v.checked_add(mask).map(|x| x & !mask)
    }

    /// Allocates `size` bytes; returns the start address.
    pub fn alloc(&mut self, size: u64) -> Result<u64, AllocError<S::Error>> {
        if size == 0 || size & (self.align - 1) != 0 || size > self.window.len() {
            return Err(AllocError::BadSize);
        }
        // Candidate start: the window start, or past the previous range and
        // its guard.
        let mut cursor = self
            .align_up(self.window.start)
            .ok_or(AllocError::NoSpace)?;
        let n = self.store.len();
        for i in 0..=n {
            let next_start = match self.store.get(i) {
                Some((s, _)) => s,
                None => self.window.end,
            };
            // The new range needs its own guard before the next range (or the
            // window end: a guard there costs nothing and keeps the rule
            // uniform).
            let need = size.checked_add(self.guard).ok_or(AllocError::NoSpace)?;
            if let Some(end) = cursor.checked_add(need) {
                if end <= next_start {
                    self.store
                        .insert(i, (cursor, size))
                        .map_err(AllocError::Store)?;
                    self.used = self.used.saturating_add(size);
                    return Ok(cursor);
                }
            }
            if let Some((s, sz)) = self.store.get(i) {
                let after = s
                    .checked_add(sz)
                    .and_then(|e| e.checked_add(self.guard))
                    .and_then(|e| self.align_up(e));
                cursor = match after {
                    Some(c) => c,
                    None => return Err(AllocError::NoSpace),
                };
            }
        }
        Err(AllocError::NoSpace)
    }

    /// Frees the allocation starting at `start`; returns its size, or `None`
    /// if no allocation starts there.
    pub fn free(&mut self, start: u64) -> Option<u64> {
        // Binary search over the sorted store.
        let (mut lo, mut hi) = (0usize, self.store.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (s, _) = self.store.get(mid)?;
            match s.cmp(&start) {
                core::cmp::Ordering::Equal => {
                    let (_, size) = self.store.remove(mid)?;
                    self.used = self.used.saturating_sub(size);
                    return Some(size);
                }
                core::cmp::Ordering::Less => lo = mid + 1,
                core::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    struct VecStore(Vec<(u64, u64)>);

    impl RangeStore for VecStore {
        type Error = ();
        fn len(&self) -> usize {
            self.0.len()
        }
        fn get(&self, i: usize) -> Option<(u64, u64)> {
            self.0.get(i).copied()
        }
        fn insert(&mut self, i: usize, r: (u64, u64)) -> Result<(), ()> {
            self.0.insert(i, r);
            Ok(())
        }
        fn remove(&mut self, i: usize) -> Option<(u64, u64)> {
            (i < self.0.len()).then(|| self.0.remove(i))
        }
    }

    const W: IovaWindow = IovaWindow {
        start: 0x4000,
        end: 0xe000_0000,
    };

    fn alloc16k() -> IovaAllocator<VecStore> {
        IovaAllocator::new(W, 0x4000, 0x4000, VecStore(Vec::new())).unwrap()
    }

    fn check_invariants(a: &IovaAllocator<VecStore>) {
        let mut prev_end: Option<u64> = None;
        let mut used = 0;
        for &(s, sz) in &a.store.0 {
            assert!(
                s >= W.start && s + sz + a.guard <= W.end,
                "{s:#x}+{sz:#x} outside"
            );
            assert_eq!(s % a.align, 0);
            if let Some(pe) = prev_end {
                assert!(s >= pe + a.guard, "guard gap violated at {s:#x}");
            }
            prev_end = Some(s + sz);
            used += sz;
        }
        assert_eq!(used, a.used());
    }

    #[test]
    fn first_allocations_are_packed_with_guards() {
        let mut a = alloc16k();
        assert_eq!(a.alloc(0x4000), Ok(0x4000));
        assert_eq!(a.alloc(0x8000), Ok(0xc000));
        assert_eq!(a.alloc(0x4000), Ok(0x18000));
        check_invariants(&a);
        assert_eq!(a.free(0xc000), Some(0x8000));
        // The hole is reused, first fit.
        assert_eq!(a.alloc(0x4000), Ok(0xc000));
        check_invariants(&a);
    }

    #[test]
    fn rejects_bad_sizes_and_params() {
        let mut a = alloc16k();
        assert_eq!(a.alloc(0), Err(AllocError::BadSize));
        assert_eq!(a.alloc(0x1000), Err(AllocError::BadSize));
        assert_eq!(a.alloc(!0x3fff), Err(AllocError::BadSize));
        assert!(IovaAllocator::new(W, 0x3000, 0, VecStore(Vec::new())).is_none());
        assert!(IovaAllocator::new(W, 0x4000, 0x1000, VecStore(Vec::new())).is_none());
        assert_eq!(a.free(0x4000), None);
    }

    #[test]
    fn fills_the_window_exactly() {
        let mut a = alloc16k();
        // The whole window minus one guard fits once; then nothing does.
        let all = W.len() - 0x4000;
        assert_eq!(a.alloc(all), Ok(0x4000));
        assert_eq!(a.alloc(0x4000), Err(AllocError::NoSpace));
        assert_eq!(a.free(0x4000), Some(all));
        assert_eq!(a.alloc(all + 0x4000), Err(AllocError::NoSpace));
    }

    #[test]
    fn random_alloc_free_keeps_invariants() {
        let mut a = alloc16k();
        let mut live: Vec<u64> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 3 != 0 || live.is_empty() {
                let size = ((x >> 8) % 64 + 1) * 0x4000 * if x % 17 == 0 { 4096 } else { 1 };
                match a.alloc(size) {
                    Ok(s) => live.push(s),
                    Err(AllocError::NoSpace) => {}
                    Err(AllocError::BadSize) if size > W.len() => {}
                    Err(e) => panic!("{e:?} for {size:#x}"),
                }
            } else {
                let i = (x >> 20) as usize % live.len();
                let s = live.swap_remove(i);
                assert!(a.free(s).is_some());
            }
        }
        check_invariants(&a);
        assert_eq!(a.count(), live.len());
    }
}
