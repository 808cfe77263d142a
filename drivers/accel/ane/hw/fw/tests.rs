// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Integration tests of the firmware path: the driver-side boot routine and
//! ChMan host, connected to the firmware model through an in-memory bus (a
//! `Vec`-backed device memory), plus property tests that no decoder panics
//! on arbitrary bytes.
//!
//! Every wait is bounded by a poll count, so a hang shows up as a typed
//! timeout, never as a stuck test.

extern crate std;

use std::vec;
use std::vec::Vec;

use super::super::test_rng::Rng;
use super::boot::{self, *};
use super::chman::{self, *};
use super::image;
use super::model::{self, *};
use super::msg::{self, *};
use super::patch;
use super::regs::{self, scratch};

/// Device address of the first byte of test memory.
const BASE: u64 = 0x10_0000;
/// Bytes of test memory.
const MEM_LEN: usize = 8 << 20;
/// Polls for an exchange (steps of one model tick each).
const POLLS: u32 = 200;

/// A staged image window with the patches the model checks, for an
/// execution base `base`, with the T6021's values.
fn patched_image(base: u64) -> Vec<u8> {
    patched_image_for(base, &patch::T6021_CHIP)
}

/// The same with `chip`'s `RTK_soc`, revision and tunables block.
fn patched_image_for(base: u64, chip: &patch::Chip) -> Vec<u8> {
    let mut b = vec![0u8; patch::TUNABLES_VM + patch::TUNABLES_BLOCK];
    let at = patch::DATA_BASE_VM;
    b[at..at + 8].copy_from_slice(&(base + patch::DATA_VMADDR).to_le_bytes());
    let at = patch::RTK_RECORDS[1].vm + patch::RTK_HEADER;
    b[at..at + 4].copy_from_slice(&chip.soc.to_le_bytes());
    let at = patch::RTK_RECORDS[2].vm + patch::RTK_HEADER;
    b[at..at + 4].copy_from_slice(&chip.revision.to_le_bytes());
    let at = patch::TUNABLES_VM;
    b[at + 3] = chip.tunables.records.len() as u8;
    let key = chip.tunables.key(chip.revision).unwrap();
    b[at + 4..at + 8].copy_from_slice(&key.to_le_bytes());
    for (i, r) in chip.tunables.records.iter().enumerate() {
        let v = at + patch::TUNABLES_HEADER + i * patch::TUNABLE_LEN + 12;
        b[v..v + 8].copy_from_slice(&r.val.to_le_bytes());
    }
    b
}

/// `Vec`-backed device memory with a bump allocator, plus the two fixed
/// windows the firmware reaches: its image at [`regs::FW_IOVA`] and the PMU
/// page at IOVA == PA.
struct VecMem {
    bytes: Vec<u8>,
    next: u64,
    bufs: Vec<FwBuf>,
    fail: Option<BufKind>,
    /// The staged image's window (what the kernel aliases at the entry).
    image: Vec<u8>,
    /// The PMU page, when mapped.
    pmu: Option<Vec<u8>>,
}

impl VecMem {
    fn new() -> Self {
        VecMem {
            bytes: vec![0; MEM_LEN],
            next: BASE,
            bufs: Vec::new(),
            fail: None,
            image: patched_image(regs::FW_IOVA),
            pmu: Some(vec![0; 0x4000]),
        }
    }

    /// The bytes behind `[iova, iova + len)` in a fixed window, if any.
    fn fixed(&mut self, iova: u64, len: usize) -> Option<&mut [u8]> {
        let window = |base: u64, buf: &mut Vec<u8>| -> Option<core::ops::Range<usize>> {
            let start = usize::try_from(iova.checked_sub(base)?).ok()?;
            let end = start.checked_add(len)?;
            (end <= buf.len()).then_some(start..end)
        };
        if let Some(r) = window(regs::FW_IOVA, &mut self.image) {
            return self.image.get_mut(r);
        }
        let pmu = self.pmu.as_mut()?;
        let r = window(regs::PMU_PA, pmu)?;
        pmu.get_mut(r)
    }

    fn range(&self, dva: u64, len: usize) -> Option<core::ops::Range<usize>> {
        let start = usize::try_from(dva.checked_sub(BASE)?).ok()?;
        let end = start.checked_add(len)?;
        (end <= self.bytes.len()).then_some(start..end)
    }

    fn alloc(&mut self, kind: BufKind, len: usize) -> Result<FwBuf, MemError> {
        if self.fail == Some(kind) {
            return Err(MemError::NoMemory);
        }
        let len = len.next_multiple_of(0x4000);
        let dva = self.next;
        self.range(dva, len).ok_or(MemError::NoMemory)?;
        self.next += len as u64;
        let b = FwBuf {
            id: self.bufs.len() as u32,
            dva,
            len,
        };
        self.bufs.push(b);
        Ok(b)
    }

    fn get(&self, dva: u64, len: usize) -> &[u8] {
        &self.bytes[self.range(dva, len).unwrap()]
    }

    fn set(&mut self, dva: u64, src: &[u8]) {
        let r = self.range(dva, src.len()).unwrap();
        self.bytes[r].copy_from_slice(src);
    }
}

impl model::Mem for VecMem {
    fn read(&mut self, iova: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        if let Some(b) = self.fixed(iova, buf.len()) {
            buf.copy_from_slice(b);
            return Ok(());
        }
        let r = self.range(iova, buf.len()).ok_or(MemFault { iova })?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, iova: u64, buf: &[u8]) -> Result<(), MemFault> {
        if let Some(b) = self.fixed(iova, buf.len()) {
            b.copy_from_slice(buf);
            return Ok(());
        }
        let r = self.range(iova, buf.len()).ok_or(MemFault { iova })?;
        self.bytes[r].copy_from_slice(buf);
        Ok(())
    }
}

/// The executor of the tests: every output byte is the wrapping sum of the
/// inputs' bytes at the same index, plus the number of sections.
/// What the executor saw of one call: program, process, cookie, sections,
/// buffers.
type Seen = (u32, u32, u64, Vec<SectionRef>, Vec<IoRef>);

#[derive(Default)]
struct SumExec {
    calls: Vec<Seen>,
    fail: bool,
    /// Run the call on [`model::NullExecutor`], as the kernel's simulator
    /// does, instead of summing.
    null: bool,
}

impl Executor for SumExec {
    fn execute<M: model::Mem + ?Sized>(
        &mut self,
        mem: &mut M,
        call: &Call<'_>,
    ) -> Result<(), ExecFailed> {
        self.calls.push((
            call.program,
            call.process,
            call.cookie,
            call.sections.to_vec(),
            call.io.to_vec(),
        ));
        if self.fail {
            return Err(ExecFailed { code: 7 });
        }
        if self.null {
            return model::NullExecutor.execute(mem, call);
        }
        for out in call.io.iter().filter(|r| r.kind == IoKind::Output) {
            let mut acc = vec![call.sections.len() as u8; out.size as usize];
            for inp in call.io.iter().filter(|r| r.kind == IoKind::Input) {
                let mut b = vec![0u8; inp.size as usize];
                mem.read(inp.iova, &mut b)
                    .map_err(|_| ExecFailed { code: 1 })?;
                for (a, x) in acc.iter_mut().zip(&b) {
                    *a = a.wrapping_add(*x);
                }
            }
            mem.write(out.iova, &acc)
                .map_err(|_| ExecFailed { code: 2 })?;
        }
        Ok(())
    }
}

/// The bus: registers go to the model, every delay step ticks it.
struct Bus {
    model: FwModel,
    mem: VecMem,
    exec: SumExec,
    sleeps: u64,
    writes: Vec<(usize, u64)>,
    /// Every register access and wait, as `docs/hardware-record.md`'s
    /// `mmio-trace` blocks spell them.
    trace: Vec<std::string::String>,
    /// The buffers `FwMem::alloc` handed out as `BufKind::Shared`.
    shared: Vec<FwBuf>,
}

impl Bus {
    fn new(cfg: ModelConfig) -> Self {
        Bus {
            model: FwModel::new(cfg),
            mem: VecMem::new(),
            exec: SumExec::default(),
            sleeps: 0,
            writes: Vec::new(),
            trace: Vec::new(),
            shared: Vec::new(),
        }
    }

    fn tick(&mut self) {
        self.model.tick(&mut self.mem, &mut self.exec);
    }
}

/// The name of an engine register in a trace.
fn reg_name(off: usize) -> std::string::String {
    use std::format;
    if let Some(i) = (0..regs::SCRATCH_COUNT).find(|i| scratch(*i) == off) {
        return format!("SCRATCH{i}");
    }
    match off {
        regs::CPU_CONTROL => "CPU_CONTROL".into(),
        regs::CPU_STATUS => "CPU_STATUS".into(),
        regs::RVBAR => "RVBAR".into(),
        regs::IPI_SET => "IPI_SET".into(),
        regs::IPI_PENDING => "IPI_PENDING".into(),
        regs::IPI_ACK => "IPI_ACK".into(),
        o => format!("engine+{o:#x}"),
    }
}

impl Regs for Bus {
    fn read32(&mut self, off: usize) -> u32 {
        let v = self.model.read32(off);
        self.trace
            .push(std::format!("R {} -> {v:#x}", reg_name(off)));
        v
    }
    fn write32(&mut self, off: usize, val: u32) {
        self.writes.push((off, u64::from(val)));
        self.trace
            .push(std::format!("W {} = {val:#x}", reg_name(off)));
        self.model.write32(off, val)
    }
    fn read64(&mut self, off: usize) -> u64 {
        let v = self.model.read64(off);
        self.trace
            .push(std::format!("R64 {} -> {v:#x}", reg_name(off)));
        v
    }
    fn write64(&mut self, off: usize, val: u64) {
        self.writes.push((off, val));
        self.trace
            .push(std::format!("W64 {} = {val:#x}", reg_name(off)));
        self.model.write64(off, val)
    }
}

impl Pmgr for Bus {
    fn pmgr_read32(&mut self, off: usize) -> u32 {
        let v = self.model.pmgr_read32(off);
        self.trace.push(std::format!("R pmgr+{off:#x} -> {v:#x}"));
        v
    }
}

impl Delay for Bus {
    fn sleep_us(&mut self, us: u32) {
        self.sleeps += 1;
        self.trace.push(std::format!("# wait {us} us"));
        self.tick();
    }
}

impl FwMem for Bus {
    fn alloc(&mut self, kind: BufKind, len: usize) -> Result<FwBuf, MemError> {
        let b = self.mem.alloc(kind, len)?;
        if kind == BufKind::Shared {
            self.shared.push(b);
        }
        Ok(b)
    }
    fn write_bytes(&mut self, buf: &FwBuf, off: usize, src: &[u8]) -> Result<(), MemError> {
        if self.mem.bufs.get(buf.id as usize) != Some(buf) || off + src.len() > buf.len {
            return Err(MemError::BadBuffer);
        }
        self.mem.set(buf.dva + off as u64, src);
        Ok(())
    }
    fn read_bytes(&mut self, buf: &FwBuf, off: usize, dst: &mut [u8]) -> Result<(), MemError> {
        if self.mem.bufs.get(buf.id as usize) != Some(buf) || off + dst.len() > buf.len {
            return Err(MemError::BadBuffer);
        }
        dst.copy_from_slice(self.mem.get(buf.dva + off as u64, dst.len()));
        Ok(())
    }
    fn barrier(&mut self) {
        self.trace.push("# barrier".into());
    }
}

impl SharedBufs for Bus {
    fn shared_buf(&mut self, index: u32) -> Option<FwBuf> {
        self.shared.get(index as usize).copied()
    }
}

/// Boot parameters for tests: 50 polls per wait.
const FAST: BootConfig = BootConfig {
    ready_polls: 50,
    done_polls: 50,
    poll_us: 1,
    phase_gap_us: 0,
    ..BootConfig::DEFAULT
};

fn boot_with(cfg: ModelConfig) -> (Bus, Result<Booted, BootError>) {
    let mut bus = Bus::new(cfg);
    let r = boot::boot(&mut bus, &FAST);
    (bus, r)
}

fn booted(cfg: ModelConfig) -> (Bus, Booted, Host) {
    let (mut bus, r) = boot_with(cfg);
    let b = r.unwrap();
    let host = Host::new(&mut bus, b.ipc, b.table).unwrap();
    (bus, b, host)
}

fn config_get(bus: &mut Bus, host: &mut Host) -> Result<u32, ExchangeError> {
    let mut m = [0u8; CONFIG_GET_LEN];
    let n = encode_config_get(&mut m).unwrap();
    let mut r = [0u8; CONFIG_GET_LEN];
    host.exchange(bus, &m[..n], &mut r, POLLS, 50)?;
    msg::config_get_reply(&r).map_err(ExchangeError::Msg)
}

fn load(bus: &mut Bus, host: &mut Host, secs: &[SectionRef]) -> Result<u32, ExchangeError> {
    let mut m = [0u8; PROGRAM_LOAD_LEN];
    let n = encode_program_load(&mut m, secs).unwrap();
    let mut r = [0u8; PROGRAM_LOAD_LEN];
    host.exchange(bus, &m[..n], &mut r, POLLS, 50)?;
    msg::program_load_reply(&r).map_err(ExchangeError::Msg)
}

fn proc_create(bus: &mut Bus, host: &mut Host, program: u32) -> Result<u32, ExchangeError> {
    let mut m = [0u8; PROC_CREATE_LEN];
    let n = encode_proc_create(&mut m, program).unwrap();
    let mut r = [0u8; PROC_CREATE_LEN];
    host.exchange(bus, &m[..n], &mut r, POLLS, 50)?;
    msg::proc_create_reply(&r).map_err(ExchangeError::Msg)
}

fn call(
    bus: &mut Bus,
    host: &mut Host,
    args: &CallArgs,
    io: &[IoRef],
) -> Result<(), ExchangeError> {
    let mut m = [0u8; msg::call_len(MAX_IO)];
    let n = encode_procedure_call(&mut m, args, io).unwrap();
    let mut r = [0u8; CALL_HEADER_LEN];
    host.exchange(bus, &m[..n], &mut r, POLLS, 50)?;
    msg::check_reply(&r, OP_PROCEDURE_CALL).map_err(ExchangeError::Msg)
}

/// A buffer in test memory filled with `bytes`.
fn buffer(bus: &mut Bus, bytes: &[u8]) -> FwBuf {
    let b = bus.mem.alloc(BufKind::Shared, bytes.len().max(1)).unwrap();
    bus.mem.set(b.dva, bytes);
    b
}

/// Program sections in test memory: `(id, bytes)`.
fn sections(bus: &mut Bus, secs: &[(u32, &[u8])]) -> Vec<SectionRef> {
    secs.iter()
        .map(|(id, bytes)| {
            let b = buffer(bus, bytes);
            SectionRef {
                id: *id,
                iova: b.dva,
                size: bytes.len() as u64,
            }
        })
        .collect()
}

/// A synthetic program of the recorded H14 shape
/// ([`super::program`]): the six section ids, the descriptor (id 3) a zero
/// frame and one 8-word task, the others `fill` bytes. Its bytes mean
/// nothing to any firmware: the transport tests only carry it.
fn h14_sections(fill: u8) -> Vec<(u32, Vec<u8>)> {
    let mut desc = vec![0u8; super::program::FRAME + 32];
    desc[16..20].copy_from_slice(&super::program::task_word0(8).to_le_bytes());
    super::program::SECTION_IDS
        .iter()
        .map(|&id| {
            if id == super::program::DESCRIPTOR {
                (id, desc.clone())
            } else {
                (id, vec![fill; 16])
            }
        })
        .collect()
}

/// [`sections`] of [`h14_sections`].
fn h14_program(bus: &mut Bus, fill: u8) -> Vec<SectionRef> {
    let owned = h14_sections(fill);
    let secs: Vec<(u32, &[u8])> = owned.iter().map(|(i, b)| (*i, &b[..])).collect();
    sections(bus, &secs)
}

/// A booted, configured firmware with one loaded program and its process,
/// and one 64-byte output buffer as buffer 4: what a call needs.
fn ready_for_call(cfg: ModelConfig) -> (Bus, Host, u32, u32, [IoRef; 1]) {
    let (mut bus, _, mut host) = booted(cfg);
    config_get(&mut bus, &mut host).unwrap();
    let secs = h14_program(&mut bus, 1);
    let program = load(&mut bus, &mut host, &secs).unwrap();
    let process = proc_create(&mut bus, &mut host, program).unwrap();
    let out = buffer(&mut bus, &[0u8; 64]);
    let io = [IoRef {
        buffer_id: 4,
        kind: IoKind::Output,
        iova: out.dva,
        size: 64,
    }];
    (bus, host, program, process, io)
}

#[test]
fn clean_boot() {
    let (mut bus, b, _host) = booted(ModelConfig::DEFAULT);
    assert_eq!(b.scratch0, 4);
    assert_eq!(b.ordinal, 0x1_0440);
    assert_eq!(b.fw_address, model::FW_ADDRESS);
    assert!(b.rvbar_latched);
    assert_eq!(b.cpu_status, regs::CPU_STATUS_RELEASED);
    assert_eq!(b.heap.map(|h| h.len), Some(0x1_0000));
    assert_eq!(
        b.ipc.len, 0x1_4000,
        "the ordinal's bytes, in whole 16 KiB pages"
    );
    for (ch, spec) in b.table.channels.iter().zip(LAYOUT.iter()) {
        assert_eq!(
            (ch.kind, ch.bit, ch.slots, ch.ring),
            (spec.kind, spec.bit, spec.slots, b.ipc.dva + spec.ring),
            "{}: the ring is an absolute address",
            spec.name
        );
    }
    // The init struct sits at the start of the pool, which S6 published.
    let init = InitStruct::decode(bus.mem.get(b.pool.dva, INIT_LEN)).unwrap();
    assert_eq!(init.check(), Ok(()));
    assert_eq!(
        (init.ipc, init.pool, init.ordinal),
        (b.ipc.dva, b.pool.dva, 0x1_0440)
    );
    assert_eq!(init.fwim, regs::FW_IOVA);
    assert_eq!(init.pool_word0, 0x4_0000);
    assert!(init.prevent_nap);
    assert_eq!(bus.model.init(), Some(init));
    assert!(bus.model.granted());
    // The contract's writes, in order: S1, (no RVBAR write), S3, S6, ack.
    let w = &bus.writes;
    let s = |i| scratch(i);
    let mut expect: Vec<(usize, u64)> = regs::GRANT_WRITES
        .iter()
        .map(|(o, v)| (*o, u64::from(*v)))
        .collect();
    expect.extend((0..8).map(|i| (s(i), 0)));
    expect.extend([(s(6), 1), (s(7), 1), (s(7), 0)]);
    expect.extend([(regs::CPU_CONTROL, 0), (regs::CPU_CONTROL, 0x10)]);
    expect.extend([
        (s(0), b.pool.dva & 0xffff_ffff),
        (s(1), b.pool.dva >> 32),
        (s(7), u64::from(regs::MAGIC_WAKE)),
        (s(3), u64::from(regs::MAGIC_READY)),
    ]);
    assert_eq!(w, &expect);
    // Every host→target slot is host-owned.
    for (i, spec) in LAYOUT
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == KIND_H2T)
    {
        let ch = b.table.channels[i];
        for slot in 0..spec.slots {
            assert_eq!(
                bus.mem
                    .get(b.ipc.dva + ch.slot(slot, b.ipc.dva).unwrap() as u64, 1),
                &[1]
            );
        }
    }
    bus.tick();
    assert_eq!(bus.model.phase(), Phase::Running);
    assert_eq!(bus.model.violations(), Violations::default());
    assert!(bus.sleeps < 20, "boot took {} polls", bus.sleeps);
}

#[test]
fn unlatched_rvbar_gets_the_fold() {
    let cfg = ModelConfig {
        rvbar: 0,
        ..ModelConfig::DEFAULT
    };
    let (mut bus, b, _) = booted(cfg);
    assert!(!b.rvbar_latched);
    assert_eq!(
        bus.model.read64(regs::RVBAR),
        regs::rvbar_fold(regs::FW_IOVA)
    );
    assert_eq!(bus.model.violations().rvbar_rewrites, 0);
    assert_eq!(
        bus.writes.iter().filter(|(o, _)| *o == regs::RVBAR).count(),
        1
    );
}

#[test]
fn config_get_serves_shared_malloc() {
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    assert_eq!(config_get(&mut bus, &mut host), Ok(0x14));
    assert_eq!(host.stats().sm_buffers, 1, "the model asked once");
    assert_eq!(host.stats().sm_bytes, model::SM_REQUEST.size);
    assert!(bus.model.shared_buffer().is_some());
    // The cursor moved: more exchanges than IO slots all succeed.
    for _ in 0..20 {
        assert_eq!(config_get(&mut bus, &mut host), Ok(0x14));
    }
    assert_eq!(host.stats().exchanges, 21);
    assert_eq!(bus.model.stats().config_gets, 21);
    assert_eq!(host.stats().sm_buffers, 1);
    assert!(!host.quarantined());
    // Property write (fw_perf_mode).
    let mut m = [0u8; PROPERTY_WRITE_LEN];
    let (c, p, v) = PERF_MODE;
    let n = encode_property_write(&mut m, c, p, v).unwrap();
    let mut r = [0u8; 8];
    host.exchange(&mut bus, &m[..n], &mut r, POLLS, 50).unwrap();
    assert_eq!(msg::check_reply(&r, OP_CH_PROPERTY_WRITE), Ok(()));
    assert_eq!(bus.model.last_property(), Some(PERF_MODE));
}

#[test]
fn load_proc_call_finish_round_trip() {
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    let kernel: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    let mut shaped = h14_sections(7);
    shaped.retain(|(id, _)| *id != 2 && *id != 3);
    let desc = h14_sections(7).remove(2).1;
    let mut all: Vec<(u32, &[u8])> = vec![(3, &desc[..]), (2, &kernel[..])];
    all.extend(shaped.iter().map(|(i, b)| (*i, &b[..])));
    let secs = sections(&mut bus, &all);
    let text = [0xa5u8; 64];
    let digest_before = program_digest(&[(3, &text[..]), (2, &kernel[..])]);
    let program = load(&mut bus, &mut host, &secs).unwrap();
    assert_eq!(program, 0);
    let process = proc_create(&mut bus, &mut host, program).unwrap();
    assert_eq!(process, 1);
    let a = buffer(&mut bus, &[1u8; 256]);
    let b = buffer(&mut bus, &[2u8; 256]);
    let out = buffer(&mut bus, &[0u8; 256]);
    let io = [
        IoRef {
            buffer_id: 5,
            kind: IoKind::Input,
            iova: a.dva,
            size: 256,
        },
        IoRef {
            buffer_id: 6,
            kind: IoKind::Input,
            iova: b.dva,
            size: 256,
        },
        IoRef {
            buffer_id: 4,
            kind: IoKind::Output,
            iova: out.dva,
            size: 256,
        },
    ];
    // Enough calls to wrap the IO ring (16 slots) and IO_T2H (64 slots).
    for i in 0..40u64 {
        let cookie = CALL_COOKIE;
        let args = CallArgs {
            program,
            process,
            priority: 2 + (i % 6) as u32,
            cookie,
        };
        call(&mut bus, &mut host, &args, &io).unwrap();
        let e = host.wait_finish(&mut bus, cookie, POLLS, 50).unwrap();
        assert_eq!(e.state, EventState::Finish);
        assert_eq!((e.cookie, e.program, e.process), (cookie, program, process));
        assert_eq!(
            bus.mem.get(out.dva, 256),
            &[9u8; 256][..],
            "1 + 2 + six sections"
        );
    }
    let (p, q, cookie, secs_seen, io_seen) = bus.exec.calls.last().unwrap().clone();
    assert_eq!((p, q, cookie), (program, process, CALL_COOKIE));
    assert_eq!(
        secs_seen.iter().map(|s| s.id).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 7],
        "id order"
    );
    assert_eq!(secs_seen[1], secs[1], "section 2, the kernel");
    assert_eq!(io_seen, io);
    assert_eq!(
        bus.model.stats().events,
        80,
        "a dispatch and a finish per call"
    );
    assert_eq!(host.stats().bad_events, 0);
    // The digest is a function of the sections only.
    let kernel_now = bus.mem.get(secs[1].iova, 300).to_vec();
    assert_eq!(
        program_digest(&[(3, &text[..]), (2, &kernel_now[..])]),
        digest_before
    );
    assert_ne!(
        program_digest(&[(2, &kernel[..]), (3, &text[..])]),
        digest_before
    );
    assert_eq!(bus.model.violations(), Violations::default());
}

/// The record ran only cookie 0xADD0 (OA-RT `ANE_CALL_COOKIE`; hw-2 row
/// 30): the model refuses any other in order, so a driver that sends
/// another fails its calls on the simulator.
#[test]
fn only_the_cookie_that_ran_is_accepted() {
    assert_eq!(CALL_COOKIE, 0xadd0);
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig::DEFAULT);
    for cookie in [1, 2, 0xadd1] {
        let args = CallArgs {
            program,
            process,
            priority: 2,
            cookie,
        };
        let mut m = [0u8; msg::call_len(MAX_IO)];
        let n = encode_procedure_call(&mut m, &args, &io).unwrap();
        let mut r = [0u8; CALL_HEADER_LEN];
        let reply = host
            .exchange_status(&mut bus, &m[..n], &mut r, POLLS, 50)
            .unwrap();
        assert_eq!(reply.status, status::BAD_COOKIE, "cookie {cookie:#x}");
    }
    assert_eq!(bus.model.stats().bad_cookies, 3);
    assert_eq!(bus.model.stats().calls, 0, "nothing ran");
    let args = CallArgs {
        program,
        process,
        priority: 2,
        cookie: CALL_COOKIE,
    };
    call(&mut bus, &mut host, &args, &io).unwrap();
    assert_eq!(
        host.wait_finish(&mut bus, CALL_COOKIE, POLLS, 50)
            .unwrap()
            .cookie,
        CALL_COOKIE
    );
}

/// With one cookie for every call, a finish event kept from an earlier
/// call would end the next one at once: the driver forgets kept finishes
/// before each CALL (`h14::Firmware::call`).
#[test]
fn a_kept_finish_is_forgotten_before_the_next_call() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig {
        finish_delay: 5,
        any_cookie: true,
        ..ModelConfig::DEFAULT
    });
    let first = CallArgs {
        program,
        process,
        priority: 2,
        cookie: CALL_COOKIE,
    };
    let second = CallArgs { cookie: 2, ..first };
    call(&mut bus, &mut host, &first, &io).unwrap();
    call(&mut bus, &mut host, &second, &io).unwrap();
    host.wait_finish(&mut bus, 2, POLLS, 50).unwrap();
    assert_eq!(
        host.forget_finished(),
        1,
        "the first call's finish was kept"
    );
    assert_eq!(host.take_finish(CALL_COOKIE), None);
}

#[test]
fn pipelined_calls_are_matched_by_cookie() {
    // The host's matching of several cookies; the driver sends only
    // CALL_COOKIE, one call at a time, so the model must echo others here.
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig {
        finish_delay: 5,
        any_cookie: true,
        ..ModelConfig::DEFAULT
    });
    let first = CallArgs {
        program,
        process,
        priority: 2,
        cookie: 1,
    };
    let second = CallArgs { cookie: 2, ..first };
    call(&mut bus, &mut host, &first, &io).unwrap();
    call(&mut bus, &mut host, &second, &io).unwrap();
    assert_eq!(host.wait_finish(&mut bus, 2, POLLS, 50).unwrap().cookie, 2);
    // The first call's finish was kept while waiting for the second.
    assert_eq!(host.take_finish(1).map(|e| e.cookie), Some(1));
    assert_eq!(host.take_finish(1), None, "claimed once");
}

#[test]
fn wrong_process_and_program_are_refused() {
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    let secs = h14_program(&mut bus, 1);
    let program = load(&mut bus, &mut host, &secs).unwrap();
    assert_eq!(
        proc_create(&mut bus, &mut host, 9),
        Err(ExchangeError::Msg(MsgError::Status {
            opcode: OP_PROC_CREATE,
            status: status::NO_PROGRAM
        }))
    );
    assert!(host.quarantined());
    assert_eq!(
        proc_create(&mut bus, &mut host, program),
        Err(ExchangeError::Quarantined)
    );
}

/// An H13 task stream is never taken for an H14 program: staged the way
/// the library used to (stream as section 1, weights as 2), or as a
/// six-section program whose descriptor is an H13 TD, PROGRAM_LOAD is
/// refused with `NOT_H14` and nothing is loaded.
#[test]
fn the_model_refuses_h13_streams() {
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    // The head of an H13 TD: W0 = TID 0 | NID 0x40 << 16 | EON, W1 =
    // NextSize 0, W2 = LogEvents.
    let mut td = vec![0u8; 0x274];
    td[0..4].copy_from_slice(&0x0240_0000u32.to_le_bytes());
    td[8..12].copy_from_slice(&1u32.to_le_bytes());
    let weights = [0x11u8; 64];
    let secs = sections(&mut bus, &[(1, &td[..]), (2, &weights[..])]);
    let refused = Err(ExchangeError::Msg(MsgError::Status {
        opcode: OP_PROGRAM_LOAD,
        status: status::NOT_H14,
    }));
    assert_eq!(load(&mut bus, &mut host, &secs), refused);
    // A fresh host (the refusal quarantined the first): the H13 TD as
    // the descriptor of a six-section program.
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    let mut owned = h14_sections(3);
    owned[2].1 = td.clone();
    let list: Vec<(u32, &[u8])> = owned.iter().map(|(i, b)| (*i, &b[..])).collect();
    let secs = sections(&mut bus, &list);
    assert_eq!(load(&mut bus, &mut host, &secs), refused);
    assert_eq!(bus.model.programs(), 0);
    assert_eq!(bus.model.stats().not_h14, 1);
}

/// What the simulated firmware does with an H14 program it cannot execute
/// (the kernel's simulator plugs `NullExecutor`): the call completes with
/// a dispatch and a finish event (state 1, done) and not one output byte
/// is written.
#[test]
fn an_unexecutable_h14_call_completes_and_writes_nothing() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig::DEFAULT);
    bus.exec.null = true;
    bus.mem.set(io[0].iova, &[0x5au8; 64]);
    let args = CallArgs {
        program,
        process,
        priority: 2,
        cookie: CALL_COOKIE,
    };
    call(&mut bus, &mut host, &args, &io).unwrap();
    let e = host.wait_finish(&mut bus, CALL_COOKIE, POLLS, 50).unwrap();
    assert_eq!(e.state, EventState::Finish);
    assert_eq!(
        bus.mem.get(io[0].iova, 64),
        &[0x5au8; 64][..],
        "outputs untouched"
    );
    assert_eq!(bus.model.stats().calls, 1);
    assert_eq!(bus.model.stats().exec_failures, 0);
}

#[test]
fn executor_failure_is_a_status() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig::DEFAULT);
    bus.exec.fail = true;
    let args = CallArgs {
        program,
        process,
        priority: 7,
        cookie: CALL_COOKIE,
    };
    assert_eq!(
        call(&mut bus, &mut host, &args, &io),
        Err(ExchangeError::Msg(MsgError::Status {
            opcode: OP_PROCEDURE_CALL,
            status: status::EXEC_FAILED
        }))
    );
    assert_eq!(bus.model.stats().exec_failures, 1);
    assert!(host.quarantined(), "exchange keeps the record's rule");
}

/// hw-2 §3 item 2, the other alternative: a refused call gets no reply.
/// The host's exchange times out and quarantines (the driver then parks
/// the call's buffers): the "refused call fails alone" departure degrades
/// to the record's quarantine, never to a reuse of what the firmware saw.
#[test]
fn a_silently_refused_call_times_out_and_quarantines() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig {
        faults: Faults::SILENT_REFUSAL,
        ..ModelConfig::DEFAULT
    });
    bus.exec.fail = true;
    let args = CallArgs {
        program,
        process,
        priority: 2,
        cookie: CALL_COOKIE,
    };
    let mut m = [0u8; msg::call_len(MAX_IO)];
    let n = encode_procedure_call(&mut m, &args, &io).unwrap();
    let mut r = [0u8; CALL_HEADER_LEN];
    let got = host.exchange_status(&mut bus, &m[..n], &mut r, POLLS, 50);
    assert!(matches!(got, Err(ExchangeError::Timeout { .. })), "{got:?}");
    assert!(host.quarantined());
    assert_eq!(bus.model.stats().exec_failures, 1);
}

/// hw-2 §3 item 3, the strict alternative: a firmware that runs only
/// priority 2 (the one that ran) refuses a call of priority 4 in order,
/// and runs the same call at priority 2. The driver sends 2 only.
#[test]
fn only_priority_2_runs_under_the_strict_alternative() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig {
        faults: Faults::ONLY_PRIORITY_2,
        ..ModelConfig::DEFAULT
    });
    let mut args = CallArgs {
        program,
        process,
        priority: 4,
        cookie: CALL_COOKIE,
    };
    assert_eq!(
        call(&mut bus, &mut host, &args, &io),
        Err(ExchangeError::Msg(MsgError::Status {
            opcode: OP_PROCEDURE_CALL,
            status: status::BAD_PRIORITY
        }))
    );
    args.priority = msg::MIN_PRIORITY;
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig {
        faults: Faults::ONLY_PRIORITY_2,
        ..ModelConfig::DEFAULT
    });
    args.program = program;
    args.process = process;
    call(&mut bus, &mut host, &args, &io).unwrap();
    host.wait_finish(&mut bus, CALL_COOKIE, POLLS, 50).unwrap();
}

/// hw-2 §3 item 5, the other alternative: the firmware asks for a
/// SHAREDMALLOC buffer after every LOAD. The host serves each request
/// inside the next exchange; loads, calls and finishes work as before.
#[test]
fn sharedmalloc_after_every_load() {
    let (mut bus, _, mut host) = booted(ModelConfig {
        faults: Faults::SM_PER_LOAD,
        ..ModelConfig::DEFAULT
    });
    config_get(&mut bus, &mut host).unwrap();
    for (i, fill) in [1u8, 2, 3].into_iter().enumerate() {
        let secs = h14_program(&mut bus, fill);
        assert_eq!(load(&mut bus, &mut host, &secs), Ok(i as u32));
        let process = proc_create(&mut bus, &mut host, i as u32).unwrap();
        let out = buffer(&mut bus, &[0u8; 64]);
        let io = [IoRef {
            buffer_id: 4,
            kind: IoKind::Output,
            iova: out.dva,
            size: 64,
        }];
        let args = CallArgs {
            program: i as u32,
            process,
            priority: 2,
            cookie: CALL_COOKIE,
        };
        call(&mut bus, &mut host, &args, &io).unwrap();
        host.wait_finish(&mut bus, CALL_COOKIE, POLLS, 50).unwrap();
    }
    assert_eq!(bus.model.hog_grants(), 3, "one more buffer per LOAD");
    assert!(!host.quarantined());
}

#[test]
fn a_refused_call_fails_alone_through_exchange_status() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig::DEFAULT);
    bus.exec.fail = true;
    let args = CallArgs {
        program,
        process,
        priority: 7,
        cookie: CALL_COOKIE,
    };
    let mut m = [0u8; msg::call_len(MAX_IO)];
    let n = encode_procedure_call(&mut m, &args, &io).unwrap();
    let mut r = [0u8; CALL_HEADER_LEN];
    let reply = host
        .exchange_status(&mut bus, &m[..n], &mut r, POLLS, 50)
        .unwrap();
    assert_eq!(
        reply,
        chman::Reply {
            len: n,
            opcode: OP_PROCEDURE_CALL,
            status: status::EXEC_FAILED
        }
    );
    assert!(
        !host.quarantined(),
        "an in-order refusal is not a protocol failure"
    );
    assert_eq!(
        host.take_finish(CALL_COOKIE),
        None,
        "a refused call has no finish"
    );
    // The channel is where the protocol expects it: the next call runs.
    bus.exec.fail = false;
    call(&mut bus, &mut host, &args, &io).unwrap();
    let e = host.wait_finish(&mut bus, CALL_COOKIE, POLLS, 50).unwrap();
    assert_eq!(e.cookie, CALL_COOKIE);
    assert_eq!(bus.model.stats().calls, 2);
}

#[test]
fn reply_status_checks_the_opcode() {
    assert_eq!(
        msg::reply_status(&[0, 0, 0, 0, 0x03, 0, 0, 0], OP_PROCEDURE_CALL),
        Err(MsgError::Opcode {
            found: 0x03,
            expected: OP_PROCEDURE_CALL
        })
    );
    assert_eq!(msg::reply_status(&[0, 0, 0, 0, 0x03, 0, 5, 0], 0x03), Ok(5));
}

#[test]
fn the_257th_program_is_refused() {
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    let secs = h14_program(&mut bus, 1);
    for i in 0..256 {
        assert_eq!(load(&mut bus, &mut host, &secs), Ok(i));
    }
    assert_eq!(
        load(&mut bus, &mut host, &secs),
        Err(ExchangeError::Msg(MsgError::Status {
            opcode: OP_PROGRAM_LOAD,
            status: status::TABLE_FULL
        }))
    );
    assert!(host.quarantined());
    assert_eq!(bus.model.programs(), 256);
}

#[test]
fn host_exchange_misuse() {
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    assert_eq!(
        host.start(&mut bus, &[0u8; 4]),
        Err(ExchangeError::Length { len: 4 })
    );
    assert_eq!(
        host.start(&mut bus, &[0u8; 0x4001]),
        Err(ExchangeError::Length { len: 0x4001 })
    );
    assert_eq!(host.poll(&mut bus), Err(ExchangeError::Idle));
    let mut m = [0u8; 16];
    encode_config_get(&mut m).unwrap();
    host.start(&mut bus, &m).unwrap();
    assert_eq!(host.start(&mut bus, &m), Err(ExchangeError::Busy));
    assert!(!host.quarantined(), "misuse is not a device failure");
    let mut polls = 0;
    while host.poll(&mut bus).unwrap() == Progress::Pending {
        bus.tick();
        polls += 1;
        assert!(polls < POLLS);
    }
}

// Fault injection: each knob gives its own typed error, with the registers
// that explain it, after a bounded number of polls.

#[test]
fn fault_no_ready() {
    let (bus, r) = boot_with(ModelConfig {
        faults: Faults::NO_READY,
        ..ModelConfig::DEFAULT
    });
    let e = r.unwrap_err();
    assert_eq!(e.step, Step::Ready);
    assert_eq!(
        e.reason,
        Reason::Timeout {
            register: scratch(7),
            expected: regs::MAGIC_READY,
            polls: 50
        }
    );
    let c = e.captured.unwrap();
    assert_eq!(
        c.scratch,
        [0, 0, 0, 0, 0, 0, 1, 0],
        "S1's values, untouched"
    );
    assert_eq!(c.cpu_status, regs::CPU_STATUS_RELEASED);
    assert_eq!(c.cpu_control, regs::CPU_CONTROL_RUN);
    assert_eq!(c.rvbar, regs::RVBAR_LATCHED);
    assert!(e.released(), "RUN was written: the driver must pin itself");
    assert_eq!(bus.sleeps, 50);
    assert_eq!(bus.model.phase(), Phase::Parked);
}

#[test]
fn fault_bad_done() {
    let (bus, r) = boot_with(ModelConfig {
        faults: Faults::BAD_DONE,
        ..ModelConfig::DEFAULT
    });
    let e = r.unwrap_err();
    assert_eq!(e.step, Step::Done);
    assert_eq!(
        e.reason,
        Reason::BadMagic {
            register: scratch(7),
            found: model::BAD_DONE_VALUE,
            expected: regs::MAGIC_DONE
        }
    );
    let c = e.captured.unwrap();
    assert_eq!(c.scratch[7], model::BAD_DONE_VALUE);
    assert_eq!(
        u64::from(c.scratch[1]) << 32 | u64::from(c.scratch[0]),
        model::FW_ADDRESS
    );
    assert_eq!(
        bus.sleeps,
        50 + 4,
        "READY after 4 polls, then the whole DONE budget"
    );
}

#[test]
fn fault_bad_channel_table() {
    let (_, r) = boot_with(ModelConfig {
        faults: Faults::BAD_CHANNEL_TABLE,
        ..ModelConfig::DEFAULT
    });
    let e = r.unwrap_err();
    assert_eq!(e.step, Step::ChannelTable);
    assert_eq!(
        e.reason,
        Reason::Table(TableError::Bit {
            index: IO,
            found: 9
        })
    );
    let c = e.captured.unwrap();
    assert_eq!(c.scratch[7], regs::MAGIC_DONE);
    assert_eq!(c.scratch[3], 0x1_0000, "no ack was written");
}

#[test]
fn fault_island_off_touches_nothing() {
    let (bus, r) = boot_with(ModelConfig {
        faults: Faults::ISLAND_OFF,
        ..ModelConfig::DEFAULT
    });
    let e = r.unwrap_err();
    assert_eq!(e.step, Step::Preflight);
    assert_eq!(
        e.reason,
        Reason::IslandOff {
            island: 7,
            word: 0x0f
        }
    );
    assert_eq!(e.captured, None);
    assert!(!e.touched());
    assert!(bus.writes.is_empty());
    assert_eq!(bus.model.violations().while_off, 0, "not even a read");
    assert_eq!(bus.model.phase(), Phase::Stopped);
}

#[test]
fn fault_stalled_ring() {
    let (mut bus, _, mut host) = booted(ModelConfig {
        faults: Faults::STALLED_RING,
        ..ModelConfig::DEFAULT
    });
    assert_eq!(
        config_get(&mut bus, &mut host),
        Err(ExchangeError::Timeout { polls: POLLS })
    );
    assert!(host.quarantined());
    assert_eq!(bus.model.stats().commands, 0);
    // SHAREDMALLOC was still served while waiting.
    assert_eq!(host.stats().sm_buffers, 1);
    assert_eq!(
        config_get(&mut bus, &mut host),
        Err(ExchangeError::Quarantined)
    );
}

#[test]
fn fault_error_status() {
    let (mut bus, _, mut host) = booted(ModelConfig {
        faults: Faults::ERROR_STATUS,
        ..ModelConfig::DEFAULT
    });
    assert_eq!(
        config_get(&mut bus, &mut host),
        Err(ExchangeError::Msg(MsgError::Status {
            opcode: OP_CONFIG_GET,
            status: 0xe0
        }))
    );
    assert!(host.quarantined());
}

#[test]
fn fault_missing_finish() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig {
        faults: Faults::MISSING_FINISH,
        ..ModelConfig::DEFAULT
    });
    let args = CallArgs {
        program,
        process,
        priority: 2,
        cookie: CALL_COOKIE,
    };
    call(&mut bus, &mut host, &args, &io).unwrap();
    assert_eq!(
        host.wait_finish(&mut bus, CALL_COOKIE, 100, 50),
        Err(ExchangeError::FinishTimeout {
            cookie: CALL_COOKIE
        })
    );
    assert_eq!(host.stats().drained, 1, "the dispatch event arrived");
    assert!(host.quarantined());
}

#[test]
fn fault_knobs_are_distinct() {
    // Each knob alone, on a full run, fails in its own way (or not at all).
    let knobs = [
        Faults::NO_READY,
        Faults::BAD_DONE,
        Faults::STALLED_RING,
        Faults::ERROR_STATUS,
        Faults::MISSING_FINISH,
        Faults::BAD_CHANNEL_TABLE,
        Faults::ISLAND_OFF,
        Faults::SHAREDMALLOC_HOG,
        Faults::BAD_EVENT_POINTER,
    ];
    let mut seen = Vec::new();
    for f in knobs {
        let (mut bus, r) = boot_with(ModelConfig {
            faults: f,
            ..ModelConfig::DEFAULT
        });
        let outcome = match r {
            Err(e) => std::format!("boot {:?} {:?}", e.step, core::mem::discriminant(&e.reason)),
            Ok(b) => {
                let mut host = Host::new(&mut bus, b.ipc, b.table).unwrap();
                std::format!("exchange {:?}", config_get(&mut bus, &mut host).err())
            }
        };
        assert!(
            // Two knobs only show in calls: CONFIG_GET succeeds.
            !seen.contains(&outcome)
                || f == Faults::MISSING_FINISH
                || f == Faults::BAD_EVENT_POINTER,
            "{f:?}: {outcome}"
        );
        seen.push(outcome);
    }
}

#[test]
fn boot_refuses_bad_scratch_and_allocations() {
    let (_, r) = boot_with(ModelConfig {
        scratch0: 0x21,
        ..ModelConfig::DEFAULT
    });
    let e = r.unwrap_err();
    assert_eq!(
        (e.step, e.reason),
        (
            Step::Prepare,
            Reason::ScratchRange {
                index: 0,
                value: 0x21
            }
        )
    );
    assert_eq!(e.captured.unwrap().scratch[7], regs::MAGIC_READY);
    let (_, r) = boot_with(ModelConfig {
        heap_request: MAX_HEAP + 1,
        ..ModelConfig::DEFAULT
    });
    assert_eq!(
        r.unwrap_err().reason,
        Reason::ScratchRange {
            index: 3,
            value: MAX_HEAP + 1
        }
    );
    // 'IPC ' is at most 1 MiB: SCRATCH1 + 1 beyond it is refused.
    let (_, r) = boot_with(ModelConfig {
        scratch1: MAX_IPC,
        ..ModelConfig::DEFAULT
    });
    assert_eq!(
        r.unwrap_err().reason,
        Reason::ScratchRange {
            index: 1,
            value: MAX_IPC
        }
    );
    // The record increments SCRATCH1 in u32 arithmetic: u32::MAX wraps to
    // ordinal 0 and a one-page request, which the driver still serves with
    // room for the whole table.
    let (_, r) = boot_with(ModelConfig {
        scratch1: u32::MAX,
        ..ModelConfig::DEFAULT
    });
    let b = r.unwrap();
    assert_eq!((b.ordinal, b.ipc.len), (0, 0x1_4000));
    let mut bus = Bus::new(ModelConfig::DEFAULT);
    bus.mem.fail = Some(BufKind::Ipc);
    let e = boot::boot(&mut bus, &FAST).unwrap_err();
    assert_eq!(
        (e.step, e.reason),
        (
            Step::Prepare,
            Reason::Alloc {
                kind: BufKind::Ipc,
                err: MemError::NoMemory
            }
        )
    );
    // No heap asked, none allocated.
    let (_, r) = boot_with(ModelConfig {
        heap_request: 0,
        ..ModelConfig::DEFAULT
    });
    assert_eq!(r.unwrap().heap, None);
}

#[test]
fn model_crashes_without_ring_owner_init() {
    let mut bus = Bus::new(ModelConfig::DEFAULT);
    let b = boot::boot(&mut bus, &FAST).unwrap();
    // Undo the owner byte of one BUF_H2T slot before the model sees the ack.
    let off = b.table.channels[BUF_H2T].slot(5, b.ipc.dva).unwrap() as u64;
    bus.mem.set(b.ipc.dva + off, &[0]);
    bus.tick();
    assert_eq!(
        bus.model.crash(),
        Some(Crash::Owner {
            channel: BUF_H2T,
            slot: 5
        })
    );
    assert_eq!(bus.model.read32(scratch(7)), model::CRASH_VALUE);
}

/// Words 0..2 of slot `slot` of channel `index`.
fn slot_words(bus: &Bus, host: &Host, index: usize, slot: u64) -> [u64; 3] {
    let ipc = host.ipc();
    let off = host.table().channels[index].slot(slot, ipc.dva).unwrap() as u64;
    let w = bus.mem.get(ipc.dva + off, 24);
    [0, 8, 16].map(|i| u64::from_le_bytes(w[i..i + 8].try_into().unwrap()))
}

/// Publishes a raw slot on a target→host channel, as the firmware would:
/// words 1.. first, then word 0.
fn publish(bus: &mut Bus, host: &Host, index: usize, slot: u64, words: &[u64]) {
    let ipc = host.ipc();
    let off = ipc.dva + host.table().channels[index].slot(slot, ipc.dva).unwrap() as u64;
    for (i, w) in words.iter().enumerate().skip(1) {
        bus.mem.set(off + 8 * i as u64, &w.to_le_bytes());
    }
    bus.mem.set(off, &words[0].to_le_bytes());
}

#[test]
fn shared_malloc_reply_follows_the_record() {
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    let writes = bus.writes.len();
    config_get(&mut bus, &mut host).unwrap();
    let dva = bus.model.shared_buffer().unwrap();
    assert_eq!(dva % chman::SM_ALIGN, 0);
    assert!(!regs::in_fw_window(dva, model::SM_REQUEST.size));
    // word0 = address | 1, word1 = 0, word2 = the 1-based count; the
    // request's size and tag are gone.
    assert_eq!(slot_words(&bus, &host, SHAREDMALLOC, 0), [dva | 1, 0, 1]);
    assert_eq!(bus.model.shared_count(), Some(1));
    assert_eq!(
        (host.stats().sm_buffers, host.stats().sm_bytes),
        (1, 0x1_0000)
    );
    assert!(
        bus.writes[writes..].contains(&(regs::IPI_SET, 1 << 5)),
        "doorbell bit 5"
    );
    // The buffer came zeroed and is 16 KiB aligned in both address and size.
    assert_eq!(
        bus.shared,
        [FwBuf {
            dva,
            ..bus.shared[0]
        }]
    );
    assert_eq!(bus.shared[0].len, 0x1_0000);
}

#[test]
fn shared_malloc_without_memory_fails_the_exchange() {
    let mut bus = Bus::new(ModelConfig::DEFAULT);
    let b = boot::boot(&mut bus, &FAST).unwrap();
    let mut host = Host::new(&mut bus, b.ipc, b.table).unwrap();
    bus.mem.fail = Some(BufKind::Shared);
    assert_eq!(
        config_get(&mut bus, &mut host),
        Err(ExchangeError::SharedMalloc {
            cursor: 0,
            error: SmError::Alloc(MemError::NoMemory)
        })
    );
    assert!(host.quarantined());
    assert_eq!(host.stats().sm_refused, 1);
    assert_eq!(
        slot_words(&bus, &host, SHAREDMALLOC, 0)[0] & OWNER,
        0,
        "left unanswered"
    );
    assert_eq!(bus.model.stats().commands, 0, "the model waited for memory");
}

#[test]
fn shared_malloc_requests_breaking_the_rule_fail_the_exchange() {
    // (word0, size, tag) published at SHAREDMALLOC slot 1, and the error.
    let cases = [
        (0, 0x1000, 7, SmError::Size { size: 0x1000 }),
        (0, 0, 7, SmError::Size { size: 0 }),
        (
            0,
            chman::SM_MAX_BUFFER + chman::SM_ALIGN,
            7,
            SmError::Size {
                size: chman::SM_MAX_BUFFER + chman::SM_ALIGN,
            },
        ),
        (0, 0x4000, 1 << 32, SmError::Tag { found: 1 << 32 }),
        (2, 0x4000, 7, SmError::Header { found: 2 }),
    ];
    for (word0, size, tag, error) in cases {
        let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
        config_get(&mut bus, &mut host).unwrap();
        publish(&mut bus, &host, SHAREDMALLOC, 1, &[word0, size, tag]);
        assert_eq!(
            config_get(&mut bus, &mut host),
            Err(ExchangeError::SharedMalloc { cursor: 1, error }),
            "{size:#x} {tag:#x}"
        );
        assert!(host.quarantined());
        assert_eq!(host.stats().sm_buffers, 1, "nothing granted");
    }
}

#[test]
fn fault_sharedmalloc_hog_is_refused() {
    let (mut bus, _, mut host) = booted(ModelConfig {
        faults: Faults::SHAREDMALLOC_HOG,
        ..ModelConfig::DEFAULT
    });
    let r = config_get(&mut bus, &mut host);
    // The 8 MiB test memory runs out after a few 2 MiB grants.
    assert!(
        matches!(
            r,
            Err(ExchangeError::SharedMalloc {
                error: SmError::Alloc(MemError::NoMemory),
                ..
            })
        ),
        "{r:?}"
    );
    assert!(bus.model.hog_grants() >= 1);
    assert_eq!(host.stats().sm_buffers, 1 + bus.model.hog_grants());
    assert_eq!(
        bus.model.shared_count(),
        Some(u64::from(host.stats().sm_buffers)),
        "word2 counts every grant"
    );
    assert!(host.quarantined());
    assert_eq!(bus.model.stats().commands, 0);
}

#[test]
fn events_are_published_by_pointer() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig::DEFAULT);
    let args = CallArgs {
        program,
        process,
        priority: 2,
        cookie: CALL_COOKIE,
    };
    call(&mut bus, &mut host, &args, &io).unwrap();
    host.wait_finish(&mut bus, CALL_COOKIE, POLLS, 50).unwrap();
    let sm = bus.model.shared_buffer().unwrap();
    // Both events were handed back (bit 0 set) and pointed into the
    // SHAREDMALLOC buffer, 0x28 bytes each.
    for slot in 0..2 {
        let p = sm + model::EVENT_AREA + slot * model::EVENT_STRIDE;
        assert_eq!(slot_words(&bus, &host, IO_T2H, slot)[..2], [p | 1, 0x28]);
        let e = decode_event(bus.mem.get(p, 0x28)).unwrap();
        assert_eq!((e.cookie, e.seq), (CALL_COOKIE, slot as u32));
    }
    assert_eq!(host.stats().bad_events, 0);
}

#[test]
fn event_pointers_are_bounds_checked() {
    let (mut bus, b, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    let sm = bus.model.shared_buffer().unwrap();
    let event = |cookie| {
        let mut p = [0u8; EVENT_LEN];
        encode_event(
            &Event {
                seq: 0,
                cookie,
                program: 0,
                process: 1,
                state: EventState::Finish,
            },
            &mut p,
        )
        .unwrap();
        p
    };
    // In 'IPC ', past the layout: accepted.
    let in_ipc = b.ipc.dva + 0x1_1000;
    bus.mem.set(in_ipc, &event(1));
    publish(&mut bus, &host, IO_T2H, 0, &[in_ipc, 0x28]);
    // At the very end of the SHAREDMALLOC buffer: accepted.
    let at_end = sm + 0x1_0000 - 0x28;
    bus.mem.set(at_end, &event(2));
    publish(&mut bus, &host, IO_T2H, 1, &[at_end, 0x28]);
    // Too short to be an event: counted, handed back, not read.
    publish(&mut bus, &host, IO_T2H, 2, &[sm, 0x1f]);
    assert_eq!(host.drain(&mut bus), Ok(3));
    assert_eq!(host.take_finish(1).map(|e| e.cookie), Some(1));
    assert_eq!(host.take_finish(2).map(|e| e.cookie), Some(2));
    assert_eq!(host.stats().bad_events, 1);
    for slot in 0..3 {
        assert_eq!(slot_words(&bus, &host, IO_T2H, slot)[0] & OWNER, 1);
    }
    // One byte past the buffer, an overflowing range, memory never given:
    // each skipped unread and counted, and the slot handed back, as the
    // record does; the device keeps working.
    for (dva, len) in [
        // (Published addresses are even: bit 0 clear.)
        (sm + 0x1_0000 - 0x26, 0x28),
        (sm, u64::MAX),
        (u64::MAX - 0x11, 0x28),
        (model::FW_ADDRESS, 0x28),
        (b.ipc.dva + IPC_SIZE as u64 - 0x20, 0x28),
    ] {
        let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
        config_get(&mut bus, &mut host).unwrap();
        publish(&mut bus, &host, IO_T2H, 0, &[dva, len]);
        assert_eq!(host.drain(&mut bus), Ok(1));
        assert!(!host.quarantined());
        assert_eq!(host.stats().bad_pointers, 1);
        assert_eq!(host.last_bad_pointer(), Some((IO_T2H, dva, len)));
        assert_eq!(slot_words(&bus, &host, IO_T2H, 0)[0], dva | OWNER);
        config_get(&mut bus, &mut host).unwrap();
    }
}

#[test]
fn fault_bad_event_pointer() {
    let (mut bus, mut host, program, process, io) = ready_for_call(ModelConfig {
        faults: Faults::BAD_EVENT_POINTER,
        ..ModelConfig::DEFAULT
    });
    let args = CallArgs {
        program,
        process,
        priority: 2,
        cookie: CALL_COOKIE,
    };
    // The reply is fine; the events point outside the host's memory: they
    // are skipped unread, so the finish never arrives and the call times
    // out, which quarantines.
    assert_eq!(call(&mut bus, &mut host, &args, &io), Ok(()));
    assert!(!host.quarantined());
    assert!(matches!(
        host.wait_finish(&mut bus, 0x52, 10, 50),
        Err(ExchangeError::FinishTimeout { .. })
    ));
    assert!(host.quarantined());
    assert!(host.stats().bad_pointers >= 1);
    assert_eq!(
        host.last_bad_pointer(),
        Some((IO_T2H, model::FW_ADDRESS, EVENT_LEN as u64))
    );
}

#[test]
fn a_moved_ring_fails_the_next_exchange() {
    let (mut bus, b, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    // The firmware rewrites the IO entry's ring as a bare offset.
    let at = b.ipc.dva + (ENTRY_LEN + NAME_LEN + 16) as u64;
    bus.mem.set(at, &0xc800u64.to_le_bytes());
    assert_eq!(
        config_get(&mut bus, &mut host),
        Err(ExchangeError::Table(TableError::Ring {
            index: IO,
            found: 0xc800,
            expected: b.ipc.dva + 0xc800
        }))
    );
    assert!(host.quarantined());
}

#[test]
fn program_limits_and_unload() {
    // The model's table and the driver's cap (OA: 256 and 250).
    const {
        assert!(model::PROGRAM_SLOTS == 256);
        assert!((msg::MAX_PROGRAMS as u32) < model::PROGRAM_SLOTS);
        // The model's program table and event area fit its one buffer.
        assert!(model::EVENT_AREA >= 256 * 0xa0);
        assert!(model::EVENT_AREA + 0x40 * model::EVENT_STRIDE <= model::SM_REQUEST.size);
    }
    // 0x201 is not a command the firmware serves for the driver.
    let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
    config_get(&mut bus, &mut host).unwrap();
    let mut m = [0u8; 0x10];
    m[4..6].copy_from_slice(&OP_PROGRAM_UNLOAD.to_le_bytes());
    let mut r = [0u8; 0x10];
    assert_eq!(
        host.exchange(&mut bus, &m, &mut r, POLLS, 50)
            .and_then(|_| msg::check_reply(&r, OP_PROGRAM_UNLOAD).map_err(ExchangeError::Msg)),
        Err(ExchangeError::Msg(MsgError::Status {
            opcode: OP_PROGRAM_UNLOAD,
            status: status::UNKNOWN_OPCODE
        }))
    );
}

#[test]
fn decoders_never_panic_on_arbitrary_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let n = rng.index(0x200);
        let mut b = rng.bytes(n);
        // Make headers plausible half of the time so decoders go deeper.
        if n >= 8 && rng.next() & 1 == 0 {
            b[..4].fill(0);
            let op = [
                OP_CONFIG_GET,
                OP_PROGRAM_LOAD,
                OP_PROC_CREATE,
                OP_PROCEDURE_CALL,
                OP_CH_PROPERTY_WRITE,
            ];
            b[4..6].copy_from_slice(&op[rng.index(op.len())].to_le_bytes());
            b[6..8].fill(0);
        }
        let _ = msg::header(&b);
        let _ = msg::config_get_reply(&b);
        let _ = msg::program_load_reply(&b);
        let _ = msg::proc_create_reply(&b);
        let _ = msg::decode_program_load(&b);
        let _ = msg::decode_proc_create(&b);
        let _ = msg::decode_procedure_call(&b);
        let _ = msg::decode_call_header(&b);
        let _ = msg::decode_call_record(&b, rng.index(70));
        let _ = msg::decode_io_record(&b, 0);
        let _ = msg::decode_property_write(&b);
        let _ = chman::decode_event(&b);
        let _ = chman::decode_sm_request(&b);
        let _ = chman::parse_entry(rng.index(9), &b);
        if let Ok(s) = InitStruct::decode(&b) {
            let _ = s.check();
        }
        let _ = image::parse(&b);
    }
    // Whole tables, with valid entries mutated.
    let mut good = [0u8; TABLE_LEN];
    for (i, spec) in LAYOUT.iter().enumerate() {
        chman::encode_entry(spec, BASE, &mut good[i * ENTRY_LEN..]).unwrap();
    }
    for _ in 0..5_000 {
        let mut t = good;
        for _ in 0..1 + rng.index(4) {
            let i = rng.index(TABLE_LEN);
            t[i] = rng.next() as u8;
        }
        let _ = Table::parse(&t, BASE + (rng.next() % 4) * 0x4000, rng.next() % 0x2_0000);
    }
}

#[test]
fn image_checker_never_panics_on_mutations() {
    let base = image::tests::shaped(0x2000);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let mut f = base.clone();
        for _ in 0..1 + rng.index(6) {
            // Mostly hit the header and load commands.
            let i = if rng.next() & 3 == 0 {
                rng.index(f.len())
            } else {
                rng.index(0x300)
            };
            f[i] = rng.next() as u8;
        }
        if rng.next() & 7 == 0 {
            let n = rng.index(f.len());
            f.truncate(n);
        }
        if let Ok(img) = image::parse(&f) {
            accepted += 1;
            // Whatever is accepted is internally consistent.
            assert!(img.segments().len() <= image::MAX_SEGMENTS);
            for s in img.segments() {
                assert!(s.fileoff + s.filesize <= f.len() as u64);
                assert!(s.filesize <= s.vmsize);
            }
        }
    }
    assert!(accepted > 0, "some mutations keep the image valid");
}

#[test]
fn model_survives_garbage_commands() {
    let mut rng = Rng(0xfeed_beef_0bad_cafe);
    for _ in 0..60 {
        let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
        config_get(&mut bus, &mut host).unwrap();
        let n = 8 + rng.index(0x300);
        let mut m = rng.bytes(n);
        m[..4].fill(0);
        let op = [
            OP_CONFIG_GET,
            OP_PROGRAM_LOAD,
            OP_PROC_CREATE,
            OP_PROCEDURE_CALL,
            0x99,
        ];
        m[4..6].copy_from_slice(&op[rng.index(op.len())].to_le_bytes());
        m[6..8].fill(0);
        let mut r = vec![0u8; n];
        match host.exchange(&mut bus, &m, &mut r, POLLS, 50) {
            // A refusal is a status; an acceptance must be a valid reply.
            Ok(len) => assert_eq!(len, n),
            Err(ExchangeError::Msg(MsgError::Status { status, .. })) => assert_ne!(status, 0),
            Err(e) => panic!("{e:?}"),
        }
        assert_eq!(bus.model.crash(), None);
    }
}

/// The trace block `name` of docs/hardware-record.md.
fn documented(block: &str) -> Vec<std::string::String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/hardware-record.md");
    let doc = std::fs::read_to_string(path).expect("docs/hardware-record.md");
    let open = std::format!("```mmio-trace {block}");
    let start = doc.find(&open).unwrap_or_else(|| panic!("no {open} block")) + open.len();
    let end = doc[start..].find("```").expect("unterminated block") + start;
    doc[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(std::string::String::from)
        .collect()
}

/// Folds runs of identical lines into `line (×n)`, so the record stays
/// readable.
fn fold(lines: &[std::string::String]) -> Vec<std::string::String> {
    let mut out: Vec<(std::string::String, usize)> = Vec::new();
    for l in lines {
        match out.last_mut() {
            Some((last, n)) if last == l => *n += 1,
            _ => out.push((l.clone(), 1)),
        }
    }
    out.into_iter()
        .map(|(l, n)| {
            if n == 1 {
                l
            } else {
                std::format!("{l} (x{n})")
            }
        })
        .collect()
}

/// The release with the record's pacing (30 ms phase gaps, 1 ms polls) on
/// the model, register by register, against the `t6021-release` block of
/// `docs/hardware-record.md`: the driver's sequence and the record's must
/// not drift apart.
#[test]
fn release_trace_matches_the_record() {
    let mut bus = Bus::new(ModelConfig::DEFAULT);
    let b = boot::boot(&mut bus, &BootConfig::DEFAULT).unwrap();
    assert!(bus.model.granted());
    assert_eq!(bus.model.violations(), Violations::default());
    // Addresses differ between runs of the allocator only by design of the
    // test memory; name them.
    let publish = std::format!("W SCRATCH0 = {:#x}", b.pool.dva & 0xffff_ffff);
    assert_eq!(b.pool.dva >> 32, 0, "the test's pool lies below 4 GiB");
    let got: Vec<_> = fold(&bus.trace)
        .into_iter()
        .map(|l| {
            if l == publish {
                "W SCRATCH0 = POOL_LO".into()
            } else {
                l
            }
        })
        .collect();
    let want = documented("t6021-release");
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        assert_eq!(g, w, "t6021-release: step {} differs", i + 1);
    }
    assert_eq!(got.len(), want.len(), "t6021-release: {got:#?}");
}

/// A release without the grant writes is what the record never did: the
/// model counts it.
#[test]
fn model_counts_an_ungranted_release() {
    let mut m = FwModel::new(ModelConfig::DEFAULT);
    m.write32(regs::GRANT_WRITES[1].0, regs::GRANT_WRITES[1].1);
    m.write32(regs::CPU_CONTROL, regs::CPU_CONTROL_RUN);
    let v = m.violations();
    assert_eq!((v.grant_mismatch, v.ungranted_release), (1, 1));
    assert!(!m.granted());
}

/// The heap the firmware asks for is granted at least one DART page, and
/// the init struct says exactly what was granted.
#[test]
fn small_heap_requests_get_the_floor() {
    let (bus, b, _) = booted(ModelConfig {
        heap_request: 0x100,
        ..ModelConfig::DEFAULT
    });
    let heap = b.heap.unwrap();
    assert_eq!(heap.len, 0x4000);
    let init = bus.model.init().unwrap();
    assert_eq!((init.heap, init.heap_len), (heap.dva, 0x4000));
    let (bus, b, _) = booted(ModelConfig {
        heap_request: 0,
        ..ModelConfig::DEFAULT
    });
    assert_eq!(b.heap, None);
    assert_eq!(bus.model.init().map(|i| (i.heap, i.heap_len)), Some((0, 0)));
}

/// Without the PMU page at IOVA == PA the firmware halts before DONE, as
/// the record saw ("NO PMD FOR IOVA 0x28e084008"); the driver reports the
/// DONE poll's timeout with the registers.
#[test]
fn firmware_halts_without_the_pmu_page() {
    let mut bus = Bus::new(ModelConfig::DEFAULT);
    bus.mem.pmu = None;
    let e = boot::boot(&mut bus, &FAST).unwrap_err();
    assert_eq!(e.step, Step::Done);
    assert!(e.released());
    assert_eq!(
        bus.model.crash(),
        Some(Crash::PmuUnmapped(MemFault {
            iova: regs::PMU_PA + 8
        }))
    );
}

/// The image must be where the latched entry points; an unlatched RVBAR
/// gets the fold of +0x00, and the image must be there instead.
#[test]
fn firmware_halts_without_its_image() {
    let mut bus = Bus::new(ModelConfig::DEFAULT);
    bus.mem.image.clear();
    let e = boot::boot(&mut bus, &FAST).unwrap_err();
    assert_eq!(e.step, Step::Ready, "no READY from a core with no image");
    assert!(matches!(bus.model.crash(), Some(Crash::ImageUnmapped(_))));
    // Unlatched, with +0x00 pointing at the (patched) staged copy.
    let mut bus = Bus::new(ModelConfig {
        rvbar: 0,
        ..ModelConfig::DEFAULT
    });
    bus.mem.image.clear();
    let staged = bus.mem.alloc(BufKind::Ddm, 0xd_0000).unwrap();
    bus.mem.set(staged.dva, &patched_image(staged.dva));
    let cfg = BootConfig {
        fwim_dva: staged.dva,
        ..FAST
    };
    let b = boot::boot(&mut bus, &cfg).unwrap();
    assert!(!b.rvbar_latched);
    assert_eq!(bus.model.read64(regs::RVBAR), regs::rvbar_fold(staged.dva));
}

/// A copy without iBoot's patches (here: the DATA base word left 0, as in
/// the archive) never posts READY: the driver reports the READY timeout
/// after the release.
#[test]
fn firmware_never_comes_up_unpatched() {
    let mut bus = Bus::new(ModelConfig::DEFAULT);
    let at = patch::DATA_BASE_VM;
    bus.mem.image[at..at + 8].fill(0);
    let e = boot::boot(&mut bus, &FAST).unwrap_err();
    assert_eq!(e.step, Step::Ready);
    assert!(e.released());
    assert_eq!(bus.model.crash(), Some(Crash::Unpatched { vm: at }));
}

/// A simulated T6020 (M2 Pro) comes up only with its own patch values:
/// an image patched as a T6021 (`RTK_soc` 0x6021, revision 0x11, the
/// T6021 tunables), which is what the driver staged for every H14 chip
/// before, crashes it; the T6020's own values boot. Each of the three
/// differences alone is refused.
#[test]
fn t6020_needs_its_own_patches() {
    let t6020 = ModelConfig {
        chip: &patch::T6020_CHIP,
        ..ModelConfig::DEFAULT
    };
    let mut bus = Bus::new(t6020);
    bus.mem.image = patched_image(regs::FW_IOVA);
    let e = boot::boot(&mut bus, &FAST).unwrap_err();
    assert_eq!(e.step, Step::Ready);
    assert!(matches!(bus.model.crash(), Some(Crash::Unpatched { .. })));

    let mut bus = Bus::new(t6020);
    bus.mem.image = patched_image_for(regs::FW_IOVA, &patch::T6020_CHIP);
    boot::boot(&mut bus, &FAST).unwrap();

    // One difference at a time: the revision, then one tunable value.
    for chip in [
        patch::Chip {
            revision: patch::T6021_REVISION,
            ..patch::T6020_CHIP
        },
        patch::Chip {
            tunables: &patch::T602X_TUNABLES,
            revision: 0x00,
            ..patch::T6020_CHIP
        },
    ] {
        let mut bus = Bus::new(t6020);
        bus.mem.image = patched_image_for(regs::FW_IOVA, &chip);
        boot::boot(&mut bus, &FAST).unwrap_err();
        assert!(
            matches!(bus.model.crash(), Some(Crash::Unpatched { .. })),
            "{chip:?}"
        );
    }
}

/// A [`Bus`] with two injectable departures from the model: CPU_STATUS
/// reading as a running core, and 'IPC ' writes failing after the first
/// write (the init struct) went through.
struct Tapped {
    bus: Bus,
    running: bool,
    fail_ipc_writes: bool,
    wrote_once: bool,
}

impl Tapped {
    fn new(running: bool, fail_ipc_writes: bool) -> Self {
        Tapped {
            bus: Bus::new(ModelConfig::DEFAULT),
            running,
            fail_ipc_writes,
            wrote_once: false,
        }
    }
}

impl Regs for Tapped {
    fn read32(&mut self, off: usize) -> u32 {
        if self.running && off == regs::CPU_STATUS {
            return regs::CPU_STATUS_RUNNING | 0x28;
        }
        self.bus.read32(off)
    }
    fn write32(&mut self, off: usize, val: u32) {
        self.bus.write32(off, val)
    }
    fn read64(&mut self, off: usize) -> u64 {
        self.bus.read64(off)
    }
    fn write64(&mut self, off: usize, val: u64) {
        self.bus.write64(off, val)
    }
}

impl Pmgr for Tapped {
    fn pmgr_read32(&mut self, off: usize) -> u32 {
        self.bus.pmgr_read32(off)
    }
}

impl Delay for Tapped {
    fn sleep_us(&mut self, us: u32) {
        self.bus.sleep_us(us)
    }
}

impl FwMem for Tapped {
    fn alloc(&mut self, kind: BufKind, len: usize) -> Result<FwBuf, MemError> {
        self.bus.alloc(kind, len)
    }
    fn write_bytes(&mut self, buf: &FwBuf, off: usize, src: &[u8]) -> Result<(), MemError> {
        // The init struct goes to the pool at 0; the ring owners to 'IPC '.
        if self.fail_ipc_writes && self.wrote_once && off != 0 {
            return Err(MemError::OutOfRange);
        }
        self.wrote_once = true;
        self.bus.write_bytes(buf, off, src)
    }
    fn read_bytes(&mut self, buf: &FwBuf, off: usize, dst: &mut [u8]) -> Result<(), MemError> {
        self.bus.read_bytes(buf, off, dst)
    }
    fn barrier(&mut self) {
        self.bus.barrier()
    }
}

/// A core that already runs (someone else released it) is refused at the
/// preflight: only CPU_STATUS is read, nothing is written, and the error
/// carries no capture (the engine is not read further).
#[test]
fn a_running_core_is_left_alone() {
    let mut r = Tapped::new(true, false);
    let e = boot::boot(&mut r, &FAST).unwrap_err();
    assert_eq!(
        (e.step, e.reason, e.captured),
        (
            Step::Preflight,
            Reason::AlreadyRunning {
                status: regs::CPU_STATUS_RUNNING | 0x28
            },
            None
        )
    );
    assert!(!e.touched());
    assert!(r.bus.writes.is_empty(), "nothing written");
    assert_eq!(r.bus.model.phase(), Phase::Stopped);
}

/// The ring-owner init writes into 'IPC ' after DONE: a memory failure
/// there is reported at its step, after the release (the driver then pins
/// itself), and the ack is never written.
#[test]
fn a_ring_init_failure_is_reported_after_the_release() {
    let mut r = Tapped::new(false, true);
    let e = boot::boot(&mut r, &FAST).unwrap_err();
    assert_eq!(
        (e.step, e.reason),
        (Step::RingInit, Reason::Mem(MemError::OutOfRange))
    );
    assert!(e.released());
    assert!(
        !r.bus
            .writes
            .contains(&(scratch(3), u64::from(regs::MAGIC_READY))),
        "no ack"
    );
}

/// The fault matrix over the exchanges: an error status (or a stalled
/// ring) injected at each of CONFIG_GET, PROGRAM_LOAD, PROC_CREATE and
/// PROCEDURE_CALL fails exactly that exchange with its typed error and
/// quarantines the host, as the record does; nothing later reaches the
/// firmware.
#[test]
fn every_exchange_fails_typed_and_quarantines() {
    for stage in 0..4 {
        for fault in [Faults::ERROR_STATUS, Faults::STALLED_RING] {
            let (mut bus, _, mut host) = booted(ModelConfig::DEFAULT);
            let inject = |bus: &mut Bus, at: usize| {
                if at == stage {
                    bus.model.set_faults(fault);
                }
            };
            inject(&mut bus, 0);
            let r = config_get(&mut bus, &mut host).map(|_| ());
            let r = r.and_then(|()| {
                let secs = h14_program(&mut bus, 1);
                inject(&mut bus, 1);
                load(&mut bus, &mut host, &secs)
            });
            let r = r.and_then(|program| {
                inject(&mut bus, 2);
                proc_create(&mut bus, &mut host, program).map(|p| (program, p))
            });
            let r = r.and_then(|(program, process)| {
                let out = buffer(&mut bus, &[0u8; 64]);
                let io = [IoRef {
                    buffer_id: 4,
                    kind: IoKind::Output,
                    iova: out.dva,
                    size: 64,
                }];
                inject(&mut bus, 3);
                let args = CallArgs {
                    program,
                    process,
                    priority: 2,
                    cookie: 9,
                };
                call(&mut bus, &mut host, &args, &io)
            });
            let opcode = [
                OP_CONFIG_GET,
                OP_PROGRAM_LOAD,
                OP_PROC_CREATE,
                OP_PROCEDURE_CALL,
            ][stage];
            match (fault, r) {
                (
                    Faults::ERROR_STATUS,
                    Err(ExchangeError::Msg(MsgError::Status { opcode: o, .. })),
                ) => {
                    assert_eq!(o, opcode, "stage {stage}")
                }
                (Faults::STALLED_RING, Err(ExchangeError::Timeout { .. })) => {}
                (f, r) => panic!("stage {stage}, {f:?}: {r:?}"),
            }
            assert!(host.quarantined(), "stage {stage}");
            assert_eq!(
                config_get(&mut bus, &mut host),
                Err(ExchangeError::Quarantined)
            );
        }
    }
}
