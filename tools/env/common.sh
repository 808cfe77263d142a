# shellcheck shell=bash
# Common settings for the build environment scripts. Sourced, never run.
#
# Every expensive artefact lives under one cache directory, in a folder named
# after a hash of the inputs that produced it, so a changed input yields a new
# folder and an unchanged one is reused.

set -euo pipefail

ANE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ANE_CACHE=${ANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ane-build}
ANE_SUITE=trixie
mkdir -p "$ANE_CACHE"

log() { printf '[ane-env] %s\n' "$*" >&2; }
die() { printf '[ane-env] error: %s\n' "$*" >&2; exit 1; }

# cache_note hit|build NAME: say what a cached artefact's key decided, so a
# run's log shows which of its inputs changed (make check prints these).
cache_note() { printf '[ane-cache] %s %s\n' "$1" "$2" >&2; }

# hash_of FILE...: a short stable hash of the files' contents.
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# The Debian mirror: ANE_DEBIAN_MIRROR, or the first non-security Debian URI of
# the host's own apt sources. Never a hard-coded host.
debian_mirror() {
	if [ -n "${ANE_DEBIAN_MIRROR:-}" ]; then
		echo "$ANE_DEBIAN_MIRROR"
		return
	fi
	local uri
	uri=$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n'
		cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | grep '^deb ' |
		awk '{for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; break }}'
	} | grep -v -- '-security' | grep '/debian/*$' | head -n1 || true)
	[ -n "$uri" ] || die "no Debian mirror in the host's apt sources; set ANE_DEBIAN_MIRROR"
	echo "${uri%/}"
}

# with_lock NAME: hold an exclusive lock on NAME for the rest of the calling
# script, so two runs never build the same cached artefact at once.
with_lock() {
	exec {ANE_LOCK_FD}>"$ANE_CACHE/.lock-$1"
	flock "$ANE_LOCK_FD"
}

# Bump a recipe version when the way an artefact is built changes in a way
# that matters to its content; cosmetic script edits then keep the caches.
ANE_CHROOT_RECIPE=2
ANE_KERNEL_RECIPE=2

# kernel_rust SERIES: which Rust toolchain builds the SERIES test kernels
# (and every module built against them): "system" is trixie's rustc (1.85,
# the kernel minimum), "backports" the trixie-backports rustc unpacked under
# /opt/rust-backports (tools/env/rust-backports.sh).
kernel_rust() {
	case "$1" in
	7.2) echo backports ;;
	7.3) echo system ;;
	*) return 1 ;;
	esac
}

chroot_key() {
	{ echo "recipe $ANE_CHROOT_RECIPE"; cat "$ANE_TOP/tools/env/packages.txt" "$ANE_TOP/tools/env/rust-backports.sh"; } |
		sha256sum | cut -c1-16
}
chroot_dir() { echo "$ANE_CACHE/chroot-$ANE_SUITE-$(chroot_key)"; }
