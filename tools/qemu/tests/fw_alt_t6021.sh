# The simulated T6021 under each alternative the record leaves open
# (hw-2 §3; the firmware model's Faults::ALTERNATIVES, sim_fw_faults bits):
#   0     a refused command is answered with a status; one SHAREDMALLOC
#         request per boot
#   512   SILENT_REFUSAL: a refused command gets no reply at all
#   1024  SM_PER_LOAD: the firmware asks for a SHAREDMALLOC buffer after
#         every PROGRAM_LOAD
#   1536  both
#   262144 ONLY_PRIORITY_2: a PROCEDURE_CALL of any priority but 2 (the
#         only one that ran) is refused; run together with 1536
#   2097152 + 4194304 (hw::mem::Coherence): the firmware and its engine do
#         not snoop the CPU's caches: a device read of a buffer the CPU
#         maps cacheably sees stale memory, a device write to one is lost
#         to the CPU; run together with 263680 (6555136 in all). The
#         driver's T602x buffers are write-combined, so nothing changes.
# Under each, the ioctl suite, the H14 suite (an H13 stream refused by the
# library and the kernel, calls of an H14 program complete and write
# nothing) and the call faults pass. The driver's own choices must hold
# under every alternative; only the expected end of a refused call
# differs (fails alone, or times out into quarantine).
mkdir -p /lib/firmware/apple/ane
ane-ioctl-tests --write-fw-image /lib/firmware/apple/ane/t602x_ane0_fw_selene_rc4x.macho
for alt in ${FW_ALTERNATIVES:-0 512 1024 6555136}; do
	modprobe ane sim_soc=0x6021 sim_fw_faults="$alt" bo_total_mb=64 bo_client_mb=32
	[ -c /dev/accel/accel0 ] || fail "alternative $alt: no accel node"
	ane-ioctl-tests --fw-expect running 0 no || fail "alternative $alt: the firmware does not run"
	ane-ioctl-tests || fail "alternative $alt: ioctl suite"
	ane-ioctl-tests --h14 || fail "alternative $alt: h14 suite"
	modprobe -r ane
	for bits in 8 16; do
		caps=
		[ "$bits" != 8 ] || caps="bo_total_mb=64 bo_client_mb=64"
		modprobe ane sim_soc=0x6021 sim_fw_faults="$alt" $caps
		ane-ioctl-tests --h14-fault "$bits" || fail "alternative $alt: h14 fault $bits"
		modprobe -r ane
	done
	echo "fw alternative $alt: ioctl, h14 and call faults pass"
done
kmemleak_scan
