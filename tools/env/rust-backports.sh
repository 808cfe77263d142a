# Runs inside the new chroot (mkchroot.sh's customize hook, `sh -e`).
#
# Unpacks trixie-backports' rustc (with its std and rust-src) under
# /opt/rust-backports, beside trixie's own rustc 1.85: Debian cannot install
# two rustc versions as packages. One test kernel and its modules are built
# with it (tools/kernel/build.sh), so the two kernels bracket the rustc
# Asahi users' kernels are built with (1.93.1). /opt/rust-backports/bin
# holds `rustc` (and `rustdoc`) wrappers that find the unpacked libraries;
# putting that directory first in PATH selects the toolchain. The LLVM it
# links against (libllvmNN) is a normal package of the chroot.
cd /tmp
v=$(apt-cache madison rustc | awk '$0 ~ /trixie-backports/ { print $3; exit }')
[ -n "$v" ] || { echo "rust-backports: no rustc in trixie-backports" >&2; exit 1; }
series=$(echo "$v" | sed -n 's/^\([0-9]*\.[0-9]*\)\..*/\1/p')
apt-get download "rustc=$v" "libstd-rust-$series=$v" "libstd-rust-dev=$v" "rust-src=$v"
dest=/opt/rust-backports
rm -rf "$dest"
mkdir -p "$dest/bin"
for deb in ./*.deb; do
	dpkg-deb -x "$deb" "$dest"
	dpkg-deb --show --showformat='rust-backports:${Package}\t${Version}\n' "$deb" >>"$dest/manifest"
done
rm -f ./*.deb
# The libraries the unpacked rustc needs: its own directories only.
libs=$(find "$dest/usr/lib" -name 'librustc_driver-*.so' -printf '%h\n' | sort -u | paste -sd:)
for tool in rustc rustdoc; do
	[ -x "$dest/usr/bin/$tool" ] || continue
	cat >"$dest/bin/$tool" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec $dest/usr/bin/$tool "\$@"
WRAP
	chmod +x "$dest/bin/$tool"
done
"$dest/bin/rustc" --version
"$dest/bin/rustc" --print sysroot
test -d "$("$dest/bin/rustc" --print sysroot)/lib/rustlib/src/rust/library/core"
