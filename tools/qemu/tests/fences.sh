# EXEC's fences alone (the same tests run inside the ioctl suite): out-fence
# status, in-fences holding a job, an MLP linked only by a fence, close with
# pending fences, and the fence fields' bad-input rows; then unload and a
# kmemleak scan. A quick run for development and for showing the tests fail
# on a kernel without fence signalling.
modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel node"
ane-ioctl-tests --fences
modprobe -r ane
kmemleak_scan
