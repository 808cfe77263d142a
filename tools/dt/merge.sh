#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Merge an ANE overlay into a board DTB that carries no __symbols__ (every
# upstream Apple board DTB, and the live tree of a running Mac), offline,
# with plain fdtoverlay: the same step omarchy-mac-boot's dtb-overlays.sh
# and ane-dt take.
#
#   merge.sh BASE.dtb OVERLAY.dtbo OUT.dtb
#
# The overlay reaches existing nodes only by target-path; an existing node
# its new nodes refer to labels an empty fragment, so every reference is
# local to the overlay (no __fixups__). fdtoverlay from dtc 1.7.1 on keeps
# such a node's own phandle (older ones renumber it and break every
# reference to it), and gives it one if it has none. Steps:
#   1. the overlay has no __fixups__ (nothing needs the base's symbols);
#   2. every target path exists in BASE (a clear error for a wrong board);
#   3. fdtoverlay applies it;
#   4. no phandle of BASE changed.
set -euo pipefail

base=$1 ovl=$2 out=$3
die() { echo "merge: $*" >&2; exit 1; }
[ -f "$base" ] || die "no base DTB $base"
[ -f "$ovl" ] || die "no overlay $ovl"

if fdtget -p "$ovl" /__fixups__ >/dev/null 2>&1; then
	die "$ovl has unresolved references ($(fdtget -p "$ovl" /__fixups__ | paste -sd' ')): refer to existing nodes through a labelled target-path fragment"
fi

for frag in $(fdtget -l "$ovl" /); do
	path=$(fdtget -t s "$ovl" "/$frag" target-path 2>/dev/null) || continue
	fdtget -p "$base" "$path" >/dev/null 2>&1 ||
		die "$frag: node $path is not in $(basename "$base") (wrong board or kernel?)"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fdtoverlay -i "$base" -o "$tmp/out.dtb" "$ovl" || die "fdtoverlay failed"

# Every phandle the base had, on the same node afterwards.
phandles() {
	dtc -q -I dtb -O dts "$1" | awk '
		/\{[[:space:]]*$/ { name[++d] = $1; next }
		/^[[:space:]]*\};/ { d--; next }
		/^[[:space:]]*phandle = / { p = ""; for (i = 2; i <= d; i++) p = p "/" name[i]; print p, $3 }'
}
changed=$(comm -23 <(phandles "$base" | sort) <(phandles "$tmp/out.dtb" | sort))
[ -z "$changed" ] || die "phandles of existing nodes changed (fdtoverlay older than dtc 1.7.1?): $changed"
mv "$tmp/out.dtb" "$out"
