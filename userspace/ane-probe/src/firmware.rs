// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `ane-probe firmware`: checks (and optionally installs) the T6021 ANE
//! firmware from the user's own copy. The project never redistributes it.
//!
//! The image is the `Firmware/ane/t602x_ane0_fw_selene_rc4x.im4p` member of
//! the macOS 13.5 (22G74) restore image, read straight out of the `.ipsw`
//! with `--ipsw` ([`crate::ipsw`]). An `.im4p` is a DER sequence
//! `{ "IM4P", type, description, payload, … }` whose payload is stored
//! uncompressed for this file, so unwrapping it needs no decompressor. The
//! payload must be the arm64 Mach-O the driver pins (size, SHA-256, and the
//! exact shape: MH_PRELOAD, 5 load commands in 0x960 bytes, flags 0x1,
//! `__TEXT` and `__DATA` at their pinned geometry, a thread state with pc
//! 0: `ane::hw::fw::image::T6021_PIN`), checked here with the very code the
//! kernel runs. A refusal names the first field that differs and both
//! values.

use std::path::PathBuf;

use ane::hw::fw::{image, sha256};
use clap::Args;

use crate::exit::{Error, FAILURE, OK};

/// The firmware's member in the restore image.
pub const IPSW_MEMBER: &str = "Firmware/ane/t602x_ane0_fw_selene_rc4x.im4p";

/// No ANE firmware member is larger (the pinned payload is about 5 MB).
const MAX_MEMBER: u64 = 16 << 20;

/// Arguments of `ane-probe firmware`.
#[derive(Args, Debug)]
pub struct FirmwareArgs {
    /// The firmware: the restore image itself (with --ipsw), the `.im4p`
    /// from it, or the unwrapped Mach-O.
    pub file: PathBuf,
    /// FILE is the macOS 13.5 (22G74) restore image (.ipsw); its member
    /// Firmware/ane/t602x_ane0_fw_selene_rc4x.im4p is read from it.
    #[arg(long)]
    pub ipsw: bool,
    /// Write the checked Mach-O here (for the driver:
    /// /usr/lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho). Only a
    /// pinned image is written, atomically.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

/// Why an `.im4p` container could not be unwrapped.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Im4pError {
    /// The bytes end inside an element.
    #[error("truncated at byte {at}")]
    Truncated {
        /// Offset of the element.
        at: usize,
    },
    /// An element has another DER tag than the format requires.
    #[error("{field}: DER tag {found:#04x}, expected {expected:#04x}")]
    Tag {
        /// Which element.
        field: &'static str,
        /// The tag found.
        found: u8,
        /// The tag required.
        expected: u8,
    },
    /// A length field this parser does not accept (indefinite, over 4 bytes).
    #[error("unsupported DER length at byte {at}")]
    Length {
        /// Offset of the length.
        at: usize,
    },
    /// The first string is not "IM4P".
    #[error("magic: not an IM4P container")]
    Magic,
}

/// One DER element: its tag and its contents' range.
fn element(b: &[u8], at: usize) -> Result<(u8, std::ops::Range<usize>), Im4pError> {
    let tag = *b.get(at).ok_or(Im4pError::Truncated { at })?;
    let first = *b.get(at + 1).ok_or(Im4pError::Truncated { at })?;
    let (len, start) = if first < 0x80 {
        (usize::from(first), at + 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return Err(Im4pError::Length { at: at + 1 });
        }
        let bytes = b
            .get(at + 2..at + 2 + n)
            .ok_or(Im4pError::Truncated { at })?;
        let len = bytes
            .iter()
            .fold(0usize, |acc, x| (acc << 8) | usize::from(*x));
        (len, at + 2 + n)
    };
    let end = start.checked_add(len).ok_or(Im4pError::Truncated { at })?;
    if end > b.len() {
        return Err(Im4pError::Truncated { at });
    }
    Ok((tag, start..end))
}

fn expect(
    b: &[u8],
    at: usize,
    field: &'static str,
    want: u8,
) -> Result<std::ops::Range<usize>, Im4pError> {
    let (tag, r) = element(b, at)?;
    if tag != want {
        return Err(Im4pError::Tag {
            field,
            found: tag,
            expected: want,
        });
    }
    Ok(r)
}

/// The payload of an IM4P container.
pub fn unwrap_im4p(b: &[u8]) -> Result<&[u8], Im4pError> {
    const SEQUENCE: u8 = 0x30;
    const IA5: u8 = 0x16;
    const OCTETS: u8 = 0x04;
    let seq = expect(b, 0, "container", SEQUENCE)?;
    let magic = expect(b, seq.start, "magic", IA5)?;
    if b.get(magic.clone()) != Some(b"IM4P".as_slice()) {
        return Err(Im4pError::Magic);
    }
    let kind = expect(b, magic.end, "type", IA5)?;
    let desc = expect(b, kind.end, "description", IA5)?;
    let payload = expect(b, desc.end, "payload", OCTETS)?;
    if payload.end > seq.end {
        return Err(Im4pError::Truncated { at: desc.end });
    }
    Ok(&b[payload])
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs `ane-probe firmware`; the exit code.
pub fn firmware(json: bool, args: &FirmwareArgs) -> Result<u8, Error> {
    let bytes = if args.ipsw {
        crate::ipsw::read_member(&args.file, IPSW_MEMBER, MAX_MEMBER)
            .map_err(|e| Error::Firmware(format!("{}: {e}", args.file.display())))?
    } else {
        std::fs::read(&args.file).map_err(|source| Error::Read {
            what: "firmware file".into(),
            path: args.file.clone(),
            source,
        })?
    };
    let is_im4p = bytes.first() == Some(&0x30);
    let payload = if is_im4p {
        unwrap_im4p(&bytes).map_err(|e| Error::Firmware(format!("{}: {e}", args.file.display())))?
    } else {
        &bytes
    };
    let pin = &image::T6021_PIN;
    let digest = sha256::digest(payload);
    let structure = image::parse(payload).map_err(|e| e.to_string());
    let pinned = pin.check(payload).map_err(|e| e.to_string());
    let ok = pinned.is_ok();
    if json {
        let v = serde_json::json!({
            "file": args.file,
            "container": if is_im4p { "im4p" } else { "macho" },
            "payload_bytes": payload.len(),
            "sha256": hex(&digest),
            "structure": structure.as_ref().map(|i| format!("{} load commands, {} segments", i.load_commands, i.segments().len())).unwrap_or_else(|e| e.clone()),
            "pin": pin.name,
            "pinned": ok,
            "error": pinned.as_ref().err(),
        });
        println!("{}", crate::receipt::headed_json("ane-probe/firmware", &v)?);
    } else {
        println!("file:      {}", args.file.display());
        println!(
            "container: {}",
            if is_im4p {
                "im4p (unwrapped)"
            } else {
                "Mach-O"
            }
        );
        println!(
            "payload:   {} bytes, sha256 {}",
            payload.len(),
            hex(&digest)
        );
        match &structure {
            Ok(i) => println!(
                "structure: arm64 Mach-O, {} load commands, {} segments",
                i.load_commands,
                i.segments().len()
            ),
            Err(e) => println!("structure: refused ({e})"),
        }
        match &pinned {
            Ok(_) => println!("verdict:   the pinned T6021 firmware ({})", pin.name),
            Err(e) => println!("verdict:   NOT the pinned T6021 firmware: {e}"),
        }
    }
    if !ok {
        return Ok(FAILURE);
    }
    if let Some(out) = &args.out {
        let tmp = out.with_extension("tmp");
        let write = |p: &PathBuf| std::fs::write(p, payload);
        write(&tmp)
            .and_then(|()| std::fs::rename(&tmp, out))
            .map_err(|source| Error::Write {
                what: "firmware".into(),
                path: out.clone(),
                source,
            })?;
        if !json {
            println!("installed: {}", out.display());
        }
    }
    Ok(OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if body.len() < 0x80 {
            v.push(body.len() as u8);
        } else {
            let n = (body.len() as u32).to_be_bytes();
            v.push(0x84);
            v.extend_from_slice(&n);
        }
        v.extend_from_slice(body);
        v
    }

    fn im4p(magic: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut body = der(0x16, magic);
        body.extend(der(0x16, b"anef"));
        body.extend(der(0x16, b"ANE firmware"));
        body.extend(der(0x04, payload));
        der(0x30, &body)
    }

    #[test]
    fn unwraps_the_payload() {
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let c = im4p(b"IM4P", &payload);
        assert_eq!(unwrap_im4p(&c).unwrap(), payload.as_slice());
    }

    #[test]
    fn refuses_bad_containers_naming_the_field() {
        assert_eq!(unwrap_im4p(&im4p(b"IMG4", b"x")), Err(Im4pError::Magic));
        let mut c = im4p(b"IM4P", b"payload");
        let last = c.len() - 9; // the payload's tag
        c[last] = 0x16;
        assert!(matches!(
            unwrap_im4p(&c),
            Err(Im4pError::Tag {
                field: "payload",
                ..
            })
        ));
        let c = im4p(b"IM4P", &[0u8; 300]);
        assert!(matches!(
            unwrap_im4p(&c[..200]),
            Err(Im4pError::Truncated { .. })
        ));
        assert!(unwrap_im4p(&[]).is_err());
    }
}
