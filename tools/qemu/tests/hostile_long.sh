# make fuzz: the hostile-client pass of hostile.sh at 10^5 hostile calls
# per SoC table.
HOSTILE_CALLS=${HOSTILE_CALLS:-100000}
. /tests/hostile.sh
