#!/bin/bash
# Inside the chroot: the QEMU arm64 `virt` device tree plus one ANE node per
# supported compatible, so the real OF matching and module aliases are
# exercised on arm64. The nodes carry no resources: the driver binds them
# without touching hardware (the simulator provides hardware behaviour).
#
#   mkdtb.sh OUT.dtb
#
# The QEMU options must match boot.sh's, as the dump reflects them.
set -euo pipefail
out=$1
tmp=$(mktemp -d)
qemu-system-aarch64 -M virt,dumpdtb="$tmp/virt.dtb" -cpu max -m 1024 -smp 2 -nographic >/dev/null 2>&1
dtc -q -I dtb -O dts -o "$tmp/virt.dts" "$tmp/virt.dtb"
cat >>"$tmp/virt.dts" <<'DTS'

/ {
	ane-t8103 { compatible = "apple,t8103-ane"; reg = <0x0 0x0c000000 0x0 0x24000>; reg-names = "engine"; };
	ane-t6000 { compatible = "apple,t6000-ane"; reg = <0x0 0x0c040000 0x0 0x24000>; reg-names = "engine"; };
	ane-t6020 { compatible = "apple,t6020-ane"; reg = <0x0 0x0c080000 0x0 0x24000>; reg-names = "engine"; };
	ane-t6021 { compatible = "apple,t6021-ane"; reg = <0x0 0x0c0c0000 0x0 0x24000>; reg-names = "engine"; };
};
DTS
dtc -q -I dts -O dtb -o "$out" "$tmp/virt.dts"
rm -rf "$tmp"
