#!/bin/bash
# Prepares the test guest: unpacks a Debian kernel package (never
# installed, only unpacked) into the cache and builds an initramfs that
# mounts this machine's root over 9p. Prints the shell variables
# run-guest.sh needs. Work already done is skipped.
#
# E2E_KERNEL picks the kernel: 6.1 (the default, bookworm's) or 6.12
# (bookworm-backports', which test/install-deps.sh adds to apt's sources).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${NVMEOF_TEST_CACHE:-/var/cache/nvmeof-tgt-test}
case ${E2E_KERNEL:=6.1} in
6.1) suite=() ;;
6.12) suite=(-t bookworm-backports) ;;
*) echo "prepare: E2E_KERNEL=$E2E_KERNEL: want 6.1 or 6.12" >&2; exit 1 ;;
esac

# Resolve the ABI from the meta package of the suite rather than pinning
# it: security updates and new backports move it.
resolve() {
	apt-cache "${suite[@]}" depends linux-image-amd64 2>/dev/null |
		awk -v v="$E2E_KERNEL" '$1 == "Depends:" && index($2, "linux-image-" v ".") == 1 && p == "" {p = $2} END {print p}'
}
# download PKG DIR: apt-get download, refreshing stale package lists once
# (a security update removes the old ABI's package from the mirror).
download() {
	(cd "$2" && apt-get download "${suite[@]}" "$1" >&2) && return 0
	echo "prepare: download failed; refreshing the package lists" >&2
	apt-get update -qq >&2
	(cd "$2" && apt-get download "${suite[@]}" "$1" >&2)
}
pkg=$(resolve)
if [ -z "$pkg" ]; then
	# Fresh machines and images often come without package lists.
	echo "prepare: linux-image-amd64 ($E2E_KERNEL) unknown; running apt-get update" >&2
	apt-get update -qq >&2 || true
	pkg=$(resolve)
fi
if [ -z "$pkg" ]; then
	echo "prepare: cannot resolve the $E2E_KERNEL guest kernel: 'apt-cache ${suite[*]} depends linux-image-amd64' names no linux-image-$E2E_KERNEL.*; check the Debian apt sources (test/install-deps.sh adds bookworm-backports)" >&2
	exit 1
fi
kver=${pkg#linux-image-}
kdir=$cache/$kver
if [ ! -f "$kdir/.unpacked" ]; then
	echo "prepare: fetching $pkg into $kdir" >&2
	rm -rf "$kdir"
	mkdir -p "$kdir"
	tmp=$(mktemp -d)
	download "$pkg" "$tmp"
	dpkg-deb -x "$tmp"/*.deb "$kdir/root"
	rm -rf "$tmp"
	depmod -b "$kdir/root" "$kver"
	touch "$kdir/.unpacked"
fi
modroot=$kdir/root/lib/modules/$kver

# Rebuild the initramfs when its init script or this script changes.
sum=$(cat "$here/init" "$0" | sha256sum | cut -c1-16)
initrd=$kdir/initrd-$sum.gz
if [ ! -f "$initrd" ]; then
	echo "prepare: building initramfs" >&2
	tmp=$(mktemp -d)
	mkdir -p "$tmp/bin" "$tmp/mods"
	cp /bin/busybox "$tmp/bin/busybox"
	cp "$here/init" "$tmp/init"
	chmod 755 "$tmp/init"
	i=0
	for m in virtio_pci virtio_net 9pnet_virtio 9p overlay; do
		modprobe -d "$kdir/root" -S "$kver" --show-depends "$m"
	done | awk '$1 == "insmod" && !seen[$2]++ {print $2}' | while read -r ko; do
		i=$((i + 1))
		# busybox insmod wants plain .ko files; newer kernels compress them.
		dst=$tmp/mods/$(printf %02d "$i")-$(basename "$ko")
		case $ko in
		*.ko.xz) xz -dc "$ko" >"${dst%.xz}" ;;
		*.ko.zst) zstd -qdc "$ko" >"${dst%.zst}" ;;
		*) cp "$ko" "$dst" ;;
		esac
	done
	(cd "$tmp" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.$$"
	mv "$initrd.$$" "$initrd"
	rm -rf "$tmp"
fi
echo "KVER=$kver"
echo "KERNEL=$kdir/root/boot/vmlinuz-$kver"
echo "MODULES=$modroot"
echo "INITRD=$initrd"
