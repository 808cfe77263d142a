#!/bin/bash
# Inside the chroot: put Python into the x86_64 test initramfs at ROOT, for
# the in-guest pytest run of the ane_rs package (tools/qemu/tests/python.sh)
# and the demo's Python example.
#
#   guest-python.sh SRC ROOT TARGET
#
# SRC is the userspace source copy (SRC/userspace/ane-py is built), TARGET the
# cargo target directory of the wheel build. ROOT gets:
# - the chroot's python3 (trixie) with its standard library, pruned of what
#   an unattended test run never imports, and the shared libraries the
#   interpreter, its extension modules and numpy link against (from ldd);
# - numpy, pytest and pytest's dependencies from the venv of tools/py/venv.sh
#   (the pinned, hashed wheels the host pytest run uses), without pip,
#   maturin, numpy's own tests and type stubs, and without onnxruntime and
#   its protobuf and flatbuffers (~80 MB; the guest compares with the
#   onnxruntime outputs stored beside the zoo, data/NAME.ort.npy);
# - the ane_rs abi3 wheel for x86_64, built here by maturin with the chroot's
#   rustc (as tools/py/check.sh builds it), installed as pip installs it;
# - the pytest suite, userspace/ane-py/tests, at /ane-py/tests.
set -euo pipefail
src=$1 root=$2 target=$3

venv=$(/src/tools/py/venv.sh)
py=python$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
site=$root/usr/lib/python3/dist-packages

# The wheel: a shared object loaded by the interpreter, so not with the
# static C runtime of the guest's test binaries.
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
# The wheel tools/py/check.sh built from the same sources, when there is
# one (tools/py/wheel-key.sh); otherwise built here.
key=$(/src/tools/py/wheel-key.sh "$src")
if compgen -G "/cache/wheels/$key/ane_rs-*-abi3-*x86_64.whl" >/dev/null; then
	echo "[ane-cache] hit wheels/$key" >&2
	cp /cache/wheels/"$key"/ane_rs-*-abi3-*x86_64.whl "$wheels/"
else
	echo "[ane-cache] build the x86_64 wheel (no wheels/$key)" >&2
	(cd "$src/userspace/ane-py" && env -u RUSTFLAGS CARGO_TARGET_DIR="$target" \
		"$venv/bin/maturin" build --release --locked --interpreter "$venv/bin/python" -o "$wheels")
fi
wheel=$(echo "$wheels"/ane_rs-*-abi3-*x86_64.whl)
[ -f "$wheel" ] || { echo "guest-python: no x86_64 abi3 wheel in $wheels" >&2; exit 1; }

# The interpreter and its standard library. Left out: the test package,
# docs, GUI, packaging and REPL modules, and the extension modules that need
# libraries nothing here uses (OpenSSL: hashlib falls back to the built-in
# hashes; sqlite, gdbm, curses, readline).
mkdir -p "$root/usr/lib/$py"
install -D -m 755 "/usr/bin/$py" "$root/usr/bin/$py"
ln -sf "$py" "$root/usr/bin/python3"
rsync -a \
	--exclude=/test/ --exclude=/pydoc_data/ --exclude=/ensurepip/ --exclude=/venv/ \
	--exclude=/idlelib/ --exclude=/tkinter/ --exclude=/turtledemo/ --exclude=/turtle.py \
	--exclude=/lib2to3/ --exclude=/_pyrepl/ --exclude=/sqlite3/ --exclude=/curses/ \
	--exclude=/dbm/ --exclude=/sitecustomize.py \
	--exclude='/lib-dynload/_test*' --exclude='/lib-dynload/_xxtestfuzz*' \
	--exclude='/lib-dynload/xx*' --exclude='/lib-dynload/_ctypes_test*' \
	--exclude='/lib-dynload/_curses*' --exclude='/lib-dynload/_dbm*' \
	--exclude='/lib-dynload/_gdbm*' --exclude='/lib-dynload/_sqlite3*' \
	--exclude='/lib-dynload/readline*' --exclude='/lib-dynload/_ssl*' \
	--exclude='/lib-dynload/_hashlib*' \
	"/usr/lib/$py/" "$root/usr/lib/$py/"

# numpy, pytest (+ pluggy, iniconfig, packaging, and pygments, which pytest
# 9 imports unconditionally) from the venv, then the ane_rs wheel.
mkdir -p "$site"
rsync -a \
	--exclude=/pip/ --exclude='/pip-*' --exclude=/maturin/ --exclude='/maturin-*' \
	--exclude=/onnxruntime/ --exclude='/onnxruntime-*' --exclude=/google/ --exclude='/protobuf-*' \
	--exclude=/flatbuffers/ --exclude='/flatbuffers-*' \
	--exclude='/_distutils_hack/' --exclude='/setuptools*' --exclude=/distutils-precedence.pth \
	--exclude='/numpy/**/tests/' --exclude='/numpy/f2py/' --exclude='/numpy/_pyinstaller/' \
	--exclude='/numpy/_core/include/' --exclude='/numpy/_core/lib/' --exclude='*.pyi' \
	"$venv/lib/$py/site-packages/" "$site/"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$site" "$wheel"

# The shared libraries of every ELF file above, where ldd finds them in the
# chroot (those numpy carries in numpy.libs are already in place).
find "$root/usr" -type f \( -name '*.so' -o -name '*.so.*' -o -path "*/bin/$py" \) |
	xargs ldd 2>/dev/null |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' |
	grep -v "^$root/" | sort -u |
	while read -r lib; do
		install -D -m 755 "$(readlink -f "$lib")" "$root$lib"
	done

# The pytest suite (the fixtures are under /fixtures, see build-guest.sh).
mkdir -p "$root/ane-py"
rsync -a --exclude=__pycache__ "$src/userspace/ane-py/tests" "$root/ane-py/"

# It must start in the initramfs' root, from nothing but what is there.
chroot "$root" /usr/bin/python3 -c 'import numpy, pytest, ane_rs; print("guest python:", numpy.__version__, pytest.__version__, ane_rs.__version__)'
if chroot "$root" /usr/bin/python3 -c 'import onnxruntime' 2>/dev/null; then
	echo "guest-python: onnxruntime reached the initramfs (host only)" >&2
	exit 1
fi
