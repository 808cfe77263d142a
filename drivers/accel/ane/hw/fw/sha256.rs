// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! SHA-256: what the firmware pin and the program digest need of it.
//!
//! Two users: the firmware pin (the T6021 image is identified by its
//! SHA-256, `seed-repos.md` §3.2) and the program digest that keys the
//! driver's program cache (`seed-repos.md` §2, PROG_LOAD). Both take the
//! hash as a [`Hasher`]: the kernel module hashes with the kernel's own
//! crypto library (`sha256_init`/`sha256_update`/`sha256_final` of
//! `<crypto/sha2.h>`, `ext::sha256`), so none of the computation below is
//! built into it (`cfg(ane_kernel)`, in both of its flavours). The
//! streaming [`Sha256`] here (FIPS 180-4, without allocation) serves the
//! host build only: userspace (the program and receipt digests, the
//! firmware tools) and the host tests of the users above.

/// Bytes of a digest.
pub const DIGEST_LEN: usize = 32;

/// A streaming SHA-256 computation: the kernel's library in the module,
/// [`Sha256`] on the host.
pub trait Hasher {
    /// Feeds `bytes`.
    fn update(&mut self, bytes: &[u8]);
    /// The digest of everything fed.
    fn finalize(self) -> [u8; DIGEST_LEN];
}

/// Bytes of one compression block.
#[cfg(not(ane_kernel))]
const BLOCK: usize = 64;

#[cfg(not(ane_kernel))]
/// The initial hash value (the first 32 bits of the fractional parts of the
/// square roots of the first eight primes).
const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

#[cfg(not(ane_kernel))]
/// The round constants (cube roots of the first 64 primes).
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

#[cfg(not(ane_kernel))]
/// A running SHA-256 computation.
#[derive(Clone, Debug)]
pub struct Sha256 {
    /// The chaining value.
    state: [u32; 8],
    /// Bytes not yet compressed (fewer than one block).
    buf: [u8; BLOCK],
    /// How many bytes of `buf` are used.
    buf_len: usize,
    /// Bytes hashed so far (the standard counts bits modulo 2^64).
    total: u64,
}

#[cfg(not(ane_kernel))]
impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(ane_kernel))]
impl Sha256 {
    /// A computation over no bytes yet.
    pub const fn new() -> Self {
        Sha256 {
            state: H0,
            buf: [0; BLOCK],
            buf_len: 0,
            total: 0,
        }
    }

    /// Feeds `data`.
    pub fn update(&mut self, mut data: &[u8]) {
        self.total = self.total.wrapping_add(data.len() as u64);
        if self.buf_len > 0 {
            let take = data.len().min(BLOCK.saturating_sub(self.buf_len));
            let (head, rest) = data.split_at(take);
            if let Some(dst) = self.buf.get_mut(self.buf_len..self.buf_len + take) {
                dst.copy_from_slice(head);
            }
            self.buf_len += take;
            data = rest;
            if self.buf_len < BLOCK {
                return;
            }
            let block = self.buf;
            compress(&mut self.state, &block);
            self.buf_len = 0;
        }
        let mut blocks = data.chunks_exact(BLOCK);
        for block in &mut blocks {
            if let Ok(b) = <&[u8; BLOCK]>::try_from(block) {
                compress(&mut self.state, b);
            }
        }
        let rest = blocks.remainder();
        if let Some(dst) = self.buf.get_mut(..rest.len()) {
            dst.copy_from_slice(rest);
            self.buf_len = rest.len();
        }
    }

    /// Pads, compresses the last block(s) and returns the digest.
    pub fn finalize(mut self) -> [u8; DIGEST_LEN] {
        let bits = self.total.wrapping_mul(8);
        let mut pad = [0u8; BLOCK + 8];
        pad[0] = 0x80;
        // One 0x80 byte, zeros, then the 8-byte length, ending on a block
        // boundary.
        let used = self.buf_len + 1 + 8;
        let zeros = (BLOCK - used % BLOCK) % BLOCK;
        let pad_len = 1 + zeros;
        let total = self.total;
        self.update(pad.get(..pad_len).unwrap_or(&[]));
        self.update(&bits.to_be_bytes());
        self.total = total;
        // Plain index loops over fixed arrays: every bound is constant, so
        // nothing here can panic (and no slice-iterator adapters end up in
        // the kernel object).
        let mut out = [0u8; DIGEST_LEN];
        for i in 0..8 {
            let b = self.state[i].to_be_bytes();
            for j in 0..4 {
                out[4 * i + j] = b[j];
            }
        }
        out
    }
}

#[cfg(not(ane_kernel))]
impl Hasher for Sha256 {
    fn update(&mut self, bytes: &[u8]) {
        Sha256::update(self, bytes);
    }

    fn finalize(self) -> [u8; DIGEST_LEN] {
        Sha256::finalize(self)
    }
}

#[cfg(not(ane_kernel))]
/// The SHA-256 digest of `data`.
pub fn digest(data: &[u8]) -> [u8; DIGEST_LEN] {
    let mut h = Sha256::new();
    h.update(data);
    h.finalize()
}

#[cfg(not(ane_kernel))]
/// Compresses one block into `state`.
fn compress(state: &mut [u32; 8], block: &[u8; BLOCK]) {
    // The message schedule, kept as a rolling window of 16 words.
    let mut w = [0u32; 16];
    for i in 0..16 {
        w[i] = u32::from_be_bytes([
            block[4 * i],
            block[4 * i + 1],
            block[4 * i + 2],
            block[4 * i + 3],
        ]);
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    for (i, k) in K.iter().enumerate() {
        if i >= 16 {
            // w[i] = σ1(w[i-2]) + w[i-7] + σ0(w[i-15]) + w[i-16]
            let w2 = w[(i + 14) & 15];
            let w15 = w[(i + 1) & 15];
            let s0 = w15.rotate_right(7) ^ w15.rotate_right(18) ^ (w15 >> 3);
            let s1 = w2.rotate_right(17) ^ w2.rotate_right(19) ^ (w2 >> 10);
            w[i & 15] = w[i & 15]
                .wrapping_add(s0)
                .wrapping_add(w[(i + 9) & 15])
                .wrapping_add(s1);
        }
        let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
        let ch = (e & f) ^ (!e & g);
        let t1 = h
            .wrapping_add(s1)
            .wrapping_add(ch)
            .wrapping_add(*k)
            .wrapping_add(w[i & 15]);
        let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
        let maj = (a & b) ^ (a & c) ^ (b & c);
        let t2 = s0.wrapping_add(maj);
        h = g;
        g = f;
        f = e;
        e = d.wrapping_add(t1);
        d = c;
        c = b;
        b = a;
        a = t1.wrapping_add(t2);
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *s = s.wrapping_add(v);
    }
}

/// Parses 64 lowercase or uppercase hex digits into a digest (for pins
/// written the way `sha256sum` prints them).
pub const fn from_hex(hex: &[u8; 2 * DIGEST_LEN]) -> Option<[u8; DIGEST_LEN]> {
    let mut out = [0u8; DIGEST_LEN];
    let mut i = 0;
    while i < DIGEST_LEN {
        let (Some(hi), Some(lo)) = (nibble(hex[2 * i]), nibble(hex[2 * i + 1])) else {
            return None;
        };
        out[i] = (hi << 4) | lo;
        i += 1;
    }
    Some(out)
}

/// The value of one hex digit.
const fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: [u8; 32]) -> [u8; 64] {
        let digits = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in d.iter().enumerate() {
            out[2 * i] = digits[usize::from(b >> 4)];
            out[2 * i + 1] = digits[usize::from(b & 15)];
        }
        out
    }

    fn check(data: &[u8], want: &str) {
        assert_eq!(&hex(digest(data)), want.as_bytes(), "one shot");
        // Every split point feeds the same bytes.
        for split in [0, 1, 55, 56, 63, 64, 65, data.len()] {
            if split > data.len() {
                continue;
            }
            let mut h = Sha256::new();
            let (a, b) = data.split_at(split);
            h.update(a);
            h.update(b);
            assert_eq!(&hex(h.finalize()), want.as_bytes(), "split at {split}");
        }
    }

    #[test]
    fn standard_vectors() {
        check(
            b"",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        );
        check(
            b"abc",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        );
        check(
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        );
        check(
            b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
        );
        check(
            &[b'a'; 1000],
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3",
        );
    }

    #[test]
    fn million_a_byte_by_byte_chunks() {
        let mut h = Sha256::new();
        let chunk = [b'a'; 1000];
        for i in 0..1000 {
            // Uneven chunk sizes cross block boundaries everywhere.
            let n = 1000 - (i % 7);
            h.update(&chunk[..n]);
            h.update(&chunk[..1000 - n]);
        }
        assert_eq!(
            &hex(h.finalize()),
            b"cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn hex_parsing() {
        let d = digest(b"abc");
        assert_eq!(from_hex(&hex(d)), Some(d));
        let mut upper = hex(d);
        upper.make_ascii_uppercase();
        assert_eq!(from_hex(&upper), Some(d));
        let mut bad = hex(d);
        bad[17] = b'g';
        assert_eq!(from_hex(&bad), None);
    }
}
