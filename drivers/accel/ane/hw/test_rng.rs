// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The host tests' random numbers: xorshift64*, seeded per test so every
//! run sees the same inputs. One generator for the soft-float, TD and
//! firmware tests.

extern crate std;

use std::vec::Vec;

/// xorshift64* over the state `.0` (never 0).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The high 32 bits of [`Rng::next`].
    pub(crate) fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }

    /// The high 16 bits of [`Rng::next`].
    pub(crate) fn u16(&mut self) -> u16 {
        (self.next() >> 48) as u16
    }

    /// In `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An index in `0..n` (`n > 0`).
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// `n` random bytes (the low byte of each draw).
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}
