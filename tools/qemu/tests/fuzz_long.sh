# make fuzz: the ane-fuzz pass of fuzz.sh at 10^5 calls per SoC table.
FUZZ_CALLS=${FUZZ_CALLS:-100000}
. /tests/fuzz.sh
