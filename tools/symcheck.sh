#!/usr/bin/env bash
# Inside the chroot: check that a built ane.ko needs nothing from the kernel
# that the real target kernel does not export.
#
#   symcheck.sh ANE.KO MODULE.SYMVERS [COMPAT.MD]
#
# With COMPAT.MD (docs/kernel-compat.md), every C symbol must also be named
# there (in backquotes), so the page that gives each symbol's 7.1 evidence
# cannot fall behind the code.
#
# MODULE.SYMVERS is the export list of the target (linux-asahi
# 7.1.13-3-1-ARCH, ../shared/targets).
# - C symbols (and the rust_helper_* wrappers of inline C) must each be
#   exported there, by exact name: a missing one is a load failure on the
#   target that no build against another kernel would show (e.g.
#   drm_compat_ioctl, absent without CONFIG_COMPAT). A symbol exported only
#   by a module (not vmlinux) is named with it.
# - Rust symbols (v0-mangled `_R…`) carry a per-build crate hash, so they
#   are listed by demangled path with the hash removed, each marked with
#   whether the target exports that path too. Which generic instances and
#   small functions a module links to rather than inlines depends on the
#   rustc and kernel version it is built against (the kernel exports every
#   global symbol of its crates), so a path the target does not export is
#   not by itself a failure: a kernel-crate item missing in 7.1 is a compile
#   error against 7.1 metadata, and docs/kernel-compat.md lists every item
#   the driver uses with its 7.1 evidence. The Rust paths must come from
#   the kernel's own crates (core, kernel, bindings, pin_init, ffi,
#   compiler_builtins) and nowhere else (no alloc, no std).
set -euo pipefail
ko=${1:?usage: symcheck.sh ANE.KO MODULE.SYMVERS [COMPAT.MD]}
symvers=${2:?usage: symcheck.sh ANE.KO MODULE.SYMVERS [COMPAT.MD]}
doc=${3:-}
[ -f "$ko" ] || { echo "symcheck: no $ko" >&2; exit 2; }
[ -f "$symvers" ] || { echo "symcheck: no $symvers (../shared/targets)" >&2; exit 2; }

python3 - "$ko" "$symvers" "$doc" <<'PY'
import re, subprocess, sys

ko, symvers, doc = sys.argv[1], sys.argv[2], sys.argv[3]

def demangle(names):
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n",
                         capture_output=True, text=True, check=True).stdout
    # Rust v0 demangling shows crate hashes as `crate[0123abcd]`.
    return [re.sub(r"\[[0-9a-f]+\]", "", l) for l in out.splitlines()]

exports = {}
for line in open(symvers):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 4:
        exports[f[1]] = (f[2], f[3])

undef = []
out = subprocess.run(["readelf", "-sW", ko], capture_output=True, text=True, check=True).stdout
for line in out.splitlines():
    f = line.split()
    # Num: Value Size Type Bind Vis Ndx Name
    if len(f) >= 8 and f[6] == "UND" and f[7]:
        undef.append(f[7])
undef = sorted(set(undef))

c_syms = [s for s in undef if not s.startswith("_R")]
r_syms = [s for s in undef if s.startswith("_R")]

rust_exports = {}
names = [n for n in exports if n.startswith("_R")]
for n, d in zip(names, demangle(names)):
    rust_exports.setdefault(d, n)

# Symbols a module references only because the kernel it was built
# against has lockdep, debug mutexes and the sleep-in-atomic checks (the
# test kernels enable PROVE_LOCKING and DEBUG_ATOMIC_SLEEP, the target does
# not): INIT_WORK, mutex_init, mutex_lock and mutex_destroy expand to the
# first four there, cond_resched to __might_resched, spin_lock_init of a
# lock that is not static (DEBUG_SPINLOCK) to __raw_spin_lock_init. Each maps to what the
# same code calls in a kernel without them, which the target must export
# (None: nothing, an empty inline).
LOCKDEP_ONLY = {
    "lockdep_init_map_type": None,
    "mutex_init_lockdep": "mutex_init_generic",
    "mutex_lock_nested": "mutex_lock",
    "mutex_destroy": None,
    "__might_resched": None,
    "__raw_spin_lock_init": None,
}
lockdep_only = [s for s in c_syms if s in LOCKDEP_ONLY and s not in exports]
missing = [LOCKDEP_ONLY[s] for s in lockdep_only
           if LOCKDEP_ONLY[s] and LOCKDEP_ONLY[s] not in exports]
from_modules = []
for s in c_syms:
    if s in lockdep_only:
        continue
    if s not in exports:
        missing.append(s)
    elif exports[s][0] != "vmlinux":
        from_modules.append(f"{s} ({exports[s][0]})")
rust_needed = list(zip(r_syms, demangle(r_syms)))
allowed = ("core", "kernel", "bindings", "pin_init", "ffi", "compiler_builtins")
foreign = []
for s, d in rust_needed:
    # The crates a v0 symbol names: each `C<len><name>` path root (with an
    # optional `s<hash>_` disambiguator).
    crates = set()
    for m in re.finditer(r"C(?:s[0-9A-Za-z]*_)?([0-9]+)", s):
        n = int(m.group(1))
        crates.add(s[m.end():m.end() + n])
    if not crates or not crates <= set(allowed):
        foreign.append(f"{d}  [{s}]")

print(f"symcheck: {ko}: {len(c_syms)} C symbols, {len(r_syms)} Rust symbols undefined")
print(f"symcheck: target exports {len(exports)} symbols ({len(rust_exports)} Rust paths)")
shared = sum(1 for _, d in rust_needed if d in rust_exports)
print(f"symcheck: Rust symbols the module links to (by path; '=' the target exports it too): "
      f"{shared} of {len(rust_needed)} also exported by the target")
for _, d in rust_needed:
    print(f"  {'=' if d in rust_exports else ' '} {d}")
for m in from_modules:
    print(f"symcheck: provided by a module, not vmlinux: {m}")
for m in lockdep_only:
    instead = f", {LOCKDEP_ONLY[m]} there" if LOCKDEP_ONLY[m] else ""
    print(f"symcheck: debug-only (absent from a kernel without lockdep and atomic-sleep checks, like the target{instead}): {m}")
problems = []
if doc:
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", open(doc).read()))
    problems.append((f"C symbols are not listed in {doc}", [s for s in c_syms if s not in named]))
problems.append(("C symbols are not exported by the target kernel", missing))
problems.append(("Rust symbols from crates the kernel does not provide", foreign))
fail = False
for what, items in problems:
    if items:
        print(f"symcheck: {len(items)} {what}:", file=sys.stderr)
        for m in items:
            print(f"  {m}", file=sys.stderr)
        fail = True
if fail:
    sys.exit(1)
print(f"symcheck: ok, all {len(c_syms)} C symbols are exported by the target; "
      f"the Rust symbols come from the kernel's own crates")
PY
