# Makes the kernel emit a WARNING on purpose (test flavour only). The test
# itself passes; the host harness must still fail the run because of the
# warning in the log. `make check` asserts exactly that.
modprobe ane selftest_warn=1
modprobe -r ane
