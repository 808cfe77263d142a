// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Arrays of structs that ioctls pass by user pointer (EXEC's bindings,
//! PROGRAM_CREATE's sections).
//!
//! Userspace states its element size, so a newer userspace can pass a larger
//! struct: the kernel reads the fields it knows and requires the rest of
//! each element to be zero (unknown fields unused), and refuses elements
//! smaller than its own.

use kernel::{
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// Largest element size accepted.
const MAX_ELEM: usize = 4096;

/// Largest known part of an element (`ours`).
const MAX_OURS: usize = 64;

/// Reads `count` (1..=`max`) elements of `elem` bytes at `addr` straight
/// from user memory (no copy of the whole array), handing the first `ours`
/// bytes of each to `each`, in order; `EINVAL` for a bad count or size, or
/// nonzero bytes past `ours`; `EFAULT` for memory that cannot be read.
pub(crate) fn read_each(
    addr: u64,
    count: usize,
    max: usize,
    elem: u32,
    ours: usize,
    mut each: impl FnMut(&[u8]) -> Result,
) -> Result {
    let elem = elem as usize;
    if count == 0 || count > max || elem < ours || elem > MAX_ELEM || ours > MAX_OURS {
        return Err(EINVAL);
    }
    let total = count.checked_mul(elem).ok_or(EINVAL)?;
    let mut r = UserSlice::new(UserPtr::from_addr(addr as usize), total).reader();
    let mut known = [0u8; MAX_OURS];
    let mut extra = [0u8; 64];
    for _ in 0..count {
        let k = known.get_mut(..ours).ok_or(EINVAL)?;
        r.read_slice(k)?;
        let mut left = elem - ours;
        while left > 0 {
            let e = extra.get_mut(..left.min(64)).ok_or(EINVAL)?;
            r.read_slice(e)?;
            if e.iter().any(|b| *b != 0) {
                return Err(EINVAL);
            }
            left -= e.len();
        }
        each(known.get(..ours).ok_or(EINVAL)?)?;
    }
    Ok(())
}

/// The native-endian `u32` at byte `o` of `b`.
pub(crate) fn u32_at(b: &[u8], o: usize) -> Result<u32> {
    let w = b.get(o..o + 4).ok_or(EINVAL)?;
    Ok(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
}

/// The native-endian `u64` at byte `o` of `b`.
pub(crate) fn u64_at(b: &[u8], o: usize) -> Result<u64> {
    let w = b.get(o..o + 8).ok_or(EINVAL)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(w);
    Ok(u64::from_ne_bytes(a))
}
