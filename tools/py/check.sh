#!/usr/bin/env bash
# The Python package (userspace/ane-py, distribution ane-rs, module ane_rs):
# builds the abi3 wheel with maturin using the chroot's rustc 1.85 (proving
# the minimum version), lints the extension crate with clippy, installs the
# wheel into a scratch directory and runs the pytest suite against it on the
# host engine model, with the fixtures of ../shared (read-only at /shared).
# onnxruntime (in the same requirements) is required there: the compiler's
# zoo is held to it (tests/test_onnxruntime.py, ANE_RS_REQUIRE_ORT=1).
#
# The tools (tools/py/requirements.txt, pinned with hashes) live in a venv
# under /cache keyed by that file and the Python version (tools/py/venv.sh,
# shared with the QEMU guest's build); the cargo build in
# /cache/cargo-target/ane-py, reused between runs.
set -euo pipefail

if [ "${ANE_IN_CHROOT:-}" != 1 ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	exec "$top/tools/env/run.sh" /usr/bin/env ANE_IN_CHROOT=1 ANE_PY_ARM64="${ANE_PY_ARM64:-1}" tools/py/check.sh "$@"
fi

cd /src
venv=$(tools/py/venv.sh) || { echo "python venv setup failed" >&2; exit 1; }
export PATH=$venv/bin:$PATH
export CARGO_TARGET_DIR=/cache/cargo-target/ane-py

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd userspace/ane-py && cargo clippy --locked -- -D warnings)
(cd userspace/ane-py && maturin build --release --locked --interpreter "$venv/bin/python" -o "$out/dist")
wheel=$(echo "$out"/dist/ane_rs-*-abi3-*.whl)
[ -f "$wheel" ] || { echo "no abi3 wheel in $out/dist" >&2; exit 1; }
echo "wheel: $(basename "$wheel")"
# The x86_64 guest's initramfs carries the same wheel: keep it under its
# source key for tools/qemu/guest-python.sh.
key=$(tools/py/wheel-key.sh /src)
mkdir -p "/cache/wheels/$key.tmp"
cp "$wheel" "/cache/wheels/$key.tmp/"
rm -rf "/cache/wheels/$key"
mv "/cache/wheels/$key.tmp" "/cache/wheels/$key"
echo "[ane-cache] stored wheels/$key"
# The installed wheel, not the source tree, is what the tests import.
pip install -q --disable-pip-version-check --no-deps --target "$out/site" "$wheel"
export PYTHONPATH=$out/site
# (Not `tee /dev/stderr`: opening /dev/stderr truncates a log file that
# stderr is redirected to.)
imported=$(python3 -c 'import ane_rs, sys; print("ane_rs", ane_rs.__version__, "from", ane_rs.__file__)')
echo "$imported"
grep -q "from $out/site/" <<<"$imported" || { echo "ane_rs not imported from the wheel" >&2; exit 1; }
ANE_RS_REQUIRE_ORT=1 ANE_SHARED=${ANE_SHARED:-/shared} python3 -m pytest -q -rs -p no:cacheprovider userspace/ane-py/tests

# The wheel Apple Silicon users install: aarch64, cross-built as the guest's
# test binaries are (tools/qemu/build-guest.sh). Checked to hold an aarch64
# extension; running it needs an arm64 interpreter (the QEMU guest).
# The aarch64 wheel (built and checked, not run: no arm64 interpreter can
# be installed beside the chroot's own): make check-full only.
if [ "${ANE_PY_ARM64:-1}" = 0 ]; then
	echo "aarch64 wheel: make check-full only"
	exit 0
fi
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
(cd userspace/ane-py && maturin build --release --locked --target aarch64-unknown-linux-gnu -o "$out/dist-arm64")
python3 - "$out"/dist-arm64/ane_rs-*-abi3-*aarch64.whl <<'PY'
import sys, zipfile
wheel = sys.argv[1]
z = zipfile.ZipFile(wheel)
so = [n for n in z.namelist() if n.startswith("ane_rs/_native") and n.endswith(".so")]
assert len(so) == 1, f"{wheel}: extension modules {so}"
head = z.read(so[0])[:20]
machine = int.from_bytes(head[18:20], "little")
assert head[:4] == b"\x7fELF" and machine == 183, f"{so[0]}: e_machine {machine}, not aarch64 (183)"
print(f"wheel: {wheel.rsplit('/', 1)[-1]} ({so[0]}: aarch64 ELF)")
PY
