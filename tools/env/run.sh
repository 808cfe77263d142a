#!/usr/bin/env bash
# Run a command inside the build chroot, in a private mount namespace.
#
#   tools/env/run.sh [-w DIR] COMMAND...
#
# Inside, the repository is at /src (working directory, or DIR below it with
# -w), the cache directory at /cache and ../shared, when present, read-only at
# /shared. /proc, /sys and /dev are mounted because objtool and QEMU need them;
# the private namespace keeps every mount off the host.
source "$(dirname "$0")/common.sh"

workdir=/src
if [ "${1:-}" = "-w" ]; then
	workdir=$2
	shift 2
fi
[ $# -gt 0 ] || die "usage: run.sh [-w DIR] COMMAND..."

root=$(ANE_CHROOT_QUIET=1 "$ANE_TOP/tools/env/mkchroot.sh")
shared=${ANE_SHARED:-$(cd "$ANE_TOP/.." && pwd)/shared}

exec unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
	root=$1 top=$2 cache=$3 shared=$4 workdir=$5
	shift 5
	mount -t proc proc "$root/proc"
	mount --rbind /sys "$root/sys"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs tmpfs "$root/tmp"
	mkdir -p "$root/src" "$root/cache" "$root/shared"
	mount --bind "$top" "$root/src"
	mount --bind "$cache" "$root/cache"
	# Trust what the host trusts (a site proxy may re-sign TLS), so cargo in
	# the chroot reaches crates.io exactly as the host does.
	if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
		mount --bind /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
	fi
	if [ -d "$shared" ]; then
		mount --bind "$shared" "$root/shared"
		mount -o remount,bind,ro "$root/shared"
	fi
	cd "$root$workdir"
	exec chroot "$root" /usr/bin/env -i \
		HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
		PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
		CARGO_HOME=/cache/cargo-home \
		/bin/sh -c "cd \"$workdir\" && exec \"\$@\"" sh "$@"
' ane-run "$root" "$ANE_TOP" "$ANE_CACHE" "$shared" "$workdir" "$@"
