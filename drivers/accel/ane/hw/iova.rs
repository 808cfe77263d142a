// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Device-address (IOVA) allocation for a client's address space.
//!
//! First-fit allocation of aligned ranges inside an [`IovaWindow`], keeping a
//! guard gap of unmapped addresses after every range, so a DMA that runs past
//! the end of one buffer faults instead of reading its neighbour.
//!
//! The allocated ranges are the nodes of an AVL tree ordered by address.
//! Each node also records the free room in front of it (its `gap`: from the
//! end of the previous range's guard, or the window's first address, to its
//! start) and the largest such gap in its subtree, so the first gap large
//! enough is found by one descent. Allocation, free and lookup visit
//! O(log n) nodes: one client's many small buffers cannot make another's
//! allocation slow (kernel-2 N14; on H14 every client and the firmware
//! share one address space). The node storage is supplied by the user
//! through [`NodeStore`] (a `KVec` in the kernel, a `Vec` in host tests),
//! since this crate has no allocator; freed slots are reused.

use core::cell::Cell;

use super::soc::IovaWindow;

/// No node.
const NIL: u32 = u32::MAX;

/// One allocated range in the allocator's tree. Opaque to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    start: u64,
    size: u64,
    /// Free bytes before `start`, back to the previous range's guard end.
    gap: u64,
    /// The largest `gap` in this node's subtree.
    max_gap: u64,
    left: u32,
    right: u32,
    height: u32,
}

impl Default for Node {
    fn default() -> Self {
        Self {
            start: 0,
            size: 0,
            gap: 0,
            max_gap: 0,
            left: NIL,
            right: NIL,
            height: 0,
        }
    }
}

/// Storage of the allocator's nodes, addressed by slot number.
pub trait NodeStore {
    /// Error of a failed growth (out of memory).
    type Error;
    /// Number of slots.
    fn slots(&self) -> usize;
    /// Appends a slot holding `node`.
    fn push(&mut self, node: Node) -> Result<(), Self::Error>;
    /// The node in slot `i`.
    fn get(&self, i: usize) -> Option<&Node>;
    /// The node in slot `i`, to change.
    fn get_mut(&mut self, i: usize) -> Option<&mut Node>;
}

/// Why an allocation failed.
#[derive(Debug, PartialEq, Eq)]
pub enum AllocError<E> {
    /// Size zero, not a multiple of the alignment, or larger than the window.
    BadSize,
    /// No gap is large enough.
    NoSpace,
    /// The node store could not grow.
    Store(E),
}

/// An IOVA allocator over one window.
pub struct IovaAllocator<S: NodeStore> {
    window: IovaWindow,
    align: u64,
    guard: u64,
    /// The first address a range may start at.
    base: u64,
    used: u64,
    count: usize,
    root: u32,
    /// Free slots, chained through `left`.
    free_slots: u32,
    /// Nodes the last [`Self::alloc`] or [`Self::free`] visited.
    steps: Cell<u32>,
    store: S,
}

impl<S: NodeStore> IovaAllocator<S> {
    /// An allocator handing out `align`-aligned ranges (a power of two) of
    /// `window`, each followed by `guard` unused bytes (a multiple of
    /// `align`). Returns `None` for an invalid alignment or guard.
    pub fn new(window: IovaWindow, align: u64, guard: u64, store: S) -> Option<Self> {
        // `align` is a power of two from here on: masks replace divisions.
        if !align.is_power_of_two() || guard & (align - 1) != 0 || window.is_empty() {
            return None;
        }
        let mask = align - 1;
        let base = window.start.checked_add(mask)? & !mask;
        Some(Self {
            window,
            align,
            guard,
            base,
            used: 0,
            count: 0,
            root: NIL,
            free_slots: NIL,
            steps: Cell::new(0),
            store,
        })
    }

    /// Bytes currently allocated (guards not counted).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Number of live allocations.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Tree nodes the last allocation or free visited: O(log n) of
    /// [`Self::count`] (a figure for tests).
    pub fn last_steps(&self) -> u32 {
        self.steps.get()
    }

    fn nd(&self, i: u32) -> Node {
        if i == NIL {
            return Node::default();
        }
        self.steps.set(self.steps.get().saturating_add(1));
        self.store.get(i as usize).copied().unwrap_or_default()
    }

    fn put(&mut self, i: u32, n: Node) {
        if let Some(m) = self.store.get_mut(i as usize) {
            *m = n;
        }
    }

    /// Recomputes `i`'s height and largest gap from its children.
    fn fix(&mut self, i: u32) {
        let mut n = self.nd(i);
        let (l, r) = (self.nd(n.left), self.nd(n.right));
        n.height = 1 + l.height.max(r.height);
        n.max_gap = n.gap.max(l.max_gap).max(r.max_gap);
        self.put(i, n);
    }

    fn rotate_right(&mut self, y: u32) -> u32 {
        let mut yn = self.nd(y);
        let x = yn.left;
        let mut xn = self.nd(x);
        yn.left = xn.right;
        self.put(y, yn);
        self.fix(y);
        xn.right = y;
        self.put(x, xn);
        self.fix(x);
        x
    }

    fn rotate_left(&mut self, x: u32) -> u32 {
        let mut xn = self.nd(x);
        let y = xn.right;
        let mut yn = self.nd(y);
        xn.right = yn.left;
        self.put(x, xn);
        self.fix(x);
        yn.left = x;
        self.put(y, yn);
        self.fix(y);
        y
    }

    /// Fixes `i` and restores the AVL balance at it; the subtree's root.
    fn balance(&mut self, i: u32) -> u32 {
        self.fix(i);
        let n = self.nd(i);
        let (lh, rh) = (self.nd(n.left).height, self.nd(n.right).height);
        if lh > rh + 1 {
            let l = self.nd(n.left);
            if self.nd(l.right).height > self.nd(l.left).height {
                let nl = self.rotate_left(n.left);
                let mut m = self.nd(i);
                m.left = nl;
                self.put(i, m);
            }
            return self.rotate_right(i);
        }
        if rh > lh + 1 {
            let r = self.nd(n.right);
            if self.nd(r.left).height > self.nd(r.right).height {
                let nr = self.rotate_right(n.right);
                let mut m = self.nd(i);
                m.right = nr;
                self.put(i, m);
            }
            return self.rotate_left(i);
        }
        i
    }

    /// Inserts slot `new` (a leaf) under `at`; the subtree's new root.
    fn insert_at(&mut self, at: u32, new: u32, start: u64) -> u32 {
        if at == NIL {
            return new;
        }
        let mut n = self.nd(at);
        if start < n.start {
            n.left = self.insert_at(n.left, new, start);
        } else {
            n.right = self.insert_at(n.right, new, start);
        }
        self.put(at, n);
        self.balance(at)
    }

    /// Sets the gap of the node starting at `start` under `at`.
    fn set_gap(&mut self, at: u32, start: u64, gap: u64) {
        if at == NIL {
            return;
        }
        let mut n = self.nd(at);
        match start.cmp(&n.start) {
            core::cmp::Ordering::Less => self.set_gap(n.left, start, gap),
            core::cmp::Ordering::Greater => self.set_gap(n.right, start, gap),
            core::cmp::Ordering::Equal => {
                n.gap = gap;
                self.put(at, n);
            }
        }
        self.fix(at);
    }

    /// Unlinks the leftmost node under `at`: (the subtree's new root, the
    /// unlinked slot).
    fn remove_min(&mut self, at: u32) -> (u32, u32) {
        let mut n = self.nd(at);
        if n.left == NIL {
            return (n.right, at);
        }
        let (l, min) = self.remove_min(n.left);
        n.left = l;
        self.put(at, n);
        (self.balance(at), min)
    }

    /// Unlinks the node starting at `start` under `at`: (the subtree's new
    /// root, the unlinked slot or [`NIL`]).
    fn remove_at(&mut self, at: u32, start: u64) -> (u32, u32) {
        if at == NIL {
            return (NIL, NIL);
        }
        let mut n = self.nd(at);
        let gone;
        match start.cmp(&n.start) {
            core::cmp::Ordering::Less => {
                (n.left, gone) = self.remove_at(n.left, start);
            }
            core::cmp::Ordering::Greater => {
                (n.right, gone) = self.remove_at(n.right, start);
            }
            core::cmp::Ordering::Equal => {
                if n.left == NIL {
                    return (n.right, at);
                }
                if n.right == NIL {
                    return (n.left, at);
                }
                let (r, succ) = self.remove_min(n.right);
                let mut s = self.nd(succ);
                s.left = n.left;
                s.right = r;
                self.put(succ, s);
                return (self.balance(succ), at);
            }
        }
        self.put(at, n);
        (self.balance(at), gone)
    }

    /// The leftmost node whose gap is at least `need`.
    fn first_fit(&self, need: u64) -> Option<Node> {
        let mut at = self.root;
        loop {
            let n = self.nd(at);
            if at == NIL || n.max_gap < need {
                return None;
            }
            if self.nd(n.left).max_gap >= need {
                at = n.left;
            } else if n.gap >= need {
                return Some(n);
            } else {
                at = n.right;
            }
        }
    }

    /// The node starting at `start`.
    fn find(&self, start: u64) -> Option<Node> {
        let mut at = self.root;
        while at != NIL {
            let n = self.nd(at);
            match start.cmp(&n.start) {
                core::cmp::Ordering::Less => at = n.left,
                core::cmp::Ordering::Greater => at = n.right,
                core::cmp::Ordering::Equal => return Some(n),
            }
        }
        None
    }

    /// The first node starting after `start`.
    fn successor(&self, start: u64) -> Option<Node> {
        let (mut at, mut best) = (self.root, None);
        while at != NIL {
            let n = self.nd(at);
            if n.start > start {
                best = Some(n);
                at = n.left;
            } else {
                at = n.right;
            }
        }
        best
    }

    /// The last node.
    fn last(&self) -> Option<Node> {
        let (mut at, mut best) = (self.root, None);
        while at != NIL {
            let n = self.nd(at);
            best = Some(n);
            at = n.right;
        }
        best
    }

    /// A slot for a new node.
    fn take_slot(&mut self, node: Node) -> Result<u32, AllocError<S::Error>> {
        if self.free_slots != NIL {
            let i = self.free_slots;
            self.free_slots = self.nd(i).left;
            self.put(i, node);
            return Ok(i);
        }
        let i = u32::try_from(self.store.slots()).map_err(|_| AllocError::NoSpace)?;
        if i == NIL {
            return Err(AllocError::NoSpace);
        }
        self.store.push(node).map_err(AllocError::Store)?;
        Ok(i)
    }

    /// Allocates `size` bytes; returns the start address.
    pub fn alloc(&mut self, size: u64) -> Result<u64, AllocError<S::Error>> {
        self.steps.set(0);
        if size == 0 || size & (self.align - 1) != 0 || size > self.window.len() {
            return Err(AllocError::BadSize);
        }
        // The new range needs its own guard before the next range (or the
        // window end: a guard there costs nothing and keeps the rule
        // uniform).
        let need = size.checked_add(self.guard).ok_or(AllocError::NoSpace)?;
        // The first gap in front of a range that fits, else the room after
        // the last range.
        let (start, next) = match self.first_fit(need) {
            Some(n) => (n.start.saturating_sub(n.gap), Some(n)),
            None => {
                let tail = match self.last() {
                    Some(l) => l
                        .start
                        .checked_add(l.size)
                        .and_then(|e| e.checked_add(self.guard))
                        .ok_or(AllocError::NoSpace)?,
                    None => self.base,
                };
                match tail.checked_add(need) {
                    Some(end) if end <= self.window.end => (tail, None),
                    _ => return Err(AllocError::NoSpace),
                }
            }
        };
        let slot = self.take_slot(Node {
            start,
            size,
            gap: 0,
            max_gap: 0,
            left: NIL,
            right: NIL,
            height: 1,
        })?;
        self.root = self.insert_at(self.root, slot, start);
        if let Some(n) = next {
            self.set_gap(self.root, n.start, n.gap.saturating_sub(need));
        }
        self.used = self.used.saturating_add(size);
        self.count += 1;
        Ok(start)
    }

    /// Frees the allocation starting at `start`; returns its size, or `None`
    /// if no allocation starts there.
    pub fn free(&mut self, start: u64) -> Option<u64> {
        self.steps.set(0);
        let gone = self.find(start)?;
        let (root, slot) = self.remove_at(self.root, start);
        self.root = root;
        // The room of the freed range and its guard joins the next gap.
        if let Some(s) = self.successor(start) {
            let gap = s
                .gap
                .saturating_add(gone.gap)
                .saturating_add(gone.size)
                .saturating_add(self.guard);
            self.set_gap(self.root, s.start, gap);
        }
        if slot != NIL {
            let free = Node {
                left: self.free_slots,
                ..Node::default()
            };
            self.put(slot, free);
            self.free_slots = slot;
        }
        self.used = self.used.saturating_sub(gone.size);
        self.count = self.count.saturating_sub(1);
        Some(gone.size)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    struct VecStore(Vec<Node>);

    impl NodeStore for VecStore {
        type Error = ();
        fn slots(&self) -> usize {
            self.0.len()
        }
        fn push(&mut self, n: Node) -> Result<(), ()> {
            self.0.push(n);
            Ok(())
        }
        fn get(&self, i: usize) -> Option<&Node> {
            self.0.get(i)
        }
        fn get_mut(&mut self, i: usize) -> Option<&mut Node> {
            self.0.get_mut(i)
        }
    }

    const W: IovaWindow = IovaWindow {
        start: 0x4000,
        end: 0xe000_0000,
    };

    fn alloc16k() -> IovaAllocator<VecStore> {
        IovaAllocator::new(W, 0x4000, 0x4000, VecStore(Vec::new())).unwrap()
    }

    /// The ranges in address order, checking the tree's own invariants on
    /// the way: order, balance, the largest gap of each subtree, and each
    /// node's gap against its predecessor.
    fn ranges(a: &IovaAllocator<VecStore>) -> Vec<(u64, u64)> {
        fn walk(a: &IovaAllocator<VecStore>, i: u32, out: &mut Vec<Node>) -> (u32, u64) {
            if i == NIL {
                return (0, 0);
            }
            let n = a.store.0[i as usize];
            let (lh, lm) = walk(a, n.left, out);
            out.push(n);
            let (rh, rm) = walk(a, n.right, out);
            assert!(lh.abs_diff(rh) <= 1, "unbalanced at {:#x}", n.start);
            assert_eq!(n.height, 1 + lh.max(rh));
            assert_eq!(n.max_gap, n.gap.max(lm).max(rm));
            (n.height, n.max_gap)
        }
        let mut nodes = Vec::new();
        walk(a, a.root, &mut nodes);
        let mut prev_end = a.base;
        for n in &nodes {
            assert_eq!(n.gap, n.start - prev_end, "gap of {:#x}", n.start);
            prev_end = n.start + n.size + a.guard;
        }
        nodes.iter().map(|n| (n.start, n.size)).collect()
    }

    fn check_invariants(a: &IovaAllocator<VecStore>) {
        let mut prev_end: Option<u64> = None;
        let mut used = 0;
        let r = ranges(a);
        for &(s, sz) in &r {
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
        assert_eq!(r.len(), a.count());
    }

    /// First fit over a sorted list, as the allocator was before its tree:
    /// the reference every allocation is compared with.
    fn reference_alloc(live: &mut Vec<(u64, u64)>, size: u64, guard: u64) -> Option<u64> {
        let mut cursor = W.start;
        for i in 0..=live.len() {
            let next = live.get(i).map_or(W.end, |r| r.0);
            if cursor + size + guard <= next {
                live.insert(i, (cursor, size));
                return Some(cursor);
            }
            if let Some(&(s, sz)) = live.get(i) {
                cursor = s + sz + guard;
            }
        }
        None
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
        assert_eq!(a.alloc(all), Ok(0x4000));
    }

    #[test]
    fn random_alloc_free_matches_first_fit() {
        let mut a = alloc16k();
        let mut model: Vec<(u64, u64)> = Vec::new();
        let mut live: Vec<u64> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 3 != 0 || live.is_empty() {
                let size = ((x >> 8) % 64 + 1) * 0x4000 * if x % 17 == 0 { 4096 } else { 1 };
                let want = if size > W.len() {
                    None
                } else {
                    reference_alloc(&mut model, size, 0x4000)
                };
                match a.alloc(size) {
                    Ok(s) => {
                        assert_eq!(Some(s), want, "step {step}: size {size:#x}");
                        live.push(s);
                    }
                    Err(AllocError::NoSpace) => assert_eq!(want, None, "step {step}"),
                    Err(AllocError::BadSize) if size > W.len() => {}
                    Err(e) => panic!("{e:?} for {size:#x}"),
                }
            } else {
                let i = (x >> 20) as usize % live.len();
                let s = live.swap_remove(i);
                let pos = model.iter().position(|r| r.0 == s).unwrap();
                assert_eq!(a.free(s), Some(model.remove(pos).1));
            }
            if step % 1000 == 0 {
                check_invariants(&a);
                assert_eq!(ranges(&a), model);
            }
        }
        check_invariants(&a);
        assert_eq!(ranges(&a), model);
        assert_eq!(a.count(), live.len());
        // Freed slots are reused: the store never held more nodes than
        // were live at once plus what was freed and not yet reused.
        assert!(a.store.0.len() <= 20_000);
    }

    /// kernel-2 N14: one client's many small buffers (here 20000, each a
    /// page and its guard, every second one freed so the window is full of
    /// holes too small for a larger buffer) must not make the next
    /// allocation or free walk them all: each visits O(log n) nodes.
    #[test]
    fn work_per_call_is_logarithmic() {
        let mut a = alloc16k();
        let n = 20_000u64;
        let mut starts = Vec::new();
        for _ in 0..n {
            starts.push(a.alloc(0x4000).unwrap());
        }
        for s in starts.iter().step_by(2) {
            a.free(*s).unwrap();
            assert!(a.last_steps() <= 400, "free visited {}", a.last_steps());
        }
        // No hole fits two pages: the new range goes after the last one.
        let big = a.alloc(0x8000).unwrap();
        assert!(big > *starts.last().unwrap());
        assert!(a.last_steps() <= 400, "alloc visited {}", a.last_steps());
        // A page fits the first hole.
        assert_eq!(a.alloc(0x4000), Ok(starts[0]));
        assert!(a.last_steps() <= 400, "alloc visited {}", a.last_steps());
        check_invariants(&a);
    }
}
