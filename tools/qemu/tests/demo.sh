# `make demo`: the real job, as a user on an M1 would run it, on the
# simulated T8103 through the real driver: what the machine looks like,
# the first-contact ladder, the parity cells, the two-layer MLP, and one
# compiled program (tinygrad's sum) with its output checked.
modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel node"
echo "### ane-probe info"
ane-probe info
echo "### ane-probe doctor"
ane-probe doctor --receipt /tmp/doctor.json || fail "doctor"
echo "### ane-probe parity"
ane-probe parity --timeout-ms 60000 2>/dev/null || fail "parity"
echo "### ane-probe mlp"
ane-probe mlp --timeout-ms 60000 2>/dev/null || fail "mlp"
if [ -f /fixtures/tinygrad_sum.hwx ]; then
	echo "### ane-probe run --program tinygrad_sum.hwx (1.0 + 2.0, 64 elements)"
	sum_inputs
	ane-probe run --program /fixtures/tinygrad_sum.hwx \
		--in 5=/tmp/one.bin --in 6=/tmp/two.bin \
		--out 4=/tmp/sum.bin --expect 4=/tmp/three.bin || fail "run"
	cmp /tmp/sum.bin /tmp/three.bin || fail "run: sum differs"
else
	echo "SKIPPED: /fixtures/tinygrad_sum.hwx is absent (run)"
fi
modprobe -r ane
