# shellcheck shell=bash
# Step bookkeeping for tools/check.sh and tools/demo.sh. Sourced.

source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"

ANE_RESULTS=()
ANE_PASSED=0
ANE_FAILED=0

# step NAME COMMAND...: run one step, record its result, keep going.
step() {
	local name=$1
	shift
	local t0 rc
	t0=$(date +%s)
	printf '\n=== %s\n' "$name"
	rc=0
	"$@" || rc=$?
	if [ "$rc" = 0 ]; then
		ANE_PASSED=$((ANE_PASSED + 1))
		ANE_RESULTS+=("PASS  $name ($(($(date +%s) - t0)) s)")
	else
		ANE_FAILED=$((ANE_FAILED + 1))
		ANE_RESULTS+=("FAIL  $name ($(($(date +%s) - t0)) s)")
	fi
	return 0
}

# summary: print every step's result and the closing count line; exit status
# is non-zero when any step failed.
summary() {
	printf '\n=== summary\n'
	printf '%s\n' "${ANE_RESULTS[@]}"
	printf '%s passed, %s failed\n' "$ANE_PASSED" "$ANE_FAILED"
	[ "$ANE_FAILED" = 0 ]
}

# in_chroot COMMAND...: tools/env/run.sh, shorter.
in_chroot() { "$ANE_TOP/tools/env/run.sh" "$@"; }

# Guest build and run directories (inside the chroot, below /cache).
guest_dir() { echo "/cache/guest/$1"; }
