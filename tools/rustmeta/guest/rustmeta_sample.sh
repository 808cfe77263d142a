# In-guest test of tools/rustmeta/e2e.sh (run by tools/qemu/init.sh, which
# sources tools/qemu/tests/lib.sh first). The sample Rust module, built
# against a headers tree whose rust/ ane-rust-meta regenerated, loads into
# the original kernel, runs, and unloads.
modprobe ane_rust_meta_sample count=4
[ -d /sys/module/ane_rust_meta_sample ] || fail "sample module not loaded"
# 1 + 2 + 5 + 10
dmesg | grep -q "ane_rust_meta_sample: loaded: 4 values, sum 18" || fail "no (or wrong) load message"
modprobe -r ane_rust_meta_sample
[ ! -d /sys/module/ane_rust_meta_sample ] || fail "sample module still loaded"
dmesg | grep -q "ane_rust_meta_sample: unloaded: \[1, 2, 5, 10\]" || fail "no (or wrong) unload message"
