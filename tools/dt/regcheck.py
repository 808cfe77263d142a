#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Do the nodes an overlay added collide with the nodes the tree already had?

    regcheck.py BASE.dtb MERGED.dtb [--allow NODE:REGNAME=OTHER]...

Prints one line per check ("ok   ..." or "FAIL ...") and exits non-zero if
any check failed:

- every `reg` entry of every added node, translated to a CPU address through
  the parents' `ranges` (a parent without `ranges` is not memory-mapped: its
  children's entries are skipped), overlaps no `reg` entry of a node of the
  base tree, unless that overlap is listed with --allow (the entry named
  REGNAME of the added NODE may overlap the base node OTHER: a deliberate
  shared window, printed as such);
- no interrupt of an added node is an interrupt some base node already uses
  on the same controller (same controller phandle and the same cells apart
  from the trigger type).

Overlaps among the added nodes themselves are not checked (the T6021 engine
window contains the DARTs and the mailbox on purpose).
"""

import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from dtcheck import cells, load, parent_of, phandles, u32  # noqa: E402


def translate(nodes, path):
    """[(name or None, start, size)] of path's reg, as CPU addresses, or None
    when the node is not memory-mapped."""
    props = nodes[path]
    if "reg" not in props or path == "/":
        return None
    par = parent_of(path)
    ac = u32(nodes[par], "#address-cells", 2)
    sc = u32(nodes[par], "#size-cells", 1)
    c = cells(props["reg"])
    names = [n.decode() for n in props.get("reg-names", b"").split(b"\0")[:-1]]

    def num(words):
        v = 0
        for w in words:
            v = (v << 32) | w
        return v

    entries = []
    for i in range(0, len(c) - (ac + sc) + 1, ac + sc):
        entries.append([names[len(entries)] if len(entries) < len(names) else None,
                        num(c[i:i + ac]), num(c[i + ac:i + ac + sc])])
    # Up the tree: each bus maps its children's addresses with `ranges`.
    bus = par
    while bus != "/":
        bp = nodes[bus]
        if "ranges" not in bp:
            return None
        rng = cells(bp["ranges"])
        if rng:
            cac = u32(bp, "#address-cells", 2)
            csc = u32(bp, "#size-cells", 1)
            gp = nodes[parent_of(bus)]
            pac = u32(gp, "#address-cells", 2)
            step = cac + pac + csc
            maps = [(num(rng[i:i + cac]), num(rng[i + cac:i + cac + pac]),
                     num(rng[i + cac + pac:i + step])) for i in range(0, len(rng) - step + 1, step)]
            for e in entries:
                for child, parent, size in maps:
                    if child <= e[1] < child + size:
                        e[1] = e[1] - child + parent
                        break
                else:
                    return None
        bus = parent_of(bus)
    return [tuple(e) for e in entries]


def interrupts(nodes, path, table):
    """(controller path, cells without the last) of each interrupt of path."""
    props = nodes[path]
    if "interrupts" not in props:
        return []
    p, ip = path, None
    while True:
        if "interrupt-parent" in nodes[p]:
            ip = table.get(cells(nodes[p]["interrupt-parent"])[0])
            break
        if p == "/":
            break
        p = parent_of(p)
    if ip is None or ip not in nodes:
        return []
    n = u32(nodes[ip], "#interrupt-cells") or 1
    c = cells(props["interrupts"])
    return [(ip, tuple(c[i:i + n - 1] if n > 1 else c[i:i + 1])) for i in range(0, len(c) - n + 1, n)]


def main():
    args = sys.argv[1:]
    allow = set()
    while "--allow" in args:
        i = args.index("--allow")
        spec = args[i + 1]
        del args[i:i + 2]
        left, other = spec.split("=", 1)
        node, name = left.rsplit(":", 1)
        allow.add((node, name, other))
    base, merged = load(args[0]), load(args[1])
    added = [p for p in merged if p not in base]
    results = []

    def check(ok, what):
        results.append(ok)
        print(("ok   " if ok else "FAIL ") + what)

    base_regs = []
    for p in base:
        for name, start, size in translate(base, p) or []:
            if size:
                base_regs.append((p, start, size))
    bad, allowed, n = [], [], 0
    for p in added:
        for name, start, size in translate(merged, p) or []:
            n += 1
            for q, qs, qz in base_regs:
                if start < qs + qz and qs < start + size:
                    hit = "%s reg %s [%#x+%#x] overlaps %s [%#x+%#x]" % (
                        p, name or "#", start, size, q, qs, qz)
                    (allowed if (p, name, q) in allow else bad).append(hit)
    for a in allowed:
        print("     allowed (shared on purpose): " + a)
    # Not a failure, but worth seeing: a driver that claims (requests) both
    # of two overlapping regions gets -EBUSY for the second.
    mine = [(p, name, s, z) for p in added for name, s, z in translate(merged, p) or [] if z]
    for i, (p, name, s0, z0) in enumerate(mine):
        for q, qn, s1, z1 in mine[i + 1:]:
            if p != q and s0 < s1 + z1 and s1 < s0 + z0:
                print("     note: added %s reg %s contains/overlaps added %s reg %s"
                      % (p, name or "#", q, qn or "#"))
    check(not bad, "%d reg entries of %d added nodes overlap none of the %d base reg entries%s"
          % (n, len(added), len(base_regs), "; " + "; ".join(bad[:6]) if bad else ""))
    unused = [a for a in allow if not any(a[0] in x and a[2] in x for x in allowed)]
    check(not unused, "every allowed overlap exists (the list is not stale)%s"
          % ("; unused: %s" % unused if unused else ""))

    btab, _ = phandles(base)
    mtab, _ = phandles(merged)
    used = {}
    for p in base:
        for irq in interrupts(base, p, btab):
            used.setdefault(irq, p)
    clash = []
    for p in added:
        for ctl, spec in interrupts(merged, p, mtab):
            if (ctl, spec) in used:
                clash.append("%s interrupt %s on %s is %s's" % (p, list(spec), ctl, used[(ctl, spec)]))
    check(not clash, "the added nodes' interrupts are used by no base node (%d base interrupts)%s"
          % (len(used), "; " + "; ".join(clash[:6]) if clash else ""))
    failed = results.count(False)
    print("regcheck: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
