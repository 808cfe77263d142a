// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Observations: what the driver reads during normal operation, kept per
//! device for the first owner's receipt (`ane-probe doctor`, issue 25
//! point 8; `docs/first-contact.md`, "What the receipt records").
//!
//! Nothing here reads or writes a register. Every value is one the driver
//! reads anyway on its normal path (the event words each pop returns, the
//! STATUS word of each idle check, the DART error word that ended a job,
//! the error latches read after a failed job, the scratch registers and
//! CPU_STATUS the T6021 release reads) or a count or time it keeps around
//! them. Values that would need an extra access (a STATUS read after the
//! ack, a fifth event word, the latches of a job that ended DONE) are left
//! out on purpose: they would be experiments, not observations.
//!
//! Memory is bounded: a fixed-size record per device, with the last job
//! and the last failed job kept whole, each with its first
//! [`EVENTS_KEPT`] events word for word.
//!
//! The driver exposes the record as text in debugfs
//! (`/sys/kernel/debug/ane-<device>/observations`): one `key value` line
//! per field, in the order [`H13Obs::write`] and [`FwObs::write`] give,
//! starting with `schema ane-observations 1`. `ane-probe doctor` parses it
//! and tags each field with the open items of `docs/hardware-record.md`
//! it answers.

use core::fmt::{self, Write};

use super::fw::chman::HostStats;
use super::tm::seq::Event;

/// The first line of the text.
pub const SCHEMA_LINE: &str = "schema ane-observations 1";

/// Events of one job kept word for word (later ones are only counted).
pub const EVENTS_KEPT: usize = 8;

/// What an event popped around one job was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventKind {
    /// Drained right before the push (left from before this job).
    #[default]
    Stale,
    /// This job's last task's finish word.
    Finish,
    /// Another task of this job (same network id).
    Intermediate,
    /// Another network id, popped while this job ran.
    Foreign,
}

impl EventKind {
    /// The name in the text.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Stale => "stale",
            EventKind::Finish => "finish",
            EventKind::Intermediate => "intermediate",
            EventKind::Foreign => "foreign",
        }
    }
}

/// One popped event: its line, what it was, its four words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The event line (0 or 1).
    pub line: u8,
    /// What it was.
    pub kind: EventKind,
    /// INFO, UNK1, TMST, UNK2 as the pop read them.
    pub ev: Event,
}

/// The events popped around one job: the first [`EVENTS_KEPT`] kept, all
/// counted. Only the first `total` slots (at most [`EVENTS_KEPT`]) mean
/// anything: [`EventLog::clear`] and [`EventLog::copy_from`] leave the
/// rest as they were, so that neither writes every slot (equality and the
/// debug form look at the kept events only).
#[derive(Clone, Copy, Default)]
pub struct EventLog {
    /// Every event seen.
    pub total: u32,
    kept: [Seen; EVENTS_KEPT],
}

impl PartialEq for EventLog {
    fn eq(&self, other: &Self) -> bool {
        self.total == other.total && self.kept() == other.kept()
    }
}

impl Eq for EventLog {}

impl fmt::Debug for EventLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventLog")
            .field("total", &self.total)
            .field("kept", &self.kept())
            .finish()
    }
}

impl EventLog {
    /// No event seen.
    pub fn clear(&mut self) {
        self.total = 0;
    }

    /// Becomes a copy of `other`, copying only its kept events.
    pub fn copy_from(&mut self, other: &EventLog) {
        let kept = other.kept();
        if let Some(dst) = self.kept.get_mut(..kept.len()) {
            dst.copy_from_slice(kept);
        }
        self.total = other.total;
    }

    /// Notes one event.
    pub fn push(&mut self, s: Seen) {
        if let Some(slot) = self.kept.get_mut(self.total as usize) {
            *slot = s;
        }
        self.total = self.total.saturating_add(1);
    }

    /// The events kept, in the order they were popped.
    pub fn kept(&self) -> &[Seen] {
        let n = (self.total as usize).min(EVENTS_KEPT);
        self.kept.get(..n).unwrap_or(&[])
    }

    /// How many events of `kind` were kept.
    pub fn count_kept(&self, kind: EventKind) -> usize {
        self.kept().iter().filter(|s| s.kind == kind).count()
    }
}

/// How a job observed here ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JobOutcome {
    /// Both lines finished and the task manager read idle.
    #[default]
    Done,
    /// Its time ran out (or its queue slot carried another id at retire).
    Timeout,
    /// An event line reported more events than the FIFO holds.
    Wedged,
    /// A DART latched a fault: no engine register was read after it.
    DartFault,
}

impl JobOutcome {
    /// The name in the text.
    pub fn name(self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::Timeout => "timeout",
            JobOutcome::Wedged => "wedged",
            JobOutcome::DartFault => "dart-fault",
        }
    }
}

/// One pushed H13 job, as the driver saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobObs {
    /// Its number among the pushed jobs of this binding (1 = the first).
    pub number: u64,
    /// The network id it was pushed with.
    pub nid: u8,
    /// Its TD count.
    pub td_count: u32,
    /// How it ended.
    pub outcome: JobOutcome,
    /// Looks at the engine (each: the DARTs, both lines, perhaps STATUS).
    pub looks: u32,
    /// Nanoseconds from the push to the end of the last look.
    pub ns: u64,
    /// The first TM STATUS word read for it (the idle check after both
    /// lines finished); `None` when none was read.
    pub status_first: Option<u32>,
    /// The last TM STATUS word read for it.
    pub status_last: Option<u32>,
    /// The DART error word that ended it, 0 when no DART faulted.
    pub dart_error: u32,
    /// The three error latches read after a failed end (`None` after a job
    /// that is done, which reads none, or a DART fault).
    pub latches: Option<[u32; 3]>,
    /// The events drained before its push and popped while it ran.
    pub events: EventLog,
}

/// The H13 observations of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct H13Obs {
    /// Jobs pushed.
    pub jobs: u64,
    /// Of which done.
    pub done: u64,
    /// Of which failed (timeout, wedged, DART fault).
    pub failed: u64,
    /// Events drained before pushes (left from earlier jobs).
    pub events_stale: u64,
    /// Events of a job's own earlier tasks.
    pub events_intermediate: u64,
    /// Events of another network id while a job ran.
    pub events_foreign: u64,
    /// Fewest and most looks of a done job (0 before the first).
    pub looks_min: u32,
    /// Most looks of a done job.
    pub looks_max: u32,
    /// Shortest and longest done job, push to end, in ns.
    pub ns_min: u64,
    /// Longest done job.
    pub ns_max: u64,
    /// Sum over done jobs.
    pub ns_total: u64,
    /// Runtime suspends (the device's power domains may be cut).
    pub suspends: u64,
    /// Runtime resumes.
    pub resumes: u64,
    /// The first TM STATUS word read after the latest resume (by the
    /// first job's idle check): what the engine shows after a suspend.
    pub status_after_resume: Option<u32>,
    after_resume: bool,
    /// The latest job.
    pub last: Option<JobObs>,
    /// The latest job that failed.
    pub last_failed: Option<JobObs>,
}

impl H13Obs {
    /// Notes one pushed job that ended.
    pub fn job(&mut self, j: JobObs) {
        self.job_with(|last| *last = j);
    }

    /// Notes one pushed job that ended, which `fill` writes in place as
    /// the latest job (every field but `number`; what the slot held is the
    /// job before, or all zero): the driver copies nothing it need not.
    pub fn job_with(&mut self, fill: impl FnOnce(&mut JobObs)) {
        self.jobs = self.jobs.saturating_add(1);
        let j = self.last.get_or_insert_with(JobObs::default);
        fill(j);
        j.number = self.jobs;
        let j = &*j;
        for s in j.events.kept() {
            let c = match s.kind {
                EventKind::Stale => &mut self.events_stale,
                EventKind::Intermediate => &mut self.events_intermediate,
                EventKind::Foreign => &mut self.events_foreign,
                EventKind::Finish => continue,
            };
            *c = c.saturating_add(1);
        }
        if self.after_resume {
            if let Some(st) = j.status_first {
                self.status_after_resume = Some(st);
                self.after_resume = false;
            }
        }
        if j.outcome == JobOutcome::Done {
            self.done = self.done.saturating_add(1);
            if self.done == 1 {
                self.looks_min = j.looks;
                self.ns_min = j.ns;
            }
            self.looks_min = self.looks_min.min(j.looks);
            self.looks_max = self.looks_max.max(j.looks);
            self.ns_min = self.ns_min.min(j.ns);
            self.ns_max = self.ns_max.max(j.ns);
            self.ns_total = self.ns_total.saturating_add(j.ns);
        } else {
            self.failed = self.failed.saturating_add(1);
            self.last_failed = Some(*j);
        }
    }

    /// Notes a runtime suspend.
    pub fn suspended(&mut self) {
        self.suspends = self.suspends.saturating_add(1);
    }

    /// Notes a runtime resume: the next STATUS word read is the first
    /// after it.
    pub fn resumed(&mut self) {
        self.resumes = self.resumes.saturating_add(1);
        self.after_resume = true;
    }

    /// The text (see the module documentation).
    pub fn write(&self, w: &mut impl Write) -> fmt::Result {
        writeln!(w, "{SCHEMA_LINE}")?;
        writeln!(w, "generation h13")?;
        writeln!(w, "jobs {}", self.jobs)?;
        writeln!(w, "jobs_done {}", self.done)?;
        writeln!(w, "jobs_failed {}", self.failed)?;
        writeln!(w, "events_stale {}", self.events_stale)?;
        writeln!(w, "events_intermediate {}", self.events_intermediate)?;
        writeln!(w, "events_foreign {}", self.events_foreign)?;
        writeln!(w, "looks_min {}", self.looks_min)?;
        writeln!(w, "looks_max {}", self.looks_max)?;
        writeln!(w, "job_ns_min {}", self.ns_min)?;
        writeln!(w, "job_ns_max {}", self.ns_max)?;
        writeln!(w, "job_ns_total {}", self.ns_total)?;
        writeln!(w, "suspends {}", self.suspends)?;
        writeln!(w, "resumes {}", self.resumes)?;
        hex_line(
            w,
            format_args!("status_after_resume"),
            self.status_after_resume,
        )?;
        write_job(w, "last", self.last.as_ref())?;
        write_job(w, "failed", self.last_failed.as_ref())
    }
}

/// The line `KEY 0x…`, or `KEY none`.
fn hex_line(w: &mut impl Write, key: fmt::Arguments<'_>, v: Option<u32>) -> fmt::Result {
    match v {
        Some(v) => writeln!(w, "{key} {v:#x}"),
        None => writeln!(w, "{key} none"),
    }
}

/// The lines of one job under `prefix`, or `prefix none`.
fn write_job(w: &mut impl Write, prefix: &str, j: Option<&JobObs>) -> fmt::Result {
    let Some(j) = j else {
        return writeln!(w, "{prefix} none");
    };
    writeln!(w, "{prefix}.number {}", j.number)?;
    writeln!(w, "{prefix}.outcome {}", j.outcome.name())?;
    writeln!(w, "{prefix}.nid {:#x}", j.nid)?;
    writeln!(w, "{prefix}.td_count {}", j.td_count)?;
    writeln!(w, "{prefix}.looks {}", j.looks)?;
    writeln!(w, "{prefix}.ns {}", j.ns)?;
    hex_line(w, format_args!("{prefix}.status_first"), j.status_first)?;
    hex_line(w, format_args!("{prefix}.status_last"), j.status_last)?;
    writeln!(w, "{prefix}.dart_error {:#x}", j.dart_error)?;
    write!(w, "{prefix}.latches")?;
    match j.latches {
        Some(l) => {
            for v in l {
                write!(w, " {v:#x}")?;
            }
        }
        None => write!(w, " none")?,
    }
    writeln!(w)?;
    writeln!(w, "{prefix}.events {}", j.events.total)?;
    for (i, s) in j.events.kept().iter().enumerate() {
        writeln!(
            w,
            "{prefix}.event.{i} line={} kind={} info={:#x} unk1={:#x} tmst={:#x} unk2={:#x}",
            s.line,
            s.kind.name(),
            s.ev.info,
            s.ev.unk1,
            s.ev.tmst,
            s.ev.unk2
        )?;
    }
    Ok(())
}

/// The T6021 start, as the release contract read it (successful starts;
/// a failed one keeps its captured registers in the `firmware` file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwBoot {
    /// SCRATCH0 at READY.
    pub scratch0: u32,
    /// SCRATCH1 at READY (the boot ordinal − 1).
    pub scratch1: u32,
    /// SCRATCH3 at READY (the heap the firmware asked for).
    pub scratch3: u32,
    /// SCRATCH1:0 at DONE (a firmware-side address, never dereferenced).
    pub fw_address: u64,
    /// CPU_STATUS after DONE.
    pub cpu_status: u32,
    /// RVBAR was latched by iBoot.
    pub rvbar_latched: bool,
    /// The CONFIG_GET reply word.
    pub config: u32,
    /// Nanoseconds of the whole start, from the preflight to CONFIG_GET.
    pub ns: u64,
}

/// The T6021 observations of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwObs {
    /// The successful start, if one happened.
    pub boot: Option<FwBoot>,
    /// PROCEDURE_CALLs made.
    pub calls: u64,
    /// Of which done.
    pub calls_done: u64,
    /// Of which refused in order by the firmware.
    pub calls_refused: u64,
    /// Of which failed otherwise (timeout, broken exchange).
    pub calls_failed: u64,
    /// The last call's status word (0 done; the firmware's status when it
    /// refused the call).
    pub last_call_status: u32,
    /// Nanoseconds of the last call, command to finish event.
    pub last_call_ns: u64,
    /// Shortest and longest done call.
    pub call_ns_min: u64,
    /// Longest done call.
    pub call_ns_max: u64,
    /// The transport's counters after the last exchange.
    pub host: HostStats,
}

/// How a call observed here ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallEnd {
    /// Its finish event came.
    Done,
    /// The firmware refused it in order with this status.
    Refused(u32),
    /// It failed otherwise.
    Failed,
}

impl FwObs {
    /// Notes one call that ended as `end` after `ns`.
    pub fn call(&mut self, end: CallEnd, ns: u64) {
        self.calls = self.calls.saturating_add(1);
        self.last_call_ns = ns;
        match end {
            CallEnd::Done => {
                self.calls_done = self.calls_done.saturating_add(1);
                self.last_call_status = 0;
                if self.calls_done == 1 {
                    self.call_ns_min = ns;
                }
                self.call_ns_min = self.call_ns_min.min(ns);
                self.call_ns_max = self.call_ns_max.max(ns);
            }
            CallEnd::Refused(s) => {
                self.calls_refused = self.calls_refused.saturating_add(1);
                self.last_call_status = s;
            }
            CallEnd::Failed => {
                self.calls_failed = self.calls_failed.saturating_add(1);
                self.last_call_status = u32::MAX;
            }
        }
    }

    /// The text (see the module documentation).
    pub fn write(&self, w: &mut impl Write) -> fmt::Result {
        writeln!(w, "{SCHEMA_LINE}")?;
        writeln!(w, "generation h14")?;
        match &self.boot {
            Some(b) => {
                writeln!(w, "boot.scratch0 {:#x}", b.scratch0)?;
                writeln!(w, "boot.scratch1 {:#x}", b.scratch1)?;
                writeln!(w, "boot.scratch3 {:#x}", b.scratch3)?;
                writeln!(w, "boot.fw_address {:#x}", b.fw_address)?;
                writeln!(w, "boot.cpu_status {:#x}", b.cpu_status)?;
                writeln!(w, "boot.rvbar_latched {}", u8::from(b.rvbar_latched))?;
                writeln!(w, "boot.config {:#x}", b.config)?;
                writeln!(w, "boot.ns {}", b.ns)?;
            }
            None => writeln!(w, "boot none")?,
        }
        writeln!(w, "calls {}", self.calls)?;
        writeln!(w, "calls_done {}", self.calls_done)?;
        writeln!(w, "calls_refused {}", self.calls_refused)?;
        writeln!(w, "calls_failed {}", self.calls_failed)?;
        writeln!(w, "last_call.status {:#x}", self.last_call_status)?;
        writeln!(w, "last_call.ns {}", self.last_call_ns)?;
        writeln!(w, "call_ns_min {}", self.call_ns_min)?;
        writeln!(w, "call_ns_max {}", self.call_ns_max)?;
        let h = &self.host;
        writeln!(w, "host.exchanges {}", h.exchanges)?;
        writeln!(w, "host.sm_buffers {}", h.sm_buffers)?;
        writeln!(w, "host.sm_bytes {}", h.sm_bytes)?;
        writeln!(w, "host.sm_refused {}", h.sm_refused)?;
        writeln!(w, "host.drained {}", h.drained)?;
        writeln!(w, "host.bad_events {}", h.bad_events)?;
        writeln!(w, "host.lost_finishes {}", h.lost_finishes)?;
        writeln!(w, "host.bad_pointers {}", h.bad_pointers)?;
        writeln!(w, "host.odd_events {}", h.odd_events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `fmt::Write` into a fixed buffer (the crate has no `alloc`).
    struct Buf {
        b: [u8; 8192],
        n: usize,
    }

    impl Write for Buf {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.n + s.len();
            self.b
                .get_mut(self.n..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.n = end;
            Ok(())
        }
    }

    fn text(f: impl Fn(&mut Buf) -> fmt::Result) -> Buf {
        let mut b = Buf { b: [0; 8192], n: 0 };
        f(&mut b).unwrap();
        b
    }

    fn line<'a>(b: &'a Buf, key: &str) -> Option<&'a str> {
        let t = core::str::from_utf8(&b.b[..b.n]).unwrap();
        t.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
    }

    fn ev(info: u32) -> Event {
        Event {
            info,
            unk1: 1,
            tmst: 2,
            unk2: 3,
        }
    }

    /// The driver writes each job in place over the one before
    /// ([`H13Obs::job_with`], copying only the events kept): the record is
    /// the same as from whole jobs, and an event log that held more
    /// events than the next shows only the next one's.
    #[test]
    fn a_job_written_in_place_is_the_job() {
        let mut busy = JobObs {
            outcome: JobOutcome::Timeout,
            looks: 9,
            latches: Some([1, 2, 3]),
            ..JobObs::default()
        };
        for i in 0..(EVENTS_KEPT as u32 + 2) {
            busy.events.push(Seen {
                line: 1,
                kind: EventKind::Foreign,
                ev: ev(0x0580_0000 + i),
            });
        }
        let mut next = JobObs {
            nid: 0x40,
            td_count: 2,
            looks: 1,
            ns: 700,
            status_first: Some(0x1),
            status_last: Some(0x1),
            ..JobObs::default()
        };
        next.events.push(Seen {
            line: 0,
            kind: EventKind::Finish,
            ev: ev(0x0540_0001),
        });
        let mut whole = H13Obs::default();
        whole.job(busy);
        whole.job(next);
        let mut in_place = H13Obs::default();
        in_place.job(busy);
        in_place.job_with(|j| {
            j.nid = next.nid;
            j.td_count = next.td_count;
            j.outcome = next.outcome;
            j.looks = next.looks;
            j.ns = next.ns;
            j.status_first = next.status_first;
            j.status_last = next.status_last;
            j.dart_error = next.dart_error;
            j.latches = next.latches;
            j.events.copy_from(&next.events);
        });
        assert_eq!(in_place, whole);
        let last = in_place.last.unwrap();
        assert_eq!(last.events.kept(), next.events.kept());
        assert_eq!((last.number, last.events.total), (2, 1));
        let (a, b) = (text(|w| in_place.write(w)), text(|w| whole.write(w)));
        assert_eq!(&a.b[..a.n], &b.b[..b.n]);
        assert_eq!(line(&a, "last.event.1"), None, "nothing of the job before");
    }

    /// Counts, extremes, the first STATUS after a resume and the last
    /// failed job are what the jobs noted, not constants.
    #[test]
    fn h13_record_keeps_what_the_jobs_read() {
        let mut o = H13Obs::default();
        o.resumed();
        let mut j = JobObs {
            nid: 0x40,
            td_count: 1,
            looks: 3,
            ns: 5000,
            status_first: Some(0x11),
            status_last: Some(0x1),
            ..JobObs::default()
        };
        j.events.push(Seen {
            line: 0,
            kind: EventKind::Stale,
            ev: ev(0x05c0_0000),
        });
        j.events.push(Seen {
            line: 1,
            kind: EventKind::Finish,
            ev: ev(0x0540_0000),
        });
        o.job(j);
        j.looks = 7;
        j.ns = 9000;
        j.status_first = Some(0x21);
        o.job(j);
        let mut f = JobObs {
            outcome: JobOutcome::Timeout,
            latches: Some([0x2222_2222, 0x1, 0x2222]),
            ..JobObs::default()
        };
        for i in 0..(EVENTS_KEPT as u32 + 3) {
            f.events.push(Seen {
                line: 0,
                kind: EventKind::Intermediate,
                ev: ev(0x0540_0000 + i),
            });
        }
        o.job(f);
        o.suspended();
        assert_eq!((o.jobs, o.done, o.failed), (3, 2, 1));
        assert_eq!((o.looks_min, o.looks_max), (3, 7));
        assert_eq!((o.ns_min, o.ns_max, o.ns_total), (5000, 9000, 14000));
        assert_eq!(
            o.status_after_resume,
            Some(0x11),
            "the first job after the resume"
        );
        assert_eq!(o.events_stale, 2);
        assert_eq!(o.events_intermediate, EVENTS_KEPT as u64);
        let b = text(|w| o.write(w));
        assert_eq!(line(&b, "schema"), Some("ane-observations 1"));
        assert_eq!(line(&b, "jobs"), Some("3"));
        assert_eq!(line(&b, "status_after_resume"), Some("0x11"));
        assert_eq!(line(&b, "suspends"), Some("1"));
        assert_eq!(line(&b, "last.number"), Some("3"));
        assert_eq!(line(&b, "last.outcome"), Some("timeout"));
        assert_eq!(line(&b, "last.latches"), Some("0x22222222 0x1 0x2222"));
        assert_eq!(line(&b, "last.events"), Some("11"));
        assert_eq!(
            line(&b, "failed.event.7"),
            Some("line=0 kind=intermediate info=0x5400007 unk1=0x1 tmst=0x2 unk2=0x3")
        );
        assert_eq!(line(&b, "failed.event.8"), None, "bounded");
        assert_eq!(line(&b, "last.status_first"), Some("none"));
    }

    /// A job with no STATUS read after the resume leaves the value to the
    /// next one that reads it.
    #[test]
    fn status_after_resume_waits_for_a_read() {
        let mut o = H13Obs::default();
        o.resumed();
        o.job(JobObs {
            outcome: JobOutcome::DartFault,
            ..JobObs::default()
        });
        assert_eq!(o.status_after_resume, None);
        o.job(JobObs {
            status_first: Some(0x5),
            ..JobObs::default()
        });
        assert_eq!(o.status_after_resume, Some(0x5));
        o.job(JobObs {
            status_first: Some(0x7),
            ..JobObs::default()
        });
        assert_eq!(o.status_after_resume, Some(0x5), "only the first after it");
    }

    /// The T6021 text carries the start's scratch values and the calls.
    #[test]
    fn fw_record_keeps_the_start_and_the_calls() {
        let mut o = FwObs::default();
        let b = text(|w| o.write(w));
        assert_eq!(line(&b, "boot"), Some("none"));
        o.boot = Some(FwBoot {
            scratch0: 4,
            scratch1: 0x1043f,
            scratch3: 0x10000,
            fw_address: 0x1_0040_0000,
            cpu_status: 0x1,
            rvbar_latched: true,
            config: 0x14,
            ns: 77,
        });
        o.call(CallEnd::Done, 300);
        o.call(CallEnd::Done, 200);
        o.call(CallEnd::Refused(0xe0), 50);
        o.host.sm_buffers = 2;
        let b = text(|w| o.write(w));
        assert_eq!(line(&b, "boot.scratch1"), Some("0x1043f"));
        assert_eq!(line(&b, "boot.rvbar_latched"), Some("1"));
        assert_eq!(line(&b, "calls"), Some("3"));
        assert_eq!(line(&b, "calls_refused"), Some("1"));
        assert_eq!(line(&b, "last_call.status"), Some("0xe0"));
        assert_eq!((o.call_ns_min, o.call_ns_max), (200, 300));
        assert_eq!(line(&b, "host.sm_buffers"), Some("2"));
    }
}
