// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! SHA-256 from the kernel's crypto library (`lib/crypto`,
//! `<crypto/sha2.h>`: `CONFIG_CRYPTO_LIB_SHA256`), through the C glue.
//!
//! The kernel crate has no binding for it in the supported releases, and
//! `sha256_update()` is an inline, so `ane_glue.c` wraps the four calls.
//! The context is plain data (chaining value, byte count, partial block)
//! kept in storage this type owns; the C side checks at build time that
//! `struct sha256_ctx` fits it.

use core::ffi::c_void;

use crate::hw::fw::sha256::{Hasher, DIGEST_LEN};

use super::glue;

/// Bytes reserved for a `struct sha256_ctx`: `ANE_GLUE_SHA256_CTX_BYTES`
/// in `ane_glue.h` (which asserts the struct fits), 8-byte aligned.
const CTX_WORDS: usize = 128 / 8;

/// A running SHA-256 computation of the kernel's library.
pub struct Sha256 {
    /// The `struct sha256_ctx`, initialised by `sha256_init()`.
    ctx: [u64; CTX_WORDS],
}

impl Sha256 {
    /// A computation over no bytes yet.
    pub fn new() -> Self {
        let mut s = Self {
            ctx: [0; CTX_WORDS],
        };
        // SAFETY: `ctx` is `ANE_GLUE_SHA256_CTX_BYTES` bytes, 8-byte
        // aligned, owned by `s`; `sha256_init()` only writes it.
        unsafe { glue::ane_glue_sha256_init(s.ctx.as_mut_ptr().cast::<c_void>()) };
        s
    }
}

impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}

impl Hasher for Sha256 {
    fn update(&mut self, bytes: &[u8]) {
        // SAFETY: `ctx` was initialised by `new` (the struct holds no
        // pointer, so moving it is fine); `bytes` is valid for its length.
        unsafe {
            glue::ane_glue_sha256_update(
                self.ctx.as_mut_ptr().cast::<c_void>(),
                bytes.as_ptr(),
                bytes.len(),
            )
        };
    }

    fn finalize(mut self) -> [u8; DIGEST_LEN] {
        let mut out = [0u8; DIGEST_LEN];
        // SAFETY: As in `update`; `out` holds the 32 bytes
        // `sha256_final()` writes.
        unsafe {
            glue::ane_glue_sha256_final(self.ctx.as_mut_ptr().cast::<c_void>(), out.as_mut_ptr())
        };
        out
    }
}

/// The SHA-256 of `data` (`sha256()`).
pub fn digest(data: &[u8]) -> [u8; DIGEST_LEN] {
    let mut out = [0u8; DIGEST_LEN];
    // SAFETY: `data` is valid for its length, `out` for the 32 bytes
    // written.
    unsafe { glue::ane_glue_sha256(data.as_ptr(), data.len(), out.as_mut_ptr()) };
    out
}
