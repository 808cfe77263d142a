#!/bin/bash
# Inside the chroot: check a built ane.ko's module info.
#
#   modinfo-check.sh ANE.KO KDIR
#
# - an `of:N*T*C<compatible>` alias (and its `C*` twin) per supported SoC,
# - a GPL-compatible licence,
# - a vermagic naming the kernel release it was built for (7.1.x to 7.3.x).
set -euo pipefail
ko=$1 kdir=$2
fail=0
krel=$(cat "$kdir/include/config/kernel.release")
aliases=$(modinfo -F alias "$ko" | sort)
for c in apple,t8103-ane apple,t6000-ane apple,t6020-ane apple,t6021-ane; do
	for a in "of:N*T*C$c" "of:N*T*C${c}C*"; do
		grep -qxF "$a" <<<"$aliases" || { echo "modinfo: missing alias $a" >&2; fail=1; }
	done
done
[ "$(wc -l <<<"$aliases")" = 8 ] || { echo "modinfo: unexpected aliases: $aliases" >&2; fail=1; }
license=$(modinfo -F license "$ko")
case "$license" in
GPL | "GPL v2" | "Dual MIT/GPL" | "Dual BSD/GPL" | "Dual MPL/GPL") ;;
*) echo "modinfo: licence '$license' is not GPL-compatible" >&2; fail=1 ;;
esac
vermagic=$(modinfo -F vermagic "$ko")
case "$vermagic" in
"$krel "*) ;;
*) echo "modinfo: vermagic '$vermagic' does not name $krel" >&2; fail=1 ;;
esac
case "$krel" in 7.[123].*) ;; *) echo "modinfo: kernel $krel is not 7.1, 7.2 or 7.3" >&2; fail=1 ;; esac
modinfo "$ko" | grep -E '^(filename|license|description|alias|vermagic|name):'
[ "$fail" = 0 ] && echo "modinfo: ok"
exit $fail
