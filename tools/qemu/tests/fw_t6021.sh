# The simulated T6021 (M2 Max): the firmware start and its fault matrix,
# then programs and calls through the firmware and faults at run time.
# Each load stages a synthetic Mach-O image (the simulated coprocessor does
# not run it; the test flavour skips the SHA-256 pin), runs the release
# contract against the firmware model and a CONFIG_GET. A fault leaves the
# device bound in the failed state with the failed step and, once the core
# was released, the captured registers; nothing hangs, nothing leaks.
fwdir=/lib/firmware/apple/ane
mkdir -p "$fwdir"

# expect FAULT_BITS STATE STEP CAPTURE [MODPROBE_ARGS...]
expect() {
	modprobe ane sim_soc=0x6021 sim_fw_faults="$1" ${5:+$5}
	[ -c /dev/accel/accel0 ] || fail "faults $1: no accel node (the device must stay bound)"
	ane-ioctl-tests --fw-expect "$2" "$3" "$4" || fail "faults $1"
	modprobe -r ane
}

# No firmware file: failed before anything is touched. (An earlier test
# of this boot may have installed one.)
rm -f "$fwdir/t602x_ane0_fw_selene_rc4x.macho"
expect 0 failed 0 no
ane-ioctl-tests --write-fw-image "$fwdir/t602x_ane0_fw_selene_rc4x.macho"
expect 0 running 0 no
dmesg | grep -q "ANE firmware running" || fail "no running message"
# T602x devices have no sysfs bind/unbind: a released coprocessor cannot
# be restarted without a reboot.
modprobe ane sim_soc=0x6021
[ -L /sys/bus/platform/drivers/ane-fw/ane-fw.0 ] || fail "the simulated T6021 is not bound to ane-fw"
[ ! -e /sys/bus/platform/drivers/ane-fw/unbind ] || fail "ane-fw offers sysfs unbind"
[ -e /sys/bus/platform/drivers/ane/unbind ] || fail "ane (H13) lost its sysfs unbind"
modprobe -r ane
# The optional RTKit session: this node has no mailbox, so the driver says
# so and keeps the channel transport.
modprobe ane sim_soc=0x6021 rtkit=1
ane-ioctl-tests --fw-expect running 0 no || fail "rtkit=1"
dmesg | grep -q "RTKit: the node has no mailbox; channel transport only" || fail "no RTKit message"
modprobe -r ane
expect 64 failed 1 no    # ISLAND_OFF: preflight refuses, no register read
expect 1 failed 6 yes    # NO_READY
# What a T6021 owner sees: ane-probe info names the failed step and the
# captured registers.
modprobe ane sim_soc=0x6021 sim_fw_faults=1
ane-probe info > /tmp/info.txt
grep -q "fw=failed" /tmp/info.txt || fail "info: no failed firmware"
grep -q "failed at release step 6 (READY)" /tmp/info.txt || fail "info: no failed step"
grep -q "CPU_STATUS=0x28" /tmp/info.txt || fail "info: no captured registers"
modprobe -r ane
expect 2 failed 9 yes    # BAD_DONE
expect 32 failed 10 yes  # BAD_CHANNEL_TABLE
expect 4 failed 0 no     # STALLED_RING: CONFIG_GET times out
expect 8 failed 0 no     # ERROR_STATUS: CONFIG_GET answered with an error
expect 16 running 0 no   # MISSING_FINISH only affects calls
expect 256 running 0 no  # BAD_EVENT_POINTER only affects calls
# A firmware that does not snoop the CPU's caches (hw::mem::Coherence; the
# record does not show the T602x DART cohering): each direction alone. The
# driver's T602x buffers are write-combined for the CPU, so the start does
# not depend on it; with cached buffers the firmware reads a stale image
# (2097152) or the host never sees the channel table (4194304).
expect 2097152 running 0 no
expect 4194304 running 0 no
# SHAREDMALLOC_HOG: the firmware asks for 2 MiB buffers until the host
# refuses (here at the 32 MiB reserved for the firmware's memory, which
# since kernel-2 N2 is not the clients' device cap): the exchange in flight
# (CONFIG_GET) fails, and the start with it.
expect 128 failed 0 no "bo_total_mb=32 fw_mem_mb=32"
dmesg | grep -q "CONFIG_GET exchange failed: SharedMalloc" || fail "no SHAREDMALLOC refusal in the log"
# The firmware path: compiled fixtures loaded as sections run through
# PROGRAM_LOAD, PROC_CREATE and CALL (the simulated coprocessor executes
# them on the H13 engine model) and match the CPU reference.
modprobe ane sim_soc=0x6021
ane-ioctl-tests --h14 || fail "h14 suite"
# Findings of kernel-2 (N2, N4) are collected and judged at the end, so
# that each is reported even when another fails.
bad=
# The firmware's memory is outside the clients' caps and window, and the
# default caps fit that window (kernel-2 N2).
ane-ioctl-tests --h14-memory || bad="$bad; h14 memory (default caps)"
# doctor on the simulated M2 Max without an H14 program: the firmware
# runs, but the ladder stops at the firmware rung and says what to supply;
# no H13 stream is sent to the firmware (exit 1, job and parity skipped).
rc=0
ane-probe doctor --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --receipt /tmp/doctor.json > /tmp/doctor.txt || rc=$?
[ "$rc" = 1 ] || { cat /tmp/doctor.txt; fail "doctor on T6021 without an H14 program: exit $rc, not 1"; }
grep -q "^FAIL firmware  the coprocessor's firmware runs; no H14 program" /tmp/doctor.txt || { cat /tmp/doctor.txt; fail "doctor: the firmware rung does not stop the ladder"; }
grep -q "next: supply an Apple-compiled H14 program that ran on hardware" /tmp/doctor.txt || fail "doctor: no instruction to supply an H14 program"
grep -q "^skip job " /tmp/doctor.txt || fail "doctor: the job rung ran without an H14 program"
# With an H14 container (a synthetic one of the add program's shape): the
# record pins no sha256, so without --h14-unpinned the ladder stops at the
# firmware rung; with it the job rung loads the six sections and makes one
# call, which the simulated firmware completes without writing an output
# byte; the parity cells (H13 programs) are skipped. An H13 file is refused
# at the firmware rung by the container reader.
ane-ioctl-tests --write-h14-synth /tmp/add-synth.anec || fail "writing the synthetic H14 container"
rc=0
ane-probe doctor --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --receipt /tmp/doctor.json \
	--h14-program /tmp/add-synth.anec > /tmp/doctor.txt || rc=$?
[ "$rc" = 1 ] || { cat /tmp/doctor.txt; fail "doctor with an unpinned H14 program: exit $rc, not 1"; }
grep -q "^FAIL firmware .*pins no sha256" /tmp/doctor.txt || { cat /tmp/doctor.txt; fail "doctor: an unpinned H14 program passed the firmware rung"; }
grep -q "^skip job " /tmp/doctor.txt || fail "doctor: the job rung ran an unpinned program"
rc=0
ane-probe doctor --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --receipt /tmp/doctor.json \
	--h14-program /tmp/add-synth.anec --h14-unpinned > /tmp/doctor.txt || rc=$?
cat /tmp/doctor.txt
[ "$rc" = 0 ] || fail "doctor with an acknowledged H14 program: exit $rc, not 0"
grep -q "^ok   job .*; 0 of 32768 output bytes written" /tmp/doctor.txt || fail "doctor: the H14 job rung did not run, or the simulator wrote output"
grep -q "^skip parity " /tmp/doctor.txt || fail "doctor: parity ran on the firmware backend"
# The receipt carries the driver's T6021 observation record (issue 25
# point 8): the scratch values the release read at READY and DONE and the
# CONFIG_GET word are the simulated firmware's (hw::fw::model
# ModelConfig::DEFAULT: SCRATCH0 4, SCRATCH1 0x1043f, SCRATCH3 0x10000,
# configuration 0x14), the same the driver logged, and the call the job
# rung made is counted done.
r=/tmp/doctor.json
grep -q '"read": true' "$r" || { cat "$r"; fail "T6021 doctor: observation record not read"; }
expect_eq "T6021 generation" "$(obs_value generation "$r")" h14
expect_eq "T6021 SCRATCH0 at READY" "$(obs_value boot.scratch0 "$r")" 0x4
expect_eq "T6021 SCRATCH1 at READY" "$(obs_value boot.scratch1 "$r")" 0x1043f
expect_eq "T6021 SCRATCH3 at READY" "$(obs_value boot.scratch3 "$r")" 0x10000
logged=$(dmesg | sed -n 's/.*ANE firmware running (boot ordinal \([0-9]*\), configuration \(0x[0-9a-f]*\)).*/\1 \2/p' | tail -n 1)
expect_eq "T6021 configuration word as logged" "$(obs_value boot.config "$r")" "${logged#* }"
expect_eq "T6021 SCRATCH1 + 1 = the logged ordinal" "$(($(obs_value boot.scratch1 "$r") + 1))" "${logged% *}"
expect_eq "T6021 last call status" "$(obs_value last_call.status "$r")" 0x0
[ "$(obs_value calls_done "$r")" -ge 1 ] || fail "T6021: the doctor's call is not counted"
[ "$(obs_value host.sm_buffers "$r")" -ge 1 ] || fail "T6021: no SHAREDMALLOC buffer counted"
grep -A3 '"name": "boot.scratch1",' "$r" | grep -q '"15"' || fail "T6021: boot.scratch1 not tagged with open item 15"
if [ -f /fixtures/tinygrad_sum.hwx ]; then
	rc=0
	ane-probe doctor --timeout-ms "$GUEST_JOB_TIMEOUT_MS" --receipt /tmp/doctor.json \
		--h14-program /fixtures/tinygrad_sum.hwx --h14-unpinned > /tmp/doctor.txt || rc=$?
	[ "$rc" = 1 ] || { cat /tmp/doctor.txt; fail "doctor with an HWX as the H14 program: exit $rc, not 1"; }
	grep -q "^FAIL firmware .*H14 program: " /tmp/doctor.txt || { cat /tmp/doctor.txt; fail "doctor: an HWX passed the container reader"; }
fi
ane-ioctl-tests --fw-expect running 0 no || fail "firmware state after the doctor runs"
# System sleep while the firmware runs (kernel-2 N4): the coprocessor would
# lose power under it, and the record has no power protocol to start it
# again, so the driver refuses the sleep with a message saying why; the
# firmware keeps running.
if [ -w /sys/power/state ]; then
	echo devices > /sys/power/pm_test
	rc=0
	echo freeze > /sys/power/state 2>/dev/null || rc=$?
	echo none > /sys/power/pm_test
	[ "$rc" != 0 ] || bad="$bad; system sleep with the T6021 firmware running was not refused"
	dmesg | grep -q "system sleep refused: the ANE coprocessor's firmware is running" ||
		bad="$bad; no message saying why system sleep was refused"
	ane-ioctl-tests --fw-expect running 0 no || bad="$bad; firmware state after the refused sleep"
	echo "fw_t6021: system sleep with the firmware running: refused (rc=$rc), firmware running"
fi
modprobe -r ane
# The same with small caps: new files fill the whole device cap while the
# firmware runs.
modprobe ane sim_soc=0x6021 bo_total_mb=64 bo_client_mb=32
ane-ioctl-tests --h14-memory || bad="$bad; h14 memory (64 MiB cap)"
modprobe -r ane
# Loaded programs' section copies stay with the firmware until reboot:
# they come out of their own reserved range (fw_program_mb), never a
# client's cap, and a full range refuses a new program alone (ENOSPC).
modprobe ane sim_soc=0x6021 bo_total_mb=64 bo_client_mb=32
ane-ioctl-tests --h14-programs free || bad="$bad; loaded programs' copies charged to the clients"
modprobe -r ane
modprobe ane sim_soc=0x6021 fw_program_mb=1
ane-ioctl-tests --h14-programs full || bad="$bad; a full program range"
modprobe -r ane
# A call that runs past the default 5 s limit (the simulated firmware
# posts its finish 120000 polls, 6 s at 50 us, after the dispatch): with
# the limit raised (fw_call_ms) it completes and the firmware keeps
# running; with the default it times out and quarantines (kernel-2 N2).
# The completing call is four times longer (480000 polls, within 60 s of
# limit): the limit counts polls, which the simulator answers faster than
# 50 us, so 120000 lasted only about 1 s in the guest, and --h14-slow done
# compares the creates and reads made during the call with its length
# (a loaded sanitizer guest once took 0.9 s for one create).
modprobe ane sim_soc=0x6021 sim_fw_finish_delay=480000 fw_call_ms=60000
ane-ioctl-tests --h14-slow done || bad="$bad; a long call within fw_call_ms"
modprobe -r ane
modprobe ane sim_soc=0x6021 sim_fw_finish_delay=120000
ane-ioctl-tests --h14-slow timeout || bad="$bad; a long call past the default limit"
modprobe -r ane
# Faults in a running firmware: an error status (the call is refused in
# order: it fails alone and the firmware keeps running), a missing finish
# event, a stalled ring, an event pointer outside the host's memory (each
# fails the call and quarantines the firmware); a program the firmware
# refuses at PROGRAM_LOAD (2048) or PROC_CREATE (4096) fails only its
# PROGRAM_CREATE (kernel-2 N2). (SHAREDMALLOC_HOG, 128, is
# tested above at start, under a small device cap.)
# Under fault 8 the device cap is small, so that refused calls whose
# buffers were parked would run out of it (kernel-2 N3).
for f in 8 2048 4096 16 4 256; do
	caps=
	[ "$f" != 8 ] || caps="bo_total_mb=64 bo_client_mb=64"
	modprobe ane sim_soc=0x6021 $caps
	case $f in
	2048 | 4096) ane-ioctl-tests --h14-fault "$f" || bad="$bad; h14 fault $f" ;;
	*) ane-ioctl-tests --h14-fault "$f" || fail "h14 fault $f" ;;
	esac
	modprobe -r ane
done
# The simulated T6020 (M2 Pro): the same firmware image, with the T6020's
# own patch values (RTK_soc 0x6020, revision 0x01, the T6020 tunables),
# which the simulated coprocessor checks before it posts READY; then the
# firmware-path fixtures through it.
modprobe ane sim_soc=0x6020
ane-ioctl-tests --fw-expect running 0 no || fail "T6020: the firmware does not run"
dmesg | grep -q "iBoot patches replayed (soc 0x6020 rev 0x1," || fail "T6020: not patched as a T6020"
ane-ioctl-tests --h14 || fail "T6020: h14 suite"
modprobe -r ane
[ -z "$bad" ] || fail "kernel-2 findings:${bad#;}"
kmemleak_scan
