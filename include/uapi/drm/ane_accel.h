/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note OR MIT */
/*
 * UAPI of the ane DRM accel driver for the Apple Neural Engine.
 *
 * One ABI serves both hardware generations (H13: host-driven task manager,
 * H14: firmware-driven). Rules that hold for every ioctl:
 *
 *  - every pad and reserved field must be zero, else -EINVAL;
 *  - unknown flag bits are -EINVAL;
 *  - every size and count has a cap (query it with DRM_ANE_GET_PARAM);
 *  - arrays are passed as a user pointer, an element count and an element
 *    size, so elements can grow: the kernel reads min(size, its own) bytes
 *    and requires any extra bytes userspace passes to be zero.
 *
 * The Rust mirror of this file is drivers/accel/ane/hw/uapi.rs; a test
 * checks that both agree on every size and offset.
 */
#ifndef _UAPI_DRM_ANE_ACCEL_H_
#define _UAPI_DRM_ANE_ACCEL_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

/*
 * Identification. Other ANE drivers (eiln/ane, omarchy-ane's ane.ko and
 * ane_t6021.ko, the in-tree port in Aurora kernels) register the DRM name
 * "ane" with another ioctl set. This driver registers the distinct DRM name
 * DRM_ANE_DRIVER_NAME, so no client of theirs takes this node for one of its
 * own. Userspace identifies this driver by DRM_IOCTL_VERSION first (name
 * DRM_ANE_DRIVER_NAME; no driver-private ioctl is sent to a node of another
 * name), then by DRM_ANE_PARAM_IDENT returning DRM_ANE_IDENT_MAGIC.
 *
 * The DRM driver version follows the DRM convention: the major changes only
 * when the UAPI changes incompatibly (a client refuses a major it does not
 * know), the minor grows with every compatible addition (a client needing
 * an addition checks the minor).
 */
#define DRM_ANE_DRIVER_NAME "ane_accel"
#define DRM_ANE_ABI_VERSION 1
/*
 * The DRM driver minor: 1 added the syncobj fields of struct drm_ane_exec
 * (in_syncobjs .. out_point). A client that sets them checks the minor
 * first: an older kernel reads only the struct it knows and would ignore
 * them.
 */
#define DRM_ANE_DRIVER_MINOR 1

/* The value of DRM_ANE_PARAM_IDENT: ASCII "aneaccel", fixed forever. */
#define DRM_ANE_IDENT_MAGIC 0x616e65616363656cULL

#define DRM_ANE_GET_PARAM 0x00
#define DRM_ANE_BO_CREATE 0x01
#define DRM_ANE_BO_INFO 0x02
#define DRM_ANE_PROGRAM_CREATE 0x03
#define DRM_ANE_PROGRAM_DESTROY 0x04
#define DRM_ANE_EXEC 0x05
#define DRM_ANE_WAIT 0x06

/* Parameters readable with DRM_ANE_GET_PARAM. */
enum drm_ane_param {
	DRM_ANE_PARAM_ABI_VERSION = 0,	/* DRM_ANE_ABI_VERSION, the DRM major */
	DRM_ANE_PARAM_SOC_ID = 1,	/* chip number: 0x8103, 0x6000, 0x6020, 0x6021 */
	DRM_ANE_PARAM_GENERATION = 2,	/* 13 (H13) or 14 (H14) */
	DRM_ANE_PARAM_BACKEND = 3,	/* enum drm_ane_backend */
	DRM_ANE_PARAM_PAGE_SIZE = 4,	/* the kernel's page size: BO sizes round to it */
	DRM_ANE_PARAM_IOVA_START = 5,	/* first device address a BO can get */
	DRM_ANE_PARAM_IOVA_END = 6,	/* one past the last */
	DRM_ANE_PARAM_BO_MAX_SIZE = 7,	/* largest single BO, bytes */
	DRM_ANE_PARAM_BO_TOTAL_MAX = 8,	/* cap on all BOs of the device, bytes */
	DRM_ANE_PARAM_MAX_BINDINGS = 9,	/* most bindings one EXEC takes */
	DRM_ANE_PARAM_MAX_PROGRAM_SIZE = 10, /* largest program range, bytes */
	DRM_ANE_PARAM_FW_STATE = 11,	/* enum drm_ane_fw_state */
	DRM_ANE_PARAM_FEATURES = 12,	/* DRM_ANE_FEATURE_* bits */
	DRM_ANE_PARAM_ENGINE_STATE = 13, /* enum drm_ane_engine_state */
	DRM_ANE_PARAM_BO_CLIENT_MAX = 14, /* cap on the BOs of one open file, bytes */
	DRM_ANE_PARAM_IDENT = 15,	/* DRM_ANE_IDENT_MAGIC */
	DRM_ANE_PARAM_MAX_CHAIN = 16,	/* most steps one EXEC takes */
	DRM_ANE_PARAM_MAX_IN_SYNCOBJS = 17, /* most in-syncobjs one EXEC takes */
};
/*
 * Any other param is -EINVAL. Diagnostics that are no interface (why an H14
 * firmware failed to start, the registers captured then) are in debugfs:
 * ane/<platform device>/firmware.
 */

enum drm_ane_backend {
	DRM_ANE_BACKEND_HOST_DRIVEN = 1, /* H13: the kernel drives the task manager */
	DRM_ANE_BACKEND_FIRMWARE = 2,	 /* H14: the ANE firmware does */
};

enum drm_ane_fw_state {
	DRM_ANE_FW_NONE = 0,	/* this generation runs no firmware of Linux's */
	DRM_ANE_FW_OFF = 1,	/* not started yet (a simulator's: stopped
				 * at unbind) */
	DRM_ANE_FW_RUNNING = 2,
	DRM_ANE_FW_FAILED = 3,	/* start failed; the device stays bound but idle */
	DRM_ANE_FW_QUARANTINED = 4, /* a protocol failure after the start, or an
				     * unbind while the coprocessor runs:
				     * commands are refused until reboot */
};

/*
 * Whether the engine takes jobs. After a timeout or fault the engine may
 * still be running the job, so the driver keeps the job's buffers mapped
 * until the engine is proven stopped: on T8103 by a power cycle the driver
 * forces at once, followed by a drain and an idle check (jobs submitted
 * meanwhile wait for it; jobs queued when the fault happened run after it);
 * on T6001 by draining the task manager in place (then it is ready at once)
 * or, when that cannot be done safely (a DART fault), by binding the device
 * again. While it is not ready EXEC fails with EIO, and jobs still queued
 * end ABORTED.
 */
enum drm_ane_engine_state {
	DRM_ANE_ENGINE_READY = 0,
	DRM_ANE_ENGINE_WEDGED_POWER_CYCLE = 1, /* T8103: the recovery's power
						* cycle is running (clears when
						* it ends; a failed one leaves
						* WEDGED_REBIND) */
	DRM_ANE_ENGINE_WEDGED_REBIND = 2,	/* the engine keeps its state across
						 * power cycles: unbind and bind the
						 * device (or reload the module) */
};

/* Job completion is signalled by the engine's interrupt (polling remains the
 * fallback). Other bits are zero. */
#define DRM_ANE_FEATURE_COMPLETION_IRQ (1ULL << 0)

struct drm_ane_get_param {
	__u32 param;		/* in: enum drm_ane_param */
	__u32 pad;		/* must be zero */
	__u64 value;		/* out */
};

struct drm_ane_bo_create {
	__u64 size;		/* in: bytes, rounded up to the page size */
	__u32 flags;		/* in: must be zero */
	__u32 handle;		/* out: GEM handle, released with DRM_IOCTL_GEM_CLOSE */
	__u64 mmap_offset;	/* out: offset to mmap on the accel fd */
	__u64 iova;		/* out: device address in this file's address space */
};

struct drm_ane_bo_info {
	__u32 handle;		/* in */
	__u32 pad;		/* must be zero */
	__u64 size;		/* out */
	__u64 mmap_offset;	/* out */
	__u64 iova;		/* out */
};

/*
 * One firmware section of an H14 program. H13 programs take none; H14
 * programs are only sections (td_size, td_count and tsk_size must be zero):
 * ids 1..9, each once, inside the program range (else EINVAL). Only the
 * shape of every program that ran on the T6021 firmware is loaded: exactly
 * the ids 1, 2, 3, 4, 5 and 7, section 3 (the descriptor) opening with a
 * 16-byte zero frame and an H14 task header whose length fits; anything
 * else, an H13 task stream above all, fails with ENOEXEC before the
 * firmware sees it. The kernel copies the sections for the firmware,
 * which validates the program itself;
 * a program whose ids, sizes and bytes equal an earlier one's is not loaded
 * again. The firmware keeps the copies of a program it loaded until reboot
 * (it has no unload): they come out of a range reserved for them at bind
 * (module option fw_program_mb), not from any client's memory caps; once
 * that range, or the firmware's table of programs, is full, PROGRAM_CREATE
 * of a program not loaded yet fails with ENOSPC. PROGRAM_CREATE and EXEC fail with EIO unless DRM_ANE_PARAM_FW_STATE
 * is DRM_ANE_FW_RUNNING. On H14 a binding's slot is the program's buffer id,
 * passed to the firmware with the buffer's address and size.
 */
struct drm_ane_section {
	__u32 id;
	__u32 flags;		/* must be zero */
	__u64 offset;		/* within the program range */
	__u64 size;
};

struct drm_ane_program_create {
	__u32 bo_handle;	/* in: BO holding the compiled program */
	__u32 flags;		/* in: must be zero */
	__u64 offset;		/* in: start of the program in the BO */
	__u64 size;		/* in: program bytes (task descriptors, then weights) */
	__u32 td_size;		/* in: bytes per task descriptor */
	__u32 td_count;		/* in: number of task descriptors */
	__u64 tsk_size;		/* in: bytes of the task stream at the start of the range */
	__u64 sections;		/* in: user pointer to struct drm_ane_section[] (H14) */
	__u32 section_count;	/* in */
	__u32 section_size;	/* in: sizeof(struct drm_ane_section) as userspace knows it */
	__u32 handle;		/* out: program handle */
	__u32 pad;		/* must be zero */
};

struct drm_ane_program_destroy {
	__u32 handle;
	__u32 pad;		/* must be zero */
};

#define DRM_ANE_BIND_IN (1 << 0)	/* the engine reads the buffer */
#define DRM_ANE_BIND_OUT (1 << 1)	/* the engine writes the buffer */

struct drm_ane_binding {
	__u32 slot;		/* the program's buffer slot */
	__u32 bo_handle;
	__u64 offset;		/* within the BO */
	__u64 size;		/* bytes from offset */
	__u32 flags;		/* DRM_ANE_BIND_IN and/or DRM_ANE_BIND_OUT */
	__u32 pad;		/* must be zero */
};

enum drm_ane_priority {
	DRM_ANE_PRIORITY_LOW = 0,
	DRM_ANE_PRIORITY_NORMAL = 1,
	DRM_ANE_PRIORITY_HIGH = 2,	/* needs CAP_SYS_NICE (else EXEC fails with EPERM) */
};

/*
 * One program of a chain with its bindings: the same rules as the program,
 * binding_count, bindings and binding_size fields of struct drm_ane_exec.
 */
struct drm_ane_exec_step {
	__u32 program;		/* in: program handle (-ENOENT if unknown) */
	__u32 binding_count;	/* in: 1..DRM_ANE_PARAM_MAX_BINDINGS */
	__u64 bindings;		/* in: user pointer to struct drm_ane_binding[] */
	__u32 binding_size;	/* in: sizeof(struct drm_ane_binding) as userspace knows it */
	__u32 pad;		/* must be zero */
};

/* Most in-syncobjs of one EXEC (DRM_ANE_PARAM_MAX_IN_SYNCOBJS). */
#define DRM_ANE_MAX_IN_SYNCOBJS 32

/*
 * One in-fence of an EXEC: the fence a DRM syncobj of this file holds (a
 * binary syncobj: point 0) or the fence of a timeline point (point > 0).
 * The syncobj must hold that fence when EXEC is called: an unknown handle
 * (0 included) is -ENOENT; an empty syncobj, a nonzero point on a binary
 * syncobj, or a point not submitted yet is -EINVAL (EXEC never blocks
 * waiting for a fence to appear). flags must be zero (-EINVAL).
 */
struct drm_ane_exec_syncobj {
	__u32 handle;		/* in: syncobj handle */
	__u32 flags;		/* in: must be zero */
	__u64 point;		/* in: timeline point, 0 for a binary syncobj */
};

/*
 * Queue one job: one program, or a chain of programs the kernel runs back to
 * back, in order, holding the engine in between (no other job runs between
 * two steps of a chain).
 *
 * One program: program, binding_count, bindings and binding_size describe
 * it; step_count is zero (steps and step_size too).
 *
 * A chain: step_count (1..DRM_ANE_PARAM_MAX_CHAIN, else -E2BIG) elements of
 * step_size bytes at steps, each a struct drm_ane_exec_step; program,
 * binding_count, bindings and binding_size must then be zero (else
 * -EINVAL), and steps and step_size follow the array rules at the top
 * (-EINVAL for a step_size below the struct, -EFAULT for unreadable
 * memory). Every step is checked before any runs: EXEC fails as a whole,
 * with the errno of the first bad step, or queues the whole chain. A step
 * may read what an earlier one wrote (the engine's writes are visible to
 * the next step).
 *
 * The job, whole chain or one program, has one job_id and one status:
 * DONE when every step ended DONE; else the status and fault of the step
 * that failed, and the steps after it do not run. WAIT's steps_done says
 * how many steps ended DONE.
 *
 * Fences (DRM syncobjs, DRIVER_SYNCOBJ and DRIVER_SYNCOBJ_TIMELINE; create,
 * signal, wait on, import and export them with the DRM core's
 * DRM_IOCTL_SYNCOBJ_* ioctls on this node, so they interoperate with other
 * DRM drivers' syncobjs):
 *
 *  - in_syncobj_count (0..DRM_ANE_PARAM_MAX_IN_SYNCOBJS, else -E2BIG)
 *    elements of in_syncobj_size bytes at in_syncobjs, each a struct
 *    drm_ane_exec_syncobj, following the array rules at the top; with a
 *    count of 0, in_syncobjs and in_syncobj_size must be 0 (-EINVAL). The
 *    fences are taken when EXEC is called; EXEC returns at once and the
 *    job starts only after all of them signalled. If one signals with an
 *    error, the job does not run and ends DRM_ANE_JOB_ABORTED.
 *  - out_syncobj: 0 for none (out_point must then be 0, else -EINVAL), or
 *    a syncobj handle (-ENOENT if unknown) that gets the job's out-fence:
 *    in place of its fence when out_point is 0 (a binary syncobj), else as
 *    the new timeline point out_point, which must be above the timeline's
 *    last point (-EINVAL). The fence signals once the job (the whole chain)
 *    ended, with error 0 for DRM_ANE_JOB_DONE, -ETIMEDOUT for TIMEOUT, -EIO
 *    for FAULT, -ECANCELED for ABORTED. Every job's out-fence signals: a
 *    job of a closed file or an unbound device ends ABORTED.
 *  - pad2 must be zero.
 *
 * An in-syncobj may also be the out-syncobj: the job waits for the fence
 * it held, then takes its place. Every job has its out-fence, whether or
 * not out_syncobj names a syncobj for it: DRM_ANE_WAIT waits for it.
 */
struct drm_ane_exec {
	__u32 program;		/* in: program handle */
	__u32 flags;		/* in: must be zero */
	__u32 priority;		/* in: enum drm_ane_priority */
	__u32 binding_count;	/* in */
	__u64 bindings;		/* in: user pointer to struct drm_ane_binding[] */
	__u32 binding_size;	/* in: sizeof(struct drm_ane_binding) as userspace knows it */
	__u32 pad;		/* must be zero */
	__u64 job_id;		/* out */
	__u64 steps;		/* in: user pointer to struct drm_ane_exec_step[], or 0 */
	__u32 step_count;	/* in: 0 for one program */
	__u32 step_size;	/* in: sizeof(struct drm_ane_exec_step) as userspace knows it */
	/* From driver minor 1 (older callers pass the struct without these:
	 * the DRM core zero-extends it, which means no fences). */
	__u64 in_syncobjs;	/* in: user pointer to struct drm_ane_exec_syncobj[], or 0 */
	__u32 in_syncobj_count;	/* in: 0..DRM_ANE_PARAM_MAX_IN_SYNCOBJS */
	__u32 in_syncobj_size;	/* in: sizeof(struct drm_ane_exec_syncobj) as userspace knows it */
	__u32 out_syncobj;	/* in: syncobj handle for the out-fence, 0 for none */
	__u32 pad2;		/* must be zero */
	__u64 out_point;	/* in: timeline point of the out-fence, 0 for binary */
};

enum drm_ane_job_status {
	DRM_ANE_JOB_PENDING = 0,
	DRM_ANE_JOB_DONE = 1,
	DRM_ANE_JOB_TIMEOUT = 2,	/* the engine did not finish in time; it was recovered */
	DRM_ANE_JOB_FAULT = 3,		/* the engine or firmware reported an error */
	DRM_ANE_JOB_ABORTED = 4,	/* never ran to completion (device removed, file closed) */
};

/*
 * Wait for a job: for its out-fence (see drm_ane_exec), the same fence a
 * DRM_IOCTL_SYNCOBJ_WAIT on its out_syncobj waits for. Returns 0 with the
 * final status once the fence signalled (the job is then forgotten: a
 * second WAIT is -ENOENT), -ETIME when the absolute CLOCK_MONOTONIC deadline
 * passes first (the job is kept), -ERESTARTSYS (seen as -EINTR) when a
 * signal came first (the job is kept), -ENOENT for an unknown job_id, and
 * -EINVAL for a nonzero pad or pad2. The status is recorded before the
 * fence signals: once any wait saw the fence signalled, a WAIT with a
 * deadline in the past (timeout_ns 0) returns the status without sleeping.
 * To wait for many jobs at once, DRM_IOCTL_SYNCOBJ_WAIT on their syncobjs
 * (WAIT_ALL or not), then collect each status so.
 */
struct drm_ane_wait {
	__u64 job_id;		/* in */
	__s64 timeout_ns;	/* in: absolute CLOCK_MONOTONIC deadline */
	__u32 status;		/* out: enum drm_ane_job_status */
	__u32 pad;		/* must be zero */
	__u64 fault;		/* out: fault detail, 0 if none: DRM_ANE_FAULT_* */
	/*
	 * out: where the job's time went, CLOCK_MONOTONIC ns (0 where it never
	 * got): when EXEC queued it, when the engine was handed it (a chain's
	 * first step), when its end was seen (a chain's last). (The caller's clock after WAIT returns gives the
	 * wake-up.) A caller built against an older, shorter struct passes
	 * fewer bytes, which the DRM core zero-extends.
	 */
	__u64 queued_ns;
	__u64 started_ns;
	__u64 ended_ns;
	__u32 steps_done;	/* out: steps (programs) that ended DONE */
	__u32 pad2;		/* must be zero */
};

/*
 * drm_ane_wait.fault: the kind in bits 39:32, a 32-bit word in bits 31:0.
 * H13: DART = the DART's error register (a translation fault of the job's
 * DMA); LATCH = the task manager's first error latch, when a failed job
 * changed it from its healthy value 0x22222222.
 */
#define DRM_ANE_FAULT_KIND_SHIFT 32
#define DRM_ANE_FAULT_DART 1ULL
#define DRM_ANE_FAULT_LATCH 2ULL

#define DRM_IOCTL_ANE_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_ANE_GET_PARAM, struct drm_ane_get_param)
#define DRM_IOCTL_ANE_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_ANE_BO_CREATE, struct drm_ane_bo_create)
#define DRM_IOCTL_ANE_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_ANE_BO_INFO, struct drm_ane_bo_info)
#define DRM_IOCTL_ANE_PROGRAM_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_ANE_PROGRAM_CREATE, struct drm_ane_program_create)
#define DRM_IOCTL_ANE_PROGRAM_DESTROY \
	DRM_IOW(DRM_COMMAND_BASE + DRM_ANE_PROGRAM_DESTROY, struct drm_ane_program_destroy)
#define DRM_IOCTL_ANE_EXEC \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_ANE_EXEC, struct drm_ane_exec)
#define DRM_IOCTL_ANE_WAIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_ANE_WAIT, struct drm_ane_wait)

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_DRM_ANE_ACCEL_H_ */
