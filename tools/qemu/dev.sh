#!/usr/bin/env bash
# One guest run for development, outside the CI tiers.
#
#   tools/qemu/dev.sh FLAVOUR TAG TESTS [LIMIT]
#
# FLAVOUR is arm64 (7.3, 16K pages), san (x86_64 7.3 sanitizers), x86_64
# (GCC 7.3) or arm64-7.2. The kernel is built or reused exactly as
# tools/check.sh does; the test-flavour module and the guest userspace are
# built into /cache/guest/dev-TAG with their own cargo target, so runs with
# different TAGs (several worktrees at once) never share build state. TESTS
# is a comma-separated list of tools/qemu/tests names; the run is judged
# like a CI run (exit 0 pass, 124 time limit, 1 anything else).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 3 ] || { sed -n 2,13p "$0" >&2; exit 2; }
flavour=$1 tag=$2 tests=$3 limit=${4:-1200}
case $flavour in
arm64) arch=arm64 kargs=(arm64 7.3) ;;
san) arch=x86_64 kargs=(x86_64 7.3 san) ;;
x86_64) arch=x86_64 kargs=(x86_64 7.3) ;;
arm64-7.2) arch=arm64 kargs=(arm64 7.2) ;;
*) echo "dev.sh: unknown flavour '$flavour' (arm64, san, x86_64, arm64-7.2)" >&2; exit 2 ;;
esac
case $tag in
*[!A-Za-z0-9_-]* | '') echo "dev.sh: TAG must be letters, digits, - or _" >&2; exit 2 ;;
esac
kdir=$("$top/tools/kernel/build.sh" "${kargs[@]}")
g=/cache/guest/dev-$tag-$flavour
"$top/tools/env/run.sh" /usr/bin/env ANE_CARGO_TARGET="/cache/guest/dev-$tag-cargo-$arch" \
	tools/qemu/build-guest.sh "$arch" "$kdir" "$g"
"$top/tools/env/run.sh" /usr/bin/env ANE_QEMU_TIMEOUT="$limit" \
	tools/qemu/boot.sh "$arch" "$kdir" "$g/initramfs.cpio.gz" "$tests" "$g/run.log"
