#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""The T602x overlay's power domains and mailbox interrupts, as the record has them.

    recordcheck.py MERGED.dtb

MERGED.dtb is a T6020/T6021 board tree (or the live j414c tree) with the
overlay merged. The values are the hardware record's ("T602x device tree" in
docs/hardware-record.md), which restates omarchy-ane's
packaging/dt/t602x-ane.dtsi, the description of the node its T6021 runs used:

- dart0 (iommu@285800000) is in the power domain at PMGR offset 0x2c8
  ("pmp", always-on in the live tree), never ane_sys@260, which the record
  says was never booted with the DART in it;
- dart1 and dart2 are in ane_cpu (0x2e0);
- the mailbox (mailbox@285408000) is "apple,t6021-ane-mailbox",
  "apple,asc-mailbox-v4" with exactly two AIC lines, 884 recv-not-empty and
  1833 send-empty (level high), and no others (no guessed lines);
- every phandle above resolves to the node at that path, and the PMGR node
  at 0x2c8 carries the label "pmp" wherever the tree labels its nodes.

Prints one line per check ("ok   ..." / "FAIL ...") and exits non-zero if
any failed.
"""

import struct
import sys

import libfdt

PMGR = "/soc/power-management@28e080000"
AIC = "/soc/interrupt-controller@28e100000"
DARTS = {
    "/soc/iommu@285800000": (PMGR + "/power-controller@2c8", "pmp"),
    "/soc/iommu@285810000": (PMGR + "/power-controller@2e0", "ane_cpu"),
    "/soc/iommu@285820000": (PMGR + "/power-controller@2e0", "ane_cpu"),
}
MBOX = "/soc/mailbox@285408000"
MBOX_COMPATIBLE = ["apple,t6021-ane-mailbox", "apple,asc-mailbox-v4"]
# <AIC_IRQ die number IRQ_TYPE_LEVEL_HIGH> per line, in interrupt-names order.
MBOX_IRQS = [(0, 0, 884, 4), (0, 0, 1833, 4)]
MBOX_NAMES = ["recv-not-empty", "send-empty"]
# Earlier guesses of this project's overlay; none may come back.
GONE = ["/soc/mbox@285408000"]

NOTFOUND = (libfdt.FDT_ERR_NOTFOUND,)


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    fdt = libfdt.Fdt(open(sys.argv[1], "rb").read())
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    def prop(path, name):
        try:
            off = fdt.path_offset(path)
        except libfdt.FdtException:
            return None
        p = fdt.getprop(off, name, NOTFOUND)
        return None if isinstance(p, int) else bytes(p)

    def words(b):
        return list(struct.unpack(">%dI" % (len(b) // 4), b)) if b else []

    def strings(b):
        return b.rstrip(b"\0").decode().split("\0") if b else []

    def by_phandle(ph):
        try:
            return fdt.get_path(fdt.node_offset_by_phandle(ph))
        except libfdt.FdtException:
            return None

    for dart, (want, label) in DARTS.items():
        pd = words(prop(dart, "power-domains"))
        got = by_phandle(pd[0]) if len(pd) == 1 else None
        check(got == want, f"{dart}: power-domains -> {got} (record: {want})")
        lab = strings(prop(want, "label"))
        if lab:
            check(lab == [label], f"{want}: label {lab} (record: {label})")
        if label == "pmp":
            # Always-on in the live tree; the 7.3 board trees do not mark
            # it, and the overlay does not change that (dart0 keeps it up).
            on = prop(want, "apple,always-on") is not None
            print(f"info {want}: apple,always-on {'set' if on else 'not set'}")

    check(prop(MBOX, "compatible") is not None, f"{MBOX} present")
    comp = strings(prop(MBOX, "compatible"))
    check(comp == MBOX_COMPATIBLE, f"{MBOX}: compatible {comp}")
    irq = words(prop(MBOX, "interrupts"))
    lines = [tuple(irq[i : i + 4]) for i in range(0, len(irq), 4)]
    check(lines == MBOX_IRQS, f"{MBOX}: interrupts {lines} (record: {MBOX_IRQS})")
    names = strings(prop(MBOX, "interrupt-names"))
    check(names == MBOX_NAMES, f"{MBOX}: interrupt-names {names} (record: {MBOX_NAMES})")
    parent = words(prop(MBOX, "interrupt-parent"))
    got = by_phandle(parent[0]) if len(parent) == 1 else None
    check(got == AIC, f"{MBOX}: interrupt-parent -> {got}")
    for g in GONE:
        check(prop(g, "compatible") is None, f"{g} absent")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
