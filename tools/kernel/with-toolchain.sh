#!/bin/sh
# Inside the chroot: run COMMAND with the Rust toolchain that built the
# kernel in KDIR first in PATH (tools/kernel/build.sh records it in
# KDIR/.ane-toolchain). rustc accepts crate metadata only from the very
# rustc that wrote it, so every module build against a test kernel goes
# through here.
#
#   with-toolchain.sh KDIR COMMAND...
set -eu
kdir=${1:?usage: with-toolchain.sh KDIR COMMAND...}
shift
toolpath=
[ ! -f "$kdir/.ane-toolchain" ] || toolpath=$(cat "$kdir/.ane-toolchain")
[ -z "$toolpath" ] || PATH="$toolpath:$PATH"
export PATH
exec "$@"
