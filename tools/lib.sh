# shellcheck shell=bash
# Step bookkeeping for tools/check.sh and tools/demo.sh. Sourced.

source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"

source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"

# in_chroot COMMAND...: tools/env/run.sh, shorter.
in_chroot() { "$ANE_TOP/tools/env/run.sh" "$@"; }

# Guest build and run directories (inside the chroot, below /cache).
guest_dir() { echo "/cache/guest/$1"; }
