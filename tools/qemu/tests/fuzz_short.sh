# make check's short ane-fuzz pass (on the sanitizer kernel): fuzz.sh at
# 10^3 calls per SoC table, with all of its checks. make check-full runs the
# 10^4 pass (fuzz.sh) and the failslab pass (fuzz_inject.sh); make fuzz the
# 10^5 pass (fuzz_long.sh).
FUZZ_CALLS=${FUZZ_CALLS:-1000}
. /tests/fuzz.sh
