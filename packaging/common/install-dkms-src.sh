#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# Install the DKMS source tree of the ane module: what `dkms build` needs and
# nothing else. Used by the Arch PKGBUILD, the RPM spec and tools/dkms/check.sh,
# so all three ship the same tree.
#
#   install-dkms-src.sh SRCDIR DESTDIR VERSION
#
# writes DESTDIR/usr/src/ane-VERSION/{dkms.conf,Makefile,Kbuild,LICENSE,
# drivers/accel/ane/**,include/uapi/drm/ane_accel.h,packaging/dkms/pre-build.sh,
# VERSION} with PACKAGE_VERSION and VERSION set to VERSION.
set -eu
src=$1 destdir=$2 version=$3
dest=$destdir/usr/src/ane-$version

[ -f "$src/dkms.conf" ] && [ -f "$src/Kbuild" ] || { echo "install-dkms-src: $src is not the ane source tree" >&2; exit 1; }
install -d "$dest"
for f in Makefile Kbuild LICENSE include/uapi/drm/ane_accel.h; do
	install -D -m 0644 "$src/$f" "$dest/$f"
done
install -D -m 0755 "$src/packaging/dkms/pre-build.sh" "$dest/packaging/dkms/pre-build.sh"
(cd "$src" && find drivers/accel/ane -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' \) | sort) |
	while read -r f; do install -D -m 0644 "$src/$f" "$dest/$f"; done
sed "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$version\"/" "$src/dkms.conf" >"$dest/dkms.conf"
chmod 0644 "$dest/dkms.conf"
# The module's MODULE_VERSION (Kbuild reads it).
echo "$version" >"$dest/VERSION"
chmod 0644 "$dest/VERSION"
