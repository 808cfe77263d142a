# make fuzz FUZZ_INJECT=1: fuzz_inject.sh at 10^5 calls per SoC table.
FUZZ_CALLS=${FUZZ_CALLS:-100000}
. /tests/fuzz_inject.sh
