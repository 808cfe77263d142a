#!/bin/sh
# Inside the chroot: run COMMAND with the compilers that built the kernel in
# KDIR. rustc accepts crate metadata only from the very rustc that wrote it,
# and a module is compiled by the kernel's C compiler, so every module build
# against a test kernel goes through here:
# - the Rust toolchain tools/kernel/build.sh recorded in KDIR/.ane-toolchain
#   comes first in PATH;
# - an arm64 kernel built on another machine architecture gets its GCC
#   cross compiler (CROSS_COMPILE=aarch64-linux-gnu-, unless already set);
# - a clang-built kernel gets LLVM=1;
# - a tree prepared only for modules (tools/kernel/build.sh ... prep: no
#   vmlinux, an empty Module.symvers) gets KBUILD_MODPOST_WARN=1, so that
#   modpost lists the kernel symbols it cannot resolve as warnings.
#
#   with-toolchain.sh KDIR COMMAND...
set -eu
kdir=${1:?usage: with-toolchain.sh KDIR COMMAND...}
shift
toolpath=
[ ! -f "$kdir/.ane-toolchain" ] || toolpath=$(cat "$kdir/.ane-toolchain")
[ -z "$toolpath" ] || PATH="$toolpath:$PATH"
export PATH
# A clang-built kernel (the sanitizer flavour) builds its modules with
# clang too.
if grep -qx 'CONFIG_CC_IS_CLANG=y' "$kdir/include/config/auto.conf" 2>/dev/null; then
	LLVM=1
	export LLVM
fi
if [ -z "${CROSS_COMPILE:-}" ] && [ "$(uname -m)" != aarch64 ] &&
	grep -qx 'CONFIG_ARM64=y' "$kdir/include/config/auto.conf" 2>/dev/null; then
	CROSS_COMPILE=aarch64-linux-gnu-
	export CROSS_COMPILE
fi
if [ -f "$kdir/.ane-prepared-only" ]; then
	KBUILD_MODPOST_WARN=1
	export KBUILD_MODPOST_WARN
fi
exec "$@"
