#!/bin/bash
# Inside the chroot: build the test-flavour module and the userspace test
# binaries for ARCH against KDIR, and pack them into an initramfs. The
# x86_64 initramfs also carries Python with numpy, pytest and the ane_rs
# wheel (tools/qemu/guest-python.sh).
#
#   build-guest.sh ARCH KDIR OUTDIR
#
# The sources are copied to OUTDIR/src first, so the repository is never
# written to and both architectures can be built from one checkout.
set -euo pipefail
arch=$1 kdir=$2 out=$3

case "$arch" in
x86_64) karch=x86_64 triple=x86_64-unknown-linux-gnu busybox=/bin/busybox ;;
arm64) karch=arm64 triple=aarch64-unknown-linux-gnu busybox=/opt/arm64-busybox/usr/bin/busybox ;;
*) echo "build-guest: unknown arch $arch" >&2; exit 2 ;;
esac
# Kernel modules: the kernel's own compilers (GCC; the rustc that built it).
kmake() { /src/tools/kernel/with-toolchain.sh "$kdir" make ARCH="$karch" "$@"; }

mkdir -p "$out"
rsync -a --delete --exclude=.git --exclude=/userspace/target /src/ "$out/src/"

# The module, test flavour (Kbuild makes warnings errors).
kmake -C "$out/src" KDIR="$kdir" ANE_TEST=1 modules >"$out/module-build.log" 2>&1 || {
	cat "$out/module-build.log" >&2
	exit 1
}
cp "$out/src/ane.ko" "$out/ane.ko"
# The test power-domain provider for the arm64 device-tree runs.
if [ "$arch" = arm64 ]; then
	kmake -C "$kdir" M="$out/src/tools/qemu/testpd" modules \
		>"$out/testpd-build.log" 2>&1 || {
		cat "$out/testpd-build.log" >&2
		exit 1
	}
fi

# Userspace, static, with the chroot's own Rust toolchain (rustc 1.85: also
# proves the crates build with the minimum version). One target directory
# per architecture, shared by the guests of both kernel releases.
#
# Built from one copy of the sources per cargo cache (its src/, beside its
# target directory build/). ane-hw includes drivers/accel/ane/hw/ from
# outside its package; Cargo records those files by absolute path but
# shares a path package's build between checkouts of the same layout, so,
# built from each guest's own copy, a guest would judge ane-hw fresh by the
# files of whichever copy built it last.
cache=${ANE_CARGO_TARGET:-$out/target}
ws=$cache/src
export CARGO_TARGET_DIR=$cache/build
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export RUSTFLAGS="-C target-feature=+crt-static"
mkdir -p "$ws/drivers/accel/ane"
rsync -a --delete --exclude=/target --exclude=/ane-py/target /src/userspace/ "$ws/userspace/"
rsync -a --delete /src/drivers/accel/ane/hw/ "$ws/drivers/accel/ane/hw/"
cargo build --quiet --locked --release --manifest-path "$ws/userspace/Cargo.toml" \
	--target "$triple" --bins
bins=$CARGO_TARGET_DIR/$triple/release

# The initramfs.
krel=$(cat "$kdir/include/config/kernel.release")
root=$out/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,tests} "$root/lib/modules/$krel/extra"
cp "$busybox" "$root/bin/busybox"
cp /src/tools/qemu/init.sh "$root/init"
chmod +x "$root/init"
cp /src/tools/qemu/tests/*.sh "$root/tests/"
cp "$out/ane.ko" "$root/lib/modules/$krel/extra/"
if [ "$arch" = arm64 ]; then
	cp "$out/src/tools/qemu/testpd/ane_test_pd.ko" "$root/lib/modules/$krel/extra/"
fi
cp "$kdir/modules.builtin" "$kdir/modules.builtin.modinfo" "$kdir/modules.order" "$root/lib/modules/$krel/"
depmod -b "$root" "$krel"
cp "$bins/ane-probe" "$bins/ane-ioctl-tests" "$bins/ane-bench" "$root/bin/"
# Real compiled programs for the execution tests (test data from ../shared,
# never committed; the tests say SKIP when it is absent).
if [ -d /shared/fixtures ]; then
	mkdir -p "$root/fixtures"
	cp /shared/fixtures/*.hwx /shared/fixtures/*.anec "$root/fixtures/"
fi
# Python, for the ane_rs pytest suite and the demo (x86_64 only: the arm64
# guests run the same driver, and an arm64 interpreter cannot be installed
# beside the chroot's own).
if [ "$arch" = x86_64 ]; then
	/src/tools/qemu/guest-python.sh "$ws" "$root" "$cache/build-py" \
		>"$out/python-build.log" 2>&1 || {
		cat "$out/python-build.log" >&2
		exit 1
	}
fi
# The real udevadm and the udev rule, for the udev test (x86_64: the
# chroot's own udev, as for Python).
if [ "$arch" = x86_64 ]; then
	/src/tools/udev/guest-udevadm.sh "$root" >"$out/udevadm.log" 2>&1 || {
		cat "$out/udevadm.log" >&2
		exit 1
	}
fi
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out/initramfs.cpio.gz"
echo "$out/initramfs.cpio.gz"
