//! EXEC's fences (DRM syncobjs): the out-fence signals with the job's end,
//! a job waits for its in-fences, EXECs linked only by fences compute what
//! one EXEC per program computes, and closing a file or unbinding the
//! device leaves no fence unsignalled. The bad-input rows of the fence
//! fields are in [`FENCE_BAD_INPUTS`].

use super::*;
use ane::device::{FenceStatus, Syncobj};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

/// One in-fence element.
fn sync_in(handle: u32, point: u64) -> uapi::ExecSyncobj {
    uapi::ExecSyncobj {
        handle,
        flags: 0,
        point,
    }
}

/// EXEC of the ready sum program at `priority`, waiting for `ins` and
/// signalling `out` (handle 0: none); the job id.
fn exec_fenced(
    d: &Device,
    r: &Ready<'_>,
    priority: u32,
    ins: &[uapi::ExecSyncobj],
    out: (u32, u64),
) -> Result<u64, Errno> {
    let mut a = uapi::Exec {
        priority,
        in_syncobjs: if ins.is_empty() {
            0
        } else {
            ins.as_ptr() as u64
        },
        in_syncobj_count: ins.len() as u32,
        in_syncobj_size: if ins.is_empty() {
            0
        } else {
            std::mem::size_of::<uapi::ExecSyncobj>() as u32
        },
        out_syncobj: out.0,
        out_point: out.1,
        ..r.exec_args()
    };
    raw::exec(d.fd(), &mut a)?;
    Ok(a.job_id)
}

fn syncobj(d: &Device) -> Result<Syncobj<'_>, String> {
    d.syncobj(false).map_err(|e| e.to_string())
}

/// WAIT for `id`; its final arguments, or why not.
fn reap(d: &Device, id: u64) -> Result<uapi::Wait, String> {
    let (res, w) = wait_raw(d, id);
    res.map_err(|e| format!("WAIT {id}: {e}"))?;
    Ok(w)
}

/// The status a sync file reports: 1 signalled, 0 pending, an error below.
fn sync_file_status(fd: &OwnedFd) -> Result<i32, String> {
    let mut info = raw::SyncFileInfo::default();
    raw::sync_file_info(fd.as_fd(), &mut info).map_err(|e| format!("SYNC_IOC_FILE_INFO: {e}"))?;
    Ok(info.status)
}

/// Waits up to 20 s for a sync file to signal; its status.
fn sync_file_end(fd: &OwnedFd) -> Result<i32, String> {
    for _ in 0..2000 {
        let s = sync_file_status(fd)?;
        if s != 0 {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err("a fence is still unsignalled after 20 s".into())
}

/// The out-fence signals when the job ends, with the job's end as its
/// error: DONE signals cleanly (binary syncobj, and a timeline point the
/// query then reports); a FAULT signals EIO and a job waiting for that
/// fence never runs and signals ECANCELED (ABORTED); a job that hangs
/// times out and signals ETIMEDOUT.
pub(crate) fn out_fence_reports_the_end(d: &Device) -> TestResult {
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let normal = uapi::priority::NORMAL;
    let s = syncobj(d)?;
    let id = exec_fenced(d, &r, normal, &[], (s.handle(), 0)).map_err(|e| format!("EXEC: {e}"))?;
    let w = reap(d, id)?;
    check!(w.status == uapi::job_status::DONE, "status {}", w.status);
    let st = s.fence_status(0).map_err(|e| e.to_string())?;
    check!(st == FenceStatus::Signalled, "DONE job's out-fence: {st:?}");

    let t = syncobj(d)?;
    let id = exec_fenced(d, &r, normal, &[], (t.handle(), 5)).map_err(|e| format!("EXEC: {e}"))?;
    let w = reap(d, id)?;
    check!(w.status == uapi::job_status::DONE, "status {}", w.status);
    let seen = t
        .wait(5, Duration::from_secs(20))
        .map_err(|e| e.to_string())?;
    check!(seen, "timeline point 5 never signalled");
    let last = t.query().map_err(|e| e.to_string())?;
    check!(last == 5, "timeline's last signalled point {last}, want 5");
    let st = t.fence_status(5).map_err(|e| e.to_string())?;
    check!(st == FenceStatus::Signalled, "point 5: {st:?}");

    if require_in_place_recovery(d).is_err() {
        // The rest needs the simulator's fault injection.
        return Ok(());
    }
    let awake = Awake::hold(d)?;
    let (f, g) = (syncobj(d)?, syncobj(d)?);
    inject("dart_fault", 1)?;
    let fid = exec_fenced(d, &r, normal, &[], (f.handle(), 0)).map_err(|e| format!("EXEC: {e}"))?;
    let gid = exec_fenced(d, &r, normal, &[sync_in(f.handle(), 0)], (g.handle(), 0))
        .map_err(|e| format!("EXEC after a faulting job: {e}"))?;
    let wf = reap(d, fid)?;
    let wg = reap(d, gid)?;
    check!(
        wf.status == uapi::job_status::FAULT,
        "injected fault: status {}",
        wf.status
    );
    check!(
        wg.status == uapi::job_status::ABORTED && wg.started_ns == 0,
        "job after a failed in-fence: status {} started {}",
        wg.status,
        wg.started_ns
    );
    let st = f.fence_status(0).map_err(|e| e.to_string())?;
    check!(
        st == FenceStatus::Error(Errno::IO),
        "FAULT job's out-fence: {st:?}"
    );
    let st = g.fence_status(0).map_err(|e| e.to_string())?;
    check!(
        st == FenceStatus::Error(Errno::CANCELED),
        "ABORTED job's out-fence: {st:?}"
    );
    recovered_by_forced_power_cycle(d, awake)?;

    // A job that hangs times out (the engine's fixed limit): its out-fence
    // signals ETIMEDOUT, neither EIO nor ECANCELED (kernel-2, issue 26).
    let awake = Awake::hold(d)?;
    let h = syncobj(d)?;
    inject("hang", 1)?;
    let hid = exec_fenced(d, &r, normal, &[], (h.handle(), 0)).map_err(|e| format!("EXEC: {e}"))?;
    let wh = reap(d, hid)?;
    check!(
        wh.status == uapi::job_status::TIMEOUT,
        "injected hang: status {}",
        wh.status
    );
    // WAIT may return just before the fence is signalled: wait for it.
    let f = h.export_sync_file(0).map_err(|e| e.to_string())?;
    let end = sync_file_end(&f)?;
    check!(
        end == -Errno::TIMEDOUT.raw_os_error(),
        "TIMEOUT job's out-fence ended with {end}, want -ETIMEDOUT"
    );
    drop(r);
    recovered_by_forced_power_cycle(d, awake)
}

/// A job waits for its in-fences. Fences userspace signalled (a binary
/// syncobj by DRM_IOCTL_SYNCOBJ_SIGNAL, a timeline point by
/// DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL) let it run at once; a fence of a job
/// still queued holds it: behind a 300 ms job, A (LOW) signals S and B
/// (NORMAL) waits for S. Without the wait the scheduler would run B first
/// (higher priority); with it B starts only after A ended, and B's own
/// out-fence stays unsignalled until then.
pub(crate) fn in_fence_holds_the_job(d: &Device) -> TestResult {
    require_h13(d)?;
    require_fault_injection()?;
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let normal = uapi::priority::NORMAL;
    let done = |w: &uapi::Wait, what: &str| -> TestResult {
        check!(
            w.status == uapi::job_status::DONE,
            "{what}: status {}",
            w.status
        );
        Ok(())
    };

    let u = syncobj(d)?;
    u.signal().map_err(|e| e.to_string())?;
    let id = exec_fenced(d, &r, normal, &[sync_in(u.handle(), 0)], (0, 0))
        .map_err(|e| format!("EXEC after SYNCOBJ_SIGNAL: {e}"))?;
    done(&reap(d, id)?, "after SYNCOBJ_SIGNAL")?;

    let v = syncobj(d)?;
    v.signal_point(3).map_err(|e| e.to_string())?;
    // Point 2 is signalled with 3; the job's end is point 4 on the same
    // timeline.
    let id = exec_fenced(d, &r, normal, &[sync_in(v.handle(), 2)], (v.handle(), 4))
        .map_err(|e| format!("EXEC after TIMELINE_SIGNAL: {e}"))?;
    done(&reap(d, id)?, "after TIMELINE_SIGNAL")?;
    let last = v.query().map_err(|e| e.to_string())?;
    check!(last == 4, "timeline after the job: point {last}, want 4");

    // A newer userspace's larger element, its extra bytes zero.
    // SAFETY: `ExecSyncobj` is a plain `repr(C)` struct of integers.
    let (wide, elem) = unsafe { widened(&[sync_in(v.handle(), 4)], 0) };
    let mut a = uapi::Exec {
        in_syncobjs: wide.as_ptr() as u64,
        in_syncobj_count: 1,
        in_syncobj_size: elem as u32,
        ..r.exec_args()
    };
    raw::exec(d.fd(), &mut a).map_err(|e| format!("EXEC, widened in-syncobj: {e}"))?;
    done(&reap(d, a.job_id)?, "widened in-syncobj")?;

    let (s, t) = (syncobj(d)?, syncobj(d)?);
    inject("exec_delay_ms", 300)?;
    let queued = (|| -> Result<[u64; 3], Errno> {
        let x = exec_fenced(d, &r, normal, &[], (0, 0))?;
        let a = exec_fenced(d, &r, uapi::priority::LOW, &[], (s.handle(), 0))?;
        let b = exec_fenced(d, &r, normal, &[sync_in(s.handle(), 0)], (t.handle(), 0))?;
        Ok([x, a, b])
    })();
    let early = queued.as_ref().ok().map(|ids| {
        let mut w = uapi::Wait {
            job_id: ids[2],
            timeout_ns: 1,
            ..Default::default()
        };
        (raw::wait(d.fd(), &mut w), t.fence_status(0).ok())
    });
    let ends: Vec<Result<uapi::Wait, String>> = queued
        .as_ref()
        .map(|ids| ids.iter().map(|id| reap(d, *id)).collect())
        .unwrap_or_default();
    inject("exec_delay_ms", 0)?;
    let ids = queued.map_err(|e| format!("EXEC: {e}"))?;
    let ends = ends.into_iter().collect::<Result<Vec<_>, _>>()?;
    for (w, what) in ends.iter().zip(["blocker", "A", "B"]) {
        done(w, what)?;
    }
    check!(
        early == Some((Err(Errno::TIME), Some(FenceStatus::Pending))),
        "B right after EXEC (its in-fence's job queued): {early:?}"
    );
    let (a, b) = (&ends[1], &ends[2]);
    check!(
        b.started_ns >= a.ended_ns,
        "B (job {}) started at {} before its in-fence's job A ended at {}",
        ids[2],
        b.started_ns,
        a.ended_ns
    );
    let st = t.fence_status(0).map_err(|e| e.to_string())?;
    check!(st == FenceStatus::Signalled, "B's out-fence: {st:?}");
    Ok(())
}

/// The two-layer MLP as two EXECs linked only by a fence (layer 2 waits
/// for layer 1's out-fence; no WAIT in between) equals the per-layer run
/// bit for bit, though layer 1 is queued at LOW behind a running job and
/// layer 2 at NORMAL (without the fence, layer 2 would run first and read
/// the poisoned hidden buffer).
pub(crate) fn fences_link_an_mlp(d: &Device) -> TestResult {
    use ane::mlp::{DeviceMlp, Mlp, MlpRunner, MlpShape};
    require_h13(d)?;
    require_fault_injection()?;
    let mut rng = ane::parity::Rng::new(28);
    let net = Mlp::random(MlpShape::DEFAULT, &mut rng).map_err(|e| e.to_string())?;
    let x = net.input(&mut rng);
    let mut runner = DeviceMlp::load(d, &net).map_err(|e| e.to_string())?;
    runner.timeout = Duration::from_secs(20);
    let per_layer = runner.run(&x).map_err(|e| format!("per layer: {e}"))?;
    runner.fenced = true;
    runner.first_priority = uapi::priority::LOW;
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    inject("exec_delay_ms", 200)?;
    let blocker = exec_fenced(d, &r, uapi::priority::NORMAL, &[], (0, 0));
    let fenced = runner.run(&x);
    let blocker_end = blocker.as_ref().ok().map(|id| reap(d, *id));
    inject("exec_delay_ms", 0)?;
    blocker.map_err(|e| format!("blocker EXEC: {e}"))?;
    if let Some(e) = blocker_end {
        e?;
    }
    let fenced = fenced.map_err(|e| format!("fenced: {e}"))?;
    same_bits_as_per_layer("the fenced run", &fenced, &per_layer)
}

/// WAIT is built on the out-fence: once a syncobj wait saw the jobs'
/// fences signalled, a WAIT whose deadline has passed collects each job's
/// status without sleeping, never -ETIME. Each round queues `JOBS` jobs
/// that end while the client sleeps in `DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`
/// on all their syncobjs (on the simulated H13 each takes a few ms, so
/// the ends come from the engine's context, racing the woken client).
pub(crate) fn syncobj_wait_then_collect(d: &Device) -> TestResult {
    const JOBS: usize = 4;
    const ROUNDS: u32 = 12;
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    // The delay knob is the H13 simulator's (T602x jobs end through the
    // simulated firmware, which answers later anyway).
    let delayed = require_fault_injection().is_ok() && require_h13(d).is_ok();
    let objs = (0..JOBS)
        .map(|_| syncobj(d))
        .collect::<Result<Vec<_>, _>>()?;
    let handles: Vec<u32> = objs.iter().map(|s| s.handle()).collect();
    let points = [0u64; JOBS];
    let res = (|| -> TestResult {
        for round in 0..ROUNDS {
            if delayed {
                inject("exec_delay_ms", 1 + round % 3)?;
            }
            let mut ids = Vec::with_capacity(JOBS);
            for h in &handles {
                let id = exec_fenced(d, &r, uapi::priority::NORMAL, &[], (*h, 0))
                    .map_err(|e| format!("round {round}: EXEC: {e}"))?;
                ids.push(id);
            }
            let mut a = raw::SyncobjTimelineWait {
                handles: handles.as_ptr() as u64,
                points: points.as_ptr() as u64,
                timeout_nsec: crate::job_deadline(),
                count_handles: JOBS as u32,
                flags: raw::SYNCOBJ_WAIT_ALL | raw::SYNCOBJ_WAIT_FOR_SUBMIT,
                ..Default::default()
            };
            loop {
                match raw::syncobj_timeline_wait(d.fd(), &mut a) {
                    Ok(()) => break,
                    Err(Errno::INTR) => continue,
                    Err(e) => return Err(format!("round {round}: SYNCOBJ_TIMELINE_WAIT: {e}")),
                }
            }
            for (i, id) in ids.iter().enumerate() {
                let mut w = uapi::Wait {
                    job_id: *id,
                    timeout_ns: 0,
                    ..Default::default()
                };
                raw::wait(d.fd(), &mut w).map_err(|e| {
                    format!("round {round}, job {i}: WAIT after its fence signalled: {e}")
                })?;
                check!(
                    w.status == uapi::job_status::DONE && w.steps_done == 1,
                    "round {round}, job {i}: status {} steps_done {}",
                    w.status,
                    w.steps_done
                );
            }
        }
        Ok(())
    })();
    if delayed {
        inject("exec_delay_ms", 0)?;
    }
    res
}

/// Queues, on `d`, a job of `delay_ms`, then A (LOW) signalling S1 and B
/// waiting for S1 and signalling S2; both fences as sync files, which
/// outlive the file. B is parked with the engine when this returns.
fn pending_fences(d: &Device, delay_ms: u32) -> Result<(OwnedFd, OwnedFd), String> {
    let r = ready(d).map_err(|e| format!("setup: {e}"))?;
    let (s1, s2) = (syncobj(d)?, syncobj(d)?);
    inject("exec_delay_ms", delay_ms)?;
    let normal = uapi::priority::NORMAL;
    exec_fenced(d, &r, normal, &[], (0, 0)).map_err(|e| format!("EXEC: {e}"))?;
    exec_fenced(d, &r, uapi::priority::LOW, &[], (s1.handle(), 0))
        .map_err(|e| format!("EXEC: {e}"))?;
    exec_fenced(d, &r, normal, &[sync_in(s1.handle(), 0)], (s2.handle(), 0))
        .map_err(|e| format!("EXEC: {e}"))?;
    let f1 = s1.export_sync_file(0).map_err(|e| e.to_string())?;
    let f2 = s2.export_sync_file(0).map_err(|e| e.to_string())?;
    check!(
        sync_file_status(&f2)? == 0,
        "B's out-fence signalled before its in-fence's job ran"
    );
    Ok((f1, f2))
}

/// Checks the fences [`pending_fences`] returned once their file or
/// device is gone: both signalled, B's with ECANCELED (it never ran).
fn pending_fences_ended(f: (OwnedFd, OwnedFd)) -> TestResult {
    let a = sync_file_end(&f.0)?;
    let b = sync_file_end(&f.1)?;
    check!(a == 1 || a < 0, "A's out-fence: status {a}");
    check!(
        b == -(Errno::CANCELED.raw_os_error()),
        "B's out-fence (B waited for A, its file closed): status {b}"
    );
    Ok(())
}

/// Closing a file with jobs queued and one waiting for an in-fence leaves
/// no fence unsignalled: the waiting job stops waiting and ends ABORTED.
pub(crate) fn close_with_pending_fences(_: &Device) -> TestResult {
    fixture("tinygrad_sum.hwx").ok_or(SKIP)?;
    require_fault_injection()?;
    let d2 = open()?;
    require_h13(&d2)?;
    let fences = pending_fences(&d2, 300);
    drop(d2);
    let ended = fences.map(pending_fences_ended);
    inject("exec_delay_ms", 0)?;
    ended?
}

/// `--after-unbind`'s fences: queued before the device is unbound, checked
/// after. The first job takes 5 s, so that unbind (which lets it end)
/// comes while A is queued and B parked: unbind must end B's wait.
pub(crate) fn unbind_pending_fences(d: &Device) -> Result<(OwnedFd, OwnedFd), String> {
    pending_fences(d, 5000)
}

/// After unbind: every fence [`unbind_pending_fences`] made has signalled.
pub(crate) fn unbind_fences_ended(f: (OwnedFd, OwnedFd)) -> TestResult {
    let r = pending_fences_ended(f);
    let _ = inject("exec_delay_ms", 0);
    r
}

/// A syncobj handle of `d` that stays (never destroyed: rows leak a few
/// until the file closes).
fn new_syncobj(d: &Device, signalled: bool) -> Result<u32, Errno> {
    let s = d.syncobj(signalled).map_err(|_| Errno::IO)?;
    let h = s.handle();
    std::mem::forget(s);
    Ok(h)
}

/// A timeline syncobj handle of `d` whose last signalled point is
/// `last`; it stays, as in [`new_syncobj`].
fn timeline_at(d: &Device, last: u64) -> Result<u32, Errno> {
    let s = d.syncobj(false).map_err(|_| Errno::IO)?;
    s.signal_point(last).map_err(|_| Errno::IO)?;
    let h = s.handle();
    std::mem::forget(s);
    Ok(h)
}

/// EXEC of the ready sum program with fence fields set by `f` (which may
/// push in-syncobj elements; `in_syncobjs` 0 then points at them, 1 means
/// NULL); the job, if queued, is waited for.
fn fence_row(
    d: &Device,
    f: impl FnOnce(&Device, &mut uapi::Exec, &mut Vec<uapi::ExecSyncobj>) -> Result<(), Errno>,
) -> Result<(), Errno> {
    let r = ready(d)?;
    let mut ins = Vec::new();
    let mut a = uapi::Exec {
        priority: uapi::priority::NORMAL,
        ..r.exec_args()
    };
    f(d, &mut a, &mut ins)?;
    a.in_syncobjs = match a.in_syncobjs {
        0 if !ins.is_empty() => ins.as_ptr() as u64,
        1 => 0,
        other => other,
    };
    if a.in_syncobj_size == 0 && !ins.is_empty() {
        a.in_syncobj_size = std::mem::size_of::<uapi::ExecSyncobj>() as u32;
    }
    let res = exec_reaped(d, &mut a);
    drop(r.bos);
    res
}

/// One valid in-syncobj element: a new, signalled syncobj at point 0.
fn one_in(d: &Device, a: &mut uapi::Exec, ins: &mut Vec<uapi::ExecSyncobj>) -> Result<(), Errno> {
    ins.push(sync_in(new_syncobj(d, true)?, 0));
    a.in_syncobj_count = 1;
    Ok(())
}

/// The fence fields' bad-input rows (they need the sum fixture).
pub(crate) const FENCE_BAD_INPUTS: &[Case] = &[
    ("exec: pad2 != 0", Errno::INVAL, |d| {
        fence_row(d, |_, a, _| {
            a.pad2 = 1;
            Ok(())
        })
    }),
    (
        "exec: in_syncobj_count above MAX_IN_SYNCOBJS",
        Errno::TOOBIG,
        |d| {
            fence_row(d, |d, a, ins| {
                one_in(d, a, ins)?;
                a.in_syncobj_count = uapi::MAX_IN_SYNCOBJS + 1;
                Ok(())
            })
        },
    ),
    ("exec: in_syncobj_count u32::MAX", Errno::TOOBIG, |d| {
        fence_row(d, |d, a, ins| {
            one_in(d, a, ins)?;
            a.in_syncobj_count = u32::MAX;
            Ok(())
        })
    }),
    ("exec: in_syncobjs NULL with a count", Errno::FAULT, |d| {
        fence_row(d, |d, a, ins| {
            one_in(d, a, ins)?;
            a.in_syncobjs = 1;
            Ok(())
        })
    }),
    (
        "exec: in_syncobj_size below the struct",
        Errno::INVAL,
        |d| {
            fence_row(d, |d, a, ins| {
                one_in(d, a, ins)?;
                a.in_syncobj_size = 8;
                Ok(())
            })
        },
    ),
    ("exec: in_syncobj_size above 4096", Errno::INVAL, |d| {
        fence_row(d, |d, a, ins| {
            one_in(d, a, ins)?;
            a.in_syncobj_size = 4097;
            Ok(())
        })
    }),
    (
        "exec: in-syncobj's bytes past the struct nonzero",
        Errno::INVAL,
        |d| {
            let h = new_syncobj(d, true)?;
            // SAFETY: `ExecSyncobj` is a plain `repr(C)` struct of integers.
            let (wide, elem) = unsafe { widened(&[sync_in(h, 0)], 1) };
            fence_row(d, |_, a, _| {
                a.in_syncobjs = wide.as_ptr() as u64;
                a.in_syncobj_count = 1;
                a.in_syncobj_size = elem as u32;
                Ok(())
            })
        },
    ),
    ("exec: in_syncobjs set with count 0", Errno::INVAL, |d| {
        let h = [sync_in(new_syncobj(d, true)?, 0)];
        fence_row(d, |_, a, _| {
            a.in_syncobjs = h.as_ptr() as u64;
            Ok(())
        })
    }),
    (
        "exec: in_syncobj_size set with count 0",
        Errno::INVAL,
        |d| {
            fence_row(d, |_, a, _| {
                a.in_syncobj_size = 16;
                Ok(())
            })
        },
    ),
    ("exec: in-syncobj handle 0", Errno::NOENT, |d| {
        fence_row(d, |_, a, ins| {
            ins.push(sync_in(0, 0));
            a.in_syncobj_count = 1;
            Ok(())
        })
    }),
    ("exec: in-syncobj handle u32::MAX", Errno::NOENT, |d| {
        fence_row(d, |_, a, ins| {
            ins.push(sync_in(u32::MAX, 0));
            a.in_syncobj_count = 1;
            Ok(())
        })
    }),
    ("exec: in-syncobj destroyed handle", Errno::NOENT, |d| {
        let s = d.syncobj(true).map_err(|_| Errno::IO)?;
        let h = s.handle();
        drop(s);
        fence_row(d, |_, a, ins| {
            ins.push(sync_in(h, 0));
            a.in_syncobj_count = 1;
            Ok(())
        })
    }),
    (
        "exec: second in-syncobj unknown (first fine)",
        Errno::NOENT,
        |d| {
            fence_row(d, |d, a, ins| {
                one_in(d, a, ins)?;
                ins.push(sync_in(u32::MAX - 1, 0));
                a.in_syncobj_count = 2;
                Ok(())
            })
        },
    ),
    ("exec: in-syncobj flags bit 0", Errno::INVAL, |d| {
        fence_row(d, |d, a, ins| {
            one_in(d, a, ins)?;
            ins[0].flags = 1;
            Ok(())
        })
    }),
    ("exec: in-syncobj flags bit 31", Errno::INVAL, |d| {
        fence_row(d, |d, a, ins| {
            one_in(d, a, ins)?;
            ins[0].flags = 1 << 31;
            Ok(())
        })
    }),
    ("exec: in-syncobj empty (no fence yet)", Errno::INVAL, |d| {
        fence_row(d, |d, a, ins| {
            ins.push(sync_in(new_syncobj(d, false)?, 0));
            a.in_syncobj_count = 1;
            Ok(())
        })
    }),
    (
        "exec: in-syncobj point 1 on a binary syncobj",
        Errno::INVAL,
        |d| {
            fence_row(d, |d, a, ins| {
                ins.push(sync_in(new_syncobj(d, true)?, 1));
                a.in_syncobj_count = 1;
                Ok(())
            })
        },
    ),
    (
        "exec: in-syncobj timeline point not submitted yet",
        Errno::INVAL,
        |d| {
            let s = d.syncobj(false).map_err(|_| Errno::IO)?;
            s.signal_point(3).map_err(|_| Errno::IO)?;
            let h = s.handle();
            std::mem::forget(s);
            fence_row(d, |_, a, ins| {
                ins.push(sync_in(h, 4));
                a.in_syncobj_count = 1;
                Ok(())
            })
        },
    ),
    ("exec: out_syncobj handle u32::MAX", Errno::NOENT, |d| {
        fence_row(d, |_, a, _| {
            a.out_syncobj = u32::MAX;
            Ok(())
        })
    }),
    ("exec: out_syncobj destroyed handle", Errno::NOENT, |d| {
        let s = d.syncobj(false).map_err(|_| Errno::IO)?;
        let h = s.handle();
        drop(s);
        fence_row(d, |_, a, _| {
            a.out_syncobj = h;
            Ok(())
        })
    }),
    ("exec: out_point without out_syncobj", Errno::INVAL, |d| {
        fence_row(d, |_, a, _| {
            a.out_point = 1;
            Ok(())
        })
    }),
    (
        "exec: out_point equal to the timeline's last",
        Errno::INVAL,
        |d| {
            let h = timeline_at(d, 3)?;
            fence_row(d, |_, a, _| {
                a.out_syncobj = h;
                a.out_point = 3;
                Ok(())
            })
        },
    ),
    (
        "exec: out_point below the timeline's last",
        Errno::INVAL,
        |d| {
            let h = timeline_at(d, 3)?;
            fence_row(d, |_, a, _| {
                a.out_syncobj = h;
                a.out_point = 2;
                Ok(())
            })
        },
    ),
];

/// `--fences`: only the fence tests and the fence fields' bad-input rows
/// (tools/qemu/tests/fences.sh), for a quick run.
pub(crate) fn main() -> std::process::ExitCode {
    let d = match open() {
        Ok(d) => d,
        Err(e) => {
            println!("FAIL open: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let tests: &[Test] = &[
        (
            "an out-fence reports the job's end",
            out_fence_reports_the_end,
        ),
        (
            "an in-fence holds the job until it signals",
            in_fence_holds_the_job,
        ),
        (
            "EXECs linked only by a fence compute the MLP",
            fences_link_an_mlp,
        ),
        (
            "closing a file signals its pending fences",
            close_with_pending_fences,
        ),
    ];
    let mut failed = 0;
    for (name, t) in tests {
        match t(&d) {
            Ok(()) => println!("PASS {name}"),
            Err(e) if e.starts_with(SKIP) => println!("SKIP {name}: {e}"),
            Err(e) => {
                println!("FAIL {name}: {e}");
                failed += 1;
            }
        }
    }
    for (name, want, f) in FENCE_BAD_INPUTS {
        match f(&d) {
            Err(e) if e == *want => println!("PASS bad input: {name} -> {want:?}"),
            other => {
                println!("FAIL bad input: {name}: got {other:?}, want {want:?}");
                failed += 1;
            }
        }
    }
    println!("fences: {failed} failed");
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}
