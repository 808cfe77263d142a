#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# ane-dt against the distributions' own update-m1n1 (issue 27): does the
# overlay really reach the boot payload, and does the pacman hook / the
# kernel-install plugin still work afterwards?
#
#   tools/dt/distros.sh          (from the repository root, as root)
#
# For each distribution it builds a throwaway root shaped like it: merged
# /usr, the kernel's DTBs where that distribution's kernel package puts them,
# the m1n1 stage and u-boot where its update-m1n1 looks, an ESP directory,
# and /usr/bin/update-m1n1 made from the distribution's own files the way
# its package makes it:
#
#   alarm     Arch Linux ARM (asahi-alarm): the fork's update-m1n1, built by
#             its Makefile (CONFIG_DIR /etc/default), then the PKGBUILD's own
#             `sed` line (a default DTBS glob); no configuration file; DTBs
#             flat in /usr/lib/modules/<kver>/dtbs (linux-asahi's PKGBUILD).
#   omarchy   Omarchy: the alarm root (Omarchy installs Arch Linux ARM's
#             asahi-scripts) plus omarchy-mac-boot's /etc/default/update-m1n1
#             and overlay library, as stand-ins (make_omarchy says what they
#             do and what they cannot prove); ane-dt places the overlay in
#             omarchy-mac-boot's directory and changes no configuration;
#             after a kernel update the new tree still gets the node; with a
#             DTBS line after omarchy-mac-boot's call, install refuses.
#   fedora    Fedora Asahi Remix: upstream 20250713 + the spec's two patches
#             (applied as %prep does), built with CONFIG_DIR=/etc/sysconfig,
#             /etc/sysconfig/update-m1n1 from the spec's source; DTBs in
#             /boot/dtb-<kver>/apple with /boot/dtb linking to it.
#   upstream  upstream asahi-scripts b6f72e6 (expands a DTBS directory to
#             its apple/t6*.dtb and apple/t81*.dtb), built by its Makefile,
#             kernel DTBs as `make dtbs_install` lays them out, and a user's
#             /etc/default/update-m1n1 setting DTBS to that directory (mode
#             0640, no final newline: `remove` must restore it byte for
#             byte).
#
# In each root it runs the commands docs/install.md gives (`ane-dt status`,
# `ane-dt install`, then update-m1n1 exactly as the pacman hook's Exec line
# or the user runs it, `ane-dt install` again, `ane-dt remove`), with ane-dt
# given --root, and checks:
#   - update-m1n1 exits 0 every time (a failure would break the pacman hook);
#   - the payload, split into its m1n1 stage, DTBs, gzipped u-boot and
#     config, holds the board's tree with one enabled ANE node (dtc -I dtb),
#     and every other tree byte-identical to the stock one;
#   - after a kernel update that changes the stock tree, update-m1n1 still
#     exits 0 and packs the stock tree;
#   - after `ane-dt remove` every configuration file is byte-identical (and
#     of the same mode) to before, or absent again, and the payload is the
#     stock one.
#
# What is not the distribution's: the Debian tools copied into the root
# (bash as /bin/sh, as on Arch and Fedora, and coreutils, sed, gzip), and two
# stand-ins, because the files are not among the distribution files or
# would touch the host: asahi-scripts' functions.sh (info, warn, and
# mount_sys_esp, which only checks that the root's ESP directory exists
# instead of mounting the real ESP) and `umount` (does nothing). The board
# tree is the live device tree of a real j414c (M2 Max), the other trees
# are small stand-ins named like kernel DTBs.
#
# Needs the distributions' files (../shared/targets/distro-scripts, or
# $ANE_SHARED/targets/distro-scripts): without them it prints SKIPPED and
# exits 77. Needs fdtoverlay from dtc 1.7.1 or newer (ane-dt's merge): on a
# host with an older one (Debian bookworm) it runs itself in the build
# chroot (tools/env/run.sh). ANE_DT=PATH tests that ane-dt binary instead
# of building one. Ends with "N passed, N failed".
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${ANE_IN_CHROOT:-}" = 1 ]; then
	shared=/shared
else
	shared=${ANE_SHARED:-$(cd "$top/.." && pwd)/shared}
fi
scripts=$shared/targets/distro-scripts
live_src=$shared/targets/fdt-live-t6021-j414c.dts
if [ ! -f "$scripts/SHA256SUMS" ] || [ ! -f "$live_src" ]; then
	echo "SKIPPED: the distributions' update-m1n1 files ($scripts) or the live tree ($live_src) are missing; set ANE_SHARED to the shared directory"
	exit 77
fi

dtc_new_enough() {
	local v
	v=$(dtc --version 2>/dev/null | sed -n 's/^Version: DTC \([0-9.]*\).*/\1/p')
	[ -n "$v" ] && command -v fdtoverlay >/dev/null &&
		[ "$(printf '%s\n1.7.1\n' "$v" | sort -V | head -n1)" = 1.7.1 ]
}
if [ "${ANE_IN_CHROOT:-}" != 1 ] && ! dtc_new_enough; then
	echo "dtc/fdtoverlay 1.7.1 or newer not on this host: running in the build chroot"
	dt=()
	if [ -n "${ANE_DT:-}" ]; then
		case $(realpath "$ANE_DT") in
		"$top"/*) dt=(ANE_DT="/src/$(realpath --relative-to="$top" "$ANE_DT")") ;;
		*) echo "ANE_DT must lie inside the repository to be seen in the chroot" >&2; exit 2 ;;
		esac
	fi
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 "${dt[@]}" tools/dt/distros.sh "$@"
fi

cd "$top"
ANE_STEP_MARK=---
source tools/steps.sh

work=$(mktemp -d /tmp/ane-distros.XXXXXX)
trap 'rm -rf "$work"' EXIT

BOARD=t6021-j414c
BOARD_COMPAT=apple,j414c
ANE_COMPAT=apple,t6021-ane
# Other trees of a kernel's apple/ directory: Macs (t6*, t81*: update-m1n1
# packs them) and one phone (s5l*: upstream's directory expansion leaves it
# out).
OTHERS="t8103-j274:apple,j274:apple,t8103 t6000-j314s:apple,j314s:apple,t6000 t8112-j413:apple,j413:apple,t8112 s5l8960x-j71:apple,j71:apple,s5l8960x"
M1N1_BYTES="m1n1 stage stand-in: no device tree inside"

# strict FUNCTION ARGS...: runs a function of this script in a child bash
# with errexit, so that any failing command fails the step (step() runs its
# command where errexit does not apply).
strict() { bash -euo pipefail -c "$(declare -f); \"\$@\"" strict "$@"; }
export work scripts live_src BOARD BOARD_COMPAT ANE_COMPAT OTHERS M1N1_BYTES

# --- inputs ------------------------------------------------------------------
inputs() {
	(cd "$scripts" && sha256sum -c --quiet SHA256SUMS) || { echo "distro-scripts differ from their SHA256SUMS"; return 1; }
	if [ -n "${ANE_DT:-}" ]; then
		cp "$ANE_DT" "$work/ane-dt"
	else
		(cd userspace && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/cache/cargo-target/host} \
			cargo build --locked -q -p ane-dt &&
			cp "${CARGO_TARGET_DIR:-/cache/cargo-target/host}/debug/ane-dt" "$work/ane-dt")
	fi
	mkdir -p "$work/ovl" "$work/dtbs"
	# As the packages compile them (packaging/arch/ane-tools/PKGBUILD).
	local soc
	for soc in t8103 t6001 t6021; do
		dtc -q -I dts -O dtb -o "$work/ovl/$soc-ane.dtbo" "dts/$soc-ane.dts"
	done
	dtc -q -I dts -O dtb -o "$work/dtbs/$BOARD.dtb" "$live_src"
	local o name compat soccompat
	for o in $OTHERS; do
		IFS=: read -r name compat soccompat <<<"$o"
		printf '/dts-v1/;\n/ { compatible = "%s", "%s", "apple,arm-platform"; model = "stand-in %s"; #address-cells = <2>; #size-cells = <2>; };\n' \
			"$compat" "$soccompat" "$name" | dtc -q -I dts -O dtb -o "$work/dtbs/$name.dtb" -
	done
	printf '%s' "$M1N1_BYTES" >"$work/m1n1.bin"
	printf 'u-boot stand-in\n' >"$work/u-boot-nodtb.bin"
	"$work/ane-dt" --version
	echo "board $BOARD: $(fdtget -t s "$work/dtbs/$BOARD.dtb" / model); other trees: $(ls "$work/dtbs" | grep -vc "^$BOARD.dtb$")"
}

# --- a root ------------------------------------------------------------------
# copy_tool ROOT PROGRAM: the host's program and its libraries, at their paths.
copy_tool() {
	local root=$1 path f
	path=$(command -v "$2")
	for f in "$path" $(ldd "$path" | grep -o '/[^ ]*'); do
		mkdir -p "$root$(dirname "$f")"
		[ -e "$root$f" ] || cp -L "$f" "$root$f"
	done
}

# base_root ROOT LIB64: merged /usr as Arch (lib64 -> usr/lib) and Fedora
# (lib64 -> usr/lib64) have it, the tools update-m1n1 runs, the stand-ins.
base_root() {
	local root=$1 lib64=$2 t
	mkdir -p "$root"/{usr/bin,usr/lib,"$lib64",etc,run,tmp,var/lib,boot,sys/firmware/devicetree/base}
	ln -s usr/bin "$root/bin"
	ln -s usr/bin "$root/sbin"
	ln -s usr/lib "$root/lib"
	ln -s "$lib64" "$root/lib64"
	for t in bash cat gzip sha512sum sha256sum cut cp mv rm dirname ls sort head readlink sed; do
		copy_tool "$root" "$t"
	done
	ln -s bash "$root/usr/bin/sh"
	mkdir -p "$root/usr/share/asahi-scripts"
	cat >"$root/usr/share/asahi-scripts/functions.sh" <<-'EOF'
		# Test stand-in for asahi-scripts' functions.sh.
		info() { echo "$*"; }
		warn() { echo "$*" >&2; }
		# The ESP is the directory /run/.system-efi of this root.
		mount_sys_esp() { [ -d "$1/m1n1" ] || { warn "no ESP at $1"; return 1; }; }
	EOF
	printf '#!/bin/sh\n# Test stand-in: the ESP is a directory, nothing to unmount.\nexit 0\n' >"$root/usr/bin/umount"
	chmod 0755 "$root/usr/bin/umount"
	mkdir -p "$root/run/.system-efi/m1n1"
	# The running machine, as ane-dt reads it.
	printf '%s\0apple,t6021\0apple,arm-platform\0' "$BOARD_COMPAT" >"$root/sys/firmware/devicetree/base/compatible"
	# ane-tools' overlays.
	mkdir -p "$root/usr/share/ane/dt"
	cp "$work"/ovl/*.dtbo "$root/usr/share/ane/dt/"
}

# build_script OUT SRC MAKEFILE MAKEVARS...: the Makefile's own rule for the
# installed script (sed s,/etc/default,$(CONFIG_DIR),g), then install -m0755.
build_script() {
	local out=$1 src=$2 mk=$3 b
	shift 3
	b=$(mktemp -d "$work/build.XXXX")
	cp "$src" "$b/update-m1n1"
	cp "$mk" "$b/Makefile"
	make -s -C "$b" "$@" build/update-m1n1 >/dev/null
	install -D -m0755 "$b/build/update-m1n1" "$out"
}

# pkgbuild_sed ROOT: the PKGBUILD's own sed line, run with pkgdir=ROOT.
pkgbuild_sed() {
	local root=$1 line before
	line=$(grep -E '^[[:space:]]*sed -i .*"\$pkgdir/usr/bin/update-m1n1"' "$scripts/alarm/PKGBUILD")
	[ "$(grep -c . <<<"$line")" = 1 ] || { echo "expected one sed line in the PKGBUILD, found: $line" >&2; return 1; }
	before=$(wc -l <"$root/usr/bin/update-m1n1")
	(pkgdir=$root; eval "$line")
	[ "$(wc -l <"$root/usr/bin/update-m1n1")" = $((before + 1)) ] || { echo "the PKGBUILD's sed inserted nothing" >&2; return 1; }
}

alarm_kernel() {
	local root=$1 d=$1/usr/lib/modules/7.1.13-3-1-ARCH/dtbs
	mkdir -p "$d"
	cp "$work"/dtbs/*.dtb "$d/"
	# m1n1 and uboot-asahi install the stage here (update-m1n1's SOURCE).
	install -D -m0644 "$work/m1n1.bin" "$root/usr/lib/asahi-boot/m1n1.bin"
	install -D -m0644 "$work/u-boot-nodtb.bin" "$root/usr/lib/asahi-boot/u-boot-nodtb.bin"
	echo /usr/lib/modules/7.1.13-3-1-ARCH/dtbs >"$root/.stock-dir"
	printf '%s\n' "$root/usr/lib/asahi-boot/m1n1.bin" "$root/usr/lib/asahi-boot/u-boot-nodtb.bin" >"$root/.stage"
}

make_alarm() {
	local root=$1
	base_root "$root" usr/lib
	alarm_kernel "$root"
	build_script "$root/usr/bin/update-m1n1" "$scripts/alarm/update-m1n1" "$scripts/alarm/Makefile" PREFIX=/usr
	pkgbuild_sed "$root"
	install -D -m0644 "$scripts/alarm/95-m1n1-install.hook" "$root/usr/share/libalpm/hooks/95-m1n1-install.hook"
	sed -n 's/^Exec = //p' "$scripts/alarm/95-m1n1-install.hook" >"$root/.run"
}

# omarchy: Arch Linux ARM plus omarchy-mac-boot. Its library is not among
# the distribution files (no copy with provenance), so the root gets a
# stand-in that does what docs/install.md says omarchy-mac-boot does,
# written here from that description, not from its code: the
# configuration sources the library and calls its DTBS function last; the
# function leaves everything alone unless update-m1n1 holds Arch Linux
# ARM's DTBS default, takes DTBS (else the newest kernel's trees), and
# replaces each tree named PREFIX.dtb or PREFIX-* by a copy under /run with
# every PREFIX/*.dtbo of the overlay directory applied by plain fdtoverlay,
# unless the tree already has a node with a compatible the overlay's root
# lists in omarchy,skip-if-compatible. What the stand-in cannot show is
# that omarchy-mac-boot's own library behaves so (docs/install.md,
# section 5).
make_omarchy() {
	local root=$1 t
	make_alarm "$root"
	for t in dtc fdtoverlay fdtget grep mkdir; do
		copy_tool "$root" "$t"
	done
	mkdir -p "$root/usr/lib/omarchy-mac/boot" "$root/usr/lib/omarchy-mac-boot/dtb-overlays" "$root/etc/default"
	cat >"$root/usr/lib/omarchy-mac/boot/dtb-overlays.sh" <<-'EOF'
		# Test stand-in for omarchy-mac-boot's dtb-overlays.sh (see distros.sh).
		dtb_overlays_update_m1n1() {
		  local dir=/usr/lib/omarchy-mac-boot/dtb-overlays out=/run/omarchy-dtb-overlays
		  local dtb cur name ov prefix c skip n=0 list=""
		  grep -qxF ': ${DTBS:=$(/bin/ls -d /lib/modules/*-ARCH | sort -rV | head -1)/dtbs/*.dtb}' /usr/bin/update-m1n1 || return 0
		  [ -n "${DTBS:-}" ] || DTBS="$(/bin/ls -d /lib/modules/*-ARCH | sort -rV | head -1)/dtbs/*.dtb"
		  rm -rf "$out"; mkdir -p "$out"
		  for dtb in $DTBS; do
		    n=$((n + 1)); cur=$dtb; name=${dtb##*/}
		    for ov in "$dir"/*/*.dtbo; do
		      [ -f "$ov" ] || continue
		      prefix=${ov%/*}; prefix=${prefix##*/}
		      case $name in "$prefix.dtb" | "$prefix"-*) ;; *) continue ;; esac
		      skip=0
		      for c in $(fdtget -t s "$ov" / omarchy,skip-if-compatible); do
		        dtc -q -I dtb -O dts "$cur" | grep -qF ""$c"" && skip=1
		      done
		      [ "$skip" = 0 ] || continue
		      fdtoverlay -i "$cur" -o "$out/overlay$n.next" "$ov" || return 1
		      mv "$out/overlay$n.next" "$out/overlay$n"; cur=$out/overlay$n
		    done
		    list="$list $cur"
		  done
		  DTBS=${list# }
		}
	EOF
	cat >"$root/etc/default/update-m1n1" <<-'EOF'
		# omarchy-mac-boot's configuration in shape (stand-in, see distros.sh).
		export LC_ALL=C
		if [ -r /usr/lib/omarchy-mac/boot/dtb-overlays.sh ]; then
		  . /usr/lib/omarchy-mac/boot/dtb-overlays.sh
		  dtb_overlays_update_m1n1 || :
		fi
	EOF
}

make_upstream() {
	local root=$1 k=/usr/lib/modules/7.1.13-3-1-ARCH/dtbs
	base_root "$root" usr/lib
	# The kernel's own `make dtbs_install` layout: <dir>/apple/*.dtb.
	mkdir -p "$root$k/apple"
	cp "$work"/dtbs/*.dtb "$root$k/apple/"
	install -D -m0644 "$work/m1n1.bin" "$root/usr/lib/asahi-boot/m1n1.bin"
	install -D -m0644 "$work/u-boot-nodtb.bin" "$root/usr/lib/asahi-boot/u-boot-nodtb.bin"
	echo "$k/apple" >"$root/.stock-dir"
	printf '%s\n' "$root/usr/lib/asahi-boot/m1n1.bin" "$root/usr/lib/asahi-boot/u-boot-nodtb.bin" >"$root/.stage"
	build_script "$root/usr/bin/update-m1n1" "$scripts/upstream/update-m1n1" "$scripts/alarm/Makefile" PREFIX=/usr
	mkdir -p "$root/etc/default"
	printf '# mine\nDTBS=%s' "$k" >"$root/etc/default/update-m1n1"
	chmod 0640 "$root/etc/default/update-m1n1"
	echo /usr/bin/update-m1n1 >"$root/.run"
}

make_fedora() {
	local root=$1 kver=7.1.13-402.asahi.fc44.aarch64+16k b
	base_root "$root" usr/lib64
	mkdir -p "$root/boot/dtb-$kver/apple" "$root/usr/lib/modules/$kver/dtb/apple"
	cp "$work"/dtbs/*.dtb "$root/boot/dtb-$kver/apple/"
	cp "$work"/dtbs/*.dtb "$root/usr/lib/modules/$kver/dtb/apple/"
	ln -s "dtb-$kver" "$root/boot/dtb"
	install -D -m0644 "$work/m1n1.bin" "$root/usr/lib64/m1n1/m1n1.bin"
	install -D -m0644 "$work/u-boot-nodtb.bin" "$root/usr/share/uboot/apple_m1/u-boot-nodtb.bin"
	# %prep: the tarball's script, the spec's patches.
	b=$(mktemp -d "$work/fedora-src.XXXX")
	cp "$scripts/fedora/update-m1n1.orig-20250713" "$b/update-m1n1"
	local p
	for p in "$scripts"/fedora/0001-*.patch "$scripts"/fedora/0002-*.patch; do
		patch -d "$b" -p1 -s --fuzz=0 --no-backup-if-mismatch -f <"$p"
	done
	# %install: make ... CONFIG_DIR="/etc/sysconfig"; the sysconfig source.
	build_script "$root/usr/bin/update-m1n1" "$b/update-m1n1" "$scripts/fedora/Makefile-20250713" \
		PREFIX=/usr BIN_DIR=/usr/bin CONFIG_DIR=/etc/sysconfig
	install -D -m0644 "$scripts/fedora/update-m1n1.sysconfig" "$root/etc/sysconfig/update-m1n1"
	install -D -m0755 "$scripts/fedora/15-update-m1n1.install" "$root/usr/lib/kernel/install.d/15-update-m1n1.install"
	echo /boot/dtb/apple >"$root/.stock-dir"
	printf '%s\n' "$root/usr/lib64/m1n1/m1n1.bin" "$root/usr/share/uboot/apple_m1/u-boot-nodtb.bin" >"$root/.stage"
	# The plugin's command: exec /usr/bin/update-m1n1.
	sed -n 's/^[[:space:]]*exec \(\/usr\/bin\/update-m1n1\)$/\1/p' "$scripts/fedora/15-update-m1n1.install" >"$root/.run"
	[ -s "$root/.run" ] || { echo "15-update-m1n1.install runs no /usr/bin/update-m1n1" >&2; return 1; }
}

# --- running and judging -----------------------------------------------------
# update_m1n1 ROOT: the distribution's update-m1n1 as its hook runs it.
# (step() has a local "name": the callers use other names.)
update_m1n1() {
	local root=$1 rc=0
	# shellcheck disable=SC2046
	env -i PATH=/usr/bin "$(command -v chroot)" "$root" $(cat "$root/.run") >"$work/u.out" 2>&1 || rc=$?
	sed 's/^/    update-m1n1: /' "$work/u.out"
	if [ "$rc" != 0 ]; then
		echo "update-m1n1 exited $rc (the pacman hook / kernel-install would fail)"
		return 1
	fi
}

# split ROOT OUT: boot.bin -> OUT/tree-N.dtb; checks the stage and u-boot.
split() {
	local root=$1 out=$2 m1n1 uboot
	{ read -r m1n1; read -r uboot; } <"$root/.stage"
	rm -rf "$out"
	mkdir -p "$out"
	python3 - "$root/run/.system-efi/m1n1/boot.bin" "$m1n1" "$uboot" "$out" <<-'EOF'
		import gzip, struct, sys, zlib
		boot, m1n1, uboot, out = sys.argv[1:]
		data = open(boot, "rb").read()
		stage = open(m1n1, "rb").read()
		if not data.startswith(stage):
		    sys.exit("payload: does not start with the m1n1 stage")
		pos, n = len(stage), 0
		while data[pos:pos + 4] == b"\xd0\x0d\xfe\xed":
		    size = struct.unpack(">I", data[pos + 4:pos + 8])[0]
		    open(f"{out}/tree-{n}.dtb", "wb").write(data[pos:pos + size])
		    pos, n = pos + size, n + 1
		d = zlib.decompressobj(wbits=31)
		if data[pos:pos + 2] != b"\x1f\x8b" or d.decompress(data[pos:]) != open(uboot, "rb").read():
		    sys.exit(f"payload: no gzipped u-boot after {n} trees")
		print(f"payload: m1n1 stage, {n} device trees, gzipped u-boot, {len(d.unused_data)} bytes of m1n1 config")
	EOF
}

# ane_nodes DTB: the paths of nodes with the ANE compatible and their
# status, from the decompiled tree.
ane_nodes() {
	dtc -q -I dtb -O dts "$1" | awk -v c="\"$ANE_COMPAT\"" '
		/\{[[:space:]]*$/ { name[++d] = $1; next }
		/^[[:space:]]*\};/ { d--; next }
		/^[[:space:]]*compatible = / && index($0, c) {
			p = ""; for (i = 2; i <= d; i++) p = p "/" name[i]; print p }'
}

# judge ROOT WANT: WANT=ane (the board tree has one enabled ANE node) or
# stock (the board tree is the stock one). Every other packed tree must be
# a stock tree, byte for byte, and every stock Mac tree packed.
judge() {
	local root=$1 want=$2 out=$work/payload t compat board="" nodes p st stockdir
	split "$root" "$out" || return 1
	stockdir=$root$(cat "$root/.stock-dir")
	for t in "$out"/tree-*.dtb; do
		compat=$(fdtget -t s "$t" / compatible | cut -d' ' -f1)
		if [ "$compat" = "$BOARD_COMPAT" ]; then
			[ -z "$board" ] || { echo "two trees for $BOARD_COMPAT"; return 1; }
			board=$t
		else
			local f found=""
			for f in "$stockdir"/*.dtb; do cmp -s "$t" "$f" && found=$f; done
			[ -n "$found" ] || { echo "packed tree $compat is no stock tree"; return 1; }
		fi
	done
	[ -n "$board" ] || { echo "no tree for $BOARD_COMPAT in the payload"; return 1; }
	for t in "$stockdir"/t6*.dtb "$stockdir"/t81*.dtb; do
		local f found=""
		[ "$(basename "$t")" = "$BOARD.dtb" ] && continue
		for f in "$out"/tree-*.dtb; do cmp -s "$t" "$f" && found=$f; done
		[ -n "$found" ] || { echo "stock tree $(basename "$t") not packed"; return 1; }
	done
	nodes=$(ane_nodes "$board")
	case $want in
	ane)
		[ "$(grep -c . <<<"$nodes")" = 1 ] || { echo "$BOARD tree: expected one $ANE_COMPAT node, found: ${nodes:-none}"; return 1; }
		st=$(fdtget -t s "$board" "$nodes" status 2>/dev/null || echo okay)
		[ "$st" = okay ] || { echo "$BOARD tree: $nodes has status $st"; return 1; }
		echo "$BOARD tree in the payload: $ANE_COMPAT at $nodes, status $st"
		;;
	stock)
		[ -z "$nodes" ] || { echo "$BOARD tree: ANE node $nodes, expected the stock tree"; return 1; }
		cmp -s "$board" "$stockdir/$BOARD.dtb" || { echo "$BOARD tree differs from the stock tree"; return 1; }
		echo "$BOARD tree in the payload: the stock tree, no ANE node"
		;;
	esac
}

# The configuration files the scripts could read: content hash and mode.
confs() {
	local root=$1 f
	for f in /etc/default/update-m1n1 /etc/sysconfig/update-m1n1; do
		if [ -e "$root$f" ]; then
			echo "$f $(sha256sum <"$root$f" | cut -c1-16) $(stat -c %a "$root$f")"
		else
			echo "$f absent"
		fi
	done
}

ane_dt() {
	local root=$1
	shift
	echo "    \$ ane-dt $*"
	"$work/ane-dt" --root "$root" "$@" 2>&1 | sed 's/^/    /'
	return "${PIPESTATUS[0]}"
}

# A pacman upgrade of linux-asahi: the old modules directory goes, the new
# one comes (the hook's trigger); the tree ane-dt merged from is gone.
alarm_upgrade() {
	local root=$1 want=$2 old=/usr/lib/modules/7.1.13-3-1-ARCH new=/usr/lib/modules/7.1.14-1-1-ARCH
	mv "$root$old" "$root$new"
	echo "$new/dtbs" >"$root/.stock-dir"
	update_m1n1 "$root"
	judge "$root" "$want"
	mv "$root$new" "$root$old"
	echo "$old/dtbs" >"$root/.stock-dir"
}

# Fedora installs kernels side by side and points /boot/dtb at the newest.
# When the board's tree did not change, the merged copy stays valid, and
# the other trees come from the new kernel through /boot/dtb.
fedora_new_kernel() {
	local root=$1 old new=7.1.14-400.asahi.fc44.aarch64+16k
	old=$(readlink "$root/boot/dtb")
	mkdir -p "$root/boot/dtb-$new"
	cp -a "$root/boot/$old/apple" "$root/boot/dtb-$new/"
	fdtput -t s "$root/boot/dtb-$new/apple/t8103-j274.dtb" / model "the new kernel's j274 tree"
	ln -sfn "dtb-$new" "$root/boot/dtb"
	update_m1n1 "$root"
	judge "$root" ane
	ln -sfn "$old" "$root/boot/dtb"
	rm -rf "$root/boot/dtb-$new"
}

# --- per distribution --------------------------------------------------------
distro() {
	local dname=$1 root=$work/root-$1
	step "$dname: root shaped like the distribution, its update-m1n1 installed as its package does" \
		strict "make_$dname" "$root"
	[ -x "$root/usr/bin/update-m1n1" ] || return 0
	confs "$root" >"$work/$dname.confs"
	step "$dname: update-m1n1 before ane-dt packs the stock trees" \
		eval 'update_m1n1 "$root" && judge "$root" stock'
	# Only the file the installed script sources may change.
	only_conf_changed() {
		local want changed
		want=$(sed -n 's/^\[ -e \([^ ]*\) \] && \. \1$/\1/p' "$root/usr/bin/update-m1n1")
		confs "$root" >"$work/$dname.confs.installed"
		changed=$(comm -13 <(sort "$work/$dname.confs") <(sort "$work/$dname.confs.installed") | cut -d' ' -f1)
		if [ "$changed" != "$want" ]; then
			echo "ane-dt changed: ${changed:-nothing}; /usr/bin/update-m1n1 reads $want"
			return 1
		fi
		echo "changed: $want, the file /usr/bin/update-m1n1 sources; no other"
		# The line docs/install.md shows for each distribution.
		grep -qxF "    update-m1n1: /usr/bin/update-m1n1 reads $want" "$work/install.out" ||
			{ echo "ane-dt install did not say 'update-m1n1: /usr/bin/update-m1n1 reads $want'"; return 1; }
	}
	# Omarchy: no configuration changes at all; the overlay is placed in
	# omarchy-mac-boot's directory under the board's prefix.
	omarchy_placed() {
		local placed=/usr/lib/omarchy-mac-boot/dtb-overlays/$BOARD/ane-dt.dtbo
		confs "$root" >"$work/$dname.confs.installed"
		diff "$work/$dname.confs" "$work/$dname.confs.installed" || { echo "ane-dt changed a configuration file"; return 1; }
		cmp "$root$placed" "$root/usr/share/ane/dt/t6021-ane.dtbo" || { echo "$placed is not the packaged overlay"; return 1; }
		grep -q "placed t6021-ane as $placed" "$work/install.out" || { echo "ane-dt install did not say where it placed the overlay"; return 1; }
		grep -q "^    omarchy:    /etc/default/update-m1n1 calls dtb_overlays_update_m1n1 last" "$work/status.out" ||
			{ echo "ane-dt status did not find omarchy-mac-boot's merge in place"; return 1; }
		echo "placed $placed; no configuration file changed"
	}
	local check=only_conf_changed
	[ "$dname" != omarchy ] || check=omarchy_placed
	step "$dname: ane-dt status, ane-dt install (docs/install.md section 5)" \
		eval 'ane_dt "$root" status | tee "$work/status.out" && ane_dt "$root" install | tee "$work/install.out" && $check'
	step "$dname: update-m1n1 exits 0 and the payload's $BOARD tree has the ANE node" \
		eval 'update_m1n1 "$root" && judge "$root" ane'
	step "$dname: ane-dt install again changes nothing" \
		eval 'ane_dt "$root" install | tee "$work/again"; grep -q "nothing to do" "$work/again"'
	# A kernel update that changes the board's stock tree.
	local stock
	stock=$root$(cat "$root/.stock-dir")/$BOARD.dtb
	cp "$stock" "$work/$dname.stock"
	# The m1n1 delivery falls back to the stock tree until `ane-dt install`
	# runs again; omarchy-mac-boot merges the placed overlay into the new
	# tree at once.
	local after_update=stock
	[ "$dname" != omarchy ] || after_update=ane
	kernel_update() {
		fdtput -t s "$stock" / model "a newer kernel's tree" &&
			update_m1n1 "$root" && judge "$root" "$after_update"
	}
	step "$dname: after a kernel update changes the stock tree, update-m1n1 exits 0 and packs it ($after_update)" kernel_update
	cp "$work/$dname.stock" "$stock"
	case $dname in
	alarm) step "alarm: after a linux-asahi upgrade replaces /usr/lib/modules/<kver>, update-m1n1 exits 0 and packs the new kernel's trees" strict alarm_upgrade "$root" stock ;;
	omarchy)
		step "omarchy: after a linux-asahi upgrade replaces /usr/lib/modules/<kver>, update-m1n1 exits 0 and the new kernel's tree has the ANE node" strict alarm_upgrade "$root" ane
		# A DTBS line after omarchy-mac-boot's call (as the aurora-sep
		# installer appends one): the overlays would be left out, so
		# install refuses and says why.
		dtbs_after_call() {
			local conf=$root/etc/default/update-m1n1 rc=0
			cp -p "$conf" "$work/omarchy.conf"
			printf 'DTBS=/usr/lib/modules/7.1.13-3-1-ARCH/dtbs/*.dtb\n' >>"$conf"
			ane_dt "$root" remove >/dev/null
			ane_dt "$root" install >"$work/refused" 2>&1 || rc=$?
			cat "$work/refused"
			cp -p "$work/omarchy.conf" "$conf"
			[ "$rc" != 0 ] || { echo "ane-dt install succeeded although update-m1n1 would leave the overlay out"; return 1; }
			grep -q "sets DTBS after dtb_overlays_update_m1n1" "$work/refused" || { echo "the refusal does not say why"; return 1; }
			[ ! -e "$root/usr/lib/omarchy-mac-boot/dtb-overlays/$BOARD/ane-dt.dtbo" ] || { echo "placed anyway"; return 1; }
			ane_dt "$root" install >/dev/null
		}
		step "omarchy: with a DTBS line after omarchy-mac-boot's call, ane-dt install refuses and says why" dtbs_after_call
		;;
	fedora) step "fedora: a new kernel with the same board tree: update-m1n1 keeps the ANE node and takes the new kernel's other trees" strict fedora_new_kernel "$root" ;;
	esac
	removed() {
		ane_dt "$root" remove || return 1
		confs "$root" >"$work/$dname.confs.after"
		diff "$work/$dname.confs" "$work/$dname.confs.after" || { echo "configuration not restored"; return 1; }
		sed 's/^/    /' "$work/$dname.confs.after"
		[ ! -e "$root/var/lib/ane-dt/dtbs" ] || { echo "merged trees left behind"; return 1; }
		update_m1n1 "$root" && judge "$root" stock
	}
	step "$dname: ane-dt remove restores every configuration file exactly; update-m1n1 packs the stock trees" removed
}

step "inputs: distribution files match SHA256SUMS, ane-dt, overlays, board trees" strict inputs
for d in alarm omarchy fedora upstream; do
	distro "$d"
done
summary "distros summary"
