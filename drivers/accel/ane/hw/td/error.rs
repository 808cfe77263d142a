// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Why a program was rejected.

use core::fmt;

use super::regs::Reg;

/// Which DMA of a TD an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dma {
    /// Tile DMA source 0 or 1 (BAR slot from RBase0 / RBase1).
    TileSrc(u8),
    /// Tile DMA destination (BAR slot from WBase).
    TileDst,
    /// Kernel coefficient DMA (BAR slots from KBase0..3).
    Kernel,
}

impl fmt::Display for Dma {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dma::TileSrc(i) => write!(f, "tile DMA source {i}"),
            Dma::TileDst => f.write_str("tile DMA destination"),
            Dma::Kernel => f.write_str("kernel DMA"),
        }
    }
}

/// What is wrong with the link from one TD to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainFault {
    /// NextSize does not announce a TD of the program's TD size.
    NextSize {
        /// NextSize found (words − 1).
        found: u32,
        /// NextSize a TD of the program's size has.
        expected: u32,
    },
    /// NextPointer is not a multiple of 4.
    NextPointerUnaligned {
        /// The NextPointer.
        next: u32,
    },
    /// NextPointer does not lie after the end of the current TD, so the next
    /// TD would overlap it or an earlier one.
    NextPointerBackwards {
        /// The NextPointer.
        next: u32,
    },
    /// The TD NextPointer names does not fit inside the program.
    NextPointerOutside {
        /// The NextPointer.
        next: u32,
        /// Program length in bytes.
        len: u64,
    },
    /// EON (end of network) is set on a TD that is not the last.
    EarlyEnd,
    /// The last TD does not have EON set.
    MissingEnd,
    /// The last TD still links to a next one.
    LinkAfterEnd {
        /// Its NextSize.
        next_size: u32,
        /// Its NextPointer.
        next_pointer: u32,
    },
}

impl fmt::Display for ChainFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChainFault::NextSize { found, expected } => write!(
                f,
                "NextSize is {found:#x} but TDs of this program need {expected:#x}"
            ),
            ChainFault::NextPointerUnaligned { next } => {
                write!(f, "NextPointer {next:#x} is not a multiple of 4")
            }
            ChainFault::NextPointerBackwards { next } => write!(
                f,
                "NextPointer {next:#x} does not lie after the end of this TD"
            ),
            ChainFault::NextPointerOutside { next, len } => write!(
                f,
                "NextPointer {next:#x} names a TD that does not fit in the {len:#x}-byte program"
            ),
            ChainFault::EarlyEnd => f.write_str("EON is set but TDs follow"),
            ChainFault::MissingEnd => f.write_str("the last TD does not have EON set"),
            ChainFault::LinkAfterEnd {
                next_size,
                next_pointer,
            } => write!(
                f,
                "the last TD links on (NextSize {next_size:#x}, NextPointer {next_pointer:#x})"
            ),
        }
    }
}

/// Why a program (or one TD of it) was rejected. TD numbers count from 0 in
/// chain order; stream offsets are byte offsets inside that TD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TdError {
    /// The TD size is not a multiple of 4 or outside
    /// [`MIN_TD_SIZE`](super::MIN_TD_SIZE)..=[`MAX_TD_SIZE`](super::MAX_TD_SIZE).
    TdSize {
        /// The TD size given.
        td_size: u32,
    },
    /// The TD count is 0 or above [`MAX_TD_COUNT`](super::MAX_TD_COUNT).
    TdCount {
        /// The TD count given.
        td_count: u32,
    },
    /// The program is shorter than its TDs.
    ProgramTooShort {
        /// Bytes `td_count` TDs need at least.
        needed: u64,
        /// Bytes the program has.
        len: u64,
    },
    /// A header word has reserved bits set.
    ReservedHeaderBits {
        /// TD number.
        td: u32,
        /// Header word (0 for W0 ... 9 for W9).
        word: u8,
        /// The reserved bits that are set.
        bits: u32,
    },
    /// The link from this TD to the next is wrong.
    Chain {
        /// TD number.
        td: u32,
        /// What is wrong.
        fault: ChainFault,
    },
    /// A stream's words run past the end of the TD.
    StreamOverrun {
        /// TD number.
        td: u32,
        /// Offset of the stream header in the TD.
        offset: u32,
        /// The stream header word.
        header: u32,
    },
    /// A stream's register address is not a multiple of 4.
    StreamUnaligned {
        /// TD number.
        td: u32,
        /// Offset of the stream header in the TD.
        offset: u32,
        /// The stream header word.
        header: u32,
    },
    /// A stream writes an address outside every known register window.
    UnknownRegister {
        /// TD number.
        td: u32,
        /// Offset of the stream header in the TD.
        offset: u32,
        /// The stream header word.
        header: u32,
        /// The first address outside the known windows.
        addr: u32,
    },
    /// Two streams of one TD write the same register.
    DuplicateRegister {
        /// TD number.
        td: u32,
        /// Offset of the second stream's header in the TD.
        offset: u32,
        /// The register.
        reg: Reg,
    },
    /// A register that decides where a DMA goes has not been written by
    /// this TD or an earlier one of the program (its value would be left
    /// over from whatever ran before).
    RegisterNotSet {
        /// TD number.
        td: u32,
        /// The register.
        reg: Reg,
    },
    /// A DMA base, stride or size has bits \[5:0\] set.
    Misaligned {
        /// TD number.
        td: u32,
        /// The register.
        reg: Reg,
        /// Its value.
        value: u32,
    },
    /// An element format code that is not known (3).
    UnknownFormat {
        /// TD number.
        td: u32,
        /// The register holding the code.
        reg: Reg,
        /// The code.
        code: u32,
    },
    /// A dimension of a tensor that is transferred by DMA is zero.
    ZeroDimension {
        /// TD number.
        td: u32,
        /// The DMA.
        dma: Dma,
        /// The register holding the dimension.
        reg: Reg,
    },
    /// A DMA reaches beyond the 4 GiB a 32-bit device address can cover.
    ExtentTooLarge {
        /// TD number.
        td: u32,
        /// The DMA.
        dma: Dma,
    },
    /// The tile DMA destination writes the command or the kernel slot.
    WriteToProtectedSlot {
        /// TD number.
        td: u32,
        /// The slot WBase names.
        slot: u8,
    },
    /// A coefficient channel is enabled but no KBase is.
    CoeffWithoutKernelBase {
        /// TD number.
        td: u32,
        /// The first enabled channel.
        channel: u32,
    },
    /// A DMA whose addressing is not known is enabled (the inferred extra
    /// kernel DMA channels).
    UnsupportedDma {
        /// TD number.
        td: u32,
        /// Its configuration register.
        reg: Reg,
    },
}

impl fmt::Display for TdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TdError::TdSize { td_size } => write!(
                f,
                "TD size {td_size:#x} is not a multiple of 4 in {:#x}..={:#x}",
                super::MIN_TD_SIZE,
                super::MAX_TD_SIZE
            ),
            TdError::TdCount { td_count } => write!(
                f,
                "TD count {td_count} is not in 1..={}",
                super::MAX_TD_COUNT
            ),
            TdError::ProgramTooShort { needed, len } => write!(
                f,
                "program of {len:#x} bytes is shorter than its TDs ({needed:#x} bytes)"
            ),
            TdError::ReservedHeaderBits { td, word, bits } => {
                write!(f, "TD {td}: reserved bits {bits:#010x} set in header word W{word}")
            }
            TdError::Chain { td, fault } => write!(f, "TD {td}: {fault}"),
            TdError::StreamOverrun { td, offset, header } => write!(
                f,
                "TD {td}: stream at {offset:#x} (header {header:#010x}) runs past the end of the TD"
            ),
            TdError::StreamUnaligned { td, offset, header } => write!(
                f,
                "TD {td}: stream at {offset:#x} (header {header:#010x}) has an unaligned register address"
            ),
            TdError::UnknownRegister {
                td,
                offset,
                header,
                addr,
            } => write!(
                f,
                "TD {td}: stream at {offset:#x} (header {header:#010x}) writes unknown register address {addr:#07x}"
            ),
            TdError::DuplicateRegister { td, offset, reg } => write!(
                f,
                "TD {td}: stream at {offset:#x} writes {reg} a second time"
            ),
            TdError::RegisterNotSet { td, reg } => write!(
                f,
                "TD {td}: {reg} is used but no TD of the program has written it"
            ),
            TdError::Misaligned { td, reg, value } => write!(
                f,
                "TD {td}: {reg} = {value:#x} is not a multiple of 64"
            ),
            TdError::UnknownFormat { td, reg, code } => {
                write!(f, "TD {td}: {reg} holds unknown element format {code}")
            }
            TdError::ZeroDimension { td, dma, reg } => {
                write!(f, "TD {td}: {dma} has a zero dimension in {reg}")
            }
            TdError::ExtentTooLarge { td, dma } => {
                write!(f, "TD {td}: {dma} reaches beyond 4 GiB")
            }
            TdError::WriteToProtectedSlot { td, slot } => write!(
                f,
                "TD {td}: tile DMA destination writes BAR slot {slot} (command or kernel buffer)"
            ),
            TdError::CoeffWithoutKernelBase { td, channel } => write!(
                f,
                "TD {td}: coefficient channel {channel} is enabled but no KBase is"
            ),
            TdError::UnsupportedDma { td, reg } => {
                write!(f, "TD {td}: {reg} enables a DMA whose addressing is not known")
            }
        }
    }
}
