// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! H13 programs whose exact bytes ran on an Apple machine according to
//! `docs/hardware-record.md` ("Programs that ran on hardware"), pinned by
//! sha256, with how they were run there.
//!
//! The doctor's job rung runs one of these first when the user supplies
//! it (`ane-probe doctor --h13-program FILE`): the project cannot ship
//! them (the pinned file carries no licence), so without one it runs the
//! closest project-built program ([`stand_in`]: the same operation on the
//! same shape, never run on hardware) and says so.

use crate::parity::{Cell, CellOp, Provenance};

/// One recorded program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// What it computes.
    pub name: &'static str,
    /// Its file name in the project's shared fixtures (`../shared/fixtures`).
    pub file: &'static str,
    /// The sha256 of the file that ran.
    pub sha256: &'static str,
    /// The record's provenance.
    pub provenance: Provenance,
    /// The fp16 value every element of input *i* had when it ran (inputs
    /// in the program's tensor order).
    pub inputs: &'static [u16],
    /// The fp16 value every output element had.
    pub expect: u16,
}

/// fp16 1.0, 2.0 and 3.0.
const ONE: u16 = 0x3c00;
const TWO: u16 = 0x4000;
const THREE: u16 = 0x4200;

/// The recorded H13 programs (M1, T8103).
pub const H13: &[Recorded] = &[Recorded {
    name: "tinygrad sum: elementwise add of two (1, 64, 1, 1) fp16 tensors, 1 TD",
    file: "sum.anec",
    sha256: "012e092cf4701754364e6ad7e5853841107d05bf8db2702db8365e14c4c5af8f",
    provenance: Provenance {
        ran_on_hardware: true,
        source: "ran on hardware: allbilly/ane README (AB, stored version at 06ce27ab) ran this file (anecc's conversion of tinygrad's sum.hwx, hwx/tinygrad/sum.ane @3b9a63f) on an M1 under Asahi Linux through eiln's DRM driver, which printed the submitted task descriptor (td_size 628, td_count 1): byte for byte this file's; its buffer dumps show 3.0 out of 1.0 and 2.0 (docs/hardware-record.md, \"Programs that ran on hardware\")",
    },
    inputs: &[ONE, TWO],
    expect: THREE,
}, Recorded {
    name: "tinygrad sum: the HWX the recorded sum.anec was converted from",
    file: "tinygrad_sum.hwx",
    sha256: "7def5f8246c9a3bf319ac8b356eee19c6636802584d6ea06a2e5dde515d693cb",
    provenance: Provenance {
        ran_on_hardware: true,
        source: "ran on hardware as the recorded sum.anec: this HWX (tinygrad extra/accel/ane/ops/sum.hwx, MIT) loads into exactly the 17,024 bytes of task descriptor and weights the driver is handed for sum.anec, which allbilly/ane's README shows running on an M1 through eiln's DRM driver (docs/hardware-record.md, \"Programs that ran on hardware\")",
    },
    inputs: &[ONE, TWO],
    expect: THREE,
}];

/// The recorded program whose file has this sha256.
pub fn by_sha256(sha256: &str) -> Option<&'static Recorded> {
    H13.iter().find(|r| r.sha256 == sha256)
}

/// The project-built program closest to the recorded ones: an
/// elementwise add of two (1, 64, 1, 1) fp16 tensors, the recorded sum's
/// operation and shape, built by the project's builder (never ran on
/// hardware).
pub fn stand_in() -> Cell {
    Cell {
        name: "add_1x64",
        op: CellOp::Add {
            shape: [1, 64, 1, 1],
        },
        seed: 0xADD_0064,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{sha256_hex, ProgramFile};

    /// The pin is the fixture's: the file the record names has this
    /// sha256 and is the one-TD program of 628-byte TDs that ran.
    #[test]
    fn the_pinned_sum_is_the_fixture_that_ran() {
        let r = by_sha256(H13[0].sha256).expect("pinned");
        assert!(r.provenance.ran_on_hardware);
        assert!(by_sha256("00").is_none());
        let Some(path) = crate::fixtures::path(r.file) else {
            return;
        };
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(sha256_hex(&bytes), r.sha256);
        let p = ProgramFile::parse(&path, &bytes).unwrap();
        assert_eq!((p.td_count, p.td_size), (1, 628));
        let inputs = p
            .tensors
            .iter()
            .filter(|t| t.direction == crate::hwx::Direction::Input)
            .count();
        assert_eq!(inputs, r.inputs.len());
    }

    /// tinygrad's HWX of the same program loads into the very bytes the
    /// driver is handed for the `.anec` that ran, or it is not listed.
    #[test]
    fn the_hwx_it_came_from_loads_into_the_same_payload() {
        let (Some(a), Some(h)) = (
            crate::fixtures::path("sum.anec"),
            crate::fixtures::path("tinygrad_sum.hwx"),
        ) else {
            return;
        };
        let hwx_bytes = std::fs::read(&h).unwrap();
        assert_eq!(sha256_hex(&hwx_bytes), H13[1].sha256);
        let a = ProgramFile::read(&a).unwrap();
        let h = ProgramFile::read(&h).unwrap();
        assert_eq!(a.payload.len(), 17024);
        assert!(a.payload == h.payload, "the HWX loads into other bytes");
        assert_eq!(
            (a.td_size, a.td_count, a.tsk_size),
            (h.td_size, h.td_count, h.tsk_size)
        );
        assert_eq!(a.tensors.len(), h.tensors.len());
        assert_eq!(H13[1].inputs, H13[0].inputs);
    }
}
