#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# PRE_BUILD of the ane DKMS package (runs in the DKMS build directory).
#
#   pre-build.sh KERNEL_SOURCE_DIR
#
# 1. `make kdir-check`: the tree is configured, has Rust, DRM built in, the
#    accel core and the shmem GEM helper, and ships the kernel's Rust
#    metadata (rust/*.rmeta, the macros library) and Module.symvers.
# 2. The rustc that will compile the module is the one that built the kernel:
#    rustc refuses crate metadata from any other build (error E0514), and
#    Kbuild does not check it.
# Each failure says what to install.
set -eu
kdir=${1:?usage: pre-build.sh KERNEL_SOURCE_DIR}
cd "$(dirname "$0")/../.."

make -s kdir-check KDIR="$kdir"

for f in "$kdir/rust/libcore.rmeta" "$kdir/rust/libkernel.rmeta"; do
	[ -f "$f" ] && continue
	echo "ane: $kdir lacks ${f#"$kdir"/}: the kernel headers package must ship rust/*.rmeta and rust/*.so" >&2
	echo "ane:   (see /usr/share/doc/ane/install.md, 'Kernel headers')." >&2
	exit 1
done

# The kernel records the exact `rustc --version` it was built with.
want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\(.*\)"$/\1/p' "$kdir/.config" 2>/dev/null)
[ -n "$want" ] || want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT=//p' "$kdir/include/config/auto.conf")
rustc=${RUSTC:-rustc}
have=$("$rustc" --version 2>/dev/null || true)
if [ -z "$want" ]; then
	echo "ane: $kdir does not record the rustc that built it (no CONFIG_RUSTC_VERSION_TEXT)." >&2
	exit 1
fi
if [ "$have" != "$want" ]; then
	ver=$(echo "$want" | sed -n 's/^rustc \([0-9][0-9.]*\).*/\1/p')
	echo "ane: this kernel was built with \"$want\"," >&2
	if [ -n "$have" ]; then
		echo "ane: but \"$rustc\" here is \"$have\"." >&2
	else
		echo "ane: but no \"$rustc\" is installed for the user DKMS runs as." >&2
	fi
	echo "ane: A Rust module must be compiled by the same rustc as its kernel. Install rustc $ver:" >&2
	echo "ane:   with rustup (as the user running dkms, usually root): rustup toolchain install $ver && rustup default $ver" >&2
	echo "ane:   or your distribution's rust package of exactly that version (see /usr/share/doc/ane/install.md)," >&2
	echo "ane: then run: dkms autoinstall -k \$(uname -r)" >&2
	exit 1
fi
echo "ane: kernel headers at $kdir are usable; rustc matches ($have)"
