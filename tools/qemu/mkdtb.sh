#!/bin/bash
# Inside the chroot: the QEMU arm64 `virt` device tree plus one ANE node per
# supported compatible, so the real OF matching and module aliases are
# exercised on arm64, with test power domains (tools/qemu/testpd) shaped like
# each SoC's PMGR chain, so the genpd attach and runtime PM run for real; and
# one node with the wrong number of domains, which the driver must refuse.
# The engine windows are never touched: the driver binds without touching
# hardware (the simulator provides hardware behaviour).
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
	/* Test power domains (tools/qemu/testpd), shaped like each SoC's PMGR
	 * chain; parents first. */
	ane-test-pmgr {
		compatible = "ane-test,pmgr";
		t8103_sys: t8103-ane-sys { #power-domain-cells = <0>; };
		t8103_sys_cpu: t8103-ane-sys-cpu { #power-domain-cells = <0>; power-domains = <&t8103_sys>; };
		t8103_base: t8103-ane-base { #power-domain-cells = <0>; power-domains = <&t8103_sys_cpu>; };
		t8103_set1: t8103-ane-set1 { #power-domain-cells = <0>; power-domains = <&t8103_base>; };
		t8103_set2: t8103-ane-set2 { #power-domain-cells = <0>; power-domains = <&t8103_base>; };
		t8103_set3: t8103-ane-set3 { #power-domain-cells = <0>; power-domains = <&t8103_base>; };
		t8103_set4: t8103-ane-set4 { #power-domain-cells = <0>; power-domains = <&t8103_base>; };
		t8103_set5: t8103-ane-set5 { #power-domain-cells = <0>; power-domains = <&t8103_base>; };
		t6000_sys: t6000-ane-sys { #power-domain-cells = <0>; };
		t6000_sys_cpu: t6000-ane-sys-cpu { #power-domain-cells = <0>; power-domains = <&t6000_sys>; };
		t6000_set0: t6000-ane-set0 { #power-domain-cells = <0>; power-domains = <&t6000_sys_cpu>; };
		t6000_base: t6000-ane-base { #power-domain-cells = <0>; power-domains = <&t6000_set0>; };
		t6000_set1: t6000-ane-set1 { #power-domain-cells = <0>; power-domains = <&t6000_base>; };
		t6000_set2: t6000-ane-set2 { #power-domain-cells = <0>; power-domains = <&t6000_base>; };
		t6000_set3: t6000-ane-set3 { #power-domain-cells = <0>; power-domains = <&t6000_base>; };
		t6000_set4: t6000-ane-set4 { #power-domain-cells = <0>; power-domains = <&t6000_base>; };
		t6020_sys: t6020-ane-sys { #power-domain-cells = <0>; };
		t6020_mpm: t6020-ane-sys-mpm { #power-domain-cells = <0>; power-domains = <&t6020_sys>; };
		t6020_td: t6020-ane-td { #power-domain-cells = <0>; power-domains = <&t6020_sys>; };
		t6020_cpu: t6020-ane-cpu { #power-domain-cells = <0>; power-domains = <&t6020_sys>; };
		t6020_base: t6020-ane-base { #power-domain-cells = <0>; power-domains = <&t6020_td>; };
		t6020_set1: t6020-ane-set1 { #power-domain-cells = <0>; power-domains = <&t6020_base>; };
		t6020_set2: t6020-ane-set2 { #power-domain-cells = <0>; power-domains = <&t6020_set1>; };
		t6020_set3: t6020-ane-set3 { #power-domain-cells = <0>; power-domains = <&t6020_set2>; };
		t6020_set4: t6020-ane-set4 { #power-domain-cells = <0>; power-domains = <&t6020_set3>; };
		t6021_sys: t6021-ane-sys { #power-domain-cells = <0>; };
		t6021_mpm: t6021-ane-sys-mpm { #power-domain-cells = <0>; power-domains = <&t6021_sys>; };
		t6021_td: t6021-ane-td { #power-domain-cells = <0>; power-domains = <&t6021_sys>; };
		t6021_cpu: t6021-ane-cpu { #power-domain-cells = <0>; power-domains = <&t6021_sys>; };
		t6021_base: t6021-ane-base { #power-domain-cells = <0>; power-domains = <&t6021_td>; };
		t6021_set1: t6021-ane-set1 { #power-domain-cells = <0>; power-domains = <&t6021_base>; };
		t6021_set2: t6021-ane-set2 { #power-domain-cells = <0>; power-domains = <&t6021_set1>; };
		t6021_set3: t6021-ane-set3 { #power-domain-cells = <0>; power-domains = <&t6021_set2>; };
		t6021_set4: t6021-ane-set4 { #power-domain-cells = <0>; power-domains = <&t6021_set3>; };
	};

	ane-t8103 { compatible = "apple,t8103-ane"; reg = <0x0 0x0c000000 0x0 0x24000>; reg-names = "engine";
		power-domains = <&t8103_set1>, <&t8103_set2>, <&t8103_set3>, <&t8103_set4>, <&t8103_set5>; };
	ane-t6000 { compatible = "apple,t6000-ane"; reg = <0x0 0x0c040000 0x0 0x24000>; reg-names = "engine";
		power-domains = <&t6000_set1>, <&t6000_set2>, <&t6000_set3>, <&t6000_set4>; };
	ane-t6020 { compatible = "apple,t6020-ane"; reg = <0x0 0x20000000 0x0 0x2000000>, <0x0 0x24000000 0x0 0x4034>; reg-names = "engine", "pmgr";
		power-domains = <&t6020_mpm>, <&t6020_td>, <&t6020_base>, <&t6020_set1>, <&t6020_set2>, <&t6020_set3>, <&t6020_set4>, <&t6020_cpu>; };
	ane-t6021 { compatible = "apple,t6021-ane"; reg = <0x0 0x22000000 0x0 0x2000000>, <0x0 0x24010000 0x0 0x4034>; reg-names = "engine", "pmgr";
		power-domains = <&t6021_mpm>, <&t6021_td>, <&t6021_base>, <&t6021_set1>, <&t6021_set2>, <&t6021_set3>, <&t6021_set4>, <&t6021_cpu>; };
	/* Without reg-names (AsahiLinux PR #584's shape): on H13 the first reg
	 * is taken as the engine window when it is where the record's engine
	 * is (bound), and refused elsewhere; PR #584's T602x node (no
	 * reg-names, one domain, the H13-style window that external-aborts on
	 * T6021) is refused before anything is mapped. Mapping touches no
	 * register, so the real addresses are safe here. */
	ane-u8103 { compatible = "apple,t8103-ane"; reg = <0x2 0x6bc04000 0x0 0x24000>;
		power-domains = <&t8103_set1>, <&t8103_set2>, <&t8103_set3>, <&t8103_set4>, <&t8103_set5>; };
	ane-uwrong { compatible = "apple,t8103-ane"; reg = <0x2 0x6a000000 0x0 0x24000>;
		power-domains = <&t8103_set1>, <&t8103_set2>, <&t8103_set3>, <&t8103_set4>, <&t8103_set5>; };
	ane-pr584 { compatible = "apple,t6020-ane"; reg = <0x2 0x85c04000 0x0 0x24000>;
		power-domains = <&t6020_set4>; };
	/* Wrong: two of T8103's five domains. The driver must refuse it. */
	ane-bad { compatible = "apple,t8103-ane"; reg = <0x0 0x0c100000 0x0 0x24000>; reg-names = "engine";
		power-domains = <&t8103_set1>, <&t8103_set2>; };
};
DTS
dtc -q -I dts -O dtb -o "$out" "$tmp/virt.dts"
rm -rf "$tmp"
