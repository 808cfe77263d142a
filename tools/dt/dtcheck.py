#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Structural checks of a board DTB after an ANE overlay was merged into it.

    dtcheck.py BASE.dtb OVERLAY.dtbo MERGED.dtb ANE_COMPATIBLE

Prints one line per check ("ok   ..." or "FAIL ...") and exits non-zero if
any check failed. The checks:

- the board's root compatible (and model) are unchanged;
- every node of the base is still there, and every property of the base is
  unchanged, except those the overlay sets on purpose on an existing node
  (which must then hold exactly the overlay's value) and a phandle added to
  a node that had none (which must be new and unique);
- every node the overlay adds is present, and nothing else was added;
- phandles are unique; every phandle reference (interrupt-parent, interrupts
  against their controller, power-domains, iommus, mboxes, resets, clocks,
  memory-region, iommu-addresses, pinctrl, gpios, ...) resolves, with the
  provider's cell count; the base's unresolved references (if any) are the
  only ones allowed to remain, and the added nodes have none and refer only
  to enabled nodes;
- the ANE node exists once, with ANE_COMPATIBLE, and is enabled;
- no overlay bookkeeping (__symbols__, __fixups__, __local_fixups__, the
  ane-base-symbols table) is left in the result.
"""

import sys

import libfdt

NOTFOUND = (libfdt.FDT_ERR_NOTFOUND,)
BOOKKEEPING = ("/__symbols__", "/__fixups__", "/__local_fixups__", "/ane-base-symbols")

# property -> provider's cell-count property (None: a plain list of phandles)
CELL_PROPS = {
    "power-domains": "#power-domain-cells",
    "iommus": "#iommu-cells",
    "mboxes": "#mbox-cells",
    "resets": "#reset-cells",
    "clocks": "#clock-cells",
    "assigned-clocks": "#clock-cells",
    "assigned-clock-parents": "#clock-cells",
    "phys": "#phy-cells",
    "dmas": "#dma-cells",
    "pwms": "#pwm-cells",
    "interrupts-extended": "#interrupt-cells",
    "performance-domains": "#performance-domain-cells",
    "nvmem-cells": None,
    "memory-region": None,
    "remote-endpoint": None,
    "cpus": None,
    "cpu": None,
    "interrupt-parent": None,
}


def load(path):
    """Returns {node path: {property: bytes}}, in tree order."""
    fdt = libfdt.Fdt(open(path, "rb").read())
    nodes = {}

    def walk(off, path):
        props = {}
        p = fdt.first_property_offset(off, NOTFOUND)
        while p >= 0:
            prop = fdt.get_property_by_offset(p)
            props[prop.name] = bytes(prop)
            p = fdt.next_property_offset(p, NOTFOUND)
        nodes[path] = props
        sub = fdt.first_subnode(off, NOTFOUND)
        while sub >= 0:
            name = fdt.get_name(sub)
            walk(sub, (path.rstrip("/") + "/" + name) if path != "/" else "/" + name)
            sub = fdt.next_subnode(sub, NOTFOUND)

    walk(0, "/")
    return nodes


def cells(b):
    return [int.from_bytes(b[i:i + 4], "big") for i in range(0, len(b) - len(b) % 4, 4)]


def parent_of(path):
    return "/" if path.count("/") == 1 else path.rsplit("/", 1)[0]


def enabled(props):
    st = props.get("status", b"okay\0").rstrip(b"\0")
    return st in (b"okay", b"ok")


def phandles(nodes):
    """(map phandle -> path, list of duplicate phandles)."""
    table, dups = {}, []
    for path, props in nodes.items():
        for key in ("phandle", "linux,phandle"):
            if key in props:
                h = cells(props[key])[0]
                if h in table and table[h] != path:
                    dups.append((h, table[h], path))
                table[h] = path
    return table, dups


def u32(props, name, default=None):
    return cells(props[name])[0] if name in props else default


def references(nodes):
    """Yields (node, property, target path or None, problem or None) for
    every phandle reference that can be decoded generically."""
    table, _ = phandles(nodes)

    def target(h):
        return table.get(h)

    for path, props in nodes.items():
        if path.startswith(BOOKKEEPING):
            continue
        for name, value in props.items():
            if name in CELL_PROPS or name.startswith("pinctrl-") and name[8:].isdigit() \
                    or name.endswith("-gpios") or name in ("gpios", "gpio") or name.endswith("-gpio"):
                cellprop = CELL_PROPS.get(name, "#gpio-cells" if "gpio" in name else None)
                c = cells(value)
                i = 0
                while i < len(c):
                    h = c[i]
                    if h == 0 and name != "interrupt-parent":
                        # An empty entry (no provider), as the kernel's
                        # of_parse_phandle_with_args() reads a 0 phandle.
                        i += 1
                        continue
                    t = target(h)
                    if t is None:
                        yield path, name, None, "phandle 0x%x does not resolve" % h
                        break
                    n = 0
                    if cellprop:
                        n = u32(nodes[t], cellprop)
                        if n is None:
                            yield path, name, t, "target has no %s" % cellprop
                            break
                    if i + 1 + n > len(c):
                        yield path, name, t, "too few cells for the provider's %s" % cellprop
                        break
                    yield path, name, t, None
                    i += 1 + n
            elif name == "iommu-addresses":
                par = nodes[parent_of(path)]
                step = 1 + u32(par, "#address-cells", 2) + u32(par, "#size-cells", 1)
                c = cells(value)
                if len(c) % step:
                    yield path, name, None, "length is not a multiple of %d cells" % step
                    continue
                for i in range(0, len(c), step):
                    t = target(c[i])
                    yield path, name, t, None if t else "phandle 0x%x does not resolve" % c[i]
        if "interrupts" in props:
            # The interrupt parent: the nearest interrupt-parent up the tree.
            p, ip = path, None
            while True:
                if "interrupt-parent" in nodes[p]:
                    ip = target(cells(nodes[p]["interrupt-parent"])[0])
                    break
                if p == "/":
                    break
                p = parent_of(p)
            if ip is None:
                yield path, "interrupts", None, "no interrupt parent resolves"
                continue
            ic = nodes[ip]
            n = u32(ic, "#interrupt-cells")
            if "interrupt-controller" not in ic or not n:
                yield path, "interrupts", ip, "interrupt parent is not an interrupt controller"
            elif len(cells(props["interrupts"])) % n:
                yield path, "interrupts", ip, "length is not a multiple of #interrupt-cells=%d" % n
            else:
                yield path, "interrupts", ip, None


def overlay_edits(ovl):
    """From the compiled overlay: ({target path: {prop: value}} for
    properties set on the targets themselves, [added node paths with their
    properties]). Subnodes are treated as added nodes; whether they were
    already in the base is decided by the caller."""
    direct, added = {}, {}
    for path, props in ovl.items():
        parts = path.split("/")
        if len(parts) < 3 or not parts[1].startswith("fragment@") or parts[2] != "__overlay__":
            continue
        frag = ovl["/" + parts[1]]
        if "target-path" not in frag:
            raise SystemExit("overlay fragment %s has no target-path (targets must be paths)" % parts[1])
        tgt = frag["target-path"].rstrip(b"\0").decode()
        rel = "/".join(parts[3:])
        dest = tgt if not rel else (tgt.rstrip("/") + "/" + rel)
        if rel:
            added[dest] = props
        else:
            direct[dest] = props
    return direct, added


def main():
    base_p, ovl_p, merged_p, compat = sys.argv[1:5]
    base, ovl, merged = load(base_p), load(ovl_p), load(merged_p)
    results = []

    def check(ok, what):
        results.append(ok)
        print(("ok   " if ok else "FAIL ") + what)

    direct, added = overlay_edits(ovl)

    # Root compatible and model.
    for key in ("compatible", "model"):
        check(base["/"].get(key) == merged["/"].get(key),
              "board %s unchanged: %s" % (key, base["/"].get(key, b"").replace(b"\0", b" ").decode().strip()))

    # Every base node kept; base properties unchanged unless set on purpose.
    missing = [p for p in base if p not in merged]
    check(not missing, "all %d base nodes kept%s" % (len(base), "; missing: %s" % missing[:5] if missing else ""))
    base_max = max(phandles(base)[0] or [0])
    changed, added_phandles = [], []
    for path, props in base.items():
        if path not in merged:
            continue
        m = merged[path]
        for name, value in props.items():
            if m.get(name) == value:
                continue
            want = direct.get(path, {}).get(name, added.get(path, {}).get(name))
            if want is not None and m.get(name) == want:
                print("     intended change: %s:%s" % (path, name))
                continue
            changed.append("%s:%s" % (path, name))
        for name in m:
            if name in props:
                continue
            if name == "phandle" and cells(m[name])[0] > base_max:
                added_phandles.append(path)
            elif name not in direct.get(path, {}) and name not in added.get(path, {}):
                changed.append("%s:+%s" % (path, name))
    check(not changed, "no base property changed or added unintentionally (phandles included)%s"
          % ("; offending: %s" % changed[:8] if changed else ""))
    for p in added_phandles:
        print("     fresh phandle for referenced base node %s" % p)

    # Added nodes: exactly those of the overlay.
    new = [p for p in merged if p not in base]
    expect = [p for p in added if p not in base]
    check(sorted(new) == sorted(expect),
          "added nodes are exactly the overlay's %d: %s" % (len(expect), ", ".join(sorted(expect))))
    extra = [p for p in new if p not in expect]
    if extra:
        print("     unexpected: %s" % extra)

    # Bookkeeping gone.
    left = [p for p in merged if p.startswith(BOOKKEEPING)]
    check(not left, "no overlay bookkeeping left (__symbols__, __fixups__, __local_fixups__, ane-base-symbols)")

    # Phandles unique.
    _, dups = phandles(merged)
    check(not dups, "phandles unique (%d)%s" % (len(phandles(merged)[0]), "; duplicates: %s" % dups if dups else ""))

    # References.
    base_bad = {(p, n) for p, n, t, err in references(base) if err}
    n_refs, bad_new, bad_from_added, disabled = 0, [], [], []
    for p, n, t, err in references(merged):
        n_refs += 1
        if err and (p, n) not in base_bad:
            bad_new.append("%s:%s: %s" % (p, n, err))
        if p in new or p in direct:
            if err:
                bad_from_added.append("%s:%s: %s" % (p, n, err))
            elif t is not None and not enabled(merged[t]):
                disabled.append("%s:%s -> %s" % (p, n, t))
    check(not bad_new, "every phandle reference resolves (%d checked; %d unresolved in the stock tree)%s"
          % (n_refs, len(base_bad), "; " + "; ".join(bad_new[:6]) if bad_new else ""))
    check(not bad_from_added and not disabled,
          "references from the added nodes resolve to enabled nodes%s"
          % ("; " + "; ".join((bad_from_added + disabled)[:6]) if bad_from_added or disabled else ""))
    for p in new:
        check(enabled(merged[p]), "added node enabled: %s" % p)

    # The ANE node.
    anes = [p for p, props in merged.items()
            if compat.encode() in props.get("compatible", b"").split(b"\0")]
    check(len(anes) == 1 and enabled(merged[anes[0]]),
          "one enabled %s node: %s" % (compat, ", ".join(anes) or "none"))

    failed = results.count(False)
    print("dtcheck: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
