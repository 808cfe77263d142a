// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! What the record's firmware takes as a program, and the refusal of
//! anything else (issue 25 point 3, hw-2 T15).
//!
//! The T6021 firmware runs Apple-compiled H14 programs. The one driver that
//! ran programs on it (omarchy-ane, `docs/hardware-record.md` "H14 programs")
//! loads every program as the same six sections, ids 1, 2, 3, 4, 5 and 7
//! (its libane `ane_m2_section_ids`: generic, kernel, descriptor, operation,
//! procedure, tdprop; OA-IP: six sections per program), and its descriptor
//! section (id 3) is the H14 task stream as the compiler emits it: a 16-byte
//! zero frame, then tasks whose first word carries the task's length in
//! words in bits 26:16, at least the 8-word task header (its
//! `split_h14_tasks` and the descriptor checks of its section builder).
//!
//! Nothing records what the firmware does with anything else — in
//! particular with an H13 task stream, which this project's userspace used
//! to stage as section 1 (weights as 2). At best the firmware refuses it,
//! and a refused exchange quarantines the ANE until reboot. So the kernel
//! refuses, before the firmware sees a byte, every program that does not
//! have the recorded shape: [`check_ids`] on the section ids, and
//! [`check_descriptor_head`] on the first [`DESCRIPTOR_HEAD`] bytes of the
//! descriptor section. An H13 stream staged the way the library did fails
//! the first check; one placed as section 3 fails the second unless its
//! first TD's W0..W3 are all zero and W4 reads as a task length that fits,
//! which the shape check cannot exclude (the firmware's own task format is
//! not documented further).

/// The section ids of every program that ran on the T6021 firmware.
pub const SECTION_IDS: [u32; 6] = [1, 2, 3, 4, 5, 7];

/// The descriptor section: the H14 task stream.
pub const DESCRIPTOR: u32 = 3;

/// Bytes of the zero frame that opens the descriptor section.
pub const FRAME: usize = 16;

/// Words of an H14 task header: the shortest task.
pub const TASK_HEADER_WORDS: u32 = 8;

/// Bytes [`check_descriptor_head`] looks at: the frame and the first
/// task's first word.
pub const DESCRIPTOR_HEAD: usize = FRAME + 4;

/// The section-id mask of [`SECTION_IDS`] (bit `id` set per id).
pub const SECTION_MASK: u32 = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 7);

/// Why a program is not an H14 program of the recorded shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotH14 {
    /// The section ids (bit `id` set per id) are not [`SECTION_IDS`]: an
    /// H13 task stream staged as sections 1 (and 2), for instance.
    Sections {
        /// The ids given, as a mask.
        mask: u32,
    },
    /// The descriptor section is shorter than its frame and one task header.
    DescriptorShort {
        /// Its size in bytes.
        size: u64,
    },
    /// The descriptor section does not open with a 16-byte zero frame (an
    /// H13 stream opens with its first TD's header words).
    FrameNotZero,
    /// The first task's length is below the task header or past the
    /// section's end.
    TaskLength {
        /// The length in words the first task word declares.
        words: u32,
        /// The descriptor section's size in bytes.
        size: u64,
    },
}

/// Checks the section ids: exactly [`SECTION_IDS`], each once.
pub fn check_ids(ids: impl IntoIterator<Item = u32>) -> Result<(), NotH14> {
    let mut mask = 0u32;
    let mut twice = false;
    for id in ids {
        let bit = 1u32.checked_shl(id).unwrap_or(0);
        twice |= bit == 0 || mask & bit != 0;
        mask |= bit;
    }
    if twice || mask != SECTION_MASK {
        return Err(NotH14::Sections { mask });
    }
    Ok(())
}

/// Checks the start of the descriptor section: `head` is its first
/// [`DESCRIPTOR_HEAD`] bytes (or all of it when shorter), `size` its size.
pub fn check_descriptor_head(head: &[u8], size: u64) -> Result<(), NotH14> {
    let (Some(frame), Some(word)) = (head.get(..FRAME), head.get(FRAME..DESCRIPTOR_HEAD)) else {
        return Err(NotH14::DescriptorShort { size });
    };
    let min = (FRAME as u64) + u64::from(TASK_HEADER_WORDS) * 4;
    if size < min {
        return Err(NotH14::DescriptorShort { size });
    }
    if frame.iter().any(|&b| b != 0) {
        return Err(NotH14::FrameNotZero);
    }
    let w = u32::from_le_bytes([
        *word.first().unwrap_or(&0),
        *word.get(1).unwrap_or(&0),
        *word.get(2).unwrap_or(&0),
        *word.get(3).unwrap_or(&0),
    ]);
    let words = task_words(w);
    let bytes = u64::from(words) * 4;
    if words < TASK_HEADER_WORDS || bytes > size - FRAME as u64 {
        return Err(NotH14::TaskLength { words, size });
    }
    Ok(())
}

/// The length in words an H14 task's first word declares (bits 26:16; 0
/// marks a 16-byte filler frame). omarchy-ane reads it as the u16 at byte 2
/// masked to 11 bits (`split_h14_tasks`), the same bits.
pub const fn task_words(word0: u32) -> u32 {
    (word0 >> 16) & 0x7ff
}

/// The first word of an H14 task of `words` words, as [`check_descriptor_head`]
/// reads it (for synthetic test programs; no other field is known).
pub const fn task_word0(words: u32) -> u32 {
    (words & 0x7ff) << 16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(words: u32) -> [u8; DESCRIPTOR_HEAD] {
        let mut h = [0u8; DESCRIPTOR_HEAD];
        h[FRAME..].copy_from_slice(&task_word0(words).to_le_bytes());
        h
    }

    #[test]
    fn the_recorded_ids_pass_in_any_order() {
        assert_eq!(check_ids(SECTION_IDS), Ok(()));
        assert_eq!(check_ids([7, 5, 4, 3, 2, 1]), Ok(()));
    }

    #[test]
    fn an_h13_stream_as_the_library_staged_it_is_refused() {
        // Stream as section 1, weights as section 2.
        assert_eq!(check_ids([1, 2]), Err(NotH14::Sections { mask: 0b110 }));
        assert_eq!(check_ids([1]), Err(NotH14::Sections { mask: 0b10 }));
    }

    #[test]
    fn other_id_sets_are_refused() {
        for ids in [
            &[1, 2, 3, 4, 5][..],
            &[1, 2, 3, 4, 5, 6],
            &[1, 2, 3, 4, 5, 7, 8],
            &[1, 2, 3, 4, 5, 7, 7],
            &[1, 2, 3, 4, 5, 7, 40],
            &[],
        ] {
            assert!(check_ids(ids.iter().copied()).is_err(), "{ids:?}");
        }
    }

    #[test]
    fn a_descriptor_of_the_recorded_shape_passes() {
        assert_eq!(check_descriptor_head(&head(8), 16 + 32), Ok(()));
        assert_eq!(check_descriptor_head(&head(0x7ff), 16 + 0x7ff * 4), Ok(()));
    }

    #[test]
    fn an_h13_td_header_in_the_descriptor_is_refused() {
        // An H13 TD opens with W0 = TID | NID << 16 (nid 0x40), W1 =
        // ExeCycles | NextSize << 16, W2..W5 event masks: never a zero
        // frame when any of them is set.
        let mut h = [0u8; DESCRIPTOR_HEAD];
        h[..4].copy_from_slice(&0x0040_0000u32.to_le_bytes());
        assert_eq!(check_descriptor_head(&h, 0x300), Err(NotH14::FrameNotZero));
        h[..4].fill(0);
        h[8] = 1; // LogEvents
        assert_eq!(check_descriptor_head(&h, 0x300), Err(NotH14::FrameNotZero));
    }

    #[test]
    fn bad_task_lengths_are_refused() {
        assert_eq!(
            check_descriptor_head(&head(7), 0x100),
            Err(NotH14::TaskLength {
                words: 7,
                size: 0x100
            })
        );
        assert_eq!(
            check_descriptor_head(&head(9), 16 + 32),
            Err(NotH14::TaskLength {
                words: 9,
                size: 16 + 32
            })
        );
        assert_eq!(
            check_descriptor_head(&head(8), 16 + 31),
            Err(NotH14::DescriptorShort { size: 16 + 31 })
        );
        assert_eq!(
            check_descriptor_head(&head(8)[..DESCRIPTOR_HEAD - 1], 0x100),
            Err(NotH14::DescriptorShort { size: 0x100 })
        );
    }
}
