// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Programs: compiled networks, validated once.
//!
//! PROGRAM_CREATE takes a range of one of the file's BOs holding the task
//! stream (`tsk_size` bytes of TDs) followed, at `round_up(tsk_size, 16)`,
//! by the weights. The kernel copies the range into a BO of its own that
//! userspace cannot map or write, validates the task stream it copied
//! ([`crate::hw::td`]: stream bounds, known registers, chain, per-slot DMA
//! extents), and keeps the result. EXEC then only has to check the bindings
//! against the validated summary, and what the engine runs is exactly what
//! was validated.
//!
//! Slot 0 (the task stream) and slot 1 (the weights) of the program's
//! buffer-slot table point into that private copy; a bootstrap copy of the
//! first TD, stamped with each job's network id, sits in front of it, in
//! the first 16 KiB, so the stream starts on a 16 KiB boundary as in the
//! drivers that ran on hardware (their bootstrap TD has a buffer of its
//! own).
//!
//! H14 (T602x) programs are in the firmware's own format: PROGRAM_CREATE
//! takes them as sections, copies each into a kernel buffer in the
//! firmware's address space, and has the firmware load the program once per
//! distinct content ([`crate::h14::Firmware::load`]).

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::{prelude::*, sync::aref::ARef, sync::Arc};

use crate::ext::accel::{Device, File};
use crate::gem::{self, Bo};
use crate::h14::FwProgram;
use crate::hw::fw::msg::MAX_SECTIONS;
use crate::hw::fw::program as fw_program;
use crate::hw::soc::BackendKind;
use crate::hw::td::{self, ProgramSummary};
use crate::hw::uapi;
use crate::uarray;
use crate::vm::PAGE_SIZE;
use crate::AneDriver;

/// Programs a file may hold at once.
pub(crate) const MAX_PROGRAMS_PER_FILE: usize = 256;

/// Largest task stream (`tsk_size`) PROGRAM_CREATE stages in kernel
/// memory, whatever the program's size: 256 MiB, what the whole program
/// was limited to before the limit grew for the weights of real models,
/// so the staging bound of kernel-2 N9 does not move. (A stream needs at
/// most `MAX_TD_COUNT · MAX_TD_SIZE`, 128 MiB, of TDs; the rest is gaps.)
pub(crate) const STREAM_MAX: u64 = 256 << 20;

/// Alignment of the weights after the task stream ("packed at 16-byte
/// granularity" in the hardware's command layout).
const WEIGHTS_ALIGN: u64 = 16;

/// Alignment of the task stream in the device's address space (the
/// references' BAR0 is a 16 KiB-aligned buffer of its own).
pub(crate) const STREAM_ALIGN: u64 = 0x4000;

/// Offset of the task stream in the private copy: the bootstrap TD comes
/// first, in the 16 KiB before it.
fn stream_offset(td_size: u32) -> u64 {
    u64::from(td_size).next_multiple_of(STREAM_ALIGN)
}

/// A validated program.
pub(crate) struct Program {
    /// The private copy; jobs keep it alive through the program (H13).
    bo: Option<ARef<Bo>>,
    /// What the validator found: per-slot usage and minimum sizes (H13).
    pub(crate) summary: Option<ProgramSummary>,
    /// H14: the firmware's program and process.
    pub(crate) fw: Option<FwProgram>,
    /// Bytes per TD.
    pub(crate) td_size: u32,
    /// Number of TDs.
    pub(crate) td_count: u32,
    /// Device address of the bootstrap TD.
    pub(crate) bootstrap_iova: u64,
    /// Device address of the task stream (slot 0).
    pub(crate) stream_iova: u64,
    /// Device address of the weights (slot 1).
    pub(crate) weights_iova: u64,
    /// The network id the bootstrap TD carries, plus one (0: not stamped
    /// by this driver yet).
    stamped: AtomicU32,
}

impl Program {
    /// Stamps network id `nid` on the bootstrap TD (W0 bits 23:16), which
    /// the task manager reports back in the job's events. Only while no job
    /// of this program can be running (the engine runs one job at a time
    /// and holds the program of a failed one).
    ///
    /// The copy is the kernel's own (userspace cannot map or write it) and
    /// this is its only writer, so a TD that carries `nid` already (every
    /// job uses the same id) is not written again.
    pub(crate) fn stamp_nid(&self, nid: u8) -> Result {
        let want = u32::from(nid) + 1;
        if self.stamped.load(Ordering::Relaxed) == want {
            return Ok(());
        }
        let bo = self.bo.as_ref().ok_or(EINVAL)?;
        // Unknown until the write succeeded.
        self.stamped.store(0, Ordering::Relaxed);
        gem::write(bo, 2, &[nid])?;
        self.stamped.store(want, Ordering::Relaxed);
        Ok(())
    }
}

/// The programs of one file.
pub(crate) struct Programs {
    next: u32,
    list: KVec<(u32, Arc<Program>)>,
}

impl Programs {
    /// No programs.
    pub(crate) fn new() -> Self {
        Self {
            next: 1,
            list: KVec::new(),
        }
    }

    /// Where the program with `handle` is in `list`. Handles are handed
    /// out in increasing order and removals keep the order, so `list` is
    /// sorted by handle: a binary search, not a scan on every EXEC
    /// (kernel-2 N14).
    fn position(&self, handle: u32) -> Result<usize> {
        self.list
            .binary_search_by_key(&handle, |(h, _)| *h)
            .map_err(|_| ENOENT)
    }

    /// The program with `handle`: `ENOENT` if there is none.
    pub(crate) fn get(&self, handle: u32) -> Result<Arc<Program>> {
        let pos = self.position(handle)?;
        self.list.get(pos).map(|(_, p)| p.clone()).ok_or(ENOENT)
    }
}

/// `DRM_IOCTL_ANE_PROGRAM_CREATE`.
pub(crate) fn program_create(
    dev: &Device<AneDriver>,
    args: &mut uapi::ProgramCreate,
    file: &File<AneDriver>,
) -> Result<u32> {
    if args.flags != 0 || args.pad != 0 {
        return Err(EINVAL);
    }
    // The ioctl is unguarded (its firmware exchanges may take seconds):
    // H13 creation runs inside `drm_dev_enter` as a whole, H14 creation
    // outside it only for its firmware exchanges.
    let _entered = match dev.soc.backend {
        BackendKind::HostDriven => Some(dev.enter().ok_or(ENODEV)?),
        BackendKind::Firmware => None,
    };
    match dev.soc.backend {
        BackendKind::HostDriven => {
            // H13 programs are plain TD streams: no firmware sections.
            if args.sections != 0 || args.section_count != 0 || args.section_size != 0 {
                return Err(EINVAL);
            }
        }
        // The firmware backend (H14) loads programs by sections.
        BackendKind::Firmware => return program_create_fw(dev, args, file),
    }
    if args.size == 0 || args.tsk_size == 0 || args.td_size == 0 || args.td_count == 0 {
        return Err(EINVAL);
    }
    if args.size > dev.limits.program_max {
        return Err(E2BIG);
    }
    if args.tsk_size > STREAM_MAX {
        return Err(E2BIG);
    }
    if args.tsk_size > args.size {
        return Err(EINVAL);
    }
    let td_size = args.td_size;
    if td_size % 4 != 0 || !(td::MIN_TD_SIZE..=td::MAX_TD_SIZE).contains(&td_size) {
        return Err(EINVAL);
    }
    if args.td_count > td::MAX_TD_COUNT {
        return Err(EINVAL);
    }
    let src = gem::lookup(file, args.bo_handle)?;
    let end = args.offset.checked_add(args.size).ok_or(EINVAL)?;
    if end > src.size() as u64 {
        return Err(EINVAL);
    }
    let tsk = usize::try_from(args.tsk_size).map_err(|_| E2BIG)?;

    // Stage the task stream in kernel memory and validate exactly those
    // bytes: they are what goes into the private copy. The staging is
    // charged to the caller's memory cgroup (up to `STREAM_MAX` per ioctl,
    // kernel-2 N9).
    // It is written once, straight from the BO, and never zeroed first:
    // `read_uninit` writes every byte of the `tsk` it is given or fails,
    // and only then does the vector own them.
    let mut stream = KVVec::<u8>::with_capacity(tsk, GFP_KERNEL_ACCOUNT)?;
    gem::read_uninit(
        &src,
        args.offset,
        stream.spare_capacity_mut().get_mut(..tsk).ok_or(EINVAL)?,
    )?;
    // SAFETY: The capacity holds `tsk` bytes past the (zero) length, and
    // `read_uninit` succeeded, so it initialised all of them.
    unsafe { stream.inc_len(tsk) };
    // Up to `MAX_TD_COUNT` TDs: the CPU is yielded every few dozen
    // (kernel-2 N9).
    let summary = td::Program::new(&stream, td_size, args.td_count)
        .and_then(|p| p.validate_with(crate::ext::gem::cond_resched))
        .map_err(|e| {
            pr_debug!("program rejected: {:?}\n", e);
            EINVAL
        })?;

    // The private copy: bootstrap TD, task stream, weights.
    // The weights start at round_up(tsk_size, 16) in the user's range and
    // keep that distance from the stream in the copy.
    let weights_at = (args.tsk_size + WEIGHTS_ALIGN - 1) & !(WEIGHTS_ALIGN - 1);
    let weights_len = args.size.saturating_sub(weights_at);
    let stream_off = stream_offset(td_size);
    // Slots 0 and 1 point into the private copy: every read the program
    // makes there must stay within what was copied (the stream, the
    // weights), or the engine reads into the guard gap and faults the DART
    // for everyone (kernel-2 N1).
    summary
        .check_private(args.tsk_size, weights_len)
        .map_err(|e| {
            pr_debug!("program rejected: {:?}\n", e);
            EINVAL
        })?;
    let weights_off = stream_off.checked_add(weights_at).ok_or(EINVAL)?;
    let total = weights_off.checked_add(weights_len).ok_or(EINVAL)?;
    let total = (total + PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
    // W0 bits 23:16 of the bootstrap TD carry the network id; each job
    // stamps its own (`Program::stamp_nid`) before it is pushed. Every
    // byte of the copy outside these pieces is zero.
    let first = stream.get(..td_size as usize).ok_or(EINVAL)?;
    let bo = gem::create_private(
        dev,
        file,
        total,
        &[
            (0, gem::Piece::Bytes(first)),
            (stream_off, gem::Piece::Bytes(&stream)),
            (
                weights_off,
                gem::Piece::Bo(&src, args.offset + weights_at, weights_len),
            ),
        ],
    )?;

    let base = bo.mapping()?.iova();
    let program = Arc::new(
        Program {
            summary: Some(summary),
            fw: None,
            td_size,
            td_count: args.td_count,
            bootstrap_iova: base,
            stream_iova: base + stream_off,
            weights_iova: base + weights_off,
            stamped: AtomicU32::new(0),
            bo: Some(bo),
        },
        GFP_KERNEL_ACCOUNT,
    )?;
    add(file, program, args)
}

/// Gives `program` a handle in `file`.
fn add(
    file: &File<AneDriver>,
    program: Arc<Program>,
    args: &mut uapi::ProgramCreate,
) -> Result<u32> {
    let inner = file.inner();
    let mut progs = inner.programs.lock();
    if progs.list.len() >= MAX_PROGRAMS_PER_FILE {
        return Err(ENOSPC);
    }
    let handle = progs.next;
    progs.next = progs.next.checked_add(1).ok_or(ENOSPC)?;
    progs.list.push((handle, program), GFP_KERNEL_ACCOUNT)?;
    args.handle = handle;
    Ok(0)
}

/// Reads the section array of an H14 PROGRAM_CREATE.
fn read_sections(args: &uapi::ProgramCreate) -> Result<KVec<uapi::Section>> {
    let ours = core::mem::size_of::<uapi::Section>();
    let count = args.section_count as usize;
    // A bad count is refused by `read_each`, not by a failed allocation.
    let mut out = KVec::with_capacity(count.min(MAX_SECTIONS), GFP_KERNEL)?;
    uarray::read_each(
        args.sections,
        count,
        MAX_SECTIONS,
        args.section_size,
        ours,
        |b| {
            let section = uapi::Section {
                id: uarray::u32_at(b, 0)?,
                flags: uarray::u32_at(b, 4)?,
                offset: uarray::u64_at(b, 8)?,
                size: uarray::u64_at(b, 16)?,
            };
            out.push(section, GFP_KERNEL)?;
            Ok(())
        },
    )?;
    Ok(out)
}

/// H14 PROGRAM_CREATE: the program is the sections of the range, of the
/// shape every program that ran on the firmware had (ids 1-5 and 7, the
/// descriptor section opening with a zero frame and a task header,
/// [`crate::hw::fw::program`]); anything else, an H13 task stream above
/// all, is refused with `ENOEXEC` before the firmware sees it. Each
/// section is copied into a kernel buffer the firmware reads, and
/// the firmware loads the program (once per distinct content) and creates
/// its process. The task-descriptor fields must be zero: the firmware's
/// program format is its own.
fn program_create_fw(
    dev: &Device<AneDriver>,
    args: &mut uapi::ProgramCreate,
    file: &File<AneDriver>,
) -> Result<u32> {
    let entered = dev.enter().ok_or(ENODEV)?;
    let fw = dev.firmware().ok_or(ENODEV)?;
    if fw.state() != uapi::fw_state::RUNNING {
        return Err(EIO);
    }
    if args.td_size != 0 || args.td_count != 0 || args.tsk_size != 0 {
        return Err(EINVAL);
    }
    if args.size == 0 {
        return Err(EINVAL);
    }
    if args.size > dev.limits.program_max {
        return Err(E2BIG);
    }
    let src = gem::lookup(file, args.bo_handle)?;
    let end = args.offset.checked_add(args.size).ok_or(EINVAL)?;
    if end > src.size() as u64 {
        return Err(EINVAL);
    }
    let sections = read_sections(args)?;
    let mut seen = 0u32;
    for s in sections.iter() {
        if !(1..=MAX_SECTIONS as u32).contains(&s.id) || seen & (1 << s.id) != 0 {
            return Err(EINVAL);
        }
        seen |= 1 << s.id;
        if s.flags != 0 || s.size == 0 {
            return Err(EINVAL);
        }
        let s_end = s.offset.checked_add(s.size).ok_or(EINVAL)?;
        if s_end > args.size {
            return Err(EINVAL);
        }
    }
    // Only the recorded H14 shape reaches the firmware: an H13 task stream
    // (or anything else) is refused here, before a byte is copied.
    if fw_program::check_ids(sections.iter().map(|s| s.id)).is_err() {
        return Err(ENOEXEC);
    }
    // A program loaded already needs no copies: found first, it is created
    // even when the range for copies is full.
    let base = args.offset;
    if let Some(loaded) = fw.loaded(
        sections
            .iter()
            .map(|s| (s.id, &*src, base + s.offset, s.size)),
    )? {
        return add_fw(file, loaded, args);
    }
    let vm = fw.vm();
    let mut copies = KVec::with_capacity(sections.len(), GFP_KERNEL)?;
    for s in sections.iter() {
        let copy = gem::create_program_copy(dev, &vm, s.size)?;
        gem::copy(&src, args.offset + s.offset, &copy, 0, s.size)?;
        if s.id == fw_program::DESCRIPTOR {
            // Judged on the private copy: what is checked is what the
            // firmware would read.
            let mut head = [0u8; fw_program::DESCRIPTOR_HEAD];
            let n = core::cmp::min(s.size, head.len() as u64) as usize;
            gem::read(&copy, 0, head.get_mut(..n).ok_or(EINVAL)?)?;
            let head = head.get(..n).ok_or(EINVAL)?;
            if fw_program::check_descriptor_head(head, s.size).is_err() {
                return Err(ENOEXEC);
            }
        }
        copies.push((s.id, copy, s.size), GFP_KERNEL)?;
    }
    // The firmware exchanges (and the wait for a running call before them)
    // run outside `drm_dev_enter`: the unplug SRCU is shared by every DRM
    // device, so no unplug waits for them (kernel-2 N5). What they touch
    // stays valid: the firmware and its memory belong to the device data,
    // which the open file keeps, and an unbind shuts the transport down
    // under the firmware's lock, after which a load fails.
    drop(entered);
    let loaded = fw.load(copies);
    // Unplugged meanwhile: ENODEV, whatever the firmware answered.
    let _entered = dev.enter().ok_or(ENODEV)?;
    add_fw(file, loaded?, args)
}

/// Adds a handle for the loaded program `loaded` to `file`.
fn add_fw(
    file: &File<AneDriver>,
    loaded: FwProgram,
    args: &mut uapi::ProgramCreate,
) -> Result<u32> {
    let program = Arc::new(
        Program {
            summary: None,
            fw: Some(loaded),
            td_size: 0,
            td_count: 0,
            bootstrap_iova: 0,
            stream_iova: 0,
            weights_iova: 0,
            stamped: AtomicU32::new(0),
            bo: None,
        },
        GFP_KERNEL,
    )?;
    add(file, program, args)
}

/// `DRM_IOCTL_ANE_PROGRAM_DESTROY`. Jobs that use the program keep it alive
/// until they end.
pub(crate) fn program_destroy(
    _dev: &Device<AneDriver>,
    args: &mut uapi::ProgramDestroy,
    file: &File<AneDriver>,
) -> Result<u32> {
    if args.pad != 0 {
        return Err(EINVAL);
    }
    let inner = file.inner();
    let mut progs = inner.programs.lock();
    let pos = progs.position(args.handle)?;
    let _ = progs.list.remove(pos);
    Ok(0)
}
