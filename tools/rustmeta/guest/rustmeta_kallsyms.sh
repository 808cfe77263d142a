# In-guest test of tools/rustmeta/debian.sh (run by tools/qemu/init.sh, which
# sources tools/qemu/tests/lib.sh first). Every symbol the crates rebuilt by
# ane-rust-meta export (/tests/rust-exports.txt, one name a line) must be in
# the running kernel's /proc/kallsyms, in the kernel itself (no [module]).
[ -s /tests/rust-exports.txt ] || fail "no /tests/rust-exports.txt"
want=$(wc -l < /tests/rust-exports.txt)
awk 'NR == FNR { want[$1] = 1; next }
	$4 == "" && ($3 in want) { delete want[$3] }
	END { m = 0; for (k in want) { m++; if (m <= 5) print "missing: " k }; print m > "/tmp/kallsyms-missing" }' \
	/tests/rust-exports.txt /proc/kallsyms
missing=$(cat /tmp/kallsyms-missing)
echo "kallsyms: $((want - missing))/$want exported Rust symbols present"
expect_eq "exported Rust symbols missing from /proc/kallsyms" "$missing" 0
