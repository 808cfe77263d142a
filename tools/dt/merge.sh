#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Merge an ANE overlay into a board DTB that carries no __symbols__ (every
# upstream Apple board DTB), offline, with dtc's own tools.
#
#   merge.sh BASE.dtb OVERLAY.dtbo OUT.dtb
#
# The overlay (compiled with `dtc -@`) refers to existing nodes by label; its
# root node "ane-base-symbols" maps each such label to a path in the base.
# Steps:
#   1. every mapped path must exist in BASE;
#   2. a mapped node without a phandle gets a fresh one, above the largest
#      phandle in the tree (existing phandles never change);
#   3. the mappings go into the base's /__symbols__ (created if absent);
#   4. fdtoverlay applies the overlay;
#   5. a /__symbols__ created in step 3 is removed again, so the result is
#      the board tree plus the ANE nodes and nothing else.
# ane-dt (userspace/ane-dt) implements the same recipe.
set -euo pipefail

base=$1 ovl=$2 out=$3
die() { echo "merge: $*" >&2; exit 1; }
[ -f "$base" ] || die "no base DTB $base"
[ -f "$ovl" ] || die "no overlay $ovl"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
work=$tmp/work.dtb
cp "$base" "$work"

labels=$(fdtget -p "$ovl" /ane-base-symbols 2>/dev/null) ||
	die "$ovl has no /ane-base-symbols table"

# The largest phandle in the base: from the dts, which lists every one.
max=$(dtc -q -I dtb -O dts "$base" | sed -n 's/^[[:space:]]*\(linux,\)\{0,1\}phandle = <\(0x[0-9a-f]*\)>;.*/\2/p' |
	sort -u | while read -r h; do printf '%d\n' "$h"; done | sort -n | tail -n1)
max=${max:-0}

had_symbols=0
fdtget -p "$base" /__symbols__ >/dev/null 2>&1 && had_symbols=1
[ "$had_symbols" = 1 ] || fdtput -c "$work" /__symbols__

for label in $labels; do
	path=$(fdtget -t s "$ovl" /ane-base-symbols "$label")
	fdtget -p "$work" "$path" >/dev/null 2>&1 ||
		die "label $label: node $path is not in $(basename "$base") (wrong board or kernel?)"
	if ! fdtget -t u "$work" "$path" phandle >/dev/null 2>&1; then
		max=$((max + 1))
		fdtput -t u "$work" "$path" phandle "$max"
	fi
	fdtput -t s "$work" /__symbols__ "$label" "$path"
done

fdtoverlay -i "$work" -o "$tmp/out.dtb" "$ovl" || die "fdtoverlay failed"
[ "$had_symbols" = 1 ] || fdtput -r "$tmp/out.dtb" /__symbols__
mv "$tmp/out.dtb" "$out"
