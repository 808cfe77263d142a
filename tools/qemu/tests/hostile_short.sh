# make check's hostile-client pass (sanitizer kernel): hostile.sh at 1500
# hostile calls per SoC table, with all of its checks (make check-full runs
# hostile.sh, the 10^4 pass; make fuzz runs hostile_long.sh at 10^5), on
# every SoC table: T8103's contained faults are recovered at once by a
# forced power cycle (kernel-2 N8), and T6021's loaded programs' copies
# come out of their own reserved range, not the clients' caps (kernel-2
# 1.9).
HOSTILE_CALLS=${HOSTILE_CALLS:-1500}
HOSTILE_SOCS=${HOSTILE_SOCS:-0x8103 0x6001 0x6021}
. /tests/hostile.sh
