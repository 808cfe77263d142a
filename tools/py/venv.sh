#!/usr/bin/env bash
# Inside the chroot: create (or reuse) the venv of the Python build and test
# tools (tools/py/requirements.txt, pinned with hashes) and print its path.
#
# The venv lives under /cache, keyed by that file and the Python version, so
# tools/py/check.sh (wheel + host pytest) and tools/qemu/build-guest.sh (the
# guest's wheel, numpy and pytest) share one.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv_key=$( { echo "py $pyver"; cat "$top/tools/py/requirements.txt"; } | sha256sum | cut -c1-16)
venv=/cache/py-venv-$venv_key
if [ -f "$venv/.ane-ready" ]; then
	echo "[ane-cache] hit ${venv#/cache/}" >&2
else
	echo "[ane-cache] build ${venv#/cache/}" >&2
	exec {lockfd}>/cache/.lock-py-venv
	flock "$lockfd"
	if [ ! -f "$venv/.ane-ready" ]; then
		rm -rf "$venv"
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes \
			-r "$top/tools/py/requirements.txt" >&2
		touch "$venv/.ane-ready"
	fi
fi
echo "$venv"
