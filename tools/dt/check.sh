#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Device-tree checks of the ANE overlays (dts/*.dts) and binding
# (dts/bindings/apple,t8103-ane.yaml), against the upstream 7.3 board trees.
#
#   tools/dt/check.sh            (from the repository root, on the host)
#
# Runs itself inside the build chroot. For each SoC it builds upstream board
# DTBs from the kernel source (in the cached arm64 build tree), merges the
# overlay with tools/dt/merge.sh (plain fdtoverlay, as ane-dt and
# omarchy-mac-boot apply it), and proves:
#   - the overlay compiles without warnings beyond the ones inherent to
#     overlays (dtc cannot know a target's #address-cells);
#   - the merged tree survives a dtc round trip (dtb -> dts -> dtb -> dts
#     is identical) and dtc reports nothing new compared with the stock tree;
#   - tools/dt/dtcheck.py: compatible and every stock node and property kept,
#     only the overlay's nodes added, every phandle reference resolves;
#   - dt-schema: the merged tree has no finding the stock tree lacks and
#     every added node matches a schema (ours for the ANE, upstream ones for
#     the DARTs, PMGR power states, mailbox and reserved memory);
# the same for the live device tree of a real M2 Max (ANE_SHARED's
# targets/fdt-live-t6021-j414c.dts) with the T6021 overlay, plus
# tools/dt/regcheck.py: no reg range or interrupt of an added node collides
# with a node the tree already has (one listed, deliberate exception);
# tools/dt/recordcheck.py on every T602x merge: dart0 in pmp@2c8, dart1/2 in
# ane_cpu, the mailbox's two lines 884/1833 exactly as the record has them;
# plus the binding itself (yamllint with the kernel's rules, dt-doc-validate
# against the meta-schema, its examples validated) and negative cases that
# show the checks do fail (a broken merge, a wrong board, a bad node).
#
# dt-schema: a pinned release (tools/dt/dtschema-requirements.txt) in a venv
# under /cache, keyed by that file and the Python version; the processed
# schema (all 7.3 bindings + ours) under /cache, keyed by dt-schema, the
# kernel source and our binding. Ends with "N passed, N failed".
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	kdir=$("$top/tools/kernel/build.sh" arm64 7.3)
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 ANE_KDIR="$kdir" tools/dt/check.sh "$@"
fi

cd /src
kdir=$ANE_KDIR
# The build tree's Makefile includes the source tree's.
ksrc=$(sed -n 's#^include \(.*\)/Makefile$#\1#p' "$kdir/Makefile")
[ -f "$ksrc/Makefile" ] || { echo "cannot find the kernel source of $kdir" >&2; exit 1; }
bindings=$ksrc/Documentation/devicetree/bindings

ANE_STEP_MARK=---
source "$(dirname "${BASH_SOURCE[0]}")/../steps.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- dt-schema (pinned, in a venv under /cache) -------------------------------
pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv_key=$( { echo "py $pyver"; cat tools/dt/dtschema-requirements.txt; } | sha256sum | cut -c1-16)
venv=/cache/dtschema-venv-$venv_key
setup_venv() {
	[ -f "$venv/.ane-ready" ] && { echo "[ane-cache] hit ${venv#/cache/}"; return 0; }
	echo "[ane-cache] build ${venv#/cache/}"
	exec {lockfd}>/cache/.lock-dtschema-venv
	flock "$lockfd"
	[ -f "$venv/.ane-ready" ] && return 0
	rm -rf "$venv"
	python3 -m venv --system-site-packages "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes \
		-r tools/dt/dtschema-requirements.txt
	touch "$venv/.ane-ready"
}
setup_venv || { echo "dt-schema venv setup failed" >&2; exit 1; }
export PATH=$venv/bin:$PATH
dtschema_ver=$(dt-validate -V)

# Our binding, staged where its $id says it lives (npu/apple,t8103-ane.yaml).
mkdir -p "$work/bindings/npu"
cp dts/bindings/apple,t8103-ane.yaml "$work/bindings/npu/"
schema_key=$( { echo "dtschema $dtschema_ver"; echo "$ksrc"; cat dts/bindings/apple,t8103-ane.yaml; } | sha256sum | cut -c1-16)
schema=/cache/dt-processed-schema/$schema_key.json
make_schema() {
	[ -s "$schema" ] && { echo "[ane-cache] hit ${schema#/cache/}"; return 0; }
	echo "[ane-cache] build ${schema#/cache/}"
	mkdir -p /cache/dt-processed-schema
	exec {lockfd2}>/cache/.lock-dt-processed-schema
	flock "$lockfd2"
	[ -s "$schema" ] && return 0
	echo "processing the 7.3 bindings + ours with dt-schema $dtschema_ver (about a minute)"
	dt-mk-schema -j "$bindings" "$work/bindings" >"$schema.tmp" 2>"$work/mk-schema.log" || {
		cat "$work/mk-schema.log" >&2
		rm -f "$schema.tmp"
		return 1
	}
	mv "$schema.tmp" "$schema"
}

# --- the binding ------------------------------------------------------------------
step "binding: yamllint (kernel rules)" yamllint -s -c "$bindings/.yamllint" dts/bindings/apple,t8103-ane.yaml
step "binding: dt-doc-validate against the meta-schema" dt-doc-validate -u "$bindings" "$work/bindings/npu/apple,t8103-ane.yaml"
step "dt-schema: processed schema of the 7.3 bindings + ours ($dtschema_ver)" make_schema
[ -s "$schema" ] || { summary "dt summary"; exit 1; }

# dt-validate exits 0 even when it reports problems: its output is the verdict.
validate() { dt-validate -m -s "$schema" "$@" 2>&1 | sed "s#^$work/##"; }
# Preprocess and compile a DTS as kbuild does.
cpp_dtc() {
	cpp -nostdinc -I "$ksrc/include" -I "$ksrc/scripts/dtc/include-prefixes" -undef -D__DTS__ \
		-x assembler-with-cpp "$1" -o "$2.pre" && dtc -q -I dts -O dtb -o "$2" "$2.pre"
}
binding_examples() {
	dt-extract-example dts/bindings/apple,t8103-ane.yaml >"$work/example.dts"
	cpp_dtc "$work/example.dts" "$work/example.dtb" || return 1
	out=$(validate "$work/example.dtb")
	[ -z "$out" ] || { echo "$out"; return 1; }
	echo "both examples validate"
}
step "binding: examples compile and validate" binding_examples

# The compatibles the overlays use are the driver's (drivers/accel/ane/hw/soc.rs).
compat_of() { sed -n 's/^[[:space:]]*compatible = "\(apple,t[0-9]*-ane\)";.*/\1/p' "dts/$1-ane.dts"; }
compatibles_known() {
	local soc c ok=0
	for soc in t8103 t6000 t6001 t6020 t6021; do
		c=$(compat_of "$soc")
		if grep -q "c\"$c\"" drivers/accel/ane/hw/soc.rs && grep -q -- "- $c\$" dts/bindings/apple,t8103-ane.yaml; then
			echo "$soc-ane.dts: $c (in soc.rs and the binding)"
		else
			echo "$soc-ane.dts: compatible '$c' missing from soc.rs or the binding" >&2
			ok=1
		fi
	done
	return $ok
}
step "overlays use the driver's compatibles" compatibles_known

# --- board DTBs from the 7.3 source -------------------------------------------
# At least one board per SoC: Mac mini / MacBook (M1), MacBook Pro + Mac Studio
# (M1 Max, M2 Max).
boards_t8103="t8103-j274 t8103-j293 t8103-j313"
boards_t6000="t6000-j314s t6000-j316s"
boards_t6001="t6001-j314c t6001-j316c t6001-j375c"
boards_t6020="t6020-j414s t6020-j416s t6020-j474s"
boards_t6021="t6021-j414c t6021-j416c t6021-j475c"
all_boards="$boards_t8103 $boards_t6000 $boards_t6001 $boards_t6020 $boards_t6021"
build_boards() {
	local targets=() b
	for b in $all_boards; do targets+=("apple/$b.dtb"); done
	# The tree's own compiler (GCC), or kbuild would reconfigure it.
	tools/kernel/with-toolchain.sh "$kdir" make -s -C "$ksrc" O="$kdir" ARCH=arm64 "${targets[@]}"
	for b in $all_boards; do
		cp "$kdir/arch/arm64/boot/dts/apple/$b.dtb" "$work/$b.dtb"
		echo "$b: $(fdtget -t s "$work/$b.dtb" / model)"
	done
}
step "board DTBs built from the 7.3 source ($(echo $all_boards | wc -w) boards)" build_boards

# --- overlays -------------------------------------------------------------------
# Compiled as the packages compile them (no -@: nothing needs the overlay's
# own symbols, and fdtoverlay would copy them into the result). Only the
# warnings every such overlay gets are silenced: dtc cannot know a target's
# #address-cells and #size-cells, and an existing node reached through an
# empty labelled fragment shows dtc none of its #power-domain-cells,
# #reset-cells or interrupt-controller (dtcheck.py checks every reference
# against the real provider after the merge). No __fixups__: every
# reference must resolve inside the overlay, as plain fdtoverlay needs.
compile_overlay() {
	local soc=$1 log
	log=$(dtc -I dts -O dtb -o "$work/$soc-ane.dtbo" \
		-Wno-reg_format -Wno-avoid_default_addr_size -Wno-unit_address_vs_reg \
		-Wno-power_domains_property -Wno-resets_property -Wno-interrupts_property \
		"dts/$soc-ane.dts" 2>&1) || { echo "$log"; return 1; }
	[ -z "$log" ] || { echo "$log"; return 1; }
	if fdtget -p "$work/$soc-ane.dtbo" /__fixups__ >/dev/null 2>&1; then
		echo "unresolved references: $(fdtget -p "$work/$soc-ane.dtbo" /__fixups__ | paste -sd' ')"
		return 1
	fi
	echo "$soc-ane.dtbo: $(stat -c %s "$work/$soc-ane.dtbo") bytes, no __fixups__, targets: $(for f in $(fdtget -l "$work/$soc-ane.dtbo" /); do fdtget -t s "$work/$soc-ane.dtbo" "/$f" target-path 2>/dev/null; done | sort -u | paste -sd' ')"
	echo "omarchy,skip-if-compatible: $(fdtget -t s "$work/$soc-ane.dtbo" / omarchy,skip-if-compatible)"
}

merge() { tools/dt/merge.sh "$work/$1.dtb" "$work/$2-ane.dtbo" "$work/$1-ane.dtb"; }

round_trip() {
	local m=$work/$1-ane.dtb
	dtc -I dtb -O dts -o "$m.1.dts" "$m" 2>"$m.warn" || return 1
	dtc -I dts -O dtb -o "$m.2.dtb" "$m.1.dts" 2>/dev/null || return 1
	dtc -I dtb -O dts -o "$m.2.dts" "$m.2.dtb" 2>/dev/null || return 1
	cmp -s "$m.1.dts" "$m.2.dts" || { diff "$m.1.dts" "$m.2.dts" | head; return 1; }
	dtc -I dtb -O dts -o /dev/null "$work/$1.dtb" 2>"$work/$1.warn"
	sed -i "s#^[^:]*: ##" "$m.warn" "$work/$1.warn"
	new=$(comm -13 <(sort "$work/$1.warn") <(sort "$m.warn"))
	[ -z "$new" ] || { echo "dtc warnings the stock tree does not have:"; echo "$new"; return 1; }
	echo "round trip identical ($(grep -c '{' "$m.1.dts") nodes); dtc warnings: $(wc -l <"$m.warn") (stock: $(wc -l <"$work/$1.warn"))"
}

# dt-validate's findings for one tree, cached under /cache keyed by the
# processed schema and the tree's own hash (validating a board tree takes
# about ten seconds; the stock trees never change between runs).
findings() {
	local f=$1 sum out
	sum=$(sha256sum "$f" | cut -c1-32)
	out=/cache/dt-validate/$schema_key/$sum
	if [ ! -f "$out" ]; then
		mkdir -p "/cache/dt-validate/$schema_key"
		dt-validate -m -s "$schema" "$f" 2>&1 | sed "s#^$f: ##" >"$out.tmp.$$"
		mv "$out.tmp.$$" "$out"
	fi
	cat "$out"
}
schema_check() {
	local b=$1 base merged new
	base=$(findings "$work/$b.dtb")
	merged=$(findings "$work/$b-ane.dtb")
	new=$(comm -13 <(sort <<<"$base") <(sort <<<"$merged"))
	# The one deliberate exception: on T602x the mailbox node is the
	# record's (two lines, its own compatible), which the 7.3 mailbox
	# binding does not describe. Exactly the listed findings, each as often
	# as listed, are allowed; any other finding still fails.
	case $b in t602*)
		local allow
		allow=$(grep -v '^#' tools/dt/t602x-mailbox.allow | sort)
		if [ -n "$(comm -13 <(sort <<<"$new") <(echo "$allow"))" ]; then
			echo "the allowed mailbox findings changed (tools/dt/t602x-mailbox.allow):"
			comm -13 <(sort <<<"$new") <(echo "$allow")
			return 1
		fi
		new=$(comm -23 <(sort <<<"$new") <(echo "$allow"))
		echo "the record's mailbox node: $(grep -c . <<<"$allow") dt-schema lines allowed (tools/dt/t602x-mailbox.allow)"
		;;
	esac
	if [ -n "$new" ]; then
		echo "dt-schema findings the stock tree does not have:"
		echo "$new"
		return 1
	fi
	echo "no new dt-schema findings (stock tree: $(grep -c . <<<"$base" || true) lines)"
}

dtcheck() { python3 tools/dt/dtcheck.py "$work/$1.dtb" "$work/$2-ane.dtbo" "$work/$1-ane.dtb" "$3"; }

for soc in t8103 t6000 t6001 t6020 t6021; do
	compat=$(compat_of "$soc")
	step "$soc: overlay compiles, no warnings, no __fixups__" compile_overlay "$soc"
	boards=boards_$soc
	for b in ${!boards}; do
		step "$b + $soc-ane: fdtoverlay merge (targets by path)" merge "$b" "$soc"
		[ -f "$work/$b-ane.dtb" ] || continue
		step "$b + $soc-ane: dtc round trip, no new dtc warnings" round_trip "$b"
		step "$b + $soc-ane: stock nodes kept, phandles resolve ($compat)" dtcheck "$b" "$soc" "$compat"
		case $soc in t602?)
			step "$b + $soc-ane: dart0 in pmp@2c8, mailbox lines 884/1833 (the record)" \
				python3 tools/dt/recordcheck.py "$work/$b-ane.dtb" ;;
		esac
	done
done

for soc in t8103 t6000 t6001 t6020 t6021; do
	boards=boards_$soc
	for b in ${!boards}; do
		[ -f "$work/$b-ane.dtb" ] || continue
		step "$b + $soc-ane: dt-schema (ours + upstream bindings)" schema_check "$b"
	done
done

# --- the live tree of a real M2 Max ---------------------------------------------
# ../shared/targets (ANE_SHARED; /shared in the chroot): the device tree a
# j414c booted under the 7.1 Asahi kernel, decompiled (no __symbols__, and
# the ANE power states mostly without phandles). The T6021 overlay must
# apply to exactly this tree, as ane-dt and omarchy-mac-boot apply it.
live_src=/shared/targets/fdt-live-t6021-j414c.dts
live=t6021-live-j414c
live_dtb() {
	[ -f "$live_src" ] || { echo "$live_src missing (set ANE_SHARED to the shared directory)"; return 1; }
	dtc -q -I dts -O dtb -o "$work/$live.dtb" "$live_src" || return 1
	echo "$live: $(fdtget -t s "$work/$live.dtb" / model) ($(fdtget -t s "$work/$live.dtb" / compatible))"
}
step "live tree: $live_src compiles" live_dtb
if [ -f "$work/$live.dtb" ]; then
	step "$live + t6021-ane: fdtoverlay merge (targets by path)" merge "$live" t6021
fi
if [ -f "$work/$live-ane.dtb" ]; then
	step "$live + t6021-ane: dtc round trip, no new dtc warnings" round_trip "$live"
	step "$live + t6021-ane: stock nodes kept, ANE node present, phandles resolve" dtcheck "$live" t6021 apple,t6021-ane
	step "$live + t6021-ane: dart0 in pmp@2c8, mailbox lines 884/1833 (the record)" \
		python3 tools/dt/recordcheck.py "$work/$live-ane.dtb"
	# The one deliberate overlap: the read-only "pmgr" window lies inside
	# the PMGR syscon, which maps without claiming.
	regcheck() {
		python3 tools/dt/regcheck.py "$work/$live.dtb" "$work/$live-ane.dtb" \
			--allow /soc/npu@284000000:pmgr=/soc/power-management@28e080000
	}
	step "$live + t6021-ane: no reg or interrupt overlap with the nodes it has" regcheck
	step "$live + t6021-ane: dt-schema (ours + upstream bindings)" schema_check "$live"
fi

# --- the checks can fail ----------------------------------------------------------
expect_fail() {
	local what=$1
	shift
	if "$@" >"$work/neg.log" 2>&1; then
		echo "NOT detected: $what" >&2
		tail -n 5 "$work/neg.log" >&2
		return 1
	fi
	echo "detected: $what ($(grep -m1 -E 'FAIL|merge:|failed|expected|required' "$work/neg.log" || tail -n1 "$work/neg.log"))"
}
negatives() {
	local b=t8103-j274 m=$work/t8103-j274-ane.dtb rc=0
	cp "$m" "$work/n1.dtb"
	fdtput -r "$work/n1.dtb" /soc/power-management@23b700000/power-controller@470
	expect_fail "a stock node removed" python3 tools/dt/dtcheck.py "$work/$b.dtb" "$work/t8103-ane.dtbo" "$work/n1.dtb" apple,t8103-ane || rc=1
	cp "$m" "$work/n2.dtb"
	fdtput -t x "$work/n2.dtb" /soc/npu@26bc04000 power-domains 1234 5678
	expect_fail "a dangling power-domains phandle" python3 tools/dt/dtcheck.py "$work/$b.dtb" "$work/t8103-ane.dtbo" "$work/n2.dtb" apple,t8103-ane || rc=1
	cp "$m" "$work/n3.dtb"
	fdtput -t s "$work/n3.dtb" / compatible apple,j274 apple,t8112 apple,arm-platform
	expect_fail "the board compatible changed" python3 tools/dt/dtcheck.py "$work/$b.dtb" "$work/t8103-ane.dtbo" "$work/n3.dtb" apple,t8103-ane || rc=1
	expect_fail "the T8103 overlay onto an M1 Max board" tools/dt/merge.sh "$work/t6001-j314c.dtb" "$work/t8103-ane.dtbo" "$work/n4.dtb" || rc=1
	cp "$m" "$work/n5.dtb"
	fdtput -t s "$work/n5.dtb" /soc/npu@26bc04000 reg-names ctl
	fdtput -d "$work/n5.dtb" /soc/npu@26bc04000 interrupts
	out=$(validate "$work/n5.dtb")
	if grep -q "apple,t8103-ane.yaml" <<<"$out"; then
		echo "detected: a node that violates the binding ($(grep -c 'apple,t8103-ane.yaml' <<<"$out") findings)"
	else
		echo "NOT detected: a node that violates the binding" >&2
		rc=1
	fi
	return $rc
}
step "negative cases are caught (broken merge, wrong board, bad node)" negatives
live_neg() {
	[ -f "$work/$live-ane.dtb" ] || { echo "no merged live tree"; return 1; }
	expect_fail "an overlap the allow list does not name" \
		python3 tools/dt/regcheck.py "$work/$live.dtb" "$work/$live-ane.dtb"
	# The guesses this project's overlay once had: dart0 in ane_sys@260,
	# mailbox lines 881..884.
	local m=$work/$live-ane.dtb rc=0 sys
	sys=$(fdtget -t x "$work/$live.dtb" /soc/power-management@28e080000/power-controller@260 phandle)
	cp "$m" "$work/r1.dtb"
	fdtput -t x "$work/r1.dtb" /soc/iommu@285800000 power-domains "$sys"
	expect_fail "dart0 in ane_sys@260" python3 tools/dt/recordcheck.py "$work/r1.dtb" || rc=1
	cp "$m" "$work/r2.dtb"
	fdtput -t x "$work/r2.dtb" /soc/mailbox@285408000 interrupts 0 0 371 4 0 0 372 4 0 0 373 4 0 0 374 4
	expect_fail "mailbox lines 881..884" python3 tools/dt/recordcheck.py "$work/r2.dtb" || rc=1
	return $rc
}
step "live tree: the overlap and record checks can fail" live_neg

summary "dt summary"
