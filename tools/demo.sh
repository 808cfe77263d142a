#!/usr/bin/env bash
# `make demo`: set everything up from nothing and run the main job.
#
# Builds (or reuses) the chroot, the test kernel and the module, boots QEMU
# with the simulated T8103 and runs the real job through the real driver
# (tools/qemu/tests/demo.sh: info, doctor, the parity cells, the MLP, a
# compiled program through ane-probe and from Python with ane_rs), and
# prints the guest's console from boot to power-off. ANE_DEMO_ARCH=arm64
# runs the arm64 kernel with ANE device-tree nodes instead, so the driver
# binds one device per SoC.
source "$(dirname "$0")/lib.sh"
cd "$ANE_TOP"

arch=${ANE_DEMO_ARCH:-x86_64}
kdir=$("$ANE_TOP/tools/kernel/build.sh" "$arch") || die "kernel build failed"
g=$(guest_dir "$arch")
in_chroot tools/qemu/build-guest.sh "$arch" "$kdir" "$g" >/dev/null
dtb= tests=demo
if [ "$arch" = arm64 ]; then
	in_chroot tools/qemu/mkdtb.sh "$g/ane-virt.dtb"
	dtb=$g/ane-virt.dtb tests=bind
fi
rc=0
in_chroot tools/qemu/boot.sh "$arch" "$kdir" "$g/initramfs.cpio.gz" "$tests" "$g/demo.log" $dtb || rc=$?
echo
echo "--- guest console (from /init on) ---"
sed -n '/^ANE-BOOTED/,$p' "$ANE_CACHE/${g#/cache/}/demo.log"
exit $rc
