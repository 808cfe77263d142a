#!/usr/bin/env bash
# Inside the chroot: the cache key of the x86_64 ane_rs wheel built from the
# tree at ROOT (a checkout, or a guest's copy of its userspace/ and
# drivers/accel/ane/hw/): a hash of every source file the wheel is built
# from, the extension's lock file, and the Rust and Python toolchains.
# tools/py/check.sh stores the wheel it built under /cache/wheels/KEY, and
# tools/qemu/guest-python.sh takes it from there instead of building the
# same wheel again.
#
#   wheel-key.sh ROOT
set -euo pipefail
root=$1
{
	rustc --version
	python3 --version
	cd "$root"
	find userspace/ane-py userspace/ane userspace/ane-hw drivers/accel/ane/hw \
		-path '*/target' -prune -o -path '*/__pycache__' -prune -o -type f -print |
		LC_ALL=C sort | xargs sha256sum
} | sha256sum | cut -c1-16
