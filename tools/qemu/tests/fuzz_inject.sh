# ane-fuzz with allocation failures injected (issue 17, point 3), for the
# sanitizer kernel (CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS;
# tools/kernel/sanitizers.config). failslab fails slab allocations with
# probability FI_PERCENT, but only of tasks whose make-it-fail is set
# (task-filter), and the fuzzer sets its own only for the duration of each
# fuzzed ioctl and mmap (ANE_FUZZ_INJECT=1, module `fi` of
# userspace/ane-tests/src/fuzz.rs): the failures land in the driver's ioctl
# paths and the DRM core beneath them, never in the fuzzer's own memory,
# the job worker, the setup or the checks after each run. Then fuzz.sh's
# checks: canaries, parity cells and a known-good job after each run (not
# injected), the regressions, kmemleak after the unload; the judge fails on
# any KASAN/UBSAN/lockdep report.
fs=/sys/kernel/debug/failslab
[ -d "$fs" ] || fail "no $fs: this kernel has no CONFIG_FAILSLAB"
injections=1000000000
echo Y > "$fs/task-filter"
echo N > "$fs/ignore-gfp-wait"
echo 0 > "$fs/verbose"
echo 1 > "$fs/interval"
echo "$injections" > "$fs/times"
echo "${FI_PERCENT:-5}" > "$fs/probability"
export ANE_FUZZ_INJECT=1
FUZZ_CALLS=${FUZZ_CALLS:-3000}
. /tests/fuzz.sh
left=$(cat "$fs/times")
echo 0 > "$fs/probability"
echo "failslab: $((injections - left)) allocations failed on purpose (${FI_PERCENT:-5}% of those made inside fuzzed calls)"
[ "$left" -lt "$injections" ] || fail "failslab never fired: nothing was injected"
