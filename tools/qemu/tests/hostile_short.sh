# make check's hostile-client pass (sanitizer kernel): hostile.sh at 1500
# hostile calls per SoC table, with all of its checks. make check-full runs
# hostile.sh (10^4 per SoC table), make fuzz hostile_long.sh (10^5).
HOSTILE_CALLS=${HOSTILE_CALLS:-1500}
. /tests/hostile.sh
