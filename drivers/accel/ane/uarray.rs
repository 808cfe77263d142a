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

/// Reads `count` (1..=`max`) elements of `elem` bytes at `addr` and returns
/// the first `ours` bytes of each, back to back; `EINVAL` for a bad count or
/// size, or nonzero bytes past `ours`.
pub(crate) fn read(
    addr: u64,
    count: usize,
    max: usize,
    elem: u32,
    ours: usize,
) -> Result<KVec<u8>> {
    let elem = elem as usize;
    if count == 0 || count > max || elem < ours || elem > MAX_ELEM {
        return Err(EINVAL);
    }
    let total = count.checked_mul(elem).ok_or(EINVAL)?;
    let mut raw = KVec::<u8>::with_capacity(total, GFP_KERNEL)?;
    UserSlice::new(UserPtr::from_addr(addr as usize), total)
        .reader()
        .read_all(&mut raw, GFP_KERNEL)?;
    let mut out = KVec::with_capacity(count * ours, GFP_KERNEL)?;
    for chunk in raw.chunks_exact(elem) {
        let (known, extra) = chunk.split_at(ours);
        if extra.iter().any(|b| *b != 0) {
            return Err(EINVAL);
        }
        out.extend_from_slice(known, GFP_KERNEL)?;
    }
    Ok(out)
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
