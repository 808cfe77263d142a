// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Reading one member out of a restore image (`.ipsw`, a ZIP archive of
//! many gigabytes, so ZIP64): the central directory is found from the end
//! of the file, only the named member is read, and it is inflated when
//! stored deflated. Nothing else of the archive is loaded.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Why a member could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IpswError {
    /// Reading the file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// No end-of-central-directory record: not a ZIP archive.
    #[error("not a ZIP archive (no end-of-central-directory record)")]
    NotZip,
    /// A record is cut short or has the wrong signature.
    #[error("malformed ZIP {what} at byte {at}")]
    Malformed {
        /// Which record.
        what: &'static str,
        /// Its offset.
        at: u64,
    },
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
    /// A compression method other than stored (0) or deflate (8).
    #[error("member {name}: unsupported compression method {method}")]
    Method {
        /// The member.
        name: String,
        /// The method.
        method: u16,
    },
}

const EOCD: u32 = 0x0605_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const ZIP64_EOCD: u32 = 0x0606_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from(u32_at(b, o)) | (u64::from(u32_at(b, o + 4)) << 32)
}

fn read_at(f: &mut File, at: u64, len: usize) -> Result<Vec<u8>, IpswError> {
    let mut v = vec![0u8; len];
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(&mut v)?;
    Ok(v)
}

/// Where the central directory is and how long it is.
fn central_directory(f: &mut File, len: u64) -> Result<(u64, u64), IpswError> {
    // The EOCD record (22 bytes) ends the file, after a comment of at most
    // 64 KiB.
    let tail_len = len.min(22 + 0xffff);
    let tail = read_at(f, len - tail_len, tail_len as usize)?;
    let pos = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(&tail, i) == EOCD)
        .ok_or(IpswError::NotZip)?;
    let eocd_at = len - tail_len + pos as u64;
    let size = u64::from(u32_at(&tail, pos + 12));
    let offset = u64::from(u32_at(&tail, pos + 16));
    if size != 0xffff_ffff && offset != 0xffff_ffff {
        return Ok((offset, size));
    }
    // ZIP64: the locator sits right before the EOCD record.
    let loc_at = eocd_at.checked_sub(20).ok_or(IpswError::Malformed {
        what: "ZIP64 locator",
        at: eocd_at,
    })?;
    let loc = read_at(f, loc_at, 20)?;
    if u32_at(&loc, 0) != ZIP64_LOCATOR {
        return Err(IpswError::Malformed {
            what: "ZIP64 locator",
            at: loc_at,
        });
    }
    let rec_at = u64_at(&loc, 8);
    let rec = read_at(f, rec_at, 56)?;
    if u32_at(&rec, 0) != ZIP64_EOCD {
        return Err(IpswError::Malformed {
            what: "ZIP64 end of central directory",
            at: rec_at,
        });
    }
    Ok((u64_at(&rec, 48), u64_at(&rec, 40)))
}

/// Reads member `name` (at most `max` bytes once inflated).
pub fn read_member(path: &Path, name: &str, max: u64) -> Result<Vec<u8>, IpswError> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let (cd_at, cd_len) = central_directory(&mut f, len)?;
    if cd_len > 64 << 20 {
        return Err(IpswError::Malformed {
            what: "central directory size",
            at: cd_at,
        });
    }
    let cd = read_at(&mut f, cd_at, cd_len as usize)?;
    let mut at = 0usize;
    while at + 46 <= cd.len() {
        if u32_at(&cd, at) != CENTRAL {
            return Err(IpswError::Malformed {
                what: "central directory entry",
                at: cd_at + at as u64,
            });
        }
        let method = u16_at(&cd, at + 10);
        let mut csize = u64::from(u32_at(&cd, at + 20));
        let mut usize_ = u64::from(u32_at(&cd, at + 24));
        let name_len = usize::from(u16_at(&cd, at + 28));
        let extra_len = usize::from(u16_at(&cd, at + 30));
        let comment_len = usize::from(u16_at(&cd, at + 32));
        let mut local = u64::from(u32_at(&cd, at + 42));
        let end = at + 46 + name_len + extra_len + comment_len;
        let entry = cd.get(at..end).ok_or(IpswError::Malformed {
            what: "central directory entry",
            at: cd_at + at as u64,
        })?;
        let entry_name = &entry[46..46 + name_len];
        if entry_name == name.as_bytes() {
            // ZIP64 extra field: the sizes and offset that overflowed.
            let extra = &entry[46 + name_len..46 + name_len + extra_len];
            let mut e = 0;
            while e + 4 <= extra.len() {
                let id = u16_at(extra, e);
                let n = usize::from(u16_at(extra, e + 2));
                let body = extra.get(e + 4..e + 4 + n).unwrap_or(&[]);
                if id == 1 {
                    let mut o = 0;
                    for field in [&mut usize_, &mut csize, &mut local] {
                        if *field == 0xffff_ffff && o + 8 <= body.len() {
                            *field = u64_at(body, o);
                            o += 8;
                        }
                    }
                }
                e += 4 + n;
            }
            if usize_ > max || csize > max {
                return Err(IpswError::TooLarge {
                    name: name.into(),
                    size: usize_.max(csize),
                    max,
                });
            }
            let hdr = read_at(&mut f, local, 30)?;
            if u32_at(&hdr, 0) != LOCAL {
                return Err(IpswError::Malformed {
                    what: "local header",
                    at: local,
                });
            }
            let data_at = local + 30 + u64::from(u16_at(&hdr, 26)) + u64::from(u16_at(&hdr, 28));
            let raw = read_at(&mut f, data_at, csize as usize)?;
            return match method {
                0 => Ok(raw),
                8 => {
                    let mut out = Vec::with_capacity(usize_ as usize);
                    flate2::read::DeflateDecoder::new(&raw[..])
                        .take(max + 1)
                        .read_to_end(&mut out)?;
                    if out.len() as u64 > max {
                        return Err(IpswError::TooLarge {
                            name: name.into(),
                            size: out.len() as u64,
                            max,
                        });
                    }
                    Ok(out)
                }
                m => Err(IpswError::Method {
                    name: name.into(),
                    method: m,
                }),
            };
        }
        at = end;
    }
    Err(IpswError::Missing(name.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn put16(v: &mut Vec<u8>, x: u16) {
        v.extend_from_slice(&x.to_le_bytes());
    }

    fn put32(v: &mut Vec<u8>, x: u32) {
        v.extend_from_slice(&x.to_le_bytes());
    }

    /// A ZIP of `(name, data, deflate)` members; `zip64` writes the
    /// ZIP64 end records and saturated 32-bit fields.
    fn zip(members: &[(&str, &[u8], bool)], zip64: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data, deflate) in members {
            let body = if *deflate {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            } else {
                data.to_vec()
            };
            let local = out.len() as u32;
            put32(&mut out, LOCAL);
            put16(&mut out, 20);
            put16(&mut out, 0);
            put16(&mut out, if *deflate { 8 } else { 0 });
            put32(&mut out, 0);
            put32(&mut out, 0);
            put32(&mut out, body.len() as u32);
            put32(&mut out, data.len() as u32);
            put16(&mut out, name.len() as u16);
            put16(&mut out, 0);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&body);
            put32(&mut central, CENTRAL);
            put16(&mut central, 45);
            put16(&mut central, 45);
            put16(&mut central, 0);
            put16(&mut central, if *deflate { 8 } else { 0 });
            put32(&mut central, 0);
            put32(&mut central, 0);
            let ext: Vec<u8> = if zip64 {
                let mut x = Vec::new();
                put16(&mut x, 1);
                put16(&mut x, 24);
                x.extend_from_slice(&(data.len() as u64).to_le_bytes());
                x.extend_from_slice(&(body.len() as u64).to_le_bytes());
                x.extend_from_slice(&u64::from(local).to_le_bytes());
                x
            } else {
                Vec::new()
            };
            let (c, u, l) = if zip64 {
                (u32::MAX, u32::MAX, u32::MAX)
            } else {
                (body.len() as u32, data.len() as u32, local)
            };
            put32(&mut central, c);
            put32(&mut central, u);
            put16(&mut central, name.len() as u16);
            put16(&mut central, ext.len() as u16);
            put16(&mut central, 0);
            put16(&mut central, 0);
            put16(&mut central, 0);
            put32(&mut central, 0);
            put32(&mut central, l);
            central.extend_from_slice(name.as_bytes());
            central.extend_from_slice(&ext);
        }
        let cd_at = out.len() as u64;
        out.extend_from_slice(&central);
        if zip64 {
            let rec_at = out.len() as u64;
            put32(&mut out, ZIP64_EOCD);
            out.extend_from_slice(&44u64.to_le_bytes());
            put16(&mut out, 45);
            put16(&mut out, 45);
            put32(&mut out, 0);
            put32(&mut out, 0);
            out.extend_from_slice(&(members.len() as u64).to_le_bytes());
            out.extend_from_slice(&(members.len() as u64).to_le_bytes());
            out.extend_from_slice(&(central.len() as u64).to_le_bytes());
            out.extend_from_slice(&cd_at.to_le_bytes());
            put32(&mut out, ZIP64_LOCATOR);
            put32(&mut out, 0);
            out.extend_from_slice(&rec_at.to_le_bytes());
            put32(&mut out, 1);
        }
        put32(&mut out, EOCD);
        put16(&mut out, 0);
        put16(&mut out, 0);
        put16(&mut out, members.len() as u16);
        put16(&mut out, members.len() as u16);
        put32(
            &mut out,
            if zip64 {
                u32::MAX
            } else {
                central.len() as u32
            },
        );
        put32(&mut out, if zip64 { u32::MAX } else { cd_at as u32 });
        put16(&mut out, 0);
        out
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
            Err(IpswError::NotZip)
        ));
        let z = zip(&[("a", b"hello", false)], false);
        let f = with_file(&z[10..]);
        assert!(read_member(f.path(), "a", 10).is_err());
    }
}
