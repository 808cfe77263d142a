// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Host tests of the task-manager sequences against the record's model, and
//! the MMIO-trace test against `docs/hardware-record.md`.

extern crate std;

use core::cell::RefCell;
use std::format;
use std::string::String;
use std::vec::Vec;

use super::super::obs;
use super::model::{Behaviour, Inject, ModelRegs, Ran, TmModel, DART_ERROR, DART_ERROR_FLAG};
use super::seq::{self, Completion, Dart, Progress, Push, Regs};
use super::*;

/// Runs every job to completion.
fn finished(_: &model::Job) -> Ran {
    Ran::Finished
}

fn regs(retention: bool, b: Behaviour) -> ModelRegs<fn(&model::Job) -> Ran> {
    ModelRegs::new(
        TmModel::new(retention, b),
        finished as fn(&model::Job) -> Ran,
    )
}

/// The DART side of a [`ModelRegs`].
struct ModelDart<'a, F: FnMut(&model::Job) -> Ran>(&'a ModelRegs<F>);

impl<F: FnMut(&model::Job) -> Ran> Dart for ModelDart<'_, F> {
    fn fault(&self) -> Option<u32> {
        let e = self.0.model.borrow().dart_read32(DART_ERROR);
        (e & DART_ERROR_FLAG != 0).then_some(e)
    }
}

const BARS: [u64; 8] = [0x8000, 0x8400, 0, 0, 0x2_0000, 0x3_0000, 0, 0];

fn job(nid: u8, td_count: u32) -> Push<'static> {
    Push {
        queue: QUEUE,
        nid,
        bars: &BARS,
        td_size: 0x274,
        td_count,
        first_td: 0x4000,
    }
}

/// Polls until the job is no longer running, at most `limit` times.
fn wait<R: Regs>(r: &R, d: &impl Dart, c: &mut Completion, limit: u32) -> (Progress, u32) {
    for i in 0..limit {
        match c.poll(r, d) {
            Progress::Running => continue,
            p => return (p, i + 1),
        }
    }
    (Progress::Running, limit)
}

#[test]
fn words() {
    assert_eq!(finish_word(0x40, 1), 0x0540_0000);
    assert_eq!(finish_word(0x41, 3), 0x0541_0002);
    assert_eq!(evt_reg(1, mgr::EVT_INFO), 0x2002c);
    assert_eq!(evt_reg(1, mgr::EVT_UNK2), 0x20038);
    assert_eq!(tq_reg(4, tq::ADDR), 0x21000 + 4 * 0x148 + 0x134);
    assert!(tq_reg(TQ_COUNT - 1, tq::ADDR) + 4 <= ENGINE_WINDOW);
    assert_eq!(size_field(0x274), ((0x274 / 4) - 1) << 16);
    // The only id any reference pushed (hw-2 H5, record C6).
    assert_eq!(JOB_NID, 0x40);
}

#[test]
fn one_job_completes_on_both_lines_and_idle() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    seq::push(&r, &job(0x41, 2));
    let mut c = Completion::new(0x41, 2);
    let (p, _) = wait(&r, &ModelDart(&r), &mut c, 10);
    assert_eq!(p, Progress::Done);
    assert!(c.line_finished(0) && c.line_finished(1));
    assert!(!seq::retire(&r, QUEUE, 0x40), "another job's id");
    assert!(seq::retire(&r, QUEUE, 0x41));
    assert_eq!(r.read32(tq_reg(QUEUE, tq::STATUS)), 0);
    assert_eq!(r.read32(tq_reg(QUEUE, tq::NID)) & tq::NID_LIVE, 0);
}

#[test]
fn intermediate_events_do_not_complete() {
    let b = Behaviour {
        intermediate_events: true,
        ..Behaviour::DEFAULT
    };
    let r = regs(false, b);
    seq::enable(&r);
    seq::push(&r, &job(0x60, 4));
    let mut c = Completion::new(0x60, 4);
    assert_eq!(c.poll(&r, &seq::NoDart), Progress::Done);
    assert_eq!(c.strays.intermediate, 6, "3 tasks on 2 lines");
}

#[test]
fn a_stale_event_completes_nothing() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    r.inject.set(Some(Inject::Stale));
    seq::push(&r, &job(0x43, 1));
    let mut c = Completion::new(0x43, 1);
    assert_eq!(c.poll(&r, &seq::NoDart), Progress::Done);
    assert_eq!(c.strays.foreign, 2);
    // The old rule (any event with the job's nid) would have been fooled
    // by a stale event carrying it: the finish word is the only criterion.
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    r.inject.set(Some(Inject::Hang));
    seq::push(&r, &job(0x44, 3));
    let mut c = Completion::new(0x44, 3);
    c.take(
        0,
        seq::Event {
            info: task_word(0x44, 0),
            ..Default::default()
        },
    );
    c.take(
        1,
        seq::Event {
            info: task_word(0x44, 1),
            ..Default::default()
        },
    );
    assert_eq!(c.poll(&r, &seq::NoDart), Progress::Running);
}

/// Every job carries the same id (0x40, the only one that ran), so a late
/// finish word of the previous job is told apart by when it arrives: the
/// drain right before the push pops it, and the next job (which hangs here)
/// is not completed by it.
#[test]
fn a_late_event_of_the_same_id_is_drained_before_the_push() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    let mut host = QuietHost { polls: 10 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
    assert_eq!(end.progress, Progress::Done);
    r.model.borrow_mut().post_late(finish_word(JOB_NID, 1));
    r.inject.set(Some(Inject::Hang));
    let mut host = QuietHost { polls: 5 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
    assert_eq!(
        end.progress,
        Progress::Running,
        "the late word completed the next job"
    );
}

/// A job host that stamps, masks and waits silently.
struct QuietHost {
    polls: u32,
}

impl seq::JobHost for QuietHost {
    fn stamp(&mut self, _nid: u8) -> bool {
        true
    }

    fn mask_darts(&mut self) {}

    fn pause(&mut self) -> bool {
        self.polls = self.polls.saturating_sub(1);
        self.polls > 0
    }
}

#[test]
fn a_missing_line_or_idle_bit_keeps_the_job_running() {
    for inject in [
        Inject::DropLine1,
        Inject::NoIdle,
        Inject::Hang,
        Inject::Error,
    ] {
        let r = regs(false, Behaviour::DEFAULT);
        seq::enable(&r);
        r.inject.set(Some(inject));
        seq::push(&r, &job(0x45, 1));
        let mut c = Completion::new(0x45, 1);
        let (p, _) = wait(&r, &seq::NoDart, &mut c, 50);
        assert_eq!(p, Progress::Running, "{inject:?}");
    }
}

#[test]
fn idle_lag_is_waited_out() {
    let b = Behaviour {
        idle_lag: 3,
        ..Behaviour::DEFAULT
    };
    let r = regs(false, b);
    seq::enable(&r);
    seq::push(&r, &job(0x46, 1));
    let mut c = Completion::new(0x46, 1);
    let (p, polls) = wait(&r, &seq::NoDart, &mut c, 10);
    assert_eq!(p, Progress::Done);
    assert_eq!(polls, 4);
}

/// Open item 4 (simulator alternative 32768): a job that ended at its push
/// but whose idle bit reads late is still done at the submitting thread's
/// first look ([`seq::first_look`]), not handed to the worker; a job still
/// running is not looked at more than once there.
#[test]
fn a_job_done_at_its_push_is_done_at_the_first_look_under_idle_lag() {
    for lag in [0, 3, seq::IDLE_LOOKS] {
        let b = Behaviour {
            idle_lag: lag,
            ..Behaviour::DEFAULT
        };
        let r = regs(false, b);
        seq::enable(&r);
        seq::push(&r, &job(0x40, 2));
        let mut c = Completion::new(0x40, 2);
        assert_eq!(
            seq::first_look(&mut c, &r, &seq::NoDart),
            Progress::Done,
            "idle lag {lag}"
        );
    }
    // Later than that: the worker's paced polls see it.
    let b = Behaviour {
        idle_lag: seq::IDLE_LOOKS + 1,
        ..Behaviour::DEFAULT
    };
    let r = regs(false, b);
    seq::enable(&r);
    seq::push(&r, &job(0x40, 2));
    let mut c = Completion::new(0x40, 2);
    assert_eq!(seq::first_look(&mut c, &r, &seq::NoDart), Progress::Running);
    assert_eq!(wait(&r, &seq::NoDart, &mut c, 2).0, Progress::Done);
    // A job still running costs one look.
    let r = regs(false, Behaviour::DEFAULT);
    r.model.borrow_mut().set_defer(true);
    seq::enable(&r);
    seq::push(&r, &job(0x40, 1));
    let counted = Counting {
        r: &r,
        reads: core::cell::Cell::new(0),
    };
    let mut c = Completion::new(0x40, 1);
    assert_eq!(
        seq::first_look(&mut c, &counted, &seq::NoDart),
        Progress::Running
    );
    let one_look = counted.reads.get();
    counted.reads.set(0);
    assert_eq!(c.poll(&counted, &seq::NoDart), Progress::Running);
    assert_eq!(one_look, counted.reads.get(), "one look, not more");
}

/// Counts the reads of a [`ModelRegs`].
struct Counting<'a, F: FnMut(&model::Job) -> Ran> {
    r: &'a ModelRegs<F>,
    reads: core::cell::Cell<u32>,
}

impl<F: FnMut(&model::Job) -> Ran> Regs for Counting<'_, F> {
    fn read32(&self, off: usize) -> u32 {
        self.reads.set(self.reads.get() + 1);
        self.r.read32(off)
    }

    fn write32(&self, off: usize, val: u32) {
        self.r.write32(off, val);
    }
}

#[test]
fn a_short_pop_leaves_the_event_in_place() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    seq::push(&r, &job(0x47, 1));
    // Reading only the info word (what the driver did before) pops nothing.
    for _ in 0..3 {
        assert_eq!(r.read32(evt_reg(0, mgr::EVT_COUNT)), 1);
        assert_eq!(r.read32(evt_reg(0, mgr::EVT_INFO)), finish_word(0x47, 1));
    }
    let ev = seq::pop(&r, 0);
    assert_eq!(ev.info, finish_word(0x47, 1));
    assert_eq!(r.read32(evt_reg(0, mgr::EVT_COUNT)), 0);
    assert_eq!(r.read32(evt_reg(1, mgr::EVT_COUNT)), 1);
}

#[test]
fn latches_read_healthy_and_change_on_error() {
    let r = regs(false, Behaviour::DEFAULT);
    assert_eq!(seq::latches(&r), LATCH_HEALTHY);
    seq::enable(&r);
    r.inject.set(Some(Inject::Error));
    seq::push(&r, &job(0x48, 1));
    assert_ne!(seq::latches(&r), LATCH_HEALTHY);
}

#[test]
fn no_engine_read_after_a_dart_fault() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    r.inject.set(Some(Inject::DartFault));
    seq::push(&r, &job(0x49, 1));
    let mut c = Completion::new(0x49, 1);
    let (p, _) = wait(&r, &ModelDart(&r), &mut c, 10);
    assert!(matches!(p, Progress::DartFault(e) if e & DART_ERROR_FLAG != 0));
    assert_eq!(r.model.borrow().lockups(), 0);
    // Without the DART check the same poll is a lockup on hardware.
    let _ = c.poll(&r, &seq::NoDart);
    assert!(r.model.borrow().lockups() > 0);
}

#[test]
fn a_job_that_takes_time_is_running_until_it_ran() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    r.model.borrow_mut().set_defer(true);
    seq::push(&r, &job(0x41, 2));
    assert!(r.model.borrow().has_deferred());
    assert!(
        r.model.borrow().busy(),
        "the engine reaches memory meanwhile"
    );
    let mut c = Completion::new(0x41, 2);
    assert_eq!(wait(&r, &ModelDart(&r), &mut c, 5).0, Progress::Running);
    assert!(!seq::idle(&r));
    let mut ran = 0;
    r.model.borrow_mut().run_deferred(|_| {
        ran += 1;
        Ran::Finished
    });
    assert_eq!(ran, 1);
    assert_eq!(wait(&r, &ModelDart(&r), &mut c, 5).0, Progress::Done);
    // Once only.
    r.model.borrow_mut().run_deferred(|_| {
        ran += 1;
        Ran::Finished
    });
    assert_eq!(ran, 1);

    // Power loss (either SoC) or stopping the queues drops the job unrun.
    for retention in [false, true] {
        let r = regs(retention, Behaviour::DEFAULT);
        seq::enable(&r);
        r.model.borrow_mut().set_defer(true);
        seq::push(&r, &job(0x42, 1));
        r.model.borrow_mut().power_cycle();
        assert!(!r.model.borrow().has_deferred());
        r.model
            .borrow_mut()
            .run_deferred(|_| panic!("ran after power loss"));
    }
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    r.model.borrow_mut().set_defer(true);
    seq::push(&r, &job(0x43, 1));
    let en = r.read32(tm_reg(mgr::TQ_EN));
    r.write32(tm_reg(mgr::TQ_EN), en & !mgr::TQ_EN_STOP);
    r.model
        .borrow_mut()
        .run_deferred(|_| panic!("ran after the queues stopped"));
}

#[test]
fn t8103_power_cycle_clears_a_hang_t6001_needs_the_drain() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    r.inject.set(Some(Inject::Hang));
    seq::push(&r, &job(0x4a, 1));
    r.model.borrow_mut().power_cycle();
    assert!(!r.model.borrow().busy());
    assert_eq!(r.read32(tm_reg(mgr::TQ_EN)), 0, "power loss resets the TM");

    let r = regs(true, Behaviour::DEFAULT);
    seq::enable(&r);
    r.inject.set(Some(Inject::Hang));
    seq::push(&r, &job(0x4b, 1));
    r.model.borrow_mut().power_cycle();
    assert!(!r.model.borrow().busy(), "no power, no DMA");
    assert!(!seq::idle(&r), "retention keeps the hung task's wedge");
    assert_eq!(seq::retention_drain(&r), Ok(()));
    assert!(
        !seq::idle(&r),
        "the drain does not revive a hung T6001 (OA)"
    );
    // A fresh binding (a new model) does.
    let r = regs(true, Behaviour::DEFAULT);
    seq::enable(&r);
    seq::push(&r, &job(0x4c, 1));
    let mut c = Completion::new(0x4c, 1);
    assert_eq!(wait(&r, &seq::NoDart, &mut c, 5).0, Progress::Done);
}

#[test]
fn the_event_interrupt_lands_on_the_dart_line() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    seq::push(&r, &job(0x4d, 1));
    assert_eq!(r.model.borrow().dart_line_raised(), 1);
    let mut c = Completion::new(0x4d, 1);
    assert_eq!(c.poll(&r, &seq::NoDart), Progress::Done);
    seq::push(&r, &job(0x4e, 1));
    assert_eq!(r.model.borrow().dart_line_raised(), 2, "acked in between");
}

/// hw-2 risk 8: a job that timed out may still finish and post its events;
/// the job sequence must not hand the DART line back to apple-dart while
/// that can happen. The failed job's late events, and every later event
/// until a power cycle, reach only a masked line, under both readings of
/// the acknowledge (it lowers the interrupt, or it does not).
#[test]
fn the_dart_line_stays_masked_while_the_engine_may_post_events() {
    for ack_keeps_irq in [false, true] {
        let b = Behaviour {
            ack_keeps_irq,
            ..Behaviour::DEFAULT
        };
        let r = regs(false, b);
        let t = Trace {
            r: &r,
            log: RefCell::new(Vec::new()),
        };
        seq::enable(&t);
        assert_eq!(driver_job(&t, &job(JOB_NID, 2), 10), Progress::Done);
        // The next job takes longer than its time: it ends Running.
        r.model.borrow_mut().set_defer(true);
        assert_eq!(driver_job(&t, &job(JOB_NID, 1), 2), Progress::Running);
        // ... and finishes afterwards, posting its events.
        r.model.borrow_mut().run_deferred(|_| Ran::Finished);
        let log = t.log.into_inner();
        assert!(
            !log.iter().any(|l| l.contains("unmask")),
            "unmasked while the engine may post events:\n{}",
            log.join("\n")
        );
        assert_eq!(
            r.model.borrow().dart_storms(),
            0,
            "ack_keeps_irq {ack_keeps_irq}"
        );
        // A power cycle ends it: then the line may go back.
        r.model.borrow_mut().power_cycle();
        r.model.borrow_mut().set_dart_masked(false);
        assert_eq!(r.model.borrow().dart_storms(), 0);
    }
}

/// The model's storm count catches a line unmasked while the interrupt is
/// raised, or raised while unmasked (what the test above relies on).
#[test]
fn an_unmasked_dart_line_under_a_raised_event_interrupt_is_counted() {
    let b = Behaviour {
        ack_keeps_irq: true,
        ..Behaviour::DEFAULT
    };
    let r = regs(false, b);
    seq::enable(&r);
    r.model.borrow_mut().set_dart_masked(true);
    seq::push(&r, &job(JOB_NID, 1));
    let mut c = Completion::new(JOB_NID, 1);
    assert_eq!(c.poll(&r, &seq::NoDart), Progress::Done);
    assert_eq!(r.model.borrow().dart_storms(), 0);
    // Acknowledged, still raised: unmasking now storms.
    r.model.borrow_mut().set_dart_masked(false);
    assert_eq!(r.model.borrow().dart_storms(), 1);
    // The record's reading: the acknowledge lowers it, but an event
    // raised on an unmasked line is one apple-dart cannot handle.
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    seq::push(&r, &job(JOB_NID, 1));
    assert_eq!(r.model.borrow().dart_storms(), 1);
}

/// hw-2 §3 item 9: if the INFO read alone pops an event, the driver's
/// four reads still see each event once and complete the job.
#[test]
fn four_reads_complete_when_info_alone_pops() {
    let b = Behaviour {
        pop_on_info: true,
        ..Behaviour::DEFAULT
    };
    let r = regs(false, b);
    seq::enable(&r);
    let mut host = QuietHost { polls: 10 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 3)).expect("started");
    assert_eq!(end.progress, Progress::Done);
    assert_eq!((end.strays.intermediate, end.strays.foreign), (0, 0));
    let mut host = QuietHost { polls: 10 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
    assert_eq!(end.progress, Progress::Done);
}

/// hw-2 §3 item 10: only 0x40 ran; under the reading that nothing else
/// runs, the driver's id still completes and another id hangs.
#[test]
fn only_the_id_that_ran_runs_under_the_strict_reading() {
    let b = Behaviour {
        only_nid_40: true,
        ..Behaviour::DEFAULT
    };
    let r = regs(false, b);
    seq::enable(&r);
    let mut host = QuietHost { polls: 10 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 2)).expect("started");
    assert_eq!(end.progress, Progress::Done);
    let mut host = QuietHost { polls: 5 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(0x41, 2)).expect("started");
    assert_eq!(end.progress, Progress::Running);
}

/// hw-2 §3 item 14: under the reading where the T6001 drain does bring
/// the idle bit back, later jobs complete without computing (OA's
/// "nondeterministic garbage"); the driver therefore never takes jobs
/// again after a failure on T6001 (`H13::recover`).
#[test]
fn a_revived_t6001_completes_jobs_without_computing() {
    let b = Behaviour {
        revive_garbage: true,
        ..Behaviour::DEFAULT
    };
    let computed = core::cell::Cell::new(0u32);
    let r = ModelRegs::new(TmModel::new(true, b), |_: &model::Job| {
        computed.set(computed.get() + 1);
        Ran::Finished
    });
    seq::enable(&r);
    let mut host = QuietHost { polls: 10 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
    assert_eq!((end.progress, computed.get()), (Progress::Done, 1));
    r.inject.set(Some(Inject::Hang));
    let mut host = QuietHost { polls: 3 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
    assert_eq!(end.progress, Progress::Running);
    assert!(
        seq::recover_retained(&r, &ModelDart(&r), || false),
        "the alternative's drain brings idle back"
    );
    let mut host = QuietHost { polls: 10 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
    assert_eq!(end.progress, Progress::Done, "it looks done");
    assert_eq!(computed.get(), 1, "but computed nothing");
}

/// A recovery host that power-cycles the model (or fails to) and waits
/// silently; it counts the cycles.
struct QuietRecovery<'a, F: FnMut(&model::Job) -> Ran> {
    r: &'a ModelRegs<F>,
    cycle_ok: bool,
    cycles: u32,
    polls: u32,
}

impl<F: FnMut(&model::Job) -> Ran> seq::RecoveryHost for QuietRecovery<'_, F> {
    fn power_cycle(&mut self) -> bool {
        self.cycles += 1;
        if self.cycle_ok {
            self.r.model.borrow_mut().power_cycle();
        }
        self.cycle_ok
    }

    fn wait_dart(&mut self) -> bool {
        false
    }

    fn mask_darts(&mut self) {}

    fn pause(&mut self) -> bool {
        self.polls = self.polls.saturating_sub(1);
        self.polls > 0
    }
}

/// Issue 25 point 5: T6001's recovery is the record's (OA-TM
/// `ane_tm_recover`): the forced power cycle comes first, then the drain.
/// Under the record's reading (the cycle keeps the task manager in
/// retention) the idle bit never comes back; under the simulator's other
/// reading (`cycle_resets`) the cycle resets it and jobs compute again.
/// The driver takes no job after either (`H13::recover`); the guest's
/// `--wedge` runs check that under both.
#[test]
fn t6001_recovery_cycles_the_power_first_under_either_reading() {
    for cycle_resets in [false, true] {
        let b = Behaviour {
            cycle_resets,
            ..Behaviour::DEFAULT
        };
        let computed = core::cell::Cell::new(0u32);
        let r = ModelRegs::new(TmModel::new(true, b), |_: &model::Job| {
            computed.set(computed.get() + 1);
            Ran::Finished
        });
        seq::enable(&r);
        r.inject.set(Some(Inject::Hang));
        let mut host = QuietHost { polls: 3 };
        let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
        assert_eq!(end.progress, Progress::Running);
        assert!(r.model.borrow().busy(), "the hung task may still run DMA");
        let mut rec = QuietRecovery {
            r: &r,
            cycle_ok: true,
            cycles: 0,
            polls: 5,
        };
        let got = seq::recover(&r, &ModelDart(&r), &mut rec);
        assert_eq!(rec.cycles, 1, "one forced power cycle");
        assert!(!r.model.borrow().busy(), "no power, no DMA");
        let want = if cycle_resets {
            seq::Recovered::Idle
        } else {
            seq::Recovered::Busy
        };
        assert_eq!(got, want, "cycle_resets {cycle_resets}");
        if cycle_resets {
            let mut host = QuietHost { polls: 10 };
            let end =
                seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
            assert_eq!((end.progress, computed.get()), (Progress::Done, 1));
        }
    }
}

/// A power cycle that fails (or leaves a domain off) ends the recovery
/// before any engine register is touched (OA-TM `ane_ps_verify_on`: no
/// engine access before the islands read on).
#[test]
fn no_engine_access_after_a_failed_power_cycle() {
    for retention in [false, true] {
        let r = regs(retention, Behaviour::DEFAULT);
        seq::enable(&r);
        r.inject.set(Some(Inject::Hang));
        let mut host = QuietHost { polls: 3 };
        let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
        assert_eq!(end.progress, Progress::Running);
        let t = Trace {
            r: &r,
            log: RefCell::new(Vec::new()),
        };
        let mut rec = QuietRecovery {
            r: &r,
            cycle_ok: false,
            cycles: 0,
            polls: 5,
        };
        let got = seq::recover(&t, &t, &mut rec);
        assert_eq!(got, seq::Recovered::PowerFailed);
        assert_eq!(
            t.log.into_inner(),
            Vec::<String>::new(),
            "retention {retention}"
        );
    }
}

// The MMIO trace of a canonical job, compared with the sequence written in
// docs/hardware-record.md.

/// A register's name in the record's notation.
fn name(off: usize) -> String {
    if let Some(rel) = off.checked_sub(TQ_BASE) {
        let (q, r) = (rel / TQ_STRIDE, rel % TQ_STRIDE);
        let reg = match r {
            tq::STATUS => String::from("STATUS"),
            tq::PRTY => String::from("PRTY"),
            tq::NID => String::from("NID"),
            tq::SIZE => String::from("SIZE"),
            tq::ADDR => String::from("ADDR"),
            r if (tq::BAR..tq::BAR + 4 * 32).contains(&r) => format!("BAR{}", (r - tq::BAR) / 4),
            r => format!("{r:#x}"),
        };
        return format!("tq{q}.{reg}");
    }
    let rel = off - TM_BASE;
    let reg = match rel {
        mgr::ADDR => "ADDR",
        mgr::INFO => "INFO",
        mgr::PUSH => "PUSH",
        mgr::TQ_EN => "TQ_EN",
        mgr::STATUS => "STATUS",
        mgr::IRQ_EN1 => "IRQ_EN1",
        mgr::IRQ_ACK => "IRQ_ACK",
        mgr::IRQ_EN2 => "IRQ_EN2",
        r if r == mgr::ERROR[0] => "ERROR1",
        r if r == mgr::ERROR[1] => "ERROR2",
        r if r == mgr::ERROR[2] => "ERROR3",
        r => {
            let line = (r - mgr::EVT_COUNT) / mgr::EVT_STRIDE;
            let w = match (r - mgr::EVT_COUNT) % mgr::EVT_STRIDE {
                0 => "COUNT",
                4 => "INFO",
                8 => "UNK1",
                0xc => "TMST",
                _ => "UNK2",
            };
            return format!("evt{line}.{w}");
        }
    };
    format!("tm.{reg}")
}

/// Records every access, in the record's notation.
struct Trace<'a, F: FnMut(&model::Job) -> Ran> {
    r: &'a ModelRegs<F>,
    log: RefCell<Vec<String>>,
}

impl<F: FnMut(&model::Job) -> Ran> Regs for Trace<'_, F> {
    fn read32(&self, off: usize) -> u32 {
        let v = self.r.read32(off);
        self.log
            .borrow_mut()
            .push(format!("R {} -> {v:#x}", name(off)));
        v
    }

    fn write32(&self, off: usize, val: u32) {
        self.log
            .borrow_mut()
            .push(format!("W {} = {val:#x}", name(off)));
        self.r.write32(off, val);
    }
}

impl<F: FnMut(&model::Job) -> Ran> Dart for Trace<'_, F> {
    fn fault(&self) -> Option<u32> {
        let e = self.r.model.borrow().dart_read32(DART_ERROR);
        self.log
            .borrow_mut()
            .push(format!("R dart.ERROR -> {e:#x}"));
        (e & DART_ERROR_FLAG != 0).then_some(e)
    }
}

impl<F: FnMut(&model::Job) -> Ran> Trace<'_, F> {
    fn note(&self, s: &str) {
        self.log.borrow_mut().push(format!("# {s}"));
    }
}

/// The driver's side of a job for the trace: notes each hook, and lets the
/// poll go on `polls` times.
struct TraceHost<'a, 'b, F: FnMut(&model::Job) -> Ran> {
    t: &'a Trace<'b, F>,
    polls: u32,
}

impl<F: FnMut(&model::Job) -> Ran> seq::JobHost for TraceHost<'_, '_, F> {
    fn stamp(&mut self, nid: u8) -> bool {
        self.t
            .note(&format!("stamp nid {nid:#x} on the bootstrap TD"));
        true
    }

    fn mask_darts(&mut self) {
        self.t.note("mask the DART lines");
        self.t.r.model.borrow_mut().set_dart_masked(true);
    }

    fn pause(&mut self) -> bool {
        self.polls = self.polls.saturating_sub(1);
        self.t.note("pause");
        self.polls > 0
    }
}

/// The driver's job sequence ([`seq::run_job`]) under the trace.
fn driver_job<F: FnMut(&model::Job) -> Ran>(
    t: &Trace<'_, F>,
    p: &Push<'_>,
    polls: u32,
) -> Progress {
    let mut host = TraceHost { t, polls };
    match seq::run_job(t, t, &mut host, p) {
        Ok(end) => end.progress,
        Err(e) => panic!("not started: {e:?}"),
    }
}

/// The driver's side of the recovery for the trace ([`seq::recover`]):
/// notes each hook and lets the idle poll go on `polls` times.
struct TraceRecovery<'a, 'b, F: FnMut(&model::Job) -> Ran> {
    t: &'a Trace<'b, F>,
    retention: bool,
    polls: u32,
}

impl<F: FnMut(&model::Job) -> Ran> seq::RecoveryHost for TraceRecovery<'_, '_, F> {
    fn power_cycle(&mut self) -> bool {
        self.t
            .note("forced power cycle of the device and every power domain, each checked on");
        self.t.r.model.borrow_mut().power_cycle();
        if !self.retention {
            // What `H13::resume` does on T8103 (not `seq`): the task
            // manager lost its interrupt enables with the power.
            self.t.note("unmask the DART lines");
            self.t.r.model.borrow_mut().set_dart_masked(false);
        }
        true
    }

    fn wait_dart(&mut self) -> bool {
        panic!("no DART fault in the canonical trace")
    }

    fn mask_darts(&mut self) {
        self.t.note("mask the DART lines");
        self.t.r.model.borrow_mut().set_dart_masked(true);
    }

    fn pause(&mut self) -> bool {
        self.polls = self.polls.saturating_sub(1);
        self.t.note("pause");
        self.polls > 0
    }
}

/// The canonical trace: enable, one job, completion, retire, then one job
/// that hangs and the SoC's recovery, then the next job.
fn canonical(retention: bool) -> Vec<String> {
    let r = regs(retention, Behaviour::DEFAULT);
    let t = Trace {
        r: &r,
        log: RefCell::new(Vec::new()),
    };
    t.note("enable");
    seq::enable(&t);
    t.note("job: nid 0x40, two TDs");
    assert_eq!(driver_job(&t, &job(JOB_NID, 2), 10), Progress::Done);
    t.note("job: nid 0x40 again, hangs; the timeout ends the polls");
    r.inject.set(Some(Inject::Hang));
    assert_eq!(driver_job(&t, &job(JOB_NID, 1), 2), Progress::Running);
    t.note("recovery");
    let mut host = TraceRecovery {
        t: &t,
        retention,
        polls: 2,
    };
    let got = seq::recover(&t, &t, &mut host);
    let want = if retention {
        // OA: the cycle keeps T6001's task manager in retention and the
        // drain does not revive it.
        seq::Recovered::Busy
    } else {
        seq::Recovered::Idle
    };
    assert_eq!(got, want);
    t.log.into_inner()
}

/// The trace block `name` of docs/hardware-record.md.
fn documented(block: &str) -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/hardware-record.md");
    let doc = std::fs::read_to_string(path).expect("docs/hardware-record.md");
    let open = format!("```mmio-trace {block}");
    let start = doc.find(&open).unwrap_or_else(|| panic!("no {open} block")) + open.len();
    let end = doc[start..].find("```").expect("unterminated block") + start;
    doc[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// Folds runs of zero BAR writes into one line (`W tq4.BAR6..31 = 0x0`),
/// so the record stays readable.
fn compact(lines: &[String]) -> Vec<String> {
    let zero_bar = |l: &str| -> Option<(String, u32)> {
        let rest = l.strip_prefix("W tq")?.strip_suffix(" = 0x0")?;
        let (q, n) = rest.split_once(".BAR")?;
        Some((q.into(), n.parse().ok()?))
    };
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(String, u32, u32)> = None;
    let flush = |out: &mut Vec<String>, run: &mut Option<(String, u32, u32)>| {
        if let Some((q, a, b)) = run.take() {
            out.push(if a == b {
                format!("W tq{q}.BAR{a} = 0x0")
            } else {
                format!("W tq{q}.BAR{a}..{b} = 0x0")
            });
        }
    };
    for l in lines {
        match (zero_bar(l), &mut run) {
            (Some((q, n)), Some((rq, _, b))) if *rq == q && *b + 1 == n => *b = n,
            (Some((q, n)), _) => {
                flush(&mut out, &mut run);
                run = Some((q, n, n));
            }
            (None, _) => {
                flush(&mut out, &mut run);
                out.push(l.clone());
            }
        }
    }
    flush(&mut out, &mut run);
    out
}

fn compare(block: &str, got: &[String]) {
    let got = &compact(got)[..];
    let want = documented(block);
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        assert_eq!(g, w, "{block}: step {} differs", i + 1);
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{block}: trace length, got:\n{}",
        got.join("\n")
    );
}

#[test]
fn mmio_trace_matches_the_record_t8103() {
    compare("t8103", &canonical(false));
}

#[test]
fn mmio_trace_matches_the_record_t6001() {
    // Identical to T8103 up to the recovery; the record shows the rest.
    let (t8103, t6001) = (canonical(false), canonical(true));
    let at = |t: &[String]| t.iter().position(|l| l == "# recovery").unwrap();
    let (a, b) = (at(&t8103), at(&t6001));
    assert_eq!(t8103[..a], t6001[..b]);
    compare("t6001", &t6001[b..]);
}

/// The looks a job of `job_us` gets from its push to the look that sees it
/// ended, with `pause` between looks (the looks themselves take no time).
fn looks_until_seen(job_us: u64, pause: impl Fn(u64) -> u64) -> (u64, u64) {
    let (mut t, mut looks) = (0u64, 1u64);
    while t < job_us {
        t += pause(t);
        looks += 1;
    }
    (looks, t - job_us)
}

#[test]
fn the_poll_backs_off_with_the_jobs_age_and_stays_prompt() {
    // Young jobs are looked at every 20 µs, old ones at most every 1 ms.
    assert_eq!(seq::poll_interval_us(0), seq::POLL_MIN_US);
    assert_eq!(seq::poll_interval_us(1_000), seq::POLL_MIN_US);
    assert_eq!(seq::poll_interval_us(6_400), 100);
    assert_eq!(seq::poll_interval_us(10_000_000), seq::POLL_MAX_US);
    for job_us in [5u64, 100, 1_000, 10_000, 138_000, 1_900_000] {
        let (looks, late) = looks_until_seen(job_us, seq::poll_interval_us);
        let (fixed, _) = looks_until_seen(job_us, |_| seq::POLL_MIN_US);
        // Never later than 1/64 of the job, or one minimum pause.
        assert!(
            late <= (job_us / seq::POLL_BACKOFF).max(seq::POLL_MIN_US),
            "{job_us} µs: seen {late} µs late"
        );
        assert!(looks <= fixed, "{job_us} µs: {looks} looks");
        if job_us >= 100_000 {
            // The encoder-sized job: a sixteenth of the fixed period's looks.
            assert!(looks * 16 <= fixed, "{job_us} µs: {looks} vs {fixed} looks");
        }
    }
}

/// Cells of one markdown table row (`\|` is a literal bar inside a cell).
fn cells(row: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = row.trim().trim_start_matches('|').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cur.push('|');
                chars.next();
            }
            '|' => out.push(core::mem::take(&mut cur).trim().into()),
            c => cur.push(c),
        }
    }
    out
}

/// docs/hardware-record.md: every table has a "Ran on hardware" column,
/// and every row says in it whether that thing ran (which driver, which
/// machine or receipt) or never ran (issue 25, hw-2 §2.3).
#[test]
fn every_record_row_says_whether_it_ran_on_hardware() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/hardware-record.md");
    let doc = std::fs::read_to_string(path).expect("docs/hardware-record.md");
    let lines: Vec<&str> = doc.lines().collect();
    let mut tables = 0;
    let mut i = 0;
    while i + 1 < lines.len() {
        if !(lines[i].starts_with('|') && lines[i + 1].starts_with("|---")) {
            i += 1;
            continue;
        }
        tables += 1;
        let head = cells(lines[i]);
        let col = head
            .iter()
            .position(|c| c == "Ran on hardware")
            .unwrap_or_else(|| panic!("line {}: no \"Ran on hardware\" column: {head:?}", i + 1));
        let mut j = i + 2;
        while j < lines.len() && lines[j].starts_with('|') {
            let row = cells(lines[j]);
            assert_eq!(row.len(), head.len(), "line {}: {} cells", j + 1, row.len());
            let ran = row[col].to_lowercase();
            let words: Vec<&str> = ran.split(|c: char| !c.is_alphanumeric()).collect();
            assert!(
                ["yes", "no", "ran", "never"]
                    .iter()
                    .any(|w| words.contains(w))
                    || ran.contains("not recorded"),
                "line {}: says neither ran nor never ran: {:?}",
                j + 1,
                row[col]
            );
            j += 1;
        }
        i = j;
    }
    assert!(tables >= 12, "{tables} tables");
}

/// A 1-task job done at the first look, on an enabled engine with one
/// DART, reads and writes no more registers than omarchy-ane, the driver
/// that ran on T8103 and T6001, does for it: 18 engine reads plus the DART
/// latch twice, and 43 writes (counted from its `ane_tm_enqueue`,
/// `ane_tm_execute`, `ane_tm_collect_events` and `ane_tm_poll_step`; see
/// `userspace/ane-tests/src/bench.rs`). The error latches are read only
/// after a failure.
#[test]
fn a_done_job_makes_no_more_accesses_than_omarchy_ane() {
    let r = regs(false, Behaviour::DEFAULT);
    let t = Trace {
        r: &r,
        log: RefCell::new(Vec::new()),
    };
    seq::enable(&t);
    t.log.borrow_mut().clear();
    assert_eq!(driver_job(&t, &job(JOB_NID, 1), 10), Progress::Done);
    let log = t.log.into_inner();
    let reads = log.iter().filter(|l| l.starts_with("R ")).count();
    let writes = log.iter().filter(|l| l.starts_with("W ")).count();
    assert!(
        !log.iter().any(|l| l.contains("ERROR1")),
        "latches read on a done job"
    );
    assert_eq!((reads, writes), (18 + 2, 43), "{}", log.join("\n"));
}

/// kernel-2 N13: the completion interrupt's handler claims an interrupt
/// only when the engine has events pending (or a DART faulted, judged
/// without an engine read); an idle engine's line is not its.
#[test]
fn irq_status_claims_only_pending_events() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    assert_eq!(seq::irq_status(&r, &ModelDart(&r)), seq::IrqStatus::Nothing);
    seq::push(&r, &job(0x41, 1));
    assert_eq!(seq::irq_status(&r, &ModelDart(&r)), seq::IrqStatus::Events);
    // Reading the status pops nothing: the worker's look still completes.
    let mut c = Completion::new(0x41, 1);
    assert_eq!(wait(&r, &ModelDart(&r), &mut c, 10).0, Progress::Done);
    assert_eq!(seq::irq_status(&r, &ModelDart(&r)), seq::IrqStatus::Nothing);
    assert!(seq::retire(&r, QUEUE, 0x41));
    // After a DART fault no engine register is read.
    r.inject.set(Some(Inject::DartFault));
    seq::push(&r, &job(0x42, 1));
    assert!(matches!(
        seq::irq_status(&r, &ModelDart(&r)),
        seq::IrqStatus::DartFault(e) if e & DART_ERROR_FLAG != 0
    ));
    assert_eq!(r.model.borrow().lockups(), 0);
}

/// Issue 25 point 8: a job records, for the observation record, exactly
/// the words its sequence read: the events drained before the push
/// (stale), the events popped while it ran (finish, foreign), the STATUS
/// words of its idle checks and its looks. The words are the model's,
/// not constants: a late event posted before the push comes back as the
/// stale word, the model's injected foreign word as foreign, and the
/// finish word carries the job's id and last task.
#[test]
fn a_job_records_the_words_its_sequence_read() {
    let r = regs(false, Behaviour::DEFAULT);
    seq::enable(&r);
    r.model.borrow_mut().post_late(task_word(0x33, 5));
    r.inject.set(Some(Inject::Stale));
    let mut host = QuietHost { polls: 10 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 3)).expect("started");
    assert_eq!(end.progress, Progress::Done);
    let seen = end.seen;
    let kinds: Vec<_> = seen
        .events
        .kept()
        .iter()
        .map(|s| (s.line, s.kind, s.ev.info))
        .collect();
    let foreign = task_word(JOB_NID.wrapping_add(0x80), 0);
    assert_eq!(
        kinds,
        [
            (0, obs::EventKind::Stale, task_word(0x33, 5)),
            (1, obs::EventKind::Stale, task_word(0x33, 5)),
            (0, obs::EventKind::Foreign, foreign),
            (0, obs::EventKind::Finish, finish_word(JOB_NID, 3)),
            (1, obs::EventKind::Foreign, foreign),
            (1, obs::EventKind::Finish, finish_word(JOB_NID, 3)),
        ]
    );
    assert_eq!(seen.looks, 1);
    assert_eq!(seen.status_first, Some(mgr::STATUS_IDLE));
    assert_eq!(seen.status_last, Some(mgr::STATUS_IDLE));
    // A job that never finishes reads no STATUS: nothing is invented.
    r.inject.set(Some(Inject::Hang));
    let mut host = QuietHost { polls: 4 };
    let end = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
    assert_eq!(end.progress, Progress::Running);
    assert_eq!((end.seen.looks, end.seen.status_first), (4, None));
    assert_eq!(end.seen.events.total, 0);
}

/// The driver keeps one [`seq::Started`] and `start_job` resets it in
/// place (no copy of its event log per job): a job started on one that
/// held a busier job (stale, foreign and finish events, strays, STATUS
/// words) ends and records exactly as on a fresh one.
#[test]
fn a_reused_job_state_records_as_a_fresh_one() {
    let busy = || {
        let r = regs(false, Behaviour::DEFAULT);
        seq::enable(&r);
        r.model.borrow_mut().post_late(task_word(0x33, 5));
        r.inject.set(Some(Inject::Stale));
        r
    };
    let quiet = || {
        let r = regs(false, Behaviour::DEFAULT);
        seq::enable(&r);
        r
    };
    let r = busy();
    let mut s = seq::Started::new();
    let mut host = QuietHost { polls: 10 };
    seq::start_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 3), &mut s).expect("started");
    let p = seq::poll_until_end(&r, &ModelDart(&r), &mut host, &mut s);
    assert_eq!(seq::end_job(&r, &s, p).progress, Progress::Done);
    assert_eq!(s.completion.seen.events.total, 6);
    assert_ne!(s.completion.strays, seq::Strays::default());
    // The same state, another job (one that never finishes, then one that
    // does), against a fresh state on a model in the same state.
    for (inject, polls) in [(Some(Inject::Hang), 3), (None, 10)] {
        let r = quiet();
        r.inject.set(inject);
        let mut host = QuietHost { polls };
        seq::start_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1), &mut s).expect("started");
        let p = seq::poll_until_end(&r, &ModelDart(&r), &mut host, &mut s);
        let end = seq::end_job(&r, &s, p);
        let reused = seq::JobEnd {
            progress: end.progress,
            after: end.after,
            strays: s.completion.strays,
            seen: s.completion.seen,
        };
        let r = quiet();
        r.inject.set(inject);
        let mut host = QuietHost { polls };
        let fresh = seq::run_job(&r, &ModelDart(&r), &mut host, &job(JOB_NID, 1)).expect("started");
        assert_eq!(reused, fresh, "{inject:?}");
        assert_eq!(reused.seen.events.kept(), fresh.seen.events.kept());
        assert_eq!(s.completion.finish(), finish_word(JOB_NID, 1));
    }
}
