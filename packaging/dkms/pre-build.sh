#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# PRE_BUILD of the ane DKMS package (runs in the DKMS build directory).
#
#   pre-build.sh KERNEL_SOURCE_DIR [RUSTUP_TOOLCHAIN]
#
# 1. `make kdir-check`: the tree is configured, has Rust, DRM built in, the
#    accel core and the shmem GEM helper, and ships the kernel's Rust
#    metadata (rust/*.rmeta, the macros library) and Module.symvers.
# 2. The rustc that will compile the module is the one that built the kernel:
#    rustc refuses crate metadata from any other build (error E0514), and
#    Kbuild does not check it. RUSTUP_TOOLCHAIN is the toolchain dkms.conf
#    selected from the kernel's CONFIG_RUSTC_VERSION_TEXT (empty: the rustc
#    in PATH); the build command gets the same one.
# Each failure says what to install.
#
# dkms >= 3.1.5 writes PRE_BUILD's output to make.log and shows the user only
# "Consult .../make.log". So every "ane:" line also goes to the stderr of
# the dkms process itself (the nearest ancestor whose stderr is not this
# log: the terminal, or the pacman hook's pipe), unless ANE_DKMS_QUIET=1.
set -eu
kdir=${1:?usage: pre-build.sh KERNEL_SOURCE_DIR [RUSTUP_TOOLCHAIN]}
toolchain=${2:-}
cd "$(dirname "$0")/../.."

# The stderr of the dkms process, when ours is a file (make.log): found by
# walking up the parents until one's fd 2 is another file.
term=
mine=$(readlink /proc/$$/fd/2 2>/dev/null || true)
if [ "${ANE_DKMS_QUIET:-0}" != 1 ] && [ -f "$mine" ]; then
	pid=$PPID
	while [ "$pid" -gt 1 ] 2>/dev/null; do
		theirs=$(readlink "/proc/$pid/fd/2" 2>/dev/null || true)
		if [ -n "$theirs" ] && [ "$theirs" != "$mine" ]; then
			[ "$theirs" = /dev/null ] || term=/proc/$pid/fd/2
			break
		fi
		pid=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null || echo 0)
	done
fi
# tell LINE...: to make.log and, through dkms, to the user (from a new
# line: dkms's "Running the pre_build script..." has none).
told=0
tell() {
	for l in "$@"; do
		printf '%s\n' "$l" >&2
		if [ -n "$term" ]; then
			[ "$told" = 1 ] || printf '\n' >>"$term" 2>/dev/null || true
			told=1
			printf '%s\n' "$l" >>"$term" 2>/dev/null || true
		fi
	done
}

if ! make -s kdir-check KDIR="$kdir" 2>kdir-check.err; then
	while IFS= read -r l; do tell "$l"; done <kdir-check.err
	rm -f kdir-check.err
	exit 1
fi
rm -f kdir-check.err

for f in "$kdir/rust/libcore.rmeta" "$kdir/rust/libkernel.rmeta"; do
	[ -f "$f" ] && continue
	tell "ane: $kdir lacks ${f#"$kdir"/}: the kernel headers must carry the kernel's Rust metadata (rust/*.rmeta, rust/*.so)." \
		"ane:   Arch Linux ARM / Omarchy (linux-asahi-headers, linux-aurora-headers ship no rust/):" \
		"ane:     install ane-rust-meta; its pacman hook rebuilds it for every kernel, or run: ane-rust-meta --kdir $kdir --source <this kernel's source>" \
		"ane:   Fedora Asahi Remix: install kernel-16k-devel for this exact kernel (it ships rust/)." \
		"ane:   (see /usr/share/doc/ane/install.md, 'Kernel headers')."
	exit 1
done

# The kernel records the exact `rustc --version` it was built with.
want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\(.*\)"$/\1/p' "$kdir/.config" 2>/dev/null)
[ -n "$want" ] || want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT=//p' "$kdir/include/config/auto.conf")
rustc=${RUSTC:-rustc}
if [ -n "$toolchain" ]; then
	RUSTUP_TOOLCHAIN=$toolchain
	export RUSTUP_TOOLCHAIN
	# Never let the check download a toolchain (rustup < 1.28 would).
	RUSTUP_AUTO_INSTALL=0
	export RUSTUP_AUTO_INSTALL
fi
have=$("$rustc" --version 2>/dev/null || true)
if [ -z "$want" ]; then
	tell "ane: $kdir does not record the rustc that built it (no CONFIG_RUSTC_VERSION_TEXT)."
	exit 1
fi
if [ "$have" != "$want" ]; then
	ver=$(echo "$want" | sed -n 's/^rustc \([0-9][0-9.]*\).*/\1/p')
	via="\"$rustc\""
	[ -z "$toolchain" ] || via="\"$rustc\" of rustup toolchain $toolchain (RUSTUP_TOOLCHAIN=$toolchain)"
	tell "ane: this kernel was built with \"$want\","
	if [ -n "$have" ]; then
		tell "ane: but $via here is \"$have\"."
	elif [ -n "$toolchain" ]; then
		tell "ane: but rustup has no toolchain $toolchain installed for the user DKMS runs as."
	else
		tell "ane: but no \"$rustc\" is installed for the user DKMS runs as."
	fi
	tell "ane: A Rust module must be compiled by the very rustc that built its kernel (rustc refuses other metadata)."
	# A distribution's own rustc build says so in its version text, e.g.
	# "rustc 1.93.1 (01f6ddf75 2026-02-11) (Fedora 1.93.1-1.fc43)": only that
	# package build matches; a rustup toolchain of the same version does not.
	distro=$(echo "$want" | sed -n 's/.*) (\([A-Za-z][A-Za-z ]*\) \([^)]*\))$/\1/p')
	build=$(echo "$want" | sed -n 's/.*) ([A-Za-z][A-Za-z ]* \([^)]*\))$/\1/p')
	case "$want" in *"(built from a source tarball)") distro=source ;; esac
	case "$distro" in
	source)
		tell "ane: Install your distribution's rustc package of exactly version $ver (it was built from a" \
			"ane: source tarball, as Debian's is), and make it the rustc in PATH for root."
		;;
	Fedora)
		tell "ane: Install exactly Fedora's rust package $build (the kernel's own build), e.g.:" \
			"ane:   dnf install rust-$build rust-std-static-$build" \
			"ane:   (if your release no longer carries it, take that build from the Fedora build system) and" \
			"ane:   make it the rustc in PATH for root; a rustup toolchain cannot match a Fedora-built kernel."
		;;
	"")
		tell "ane: Install rustc $ver with rustup, as the user running dkms (usually root):" \
			"ane:   rustup toolchain install $ver --profile minimal" \
			"ane:   (no 'rustup default' needed: the ane build selects toolchain $ver for this kernel by itself;" \
			"ane:    Arch Linux ARM and Omarchy kernels are built with rustup's $ver.)"
		command -v rustup >/dev/null 2>&1 ||
			tell "ane:   rustup is not installed: on Arch, 'pacman -S rustup' (it replaces the rust package)."
		;;
	*)
		tell "ane: Install exactly $distro's rustc build $build, the one that built this kernel."
		;;
	esac
	tell "ane: then run: dkms autoinstall -k $(cat "$kdir/include/config/kernel.release" 2>/dev/null || echo RELEASE)"
	exit 1
fi
echo "ane: kernel headers at $kdir are usable; rustc matches ($have${toolchain:+, rustup toolchain $toolchain})"
