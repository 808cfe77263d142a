# shellcheck shell=bash
# Step bookkeeping shared by tools/check.sh and the check scripts it runs
# (tools/dt, tools/dkms, tools/packaging). Sourced; needs nothing else, so it
# works on the host and inside the chroot alike.

ANE_RESULTS=()
ANE_PASSED=0
ANE_FAILED=0
ANE_T0=${ANE_T0:-$(date +%s)}
# The heading mark of a step: "===" for make check's own steps, "---" for
# the checks inside one of them.
ANE_STEP_MARK=${ANE_STEP_MARK:-===}

# step NAME COMMAND...: run one step, record its result and time, keep going.
step() {
	local name=$1
	shift
	local t0 rc
	t0=$(date +%s)
	printf '\n%s %s\n' "$ANE_STEP_MARK" "$name"
	rc=0
	"$@" || rc=$?
	printf '%s took %s s (rc %s; %s s since the start): %s\n' "$ANE_STEP_MARK" \
		"$(($(date +%s) - t0))" "$rc" "$(($(date +%s) - ANE_T0))" "$name"
	if [ "$rc" = 0 ]; then
		ANE_PASSED=$((ANE_PASSED + 1))
		ANE_RESULTS+=("PASS  $name ($(($(date +%s) - t0)) s)")
	elif [ "$rc" = 124 ]; then
		# A QEMU run that hit its time limit (tools/qemu/judge.sh):
		# counted as failed, shown apart from a test failure.
		ANE_FAILED=$((ANE_FAILED + 1))
		ANE_RESULTS+=("TIMEOUT  $name ($(($(date +%s) - t0)) s)")
	else
		ANE_FAILED=$((ANE_FAILED + 1))
		ANE_RESULTS+=("FAIL  $name ($(($(date +%s) - t0)) s)")
	fi
	return 0
}

# summary [TITLE]: print every step's result and the closing count line;
# exit status is non-zero when any step failed.
summary() {
	printf '\n=== %s\n' "${1:-summary}"
	printf '%s\n' "${ANE_RESULTS[@]}"
	printf 'total: %s s\n' "$(($(date +%s) - ANE_T0))"
	printf '%s passed, %s failed\n' "$ANE_PASSED" "$ANE_FAILED"
	[ "$ANE_FAILED" = 0 ]
}

# side_by_side LANE...: run each LANE (a function that calls `step`) in the
# background at the same time, then print each lane's output in the order
# given and add its results to this run's. For steps that mostly wait on
# one emulated CPU (QEMU runs, the device-tree checks): on 2 cores two such
# lanes take about as long as the longer one, which keeps the gate inside
# its cold-cache limit. Each lane's steps still run in order.
side_by_side() {
	local dir lane i=0 pids=() passed failed line
	dir=$(mktemp -d)
	printf '\n%s side by side: %s (output follows when all end)\n' "$ANE_STEP_MARK" "$*"
	for lane in "$@"; do
		(
			ANE_RESULTS=()
			ANE_PASSED=0
			ANE_FAILED=0
			"$lane"
			printf '%s\n' "${ANE_RESULTS[@]}" >"$dir/$i.results"
			echo "$ANE_PASSED $ANE_FAILED" >"$dir/$i.count"
		) >"$dir/$i.out" 2>&1 &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}" || true
	for ((i = 0; i < ${#pids[@]}; i++)); do
		cat "$dir/$i.out"
		if [ -s "$dir/$i.count" ]; then
			read -r passed failed <"$dir/$i.count"
			ANE_PASSED=$((ANE_PASSED + passed))
			ANE_FAILED=$((ANE_FAILED + failed))
			while IFS= read -r line; do
				[ -z "$line" ] || ANE_RESULTS+=("$line")
			done <"$dir/$i.results"
		else
			ANE_FAILED=$((ANE_FAILED + 1))
			ANE_RESULTS+=("FAIL  lane $i of: $* (ended without its results)")
		fi
	done
	rm -rf "$dir"
	printf '%s side by side ended (%s s since the start)\n' "$ANE_STEP_MARK" "$(($(date +%s) - ANE_T0))"
}
