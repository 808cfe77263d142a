// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Reading one member out of a restore image (`.ipsw`, a ZIP archive of
//! many gigabytes, so ZIP64), with the `zip` crate: only the central
//! directory and the named member are read, the member is inflated when
//! stored deflated, and its CRC-32 is checked as it is read.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use zip::result::ZipError;

/// Why a member could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IpswError {
    /// Reading the file failed, or the member's bytes do not match its
    /// CRC-32 (a damaged download).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a ZIP archive, or one whose records are damaged.
    #[error("not a readable ZIP archive: {0}")]
    Malformed(String),
    /// The member is not in the archive.
    #[error("no member {0} in the archive")]
    Missing(String),
    /// The member is larger than any firmware.
    #[error("member {name} is {size} bytes, more than the {max}-byte limit")]
    TooLarge {
        /// The member.
        name: String,
        /// Its uncompressed size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A compression method other than stored or deflate, or encryption.
    #[error("member {name}: {reason}")]
    Method {
        /// The member.
        name: String,
        /// What the archive uses.
        reason: String,
    },
}

/// Maps the crate's error for member `name`.
fn zip_error(name: &str, e: ZipError) -> IpswError {
    match e {
        ZipError::Io(e) => IpswError::Io(e),
        ZipError::FileNotFound => IpswError::Missing(name.into()),
        ZipError::UnsupportedArchive(r) => IpswError::Method {
            name: name.into(),
            reason: r.to_string(),
        },
        e => IpswError::Malformed(e.to_string()),
    }
}

/// Reads member `name` (at most `max` bytes once inflated).
pub fn read_member(path: &Path, name: &str, max: u64) -> Result<Vec<u8>, IpswError> {
    let f = BufReader::new(File::open(path)?);
    let mut z = zip::ZipArchive::new(f).map_err(|e| zip_error(name, e))?;
    let m = z.by_name(name).map_err(|e| zip_error(name, e))?;
    let size = m.size().max(m.compressed_size());
    if size > max {
        return Err(IpswError::TooLarge {
            name: name.into(),
            size,
            max,
        });
    }
    let mut out = Vec::with_capacity(m.size() as usize);
    // The declared size is the archive's word: inflate at most one byte
    // past the limit whatever it says.
    m.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(IpswError::TooLarge {
            name: name.into(),
            size: out.len() as u64,
            max,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};
    use zip::write::SimpleFileOptions;
    use zip::CompressionMethod;

    /// A ZIP of `(name, data, deflate)` members; `zip64` marks every
    /// member large, so the archive carries ZIP64 extra fields.
    fn zip(members: &[(&str, &[u8], bool)], zip64: bool) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, data, deflate) in members {
            let method = if *deflate {
                CompressionMethod::Deflated
            } else {
                CompressionMethod::Stored
            };
            let o = SimpleFileOptions::default()
                .compression_method(method)
                .large_file(zip64);
            w.start_file(*name, o).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn with_file(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    #[test]
    fn reads_stored_and_deflated_members_zip32_and_zip64() {
        let payload: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for zip64 in [false, true] {
            let z = zip(
                &[
                    ("BuildManifest.plist", b"<plist/>", false),
                    ("Firmware/ane/x.im4p", &payload, true),
                    ("stored.bin", &payload[..100], false),
                ],
                zip64,
            );
            let f = with_file(&z);
            assert_eq!(
                read_member(f.path(), "Firmware/ane/x.im4p", 1 << 20).unwrap(),
                payload
            );
            assert_eq!(
                read_member(f.path(), "stored.bin", 1 << 20).unwrap(),
                &payload[..100]
            );
            assert!(matches!(
                read_member(f.path(), "nope", 1 << 20),
                Err(IpswError::Missing(_))
            ));
            assert!(matches!(
                read_member(f.path(), "Firmware/ane/x.im4p", 1000),
                Err(IpswError::TooLarge { .. })
            ));
        }
    }

    #[test]
    fn refuses_non_zip_and_truncated_archives() {
        let f = with_file(b"not a zip at all, just text");
        assert!(matches!(
            read_member(f.path(), "x", 10),
            Err(IpswError::Malformed(_))
        ));
        let z = zip(&[("a", b"hello", false)], false);
        let f = with_file(&z[10..]);
        assert!(read_member(f.path(), "a", 10).is_err());
    }

    /// A damaged member (one byte of a stored firmware flipped, as a bad
    /// download or disk would) is an error, not firmware: its CRC-32 no
    /// longer matches. The hand-written reader this replaced returned the
    /// damaged bytes.
    #[test]
    fn a_damaged_member_is_refused() {
        let payload: Vec<u8> = (0..4096u32).map(|i| (i * 13 % 256) as u8).collect();
        let mut z = zip(&[("fw.bin", &payload, false)], false);
        let at = z
            .windows(payload.len())
            .position(|w| w == &payload[..])
            .unwrap();
        z[at + 100] ^= 0x40;
        let f = with_file(&z);
        let e = match read_member(f.path(), "fw.bin", 1 << 20) {
            Ok(v) => panic!("the damaged member ({} bytes) was returned", v.len()),
            Err(e) => e,
        };
        assert!(matches!(e, IpswError::Io(_)), "{e:?}");
        assert!(e.to_string().to_lowercase().contains("checksum"), "{e}");
    }
}
