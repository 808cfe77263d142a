// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Bounds-checked little-endian field access on byte slices.
//!
//! Every reader returns `None` and every writer returns `None` (writing
//! nothing) when the field does not lie entirely inside the slice, so wire
//! formats can be decoded from untrusted bytes without a panicking path.

/// The `N` bytes at `off`, if they are inside `b`.
pub(crate) fn array_at<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    let end = off.checked_add(N)?;
    <[u8; N]>::try_from(b.get(off..end)?).ok()
}

/// The little-endian `u16` at `off`.
pub(crate) fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    array_at(b, off).map(u16::from_le_bytes)
}

/// The little-endian `u32` at `off`.
pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    array_at(b, off).map(u32::from_le_bytes)
}

/// The little-endian `u64` at `off`.
pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    array_at(b, off).map(u64::from_le_bytes)
}

/// Copies `src` into `b` at `off`.
pub(crate) fn put(b: &mut [u8], off: usize, src: &[u8]) -> Option<()> {
    let end = off.checked_add(src.len())?;
    b.get_mut(off..end)?.copy_from_slice(src);
    Some(())
}

/// Writes a little-endian `u16` at `off`.
pub(crate) fn put_u16(b: &mut [u8], off: usize, v: u16) -> Option<()> {
    put(b, off, &v.to_le_bytes())
}

/// Writes a little-endian `u32` at `off`.
pub(crate) fn put_u32(b: &mut [u8], off: usize, v: u32) -> Option<()> {
    put(b, off, &v.to_le_bytes())
}

/// Writes a little-endian `u64` at `off`.
pub(crate) fn put_u64(b: &mut [u8], off: usize, v: u64) -> Option<()> {
    put(b, off, &v.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        let mut b = [0u8; 8];
        assert_eq!(put_u32(&mut b, 4, 0x1122_3344), Some(()));
        assert_eq!(u32_at(&b, 4), Some(0x1122_3344));
        assert_eq!(u16_at(&b, 6), Some(0x1122));
        assert_eq!(u64_at(&b, 0), Some(0x1122_3344_0000_0000));
        assert_eq!(u32_at(&b, 5), None);
        assert_eq!(u64_at(&b, usize::MAX), None);
        assert_eq!(put_u64(&mut b, 1, 0), None);
        assert_eq!(
            b,
            [0, 0, 0, 0, 0x44, 0x33, 0x22, 0x11],
            "failed write left it"
        );
        assert_eq!(put_u16(&mut b, usize::MAX - 1, 0), None);
    }
}
