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
	echo "ane: $kdir lacks ${f#"$kdir"/}: the kernel headers must carry the kernel's Rust metadata (rust/*.rmeta, rust/*.so)." >&2
	echo "ane:   Arch Linux ARM / Omarchy (linux-asahi-headers, linux-aurora-headers ship no rust/):" >&2
	echo "ane:     install ane-rust-meta and run: ane-rust-meta --source <this kernel's source tree>" >&2
	echo "ane:   Fedora Asahi Remix: install kernel-16k-devel for this exact kernel (it ships rust/)." >&2
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
	echo "ane: A Rust module must be compiled by the very rustc that built its kernel (rustc refuses other metadata)." >&2
	# A distribution's own rustc build says so in its version text, e.g.
	# "rustc 1.93.1 (01f6ddf75 2026-02-11) (Fedora 1.93.1-1.fc43)": only that
	# package build matches; a rustup toolchain of the same version does not.
	distro=$(echo "$want" | sed -n 's/.*) (\([A-Za-z][A-Za-z ]*\) \([^)]*\))$/\1/p')
	build=$(echo "$want" | sed -n 's/.*) ([A-Za-z][A-Za-z ]* \([^)]*\))$/\1/p')
	case "$want" in *"(built from a source tarball)") distro=source ;; esac
	case "$distro" in
	source)
		echo "ane: Install your distribution's rustc package of exactly version $ver (it was built from a" >&2
		echo "ane: source tarball, as Debian's is), and make it the rustc in PATH for root." >&2
		;;
	Fedora)
		echo "ane: Install exactly Fedora's rust package $build (the kernel's own build), e.g.:" >&2
		echo "ane:   dnf install rust-$build rust-std-static-$build" >&2
		echo "ane:   (if your release no longer carries it, take that build from the Fedora build system) and" >&2
		echo "ane:   make it the rustc in PATH for root; a rustup toolchain cannot match a Fedora-built kernel." >&2
		;;
	"")
		echo "ane: Install rustc $ver with rustup (as the user running dkms, usually root):" >&2
		echo "ane:   rustup toolchain install $ver && rustup default $ver" >&2
		echo "ane:   (Arch Linux ARM and Omarchy kernels are built with rustup's $ver.)" >&2
		;;
	*)
		echo "ane: Install exactly $distro's rustc build $build, the one that built this kernel." >&2
		;;
	esac
	echo "ane: then run: dkms autoinstall -k \$(uname -r)" >&2
	exit 1
fi
echo "ane: kernel headers at $kdir are usable; rustc matches ($have)"
