// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! NCHW fp16 tensors in the ANE's strided memory layout.
//!
//! The engine's tile DMA reads and writes tensors as N·C planes of H rows,
//! where every row and every plane starts on a 64-byte boundary and a whole
//! buffer is a multiple of 16 KiB (facts: `shared/reference/td.md` §1.6 and
//! §4.1, `eiln.md` §7.3; the same numbers are what the compiler records in
//! every HWX fixture's tensor descriptors):
//!
//! - row stride `= round_up(W·2, 64)` bytes,
//! - plane stride `= round_up(row_stride·H, 64)` bytes,
//! - element `(n, c, h, w)` lives at byte `(n·C + c)·plane_stride +
//!   h·row_stride + 2·w`,
//! - buffer size `= round_up(N·C·plane_stride, 16 KiB)`.
//!
//! The 16 KiB granule is a property of the ANE's buffers (what `.anec`
//! headers count in and what the compiler rounds buffers to), not the host's
//! page size; nothing here depends on the page size.
//!
//! [`Shape`] is a validated shape; [`Layout`] its strides and sizes;
//! [`tile`] / [`untile`] (and the byte versions) convert between a dense
//! NCHW array and the strided layout: one copy when the layout has no
//! padding, else one copy per row (short rows in fixed 32-byte blocks, on
//! x86-64 with AVX2 when the CPU has it). `cargo bench -p ane` measures
//! them against `memcpy` of the same bytes.

use std::fmt;

use half::f16;
use serde::Serialize;

/// Bytes per element: the layout here is for fp16 (and other 16-bit) data.
pub const ELEMENT_BYTES: usize = 2;
/// Rows start on multiples of this many bytes.
pub const ROW_ALIGN: usize = 64;
/// Planes start on multiples of this many bytes.
pub const PLANE_ALIGN: usize = 64;
/// ANE buffers are whole multiples of this many bytes (16 KiB).
pub const BUFFER_GRANULE: usize = 16 * 1024;

/// One of the four NCHW dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Dim {
    /// Batch.
    N,
    /// Channels.
    C,
    /// Height (rows).
    H,
    /// Width (elements per row).
    W,
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dim::N => "N",
            Dim::C => "C",
            Dim::H => "H",
            Dim::W => "W",
        })
    }
}

/// Why a shape is not a valid ANE tensor shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// A dimension is zero.
    #[error("tensor dimension {dim} is 0; every dimension must be at least 1")]
    Zero {
        /// The dimension that is zero.
        dim: Dim,
    },
    /// A size or stride derived from the shape does not fit in the
    /// address space.
    #[error("tensor dimension {dim} = {value} makes the {quantity} overflow")]
    Overflow {
        /// The dimension whose multiplication overflowed.
        dim: Dim,
        /// Its value.
        value: u64,
        /// Which derived quantity overflowed.
        quantity: &'static str,
    },
}

/// A validated NCHW shape: every dimension is at least 1 and every size and
/// stride of its [`Layout`] fits in `usize` (and in `u64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Shape {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
}

fn round_up(value: usize, align: usize) -> Option<usize> {
    // `align` is always a non-zero constant power of two here.
    value.checked_add(align - 1).map(|v| v & !(align - 1))
}

impl Shape {
    /// Validates and returns the shape `(n, c, h, w)`.
    pub fn new(n: usize, c: usize, h: usize, w: usize) -> Result<Shape, ShapeError> {
        for (dim, value) in [(Dim::N, n), (Dim::C, c), (Dim::H, h), (Dim::W, w)] {
            if value == 0 {
                return Err(ShapeError::Zero { dim });
            }
        }
        let shape = Shape { n, c, h, w };
        shape.checked_layout()?;
        Ok(shape)
    }

    /// Like [`Shape::new`] for dimensions given as `u64` (as file headers
    /// store them).
    pub fn from_u64(n: u64, c: u64, h: u64, w: u64) -> Result<Shape, ShapeError> {
        let conv = |dim, value: u64| {
            usize::try_from(value).map_err(|_| ShapeError::Overflow {
                dim,
                value,
                quantity: "dimension itself",
            })
        };
        Shape::new(
            conv(Dim::N, n)?,
            conv(Dim::C, c)?,
            conv(Dim::H, h)?,
            conv(Dim::W, w)?,
        )
    }

    fn checked_layout(&self) -> Result<Layout, ShapeError> {
        let over = |dim, value: usize, quantity| ShapeError::Overflow {
            dim,
            value: value as u64,
            quantity,
        };
        let row_stride = self
            .w
            .checked_mul(ELEMENT_BYTES)
            .and_then(|b| round_up(b, ROW_ALIGN))
            .ok_or(over(Dim::W, self.w, "row stride"))?;
        let plane_stride = row_stride
            .checked_mul(self.h)
            .and_then(|b| round_up(b, PLANE_ALIGN))
            .ok_or(over(Dim::H, self.h, "plane stride"))?;
        let batch_stride =
            plane_stride
                .checked_mul(self.c)
                .ok_or(over(Dim::C, self.c, "batch stride"))?;
        let tiled_bytes =
            batch_stride
                .checked_mul(self.n)
                .ok_or(over(Dim::N, self.n, "tiled size"))?;
        let buffer_size =
            round_up(tiled_bytes, BUFFER_GRANULE).ok_or(over(Dim::N, self.n, "buffer size"))?;
        // The dense array: N·C·H·W elements of 2 bytes. It is never larger
        // than the tiled one, but check rather than argue.
        let elements = self
            .n
            .checked_mul(self.c)
            .and_then(|v| v.checked_mul(self.h))
            .and_then(|v| v.checked_mul(self.w))
            .ok_or(over(Dim::W, self.w, "element count"))?;
        let dense_bytes =
            elements
                .checked_mul(ELEMENT_BYTES)
                .ok_or(over(Dim::W, self.w, "dense size"))?;
        if u64::try_from(buffer_size).is_err() {
            return Err(over(Dim::N, self.n, "buffer size"));
        }
        Ok(Layout {
            shape: *self,
            row_stride,
            plane_stride,
            batch_stride,
            tiled_bytes,
            buffer_size,
            elements,
            dense_bytes,
        })
    }

    /// Batch.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Channels.
    pub fn c(&self) -> usize {
        self.c
    }
    /// Height.
    pub fn h(&self) -> usize {
        self.h
    }
    /// Width.
    pub fn w(&self) -> usize {
        self.w
    }
    /// `[N, C, H, W]`.
    pub fn dims(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    /// N·C·H·W.
    pub fn elements(&self) -> usize {
        self.layout().elements
    }

    /// The ANE layout of this shape.
    pub fn layout(&self) -> Layout {
        // `new` proved that every quantity fits, so this never fails; the
        // fallback keeps the function total without a panic path.
        self.checked_layout().unwrap_or(Layout {
            shape: *self,
            row_stride: 0,
            plane_stride: 0,
            batch_stride: 0,
            tiled_bytes: 0,
            buffer_size: 0,
            elements: 0,
            dense_bytes: 0,
        })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(N={}, C={}, H={}, W={})",
            self.n, self.c, self.h, self.w
        )
    }
}

/// Strides and sizes of a [`Shape`] in the ANE layout, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Layout {
    shape: Shape,
    row_stride: usize,
    plane_stride: usize,
    batch_stride: usize,
    tiled_bytes: usize,
    buffer_size: usize,
    elements: usize,
    dense_bytes: usize,
}

impl Layout {
    /// The shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }
    /// Bytes from one row to the next: `round_up(W·2, 64)`.
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }
    /// Bytes from one channel plane to the next: `round_up(row_stride·H, 64)`.
    pub fn plane_stride(&self) -> usize {
        self.plane_stride
    }
    /// Bytes from one batch item to the next: `C·plane_stride`.
    pub fn batch_stride(&self) -> usize {
        self.batch_stride
    }
    /// Bytes the tiled data spans, padding included: `N·C·plane_stride`.
    pub fn tiled_bytes(&self) -> usize {
        self.tiled_bytes
    }
    /// The buffer size the ANE uses: `round_up(N·C·plane_stride, 16 KiB)`.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }
    /// [`Layout::buffer_size`] in 16 KiB units (what `.anec` `tiles[]` holds).
    pub fn buffer_granules(&self) -> usize {
        self.buffer_size / BUFFER_GRANULE
    }
    /// Bytes of the dense NCHW array: `N·C·H·W·2`.
    pub fn dense_bytes(&self) -> usize {
        self.dense_bytes
    }
    /// True when the tiled layout has no padding between rows or planes, so
    /// tiling is a single copy.
    pub fn is_dense(&self) -> bool {
        self.tiled_bytes == self.dense_bytes
    }
    /// Byte offset of element `(n, c, h, w)` in the tiled buffer, or `None`
    /// when an index is out of range.
    pub fn offset(&self, n: usize, c: usize, h: usize, w: usize) -> Option<usize> {
        let s = self.shape;
        if n >= s.n || c >= s.c || h >= s.h || w >= s.w {
            return None;
        }
        // In range, so every term is below `tiled_bytes`, which fits.
        Some(
            n * self.batch_stride + c * self.plane_stride + h * self.row_stride + w * ELEMENT_BYTES,
        )
    }
}

/// Errors of tiling and untiling.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// The dense array does not hold exactly N·C·H·W elements.
    #[error("dense buffer holds {found} {unit}, the shape {shape} needs exactly {expected}")]
    DenseLength {
        /// The shape.
        shape: Shape,
        /// Required length.
        expected: usize,
        /// Actual length.
        found: usize,
        /// "elements" or "bytes".
        unit: &'static str,
    },
    /// The tiled buffer is shorter than N·C·plane_stride.
    #[error("tiled buffer holds {found} {unit}, the shape {shape} needs at least {needed}")]
    TiledTooShort {
        /// The shape.
        shape: Shape,
        /// Minimum length.
        needed: usize,
        /// Actual length.
        found: usize,
        /// "elements" or "bytes".
        unit: &'static str,
    },
}

mod sealed {
    use half::slice::HalfFloatSliceExt;

    /// Seals [`Element`](super::Element), and gives the copy kernels every
    /// element type as its bits: one `u16` build of the kernels serves all
    /// (an `f16` build measured up to 10 % slower on padded rows).
    pub trait Sealed: Sized {
        fn bits(s: &[Self]) -> &[u16];
        fn bits_mut(s: &mut [Self]) -> &mut [u16];
    }

    impl Sealed for u16 {
        fn bits(s: &[u16]) -> &[u16] {
            s
        }
        fn bits_mut(s: &mut [u16]) -> &mut [u16] {
            s
        }
    }

    impl Sealed for half::f16 {
        fn bits(s: &[half::f16]) -> &[u16] {
            s.reinterpret_cast()
        }
        fn bits_mut(s: &mut [half::f16]) -> &mut [u16] {
            s.reinterpret_cast_mut()
        }
    }
}

/// A 16-bit element type the tiling functions accept (`u16` raw bits or
/// [`half::f16`]).
pub trait Element: Copy + sealed::Sealed {
    /// The all-zero-bits value written into padding.
    const ZERO: Self;
}

impl Element for u16 {
    const ZERO: Self = 0;
}

impl Element for f16 {
    const ZERO: Self = f16::from_bits(0);
}

/// The geometry of one copy, in units of the slice element.
struct Geometry {
    planes: usize,
    rows: usize,
    row: usize,
    row_stride: usize,
    plane_stride: usize,
}

impl Geometry {
    fn new(layout: &Layout, unit: usize) -> Geometry {
        let s = layout.shape;
        Geometry {
            planes: s.n * s.c,
            rows: s.h,
            row: s.w * ELEMENT_BYTES / unit,
            row_stride: layout.row_stride / unit,
            plane_stride: layout.plane_stride / unit,
        }
    }
}

/// Copies `s` into `d` (equal lengths, at least one 32-byte block) in
/// fixed 32-byte blocks, the last one overlapping the one before so the
/// copy ends exactly at the row's end: constant-size copies compile to
/// plain vector moves, where a copy of the row's own length is a `memcpy`
/// call per row, which dominates short rows.
#[inline(always)]
fn copy_blocks<T: Copy>(d: &mut [T], s: &[T]) {
    let block = 32 / std::mem::size_of::<T>();
    let n = d.len();
    let mut o = 0;
    while o + block <= n {
        d[o..o + block].copy_from_slice(&s[o..o + block]);
        o += block;
    }
    if o < n {
        let o = n - block;
        d[o..n].copy_from_slice(&s[o..n]);
    }
}

/// Whether rows of `row` elements of `T` are copied in blocks (see
/// [`copy_blocks`]).
fn is_short_row<T>(row: usize) -> bool {
    (32..=SHORT_ROW_BYTES).contains(&(row * std::mem::size_of::<T>()))
}

/// Writes rows of `row` elements from `dense` into consecutive strides of
/// `row_stride` elements of `tiled`, zeroing each row's padding. The choice
/// of row copy is made once, outside the loop, so the loop body is only
/// the copy.
#[inline(always)]
fn tile_row_pass<T: Copy>(row: usize, row_stride: usize, dense: &[T], tiled: &mut [T], zero: T) {
    let pairs = dense
        .chunks_exact(row)
        .zip(tiled.chunks_exact_mut(row_stride));
    if is_short_row::<T>(row) {
        if (row_stride - row) * std::mem::size_of::<T>() <= ROW_ALIGN / 2 {
            // Padding of at most 32 bytes: one 32-byte store clears it.
            for (s, d) in pairs {
                zero_row_tail_n::<T, { ROW_ALIGN / 2 }>(d, zero);
                copy_blocks(&mut d[..row], s);
            }
        } else {
            for (s, d) in pairs {
                zero_row_tail(d, zero);
                copy_blocks(&mut d[..row], s);
            }
        }
    } else {
        for (s, d) in pairs {
            zero_row_tail(d, zero);
            d[..row].copy_from_slice(s);
        }
    }
}

/// The inverse of [`tile_row_pass`]: gathers rows, skips padding.
#[inline(always)]
fn untile_row_pass<T: Copy>(row: usize, row_stride: usize, tiled: &[T], dense: &mut [T]) {
    let pairs = dense
        .chunks_exact_mut(row)
        .zip(tiled.chunks_exact(row_stride));
    if is_short_row::<T>(row) {
        for (d, s) in pairs {
            copy_blocks(d, &s[..row]);
        }
    } else {
        for (d, s) in pairs {
            d.copy_from_slice(&s[..row]);
        }
    }
}

/// Zeroes the last 64 bytes of the strided row `d`, ahead of the row's data
/// being copied over its start. Row padding is shorter than 64 bytes and a
/// row stride at least 64 bytes, so this covers the padding with one
/// fixed-size store, where a fill of the padding's own length is a `memset`
/// call per row.
#[inline(always)]
fn zero_row_tail<T: Copy>(d: &mut [T], zero: T) {
    zero_row_tail_n::<T, ROW_ALIGN>(d, zero)
}

/// Zeroes the last `BYTES` bytes of `d` (all of `d` if it is shorter)
/// with one store of that fixed size.
#[inline(always)]
fn zero_row_tail_n<T: Copy, const BYTES: usize>(d: &mut [T], zero: T) {
    let block = BYTES / std::mem::size_of::<T>();
    let start = d.len().saturating_sub(block);
    match d.get_mut(start..start + block) {
        Some(tail) => tail.fill(zero),
        None => d.fill(zero),
    }
}

/// Copies dense rows into the strided layout and zeroes every padding
/// element. `dense.len() == planes·rows·row` and
/// `tiled.len() == planes·plane_stride` are established by the caller.
///
/// Always inlined, so that [`tile_rows`] can compile it a second time with
/// wider vectors.
#[inline(always)]
fn tile_impl<T: Copy>(g: &Geometry, dense: &[T], tiled: &mut [T], zero: T) {
    let plane_len = g.rows * g.row;
    if g.row == g.row_stride && plane_len == g.plane_stride {
        tiled.copy_from_slice(dense);
        return;
    }
    if g.row * 4 <= g.row_stride {
        // Mostly padding (rows of at most a quarter of the stride): one
        // bulk zero fill, then scatter the rows.
        tiled.fill(zero);
        for (src, dst) in dense
            .chunks_exact(plane_len)
            .zip(tiled.chunks_exact_mut(g.plane_stride))
        {
            for (s, d) in src
                .chunks_exact(g.row)
                .zip(dst.chunks_exact_mut(g.row_stride))
            {
                d[..g.row].copy_from_slice(s);
            }
        }
        return;
    }
    if g.row != g.row_stride && g.plane_stride == g.rows * g.row_stride {
        // Planes add no padding of their own (row strides are 64-byte
        // multiples): one pass over all rows.
        tile_row_pass(g.row, g.row_stride, dense, tiled, zero);
        return;
    }
    for (src, dst) in dense
        .chunks_exact(plane_len)
        .zip(tiled.chunks_exact_mut(g.plane_stride))
    {
        let (rows, tail) = dst.split_at_mut(g.rows * g.row_stride);
        if g.row == g.row_stride {
            rows.copy_from_slice(src);
        } else {
            tile_row_pass(g.row, g.row_stride, src, rows, zero);
        }
        tail.fill(zero);
    }
}

/// Rows up to this many bytes are copied in fixed blocks ([`copy_blocks`]):
/// for them a `memcpy` call per row costs more than the copy itself.
const SHORT_ROW_BYTES: usize = 512;

/// The inverse of [`tile_impl`]: gathers the data rows, ignores padding.
#[inline(always)]
fn untile_impl<T: Copy>(g: &Geometry, tiled: &[T], dense: &mut [T]) {
    let plane_len = g.rows * g.row;
    if g.row == g.row_stride && plane_len == g.plane_stride {
        dense.copy_from_slice(tiled);
        return;
    }
    if g.row != g.row_stride && g.plane_stride == g.rows * g.row_stride {
        untile_row_pass(g.row, g.row_stride, tiled, dense);
        return;
    }

    for (dst, src) in dense
        .chunks_exact_mut(plane_len)
        .zip(tiled.chunks_exact(g.plane_stride))
    {
        let rows = &src[..g.rows * g.row_stride];
        if g.row == g.row_stride {
            dst.copy_from_slice(rows);
        } else {
            untile_row_pass(g.row, g.row_stride, rows, dst);
        }
    }
}

/// Runs [`tile_impl`] with the widest vectors the CPU has.
///
/// The fixed 32-byte blocks of [`copy_blocks`] are two 16-byte moves on the
/// x86-64 baseline (SSE2), while the C library's `memcpy` picks AVX2 or
/// string moves at run time; a row kernel limited to SSE2 spends twice the
/// stores per short row. Measured on a Zen 4 for 154-byte rows: tile 0.6×
/// and untile 0.67× `memcpy` with SSE2, both 0.8× with AVX2, which is the
/// share of the tiled rows that is data. On AArch64 the baseline (NEON) is
/// already what `memcpy` uses.
fn tile_rows<T: Copy>(g: &Geometry, dense: &[T], tiled: &mut [T], zero: T) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked above), the only
        // requirement of `tile_avx2`.
        unsafe { tile_avx2(g, dense, tiled, zero) };
        return;
    }
    tile_impl(g, dense, tiled, zero);
}

/// Runs [`untile_impl`] with the widest vectors the CPU has (see
/// [`tile_rows`]).
fn untile_rows<T: Copy>(g: &Geometry, tiled: &[T], dense: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: as in `tile_rows`.
        unsafe { untile_avx2(g, tiled, dense) };
        return;
    }
    untile_impl(g, tiled, dense);
}

/// [`tile_impl`] compiled with AVX2.
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn tile_avx2<T: Copy>(g: &Geometry, dense: &[T], tiled: &mut [T], zero: T) {
    tile_impl(g, dense, tiled, zero);
}

/// [`untile_impl`] compiled with AVX2.
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn untile_avx2<T: Copy>(g: &Geometry, tiled: &[T], dense: &mut [T]) {
    untile_impl(g, tiled, dense);
}

fn check_lengths(
    layout: &Layout,
    dense_len: usize,
    tiled_len: usize,
    unit: usize,
) -> Result<(), TensorError> {
    let unit_name = if unit == 1 { "bytes" } else { "elements" };
    let expected = layout.dense_bytes / unit;
    if dense_len != expected {
        return Err(TensorError::DenseLength {
            shape: layout.shape,
            expected,
            found: dense_len,
            unit: unit_name,
        });
    }
    let needed = layout.tiled_bytes / unit;
    if tiled_len < needed {
        return Err(TensorError::TiledTooShort {
            shape: layout.shape,
            needed,
            found: tiled_len,
            unit: unit_name,
        });
    }
    Ok(())
}

/// Writes the dense NCHW array `dense` into `tiled` in the ANE layout.
///
/// Exactly the first [`Layout::tiled_bytes`]`/2` elements of `tiled` are
/// written: data, and zero in every row and plane padding. Elements after
/// them (the rest of a 16 KiB-rounded buffer) are left untouched.
pub fn tile<T: Element>(shape: &Shape, dense: &[T], tiled: &mut [T]) -> Result<(), TensorError> {
    let layout = shape.layout();
    check_lengths(&layout, dense.len(), tiled.len(), ELEMENT_BYTES)?;
    let g = Geometry::new(&layout, ELEMENT_BYTES);
    let tiled = &mut T::bits_mut(tiled)[..g.planes * g.plane_stride];
    tile_rows(&g, T::bits(dense), tiled, 0);
    Ok(())
}

/// Reads the dense NCHW array out of the ANE-layout buffer `tiled`
/// (padding is ignored).
pub fn untile<T: Element>(shape: &Shape, tiled: &[T], dense: &mut [T]) -> Result<(), TensorError> {
    let layout = shape.layout();
    check_lengths(&layout, dense.len(), tiled.len(), ELEMENT_BYTES)?;
    let g = Geometry::new(&layout, ELEMENT_BYTES);
    let tiled = &T::bits(tiled)[..g.planes * g.plane_stride];
    untile_rows(&g, tiled, T::bits_mut(dense));
    Ok(())
}

/// [`tile`] on bytes: `dense` is the NCHW array as little-endian 16-bit
/// values (`N·C·H·W·2` bytes), `tiled` e.g. a mapped device buffer.
pub fn tile_bytes(shape: &Shape, dense: &[u8], tiled: &mut [u8]) -> Result<(), TensorError> {
    let layout = shape.layout();
    check_lengths(&layout, dense.len(), tiled.len(), 1)?;
    let g = Geometry::new(&layout, 1);
    tile_rows(&g, dense, &mut tiled[..g.planes * g.plane_stride], 0);
    Ok(())
}

/// [`untile`] on bytes.
pub fn untile_bytes(shape: &Shape, tiled: &[u8], dense: &mut [u8]) -> Result<(), TensorError> {
    let layout = shape.layout();
    check_lengths(&layout, dense.len(), tiled.len(), 1)?;
    let g = Geometry::new(&layout, 1);
    untile_rows(&g, &tiled[..g.planes * g.plane_stride], dense);
    Ok(())
}

/// `x` as little-endian bytes, the form [`tile_bytes`] takes.
pub(crate) fn f16_to_le_bytes(x: &[f16]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect()
}

/// Little-endian bytes (an even number, as [`untile_bytes`] writes) as
/// fp16 values.
pub(crate) fn f16_from_le_bytes(b: &[u8]) -> Vec<f16> {
    debug_assert!(b.len() % 2 == 0);
    b.chunks_exact(2)
        .map(|p| f16::from_bits(u16::from_le_bytes([p[0], p[1]])))
        .collect()
}

/// Tiles `dense` into a new zero-filled buffer of [`Layout::buffer_size`]
/// bytes.
pub fn tile_to_vec<T: Element>(shape: &Shape, dense: &[T]) -> Result<Vec<T>, TensorError> {
    let mut out = vec![T::ZERO; shape.layout().buffer_size / ELEMENT_BYTES];
    tile(shape, dense, &mut out)?;
    Ok(out)
}

/// Untiles `tiled` into a new dense array.
pub fn untile_to_vec<T: Element>(shape: &Shape, tiled: &[T]) -> Result<Vec<T>, TensorError> {
    let mut out = vec![T::ZERO; shape.elements()];
    untile(shape, tiled, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(n: usize, c: usize, h: usize, w: usize) -> Shape {
        Shape::new(n, c, h, w).expect("valid test shape")
    }

    #[test]
    fn layout_facts_from_fixtures() {
        // sum / mul: (1,64,1,1) -> row 0x40, plane 0x40, 0x1000 bytes, one granule.
        let l = shape(1, 64, 1, 1).layout();
        assert_eq!(
            (l.row_stride(), l.plane_stride(), l.tiled_bytes()),
            (0x40, 0x40, 0x1000)
        );
        assert_eq!((l.buffer_size(), l.buffer_granules()), (0x4000, 1));
        // relu / sigmoid: (1,1,1,77) -> row 0xC0 (154 bytes rounded up).
        let l = shape(1, 1, 1, 77).layout();
        assert_eq!(
            (l.row_stride(), l.plane_stride(), l.tiled_bytes()),
            (0xC0, 0xC0, 0xC0)
        );
        // conv: (1,3,1,1) -> 0xC0 bytes; gemm: (1,512,1,1) -> 0x8000.
        assert_eq!(shape(1, 3, 1, 1).layout().tiled_bytes(), 0xC0);
        assert_eq!(shape(1, 512, 1, 1).layout().buffer_size(), 0x8000);
        // concat output (1,16400,1,1): DepthStride 16400*64, buffer 0x104000.
        let l = shape(1, 16400, 1, 1).layout();
        assert_eq!((l.tiled_bytes(), l.buffer_size()), (0x100400, 0x104000));
        // atan2 (1,1,1024,2048): row 0x1000, plane 0x400000.
        let l = shape(1, 1, 1024, 2048).layout();
        assert_eq!((l.row_stride(), l.plane_stride()), (0x1000, 0x400000));
        // EA kernels (1,1,2560,1600): 3200 -> 3200 (already 64-aligned).
        let l = shape(1, 1, 2560, 1600).layout();
        assert_eq!(l.row_stride(), 3200);
        assert!(l.is_dense());
    }

    #[test]
    fn strides_and_offsets() {
        let l = shape(2, 3, 5, 7).layout();
        assert_eq!(l.row_stride(), 64);
        assert_eq!(l.plane_stride(), 320);
        assert_eq!(l.batch_stride(), 960);
        assert_eq!(l.tiled_bytes(), 1920);
        assert_eq!(l.buffer_size(), BUFFER_GRANULE);
        assert_eq!(l.dense_bytes(), 2 * 3 * 5 * 7 * 2);
        assert_eq!(l.offset(1, 2, 4, 6), Some(960 + 640 + 256 + 12));
        assert_eq!(l.offset(2, 0, 0, 0), None);
        assert_eq!(l.offset(0, 3, 0, 0), None);
        assert_eq!(l.offset(0, 0, 5, 0), None);
        assert_eq!(l.offset(0, 0, 0, 7), None);
        // Plane padding: H=3 rows of 64 -> 192, already aligned; W=33 -> 128.
        let l = shape(1, 1, 3, 33).layout();
        assert_eq!((l.row_stride(), l.plane_stride()), (128, 384));
        // Exact multiples stay: W=32 -> 64 bytes, no padding.
        assert!(shape(1, 4, 4, 32).layout().is_dense());
        assert!(!shape(1, 4, 4, 31).layout().is_dense());
        // Buffer rounding at the granule edge.
        assert_eq!(shape(1, 256, 1, 1).layout().buffer_size(), BUFFER_GRANULE);
        assert_eq!(
            shape(1, 257, 1, 1).layout().buffer_size(),
            2 * BUFFER_GRANULE
        );
    }

    #[test]
    fn shape_errors_name_the_dimension() {
        assert_eq!(
            Shape::new(0, 1, 1, 1),
            Err(ShapeError::Zero { dim: Dim::N })
        );
        assert_eq!(
            Shape::new(1, 0, 1, 1),
            Err(ShapeError::Zero { dim: Dim::C })
        );
        assert_eq!(
            Shape::new(1, 1, 0, 1),
            Err(ShapeError::Zero { dim: Dim::H })
        );
        assert_eq!(
            Shape::new(1, 1, 1, 0),
            Err(ShapeError::Zero { dim: Dim::W })
        );
        let e = Shape::new(1, 1, 1, usize::MAX).unwrap_err();
        assert!(matches!(e, ShapeError::Overflow { dim: Dim::W, .. }), "{e}");
        let e = Shape::new(1, 1, usize::MAX / 32, 1).unwrap_err();
        assert!(matches!(e, ShapeError::Overflow { dim: Dim::H, .. }), "{e}");
        let e = Shape::new(1, usize::MAX / 32, 1, 1).unwrap_err();
        assert!(matches!(e, ShapeError::Overflow { dim: Dim::C, .. }), "{e}");
        let e = Shape::new(usize::MAX / 64, 2, 1, 1).unwrap_err();
        assert!(matches!(e, ShapeError::Overflow { dim: Dim::N, .. }), "{e}");
        assert!(e.to_string().contains("dimension N"), "{e}");
        assert_eq!(
            Shape::new(1, 1, 0, 1).unwrap_err().to_string(),
            "tensor dimension H is 0; every dimension must be at least 1"
        );
        assert!(Shape::from_u64(1, 1, 1, u64::MAX).is_err());
        assert_eq!(Shape::from_u64(1, 2, 3, 4).unwrap().dims(), [1, 2, 3, 4]);
    }

    /// A deterministic pattern that differs in every element.
    fn pattern(len: usize) -> Vec<u16> {
        (0..len)
            .map(|i| (i as u16).wrapping_mul(40503).wrapping_add(1))
            .collect()
    }

    /// The obvious per-element reference for `tile`.
    fn naive_tile(s: &Shape, dense: &[u16]) -> Vec<u16> {
        let l = s.layout();
        let mut out = vec![0u16; l.buffer_size() / 2];
        let mut i = 0;
        for n in 0..s.n() {
            for c in 0..s.c() {
                for h in 0..s.h() {
                    for w in 0..s.w() {
                        out[l.offset(n, c, h, w).unwrap() / 2] = dense[i];
                        i += 1;
                    }
                }
            }
        }
        out
    }

    fn shapes() -> Vec<Shape> {
        let mut v = Vec::new();
        for &(n, c, h, w) in &[
            (1, 1, 1, 1),
            (1, 64, 1, 1),
            (1, 1, 1, 77),
            (1, 3, 1, 1),
            (2, 3, 5, 7),
            (1, 1, 7, 32),
            (1, 2, 3, 33),
            (3, 1, 1, 31),
            (1, 5, 2, 64),
            (1, 1, 13, 100),
            (2, 2, 1, 1000),
            (1, 1000, 1, 3),
            (1, 16400, 1, 1),
            (1, 2, 64, 48),
            (4, 7, 9, 11),
            // Row lengths at the edges of the block copy (`is_short_row`):
            // 30, 32, 34, 512 and 514 bytes.
            (1, 1, 4, 15),
            (1, 2, 3, 16),
            (2, 1, 3, 17),
            (1, 2, 2, 256),
            (1, 1, 2, 257),
        ] {
            v.push(shape(n, c, h, w));
        }
        v
    }

    #[test]
    fn tile_matches_naive_and_round_trips() {
        for s in shapes() {
            let dense = pattern(s.elements());
            // Poison the buffer to prove padding is zeroed.
            let mut tiled = vec![0xFFFFu16; s.layout().buffer_size() / 2];
            tile(&s, &dense, &mut tiled).unwrap();
            let tiled_bytes = s.layout().tiled_bytes() / 2;
            let expected = naive_tile(&s, &dense);
            assert_eq!(tiled[..tiled_bytes], expected[..tiled_bytes], "{s}");
            // Beyond tiled_bytes the buffer is untouched.
            assert!(tiled[tiled_bytes..].iter().all(|&x| x == 0xFFFF), "{s}");
            assert_eq!(tile_to_vec(&s, &dense).unwrap(), expected, "{s}");

            let mut back = vec![0u16; s.elements()];
            untile(&s, &tiled, &mut back).unwrap();
            assert_eq!(back, dense, "{s}");
            assert_eq!(untile_to_vec(&s, &expected).unwrap(), dense, "{s}");
        }
    }

    /// `tile`/`untile` run the kernels compiled for the widest vectors the
    /// CPU has; the portable build of the same kernels must agree, since it
    /// is what runs where that detection says no.
    #[test]
    fn portable_kernels_match_naive() {
        for s in shapes() {
            let layout = s.layout();
            let g = Geometry::new(&layout, ELEMENT_BYTES);
            let dense = pattern(s.elements());
            let mut tiled = vec![0xFFFFu16; layout.tiled_bytes() / 2];
            tile_impl(&g, &dense, &mut tiled, 0);
            assert_eq!(tiled, naive_tile(&s, &dense)[..tiled.len()], "{s}");
            let mut back = vec![0u16; s.elements()];
            untile_impl(&g, &tiled, &mut back);
            assert_eq!(back, dense, "{s}");
        }
    }

    #[test]
    fn byte_and_f16_versions_agree() {
        for s in shapes() {
            let dense = pattern(s.elements());
            let dense_b: Vec<u8> = dense.iter().flat_map(|x| x.to_le_bytes()).collect();
            let mut tiled_b = vec![0xA5u8; s.layout().buffer_size()];
            tile_bytes(&s, &dense_b, &mut tiled_b).unwrap();
            let tiled_u = tile_to_vec(&s, &dense).unwrap();
            let n = s.layout().tiled_bytes();
            let as_bytes: Vec<u8> = tiled_u.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(tiled_b[..n], as_bytes[..n], "{s}");
            let mut back = vec![0u8; dense_b.len()];
            untile_bytes(&s, &tiled_b, &mut back).unwrap();
            assert_eq!(back, dense_b, "{s}");

            let dense_h: Vec<f16> = dense.iter().map(|&b| f16::from_bits(b)).collect();
            let tiled_h = tile_to_vec(&s, &dense_h).unwrap();
            assert!(tiled_h.iter().zip(&tiled_u).all(|(h, u)| h.to_bits() == *u));
            let back_h = untile_to_vec(&s, &tiled_h).unwrap();
            assert!(back_h.iter().zip(&dense).all(|(h, u)| h.to_bits() == *u));
        }
    }

    #[test]
    fn tiled_buffer_may_be_exactly_tiled_bytes() {
        let s = shape(1, 2, 3, 5);
        let dense = pattern(s.elements());
        let mut tiled = vec![0u16; s.layout().tiled_bytes() / 2];
        tile(&s, &dense, &mut tiled).unwrap();
        assert_eq!(untile_to_vec(&s, &tiled).unwrap(), dense);
    }

    #[test]
    fn length_errors() {
        let s = shape(1, 2, 3, 5);
        let mut tiled = vec![0u16; s.layout().buffer_size() / 2];
        let e = tile(&s, &[0u16; 29], &mut tiled).unwrap_err();
        assert_eq!(
            e,
            TensorError::DenseLength {
                shape: s,
                expected: 30,
                found: 29,
                unit: "elements"
            }
        );
        assert!(e.to_string().contains("(N=1, C=2, H=3, W=5)"), "{e}");
        let mut short = vec![0u16; s.layout().tiled_bytes() / 2 - 1];
        let e = tile(&s, &[0u16; 30], &mut short).unwrap_err();
        assert!(matches!(
            e,
            TensorError::TiledTooShort {
                needed: 192,
                found: 191,
                ..
            }
        ));
        let mut dense = [0u16; 31];
        assert!(matches!(
            untile(&s, &tiled, &mut dense),
            Err(TensorError::DenseLength { .. })
        ));
        let mut dense_b = [0u8; 60];
        assert!(matches!(
            untile_bytes(&s, &[0u8; 383], &mut dense_b),
            Err(TensorError::TiledTooShort { unit: "bytes", .. })
        ));
        assert!(matches!(
            tile_bytes(&s, &[0u8; 59], &mut [0u8; 384]),
            Err(TensorError::DenseLength { unit: "bytes", .. })
        ));
    }
}
