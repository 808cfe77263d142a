# Makes the sanitizer kernel print a KASAN report on purpose (test flavour
# only: a read one byte past a kmalloc'd buffer). The test itself passes;
# the host harness must still fail the run because of the report in the
# log. `make check` asserts exactly that on the sanitizer kernel.
modprobe ane selftest_kasan=1
modprobe -r ane
