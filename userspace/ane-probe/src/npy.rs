// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The little of NumPy's `.npy` format tensor files need: a C-order
//! little-endian float16 (`<f2`) array.
//!
//! Kept by hand, measured: the `.npy` crates (`npyz` 0.9, and
//! `ndarray-npy`, which adds `ndarray`) parse the header's Python literal
//! with `py_literal`, which pulls `pest`, `num-bigint` and `psm`, whose
//! build script assembles code with the target's C compiler. Building
//! `npyz` alone took 38 crates and 32.7 s of CPU (200 s wall on the shared
//! 2-core builder), for the three keys of a header this file reads in
//! 60 lines. A header it cannot read is refused by name, and the data's
//! size is checked against the tensor by the caller
//! (`slots::read_tensor`).

/// The magic string every `.npy` file starts with.
const MAGIC: &[u8] = b"\x93NUMPY";

/// Whether `bytes` is a `.npy` file.
pub fn is_npy(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The data of a `.npy` file holding a C-order `<f2` array with as many
/// elements as `dims` (any shape with that count is accepted).
pub fn data_of<'a>(bytes: &'a [u8], dims: &[usize; 4]) -> Result<&'a [u8], String> {
    let major = *bytes.get(6).ok_or("truncated .npy header")?;
    let (len, start) = match major {
        1 => (
            bytes
                .get(8..10)
                .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]]))),
            10,
        ),
        2 | 3 => (
            bytes
                .get(8..12)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize),
            12,
        ),
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    let end = len
        .and_then(|l| l.checked_add(start))
        .filter(|&e| e <= bytes.len())
        .ok_or("truncated .npy header")?;
    let header = String::from_utf8_lossy(&bytes[start..end]);
    let descr = value_of(&header, "descr").ok_or("the .npy header has no 'descr'")?;
    let descr = descr
        .strip_prefix(['\'', '"'])
        .and_then(|d| d.split(['\'', '"']).next())
        .ok_or("the .npy header's 'descr' is not a string")?;
    if descr != "<f2" && descr != "<e" {
        return Err(format!(
            "the array's dtype is '{descr}', little-endian float16 ('<f2') is needed"
        ));
    }
    if value_of(&header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err("the array is in Fortran order; C order is needed".into());
    }
    let shape = value_of(&header, "shape").ok_or("the .npy header has no 'shape'")?;
    let shape = shape
        .trim_start_matches('(')
        .split(')')
        .next()
        .unwrap_or("");
    let mut count: u64 = 1;
    let mut parsed = Vec::new();
    for d in shape.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let d: u64 = d
            .parse()
            .map_err(|_| format!("bad dimension '{d}' in the .npy shape"))?;
        parsed.push(d);
        count = count.saturating_mul(d);
    }
    let want: u64 = dims.iter().map(|&d| d as u64).product();
    if count != want {
        return Err(format!(
            "the array's shape {parsed:?} holds {count} elements, the tensor {dims:?} (N,C,H,W) needs {want}"
        ));
    }
    Ok(&bytes[end..])
}

/// The text after `'key':` up to the next top-level comma.
fn value_of<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let i = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[i + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

/// A version 1.0 `.npy` file of the `<f2` array `data` of shape `dims`.
pub fn encode(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let shape: String = dims.iter().map(|d| format!("{d}, ")).collect();
    let mut header = format!(
        "{{'descr': '<f2', 'fortran_order': False, 'shape': ({}), }}",
        shape.trim_end()
    );
    // Magic, version, length, header and its newline fill a multiple of 64.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_header_is_aligned_and_parses() {
        let f = encode(&[1, 2, 3, 4], &[7u8; 48]);
        assert!(is_npy(&f));
        let hlen = u16::from_le_bytes([f[8], f[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        assert_eq!(data_of(&f, &[1, 2, 3, 4]).unwrap(), &[7u8; 48][..]);
        // Same element count, other shape: accepted.
        assert!(data_of(&f, &[1, 24, 1, 1]).is_ok());
        let e = data_of(&f, &[1, 1, 1, 5]).unwrap_err();
        assert!(e.contains("24 elements"), "{e}");
    }

    #[test]
    fn other_dtypes_are_refused() {
        let mut f = encode(&[1, 1, 1, 2], &[0u8; 4]);
        let i = f.windows(3).position(|w| w == b"<f2").unwrap();
        f[i + 2] = b'4';
        let e = data_of(&f, &[1, 1, 1, 2]).unwrap_err();
        assert!(e.contains("'<f4'"), "{e}");
    }
}
