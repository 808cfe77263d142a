#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Test packaging/common/70-ane.rules against udev attribute walks.

   tools/udev/check.py [RULES]

Each tools/udev/walks/*.walk is a device and its parents in the format of
`udevadm info --attribute-walk`, with a first line `# expect: ...` naming the
assignments the rule must make for it (`none` for a device it must leave
alone). The matcher implements the udev rule semantics the rule relies on
(udev(7)):

  - KERNEL, SUBSYSTEM, DRIVER, ATTR{x} match the event's own device;
  - KERNELS, SUBSYSTEMS, DRIVERS, ATTRS{x} match the device or any parent,
    and all of them the same one;
  - a value is a shell glob (*, ?, [...]) and '|' separates alternatives;
    '==' must match, '!=' must not;
  - GROUP=, MODE=, OWNER= assign, TAG+= adds a tag.

The build chroot has no udevadm (no systemd), so the syntax is checked here
too: one rule, every key well formed and known. As a check that the test can
fail, the rule with its DRIVERS== narrowed to "ane" must stop matching the
ane-fw walk.

Prints one line per case and "N passed, N failed"; exits non-zero on a
failure.
"""

import fnmatch
import pathlib
import re
import sys

TOP = pathlib.Path(__file__).resolve().parents[2]
WALKS = pathlib.Path(__file__).resolve().parent / "walks"

KEY = re.compile(r'^(?P<key>[A-Z_]+)(?:\{(?P<attr>[^}]*)\})?(?P<op>==|!=|\+=|=)"(?P<value>[^"]*)"$')
DEVICE_KEYS = {"KERNEL", "SUBSYSTEM", "DRIVER", "ATTR"}
PARENT_KEYS = {"KERNELS", "SUBSYSTEMS", "DRIVERS", "ATTRS"}
ASSIGN_KEYS = {"GROUP", "MODE", "OWNER", "TAG"}


def parse_rules(text):
    """The rules of a rules file, each a list of (key, attr, op, value)."""
    rules = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keys = []
        for part in re.split(r",\s*", line):
            m = KEY.match(part)
            if not m:
                raise ValueError(f"line {n}: malformed key {part!r}")
            key, attr, op, value = m["key"], m["attr"], m["op"], m["value"]
            if key in DEVICE_KEYS | PARENT_KEYS:
                if op not in ("==", "!="):
                    raise ValueError(f"line {n}: {key} is a match key, not {op}")
                if (attr is None) != (key not in ("ATTR", "ATTRS")):
                    raise ValueError(f"line {n}: {key} and {{attr}} disagree")
            elif key in ASSIGN_KEYS:
                if op not in ("=", "+=") or attr is not None:
                    raise ValueError(f"line {n}: {key} takes = or +=, got {op}")
            else:
                raise ValueError(f"line {n}: key {key} is not one this matcher knows")
            keys.append((key, attr, op, value))
        rules.append(keys)
    return rules


def parse_walk(text):
    """(expectation, [device, parent, grandparent, ...]). Every block's keys
    are stored under the device-key names (KERNEL, SUBSYSTEM, DRIVER,
    ATTR{x}): a parent's KERNELS== is its KERNEL."""
    first = text.splitlines()[0]
    if not first.startswith("# expect: "):
        raise ValueError("first line must be '# expect: ...'")
    expect = first[len("# expect: "):].strip()
    chain = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("looking at"):
            chain.append({})
            continue
        m = re.match(r'^([A-Z]+?)S?(\{[^}]*\})?=="(.*)"$', s)
        if m and chain:
            chain[-1][m[1] + (m[2] or "")] = m[3]
    if not chain:
        raise ValueError("no 'looking at device' block")
    return expect, chain


def glob(pattern, value):
    return any(fnmatch.fnmatchcase(value, p) for p in pattern.split("|"))


def key_matches(dev, key, attr, op, value):
    """One match key against one device of the chain (KERNELS as KERNEL)."""
    base = key[:-1] if key in PARENT_KEYS else key
    have = dev.get(base + (f"{{{attr}}}" if attr is not None else ""))
    hit = have is not None and glob(value, have)
    return hit if op == "==" else not hit


def apply(rule, chain):
    """The assignments `rule` makes for the walk's device, or None."""
    own = [k for k in rule if k[0] in DEVICE_KEYS]
    up = [k for k in rule if k[0] in PARENT_KEYS]
    if not all(key_matches(chain[0], *k) for k in own):
        return None
    # udev tries the device itself, then each parent; one of them must
    # match every parent key.
    if up and not any(all(key_matches(d, *k) for k in up) for d in chain):
        return None
    return [f"{key}{op}{value}" for key, _, op, value in rule if key in ASSIGN_KEYS]


def run(rules, walk):
    made = []
    for r in rules:
        made += apply(r, walk) or []
    return " ".join(made) if made else "none"


def main():
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else TOP / "packaging/common/70-ane.rules"
    text = path.read_text()
    passed = failed = 0

    def report(ok, what):
        nonlocal passed, failed
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if ok:
            passed += 1
        else:
            failed += 1

    try:
        rules = parse_rules(text)
        report(len(rules) == 1, f"{path.name}: syntax, {len(rules)} rule(s)")
    except ValueError as e:
        report(False, f"{path.name}: {e}")
        rules = []
    walks = sorted(WALKS.glob("*.walk"))
    for w in walks:
        expect, chain = parse_walk(w.read_text())
        got = run(rules, chain)
        report(got == expect, f"{w.name}: {got}" + ("" if got == expect else f" (expected {expect})"))
    # The test can fail: narrowed to DRIVERS=="ane", the rule no longer
    # gives the ane-fw (M2 Pro/Max) node anything.
    narrowed = parse_rules(re.sub(r'DRIVERS=="[^"]*"', 'DRIVERS=="ane"', text))
    _, fw = parse_walk((WALKS / "t6021-ane-fw.walk").read_text())
    report(run(narrowed, fw) == "none", 'mutant DRIVERS=="ane" misses the ane-fw node')
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not walks else 0


if __name__ == "__main__":
    sys.exit(main())
