// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The task manager's register sequences, written once.
//!
//! The driver runs these on the engine's register window, the simulator on
//! the record's model ([`super::model`]) and the host tests on the same
//! model with a recorder in between, so the order and values checked by the
//! MMIO-trace test are exactly the ones the driver writes. Each function
//! says which part of `docs/hardware-record.md` it follows.

use super::super::obs;
use super::{
    evt_reg, finish_word, mgr, size_field, tm_reg, tq, tq_reg, EVT_COUNT_MAX, TQ_COUNT, TQ_PRIORITY,
};

/// 32-bit register access to the engine window (offsets from its base).
pub trait Regs {
    /// Reads the register at `off`.
    fn read32(&self, off: usize) -> u32;
    /// Writes `val` to the register at `off`.
    fn write32(&self, off: usize, val: u32);
    /// Reads the registers from `off` on into `out`: one 32-bit read each,
    /// in address order (the simulator takes its lock once for them).
    fn read32_run(&self, off: usize, out: &mut [u32]) {
        read32_each(self, off, out)
    }
    /// Writes `vals` to the registers from `off` on: one 32-bit write each,
    /// in address order.
    fn write32_run(&self, off: usize, vals: &[u32]) {
        write32_each(self, off, vals)
    }
}

/// [`Regs::read32_run`] as separate reads.
pub fn read32_each<R: Regs + ?Sized>(r: &R, off: usize, out: &mut [u32]) {
    for (i, v) in out.iter_mut().enumerate() {
        *v = r.read32(off + 4 * i);
    }
}

/// [`Regs::write32_run`] as separate writes.
pub fn write32_each<R: Regs + ?Sized>(r: &R, off: usize, vals: &[u32]) {
    for (i, v) in vals.iter().enumerate() {
        r.write32(off + 4 * i, *v);
    }
}

/// The enable sequence (record: "Enable"): queues on, per-queue
/// priorities, event interrupts enabled. Needed after every power-up: the
/// state does not survive the power domains cycling.
pub fn enable(r: &impl Regs) {
    let en = r.read32(tm_reg(mgr::TQ_EN));
    r.write32(tm_reg(mgr::TQ_EN), en | mgr::TQ_EN_ON);
    for (q, prio) in TQ_PRIORITY.iter().enumerate() {
        r.write32(tq_reg(q, tq::PRTY), *prio);
    }
    r.write32(tm_reg(mgr::IRQ_EN1), mgr::IRQ_EN1_VALUE);
    r.write32(tm_reg(mgr::IRQ_EN2), mgr::IRQ_EN2_VALUE);
}

/// One job as the task manager takes it.
pub struct Push<'a> {
    /// The task queue.
    pub queue: usize,
    /// The job's network id (also stamped in the first TD's W0).
    pub nid: u8,
    /// Device address per buffer slot (0 for unbound slots); the registers
    /// take the low 32 bits: the engine's window is below 4 GiB.
    pub bars: &'a [u64],
    /// Bytes per TD.
    pub td_size: u32,
    /// Number of TDs.
    pub td_count: u32,
    /// Device address of the first TD (the bootstrap copy).
    pub first_td: u32,
}

/// Queues `p` and starts it (record: "Push"). The engine is enabled, idle,
/// and its event lines were drained.
pub fn push(r: &impl Regs, p: &Push<'_>) {
    let q = p.queue;
    r.write32(tq_reg(q, tq::STATUS), 1);
    let mut bars = [0u32; super::super::td::BAR_SLOTS];
    for (b, v) in bars.iter_mut().zip(p.bars.iter()) {
        *b = *v as u32;
    }
    r.write32_run(tq_reg(q, tq::BAR), &bars);
    r.write32(tq_reg(q, tq::SIZE), size_field(p.td_size));
    r.write32(tq_reg(q, tq::ADDR), p.first_td);
    r.write32(tq_reg(q, tq::NID), u32::from(p.nid) << 8 | tq::NID_LIVE);
    // The task manager takes the first TD's address and size as read back
    // from the queue, as every reference does.
    let addr = r.read32(tq_reg(q, tq::ADDR));
    r.write32(tm_reg(mgr::ADDR), addr);
    let size = r.read32(tq_reg(q, tq::SIZE));
    r.write32(tm_reg(mgr::INFO), size | (p.td_count & 0xffff));
    let prio = TQ_PRIORITY.get(q).copied().unwrap_or(0);
    r.write32(tm_reg(mgr::PUSH), prio | (q as u32) << 8);
}

/// One popped event: the four words every reference reads to pop it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// The info word (`0x05000000 | nid << 16 | task` for a finished task).
    pub info: u32,
    /// The second word.
    pub unk1: u32,
    /// The TM status snapshot.
    pub tmst: u32,
    /// The fourth word.
    pub unk2: u32,
}

/// Pops the head event of `line` with all four reads, in the record's
/// order. The caller read a nonzero count first.
pub fn pop(r: &impl Regs, line: usize) -> Event {
    // INFO, UNK1, TMST, UNK2 are consecutive words.
    let mut w = [0u32; 4];
    r.read32_run(evt_reg(line, mgr::EVT_INFO), &mut w);
    let [info, unk1, tmst, unk2] = w;
    Event {
        info,
        unk1,
        tmst,
        unk2,
    }
}

const _: () = {
    assert!(mgr::EVT_UNK1 == mgr::EVT_INFO + 4);
    assert!(mgr::EVT_TMST == mgr::EVT_INFO + 8);
    assert!(mgr::EVT_UNK2 == mgr::EVT_INFO + 12);
};

/// Acknowledges the event interrupt with `bits`: read-modify-write, as the
/// record does.
pub fn ack(r: &impl Regs, bits: u32) {
    let v = r.read32(tm_reg(mgr::IRQ_ACK));
    r.write32(tm_reg(mgr::IRQ_ACK), v | bits);
}

/// The error latches.
pub fn latches(r: &impl Regs) -> [u32; 3] {
    mgr::ERROR.map(|off| r.read32(tm_reg(off)))
}

/// Whether the task manager reports idle.
pub fn idle(r: &impl Regs) -> bool {
    status(r) & mgr::STATUS_IDLE != 0
}

/// The task manager's STATUS word (one read; [`idle`] tests its idle
/// bit).
pub fn status(r: &impl Regs) -> u32 {
    r.read32(tm_reg(mgr::STATUS))
}

/// A line reporting more pending events than the FIFO can hold: the task
/// manager is wedged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// The line.
    pub line: usize,
    /// The count it reported.
    pub count: u32,
}

/// Pops every pending event of both lines, handing each to `seen`; no
/// acknowledgement (the callers ack with their own bits). Returns how many
/// were popped.
fn pop_all(r: &impl Regs, mut seen: impl FnMut(usize, Event)) -> Result<u32, Overflow> {
    let mut popped = 0;
    for line in 0..mgr::EVT_LINES {
        let count = r.read32(evt_reg(line, mgr::EVT_COUNT));
        if count > EVT_COUNT_MAX {
            return Err(Overflow { line, count });
        }
        for _ in 0..count {
            seen(line, pop(r, line));
            popped += 1;
        }
    }
    Ok(popped)
}

/// What a completion interrupt's handler finds on the engine (kernel-2
/// N13): whether the interrupt can be the engine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqStatus {
    /// A DART latched a fault (its error word): no engine register was
    /// read, the worker ends the job.
    DartFault(u32),
    /// Events are pending on a line: the engine's interrupt.
    Events,
    /// No event pending: not the engine's (or already popped by the
    /// worker's last look), so the handler leaves it to the interrupt
    /// core's spurious-interrupt accounting.
    Nothing,
}

/// Reads the status a completion interrupt handler judges by: the DARTs'
/// error registers first (record: "DART fault containment": engine reads
/// may hang after a fault), then the two lines' event counts (record:
/// "Event count, line 0 / 1", read before every pop by every reference;
/// the count is only read, nothing is popped or acknowledged).
pub fn irq_status(r: &impl Regs, darts: &impl Dart) -> IrqStatus {
    if let Some(e) = darts.fault() {
        return IrqStatus::DartFault(e);
    }
    for line in 0..mgr::EVT_LINES {
        if r.read32(evt_reg(line, mgr::EVT_COUNT)) != 0 {
            return IrqStatus::Events;
        }
    }
    IrqStatus::Nothing
}

/// Pops every pending event of both lines, handing each to `seen`, then
/// acknowledges once (record: "Completion"). Returns how many were popped.
pub fn drain(r: &impl Regs, seen: impl FnMut(usize, Event)) -> Result<u32, Overflow> {
    let popped = pop_all(r, seen)?;
    ack(r, mgr::IRQ_ACK_EVENTS);
    Ok(popped)
}

/// The fault state of the engine's DARTs (record: "DART fault
/// containment"): once a DART latched a fault, engine register reads may
/// never return, so the driver looks here first.
pub trait Dart {
    /// The first latched DART error word, if any DART has one.
    fn fault(&self) -> Option<u32>;
}

/// No DART to watch (the DART windows are not mapped).
pub struct NoDart;

impl Dart for NoDart {
    fn fault(&self) -> Option<u32> {
        None
    }
}

/// What one look at the task manager found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The job has not finished.
    Running,
    /// Both lines carried the finish word and the task manager is idle.
    Done,
    /// A line overflowed: the task manager is wedged.
    Wedged(Overflow),
    /// A DART latched this error word; no engine register was read.
    DartFault(u32),
}

/// Events of one job that were not its finish word, for the record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Strays {
    /// Task events of this job before its last task.
    pub intermediate: u32,
    /// Events of another network id (late events of an earlier job).
    pub foreign: u32,
    /// The last foreign info word.
    pub last_foreign: u32,
}

/// Completion of one job (record: "Completion"): a line is finished when
/// it carried exactly the job's last-task finish word; the job is done only
/// when both lines finished and the task manager reports idle. Nothing else
/// completes it.
#[derive(Clone, Copy, Debug)]
pub struct Completion {
    finish: u32,
    nid: u8,
    lines: [bool; mgr::EVT_LINES],
    /// What else the lines carried.
    pub strays: Strays,
    /// What the driver read on the way, for the observation record
    /// (`hw::obs`): no access is made for it.
    pub seen: Seen,
}

/// What the looks at one job read, kept for the observation record
/// (`hw::obs`): values the sequence reads anyway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Looks taken ([`Completion::poll`] calls).
    pub looks: u32,
    /// The first STATUS word read.
    pub status_first: Option<u32>,
    /// The last STATUS word read.
    pub status_last: Option<u32>,
    /// Every event drained before the push and popped since.
    pub events: obs::EventLog,
}

impl Completion {
    /// Waits for the job run as network `nid` with `td_count` TDs.
    pub fn new(nid: u8, td_count: u32) -> Self {
        Self {
            finish: finish_word(nid, td_count),
            nid,
            lines: [false; mgr::EVT_LINES],
            strays: Strays::default(),
            seen: Seen::default(),
        }
    }

    /// Makes this the completion of a new job (as [`Completion::new`]) in
    /// place: the event log is emptied, not cleared word by word, so the
    /// driver's one long-lived completion is reused without a copy.
    pub fn reset(&mut self, nid: u8, td_count: u32) {
        self.finish = finish_word(nid, td_count);
        self.nid = nid;
        self.lines = [false; mgr::EVT_LINES];
        self.strays = Strays::default();
        self.seen.looks = 0;
        self.seen.status_first = None;
        self.seen.status_last = None;
        self.seen.events.clear();
    }

    /// Notes an event drained before the push (left from before this
    /// job).
    pub fn take_stale(&mut self, line: usize, ev: Event) {
        self.seen.events.push(obs::Seen {
            line: line as u8,
            kind: obs::EventKind::Stale,
            ev,
        });
    }

    /// The word that finishes each line.
    pub fn finish(&self) -> u32 {
        self.finish
    }

    /// Whether line `line` carried the finish word.
    pub fn line_finished(&self, line: usize) -> bool {
        self.lines.get(line).copied().unwrap_or(false)
    }

    /// Whether both lines carried the finish word (the job is done once
    /// the idle bit shows too).
    pub fn events_finished(&self) -> bool {
        self.lines.iter().all(|l| *l)
    }

    /// Takes one popped event of `line`.
    pub fn take(&mut self, line: usize, ev: Event) {
        let kind = if ev.info == self.finish {
            if let Some(l) = self.lines.get_mut(line) {
                *l = true;
            }
            obs::EventKind::Finish
        } else if super::event_nid(ev.info) == self.nid {
            self.strays.intermediate += 1;
            obs::EventKind::Intermediate
        } else {
            self.strays.foreign += 1;
            self.strays.last_foreign = ev.info;
            obs::EventKind::Foreign
        };
        self.seen.events.push(obs::Seen {
            line: line as u8,
            kind,
            ev,
        });
    }

    /// Looks at the DARTs, then (if none faulted) pops what the lines carry
    /// and, once both finished, checks the idle bit.
    pub fn poll(&mut self, r: &impl Regs, dart: &impl Dart) -> Progress {
        self.seen.looks = self.seen.looks.saturating_add(1);
        if let Some(e) = dart.fault() {
            return Progress::DartFault(e);
        }
        if let Err(o) = drain(r, |line, ev| self.take(line, ev)) {
            return Progress::Wedged(o);
        }
        if !self.events_finished() {
            return Progress::Running;
        }
        let st = status(r);
        if self.seen.status_first.is_none() {
            self.seen.status_first = Some(st);
        }
        self.seen.status_last = Some(st);
        if st & mgr::STATUS_IDLE != 0 {
            Progress::Done
        } else {
            Progress::Running
        }
    }
}

/// Releases the task queue after its job was proven finished (record:
/// "Retire"): the slot must still carry this job's network id; its live
/// bit is cleared, then its status. `false` (nothing written) when the
/// slot carries another id.
pub fn retire(r: &impl Regs, q: usize, nid: u8) -> bool {
    let v = r.read32(tq_reg(q, tq::NID));
    if (v >> 8) & 0xff != u32::from(nid) {
        return false;
    }
    r.write32(tq_reg(q, tq::NID), v & !tq::NID_LIVE);
    r.write32(tq_reg(q, tq::STATUS), 0);
    true
}

/// The T6001 drain (record: "T6001 recovery"), for a task manager kept in
/// retention after a failed job: it is stopped, both lines are drained and
/// acknowledged, each latch is written back (and zeroed if it stays set),
/// every queue slot is released, and the queues are enabled again. The
/// caller then polls [`idle`]. The record found this does not recover a
/// T6001 whose task hung (only a new binding did); it is what the record
/// tried, and the idle bit decides.
pub fn retention_drain(r: &impl Regs) -> Result<(), Overflow> {
    let en = r.read32(tm_reg(mgr::TQ_EN));
    r.write32(tm_reg(mgr::TQ_EN), en & !mgr::TQ_EN_STOP);
    pop_all(r, |_, _| {})?;
    ack(r, mgr::IRQ_ACK_DRAIN);
    for off in mgr::ERROR {
        let v = r.read32(tm_reg(off));
        if v != 0 {
            r.write32(tm_reg(off), v);
            if r.read32(tm_reg(off)) != 0 {
                r.write32(tm_reg(off), 0);
            }
        }
    }
    for q in 0..TQ_COUNT {
        r.write32(tq_reg(q, tq::STATUS), 0);
        let nid = r.read32(tq_reg(q, tq::NID));
        if nid & tq::NID_LIVE != 0 {
            r.write32(tq_reg(q, tq::NID), nid & !tq::NID_LIVE);
        }
    }
    enable(r);
    Ok(())
}

/// What the driver does around the register sequence of one job.
pub trait JobHost {
    /// Stamps the job's network id on its first TD (in memory); `false`
    /// abandons the job before anything is pushed.
    fn stamp(&mut self, nid: u8) -> bool;
    /// Masks the DARTs' interrupt lines, if they are not masked already:
    /// the engine's event interrupt arrives on them (EILN-README) and
    /// apple-dart would clear a fault latch the poll must see. The job
    /// sequence never unmasks them: from the first push on, the engine may
    /// post events (a failed job may still finish; whether the acknowledge
    /// lowers the interrupt is not recorded, hw-2 §3 item 8), so the host
    /// unmasks only once the engine lost power and with it its interrupt
    /// enables (hw-2 risk 8).
    fn mask_darts(&mut self);
    /// Waits before the next look at the engine; `false` once the job's
    /// time is up.
    fn pause(&mut self) -> bool;
}

/// Why a job was not pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStarted {
    /// A DART had a fault latched already: no engine register was read.
    DartFault(u32),
    /// An event line overflowed while draining stale events.
    Wedged(Overflow),
    /// [`JobHost::stamp`] refused.
    Unstamped,
}

/// How a pushed job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobEnd {
    /// [`Progress::Done`], [`Progress::Running`] when its time was up (or
    /// its queue slot carried another id at retire), or the failure seen.
    pub progress: Progress,
    /// The error latches after a failed end (for the report only: they
    /// carry no verdict); `None` after a job that is done (not read: the
    /// hot path makes no access it does not need) or a DART fault (no
    /// engine register is read then).
    pub after: Option<[u32; 3]>,
    /// Events that were not the finish word.
    pub strays: Strays,
    /// What the looks read, for the observation record.
    pub seen: Seen,
}

/// A pushed job, between [`start_job`] and [`end_job`]. The driver keeps
/// one, allocated once, and [`start_job`] resets it in place for each job:
/// with its event log it is a few hundred bytes, which a move per call
/// would copy.
#[derive(Clone, Copy, Debug)]
pub struct Started {
    /// What its event lines carried so far; [`Completion::poll`] it.
    pub completion: Completion,
    queue: usize,
    nid: u8,
}

impl Default for Started {
    fn default() -> Self {
        Self::new()
    }
}

impl Started {
    /// No job yet: for [`start_job`] to fill.
    pub fn new() -> Self {
        Self {
            completion: Completion::new(0, 0),
            queue: 0,
            nid: 0,
        }
    }
}

/// How a pushed job ended, as [`end_job`] finds it; what its looks saw
/// stays in its [`Started`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// As [`JobEnd::progress`].
    pub progress: Progress,
    /// As [`JobEnd::after`].
    pub after: Option<[u32; 3]>,
}

/// The first half of [`run_job`]: look at the DARTs; drain stale events;
/// stamp the network id; mask the DART lines; push. `s` becomes the pushed
/// job's, in place (after an error it is no pushed job's).
pub fn start_job(
    r: &impl Regs,
    d: &impl Dart,
    host: &mut impl JobHost,
    p: &Push<'_>,
    s: &mut Started,
) -> Result<(), NotStarted> {
    if let Some(e) = d.fault() {
        return Err(NotStarted::DartFault(e));
    }
    s.queue = p.queue;
    s.nid = p.nid;
    let completion = &mut s.completion;
    completion.reset(p.nid, p.td_count);
    drain(r, |line, ev| completion.take_stale(line, ev)).map_err(NotStarted::Wedged)?;
    if !host.stamp(p.nid) {
        return Err(NotStarted::Unstamped);
    }
    host.mask_darts();
    push(r, p);
    Ok(())
}

/// The second half of [`run_job`], once polling ended with `progress`:
/// retire the queue if the job is done; note the latches if it
/// failed, unless a DART faulted. `s` is left as it is (its strays and
/// what its looks saw, for the record).
pub fn end_job(r: &impl Regs, s: &Started, progress: Progress) -> Ended {
    let mut progress = progress;
    if progress == Progress::Done && !retire(r, s.queue, s.nid) {
        progress = Progress::Running;
    }
    // The DART lines stay masked (`JobHost::mask_darts`): the engine may
    // still post events, and a raised event interrupt on an unmasked DART
    // line is one apple-dart cannot acknowledge.
    let after = match progress {
        Progress::DartFault(_) | Progress::Done => None,
        _ => Some(latches(r)),
    };
    Ended { progress, after }
}

/// One job on an enabled task manager, as the driver runs it (record: "A
/// job, start to end"): look at the DARTs; drain stale events; stamp the
/// network id; mask the DART lines (they stay masked); push; poll (DARTs
/// first, then both lines, then idle) until done, failed or out of time;
/// retire the queue; note the latches if the job failed, unless a DART
/// faulted.
/// The driver runs the same steps as [`start_job`], [`poll_until_end`]
/// and [`end_job`], so that the submitting thread can push and take a
/// first look itself.
pub fn run_job(
    r: &impl Regs,
    d: &impl Dart,
    host: &mut impl JobHost,
    p: &Push<'_>,
) -> Result<JobEnd, NotStarted> {
    let mut s = Started::new();
    start_job(r, d, host, p, &mut s)?;
    let progress = poll_until_end(r, d, host, &mut s);
    let end = end_job(r, &s, progress);
    Ok(JobEnd {
        progress: end.progress,
        after: end.after,
        strays: s.completion.strays,
        seen: s.completion.seen,
    })
}

/// Looks the submitting thread takes at once, beyond its first, at a job
/// whose finish word both lines carried but whose idle bit is not set yet
/// (record, Open item 4: whether the idle bit can read late is not known),
/// before it hands the job to the worker and its paced polls: a job that
/// ended at its push is then completed in EXEC under either reading.
pub const IDLE_LOOKS: u32 = 8;

/// The submitting thread's look at the job it just pushed (see
/// [`IDLE_LOOKS`]): one look, and while both lines carried the finish word
/// but the idle bit is not set, up to [`IDLE_LOOKS`] more at once. Does
/// not wait.
pub fn first_look(c: &mut Completion, r: &impl Regs, d: &impl Dart) -> Progress {
    let mut p = c.poll(r, d);
    for _ in 0..IDLE_LOOKS {
        if p != Progress::Running || !c.events_finished() {
            break;
        }
        p = c.poll(r, d);
    }
    p
}

/// The shortest pause between two looks at a running job, in µs.
pub const POLL_MIN_US: u64 = 20;

/// The longest pause between two looks at a running job, in µs.
pub const POLL_MAX_US: u64 = 1000;

/// Past [`POLL_MIN_US`], the pause is this fraction of the time the job
/// has run.
pub const POLL_BACKOFF: u64 = 64;

/// How long to pause before the next look at a job pushed `elapsed_us`
/// ago (record: "A job, start to end", step 7; the period is open there):
/// [`POLL_MIN_US`] while the job is young, then 1/[`POLL_BACKOFF`] of its
/// age, at most [`POLL_MAX_US`]. A job is so seen ended at most about
/// 1.6 % (or 20 µs) after its end, and a 138 ms network (omarchy-ane's
/// encoder on T8103) is looked at a few hundred times instead of about
/// 7,000 at a fixed 20 µs, each look being a dozen register reads.
pub fn poll_interval_us(elapsed_us: u64) -> u64 {
    (elapsed_us / POLL_BACKOFF).clamp(POLL_MIN_US, POLL_MAX_US)
}

/// The middle of [`run_job`]: polls the pushed job `s`, with
/// [`JobHost::pause`] between looks, until it is no longer running or
/// its time is up (`Running` then).
pub fn poll_until_end(
    r: &impl Regs,
    d: &impl Dart,
    host: &mut impl JobHost,
    s: &mut Started,
) -> Progress {
    loop {
        match s.completion.poll(r, d) {
            Progress::Running => {
                if !host.pause() {
                    return Progress::Running;
                }
            }
            other => return other,
        }
    }
}

/// T6001 recovery after a failed job (record: "T6001 recovery"): the
/// DARTs are looked at first (no engine read after a fault), then the
/// drain runs, then the idle bit is polled, the DARTs first each time,
/// with `pause` between looks until it returns `false`. Whether the task
/// manager came back idle.
pub fn recover_retained(r: &impl Regs, d: &impl Dart, mut pause: impl FnMut() -> bool) -> bool {
    if d.fault().is_some() || retention_drain(r).is_err() {
        return false;
    }
    loop {
        if d.fault().is_some() {
            return false;
        }
        if idle(r) {
            return true;
        }
        if !pause() {
            return false;
        }
    }
}

/// What the driver does around the recovery's register sequence
/// ([`recover`]).
pub trait RecoveryHost {
    /// Power-cycles the engine now (the device and every power domain it
    /// is attached to, forced off and on again) and checks that each is
    /// powered afterwards; `false`: the cycle failed or a domain is not
    /// on, and no engine register may be touched.
    fn power_cycle(&mut self) -> bool;
    /// Waits before the next look at a DART fault latch that is still set
    /// after the power cycle; `false`: give up.
    fn wait_dart(&mut self) -> bool;
    /// Masks the DARTs' interrupt lines unless they are masked already
    /// (the drain enables the task manager, which may then raise its
    /// event interrupt on them).
    fn mask_darts(&mut self);
    /// Waits before the next look at the idle bit; `false`: give up.
    fn pause(&mut self) -> bool;
}

/// How [`recover`] left the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// The power cycle failed or left a domain off: no engine register
    /// was touched after it.
    PowerFailed,
    /// A DART fault stayed latched after the power cycle: no engine
    /// register was read.
    DartLatched,
    /// The drain ran (or overflowed) and the idle bit never came back.
    Busy,
    /// The drain ran and the task manager reads idle; it is enabled.
    Idle,
}

/// The recovery after a failed job, on either H13 SoC, in the record's
/// order (OA-TM `ane_tm_recover`, which ran on T8103 and T6001): a forced
/// power cycle of every power domain, a check that each is on again
/// before any engine access, then (the DARTs looked at first, waiting for
/// their owner to clear a fault latch the engine left) the drain
/// ([`retention_drain`], which ends with the enable) and a poll for the
/// idle bit. What the engine may do next is the caller's decision: on
/// T8103 the cycle resets the task manager and `Idle` means ready; on
/// T6001 the record saw neither the cycle nor the drain make it compute
/// correctly again, so the caller takes no more jobs whatever this
/// returns.
pub fn recover(r: &impl Regs, d: &impl Dart, host: &mut impl RecoveryHost) -> Recovered {
    if !host.power_cycle() {
        return Recovered::PowerFailed;
    }
    while d.fault().is_some() {
        if !host.wait_dart() {
            return Recovered::DartLatched;
        }
    }
    host.mask_darts();
    if recover_retained(r, d, || host.pause()) {
        Recovered::Idle
    } else {
        Recovered::Busy
    }
}
